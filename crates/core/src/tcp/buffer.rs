//! Byte buffers of one TCP connection: the send ring, the receive ring with its bounded
//! out-of-order assembler, and the record of which out-of-order data arrived last (for
//! SACK blocks, RFC 2018 §4).
//!
//! Both rings have a *capacity* (the most they hold, which sets the window) and storage
//! that grows on demand, by doubling, up to it: a connection that moves little data
//! holds little memory (an idle one none), and one that fills its window ends with
//! storage of the full capacity and stops allocating. Storage never shrinks.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use impnet_wire::tcp::SackBlock;

use super::lazy_vec::LazyVec;
use super::seq::SeqNumber;

/// `index` reduced into a ring of `capacity` bytes (`index < 2 * capacity`).
fn wrap(index: usize, capacity: usize) -> usize {
    if index >= capacity {
        index - capacity
    } else {
        index
    }
}

/// The `len` bytes of `ring` starting at `at`, as the part before the end of the ring
/// and the part wrapped to its start. Needs `at < ring.len()` (or both zero) and
/// `len <= ring.len()`.
fn ring_slices(ring: &[u8], at: usize, len: usize) -> (&[u8], &[u8]) {
    let first = len.min(ring.len() - at);
    (&ring[at..at + first], &ring[..len - first])
}

/// Copy `data` into `ring` starting at `at`, wrapping at the end of the ring. Same
/// preconditions as [`ring_slices`].
fn ring_write(ring: &mut [u8], at: usize, data: &[u8]) {
    let first = data.len().min(ring.len() - at);
    copy_bytes(&mut ring[at..at + first], &data[..first]);
    copy_bytes(&mut ring[..data.len() - first], &data[first..]);
}

/// `dst.copy_from_slice(src)`, with the short copies of request/response traffic (and
/// the empty second half of a ring that did not wrap) done in registers instead of a
/// call into `memcpy`, which costs several times a 1-byte copy, and those longer than
/// [`COPY_WHOLE`] in pieces of [`COPY_PIECE`] bytes.
/// (`tests::copy_bytes_is_copy_from_slice` checks every length up to 40 and lengths
/// around the pieces.)
///
/// The pieces: for a block of a few KiB or more, glibc's `memcpy` uses `rep movsb`,
/// which on this machine's CPU (AMD Zen 4) moves about 3 GB/s instead of 30-45 when the
/// destination lies 1 to 15 bytes past the source modulo 4 KiB (4K aliasing; measured
/// with 64 KiB copies). A ring that starts again at 0 whenever it empties meets the same
/// distance to a driver's frame buffer on every fill, so luck in where the buffers lie
/// made W1b (64 KiB segments) 1.7x slower over IPv4 than over IPv6. `memcpy`'s vector
/// loop, which it uses below that size, has no such case (35-43 GB/s at every distance).
///
/// # Panics
/// If the lengths differ.
#[inline]
pub(crate) fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    assert_eq!(dst.len(), n, "copy_bytes: lengths differ");
    match n {
        0 => {}
        1 => dst[0] = src[0],
        2..=3 => {
            // The first two and the last two bytes: overlapping for 3.
            dst[..2].copy_from_slice(&src[..2]);
            dst[n - 2..].copy_from_slice(&src[n - 2..]);
        }
        4..=7 => {
            dst[..4].copy_from_slice(&src[..4]);
            dst[n - 4..].copy_from_slice(&src[n - 4..]);
        }
        8..=16 => {
            dst[..8].copy_from_slice(&src[..8]);
            dst[n - 8..].copy_from_slice(&src[n - 8..]);
        }
        17..=COPY_WHOLE => dst.copy_from_slice(src),
        _ => copy_in_pieces(dst, src),
    }
}

/// The longest copy [`copy_bytes`] hands `memcpy` whole: a frame of MTU 1500 (glibc
/// switches to `rep movsb` above 2 KiB at the least, by its defaults; here above 2-4 KiB).
const COPY_WHOLE: usize = 2048;

/// The pieces of a longer copy (1 KiB pieces moved 40-43 GB/s here, 2 KiB ones 35).
const COPY_PIECE: usize = 1024;

/// `out.extend_from_slice(bytes)`, in pieces as [`copy_bytes`] copies: for the packets
/// a stack queues whole (forwarded, looped, cut into fragments), up to 64 KiB.
pub(crate) fn extend_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.len() <= COPY_WHOLE {
        out.extend_from_slice(bytes);
        return;
    }
    out.reserve(bytes.len());
    for piece in bytes.chunks(COPY_PIECE) {
        out.extend_from_slice(piece);
    }
}

/// [`copy_bytes`] of more than [`COPY_WHOLE`] bytes (out of line: the short copies'
/// callers stay small).
#[inline(never)]
fn copy_in_pieces(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.chunks_mut(COPY_PIECE).zip(src.chunks(COPY_PIECE)) {
        d.copy_from_slice(s);
    }
}

/// Storage a ring grows to first (then doubles).
const MIN_STORAGE: usize = 512;

/// The storage size for holding `needed` bytes, at most `capacity`: a power of two.
fn storage_for(needed: usize, capacity: usize) -> usize {
    needed.max(MIN_STORAGE).next_power_of_two().min(capacity)
}

/// A copy of `ring` linearised from `head` into storage of `size` bytes (`size >= ring.len()`).
fn relinearise(ring: &[u8], head: usize, size: usize) -> Box<[u8]> {
    let mut storage = vec![0; size].into_boxed_slice();
    copy_pair(
        &mut storage[..ring.len()],
        ring_slices(ring, head, ring.len()),
    );
    storage
}

/// `ring` grown to `size` bytes (`size >= ring.len()`), its bytes where they were: what
/// [`relinearise`] gives from head 0, by reallocation instead of a copy.
fn grow(ring: Box<[u8]>, size: usize) -> Box<[u8]> {
    let mut storage = ring.into_vec();
    storage.reserve_exact(size - storage.len());
    storage.resize(size, 0);
    storage.into_boxed_slice()
}

/// Copy two slices one after the other into `out` (which holds exactly both).
fn copy_pair(out: &mut [u8], (a, b): (&[u8], &[u8])) -> usize {
    copy_bytes(&mut out[..a.len()], a);
    copy_bytes(&mut out[a.len()..a.len() + b.len()], b);
    a.len() + b.len()
}

/// The send buffer: bytes the application wrote that the peer has not acknowledged yet,
/// both the ones already sent (from SND.UNA) and the ones still waiting to go.
///
/// Offsets in `slices` and `peek` are relative to the oldest unacknowledged byte
/// (SND.UNA), so the connection maps a sequence number `s` to offset `s - snd_una`.
///
/// Bytes come in two ways: copied into the ring ([`SendBuffer::write`]), or as buffers
/// the application hands over whole ([`SendBuffer::write_owned`]), which are kept as
/// they are (no copy) and dropped once acknowledged. While any such buffer is held,
/// `pieces` records the order of ring bytes and owned buffers.
#[derive(Debug, Clone)]
pub struct SendBuffer {
    /// Storage, grown on demand: `ring_len <= ring.len() <= capacity` (a boxed slice,
    /// not a `Vec`: its size never changes but by replacing it, and 8 bytes less).
    ring: Box<[u8]>,
    /// Index of the oldest byte in the ring (`< ring.len()`, or 0 when it holds none).
    /// The counts are `u32`s (a buffer holds less than 4 GiB: [`MAX_CAPACITY`]), 16
    /// bytes less in every connection than `usize`s.
    head: u32,
    /// Bytes held, in the ring and in owned buffers.
    len: u32,
    /// Bytes held in the ring, starting at `head` (all `len` when `pieces` is empty).
    ring_len: u32,
    /// The stream in order when owned buffers are held: ring spans and owned buffers,
    /// summing to `len`, no two ring spans adjacent, no piece empty. Empty while
    /// every byte is in the ring (the common case costs nothing).
    pieces: Pieces,
    /// Most bytes held.
    capacity: u32,
}

/// A run of the send buffer's stream.
#[derive(Debug, Clone)]
enum Piece {
    /// This many bytes of the ring, in order.
    Ring(usize),
    /// An application's buffer, its bytes from `start` not yet acknowledged.
    Owned { data: Vec<u8>, start: usize },
}

