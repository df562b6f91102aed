//! The async API (feature `tokio`): [`TcpListener`] and [`TcpStream`] whose streams
//! implement tokio's `AsyncRead` and `AsyncWrite`, so an existing tokio program (a
//! hyper or axum server) runs over imp by swapping its listener; [`UdpSocket`],
//! shaped like tokio's (quinn runs on it: see `impnet::quic`, feature `quic`); and
//! [`RawSocket`], a raw IPv4 socket of one protocol.
//!
//! The imp runtime's own thread drives the stack; these types only register wakers
//! with it, so they work on any executor that polls tokio's I/O traits (no tokio
//! reactor is needed).

use std::future::{Future, poll_fn};
use std::io::{self, IoSlice};
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use impnet_core::tcp::{TcpError, TcpHandle, TcpInfo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error;
use crate::runtime::{Runtime, Shared};
use crate::tcp::start_connect;
use crate::zero_copy::{OwnedWriteError, attempt_owned};

mod options;
mod raw;
mod udp;

pub use raw::RawSocket;
pub use udp::UdpSocket;

/// A listening TCP socket for async tasks. Closed when dropped.
pub struct TcpListener {
    shared: Arc<Shared>,
    handle: TcpHandle,
    local: SocketAddr,
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl TcpListener {
    /// Listen on `addr` (an address of the stack or 0.0.0.0, non-zero port).
    pub fn bind(rt: &Runtime, addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let local = crate::error::resolve_any(addr)?;
        if local.port() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "listening needs a non-zero port",
            ));
        }
        let shared = Arc::clone(rt.shared());
        let handle = shared
            .with(|state, _| state.stack.tcp_listen(local, crate::tcp::DEFAULT_BACKLOG))?
            .map_err(error::tcp)?;
        Ok(TcpListener {
            shared,
            handle,
            local,
        })
    }

    /// The catch-all listener of a transparent proxy, for async tasks; see the
    /// blocking [`crate::TcpListener::bind_any`].
    pub fn bind_any(rt: &Runtime, backlog: usize, max_half_open: usize) -> io::Result<TcpListener> {
        let shared = Arc::clone(rt.shared());
        let handle = shared
            .with(|state, _| state.stack.tcp_listen_any(backlog, max_half_open))?
            .map_err(error::tcp)?;
        Ok(TcpListener {
            shared,
            handle,
            local: SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0)),
        })
    }

    /// Wait for a connection and take it.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Poll for a connection to take.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let shared = &self.shared;
        shared
            .poll_tcp(cx, self.handle, false, |state, _| {
                match state.stack.tcp_accept(self.handle) {
                    Ok(h) => state.stack.tcp_addresses(h).map(|(l, p)| Ok((h, l, p))),
                    Err(TcpError::WouldBlock) => None,
                    Err(e) => Some(Err(error::tcp(e))),
                }
            })
            .map_ok(|(handle, local, peer)| {
                let stream = TcpStream {
                    shared: Arc::clone(shared),
                    handle,
                    local,
                    peer,
                    ended: error::Ended::default(),
                };
                (stream, peer)
            })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// TCP Fast Open on this listener, at most `max_pending` Fast Open connections
    /// waiting for the ACK of their SYN-ACK (0: off); see
    /// [`crate::TcpListener::set_fast_open`].
    pub fn set_fast_open(&self, max_pending: usize) -> io::Result<()> {
        self.shared
            .with(|state, _| state.stack.tcp_set_fast_open(self.handle, max_pending))?
            .map_err(error::tcp)
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let handle = self.handle;
        let _ = self.shared.with(|state, now| {
            state.wakers.remove(&handle);
            state.stack.tcp_close(now, handle)
        });
    }
}

