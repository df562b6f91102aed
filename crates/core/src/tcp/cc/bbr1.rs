//! BBRv1, as Linux's mainline `tcp_bbr.c` runs it (the `bbr` of `sysctl
//! net.ipv4.tcp_congestion_control`; Cardwell et al., "BBR: Congestion-Based Congestion
//! Control", ACM Queue 2016, and draft-cardwell-iccrg-bbr-congestion-control-00), beside
//! [`Bbr`](super::Bbr), the v3 draft, so that imp can be compared with Linux like for
//! like.
//!
//! The model: the bottleneck bandwidth is the largest delivery rate of the last ten
//! round trips (a windowed max, Kathleen Nichols' three-sample filter as Linux's
//! `win_minmax`), the round-trip propagation time the smallest RTT of the last ten
//! seconds. The states: Startup (pacing and cwnd gain 2/ln 2 = 2.885 until the
//! bandwidth grew by less than 25% for three rounds), Drain (pacing gain 1/2.885 until
//! what is in flight is down to the BDP), ProbeBW (an eight-phase cycle of pacing gains
//! 1.25, 0.75 and six of 1, each phase a minimum RTT long, started at a random phase other
//! than 0.75; cwnd gain 2) and ProbeRTT (cwnd four segments for 200 ms and a round when
//! the minimum RTT was not refreshed for ten seconds). Unlike v3 it does not react to loss
//! in its model: in recovery it conserves packets for a round (cwnd = what is in flight
//! plus what the ACK delivered) and restores the window when recovery ends; after a
//! timeout, one segment until the repair is delivered.
//!
//! Left out of Linux's version: the long-term bandwidth sampling that detects token-bucket
//! policers (`lt_bw`), and the allowance for ACK aggregation (`extra_acked`). Sizes are
//! bytes, rates bytes per second, gains percent. The random start of the ProbeBW cycle
//! comes from a fixed-seed xorshift, so a run is repeatable.

use super::{CongestionControl, CwndUsage, RateSample};
use crate::time::{Duration, Instant};

/// Startup's pacing and cwnd gain, 2/ln 2 (Linux `bbr_high_gain`, 2885/1000).
const HIGH_GAIN: u64 = 289;
/// Drain's pacing gain, its inverse (Linux `bbr_drain_gain`).
const DRAIN_GAIN: u64 = 35;
/// ProbeBW's cwnd gain (Linux `bbr_cwnd_gain`).
const CWND_GAIN: u64 = 200;
/// ProbeBW's pacing gains, one phase each (Linux `bbr_pacing_gain`).
const PACING_GAINS: [u64; 8] = [125, 75, 100, 100, 100, 100, 100, 100];
/// Rounds of the max-bandwidth filter (Linux `bbr_bw_rtts`: the cycle plus two).
const BW_FILTER_ROUNDS: u64 = PACING_GAINS.len() as u64 + 2;
/// The min-RTT filter's length (Linux `bbr_min_rtt_win_sec`).
const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
/// ProbeRTT's time at four segments (Linux `bbr_probe_rtt_mode_ms`).
const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// The smallest cwnd, and ProbeRTT's, in segments (Linux `bbr_cwnd_min_target`).
const MIN_CWND_SEGMENTS: usize = 4;
/// Growth that counts as the pipe still filling, percent (Linux `bbr_full_bw_thresh`).
const FULL_BW_THRESH: u64 = 125;
/// Rounds without that growth before the pipe counts as full (`bbr_full_bw_cnt`).
const FULL_BW_COUNT: u32 = 3;
/// Pace this much below the estimate, percent (`bbr_pacing_margin_percent`).
const PACING_MARGIN_PERCENT: u64 = 1;

/// BBRv1's states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bbr1State {
    /// Rapid growth at gain 2.885.
    Startup,
    /// Drain the queue Startup built.
    Drain,
    /// Cycle the pacing gain around the estimate.
    ProbeBw,
    /// Four segments in flight, to see the path's own RTT.
    ProbeRtt,
}

/// A windowed max of `(round, value)` samples: the best, second-best and third-best of
/// the window, each newer than the one before (Linux's `lib/win_minmax.c`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct WindowedMax {
    samples: [(u64, u64); 3],
}

