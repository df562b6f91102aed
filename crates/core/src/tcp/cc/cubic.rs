//! CUBIC congestion control (RFC 9438): after a congestion event the window follows
//! `W_cubic(t) = C*(t-K)^3 + W_max` in the time `t` since congestion avoidance began,
//! concave up to the previous maximum `W_max` and convex beyond it, never slower than the
//! Reno estimate `W_est`. Slow start and the recovery window rules are those of
//! [`NewReno`](super::NewReno) (no HyStart++); see the [`super`] module docs for when the
//! connection calls what.
//!
//! All arithmetic is integer: windows in bytes, time in microseconds, β_cubic, C and
//! α_cubic as fractions, and `W_est` in fixed point.

use crate::time::{Duration, Instant};

use super::hystart::{Growth, HyStart};
use super::window::{INITIAL_SSTHRESH, Window, scale};
use super::{CongestionControl, CwndUsage, WindowRules};

/// RFC 9438 §5.1: "C SHOULD be set to 0.4", here `C_NUM / C_DEN` segments per second³.
const C_NUM: u128 = 4;
/// Denominator of C.
const C_DEN: u128 = 10;

/// RFC 9438 §4.6: "β_cubic SHOULD be set to 0.7", here `BETA_NUM / BETA_DEN`.
const BETA_NUM: usize = 7;
/// Denominator of β_cubic.
const BETA_DEN: usize = 10;

/// RFC 9438 §4.3: "α_cubic = 3 * (1 - β_cubic) / (1 + β_cubic)", 0.9 / 1.7 = 9 / 17.
const ALPHA_NUM: u128 = 9;
/// Denominator of α_cubic.
const ALPHA_DEN: u128 = 17;

/// `W_est` is kept in bytes times this, so that sub-byte increments add up.
const W_EST_SCALE: u128 = 1 << 16;

/// Microseconds per second, cubed: turns `C * (t-K)^3` with `t` in microseconds into
/// segments.
const MICROS_PER_SEC_CUBED: u128 = 1_000_000_000_000_000_000;

/// `|t - K|` is clamped to this many microseconds (about 71 minutes) so that its cube
/// times C and SMSS fits in a `u128`.
const MAX_OFFSET_MICROS: u128 = 1 << 32;

/// One congestion-avoidance stage: RFC 9438 §4.2's `t_epoch`, `K` and `W_max`, and the
/// Reno-friendly estimate `W_est` of §4.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Epoch {
    /// `t_epoch`: when this congestion-avoidance stage began (its first ACK), moved
    /// later by the application-limited periods since.
    start: Instant,
    /// The last ACK of this stage, to measure application-limited periods.
    last_ack: Instant,
    /// `K` in microseconds: when `W_cubic` reaches `W_max`; negative when the stage
    /// began above `W_max`.
    k_micros: i128,
    /// `W_max` in bytes, the plateau of this stage's curve.
    w_max: usize,
    /// `W_est` in bytes times [`W_EST_SCALE`].
    w_est_scaled: u128,
    /// Bytes² of `(target - cwnd) * acked` not yet turned into whole bytes of cwnd;
    /// always below cwnd.
    growth_remainder: u128,
}

/// CUBIC state of one connection.
#[derive(Debug, Clone)]
pub struct Cubic {
    /// cwnd and ssthresh with NewReno's slow start, recovery window and undo.
    window: Window,
    /// `W_max` for the next congestion-avoidance stage: cwnd before the last reduction,
    /// lowered by fast convergence. `None` before the first congestion event and after a
    /// timeout, when the next stage takes its own initial cwnd (RFC 9438 §4.8).
    w_max: Option<usize>,
    /// `cwnd_prior`: cwnd when ssthresh was last set; `W_est` grows with α_cubic until it
    /// reaches this, then by one segment per RTT (RFC 9438 §4.3).
    cwnd_prior: usize,
    /// The current congestion-avoidance stage; `None` in slow start, in recovery, and
    /// until the first ACK of the next stage.
    epoch: Option<Epoch>,
    /// RFC 6298 smoothed RTT of the samples `on_ack` received, for `W_cubic(t + RTT)`.
    srtt: Option<Duration>,
    /// In fast recovery (entered and neither exited nor ended by a timeout).
    in_recovery: bool,
    /// ssthresh after a congestion event is cwnd * β_cubic, as Linux, not FlightSize
    /// * β_cubic ([`WindowRules::cubic_ssthresh_from_cwnd`]).
    ssthresh_from_cwnd: bool,
    /// HyStart++ in the initial slow start (RFC 9406, as RFC 9438 §4.10 allows).
    hystart: HyStart,
}

