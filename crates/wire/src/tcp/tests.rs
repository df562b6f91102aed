use super::*;
use core::net::Ipv4Addr;

const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

// SYN 10.0.0.1:49152 > 10.0.0.2:80, seq 0x01020304, win 65535, options as FreeBSD
// sends them: mss 1460, nop, wscale 6, sackOK, TS val 100 ecr 0.
const SYN: [u8; 40] = [
    0xc0, 0x00, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xff, 0xff,
    0x6f, 0x44, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x01, 0x03, 0x03, 0x06, 0x04, 0x02, 0x08, 0x0a,
    0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0x00,
];

// The same SYN as imp writes it: the options in Linux's order (mss, sackOK TS, nop ws);
// every option moved by a multiple of 2 bytes, so the checksum is the same.
const SYN_LINUX_ORDER: [u8; 40] = [
    0xc0, 0x00, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xff, 0xff,
    0x6f, 0x44, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x64,
    0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x06,
];

// ACK|PSH 80 > 49152 seq 1000 ack 2000 win 512, nop nop TS 7 8, nop nop SACK
// {3000-4000, 5000-6000}, payload "hi".
const DATA_SACK: [u8; 54] = [
    0x00, 0x50, 0xc0, 0x00, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x00, 0x07, 0xd0, 0xd0, 0x18, 0x02, 0x00,
    0x8f, 0xb8, 0x00, 0x00, 0x01, 0x01, 0x08, 0x0a, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x08,
    0x01, 0x01, 0x05, 0x12, 0x00, 0x00, 0x0b, 0xb8, 0x00, 0x00, 0x0f, 0xa0, 0x00, 0x00, 0x13, 0x88,
    0x00, 0x00, 0x17, 0x70, 0x68, 0x69,
];

fn parse(bytes: &[u8]) -> Result<Repr<'_>> {
    Repr::parse(&Packet::new_checked(bytes)?, &SRC, &DST, true)
}

fn emit(repr: &Repr<'_>) -> [u8; 64] {
    let mut out = [0u8; 64];
    let len = repr.buffer_len();
    repr.emit(
        &mut Packet::new_unchecked(&mut out[..len]),
        &SRC,
        &DST,
        true,
    );
    out
}

#[test]
fn syn_round_trip() {
    let packet = Packet::new_checked(&SYN[..]).unwrap();
    assert_eq!(packet.header_len(), 40);
    assert!(packet.verify_checksum(&SRC, &DST));
    let repr = parse(&SYN).unwrap();
    assert_eq!(
        repr,
        Repr {
            src_port: 49152,
            dst_port: 80,
            seq: 0x0102_0304,
            ack: 0,
            flags: Flags::SYN,
            window: 65535,
            urgent: 0,
            options: Options {
                mss: Some(1460),
                window_scale: Some(6),
                sack_permitted: true,
                timestamps: Some((100, 0)),
                ..Options::default()
            },
            payload: &[],
        }
    );
    assert_eq!(repr.segment_len(), 1);
    assert_eq!(repr.buffer_len(), 40);
    assert_eq!(emit(&repr)[..40], SYN_LINUX_ORDER);
    assert_eq!(parse(&SYN_LINUX_ORDER).unwrap(), repr);
}

#[test]
fn data_with_sack_round_trip() {
    let repr = parse(&DATA_SACK).unwrap();
    assert_eq!(repr.flags, Flags::ACK | Flags::PSH);
    assert_eq!((repr.seq, repr.ack, repr.window), (1000, 2000, 512));
    assert_eq!(repr.options.timestamps, Some((7, 8)));
    assert_eq!(
        repr.options.sack(),
        &[
            SackBlock {
                left: 3000,
                right: 4000
            },
            SackBlock {
                left: 5000,
                right: 6000
            }
        ]
    );
    assert_eq!(repr.payload, b"hi");
    assert_eq!(repr.segment_len(), 2);
    assert_eq!(emit(&repr)[..54], DATA_SACK);
}

#[test]
fn linux_syn_option_order_parses() {
    // Linux: mss 1460, sackOK, TS val 1 ecr 0, nop, wscale 7.
    let options = [
        2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7,
    ];
    let parsed = Options::parse(&options).unwrap();
    assert_eq!(parsed.mss, Some(1460));
    assert_eq!(parsed.window_scale, Some(7));
    assert!(parsed.sack_permitted);
    assert_eq!(parsed.timestamps, Some((1, 0)));
}

