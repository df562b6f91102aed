//! One connection: its state machine, timers and negotiated options, the user calls
//! (RFC 9293 §3.10.1-§3.10.6) and the timeouts (§3.10.8).
//!
//! Every `impl Conn` lives in this folder: `input.rs` (segment arrival, §3.10.7),
//! `predict.rs` (header prediction), `output.rs` (what to send), `recovery.rs` (loss
//! recovery), `ecn.rs`, `icmp.rs`, `share.rs` (RFC 9040) and `zero_copy.rs`. What they
//! work on (states, buffers, RACK, congestion control, the segment writer) stands
//! outside it and never imports `Conn`.
//!
//! A method takes what it uses: `now`, the `handle` its events name, `&TcpConfig`,
//! `&mut TcpStats`, the `Outbox` (events, RSTs, cookie SYN-ACKs), the `Pool` of
//! spare storage, the `PeerCaches`, the challenge-ACK RNG. Only the dispatchers,
//! which reach nearly all of them, take a `Ctx`.

mod ecn;
mod fastopen;
mod icmp;
mod input;
mod mtu;
mod options;
mod output;
mod park;
mod predict;
mod process;
mod recovery;
mod share;
mod zero_copy;

pub use mtu::MtuProbing;
pub(crate) use park::Parked;
pub use zero_copy::SendOwnedError;

use crate::tcp::shared::Outbox;
use core::net::SocketAddr;

use impnet_wire::tcp::Repr;

use crate::rng::Rng;
use crate::tcp::buffer::SendBuffer;
use crate::tcp::cc::{CcAlgorithm, CongestionControl, Controller, UsageTracker};
use crate::tcp::challenge::ChallengeBudget;
use crate::tcp::ecn::{EcnMode, EcnState, peer_agrees};
use crate::tcp::ends::Ends;
use crate::tcp::rack::RackCell;
use crate::tcp::rtt::{HandshakeTimer, RttEstimator};
use crate::tcp::sack::Scoreboard;
use crate::tcp::segment::{Reset, tsval};
use crate::tcp::seq::SeqNumber;
use crate::tcp::shared::{Pool, Shared};
use crate::tcp::socket_options::SocketOptions;
use crate::tcp::state::*;
use crate::tcp::timer::{Timer, Timers};
use crate::tcp::{TcpConfig, TcpError, TcpEvent, TcpHandle, TcpInfo, TcpStats};
use crate::time::Instant;

/// RFC 9293 §3.7.1: "the default ... [MSS] is 536" when the peer sends no MSS option.
pub(crate) const DEFAULT_MSS: u16 = 536;
/// RFC 7323 §2.3: "the shift count must be limited to 14".
pub(crate) const MAX_WSCALE: u8 = 14;

/// The context of one call into a connection's dispatchers (segment arrival, a
/// timeout, output, an ICMP error, a Fast Open SYN), which reach nearly all of
/// [`Shared`]; the methods they call take the parts they use instead.
pub(crate) struct Ctx<'a> {
    /// Current time.
    pub now: Instant,
    /// The connection's handle (for events).
    pub handle: TcpHandle,
    /// What all connections share: settings, counters, the event and RST queues.
    pub shared: &'a mut Shared,
}

/// Who is responsible for releasing a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// The user holds the handle; a dead connection stays until `close`/`abort`.
    User,
    /// The user closed it; released as soon as it reaches CLOSED.
    Released,
    /// A listener's child in SYN-RECEIVED.
    Pending(TcpHandle),
    /// A listener's child waiting in its accept queue.
    Queued(TcpHandle),
}

/// Negotiated timestamp state (RFC 7323 §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timestamps {
    /// TS.Recent: the peer's TSval to echo.
    pub recent: u32,
    /// Last.ACK.sent: the ACK field of our last segment.
    pub last_ack_sent: SeqNumber,
}

/// Options offered on our SYN, then (once the peer's SYN is in) what both sides agreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// The MSS we announced.
    pub mss_ours: u16,
    /// The peer's MSS (DEFAULT_MSS when it sent none).
    pub mss_peer: u16,
    /// Window scaling: (our shift, the peer's shift).
    pub wscale: Option<(u8, u8)>,
    /// Timestamps.
    pub ts: Option<Timestamps>,
    /// SACK permitted both ways.
    pub sack: bool,
    /// ECN (RFC 3168): offered (or, on a passive open, acceptable), then agreed.
    pub ecn: bool,
    /// The largest segment the path carries, from ICMP fragmentation-needed messages
    /// (RFC 1191): the path MTU less 40. `u16::MAX` until one arrives.
    pub path_mss: u16,
    /// The SYN's data was acknowledged with it (TCP Fast Open, RFC 7413): ours on a
    /// client, the peer's on a server child (Linux's `syn_data_acked`).
    pub syn_data_acked: bool,
    /// [`Negotiated::snd_mss`], worked out again by every change of what it depends
    /// on (`agree`, `set_mss_peer`, `set_path_mss`; `mss_ours` changes only in SYN-SENT,
    /// `lower_mss_ours`): a
    /// segment asks for it a dozen times.
    eff_snd_mss: u16,
}

impl Negotiated {
    /// What we offer, before the peer's SYN.
    pub fn offer(config: &TcpConfig, mss: u16, recv_buffer: usize) -> Negotiated {
        let shift = our_wscale(recv_buffer);
        Negotiated {
            mss_ours: mss,
            mss_peer: DEFAULT_MSS,
            wscale: config.window_scaling.then_some((shift, 0)),
            ts: config.timestamps.then_some(Timestamps {
                recent: 0,
                last_ack_sent: SeqNumber(0),
            }),
            sack: config.sack,
            ecn: config.ecn != EcnMode::Off,
            path_mss: u16::MAX,
            syn_data_acked: false,
            eff_snd_mss: 0,
        }
        .with_snd_mss()
    }
    /// `self` with `eff_snd_mss` worked out.
    fn with_snd_mss(mut self) -> Negotiated {
        self.refresh_snd_mss();
        self
    }
    /// Work out `eff_snd_mss` again (RFC 9293 §3.7.1, see [`Negotiated::snd_mss`]).
    fn refresh_snd_mss(&mut self) {
        let mss = self.mss_peer.min(self.mss_ours).min(self.path_mss);
        // At most 65535 - 0: fits, as does the floor of 1.
        self.eff_snd_mss = mss.saturating_sub(self.fixed_option_len() as u16).max(1);
    }
    /// Take the peer's MSS (from its SYN, or remembered with a Fast Open cookie).
    pub fn set_mss_peer(&mut self, mss: u16) {
        self.mss_peer = mss;
        self.refresh_snd_mss();
    }
    /// Take the largest segment the path carries (RFC 1191, RFC 4821).
    pub fn set_path_mss(&mut self, mss: u16) {
        self.path_mss = mss;
        self.refresh_snd_mss();
    }
    /// Announce at most `mss` on the SYNs still to go (the path carries no more; only
    /// before the peer has seen a SYN of ours acknowledged).
    pub fn lower_mss_ours(&mut self, mss: u16) {
        self.mss_ours = self.mss_ours.min(mss);
        self.refresh_snd_mss();
    }
    /// Keep only what the peer's SYN also offered (RFC 7323 §2.2, §3.2; RFC 2018 §2).
    pub fn agree(&mut self, seg: &Repr<'_>) {
        self.mss_peer = seg.options.mss.unwrap_or(DEFAULT_MSS).max(64);
        self.wscale = match (self.wscale, seg.options.window_scale) {
            // RFC 7323 §2.3: "If a Window Scale option is received with a shift.cnt
            // value larger than 14, the TCP SHOULD log the error but MUST use 14".
            (Some((ours, _)), Some(theirs)) => Some((ours, theirs.min(MAX_WSCALE))),
            _ => None,
        };
        self.ts = match (self.ts, seg.options.timestamps) {
            (Some(_), Some((tsval, _))) => Some(Timestamps {
                recent: tsval,
                last_ack_sent: SeqNumber(seg.seq) + 1,
            }),
            _ => None,
        };
        self.sack &= seg.options.sack_permitted;
        self.ecn &= peer_agrees(seg);
        self.refresh_snd_mss();
    }
    /// The largest segment (options included) we send: the peer's MSS, or less when
    /// the path carries less (RFC 1191).
    pub fn seg_mss(&self) -> u16 {
        self.mss_peer.min(self.path_mss)
    }
    /// Our window-scale shift (0 when not negotiated).
    pub fn rcv_shift(&self) -> u8 {
        self.wscale.map_or(0, |w| w.0)
    }
    /// The peer's window-scale shift (0 when not negotiated).
    pub fn snd_shift(&self) -> u8 {
        self.wscale.map_or(0, |w| w.1)
    }
    /// Option bytes on every non-SYN segment (timestamps: 10 + 2 NOPs).
    pub fn fixed_option_len(&self) -> usize {
        if self.ts.is_some() { 12 } else { 0 }
    }
    /// Largest payload of a segment without SACK blocks. RFC 9293 §3.7.1:
    /// "Eff.snd.MSS = min(SendMSS+20, MMS_S) - TCPhdrsize - IPoptionsize": bounded by the
    /// peer's MSS and by what our own route carries (`mss_ours`); the MSS counts data
    /// only, so option bytes come out of it.
    #[inline]
    pub fn snd_mss(&self) -> usize {
        debug_assert_eq!(
            usize::from(self.eff_snd_mss),
            usize::from(self.mss_peer.min(self.mss_ours).min(self.path_mss))
                .saturating_sub(self.fixed_option_len())
                .max(1),
            "a change of what the MSS depends on missed refresh_snd_mss"
        );
        usize::from(self.eff_snd_mss)
    }
}