impl Cubic {
    /// A CUBIC instance for SMSS `mss` starting with an initial window of
    /// `initial_window_segments` segments (see
    /// [`initial_window`](super::newreno::initial_window)) and an arbitrarily high
    /// ssthresh, with HyStart++. Zero arguments are raised to 1.
    pub fn new(mss: usize, initial_window_segments: usize) -> Cubic {
        Cubic::with_hystart(mss, initial_window_segments, true)
    }

    /// As [`Cubic::new`], with HyStart++ (RFC 9406) in the initial slow start only if
    /// `hystart`.
    pub fn with_hystart(mss: usize, initial_window_segments: usize, hystart: bool) -> Cubic {
        let rules = WindowRules {
            hystart,
            ..WindowRules::default()
        };
        Cubic::with_rules(mss, initial_window_segments, rules)
    }

    /// As [`Cubic::new`], under `rules` (HyStart++, RFC 3465's limit in slow start,
    /// ssthresh from cwnd or FlightSize).
    pub fn with_rules(mss: usize, initial_window_segments: usize, rules: WindowRules) -> Cubic {
        let mut window = Window::new(mss, initial_window_segments);
        window.set_rules(&rules);
        Cubic {
            cwnd_prior: window.cwnd,
            window,
            w_max: None,
            epoch: None,
            srtt: None,
            in_recovery: false,
            ssthresh_from_cwnd: rules.cubic_ssthresh_from_cwnd,
            hystart: HyStart::new(rules.hystart).exit_at_once(rules.hystart_exit_at_once),
        }
    }

    /// `bytes * β_cubic`.
    fn beta(bytes: usize) -> usize {
        scale(bytes, BETA_NUM, BETA_DEN)
    }

    /// RFC 9438 §4.6 and §4.7, for either kind of fast recovery: the new ssthresh (cwnd
    /// is left to the caller).
    fn on_congestion_event(&mut self, bytes_in_flight: usize) -> usize {
        self.hystart.finish();
        let cwnd = self.window.cwnd;
        // §4.7: "if (cwnd < W_max and fast convergence enabled) { // should we make room
        // for others; W_max = cwnd * (1 + β_cubic) / 2 } else { // remember cwnd before
        // reduction; W_max = cwnd }".
        self.w_max = Some(match self.w_max {
            Some(w_max) if cwnd < w_max => scale(cwnd, BETA_DEN + BETA_NUM, 2 * BETA_DEN),
            _ => cwnd,
        });
        // §4.6: "ssthresh = flight_size * β_cubic // new ssthresh; cwnd_prior = cwnd //
        // for Reno-friendly region", and "ssthresh = max(ssthresh, 2) // ssthresh is at
        // least 2 MSS".
        self.cwnd_prior = cwnd;
        self.epoch = None;
        self.in_recovery = true;
        self.reduced_ssthresh(bytes_in_flight)
    }

    /// RFC 9438 §4.6: "ssthresh = flight_size * β_cubic", at least 2*SMSS; or, as
    /// Linux and as §4.6 allows ("Some implementations of CUBIC currently use cwnd
    /// instead of flight_size when calculating a new ssthresh. Implementations that use
    /// cwnd MUST use other measures to prevent cwnd from growing when the volume of
    /// bytes in flight is smaller than cwnd", which [`CwndUsage`] does), cwnd * β_cubic.
    fn reduced_ssthresh(&self, bytes_in_flight: usize) -> usize {
        let base = if self.ssthresh_from_cwnd {
            self.window.cwnd
        } else {
            bytes_in_flight
        };
        Cubic::beta(base).max(2 * self.window.mss())
    }

