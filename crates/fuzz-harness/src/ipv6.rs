//! `ipv6`: arbitrary bytes as an IPv6 packet. The fixed header, the extension-header
//! walk and the options and fragment headers it meets must parse or fail with an
//! error, never panic; what parses re-emits to bytes that parse the same.
//!
//! Checks: a quoted (possibly cut) packet's header parses within the input;
//! `Repr::parse(emit(parse(x))) == parse(x)`; a walk that succeeds ends within
//! the packet, and a pointer it reports lies within it; every options header on the
//! way round-trips through `OptionsRepr` (Router Alert kept), every fragment header
//! through `FragmentRepr`.

use impnet_wire::ipv6::{self, NextHeader};
use impnet_wire::ipv6ext::{self, ExtHeader, FragmentHeader, FragmentRepr, OptionsRepr, WalkError};

/// Run one input.
pub fn run(data: &[u8]) {
    if let Ok((repr, payload)) = ipv6::Repr::parse_quoted(data) {
        assert!(
            payload.len() <= repr.payload_len && payload.len() + ipv6::HEADER_LEN <= data.len()
        );
    }
    let Ok(packet) = ipv6::Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.payload(), packet.flow_label(), packet.dscp());
    let repr = ipv6::Repr::parse(&packet).expect("a checked packet parses");
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ipv6::Packet::new_unchecked(&mut out[..]));
    let again = ipv6::Packet::new_checked(&out[..]).expect("an emitted header checks");
    assert_eq!(ipv6::Repr::parse(&again), Ok(repr));

    let bytes = packet.packet();
    match ipv6ext::walk(bytes) {
        Ok(walk) => {
            assert!(walk.offset <= bytes.len(), "walk past the end: {walk:?}");
            assert!(walk.next_header_offset < walk.offset.max(7));
            if let Some((at, fragment)) = walk.fragment {
                fragment_round_trip(&bytes[at..], fragment);
            }
        }
        Err(
            WalkError::UnrecognizedOption { pointer, .. } | WalkError::ParamProblem { pointer, .. },
        ) => {
            assert!(
                pointer < bytes.len(),
                "pointer {pointer} past {}",
                bytes.len()
            );
        }
        Err(WalkError::Malformed(_) | WalkError::TooManyHeaders) => {}
    }
    options_round_trip(bytes);
}

fn fragment_round_trip(at: &[u8], fragment: FragmentRepr) {
    let header = FragmentHeader::new_checked(at).expect("the walk checked it");
    assert_eq!(FragmentRepr::parse(&header), Ok(fragment));
    let mut out = [0u8; ipv6ext::FRAGMENT_HEADER_LEN];
    fragment.emit(&mut FragmentHeader::new_unchecked(&mut out[..]));
    assert_eq!(
        FragmentRepr::parse(&FragmentHeader::new_checked(&out[..]).unwrap()),
        Ok(fragment)
    );
}

/// The first header after the fixed one, if it is an options header.
fn options_round_trip(bytes: &[u8]) {
    let first = NextHeader::from(bytes[6]);
    if !matches!(first, NextHeader::HopByHop | NextHeader::DstOptions) {
        return;
    }
    let Ok(header) = ExtHeader::new_checked(&bytes[ipv6::HEADER_LEN..]) else {
        return;
    };
    let Ok(repr) = OptionsRepr::parse(&header) else {
        return;
    };
    let mut out = [0u8; 8];
    repr.emit(&mut ExtHeader::new_unchecked(&mut out[..]));
    assert_eq!(
        OptionsRepr::parse(&ExtHeader::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
}
