//! Packetization-layer path MTU discovery (RFC 4821, RFC 8899): black-hole detection
//! that falls back to a base segment size, and a binary search upwards with probes of
//! one segment of the candidate size (RFC 8899 §5.3, Linux's `tcp_mtu_probe`).
//!
//! Sizes here are segment sizes as [`Negotiated::path_mss`] counts them: the path MTU
//! less 40 (TCP payload and options). The state lives in the connection's rare part
//! ([`Cold::mtu`]), made on first use: a connection that never met a black hole (with
//! [`MtuProbing::OnBlackHole`]) holds none and pays one test per RTO.

use super::{Cold, Conn, Negotiated, new_cold};
use crate::tcp::TcpConfig;
use crate::tcp::TcpStats;
use crate::tcp::cc::CongestionControl;
use crate::tcp::seq::SeqNumber;
use crate::tcp::state::Snd;
use crate::time::Instant;

/// When a connection searches for a larger segment size (Linux's `tcp_mtu_probing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MtuProbing {
    /// Never (`tcp_mtu_probing = 0`): black-hole detection, when on, only halves
    /// the segment size, and nothing raises it again but a new connection.
    Off,
    /// Once black-hole detection fired (`tcp_mtu_probing = 1`): the segment size
    /// falls to [`TcpConfig::base_mss`] and the search climbs back to what the path
    /// carries. imp's default: RFC 4821 §1 wants PLPMTUD where ICMP may be lost, and
    /// without the search one spurious detection (two timeouts in a row on a lossy
    /// path) would cost the connection its segment size for good.
    #[default]
    OnBlackHole,
    /// From the start (`tcp_mtu_probing = 2`): every connection starts at
    /// [`TcpConfig::base_mss`] and searches upwards (RFC 4821 §7.2).
    Always,
}

impl MtuProbing {
    /// The mode of Linux's `tcp_mtu_probing` value (0, 1, 2).
    pub fn from_sysctl(value: u32) -> Option<MtuProbing> {
        match value {
            0 => Some(MtuProbing::Off),
            1 => Some(MtuProbing::OnBlackHole),
            2 => Some(MtuProbing::Always),
            _ => None,
        }
    }
}

/// The segment size black-hole detection stops at: RFC 879's default MSS, which every
/// IPv4 path carries (576-byte datagrams).
pub(super) const BLACK_HOLE_FLOOR: u16 = 536;

/// Linux's `tcp_mtu_probe` wants this many full segments queued after the probe (its
/// default reordering of 3, plus one), so that the probe's loss shows in duplicate ACKs
/// or SACKs rather than a timeout.
const SEGMENTS_AFTER_PROBE: usize = 4;

/// One connection's search (RFC 8899 §5.3's `search_low`/`search_high`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MtuSearch {
    /// The largest segment size known to pass: the one in use (RFC 4821
    /// `search_low`, the PLPMTU).
    pub low: u16,
    /// The largest size that may pass: at most what both ends' MSS allow, lowered by
    /// every lost probe to its size less one (`search_high`).
    pub high: u16,
    /// The probe in flight: it covers `start..end` and was `size` bytes (with options).
    pub probe: Option<MtuProbe>,
    /// When the search last ended or black-hole detection last lowered the size: the
    /// re-probe interval ([`TcpConfig::probe_interval`]) runs from here.
    pub since: Instant,
}

/// A probe in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MtuProbe {
    /// Its first sequence number.
    pub start: SeqNumber,
    /// The sequence number after it.
    pub end: SeqNumber,
    /// Its size as the search counts it (payload and options).
    pub size: u16,
}

impl MtuSearch {
    /// A search that starts at `low` (in use) towards the largest size the ends allow.
    fn new(low: u16, opts: &Negotiated, now: Instant) -> MtuSearch {
        MtuSearch {
            low,
            high: ceiling(opts).max(low),
            probe: None,
            since: now,
        }
    }

    /// The search has narrowed the range to `threshold` bytes.
    fn done(&self, threshold: u16) -> bool {
        self.high.saturating_sub(self.low) < threshold.max(1)
    }

    /// The probe was lost (RFC 8899 §5.3: "a probe ... is not acknowledged"): sizes
    /// from its own up may not pass.
    fn probe_failed(&mut self, now: Instant, threshold: u16) {
        if let Some(probe) = self.probe.take() {
            self.high = (probe.size - 1).max(self.low);
            if self.done(threshold) {
                self.since = now;
            }
        }
    }
}

/// The largest segment size both ends allow: the search's top.
fn ceiling(opts: &Negotiated) -> u16 {
    opts.mss_peer.min(opts.mss_ours)
}