impl Piece {
    fn len(&self) -> usize {
        match self {
            Piece::Ring(n) => *n,
            Piece::Owned { data, start } => data.len() - start,
        }
    }
}

/// The send buffer's pieces: no allocation (and 8 bytes in the connection, where a
/// `VecDeque` took 32) while every byte is in the ring, the common case; the owned
/// buffers' `slack` lives in the box too (0 without them).
#[derive(Debug, Clone, Default)]
struct Pieces(Option<alloc::boxed::Box<OwnedPieces>>);

/// What [`Pieces`] holds once a buffer was handed over.
#[derive(Debug, Clone, Default)]
struct OwnedPieces {
    /// The pieces, in order.
    queue: VecDeque<Piece>,
    /// Allocated bytes of the owned buffers beyond their lengths: charged against the
    /// capacity with `len`, so what the buffer holds stays within it (0 without
    /// owned buffers, hence kept here).
    slack: u32,
}

/// What an empty [`Pieces`] reads as.
static NO_PIECES: VecDeque<Piece> = VecDeque::new();

impl core::ops::Deref for Pieces {
    type Target = VecDeque<Piece>;
    #[inline]
    fn deref(&self) -> &VecDeque<Piece> {
        self.0.as_deref().map_or(&NO_PIECES, |p| &p.queue)
    }
}

impl Pieces {
    /// The pieces, to change: allocated on first use.
    fn make_mut(&mut self) -> &mut VecDeque<Piece> {
        &mut self.0.get_or_insert_with(Default::default).queue
    }
    /// The owned buffers' unused allocation ([`OwnedPieces::slack`]).
    #[inline]
    fn slack(&self) -> u32 {
        self.0.as_ref().map_or(0, |p| p.slack)
    }
    /// The owned buffers' unused allocation, to change (allocated on first use).
    fn slack_mut(&mut self) -> &mut u32 {
        &mut self.0.get_or_insert_with(Default::default).slack
    }
    /// Back to none, the allocation given back.
    fn clear(&mut self) {
        self.0 = None;
    }
}

/// Owned buffers shorter than this are copied into the ring: below it the copy costs
/// less than keeping the buffer (and a segment would span many of them).
pub const OWNED_MIN: usize = 2048;

impl SendBuffer {
    /// An empty buffer that holds up to `capacity` bytes (no storage until written).
    pub fn new(capacity: usize) -> SendBuffer {
        SendBuffer::with_storage(capacity, Vec::new())
    }

    /// An empty buffer of `capacity` bytes (at most [`MAX_CAPACITY`]) on `storage` (from
    /// [`SendBuffer::into_storage`] of another; its contents are never read). Storage
    /// bigger than `capacity` is dropped.
    pub fn with_storage(capacity: usize, storage: Vec<u8>) -> SendBuffer {
        let capacity = count(capacity);
        SendBuffer {
            // Spare storage is as long as it is allocated (`relinearise`): no copy.
            ring: if storage.len() <= capacity as usize {
                storage.into_boxed_slice()
            } else {
                Box::default()
            },
            head: 0,
            len: 0,
            ring_len: 0,
            pieces: Pieces::default(),
            capacity,
        }
    }

    /// The ring's storage, for another buffer to reuse (owned buffers are dropped).
    pub fn into_storage(self) -> Vec<u8> {
        self.ring.into_vec()
    }

    /// The ring's storage, for another buffer to reuse, when the buffer holds nothing
    /// (empty otherwise): everything written was acknowledged. The buffer then holds no
    /// storage until written again ([`SendBuffer::adopt_storage`], or a new allocation).
    pub(crate) fn take_storage_if_empty(&mut self) -> Vec<u8> {
        if self.len == 0 && self.ring_len == 0 {
            self.head = 0;
            core::mem::take(&mut self.ring).into_vec()
        } else {
            Vec::new()
        }
    }

    /// Put `storage` (spare, contents irrelevant, at most the capacity) under a buffer
    /// that holds no storage, so the next write need not allocate. Gives `storage`
    /// back when the buffer has storage already or it is too long.
    pub(crate) fn adopt_storage(&mut self, storage: Vec<u8>) -> Vec<u8> {
        if !self.ring.is_empty() || self.ring_len != 0 || storage.len() > self.capacity() {
            return storage;
        }
        self.head = 0;
        self.ring = storage.into_boxed_slice();
        Vec::new()
    }

    /// The ring's storage taken out, for another buffer to reuse; the buffer is left
    /// with none, to be dropped where it is (no move of the state holding it).
    pub fn take_storage(&mut self) -> Vec<u8> {
        core::mem::take(&mut self.ring).into_vec()
    }

    /// How many bytes it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Bytes of ring storage allocated now (grows on demand up to the capacity).
    pub fn storage(&self) -> usize {
        self.ring.len()
    }

    /// Bytes not yet acknowledged (sent or not).
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether every written byte has been acknowledged.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Room left for [`SendBuffer::write`] (owned buffers also charge their unused
    /// allocation).
    pub fn free(&self) -> usize {
        self.capacity.saturating_sub(self.len + self.pieces.slack()) as usize
    }

    /// Bytes held in buffers the application handed over (not in the ring).
    pub fn owned(&self) -> usize {
        (self.len - self.ring_len) as usize
    }

    /// Append as much of `data` as fits; returns how many bytes were taken.
    pub fn write(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.free());
        self.make_room(n);
        if n > 0 {
            let tail = wrap(self.head as usize + self.ring_len as usize, self.ring.len());
            ring_write(&mut self.ring, tail, &data[..n]);
            self.appended(n);
        }
        n
    }

    /// Append up to `len` bytes (as many as fit) that `fill` writes straight into the
    /// ring: it is called with the space they go to, in stream order (one piece, or two
    /// where the ring wraps), and must write every byte of it. Returns how many bytes
    /// were taken. The same as [`SendBuffer::write`] of those bytes, without the copy.
    pub fn write_with(&mut self, len: usize, mut fill: impl FnMut(&mut [u8])) -> usize {
        let n = len.min(self.free());
        self.make_room(n);
        if n > 0 {
            let tail = wrap(self.head as usize + self.ring_len as usize, self.ring.len());
            let first = n.min(self.ring.len() - tail);
            fill(&mut self.ring[tail..tail + first]);
            if first < n {
                fill(&mut self.ring[..n - first]);
            }
            self.appended(n);
        }
        n
    }

    /// Grows the ring (up to the capacity) so that `n` more bytes fit after those it
    /// holds (`n <= free()`).
    #[inline]
    fn make_room(&mut self, n: usize) {
        let ring_len = self.ring_len as usize;
        if ring_len + n > self.ring.len() {
            let size = storage_for(ring_len + n, self.capacity());
            self.ring = if self.head == 0 && !self.ring.is_empty() {
                // Already in order from the start (a writer filling a new buffer):
                // the same storage, grown in place where the allocator can.
                grow(core::mem::take(&mut self.ring), size)
            } else {
                relinearise(&self.ring, self.head as usize, size)
            };
            self.head = 0;
        }
    }

    /// Counts `n` bytes (`0 < n <= free()`) just written after the ring's last.
    #[inline]
    fn appended(&mut self, n: usize) {
        // `n <= free() < 2^32`.
        let n32 = n as u32;
        self.ring_len += n32;
        self.len += n32;
        if !self.pieces.is_empty() {
            let pieces = self.pieces.make_mut();
            match pieces.back_mut() {
                Some(Piece::Ring(k)) => *k += n,
                _ => pieces.push_back(Piece::Ring(n)),
            }
        }
    }

    /// Append all of `data`, keeping the buffer itself (no copy; one shorter than
    /// [`OWNED_MIN`] is copied into the ring instead). Its allocation counts against
    /// the capacity; when there is no room for it whole, it is given back untouched.
    pub fn write_owned(&mut self, data: Vec<u8>) -> Result<(), Vec<u8>> {
        let charge = data.capacity();
        if data.is_empty() {
            return Ok(());
        }
        if data.len() < OWNED_MIN {
            if data.len() > self.free() {
                return Err(data);
            }
            self.write(&data);
            return Ok(());
        }
        if charge > self.free() {
            return Err(data);
        }
        if self.pieces.is_empty() && self.ring_len > 0 {
            let ring_len = self.ring_len as usize;
            self.pieces.make_mut().push_back(Piece::Ring(ring_len));
        }
        // `data.len() <= charge <= free() < 2^32`.
        self.len += data.len() as u32;
        *self.pieces.slack_mut() += (charge - data.len()) as u32;
        self.pieces
            .make_mut()
            .push_back(Piece::Owned { data, start: 0 });
        Ok(())
    }

