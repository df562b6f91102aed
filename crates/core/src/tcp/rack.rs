//! RACK-TLP loss detection (RFC 8985) and the sender's spurious-retransmission
//! bookkeeping (RFC 3708 D-SACK, RFC 3522 Eifel), both pure data: the connection feeds
//! them what was sent and what the peer acknowledged, with `now` as a parameter.
//!
//! Transmit times are kept per range, not per byte or per segment: [`SentLog`] holds
//! `[start, end)` runs of sequence space with one transmit time each, ascending; the
//! segments one `poll` burst sends at the same instant share one run, a retransmission
//! splits the run it lands in. The same runs carry RACK's SACKed and lost marks, so
//! loss detection, the next segment to repair and the pipe are one walk over them.
//!
//! RACK (RFC 8985 §6): "a segment is lost if a segment sent sufficiently later has
//! been delivered". `RACK.xmit_ts`/`RACK.end_seq` name the most recently sent segment
//! delivered; a segment sent before it and not delivered within `RACK.rtt +
//! RACK.reo_wnd` of its own transmission is lost; one still inside that time arms the
//! reorder timer. The reordering window starts at `min_RTT / 4` and grows with D-SACKs
//! (§6.2 step 4). The Tail Loss Probe (§7) lives in [`Tlp`].

use alloc::collections::VecDeque;

use super::seq::SeqNumber;
use crate::time::{Duration, Instant};

/// RFC 8985 §6.2: "RACK.reo_wnd_persist ... the number of loss recoveries the
/// reordering window stays inflated for after a D-SACK: 16".
const REO_WND_PERSIST: u16 = 16;

/// RFC 8985 §7.2: "WCDelAckT stands for worst case delayed ACK timer. When
/// FlightSize is 1, PTO is inflated by WCDelAckT time to compensate for a potential
/// long delayed ACK timer at the receiver. The RECOMMENDED value for WCDelAckT is
/// 200ms."
pub(crate) const WC_DEL_ACK: Duration = Duration::from_millis(200);

/// One run of sequence space sent at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    /// First sequence number.
    start: SeqNumber,
    /// Just past the last one (a FIN counts).
    end: SeqNumber,
    /// When it was (last) sent.
    xmit: Instant,
    /// Sent more than once.
    retransmitted: bool,
    /// The peer SACKed it (RACK delivered it).
    sacked: bool,
    /// RACK marked it lost and it was not retransmitted since.
    lost: bool,
}

/// The transmit record of the bytes in flight: runs `[start, end)`, ascending,
/// disjoint, covering SND.UNA..SND.MAX of the sends it was told about.
#[derive(Debug, Clone, Default)]
pub(crate) struct SentLog {
    /// A deque: cumulative ACKs drop runs from the front, sends add them at the back.
    runs: VecDeque<Run>,
    /// Most runs SACK blocks may cut the log into (0: no limit). Beyond it a block
    /// that does not fall on run edges marks only the runs it covers whole: a peer
    /// sending blocks of a byte or two cannot make the log (and the time to walk it)
    /// grow to a run per byte in flight.
    split_limit: u32,
    /// Invariant: the bytes of the runs neither SACKed nor marked lost, what
    /// [`SentLog::pipe`] reports: kept as the runs change rather than summed over the
    /// log on every ACK and every send of a recovery (the simulator's lossy flows spent
    /// 1% of their instructions in that sum). A `u32` (as `split_limit`): the runs
    /// span at most the largest window, 1 GiB, and the log stays 40 bytes.
    flight: u32,
}

/// The bytes of `run` that count in flight: sent, neither SACKed nor marked lost.
#[inline]
fn in_flight(run: &Run) -> u32 {
    if run.sacked || run.lost {
        0
    } else {
        // Within the window (at most 1 GiB): the cast loses nothing.
        (run.end - run.start) as u32
    }
}

/// Bytes of send buffer per run the sent log may be cut into by SACK blocks (plus
/// [`MIN_SPLIT_LIMIT`]): four times as many runs as full-sized segments fit.
const BYTES_PER_SPLIT: usize = 512;
/// Runs SACK blocks may always cut the log into.
const MIN_SPLIT_LIMIT: usize = 64;

/// The most runs SACK blocks may cut the sent log of a `send_buffer`-byte send buffer
/// into.
pub(crate) fn split_limit(send_buffer: usize) -> usize {
    send_buffer / BYTES_PER_SPLIT + MIN_SPLIT_LIMIT
}

/// What [`SentLog::deliver`] learnt from one ACK.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Delivered {
    /// The most recently sent run among the newly delivered, as RACK ranks them
    /// (`(xmit, end)`), with its RTT; retransmissions that may be spurious left out.
    pub latest: Option<(Instant, SeqNumber, Duration)>,
    /// A newly delivered run, never retransmitted, ended below the highest sequence
    /// number delivered before it (RFC 8985 §6.2 step 3: reordering).
    pub reordered: bool,
    /// How far below that highest sequence number such a run began, in bytes (the
    /// largest of this ACK's): the reordering's extent.
    pub reorder_extent: usize,
    /// Bytes newly SACKed.
    pub sacked: usize,
    /// The shortest RTT of the runs this ACK newly SACKed that were sent once: valid
    /// RTT measurements (RFC 6298 §3: not of retransmitted segments) for RACK.min_RTT
    /// (RFC 8985 §6.2 step 1), as Linux's `tcp_sacktag_one` takes them. A connection
    /// whose first loss comes before any cumulative RTT sample (no timestamps and a
    /// handshake that went out twice) then waits min_RTT/4 for reordering, as Linux
    /// does, instead of deeming everything below the SACK lost at once.
    pub sack_rtt: Option<Duration>,
}

/// The ACK's TSecr is older than the TSval `xmit` went out with (RFC 7323 §5.4 ticks:
/// `output::tsval`), so it echoes an earlier transmission. Within one tick the two
/// cannot be told apart, and the min_RTT test alone decides.
fn echo_precedes(tsecr: Option<u32>, xmit: Instant) -> bool {
    tsecr.is_some_and(|echo| (echo.wrapping_sub(super::segment::tsval(xmit)) as i32) < 0)
}

