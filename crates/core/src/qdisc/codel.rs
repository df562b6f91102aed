//! CoDel, RFC 8289: controlled delay.
//!
//! CoDel watches the *sojourn time* of the packets it dequeues. When it has stayed above
//! `target` for a whole `interval`, CoDel enters its dropping state: it drops (or, for
//! ECN-capable packets, marks CE) one packet, then the next after `interval / sqrt(count)`,
//! and so on, faster and faster, until the sojourn time falls below `target` again.
//! The state machine ([`CodelVars`]) is shared with FQ-CoDel, which runs one per flow.

use alloc::vec::Vec;

use super::meta::mark_ce;
use super::{DropReason, Dropped, Entry, Limit, PacketMeta, PacketQueue, QdiscStats};
use crate::time::{Duration, Instant};

/// CoDel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CodelConfig {
    /// Acceptable standing queue delay (RFC 8289 §4.4: 5 ms).
    pub target: Duration,
    /// The time a sojourn time above target must persist before dropping starts, and
    /// the base of the control law; on the order of a worst-case RTT (§4.5: 100 ms).
    pub interval: Duration,
    /// The largest packet: CoDel does not drop while no more than this many bytes wait
    /// (§4.2 "at least one MTU in queue"). 1514 for Ethernet frames.
    pub mtu: usize,
    /// Mark ECN-capable packets CE instead of dropping them (§5).
    pub ecn: bool,
    /// Arrivals beyond this are tail-dropped.
    pub limit: Limit,
}

impl Default for CodelConfig {
    /// Target 5 ms, interval 100 ms, MTU 1514, ECN on, limit 1000 packets (Linux's
    /// `codel` default limit).
    fn default() -> CodelConfig {
        CodelConfig {
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            mtu: 1514,
            ecn: true,
            limit: Limit::Packets(1000),
        }
    }
}

/// The parameters the control law reads, common to CoDel and FQ-CoDel.
#[derive(Debug, Clone, Copy)]
pub(super) struct CodelParams {
    pub target: Duration,
    pub interval: Duration,
    pub mtu: usize,
    pub ecn: bool,
}

/// One CoDel state machine: RFC 8289 §5's variables.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CodelVars {
    /// When the sojourn time will have been above target for an interval; `None` while
    /// it is below target (the RFC's `first_above_time == 0`).
    first_above_time: Option<Instant>,
    /// When the next drop (or mark) is due in the dropping state.
    drop_next: Instant,
    /// Drops (and marks) since entering the dropping state, which sets the drop rate.
    count: u32,
    /// `count` when the dropping state was last entered, for the count reuse rule.
    lastcount: u32,
    /// In the dropping state.
    dropping: bool,
}

/// RFC 8289 §5.3 `control_law`: `t + interval / sqrt(count)`, in integers (no floats in
/// `no_std`): `interval * 2^32 / sqrt(count * 2^64)`.
fn control_law(t: Instant, interval: Duration, count: u32) -> Instant {
    let root = (u128::from(count.max(1)) << 64).isqrt();
    let step = (u128::from(interval.as_nanos()) << 32) / root;
    t + Duration::from_nanos(u64::try_from(step).unwrap_or(u64::MAX))
}