#[test]
fn unknown_options_skipped_and_eol_ends() {
    // Kind 30 (MPTCP) with 4 bytes, then MSS, then EOL and garbage.
    let options = [30, 4, 0xaa, 0xbb, 2, 4, 0x05, 0xdc, 0, 0xff, 0xff, 0xff];
    let parsed = Options::parse(&options).unwrap();
    assert_eq!(
        parsed,
        Options {
            mss: Some(1500),
            ..Options::default()
        }
    );
}

// RFC 7413 §4.1.1 as Linux writes it (`tcp_options_write`): kind 34, length, cookie,
// NOP padding; a cookie request is `34 2 NOP NOP`.
#[test]
fn fast_open_round_trip() {
    let cookie = FastOpenCookie::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let options = Options {
        mss: Some(1460),
        sack_permitted: true,
        timestamps: Some((1, 0)),
        window_scale: Some(7),
        fast_open: Some(cookie),
        ..Options::default()
    };
    let mut bytes = [0u8; 40];
    let len = options.emit(&mut bytes);
    assert_eq!(len, options.buffer_len());
    assert_eq!(
        &bytes[..len],
        &[
            2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7, 34, 10, 1, 2, 3, 4, 5,
            6, 7, 8, 1, 1
        ]
    );
    assert_eq!(Options::parse(&bytes[..len]), Ok(options));
    let request = Options {
        fast_open: Some(FastOpenCookie::REQUEST),
        ..Options::default()
    };
    let len = request.emit(&mut bytes);
    assert_eq!(&bytes[..len], &[34, 2, 1, 1]);
    assert_eq!(Options::parse(&bytes[..len]), Ok(request));
    assert!(
        Options::parse(&bytes[..len])
            .unwrap()
            .fast_open
            .unwrap()
            .is_request()
    );
    // The largest: every SYN option and a 16-byte cookie fill the 40 bytes.
    let big = Options {
        fast_open: FastOpenCookie::new(&[9; 16]),
        ..options
    };
    assert_eq!(big.buffer_len(), 40);
    let len = big.emit(&mut bytes);
    assert_eq!(Options::parse(&bytes[..len]), Ok(big));
}

