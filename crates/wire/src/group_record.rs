//! The group records IGMPv3 (RFC 3376 §4.2) and MLDv2 (RFC 3810 §5.2) reports carry,
//! and the source lists of their queries: one layout for both, differing only in the
//! address family. A record is a type byte, an auxiliary data length in 32-bit words, a
//! source count, the group address, the sources, then the auxiliary data:
//!
//! ```text
//! | type | aux len | number of sources |  group  | sources ... | aux data ... |
//!    1        1            2             A::LEN    n * A::LEN    4 * aux len
//! ```
//!
//! [`crate::igmp`] names these types over [`Ipv4Addr`] and [`crate::mld`] over
//! [`Ipv6Addr`].

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use crate::{Error, Result};

/// An address family whose group records these are: the address length and how the
/// address sits in the bytes.
pub trait GroupAddress: Copy + fmt::Debug + Eq + 'static {
    /// Bytes of one address on the wire.
    const LEN: usize;

    /// The address in the first [`GroupAddress::LEN`] bytes of `bytes` (which hold at
    /// least that many).
    fn read(bytes: &[u8]) -> Self;

    /// Writes the address into the first [`GroupAddress::LEN`] bytes of `out`.
    fn write(&self, out: &mut [u8]);
}

impl GroupAddress for Ipv4Addr {
    const LEN: usize = 4;

    fn read(bytes: &[u8]) -> Ipv4Addr {
        Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
    }

    fn write(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.octets());
    }
}

impl GroupAddress for Ipv6Addr {
    const LEN: usize = 16;

    fn read(bytes: &[u8]) -> Ipv6Addr {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&bytes[..16]);
        Ipv6Addr::from(octets)
    }

    fn write(&self, out: &mut [u8]) {
        out[..16].copy_from_slice(&self.octets());
    }
}

/// The bytes of a record before its sources: type, aux length, count, group.
pub const fn record_header_len<A: GroupAddress>() -> usize {
    4 + A::LEN
}

/// A list of addresses: back to back in a parsed message, or a slice to send. Equal
/// when they hold the same addresses in order, whatever their form.
#[derive(Debug, Clone, Copy)]
pub enum Addresses<'a, A> {
    /// Addresses back to back in a parsed message (a multiple of `A::LEN` bytes).
    Bytes(&'a [u8]),
    /// Addresses to send.
    List(&'a [A]),
}

impl<'a, A: GroupAddress> Addresses<'a, A> {
    /// No addresses.
    pub const EMPTY: Addresses<'static, A> = Addresses::List(&[]);

    /// The addresses in order.
    pub fn iter(&self) -> impl Iterator<Item = A> + 'a {
        let (bytes, list): (&'a [u8], &'a [A]) = match *self {
            Addresses::Bytes(bytes) => (bytes, &[]),
            Addresses::List(list) => (&[], list),
        };
        bytes
            .chunks_exact(A::LEN)
            .map(A::read)
            .chain(list.iter().copied())
    }

    /// How many addresses.
    pub fn len(&self) -> usize {
        match self {
            Addresses::Bytes(bytes) => bytes.len() / A::LEN,
            Addresses::List(list) => list.len(),
        }
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the addresses back to back into `out` (as many as fit).
    pub(crate) fn emit(&self, out: &mut [u8]) {
        for (chunk, addr) in out.chunks_exact_mut(A::LEN).zip(self.iter()) {
            addr.write(chunk);
        }
    }
}

impl<A: GroupAddress> PartialEq for Addresses<'_, A> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<A: GroupAddress> Eq for Addresses<'_, A> {}

/// What an IGMPv3 (RFC 3376 §4.1) or MLDv2 (RFC 3810 §5.1) query adds after the group
/// address of the older versions' query: S flag and QRV in one byte, QQIC, the number of
/// sources, the sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceQuery<'a, A: GroupAddress> {
    /// S: routers suppress their timer updates.
    pub suppress: bool,
    /// Querier's Robustness Variable, 3 bits.
    pub robustness: u8,
    /// Querier's Query Interval Code.
    pub interval_code: u8,
    /// The sources of a group-and-source-specific query.
    pub sources: Addresses<'a, A>,
}

