//! What a connection sends now (RFC 9293 §3.8.6, RFC 5681, RFC 6675), and writing it.

use crate::tcp::TcpConfig;
use crate::tcp::TcpStats;
use crate::tcp::shared::Pool;
use impnet_wire::tcp::{FastOpenCookie, Flags, Options, PlainHeader, Repr};

use super::recovery::{pipe, recovery_room};
use super::{Cold, Conn, Cork, Ctx, Negotiated, Probe, backoff_of, cork_of, record_end_after};
use crate::tcp::buffer::Slices;
use crate::tcp::cc::CongestionControl;
use crate::tcp::segment::{Fill, tsval, write_plain_segment, write_segment};
use crate::tcp::seq::SeqNumber;
use crate::tcp::state::{AckState, CloseWait, Closing, Established, FinWait1, LastAck, Snd, State};
use crate::tcp::timer::Timer;
use crate::tcp::{CORK_CEILING, Egress, MAX_ACK_DELAY, pacing};
use crate::time::{Duration, Instant};

/// Payloads from which a driver that gathers (`Shared::gather`) leaves them in the
/// send buffer: below, the copy costs less than the bookkeeping.
const DEFER_MIN: usize = 2048;

/// What to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Sequence number of the segment.
    pub seq: SeqNumber,
    /// SYN, FIN (ACK is added when the state has one).
    pub flags: Flags,
    /// Payload bytes from the send buffer (offset `seq - SND.UNA`).
    pub len: usize,
    /// Why it goes.
    pub kind: Kind,
}

/// Whether a segment carries PSH, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Push {
    No,
    Yes,
    /// Only for Linux's `forced_push` within a long write.
    Forced,
}

/// Why a segment goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// SYN or SYN-ACK.
    Syn,
    /// Data or FIN at SND.NXT (new, or again after a timeout).
    Next,
    /// A retransmission out of order (fast retransmit, partial ACK, SACK recovery).
    Repair,
    /// Just an ACK (or a window update).
    Ack,
    /// Zero-window or keep-alive probe.
    Probe,
}

impl Conn {
    /// The next segment, written into `buf` (the checksum computed when
    /// `egress.checksum`; more than one MSS of new data when `egress.tso_max` allows).
    pub fn poll_transmit(
        &mut self,
        ctx: &mut Ctx<'_>,
        buf: &mut [u8],
        egress: Egress,
    ) -> Option<usize> {
        let sack_n = self.sack_blocks_to_send();
        let opt = self.opts.fixed_option_len() + if sack_n > 0 { 4 + 8 * sack_n } else { 0 };
        // TSO: the device cuts at its MTU, which is our MSS; so only where the peer
        // takes segments of our MSS. IP and TCP headers come out of the packet size.
        let headers = if self.remote().is_ipv6() { 60 } else { 40 };
        let tso_room = egress
            .tso_max
            .filter(|_| self.opts.seg_mss() >= self.opts.mss_ours)
            .map(|max| max.min(usize::from(u16::MAX)).saturating_sub(headers + opt))
            .map(|room| room.min(self.burst_limit()));
        let mut plan = self.plan(ctx.now, &ctx.shared.config, tso_room)?;
        // Payload room: the MSS (or the TSO size) minus this segment's options, and
        // what the buffer holds.
        let syn_opt = if plan.flags.syn() { 12 } else { 0 };
        let segment_room = match tso_room {
            Some(room) if plan.kind == Kind::Next => room,
            _ => usize::from(self.opts.seg_mss()).saturating_sub(opt),
        };
        let buf_room = buf.len().saturating_sub(20 + opt + syn_opt);
        let room = segment_room.min(buf_room);
        // Larger than the segment size in use: TSO's, or a path MTU probe (`mtu.rs`).
        let mtu_probe = plan.len > room && self.mtu_probe_goes(plan.seq, plan.len, opt, buf_room);
        if plan.len > room && !mtu_probe {
            plan.len = room;
            plan.flags = Flags(plan.flags.0 & !Flags::FIN.0);
        }
        // A probe never ends the queued data (more follows it), and goes without PSH
        // as Linux's does.
        let push = if mtu_probe {
            Push::No
        } else {
            self.push_due(&plan, ctx.now)
        };
        if push != Push::No {
            plan.flags = plan.flags | Flags::PSH;
        }
        let len = self.write(ctx, &plan, buf, (egress.checksum, sack_n))?;
        if mtu_probe {
            ctx.shared.stats.mtu_probes += 1;
        } else if plan.len > usize::from(self.opts.seg_mss())
            && let Some(snd) = self.state.snd_mut()
        {
            snd.tso = true;
        }
        self.after_send(
            ctx.now,
            &ctx.shared.config,
            &mut ctx.shared.stats,
            &mut ctx.shared.pool,
            &plan,
        );
        // A push forced within a long write opens a pair as a segment without PSH
        // would: the burst's segments still pair up as Linux's TSO packets, so the
        // burst ends with PSH whatever the write's length.
        if push == Push::Forced
            && let Some(snd) = self.state.snd_mut()
        {
            snd.pair_open = true;
        }
        Some(len)
    }

    /// Whether [`Conn::poll_transmit`] could produce a segment (or arm the persist
    /// timer) now. False means it certainly would not: the table then leaves the
    /// connection out of its output queue, so an idle connection costs nothing per poll.
    /// It must stay true for every case `plan` acts on.
    pub fn may_send(&self) -> bool {
        if self.ack == AckState::Now || self.probe.is_some() {
            return true;
        }
        if self.timers.is_set(Timer::Pace) {
            // Data waits for the pacing timer, which queues the connection again.
            return false;
        }
        match &self.state {
            State::Closed(_) | State::FinWait2(_) | State::TimeWait(_) => false,
            State::SynSent(s) => s.snd_nxt == s.iss,
            State::SynRcvd(s) => s.snd_nxt == s.iss,
            // One match for the sending half and whether the FIN is queued
            // (`State::snd`, `State::fin_queued`).
            State::Established(Established { snd, .. })
            | State::CloseWait(CloseWait { snd, .. }) => snd_may_send(snd, false),
            State::FinWait1(FinWait1 { snd, .. })
            | State::Closing(Closing { snd, .. })
            | State::LastAck(LastAck { snd, .. }) => snd_may_send(snd, true),
        }
    }

