//! The ICMPv6 header and its type field: [`Packet`], the zero-copy view every
//! ICMPv6 message is read and written through ([`crate::ndp`] and [`crate::mld`] too),
//! and [`Message`] with the code enums. A leaf: the message kinds build on it, and
//! [`super::Repr`] dispatches to them.

use core::net::Ipv6Addr;

use crate::ipv6::{self, protocol};
use crate::{Error, Result, checksum};

/// Length of the ICMPv6 header: type, code, checksum and the 4-byte message body
/// that every message type starts with.
pub const HEADER_LEN: usize = 8;
/// Most bytes of the invoking packet an error message quotes: what keeps the error,
/// in its IPv6 header, within the minimum MTU (1280 - 40 - 8).
pub const MAX_INVOKING_LEN: usize = ipv6::MIN_MTU - ipv6::HEADER_LEN - HEADER_LEN;

/// The type field (IANA "ICMPv6 Parameters").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// Destination Unreachable, 1.
    DstUnreachable,
    /// Packet Too Big, 2.
    PacketTooBig,
    /// Time Exceeded, 3.
    TimeExceeded,
    /// Parameter Problem, 4.
    ParamProblem,
    /// Echo Request, 128.
    EchoRequest,
    /// Echo Reply, 129.
    EchoReply,
    /// Multicast Listener Query, 130 (MLDv1 and v2).
    MldQuery,
    /// Multicast Listener Report, 131 (MLDv1).
    MldReport,
    /// Multicast Listener Done, 132 (MLDv1).
    MldDone,
    /// Router Solicitation, 133.
    RouterSolicit,
    /// Router Advertisement, 134.
    RouterAdvert,
    /// Neighbor Solicitation, 135.
    NeighborSolicit,
    /// Neighbor Advertisement, 136.
    NeighborAdvert,
    /// Redirect, 137.
    Redirect,
    /// Version 2 Multicast Listener Report, 143 (RFC 3810).
    MldReportV2,
    /// Any other type.
    Unknown(u8),
}

impl From<u8> for Message {
    fn from(value: u8) -> Message {
        match value {
            1 => Message::DstUnreachable,
            2 => Message::PacketTooBig,
            3 => Message::TimeExceeded,
            4 => Message::ParamProblem,
            128 => Message::EchoRequest,
            129 => Message::EchoReply,
            130 => Message::MldQuery,
            131 => Message::MldReport,
            132 => Message::MldDone,
            133 => Message::RouterSolicit,
            134 => Message::RouterAdvert,
            135 => Message::NeighborSolicit,
            136 => Message::NeighborAdvert,
            137 => Message::Redirect,
            143 => Message::MldReportV2,
            other => Message::Unknown(other),
        }
    }
}

impl From<Message> for u8 {
    fn from(value: Message) -> u8 {
        match value {
            Message::DstUnreachable => 1,
            Message::PacketTooBig => 2,
            Message::TimeExceeded => 3,
            Message::ParamProblem => 4,
            Message::EchoRequest => 128,
            Message::EchoReply => 129,
            Message::MldQuery => 130,
            Message::MldReport => 131,
            Message::MldDone => 132,
            Message::RouterSolicit => 133,
            Message::RouterAdvert => 134,
            Message::NeighborSolicit => 135,
            Message::NeighborAdvert => 136,
            Message::Redirect => 137,
            Message::MldReportV2 => 143,
            Message::Unknown(other) => other,
        }
    }
}

impl Message {
    /// True for error messages (types 0-127, RFC 4443 §2.1). An unknown error must
    /// still reach the upper layer of the packet it quotes (RFC 4443 §2.4 (d)); an
    /// unknown informational message is discarded (§2.4 (b)).
    pub fn is_error(&self) -> bool {
        u8::from(*self) < 128
    }
}

