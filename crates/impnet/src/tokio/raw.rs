//! [`RawSocket`] for async tasks: a raw IPv4 socket of one protocol (as
//! [`crate::RawSocket`]) whose receive waits without blocking a thread; the imp
//! runtime wakes the task when a datagram of its protocol arrives.

use std::io;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::task::{Context, Poll};

use impnet_core::{RawError, RawHandle};

use crate::raw::raw;
use crate::runtime::{Runtime, Shared};

/// A raw IPv4 socket on an imp stack for async tasks: receives every datagram of its
/// protocol the stack takes in, IPv4 header included; sends behind a header the
/// stack builds or, after [`RawSocket::set_header_included`], with the caller's.
/// Every method takes `&self`. Closed when dropped.
pub struct RawSocket {
    shared: Arc<Shared>,
    handle: RawHandle,
    protocol: u8,
}

impl std::fmt::Debug for RawSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawSocket")
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl RawSocket {
    /// Open a raw socket for IPv4 protocol `protocol` (1 ICMP, 2 IGMP, ...; not 0).
    pub fn bind(rt: &Runtime, protocol: u8) -> io::Result<RawSocket> {
        let (shared, handle) = crate::raw::open(rt, protocol)?;
        Ok(RawSocket {
            shared,
            handle,
            protocol,
        })
    }

    /// Send the caller's IPv4 header with each datagram (`IP_HDRINCL`), or not.
    pub fn set_header_included(&self, included: bool) -> io::Result<()> {
        crate::raw::set_header_included(&self.shared, self.handle, included)
    }

    /// Send one datagram to `dst` (with a header included, its own destination). It
    /// is queued at once (or refused with the reason), so this never waits.
    pub async fn send_to(&self, buf: &[u8], dst: Ipv4Addr) -> io::Result<usize> {
        self.try_send_to(buf, dst)
    }

    /// [`RawSocket::send_to`] without a future.
    pub fn try_send_to(&self, buf: &[u8], dst: Ipv4Addr) -> io::Result<usize> {
        crate::raw::send_to(&self.shared, self.handle, buf, dst)
    }

    /// Receive one datagram, IPv4 header included (truncated to `buf`), with its
    /// source; waits for one to arrive.
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, Ipv4Addr)> {
        std::future::poll_fn(|cx| self.poll_recv_from(cx, buf)).await
    }

    /// [`RawSocket::recv_from`] as a poll: ready with a datagram (or an error), or
    /// pending with the task woken when one arrives.
    pub fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, Ipv4Addr)>> {
        self.shared.poll_raw(cx, self.handle, |state, _| {
            match state.stack.raw_recv_from(self.handle, buf) {
                Err(RawError::WouldBlock) => None,
                other => Some(other.map_err(raw)),
            }
        })
    }

    /// [`RawSocket::recv_from`] if a datagram is queued, else `WouldBlock`.
    pub fn try_recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, Ipv4Addr)> {
        self.shared
            .with(|state, _| state.stack.raw_recv_from(self.handle, buf))?
            .map_err(raw)
    }
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        let handle = self.handle;
        let _ = self.shared.with(|state, _| {
            state.raw_waiters.remove(&handle);
            state.stack.raw_close(handle)
        });
    }
}
