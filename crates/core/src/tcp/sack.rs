//! The sender's SACK scoreboard (RFC 6675): which bytes above SND.UNA the receiver said
//! it holds, and the loss-recovery questions asked of it (IsLost, NextSeg, SetPipe).
//!
//! Conventions: ranges are half-open `[left, right)` like SACK blocks; `snd_nxt` in
//! these functions is RFC 6675's HighData + 1, the sequence number after the highest byte
//! ever sent (SND.MAX if the caller rewinds SND.NXT on a timeout); `high_rxt` is the
//! sequence number just past the highest byte retransmitted in the current recovery (the
//! caller sets it to SND.UNA on entering recovery and to `seq + len` after each
//! retransmission), so "greater than HighRxt" in RFC 6675 reads `>= high_rxt` here.

use impnet_wire::tcp::SackBlock;

use super::lazy_vec::LazyVec;
use super::seq::SeqNumber;

/// How many separate SACKed ranges a [`Scoreboard`] keeps by default. Blocks that would
/// open one more are ignored: forgetting that data was SACKed only costs a spurious
/// retransmission, never correctness.
pub const DEFAULT_MAX_SACK_RANGES: usize = 64;

/// Sequence-number views of a [`SackBlock`]'s raw `u32` edges.
pub trait SackBlockExt {
    /// The block from `left` (first byte) to `right` (just past the last byte).
    fn from_seqs(left: SeqNumber, right: SeqNumber) -> Self;
    /// The first sequence number of the block.
    fn left_seq(&self) -> SeqNumber;
    /// The sequence number just past the block.
    fn right_seq(&self) -> SeqNumber;
}

impl SackBlockExt for SackBlock {
    fn from_seqs(left: SeqNumber, right: SeqNumber) -> SackBlock {
        SackBlock {
            left: left.0,
            right: right.0,
        }
    }
    fn left_seq(&self) -> SeqNumber {
        SeqNumber(self.left)
    }
    fn right_seq(&self) -> SeqNumber {
        SeqNumber(self.right)
    }
}

/// What one ACK's SACK blocks changed, from [`Scoreboard::on_ack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackUpdate {
    /// Bytes SACKed by this ACK that were not SACKed before.
    pub newly_sacked: usize,
    /// The first block was a D-SACK (RFC 2883 §4): it reports a duplicate, not new data.
    pub dsack: bool,
    /// Blocks ignored as invalid (empty, below SND.UNA, beyond `snd_nxt`, or over the
    /// range limit); a D-SACK block is not counted here.
    pub ignored: usize,
}

/// The SACK scoreboard of one connection's sender (RFC 6675 §2 "scoreboard"), keeping
/// up to `MAX_RANGES` ranges at once (a parameter of the type, not a field: 8 bytes
/// less in every connection; only tests choose another than the default).
#[derive(Debug, Clone)]
pub struct Scoreboard<const MAX_RANGES: usize = DEFAULT_MAX_SACK_RANGES> {
    /// SACKed ranges `[left, right)`: ascending, disjoint, not adjacent, all at or above
    /// the SND.UNA of the last `on_ack`; `len() <= MAX_RANGES` (the Vec reserves that
    /// capacity when the first range arrives, so it never reallocates; a connection
    /// that never sees a SACK block never allocates it).
    ranges: LazyVec<(SeqNumber, SeqNumber)>,
}

impl<const MAX_RANGES: usize> Default for Scoreboard<MAX_RANGES> {
    fn default() -> Scoreboard<MAX_RANGES> {
        Scoreboard {
            ranges: LazyVec::default(),
        }
    }
}

impl Scoreboard {
    /// An empty scoreboard keeping up to [`DEFAULT_MAX_SACK_RANGES`] ranges.
    pub fn new() -> Scoreboard {
        Scoreboard::default()
    }
}

