//! BBR, as draft-ietf-ccwg-bbr (BBRv3) describes it: a model of the path (the
//! bottleneck bandwidth, a windowed max of delivery-rate samples, and the minimum RTT)
//! sets the pacing rate and a window of a small multiple of the bandwidth-delay product;
//! loss and ECN bound the model from above (`inflight_hi`) and, for a round, from below
//! (`bw_lo`, `inflight_lo`). The states: Startup (pacing gain 2.77 until the bandwidth
//! stops growing by 25% for three rounds), Drain (the queue Startup built), ProbeBW
//! (Down, Cruise, Refill, Up: a probe for more bandwidth every 2-3 s or so many rounds)
//! and ProbeRTT (the window down to half the BDP for 200 ms when the minimum RTT was
//! not refreshed for 5 s).
//!
//! Inputs: [`on_rate_sample`](CongestionControl::on_rate_sample) on every ACK that
//! delivers data does all the work; loss recovery keeps the window (BBR does not halve
//! it: the model bounds it), a timeout shrinks it to one segment until the ACKs rebuild
//! it. Sizes are bytes and rates bytes per second; gains are in percent. The core has
//! no randomness of its own: the draft's random waits come from a fixed-seed
//! xorshift, so a run is repeatable.

use super::{CongestionControl, CwndUsage, RateSample};
use crate::time::{Duration, Instant};

/// Startup pacing gain, 4 ln 2 = 2.77 (draft §2.7.1 "BBR.StartupPacingGain").
const STARTUP_PACING_GAIN: u64 = 277;
/// Startup and ProbeBW cwnd gain (2).
const DEFAULT_CWND_GAIN: u64 = 200;
/// Drain pacing gain (0.35).
const DRAIN_PACING_GAIN: u64 = 35;
/// ProbeBW_UP cwnd gain (2.25).
const PROBE_UP_CWND_GAIN: u64 = 225;
/// "BBR.LossThresh": the loss rate above which inflight is too high, 2%.
const LOSS_THRESH_PERCENT: u64 = 2;
/// "BBR.ECNThresh": the share of CE-marked deliveries above which inflight is too
/// high, 50%.
const ECN_THRESH_PERCENT: u64 = 50;
/// "BBR.Beta": the multiplicative cut on loss, 0.7.
const BETA_PERCENT: u64 = 70;
/// "BBR.Headroom": the share of inflight_hi left free while cruising, 0.15.
const HEADROOM_PERCENT: u64 = 15;
/// "BBR.MinPipeCwnd": 4 segments.
const MIN_PIPE_SEGMENTS: usize = 4;
/// "MinRTTFilterLen": 10 s.
const MIN_RTT_FILTER_LEN: Duration = Duration::from_secs(10);
/// "ProbeRTTInterval": 5 s.
const PROBE_RTT_INTERVAL: Duration = Duration::from_secs(5);
/// "ProbeRTTDuration": 200 ms.
const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// "BBR.PacingMarginPercent": pace 1% below the estimate.
const PACING_MARGIN_PERCENT: u64 = 1;
/// Startup ends on loss after this many loss events in a round ("BBRStartupFullLossCnt").
const STARTUP_FULL_LOSS_COUNT: u32 = 6;
/// Rounds without 25% growth before the pipe counts as full.
const FULL_BW_COUNT: u32 = 3;
/// No limit (the draft's Infinity).
const INF: u64 = u64::MAX;

/// BBR's states (draft §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BbrState {
    /// Rapid growth, pacing gain 2.77.
    Startup,
    /// Drain the queue Startup built.
    Drain,
    /// Pace below the estimate until inflight falls to the BDP.
    ProbeBwDown,
    /// Pace at the estimate.
    ProbeBwCruise,
    /// One round at the estimate with the lower bounds lifted, before probing.
    ProbeBwRefill,
    /// Probe for more bandwidth, pacing gain 1.25.
    ProbeBwUp,
    /// Refresh the minimum RTT with little in flight.
    ProbeRtt,
}

/// Where ACKs are in a bandwidth probe (draft "BBR.ack_phase").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AckPhase {
    Init,
    ProbeStopping,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
}

