//! The stack's generator for IP idents and UDP ports: SplitMix64 seeded from the stack's
//! [`Secret`](crate::Secret).
//!
//! Same secret, same IP idents, same ephemeral ports, same bytes on the wire. Not
//! cryptographic: TCP keys its ISNs with the secret itself (RFC 6528).

/// SplitMix64's increment: 2^64 divided by the golden ratio, rounded to odd. Each step
/// adds it to the state (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014).
pub const SPLITMIX64_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function: a bijective 64-bit mixer (Stafford's "Mix13" variant
/// of the MurmurHash3 finaliser), on its own a good hash of one word.
pub const fn splitmix64_mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One SplitMix64 step: advances `state` by [`SPLITMIX64_GAMMA`] and returns the mix of
/// the new state. The one implementation in the tree: [`Rng`], the TCP ISN tests, the
/// simulator's seeds and the devices' xoshiro seeding (`impnet_phy::rng`) all call it,
/// so the same seed gives the same sequence everywhere.
pub const fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(SPLITMIX64_GAMMA);
    splitmix64_mix(*state)
}

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
        splitmix64(&mut self.state)
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
    fn splitmix64_matches_reference_vectors() {
        // The reference C implementation (prng.di.unimi.it/splitmix64.c) from state 0.
        let mut state = 0;
        assert_eq!(splitmix64(&mut state), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut state), 0x6e78_9e6a_a1b9_65f4);
        // And seeded with 1234567.
        let mut state = 1_234_567;
        let expected = [
            6_457_827_717_110_365_317u64,
            3_203_168_211_198_807_973,
            9_817_491_932_198_370_423,
            4_593_380_528_125_082_431,
            16_408_922_859_458_223_821,
        ];
        for e in expected {
            assert_eq!(splitmix64(&mut state), e);
        }
        assert_eq!(Rng::new(1_234_567).next_u64(), expected[0]);
    }

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