/// A TCP connection for async tasks: tokio's `AsyncRead` + `AsyncWrite`
/// (`poll_shutdown` sends our FIN). Closed gracefully when dropped.
pub struct TcpStream {
    shared: Arc<Shared>,
    handle: TcpHandle,
    local: SocketAddr,
    peer: SocketAddr,
    /// Whether the connection's ending error was reported (once, as on Linux).
    ended: error::Ended,
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream")
            .field("local", &self.local)
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl TcpStream {
    /// Connect to `addr`.
    pub async fn connect(rt: &Runtime, addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        TcpStream::connect_inner(rt, addr, None).await
    }

    /// Connect with TCP Fast Open, `data` the first bytes to send (on the SYN when the
    /// stack holds the server's cookie); returns with the count of `data` taken. See
    /// [`crate::TcpStream::connect_with_data`].
    pub async fn connect_with_data(
        rt: &Runtime,
        addr: impl ToSocketAddrs,
        data: &[u8],
    ) -> io::Result<(TcpStream, usize)> {
        let mut taken = 0;
        let stream = TcpStream::connect_inner(rt, addr, Some((data, &mut taken))).await?;
        Ok((stream, taken))
    }

    async fn connect_inner(
        rt: &Runtime,
        addr: impl ToSocketAddrs,
        first: Option<(&[u8], &mut usize)>,
    ) -> io::Result<TcpStream> {
        let remote = crate::error::resolve_any(addr)?;
        let shared = Arc::clone(rt.shared());
        let any = crate::error::unspecified_like(remote);
        let handle = shared
            .with(|state, now| start_connect(&mut state.stack, now, any, remote, first))?
            .map_err(error::tcp)?;
        let result = poll_fn(|cx| {
            shared.poll_tcp(cx, handle, true, |state, _| {
                crate::tcp::connect_outcome(&mut state.stack, handle)
            })
        })
        .await;
        match result {
            Ok((local, peer)) => Ok(TcpStream {
                shared,
                handle,
                local,
                peer,
                ended: error::Ended::default(),
            }),
            Err(e) => {
                let _ = shared.with(|state, now| {
                    state.wakers.remove(&handle);
                    state.stack.tcp_abort(now, handle)
                });
                Err(e)
            }
        }
    }

    /// The remote address; `NotConnected` once the connection has ended, as on
    /// Linux.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        let handle = self.handle;
        let state = self
            .shared
            .with(|state, _| state.stack.tcp_info(handle).map(|i| i.state))?;
        error::peer(state, self.peer)
    }