    /// Up to `len` bytes starting `offset` bytes after the oldest unacknowledged byte, as
    /// the slices that hold them in order (two parts of the ring, or more pieces when
    /// owned buffers are held). Empty when `offset >= self.len()`.
    pub fn slices(&self, offset: usize, len: usize) -> Slices<'_> {
        let held = self.len();
        let len = if offset >= held {
            0
        } else {
            len.min(held - offset)
        };
        let head = self.head as usize;
        let mut slices = Slices {
            ring: &self.ring,
            head,
            pieces: None,
            piece: 0,
            skip: 0,
            ring_at: 0,
            ready: [&[], &[]],
            remaining: len,
            len,
        };
        if len == 0 {
            return slices;
        }
        if self.pieces.is_empty() {
            let (a, b) = ring_slices(&self.ring, wrap(head + offset, self.ring.len()), len);
            slices.ready = [a, b];
            slices.remaining = 0;
            return slices;
        }
        // Find the piece holding `offset`, and where its ring bytes start.
        let mut at = 0;
        for piece in self.pieces.iter() {
            let n = piece.len();
            if offset < at + n {
                break;
            }
            at += n;
            slices.piece += 1;
            if let Piece::Ring(_) = piece {
                slices.ring_at += n;
            }
        }
        slices.skip = offset - at;
        slices.pieces = Some(&*self.pieces);
        slices
    }

    /// Copy bytes starting `offset` bytes after the oldest unacknowledged byte into `out`;
    /// returns how many were copied (`min(out.len(), len() - offset)`, or 0).
    pub fn peek(&self, offset: usize, out: &mut [u8]) -> usize {
        let mut at = 0;
        for piece in self.slices(offset, out.len()) {
            copy_bytes(&mut out[at..at + piece.len()], piece);
            at += piece.len();
        }
        at
    }

    /// Drop `n` acknowledged bytes from the front (more than `len()` drops everything);
    /// owned buffers wholly acknowledged are freed.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len());
        // `n <= len < 2^32`.
        self.len -= n as u32;
        if self.pieces.is_empty() {
            self.consume_ring(n);
            return;
        }
        let mut left = n;
        while left > 0 {
            let Some(front) = self.pieces.make_mut().front_mut() else {
                break;
            };
            let take = left.min(front.len());
            let whole = take == front.len();
            match front {
                Piece::Ring(k) => {
                    *k -= take;
                    self.consume_ring(take);
                }
                Piece::Owned { start, .. } => *start += take,
            }
            left -= take;
            if whole && let Some(Piece::Owned { data, .. }) = self.pieces.make_mut().pop_front() {
                *self.pieces.slack_mut() -= (data.capacity() - data.len()) as u32;
            }
        }
        // Only ring bytes left (adjacent spans never stay apart): back to the plain ring.
        if self.pieces.iter().all(|p| matches!(p, Piece::Ring(_))) {
            self.pieces.clear();
        }
    }

    /// Drop `n` bytes from the front of the ring (`n <= ring_len`).
    fn consume_ring(&mut self, n: usize) {
        self.ring_len -= n as u32;
        self.head = if self.ring_len == 0 {
            0
        } else {
            // An index into the ring, which is at most the capacity long.
            wrap(self.head as usize + n, self.ring.len()) as u32
        };
    }

    /// Raise the capacity to `new_capacity` (at most [`MAX_CAPACITY`]), keeping the bytes
    /// held (storage follows on demand); a smaller or equal `new_capacity` does nothing
    /// (it never shrinks).
    pub fn grow(&mut self, new_capacity: usize) {
        self.capacity = self.capacity.max(count(new_capacity));
    }
}

/// The largest buffer, either way: counts are kept as `u32`s. (The largest window TCP
/// can announce is 1 GiB, RFC 7323 §2.3.)
pub const MAX_CAPACITY: usize = u32::MAX as usize;

/// A capacity as the buffers keep it, at most [`MAX_CAPACITY`].
fn count(capacity: usize) -> u32 {
    u32::try_from(capacity).unwrap_or(u32::MAX)
}

/// A range of the send buffer as the slices holding it, in order (from
/// [`SendBuffer::slices`]).
#[derive(Debug, Clone)]
pub struct Slices<'a> {
    /// The ring's storage and the index of its oldest byte.
    ring: &'a [u8],
    head: usize,
    /// The buffer's pieces when it holds owned buffers.
    pieces: Option<&'a VecDeque<Piece>>,
    /// The next piece to open.
    piece: usize,
    /// Bytes of that piece before the range.
    skip: usize,
    /// Where that piece's bytes start in the ring (from `head`) when it is ring bytes.
    ring_at: usize,
    /// Slices opened, not yet handed out (the first empty when none is).
    ready: [&'a [u8]; 2],
    /// Bytes of the range in pieces not yet opened.
    remaining: usize,
    /// Bytes in the whole range.
    len: usize,
}

impl<'a> Slices<'a> {
    /// No bytes.
    pub fn empty() -> Slices<'a> {
        Slices {
            ring: &[],
            head: 0,
            pieces: None,
            piece: 0,
            skip: 0,
            ring_at: 0,
            ready: [&[], &[]],
            remaining: 0,
            len: 0,
        }
    }

    /// Bytes in the range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The range as two slices, when it lies in at most two (always, when no owned
    /// buffer is held).
    pub fn as_pair(&self) -> Option<(&'a [u8], &'a [u8])> {
        let mut rest = self.clone();
        let a = rest.next().unwrap_or(&[]);
        let b = rest.next().unwrap_or(&[]);
        match rest.next() {
            None => Some((a, b)),
            Some(_) => None,
        }
    }

    /// Open the next piece into `ready`.
    fn open(&mut self) -> Option<()> {
        let piece = self.pieces?.get(self.piece)?;
        let take = (piece.len() - self.skip).min(self.remaining);
        match piece {
            Piece::Ring(n) => {
                let at = wrap(self.head + self.ring_at + self.skip, self.ring.len());
                let (a, b) = ring_slices(self.ring, at, take);
                self.ready = [a, b];
                self.ring_at += n;
            }
            Piece::Owned { data, start } => {
                let from = start + self.skip;
                self.ready = [&data[from..from + take], &[]];
            }
        }
        self.remaining -= take;
        self.skip = 0;
        self.piece += 1;
        Some(())
    }
}

impl<'a> Iterator for Slices<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if !self.ready[0].is_empty() {
                let slice = self.ready[0];
                self.ready = [self.ready[1], &[]];
                return Some(slice);
            }
            if !self.ready[1].is_empty() {
                let slice = self.ready[1];
                self.ready[1] = &[];
                return Some(slice);
            }
            if self.remaining == 0 {
                return None;
            }
            self.open()?;
        }
    }
}

/// How many separate out-of-order ranges a [`RecvBuffer`] keeps at most by default
/// ([`TcpConfig::max_ooo_ranges`](super::TcpConfig::max_ooo_ranges)). Beyond its limit
/// ([`RecvBuffer::range_limit`]), a segment that would open a new range is dropped (the
/// peer will resend it).
pub const DEFAULT_MAX_RANGES: usize = 16384;

/// Out-of-order ranges a receive buffer may always hold (within its `max_ranges`).
const MIN_RANGE_LIMIT: usize = 32;

/// Bytes of receive buffer per out-of-order range it may hold beyond
/// [`MIN_RANGE_LIMIT`]: a window of full-sized segments of which every other one was
/// lost (a drop-tail queue overflowing under a sender paced at twice its rate or more)
/// has a hole per 2 segments, and the buffer keeps them all, as Linux's out-of-order
/// queue does; a peer sending a byte or two per range cannot make the list (16 bytes a
/// range) and the time to shift it outgrow the buffer's sixty-fourth.
const BYTES_PER_RANGE: usize = 1024;

