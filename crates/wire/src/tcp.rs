//! TCP header (RFC 9293 §3.1) with every option: EOL, NOP, MSS, window scale (RFC 7323),
//! SACK-permitted and SACK blocks (RFC 2018), timestamps (RFC 7323), TCP Fast Open
//! (RFC 7413).

use crate::checksum::PseudoHeader;
use core::fmt;

use crate::{Error, Result, checksum};

/// TCP control bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Flags(pub u8);

impl Flags {
    /// No more data from sender.
    pub const FIN: Flags = Flags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: Flags = Flags(0x02);
    /// Reset the connection.
    pub const RST: Flags = Flags(0x04);
    /// Push function.
    pub const PSH: Flags = Flags(0x08);
    /// Acknowledgment field is significant.
    pub const ACK: Flags = Flags(0x10);
    /// Urgent pointer field is significant.
    pub const URG: Flags = Flags(0x20);
    /// ECN-Echo (RFC 3168).
    pub const ECE: Flags = Flags(0x40);
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: Flags = Flags(0x80);
    /// No bits set.
    pub const NONE: Flags = Flags(0);

    /// True when every bit of `other` is set in `self`.
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    /// The union of two sets of bits.
    pub const fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
    /// FIN set.
    pub const fn fin(self) -> bool {
        self.0 & 0x01 != 0
    }
    /// SYN set.
    pub const fn syn(self) -> bool {
        self.0 & 0x02 != 0
    }
    /// RST set.
    pub const fn rst(self) -> bool {
        self.0 & 0x04 != 0
    }
    /// PSH set.
    pub const fn psh(self) -> bool {
        self.0 & 0x08 != 0
    }
    /// ACK set.
    pub const fn ack(self) -> bool {
        self.0 & 0x10 != 0
    }
    /// URG set.
    pub const fn urg(self) -> bool {
        self.0 & 0x20 != 0
    }
}

impl core::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        self.union(rhs)
    }
}

/// One SACK block (RFC 2018 §3): the left edge is the first sequence number of a
/// block the receiver holds, the right edge the sequence number just past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct SackBlock {
    /// First sequence number of the block.
    pub left: u32,
    /// Sequence number immediately following the block.
    pub right: u32,
}

/// The options a TCP header carries, already decoded. Unknown options are skipped
/// when parsing and never emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Options {
    /// Maximum segment size (kind 2), only meaningful on SYN segments.
    pub mss: Option<u16>,
    /// Window scale shift count (kind 3), only meaningful on SYN segments.
    pub window_scale: Option<u8>,
    /// SACK-permitted (kind 4), only meaningful on SYN segments.
    pub sack_permitted: bool,
    /// SACK blocks (kind 5); `sack_len` of them are valid, at most 4 fit in a header.
    pub sack_blocks: [SackBlock; 4],
    /// How many entries of `sack_blocks` are valid.
    pub sack_len: u8,
    /// Timestamps (kind 8): (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
    /// TCP Fast Open (kind 34, or the experimental kind 254 with magic 0xF989; RFC 7413
    /// §4.1.1): an empty cookie asks for one, a cookie of 4 to 16 bytes (an even count)
    /// carries one. Only meaningful on SYN segments.
    pub fast_open: Option<FastOpenCookie>,
}

/// A TCP Fast Open cookie (RFC 7413 §4.1.1: "The cookie ... is a 4-16 byte (even)
/// opaque value"); empty in a cookie request. It remembers the option's form: kind 34,
/// or the pre-RFC experimental kind 254 (Linux answers a SYN in the form it came in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct FastOpenCookie {
    len: u8,
    experimental: bool,
    bytes: [u8; 16],
}

impl FastOpenCookie {
    /// The empty cookie of a cookie request (RFC 7413 §4.1.2).
    pub const REQUEST: FastOpenCookie = FastOpenCookie {
        len: 0,
        experimental: false,
        bytes: [0; 16],
    };