/// BBR for one connection.
#[derive(Debug, Clone)]
pub struct Bbr {
    mss: usize,
    initial_cwnd: usize,
    cwnd: usize,
    /// cwnd saved on entering recovery, a timeout or ProbeRTT.
    prior_cwnd: usize,
    state: BbrState,
    pacing_gain: u64,
    cwnd_gain: u64,
    pacing_rate: u64,
    send_quantum: usize,
    /// A segment sent after `C.delivered` reached this starts the next round.
    next_round_delivered: u64,
    round_start: bool,
    rounds_since_bw_probe: u64,
    /// The max-bandwidth filter: the largest sample of each of the last two ProbeBW
    /// cycles ("MaxBwFilterLen" = 2), indexed by `cycle_count % 2`.
    max_bw_filter: [u64; 2],
    cycle_count: u64,
    max_bw: u64,
    /// The estimate the model uses: min(max_bw, bw_lo).
    bw: u64,
    bw_lo: u64,
    bw_latest: u64,
    inflight_hi: u64,
    inflight_lo: u64,
    inflight_latest: u64,
    filled_pipe: bool,
    full_bw: u64,
    full_bw_count: u32,
    full_bw_now: bool,
    min_rtt: Option<Duration>,
    min_rtt_stamp: Instant,
    probe_rtt_min_delay: Option<Duration>,
    probe_rtt_min_stamp: Instant,
    probe_rtt_expired: bool,
    probe_rtt_done_stamp: Option<Instant>,
    probe_rtt_round_done: bool,
    cycle_stamp: Instant,
    bw_probe_wait: Duration,
    ack_phase: AckPhase,
    bw_probe_samples: bool,
    bw_probe_up_rounds: u32,
    bw_probe_up_acks: u64,
    probe_up_cnt: u64,
    loss_in_round: bool,
    loss_events_in_round: u32,
    loss_round_delivered: u64,
    loss_round_start: bool,
    in_recovery: bool,
    /// CE-marked bytes reported ([`CongestionControl::on_ecn_ce`]) since the last
    /// rate sample: that sample's `rs.delivered_ce`.
    ce_bytes: u64,
    /// After a timeout: `C.delivered` then; once a segment sent after it is delivered,
    /// the repair is under way and the saved cwnd comes back.
    rto_delivered: Option<u64>,
    /// `C.delivered` of the last sample.
    delivered: u64,
    /// The stamps above are set (at the first sample).
    started: bool,
    rng: u64,
}

impl Bbr {
    /// BBR for segments of `mss` bytes and an initial window of `initial_window_segments`.
    pub fn new(mss: usize, initial_window_segments: usize) -> Bbr {
        let mss = mss.max(1);
        let initial_cwnd = mss * initial_window_segments.max(1);
        let mut bbr = Bbr {
            mss,
            initial_cwnd,
            cwnd: initial_cwnd,
            prior_cwnd: 0,
            state: BbrState::Startup,
            pacing_gain: STARTUP_PACING_GAIN,
            cwnd_gain: DEFAULT_CWND_GAIN,
            pacing_rate: 0,
            send_quantum: 2 * mss,
            next_round_delivered: 0,
            round_start: false,
            rounds_since_bw_probe: 0,
            max_bw_filter: [0; 2],
            cycle_count: 0,
            max_bw: 0,
            bw: 0,
            bw_lo: INF,
            bw_latest: 0,
            inflight_hi: INF,
            inflight_lo: INF,
            inflight_latest: 0,
            filled_pipe: false,
            full_bw: 0,
            full_bw_count: 0,
            full_bw_now: false,
            min_rtt: None,
            min_rtt_stamp: Instant::ZERO,
            probe_rtt_min_delay: None,
            probe_rtt_min_stamp: Instant::ZERO,
            probe_rtt_expired: false,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            cycle_stamp: Instant::ZERO,
            bw_probe_wait: Duration::from_secs(2),
            ack_phase: AckPhase::Init,
            bw_probe_samples: false,
            bw_probe_up_rounds: 0,
            bw_probe_up_acks: 0,
            probe_up_cnt: INF,
            loss_in_round: false,
            loss_events_in_round: 0,
            loss_round_delivered: 0,
            loss_round_start: false,
            in_recovery: false,
            rto_delivered: None,
            delivered: 0,
            ce_bytes: 0,
            started: false,
            rng: 0x2545_f491_4f6c_dd1d,
        };
        bbr.init_pacing_rate(Duration::from_millis(1));
        bbr
    }

    /// The current state.
    pub fn state(&self) -> BbrState {
        self.state
    }

    /// The bandwidth estimate in bytes per second.
    pub fn bandwidth(&self) -> u64 {
        self.bw
    }

    /// The minimum RTT estimate.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// `inflight_hi` (None: unbounded).
    pub fn inflight_hi(&self) -> Option<u64> {
        (self.inflight_hi != INF).then_some(self.inflight_hi)
    }

