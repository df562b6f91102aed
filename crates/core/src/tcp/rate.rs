//! Delivery-rate sampling (draft-cheng-iccrg-delivery-rate-estimation, as BBR's draft
//! uses it): at each transmission the connection's delivery state is stamped on the
//! segment; each ACK that delivers segments (cumulatively or by SACK) turns the stamp of
//! the most recently sent of them into a [`RateSample`]: data delivered over the time it
//! took, the RTT of that segment, and what was lost and in flight meanwhile.
//!
//! Only the controllers that ask for it ([`CongestionControl::wants_rate_samples`])
//! pay for the per-segment records: one 64-byte record per segment handed to the
//! device (a TSO segment is one record), dropped when cumulatively acknowledged.
//!
//! [`CongestionControl::wants_rate_samples`]: super::cc::CongestionControl::wants_rate_samples

use alloc::collections::VecDeque;

use impnet_wire::tcp::SackBlock;

use super::sack::SackBlockExt;
use super::seq::SeqNumber;
use crate::time::{Duration, Instant};

/// The delivery state stamped on one transmitted segment (the draft's per-packet `P.*`).
#[derive(Debug, Clone, Copy)]
struct Sent {
    /// First sequence number of the segment.
    start: SeqNumber,
    /// Just past it.
    end: SeqNumber,
    /// `P.delivered`: bytes delivered when it was (last) sent.
    delivered: u64,
    /// `P.lost`: bytes marked lost when it was sent.
    lost: u64,
    /// `P.delivered_time`.
    delivered_time: Instant,
    /// `P.first_send_time`.
    first_send_time: Instant,
    /// `P.send_time`: when it was (last) sent.
    send_time: Instant,
    /// `P.tx_in_flight`: bytes in flight once it was sent.
    tx_in_flight: u64,
    /// `P.is_app_limited`.
    app_limited: bool,
    /// Delivered already (SACKed); a later cumulative ACK counts it no more.
    delivered_flag: bool,
    /// Sent more than once: its RTT is ambiguous (Karn), so it gives none.
    retransmitted: bool,
}

/// One ACK's rate sample (the draft's `rs.*`), for [`CongestionControl::on_rate_sample`].
///
/// [`CongestionControl::on_rate_sample`]: super::cc::CongestionControl::on_rate_sample
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateSample {
    /// `rs.delivery_rate` in bytes per second (0 when the interval is not valid: zero,
    /// or shorter than the smallest RTT seen).
    pub delivery_rate: u64,
    /// `rs.delivered`: bytes delivered between the sampled segment's send and this ACK.
    pub delivered: u64,
    /// `rs.interval`: the longer of the send and the ACK intervals.
    pub interval: Duration,
    /// `rs.rtt`: RTT of the most recently sent segment this ACK delivered.
    pub rtt: Option<Duration>,
    /// `rs.prior_delivered`: `C.delivered` when that segment was sent.
    pub prior_delivered: u64,
    /// `C.delivered` after this ACK.
    pub total_delivered: u64,
    /// `rs.is_app_limited`: that segment was sent while the application left the
    /// window unfilled, so the rate is a lower bound of what the path carries.
    pub is_app_limited: bool,
    /// `rs.newly_acked`: bytes this ACK delivered.
    pub newly_acked: u64,
    /// `rs.lost`: bytes marked lost between that segment's send and this ACK.
    pub lost: u64,
    /// `rs.newly_lost`: bytes marked lost since the previous ACK.
    pub newly_lost: u64,
    /// `rs.tx_in_flight`: bytes in flight when that segment was sent.
    pub tx_in_flight: u64,
}