    /// The local address (also after the connection ended, as on Linux).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// The error the connection ended with (reset, timed out, unreachable), if no read
    /// or write has reported it yet; reported once, as Linux's `SO_ERROR`.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let handle = self.handle;
        let error = self
            .shared
            .with(|state, _| state.stack.tcp_error(handle))?
            .map_err(error::tcp)?;
        Ok(self.ended.take(error))
    }

    /// Turn Nagle's algorithm off (true) or on.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        let handle = self.handle;
        self.shared
            .with(|state, _| state.stack.tcp_set_nodelay(handle, nodelay))?
            .map_err(error::tcp)
    }

    /// Put the cork on (true) or take it off, as Linux's `TCP_CORK`: while on, only
    /// full-sized segments go; off, the rest goes. A partial segment waits at most
    /// 200 ms.
    pub fn set_cork(&self, cork: bool) -> io::Result<()> {
        let handle = self.handle;
        self.shared
            .with(|state, now| state.stack.tcp_set_cork(now, handle, cork))?
            .map_err(error::tcp)
    }

    /// A snapshot of the connection.
    pub fn info(&self) -> Option<TcpInfo> {
        let handle = self.handle;
        self.shared
            .with(|state, _| state.stack.tcp_info(handle))
            .ok()
            .flatten()
    }

    /// Send some of `data` through a shared reference: waits until the send buffer
    /// takes at least one byte, and returns how many it took (as tokio's
    /// `TcpStream::write` through `&TcpStream`).
    pub async fn send(&self, data: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_send(cx, data)).await
    }

    /// Send what the send buffer takes of `data` now, without waiting: `WouldBlock`
    /// when it takes nothing.
    pub fn try_send(&self, data: &[u8]) -> io::Result<usize> {
        let handle = self.handle;
        self.shared
            .with(|state, now| state.stack.tcp_send(now, handle, data))?
            .map_err(|e| match e {
                TcpError::WouldBlock => io::ErrorKind::WouldBlock.into(),
                e => self.ended.write(e),
            })
    }

    /// [`TcpStream::send`] as a poll.
    pub fn poll_send(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let handle = self.handle;
        self.shared.poll_tcp(cx, handle, true, |state, now| {
            match state.stack.tcp_send(now, handle, data) {
                Ok(n) => Some(Ok(n)),
                Err(TcpError::WouldBlock) => None,
                Err(e) => Some(Err(self.ended.write(e))),
            }
        })
    }

    /// Ready when a write would not wait: the send buffer has room (below
    /// `TCP_NOTSENT_LOWAT`, if set), or the sending half has ended, so a write reports
    /// its error at once (what `POLLOUT` means to a `poll` caller). `Pending`, with the
    /// task's waker registered, while the buffer is full.
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let handle = self.handle;
        self.shared.poll_tcp(cx, handle, true, |state, _| {
            let stack = &state.stack;
            let ended =
                stack.tcp_send_queued(handle) == 0 || !matches!(stack.tcp_error(handle), Ok(None));
            (stack.tcp_writable(handle) || ended).then_some(Ok(()))
        })
    }

    /// End the connection at once with a reset (RST), dropping what is queued.
    pub fn abort(self) -> io::Result<()> {
        let handle = self.handle;
        self.shared
            .with(|state, now| {
                state.wakers.remove(&handle);
                state.stack.tcp_abort(now, handle)
            })?
            .map_err(error::tcp)
    }

    /// Shut down writing (our FIN after the queued data); reading is unaffected.
    /// Again is no error; on a connection that has ended it is `NotConnected`.
    pub fn shutdown_write(&self) -> io::Result<()> {
        let handle = self.handle;
        self.shared
            .with(|state, now| state.stack.tcp_shutdown(now, handle))?
            .map_err(error::tcp)
    }
}

impl TcpStream {
    /// Queue `data` without copying it (see the blocking
    /// [`TcpStream::send_owned`](crate::TcpStream::send_owned)): waits until the send
    /// buffer has room for all of it; refused, the buffer comes back in the error.
    pub async fn send_owned(&self, data: Vec<u8>) -> Result<(), OwnedWriteError> {
        let mut data = Some(data);
        let result = poll_fn(|cx| {
            self.shared.poll_tcp(cx, self.handle, true, |state, now| {
                let buffer = data.take().unwrap_or_default();
                let result = state.stack.tcp_send_owned(now, self.handle, buffer);
                attempt_owned(result, &mut data, |e| self.ended.write(e))
            })
        })
        .await;
        result.map_err(|error| OwnedWriteError {
            error,
            data: data.unwrap_or_default(),
        })
    }

    /// Read without a copy (see the blocking
    /// [`TcpStream::recv_with`](crate::TcpStream::recv_with)): waits for data, then `f`
    /// sees it in place and returns how many bytes it used; an empty slice and `Ok(0)`
    /// at end of stream. `f` runs under the runtime's lock.
    pub async fn recv_with(&self, mut f: impl FnMut(&[u8]) -> usize) -> io::Result<usize> {
        poll_fn(|cx| self.poll_recv_with(cx, &mut f)).await
    }

