//! Segment arrival, split along RFC 9293 §3.10.7: SYN-SENT (§3.10.7.3), then for the
//! other states (§3.10.7.4) the sequence check, RST, SYN, ACK, (URG ignored), text, FIN.

use crate::rng::Rng;
use crate::tcp::TcpConfig;
use crate::tcp::TcpHandle;
use crate::tcp::TcpStats;
use crate::tcp::shared::Outbox;
use crate::tcp::shared::Pool;
use impnet_wire::tcp::Repr;

use super::recovery::{AckBefore, enter_recovery};
use super::{Conn, Ctx, Owner, clear_backoff, new_snd};
use crate::tcp::buffer::SendBuffer;
use crate::tcp::cc::CongestionControl;
use crate::tcp::ecn::{self, Ecn};
use crate::tcp::rtt::HandshakeTimer;
use crate::tcp::segment::{Reset, seg_len, tsval};
use crate::tcp::seq::SeqNumber;
use crate::tcp::state::*;
use crate::tcp::timer::Timer;
use crate::tcp::{MAX_ACK_DELAY, TcpError, TcpEvent};
use crate::time::{Duration, Instant};

impl Conn {
    /// A segment for this connection arrived.
    /// `ecn` is the IP header's ECN field.
    pub fn handle_segment(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>, ecn: Ecn) {
        // What a write with MSG_MORE held goes now (as Linux's `tcp_data_snd_check`
        // after the segment's ACK), as Nagle or no-delay allow.
        if self.more_held {
            self.release_more();
        }
        self.ecn_input(&mut ctx.shared.stats, seg, ecn);
        if !seg.payload.is_empty() {
            self.supply_recv_ring(&mut ctx.shared.pool);
        }
        let predicted = ctx.shared.fast_paths
            && self.input_predicted(
                ctx.now,
                ctx.handle,
                &ctx.shared.config,
                &mut ctx.shared.stats,
                &mut ctx.shared.out,
                seg,
            );
        if !predicted {
            match self.state {
                State::Closed(_) => {}
                State::SynSent(_) => self.input_syn_sent(ctx, seg),
                _ => self.input_other(ctx, seg),
            }
        }
        // An ACK that took the last unacknowledged byte leaves the send ring empty.
        self.shed_rings(&mut ctx.shared.pool);
    }

    /// RFC 9293 §3.10.7.3 "If the state is SYN-SENT": [`SynSent::on_segment`] decides,
    /// and this is the one place its disposition is carried out.
    #[inline(never)]
    fn input_syn_sent(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) {
        let State::SynSent(s) = &self.state else {
            return;
        };
        let tsecr_check =
            (ctx.shared.config.syn_sent_tsecr_check && self.opts.ts.is_some()).then_some(ctx.now);
        match s.on_segment(seg, (self.local(), self.remote()), tsecr_check) {
            SynSentDisposition::Drop => {}
            SynSentDisposition::Reset(reset) => ctx.shared.out.reset(reset),
            SynSentDisposition::Refused => {
                ctx.shared.stats.resets_received += 1;
                self.close_in(ctx, Some(TcpError::ConnectionRefused));
            }
            SynSentDisposition::Establish => self.establish_from_syn_sent(ctx, seg),
            SynSentDisposition::SimultaneousOpen => {
                self.simultaneous_open(&ctx.shared.config, &mut ctx.shared.pool, seg)
            }
        }
    }

    /// The receiving half the peer's SYN `seg` opens, once the options it answered
    /// with are agreed. (Inlined, as the two transitions below are into
    /// `input_syn_sent`: the halves are then built in place, not copied between calls.)
    #[inline(always)]
    fn rcv_from_syn(&mut self, config: &TcpConfig, pool: &mut Pool, seg: &Repr<'_>) -> Rcv {
        self.opts.agree(seg);
        let recv_size = self.recv_buffer_size(config);
        Rcv::new(
            pool.recv_buffer_of(recv_size, config.max_ooo_ranges),
            SeqNumber(seg.seq),
            self.opts.rcv_shift(),
        )
    }

    /// SYN-SENT -> ESTABLISHED: the peer's SYN `seg` acknowledged ours (and the data a
    /// Fast Open SYN carried, or some of it).
    #[inline(always)]
    fn establish_from_syn_sent(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) {
        self.on_fast_open_syn_ack(ctx.now, &mut ctx.shared.stats, &mut ctx.shared.peers, seg);
        let rcv = self.rcv_from_syn(&ctx.shared.config, &mut ctx.shared.pool, seg);
        // The state is moved out ([`State::take`]) and ESTABLISHED written over the
        // CLOSED left behind ([`State::put`]): no call to drop the old state where it lies.
        if !matches!(self.state, State::SynSent(_)) {
            return;
        }
        let SynSent {
            iss,
            snd_nxt: _,
            mut buffer,
            timer,
            fast_open: _,
            syn_data,
        } = match self.state.take() {
            State::SynSent(s) => s,
            // Tested above: cannot happen (see `State::take`).
            other => return core::mem::forget(other),
        };
        // Fast Open: what the SYN-ACK acknowledged of the SYN's data is delivered;
        // the rest goes again (RFC 7413 §4.2.2).
        let syn_data_acked = SeqNumber(seg.ack) - (iss + 1);
        buffer.consume(syn_data_acked);
        // Linux delays nothing after a SYN whose data was not all acknowledged
        // (`tcp_rcv_fastopen_synack` fails first).
        let write_pending = syn_data_acked == syn_data && !buffer.is_empty();
        let iss = iss + syn_data_acked;
        // "If SND.UNA > ISS (our SYN has been ACKed), change the connection state to
        // ESTABLISHED, form an ACK segment <SEQ=SND.NXT><ACK=RCV.NXT><CTL=ACK> and
        // send it." A SYN's window is never scaled (RFC 7323 §2.2).
        let mut snd = new_snd(
            (&ctx.shared.config, self.congestion(&ctx.shared.config)),
            &self.opts,
            iss,
            buffer,
            u32::from(seg.window),
            SeqNumber(seg.seq),
        );
        self.start_snd_in(ctx, &mut snd);
        self.state.put(State::Established(Established { snd, rcv }));
        if self.on_established(ctx.now, &ctx.shared.config, seg, timer) {
            let writable = TcpEvent::Writable(ctx.handle);
            ctx.shared.out.event(&mut ctx.shared.stats, writable);
        }
        self.ack = AckState::Now;
        if write_pending && ctx.shared.config.interactive_delayed_ack {
            self.await_reply(ctx.now, &ctx.shared.config);
        }
        // "If there are other controls or text in the segment, then continue
        // processing at the sixth step below where the URG bit is checked".
        self.on_text_in(ctx, seg);
        self.on_fin(ctx, seg);
    }

