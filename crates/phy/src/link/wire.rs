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
