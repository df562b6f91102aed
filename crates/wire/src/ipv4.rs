//! IPv4 header (RFC 791) and CIDR prefixes (RFC 4632).
//!
//! Options are carried as raw bytes, not interpreted. Fragment offsets are in bytes
//! everywhere in this API (the header stores them in units of 8 bytes).

use core::fmt;
use core::net::Ipv4Addr;
use core::str::FromStr;

use crate::{Error, Result, checksum};

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;
/// Largest header: IHL 15.
pub const MAX_HEADER_LEN: usize = 60;
/// Most option bytes a header holds.
pub const MAX_OPTIONS_LEN: usize = MAX_HEADER_LEN - HEADER_LEN;

/// The protocol field: what the payload carries (IANA "Assigned Internet Protocol
/// Numbers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// ICMP, 1.
    Icmp,
    /// IGMP, 2.
    Igmp,
    /// TCP, 6.
    Tcp,
    /// UDP, 17.
    Udp,
    /// Any other value.
    Unknown(u8),
}

impl From<u8> for Protocol {
    fn from(value: u8) -> Protocol {
        match value {
            1 => Protocol::Icmp,
            2 => Protocol::Igmp,
            6 => Protocol::Tcp,
            17 => Protocol::Udp,
            other => Protocol::Unknown(other),
        }
    }
}

impl From<Protocol> for u8 {
    fn from(value: Protocol) -> u8 {
        match value {
            Protocol::Icmp => 1,
            Protocol::Igmp => 2,
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Unknown(other) => other,
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Protocol::Icmp => write!(f, "ICMP"),
            Protocol::Igmp => write!(f, "IGMP"),
            Protocol::Tcp => write!(f, "TCP"),
            Protocol::Udp => write!(f, "UDP"),
            Protocol::Unknown(v) => write!(f, "proto {v}"),
        }
    }
}

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Don't Fragment bit of the flags/offset word.
const FLAG_DF: u16 = 0x4000;
/// More Fragments bit of the flags/offset word.
const FLAG_MF: u16 = 0x2000;
/// Fragment offset bits (units of 8 bytes).
const OFFSET_MASK: u16 = 0x1fff;

