//! NewReno congestion control: RFC 5681 slow start and congestion avoidance with RFC 3465
//! appropriate byte counting, and RFC 6582 fast recovery (or RFC 6675's cwnd rules when
//! the connection recovers with SACK; see the [`super`] module docs).

use crate::time::{Duration, Instant};

use super::hystart::{Growth, HyStart};
use super::window::Window;
pub use super::window::{DEFAULT_INITIAL_WINDOW_SEGMENTS, INITIAL_SSTHRESH, initial_window};
use super::{CongestionControl, CwndUsage, WindowRules};

/// NewReno state of one connection: the window bookkeeping CUBIC and Vegas share, and
/// HyStart++.
#[derive(Debug, Clone)]
pub struct NewReno {
    /// cwnd, ssthresh and their byte counting, reductions and undo.
    window: Window,
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
        let rules = WindowRules {
            hystart,
            ..WindowRules::default()
        };
        NewReno::with_rules(mss, initial_window_segments, rules)
    }

    /// As [`NewReno::new`], under `rules` (HyStart++ and RFC 3465's limit).
    pub fn with_rules(mss: usize, initial_window_segments: usize, rules: WindowRules) -> NewReno {
        let mut window = Window::new(mss, initial_window_segments);
        window.set_rules(&rules);
        NewReno {
            window,
            hystart: HyStart::new(rules.hystart).exit_at_once(rules.hystart_exit_at_once),
        }
    }
}

impl NewReno {
    /// HyStart++'s state, to lend it a spare box or take its box back (the connection
    /// keeps the boxes of connections that ended for new ones).
    pub(crate) fn hystart_mut(&mut self) -> &mut HyStart {
        &mut self.hystart
    }
}

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn cwnd(&self) -> usize {
        self.window.cwnd
    }

    fn ssthresh(&self) -> usize {
        self.window.ssthresh
    }

    fn mss(&self) -> usize {
        self.window.mss()
    }

    /// Keeps cwnd and a reduced ssthresh the same number of segments; ssthresh stays
    /// arbitrarily high if no loss happened yet.
    fn set_mss(&mut self, mss: usize) {
        self.window.set_mss(mss);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        acked_bytes: usize,
        rtt: Option<Duration>,
        bytes_in_flight: usize,
        usage: CwndUsage,
    ) {
        let _ = now;
        if acked_bytes == 0 {
            return;
        }
        let window = &mut self.window;
        window.on_new_ack();
        let growth = if window.in_slow_start() {
            self.hystart.on_ack(acked_bytes, rtt, bytes_in_flight)
        } else {
            Growth::SlowStart
        };
        if growth == Growth::Exit {
            // RFC 9406 §4.2: after CSS_ROUNDS of CSS, "enter congestion avoidance by
            // setting the ssthresh to the current cwnd".
            window.ssthresh = window.cwnd;
            return;
        }
        if !window.was_used(usage) {
            return;
        }
        if window.in_slow_start() {
            window.slow_start(acked_bytes, growth);
            return;
        }
        window.end_slow_start_after_rto();
        window.count_bytes(acked_bytes);
    }

    /// RFC 6582 §3.2 step 2 enters fast retransmit and fast recovery as RFC 5681 §3.2
    /// steps 2 and 3 say: "a TCP MUST set ssthresh to no more than the value given in
    /// equation (4)" (`max(FlightSize / 2, 2*SMSS)`), and cwnd to ssthresh plus 3*SMSS.
    fn on_enter_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.hystart.finish();
        let ssthresh = self.window.reduced_ssthresh(bytes_in_flight);
        self.window.enter_recovery(ssthresh);
    }

    /// RFC 6675 §5 step (4.2): "ssthresh = cwnd = (FlightSize / 2)", with RFC 5681's
    /// floor of 2*SMSS.
    fn on_enter_sack_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.hystart.finish();
        let ssthresh = self.window.reduced_ssthresh(bytes_in_flight);
        self.window.enter_sack_recovery(ssthresh);
    }

    fn on_dup_ack_in_recovery(&mut self) {
        self.window.on_dup_ack_in_recovery();
    }

    fn on_partial_ack(&mut self, acked_bytes: usize) {
        self.window.on_partial_ack(acked_bytes);
    }

    fn on_exit_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.window.on_exit_recovery(bytes_in_flight);
    }

    /// RFC 5681 §3.1: ssthresh from equation (4) (kept by a further timeout before new
    /// data is acknowledged), cwnd one segment.
    fn on_rto(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.hystart.finish();
        let ssthresh = self.window.reduced_ssthresh(bytes_in_flight);
        self.window.on_rto(ssthresh);
    }

    fn on_idle_restart(&mut self, now: Instant) {
        let _ = now;
        self.window.on_idle_restart();
    }

    /// A new connection's ssthresh from what an earlier one learned (RFC 9040).
    fn set_ssthresh(&mut self, ssthresh: usize) {
        self.window.ssthresh = ssthresh;
    }

    fn on_undo(&mut self, cwnd: usize, ssthresh: usize) {
        self.window.on_undo(cwnd, ssthresh);
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
        cc.on_ack(T, acked, None, flight, CwndUsage::LIMITED);
    }

    #[test]
    fn a_window_the_sender_did_not_use_does_not_grow() {
        // RFC 7661: an application- or receiver-limited sender learns nothing about the
        // path, so cwnd stays; slow start grows it to twice the largest flight, as
        // Linux's `tcp_is_cwnd_limited`.
        let mut cc = reno();
        cc.on_ack(T, 2 * MSS, None, MSS, CwndUsage::app_limited(5 * MSS));
        assert_eq!(cc.cwnd(), 10 * MSS);
        cc.on_ack(T, 2 * MSS, None, 3 * MSS, CwndUsage::app_limited(6 * MSS));
        assert_eq!(cc.cwnd(), 12 * MSS);
        cc.on_ack(T, 2 * MSS, None, MSS, CwndUsage::app_limited(6 * MSS));
        assert_eq!(cc.cwnd(), 12 * MSS);
        cc.on_enter_sack_recovery(T, 24 * MSS);
        cc.on_exit_recovery(T, 24 * MSS);
        for _ in 0..30 {
            cc.on_ack(T, MSS, None, 5 * MSS, CwndUsage::app_limited(11 * MSS));
        }
        assert_eq!(cc.cwnd(), 12 * MSS);
        // A window the sender fills grows again: one SMSS per cwnd acknowledged.
        for _ in 0..12 {
            cc.on_ack(T, MSS, None, 11 * MSS, CwndUsage::LIMITED);
        }
        assert_eq!(cc.cwnd(), 13 * MSS);
    }

    #[test]
    fn recovery_ends_at_rfc_6582_option_1_or_at_ssthresh() {
        // Nothing outstanding when recovery ends: option (1) of RFC 6582 §3.2 step 3
        // gives min(ssthresh, max(FlightSize, SMSS) + SMSS), two segments; option (2),
        // Linux's, ssthresh.
        for (at_ssthresh, cwnd) in [(false, 2 * MSS), (true, 10 * MSS)] {
            let rules = WindowRules {
                cwnd_ssthresh_after_recovery: at_ssthresh,
                ..WindowRules::default()
            };
            let mut cc = NewReno::with_rules(MSS, DEFAULT_INITIAL_WINDOW_SEGMENTS, rules);
            cc.on_enter_sack_recovery(T, 20 * MSS);
            assert_eq!(cc.ssthresh(), 10 * MSS);
            cc.on_exit_recovery(T, 0);
            assert_eq!(cc.cwnd(), cwnd, "at ssthresh: {at_ssthresh}");
        }
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
