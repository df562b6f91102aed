//! Every connection's earliest deadline, in an indexed binary min-heap.
//!
//! A connection's next deadline moves on almost every segment (the retransmission timer
//! restarts, the delayed-ACK timer starts and stops), so the structure must make an
//! update cheap and exact: each connection has at most one entry, and its position in
//! the heap is tracked (by slot index), so an update sifts that one entry up or down in
//! O(log n) without allocating, and the minimum is always a live deadline (no lazy stale
//! entries: `poll_timeout` must be exact). Ties are broken by handle, so the order in
//! which due connections fire is the same as a sorted set of `(deadline, handle)` gives.
//!
//! TIME-WAIT deadlines (`set` with `queue: true`) go to a FIFO queue instead: each is
//! `now + 2*MSL` when set, so they arrive in order and one more costs a push, where the
//! heap would sift every new short deadline (a SYN's retransmission timer) past all of
//! them, and each removal back down. An entry goes to the queue only when it sorts
//! after every entry queued before it (else to the heap), so the queue stays sorted and
//! the earliest entry is the earlier of the heap's top and the queue's front: the same
//! order as before. An entry removed from the middle of the queue leaves a tombstone,
//! dropped when it reaches the front.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::TcpHandle;
use crate::time::Instant;

/// No entry for this slot.
const ABSENT: u32 = u32::MAX;
/// In `position`: the entry is in the queue, at this absolute index (the rest).
const QUEUED: u32 = 1 << 31;
/// Absolute queue indices are kept modulo 2^30 (a queue never holds that many: each
/// entry is a connection), so that a position fits 32 bits (4 bytes less per slot) and
/// no queued one reads as [`ABSENT`].
const QUEUE_INDEX: u32 = (1 << 30) - 1;
/// A removed queue entry (no real entry packs to it: see `set`).
const TOMBSTONE: Key = Key::MAX;

/// An entry packed so that `(deadline, handle)` order is integer order: the deadline's
/// nanoseconds in the high 64 bits, then the handle's index, then its generation (the
/// field order of `TcpHandle`'s derived `Ord`). One compare per step of a sift instead
/// of a three-field tuple comparison.
type Key = u128;

fn key(at: Instant, handle: TcpHandle) -> Key {
    (u128::from(at.as_nanos()) << 64)
        | (u128::from(handle.index) << 32)
        | u128::from(handle.generation)
}

fn unpack(key: Key) -> (Instant, TcpHandle) {
    let handle = TcpHandle {
        index: (key >> 32) as u32,
        generation: key as u32,
    };
    (Instant::from_nanos((key >> 64) as u64), handle)
}

fn slot_of(key: Key) -> usize {
    (key >> 32) as u32 as usize
}

/// Deadlines by connection, earliest first.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    /// The heap of packed `(deadline, handle)`: `heap[i] <= heap[2i+1], heap[2i+2]`.
    heap: Vec<Key>,
    /// Queued entries, ascending, with tombstones; the front is never a tombstone.
    queue: VecDeque<Key>,
    /// Absolute index of `queue[0]`, modulo 2^30 (positions of queued entries stay
    /// valid as the front is popped).
    queue_base: u32,
    /// The last entry pushed to the queue (live or not): a new one must sort after it.
    queue_last: Option<Key>,
    /// Live entries in the queue.
    queued: usize,
    /// For each slot index, where its entry is: a heap index, `QUEUED | absolute queue
    /// index`, or ABSENT.
    position: Vec<u32>,
}

impl Deadlines {
    /// An empty set.
    pub fn new() -> Deadlines {
        Deadlines::default()
    }

    /// Entries in the set.
    pub fn len(&self) -> usize {
        self.heap.len() + self.queued
    }

    /// The earliest entry.
    #[inline]
    pub fn first(&self) -> Option<(Instant, TcpHandle)> {
        if self.queued == 0 {
            return self.heap.first().map(|&k| unpack(k));
        }
        let first = match (self.heap.first(), self.queue.front()) {
            (Some(&h), Some(&q)) => h.min(q),
            (Some(&h), None) => h,
            (None, Some(&q)) => q,
            (None, None) => return None,
        };
        Some(unpack(first))
    }

    /// Give back the storage for slots from `slots` on (the table shrank to that many;
    /// none of them has an entry) and the heap's and queue's unused capacity beyond
    /// twice their length.
    pub fn shrink(&mut self, slots: usize) {
        debug_assert!(self.position.iter().skip(slots).all(|&p| p == ABSENT));
        self.position.truncate(slots);
        self.position.shrink_to(slots);
        self.heap.shrink_to(2 * self.heap.len());
        self.queue.shrink_to(2 * self.queue.len());
    }

