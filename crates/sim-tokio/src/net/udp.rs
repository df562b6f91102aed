//! UDP for a simulated host's tasks: [`UdpSocket`], shaped like tokio's.

use std::future::poll_fn;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use impnet_core::{Instant, Stack, UdpError, UdpHandle};
use impnet_sim::HostId;

use super::ToSocketAddrs;
use crate::world::{self, udp_error};

/// A UDP socket of the current simulated host. Closed when dropped.
#[derive(Debug)]
pub struct UdpSocket {
    host: HostId,
    incarnation: u64,
    handle: UdpHandle,
    local: SocketAddr,
    /// `SO_BROADCAST`: may send to 255.255.255.255.
    broadcast: AtomicBool,
    /// The stack refused a [`UdpSocket::try_send_to`] for lack of room, and no
    /// [`UdpSocket::poll_send_ready`] has waited for the network to move since.
    send_blocked: AtomicBool,
}

impl UdpSocket {
    /// Bind to `addr` (an address of this host or 0.0.0.0; port 0 takes an ephemeral one).
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let local = addr.to_socket_addr()?;
        let (host, incarnation) = world::current_host()?;
        let (handle, local) = world::with_stack(host, incarnation, |stack, _, _| {
            let handle = stack.udp_bind(local)?;
            Ok::<_, UdpError>((handle, stack.udp_local_addr(handle)?))
        })?
        .map_err(udp_error)?;
        Ok(UdpSocket {
            host,
            incarnation,
            handle,
            local,
            broadcast: AtomicBool::new(false),
            send_blocked: AtomicBool::new(false),
        })
    }

    /// The address bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// Allow (true) sending to the limited broadcast address 255.255.255.255
    /// (`SO_BROADCAST`); without it such a send fails with `PermissionDenied`, as on
    /// Linux. The datagram reaches the other end of the link it leaves by (links are
    /// point to point; routers do not forward it).
    pub fn set_broadcast(&self, on: bool) -> io::Result<()> {
        self.broadcast.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// Whether [`UdpSocket::set_broadcast`] allowed broadcasts.
    pub fn broadcast(&self) -> io::Result<bool> {
        Ok(self.broadcast.load(Ordering::Relaxed))
    }

    /// Take datagrams sent to the IPv4 multicast group `multiaddr` on the interface with
    /// address `interface` (0.0.0.0: the one the route to the group leaves by); the
    /// stack reports the membership with IGMP. Links are point to point: a datagram to
    /// a group reaches the other end of the link it is sent on, and routers do not
    /// forward it.
    pub fn join_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        let handle = self.handle;
        world::with_stack(self.host, self.incarnation, |stack, now, _| {
            stack.udp_join_multicast_v4(now, handle, multiaddr, interface)
        })?
        .map_err(udp_error)
    }

    /// Leave a group joined with [`UdpSocket::join_multicast_v4`].
    pub fn leave_multicast_v4(&self, multiaddr: Ipv4Addr, interface: Ipv4Addr) -> io::Result<()> {
        let handle = self.handle;
        world::with_stack(self.host, self.incarnation, |stack, now, _| {
            stack.udp_leave_multicast_v4(now, handle, multiaddr, interface)
        })?
        .map_err(udp_error)
    }

    /// Send `data` as one datagram to `target`; waits while the stack has no room.
    pub async fn send_to(&self, data: &[u8], target: impl ToSocketAddrs) -> io::Result<usize> {
        let target = target.to_socket_addr()?;
        poll_fn(|cx| self.poll_send_to(cx, data, target)).await
    }

    /// [`UdpSocket::send_to`] as a poll.
    pub fn poll_send_to(
        &self,
        cx: &mut Context<'_>,
        data: &[u8],
        target: SocketAddr,
    ) -> Poll<io::Result<usize>> {
        if target.ip() == Ipv4Addr::BROADCAST && !self.broadcast.load(Ordering::Relaxed) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "sending to 255.255.255.255 needs set_broadcast(true)",
            )));
        }
        let handle = self.handle;
        self.poll(cx, true, |stack, now| {
            match stack.udp_send_to(now, handle, target, data) {
                Ok(()) => Some(Ok(data.len())),
                Err(UdpError::NoBufferSpace) => None,
                Err(e) => Some(Err(udp_error(e))),
            }
        })
    }

    /// Send `data` as one datagram to `target` if the stack has room now, else fail with
    /// `WouldBlock` ([`UdpSocket::poll_send_ready`] then waits for room): for a caller
    /// with its own send loop (quinn's `AsyncUdpSocket`).
    pub fn try_send_to(&self, data: &[u8], target: SocketAddr) -> io::Result<usize> {
        let waker = std::task::Waker::noop();
        match self.poll_send_to(&mut Context::from_waker(waker), data, target) {
            Poll::Ready(result) => result,
            Poll::Pending => {
                self.send_blocked.store(true, Ordering::Relaxed);
                Err(io::ErrorKind::WouldBlock.into())
            }
        }
    }

    /// Wait until a send may succeed: at once, unless the stack refused this socket's
    /// last [`UdpSocket::try_send_to`] for lack of room; then until the network has
    /// moved (frames left, so the queues may have room).
    pub fn poll_send_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.send_blocked.swap(false, Ordering::Relaxed) {
            return Poll::Ready(Ok(()));
        }
        let handle = self.handle;
        world::with_stack(self.host, self.incarnation, |_, _, state| {
            state.udp.entry(handle).or_default().1 = Some(cx.waker().clone());
        })?;
        Poll::Pending
    }

    /// Wait for a datagram; copy it into `buf` (truncated if longer) and return its
    /// length and source.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        poll_fn(|cx| self.poll_recv_from(cx, buf)).await
    }

    /// [`UdpSocket::recv_from`] as a poll.
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let handle = self.handle;
        self.poll(cx, false, |stack, _| {
            match stack.udp_recv_from(handle, buf) {
                Ok(got) => Some(Ok(got)),
                Err(UdpError::WouldBlock) => None,
                Err(e) => Some(Err(udp_error(e))),
            }
        })
    }

    fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        send: bool,
        attempt: impl FnOnce(&mut Stack, Instant) -> Option<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let handle = self.handle;
        let result = world::with_stack(self.host, self.incarnation, |stack, now, state| {
            let result = attempt(stack, now);
            if result.is_none() {
                let (r, w) = state.udp.entry(handle).or_default();
                *(if send { w } else { r }) = Some(cx.waker().clone());
            }
            result
        });
        match result {
            Ok(Some(r)) => Poll::Ready(r),
            Ok(None) => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl Drop for UdpSocket {
    fn drop(&mut self) {
        let handle = self.handle;
        world::on_drop(self.host, self.incarnation, |stack, _, state| {
            state.udp.remove(&handle);
            let _ = stack.udp_close(handle);
        });
    }
}