    /// Begins a congestion-avoidance stage at `now` with the current cwnd as
    /// `cwnd_epoch`.
    fn start_epoch(&self, now: Instant) -> Epoch {
        let cwnd_epoch = self.window.cwnd;
        // RFC 9438 §4.8: "During the first congestion avoidance stage after a timeout,
        // CUBIC increases its congestion window size using Figure 1, where t is the
        // elapsed time since the beginning of the current congestion avoidance stage, K
        // is set to 0, and W_max is set to the congestion window size at the beginning of
        // the current congestion avoidance stage." (The same without any loss yet.)
        let w_max = self.w_max.unwrap_or(cwnd_epoch);
        Epoch {
            start: now,
            last_ack: now,
            k_micros: cubic_k_micros(w_max, cwnd_epoch, self.window.mss()),
            w_max,
            // §4.3: "W_est is set equal to cwnd_epoch at the start of the congestion
            // avoidance stage." (§4.8 says the same after a timeout.)
            w_est_scaled: cwnd_epoch as u128 * W_EST_SCALE,
            growth_remainder: 0,
        }
    }

    /// One ACK in congestion avoidance (RFC 9438 §4.2 to §4.5).
    fn congestion_avoidance(&mut self, now: Instant, acked_bytes: usize) {
        let mut epoch = match self.epoch {
            Some(epoch) => epoch,
            None => {
                let epoch = self.start_epoch(now);
                self.w_max = Some(epoch.w_max);
                epoch
            }
        };
        let acked = acked_bytes.min(self.window.cwnd) as u128;
        let cwnd = self.window.cwnd as u128;
        // §4.3, Figure 4: "W_est = W_est + α_cubic * segments_acked / cwnd", in bytes
        // `α * acked * SMSS / cwnd`; "Once W_est has grown to reach the cwnd at the time
        // of most recently setting ssthresh -- that is, W_est >= cwnd_prior -- the sender
        // SHOULD set α_cubic to 1".
        let reached_prior = epoch.w_est_scaled / W_EST_SCALE >= self.cwnd_prior as u128;
        let (alpha_num, alpha_den) = if reached_prior {
            (1, 1)
        } else {
            (ALPHA_NUM, ALPHA_DEN)
        };
        epoch.w_est_scaled +=
            alpha_num * acked * self.window.mss() as u128 * W_EST_SCALE / (alpha_den * cwnd);
        let w_est = usize::try_from(epoch.w_est_scaled / W_EST_SCALE).unwrap_or(usize::MAX);
        let t = now.saturating_duration_since(epoch.start);
        if w_cubic(&epoch, t, self.window.mss()) < w_est {
            // §4.3: "If W_cubic(t) is less than W_est, then CUBIC is in the Reno-friendly
            // region and cwnd SHOULD be set to W_est at each reception of a new ACK."
            self.window.cwnd = self.window.cwnd.max(w_est);
            epoch.growth_remainder = 0;
        } else {
            // §4.4 and §4.5: "cwnd MUST be incremented by (target - cwnd) / cwnd for each
            // received new ACK", in bytes `(target - cwnd) * acked / cwnd`.
            let rtt = self.srtt.unwrap_or(Duration::ZERO);
            let target = self.target(w_cubic(&epoch, t + rtt, self.window.mss())) as u128;
            epoch.growth_remainder += (target - cwnd) * acked;
            let increment = epoch.growth_remainder / cwnd;
            epoch.growth_remainder -= increment * cwnd;
            self.window.cwnd = self.window.cwnd.saturating_add(increment as usize);
        }
        epoch.last_ack = now;
        self.epoch = Some(epoch);
    }

