//! How much of the congestion window the sender used: the window-based controllers grow
//! cwnd only when the window, not the application or the receiver, limited what was
//! sent (RFC 9438 §5.8, RFC 7661 §4.3, Linux's `tcp_is_cwnd_limited`).
//!
//! The connection keeps a [`UsageTracker`], told of every send, and hands its
//! [`CwndUsage`] to [`on_ack`](super::CongestionControl::on_ack). A leaf: sequence
//! numbers and bytes only.

use crate::tcp::seq::SeqNumber;

/// What the sender did with the window over the current window of data (from the send
/// that began it until SND.UNA passes what was sent then), as Linux's `is_cwnd_limited`
/// and `max_packets_out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CwndUsage {
    /// The congestion window limited a send in this window of data: less than a
    /// segment of it was left after a send (Linux counts packets: a window of ten
    /// packets is full with ten, small or not), or it held data back.
    pub limited: bool,
    /// The most bytes outstanding (FlightSize) after a send in this window of data.
    pub max_flight: usize,
}

impl CwndUsage {
    /// A sender that filled its window (what a bulk transfer does).
    pub const LIMITED: CwndUsage = CwndUsage {
        limited: true,
        max_flight: 0,
    };

    /// A sender that never filled its window and had at most `max_flight` bytes out.
    pub const fn app_limited(max_flight: usize) -> CwndUsage {
        CwndUsage {
            limited: false,
            max_flight,
        }
    }

    /// Whether an ACK may grow `cwnd` (Linux's `tcp_is_cwnd_limited`): the window
    /// limited the sender, or, in slow start, cwnd is still below twice the most that
    /// was in flight. Slow start doubles what the path carried in a round trip (RFC
    /// 5681 §3.1: cwnd grows by an SMSS for each SMSS acknowledged), so a round that
    /// carried `n` bytes may end with a window of `2n` however the window compares with
    /// the flight when each ACK arrives; no further: a window the sender did not use
    /// proves nothing about the path (RFC 7661 §4.3; RFC 9438 §5.8: "CUBIC does not
    /// increase its congestion window if a flow is currently application limited").
    pub fn allows_growth(self, cwnd: usize, slow_start: bool) -> bool {
        self.limited || (slow_start && cwnd < self.max_flight.saturating_mul(2))
    }
}

/// The connection's record of [`CwndUsage`], updated on every send (Linux's
/// `tcp_cwnd_validate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UsageTracker {
    /// The window limited a send since `until` was set.
    limited: bool,
    /// The most bytes outstanding after a send since `until` was set (a connection's
    /// flight stays below 4 GiB: windows are at most 2^30 bytes, RFC 7323 §2.3).
    max_flight: u32,
    /// SND.NXT when the record was last reset: once SND.UNA reaches it, that window of
    /// data is acknowledged and the next send starts a new record.
    until: SeqNumber,
}

impl UsageTracker {
    /// A record starting at SND.UNA `snd_una`, before anything is sent.
    pub(crate) fn new(snd_una: SeqNumber) -> UsageTracker {
        UsageTracker {
            limited: false,
            max_flight: 0,
            until: snd_una,
        }
    }

    /// The usage to judge an ACK by.
    pub(crate) fn usage(&self) -> CwndUsage {
        CwndUsage {
            limited: self.limited,
            max_flight: self.max_flight as usize,
        }
    }

    /// A send (or a send the window held back, `limited` with nothing sent) left
    /// `flight` bytes outstanding with SND.NXT at `snd_nxt` and SND.UNA at `snd_una`.
    /// As Linux: the strongest signal of the window of data is kept: limited once
    /// limited, else the largest flight; a new window of data starts a new record.
    pub(crate) fn on_send(
        &mut self,
        limited: bool,
        flight: usize,
        snd_nxt: SeqNumber,
        snd_una: SeqNumber,
    ) {
        let flight = u32::try_from(flight).unwrap_or(u32::MAX);
        if snd_una >= self.until || limited || (!self.limited && flight > self.max_flight) {
            self.limited = limited;
            self.max_flight = flight;
            self.until = snd_nxt;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: usize = 1000;

    #[test]
    fn slow_start_grows_to_twice_the_largest_flight() {
        // Nine segments out under a window of ten: slow start may reach 18, no more.
        let usage = CwndUsage::app_limited(9 * MSS);
        assert!(usage.allows_growth(10 * MSS, true));
        assert!(usage.allows_growth(17 * MSS, true));
        assert!(!usage.allows_growth(18 * MSS, true));
        // Five out of ten: twice five is the window already.
        assert!(!CwndUsage::app_limited(5 * MSS).allows_growth(10 * MSS, true));
        // Congestion avoidance grows only when the window limited the sender.
        assert!(!usage.allows_growth(10 * MSS, false));
        assert!(CwndUsage::LIMITED.allows_growth(100 * MSS, false));
    }

    #[test]
    fn a_record_lasts_one_window_of_data() {
        let start = SeqNumber(1);
        let mut tracker = UsageTracker::new(start);
        tracker.on_send(false, 4 * MSS, start + 4 * MSS, start);
        tracker.on_send(false, 9 * MSS, start + 9 * MSS, start);
        assert_eq!(tracker.usage(), CwndUsage::app_limited(9 * MSS));
        // A smaller flight in the same window of data keeps the largest.
        tracker.on_send(false, 3 * MSS, start + 10 * MSS, start + 7 * MSS);
        assert_eq!(tracker.usage(), CwndUsage::app_limited(9 * MSS));
        // A limited send is kept over any later flight of that window.
        tracker.on_send(true, 10 * MSS, start + 17 * MSS, start + 7 * MSS);
        tracker.on_send(false, 12 * MSS, start + 17 * MSS, start + 7 * MSS);
        assert!(tracker.usage().limited);
        // Once SND.UNA passes what was sent when the record began, a send starts anew.
        tracker.on_send(false, 2 * MSS, start + 19 * MSS, start + 17 * MSS);
        assert_eq!(tracker.usage(), CwndUsage::app_limited(2 * MSS));
    }
}