    /// [`TcpStream::recv_with`] as a poll: `Pending` (the task woken when data comes)
    /// while there is nothing to read.
    pub fn poll_recv_with(
        &self,
        cx: &mut Context<'_>,
        f: impl FnMut(&[u8]) -> usize,
    ) -> Poll<io::Result<usize>> {
        self.shared.poll_tcp(cx, self.handle, false, |state, now| {
            match state.stack.tcp_recv_with(now, self.handle, f) {
                Ok(n) => Some(Ok(n)),
                Err(TcpError::WouldBlock) => None,
                Err(e) => Some(self.ended.read(e)),
            }
        })
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let handle = self.handle;
        self.shared.poll_tcp(cx, handle, false, |state, now| {
            // Only as much of the buffer as there is to read is zeroed (a reader such
            // as hyper offers several KiB of fresh memory for every read); at least
            // one byte, so an empty buffer is never mistaken for the end of the stream.
            let ready = state.stack.tcp_readable(handle).max(1);
            let out = buf.initialize_unfilled_to(ready.min(buf.remaining()));
            match state.stack.tcp_recv(now, handle, out) {
                Ok(n) => {
                    buf.advance(n);
                    Some(Ok(()))
                }
                Err(TcpError::WouldBlock) => None,
                // Reported once; then the end of the stream (nothing read).
                Err(e) => Some(self.ended.read(e).map(|_| ())),
            }
        })
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_send(cx, data)
    }

    /// Every slice in one call into the stack, so a head and a body leave in one
    /// segment (hyper writes them this way when `is_write_vectored` says so).
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let handle = self.handle;
        self.shared.poll_tcp(cx, handle, true, |state, now| {
            let slices = bufs.iter().map(|b| &**b);
            match state.stack.tcp_send_vectored(now, handle, slices) {
                Ok(n) => Some(Ok(n)),
                Err(TcpError::WouldBlock) => None,
                Err(e) => Some(Err(self.ended.write(e))),
            }
        })
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Data goes out as the window allows; there is nothing to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(match self.shutdown_write() {
            // The connection has ended (or the runtime stopped): nothing is left to
            // shut down, and a server closing a connection its client reset is not
            // an error. (`shutdown_write` itself says `NotConnected`, as on Linux.)
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            other => other,
        })
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        let handle = self.handle;
        let _ = self.shared.with(|state, now| {
            state.wakers.remove(&handle);
            state.stack.tcp_close(now, handle)
        });
    }
}

/// Take in the devices' frames on the thread of the tokio runtime this runs on (which
/// needs its I/O driver: `enable_io`), until the imp runtime stops. Without it a frame
/// reaches a task in two thread switches: the device wakes imp's loop thread, which
/// wakes the task's thread; with it the device wakes the task's thread, and the loop
/// thread leaves the devices to it (keeping the timers). Spawn it once per runtime
/// beside the tasks that use the sockets; returns at once, leaving the devices to the
/// loop thread, when a device has no file descriptor.
pub fn drive(rt: &Runtime) -> impl Future<Output = io::Result<()>> + Send + 'static {
    let shared = Arc::clone(rt.shared());
    async move {
        let Some(fd) = shared.start_drive() else {
            return Ok(());
        };
        let registered = Driver(&shared);
        let watch = DeviceWatch {
            fd,
            _owner: Arc::clone(&shared),
        };
        // SAFETY: the descriptor belongs to the runtime's shared half, which `watch`
        // keeps alive and which closes it only when dropped; `as_raw_fd` always
        // returns it.
        let watched = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(watch, tokio::io::Interest::READABLE)
        }?;
        loop {
            // Cleared before the devices are emptied, so a frame that comes meanwhile
            // makes the descriptor ready again.
            watched.readable().await?.clear_ready();
            loop {
                match registered.0.drive() {
                    Ok(true) => tokio::task::yield_now().await,
                    Ok(false) => break,
                    Err(_) => return Ok(()),
                }
            }
        }
    }
}

/// An async driver's registration with the runtime, ended on drop.
struct Driver<'a>(&'a Shared);

impl Drop for Driver<'_> {
    fn drop(&mut self) {
        self.0.end_drive();
    }
}

/// The runtime's descriptor that becomes readable when a device has a frame, with the
/// shared half that owns it.
struct DeviceWatch {
    fd: std::os::fd::RawFd,
    _owner: Arc<Shared>,
}

impl std::os::fd::AsRawFd for DeviceWatch {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd
    }
}
