//! Round-trip time estimation and the retransmission timeout (RFC 6298), and Karn's rule
//! for taking RTT samples on connections without timestamps.

use crate::time::{Duration, Instant};

use super::seq::SeqNumber;

/// RFC 6298 §2: "G" the clock granularity. Our clock is nanoseconds, but a floor of 1 ms
/// on the variance term keeps the RTO from collapsing onto SRTT on quiet links.
pub const CLOCK_GRANULARITY: Duration = Duration::from_millis(1);

/// `srtt` and `min_rtt` before the first sample. No round trip lasts 584 years, so no
/// sample is confused with it.
const NO_SAMPLE: Duration = Duration::MAX;

/// `value`, or None when it is [`NO_SAMPLE`].
fn sampled(value: Duration) -> Option<Duration> {
    (value != NO_SAMPLE).then_some(value)
}

/// What the RTO's floor (`TcpConfig::min_rto`) bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RtoFloor {
    /// The RTO itself: RFC 6298 §2.4, "Whenever RTO is computed, if it is less than 1
    /// second, then the RTO SHOULD be rounded up to 1 second" (the floor a parameter).
    #[default]
    Rto,
    /// The variance term, as Linux's `__tcp_set_rto` (`rttvar_us` is at least
    /// `tcp_rto_min`): `RTO = SRTT + max(min_rto, 4*RTTVAR)`, so the RTO stays a
    /// floor's worth above SRTT (100 ms SRTT: 300 ms, where RFC 6298 gives 200-300).
    Variance,
}

/// How the RTO follows the RTT samples (`TcpConfig::rto_rule`): RFC 6298's estimator
/// (the default), or the rules of older TCPs, for modelling them (`legacy.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RtoRule {
    /// RFC 6298: SRTT and RTTVAR, `RTO = SRTT + max(G, 4*RTTVAR)`.
    #[default]
    Rfc6298,
    /// RFC 793 §3.7 ("An Example Retransmission Timeout Procedure"): `SRTT = ALPHA*SRTT +
    /// (1-ALPHA)*RTT`, `RTO = min(UBOUND, max(LBOUND, BETA*SRTT))` ("ALPHA is a smoothing
    /// factor (e.g., .8 to .9) ... BETA is a delay variance factor (e.g., 1.3 to 2.0)"),
    /// both in thousandths; the first sample is taken as SRTT. No variance term, so a
    /// path whose delay varies more than BETA allows times out spuriously.
    Rfc793 {
        /// ALPHA, in thousandths (at most 1000).
        alpha_milli: u16,
        /// BETA, in thousandths.
        beta_milli: u16,
    },
    /// A fixed retransmission timer, whatever the samples say (the 1975 TCPs of seed
    /// 004 took it as a parameter: 0.5 s or 4 s). Backoff, if the connection meets
    /// timeouts, still doubles it up to `max_rto`.
    Fixed(Duration),
}

/// The RTO's floor and ceiling (`TcpConfig::min_rto`, `max_rto`, `rto_floor`), `max >=
/// min`: an argument of each call that computes or backs off the RTO rather than a copy
/// in every connection (16 bytes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtoBounds {
    /// Lower bound on the RTO (or on its variance term: `floor`).
    pub min: Duration,
    /// Upper bound on the RTO, backed off or not (raised to `min` if below it).
    pub max: Duration,
    /// What `min` bounds.
    pub floor: RtoFloor,
    /// How the RTO follows the samples.
    pub rule: RtoRule,
}

impl RtoBounds {
    /// Bounds from a floor and a ceiling (a ceiling below the floor is the floor).
    pub fn new(min: Duration, max: Duration, floor: RtoFloor) -> RtoBounds {
        RtoBounds {
            min,
            max: max.max(min),
            floor,
            rule: RtoRule::Rfc6298,
        }
    }

