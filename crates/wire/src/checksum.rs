//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Every function here works on the ones-complement *sum* of 16-bit big-endian words,
//! folded to 16 bits and not yet complemented. Sums of pieces combine with [`combine`];
//! the value stored in a header is [`finish`] of the sum. A packet verifies when the sum
//! over all of it, checksum field included, is `0xffff`.
//!
//! ```
//! use impnet_wire::checksum;
//! let mut bytes = [0x45, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x00];
//! let stored = checksum::finish(checksum::data(&bytes));
//! bytes[6..8].copy_from_slice(&stored.to_be_bytes());
//! assert_eq!(checksum::data(&bytes), 0xffff);
//! ```

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Folds a wide ones-complement accumulator to 16 bits with end-around carry.
#[inline]
const fn fold(mut sum: u64) -> u16 {
    // Each step at least halves the width; four are always enough for 64 bits.
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// Ones-complement sum of `bytes` taken as big-endian 16-bit words (an odd final byte
/// is padded with a zero byte), folded to 16 bits and *not* complemented.
///
/// Written for speed: the sum is taken over native-endian 64-bit words (RFC 1071
/// §2(B): the sum is independent of byte order, so one swap at the end fixes it up,
/// and §2(C): it may be taken in wider words and folded), 32 bytes per iteration into
/// two 128-bit accumulators. Adding a 64-bit word to a 128-bit accumulator is an add
/// and an add-with-carry, so the carries are counted in the high half rather than
/// folded back word by word: 19 instructions per 64 bytes where 32-bit words in
/// 64-bit SSE2 lanes took 28 (W1a: 0.78 instead of 1.12 checksum instructions per
/// payload byte, `imp-bench --breakdown`). The accumulators cannot overflow:
/// each gains less than 2^65 per iteration.
pub fn data(bytes: &[u8]) -> u16 {
    if let Ok(header) = <&[u8; 20]>::try_from(bytes) {
        // An IPv4 header without options (summed twice per packet, once to send and
        // once to verify): five loads and adds, no loop.
        return data_20(header);
    }
    if bytes.len() < 32 {
        // Headers and small segments: the word loop alone, no lanes to set up and add.
        return finish_words(bytes, 0);
    }
    let word = |w: &[u8]| {
        u128::from(u64::from_ne_bytes([
            w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7],
        ]))
    };
    let (mut even, mut odd) = (0u128, 0u128);
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        even += word(&chunk[..8]) + word(&chunk[16..24]);
        odd += word(&chunk[8..16]) + word(&chunk[24..32]);
    }
    finish_words(chunks.remainder(), fold_128(even + odd))
}

/// Folds a 128-bit ones-complement accumulator to below 2^33 (ready for
/// [`finish_words`], which adds fewer than eight 32-bit words to it).
#[inline]
fn fold_128(sum: u128) -> u64 {
    let (low, carry) = (sum as u64).overflowing_add((sum >> 64) as u64);
    // End-around carry: `low` is at most 2^64 - 2 when the add carried.
    let sum = low + u64::from(carry);
    (sum & 0xffff_ffff) + (sum >> 32)
}

/// [`data`] of exactly 20 bytes, unrolled.
#[inline]
fn data_20(b: &[u8; 20]) -> u16 {
    let word = |i: usize| u64::from(u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]));
    let sum = word(0) + word(4) + word(8) + word(12) + word(16);
    u16::from_be(fold(sum))
}

