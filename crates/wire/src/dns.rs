//! DNS messages (RFC 1035 §4): the header, questions and resource records, with name
//! compression read and written (§4.1.4), A, AAAA (RFC 3596) and CNAME data.
//!
//! [`Message::parse`] checks the whole message once: the header, every name (labels
//! of at most 63 bytes, names of at most 255, compression pointers that point
//! backwards, so they can neither loop nor leave the message) and every record's
//! length. After that, iterating its questions and records cannot fail and allocates
//! nothing. [`Builder`] writes a message into a caller's buffer, compressing each name
//! against the names already written.

use core::fmt;
use core::net::{Ipv4Addr, Ipv6Addr};

use crate::{Error, Result};

/// Length of the header.
pub const HEADER_LEN: usize = 12;
/// The UDP and TCP port of DNS.
pub const PORT: u16 = 53;
/// RFC 1035 §2.3.4: "UDP messages 512 octets or less".
pub const UDP_MAX: usize = 512;
/// RFC 1035 §2.3.4: "names 255 octets or less" (in wire form).
const NAME_MAX: usize = 255;
/// RFC 1035 §2.3.4: "labels 63 octets or less".
const LABEL_MAX: usize = 63;
/// Class IN.
pub const CLASS_IN: u16 = 1;

/// A record or query type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Type {
    /// An IPv4 address.
    A,
    /// The canonical name for an alias.
    Cname,
    /// An IPv6 address (RFC 3596).
    Aaaa,
    /// Any other type, by number.
    Other(u16),
}

impl From<u16> for Type {
    fn from(value: u16) -> Type {
        match value {
            1 => Type::A,
            5 => Type::Cname,
            28 => Type::Aaaa,
            other => Type::Other(other),
        }
    }
}

impl From<Type> for u16 {
    fn from(value: Type) -> u16 {
        match value {
            Type::A => 1,
            Type::Cname => 5,
            Type::Aaaa => 28,
            Type::Other(other) => other,
        }
    }
}

/// The header's second 16 bits, taken apart (RFC 1035 §4.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// QR: a response.
    pub response: bool,
    /// The kind of query (0: standard).
    pub opcode: u8,
    /// AA: the answer is authoritative.
    pub authoritative: bool,
    /// TC: the message was truncated to fit the transport; ask again over TCP.
    pub truncated: bool,
    /// RD: recursion desired.
    pub recursion_desired: bool,
    /// RA: recursion available.
    pub recursion_available: bool,
    /// The response code (0: no error, 2: server failure, 3: no such name).
    pub rcode: u8,
}

impl Flags {
    fn from_u16(v: u16) -> Flags {
        Flags {
            response: v & 0x8000 != 0,
            opcode: ((v >> 11) & 0xf) as u8,
            authoritative: v & 0x0400 != 0,
            truncated: v & 0x0200 != 0,
            recursion_desired: v & 0x0100 != 0,
            recursion_available: v & 0x0080 != 0,
            rcode: (v & 0xf) as u8,
        }
    }

    fn to_u16(self) -> u16 {
        let bit = |b: bool, mask: u16| if b { mask } else { 0 };
        bit(self.response, 0x8000)
            | u16::from(self.opcode & 0xf) << 11
            | bit(self.authoritative, 0x0400)
            | bit(self.truncated, 0x0200)
            | bit(self.recursion_desired, 0x0100)
            | bit(self.recursion_available, 0x0080)
            | u16::from(self.rcode & 0xf)
    }
}

/// A section of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Section {
    /// The answer section.
    Answer,
    /// The authority section.
    Authority,
    /// The additional section.
    Additional,
}

/// A domain name inside a parsed message (compression pointers followed on reading).
#[derive(Clone, Copy)]
pub struct Name<'a> {
    message: &'a [u8],
    offset: usize,
}