    /// SYN-SENT -> SYN-RECEIVED (simultaneous open): the peer's SYN `seg` did not
    /// acknowledge ours.
    #[inline(always)]
    fn simultaneous_open(&mut self, config: &TcpConfig, pool: &mut Pool, seg: &Repr<'_>) {
        let rcv = self.rcv_from_syn(config, pool, seg);
        let State::SynSent(SynSent {
            iss,
            snd_nxt: _,
            buffer,
            timer: _,
            fast_open: _,
            syn_data: _,
        }) = &mut self.state
        else {
            return;
        };
        // As in `establish_from_syn_sent`: only the buffer is moved out.
        let (iss, buffer) = (*iss, core::mem::replace(buffer, SendBuffer::new(0)));
        // "Otherwise, enter SYN-RECEIVED, form a SYN,ACK segment
        // <SEQ=ISS><ACK=RCV.NXT><CTL=SYN,ACK> and send it."
        self.state = State::SynRcvd(SynRcvd {
            iss,
            snd_nxt: iss,
            snd_wnd: u32::from(seg.window),
            passive: false,
            rcv,
            buffer,
            timer: HandshakeTimer::ambiguous(),
            cookie: None,
        });
        self.timers.stop(Timer::Retransmit);
    }

    /// The handshake completed: reset the retransmission state, take an RTT sample
    /// (from the timestamps, or from `timer` when the SYN went out once: RFC 6298
    /// §2.1), and apply a close requested before. Returns whether the user is to be
    /// woken (a writable event).
    fn on_established(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        seg: &Repr<'_>,
        timer: HandshakeTimer,
    ) -> bool {
        if let (Some(_), Some((_, tsecr))) = (self.opts.ts, seg.options.timestamps)
            && tsecr != 0
        {
            let ms = tsval(now).wrapping_sub(tsecr);
            self.rtt
                .sample(Duration::from_millis(u64::from(ms)), config.rto_bounds());
        } else if self.opts.ts.is_none()
            && let Some(rtt) = timer.sample(now)
        {
            self.rtt.sample(rtt, config.rto_bounds());
        }
        self.clear_retries();
        if config.mtu_probing == super::MtuProbing::Always {
            self.start_mtu_search(now, config);
        }
        self.reset_backoff();
        self.timers.stop(Timer::Retransmit);
        self.timers.stop(Timer::UserTimeout);
        self.restart_keepalive(config, now);
        if self.owner == Owner::Released {
            let _ = self.shutdown_write();
        }
        matches!(self.owner, Owner::User | Owner::Released)
    }

    /// RFC 9293 §3.10.7.4 "Otherwise" (SYN-RECEIVED and the synchronized states).
    #[inline(never)]
    fn input_other(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) {
        // A retransmitted SYN in SYN-RECEIVED: answer with our SYN-ACK again.
        if seg.flags.syn() && !seg.flags.ack() && self.syn_again(seg) {
            return;
        }
        if !self.paws_ok(&mut ctx.shared.stats, seg)
            || !self.sequence_ok(
                ctx.now,
                &ctx.shared.config,
                &mut ctx.shared.stats,
                &mut ctx.shared.out,
                &mut ctx.shared.challenge_rng,
                seg,
            )
        {
            return;
        }
        if ctx.shared.config.unsent_ack_silent && self.acks_unsent(seg) {
            // Linux's `tcp_ack` (`TcpConfig::unsent_ack_silent`): dropped without an
            // answer, before its timestamp is taken (`tcp_replace_ts_recent` follows
            // the ACK's checks).
            ctx.shared.stats.bad_ack += 1;
            return;
        }
        self.update_ts_recent(seg);
        self.restart_keepalive(&ctx.shared.config, ctx.now);
        if seg.flags.rst() {
            return self.on_rst(ctx, seg);
        }
        if seg.flags.syn() {
            return self.on_syn(ctx);
        }
        // "fifth, check the ACK field: if the ACK bit is off, drop the segment and return"
        if !seg.flags.ack() {
            ctx.shared.stats.dropped_other += 1;
            return;
        }
        if !self.on_ack(ctx, seg) {
            return;
        }
        if self.data_after_close(seg) {
            return self.reset_data_after_close(
                ctx.handle,
                &ctx.shared.config,
                &mut ctx.shared.stats,
                &mut ctx.shared.out,
                &mut ctx.shared.pool,
                seg,
            );
        }
        // "sixth, check the URG bit": urgent data is not supported (RFC 6093 deprecates
        // it for new applications); the data is delivered inline.
        self.on_text_in(ctx, seg);
        self.on_fin(ctx, seg);
    }

    /// A SYN without ACK in SYN-RECEIVED that is the peer's SYN again: the SYN-ACK
    /// goes again; returns whether it was so.
    #[cold]
    #[inline(never)]
    fn syn_again(&mut self, seg: &Repr<'_>) -> bool {
        if let State::SynRcvd(s) = &mut self.state
            && SeqNumber(seg.seq) == s.rcv.irs
        {
            s.snd_nxt = s.iss;
            // RFC 3168 §6.1.1.1: a peer that sends its SYN again without ECE and CWR
            // gave ECN up; our SYN-ACK follows.
            self.opts.ecn &= ecn::peer_agrees(seg);
            return true;
        }
        false
    }

    /// Whether `seg` is an ACK (no RST or SYN) of data not yet sent (SEG.ACK > SND.NXT,
    /// SND.NXT being the highest sent) in a state with a sending half.
    fn acks_unsent(&self, seg: &Repr<'_>) -> bool {
        seg.flags.ack()
            && !seg.flags.rst()
            && !seg.flags.syn()
            && self
                .state
                .snd()
                .is_some_and(|snd| SeqNumber(seg.ack) > snd.snd_max)
    }

    /// Whether `seg` brings new data after the application closed the connection (it
    /// has no reader any more): FIN-WAIT-1 or FIN-WAIT-2 and released, text past
    /// RCV.NXT. (After `shutdown_write` the application still reads: not this case.)
    fn data_after_close(&self, seg: &Repr<'_>) -> bool {
        self.owner == Owner::Released
            && matches!(self.state, State::FinWait1(_) | State::FinWait2(_))
            && !seg.payload.is_empty()
            && self
                .state
                .rcv_nxt()
                .is_some_and(|rcv_nxt| SeqNumber(seg.seq) + seg.payload.len() > rcv_nxt)
    }

    /// RFC 1122 §4.2.2.13: "if new data is received after CLOSE is called, its TCP
    /// SHOULD send a RST to show that data was lost." As Linux (`tcp_rcv_state_process`
    /// in FIN-WAIT-1/2 once closed, then `tcp_v4_send_reset`): the RST answers the
    /// segment (RFC 9293 §3.10.7.1's form, <SEQ=SEG.ACK><CTL=RST>) and the connection
    /// ends.
    #[cold]
    #[inline(never)]
    fn reset_data_after_close(
        &mut self,
        handle: TcpHandle,
        config: &TcpConfig,
        stats: &mut TcpStats,
        out: &mut Outbox,
        pool: &mut Pool,
        seg: &Repr<'_>,
    ) {
        stats.resets_sent += 1;
        out.reset(Reset::for_segment(self.local(), self.remote(), seg));
        self.enter_closed(
            handle,
            config,
            stats,
            out,
            pool,
            Some(TcpError::ConnectionReset),
        );
    }

