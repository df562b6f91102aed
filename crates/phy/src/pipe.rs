//! An in-memory pipe joining two stacks in one process (or two threads): what one end
//! sends, the other receives, in order, with no delay. Add delay and loss by wrapping an
//! end in [`Impair`](crate::Impair).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use impnet_core::Instant;

use crate::device::{Device, DeviceError};

/// Frames each direction holds by default before dropping.
pub const DEFAULT_PIPE_CAPACITY: usize = 1024;

/// Spare buffers kept per direction for reuse, so steady traffic does not allocate.
const FREE_LIST_LIMIT: usize = 64;

/// Counters for the frames one end sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipeStats {
    /// Frames accepted into the peer's queue.
    pub sent: u64,
    /// Frames dropped because the peer's queue was full.
    pub dropped_full: u64,
    /// Frames the peer has taken out with `recv`.
    pub delivered: u64,
}

/// One direction of the pipe: the frames waiting for the receiving end.
#[derive(Debug, Default)]
struct Direction {
    frames: VecDeque<Vec<u8>>,
    /// Buffers of received frames, reused by later sends.
    free: Vec<Vec<u8>>,
    stats: PipeStats,
}

#[derive(Debug)]
struct Shared {
    /// `directions[i]` holds frames sent by end `i`, to be received by end `1 - i`.
    directions: [Direction; 2],
    /// `open[i]` is false once end `i` has been dropped.
    open: [bool; 2],
    capacity: usize,
    mtu: usize,
}

/// One end of an in-memory pipe; a [`Device`]. `Send`, so the two ends can run on two
/// threads.
#[derive(Debug)]
pub struct PipeEnd {
    shared: Arc<Mutex<Shared>>,
    /// Which end this is: 0 or 1.
    side: usize,
}

/// Two joined pipe ends carrying frames up to `mtu` bytes, each direction holding up to
/// [`DEFAULT_PIPE_CAPACITY`] frames.
pub fn pipe(mtu: usize) -> (PipeEnd, PipeEnd) {
    pipe_with_capacity(mtu, DEFAULT_PIPE_CAPACITY)
}

/// Two joined pipe ends carrying frames up to `mtu` bytes, each direction holding up to
/// `capacity` frames; a frame sent when the peer's queue is full is dropped and counted
/// in [`PipeStats::dropped_full`], as a NIC's ring would drop it.
pub fn pipe_with_capacity(mtu: usize, capacity: usize) -> (PipeEnd, PipeEnd) {
    let shared = Arc::new(Mutex::new(Shared {
        directions: [Direction::default(), Direction::default()],
        open: [true, true],
        capacity,
        mtu,
    }));
    (
        PipeEnd {
            shared: Arc::clone(&shared),
            side: 0,
        },
        PipeEnd { shared, side: 1 },
    )
}

impl PipeEnd {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic on the other thread cannot leave the queues inconsistent (every
        // critical section is a push or a pop), so a poisoned lock is still usable.
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counters for the frames this end has sent.
    pub fn stats(&self) -> PipeStats {
        self.lock().directions[self.side].stats
    }

    /// Frames waiting for this end to receive them.
    pub fn pending(&self) -> usize {
        self.lock().directions[1 - self.side].frames.len()
    }

    /// Whether the other end still exists.
    pub fn peer_open(&self) -> bool {
        self.lock().open[1 - self.side]
    }
}

impl Device for PipeEnd {
    /// Frames already queued are still delivered after the peer is dropped; once they
    /// are gone, `recv` returns [`DeviceError::Closed`].
    fn recv(&mut self, _now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        let side = self.side;
        let mut shared = self.lock();
        let peer_open = shared.open[1 - side];
        let incoming = &mut shared.directions[1 - side];
        let Some(front) = incoming.frames.front() else {
            return if peer_open {
                Ok(None)
            } else {
                Err(DeviceError::Closed)
            };
        };
        let len = front.len();
        if len > buf.len() {
            return Err(DeviceError::BufferTooSmall {
                len,
                capacity: buf.len(),
            });
        }
        let frame = incoming.frames.pop_front().expect("front exists");
        buf[..len].copy_from_slice(&frame);
        incoming.stats.delivered += 1;
        if incoming.free.len() < FREE_LIST_LIMIT {
            incoming.free.push(frame);
        }
        Ok(Some(len))
    }

