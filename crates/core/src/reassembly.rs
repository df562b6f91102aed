//! IPv4 and IPv6 fragment reassembly (RFC 791 §3.2, RFC 815, RFC 8200 §4.5).
//!
//! Each datagram being reassembled keeps the bytes received so far as a sorted list of
//! disjoint pieces (RFC 815's hole list, seen from the filled side). Memory is bounded
//! three ways: a datagram never exceeds 65535 bytes, the bytes held by all datagrams
//! (plus a fixed overhead per datagram and per piece) never exceed
//! [`ReassemblyConfig::max_bytes`] (on pressure the oldest incomplete datagram is
//! dropped), and a datagram not completed within [`ReassemblyConfig::timeout`] is freed.
//!
//! Overlaps: a fragment whose bytes repeat bytes already held exactly is fine (only its
//! new bytes are kept); one whose bytes *differ* from bytes already held drops the whole
//! datagram, in the spirit of RFC 5722 ("the entire datagram (and any constituent
//! fragments) MUST be silently discarded"), since either copy may be an attack. For
//! IPv6, where RFC 5722 applies as written, any overlap at all drops the datagram
//! (`Fragment::strict`).

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::net::IpAddr;

use crate::stats::ReassemblyStats;
use crate::time::{Duration, Instant};

/// Reassembly settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassemblyConfig {
    /// How long the fragments of one datagram are kept waiting for the rest (default
    /// 30 s; RFC 1122 §3.3.2 suggests 60 to 120 s).
    pub timeout: Duration,
    /// Bytes all incomplete datagrams may hold together, their bookkeeping included
    /// (default 256 KiB). At the limit the oldest incomplete datagram is dropped to make
    /// room (counted in `ReassemblyStats::memory`). Must be at least 65535 plus the
    /// bookkeeping (a few KiB for full-sized fragments) for a maximal datagram to fit.
    pub max_bytes: usize,
}

impl Default for ReassemblyConfig {
    fn default() -> Self {
        ReassemblyConfig {
            timeout: Duration::from_secs(30),
            max_bytes: 256 * 1024,
        }
    }
}

/// Bytes charged for a datagram's bookkeeping, an upper bound of what it allocates
/// besides its pieces: its map entry (a B-tree node holds 11 entries and, but for the
/// root, never fewer than 5, so with the inner nodes an entry costs less than three
/// times its size), the first allocation of its piece list (four pieces), and the
/// copy of fragment zero's header (at most 60 bytes). What is charged is what the
/// datagram holds, so `max_bytes` bounds the allocations themselves (plus the B-tree's
/// root node, under 1.2 KiB).
pub(crate) const DATAGRAM_OVERHEAD: usize =
    3 * size_of::<(Key, Datagram)>() + 4 * size_of::<Piece>() + 60;
/// Bytes charged for each piece's bookkeeping besides its data (which is allocated
/// to the byte): its entry in the piece list, twice over since the list grows by
/// doubling.
pub(crate) const PIECE_OVERHEAD: usize = 2 * size_of::<Piece>();
/// The largest IPv4 datagram, header included (RFC 791: the total length is 16 bits).
const MAX_DATAGRAM: usize = 65535;

/// RFC 791: "The internet identification field (ID) is used together with the source
/// and destination address, and the protocol fields, to identify datagram fragments
/// for reassembly."
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    ident: u32,
}

/// One fragment, as the IPv4 input path hands it over.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fragment<'a> {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) protocol: u8,
    /// IPv4's 16 bits or IPv6's 32.
    pub(crate) ident: u32,
    /// Any overlap drops the datagram, even of equal bytes (IPv6, RFC 5722 §4: "the
    /// entire datagram (and any constituent fragments) MUST be silently discarded").
    pub(crate) strict: bool,
    /// Offset of `payload` in the datagram's data, in bytes.
    pub(crate) offset: usize,
    pub(crate) more_frags: bool,
    /// The fragment's IPv4 header (kept from fragment zero, for the reassembled
    /// datagram's TTL and for ICMP quotes).
    pub(crate) header: &'a [u8],
    pub(crate) payload: &'a [u8],
}

/// A reassembled datagram: fragment zero's header and the whole data.
#[derive(Debug)]
pub(crate) struct Reassembled {
    pub(crate) header: Vec<u8>,
    pub(crate) payload: Vec<u8>,
}

#[derive(Debug)]
struct Piece {
    offset: usize,
    data: Vec<u8>,
}

impl Piece {
    fn end(&self) -> usize {
        self.offset + self.data.len()
    }
}

#[derive(Debug)]
struct Datagram {
    /// When the first fragment arrived; the oldest datagram is dropped first.
    created: Instant,
    /// Invariant: sorted by offset, disjoint, each non-empty.
    pieces: Vec<Piece>,
    /// Data length, known once the last fragment (MF clear) arrived. Invariant: no
    /// piece ends past it.
    total_len: Option<usize>,
    /// Fragment zero's header, empty until it arrives.
    header: Vec<u8>,
    /// Bytes charged against the limit for this datagram.
    accounted: usize,
}