    /// The next value of a fixed-seed xorshift (the draft's random choices).
    fn random(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    /// "BBRInitPacingRate": the initial window over `rtt`, times the Startup gain.
    fn init_pacing_rate(&mut self, rtt: Duration) {
        let nominal = self.initial_cwnd as u128 * 1_000_000_000 / u128::from(rtt.as_nanos().max(1));
        self.pacing_rate = (nominal * u128::from(STARTUP_PACING_GAIN) / 100) as u64;
    }

    /// "BBRBDPMultiple": `gain` percent of bw x min_rtt (the initial window before an
    /// RTT is known).
    fn bdp_multiple(&self, bw: u64, gain: u64) -> u64 {
        let Some(rtt) = self.min_rtt else {
            return self.initial_cwnd as u64;
        };
        let bdp = u128::from(bw) * u128::from(rtt.as_nanos()) / 1_000_000_000;
        (bdp * u128::from(gain) / 100).min(u128::from(INF - 1)) as u64
    }

    /// "BBRInflight": the BDP multiple plus room for the sender's bursts.
    fn inflight(&self, bw: u64, gain: u64) -> u64 {
        self.quantization_budget(self.bdp_multiple(bw, gain))
    }

    /// "BBRQuantizationBudget".
    fn quantization_budget(&self, inflight: u64) -> u64 {
        let mut inflight = inflight
            .max(3 * self.send_quantum as u64)
            .max(self.min_pipe_cwnd());
        if self.state == BbrState::ProbeBwUp {
            inflight += 2 * self.mss as u64;
        }
        inflight
    }

    fn min_pipe_cwnd(&self) -> u64 {
        (MIN_PIPE_SEGMENTS * self.mss) as u64
    }

    /// "BBRTargetInflight": the BDP, or cwnd while no bandwidth is known.
    fn target_inflight(&self) -> u64 {
        self.bdp_multiple(self.bw, 100).min(self.cwnd as u64)
    }

    /// "BBRInflightWithHeadroom".
    fn inflight_with_headroom(&self) -> u64 {
        if self.inflight_hi == INF {
            return INF;
        }
        let headroom = (HEADROOM_PERCENT * self.inflight_hi / 100).max(self.mss as u64);
        (self.inflight_hi - headroom.min(self.inflight_hi)).max(self.min_pipe_cwnd())
    }

    fn is_probe_bw(&self) -> bool {
        matches!(
            self.state,
            BbrState::ProbeBwDown
                | BbrState::ProbeBwCruise
                | BbrState::ProbeBwRefill
                | BbrState::ProbeBwUp
        )
    }

    fn is_probing_bw(&self) -> bool {
        matches!(
            self.state,
            BbrState::Startup | BbrState::ProbeBwRefill | BbrState::ProbeBwUp
        )
    }
}

/// The model: rounds, bandwidth, loss signals, state transitions, min RTT.
impl Bbr {
    /// "BBRUpdateModelAndState".
    fn update_model_and_state(&mut self, now: Instant, rs: &RateSample, inflight: u64) {
        self.update_latest_delivery_signals(rs);
        self.update_congestion_signals(rs);
        self.check_startup_done(rs);
        self.check_drain(now, inflight);
        self.update_probe_bw_cycle_phase(now, rs, inflight);
        self.update_min_rtt(now, rs);
        self.check_probe_rtt(now, rs, inflight);
        self.advance_latest_delivery_signals(rs);
        self.bound_bw_for_model();
    }

    fn start_round(&mut self, delivered: u64) {
        self.next_round_delivered = delivered;
    }

    /// "BBRUpdateRound".
    fn update_round(&mut self, rs: &RateSample) {
        if rs.prior_delivered >= self.next_round_delivered {
            self.start_round(rs.total_delivered);
            self.rounds_since_bw_probe += 1;
            self.round_start = true;
        } else {
            self.round_start = false;
        }
    }

    /// "BBRUpdateMaxBw".
    fn update_max_bw(&mut self, rs: &RateSample) {
        self.update_round(rs);
        if rs.delivery_rate >= self.max_bw || !rs.is_app_limited {
            let slot = (self.cycle_count % 2) as usize;
            self.max_bw_filter[slot] = self.max_bw_filter[slot].max(rs.delivery_rate);
            self.max_bw = self.max_bw_filter[0].max(self.max_bw_filter[1]);
        }
    }

    /// "BBRAdvanceMaxBwFilter": a new ProbeBW cycle ages the older slot out.
    fn advance_max_bw_filter(&mut self) {
        self.cycle_count += 1;
        self.max_bw_filter[(self.cycle_count % 2) as usize] = 0;
    }

    /// "BBRUpdateLatestDeliverySignals".
    fn update_latest_delivery_signals(&mut self, rs: &RateSample) {
        self.loss_round_start = false;
        self.bw_latest = self.bw_latest.max(rs.delivery_rate);
        self.inflight_latest = self.inflight_latest.max(rs.delivered);
        if rs.prior_delivered >= self.loss_round_delivered {
            self.loss_round_delivered = rs.total_delivered;
            self.loss_round_start = true;
        }
    }

    /// "BBRAdvanceLatestDeliverySignals".
    fn advance_latest_delivery_signals(&mut self, rs: &RateSample) {
        if self.loss_round_start {
            self.bw_latest = rs.delivery_rate;
            self.inflight_latest = rs.delivered;
        }
    }

    /// "BBRUpdateCongestionSignals".
    fn update_congestion_signals(&mut self, rs: &RateSample) {
        self.update_max_bw(rs);
        if rs.newly_lost > 0 {
            self.loss_in_round = true;
        }
        if !self.loss_round_start {
            return;
        }
        self.adapt_lower_bounds_from_congestion();
        self.loss_in_round = false;
        if self.state != BbrState::Startup {
            self.loss_events_in_round = 0;
        }
    }

    /// "BBRAdaptLowerBoundsFromCongestion": once per round with loss, outside the
    /// probing states, cut bw_lo and inflight_lo by Beta (no lower than the last
    /// round's delivery).
    fn adapt_lower_bounds_from_congestion(&mut self) {
        if self.is_probing_bw() || !self.loss_in_round {
            return;
        }
        if self.bw_lo == INF {
            self.bw_lo = self.max_bw;
        }
        if self.inflight_lo == INF {
            self.inflight_lo = self.cwnd as u64;
        }
        self.bw_lo = self.bw_latest.max(BETA_PERCENT * (self.bw_lo / 100));
        self.inflight_lo = self
            .inflight_latest
            .max(BETA_PERCENT * self.inflight_lo / 100);
    }

    fn reset_lower_bounds(&mut self) {
        self.bw_lo = INF;
        self.inflight_lo = INF;
    }