    /// RFC 9438 §4.2, Figure 5: "target = cwnd if W_cubic(t + RTT) < cwnd; 1.5 * cwnd if
    /// W_cubic(t + RTT) > 1.5 * cwnd; W_cubic(t + RTT) otherwise".
    fn target(&self, w_cubic_next: usize) -> usize {
        w_cubic_next.clamp(
            self.window.cwnd,
            self.window.cwnd.saturating_add(self.window.cwnd / 2),
        )
    }

    /// Updates the RFC 6298 §2.3 smoothed RTT: "SRTT <- (1 - alpha) * SRTT + alpha *
    /// R'" with alpha = 1/8.
    fn on_rtt_sample(&mut self, rtt: Duration) {
        self.srtt = Some(match self.srtt {
            None => rtt,
            Some(srtt) => {
                Duration::from_nanos(srtt.as_nanos() - srtt.as_nanos() / 8 + rtt.as_nanos() / 8)
            }
        });
    }
}

/// RFC 9438 §4.2, Figure 2: "K = cubic_root((W_max - cwnd_epoch) / C)" seconds, with the
/// windows in segments of `mss` bytes; in microseconds, negative if `cwnd_epoch > w_max`.
fn cubic_k_micros(w_max: usize, cwnd_epoch: usize, mss: usize) -> i128 {
    let difference = w_max.abs_diff(cwnd_epoch) as u128;
    // (difference / mss) / C seconds³ = difference * C_DEN * 10^18 / (mss * C_NUM) µs³.
    let cube = difference.saturating_mul(C_DEN * MICROS_PER_SEC_CUBED) / (mss as u128 * C_NUM);
    let k = integer_cbrt(cube) as i128;
    if w_max >= cwnd_epoch { k } else { -k }
}

/// RFC 9438 §4.2, Figure 1: "W_cubic(t) = C * (t - K)^3 + W_max", in bytes, at `t`
/// after the start of `epoch` (never negative).
fn w_cubic(epoch: &Epoch, t: Duration, mss: usize) -> usize {
    let offset = i128::from(t.as_micros()) - epoch.k_micros;
    let magnitude = offset.unsigned_abs().min(MAX_OFFSET_MICROS);
    let cube = magnitude * magnitude * magnitude;
    let delta = cube.saturating_mul(C_NUM * mss as u128) / (C_DEN * MICROS_PER_SEC_CUBED);
    let delta = usize::try_from(delta).unwrap_or(usize::MAX);
    if offset < 0 {
        epoch.w_max.saturating_sub(delta)
    } else {
        epoch.w_max.saturating_add(delta).min(INITIAL_SSTHRESH)
    }
}