impl WindowedMax {
    fn get(&self) -> u64 {
        self.samples[0].1
    }

    /// `value` measured in round `t`, with a window of `window` rounds.
    fn update(&mut self, window: u64, t: u64, value: u64) -> u64 {
        let sample = (t, value);
        if value >= self.samples[0].1 || t.saturating_sub(self.samples[2].0) > window {
            self.samples = [sample; 3];
            return value;
        }
        if value >= self.samples[1].1 {
            self.samples[1] = sample;
            self.samples[2] = sample;
        } else if value >= self.samples[2].1 {
            self.samples[2] = sample;
        }
        // The best has aged out: the others move up; quarter and half windows keep the
        // second and third from being as old as the first.
        let age = t.saturating_sub(self.samples[0].0);
        if age > window {
            self.samples = [self.samples[1], self.samples[2], sample];
            if t.saturating_sub(self.samples[0].0) > window {
                self.samples = [self.samples[1], self.samples[2], sample];
            }
        } else if self.samples[1].0 == self.samples[0].0 && age > window / 4 {
            self.samples[1] = sample;
            self.samples[2] = sample;
        } else if self.samples[2].0 == self.samples[1].0 && age > window / 2 {
            self.samples[2] = sample;
        }
        self.samples[0].1
    }
}

/// BBRv1 for one connection.
#[derive(Debug, Clone)]
pub struct Bbr1 {
    mss: usize,
    initial_cwnd: usize,
    cwnd: usize,
    /// cwnd saved on entering recovery, a timeout or ProbeRTT.
    prior_cwnd: usize,
    state: Bbr1State,
    pacing_gain: u64,
    cwnd_gain: u64,
    pacing_rate: u64,
    send_quantum: usize,
    /// Rounds so far; a round ends when a segment sent after the last one started is
    /// delivered.
    rounds: u64,
    next_round_delivered: u64,
    round_start: bool,
    max_bw: WindowedMax,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    full_bw: u64,
    full_bw_count: u32,
    filled_pipe: bool,
    cycle_index: usize,
    cycle_stamp: Instant,
    probe_rtt_done: Option<Instant>,
    probe_rtt_round_done: bool,
    /// What ProbeRTT sent is application-limited until delivered reaches this (Linux
    /// sets `tp->app_limited` there), so its low rates do not enter the filter.
    app_limited_until: u64,
    /// In recovery, the first round: cwnd is what is in flight plus what each ACK
    /// delivered (Linux's `packet_conservation`).
    conserving: bool,
    in_recovery: bool,
    /// After a timeout: the delivered count a segment sent after it must reach before
    /// the saved cwnd comes back.
    rto_delivered: Option<u64>,
    delivered: u64,
    started: bool,
    rng: u64,
}

impl Bbr1 {
    /// BBRv1 for a connection whose SMSS is `mss`, starting from an initial window of
    /// `initial_window_segments` segments.
    pub fn new(mss: usize, initial_window_segments: usize) -> Bbr1 {
        let mss = mss.max(1);
        let initial_cwnd = mss * initial_window_segments.max(1);
        let mut bbr = Bbr1 {
            mss,
            initial_cwnd,
            cwnd: initial_cwnd,
            prior_cwnd: 0,
            state: Bbr1State::Startup,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            pacing_rate: 0,
            send_quantum: 2 * mss,
            rounds: 0,
            next_round_delivered: 0,
            round_start: false,
            max_bw: WindowedMax::default(),
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            full_bw: 0,
            full_bw_count: 0,
            filled_pipe: false,
            cycle_index: 0,
            cycle_stamp: Instant::ZERO,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            app_limited_until: 0,
            conserving: false,
            in_recovery: false,
            rto_delivered: None,
            delivered: 0,
            started: false,
            rng: 0x9e37_79b9_7f4a_7c15,
        };
        // Linux's `bbr_init_pacing_rate_from_rtt`: the initial window over 1 ms until an
        // RTT is known, at the high gain.
        bbr.init_pacing_rate(Duration::from_millis(1));
        bbr
    }

    /// The current state.
    pub fn state(&self) -> Bbr1State {
        self.state
    }

    /// The bottleneck-bandwidth estimate in bytes per second.
    pub fn bandwidth(&self) -> u64 {
        self.max_bw.get()
    }

