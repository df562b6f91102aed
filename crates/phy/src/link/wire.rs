
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
                assert_eq!(wire.peek().map(InFlight::key), heap.peek().map(InFlight::key));
                taken.0.extend(wire.pop().map(|c| c.key()));
                taken.1.extend(heap.pop().map(|c| c.key()));
            }
        }
        assert_eq!(wire.len(), heap.len());
        taken.0.extend(std::iter::from_fn(|| wire.pop()).map(|c| c.key()));
        taken.1.extend(std::iter::from_fn(|| heap.pop()).map(|c| c.key()));
        assert_eq!(taken.0, taken.1);
        assert_eq!(taken.0.len(), arrivals.len());
        assert_eq!(wire.len(), 0);
    }
}