    /// How many SACK blocks the next segment carries (RFC 2018 §3: at most 3 with
    /// timestamps, 4 without).
    fn sack_blocks_to_send(&self) -> usize {
        let max = if self.opts.ts.is_some() { 3 } else { 4 };
        match self.state.rcv() {
            Some(rcv) if self.opts.sack => {
                let dsack = usize::from(rcv.sack.has_dsack());
                (rcv.buffer.out_of_order_ranges().count() + dsack).min(max)
            }
            _ => 0,
        }
    }

    /// Decide what goes next, if anything.
    fn plan(&mut self, now: Instant, config: &TcpConfig, tso_room: Option<usize>) -> Option<Plan> {
        let ack_now = self.ack == AckState::Now;
        let ack_plan = |seq: SeqNumber| Plan {
            seq,
            flags: Flags::NONE,
            len: 0,
            kind: Kind::Ack,
        };
        match &mut self.state {
            State::Closed(_) => None,
            State::SynSent(s) if s.snd_nxt == s.iss => {
                let seq = s.iss;
                Some(Plan {
                    seq,
                    flags: Flags::SYN,
                    len: self.syn_data_len(),
                    kind: Kind::Syn,
                })
            }
            State::SynSent(_) => None,
            State::SynRcvd(s) if s.snd_nxt == s.iss => Some(Plan {
                seq: s.iss,
                flags: Flags::SYN,
                len: 0,
                kind: Kind::Syn,
            }),
            State::SynRcvd(s) => ack_now.then_some(ack_plan(s.iss + 1)),
            // A keep-alive probe (RFC 1122 §4.2.3.6: SEG.SEQ = SND.NXT-1, here our FIN's
            // sequence number); no window probe is due with nothing left to send.
            State::FinWait2(s) => match self.probe.take() {
                Some(Probe::Keepalive) => Some(Plan {
                    seq: s.snd.snd_nxt - 1,
                    flags: Flags::NONE,
                    len: 0,
                    kind: Kind::Probe,
                }),
                _ => ack_now.then_some(ack_plan(s.snd.snd_nxt)),
            },
            State::TimeWait(s) => ack_now.then_some(ack_plan(s.snd.snd_nxt)),
            _ => self.plan_synchronized(now, config, tso_room),
        }
    }

    /// Data, FIN, ACK or probe in a state with a sending half.
    fn plan_synchronized(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        tso_room: Option<usize>,
    ) -> Option<Plan> {
        let fin_queued = self.state.fin_queued();
        let opts = self.opts;
        let snd = self.state.snd_mut()?;
        if snd.pacing
            && let Some(at) = snd.pacer.next_send
            && !snd
                .pacer
                .may_send(now, release(snd, opts.snd_mss(), self.rtt.srtt()).ahead)
        {
            self.timers.set(Timer::Pace, at);
            return self.plan_control();
        }
        let cold = self.cold.as_ref();
        if let Some(plan) = plan_repair(snd, &opts, fin_queued, cold) {
            return Some(plan);
        }
        let (rtt, config) = (&self.rtt, config);
        restart_after_idle(snd, now, || {
            rtt.rto(backoff_of(cold), config.rto_bounds().max)
        });
        skip_recent_after_rto(snd, now, self.rtt.srtt(), opts.snd_mss());
        if config.retransmit_due_only && snd.snd_nxt < snd.snd_max {
            let rto = rtt.rto(backoff_of(cold), config.rto_bounds().max);
            super::process::skip_letters_not_due(snd, cold.map(|c| &**c), now, rto);
        }
        let partial = if self.probe == Some(Probe::Window) && snd.snd_wnd > 0 {
            Partial::Override
        } else {
            Partial::of(
                self.nodelay,
                cork_of(self.cold.as_ref()),
                self.more_held,
                snd.snd_nxt,
            )
        };
        let search = (self.cold.as_deref_mut())
            .filter(|cold| cold.records.is_empty())
            .and_then(|cold| cold.mtu.as_deref_mut());
        if let Some(search) = search
            && let Some(plan) = plan_mtu_probe(search, snd, &opts, config, now)
        {
            return Some(plan);
        }
        let cold = self.cold.as_ref();
        let fin = (fin_queued, config.lone_fin_as_linux);
        if let Some(plan) = plan_next(snd, &opts, fin, partial, tso_room, cold) {
            if partial == Partial::Override {
                self.probe = None;
            }
            return Some(plan);
        }
        mark_app_limited(snd, opts.sack, opts.snd_mss());
        note_cwnd_usage(snd, opts.snd_mss(), false);
        if partial == Partial::Corked && snd.snd_wnd > 0 {
            self.hold_cork(now);
        } else {
            self.arm_persist(now, config, fin_queued);
        }
        self.plan_control()
    }

    /// Blocked by a zero window with data waiting and nothing in flight: RFC 9293
    /// §3.8.6.1 "The sending TCP must regularly retransmit to the receiving TCP even
    /// when the window is zero" — the persist timer.
    fn arm_persist(&mut self, now: Instant, config: &TcpConfig, fin_queued: bool) {
        let Some(snd) = self.state.snd() else { return };
        let waiting = snd.data_end() > snd.snd_nxt || (fin_queued && snd.snd_nxt <= snd.data_end());
        if waiting
            && snd.outstanding() == 0
            && !self.timers.is_set(Timer::Persist)
            && self.probe.is_none()
        {
            let backoff = 1u64 << snd.probe_count.min(16);
            let delay = self
                .rtt
                .rto(backoff_of(self.cold.as_ref()), config.rto_bounds().max)
                .saturating_mul(backoff)
                .min(config.max_rto);
            self.timers.set(Timer::Persist, now + delay);
        }
    }

    /// No data to send: a probe, or an ACK that is due.
    fn plan_control(&mut self) -> Option<Plan> {
        let snd = self.state.snd()?;
        match self.probe.take() {
            // A zero-window probe: an old sequence number makes the peer answer with an
            // ACK carrying its current window (as Linux does), without data in flight.
            Some(Probe::Window) => Some(Plan {
                seq: snd.snd_una - 1,
                flags: Flags::NONE,
                len: 0,
                kind: Kind::Probe,
            }),
            // RFC 1122 §4.2.3.6: a keep-alive "segment with SEG.SEQ = SND.NXT-1", SND.NXT
            // being the next new octet (SND.MAX here, see below).
            Some(Probe::Keepalive) => Some(Plan {
                seq: snd.snd_max - 1,
                flags: Flags::NONE,
                len: 0,
                kind: Kind::Probe,
            }),
            // A bare ACK carries SND.MAX, not SND.NXT: after a timeout SND.NXT goes back
            // to SND.UNA (go-back-N) while the peer may hold everything up to SND.MAX, and
            // a segment below its RCV.NXT is unacceptable, its ACK field never read. With
            // both sides in that state (data both ways, their ACKs lost) neither learned
            // that its data had arrived and both retransmitted until they timed out (the
            // soak test found it). 4.4BSD's `tcp_output` does the same ("For ACK only
            // packets ... use snd_max instead of snd_nxt"), as Linux, whose snd_nxt
            // never goes back.
            None if self.ack == AckState::Now => Some(Plan {
                seq: snd.snd_max,
                flags: Flags::NONE,
                len: 0,
                kind: Kind::Ack,
            }),
            None => None,
        }
    }

