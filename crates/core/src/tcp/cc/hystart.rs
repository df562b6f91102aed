//! HyStart++ (RFC 9406): leaving the first slow start when the RTT starts to rise, before
//! the bottleneck's queue overflows.
//!
//! Slow start doubles cwnd every round trip until a loss; on a path with a deep queue
//! that loss comes when cwnd is the path's BDP plus the whole queue, and a window's worth
//! of segments is lost at once. HyStart++ watches the minimum RTT of each round: once it
//! has risen by `RttThresh` over the previous round's, the queue is building, and the
//! sender moves to Conservative Slow Start (CSS), growing a quarter as fast. If the RTT
//! falls back below the baseline the rise was a false alarm and slow start resumes;
//! after [`CSS_ROUNDS`] rounds of CSS the sender enters congestion avoidance with
//! ssthresh = cwnd.
//!
//! As RFC 9406 §4.2 recommends, only the initial slow start uses it (ssthresh still at
//! its arbitrarily high initial value); later slow starts stop at the ssthresh a loss set.
//!
//! Rounds: RFC 9406 starts a round when an ACK passes `windowEnd`, which was SND.NXT at
//! the start of the previous round. The controller sees bytes, not sequence numbers, so
//! a round here ends once the bytes acknowledged since its start reach the bytes that
//! were in flight when it started: the same point, since FlightSize is SND.MAX - SND.UNA
//! and the controller is only told of cumulative acknowledgments outside recovery.

use crate::time::Duration;

/// RFC 9406 §4.3: the lower bound of the RTT increase that ends slow start.
pub const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
/// RFC 9406 §4.3: the upper bound of that increase.
pub const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
/// RFC 9406 §4.3: the increase threshold is the last round's minimum RTT over this.
pub const MIN_RTT_DIVISOR: u32 = 8;
/// RFC 9406 §4.3: RTT samples a round needs before its minimum is trusted.
pub const N_RTT_SAMPLE: u32 = 8;
/// RFC 9406 §4.3: CSS grows cwnd this many times slower than slow start.
pub const CSS_GROWTH_DIVISOR: usize = 4;
/// RFC 9406 §4.3: rounds of CSS before congestion avoidance.
pub const CSS_ROUNDS: u32 = 5;

/// What HyStart++ decided for one ACK in slow start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// Standard slow start: grow by the full RFC 3465 increment.
    SlowStart,
    /// Conservative slow start: grow by the increment divided by [`CSS_GROWTH_DIVISOR`].
    Conservative,
    /// CSS lasted [`CSS_ROUNDS`] rounds: set ssthresh to cwnd (congestion avoidance).
    Exit,
}

impl Growth {
    /// The cwnd increment for a slow-start increment of `increment` bytes.
    pub fn increment(self, increment: usize) -> usize {
        match self {
            Growth::SlowStart => increment,
            Growth::Conservative | Growth::Exit => increment / CSS_GROWTH_DIVISOR,
        }
    }
}

/// RFC 9406's "infinity" for the minima and the CSS baseline (no RTT sample is 584
/// years; sentinels rather than `Option`s keep the state 24 bytes smaller per connection).
const INFINITY: Duration = Duration::MAX;

/// `rtt`, or None when it is [`INFINITY`].
fn known(rtt: Duration) -> Option<Duration> {
    (rtt != INFINITY).then_some(rtt)
}

/// The HyStart++ state of one connection's initial slow start: the rounds' state is
/// allocated at the first ACK of new data and dropped when HyStart++ ends (CSS over, a
/// loss, a timeout), so a connection that has not started or has left its initial slow
/// start keeps 8 bytes for it, not 56.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HyStart {
    /// The rounds, once an ACK arrived (while on).
    rounds: Option<alloc::boxed::Box<Rounds>>,
    /// Whether HyStart++ is on (off: standard slow start).
    enabled: bool,
    /// Whether the sender paces its segments: only then does CSS return to slow start
    /// when the RTT falls back (see [`HyStart::paced`]).
    paced: bool,
    /// Linux's HyStart rather than HyStart++ (see [`HyStart::exit_at_once`]).
    exit_at_once: bool,
}

/// RFC 9406's variables (boxed in [`HyStart`]; the boxes of connections that ended are
/// kept for new ones, see [`HyStart::lend_rounds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rounds {
    /// Bytes cumulatively acknowledged so far (outside recovery).
    acked: u64,
    /// `acked` at which the current round ends; 0 before the first ACK.
    round_end: u64,
    /// `lastRoundMinRTT` ([`INFINITY`] until a round had a sample).
    last_round_min: Duration,
    /// `currentRoundMinRTT` ([`INFINITY`] until a sample).
    current_round_min: Duration,
    /// `rttSampleCount` of the current round.
    samples: u32,
    /// In CSS: the rounds CSS has lasted.
    css_rounds: u32,
    /// `cssBaselineMinRtt`: [`INFINITY`] outside CSS.
    css_baseline: Duration,
}

