//! Virtual-or-real time as integer nanoseconds. The core never reads a clock: drivers
//! pass `now` in, from `std::time` (the runtime) or from a virtual clock (the simulator).
//!
//! Both types keep their nanoseconds bit-inverted in a `NonZeroU64`, so that
//! `Option<Instant>` and `Option<Duration>` take 8 bytes rather than 16 (a connection holds
//! several). The cost is one value out of 2^64: `u64::MAX` nanoseconds (584 years) is
//! represented as `u64::MAX - 1`.

use core::cmp::Ordering;
use core::fmt;
use core::num::NonZeroU64;
use core::ops::{Add, AddAssign, Sub, SubAssign};

/// `n` nanoseconds as stored: inverted, with `u64::MAX` (stored as 0) clamped to one less.
#[inline(always)]
const fn store(n: u64) -> NonZeroU64 {
    match NonZeroU64::new(!n) {
        Some(v) => v,
        None => NonZeroU64::MIN,
    }
}

/// A span of time in nanoseconds.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Duration(NonZeroU64);

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(store(0));
    /// The longest representable span.
    pub const MAX: Duration = Duration(NonZeroU64::MIN);

    /// A span of `n` nanoseconds.
    #[inline(always)]
    pub const fn from_nanos(n: u64) -> Duration {
        Duration(store(n))
    }
    /// A span of `n` microseconds (saturating).
    pub const fn from_micros(n: u64) -> Duration {
        Duration::from_nanos(n.saturating_mul(1_000))
    }
    /// A span of `n` milliseconds (saturating).
    pub const fn from_millis(n: u64) -> Duration {
        Duration::from_nanos(n.saturating_mul(1_000_000))
    }
    /// A span of `n` seconds (saturating).
    pub const fn from_secs(n: u64) -> Duration {
        Duration::from_nanos(n.saturating_mul(1_000_000_000))
    }
    /// Whole nanoseconds.
    #[inline(always)]
    pub const fn as_nanos(self) -> u64 {
        !self.0.get()
    }
    /// Whole microseconds.
    pub const fn as_micros(self) -> u64 {
        self.as_nanos() / 1_000
    }
    /// Whole milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.as_nanos() / 1_000_000
    }
    /// Seconds as a float, for reports.
    pub fn as_secs_f64(self) -> f64 {
        self.as_nanos() as f64 / 1e9
    }
    /// Sum, saturating at [`Duration::MAX`].
    #[inline]
    pub const fn saturating_add(self, other: Duration) -> Duration {
        Duration::from_nanos(self.as_nanos().saturating_add(other.as_nanos()))
    }
    /// Difference, saturating at zero.
    #[inline]
    pub const fn saturating_sub(self, other: Duration) -> Duration {
        Duration::from_nanos(self.as_nanos().saturating_sub(other.as_nanos()))
    }
    /// Product, saturating at [`Duration::MAX`].
    #[inline]
    pub const fn saturating_mul(self, k: u64) -> Duration {
        Duration::from_nanos(self.as_nanos().saturating_mul(k))
    }
}

impl Default for Duration {
    fn default() -> Duration {
        Duration::ZERO
    }
}

impl PartialOrd for Duration {
    #[inline(always)]
    fn partial_cmp(&self, other: &Duration) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Duration {
    /// Inverted storage: the larger stored value is the shorter span.
    #[inline(always)]
    fn cmp(&self, other: &Duration) -> Ordering {
        other.0.cmp(&self.0)
    }
}

impl fmt::Debug for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Duration").field(&self.as_nanos()).finish()
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        self.saturating_add(rhs)
    }
}

impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        self.saturating_sub(rhs)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.as_nanos();
        if n >= 1_000_000_000 {
            write!(f, "{:.3}s", self.as_secs_f64())
        } else if n >= 1_000_000 {
            write!(f, "{:.3}ms", n as f64 / 1e6)
        } else if n >= 1_000 {
            write!(f, "{:.3}us", n as f64 / 1e3)
        } else {
            write!(f, "{}ns", n)
        }
    }
}