    /// The cork holds back data (`plan_next` found nothing to send): bound the wait
    /// by [`CORK_CEILING`] from when data first waited; with nothing queued, no bound.
    fn hold_cork(&mut self, now: Instant) {
        let Some(snd) = self.state.snd() else { return };
        if snd.snd_nxt < snd.data_end() {
            self.timers.set_if_idle(Timer::Cork, now + CORK_CEILING);
        } else {
            self.timers.stop(Timer::Cork);
            if let Cork::Lapsed(_) = self.cork() {
                *self.cork_mut() = Cork::On;
            }
        }
    }

    /// Write the planned segment, with `sack_n` SACK blocks
    /// ([`Conn::sack_blocks_to_send`], which planning does not change).
    fn write(
        &mut self,
        ctx: &mut Ctx<'_>,
        plan: &Plan,
        buf: &mut [u8],
        (checksum, sack_n): (bool, usize),
    ) -> Option<usize> {
        let syn = plan.flags.syn();
        let ack_bit = !matches!(self.state, State::SynSent(_));
        let rcv_nxt = self.state.rcv_nxt().unwrap_or_default();
        let window = self.advertise(syn, ctx.shared.config.recv_buffer);
        let timestamps = self
            .opts
            .ts
            .map(|ts| (tsval(ctx.now), if ack_bit { ts.recent } else { 0 }));
        let mut flags =
            plan.flags | self.ecn_output(&mut ctx.shared.stats, &mut ctx.shared.out, plan, ack_bit);
        if ack_bit {
            flags = flags | Flags::ACK;
        }
        let ack = if ack_bit { rcv_nxt.0 } else { 0 };
        let (payload, offset) = self.payload(plan);
        let fill = match (checksum, offset) {
            (true, _) => Fill::Checksum,
            // Gathered from at most two slices (the driver's `writev` takes two).
            (false, Some(at))
                if ctx.shared.out.gather
                    && plan.len >= DEFER_MIN
                    && payload.as_pair().is_some() =>
            {
                ctx.shared.out.deferred = Some((at, plan.len));
                Fill::Deferred
            }
            (false, _) => Fill::Partial,
        };
        // The fields of every segment; a SYN's or SACK blocks take the whole writer.
        let header = PlainHeader {
            src_port: self.ends.local_port(),
            dst_port: self.ends.remote_port(),
            seq: plan.seq.0,
            ack,
            flags,
            window,
            timestamps,
        };
        let len = if !syn && sack_n == 0 && ctx.shared.fast_paths {
            write_plain_segment(&header, payload, self.ends.ips(), buf, fill)?
        } else {
            self.write_with_options(&header, (syn, sack_n), payload, buf, fill)?
        };
        ctx.shared.stats.segments_out += 1;
        if plan.len > 0 && ctx.shared.config.interactive_delayed_ack {
            self.note_data_sent(ctx.now, ctx.shared.config.delayed_ack);
        }
        if sack_n > 0
            && let Some(rcv) = self.state.rcv_mut()
            && rcv.sack.take_dsack().is_some()
        {
            ctx.shared.stats.dsacks_sent += 1;
        }
        if ack_bit {
            if let Some(ts) = &mut self.opts.ts {
                ts.last_ack_sent = rcv_nxt;
            }
            self.ack = AckState::Idle;
            self.timers.stop(Timer::DelayedAck);
        }
        Some(len)
    }

    /// [`Conn::write`]'s segment with options beyond timestamps (a SYN's, SACK
    /// blocks), through a whole `Repr`: out of line, the plain segment being the
    /// common one.
    #[inline(never)]
    fn write_with_options(
        &self,
        header: &PlainHeader,
        (syn, sack_n): (bool, usize),
        payload: Slices<'_>,
        buf: &mut [u8],
        fill: Fill,
    ) -> Option<usize> {
        let mut options = Options::default();
        if syn {
            syn_options(&self.opts, self.syn_fast_open_option(), &mut options);
        }
        options.timestamps = header.timestamps;
        if sack_n > 0
            && let Some(rcv) = self.state.rcv()
        {
            let (blocks, count) = rcv.sack.blocks(rcv.rcv_nxt, &rcv.buffer, sack_n);
            options.sack_blocks = blocks;
            options.sack_len = count as u8;
        }
        let repr = Repr {
            src_port: header.src_port,
            dst_port: header.dst_port,
            seq: header.seq,
            ack: header.ack,
            flags: header.flags,
            window: header.window,
            options,
            ..Repr::default()
        };
        write_segment(&repr, payload, self.ends.ips(), buf, fill)
    }

    /// Data went out at `now` ([`TcpConfig::interactive_delayed_ack`](crate::tcp::TcpConfig::interactive_delayed_ack)
    /// on): Linux's `tcp_event_data_sent`, "If it is a reply for ato after last
    /// received packet, enter pingpong mode", the ato here the delayed-ACK time
    /// `delay` (Linux's `TCP_ATO_MIN`, 40 ms, its value while the data comes back to
    /// back). Before any data arrived there is nothing to reply to (Linux's ato is 0).
    fn note_data_sent(&mut self, now: Instant, delay: Duration) {
        let ato = delay.min(MAX_ACK_DELAY);
        if self
            .last_data_at
            .is_some_and(|at| now.saturating_duration_since(at) < ato)
        {
            self.interactive = true;
        }
    }

