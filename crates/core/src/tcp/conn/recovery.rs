//! Loss recovery on top of the ACK processing in `input.rs`: RACK-TLP loss detection
//! (RFC 8985), PRR's window during SACK recovery (RFC 9937), and the detection and
//! undo of spurious retransmissions (D-SACK, RFC 3708; Eifel, RFC 3522; the response
//! after RFC 4015). The data structures are in `rack.rs`; this is the wiring to the
//! connection: what each ACK, each send and the two timers do.
//!
//! Order on an ACK (after SND.UNA, the scoreboard and the duplicate count moved):
//! RACK takes in what was delivered; a D-SACK adapts the reordering window and counts
//! against the retransmissions of the last reduction; Eifel looks at the echoed
//! timestamp; the TLP episode is settled; RACK marks losses (starting recovery) and
//! arms the reorder timer; PRR computes what may go; the loss probe is re-armed.

use crate::tcp::TcpConfig;
use crate::tcp::shared::Pool;
use impnet_wire::tcp::Repr;

use super::Conn;
use crate::tcp::TcpStats;
use crate::tcp::cc::CongestionControl;
use crate::tcp::rack::{Delivered, Tlp, Undo, pto};
use crate::tcp::sack::{SackBlockExt, dsack_block};
use crate::tcp::segment::tsval;
use crate::tcp::seq::SeqNumber;
use crate::tcp::state::{Recovery, Snd};
use crate::tcp::timer::Timer;
use crate::time::{Duration, Instant};

/// The sender before an ACK was processed: what the ACK changed is measured from it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AckBefore {
    /// SND.UNA.
    pub snd_una: SeqNumber,
    /// Bytes SACKed (PRR counts their change as delivered).
    pub sacked: usize,
    /// In recovery.
    pub in_recovery: bool,
}

impl AckBefore {
    /// Snapshot `snd`.
    pub fn of(snd: &Snd) -> AckBefore {
        AckBefore {
            snd_una: snd.snd_una,
            sacked: snd.scoreboard.sacked_bytes(),
            in_recovery: snd.loss.in_recovery(),
        }
    }
}

/// [`Conn::on_sent`]'s part for a connection with loss state: the undo's count of
/// retransmissions (with the Eifel timestamp `tsval` of the first) and PRR's count of
/// what went out. Out of line: the loss state exists only once a loss was seen.
#[cold]
#[inline(never)]
fn sent_in_loss(
    loss: &mut crate::tcp::state::Loss,
    (seq, end): (SeqNumber, SeqNumber),
    again: bool,
    tsval: Option<u32>,
) {
    if again && let Some(undo) = loss.undo.as_mut() {
        if undo.retrans == 0
            && undo.eifel.is_none()
            && let Some(tsval) = tsval
        {
            undo.eifel = Some((seq, tsval));
        }
        undo.retrans += 1;
    }
    if let Some(r) = loss.recovery.as_mut() {
        let len = end - seq;
        r.prr.out += len;
        r.prr.sndcnt = r.prr.sndcnt.saturating_sub(len);
    }
}