/// [`data`] of `rest` (under 32 bytes, at an offset that is a multiple of 4) added to
/// the native-endian partial sum `sum`.
#[inline]
fn finish_words(rest: &[u8], mut sum: u64) -> u16 {
    let mut words = rest.chunks_exact(4);
    for word in &mut words {
        sum += u64::from(u32::from_ne_bytes([word[0], word[1], word[2], word[3]]));
    }
    // The last 0..=3 bytes start at an offset that is a multiple of 4, so zero padding
    // puts an odd final byte in the high half of its 16-bit word, as RFC 1071 asks.
    // (Spelled out rather than copied into a zeroed array: a copy of 0-3 bytes is a
    // call to memcpy, which costs more than the rest of a 20-byte header's sum.)
    let last = match *words.remainder() {
        [a] => [a, 0, 0, 0],
        [a, b] => [a, b, 0, 0],
        [a, b, c] => [a, b, c, 0],
        _ => [0; 4],
    };
    sum += u64::from(u32::from_ne_bytes(last));
    // The native-endian fold is the big-endian sum with its bytes swapped (on a
    // big-endian machine, the sum itself).
    u16::from_be(fold(sum))
}

/// Copies `src` into `dst` (same length) and returns [`data`] of the bytes copied, in
/// one pass: the checksum folded into the copy, so data that must be both moved and
/// summed is read once.
///
/// # Panics
/// If the lengths differ.
pub fn copy_and_sum(dst: &mut [u8], src: &[u8]) -> u16 {
    assert_eq!(dst.len(), src.len(), "copy_and_sum needs equal lengths");
    let mut acc = [0u64; 8];
    let mut from = src.chunks_exact(32);
    let mut to = dst.chunks_exact_mut(32);
    for (d, s) in (&mut to).zip(&mut from) {
        d.copy_from_slice(s);
        for (lane, word) in acc.iter_mut().zip(s.chunks_exact(4)) {
            *lane += u64::from(u32::from_ne_bytes([word[0], word[1], word[2], word[3]]));
        }
    }
    let rest = from.remainder();
    to.into_remainder().copy_from_slice(rest);
    let head: u64 = acc.iter().sum();
    // The remainder starts at a multiple of 32: its sum adds as is.
    let sum = u64::from(u16::from_be(fold(head))) + u64::from(data(rest));
    fold(sum)
}

/// The sum of a block as seen from an odd offset in the covered data (RFC 1071
/// §2(B): swapping the bytes of every word swaps the bytes of the sum).
pub const fn at_odd_offset(sum: u16) -> u16 {
    sum.swap_bytes()
}

/// Reference implementation of [`data`]: the plain RFC 1071 loop over 16-bit words.
/// Slow; kept as the oracle for tests and the baseline for the benchmark.
pub fn data_simple(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut words = bytes.chunks_exact(2);
    for word in &mut words {
        sum += u32::from(u16::from_be_bytes([word[0], word[1]]));
        // Fold as we go so the accumulator never overflows.
        sum = (sum & 0xffff) + (sum >> 16);
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    fold(u64::from(sum))
}

/// Ones-complement sum of already-folded partial sums.
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// Sum of the IPv4 pseudo-header (RFC 9293 §3.1, RFC 768) that TCP and UDP checksums
/// cover: source and destination address, zero, protocol, and the upper-layer length.
pub fn pseudo_header_v4(src: &Ipv4Addr, dst: &Ipv4Addr, protocol: u8, length: u32) -> u16 {
    let sum = u64::from(src.to_bits())
        + u64::from(dst.to_bits())
        + u64::from(protocol)
        + u64::from(length);
    // Each u32 above is two 16-bit words; fold handles the split.
    fold(sum)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1): source and destination address, the
/// upper-layer packet length as 32 bits, three zero bytes and the next-header value.
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let words = |a: &Ipv6Addr| -> u64 {
        let bits = a.to_bits();
        u64::from(bits as u32)
            + u64::from((bits >> 32) as u32)
            + u64::from((bits >> 64) as u32)
            + u64::from((bits >> 96) as u32)
    };
    fold(words(src) + words(dst) + u64::from(next_header) + u64::from(length))
}

/// An address that TCP, UDP and ICMPv6 checksums cover through a pseudo-header: an
/// IPv4 address ([`pseudo_header_v4`]), an IPv6 address ([`pseudo_header_v6`]) or
/// either ([`IpAddr`]).
pub trait PseudoHeader {
    /// Sum of the pseudo-header from `self` to `dst` for `protocol` and `length`.
    fn pseudo_header(&self, dst: &Self, protocol: u8, length: u32) -> u16;
}

