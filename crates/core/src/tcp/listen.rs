//! Listeners: the LISTEN state (RFC 9293 §3.10.7.2), the backlog, the accept queue, and
//! the SYN cookies a full backlog answers with. A leaf: it decides what a segment calls
//! for ([`ListenDisposition`]) and knows nothing of connections.

use alloc::collections::VecDeque;
use core::net::SocketAddr;

use impnet_wire::tcp::Repr;

use super::TcpHandle;
use super::cookie::CookieJar;
use super::fastopen::ListenFastOpen;
use super::segment::Reset;
use crate::time::{Duration, Instant};

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

/// How long after its last SYN cookie a listener still accepts one (two cookie periods).
const COOKIE_LIFETIME: Duration = Duration::from_secs(128);

/// What a segment to a listener calls for: [`Listener::on_segment`] decides, the socket
/// table carries it out (it owns the connections, the counters and the outbox). The
/// listener is not changed by deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListenDisposition {
    /// Ignore it.
    Drop,
    /// An ACK, and no SYN cookie was sent lately: answer with this RST.
    Reset(Reset),
    /// An ACK whose SEG.ACK - 1 is a valid SYN cookie, with room in the accept queue:
    /// open the child the cookie describes (the peer's MSS is what it kept), then
    /// give it the ACK.
    AcceptCookie {
        /// The peer's MSS, as the cookie kept it.
        peer_mss: u16,
    },
    /// An ACK after a SYN cookie went, but it is not a valid cookie: answer with this
    /// RST.
    RejectCookie(Reset),
    /// An ACK with a valid SYN cookie, but the accept queue is full: drop it (the
    /// peer's retransmission, or its data, brings the cookie again).
    CookieOverflow,
    /// A SYN with room in the backlog: open a child in SYN-RECEIVED.
    Open,
    /// A SYN, but the backlog is full and SYN cookies are on: answer with a SYN-ACK
    /// whose sequence number is a cookie (RFC 4987 §3.6), and open nothing.
    SendCookie,
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

    /// The MSS its children announce: at most the listener's TCP_MAXSEG, when set.
    #[inline]
    pub fn child_mss(&self, local_mss: u16) -> u16 {
        match &self.options {
            Some(options) => options.mss.map_or(local_mss, |mss| mss.min(local_mss)),
            None => local_mss,
        }
    }

    /// RFC 9293 §3.10.7.2, "If the state is LISTEN", with SYN cookies (RFC 4987 §3.6):
    /// what to do with `seg`, from `remote` to `local`. `syn_cookies`: a SYN beyond the
    /// backlog is answered with a cookie.
    #[inline]
    pub fn on_segment(
        &self,
        now: Instant,
        (local, remote): (SocketAddr, SocketAddr),
        seg: &Repr<'_>,
        (cookies, syn_cookies): (&CookieJar, bool),
    ) -> ListenDisposition {
        // "First, check for a RST: An incoming RST segment could not be valid since it
        // could not have been sent in response to anything sent by this incarnation of
        // the connection. An incoming RST should be ignored. Return."
        if seg.flags.rst() {
            return ListenDisposition::Drop;
        }
        // "Second, check for an ACK: Any acknowledgment is bad if it arrives on a
        // connection still in the LISTEN state. An acceptable reset segment should be
        // formed for any arriving ACK-bearing segment. The RST should be formatted as
        // follows: <SEQ=SEG.ACK><CTL=RST>"
        if seg.flags.ack() {
            return self.on_ack(now, (local, remote), seg, cookies);
        }
        // "Third, check for a SYN"
        if seg.flags.syn() {
            if self.max_half_open.is_some_and(|max| self.pending >= max) {
                return ListenDisposition::HalfOpenFull;
            }
            return if self.pending + self.queue.len() < self.backlog {
                ListenDisposition::Open
            } else if syn_cookies {
                ListenDisposition::SendCookie
            } else {
                ListenDisposition::Overflow
            };
        }
        // "Fourth, other data or control: ... Any other control or text-bearing segment
        // (not containing SYN) must have an ACK and thus would have been discarded by the
        // ACK processing in the second step ... drop the segment and return."
        ListenDisposition::Drop
    }

    /// An ACK (and no RST) to the listener: a RST, unless a SYN cookie went lately and
    /// the ACK (no SYN) may return one.
    #[cold]
    #[inline(never)]
    fn on_ack(
        &self,
        now: Instant,
        ends: (SocketAddr, SocketAddr),
        seg: &Repr<'_>,
        cookies: &CookieJar,
    ) -> ListenDisposition {
        let reset = Reset::for_segment(ends.0, ends.1, seg);
        let recent = self
            .cookie_sent_at
            .is_some_and(|t| now.saturating_duration_since(t) < COOKIE_LIFETIME);
        if !recent || seg.flags.syn() {
            return ListenDisposition::Reset(reset);
        }
        let peer_isn = seg.seq.wrapping_sub(1);
        match cookies.check(now, ends, peer_isn, seg.ack.wrapping_sub(1)) {
            None => ListenDisposition::RejectCookie(reset),
            Some(_) if self.queue.len() >= self.backlog => ListenDisposition::CookieOverflow,
            Some(peer_mss) => ListenDisposition::AcceptCookie { peer_mss },
        }
    }
}
