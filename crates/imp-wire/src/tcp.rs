//! TCP header (RFC 9293 §3.1) with every option: EOL, NOP, MSS, window scale (RFC 7323),
//! SACK-permitted and SACK blocks (RFC 2018), timestamps (RFC 7323).

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