    /// The minimum-RTT estimate.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The ProbeBW pacing gain in percent now (the cycle's phase), or the state's gain.
    pub fn pacing_gain(&self) -> u64 {
        self.pacing_gain
    }

    fn init_pacing_rate(&mut self, rtt: Duration) {
        let nominal = self.initial_cwnd as u128 * 1_000_000_000 / u128::from(rtt.as_nanos().max(1));
        self.pacing_rate = (nominal * u128::from(HIGH_GAIN) / 100) as u64;
    }

    fn min_cwnd(&self) -> usize {
        MIN_CWND_SEGMENTS * self.mss
    }

    /// `gain` percent of the bandwidth-delay product, rounded up (the initial window
    /// before an RTT is known): Linux's `bbr_bdp`.
    fn bdp(&self, bw: u64, gain: u64) -> u64 {
        let Some(rtt) = self.min_rtt else {
            return self.initial_cwnd as u64;
        };
        let bdp = u128::from(bw) * u128::from(rtt.as_nanos()) / 1_000_000_000;
        (bdp * u128::from(gain))
            .div_ceil(100)
            .min(u128::from(u64::MAX)) as u64
    }

    /// The BDP multiple plus room for the sender's bursts (Linux's
    /// `bbr_quantization_budget`): three send quanta, two segments more in the probing
    /// phase.
    fn inflight(&self, bw: u64, gain: u64) -> u64 {
        let mut inflight = self.bdp(bw, gain) + 3 * self.send_quantum as u64;
        if self.state == Bbr1State::ProbeBw && self.cycle_index == 0 {
            inflight += 2 * self.mss as u64;
        }
        inflight
    }

    fn random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn save_cwnd(&mut self) {
        self.prior_cwnd = if !self.in_recovery && self.state != Bbr1State::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }

    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }
}

/// The model: rounds, bandwidth, the pipe filling, the gain cycle, the minimum RTT.
impl Bbr1 {
    fn update_model(&mut self, now: Instant, rs: &RateSample, inflight: u64) {
        let app_limited = rs.is_app_limited || rs.prior_delivered < self.app_limited_until;
        self.update_bw(rs, app_limited);
        self.update_cycle_phase(now, rs, inflight);
        self.check_full_bw_reached(app_limited);
        self.check_drain(now, inflight);
        self.update_min_rtt(now, rs, inflight);
        self.update_gains();
    }