    /// A cookie of `bytes`: None unless empty or 4 to 16 bytes, an even count.
    pub fn new(bytes: &[u8]) -> Option<FastOpenCookie> {
        let len = bytes.len();
        if len != 0 && !((4..=16).contains(&len) && len.is_multiple_of(2)) {
            return None;
        }
        let mut cookie = FastOpenCookie {
            len: len as u8,
            experimental: false,
            bytes: [0; 16],
        };
        cookie.bytes[..len].copy_from_slice(bytes);
        Some(cookie)
    }

    /// The cookie's bytes (empty for a cookie request).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len.min(16))]
    }

    /// True for the empty cookie of a cookie request.
    pub fn is_request(&self) -> bool {
        self.len == 0
    }

    /// The same cookie in the experimental form (kind 254, magic 0xF989) or not.
    pub const fn with_experimental(mut self, experimental: bool) -> FastOpenCookie {
        self.experimental = experimental;
        self
    }

    /// True when the option is (or goes) in the experimental form.
    pub const fn is_experimental(&self) -> bool {
        self.experimental
    }

    /// Whether the two carry the same cookie bytes, whatever their forms.
    pub fn same_bytes(&self, other: &FastOpenCookie) -> bool {
        self.as_bytes() == other.as_bytes()
    }

    /// Bytes the option's kind, length (and magic) take.
    const fn head_len(&self) -> usize {
        if self.experimental { 4 } else { 2 }
    }

    /// Bytes the option takes on the wire, NOP padding to 4 included.
    const fn option_len(&self) -> usize {
        let len = if self.len > 16 { 16 } else { self.len as usize };
        (self.head_len() + len).div_ceil(4) * 4
    }
}

impl Options {
    /// The valid SACK blocks.
    pub fn sack(&self) -> &[SackBlock] {
        &self.sack_blocks[..usize::from(self.sack_len.min(4))]
    }
}

/// A TCP segment's header fields and payload, independent of the bytes it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number of the first octet (or the ISN on SYN).
    pub seq: u32,
    /// Acknowledgment number; meaningful only when `flags.ack()`.
    pub ack: u32,
    /// Control bits.
    pub flags: Flags,
    /// Window field as carried (unscaled).
    pub window: u16,
    /// Urgent pointer; meaningful only when `flags.urg()`.
    pub urgent: u16,
    /// Decoded options.
    pub options: Options,
    /// Segment text.
    pub payload: &'a [u8],
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = 20;
/// Largest header: data offset 15.
pub const MAX_HEADER_LEN: usize = 60;
/// Most option bytes a header holds.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;
/// IP protocol number of TCP.
const PROTOCOL: u8 = 6;

/// Option kinds (IANA "TCP Option Kind Numbers").
mod kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WINDOW_SCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMPS: u8 = 8;
    pub const FAST_OPEN: u8 = 34;
    /// RFC 6994 shared experimental kind; with magic [`FAST_OPEN_MAGIC`] it is Fast
    /// Open's pre-RFC form (RFC 7413 §4.1.1), still sent by some clients.
    pub const EXPERIMENTAL: u8 = 254;
    pub const FAST_OPEN_MAGIC: [u8; 2] = [0xf9, 0x89];
}

impl Options {
    /// Decodes option bytes (the header between byte 20 and the data offset).
    ///
    /// EOL ends the list, NOP is skipped, unknown kinds are skipped by their length.
    /// A length byte that is missing, below 2 or runs past the options, or a known kind
    /// with the wrong length, is `BadOption { kind, len }`. A repeated option
    /// overwrites the earlier one.
    pub fn parse(bytes: &[u8]) -> Result<Options> {
        // What every segment after the handshake carries when timestamps are on (RFC
        // 7323 Appendix A's layout), decoded without the loop: the same result.
        if let &[
            kind::NOP,
            kind::NOP,
            kind::TIMESTAMPS,
            10,
            a,
            b,
            c,
            d,
            e,
            f,
            g,
            h,
        ] = bytes
        {
            return Ok(Options {
                timestamps: Some((
                    u32::from_be_bytes([a, b, c, d]),
                    u32::from_be_bytes([e, f, g, h]),
                )),
                ..Options::default()
            });
        }
        Options::parse_list(bytes)
    }

