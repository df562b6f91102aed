//! A small deterministic pseudo-random number generator: xoshiro256** seeded through
//! SplitMix64 (both by Blackman and Vigna; the reference code is theirs, "xoshiro /
//! xoroshiro generators and the PRNG shootout").
//!
//! Not cryptographic. What it promises is reproducibility: the same seed gives the same
//! sequence on every platform and every run, so a simulation or an impaired link replays
//! exactly from its seed.

/// One step of SplitMix64 (the core's, re-exported): advances `state` and returns the
/// next output. Used to expand a single `u64` seed into xoshiro's 256-bit state (a zero
/// state would be a fixed point).
pub use impnet_core::rng::splitmix64;

/// A seeded xoshiro256** generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    /// Never all zero: SplitMix64 seeding cannot produce four zero words in a row.
    state: [u64; 4],
}

impl Rng {
    /// A generator whose whole sequence is determined by `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        let state = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng { state }
    }

    /// A generator with exactly this internal state, for checking against reference
    /// vectors. Returns `None` for the all-zero state, from which xoshiro never leaves.
    pub fn from_state(state: [u64; 4]) -> Option<Rng> {
        (state != [0; 4]).then_some(Rng { state })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform float in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[0, n)`, without modulo bias (Lemire's multiply-and-reject).
    /// Returns 0 when `n` is 0, so callers with an empty range need no special case.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let threshold = n.wrapping_neg() % n;
        loop {
            let product = u128::from(self.next_u64()) * u128::from(n);
            if (product as u64) >= threshold {
                return (product >> 64) as u64;
            }
        }
    }

    /// True with probability `p`. Draws exactly one value whatever `p` is, so the
    /// stream's position after a call does not depend on the probability asked.
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// A new generator seeded from this one: an independent stream for a sub-component,
    /// so that drawing from one does not shift the other's sequence.
    pub fn fork(&mut self) -> Rng {
        Rng::new(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xoshiro256starstar_matches_reference_vectors() {
        // Reference C code with s = {1, 2, 3, 4}.
        let mut rng = Rng::from_state([1, 2, 3, 4]).unwrap();
        let expected = [11_520u64, 0, 1_509_978_240, 1_215_971_899_390_074_240];
        for e in expected {
            assert_eq!(rng.next_u64(), e);
        }
        assert!(Rng::from_state([0; 4]).is_none());
    }

    #[test]
    fn same_seed_same_sequence_different_seed_different_sequence() {
        let a: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..100).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::new(42);
            (0..100).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = Rng::new(43);
            (0..100).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn next_f64_is_in_unit_interval_with_mean_one_half() {
        let mut r = Rng::new(7);
        let n = 100_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let x = r.next_f64();
            assert!((0.0..1.0).contains(&x));
            sum += x;
        }
        let mean = sum / f64::from(n);
        assert!((mean - 0.5).abs() < 0.01, "mean {mean}");
    }

    #[test]
    fn below_stays_in_range_and_covers_it_evenly() {
        let mut r = Rng::new(9);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            let v = r.below(6);
            counts[v as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "counts {counts:?}");
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.below(1), 0);
    }

    #[test]
    fn chance_extremes_and_fixed_draw_count() {
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| !r.chance(0.0)));
        assert!((0..1000).all(|_| r.chance(1.0)));
        let mut a = Rng::new(5);
        let mut b = Rng::new(5);
        a.chance(0.0);
        b.chance(0.9);
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn fork_gives_an_independent_reproducible_stream() {
        let mut parent1 = Rng::new(3);
        let mut parent2 = Rng::new(3);
        let mut child1 = parent1.fork();
        let mut child2 = parent2.fork();
        assert_eq!(child1.next_u64(), child2.next_u64());
        assert_ne!(child1.next_u64(), parent1.next_u64());
    }
}