    fn bound_bw_for_model(&mut self) {
        self.bw = self.max_bw.min(self.bw_lo);
    }

    /// "BBRIsInflightTooHigh": losses above 2% of what was in flight, or CE marks on
    /// more than half of what this ACK delivered.
    fn is_inflight_too_high(&self, rs: &RateSample) -> bool {
        rs.lost * 100 > rs.tx_in_flight * LOSS_THRESH_PERCENT
            || (self.ce_bytes > 0 && self.ce_bytes * 100 > rs.newly_acked * ECN_THRESH_PERCENT)
    }

    /// "BBRCheckStartupDone": full bandwidth (three rounds under 25% growth) or
    /// too much loss ends Startup.
    fn check_startup_done(&mut self, rs: &RateSample) {
        self.check_full_bw_reached(rs);
        if self.state == BbrState::Startup
            && !self.filled_pipe
            && self.loss_round_start
            && self.loss_events_in_round >= STARTUP_FULL_LOSS_COUNT
            && self.is_inflight_too_high(rs)
        {
            self.filled_pipe = true;
            self.inflight_hi = self.target_inflight().max(self.inflight_latest);
        }
        if self.loss_round_start {
            self.loss_events_in_round = 0;
        }
        if self.state == BbrState::Startup && self.filled_pipe {
            self.state = BbrState::Drain;
            self.pacing_gain = DRAIN_PACING_GAIN;
            self.cwnd_gain = DEFAULT_CWND_GAIN;
        }
    }

    /// "BBRCheckFullBWReached": per round, whether the delivery rate still grows by 25%.
    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_now || !self.round_start || rs.is_app_limited {
            return;
        }
        if rs.delivery_rate >= self.full_bw.saturating_mul(5) / 4 {
            self.full_bw = rs.delivery_rate;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_now = self.full_bw_count >= FULL_BW_COUNT;
        if self.full_bw_now {
            self.filled_pipe = true;
        }
    }

    fn reset_full_bw(&mut self) {
        self.full_bw = 0;
        self.full_bw_count = 0;
        self.full_bw_now = false;
    }

    /// "BBRCheckDrain".
    fn check_drain(&mut self, now: Instant, inflight: u64) {
        if self.state == BbrState::Drain && inflight <= self.inflight(self.max_bw, 100) {
            self.start_probe_bw_down(now);
        }
    }
}

/// ProbeBW's cycle (draft §4.3.3).
impl Bbr {
    fn start_probe_bw_down(&mut self, now: Instant) {
        self.reset_congestion_signals();
        self.probe_up_cnt = INF;
        self.pick_probe_wait();
        self.cycle_stamp = now;
        self.ack_phase = AckPhase::ProbeStopping;
        self.start_round(self.next_round_delivered_now());
        self.state = BbrState::ProbeBwDown;
        self.pacing_gain = 90;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    /// `C.delivered` as of the last sample (the round starts at the next send).
    fn next_round_delivered_now(&self) -> u64 {
        self.loss_round_delivered.max(self.next_round_delivered)
    }

    fn start_probe_bw_cruise(&mut self) {
        self.state = BbrState::ProbeBwCruise;
        self.pacing_gain = 100;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    fn start_probe_bw_refill(&mut self) {
        self.reset_lower_bounds();
        self.bw_probe_up_rounds = 0;
        self.bw_probe_up_acks = 0;
        self.ack_phase = AckPhase::Refilling;
        self.start_round(self.next_round_delivered_now());
        self.state = BbrState::ProbeBwRefill;
        self.pacing_gain = 100;
        self.cwnd_gain = DEFAULT_CWND_GAIN;
    }

    fn start_probe_bw_up(&mut self, rs: &RateSample) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.start_round(rs.total_delivered);
        self.reset_full_bw();
        self.full_bw = rs.delivery_rate;
        self.state = BbrState::ProbeBwUp;
        self.pacing_gain = 125;
        self.cwnd_gain = PROBE_UP_CWND_GAIN;
        self.raise_inflight_hi_slope();
    }

    fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.bw_latest = 0;
        self.inflight_latest = 0;
    }

    /// "BBRPickProbeWait": 0 or 1 rounds, and 2 to 3 s.
    fn pick_probe_wait(&mut self) {
        self.rounds_since_bw_probe = self.random() % 2;
        self.bw_probe_wait = Duration::from_millis(2000 + self.random() % 1000);
    }

    /// "BBRUpdateProbeBWCyclePhase".
    fn update_probe_bw_cycle_phase(&mut self, now: Instant, rs: &RateSample, inflight: u64) {
        if !self.filled_pipe {
            return;
        }
        self.adapt_upper_bounds(now, rs, inflight);
        match self.state {
            BbrState::ProbeBwDown => {
                if self.check_time_to_probe_bw(now) {
                    return;
                }
                if self.check_time_to_cruise(inflight) {
                    self.start_probe_bw_cruise();
                }
            }
            BbrState::ProbeBwCruise => {
                self.check_time_to_probe_bw(now);
            }
            BbrState::ProbeBwRefill if self.round_start => {
                self.bw_probe_samples = true;
                self.start_probe_bw_up(rs);
            }
            BbrState::ProbeBwUp => self.check_time_to_go_down(now, rs, inflight),
            _ => {}
        }
    }

