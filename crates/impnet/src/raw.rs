//! [`RawSocket`]: a raw IPv4 socket over the runtime, one protocol, blocking (Linux's
//! `socket(AF_INET, SOCK_RAW, protocol)`).

use std::io;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use impnet_core::{RawError, RawHandle};

use crate::runtime::{Awaits, Runtime, Shared};

/// A raw IPv4 socket: receives every datagram of its protocol the stack takes in,
/// IPv4 header included; sends behind a header the stack builds or, after
/// [`RawSocket::set_header_included`], with the caller's. Closed when dropped.
pub struct RawSocket {
    shared: Arc<Shared>,
    handle: RawHandle,
    protocol: u8,
    read_timeout: Mutex<Option<Duration>>,
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
        let (shared, handle) = open(rt, protocol)?;
        Ok(RawSocket {
            shared,
            handle,
            protocol,
            read_timeout: Mutex::new(None),
        })
    }

    /// Send the caller's IPv4 header with each datagram (`IP_HDRINCL`), or not.
    pub fn set_header_included(&self, included: bool) -> io::Result<()> {
        set_header_included(&self.shared, self.handle, included)
    }

    /// Send one datagram to `dst` (with a header included, its own destination).
    pub fn send_to(&self, buf: &[u8], dst: Ipv4Addr) -> io::Result<usize> {
        send_to(&self.shared, self.handle, buf, dst)
    }

    /// Receive one datagram, IPv4 header included (truncated to `buf`), with its
    /// source; waits up to the read timeout.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, Ipv4Addr)> {
        let timeout = *self.read_timeout.lock().unwrap_or_else(|p| p.into_inner());
        let deadline = crate::deadline(timeout);
        self.shared
            .block_on(deadline, false, Awaits::Input, |state, _| {
                match state.stack.raw_recv_from(self.handle, buf) {
                    Err(RawError::WouldBlock) => None,
                    other => Some(other.map_err(raw)),
                }
            })
    }

    /// How long `recv_from` waits (None: for ever; zero is refused).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        if timeout == Some(Duration::ZERO) {
            return Err(crate::udp::zero_timeout());
        }
        *self.read_timeout.lock().unwrap_or_else(|p| p.into_inner()) = timeout;
        Ok(())
    }
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        let _ = self
            .shared
            .with(|state, _| state.stack.raw_close(self.handle));
    }
}

/// A raw socket of `protocol` on `rt`'s stack (the blocking and the async socket).
pub(crate) fn open(rt: &Runtime, protocol: u8) -> io::Result<(Arc<Shared>, RawHandle)> {
    let shared = Arc::clone(rt.shared());
    let handle = shared
        .with(|state, _| state.stack.raw_bind(protocol))?
        .map_err(raw)?;
    Ok((shared, handle))
}

pub(crate) fn set_header_included(shared: &Shared, handle: RawHandle, on: bool) -> io::Result<()> {
    shared
        .with(|state, _| state.stack.raw_set_hdrincl(handle, on))?
        .map_err(raw)
}

pub(crate) fn send_to(
    shared: &Shared,
    handle: RawHandle,
    buf: &[u8],
    dst: Ipv4Addr,
) -> io::Result<usize> {
    shared
        .with(|state, now| state.stack.raw_send_to(now, handle, dst, buf))?
        .map_err(raw)?;
    Ok(buf.len())
}

pub(crate) fn raw(e: RawError) -> io::Error {
    let kind = match e {
        RawError::WouldBlock => io::ErrorKind::WouldBlock,
        RawError::InvalidProtocol | RawError::MessageTooLong | RawError::BadHeader(_) => {
            io::ErrorKind::InvalidInput
        }
        RawError::NoRoute => io::ErrorKind::NetworkUnreachable,
        RawError::InvalidHandle => io::ErrorKind::NotConnected,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}
