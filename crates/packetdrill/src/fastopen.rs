//! TCP Fast Open (RFC 7413) through Linux's calls, on imp's Fast Open.
//!
//! - Server: `setsockopt(TCP_FASTOPEN, qlen)` on a socket before or after `listen`, or
//!   every listener when `net.ipv4.tcp_fastopen` has 0x400 (its queue then the
//!   backlog); the server bit 0x2 must be set too. `TCP_FASTOPEN_KEY` sets a
//!   listener's key, `net.ipv4.tcp_fastopen_key` the stack's: imp's cookies are then
//!   the ones Linux gives (SipHash over both addresses). 0x200 takes data without a
//!   cookie.
//! - Client (bit 0x1): `sendto`/`sendmsg` with `MSG_FASTOPEN` on a fresh socket
//!   connects with the data. With a cookie for the server the SYN carries what fits
//!   and a non-blocking call returns that count at once; without one the SYN asks for
//!   a cookie and a non-blocking call says `EINPROGRESS`, having taken nothing (as
//!   Linux's `tcp_sendmsg_fastopen`). `TCP_FASTOPEN_CONNECT`: `connect` with a cookie
//!   returns 0 at once and the SYN goes with the first write; without one it is a
//!   connect whose SYN asks for a cookie.
//!
//! The sysctls come from `--so_flags` (`fastopen`, `fastopen_key`), or with
//! `sysctls=on` from `/proc/sys/net/ipv4/` when a call needs them: the script's own
//! `sysctl` commands in its network namespace. `tcp_timestamps` and `tcp_ecn` are
//! read the same way when a socket is made.

use std::net::SocketAddr;

/// `net.ipv4.tcp_fastopen`: client Fast Open.
pub(crate) const CLIENT: u32 = 0x1;
/// Server Fast Open.
pub(crate) const SERVER: u32 = 0x2;
/// The server takes data on a SYN without a cookie (`TFO_SERVER_COOKIE_NOT_REQD`).
pub(crate) const SERVER_NO_COOKIE: u32 = 0x200;
/// `TFO_CLIENT_NO_COOKIE`: a client's SYN carries data without a cookie.
pub(crate) const CLIENT_NO_COOKIE: u32 = 0x4;
/// Every listener has Fast Open, without the socket option (`TFO_SERVER_WO_SOCKOPT1`).
pub(crate) const SERVER_ALWAYS: u32 = 0x400;

/// Linux's `MSG_FASTOPEN`.
pub const MSG_FASTOPEN: i32 = 0x2000_0000;

/// A socket's Fast Open settings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketFastOpen {
    /// `TCP_FASTOPEN`: the listener's queue of Fast Open children (0: off).
    pub qlen: i32,
    /// `TCP_FASTOPEN_CONNECT`.
    pub connect: bool,
    /// `TCP_FASTOPEN_KEY` as set on this socket.
    pub key: Option<[u8; 16]>,
    /// A `TCP_FASTOPEN_CONNECT` connect that returned at once: the peer, whose SYN
    /// goes with the first write.
    pub deferred: Option<SocketAddr>,
}
