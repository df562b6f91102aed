//! The table's parked TIME-WAIT connections ([`Parked`], `conn/park.rs`): records in
//! a slab of their own, named by handles whose index has [`PARKED`] set (the 4-tuple
//! table holds such an index for a parked tuple), and their deadlines in a queue.
//!
//! Each deadline is `now + 2*MSL` when a connection enters TIME-WAIT or a FIN
//! retransmission restarts it, so records arrive nearly in deadline order: the queue
//! is a FIFO kept sorted (an earlier deadline, from a connection parked again without a
//! restart, is inserted in its place), whose front is always live, so the earliest
//! deadline is exact. A record removed from the middle leaves its queue entry behind
//! (its generation no longer matches), dropped when it reaches the front.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::TcpHandle;
use super::conn::Parked;
use crate::time::Instant;

/// In a handle's or a 4-tuple entry's index: a parked record's, not a slot's.
pub(crate) const PARKED: u32 = 1 << 31;

/// One place for a record; the generation changes every time it is reused.
#[derive(Debug, Default)]
struct Entry {
    generation: u32,
    record: Option<Parked>,
}

/// Parked TIME-WAIT connections, earliest deadline first.
#[derive(Debug, Default)]
pub(crate) struct TimeWaits {
    entries: Vec<Entry>,
    /// Free entry indices, to reuse first.
    free: Vec<u32>,
    /// `(deadline, index, generation)`, ascending; the front is live.
    queue: VecDeque<(Instant, u32, u32)>,
    /// Records held.
    live: usize,
    /// The generation an entry pushed anew starts at: above that of every entry
    /// given back, so no handle to an old record matches a new one.
    floor: u32,
}

impl TimeWaits {
    /// Records held.
    pub fn len(&self) -> usize {
        self.live
    }

    /// The record `handle` names.
    #[inline]
    pub fn get(&self, handle: TcpHandle) -> Option<&Parked> {
        let entry = self.entries.get((handle.index & !PARKED) as usize)?;
        entry
            .record
            .as_ref()
            .filter(|_| handle.index & PARKED != 0 && entry.generation == handle.generation)
    }

    /// The handle of the record at `index` (a 4-tuple entry's, [`PARKED`] set).
    #[inline]
    pub fn handle_at(&self, index: u32) -> Option<(TcpHandle, &Parked)> {
        let entry = self.entries.get((index & !PARKED) as usize)?;
        let record = entry.record.as_ref()?;
        Some((
            TcpHandle {
                index,
                generation: entry.generation,
            },
            record,
        ))
    }

    /// Hold `record`; its handle.
    pub fn insert(&mut self, record: Parked) -> TcpHandle {
        let deadline = record.deadline;
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.entries.push(Entry {
                    generation: self.floor,
                    record: None,
                });
                (self.entries.len() - 1) as u32
            }
        };
        let entry = &mut self.entries[index as usize];
        entry.record = Some(record);
        self.live += 1;
        let item = (deadline, index, entry.generation);
        match self.queue.back() {
            Some(&(last, ..)) if last > deadline => {
                let at = self.queue.partition_point(|&(d, ..)| d <= deadline);
                self.queue.insert(at, item);
            }
            _ => self.queue.push_back(item),
        }
        TcpHandle {
            index: index | PARKED,
            generation: entry.generation,
        }
    }

    /// Take the record `handle` names out.
    pub fn remove(&mut self, handle: TcpHandle) -> Option<Parked> {
        self.get(handle)?;
        let index = handle.index & !PARKED;
        let entry = &mut self.entries[index as usize];
        let record = entry.record.take();
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(index);
        self.live -= 1;
        self.drop_stale_front();
        if self.live == 0 && self.entries.capacity() > 64 {
            self.clear();
        } else if self.live * 4 <= self.entries.capacity() && self.entries.capacity() > 64 {
            self.compact_tail();
        }
        record
    }

    /// The earliest deadline and its record's handle.
    #[inline]
    pub fn first(&self) -> Option<(Instant, TcpHandle)> {
        let &(at, index, generation) = self.queue.front()?;
        Some((
            at,
            TcpHandle {
                index: index | PARKED,
                generation,
            },
        ))
    }

    /// The earliest deadline.
    #[inline]
    pub fn first_at(&self) -> Option<Instant> {
        self.queue.front().map(|&(at, ..)| at)
    }

    /// Every record's handle, in slab order.
    pub fn handles(&self) -> impl Iterator<Item = TcpHandle> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(index, entry)| {
                entry.record.as_ref()?;
                Some(TcpHandle {
                    index: index as u32 | PARKED,
                    generation: entry.generation,
                })
            })
    }

    fn drop_stale_front(&mut self) {
        while let Some(&(_, index, generation)) = self.queue.front() {
            // An entry given back by `compact_tail` is gone from the slab.
            if self
                .entries
                .get(index as usize)
                .is_some_and(|e| e.record.is_some() && e.generation == generation)
            {
                return;
            }
            self.queue.pop_front();
        }
    }

    /// Nothing held: give all storage back (`floor` keeps old handles stale).
    fn clear(&mut self) {
        let floor = self.entries.iter().map(|e| e.generation).max().unwrap_or(0);
        self.entries = Vec::new();
        self.free = Vec::new();
        self.queue = VecDeque::new();
        self.floor = self.floor.max(floor);
    }

    /// Give back the free entries at the end, and storage beyond twice what is held.
    fn compact_tail(&mut self) {
        while self.entries.last().is_some_and(|e| e.record.is_none()) {
            let entry = self.entries.pop().unwrap_or_default();
            self.floor = self.floor.max(entry.generation);
        }
        let len = self.entries.len() as u32;
        self.free.retain(|&i| i < len);
        self.entries.shrink_to(2 * self.entries.len());
        self.free.shrink_to(2 * self.free.len());
        self.queue.shrink_to(2 * self.queue.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    /// Records removed out of order, the slab given back from its end while older
    /// queue entries still name the entries it gave back: the queue skips them, the
    /// earliest deadline is always a live record's, and old handles stay stale.
    #[test]
    fn the_queue_survives_the_slab_shrinking_under_it() {
        let mut waits = TimeWaits::default();
        let handles: Vec<TcpHandle> = (0..300)
            .map(|i| waits.insert(Parked::dummy(at(i))))
            .collect();
        // Everything but the first, last first: the slab shrinks from its end while
        // the first (the queue's front) keeps every later queue entry behind it.
        for &h in handles[1..].iter().rev() {
            assert!(waits.remove(h).is_some());
            assert_eq!(waits.first().map(|(t, _)| t), Some(at(0)));
        }
        assert!(waits.entries.len() < 300, "the slab gave entries back");
        // New records at the indices given back; the old handles name none of them.
        let new: Vec<TcpHandle> = (0..50)
            .map(|i| waits.insert(Parked::dummy(at(1000 + i))))
            .collect();
        for &h in &handles[1..] {
            assert!(waits.get(h).is_none());
        }
        assert!(waits.remove(handles[0]).is_some());
        assert_eq!(waits.first(), Some((at(1000), new[0])));
        // Out of order: an earlier deadline goes in its place.
        let early = waits.insert(Parked::dummy(at(5)));
        assert_eq!(waits.first(), Some((at(5), early)));
        for h in new.into_iter().chain([early]) {
            assert!(waits.remove(h).is_some());
        }
        assert_eq!((waits.len(), waits.first()), (0, None));
    }
}
