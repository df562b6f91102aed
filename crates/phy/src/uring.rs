//! Batched reads and writes of a TAP or TUN descriptor through io_uring: many frames
//! per system call where `read`/`write` take one each (a TAP has no `recvmmsg`).
//!
//! - **Reads.** When [`Uring::recv`] has nothing left from the last batch it queues up
//!   to [`RX_SLOTS`] reads, each into a buffer of its own, with `RWF_NOWAIT`, and
//!   submits them in one `io_uring_enter`. The kernel runs each read at once (a read
//!   with nothing waiting ends with `EAGAIN` instead of waiting), so one call brings
//!   back every frame the queue held, in order, and then [`Uring::recv`] hands them out
//!   one by one (a copy of each into the caller's buffer). A batch that came back short
//!   means the queue was empty: the next one asks for about as many as it got, so an
//!   idle device costs one wasted read per wake-up, a busy one up to [`RX_SLOTS`]
//!   frames per call.
//! - **Writes.** [`Uring::queue`] copies a frame (the virtio-net header first, when
//!   the device has one) into a free send buffer and queues a write of it; the writes go
//!   to the kernel together on [`Uring::flush`] (the driver's `Device::flush`, once per
//!   turn of its loop) or when the buffers run out, in the order they were queued.
//! - **Large frames** (a 64 KiB TCP segment, more than [`BATCH_FRAME`] bytes) are not
//!   batched: copying them costs more than the system call they would share, so the
//!   device reads and writes them directly (after the writes queued before them). The
//!   read side switches to direct reads after a large frame and back after a small one.
//!
//! [`Uring::new`] checks that the kernel has io_uring (5.1; `RWF_NOWAIT` reads of a TUN
//! descriptor) and that a read of this descriptor never waits; when either fails (an
//! old kernel, a seccomp filter, a container's policy) the device keeps its plain
//! `read`/`write` and says so ([`crate::Tap::batched`]).
//!
//! All of this module's `unsafe` is the hand-off of buffers to the kernel: each read or
//! write names a buffer this value owns and neither moves nor touches until the
//! kernel's completion for it is reaped (on drop, buffers the kernel may still hold are
//! leaked rather than freed).
#![allow(unsafe_code)]

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;

use io_uring::{IoUring, opcode, squeue, types};

/// Reads in one batch, at most.
pub(crate) const RX_SLOTS: usize = 32;
/// Writes queued before they go to the kernel on their own.
pub(crate) const TX_SLOTS: usize = 64;
/// Frames longer than this (virtio-net header included) are read and written directly.
pub(crate) const BATCH_FRAME: usize = 4096;
/// `RWF_NOWAIT` (`linux/fs.h`): fail with `EAGAIN` rather than wait.
const RWF_NOWAIT: i32 = 0x0000_0008;
/// `user_data` of a write: this bit, then the send buffer's index.
const TX_TAG: u64 = 1 << 32;

/// A TAP/TUN descriptor's io_uring, its read and send buffers.
pub(crate) struct Uring {
    ring: IoUring,
    fd: RawFd,
    /// `RWF_NOWAIT`, or 0 where the descriptor does not take it (its `O_NONBLOCK`
    /// then makes a read with nothing waiting end in `EAGAIN` just the same).
    rx_flags: i32,
    /// The longest frame a read takes (header included): the size of a read buffer.
    frame_len: usize,
    rx_slots: Vec<Box<[u8]>>,
    /// Read buffers holding a frame not yet handed out: (buffer, length), in order.
    rx_ready: VecDeque<(usize, usize)>,
    /// Reads `reap` took in, (buffer, length) before they are put in order: kept, so
    /// that a batch allocates nothing.
    rx_reaped: Vec<(usize, usize)>,
    /// Reads submitted whose completion has not been reaped.
    rx_in_flight: usize,
    /// Reads the next batch asks for.
    rx_want: usize,
    /// The last batch came back short: the queue was empty then, so say "nothing" for
    /// now rather than ask again (the descriptor becomes readable when a frame comes).
    rx_drained: bool,
    /// The last frame read was large: read the next one directly.
    rx_direct: bool,
    tx_slots: Vec<Vec<u8>>,
    /// Send buffers in use (queued or submitted): the next free one is this index.
    tx_used: usize,
    /// Writes queued and not yet submitted.
    tx_queued: usize,
    /// Writes whose completion has not been reaped.
    tx_in_flight: usize,
    pub(crate) stats: UringStats,
}