/// The rounds before the first ACK.
const FIRST: Rounds = Rounds {
    acked: 0,
    round_end: 0,
    last_round_min: INFINITY,
    current_round_min: INFINITY,
    samples: 0,
    css_rounds: 0,
    css_baseline: INFINITY,
};

impl HyStart {
    /// HyStart++ for a new connection (`enabled: false` keeps RFC 5681 slow start).
    pub fn new(enabled: bool) -> HyStart {
        HyStart {
            rounds: None,
            enabled,
            paced: false,
            exit_at_once: false,
        }
    }

    /// Leave slow start at once on the delay signal, as Linux's CUBIC HyStart
    /// (`hystart_update`, HYSTART_DELAY) does, rather than entering RFC 9406's
    /// Conservative Slow Start: ssthresh = cwnd at the first ACK whose round's minimum
    /// RTT is `RttThresh` above the lowest RTT of the rounds before it. As Linux, the
    /// test is made from the round's ninth sample on (`sample_cnt` reached
    /// HYSTART_MIN_SAMPLES before it), and against the connection's minimum
    /// (`delay_min`) rather than the last round's.
    pub fn exit_at_once(mut self, exit_at_once: bool) -> HyStart {
        self.exit_at_once = exit_at_once;
        self
    }

    /// Whether the sender paces (RFC 9406 §4.3 "L = infinity if paced"). Without pacing,
    /// slow start sends each window as bursts at twice the bottleneck's rate, and the
    /// minimum RTT of a round is set by whichever of its segments left before the
    /// previous burst had built a queue: a round after the one that entered CSS often
    /// reports the old minimum although the standing queue is growing. RFC 9406's
    /// false-alarm rule ("if (currentRoundMinRTT < cssBaselineMinRtt) ... resume slow
    /// start") then sends the sender back to doubling, into the overflow HyStart++ is
    /// there to avoid: on `imp ttcp`'s default path (100 Mbit/s, 20 ms, a queue of twice
    /// the BDP) it resumed slow start every time, for 551 retransmissions and 89.7% of
    /// the link, against 2 and 94.5% without the rule. So an unpaced sender treats CSS as
    /// one way, as Linux's HyStart treats its delay signal; a paced one keeps the rule.
    pub fn paced(mut self, paced: bool) -> HyStart {
        self.paced = paced;
        self
    }

    /// Whether the sender is in conservative slow start.
    pub fn in_css(&self) -> bool {
        self.rounds.as_deref().is_some_and(Rounds::in_css)
    }

    /// Whether HyStart++ is on.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// An ACK outside recovery, in the initial slow start, acknowledged `acked_bytes`
    /// (more than zero), gave the RTT sample `rtt` if any, and left `bytes_in_flight` in
    /// flight. Returns how slow start grows for it.
    pub fn on_ack(
        &mut self,
        acked_bytes: usize,
        rtt: Option<Duration>,
        bytes_in_flight: usize,
    ) -> Growth {
        if !self.enabled {
            return Growth::SlowStart;
        }
        let (paced, exit_at_once) = (self.paced, self.exit_at_once);
        let r = self
            .rounds
            .get_or_insert_with(|| alloc::boxed::Box::new(FIRST));
        r.acked = r.acked.saturating_add(acked_bytes as u64);
        let round_ended = r.acked >= r.round_end;
        if round_ended {
            r.start_round(bytes_in_flight, exit_at_once);
        }
        if let Some(rtt) = rtt {
            r.current_round_min = r.current_round_min.min(rtt);
            r.samples = r.samples.saturating_add(1);
        }
        if !r.in_css() {
            let found = r.check_delay_increase(exit_at_once);
            if found && exit_at_once {
                self.finish();
                return Growth::Exit;
            }
            r.growth()
        } else if round_ended && r.css_rounds >= CSS_ROUNDS {
            self.finish();
            Growth::Exit
        } else {
            r.check_false_alarm(paced);
            r.growth()
        }
    }