impl SentLog {
    /// Record that `[start, end)` went out at `now` (new data, or again).
    pub fn on_send(&mut self, start: SeqNumber, end: SeqNumber, now: Instant) {
        if start >= end {
            return;
        }
        let tail = self.runs.back().map(|r| r.end);
        if tail.is_none_or(|t| start >= t) {
            return self.append(start, end, now);
        }
        // A retransmission: split the runs at both edges and restamp what is inside.
        self.split_at(start);
        self.split_at(end);
        let first = self.first_ending_after(start);
        for run in self.runs.range_mut(first..) {
            if run.start >= end {
                break;
            }
            if run.start >= start && run.end <= end {
                let before = in_flight(run);
                run.xmit = now;
                run.retransmitted = true;
                run.lost = false;
                self.flight = self.flight - before + in_flight(run);
            }
        }
        if let Some(t) = tail
            && end > t
        {
            self.append(t, end, now);
        }
    }

    fn append(&mut self, start: SeqNumber, end: SeqNumber, now: Instant) {
        // Either way the bytes are new in flight (the run extended is neither SACKed
        // nor lost).
        self.flight += (end - start) as u32;
        match self.runs.back_mut() {
            Some(last)
                if last.end == start
                    && last.xmit == now
                    && !last.retransmitted
                    && !last.sacked
                    && !last.lost =>
            {
                last.end = end;
            }
            _ => self.runs.push_back(Run {
                start,
                end,
                xmit: now,
                retransmitted: false,
                sacked: false,
                lost: false,
            }),
        }
    }

    /// The index of the first run that ends above `seq` (the runs lie in sequence
    /// order, each after the one before: a binary search, where a linear one cost the
    /// simulator's lossy flows 2% of their instructions).
    fn first_ending_after(&self, seq: SeqNumber) -> usize {
        self.runs.partition_point(|r| r.end <= seq)
    }

    /// Cut the run holding `seq` (strictly inside it) in two.
    fn split_at(&mut self, seq: SeqNumber) {
        let i = self.first_ending_after(seq);
        if let Some(run) = self.runs.get(i)
            && run.start < seq
        {
            let mut right = *run;
            right.start = seq;
            self.runs[i].end = seq;
            self.runs.insert(i + 1, right);
        }
    }

    /// The RTT at `now` of the byte just below `ack` if it was sent once (RFC 6298 §3,
    /// Karn): what a cumulative ACK to `ack` measures of the most recently sent data it
    /// covers, as Linux's `ca_rtt_us` (read before the ACK is delivered to the log).
    pub fn rtt_to(&self, ack: SeqNumber, now: Instant) -> Option<Duration> {
        let run = self.runs.iter().find(|r| r.start < ack && ack <= r.end)?;
        (!run.retransmitted).then(|| now.saturating_duration_since(run.xmit))
    }

    /// Drop what lies below `snd_una` (cumulatively acknowledged).
    #[cfg(test)]
    pub fn on_cum_ack(&mut self, snd_una: SeqNumber) {
        let gone = self.runs.iter().take_while(|r| r.end <= snd_una).count();
        self.runs.drain(..gone);
        if let Some(first) = self.runs.front_mut() {
            first.start = first.start.max(snd_una);
        }
        self.flight = self.pipe_by_walk();
    }

    /// A cumulative ACK moved SND.UNA from `old_una` to `snd_una`: what
    /// [`deliver`](Self::deliver)`((old_una, snd_una), true, ..)` followed by
    /// `on_cum_ack(snd_una)` do, in one walk over the runs it covers (a cumulative
    /// delivery changes no run, so each can be taken in and dropped in turn; the
    /// in-order case drops the whole log).
    pub fn deliver_cumulative(
        &mut self,
        (old_una, snd_una): (SeqNumber, SeqNumber),
        now: Instant,
        (fack, min_rtt, tsecr): (&mut SeqNumber, Option<Duration>, Option<u32>),
        out: &mut Delivered,
    ) {
        let delivers = old_una < snd_una;
        while let Some(run) = self.runs.front_mut() {
            if run.start >= snd_una {
                break;
            }
            if delivers && run.end > old_una && !run.sacked {
                take_in(run, now, (fack, min_rtt, tsecr), out);
            }
            if run.end > snd_una {
                // The run SND.UNA falls in: the last one covered, and it stays.
                let before = in_flight(run);
                run.start = run.start.max(snd_una);
                self.flight = self.flight - before + in_flight(run);
                break;
            }
            self.flight -= in_flight(run);
            self.runs.pop_front();
        }
    }

    /// Mark `[start, end)` delivered (cumulatively acknowledged when `cumulative`,
    /// else SACKed) at `now`, and report what RACK learns (RFC 8985 §6.2 steps 2-3).
    /// `fack` is the highest sequence number delivered so far (updated); `min_rtt` and
    /// the ACK's `tsecr` filter retransmissions that may be acknowledged for an earlier
    /// transmission.
    pub fn deliver(
        &mut self,
        (start, end): (SeqNumber, SeqNumber),
        cumulative: bool,
        now: Instant,
        (fack, min_rtt, tsecr): (&mut SeqNumber, Option<Duration>, Option<u32>),
        out: &mut Delivered,
    ) {
        if start >= end {
            return;
        }
        // Without room for the cuts, only the runs inside the block are marked.
        let whole_only =
            !cumulative && self.split_limit != 0 && self.runs.len() + 2 > self.split_limit as usize;
        if !cumulative && !whole_only {
            self.split_at(start);
            self.split_at(end);
        }
        let first = self.first_ending_after(start);
        for run in self.runs.range_mut(first..) {
            if run.start >= end {
                break;
            }
            if run.sacked {
                continue;
            }
            if whole_only && (run.start < start || run.end > end) {
                continue;
            }
            if !cumulative {
                self.flight -= in_flight(run);
                run.sacked = true;
                run.lost = false;
                out.sacked += run.end - run.start;
                if !run.retransmitted {
                    let rtt = now.saturating_duration_since(run.xmit);
                    out.sack_rtt = Some(out.sack_rtt.map_or(rtt, |r| r.min(rtt)));
                }
            }
            take_in(run, now, (&mut *fack, min_rtt, tsecr), out);
        }
    }