#[test]
fn fast_open_experimental_form_and_malformed_ones() {
    // Kind 254, length 12, magic 0xF989, an 8-byte cookie (pre-RFC Linux).
    let exp = [254, 12, 0xf9, 0x89, 1, 2, 3, 4, 5, 6, 7, 8];
    let parsed = Options::parse(&exp).unwrap();
    let cookie = FastOpenCookie::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    assert_eq!(parsed.fast_open, Some(cookie.with_experimental(true)));
    assert!(parsed.fast_open.unwrap().same_bytes(&cookie));
    // It goes back out in the form it came in, with no padding (12 bytes).
    let mut out = [0u8; 40];
    let n = parsed.emit(&mut out);
    assert_eq!((n, &out[..n]), (12, &exp[..]));
    assert_eq!(parsed.buffer_len(), 12);
    let request = FastOpenCookie::REQUEST.with_experimental(true);
    assert_eq!(
        Options::parse(&[254, 4, 0xf9, 0x89]).unwrap().fast_open,
        Some(request)
    );
    let only = Options {
        fast_open: Some(request),
        ..Options::default()
    };
    assert_eq!(only.emit(&mut out), 4);
    assert_eq!(&out[..4], &[254, 4, 0xf9, 0x89]);
    // Another experiment's magic is not Fast Open.
    assert_eq!(
        Options::parse(&[254, 4, 0x12, 0x34]).unwrap().fast_open,
        None
    );
    // Odd, too short or too long cookies are ignored as an unknown option is; the
    // options around them still count.
    for bad in [
        &[34, 3, 1, 1][..],
        &[34, 4, 1, 2, 2, 4, 5, 0xdc],
        &[34, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ] {
        let parsed = Options::parse(bad).unwrap();
        assert_eq!(parsed.fast_open, None, "{bad:?}");
    }
    assert_eq!(
        Options::parse(&[34, 4, 1, 2, 2, 4, 5, 0xdc]).unwrap().mss,
        Some(1500)
    );
    // A length past the end is an error, as for any kind; nothing panics.
    assert_eq!(
        Options::parse(&[34, 10, 1, 2]),
        Err(Error::BadOption { kind: 34, len: 10 })
    );
    for cut in 0..exp.len() {
        let _ = Options::parse(&exp[..cut]);
    }
    assert_eq!(FastOpenCookie::new(&[1, 2, 3]), None);
    assert_eq!(FastOpenCookie::new(&[0; 18]), None);
}

#[test]
fn bad_options() {
    let bad = |bytes: &[u8]| Options::parse(bytes).unwrap_err();
    assert_eq!(bad(&[2]), Error::BadOption { kind: 2, len: 0 });
    assert_eq!(bad(&[2, 1, 0, 0]), Error::BadOption { kind: 2, len: 1 });
    assert_eq!(bad(&[2, 5, 0, 0]), Error::BadOption { kind: 2, len: 5 });
    assert_eq!(bad(&[2, 3, 0, 0]), Error::BadOption { kind: 2, len: 3 });
    assert_eq!(bad(&[3, 4, 0, 0]), Error::BadOption { kind: 3, len: 4 });
    assert_eq!(bad(&[4, 3, 0, 0]), Error::BadOption { kind: 4, len: 3 });
    assert_eq!(
        bad(&[8, 8, 0, 0, 0, 0, 0, 0]),
        Error::BadOption { kind: 8, len: 8 }
    );
    assert_eq!(bad(&[5, 2, 0, 0]), Error::BadOption { kind: 5, len: 2 });
    assert_eq!(
        bad(&[5, 9, 0, 0, 0, 0, 0, 0, 0, 0]),
        Error::BadOption { kind: 5, len: 9 }
    );
    assert_eq!(bad(&[99, 0]), Error::BadOption { kind: 99, len: 0 });
    assert_eq!(bad(&[1, 1, 99]), Error::BadOption { kind: 99, len: 0 });
    // Through the whole parser.
    let mut syn = SYN;
    syn[21] = 5;
    assert_eq!(
        Repr::parse(&Packet::new_checked(&syn[..]).unwrap(), &SRC, &DST, false),
        Err(Error::BadOption { kind: 2, len: 5 })
    );
}

#[test]
fn header_errors() {
    assert_eq!(
        parse(&SYN[..19]),
        Err(Error::Truncated { need: 20, have: 19 })
    );
    assert_eq!(parse(&SYN[..39]), Err(Error::BadHeaderLen(40)));
    let mut bad = SYN;
    bad[12] = 0x40;
    assert_eq!(parse(&bad), Err(Error::BadHeaderLen(16)));
    let mut bad = SYN;
    bad[39] = 1;
    assert_eq!(parse(&bad), Err(Error::BadChecksum));
}

#[test]
fn sack_blocks_limited_by_space() {
    let block = SackBlock { left: 1, right: 2 };
    let mut options = Options {
        sack_blocks: [block; 4],
        sack_len: 4,
        ..Options::default()
    };
    assert_eq!(options.sack_blocks_emitted(), 4);
    assert_eq!(options.buffer_len(), 36);
    options.timestamps = Some((1, 2));
    assert_eq!(options.sack_blocks_emitted(), 3);
    assert_eq!(options.buffer_len(), 40);
    options.mss = Some(1460);
    options.window_scale = Some(2);
    assert_eq!(options.sack_blocks_emitted(), 2);
    options.sack_permitted = true;
    assert_eq!(options.buffer_len(), 40);
    let repr = Repr {
        options,
        ..Repr::default()
    };
    assert_eq!(repr.header_len(), 60);
    let out = emit(&repr);
    let parsed = parse(&out[..60]).unwrap();
    assert_eq!(parsed.options.sack_len, 2);
    assert_eq!(parsed.options.mss, Some(1460));
}

#[test]
fn no_checksum_when_offloaded() {
    let repr = parse(&SYN).unwrap();
    let mut out = [0xffu8; 40];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]), &SRC, &DST, false);
    assert_eq!(&out[16..18], &[0, 0]);
}

#[test]
fn display() {
    extern crate std;
    let repr = parse(&SYN).unwrap();
    assert_eq!(
        std::format!("{repr}"),
        "TCP 49152 > 80 [S] seq 16909060 win 65535 len 0 mss 1460 wscale 6 sackOK TS val 100 ecr 0"
    );
}