    /// Whether the planned segment carries PSH. RFC 9293 §3.9.1.2 leaves it to the
    /// sender beyond MUST-61 ("set the PSH bit in the last buffered segment"); imp sets
    /// it where Linux does, as packetdrill's scripts see it (and Linux 6.18 run under
    /// them shows):
    /// - the segment that ends a write (not one with MSG_MORE: `Cold::push_at`), new or
    ///   sent again (`tcp_push` marks the skb, which keeps the flag);
    /// - within a write longer than half the largest window the peer offered, new
    ///   data at least every half window: Linux pushes once the data written runs more
    ///   than that past the last push (`forced_push`: `write_seq > pushed_seq +
    ///   max_window / 2`, at the end of a skb of Linux's size goal). imp counts
    ///   forward from the start of a write longer than half a window
    ///   (`Cold::forced_from`, `forced_push` below), and otherwise back from the push
    ///   point in half windows (`forced_push_back`), as often;
    /// - every TSO packet of new data of more than one segment: Linux sends PSH on each
    ///   (a GSO packet's last segment carries it), not on a lone segment. Where imp does
    ///   not use TSO (the peer's MSS below ours) it sends segments one by one, and the
    ///   second of two sent back to back at the same instant carries PSH, as the pair
    ///   Linux sends as one packet at the TSO size it starts with (2 segments);
    /// - data that goes because the cork's ceiling passed (Linux sends it from the
    ///   probe timer, `tcp_write_wakeup`, which sets PSH).
    ///
    /// A Fast Open SYN's data goes without PSH, as Linux sends it.
    fn push_due(&self, plan: &Plan, now: Instant) -> Push {
        if plan.len == 0 {
            return Push::No;
        }
        let Some(snd) = self.state.snd() else {
            return Push::No;
        };
        let end = plan.seq + plan.len;
        let push_at = self.cold.as_ref().and_then(|cold| cold.push_at);
        let push_at = push_at.unwrap_or_else(|| snd.data_end());
        if end == push_at || record_end_after(self.cold.as_ref(), plan.seq) == Some(end) {
            return Push::Yes;
        }
        self.push_within_write(plan, now, push_at)
    }

    /// [`Conn::push_due`] for a segment that does not end the write (out of line: the
    /// small write, all in one segment, is the common case).
    #[inline(never)]
    fn push_within_write(&self, plan: &Plan, now: Instant, push_at: SeqNumber) -> Push {
        let Some(snd) = self.state.snd() else {
            return Push::No;
        };
        let end = plan.seq + plan.len;
        if plan.seq < snd.snd_max {
            return Push::No;
        }
        if plan.len > self.opts.snd_mss()
            || (snd.pair_open && snd.last_send == Some(now))
            || matches!(self.cork(), Cork::Lapsed(at) if plan.seq < at)
        {
            Push::Yes
        } else if match self.cold.as_ref().and_then(|cold| cold.forced_from) {
            Some(from) => forced_push(plan.seq, end, from, snd.max_snd_wnd, self.opts.snd_mss()),
            None => forced_push_back(plan.seq, end, push_at, snd.max_snd_wnd),
        } {
            Push::Forced
        } else {
            Push::No
        }
    }

    /// The planned segment's payload (a range of the send buffer) and its offset from
    /// SND.UNA in the send buffer (None without payload).
    fn payload(&self, plan: &Plan) -> (Slices<'_>, Option<usize>) {
        if plan.len == 0 {
            return (Slices::empty(), None);
        }
        match self.state.snd() {
            Some(snd) => {
                let at = plan.seq - snd.snd_una;
                (snd.buffer.slices(at, plan.len), Some(at))
            }
            // A Fast Open SYN's data (RFC 7413 §4.1.2), from the start of the buffer;
            // always copied (there is no SND.UNA to defer from).
            None => match &self.state {
                State::SynSent(s) => (s.buffer.slices(0, plan.len), None),
                _ => (Slices::empty(), None),
            },
        }
    }

    /// The window field: RFC 9293 §3.8.6.2.2 receiver SWS avoidance, never moving the
    /// right edge left (§3.8.6.2.2 "the right edge ... should not move left"), scaled.
    pub(super) fn advertise(&mut self, syn: bool, recv_buffer: usize) -> u16 {
        let mss = usize::from(self.opts.mss_ours);
        let shift = if syn { 0 } else { self.opts.rcv_shift() };
        if let Some(rcv) = self.state.rcv_mut() {
            let capacity = rcv.buffer.capacity();
            let edge = rcv.rcv_nxt + rcv.buffer.window();
            // "increase the window only if it can be increased by at least
            // min(Fr*RCV.BUFF, Eff.snd.MSS)", Fr = 1/2.
            if edge > rcv.rcv_adv
                && (edge - rcv.rcv_adv >= (capacity / 2).min(mss)
                    || rcv.rcv_adv == rcv.rcv_nxt && edge - rcv.rcv_nxt >= capacity.min(mss))
            {
                rcv.rcv_adv = edge;
            }
            if rcv.rcv_adv < rcv.rcv_nxt {
                rcv.rcv_adv = rcv.rcv_nxt;
            }
            let wnd = rcv.rcv_adv - rcv.rcv_nxt;
            // Round up so the advertised edge never falls short of `rcv_adv`.
            let field = wnd.div_ceil(1 << shift).min(0xffff);
            rcv.rcv_adv = rcv.rcv_nxt + (field << shift);
            return field as u16;
        }
        // SYN-SENT has no receive buffer yet: offer what it will have.
        let window = match self.state.recv_buffer_mut() {
            Some(buffer) => buffer.window(),
            None => self
                .options()
                .and_then(|o| o.recv_buffer)
                .map_or(recv_buffer, |b| b as usize),
        };
        (window >> shift).min(0xffff) as u16
    }