    /// RFC 8985 §6.2 step 5 `RACK_detect_loss`: mark lost every run sent before
    /// `(xmit_ts, end_seq)` whose `xmit + rtt + reo_wnd` has passed. Returns the bytes
    /// newly marked lost, the runs marked, and the longest wait before another could be
    /// (the reorder timer).
    pub fn detect_loss(
        &mut self,
        (xmit_ts, end_seq): (Instant, SeqNumber),
        rtt: Duration,
        reo_wnd: Duration,
        now: Instant,
    ) -> (usize, u64, Option<Duration>) {
        let mut lost = 0;
        let mut marked = 0;
        let mut timeout: Option<Duration> = None;
        for run in &mut self.runs {
            if run.sacked || run.lost || !sent_after((xmit_ts, end_seq), (run.xmit, run.end)) {
                continue;
            }
            let deadline = run.xmit + rtt + reo_wnd;
            if deadline <= now {
                self.flight -= in_flight(run);
                run.lost = true;
                lost += run.end - run.start;
                marked += 1;
            } else {
                let remaining = deadline - now;
                timeout = Some(timeout.map_or(remaining, |t| t.max(remaining)));
            }
        }
        (lost, marked, timeout)
    }

    /// The first lost byte not retransmitted since, and how much of its run follows
    /// (at most `mss`): the next repair.
    pub fn next_lost(&self, mss: usize) -> Option<(SeqNumber, usize)> {
        let mut runs = self.runs.iter().skip_while(|r| !r.lost || r.sacked);
        let first = runs.next()?;
        let (start, mut end) = (first.start, first.end);
        // Lost runs that follow without a gap go in the same repair, up to the MSS: a
        // run per original segment would otherwise make a stream of small writes
        // (or SACK edges that cut runs) repair in as many tiny segments.
        for run in runs {
            if run.start != end || !run.lost || run.sacked || end - start >= mss {
                break;
            }
            end = run.end;
        }
        Some((start, (end - start).min(mss)))
    }

    /// Where the last run sent begins: a segment sent alone (a lone FIN) starts one.
    pub fn last_start(&self) -> Option<SeqNumber> {
        self.runs.back().map(|r| r.start)
    }

    /// Bytes in the network: sent, neither SACKed nor marked lost (a lost run
    /// retransmitted counts again). RFC 6675's pipe, with RACK deciding what is lost.
    #[inline]
    pub fn pipe(&self) -> usize {
        debug_assert_eq!(self.flight, self.pipe_by_walk());
        self.flight as usize
    }

    /// [`SentLog::pipe`] summed over the runs.
    fn pipe_by_walk(&self) -> u32 {
        self.runs.iter().map(in_flight).sum()
    }

    /// Bytes marked lost and not retransmitted yet.
    pub fn lost_bytes(&self) -> usize {
        self.runs
            .iter()
            .filter(|r| r.lost && !r.sacked)
            .map(|r| r.end - r.start)
            .sum()
    }

    /// Bytes deemed lost and not SACKed since, resent or not (Linux's `lost_out`, for
    /// TCP_INFO): marked lost, or resent while `repairing` (in a recovery, where only
    /// what was marked lost is resent).
    pub fn deemed_lost_bytes(&self, repairing: bool) -> usize {
        self.runs
            .iter()
            .filter(|r| !r.sacked && (r.lost || (repairing && r.retransmitted)))
            .map(|r| r.end - r.start)
            .sum()
    }

    /// Take back every loss mark (a retransmission timeout resends everything anyway,
    /// or an undo found the retransmissions spurious); with `unsack`, the SACK marks
    /// too (the scoreboard was distrusted after reneging).
    pub fn forget_marks(&mut self, unsack: bool) {
        for run in &mut self.runs {
            run.lost = false;
            run.sacked &= !unsack;
        }
        self.flight = self.pipe_by_walk();
    }

    /// After a timeout, where go-back-N may resume at or above `from`: RFC 8985 §6.3
    /// `RACK_mark_losses_on_RTO` counts a segment lost only if it starts at SND.UNA or
    /// "Segment.xmit_ts + RACK.rtt + RACK.reo_wnd - Now <= 0"; one sent more recently
    /// (`wait` = RACK.rtt + RACK.reo_wnd) may still be on its way (on a long queue, most
    /// of the window is) and is not resent yet: RACK marks it lost later if SACKs say
    /// so. Returns the end of the run of such segments (SACKed ones included) starting
    /// at `from`, or `None` when the segment at `from` is due.
    pub fn recent_end(&self, from: SeqNumber, wait: Duration, now: Instant) -> Option<SeqNumber> {
        let mut end: Option<SeqNumber> = None;
        for run in &self.runs {
            if run.end <= from {
                continue;
            }
            let contiguous = end.map_or(run.start <= from, |e| run.start == e);
            let pending = run.sacked || (!run.lost && run.xmit + wait > now);
            if !contiguous || !pending {
                break;
            }
            end = Some(run.end);
        }
        end
    }

    /// How many runs are held (for the compactness test).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.runs.len()
    }
}

/// What RACK learns from the delivery of `run` at `now` (RFC 8985 §6.2 steps 2-3),
/// added to `out`; `fack` is the highest sequence number delivered so far (updated).
#[inline]
fn take_in(
    run: &Run,
    now: Instant,
    (fack, min_rtt, tsecr): (&mut SeqNumber, Option<Duration>, Option<u32>),
    out: &mut Delivered,
) {
    let rtt = now.saturating_duration_since(run.xmit);
    // Step 2: "If Segment.retransmitted is TRUE: If ACK.ts_option.echo_reply <
    // Segment.xmit_ts: Return; If rtt < RACK.min_RTT: Return" (the ACK may be for an
    // earlier transmission).
    if run.retransmitted && (echo_precedes(tsecr, run.xmit) || min_rtt.is_none_or(|min| rtt < min))
    {
        return;
    }
    // Step 3: "If Segment.end_seq < RACK.fack ... RACK.reordering_seen = TRUE".
    if !run.retransmitted && run.end < *fack {
        out.reordered = true;
        out.reorder_extent = out.reorder_extent.max(*fack - run.start);
    }
    *fack = (*fack).max(run.end);
    if out
        .latest
        .is_none_or(|(x, e, _)| sent_after((run.xmit, run.end), (x, e)))
    {
        out.latest = Some((run.xmit, run.end, rtt));
    }
}