/// The reference `emit`: one setter per field, then options, payload and checksum.
fn emit_with_setters(repr: &Repr<'_>, buffer: &mut [u8], fill_checksum: bool) {
    let header_len = repr.header_len();
    let total = repr.buffer_len();
    let mut packet = Packet::new_unchecked(&mut buffer[..total]);
    packet.set_src_port(repr.src_port);
    packet.set_dst_port(repr.dst_port);
    packet.set_seq_number(repr.seq);
    packet.set_ack_number(repr.ack);
    packet.set_header_len(header_len);
    packet.set_flags(repr.flags);
    packet.set_window_len(repr.window);
    packet.set_checksum(0);
    packet.set_urgent_at(repr.urgent);
    repr.options.emit(packet.options_mut());
    packet.payload_mut().copy_from_slice(repr.payload);
    if fill_checksum {
        packet.fill_checksum(&SRC, &DST);
    }
}

fn any_options() -> impl proptest::strategy::Strategy<Value = Options> {
    use proptest::prelude::*;
    let block = (any::<u32>(), any::<u32>()).prop_map(|(left, right)| SackBlock { left, right });
    (
        proptest::option::of(any::<u16>()),
        proptest::option::of(0u8..15),
        any::<bool>(),
        proptest::array::uniform4(block),
        0u8..5,
        proptest::option::of((any::<u32>(), any::<u32>())),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..9)),
    )
        .prop_map(
            |(mss, window_scale, sack_permitted, sack_blocks, sack_len, timestamps, cookie)| {
                Options {
                    mss,
                    window_scale,
                    sack_permitted,
                    sack_blocks,
                    sack_len,
                    timestamps,
                    fast_open: cookie.map(|c| {
                        let even = c.len() & !1;
                        let len = if even == 2 { 0 } else { even };
                        FastOpenCookie::new(&c[..len])
                            .unwrap()
                            .with_experimental(c.len() % 2 == 1)
                    }),
                }
            },
        )
}

proptest::proptest! {
    /// The fixed-layout `emit` (and the NOP NOP TS shortcut of `Options::emit`) writes
    /// the same bytes as the field setters.
    #[test]
    fn emit_matches_setters(
        src_port: u16, dst_port: u16, seq: u32, ack: u32, flags: u8, window: u16,
        urgent: u16, options in any_options(),
        payload in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
        fill: u8, checksum: bool,
    ) {
        let repr = Repr {
            src_port, dst_port, seq, ack, flags: Flags(flags), window, urgent, options,
            payload: &payload,
        };
        let mut expected = [fill; 120];
        let mut got = [fill; 120];
        emit_with_setters(&repr, &mut expected, checksum);
        let total = repr.buffer_len();
        repr.emit(&mut Packet::new_unchecked(&mut got[..total]), &SRC, &DST, checksum);
        proptest::prop_assert_eq!(&got[..], &expected[..]);
    }

    /// The NOP NOP TS shortcut of `Options::parse` decodes what the option walk does,
    /// on random bytes and on the layouts near it.
    #[test]
    fn parse_shortcut_matches_the_walk(
        bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..41),
        ts in proptest::array::uniform8(proptest::num::u8::ANY),
        tweak in 0usize..13, value: u8,
    ) {
        proptest::prop_assert_eq!(Options::parse(&bytes), Options::parse_list(&bytes));
        let mut near = [1, 1, 8, 10, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7], 0];
        if tweak < near.len() {
            near[tweak] = value;
        }
        for len in [12, 13] {
            proptest::prop_assert_eq!(Options::parse(&near[..len]), Options::parse_list(&near[..len]));
        }
    }
}

proptest::proptest! {
    /// The direct writer for plain segments writes exactly the header `Repr::emit` does.
    #[test]
    fn plain_header_matches_repr(
        src_port: u16, dst_port: u16, seq: u32, ack: u32, flags: u8, window: u16,
        timestamps: Option<(u32, u32)>,
    ) {
        let flags = Flags(flags & !Flags::SYN.0 & !Flags::URG.0);
        let plain = PlainHeader { src_port, dst_port, seq, ack, flags, window, timestamps };
        let repr = Repr {
            src_port,
            dst_port,
            seq,
            ack,
            flags,
            window,
            options: Options { timestamps, ..Options::default() },
            ..Repr::default()
        };
        let mut direct = [0xa5u8; 64];
        let len = plain.emit(&mut direct);
        proptest::prop_assert_eq!(len, repr.header_len());
        proptest::prop_assert_eq!(len, plain.header_len());
        // `emit` fills the checksum; the plain header leaves it zero.
        let mut full = emit(&repr);
        full[16..18].fill(0);
        proptest::prop_assert_eq!(&direct[..len], &full[..len]);
    }
}
