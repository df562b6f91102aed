//! Internet Group Management Protocol: IGMPv2 (RFC 2236) queries, reports and leaves,
//! IGMPv1 reports (RFC 1112, heard only), and IGMPv3 (RFC 3376) queries and
//! membership reports with their group records.
//!
//! A host announces the IPv4 multicast groups it has joined with reports and answers
//! the queries of the link's router. The messages travel in IPv4 datagrams of
//! protocol 2 with TTL 1 and, when a host sends them, an IPv4 Router Alert option
//! ([`ROUTER_ALERT`], RFC 2113). The checksum covers the whole message (no
//! pseudo-header); [`Repr::parse`] verifies it and [`Repr::emit`] fills it.
//!
//! ```
//! use core::net::Ipv4Addr;
//! use impnet_wire::igmp::{self, Packet, Repr};
//!
//! let group = Ipv4Addr::new(239, 1, 2, 3);
//! let report = Repr::ReportV2 { group };
//! let mut bytes = vec![0u8; report.buffer_len()];
//! report.emit(&mut Packet::new_unchecked(&mut bytes[..]));
//! assert_eq!(bytes, [0x16, 0, 0xf8, 0xfa, 239, 1, 2, 3]);
//! let packet = Packet::new_checked(&bytes[..])?;
//! assert_eq!(Repr::parse(&packet)?, report);
//! // One flipped bit: the checksum no longer matches.
//! bytes[7] ^= 1;
//! let packet = Packet::new_checked(&bytes[..])?;
//! assert_eq!(Repr::parse(&packet), Err(impnet_wire::Error::BadChecksum));
//! # Ok::<(), impnet_wire::Error>(())
//! ```

use core::fmt;
use core::net::Ipv4Addr;

use crate::checksum;
use crate::group_record::{self, GroupAddress};
use crate::{Error, Result};

pub use crate::group_record::RecordType;

/// A list of IPv4 addresses: 4-byte addresses in a parsed message, or a slice to send
/// (see [`group_record::Addresses`]).
pub type Addresses<'a> = group_record::Addresses<'a, Ipv4Addr>;
/// One group record of an IGMPv3 report (RFC 3376 §4.2.4).
pub type GroupRecord<'a> = group_record::GroupRecord<'a, Ipv4Addr>;
/// The records of an IGMPv3 report.
pub type Records<'a> = group_record::Records<'a, Ipv4Addr>;
/// The IGMPv3 part of a query (RFC 3376 §4.1).
pub type QueryV3<'a> = group_record::SourceQuery<'a, Ipv4Addr>;

/// Length of an IGMPv1/v2 message (and of an IGMPv3 query without sources, less 4).
pub const V2_LEN: usize = 8;
/// Length of an IGMPv3 query without sources.
pub const V3_QUERY_LEN: usize = 12;
/// Length of an IGMPv3 report header before its records.
pub const V3_REPORT_HEADER_LEN: usize = 8;
/// Length of a group record without sources or auxiliary data.
pub const RECORD_HEADER_LEN: usize = group_record::record_header_len::<Ipv4Addr>();
/// The IPv4 Router Alert option (RFC 2113 §2.1: type 148, length 4, value 0 "Router
/// shall examine packet"), the 4 option bytes every IGMP message a host sends carries
/// (RFC 2236 §2, RFC 3376 §4).
pub const ROUTER_ALERT: [u8; 4] = [0x94, 0x04, 0x00, 0x00];
/// 224.0.0.1, all systems on this subnet: every host is in it (RFC 1112 §4) and
/// General Queries go to it.
pub const ALL_SYSTEMS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 1);
/// 224.0.0.2, all routers: where IGMPv2 Leave Group messages go (RFC 2236 §3).
pub const ALL_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 2);
/// 224.0.0.22, all IGMPv3-capable routers: where IGMPv3 reports go (RFC 3376 §4.2.14).
pub const ALL_V3_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 22);

/// The Ethernet address of an IPv4 multicast group (RFC 1112 §6.4): 01:00:5e and the
/// group's low 23 bits.
pub const fn multicast_mac(group: Ipv4Addr) -> [u8; 6] {
    let [_, b, c, d] = group.octets();
    [0x01, 0x00, 0x5e, b & 0x7f, c, d]
}

