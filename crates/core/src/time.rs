//! Virtual-or-real time as integer nanoseconds. The core never reads a clock: drivers
//! pass `now` in, from `std::time` (the runtime) or from a virtual clock (the simulator).

use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};

/// A span of time in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(u64);

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);
    /// The longest representable span.
    pub const MAX: Duration = Duration(u64::MAX);

    /// A span of `n` nanoseconds.
    pub const fn from_nanos(n: u64) -> Duration {
        Duration(n)
    }
    /// A span of `n` microseconds (saturating).
    pub const fn from_micros(n: u64) -> Duration {
        Duration(n.saturating_mul(1_000))
    }
    /// A span of `n` milliseconds (saturating).
    pub const fn from_millis(n: u64) -> Duration {
        Duration(n.saturating_mul(1_000_000))
    }
    /// A span of `n` seconds (saturating).
    pub const fn from_secs(n: u64) -> Duration {
        Duration(n.saturating_mul(1_000_000_000))
    }
    /// Whole nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Whole microseconds.
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    /// Whole milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    /// Seconds as a float, for reports.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Sum, saturating at [`Duration::MAX`].
    pub const fn saturating_add(self, other: Duration) -> Duration {
        Duration(self.0.saturating_add(other.0))
    }
    /// Difference, saturating at zero.
    pub const fn saturating_sub(self, other: Duration) -> Duration {
        Duration(self.0.saturating_sub(other.0))
    }
    /// Product, saturating at [`Duration::MAX`].
    pub const fn saturating_mul(self, k: u64) -> Duration {
        Duration(self.0.saturating_mul(k))
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
        if self.0 >= 1_000_000_000 {
            write!(f, "{:.3}s", self.as_secs_f64())
        } else if self.0 >= 1_000_000 {
            write!(f, "{:.3}ms", self.0 as f64 / 1e6)
        } else if self.0 >= 1_000 {
            write!(f, "{:.3}us", self.0 as f64 / 1e3)
        } else {
            write!(f, "{}ns", self.0)
        }
    }
}

/// A point in time: nanoseconds since an epoch the driver chose (the simulator's start,
/// or the runtime's start). Only differences between instants mean anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(0);
    /// The instant `n` nanoseconds after the epoch.
    pub const fn from_nanos(n: u64) -> Instant {
        Instant(n)
    }
    /// The instant `n` milliseconds after the epoch.
    pub const fn from_millis(n: u64) -> Instant {
        Instant(n.saturating_mul(1_000_000))
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_sub(rhs.0))
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
        write!(f, "{:.6}s", self.0 as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let t = Instant::from_millis(5);
        assert_eq!((t + Duration::from_millis(3)).as_millis(), 8);
        assert_eq!(t - Instant::from_millis(9), Duration::ZERO);
        assert_eq!(
            Instant::from_nanos(u64::MAX) + Duration::from_secs(1),
            Instant::from_nanos(u64::MAX)
        );
        assert_eq!(Duration::from_secs(u64::MAX).as_nanos(), u64::MAX);
    }
}
