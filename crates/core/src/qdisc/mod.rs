//! Queue disciplines: what a router's output port does with packets that must wait.
//!
//! Pure code over `now`: [`Qdisc::enqueue`] when a packet arrives for the port,
//! [`Qdisc::dequeue`] when the transmitter is free. Three disciplines:
//!
//! - [`Fifo`]: drop-tail, limited in bytes or in packets;
//! - [`Codel`]: CoDel, RFC 8289, which keeps the *sojourn time* (how long a packet waited)
//!   near a target by dropping, or CE-marking ECN-capable packets, at the head;
//! - [`FqCodel`]: FQ-CoDel, RFC 8290, hashing flows into queues served by deficit round
//!   robin, each queue with its own CoDel, new (sparse) flows served first.
//!
//! The module does not parse what it holds: a packet is bytes (a bare IP packet or an
//! Ethernet frame) plus a [`PacketMeta`] the caller computes, with the flow hash and
//! where the IP header is, so that CE marking can rewrite the ECN bits (and patch an
//! IPv4 header checksum incrementally, RFC 1624). [`PacketMeta::ip`] (IP-level links
//! such as a TUN) and [`PacketMeta::ethernet`] compute it from the bytes with a keyed
//! 5-tuple hash, for IPv4 and IPv6 alike.
//!
//! No input panics: a packet whose claimed IP header is missing or malformed is simply
//! not ECN-capable (CoDel drops it rather than marking).

mod codel;
mod fifo;
mod fq_codel;
mod meta;

#[cfg(test)]
mod tests;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::fmt;
use core::str::FromStr;

use crate::time::{Duration, Instant};

pub use codel::{Codel, CodelConfig};
pub use fifo::{Fifo, FifoConfig};
pub use fq_codel::{FqCodel, FqCodelConfig};
pub use meta::{PacketMeta, flow_hash_ipv4, flow_hash_ipv6, mark_ce};

/// How much a queue may hold before it drops arrivals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// At most this many bytes (the sum of the packets' lengths).
    Bytes(usize),
    /// At most this many packets.
    Packets(usize),
}

impl Limit {
    /// Whether a queue holding `packets` packets of `bytes` bytes is over this limit.
    pub const fn exceeded(self, packets: usize, bytes: usize) -> bool {
        match self {
            Limit::Bytes(limit) => bytes > limit,
            Limit::Packets(limit) => packets > limit,
        }
    }
}

/// Which discipline, with its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QdiscConfig {
    /// Drop-tail first-in first-out.
    Fifo(FifoConfig),
    /// CoDel (RFC 8289) over one FIFO.
    Codel(CodelConfig),
    /// FQ-CoDel (RFC 8290).
    FqCodel(FqCodelConfig),
}

impl QdiscConfig {
    /// The discipline's name as [`FromStr`] reads it: `fifo`, `codel` or `fq_codel`.
    pub const fn name(&self) -> &'static str {
        match self {
            QdiscConfig::Fifo(_) => "fifo",
            QdiscConfig::Codel(_) => "codel",
            QdiscConfig::FqCodel(_) => "fq_codel",
        }
    }

    /// This configuration with CoDel's target sojourn time; a FIFO has none and is
    /// returned unchanged.
    pub fn with_target(self, target: Duration) -> QdiscConfig {
        match self {
            QdiscConfig::Fifo(_) => self,
            QdiscConfig::Codel(c) => QdiscConfig::Codel(CodelConfig { target, ..c }),
            QdiscConfig::FqCodel(c) => QdiscConfig::FqCodel(FqCodelConfig { target, ..c }),
        }
    }

    /// This configuration with CoDel's interval; a FIFO has none and is returned
    /// unchanged.
    pub fn with_interval(self, interval: Duration) -> QdiscConfig {
        match self {
            QdiscConfig::Fifo(_) => self,
            QdiscConfig::Codel(c) => QdiscConfig::Codel(CodelConfig { interval, ..c }),
            QdiscConfig::FqCodel(c) => QdiscConfig::FqCodel(FqCodelConfig { interval, ..c }),
        }
    }

    /// This configuration with the overall limit `limit`.
    pub fn with_limit(self, limit: Limit) -> QdiscConfig {
        match self {
            QdiscConfig::Fifo(_) => QdiscConfig::Fifo(FifoConfig { limit }),
            QdiscConfig::Codel(c) => QdiscConfig::Codel(CodelConfig { limit, ..c }),
            QdiscConfig::FqCodel(c) => QdiscConfig::FqCodel(FqCodelConfig { limit, ..c }),
        }
    }

    /// This configuration with `mtu` as CoDel's largest packet (the "at least one MTU
    /// in queue" rule) and FQ-CoDel's quantum; a FIFO is returned unchanged.
    pub fn with_mtu(self, mtu: usize) -> QdiscConfig {
        match self {
            QdiscConfig::Fifo(_) => self,
            QdiscConfig::Codel(c) => QdiscConfig::Codel(CodelConfig { mtu, ..c }),
            QdiscConfig::FqCodel(c) => QdiscConfig::FqCodel(FqCodelConfig {
                mtu,
                quantum: mtu,
                ..c
            }),
        }
    }
}