/// Generates a code enum with its `From` conversions both ways.
macro_rules! codes {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $value:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
            /// Any other code.
            Unknown(u8),
        }

        impl From<u8> for $name {
            fn from(value: u8) -> $name {
                match value {
                    $($value => $name::$variant,)*
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(value: $name) -> u8 {
                match value {
                    $($name::$variant => $value,)*
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

codes! {
    /// Codes of Destination Unreachable (RFC 4443 §3.1).
    DstUnreachable {
        /// 0: no route to destination.
        NoRoute = 0,
        /// 1: communication with destination administratively prohibited.
        AdminProhibited = 1,
        /// 2: beyond scope of source address.
        BeyondScope = 2,
        /// 3: address unreachable.
        AddrUnreachable = 3,
        /// 4: port unreachable.
        PortUnreachable = 4,
        /// 5: source address failed ingress/egress policy.
        FailedPolicy = 5,
        /// 6: reject route to destination.
        RejectRoute = 6,
    }
}

codes! {
    /// Codes of Time Exceeded (RFC 4443 §3.3).
    TimeExceeded {
        /// 0: hop limit exceeded in transit.
        HopLimitExceeded = 0,
        /// 1: fragment reassembly time exceeded.
        FragReassemblyExceeded = 1,
    }
}

codes! {
    /// Codes of Parameter Problem (RFC 4443 §3.4, RFC 7112 §7).
    ParamProblem {
        /// 0: erroneous header field encountered.
        ErroneousHeaderField = 0,
        /// 1: unrecognized Next Header type encountered.
        UnrecognizedNextHeader = 1,
        /// 2: unrecognized IPv6 option encountered.
        UnrecognizedOption = 2,
        /// 3: IPv6 first fragment has incomplete IPv6 header chain.
        IncompleteHeaderChain = 3,
    }
}

/// How many bytes of `packet` (the invoking packet, from its IPv6 header) an error
/// message quotes: all of it, up to [`MAX_INVOKING_LEN`] (RFC 4443 §2.4 (c)).
/// Applying it twice changes nothing.
pub const fn invoking_len(packet: &[u8]) -> usize {
    if packet.len() < MAX_INVOKING_LEN {
        packet.len()
    } else {
        MAX_INVOKING_LEN
    }
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    /// Packet Too Big's MTU, Parameter Problem's pointer.
    pub const WORD: Range<usize> = 4..8;
}

/// A read/write view of an ICMPv6 message. The message is the whole buffer (the
/// IPv6 payload after any extension headers).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    pub(crate) buffer: T,
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

    /// Checks that the 8-byte header fits. Longer fixed parts (neighbour discovery,
    /// MLD) are checked by their Reprs' `parse`.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < HEADER_LEN {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have,
            });
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

    fn word(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::WORD];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Message type.
    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Message code (its meaning depends on the type).
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Echo identifier.
    pub fn echo_ident(&self) -> u16 {
        self.u16_at(field::ECHO_IDENT)
    }

    /// Echo sequence number.
    pub fn echo_seq_no(&self) -> u16 {
        self.u16_at(field::ECHO_SEQNO)
    }

    /// Packet Too Big: the MTU of the next-hop link.
    pub fn mtu(&self) -> u32 {
        self.word()
    }

    /// Parameter Problem: offset of the error in the invoking packet.
    pub fn pointer(&self) -> u32 {
        self.word()
    }

    /// True when the checksum over the pseudo-header from `src` to `dst` and the
    /// whole message is correct.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let bytes = self.buffer.as_ref();
        let pseudo = checksum::pseudo_header_v6(src, dst, protocol::ICMPV6, bytes.len() as u32);
        checksum::combine(&[pseudo, checksum::data(bytes)]) == 0xffff
    }

    /// The bytes after the 8-byte header: echo data, the quoted packet, or the rest
    /// of a neighbour discovery or MLD message.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the type.
    pub fn set_msg_type(&mut self, value: Message) {
        self.buffer.as_mut()[field::TYPE] = value.into();
    }

    /// Sets the code.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, value: u16) {
        self.set_u16_at(field::ECHO_IDENT, value);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, value: u16) {
        self.set_u16_at(field::ECHO_SEQNO, value);
    }

    /// Sets bytes 4..8: Packet Too Big's MTU, Parameter Problem's pointer, or zero
    /// (the unused word of Destination Unreachable and Time Exceeded).
    pub fn set_word(&mut self, value: u32) {
        self.buffer.as_mut()[field::WORD].copy_from_slice(&value.to_be_bytes());
    }

    /// Computes and stores the checksum over the pseudo-header and the whole buffer.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let bytes = self.buffer.as_ref();
        let pseudo = checksum::pseudo_header_v6(src, dst, protocol::ICMPV6, bytes.len() as u32);
        let sum = checksum::combine(&[pseudo, checksum::data(bytes)]);
        self.set_checksum(checksum::finish(sum));
    }

    /// The bytes after the header, mutable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}
