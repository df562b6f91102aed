//! Ethernet II frames (IEEE 802.3 with an EtherType) and the IEEE 802.1Q VLAN tag.
//!
//! The frame check sequence is not part of the view: devices strip it on receive and
//! add it on transmit.

use core::fmt;

use crate::{Error, Result};

/// Length of an untagged Ethernet header: destination, source, EtherType.
pub const HEADER_LEN: usize = 14;
/// Length of the 802.1Q tag (TPID is the outer EtherType; this is the TCI plus the
/// inner EtherType).
pub const VLAN_TAG_LEN: usize = 4;

/// A 48-bit IEEE MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Address(pub [u8; 6]);

impl Address {
    /// The broadcast address `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: Address = Address([0xff; 6]);

    /// Reads an address from the first six bytes of `bytes`; `None` if it is shorter.
    pub fn from_bytes(bytes: &[u8]) -> Option<Address> {
        let octets: [u8; 6] = bytes.get(..6)?.try_into().ok()?;
        Some(Address(octets))
    }

    /// The six octets.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// All ones.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// The group bit (least significant bit of the first octet) is set; broadcast is
    /// a multicast address.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// An individual address: the group bit is clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The locally-administered bit (second least significant bit of the first octet).
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl From<[u8; 6]> for Address {
    fn from(octets: [u8; 6]) -> Address {
        Address(octets)
    }
}

/// The EtherType field: which protocol the payload carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EtherType {
    /// Internet Protocol version 4, 0x0800.
    Ipv4,
    /// Address Resolution Protocol, 0x0806.
    Arp,
    /// IEEE 802.1Q VLAN tag (the TPID), 0x8100.
    Vlan,
    /// Internet Protocol version 6, 0x86DD.
    Ipv6,
    /// Any other value.
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(value: u16) -> EtherType {
        match value {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x8100 => EtherType::Vlan,
            0x86DD => EtherType::Ipv6,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(value: EtherType) -> u16 {
        match value {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Vlan => 0x8100,
            EtherType::Ipv6 => 0x86DD,
            EtherType::Unknown(other) => other,
        }
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => write!(f, "IPv4"),
            EtherType::Arp => write!(f, "ARP"),
            EtherType::Vlan => write!(f, "802.1Q"),
            EtherType::Ipv6 => write!(f, "IPv6"),
            EtherType::Unknown(v) => write!(f, "0x{v:04x}"),
        }
    }
}

/// The tag control information of an IEEE 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point (IEEE 802.1p class), 3 bits: 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 12 bits: 0..=4095.
    pub vid: u16,
}

impl VlanTag {
    /// Decodes a 16-bit TCI.
    pub const fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }

    /// Encodes as a 16-bit TCI; out-of-range `pcp` and `vid` bits are dropped.
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }
}

mod field {
    use core::ops::Range;
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// Present only when ETHERTYPE is 0x8100.
    pub const VLAN_TCI: Range<usize> = 14..16;
    pub const VLAN_ETHERTYPE: Range<usize> = 16..18;
}

/// A read/write view of an Ethernet II frame, optionally 802.1Q tagged.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a buffer and checks that the header (with the tag, if any) fits.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Checks that the buffer holds the whole header, including an 802.1Q tag when the
    /// outer EtherType announces one.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < HEADER_LEN {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have,
            });
        }
        let need = self.header_len();
        if have < need {
            return Err(Error::Truncated { need, have });
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

    /// Destination address.
    pub fn dst_addr(&self) -> Address {
        let mut octets = [0u8; 6];
        octets.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        Address(octets)
    }

    /// Source address.
    pub fn src_addr(&self) -> Address {
        let mut octets = [0u8; 6];
        octets.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        Address(octets)
    }

    /// The EtherType field right after the addresses: `Vlan` for a tagged frame.
    pub fn outer_ethertype(&self) -> EtherType {
        EtherType::from(self.u16_at(field::ETHERTYPE))
    }

    /// True when the frame carries an 802.1Q tag.
    pub fn is_tagged(&self) -> bool {
        self.outer_ethertype() == EtherType::Vlan
    }

    /// The 802.1Q tag, if the frame carries one.
    pub fn vlan_tag(&self) -> Option<VlanTag> {
        self.is_tagged()
            .then(|| VlanTag::from_tci(self.u16_at(field::VLAN_TCI)))
    }

    /// The protocol of the payload: the EtherType after the 802.1Q tag when there is
    /// one, else the outer EtherType. This is the value to demultiplex on.
    pub fn ethertype(&self) -> EtherType {
        if self.is_tagged() {
            EtherType::from(self.u16_at(field::VLAN_ETHERTYPE))
        } else {
            self.outer_ethertype()
        }
    }

    /// 14, or 18 with an 802.1Q tag.
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// The bytes after the header (any Ethernet padding included).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Address) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Address) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Sets the outer EtherType field (bytes 12..14) only.
    pub fn set_outer_ethertype(&mut self, ethertype: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(ethertype).to_be_bytes());
    }

    /// Makes the frame tagged: writes the 0x8100 TPID and the TCI. Set the payload's
    /// EtherType afterwards with [`Frame::set_ethertype`].
    ///
    /// # Panics
    /// If the buffer is shorter than 18 bytes.
    pub fn set_vlan_tag(&mut self, tag: VlanTag) {
        self.set_outer_ethertype(EtherType::Vlan);
        self.buffer.as_mut()[field::VLAN_TCI].copy_from_slice(&tag.tci().to_be_bytes());
    }

    /// Sets the payload's EtherType: the inner field of a tagged frame, else the outer.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        let range = if self.is_tagged() {
            field::VLAN_ETHERTYPE
        } else {
            field::ETHERTYPE
        };
        self.buffer.as_mut()[range].copy_from_slice(&u16::from(ethertype).to_be_bytes());
    }

    /// The bytes after the header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Frame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An Ethernet header, independent of the bytes it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src: Address,
    /// Destination address.
    pub dst: Address,
    /// The payload's protocol (after the tag, if any); never `Vlan` for a valid frame.
    pub ethertype: EtherType,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
}

