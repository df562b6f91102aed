//! [`UdpSocket`] for async tasks, shaped like `tokio::net::UdpSocket`: `send_to` and
//! `recv_from` (or `send` and `recv` after `connect`), their `poll_*` forms, and
//! `try_*` forms that never wait. Readiness comes from the imp runtime: a task waiting
//! to receive is woken by the datagram's arrival, one whose datagram the stack
//! refused for lack of buffer space by the stack sending frames again.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use impnet_core::{UdpError, UdpHandle};
use tokio::io::ReadBuf;

use crate::error;
use crate::runtime::{Runtime, Shared, State};

/// A UDP socket on an imp stack for async tasks; IPv4 and IPv6 (bound to `[::]` it
/// serves both). Closed when dropped. Every method takes `&self`, so one socket can be
/// shared (in an `Arc`) by a sending and a receiving task.
pub struct UdpSocket {
    shared: Arc<Shared>,
    handle: UdpHandle,
    local: SocketAddr,
    /// Set by `connect`: `send` goes there, `recv` takes only its datagrams.
    peer: Mutex<Option<SocketAddr>>,
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
        let addr = error::resolve_any(addr)?;
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
            peer: Mutex::new(None),
        })
    }

    /// The catch-all socket of a transparent proxy, for async tasks: datagrams to any
    /// address and port no other socket holds, read with
    /// [`UdpSocket::recv_from_to`] and answered with [`UdpSocket::send_from`] (see the
    /// blocking [`crate::UdpSocket::bind_any`]).
    pub fn bind_any(rt: &Runtime) -> io::Result<UdpSocket> {
        let shared = Arc::clone(rt.shared());
        let handle = crate::udp::bind_any_handle(&shared)?;
        Ok(UdpSocket {
            shared,
            handle,
            local: SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
            peer: Mutex::new(None),
        })
    }

    /// Receive one datagram (truncated to `buf`) of a catch-all socket:
    /// `(length, source, destination)`.
    pub async fn recv_from_to(
        &self,
        buf: &mut [u8],
    ) -> io::Result<(usize, SocketAddr, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_recv_from_to(cx, buf)).await
    }

    /// [`UdpSocket::recv_from_to`] as a poll: `Pending` (the task woken when a
    /// datagram arrives) while none is queued.
    pub fn poll_recv_from_to(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr, SocketAddr)>> {
        self.shared.poll_udp(cx, self.handle, false, |state, _| {
            crate::udp::try_recv_from_to(state, self.handle, buf)
        })
    }

    /// Send one datagram from `src` (address and port) to `dst`: a catch-all socket's
    /// answer, from the destination the datagram it answers was sent to. Never waits
    /// (a plain function: threads without an executor may answer too).
    pub fn send_from(&self, buf: &[u8], src: SocketAddr, dst: SocketAddr) -> io::Result<usize> {
        crate::udp::send_from(&self.shared, self.handle, buf, (src, dst))
    }

    /// Join the IPv4 multicast group `multiaddr` on the interface with address
    /// `interface` (0.0.0.0: the interface the route to the group leaves by, else the
    /// first with an address), as `IP_ADD_MEMBERSHIP`; the stack reports it with IGMP.
    /// Datagrams to the group's port then reach the socket bound to that port.
    pub fn join_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        crate::udp::multicast::join(&self.shared, self.handle, *multiaddr, *interface)
    }

    /// Leave a group joined with [`UdpSocket::join_multicast_v4`] (`IP_DROP_MEMBERSHIP`).
    pub fn leave_multicast_v4(&self, multiaddr: &Ipv4Addr, interface: &Ipv4Addr) -> io::Result<()> {
        crate::udp::multicast::leave(&self.shared, self.handle, *multiaddr, *interface)
    }

    /// Take datagrams to `group` only from `source` (and any other source so joined),
    /// on the interface with address `interface` (`IP_ADD_SOURCE_MEMBERSHIP`,
    /// source-specific multicast; socket2's `join_ssm_v4`).
    pub fn join_ssm_v4(
        &self,
        source: &Ipv4Addr,
        group: &Ipv4Addr,
        interface: &Ipv4Addr,
    ) -> io::Result<()> {
        let ends = (*source, *group, *interface);
        crate::udp::multicast::source(&self.shared, self.handle, ends, true)
    }

    /// Stop taking `group`'s datagrams from `source` (`IP_DROP_SOURCE_MEMBERSHIP`).
    pub fn leave_ssm_v4(
        &self,
        source: &Ipv4Addr,
        group: &Ipv4Addr,
        interface: &Ipv4Addr,
    ) -> io::Result<()> {
        let ends = (*source, *group, *interface);
        crate::udp::multicast::source(&self.shared, self.handle, ends, false)
    }

    /// Set the TTL of datagrams sent to IPv4 multicast groups (`IP_MULTICAST_TTL`;
    /// default 1: they stay on the link).
    pub fn set_multicast_ttl_v4(&self, ttl: u32) -> io::Result<()> {
        crate::udp::multicast::set_ttl(&self.shared, self.handle, ttl)
    }

    /// The TTL of datagrams sent to IPv4 multicast groups.
    pub fn multicast_ttl_v4(&self) -> io::Result<u32> {
        crate::udp::multicast::ttl(&self.shared, self.handle)
    }

    /// Deliver datagrams this socket sends to an IPv4 group to the stack's own members
    /// of it too (`IP_MULTICAST_LOOP`; on by default, as in Linux).
    pub fn set_multicast_loop_v4(&self, multicast_loop_v4: bool) -> io::Result<()> {
        crate::udp::multicast::set_loop(&self.shared, self.handle, multicast_loop_v4)
    }

    /// Whether datagrams to IPv4 groups loop back to the stack's own members.
    pub fn multicast_loop_v4(&self) -> io::Result<bool> {
        crate::udp::multicast::get_loop(&self.shared, self.handle)
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// Set the default destination for `send` and accept datagrams only from it.
    /// (Nothing goes on the wire, so unlike tokio's this need not be awaited.)
    pub fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let peer = error::resolve_any(addr)?;
        *self.peer.lock().unwrap_or_else(|p| p.into_inner()) = Some(peer);
        Ok(())
    }

    /// The connected peer; `NotConnected` before `connect`.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotConnected,
                "UDP socket not connected: call connect first",
            )
        })
    }

    fn peer(&self) -> Option<SocketAddr> {
        *self.peer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Send one datagram to `target`, waiting while the stack has no room for it.
    pub async fn send_to(&self, buf: &[u8], target: impl ToSocketAddrs) -> io::Result<usize> {
        let target = error::resolve_any(target)?;
        std::future::poll_fn(|cx| self.poll_send_to(cx, buf, target)).await
    }

    /// Send to the connected peer.
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        let target = self.peer_addr()?;
        std::future::poll_fn(|cx| self.poll_send_to(cx, buf, target)).await
    }

    /// Receive one datagram (truncated to `buf`) and its source.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_recv_slice(cx, buf)).await
    }

    /// Receive one datagram from the connected peer.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.peer_addr()?;
        let (n, _) = std::future::poll_fn(|cx| self.poll_recv_slice(cx, buf)).await?;
        Ok(n)
    }

    /// Send one datagram to `target`: `Pending` while the stack has no room for it
    /// (its transmit queue or the next hop's resolution queue is full), the task woken
    /// when it sends frames again.
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        buf: &[u8],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        self.shared.poll_udp(cx, self.handle, true, |state, now| {
            self.attempt_send(state, now, buf, target)
        })
    }

    /// Send one datagram to the connected peer (see [`UdpSocket::poll_send_to`]).
    pub fn poll_send(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.peer_addr() {
            Ok(target) => self.poll_send_to(cx, buf, target),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// Send one datagram now, or fail with `WouldBlock` where
    /// [`UdpSocket::poll_send_to`] would wait.
    pub fn try_send_to(&self, buf: &[u8], target: SocketAddr) -> io::Result<usize> {
        let result = self
            .shared
            .with(|state, now| self.attempt_send(state, now, buf, target))?;
        result.unwrap_or_else(|| Err(would_block()))
    }

    /// Receive one datagram into `buf`, returning its source: `Pending` (the task woken
    /// when one arrives) while none is queued. A datagram longer than the room left in
    /// `buf` is truncated. An error an earlier datagram met (port unreachable, ...) is
    /// returned once.
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<SocketAddr>> {
        let out = buf.initialize_unfilled();
        match self.poll_recv_slice(cx, out) {
            Poll::Ready(Ok((n, src))) => {
                buf.advance(n);
                Poll::Ready(Ok(src))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Receive one datagram from the connected peer (see
    /// [`UdpSocket::poll_recv_from`]).
    pub fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if let Err(e) = self.peer_addr() {
            return Poll::Ready(Err(e));
        }
        self.poll_recv_from(cx, buf).map_ok(|_| ())
    }

    /// Receive one datagram into `buf` now, or fail with `WouldBlock`.
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.shared
            .with(|state, _| self.attempt_recv(state, buf))?
            .unwrap_or_else(|| Err(would_block()))
    }

    /// [`UdpSocket::poll_recv_from`] into a plain slice: the length and the source.
    pub fn poll_recv_slice(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        self.shared.poll_udp(cx, self.handle, false, |state, _| {
            self.attempt_recv(state, buf)
        })
    }

    /// Wait until a send may succeed: at once unless the stack refused this socket's
    /// last datagram for lack of room and has sent nothing since.
    pub fn poll_send_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shared.poll_udp(cx, self.handle, true, |state, _| {
            let blocked = state
                .udp_waiters
                .get(&self.handle)
                .is_some_and(|w| w.send_blocked);
            (!blocked).then_some(Ok(()))
        })
    }

    /// One send: `None` when the stack has no room (the socket is marked blocked).
    fn attempt_send(
        &self,
        state: &mut State,
        now: impnet_core::Instant,
        buf: &[u8],
        target: SocketAddr,
    ) -> Option<io::Result<usize>> {
        match state.stack.udp_send_to(now, self.handle, target, buf) {
            Ok(()) => Some(Ok(buf.len())),
            Err(UdpError::NoBufferSpace) => {
                state
                    .udp_waiters
                    .entry(self.handle)
                    .or_default()
                    .send_blocked = true;
                None
            }
            Err(e) => Some(Err(error::udp(e))),
        }
    }

    /// One receive: `None` when nothing (from the connected peer) is queued.
    fn attempt_recv(
        &self,
        state: &mut State,
        buf: &mut [u8],
    ) -> Option<io::Result<(usize, SocketAddr)>> {
        let peer = self.peer();
        loop {
            return match state.stack.udp_recv_from(self.handle, buf) {
                Ok((_, src)) if peer.is_some_and(|p| p != src) => continue,
                Ok(got) => Some(Ok(got)),
                Err(UdpError::WouldBlock) => None,
                Err(e) => Some(Err(error::udp(e))),
            };
        }
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let handle = self.handle;
        let _ = self.shared.with(|state, _| {
            state.udp_waiters.remove(&handle);
            state.stack.udp_close(handle)
        });
    }
}

fn would_block() -> io::Error {
    io::Error::new(
        io::ErrorKind::WouldBlock,
        "the UDP socket is not ready (no datagram queued, or no room to send)",
    )
}
