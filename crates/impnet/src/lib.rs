//! imp: a user-space TCP/IP stack. This crate is what applications depend on.
//!
//! A [`Runtime`] drives one [`impnet_core::Stack`] over one or more devices (a Linux
//! [`Tap`](impnet_phy::Tap) or [`Tun`](impnet_phy::Tun) (`Runtime::add_tun`: an IP-level
//! interface, no Ethernet), an in-memory [`PipeEnd`](impnet_phy::PipeEnd), either wrapped in
//! [`Impair`](impnet_phy::Impair) or [`Pcap`](impnet_phy::Pcap)) on a background thread. The
//! sockets are shaped like `std::net`: [`TcpListener`], [`TcpStream`] (`Read`/`Write`,
//! timeouts, `shutdown`, `set_nodelay`), [`UdpSocket`], plus [`IcmpSocket`] for echo.
//!
//! ```no_run
//! use std::io::{Read, Write};
//! use impnet::{Runtime, TcpListener};
//! use impnet::core::StackConfig;
//! use impnet::phy::{Tap, TapConfig};
//! use impnet::wire::{ethernet, ipv4::Cidr};
//!
//! let rt = Runtime::new(StackConfig::default())?;
//! // Large segments and checksums left to the kernel, if it agrees (else plain frames).
//! let tap = Tap::open_with(&TapConfig::new("imp0").offloads(true).partial_checksums(true))?;
//! let mac = ethernet::Address([0x02, 0, 0, 0, 0, 1]);
//! let eth0 = rt.add_tap(tap, mac);
//! rt.add_address(eth0, Cidr { address: std::net::Ipv4Addr::new(10, 0, 0, 2), prefix_len: 24 });
//! let listener = TcpListener::bind(&rt, "10.0.0.2:7")?;
//! let (mut stream, _peer) = listener.accept()?;
//! let mut buf = [0; 4096];
//! let n = stream.read(&mut buf)?;
//! stream.write_all(&buf[..n])?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Without copies
//!
//! `TcpStream::send_owned(Vec<u8>)` hands a buffer to the stack, which keeps it in the
//! send buffer instead of copying it in and frees it once acknowledged (all of it or
//! nothing; a refused buffer comes back in [`OwnedWriteError`]);
//! `TcpStream::recv_with(|data| used)` lends the receive ring to a closure. Both mix
//! with `write` and `read` in one stream, in the blocking and the tokio sockets.
//! `imp-bench --only W9` measures what they buy.
//!
//! # Errors
//!
//! Every call returns the `io::Error` a `std::net` program on Linux gets in the same case
//! (checked against the kernel, and tested over two stacks in `tests/dead_sockets.rs`),
//! the core's message as its text:
//!
//! | case | core error | `io::ErrorKind` | Linux |
//! |---|---|---|---|
//! | nothing to read or no room yet (non-blocking) | `WouldBlock` | `WouldBlock` | `EAGAIN` |
//! | read or write timeout set by `set_*_timeout` ran out | | `TimedOut` | `EAGAIN` (std allows either) |
//! | connect: nothing listens (RST, ICMP port unreachable) | `ConnectionRefused` | `ConnectionRefused` | `ECONNREFUSED` |
//! | the peer reset the connection: the first read or write | `ConnectionReset` | `ConnectionReset` | `ECONNRESET` |
//! | ... then every read | (same) | `Ok(0)`, end of stream | `0` |
//! | ... then every write | (same) | `BrokenPipe` | `EPIPE` |
//! | retransmissions or the user timeout gave up: the first read or write | `TimedOut` | `TimedOut` | `ETIMEDOUT` |
//! | ... then reads / writes | (same) | `Ok(0)` / `BrokenPipe` | `0` / `EPIPE` |
//! | ICMP net unreachable (opening, or the last soft error at a timeout) | `NetUnreachable` | `NetworkUnreachable` | `ENETUNREACH` |
//! | ICMP host unreachable, ARP gave up | `HostUnreachable` | `HostUnreachable` | `EHOSTUNREACH` |
//! | ICMP administratively prohibited | `Prohibited` | `HostUnreachable` | `EHOSTUNREACH` |
//! | write after our `shutdown(Write)`, or after a clean close | `Closing` | `BrokenPipe` | `EPIPE` |
//! | read after the peer's FIN (end of stream), again and again | | `Ok(0)` | `0` |
//! | `shutdown` or `peer_addr` on a connection that has ended | `InvalidState` | `NotConnected` | `ENOTCONN` |
//! | a call after `Runtime::shutdown` (the handle is gone) | `InvalidHandle` | `NotConnected` | (`EBADF`) |
//! | listen or connect on an address not the stack's; connect to port 0 | `AddrNotAvailable` | `AddrNotAvailable` | `EADDRNOTAVAIL` |
//! | connect to a broadcast or multicast address, or with no route | `NetUnreachable` | `NetworkUnreachable` | `ENETUNREACH` |
//! | listen on port 0 (imp picks no port for a listener) | | `InvalidInput` | (Linux picks one) |
//! | address and port taken | `AddrInUse` | `AddrInUse` | `EADDRINUSE` |
//! | no ephemeral port left | `NoPortsAvailable` | `AddrNotAvailable` | `EADDRNOTAVAIL` |
//! | `TcpConfig::max_connections` connections held | `TooManyConnections` | `Other` | `EMFILE`, `ENFILE` (no socket left) |
//! | `send_owned` of a buffer larger than the send buffer | `BufferTooLarge` | `InvalidInput` | (no such call) |
//!
//! `take_error` returns the connection's error if no read or write has reported it
//! yet, and reports it only once, as `SO_ERROR` does; `flush`, `set_nodelay`,
//! `local_addr` and the timeouts succeed on a dead connection, as on Linux. One
//! difference: Linux reports `EPIPE` rather than `ECONNRESET` for a reset that comes
//! after the peer's FIN; imp reports `ConnectionReset` there too. (The core's own
//! [`TcpError`](impnet_core::tcp::TcpError)s repeat an ending error to every call;
//! the sockets here report it once.)
#![warn(missing_docs)]