    /// RFC 7323 §5.3 R1: "If there is a Timestamps option in the arriving segment,
    /// SEG.TSval < TS.Recent, TS.Recent is valid (see later discussion), and if the RST
    /// bit is not set, then treat the arriving segment as not acceptable: Send an
    /// acknowledgment in reply ... and drop the segment."
    fn paws_ok(&mut self, stats: &mut TcpStats, seg: &Repr<'_>) -> bool {
        let (Some(ts), Some((seg_tsval, _))) = (self.opts.ts, seg.options.timestamps) else {
            return true;
        };
        if seg.flags.rst() || (seg_tsval.wrapping_sub(ts.recent) as i32) >= 0 {
            return true;
        }
        stats.paws_drops += 1;
        self.ack = AckState::Now;
        false
    }

    /// RFC 7323 §4.3 (2): "If SEG.TSval >= TS.Recent and SEG.SEQ <= Last.ACK.sent, then
    /// SEG.TSval is copied to TS.Recent; otherwise, it is ignored."
    pub(super) fn update_ts_recent(&mut self, seg: &Repr<'_>) {
        if let (Some(ts), Some((seg_tsval, _))) = (&mut self.opts.ts, seg.options.timestamps)
            && (seg_tsval.wrapping_sub(ts.recent) as i32) >= 0
            && SeqNumber(seg.seq) <= ts.last_ack_sent
        {
            ts.recent = seg_tsval;
        }
    }

    /// RCV.WND: the window we advertised (zero once the peer's FIN is in).
    fn rcv_wnd(&self) -> usize {
        self.state.rcv().map_or(0, |r| {
            if r.rcv_adv > r.rcv_nxt {
                r.rcv_adv - r.rcv_nxt
            } else {
                0
            }
        })
    }

    /// RFC 9293 §3.10.7.4 "first, check sequence number": the four cases.
    fn sequence_ok(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        out: &mut Outbox,
        rng: &mut Rng,
        seg: &Repr<'_>,
    ) -> bool {
        let Some(rcv_nxt) = self.state.rcv_nxt() else {
            return false;
        };
        let wnd = self.rcv_wnd();
        let seq = SeqNumber(seg.seq);
        let len = seg_len(seg);
        let acceptable = match (len, wnd) {
            (0, 0) => seq == rcv_nxt,
            (0, _) => seq.in_window(rcv_nxt, wnd),
            // "If the RCV.WND is zero, no segments will be acceptable, but special
            // allowance should be made to accept valid ACKs, URGs, and RSTs": the data is
            // then trimmed away by the text step.
            (_, 0) => seq == rcv_nxt,
            (_, _) => seq.in_window(rcv_nxt, wnd) || (seq + len - 1).in_window(rcv_nxt, wnd),
        };
        if acceptable {
            return true;
        }
        self.unacceptable(now, config, stats, out, rng, seg);
        false
    }

    /// [`Conn::sequence_ok`] for a segment that failed the test (out of line: rare).
    #[cold]
    #[inline(never)]
    fn unacceptable(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        out: &mut Outbox,
        rng: &mut Rng,
        seg: &Repr<'_>,
    ) {
        let (Some(rcv_nxt), len) = (self.state.rcv_nxt(), seg_len(seg)) else {
            return;
        };
        let seq = SeqNumber(seg.seq);
        // TIME-WAIT: "The only thing that can arrive in this state is a retransmission
        // of the remote FIN. Acknowledge it, and restart the 2 MSL timeout."
        if let State::TimeWait(_) = self.state
            && seg.flags.fin()
            && seq + len == rcv_nxt
        {
            self.timers
                .set(Timer::TimeWait, now + config.msl.saturating_mul(2));
        }
        // "If an incoming segment is not acceptable, an acknowledgment should be sent in
        // reply (unless the RST bit is set, if so drop the segment and return)".
        stats.bad_seq += 1;
        if seg.flags.rst() || self.resend_fast_open_syn_ack(now, config, out, seg) {
            return;
        }
        // Data a peer may legitimately send again lies within one receive buffer (the
        // largest window we can have advertised) below RCV.NXT. After our receiving half
        // closed (CLOSE-WAIT, LAST-ACK, CLOSING, TIME-WAIT) the configured size stands in.
        let capacity = self
            .state
            .rcv()
            .map_or(0, |r| r.buffer.capacity())
            .max(config.recv_buffer);
        let recent = seq < rcv_nxt && rcv_nxt - seq <= capacity;
        if seg.flags.syn() || len == 0 || !recent {
            // A SYN gets a challenge ACK "irrespective of the sequence number" (RFC 5961
            // §4.2); an out-of-window segment that occupies no sequence space (an old
            // ACK, a keep-alive probe) needs no prompt answer; and data beyond the right
            // edge, or further below the window than any window we advertised, comes
            // from no peer that respects the window. All three come out of
            // the connection's challenge-ACK budget, so a blind spray of them, or two
            // stacks that disagree about the window, cannot make this connection send
            // an ACK for each (Linux rate-limits the first two the same way,
            // `tcp_oow_rate_limited`). Recent data below the window (a retransmission
            // whose ACK was lost) is always answered: the peer needs that ACK.
            if self.challenge_allowed(now, config, stats, rng) {
                self.ack = AckState::Now;
            }
            return;
        }
        self.ack = AckState::Now;
        if seq + seg.payload.len() <= rcv_nxt {
            self.note_duplicate(stats, seq, seq + seg.payload.len());
        }
    }

    /// "second, check the RST bit", with RFC 5961 §3.2: "If the RST bit is set and the
    /// sequence number exactly matches the next expected sequence number (RCV.NXT), then
    /// TCP MUST reset the connection ... If the RST bit is set and the sequence number
    /// does not exactly match ... but is within the acceptable window, then TCP MUST send
    /// an ACK (challenge ACK)".
    #[cold]
    #[inline(never)]
    fn on_rst(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) {
        if Some(SeqNumber(seg.seq)) != self.state.rcv_nxt() {
            if self.challenge_allowed(
                ctx.now,
                &ctx.shared.config,
                &mut ctx.shared.stats,
                &mut ctx.shared.challenge_rng,
            ) {
                self.ack = AckState::Now;
            }
            return;
        }
        ctx.shared.stats.resets_received += 1;
        let error = match &self.state {
            // "If this connection was initiated with a passive OPEN (i.e., came from the
            // LISTEN state), then return this connection to LISTEN state and return."
            // (The listener keeps listening; this child just goes away.) "If this
            // connection was initiated with an active OPEN ... the connection was refused".
            State::SynRcvd(s) if s.passive => None,
            State::SynRcvd(_) => Some(TcpError::ConnectionRefused),
            // "ESTABLISHED, FIN-WAIT-1, FIN-WAIT-2, CLOSE-WAIT: ... signal "connection
            // reset" ... enter the CLOSED state".
            State::Established(_)
            | State::FinWait1(_)
            | State::FinWait2(_)
            | State::CloseWait(_) => Some(TcpError::ConnectionReset),
            // "CLOSING, LAST-ACK, TIME-WAIT: ... enter the CLOSED state".
            _ => None,
        };
        self.close_in(ctx, error);
    }