    /// Linux's `bbr_update_bw`: a new round, and the sample into the max filter (an
    /// application-limited one only when it raises the estimate).
    fn update_bw(&mut self, rs: &RateSample, app_limited: bool) {
        self.round_start = false;
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = rs.total_delivered;
            self.rounds += 1;
            self.round_start = true;
            self.conserving = false;
        }
        if rs.delivery_rate > 0 && (!app_limited || rs.delivery_rate >= self.max_bw.get()) {
            self.max_bw
                .update(BW_FILTER_ROUNDS, self.rounds, rs.delivery_rate);
        }
    }

    /// Linux's `bbr_is_next_cycle_phase`: each phase lasts a minimum RTT; the probing
    /// phase also until inflight reached its target (or a loss), the draining one ends
    /// early once inflight is down to the BDP.
    fn update_cycle_phase(&mut self, now: Instant, rs: &RateSample, inflight: u64) {
        if self.state != Bbr1State::ProbeBw {
            return;
        }
        let full_length = self
            .min_rtt
            .is_some_and(|rtt| now.saturating_duration_since(self.cycle_stamp) > rtt);
        let bw = self.max_bw.get();
        let next = match self.pacing_gain {
            100 => full_length,
            gain if gain > 100 => {
                full_length && (rs.newly_lost > 0 || inflight >= self.inflight(bw, gain))
            }
            _ => full_length || inflight <= self.inflight(bw, 100),
        };
        if next {
            self.advance_cycle_phase(now);
        }
    }

    fn advance_cycle_phase(&mut self, now: Instant) {
        self.cycle_index = (self.cycle_index + 1) % PACING_GAINS.len();
        self.cycle_stamp = now;
    }

    /// Linux's `bbr_check_full_bw_reached`: three rounds, not application-limited,
    /// without 25% growth.
    fn check_full_bw_reached(&mut self, app_limited: bool) {
        if self.filled_pipe || !self.round_start || app_limited {
            return;
        }
        let bw = self.max_bw.get();
        if u128::from(bw) * 100 >= u128::from(self.full_bw) * u128::from(FULL_BW_THRESH) {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.filled_pipe = self.full_bw_count >= FULL_BW_COUNT;
    }

    /// Linux's `bbr_check_drain`: Startup over, Drain until inflight is down to the BDP.
    fn check_drain(&mut self, now: Instant, inflight: u64) {
        if self.state == Bbr1State::Startup && self.filled_pipe {
            self.state = Bbr1State::Drain;
        }
        if self.state == Bbr1State::Drain && inflight <= self.inflight(self.max_bw.get(), 100) {
            self.enter_probe_bw(now);
        }
    }

    /// Linux's `bbr_reset_probe_bw_mode`: the cycle starts at a random phase other than
    /// the draining one.
    fn enter_probe_bw(&mut self, now: Instant) {
        self.state = Bbr1State::ProbeBw;
        let len = PACING_GAINS.len() as u64;
        self.cycle_index = (len - 1 - self.random() % (len - 1)) as usize;
        self.advance_cycle_phase(now);
    }

    /// Linux's `bbr_update_min_rtt`: the filter, and ProbeRTT when it expired.
    fn update_min_rtt(&mut self, now: Instant, rs: &RateSample, inflight: u64) {
        let expired = now > self.min_rtt_stamp + MIN_RTT_WINDOW;
        if let Some(rtt) = rs.rtt
            && (self.min_rtt.is_none_or(|m| rtt < m) || expired)
        {
            if self.min_rtt.is_none() {
                self.init_pacing_rate(rtt);
            }
            self.min_rtt = Some(rtt);
            self.min_rtt_stamp = now;
        }
        if expired && self.state != Bbr1State::ProbeRtt {
            self.save_cwnd();
            self.state = Bbr1State::ProbeRtt;
            self.probe_rtt_done = None;
        }
        if self.state != Bbr1State::ProbeRtt {
            return;
        }
        self.app_limited_until = self.delivered + inflight;
        match self.probe_rtt_done {
            None if inflight <= self.min_cwnd() as u64 => {
                self.probe_rtt_done = Some(now + PROBE_RTT_DURATION);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = self.delivered;
            }
            None => {}
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && now > done {
                    self.min_rtt_stamp = now;
                    self.restore_cwnd();
                    if self.filled_pipe {
                        self.enter_probe_bw(now);
                    } else {
                        self.state = Bbr1State::Startup;
                    }
                }
            }
        }
    }

    /// Linux's `bbr_update_gains`.
    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.state {
            Bbr1State::Startup => (HIGH_GAIN, HIGH_GAIN),
            Bbr1State::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Bbr1State::ProbeBw => (PACING_GAINS[self.cycle_index], CWND_GAIN),
            Bbr1State::ProbeRtt => (100, 100),
        };
    }
}

/// The control parameters: pacing rate, send quantum, cwnd.
impl Bbr1 {
    /// Linux's `bbr_set_pacing_rate`: the gain times the estimate, 1% below; never
    /// lowered before the pipe is full.
    fn set_pacing_rate(&mut self) {
        let bw = self.max_bw.get();
        if bw == 0 {
            return;
        }
        let rate = u128::from(bw) * u128::from(self.pacing_gain) / 100
            * u128::from(100 - PACING_MARGIN_PERCENT)
            / 100;
        let rate = rate.min(u128::from(u64::MAX)) as u64;
        if self.filled_pipe || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
        self.send_quantum = crate::tcp::pacing::burst_size(self.pacing_rate, self.mss);
    }