impl<'a> Name<'a> {
    /// The labels, first (leftmost) first.
    pub fn labels(&self) -> Labels<'a> {
        Labels {
            message: self.message,
            offset: self.offset,
        }
    }

    /// True when the name equals the dotted `text` (ASCII case ignored, RFC 1035
    /// §2.3.3; a trailing dot is allowed).
    pub fn eq_text(&self, text: &str) -> bool {
        let text = text.strip_suffix('.').unwrap_or(text);
        let mut wanted = text
            .split('.')
            .filter(|l| !text.is_empty() || !l.is_empty());
        for label in self.labels() {
            match wanted.next() {
                Some(w) if w.as_bytes().eq_ignore_ascii_case(label) => {}
                _ => return false,
            }
        }
        wanted.next().is_none()
    }
}

impl PartialEq for Name<'_> {
    fn eq(&self, other: &Self) -> bool {
        let mut theirs = other.labels();
        self.labels()
            .all(|l| theirs.next().is_some_and(|t| t.eq_ignore_ascii_case(l)))
            && theirs.next().is_none()
    }
}

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, label) in self.labels().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            for &b in label {
                if b.is_ascii_graphic() && b != b'.' && b != b'\\' {
                    write!(f, "{}", b as char)?;
                } else {
                    write!(f, "\\{b:03}")?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Name({self})")
    }
}

/// The labels of a checked [`Name`].
#[derive(Debug, Clone)]
pub struct Labels<'a> {
    message: &'a [u8],
    offset: usize,
}

impl<'a> Iterator for Labels<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        // The name was checked by `read_name`; `get` keeps a wrong offset harmless.
        loop {
            let len = *self.message.get(self.offset)?;
            if len & 0xc0 == 0xc0 {
                let low = *self.message.get(self.offset + 1)?;
                self.offset = usize::from(u16::from_be_bytes([len & 0x3f, low]));
                continue;
            }
            if len == 0 {
                return None;
            }
            let start = self.offset + 1;
            let label = self.message.get(start..start + usize::from(len))?;
            self.offset = start + usize::from(len);
            return Some(label);
        }
    }
}

/// Check the name at `offset` and return it with the offset after it (after its
/// first pointer, if compressed). RFC 1035 §4.1.4: a pointer names a "prior
/// occurance" of a name, so each pointer must point before the one being followed:
/// that bounds the walk and rules out loops.
fn read_name(message: &[u8], offset: usize) -> Result<(Name<'_>, usize)> {
    let mut at = offset;
    let mut end = None;
    let mut wire_len = 0usize;
    loop {
        let len = *message.get(at).ok_or(Error::Truncated {
            need: at + 1,
            have: message.len(),
        })?;
        match len & 0xc0 {
            0xc0 => {
                let low = *message.get(at + 1).ok_or(Error::Truncated {
                    need: at + 2,
                    have: message.len(),
                })?;
                let target = usize::from(u16::from_be_bytes([len & 0x3f, low]));
                if target >= at {
                    return Err(Error::BadField("DNS compression pointer"));
                }
                end.get_or_insert(at + 2);
                at = target;
            }
            0x00 => {
                wire_len += 1 + usize::from(len);
                if wire_len > NAME_MAX {
                    return Err(Error::BadLength(wire_len));
                }
                if len == 0 {
                    let end = end.unwrap_or(at + 1);
                    return Ok((Name { message, offset }, end));
                }
                let next = at + 1 + usize::from(len);
                if next > message.len() {
                    return Err(Error::Truncated {
                        need: next,
                        have: message.len(),
                    });
                }
                at = next;
            }
            _ => return Err(Error::Unsupported("DNS extended label type")),
        }
    }
}

/// A question (RFC 1035 §4.1.2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Question<'a> {
    /// The name asked about.
    pub name: Name<'a>,
    /// The type asked for.
    pub qtype: Type,
    /// The class ([`CLASS_IN`]).
    pub qclass: u16,
}

