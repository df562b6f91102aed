//! IPv6 fixed header (RFC 8200 §3), prefixes, and the address helpers neighbour
//! discovery and SLAAC need: solicited-node groups (RFC 4291 §2.7.1), the Ethernet
//! address of a multicast group (RFC 2464 §7) and interface identifiers in modified
//! EUI-64 form (RFC 4291 appendix A, RFC 2464 §4-5).
//!
//! Extension headers are walked by [`crate::ipv6ext`]; the `next_header` here names
//! the first of them (or the upper layer when there are none). Jumbograms (RFC 2675,
//! payload length 0 with a Jumbo Payload option) are not supported: a payload length
//! of 0 means an empty payload.

use core::fmt;
use core::net::Ipv6Addr;
use core::str::FromStr;

use crate::{Error, Result, ethernet};

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;
/// The minimum link MTU every IPv6 link must carry (RFC 8200 §5).
pub const MIN_MTU: usize = 1280;

/// The Next Header field: an extension header or the upper-layer protocol (IANA
/// "Assigned Internet Protocol Numbers", the same space as IPv4's protocol field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NextHeader {
    /// Hop-by-Hop Options, 0 (RFC 8200 §4.3).
    HopByHop,
    /// TCP, 6.
    Tcp,
    /// UDP, 17.
    Udp,
    /// Routing header, 43 (RFC 8200 §4.4).
    Routing,
    /// Fragment header, 44 (RFC 8200 §4.5).
    Fragment,
    /// ICMPv6, 58 (RFC 4443).
    Icmpv6,
    /// No Next Header, 59 (RFC 8200 §4.7): nothing follows.
    NoNextHeader,
    /// Destination Options, 60 (RFC 8200 §4.6).
    DstOptions,
    /// Any other value.
    Unknown(u8),
}

/// The Next Header values by number, for matching on raw bytes.
pub mod protocol {
    /// Hop-by-Hop Options.
    pub const HOPOPTS: u8 = 0;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// Routing header.
    pub const ROUTING: u8 = 43;
    /// Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// No Next Header.
    pub const NONE: u8 = 59;
    /// Destination Options.
    pub const DSTOPTS: u8 = 60;
}

impl From<u8> for NextHeader {
    fn from(value: u8) -> NextHeader {
        match value {
            protocol::HOPOPTS => NextHeader::HopByHop,
            protocol::TCP => NextHeader::Tcp,
            protocol::UDP => NextHeader::Udp,
            protocol::ROUTING => NextHeader::Routing,
            protocol::FRAGMENT => NextHeader::Fragment,
            protocol::ICMPV6 => NextHeader::Icmpv6,
            protocol::NONE => NextHeader::NoNextHeader,
            protocol::DSTOPTS => NextHeader::DstOptions,
            other => NextHeader::Unknown(other),
        }
    }
}

impl From<NextHeader> for u8 {
    fn from(value: NextHeader) -> u8 {
        match value {
            NextHeader::HopByHop => protocol::HOPOPTS,
            NextHeader::Tcp => protocol::TCP,
            NextHeader::Udp => protocol::UDP,
            NextHeader::Routing => protocol::ROUTING,
            NextHeader::Fragment => protocol::FRAGMENT,
            NextHeader::Icmpv6 => protocol::ICMPV6,
            NextHeader::NoNextHeader => protocol::NONE,
            NextHeader::DstOptions => protocol::DSTOPTS,
            NextHeader::Unknown(other) => other,
        }
    }
}

impl NextHeader {
    /// True for the extension headers [`crate::ipv6ext::walk`] goes through
    /// (hop-by-hop, routing, fragment, destination options).
    pub const fn is_extension(&self) -> bool {
        matches!(
            self,
            NextHeader::HopByHop
                | NextHeader::Routing
                | NextHeader::Fragment
                | NextHeader::DstOptions
        )
    }
}