/// The smallest shift that lets a window of `buffer` bytes fit 16 bits (RFC 7323 §2.3).
pub(crate) fn our_wscale(buffer: usize) -> u8 {
    let mut shift = 0;
    while shift < MAX_WSCALE && (buffer >> shift) > 0xffff {
        shift += 1;
    }
    shift
}

/// A pending probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// RFC 9293 §3.8.6.1 zero-window probe.
    Window,
    /// RFC 1122 §4.2.3.6 keep-alive probe.
    Keepalive,
}

/// Linux's TCP_CORK on one connection: while on, only full-sized segments go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Cork {
    /// Off: Nagle's algorithm (or no-delay) alone decides about a partial segment.
    #[default]
    Off,
    /// On: a partial segment waits for more data, the uncork, or [`Timer::Cork`].
    On,
    /// On, but a partial segment waited [`crate::tcp::CORK_CEILING`]: the data queued before
    /// this sequence number goes as if uncorked; after it the cork holds again.
    Lapsed(SeqNumber),
}

/// What few connections ever use, kept behind one pointer made on first use (an idle or
/// simple connection holds none: 73 bytes less each).
#[derive(Debug, Default)]
pub(crate) struct Cold {
    /// Data received and acknowledged but not yet read when the connection closed
    /// cleanly (TIME-WAIT or LAST-ACK ended while the user still held it): `recv`
    /// returns it before end of stream.
    pub unread: alloc::vec::Vec<u8>,
    /// This connection's challenge-ACK budget (RFC 5961 §7).
    pub challenge: ChallengeBudget,
    /// The settings the application gave this connection (or its listener) apart from
    /// the stack's: `options.rs`.
    pub options: crate::tcp::socket_options::SocketOptions,
    /// The push point (RFC 9293 §3.9.1.2 SEND with PUSH), where writes with MSG_MORE
    /// (`Conn::more`) left data after the end of the last write that pushed; None: the
    /// end of the queued data (every write pushes but one with MSG_MORE).
    pub push_at: Option<SeqNumber>,
    /// Where forced pushes within the last write count from: its start, when it was
    /// longer than half the largest window the peer offered (Linux's `pushed_seq` as
    /// the write began; `output::forced_push`). None: no such write, and forced pushes
    /// count back from the push point.
    pub forced_from: Option<SeqNumber>,
    /// Record boundaries in the send buffer (Linux's MSG_EOR, `Conn::end_record`): the
    /// sequence numbers where a record ends, ascending, none at or below SND.UNA once a
    /// new one is added. No segment spans one: data after a boundary starts a segment
    /// of its own, new or sent again.
    pub records: alloc::vec::Vec<SeqNumber>,
    /// Keep-alive probes sent without an answer (here: only a connection whose peer
    /// went quiet with keep-alive on sends any).
    pub keepalive_sent: u32,
    /// Retransmission timeouts in a row without progress (RFC 9293 §3.8.3 R2; read
    /// through [`Conn::retries`], cleared by [`Conn::clear_retries`]): here, as only a
    /// connection that met a timeout counts any.
    pub retries: u32,
    /// Linux's send chronographs, with `TcpConfig::send_chronographs`
    /// ([`Conn::update_chronograph`]).
    pub chronograph: crate::tcp::chrono::SendChronograph,
    /// The cork (TCP_CORK), which holds partial segments whatever `nodelay` says (read
    /// through [`Conn::cork`]): here, as only a connection the application corks has
    /// one on.
    pub cork: Cork,
    /// ECN echo and reduction state (used when `opts.ecn`, `ecn.rs`): here, as it only
    /// leaves its default once a CE mark arrives or an ECE cuts the window.
    pub ecn: EcnState,
    /// The last soft ICMP error about this connection (RFC 1122 §4.2.3.9): shown in
    /// `TcpInfo`, and the error a timeout reports (read through [`Conn::soft_error`]).
    pub soft_error: Option<TcpError>,
    /// Times the retransmission timer was backed off (RFC 6298 §5.5) since the last
    /// RTT sample, seed or handshake ([`RttEstimator::rto`]; read through
    /// [`Conn::rto`]): here, as only a connection that met a timeout has any.
    pub backoff: u32,
    /// Segments the connection retransmitted, saturating (for `TcpInfo`, as Linux's
    /// `tcpi_total_retrans`): here, as only a connection that lost or probed has any.
    pub retransmits: u32,
    /// Packetization-layer path MTU discovery's search (`mtu.rs`): here, boxed again,
    /// as only a connection that met a black hole (or probes from the start) has one.
    pub mtu: Option<alloc::boxed::Box<mtu::MtuSearch>>,
    /// With `TcpConfig::retransmit_process` (`process.rs`): the end and (last) send
    /// time of each segment not yet acknowledged, oldest first.
    pub letters: alloc::collections::VecDeque<(SeqNumber, Instant)>,
}

impl Cold {
    /// The first record boundary after `seq` (see `records`).
    pub fn record_end_after(&self, seq: SeqNumber) -> Option<SeqNumber> {
        self.records.iter().copied().find(|&end| end > seq)
    }
}