    /// The first `n` live entries of the TIME-WAIT queue, earliest first.
    pub fn queued_first(&self, n: usize) -> impl Iterator<Item = TcpHandle> + '_ {
        self.queue
            .iter()
            .filter(|&&k| k != TOMBSTONE)
            .take(n)
            .map(|&k| unpack(k).1)
    }

    /// The deadline registered for `handle`'s slot, if any.
    #[cfg(test)]
    pub fn get(&self, handle: TcpHandle) -> Option<Instant> {
        let at = *self.position.get(handle.index as usize)?;
        match at {
            ABSENT => None,
            at if at & QUEUED != 0 => {
                let i = (at & !QUEUED).wrapping_sub(self.queue_base) & QUEUE_INDEX;
                Some(unpack(self.queue[i as usize]).0)
            }
            at => Some(unpack(self.heap[at as usize]).0),
        }
    }

    /// Register `at` for `handle` (replacing its slot's entry), or remove it (None).
    /// `queue`: a TIME-WAIT deadline, which may go to the FIFO queue (module docs).
    #[inline]
    pub fn set(&mut self, handle: TcpHandle, at: Option<Instant>, queue: bool) {
        let slot = handle.index as usize;
        let pos = self.position.get(slot).copied().unwrap_or(ABSENT);
        // Every connection outside TIME-WAIT: the heap alone, as before the queue.
        if !queue && (pos == ABSENT || pos & QUEUED == 0) {
            match (pos, at) {
                (ABSENT, None) => {}
                (ABSENT, Some(at)) => self.push(key(at, handle)),
                (pos, None) => self.remove_at(pos as usize),
                (pos, Some(at)) => self.update(pos as usize, key(at, handle)),
            }
            return;
        }
        self.set_slow(pos, at.map(|at| key(at, handle)), queue);
    }

    /// [`Deadlines::set`] when the queue is involved: the entry is queued, or may be.
    #[inline(never)]
    fn set_slow(&mut self, pos: u32, entry: Option<Key>, queue: bool) {
        let Some(entry) = entry else {
            self.remove(pos);
            return;
        };
        let to_queue =
            queue && entry != TOMBSTONE && self.queue_last.is_none_or(|last| entry > last);
        if pos != ABSENT && pos & QUEUED == 0 && !to_queue {
            self.update(pos as usize, entry);
            return;
        }
        self.remove(pos);
        if to_queue {
            self.push_queue(entry);
        } else {
            self.push(entry);
        }
    }

    /// Remove the entry at `pos` (a `position` value; ABSENT does nothing).
    fn remove(&mut self, pos: u32) {
        match pos {
            ABSENT => {}
            pos if pos & QUEUED != 0 => self.remove_queued(pos & !QUEUED),
            pos => self.remove_at(pos as usize),
        }
    }

    /// Remove the queue entry at absolute index `at`.
    #[inline(never)]
    fn remove_queued(&mut self, at: u32) {
        let i = (at.wrapping_sub(self.queue_base) & QUEUE_INDEX) as usize;
        self.position[slot_of(self.queue[i])] = ABSENT;
        self.queue[i] = TOMBSTONE;
        self.queued -= 1;
        self.drop_tombstones();
    }

    /// Keep the invariant that the queue's front is live.
    fn drop_tombstones(&mut self) {
        while self.queue.front() == Some(&TOMBSTONE) {
            self.queue.pop_front();
            self.queue_base = (self.queue_base + 1) & QUEUE_INDEX;
        }
        if self.queue.is_empty() {
            // Nothing queued: any entry may start the queue again.
            self.queue_last = None;
        }
    }

    /// A new queue entry, its slot having none (it sorts after `queue_last`).
    #[inline(never)]
    fn push_queue(&mut self, entry: Key) {
        let slot = slot_of(entry);
        if slot >= self.position.len() {
            self.position.resize(slot + 1, ABSENT);
        }
        let at = self.queue_base.wrapping_add(self.queue.len() as u32) & QUEUE_INDEX;
        self.position[slot] = QUEUED | at;
        self.queue.push_back(entry);
        self.queue_last = Some(entry);
        self.queued += 1;
    }

    /// A new heap entry, its slot having none.
    fn push(&mut self, entry: Key) {
        let slot = slot_of(entry);
        if slot >= self.position.len() {
            self.position.resize(slot + 1, ABSENT);
        }
        let i = self.heap.len();
        self.heap.push(entry);
        self.position[slot] = i as u32;
        self.sift_up(i);
    }

    /// Replace the heap entry at `i` (the same slot's), restoring the order around it.
    #[inline]
    fn update(&mut self, i: usize, entry: Key) {
        let old = self.heap[i];
        self.heap[i] = entry;
        if entry < old {
            if i > 0 && self.heap[(i - 1) / 2] > entry {
                self.sift_up(i);
            }
        } else {
            // Only when a child now sorts before it (with one or two entries, the
            // common case, there is rarely a child at all).
            let left = 2 * i + 1;
            let n = self.heap.len();
            if (left < n && self.heap[left] < entry)
                || (left + 1 < n && self.heap[left + 1] < entry)
            {
                self.sift_down(i);
            }
        }
    }

    /// Remove and return the earliest entry.
    pub fn pop_first(&mut self) -> Option<(Instant, TcpHandle)> {
        let first = self.first()?;
        let slot = first.1.index as usize;
        self.remove(self.position[slot]);
        Some(first)
    }

    fn remove_at(&mut self, i: usize) {
        let gone = self.heap[i];
        self.position[slot_of(gone)] = ABSENT;
        let last = self.heap.pop().expect("entry present");
        if i < self.heap.len() {
            let old = self.heap[i];
            self.heap[i] = last;
            self.position[slot_of(last)] = i as u32;
            if last < old {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        let entry = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            let above = self.heap[parent];
            if above <= entry {
                break;
            }
            self.heap[i] = above;
            self.position[slot_of(above)] = i as u32;
            i = parent;
        }
        self.heap[i] = entry;
        self.position[slot_of(entry)] = i as u32;
    }

    fn sift_down(&mut self, mut i: usize) {
        let entry = self.heap[i];
        let n = self.heap.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && self.heap[right] < self.heap[left] {
                right
            } else {
                left
            };
            let below = self.heap[child];
            if entry <= below {
                break;
            }
            self.heap[i] = below;
            self.position[slot_of(below)] = i as u32;
            i = child;
        }
        self.heap[i] = entry;
        self.position[slot_of(entry)] = i as u32;
    }
}