    /// [`Options::parse`] without the shortcut: the option list walked kind by kind.
    fn parse_list(mut bytes: &[u8]) -> Result<Options> {
        let mut options = Options::default();
        while let Some(&kind) = bytes.first() {
            match kind {
                kind::EOL => break,
                kind::NOP => {
                    bytes = &bytes[1..];
                    continue;
                }
                _ => {}
            }
            let Some(&len) = bytes.get(1) else {
                return Err(Error::BadOption { kind, len: 0 });
            };
            if len < 2 || usize::from(len) > bytes.len() {
                return Err(Error::BadOption { kind, len });
            }
            let value = &bytes[2..usize::from(len)];
            options.parse_one(kind, len, value)?;
            bytes = &bytes[usize::from(len)..];
        }
        Ok(options)
    }

    /// Records one option of `kind` whose value (after kind and length) is `value`.
    fn parse_one(&mut self, kind: u8, len: u8, value: &[u8]) -> Result<()> {
        let bad = Error::BadOption { kind, len };
        match (kind, value) {
            (kind::MSS, &[a, b]) => self.mss = Some(u16::from_be_bytes([a, b])),
            (kind::WINDOW_SCALE, &[shift]) => self.window_scale = Some(shift),
            (kind::SACK_PERMITTED, &[]) => self.sack_permitted = true,
            (kind::TIMESTAMPS, &[a, b, c, d, e, f, g, h]) => {
                let tsval = u32::from_be_bytes([a, b, c, d]);
                let tsecr = u32::from_be_bytes([e, f, g, h]);
                self.timestamps = Some((tsval, tsecr));
            }
            (kind::SACK, _) => {
                // RFC 2018 §3: "A SACK option that specifies n blocks will have a length
                // of 8*n+2 bytes"; 40 option bytes hold at most 4.
                if value.is_empty() || !value.len().is_multiple_of(8) || value.len() > 32 {
                    return Err(bad);
                }
                self.sack_blocks = [SackBlock::default(); 4];
                for (slot, block) in self.sack_blocks.iter_mut().zip(value.chunks_exact(8)) {
                    slot.left = u32::from_be_bytes([block[0], block[1], block[2], block[3]]);
                    slot.right = u32::from_be_bytes([block[4], block[5], block[6], block[7]]);
                }
                self.sack_len = (value.len() / 8) as u8;
            }
            (kind::MSS | kind::WINDOW_SCALE | kind::SACK_PERMITTED | kind::TIMESTAMPS, _) => {
                return Err(bad);
            }
            // A malformed Fast Open option is ignored, as an unknown kind is, rather than
            // failing the segment (before RFC 7413 support it was skipped the same way).
            (kind::FAST_OPEN, cookie) => {
                if let Some(cookie) = FastOpenCookie::new(cookie) {
                    self.fast_open = Some(cookie);
                }
            }
            (kind::EXPERIMENTAL, [m0, m1, cookie @ ..]) if [*m0, *m1] == kind::FAST_OPEN_MAGIC => {
                if let Some(cookie) = FastOpenCookie::new(cookie) {
                    self.fast_open = Some(cookie.with_experimental(true));
                }
            }
            _ => {} // Unknown kind: skipped by its length.
        }
        Ok(())
    }

    /// Bytes before the SACK option: MSS, SACK-permitted/timestamps, NOP+WS and Fast
    /// Open.
    const fn fixed_len(&self) -> usize {
        let mut len = match &self.fast_open {
            Some(cookie) => cookie.option_len(),
            None => 0,
        };
        if self.mss.is_some() {
            len += 4;
        }
        if self.window_scale.is_some() {
            len += 4;
        }
        len += match (self.sack_permitted, self.timestamps.is_some()) {
            (_, true) => 12,    // SACKOK TS, or NOP NOP TS
            (true, false) => 4, // NOP NOP SACKOK
            (false, false) => 0,
        };
        len
    }

