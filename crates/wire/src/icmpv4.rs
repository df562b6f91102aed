//! ICMP for IPv4 (RFC 792, RFC 1191 for the next-hop MTU, RFC 1812 §4.3.2.3 for what
//! an error quotes).
//!
//! The [`Repr`] covers echo and the three error messages a host and router need; other
//! message types are viewable through [`Packet`] but parse as `Unsupported`.

use core::fmt;

use crate::{Error, Result, checksum};

/// Length of the ICMP header: type, code, checksum and the 4-byte rest-of-header.
pub const HEADER_LEN: usize = 8;

/// The type field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// Echo reply, 0.
    EchoReply,
    /// Destination unreachable, 3.
    DstUnreachable,
    /// Redirect, 5.
    Redirect,
    /// Echo request, 8.
    EchoRequest,
    /// Router advertisement, 9.
    RouterAdvert,
    /// Router solicitation, 10.
    RouterSolicit,
    /// Time exceeded, 11.
    TimeExceeded,
    /// Parameter problem, 12.
    ParamProblem,
    /// Timestamp, 13.
    Timestamp,
    /// Timestamp reply, 14.
    TimestampReply,
    /// Any other type.
    Unknown(u8),
}

impl From<u8> for Message {
    fn from(value: u8) -> Message {
        match value {
            0 => Message::EchoReply,
            3 => Message::DstUnreachable,
            5 => Message::Redirect,
            8 => Message::EchoRequest,
            9 => Message::RouterAdvert,
            10 => Message::RouterSolicit,
            11 => Message::TimeExceeded,
            12 => Message::ParamProblem,
            13 => Message::Timestamp,
            14 => Message::TimestampReply,
            other => Message::Unknown(other),
        }
    }
}

impl From<Message> for u8 {
    fn from(value: Message) -> u8 {
        match value {
            Message::EchoReply => 0,
            Message::DstUnreachable => 3,
            Message::Redirect => 5,
            Message::EchoRequest => 8,
            Message::RouterAdvert => 9,
            Message::RouterSolicit => 10,
            Message::TimeExceeded => 11,
            Message::ParamProblem => 12,
            Message::Timestamp => 13,
            Message::TimestampReply => 14,
            Message::Unknown(other) => other,
        }
    }
}

/// Codes of Destination Unreachable (RFC 792, RFC 1122 §3.2.2.1, RFC 1812 §5.2.7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DstUnreachable {
    /// 0: network unreachable.
    NetUnreachable,
    /// 1: host unreachable.
    HostUnreachable,
    /// 2: protocol unreachable.
    ProtoUnreachable,
    /// 3: port unreachable.
    PortUnreachable,
    /// 4: fragmentation needed and DF set (carries the next-hop MTU, RFC 1191).
    FragRequired,
    /// 5: source route failed.
    SrcRouteFailed,
    /// 6: destination network unknown.
    DstNetUnknown,
    /// 7: destination host unknown.
    DstHostUnknown,
    /// 8: source host isolated.
    SrcHostIsolated,
    /// 9: network administratively prohibited.
    NetProhibited,
    /// 10: host administratively prohibited.
    HostProhibited,
    /// 11: network unreachable for type of service.
    NetUnreachToS,
    /// 12: host unreachable for type of service.
    HostUnreachToS,
    /// 13: communication administratively prohibited.
    CommProhibited,
    /// 14: host precedence violation.
    HostPrecedenceViolation,
    /// 15: precedence cutoff in effect.
    PrecedenceCutoff,
    /// Any other code.
    Unknown(u8),
}

impl From<u8> for DstUnreachable {
    fn from(value: u8) -> DstUnreachable {
        use DstUnreachable::*;
        match value {
            0 => NetUnreachable,
            1 => HostUnreachable,
            2 => ProtoUnreachable,
            3 => PortUnreachable,
            4 => FragRequired,
            5 => SrcRouteFailed,
            6 => DstNetUnknown,
            7 => DstHostUnknown,
            8 => SrcHostIsolated,
            9 => NetProhibited,
            10 => HostProhibited,
            11 => NetUnreachToS,
            12 => HostUnreachToS,
            13 => CommProhibited,
            14 => HostPrecedenceViolation,
            15 => PrecedenceCutoff,
            other => Unknown(other),
        }
    }
}

impl From<DstUnreachable> for u8 {
    fn from(value: DstUnreachable) -> u8 {
        use DstUnreachable::*;
        match value {
            NetUnreachable => 0,
            HostUnreachable => 1,
            ProtoUnreachable => 2,
            PortUnreachable => 3,
            FragRequired => 4,
            SrcRouteFailed => 5,
            DstNetUnknown => 6,
            DstHostUnknown => 7,
            SrcHostIsolated => 8,
            NetProhibited => 9,
            HostProhibited => 10,
            NetUnreachToS => 11,
            HostUnreachToS => 12,
            CommProhibited => 13,
            HostPrecedenceViolation => 14,
            PrecedenceCutoff => 15,
            Unknown(other) => other,
        }
    }
}