impl fmt::Display for QdiscConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A discipline name [`QdiscConfig`]'s [`FromStr`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownQdisc(pub alloc::string::String);

impl fmt::Display for UnknownQdisc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown queue discipline `{}` (known: fifo, codel, fq_codel)",
            self.0
        )
    }
}

impl core::error::Error for UnknownQdisc {}

impl FromStr for QdiscConfig {
    type Err = UnknownQdisc;

    /// `fifo`, `codel` or `fq_codel` (also `fq-codel`), each with its defaults.
    fn from_str(s: &str) -> Result<QdiscConfig, UnknownQdisc> {
        match s {
            "fifo" => Ok(QdiscConfig::Fifo(FifoConfig::default())),
            "codel" => Ok(QdiscConfig::Codel(CodelConfig::default())),
            "fq_codel" | "fq-codel" => Ok(QdiscConfig::FqCodel(FqCodelConfig::default())),
            other => Err(UnknownQdisc(other.into())),
        }
    }
}

/// Why a packet was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The queue was over its limit (tail drop, or FQ-CoDel's drop from the fattest
    /// flow).
    Overflow,
    /// CoDel's control law dropped it at the head (it was not ECN-capable).
    Codel,
}

/// A packet [`Qdisc::enqueue`] refused, given back with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// Why.
    pub reason: DropReason,
    /// The packet, unchanged, so its buffer can be reused.
    pub packet: Vec<u8>,
}

/// What a discipline has done so far.
///
/// Always: `enqueued_bytes == dequeued_bytes + dropped_overflow_bytes +
/// dropped_codel_bytes + backlog_bytes`, and the same for packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Packets offered to `enqueue` (accepted or not).
    pub enqueued: u64,
    /// Bytes offered to `enqueue`.
    pub enqueued_bytes: u64,
    /// Packets handed out by `dequeue`.
    pub dequeued: u64,
    /// Bytes handed out by `dequeue`.
    pub dequeued_bytes: u64,
    /// Packets dropped because the queue was over its limit.
    pub dropped_overflow: u64,
    /// Bytes of those.
    pub dropped_overflow_bytes: u64,
    /// Packets dropped by CoDel's control law.
    pub dropped_codel: u64,
    /// Bytes of those.
    pub dropped_codel_bytes: u64,
    /// Packets CoDel marked CE instead of dropping.
    pub ce_marked: u64,
    /// Packets waiting now.
    pub backlog_packets: usize,
    /// Bytes waiting now.
    pub backlog_bytes: usize,
    /// The most bytes ever waiting at once.
    pub max_backlog_bytes: usize,
    /// How long the last dequeued packet waited; `None` before the first.
    pub last_sojourn: Option<Duration>,
}

impl QdiscStats {
    fn on_offer(&mut self, len: usize) {
        self.enqueued += 1;
        self.enqueued_bytes += len as u64;
    }

    fn on_accept(&mut self, len: usize) {
        self.backlog_packets += 1;
        self.backlog_bytes += len;
        self.max_backlog_bytes = self.max_backlog_bytes.max(self.backlog_bytes);
    }

    /// A packet left the queue (to be handed out or dropped).
    fn on_leave(&mut self, len: usize) {
        self.backlog_packets = self.backlog_packets.saturating_sub(1);
        self.backlog_bytes = self.backlog_bytes.saturating_sub(len);
    }

    fn on_drop(&mut self, reason: DropReason, len: usize) {
        match reason {
            DropReason::Overflow => {
                self.dropped_overflow += 1;
                self.dropped_overflow_bytes += len as u64;
            }
            DropReason::Codel => {
                self.dropped_codel += 1;
                self.dropped_codel_bytes += len as u64;
            }
        }
    }

    fn on_dequeue(&mut self, now: Instant, entry: &Entry) {
        self.dequeued += 1;
        self.dequeued_bytes += entry.packet.len() as u64;
        self.last_sojourn = Some(now.saturating_duration_since(entry.enqueued_at));
    }
}

/// A waiting packet.
#[derive(Debug, Clone)]
struct Entry {
    packet: Vec<u8>,
    meta: PacketMeta,
    /// When it was enqueued, for its sojourn time.
    enqueued_at: Instant,
}