impl Conn {
    /// Loss detection, spurious-retransmission undo and PRR for an acceptable ACK.
    pub(super) fn on_ack_recovery(
        &mut self,
        now: Instant,
        stats: &mut TcpStats,
        seg: &Repr<'_>,
        before: AckBefore,
    ) {
        let mss = self.opts.snd_mss();
        let sack = self.opts.sack;
        let tsecr = match (self.opts.ts, seg.options.timestamps) {
            (Some(_), Some((_, tsecr))) if tsecr != 0 => Some(tsecr),
            _ => None,
        };
        let (srtt, min_rtt) = (self.rtt.srtt(), self.rtt.min_rtt());
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        if quiet_ack(snd, seg, before) {
            // The common ACK: RACK takes in the cumulative delivery; no D-SACK, undo,
            // probe or PRR to settle, and no loss to find (as `detect_loss` says
            // without a scoreboard or a recovery).
            // An ACK for nothing new with RACK's state still fresh (the handshake's,
            // a window update) leaves that state as it is: it stays unallocated.
            if snd.rack_enabled {
                snd.rack_min_rtt = merge_min_rtt(snd.rack_min_rtt, min_rtt);
                if snd.rack.is_allocated() || snd.snd_una != before.snd_una {
                    rack_update(snd, seg, (before.snd_una, tsecr), now, false);
                }
            }
            let probe = snd.snd_una > before.snd_una;
            let eligible = probe.then(|| {
                clear_probe_due(snd);
                probe_eligible(snd)
            });
            self.timers.stop(Timer::Reorder);
            if let Some(eligible) = eligible {
                self.set_loss_probe(now, eligible);
            }
            return;
        }
        let ack = SeqNumber(seg.ack);
        let mut dsack = if sack {
            dsack_block(seg.options.sack(), ack)
        } else {
            None
        };
        if dsack.is_some() {
            stats.dsacks_received += 1;
        }
        if snd.rack_enabled {
            snd.rack_min_rtt = merge_min_rtt(snd.rack_min_rtt, min_rtt);
            rack_update(snd, seg, (before.snd_una, tsecr), now, dsack.is_some());
        }
        if before.in_recovery && !snd.loss.in_recovery() {
            snd.rack_mut().on_recovery_exit();
            // A recovery that ended with every retransmission reported as a duplicate,
            // or none sent at all (what looked lost arrived late): the cut was for
            // nothing (RFC 3708 §3; Linux's `tcp_try_undo_recovery`).
            if snd.loss.undo().is_some_and(|u| u.retrans == 0 && !u.rto) {
                undo_cut(snd, stats);
            }
        }
        if let Some(block) = dsack {
            if snd.rack_enabled {
                let (una, max) = (snd.snd_una, snd.snd_max);
                snd.rack_mut().on_dsack(una, max);
            }
            if tlp_dsack(snd, block) {
                dsack = None;
            }
        }
        spurious_by_dsack(snd, stats, dsack);
        spurious_by_eifel(snd, stats, ack, tsecr);
        tlp_on_ack(snd, now, ack);
        let (reorder, newly_lost) = detect_loss(snd, stats, now, srtt, mss);
        prr_after_ack(snd, ack, before, newly_lost, mss);
        let probe = snd.snd_una > before.snd_una;
        if probe {
            // A probe the PTO asked for and that never went (no room) is moot now.
            clear_probe_due(snd);
        }
        match reorder {
            Some(wait) => self.timers.set(Timer::Reorder, now + wait),
            None => self.timers.stop(Timer::Reorder),
        }
        if probe {
            self.arm_loss_probe(now);
        }
    }

    /// RFC 8985 §6.3: "When the reordering timer expires ... RACK_detect_loss()".
    pub(super) fn on_reorder_timeout(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
    ) {
        let mss = self.opts.snd_mss();
        let srtt = self.rtt.srtt();
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        if !snd.rack_enabled {
            return;
        }
        let was_in_recovery = snd.loss.in_recovery();
        let (reorder, _) = detect_loss(snd, stats, now, srtt, mss);
        prr_on_ack(snd, 0, mss, false);
        if let Some(wait) = reorder {
            self.timers.set(Timer::Reorder, now + wait);
        }
        if self.cold.is_some() {
            self.mtu_probe_on_recovery(now, config, stats, was_in_recovery);
        }
    }