impl PseudoHeader for Ipv4Addr {
    fn pseudo_header(&self, dst: &Self, protocol: u8, length: u32) -> u16 {
        pseudo_header_v4(self, dst, protocol, length)
    }
}

impl PseudoHeader for Ipv6Addr {
    fn pseudo_header(&self, dst: &Self, protocol: u8, length: u32) -> u16 {
        pseudo_header_v6(self, dst, protocol, length)
    }
}

impl PseudoHeader for IpAddr {
    /// Mixed families (which no packet carries) sum as IPv6 with the IPv4 address
    /// mapped (`::ffff:a.b.c.d`), so the result is defined and never matches a real
    /// IPv4 pseudo-header by accident.
    fn pseudo_header(&self, dst: &Self, protocol: u8, length: u32) -> u16 {
        match (self, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => pseudo_header_v4(s, d, protocol, length),
            (IpAddr::V6(s), IpAddr::V6(d)) => pseudo_header_v6(s, d, protocol, length),
            (s, d) => pseudo_header_v6(&v6(s), &v6(d), protocol, length),
        }
    }
}

fn v6(a: &IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => *a,
    }
}

/// The value to store in a checksum field: the ones complement of the sum.
pub const fn finish(sum: u16) -> u16 {
    !sum
}

/// RFC 1624 eqn. 3 incremental update, `HC' = ~(~HC + ~m + m')`: the new stored
/// checksum after one 16-bit word of the covered data changes from `old_word` to
/// `new_word`.
///
/// Unlike eqn. 2, eqn. 3 never yields the wrong zero for a non-zero packet. The one
/// difference from recomputing: when the covered data becomes all zeros, recomputation
/// stores `0xffff` and this stores `0x0000`, the other ones-complement zero.
pub fn update(old_checksum: u16, old_word: u16, new_word: u16) -> u16 {
    let sum = u64::from(!old_checksum) + u64::from(!old_word) + u64::from(new_word);
    !fold(sum)
}

