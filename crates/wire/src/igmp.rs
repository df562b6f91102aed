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
use crate::{Error, Result};

/// Length of an IGMPv1/v2 message (and of an IGMPv3 query without sources, less 4).
pub const V2_LEN: usize = 8;
/// Length of an IGMPv3 query without sources.
pub const V3_QUERY_LEN: usize = 12;
/// Length of an IGMPv3 report header before its records.
pub const V3_REPORT_HEADER_LEN: usize = 8;
/// Length of a group record without sources or auxiliary data.
pub const RECORD_HEADER_LEN: usize = 8;
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
    Ipv4Addr::new(bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3])
}

/// A list of IPv4 addresses: 4-byte addresses in a parsed message, or a slice to
/// send. Equal when they hold the same addresses in order, whatever their form.
#[derive(Debug, Clone, Copy)]
pub enum Addresses<'a> {
    /// Addresses back to back in a parsed message (a multiple of 4 bytes).
    Bytes(&'a [u8]),
    /// Addresses to send.
    List(&'a [Ipv4Addr]),
}

impl<'a> Addresses<'a> {
    /// No addresses.
    pub const EMPTY: Addresses<'static> = Addresses::List(&[]);

    /// The addresses in order.
    pub fn iter(&self) -> impl Iterator<Item = Ipv4Addr> + 'a {
        let (bytes, list): (&'a [u8], &'a [Ipv4Addr]) = match *self {
            Addresses::Bytes(bytes) => (bytes, &[]),
            Addresses::List(list) => (&[], list),
        };
        bytes
            .chunks_exact(4)
            .map(|b| addr_at(b, 0))
            .chain(list.iter().copied())
    }

    /// How many addresses.
    pub fn len(&self) -> usize {
        match self {
            Addresses::Bytes(bytes) => bytes.len() / 4,
            Addresses::List(list) => list.len(),
        }
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn emit(&self, out: &mut [u8]) {
        for (chunk, addr) in out.chunks_exact_mut(4).zip(self.iter()) {
            chunk.copy_from_slice(&addr.octets());
        }
    }
}

impl PartialEq for Addresses<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Addresses<'_> {}

/// Group record types (RFC 3376 §4.2.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    /// 1: MODE_IS_INCLUDE.
    ModeIsInclude,
    /// 2: MODE_IS_EXCLUDE (a current-state record of a joined group, no sources).
    ModeIsExclude,
    /// 3: CHANGE_TO_INCLUDE_MODE (leaving a group: to include of nothing).
    ChangeToInclude,
    /// 4: CHANGE_TO_EXCLUDE_MODE (joining a group: to exclude of nothing).
    ChangeToExclude,
    /// 5: ALLOW_NEW_SOURCES.
    AllowNewSources,
    /// 6: BLOCK_OLD_SOURCES.
    BlockOldSources,
    /// Any other value.
    Unknown(u8),
}

impl From<u8> for RecordType {
    fn from(value: u8) -> RecordType {
        match value {
            1 => RecordType::ModeIsInclude,
            2 => RecordType::ModeIsExclude,
            3 => RecordType::ChangeToInclude,
            4 => RecordType::ChangeToExclude,
            5 => RecordType::AllowNewSources,
            6 => RecordType::BlockOldSources,
            other => RecordType::Unknown(other),
        }
    }
}

impl From<RecordType> for u8 {
    fn from(value: RecordType) -> u8 {
        match value {
            RecordType::ModeIsInclude => 1,
            RecordType::ModeIsExclude => 2,
            RecordType::ChangeToInclude => 3,
            RecordType::ChangeToExclude => 4,
            RecordType::AllowNewSources => 5,
            RecordType::BlockOldSources => 6,
            RecordType::Unknown(other) => other,
        }
    }
}

/// One group record of an IGMPv3 report. Auxiliary data is not represented (RFC 3376
/// §4.2.10: receivers skip it; imp sends none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRecord<'a> {
    /// What the record says about the group.
    pub record_type: RecordType,
    /// The multicast group.
    pub group: Ipv4Addr,
    /// The sources the record lists.
    pub sources: Addresses<'a>,
}

impl GroupRecord<'_> {
    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        RECORD_HEADER_LEN + 4 * self.sources.len()
    }

    fn emit(&self, out: &mut [u8]) {
        out[0] = self.record_type.into();
        out[1] = 0;
        out[2..4].copy_from_slice(&(self.sources.len() as u16).to_be_bytes());
        out[4..8].copy_from_slice(&self.group.octets());
        self.sources
            .emit(&mut out[RECORD_HEADER_LEN..self.buffer_len()]);
    }
}

