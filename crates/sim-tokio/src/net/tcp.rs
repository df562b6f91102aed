//! TCP for a simulated host's tasks: [`TcpListener`] and [`TcpStream`], shaped like
//! tokio's, over the host's imp stack.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use impnet_core::tcp::{TcpError, TcpHandle, TcpInfo, TcpState};
use impnet_core::{Instant, Stack};
use impnet_sim::HostId;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::ToSocketAddrs;
use crate::world::{self, HostState, tcp_error};

/// Connections a listener queues before further SYNs are dropped.
const BACKLOG: usize = 128;

/// Where a socket lives: its host, the host's incarnation when it was made, its handle.
#[derive(Debug, Clone, Copy)]
struct Socket {
    host: HostId,
    incarnation: u64,
    handle: TcpHandle,
}

impl Socket {
    /// Try `attempt` on the stack; on `None`, park the task until the socket is ready
    /// for reading (`write` false) or writing.
    fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        write: bool,
        attempt: impl FnOnce(&mut Stack, Instant) -> Option<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let handle = self.handle;
        let result = world::with_stack(self.host, self.incarnation, |stack, now, state| {
            let result = attempt(stack, now);
            if result.is_none() {
                register(state, handle, write, cx.waker());
            }
            result
        });
        match result {
            Ok(Some(r)) => Poll::Ready(r),
            Ok(None) => Poll::Pending,
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    /// One call into the stack, its `TcpError` mapped.
    fn call<T>(&self, f: impl FnOnce(&mut Stack, Instant) -> Result<T, TcpError>) -> io::Result<T> {
        let handle_result =
            world::with_stack(self.host, self.incarnation, |stack, now, _| f(stack, now))?;
        handle_result.map_err(tcp_error)
    }

    /// Close (`abort` false: gracefully) on drop, forgetting the waiting tasks.
    fn release(&self, abort: bool) {
        let handle = self.handle;
        world::on_drop(self.host, self.incarnation, |stack, now, state| {
            state.tcp.remove(&handle);
            let _ = if abort {
                stack.tcp_abort(now, handle)
            } else {
                stack.tcp_close(now, handle)
            };
        });
    }
}

fn register(state: &mut HostState, handle: TcpHandle, write: bool, waker: &Waker) {
    let (r, w) = state.tcp.entry(handle).or_default();
    let slot = if write { w } else { r };
    if !slot.as_ref().is_some_and(|old| old.will_wake(waker)) {
        *slot = Some(waker.clone());
    }
}

fn resolve(addr: impl ToSocketAddrs) -> io::Result<SocketAddr> {
    addr.to_socket_addr()
}

/// A listening TCP socket of the current simulated host. Closed when dropped.
#[derive(Debug)]
pub struct TcpListener {
    socket: Socket,
    local: SocketAddr,
}

impl TcpListener {
    /// Listen on `addr` (an address of this host, or 0.0.0.0; a non-zero port).
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let local = resolve(addr)?;
        if local.port() == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "listening needs a non-zero port",
            ));
        }
        let (host, incarnation) = world::current_host()?;
        let handle = world::with_stack(host, incarnation, |stack, _, _| {
            stack.tcp_listen(local, BACKLOG)
        })?
        .map_err(tcp_error)?;
        let socket = Socket {
            host,
            incarnation,
            handle,
        };
        Ok(TcpListener { socket, local })
    }

    /// Wait for a connection and take it.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Poll for a connection to take.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let listener = self.socket;
        self.socket
            .poll(cx, false, |stack, _| {
                match stack.tcp_accept(listener.handle) {
                    Ok(h) => stack.tcp_addresses(h).map(|(l, p)| Ok((h, l, p))),
                    Err(TcpError::WouldBlock) => None,
                    Err(e) => Some(Err(tcp_error(e))),
                }
            })
            .map_ok(|(handle, local, peer)| {
                let socket = Socket { handle, ..listener };
                (
                    TcpStream {
                        socket,
                        local,
                        peer,
                    },
                    peer,
                )
            })
    }

    /// The address listened on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.socket.release(false);
    }
}

/// A TCP connection of a simulated host: tokio's `AsyncRead` and `AsyncWrite`
/// (`poll_shutdown` sends our FIN). Closed gracefully when dropped.
#[derive(Debug)]
pub struct TcpStream {
    socket: Socket,
    local: SocketAddr,
    peer: SocketAddr,
}

impl TcpStream {
    /// Connect to `addr` from the current simulated host.
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let remote = resolve(addr)?;
        let (host, incarnation) = world::current_host()?;
        let any = SocketAddr::new(
            match remote {
                SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
            },
            0,
        );
        let handle = world::with_stack(host, incarnation, |stack, now, _| {
            stack.tcp_connect(now, any, remote)
        })?
        .map_err(tcp_error)?;
        let socket = Socket {
            host,
            incarnation,
            handle,
        };
        let outcome =
            poll_fn(|cx| socket.poll(cx, true, |stack, _| connect_outcome(stack, handle))).await;
        match outcome {
            Ok((local, peer)) => Ok(TcpStream {
                socket,
                local,
                peer,
            }),
            Err(e) => {
                socket.release(true);
                Err(e)
            }
        }
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.peer)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    /// Turn Nagle's algorithm off (true) or on.
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        let handle = self.socket.handle;
        self.socket
            .call(|stack, _| stack.tcp_set_nodelay(handle, nodelay))
    }

    /// A snapshot of the connection (state, cwnd, RTT, retransmissions).
    pub fn info(&self) -> Option<TcpInfo> {
        let handle = self.socket.handle;
        world::with_stack(self.socket.host, self.socket.incarnation, |stack, _, _| {
            stack.tcp_info(handle)
        })
        .ok()
        .flatten()
    }

    /// End the connection at once with a reset (RST).
    pub fn abort(self) {
        self.socket.release(true);
        std::mem::forget(self);
    }
}

