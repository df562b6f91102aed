//! The generic cell rate algorithm (GCRA) of ATM traffic management (ITU-T I.371, the
//! ATM Forum's TM 4.0), applied to frames: the traffic contract a link's shaper holds
//! frames to and its policer checks them against.
//!
//! A contract ([`GcraConfig`]) has a peak rate, a sustained rate and a maximum burst
//! size, as ATM's PCR, SCR and MBS. It is the dual GCRA of a VBR connection: one
//! GCRA(T_peak, 0) and one GCRA(T_sustained, BT), and a frame conforms only if it
//! conforms to both. Cells become bytes: a frame of `len` bytes is `len` back-to-back
//! cells of one byte, so its increment is `len * 8 / rate` seconds, and the burst
//! tolerance is ATM's `BT = (MBS - 1) * (T_sustained - T_peak)` with T the time of one
//! byte. A burst at the peak rate then conforms while each of its frames starts within
//! its first `MBS` bytes (exactly `MBS` bytes when `MBS` is a multiple of the frame
//! size).
//!
//! Each GCRA is kept in its continuous-state leaky-bucket form (I.371 figure A.1): the
//! bucket holds `X`, the time the frames accepted so far still owe, draining at one
//! second per second. At time `t` a frame conforms if `X - (t - LCT) <= tolerance`;
//! if it does and is accepted, `X` becomes `max(0, X - (t - LCT)) + increment` and
//! `LCT` becomes `t`. A non-conforming frame leaves the state unchanged, as ATM's UPC
//! leaves it for a discarded or tagged cell.
//!
//! Times are integers: each bucket counts in units of `1 / peak` (peak) or `1 / (sustained
//! * peak)` (sustained) nanoseconds, in which every increment and tolerance is exact.
//! Instants are whole nanoseconds, so each GCRA tolerates just under one nanosecond
//! more than its limit (a CDVT of the clock's resolution): frames back to back at
//! exactly the peak rate, each start rounded to the nanosecond, conform, and
//! [`Gcra::earliest`] rounds down to the nanosecond.

use std::fmt;

use impnet_core::{Duration, Instant};

/// Nanoseconds per second times 8 bits: a byte at 1 bit/s lasts this many nanoseconds.
const BYTE_NANOS_AT_1BPS: u128 = 8_000_000_000;

/// A traffic contract: peak rate, sustained rate, maximum burst size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GcraConfig {
    /// Peak rate in bits per second (ATM's PCR): no two frames closer than this allows.
    pub peak_bps: u64,
    /// Sustained rate in bits per second (ATM's SCR): the long-run rate.
    pub sustained_bps: u64,
    /// Maximum burst size in bytes (ATM's MBS): how much may go at the peak rate.
    pub burst_bytes: u64,
}

/// What is wrong with a [`GcraConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GcraConfigError {
    /// The sustained rate is zero: nothing would ever conform after the first burst.
    ZeroSustained,
    /// The peak rate is below the sustained rate.
    PeakBelowSustained {
        /// The peak rate given.
        peak_bps: u64,
        /// The sustained rate given.
        sustained_bps: u64,
    },
    /// The burst size is zero.
    ZeroBurst,
}

impl fmt::Display for GcraConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GcraConfigError::ZeroSustained => {
                write!(f, "sustained rate is 0; give a rate such as \"100mbit\"")
            }
            GcraConfigError::PeakBelowSustained {
                peak_bps,
                sustained_bps,
            } => write!(
                f,
                "peak rate {peak_bps} bit/s is below the sustained rate {sustained_bps} \
                 bit/s; the peak must be at least the sustained rate"
            ),
            GcraConfigError::ZeroBurst => {
                write!(f, "burst size is 0; give at least one frame, e.g. \"64K\"")
            }
        }
    }
}

impl std::error::Error for GcraConfigError {}

impl GcraConfig {
    /// Checks that the sustained rate and burst are not zero and the peak is at least the
    /// sustained rate.
    pub fn validate(&self) -> Result<(), GcraConfigError> {
        if self.sustained_bps == 0 {
            return Err(GcraConfigError::ZeroSustained);
        }
        if self.peak_bps < self.sustained_bps {
            return Err(GcraConfigError::PeakBelowSustained {
                peak_bps: self.peak_bps,
                sustained_bps: self.sustained_bps,
            });
        }
        if self.burst_bytes == 0 {
            return Err(GcraConfigError::ZeroBurst);
        }
        Ok(())
    }
}

/// One GCRA in leaky-bucket form, in units of `1 / per_ns` nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    /// Units in one nanosecond.
    per_ns: u128,
    /// Units one byte adds (the increment per byte).
    per_byte: u128,
    /// The limit `L` (burst tolerance) in units.
    tolerance: u128,
    /// `X`: the bucket's content at `last`, in units.
    content: u128,
    /// `LCT`: when the last conforming frame was accepted.
    last: Instant,
}