/// The connection's delivery state (the draft's `C.*`) and the per-segment stamps.
#[derive(Debug, Clone, Default)]
pub(crate) struct RateSampler {
    /// Stamps of the segments in flight, ascending by sequence number.
    sent: VecDeque<Sent>,
    /// `C.delivered`: bytes delivered so far (cumulatively acknowledged or SACKed).
    delivered: u64,
    /// `C.delivered_time`.
    delivered_time: Instant,
    /// `C.first_send_time`.
    first_send_time: Instant,
    /// `C.app_limited`: 0, or the `C.delivered` (plus in flight) at which the last
    /// app-limited stretch ends.
    app_limited: u64,
    /// `C.lost`: bytes marked lost so far.
    lost: u64,
    /// `C.lost` at the previous ACK (for `rs.newly_lost`).
    lost_reported: u64,
    /// The smallest RTT of the samples so far (`now - P.send_time` of a segment sent
    /// once): the draft's `MinRTT`, which a sample's interval may not undercut.
    min_rtt: Option<Duration>,
}

impl RateSampler {
    /// Stamp a transmission of `[start, end)` at `now`; `in_flight_before` is what
    /// was in flight before it, `in_flight_after` with it. A retransmission restamps
    /// the records it overlaps.
    pub fn on_send(
        &mut self,
        now: Instant,
        (start, end): (SeqNumber, SeqNumber),
        in_flight_before: usize,
        in_flight_after: usize,
    ) {
        if start >= end {
            return;
        }
        // "If there are no packets in flight yet, then we start timing from the moment
        // the first packet is sent".
        if in_flight_before == 0 {
            self.first_send_time = now;
            self.delivered_time = now;
        }
        let stamp = Sent {
            start,
            end,
            delivered: self.delivered,
            lost: self.lost,
            delivered_time: self.delivered_time,
            first_send_time: self.first_send_time,
            send_time: now,
            tx_in_flight: in_flight_after as u64,
            app_limited: self.app_limited != 0,
            delivered_flag: false,
            retransmitted: false,
        };
        if self.sent.back().is_none_or(|last| last.end <= start) {
            self.sent.push_back(stamp);
            return;
        }
        let first = self.sent.partition_point(|s| s.end <= start);
        for s in self.sent.range_mut(first..) {
            if s.start >= end {
                break;
            }
            if !s.delivered_flag {
                *s = Sent {
                    start: s.start,
                    end: s.end,
                    retransmitted: true,
                    ..stamp
                };
            }
        }
    }

    /// `bytes` were marked lost (retransmitted as lost, or in flight at a timeout).
    pub fn on_lost(&mut self, bytes: usize) {
        self.lost += bytes as u64;
    }

    /// The sender has no data to fill the window (`in_flight` bytes are out): samples
    /// of what is sent until that is delivered are app-limited.
    pub fn on_app_limited(&mut self, in_flight: usize) {
        self.app_limited = (self.delivered + in_flight as u64).max(1);
    }

    /// `C.delivered`.
    #[cfg(test)]
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// An ACK at `now` moved SND.UNA to `snd_una` and carried `blocks`: count what it
    /// delivered, forget what is acknowledged, and return the sample (None when it
    /// delivered nothing).
    pub fn on_ack(
        &mut self,
        now: Instant,
        snd_una: SeqNumber,
        blocks: &[SackBlock],
    ) -> Option<RateSample> {
        let mut newest: Option<Sent> = None;
        let mut newly_acked = 0u64;
        while let Some(s) = self.sent.front() {
            if s.end > snd_una {
                break;
            }
            let s = *s;
            self.sent.pop_front();
            if !s.delivered_flag {
                newly_acked += self.deliver(now, &s, &mut newest);
            }
        }
        for block in blocks {
            let (left, right) = (block.left_seq(), block.right_seq());
            if left >= right || right <= snd_una {
                continue;
            }
            let first = self.sent.partition_point(|s| s.end <= left);
            for i in first..self.sent.len() {
                let s = self.sent[i];
                if s.start >= right {
                    break;
                }
                if !s.delivered_flag && s.start >= left && s.end <= right {
                    self.sent[i].delivered_flag = true;
                    newly_acked += self.deliver(now, &s, &mut newest);
                }
            }
        }
        self.sample(now, newest?, newly_acked)
    }

