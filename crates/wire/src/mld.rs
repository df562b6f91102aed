//! Multicast Listener Discovery: MLDv1 (RFC 2710) queries, reports and dones, and
//! MLDv2 (RFC 3810) queries and reports with their multicast address records.
//!
//! A host announces the groups it listens to (its solicited-node groups, which
//! neighbour discovery needs, RFC 4861 §7.2.1) with reports, and answers queries. The
//! messages are ICMPv6 messages sent with hop limit 1 from a link-local source, in a
//! packet whose hop-by-hop header carries a Router Alert
//! ([`crate::ipv6ext::OptionsRepr`]); [`crate::icmpv6::Repr::parse`] dispatches here
//! and [`crate::icmpv6::Repr::Mld`]'s `emit` fills the checksum.

use core::fmt;
use core::net::Ipv6Addr;

use crate::icmpv6::{Message, Packet};
use crate::{Error, Result};

/// Length of an MLDv1 message (and of an MLDv2 query without sources, less 4).
pub const V1_LEN: usize = 24;
/// Length of an MLDv2 query without sources.
pub const V2_QUERY_LEN: usize = 28;
/// Length of an MLDv2 report header before its records.
pub const V2_REPORT_HEADER_LEN: usize = 8;
/// Length of a multicast address record without sources or auxiliary data.
pub const RECORD_HEADER_LEN: usize = 20;

/// Multicast address record types (RFC 3810 §5.2.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    /// 1: MODE_IS_INCLUDE.
    ModeIsInclude,
    /// 2: MODE_IS_EXCLUDE.
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

fn addr_at(bytes: &[u8], at: usize) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&bytes[at..at + 16]);
    Ipv6Addr::from(octets)
}

/// A list of IPv6 addresses: 16-byte addresses in a parsed message, or a slice to
/// send. Equal when they hold the same addresses in order, whatever their form.
#[derive(Debug, Clone, Copy)]
pub enum Addresses<'a> {
    /// Addresses back to back in a parsed message (a multiple of 16 bytes).
    Bytes(&'a [u8]),
    /// Addresses to send.
    List(&'a [Ipv6Addr]),
}

impl<'a> Addresses<'a> {
    /// No addresses.
    pub const EMPTY: Addresses<'static> = Addresses::List(&[]);

    /// The addresses in order.
    pub fn iter(&self) -> impl Iterator<Item = Ipv6Addr> + 'a {
        let (bytes, list): (&'a [u8], &'a [Ipv6Addr]) = match *self {
            Addresses::Bytes(bytes) => (bytes, &[]),
            Addresses::List(list) => (&[], list),
        };
        bytes
            .chunks_exact(16)
            .map(|b| addr_at(b, 0))
            .chain(list.iter().copied())
    }

    /// How many addresses.
    pub fn len(&self) -> usize {
        match self {
            Addresses::Bytes(bytes) => bytes.len() / 16,
            Addresses::List(list) => list.len(),
        }
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn emit(&self, out: &mut [u8]) {
        for (chunk, addr) in out.chunks_exact_mut(16).zip(self.iter()) {
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

/// One multicast address record of an MLDv2 report. Auxiliary data is not
/// represented (RFC 3810 §5.2.10: receivers ignore it; imp sends none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressRecord<'a> {
    /// What the record says about the group.
    pub record_type: RecordType,
    /// The multicast address.
    pub group: Ipv6Addr,
    /// The sources the record lists.
    pub sources: Addresses<'a>,
}

impl AddressRecord<'_> {
    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        RECORD_HEADER_LEN + 16 * self.sources.len()
    }

    fn emit(&self, out: &mut [u8]) {
        out[0] = self.record_type.into();
        out[1] = 0;
        out[2..4].copy_from_slice(&(self.sources.len() as u16).to_be_bytes());
        out[4..20].copy_from_slice(&self.group.octets());
        self.sources
            .emit(&mut out[RECORD_HEADER_LEN..self.buffer_len()]);
    }
}

/// The records of an MLDv2 report: the checked bytes of a parsed message or a slice
/// to send. Equal when they hold equal records in order.
#[derive(Debug, Clone, Copy)]
pub enum Records<'a> {
    /// Records back to back in a parsed message (checked to hold exactly this many).
    Bytes {
        /// The bytes after the report header.
        bytes: &'a [u8],
        /// Number of records.
        count: u16,
    },
    /// Records to send.
    List(&'a [AddressRecord<'a>]),
}