    /// Bookkeeping after a segment went out.
    fn after_send(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        pool: &mut Pool,
        plan: &Plan,
    ) {
        let mss = self.opts.snd_mss();
        let timestamps = self.opts.ts.is_some();
        let mut sent = None;
        match (&mut self.state, plan.kind) {
            (State::SynSent(s), Kind::Syn) => {
                s.snd_nxt = s.iss + 1;
                s.syn_data = s.syn_data.max(plan.len);
                s.timer.on_send(now);
            }
            (State::SynRcvd(s), Kind::Syn) => {
                s.snd_nxt = s.iss + 1;
                s.timer.on_send(now);
            }
            (state, Kind::Next | Kind::Repair) => {
                let Some(snd) = state.snd_mut() else { return };
                let end = plan.seq + plan.len + usize::from(plan.flags.fin());
                let again = plan.seq < snd.snd_max;
                if plan.len > 0 {
                    snd.pair_open = !plan.flags.psh() && !again;
                }
                if again {
                    count_retransmit(snd, &mut self.cold, config, stats);
                } else if !timestamps {
                    snd.loss.get_mut().sampler.start(end, now);
                }
                on_data_sent(snd, now, (plan.seq, end), again, (self.rtt.srtt(), mss));
                snd.last_send = Some(now);
                if plan.kind == Kind::Next {
                    if !again && plan.len < self.opts.snd_mss() {
                        snd.snd_sml = end;
                    }
                    snd.snd_nxt = end;
                    snd.snd_max = snd.snd_max.max(end);
                } else {
                    snd.high_rxt = snd.high_rxt.max(end);
                }
                note_cwnd_usage(snd, self.opts.snd_mss(), true);
                sent = Some(((plan.seq, end), again));
                self.timers.stop(Timer::Persist);
            }
            (state, Kind::Probe) => {
                match state.snd_mut() {
                    Some(snd) if snd.snd_wnd == 0 => {
                        stats.window_probes += 1;
                        snd.probe_count = snd.probe_count.saturating_add(1);
                    }
                    _ => stats.keepalive_probes += 1,
                }
                return;
            }
            _ => return,
        }
        // RFC 6298 §5.1: "Every time a packet containing data is sent (including a
        // retransmission), if the timer is not running, start it running so that it
        // will expire after RTO seconds".
        if !self.timers.is_set(Timer::Retransmit) {
            let rto = self.rto(config.rto_bounds().max);
            let at = if config.retransmit_due_only {
                // Timed from the letters' send times, this one's included (noted
                // here first; `on_sent` notes it again, which changes nothing).
                if let Some((range, again)) = sent {
                    self.note_letter_sent(config, range, again, now);
                }
                self.retransmit_deadline(config, now, rto)
            } else {
                Conn::send_deadline(config, now, rto)
            };
            self.timers.set(Timer::Retransmit, at);
        }
        if let Some(timeout) = self.user_timeout(config) {
            self.timers.set_if_idle(Timer::UserTimeout, now + timeout);
        }
        if let Some((range, again)) = sent {
            self.on_sent(now, config, stats, pool, range, again);
        }
    }
}

/// A retransmission went out: counted, and the RTT sample it spoils dropped (Karn).
/// Out of line, as it is rare.
#[cold]
#[inline(never)]
fn count_retransmit(
    snd: &mut Snd,
    cold: &mut Option<alloc::boxed::Box<Cold>>,
    config: &TcpConfig,
    stats: &mut TcpStats,
) {
    stats.retransmitted += 1;
    Conn::count_retransmit(cold);
    if let Some(loss) = snd.loss.allocated_mut()
        && config.karn
    {
        loss.sampler.on_retransmit();
    }
}

/// [`Conn::may_send`] in a state with a sending half, `fin_queued` when our FIN
/// follows the buffered data.
#[inline]
fn snd_may_send(snd: &Snd, fin_queued: bool) -> bool {
    let data_end = snd.data_end();
    snd.loss.repairing()
        || snd.snd_nxt < data_end
        // The FIN not sent yet: it goes at `data_end`, SND.NXT passes it.
        || (fin_queued && snd.snd_nxt <= data_end)
}

/// The options of our SYN (or SYN-ACK, which only echoes what the peer offered), with
/// the Fast Open option `fast_open`.
fn syn_options(opts: &Negotiated, fast_open: Option<FastOpenCookie>, options: &mut Options) {
    options.fast_open = fast_open;
    options.mss = Some(opts.mss_ours);
    options.window_scale = opts.wscale.map(|w| w.0);
    options.sack_permitted = opts.sack;
}

/// Linux's most bytes in one GSO packet, less its largest headers
/// (`sk_gso_max_size - 1 - MAX_TCP_HEADER`): `tcp_xmit_size_goal`'s ceiling.
const GSO_SIZE_GOAL: usize = 65536 - 1 - 320;

/// Whether the segment `[seq, end)` of a write that began at `from` ends where Linux
/// sets PSH within it. Linux's skbs hold its size goal (`tcp_xmit_size_goal`: half the
/// largest window, at most a GSO packet, in whole segments of `mss`, at least one).
/// Skbs of one segment: it forces a push (`forced_push`: `write_seq > pushed_seq +
/// max_window / 2`, tested as each skb is filled, `pushed_seq` then moving to its
/// end), every `n` skbs from `from`, `n` the fewest whose bytes exceed half the window.
/// Skbs of several: each goes as a TSO packet with PSH (Linux 6.18), so each skb's end,
/// where imp sends segment by segment (the peer's MSS below ours), carries it.
fn forced_push(
    seq: SeqNumber,
    end: SeqNumber,
    from: SeqNumber,
    max_window: u32,
    mss: usize,
) -> bool {
    if seq < from {
        return false;
    }
    let mss = mss.max(1);
    let half = max_window as usize / 2;
    let goal = (half.min(GSO_SIZE_GOAL) / mss).max(1) * mss;
    let step = if goal > mss {
        goal
    } else {
        (half / goal + 1) * goal
    };
    // A push point in (seq, end].
    (end - from) / step > (seq - from) / step
}

/// Whether the segment `[seq, end)` holds a point a whole number of half windows
/// (`max_window / 2`, at least one) before the push point `push_at`: data queued by
/// writes each shorter than half a window, which Linux pushes at their ends, goes
/// with PSH at least every half window.
fn forced_push_back(seq: SeqNumber, end: SeqNumber, push_at: SeqNumber, max_window: u32) -> bool {
    if end > push_at {
        return false;
    }
    let half = (max_window as usize / 2).max(1);
    // Distances back from the push point: the segment covers [to_end, to_seq).
    let (to_end, to_seq) = (push_at - end, push_at - seq);
    to_end.div_ceil(half).max(1) * half < to_seq
}

/// A retransmission out of order: NewReno's one segment, or RFC 6675 NextSeg(); never
/// past a record boundary (`Cold::records`). None at once unless a repair is due (the
/// common case, kept inline; the rest is out of line).
#[inline]
fn plan_repair(
    snd: &mut Snd,
    opts: &Negotiated,
    fin_queued: bool,
    cold: Option<&alloc::boxed::Box<Cold>>,
) -> Option<Plan> {
    if !snd.loss.repairing() {
        return None;
    }
    plan_repair_due(snd, opts, fin_queued, cold)
}

