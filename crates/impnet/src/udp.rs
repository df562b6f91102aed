//! [`UdpSocket`]: blocking UDP over the runtime, shaped like `std::net::UdpSocket`.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use impnet_core::{UdpError, UdpHandle};

use crate::error;
use crate::runtime::{Awaits, Runtime, Shared, State};

/// Per-socket options, changed through `&self` as std allows.
#[derive(Debug, Default, Clone, Copy)]
struct Options {
    read_timeout: Option<Duration>,
    nonblocking: bool,
    /// Set by `connect`: `send` goes there, `recv` takes only its datagrams.
    peer: Option<SocketAddr>,
}

/// A UDP socket on an imp stack. Closed when dropped.
pub struct UdpSocket {
    shared: Arc<Shared>,
    handle: UdpHandle,
    local: SocketAddr,
    options: Mutex<Options>,
}

impl std::fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSocket")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl UdpSocket {
    /// Bind to `addr` (an IPv4 or IPv6 address of the stack, 0.0.0.0, or `[::]` for
    /// both families; port 0 picks one).
    pub fn bind(rt: &Runtime, addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let addr = crate::error::resolve_any(addr)?;
        let shared = Arc::clone(rt.shared());
        let (handle, local) = shared
            .with(|state, _| {
                let handle = state.stack.udp_bind(addr)?;
                let local = state.stack.udp_local_addr(handle)?;
                Ok::<_, UdpError>((handle, local))
            })?
            .map_err(error::udp)?;
        Ok(UdpSocket {
            shared,
            handle,
            local,
            options: Mutex::new(Options::default()),
        })
    }

    /// The catch-all socket of a transparent proxy
    /// ([`Stack::udp_bind_any`](impnet_core::Stack::udp_bind_any)): datagrams to any
    /// address and port no other socket holds, read with [`UdpSocket::recv_from_to`]
    /// and answered with [`UdpSocket::send_from`].
    pub fn bind_any(rt: &Runtime) -> io::Result<UdpSocket> {
        let shared = Arc::clone(rt.shared());
        let handle = bind_any_handle(&shared)?;
        Ok(UdpSocket {
            shared,
            handle,
            local: SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
            options: Mutex::new(Options::default()),
        })
    }

    /// Receive one datagram (truncated to `buf`): `(length, source, destination)`.
    pub fn recv_from_to(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        let options = self.options();
        let deadline = crate::deadline(options.read_timeout);
        self.shared
            .block_on(deadline, options.nonblocking, Awaits::Input, |state, _| {
                try_recv_from_to(state, self.handle, buf)
            })
    }

    /// Send one datagram from `src` (address and port) to `dst`: a catch-all
    /// socket's answer, from the destination the datagram it answers was sent to.
    pub fn send_from(&self, buf: &[u8], src: SocketAddr, dst: SocketAddr) -> io::Result<usize> {
        send_from(&self.shared, self.handle, buf, (src, dst))
    }

    fn options(&self) -> Options {
        *self.options.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Join the IPv4 multicast group `multiaddr` on the interface with address
    /// `interface` (0.0.0.0: the interface the route to the group leaves by, else the
    /// first with an address), as `IP_ADD_MEMBERSHIP`; the stack reports it with IGMP.
    /// Datagrams to the group's port then reach the socket bound to that port.
    pub fn join_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        multicast::join(&self.shared, self.handle, *multiaddr, *interface)
    }

    /// Leave a group joined with [`UdpSocket::join_multicast_v4`] (`IP_DROP_MEMBERSHIP`).
    pub fn leave_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        multicast::leave(&self.shared, self.handle, *multiaddr, *interface)
    }

    /// Take datagrams to `group` only from `source` (and any other source so joined),
    /// on the interface with address `interface` (`IP_ADD_SOURCE_MEMBERSHIP`,
    /// source-specific multicast; socket2's `join_ssm_v4`); the stack reports the
    /// source with IGMPv3.
    pub fn join_ssm_v4(
        &self,
        source: &Ipv4Addr,
        group: &Ipv4Addr,
        interface: &Ipv4Addr,
    ) -> io::Result<()> {
        multicast::source(
            &self.shared,
            self.handle,
            (*source, *group, *interface),
            true,
        )
    }

    /// Stop taking `group`'s datagrams from `source` (`IP_DROP_SOURCE_MEMBERSHIP`).
    pub fn leave_ssm_v4(
        &self,
        source: &Ipv4Addr,
        group: &Ipv4Addr,
        interface: &Ipv4Addr,
    ) -> io::Result<()> {
        multicast::source(
            &self.shared,
            self.handle,
            (*source, *group, *interface),
            false,
        )
    }

    /// Set the TTL of datagrams sent to IPv4 multicast groups (`IP_MULTICAST_TTL`;
    /// default 1: they stay on the link).
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        multicast::set_ttl(&self.shared, self.handle, ttl)
    }

    /// The TTL of datagrams sent to IPv4 multicast groups.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        multicast::ttl(&self.shared, self.handle)
    }

    /// Deliver datagrams this socket sends to an IPv4 group to the stack's own members
    /// of it too (`IP_MULTICAST_LOOP`; on by default, as in Linux).
    pub fn set_multicast_loop_v4(&self, multicast_loop_v4: bool) -> io::Result<()> {
        multicast::set_loop(&self.shared, self.handle, multicast_loop_v4)
    }

    /// Whether datagrams to IPv4 groups loop back to the stack's own members.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        multicast::get_loop(&self.shared, self.handle)
    }

    /// Send one datagram to `addr`.
    pub fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let dst = crate::error::resolve_any(addr)?;
        self.shared
            .with(|state, now| state.stack.udp_send_to(now, self.handle, dst, buf))?
            .map_err(error::udp)?;
        Ok(buf.len())
    }

    /// Receive one datagram (truncated to `buf`), with its source.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let options = self.options();
        let deadline = crate::deadline(options.read_timeout);
        self.shared
            .block_on(deadline, options.nonblocking, Awaits::Input, |state, _| {
                loop {
                    return match state.stack.udp_recv_from(self.handle, buf) {
                        Ok((_, src)) if options.peer.is_some_and(|p| p != src) => continue,
                        Ok((n, src)) => Some(Ok((n, src))),
                        Err(UdpError::WouldBlock) => None,
                        Err(e) => Some(Err(error::udp(e))),
                    };
                }
            })
    }

    /// Set the default destination for `send` and accept datagrams only from it.
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let peer = crate::error::resolve_any(addr)?;
        self.options.lock().unwrap_or_else(|p| p.into_inner()).peer = Some(peer);
        Ok(())
    }

    /// Send to the connected peer.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let peer = self.peer_addr()?;
        self.send_to(buf, peer)
    }

    /// Receive from the connected peer.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.recv_from(buf).map(|(n, _)| n)
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// The connected peer.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.options().peer.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotConnected,
                "UDP socket not connected: call connect first",
            )
        })
    }

    /// Bound the time `recv`/`recv_from` wait (None: forever); a wait that runs out
    /// fails with `TimedOut`.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        if timeout == Some(Duration::ZERO) {
            return Err(zero_timeout());
        }
        self.options
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .read_timeout = timeout;
        Ok(())
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.options().read_timeout)
    }

    /// Make receives fail with `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.options
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .nonblocking = nonblocking;
        Ok(())
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let _ = self
            .shared
            .with(|state, _| state.stack.udp_close(self.handle));
    }
}