    /// The same bounds, the RTO following `rule`.
    #[must_use]
    pub fn with_rule(self, rule: RtoRule) -> RtoBounds {
        RtoBounds { rule, ..self }
    }

    /// RFC 6298 §2.2/2.3's "RTO <- SRTT + max (G, K*RTTVAR) where K = 4", within the
    /// bounds.
    fn rto(self, srtt: Duration, rttvar: Duration) -> Duration {
        match self.rule {
            RtoRule::Rfc6298 => self.rto_rfc6298(srtt, rttvar),
            RtoRule::Rfc793 { beta_milli, .. } => {
                let rto = u128::from(srtt.as_nanos()) * u128::from(beta_milli) / 1000;
                self.clamp(Duration::from_nanos(saturate(rto)))
            }
            RtoRule::Fixed(rto) => rto,
        }
    }

    /// [`RtoBounds::rto`] under [`RtoRule::Rfc6298`].
    #[inline]
    fn rto_rfc6298(self, srtt: Duration, rttvar: Duration) -> Duration {
        let variance = CLOCK_GRANULARITY.max(rttvar.saturating_mul(4));
        let rto = match self.floor {
            RtoFloor::Rto => srtt + variance,
            RtoFloor::Variance => srtt + variance.max(self.min),
        };
        self.clamp(rto)
    }

    fn clamp(self, rto: Duration) -> Duration {
        rto.max(self.min).min(self.max)
    }
}

/// Smoothed RTT, RTT variance and the retransmission timeout of one connection.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    /// SRTT, once a sample arrived ([`NO_SAMPLE`] before: an `Option` would take 8
    /// bytes more per connection).
    srtt: Duration,
    /// RTTVAR (meaningful once `srtt` is set).
    rttvar: Duration,
    /// The smallest sample seen ([`NO_SAMPLE`] before the first).
    min_rtt: Duration,
    /// RTO before backoff, within the [`RtoBounds`]. The backoff (the times the timer
    /// was backed off since the last sample or reset: the RTO is `rto * 2^backoff`,
    /// capped at the bounds' `max`) is the caller's: only a connection that met a
    /// timeout has one, and it keeps it out of line (8 bytes less per connection).
    rto: Duration,
}

impl RttEstimator {
    /// An estimator with no samples: the RTO is `initial_rto` until the first sample.
    ///
    /// RFC 6298 §2.1: "Until a round-trip time (RTT) measurement has been made for a
    /// segment sent between the sender and receiver, the sender SHOULD set RTO <- 1
    /// second". §2.4 rounds the RTO up to 1 s; Linux uses 200 ms, so the floor is a
    /// parameter. §2.5: "A maximum value MAY be placed on RTO provided it is at least 60
    /// seconds."
    pub fn new(initial_rto: Duration, bounds: RtoBounds) -> RttEstimator {
        RttEstimator {
            srtt: NO_SAMPLE,
            rttvar: Duration::ZERO,
            min_rtt: NO_SAMPLE,
            rto: match bounds.rule {
                RtoRule::Fixed(rto) => rto,
                _ => bounds.clamp(initial_rto),
            },
        }
    }