/// [`plan_repair`] with a retransmission queued or recovery in progress.
#[cold]
#[inline(never)]
fn plan_repair_due(
    snd: &mut Snd,
    opts: &Negotiated,
    fin_queued: bool,
    cold: Option<&alloc::boxed::Box<Cold>>,
) -> Option<Plan> {
    let mss = opts.snd_mss();
    let fin_at = fin_queued.then(|| snd.data_end());
    let segment = |snd: &Snd, seq: SeqNumber, max: usize| {
        let end = record_end_after(cold, seq).unwrap_or_else(|| snd.data_end());
        let len = (end - seq).min(max);
        let fin = fin_at == Some(seq + len) && seq + len < snd.snd_max;
        Plan {
            seq,
            flags: if fin { Flags::FIN } else { Flags::NONE },
            len,
            kind: Kind::Repair,
        }
    };
    if let Some(seq) = snd.loss.allocated_mut().and_then(|l| l.rexmit.take())
        && seq >= snd.snd_una
        && seq < snd.snd_max
    {
        return Some(segment(snd, seq, mss));
    }
    snd.loss.recovery()?;
    if !opts.sack {
        return None;
    }
    // RFC 6675 §5 (C): "If cwnd - pipe >= 1 SMSS, the sender SHOULD transmit one or more
    // segments as follows: (C.1) The scoreboard MUST be queried via NextSeg()"; the room
    // is PRR's after a window cut (RFC 9937), and with RACK the segment its first lost.
    let room = recovery_room(snd, true, mss).unwrap_or(0);
    let (seq, len) = if snd.rack_enabled {
        snd.rack().log.next_lost(mss)?
    } else {
        snd.scoreboard
            .next_seg(snd.snd_una, snd.snd_max, snd.high_rxt, mss)?
    };
    if room < len.min(mss) {
        return None;
    }
    Some(segment(snd, seq, len))
}

/// What may make a segment smaller than the MSS wait, from the user's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Partial {
    /// RFC 9293 §3.7.4 Nagle's algorithm: it waits while data is unacknowledged.
    Nagle,
    /// No-delay (TCP_NODELAY): it goes at once.
    Immediately,
    /// The cork (TCP_CORK): it waits for more data, the uncork or the ceiling.
    Corked,
    /// RFC 9293 §3.8.6.2.1's override: the persist timer expired while a window too
    /// small for sender SWS avoidance held data back with nothing in flight; what the
    /// window allows goes now ("a timeout to force transmission of data, overriding the
    /// SWS avoidance algorithm").
    Override,
}

impl Partial {
    /// The policy for the segment at `snd_nxt`: the cork wins over no-delay, as in
    /// Linux; a lapsed cork releases what was queued when it lapsed; a write with more
    /// to follow (`more_held`) holds it as the cork does, until the peer's next segment.
    fn of(nodelay: bool, cork: Cork, more_held: bool, snd_nxt: SeqNumber) -> Partial {
        match cork {
            Cork::On => Partial::Corked,
            Cork::Lapsed(end) if snd_nxt >= end => Partial::Corked,
            _ if more_held => Partial::Corked,
            _ if nodelay => Partial::Immediately,
            _ => Partial::Nagle,
        }
    }
}

/// How much new data could go at SND.NXT now, and what bounds it.
#[derive(Debug, Clone, Copy)]
struct Room {
    /// Queued bytes not sent yet.
    available: usize,
    /// Bytes in the network (RFC 6675 pipe during SACK recovery).
    in_flight: usize,
    /// What the congestion window allows.
    cwnd: usize,
    /// What the peer's window allows.
    wnd: usize,
}

impl Room {
    /// The room at SND.NXT.
    fn at_snd_nxt(snd: &Snd, sack: bool, mss: usize) -> Room {
        let data_end = snd.data_end();
        let available = if snd.snd_nxt < data_end {
            data_end - snd.snd_nxt
        } else {
            0
        };
        let recovery = recovery_room(snd, sack, mss);
        let in_flight = if recovery.is_some() {
            pipe(snd, mss)
        } else {
            snd.snd_nxt - snd.snd_una
        };
        // RFC 3042 limited transmit: "a TCP sender SHOULD send a segment of previously
        // unsent data in response to each of the first two duplicate ACKs", cwnd + 2*SMSS.
        let limited = if !snd.loss.in_recovery() {
            snd.dup_acks.min(2) as usize * mss
        } else {
            0
        };
        let wnd_edge = snd.snd_una + snd.snd_wnd as usize;
        // The loss probe goes whatever cwnd says (RFC 8985 §7.3).
        let probe = if snd.rack().probe_due { mss } else { 0 };
        Room {
            available,
            in_flight,
            cwnd: recovery
                .unwrap_or_else(|| (snd.cc.cwnd() + limited).saturating_sub(in_flight))
                .max(probe),
            wnd: if wnd_edge > snd.snd_nxt {
                wnd_edge - snd.snd_nxt
            } else {
                0
            },
        }
    }

    /// [`Room::at_snd_nxt`]'s `cwnd` outside loss recovery (no recovery room, and the
    /// flight SND.NXT - SND.UNA).
    #[inline]
    fn cwnd_outside_recovery(snd: &Snd, mss: usize) -> usize {
        let in_flight = snd.snd_nxt - snd.snd_una;
        let limited = snd.dup_acks.min(2) as usize * mss;
        let probe = if snd.rack().probe_due { mss } else { 0 };
        (snd.cc.cwnd() + limited)
            .saturating_sub(in_flight)
            .max(probe)
    }

    /// The payload of the next segment, at most `largest`.
    fn segment_len(&self, largest: usize, mss: usize) -> usize {
        let mut len = self.available.min(largest).min(self.cwnd).min(self.wnd);
        if len > mss && len < self.available {
            // A large segment ends on an MSS boundary while more data waits: the device
            // would otherwise cut a runt off its tail.
            len -= len % mss;
        }
        len
    }
}

/// Restart after idle, RFC 5681 §4.1 (the method imp implements; not RFC 7661's pipeACK):
/// "a TCP SHOULD set cwnd to no more than RW before beginning transmission if the TCP
/// has not sent data in an interval exceeding the retransmission timeout", RW =
/// min(IW, cwnd). Idle means nothing in flight and data waiting, the last send more than
/// one RTO ago; a window the sender did not fill meanwhile did not grow either
/// (RFC 7661 §4.3's rule, in the controllers).
fn restart_after_idle(snd: &mut Snd, now: Instant, rto: impl FnOnce() -> Duration) {
    if snd.snd_una == snd.snd_max
        && snd.snd_nxt < snd.data_end()
        && snd.last_send.is_some_and(|last| now - last > rto())
    {
        snd.cc.on_idle_restart(now);
        snd.last_send = None;
    }
}

