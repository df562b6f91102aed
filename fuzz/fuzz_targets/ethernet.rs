//! Ethernet (with 802.1Q): whatever parses re-emits to a header that parses the same.
#![no_main]

use impnet_wire::ethernet::{Frame, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = Frame::new_checked(data) else {
        return;
    };
    let _ = (frame.payload(), frame.vlan_tag(), frame.outer_ethertype());
    let Ok(repr) = Repr::parse(&frame) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Frame::new_unchecked(&mut out[..]));
    let again = Repr::parse(&Frame::new_checked(&out[..]).expect("emitted frame checks"));
    assert_eq!(again, Ok(repr));
});