/// The stack's catch-all UDP socket (the std-like and the tokio `bind_any`).
pub(crate) fn bind_any_handle(shared: &Shared) -> io::Result<UdpHandle> {
    shared
        .with(|state, _| state.stack.udp_bind_any())?
        .map_err(error::udp)
}

/// One look for a datagram on `handle` with its source and the destination it was sent
/// to: None while none is queued (the blocking and the async forms wait then).
pub(crate) fn try_recv_from_to(
    state: &mut State,
    handle: UdpHandle,
    buf: &mut [u8],
) -> Option<io::Result<(usize, SocketAddr, SocketAddr)>> {
    match state.stack.udp_recv_from_to(handle, buf) {
        Ok(got) => Some(Ok(got)),
        Err(UdpError::WouldBlock) => None,
        Err(e) => Some(Err(error::udp(e))),
    }
}

/// Send `buf` on `handle` from `src` to `dst` (never waits): the std-like and the
/// tokio socket's `send_from`.
pub(crate) fn send_from(
    shared: &Shared,
    handle: UdpHandle,
    buf: &[u8],
    (src, dst): (SocketAddr, SocketAddr),
) -> io::Result<usize> {
    shared
        .with(|state, now| state.stack.udp_send_from(now, handle, src, dst, buf))?
        .map_err(error::udp)?;
    Ok(buf.len())
}