    /// Count `s` delivered at `now`, keeping the most recently sent in `newest`.
    fn deliver(&mut self, now: Instant, s: &Sent, newest: &mut Option<Sent>) -> u64 {
        let len = (s.end - s.start) as u64;
        self.delivered += len;
        self.delivered_time = now;
        // "Update info using the newest packet": the one sent last.
        if newest.is_none_or(|n| s.send_time >= n.send_time) {
            *newest = Some(*s);
            self.first_send_time = s.send_time;
        }
        len
    }

    /// The draft's GenerateRateSample from the newest delivered segment `p`.
    fn sample(&mut self, now: Instant, p: Sent, newly_acked: u64) -> Option<RateSample> {
        // "Clear app-limited field if bubble is ACKed and gone."
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let send_elapsed = p.send_time - p.first_send_time;
        let ack_elapsed = self.delivered_time - p.delivered_time;
        // "Use the longer of the send_elapsed and ack_elapsed".
        let interval = send_elapsed.max(ack_elapsed);
        let delivered = self.delivered - p.delivered;
        let rtt = (!p.retransmitted).then(|| now - p.send_time);
        if let Some(rtt) = rtt {
            self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        }
        // "Normally we expect interval >= MinRTT ... if (rs.interval < MinRTT(tp)) ...
        // return false /* no reliable sample */": a flight delivered in less than a
        // round trip says how bunched its ACKs came back (a device handing over a
        // batch, a receiver's stretch ACK), not what the path carries; such a rate
        // runs above the path's (Linux's `tcp_rate_gen` drops it too).
        let reliable = self.min_rtt.is_none_or(|min| interval >= min);
        let delivery_rate = match interval.as_nanos() {
            0 => 0,
            _ if !reliable => 0,
            nanos => (u128::from(delivered) * 1_000_000_000 / u128::from(nanos)) as u64,
        };
        let newly_lost = self.lost - self.lost_reported;
        self.lost_reported = self.lost;
        Some(RateSample {
            delivery_rate,
            delivered,
            interval,
            rtt,
            prior_delivered: p.delivered,
            total_delivered: self.delivered,
            is_app_limited: p.app_limited,
            newly_acked,
            lost: self.lost - p.lost,
            newly_lost,
            tx_in_flight: p.tx_in_flight,
        })
    }

    /// Records held (for tests and bounds).
    #[cfg(test)]
    pub fn records(&self) -> usize {
        self.sent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + MS(ms)
    }

    /// Ten 1000-byte segments sent back to back, acknowledged one RTT (100 ms) later,
    /// one per millisecond: the sample is the ACK rate, 1 MB/s.
    #[test]
    fn back_to_back_flight_samples_the_ack_rate() {
        let mut r = RateSampler::default();
        let base = SeqNumber(1000);
        for i in 0..10u32 {
            let start = base + (i as usize * 1000);
            r.on_send(
                at(0),
                (start, start + 1000),
                i as usize * 1000,
                (i as usize + 1) * 1000,
            );
        }
        let mut last = None;
        for i in 1..=10usize {
            last = r.on_ack(at(100 + i as u64), base + i * 1000, &[]);
        }
        let rs = last.unwrap();
        assert_eq!(rs.delivered, 10_000);
        assert_eq!(rs.interval, MS(110));
        assert_eq!(rs.rtt, Some(MS(110)));
        assert_eq!(r.delivered(), 10_000);
        assert_eq!(r.records(), 0);
        // A second flight sent as the ACKs came back, 1 ms apart.
        for i in 10..20usize {
            let start = base + i * 1000;
            r.on_send(at(101 + (i as u64 - 10)), (start, start + 1000), 1000, 2000);
        }
        let rs = r.on_ack(at(211), base + 20 * 1000, &[]).unwrap();
        // Sent over 9 ms, acknowledged 110 ms after the first: 10 segments delivered
        // since the newest was sent, over the ACK interval since its delivered_time.
        assert_eq!(rs.prior_delivered, 10_000);
        assert_eq!(rs.newly_acked, 10_000);
        assert!(rs.delivery_rate > 0);
    }

