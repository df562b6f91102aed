use proptest::prelude::*;

use super::*;

const ACK: u8 = 0x10;
const ECE: u8 = 0x40;

/// One TCP segment to build, with correct lengths and checksums.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub(crate) framing: Framing,
    pub(crate) v6: bool,
    pub(crate) seq: u32,
    pub(crate) flags: u8,
    pub(crate) options: Vec<u8>,
    pub(crate) ident: u16,
    pub(crate) payload: Vec<u8>,
}

impl Spec {
    pub(crate) fn new(payload: usize) -> Spec {
        Spec {
            framing: Framing::Ethernet,
            v6: false,
            seq: 1000,
            flags: ACK,
            options: vec![],
            ident: 7,
            payload: (0..payload).map(|i| (i * 7 + 3) as u8).collect(),
        }
    }
}

/// The frame for `spec`: checksums by the plain RFC 1071 loop (an oracle apart from
/// the code under test).
pub(crate) fn build(spec: &Spec) -> Vec<u8> {
    let mut frame = Vec::new();
    if spec.framing == Framing::Ethernet {
        frame.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
        frame.extend_from_slice(if spec.v6 { &[0x86, 0xdd] } else { &[8, 0] });
    }
    let ip = frame.len();
    let tcp_len = 20 + spec.options.len() + spec.payload.len();
    if spec.v6 {
        frame.extend_from_slice(&[0x60, 0, 0, 0]);
        frame.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        frame.extend_from_slice(&[6, 64]);
        frame.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        frame.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    } else {
        frame.extend_from_slice(&[0x45, 0]);
        frame.extend_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
        frame.extend_from_slice(&spec.ident.to_be_bytes());
        frame.extend_from_slice(&[0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        let sum = !checksum::data_simple(&frame[ip..ip + 20]);
        frame[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
    }
    let tcp = frame.len();
    frame.extend_from_slice(&[0x13, 0x89, 0xc0, 0x01]);
    frame.extend_from_slice(&spec.seq.to_be_bytes());
    frame.extend_from_slice(&0x1234_5678u32.to_be_bytes());
    frame.push((((20 + spec.options.len()) / 4) << 4) as u8);
    frame.push(spec.flags);
    frame.extend_from_slice(&[0x10, 0, 0, 0, 0, 0]);
    frame.extend_from_slice(&spec.options);
    frame.extend_from_slice(&spec.payload);
    let seg = parse(spec.framing, &frame).expect("a TCP segment");
    let pseudo = pseudo_header(&frame, &seg, tcp_len);
    let sum = !checksum::combine(&[pseudo, checksum::data_simple(&frame[tcp..])]);
    frame[tcp + 16..tcp + 18].copy_from_slice(&sum.to_be_bytes());
    frame
}

/// A train of segments of `mss` bytes each but the last (`last` bytes), in order.
pub(crate) fn train(first: &Spec, mss: usize, count: usize, last: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|n| {
            let len = if n + 1 == count { last } else { mss };
            let mut spec = first.clone();
            spec.seq = first.seq.wrapping_add((n * mss) as u32);
            spec.ident = first.ident.wrapping_add(n as u16);
            spec.payload = (0..len).map(|i| (n * 31 + i * 7) as u8).collect();
            if n > 0 {
                spec.flags &= !CWR;
            }
            if n + 1 < count {
                spec.flags &= !PSH;
            }
            spec.payload.truncate(len);
            build(&spec)
        })
        .collect()
}

pub(crate) fn refs(frames: &[Vec<u8>]) -> Vec<&[u8]> {
    frames.iter().map(Vec::as_slice).collect()
}

fn valid(framing: Framing, frame: &[u8]) -> bool {
    parse(framing, frame).is_some_and(|s| checksums_hold(frame, &s))
}

#[test]
fn a_train_merges_into_one_valid_frame() {
    let frames = train(&Spec::new(0), 1000, 5, 300);
    let merged = coalesce(Framing::Ethernet, &refs(&frames), Checksums::Verify);
    assert_eq!(merged.len(), 1);
    let seg = parse(Framing::Ethernet, &merged[0]).expect("TCP");
    assert_eq!(seg.payload_len(), 4300);
    assert_eq!(seg.seq, 1000);
    assert!(valid(Framing::Ethernet, &merged[0]));
    let payload: Vec<u8> = frames.iter().flat_map(|f| f[54..].to_vec()).collect();
    assert_eq!(&merged[0][54..], &payload[..]);
}

#[test]
fn odd_payload_lengths_keep_the_checksum_right() {
    let frames = train(&Spec::new(0), 999, 4, 3);
    let merged = coalesce(Framing::Ethernet, &refs(&frames), Checksums::Verify);
    assert_eq!(merged.len(), 1);
    assert!(valid(Framing::Ethernet, &merged[0]));
}

#[test]
fn what_breaks_a_train_is_not_merged() {
    let good = train(&Spec::new(0), 500, 2, 500);
    let merges = |second: Vec<u8>| {
        let frames = [good[0].clone(), second];
        coalesce(Framing::Ethernet, &refs(&frames), Checksums::Verify).len() == 1
    };
    assert!(merges(good[1].clone()));
    let mut spec = Spec::new(500);
    spec.seq = 1500;
    spec.ident = 8;
    assert!(merges(build(&spec)), "the same segment built again merges");
    for (what, change) in [
        ("a gap", &(|s: &mut Spec| s.seq += 1) as &dyn Fn(&mut Spec)),
        ("FIN", &|s: &mut Spec| s.flags |= FIN),
        ("SYN", &|s: &mut Spec| s.flags |= SYN),
        ("RST", &|s: &mut Spec| s.flags |= RST),
        ("URG", &|s: &mut Spec| s.flags |= URG),
        ("CWR", &|s: &mut Spec| s.flags |= CWR),
        ("ECE change", &|s: &mut Spec| s.flags |= ECE),
        ("other options", &|s: &mut Spec| {
            s.options = vec![1, 1, 1, 1]
        }),
        ("IP ID jump", &|s: &mut Spec| s.ident = 20),
        ("longer than the first", &|s: &mut Spec| s.payload.push(0)),
        ("no payload", &|s: &mut Spec| s.payload.clear()),
    ] {
        let mut spec = Spec::new(500);
        spec.seq = 1500;
        spec.ident = 8;
        change(&mut spec);
        assert!(!merges(build(&spec)), "{what} merged");
    }
    let mut bad = good[1].clone();
    bad[60] ^= 1;
    assert!(!merges(bad.clone()), "a bad checksum merged");
    let frames = [good[0].clone(), bad];
    let trusted = coalesce(Framing::Ethernet, &refs(&frames), Checksums::Trusted);
    assert_eq!(trusted.len(), 1, "trusted checksums are not looked at");
}

#[test]
fn deferred_checksums_hold_in_the_merged_frame_only_if_every_part_held() {
    let mut frames = train(&Spec::new(0), 1001, 4, 77);
    let merged = coalesce(Framing::Ethernet, &refs(&frames), Checksums::Deferred);
    assert_eq!(merged.len(), 1);
    assert!(valid(Framing::Ethernet, &merged[0]));
    let verified = coalesce(Framing::Ethernet, &refs(&frames), Checksums::Verify);
    assert_eq!(merged, verified);
    for (frame, at) in [(1, 54 + 500), (3, 54 + 76), (2, 54 - 20 + 4)] {
        let mut damaged = frames.clone();
        damaged[frame][at] ^= 0x10;
        let merged = coalesce(Framing::Ethernet, &refs(&damaged), Checksums::Deferred);
        assert!(
            merged.iter().any(|f| !valid(Framing::Ethernet, f)),
            "damage in frame {frame} at {at} passed"
        );
    }
    // A bad IPv4 header checksum keeps the part out (its header is not in the merge).
    frames[2][14 + 10] ^= 1;
    let merged = coalesce(Framing::Ethernet, &refs(&frames), Checksums::Deferred);
    assert_eq!(merged.len(), 3);
}

#[test]
fn push_ends_a_train_and_a_short_segment_too() {
    let mut spec = Spec::new(0);
    spec.flags |= PSH;
    let mut frames = train(&spec, 800, 3, 800);
    frames.extend(train(
        &Spec {
            seq: 1000 + 2400,
            ident: 10,
            ..Spec::new(0)
        },
        800,
        1,
        800,
    ));
    let merged = coalesce(Framing::Ethernet, &refs(&frames), Checksums::Verify);
    assert_eq!(merged.len(), 2, "PSH on the third ends the train");
    assert_eq!(merged[0][54 - 20 + 13], ACK | PSH);
    let short = train(&Spec::new(0), 800, 2, 100);
    let next = build(&Spec {
        seq: 1900,
        ident: 9,
        ..Spec::new(100)
    });
    let frames = [short[0].clone(), short[1].clone(), next];
    let merged = coalesce(Framing::Ethernet, &refs(&frames), Checksums::Verify);
    assert_eq!(merged.len(), 2, "a short segment ends the train");
}

#[test]
fn flows_interleave_and_others_pass_in_place() {
    let a = train(&Spec::new(0), 600, 3, 600);
    let b = train(
        &Spec {
            v6: true,
            ..Spec::new(0)
        },
        600,
        2,
        600,
    );
    let arp = vec![0xffu8; 42];
    let frames = [
        a[0].clone(),
        b[0].clone(),
        a[1].clone(),
        arp.clone(),
        b[1].clone(),
        a[2].clone(),
    ];
    let merged = coalesce(Framing::Ethernet, &refs(&frames), Checksums::Verify);
    assert_eq!(merged.len(), 3);
    assert_eq!(
        parse(Framing::Ethernet, &merged[0]).unwrap().payload_len(),
        1800
    );
    assert_eq!(
        parse(Framing::Ethernet, &merged[1]).unwrap().payload_len(),
        1200
    );
    assert_eq!(merged[2], arp);
    assert!(merged[..2].iter().all(|f| valid(Framing::Ethernet, f)));
}

#[test]
fn segment_cuts_like_gso() {
    let mut spec = Spec::new(3000);
    spec.flags = ACK | PSH | FIN | CWR;
    let frame = build(&spec);
    let cut = segment(Framing::Ethernet, &frame, 1500).expect("cut");
    assert_eq!(cut.len(), 3);
    let segs: Vec<Segment> = cut
        .iter()
        .map(|f| parse(Framing::Ethernet, f).unwrap())
        .collect();
    assert_eq!(
        segs.iter().map(Segment::payload_len).collect::<Vec<_>>(),
        [1460, 1460, 80]
    );
    assert_eq!(
        segs.iter().map(|s| s.seq).collect::<Vec<_>>(),
        [1000, 2460, 3920]
    );
    assert_eq!(segs.iter().map(|s| s.ident).collect::<Vec<_>>(), [7, 8, 9]);
    assert_eq!(
        segs.iter().map(|s| s.flags).collect::<Vec<_>>(),
        [ACK | CWR, ACK, ACK | PSH | FIN]
    );
    assert!(
        cut.iter()
            .all(|f| valid(Framing::Ethernet, f) && f.len() == 1514 || f == &cut[2])
    );
    assert_eq!(
        segment(Framing::Ethernet, &build(&Spec::new(1460)), 1500),
        None,
        "it fits"
    );
    assert_eq!(segment(Framing::Ip, &[0x45; 30], 20), None);
}

fn options() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(vec![]),
        any::<[u8; 8]>().prop_map(|ts| [&[1, 1, 8, 10][..], &ts].concat()),
        (any::<[u8; 8]>(), any::<[u8; 16]>()).prop_map(|(ts, sack)| [
            &[1, 1, 8, 10][..],
            &ts,
            &[1, 1, 5, 18],
            &sack
        ]
        .concat()),
        (0usize..=10).prop_flat_map(|words| proptest::collection::vec(any::<u8>(), words * 4)),
    ]
}