/// A read/write view of an IPv4 datagram.
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

    /// Checks that every accessor can run: the fixed header fits, the version is 4, the
    /// IHL is at least 5 and the header fits, and the total length covers the header and
    /// fits in the buffer. Bytes past the total length (Ethernet padding) are allowed.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < HEADER_LEN {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have,
            });
        }
        if self.version() != 4 {
            return Err(Error::BadVersion(self.version()));
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN || header_len > have {
            return Err(Error::BadHeaderLen(header_len));
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len || total_len > have {
            return Err(Error::BadLength(total_len));
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

    fn addr_at(&self, range: core::ops::Range<usize>) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[range];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Version field (4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated services code point (RFC 2474), 6 bits.
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification codepoint (RFC 3168), 2 bits.
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length of the datagram, header included.
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Identification, shared by the fragments of one datagram.
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    /// Don't Fragment.
    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_DF != 0
    }

    /// More Fragments follow.
    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_MF != 0
    }

    /// Offset of this fragment's payload in the original datagram, in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLG_OFF) & OFFSET_MASK) * 8
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Time to live, under its IPv6 name.
    pub fn hop_limit(&self) -> u8 {
        self.ttl()
    }

    /// The payload's protocol.
    pub fn protocol(&self) -> Protocol {
        Protocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum field as stored.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        self.addr_at(field::SRC_ADDR)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        self.addr_at(field::DST_ADDR)
    }

    /// This datagram is a fragment: More Fragments is set or the offset is not zero.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    /// Raw option bytes, between the fixed header and the payload.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// True when the header checksum is correct.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(&self.buffer.as_ref()[..self.header_len()]) == 0xffff
    }

    /// The bytes from the end of the header to the total length (padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    fn set_flag(&mut self, bit: u16, on: bool) {
        let word = self.u16_at(field::FLG_OFF);
        self.set_u16_at(field::FLG_OFF, if on { word | bit } else { word & !bit });
    }

    /// Sets the version field.
    pub fn set_version(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (value << 4);
    }

    /// Sets the header length in bytes (a multiple of 4, 20..=60).
    pub fn set_header_len(&mut self, len: usize) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((len / 4) as u8 & 0x0f);
    }

    /// Sets the DSCP (6 bits).
    pub fn set_dscp(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (value << 2);
    }

    /// Sets the ECN codepoint (2 bits).
    pub fn set_ecn(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (value & 0x03);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, value: u16) {
        self.set_u16_at(field::LENGTH, value);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, value: u16) {
        self.set_u16_at(field::IDENT, value);
    }

    /// Clears the flags (reserved bit included) and the fragment offset.
    pub fn clear_flags(&mut self) {
        self.set_u16_at(field::FLG_OFF, 0);
    }

    /// Sets Don't Fragment.
    pub fn set_dont_frag(&mut self, value: bool) {
        self.set_flag(FLAG_DF, value);
    }

    /// Sets More Fragments.
    pub fn set_more_frags(&mut self, value: bool) {
        self.set_flag(FLAG_MF, value);
    }

    /// Sets the fragment offset in bytes (a multiple of 8; the low 3 bits are dropped).
    pub fn set_frag_offset(&mut self, bytes: u16) {
        let word = self.u16_at(field::FLG_OFF);
        self.set_u16_at(field::FLG_OFF, (word & !OFFSET_MASK) | (bytes / 8));
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    /// Sets the time to live, under its IPv6 name.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.set_ttl(value);
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, value: Protocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.into();
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Computes and stores the header checksum (the header length field must be set).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::data(&self.buffer.as_ref()[..self.header_len()]);
        self.set_checksum(checksum::finish(sum));
    }

    /// Decrements the TTL by one and patches the checksum incrementally (RFC 1624), as
    /// a router does when forwarding. Returns the new TTL; a TTL already 0 stays 0.
    pub fn decrement_ttl(&mut self) -> u8 {
        let ttl = self.ttl();
        if ttl == 0 {
            return 0;
        }
        let proto = self.buffer.as_ref()[field::PROTOCOL];
        let old_word = u16::from_be_bytes([ttl, proto]);
        let new_word = u16::from_be_bytes([ttl - 1, proto]);
        let sum = checksum::update(self.checksum(), old_word, new_word);
        self.set_ttl(ttl - 1);
        self.set_checksum(sum);
        ttl - 1
    }

    /// Option bytes, mutable.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// The payload (up to the total length), mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[start..end]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An IPv4 header, independent of the bytes it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// The payload's protocol.
    pub protocol: Protocol,
    /// Bytes of payload after the header (total length minus header length).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// More Fragments.
    pub more_frags: bool,
    /// Fragment offset in bytes (a multiple of 8).
    pub frag_offset: u16,
    /// DSCP, 6 bits.
    pub dscp: u8,
    /// ECN codepoint, 2 bits.
    pub ecn: u8,
    /// Raw option bytes: a multiple of 4, at most 40. `emit` pads a shorter tail with
    /// zeros (End of Option List) and drops anything past 40.
    pub options: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Reads the header of a datagram, checking the header checksum when
    /// `verify_checksum` (turn it off when the device has verified it).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&'a T>,
        verify_checksum: bool,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        let buffer: &'a [u8] = packet.buffer.as_ref();
        let header_len = packet.header_len();
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - header_len,
            ttl: packet.ttl(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            options: &buffer[HEADER_LEN..header_len],
        })
    }

    /// Header length: 20 plus the options rounded up to 4, at most 60.
    pub const fn header_len(&self) -> usize {
        let options = if self.options.len() > MAX_OPTIONS_LEN {
            MAX_OPTIONS_LEN
        } else {
            self.options.len()
        };
        HEADER_LEN + options.next_multiple_of(4)
    }

    /// Header plus payload: the total length.
    pub const fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Writes the header (checksum filled) into the front of `packet`; the payload is
    /// the caller's to write, before or after.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::header_len`]. A `buffer_len` over 65535
    /// is stored modulo 2^16.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        // The fixed header is built in a local array and stored with one copy: a
        // setter per field bounds-checks and read-modify-writes each (the same bytes
        // as the setters write; the `emit_matches_setters` test holds them equal).
        let header_len = self.header_len();
        let buffer = &mut packet.buffer.as_mut()[..header_len];
        let mut flags = (self.frag_offset / 8) & OFFSET_MASK;
        if self.dont_frag {
            flags |= FLAG_DF;
        }
        if self.more_frags {
            flags |= FLAG_MF;
        }
        let [l0, l1] = (self.buffer_len() as u16).to_be_bytes();
        let [i0, i1] = self.ident.to_be_bytes();
        let [f0, f1] = flags.to_be_bytes();
        let [s0, s1, s2, s3] = self.src_addr.octets();
        let [d0, d1, d2, d3] = self.dst_addr.octets();
        let mut fixed = [
            0x40 | ((header_len / 4) as u8 & 0x0f),
            (self.dscp << 2) | (self.ecn & 0x03),
            l0,
            l1,
            i0,
            i1,
            f0,
            f1,
            self.ttl,
            self.protocol.into(),
            0,
            0,
            s0,
            s1,
            s2,
            s3,
            d0,
            d1,
            d2,
            d3,
        ];
        if header_len == HEADER_LEN {
            let [c0, c1] = checksum::finish(checksum::data(&fixed)).to_be_bytes();
            fixed[10] = c0;
            fixed[11] = c1;
            buffer.copy_from_slice(&fixed);
            return;
        }
        buffer[..HEADER_LEN].copy_from_slice(&fixed);
        let options = &mut buffer[HEADER_LEN..];
        let given = self.options.len().min(options.len());
        options[..given].copy_from_slice(&self.options[..given]);
        options[given..].fill(0);
        packet.fill_checksum();
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv4 {} > {} {} len {} ttl {} id {}",
            self.src_addr, self.dst_addr, self.protocol, self.payload_len, self.ttl, self.ident
        )?;
        if self.more_frags || self.frag_offset != 0 {
            write!(
                f,
                " frag {}{}",
                self.frag_offset,
                if self.more_frags { "+" } else { "" }
            )?;
        }
        Ok(())
    }
}