/// The first record boundary after `seq` of a connection's `cold` state, if any.
#[inline]
pub(crate) fn record_end_after(
    cold: Option<&alloc::boxed::Box<Cold>>,
    seq: SeqNumber,
) -> Option<SeqNumber> {
    match cold {
        Some(cold) if !cold.records.is_empty() => cold.record_end_after(seq),
        _ => None,
    }
}

/// Data waits and its next segment (up to `mss` bytes) does not fit in the peer's
/// window (Linux's `tcp_snd_wnd_test` failing in `tcp_write_xmit`).
fn window_limited(snd: &Snd, mss: usize) -> bool {
    let data_end = snd.data_end();
    if snd.snd_nxt >= data_end {
        return false;
    }
    let unsent = data_end - snd.snd_nxt;
    let window_end = snd.snd_una + snd.snd_wnd as usize;
    let room = if window_end > snd.snd_nxt {
        window_end - snd.snd_nxt
    } else {
        0
    };
    room < unsent.min(mss)
}

/// The RTO backoff of a connection's `cold` state ([`Cold::backoff`], where the
/// connection is borrowed in part).
#[inline]
pub(crate) fn backoff_of(cold: Option<&alloc::boxed::Box<Cold>>) -> u32 {
    cold.map_or(0, |cold| cold.backoff)
}

/// Set the RTO backoff of a connection's `cold` state back to 0 (nothing to do while
/// there is none).
#[inline]
pub(crate) fn clear_backoff(cold: &mut Option<alloc::boxed::Box<Cold>>) {
    if let Some(cold) = cold {
        cold.backoff = 0;
    }
}

/// The cork of a connection's `cold` state ([`Conn::cork`], where the connection is
/// borrowed in part).
#[inline]
pub(crate) fn cork_of(cold: Option<&alloc::boxed::Box<Cold>>) -> Cork {
    cold.map_or(Cork::Off, |cold| cold.cork)
}

/// One TCP connection.
#[derive(Debug)]
pub(crate) struct Conn {
    /// Our address and the peer's (read them through [`Conn::local`], [`Conn::remote`]).
    pub ends: Ends,
    /// Protocol state.
    pub state: State,
    /// Timer deadlines.
    pub timers: Timers,
    /// RTT estimator and RTO (RFC 6298).
    pub rtt: RttEstimator,
    /// Options offered / negotiated.
    pub opts: Negotiated,
    /// Who releases the connection.
    pub owner: Owner,
    /// What we owe in ACKs.
    pub ack: AckState,
    /// Nagle off.
    pub nodelay: bool,
    /// More data follows what is written now (Linux's MSG_MORE): a write does not move
    /// the push point (`Cold::push_at`).
    pub more: bool,
    /// The last write said more follows: a partial segment waits, as corked, until a
    /// segment arrives from the peer, a write without it, or the cork's ceiling (Linux
    /// corks only during the write; its tail goes on the next ACK, `tcp_data_snd_check`).
    pub more_held: bool,
    /// Segments still to acknowledge at once (quick-ACK mode, [`TcpConfig::quick_acks`],
    /// saturating at 255, far above Linux's 16: a `u8` keeps `Conn` 8 bytes smaller).
    pub quick_acks: u8,
    /// When in-order data last arrived (None before the first): a longer gap than
    /// the RTO restarts quick-ACK mode.
    pub last_data_at: Option<Instant>,
    /// Interactive mode
    /// ([`TcpConfig::interactive_delayed_ack`](crate::tcp::TcpConfig::interactive_delayed_ack), Linux's
    /// `icsk_ack.pingpong`): we sent data within the delayed-ACK time of the data last
    /// received, so the peer's data is acknowledged after the delay, quick-ACK mode
    /// notwithstanding. Only set with that switch on; the delayed-ACK timer clears it.
    pub interactive: bool,
    /// A probe to send at the next chance.
    pub probe: Option<Probe>,
    /// In the `Tcp`'s output queue.
    pub queued: bool,
    /// The deadline registered in the `Tcp`'s timer set.
    pub scheduled: Option<Instant>,
    /// In the `Tcp`'s 4-tuple map (false once CLOSED was reported).
    pub in_demux: bool,
    /// The unread data of a clean close and the challenge-ACK budget, once used.
    pub cold: Option<alloc::boxed::Box<Cold>>,
}

/// A reader for the `recv_each` forms that copies what it is shown into `out`, in
/// order (never more than `out` holds: they show at most `out.len()` bytes).
#[inline(always)]
pub(crate) fn copy_into(out: &mut [u8]) -> impl FnMut(&[u8]) + '_ {
    let mut at = 0;
    move |piece: &[u8]| {
        crate::tcp::buffer::copy_bytes(&mut out[at..at + piece.len()], piece);
        at += piece.len();
    }
}

/// A connection's [`Cold`] part, made when it first needs one: out of line (the
/// box and the zeroed state are a large inlined copy at every place that may make it,
/// most of them on hot paths that almost never do).
#[cold]
#[inline(never)]
pub(super) fn new_cold() -> alloc::boxed::Box<Cold> {
    alloc::boxed::Box::default()
}

impl Conn {
    /// Retransmission timeouts in a row without progress (RFC 9293 §3.8.3 R2).
    #[inline]
    pub fn retries(&self) -> u32 {
        self.cold.as_ref().map_or(0, |cold| cold.retries)
    }
    /// Progress: the count of timeouts in a row starts again.
    #[inline]
    pub fn clear_retries(&mut self) {
        if let Some(cold) = &mut self.cold {
            cold.retries = 0;
        }
    }
    /// New data acknowledged up to `ack`: the timeouts in a row end
    /// ([`Conn::clear_retries`]), and a path MTU probe it covers passed (`mtu.rs`).
    fn on_progress(&mut self, ack: SeqNumber, now: Instant, probe_threshold: u16) {
        if let Some(cold) = &mut self.cold {
            cold.retries = 0;
            if cold.mtu.is_some() {
                Conn::mtu_probe_on_ack(cold, &mut self.opts, ack, now, probe_threshold);
            }
        }
    }
    /// With `TcpConfig::send_chronographs`, after every call into the connection:
    /// what limits sending now starts its chronograph at `now` if it changed (Linux
    /// starts and stops them in `tcp_skb_entail`, `tcp_write_xmit`, `tcp_ack`).
    pub fn update_chronograph(&mut self, now: Instant) {
        use crate::tcp::chrono::SendLimit;
        let limit = match self.state.snd() {
            Some(snd) if !snd.buffer.is_empty() => {
                if window_limited(snd, self.opts.snd_mss()) {
                    SendLimit::ReceiveWindow
                } else {
                    SendLimit::Busy
                }
            }
            _ => SendLimit::Idle,
        };
        let current = self
            .cold
            .as_ref()
            .map_or(SendLimit::Idle, |cold| cold.chronograph.current);
        if limit != current {
            let cold = self.cold.get_or_insert_with(new_cold);
            cold.chronograph.set(limit, now);
        }
    }
    /// The cork (TCP_CORK, [`Cold::cork`]).
    #[inline]
    pub fn cork(&self) -> Cork {
        cork_of(self.cold.as_ref())
    }
    /// The retransmission timeout to arm now, backoff included, at most `max_rto`.
    #[inline]
    pub fn rto(&self, max_rto: crate::time::Duration) -> crate::time::Duration {
        self.rtt.rto(backoff_of(self.cold.as_ref()), max_rto)
    }
    /// A valid RTT sample, a seed or the handshake: the path answers, the backoff
    /// starts again (RFC 6298 §5.7 resets it on a new sample).
    #[inline]
    pub fn reset_backoff(&mut self) {
        clear_backoff(&mut self.cold);
    }
    /// One more segment retransmitted ([`Cold::retransmits`]).
    fn count_retransmit(cold: &mut Option<alloc::boxed::Box<Cold>>) {
        let cold = cold.get_or_insert_with(new_cold);
        cold.retransmits = cold.retransmits.saturating_add(1);
    }
    /// The last soft ICMP error (RFC 1122 §4.2.3.9, [`Cold::soft_error`]).
    #[inline]
    pub fn soft_error(&self) -> Option<TcpError> {
        self.cold.as_ref().and_then(|cold| cold.soft_error)
    }
    /// The ECN state ([`Cold::ecn`]; the default while there is no cold part).
    #[inline]
    pub fn ecn(&self) -> EcnState {
        self.cold
            .as_ref()
            .map_or_else(EcnState::default, |cold| cold.ecn)
    }
    /// The ECN state, to change (the cold part is made if needed).
    pub fn ecn_mut(&mut self) -> &mut EcnState {
        &mut self.cold.get_or_insert_with(new_cold).ecn
    }
    /// The cork, to change.
    fn cork_mut(&mut self) -> &mut Cork {
        &mut self.cold.get_or_insert_with(new_cold).cork
    }
    /// Our address.
    #[inline]
    pub fn local(&self) -> SocketAddr {
        self.ends.local()
    }
    /// The peer's address.
    #[inline]
    pub fn remote(&self) -> SocketAddr {
        self.ends.remote()
    }
    /// RFC 5961 §7: "limit the number of challenge ACKs sent per second": true when this
    /// connection may send one more now (and counts it).
    pub fn challenge_allowed(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        rng: &mut Rng,
    ) -> bool {
        let limit = config.challenge_ack_limit;
        let cold = self.cold.get_or_insert_with(new_cold);
        let allowed = cold.challenge.allow(now, rng, limit);
        if allowed {
            stats.challenge_acks += 1;
        } else {
            stats.challenge_acks_limited += 1;
        }
        allowed
    }