impl Bucket {
    /// The content left at `now` (never below zero).
    fn content_at(&self, now: Instant) -> u128 {
        let elapsed = u128::from(now.saturating_duration_since(self.last).as_nanos());
        self.content
            .saturating_sub(elapsed.saturating_mul(self.per_ns))
    }

    /// The earliest instant at or after `now` at which a frame conforms.
    fn earliest(&self, now: Instant) -> Instant {
        if self.content_at(now) <= self.tolerance {
            return now;
        }
        // X - (t - LCT) * per_ns <= tolerance  <=>  t >= LCT + (X - tolerance) / per_ns.
        let wait = (self.content - self.tolerance).div_ceil(self.per_ns);
        let wait = u64::try_from(wait).unwrap_or(u64::MAX);
        (self.last + Duration::from_nanos(wait)).max(now)
    }

    fn accept(&mut self, now: Instant, len: usize) {
        let content = self.content_at(now);
        self.content = content.saturating_add((len as u128).saturating_mul(self.per_byte));
        self.last = now.max(self.last);
    }
}

/// The dual GCRA of one contract, with its state: which frames conform, and when a
/// held frame would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    config: GcraConfig,
    peak: Bucket,
    sustained: Bucket,
}

impl Gcra {
    /// A GCRA for `config`, its buckets empty.
    ///
    /// # Panics
    /// If `config` fails [`GcraConfig::validate`] (a zero rate would divide by zero).
    pub fn new(config: GcraConfig) -> Gcra {
        if let Err(e) = config.validate() {
            panic!("invalid GCRA contract: {e}");
        }
        let peak = u128::from(config.peak_bps);
        let sustained = u128::from(config.sustained_bps);
        // Each tolerance is the limit plus just under a nanosecond (per_ns - 1 units).
        let empty = |per_ns: u128, per_byte, tolerance: u128| Bucket {
            per_ns,
            per_byte,
            tolerance: tolerance.saturating_add(per_ns - 1),
            content: 0,
            last: Instant::ZERO,
        };
        Gcra {
            config,
            // GCRA(T_peak, 0), in units of 1 / peak ns: a byte is 8e9 units.
            peak: empty(peak, BYTE_NANOS_AT_1BPS, 0),
            // GCRA(T_sustained, BT), in units of 1 / (sustained * peak) ns: a byte is
            // 8e9 * peak units, and BT = (MBS - 1) * 8e9 * (peak - sustained).
            sustained: empty(
                sustained.saturating_mul(peak),
                BYTE_NANOS_AT_1BPS.saturating_mul(peak),
                u128::from(config.burst_bytes - 1)
                    .saturating_mul(BYTE_NANOS_AT_1BPS)
                    .saturating_mul(peak - sustained),
            ),
        }
    }

    /// The contract.
    pub fn config(&self) -> &GcraConfig {
        &self.config
    }

    /// Whether a frame conforms at `now` (to both the peak and the sustained GCRA).
    pub fn conforms(&self, now: Instant) -> bool {
        self.earliest(now) == now
    }

    /// The earliest instant at or after `now` at which a frame conforms: when a shaper
    /// may send it.
    pub fn earliest(&self, now: Instant) -> Instant {
        self.peak.earliest(now).max(self.sustained.earliest(now))
    }

    /// Records a conforming frame of `len` bytes accepted at `now` (a shaper calls this
    /// at the instant [`earliest`](Gcra::earliest) gave, or later).
    pub fn accept(&mut self, now: Instant, len: usize) {
        self.peak.accept(now, len);
        self.sustained.accept(now, len);
    }