/// RFC 8985 §6.2 `RACK_sent_after(t1, seq1, t2, seq2)`: "If t1 > t2: Return true. Else
/// if t1 == t2 AND seq1 > seq2: Return true. Else: Return false".
fn sent_after((t1, seq1): (Instant, SeqNumber), (t2, seq2): (Instant, SeqNumber)) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

/// A Tail Loss Probe in flight (RFC 8985 §7: "TLP.end_seq", "TLP.is_retrans").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tlp {
    /// SND.NXT after the probe went out.
    pub end_seq: SeqNumber,
    /// The probe was a retransmission of the last segment (no new data to send).
    pub is_retrans: bool,
}

/// RACK-TLP state of one sender (RFC 8985 §5.2's variables).
#[derive(Debug, Clone)]
pub(crate) struct Rack {
    /// Transmit times and marks of the bytes in flight.
    pub log: SentLog,
    /// "RACK.xmit_ts", "RACK.end_seq": the most recently sent segment delivered.
    pub latest: Option<(Instant, SeqNumber)>,
    /// "RACK.rtt": the RTT of that segment.
    pub rtt: Duration,
    /// "RACK.fack": the highest sequence number delivered.
    pub fack: SeqNumber,
    /// ACKs that showed reordering (Linux's `tp->reord_seen`, in TCP_INFO): RFC 8985's
    /// "RACK.reordering_seen" is this above zero.
    pub reord_seen: u32,
    /// The largest reordering extent seen, bytes (Linux's `tp->reordering`, which it
    /// counts in segments; reported in TCP_INFO, no rule here uses it).
    pub reorder_extent: u32,
    /// "RACK.reo_wnd_mult".
    pub reo_wnd_mult: u16,
    /// "RACK.reo_wnd_persist".
    pub reo_wnd_persist: u16,
    /// "RACK.dsack_round": SND.NXT when a D-SACK last raised the multiplier; until
    /// SND.UNA passes it, further D-SACKs do not raise it again.
    pub dsack_round: Option<SeqNumber>,
    /// The probe in flight, if any.
    pub tlp: Option<Tlp>,
    /// The PTO fired: the next segment is the probe (sent even if cwnd is full).
    pub probe_due: bool,
}

impl Rack {
    /// Heap bytes of this state in its box: the box and the sent log's storage.
    pub fn heap_bytes(&self) -> usize {
        core::mem::size_of::<Rack>() + self.log.runs.capacity() * core::mem::size_of::<Run>()
    }

    /// Fresh state with SND.UNA at `snd_una`. `split_limit` bounds the runs SACK
    /// blocks may cut the sent log into (0: none).
    pub const fn new(snd_una: SeqNumber, split_limit: usize) -> Rack {
        Rack {
            log: SentLog {
                runs: VecDeque::new(),
                // At most `u32::MAX` runs (the log could not hold more anyway).
                split_limit: if split_limit > u32::MAX as usize {
                    u32::MAX
                } else {
                    split_limit as u32
                },
                flight: 0,
            },
            latest: None,
            rtt: Duration::ZERO,
            fack: snd_una,
            reord_seen: 0,
            reorder_extent: 0,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            dsack_round: None,
            tlp: None,
            probe_due: false,
        }
    }

