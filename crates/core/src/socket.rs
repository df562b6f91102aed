//! A generational slab: the table behind every socket handle. A handle names a slot and
//! the generation the slot had when the socket was created, so a handle kept after
//! `close` is reported as invalid instead of reaching whichever socket reuses the slot.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

/// An index into a [`Slab`] plus the slot's generation at insertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Handle {
    index: u32,
    generation: u32,
}

#[derive(Debug)]
struct Slot<T> {
    /// Bumped every time the slot is emptied; a handle is live iff it matches.
    generation: u32,
    value: Option<T>,
}

/// Values addressed by generational handles; freed slots are reused.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    /// Store `value` and return its handle.
    pub(crate) fn insert(&mut self, value: T) -> Handle {
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.value = Some(value);
            return Handle {
                index,
                generation: slot.generation,
            };
        }
        let index = u32::try_from(self.slots.len()).expect("fewer than 2^32 sockets");
        self.slots.push(Slot {
            generation: 0,
            value: Some(value),
        });
        Handle {
            index,
            generation: 0,
        }
    }

    /// The value `handle` names, if it is still live.
    pub(crate) fn get(&self, handle: Handle) -> Option<&T> {
        let slot = self.slots.get(handle.index as usize)?;
        if slot.generation != handle.generation {
            return None;
        }
        slot.value.as_ref()
    }

    /// The value `handle` names, mutably, if it is still live.
    pub(crate) fn get_mut(&mut self, handle: Handle) -> Option<&mut T> {
        let slot = self.slots.get_mut(handle.index as usize)?;
        if slot.generation != handle.generation {
            return None;
        }
        slot.value.as_mut()
    }

    /// Remove and return the value; the handle (and every copy of it) becomes stale.
    pub(crate) fn remove(&mut self, handle: Handle) -> Option<T> {
        let slot = self.slots.get_mut(handle.index as usize)?;
        if slot.generation != handle.generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(handle.index);
        Some(value)
    }
}

/// A socket's bounded receive queue: at most `max_items` messages and `max_bytes` bytes
/// of message data.
#[derive(Debug)]
pub(crate) struct RecvQueue<M> {
    items: VecDeque<(M, Vec<u8>)>,
    /// Invariant: the sum of the queued messages' lengths.
    bytes: usize,
    max_items: usize,
    max_bytes: usize,
}

impl<M> RecvQueue<M> {
    pub(crate) fn new(max_items: usize, max_bytes: usize) -> RecvQueue<M> {
        RecvQueue {
            items: VecDeque::new(),
            bytes: 0,
            max_items,
            max_bytes,
        }
    }

    /// True when nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Queue a message, or hand it back when either limit would be exceeded.
    pub(crate) fn push(&mut self, meta: M, data: Vec<u8>) -> Result<(), Vec<u8>> {
        if self.items.len() >= self.max_items || self.bytes + data.len() > self.max_bytes {
            return Err(data);
        }
        self.bytes += data.len();
        self.items.push_back((meta, data));
        Ok(())
    }

    /// The oldest message.
    pub(crate) fn pop(&mut self) -> Option<(M, Vec<u8>)> {
        let (meta, data) = self.items.pop_front()?;
        self.bytes -= data.len();
        Some((meta, data))
    }

    /// Empty the queue, yielding the buffers for reuse.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.bytes = 0;
        self.items.drain(..).map(|(_, data)| data)
    }
}

/// Packet buffers kept for reuse, so the steady state allocates nothing per packet.
///
/// Two free lists: buffers of up to [`POOL_BUFFER_LIMIT`] bytes (frames at an MTU), and
/// a few of up to [`LARGE_BUFFER_LIMIT`] for the 64 KiB TCP segments a device's
/// offloads carry through forwarding ([`BufferPool::take_for`]), so that a gateway
/// forwarding them allocates and faults in no 64 KiB buffer per segment.
#[derive(Debug)]
pub(crate) struct BufferPool {
    free: Vec<Vec<u8>>,
    /// Buffers kept at most (`StackConfig::pool_buffers`); more are freed.
    limit: usize,
    /// Emptied buffers larger than [`POOL_BUFFER_LIMIT`], at most `limit / LARGE_SHARE`.
    large: Vec<Vec<u8>>,
}

/// Buffers bigger than this go to the large list, or are freed when it is full (a
/// reassembled 64 KiB datagram should not pin its memory forever).
const POOL_BUFFER_LIMIT: usize = 16 * 1024;