    /// RFC 8985 §7.3: the PTO fired. "If a previously unsent segment exists AND the
    /// receive window allows new data to be sent: Transmit that new segment ... Else:
    /// Retransmit the last segment". The probe goes even if cwnd is full.
    pub(super) fn on_probe_timeout(&mut self, now: Instant, config: &TcpConfig) {
        let mss = self.opts.snd_mss();
        let rto = self.rto(config.rto_bounds().max);
        let lone_fin_as_linux = config.lone_fin_as_linux;
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        if !snd.rack_enabled || snd.loss.in_recovery() || snd.outstanding() == 0 {
            return;
        }
        let wnd_edge = snd.snd_una + snd.snd_wnd as usize;
        let new_data =
            snd.snd_nxt == snd.snd_max && snd.snd_nxt < snd.data_end() && snd.snd_nxt < wnd_edge;
        if !new_data {
            let end = snd.data_end();
            // "Retransmit the last segment": under `TcpConfig::lone_fin_as_linux` a FIN
            // sent after the data, alone (its own run in the log), goes alone, as
            // Linux's probe resends its FIN skb; by default the last data segment goes
            // with it, which repairs a lost tail at once.
            let fin_alone = lone_fin_as_linux
                && snd.snd_max > end
                && snd.rack().log.last_start().is_some_and(|s| s >= end);
            let back = if fin_alone {
                0
            } else {
                (end - snd.snd_una).min(mss)
            };
            snd.loss.get_mut().rexmit = Some(end - back);
        }
        snd.rack_mut().probe_due = true;
        // The probe takes the timeout's place when both were due.
        self.timers.set(Timer::Retransmit, now + rto);
    }

    /// RFC 8985 §7.2: arm the PTO "after transmitting new data (that was not itself a
    /// loss probe) or upon receiving an ACK that cumulatively acknowledges new data",
    /// when SACK is on, nothing is SACKed, no recovery runs and no probe is in flight;
    /// the PTO is capped by the retransmission timer's expiry.
    pub(super) fn arm_loss_probe(&mut self, now: Instant) {
        let Some(snd) = self.state.snd() else {
            return;
        };
        let eligible = probe_eligible(snd);
        self.set_loss_probe(now, eligible);
    }

    /// Arm the PTO for `eligible` (the bytes outstanding, from [`probe_eligible`]),
    /// or stop it.
    fn set_loss_probe(&mut self, now: Instant, eligible: Option<usize>) {
        let Some(outstanding) = eligible else {
            self.timers.stop(Timer::LossProbe);
            return;
        };
        // "If Now() + PTO > TCP_RTO_expire(): PTO = TCP_RTO_expire() - Now()": the probe
        // then goes in the timeout's place (it fires first, and pushes the RTO back).
        let mut at = now + pto(self.rtt.srtt(), outstanding <= self.opts.snd_mss());
        if let Some(rto_at) = self.timers.get(Timer::Retransmit) {
            at = at.min(rto_at);
        }
        self.timers.set(Timer::LossProbe, at);
    }

    /// Bookkeeping after data (or a FIN) `[seq, end)` went out; `again` when it was
    /// sent before.
    pub(super) fn on_sent(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        pool: &mut Pool,
        (seq, end): (SeqNumber, SeqNumber),
        again: bool,
    ) {
        self.note_letter_sent(config, (seq, end), again, now);
        let timestamps = self.opts.ts.is_some();
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        if snd.rack_enabled {
            pool.rack_mut(snd).log.on_send(seq, end, now);
        }
        if let Some(loss) = snd.loss.allocated_mut() {
            sent_in_loss(loss, (seq, end), again, timestamps.then(|| tsval(now)));
        }
        if snd.rack().probe_due {
            let end_seq = snd.snd_max;
            let rack = snd.rack_mut();
            rack.probe_due = false;
            rack.tlp = Some(Tlp {
                end_seq,
                is_retrans: again,
            });
            stats.tlp_probes += 1;
            // §7.3: "the sender MUST rearm the RTO timer, not the PTO timer".
            self.timers.stop(Timer::LossProbe);
            let rto = self.rto(config.rto_bounds().max);
            self.timers.set(Timer::Retransmit, now + rto);
        } else if !again {
            let eligible = probe_eligible(snd);
            self.set_loss_probe(now, eligible);
        }
    }

