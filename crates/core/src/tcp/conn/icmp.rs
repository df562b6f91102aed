//! ICMP errors about a connection's segments (RFC 1122 §4.2.3.9, RFC 1191, RFC 5927,
//! RFC 5461): path MTU discovery, and hard and soft errors.

use super::mtu::resend_in_flight;
use super::{Conn, Ctx, new_cold};
use crate::tcp::IcmpNotice;
use crate::tcp::TcpConfig;
use crate::tcp::TcpStats;
use crate::tcp::fastopen::SynFastOpen;
use crate::tcp::seq::SeqNumber;
use crate::tcp::state::State;
use crate::time::Instant;

/// The smallest path MTU a fragmentation-needed message may set (Linux's
/// `min_pmtu`): a forged message cannot shrink segments below 512 bytes of data.
pub(crate) const MIN_PATH_MTU: u16 = 552;

impl Conn {
    /// An ICMP error quoting sequence number `seq`: taken only when `seq` is in flight
    /// (RFC 5927 §4.1: "SND.UNA =< SEG.SEQ < SND.NXT"; for a connection still opening,
    /// its SYN). Returns whether it was taken.
    pub fn handle_icmp(&mut self, ctx: &mut Ctx<'_>, seq: SeqNumber, notice: IcmpNotice) -> bool {
        if !self.quotes_in_flight(seq) {
            return false;
        }
        match notice {
            IcmpNotice::PacketTooBig { mtu } => {
                self.on_packet_too_big(ctx.now, &ctx.shared.config, &mut ctx.shared.stats, mtu)
            }
            IcmpNotice::Hard(error) if !self.state.synchronized() => {
                self.close_in(ctx, Some(error));
            }
            // RFC 5461: an open connection does not die of an ICMP error.
            IcmpNotice::Hard(error) | IcmpNotice::Soft(error) => {
                self.cold.get_or_insert_with(new_cold).soft_error = Some(error)
            }
        }
        true
    }

    fn quotes_in_flight(&self, seq: SeqNumber) -> bool {
        match &self.state {
            State::SynSent(s) => seq == s.iss,
            State::SynRcvd(s) => seq == s.iss,
            state => state.snd().is_some_and(|snd| {
                snd.snd_max != snd.snd_una && seq.in_window(snd.snd_una, snd.snd_max - snd.snd_una)
            }),
        }
    }

    /// RFC 1191 §6: lower the segment size to what the path carries and resend what is
    /// in flight at once in smaller segments (the big ones were dropped). It is not
    /// congestion: cwnd and ssthresh stay (as Linux's `tcp_simple_retransmit`).
    ///
    /// A Fast Open SYN with data that was too big goes again at once, without the data
    /// (which follows the handshake, as after a SYN that timed out: RFC 7413 §4.1.3) and
    /// announcing the MSS the path carries, as Linux's `tcp_simple_retransmit` resends
    /// its SYN.
    fn on_packet_too_big(
        &mut self,
        now: Instant,
        config: &TcpConfig,
        stats: &mut TcpStats,
        mtu: u16,
    ) {
        let mss = mtu.max(MIN_PATH_MTU) - 40;
        // A probe bigger than the path (RFC 8899 §4.6.2: a PTB "MAY" end the probe) is
        // lost: resend what is in flight in the size in use.
        let probe_lost = self.mtu_search_on_packet_too_big(now, config, mss);
        if mss >= self.opts.seg_mss() {
            if probe_lost && let Some(snd) = self.state.snd_mut() {
                resend_in_flight(snd);
            }
            return;
        }
        self.opts.set_path_mss(mss);
        stats.path_mtu_drops += 1;
        if let State::SynSent(s) = &mut self.state
            && s.snd_nxt != s.iss
            && s.syn_data > 0
            && matches!(s.fast_open, SynFastOpen::Cookie(_) | SynFastOpen::NoCookie)
        {
            s.snd_nxt = s.iss;
            s.fast_open = SynFastOpen::Dropped;
            self.opts.lower_mss_ours(mss);
            stats.fast_open_active_fail += 1;
            return;
        }
        if let Some(snd) = self.state.snd_mut() {
            resend_in_flight(snd);
        }
    }
}