    /// How many SACK blocks `emit` writes: as many valid ones as fit in 40 bytes after
    /// the other options (4 alone, 3 with timestamps).
    pub const fn sack_blocks_emitted(&self) -> usize {
        let valid = if self.sack_len > 4 {
            4
        } else {
            self.sack_len as usize
        };
        let room = (MAX_OPTIONS_LEN - self.fixed_len()).saturating_sub(4) / 8;
        if valid < room { valid } else { room }
    }

    /// The options as `emit` writes them and `parse` reads them back: SACK blocks cut
    /// to [`Options::sack_blocks_emitted`] and unused block slots zeroed.
    pub fn as_emitted(&self) -> Options {
        let sack = self.sack_blocks_emitted();
        let mut sack_blocks = [SackBlock::default(); 4];
        sack_blocks[..sack].copy_from_slice(&self.sack_blocks[..sack]);
        Options {
            sack_blocks,
            sack_len: sack as u8,
            ..*self
        }
    }

    /// Bytes `emit` writes: always a multiple of 4, at most 40.
    pub const fn buffer_len(&self) -> usize {
        let sack = self.sack_blocks_emitted();
        self.fixed_len() + if sack > 0 { 4 + 8 * sack } else { 0 }
    }

    /// Writes the options in the order MSS, SACK-permitted and timestamps (`SACKOK TS`,
    /// `NOP NOP TS` or `NOP NOP SACKOK`), NOP WS, Fast Open (kind 34, padded with NOPs
    /// to 4 bytes), NOP NOP SACK, so every option that has a 32-bit field has it
    /// 4-aligned. The SYN options come in Linux's order
    /// (`tcp_options_write`), so packetdrill scripts written against Linux match them
    /// byte for byte. Returns the bytes written
    /// ([`Options::buffer_len`]).
    ///
    /// # Panics
    /// If `buffer` is shorter than [`Options::buffer_len`].
    pub fn emit(&self, buffer: &mut [u8]) -> usize {
        // The option set of every segment after the handshake with timestamps on:
        // NOP NOP TS in one store.
        if let (None, None, false, 0, Some((tsval, tsecr)), None) = (
            self.mss,
            self.window_scale,
            self.sack_permitted,
            self.sack_len,
            self.timestamps,
            self.fast_open,
        ) {
            let [v0, v1, v2, v3] = tsval.to_be_bytes();
            let [e0, e1, e2, e3] = tsecr.to_be_bytes();
            buffer[..12].copy_from_slice(&[
                kind::NOP,
                kind::NOP,
                kind::TIMESTAMPS,
                10,
                v0,
                v1,
                v2,
                v3,
                e0,
                e1,
                e2,
                e3,
            ]);
            return 12;
        }
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            buffer[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        if let Some(mss) = self.mss {
            let [a, b] = mss.to_be_bytes();
            put(&[kind::MSS, 4, a, b]);
        }
        match (self.sack_permitted, self.timestamps) {
            (true, Some(_)) => put(&[kind::SACK_PERMITTED, 2]),
            (false, Some(_)) => put(&[kind::NOP, kind::NOP]),
            (true, None) => put(&[kind::NOP, kind::NOP, kind::SACK_PERMITTED, 2]),
            (false, None) => {}
        }
        if let Some((tsval, tsecr)) = self.timestamps {
            put(&[kind::TIMESTAMPS, 10]);
            put(&tsval.to_be_bytes());
            put(&tsecr.to_be_bytes());
        }
        if let Some(shift) = self.window_scale {
            put(&[kind::NOP, kind::WINDOW_SCALE, 3, shift]);
        }
        if let Some(cookie) = &self.fast_open {
            // Linux's layout (`tcp_options_write`): kind, length (and the experimental
            // form's magic), cookie, then NOPs.
            let bytes = cookie.as_bytes();
            let head = cookie.head_len();
            if cookie.is_experimental() {
                let [m0, m1] = kind::FAST_OPEN_MAGIC;
                put(&[kind::EXPERIMENTAL, (head + bytes.len()) as u8, m0, m1]);
            } else {
                put(&[kind::FAST_OPEN, (head + bytes.len()) as u8]);
            }
            put(bytes);
            let pad = cookie.option_len() - head - bytes.len();
            put(&[kind::NOP, kind::NOP, kind::NOP][..pad]);
        }
        let sack = self.sack_blocks_emitted();
        if sack > 0 {
            put(&[kind::NOP, kind::NOP, kind::SACK, (2 + 8 * sack) as u8]);
            for block in &self.sack_blocks[..sack] {
                put(&block.left.to_be_bytes());
                put(&block.right.to_be_bytes());
            }
        }
        at
    }
}

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    /// Data offset in the high nibble (the low nibble holds reserved bits and AE/NS).
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WIN_SIZE: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// A read/write view of a TCP segment. The buffer must be exactly the segment (the IP
/// payload): the checksum covers all of it.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer and runs [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the fixed header fits and that the data offset is at least 5 words
    /// and within the buffer (`BadHeaderLen` otherwise).
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < HEADER_LEN {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have,
            });
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN || header_len > have {
            return Err(Error::BadHeaderLen(header_len));
        }
        Ok(())
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, range: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[range];
        u16::from_be_bytes([b[0], b[1]])
    }

    fn u32_at(&self, range: core::ops::Range<usize>) -> u32 {
        let b = &self.buffer.as_ref()[range];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// Sequence number.
    pub fn seq_number(&self) -> u32 {
        self.u32_at(field::SEQ_NUM)
    }

    /// Acknowledgment number.
    pub fn ack_number(&self) -> u32 {
        self.u32_at(field::ACK_NUM)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::DATA_OFFSET] >> 4) * 4
    }

    /// Control bits.
    pub fn flags(&self) -> Flags {
        Flags(self.buffer.as_ref()[field::FLAGS])
    }

    /// Window field (unscaled).
    pub fn window_len(&self) -> u16 {
        self.u16_at(field::WIN_SIZE)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        self.u16_at(field::URGENT)
    }

    /// Raw option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The segment text.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// Sequence space the segment occupies: text plus one each for SYN and FIN.
    pub fn segment_len(&self) -> usize {
        let flags = self.flags();
        self.payload().len() + usize::from(flags.syn()) + usize::from(flags.fin())
    }

    /// True when the checksum over pseudo-header and segment is correct.
    pub fn verify_checksum<A: PseudoHeader>(&self, src: &A, dst: &A) -> bool {
        sum_segment(self.buffer.as_ref(), src, dst) == 0xffff
    }
}

