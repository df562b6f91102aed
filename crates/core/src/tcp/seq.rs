//! TCP sequence numbers: 32-bit values compared and advanced modulo 2^32.
//!
//! RFC 9293 §3.4: "It is essential to remember that the actual sequence number space is
//! finite, though very large. This space ranges from 0 to 2^32 - 1. Since the space is
//! finite, all arithmetic dealing with sequence numbers must be performed modulo 2^32."
//!
//! Comparison follows RFC 1982 serial-number arithmetic: `a < b` when the signed 32-bit
//! difference `a - b` is negative. That is only meaningful for numbers less than 2^31
//! apart, which TCP guarantees for everything inside one window (windows are at most
//! 2^30 bytes, RFC 7323 §2.3).

use core::cmp::Ordering;
use core::fmt;
use core::ops::{Add, AddAssign, Sub, SubAssign};

/// A TCP sequence number. Arithmetic wraps modulo 2^32; ordering is serial-number
/// ordering (see the module docs), so it deliberately does not implement [`Ord`]: do not
/// key ordered collections with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// The number of bytes from `earlier` up to `self`, modulo 2^32. Never panics: if
    /// `earlier` is actually later, the result is the wrapped (huge) distance, so check
    /// the order first when that can happen.
    pub const fn distance_from(self, earlier: SeqNumber) -> usize {
        self.0.wrapping_sub(earlier.0) as usize
    }

    /// The signed difference `self - other` (RFC 1982): negative when `self` is before
    /// `other`. Meaningful only within 2^31.
    pub const fn signed_diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// The later of the two (serial-number order).
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self >= other { self } else { other }
    }

    /// The earlier of the two (serial-number order).
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self <= other { self } else { other }
    }

    /// Whether `start <= self < start + len`, evaluated modulo 2^32 (exact for any
    /// `len` up to 2^32; a zero `len` contains nothing). RFC 9293 §3.4 writes the
    /// receive-window test as "RCV.NXT =< SEG.SEQ < RCV.NXT+RCV.WND".
    pub fn in_window(self, start: SeqNumber, len: usize) -> bool {
        self.distance_from(start) < len
    }

    /// Whether `lo <= self <= hi` in serial-number order (both ends inclusive).
    pub fn between(self, lo: SeqNumber, hi: SeqNumber) -> bool {
        lo <= self && self <= hi
    }
}

impl From<u32> for SeqNumber {
    fn from(value: u32) -> SeqNumber {
        SeqNumber(value)
    }
}

impl From<SeqNumber> for u32 {
    fn from(value: SeqNumber) -> u32 {
        value.0
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Add<usize> for SeqNumber {
    type Output = SeqNumber;
    /// Advance by `rhs` bytes, modulo 2^32 (`rhs` itself is taken modulo 2^32).
    fn add(self, rhs: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(rhs as u32))
    }
}

impl AddAssign<usize> for SeqNumber {
    fn add_assign(&mut self, rhs: usize) {
        *self = *self + rhs;
    }
}

impl Sub<usize> for SeqNumber {
    type Output = SeqNumber;
    /// Go back by `rhs` bytes, modulo 2^32.
    fn sub(self, rhs: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs as u32))
    }
}

impl SubAssign<usize> for SeqNumber {
    fn sub_assign(&mut self, rhs: usize) {
        *self = *self - rhs;
    }
}

impl Sub<SeqNumber> for SeqNumber {
    type Output = usize;
    /// The same as [`SeqNumber::distance_from`]: wrapping, never panics.
    fn sub(self, rhs: SeqNumber) -> usize {
        self.distance_from(rhs)
    }
}

impl PartialOrd for SeqNumber {
    /// RFC 1982 order: by the sign of the wrapping difference. Numbers exactly 2^31 apart
    /// compare as "less" both ways; keep compared numbers within 2^31 of each other.
    fn partial_cmp(&self, other: &SeqNumber) -> Option<Ordering> {
        Some(self.signed_diff(*other).cmp(&0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEAR_TOP: SeqNumber = SeqNumber(u32::MAX - 10);

    #[test]
    fn arithmetic_wraps_around_2_pow_32() {
        let s = NEAR_TOP + 20;
        assert_eq!(s, SeqNumber(9));
        assert_eq!(s - 20, NEAR_TOP);
        assert_eq!(s - NEAR_TOP, 20);
        assert_eq!(s.distance_from(NEAR_TOP), 20);
        let mut t = NEAR_TOP;
        t += 11;
        assert_eq!(t, SeqNumber(0));
        t -= 1;
        assert_eq!(t, SeqNumber(u32::MAX));
    }

    #[test]
    fn distance_never_panics_and_wraps_backwards() {
        assert_eq!(SeqNumber(0).distance_from(SeqNumber(1)), u32::MAX as usize);
        assert_eq!(SeqNumber(5) - SeqNumber(5), 0);
    }

    #[test]
    fn comparison_is_serial_number_order() {
        assert!(NEAR_TOP < NEAR_TOP + 20);
        assert!(NEAR_TOP + 20 > NEAR_TOP);
        assert!(SeqNumber(0) > SeqNumber(u32::MAX));
        assert!(SeqNumber(0) < SeqNumber(0x7fff_ffff));
        assert!(SeqNumber(0) > SeqNumber(0x8000_0001));
        assert!(SeqNumber(7) <= SeqNumber(7) && SeqNumber(7) >= SeqNumber(7));
        assert_eq!(SeqNumber(3).signed_diff(SeqNumber(5)), -2);
    }

    #[test]
    fn max_min_across_wrap() {
        let a = NEAR_TOP;
        let b = NEAR_TOP + 100;
        assert_eq!(a.max(b), b);
        assert_eq!(b.max(a), b);
        assert_eq!(a.min(b), a);
        assert_eq!(b.min(a), a);
    }

    #[test]
    fn in_window_edges() {
        let start = NEAR_TOP;
        assert!(start.in_window(start, 1));
        assert!(!start.in_window(start, 0));
        assert!((start + 19).in_window(start, 20));
        assert!(!(start + 20).in_window(start, 20));
        assert!(!(start - 1).in_window(start, 20));
        assert!(SeqNumber(123).in_window(SeqNumber(124), 1 << 32));
    }

    #[test]
    fn between_is_inclusive_across_wrap() {
        let lo = NEAR_TOP;
        let hi = NEAR_TOP + 30;
        assert!(lo.between(lo, hi));
        assert!(hi.between(lo, hi));
        assert!(SeqNumber(2).between(lo, hi));
        assert!(!(hi + 1).between(lo, hi));
        assert!(!(lo - 1).between(lo, hi));
    }

    #[test]
    fn display_and_conversions() {
        assert_eq!(alloc::format!("{}", SeqNumber(42)), "42");
        assert_eq!(u32::from(SeqNumber::from(9)), 9);
    }
}
