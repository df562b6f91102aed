//! Every connection's earliest deadline, in an indexed binary min-heap.
//!
//! A connection's next deadline moves on almost every segment (the retransmission timer
//! restarts, the delayed-ACK timer starts and stops), so the structure must make an
//! update cheap and exact: each connection has at most one entry, and its position in
//! the heap is tracked (by slot index), so an update sifts that one entry up or down in
//! O(log n) without allocating, and the minimum is always a live deadline (no lazy stale
//! entries: `poll_timeout` must be exact). Ties are broken by handle, so the order in
//! which due connections fire is the same as a sorted set of `(deadline, handle)` gives.

use alloc::vec::Vec;

use super::TcpHandle;
use crate::time::Instant;

/// No entry for this slot.
const ABSENT: u32 = u32::MAX;

/// Deadlines by connection, earliest first.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    /// The heap: `heap[i] <= heap[2i+1], heap[2i+2]` by `(deadline, handle)`.
    heap: Vec<(Instant, TcpHandle)>,
    /// For each slot index, where its entry is in `heap` (ABSENT when none).
    position: Vec<u32>,
}

impl Deadlines {
    /// An empty set.
    pub fn new() -> Deadlines {
        Deadlines::default()
    }

    /// Entries in the set.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// The earliest entry.
    pub fn first(&self) -> Option<(Instant, TcpHandle)> {
        self.heap.first().copied()
    }

    /// The deadline registered for `handle`'s slot, if any.
    #[cfg(test)]
    pub fn get(&self, handle: TcpHandle) -> Option<Instant> {
        let at = *self.position.get(handle.index as usize)?;
        (at != ABSENT).then(|| self.heap[at as usize].0)
    }

    /// Register `at` for `handle` (replacing its slot's entry), or remove it (None).
    pub fn set(&mut self, handle: TcpHandle, at: Option<Instant>) {
        let slot = handle.index as usize;
        if slot >= self.position.len() {
            if at.is_none() {
                return;
            }
            self.position.resize(slot + 1, ABSENT);
        }
        let pos = self.position[slot];
        match (pos, at) {
            (ABSENT, None) => {}
            (ABSENT, Some(at)) => {
                let i = self.heap.len();
                self.heap.push((at, handle));
                self.position[slot] = i as u32;
                self.sift_up(i);
            }
            (pos, None) => self.remove_at(pos as usize),
            (pos, Some(at)) => {
                let i = pos as usize;
                let old = self.heap[i];
                self.heap[i] = (at, handle);
                if (at, handle) < old {
                    self.sift_up(i);
                } else {
                    self.sift_down(i);
                }
            }
        }
    }

    /// Remove and return the earliest entry.
    pub fn pop_first(&mut self) -> Option<(Instant, TcpHandle)> {
        let first = self.first()?;
        self.remove_at(0);
        Some(first)
    }

    fn remove_at(&mut self, i: usize) {
        let (_, gone) = self.heap[i];
        self.position[gone.index as usize] = ABSENT;
        let last = self.heap.pop().expect("entry present");
        if i < self.heap.len() {
            let old = self.heap[i];
            self.heap[i] = last;
            self.position[last.1.index as usize] = i as u32;
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
            self.position[above.1.index as usize] = i as u32;
            i = parent;
        }
        self.heap[i] = entry;
        self.position[entry.1.index as usize] = i as u32;
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
            self.position[below.1.index as usize] = i as u32;
            i = child;
        }
        self.heap[i] = entry;
        self.position[entry.1.index as usize] = i as u32;
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
        Set(u32, Option<u64>),
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..40, proptest::option::weighted(0.8, 0u64..50)).prop_map(|(i, t)| Op::Set(i, t)),
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
            for op in ops {
                match op {
                    Op::Set(i, at) => {
                        let at = at.map(Instant::from_nanos);
                        if let Some(old) = current[i as usize] {
                            model.remove(&(old, handle(i)));
                        }
                        if let Some(at) = at {
                            model.insert((at, handle(i)));
                        }
                        current[i as usize] = at;
                        heap.set(handle(i), at);
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
