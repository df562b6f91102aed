//! UDP (RFC 768) over IPv4.

use crate::checksum::PseudoHeader;
use core::fmt;

use crate::{Error, Result, checksum};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;
/// IP protocol number of UDP.
const PROTOCOL: u8 = 17;

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// A read/write view of a UDP datagram.
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

    /// Checks that the header fits and that the length field is at least the header and
    /// at most the buffer (bytes past it are ignored).
    pub fn check_len(&self) -> Result<()> {
        let have = self.buffer.as_ref().len();
        if have < HEADER_LEN {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have,
            });
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN || len > have {
            return Err(Error::BadLength(len));
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

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// Length field: header plus payload.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Checksum field; 0 means the sender computed none.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// True when the checksum is absent (zero) or correct over the pseudo-header,
    /// header and payload.
    pub fn verify_checksum<A: PseudoHeader>(&self, src: &A, dst: &A) -> bool {
        // RFC 768: "An all zero transmitted checksum value means that the transmitter
        // generated no checksum."
        if self.checksum() == 0 {
            return true;
        }
        let len = self.len();
        let bytes = &self.buffer.as_ref()[..usize::from(len)];
        checksum::combine(&[
            src.pseudo_header(dst, PROTOCOL, u32::from(len)),
            checksum::data(bytes),
        ]) == 0xffff
    }

    /// The bytes after the header, up to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        self.set_u16_at(field::SRC_PORT, value);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        self.set_u16_at(field::DST_PORT, value);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, value: u16) {
        self.set_u16_at(field::LENGTH, value);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value);
    }

    /// Computes and stores the checksum (length field and payload must be in place).
    pub fn fill_checksum<A: PseudoHeader>(&mut self, src: &A, dst: &A) {
        self.set_checksum(0);
        let len = self.len();
        let sum = checksum::combine(&[
            src.pseudo_header(dst, PROTOCOL, u32::from(len)),
            checksum::data(&self.buffer.as_ref()[..usize::from(len)]),
        ]);
        // RFC 768: "If the computed checksum is zero, it is transmitted as all ones."
        let value = match checksum::finish(sum) {
            0 => 0xffff,
            v => v,
        };
        self.set_checksum(value);
    }

    /// The payload (up to the length field), mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// A UDP datagram, independent of the bytes it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Datagram contents.
    pub payload: &'a [u8],
}

impl<'a> Repr<'a> {
    /// Reads a datagram sent from `src` to `dst`. With `verify_checksum`, a non-zero
    /// checksum that does not match is `BadChecksum`; a zero checksum is accepted.
    pub fn parse<T: AsRef<[u8]> + ?Sized, A: PseudoHeader>(
        packet: &Packet<&'a T>,
        src: &A,
        dst: &A,
        verify_checksum: bool,
    ) -> Result<Repr<'a>> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::BadChecksum);
        }
        let buffer: &'a [u8] = packet.buffer.as_ref();
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload: &buffer[HEADER_LEN..usize::from(packet.len())],
        })
    }

    /// Always [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    /// Writes header and payload and fills the checksum (a computed 0 is sent as
    /// 0xffff).
    ///
    /// # Panics
    /// If the buffer is shorter than [`Repr::buffer_len`]. A payload over 65527 bytes
    /// does not fit the length field.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized, A: PseudoHeader>(
        &self,
        packet: &mut Packet<&mut T>,
        src: &A,
        dst: &A,
    ) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(self.buffer_len() as u16);
        packet.payload_mut().copy_from_slice(self.payload);
        packet.fill_checksum(src, dst);
    }
}

impl fmt::Display for Repr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "UDP {} > {} len {}",
            self.src_port,
            self.dst_port,
            self.payload.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);
    // 192.168.0.1:40000 > 192.168.0.2:7, payload "hello" (odd length), checksum 0x9e66.
    const DATAGRAM: [u8; 13] = [
        0x9c, 0x40, 0x00, 0x07, 0x00, 0x0d, 0x9e, 0x66, b'h', b'e', b'l', b'l', b'o',
    ];

    #[test]
    fn round_trip() {
        let packet = Packet::new_checked(&DATAGRAM[..]).unwrap();
        let repr = Repr::parse(&packet, &SRC, &DST, true).unwrap();
        assert_eq!(
            repr,
            Repr {
                src_port: 40000,
                dst_port: 7,
                payload: b"hello"
            }
        );
        let mut out = [0u8; 13];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]), &SRC, &DST);
        assert_eq!(out, DATAGRAM);
    }

    #[test]
    fn checksum_zero_means_none() {
        let mut bytes = DATAGRAM;
        bytes[6] = 0;
        bytes[7] = 0;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(Repr::parse(&packet, &SRC, &DST, true).is_ok());
        bytes[7] = 1;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Repr::parse(&packet, &SRC, &DST, true),
            Err(Error::BadChecksum)
        );
        assert!(Repr::parse(&packet, &SRC, &DST, false).is_ok());
        // Wrong addresses break the pseudo-header sum.
        let packet = Packet::new_checked(&DATAGRAM[..]).unwrap();
        assert_eq!(
            Repr::parse(&packet, &DST, &DST, true),
            Err(Error::BadChecksum)
        );
    }

    #[test]
    fn computed_zero_is_sent_as_ones() {
        // Pick the payload word that makes the whole sum 0xffff, so the checksum
        // computes to 0.
        let without_payload = checksum::combine(&[
            checksum::pseudo_header_v4(&SRC, &DST, PROTOCOL, 10),
            1,
            2,
            10,
        ]);
        let fix = 0xffff - without_payload;
        let repr = Repr {
            src_port: 1,
            dst_port: 2,
            payload: &[],
        };
        let mut out = [0u8; 10];
        let payload = fix.to_be_bytes();
        let repr = Repr {
            payload: &payload,
            ..repr
        };
        repr.emit(&mut Packet::new_unchecked(&mut out[..]), &SRC, &DST);
        assert_eq!(&out[6..8], &[0xff, 0xff]);
        let packet = Packet::new_checked(&out[..]).unwrap();
        assert_eq!(Repr::parse(&packet, &SRC, &DST, true).unwrap(), repr);
    }

    #[test]
    fn bad_lengths() {
        let check = |bytes: &[u8]| Packet::new_checked(bytes).map(|_| ()).unwrap_err();
        assert_eq!(check(&DATAGRAM[..7]), Error::Truncated { need: 8, have: 7 });
        assert_eq!(check(&DATAGRAM[..12]), Error::BadLength(13));
        let mut bytes = DATAGRAM;
        bytes[5] = 7;
        assert_eq!(check(&bytes), Error::BadLength(7));
        // Trailing bytes past the length field are not payload.
        let mut long = [0u8; 20];
        long[..13].copy_from_slice(&DATAGRAM);
        assert_eq!(Packet::new_checked(&long[..]).unwrap().payload(), b"hello");
    }
}