    /// Take an RTT measurement `rtt` (RFC 6298 §2.2, §2.3). The caller clears the backoff: a
    /// valid sample means the path answers again.
    pub fn sample(&mut self, rtt: Duration, bounds: RtoBounds) {
        if bounds.rule != RtoRule::Rfc6298 {
            return self.sample_legacy(rtt, bounds);
        }
        let (srtt, rttvar) = match sampled(self.srtt) {
            // RFC 6298 §2.2: "When the first RTT measurement R is made, the host MUST
            // set SRTT <- R, RTTVAR <- R/2".
            None => (rtt.as_nanos(), rtt.as_nanos() / 2),
            // RFC 6298 §2.3: "RTTVAR <- (1 - beta) * RTTVAR + beta * |SRTT - R'|
            // SRTT <- (1 - alpha) * SRTT + alpha * R' ... using alpha=1/8 and beta=1/4".
            // RTTVAR is updated first, with the old SRTT, as the RFC orders it.
            Some(old) => {
                let (old, var, r) = (old.as_nanos(), self.rttvar.as_nanos(), rtt.as_nanos());
                // Below 2^61 ns (73 years) the sums fit 64 bits: the same values as in
                // 128, for fewer instructions on every ACK.
                const EXACT: u64 = 1 << 61;
                if old < EXACT && var < EXACT && r < EXACT {
                    ((7 * old + r) / 8, (3 * var + old.abs_diff(r)) / 4)
                } else {
                    let (old, var, r) = (u128::from(old), u128::from(var), u128::from(r));
                    let rttvar = (3 * var + old.abs_diff(r)) / 4;
                    (saturate((7 * old + r) / 8), saturate(rttvar))
                }
            }
        };
        let srtt = Duration::from_nanos(srtt);
        self.rttvar = Duration::from_nanos(rttvar);
        self.srtt = srtt;
        self.min_rtt = self.min_rtt.min(rtt);
        self.rto = bounds.rto_rfc6298(srtt, self.rttvar);
    }

    /// A sample under an old TCP's rule: RFC 6298's estimator for a fixed timer (whose
    /// RTO ignores it), RFC 793's smoothing for its rule.
    #[cold]
    #[inline(never)]
    fn sample_legacy(&mut self, rtt: Duration, bounds: RtoBounds) {
        match bounds.rule {
            RtoRule::Rfc793 { alpha_milli, .. } => self.sample_rfc793(rtt, alpha_milli, bounds),
            _ => {
                self.sample(rtt, bounds.with_rule(RtoRule::Rfc6298));
                self.rto = bounds.rto(self.srtt, self.rttvar);
            }
        }
    }

    /// RFC 793's smoothing: `SRTT = ALPHA*SRTT + (1-ALPHA)*RTT` (the first sample taken
    /// whole), no variance.
    fn sample_rfc793(&mut self, rtt: Duration, alpha_milli: u16, bounds: RtoBounds) {
        let alpha = u128::from(alpha_milli.min(1000));
        let srtt = match sampled(self.srtt) {
            None => rtt,
            Some(old) => {
                let mixed = alpha * u128::from(old.as_nanos())
                    + (1000 - alpha) * u128::from(rtt.as_nanos());
                Duration::from_nanos(saturate(mixed / 1000))
            }
        };
        self.srtt = srtt;
        self.min_rtt = self.min_rtt.min(rtt);
        self.rto = bounds.rto(srtt, Duration::ZERO);
    }

    /// Starts from another connection's estimates (RFC 9040 §4.2 Table 3: "RTT <-
    /// old_RTT, RTTVAR <- old_RTTVAR"), the RTO computed from them as after a sample
    /// (RFC 6298 §2.3); later samples refine them as usual.
    pub fn seed(&mut self, srtt: Duration, rttvar: Duration, bounds: RtoBounds) {
        self.srtt = srtt;
        self.rttvar = rttvar;
        self.rto = bounds.rto(srtt, rttvar);
    }

    /// The retransmission timeout before backoff.
    pub fn base_rto(&self) -> Duration {
        self.rto
    }

    /// The retransmission timeout to arm now after `backoff` backoffs, at most
    /// `max_rto` (the bounds' `max`).
    #[inline]
    pub fn rto(&self, backoff: u32, max_rto: Duration) -> Duration {
        if backoff == 0 {
            // The common case, without the shift and the saturating multiply.
            return self.rto.min(max_rto);
        }
        let factor = 1u64.checked_shl(backoff).unwrap_or(u64::MAX);
        self.rto.saturating_mul(factor).min(max_rto)
    }