pub(crate) fn zero_timeout() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a zero timeout is invalid: use None to wait forever",
    )
}

/// The multicast calls of the std-like and the tokio `UdpSocket` (the same on both).
pub(crate) mod multicast {
    use std::io;
    use std::net::Ipv4Addr;

    use impnet_core::{Instant, Stack, UdpError, UdpHandle};

    use crate::error;
    use crate::runtime::Shared;

    /// One call on the stack, its error as an `io::Error`.
    fn call<T>(
        shared: &Shared,
        f: impl FnOnce(&mut Stack, Instant) -> Result<T, UdpError>,
    ) -> io::Result<T> {
        shared
            .with(|state, now| f(&mut state.stack, now))?
            .map_err(error::udp)
    }

    pub(crate) fn join(
        shared: &Shared,
        handle: UdpHandle,
        group: Ipv4Addr,
        interface: Ipv4Addr,
    ) -> io::Result<()> {
        call(shared, |stack, now| {
            stack.udp_join_multicast_v4(now, handle, group, interface)
        })
    }

    pub(crate) fn leave(
        shared: &Shared,
        handle: UdpHandle,
        group: Ipv4Addr,
        interface: Ipv4Addr,
    ) -> io::Result<()> {
        call(shared, |stack, now| {
            stack.udp_leave_multicast_v4(now, handle, group, interface)
        })
    }

    pub(crate) fn set_ttl(shared: &Shared, handle: UdpHandle, ttl: u32) -> io::Result<()> {
        let ttl = u8::try_from(ttl)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "multicast TTL over 255"))?;
        call(shared, |stack, _| {
            stack.udp_set_multicast_ttl_v4(handle, ttl)
        })
    }

    pub(crate) fn ttl(shared: &Shared, handle: UdpHandle) -> io::Result<u32> {
        call(shared, |stack, _| stack.udp_multicast_ttl_v4(handle)).map(u32::from)
    }

    /// Source-specific join (`add`) or leave of `group` from `source`.
    pub(crate) fn source(
        shared: &Shared,
        handle: UdpHandle,
        (source, group, interface): (Ipv4Addr, Ipv4Addr, Ipv4Addr),
        add: bool,
    ) -> io::Result<()> {
        call(shared, |stack, now| {
            let pair = (group, source);
            if add {
                stack.udp_join_source_multicast_v4(now, handle, pair, interface)
            } else {
                stack.udp_leave_source_multicast_v4(now, handle, pair, interface)
            }
        })
    }

    pub(crate) fn set_loop(shared: &Shared, handle: UdpHandle, on: bool) -> io::Result<()> {
        call(shared, |stack, _| {
            stack.udp_set_multicast_loop_v4(handle, on)
        })
    }

    pub(crate) fn get_loop(shared: &Shared, handle: UdpHandle) -> io::Result<bool> {
        call(shared, |stack, _| stack.udp_multicast_loop_v4(handle))
    }
}