/// A record's data, decoded for the types a resolver follows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RData<'a> {
    /// An IPv4 address.
    A(Ipv4Addr),
    /// An IPv6 address.
    Aaaa(Ipv6Addr),
    /// The canonical name of an alias.
    Cname(Name<'a>),
    /// Any other type, as bytes (names inside it may be compressed).
    Other(&'a [u8]),
}

/// A resource record (RFC 1035 §4.1.3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Record<'a> {
    /// The owner name.
    pub name: Name<'a>,
    /// The type.
    pub rtype: Type,
    /// The class.
    pub class: u16,
    /// Seconds the record may be cached.
    pub ttl: u32,
    /// The data.
    pub data: RData<'a>,
}

/// A parsed, fully checked message.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    bytes: &'a [u8],
    /// The message id.
    pub id: u16,
    /// The flags.
    pub flags: Flags,
    counts: [u16; 4],
    /// Where the question section starts and where each record section starts.
    starts: [usize; 4],
}

fn u16_at(bytes: &[u8], at: usize) -> Result<u16> {
    match bytes.get(at..at + 2) {
        Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
        None => Err(Error::Truncated {
            need: at + 2,
            have: bytes.len(),
        }),
    }
}

/// Read one record at `at`; returns it and the offset after it.
fn read_record(bytes: &[u8], at: usize) -> Result<(Record<'_>, usize)> {
    let (name, at) = read_name(bytes, at)?;
    let rtype = Type::from(u16_at(bytes, at)?);
    let class = u16_at(bytes, at + 2)?;
    let ttl = (u32::from(u16_at(bytes, at + 4)?) << 16) | u32::from(u16_at(bytes, at + 6)?);
    let rdlen = usize::from(u16_at(bytes, at + 8)?);
    let start = at + 10;
    let data = bytes.get(start..start + rdlen).ok_or(Error::Truncated {
        need: start + rdlen,
        have: bytes.len(),
    })?;
    let data = match (rtype, data.len()) {
        (Type::A, 4) => RData::A(Ipv4Addr::new(data[0], data[1], data[2], data[3])),
        (Type::A, len) => return Err(Error::BadLength(len)),
        (Type::Aaaa, 16) => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(data);
            RData::Aaaa(Ipv6Addr::from(octets))
        }
        (Type::Aaaa, len) => return Err(Error::BadLength(len)),
        (Type::Cname, _) => {
            let (target, end) = read_name(bytes, start)?;
            if end != start + rdlen {
                return Err(Error::BadLength(rdlen));
            }
            RData::Cname(target)
        }
        _ => RData::Other(data),
    };
    let record = Record {
        name,
        rtype,
        class,
        ttl,
        data,
    };
    Ok((record, start + rdlen))
}

impl<'a> Message<'a> {
    /// Parse and check a whole message (bytes after its last record are ignored).
    pub fn parse(bytes: &'a [u8]) -> Result<Message<'a>> {
        if bytes.len() < HEADER_LEN {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have: bytes.len(),
            });
        }
        let id = u16_at(bytes, 0)?;
        let flags = Flags::from_u16(u16_at(bytes, 2)?);
        let mut counts = [0u16; 4];
        for (i, count) in counts.iter_mut().enumerate() {
            *count = u16_at(bytes, 4 + 2 * i)?;
        }
        let mut starts = [HEADER_LEN; 4];
        let mut at = HEADER_LEN;
        for _ in 0..counts[0] {
            let (_, end) = read_name(bytes, at)?;
            u16_at(bytes, end + 2)?;
            at = end + 4;
        }
        for section in 1..4 {
            starts[section] = at;
            for _ in 0..counts[section] {
                at = read_record(bytes, at)?.1;
            }
        }
        Ok(Message {
            bytes,
            id,
            flags,
            counts,
            starts,
        })
    }

    /// The questions.
    pub fn questions(&self) -> impl Iterator<Item = Question<'a>> + 'a {
        let bytes = self.bytes;
        let mut at = self.starts[0];
        (0..self.counts[0]).filter_map(move |_| {
            // Checked by `parse`: none of these fail.
            let (name, end) = read_name(bytes, at).ok()?;
            let qtype = Type::from(u16_at(bytes, end).ok()?);
            let qclass = u16_at(bytes, end + 2).ok()?;
            at = end + 4;
            Some(Question {
                name,
                qtype,
                qclass,
            })
        })
    }

    /// The records of `section`.
    pub fn records(&self, section: Section) -> impl Iterator<Item = Record<'a>> + 'a {
        let index = section as usize + 1;
        let bytes = self.bytes;
        let mut at = self.starts[index];
        (0..self.counts[index]).filter_map(move |_| {
            let (record, end) = read_record(bytes, at).ok()?;
            at = end;
            Some(record)
        })
    }

    /// The answer records.
    pub fn answers(&self) -> impl Iterator<Item = Record<'a>> + 'a {
        self.records(Section::Answer)
    }
}