/// Why a fragment did not complete a datagram (for the stack's counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Stored; more fragments needed.
    Stored,
    /// Dropped (counted in the stats).
    Dropped,
}

/// A datagram that timed out; `quote` is fragment zero's header and first 8 data bytes
/// when fragment zero had arrived (RFC 792 Time Exceeded, code 1).
#[derive(Debug)]
pub(crate) struct Expired {
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) quote: Option<Vec<u8>>,
}

/// Every datagram being reassembled by one stack.
#[derive(Debug)]
pub(crate) struct Reassembler {
    config: ReassemblyConfig,
    datagrams: BTreeMap<Key, Datagram>,
    /// Invariant: the sum of every datagram's `accounted`, never above `max_bytes`.
    accounted: usize,
}

impl Reassembler {
    pub(crate) fn new(config: ReassemblyConfig) -> Reassembler {
        Reassembler {
            config,
            datagrams: BTreeMap::new(),
            accounted: 0,
        }
    }

    /// Bytes charged against the limit right now.
    pub(crate) fn accounted(&self) -> usize {
        self.accounted
    }

    /// Datagrams being reassembled.
    #[cfg(test)]
    pub(crate) fn datagrams(&self) -> usize {
        self.datagrams.len()
    }

    /// Take one fragment; returns the datagram when it completes it.
    pub(crate) fn handle_fragment(
        &mut self,
        now: Instant,
        fragment: &Fragment<'_>,
        stats: &mut ReassemblyStats,
    ) -> Result<Reassembled, Outcome> {
        stats.fragments += 1;
        let start = fragment.offset;
        let end = start + fragment.payload.len();
        // RFC 791: every fragment but the last carries a multiple of 8 data bytes, and
        // the datagram (header included) fits in 65535 bytes.
        let misaligned = fragment.more_frags
            && (fragment.payload.is_empty() || !fragment.payload.len().is_multiple_of(8));
        if misaligned || end + fragment.header.len() > MAX_DATAGRAM {
            stats.bad_fragment += 1;
            return Err(Outcome::Dropped);
        }
        let key = Key {
            src: fragment.src,
            dst: fragment.dst,
            protocol: fragment.protocol,
            ident: fragment.ident,
        };
        if let Some(Err(conflict)) = self
            .datagrams
            .get(&key)
            .map(|d| d.check(fragment, start, end))
        {
            self.drop_datagram(&key);
            match conflict {
                Conflict::Bytes => stats.overlap_conflict += 1,
                Conflict::Length => stats.bad_fragment += 1,
            }
            return Err(Outcome::Dropped);
        }
        self.store(now, key, fragment, stats)?;
        self.try_complete(&key, stats).ok_or(Outcome::Stored)
    }

    /// Store the fragment's new bytes, making room first. Err when it was dropped.
    fn store(
        &mut self,
        now: Instant,
        key: Key,
        fragment: &Fragment<'_>,
        stats: &mut ReassemblyStats,
    ) -> Result<(), Outcome> {
        let start = fragment.offset;
        let end = start + fragment.payload.len();
        let gaps = match self.datagrams.get(&key) {
            Some(datagram) => datagram.gaps(start, end),
            None if start < end => alloc::vec![(start, end)],
            None => Vec::new(),
        };
        let is_new = !self.datagrams.contains_key(&key);
        let needed: usize = gaps
            .iter()
            .map(|(s, e)| e - s + PIECE_OVERHEAD)
            .sum::<usize>()
            + if is_new { DATAGRAM_OVERHEAD } else { 0 };
        if !self.make_room(&key, needed, stats) {
            if !is_new {
                self.drop_datagram(&key);
            }
            stats.memory += 1;
            return Err(Outcome::Dropped);
        }
        let datagram = self.datagrams.entry(key).or_insert_with(|| Datagram {
            created: now,
            pieces: Vec::new(),
            total_len: None,
            header: Vec::new(),
            accounted: DATAGRAM_OVERHEAD,
        });
        if gaps.is_empty() && !is_new {
            stats.duplicates += 1;
        }
        for (gap_start, gap_end) in gaps {
            let data = fragment.payload[gap_start - start..gap_end - start].to_vec();
            let position = datagram.pieces.partition_point(|p| p.offset < gap_start);
            datagram.pieces.insert(
                position,
                Piece {
                    offset: gap_start,
                    data,
                },
            );
            datagram.accounted += gap_end - gap_start + PIECE_OVERHEAD;
        }
        if !fragment.more_frags {
            datagram.total_len = Some(end);
        }
        if start == 0 && datagram.header.is_empty() {
            datagram.header.extend_from_slice(fragment.header);
        }
        self.accounted += needed;
        Ok(())
    }

