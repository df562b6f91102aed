//! The core's typed errors as `std::io::Error`s: the kind a std::net user expects, the
//! core's message (what went wrong, what to do) as the text.

use std::io::{Error, ErrorKind};
use std::sync::atomic::{AtomicBool, Ordering};

use impnet_core::tcp::TcpError;
use impnet_core::{IcmpError, UdpError};

/// A [`TcpError`] as the `io::Error` a `std::net` user on Linux gets in the same case.
/// Checked against the kernel (a std program and a Linux peer on loopback), and
/// tested over two stacks in `tests/dead_sockets.rs`:
///
/// | case | core error | `io::ErrorKind` | Linux |
/// |---|---|---|---|
/// | nothing to read or no room yet (non-blocking) | `WouldBlock` | `WouldBlock` | `EAGAIN` |
/// | read or write timeout set by `set_*_timeout` ran out | | `TimedOut` | `EAGAIN` (std allows either) |
/// | connect: nothing listens (RST, ICMP port unreachable) | `ConnectionRefused` | `ConnectionRefused` | `ECONNREFUSED` |
/// | the peer reset the connection: the first read or write | `ConnectionReset` | `ConnectionReset` | `ECONNRESET` |
/// | ... then every read | (same) | `Ok(0)`, end of stream | `0` |
/// | ... then every write | (same) | `BrokenPipe` | `EPIPE` |
/// | retransmissions or the user timeout gave up: the first read or write | `TimedOut` | `TimedOut` | `ETIMEDOUT` |
/// | ... then reads / writes | (same) | `Ok(0)` / `BrokenPipe` | `0` / `EPIPE` |
/// | ICMP net unreachable (opening, or the last soft error at a timeout) | `NetUnreachable` | `NetworkUnreachable` | `ENETUNREACH` |
/// | ICMP host unreachable, ARP gave up | `HostUnreachable` | `HostUnreachable` | `EHOSTUNREACH` |
/// | ICMP administratively prohibited | `Prohibited` | `HostUnreachable` | `EHOSTUNREACH` |
/// | write after our `shutdown(Write)`, or after a clean close | `Closing` | `BrokenPipe` | `EPIPE` |
/// | read after the peer's FIN (end of stream), again and again | | `Ok(0)` | `0` |
/// | `shutdown` or `peer_addr` on a connection that has ended | `InvalidState` | `NotConnected` | `ENOTCONN` |
/// | a call after `Runtime::shutdown` (the handle is gone) | `InvalidHandle` | `NotConnected` | (`EBADF`) |
/// | listen or connect on an address not the stack's; listen on port 0 | `AddrNotAvailable` | `AddrNotAvailable` | `EADDRNOTAVAIL` |
/// | address and port taken | `AddrInUse` | `AddrInUse` | `EADDRINUSE` |
/// | no ephemeral port left | `NoPortsAvailable` | `AddrNotAvailable` | `EADDRNOTAVAIL` |
///
/// `take_error` returns the connection's error if no read or write has reported it
/// yet, and reports it only once, as `SO_ERROR` does; `flush`, `set_nodelay`,
/// `local_addr` and the timeouts succeed on a dead connection, as on Linux. One
/// difference: Linux reports `EPIPE` rather than `ECONNRESET` for a reset that comes
/// after the peer's FIN; imp reports `ConnectionReset` there too.
pub(crate) fn tcp(e: TcpError) -> Error {
    let kind = match e {
        TcpError::WouldBlock => ErrorKind::WouldBlock,
        TcpError::AddrInUse => ErrorKind::AddrInUse,
        TcpError::ConnectionReset => ErrorKind::ConnectionReset,
        TcpError::ConnectionRefused => ErrorKind::ConnectionRefused,
        TcpError::TimedOut => ErrorKind::TimedOut,
        TcpError::NoPortsAvailable | TcpError::AddrNotAvailable => ErrorKind::AddrNotAvailable,
        TcpError::InvalidHandle | TcpError::InvalidState => ErrorKind::NotConnected,
        TcpError::Closing => ErrorKind::BrokenPipe,
        TcpError::HostUnreachable | TcpError::Prohibited => ErrorKind::HostUnreachable,
        TcpError::NetUnreachable => ErrorKind::NetworkUnreachable,
        _ => ErrorKind::Other,
    };
    Error::new(kind, e)
}