    /// "fourth, check the SYN bit".
    #[cold]
    #[inline(never)]
    fn on_syn(&mut self, ctx: &mut Ctx<'_>) {
        // "SYN-RECEIVED STATE: If the connection was initiated with a passive OPEN, then
        // return this connection to the LISTEN state and return."
        if let State::SynRcvd(s) = &self.state
            && s.passive
        {
            return self.close_in(ctx, None);
        }
        // "If the SYN bit is set, irrespective of the sequence number, TCP MUST send an
        // ACK (also referred to as challenge ACK) to the remote peer" (RFC 5961 §4.2).
        if self.challenge_allowed(
            ctx.now,
            &ctx.shared.config,
            &mut ctx.shared.stats,
            &mut ctx.shared.challenge_rng,
        ) {
            self.ack = AckState::Now;
        }
    }

    /// "fifth, check the ACK field". Returns whether to go on with the text and FIN.
    fn on_ack(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) -> bool {
        let ack = SeqNumber(seg.ack);
        match &self.state {
            State::SynRcvd(s) => {
                // "If SND.UNA < SEG.ACK =< SND.NXT, then enter ESTABLISHED state and
                // continue processing ... If the segment acknowledgment is not
                // acceptable, form a reset segment <SEQ=SEG.ACK><CTL=RST> and send it."
                if !(ack > s.iss && ack <= s.iss + 1) {
                    ctx.shared.stats.bad_ack += 1;
                    ctx.shared
                        .out
                        .reset(Reset::for_segment(self.local(), self.remote(), seg));
                    return false;
                }
                self.establish_from_syn_rcvd(ctx, seg);
            }
            State::FinWait2(FinWait2 { snd: s, .. }) | State::TimeWait(TimeWait { snd: s, .. }) => {
                if ack > s.snd_nxt {
                    return self.bad_ack(
                        ctx.now,
                        &ctx.shared.config,
                        &mut ctx.shared.stats,
                        &mut ctx.shared.challenge_rng,
                    );
                }
                return true;
            }
            _ => {}
        }
        self.on_ack_snd(ctx, seg)
    }

    /// RFC 5961 §5.2: an ACK outside [SND.UNA - MAX.SND.WND, SND.NXT] is dropped and
    /// answered with a (rate-limited) ACK.
    #[cold]
    #[inline(never)]
    fn bad_ack(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        rng: &mut Rng,
    ) -> bool {
        stats.bad_ack += 1;
        if self.challenge_allowed(now, config, stats, rng) {
            self.ack = AckState::Now;
        }
        false
    }

    /// SYN-RECEIVED -> ESTABLISHED.
    fn establish_from_syn_rcvd(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) {
        // The state is moved out ([`State::take`]) and ESTABLISHED written over the
        // CLOSED left behind ([`State::put`]): no placeholder halves to build, no call
        // to drop the old state where it lies.
        if !matches!(self.state, State::SynRcvd(_)) {
            return;
        }
        let SynRcvd {
            rcv,
            buffer,
            timer,
            cookie: _,
            iss,
            snd_nxt: _,
            snd_wnd,
            passive: _,
        } = match self.state.take() {
            State::SynRcvd(s) => s,
            // Tested above: cannot happen (see `State::take`).
            other => return core::mem::forget(other),
        };
        // The SYN's window was unscaled; the window update below replaces it.
        let mut snd = new_snd(
            (&ctx.shared.config, self.congestion(&ctx.shared.config)),
            &self.opts,
            iss,
            buffer,
            snd_wnd,
            SeqNumber(seg.seq),
        );
        snd.snd_wl1 = SeqNumber(seg.seq) - 1;
        self.start_snd_in(ctx, &mut snd);
        self.state.put(State::Established(Established { snd, rcv }));
        if self.on_established(ctx.now, &ctx.shared.config, seg, timer) {
            let writable = TcpEvent::Writable(ctx.handle);
            ctx.shared.out.event(&mut ctx.shared.stats, writable);
        }
    }

    /// ACK processing in the states with a sending half.
    fn on_ack_snd(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) -> bool {
        let fin_queued = self.state.fin_queued();
        let Some(snd) = self.state.snd_mut() else {
            return true;
        };
        let ack = SeqNumber(seg.ack);
        // RFC 5961 §5.2: "(SND.UNA - MAX.SND.WND) =< SEG.ACK =< SND.NXT" (SND.NXT here is
        // the highest sent, SND.MAX, since we may have gone back after a timeout).
        if ack > snd.snd_max || ack < snd.snd_una - snd.max_snd_wnd as usize {
            return self.bad_ack(
                ctx.now,
                &ctx.shared.config,
                &mut ctx.shared.stats,
                &mut ctx.shared.challenge_rng,
            );
        }
        let fin_at = fin_queued.then(|| snd.data_end());
        let before = AckBefore::of(snd);
        if ack > snd.snd_una {
            self.on_new_ack(
                ctx.now,
                ctx.handle,
                &ctx.shared.config,
                &mut ctx.shared.stats,
                &mut ctx.shared.out,
                seg,
            );
        } else if ack == snd.snd_una {
            self.maybe_dup_ack(ctx.now, &mut ctx.shared.stats, seg);
        }
        if ack >= before.snd_una {
            self.on_ack_recovery(ctx.now, &mut ctx.shared.stats, seg, before);
        }
        if self.cold.is_some() {
            self.mtu_probe_on_recovery(
                ctx.now,
                &ctx.shared.config,
                &mut ctx.shared.stats,
                before.in_recovery,
            );
        }
        if self.update_window(seg) {
            let writable = TcpEvent::Writable(ctx.handle);
            ctx.shared.out.event(&mut ctx.shared.stats, writable);
        }
        self.ecn_on_ack(ctx.now, &mut ctx.shared.stats, seg);
        // Our FIN is acknowledged when SND.UNA passed it.
        let fin_acked = fin_at.is_some_and(|at| ack > at);
        if fin_acked {
            return self.on_fin_acked(ctx);
        }
        true
    }

    /// RFC 9293: "If SND.UNA =< SEG.ACK =< SND.NXT, the send window should be updated. If
    /// (SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ and SND.WL2 =< SEG.ACK)), set SND.WND <-
    /// SEG.WND, set SND.WL1 <- SEG.SEQ, and set SND.WL2 <- SEG.ACK." Returns whether
    /// the window opened from zero (writers to wake).
    pub(super) fn update_window(&mut self, seg: &Repr<'_>) -> bool {
        let shift = self.opts.snd_shift();
        let Some(snd) = self.state.snd_mut() else {
            return false;
        };
        let (seq, ack) = (SeqNumber(seg.seq), SeqNumber(seg.ack));
        if snd.snd_wl1 < seq || (snd.snd_wl1 == seq && snd.snd_wl2 <= ack) {
            let wnd = u32::from(seg.window) << shift;
            let opened = snd.snd_wnd == 0 && wnd > 0;
            snd.snd_wnd = wnd;
            snd.snd_wl1 = seq;
            snd.snd_wl2 = ack;
            snd.max_snd_wnd = snd.max_snd_wnd.max(wnd);
            if wnd > 0 {
                snd.probe_count = 0;
                self.timers.stop(Timer::Persist);
                if self.probe == Some(super::Probe::Window) {
                    self.probe = None;
                }
            }
            return opened;
        }
        false
    }

