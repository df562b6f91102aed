//! Cross traffic on a shared link: other users' transfers, on and off.
//!
//! The model ([`CrossTraffic`]): an on/off source whose periods have exponentially
//! distributed lengths (means `mean_on` and `mean_off`), taking `rate_bps` of the
//! link while it is on. Its traffic interleaves with the link's own frames finely, as
//! other virtual circuits' cells do on an ATM port, so a frame that starts while the
//! source is on is serialised at the rate left over, `rate - cross`; the source's state
//! at the frame's start decides. The periods are drawn from their own random stream of
//! the link's seed and depend on time alone, not on the link's own traffic.

use impnet_core::Duration;

use crate::rng::Rng;

/// Cross traffic sharing a link's transmitter (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossTraffic {
    /// Bits per second the cross traffic takes while on; below the link's rate.
    pub rate_bps: u64,
    /// Mean length of an on period.
    pub mean_on: Duration,
    /// Mean length of an off period.
    pub mean_off: Duration,
}

impl CrossTraffic {
    /// The long-run share of time the source is on.
    pub fn duty(&self) -> f64 {
        let on = self.mean_on.as_nanos() as f64;
        let off = self.mean_off.as_nanos() as f64;
        on / (on + off)
    }

    /// The long-run rate the cross traffic takes, bit/s.
    pub fn mean_bps(&self) -> f64 {
        self.duty() * self.rate_bps as f64
    }
}

/// The source's state: on or off, and until when.
#[derive(Debug, Clone)]
pub(super) struct CrossState {
    config: CrossTraffic,
    rng: Rng,
    on: bool,
    /// When the current period ends, in nanoseconds.
    until: u64,
}

impl CrossState {
    /// A source started in its long-run state: on with probability
    /// [`CrossTraffic::duty`] (the periods are memoryless, so the first one is drawn
    /// like any other).
    pub(super) fn new(config: CrossTraffic, mut rng: Rng) -> CrossState {
        let on = rng.chance(config.duty());
        let mut state = CrossState {
            config,
            rng,
            on,
            until: 0,
        };
        state.until = state.period();
        state
    }

    /// A period's length in nanoseconds (at least 1), for the current state.
    fn period(&mut self) -> u64 {
        let mean = if self.on {
            self.config.mean_on
        } else {
            self.config.mean_off
        };
        let u = self.rng.next_f64();
        let ns = -(1.0 - u).ln() * mean.as_nanos() as f64;
        (ns.round() as u64).max(1)
    }

    /// The cross traffic's rate at `at` nanoseconds (calls must not go back in time).
    pub(super) fn rate_at(&mut self, at: u64) -> u64 {
        while self.until <= at {
            self.on = !self.on;
            let next = self.period();
            self.until = self.until.saturating_add(next);
        }
        if self.on { self.config.rate_bps } else { 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> CrossTraffic {
        CrossTraffic {
            rate_bps: 200_000_000,
            mean_on: Duration::from_millis(300),
            mean_off: Duration::from_millis(700),
        }
    }

    #[test]
    fn the_share_of_time_on_is_the_duty_and_periods_vary() {
        let config = source();
        let mut state = CrossState::new(config, Rng::new(7));
        let step = 10_000_000; // 10 ms
        let steps = 300_000u64; // 3000 s
        let mut on = 0u64;
        let mut switches = 0;
        let mut last = state.rate_at(0);
        for i in 0..steps {
            let rate = state.rate_at(i * step);
            on += u64::from(rate > 0);
            switches += u32::from(rate != last);
            last = rate;
            assert!(rate == 0 || rate == config.rate_bps);
        }
        let share = on as f64 / steps as f64;
        assert!((share - config.duty()).abs() < 0.03, "{share}");
        // About two switches a second (a 1 s cycle; a few periods are shorter than a
        // step and go unseen).
        assert!((5000..6600).contains(&switches), "{switches}");
        assert!((config.mean_bps() - 60e6).abs() < 1.0);
    }

    #[test]
    fn the_same_seed_gives_the_same_periods_and_another_seed_others() {
        let at = |seed: u64| {
            let mut s = CrossState::new(source(), Rng::new(seed));
            (0..2000u64)
                .map(|i| s.rate_at(i * 10_000_000))
                .collect::<Vec<_>>()
        };
        assert_eq!(at(1), at(1));
        assert_ne!(at(1), at(2));
    }
}
