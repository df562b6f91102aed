//! TCP Vegas congestion control (Brakmo and Peterson, "TCP Vegas: End to End Congestion
//! Avoidance on a Global Internet", IEEE JSAC 13(8), 1995), as Linux's `tcp_vegas.c`
//! does it: once per RTT it compares the expected rate `cwnd / baseRTT` with the actual
//! rate `cwnd / RTT` and keeps the difference, in segments queued in the network,
//! between α = 2 and β = 4; slow start ends as soon as more than γ = 1 segment queues.
//! Loss recovery is [`NewReno`](super::NewReno)'s (see the [`super`] module docs for
//! when the connection calls what).
//!
//! The rates are compared as `diff = cwnd * (RTT - baseRTT) / baseRTT` segments, where
//! baseRTT is the smallest RTT seen and RTT the smallest of the last round trip's
//! samples (Linux's `minRTT`, which filters out delayed-ACK inflation). A round trip
//! ends when an ACK covers everything that was in flight when the previous one ended
//! (Linux's `beg_snd_nxt`); the connection's cumulative ACKs stand in for sequence
//! numbers.

use core::cmp::Ordering;

use crate::time::{Duration, Instant};

use super::hystart::Growth;
use super::window::Window;
use super::{CongestionControl, CwndUsage};

/// Grow while fewer than α segments queue in the network (Linux: `alpha = 2`).
pub const ALPHA_SEGMENTS: usize = 2;
/// Shrink while more than β segments queue in the network (Linux: `beta = 4`).
pub const BETA_SEGMENTS: usize = 4;
/// Leave slow start once more than γ segments queue in the network (Linux: `gamma = 1`).
pub const GAMMA_SEGMENTS: usize = 1;

/// Linux's `tcp_vegas.c` trusts the smallest RTT of a round trip only with at least 3
/// samples (delayed ACKs inflate single samples). With fewer (a window of two segments,
/// or no timestamps and one Karn sample per RTT) Vegas grows as Reno.
const MIN_SAMPLES_PER_ROUND: u32 = 3;

/// The RTT samples of the current round trip.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Round {
    /// The round trip ends with the first ACK after `acked_total` exceeds this (Linux's
    /// `beg_snd_nxt`, as a count of acknowledged bytes).
    end: u64,
    /// The smallest RTT sample of this round trip (Linux's `minRTT`).
    min_rtt: Option<Duration>,
    /// Samples in this round trip (Linux's `cntRTT`).
    samples: u32,
}

/// Vegas state of one connection.
#[derive(Debug, Clone)]
pub struct Vegas {
    /// cwnd (two segments at least once Vegas adjusted it), ssthresh, and NewReno's
    /// growth, recovery and undo.
    window: Window,
    /// baseRTT: the smallest RTT seen since the start or the last idle restart.
    base_rtt: Option<Duration>,
    /// Bytes acknowledged through `on_ack` so far: SND.UNA as a byte count.
    acked_total: u64,
    /// The round trip in progress.
    round: Round,
    /// The last round trip (or, at first, the lack of any) had too few samples for the
    /// Vegas estimate: grow as Reno.
    reno_fallback: bool,
}

impl Vegas {
    /// A Vegas instance for SMSS `mss` starting with an initial window of
    /// `initial_window_segments` segments (see
    /// [`initial_window`](super::newreno::initial_window)) and an arbitrarily high
    /// ssthresh. Zero arguments are raised to 1.
    pub fn new(mss: usize, initial_window_segments: usize) -> Vegas {
        Vegas {
            window: Window::new(mss, initial_window_segments),
            base_rtt: None,
            acked_total: 0,
            round: Round::default(),
            reno_fallback: true,
        }
    }

    /// Starts a round trip that ends once `bytes_in_flight` more bytes are acknowledged
    /// (Linux's `vegas_enable`, when the connection returns to the open state).
    fn restart_round(&mut self, bytes_in_flight: usize) {
        self.round = Round {
            end: self.acked_total.saturating_add(bytes_in_flight as u64),
            min_rtt: None,
            samples: 0,
        };
    }