    /// The receiver got `[seq, end)` again: report it in the next ACK's first SACK
    /// block (RFC 2883), when SACK is on.
    pub(super) fn note_duplicate(&mut self, stats: &mut TcpStats, seq: SeqNumber, end: SeqNumber) {
        stats.duplicate_segments += 1;
        if !self.opts.sack {
            return;
        }
        if let Some(rcv) = self.state.rcv_mut() {
            rcv.sack.record_duplicate(seq, end);
        }
    }

    /// A retransmission timeout: RACK's marks and the probe are void (go-back-N resends
    /// everything), and the window before the cut is kept for an Eifel undo.
    pub(super) fn on_rto_recovery(&mut self, cwnd: usize, ssthresh: usize, unsack: bool) {
        self.timers.stop(Timer::Reorder);
        self.timers.stop(Timer::LossProbe);
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        if let Some(rack) = snd.rack.allocated_mut() {
            rack.log.forget_marks(unsack);
            rack.tlp = None;
            rack.probe_due = false;
        }
        snd.loss.get_mut().undo = Some(Undo {
            cwnd,
            ssthresh,
            marker: snd.snd_una,
            retrans: 0,
            eifel: None,
            rto: true,
        });
    }
}

/// RFC 8985 §7.2: the PTO is armed when SACK is on, nothing is SACKed, no recovery
/// runs and no probe is in flight, with data outstanding (returned).
fn probe_eligible(snd: &Snd) -> Option<usize> {
    let outstanding = snd.outstanding();
    let eligible = outstanding > 0
        && snd.rack_enabled
        && !snd.loss.in_repair()
        && snd.scoreboard.is_empty()
        && snd.rack().tlp.is_none();
    eligible.then_some(outstanding)
}

/// An ACK (already taken in by SND.UNA and the scoreboard) for which every step of
/// `on_ack_recovery` but RACK's cumulative delivery, the probe and the timers is a
/// no-op: no SACK blocks (so no D-SACK), no recovery before or now, no repair after a
/// timeout, nothing SACKed, no undo pending, no loss probe out.
fn quiet_ack(snd: &Snd, seg: &Repr<'_>, before: AckBefore) -> bool {
    seg.options.sack_len == 0
        && !before.in_recovery
        && !snd.loss.in_repair()
        && snd.loss.undo().is_none()
        && snd.rack().tlp.is_none()
        && snd.scoreboard.is_empty()
}

