//! The stack's generator for IP idents and UDP ports: SplitMix64 seeded from the stack's
//! [`Secret`](crate::Secret).
//!
//! Same secret, same IP idents, same ephemeral ports, same bytes on the wire. Not
//! cryptographic: TCP keys its ISNs with the secret itself (RFC 6528).

/// SplitMix64 (Steele, Lea, Flood 2014): one 64-bit state word, full period.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator whose whole output is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next 16 random bits.
    pub fn next_u16(&mut self) -> u16 {
        (self.next_u64() >> 48) as u16
    }

    /// A value in `low..=high` (`low <= high`), by widening multiplication (no modulo bias
    /// worth mentioning for ranges this small).
    pub fn in_range(&mut self, low: u32, high: u32) -> u32 {
        let span = u64::from(high - low) + 1;
        low + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }

    #[test]
    fn in_range_stays_in_range() {
        let mut rng = Rng::new(3);
        let mut seen_low = false;
        let mut seen_high = false;
        for _ in 0..10_000 {
            let v = rng.in_range(10, 13);
            assert!((10..=13).contains(&v));
            seen_low |= v == 10;
            seen_high |= v == 13;
        }
        assert!(seen_low && seen_high);
    }
}