impl<const MAX_RANGES: usize> Scoreboard<MAX_RANGES> {
    /// Forget all SACK information (RFC 6675 §5.1 allows keeping it after a timeout;
    /// this is for when the caller chooses not to, or the connection restarts).
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// Whether nothing is SACKed.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The SACKed ranges `[left, right)`, ascending.
    pub fn ranges(&self) -> impl Iterator<Item = (SeqNumber, SeqNumber)> + '_ {
        self.ranges.iter().copied()
    }

    /// Process an acceptable ACK: `snd_una` is SND.UNA *after* this ACK's cumulative
    /// acknowledgment, `blocks` its SACK blocks, `snd_nxt` HighData + 1. Drops everything
    /// below `snd_una`, then records each valid block.
    ///
    /// RFC 6675 §5: "the SACK scoreboard ... MUST be updated" with the blocks of every
    /// ACK; blocks outside `[snd_una, snd_nxt]` are ignored (RFC 2883 D-SACK blocks, or
    /// nonsense from a broken peer).
    #[inline]
    pub fn on_ack(
        &mut self,
        snd_una: SeqNumber,
        blocks: &[SackBlock],
        snd_nxt: SeqNumber,
    ) -> SackUpdate {
        // Almost every ACK: no blocks, nothing SACKed before.
        if blocks.is_empty() && self.ranges.is_empty() {
            return SackUpdate::default();
        }
        self.update(snd_una, blocks, snd_nxt)
    }

    /// [`Scoreboard::on_ack`] when there is something to do.
    #[inline(never)]
    fn update(
        &mut self,
        snd_una: SeqNumber,
        blocks: &[SackBlock],
        snd_nxt: SeqNumber,
    ) -> SackUpdate {
        self.drop_below(snd_una);
        let mut update = SackUpdate {
            dsack: dsack_block(blocks, snd_una).is_some(),
            ..SackUpdate::default()
        };
        let skip = usize::from(update.dsack);
        for block in &blocks[skip..] {
            let (left, right) = (block.left_seq(), block.right_seq());
            if !(left < right && snd_una <= left && right <= snd_nxt) {
                update.ignored += 1;
                continue;
            }
            match self.insert(left, right) {
                Some(newly) => update.newly_sacked += newly,
                None => update.ignored += 1,
            }
        }
        update
    }

    /// Remove what lies below `snd_una`, trimming a range that straddles it.
    fn drop_below(&mut self, snd_una: SeqNumber) {
        let gone = self
            .ranges
            .iter()
            .take_while(|&&(_, right)| right <= snd_una)
            .count();
        if gone > 0 {
            self.ranges.make_mut(MAX_RANGES).drain(..gone);
        }
        if let Some(first) = self.ranges.as_mut_slice().first_mut() {
            first.0 = first.0.max(snd_una);
        }
    }

    /// Merge `[left, right)` into the ranges; returns how many bytes were new, or `None`
    /// when it would exceed the range limit.
    fn insert(&mut self, left: SeqNumber, right: SeqNumber) -> Option<usize> {
        let first = self.ranges.iter().take_while(|&&(_, r)| r < left).count();
        let past = first
            + self.ranges[first..]
                .iter()
                .take_while(|&&(l, _)| l <= right)
                .count();
        if first == past && self.ranges.len() >= MAX_RANGES {
            return None;
        }
        let covered: usize = self.ranges[first..past]
            .iter()
            .map(|&(l, r)| r.min(right).distance_from(l.max(left)))
            .filter(|&n| n <= right.distance_from(left))
            .sum();
        let mut merged = (left, right);
        if first < past {
            merged.0 = merged.0.min(self.ranges[first].0);
            merged.1 = merged.1.max(self.ranges[past - 1].1);
            self.ranges.make_mut(MAX_RANGES).drain(first..past);
        }
        // Storage for the ranges comes with the first SACK block, all at once.
        self.ranges
            .make_mut(MAX_RANGES.max(1))
            .insert(first, merged);
        Some(right.distance_from(left) - covered)
    }

    /// Whether the byte `seq` has been SACKed.
    pub fn is_sacked(&self, seq: SeqNumber) -> bool {
        self.ranges
            .iter()
            .any(|&(left, right)| left <= seq && seq < right)
    }

    /// Total bytes SACKed (above SND.UNA).
    pub fn sacked_bytes(&self) -> usize {
        self.ranges
            .iter()
            .map(|&(left, right)| right.distance_from(left))
            .sum()
    }

    /// The sequence number just past the highest SACKed byte (the right edge of the
    /// highest block), or `None` when nothing is SACKed.
    pub fn highest_sacked(&self) -> Option<SeqNumber> {
        self.ranges.last().map(|&(_, right)| right)
    }

    /// SACKed bytes with sequence numbers greater than `seq`, and how many separate
    /// SACKed ranges lie entirely above `seq`.
    fn sacked_above(&self, seq: SeqNumber) -> (usize, usize) {
        let mut bytes = 0;
        let mut ranges = 0;
        for &(left, right) in self.ranges.iter() {
            if left > seq {
                bytes += right.distance_from(left);
                ranges += 1;
            } else if right > seq + 1 {
                bytes += right.distance_from(seq + 1);
            }
        }
        (bytes, ranges)
    }

    /// RFC 6675 §4 IsLost(SeqNum): "This routine returns whether the given sequence
    /// number is considered to be lost. The routine returns true when either DupThresh
    /// discontiguous SACKed sequences have arrived above 'SeqNum' or more than
    /// (DupThresh - 1) * SMSS bytes with sequence numbers greater than 'SeqNum' have been
    /// SACKed." Discontiguous sequences are counted as separate SACKed ranges.
    pub fn is_lost(&self, seq: SeqNumber, mss: usize, dupthresh: usize) -> bool {
        let (bytes, ranges) = self.sacked_above(seq);
        ranges >= dupthresh || bytes > dupthresh.saturating_sub(1).saturating_mul(mss)
    }

    /// The unSACKed holes `[start, end)` between `snd_una` and `snd_nxt`, ascending.
    fn holes(
        &self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
    ) -> impl Iterator<Item = (SeqNumber, SeqNumber)> + '_ {
        let mut from = snd_una;
        let ranges = self.ranges.iter().map(Some).chain(core::iter::once(None));
        ranges.filter_map(move |range| {
            let (to, next) = match range {
                Some(&(left, right)) => (left.min(snd_nxt), right),
                None => (snd_nxt, snd_nxt),
            };
            let hole = (from, to);
            from = from.max(next);
            (hole.0 < hole.1).then_some(hole)
        })
    }

    /// RFC 6675 §4 NextSeg() rule (1): "If there exists a smallest unSACKed sequence
    /// number 'S2' that meets the following three criteria for determining loss, the
    /// sequence range of one segment of up to SMSS octets starting with S2 MUST be
    /// returned. (1.a) S2 is greater than HighRxt. (1.b) S2 is less than the highest
    /// octet covered by any received SACK. (1.c) IsLost (S2) returns true."
    ///
    /// Returns `(S2, len)` with `len <= mss`, stopping at the next SACKed byte. Rule (2)
    /// (new data) is the caller's; rule (3) is [`Scoreboard::next_unsacked`]. Uses
    /// DupThresh = 3 (RFC 6675 §2); see [`Scoreboard::next_seg_with`] to choose.
    pub fn next_seg(
        &self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        high_rxt: SeqNumber,
        mss: usize,
    ) -> Option<(SeqNumber, usize)> {
        self.next_seg_with(snd_una, snd_nxt, high_rxt, mss, DUPTHRESH)
    }

    /// [`Scoreboard::next_seg`] with an explicit DupThresh.
    pub fn next_seg_with(
        &self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        high_rxt: SeqNumber,
        mss: usize,
        dupthresh: usize,
    ) -> Option<(SeqNumber, usize)> {
        let (s2, len) = self.next_unsacked(snd_una, snd_nxt, high_rxt, mss)?;
        // IsLost only decreases with the sequence number, so if the smallest candidate
        // is not lost, no later one is.
        self.is_lost(s2, mss, dupthresh).then_some((s2, len))
    }

    /// RFC 6675 §4 NextSeg() rule (3): "If the conditions for rules (1) and (2) fail, but
    /// there exists an unSACKed sequence number 'S3' that meets the criteria for
    /// detecting loss given in steps (1.a) and (1.b) above (specifically excluding step
    /// (1.c)), then one segment of up to SMSS octets starting with S3 SHOULD be returned."
    pub fn next_unsacked(
        &self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        high_rxt: SeqNumber,
        mss: usize,
    ) -> Option<(SeqNumber, usize)> {
        let highest = self.highest_sacked()?;
        let start = snd_una.max(high_rxt);
        self.holes(snd_una, snd_nxt.min(highest))
            .find(|&(_, end)| end > start)
            .map(|(hole_start, end)| {
                let s = hole_start.max(start);
                (s, end.distance_from(s).min(mss))
            })
            .filter(|&(_, len)| len > 0)
    }

    /// RFC 6675 §4 SetPipe(): "for each octet in the sequence space between HighACK and
    /// HighData that has not been SACKed: (a) If IsLost (octet) returns false: pipe += 1
    /// (b) If octet is less than or equal to HighRxt: pipe += 1". DupThresh = 3.
    ///
    /// Counted per hole: every octet of one hole has the same SACKed data above it, so
    /// IsLost is the same for all of them.
    pub fn pipe(
        &self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        high_rxt: SeqNumber,
        mss: usize,
    ) -> usize {
        self.pipe_with(snd_una, snd_nxt, high_rxt, mss, DUPTHRESH)
    }

    /// [`Scoreboard::pipe`] with an explicit DupThresh.
    pub fn pipe_with(
        &self,
        snd_una: SeqNumber,
        snd_nxt: SeqNumber,
        high_rxt: SeqNumber,
        mss: usize,
        dupthresh: usize,
    ) -> usize {
        let mut pipe = 0;
        for (start, end) in self.holes(snd_una, snd_nxt) {
            let len = end.distance_from(start);
            if !self.is_lost(start, mss, dupthresh) {
                pipe += len;
            }
            if high_rxt > start {
                pipe += high_rxt.min(end).distance_from(start);
            }
        }
        pipe
    }
}