/// A probe of `payload` bytes fits what is queued, the peer's window and cwnd now:
/// `available` (queued, unsent), `wnd` (the peer's window left), `cwnd` (cwnd left).
pub(super) fn probe_fits(
    payload: usize,
    mss: usize,
    (available, wnd, cwnd): (usize, usize, usize),
) -> bool {
    let needed = payload + SEGMENTS_AFTER_PROBE * mss;
    available >= needed && wnd >= needed && cwnd >= payload + mss
}

impl Conn {
    /// The search, if this connection has one.
    fn mtu_search_mut(&mut self) -> Option<&mut MtuSearch> {
        self.cold
            .as_deref_mut()
            .and_then(|cold| cold.mtu.as_deref_mut())
    }

    /// [`MtuProbing::Always`] on an opened connection: start at the base size and
    /// search upwards (RFC 4821 §7.2).
    pub(super) fn start_mtu_search(&mut self, now: Instant, config: &TcpConfig) {
        let low = config.base_mss.min(self.opts.seg_mss()).max(64);
        let search = MtuSearch::new(low, &self.opts, now);
        let cold = self.cold.get_or_insert_with(new_cold);
        cold.mtu = Some(alloc::boxed::Box::new(search));
        self.opts.set_path_mss(low);
    }

    /// RFC 4821 §4 black-hole detection: repeated timeouts with segments bigger than
    /// the smallest a path must carry may be a path that drops big packets silently.
    /// Without probing, halve the segment size (at least 536 bytes) for good. With it,
    /// RFC 8899 §4.2 / RFC 4821 §7.5 (as Linux's `tcp_mtu_probing`): fall to the base
    /// size, and on later detections halve what passed (down to the floor); the
    /// search climbs back. The go-back that follows the timeout resends in the
    /// smaller size.
    pub(super) fn suspect_black_hole(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
    ) {
        let current = self.opts.seg_mss();
        if !self.state.synchronized() || current <= BLACK_HOLE_FLOOR {
            return;
        }
        stats.black_holes += 1;
        if config.mtu_probing == MtuProbing::Off {
            self.opts.set_path_mss((current / 2).max(BLACK_HOLE_FLOOR));
            return;
        }
        let (base, now) = (config.base_mss, now);
        let floor = BLACK_HOLE_FLOOR.min(base);
        let opts = self.opts;
        let cold = self.cold.get_or_insert_with(new_cold);
        let low = match cold.mtu.as_deref_mut() {
            Some(search) => {
                search.probe = None;
                search.low = (search.low / 2).min(base).max(floor).min(current);
                search.since = now;
                search.low
            }
            None => {
                let low = base.max(floor).min(current);
                cold.mtu = Some(alloc::boxed::Box::new(MtuSearch::new(low, &opts, now)));
                low
            }
        };
        self.opts.set_path_mss(low);
    }

    /// A retransmission timeout with the probe in flight: it counts as lost.
    pub(super) fn mtu_probe_timed_out(&mut self, now: Instant, config: &TcpConfig) {
        let threshold = config.probe_threshold;
        if let Some(search) = self.mtu_search_mut() {
            search.probe_failed(now, threshold);
        }
    }

    /// New data acknowledged up to `ack`: a probe wholly acknowledged passed (RFC 8899
    /// §5.3: the search raises `search_low` to its size, which is used from now).
    pub(super) fn mtu_probe_on_ack(
        cold: &mut Cold,
        opts: &mut Negotiated,
        ack: SeqNumber,
        now: Instant,
        threshold: u16,
    ) {
        let Some(search) = cold.mtu.as_deref_mut() else {
            return;
        };
        let Some(probe) = search.probe else { return };
        if ack < probe.end {
            return;
        }
        search.probe = None;
        search.low = probe.size.max(search.low);
        if search.done(threshold) {
            search.since = now;
        }
        if search.low > opts.seg_mss() {
            opts.set_path_mss(search.low);
        }
    }

    /// After an ACK that may have started loss recovery (`was_in_recovery`: it had not
    /// begun before): when the probe is the first segment lost, the probe failed and
    /// it is no congestion signal (RFC 4821 §7.5: "the loss of a probe ... should not
    /// reduce the congestion window"). Undo the window cut and resend what is in
    /// flight in the size in use, as Linux's `tcp_simple_retransmit`. A recovery that
    /// starts at an earlier loss is congestion: the probe is given up without a verdict.
    pub(super) fn mtu_probe_on_recovery(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        was_in_recovery: bool,
    ) {
        let threshold = config.probe_threshold;
        let Some(search) = self.cold.as_deref_mut().and_then(|c| c.mtu.as_deref_mut()) else {
            return;
        };
        let Some(probe) = search.probe else { return };
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        if was_in_recovery || !snd.loss.in_recovery() {
            return;
        }
        if snd.snd_una != probe.start {
            search.probe = None;
            return;
        }
        search.probe_failed(now, threshold);
        stats.mtu_probes_lost += 1;
        undo_probe_cut(snd);
        resend_in_flight(snd);
    }