    #[inline(always)]
    fn new(
        config: &TcpConfig,
        local: SocketAddr,
        remote: SocketAddr,
        state: State,
        opts: Negotiated,
        owner: Owner,
        cold: Option<alloc::boxed::Box<Cold>>,
    ) -> Conn {
        Conn {
            ends: Ends::new(local, remote),
            state,
            timers: Timers::default(),
            rtt: RttEstimator::new(config.initial_rto, config.rto_bounds()),
            opts,
            owner,
            ack: AckState::Idle,
            nodelay: config.nodelay,
            more: false,
            more_held: false,
            quick_acks: 0,
            last_data_at: None,
            interactive: false,
            probe: None,
            queued: false,
            scheduled: None,
            in_demux: true,
            cold,
        }
    }

    /// RFC 9293 §3.10.1 OPEN (active): "Select an initial send sequence number (ISS).
    /// Send a SYN segment of the form <SEQ=ISS><CTL=SYN>. Set SND.UNA to ISS, SND.NXT
    /// to ISS+1, enter SYN-SENT state".
    pub fn connect(
        config: &TcpConfig,
        pool: &mut Pool,
        local: SocketAddr,
        remote: SocketAddr,
        iss: SeqNumber,
        mss: u16,
    ) -> Conn {
        let buffer = pool.send_buffer_of(config.send_buffer);
        let state = State::SynSent(SynSent {
            iss,
            snd_nxt: iss,
            buffer,
            timer: HandshakeTimer::new(),
            fast_open: Default::default(),
            syn_data: 0,
        });
        let mut opts = Negotiated::offer(config, mss, config.recv_buffer);
        // Our own SYN asks for ECN only in `Request` mode (RFC 3168 §6.1.1).
        opts.ecn = config.ecn == EcnMode::Request;
        Conn::new(config, local, remote, state, opts, Owner::User, None)
    }

    /// A listener's child for the SYN `seg` (RFC 9293 §3.10.7.2, "third, check for a
    /// SYN"): "Set RCV.NXT to SEG.SEQ+1, IRS is set to SEG.SEQ ... ISS should be selected
    /// and a SYN segment sent of the form: <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK>".
    pub fn accept_syn(
        config: &TcpConfig,
        pool: &mut Pool,
        (local, remote): (SocketAddr, SocketAddr),
        iss: SeqNumber,
        seg: &Repr<'_>,
        (listener, options): (TcpHandle, Option<&SocketOptions>),
        mss: u16,
    ) -> Conn {
        let recv_size = options
            .and_then(|o| o.recv_buffer)
            .map_or(config.recv_buffer, |b| b as usize);
        let send_size = options
            .and_then(|o| o.send_buffer)
            .map_or(config.send_buffer, |b| b as usize);
        let rcv_buffer = pool.recv_buffer_of(recv_size, config.max_ooo_ranges);
        let buffer = pool.send_buffer_of(send_size);
        let mut opts = Negotiated::offer(config, mss, recv_size);
        opts.agree(seg);
        let state = State::SynRcvd(SynRcvd {
            iss,
            snd_nxt: iss,
            snd_wnd: u32::from(seg.window),
            passive: true,
            rcv: Rcv::new(rcv_buffer, SeqNumber(seg.seq), opts.rcv_shift()),
            buffer,
            timer: HandshakeTimer::new(),
            cookie: None,
        });
        // The connection is what the function returns, built there: a connection
        // changed after `Conn::new` is copied to the caller whole.
        let cold = Conn::inherited(options);
        Conn::new(
            config,
            local,
            remote,
            state,
            opts,
            Owner::Pending(listener),
            cold,
        )
    }

    /// A child opened from a SYN cookie: its SYN-ACK already went (statelessly).
    pub fn syn_ack_sent(&mut self) {
        if let State::SynRcvd(s) = &mut self.state {
            s.snd_nxt = s.iss + 1;
        }
    }

    /// [`enter_closed`](Self::enter_closed) from a dispatcher that holds the whole
    /// context of the call.
    #[inline]
    pub(super) fn close_in(&mut self, ctx: &mut Ctx<'_>, error: Option<TcpError>) {
        let shared = &mut *ctx.shared;
        self.enter_closed(
            ctx.handle,
            &shared.config,
            &mut shared.stats,
            &mut shared.out,
            &mut shared.pool,
            error,
        );
    }

    /// [`on_text`](Self::on_text) from a dispatcher that holds the whole context of
    /// the call.
    #[inline]
    pub(super) fn on_text_in(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) {
        let shared = &mut *ctx.shared;
        self.on_text(
            ctx.now,
            ctx.handle,
            &shared.config,
            &mut shared.stats,
            &mut shared.out,
            seg,
        );
    }

    /// [`start_snd`](Self::start_snd) from a dispatcher that holds the whole context
    /// of the call.
    #[inline]
    pub(super) fn start_snd_in(&mut self, ctx: &mut Ctx<'_>, snd: &mut Snd) {
        let shared = &mut *ctx.shared;
        self.start_snd(
            ctx.now,
            &shared.config,
            &mut shared.stats,
            &mut shared.pool,
            &mut shared.peers,
            snd,
        );
    }