/// Reads the record at the front of `bytes`: the record and its whole length
/// (auxiliary data included), or why it does not fit.
fn record_at(bytes: &[u8]) -> Result<(AddressRecord<'_>, usize)> {
    if bytes.len() < RECORD_HEADER_LEN {
        return Err(Error::Truncated {
            need: RECORD_HEADER_LEN,
            have: bytes.len(),
        });
    }
    let sources = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
    let aux = usize::from(bytes[1]) * 4;
    let len = RECORD_HEADER_LEN + 16 * sources + aux;
    if bytes.len() < len {
        return Err(Error::Truncated {
            need: len,
            have: bytes.len(),
        });
    }
    let record = AddressRecord {
        record_type: RecordType::from(bytes[0]),
        group: addr_at(bytes, 4),
        sources: Addresses::Bytes(&bytes[RECORD_HEADER_LEN..RECORD_HEADER_LEN + 16 * sources]),
    };
    Ok((record, len))
}

impl<'a> Records<'a> {
    /// No records.
    pub const EMPTY: Records<'static> = Records::List(&[]);

    /// The records in order.
    pub fn iter(&self) -> impl Iterator<Item = AddressRecord<'a>> + 'a {
        let (mut bytes, count, list): (&'a [u8], u16, &'a [AddressRecord<'a>]) = match *self {
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

/// The MLDv2 part of a query (RFC 3810 §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryV2<'a> {
    /// S: routers suppress their timer updates.
    pub suppress: bool,
    /// Querier's Robustness Variable, 3 bits.
    pub robustness: u8,
    /// Querier's Query Interval Code.
    pub interval_code: u8,
    /// The sources of a group-and-source-specific query.
    pub sources: Addresses<'a>,
}

/// An MLD message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr<'a> {
    /// Multicast Listener Query: general (`group` unspecified) or for one group.
    Query {
        /// Maximum Response Code (MLDv1: the delay in milliseconds; MLDv2: a code,
        /// RFC 3810 §5.1.3).
        max_response_code: u16,
        /// The group asked about, or `::` for all.
        group: Ipv6Addr,
        /// The MLDv2 fields, for a query of 28 bytes or more.
        v2: Option<QueryV2<'a>>,
    },
    /// MLDv1 Report: listening to `group`.
    Report {
        /// The group.
        group: Ipv6Addr,
    },
    /// MLDv1 Done: no longer listening to `group`.
    Done {
        /// The group.
        group: Ipv6Addr,
    },
    /// MLDv2 Report.
    ReportV2 {
        /// The multicast address records.
        records: Records<'a>,
    },
}

impl<'a> Repr<'a> {
    /// Reads an MLD message from a checked ICMPv6 view (checksum not verified here:
    /// [`crate::icmpv6::Repr::parse`] does that). `Truncated` for a message shorter
    /// than its type needs or a record or source list past its end; a query of 25 to
    /// 27 bytes is `BadLength` (RFC 3810 §8.1: neither version; ignore it).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        packet.check_len()?;
        let bytes: &'a [u8] = packet.buffer.as_ref();
        let kind = packet.msg_type();
        let need = match kind {
            Message::MldReportV2 => V2_REPORT_HEADER_LEN,
            Message::MldQuery | Message::MldReport | Message::MldDone => V1_LEN,
            _ => return Err(Error::Unsupported("not an MLD message")),
        };
        if bytes.len() < need {
            return Err(Error::Truncated {
                need,
                have: bytes.len(),
            });
        }
        match kind {
            Message::MldReportV2 => Self::parse_report_v2(bytes),
            Message::MldQuery => Self::parse_query(bytes),
            Message::MldReport => Ok(Repr::Report {
                group: addr_at(bytes, 8),
            }),
            _ => Ok(Repr::Done {
                group: addr_at(bytes, 8),
            }),
        }
    }

    fn parse_query(bytes: &'a [u8]) -> Result<Repr<'a>> {
        let max_response_code = u16::from_be_bytes([bytes[4], bytes[5]]);
        let group = addr_at(bytes, 8);
        if bytes.len() == V1_LEN {
            return Ok(Repr::Query {
                max_response_code,
                group,
                v2: None,
            });
        }
        if bytes.len() < V2_QUERY_LEN {
            return Err(Error::BadLength(bytes.len()));
        }
        let sources = usize::from(u16::from_be_bytes([bytes[26], bytes[27]]));
        let end = V2_QUERY_LEN + 16 * sources;
        if bytes.len() < end {
            return Err(Error::Truncated {
                need: end,
                have: bytes.len(),
            });
        }
        Ok(Repr::Query {
            max_response_code,
            group,
            v2: Some(QueryV2 {
                suppress: bytes[24] & 0x08 != 0,
                robustness: bytes[24] & 0x07,
                interval_code: bytes[25],
                sources: Addresses::Bytes(&bytes[V2_QUERY_LEN..end]),
            }),
        })
    }

    fn parse_report_v2(bytes: &'a [u8]) -> Result<Repr<'a>> {
        let count = u16::from_be_bytes([bytes[6], bytes[7]]);
        let records = &bytes[V2_REPORT_HEADER_LEN..];
        let mut rest = records;
        for _ in 0..count {
            let (_, len) = record_at(rest)?;
            rest = &rest[len..];
        }
        Ok(Repr::ReportV2 {
            records: Records::Bytes {
                bytes: records,
                count,
            },
        })
    }

    /// The ICMPv6 type of this message.
    pub const fn message(&self) -> Message {
        match self {
            Repr::Query { .. } => Message::MldQuery,
            Repr::Report { .. } => Message::MldReport,
            Repr::Done { .. } => Message::MldDone,
            Repr::ReportV2 { .. } => Message::MldReportV2,
        }
    }

    /// The whole message's length.
    pub fn buffer_len(&self) -> usize {
        match self {
            Repr::Query { v2: None, .. } | Repr::Report { .. } | Repr::Done { .. } => V1_LEN,
            Repr::Query { v2: Some(v2), .. } => V2_QUERY_LEN + 16 * v2.sources.len(),
            Repr::ReportV2 { records } => {
                V2_REPORT_HEADER_LEN + records.iter().map(|r| r.buffer_len()).sum::<usize>()
            }
        }
    }

    /// Writes the message (checksum zero) into the first [`Repr::buffer_len`] bytes of
    /// `packet`. Send it through [`crate::icmpv6::Repr::Mld`], whose `emit` fills the
    /// checksum.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        let len = self.buffer_len();
        let bytes = &mut packet.buffer.as_mut()[..len];
        let head = len.min(V2_QUERY_LEN);
        bytes[..head].fill(0);
        bytes[0] = self.message().into();
        match *self {
            Repr::Query {
                max_response_code,
                group,
                v2,
            } => {
                bytes[4..6].copy_from_slice(&max_response_code.to_be_bytes());
                bytes[8..24].copy_from_slice(&group.octets());
                if let Some(v2) = v2 {
                    bytes[24] = if v2.suppress { 0x08 } else { 0 } | (v2.robustness & 0x07);
                    bytes[25] = v2.interval_code;
                    bytes[26..28].copy_from_slice(&(v2.sources.len() as u16).to_be_bytes());
                    v2.sources.emit(&mut bytes[V2_QUERY_LEN..]);
                }
            }
            Repr::Report { group } | Repr::Done { group } => {
                bytes[8..24].copy_from_slice(&group.octets());
            }
            Repr::ReportV2 { records } => {
                bytes[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
                let mut out = &mut bytes[V2_REPORT_HEADER_LEN..];
                for record in records.iter() {
                    let (this, rest) = out.split_at_mut(record.buffer_len());
                    record.emit(this);
                    out = rest;
                }
            }
        }
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Repr::Query { group, v2, .. } => {
                let version = if v2.is_some() { 2 } else { 1 };
                write!(f, "MLDv{version} query for {group}")
            }
            Repr::Report { group } => write!(f, "MLDv1 report for {group}"),
            Repr::Done { group } => write!(f, "MLDv1 done for {group}"),
            Repr::ReportV2 { records } => write!(f, "MLDv2 report, {} records", records.len()),
        }
    }
}

#[cfg(test)]
mod tests;