    /// Take in what one ACK delivered (RFC 8985 §6.2 steps 1-3); RACK.min_RTT is
    /// `min_rtt` (kept by the caller, outside this state: it changes before any data
    /// is sent, with the handshake's sample).
    pub fn on_delivered(&mut self, d: &Delivered, min_rtt: &mut Option<Duration>) {
        if let Some(rtt) = d.sack_rtt {
            *min_rtt = Some(min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        if d.reordered {
            self.reord_seen = self.reord_seen.saturating_add(1);
            let extent = u32::try_from(d.reorder_extent).unwrap_or(u32::MAX);
            self.reorder_extent = self.reorder_extent.max(extent);
        }
        if let Some((xmit, end, rtt)) = d.latest {
            self.rtt = rtt;
            if self
                .latest
                .is_none_or(|(x, e)| sent_after((xmit, end), (x, e)))
            {
                self.latest = Some((xmit, end));
            }
        }
    }

    /// RFC 8985 §6.2 step 4 on a D-SACK: "If RACK.dsack_round is None AND any DSACK
    /// option is present on latest received ACK: RACK.dsack_round = SND.NXT;
    /// RACK.reo_wnd_mult += 1; RACK.reo_wnd_persist = 16".
    pub fn on_dsack(&mut self, snd_una: SeqNumber, snd_nxt: SeqNumber) {
        if self.dsack_round.is_some_and(|round| snd_una >= round) {
            self.dsack_round = None;
        }
        if self.dsack_round.is_none() {
            self.dsack_round = Some(snd_nxt);
            self.reo_wnd_mult = self.reo_wnd_mult.saturating_add(1);
            self.reo_wnd_persist = REO_WND_PERSIST;
        }
    }

    /// §6.2 step 4 on leaving a recovery: "RACK.reo_wnd_persist -= 1; If
    /// RACK.reo_wnd_persist <= 0: RACK.reo_wnd_mult = 1".
    pub fn on_recovery_exit(&mut self) {
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
        if self.reo_wnd_persist == 0 {
            self.reo_wnd_mult = 1;
        }
    }

    /// §6.2 step 4 `RACK_update_reo_wnd`: "If RACK.reordering_seen is FALSE: If in
    /// Fast or RTO recovery: Return 0. Else if RACK.segs_sacked >= DupThresh: Return 0.
    /// Return min(RACK.min_RTT * RACK.reo_wnd_mult / 4, SRTT)", RACK.min_RTT being
    /// `min_rtt`.
    pub fn reo_wnd(
        &self,
        min_rtt: Option<Duration>,
        in_recovery: bool,
        segs_sacked: usize,
        srtt: Option<Duration>,
    ) -> Duration {
        if self.reord_seen == 0 && (in_recovery || segs_sacked >= super::sack::DUPTHRESH) {
            return Duration::ZERO;
        }
        let Some(min_rtt) = min_rtt else {
            return Duration::ZERO;
        };
        let wnd = Duration::from_nanos(
            min_rtt
                .saturating_mul(u64::from(self.reo_wnd_mult))
                .as_nanos()
                / 4,
        );
        srtt.map_or(wnd, |s| wnd.min(s))
    }

    /// Mark losses now (§6.2 step 5). Returns bytes and runs newly lost, and the
    /// reorder timer's delay when a run may still turn out lost.
    pub fn detect_loss(
        &mut self,
        reo_wnd: Duration,
        now: Instant,
    ) -> (usize, u64, Option<Duration>) {
        match self.latest {
            Some(latest) => self.log.detect_loss(latest, self.rtt, reo_wnd, now),
            None => (0, 0, None),
        }
    }
}

/// RFC 8985 §7.2 PTO: "If SRTT is available: PTO = 2 * SRTT; If FlightSize is equal to
/// one segment: PTO += WCDelAckT ... Else: PTO = 1 second".
pub(crate) fn pto(srtt: Option<Duration>, one_segment: bool) -> Duration {
    match srtt {
        Some(srtt) if one_segment => srtt.saturating_mul(2) + WC_DEL_ACK,
        Some(srtt) => srtt.saturating_mul(2),
        None => Duration::from_secs(1),
    }
}

/// What to restore if the retransmissions of a loss episode turn out spurious
/// (RFC 4015-style undo; RFC 3708 D-SACK and RFC 3522 Eifel detection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Undo {
    /// cwnd before the cut.
    pub cwnd: usize,
    /// ssthresh before the cut.
    pub ssthresh: usize,
    /// SND.UNA at the cut: D-SACKs below it are about older episodes.
    pub marker: SeqNumber,
    /// Segments retransmitted in the episode and not yet reported as duplicates.
    pub retrans: u32,
    /// Eifel (RFC 3522 §3.1): the first retransmission's sequence number and TSval,
    /// while no ACK covered it yet.
    pub eifel: Option<(SeqNumber, u32)>,
    /// The episode began with a retransmission timeout.
    pub rto: bool,
}

/// A connection's [`Rack`], allocated when first changed: until then (a connection that
/// has sent no data, or one with RACK off, which never changes it) it reads as fresh
/// state and takes 8 bytes instead of 100.
#[derive(Debug, Default)]
pub(crate) struct RackCell(Option<alloc::boxed::Box<Rack>>);

/// What an unallocated [`RackCell`] reads as. Its `fack` and split limit are never read
/// from here: only delivering bytes reads them, and that changes the state.
static FRESH: Rack = Rack::new(SeqNumber(0), 0);

impl RackCell {
    /// The state (fresh until first changed).
    pub fn get(&self) -> &Rack {
        self.0.as_deref().unwrap_or(&FRESH)
    }

    /// Whether the state was allocated (it is once changed).
    pub fn is_allocated(&self) -> bool {
        self.0.is_some()
    }

    /// The state to change when it was allocated; `None` when it is fresh, for changes
    /// that leave fresh state as it is (clearing marks, the probe).
    pub fn allocated_mut(&mut self) -> Option<&mut Rack> {
        self.0.as_deref_mut()
    }

    /// The state to change, allocated now if it was not: fresh with `snd_una` as
    /// RACK.fack and the split limit of a `send_buffer`-byte buffer for the sent log
    /// ([`Rack::new`]), which is what it would hold had it been allocated at the
    /// handshake (nothing changes it before, and SND.UNA moves only once data or a FIN
    /// was sent).
    pub fn get_mut(&mut self, snd_una: SeqNumber, send_buffer: usize) -> &mut Rack {
        self.0.get_or_insert_with(|| new_rack(snd_una, send_buffer))
    }

    /// [`RackCell::get_mut`] on `spare`'s allocation (a connection's that ended, see
    /// [`RackCell::take`]) when the state was not allocated yet: the box and its sent
    /// log's storage are reused, the state in them made fresh.
    pub fn get_mut_reusing(
        &mut self,
        spare: Option<alloc::boxed::Box<Rack>>,
        snd_una: SeqNumber,
        send_buffer: usize,
    ) -> &mut Rack {
        if self.0.is_none()
            && let Some(rack) = spare
        {
            self.0 = Some(renew_rack(rack, snd_una, send_buffer));
        }
        self.get_mut(snd_una, send_buffer)
    }

    /// The allocation, taken out (for a later connection to reuse); the cell reads as
    /// fresh after.
    pub fn take(&mut self) -> Option<alloc::boxed::Box<Rack>> {
        self.0.take()
    }
}

/// A fresh [`Rack`] in a new box ([`RackCell::get_mut`]), out of line: made once per
/// connection at most.
#[cold]
#[inline(never)]
fn new_rack(snd_una: SeqNumber, send_buffer: usize) -> alloc::boxed::Box<Rack> {
    alloc::boxed::Box::new(Rack::new(snd_una, split_limit(send_buffer)))
}

/// `rack`'s box and sent log's storage made fresh for another connection
/// ([`RackCell::get_mut_reusing`]), out of line.
#[cold]
#[inline(never)]
fn renew_rack(
    mut rack: alloc::boxed::Box<Rack>,
    snd_una: SeqNumber,
    send_buffer: usize,
) -> alloc::boxed::Box<Rack> {
    let mut runs = core::mem::take(&mut rack.log.runs);
    runs.clear();
    *rack = Rack::new(snd_una, split_limit(send_buffer));
    rack.log.runs = runs;
    rack
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: usize) -> SeqNumber {
        SeqNumber(u32::MAX - 1000) + n
    }
    fn t(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }
    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn a_reused_allocation_reads_as_fresh_state_and_keeps_its_log_storage() {
        let mut used = RackCell::default();
        let rack = used.get_mut(s(0), 64 * 1024);
        for i in 0..20 {
            rack.log
                .on_send(s(i * 1000), s(i * 1000 + 1000), t(i as u64));
        }
        rack.reord_seen = 1;
        rack.reo_wnd_mult = 4;
        rack.probe_due = true;
        rack.latest = Some((t(5), s(5000)));
        let capacity = rack.log.runs.capacity();
        let spare = used.take();
        assert!(!used.is_allocated(), "taken: the cell reads as fresh");
        let mut cell = RackCell::default();
        let rack = cell.get_mut_reusing(spare, s(7), 1024);
        let fresh = Rack::new(s(7), split_limit(1024));
        assert_eq!(rack.log.len(), 0);
        assert_eq!(rack.log.runs.capacity(), capacity);
        assert_eq!(rack.log.split_limit, fresh.log.split_limit);
        assert_eq!(
            (rack.latest, rack.fack, rack.reord_seen, rack.probe_due),
            (fresh.latest, fresh.fack, fresh.reord_seen, fresh.probe_due)
        );
        assert_eq!(
            (rack.reo_wnd_mult, rack.reo_wnd_persist, rack.reorder_extent),
            (1, 0, 0)
        );
        // An allocated cell keeps its own state: a spare offered then is not taken.
        let before = cell.get().log.runs.capacity();
        let rack = cell.get_mut_reusing(Some(alloc::boxed::Box::new(fresh)), s(9), 1024);
        assert_eq!((rack.fack, rack.log.runs.capacity()), (s(7), before));
    }

