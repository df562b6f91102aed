use super::*;
extern crate std;
use std::vec::Vec;

use crate::ipv6;

const ECHO_REQUEST: &[u8] = include_bytes!("../../tests/data/echo_request.bin");
const ECHO_REPLY: &[u8] = include_bytes!("../../tests/data/echo_reply.bin");
/// UDP to a closed port of 2001:db8::b, and its port unreachable.
const PORT_UNREACHABLE: &[u8] = include_bytes!("../../tests/data/port_unreachable.bin");
/// A 1462-byte echo request hit a 1280-byte link: the error is 1280 bytes long.
const PACKET_TOO_BIG: &[u8] = include_bytes!("../../tests/data/packet_too_big.bin");
/// An echo request with hop limit 1 reached the router.
const TIME_EXCEEDED: &[u8] = include_bytes!("../../tests/data/time_exceeded.bin");

/// The header and the ICMPv6 message of a captured packet.
fn split(packet: &[u8]) -> (ipv6::Repr, &[u8]) {
    let view = ipv6::Packet::new_checked(packet).unwrap();
    let repr = ipv6::Repr::parse(&view).unwrap();
    assert_eq!(repr.next_header, ipv6::NextHeader::Icmpv6);
    (repr, &packet[ipv6::HEADER_LEN..])
}

/// Parses a captured message, checks the Repr, and checks that emitting it gives the
/// captured bytes back.
fn round_trip(packet: &[u8], expected: &Repr<'_>) {
    let (ip, message) = split(packet);
    let view = Packet::new_checked(message).unwrap();
    assert!(view.verify_checksum(&ip.src_addr, &ip.dst_addr));
    let repr = Repr::parse(&view, &ip.src_addr, &ip.dst_addr).unwrap();
    assert_eq!(&repr, expected);
    assert_eq!(repr.buffer_len(), message.len());
    let mut out = std::vec![0xa5u8; repr.buffer_len()];
    repr.emit(
        &mut Packet::new_unchecked(&mut out[..]),
        &ip.src_addr,
        &ip.dst_addr,
    );
    assert_eq!(out, message);
}

#[test]
fn captured_echo() {
    let data = [0, 1, 2, 3];
    round_trip(
        ECHO_REQUEST,
        &Repr::EchoRequest {
            ident: 0x08f3,
            seq_no: 1,
            data: &data,
        },
    );
    round_trip(
        ECHO_REPLY,
        &Repr::EchoReply {
            ident: 0x08f3,
            seq_no: 1,
            data: &data,
        },
    );
}

#[test]
fn captured_errors() {
    // The port unreachable quotes the whole 58-byte UDP datagram.
    let quoted = &PORT_UNREACHABLE[48..];
    assert_eq!(quoted.len(), 50);
    assert_eq!(&quoted[24..40], &PORT_UNREACHABLE[8..24]);
    round_trip(
        PORT_UNREACHABLE,
        &Repr::DstUnreachable {
            reason: DstUnreachable::PortUnreachable,
            invoking: quoted,
        },
    );
    // Packet Too Big quotes as much as fits in 1280 bytes: 1232.
    assert_eq!(PACKET_TOO_BIG.len(), ipv6::MIN_MTU);
    round_trip(
        PACKET_TOO_BIG,
        &Repr::PacketTooBig {
            mtu: 1280,
            invoking: &PACKET_TOO_BIG[48..],
        },
    );
    assert_eq!(PACKET_TOO_BIG[48..].len(), MAX_INVOKING_LEN);
    round_trip(
        TIME_EXCEEDED,
        &Repr::TimeExceeded {
            reason: TimeExceeded::HopLimitExceeded,
            invoking: &TIME_EXCEEDED[48..],
        },
    );
}

#[test]
fn error_quotes_at_most_the_minimum_mtu() {
    let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let dst: Ipv6Addr = "2001:db8::a".parse().unwrap();
    let big = std::vec![0x60u8; 1500];
    let repr = Repr::ParamProblem {
        reason: ParamProblem::UnrecognizedNextHeader,
        pointer: 40,
        invoking: &big,
    };
    assert_eq!(repr.buffer_len(), ipv6::MIN_MTU - ipv6::HEADER_LEN);
    let mut out = std::vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]), &src, &dst);
    assert_eq!(&out[..8], &[4, 1, out[2], out[3], 0, 0, 0, 40]);
    let view = Packet::new_checked(&out[..]).unwrap();
    assert_eq!(view.pointer(), 40);
    assert_eq!(
        Repr::parse(&view, &src, &dst),
        Ok(Repr::ParamProblem {
            reason: ParamProblem::UnrecognizedNextHeader,
            pointer: 40,
            invoking: &big[..MAX_INVOKING_LEN],
        })
    );
    assert_eq!(invoking_len(&big), MAX_INVOKING_LEN);
    assert_eq!(invoking_len(&big[..100]), 100);
    assert_eq!(
        std::format!("{}", Repr::parse(&view, &src, &dst).unwrap()),
        "ICMPv6 parameter problem UnrecognizedNextHeader at 40"
    );
}

#[test]
fn errors() {
    let (ip, message) = split(ECHO_REQUEST);
    let (src, dst) = (ip.src_addr, ip.dst_addr);
    assert_eq!(
        Packet::new_checked(&message[..7]).unwrap_err(),
        Error::Truncated { need: 8, have: 7 }
    );
    // The checksum covers the pseudo-header: another destination fails it.
    let view = Packet::new_checked(message).unwrap();
    assert_eq!(Repr::parse(&view, &src, &src), Err(Error::BadChecksum));
    let mut bad = message.to_vec();
    bad[11] ^= 1;
    assert_eq!(
        Repr::parse(&Packet::new_checked(&bad[..]).unwrap(), &src, &dst),
        Err(Error::BadChecksum)
    );
    // An echo with code 1, and an unknown informational type (checksums fixed).
    let fixed = |mut bytes: Vec<u8>| {
        Packet::new_unchecked(&mut bytes[..]).fill_checksum(&src, &dst);
        bytes
    };
    let mut code = message.to_vec();
    code[1] = 1;
    let code = fixed(code);
    assert_eq!(
        Repr::parse(&Packet::new_checked(&code[..]).unwrap(), &src, &dst),
        Err(Error::BadField("code"))
    );
    let mut unknown = message.to_vec();
    unknown[0] = 200;
    let unknown = fixed(unknown);
    let view = Packet::new_checked(&unknown[..]).unwrap();
    assert!(matches!(
        Repr::parse(&view, &src, &dst),
        Err(Error::Unsupported(_))
    ));
    assert!(!view.msg_type().is_error());
    assert!(Message::from(100).is_error());
}

#[test]
fn numbers() {
    for n in 0..=255u8 {
        assert_eq!(u8::from(Message::from(n)), n);
        assert_eq!(u8::from(DstUnreachable::from(n)), n);
        assert_eq!(u8::from(TimeExceeded::from(n)), n);
        assert_eq!(u8::from(ParamProblem::from(n)), n);
    }
    assert_eq!(Message::from(135), Message::NeighborSolicit);
    assert_eq!(ParamProblem::from(3), ParamProblem::IncompleteHeaderChain);
}
