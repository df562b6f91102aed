//! Pacing: data leaves at a rate instead of in line-rate bursts. The rate comes from
//! the congestion controller ([`CongestionControl::pacing_rate`], BBR sets its own) or,
//! for the window-based ones, as Linux computes it: 2 x cwnd / SRTT in slow start, 1.2 x
//! cwnd / SRTT after. The next departure time is data ([`Pacer::next_send`]); a
//! connection that must wait arms [`Timer::Pace`](super::timer::Timer::Pace) for it.
//!
//! [`CongestionControl::pacing_rate`]: super::cc::CongestionControl::pacing_rate

use crate::time::{Duration, Instant};

/// How much data one burst may carry: about 1 ms at the pacing rate (BBR's send
/// quantum), at least two segments, at most 64 KB.
pub(crate) const BURST_TIME: Duration = Duration::from_millis(1);
/// The largest burst.
const MAX_BURST: usize = 64 * 1024;

/// One connection's pacing state.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Pacer {
    /// The earliest time the next data segment may go (None: at once).
    pub next_send: Option<Instant>,
}

impl Pacer {
    /// Whether a data segment may go at `now`.
    pub fn may_send(&self, now: Instant) -> bool {
        self.next_send.is_none_or(|at| at <= now)
    }

    /// `bytes` went at `now` at `rate` bytes per second: the next may go once they
    /// have drained at that rate. Time not used since the last departure is not
    /// saved up (no burst after a pause).
    pub fn on_send(&mut self, now: Instant, bytes: usize, rate: u64) {
        if rate == 0 {
            self.next_send = None;
            return;
        }
        let start = self.next_send.map_or(now, |at| at.max(now));
        let nanos = (bytes as u128 * 1_000_000_000 / u128::from(rate)).min(u128::from(u64::MAX));
        self.next_send = Some(start + Duration::from_nanos(nanos as u64));
    }
}

/// A window-based controller's pacing rate in bytes per second, as Linux's
/// `tcp_update_pacing_rate`: `cwnd / srtt` times 2 in slow start, 1.2 after.
pub(crate) fn window_rate(cwnd: usize, srtt: Duration, slow_start: bool) -> u64 {
    let nanos = u128::from(srtt.as_nanos().max(1));
    let gain = if slow_start { 20 } else { 12 };
    (cwnd as u128 * gain * 100_000_000 / nanos).min(u128::from(u64::MAX)) as u64
}

/// The payload of one burst at `rate` bytes per second: about [`BURST_TIME`] of data,
/// at least two segments of `mss`, at most 64 KB.
pub(crate) fn burst_size(rate: u64, mss: usize) -> usize {
    let per_burst = (u128::from(rate) * u128::from(BURST_TIME.as_nanos()) / 1_000_000_000) as usize;
    per_burst.min(MAX_BURST).max(2 * mss)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn departures_are_spaced_by_size_over_rate() {
        let mut p = Pacer::default();
        let t0 = Instant::from_millis(10);
        assert!(p.may_send(t0));
        // 12_500 bytes at 12.5 MB/s (100 Mbit/s): 1 ms.
        p.on_send(t0, 12_500, 12_500_000);
        assert_eq!(p.next_send, Some(Instant::from_millis(11)));
        assert!(!p.may_send(Instant::from_nanos(10_999_999)));
        assert!(p.may_send(Instant::from_millis(11)));
        // Sent late: the next departure counts from the actual one.
        p.on_send(Instant::from_millis(20), 12_500, 12_500_000);
        assert_eq!(p.next_send, Some(Instant::from_millis(21)));
    }

    #[test]
    fn window_rate_and_burst_size() {
        // 100 KB per 100 ms is 1 MB/s; 2x in slow start, 1.2x after.
        assert_eq!(
            window_rate(100_000, Duration::from_millis(100), true),
            2_000_000
        );
        assert_eq!(
            window_rate(100_000, Duration::from_millis(100), false),
            1_200_000
        );
        assert_eq!(burst_size(12_500_000, 1448), 12_500);
        assert_eq!(burst_size(1_000_000, 1448), 2 * 1448);
        assert_eq!(burst_size(1_000_000_000, 1448), 64 * 1024);
    }
}