/// What the batches did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UringStats {
    /// System calls that carried reads.
    pub(crate) rx_batches: u64,
    /// System calls that carried writes.
    pub(crate) tx_batches: u64,
    /// Writes the kernel refused (the error of the last one in `tx_error`).
    pub(crate) tx_errors: u64,
    /// Of `tx_errors`, `EAGAIN` (the kernel's queue full).
    pub(crate) tx_full: u64,
}

impl std::fmt::Debug for Uring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uring")
            .field("fd", &self.fd)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// A frame [`Uring::recv`] handed out: its length (header included), or that it did
/// not fit the caller's buffer (it stays first in line).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Received {
    Frame(usize),
    TooLarge(usize),
}

impl Uring {
    /// An io_uring for the non-blocking descriptor `fd`, whose frames (header included)
    /// are at most `frame_len` bytes. Fails when the kernel has no io_uring or refuses
    /// it, or when a read of `fd` would wait (a frame this check read is kept).
    pub(crate) fn new(fd: RawFd, frame_len: usize) -> io::Result<Uring> {
        #[cfg(test)]
        if tests::REFUSE.with(std::cell::Cell::get) {
            return Err(io::Error::from_raw_os_error(libc::ENOSYS));
        }
        let ring = IoUring::new((RX_SLOTS + TX_SLOTS) as u32)?;
        let mut uring = Uring {
            ring,
            fd,
            rx_flags: RWF_NOWAIT,
            frame_len,
            rx_slots: Vec::new(),
            rx_ready: VecDeque::new(),
            rx_reaped: Vec::with_capacity(RX_SLOTS),
            rx_in_flight: 0,
            rx_want: 1,
            rx_drained: false,
            rx_direct: false,
            tx_slots: (0..TX_SLOTS).map(|_| Vec::new()).collect(),
            tx_used: 0,
            tx_queued: 0,
            tx_in_flight: 0,
            stats: UringStats::default(),
        };
        // One read with nothing asked of the queue: it must come back at once (a
        // frame, or EAGAIN), or reads of this descriptor would wait in the kernel.
        if let Err(e) = uring.submit_reads(1) {
            if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                return Err(e);
            }
            uring.rx_flags = 0;
            uring.submit_reads(1)?;
        }
        if uring.rx_in_flight > 0 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "an io_uring read of the device waits instead of failing with EAGAIN",
            ));
        }
        uring.rx_drained = false;
        Ok(uring)
    }

    /// Whether reads go directly now (the last frame was large): the caller reads
    /// itself, after [`Uring::frame_read`] says how long the frame was.
    pub(crate) fn reads_direct(&self) -> bool {
        self.rx_direct && self.rx_ready.is_empty() && self.rx_in_flight == 0
    }

    /// Note a frame (header included) the caller read directly.
    pub(crate) fn frame_read(&mut self, len: usize) {
        self.rx_direct = len > BATCH_FRAME;
    }

    /// The next frame read, its first `head.len()` bytes (the virtio-net header) into
    /// `head` and the rest into `buf`, batching reads as the module documentation
    /// says; `None` when the queue is empty. The length is the whole read's.
    pub(crate) fn recv(&mut self, head: &mut [u8], buf: &mut [u8]) -> io::Result<Option<Received>> {
        if self.rx_ready.is_empty() && self.rx_in_flight == 0 {
            if self.rx_drained {
                self.rx_drained = false;
                return Ok(None);
            }
            self.submit_reads(self.rx_want)?;
        } else if self.rx_ready.is_empty() {
            // Reads still in flight (only if the kernel let one wait after all).
            self.reap()?;
        }
        let Some(&(slot, len)) = self.rx_ready.front() else {
            self.rx_drained = false;
            return Ok(None);
        };
        if len > head.len() + buf.len() {
            return Ok(Some(Received::TooLarge(len)));
        }
        self.rx_ready.pop_front();
        let read = &self.rx_slots[slot][..len];
        let split = head.len().min(len);
        head[..split].copy_from_slice(&read[..split]);
        buf[..len - split].copy_from_slice(&read[split..]);
        self.rx_direct = len > BATCH_FRAME;
        if self.rx_direct {
            // What follows a large frame is read directly: drop nothing, but ask for
            // one at a time until a small one comes back.
            self.rx_want = 1;
        }
        Ok(Some(Received::Frame(len)))
    }

    /// Queue `want` reads, submit them (with the writes queued so far) and reap.
    fn submit_reads(&mut self, want: usize) -> io::Result<()> {
        let want = want.clamp(1, RX_SLOTS);
        while self.rx_slots.len() < want {
            self.rx_slots
                .push(vec![0; self.frame_len].into_boxed_slice());
        }
        for slot in 0..want {
            let buf = &mut self.rx_slots[slot];
            let read = opcode::Read::new(types::Fd(self.fd), buf.as_mut_ptr(), buf.len() as u32)
                .rw_flags(self.rx_flags)
                .build()
                .user_data(slot as u64);
            self.push(&read)?;
        }
        self.rx_in_flight += want;
        self.tx_in_flight += self.tx_queued;
        if self.tx_queued > 0 {
            self.stats.tx_batches += 1;
            self.tx_queued = 0;
        }
        self.ring.submit()?;
        self.stats.rx_batches += 1;
        let before = self.rx_ready.len();
        self.reap()?;
        let got = self.rx_ready.len() - before;
        self.rx_drained = got < want && self.rx_in_flight == 0;
        self.rx_want = if got == want { want * 2 } else { got + 1 };
        Ok(())
    }

    /// Push one entry; the submission queue has room for every buffer at once, so
    /// this fails only if a caller broke that.
    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        // SAFETY: the entry names a buffer of `self` (a read slot or a send buffer)
        // that stays allocated, unmoved and untouched until its completion is reaped
        // (`reap`), or forever when `self` drops first (see `Drop`).
        unsafe { self.ring.submission().push(entry) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))
    }

    /// Take every completion there is: frames read into `rx_ready` (in submission
    /// order), write outcomes counted.
    fn reap(&mut self) -> io::Result<()> {
        let mut rx_error = None;
        let mut frames = core::mem::take(&mut self.rx_reaped);
        for cqe in self.ring.completion() {
            let data = cqe.user_data();
            let result = cqe.result();
            if data & TX_TAG != 0 {
                self.tx_in_flight -= 1;
                if result < 0 {
                    self.stats.tx_errors += 1;
                    if -result == libc::EAGAIN {
                        self.stats.tx_full += 1;
                    }
                }
                continue;
            }
            self.rx_in_flight -= 1;
            match result {
                n if n >= 0 => frames.push((data as usize, n as usize)),
                e if -e == libc::EAGAIN || -e == libc::EINTR => {}
                e => rx_error = Some(io::Error::from_raw_os_error(-e)),
            }
        }
        frames.sort_unstable_by_key(|&(slot, _)| slot);
        self.rx_ready.extend(frames.drain(..));
        self.rx_reaped = frames;
        if self.tx_in_flight == 0 && self.tx_queued == 0 {
            self.tx_used = 0;
        }
        match rx_error {
            // Frames read before the error go first; the error comes back next time.
            Some(e) if self.rx_ready.is_empty() => Err(e),
            _ => Ok(()),
        }
    }

    /// Whether a frame of `len` bytes (header included) goes through the batch.
    pub(crate) fn batches(len: usize) -> bool {
        len <= BATCH_FRAME
    }

    /// Queue a write of `pieces`, joined (at most [`BATCH_FRAME`] bytes): it goes to
    /// the kernel on [`Uring::flush`], or now if the send buffers ran out.
    pub(crate) fn queue(&mut self, pieces: &[&[u8]]) -> io::Result<()> {
        if self.tx_used == TX_SLOTS {
            self.flush()?;
        }
        let slot = self.tx_used;
        let buf = &mut self.tx_slots[slot];
        buf.clear();
        for piece in pieces {
            buf.extend_from_slice(piece);
        }
        let write = opcode::Write::new(types::Fd(self.fd), buf.as_ptr(), buf.len() as u32)
            .build()
            .user_data(TX_TAG | slot as u64);
        self.push(&write)?;
        self.tx_used += 1;
        self.tx_queued += 1;
        Ok(())
    }

    /// Whether writes are queued and not yet submitted.
    pub(crate) fn pending(&self) -> bool {
        self.tx_queued > 0
    }

    /// Submit the queued writes in one system call and wait until the kernel took
    /// them all (a TAP's write never waits: it takes the frame or drops it), so every
    /// send buffer is free again.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        if self.tx_queued == 0 && self.tx_in_flight == 0 {
            return Ok(());
        }
        if self.tx_queued > 0 {
            self.tx_in_flight += self.tx_queued;
            self.tx_queued = 0;
            self.stats.tx_batches += 1;
            self.ring.submit_and_wait(self.tx_in_flight)?;
        }
        loop {
            self.reap()?;
            if self.tx_in_flight == 0 {
                return Ok(());
            }
            self.ring.submit_and_wait(1)?;
        }
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        let _ = self.flush();
        if self.rx_in_flight > 0 || self.tx_in_flight > 0 {
            // The kernel may still write into these buffers: never free them.
            std::mem::forget(std::mem::take(&mut self.rx_slots));
            std::mem::forget(std::mem::take(&mut self.tx_slots));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::Cell;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixDatagram;

    thread_local! {
        /// Make [`Uring::new`] fail on this thread, as on a kernel without io_uring.
        pub(crate) static REFUSE: Cell<bool> = const { Cell::new(false) };
    }

    /// Two ends of a non-blocking Unix datagram socket pair (frames keep their bounds,
    /// as on a TAP), each with its io_uring; `None` (and why, printed) where this
    /// kernel has no io_uring for us.
    fn pair() -> Option<(Uring, Uring, [UnixDatagram; 2])> {
        let (a, b) = UnixDatagram::pair().expect("socketpair");
        a.set_nonblocking(true).expect("non-blocking");
        b.set_nonblocking(true).expect("non-blocking");
        match (
            Uring::new(a.as_raw_fd(), 2048),
            Uring::new(b.as_raw_fd(), 2048),
        ) {
            (Ok(ua), Ok(ub)) => Some((ua, ub, [a, b])),
            (Err(e), _) | (_, Err(e)) => {
                assert!(
                    std::env::var_os("IMP_REQUIRE_IO_URING").is_none(),
                    "no io_uring: {e}"
                );
                println!("skipped: no io_uring here ({e})");
                None
            }
        }
    }

    #[test]
    fn frames_written_in_batches_are_read_back_in_batches_byte_for_byte() {
        let Some((mut tx, mut rx, _fds)) = pair() else {
            return;
        };
        let frames: Vec<Vec<u8>> = (0..100u32)
            .map(|i| (0..(i * 37 % 900 + 1)).map(|b| (b ^ i) as u8).collect())
            .collect();
        for frame in &frames {
            // Header and frame as two pieces, as the TAP queues them.
            let (head, rest) = frame.split_at(frame.len() / 3);
            tx.queue(&[head, rest]).expect("queue");
        }
        assert!(tx.pending(), "the last writes wait for flush");
        tx.flush().expect("flush");
        assert!(!tx.pending());
        assert_eq!(tx.stats.tx_errors, 0);
        // 100 writes in 64 send buffers: two system calls.
        assert_eq!(tx.stats.tx_batches, 2);
        let mut buf = [0u8; 2048];
        let mut got = Vec::new();
        while let Some(r) = rx.recv(&mut [], &mut buf).expect("recv") {
            let Received::Frame(len) = r else {
                panic!("{r:?}")
            };
            got.push(buf[..len].to_vec());
        }
        assert_eq!(got, frames);
        assert!(rx.stats.rx_batches < 100, "{} reads", rx.stats.rx_batches);
        assert_eq!(rx.recv(&mut [], &mut buf).expect("recv"), None);
    }

    #[test]
    fn a_frame_too_large_for_the_buffer_waits_first_in_line() {
        let Some((mut tx, mut rx, _fds)) = pair() else {
            return;
        };
        tx.queue(&[&[7u8; 300]]).expect("queue");
        tx.queue(&[&[8u8; 10]]).expect("queue");
        tx.flush().expect("flush");
        let mut small = [0u8; 100];
        assert_eq!(
            rx.recv(&mut [], &mut small).expect("recv"),
            Some(Received::TooLarge(300))
        );
        let mut buf = [0u8; 400];
        assert_eq!(
            rx.recv(&mut [], &mut buf).expect("recv"),
            Some(Received::Frame(300))
        );
        assert_eq!(buf[..300], [7u8; 300]);
        assert_eq!(
            rx.recv(&mut [], &mut buf).expect("recv"),
            Some(Received::Frame(10))
        );
        assert_eq!(buf[..10], [8u8; 10]);
    }

    #[test]
    fn a_kernel_without_io_uring_is_refused() {
        REFUSE.with(|r| r.set(true));
        let (a, _b) = UnixDatagram::pair().expect("socketpair");
        let e = Uring::new(a.as_raw_fd(), 2048).expect_err("refused");
        REFUSE.with(|r| r.set(false));
        assert_eq!(e.raw_os_error(), Some(libc::ENOSYS));
    }

    #[test]
    fn only_small_frames_are_batched() {
        assert!(Uring::batches(1514));
        assert!(Uring::batches(BATCH_FRAME));
        assert!(!Uring::batches(BATCH_FRAME + 1));
        assert!(!Uring::batches(65_536));
    }
}