    fn check_time_to_cruise(&self, inflight: u64) -> bool {
        if inflight > self.inflight_with_headroom() {
            return false;
        }
        inflight <= self.inflight(self.max_bw, 100)
    }

    /// "BBRCheckTimeToProbeBW": the wait is over, or as many rounds as Reno would take
    /// to grow its window by the BDP have passed.
    fn check_time_to_probe_bw(&mut self, now: Instant) -> bool {
        let waited = now - self.cycle_stamp > self.bw_probe_wait;
        let reno_rounds = (self.target_inflight() / self.mss as u64).min(63);
        if waited || self.rounds_since_bw_probe >= reno_rounds {
            self.start_probe_bw_refill();
            return true;
        }
        false
    }

    fn is_cwnd_limited(&self, rs: &RateSample, inflight: u64) -> bool {
        inflight + rs.newly_acked + self.mss as u64 >= self.cwnd as u64
    }

    /// The end of a ProbeBW_UP: down once the probe found no more bandwidth.
    fn check_time_to_go_down(&mut self, now: Instant, rs: &RateSample, inflight: u64) {
        if self.is_time_to_go_down(rs, inflight) {
            self.start_probe_bw_down(now);
        }
    }

    /// "BBRIsTimeToGoDown".
    fn is_time_to_go_down(&mut self, rs: &RateSample, inflight: u64) -> bool {
        if self.is_cwnd_limited(rs, inflight) && self.cwnd as u64 >= self.inflight_hi {
            self.reset_full_bw();
            self.full_bw = rs.delivery_rate;
        } else if self.full_bw_now {
            return true;
        }
        false
    }

    /// "BBRAdaptUpperBounds".
    fn adapt_upper_bounds(&mut self, now: Instant, rs: &RateSample, inflight: u64) {
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        // The end of the samples from a bandwidth probe: the filter ages one cycle.
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            self.bw_probe_samples = false;
            self.ack_phase = AckPhase::Init;
            if self.is_probe_bw() && !rs.is_app_limited {
                self.advance_max_bw_filter();
            }
        }
        if self.is_inflight_too_high(rs) {
            if self.bw_probe_samples {
                self.handle_inflight_too_high(now, rs);
            }
            return;
        }
        if self.inflight_hi == INF {
            return;
        }
        if rs.tx_in_flight > self.inflight_hi {
            self.inflight_hi = rs.tx_in_flight;
        }
        if self.state == BbrState::ProbeBwUp {
            self.probe_inflight_hi_upward(rs, inflight);
        }
    }

    /// "BBRHandleInflightTooHigh".
    fn handle_inflight_too_high(&mut self, now: Instant, rs: &RateSample) {
        self.bw_probe_samples = false;
        if !rs.is_app_limited {
            let target = BETA_PERCENT * self.target_inflight() / 100;
            self.inflight_hi = rs.tx_in_flight.max(target);
        }
        if self.state == BbrState::ProbeBwUp {
            self.start_probe_bw_down(now);
        }
    }

    /// "BBRProbeInflightHiUpward": grow inflight_hi exponentially per round while
    /// the window is full.
    fn probe_inflight_hi_upward(&mut self, rs: &RateSample, inflight: u64) {
        if !self.is_cwnd_limited(rs, inflight) || (self.cwnd as u64) < self.inflight_hi {
            return;
        }
        self.bw_probe_up_acks += rs.newly_acked;
        let step = self.probe_up_cnt.saturating_mul(self.mss as u64).max(1);
        if self.bw_probe_up_acks >= step {
            let delta = self.bw_probe_up_acks / step;
            self.bw_probe_up_acks -= delta * step;
            self.inflight_hi = self.inflight_hi.saturating_add(delta * self.mss as u64);
        }
        if self.round_start {
            self.raise_inflight_hi_slope();
        }
    }

    /// "BBRRaiseInflightHiSlope".
    fn raise_inflight_hi_slope(&mut self) {
        let growth_this_round = 1u64 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.probe_up_cnt = ((self.cwnd / self.mss) as u64 / growth_this_round).max(1);
    }
}

/// Min RTT and ProbeRTT (draft §4.3.4).
impl Bbr {
    /// "BBRUpdateMinRTT".
    fn update_min_rtt(&mut self, now: Instant, rs: &RateSample) {
        self.probe_rtt_expired = now > self.probe_rtt_min_stamp + PROBE_RTT_INTERVAL;
        if let Some(rtt) = rs.rtt
            && (self.probe_rtt_min_delay.is_none_or(|d| rtt < d) || self.probe_rtt_expired)
        {
            self.probe_rtt_min_delay = Some(rtt);
            self.probe_rtt_min_stamp = now;
        }
        let min_rtt_expired = now > self.min_rtt_stamp + MIN_RTT_FILTER_LEN;
        if let Some(delay) = self.probe_rtt_min_delay
            && (self.min_rtt.is_none_or(|m| delay < m) || min_rtt_expired)
        {
            if self.min_rtt.is_none() {
                self.init_pacing_rate(delay);
            }
            self.min_rtt = Some(delay);
            self.min_rtt_stamp = self.probe_rtt_min_stamp;
        }
    }