/// The message type field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Message {
    /// 0x11: Membership Query (every version; the length tells which, RFC 3376 §7.1).
    Query,
    /// 0x12: IGMPv1 Membership Report.
    ReportV1,
    /// 0x16: IGMPv2 Membership Report.
    ReportV2,
    /// 0x17: IGMPv2 Leave Group.
    Leave,
    /// 0x22: IGMPv3 Membership Report.
    ReportV3,
    /// Any other value.
    Unknown(u8),
}

impl From<u8> for Message {
    fn from(value: u8) -> Message {
        match value {
            0x11 => Message::Query,
            0x12 => Message::ReportV1,
            0x16 => Message::ReportV2,
            0x17 => Message::Leave,
            0x22 => Message::ReportV3,
            other => Message::Unknown(other),
        }
    }
}

impl From<Message> for u8 {
    fn from(value: Message) -> u8 {
        match value {
            Message::Query => 0x11,
            Message::ReportV1 => 0x12,
            Message::ReportV2 => 0x16,
            Message::Leave => 0x17,
            Message::ReportV3 => 0x22,
            Message::Unknown(other) => other,
        }
    }
}

mod field {
    use core::ops::Range;

    pub const TYPE: usize = 0;
    pub const MAX_RESP_CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const GROUP: Range<usize> = 4..8;
    pub const REPORT_RECORDS: Range<usize> = 6..8;
}

