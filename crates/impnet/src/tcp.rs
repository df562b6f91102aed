//! [`TcpListener`] and [`TcpStream`]: blocking TCP over the runtime, shaped like
//! `std::net`.

use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use impnet_core::tcp::{TcpError, TcpHandle, TcpInfo, TcpState};

use crate::error;
use crate::runtime::{Awaits, Runtime, Shared};
use crate::udp::zero_timeout;
use crate::zero_copy::{OwnedWriteError, attempt_owned};

mod options;

/// Where an active open stands: None while the handshake runs; then the connection's
/// (local, peer) addresses, or why it failed (the error the connection ended with;
/// refused when it ended without one).
pub(crate) fn connect_outcome(
    stack: &mut impnet_core::Stack,
    handle: TcpHandle,
) -> Option<io::Result<(SocketAddr, SocketAddr)>> {
    match stack.tcp_info(handle).map(|i| i.state) {
        Some(TcpState::SynSent | TcpState::SynReceived) => None,
        Some(TcpState::Closed) | None => {
            let err = stack.tcp_error(handle).ok().flatten();
            Some(Err(error::tcp(err.unwrap_or(TcpError::ConnectionRefused))))
        }
        Some(_) => Some(
            stack
                .tcp_addresses(handle)
                .ok_or_else(|| error::tcp(TcpError::InvalidHandle)),
        ),
    }
}

/// Open a connection from `local` to `remote`, with `first`'s bytes on the SYN (TCP
/// Fast Open; how many went is written back) or without.
pub(crate) fn start_connect(
    stack: &mut impnet_core::Stack,
    now: impnet_core::time::Instant,
    local: SocketAddr,
    remote: SocketAddr,
    first: Option<(&[u8], &mut usize)>,
) -> Result<TcpHandle, TcpError> {
    match first {
        Some((data, taken)) => {
            stack
                .tcp_connect_with_data(now, local, remote, data)
                .map(|(handle, n)| {
                    *taken = n;
                    handle
                })
        }
        None => stack.tcp_connect(now, local, remote),
    }
}

/// Connections a listener queues before further SYNs are dropped.
pub const DEFAULT_BACKLOG: usize = 128;