    /// Give this connection a box for its rounds from `spare` (boxes of connections
    /// that ended), reset to the state before the first ACK, when it has none yet and
    /// HyStart++ is on: [`HyStart::on_ack`] then allocates none (W3 churn: one
    /// allocation and one free less per connection end). The state is the one `on_ack`
    /// would start from, and nothing but `on_ack` and `in_css` reads it, which treat it
    /// as no box at all, so lending before the first ACK changes nothing but where the
    /// box comes from (and that a connection holds it from the start).
    #[inline]
    #[allow(clippy::vec_box)] // The boxes are what the connections take and give back.
    pub(crate) fn lend_rounds(&mut self, spare: &mut alloc::vec::Vec<alloc::boxed::Box<Rounds>>) {
        if self.enabled
            && self.rounds.is_none()
            && let Some(mut rounds) = spare.pop()
        {
            *rounds = FIRST;
            self.rounds = Some(rounds);
        }
    }

    /// The rounds' box, if this connection has one, to keep for a later connection
    /// (see [`HyStart::lend_rounds`]); the connection is ending.
    pub(crate) fn take_rounds(&mut self) -> Option<alloc::boxed::Box<Rounds>> {
        self.rounds.take()
    }

    /// Off for good: after a loss (or the end of CSS) later slow starts stop at the
    /// ssthresh that was set (RFC 9406 §4.2).
    pub fn finish(&mut self) {
        *self = HyStart::new(false)
            .paced(self.paced)
            .exit_at_once(self.exit_at_once);
    }
}

impl Rounds {
    fn in_css(&self) -> bool {
        self.css_baseline != INFINITY
    }

    fn growth(&self) -> Growth {
        if self.in_css() {
            Growth::Conservative
        } else {
            Growth::SlowStart
        }
    }

    /// RFC 9406 §4.2: "lastRoundMinRTT = currentRoundMinRTT; currentRoundMinRTT =
    /// infinity; rttSampleCount = 0", and a round of CSS counted. `lowest`: keep the
    /// lowest minimum of all rounds so far instead (Linux's `delay_min`).
    fn start_round(&mut self, bytes_in_flight: usize, lowest: bool) {
        self.round_end = self.acked.saturating_add(bytes_in_flight.max(1) as u64);
        self.last_round_min = if lowest {
            self.last_round_min.min(self.current_round_min)
        } else {
            self.current_round_min
        };
        self.current_round_min = INFINITY;
        self.samples = 0;
        if self.in_css() {
            self.css_rounds += 1;
        }
    }

    /// RFC 9406 §4.2: with N_RTT_SAMPLE samples this round and both minima known, "if
    /// (currentRoundMinRTT >= (lastRoundMinRTT + RttThresh))": enter CSS with
    /// "cssBaselineMinRtt = currentRoundMinRTT". Returns whether it found the increase.
    /// `as_linux`: from the sample after the N_RTT_SAMPLE-th on, as Linux's
    /// `hystart_update` ([`HyStart::exit_at_once`]).
    fn check_delay_increase(&mut self, as_linux: bool) -> bool {
        if self.samples < N_RTT_SAMPLE + u32::from(as_linux) {
            return false;
        }
        let (Some(current), Some(last)) =
            (known(self.current_round_min), known(self.last_round_min))
        else {
            return false;
        };
        let threshold = Duration::from_nanos(last.as_nanos() / u64::from(MIN_RTT_DIVISOR))
            .clamp(MIN_RTT_THRESH, MAX_RTT_THRESH);
        // Linux: "curr_rtt > delay_min + HYSTART_DELAY_THRESH(delay_min >> 3)".
        let found = if as_linux {
            current > last + threshold
        } else {
            current >= last + threshold
        };
        if found {
            (self.css_baseline, self.css_rounds) = (current, 0);
        }
        found
    }