/// An IPv4 address with a prefix length, e.g. `192.168.1.10/24`. The host bits of
/// `address` are kept: the same type names an interface address and its subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    /// The address (host bits may be set).
    pub address: Ipv4Addr,
    /// Number of leading bits that name the network, 0..=32.
    pub prefix_len: u8,
}

impl Cidr {
    /// `0.0.0.0/0`, which contains every address: the default route.
    pub const DEFAULT_ROUTE: Cidr = Cidr {
        address: Ipv4Addr::UNSPECIFIED,
        prefix_len: 0,
    };

    /// A prefix; `BadField("prefix_len")` when `prefix_len` exceeds 32.
    pub const fn new(address: Ipv4Addr, prefix_len: u8) -> Result<Cidr> {
        if prefix_len > 32 {
            return Err(Error::BadField("prefix_len"));
        }
        Ok(Cidr {
            address,
            prefix_len,
        })
    }

    /// The netmask, e.g. 255.255.255.0 for /24.
    pub const fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from_bits(self.mask_bits())
    }

    const fn mask_bits(&self) -> u32 {
        match u32::MAX.checked_shl(32u32.saturating_sub(self.prefix_len as u32)) {
            Some(mask) => mask,
            None => 0,
        }
    }

    /// This prefix with the host bits cleared.
    pub const fn network(&self) -> Cidr {
        Cidr {
            address: Ipv4Addr::from_bits(self.address.to_bits() & self.mask_bits()),
            prefix_len: self.prefix_len,
        }
    }

    /// The directed broadcast address (all host bits set).
    pub const fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from_bits(self.address.to_bits() | !self.mask_bits())
    }

    /// True when `addr` is in this prefix.
    pub const fn contains(&self, addr: Ipv4Addr) -> bool {
        (addr.to_bits() ^ self.address.to_bits()) & self.mask_bits() == 0
    }

    /// True when every address of `other` is in this prefix.
    pub const fn contains_cidr(&self, other: &Cidr) -> bool {
        other.prefix_len >= self.prefix_len && self.contains(other.address)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix_len)
    }
}