impl CodelVars {
    /// RFC 8289 §5.4 `dodequeue`: takes the head and says whether the sojourn time has
    /// been above target for at least an interval.
    fn dodequeue(
        &mut self,
        now: Instant,
        params: &CodelParams,
        queue: &mut PacketQueue,
        stats: &mut QdiscStats,
    ) -> (Option<Entry>, bool) {
        let Some(entry) = queue.pop(stats) else {
            // "queue is empty - we can't be above TARGET"
            self.first_above_time = None;
            return (None, false);
        };
        let sojourn = now.saturating_duration_since(entry.enqueued_at);
        // "To span a large range of bandwidths, CoDel runs two different AQMs in
        // parallel. One is based on sojourn time and takes effect when the time to send
        // an MTU-sized packet is less than TARGET. The 1st term of the "if" below does
        // this. The other is based on backlog and takes effect when the time to send an
        // MTU-sized packet is >= TARGET. The goal here is to keep the output link
        // utilization high by never allowing the queue to get smaller than the amount
        // that arrives in a typical interarrival time (MTU-sized packets arriving
        // spaced by the amount of time it takes to send such a packet on the bottleneck).
        // The 2nd term of the "if" does this."
        if sojourn < params.target || queue.bytes <= params.mtu {
            self.first_above_time = None;
            return (Some(entry), false);
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + params.interval);
                (Some(entry), false)
            }
            Some(at) => (Some(entry), now >= at),
        }
    }

    /// RFC 8289 §5.5 `dequeue`: the next packet to send, after dropping (or marking)
    /// what the control law says. Dropped packets are counted in `stats`.
    pub(super) fn dequeue(
        &mut self,
        now: Instant,
        params: &CodelParams,
        queue: &mut PacketQueue,
        stats: &mut QdiscStats,
    ) -> Option<Entry> {
        let (head, ok_to_drop) = self.dodequeue(now, params, queue, stats);
        let Some(entry) = head else {
            self.dropping = false;
            return None;
        };
        if self.dropping {
            if !ok_to_drop {
                // "sojourn time below TARGET - leave dropping state"
                self.dropping = false;
                return Some(entry);
            }
            return self.drop_while_due(entry, now, params, queue, stats);
        }
        if ok_to_drop {
            return self.enter_dropping(entry, now, params, queue, stats);
        }
        Some(entry)
    }

    /// In the dropping state: "Time for the next drop. Drop current packet and dequeue
    /// next. If the dequeue doesn't take us out of dropping state, schedule the next
    /// drop." An ECN-capable packet is marked and sent instead, as Linux does.
    fn drop_while_due(
        &mut self,
        mut entry: Entry,
        now: Instant,
        params: &CodelParams,
        queue: &mut PacketQueue,
        stats: &mut QdiscStats,
    ) -> Option<Entry> {
        while now >= self.drop_next && self.dropping {
            self.count = self.count.saturating_add(1);
            if mark(&mut entry, params, stats) {
                self.drop_next = control_law(self.drop_next, params.interval, self.count);
                return Some(entry);
            }
            stats.on_drop(DropReason::Codel, entry.packet.len());
            let (next, ok_to_drop) = self.dodequeue(now, params, queue, stats);
            let Some(next) = next else {
                self.dropping = false;
                return None;
            };
            entry = next;
            if ok_to_drop {
                self.drop_next = control_law(self.drop_next, params.interval, self.count);
            } else {
                // "leave dropping state"
                self.dropping = false;
            }
        }
        Some(entry)
    }

    /// "If we get here, we're not in dropping state. The 'ok_to_drop' return from
    /// dodequeue means that the sojourn time has been above 'TARGET' for 'INTERVAL', so
    /// enter dropping state."
    fn enter_dropping(
        &mut self,
        mut entry: Entry,
        now: Instant,
        params: &CodelParams,
        queue: &mut PacketQueue,
        stats: &mut QdiscStats,
    ) -> Option<Entry> {
        let head = if mark(&mut entry, params, stats) {
            Some(entry)
        } else {
            stats.on_drop(DropReason::Codel, entry.packet.len());
            self.dodequeue(now, params, queue, stats).0
        };
        self.dropping = true;
        // "If min went above TARGET close to when it last went below, assume that the
        // drop rate that controlled the queue on the last cycle is a good starting point
        // to control it now. ('drop_next' will be at most 'INTERVAL' later than the time
        // of the last drop, so 'now - drop_next' is a good approximation of the time
        // from the last drop until now.)"
        let delta = self.count.saturating_sub(self.lastcount);
        let recent =
            now.saturating_duration_since(self.drop_next) < params.interval.saturating_mul(16);
        self.count = if delta > 1 && recent { delta } else { 1 };
        self.drop_next = control_law(now, params.interval, self.count);
        self.lastcount = self.count;
        head
    }
}

/// Marks `entry` CE if ECN is on and it is ECN-capable; counts the mark.
fn mark(entry: &mut Entry, params: &CodelParams, stats: &mut QdiscStats) -> bool {
    let marked = params.ecn
        && entry
            .meta
            .ip_offset
            .is_some_and(|offset| mark_ce(&mut entry.packet, offset));
    if marked {
        stats.ce_marked += 1;
    }
    marked
}