impl Repr {
    /// Reads the header of a checked frame.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            src: frame.src_addr(),
            dst: frame.dst_addr(),
            ethertype: frame.ethertype(),
            vlan: frame.vlan_tag(),
        })
    }

    /// Bytes of header this Repr emits: 14, or 18 with a tag.
    pub const fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            HEADER_LEN + VLAN_TAG_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Bytes `emit` writes (the header; the payload is the caller's).
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header into the front of `frame`.
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::header_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, frame: &mut Frame<&mut T>) {
        frame.set_dst_addr(self.dst);
        frame.set_src_addr(self.src);
        match self.vlan {
            Some(tag) => frame.set_vlan_tag(tag),
            None => frame.set_outer_ethertype(self.ethertype),
        }
        frame.set_ethertype(self.ethertype);
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ethernet {} > {} {}", self.src, self.dst, self.ethertype)?;
        if let Some(tag) = self.vlan {
            write!(f, " vlan {} pcp {}", tag.vid, tag.pcp)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;

    // Broadcast ARP frame header: ff..ff < 52:54:00:12:34:56, EtherType 0x0806.
    const UNTAGGED: [u8; 16] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06, 0xaa,
        0xbb,
    ];
    // Tagged IPv4 frame: VLAN 100, PCP 5, DEI 0 (TCI 0xa064).
    const TAGGED: [u8; 20] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x81, 0x00, 0xa0,
        0x64, 0x08, 0x00, 0x45, 0x00,
    ];

    #[test]
    fn untagged_round_trip() {
        let frame = Frame::new_checked(&UNTAGGED[..]).unwrap();
        let repr = Repr::parse(&frame).unwrap();
        assert_eq!(repr.dst, Address::BROADCAST);
        assert_eq!(repr.src, Address([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]));
        assert_eq!(repr.ethertype, EtherType::Arp);
        assert_eq!(repr.vlan, None);
        assert_eq!(frame.payload(), &[0xaa, 0xbb]);
        let mut out = [0u8; 16];
        out[14..].copy_from_slice(&[0xaa, 0xbb]);
        repr.emit(&mut Frame::new_unchecked(&mut out[..]));
        assert_eq!(out, UNTAGGED);
    }

    #[test]
    fn tagged_round_trip() {
        let frame = Frame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(frame.header_len(), 18);
        assert_eq!(frame.outer_ethertype(), EtherType::Vlan);
        let repr = Repr::parse(&frame).unwrap();
        assert_eq!(repr.ethertype, EtherType::Ipv4);
        assert_eq!(
            repr.vlan,
            Some(VlanTag {
                pcp: 5,
                dei: false,
                vid: 100
            })
        );
        assert_eq!(frame.payload(), &[0x45, 0x00]);
        let mut out = [0u8; 20];
        out[18..].copy_from_slice(&[0x45, 0x00]);
        repr.emit(&mut Frame::new_unchecked(&mut out[..]));
        assert_eq!(out, TAGGED);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Frame::new_checked(&UNTAGGED[..13]).unwrap_err(),
            Error::Truncated { need: 14, have: 13 }
        );
        assert_eq!(
            Frame::new_checked(&TAGGED[..17]).unwrap_err(),
            Error::Truncated { need: 18, have: 17 }
        );
    }

    #[test]
    fn address_kinds_and_display() {
        assert!(Address::BROADCAST.is_broadcast() && Address::BROADCAST.is_multicast());
        let multicast = Address([0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb]);
        assert!(multicast.is_multicast() && !multicast.is_unicast());
        let unicast = Address([0x52, 0x54, 0x00, 0xab, 0xcd, 0xef]);
        assert!(unicast.is_unicast() && !unicast.is_broadcast());
        assert_eq!(std::format!("{unicast}"), "52:54:00:ab:cd:ef");
    }

    #[test]
    fn ethertype_conversions() {
        for v in [0x0800u16, 0x0806, 0x8100, 0x86dd, 0x88cc] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
        assert_eq!(EtherType::from(0x0800), EtherType::Ipv4);
        assert_eq!(EtherType::from(0x88cc), EtherType::Unknown(0x88cc));
    }
}