impl<'a, A: GroupAddress> SourceQuery<'a, A> {
    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        4 + A::LEN * self.sources.len()
    }

    /// Reads the fields at `start` of `bytes`, a whole query that holds at least their
    /// 4 fixed bytes; `Truncated` (counted from the query's start) for a source list
    /// past its end.
    pub(crate) fn parse(bytes: &'a [u8], start: usize) -> Result<SourceQuery<'a, A>> {
        let flags = bytes[start];
        let sources = usize::from(u16::from_be_bytes([bytes[start + 2], bytes[start + 3]]));
        let end = start + 4 + A::LEN * sources;
        if bytes.len() < end {
            return Err(Error::Truncated {
                need: end,
                have: bytes.len(),
            });
        }
        Ok(SourceQuery {
            suppress: flags & 0x08 != 0,
            robustness: flags & 0x07,
            interval_code: bytes[start + 1],
            sources: Addresses::Bytes(&bytes[start + 4..end]),
        })
    }

    /// Writes the fields into the first [`SourceQuery::buffer_len`] bytes of `out`.
    pub(crate) fn emit(&self, out: &mut [u8]) {
        out[0] = if self.suppress { 0x08 } else { 0 } | (self.robustness & 0x07);
        out[1] = self.interval_code;
        out[2..4].copy_from_slice(&(self.sources.len() as u16).to_be_bytes());
        self.sources.emit(&mut out[4..]);
    }
}

/// Record types, the same numbers in IGMPv3 (RFC 3376 §4.2.12) and MLDv2 (RFC 3810
/// §5.2.12).
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

/// One group record. Auxiliary data is not represented (RFC 3376 §4.2.10 and RFC 3810
/// §5.2.10: receivers skip it; imp sends none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupRecord<'a, A: GroupAddress> {
    /// What the record says about the group.
    pub record_type: RecordType,
    /// The multicast group.
    pub group: A,
    /// The sources the record lists.
    pub sources: Addresses<'a, A>,
}

impl<A: GroupAddress> GroupRecord<'_, A> {
    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        record_header_len::<A>() + A::LEN * self.sources.len()
    }

    fn emit(&self, out: &mut [u8]) {
        out[0] = self.record_type.into();
        out[1] = 0;
        out[2..4].copy_from_slice(&(self.sources.len() as u16).to_be_bytes());
        self.group.write(&mut out[4..]);
        self.sources
            .emit(&mut out[record_header_len::<A>()..self.buffer_len()]);
    }
}

/// Reads the record at the front of `bytes`: the record and its whole length
/// (auxiliary data included), or why it does not fit.
fn record_at<A: GroupAddress>(bytes: &[u8]) -> Result<(GroupRecord<'_, A>, usize)> {
    let header = record_header_len::<A>();
    if bytes.len() < header {
        return Err(Error::Truncated {
            need: header,
            have: bytes.len(),
        });
    }
    let sources = usize::from(u16::from_be_bytes([bytes[2], bytes[3]]));
    let aux = usize::from(bytes[1]) * 4;
    let len = header + A::LEN * sources + aux;
    if bytes.len() < len {
        return Err(Error::Truncated {
            need: len,
            have: bytes.len(),
        });
    }
    let record = GroupRecord {
        record_type: RecordType::from(bytes[0]),
        group: A::read(&bytes[4..]),
        sources: Addresses::Bytes(&bytes[header..header + A::LEN * sources]),
    };
    Ok((record, len))
}

/// The records of a report: the checked bytes of a parsed message or a slice to send.
/// Equal when they hold equal records in order.
#[derive(Debug, Clone, Copy)]
pub enum Records<'a, A: GroupAddress> {
    /// Records back to back in a parsed message (checked to hold this many).
    Bytes {
        /// The bytes after the report header.
        bytes: &'a [u8],
        /// Number of records.
        count: u16,
    },
    /// Records to send.
    List(&'a [GroupRecord<'a, A>]),
}

impl<'a, A: GroupAddress> Records<'a, A> {
    /// No records.
    pub const EMPTY: Records<'static, A> = Records::List(&[]);

    /// The `count` records at the front of `bytes` (a report after its header), each
    /// checked to fit; `Truncated` for one past the end.
    pub(crate) fn parse(bytes: &'a [u8], count: u16) -> Result<Records<'a, A>> {
        let mut rest = bytes;
        for _ in 0..count {
            let (_, len) = record_at::<A>(rest)?;
            rest = &rest[len..];
        }
        Ok(Records::Bytes { bytes, count })
    }

    /// The records in order.
    pub fn iter(&self) -> impl Iterator<Item = GroupRecord<'a, A>> + 'a {
        let (mut bytes, count, list): (&'a [u8], u16, &'a [GroupRecord<'a, A>]) = match *self {
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

    /// The records' bytes, back to back.
    pub fn buffer_len(&self) -> usize {
        self.iter().map(|r| r.buffer_len()).sum()
    }

    /// Writes the records back to back into `out` (at least
    /// [`Records::buffer_len`] bytes).
    pub(crate) fn emit(&self, mut out: &mut [u8]) {
        for record in self.iter() {
            let (this, rest) = out.split_at_mut(record.buffer_len());
            record.emit(this);
            out = rest;
        }
    }
}

impl<A: GroupAddress> PartialEq for Records<'_, A> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl<A: GroupAddress> Eq for Records<'_, A> {}