/// Ones-complement sum of the IPv4 pseudo-header and `segment`.
fn sum_segment<A: PseudoHeader>(segment: &[u8], src: &A, dst: &A) -> u16 {
    checksum::combine(&[
        src.pseudo_header(dst, PROTOCOL, segment.len() as u32),
        checksum::data(segment),
    ])
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    fn set_u32_at(&mut self, range: core::ops::Range<usize>, value: u32) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        self.set_u16_at(field::SRC_PORT, value);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        self.set_u16_at(field::DST_PORT, value);
    }

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, value: u32) {
        self.set_u32_at(field::SEQ_NUM, value);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, value: u32) {
        self.set_u32_at(field::ACK_NUM, value);
    }

    /// Sets the header length in bytes (a multiple of 4, 20..=60); clears the reserved
    /// bits that share its byte.
    pub fn set_header_len(&mut self, len: usize) {
        self.buffer.as_mut()[field::DATA_OFFSET] = ((len / 4) as u8 & 0x0f) << 4;
    }

    /// Sets the control bits.
    pub fn set_flags(&mut self, flags: Flags) {
        self.buffer.as_mut()[field::FLAGS] = flags.0;
    }

    /// Sets the window field.
    pub fn set_window_len(&mut self, value: u16) {
        self.set_u16_at(field::WIN_SIZE, value);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, value: u16) {
        self.set_u16_at(field::URGENT, value);
    }

    /// Computes and stores the checksum over the pseudo-header and the whole buffer.
    pub fn fill_checksum<A: PseudoHeader>(&mut self, src: &A, dst: &A) {
        self.set_checksum(0);
        let sum = sum_segment(self.buffer.as_ref(), src, dst);
        self.set_checksum(checksum::finish(sum));
    }

    /// Option bytes, mutable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// The segment text, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<'a> Repr<'a> {
    /// Reads a segment sent from `src` to `dst`, verifying the checksum when
    /// `verify_checksum` (`BadChecksum`) and decoding the options ([`Options::parse`]).
    pub fn parse<T: AsRef<[u8]> + ?Sized, A: PseudoHeader>(
        packet: &Packet<&'a T>,
        src: &A,
        dst: &A,
        verify_checksum: bool,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let buffer: &'a [u8] = packet.buffer.as_ref();
        let header_len = packet.header_len();
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq: packet.seq_number(),
            ack: packet.ack_number(),
            flags: packet.flags(),
            window: packet.window_len(),
            urgent: packet.urgent_at(),
            options: Options::parse(&buffer[HEADER_LEN..header_len])?,
            payload: &buffer[header_len..],
        })
    }

    /// Header length: 20 plus the options `emit` writes (a multiple of 4, ≤ 60).
    pub const fn header_len(&self) -> usize {
        HEADER_LEN + self.options.buffer_len()
    }

    /// Header plus payload.
    pub const fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len()
    }

    /// Sequence space the segment occupies: text plus one each for SYN and FIN.
    pub const fn segment_len(&self) -> usize {
        self.payload.len() + self.flags.syn() as usize + self.flags.fin() as usize
    }

    /// Writes header, options and payload into the first [`Repr::buffer_len`] bytes of
    /// `packet`. With `fill_checksum` the checksum is computed over those bytes; without
    /// (checksum offload) it is left 0.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized, A: PseudoHeader>(
        &self,
        packet: &mut Packet<&mut T>,
        src: &A,
        dst: &A,
        fill_checksum: bool,
    ) {
        let header_len = self.header_len();
        let total = header_len + self.payload.len();
        let buffer = &mut packet.buffer.as_mut()[..total];
        buffer[..HEADER_LEN].copy_from_slice(&self.fixed_header(header_len));
        self.options.emit(&mut buffer[HEADER_LEN..header_len]);
        buffer[header_len..].copy_from_slice(self.payload);
        if fill_checksum {
            let sum = checksum::finish(sum_segment(buffer, src, dst));
            buffer[field::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
        }
    }

    /// The 20 fixed header bytes for a header of `header_len` bytes, checksum zero:
    /// built in registers and stored with one copy (the same bytes the setters write).
    pub fn fixed_header(&self, header_len: usize) -> [u8; HEADER_LEN] {
        fixed_header(
            (self.src_port, self.dst_port),
            (self.seq, self.ack),
            header_len,
            self.flags,
            self.window,
            self.urgent,
        )
    }
}