/// Codes of Time Exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeExceeded {
    /// 0: TTL reached zero in transit.
    TtlExpired,
    /// 1: fragment reassembly time exceeded.
    FragExpired,
    /// Any other code.
    Unknown(u8),
}

impl From<u8> for TimeExceeded {
    fn from(value: u8) -> TimeExceeded {
        match value {
            0 => TimeExceeded::TtlExpired,
            1 => TimeExceeded::FragExpired,
            other => TimeExceeded::Unknown(other),
        }
    }
}

impl From<TimeExceeded> for u8 {
    fn from(value: TimeExceeded) -> u8 {
        match value {
            TimeExceeded::TtlExpired => 0,
            TimeExceeded::FragExpired => 1,
            TimeExceeded::Unknown(other) => other,
        }
    }
}

/// How many bytes of `datagram` an ICMP error quotes: its IP header plus the first 8
/// bytes of its payload (RFC 792), capped at the datagram's length. The header length
/// is read from the IHL nibble (taken as at least 20). Applying it twice changes
/// nothing.
pub fn invoking_len(datagram: &[u8]) -> usize {
    let Some(&first) = datagram.first() else {
        return 0;
    };
    let header_len = (usize::from(first & 0x0f) * 4).max(crate::ipv4::HEADER_LEN);
    datagram.len().min(header_len + 8)
}

mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    /// Echo: identifier and sequence number.
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    /// Destination Unreachable, Fragmentation Needed: next-hop MTU (4..6 unused).
    pub const UNUSED: Range<usize> = 4..6;
    pub const MTU: Range<usize> = 6..8;
    /// Parameter Problem: octet where the error was detected.
    pub const POINTER: usize = 4;
    /// Bytes 4..8, whatever they mean for the type.
    pub const REST: Range<usize> = 4..8;
}

/// A read/write view of an ICMPv4 message.
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

    /// Checks that the 8-byte header fits. The message is the whole buffer.
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

    /// Message type.
    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Message code (meaning depends on the type).
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

    /// Next-hop MTU of a Fragmentation Needed message (0 from pre-RFC 1191 routers).
    pub fn next_hop_mtu(&self) -> u16 {
        self.u16_at(field::MTU)
    }

    /// Parameter Problem pointer.
    pub fn pointer(&self) -> u8 {
        self.buffer.as_ref()[field::POINTER]
    }

    /// True when the checksum over the whole message is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }

    /// The bytes after the 8-byte header: echo data, or the quoted datagram.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// Same as [`Packet::data`].
    pub fn payload(&self) -> &[u8] {
        self.data()
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

    /// Sets the next-hop MTU (and zeroes the unused half-word before it).
    pub fn set_next_hop_mtu(&mut self, value: u16) {
        self.set_u16_at(field::UNUSED, 0);
        self.set_u16_at(field::MTU, value);
    }

    /// Sets the Parameter Problem pointer (and zeroes the unused bytes after it).
    pub fn set_pointer(&mut self, value: u8) {
        self.buffer.as_mut()[field::REST].copy_from_slice(&[value, 0, 0, 0]);
    }

    /// Zeroes bytes 4..8 (unused in Time Exceeded and most Unreachables).
    pub fn clear_rest_of_header(&mut self) {
        self.buffer.as_mut()[field::REST].fill(0);
    }

    /// Computes and stores the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(self.buffer.as_ref());
        self.set_checksum(checksum::finish(sum));
    }

    /// The bytes after the header, mutable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// Same as [`Packet::data_mut`].
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.data_mut()
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An ICMPv4 message imp understands, independent of the bytes it came from.
///
/// `invoking` is the offending datagram's IP header and the first 8 bytes of its
/// payload. `emit` takes a whole datagram there and quotes only [`invoking_len`] of it;
/// `parse` likewise keeps only that much of what a sender quoted (RFC 1812 routers
/// quote more), so `parse(emit(r))` equals `r` with `invoking` cut to that length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repr<'a> {
    /// Echo request (ping).
    EchoRequest {
        /// Identifier, to match replies to requests.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data the reply must carry back.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier copied from the request.
        ident: u16,
        /// Sequence number copied from the request.
        seq_no: u16,
        /// Data copied from the request.
        data: &'a [u8],
    },
    /// Destination unreachable.
    DstUnreachable {
        /// Why.
        reason: DstUnreachable,
        /// Next-hop MTU; carried only with `FragRequired`, 0 otherwise.
        next_hop_mtu: u16,
        /// The offending datagram (header + 8 bytes).
        invoking: &'a [u8],
    },
    /// Time exceeded.
    TimeExceeded {
        /// TTL or reassembly.
        reason: TimeExceeded,
        /// The offending datagram (header + 8 bytes).
        invoking: &'a [u8],
    },
    /// Parameter problem, code 0 (pointer indicates the error).
    ParamProblem {
        /// Octet of the offending header where the problem is.
        pointer: u8,
        /// The offending datagram (header + 8 bytes).
        invoking: &'a [u8],
    },
}