    /// "BBRProbeRTTCwnd": half the BDP, at least four segments.
    fn probe_rtt_cwnd(&self) -> u64 {
        self.bdp_multiple(self.bw, 50).max(self.min_pipe_cwnd())
    }

    /// "BBRCheckProbeRTT".
    fn check_probe_rtt(&mut self, now: Instant, rs: &RateSample, inflight: u64) {
        if self.state != BbrState::ProbeRtt && self.probe_rtt_expired {
            self.state = BbrState::ProbeRtt;
            self.pacing_gain = 100;
            self.cwnd_gain = 50;
            self.save_cwnd();
            self.probe_rtt_done_stamp = None;
            self.ack_phase = AckPhase::ProbeStopping;
            self.start_round(rs.total_delivered);
        }
        if self.state == BbrState::ProbeRtt {
            self.handle_probe_rtt(now, inflight);
        }
    }

    /// "BBRHandleProbeRTT".
    fn handle_probe_rtt(&mut self, now: Instant, inflight: u64) {
        match self.probe_rtt_done_stamp {
            None if inflight <= self.probe_rtt_cwnd() => {
                self.probe_rtt_done_stamp = Some(now + PROBE_RTT_DURATION);
                self.probe_rtt_round_done = false;
                self.start_round(self.next_round_delivered_now());
            }
            None => {}
            Some(done) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done && now > done {
                    self.probe_rtt_min_stamp = now;
                    self.restore_cwnd();
                    self.exit_probe_rtt(now);
                }
            }
        }
    }

    fn exit_probe_rtt(&mut self, now: Instant) {
        self.reset_lower_bounds();
        if self.filled_pipe {
            self.start_probe_bw_down(now);
            self.start_probe_bw_cruise();
        } else {
            self.state = BbrState::Startup;
            self.pacing_gain = STARTUP_PACING_GAIN;
            self.cwnd_gain = DEFAULT_CWND_GAIN;
        }
    }

    fn save_cwnd(&mut self) {
        self.prior_cwnd = if !self.in_recovery && self.state != BbrState::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }

    fn restore_cwnd(&mut self) {
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }
}

/// The control parameters: pacing rate, send quantum, cwnd (draft §4.6).
impl Bbr {
    fn update_control_parameters(&mut self, rs: &RateSample) {
        self.set_pacing_rate();
        self.set_send_quantum();
        self.set_cwnd(rs);
    }

    /// "BBRSetPacingRateWithGain".
    fn set_pacing_rate(&mut self) {
        let rate = u128::from(self.bw) * u128::from(self.pacing_gain) / 100
            * u128::from(100 - PACING_MARGIN_PERCENT)
            / 100;
        let rate = rate.min(u128::from(INF)) as u64;
        if self.filled_pipe || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// "BBRSetSendQuantum": 1 ms at the pacing rate, 2 segments to 64 KB.
    fn set_send_quantum(&mut self) {
        self.send_quantum = crate::tcp::pacing::burst_size(self.pacing_rate, self.mss);
    }

    /// "BBRSetCwnd".
    fn set_cwnd(&mut self, rs: &RateSample) {
        let max_inflight = self.inflight(self.bw, self.cwnd_gain);
        let acked = rs.newly_acked as usize;
        if self.filled_pipe {
            self.cwnd = (self.cwnd + acked).min(max_inflight as usize);
        } else if (self.cwnd as u64) < max_inflight || rs.total_delivered < self.initial_cwnd as u64
        {
            self.cwnd += acked;
        }
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd() as usize);
        if self.state == BbrState::ProbeRtt {
            self.cwnd = self.cwnd.min(self.probe_rtt_cwnd() as usize);
        }
        self.bound_cwnd_for_model();
    }