impl fmt::Display for NextHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NextHeader::HopByHop => write!(f, "hop-by-hop"),
            NextHeader::Tcp => write!(f, "TCP"),
            NextHeader::Udp => write!(f, "UDP"),
            NextHeader::Routing => write!(f, "routing"),
            NextHeader::Fragment => write!(f, "fragment"),
            NextHeader::Icmpv6 => write!(f, "ICMPv6"),
            NextHeader::NoNextHeader => write!(f, "no-next-header"),
            NextHeader::DstOptions => write!(f, "dst-options"),
            NextHeader::Unknown(v) => write!(f, "next-header {v}"),
        }
    }
}

mod field {
    use core::ops::Range;
    /// Version (4 bits), traffic class (8), flow label (20).
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// Flow label bits of the first word.
const FLOW_MASK: u32 = 0x000f_ffff;

/// A read/write view of an IPv6 packet: the fixed header and what follows it.
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

    /// Checks that every accessor can run: the fixed header fits, the version is 6
    /// and the payload length fits in the buffer. Bytes past the payload length
    /// (Ethernet padding) are allowed.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < HEADER_LEN {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have,
            });
        }
        if self.version() != 6 {
            return Err(Error::BadVersion(self.version()));
        }
        let payload_len = usize::from(self.payload_len());
        if HEADER_LEN + payload_len > have {
            return Err(Error::BadLength(payload_len));
        }
        Ok(())
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn first_word(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    fn addr_at(&self, range: core::ops::Range<usize>) -> Ipv6Addr {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&self.buffer.as_ref()[range]);
        Ipv6Addr::from(octets)
    }

    /// Version field (6).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class: DSCP in the high 6 bits, ECN in the low 2 (RFC 2474, RFC 3168).
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// Differentiated services code point, 6 bits.
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// Explicit congestion notification codepoint, 2 bits.
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }

    /// Flow label (RFC 6437), 20 bits.
    pub fn flow_label(&self) -> u32 {
        self.first_word() & FLOW_MASK
    }

    /// Payload length: the bytes after the fixed header, extension headers included.
    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PAYLOAD_LEN];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The first extension header or the upper-layer protocol.
    pub fn next_header(&self) -> NextHeader {
        NextHeader::from(self.buffer.as_ref()[field::NEXT_HEADER])
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        self.addr_at(field::SRC_ADDR)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        self.addr_at(field::DST_ADDR)
    }

    /// The bytes after the fixed header up to the payload length (padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }

    /// The fixed header and the payload: the packet without any link padding.
    pub fn packet(&self) -> &[u8] {
        &self.buffer.as_ref()[..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_first_word(&mut self, value: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the version field.
    pub fn set_version(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[0];
        *b = (*b & 0x0f) | (value << 4);
    }

    /// Sets the traffic class (DSCP and ECN together).
    pub fn set_traffic_class(&mut self, value: u8) {
        let word = self.first_word() & !0x0ff0_0000;
        self.set_first_word(word | (u32::from(value) << 20));
    }

    /// Sets the DSCP (6 bits).
    pub fn set_dscp(&mut self, value: u8) {
        let tc = (self.traffic_class() & 0x03) | (value << 2);
        self.set_traffic_class(tc);
    }

    /// Sets the ECN codepoint (2 bits).
    pub fn set_ecn(&mut self, value: u8) {
        let tc = (self.traffic_class() & 0xfc) | (value & 0x03);
        self.set_traffic_class(tc);
    }

    /// Sets the flow label (the low 20 bits of `value`).
    pub fn set_flow_label(&mut self, value: u32) {
        let word = self.first_word() & !FLOW_MASK;
        self.set_first_word(word | (value & FLOW_MASK));
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::PAYLOAD_LEN].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, value: NextHeader) {
        self.buffer.as_mut()[field::NEXT_HEADER] = value.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// The payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fixed IPv6 header as a plain struct.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// The first extension header or the upper-layer protocol.
    pub next_header: NextHeader,
    /// Bytes after the fixed header (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// DSCP, 6 bits.
    pub dscp: u8,
    /// ECN codepoint, 2 bits.
    pub ecn: u8,
    /// Flow label, 20 bits.
    pub flow_label: u32,
}

impl Repr {
    /// Reads the fixed header of a checked packet (see [`Packet::check_len`]).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
        })
    }

    /// Reads the fixed header of a packet quoted by an ICMPv6 error: the quote may
    /// end before the payload length says (RFC 4443 §2.4 (c) cuts it to fit the
    /// minimum MTU), so only the 40 header bytes and the version are checked. Returns
    /// the header (its `payload_len` as the original said) and the part of the
    /// payload the quote holds, for [`crate::ipv6ext::walk`] and the upper layer.
    pub fn parse_quoted(quoted: &[u8]) -> Result<(Repr, &[u8])> {
        let header = quoted.get(..HEADER_LEN).ok_or(Error::Truncated {
            need: HEADER_LEN,
            have: quoted.len(),
        })?;
        let packet = Packet::new_unchecked(header);
        if packet.version() != 6 {
            return Err(Error::BadVersion(packet.version()));
        }
        let repr = Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
        };
        let end = quoted.len().min(HEADER_LEN + repr.payload_len);
        Ok((repr, &quoted[HEADER_LEN..end]))
    }

    /// Always [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the fixed header into the first 40 bytes of `packet`; the payload is the
    /// caller's to write. Out-of-range DSCP, ECN and flow label values are cut to
    /// their widths; a `payload_len` over 65535 is stored modulo 2^16.
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        let traffic_class = ((self.dscp & 0x3f) << 2) | (self.ecn & 0x03);
        let word = (6u32 << 28) | (u32::from(traffic_class) << 20) | (self.flow_label & FLOW_MASK);
        let header = &mut packet.buffer.as_mut()[..HEADER_LEN];
        header[field::VER_TC_FLOW].copy_from_slice(&word.to_be_bytes());
        header[field::PAYLOAD_LEN].copy_from_slice(&(self.payload_len as u16).to_be_bytes());
        header[field::NEXT_HEADER] = self.next_header.into();
        header[field::HOP_LIMIT] = self.hop_limit;
        header[field::SRC_ADDR].copy_from_slice(&self.src_addr.octets());
        header[field::DST_ADDR].copy_from_slice(&self.dst_addr.octets());
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IPv6 {} > {} {} len {} hlim {}",
            self.src_addr, self.dst_addr, self.next_header, self.payload_len, self.hop_limit
        )?;
        if self.flow_label != 0 {
            write!(f, " flow {:#07x}", self.flow_label)?;
        }
        Ok(())
    }
}