    /// Linux's `bbr_set_cwnd`: packet conservation in recovery's first round, else
    /// towards the target (at once before the pipe is full, by what was delivered after).
    fn set_cwnd(&mut self, rs: &RateSample) {
        let acked = rs.newly_acked as usize;
        if acked == 0 {
            return;
        }
        if rs.newly_lost > 0 {
            self.cwnd = self
                .cwnd
                .saturating_sub(rs.newly_lost as usize)
                .max(self.mss);
        }
        // In recovery's first round Linux sets cwnd to what is in flight plus what the
        // ACK delivered: one segment out for each one delivered. Here the connection's
        // PRR (`conn/recovery.rs`, at ssthresh = cwnd) already sends so, and cwnd holds
        // until the round ends.
        if !self.conserving {
            let target = self.inflight(self.max_bw.get(), self.cwnd_gain) as usize;
            if self.filled_pipe {
                self.cwnd = (self.cwnd + acked).min(target);
            } else if self.cwnd < target || rs.total_delivered < self.initial_cwnd as u64 {
                self.cwnd += acked;
            }
            self.cwnd = self.cwnd.max(self.min_cwnd());
        }
        if self.state == Bbr1State::ProbeRtt {
            self.cwnd = self.cwnd.min(self.min_cwnd());
        }
    }
}