/// RACK.min_RTT (RFC 8985 §6.2 step 1): the smaller of RACK's own (from SACKed
/// segments, `Delivered::sack_rtt`) and the RTT estimator's (both minima over the
/// connection's life).
fn merge_min_rtt(rack: Option<Duration>, estimator: Option<Duration>) -> Option<Duration> {
    match (rack, estimator) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// RFC 8985 §6.2 steps 1-3 for one ACK (SND.UNA before it and its TSecr): what it
/// delivered, cumulatively and by SACK (the D-SACK block excepted), updates RACK.
fn rack_update(
    snd: &mut Snd,
    seg: &Repr<'_>,
    (old_una, tsecr): (SeqNumber, Option<u32>),
    now: Instant,
    dsack: bool,
) {
    let mut d = Delivered::default();
    let (ack, snd_max, mut min_rtt) = (snd.snd_una, snd.snd_max, snd.rack_min_rtt);
    let rack = snd.rack_mut();
    let mut fack = rack.fack;
    rack.log
        .deliver_cumulative((old_una, ack), now, (&mut fack, min_rtt, tsecr), &mut d);
    let skip = usize::from(dsack);
    for block in seg.options.sack().iter().skip(skip) {
        let (left, right) = (block.left_seq().max(ack), block.right_seq());
        if left < right && right <= snd_max {
            // No TSecr test: a SACKed segment arrived out of order, and the ACK echoes
            // the last in-order segment's timestamp (RFC 7323 §4.3), not its own.
            rack.log.deliver(
                (left, right),
                false,
                now,
                (&mut fack, min_rtt, None),
                &mut d,
            );
        }
    }
    rack.fack = fack;
    rack.on_delivered(&d, &mut min_rtt);
    snd.rack_min_rtt = min_rtt;
}

/// RACK loss marking (RFC 8985 §6.2 step 5); the first loss starts recovery. Returns
/// the reorder timer's delay, if one is needed, and the bytes newly marked lost.
fn detect_loss(
    snd: &mut Snd,
    stats: &mut TcpStats,
    now: Instant,
    srtt: Option<Duration>,
    mss: usize,
) -> (Option<Duration>, usize) {
    let in_recovery = snd.loss.in_repair();
    // Nothing SACKed and no recovery: every segment still out was sent after the most
    // recent one delivered (cumulative ACKs deliver in sequence order), so none can be
    // lost by RACK's rule; skip the walk on the common ACK.
    if !snd.rack_enabled || (!in_recovery && snd.scoreboard.is_empty()) {
        return (None, 0);
    }
    let segs_sacked = snd.scoreboard.sacked_bytes() / mss.max(1);
    let reo_wnd = snd
        .rack()
        .reo_wnd(snd.rack_min_rtt, in_recovery, segs_sacked, srtt);
    let (lost, runs, timeout) = snd.rack_mut().detect_loss(reo_wnd, now);
    stats.rack_losses += runs;
    if lost > 0 && !snd.loss.in_recovery() {
        // RFC 8985 §3.4: RACK's loss marks start fast recovery as DupThresh did.
        let after_rto = snd
            .loss
            .rto_recover()
            .is_some_and(|point| snd.snd_una < point);
        stats.fast_retransmits += 1;
        enter_recovery(snd, now, true, after_rto);
    }
    (timeout, lost)
}

/// Start loss recovery (RFC 6675 §5 / RFC 6582 §3.2 step 2): the recovery point, the
/// window cut (none after a timeout, which cut already), the undo record.
pub(super) fn enter_recovery(snd: &mut Snd, now: Instant, sack: bool, after_rto: bool) {
    let in_flight = snd.outstanding();
    let snd_max = snd.snd_max;
    snd.loss.get_mut().recovery = Some(Recovery::new(snd_max, after_rto, in_flight));
    snd.high_rxt = snd.snd_una;
    if let Some(rack) = snd.rack.allocated_mut() {
        rack.tlp = None;
    }
    if after_rto {
        return;
    }
    let (cwnd, ssthresh) = (snd.cc.cwnd(), snd.cc.ssthresh());
    if sack {
        snd.cc.on_enter_sack_recovery(now, in_flight);
    } else {
        snd.cc.on_enter_recovery(now, in_flight);
    }
    snd.loss.get_mut().undo = Some(Undo {
        cwnd,
        ssthresh,
        marker: snd.snd_una,
        retrans: 0,
        eifel: None,
        rto: false,
    });
}

/// PRR's share of an ACK in a recovery that cut the window (`ack`: SND.UNA after it;
/// `newly_lost`: bytes RACK deemed lost on it).
fn prr_after_ack(snd: &mut Snd, ack: SeqNumber, before: AckBefore, newly_lost: usize, mss: usize) {
    if snd.loss.recovery().is_none_or(|r| r.after_rto) {
        return;
    }
    // RFC 9937's DeliveredData: bytes newly acknowledged, cumulatively or by SACK.
    let sacked_now = snd.scoreboard.sacked_bytes();
    let data = (ack - before.snd_una + sacked_now).saturating_sub(before.sacked);
    // RFC 9937's SafeACK: the ACK advances SND.UNA and indicates no further loss (RACK
    // marked nothing new; without RACK, nothing newly SACKed above the holes), as
    // Linux's `FLAG_SND_UNA_ADVANCED && !newly_lost`.
    let further_loss = if snd.rack_enabled {
        newly_lost > 0
    } else {
        sacked_now > before.sacked
    };
    let safe_ack = ack > before.snd_una && !further_loss;
    // A controller that sets its window from a model (BBR) keeps the extra segment on
    // every ACK, as before RFC 9937: Linux runs no PRR for it at all (its own
    // `cong_control`), and BBR's recovery here was tuned against this bound.
    let model_based = snd.cc.wants_rate_samples();
    prr_on_ack(snd, data, mss, safe_ack || model_based);
}

/// RFC 9937 (PRR, Standards Track, obsoleting the experimental RFC 6937) on an ACK in
/// recovery: prr_delivered grows by DeliveredData; above ssthresh, sndcnt =
/// CEIL(prr_delivered * ssthresh / RecoverFS) - prr_out; at or below it, the
/// conservative bound MAX(prr_delivered - prr_out, DeliveredData) by default (PRR-CRB),
/// one SMSS more only on a SafeACK (SND.UNA advances and no further loss is indicated:
/// `safe_ack`, PRR-SSRB), capped by ssthresh - pipe; and one SMSS when nothing was sent
/// yet, which forces the fast retransmit on entering recovery. RFC 6937 added the SMSS
/// on every ACK: two segments for each one delivered while losses go on (Linux's
/// `tcp_cwnd_reduction` has used the conditional bound since 2015).
fn prr_on_ack(snd: &mut Snd, delivered: usize, mss: usize, safe_ack: bool) {
    if snd.loss.recovery().is_none_or(|r| r.after_rto) {
        return;
    }
    let pipe = pipe(snd, mss);
    let ssthresh = snd.cc.ssthresh();
    let Some(r) = snd.loss.allocated_mut().and_then(|l| l.recovery.as_mut()) else {
        return;
    };
    let prr = &mut r.prr;
    prr.delivered += delivered;
    prr.sndcnt = if pipe > ssthresh {
        let share =
            (prr.delivered as u128 * ssthresh as u128).div_ceil(prr.recover_fs.max(1) as u128);
        usize::try_from(share)
            .unwrap_or(usize::MAX)
            .saturating_sub(prr.out)
    } else {
        let bound = prr.delivered.saturating_sub(prr.out).max(delivered);
        let limit = if safe_ack { bound + mss } else { bound };
        (ssthresh - pipe).min(limit)
    };
    if prr.out == 0 && prr.sndcnt == 0 {
        prr.sndcnt = mss;
    }
}

/// RFC 6675's pipe during SACK recovery, with RACK's loss marks when RACK is on.
pub(super) fn pipe(snd: &Snd, mss: usize) -> usize {
    if snd.rack_enabled {
        snd.rack().log.pipe()
    } else {
        snd.scoreboard
            .pipe(snd.snd_una, snd.snd_max, snd.high_rxt, mss)
    }
}

/// What may be sent now in SACK recovery: PRR's `sndcnt` after a window cut, else
/// (repairing after a timeout) `cwnd - pipe`. None outside SACK recovery.
pub(super) fn recovery_room(snd: &Snd, sack: bool, mss: usize) -> Option<usize> {
    let r = snd.loss.recovery().filter(|_| sack)?;
    let room = if r.after_rto {
        snd.cc.cwnd().saturating_sub(pipe(snd, mss))
    } else {
        r.prr.sndcnt
    };
    // The loss probe goes whatever the window says (RFC 8985 §7.3).
    Some(if snd.rack().probe_due {
        room.max(mss)
    } else {
        room
    })
}

/// A D-SACK for the TLP retransmission: "the original segment was delivered", the
/// episode ends without loss (RFC 8985 §7.4). Returns whether it was.
fn tlp_dsack(snd: &mut Snd, (_, right): (SeqNumber, SeqNumber)) -> bool {
    match snd.rack().tlp {
        // The block ends at the probe's end, or one short of it when a FIN rode along.
        Some(tlp) if tlp.is_retrans && right <= tlp.end_seq && right + 1 >= tlp.end_seq => {
            snd.rack_mut().tlp = None;
            true
        }
        _ => false,
    }
}

/// RFC 8985 §7.4: settle the TLP episode. An ACK beyond a retransmitted probe without
/// a D-SACK for it means the probe repaired a loss: the congestion response of a fast
/// recovery follows (a cut now, as the episode is over).
fn tlp_on_ack(snd: &mut Snd, now: Instant, ack: SeqNumber) {
    let Some(tlp) = snd.rack().tlp else { return };
    if ack < tlp.end_seq {
        return;
    }
    if !tlp.is_retrans {
        snd.rack_mut().tlp = None;
    } else if ack > tlp.end_seq {
        snd.rack_mut().tlp = None;
        let flight = snd.outstanding();
        snd.cc.on_enter_sack_recovery(now, flight);
        snd.cc.on_exit_recovery(now, flight);
    }
}

/// RFC 3708: every retransmission of the episode reported back as a duplicate by a
/// D-SACK means none was needed; then the cut is undone.
fn spurious_by_dsack(snd: &mut Snd, stats: &mut TcpStats, dsack: Option<(SeqNumber, SeqNumber)>) {
    let (Some((left, _)), Some(loss)) = (dsack, snd.loss.allocated_mut()) else {
        return;
    };
    let Some(undo) = &mut loss.undo else { return };
    if left < undo.marker || undo.retrans == 0 {
        return;
    }
    undo.retrans -= 1;
    stats.spurious_retransmits += 1;
    let lost_pending = if snd.rack_enabled {
        snd.rack.get().log.lost_bytes() > 0
    } else {
        loss.rexmit.is_some()
    };
    if undo.retrans == 0 && !lost_pending {
        undo_cut(snd, stats);
    }
}

/// RFC 3522 §3.1 Eifel detection: the first ACK covering the episode's first
/// retransmission echoes a TSval older than that retransmission's: the original
/// arrived, the retransmission was spurious.
fn spurious_by_eifel(snd: &mut Snd, stats: &mut TcpStats, ack: SeqNumber, tsecr: Option<u32>) {
    let Some(undo) = snd.loss.allocated_mut().and_then(|l| l.undo.as_mut()) else {
        return;
    };
    let Some((seq, ts)) = undo.eifel else { return };
    if ack <= seq {
        return;
    }
    undo.eifel = None;
    if tsecr.is_some_and(|echo| (echo.wrapping_sub(ts) as i32) < 0) {
        stats.spurious_retransmits += 1;
        undo_cut(snd, stats);
    }
}

/// Undo the last cut (RFC 4015 §3.2 for a spurious timeout: restore the window and
/// "resume transmission with previously unsent data", not go-back-N).
fn undo_cut(snd: &mut Snd, stats: &mut TcpStats) {
    let Some(undo) = snd.loss.allocated_mut().and_then(|l| l.undo.take()) else {
        return;
    };
    stats.undos += 1;
    snd.cc.on_undo(undo.cwnd, undo.ssthresh);
    let loss = snd.loss.get_mut();
    loss.recovery = None;
    loss.rexmit = None;
    if let Some(rack) = snd.rack.allocated_mut() {
        rack.log.forget_marks(false);
    }
    if undo.rto {
        snd.loss.get_mut().rto_recover = None;
        snd.snd_nxt = snd.snd_max;
    }
}

/// A probe the PTO asked for is moot (fresh RACK state has none, and stays unallocated).
fn clear_probe_due(snd: &mut Snd) {
    if let Some(rack) = snd.rack.allocated_mut() {
        rack.probe_due = false;
    }
}