    /// Reno: RFC 3465 slow start below ssthresh, else RFC 3465 §2.1 byte counting (one
    /// SMSS per window of acknowledged bytes), as [`NewReno`](super::NewReno) grows.
    fn reno(&mut self, acked_bytes: usize) {
        if self.window.in_slow_start() {
            self.window.slow_start(acked_bytes, Growth::SlowStart);
        } else {
            self.window.count_bytes(acked_bytes);
        }
    }

    /// How Vegas's `diff` compares with `segments` (see [`diff_ordering`]).
    #[cfg(test)]
    fn compare_diff(&self, rtt: Duration, base_rtt: Duration, segments: usize) -> Ordering {
        diff_ordering(&self.window, rtt, base_rtt, segments)
    }

    /// The once-per-RTT adjustment of Linux's `tcp_vegas_cong_avoid`, from the smallest
    /// RTT of the round trip that just ended; `acked_bytes` is this ACK's. cwnd grows
    /// only if `window_used` (it was what limited the data in flight).
    fn adjust(&mut self, rtt: Duration, base_rtt: Duration, acked_bytes: usize, window_used: bool) {
        let window = &mut self.window;
        let mss = window.mss();
        let in_slow_start = window.in_slow_start();
        if in_slow_start && diff_ordering(window, rtt, base_rtt, GAMMA_SEGMENTS).is_gt() {
            // The paper leaves slow start once the actual rate falls below the expected
            // one by more than γ segments per RTT. Linux then sets cwnd to the window
            // of the actual rate plus one segment, `min(cwnd, target_cwnd + 1)` with
            // `target_cwnd = cwnd * baseRTT / RTT`, and ssthresh to at most cwnd.
            let target =
                window.cwnd as u128 * u128::from(base_rtt.as_nanos()) / u128::from(rtt.as_nanos());
            let target = usize::try_from(target).unwrap_or(usize::MAX);
            window.cwnd = window.cwnd.min(target.saturating_add(mss));
            window.ssthresh = window.ssthresh.min(window.cwnd);
        } else if in_slow_start {
            if window_used {
                window.slow_start(acked_bytes, Growth::SlowStart);
            }
        } else if diff_ordering(window, rtt, base_rtt, BETA_SEGMENTS).is_gt() {
            // diff > β: one segment less for the next RTT (and no slow start after).
            window.cwnd = window.cwnd.saturating_sub(mss);
            window.ssthresh = window.ssthresh.min(window.cwnd);
        } else if window_used && diff_ordering(window, rtt, base_rtt, ALPHA_SEGMENTS).is_lt() {
            // diff < α: one segment more for the next RTT. Between α and β the window
            // stays as it is.
            window.cwnd = window.cwnd.saturating_add(mss);
        }
        window.cwnd = window.cwnd.max(2 * mss);
        // Linux's `tcp_current_ssthresh`: ssthresh follows three quarters of cwnd up.
        window.ssthresh = window.ssthresh.max(window.cwnd / 2 + window.cwnd / 4);
    }

    /// An RTT sample: Linux's `tcp_vegas_pkts_acked`, which keeps baseRTT and the round
    /// trip's minimum (one microsecond is added, as Linux does, so that neither is 0).
    fn on_rtt_sample(&mut self, rtt: Duration) {
        let rtt = rtt + Duration::from_micros(1);
        self.base_rtt = Some(self.base_rtt.map_or(rtt, |base| base.min(rtt)));
        self.round.min_rtt = Some(self.round.min_rtt.map_or(rtt, |min| min.min(rtt)));
        self.round.samples = self.round.samples.saturating_add(1);
    }
}