/// [`update`] for a 32-bit field (an IPv4 address, a sequence number): both of its
/// 16-bit words change at once.
pub fn update_u32(old_checksum: u16, old_value: u32, new_value: u32) -> u16 {
    let sum = u64::from(!old_checksum)
        + u64::from(!(old_value >> 16) & 0xffff)
        + u64::from(!old_value & 0xffff)
        + u64::from(new_value >> 16)
        + u64::from(new_value & 0xffff);
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_pseudo_header_matches_the_bytes_rfc_8200_lists() {
        let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let dst: Ipv6Addr = "fe80::aa:bbff:fecc:dd01".parse().unwrap();
        let mut bytes = [0u8; 40];
        bytes[..16].copy_from_slice(&src.octets());
        bytes[16..32].copy_from_slice(&dst.octets());
        bytes[32..36].copy_from_slice(&70_000u32.to_be_bytes());
        bytes[39] = 6;
        assert_eq!(pseudo_header_v6(&src, &dst, 6, 70_000), data(&bytes));
        let (s, d) = (IpAddr::V6(src), IpAddr::V6(dst));
        assert_eq!(s.pseudo_header(&d, 6, 70_000), data(&bytes));
        let (s4, d4) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(
            IpAddr::V4(s4).pseudo_header(&IpAddr::V4(d4), 17, 8),
            pseudo_header_v4(&s4, &d4, 17, 8)
        );
    }

    // RFC 1071 §3 worked example: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
    const RFC1071: [u8; 8] = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];

    #[test]
    fn rfc1071_example() {
        assert_eq!(data(&RFC1071), 0xddf2);
        assert_eq!(data_simple(&RFC1071), 0xddf2);
    }

    #[test]
    fn odd_length_pads_high_byte() {
        assert_eq!(data(&[0xab]), 0xab00);
        assert_eq!(data(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(data(&[]), 0);
    }

    #[test]
    fn copy_and_sum_copies_and_matches_data() {
        let mut src = [0u8; 300];
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i * 13 + 5) as u8;
        }
        for len in [0, 1, 2, 31, 32, 33, 63, 64, 65, 100, 299, 300] {
            let mut dst = [0u8; 300];
            let sum = copy_and_sum(&mut dst[..len], &src[..len]);
            assert_eq!(&dst[..len], &src[..len]);
            assert_eq!(sum, data_simple(&src[..len]), "len {len}");
        }
        // A block at an odd offset contributes its sum byte-swapped.
        let (a, b) = src[..101].split_at(51);
        assert_eq!(
            combine(&[data(a), at_odd_offset(data(b))]),
            data(&src[..101])
        );
    }

    #[test]
    fn long_buffers_match_reference() {
        let mut buf = [0u8; 1000];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        for start in 0..9 {
            for end in (start..buf.len()).step_by(37) {
                assert_eq!(data(&buf[start..end]), data_simple(&buf[start..end]));
            }
        }
        let ones = [0xffu8; 999];
        assert_eq!(data(&ones), data_simple(&ones));
    }

    /// The 128-bit accumulators against the reference where every add carries: all
    /// ones and near-all-ones words, up to a jumbo frame and beyond.
    #[test]
    fn carry_heavy_buffers_match_reference() {
        let mut buf = [0xffu8; 70_000];
        for len in [32, 33, 63, 64, 65, 1448, 1460, 9000, 65_535, 70_000] {
            assert_eq!(data(&buf[..len]), data_simple(&buf[..len]), "ones, {len}");
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = if i % 11 == 0 { 0xfe } else { 0xff };
        }
        for start in 0..8 {
            let slice = &buf[start..];
            assert_eq!(data(slice), data_simple(slice), "near-ones from {start}");
        }
    }

    /// The unrolled 20-byte (IPv4 header) path against the reference, at every
    /// alignment, with carries (all ones) and without.
    #[test]
    fn twenty_bytes_match_reference() {
        let mut buf = [0u8; 64];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i * 29 + 11) as u8;
        }
        for start in 0..40 {
            let header = &buf[start..start + 20];
            assert_eq!(data(header), data_simple(header), "offset {start}");
        }
        let ones = [0xffu8; 20];
        assert_eq!(data(&ones), data_simple(&ones));
        assert_eq!(data(&[0u8; 20]), data_simple(&[0u8; 20]));
    }

    #[test]
    fn ipv4_header_verifies() {
        // A real IPv4 header with its checksum 0xb861 (Wikipedia's example).
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(data(&header), 0xffff);
        let mut zeroed = header;
        zeroed[10] = 0;
        zeroed[11] = 0;
        assert_eq!(finish(data(&zeroed)), 0xb861);
    }

    #[test]
    fn combine_and_pseudo_header() {
        assert_eq!(combine(&[0xffff, 0x0001]), 0x0001);
        assert_eq!(combine(&[data(&RFC1071[..4]), data(&RFC1071[4..])]), 0xddf2);
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        let bytes = [10, 0, 0, 1, 10, 0, 0, 2, 0, 6, 0, 0, 0x05, 0xdc];
        assert_eq!(pseudo_header_v4(&src, &dst, 6, 1500), data(&bytes));
    }

    #[test]
    fn incremental_update_matches_recompute() {
        let mut buf = RFC1071;
        let stored = finish(data(&buf));
        buf[2..4].copy_from_slice(&0x1234u16.to_be_bytes());
        assert_eq!(update(stored, 0xf203, 0x1234), finish(data(&buf)));
        let mut buf = RFC1071;
        buf[4..8].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        assert_eq!(
            update_u32(stored, 0xf4f5_f6f7, 0xdead_beef),
            finish(data(&buf))
        );
    }
}