/// A listening TCP socket. Closed when dropped (queued connections are reset).
pub struct TcpListener {
    shared: Arc<Shared>,
    handle: TcpHandle,
    local: SocketAddr,
    nonblocking: Mutex<bool>,
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl TcpListener {
    /// Listen on `addr` (an address of the stack or 0.0.0.0, and a non-zero port) with
    /// a backlog of [`DEFAULT_BACKLOG`].
    pub fn bind(rt: &Runtime, addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        TcpListener::bind_with_backlog(rt, addr, DEFAULT_BACKLOG)
    }

    /// Listen on `addr` with room for `backlog` connections not yet accepted.
    pub fn bind_with_backlog(
        rt: &Runtime,
        addr: impl ToSocketAddrs,
        backlog: usize,
    ) -> io::Result<TcpListener> {
        let local = crate::error::resolve_any(addr)?;
        if local.port() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "listening needs a port: port 0 (pick one) is not supported for TCP listeners",
            ));
        }
        let shared = Arc::clone(rt.shared());
        let handle = shared
            .with(|state, _| state.stack.tcp_listen(local, backlog))?
            .map_err(|e| match e {
                TcpError::AddrNotAvailable => io::Error::new(
                    io::ErrorKind::AddrNotAvailable,
                    format!(
                        "address not available: {} is not the stack's; listen on one of its \
                         addresses or 0.0.0.0",
                        local.ip()
                    ),
                ),
                e => error::tcp(e),
            })?;
        Ok(TcpListener {
            shared,
            handle,
            local,
            nonblocking: Mutex::new(false),
        })
    }

    /// The catch-all listener of a transparent proxy
    /// ([`Stack::tcp_listen_any`](impnet_core::Stack::tcp_listen_any)): with an
    /// interface in accept-any mode ([`Runtime::set_accept_any`]), it accepts
    /// connections to any address and port, and each accepted stream's
    /// [`TcpStream::local_addr`] is the destination the client asked for. At most
    /// `max_half_open` connections wait in the handshake. Its own `local_addr` is
    /// `[::]:0`.
    pub fn bind_any(rt: &Runtime, backlog: usize, max_half_open: usize) -> io::Result<TcpListener> {
        let shared = Arc::clone(rt.shared());
        let handle = shared
            .with(|state, _| state.stack.tcp_listen_any(backlog, max_half_open))?
            .map_err(error::tcp)?;
        Ok(TcpListener {
            shared,
            handle,
            local: SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
            nonblocking: Mutex::new(false),
        })
    }

    /// Wait for a connection and take it.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let nonblocking = *self.nonblocking.lock().unwrap_or_else(|p| p.into_inner());
        let (handle, local, peer) =
            self.shared
                .block_on(None, nonblocking, Awaits::Input, |state, _| {
                    match state.stack.tcp_accept(self.handle) {
                        Ok(h) => {
                            let (local, peer) = state.stack.tcp_addresses(h)?;
                            Some(Ok((h, local, peer)))
                        }
                        Err(TcpError::WouldBlock) => None,
                        Err(e) => Some(Err(error::tcp(e))),
                    }
                })?;
        let stream = TcpStream::from_parts(Arc::clone(&self.shared), handle, local, peer);
        Ok((stream, peer))
    }

    /// An endless iterator over accepted connections.
    pub fn incoming(&self) -> impl Iterator<Item = io::Result<TcpStream>> + '_ {
        std::iter::repeat_with(|| self.accept().map(|(s, _)| s))
    }

    /// The address listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// TCP Fast Open (RFC 7413, Linux's `TCP_FASTOPEN` option): clients that hold a
    /// cookie from this listener send their first data on the SYN, and it is readable
    /// (and may be answered) before the handshake completes, saving a round trip; at
    /// most `max_pending` such connections wait for the ACK of their SYN-ACK. 0 turns
    /// it off (the default). The data of a SYN may arrive twice if the network
    /// duplicates the SYN (RFC 7413 §6): serve only requests that are safe to repeat.
    pub fn set_fast_open(&self, max_pending: usize) -> io::Result<()> {
        self.shared
            .with(|state, _| state.stack.tcp_set_fast_open(self.handle, max_pending))?
            .map_err(error::tcp)
    }

    /// Make `accept` fail with `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        *self.nonblocking.lock().unwrap_or_else(|p| p.into_inner()) = nonblocking;
        Ok(())
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let _ = self
            .shared
            .with(|state, now| state.stack.tcp_close(now, self.handle));
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct StreamOptions {
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    nonblocking: bool,
    nodelay: bool,
    cork: bool,
    /// `shutdown(Read)` was called: reads return end of stream.
    read_shut: bool,
}

/// The connection behind every clone of a [`TcpStream`]; closed when the last goes.
struct StreamInner {
    shared: Arc<Shared>,
    handle: TcpHandle,
    local: SocketAddr,
    peer: SocketAddr,
    options: Mutex<StreamOptions>,
    /// Whether the connection's ending error was reported (once, as on Linux).
    ended: error::Ended,
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        // A graceful close: queued data still goes, then our FIN.
        let _ = self
            .shared
            .with(|state, now| state.stack.tcp_close(now, self.handle));
    }
}

/// A TCP connection. `Read` and `Write` (also through `&TcpStream`; `write_vectored`
/// queues every slice at once), timeouts, `shutdown`, `set_nodelay`, `set_cork`. Closed gracefully when the last clone is dropped.
#[derive(Clone)]
pub struct TcpStream {
    inner: Arc<StreamInner>,
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream")
            .field("local", &self.inner.local)
            .field("peer", &self.inner.peer)
            .finish_non_exhaustive()
    }
}