/// A point in time: nanoseconds since an epoch the driver chose (the simulator's start,
/// or the runtime's start). Only differences between instants mean anything.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Instant(NonZeroU64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(store(0));
    /// The instant `n` nanoseconds after the epoch.
    #[inline(always)]
    pub const fn from_nanos(n: u64) -> Instant {
        Instant(store(n))
    }
    /// The instant `n` milliseconds after the epoch.
    pub const fn from_millis(n: u64) -> Instant {
        Instant::from_nanos(n.saturating_mul(1_000_000))
    }
    /// Nanoseconds since the epoch.
    #[inline(always)]
    pub const fn as_nanos(self) -> u64 {
        !self.0.get()
    }
    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.as_nanos() / 1_000_000
    }
    /// The earlier of two optional deadlines (`None` is no deadline, later than any).
    /// Branch-free: with the inverted storage the earlier instant is the larger stored
    /// value and `None` is stored as 0, so this is a plain maximum of the raw words
    /// (drivers ask `poll_timeout` after every batch, which folds half a dozen).
    #[inline(always)]
    pub fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
        let raw = |t: Option<Instant>| t.map_or(0, |t| t.0.get());
        NonZeroU64::new(raw(a).max(raw(b))).map(Instant)
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    #[inline]
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        // Inverted: `earlier`'s stored value is the larger one.
        Duration::from_nanos(earlier.0.get().saturating_sub(self.0.get()))
    }
}

impl Default for Instant {
    fn default() -> Instant {
        Instant::ZERO
    }
}

impl PartialOrd for Instant {
    #[inline(always)]
    fn partial_cmp(&self, other: &Instant) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Instant {
    /// Inverted storage: the larger stored value is the earlier instant.
    #[inline(always)]
    fn cmp(&self, other: &Instant) -> Ordering {
        other.0.cmp(&self.0)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Instant").field(&self.as_nanos()).finish()
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn add(self, rhs: Duration) -> Instant {
        Instant::from_nanos(self.as_nanos().saturating_add(rhs.as_nanos()))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    #[inline]
    fn sub(self, rhs: Duration) -> Instant {
        Instant::from_nanos(self.as_nanos().saturating_sub(rhs.as_nanos()))
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}

impl Sub for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_nanos() as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_takes_the_earlier_deadline_and_none_as_never() {
        let (early, late) = (Instant::ZERO, Instant::from_millis(7));
        assert_eq!(Instant::earliest(Some(early), Some(late)), Some(early));
        assert_eq!(Instant::earliest(Some(late), Some(early)), Some(early));
        assert_eq!(Instant::earliest(None, Some(late)), Some(late));
        assert_eq!(Instant::earliest(Some(late), None), Some(late));
        assert_eq!(Instant::earliest(None, None), None);
        let end = Instant::from_nanos(u64::MAX);
        assert_eq!(Instant::earliest(Some(end), None), Some(end));
        assert_eq!(Instant::earliest(Some(end), Some(late)), Some(late));
    }

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let t = Instant::from_millis(5);
        assert_eq!((t + Duration::from_millis(3)).as_millis(), 8);
        assert_eq!(t - Instant::from_millis(9), Duration::ZERO);
        assert_eq!(
            Instant::from_nanos(u64::MAX) + Duration::from_secs(1),
            Instant::from_nanos(u64::MAX)
        );
        assert_eq!(Duration::from_secs(u64::MAX), Duration::MAX);
        assert_eq!(Duration::MAX.as_nanos(), u64::MAX - 1);
    }

    #[test]
    fn options_take_no_more_room_and_order_is_kept() {
        assert_eq!(core::mem::size_of::<Option<Instant>>(), 8);
        assert_eq!(core::mem::size_of::<Option<Duration>>(), 8);
        let (a, b) = (Instant::from_nanos(3), Instant::from_nanos(7));
        assert!(a < b && Instant::ZERO < a && b.max(a) == b);
        assert_eq!(b - a, Duration::from_nanos(4));
        assert!(
            Duration::ZERO < Duration::from_nanos(1) && Duration::from_nanos(1) < Duration::MAX
        );
        assert_eq!(Instant::default(), Instant::ZERO);
        assert_eq!(Duration::default().as_nanos(), 0);
    }
}
