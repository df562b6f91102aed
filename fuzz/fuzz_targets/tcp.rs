//! TCP: whatever parses (checksum unchecked) re-emits to a segment that parses the same
//! with its checksum verified. Emitted options are canonical: compare against
//! `Options::as_emitted` (SACK blocks that do not fit beside SYN options are dropped).
#![no_main]

use std::net::Ipv4Addr;

use impnet_wire::tcp::{Packet, Repr};
use libfuzzer_sys::fuzz_target;

const SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DST: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.options(), packet.payload(), packet.segment_len());
    let _ = Repr::parse(&packet, &SRC, &DST, true);
    let Ok(repr) = Repr::parse(&packet, &SRC, &DST, false) else {
        return;
    };
    assert!(repr.header_len() <= 60 && repr.header_len() % 4 == 0);
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]), &SRC, &DST, true);
    let again = Packet::new_checked(&out[..]).expect("emitted segment checks");
    let expected = Repr {
        options: repr.options.as_emitted(),
        ..repr
    };
    assert_eq!(Repr::parse(&again, &SRC, &DST, true), Ok(expected));
});