    /// SACKed segments are delivered once: the cumulative ACK that later covers them
    /// counts only the hole it fills.
    #[test]
    fn sacked_segments_count_once() {
        let mut r = RateSampler::default();
        let base = SeqNumber(0);
        for i in 0..4usize {
            r.on_send(
                at(i as u64),
                (base + i * 100, base + (i + 1) * 100),
                i * 100,
                (i + 1) * 100,
            );
        }
        let sack = [SackBlock::from_seqs(base + 100, base + 400)];
        let rs = r.on_ack(at(50), base, &sack).unwrap();
        assert_eq!(rs.newly_acked, 300);
        assert_eq!(rs.rtt, Some(MS(47)));
        // The hole is retransmitted (marked lost), then acknowledged with the rest.
        r.on_lost(100);
        r.on_send(at(60), (base, base + 100), 300, 400);
        let rs = r.on_ack(at(110), base + 400, &[]).unwrap();
        assert_eq!(rs.newly_acked, 100);
        // Karn: the original may be what arrived.
        assert_eq!(rs.rtt, None);
        assert_eq!(rs.newly_lost, 100);
        assert_eq!(r.delivered(), 400);
    }

    /// After a spurious retransmission timeout each resent segment is acknowledged (for
    /// its original) just after it goes: a sample from one of them spans a few
    /// milliseconds, shorter than any round trip, and would claim many times the
    /// path's rate. Below the smallest RTT seen it gives no rate (the draft's
    /// `rs.interval < MinRTT` test); the ones before it and after it still do.
    #[test]
    fn an_interval_shorter_than_the_min_rtt_gives_no_rate() {
        let mut r = RateSampler::default();
        let seg = |i: u32| (SeqNumber(i * 1000), SeqNumber((i + 1) * 1000));
        // A first segment takes 100 ms: the smallest RTT.
        r.on_send(at(0), seg(0), 0, 1000);
        let rs = r.on_ack(at(100), seg(0).1, &[]).unwrap();
        assert_eq!(rs.rtt, Some(MS(100)));
        assert_eq!(rs.delivery_rate, 10_000);
        // Two more at 100 and 101 ms; the timer fires early and both go again.
        r.on_send(at(100), seg(1), 0, 1000);
        r.on_send(at(101), seg(2), 1000, 2000);
        r.on_send(at(198), seg(1), 2000, 2000);
        // The first one's original arrived: a sample over the 100 ms since it was sent.
        let rs = r.on_ack(at(200), seg(1).1, &[]).unwrap();
        assert_eq!(rs.interval, MS(100));
        assert_eq!(rs.delivery_rate, 10_000);
        // The second is resent after that ACK and acknowledged a millisecond later: 1000
        // bytes over the 3 ms since the first resend went, 333 kB/s against the path's
        // 10 kB/s.
        r.on_send(at(201), seg(2), 1000, 1000);
        let rs = r.on_ack(at(202), seg(2).1, &[]).unwrap();
        assert_eq!(rs.interval, MS(3));
        assert_eq!(rs.rtt, None);
        assert_eq!(rs.delivery_rate, 0);
        assert_eq!(rs.delivered, 1000);
    }

    /// Segments sent while app-limited give app-limited samples until the bubble is
    /// delivered.
    #[test]
    fn app_limited_marks_until_the_bubble_is_delivered() {
        let mut r = RateSampler::default();
        r.on_app_limited(0);
        r.on_send(at(0), (SeqNumber(0), SeqNumber(100)), 0, 100);
        let rs = r.on_ack(at(10), SeqNumber(100), &[]).unwrap();
        assert!(rs.is_app_limited);
        r.on_send(at(10), (SeqNumber(100), SeqNumber(200)), 0, 100);
        let rs = r.on_ack(at(20), SeqNumber(200), &[]).unwrap();
        assert!(!rs.is_app_limited);
        assert_eq!(r.on_ack(at(30), SeqNumber(200), &[]), None);
    }
}