    /// Enter CLOSED, remembering why.
    pub fn enter_closed(
        &mut self,
        handle: TcpHandle,
        config: &TcpConfig,
        stats: &mut TcpStats,
        out: &mut Outbox,
        pool: &mut Pool,
        error: Option<TcpError>,
    ) {
        if let Some(err) = error {
            if matches!(self.state, State::SynSent(_) | State::SynRcvd(_)) {
                stats.failed_opens += 1;
            }
            if err == TcpError::TimedOut {
                stats.timed_out += 1;
            }
        }
        let reset_keeps = error == Some(TcpError::ConnectionReset)
            && config.reset_keeps_data
            && matches!(self.owner, Owner::User | Owner::Queued(_));
        if error.is_none() || reset_keeps {
            keep_unread_of(self.owner, &mut self.cold, &mut self.state, reset_keeps);
        }
        // The state left is emptied and written over where it lies, not moved out.
        pool.recycle_state(&mut self.state);
        self.state = State::Closed(Closed { error });
        self.timers.stop_all();
        self.ack = AckState::Idle;
        self.probe = None;
        // Wake readers and writers: their calls now report the end.
        out.event(stats, TcpEvent::Readable(handle));
        out.event(stats, TcpEvent::Writable(handle));
    }

    /// A clean close must not lose what the user has not read yet (found by fuzz
    /// target tcp_conn: after shutdown_write, TIME-WAIT's end or its reuse by a new SYN
    /// dropped it): keep it from `old`, the state just left, for `recv`.
    /// With `queued_too` (a reset under `TcpConfig::reset_keeps_data`), also for a
    /// child still in its listener's accept queue.
    pub fn keep_unread(&mut self, old: &mut State, queued_too: bool) {
        keep_unread_of(self.owner, &mut self.cold, old, queued_too);
    }

    /// What [`Conn::keep_unread`] kept and `recv` has not returned yet.
    pub fn unread(&self) -> &[u8] {
        self.cold.as_ref().map_or(&[], |cold| &cold.unread)
    }

    /// [`Conn::unread`], to drain; None when empty.
    fn unread_mut(&mut self) -> Option<&mut alloc::vec::Vec<u8>> {
        let cold = self.cold.as_mut()?;
        (!cold.unread.is_empty()).then_some(&mut cold.unread)
    }

    /// The RST that aborts this connection, None in states where no RST is sent.
    /// RFC 9293 §3.10.5 ABORT gives "<SEQ=SND.NXT><CTL=RST>"; the ACK bit is the
    /// sender's choice there (the peer checks only the sequence number, §3.10.7.4), and
    /// imp sends <SEQ=SND.NXT><ACK=RCV.NXT><CTL=RST,ACK> as Linux does
    /// (`tcp_send_active_reset`).
    pub fn abort_reset(&self, now: Instant) -> Option<Reset> {
        match &self.state {
            State::SynSent(_) | State::Closed(_) | State::TimeWait(_) => None,
            state => {
                let seq = state.snd_seq_for_ack()?;
                Some(Reset {
                    local: self.local(),
                    remote: self.remote(),
                    seq: seq.0,
                    ack: state.rcv_nxt().map(|rcv_nxt| rcv_nxt.0),
                    timestamps: self.opts.ts.map(|ts| (tsval(now), ts.recent)),
                })
            }
        }
    }