impl<'a> Repr<'a> {
    /// Reads a message. The checksum is always verified (`BadChecksum`); echo with a
    /// non-zero code is `BadField("code")`; other types, and Parameter Problem codes
    /// other than 0, are `Unsupported`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let data: &'a [u8] = &packet.buffer.as_ref()[HEADER_LEN..];
        let invoking = &data[..invoking_len(data)];
        let code = packet.msg_code();
        match packet.msg_type() {
            Message::EchoRequest | Message::EchoReply if code != 0 => Err(Error::BadField("code")),
            Message::EchoRequest => Ok(Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Message::EchoReply => Ok(Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Message::DstUnreachable => {
                let reason = DstUnreachable::from(code);
                let next_hop_mtu = match reason {
                    DstUnreachable::FragRequired => packet.next_hop_mtu(),
                    _ => 0,
                };
                Ok(Repr::DstUnreachable {
                    reason,
                    next_hop_mtu,
                    invoking,
                })
            }
            Message::TimeExceeded => Ok(Repr::TimeExceeded {
                reason: TimeExceeded::from(code),
                invoking,
            }),
            Message::ParamProblem if code == 0 => Ok(Repr::ParamProblem {
                pointer: packet.pointer(),
                invoking,
            }),
            Message::ParamProblem => Err(Error::Unsupported("ICMP parameter problem code")),
            _ => Err(Error::Unsupported("ICMP message type")),
        }
    }

    /// Always [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// The bytes after the header that `emit` writes.
    fn body(&self) -> &'a [u8] {
        match *self {
            Repr::EchoRequest { data, .. } | Repr::EchoReply { data, .. } => data,
            Repr::DstUnreachable { invoking, .. }
            | Repr::TimeExceeded { invoking, .. }
            | Repr::ParamProblem { invoking, .. } => &invoking[..invoking_len(invoking)],
        }
    }

