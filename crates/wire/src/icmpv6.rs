//! ICMPv6 (RFC 4443): the error messages (Destination Unreachable, Packet Too Big,
//! Time Exceeded, Parameter Problem), echo, and the neighbour discovery
//! ([`crate::ndp`], RFC 4861) and multicast listener ([`crate::mld`], RFC 2710 and
//! RFC 3810) messages, which [`Repr`] dispatches to their own Reprs.
//!
//! The checksum covers the IPv6 pseudo-header (RFC 4443 §2.3, RFC 8200 §8.1, next
//! header 58): [`Packet::verify_checksum`] and [`Repr::parse`] take the source and
//! destination addresses, [`Repr::emit`] fills it. An error message quotes as much of
//! the invoking packet as fits in the minimum MTU ([`invoking_len`], RFC 4443 §2.4 (c)).

use core::fmt;
use core::net::Ipv6Addr;

use crate::{Error, Result, mld, ndp};

pub(crate) mod packet;

pub use packet::*;

/// An ICMPv6 message imp understands.
///
/// `invoking` is the packet that caused an error, from its IPv6 header. `emit` takes
/// the whole packet and quotes [`invoking_len`] of it; `parse` keeps as much of what
/// the sender quoted, so `parse(emit(r))` equals `r` with `invoking` cut to that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    /// Destination Unreachable.
    DstUnreachable {
        /// Why.
        reason: DstUnreachable,
        /// The invoking packet.
        invoking: &'a [u8],
    },
    /// Packet Too Big (RFC 8201 path MTU discovery).
    PacketTooBig {
        /// The MTU of the next-hop link.
        mtu: u32,
        /// The invoking packet.
        invoking: &'a [u8],
    },
    /// Time Exceeded.
    TimeExceeded {
        /// Hop limit or reassembly.
        reason: TimeExceeded,
        /// The invoking packet.
        invoking: &'a [u8],
    },
    /// Parameter Problem.
    ParamProblem {
        /// What kind of problem.
        reason: ParamProblem,
        /// Offset in the invoking packet where the problem is.
        pointer: u32,
        /// The invoking packet.
        invoking: &'a [u8],
    },
    /// Echo Request.
    EchoRequest {
        /// Identifier, to match replies to requests.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data the reply must carry back.
        data: &'a [u8],
    },
    /// Echo Reply.
    EchoReply {
        /// Identifier copied from the request.
        ident: u16,
        /// Sequence number copied from the request.
        seq_no: u16,
        /// Data copied from the request.
        data: &'a [u8],
    },
    /// A neighbour discovery message (types 133-137).
    Ndp(ndp::Repr<'a>),
    /// A multicast listener message (types 130-132, 143).
    Mld(mld::Repr<'a>),
}

impl<'a> Repr<'a> {
    /// Reads a message sent from `src` to `dst`. The checksum is always verified
    /// (`BadChecksum`); echo with a non-zero code is `BadField("code")`; unknown types
    /// are `Unsupported` (look at [`Packet::msg_type`] to tell an unknown error, which
    /// RFC 4443 §2.4 (d) passes up, from an unknown informational message).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&'a T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let data: &'a [u8] = &packet.buffer.as_ref()[HEADER_LEN..];
        let invoking = &data[..invoking_len(data)];
        let code = packet.msg_code();
        let echo = |request| {
            if code != 0 {
                return Err(Error::BadField("code"));
            }
            let (ident, seq_no) = (packet.echo_ident(), packet.echo_seq_no());
            Ok(match request {
                true => Repr::EchoRequest {
                    ident,
                    seq_no,
                    data,
                },
                false => Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                },
            })
        };
        match packet.msg_type() {
            Message::DstUnreachable => Ok(Repr::DstUnreachable {
                reason: DstUnreachable::from(code),
                invoking,
            }),
            Message::PacketTooBig => Ok(Repr::PacketTooBig {
                mtu: packet.mtu(),
                invoking,
            }),
            Message::TimeExceeded => Ok(Repr::TimeExceeded {
                reason: TimeExceeded::from(code),
                invoking,
            }),
            Message::ParamProblem => Ok(Repr::ParamProblem {
                reason: ParamProblem::from(code),
                pointer: packet.pointer(),
                invoking,
            }),
            Message::EchoRequest => echo(true),
            Message::EchoReply => echo(false),
            Message::MldQuery | Message::MldReport | Message::MldDone | Message::MldReportV2 => {
                mld::Repr::parse(packet).map(Repr::Mld)
            }
            Message::RouterSolicit
            | Message::RouterAdvert
            | Message::NeighborSolicit
            | Message::NeighborAdvert
            | Message::Redirect => ndp::Repr::parse(packet).map(Repr::Ndp),
            Message::Unknown(_) => Err(Error::Unsupported("ICMPv6 message type")),
        }
    }

    /// The bytes an error or echo message carries after its 8-byte header.
    fn body(&self) -> &'a [u8] {
        match *self {
            Repr::EchoRequest { data, .. } | Repr::EchoReply { data, .. } => data,
            Repr::DstUnreachable { invoking, .. }
            | Repr::PacketTooBig { invoking, .. }
            | Repr::TimeExceeded { invoking, .. }
            | Repr::ParamProblem { invoking, .. } => &invoking[..invoking_len(invoking)],
            Repr::Ndp(_) | Repr::Mld(_) => &[],
        }
    }

    /// The whole message's length: what `emit` writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::Ndp(repr) => repr.buffer_len(),
            Repr::Mld(repr) => repr.buffer_len(),
            _ => HEADER_LEN + self.body().len(),
        }
    }

    /// The type, code and bytes 4..8 of an error or echo message.
    fn header(&self) -> (Message, u8, u32) {
        let echo = |ident: u16, seq_no: u16| (u32::from(ident) << 16) | u32::from(seq_no);
        match *self {
            Repr::DstUnreachable { reason, .. } => (Message::DstUnreachable, reason.into(), 0),
            Repr::PacketTooBig { mtu, .. } => (Message::PacketTooBig, 0, mtu),
            Repr::TimeExceeded { reason, .. } => (Message::TimeExceeded, reason.into(), 0),
            Repr::ParamProblem {
                reason, pointer, ..
            } => (Message::ParamProblem, reason.into(), pointer),
            Repr::EchoRequest { ident, seq_no, .. } => {
                (Message::EchoRequest, 0, echo(ident, seq_no))
            }
            Repr::EchoReply { ident, seq_no, .. } => (Message::EchoReply, 0, echo(ident, seq_no)),
            Repr::Ndp(_) | Repr::Mld(_) => (Message::Unknown(0), 0, 0),
        }
    }

    /// Writes the message into the first [`Repr::buffer_len`] bytes of `packet` and
    /// fills the checksum for `src` to `dst` over those bytes: hand exactly that much
    /// to the IP layer.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        packet: &mut Packet<&mut T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) {
        let total = self.buffer_len();
        let mut message = Packet::new_unchecked(&mut packet.buffer.as_mut()[..total]);
        match self {
            Repr::Ndp(repr) => repr.emit(&mut message),
            Repr::Mld(repr) => repr.emit(&mut message),
            _ => {
                let (kind, code, word) = self.header();
                message.set_msg_type(kind);
                message.set_msg_code(code);
                message.set_word(word);
                message.data_mut().copy_from_slice(self.body());
            }
        }
        message.fill_checksum(src, dst);
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repr::DstUnreachable { reason, .. } => write!(f, "ICMPv6 unreachable {reason:?}"),
            Repr::PacketTooBig { mtu, .. } => write!(f, "ICMPv6 packet too big mtu {mtu}"),
            Repr::TimeExceeded { reason, .. } => write!(f, "ICMPv6 time exceeded {reason:?}"),
            Repr::ParamProblem {
                reason, pointer, ..
            } => write!(f, "ICMPv6 parameter problem {reason:?} at {pointer}"),
            Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } => write!(
                f,
                "ICMPv6 echo request id {ident} seq {seq_no} len {}",
                data.len()
            ),
            Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => write!(
                f,
                "ICMPv6 echo reply id {ident} seq {seq_no} len {}",
                data.len()
            ),
            Repr::Ndp(repr) => write!(f, "ICMPv6 {repr}"),
            Repr::Mld(repr) => write!(f, "ICMPv6 {repr}"),
        }
    }
}

#[cfg(test)]
mod tests;