    /// An ACK that advances SND.UNA.
    pub(super) fn on_new_ack(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        config: &TcpConfig,
        stats: &mut TcpStats,
        out: &mut Outbox,
        seg: &Repr<'_>,
    ) {
        let timestamps = self.opts.ts.is_some();
        let sack = self.opts.sack;
        let smss = usize::from(self.opts.seg_mss());
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        let ack = SeqNumber(seg.ack);
        let acked = ack - snd.snd_una;
        let data = acked.min(snd.buffer.len());
        snd.buffer.consume(data);
        snd.snd_una = ack;
        if snd.snd_nxt < ack {
            snd.snd_nxt = ack;
        }
        if snd.high_rxt < ack {
            snd.high_rxt = ack;
        }
        let sample = ack_rtt_sample(snd, seg, timestamps, now);
        let cc_sample = cc_rtt_sample(snd, sample, ack, now, config);
        // `TcpConfig::cwnd_growth_newly_delivered`: what the ACK delivered that no SACK
        // or duplicate ACK reported before.
        let grow = if config.cwnd_growth_newly_delivered {
            acked.saturating_sub(reported_before(snd, sack, ack, smss))
        } else {
            acked
        };
        if sack {
            snd.scoreboard.on_ack(ack, seg.options.sack(), snd.snd_max);
        }
        let in_flight = snd.outstanding();
        let usage = snd.cwnd_usage.usage();
        match snd.loss.recovery().copied() {
            Some(r) => new_ack_in_recovery(
                snd,
                r,
                (ack, acked),
                now,
                (cc_sample, in_flight, usage),
                sack,
            ),
            None if snd.tso && snd.cc.in_slow_start() => {
                stretch_ack(snd, now, grow, cc_sample, smss)
            }
            None => snd.cc.on_ack(now, grow, cc_sample, in_flight, usage),
        }
        if snd.rate.is_some() {
            rate_sample(snd, now, seg, (sack, smss));
        }
        snd.dup_acks = 0;
        if let Some(loss) = snd.loss.allocated_mut()
            && loss.rto_recover.is_some_and(|point| ack >= point)
        {
            loss.rto_recover = None;
        }
        let outstanding = snd.outstanding();
        if let Some(rtt) = sample {
            self.rtt.sample(rtt, config.rto_bounds());
            clear_backoff(&mut self.cold);
        }
        self.on_progress(ack, now, config.probe_threshold);
        // RFC 6298 §5.2: "When all outstanding data has been acknowledged, turn off the
        // retransmission timer." §5.3: "When an ACK is received that acknowledges new
        // data, restart the retransmission timer so that it will expire after RTO".
        // With a 1975 retransmission process (`process.rs`) the timer is the oldest
        // unacknowledged letter's own instead.
        let rto_at = self.acked_deadline(config, ack, now);
        if outstanding == 0 {
            self.timers.stop(Timer::Retransmit);
            self.timers.stop(Timer::UserTimeout);
        } else {
            self.timers.set(Timer::Retransmit, rto_at);
            if let Some(timeout) = self.user_timeout(config) {
                self.timers.set(Timer::UserTimeout, now + timeout);
            }
        }
        if data > 0 && matches!(self.state, State::Established(_) | State::CloseWait(_)) {
            out.event(stats, TcpEvent::Writable(handle));
        }
    }

    /// RFC 5681 §2 "DUPLICATE ACKNOWLEDGMENT: ... (a) the receiver of the ACK has
    /// outstanding data, (b) the incoming acknowledgment carries no data, (c) the SYN and
    /// FIN bits are both off, (d) the acknowledgment number is equal to the greatest
    /// acknowledgment received on the given connection (TCP.UNA from [RFC793]) and (e)
    /// the advertised window in the incoming acknowledgment equals the advertised window
    /// in the last incoming acknowledgment." With SACK, RFC 6675 §5 also counts ACKs
    /// that SACK new data.
    fn maybe_dup_ack(&mut self, now: Instant, stats: &mut TcpStats, seg: &Repr<'_>) {
        let shift = self.opts.snd_shift();
        let sack = self.opts.sack;
        let mss = self.opts.snd_mss();
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        let newly_sacked = if sack {
            snd.scoreboard
                .on_ack(snd.snd_una, seg.options.sack(), snd.snd_max)
                .newly_sacked
        } else {
            0
        };
        // The rate sampler keeps its own delivered marks: a block the scoreboard had no
        // room for (more holes than its ranges) still delivers there, or the bytes
        // would count at the cumulative ACK that covers them, all at once, and the
        // sample taken then would run above the path's rate.
        if newly_sacked > 0 || (sack && !seg.options.sack().is_empty()) {
            rate_sample(snd, now, seg, (sack, mss));
        }
        let same_window = u32::from(seg.window) << shift == snd.snd_wnd;
        if seg.payload.is_empty() && !seg.flags.syn() && !seg.flags.fin() && same_window {
            stats.redundant_acks += u64::from(newly_sacked == 0);
        }
        let dup = snd.outstanding() > 0
            && seg.payload.is_empty()
            && !seg.flags.syn()
            && !seg.flags.fin()
            && (same_window || newly_sacked > 0);
        if !dup {
            return;
        }
        snd.dup_acks = snd.dup_acks.saturating_add(1);
        if snd.loss.in_recovery() {
            // RFC 5681 §3.2 (4): "For each additional duplicate ACK received (after the
            // third), cwnd MUST be incremented by SMSS."
            if !sack {
                snd.cc.on_dup_ack_in_recovery();
            }
            return;
        }
        // RACK-TLP (RFC 8985) decides about losses by time, in `on_ack_recovery`.
        if snd.rack_enabled {
            return;
        }
        // RFC 6675 §5 "(a) ... DupAcks >= DupThresh ... (b) IsLost (HighACK + 1)".
        let lost_by_sack = sack && snd.scoreboard.is_lost(snd.snd_una, mss, 3);
        let lost_by_dupacks = snd.dup_acks >= 3;
        // After a timeout, duplicate ACKs may only echo our own go-back-N resends, so they
        // start no recovery before the ACK passes the old data (RFC 6582 §4.1, RFC 6675
        // §5.1). SACK blocks above the hole are different evidence: the receiver holds
        // data we sent after the hole, which a redundant resend cannot produce (it would
        // be a D-SACK). We repair those holes at once (as RFC 6582 §4.2's ACK heuristic
        // does for the plain case) without a second window cut; waiting for a second
        // timeout per lost resend made transfers at 10% loss three times slower.
        let after_rto = snd
            .loss
            .rto_recover()
            .is_some_and(|point| snd.snd_una < point);
        if !(lost_by_sack || (lost_by_dupacks && !after_rto)) {
            return;
        }
        stats.fast_retransmits += 1;
        // RFC 6582 §3.2 (2): "record the highest sequence number transmitted in the
        // variable recover"; RFC 6675 §5 (4.1): "RecoveryPoint = HighData". After a
        // timeout, which already answered this loss episode (RFC 5681 §3.1 cut cwnd to
        // one segment and halved ssthresh): repair the holes SACK shows, but no second
        // reduction, which RFC 6675 §5.1's rule exists to prevent.
        enter_recovery(snd, now, sack, after_rto);
        // RFC 5681 §3.2 (3): "The lost segment starting at SND.UNA MUST be retransmitted".
        snd.loss.get_mut().rexmit = Some(snd.snd_una);
    }

