//! Drop-tail FIFO.

use alloc::vec::Vec;

use super::{Dropped, Limit, PacketMeta, PacketQueue, QdiscStats};
use crate::time::Instant;

/// A drop-tail FIFO's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FifoConfig {
    /// An arrival that would take the queue over this limit is dropped.
    pub limit: Limit,
}

impl Default for FifoConfig {
    /// 1000 packets, as Linux's `pfifo` under the default `txqueuelen`.
    fn default() -> FifoConfig {
        FifoConfig {
            limit: Limit::Packets(1000),
        }
    }
}

/// Drop-tail first-in first-out: an arrival that does not fit is dropped, nothing else
/// ever is.
#[derive(Debug, Clone)]
pub struct Fifo {
    config: FifoConfig,
    queue: PacketQueue,
    stats: QdiscStats,
}

impl Fifo {
    /// An empty FIFO.
    pub fn new(config: FifoConfig) -> Fifo {
        Fifo {
            config,
            queue: PacketQueue::default(),
            stats: QdiscStats::default(),
        }
    }

    /// Its parameters.
    pub fn config(&self) -> &FifoConfig {
        &self.config
    }

    /// Queues `packet` unless that would exceed the limit.
    pub fn enqueue(
        &mut self,
        now: Instant,
        packet: Vec<u8>,
        meta: PacketMeta,
    ) -> Result<(), Dropped> {
        self.queue
            .offer(now, packet, meta, self.config.limit, &mut self.stats)
    }

    /// The oldest packet.
    pub fn dequeue(&mut self, now: Instant) -> Option<Vec<u8>> {
        let entry = self.queue.pop(&mut self.stats)?;
        self.stats.on_dequeue(now, &entry);
        Some(entry.packet)
    }

    /// What it has done so far.
    pub fn stats(&self) -> &QdiscStats {
        &self.stats
    }
}