/// Where a connection attempt stands: None while the handshake runs.
fn connect_outcome(
    stack: &mut Stack,
    handle: TcpHandle,
) -> Option<io::Result<(SocketAddr, SocketAddr)>> {
    match stack.tcp_info(handle).map(|i| i.state) {
        Some(TcpState::SynSent | TcpState::SynReceived) => None,
        Some(TcpState::Closed) | None => {
            let err = stack.tcp_error(handle).ok().flatten();
            Some(Err(tcp_error(err.unwrap_or(TcpError::ConnectionRefused))))
        }
        Some(_) => Some(
            stack
                .tcp_addresses(handle)
                .ok_or_else(|| tcp_error(TcpError::InvalidHandle)),
        ),
    }
}

impl Socket {
    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let handle = self.handle;
        self.poll(cx, false, |stack, now| {
            // Zero only as much of the buffer as there is to read (at least one byte,
            // so an empty read is never mistaken for the end of the stream).
            let ready = stack.tcp_readable(handle).max(1);
            let out = buf.initialize_unfilled_to(ready.min(buf.remaining()));
            match stack.tcp_recv(now, handle, out) {
                Ok(n) => {
                    buf.advance(n);
                    Some(Ok(()))
                }
                Err(TcpError::WouldBlock) => None,
                Err(e) => Some(Err(tcp_error(e))),
            }
        })
    }

    fn poll_write(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let handle = self.handle;
        self.poll(cx, true, |stack, now| {
            match stack.tcp_send(now, handle, data) {
                Ok(n) => Some(Ok(n)),
                Err(TcpError::WouldBlock) => None,
                Err(e) => Some(Err(tcp_error(e))),
            }
        })
    }

    fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let handle = self.handle;
        self.poll(cx, true, |stack, now| {
            match stack.tcp_send_vectored(now, handle, bufs.iter().map(|b| &**b)) {
                Ok(n) => Some(Ok(n)),
                Err(TcpError::WouldBlock) => None,
                Err(e) => Some(Err(tcp_error(e))),
            }
        })
    }

    /// Send our FIN.
    fn shutdown(&self) -> io::Result<()> {
        let handle = self.handle;
        match self.call(|stack, now| stack.tcp_shutdown(now, handle)) {
            // A connection that has already ended has nothing left to shut down.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            other => other,
        }
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.socket.poll_read(cx, buf)
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.socket.poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.socket.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Data goes out as the window allows; there is nothing to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.socket.shutdown())
    }
}

impl TcpStream {
    /// Split the connection into a reading and a writing half that can move into
    /// different tasks (tokio's `into_split`). Dropping the write half sends our FIN;
    /// the connection closes when both halves are gone.
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let stream = Arc::new(self);
        (
            OwnedReadHalf {
                stream: Arc::clone(&stream),
            },
            OwnedWriteHalf {
                stream,
                shutdown_on_drop: true,
            },
        )
    }
}

/// The reading half of a [`TcpStream`] ([`TcpStream::into_split`]).
#[derive(Debug)]
pub struct OwnedReadHalf {
    stream: Arc<TcpStream>,
}

/// The writing half of a [`TcpStream`] ([`TcpStream::into_split`]): sends our FIN when
/// dropped or shut down.
#[derive(Debug)]
pub struct OwnedWriteHalf {
    stream: Arc<TcpStream>,
    shutdown_on_drop: bool,
}

/// The halves given to [`OwnedReadHalf::reunite`] came from different streams.
#[derive(Debug)]
pub struct ReuniteError(pub OwnedReadHalf, pub OwnedWriteHalf);

impl std::fmt::Display for ReuniteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tried to reunite halves that are not from the same socket")
    }
}

impl std::error::Error for ReuniteError {}

impl OwnedReadHalf {
    /// The stream again, from both of its halves.
    pub fn reunite(self, other: OwnedWriteHalf) -> Result<TcpStream, ReuniteError> {
        if !Arc::ptr_eq(&self.stream, &other.stream) {
            return Err(ReuniteError(self, other));
        }
        let mut other = other;
        other.shutdown_on_drop = false;
        let stream = Arc::clone(&other.stream);
        drop((self, other));
        Ok(Arc::into_inner(stream).expect("both halves were dropped"))
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }
}

impl OwnedWriteHalf {
    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }
}

impl AsyncRead for OwnedReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.stream.socket.poll_read(cx, buf)
    }
}

impl AsyncWrite for OwnedWriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.stream.socket.poll_write(cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.stream.socket.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = self.stream.socket.shutdown();
        if result.is_ok() {
            self.shutdown_on_drop = false;
        }
        Poll::Ready(result)
    }
}

impl Drop for OwnedWriteHalf {
    fn drop(&mut self) {
        if self.shutdown_on_drop {
            let handle = self.stream.socket.handle;
            world::on_drop(
                self.stream.socket.host,
                self.stream.socket.incarnation,
                |stack, now, _| {
                    let _ = stack.tcp_shutdown(now, handle);
                },
            );
        }
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        self.socket.release(false);
    }
}