    #[test]
    fn sack_blocks_cut_the_log_into_at_most_the_split_limit() {
        let mut log = SentLog {
            runs: VecDeque::new(),
            split_limit: 8,
            flight: 0,
        };
        log.on_send(s(0), s(10_000), t(0));
        log.on_send(s(10_000), s(20_000), t(1));
        let mut fack = s(0);
        let mut d = Delivered::default();
        // A thousand one-byte blocks: the log is cut until the limit, then no more.
        for i in 0..1000 {
            let at = s(1 + i * 17);
            log.deliver((at, at + 1), false, t(2), (&mut fack, None, None), &mut d);
            assert!(log.len() <= 8, "{} runs", log.len());
        }
        let sacked = d.sacked;
        assert!(sacked > 0 && sacked < 10, "{sacked} bytes");
        // A block covering a whole run still marks it.
        log.deliver(
            (s(10_000), s(20_000)),
            false,
            t(3),
            (&mut fack, None, None),
            &mut d,
        );
        assert_eq!(d.sacked, sacked + 10_000);
        // A block over part of a run, at the limit, marks nothing of it.
        log.deliver(
            (s(5_000), s(6_000)),
            false,
            t(3),
            (&mut fack, None, None),
            &mut d,
        );
        assert_eq!(d.sacked, sacked + 10_000);
    }