    /// A policer's decision on a frame of `len` bytes arriving at `now`: `true` (and the
    /// frame is counted against the contract) if it conforms, `false` (and nothing
    /// changes) if not.
    pub fn police(&mut self, now: Instant, len: usize) -> bool {
        if !self.conforms(now) {
            return false;
        }
        self.accept(now, len);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Peak 8 Mbit/s (1 us a byte), sustained 4 Mbit/s (2 us a byte), MBS `burst`.
    fn contract(burst: u64) -> Gcra {
        Gcra::new(GcraConfig {
            peak_bps: 8_000_000,
            sustained_bps: 4_000_000,
            burst_bytes: burst,
        })
    }

    fn us(n: u64) -> Instant {
        Instant::from_nanos(n * 1000)
    }

    /// Polices 1000-byte frames at the given times (in us); which conform.
    fn police(gcra: &mut Gcra, times_us: &[u64]) -> Vec<bool> {
        times_us.iter().map(|&t| gcra.police(us(t), 1000)).collect()
    }

    #[test]
    fn a_peak_rate_burst_conforms_for_mbs_bytes_then_every_other_frame() {
        // Frames every 1000 us (the peak rate). Sustained: I = 2000 us, BT = (MBS - 1)
        // * (2 - 1) us. With MBS = 3000, BT = 2999 us; TAT after frames at 0, 1, 2 ms
        // is 6 ms: the frame at 3 ms has 6 - 3 = 3 ms > BT and fails; at 4 ms, 2 ms <=
        // BT passes (TAT 8 ms); at 5 ms, 3 ms fails; at 6 ms, 2 ms passes ...
        let mut g = contract(3000);
        let times = [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000];
        let expect = [true, true, true, false, true, false, true, false, true];
        assert_eq!(police(&mut g, &times), expect);
        // One more byte of MBS lets the fourth frame through (BT = 3000 us).
        let mut g = contract(3001);
        let expect = [true, true, true, true, false, true, false, true, false];
        assert_eq!(police(&mut g, &times), expect);
    }

    #[test]
    fn frames_faster_than_the_peak_fail_the_peak_gcra() {
        // Every 500 us: the peak GCRA (T = 1000 us, tolerance 0) lets every other frame
        // through; those are at the peak rate, so a burst as large as any run passes
        // the sustained GCRA while the burst lasts.
        let mut g = contract(1_000_000);
        let times = [0, 500, 1000, 1500, 2000, 2500];
        let expect = [true, false, true, false, true, false];
        assert_eq!(police(&mut g, &times), expect);
    }

    #[test]
    fn the_sustained_rate_is_what_is_left_after_the_burst() {
        // MBS 1000 (one frame): BT = 999 us. At the sustained spacing (2000 us) every
        // frame conforms; at 1500 us the bucket fills by 500 us a frame until one fails.
        let mut g = contract(1000);
        let times: Vec<u64> = (0..6).map(|i| i * 2000).collect();
        assert_eq!(police(&mut g, &times), [true; 6]);
        let mut g = contract(1000);
        // TAT - t before each: 0, 500, 1000 (> 999: fail; TAT stays 4000), 0 (TAT
        // 6500), 500 (TAT 8500), 1000 (fail).
        let times = [0, 1500, 3000, 4500, 6000, 7500];
        let expect = [true, true, false, true, true, false];
        assert_eq!(police(&mut g, &times), expect);
    }

    #[test]
    fn a_shaper_sends_at_peak_for_the_burst_then_at_the_sustained_rate() {
        // Ten frames waiting at 0: MBS 3001 (BT 3000 us) gives departures at 0, 1, 2,
        // 3 ms (peak), then one every 2 ms (sustained): TAT is 8 ms after the fourth,
        // so the fifth may go at 8 - 3 = 5 ms.
        let mut g = contract(3001);
        let mut at = Instant::ZERO;
        let mut departures = Vec::new();
        for _ in 0..10 {
            at = g.earliest(at);
            g.accept(at, 1000);
            departures.push(at.as_nanos() / 1000);
        }
        assert_eq!(
            departures,
            [0, 1000, 2000, 3000, 5000, 7000, 9000, 11000, 13000, 15000]
        );
    }

    #[test]
    fn after_idle_time_the_full_burst_is_back() {
        let mut g = contract(3000);
        assert_eq!(
            police(&mut g, &[0, 1000, 2000, 3000]),
            [true, true, true, false]
        );
        // TAT 6 ms: by 6 ms the bucket is empty, and three frames go at the peak again.
        assert_eq!(
            police(&mut g, &[6000, 7000, 8000, 9000]),
            [true, true, true, false]
        );
    }

    #[test]
    fn rates_that_do_not_divide_evenly_stay_exact() {
        // 3 bytes at 7 bit/s peak and 3 bit/s sustained, MBS 2: increments 24/7 s and
        // 8 s, BT = (2 - 1) * 8 * (1/3 - 1/7) s = 32/21 s. After one frame at 0 the peak
        // GCRA allows the next at 24/7 s, the sustained one at 8 - 32/21 = 136/21 s =
        // 6.476190476.19 s: the nanosecond that contains it.
        let mut g = Gcra::new(GcraConfig {
            peak_bps: 7,
            sustained_bps: 3,
            burst_bytes: 2,
        });
        g.accept(Instant::ZERO, 3);
        assert_eq!(
            g.earliest(Instant::ZERO),
            Instant::from_nanos(6_476_190_476)
        );
        assert!(!g.conforms(Instant::from_nanos(6_476_190_475)));
        assert!(g.conforms(Instant::from_nanos(6_476_190_476)));
    }

    #[test]
    fn bad_contracts_are_refused() {
        let c = |peak, sustained, burst| GcraConfig {
            peak_bps: peak,
            sustained_bps: sustained,
            burst_bytes: burst,
        };
        assert_eq!(c(10, 0, 5).validate(), Err(GcraConfigError::ZeroSustained));
        assert_eq!(
            c(5, 10, 5).validate(),
            Err(GcraConfigError::PeakBelowSustained {
                peak_bps: 5,
                sustained_bps: 10
            })
        );
        assert_eq!(c(10, 10, 0).validate(), Err(GcraConfigError::ZeroBurst));
        assert_eq!(c(10, 10, 1).validate(), Ok(()));
    }
}