/// How `diff = cwnd * (RTT - baseRTT) / baseRTT`, the segments queued in the network,
/// compares with `segments` (exactly, without Linux's rounding down).
fn diff_ordering(window: &Window, rtt: Duration, base_rtt: Duration, segments: usize) -> Ordering {
    let queued = window.cwnd as u128 * u128::from((rtt - base_rtt).as_nanos());
    queued.cmp(&((segments * window.mss()) as u128 * u128::from(base_rtt.as_nanos())))
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
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

    /// Keeps cwnd and a reduced ssthresh the same number of segments.
    fn set_mss(&mut self, mss: usize) {
        self.window.set_mss(mss);
    }

    /// Linux's `tcp_vegas_cong_avoid`: the Vegas adjustment on the first ACK of each
    /// round trip, slow start (only) on the others; Reno while the round trips carry
    /// fewer than three RTT samples.
    fn on_ack(
        &mut self,
        now: Instant,
        acked_bytes: usize,
        rtt: Option<Duration>,
        bytes_in_flight: usize,
        usage: CwndUsage,
    ) {
        let _ = now;
        if let Some(rtt) = rtt {
            self.on_rtt_sample(rtt);
        }
        if acked_bytes == 0 {
            return;
        }
        self.window.on_new_ack();
        self.acked_total = self.acked_total.saturating_add(acked_bytes as u64);
        // As NewReno (RFC 7661): a window the sender did not use does not grow.
        let slow_start = self.window.in_slow_start();
        let window_used = self.window.was_used(usage);
        if self.acked_total <= self.round.end {
            if window_used && (self.reno_fallback || slow_start) {
                self.reno(acked_bytes);
            }
            return;
        }
        let Round {
            min_rtt, samples, ..
        } = self.round;
        self.restart_round(bytes_in_flight);
        match (min_rtt, self.base_rtt) {
            (Some(rtt), Some(base_rtt)) if samples >= MIN_SAMPLES_PER_ROUND => {
                self.reno_fallback = false;
                self.adjust(rtt, base_rtt, acked_bytes, window_used);
            }
            _ => {
                self.reno_fallback = true;
                if window_used {
                    self.reno(acked_bytes);
                }
            }
        }
        if !self.window.in_slow_start() {
            self.window.end_slow_start_after_rto();
        }
    }

    /// As [`NewReno`](super::NewReno): RFC 5681 §3.2 "ssthresh = max (FlightSize / 2,
    /// 2*SMSS)" and "cwnd set to ssthresh plus 3*SMSS" (Linux's Vegas uses Reno's
    /// `ssthresh` and pauses while the connection recovers).
    fn on_enter_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        let ssthresh = self.window.reduced_ssthresh(bytes_in_flight);
        self.window.enter_recovery(ssthresh);
    }

    /// RFC 6675 §5 step (4.2): "ssthresh = cwnd = (FlightSize / 2)", with RFC 5681's
    /// floor of 2*SMSS.
    fn on_enter_sack_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        let ssthresh = self.window.reduced_ssthresh(bytes_in_flight);
        self.window.enter_sack_recovery(ssthresh);
    }

    fn on_dup_ack_in_recovery(&mut self) {
        self.window.on_dup_ack_in_recovery();
    }

    /// NewReno's deflation; the acknowledged bytes count toward the round trip.
    fn on_partial_ack(&mut self, acked_bytes: usize) {
        self.acked_total = self.acked_total.saturating_add(acked_bytes as u64);
        self.window.on_partial_ack(acked_bytes);
    }

    /// RFC 6582 §3.2 step 3 option (1), "min (ssthresh, max(FlightSize, SMSS) + SMSS)";
    /// Vegas resumes with a fresh round trip over what is in flight.
    fn on_exit_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.window.on_exit_recovery(bytes_in_flight);
        self.restart_round(bytes_in_flight);
    }

    /// RFC 5681 §3.1, as NewReno. The next round trip covers what was in flight, as
    /// Linux's Vegas resumes once the lost window is acknowledged.
    fn on_rto(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        let ssthresh = self.window.reduced_ssthresh(bytes_in_flight);
        self.window.on_rto(ssthresh);
        self.restart_round(bytes_in_flight);
    }

    /// RFC 5681 §4.1: "RW = min(IW,cwnd)"; like Linux's Vegas on `CA_EVENT_CWND_RESTART`,
    /// baseRTT is measured afresh (the path may have changed while idle).
    fn on_idle_restart(&mut self, now: Instant) {
        let _ = now;
        self.window.on_idle_restart();
        self.base_rtt = None;
        self.restart_round(0);
    }

    /// Undo a spurious reduction (RFC 4015 §3.2): the window from before it.
    fn on_undo(&mut self, cwnd: usize, ssthresh: usize) {
        self.window.on_undo(cwnd, ssthresh);
    }
}