/// The integer cube root of `n`, rounded down.
fn integer_cbrt(n: u128) -> u128 {
    // (2^43)^3 > u128::MAX, so the root is below 2^43.
    let (mut low, mut high) = (0u128, 1u128 << 43);
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        let fits = middle
            .checked_mul(middle)
            .and_then(|square| square.checked_mul(middle))
            .is_some_and(|cube| cube <= n);
        if fits {
            low = middle;
        } else {
            high = middle;
        }
    }
    low
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
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

    /// Keeps every window the same number of segments and starts the curve afresh.
    fn set_mss(&mut self, mss: usize) {
        let Some(old) = self.window.set_mss(mss) else {
            return;
        };
        let mss = self.window.mss();
        self.w_max = self.w_max.map(|w_max| scale(w_max, mss, old));
        self.cwnd_prior = scale(self.cwnd_prior, mss, old);
        self.epoch = None;
    }

    fn on_ack(
        &mut self,
        now: Instant,
        acked_bytes: usize,
        rtt: Option<Duration>,
        bytes_in_flight: usize,
        usage: CwndUsage,
    ) {
        if let Some(rtt) = rtt {
            self.on_rtt_sample(rtt);
        }
        if acked_bytes == 0 {
            return;
        }
        self.window.on_new_ack();
        self.in_recovery = false;
        let slow_start = self.window.in_slow_start();
        let growth = if slow_start {
            self.hystart.on_ack(acked_bytes, rtt, bytes_in_flight)
        } else {
            Growth::SlowStart
        };
        if growth == Growth::Exit {
            // RFC 9406 §4.2: "enter congestion avoidance by setting the ssthresh to the
            // current cwnd". RFC 9438 §4.10: with no loss yet, W_max is undefined, so the
            // first stage starts with W_max = cwnd_prior = cwnd (K = 0).
            self.window.ssthresh = self.window.cwnd;
            self.cwnd_prior = self.window.cwnd;
            return;
        }
        if !self.window.was_used(usage) {
            // RFC 9438 §5.8: CUBIC does not grow cwnd while the application (or the
            // receiver) limits the flow, and such periods do not count in t.
            if let Some(epoch) = &mut self.epoch {
                epoch.start += now.saturating_duration_since(epoch.last_ack);
                epoch.last_ack = now;
            }
            return;
        }
        // RFC 9438 §4.10: "CUBIC MUST employ a slow-start algorithm when cwnd is no more
        // than ssthresh."
        if slow_start {
            self.window.slow_start(acked_bytes, growth);
            return;
        }
        self.window.end_slow_start_after_rto();
        self.congestion_avoidance(now, acked_bytes);
    }

    /// RFC 9438 §4.6 with the non-SACK window of RFC 5681 §3.2 step 3: "cwnd set to
    /// ssthresh plus 3*SMSS".
    fn on_enter_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        let ssthresh = self.on_congestion_event(bytes_in_flight);
        self.window.enter_recovery(ssthresh);
    }

    /// RFC 9438 §4.6: "cwnd = max(ssthresh, 2) // reduction on loss, cwnd is at least 2
    /// MSS" (ssthresh already is).
    fn on_enter_sack_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        let ssthresh = self.on_congestion_event(bytes_in_flight);
        self.window.enter_sack_recovery(ssthresh);
    }

    /// An ECN-Echo is a congestion event for RFC 9438 (§4.6's multiplicative decrease
    /// applies to loss and ECE alike): the same β_cubic cut as for a loss, with no
    /// recovery period after it (nothing to retransmit), so the next ACK starts a new
    /// congestion-avoidance epoch.
    fn on_ecn(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        let ssthresh = self.on_congestion_event(bytes_in_flight);
        self.window.enter_sack_recovery(ssthresh);
        self.in_recovery = false;
    }

    fn on_dup_ack_in_recovery(&mut self) {
        self.window.on_dup_ack_in_recovery();
    }

    fn on_partial_ack(&mut self, acked_bytes: usize) {
        self.window.on_partial_ack(acked_bytes);
    }

    /// As [`NewReno`](super::NewReno) does; the congestion-avoidance stage begins with
    /// the next ACK at or above ssthresh.
    fn on_exit_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.in_recovery = false;
        self.window.on_exit_recovery(bytes_in_flight);
        self.epoch = None;
    }

    /// RFC 9438 §4.8: "In the case of a timeout, CUBIC follows Reno to reduce cwnd
    /// \[RFC5681\] but sets ssthresh using β_cubic (same as in Section 4.6)". As RFC 5681
    /// §3.1 says, a further timeout before new data is acknowledged keeps ssthresh.
    fn on_rto(&mut self, now: Instant, bytes_in_flight: usize) {
        let _ = now;
        self.hystart.finish();
        if !self.window.rto_unacked() && !self.in_recovery {
            self.cwnd_prior = self.window.cwnd;
        }
        let ssthresh = self.reduced_ssthresh(bytes_in_flight);
        self.window.on_rto(ssthresh);
        self.w_max = None;
        self.epoch = None;
        self.in_recovery = false;
    }

    /// RFC 5681 §4.1's restart window; the cubic curve starts over rather than jump by
    /// the idle time.
    fn on_idle_restart(&mut self, now: Instant) {
        let _ = now;
        self.window.on_idle_restart();
        self.epoch = None;
    }

    /// A new connection's ssthresh from what an earlier one learned (RFC 9040).
    fn set_ssthresh(&mut self, ssthresh: usize) {
        self.window.ssthresh = ssthresh;
    }

    /// Undo a spurious reduction (RFC 4015 §3.2): the window from before it, and a new
    /// congestion-avoidance stage starting there.
    fn on_undo(&mut self, cwnd: usize, ssthresh: usize) {
        self.window.on_undo(cwnd, ssthresh);
        self.cwnd_prior = self.cwnd_prior.max(cwnd);
        self.epoch = None;
        self.in_recovery = false;
    }
}