impl CongestionControl for Bbr1 {
    fn name(&self) -> &'static str {
        "bbr1"
    }
    fn cwnd(&self) -> usize {
        self.cwnd
    }
    fn ssthresh(&self) -> usize {
        // In recovery the connection's PRR sends by ssthresh, not cwnd: at cwnd it sends
        // one segment for each one delivered, Linux's packet conservation.
        if self.filled_pipe || self.in_recovery {
            self.cwnd
        } else {
            usize::MAX
        }
    }
    fn in_slow_start(&self) -> bool {
        self.state == Bbr1State::Startup
    }
    fn mss(&self) -> usize {
        self.mss
    }
    fn set_mss(&mut self, mss: usize) {
        let mss = mss.max(1);
        (self.cwnd, self.initial_cwnd) = super::rescale_for_mss(
            (self.cwnd, self.initial_cwnd),
            self.mss,
            mss,
            MIN_CWND_SEGMENTS,
        );
        self.mss = mss;
    }
    fn on_ack(&mut self, _: Instant, _: usize, _: Option<Duration>, _: usize, _: CwndUsage) {
        // Everything happens in `on_rate_sample`.
    }
    fn on_enter_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        self.on_enter_sack_recovery(now, bytes_in_flight);
    }
    fn on_enter_sack_recovery(&mut self, _: Instant, bytes_in_flight: usize) {
        // Linux's `bbr_set_cwnd_to_recover_or_restore`: save cwnd, then for a round
        // send only as ACKs deliver (cwnd = in flight, growing by what each delivers).
        self.save_cwnd();
        self.in_recovery = true;
        self.conserving = true;
        self.next_round_delivered = self.delivered;
        self.cwnd = bytes_in_flight.max(self.mss);
    }
    fn on_dup_ack_in_recovery(&mut self) {}
    fn on_partial_ack(&mut self, _: usize) {}
    fn on_exit_recovery(&mut self, _: Instant, _: usize) {
        self.in_recovery = false;
        self.conserving = false;
        self.restore_cwnd();
    }
    fn on_rto(&mut self, _: Instant, _: usize) {
        // Linux: `tcp_enter_loss` leaves one segment; BBR saves cwnd and takes a new
        // round (`bbr_set_state(TCP_CA_Loss)`: full_bw restarts); the window comes back
        // when the repair is delivered.
        self.save_cwnd();
        self.in_recovery = false;
        self.conserving = false;
        self.cwnd = self.mss;
        self.full_bw = 0;
        self.rto_delivered = Some(self.delivered);
    }
    fn on_idle_restart(&mut self, _: Instant) {
        // Pacing at the model's rate already avoids a burst after idle.
    }
    fn wants_rate_samples(&self) -> bool {
        true
    }
    fn on_rate_sample(&mut self, now: Instant, rs: &RateSample, bytes_in_flight: usize) {
        if !self.started {
            self.started = true;
            self.min_rtt_stamp = now;
            self.cycle_stamp = now;
        }
        let inflight = bytes_in_flight as u64;
        self.delivered = rs.total_delivered;
        if self
            .rto_delivered
            .is_some_and(|at| rs.prior_delivered >= at)
        {
            self.rto_delivered = None;
            self.restore_cwnd();
        }
        self.update_model(now, rs, inflight);
        self.set_pacing_rate();
        self.set_cwnd(rs);
    }
    fn pacing_rate(&self) -> Option<u64> {
        Some(self.pacing_rate)
    }
    fn send_quantum(&self) -> Option<usize> {
        Some(self.send_quantum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;
    const RTT: Duration = Duration::from_millis(20);

    /// An ACK of a full round at `rate` bytes per second: `delivered` so far before it.
    fn sample(rate: u64, delivered: u64, acked: u64, rtt: Duration) -> RateSample {
        RateSample {
            delivery_rate: rate,
            delivered: acked,
            interval: rtt,
            rtt: Some(rtt),
            prior_delivered: delivered,
            total_delivered: delivered + acked,
            is_app_limited: false,
            newly_acked: acked,
            lost: 0,
            newly_lost: 0,
            tx_in_flight: acked,
        }
    }

    /// Rounds of one ACK each at `rate`, with `inflight` left in flight; returns the
    /// time and delivered count after them.
    fn rounds(
        bbr: &mut Bbr1,
        (mut now, mut delivered): (Instant, u64),
        n: usize,
        rate: u64,
        inflight: usize,
    ) -> (Instant, u64) {
        for _ in 0..n {
            now += RTT;
            let acked = rate * RTT.as_nanos() / 1_000_000_000;
            bbr.on_rate_sample(now, &sample(rate, delivered, acked, RTT), inflight);
            delivered += acked;
        }
        (now, delivered)
    }

    #[test]
    fn the_windowed_max_keeps_the_best_of_the_window_and_ages_it_out() {
        let mut filter = WindowedMax::default();
        assert_eq!(filter.update(10, 1, 500), 500);
        assert_eq!(filter.update(10, 2, 300), 500);
        assert_eq!(filter.update(10, 5, 400), 500);
        // Round 12: the 500 of round 1 is older than ten rounds; the next best takes over.
        assert_eq!(filter.update(10, 12, 100), 400);
        assert_eq!(filter.update(10, 13, 900), 900);
        // Far past the window: the sample alone.
        assert_eq!(filter.update(10, 40, 50), 50);
    }

    /// Startup grows while the bandwidth does, leaves after three rounds without 25%
    /// growth, drains to the BDP and cycles ProbeBW's gains from a phase other than 0.75.
    #[test]
    fn startup_drain_and_the_gain_cycle() {
        let mut bbr = Bbr1::new(MSS, 10);
        assert_eq!(bbr.state(), Bbr1State::Startup);
        assert_eq!(bbr.pacing_gain(), HIGH_GAIN);
        let mut at = (Instant::ZERO, 0);
        // Doubling rates: still filling.
        for rate in [1_000_000, 2_000_000, 4_000_000] {
            at = rounds(&mut bbr, at, 1, rate, 10 * MSS);
            assert_eq!(bbr.state(), Bbr1State::Startup);
        }
        // A flat 5 MB/s: three rounds later the pipe is full; Drain (gain 0.35) while the
        // queue is above the BDP (5 MB/s x 20 ms = 100 kB).
        at = rounds(&mut bbr, at, 4, 5_000_000, 400 * MSS);
        assert_eq!(bbr.state(), Bbr1State::Drain);
        assert_eq!(bbr.pacing_gain(), DRAIN_GAIN);
        assert_eq!(bbr.bandwidth(), 5_000_000);
        assert_eq!(bbr.min_rtt(), Some(RTT));
        // Inflight at the BDP: ProbeBW, at a phase whose gain is not 0.75.
        let (mut now, mut delivered) = rounds(&mut bbr, at, 1, 5_000_000, 100 * MSS);
        assert_eq!(bbr.state(), Bbr1State::ProbeBw);
        assert_ne!(bbr.pacing_gain(), 75);
        // A phase lasts a min RTT, the probing one until inflight reached 1.25 BDP, the
        // draining one until it is down to the BDP: every gain comes in order.
        let mut gains = Vec::new();
        for _ in 0..24 {
            let inflight = match bbr.pacing_gain() {
                g if g > 100 => 200 * MSS,
                g if g < 100 => 50 * MSS,
                _ => 100 * MSS,
            };
            now += RTT + Duration::from_millis(1);
            bbr.on_rate_sample(now, &sample(5_000_000, delivered, 100_000, RTT), inflight);
            delivered += 100_000;
            gains.push(bbr.pacing_gain());
        }
        let start = gains
            .iter()
            .position(|&g| g == 125)
            .expect("a probing phase");
        assert_eq!(gains[start + 1], 75);
        assert!(gains[start + 2..start + 8].iter().all(|&g| g == 100));
        assert_eq!(gains[start + 8], 125);
        // The window: twice the BDP plus three quanta, at most.
        assert!(bbr.cwnd() <= 2 * 100 * MSS + 3 * bbr.send_quantum().unwrap() + 2 * MSS);
        assert!(bbr.cwnd() >= 100 * MSS);
        // Paced at the estimate times the gain, 1% below.
        let rate = bbr.pacing_rate().unwrap();
        assert!((3_000_000..=6_250_000).contains(&rate), "{rate}");
    }

    /// Ten seconds without a smaller RTT: ProbeRTT holds four segments for 200 ms and a
    /// round, then ProbeBW again with the window saved before it; ProbeRTT's low
    /// delivery rates leave the bandwidth estimate alone.
    #[test]
    fn probe_rtt_after_ten_seconds() {
        let mut bbr = Bbr1::new(MSS, 10);
        let mut at = rounds(&mut bbr, (Instant::ZERO, 0), 8, 5_000_000, 100 * MSS);
        assert_eq!(bbr.state(), Bbr1State::ProbeBw);
        let before = bbr.cwnd();
        // RTT samples a little above the minimum for ten seconds.
        let mut probed = false;
        for _ in 0..600 {
            let (now, delivered) = at;
            let now = now + RTT;
            bbr.on_rate_sample(
                now,
                &sample(
                    5_000_000,
                    delivered,
                    100_000,
                    RTT + Duration::from_millis(1),
                ),
                100 * MSS,
            );
            at = (now, delivered + 100_000);
            if bbr.state() == Bbr1State::ProbeRtt {
                probed = true;
                assert_eq!(bbr.cwnd(), MIN_CWND_SEGMENTS * MSS);
                assert_eq!(bbr.pacing_gain(), 100);
                break;
            }
        }
        assert!(probed, "no ProbeRTT in 12 s");
        // Inflight down to four segments: 200 ms and a round later, back to ProbeBW.
        for _ in 0..12 {
            let (now, delivered) = at;
            let now = now + RTT;
            bbr.on_rate_sample(
                now,
                &sample(200_000, delivered, 4 * MSS as u64, RTT),
                4 * MSS,
            );
            at = (now, delivered + 4 * MSS as u64);
        }
        assert_eq!(bbr.state(), Bbr1State::ProbeBw);
        assert_eq!(bbr.bandwidth(), 5_000_000);
        assert!(bbr.cwnd() + 2 * MSS >= before, "{} < {before}", bbr.cwnd());
    }

    /// Recovery conserves packets for a round (cwnd = in flight plus what is delivered)
    /// and gives the window back when it ends; a timeout leaves one segment until the
    /// repair is delivered.
    #[test]
    fn recovery_conserves_and_restores() {
        let mut bbr = Bbr1::new(MSS, 10);
        let (now, delivered) = rounds(&mut bbr, (Instant::ZERO, 0), 8, 5_000_000, 100 * MSS);
        let before = bbr.cwnd();
        bbr.on_enter_sack_recovery(now, 60 * MSS);
        assert_eq!(bbr.cwnd(), 60 * MSS);
        let mut rs = sample(5_000_000, delivered, 2 * MSS as u64, RTT);
        rs.prior_delivered = delivered - 1;
        bbr.on_rate_sample(now + Duration::from_millis(5), &rs, 58 * MSS);
        assert_eq!(bbr.cwnd(), 60 * MSS);
        bbr.on_exit_recovery(now + RTT, 50 * MSS);
        assert_eq!(bbr.cwnd(), before);
        bbr.on_rto(now + RTT.saturating_mul(2), 50 * MSS);
        assert_eq!(bbr.cwnd(), MSS);
        let total = delivered + 2 * MSS as u64;
        bbr.on_rate_sample(
            now + RTT.saturating_mul(3),
            &sample(5_000_000, total, MSS as u64, RTT),
            0,
        );
        assert!(bbr.cwnd() + 2 * MSS >= before, "{} < {before}", bbr.cwnd());
    }
}