    fn send(&mut self, _now: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
        let side = self.side;
        let mut shared = self.lock();
        if frame.len() > shared.mtu {
            return Err(DeviceError::FrameTooLarge {
                len: frame.len(),
                mtu: shared.mtu,
            });
        }
        if !shared.open[1 - side] {
            return Err(DeviceError::Closed);
        }
        let capacity = shared.capacity;
        let outgoing = &mut shared.directions[side];
        if outgoing.frames.len() >= capacity {
            outgoing.stats.dropped_full += 1;
            return Ok(true);
        }
        let mut buf = outgoing.free.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        outgoing.frames.push_back(buf);
        outgoing.stats.sent += 1;
        Ok(true)
    }

    fn mtu(&self) -> usize {
        self.lock().mtu
    }
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        let side = self.side;
        self.lock().open[side] = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Instant = Instant::ZERO;

    #[test]
    fn frames_cross_in_order_both_ways() {
        let (mut a, mut b) = pipe(1514);
        for i in 0..5u8 {
            assert_eq!(a.send(T, &[i; 60]), Ok(true));
        }
        b.send(T, b"reply").unwrap();
        let mut buf = [0u8; 1514];
        for i in 0..5u8 {
            assert_eq!(b.recv(T, &mut buf), Ok(Some(60)));
            assert_eq!(&buf[..60], &[i; 60]);
        }
        assert_eq!(b.recv(T, &mut buf), Ok(None));
        assert_eq!(a.recv(T, &mut buf), Ok(Some(5)));
        assert_eq!(&buf[..5], b"reply");
        assert_eq!(
            a.stats(),
            PipeStats {
                sent: 5,
                dropped_full: 0,
                delivered: 5
            }
        );
        assert_eq!(a.mtu(), 1514);
    }

    #[test]
    fn full_queue_drops_and_counts() {
        let (mut a, mut b) = pipe_with_capacity(1514, 3);
        for i in 0..5u8 {
            assert_eq!(a.send(T, &[i]), Ok(true));
        }
        assert_eq!(a.stats().sent, 3);
        assert_eq!(a.stats().dropped_full, 2);
        assert_eq!(b.pending(), 3);
        let mut buf = [0u8; 16];
        for i in 0..3u8 {
            assert_eq!(b.recv(T, &mut buf), Ok(Some(1)));
            assert_eq!(buf[0], i, "the first three are kept: tail drop");
        }
        // Room again after draining.
        a.send(T, &[9]).unwrap();
        assert_eq!(b.recv(T, &mut buf), Ok(Some(1)));
        assert_eq!(buf[0], 9);
    }

    #[test]
    fn oversize_frame_is_an_error() {
        let (mut a, _b) = pipe(100);
        assert_eq!(
            a.send(T, &[0; 101]),
            Err(DeviceError::FrameTooLarge { len: 101, mtu: 100 })
        );
        assert_eq!(a.send(T, &[0; 100]), Ok(true));
    }

    #[test]
    fn small_buffer_leaves_the_frame_queued() {
        let (mut a, mut b) = pipe(1514);
        a.send(T, &[7; 200]).unwrap();
        let mut small = [0u8; 100];
        assert_eq!(
            b.recv(T, &mut small),
            Err(DeviceError::BufferTooSmall {
                len: 200,
                capacity: 100
            })
        );
        let mut big = [0u8; 1514];
        assert_eq!(b.recv(T, &mut big), Ok(Some(200)));
    }

    #[test]
    fn dropping_one_end_closes_the_other_after_draining() {
        let (mut a, mut b) = pipe(1514);
        a.send(T, b"last words").unwrap();
        drop(a);
        assert!(!b.peer_open());
        let mut buf = [0u8; 64];
        assert_eq!(b.recv(T, &mut buf), Ok(Some(10)));
        assert_eq!(b.recv(T, &mut buf), Err(DeviceError::Closed));
        assert_eq!(b.send(T, b"anyone?"), Err(DeviceError::Closed));
    }

    #[test]
    fn ends_work_across_threads() {
        let (mut a, mut b) = pipe(1514);
        let sender = std::thread::spawn(move || {
            for i in 0..100u32 {
                a.send(T, &i.to_be_bytes()).unwrap();
            }
            a
        });
        let a = sender.join().unwrap();
        let mut buf = [0u8; 4];
        for i in 0..100u32 {
            assert_eq!(b.recv(T, &mut buf), Ok(Some(4)));
            assert_eq!(u32::from_be_bytes(buf), i);
        }
        drop(a);
    }
}