impl FromStr for Cidr {
    type Err = Error;

    /// Parses `a.b.c.d/n`; `BadField("cidr")` for anything else.
    fn from_str(s: &str) -> Result<Cidr> {
        let (addr, len) = s.split_once('/').ok_or(Error::BadField("cidr"))?;
        let address = addr.parse().map_err(|_| Error::BadField("cidr"))?;
        // u8's parser accepts a leading '+'; a prefix is digits only.
        if len.is_empty() || len.len() > 2 || !len.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::BadField("cidr"));
        }
        let prefix_len = len.parse().map_err(|_| Error::BadField("cidr"))?;
        Cidr::new(address, prefix_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;

    // IPv4 + UDP: 10.0.0.1:1234 > 10.0.0.2:53, 4 bytes of payload, TTL 64, DF.
    const DATAGRAM: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x14, 0x97, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, 0xde, 0xad,
        0xbe, 0xef,
    ];

    fn repr(options: &[u8]) -> Repr<'_> {
        Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: Protocol::Udp,
            payload_len: 12,
            ttl: 64,
            ident: 0x1234,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
            dscp: 0,
            ecn: 0,
            options,
        }
    }

    /// The reference `emit`: one setter per field, over whatever the buffer held.
    fn emit_with_setters(repr: &Repr<'_>, buffer: &mut [u8]) {
        let header_len = repr.header_len();
        let mut packet = Packet::new_unchecked(&mut buffer[..]);
        packet.set_version(4);
        packet.set_header_len(header_len);
        packet.set_dscp(repr.dscp);
        packet.set_ecn(repr.ecn);
        packet.set_total_len(repr.buffer_len() as u16);
        packet.set_ident(repr.ident);
        packet.clear_flags();
        packet.set_dont_frag(repr.dont_frag);
        packet.set_more_frags(repr.more_frags);
        packet.set_frag_offset(repr.frag_offset);
        packet.set_ttl(repr.ttl);
        packet.set_protocol(repr.protocol);
        packet.set_src_addr(repr.src_addr);
        packet.set_dst_addr(repr.dst_addr);
        let options = &mut buffer[HEADER_LEN..header_len];
        let given = repr.options.len().min(options.len());
        options[..given].copy_from_slice(&repr.options[..given]);
        options[given..].fill(0);
        Packet::new_unchecked(&mut buffer[..]).fill_checksum();
    }

    proptest::proptest! {
        /// The fixed-layout `emit` writes the same bytes as the setters, for any field
        /// values (out-of-range DSCP, ECN and offsets included) and option lengths.
        #[test]
        fn emit_matches_setters(
            src: u32, dst: u32, protocol: u8, payload_len in 0usize..70_000, ttl: u8,
            ident: u16, dont_frag: bool, more_frags: bool, frag_offset: u16, dscp: u8,
            ecn: u8, options in proptest::collection::vec(proptest::num::u8::ANY, 0..44),
            fill: u8,
        ) {
            let repr = Repr {
                src_addr: Ipv4Addr::from_bits(src),
                dst_addr: Ipv4Addr::from_bits(dst),
                protocol: Protocol::from(protocol),
                payload_len,
                ttl,
                ident,
                dont_frag,
                more_frags,
                frag_offset,
                dscp,
                ecn,
                options: &options,
            };
            let mut expected = [fill; 64];
            let mut got = [fill; 64];
            emit_with_setters(&repr, &mut expected);
            repr.emit(&mut Packet::new_unchecked(&mut got[..]));
            proptest::prop_assert_eq!(&got[..], &expected[..]);
        }
    }

    #[test]
    fn parse_and_emit() {
        let packet = Packet::new_checked(&DATAGRAM[..]).unwrap();
        assert!(packet.verify_checksum());
        assert_eq!(packet.checksum(), 0x1497);
        let parsed = Repr::parse(&packet, true).unwrap();
        assert_eq!(parsed, repr(&[]));
        assert_eq!(packet.payload(), &DATAGRAM[20..]);
        let mut out = DATAGRAM;
        out[..20].fill(0xaa);
        parsed.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, DATAGRAM);
    }

    #[test]
    fn options_and_fragments() {
        let options = [0x94, 0x04, 0x00, 0x00]; // Router Alert
        let mut r = repr(&options);
        r.dont_frag = false;
        r.more_frags = true;
        r.frag_offset = 1480;
        r.dscp = 46;
        r.ecn = 2;
        let mut buf = [0u8; 36];
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf[0], 0x46);
        assert_eq!(buf[1], (46 << 2) | 2);
        assert_eq!(&buf[6..8], &(0x2000u16 | (1480 / 8)).to_be_bytes());
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert!(packet.is_fragment());
        assert_eq!(packet.options(), &options);
        assert_eq!(Repr::parse(&packet, true).unwrap(), r);
    }

    #[test]
    fn padding_past_total_len_is_allowed() {
        let mut buf = [0u8; 60];
        buf[..32].copy_from_slice(&DATAGRAM);
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.payload().len(), 12);
    }

    #[test]
    fn errors() {
        let check = |bytes: &[u8]| Packet::new_checked(bytes).map(|_| ()).unwrap_err();
        assert_eq!(
            check(&DATAGRAM[..19]),
            Error::Truncated { need: 20, have: 19 }
        );
        let mut bad = DATAGRAM;
        bad[0] = 0x65;
        assert_eq!(check(&bad), Error::BadVersion(6));
        bad[0] = 0x44;
        assert_eq!(check(&bad), Error::BadHeaderLen(16));
        bad[0] = 0x4f;
        assert_eq!(check(&bad), Error::BadHeaderLen(60));
        let mut bad = DATAGRAM;
        bad[3] = 33;
        assert_eq!(check(&bad), Error::BadLength(33));
        bad[3] = 19;
        assert_eq!(check(&bad), Error::BadLength(19));
        let mut bad = DATAGRAM;
        bad[8] = 63;
        let packet = Packet::new_checked(&bad[..]).unwrap();
        assert_eq!(Repr::parse(&packet, true), Err(Error::BadChecksum));
        assert!(Repr::parse(&packet, false).is_ok());
    }

    #[test]
    fn decrement_ttl_keeps_checksum_valid() {
        let mut buf = DATAGRAM;
        let mut packet = Packet::new_unchecked(&mut buf[..]);
        assert_eq!(packet.decrement_ttl(), 63);
        assert!(packet.verify_checksum());
    }

    #[test]
    fn cidr() {
        let c: Cidr = "192.168.1.10/24".parse().unwrap();
        assert_eq!(c.netmask(), Ipv4Addr::new(255, 255, 255, 0));
        assert_eq!(c.network().address, Ipv4Addr::new(192, 168, 1, 0));
        assert_eq!(c.broadcast(), Ipv4Addr::new(192, 168, 1, 255));
        assert!(c.contains(Ipv4Addr::new(192, 168, 1, 200)));
        assert!(!c.contains(Ipv4Addr::new(192, 168, 2, 1)));
        assert_eq!(std::format!("{c}"), "192.168.1.10/24");
        assert!(Cidr::DEFAULT_ROUTE.contains(Ipv4Addr::BROADCAST));
        assert_eq!(Cidr::DEFAULT_ROUTE.netmask(), Ipv4Addr::UNSPECIFIED);
        let host = Cidr::new(Ipv4Addr::new(10, 1, 2, 3), 32).unwrap();
        assert!(host.contains(Ipv4Addr::new(10, 1, 2, 3)));
        assert!(!host.contains(Ipv4Addr::new(10, 1, 2, 4)));
        assert!(c.contains_cidr(&host.network()) == c.contains(host.address));
        assert_eq!(
            Cidr::new(Ipv4Addr::UNSPECIFIED, 33),
            Err(Error::BadField("prefix_len"))
        );
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "10.0.0/8",
            "10.0.0.0/+8",
            "10.0.0.0/",
            "x/8",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
        // Out-of-range fields set directly never panic.
        let odd = Cidr {
            address: Ipv4Addr::UNSPECIFIED,
            prefix_len: 200,
        };
        assert_eq!(odd.netmask(), Ipv4Addr::BROADCAST);
    }
}