/// Ranges the list has room for when its first range arrives; it doubles from there.
const INITIAL_RANGE_ROOM: usize = 32;

/// What [`RecvBuffer::insert`] did with a segment's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Insert {
    /// Bytes that became in-order (readable): the amount RCV.NXT advances by.
    pub advanced: usize,
    /// False when the data was dropped because it would have opened one out-of-order
    /// range more than the limit. Data trimmed because it lay beyond the window does not
    /// count as dropped here.
    pub stored: bool,
}

/// The receive buffer: in-order bytes waiting for the application, and out-of-order
/// bytes that arrived ahead of a hole, all inside one ring.
///
/// Offsets passed to [`RecvBuffer::insert`] are relative to RCV.NXT (the first byte not
/// yet received in order); the caller trims whatever lies before RCV.NXT. Out-of-order
/// bytes sit in the ring at their final position, so they occupy window space:
/// `window() = capacity() - readable()`, and data beyond the window is trimmed.
///
/// Overlaps and duplicates: the first copy of a byte wins. Bytes already held are never
/// overwritten, so a retransmission that (wrongly) carried different bytes cannot change
/// data already accepted.
#[derive(Debug, Clone)]
pub struct RecvBuffer {
    /// Storage, grown on demand: every held byte (in order or not) lies within
    /// `ring.len() <= capacity` bytes of `head` (boxed, as the send ring's).
    ring: Box<[u8]>,
    /// Most bytes held; sets the window. The counts are `u32`s (at most
    /// [`MAX_CAPACITY`]), 16 bytes less in every connection than `usize`s.
    capacity: u32,
    /// Index of the oldest unread in-order byte (`< ring.len()`, or 0 when it is empty).
    head: u32,
    /// In-order bytes waiting to be read, starting at `head`.
    readable: u32,
    /// Out-of-order data held, as `(start, end)` offsets from RCV.NXT: ascending, disjoint
    /// and not adjacent, every start `> 0`, every end `<= window()`,
    /// `len() <= range_limit()` (room for 32 is reserved when the first range arrives,
    /// and the Vec doubles from there; a connection that never sees a hole never
    /// allocates it).
    ranges: LazyVec<(usize, usize)>,
    /// The configured cap on out-of-order ranges (`range_limit` scales below it).
    max_ranges: u32,
}

impl RecvBuffer {
    /// An empty buffer of `capacity` bytes keeping up to [`DEFAULT_MAX_RANGES`]
    /// out-of-order ranges.
    pub fn new(capacity: usize) -> RecvBuffer {
        RecvBuffer::with_max_ranges(capacity, DEFAULT_MAX_RANGES)
    }

    /// An empty buffer of `capacity` bytes (at most [`MAX_CAPACITY`]) keeping up to
    /// `max_ranges` out-of-order ranges (0 keeps in-order data only).
    pub fn with_max_ranges(capacity: usize, max_ranges: usize) -> RecvBuffer {
        RecvBuffer {
            ring: Box::default(),
            capacity: count(capacity),
            head: 0,
            readable: 0,
            ranges: LazyVec::default(),
            max_ranges: count(max_ranges),
        }
    }

    /// As [`RecvBuffer::with_max_ranges`], on `storage` (from
    /// [`RecvBuffer::into_storage`] of another; its contents are never read). Storage
    /// bigger than `capacity` is dropped.
    pub fn with_storage(capacity: usize, max_ranges: usize, storage: Vec<u8>) -> RecvBuffer {
        let mut buffer = RecvBuffer::with_max_ranges(capacity, max_ranges);
        if storage.len() <= buffer.capacity() {
            buffer.ring = storage.into_boxed_slice();
        }
        buffer
    }

    /// The storage, for another buffer to reuse.
    pub fn into_storage(self) -> Vec<u8> {
        self.ring.into_vec()
    }

    /// The storage taken out, for another buffer to reuse; the buffer is left with
    /// none, to be dropped where it is.
    pub fn take_storage(&mut self) -> Vec<u8> {
        core::mem::take(&mut self.ring).into_vec()
    }

    /// `(capacity, max_ranges)` when the buffer holds nothing and no storage (not
    /// even for out-of-order ranges): then `with_max_ranges` of those gives it back.
    pub(crate) fn bare_shape(&self) -> Option<(u32, u32)> {
        (self.ring.is_empty()
            && self.readable == 0
            && self.head == 0
            && self.ranges.is_unallocated())
        .then_some((self.capacity, self.max_ranges))
    }

    /// [`RecvBuffer::take_storage_if_empty`], and the out-of-order ranges' storage
    /// too: for a receiving half that has closed (nothing more can arrive).
    pub(crate) fn shed_if_empty(&mut self) -> Vec<u8> {
        let storage = self.take_storage_if_empty();
        if self.readable == 0 && self.ranges.is_empty() {
            self.ranges = LazyVec::default();
        }
        storage
    }

    /// The storage, for another buffer to reuse, when nothing is held (empty
    /// otherwise); this buffer then holds no storage until written again.
    pub fn take_storage_if_empty(&mut self) -> Vec<u8> {
        if self.readable == 0 && self.ranges.is_empty() {
            self.head = 0;
            core::mem::take(&mut self.ring).into_vec()
        } else {
            Vec::new()
        }
    }

    /// Put `storage` (spare, contents irrelevant, at most the capacity) under a buffer
    /// that holds nothing and no storage, so the next data need not allocate. Gives
    /// `storage` back when the buffer has storage or data already, or it is too long.
    pub(crate) fn adopt_storage(&mut self, storage: Vec<u8>) -> Vec<u8> {
        if !self.ring.is_empty()
            || self.readable != 0
            || !self.ranges.is_empty()
            || storage.len() > self.capacity()
        {
            return storage;
        }
        self.head = 0;
        self.ring = storage.into_boxed_slice();
        Vec::new()
    }

    /// Total size in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Bytes of storage allocated now (grows on demand up to the capacity).
    pub fn storage(&self) -> usize {
        self.ring.len()
    }

    /// In-order bytes waiting to be read.
    pub fn readable(&self) -> usize {
        self.readable as usize
    }

    /// The receive window: room after the in-order bytes. Out-of-order bytes are inside it.
    pub fn window(&self) -> usize {
        (self.capacity - self.readable) as usize
    }

    /// The configured cap on out-of-order ranges.
    pub fn max_ranges(&self) -> usize {
        self.max_ranges as usize
    }

    /// Most out-of-order ranges kept at once: one per KiB of
    /// capacity (at least 32), and no more than [`max_ranges`](Self::max_ranges).
    pub fn range_limit(&self) -> usize {
        (self.capacity() / BYTES_PER_RANGE)
            .max(MIN_RANGE_LIMIT)
            .min(self.max_ranges())
    }

    /// Whether any out-of-order data is held.
    pub fn has_out_of_order(&self) -> bool {
        !self.ranges.is_empty()
    }

    /// Out-of-order bytes held (not readable yet).
    pub fn out_of_order_bytes(&self) -> usize {
        self.ranges.iter().map(|&(start, end)| end - start).sum()
    }

    /// Out-of-order ranges as `(start, end)` offsets from RCV.NXT, ascending, for SACK.
    pub fn out_of_order_ranges(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.ranges.iter().copied()
    }