/// True for the errors a connection ends with (the core repeats them to every call).
fn ends_connection(e: TcpError) -> bool {
    matches!(
        e,
        TcpError::ConnectionReset
            | TcpError::ConnectionRefused
            | TcpError::TimedOut
            | TcpError::HostUnreachable
            | TcpError::NetUnreachable
            | TcpError::Prohibited
    )
}

/// Whether a connection's ending error has been reported to the application yet:
/// Linux reports it once (to the first read, write or `SO_ERROR`), then reads see
/// the end of the stream and writes a broken pipe. Shared by every clone of a stream.
#[derive(Debug, Default)]
pub(crate) struct Ended(AtomicBool);

impl Ended {
    /// Mark the error reported; true if it was not before.
    fn first(&self) -> bool {
        !self.0.swap(true, Ordering::AcqRel)
    }

    /// What a read gets for the core's error `e` (not `WouldBlock`).
    pub(crate) fn read(&self, e: TcpError) -> std::io::Result<usize> {
        if ends_connection(e) && !self.first() {
            return Ok(0);
        }
        Err(tcp(e))
    }

    /// What a write gets for the core's error `e` (not `WouldBlock`).
    pub(crate) fn write(&self, e: TcpError) -> Error {
        if ends_connection(e) && !self.first() {
            return Error::new(
                ErrorKind::BrokenPipe,
                format!("broken pipe: the connection has ended ({e})"),
            );
        }
        tcp(e)
    }

    /// `take_error`: the connection's error if nothing reported it yet.
    pub(crate) fn take(&self, error: Option<TcpError>) -> Option<Error> {
        error.filter(|_| self.first()).map(tcp)
    }
}

/// `peer_addr` of a connection in `state` (None: the handle is gone): the peer while
/// the connection is open, `NotConnected` once it has ended (as Linux's
/// `getpeername`).
pub(crate) fn peer(
    state: Option<impnet_core::tcp::TcpState>,
    peer: std::net::SocketAddrV4,
) -> std::io::Result<std::net::SocketAddr> {
    match state {
        Some(impnet_core::tcp::TcpState::Closed) | None => Err(Error::new(
            ErrorKind::NotConnected,
            "not connected: the connection has ended",
        )),
        Some(_) => Ok(std::net::SocketAddr::V4(peer)),
    }
}

pub(crate) fn udp(e: UdpError) -> Error {
    let kind = match e {
        UdpError::WouldBlock => ErrorKind::WouldBlock,
        UdpError::AddrInUse => ErrorKind::AddrInUse,
        UdpError::AddrNotAvailable | UdpError::NoPortsAvailable => ErrorKind::AddrNotAvailable,
        UdpError::MessageTooLong | UdpError::FragmentationNeeded { .. } => ErrorKind::InvalidInput,
        UdpError::NoRoute | UdpError::NetUnreachable => ErrorKind::NetworkUnreachable,
        UdpError::HostUnreachable => ErrorKind::HostUnreachable,
        UdpError::PortUnreachable => ErrorKind::ConnectionRefused,
        UdpError::InvalidHandle => ErrorKind::NotConnected,
        _ => ErrorKind::Other,
    };
    Error::new(kind, e)
}

pub(crate) fn icmp(e: IcmpError) -> Error {
    let kind = match e {
        IcmpError::WouldBlock => ErrorKind::WouldBlock,
        IcmpError::IdentInUse => ErrorKind::AddrInUse,
        IcmpError::MessageTooLong => ErrorKind::InvalidInput,
        IcmpError::NoRoute | IcmpError::NetUnreachable => ErrorKind::NetworkUnreachable,
        IcmpError::HostUnreachable | IcmpError::Unreachable => ErrorKind::HostUnreachable,
        IcmpError::InvalidHandle => ErrorKind::NotConnected,
        _ => ErrorKind::Other,
    };
    Error::new(kind, e)
}

/// Only IPv4 is spoken.
pub(crate) fn v4(addr: std::net::SocketAddr) -> std::io::Result<std::net::SocketAddrV4> {
    match addr {
        std::net::SocketAddr::V4(a) => Ok(a),
        std::net::SocketAddr::V6(_) => Err(Error::new(
            ErrorKind::InvalidInput,
            "imp speaks IPv4 only: give an IPv4 address",
        )),
    }
}

/// The first IPv4 address `addr` names (literal addresses need no resolver).
pub(crate) fn resolve(
    addr: impl std::net::ToSocketAddrs,
) -> std::io::Result<std::net::SocketAddrV4> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match v4(a) {
            Ok(a) => return Ok(a),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::new(ErrorKind::InvalidInput, "no address given")))
}
