//! NewReno congestion control: RFC 5681 slow start and congestion avoidance with RFC 3465
//! appropriate byte counting, and RFC 6582 fast recovery (or RFC 6675's cwnd rules when
//! the connection recovers with SACK; see the [`super`] module docs).

use crate::time::{Duration, Instant};

use super::CongestionControl;
use super::hystart::{Growth, HyStart};

/// RFC 6928: initial window of 10 segments.
pub const DEFAULT_INITIAL_WINDOW_SEGMENTS: usize = 10;

/// RFC 5681 §3.1: "The initial value of ssthresh SHOULD be set arbitrarily high (e.g.,
/// to the size of the largest possible advertised window)". Half of `usize::MAX` leaves
/// room for arithmetic.
pub const INITIAL_SSTHRESH: usize = usize::MAX / 2;

/// The initial window for `segments` segments of `mss` bytes, generalising RFC 6928 §2:
/// "IW = min (10*MSS, max (2*MSS, 14600))" to `min(n*MSS, max(2*MSS, n*1460))`.
pub fn initial_window(mss: usize, segments: usize) -> usize {
    let n = segments.max(1);
    n.saturating_mul(mss)
        .min((2 * mss).max(n.saturating_mul(1460)))
}

/// NewReno state of one connection.
#[derive(Debug, Clone)]
pub struct NewReno {
    /// SMSS in bytes (at least 1).
    mss: usize,
    /// Initial window in segments (at least 1), kept for idle restarts and MSS changes.
    initial_window_segments: usize,
    /// Congestion window in bytes (at least one SMSS).
    cwnd: usize,
    /// Slow-start threshold in bytes.
    ssthresh: usize,
    /// RFC 3465 §2.1 `bytes_acked` in congestion avoidance, always `< cwnd`.
    bytes_acked: usize,
    /// A retransmission timeout happened and no new data was acknowledged since.
    rto_unacked: bool,
    /// In slow start since a retransmission timeout (limits ABC to L = 1*SMSS).
    slow_start_after_rto: bool,
    /// HyStart++ in the initial slow start (RFC 9406).
    hystart: HyStart,
}

impl NewReno {
    /// A NewReno instance for SMSS `mss` starting with an initial window of
    /// `initial_window_segments` segments (see [`initial_window`]) and an arbitrarily high
    /// ssthresh, with HyStart++. Zero arguments are raised to 1.
    pub fn new(mss: usize, initial_window_segments: usize) -> NewReno {
        NewReno::with_hystart(mss, initial_window_segments, true)
    }

    /// As [`NewReno::new`], with HyStart++ (RFC 9406) in the initial slow start only if
    /// `hystart`.
    pub fn with_hystart(mss: usize, initial_window_segments: usize, hystart: bool) -> NewReno {
        let mss = mss.max(1);
        let initial_window_segments = initial_window_segments.max(1);
        NewReno {
            mss,
            initial_window_segments,
            cwnd: initial_window(mss, initial_window_segments),
            ssthresh: INITIAL_SSTHRESH,
            bytes_acked: 0,
            rto_unacked: false,
            slow_start_after_rto: false,
            hystart: HyStart::new(hystart),
        }
    }

    /// RFC 5681 §3.1 equation (4): "ssthresh = max (FlightSize / 2, 2*SMSS)".
    fn reduced_ssthresh(&self, bytes_in_flight: usize) -> usize {
        (bytes_in_flight / 2).max(2 * self.mss)
    }
}

/// `value * new / old` without overflow, saturating.
/// Whether the window, not the application or the receiver, limited what was in flight
/// before this ACK. RFC 5681 §3.1 grows cwnd to probe the path; a window that was not
/// used proves nothing, and RFC 7661 §4.3 keeps it from growing while the sender is
/// rate-limited by anything else. As Linux does, slow start may still grow while at least
/// half the window was in use, so that one idle gap does not stall it.
pub(crate) fn cwnd_limited(
    cwnd: usize,
    mss: usize,
    flight_before_ack: usize,
    slow_start: bool,
) -> bool {
    if slow_start {
        flight_before_ack.saturating_mul(2) >= cwnd
    } else {
        flight_before_ack + mss >= cwnd
    }
}

/// `value * new / old` without overflow, saturating.
pub(crate) fn scale(value: usize, new: usize, old: usize) -> usize {
    let scaled = value as u128 * new as u128 / old as u128;
    usize::try_from(scaled).unwrap_or(usize::MAX)
}

