//! Pacing: data leaves at a rate instead of in line-rate bursts. The rate comes from
//! the congestion controller ([`CongestionControl::pacing_rate`], BBR sets its own) or,
//! for the window-based ones, as Linux computes it: 2 x cwnd / SRTT in slow start, 1.2 x
//! cwnd / SRTT after. The next departure time is data ([`Pacer::next_send`]); a
//! connection that must wait arms [`Timer::Pace`](super::timer::Timer::Pace) for it.
//!
//! Data leaves in releases of about one send quantum (1 ms at the pacing rate, see
//! [`burst_size`]), as Linux's pacing sends one `tcp_tso_autosize` skb per pacing
//! timer whether or not the device cuts it in hardware: within a release the schedule
//! may run up to a quantum ahead of now ([`Release::ahead`]), so a release of segments
//! of one MSS each carries as much as one TSO segment would, and a driver's timer needs
//! one wake-up per quantum rather than one per segment. A release that starts late makes
//! the lateness good, up to half a quantum ([`Release::credit`], Linux's allowance for
//! "OS jitter" in `tcp_update_skb_after_send`): a driver in real time wakes some tens
//! of microseconds after the deadline, and without the credit every release would lose
//! that much, the delivery rate would fall below the pacing rate, and BBR, whose pacing
//! rate follows the delivery rate, would spiral down.
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
    /// When the data sent so far has drained at the pacing rate: the schedule. The
    /// next data segment may go once it is at most [`Release::ahead`] after now (None:
    /// at once).
    pub next_send: Option<Instant>,
}

/// How much one release of paced data carries, as time at the pacing rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Release {
    /// A segment may go while the schedule ([`Pacer::next_send`]) is at most this far
    /// ahead of now: the quantum less one segment, so a release carries about one
    /// quantum (and a TSO segment of a whole quantum goes alone).
    pub ahead: Duration,
    /// How far behind now the schedule may stay when a release starts late: half the
    /// quantum. Time not used beyond that is not saved up (no burst after a pause).
    pub credit: Duration,
}

impl Release {
    /// A release of `quantum` bytes in segments of `mss` at `rate` bytes per second
    /// (both times zero at rate 0, when nothing is paced).
    pub fn new(rate: u64, quantum: usize, mss: usize) -> Release {
        Release {
            ahead: drain_time(quantum.saturating_sub(mss), rate),
            credit: drain_time(quantum / 2, rate),
        }
    }
}

/// How long `bytes` take at `rate` bytes per second (zero at rate 0).
fn drain_time(bytes: usize, rate: u64) -> Duration {
    if rate == 0 {
        return Duration::ZERO;
    }
    let nanos = (bytes as u128 * 1_000_000_000 / u128::from(rate)).min(u128::from(u64::MAX));
    Duration::from_nanos(nanos as u64)
}

impl Pacer {
    /// Whether a data segment may go at `now` in a release that may run `ahead` of
    /// now ([`Release::ahead`]).
    pub fn may_send(&self, now: Instant, ahead: Duration) -> bool {
        self.next_send.is_none_or(|at| at <= now + ahead)
    }

    /// `bytes` went at `now` at `rate` bytes per second: the schedule moves on by
    /// their time at that rate, from where it was, or from `credit` before `now` if
    /// it was further behind ([`Release::credit`]).
    pub fn on_send(&mut self, now: Instant, bytes: usize, rate: u64, credit: Duration) {
        if rate == 0 {
            self.next_send = None;
            return;
        }
        let start = self.next_send.map_or(now, |at| at.max(now - credit));
        self.next_send = Some(start + drain_time(bytes, rate));
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
        let none = Duration::ZERO;
        assert!(p.may_send(t0, none));
        // 12_500 bytes at 12.5 MB/s (100 Mbit/s): 1 ms.
        p.on_send(t0, 12_500, 12_500_000, none);
        assert_eq!(p.next_send, Some(Instant::from_millis(11)));
        assert!(!p.may_send(Instant::from_nanos(10_999_999), none));
        assert!(p.may_send(Instant::from_millis(11), none));
        // Sent late without credit: the next departure counts from the actual one.
        p.on_send(Instant::from_millis(20), 12_500, 12_500_000, none);
        assert_eq!(p.next_send, Some(Instant::from_millis(21)));
    }

    /// Sends segments of `mss` at `now` while the pacer lets them go; how many went.
    fn release(p: &mut Pacer, now: Instant, mss: usize, rate: u64, r: Release) -> usize {
        let mut sent = 0;
        while p.may_send(now, r.ahead) {
            p.on_send(now, mss, rate, r.credit);
            sent += 1;
        }
        sent
    }

    #[test]
    fn a_release_carries_a_quantum_and_makes_lateness_good() {
        // 100 Mbit/s, a quantum of 12_500 bytes in segments of 1_250: a release may
        // run 0.9 ms ahead and stay up to 0.5 ms behind.
        let (rate, mss) = (12_500_000, 1_250);
        let r = Release::new(rate, 12_500, mss);
        assert_eq!(r.ahead, Duration::from_micros(900));
        assert_eq!(r.credit, Duration::from_micros(500));
        let mut p = Pacer::default();
        // Ten segments at once, the schedule then 1 ms ahead: the next release's time.
        assert_eq!(release(&mut p, Instant::from_millis(10), mss, rate, r), 10);
        assert_eq!(p.next_send, Some(Instant::from_millis(11)));
        // Woken 0.2 ms late: the release makes the 0.2 ms good (two more segments), so
        // the schedule holds: 22 segments, 2.2 ms of them, since 10 ms.
        let late = Instant::from_nanos(11_200_000);
        assert_eq!(release(&mut p, late, mss, rate, r), 12);
        assert_eq!(p.next_send, Some(Instant::from_nanos(12_200_000)));
        // After a pause, at most half a quantum is made good.
        assert_eq!(release(&mut p, Instant::from_millis(50), mss, rate, r), 15);
        // A TSO segment of a whole quantum goes alone.
        let mut p = Pacer::default();
        p.on_send(Instant::from_millis(10), 12_500, rate, r.credit);
        assert!(!p.may_send(Instant::from_millis(10), r.ahead));
        // No rate, no pacing.
        assert_eq!(Release::new(0, 12_500, mss).ahead, Duration::ZERO);
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