    /// The timer expired: RFC 6298 §5.5 "The host MUST set RTO <- RTO * 2 ("back off
    /// the timer")." The backoff after `backoff` (one more, unless the RTO already
    /// reached `max_rto`, the bounds' `max`). A sample, a seed or progress sets it back
    /// to 0 (the caller's part).
    pub fn backed_off(&self, backoff: u32, max_rto: Duration) -> u32 {
        if self.rto(backoff, max_rto) < max_rto {
            backoff + 1
        } else {
            backoff
        }
    }

    /// SRTT, `None` before the first sample.
    pub fn srtt(&self) -> Option<Duration> {
        sampled(self.srtt)
    }

    /// RTTVAR (zero before the first sample).
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// The smallest RTT sampled, `None` before the first sample.
    pub fn min_rtt(&self) -> Option<Duration> {
        sampled(self.min_rtt)
    }
}

/// `n` as u64, saturating.
fn saturate(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Times one segment at a time for connections without timestamps, following Karn's rule.
///
/// RFC 6298 §3: "RTT samples MUST NOT be made using segments that were retransmitted
/// (and thus for which it is ambiguous whether the reply was for the first instance of
/// the packet or a later instance)." Any retransmission while a segment is timed throws
/// the measurement away, which also covers a retransmission of an earlier segment
/// delaying the ACK of the timed one.
#[derive(Debug, Clone, Copy, Default)]
pub struct RttSampler {
    /// The segment being timed: the sequence number just past it, and when it was sent.
    timing: Option<(SeqNumber, Instant)>,
}

impl RttSampler {
    /// A sampler timing nothing.
    pub const fn new() -> RttSampler {
        RttSampler { timing: None }
    }

    /// A new segment ending just before `seq_end` was sent at `now` (not a
    /// retransmission): time it, unless a segment is already being timed.
    pub fn start(&mut self, seq_end: SeqNumber, now: Instant) {
        if self.timing.is_none() {
            self.timing = Some((seq_end, now));
        }
    }

    /// An ACK for everything before `ack` arrived at `now`: the RTT if it covers the
    /// timed segment (the sampler is then free to time another).
    pub fn on_ack(&mut self, ack: SeqNumber, now: Instant) -> Option<Duration> {
        let (seq_end, sent) = self.timing?;
        if ack >= seq_end {
            self.timing = None;
            Some(now.saturating_duration_since(sent))
        } else {
            None
        }
    }

    /// A segment was retransmitted: drop the measurement in progress (Karn).
    pub fn on_retransmit(&mut self) {
        self.timing = None;
    }

    /// Whether a segment is being timed.
    pub fn is_timing(&self) -> bool {
        self.timing.is_some()
    }
}

/// Times the SYN (or SYN-ACK) for connections without timestamps: RFC 6298 §2.1 lets
/// the first RTT measurement come from the handshake, and Karn's rule (§3) forbids it
/// once the SYN was sent twice (or the handshake turned into a simultaneous open).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandshakeTimer {
    /// When the SYN went out first.
    first: Option<Instant>,
    /// It went out again, or the timing is otherwise ambiguous.
    ambiguous: bool,
}

impl HandshakeTimer {
    /// A timer for a handshake whose SYN has not been sent.
    pub fn new() -> HandshakeTimer {
        HandshakeTimer::default()
    }

    /// A timer that gives no sample (a simultaneous open: our SYN and its SYN-ACK
    /// answer different segments).
    pub fn ambiguous() -> HandshakeTimer {
        HandshakeTimer {
            first: None,
            ambiguous: true,
        }
    }

    /// The SYN (or SYN-ACK) was sent at `now`.
    pub fn on_send(&mut self, now: Instant) {
        if self.first.is_some() {
            self.ambiguous = true;
        } else {
            self.first = Some(now);
        }
    }

    /// When the SYN first went out (`None` before it did, or for a simultaneous open).
    pub fn first_sent(&self) -> Option<Instant> {
        self.first
    }