/// CoDel over one FIFO.
#[derive(Debug, Clone)]
pub struct Codel {
    config: CodelConfig,
    queue: PacketQueue,
    vars: CodelVars,
    stats: QdiscStats,
}

impl Codel {
    /// An empty CoDel queue.
    pub fn new(config: CodelConfig) -> Codel {
        Codel {
            config,
            queue: PacketQueue::default(),
            vars: CodelVars::default(),
            stats: QdiscStats::default(),
        }
    }

    /// Its parameters.
    pub fn config(&self) -> &CodelConfig {
        &self.config
    }

    /// Queues `packet` (stamped with `now`) unless that would exceed the limit.
    pub fn enqueue(
        &mut self,
        now: Instant,
        packet: Vec<u8>,
        meta: PacketMeta,
    ) -> Result<(), Dropped> {
        self.queue
            .offer(now, packet, meta, self.config.limit, &mut self.stats)
    }

    /// The next packet to send, after CoDel's drops and marks.
    pub fn dequeue(&mut self, now: Instant) -> Option<Vec<u8>> {
        let params = self.config.params();
        let entry = self
            .vars
            .dequeue(now, &params, &mut self.queue, &mut self.stats)?;
        self.stats.on_dequeue(now, &entry);
        Some(entry.packet)
    }

    /// What it has done so far.
    pub fn stats(&self) -> &QdiscStats {
        &self.stats
    }
}

impl CodelConfig {
    pub(super) fn params(&self) -> CodelParams {
        CodelParams {
            target: self.target,
            interval: self.interval,
            mtu: self.mtu,
            ecn: self.ecn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_law_divides_the_interval_by_the_square_root_of_count() {
        let interval = Duration::from_millis(100);
        let at = |count| control_law(Instant::ZERO, interval, count).as_nanos();
        assert_eq!(at(1), 100_000_000);
        assert_eq!(at(4), 50_000_000);
        assert_eq!(at(100), 10_000_000);
        assert!((at(2) as i64 - 70_710_678).abs() < 2, "{}", at(2));
        // count 0 (never produced) is taken as 1 rather than dividing by zero.
        assert_eq!(at(0), 100_000_000);
        assert!(at(u32::MAX) > 0);
    }

    fn packet(id: u16) -> Vec<u8> {
        let mut bytes = alloc::vec![0u8; 1500];
        bytes[0] = 0x45;
        bytes[2..4].copy_from_slice(&1500u16.to_be_bytes());
        bytes[4..6].copy_from_slice(&id.to_be_bytes());
        bytes
    }

    fn meta(_: u32) -> PacketMeta {
        PacketMeta::opaque(0)
    }

    #[test]
    fn codel_reuses_the_drop_count_when_reentering_soon() {
        let mut codel = Codel::new(CodelConfig::default());
        let mut now = Instant::ZERO;
        // A standing queue of 10 packets, each dequeued 20 ms after the last: dropping
        // state is entered, count grows.
        let mut id = 0u16;
        let mut fill = |codel: &mut Codel, now: Instant, n| {
            for _ in 0..n {
                id += 1;
                codel.enqueue(now, packet(id), meta(0)).unwrap();
            }
        };
        fill(&mut codel, now, 40);
        while codel.stats().backlog_packets > 2 {
            now += Duration::from_millis(20);
            codel.dequeue(now);
            fill(&mut codel, now, 1);
        }
        let count_before = codel.vars.count;
        assert!(codel.vars.count > 2, "{}", codel.vars.count);
        // Drain: the sojourn time falls, dropping stops.
        while codel.dequeue(now).is_some() {}
        assert!(!codel.vars.dropping);
        // Build a standing queue again shortly after: count resumes from the previous
        // cycle's drops rather than 1.
        fill(&mut codel, now, 40);
        while !codel.vars.dropping {
            now += Duration::from_millis(20);
            codel.dequeue(now);
        }
        assert!(
            codel.vars.count > 1,
            "count restarted at {}",
            codel.vars.count
        );
        assert!(codel.vars.count <= count_before);
    }
}