#[cfg(test)]
mod tests {
    use alloc::collections::VecDeque;

    use super::*;

    const MSS: usize = 1000;
    const T: Instant = Instant::ZERO;

    /// A CUBIC sender in congestion avoidance right after a loss at `w_max` segments.
    fn after_loss(w_max: usize) -> Cubic {
        let mut cc = Cubic::new(MSS, 10);
        cc.window.cwnd = w_max * MSS;
        cc.on_enter_sack_recovery(T, w_max * MSS);
        cc.on_exit_recovery(T, w_max * MSS);
        cc
    }

    /// An ACK for `acked` bytes at `T` to a sender that had its whole window in flight.
    fn ack_full(cc: &mut Cubic, acked: usize) {
        let flight = cc.cwnd().saturating_sub(acked);
        cc.on_ack(T, acked, None, flight, CwndUsage::LIMITED);
    }

    /// An ACK-clocked bulk sender: every segment is acknowledged on its own, one RTT
    /// after it was sent, and the sender fills cwnd after every ACK.
    struct Flow {
        /// Send times of the segments in flight, oldest first.
        in_flight: VecDeque<Instant>,
    }

    impl Flow {
        fn start(cc: &Cubic, now: Instant) -> Flow {
            let mut flow = Flow {
                in_flight: VecDeque::new(),
            };
            flow.fill(cc, now);
            flow
        }

        fn fill(&mut self, cc: &Cubic, now: Instant) {
            while self.in_flight.len() * MSS < cc.cwnd() {
                self.in_flight.push_back(now);
            }
        }

        /// Delivers every ACK due by `until`.
        fn run_until(&mut self, cc: &mut Cubic, until: Instant, rtt: Duration) {
            while let Some(&sent) = self.in_flight.front() {
                let at = sent + rtt;
                if at > until {
                    break;
                }
                self.in_flight.pop_front();
                cc.on_ack(
                    at,
                    MSS,
                    Some(rtt),
                    self.in_flight.len() * MSS,
                    CwndUsage::LIMITED,
                );
                self.fill(cc, at);
            }
        }
    }

    #[test]
    fn integer_cube_root() {
        assert_eq!(integer_cbrt(0), 0);
        assert_eq!(integer_cbrt(26), 2);
        assert_eq!(integer_cbrt(27), 3);
        assert_eq!(integer_cbrt(1_000_000_000_000), 10_000);
        assert_eq!(integer_cbrt(u128::MAX), 6_981_463_658_331);
    }

    #[test]
    fn an_ecn_echo_cuts_by_beta_and_leaves_no_recovery_behind() {
        let mut cc = Cubic::new(MSS, 10);
        cc.window.cwnd = 100 * MSS;
        cc.on_ecn(T, 100 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (70 * MSS, 70 * MSS));
        assert_eq!(cc.w_max, Some(100 * MSS));
        // No recovery follows (nothing was lost): a timeout later remembers the window
        // it found, as after any congestion-avoidance period.
        cc.window.cwnd = 80 * MSS;
        cc.on_rto(T, 80 * MSS);
        assert_eq!(cc.cwnd_prior, 80 * MSS);
    }