impl TcpStream {
    fn from_parts(
        shared: Arc<Shared>,
        handle: TcpHandle,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> TcpStream {
        let nodelay = shared.lock().stack.tcp_config().nodelay;
        TcpStream {
            inner: Arc::new(StreamInner {
                shared,
                handle,
                local,
                peer,
                options: Mutex::new(StreamOptions {
                    nodelay,
                    ..StreamOptions::default()
                }),
                ended: error::Ended::default(),
            }),
        }
    }

    /// Connect to `addr` from the route's source address and an ephemeral port. A
    /// host name (`"example.test:80"`) is resolved by imp's own resolver
    /// ([`lookup_host`](crate::lookup_host)); each address is tried in turn, and the
    /// last one's error is returned if none connects.
    pub fn connect(rt: &Runtime, addr: impl crate::ToSocketAddrs) -> io::Result<TcpStream> {
        let addrs = addr.to_imp_addrs(rt)?;
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address given");
        for addr in addrs {
            match TcpStream::connect_inner(rt, addr, None, None) {
                Ok(stream) => return Ok(stream),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Connect, giving up (with `TimedOut`) after `timeout`.
    pub fn connect_timeout(
        rt: &Runtime,
        addr: &SocketAddr,
        timeout: Duration,
    ) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(zero_timeout());
        }
        TcpStream::connect_inner(rt, *addr, Some(timeout), None)
    }

    /// Connect to `addr` with TCP Fast Open (RFC 7413, Linux's `MSG_FASTOPEN`):
    /// `data`, the first bytes to send, goes on the SYN when the stack holds a cookie
    /// from that server (from an earlier Fast Open connection to it), saving a round
    /// trip; otherwise the SYN asks for a cookie and the data follows the handshake.
    /// Returns once connected, with the count of `data` taken (all of it unless the
    /// send buffer is smaller). Use it for requests that are safe to repeat: a
    /// duplicated SYN may deliver them twice (RFC 7413 §6).
    pub fn connect_with_data(
        rt: &Runtime,
        addr: &SocketAddr,
        data: &[u8],
    ) -> io::Result<(TcpStream, usize)> {
        let mut taken = 0;
        let stream = TcpStream::connect_inner(rt, *addr, None, Some((data, &mut taken)))?;
        Ok((stream, taken))
    }

    fn connect_inner(
        rt: &Runtime,
        remote: SocketAddr,
        timeout: Option<Duration>,
        first: Option<(&[u8], &mut usize)>,
    ) -> io::Result<TcpStream> {
        let shared = Arc::clone(rt.shared());
        let any = crate::error::unspecified_like(remote);
        let handle = shared
            .with(|state, now| start_connect(&mut state.stack, now, any, remote, first))?
            .map_err(|e| match e {
                TcpError::NetUnreachable => io::Error::new(
                    io::ErrorKind::NetworkUnreachable,
                    format!(
                        "cannot connect to {remote}: no route to it (add an address on its \
                         network or a route), or it is a broadcast or multicast address"
                    ),
                ),
                e => error::tcp(e),
            })?;
        let established = shared.block_on(
            crate::deadline(timeout),
            false,
            Awaits::Input,
            |state, _| connect_outcome(&mut state.stack, handle),
        );
        match established {
            Ok((local, peer)) => Ok(TcpStream::from_parts(shared, handle, local, peer)),
            Err(e) => {
                let _ = shared.with(|state, now| state.stack.tcp_abort(now, handle));
                Err(e)
            }
        }
    }

    fn options(&self) -> StreamOptions {
        *self.inner.options.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_options(&self, f: impl FnOnce(&mut StreamOptions)) {
        f(&mut self.inner.options.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The remote address; `NotConnected` once the connection has ended (reset,
    /// timed out, or closed by both sides), as on Linux.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        let handle = self.inner.handle;
        let state = self
            .inner
            .shared
            .with(|state, _| state.stack.tcp_info(handle).map(|i| i.state))?;
        error::peer(state, self.inner.peer)
    }

    /// The local address (also after the connection ended, as on Linux).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.inner.local)
    }

    /// Shut down reading (later reads return end of stream), writing (our FIN goes
    /// after the queued data; the peer may still send) or both. Shutting down again
    /// is no error; on a connection that has ended it is `NotConnected`, as on Linux.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        let handle = self.inner.handle;
        let write = matches!(how, Shutdown::Write | Shutdown::Both);
        self.inner
            .shared
            .with(|state, now| {
                let stack = &mut state.stack;
                match stack.tcp_info(handle).map(|i| i.state) {
                    Some(TcpState::Closed) | None => Err(TcpError::InvalidState),
                    Some(_) if write => stack.tcp_shutdown(now, handle),
                    Some(_) => Ok(()),
                }
            })?
            .map_err(error::tcp)?;
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            self.set_options(|o| o.read_shut = true);
        }
        Ok(())
    }

    /// The error the connection ended with (reset, timed out, unreachable), if no read
    /// or write has reported it yet; reported once, as Linux's `SO_ERROR`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let handle = self.inner.handle;
        let error = self
            .inner
            .shared
            .with(|state, _| state.stack.tcp_error(handle))?
            .map_err(error::tcp)?;
        Ok(self.inner.ended.take(error))
    }

    /// Turn Nagle's algorithm off (true: small writes go at once) or on.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        let handle = self.inner.handle;
        self.inner
            .shared
            .with(|state, _| state.stack.tcp_set_nodelay(handle, nodelay))?
            .map_err(error::tcp)?;
        self.set_options(|o| o.nodelay = nodelay);
        Ok(())
    }