/// A view over the bytes of an IGMP message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap `buffer` without checks: accessors may panic on a buffer under 8 bytes.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap `buffer` after [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// The buffer holds the 8 bytes every IGMP message has. The variable parts (query
    /// sources, report records) are checked by [`Repr::parse`].
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < V2_LEN {
            return Err(Error::Truncated { need: V2_LEN, have });
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Max Resp Code (a query's; zero in reports).
    pub fn max_resp_code(&self) -> u8 {
        self.buffer.as_ref()[field::MAX_RESP_CODE]
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::CHECKSUM];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Group Address (queries, v1/v2 reports and leaves; not an IGMPv3 report's).
    pub fn group_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::GROUP];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// True when the checksum over the whole buffer is right.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == !0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Compute and store the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        let bytes = self.buffer.as_mut();
        bytes[field::CHECKSUM].fill(0);
        let sum = checksum::finish(checksum::data(bytes));
        bytes[field::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

fn addr_at(bytes: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::read(&bytes[at..])
}

/// An IGMP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    /// Membership Query: general (`group` 0.0.0.0) or for one group. An IGMPv1 query
    /// is an 8-byte one with a Max Resp Code of 0 (RFC 3376 §7.1).
    Query {
        /// Max Resp Code: tenths of a second (IGMPv2), or a code (IGMPv3, §4.1.1).
        max_resp_code: u8,
        /// The group asked about, or 0.0.0.0 for all.
        group: Ipv4Addr,
        /// The IGMPv3 fields, for a query of 12 bytes or more.
        v3: Option<QueryV3<'a>>,
    },
    /// IGMPv1 Membership Report (RFC 1112).
    ReportV1 {
        /// The group.
        group: Ipv4Addr,
    },
    /// IGMPv2 Membership Report: a member of `group`.
    ReportV2 {
        /// The group.
        group: Ipv4Addr,
    },
    /// IGMPv2 Leave Group: no longer a member of `group`.
    Leave {
        /// The group.
        group: Ipv4Addr,
    },
    /// IGMPv3 Membership Report.
    ReportV3 {
        /// The group records.
        records: Records<'a>,
    },
}

impl<'a> Repr<'a> {
    /// Reads an IGMP message, checksum verified. The view's buffer is the whole IGMP
    /// message (the IPv4 payload). `Truncated` for a source list or record past the
    /// end; a query of 9 to 11 bytes is `BadLength` (RFC 3376 §7.1: no version;
    /// ignore it); an unknown type is `Unsupported`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let bytes: &'a [u8] = packet.buffer.as_ref();
        let group = packet.group_addr();
        match packet.msg_type() {
            Message::Query => Self::parse_query(bytes),
            Message::ReportV1 => Ok(Repr::ReportV1 { group }),
            Message::ReportV2 => Ok(Repr::ReportV2 { group }),
            Message::Leave => Ok(Repr::Leave { group }),
            Message::ReportV3 => Self::parse_report_v3(bytes),
            Message::Unknown(_) => Err(Error::Unsupported("unknown IGMP message type")),
        }
    }

    fn parse_query(bytes: &'a [u8]) -> Result<Repr<'a>> {
        let max_resp_code = bytes[field::MAX_RESP_CODE];
        let group = addr_at(bytes, field::GROUP.start);
        if bytes.len() == V2_LEN {
            return Ok(Repr::Query {
                max_resp_code,
                group,
                v3: None,
            });
        }
        if bytes.len() < V3_QUERY_LEN {
            return Err(Error::BadLength(bytes.len()));
        }
        Ok(Repr::Query {
            max_resp_code,
            group,
            v3: Some(QueryV3::parse(bytes, field::GROUP.end)?),
        })
    }

    fn parse_report_v3(bytes: &'a [u8]) -> Result<Repr<'a>> {
        let count = u16::from_be_bytes([bytes[6], bytes[7]]);
        let records = Records::parse(&bytes[V3_REPORT_HEADER_LEN..], count)?;
        Ok(Repr::ReportV3 { records })
    }

    /// The message type of this message.
    pub const fn message(&self) -> Message {
        match self {
            Repr::Query { .. } => Message::Query,
            Repr::ReportV1 { .. } => Message::ReportV1,
            Repr::ReportV2 { .. } => Message::ReportV2,
            Repr::Leave { .. } => Message::Leave,
            Repr::ReportV3 { .. } => Message::ReportV3,
        }
    }

    /// The whole message's length.
    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::Query { v3: None, .. }
            | Repr::ReportV1 { .. }
            | Repr::ReportV2 { .. }
            | Repr::Leave { .. } => V2_LEN,
            Repr::Query { v3: Some(v3), .. } => field::GROUP.end + v3.buffer_len(),
            Repr::ReportV3 { records } => V3_REPORT_HEADER_LEN + records.buffer_len(),
        }
    }

    /// Writes the message, checksum filled, into the first [`Repr::buffer_len`] bytes
    /// of `packet`.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        let len = self.buffer_len();
        let bytes = &mut packet.buffer.as_mut()[..len];
        bytes[..len.min(V3_QUERY_LEN)].fill(0);
        bytes[field::TYPE] = self.message().into();
        match *self {
            Repr::Query {
                max_resp_code,
                group,
                v3,
            } => {
                bytes[field::MAX_RESP_CODE] = max_resp_code;
                bytes[field::GROUP].copy_from_slice(&group.octets());
                if let Some(v3) = v3 {
                    v3.emit(&mut bytes[field::GROUP.end..]);
                }
            }
            Repr::ReportV1 { group } | Repr::ReportV2 { group } | Repr::Leave { group } => {
                bytes[field::GROUP].copy_from_slice(&group.octets());
            }
            Repr::ReportV3 { records } => {
                let count = records.len() as u16;
                bytes[field::REPORT_RECORDS].copy_from_slice(&count.to_be_bytes());
                records.emit(&mut bytes[V3_REPORT_HEADER_LEN..]);
            }
        }
        Packet::new_unchecked(bytes).fill_checksum();
    }
}

/// The Max Resp Time a query's code stands for, in tenths of a second: the code
/// itself below 128, else RFC 3376 §4.1.1's floating point form (an IGMPv2 query's
/// code is always the plain value).
pub const fn max_resp_tenths(code: u8, v3: bool) -> u32 {
    if !v3 || code < 128 {
        return code as u32;
    }
    let mant = (code & 0x0f) as u32;
    let exp = ((code >> 4) & 0x07) as u32;
    (mant | 0x10) << (exp + 3)
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repr::Query { group, v3, .. } => {
                let version = if v3.is_some() { 3 } else { 2 };
                write!(f, "IGMPv{version} query for {group}")
            }
            Repr::ReportV1 { group } => write!(f, "IGMPv1 report for {group}"),
            Repr::ReportV2 { group } => write!(f, "IGMPv2 report for {group}"),
            Repr::Leave { group } => write!(f, "IGMPv2 leave for {group}"),
            Repr::ReportV3 { records } => write!(f, "IGMPv3 report, {} records", records.len()),
        }
    }
}

#[cfg(test)]
mod tests;