#[cfg(test)]
mod tests {
    use alloc::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn handle(index: u32) -> TcpHandle {
        TcpHandle {
            index,
            generation: index % 3,
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Slot, deadline, the TIME-WAIT hint.
        Set(u32, Option<u64>, bool),
        /// A TIME-WAIT deadline later than all before (as `now + 2*MSL` is).
        Later(u32),
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..40, proptest::option::weighted(0.8, 0u64..50), any::<bool>())
                .prop_map(|(i, t, q)| Op::Set(i, t, q)),
            2 => (0u32..40).prop_map(Op::Later),
            1 => Just(Op::Pop),
        ]
    }

    proptest! {
        /// Against a sorted set of (deadline, handle) with one entry per slot: the same
        /// first entry after every operation, the same order when drained.
        #[test]
        fn matches_a_sorted_set(ops in proptest::collection::vec(op(), 0..300)) {
            let mut heap = Deadlines::new();
            let mut model: BTreeSet<(Instant, TcpHandle)> = BTreeSet::new();
            let mut current: [Option<Instant>; 40] = [None; 40];
            let mut later = 20u64;
            for op in ops {
                let op = match op {
                    Op::Later(i) => {
                        later += 1;
                        Op::Set(i, Some(later / 2), true)
                    }
                    op => op,
                };
                match op {
                    Op::Later(_) => unreachable!(),
                    Op::Set(i, at, queue) => {
                        let at = at.map(Instant::from_nanos);
                        if let Some(old) = current[i as usize] {
                            model.remove(&(old, handle(i)));
                        }
                        if let Some(at) = at {
                            model.insert((at, handle(i)));
                        }
                        current[i as usize] = at;
                        heap.set(handle(i), at, queue);
                    }
                    Op::Pop => {
                        let expected = model.pop_first();
                        if let Some((_, h)) = expected {
                            current[h.index as usize] = None;
                        }
                        prop_assert_eq!(heap.pop_first(), expected);
                    }
                }
                prop_assert_eq!(heap.first(), model.first().copied());
                prop_assert_eq!(heap.len(), model.len());
                for i in 0..40 {
                    prop_assert_eq!(heap.get(handle(i)), current[i as usize]);
                }
            }
            while let Some(expected) = model.pop_first() {
                prop_assert_eq!(heap.pop_first(), Some(expected));
            }
            prop_assert_eq!(heap.pop_first(), None);
        }
    }
}