    /// Our FIN was acknowledged. Returns whether to go on with the text and FIN.
    fn on_fin_acked(&mut self, ctx: &mut Ctx<'_>) -> bool {
        self.store_block(
            ctx.now,
            &ctx.shared.config,
            &mut ctx.shared.stats,
            &mut ctx.shared.peers,
        );
        self.timers.stop(Timer::Retransmit);
        self.timers.stop(Timer::UserTimeout);
        // The state is moved out ([`State::take`], the arm that cannot happen forgotten)
        // and the next written over the CLOSED left behind ([`State::put`]): no
        // placeholder halves to build, no call to drop the old state where it lies.
        match &self.state {
            // "FIN-WAIT-1 STATE: ... if the FIN segment is now acknowledged, then enter
            // FIN-WAIT-2 and continue processing in that state."
            State::FinWait1(_) => match self.state.take() {
                State::FinWait1(FinWait1 { mut snd, rcv }) => {
                    let snd = ctx.shared.pool.close_send(&mut snd);
                    self.state.put(State::FinWait2(FinWait2 { snd, rcv }));
                }
                other => core::mem::forget(other),
            },
            // "CLOSING STATE: ... if the ACK acknowledges our FIN, then enter the
            // TIME-WAIT state; otherwise, ignore the segment."
            State::Closing(_) => {
                match self.state.take() {
                    State::Closing(Closing { mut snd, rcv }) => {
                        let snd = ctx.shared.pool.close_send(&mut snd);
                        self.state.put(State::TimeWait(TimeWait {
                            snd,
                            rcv,
                            ts_recent: self.opts.ts.map(|t| t.recent),
                        }));
                    }
                    other => core::mem::forget(other),
                }
                self.enter_time_wait(ctx.now, &ctx.shared.config, &mut ctx.shared.pool);
                return false;
            }
            // "LAST-ACK STATE: The only thing that can arrive in this state is an
            // acknowledgment of our FIN. If our FIN is now acknowledged, delete the TCB,
            // enter the CLOSED state, and return." (`enter_closed` keeps what the user
            // has not read.)
            State::LastAck(_) => {
                self.close_in(ctx, None);
                return false;
            }
            _ => {}
        }
        self.arm_fin_wait_2(ctx.now, &ctx.shared.config);
        true
    }

    /// Start the 2*MSL wait (RFC 9293 §3.6.1).
    fn enter_time_wait(&mut self, now: Instant, config: &TcpConfig, pool: &mut Pool) {
        // Nothing can arrive any more: once the user read everything, the receive
        // ring's storage is free for the next connection (TIME-WAIT lasts 2*MSL).
        if let State::TimeWait(tw) = &mut self.state {
            pool.recycle(tw.rcv.buffer.shed_if_empty());
        }
        self.timers.stop_all();
        self.timers
            .set(Timer::TimeWait, now + config.msl.saturating_mul(2));
    }

    /// "seventh, process the segment text" (ESTABLISHED, FIN-WAIT-1, FIN-WAIT-2).
    pub(crate) fn on_text(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        config: &TcpConfig,
        stats: &mut TcpStats,
        out: &mut Outbox,
        seg: &Repr<'_>,
    ) {
        if seg.payload.is_empty() {
            return;
        }
        let Some(rcv) = self.state.rcv_mut() else {
            return;
        };
        // The first data octet follows a SYN (RFC 9293 §3.4): text on a SYN-ACK taken in
        // SYN-SENT starts at SEG.SEQ+1, not at SEG.SEQ (found by fuzz target tcp_conn).
        let seq = SeqNumber(seg.seq) + usize::from(seg.flags.syn());
        let (offset, data, start) = if seq < rcv.rcv_nxt {
            let Some(rest) = self.text_before_window(stats, seq, seg.payload) else {
                return;
            };
            rest
        } else {
            let offset = seq - rcv.rcv_nxt;
            if rcv.buffer.has_out_of_order() {
                self.note_held_again(stats, seq, offset, seg.payload.len());
            }
            (offset, seg.payload, seq)
        };
        let Some(rcv) = self.state.rcv_mut() else {
            return;
        };
        // The segment passed the acceptance test against the advertised window
        // (`sequence_ok`); its bytes are kept up to the receive buffer's free room, which
        // may reach past the advertised right edge: the advertisement lags the buffer
        // (the user read since the last ACK, or the window scale rounded it down), and
        // RFC 9293 §3.8.6 only asks that the receiver not shrink its window. This is
        // deliberate, as in Linux: memory stays bounded by the buffer, and a blind
        // attacker's target is the advertised window, no wider.
        let had_holes = rcv.buffer.has_out_of_order();
        let insert = rcv.buffer.insert(offset, data);
        rcv.rcv_nxt += insert.advanced;
        rcv.sack.record(start, data.len(), rcv.rcv_nxt);
        if insert.advanced > 0 {
            out.event(stats, TcpEvent::Readable(handle));
        }
        // RFC 5681 §4.2: "A TCP receiver SHOULD send an immediate duplicate ACK when an
        // out-of-order segment arrives ... [and] an immediate ACK when the incoming
        // segment fills in all or part of a gap in the sequence space."
        let immediate =
            offset > 0 || had_holes || offset + data.len() > insert.advanced || !insert.stored;
        if offset > 0 {
            stats.out_of_order += 1;
        }
        if !insert.stored {
            stats.out_of_order_dropped += 1;
        }
        let window = rcv.buffer.capacity();
        self.ack_data(now, config, immediate, data.len(), window);
    }

