//! Header prediction: the segment-arrival steps of RFC 9293 §3.10.7.4 for the segment
//! that almost every segment of an established connection is, with the checks that
//! cannot fail for it left out (Van Jacobson's fast path, described in RFC 1323 §4.2.4
//! "header prediction" and in TCP/IP Illustrated vol. 2 §28.4).
//!
//! The prediction: ESTABLISHED, only ACK (and PSH) set, SEG.SEQ = RCV.NXT, a timestamp
//! that passes PAWS when timestamps are on, no FIN waiting ahead of a hole, an
//! acceptable ACK that either acknowledges new data or comes with data (a possible
//! duplicate ACK takes the full path), and no SACK blocks. For such a segment the full
//! path's sequence check passes without side effects (the segment starts at RCV.NXT),
//! PAWS passes, the RST, SYN and FIN steps do nothing and the state does not change;
//! what is left is the timestamp, keep-alive, ACK, window and text steps, which this
//! path runs through the same functions. `tests_predict.rs` feeds random exchanges to
//! connections with prediction on and off and requires the same bytes out.

use crate::tcp::TcpHandle;
use crate::tcp::TcpStats;
use crate::tcp::shared::Outbox;
use crate::tcp::{TcpConfig, TcpEvent};
use crate::time::Instant;
use impnet_wire::tcp::{Flags, Repr};

use super::Conn;
use super::recovery::AckBefore;
use crate::tcp::seq::SeqNumber;
use crate::tcp::state::{Established, State};

impl Conn {
    /// Handle `seg` on the predicted path when it fits the prediction (see the module
    /// docs); returns false, having changed nothing, when it does not.
    pub(super) fn input_predicted(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        config: &TcpConfig,
        stats: &mut TcpStats,
        out: &mut Outbox,
        seg: &Repr<'_>,
    ) -> bool {
        let Some(new_ack) = self.prediction(seg) else {
            return false;
        };
        stats.predicted += 1;
        // RFC 7323 §4.3 (2), then RFC 1122 §4.2.3.6: activity restarts keep-alive.
        self.update_ts_recent(seg);
        self.restart_keepalive(config, now);
        // "fifth, check the ACK field": "If SND.UNA < SEG.ACK =< SND.NXT, then set
        // SND.UNA <- SEG.ACK" (an ACK equal to SND.UNA with data changes nothing: it is
        // no duplicate ACK, RFC 5681 §2 (b), and the scoreboard is empty).
        let before = self.state.snd().map(AckBefore::of);
        if new_ack {
            self.on_new_ack(now, handle, config, stats, out, seg);
        }
        // Loss detection runs on every acceptable ACK, as on the full path.
        if let Some(before) = before {
            self.on_ack_recovery(now, stats, seg, before);
        }
        if self.update_window(seg) {
            out.event(stats, TcpEvent::Writable(handle));
        }
        // "seventh, process the segment text"; no FIN ("eighth") by the prediction.
        self.on_text(now, handle, config, stats, out, seg);
        true
    }

    /// Whether `seg` fits the prediction, and if so whether it acknowledges new data.
    fn prediction(&self, seg: &Repr<'_>) -> Option<bool> {
        let State::Established(Established { snd, rcv }) = &self.state else {
            return None;
        };
        if seg.flags.0 & !Flags::PSH.0 != Flags::ACK.0
            || SeqNumber(seg.seq) != rcv.rcv_nxt
            || rcv.fin_at.is_some()
            || seg.options.sack_len != 0
        {
            return None;
        }
        // PAWS (RFC 7323 §5.3 R1) must pass; a segment without the option on a
        // connection that has them takes the full path.
        match (self.opts.ts, seg.options.timestamps) {
            (Some(ts), Some((tsval, _))) if (tsval.wrapping_sub(ts.recent) as i32) >= 0 => {}
            (None, _) => {}
            _ => return None,
        }
        // RFC 5961 §5.2: the same acceptable-ACK test as the full path.
        let ack = SeqNumber(seg.ack);
        if ack > snd.snd_max || ack < snd.snd_una - snd.max_snd_wnd as usize || ack < snd.snd_una {
            return None;
        }
        if ack > snd.snd_una {
            return Some(true);
        }
        (!seg.payload.is_empty() && snd.scoreboard.is_empty()).then_some(false)
    }
}