    /// `deliver_cumulative` is `deliver(.., true, ..)` then `on_cum_ack`, on logs cut
    /// by retransmissions and SACK blocks, for any cumulative ACK.
    #[test]
    fn deliver_cumulative_is_deliver_then_on_cum_ack() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..2_000 {
            let mut log = SentLog {
                runs: VecDeque::new(),
                split_limit: if next(2) == 0 { 0 } else { 8 },
                flight: 0,
            };
            let mut fack = s(0);
            let mut d = Delivered::default();
            let mut end = 0;
            for _ in 0..next(12) {
                let at = t(next(50));
                match next(3) {
                    0 if end > 0 => {
                        let a = next(end as u64) as usize;
                        let b = a + 1 + next((end - a) as u64) as usize;
                        log.on_send(s(a), s(b), at);
                    }
                    1 if end > 0 => {
                        let a = next(end as u64) as usize;
                        let b = a + 1 + next((end - a) as u64) as usize;
                        log.deliver((s(a), s(b)), false, at, (&mut fack, None, None), &mut d);
                    }
                    _ => {
                        let len = 1 + next(300) as usize;
                        log.on_send(s(end), s(end + len), at);
                        end += len;
                    }
                }
            }
            if next(2) == 0 {
                let latest = (t(next(50)), s(next(end as u64 + 1) as usize));
                log.detect_loss(latest, MS(next(20)), MS(next(5)), t(next(100)));
                assert_eq!(log.flight, log.pipe_by_walk());
            }
            if next(8) == 0 {
                log.forget_marks(next(2) == 0);
            }
            assert_eq!(log.flight, log.pipe_by_walk());
            let old = next(end as u64 + 1) as usize;
            let ack = old + next((end - old) as u64 + 1) as usize;
            let now = t(50 + next(50));
            let min_rtt = [None, Some(MS(next(40)))][next(2) as usize];
            let tsecr = [None, Some(next(100) as u32)][next(2) as usize];
            let (mut full, mut fast) = (log.clone(), log);
            let (mut fack_full, mut fack_fast) = (fack, fack);
            let (mut d_full, mut d_fast) = (d, d);
            full.deliver(
                (s(old), s(ack)),
                true,
                now,
                (&mut fack_full, min_rtt, tsecr),
                &mut d_full,
            );
            full.on_cum_ack(s(ack));
            fast.deliver_cumulative(
                (s(old), s(ack)),
                now,
                (&mut fack_fast, min_rtt, tsecr),
                &mut d_fast,
            );
            assert_eq!(full.runs, fast.runs);
            assert_eq!((fack_full, d_full), (fack_fast, d_fast));
            // The kept count of bytes in flight is the sum over the runs, after each.
            assert_eq!(full.flight, full.pipe_by_walk());
            assert_eq!(fast.flight, fast.pipe_by_walk());
        }
    }

    #[test]
    fn a_burst_is_one_run_and_a_retransmission_splits_it() {
        let mut log = SentLog::default();
        for i in 0..10 {
            log.on_send(s(i * 100), s(i * 100 + 100), t(0));
        }
        assert_eq!(log.len(), 1);
        log.on_send(s(1000), s(1100), t(1));
        assert_eq!(log.len(), 2);
        log.on_send(s(300), s(400), t(5));
        assert_eq!(log.len(), 4);
        assert_eq!(log.pipe(), 1100);
        log.on_cum_ack(s(350));
        assert_eq!(log.pipe(), 750);
        assert_eq!(log.runs[0].start, s(350));
        assert!(log.runs[0].retransmitted);
    }

    #[test]
    fn rack_marks_lost_what_was_sent_before_a_delivered_segment_after_reo_wnd() {
        let mut rack = Rack::new(s(0), 0);
        for i in 0..4 {
            rack.log.on_send(s(i * 100), s(i * 100 + 100), t(i as u64));
        }
        let mut min_rtt = Some(MS(20));
        // Segment 3 (sent at 3 ms) is SACKed at 23 ms; 0..3 are not.
        let mut d = Delivered::default();
        let (mut fack, min) = (rack.fack, min_rtt);
        rack.log.deliver(
            (s(300), s(400)),
            false,
            t(23),
            (&mut fack, min, None),
            &mut d,
        );
        rack.fack = fack;
        rack.on_delivered(&d, &mut min_rtt);
        assert_eq!(rack.latest, Some((t(3), s(400))));
        assert_eq!(rack.rtt, MS(20));
        // reo_wnd 5 ms: segment 0 is lost at 0 + 20 + 5 = 25 ms, not before.
        let (lost, runs, timer) = rack.detect_loss(MS(5), t(23));
        assert_eq!((lost, runs), (0, 0));
        assert_eq!(timer, Some(MS(4))); // segment 2: 2 + 25 - 23
        let (lost, runs, _) = rack.detect_loss(MS(5), t(25));
        assert_eq!((lost, runs), (100, 1));
        assert_eq!(rack.log.next_lost(1000), Some((s(0), 100)));
        assert_eq!(rack.log.pipe(), 200); // 100..300 still in flight
        let (lost, ..) = rack.detect_loss(MS(5), t(27));
        assert_eq!(lost, 200);
        assert_eq!(rack.log.pipe(), 0);
        // Retransmitting takes the mark off and counts it in the pipe again.
        rack.log.on_send(s(0), s(100), t(27));
        // The two lost segments that follow are one repair.
        assert_eq!(rack.log.next_lost(1000), Some((s(100), 200)));
        assert_eq!(rack.log.pipe(), 100);
    }

    /// Before any RTT sample (no timestamps, a handshake that went out twice), the
    /// first SACK's RTT of a segment sent once is RACK.min_RTT (RFC 8985 §6.2 step 1,
    /// RFC 6298 §3): the reordering window is min_RTT/4, not zero, so the segments
    /// below the SACK wait for it. A SACK of a retransmitted segment gives none.
    #[test]
    fn the_first_sack_gives_min_rtt_before_any_other_sample() {
        let mut rack = Rack::new(s(0), 0);
        let mut min_rtt = None;
        for i in 0..4 {
            rack.log.on_send(s(i * 100), s(i * 100 + 100), t(0));
        }
        assert_eq!(rack.reo_wnd(min_rtt, false, 1, None), Duration::ZERO);
        let mut d = Delivered::default();
        let mut fack = rack.fack;
        rack.log.deliver(
            (s(300), s(400)),
            false,
            t(100),
            (&mut fack, None, None),
            &mut d,
        );
        assert_eq!(d.sack_rtt, Some(MS(100)));
        rack.fack = fack;
        rack.on_delivered(&d, &mut min_rtt);
        assert_eq!(min_rtt, Some(MS(100)));
        assert_eq!(rack.reo_wnd(min_rtt, false, 1, None), MS(25));
        // Segment 0 is lost at 0 + 100 + 25 ms, not at once.
        let (lost, _, timer) = rack.detect_loss(MS(25), t(100));
        assert_eq!((lost, timer), (0, Some(MS(25))));
        // A retransmitted segment SACKed: no sample (it may be the first copy's).
        rack.log.on_send(s(100), s(200), t(110));
        let mut d = Delivered::default();
        rack.log.deliver(
            (s(100), s(200)),
            false,
            t(115),
            (&mut fack, min_rtt, None),
            &mut d,
        );
        assert_eq!(d.sack_rtt, None);
    }

    #[test]
    fn adjacent_lost_runs_are_repaired_together_up_to_the_mss() {
        // Ten 3-byte segments (small writes), each sent at its own time, all lost:
        // one repair of 30 bytes, not ten of 3 (the storm a fuzz input found: 452,662
        // retransmitted segments for 64 KiB written 3 bytes at a time).
        let mut rack = Rack::new(s(0), 0);
        for i in 0..10 {
            rack.log.on_send(s(i * 3), s(i * 3 + 3), t(i as u64));
        }
        rack.log.on_send(s(30), s(40), t(20));
        let mut min_rtt = Some(MS(1));
        let mut d = Delivered::default();
        let (mut fack, min) = (rack.fack, min_rtt);
        rack.log
            .deliver((s(30), s(40)), false, t(30), (&mut fack, min, None), &mut d);
        rack.fack = fack;
        rack.on_delivered(&d, &mut min_rtt);
        let (lost, runs, _) = rack.detect_loss(MS(0), t(30));
        assert_eq!((lost, runs), (30, 10));
        assert_eq!(rack.log.next_lost(1448), Some((s(0), 30)));
        // At most the MSS.
        assert_eq!(rack.log.next_lost(10), Some((s(0), 10)));
        // The repair takes the marks off all it covers; the rest is the next repair.
        rack.log.on_send(s(0), s(10), t(31));
        assert_eq!(rack.log.next_lost(1448), Some((s(10), 20)));
        assert_eq!(rack.log.lost_bytes(), 20);
        // A run not marked lost (retransmitted since) ends a repair.
        rack.log.on_send(s(15), s(18), t(32));
        assert_eq!(rack.log.next_lost(1448), Some((s(10), 5)));
    }

    #[test]
    fn reordering_is_seen_and_reo_wnd_follows_rfc_8985() {
        let mut rack = Rack::new(s(0), 0);
        rack.log.on_send(s(0), s(100), t(0));
        rack.log.on_send(s(100), s(200), t(1));
        let mut min_rtt = Some(MS(40));
        // Without reordering seen: zero in recovery or with DupThresh segments SACKed.
        assert_eq!(rack.reo_wnd(min_rtt, true, 0, Some(MS(50))), Duration::ZERO);
        assert_eq!(
            rack.reo_wnd(min_rtt, false, 3, Some(MS(50))),
            Duration::ZERO
        );
        assert_eq!(rack.reo_wnd(min_rtt, false, 2, Some(MS(50))), MS(10));
        let mut d = Delivered::default();
        let mut fack = rack.fack;
        rack.log.deliver(
            (s(100), s(200)),
            false,
            t(41),
            (&mut fack, min_rtt, None),
            &mut d,
        );
        assert!(!d.reordered);
        let mut d = Delivered::default();
        rack.log.deliver(
            (s(0), s(200)),
            true,
            t(42),
            (&mut fack, min_rtt, None),
            &mut d,
        );
        assert!(d.reordered);
        rack.on_delivered(&d, &mut min_rtt);
        assert_eq!(rack.reo_wnd(min_rtt, true, 9, Some(MS(50))), MS(10));
        // D-SACK: the multiplier grows once per round, is capped by SRTT, and decays
        // after 16 recoveries.
        rack.on_dsack(s(200), s(300));
        rack.on_dsack(s(250), s(300));
        assert_eq!(rack.reo_wnd(min_rtt, true, 0, Some(MS(50))), MS(20));
        rack.on_dsack(s(300), s(400));
        assert_eq!(rack.reo_wnd(min_rtt, true, 0, Some(MS(50))), MS(30));
        assert_eq!(rack.reo_wnd(min_rtt, true, 0, Some(MS(25))), MS(25));
        for _ in 0..15 {
            rack.on_recovery_exit();
        }
        assert_eq!(rack.reo_wnd_mult, 3);
        rack.on_recovery_exit();
        assert_eq!(rack.reo_wnd(min_rtt, true, 0, Some(MS(50))), MS(10));
    }

    #[test]
    fn each_ack_that_shows_reordering_counts_once() {
        // cubic-rack-reo-timeout-retrans-failed-incoming-data: ten segments, the last
        // SACKed, then the fourth (reordering seen once), then the cumulative ACK of
        // all, which delivers the others below RACK.fack (twice; Linux's
        // `tcpi_reord_seen` 2, `tcpi_reordering` 10 segments).
        let mut rack = Rack::new(s(0), 0);
        rack.log.on_send(s(0), s(1000), t(0));
        let mut min_rtt = Some(MS(20));
        let mut fack = rack.fack;
        for (block, cumulative) in [((900, 1000), false), ((300, 400), false), ((0, 1000), true)] {
            let mut d = Delivered::default();
            rack.log.deliver(
                (s(block.0), s(block.1)),
                cumulative,
                t(20),
                (&mut fack, min_rtt, None),
                &mut d,
            );
            rack.on_delivered(&d, &mut min_rtt);
        }
        assert_eq!((rack.reord_seen, rack.reorder_extent), (2, 1000));
    }

    #[test]
    fn a_retransmission_acked_sooner_than_min_rtt_is_not_trusted() {
        let mut rack = Rack::new(s(0), 0);
        rack.log.on_send(s(0), s(100), t(0));
        let min_rtt = Some(MS(20));
        rack.log.on_send(s(0), s(100), t(15));
        let mut d = Delivered::default();
        let mut fack = rack.fack;
        rack.log.deliver(
            (s(0), s(100)),
            true,
            t(21),
            (&mut fack, min_rtt, None),
            &mut d,
        );
        assert_eq!(d.latest, None);
        rack.log.deliver(
            (s(0), s(100)),
            true,
            t(40),
            (&mut fack, min_rtt, None),
            &mut d,
        );
        assert_eq!(d.latest, Some((t(15), s(100), MS(25))));
    }

    #[test]
    fn a_retransmission_whose_ack_echoes_the_original_is_not_trusted() {
        let mut rack = Rack::new(s(0), 0);
        rack.log.on_send(s(0), s(100), t(100));
        let min_rtt = Some(MS(5));
        rack.log.on_send(s(0), s(100), t(115));
        let mut d = Delivered::default();
        let mut fack = rack.fack;
        // 25 ms after the retransmission (above min_RTT), but TSecr is the original's
        // TSval: the ACK is for the original, and says nothing of the retransmission.
        rack.log.deliver(
            (s(0), s(100)),
            true,
            t(140),
            (&mut fack, min_rtt, Some(100)),
            &mut d,
        );
        assert_eq!(d.latest, None);
        // TSecr of the retransmission: trusted.
        rack.log.deliver(
            (s(0), s(100)),
            true,
            t(140),
            (&mut fack, min_rtt, Some(115)),
            &mut d,
        );
        assert_eq!(d.latest, Some((t(115), s(100), MS(25))));
    }

    #[test]
    fn after_a_timeout_only_segments_older_than_rack_rtt_are_due() {
        // Sent at 0, 10 and 20 ms; the middle one SACKed. At 50 ms with RACK.rtt +
        // reo_wnd = 40 ms, the first is due (RFC 8985 §6.3), the rest not yet.
        let mut log = SentLog::default();
        log.on_send(s(0), s(100), t(0));
        log.on_send(s(100), s(200), t(10));
        log.on_send(s(200), s(300), t(20));
        let mut fack = s(0);
        log.deliver(
            (s(100), s(200)),
            false,
            t(30),
            (&mut fack, None, None),
            &mut Delivered::default(),
        );
        assert_eq!(log.recent_end(s(0), MS(40), t(50)), None);
        assert_eq!(log.recent_end(s(100), MS(40), t(50)), Some(s(300)));
        assert_eq!(log.recent_end(s(250), MS(40), t(50)), Some(s(300)));
        // Later, everything not SACKed is due: only the SACKed run is jumped.
        assert_eq!(log.recent_end(s(100), MS(40), t(61)), Some(s(200)));
        assert_eq!(log.recent_end(s(300), MS(40), t(50)), None);
    }

    #[test]
    fn pto_follows_rfc_8985() {
        assert_eq!(pto(None, false), Duration::from_secs(1));
        assert_eq!(pto(Some(MS(20)), false), MS(40));
        assert_eq!(pto(Some(MS(20)), true), MS(240));
    }
}
