//! FQ-CoDel, RFC 8290: flow queueing with CoDel in each queue.
//!
//! Packets are hashed by flow into one of `flows` queues. Queues are served by deficit
//! round robin with a byte `quantum`; a queue that becomes active goes on the *new*
//! list, served before the *old* list, so that a sparse flow (a ping, a DNS query, the
//! ACKs of a download) waits for at most a round of the active flows rather than
//! behind the whole backlog of a bulk flow. Each queue runs its own CoDel.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::codel::{CodelParams, CodelVars};
use super::{DropReason, Dropped, Entry, Limit, PacketMeta, PacketQueue, QdiscStats};
use crate::time::{Duration, Instant};

/// Most queues an [`FqCodel`] will allocate, whatever its configuration says.
const MAX_FLOWS: usize = 65_536;

/// FQ-CoDel's parameters (defaults from RFC 8290 §5 and Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FqCodelConfig {
    /// Number of flow queues (RFC 8290 §5.2.2: 1024), at least 1, at most 65536.
    pub flows: usize,
    /// Bytes a queue may send per round (§5.2.3: 1514, one Ethernet frame); at least 1.
    pub quantum: usize,
    /// Overall limit; beyond it, packets are dropped from the head of the queue holding
    /// the most bytes (§4.1.1; §5.2.4: 10240 packets).
    pub limit: Limit,
    /// CoDel's target in each queue (5 ms).
    pub target: Duration,
    /// CoDel's interval in each queue (100 ms).
    pub interval: Duration,
    /// CoDel's "at least one MTU in queue" threshold, per queue (1514).
    pub mtu: usize,
    /// Mark ECN-capable packets CE instead of dropping them (on, as in Linux).
    pub ecn: bool,
}

impl Default for FqCodelConfig {
    fn default() -> FqCodelConfig {
        FqCodelConfig {
            flows: 1024,
            quantum: 1514,
            limit: Limit::Packets(10_240),
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            mtu: 1514,
            ecn: true,
        }
    }
}

/// One flow queue.
#[derive(Debug, Clone, Default)]
struct Flow {
    queue: PacketQueue,
    vars: CodelVars,
    /// Bytes it may still send in this round; refilled by `quantum` when not positive.
    deficit: i64,
    /// On the new or the old list (the RFC's "empty flow list entry" otherwise).
    listed: bool,
}

/// FQ-CoDel: flow queues served by deficit round robin, CoDel in each.
#[derive(Debug, Clone)]
pub struct FqCodel {
    config: FqCodelConfig,
    flows: Vec<Flow>,
    /// Queues that became active since they were last served a quantum.
    new_flows: VecDeque<usize>,
    /// The other active queues.
    old_flows: VecDeque<usize>,
    stats: QdiscStats,
}

