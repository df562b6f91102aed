//! The copies on the wire, in arrival order.
//!
//! Most links deliver in the order they send (a constant delay after a FIFO
//! transmitter): those copies go to a plain queue, and only a copy that arrives before
//! one sent earlier (reordering, a shorter delay after a change) goes to a heap. The
//! next copy is the earlier of the two fronts, so the order is the heap-only order
//! (arrival, then submission), at a queue's cost per frame instead of a heap's.

use std::collections::{BinaryHeap, VecDeque};

use super::InFlight;

/// The copies in flight, earliest (arrival, submission) first.
#[derive(Debug, Clone, Default)]
pub(super) struct Wire {
    /// Copies in non-decreasing (arrival, submission) order.
    in_order: VecDeque<InFlight>,
    /// Copies that arrive before the last one in `in_order` (a min-heap through
    /// `InFlight`'s reversed order).
    overtaking: BinaryHeap<InFlight>,
}

impl Wire {
    /// Puts a copy on the wire. Copies are pushed in submission order.
    pub(super) fn push(&mut self, copy: InFlight) {
        match self.in_order.back() {
            Some(last) if last.key() > copy.key() => self.overtaking.push(copy),
            _ => self.in_order.push_back(copy),
        }
    }

    /// The copy that arrives next.
    pub(super) fn peek(&self) -> Option<&InFlight> {
        match (self.in_order.front(), self.overtaking.peek()) {
            (Some(a), Some(b)) => Some(if b.key() < a.key() { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// Takes the copy that arrives next.
    pub(super) fn pop(&mut self) -> Option<InFlight> {
        let heap_first = match (self.in_order.front(), self.overtaking.peek()) {
            (Some(a), Some(b)) => b.key() < a.key(),
            (None, _) => true,
            (Some(_), None) => false,
        };
        if heap_first {
            self.overtaking.pop()
        } else {
            self.in_order.pop_front()
        }
    }

    /// Copies on the wire.
    pub(super) fn len(&self) -> usize {
        self.in_order.len() + self.overtaking.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BinaryHeap;

    use impnet_core::Instant;

    use super::{InFlight, Wire};

    fn copy(arrival: u64, seq: u64) -> InFlight {
        InFlight {
            arrival: Instant::from_nanos(arrival),
            seq,
            frame: Vec::new(),
            whole: None,
            tag: None,
        }
    }

    #[test]
    fn copies_leave_as_a_heap_would_give_them_whatever_overtakes() {
        // In order, ties, copies that overtake (5, 1), and takes between the puts.
        let arrivals = [10, 20, 20, 5, 30, 25, 25, 40, 1, 40, 35, 50];
        let (mut wire, mut heap) = (Wire::default(), BinaryHeap::new());
        let mut taken = (Vec::new(), Vec::new());
        for (seq, &at) in arrivals.iter().enumerate() {
            wire.push(copy(at, seq as u64));
            heap.push(copy(at, seq as u64));
            if seq % 4 == 3 {
                assert_eq!(
                    wire.peek().map(InFlight::key),
                    heap.peek().map(InFlight::key)
                );
                taken.0.extend(wire.pop().map(|c| c.key()));
                taken.1.extend(heap.pop().map(|c| c.key()));
            }
        }
        assert_eq!(wire.len(), heap.len());
        taken
            .0
            .extend(std::iter::from_fn(|| wire.pop()).map(|c| c.key()));
        taken
            .1
            .extend(std::iter::from_fn(|| heap.pop()).map(|c| c.key()));
        assert_eq!(taken.0, taken.1);
        assert_eq!(taken.0.len(), arrivals.len());
        assert_eq!(wire.len(), 0);
    }
}