    /// Whether Nagle's algorithm is off.
    pub fn nodelay(&self) -> io::Result<bool> {
        Ok(self.options().nodelay)
    }

    /// Put the cork on (true) or take it off, as Linux's `TCP_CORK`: while on, only
    /// full-sized segments go, so several writes leave together; off, the rest goes
    /// (as Nagle's algorithm or no-delay allows). A partial segment waits at most
    /// 200 ms.
    pub fn set_cork(&self, cork: bool) -> io::Result<()> {
        let handle = self.inner.handle;
        self.inner
            .shared
            .with(|state, now| state.stack.tcp_set_cork(now, handle, cork))?
            .map_err(error::tcp)?;
        self.set_options(|o| o.cork = cork);
        Ok(())
    }

    /// Whether the cork is on.
    pub fn cork(&self) -> io::Result<bool> {
        Ok(self.options().cork)
    }

    /// End a record at the end of what was written so far (Linux's `MSG_EOR` on the
    /// last write): no segment carries data from both sides of that point, so the
    /// next write starts a segment of its own, and the record's end goes at once.
    pub fn end_record(&self) -> io::Result<()> {
        let handle = self.inner.handle;
        self.inner
            .shared
            .with(|state, _| state.stack.tcp_end_record(handle))?
            .map_err(error::tcp)
    }