/// After a timeout, with RACK: go-back-N resends SND.UNA and what RACK's RTO rule
/// (RFC 8985 §6.3) counts lost, and jumps over what was sent within RACK.rtt +
/// RACK.reo_wnd (see `SentLog::recent_end`), which RACK resends later if SACKs show it
/// lost. Without it, a timeout over a long queue resent the whole window while its
/// originals were still arriving, and the SACKs of those originals, taken for the
/// copies' (the RTT far above the handshake's min_RTT), marked the copies' predecessors
/// lost again and again.
#[inline]
fn skip_recent_after_rto(snd: &mut Snd, now: Instant, srtt: Option<Duration>, mss: usize) {
    if snd.rack_enabled && snd.loss.rto_recover().is_some() {
        skip_recent_in_rto_recovery(snd, now, srtt, mss);
    }
}

/// [`skip_recent_after_rto`] once a timeout's recovery is on, out of line.
#[cold]
#[inline(never)]
fn skip_recent_in_rto_recovery(snd: &mut Snd, now: Instant, srtt: Option<Duration>, mss: usize) {
    if snd.snd_nxt <= snd.snd_una || snd.snd_nxt >= snd.snd_max {
        return;
    }
    let segs_sacked = snd.scoreboard.sacked_bytes() / mss.max(1);
    let wait = snd.rack().rtt
        + snd
            .rack()
            .reo_wnd(snd.rack_min_rtt, true, segs_sacked, srtt);
    if let Some(end) = snd.rack().log.recent_end(snd.snd_nxt, wait, now) {
        snd.snd_nxt = end.min(snd.snd_max);
    }
}

/// After a timeout, skip what the peer SACKed (a timeout after reneging cleared the
/// scoreboard: RFC 2018 §8).
fn skip_sacked(snd: &mut Snd, sack: bool) {
    if sack
        && snd.snd_nxt < snd.snd_max
        && let Some((_, right)) = snd
            .scoreboard
            .ranges()
            .find(|&(l, r)| l <= snd.snd_nxt && snd.snd_nxt < r)
    {
        snd.snd_nxt = right.min(snd.snd_max);
    }
}

/// New data (or data again after a timeout) at SND.NXT, and the FIN; with `tso_room`,
/// up to that much in one segment (whole MSS multiples while more data waits), never
/// past a record boundary (`Cold::records`).
///
/// `fin`: whether our FIN follows the buffered data, and whether a FIN alone may go
/// with cwnd full (`TcpConfig::lone_fin_as_linux`).
fn plan_next(
    snd: &mut Snd,
    opts: &Negotiated,
    (fin_queued, lone_fin_as_linux): (bool, bool),
    partial: Partial,
    tso_room: Option<usize>,
    cold: Option<&alloc::boxed::Box<Cold>>,
) -> Option<Plan> {
    let mss = opts.snd_mss();
    skip_sacked(snd, opts.sack);
    let room = Room::at_snd_nxt(snd, opts.sack, mss);
    let largest = tso_room.map_or(mss, |room| room.max(mss));
    let mut len = room.segment_len(largest, mss);
    let data_end = snd.data_end();
    // A record that ends before the queued data does: its last segment goes alone
    // (Linux's EOR skb, which `tcp_skb_can_collapse` never merges), and whatever its
    // size, as Linux sends an skb that is not the last in its queue (no Nagle test).
    let record_ends = match record_end_after(cold, snd.snd_nxt) {
        Some(end) if end < data_end && len >= end - snd.snd_nxt => {
            len = end - snd.snd_nxt;
            true
        }
        _ => false,
    };
    let fin_due = fin_queued && snd.snd_nxt <= data_end;
    let again = snd.snd_nxt < snd.snd_max;
    let go = if len == 0 {
        // The FIN alone, once all data is out (it needs no window room here: a peer
        // that cannot take it will drop it and we retransmit).
        room.available == 0 && fin_due && (room.cwnd > 0 || again || lone_fin_as_linux)
    } else if again || record_ends {
        true
    } else if len >= mss {
        !tso_defers(&room, len, largest, tso_room.is_some() && !fin_due)
    } else {
        partial_goes(snd, &room, len, partial, fin_due)
    };
    let fin = fin_due && snd.snd_nxt + len == data_end;
    go.then_some(Plan {
        seq: snd.snd_nxt,
        flags: if fin { Flags::FIN } else { Flags::NONE },
        len,
        kind: Kind::Next,
    })
}

/// A path MTU probe at SND.NXT, when one is due (`mtu::plan_probe`): one segment of new
/// data larger than the size in use, never past a record boundary or with the FIN.
#[cold]
#[inline(never)]
fn plan_mtu_probe(
    search: &mut super::mtu::MtuSearch,
    snd: &Snd,
    opts: &Negotiated,
    config: &crate::tcp::TcpConfig,
    now: Instant,
) -> Option<Plan> {
    let mss = opts.snd_mss();
    let room = Room::at_snd_nxt(snd, opts.sack, mss);
    let len = super::mtu::plan_probe(
        search,
        snd,
        opts,
        config,
        now,
        (room.available, room.wnd, room.cwnd),
    )?;
    Some(Plan {
        seq: snd.snd_nxt,
        flags: Flags::NONE,
        len,
        kind: Kind::Next,
    })
}

/// Whether a segment of at least one MSS waits for more data to fill a large one.
///
/// TSO with the application writing in pieces smaller than a large segment: each
/// piece would go alone. While a large segment's worth is unacknowledged, an ACK is
/// sure to come soon (RFC 5681 §4.2: "an ACK SHOULD be generated for at least every
/// second full-sized segment") and clocks out what gathers meanwhile in larger
/// segments (as Linux's `tcp_tso_should_defer`). Never with less in flight, so it adds
/// at most the time to that ACK. `tso`: TSO is on and no FIN is due.
fn tso_defers(room: &Room, len: usize, largest: usize, tso: bool) -> bool {
    tso && len == room.available && len < largest && room.in_flight >= largest
}