/// Record data to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordData<'s> {
    /// An IPv4 address.
    A(Ipv4Addr),
    /// An IPv6 address.
    Aaaa(Ipv6Addr),
    /// The canonical name of an alias, dotted.
    Cname(&'s str),
    /// Any other type: its number and its bytes, written as they are.
    Other(u16, &'s [u8]),
}

/// Names remembered for compression.
const COMPRESS_SLOTS: usize = 64;

/// Writes a message into a buffer: the header first, then questions, then the records
/// of each section in order. Names are given dotted (`"www.example.com"`, a trailing
/// dot allowed) and compressed against every name already written.
#[derive(Debug)]
pub struct Builder<'b> {
    buf: &'b mut [u8],
    len: usize,
    /// Offsets of names (and name suffixes) written, for compression pointers.
    names: [u16; COMPRESS_SLOTS],
    names_len: usize,
    /// The section written last (0: questions, 1..=3: records).
    section: usize,
}

impl<'b> Builder<'b> {
    /// Start a message with `id` and `flags`, every count zero.
    pub fn new(buf: &'b mut [u8], id: u16, flags: Flags) -> Result<Builder<'b>> {
        if buf.len() < HEADER_LEN {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have: buf.len(),
            });
        }
        buf[..HEADER_LEN].fill(0);
        buf[0..2].copy_from_slice(&id.to_be_bytes());
        buf[2..4].copy_from_slice(&flags.to_u16().to_be_bytes());
        Ok(Builder {
            buf,
            len: HEADER_LEN,
            names: [0; COMPRESS_SLOTS],
            names_len: 0,
            section: 0,
        })
    }

    /// Add a question.
    pub fn question(&mut self, name: &str, qtype: Type, qclass: u16) -> Result<()> {
        if self.section != 0 {
            return Err(Error::BadField("DNS section order"));
        }
        let saved = (self.len, self.names_len);
        let written = self
            .name(name)
            .and_then(|()| self.put(&u16::from(qtype).to_be_bytes()))
            .and_then(|()| self.put(&qclass.to_be_bytes()));
        self.finish_item(written, saved, 0)
    }

    /// Add a record to `section` (sections in order: answers, authority, additional).
    pub fn record(
        &mut self,
        section: Section,
        name: &str,
        ttl: u32,
        data: RecordData<'_>,
    ) -> Result<()> {
        let index = section as usize + 1;
        if index < self.section {
            return Err(Error::BadField("DNS section order"));
        }
        self.section = index;
        let saved = (self.len, self.names_len);
        let written = self.record_body(name, ttl, data);
        self.finish_item(written, saved, index)
    }

    fn record_body(&mut self, name: &str, ttl: u32, data: RecordData<'_>) -> Result<()> {
        self.name(name)?;
        let rtype = match data {
            RecordData::A(_) => Type::A,
            RecordData::Aaaa(_) => Type::Aaaa,
            RecordData::Cname(_) => Type::Cname,
            RecordData::Other(t, _) => Type::from(t),
        };
        self.put(&u16::from(rtype).to_be_bytes())?;
        self.put(&CLASS_IN.to_be_bytes())?;
        self.put(&ttl.to_be_bytes())?;
        let length_at = self.len;
        self.put(&[0, 0])?;
        match data {
            RecordData::A(a) => self.put(&a.octets())?,
            RecordData::Aaaa(a) => self.put(&a.octets())?,
            RecordData::Cname(target) => self.name(target)?,
            RecordData::Other(_, bytes) => self.put(bytes)?,
        }
        let rdlen =
            u16::try_from(self.len - length_at - 2).map_err(|_| Error::BadLength(self.len))?;
        self.buf[length_at..length_at + 2].copy_from_slice(&rdlen.to_be_bytes());
        Ok(())
    }

    /// Count an item written whole, or roll back a failed one.
    fn finish_item(
        &mut self,
        written: Result<()>,
        saved: (usize, usize),
        count: usize,
    ) -> Result<()> {
        if let Err(error) = written {
            (self.len, self.names_len) = saved;
            return Err(error);
        }
        let at = 4 + 2 * count;
        let value = u16::from_be_bytes([self.buf[at], self.buf[at + 1]]).wrapping_add(1);
        self.buf[at..at + 2].copy_from_slice(&value.to_be_bytes());
        Ok(())
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        let end = self.len + bytes.len();
        if end > self.buf.len() {
            return Err(Error::Truncated {
                need: end,
                have: self.buf.len(),
            });
        }
        self.buf[self.len..end].copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }

    /// Write a dotted name, ending in a pointer to the longest suffix already written.
    fn name(&mut self, text: &str) -> Result<()> {
        let text = text.strip_suffix('.').unwrap_or(text);
        check_name(text)?;
        let mut rest = text;
        // This name's label offsets, remembered once it is whole (a pointer into a
        // name still being written could point at itself).
        let mut fresh = [0u16; NAME_MAX / 2];
        let mut fresh_len = 0;
        let mut pointer = None;
        while !rest.is_empty() {
            if let Some(offset) = self.find_suffix(rest) {
                pointer = Some(offset);
                break;
            }
            let (label, tail) = rest.split_once('.').unwrap_or((rest, ""));
            if self.len < 0x3fff {
                fresh[fresh_len] = self.len as u16;
                fresh_len += 1;
            }
            self.put(&[label.len() as u8])?;
            self.put(label.as_bytes())?;
            rest = tail;
        }
        match pointer {
            Some(offset) => self.put(&(0xc000 | offset).to_be_bytes())?,
            None => self.put(&[0])?,
        }
        for &offset in &fresh[..fresh_len] {
            if self.names_len < COMPRESS_SLOTS {
                self.names[self.names_len] = offset;
                self.names_len += 1;
            }
        }
        Ok(())
    }

    /// The offset of a name written earlier equal to `suffix`.
    fn find_suffix(&self, suffix: &str) -> Option<u16> {
        let written = &self.buf[..self.len];
        self.names[..self.names_len]
            .iter()
            .copied()
            .find(|&offset| {
                let name = Name {
                    message: written,
                    offset: usize::from(offset),
                };
                name.eq_text(suffix)
            })
    }

    /// The message written so far.
    pub fn finish(self) -> &'b [u8] {
        &self.buf[..self.len]
    }
}

