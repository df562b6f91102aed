//! ARP (RFC 826). The view reads any hardware/protocol pair; the [`Repr`] represents
//! only Ethernet with IPv4, the one pair imp speaks.

use core::fmt;
use core::net::Ipv4Addr;

use crate::ethernet::{self, EtherType};
use crate::{Error, Result};

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;
/// Hardware type for Ethernet (RFC 826 `ares_hrd$Ethernet`).
pub const HARDWARE_ETHERNET: u16 = 1;

/// The ARP opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Who has the target protocol address?
    Request,
    /// The sender has the sender protocol address.
    Reply,
    /// Any other opcode (RARP, InARP, ...).
    Unknown(u16),
}

impl From<u16> for Operation {
    fn from(value: u16) -> Operation {
        match value {
            1 => Operation::Request,
            2 => Operation::Reply,
            other => Operation::Unknown(other),
        }
    }
}

impl From<Operation> for u16 {
    fn from(value: Operation) -> u16 {
        match value {
            Operation::Request => 1,
            Operation::Reply => 2,
            Operation::Unknown(other) => other,
        }
    }
}

mod field {
    use core::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    /// The fixed part; the four addresses follow, their lengths given by HLEN and PLEN.
    pub const FIXED_LEN: usize = 8;

    pub const fn sha(hlen: u8, _plen: u8) -> Range<usize> {
        FIXED_LEN..FIXED_LEN + hlen as usize
    }
    pub const fn spa(hlen: u8, plen: u8) -> Range<usize> {
        let start = sha(hlen, plen).end;
        start..start + plen as usize
    }
    pub const fn tha(hlen: u8, plen: u8) -> Range<usize> {
        let start = spa(hlen, plen).end;
        start..start + hlen as usize
    }
    pub const fn tpa(hlen: u8, plen: u8) -> Range<usize> {
        let start = tha(hlen, plen).end;
        start..start + plen as usize
    }
}

