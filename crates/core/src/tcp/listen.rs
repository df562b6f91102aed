//! Listeners: the LISTEN state (RFC 9293 §3.10.7.2), the backlog and the accept queue.

use alloc::collections::VecDeque;
use core::net::SocketAddr;

use impnet_wire::tcp::Repr;

use super::TcpHandle;
use super::fastopen::ListenFastOpen;
use super::segment::Reset;
use crate::time::Instant;

/// A listening socket.
#[derive(Debug)]
pub(crate) struct Listener {
    /// The address it listens on (the IP may be unspecified: any of ours).
    pub local: SocketAddr,
    /// Most connections in SYN-RECEIVED plus waiting in `queue`.
    pub backlog: usize,
    /// Children in SYN-RECEIVED (they count against the backlog).
    pub pending: usize,
    /// Established children waiting for `accept`, oldest first.
    pub queue: VecDeque<TcpHandle>,
    /// When the last SYN cookie went: only then may an ACK carry one.
    pub cookie_sent_at: Option<Instant>,
    /// Most children in SYN-RECEIVED (the catch-all listener's cap; beyond it a SYN is
    /// dropped, with no cookie). None: only the backlog bounds them.
    pub max_half_open: Option<usize>,
    /// TCP Fast Open on this listener (RFC 7413), with its cap; None: off.
    pub fast_open: Option<ListenFastOpen>,
    /// The settings its children take (Linux's accepted sockets inherit the
    /// listener's options); None until one is set (a SYN then costs one test).
    pub options: Option<alloc::boxed::Box<super::socket_options::SocketOptions>>,
}

/// What a listener does with a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListenAction {
    /// Ignore it.
    Drop,
    /// Answer with this RST.
    Reset(Reset),
    /// A SYN with room in the backlog: open a child in SYN-RECEIVED.
    Open,
    /// A SYN, but the backlog is full: drop it (the peer retries).
    Overflow,
    /// A SYN, but `max_half_open` children are in SYN-RECEIVED: drop it.
    HalfOpenFull,
}

impl Listener {
    /// A listener with an empty queue.
    pub fn new(local: SocketAddr, backlog: usize) -> Listener {
        Listener {
            local,
            backlog: backlog.max(1),
            pending: 0,
            queue: VecDeque::new(),
            cookie_sent_at: None,
            max_half_open: None,
            fast_open: None,
            options: None,
        }
    }

    /// RFC 9293 §3.10.7.2, "If the state is LISTEN".
    pub fn on_segment(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
        seg: &Repr<'_>,
    ) -> ListenAction {
        // "First, check for a RST: An incoming RST segment could not be valid since it
        // could not have been sent in response to anything sent by this incarnation of
        // the connection. An incoming RST should be ignored. Return."
        if seg.flags.rst() {
            return ListenAction::Drop;
        }
        // "Second, check for an ACK: Any acknowledgment is bad if it arrives on a
        // connection still in the LISTEN state. An acceptable reset segment should be
        // formed for any arriving ACK-bearing segment. The RST should be formatted as
        // follows: <SEQ=SEG.ACK><CTL=RST>"
        if seg.flags.ack() {
            return ListenAction::Reset(Reset::for_segment(local, remote, seg));
        }
        // "Third, check for a SYN"
        if seg.flags.syn() {
            if self.max_half_open.is_some_and(|max| self.pending >= max) {
                return ListenAction::HalfOpenFull;
            }
            return if self.pending + self.queue.len() < self.backlog {
                ListenAction::Open
            } else {
                ListenAction::Overflow
            };
        }
        // "Fourth, other data or control: ... Any other control or text-bearing segment
        // (not containing SYN) must have an ACK and thus would have been discarded by the
        // ACK processing in the second step ... drop the segment and return."
        ListenAction::Drop
    }
}