    #[test]
    fn loss_reduces_window_to_beta_times_w_max() {
        let mut cc = Cubic::new(MSS, 10);
        cc.window.cwnd = 100 * MSS;
        cc.on_enter_sack_recovery(T, 100 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (70 * MSS, 70 * MSS));
        assert_eq!(cc.w_max, Some(100 * MSS));
        assert!(!cc.in_slow_start());
        // Without SACK the three duplicate ACKs inflate the window (RFC 5681 §3.2).
        let mut cc = Cubic::new(MSS, 10);
        cc.window.cwnd = 100 * MSS;
        cc.on_enter_recovery(T, 100 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (73 * MSS, 70 * MSS));
        cc.on_dup_ack_in_recovery();
        cc.on_partial_ack(2 * MSS);
        assert_eq!(cc.cwnd(), 73 * MSS);
        cc.on_exit_recovery(T, 69 * MSS);
        assert_eq!(cc.cwnd(), 70 * MSS);
        // ssthresh never drops below 2*SMSS.
        cc.on_enter_sack_recovery(T, MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (2 * MSS, 2 * MSS));
    }

    #[test]
    fn k_follows_rfc_formula() {
        // K = cbrt((W_max - cwnd_epoch) / C) = cbrt(300 / 0.4) = cbrt(750) s.
        let mut cc = after_loss(1000);
        ack_full(&mut cc, MSS);
        let epoch = cc.epoch.unwrap();
        assert_eq!(epoch.w_max, 1000 * MSS);
        assert!(
            (epoch.k_micros - 9_085_603).abs() <= 1,
            "{}",
            epoch.k_micros
        );
        // cbrt(30 / 0.4) = cbrt(75) = 4.217163 s.
        let mut cc = after_loss(100);
        ack_full(&mut cc, MSS);
        assert!((cc.epoch.unwrap().k_micros - 4_217_163).abs() <= 1);
        assert_eq!(
            cubic_k_micros(MSS, 2 * MSS, MSS),
            -cubic_k_micros(2 * MSS, MSS, MSS)
        );
        assert_eq!(cubic_k_micros(MSS, MSS, MSS), 0);
    }

    #[test]
    fn growth_is_concave_before_k_and_convex_after() {
        let mut cc = after_loss(1000);
        let rtt = Duration::from_millis(100);
        let mut flow = Flow::start(&cc, T);
        // The stage starts with the first ACK, one RTT in.
        let start = T + rtt;
        let mut samples = alloc::vec::Vec::new();
        for second in [0, 3, 6, 9, 12, 15] {
            let at = start + Duration::from_secs(second);
            flow.run_until(&mut cc, at, rtt);
            samples.push(cc.cwnd() / MSS);
        }
        let k = cc.epoch.unwrap().k_micros;
        assert!((9_000_000..9_100_000).contains(&k));
        let growth: alloc::vec::Vec<_> = samples.windows(2).map(|w| w[1] - w[0]).collect();
        // Concave: each 3 s before K adds less than the previous.
        assert!(
            growth[0] > growth[1] && growth[1] > growth[2],
            "{samples:?}"
        );
        // Plateau near W_max around K, convex after.
        assert!((990..=1010).contains(&samples[3]), "{samples:?}");
        assert!(growth[3] < growth[4], "{samples:?}");
        // The window tracks W_cubic(t + RTT) within a few segments.
        let epoch = cc.epoch.unwrap();
        for (i, second) in [3u64, 6, 12].iter().enumerate() {
            let expected = w_cubic(&epoch, Duration::from_secs(*second) + rtt, MSS) / MSS;
            let got = samples[[1, 2, 4][i]];
            assert!(
                got.abs_diff(expected) <= 3,
                "{got} vs {expected} at {second}s"
            );
        }
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut cc = Cubic::new(MSS, 10);
        cc.window.cwnd = 100 * MSS;
        cc.on_enter_sack_recovery(T, 100 * MSS);
        cc.on_exit_recovery(T, 100 * MSS);
        assert_eq!(cc.w_max, Some(100 * MSS));
        // The next loss comes at 80 segments, before the window got back to W_max.
        cc.window.cwnd = 80 * MSS;
        cc.on_enter_sack_recovery(T, 80 * MSS);
        assert_eq!(cc.w_max, Some(68 * MSS));
        assert_eq!(cc.cwnd(), 56 * MSS);
        // A loss above W_max remembers cwnd as it is.
        cc.window.cwnd = 90 * MSS;
        cc.on_enter_sack_recovery(T, 90 * MSS);
        assert_eq!(cc.w_max, Some(90 * MSS));
    }