    /// RFC 9293 §3.10.2 SEND.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, TcpError> {
        self.send_vectored(core::iter::once(data))
    }

    /// SEND of several slices in one call (a gather write): each is appended to the
    /// send buffer in order until it is full, before output runs, so a response's head
    /// and body leave together instead of the body waiting behind Nagle's algorithm.
    /// Returns the bytes taken; `WouldBlock` when there was data and no room for any.
    pub fn send_vectored<'a>(
        &mut self,
        slices: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<usize, TcpError> {
        let mut room = self.send_room();
        let buffer = self.send_buffer()?;
        let (mut taken, mut offered) = (0, false);
        for data in slices {
            if data.is_empty() {
                continue;
            }
            offered = true;
            let n = buffer.write(&data[..data.len().min(room)]);
            taken += n;
            room -= n;
            if n < data.len() {
                break;
            }
        }
        if taken > 0 {
            self.move_push_point(taken);
        }
        match taken {
            0 if offered => Err(TcpError::WouldBlock),
            n => Ok(n),
        }
    }

    /// SEND of up to `len` bytes the application writes straight into the send buffer
    /// ([`SendBuffer::write_with`]: `fill` is given the space they go to, one piece or
    /// two, and writes all of it): [`Conn::send`] without the copy. Returns the bytes
    /// taken; `WouldBlock` when `len` was not zero and there was no room for any.
    pub fn send_with(
        &mut self,
        len: usize,
        fill: impl FnMut(&mut [u8]),
    ) -> Result<usize, TcpError> {
        let room = self.send_room();
        let buffer = self.send_buffer()?;
        let taken = match len.min(room) {
            0 => 0,
            n => buffer.write_with(n, fill),
        };
        if taken > 0 {
            self.move_push_point(taken);
        }
        match taken {
            0 if len > 0 => Err(TcpError::WouldBlock),
            n => Ok(n),
        }
    }

    /// How much a write may queue: unlimited but when the socket set
    /// TCP_NOTSENT_LOWAT (computed only then).
    #[inline]
    fn send_room(&self) -> usize {
        self.cold
            .as_ref()
            .map_or(usize::MAX, |_| self.notsent_room().unwrap_or(usize::MAX))
    }

    /// With [`Pool::release_rings`] (many connections open): give the rings' storage
    /// back to `pool` where a ring holds nothing: the send ring
    /// once everything written is acknowledged, the receive ring once everything
    /// received is read. A connection that carried data and went quiet then holds no
    /// ring (as Linux frees a socket's buffers once they are empty), and the next
    /// connection to write or receive takes the storage from the pool
    /// ([`Conn::supply_send_ring`], [`Conn::supply_recv_ring`]) instead of allocating.
    /// A large ring the pool would not keep stays (its connection moves bulk data).
    #[inline]
    pub(crate) fn shed_rings(&mut self, pool: &mut Pool) {
        if !pool.release_rings {
            return;
        }
        if let Some(snd) = self.state.snd_mut()
            && snd.buffer.storage() != 0
            && snd.buffer.is_empty()
            && pool.would_keep(snd.buffer.storage())
        {
            pool.recycle(snd.buffer.take_storage_if_empty());
        }
        if let Some(buffer) = self.state.recv_buffer_mut()
            && buffer.storage() != 0
            && buffer.readable() == 0
            && pool.would_keep(buffer.storage())
        {
            pool.recycle(buffer.take_storage_if_empty());
        }
    }

    /// Before a write, with [`Pool::release_rings`]: spare storage from `pool` under a
    /// send ring that has none.
    #[inline]
    pub(crate) fn supply_send_ring(&mut self, pool: &mut Pool) {
        if !pool.release_rings {
            return;
        }
        if let Some(snd) = self.state.snd_mut()
            && snd.buffer.storage() == 0
        {
            let spare = pool.spare_storage(snd.buffer.capacity());
            if !spare.is_empty() {
                pool.recycle(snd.buffer.adopt_storage(spare));
            }
        }
    }

    /// Before data arrives, with [`Pool::release_rings`]: spare storage from `pool`
    /// under a receive ring that has none.
    #[inline]
    pub(crate) fn supply_recv_ring(&mut self, pool: &mut Pool) {
        if !pool.release_rings {
            return;
        }
        if let Some(rcv) = self.state.rcv_mut()
            && rcv.buffer.storage() == 0
        {
            let spare = pool.spare_storage(rcv.buffer.capacity());
            if !spare.is_empty() {
                pool.recycle(rcv.buffer.adopt_storage(spare));
            }
        }
    }

    /// The send buffer a write goes to, or why the connection takes no more data.
    #[inline]
    fn send_buffer(&mut self) -> Result<&mut SendBuffer, TcpError> {
        match &mut self.state {
            State::SynSent(s) => Ok(&mut s.buffer),
            State::SynRcvd(s) => Ok(&mut s.buffer),
            State::Established(s) => Ok(&mut s.snd.buffer),
            State::CloseWait(s) => Ok(&mut s.snd.buffer),
            State::Closed(Closed { error: Some(e) }) => Err(*e),
            // "FIN-WAIT-1 STATE ... Return "error: connection closing" and do not service
            // request." (Also after a clean end: our FIN went.)
            _ => Err(TcpError::Closing),
        }
    }

    /// After a write: RFC 9293 §3.9.1.2, a SEND with PUSH "causes the data to be
    /// transmitted promptly" and the receiver to deliver it; as Linux (`tcp_push`),
    /// every write but one with MSG_MORE ends with a push. A write with it (of `taken`
    /// bytes) keeps the push point where it was: the end of the data queued before it.
    fn move_push_point(&mut self, taken: usize) {
        self.more_held = self.more;
        // A write of a segment or less (the common small one) with no `Cold` has
        // nothing to note: forced pushes within it count back from its end.
        if self.cold.is_some() || taken > self.opts.snd_mss() {
            self.note_forced_from(taken);
        }
        if !self.more {
            if let Some(cold) = self.cold.as_mut() {
                cold.push_at = None;
            }
            return;
        }
        if let Some(end) = self.state.snd().map(|snd| snd.data_end() - taken) {
            let cold = self.cold.get_or_insert_with(new_cold);
            cold.push_at.get_or_insert(end);
        }
    }

    /// `Cold::forced_from` after a write of `taken` bytes: its start when it is longer
    /// than half the largest window the peer offered, else none.
    fn note_forced_from(&mut self, taken: usize) {
        if let Some(snd) = self.state.snd() {
            let start = snd.data_end() - taken;
            if taken > snd.max_snd_wnd as usize / 2 {
                self.cold.get_or_insert_with(new_cold).forced_from = Some(start);
            } else if let Some(cold) = self.cold.as_mut() {
                cold.forced_from = None;
            }
        }
    }

    /// End a record at the end of the data queued so far (Linux's MSG_EOR on the write
    /// that queued it): no segment carries data from both sides of this point, so a
    /// later write starts a segment of its own, and the segment that ends the record
    /// carries PSH (the write ended with a push). Nothing queued since the last
    /// boundary (or nothing unacknowledged): nothing to mark.
    pub fn end_record(&mut self) {
        let Some((snd_una, end)) = self.state.snd().map(|snd| (snd.snd_una, snd.data_end())) else {
            return;
        };
        if end <= snd_una {
            return;
        }
        let cold = self.cold.get_or_insert_with(new_cold);
        cold.records.retain(|&at| at > snd_una);
        if cold.records.last().is_none_or(|&last| last < end) {
            cold.records.push(end);
        }
    }

    /// Let what a write with more to follow held go (`more_held`), and its ceiling
    /// with it unless the cork holds data too.
    pub fn release_more(&mut self) {
        self.more_held = false;
        if self.cork() == Cork::Off {
            self.timers.stop(Timer::Cork);
        }
    }

    /// Put the cork on or take it off (Linux's TCP_CORK). Off, what waited goes as
    /// Nagle's algorithm (or no-delay) allows; the table queues the connection for
    /// output.
    pub fn set_cork(&mut self, on: bool) {
        match (on, self.cork()) {
            (true, Cork::Off) => *self.cork_mut() = Cork::On,
            (true, _) => {}
            (false, cork) => {
                if cork != Cork::Off {
                    *self.cork_mut() = Cork::Off;
                }
                self.timers.stop(Timer::Cork);
            }
        }
    }

    /// After the user read `freed` bytes: RFC 9293 §3.8.6.2.2, send a window update
    /// only when the right edge can move by min(RCV.BUFF/2, Eff.snd.MSS) (receiver SWS
    /// avoidance), and at once only when the peer may be stalled on a small window or
    /// this read took the opening past half the buffer. Space free before the read but
    /// not announced
    /// (a SYN-ACK's unscaled window holds at most 65535 bytes) is no reason for an ACK
    /// of its own: the next segment carries it, as Linux's window grows from the
    /// SYN's with the data that arrives, not on a read.
    pub(super) fn maybe_window_update(&mut self, recv_buffer: usize, freed: usize) {
        let mss = usize::from(self.opts.mss_ours);
        let Some(rcv) = self.state.rcv() else { return };
        if !matches!(
            self.state,
            State::Established(_) | State::FinWait1(_) | State::FinWait2(_)
        ) {
            return;
        }
        // The edge a segment can carry: the window field holds 16 bits, scaled (RFC
        // 7323 §2.3); a read that frees space beyond it moves no edge the peer sees.
        let most = 0xffff_usize << self.opts.rcv_shift();
        let new_edge = rcv.rcv_nxt + rcv.buffer.window().min(most);
        let advertised = rcv.advertised();
        if new_edge > rcv.rcv_adv && (new_edge - rcv.rcv_adv) >= (recv_buffer / 2).min(mss) {
            // Worth telling; urgent when the peer may be stalled on a small window.
            // Half the buffer opened by this read: the edge before it was short of that.
            let old_edge = rcv.rcv_nxt + rcv.buffer.window().saturating_sub(freed).min(most);
            let crossed = new_edge - rcv.rcv_adv >= recv_buffer / 2
                && (old_edge <= rcv.rcv_adv || old_edge - rcv.rcv_adv < recv_buffer / 2);
            if advertised < mss || crossed {
                self.ack = AckState::Now;
            }
        }
    }

    /// RFC 9293 §3.10.4 CLOSE, as a half-close: queue our FIN after the data.
    pub fn shutdown_write(&mut self) -> Result<(), TcpError> {
        match &self.state {
            // "SYN-SENT STATE: Delete the TCB and return "error: closing" responses to any
            // queued SENDs, or RECEIVEs." We delete it only when nothing was sent yet;
            // data written before the handshake still goes, followed by the FIN (as the
            // SYN-RECEIVED rule below does). A half-close must wait for the handshake.
            State::SynSent(s) if self.owner == Owner::Released && s.buffer.is_empty() => {
                self.state = State::Closed(Closed { error: None });
                self.timers.stop_all();
                Ok(())
            }
            // "SYN-RECEIVED STATE: If no SENDs have been issued and there is no pending
            // data to send, then form a FIN segment and send it, and enter FIN-WAIT-1
            // state; otherwise, queue for processing after entering ESTABLISHED state."
            // We always queue: `Owner::Released` is applied when the handshake completes
            // (see `input::on_established`).
            State::SynSent(_) | State::SynRcvd(_) if self.owner == Owner::Released => Ok(()),
            State::SynSent(_) | State::SynRcvd(_) | State::Closed(_) => Err(TcpError::InvalidState),
            // "ESTABLISHED STATE: Queue this until all preceding SENDs have been
            // segmentized, then form a FIN segment and send it. In any case, enter
            // FIN-WAIT-1 state." "CLOSE-WAIT STATE: Queue this request until all
            // preceding SENDs have been segmentized; then send a FIN segment, enter
            // LAST-ACK state."
            State::Established(_) | State::CloseWait(_) => {
                self.state.queue_fin();
                Ok(())
            }
            // Already closing: "Respond with "error: connection closing"", harmless here.
            _ => Ok(()),
        }
    }

    /// The error the connection ended with, if it ended with one.
    pub fn error(&self) -> Option<TcpError> {
        match self.state {
            State::Closed(Closed { error }) => error,
            _ => None,
        }
    }

    /// A snapshot for [`crate::tcp::Tcp::info`].
    pub fn info(&self, config: &TcpConfig) -> TcpInfo {
        let snd = self.state.snd();
        let rcv_wnd = self.state.rcv().map_or(0, |r| r.advertised() as u32);
        TcpInfo {
            state: self.state.name(),
            cwnd: snd.map_or(0, |s| s.cc.cwnd() as u32),
            ssthresh: snd.map_or(0, |s| s.cc.ssthresh().min(u32::MAX as usize) as u32),
            srtt: self.rtt.srtt(),
            rttvar: self.rtt.rttvar(),
            rto: self.rto(config.rto_bounds().max),
            bytes_in_flight: snd.map_or(0, |s| s.outstanding() as u32),
            bytes_queued: snd.map_or(0, |s| s.buffer.len() as u32),
            retransmits: u64::from(self.cold.as_ref().map_or(0, |cold| cold.retransmits)),
            sacked: snd.map_or(0, |s| s.scoreboard.sacked_bytes() as u32),
            in_recovery: snd.is_some_and(|s| s.loss.in_recovery()),
            lost: snd.map_or(0, |s| {
                let repairing = s.loss.in_repair();
                s.rack().log.deemed_lost_bytes(repairing) as u32
            }),
            reordering: snd.map_or(0, |s| s.rack().reorder_extent),
            reord_seen: snd.map_or(0, |s| s.rack().reord_seen),
            // Linux's `tcpi_delivered`: the SYN (or SYN-ACK) once acknowledged, then
            // the data; none known once the sending half is gone.
            delivered: snd.map_or(0, |s| {
                let handshake = u32::from(!self.fast_open_awaits_ack());
                handshake.saturating_add(s.delivered_segments(self.opts.snd_mss()))
            }),
            chronograph: self
                .cold
                .as_ref()
                .map_or_else(Default::default, |cold| cold.chronograph),
            snd_mss: self.opts.snd_mss() as u16,
            soft_error: self.soft_error(),
            path_mtu: (self.opts.path_mss != u16::MAX).then(|| self.opts.path_mss + 40),
            rcv_wnd,
            snd_wnd: snd.map_or(0, |s| s.snd_wnd),
            wscale: self.opts.wscale,
            timestamps: self.opts.ts.is_some(),
            sack: self.opts.sack,
            syn_data_acked: self.opts.syn_data_acked,
            last_data_at: self.last_data_at,
            ecn: self.opts.ecn,
            congestion: snd.map_or(self.congestion(config).name(), |s| s.cc.name()),
            pacing_rate: snd.and_then(|s| {
                let window =
                    |srtt| crate::tcp::pacing::window_rate(s.cc.cwnd(), srtt, s.cc.in_slow_start());
                s.cc.pacing_rate().or_else(|| self.rtt.srtt().map(window))
            }),
        }
    }
}

