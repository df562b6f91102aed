//! Settings one socket may hold apart from the stack's [`TcpConfig`](super::TcpConfig),
//! as Linux's per-socket options (`TCP_CONGESTION`, `SO_RCVBUF`, `SO_SNDBUF`,
//! `TCP_MAXSEG`, `TCP_USER_TIMEOUT`, `TCP_NOTSENT_LOWAT`, `TCP_SYNCNT`).
//!
//! Few sockets set any: a connection keeps them in its out-of-line cold part (made on
//! first use), a listener inline; a listener's are copied to each child, as Linux's
//! accepted sockets inherit the listener's (`sk_clone_lock`).

use super::cc::CcAlgorithm;
use crate::time::Duration;

/// One socket's own settings; `None` (and the default) everywhere means "as the stack's
/// configuration says".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SocketOptions {
    /// The congestion controller (Linux's `TCP_CONGESTION`).
    pub congestion: Option<CcAlgorithm>,
    /// The receive buffer's size in bytes (Linux's `SO_RCVBUF`, doubled): the window
    /// and, when set before the SYN, the window-scale shift derive from it.
    pub recv_buffer: Option<u32>,
    /// The send buffer's size in bytes (Linux's `SO_SNDBUF`, doubled).
    pub send_buffer: Option<u32>,
    /// The largest MSS to announce (Linux's `TCP_MAXSEG`): on a listener, its
    /// children's SYN-ACKs carry at most this.
    pub mss: Option<u16>,
    /// Unacknowledged data older than this ends the connection (Linux's
    /// `TCP_USER_TIMEOUT`; RFC 9293 §3.8.3's USER TIMEOUT).
    pub user_timeout: Option<Duration>,
    /// A write stops, and the connection is not writable, once this many bytes wait
    /// unsent (Linux's `TCP_NOTSENT_LOWAT`).
    pub notsent_lowat: Option<u32>,
    /// Retransmissions of the SYN (SYN-ACK) before the handshake times out (Linux's
    /// `TCP_SYNCNT`).
    pub syn_retries: Option<u8>,
}

impl SocketOptions {
    /// True when nothing is set (nothing to copy to a child).
    pub fn is_default(&self) -> bool {
        *self == SocketOptions::default()
    }

    /// Record `option` (its "as the stack says" values clear the setting).
    pub fn set(&mut self, option: SocketOption) {
        let clamp = |bytes: usize| u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
        match option {
            SocketOption::Congestion(algorithm) => self.congestion = Some(algorithm),
            SocketOption::RecvBuffer(bytes) => self.recv_buffer = Some(clamp(bytes)),
            SocketOption::SendBuffer(bytes) => self.send_buffer = Some(clamp(bytes)),
            SocketOption::MaxSegment(mss) => self.mss = (mss != 0).then_some(mss),
            SocketOption::UserTimeout(timeout) => {
                self.user_timeout = (timeout != Duration::ZERO).then_some(timeout);
            }
            SocketOption::NotSentLowWater(bytes) => {
                self.notsent_lowat = (bytes != u32::MAX).then_some(bytes);
            }
            SocketOption::SynRetries(count) => self.syn_retries = (count != 0).then_some(count),
        }
    }
}

/// A per-socket setting, for [`Tcp::set_option`](super::Tcp::set_option) and
/// [`Stack::tcp_set_option`](crate::Stack::tcp_set_option). Each may be set on a
/// listener (its children take it) or a connection, before or after the handshake,
/// as Linux allows; what each does in each state is on its variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SocketOption {
    /// The congestion controller (`TCP_CONGESTION`). Set before the handshake ends it
    /// is the one the connection starts with; set later, the new controller starts from
    /// the current window (whole segments; its slow-start threshold starts afresh).
    Congestion(CcAlgorithm),
    /// The receive buffer in bytes (`SO_RCVBUF`; Linux doubles what the application
    /// asks, the caller does). Before our SYN goes, it also picks the window-scale
    /// shift (RFC 7323 §2.3); once the connection has a receive buffer, it only grows.
    RecvBuffer(usize),
    /// The send buffer in bytes (`SO_SNDBUF`, doubled by the caller as Linux does).
    /// An empty send buffer takes the new size; one holding data only grows.
    SendBuffer(usize),
    /// The largest MSS announced (`TCP_MAXSEG`), on a listener: its children's
    /// SYN-ACKs carry at most this (a connection announces its MSS when it connects:
    /// `Stack::tcp_connect_with_mss`). 0 clears it.
    MaxSegment(u16),
    /// The user timeout (`TCP_USER_TIMEOUT`): data unacknowledged this long ends the
    /// connection with `TimedOut`. Zero: the stack's
    /// [`TcpConfig::user_timeout`](super::TcpConfig::user_timeout).
    UserTimeout(Duration),
    /// `TCP_NOTSENT_LOWAT`: a write queues no more than brings the unsent bytes to
    /// this (Linux's `tcp_sendmsg` stops there), and
    /// [`Stack::tcp_writable`](crate::Stack::tcp_writable) is true only while fewer
    /// than half of it wait unsent. `u32::MAX`: no limit.
    NotSentLowWater(u32),
    /// `TCP_SYNCNT`: how many times the connection's SYN (a listener's children: their
    /// SYN-ACK) is retransmitted before the handshake ends with `TimedOut`, in place
    /// of [`TcpConfig::syn_retransmits`](super::TcpConfig::syn_retransmits). 0: the
    /// stack's.
    SynRetries(u8),
}