    /// The handshake completed at `now`: the RTT, if the SYN was sent once.
    pub fn sample(&self, now: Instant) -> Option<Duration> {
        let first = self.first.filter(|_| !self.ambiguous)?;
        Some(now.saturating_duration_since(first))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const BOUNDS: RtoBounds = RtoBounds {
        min: Duration::from_millis(200),
        max: Duration::from_secs(60),
        floor: RtoFloor::Rto,
        rule: RtoRule::Rfc6298,
    };
    const MAX: Duration = BOUNDS.max;

    fn estimator() -> RttEstimator {
        RttEstimator::new(Duration::from_secs(1), BOUNDS)
    }

    #[test]
    fn bounds_keep_the_ceiling_at_or_above_the_floor() {
        let b = RtoBounds::new(ms(300), ms(100), RtoFloor::Rto);
        assert_eq!((b.min, b.max), (ms(300), ms(300)));
        let e = RttEstimator::new(ms(50), b);
        assert_eq!(e.rto(0, b.max), ms(300));
    }

    #[test]
    fn linux_floors_the_variance_term_not_the_rto() {
        // Two 100 ms samples: RTTVAR 37.5 ms. RFC 6298: 100 + 4 * 37.5 = 250 ms (above
        // the 200 ms floor); Linux: 100 + max(200, 150) = 300 ms ("rto = 3*rtt").
        let linux = RtoBounds {
            floor: RtoFloor::Variance,
            ..BOUNDS
        };
        let (mut rfc, mut lx) = (
            estimator(),
            RttEstimator::new(Duration::from_secs(1), linux),
        );
        for _ in 0..2 {
            rfc.sample(ms(100), BOUNDS);
            lx.sample(ms(100), linux);
        }
        assert_eq!(rfc.rttvar(), Duration::from_micros(37_500));
        assert_eq!(rfc.rto(0, MAX), ms(250));
        assert_eq!(lx.rto(0, MAX), ms(300));
        // A large variance is the same either way.
        rfc.sample(ms(900), BOUNDS);
        lx.sample(ms(900), linux);
        assert_eq!(rfc.rto(0, MAX), lx.rto(0, MAX));
        // Seeded from a shared block (RFC 9040) the same rule holds.
        lx.seed(ms(10), ms(1), linux);
        assert_eq!(lx.rto(0, MAX), ms(210));
        rfc.seed(ms(10), ms(1), BOUNDS);
        assert_eq!(rfc.rto(0, MAX), ms(200));
    }

    #[test]
    fn initial_rto_before_samples() {
        let e = estimator();
        assert_eq!(e.rto(0, MAX), Duration::from_secs(1));
        assert_eq!(e.srtt(), None);
        assert_eq!(e.rttvar(), Duration::ZERO);
        assert_eq!(e.min_rtt(), None);
    }

    #[test]
    fn first_and_later_samples_follow_rfc_6298() {
        let mut e = estimator();
        e.sample(ms(100), BOUNDS);
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), ms(50));
        assert_eq!(e.rto(0, MAX), ms(300)); // 100 + 4 * 50
        e.sample(ms(200), BOUNDS);
        // RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 62.5; SRTT = 7/8 * 100 + 1/8 * 200 = 112.5
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(0, MAX), Duration::from_micros(362_500));
        assert_eq!(e.min_rtt(), Some(ms(100)));
        e.sample(ms(40), BOUNDS);
        assert_eq!(e.min_rtt(), Some(ms(40)));
    }

    #[test]
    fn rto_is_clamped_and_uses_granularity() {
        let no_floor = RtoBounds::new(Duration::ZERO, MAX, RtoFloor::Rto);
        let mut e = RttEstimator::new(Duration::from_secs(1), no_floor);
        for _ in 0..100 {
            e.sample(Duration::from_micros(10), no_floor);
        }
        // RTTVAR decays towards 0; G = 1 ms keeps the RTO above SRTT.
        assert!(e.rto(0, MAX) >= CLOCK_GRANULARITY);
        let mut e = estimator();
        e.sample(ms(1), BOUNDS);
        assert_eq!(e.rto(0, MAX), ms(200));
        e.sample(Duration::from_secs(100), BOUNDS);
        assert_eq!(e.rto(0, MAX), Duration::from_secs(60));
    }

    #[test]
    fn backoff_doubles_up_to_max() {
        let mut e = estimator();
        e.sample(ms(100), BOUNDS);
        let mut backoff = e.backed_off(0, MAX);
        assert_eq!(e.rto(backoff, MAX), ms(600));
        backoff = e.backed_off(backoff, MAX);
        assert_eq!(e.rto(backoff, MAX), ms(1200));
        for _ in 0..200 {
            backoff = e.backed_off(backoff, MAX);
        }
        assert_eq!(e.rto(backoff, MAX), Duration::from_secs(60));
        assert!(backoff < 10);
        assert_eq!(e.rto(0, MAX), ms(300));
    }

    #[test]
    fn rfc_793_smooths_without_variance_and_scales_by_beta() {
        let bounds =
            RtoBounds::new(ms(100), ms(60_000), RtoFloor::Rto).with_rule(RtoRule::Rfc793 {
                alpha_milli: 900,
                beta_milli: 2000,
            });
        let mut e = RttEstimator::new(ms(3000), bounds);
        assert_eq!(e.base_rto(), ms(3000));
        e.sample(ms(400), bounds);
        assert_eq!(e.srtt(), Some(ms(400)));
        assert_eq!(e.base_rto(), ms(800));
        // SRTT = 0.9 * 400 + 0.1 * 1400 = 500; RTO = 2 * 500.
        e.sample(ms(1400), bounds);
        assert_eq!(e.srtt(), Some(ms(500)));
        assert_eq!(e.base_rto(), ms(1000));
        // The floor still holds.
        e.sample(ms(1), bounds);
        e.sample(ms(1), bounds);
        assert!(e.base_rto() >= ms(100));
    }

    #[test]
    fn a_fixed_rto_ignores_samples_and_bounds_but_backs_off() {
        let bounds =
            RtoBounds::new(ms(1000), ms(60_000), RtoFloor::Rto).with_rule(RtoRule::Fixed(ms(500)));
        let mut e = RttEstimator::new(ms(3000), bounds);
        assert_eq!(e.base_rto(), ms(500));
        e.sample(ms(4000), bounds);
        assert_eq!(e.base_rto(), ms(500));
        assert_eq!(e.rto(2, bounds.max), ms(2000));
    }

    #[test]
    fn huge_samples_saturate_instead_of_overflowing() {
        let bounds = RtoBounds::new(ms(200), Duration::MAX, RtoFloor::Rto);
        let mut e = RttEstimator::new(Duration::from_secs(1), bounds);
        e.sample(Duration::MAX, bounds);
        e.sample(Duration::MAX, bounds);
        assert_eq!(e.rto(0, bounds.max), Duration::MAX);
        let backoff = e.backed_off(0, bounds.max);
        assert_eq!(e.rto(backoff, bounds.max), Duration::MAX);
    }

    #[test]
    fn sampler_applies_karns_rule() {
        let mut s = RttSampler::new();
        let t0 = Instant::from_millis(1000);
        s.start(SeqNumber(u32::MAX - 10) + 100, t0);
        s.start(SeqNumber(500), t0 + ms(5)); // ignored: already timing
        assert_eq!(s.on_ack(SeqNumber(50), t0 + ms(10)), None);
        assert_eq!(s.on_ack(SeqNumber(89), t0 + ms(30)), Some(ms(30)));
        assert!(!s.is_timing());
        assert_eq!(s.on_ack(SeqNumber(100), t0 + ms(40)), None);
        s.start(SeqNumber(200), t0 + ms(50));
        s.on_retransmit();
        assert_eq!(s.on_ack(SeqNumber(200), t0 + ms(90)), None);
    }
}