    /// Accept `data` whose first byte is `offset` bytes after RCV.NXT. Bytes beyond the
    /// window are trimmed; bytes already held keep their first copy. See [`Insert`].
    pub fn insert(&mut self, offset: usize, data: &[u8]) -> Insert {
        let window = self.window();
        if data.is_empty() || offset >= window {
            return Insert {
                advanced: 0,
                stored: true,
            };
        }
        let end = offset + data.len().min(window - offset);
        let readable = self.readable();
        if readable + end > self.ring.len() {
            let size = storage_for(readable + end, self.capacity());
            self.ring = relinearise(&self.ring, self.head as usize, size);
            self.head = 0;
        }
        if offset == 0 && self.ranges.is_empty() {
            // In order with nothing held out of order, the common case: the general
            // path below would merge nothing and advance by all of it.
            let at = wrap(self.head as usize + readable, self.ring.len());
            ring_write(&mut self.ring, at, &data[..end]);
            // `end <= window() < 2^32`.
            self.readable += end as u32;
            return Insert {
                advanced: end,
                stored: true,
            };
        }
        // Ranges that overlap or touch [offset, end) merge with it.
        let first = self.ranges.partition_point(|&(_, e)| e < offset);
        let past = self.ranges.partition_point(|&(s, _)| s <= end);
        if offset > 0 && first == past && self.ranges.len() >= self.range_limit() {
            return Insert {
                advanced: 0,
                stored: false,
            };
        }
        self.copy_into_gaps(offset, &data[..end - offset], first..past);
        let mut merged = (offset, end);
        if first < past {
            merged.0 = merged.0.min(self.ranges[first].0);
            merged.1 = merged.1.max(self.ranges[past - 1].1);
            self.ranges.make_mut(INITIAL_RANGE_ROOM).drain(first..past);
        }
        if merged.0 > 0 {
            // Storage for the ranges comes with the first hole, all at once.
            self.ranges
                .make_mut(INITIAL_RANGE_ROOM.min(self.range_limit()))
                .insert(first, merged);
            return Insert {
                advanced: 0,
                stored: true,
            };
        }
        let advanced = merged.1;
        // `advanced <= window() < 2^32`.
        self.readable += advanced as u32;
        for range in self.ranges.as_mut_slice() {
            range.0 -= advanced;
            range.1 -= advanced;
        }
        Insert {
            advanced,
            stored: true,
        }
    }

    /// Copy the parts of `data` (which starts at `offset`) not covered by the held ranges
    /// `self.ranges[overlapping]`, so the first copy of every byte wins.
    fn copy_into_gaps(&mut self, offset: usize, data: &[u8], overlapping: core::ops::Range<usize>) {
        let base = self.head as usize + self.readable();
        let capacity = self.ring.len();
        let end = offset + data.len();
        let mut pos = offset;
        for index in overlapping {
            let (start, stop) = self.ranges[index];
            if start > pos {
                let at = wrap(wrap(base, capacity) + pos, capacity);
                ring_write(&mut self.ring, at, &data[pos - offset..start - offset]);
            }
            pos = pos.max(stop);
        }
        if pos < end {
            let at = wrap(wrap(base, capacity) + pos, capacity);
            ring_write(&mut self.ring, at, &data[pos - offset..]);
        }
    }

    /// The readable bytes as two slices (the second non-empty when they wrap), for reading
    /// without a copy; follow with [`RecvBuffer::consume`].
    pub fn readable_slices(&self) -> (&[u8], &[u8]) {
        ring_slices(&self.ring, self.head as usize, self.readable())
    }

    /// Drop `n` readable bytes (more than `readable()` drops them all).
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.readable());
        // `n <= readable < 2^32`; the head is an index into the ring, at most the
        // capacity long.
        self.readable -= n as u32;
        self.head = if self.readable == 0 && self.ranges.is_empty() {
            0
        } else {
            wrap(self.head as usize + n, self.ring.len()) as u32
        };
    }

    /// Copy in-order bytes into `out`; returns how many (0 when nothing is readable).
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let n = out.len().min(self.readable());
        copy_pair(
            &mut out[..n],
            ring_slices(&self.ring, self.head as usize, n),
        );
        self.consume(n);
        n
    }

    /// [`RecvBuffer::read`] of up to `max` bytes without the copy: `f` is shown them
    /// where they lie (one piece, or two where the ring wraps), then they are consumed.
    /// Returns how many (0 when nothing is readable, and `f` is not called).
    pub fn read_each(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let n = max.min(self.readable());
        if n == 0 {
            return 0;
        }
        let (a, b) = ring_slices(&self.ring, self.head as usize, n);
        f(a);
        if !b.is_empty() {
            f(b);
        }
        self.consume(n);
        n
    }

    /// Raise the capacity to `new_capacity` (at most [`MAX_CAPACITY`]; the window grows
    /// by the difference), keeping all data (storage follows on demand); a smaller or
    /// equal capacity does nothing.
    pub fn grow(&mut self, new_capacity: usize) {
        self.capacity = self.capacity.max(count(new_capacity));
    }
}

/// How many recently received out-of-order segments a [`SackRecorder`] remembers.
pub const SACK_RECORDER_DEPTH: usize = 8;

/// Remembers which out-of-order segments arrived most recently, to order SACK blocks.
///
/// RFC 2018 §4: "The first SACK block (i.e., the one immediately following the kind and
/// length fields in the option) MUST specify the contiguous block of data containing the
/// segment which triggered this ACK, unless that segment advanced the Acknowledgment
/// Number field in the header." and "The SACK option SHOULD be filled out by repeating
/// the most recent SACK blocks (based on first SACK blocks in previous SACK options) that
/// are not subsets of a SACK block already included in the SACK option being
/// constructed."
///
/// Call [`SackRecorder::record`] for every data segment received (in order or not), then
/// [`SackRecorder::blocks`] when building the ACK. Segments now below RCV.NXT are skipped.
#[derive(Debug, Clone, Default)]
pub struct SackRecorder {
    /// `(first, end)` sequence numbers of recent segments, most recent first.
    recent: [(SeqNumber, SeqNumber); SACK_RECORDER_DEPTH],
    /// Valid entries at the front of `recent`.
    len: usize,
    /// A duplicate segment to report in the next ACK's first block (RFC 2883 D-SACK).
    dsack: Option<(SeqNumber, SeqNumber)>,
}

impl SackRecorder {
    /// A recorder that remembers nothing yet.
    pub fn new() -> SackRecorder {
        SackRecorder::default()
    }

    /// Note that a segment covering `len` bytes from `seq` just arrived.
    pub fn record(&mut self, seq: SeqNumber, len: usize) {
        if len == 0 {
            return;
        }
        self.recent.copy_within(0..SACK_RECORDER_DEPTH - 1, 1);
        self.recent[0] = (seq, seq + len);
        self.len = (self.len + 1).min(SACK_RECORDER_DEPTH);
    }

    /// Forget everything (e.g. when the connection's receive side restarts).
    pub fn clear(&mut self) {
        self.len = 0;
        self.dsack = None;
    }

    /// Note that `[seq, end)` arrived a second time. RFC 2883 §4: "If the data
    /// receiver receives a duplicate segment, it SHOULD report it in the first SACK
    /// block" — of the next ACK only ("each duplicate contiguous sequence of data
    /// received is reported in at most one D-SACK block"). A later duplicate before
    /// that ACK replaces it.
    pub fn record_duplicate(&mut self, seq: SeqNumber, end: SeqNumber) {
        if seq < end {
            self.dsack = Some((seq, end));
        }
    }

    /// Whether a D-SACK block waits for the next ACK.
    pub fn has_dsack(&self) -> bool {
        self.dsack.is_some()
    }

    /// The D-SACK block went out: forget it.
    pub fn take_dsack(&mut self) -> Option<(SeqNumber, SeqNumber)> {
        self.dsack.take()
    }

    /// Up to `max` (at most 4) SACK blocks for `buf`'s out-of-order data: first the
    /// blocks holding the most recently received segments, then the remaining blocks in
    /// ascending order. Returns the blocks and how many are valid.
    pub fn blocks(
        &self,
        rcv_nxt: SeqNumber,
        buf: &RecvBuffer,
        max: usize,
    ) -> ([SackBlock; 4], usize) {
        let max = max.min(4);
        let mut out = [SackBlock::default(); 4];
        let mut n = 0;
        // RFC 2883 §4 (1): "A D-SACK block is only used to report a duplicate
        // contiguous sequence of data received by the receiver in the most recent
        // packet" and goes first; the blocks after it as RFC 2018 orders them (the
        // block containing a duplicate inside out-of-order data comes next, as the
        // duplicate was recorded as the most recent segment).
        if let Some((left, right)) = self.dsack
            && max > 0
        {
            out[0] = SackBlock {
                left: left.0,
                right: right.0,
            };
            n = 1;
        }
        // The block holding the duplicate follows it even when equal to it (the sender
        // recognises the D-SACK as a subset of the second block).
        let skip = n;
        for &(first, end) in &self.recent[..self.len] {
            if end <= rcv_nxt {
                continue;
            }
            let from = if first > rcv_nxt { first - rcv_nxt } else { 0 };
            let to = end - rcv_nxt;
            if let Some(range) = buf.out_of_order_ranges().find(|&(s, e)| s < to && e > from) {
                push_block(&mut out, (&mut n, skip), max, rcv_nxt, range);
            }
        }
        for range in buf.out_of_order_ranges() {
            push_block(&mut out, (&mut n, skip), max, rcv_nxt, range);
        }
        (out, n)
    }
}