/// RFC 1035 §2.3.4: labels of 1 to 63 bytes, at most 255 bytes in wire form.
fn check_name(text: &str) -> Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    if text.len() + 2 > NAME_MAX {
        return Err(Error::BadLength(text.len() + 2));
    }
    if text.split('.').any(|l| l.is_empty() || l.len() > LABEL_MAX) {
        return Err(Error::BadField("DNS name label"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(buf: &mut [u8]) -> usize {
        let flags = Flags {
            response: true,
            recursion_desired: true,
            recursion_available: true,
            ..Flags::default()
        };
        let mut b = Builder::new(buf, 0xbeef, flags).unwrap();
        b.question("www.Example.test", Type::A, CLASS_IN).unwrap();
        let cname = RecordData::Cname("host.example.test");
        b.record(Section::Answer, "www.example.test", 60, cname)
            .unwrap();
        let a = RecordData::A(Ipv4Addr::new(10, 0, 0, 9));
        b.record(Section::Answer, "host.example.test", 30, a)
            .unwrap();
        b.finish().len()
    }

    #[test]
    fn builds_compresses_and_parses() {
        let mut buf = [0u8; 512];
        let len = response(&mut buf);
        // The question's name is written whole (18 bytes), the answers point into it.
        assert_eq!(&buf[12..13], &[3]);
        let msg = Message::parse(&buf[..len]).unwrap();
        assert_eq!(msg.id, 0xbeef);
        assert!(msg.flags.response && msg.flags.recursion_available);
        let q: [Question<'_>; 1] = [msg.questions().next().unwrap()];
        assert!(q[0].name.eq_text("www.example.test."));
        let answers: [Record<'_>; 2] = {
            let mut it = msg.answers();
            [it.next().unwrap(), it.next().unwrap()]
        };
        assert!(answers[0].name.eq_text("WWW.example.test"));
        match answers[0].data {
            RData::Cname(target) => assert!(target.eq_text("host.example.test")),
            other => panic!("expected a CNAME, got {other:?}"),
        }
        assert_eq!(answers[1].data, RData::A(Ipv4Addr::new(10, 0, 0, 9)));
        assert_eq!(answers[1].ttl, 30);
        // "host.example.test" shares "example.test" with the question: the CNAME data
        // is "host" plus a 2-byte pointer.
        assert!(
            len < 12 + 22 + 2 * 12 + 7 + 2 + 4 + 10,
            "compressed: {len} bytes"
        );
    }

    #[test]
    fn pointer_loops_and_bad_pointers_are_errors() {
        let mut msg = [0u8; 20];
        msg[5] = 1; // one question
        // A pointer to itself.
        msg[12..14].copy_from_slice(&[0xc0, 12]);
        assert_eq!(
            Message::parse(&msg[..18]).unwrap_err(),
            Error::BadField("DNS compression pointer")
        );
        // A pointer forward past the end.
        msg[12..14].copy_from_slice(&[0xc0, 200]);
        assert_eq!(
            Message::parse(&msg[..18]).unwrap_err(),
            Error::BadField("DNS compression pointer")
        );
        // A label running past the end.
        msg[12] = 30;
        assert_eq!(
            Message::parse(&msg[..18]).unwrap_err(),
            Error::Truncated { need: 43, have: 18 }
        );
        // Extended label types (0x40, 0x80) are refused.
        msg[12] = 0x41;
        assert_eq!(
            Message::parse(&msg[..18]).unwrap_err(),
            Error::Unsupported("DNS extended label type")
        );
    }

    #[test]
    fn bad_names_and_truncated_records_are_errors() {
        let mut buf = [0u8; 512];
        let mut b = Builder::new(&mut buf, 1, Flags::default()).unwrap();
        assert_eq!(
            b.question("a..b", Type::A, CLASS_IN),
            Err(Error::BadField("DNS name label"))
        );
        let long = [b'x'; 64];
        let long = core::str::from_utf8(&long).unwrap();
        assert_eq!(
            b.question(long, Type::A, CLASS_IN),
            Err(Error::BadField("DNS name label"))
        );
        b.record(
            Section::Authority,
            "x",
            1,
            RecordData::A(Ipv4Addr::LOCALHOST),
        )
        .unwrap();
        assert_eq!(
            b.record(Section::Answer, "x", 1, RecordData::A(Ipv4Addr::LOCALHOST)),
            Err(Error::BadField("DNS section order"))
        );
        let mut buf = [0u8; 512];
        let len = response(&mut buf);
        for cut in 0..len {
            assert!(Message::parse(&buf[..cut]).is_err(), "cut at {cut} parsed");
        }
    }

    #[test]
    fn full_buffer_is_an_error_not_a_partial_item() {
        let mut buf = [0u8; 20];
        let mut b = Builder::new(&mut buf, 1, Flags::default()).unwrap();
        assert!(matches!(
            b.question("example.test", Type::A, CLASS_IN),
            Err(Error::Truncated { .. })
        ));
        let len = b.finish().len();
        assert_eq!(len, HEADER_LEN);
        let msg = Message::parse(&buf[..len]).unwrap();
        assert_eq!(msg.questions().count(), 0);
    }
}