/// [`Conn::keep_unread`] on the parts it reads, so that a connection can keep what
/// its own state holds before that state is written over.
fn keep_unread_of(
    owner: Owner,
    cold: &mut Option<alloc::boxed::Box<Cold>>,
    old: &mut State,
    queued_too: bool,
) {
    let owned = match owner {
        Owner::User => true,
        Owner::Queued(_) => queued_too,
        _ => false,
    };
    if let (true, Some(buffer)) = (owned, old.recv_buffer_mut()) {
        if buffer.readable() == 0 && cold.is_none() {
            return;
        }
        let cold = cold.get_or_insert_with(new_cold);
        cold.unread = alloc::vec![0; buffer.readable()];
        buffer.read(&mut cold.unread);
    }
}

/// A fresh sending half once the handshake is done: SND.UNA = ISS+1.
pub(crate) fn new_snd(
    (config, congestion): (&TcpConfig, CcAlgorithm),
    opts: &Negotiated,
    iss: SeqNumber,
    buffer: SendBuffer,
    wnd: u32,
    wl1: SeqNumber,
) -> Snd {
    let mss = opts.snd_mss();
    let cc = Controller::new(
        congestion,
        mss,
        config.initial_window as usize,
        config.window_rules(),
    );
    let snd_una = iss + 1;
    let rate = cc.wants_rate_samples().then(Default::default);
    let pacing = config.pacing.unwrap_or(cc.pacing_rate().is_some());
    Snd {
        snd_una,
        snd_nxt: snd_una,
        snd_max: snd_una,
        snd_wnd: wnd,
        snd_wl1: wl1,
        snd_wl2: snd_una,
        max_snd_wnd: wnd,
        buffer,
        cc,
        cwnd_usage: UsageTracker::new(snd_una),
        scoreboard: Scoreboard::new(),
        loss: LossCell::default(),
        high_rxt: snd_una,
        snd_sml: snd_una,
        dup_acks: 0,
        probe_count: 0,
        tso: false,
        last_send: None,
        rack: RackCell::default(),
        rack_enabled: config.rack && opts.sack,
        rack_min_rtt: None,
        rate,
        pacing,
        pacer: Default::default(),
        pair_open: false,
        data_start: snd_una,
    }
}

impl Conn {
    /// Start the FIN-WAIT-2 limit of a connection the application has closed
    /// (`TcpConfig::fin_wait_2_timeout`); nothing in any other case.
    pub fn arm_fin_wait_2(&mut self, now: Instant, config: &TcpConfig) {
        if let (State::FinWait2(_), Owner::Released, Some(limit)) =
            (&self.state, self.owner, config.fin_wait_2_timeout)
        {
            self.timers.set(Timer::TimeWait, now + limit);
        }
    }

    /// A timer fired (RFC 9293 §3.10.8).
    pub fn handle_timeout(&mut self, ctx: &mut Ctx<'_>, timer: Timer) {
        match timer {
            Timer::Retransmit => self.on_retransmit_timeout(ctx),
            Timer::DelayedAck => {
                if self.ack != AckState::Idle {
                    ctx.shared.stats.delayed_acks += 1;
                    self.ack = AckState::Now;
                    // Linux's `tcp_delack_timer_handler`: "Delayed ACK missed: leave
                    // pingpong mode".
                    self.interactive = false;
                }
            }
            Timer::Persist => self.probe = Some(Probe::Window),
            // tcp(7) TCP_CORK: "If this ceiling is reached, then queued data is
            // automatically transmitted."
            Timer::Cork => {
                if let (Cork::On, Some(snd)) = (self.cork(), self.state.snd()) {
                    let end = snd.data_end();
                    *self.cork_mut() = Cork::Lapsed(end);
                } else if self.more_held {
                    // Linux sends MSG_MORE's tail from its probe timer, with PSH
                    // (`tcp_write_wakeup`): the push point moves to it.
                    self.more_held = false;
                    if let Some(cold) = self.cold.as_mut() {
                        cold.push_at = None;
                    }
                }
            }
            Timer::Keepalive => self.on_keepalive_timeout(ctx),
            // The paced segment may go now: the table polls a connection that may send.
            Timer::Pace => {}
            // "When a timeout occurs in the TIME-WAIT state, delete the TCB, enter the
            // CLOSED state, and return." The same timer ends an orphaned FIN-WAIT-2
            // (`TcpConfig::fin_wait_2_timeout`).
            Timer::TimeWait => {
                if let State::FinWait2(_) = self.state {
                    ctx.shared.stats.fin_wait_2_timeouts += 1;
                }
                self.close_in(ctx, None);
            }
            // "If a timeout occurs, flush all queues, signal the user "error: connection
            // aborted due to user timeout" ..., enter the CLOSED state, and return."
            Timer::UserTimeout => self.time_out(ctx),
            Timer::Reorder => {
                self.on_reorder_timeout(ctx.now, &ctx.shared.config, &mut ctx.shared.stats)
            }
            Timer::LossProbe => self.on_probe_timeout(ctx.now, &ctx.shared.config),
        }
    }