/// An IPv6 address with a prefix length, e.g. `2001:db8::1/64`. The host bits of
/// `address` are kept: the same type names an interface address and its subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cidr {
    /// The address (host bits may be set).
    pub address: Ipv6Addr,
    /// Number of leading bits that name the network, 0..=128.
    pub prefix_len: u8,
}

impl Cidr {
    /// `::/0`, which contains every address: the default route.
    pub const DEFAULT_ROUTE: Cidr = Cidr {
        address: Ipv6Addr::UNSPECIFIED,
        prefix_len: 0,
    };

    /// `fe80::/64`, the link-local prefix every interface has (RFC 4291 §2.5.6).
    pub const LINK_LOCAL: Cidr = Cidr {
        address: Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        prefix_len: 64,
    };

    /// A prefix; `BadField("prefix_len")` when `prefix_len` exceeds 128.
    pub const fn new(address: Ipv6Addr, prefix_len: u8) -> Result<Cidr> {
        if prefix_len > 128 {
            return Err(Error::BadField("prefix_len"));
        }
        Ok(Cidr {
            address,
            prefix_len,
        })
    }

    const fn mask_bits(&self) -> u128 {
        match u128::MAX.checked_shl(128u32.saturating_sub(self.prefix_len as u32)) {
            Some(mask) => mask,
            None => 0,
        }
    }

