//! TCP (RFC 9293 and companions). CONTRACT SKELETON: the TCP work replaces the bodies;
//! the signatures below are what `Stack` calls and must stay (extend, don't break).
//!
//! `Tcp` owns every TCP connection and listener of one stack. It never sees Ethernet or
//! IPv4 bytes: the stack hands it parsed segments with their IPv4 addresses and asks it
//! for segments to send, which `Tcp` writes (header, options, payload, checksum) into a
//! buffer the stack then wraps in IPv4 and Ethernet headers.

use core::net::{Ipv4Addr, SocketAddrV4};

use crate::time::{Duration, Instant};
use imp_wire::tcp::Repr;

/// Settings for every TCP connection of a stack.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Send buffer size in bytes.
    pub send_buffer: usize,
    /// Receive buffer size in bytes.
    pub recv_buffer: usize,
    /// Delayed-ACK timer (RFC 9293 §3.8.6.3; default 40 ms). Zero disables delayed ACKs.
    pub delayed_ack: Duration,
    /// Disable Nagle's algorithm on new connections.
    pub nodelay: bool,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            send_buffer: 256 * 1024,
            recv_buffer: 256 * 1024,
            delayed_ack: Duration::from_millis(40),
            nodelay: false,
        }
    }
}

/// A TCP socket (listener or connection): a generational index, stale handles are errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TcpHandle {
    index: u32,
    generation: u32,
}

/// Why a TCP call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TcpError {
    /// The handle does not name a live socket (closed, or never existed).
    InvalidHandle,
    /// Nothing to read or no room to write right now; try again after an event.
    WouldBlock,
    /// The local address and port are already in use.
    AddrInUse,
    /// The connection was reset by the peer.
    ConnectionReset,
    /// The peer refused the connection (RST in answer to SYN).
    ConnectionRefused,
    /// The connection timed out (retransmissions or user timeout exhausted).
    TimedOut,
    /// The operation is not valid in the socket's current state.
    InvalidState,
    /// No ephemeral port is free.
    NoPortsAvailable,
}

/// A readiness change on a TCP socket, for wakers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpEvent {
    /// A listener has a connection to accept, or a connection has data (or EOF) to read.
    Readable(TcpHandle),
    /// A connection has room in its send buffer, or finished connecting.
    Writable(TcpHandle),
    /// A connection ended (closed, reset or timed out); the handle may be released.
    Closed(TcpHandle),
}

/// A segment written by [`Tcp::poll_transmit`]: `len` bytes of TCP header and payload
/// from `src` to `dst`, checksum filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpTransmit {
    /// Source IPv4 address.
    pub src: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst: Ipv4Addr,
    /// Bytes written at the start of the buffer.
    pub len: usize,
}

/// All TCP state of one stack.
#[derive(Debug)]
pub struct Tcp {
    config: TcpConfig,
    seed: u64,
}

impl Tcp {
    /// A TCP layer with no sockets; `seed` keys ISNs and ephemeral ports.
    pub fn new(config: TcpConfig, seed: u64) -> Tcp {
        Tcp { config, seed }
    }
    /// Listen on `local` (port must be non-zero; address may be unspecified).
    pub fn listen(&mut self, local: SocketAddrV4, backlog: usize) -> Result<TcpHandle, TcpError> {
        let _ = (local, backlog, &self.config, self.seed);
        Err(TcpError::InvalidState)
    }
    /// Open a connection from `local` (port 0 picks an ephemeral port) to `remote`,
    /// announcing `mss` (from the route's MTU).
    pub fn connect(
        &mut self,
        now: Instant,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        mss: u16,
    ) -> Result<TcpHandle, TcpError> {
        let _ = (now, local, remote, mss);
        Err(TcpError::InvalidState)
    }
    /// Take an established connection from a listener's accept queue.
    pub fn accept(&mut self, listener: TcpHandle) -> Result<TcpHandle, TcpError> {
        let _ = listener;
        Err(TcpError::InvalidHandle)
    }
    /// Copy data into the send buffer; returns how much fit.
    pub fn send(&mut self, now: Instant, handle: TcpHandle, data: &[u8]) -> Result<usize, TcpError> {
        let _ = (now, handle, data);
        Err(TcpError::InvalidHandle)
    }
    /// Copy received data out; `Ok(0)` means the peer closed (EOF).
    pub fn recv(&mut self, now: Instant, handle: TcpHandle, buf: &mut [u8]) -> Result<usize, TcpError> {
        let _ = (now, handle, buf);
        Err(TcpError::InvalidHandle)
    }
    /// Close gracefully (send FIN after queued data); the handle stays valid until `Closed`.
    pub fn close(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        let _ = (now, handle);
        Err(TcpError::InvalidHandle)
    }
    /// Abort: send RST and release at once.
    pub fn abort(&mut self, now: Instant, handle: TcpHandle) -> Result<(), TcpError> {
        let _ = (now, handle);
        Err(TcpError::InvalidHandle)
    }
    /// A segment arrived from `src` to `dst` (one of our addresses, checksum verified).
    pub fn handle_segment(&mut self, now: Instant, src: Ipv4Addr, dst: Ipv4Addr, segment: &Repr<'_>) {
        let _ = (now, src, dst, segment);
    }
    /// Write the next segment to send into `buf` (at most `buf.len()` bytes).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<TcpTransmit> {
        let _ = (now, buf);
        None
    }
    /// The earliest time `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    /// Fire the timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
    }
    /// The next readiness change.
    pub fn poll_event(&mut self) -> Option<TcpEvent> {
        None
    }
}