    /// Give up: RST the peer (when synchronized) and report `TimedOut`.
    fn time_out(&mut self, ctx: &mut Ctx<'_>) {
        if self.state.synchronized()
            && let Some(reset) = self.abort_reset(ctx.now)
        {
            ctx.shared.out.reset(reset);
        }
        // RFC 1122 §4.2.3.9: a soft ICMP error seen on the way is the better report.
        let error = self.soft_error().unwrap_or(TcpError::TimedOut);
        if error != TcpError::TimedOut {
            ctx.shared.stats.timed_out += 1;
        }
        self.close_in(ctx, Some(error));
    }

    /// RFC 6298 §5.4-5.7 and RFC 5681 §3.1 on a retransmission timeout.
    fn on_retransmit_timeout(&mut self, ctx: &mut Ctx<'_>) {
        let config = &ctx.shared.config;
        if config.retransmit_due_only && self.process_finds_nothing_due(config, ctx.now) {
            return;
        }
        let limit = if self.state.synchronized() {
            config.max_retransmits
        } else {
            self.options()
                .and_then(|o| o.syn_retries)
                .map_or(config.syn_retransmits, u32::from)
        };
        let cold = self.cold.get_or_insert_with(new_cold);
        if cold.retries >= limit {
            return self.time_out(ctx);
        }
        ctx.shared.stats.timeouts += 1;
        cold.retries += 1;
        if cold
            .mtu
            .as_ref()
            .is_some_and(|search| search.probe.is_some())
        {
            self.mtu_probe_timed_out(ctx.now, &ctx.shared.config);
        }
        let retries = self.cold.as_ref().map_or(0, |cold| cold.retries);
        if retries.is_multiple_of(2) && ctx.shared.config.black_hole_detection {
            self.suspect_black_hole(ctx.now, &ctx.shared.config, &mut ctx.shared.stats);
        }
        // "(5.5) The host MUST set RTO <- RTO * 2 ("back off the timer")."
        let cold = self.cold.get_or_insert_with(new_cold);
        cold.backoff = self
            .rtt
            .backed_off(cold.backoff, ctx.shared.config.rto_bounds().max);
        if let State::SynSent(_) = self.state {
            self.fast_open_timed_out(ctx.now, &mut ctx.shared.stats, &mut ctx.shared.peers);
        }
        let cut = match &mut self.state {
            State::SynSent(s) => {
                s.snd_nxt = s.iss;
                None
            }
            State::SynRcvd(s) => {
                s.snd_nxt = s.iss;
                None
            }
            state => {
                let Some(snd) = state.snd_mut() else { return };
                if snd.outstanding() == 0 {
                    return;
                }
                let window = (snd.cc.cwnd(), snd.cc.ssthresh());
                snd.cc.on_rto(ctx.now, snd.outstanding());
                // RFC 6675 §5.1: "If an RTO occurs during loss recovery ... RecoveryPoint
                // MUST be set to HighData ... a new recovery phase ... MUST NOT be
                // initiated until HighACK is greater than or equal to the new value of
                // RecoveryPoint."
                let loss = snd.loss.get_mut();
                loss.rto_recover = Some(snd.snd_max);
                // "(5.4) Retransmit the earliest segment that has not been acknowledged".
                // Go back N: everything from SND.UNA is sent again as the window allows.
                snd.snd_nxt = snd.snd_una;
                loss.recovery = None;
                loss.rexmit = None;
                snd.dup_acks = 0;
                snd.high_rxt = snd.snd_una;
                if ctx.shared.config.karn {
                    loss.sampler.on_retransmit();
                }
                // RFC 2018 §8: "the data sender MUST retransmit the segment at the left
                // edge of the window after a retransmit timeout, whether or not the
                // SACKed bit is on for that segment", since the receiver may have
                // reneged. A cumulative ACK that stops at SACKed data is the sign it
                // did (as Linux's `tcp_check_sack_reneging`): then the whole scoreboard
                // is distrusted and go-back-N resends from SND.UNA, SACKed or not; the
                // ACKs that follow rebuild it (RFC 6675 §5.1: "Update () SHOULD continue
                // to be used"). Otherwise SND.UNA is not SACKed and goes out first
                // anyway, and data SACKed above it is skipped.
                let reneged = snd.scoreboard.is_sacked(snd.snd_una);
                if reneged {
                    snd.scoreboard.clear();
                }
                Some((window, reneged))
            }
        };
        if let Some(((cwnd, ssthresh), reneged)) = cut {
            self.on_rto_recovery(cwnd, ssthresh, reneged);
        }
        // "(5.6) Start the retransmission timer" happens when the segment goes out.
    }

    /// RFC 1122 §4.2.3.6 keep-alive timer. It probes in ESTABLISHED, CLOSE-WAIT and
    /// FIN-WAIT-2 (as Linux does): a half-closed connection waiting in FIN-WAIT-2 for a
    /// peer that vanished (its RST lost) has nothing in flight, so nothing else would
    /// ever notice. In FIN-WAIT-1 our FIN is in flight and its retransmission timer
    /// watches the peer: the timer only waits on, so that FIN-WAIT-2 has it.
    fn on_keepalive_timeout(&mut self, ctx: &mut Ctx<'_>) {
        let Some(ka) = ctx.shared.config.keepalive else {
            return;
        };
        if matches!(self.state, State::FinWait1(_)) {
            self.timers.set(Timer::Keepalive, ctx.now + ka.idle);
            return;
        }
        if !matches!(
            self.state,
            State::Established(_) | State::CloseWait(_) | State::FinWait2(_)
        ) {
            return;
        }
        let cold = self.cold.get_or_insert_with(new_cold);
        if cold.keepalive_sent >= ka.count {
            return self.time_out(ctx);
        }
        cold.keepalive_sent += 1;
        self.probe = Some(Probe::Keepalive);
        self.timers.set(Timer::Keepalive, ctx.now + ka.interval);
    }

    /// Re-arm keep-alive after activity (in the states where it runs or, in FIN-WAIT-1,
    /// waits to run: see `on_keepalive_timeout`).
    pub fn restart_keepalive(&mut self, config: &TcpConfig, now: Instant) {
        if let Some(cold) = &mut self.cold {
            cold.keepalive_sent = 0;
        }
        if let Some(ka) = config.keepalive
            && matches!(
                self.state,
                State::Established(_)
                    | State::CloseWait(_)
                    | State::FinWait1(_)
                    | State::FinWait2(_)
            )
        {
            self.timers.set(Timer::Keepalive, now + ka.idle);
        }
    }
}