    /// Header plus data (or plus the quoted header + 8 bytes).
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.body().len()
    }

    /// Writes the message into the first [`Repr::buffer_len`] bytes of `packet` and
    /// fills the checksum over those bytes: hand exactly that much to the IP layer.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        match *self {
            Repr::EchoRequest { ident, seq_no, .. } | Repr::EchoReply { ident, seq_no, .. } => {
                let kind = match self {
                    Repr::EchoRequest { .. } => Message::EchoRequest,
                    _ => Message::EchoReply,
                };
                packet.set_msg_type(kind);
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
            }
            Repr::DstUnreachable {
                reason,
                next_hop_mtu,
                ..
            } => {
                packet.set_msg_type(Message::DstUnreachable);
                packet.set_msg_code(reason.into());
                match reason {
                    DstUnreachable::FragRequired => packet.set_next_hop_mtu(next_hop_mtu),
                    _ => packet.clear_rest_of_header(),
                }
            }
            Repr::TimeExceeded { reason, .. } => {
                packet.set_msg_type(Message::TimeExceeded);
                packet.set_msg_code(reason.into());
                packet.clear_rest_of_header();
            }
            Repr::ParamProblem { pointer, .. } => {
                packet.set_msg_type(Message::ParamProblem);
                packet.set_msg_code(0);
                packet.set_pointer(pointer);
            }
        }
        let body = self.body();
        let total = HEADER_LEN + body.len();
        let buffer = packet.buffer.as_mut();
        buffer[HEADER_LEN..total].copy_from_slice(body);
        buffer[field::CHECKSUM].fill(0);
        let sum = checksum::finish(checksum::data(&buffer[..total]));
        packet.set_checksum(sum);
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => {
                write!(
                    f,
                    "ICMP echo request id {ident} seq {seq_no} len {}",
                    data.len()
                )
            }
            Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                write!(
                    f,
                    "ICMP echo reply id {ident} seq {seq_no} len {}",
                    data.len()
                )
            }
            Repr::DstUnreachable {
                reason,
                next_hop_mtu,
                ..
            } => {
                write!(f, "ICMP unreachable {reason:?}")?;
                if *reason == DstUnreachable::FragRequired {
                    write!(f, " mtu {next_hop_mtu}")?;
                }
                Ok(())
            }
            Repr::TimeExceeded { reason, .. } => write!(f, "ICMP time exceeded {reason:?}"),
            Repr::ParamProblem { pointer, .. } => {
                write!(f, "ICMP parameter problem at {pointer}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ping: id 0x1234, seq 1, data "abcd".
    const ECHO: [u8; 12] = [
        0x08, 0x00, 0x00, 0x00, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd',
    ];

    // Port unreachable from 10.0.0.2 quoting a UDP datagram 10.0.0.1:1234 > 10.0.0.2:53:
    // its 20-byte IP header plus the 8-byte UDP header.
    const PORT_UNREACH: [u8; 36] = [
        0x03, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // type 3 code 3, checksum, unused
        0x45, 0x00, 0x00, 0x20, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x14, 0x97, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, // quoted IPv4 header
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, // quoted UDP header
    ];

    fn with_checksum<const N: usize>(mut bytes: [u8; N]) -> [u8; N] {
        let sum = checksum::finish(checksum::data(&bytes));
        bytes[2..4].copy_from_slice(&sum.to_be_bytes());
        bytes
    }

    #[test]
    fn echo_round_trip() {
        let bytes = with_checksum(ECHO);
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        let repr = Repr::parse(&packet).unwrap();
        assert_eq!(
            repr,
            Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data: b"abcd"
            }
        );
        let mut out = [0u8; 12];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn port_unreachable_quotes_header_plus_8() {
        let bytes = with_checksum(PORT_UNREACH);
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        let repr = Repr::parse(&packet).unwrap();
        assert_eq!(
            repr,
            Repr::DstUnreachable {
                reason: DstUnreachable::PortUnreachable,
                next_hop_mtu: 0,
                invoking: &PORT_UNREACH[8..],
            }
        );
        // Emitting from the whole offending datagram (with 4 bytes of UDP payload)
        // quotes header + 8 and reproduces the bytes.
        let mut datagram = [0u8; 32];
        datagram[..28].copy_from_slice(&PORT_UNREACH[8..]);
        datagram[28..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let from_datagram = Repr::DstUnreachable {
            reason: DstUnreachable::PortUnreachable,
            next_hop_mtu: 0,
            invoking: &datagram,
        };
        assert_eq!(invoking_len(&datagram), 28);
        assert_eq!(from_datagram.buffer_len(), 36);
        let mut out = [0u8; 36];
        from_datagram.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn frag_required_carries_mtu() {
        let repr = Repr::DstUnreachable {
            reason: DstUnreachable::FragRequired,
            next_hop_mtu: 1400,
            invoking: &PORT_UNREACH[8..],
        };
        let mut out = [0u8; 36];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(&out[..2], &[3, 4]);
        assert_eq!(&out[4..8], &[0, 0, 0x05, 0x78]);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(),
            repr
        );
    }

    #[test]
    fn time_exceeded_and_param_problem() {
        for repr in [
            Repr::TimeExceeded {
                reason: TimeExceeded::TtlExpired,
                invoking: &PORT_UNREACH[8..],
            },
            Repr::ParamProblem {
                pointer: 9,
                invoking: &PORT_UNREACH[8..],
            },
        ] {
            let mut out = [0u8; 36];
            repr.emit(&mut Packet::new_unchecked(&mut out[..]));
            assert_eq!(
                Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(),
                repr
            );
        }
    }

    #[test]
    fn errors() {
        assert_eq!(
            Packet::new_checked(&ECHO[..7]).unwrap_err(),
            Error::Truncated { need: 8, have: 7 }
        );
        let bytes = with_checksum(ECHO);
        let mut bad = bytes;
        bad[11] ^= 1;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&bad[..])),
            Err(Error::BadChecksum)
        );
        let mut bad = ECHO;
        bad[1] = 1;
        let bad = with_checksum(bad);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&bad[..])),
            Err(Error::BadField("code"))
        );
        let mut redirect = ECHO;
        redirect[0] = 5;
        let redirect = with_checksum(redirect);
        assert!(matches!(
            Repr::parse(&Packet::new_unchecked(&redirect[..])),
            Err(Error::Unsupported(_))
        ));
    }

    #[test]
    fn invoking_len_edge_cases() {
        assert_eq!(invoking_len(&[]), 0);
        assert_eq!(invoking_len(&[0x45; 10]), 10);
        assert_eq!(invoking_len(&[0x46; 100]), 32);
        assert_eq!(invoking_len(&[0x40; 100]), 28);
    }
}