fn first_spec() -> impl Strategy<Value = Spec> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<u32>(),
        any::<u16>(),
        options(),
        0u8..8,
    )
        .prop_map(|(ethernet, v6, seq, ident, options, extra)| Spec {
            framing: if ethernet {
                Framing::Ethernet
            } else {
                Framing::Ip
            },
            v6,
            seq,
            // PSH (kept on the last only), CWR (on the first only), ECE.
            flags: ACK
                | [0, PSH][usize::from(extra & 1)]
                | [0, CWR][usize::from(extra >> 1 & 1)]
                | [0, ECE][usize::from(extra >> 2)],
            options,
            ident,
            payload: vec![],
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// A train coalesces into one frame, and segmenting that at the train's MSS gives
    /// back the same frames: bytes, flags and options.
    #[test]
    fn coalesce_then_segment_gives_the_train_back(
        first in first_spec(),
        mss in 1usize..1500,
        count in 1usize..45,
        last_fraction in 0.0f64..1.0,
    ) {
        let headers = if first.v6 { 40 } else { 20 } + 20 + first.options.len();
        let count = count.min((MAX_MERGED_IP_LEN - headers) / mss).max(1);
        let last = ((mss as f64 * last_fraction) as usize).clamp(1, mss);
        let frames = train(&first, mss, count, last);
        let merged = coalesce(first.framing, &refs(&frames), Checksums::Verify);
        prop_assert_eq!(merged.len(), 1);
        prop_assert!(valid(first.framing, &merged[0]));
        match segment(first.framing, &merged[0], headers + mss) {
            Some(cut) => prop_assert_eq!(cut, frames),
            None => prop_assert_eq!(&merged, &frames),
        }
    }

    /// A large frame cut by `segment` comes back whole from `coalesce`.
    #[test]
    fn segment_then_coalesce_gives_the_frame_back(
        first in first_spec(),
        len in 1usize..65000,
        mtu in 100usize..9000,
    ) {
        let headers = if first.v6 { 40 } else { 20 } + 20 + first.options.len();
        let len = len.min(MAX_MERGED_IP_LEN - headers);
        let frame = build(&Spec { payload: (0..len).map(|i| (i % 251) as u8).collect(), ..first.clone() });
        let Some(cut) = segment(first.framing, &frame, mtu) else {
            prop_assert!(frame.len() - first.framing.header_len() <= mtu);
            return Ok(());
        };
        prop_assert!(cut.iter().all(|f| f.len() - first.framing.header_len() <= mtu));
        prop_assert!(cut.iter().all(|f| valid(first.framing, f)));
        let merged = coalesce(first.framing, &refs(&cut), Checksums::Verify);
        prop_assert_eq!(merged, vec![frame]);
    }

    /// A valid train with bytes changed anywhere (headers included): no panic, in
    /// either direction, whatever the checksums say.
    #[test]
    fn damaged_trains_never_panic(
        first in first_spec(),
        damage in proptest::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 1..6),
        mtu in 0usize..2000,
    ) {
        let mut frames = train(&first, 300, 5, 200);
        for (frame, at, value) in damage {
            let frame = &mut frames[frame % 5];
            let at = at % frame.len();
            frame[at] = value;
        }
        for checksums in [Checksums::Trusted, Checksums::Verify, Checksums::Deferred] {
            let out = coalesce(first.framing, &refs(&frames), checksums);
            prop_assert!(!out.is_empty() && out.len() <= frames.len());
            for frame in &out {
                let _ = segment(first.framing, frame, mtu);
            }
        }
    }

    /// Any bytes: no panic, and what is not merged comes out as it went in.
    #[test]
    fn arbitrary_frames_never_panic(
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 0..8),
        ip in any::<bool>(),
        mtu in 0usize..200,
    ) {
        let framing = if ip { Framing::Ip } else { Framing::Ethernet };
        let out = coalesce(framing, &refs(&frames), Checksums::Trusted);
        prop_assert!(out.len() <= frames.len());
        for frame in &frames {
            let _ = segment(framing, frame, mtu);
        }
        let out = coalesce(framing, &refs(&frames), Checksums::Verify);
        prop_assert!(out.len() <= frames.len());
    }
}