/// A read/write view of an ARP packet of any hardware and protocol type.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer and checks that the addresses its length fields announce fit.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks the fixed part, then the four addresses sized by HLEN and PLEN.
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < field::FIXED_LEN {
            return Err(Error::Truncated {
                need: field::FIXED_LEN,
                have,
            });
        }
        let need = field::tpa(self.hardware_len(), self.protocol_len()).end;
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

    /// Hardware type (1 = Ethernet).
    pub fn hardware_type(&self) -> u16 {
        self.u16_at(field::HTYPE)
    }

    /// Protocol type, an EtherType (0x0800 = IPv4).
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(self.u16_at(field::PTYPE))
    }

    /// Length of a hardware address in bytes.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Length of a protocol address in bytes.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Opcode.
    pub fn operation(&self) -> Operation {
        Operation::from(self.u16_at(field::OPER))
    }

    /// Sender hardware address bytes.
    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::sha(self.hardware_len(), self.protocol_len())]
    }

    /// Sender protocol address bytes.
    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::spa(self.hardware_len(), self.protocol_len())]
    }

    /// Target hardware address bytes.
    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tha(self.hardware_len(), self.protocol_len())]
    }

    /// Target protocol address bytes.
    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tpa(self.hardware_len(), self.protocol_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, value: u16) {
        self.set_u16_at(field::HTYPE, value);
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, value: EtherType) {
        self.set_u16_at(field::PTYPE, value.into());
    }

    /// Sets the hardware address length (which moves every address after it).
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length (which moves every address after it).
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Sets the opcode.
    pub fn set_operation(&mut self, value: Operation) {
        self.set_u16_at(field::OPER, value.into());
    }

    /// Sets the sender hardware address; `value` must be HLEN bytes long.
    pub fn set_source_hardware_addr(&mut self, value: &[u8]) {
        let range = field::sha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the sender protocol address; `value` must be PLEN bytes long.
    pub fn set_source_protocol_addr(&mut self, value: &[u8]) {
        let range = field::spa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target hardware address; `value` must be HLEN bytes long.
    pub fn set_target_hardware_addr(&mut self, value: &[u8]) {
        let range = field::tha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target protocol address; `value` must be PLEN bytes long.
    pub fn set_target_protocol_addr(&mut self, value: &[u8]) {
        let range = field::tpa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An Ethernet/IPv4 ARP packet, independent of the bytes it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Request or reply.
    pub operation: Operation,
    /// Sender's MAC address.
    pub source_hardware_addr: ethernet::Address,
    /// Sender's IPv4 address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target's MAC address (ignored, usually zero, in a request).
    pub target_hardware_addr: ethernet::Address,
    /// Target's IPv4 address.
    pub target_protocol_addr: Ipv4Addr,
}

fn ipv4(bytes: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
}

fn mac(bytes: &[u8]) -> ethernet::Address {
    let mut octets = [0u8; 6];
    octets.copy_from_slice(bytes);
    ethernet::Address(octets)
}

impl Repr {
    /// Reads an Ethernet/IPv4 ARP packet. Any other hardware or protocol type, or
    /// address lengths other than 6 and 4, is `Unsupported`.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.hardware_type() != HARDWARE_ETHERNET || packet.hardware_len() != 6 {
            return Err(Error::Unsupported("ARP hardware type other than Ethernet"));
        }
        if packet.protocol_type() != EtherType::Ipv4 || packet.protocol_len() != 4 {
            return Err(Error::Unsupported("ARP protocol type other than IPv4"));
        }
        Ok(Repr {
            operation: packet.operation(),
            source_hardware_addr: mac(packet.source_hardware_addr()),
            source_protocol_addr: ipv4(packet.source_protocol_addr()),
            target_hardware_addr: mac(packet.target_hardware_addr()),
            target_protocol_addr: ipv4(packet.target_protocol_addr()),
        })
    }

    /// Always [`PACKET_LEN`].
    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    /// Always [`PACKET_LEN`]: ARP is all header.
    pub const fn header_len(&self) -> usize {
        PACKET_LEN
    }

    /// Writes the packet.
    ///
    /// # Panics
    /// If the buffer is shorter than [`PACKET_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(&self, packet: &mut Packet<&mut T>) {
        packet.set_hardware_type(HARDWARE_ETHERNET);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(&self.source_hardware_addr.0);
        packet.set_source_protocol_addr(&self.source_protocol_addr.octets());
        packet.set_target_hardware_addr(&self.target_hardware_addr.0);
        packet.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.operation {
            Operation::Request => write!(
                f,
                "ARP who-has {} tell {} ({})",
                self.target_protocol_addr, self.source_protocol_addr, self.source_hardware_addr
            ),
            Operation::Reply => write!(
                f,
                "ARP {} is-at {}",
                self.source_protocol_addr, self.source_hardware_addr
            ),
            Operation::Unknown(op) => write!(f, "ARP op {op}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A captured request: who-has 192.168.1.1 tell 192.168.1.100 (00:1a:2b:3c:4d:5e).
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0xc0,
        0xa8, 0x01, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x01,
    ];

    #[test]
    fn request_round_trip() {
        let packet = Packet::new_checked(&REQUEST[..]).unwrap();
        let repr = Repr::parse(&packet).unwrap();
        assert_eq!(
            repr,
            Repr {
                operation: Operation::Request,
                source_hardware_addr: ethernet::Address([0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e]),
                source_protocol_addr: Ipv4Addr::new(192, 168, 1, 100),
                target_hardware_addr: ethernet::Address([0; 6]),
                target_protocol_addr: Ipv4Addr::new(192, 168, 1, 1),
            }
        );
        let mut out = [0xeeu8; 28];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, REQUEST);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&REQUEST[..7]).unwrap_err(),
            Error::Truncated { need: 8, have: 7 }
        );
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated { need: 28, have: 27 }
        );
    }

    #[test]
    fn other_hardware_is_unsupported() {
        let mut bytes = REQUEST;
        bytes[1] = 6; // IEEE 802
        assert!(matches!(
            Repr::parse(&Packet::new_unchecked(&bytes[..])),
            Err(Error::Unsupported(_))
        ));
        let mut bytes = REQUEST;
        bytes[2] = 0x86; // IPv6
        bytes[3] = 0xdd;
        assert!(matches!(
            Repr::parse(&Packet::new_unchecked(&bytes[..])),
            Err(Error::Unsupported(_))
        ));
    }

    #[test]
    fn generic_lengths_are_viewable() {
        // hlen 8, plen 16: needs 8 + 2 * 24 = 56 bytes.
        let mut bytes = [0u8; 56];
        bytes[4] = 8;
        bytes[5] = 16;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.target_protocol_addr().len(), 16);
        assert_eq!(
            Packet::new_checked(&bytes[..55]).unwrap_err(),
            Error::Truncated { need: 56, have: 55 }
        );
    }
}