/// Append the block for `(start, end)` (offsets from `rcv_nxt`) unless full or present
/// (among the blocks from index `skip` on).
fn push_block(
    out: &mut [SackBlock; 4],
    (n, skip): (&mut usize, usize),
    max: usize,
    rcv_nxt: SeqNumber,
    range: (usize, usize),
) {
    let block = SackBlock {
        left: (rcv_nxt + range.0).0,
        right: (rcv_nxt + range.1).0,
    };
    if *n < max && !out[skip..*n].contains(&block) {
        out[*n] = block;
        *n += 1;
    }
}

#[cfg(test)]
mod tests {
    /// `write_with` leaves the buffer as `write` of the same bytes does: across growth,
    /// acknowledgements that move the head, and a ring that wraps (two pieces).
    #[test]
    fn write_with_is_write_without_the_copy() {
        let mut copied = super::SendBuffer::new(1 << 14);
        let mut direct = super::SendBuffer::new(1 << 14);
        let mut pieces_seen = 0;
        for round in 0..200usize {
            let len = (round * 997) % 5000 + 1;
            let data: alloc::vec::Vec<u8> = (0..len).map(|i| (round + i) as u8).collect();
            let n = copied.write(&data);
            let mut at = 0;
            let m = direct.write_with(len, |piece| {
                piece.copy_from_slice(&data[at..at + piece.len()]);
                at += piece.len();
                pieces_seen += 1;
            });
            assert_eq!((n, at), (m, m), "round {round}");
            let ack = (round * 1301) % 7000;
            copied.consume(ack.min(copied.len()));
            direct.consume(ack.min(direct.len()));
        }
        assert!(pieces_seen > 200, "the ring wrapped under write_with");
        assert_eq!(copied.len(), direct.len());
        let (mut a, mut b) = (alloc::vec::Vec::new(), alloc::vec::Vec::new());
        for s in copied.slices(0, copied.len()) {
            a.extend_from_slice(s);
        }
        for s in direct.slices(0, direct.len()) {
            b.extend_from_slice(s);
        }
        assert_eq!(a, b);
    }

