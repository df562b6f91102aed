//! [`IcmpSocket`]: ICMP and ICMPv6 echo (ping) over the runtime.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant as StdInstant};

use impnet_core::{EchoReply, IcmpError, IcmpHandle};

use crate::error;
use crate::runtime::{Awaits, Runtime, Shared};

/// An echo socket: sends echo requests with its identifier (ICMP to IPv4 addresses,
/// ICMPv6 to IPv6 ones) and receives the replies. Closed when dropped.
pub struct IcmpSocket {
    shared: Arc<Shared>,
    handle: IcmpHandle,
    ident: u16,
}

impl std::fmt::Debug for IcmpSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcmpSocket")
            .field("ident", &self.ident)
            .finish_non_exhaustive()
    }
}

impl IcmpSocket {
    /// Open an echo socket with identifier `ident`.
    pub fn bind(rt: &Runtime, ident: u16) -> io::Result<IcmpSocket> {
        let shared = Arc::clone(rt.shared());
        let handle = shared
            .with(|state, _| state.stack.icmp_bind(ident))?
            .map_err(error::icmp)?;
        Ok(IcmpSocket {
            shared,
            handle,
            ident,
        })
    }

    /// The identifier of this socket's requests.
    pub fn ident(&self) -> u16 {
        self.ident
    }

    /// Send an echo request to `dst`.
    pub fn send_echo(&self, dst: impl Into<IpAddr>, seq_no: u16, payload: &[u8]) -> io::Result<()> {
        let dst = dst.into();
        self.shared
            .with(|state, now| {
                state
                    .stack
                    .icmp_send_echo(now, self.handle, dst, seq_no, payload)
            })?
            .map_err(error::icmp)
    }

    /// Send an echo request to `dst` with IPv4 options in its header (Record Route,
    /// Timestamp: see [`impnet_core::ip_options`]); the reply's
    /// [`EchoReply::options`](impnet_core::EchoReply::options) holds what they collected.
    /// No options to an IPv6 address.
    pub fn send_echo_with_options(
        &self,
        dst: impl Into<IpAddr>,
        seq_no: u16,
        payload: &[u8],
        ip_options: &[u8],
    ) -> io::Result<()> {
        let dst = dst.into();
        self.shared
            .with(|state, now| {
                state.stack.icmp_send_echo_with_options(
                    now,
                    self.handle,
                    dst,
                    seq_no,
                    payload,
                    ip_options,
                )
            })?
            .map_err(error::icmp)
    }

    /// Wait for the next reply (its data copied into `buf`), at most `timeout`.
    pub fn recv(&self, buf: &mut [u8], timeout: Option<Duration>) -> io::Result<EchoReply> {
        self.shared.block_on(
            crate::deadline(timeout),
            false,
            Awaits::Input,
            |state, _| match state.stack.icmp_recv(self.handle, buf) {
                Ok(reply) => Some(Ok(reply)),
                Err(IcmpError::WouldBlock) => None,
                Err(e) => Some(Err(error::icmp(e))),
            },
        )
    }

    /// Send one request and wait for its reply (others are skipped): the round-trip
    /// time. Fails with `TimedOut` after `timeout`.
    pub fn ping(
        &self,
        dst: impl Into<IpAddr>,
        seq_no: u16,
        payload: &[u8],
        timeout: Duration,
    ) -> io::Result<(EchoReply, Duration)> {
        let dst = dst.into();
        let start = StdInstant::now();
        self.send_echo(dst, seq_no, payload)?;
        let mut buf = vec![0u8; payload.len()];
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no echo reply in time",
                ));
            }
            let reply = self.recv(&mut buf, Some(left))?;
            if reply.src == dst && reply.seq_no == seq_no {
                return Ok((reply, start.elapsed()));
            }
        }
    }
}

impl Drop for IcmpSocket {
    fn drop(&mut self) {
        let _ = self
            .shared
            .with(|state, _| state.stack.icmp_close(self.handle));
    }
}