/// The largest buffer the pool keeps: an IP packet of 64 KiB with room to spare (an
/// IPv4 datagram is at most 65,535 bytes, an IPv6 packet without jumbograms 65,575).
const LARGE_BUFFER_LIMIT: usize = 66 * 1024;

/// One large buffer is kept for this many small ones (8 of the default 128: enough for
/// the segments one receive round of a runtime holds, 256 KiB a device, at most 528
/// KiB kept).
const LARGE_SHARE: usize = 16;

impl BufferPool {
    /// An empty pool keeping up to `limit` buffers.
    pub(crate) fn new(limit: usize) -> BufferPool {
        BufferPool {
            free: Vec::new(),
            limit,
            large: Vec::new(),
        }
    }

    /// Buffers kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.free.len() + self.large.len()
    }

    /// An empty buffer, recycled when one is available.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_default()
    }

    /// An empty buffer that holds `len` bytes: a kept large one for a packet larger
    /// than [`POOL_BUFFER_LIMIT`], else as [`BufferPool::take`].
    pub(crate) fn take_for(&mut self, len: usize) -> Vec<u8> {
        let mut buffer = if len > POOL_BUFFER_LIMIT {
            self.large.pop().unwrap_or_default()
        } else {
            self.take()
        };
        // Exact, so that the buffer stays under `LARGE_BUFFER_LIMIT` and is kept.
        buffer.reserve_exact(len);
        buffer
    }

    /// Bytes the kept buffers hold (their capacities).
    pub(crate) fn cached_bytes(&self) -> usize {
        let small: usize = self.free.iter().map(Vec::capacity).sum();
        small + self.large.iter().map(Vec::capacity).sum::<usize>()
    }

    /// Give a buffer back.
    pub(crate) fn give(&mut self, mut buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        let list = if capacity <= POOL_BUFFER_LIMIT {
            (self.free.len() < self.limit).then_some(&mut self.free)
        } else {
            (capacity <= LARGE_BUFFER_LIMIT && self.large.len() < self.limit / LARGE_SHARE)
                .then_some(&mut self.large)
        };
        if let Some(list) = list {
            buffer.clear();
            list.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_handles_are_rejected_after_reuse() {
        let mut slab = Slab::default();
        let a = slab.insert(1);
        assert_eq!(slab.remove(a), Some(1));
        let b = slab.insert(2);
        assert_eq!(slab.get(a), None);
        assert_eq!(slab.get(b), Some(&2));
        assert_eq!(slab.remove(a), None);
        assert_eq!(slab.get(b), Some(&2));
    }

    #[test]
    fn pool_keeps_a_few_large_buffers_for_large_packets() {
        let mut pool = BufferPool::new(32);
        let big = pool.take_for(65_535);
        assert!(big.capacity() >= 65_535);
        let address = big.as_ptr();
        pool.give(big);
        assert_eq!(pool.len(), 1, "a 64 KiB buffer is kept");
        assert!(
            pool.take().capacity() == 0,
            "a small take gets no large buffer"
        );
        let again = pool.take_for(60_000);
        assert_eq!(again.as_ptr(), address, "the kept buffer is taken again");
        assert!(again.is_empty());
        pool.give(again);
        // Larger than any IP packet: freed.
        pool.give(Vec::with_capacity(200_000));
        assert_eq!(pool.len(), 1);
        // At most limit / LARGE_SHARE (2 of 32) large buffers.
        for _ in 0..4 {
            pool.give(Vec::with_capacity(65_535));
        }
        assert_eq!(pool.len(), 32 / LARGE_SHARE);
        // Small buffers are kept as before.
        pool.give(Vec::with_capacity(1_500));
        assert_eq!(pool.len(), 3);
        assert!(pool.take_for(100).capacity() >= 1_500);
    }

    #[test]
    fn recv_queue_bounds_items_and_bytes() {
        let mut queue = RecvQueue::new(2, 10);
        assert!(queue.push((), alloc::vec![0; 6]).is_ok());
        assert!(queue.push((), alloc::vec![0; 5]).is_err(), "bytes limit");
        assert!(queue.push((), alloc::vec![0; 4]).is_ok());
        assert!(queue.push((), alloc::vec![]).is_err(), "items limit");
        assert_eq!(queue.pop().map(|(_, d)| d.len()), Some(6));
        assert!(queue.push((), alloc::vec![0; 6]).is_ok());
    }
}