#[test]
fn wire_frames_counts_the_frames_segment_cuts() {
    for (framing, v6) in [
        (Framing::Ethernet, false),
        (Framing::Ethernet, true),
        (Framing::Ip, false),
    ] {
        let mut spec = Spec::new(10_000);
        spec.framing = framing;
        spec.v6 = v6;
        spec.options = vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        let frame = build(&spec);
        let wire = wire_frames(framing, &frame, 1448).expect("a super-segment");
        let cut = segment(framing, &frame, wire.ip_mtu).expect("cut");
        assert_eq!(wire.count, cut.len());
        assert_eq!(wire.count, 10_000usize.div_ceil(1448));
        assert_eq!(wire.wire_bytes, cut.iter().map(Vec::len).sum::<usize>());
        assert_eq!(wire.largest, cut[0].len());
        assert_eq!(wire.header_len, frame.len() - 10_000);
        assert!(cut[..cut.len() - 1].iter().all(|f| f.len() == wire.largest));
        assert!(cut.iter().all(|f| valid(framing, f)));
    }
}

#[test]
fn wire_frames_leaves_single_frames_and_other_segments_alone() {
    let frame = build(&Spec::new(1448));
    assert_eq!(wire_frames(Framing::Ethernet, &frame, 1448), None);
    assert!(wire_frames(Framing::Ethernet, &frame, 1447).is_some());
    assert_eq!(wire_frames(Framing::Ethernet, &frame, 0), None);
    let mut syn = Spec::new(5000);
    syn.flags |= SYN;
    assert_eq!(wire_frames(Framing::Ethernet, &build(&syn), 1000), None);
    assert_eq!(wire_frames(Framing::Ethernet, &[0u8; 3000], 1000), None);
    assert_eq!(wire_frames(Framing::Ethernet, &frame[..30], 10), None);
}