    /// A Packet Too Big / fragmentation-needed for `mss`: the search's top falls to it,
    /// and a probe larger than it failed (returns whether one did).
    pub(super) fn mtu_search_on_packet_too_big(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        mss: u16,
    ) -> bool {
        let threshold = config.probe_threshold;
        let Some(search) = self.mtu_search_mut() else {
            return false;
        };
        search.high = search.high.min(mss).max(search.low.min(mss));
        search.low = search.low.min(mss);
        match search.probe {
            Some(probe) if probe.size > mss => {
                search.probe_failed(now, threshold);
                true
            }
            _ => false,
        }
    }

    /// Whether the segment planned at `seq` of `len` bytes is the probe, and fits
    /// `room` bytes of payload and options for `opt` bytes of options; a probe that no
    /// longer fits (SACK blocks took its room) is given up.
    #[inline(never)]
    pub(super) fn mtu_probe_goes(
        &mut self,
        seq: SeqNumber,
        len: usize,
        opt: usize,
        room: usize,
    ) -> bool {
        let Some(search) = self.mtu_search_mut() else {
            return false;
        };
        match search.probe {
            Some(p) if p.start == seq && p.end == seq + len => {
                if len + opt <= usize::from(p.size) && len <= room {
                    true
                } else {
                    search.probe = None;
                    false
                }
            }
            _ => false,
        }
    }
}

/// The next probe's payload, when one is due at SND.NXT (RFC 8899 §5.3, Linux's
/// `tcp_mtu_probe`): the search is open (or the re-probe interval passed: it opens
/// again from the top), no probe is out, no loss is being repaired, new data goes
/// next, and `room` (queued, the peer's window, cwnd left; see [`probe_fits`]) takes
/// the probe and enough after it. Records the probe.
pub(super) fn plan_probe(
    search: &mut MtuSearch,
    snd: &Snd,
    opts: &Negotiated,
    config: &TcpConfig,
    now: Instant,
    room: (usize, usize, usize),
) -> Option<usize> {
    if search.probe.is_some() || snd.loss.in_repair() || snd.snd_nxt != snd.snd_max {
        return None;
    }
    if search.done(config.probe_threshold) {
        // RFC 8899 §5.1.1: "The PMTU_RAISE_TIMER is configured to the period a sender
        // will continue to use the current PLPMTU, after which it reenters the Search
        // Phase."
        if now - search.since < config.probe_interval {
            return None;
        }
        search.high = ceiling(opts).max(search.low);
        search.since = now;
        if search.done(config.probe_threshold) {
            return None;
        }
    }
    let size = search.low + (search.high - search.low).div_ceil(2);
    let payload = usize::from(size).checked_sub(opts.fixed_option_len())?;
    if !probe_fits(payload, opts.snd_mss(), room) {
        return None;
    }
    search.probe = Some(MtuProbe {
        start: snd.snd_nxt,
        end: snd.snd_nxt + payload,
        size,
    });
    Some(payload)
}

/// Restore the window a probe's loss cut on entering recovery, and leave recovery.
fn undo_probe_cut(snd: &mut Snd) {
    let Some(loss) = snd.loss.allocated_mut() else {
        return;
    };
    let undo = loss.undo.take();
    loss.recovery = None;
    loss.rexmit = None;
    if let Some(undo) = undo {
        snd.cc.on_undo(undo.cwnd, undo.ssthresh);
    }
    if let Some(rack) = snd.rack.allocated_mut() {
        rack.log.forget_marks(false);
    }
}

/// Send again all that is in flight from SND.UNA, in the segment size now in use (the
/// big segments were dropped). It is not congestion: cwnd and ssthresh stay (as
/// Linux's `tcp_simple_retransmit`).
pub(super) fn resend_in_flight(snd: &mut Snd) {
    if snd.outstanding() == 0 {
        return;
    }
    snd.snd_nxt = snd.snd_una;
    if let Some(loss) = snd.loss.allocated_mut() {
        loss.recovery = None;
        loss.rexmit = None;
        loss.sampler.on_retransmit();
    }
    snd.dup_acks = 0;
    snd.high_rxt = snd.snd_una;
}