/// The 20 fixed header bytes, checksum zero (see [`Repr::fixed_header`]).
#[inline]
fn fixed_header(
    (src_port, dst_port): (u16, u16),
    (seq, ack): (u32, u32),
    header_len: usize,
    flags: Flags,
    window: u16,
    urgent: u16,
) -> [u8; HEADER_LEN] {
    let [sp0, sp1] = src_port.to_be_bytes();
    let [dp0, dp1] = dst_port.to_be_bytes();
    let [s0, s1, s2, s3] = seq.to_be_bytes();
    let [a0, a1, a2, a3] = ack.to_be_bytes();
    let [w0, w1] = window.to_be_bytes();
    let [u0, u1] = urgent.to_be_bytes();
    [
        sp0,
        sp1,
        dp0,
        dp1,
        s0,
        s1,
        s2,
        s3,
        a0,
        a1,
        a2,
        a3,
        ((header_len / 4) as u8 & 0x0f) << 4,
        flags.0,
        w0,
        w1,
        0,
        0,
        u0,
        u1,
    ]
}

/// The header of the segment a connection sends most: no SYN (so no MSS, window scale
/// or SACK-permitted option), no SACK blocks, no urgent data; at most the timestamps
/// option, as `NOP NOP TS`. Written straight from its fields: the same bytes
/// [`Repr::emit`] writes for such a segment (`tests::plain_header_matches_repr`), with
/// neither a [`Repr`] nor an [`Options`] built, and the header length known from one bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainHeader {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Control bits (never SYN: a SYN carries more options).
    pub flags: Flags,
    /// Window field (unscaled).
    pub window: u16,
    /// Timestamps option `(TSval, TSecr)`.
    pub timestamps: Option<(u32, u32)>,
}