    /// RFC 9406 §4.2: in CSS, "if (currentRoundMinRTT < cssBaselineMinRtt)": the rise was
    /// spurious, "cssBaselineMinRtt = infinity; resume slow start". Only for a paced
    /// sender (`paced`, see [`HyStart::paced`]), and only from the first
    /// full round of CSS on: the round that entered CSS set the baseline from its own
    /// minimum so far, and any later sample of that round lower by a timestamp tick
    /// (RTTs from timestamps have millisecond granularity) would otherwise end CSS at once.
    fn check_false_alarm(&mut self, paced: bool) {
        let (Some(baseline), Some(current)) =
            (known(self.css_baseline), known(self.current_round_min))
        else {
            return;
        };
        let rounds = self.css_rounds;
        if paced && rounds >= 1 && self.samples >= N_RTT_SAMPLE && current < baseline {
            self.css_baseline = INFINITY;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;

    /// One round of `segments` ACKs of one segment each, every one with RTT `rtt`, the
    /// window being `segments` segments; returns the growth of the last ACK.
    fn round(hs: &mut HyStart, segments: usize, rtt_ms: u64) -> Growth {
        let mut growth = Growth::SlowStart;
        for i in 0..segments {
            let flight = (segments - i) * MSS;
            growth = hs.on_ack(MSS, Some(Duration::from_millis(rtt_ms)), flight);
        }
        growth
    }

    #[test]
    fn a_constant_rtt_stays_in_slow_start() {
        let mut hs = HyStart::new(true);
        for n in 0..10 {
            assert_eq!(round(&mut hs, 10 + n, 20), Growth::SlowStart);
        }
        assert!(!hs.in_css());
    }

    #[test]
    fn a_rising_rtt_enters_css_then_congestion_avoidance() {
        let mut hs = HyStart::new(true);
        round(&mut hs, 10, 20);
        round(&mut hs, 10, 20);
        // 20 ms base: the threshold is max(4 ms, 20/8 ms) = 4 ms; 23 ms is below it.
        assert_eq!(round(&mut hs, 10, 23), Growth::SlowStart);
        assert_eq!(round(&mut hs, 10, 28), Growth::Conservative);
        assert!(hs.in_css());
        assert_eq!(Growth::Conservative.increment(2 * MSS), MSS / 2);
        let mut exits = 0;
        for _ in 0..CSS_ROUNDS + 1 {
            for i in 0..10 {
                let flight = (10 - i) * MSS;
                if hs.on_ack(MSS, Some(Duration::from_millis(30)), flight) == Growth::Exit {
                    exits += 1;
                }
            }
        }
        assert_eq!(
            exits, 1,
            "exactly one ACK moves the sender to congestion avoidance"
        );
    }

    #[test]
    fn a_lower_sample_in_the_round_that_entered_css_is_no_false_alarm() {
        let mut hs = HyStart::new(true).paced(true);
        round(&mut hs, 10, 20);
        round(&mut hs, 10, 20);
        for i in 0..10 {
            let rtt = if i < 8 { 30 } else { 29 };
            hs.on_ack(MSS, Some(Duration::from_millis(rtt)), (10 - i) * MSS);
        }
        assert!(
            hs.in_css(),
            "29 ms came in the round whose minimum set the baseline"
        );
    }

    #[test]
    fn an_rtt_back_below_the_baseline_resumes_slow_start_when_paced() {
        let mut paced = HyStart::new(true).paced(true);
        let mut unpaced = HyStart::new(true);
        for hs in [&mut paced, &mut unpaced] {
            round(hs, 10, 20);
            round(hs, 10, 20);
            round(hs, 10, 30);
            assert!(hs.in_css());
            round(hs, 10, 29);
        }
        assert!(!paced.in_css(), "29 ms is below the 30 ms baseline");
        assert!(unpaced.in_css(), "an unpaced sender's CSS is one way");
    }

    #[test]
    fn too_few_samples_or_disabled_decide_nothing() {
        let mut hs = HyStart::new(true);
        round(&mut hs, 5, 20);
        round(&mut hs, 5, 20);
        assert_eq!(
            round(&mut hs, 5, 60),
            Growth::SlowStart,
            "5 samples < N_RTT_SAMPLE"
        );
        let mut off = HyStart::new(false);
        round(&mut off, 10, 20);
        round(&mut off, 10, 20);
        assert_eq!(round(&mut off, 10, 60), Growth::SlowStart);
        let mut hs = HyStart::new(true);
        round(&mut hs, 10, 20);
        hs.finish();
        round(&mut hs, 10, 20);
        assert_eq!(round(&mut hs, 10, 60), Growth::SlowStart);
    }

    #[test]
    fn the_threshold_is_clamped_between_4_and_16_ms() {
        // 200 ms base: 200/8 = 25 ms, clamped to 16 ms.
        let mut hs = HyStart::new(true);
        round(&mut hs, 10, 200);
        round(&mut hs, 10, 200);
        assert_eq!(round(&mut hs, 10, 215), Growth::SlowStart);
        assert_eq!(round(&mut hs, 10, 232), Growth::Conservative);
    }

    #[test]
    fn exit_at_once_leaves_slow_start_on_the_ninth_sample_of_a_slower_round() {
        // Linux's HyStart: no Conservative Slow Start, and the test waits for a ninth
        // sample in the round.
        let mut hs = HyStart::new(true).exit_at_once(true);
        assert_eq!(round(&mut hs, 10, 200), Growth::SlowStart);
        let flight = 20 * MSS;
        for i in 0..8 {
            let growth = hs.on_ack(MSS, Some(Duration::from_millis(240)), flight - i * MSS);
            assert_eq!(growth, Growth::SlowStart, "sample {}", i + 1);
        }
        let growth = hs.on_ack(MSS, Some(Duration::from_millis(240)), 12 * MSS);
        assert_eq!(growth, Growth::Exit);
        assert!(!hs.enabled(), "over for good");
    }
}
