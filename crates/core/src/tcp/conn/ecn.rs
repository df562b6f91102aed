//! ECN on one connection (RFC 3168): the echo of Congestion Experienced, the
//! sender's reduction, and the flags and IP codepoint of what it sends. The types and
//! the negotiation rule are in [`crate::tcp::ecn`].

use super::output::{Kind, Plan};
use super::{Conn, new_cold};
use crate::tcp::TcpStats;
use crate::tcp::cc::CongestionControl;
use crate::tcp::ecn::Ecn;
use crate::tcp::seq::SeqNumber;
use crate::tcp::shared::Outbox;
use crate::tcp::state::{AckState, State};
use crate::time::Instant;
use impnet_wire::tcp::{Flags, Repr};

impl Conn {
    /// RFC 3168 §6.1.3, receiver: "that TCP receiver continues to set the ECN-Echo
    /// flag in all the ACK packets it sends (whether they acknowledge CE data packets
    /// or non-CE data packets) until it receives a CWR packet". A change between CE and
    /// not-CE on data is acknowledged at once (RFC 8311 allows it; Linux does so), so
    /// the sender learns of the mark without waiting for the delayed-ACK timer.
    pub(super) fn ecn_input(&mut self, stats: &mut TcpStats, seg: &Repr<'_>, ecn: Ecn) {
        if !self.opts.ecn || matches!(self.state, State::SynSent(_)) || seg.flags.syn() {
            return;
        }
        // The state changes only from its default on: a connection that never saw a CE
        // mark keeps no cold part for it.
        let state = self.ecn();
        if seg.flags.contains(Flags::CWR) && state.echo {
            self.ecn_mut().echo = false;
        }
        // §6.1.5: "the TCP data receiver SHOULD ignore the CE codepoint on out-of-window
        // packets" (a spoofed one would halve the sender's window).
        let ce = ecn == Ecn::Ce && self.in_window(seg);
        if ce {
            stats.ecn_ce_received += 1;
            self.ecn_mut().echo = true;
        }
        if !seg.payload.is_empty() && ce != state.last_ce {
            self.ack = AckState::Now;
            self.ecn_mut().last_ce = ce;
        }
    }

    /// RFC 3168 §6.1.2, sender: on an ECE, "the TCP source halves the congestion
    /// window "cwnd" and reduces the slow start threshold "ssthresh"", without
    /// retransmitting, and "TCP should not react to congestion indications more than
    /// once every window of data": a reduction for loss in progress (fast recovery, or
    /// after a timeout) already answers this congestion. Runs after the ACK itself was
    /// processed, so the ACK does not grow the window it cut (the ECE ACKs that follow
    /// within the window still take their congestion-avoidance share, at most about
    /// one segment per window, where §6.1.2 says the sender "SHOULD NOT increase the
    /// congestion window in response to the receipt of an ECN-Echo ACK packet").
    #[inline]
    pub(super) fn ecn_on_ack(&mut self, now: Instant, stats: &mut TcpStats, seg: &Repr<'_>) {
        if self.opts.ecn && seg.flags.contains(Flags::ECE) {
            self.ecn_echoed(now, stats);
        }
    }

    /// [`Conn::ecn_on_ack`] for an ACK with ECE on a connection with ECN, out of line.
    #[cold]
    #[inline(never)]
    fn ecn_echoed(&mut self, now: Instant, stats: &mut TcpStats) {
        stats.ecn_ece_received += 1;
        let state = self.ecn();
        let Some(snd) = self.state.snd_mut() else {
            return;
        };
        if state.reduced && snd.snd_una <= state.reduced_at {
            return;
        }
        if snd.loss.in_repair() {
            return;
        }
        snd.cc.on_ecn(now, snd.outstanding());
        let ecn = &mut self.cold.get_or_insert_with(new_cold).ecn;
        ecn.reduced = true;
        ecn.reduced_at = snd.snd_max;
        // "the TCP sender sets the CWR flag in the TCP header of the first new data
        // packet sent after the window reduction".
        ecn.cwr_due = true;
        stats.ecn_cuts += 1;
    }

    /// The ECN flags of the segment `plan` (written with the ACK bit when `ack_bit`);
    /// the IP codepoint it goes with is left in `out.ecn`.
    pub(super) fn ecn_output(
        &mut self,
        stats: &mut TcpStats,
        out: &mut Outbox,
        plan: &Plan,
        ack_bit: bool,
    ) -> Flags {
        let (flags, ecn) = self.ecn_codepoint(stats, plan, ack_bit);
        out.ecn = ecn;
        flags
    }

    /// [`Conn::ecn_output`]'s flags and codepoint.
    fn ecn_codepoint(&mut self, stats: &mut TcpStats, plan: &Plan, ack_bit: bool) -> (Flags, Ecn) {
        if plan.kind == Kind::Syn {
            return (self.ecn_syn_flags(), Ecn::NotEct);
        }
        if !self.opts.ecn {
            return (Flags::NONE, Ecn::NotEct);
        }
        let mut flags = Flags::NONE;
        let state = self.ecn();
        if ack_bit && state.echo {
            flags = flags | Flags::ECE;
            stats.ecn_ece_sent += 1;
        }
        // RFC 3168 §6.1.5: "ECN-capable TCP implementations MUST NOT set either ECT
        // codepoint (ECT(0) or ECT(1)) in the IP header for retransmitted data packets";
        // §6.1.4 and §6.1.6: nor on pure ACKs and window probes. New data only, and
        // "the CWR bit in the TCP header SHOULD NOT be set on retransmitted packets".
        let new_data = plan.kind == Kind::Next
            && plan.len > 0
            && self.state.snd().is_some_and(|snd| plan.seq >= snd.snd_max);
        if !new_data {
            return (flags, Ecn::NotEct);
        }
        if state.cwr_due {
            self.ecn_mut().cwr_due = false;
            flags = flags | Flags::CWR;
            stats.ecn_cwr_sent += 1;
        }
        (flags, Ecn::Ect0)
    }

    /// RFC 3168 §6.1.1: "We call a SYN packet with the ECE and CWR flags set an
    /// "ECN-setup SYN packet"", and "a SYN-ACK packet with only the ECE flag set but
    /// the CWR flag not set an "ECN-setup SYN-ACK packet"". §6.1.1.1: "A host that
    /// receives no reply to an ECN-setup SYN within the normal SYN retransmission
    /// timeout interval MAY resend the SYN and any subsequent SYN retransmissions with
    /// CWR and ECE cleared": ours do, and the connection gives ECN up.
    fn ecn_syn_flags(&mut self) -> Flags {
        match self.state {
            State::SynSent(_) if self.retries() > 0 => {
                self.opts.ecn = false;
                Flags::NONE
            }
            State::SynSent(_) if self.opts.ecn => Flags::ECE | Flags::CWR,
            State::SynRcvd(_) if self.opts.ecn => Flags::ECE,
            _ => Flags::NONE,
        }
    }
}

impl Conn {
    /// Whether `seg` has data in our receive window (or is a probe at its edge).
    fn in_window(&self, seg: &Repr<'_>) -> bool {
        self.state.rcv().is_some_and(|rcv| {
            let seq = SeqNumber(seg.seq);
            let end = seq + seg.payload.len().max(1);
            end > rcv.rcv_nxt && seq < rcv.rcv_adv.max(rcv.rcv_nxt + 1)
        })
    }
}