    /// Bound the time a read waits (None: forever); a read that runs out fails with
    /// `TimedOut`.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        if timeout == Some(Duration::ZERO) {
            return Err(zero_timeout());
        }
        self.set_options(|o| o.read_timeout = timeout);
        Ok(())
    }

    /// Bound the time a write waits for room in the send buffer.
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        if timeout == Some(Duration::ZERO) {
            return Err(zero_timeout());
        }
        self.set_options(|o| o.write_timeout = timeout);
        Ok(())
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.options().read_timeout)
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.options().write_timeout)
    }

    /// Make reads and writes fail with `WouldBlock` instead of waiting.
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        self.set_options(|o| o.nonblocking = nonblocking);
        Ok(())
    }

    /// Another handle to the same connection.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(self.clone())
    }

    /// A snapshot of the connection (cwnd, RTT, retransmissions, options negotiated).
    pub fn info(&self) -> Option<TcpInfo> {
        let handle = self.inner.handle;
        self.inner
            .shared
            .with(|state, _| state.stack.tcp_info(handle))
            .ok()
            .flatten()
    }

    /// Reset the connection (RST) instead of closing it gracefully.
    pub fn abort(self) -> io::Result<()> {
        let handle = self.inner.handle;
        self.inner
            .shared
            .with(|state, now| state.stack.tcp_abort(now, handle))?
            .map_err(error::tcp)
    }

    /// Queue `data` without copying it: the stack keeps the buffer in the send buffer
    /// and frees it once the peer has acknowledged it (a buffer under 2 KiB is copied).
    /// All of it or nothing: this blocks (up to the write timeout) until the send buffer
    /// has room for all of it, its allocation included. Refused, the buffer comes back
    /// in the error, untouched; a buffer larger than the send buffer is refused with
    /// `InvalidInput`. Mixes freely with `write`: the stream keeps the calls' order.
    pub fn send_owned(&self, data: Vec<u8>) -> Result<(), OwnedWriteError> {
        let options = self.options();
        let handle = self.inner.handle;
        let deadline = crate::deadline(options.write_timeout);
        let mut data = Some(data);
        let result = self.inner.shared.block_on(
            deadline,
            options.nonblocking,
            Awaits::SendRoom,
            |state, now| {
                let buffer = data.take().unwrap_or_default();
                let result = state.stack.tcp_send_owned(now, handle, buffer);
                attempt_owned(result, &mut data, |e| self.inner.ended.write(e))
            },
        );
        result.map_err(|error| OwnedWriteError {
            error,
            data: data.unwrap_or_default(),
        })
    }

    /// Read without a copy: `f` gets the received bytes where they lie in the stack
    /// (the first contiguous part; call again for more) and returns how many it used,
    /// which are consumed (the rest stays for the next read). Blocks (up to the read
    /// timeout) until there is data. At end of stream `f` gets an empty slice and the
    /// result is `Ok(0)`. `f` runs under the runtime's lock: it must not call into the
    /// runtime. Errors as `read`.
    pub fn recv_with(&self, mut f: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        let options = self.options();
        if options.read_shut {
            f(&[]);
            return Ok(0);
        }
        let handle = self.inner.handle;
        let deadline = crate::deadline(options.read_timeout);
        self.inner.shared.block_on(
            deadline,
            options.nonblocking,
            Awaits::Input,
            |state, now| match state.stack.tcp_recv_with(now, handle, &mut f) {
                Ok(n) => Some(Ok(n)),
                Err(TcpError::WouldBlock) => None,
                Err(e) => Some(self.inner.ended.read(e)),
            },
        )
    }

    fn read_inner(&self, buf: &mut [u8]) -> io::Result<usize> {
        let options = self.options();
        if options.read_shut {
            return Ok(0);
        }
        let handle = self.inner.handle;
        let deadline = crate::deadline(options.read_timeout);
        self.inner.shared.block_on(
            deadline,
            options.nonblocking,
            Awaits::Input,
            |state, now| match state.stack.tcp_recv(now, handle, buf) {
                Ok(n) => Some(Ok(n)),
                Err(TcpError::WouldBlock) => None,
                Err(e) => Some(self.inner.ended.read(e)),
            },
        )
    }

    fn write_inner(&self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored_inner(&[IoSlice::new(buf)])
    }

    /// Queue the slices in one call into the stack, so they leave together (a head
    /// and a body in one segment rather than the body behind Nagle's algorithm).
    fn write_vectored_inner(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let options = self.options();
        let handle = self.inner.handle;
        let deadline = crate::deadline(options.write_timeout);
        self.inner.shared.block_on(
            deadline,
            options.nonblocking,
            Awaits::SendRoom,
            |state, now| {
                let slices = bufs.iter().map(|b| &**b);
                match state.stack.tcp_send_vectored(now, handle, slices) {
                    Ok(n) => Some(Ok(n)),
                    Err(TcpError::WouldBlock) => None,
                    Err(e) => Some(Err(self.inner.ended.write(e))),
                }
            },
        )
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buf)
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buf)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_inner(buf)
    }
    /// All the slices in one call into the stack: they leave in one segment when they
    /// fit one.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.write_vectored_inner(bufs)
    }
    /// Data goes out as the window allows; there is nothing to flush.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_inner(buf)
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.write_vectored_inner(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