    #[test]
    fn reno_friendly_region_dominates_at_small_rtt_and_window() {
        let mut cc = after_loss(20);
        let rtt = Duration::from_millis(1);
        let mut flow = Flow::start(&cc, T);
        flow.run_until(&mut cc, T + rtt.saturating_mul(21), rtt);
        let epoch = cc.epoch.unwrap();
        let w_est = (epoch.w_est_scaled / W_EST_SCALE) as usize;
        let t = Duration::from_millis(20);
        // W_cubic barely moved off 14 segments in 20 ms (K is 2.47 s) ...
        assert_eq!(w_cubic(&epoch, t, MSS) / MSS, 14);
        // ... while the Reno estimate gained 9/17 segment per RTT up to cwnd_prior (20
        // segments, about 11 RTTs) and one per RTT in the 9 RTTs since, about 29.7
        // segments, and cwnd follows it.
        assert_eq!(cc.cwnd(), w_est);
        assert!((28..=31).contains(&(cc.cwnd() / MSS)), "{}", cc.cwnd());
    }

    #[test]
    fn rto_resets_to_one_segment_and_restarts_curve() {
        let mut cc = Cubic::new(MSS, 10);
        cc.window.cwnd = 50 * MSS;
        cc.on_rto(T, 50 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 35 * MSS));
        cc.on_rto(T, 50 * MSS);
        cc.on_rto(T, 2 * MSS);
        assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 35 * MSS));
        // Slow start after a timeout: one SMSS per ACK at most.
        ack_full(&mut cc, 3 * MSS);
        assert_eq!(cc.cwnd(), 2 * MSS);
        for _ in 0..40 {
            ack_full(&mut cc, MSS);
        }
        // §4.8: the stage after a timeout has K = 0 and W_max = cwnd_epoch.
        let epoch = cc.epoch.unwrap();
        assert_eq!(epoch.k_micros, 0);
        assert_eq!(epoch.w_max, 35 * MSS);
        assert_eq!(cc.w_max, Some(35 * MSS));
    }

    #[test]
    fn application_limited_acks_neither_grow_cwnd_nor_count_in_t() {
        let mut cc = after_loss(100);
        let second = Duration::from_secs(1);
        cc.on_ack(T, MSS, None, 69 * MSS, CwndUsage::LIMITED);
        let epoch = cc.epoch.unwrap();
        let cwnd = cc.cwnd();
        // Ten seconds with half the window in flight.
        for i in 1..=10 {
            let usage = CwndUsage::app_limited(31 * MSS);
            cc.on_ack(T + second.saturating_mul(i), MSS, None, 30 * MSS, usage);
        }
        assert_eq!(cc.cwnd(), cwnd);
        let shifted = cc.epoch.unwrap();
        assert_eq!(shifted.start, epoch.start + second.saturating_mul(10));
        assert_eq!(shifted.w_est_scaled, epoch.w_est_scaled);
        // A full window again grows from where the curve was.
        let usage = CwndUsage::LIMITED;
        cc.on_ack(T + second.saturating_mul(10), MSS, None, cwnd - MSS, usage);
        assert!(cc.cwnd() > cwnd && cc.cwnd() < cwnd + MSS);
    }

    #[test]
    fn idle_restart_and_mss_change() {
        let mut cc = after_loss(100);
        ack_full(&mut cc, MSS);
        cc.on_idle_restart(T);
        assert_eq!(cc.cwnd(), 10 * MSS);
        assert_eq!(cc.epoch, None);
        cc.set_mss(500);
        assert_eq!((cc.mss(), cc.cwnd(), cc.ssthresh()), (500, 5000, 35_000));
        assert_eq!(cc.w_max, Some(50_000));
        assert_eq!(Cubic::new(0, 0).cwnd(), 1);
    }
}