/// The D-SACK block of an ACK's SACK blocks, if it has one, as `[left, right)`.
/// `snd_una` is the ACK's cumulative acknowledgment.
///
/// RFC 2883 §4: "If the first SACK block reports data below the cumulative ACK, or a
/// subset of the second SACK block, it is a D-SACK."
pub fn dsack_block(blocks: &[SackBlock], snd_una: SeqNumber) -> Option<(SeqNumber, SeqNumber)> {
    let first = blocks.first()?;
    let (left, right) = (first.left_seq(), first.right_seq());
    let below_ack = left < snd_una && left < right;
    let inside_second = blocks.get(1).is_some_and(|second| {
        left < right && second.left_seq() <= left && right <= second.right_seq()
    });
    (below_ack || inside_second).then_some((left, right))
}

/// RFC 6675 §2: "DupThresh: The number of duplicate acknowledgments required to
/// trigger a fast retransmission. ... set to 3."
pub const DUPTHRESH: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    const MSS: usize = 100;
    const BASE: u32 = u32::MAX - 250; // scenarios straddle 2^32

    fn s(offset: usize) -> SeqNumber {
        SeqNumber(BASE) + offset
    }

    fn blk(left: usize, right: usize) -> SackBlock {
        SackBlock::from_seqs(s(left), s(right))
    }

    fn ranges(sb: &Scoreboard) -> Vec<(usize, usize)> {
        sb.ranges().map(|(l, r)| (l - s(0), r - s(0))).collect()
    }

    #[test]
    fn block_helpers_round_trip() {
        let b = SackBlock::from_seqs(SeqNumber(5), SeqNumber(9));
        assert_eq!(b, SackBlock { left: 5, right: 9 });
        assert_eq!((b.left_seq(), b.right_seq()), (SeqNumber(5), SeqNumber(9)));
    }

    #[test]
    fn merges_and_counts_newly_sacked() {
        let mut sb = Scoreboard::new();
        let u = sb.on_ack(s(0), &[blk(200, 300), blk(500, 600)], s(1000));
        assert_eq!(
            u,
            SackUpdate {
                newly_sacked: 200,
                dsack: false,
                ignored: 0
            }
        );
        let u = sb.on_ack(s(0), &[blk(250, 400), blk(500, 600)], s(1000));
        assert_eq!(u.newly_sacked, 100);
        assert_eq!(ranges(&sb), [(200, 400), (500, 600)]);
        let u = sb.on_ack(s(0), &[blk(400, 500)], s(1000));
        assert_eq!(u.newly_sacked, 100);
        assert_eq!(ranges(&sb), [(200, 600)]);
        assert_eq!(sb.sacked_bytes(), 400);
        assert_eq!(sb.highest_sacked(), Some(s(600)));
        let u = sb.on_ack(s(0), &[blk(100, 700)], s(1000));
        assert_eq!(u.newly_sacked, 200);
        assert!(sb.is_sacked(s(100)) && sb.is_sacked(s(699)));
        assert!(!sb.is_sacked(s(99)) && !sb.is_sacked(s(700)));
    }

    #[test]
    fn drops_below_snd_una_and_ignores_bad_blocks() {
        let mut sb = Scoreboard::new();
        sb.on_ack(s(0), &[blk(100, 200), blk(300, 400)], s(1000));
        let u = sb.on_ack(
            s(150),
            &[blk(300, 400), blk(900, 1100), blk(600, 500)],
            s(1000),
        );
        assert_eq!(
            u,
            SackUpdate {
                newly_sacked: 0,
                dsack: false,
                ignored: 2
            }
        );
        assert_eq!(ranges(&sb), [(150, 200), (300, 400)]);
        sb.on_ack(s(400), &[], s(1000));
        assert!(sb.is_empty());
        assert_eq!(sb.highest_sacked(), None);
    }

    #[test]
    fn recognises_dsack() {
        let mut sb = Scoreboard::new();
        let u = sb.on_ack(s(500), &[blk(100, 200), blk(600, 700)], s(1000));
        assert_eq!(
            u,
            SackUpdate {
                newly_sacked: 100,
                dsack: true,
                ignored: 0
            }
        );
        let u = sb.on_ack(s(500), &[blk(620, 640), blk(600, 700)], s(1000));
        assert_eq!(
            u,
            SackUpdate {
                newly_sacked: 0,
                dsack: true,
                ignored: 0
            }
        );
    }

    #[test]
    fn dsack_block_below_the_ack_or_inside_the_second() {
        let ack = s(500);
        assert_eq!(dsack_block(&[blk(100, 200)], ack), Some((s(100), s(200))));
        assert_eq!(
            dsack_block(&[blk(620, 640), blk(600, 700)], ack),
            Some((s(620), s(640)))
        );
        assert_eq!(dsack_block(&[blk(600, 700), blk(800, 900)], ack), None);
        assert_eq!(dsack_block(&[blk(200, 100)], ack), None);
        assert_eq!(dsack_block(&[], ack), None);
    }

    #[test]
    fn range_limit_ignores_new_ranges() {
        let mut sb = Scoreboard::<2>::default();
        let u = sb.on_ack(
            s(0),
            &[blk(100, 200), blk(300, 400), blk(500, 600)],
            s(1000),
        );
        assert_eq!(u.ignored, 1);
        assert_eq!(u.newly_sacked, 200);
        assert_eq!(sb.on_ack(s(0), &[blk(150, 250)], s(1000)).newly_sacked, 50);
    }

    #[test]
    fn is_lost_by_bytes_and_by_ranges() {
        let mut sb = Scoreboard::new();
        // Two segments SACKed above 0: not yet lost (needs > 2 * MSS bytes or 3 ranges).
        sb.on_ack(s(0), &[blk(100, 300)], s(1000));
        assert!(!sb.is_lost(s(0), MSS, 3));
        sb.on_ack(s(0), &[blk(300, 301)], s(1000));
        assert!(sb.is_lost(s(0), MSS, 3));
        assert!(!sb.is_lost(s(301), MSS, 3));
        let mut sb = Scoreboard::new();
        sb.on_ack(
            s(0),
            &[blk(100, 110), blk(200, 210), blk(300, 310)],
            s(1000),
        );
        assert!(sb.is_lost(s(50), MSS, 3));
        assert!(!sb.is_lost(s(150), MSS, 3));
        assert!(sb.is_lost(s(150), MSS, 2));
    }

    #[test]
    fn next_seg_walks_lost_holes_above_high_rxt() {
        let mut sb = Scoreboard::new();
        // Holes: [0,100) [200,300) [400,500); SACKed 100..200, 300..400, 500..800.
        sb.on_ack(
            s(0),
            &[blk(100, 200), blk(300, 400), blk(500, 800)],
            s(1000),
        );
        assert_eq!(sb.next_seg(s(0), s(1000), s(0), MSS), Some((s(0), 100)));
        assert_eq!(sb.next_seg(s(0), s(1000), s(50), MSS), Some((s(50), 50)));
        assert_eq!(sb.next_seg(s(0), s(1000), s(100), MSS), Some((s(200), 100)));
        // [400, 500) has 300 bytes SACKed above: lost (> 2 * MSS).
        assert_eq!(sb.next_seg(s(0), s(1000), s(300), MSS), Some((s(400), 100)));
        // Above the highest SACK nothing qualifies (1.b).
        assert_eq!(sb.next_seg(s(0), s(1000), s(500), MSS), None);
        assert_eq!(sb.next_seg(s(0), s(1000), s(0), 30), Some((s(0), 30)));
        assert_eq!(Scoreboard::new().next_seg(s(0), s(1000), s(0), MSS), None);
    }

    #[test]
    fn next_seg_requires_loss_but_rule_3_does_not() {
        let mut sb = Scoreboard::new();
        sb.on_ack(s(0), &[blk(100, 200)], s(1000));
        assert_eq!(sb.next_seg(s(0), s(1000), s(0), MSS), None);
        assert_eq!(
            sb.next_unsacked(s(0), s(1000), s(0), MSS),
            Some((s(0), 100))
        );
        assert_eq!(sb.next_unsacked(s(0), s(1000), s(100), MSS), None);
    }

    #[test]
    fn pipe_counts_unlost_and_retransmitted() {
        let mut sb = Scoreboard::new();
        assert_eq!(sb.pipe(s(0), s(1000), s(0), MSS), 1000);
        sb.on_ack(
            s(0),
            &[blk(100, 200), blk(300, 400), blk(500, 800)],
            s(1000),
        );
        // Holes: [0,100) lost, [200,300) lost, [400,500) lost, [800,1000) not lost.
        assert_eq!(sb.pipe(s(0), s(1000), s(0), MSS), 200);
        // Retransmitted [0,100) and [200,250).
        assert_eq!(sb.pipe(s(0), s(1000), s(250), MSS), 200 + 100 + 50);
        assert_eq!(sb.pipe_with(s(0), s(1000), s(0), MSS, 10), 500); // nothing lost
        assert_eq!(sb.pipe(s(1000), s(1000), s(1000), MSS), 0);
    }

    #[test]
    fn holes_clip_to_snd_nxt() {
        let mut sb = Scoreboard::new();
        sb.on_ack(s(0), &[blk(100, 200)], s(200));
        let holes: Vec<_> = sb
            .holes(s(0), s(200))
            .map(|(a, b)| (a - s(0), b - s(0)))
            .collect();
        assert_eq!(holes, vec![(0, 100)]);
        let holes: Vec<_> = sb
            .holes(s(0), s(50))
            .map(|(a, b)| (a - s(0), b - s(0)))
            .collect();
        assert_eq!(holes, vec![(0, 50)]);
    }
}