    /// [`Conn::on_text`] for text that starts at `seq`, below RCV.NXT: the part
    /// already taken noted as a duplicate; the rest as (offset 0, bytes, RCV.NXT), or
    /// None (an ACK due) when nothing is new. Out of line: rare.
    #[cold]
    #[inline(never)]
    fn text_before_window<'a>(
        &mut self,
        stats: &mut TcpStats,
        seq: SeqNumber,
        payload: &'a [u8],
    ) -> Option<(usize, &'a [u8], SeqNumber)> {
        let rcv_nxt = self.state.rcv_nxt()?;
        let skip = rcv_nxt - seq;
        let old_end = seq + skip.min(payload.len());
        self.note_duplicate(stats, seq, old_end);
        let rcv = self.state.rcv_mut()?;
        if skip >= payload.len() {
            self.ack = AckState::Now;
            return None;
        }
        Some((0, &payload[skip..], rcv.rcv_nxt))
    }

    /// [`Conn::on_text`] with out-of-order data held: `len` bytes at `seq`
    /// (`offset` past RCV.NXT) all held already are a duplicate. Out of line: rare.
    #[cold]
    #[inline(never)]
    fn note_held_again(&mut self, stats: &mut TcpStats, seq: SeqNumber, offset: usize, len: usize) {
        let held = self.state.rcv().is_some_and(|rcv| {
            rcv.buffer
                .out_of_order_ranges()
                .any(|(s, e)| s <= offset && offset + len <= e)
        });
        if held {
            self.note_duplicate(stats, seq, seq + len);
        }
    }

    /// Decide when to acknowledge `bytes` of new data (a receive buffer of `window`
    /// bytes): at once when `immediate` (out of order, filling a hole), in quick-ACK
    /// mode, or for every 2*RMSS bytes; else after the delayed-ACK timer.
    fn ack_data(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        immediate: bool,
        bytes: usize,
        window: usize,
    ) {
        let delay = config.delayed_ack.min(MAX_ACK_DELAY);
        // The largest segment the peer sends us: what we announced, bounded by what
        // its side of the path carries (the MSS it announced), less the options on
        // every segment (RFC 9293 §3.7.1 Eff.snd.MSS, seen from the peer). Both ends
        // see the same value, so it is our `snd_mss`.
        let rcv_mss = self.opts.snd_mss();
        // Linux's `tcp_in_quickack_mode`: no quick ACK in interactive mode.
        let quick = self.quick_ack(now, config, window, rcv_mss) && !self.interactive;
        // RFC 9293 §3.8.6.3 (RFC 1122 §4.2.3.2): "An ACK SHOULD be generated for at
        // least every second full-sized segment or 2*RMSS bytes of new data (where
        // RMSS is the MSS specified by the TCP endpoint receiving the segments to be
        // acknowledged ...)" (SHLD-19), "the delay MUST be less than 0.5 seconds"
        // (MUST-40).
        let unacked = match self.ack {
            AckState::Delayed(n) => n as usize + bytes,
            _ => bytes,
        };
        // Below 2*RMSS while delayed, so a u32 holds it.
        let delayed = AckState::Delayed(u32::try_from(unacked).unwrap_or(u32::MAX));
        self.ack = match self.ack {
            _ if immediate || quick || delay == Duration::ZERO => AckState::Now,
            AckState::Now => AckState::Now,
            _ if unacked >= 2 * rcv_mss => AckState::Now,
            AckState::Delayed(_) => delayed,
            AckState::Idle => {
                let at = Conn::delayed_ack_deadline(config, now, delay);
                self.timers.set(Timer::DelayedAck, at);
                delayed
            }
        };
    }

    /// Linux's quick-ACK mode (`tcp_event_data_recv`, `tcp_incr_quickack`): at the
    /// first data of a connection and after the receive side was idle longer than the
    /// RTO, the next segments are acknowledged at once (at most the receive `window`
    /// over 2*RMSS (`rcv_mss`), worked out only then, at least 2, at most [`TcpConfig::quick_acks`](crate::tcp::TcpConfig::quick_acks)), so a
    /// sender in slow start is not clocked by our delayed-ACK timer. Returns whether
    /// this segment is one of them.
    fn quick_ack(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        window: usize,
        rcv_mss: usize,
    ) -> bool {
        let rto = self.rto(config.rto_bounds().max);
        let idle = self
            .last_data_at
            .is_none_or(|at| now.saturating_duration_since(at) > rto);
        self.last_data_at = Some(now);
        if idle {
            self.quick_acks = quick_ack_quota(window / (2 * rcv_mss), config.quick_acks);
        }
        if self.quick_acks == 0 {
            return false;
        }
        self.quick_acks -= 1;
        true
    }

    /// [`TcpConfig::interactive_delayed_ack`](crate::tcp::TcpConfig::interactive_delayed_ack):
    /// the SYN-ACK found data queued that the SYN did not carry (a write waiting for
    /// the connection, Linux's `sk_write_pending`): as Linux's
    /// `tcp_rcv_synsent_state_process`, the SYN-ACK counts as data received now
    /// (`tcp_finish_connect` sets `lrcvtime`, `tcp_enter_quickack_mode` starts the
    /// delayed-ACK engine), so the data that goes with our ACK is a reply and the
    /// connection turns interactive ([`Conn::note_data_sent`]).
    fn await_reply(&mut self, now: Instant, config: &TcpConfig) {
        let Some(rcv) = self.state.rcv() else {
            return;
        };
        let window_segments = rcv.buffer.capacity() / (2 * self.opts.snd_mss());
        self.last_data_at = Some(now);
        self.quick_acks = quick_ack_quota(window_segments, config.quick_acks);
        self.interactive = false;
    }

    /// "eighth, check the FIN bit" (also a FIN that arrived ahead of a hole, now reached).
    pub(crate) fn on_fin(&mut self, ctx: &mut Ctx<'_>, seg: &Repr<'_>) {
        let Some(rcv) = self.state.rcv_mut() else {
            return;
        };
        if seg.flags.fin() {
            let at = SeqNumber(seg.seq) + seg.payload.len() + usize::from(seg.flags.syn());
            if at > rcv.rcv_nxt {
                rcv.fin_at = Some(at);
                return;
            }
            if at < rcv.rcv_nxt {
                return;
            }
        } else if rcv.fin_at != Some(rcv.rcv_nxt) {
            return;
        }
        // "advance RCV.NXT over the FIN, and send an acknowledgment for the FIN".
        self.ack = AckState::Now;
        ctx.shared
            .out
            .event(&mut ctx.shared.stats, TcpEvent::Readable(ctx.handle));
        // Each arm moves the state out ([`State::take`], forgetting the arm that cannot
        // happen) and writes the one it enters over the CLOSED left behind
        // ([`State::put`]): one copy out, one in (W3 churn passes here twice).
        match &self.state {
            // "SYN-RECEIVED STATE, ESTABLISHED STATE: Enter the CLOSE-WAIT state."
            State::Established(_) => match self.state.take() {
                State::Established(Established { snd, rcv }) => {
                    self.state.put(State::CloseWait(CloseWait {
                        snd,
                        rcv: rcv.close(),
                    }));
                }
                other => core::mem::forget(other),
            },
            // "FIN-WAIT-1 STATE: If our FIN has been ACKed (perhaps in this segment), then
            // enter TIME-WAIT, start the time-wait timer, turn off the other timers;
            // otherwise, enter the CLOSING state." (ACKed went to FIN-WAIT-2 already.)
            State::FinWait1(_) => match self.state.take() {
                State::FinWait1(FinWait1 { snd, rcv }) => {
                    self.state.put(State::Closing(Closing {
                        snd,
                        rcv: rcv.close(),
                    }));
                }
                other => core::mem::forget(other),
            },
            // "FIN-WAIT-2 STATE: Enter the TIME-WAIT state. Start the time-wait timer,
            // turn off the other timers."
            State::FinWait2(_) => match self.state.take() {
                State::FinWait2(FinWait2 { snd, rcv }) => {
                    let ts_recent = self.opts.ts.map(|t| t.recent);
                    self.state.put(State::TimeWait(TimeWait {
                        snd,
                        rcv: rcv.close(),
                        ts_recent,
                    }));
                    self.enter_time_wait(ctx.now, &ctx.shared.config, &mut ctx.shared.pool);
                }
                other => core::mem::forget(other),
            },
            _ => {}
        }
    }
}