/// Reads the record at the front of `bytes`: the record and its whole length
/// (auxiliary data included), or why it does not fit.
fn record_at(bytes: &[u8]) -> Result<(GroupRecord<'_>, usize)> {
    if bytes.len() < RECORD_HEADER_LEN {
        return Err(Error::Truncated {
            need: RECORD_HEADER_LEN,
            have: bytes.len(),
        });
    }
    let sources = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
    let aux = usize::from(bytes[1]) * 4;
    let len = RECORD_HEADER_LEN + 4 * sources + aux;
    if bytes.len() < len {
        return Err(Error::Truncated {
            need: len,
            have: bytes.len(),
        });
    }
    let record = GroupRecord {
        record_type: RecordType::from(bytes[0]),
        group: addr_at(bytes, 4),
        sources: Addresses::Bytes(&bytes[RECORD_HEADER_LEN..RECORD_HEADER_LEN + 4 * sources]),
    };
    Ok((record, len))
}

/// The records of an IGMPv3 report: the checked bytes of a parsed message or a slice
/// to send. Equal when they hold equal records in order.
#[derive(Debug, Clone, Copy)]
pub enum Records<'a> {
    /// Records back to back in a parsed message (checked to hold this many).
    Bytes {
        /// The bytes after the report header.
        bytes: &'a [u8],
        /// Number of records.
        count: u16,
    },
    /// Records to send.
    List(&'a [GroupRecord<'a>]),
}

impl<'a> Records<'a> {
    /// No records.
    pub const EMPTY: Records<'static> = Records::List(&[]);

    /// The records in order.
    pub fn iter(&self) -> impl Iterator<Item = GroupRecord<'a>> + 'a {
        let (mut bytes, count, list): (&'a [u8], u16, &'a [GroupRecord<'a>]) = match *self {
            Records::Bytes { bytes, count } => (bytes, count, &[]),
            Records::List(list) => (&[], 0, list),
        };
        let parsed = (0..count).map_while(move |_| {
            let (record, len) = record_at(bytes).ok()?;
            bytes = &bytes[len..];
            Some(record)
        });
        parsed.chain(list.iter().copied())
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq for Records<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Records<'_> {}

/// The IGMPv3 part of a query (RFC 3376 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryV3<'a> {
    /// S: routers suppress their timer updates.
    pub suppress: bool,
    /// Querier's Robustness Variable, 3 bits.
    pub robustness: u8,
    /// Querier's Query Interval Code.
    pub interval_code: u8,
    /// The sources of a group-and-source-specific query.
    pub sources: Addresses<'a>,
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
        let sources = usize::from(u16::from_be_bytes([bytes[10], bytes[11]]));
        let end = V3_QUERY_LEN + 4 * sources;
        if bytes.len() < end {
            return Err(Error::Truncated {
                need: end,
                have: bytes.len(),
            });
        }
        Ok(Repr::Query {
            max_resp_code,
            group,
            v3: Some(QueryV3 {
                suppress: bytes[8] & 0x08 != 0,
                robustness: bytes[8] & 0x07,
                interval_code: bytes[9],
                sources: Addresses::Bytes(&bytes[V3_QUERY_LEN..end]),
            }),
        })
    }

    fn parse_report_v3(bytes: &'a [u8]) -> Result<Repr<'a>> {
        let count = u16::from_be_bytes([bytes[6], bytes[7]]);
        let records = &bytes[V3_REPORT_HEADER_LEN..];
        let mut rest = records;
        for _ in 0..count {
            let (_, len) = record_at(rest)?;
            rest = &rest[len..];
        }
        Ok(Repr::ReportV3 {
            records: Records::Bytes {
                bytes: records,
                count,
            },
        })
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
            Repr::Query { v3: Some(v3), .. } => V3_QUERY_LEN + 4 * v3.sources.len(),
            Repr::ReportV3 { records } => {
                V3_REPORT_HEADER_LEN + records.iter().map(|r| r.buffer_len()).sum::<usize>()
            }
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
                    bytes[8] = if v3.suppress { 0x08 } else { 0 } | (v3.robustness & 0x07);
                    bytes[9] = v3.interval_code;
                    bytes[10..12].copy_from_slice(&(v3.sources.len() as u16).to_be_bytes());
                    v3.sources.emit(&mut bytes[V3_QUERY_LEN..]);
                }
            }
            Repr::ReportV1 { group } | Repr::ReportV2 { group } | Repr::Leave { group } => {
                bytes[field::GROUP].copy_from_slice(&group.octets());
            }
            Repr::ReportV3 { records } => {
                let count = records.len() as u16;
                bytes[field::REPORT_RECORDS].copy_from_slice(&count.to_be_bytes());
                let mut out = &mut bytes[V3_REPORT_HEADER_LEN..];
                for record in records.iter() {
                    let (this, rest) = out.split_at_mut(record.buffer_len());
                    record.emit(this);
                    out = rest;
                }
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