/// A FIFO of entries with its byte count; every removal updates the discipline's
/// [`QdiscStats`] backlog.
#[derive(Debug, Clone, Default)]
struct PacketQueue {
    entries: VecDeque<Entry>,
    /// Sum of the entries' lengths.
    bytes: usize,
}

impl PacketQueue {
    fn push(&mut self, entry: Entry, stats: &mut QdiscStats) {
        let len = entry.packet.len();
        self.bytes += len;
        stats.on_accept(len);
        self.entries.push_back(entry);
    }

    /// Drop-tail admission: queue `packet` stamped with `now`, unless one more would
    /// exceed `limit` (then it comes back as an overflow drop).
    fn offer(
        &mut self,
        now: Instant,
        packet: Vec<u8>,
        meta: PacketMeta,
        limit: Limit,
        stats: &mut QdiscStats,
    ) -> Result<(), Dropped> {
        let len = packet.len();
        stats.on_offer(len);
        if limit.exceeded(self.len() + 1, self.bytes.saturating_add(len)) {
            stats.on_drop(DropReason::Overflow, len);
            return Err(Dropped {
                reason: DropReason::Overflow,
                packet,
            });
        }
        let entry = Entry {
            packet,
            meta,
            enqueued_at: now,
        };
        self.push(entry, stats);
        Ok(())
    }

    fn pop(&mut self, stats: &mut QdiscStats) -> Option<Entry> {
        let entry = self.entries.pop_front()?;
        let len = entry.packet.len();
        self.bytes = self.bytes.saturating_sub(len);
        stats.on_leave(len);
        Some(entry)
    }

    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// A queue discipline: one of [`Fifo`], [`Codel`], [`FqCodel`].
///
/// Call [`enqueue`](Qdisc::enqueue) for each arriving packet and
/// [`dequeue`](Qdisc::dequeue) whenever the transmitter can take one. `now` must not go
/// back in time between calls (an earlier `now` is treated as no time passing).
#[derive(Debug, Clone)]
pub enum Qdisc {
    /// Drop-tail FIFO.
    Fifo(Fifo),
    /// CoDel.
    Codel(Codel),
    /// FQ-CoDel.
    FqCodel(FqCodel),
}

impl Qdisc {
    /// An empty discipline configured by `config`.
    pub fn new(config: QdiscConfig) -> Qdisc {
        match config {
            QdiscConfig::Fifo(c) => Qdisc::Fifo(Fifo::new(c)),
            QdiscConfig::Codel(c) => Qdisc::Codel(Codel::new(c)),
            QdiscConfig::FqCodel(c) => Qdisc::FqCodel(FqCodel::new(c)),
        }
    }

    /// The configuration it was built with.
    pub fn config(&self) -> QdiscConfig {
        match self {
            Qdisc::Fifo(q) => QdiscConfig::Fifo(*q.config()),
            Qdisc::Codel(q) => QdiscConfig::Codel(*q.config()),
            Qdisc::FqCodel(q) => QdiscConfig::FqCodel(*q.config()),
        }
    }

    /// Offers `packet` at `now`. `Err` gives it back when it was not queued. FQ-CoDel
    /// may instead drop packets of the fattest flow to make room (counted in
    /// [`QdiscStats::dropped_overflow`]).
    pub fn enqueue(
        &mut self,
        now: Instant,
        packet: Vec<u8>,
        meta: PacketMeta,
    ) -> Result<(), Dropped> {
        match self {
            Qdisc::Fifo(q) => q.enqueue(now, packet, meta),
            Qdisc::Codel(q) => q.enqueue(now, packet, meta),
            Qdisc::FqCodel(q) => q.enqueue(now, packet, meta),
        }
    }

    /// The next packet to send at `now`, if any (CoDel may drop or CE-mark packets on
    /// the way).
    pub fn dequeue(&mut self, now: Instant) -> Option<Vec<u8>> {
        match self {
            Qdisc::Fifo(q) => q.dequeue(now),
            Qdisc::Codel(q) => q.dequeue(now),
            Qdisc::FqCodel(q) => q.dequeue(now),
        }
    }

    /// Packets waiting.
    pub fn len_packets(&self) -> usize {
        self.stats().backlog_packets
    }

    /// Bytes waiting.
    pub fn len_bytes(&self) -> usize {
        self.stats().backlog_bytes
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len_packets() == 0
    }

    /// What it has done so far.
    pub fn stats(&self) -> &QdiscStats {
        match self {
            Qdisc::Fifo(q) => q.stats(),
            Qdisc::Codel(q) => q.stats(),
            Qdisc::FqCodel(q) => q.stats(),
        }
    }
}