pub use impnet_core as core;
pub use impnet_phy as phy;
pub use impnet_wire as wire;

mod dns;
mod error;
mod icmp;
mod raw;
pub(crate) mod runtime;
pub mod shard;
mod sockopt;
mod tcp;
mod udp;
mod zero_copy;

#[cfg(feature = "quic")]
pub mod quic;
#[cfg(feature = "tokio")]
pub mod tokio;

pub use dns::{DnsCache, ToSocketAddrs, lookup_host, lookup_ips};
pub use icmp::IcmpSocket;
pub use raw::RawSocket;
pub use runtime::{RX_BATCH, Runtime, RuntimeStats};
pub use tcp::{DEFAULT_BACKLOG, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use zero_copy::OwnedWriteError;

use std::os::fd::BorrowedFd;

/// A device's file descriptor for the runtime to wait on, if it has one. Devices
/// without (in-memory pipes) are looked at every millisecond instead.
pub trait PollFd {
    /// The descriptor that becomes readable when a frame waits; the same one every
    /// time (the runtime registers it when the device is added and takes it out of its
    /// epoll instances when the device is gone).
    fn poll_fd(&self) -> Option<BorrowedFd<'_>>;

    /// A second descriptor the runtime watches beside [`PollFd::poll_fd`], readable
    /// when frames wait that did not come through the first (a shard's inbox:
    /// [`shard::ShardDevice`]); none by default. Only with a `poll_fd`.
    fn extra_poll_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

#[cfg(target_os = "linux")]
impl PollFd for impnet_phy::Tap {
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(self))
    }
}

#[cfg(target_os = "linux")]
impl PollFd for impnet_phy::Tun {
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(std::os::fd::AsFd::as_fd(self))
    }
}

impl PollFd for impnet_phy::PipeEnd {
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

impl<D: impnet_phy::Device + PollFd> PollFd for impnet_phy::Impair<D> {
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner().poll_fd()
    }
}

impl<D: impnet_phy::Device + PollFd> PollFd for impnet_phy::Offload<D> {
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner().poll_fd()
    }
}

impl<D: impnet_phy::Device + PollFd, W: std::io::Write> PollFd for impnet_phy::Pcap<D, W> {
    fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner().poll_fd()
    }
}

/// A deadline `timeout` from now (None: wait forever).
pub(crate) fn deadline(timeout: Option<std::time::Duration>) -> Option<std::time::Instant> {
    timeout.map(|t| std::time::Instant::now() + t)
}