#[cfg(test)]
mod tests {
    use alloc::collections::VecDeque;

    use super::*;

    const MSS: usize = 1000;
    const T: Instant = Instant::ZERO;
    const BASE_RTT: Duration = Duration::from_millis(100);

    /// A Vegas sender in congestion avoidance at `segments` segments.
    fn avoiding(segments: usize) -> Vegas {
        let mut cc = Vegas::new(MSS, 10);
        cc.on_enter_sack_recovery(T, 2 * segments * MSS);
        cc.on_exit_recovery(T, segments * MSS);
        assert_eq!(cc.cwnd(), segments * MSS);
        assert!(!cc.in_slow_start());
        cc
    }

    /// An ACK-clocked bulk sender: every segment is acknowledged on its own, one RTT
    /// after it was sent, and the sender fills cwnd after every ACK.
    struct Flow {
        /// Send times of the segments in flight, oldest first.
        in_flight: VecDeque<Instant>,
        /// The time of the last ACK.
        now: Instant,
    }

    impl Flow {
        fn start(cc: &Vegas) -> Flow {
            let mut flow = Flow {
                in_flight: VecDeque::new(),
                now: T,
            };
            flow.fill(cc);
            flow
        }

        fn fill(&mut self, cc: &Vegas) {
            while self.in_flight.len() * MSS < cc.cwnd() {
                self.in_flight.push_back(self.now);
            }
        }

        /// Delivers ACKs for `rounds` RTTs of `rtt` and returns cwnd in segments after
        /// each.
        fn run(&mut self, cc: &mut Vegas, rounds: usize, rtt: Duration) -> Vec<usize> {
            let mut windows = Vec::new();
            for _ in 0..rounds {
                let until = self.now + rtt;
                while let Some(&sent) = self.in_flight.front() {
                    let at = (sent + rtt).max(self.now);
                    if at > until {
                        break;
                    }
                    self.in_flight.pop_front();
                    self.now = at;
                    let flight = self.in_flight.len() * MSS;
                    cc.on_ack(at, MSS, Some(rtt), flight, CwndUsage::LIMITED);
                    self.fill(cc);
                }
                self.now = until;
                windows.push(cc.cwnd() / MSS);
            }
            windows
        }
    }

    use alloc::vec::Vec;

    /// The differences between consecutive windows.
    fn steps(windows: &[usize]) -> Vec<isize> {
        windows
            .windows(2)
            .map(|w| w[1] as isize - w[0] as isize)
            .collect()
    }

    #[test]
    fn grows_one_segment_per_rtt_at_base_rtt() {
        let mut cc = avoiding(10);
        let mut flow = Flow::start(&cc);
        let windows = flow.run(&mut cc, 12, BASE_RTT);
        // Round trips of one RTT each, every one adding exactly one segment.
        assert!(steps(&windows[1..]).iter().all(|&s| s == 1), "{windows:?}");
        assert!((20..=22).contains(&windows[11]), "{windows:?}");
        assert!(!cc.in_slow_start());
    }

    #[test]
    fn shrinks_one_segment_per_rtt_while_diff_exceeds_beta() {
        let mut cc = avoiding(10);
        let mut flow = Flow::start(&cc);
        flow.run(&mut cc, 10, BASE_RTT);
        let before = cc.cwnd() / MSS;
        assert!(before >= 18, "{before}");
        // RTT 150 ms over a base of 100 ms: diff = cwnd / 2 segments, above β = 4 until
        // cwnd is down to 8 segments, where diff = β and the window holds.
        let windows = flow.run(&mut cc, 20, Duration::from_millis(150));
        let shrinking: Vec<_> = steps(&windows)
            .into_iter()
            .skip_while(|&s| s >= 0)
            .take_while(|&s| s < 0)
            .collect();
        assert!(shrinking.len() >= 8, "{windows:?}");
        assert!(shrinking.iter().all(|&s| s == -1), "{windows:?}");
        assert!(windows[14..].iter().all(|&w| w == 8), "{windows:?}");
        assert!(!cc.in_slow_start());
    }