impl PlainHeader {
    /// Header length: 20, or 32 with timestamps.
    pub const fn header_len(&self) -> usize {
        if self.timestamps.is_some() {
            HEADER_LEN + 12
        } else {
            HEADER_LEN
        }
    }

    /// Writes the header (checksum zero) into the first [`PlainHeader::header_len`]
    /// bytes of `buffer`; returns that length.
    ///
    /// # Panics
    /// If `buffer` is shorter than [`PlainHeader::header_len`].
    #[inline]
    pub fn emit(&self, buffer: &mut [u8]) -> usize {
        let header_len = self.header_len();
        buffer[..HEADER_LEN].copy_from_slice(&fixed_header(
            (self.src_port, self.dst_port),
            (self.seq, self.ack),
            header_len,
            self.flags,
            self.window,
            0,
        ));
        if let Some((tsval, tsecr)) = self.timestamps {
            let [v0, v1, v2, v3] = tsval.to_be_bytes();
            let [e0, e1, e2, e3] = tsecr.to_be_bytes();
            buffer[HEADER_LEN..HEADER_LEN + 12].copy_from_slice(&[
                kind::NOP,
                kind::NOP,
                kind::TIMESTAMPS,
                10,
                v0,
                v1,
                v2,
                v3,
                e0,
                e1,
                e2,
                e3,
            ]);
        }
        header_len
    }
}

impl fmt::Display for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(Flags, char); 8] = [
            (Flags::SYN, 'S'),
            (Flags::FIN, 'F'),
            (Flags::RST, 'R'),
            (Flags::PSH, 'P'),
            (Flags::ACK, '.'),
            (Flags::URG, 'U'),
            (Flags::ECE, 'E'),
            (Flags::CWR, 'W'),
        ];
        for (flag, name) in NAMES {
            if self.contains(flag) {
                write!(f, "{name}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TCP {} > {} [{}] seq {}",
            self.src_port, self.dst_port, self.flags, self.seq
        )?;
        if self.flags.ack() {
            write!(f, " ack {}", self.ack)?;
        }
        write!(f, " win {} len {}", self.window, self.payload.len())?;
        let o = &self.options;
        if let Some(mss) = o.mss {
            write!(f, " mss {mss}")?;
        }
        if let Some(ws) = o.window_scale {
            write!(f, " wscale {ws}")?;
        }
        if o.sack_permitted {
            write!(f, " sackOK")?;
        }
        if let Some((val, ecr)) = o.timestamps {
            write!(f, " TS val {val} ecr {ecr}")?;
        }
        for block in o.sack() {
            write!(f, " sack {}:{}", block.left, block.right)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