    /// The netmask as an address, e.g. `ffff:ffff:ffff:ffff::` for /64.
    pub const fn netmask(&self) -> Ipv6Addr {
        Ipv6Addr::from_bits(self.mask_bits())
    }

    /// This prefix with the host bits cleared.
    pub const fn network(&self) -> Cidr {
        Cidr {
            address: Ipv6Addr::from_bits(self.address.to_bits() & self.mask_bits()),
            prefix_len: self.prefix_len,
        }
    }

    /// True when `addr` is in this prefix.
    pub const fn contains(&self, addr: Ipv6Addr) -> bool {
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

    /// Parses `address/n` (e.g. `2001:db8::/32`); `BadField("cidr")` for anything else.
    fn from_str(s: &str) -> Result<Cidr> {
        let (addr, len) = s.split_once('/').ok_or(Error::BadField("cidr"))?;
        let address = addr.parse().map_err(|_| Error::BadField("cidr"))?;
        if len.is_empty() || len.len() > 3 || !len.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::BadField("cidr"));
        }
        let prefix_len = len.parse().map_err(|_| Error::BadField("cidr"))?;
        Cidr::new(address, prefix_len)
    }
}

/// The solicited-node multicast address of `addr`: `ff02::1:ff00:0/104` with the low
/// 24 bits of `addr` (RFC 4291 §2.7.1). Neighbour solicitations for `addr` go there.
pub const fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    const PREFIX: u128 = 0xff02_0000_0000_0000_0000_0001_ff00_0000;
    Ipv6Addr::from_bits(PREFIX | (addr.to_bits() & 0x00ff_ffff))
}

/// The Ethernet destination of a packet sent to the multicast address `addr`:
/// `33:33` followed by the low 32 bits of `addr` (RFC 2464 §7).
pub const fn multicast_mac(addr: Ipv6Addr) -> ethernet::Address {
    let [.., a, b, c, d] = addr.octets();
    ethernet::Address([0x33, 0x33, a, b, c, d])
}

/// The 64-bit interface identifier of an Ethernet interface in modified EUI-64 form:
/// `ff:fe` inserted in the middle of the MAC and the universal/local bit inverted
/// (RFC 4291 appendix A, RFC 2464 §4).
pub const fn interface_id(mac: ethernet::Address) -> [u8; 8] {
    let [m0, m1, m2, m3, m4, m5] = mac.0;
    [m0 ^ 0x02, m1, m2, 0xff, 0xfe, m3, m4, m5]
}

/// The address from a /64 prefix and a 64-bit interface identifier: the upper 64 bits
/// from `prefix`, the lower from `interface_id` (what SLAAC forms, RFC 4862 §5.5.3 (d)).
/// `BadField("prefix_len")` unless the prefix is 64 bits long: RFC 4862 §5.5.3 (d)
/// ignores a prefix whose length plus the identifier's is not 128.
pub const fn address_from_prefix(prefix: &Cidr, interface_id: [u8; 8]) -> Result<Ipv6Addr> {
    if prefix.prefix_len != 64 {
        return Err(Error::BadField("prefix_len"));
    }
    let high = prefix.address.to_bits() & !(u64::MAX as u128);
    Ok(Ipv6Addr::from_bits(
        high | u64::from_be_bytes(interface_id) as u128,
    ))
}

/// The link-local address of an Ethernet interface: `fe80::/64` with the MAC's
/// modified EUI-64 interface identifier (RFC 4862 §5.3, RFC 2464 §5).
pub const fn link_local_from_mac(mac: ethernet::Address) -> Ipv6Addr {
    let high = Cidr::LINK_LOCAL.address.to_bits();
    Ipv6Addr::from_bits(high | u64::from_be_bytes(interface_id(mac)) as u128)
}

#[cfg(test)]
mod tests;