    /// The short-copy fast path writes what `copy_from_slice` writes, and nothing else.
    #[test]
    fn copy_bytes_is_copy_from_slice() {
        let src: alloc::vec::Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let lengths = (0..=40).chain([1023, 1024, 1025, 2047, 2048, 2049, 4097, 4999]);
        for n in lengths {
            let mut fast = alloc::vec![0u8; 5008];
            let mut slow = alloc::vec![0u8; 5008];
            super::copy_bytes(&mut fast[3..3 + n], &src[..n]);
            slow[3..3 + n].copy_from_slice(&src[..n]);
            assert_eq!(fast, slow, "length {n}");
            let mut extended = alloc::vec![9u8; 3];
            super::extend_bytes(&mut extended, &src[..n]);
            assert_eq!(extended[3..], src[..n], "extended by {n}");
            assert_eq!(extended[..3], [9, 9, 9]);
        }
    }

    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    fn stream(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn send_buffer_write_peek_consume_wraps() {
        let mut b = SendBuffer::new(8);
        assert!(b.is_empty());
        assert_eq!(b.write(b"abcdef"), 6);
        assert_eq!(b.free(), 2);
        b.consume(4);
        assert_eq!(b.len(), 2);
        assert_eq!(b.write(b"ghijklmnop"), 6); // only 6 fit
        assert_eq!(b.len(), 8);
        assert_eq!(b.free(), 0);
        assert_eq!(b.write(b"x"), 0);
        let mut out = [0u8; 16];
        assert_eq!(b.peek(0, &mut out), 8);
        assert_eq!(&out[..8], b"efghijkl");
        assert_eq!(b.peek(3, &mut out[..2]), 2);
        assert_eq!(&out[..2], b"hi");
        let (a, c) = b.slices(1, 100).as_pair().expect("two parts of the ring");
        assert_eq!(a, b"fgh");
        assert_eq!(c, b"ijkl");
        assert_eq!(b.peek(8, &mut out), 0);
        assert_eq!(b.slices(9, 3).count(), 0);
        b.consume(100);
        assert!(b.is_empty());
        assert_eq!(b.free(), 8);
    }

    #[test]
    fn send_buffer_zero_capacity_and_zero_length() {
        let mut b = SendBuffer::new(0);
        assert_eq!(b.write(b"abc"), 0);
        assert_eq!(b.write(b""), 0);
        assert_eq!(b.peek(0, &mut [0; 4]), 0);
        b.consume(3);
        assert!(b.is_empty());
        b.grow(4);
        assert_eq!(b.write(b"abcdef"), 4);
        assert_eq!(b.peek(0, &mut []), 0);
    }

    #[test]
    fn send_buffer_grow_keeps_wrapped_bytes() {
        let mut b = SendBuffer::new(4);
        b.write(b"abc");
        b.consume(2);
        b.write(b"def"); // wraps: c d e f
        b.grow(10);
        assert_eq!(b.capacity(), 10);
        let mut out = [0u8; 4];
        assert_eq!(b.peek(0, &mut out), 4);
        assert_eq!(&out, b"cdef");
        assert_eq!(b.write(b"0123456789"), 6);
        b.grow(3); // never shrinks
        assert_eq!(b.capacity(), 10);
    }

    /// Growth keeps the stream whether the ring grows in place (its bytes start at the
    /// front of the storage) or is copied out in order (they start further in, maybe
    /// wrapped), and the storage is the same power of two either way.
    #[test]
    fn send_buffer_grown_in_place_or_by_copy_keeps_the_stream() {
        let data = stream(200_000);
        for consumed in [0, 300] {
            let mut b = SendBuffer::new(1 << 20);
            assert_eq!(b.write(&data[..400]), 400);
            b.consume(consumed);
            let mut at = 400;
            for chunk in [200, 1000, 5000, 60_000, 100_000] {
                assert_eq!(b.write(&data[at..at + chunk]), chunk);
                at += chunk;
                let held = at - consumed;
                let mut out = vec![0; held];
                assert_eq!(b.peek(0, &mut out), held);
                assert_eq!(out, &data[consumed..at], "consumed {consumed}, at {at}");
                assert_eq!(b.storage(), storage_for(held, 1 << 20));
            }
        }
    }

    #[test]
    fn storage_grows_on_demand_up_to_the_capacity() {
        let mut send = SendBuffer::new(1 << 20);
        let mut recv = RecvBuffer::new(1 << 20);
        assert_eq!((send.storage(), recv.storage()), (0, 0), "idle: no storage");
        assert_eq!(
            recv.window(),
            1 << 20,
            "the window is the capacity from the start"
        );
        send.write(&[7; 100]);
        recv.insert(0, &[7; 100]);
        assert_eq!((send.storage(), recv.storage()), (MIN_STORAGE, MIN_STORAGE));
        // Out of order far ahead: storage covers it, in-order data kept.
        recv.insert(5000, &[9; 10]);
        assert_eq!(recv.storage(), 8192);
        let data = stream(300_000);
        assert_eq!(send.write(&data), 300_000);
        assert_eq!(send.storage(), 512 * 1024);
        let mut out = vec![0; 300_100];
        assert_eq!(send.peek(0, &mut out), 300_100);
        assert_eq!(&out[100..], &data[..]);
        assert_eq!(recv.read(&mut out), 100);
        assert_eq!(recv.capacity(), 1 << 20);
    }

    #[test]
    fn recv_in_order_read_and_window() {
        let mut r = RecvBuffer::new(8);
        assert_eq!(r.window(), 8);
        assert_eq!(
            r.insert(0, b"hello"),
            Insert {
                advanced: 5,
                stored: true
            }
        );
        assert_eq!(r.readable(), 5);
        assert_eq!(r.window(), 3);
        assert_eq!(
            r.insert(0, b"worldwide"),
            Insert {
                advanced: 3,
                stored: true
            }
        );
        assert_eq!(r.window(), 0);
        assert_eq!(
            r.insert(0, b"x"),
            Insert {
                advanced: 0,
                stored: true
            }
        );
        let mut out = [0u8; 6];
        assert_eq!(r.read(&mut out), 6);
        assert_eq!(&out, b"hellow");
        assert_eq!(r.window(), 6);
        assert_eq!(
            r.insert(0, b"123456"),
            Insert {
                advanced: 6,
                stored: true
            }
        );
        let (a, b) = r.readable_slices();
        assert_eq!(a.len() + b.len(), 8);
        assert_eq!(a, b"or");
        assert_eq!(b, b"123456");
        r.consume(3);
        assert_eq!(r.read(&mut out), 5);
        assert_eq!(&out[..5], b"23456");
        assert_eq!(r.read(&mut out), 0);
    }

    #[test]
    fn recv_out_of_order_fills_hole() {
        let mut r = RecvBuffer::new(16);
        assert_eq!(
            r.insert(4, b"efgh"),
            Insert {
                advanced: 0,
                stored: true
            }
        );
        assert_eq!(
            r.insert(10, b"kl"),
            Insert {
                advanced: 0,
                stored: true
            }
        );
        assert!(r.has_out_of_order());
        assert_eq!(
            r.out_of_order_ranges().collect::<Vec<_>>(),
            [(4, 8), (10, 12)]
        );
        assert_eq!(r.out_of_order_bytes(), 6);
        assert_eq!(r.window(), 16);
        assert_eq!(r.readable(), 0);
        assert_eq!(
            r.insert(0, b"abcd"),
            Insert {
                advanced: 8,
                stored: true
            }
        );
        assert_eq!(r.out_of_order_ranges().collect::<Vec<_>>(), [(2, 4)]);
        assert_eq!(
            r.insert(0, b"ij"),
            Insert {
                advanced: 4,
                stored: true
            }
        );
        assert!(!r.has_out_of_order());
        let mut out = [0u8; 16];
        assert_eq!(r.read(&mut out), 12);
        assert_eq!(&out[..12], b"abcdefghijkl");
    }

    #[test]
    fn recv_first_copy_wins_on_overlap() {
        let mut r = RecvBuffer::new(16);
        r.insert(5, b"AAAAA");
        assert_eq!(
            r.insert(0, b"bbbbbbbbbbbb"),
            Insert {
                advanced: 12,
                stored: true
            }
        );
        let mut out = [0u8; 12];
        r.read(&mut out);
        assert_eq!(&out, b"bbbbbAAAAAbb");
    }

    #[test]
    fn recv_adjacent_ranges_merge_and_duplicates_are_harmless() {
        let mut r = RecvBuffer::new(32);
        r.insert(4, b"ab");
        r.insert(6, b"cd");
        r.insert(2, b"xy");
        r.insert(4, b"ab");
        assert_eq!(r.out_of_order_ranges().collect::<Vec<_>>(), [(2, 8)]);
        r.insert(10, b"zz");
        r.insert(7, b"dXYZ"); // overlaps (2,8), touches (10,12) through 8..11
        assert_eq!(r.out_of_order_ranges().collect::<Vec<_>>(), [(2, 12)]);
        assert_eq!(
            r.insert(0, b"01"),
            Insert {
                advanced: 12,
                stored: true
            }
        );
        let mut out = [0u8; 12];
        r.read(&mut out);
        assert_eq!(&out, b"01xyabcdXYzz");
    }

    #[test]
    fn recv_range_limit_drops_new_ranges_only() {
        let mut r = RecvBuffer::with_max_ranges(64, 2);
        assert!(r.insert(10, b"a").stored);
        assert!(r.insert(20, b"b").stored);
        assert!(!r.insert(30, b"c").stored);
        assert!(r.insert(11, b"a").stored); // extends an existing range
        assert!(r.insert(5, b"xxxxx").stored); // merges with (10, 12)
        assert_eq!(
            r.out_of_order_ranges().collect::<Vec<_>>(),
            [(5, 12), (20, 21)]
        );
        assert_eq!(r.insert(0, b"01234").advanced, 12); // in-order is always stored
        let mut z = RecvBuffer::with_max_ranges(8, 0);
        assert!(!z.insert(1, b"a").stored);
        assert_eq!(z.insert(0, b"a").advanced, 1);
    }

    /// Every other full-sized segment of a 256 KiB window missing (a drop-tail queue
    /// overflowing under a fast-paced sender): 90 holes, all kept, where 32 ranges
    /// dropped every segment past the 32nd hole and the sender resent them. A 16 KiB
    /// buffer keeps 32 ranges, and the configured cap holds below both.
    #[test]
    fn recv_range_limit_scales_with_the_buffer() {
        const SEG: usize = 1448;
        let alternate = |r: &mut RecvBuffer| {
            let (data, capacity) = ([7u8; SEG], r.capacity());
            let held = (1..)
                .step_by(2)
                .map(|i| i * SEG)
                .take_while(|&at| at + SEG <= capacity)
                .filter(|&at| r.insert(at, &data).stored)
                .count();
            (held, r.out_of_order_ranges().count())
        };
        let mut big = RecvBuffer::new(256 << 10);
        assert_eq!(big.range_limit(), 256);
        assert_eq!(alternate(&mut big), (90, 90));
        // The holes filled in turn deliver the whole window, in order.
        let data = [7u8; SEG];
        let advanced: usize = (0..90).map(|_| big.insert(0, &data).advanced).sum();
        assert_eq!(advanced, 180 * SEG);
        assert!(!big.has_out_of_order());
        let mut small = RecvBuffer::new(16 << 10);
        assert_eq!(small.range_limit(), 32);
        assert_eq!(alternate(&mut small), (5, 5));
        let mut capped = RecvBuffer::with_max_ranges(256 << 10, 40);
        assert_eq!(capped.range_limit(), 40);
        assert_eq!(alternate(&mut capped), (40, 40));
    }

    #[test]
    fn recv_trims_beyond_window() {
        let mut r = RecvBuffer::new(8);
        r.insert(0, b"abc");
        assert_eq!(r.window(), 5);
        r.insert(3, b"efghij"); // only 3..5 fit
        assert_eq!(r.out_of_order_ranges().collect::<Vec<_>>(), [(3, 5)]);
        r.insert(5, b"x"); // at the window edge: trimmed entirely
        assert_eq!(r.insert(0, b"012").advanced, 5);
        assert_eq!(r.window(), 0);
        let mut out = [0u8; 8];
        assert_eq!(r.read(&mut out), 8);
        assert_eq!(&out, b"abc012ef");
    }

    #[test]
    fn recv_zero_capacity_and_empty_insert() {
        let mut r = RecvBuffer::new(0);
        assert_eq!(
            r.insert(0, b"abc"),
            Insert {
                advanced: 0,
                stored: true
            }
        );
        assert_eq!(r.read(&mut [0; 4]), 0);
        let mut r = RecvBuffer::new(4);
        assert_eq!(
            r.insert(2, b""),
            Insert {
                advanced: 0,
                stored: true
            }
        );
        assert!(!r.has_out_of_order());
    }

    #[test]
    fn recv_ring_wraps_with_out_of_order_data() {
        let mut r = RecvBuffer::new(8);
        r.insert(0, b"abcdef");
        let mut out = [0u8; 6];
        r.read(&mut out[..5]); // head at 5, one byte readable
        r.insert(2, b"xyz"); // ring positions 8..11 -> wraps to 0..3
        assert_eq!(r.insert(0, b"uv").advanced, 5);
        let mut all = [0u8; 8];
        assert_eq!(r.read(&mut all), 6);
        assert_eq!(&all[..6], b"fuvxyz");
    }

    #[test]
    fn read_each_shows_what_read_copies_across_the_wrap() {
        let mut r = RecvBuffer::new(8);
        r.insert(0, b"abcdef");
        r.read(&mut [0; 5]); // head at 5
        r.insert(0, b"ghijk"); // ring positions 6..11 -> wraps to 0..3
        let mut copied = r.clone();
        let mut out = [0u8; 4];
        assert_eq!(copied.read(&mut out), 4);
        let mut pieces: Vec<Vec<u8>> = Vec::new();
        assert_eq!(r.read_each(4, |p| pieces.push(p.to_vec())), 4);
        assert_eq!(pieces, [b"fgh".to_vec(), b"i".to_vec()]);
        assert_eq!(pieces.concat(), out);
        assert_eq!(r.readable(), 2);
        assert_eq!(r.window(), copied.window());
        let mut rest = Vec::new();
        assert_eq!(r.read_each(100, |p| rest.extend_from_slice(p)), 2);
        assert_eq!(rest, b"jk");
        assert_eq!(r.read_each(100, |_| panic!("nothing to show")), 0);
    }

    #[test]
    fn recv_grow_keeps_in_order_and_out_of_order_data() {
        let mut r = RecvBuffer::new(8);
        r.insert(0, b"abcdef");
        r.read(&mut [0; 5]);
        r.insert(2, b"gh"); // wraps inside the ring
        r.grow(16);
        assert_eq!(r.window(), 15);
        assert_eq!(r.insert(0, b"YZ").advanced, 4);
        let mut out = [0u8; 8];
        assert_eq!(r.read(&mut out), 5);
        assert_eq!(&out[..5], b"fYZgh");
    }

    #[test]
    fn sack_recorder_orders_most_recent_first() {
        let rcv_nxt = SeqNumber(u32::MAX - 5); // blocks wrap around 2^32
        let mut r = RecvBuffer::new(100);
        let mut rec = SackRecorder::new();
        for (offset, len) in [(10, 5), (30, 5), (50, 5), (70, 5), (90, 5)] {
            r.insert(offset, &[1; 5][..len]);
            rec.record(rcv_nxt + offset, len);
        }
        r.insert(35, &[2; 5]); // extends (30, 35)
        rec.record(rcv_nxt + 35, 5);
        let (blocks, n) = rec.blocks(rcv_nxt, &r, 4);
        assert_eq!(n, 4);
        let b = |s: usize, e: usize| SackBlock {
            left: (rcv_nxt + s).0,
            right: (rcv_nxt + e).0,
        };
        assert_eq!(blocks, [b(30, 40), b(90, 95), b(70, 75), b(50, 55)]);
        let (blocks, n) = rec.blocks(rcv_nxt, &r, 3);
        assert_eq!(&blocks[..n], &[b(30, 40), b(90, 95), b(70, 75)]);
    }

    #[test]
    fn sack_recorder_skips_delivered_data_and_fills_with_unrecorded() {
        let rcv_nxt = SeqNumber(1000);
        let mut r = RecvBuffer::new(100);
        let mut rec = SackRecorder::new();
        r.insert(5, b"aa");
        r.insert(20, b"bb"); // not recorded
        rec.record(rcv_nxt + 5, 2);
        let advanced = r.insert(0, b"01234").advanced;
        rec.record(rcv_nxt, 5);
        let rcv_nxt = rcv_nxt + advanced;
        let (blocks, n) = rec.blocks(rcv_nxt, &r, 4);
        assert_eq!(
            &blocks[..n],
            &[SackBlock {
                left: 1020,
                right: 1022
            }]
        );
        rec.clear();
        assert_eq!(rec.blocks(rcv_nxt, &RecvBuffer::new(4), 4).1, 0);
    }

    /// RFC 2883 §4: the duplicate goes first, followed by the block holding it, in the
    /// next ACK only.
    #[test]
    fn sack_recorder_puts_a_dsack_block_first_once() {
        let rcv_nxt = SeqNumber(1000);
        let mut r = RecvBuffer::new(100);
        let mut rec = SackRecorder::new();
        r.insert(10, b"abcd");
        rec.record(rcv_nxt + 10, 4);
        r.insert(30, b"xy");
        rec.record(rcv_nxt + 30, 2);
        // The segment at 10..14 arrives again.
        rec.record_duplicate(rcv_nxt + 10, rcv_nxt + 14);
        rec.record(rcv_nxt + 10, 4);
        let b = |l: usize, e: usize| SackBlock {
            left: (rcv_nxt + l).0,
            right: (rcv_nxt + e).0,
        };
        let (blocks, n) = rec.blocks(rcv_nxt, &r, 4);
        assert_eq!(&blocks[..n], &[b(10, 14), b(10, 14), b(30, 32)]);
        assert_eq!(rec.take_dsack(), Some((rcv_nxt + 10, rcv_nxt + 14)));
        let (blocks, n) = rec.blocks(rcv_nxt, &r, 4);
        assert_eq!(&blocks[..n], &[b(10, 14), b(30, 32)]);
        // Below RCV.NXT: the D-SACK block alone.
        rec.record_duplicate(rcv_nxt - 50, rcv_nxt);
        assert_eq!(rec.blocks(rcv_nxt, &RecvBuffer::new(4), 3), {
            let mut out = [SackBlock::default(); 4];
            out[0] = b(0, 0);
            out[0].left = (rcv_nxt - 50).0;
            (out, 1)
        });
    }

    proptest! {
        #[test]
        fn recv_reassembles_any_interleaving(
            len in 1usize..3000,
            capacity in 1usize..1500,
            max_ranges in 0usize..6,
            cuts in proptest::collection::vec(0usize..3000, 0..40),
            actions in proptest::collection::vec((0usize..64, 0usize..700, any::<bool>()), 0..200),
        ) {
            let data = stream(len);
            let mut bounds: Vec<usize> = cuts.into_iter().filter(|&c| c < len).collect();
            bounds.push(0);
            bounds.push(len);
            bounds.sort_unstable();
            bounds.dedup();
            let pieces: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
            let mut r = RecvBuffer::with_max_ranges(capacity, max_ranges);
            let mut delivered = 0; // bytes made in order (rcv_nxt)
            let mut out = Vec::new();
            let mut buf = [0u8; 700];
            let deliver = |r: &mut RecvBuffer, delivered: &mut usize, (start, end): (usize, usize)| {
                // A sender's segment, possibly overlapping what already arrived.
                if end > *delivered {
                    let from = start.max(*delivered);
                    let ins = r.insert(from - *delivered, &data[from..end]);
                    *delivered += ins.advanced;
                }
            };
            for (piece, read, overlap) in actions {
                let (start, end) = pieces[piece % pieces.len()];
                let seg = if overlap { (start.saturating_sub(read % 50), (end + 13).min(len)) } else { (start, end) };
                deliver(&mut r, &mut delivered, seg);
                let n = r.read(&mut buf[..read]);
                out.extend_from_slice(&buf[..n]);
                prop_assert_eq!(r.window() + r.readable(), capacity);
                let ranges: Vec<(usize, usize)> = r.out_of_order_ranges().collect();
                prop_assert!(ranges.len() <= max_ranges);
                prop_assert!(ranges.iter().all(|&(s, e)| 0 < s && s < e && e <= r.window()));
                prop_assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0));
            }
            // Then retransmit everything in order until done.
            while out.len() < len {
                for &piece in &pieces {
                    deliver(&mut r, &mut delivered, piece);
                    let n = r.read(&mut buf);
                    out.extend_from_slice(&buf[..n]);
                }
            }
            prop_assert_eq!(delivered, len);
            prop_assert_eq!(&out[..], &data[..]);
        }

        #[test]
        fn send_buffer_matches_a_queue(ops in proptest::collection::vec((0usize..300, 0usize..300), 0..100)) {
            let mut b = SendBuffer::new(257);
            let mut model: alloc::collections::VecDeque<u8> = alloc::collections::VecDeque::new();
            let mut next = 0u8;
            for (write, ack) in ops {
                let chunk: Vec<u8> = (0..write).map(|_| { next = next.wrapping_add(1); next }).collect();
                let n = b.write(&chunk);
                prop_assert_eq!(n, write.min(257 - model.len()));
                model.extend(&chunk[..n]);
                let mut out = [0u8; 300];
                let off = ack % (model.len() + 1);
                let got = b.peek(off, &mut out);
                prop_assert_eq!(got, model.len() - off);
                prop_assert!(out[..got].iter().eq(model.iter().skip(off)));
                b.consume(ack);
                model.drain(..ack.min(model.len()));
                prop_assert_eq!(b.len(), model.len());
            }
        }
    }
}