impl FqCodel {
    /// An empty FQ-CoDel with `config.flows` queues (clamped to 1..=65536).
    pub fn new(config: FqCodelConfig) -> FqCodel {
        let count = config.flows.clamp(1, MAX_FLOWS);
        FqCodel {
            config,
            flows: (0..count).map(|_| Flow::default()).collect(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            stats: QdiscStats::default(),
        }
    }

    /// Its parameters.
    pub fn config(&self) -> &FqCodelConfig {
        &self.config
    }

    fn quantum(&self) -> i64 {
        i64::try_from(self.config.quantum.max(1)).unwrap_or(i64::MAX)
    }

    /// The queue of flow hash `hash`: the hash scaled onto the queues (as Linux's
    /// `reciprocal_scale`), so every bit of the hash counts.
    fn flow_index(&self, hash: u32) -> usize {
        ((u64::from(hash) * self.flows.len() as u64) >> 32) as usize
    }

    /// RFC 8290 §4.1: queues `packet` on its flow's queue (a queue that was not active
    /// joins the new list with a full quantum). Over the limit, drops from the head of
    /// the fattest queue until under it; `Err` if that dropped this very packet.
    pub fn enqueue(
        &mut self,
        now: Instant,
        packet: Vec<u8>,
        meta: PacketMeta,
    ) -> Result<(), Dropped> {
        self.stats.on_offer(packet.len());
        let index = self.flow_index(meta.flow_hash);
        let quantum = self.quantum();
        let entry = Entry {
            packet,
            meta,
            enqueued_at: now,
        };
        let Some(flow) = self.flows.get_mut(index) else {
            // Unreachable: the index is scaled below the number of queues.
            let len = entry.packet.len();
            self.stats.on_drop(DropReason::Overflow, len);
            return Err(Dropped {
                reason: DropReason::Overflow,
                packet: entry.packet,
            });
        };
        flow.queue.push(entry, &mut self.stats);
        if !flow.listed {
            flow.listed = true;
            flow.deficit = quantum;
            self.new_flows.push_back(index);
        }
        match self.drop_over_limit(index) {
            Some(packet) => Err(Dropped {
                reason: DropReason::Overflow,
                packet,
            }),
            None => Ok(()),
        }
    }

    /// Drops from the head of the fattest queue while over the limit. Returns the packet
    /// just queued on `index` if it was among those dropped (it was then alone there).
    fn drop_over_limit(&mut self, index: usize) -> Option<Vec<u8>> {
        let mut own = None;
        while self
            .config
            .limit
            .exceeded(self.stats.backlog_packets, self.stats.backlog_bytes)
        {
            let Some(fattest) = self.fattest() else {
                break;
            };
            let Some(flow) = self.flows.get_mut(fattest) else {
                break;
            };
            let Some(entry) = flow.queue.pop(&mut self.stats) else {
                break;
            };
            self.stats.on_drop(DropReason::Overflow, entry.packet.len());
            if fattest == index && flow.queue.len() == 0 {
                own = Some(entry.packet);
            }
        }
        own
    }

    /// The queue holding the most bytes (the first of equals), if any holds any.
    fn fattest(&self) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        for (index, flow) in self.flows.iter().enumerate() {
            let bytes = flow.queue.bytes;
            if bytes > 0 && best.is_none_or(|(_, most)| bytes > most) {
                best = Some((index, bytes));
            }
        }
        best.map(|(index, _)| index)
    }

    /// RFC 8290 §4.2: serves the new list, then the old, by deficit round robin.
    pub fn dequeue(&mut self, now: Instant) -> Option<Vec<u8>> {
        let params = CodelParams {
            target: self.config.target,
            interval: self.config.interval,
            mtu: self.config.mtu,
            ecn: self.config.ecn,
        };
        let quantum = self.quantum();
        loop {
            let (index, from_new) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&index), _) => (index, true),
                (None, Some(&index)) => (index, false),
                (None, None) => return None,
            };
            let list = if from_new {
                &mut self.new_flows
            } else {
                &mut self.old_flows
            };
            let Some(flow) = self.flows.get_mut(index) else {
                list.pop_front();
                continue;
            };
            // "If the flow's deficit is non-positive, the scheduler increases it by the
            // quantum and moves the queue to the end of the list of old queues."
            if flow.deficit <= 0 {
                flow.deficit = flow.deficit.saturating_add(quantum);
                list.pop_front();
                self.old_flows.push_back(index);
                continue;
            }
            let Some(entry) = flow
                .vars
                .dequeue(now, &params, &mut flow.queue, &mut self.stats)
            else {
                // "if the queue is empty: if it is on the new list, move it to the end
                // of the old list [only when the old list is not empty, as Linux], to
                // prevent starvation of old flows; otherwise remove it from the list."
                list.pop_front();
                if from_new && !self.old_flows.is_empty() {
                    self.old_flows.push_back(index);
                } else {
                    flow.listed = false;
                }
                continue;
            };
            let len = i64::try_from(entry.packet.len()).unwrap_or(i64::MAX);
            flow.deficit = flow.deficit.saturating_sub(len);
            self.stats.on_dequeue(now, &entry);
            return Some(entry.packet);
        }
    }

    /// What it has done so far.
    pub fn stats(&self) -> &QdiscStats {
        &self.stats
    }
}
