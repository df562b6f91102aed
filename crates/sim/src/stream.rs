//! The bytes a binary bulk flow sends: a function of the stream offset alone, made by
//! copying from one table and checked by comparing with it.
//!
//! The stream is cut into blocks of [`BLOCK`] bytes; each block is a run of a shared
//! table of pseudo-random bytes ([`TABLE`] of them, so that it stays in a core's L2
//! cache), starting at a place drawn from the flow's key and the block's index. The
//! sender copies runs (no generator step per word, no hash chain: seed 000's
//! application "making each record", as a read from a file would), and the receiver
//! compares what it reads with the same runs, so a byte out of place, duplicated, lost
//! or changed is seen where it is. Data moved to another offset goes unseen only if it
//! lands on the same place of the table: one chance in [`TABLE`] per misplaced run.
//!
//! [`Pattern`](crate::bulk::Pattern) and [`StreamHash`](crate::bulk::StreamHash) stay
//! for the streams that are not binary bulk flows (text mode, FTP, `run_bulk`).

use std::sync::OnceLock;

/// log2 of [`TABLE`].
const TABLE_BITS: u32 = 18;
/// Distinct places a block may start at: 256 KiB of table.
pub const TABLE: usize = 1 << TABLE_BITS;
/// Bytes per block: each is one run of the table.
pub const BLOCK: usize = 1 << 11;

/// The table, with its first [`BLOCK`] bytes repeated at its end so that every run is
/// one slice. The same for every flow and every run (made once, from a constant).
fn table() -> &'static [u8] {
    static TABLE_BYTES: OnceLock<Box<[u8]>> = OnceLock::new();
    TABLE_BYTES.get_or_init(|| {
        let mut bytes = vec![0u8; TABLE + BLOCK];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for word in bytes.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        let (head, tail) = bytes.split_at_mut(TABLE);
        tail.copy_from_slice(&head[..BLOCK]);
        bytes.into_boxed_slice()
    })
}

/// SplitMix64's finaliser: a 64-bit mix in which every input bit moves every output bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One flow's stream (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamPattern {
    key: u64,
}

impl StreamPattern {
    /// The stream of the flow seeded with `seed`.
    pub fn new(seed: u64) -> StreamPattern {
        StreamPattern {
            key: mix(seed ^ 0x6a09_e667_f3bc_c909),
        }
    }

    /// The table's bytes from stream offset `offset` to the end of its block.
    fn run(&self, table: &'static [u8], offset: u64) -> &'static [u8] {
        let start = (mix(self.key ^ (offset / BLOCK as u64)) >> (64 - TABLE_BITS)) as usize;
        let within = (offset % BLOCK as u64) as usize;
        &table[start + within..start + BLOCK]
    }

    /// Write the stream's bytes from offset `offset` into `out`.
    pub fn fill(&self, mut offset: u64, mut out: &mut [u8]) {
        let table = table();
        while !out.is_empty() {
            let run = self.run(table, offset);
            let n = run.len().min(out.len());
            let (now, rest) = out.split_at_mut(n);
            now.copy_from_slice(&run[..n]);
            out = rest;
            offset += n as u64;
        }
    }

    /// Whether `data` is the stream's bytes from offset `offset`.
    pub fn matches(&self, mut offset: u64, mut data: &[u8]) -> bool {
        let table = table();
        while !data.is_empty() {
            let run = self.run(table, offset);
            let n = run.len().min(data.len());
            if data[..n] != run[..n] {
                return false;
            }
            data = &data[n..];
            offset += n as u64;
        }
        true
    }
}

/// The receiving side of a [`StreamPattern`]: what arrived, checked piece by piece.
#[derive(Debug, Clone, Copy)]
pub struct StreamCheck {
    pattern: StreamPattern,
    /// Bytes checked so far.
    len: u64,
    /// Every byte so far was the stream's.
    intact: bool,
}

impl StreamCheck {
    /// Nothing received yet of `pattern`'s stream.
    pub fn new(pattern: StreamPattern) -> StreamCheck {
        StreamCheck {
            pattern,
            len: 0,
            intact: true,
        }
    }

    /// The next bytes received.
    pub fn update(&mut self, data: &[u8]) {
        if self.intact && !self.pattern.matches(self.len, data) {
            self.intact = false;
        }
        self.len += data.len() as u64;
    }

    /// Bytes received so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Nothing received yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every byte received so far was the stream's, in its place.
    pub fn intact(&self) -> bool {
        self.intact
    }
}

#[cfg(test)]
mod tests {
    use super::{BLOCK, StreamCheck, StreamPattern};

    /// The stream's first `len` bytes, filled in pieces of the given sizes in turn.
    fn filled_in_pieces(pattern: StreamPattern, len: usize, pieces: &[usize]) -> Vec<u8> {
        let mut out = vec![0u8; len];
        let (mut at, mut i) = (0, 0);
        while at < len {
            let n = pieces[i % pieces.len()].min(len - at);
            pattern.fill(at as u64, &mut out[at..at + n]);
            at += n;
            i += 1;
        }
        out
    }

    #[test]
    fn the_stream_does_not_depend_on_how_it_is_cut() {
        let pattern = StreamPattern::new(7);
        let len = 5 * BLOCK + 333;
        let whole = filled_in_pieces(pattern, len, &[len]);
        for pieces in [&[1][..], &[7, 1448, 3], &[BLOCK - 1, 2], &[8192]] {
            assert_eq!(filled_in_pieces(pattern, len, pieces), whole, "{pieces:?}");
        }
        let mut check = StreamCheck::new(pattern);
        for piece in whole.chunks(1000) {
            check.update(piece);
        }
        assert!(check.intact());
        assert_eq!(check.len(), len as u64);
    }

    #[test]
    fn blocks_and_flows_differ() {
        let (a, b) = (StreamPattern::new(1), StreamPattern::new(2));
        let first = filled_in_pieces(a, 64 * BLOCK, &[BLOCK]);
        let blocks: Vec<&[u8]> = first.chunks(BLOCK).collect();
        for (i, x) in blocks.iter().enumerate() {
            for y in &blocks[i + 1..] {
                assert_ne!(x, y, "two blocks of one stream alike");
            }
        }
        assert_ne!(first, filled_in_pieces(b, 64 * BLOCK, &[BLOCK]));
    }

    #[test]
    fn a_byte_out_of_place_is_seen() {
        let pattern = StreamPattern::new(3);
        let good = filled_in_pieces(pattern, 4 * BLOCK, &[1448]);
        assert!(pattern.matches(0, &good));
        assert!(pattern.matches(1000, &good[1000..3000]));
        // A bit flipped.
        let mut flipped = good.clone();
        flipped[BLOCK + 5] ^= 0x10;
        assert!(!pattern.matches(0, &flipped));
        // A segment's bytes at the next segment's place (a stale retransmission).
        assert!(!pattern.matches(1448, &good[..1448]));
        // A byte lost: everything after it one place early.
        let mut lost = good.clone();
        lost.remove(100);
        assert!(!pattern.matches(0, &lost[..2000]));
        // Two blocks swapped.
        let mut swapped = good.clone();
        let (first, second) = swapped.split_at_mut(BLOCK);
        first.swap_with_slice(&mut second[..BLOCK]);
        let mut check = StreamCheck::new(pattern);
        check.update(&swapped);
        assert!(!check.intact());
        // Once seen, a bad byte is remembered whatever comes after.
        check.update(&good[..10]);
        assert!(!check.intact());
    }
}