/// SMSS changed from `old` to `new` bytes: cwnd and a reduced ssthresh keep their number
/// of segments (cwnd at least one, ssthresh at least two); an ssthresh still at its
/// initial "arbitrarily high" value stays there.
pub(crate) fn rescale_windows(cwnd: &mut usize, ssthresh: &mut usize, old: usize, new: usize) {
    *cwnd = scale(*cwnd, new, old).max(new);
    if *ssthresh < INITIAL_SSTHRESH {
        *ssthresh = scale(*ssthresh, new, old)
            .max(2 * new)
            .min(INITIAL_SSTHRESH);
    }
}

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn cwnd(&self) -> usize {
        self.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.ssthresh
    }

    fn mss(&self) -> usize {
        self.mss
    }

    /// Keeps cwnd and a reduced ssthresh the same number of segments; ssthresh stays
    /// arbitrarily high if no loss happened yet.
    fn set_mss(&mut self, mss: usize) {
        let mss = mss.max(1);
        if mss == self.mss {
            return;
        }
        rescale_windows(&mut self.cwnd, &mut self.ssthresh, self.mss, mss);
        self.bytes_acked = 0;
        self.mss = mss;
    }

    fn on_ack(
        &mut self,
        now: Instant,
        acked_bytes: usize,
        rtt: Option<Duration>,
        bytes_in_flight: usize,
    ) {
        let _ = now;
        if acked_bytes == 0 {
            return;
        }
        self.rto_unacked = false;
        let growth = if self.cwnd < self.ssthresh {
            self.hystart.on_ack(acked_bytes, rtt, bytes_in_flight)
        } else {
            Growth::SlowStart
        };
        if growth == Growth::Exit {
            // RFC 9406 §4.2: after CSS_ROUNDS of CSS, "enter congestion avoidance by
            // setting the ssthresh to the current cwnd".
            self.ssthresh = self.cwnd;
            return;
        }
        if !cwnd_limited(
            self.cwnd,
            self.mss,
            bytes_in_flight + acked_bytes,
            self.cwnd < self.ssthresh,
        ) {
            return;
        }
        if self.cwnd < self.ssthresh {
            // RFC 3465 §2.2: in slow start "cwnd += min(N, L*SMSS)" with L = 2*SMSS,
            // and L = 1*SMSS in the slow start that follows a retransmission timeout
            // (RFC 3465 §2.3), when one ACK may cover a burst of retransmissions.
            let limit = if self.slow_start_after_rto {
                self.mss
            } else {
                2 * self.mss
            };
            self.cwnd = self
                .cwnd
                .saturating_add(growth.increment(acked_bytes.min(limit)));
            if self.cwnd >= self.ssthresh {
                self.slow_start_after_rto = false;
            }
            return;
        }
        // RFC 3465 §2.1: "When bytes_acked becomes greater than or equal to the value of
        // the congestion window, bytes_acked is reduced by the value of cwnd. Next, cwnd
        // is incremented by a full-sized segment (SMSS)." At most one SMSS per ACK.
        self.slow_start_after_rto = false;
        self.bytes_acked = self.bytes_acked.saturating_add(acked_bytes);
        if self.bytes_acked >= self.cwnd {
            self.bytes_acked -= self.cwnd;
            self.cwnd = self.cwnd.saturating_add(self.mss);
            self.bytes_acked = self.bytes_acked.min(self.cwnd - 1);
        }
    }

    /// RFC 6582 §3.2 step 2 enters fast retransmit and fast recovery as RFC 5681 §3.2
    /// steps 2 and 3 say: "a TCP MUST set ssthresh to no more than the value given in
    /// equation (4)" (`max(FlightSize / 2, 2*SMSS)`), and "cwnd set to ssthresh plus
    /// 3*SMSS. This artificially "inflates" the congestion window by the number of
    /// segments (three) that have left the network and which the receiver has buffered."
    fn on_enter_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.hystart.finish();
        self.ssthresh = self.reduced_ssthresh(bytes_in_flight);
        self.cwnd = self.ssthresh + 3 * self.mss;
        self.bytes_acked = 0;
        self.slow_start_after_rto = false;
    }

    /// RFC 6675 §5 step (4.2): "ssthresh = cwnd = (FlightSize / 2)", with RFC 5681's
    /// floor of 2*SMSS.
    fn on_enter_sack_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.hystart.finish();
        self.ssthresh = self.reduced_ssthresh(bytes_in_flight);
        self.cwnd = self.ssthresh;
        self.bytes_acked = 0;
        self.slow_start_after_rto = false;
    }

    /// RFC 5681 §3.2 step 4 (which RFC 6582 keeps): "For each additional duplicate ACK
    /// received (after the third), cwnd MUST be incremented by SMSS."
    fn on_dup_ack_in_recovery(&mut self) {
        self.cwnd = self.cwnd.saturating_add(self.mss);
    }

    /// RFC 6582 §3.2 step 3, partial acknowledgments: "Deflate the congestion window by
    /// the amount of new data acknowledged by the Cumulative Acknowledgment field. If
    /// the partial ACK acknowledges at least one SMSS of new data, then add back SMSS
    /// bytes to the congestion window." cwnd never drops below one SMSS.
    fn on_partial_ack(&mut self, acked_bytes: usize) {
        if acked_bytes > 0 {
            self.rto_unacked = false;
        }
        self.cwnd = self.cwnd.saturating_sub(acked_bytes);
        if acked_bytes >= self.mss {
            self.cwnd += self.mss;
        }
        self.cwnd = self.cwnd.max(self.mss);
    }

    /// RFC 6582 §3.2 step 3, full acknowledgments, option (1): "Set cwnd to either (1) min (ssthresh,
    /// max(FlightSize, SMSS) + SMSS) or (2) ssthresh ... where FlightSize in (1) is the
    /// amount of data presently outstanding." Option (1) avoids a burst when little is
    /// outstanding.
    fn on_exit_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.rto_unacked = false;
        self.cwnd = self.ssthresh.min(bytes_in_flight.max(self.mss) + self.mss);
        self.bytes_acked = 0;
    }

    /// RFC 5681 §3.1: "When a TCP sender detects segment loss using the retransmission
    /// timer and the given segment has not yet been resent by way of the retransmission
    /// timer, the value of ssthresh MUST be set to no more than the value given in
    /// equation (4)" and "upon a timeout ... cwnd MUST be set to no more than the loss
    /// window, LW, which equals 1 full-sized segment". A further timeout before any new
    /// data is acknowledged keeps ssthresh.
    fn on_rto(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.hystart.finish();
        if !self.rto_unacked {
            self.ssthresh = self.reduced_ssthresh(bytes_in_flight);
        }
        self.cwnd = self.mss;
        self.bytes_acked = 0;
        self.rto_unacked = true;
        self.slow_start_after_rto = true;
    }

    /// RFC 5681 §4.1: "a TCP SHOULD set cwnd to no more than RW before beginning
    /// transmission if the TCP has not sent data in an interval exceeding the
    /// retransmission timeout", where "RW = min(IW,cwnd)".
    fn on_idle_restart(&mut self, now: Instant) {
        let _ = now;
        self.cwnd = self
            .cwnd
            .min(initial_window(self.mss, self.initial_window_segments));
        self.bytes_acked = 0;
    }

    /// Undo a spurious reduction (RFC 4015 §3.2: restore the window from before it).
    fn set_ssthresh(&mut self, ssthresh: usize) {
        self.ssthresh = ssthresh;
    }

    fn on_undo(&mut self, cwnd: usize, ssthresh: usize) {
        self.cwnd = self.cwnd.max(cwnd);
        self.ssthresh = self.ssthresh.max(ssthresh);
        self.bytes_acked = 0;
        self.rto_unacked = false;
        self.slow_start_after_rto = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;
    const T: Instant = Instant::ZERO;

    fn reno() -> NewReno {
        NewReno::new(MSS, DEFAULT_INITIAL_WINDOW_SEGMENTS)
    }

    /// An ACK for `acked` bytes to a sender that had its whole window in flight.
    fn ack_full(cc: &mut NewReno, acked: usize) {
        let flight = cc.cwnd().saturating_sub(acked);
        cc.on_ack(T, acked, None, flight);
    }

    #[test]
    fn a_window_the_sender_did_not_use_does_not_grow() {
        // RFC 7661: an application- or receiver-limited sender learns nothing about the
        // path, so cwnd stays; it grows again once the window is (half) used.
        let mut cc = reno();
        cc.on_ack(T, 2 * MSS, None, MSS);
        assert_eq!(cc.cwnd(), 10 * MSS);
        cc.on_ack(T, 2 * MSS, None, 3 * MSS);
        assert_eq!(cc.cwnd(), 12 * MSS);
        cc.on_enter_sack_recovery(T, 24 * MSS);
        cc.on_exit_recovery(T, 24 * MSS);
        for _ in 0..30 {
            cc.on_ack(T, MSS, None, 5 * MSS);
        }
        assert_eq!(cc.cwnd(), 12 * MSS);
    }

    #[test]
    fn initial_window_follows_rfc_6928() {
        assert_eq!(initial_window(1460, 10), 14600);
        assert_eq!(initial_window(536, 10), 5360);
        assert_eq!(initial_window(9000, 10), 18000);
        assert_eq!(initial_window(1460, 0), 1460);
        let cc = reno();
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert_eq!(cc.ssthresh(), INITIAL_SSTHRESH);
        assert_eq!(NewReno::new(0, 0).cwnd(), 1);
    }

    #[test]
    fn slow_start_counts_bytes_up_to_two_segments_per_ack() {
        let mut cc = reno();
        ack_full(&mut cc, 500);
        assert_eq!(cc.cwnd(), 10_500);
        ack_full(&mut cc, 5 * MSS);
        assert_eq!(cc.cwnd(), 12_500);
        ack_full(&mut cc, 0);
        assert_eq!(cc.cwnd(), 12_500);
    }

    #[test]
    fn congestion_avoidance_adds_one_segment_per_window() {
        let mut cc = reno();
        cc.on_enter_sack_recovery(T, 20 * MSS);
        cc.on_exit_recovery(T, 20 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (10 * MSS, 10 * MSS));
        assert!(!cc.in_slow_start());
        for _ in 0..9 {
            ack_full(&mut cc, MSS);
        }
        assert_eq!(cc.cwnd(), 10 * MSS);
        ack_full(&mut cc, MSS);
        assert_eq!(cc.cwnd(), 11 * MSS);
        // A huge ACK grows cwnd by one SMSS only.
        ack_full(&mut cc, 100 * MSS);
        assert_eq!(cc.cwnd(), 12 * MSS);
    }

    #[test]
    fn newreno_fast_recovery_inflates_and_deflates() {
        let mut cc = reno();
        cc.on_enter_recovery(T, 30 * MSS);
        assert_eq!(cc.ssthresh(), 15 * MSS);
        assert_eq!(cc.cwnd(), 18 * MSS);
        cc.on_dup_ack_in_recovery();
        assert_eq!(cc.cwnd(), 19 * MSS);
        cc.on_partial_ack(3 * MSS);
        assert_eq!(cc.cwnd(), 17 * MSS);
        cc.on_partial_ack(MSS / 2);
        assert_eq!(cc.cwnd(), 16 * MSS + MSS / 2);
        cc.on_exit_recovery(T, 4 * MSS);
        assert_eq!(cc.cwnd(), 5 * MSS);
        let mut cc = reno();
        cc.on_enter_recovery(T, 30 * MSS);
        cc.on_exit_recovery(T, 29 * MSS);
        assert_eq!(cc.cwnd(), 15 * MSS);
    }

    #[test]
    fn recovery_floors_ssthresh_at_two_segments() {
        let mut cc = reno();
        cc.on_enter_sack_recovery(T, MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (2 * MSS, 2 * MSS));
        cc.on_partial_ack(10 * MSS);
        assert_eq!(cc.cwnd(), MSS);
    }

    #[test]
    fn rto_collapses_window_and_holds_ssthresh_on_repeat() {
        let mut cc = reno();
        cc.on_rto(T, 40 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 20 * MSS));
        cc.on_rto(T, 40 * MSS);
        cc.on_rto(T, 4 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 20 * MSS));
        // Slow start after an RTO grows by at most one SMSS per ACK.
        ack_full(&mut cc, 3 * MSS);
        assert_eq!(cc.cwnd(), 2 * MSS);
        cc.on_rto(T, 4 * MSS);
        assert_eq!(cc.ssthresh(), 2 * MSS);
    }

    #[test]
    fn idle_restart_caps_at_initial_window() {
        let mut cc = reno();
        for _ in 0..20 {
            ack_full(&mut cc, 2 * MSS);
        }
        assert_eq!(cc.cwnd(), 50 * MSS);
        cc.on_idle_restart(T);
        assert_eq!(cc.cwnd(), 10 * MSS);
        cc.on_rto(T, MSS);
        cc.on_idle_restart(T);
        assert_eq!(cc.cwnd(), MSS);
    }

    #[test]
    fn mss_change_keeps_segment_counts() {
        let mut cc = reno();
        cc.set_mss(500);
        assert_eq!(
            (cc.mss(), cc.cwnd(), cc.ssthresh()),
            (500, 5000, INITIAL_SSTHRESH)
        );
        cc.on_enter_sack_recovery(T, 10_000);
        cc.set_mss(1000);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (10_000, 10_000));
        cc.set_mss(0);
        assert_eq!(cc.mss(), 1);
    }
}