    /// Drop the oldest datagrams other than `keep` until `needed` more bytes fit.
    fn make_room(&mut self, keep: &Key, needed: usize, stats: &mut ReassemblyStats) -> bool {
        if needed > self.config.max_bytes {
            return false;
        }
        while self.accounted + needed > self.config.max_bytes {
            let oldest = self
                .datagrams
                .iter()
                .filter(|(key, _)| *key != keep)
                .min_by_key(|(key, d)| (d.created, **key))
                .map(|(key, _)| *key);
            let Some(oldest) = oldest else {
                return false;
            };
            self.drop_datagram(&oldest);
            stats.memory += 1;
        }
        true
    }

    fn drop_datagram(&mut self, key: &Key) {
        if let Some(datagram) = self.datagrams.remove(key) {
            self.accounted -= datagram.accounted;
        }
    }

    /// When the datagram has every byte and its header, remove and assemble it.
    fn try_complete(&mut self, key: &Key, stats: &mut ReassemblyStats) -> Option<Reassembled> {
        let datagram = self.datagrams.get(key)?;
        let total = datagram.total_len?;
        let mut next = 0;
        for piece in &datagram.pieces {
            if piece.offset != next {
                return None;
            }
            next = piece.end();
        }
        if next != total || datagram.header.is_empty() {
            return None;
        }
        let datagram = self.datagrams.remove(key)?;
        self.accounted -= datagram.accounted;
        let mut payload = Vec::with_capacity(total);
        for piece in &datagram.pieces {
            payload.extend_from_slice(&piece.data);
        }
        stats.reassembled += 1;
        Some(Reassembled {
            header: datagram.header,
            payload,
        })
    }

    /// The earliest reassembly deadline.
    #[inline]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if self.datagrams.is_empty() {
            return None;
        }
        self.datagrams
            .values()
            .map(|d| d.created + self.config.timeout)
            .min()
    }

    /// Drop the datagrams whose time is up.
    pub(crate) fn handle_timeout(
        &mut self,
        now: Instant,
        stats: &mut ReassemblyStats,
        expired: &mut Vec<Expired>,
    ) {
        let timeout = self.config.timeout;
        let due: Vec<Key> = self
            .datagrams
            .iter()
            .filter(|(_, d)| d.created + timeout <= now)
            .map(|(key, _)| *key)
            .collect();
        for key in due {
            let Some(datagram) = self.datagrams.remove(&key) else {
                continue;
            };
            self.accounted -= datagram.accounted;
            stats.timeout += 1;
            let quote = datagram
                .pieces
                .first()
                .filter(|p| p.offset == 0 && !datagram.header.is_empty())
                .map(|p| {
                    let mut quote = datagram.header.clone();
                    quote.extend_from_slice(&p.data[..p.data.len().min(8)]);
                    quote
                });
            expired.push(Expired {
                src: key.src,
                dst: key.dst,
                quote,
            });
        }
    }
}

/// Why a fragment cannot join its datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conflict {
    /// Overlapping bytes differ.
    Bytes,
    /// The fragment contradicts the known end of the datagram.
    Length,
}

impl Datagram {
    /// Check `fragment` (covering `start..end`) against what is held.
    fn check(&self, fragment: &Fragment<'_>, start: usize, end: usize) -> Result<(), Conflict> {
        if let Some(total) = self.total_len {
            let ends_elsewhere = !fragment.more_frags && end != total;
            if ends_elsewhere || end > total {
                return Err(Conflict::Length);
            }
        } else if !fragment.more_frags && self.pieces.last().is_some_and(|p| p.end() > end) {
            return Err(Conflict::Length);
        }
        for piece in self.overlapping(start, end) {
            if fragment.strict {
                return Err(Conflict::Bytes);
            }
            let low = start.max(piece.offset);
            let high = end.min(piece.end());
            let held = &piece.data[low - piece.offset..high - piece.offset];
            let offered = &fragment.payload[low - start..high - start];
            if held != offered {
                return Err(Conflict::Bytes);
            }
        }
        Ok(())
    }

    fn overlapping(&self, start: usize, end: usize) -> impl Iterator<Item = &Piece> {
        let first = self.pieces.partition_point(|p| p.end() <= start);
        self.pieces[first..]
            .iter()
            .take_while(move |p| p.offset < end)
    }

    /// The parts of `start..end` not yet held.
    fn gaps(&self, start: usize, end: usize) -> Vec<(usize, usize)> {
        let mut gaps = Vec::new();
        let mut cursor = start;
        for piece in self.overlapping(start, end) {
            if piece.offset > cursor {
                gaps.push((cursor, piece.offset));
            }
            cursor = cursor.max(piece.end());
        }
        if cursor < end {
            gaps.push((cursor, end));
        }
        gaps
    }
}

#[cfg(test)]
mod tests;
