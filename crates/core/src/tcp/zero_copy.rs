//! Sends that hand the connection a buffer and reads that borrow the receive ring: the
//! two copies of a bulk transfer that are not the wire's (application to send ring,
//! receive ring to application) made optional, as seed 000's "page-aligned" reads and
//! "a send which released the virtual memory" planned in 1981.
//!
//! [`Tcp::send_owned`] keeps the application's `Vec<u8>` in the send buffer as it is
//! (`SendBuffer::write_owned`) and drops it once the peer has acknowledged all of it;
//! [`Tcp::recv_with`] hands a closure the readable bytes where they lie in the ring and
//! consumes what it says it used. Both mix freely with `send` and `recv`: the stream's
//! order is the order of the calls.

use alloc::vec::Vec;

use super::conn::SendOwnedError;
use super::{Tcp, TcpError, TcpHandle};
use crate::time::Instant;

impl Tcp {
    /// Queue `data` on the connection without copying it: the send buffer keeps the
    /// `Vec` (one shorter than [`OWNED_MIN`](super::buffer::OWNED_MIN) is copied) and
    /// frees it once acknowledged. All of it or none: without room for all of it (its
    /// allocation counts) it comes back with `WouldBlock`.
    pub fn send_owned(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        data: Vec<u8>,
    ) -> Result<(), SendOwnedError> {
        let mut data = Some(data);
        let result = self.with_conn(now, handle, |conn, _| {
            let data = data.take().unwrap_or_default();
            Ok(conn.send_owned(data))
        });
        match result {
            Ok(result) => result,
            Err(error) => Err(SendOwnedError {
                error,
                data: data.unwrap_or_default(),
            }),
        }
    }

    /// Read without a copy: `f` sees the readable bytes in place (the part up to the
    /// ring's end; call again for the rest) and returns how many it used, which are
    /// consumed. Returns the bytes consumed. At end of stream `f` gets an empty slice
    /// and the result is `Ok(0)`; with nothing to read yet, `WouldBlock` and `f` is not
    /// called.
    pub fn recv_with(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        f: impl FnOnce(&[u8]) -> usize,
    ) -> Result<usize, TcpError> {
        self.with_conn(now, handle, |conn, ctx| {
            conn.recv_with(&ctx.shared.config, f)
        })
    }

    /// [`Tcp::recv`] of up to `max` bytes without the copy: `f` is shown them where
    /// they lie (one piece, or two where the ring wraps), in order; everything else as
    /// `recv` into a buffer of `max` bytes (the same window updates and results).
    pub fn recv_each(
        &mut self,
        now: Instant,
        handle: TcpHandle,
        max: usize,
        f: impl FnMut(&[u8]),
    ) -> Result<usize, TcpError> {
        self.with_conn(now, handle, |conn, ctx| {
            let read = conn.recv_each(&ctx.shared.config, max, f);
            conn.shed_rings(&mut ctx.shared.pool);
            read
        })
    }
}

#[cfg(test)]
mod tests {
    use alloc::collections::VecDeque;
    use alloc::vec::Vec;

    use proptest::prelude::*;

    use super::super::buffer::{OWNED_MIN, SendBuffer};

    /// One call on the send buffer.
    #[derive(Debug, Clone)]
    enum Op {
        /// Copy this many bytes in.
        Write(usize),
        /// Hand over a buffer of this many bytes with this much spare capacity.
        Owned(usize, usize),
        /// Acknowledge this many bytes.
        Consume(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..3000).prop_map(Op::Write),
            (0usize..6000, 0usize..500).prop_map(|(n, spare)| Op::Owned(n, spare)),
            (0usize..5000).prop_map(Op::Consume),
        ]
    }

    proptest! {
        /// Ring bytes and owned buffers in any order read back as one queue: every range
        /// of `slices` and `peek` equals the model's, the free room charges the owned
        /// buffers' spare capacity, and acknowledged buffers are released.
        #[test]
        fn send_buffer_with_owned_buffers_matches_a_queue(ops in proptest::collection::vec(op(), 0..60), probe in 0usize..20_000) {
            let capacity = 16 * 1024;
            let mut b = SendBuffer::new(capacity);
            let mut model: VecDeque<u8> = VecDeque::new();
            // Spare capacity of each owned buffer still held, by the stream offset of its end.
            let mut slack: VecDeque<(usize, usize)> = VecDeque::new();
            let (mut next, mut acked) = (0u8, 0usize);
            let mut fresh = |n: usize| -> Vec<u8> {
                (0..n).map(|_| { next = next.wrapping_add(7); next }).collect()
            };
            for op in ops {
                let charged: usize = slack.iter().map(|&(_, s)| s).sum();
                prop_assert_eq!(b.free(), capacity - model.len() - charged);
                match op {
                    Op::Write(n) => {
                        let data = fresh(n);
                        let took = b.write(&data);
                        prop_assert_eq!(took, n.min(b.free() + took));
                        model.extend(&data[..took]);
                    }
                    Op::Owned(n, spare) => {
                        let mut data = Vec::with_capacity(n + spare);
                        data.extend(fresh(n));
                        let spare = data.capacity() - n;
                        let copied = n < OWNED_MIN;
                        let fits = if copied { n <= b.free() } else { n + spare <= b.free() };
                        let kept = data.clone();
                        match b.write_owned(data) {
                            Ok(()) => {
                                prop_assert!(fits);
                                model.extend(&kept);
                                if !copied {
                                    slack.push_back((acked + model.len(), spare));
                                }
                            }
                            Err(back) => {
                                prop_assert!(!fits);
                                prop_assert_eq!(back, kept);
                            }
                        }
                    }
                    Op::Consume(n) => {
                        let n = n.min(model.len());
                        b.consume(n);
                        model.drain(..n);
                        acked += n;
                        while slack.front().is_some_and(|&(end, _)| end <= acked) {
                            slack.pop_front();
                        }
                    }
                }
                prop_assert_eq!(b.len(), model.len());
                let offset = probe % (model.len() + 1);
                let len = probe / 3;
                let joined: Vec<u8> = b.slices(offset, len).flatten().copied().collect();
                let expected: Vec<u8> = model.iter().skip(offset).take(len).copied().collect();
                prop_assert_eq!(&joined, &expected);
                prop_assert_eq!(b.slices(offset, len).len(), expected.len());
                let mut out = alloc::vec![0u8; len];
                let n = b.peek(offset, &mut out);
                prop_assert_eq!(&out[..n], &expected[..]);
            }
            b.consume(usize::MAX);
            prop_assert_eq!(b.free(), capacity, "everything released");
            prop_assert_eq!(b.owned(), 0);
        }
    }
}