    #[test]
    fn holds_between_alpha_and_beta() {
        let mut cc = avoiding(10);
        let mut flow = Flow::start(&cc);
        let windows = flow.run(&mut cc, 3, BASE_RTT);
        let held = windows[2];
        // RTT 125 ms: diff = cwnd / 4 segments, between α = 2 and β = 4 for 8 to 16
        // segments.
        assert!((8..=16).contains(&held), "{windows:?}");
        let windows = flow.run(&mut cc, 10, Duration::from_millis(125));
        assert!(windows[1..].iter().all(|&w| w == windows[1]), "{windows:?}");
        assert!(windows[1].abs_diff(held) <= 1, "{windows:?}");
        assert_eq!(cc.compare_diff(Duration::from_millis(125), BASE_RTT, 2), {
            if cc.cwnd() == 8 * MSS {
                Ordering::Equal
            } else {
                Ordering::Greater
            }
        });
    }

    #[test]
    fn slow_start_exits_when_diff_exceeds_gamma() {
        let mut cc = Vegas::new(MSS, 10);
        let mut flow = Flow::start(&cc);
        // At the base RTT slow start doubles cwnd every round trip.
        let windows = flow.run(&mut cc, 3, BASE_RTT);
        assert!(cc.in_slow_start());
        assert_eq!(windows, [20, 40, 80], "{windows:?}");
        // 10 ms of queueing. The first 110 ms ACK ends a round trip whose other samples
        // measured 100 ms, so cwnd doubles once more; at the end of the next one diff =
        // 160 * 10 / 100 = 16 segments > γ: cwnd drops to the window of the actual rate
        // plus one segment, 160 * 100 / 110 + 1 = 146.5, and slow start ends.
        let windows = flow.run(&mut cc, 2, Duration::from_millis(110));
        assert_eq!(windows, [160, 146]);
        assert!(!cc.in_slow_start());
        assert_eq!(cc.ssthresh(), cc.cwnd());
        // Then congestion avoidance: diff = 146 * 10 / 100 = 14.6 segments > β.
        let windows = flow.run(&mut cc, 2, Duration::from_millis(110));
        assert_eq!(windows, [145, 144]);
    }

    #[test]
    fn loss_recovery_and_timeouts_follow_newreno() {
        let mut cc = avoiding(20);
        cc.on_enter_recovery(T, 30 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (18 * MSS, 15 * MSS));
        cc.on_dup_ack_in_recovery();
        cc.on_partial_ack(3 * MSS);
        assert_eq!(cc.cwnd(), 17 * MSS);
        cc.on_exit_recovery(T, 4 * MSS);
        assert_eq!(cc.cwnd(), 5 * MSS);
        cc.on_rto(T, 40 * MSS);
        cc.on_rto(T, 4 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 20 * MSS));
        cc.on_idle_restart(T);
        assert_eq!((cc.cwnd(), cc.base_rtt), (MSS, None));
        cc.set_mss(500);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (500, 10_000));
    }

    #[test]
    fn few_samples_fall_back_to_reno() {
        let mut cc = avoiding(10);
        // No RTT samples at all (no timestamps, Karn sampler idle): Reno's one segment
        // per window of ACKed bytes.
        for _ in 0..10 {
            cc.on_ack(T, MSS, None, 9 * MSS, CwndUsage::LIMITED);
        }
        assert_eq!(cc.cwnd(), 11 * MSS);
    }

    #[test]
    fn unused_window_does_not_grow() {
        let mut cc = avoiding(10);
        let mut flow = Flow::start(&cc);
        flow.run(&mut cc, 2, BASE_RTT);
        let cwnd = cc.cwnd();
        // The application keeps five segments in flight: RTT stays at baseRTT (diff <
        // α) but the window is not what limits the sender.
        let mut now = flow.now;
        for _ in 0..100 {
            now += Duration::from_millis(20);
            cc.on_ack(
                now,
                MSS,
                Some(BASE_RTT),
                4 * MSS,
                CwndUsage::app_limited(5 * MSS),
            );
        }
        assert_eq!(cc.cwnd(), cwnd);
    }
}