/// [`Conn::on_new_ack`]'s congestion control during loss recovery `r` (out of line:
/// rare), for an ACK to `ack` of `acked` new bytes.
#[cold]
#[inline(never)]
fn new_ack_in_recovery(
    snd: &mut Snd,
    r: Recovery,
    (ack, acked): (SeqNumber, usize),
    now: Instant,
    (cc_sample, in_flight, usage): (Option<Duration>, usize, crate::tcp::cc::CwndUsage),
    sack: bool,
) {
    // RFC 6582 §3.2 (5): "If this ACK acknowledges all of the data up to and including
    // recover, then the ACK acknowledges all the intermediate segments sent between the
    // original transmission of the lost segment and the receipt of the third duplicate
    // ACK. ... exit the fast recovery procedure."
    if ack >= r.recover {
        snd.loss.get_mut().recovery = None;
        if r.after_rto {
            snd.cc.on_ack(now, acked, cc_sample, in_flight, usage);
        } else {
            snd.cc.on_exit_recovery(now, in_flight);
        }
    } else if r.after_rto {
        // Repairing after a timeout: the window keeps growing as in slow start.
        snd.cc.on_ack(now, acked, cc_sample, in_flight, usage);
    } else if !sack {
        // "(Partial ACKs) ... retransmit the first unacknowledged segment ... deflate
        // the congestion window by the amount of new data acknowledged".
        snd.cc.on_partial_ack(acked);
        snd.loss.get_mut().rexmit = Some(ack);
    }
}

/// Slow start on an ACK after TSO segments: the peer acknowledges a segment the device
/// cut into many (Linux's receiver: one ACK per large segment it takes in), so one ACK
/// may cover 45 segments where RFC 3465 expects one ACK per two. Counted as the ACKs
/// of every 2*SMSS bytes it covers, each growing cwnd by L = 2*SMSS at most,
/// cwnd grows by what was acknowledged, as Linux's `tcp_slow_start` does; not by
/// 2*SMSS per large segment, which would make slow start linear.
fn stretch_ack(
    snd: &mut Snd,
    now: Instant,
    acked: usize,
    mut sample: Option<Duration>,
    smss: usize,
) {
    let (in_flight, usage, step) = (snd.outstanding(), snd.cwnd_usage.usage(), 2 * smss);
    let cc = &mut snd.cc;
    let mut rest = acked;
    while rest > 0 {
        let n = rest.min(step.max(1));
        rest -= n;
        cc.on_ack(now, n, sample.take(), in_flight + rest, usage);
        if !cc.in_slow_start() {
            if rest > 0 {
                cc.on_ack(now, rest, None, in_flight, usage);
            }
            return;
        }
    }
}

/// The delivery-rate sample of an ACK (cumulative and SACKed data), for a controller
/// that wants them; the bytes in flight after it are RFC 6675's pipe while SACK blocks
/// are outstanding, else FlightSize.
fn rate_sample(
    snd: &mut crate::tcp::state::Snd,
    now: Instant,
    seg: &Repr<'_>,
    (sack, mss): (bool, usize),
) {
    let Some(rate) = snd.rate.as_deref_mut() else {
        return;
    };
    let Some(sample) = rate.on_ack(now, snd.snd_una, seg.options.sack()) else {
        return;
    };
    // RACK's pipe when RACK decides what is lost, as in the recovery's own sums: the
    // scoreboard's RFC 6675 pipe counts every hole below HighRxt twice, and a tail loss
    // probe of the last segment moves HighRxt to the top.
    let in_flight = if sack && !snd.scoreboard.is_empty() {
        super::recovery::pipe(snd, mss)
    } else {
        snd.outstanding()
    };
    // After a retransmission timeout SND.NXT went back to SND.UNA (go-back-N): what
    // lies beyond it counts as lost until it is sent again (RFC 8985 §6.3: the timeout
    // marks every outstanding segment lost), so only what was sent since is in flight.
    // Counting the rest kept BBR in Drain, waiting for a flight that was gone.
    let in_flight = in_flight.min(snd.snd_nxt - snd.snd_una);
    snd.cc.on_rate_sample(now, &sample, in_flight);
}

/// The RTT sample of an ACK that advanced SND.UNA: RFC 7323 §4.1 RTTM from its TSecr,
/// else the Karn-filtered sampler's.
fn ack_rtt_sample(
    snd: &mut Snd,
    seg: &Repr<'_>,
    timestamps: bool,
    now: Instant,
) -> Option<Duration> {
    match seg.options.timestamps {
        Some((_, tsecr)) if timestamps && tsecr != 0 => Some(Duration::from_millis(u64::from(
            tsval(now).wrapping_sub(tsecr),
        ))),
        _ => snd
            .loss
            .allocated_mut()
            .and_then(|l| l.sampler.on_ack(SeqNumber(seg.ack), now)),
    }
}

/// The RTT sample the congestion controller gets from an ACK to `ack`: the estimator's
/// `sample`, or with `TcpConfig::hystart_exit_at_once` (Linux's HyStart) one from every
/// ACK, from the sent log, not only from the segment the estimator times.
fn cc_rtt_sample(
    snd: &Snd,
    sample: Option<Duration>,
    ack: SeqNumber,
    now: Instant,
    config: &crate::tcp::TcpConfig,
) -> Option<Duration> {
    match sample {
        None if config.hystart_exit_at_once => snd.rack().log.rtt_to(ack, now),
        sample => sample,
    }
}

/// Linux's `tcp_incr_quickack`: segments to acknowledge at once, the receive window
/// over 2*RMSS (`window_segments`), at least 2, at most `limit`
/// ([`TcpConfig::quick_acks`](crate::tcp::TcpConfig::quick_acks)).
fn quick_ack_quota(window_segments: usize, limit: u32) -> u8 {
    let quota = u32::try_from(window_segments).unwrap_or(u32::MAX).max(2);
    // A byte in `Conn` (255 at most; Linux's limit is 16).
    u8::try_from(quota.min(limit)).unwrap_or(u8::MAX)
}

/// Bytes below `ack` the peer reported before this ACK acknowledged them: SACKed (the
/// scoreboard before this ACK) or, without SACK, a segment for each duplicate ACK.
fn reported_before(snd: &Snd, sack: bool, ack: SeqNumber, smss: usize) -> usize {
    if !sack {
        return snd.dup_acks as usize * smss;
    }
    snd.scoreboard
        .ranges()
        .filter(|&(left, _)| left < ack)
        .map(|(left, right)| {
            if right < ack {
                right - left
            } else {
                ack - left
            }
        })
        .sum()
}