/// Whether a segment smaller than the MSS (all that is queued, or what the window
/// leaves) goes now.
fn partial_goes(snd: &Snd, room: &Room, len: usize, partial: Partial, fin_due: bool) -> bool {
    if len == room.available {
        // RFC 9293 §3.7.4 Nagle: "if there is unacknowledged data ... buffer all user
        // data ... until the outstanding data has been acknowledged or until the TCP can
        // send a full-sized segment", in Minshall's variant (draft-minshall-nagle, as
        // Linux): only unacknowledged *small* segments hold a small one back, so the
        // tail of a bulk write does not wait behind the peer's delayed ACK of a
        // full-sized segment. A queued FIN pushes the tail out, corked or not (closing
        // uncorks, as in Linux).
        return fin_due
            || match partial {
                Partial::Immediately => true,
                Partial::Nagle => !small_unacked(snd),
                Partial::Corked => false,
                Partial::Override => true,
            };
    }
    // Window-limited below a full segment: §3.8.6.2.1 sender SWS avoidance, "(c) ... at
    // least a fraction Fs of the maximum window can be sent", Fs = 1/2.
    // Or the override timer (the persist timer, with a window open) expired.
    len == room.wnd
        && (partial == Partial::Override || len >= (snd.max_snd_wnd as usize / 2).max(1))
}

/// Minshall's test: a segment smaller than the MSS is sent and not acknowledged. (After
/// a timeout SND.NXT may fall back below it; then it is being sent again and does not
/// count, as in Linux's `tcp_minshall_check`.)
fn small_unacked(snd: &Snd) -> bool {
    snd.snd_sml > snd.snd_una && snd.snd_sml <= snd.snd_nxt
}

/// Nothing more to send and room in the window: the application limits the rate, and
/// the samples of what is sent until then say so (the delivery-rate draft's
/// "C.app_limited").
fn mark_app_limited(snd: &mut Snd, sack: bool, mss: usize) {
    if snd.rate.is_none() {
        return;
    }
    let room = Room::at_snd_nxt(snd, sack, mss);
    if room.available == 0
        && room.cwnd >= mss
        && let Some(rate) = snd.rate.as_deref_mut()
    {
        rate.on_app_limited(room.in_flight);
    }
}

/// How the send just made (`sent`), or the send held back, used cwnd, for the
/// controller's growth (Linux's `tcp_cwnd_validate`): limited when less than a segment
/// of the window is left after a send (Linux counts packets, so a full window of any
/// size of segment is limited), or when the window holds back data waiting; either way
/// the most outstanding in this window of data. In loss recovery the recovery's own
/// window (PRR) paces every send, which counts as limited.
fn note_cwnd_usage(snd: &mut Snd, mss: usize, sent: bool) {
    if !sent && snd.snd_nxt >= snd.data_end() {
        // Nothing waits: the window held nothing back.
        return;
    }
    let limited = if snd.loss.in_recovery() {
        sent
    } else {
        // Outside recovery, `Room::at_snd_nxt`'s window room without the rest of it
        // (worked out again after every send).
        let cwnd = Room::cwnd_outside_recovery(snd, mss);
        if sent {
            cwnd < mss
        } else {
            // Data waits (the test above): SND.NXT is below its end.
            let available = snd.data_end() - snd.snd_nxt;
            cwnd < available.min(mss)
        }
    };
    if !sent && !limited {
        return;
    }
    let flight = snd.outstanding();
    let (snd_nxt, snd_una) = (snd.snd_nxt, snd.snd_una);
    snd.cwnd_usage.on_send(limited, flight, snd_nxt, snd_una);
}

/// Delivery-rate stamps, loss accounting and the pacing deadline for data `[seq, end)`
/// sent at `now` (`again`: a retransmission, which counts its bytes as lost), the
/// connection's SRTT and MSS given.
#[inline]
fn on_data_sent(
    snd: &mut Snd,
    now: Instant,
    range: (SeqNumber, SeqNumber),
    again: bool,
    srtt_mss: (Option<Duration>, usize),
) {
    if again || snd.rate.is_some() || snd.pacing {
        on_data_sent_noted(snd, now, range, again, srtt_mss);
    }
}

/// [`on_data_sent`] when there is something to note (out of line: a first
/// transmission without rate sampling or pacing, the common case, notes nothing).
#[cold]
#[inline(never)]
fn on_data_sent_noted(
    snd: &mut Snd,
    now: Instant,
    (seq, end): (SeqNumber, SeqNumber),
    again: bool,
    (srtt, mss): (Option<Duration>, usize),
) {
    let before = snd.outstanding();
    let after = before.max(end - snd.snd_una);
    if again {
        snd.cc.on_loss(now, end - seq, before);
    }
    if let Some(rate) = snd.rate.as_deref_mut() {
        if again {
            rate.on_lost(end - seq);
        }
        rate.on_send(now, (seq, end), before, after);
    }
    if snd.pacing {
        let credit = release(snd, mss, srtt).credit;
        snd.pacer
            .on_send(now, end - seq, pacing_rate(snd, srtt), credit);
    }
}

/// The rate `snd` is paced at, bytes per second: the controller's own, or Linux's
/// `cwnd / srtt` scaled for the window-based ones (0: none yet, no pacing).
fn pacing_rate(snd: &Snd, srtt: Option<Duration>) -> u64 {
    snd.cc.pacing_rate().unwrap_or_else(|| {
        srtt.map_or(0, |srtt| {
            pacing::window_rate(snd.cc.cwnd(), srtt, snd.cc.in_slow_start())
        })
    })
}

/// The payload of one pacing release of `snd`: the controller's send quantum, or
/// about 1 ms at the pacing rate ([`pacing::burst_size`]).
fn send_quantum(snd: &Snd, mss: usize, srtt: Option<Duration>) -> usize {
    (snd.cc.send_quantum()).unwrap_or_else(|| pacing::burst_size(pacing_rate(snd, srtt), mss))
}

/// One pacing release of `snd` in segments of `mss` ([`pacing::Release`]).
fn release(snd: &Snd, mss: usize, srtt: Option<Duration>) -> pacing::Release {
    let quantum = send_quantum(snd, mss, srtt);
    pacing::Release::new(pacing_rate(snd, srtt), quantum, mss)
}

impl Conn {
    /// The most payload one segment carries when pacing: the controller's send
    /// quantum, or about 1 ms at the pacing rate (no limit when not pacing).
    fn burst_limit(&self) -> usize {
        match self.state.snd().filter(|s| s.pacing) {
            Some(snd) => send_quantum(snd, self.opts.snd_mss(), self.rtt.srtt()),
            None => usize::MAX,
        }
    }
}
