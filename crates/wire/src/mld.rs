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

use crate::group_record::{self, GroupAddress};
use crate::icmpv6::packet::{Message, Packet};
use crate::{Error, Result};

pub use crate::group_record::RecordType;

/// A list of IPv6 addresses: 16-byte addresses in a parsed message, or a slice to send
/// (see [`group_record::Addresses`]).
pub type Addresses<'a> = group_record::Addresses<'a, Ipv6Addr>;
/// One multicast address record of an MLDv2 report (RFC 3810 §5.2.4).
pub type AddressRecord<'a> = group_record::GroupRecord<'a, Ipv6Addr>;
/// The multicast address records of an MLDv2 report.
pub type Records<'a> = group_record::Records<'a, Ipv6Addr>;
/// The MLDv2 part of a query (RFC 3810 §5.1).
pub type QueryV2<'a> = group_record::SourceQuery<'a, Ipv6Addr>;

/// Length of an MLDv1 message (and of an MLDv2 query without sources, less 4).
pub const V1_LEN: usize = 24;
/// Length of an MLDv2 query without sources.
pub const V2_QUERY_LEN: usize = 28;
/// Length of an MLDv2 report header before its records.
pub const V2_REPORT_HEADER_LEN: usize = 8;
/// Length of a multicast address record without sources or auxiliary data.
pub const RECORD_HEADER_LEN: usize = group_record::record_header_len::<Ipv6Addr>();

fn addr_at(bytes: &[u8], at: usize) -> Ipv6Addr {
    Ipv6Addr::read(&bytes[at..])
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
        Ok(Repr::Query {
            max_response_code,
            group,
            v2: Some(QueryV2::parse(bytes, V1_LEN)?),
        })
    }

    fn parse_report_v2(bytes: &'a [u8]) -> Result<Repr<'a>> {
        let count = u16::from_be_bytes([bytes[6], bytes[7]]);
        let records = Records::parse(&bytes[V2_REPORT_HEADER_LEN..], count)?;
        Ok(Repr::ReportV2 { records })
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
            Repr::Query { v2: Some(v2), .. } => V1_LEN + v2.buffer_len(),
            Repr::ReportV2 { records } => V2_REPORT_HEADER_LEN + records.buffer_len(),
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
                    v2.emit(&mut bytes[V1_LEN..]);
                }
            }
            Repr::Report { group } | Repr::Done { group } => {
                bytes[8..24].copy_from_slice(&group.octets());
            }
            Repr::ReportV2 { records } => {
                bytes[6..8].copy_from_slice(&(records.len() as u16).to_be_bytes());
                records.emit(&mut bytes[V2_REPORT_HEADER_LEN..]);
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