    /// "BBRBoundCwndForModel": inflight_hi while probing, less headroom while cruising,
    /// and inflight_lo.
    fn bound_cwnd_for_model(&mut self) {
        let mut cap = INF;
        if self.is_probe_bw() && self.state != BbrState::ProbeBwCruise {
            cap = self.inflight_hi;
        } else if matches!(self.state, BbrState::ProbeRtt | BbrState::ProbeBwCruise) {
            cap = self.inflight_with_headroom();
        }
        cap = cap.min(self.inflight_lo).max(self.min_pipe_cwnd());
        self.cwnd = self.cwnd.min(cap.min(usize::MAX as u64) as usize);
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }
    fn cwnd(&self) -> usize {
        self.cwnd
    }
    fn ssthresh(&self) -> usize {
        // In recovery the connection's PRR sends by ssthresh, not cwnd: at cwnd it sends
        // one segment for each one delivered (Linux's packet conservation). Startup's
        // recoveries too: unbounded, PRR's segment on every ACK would double what is in
        // flight each round, past cwnd and the queue.
        if self.filled_pipe || self.in_recovery {
            self.cwnd
        } else {
            usize::MAX
        }
    }
    fn in_slow_start(&self) -> bool {
        self.state == BbrState::Startup
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
            MIN_PIPE_SEGMENTS,
        );
        self.mss = mss;
    }
    fn on_ack(&mut self, _: Instant, _: usize, _: Option<Duration>, _: usize, _: CwndUsage) {
        // Everything happens in `on_rate_sample`.
    }
    fn on_enter_recovery(&mut self, now: Instant, bytes_in_flight: usize) {
        self.on_enter_sack_recovery(now, bytes_in_flight);
    }
    fn on_enter_sack_recovery(&mut self, _: Instant, _: usize) {
        // The model bounds the window; recovery keeps it (draft: BBR saves cwnd and
        // restores it when recovery ends).
        self.save_cwnd();
        self.in_recovery = true;
        self.loss_events_in_round += 1;
    }
    fn on_dup_ack_in_recovery(&mut self) {}
    fn on_partial_ack(&mut self, _: usize) {}
    fn on_exit_recovery(&mut self, _: Instant, _: usize) {
        self.in_recovery = false;
        self.restore_cwnd();
    }
    fn on_rto(&mut self, _: Instant, _: usize) {
        // Draft §4.6.4.4: on a timeout, save cwnd and let one segment out; the rate
        // samples of the repair rebuild it.
        self.save_cwnd();
        self.in_recovery = false;
        self.cwnd = self.mss;
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
            self.probe_rtt_min_stamp = now;
            self.cycle_stamp = now;
        }
        let inflight = bytes_in_flight as u64;
        self.delivered = rs.total_delivered;
        // Draft §4.6.4.4: the cwnd saved at the timeout is restored once the repair
        // delivers (here: a segment sent after the timeout arrived).
        if self
            .rto_delivered
            .is_some_and(|at| rs.prior_delivered >= at)
        {
            self.rto_delivered = None;
            self.restore_cwnd();
        }
        self.update_model_and_state(now, rs, inflight);
        self.update_control_parameters(rs);
        self.ce_bytes = 0;
    }
    fn on_loss(&mut self, _: Instant, lost_bytes: usize, _: usize) {
        if lost_bytes > 0 {
            self.loss_in_round = true;
            if self.state == BbrState::Startup {
                self.loss_events_in_round += 1;
            }
        }
    }
    fn on_ecn_ce(&mut self, _: Instant, ce_bytes: usize, _: usize) {
        // Read with the next rate sample (the ACK's), then cleared.
        self.ce_bytes += ce_bytes as u64;
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

    /// A path of `rate` bytes/s and `rtt` driven one segment per ACK: the sender
    /// keeps `min(cwnd, what the path holds)` in flight and every ACK delivers one
    /// segment, sampled at the path's rate (`app_limited` as told).
    struct Path {
        now: Instant,
        delivered: u64,
        rate: u64,
        rtt: Duration,
    }

    impl Path {
        fn ack(&mut self, bbr: &mut Bbr, lost: u64) -> RateSample {
            let per_segment = Duration::from_nanos(MSS as u64 * 1_000_000_000 / self.rate);
            self.now += per_segment;
            // What the pacing rate puts in flight over an RTT, at most cwnd.
            let paced = bbr.pacing_rate * self.rtt.as_nanos() / 1_000_000_000;
            let in_flight = (bbr.cwnd() as u64).min(paced.max(4 * MSS as u64));
            let prior = self.delivered.saturating_sub(in_flight);
            self.delivered += MSS as u64;
            let rs = RateSample {
                delivery_rate: self
                    .rate
                    .min(in_flight * 1_000_000_000 / self.rtt.as_nanos()),
                delivered: in_flight,
                interval: self.rtt,
                rtt: Some(self.rtt),
                prior_delivered: prior,
                total_delivered: self.delivered,
                is_app_limited: false,
                newly_acked: MSS as u64,
                lost,
                newly_lost: lost,
                tx_in_flight: in_flight,
            };
            bbr.on_rate_sample(self.now, &rs, in_flight as usize);
            rs
        }
    }

    fn path(rate: u64, rtt_ms: u64) -> Path {
        Path {
            now: Instant::from_millis(1),
            delivered: 0,
            rate,
            rtt: Duration::from_millis(rtt_ms),
        }
    }

    /// Startup grows until the bandwidth stops growing, Drain empties the queue, and
    /// ProbeBW settles at the path's rate with cwnd about 2 x BDP.
    #[test]
    fn startup_drain_then_probe_bw_at_the_path_rate() {
        let mut bbr = Bbr::new(MSS, 10);
        let mut p = path(1_000_000, 100);
        assert_eq!(bbr.state(), BbrState::Startup);
        let mut seen = alloc::vec::Vec::new();
        for _ in 0..5000 {
            p.ack(&mut bbr, 0);
            if seen.last() != Some(&bbr.state()) {
                seen.push(bbr.state());
            }
        }
        assert_eq!(&seen[..2], &[BbrState::Startup, BbrState::Drain]);
        assert!(bbr.state() != BbrState::Startup);
        assert_eq!(bbr.bandwidth(), 1_000_000);
        assert_eq!(bbr.min_rtt(), Some(Duration::from_millis(100)));
        // 1 MB/s at 100 ms: BDP 100 KB; cwnd_gain 2.
        assert!(
            (150_000..=230_000).contains(&bbr.cwnd()),
            "cwnd {}",
            bbr.cwnd()
        );
        let rate = bbr.pacing_rate().unwrap();
        assert!((800_000..=1_300_000).contains(&rate), "pacing {rate}");
        // The probe cycle went through all four phases.
        for phase in [
            BbrState::ProbeBwDown,
            BbrState::ProbeBwCruise,
            BbrState::ProbeBwRefill,
            BbrState::ProbeBwUp,
        ] {
            assert!(seen.contains(&phase), "{phase:?} not in {seen:?}");
        }
    }

    /// The max filter keeps the largest sample of the last two cycles: a lower rate
    /// replaces it only after the filter ages twice.
    #[test]
    fn max_bw_filter_holds_the_peak_for_two_cycles() {
        let mut bbr = Bbr::new(MSS, 10);
        let rs = |rate: u64| RateSample {
            delivery_rate: rate,
            ..RateSample::default()
        };
        bbr.update_max_bw(&rs(500));
        bbr.update_max_bw(&rs(300));
        assert_eq!(bbr.max_bw, 500);
        bbr.advance_max_bw_filter();
        bbr.update_max_bw(&rs(300));
        assert_eq!(bbr.max_bw, 500);
        bbr.advance_max_bw_filter();
        bbr.update_max_bw(&rs(300));
        assert_eq!(bbr.max_bw, 300);
        // App-limited samples lower than the estimate do not count.
        bbr.update_max_bw(&RateSample {
            delivery_rate: 200,
            is_app_limited: true,
            ..RateSample::default()
        });
        assert_eq!(bbr.max_bw, 300);
    }

    /// No lower RTT for 5 s: ProbeRTT, cwnd down to half the BDP; once inflight is
    /// that low for 200 ms and a round, back to ProbeBW with the window restored.
    #[test]
    fn probe_rtt_when_the_min_rtt_is_not_refreshed() {
        let mut bbr = Bbr::new(MSS, 10);
        let mut p = path(1_000_000, 100);
        let start = p.now;
        while bbr.state() != BbrState::ProbeRtt {
            p.ack(&mut bbr, 0);
            assert!(p.now - start < Duration::from_secs(6), "no ProbeRTT");
        }
        assert!(p.now - start > PROBE_RTT_INTERVAL);
        let before = bbr.prior_cwnd;
        p.ack(&mut bbr, 0);
        assert!(bbr.cwnd() <= 50_000 + 4 * MSS, "cwnd {}", bbr.cwnd());
        let entered = p.now;
        while bbr.state() == BbrState::ProbeRtt {
            p.ack(&mut bbr, 0);
            assert!(
                p.now - entered < Duration::from_secs(1),
                "stuck in ProbeRTT"
            );
        }
        assert!(p.now - entered >= PROBE_RTT_DURATION);
        assert!(bbr.is_probe_bw(), "{:?}", bbr.state());
        assert!(bbr.cwnd() >= before.min(150_000), "cwnd {}", bbr.cwnd());
    }

    /// Loss above 2% of what was in flight while probing up sets inflight_hi and ends
    /// the probe; loss below it does not.
    #[test]
    fn loss_above_two_percent_bounds_inflight() {
        let mut bbr = Bbr::new(MSS, 10);
        let mut p = path(1_000_000, 100);
        while bbr.state() != BbrState::ProbeBwUp {
            p.ack(&mut bbr, 0);
        }
        assert_eq!(bbr.inflight_hi(), None);
        // 1% of tx_in_flight: below the threshold.
        let rs = p.ack(&mut bbr, 0);
        p.ack(&mut bbr, rs.tx_in_flight / 100);
        assert_eq!(bbr.inflight_hi(), None);
        assert_eq!(bbr.state(), BbrState::ProbeBwUp);
        // 5%: too high.
        let rs = p.ack(&mut bbr, rs.tx_in_flight / 20);
        assert_eq!(bbr.state(), BbrState::ProbeBwDown);
        let hi = bbr.inflight_hi().expect("inflight_hi set");
        assert!(hi >= rs.tx_in_flight.min(70_000), "{hi}");
    }

    /// CE marks on more than half of an ACK's data while probing up count as too
    /// much in flight, as loss above 2% does.
    #[test]
    fn ecn_marks_bound_inflight() {
        let mut bbr = Bbr::new(MSS, 10);
        let mut p = path(1_000_000, 100);
        while bbr.state() != BbrState::ProbeBwUp {
            p.ack(&mut bbr, 0);
        }
        bbr.on_ecn_ce(p.now, MSS / 4, MSS);
        p.ack(&mut bbr, 0);
        assert_eq!(bbr.state(), BbrState::ProbeBwUp);
        bbr.on_ecn_ce(p.now, MSS, MSS);
        p.ack(&mut bbr, 0);
        assert_eq!(bbr.state(), BbrState::ProbeBwDown);
        assert!(bbr.inflight_hi().is_some());
    }

    /// A timeout lets one segment out; the window comes back once the repair
    /// delivers.
    #[test]
    fn timeout_then_restore() {
        let mut bbr = Bbr::new(MSS, 10);
        let mut p = path(1_000_000, 100);
        for _ in 0..3000 {
            p.ack(&mut bbr, 0);
        }
        let cwnd = bbr.cwnd();
        bbr.on_rto(p.now, cwnd);
        assert_eq!(bbr.cwnd(), MSS);
        p.delivered += 100 * MSS as u64;
        p.ack(&mut bbr, 0);
        assert!(bbr.cwnd() >= cwnd * 9 / 10, "{} vs {cwnd}", bbr.cwnd());
    }
}
