//! Forwarding what a device offloaded (`RxOffload`, `forward_offload.rs`): a large TCP
//! segment leaves whole with its segment size where the next link takes TSO, is cut at
//! that size (byte for byte as a device would) where it does not, and draws
//! fragmentation needed where its segments do not fit; partial checksums are kept or
//! completed as the next device needs.

use alloc::vec;
use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::checksum;
use impnet_wire::ipv4::{self, Cidr, Protocol};
use impnet_wire::{tcp, udp};

use crate::iface::{IfaceConfig, IfaceId, Offloads, RxOffload};
use crate::stack::{Stack, StackConfig};
use crate::testutil::secret;
use crate::time::Instant;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
const IN: IfaceId = IfaceId(0);
const OUT: IfaceId = IfaceId(1);
/// The segment size of a 1500-byte MTU with TCP timestamps.
const MSS: usize = 1448;
const TCP_HEADER: usize = 32;
const ACK: u8 = 0x10;
const PSH: u8 = 0x08;
const FIN: u8 = 0x01;
const CWR: u8 = 0x80;

/// A router between two IP-level links (10.0.1.1/24 in, 10.0.2.1/24 out): the way in
/// takes everything a TAP with offloads gives, the way out has `egress` and `mtu`.
fn router(egress: Offloads, mtu: usize) -> Stack {
    let mut stack = Stack::new(StackConfig::default(), secret(2));
    for (address, offloads, mtu) in [
        (
            Ipv4Addr::new(10, 0, 1, 1),
            Offloads::CHECKSUM.with_tso(65535),
            1500,
        ),
        (Ipv4Addr::new(10, 0, 2, 1), egress, mtu),
    ] {
        let mut config = IfaceConfig::ip(mtu).with_offloads(offloads);
        config.addrs.push(Cidr {
            address,
            prefix_len: 24,
        });
        let iface = stack.add_interface(config);
        stack.set_forwarding(iface, true);
    }
    stack
}

/// An IPv4 header (DF, identification `ident`) for `payload_len` bytes of `protocol`.
fn ip_header(ttl: u8, ident: u16, protocol: Protocol, payload_len: usize) -> Vec<u8> {
    let repr = ipv4::Repr {
        src_addr: A,
        dst_addr: B,
        protocol,
        payload_len,
        ttl,
        ident,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    let mut bytes = vec![0; repr.header_len()];
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut bytes[..]));
    bytes
}

/// The payload byte at stream offset `at`.
fn byte(at: usize) -> u8 {
    (at * 7 % 251) as u8
}

/// A TCP segment from A:40000 to B:5201 with timestamps, `len` payload bytes from
/// stream offset `from`, IPv4 TTL `ttl`, identification `ident`; its checksum whole,
/// or the pseudo-header sum alone (`partial`) as a kernel hands a TSO segment over.
fn segment(ttl: u8, ident: u16, from: usize, len: usize, flags: u8, partial: bool) -> Vec<u8> {
    let mut packet = ip_header(ttl, ident, Protocol::Tcp, TCP_HEADER + len);
    let tcp_at = packet.len();
    packet.extend_from_slice(&40000u16.to_be_bytes());
    packet.extend_from_slice(&5201u16.to_be_bytes());
    packet.extend_from_slice(&(1000 + from as u32).to_be_bytes());
    packet.extend_from_slice(&2000u32.to_be_bytes());
    packet.extend_from_slice(&[0x80, flags, 0x01, 0xf6, 0, 0, 0, 0]);
    packet.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 4]);
    packet.extend((from..from + len).map(byte));
    let mut view = tcp::Packet::new_unchecked(&mut packet[tcp_at..]);
    if partial {
        let pseudo = checksum::pseudo_header_v4(&A, &B, 6, (TCP_HEADER + len) as u32);
        view.set_checksum(pseudo);
    } else {
        view.fill_checksum(&A, &B);
    }
    packet
}

/// Every packet the router has to send: (interface, bytes, segment size).
fn sent(stack: &mut Stack) -> Vec<(IfaceId, Vec<u8>, Option<u16>)> {
    let mut buf = vec![0u8; 70_000];
    let mut out = Vec::new();
    while let Some(tx) = stack.poll_transmit(Instant::from_nanos(0), &mut buf) {
        out.push((tx.iface, buf[..tx.len].to_vec(), stack.transmit_gso_size()));
    }
    out
}

const SEGMENTS: usize = 44;

fn tso_in(stack: &mut Stack, flags: u8) {
    let big = segment(64, 100, 0, SEGMENTS * MSS, flags, true);
    let rx = RxOffload {
        gso_size: Some(MSS as u16),
        partial_checksum: true,
    };
    stack.handle_frame_offloaded(Instant::from_nanos(0), IN, &big, rx);
}

#[test]
fn a_tso_segment_leaves_whole_with_its_segment_size_where_the_next_link_takes_tso() {
    let mut stack = router(Offloads::CHECKSUM.with_tso(65535), 1500);
    tso_in(&mut stack, ACK | PSH);
    let out = sent(&mut stack);
    let expected = segment(63, 100, 0, SEGMENTS * MSS, ACK | PSH, true);
    assert_eq!(out.len(), 1, "one frame, not {} segments", out.len());
    let (iface, bytes, gso) = &out[0];
    assert_eq!((*iface, *gso), (OUT, Some(MSS as u16)));
    assert!(*bytes == expected, "TTL less one, checksum left partial");
    // The next frame out is no longer a large segment.
    let small = segment(64, 101, 0, 100, ACK, true);
    stack.handle_frame_offloaded(Instant::from_nanos(0), IN, &small, RxOffload::NONE);
    assert_eq!(sent(&mut stack)[0].2, None);
}

#[test]
fn a_tso_segment_is_cut_byte_exact_where_the_next_link_takes_no_tso() {
    let mut stack = router(Offloads::NONE, 1500);
    tso_in(&mut stack, ACK | PSH | CWR);
    let out = sent(&mut stack);
    assert_eq!(out.len(), SEGMENTS);
    for (index, (iface, bytes, gso)) in out.iter().enumerate() {
        let last = index + 1 == SEGMENTS;
        let flags = ACK | if last { PSH } else { 0 } | if index == 0 { CWR } else { 0 };
        let ident = 100 + index as u16;
        let expected = segment(63, ident, index * MSS, MSS, flags, false);
        assert_eq!((*iface, *gso), (OUT, None));
        assert!(*bytes == expected, "segment {index} differs");
        assert_eq!(bytes.len(), 1500);
    }
}

#[test]
fn a_cut_tso_segment_keeps_fin_on_its_last_piece_and_partial_sums_where_the_device_sums() {
    let mut stack = router(Offloads::CHECKSUM, 1500);
    tso_in(&mut stack, ACK | FIN);
    let out = sent(&mut stack);
    assert_eq!(out.len(), SEGMENTS);
    for (index, (_, bytes, _)) in out.iter().enumerate() {
        let flags = if index + 1 == SEGMENTS {
            ACK | FIN
        } else {
            ACK
        };
        let expected = segment(63, 100 + index as u16, index * MSS, MSS, flags, true);
        assert!(*bytes == expected, "segment {index} differs");
    }
}

#[test]
fn a_tso_segment_whose_segments_do_not_fit_draws_fragmentation_needed() {
    let mut stack = router(Offloads::CHECKSUM.with_tso(65535), 1400);
    tso_in(&mut stack, ACK);
    let out = sent(&mut stack);
    assert_eq!(out.len(), 1, "only the ICMP error: {out:?}");
    let (iface, bytes, _) = &out[0];
    let packet = ipv4::Packet::new_checked(&bytes[..]).unwrap();
    let icmp = &bytes[packet.header_len()..];
    assert_eq!(*iface, IN);
    assert_eq!((packet.dst_addr(), icmp[0], icmp[1]), (A, 3, 4));
    assert_eq!(
        u16::from_be_bytes([icmp[6], icmp[7]]),
        1400,
        "the next-hop MTU"
    );
    assert_eq!(stack.stats().forward.frag_needed, 1);
}

#[test]
fn without_a_segment_size_a_large_segment_is_too_big_as_before() {
    let mut stack = router(Offloads::CHECKSUM.with_tso(65535), 1500);
    let big = segment(64, 100, 0, 4 * MSS, ACK, true);
    let rx = RxOffload {
        gso_size: None,
        partial_checksum: true,
    };
    stack.handle_frame_offloaded(Instant::from_nanos(0), IN, &big, rx);
    let out = sent(&mut stack);
    assert_eq!((out.len(), out[0].0), (1, IN));
    assert_eq!(stack.stats().forward.frag_needed, 1);
}

/// A UDP datagram from A to B, its checksum whole or partial.
fn datagram(partial: bool) -> Vec<u8> {
    let payload = [0x5a; 300];
    let mut packet = ip_header(64, 7, Protocol::Udp, 8 + payload.len());
    let udp_at = packet.len();
    let len = (8 + payload.len()) as u16;
    packet.extend_from_slice(&5000u16.to_be_bytes());
    packet.extend_from_slice(&53u16.to_be_bytes());
    packet.extend_from_slice(&len.to_be_bytes());
    packet.extend_from_slice(&[0, 0]);
    packet.extend_from_slice(&payload);
    let mut view = udp::Packet::new_unchecked(&mut packet[udp_at..]);
    if partial {
        view.set_checksum(checksum::pseudo_header_v4(&A, &B, 17, u32::from(len)));
    } else {
        view.fill_checksum(&A, &B);
    }
    packet
}

#[test]
fn partial_checksums_stay_partial_where_the_device_completes_them_and_are_completed_elsewhere() {
    let ttl = |mut p: Vec<u8>| {
        let mut view = ipv4::Packet::new_unchecked(&mut p[..]);
        view.set_ttl(63);
        view.fill_checksum();
        p
    };
    let cases = [
        // (arrives partial, the way out completes checksums, leaves partial)
        (true, true, true),
        (true, false, false),
        (false, true, true),
        (false, false, false),
    ];
    for (arrives, completes, leaves) in cases {
        let offloads = if completes {
            Offloads::CHECKSUM
        } else {
            Offloads::NONE
        };
        let mut stack = router(offloads, 1500);
        let rx = RxOffload {
            gso_size: None,
            partial_checksum: arrives,
        };
        stack.handle_frame_offloaded(Instant::from_nanos(0), IN, &datagram(arrives), rx);
        let out = sent(&mut stack);
        assert_eq!(out.len(), 1);
        assert!(
            out[0].1 == ttl(datagram(leaves)),
            "arrives partial {arrives}, device completes {completes}"
        );
        let tcp = segment(64, 9, 0, 500, ACK, arrives);
        stack.handle_frame_offloaded(Instant::from_nanos(0), IN, &tcp, rx);
        let out = sent(&mut stack);
        assert!(out[0].1 == segment(63, 9, 0, 500, ACK, leaves));
    }
}

/// Large segments forwarded one after another, and several queued at once, each leave
/// byte for byte as they came (TTL less one), a shorter one after a longer one too:
/// the 64 KiB buffers the pool keeps for them (`BufferPool::take_for`) carry nothing
/// over from the segment before. Once one round has gone, the next allocates none:
/// the pool holds buffers of a segment's size, and no more of them than it keeps.
#[test]
fn large_segments_forwarded_in_a_row_reuse_kept_buffers_and_arrive_intact() {
    let mut stack = router(Offloads::CHECKSUM.with_tso(65535), 1500);
    let rx = RxOffload {
        gso_size: Some(MSS as u16),
        partial_checksum: true,
    };
    let lengths = [SEGMENTS * MSS, 12 * MSS, SEGMENTS * MSS - 7, 30 * MSS];
    for (round, queued) in [1, 1, 3, 12].into_iter().enumerate() {
        let mut expected = Vec::new();
        for index in 0..queued {
            let len = lengths[(round + index) % lengths.len()];
            let (ident, from) = ((round * 16 + index) as u16, round * 1000 + index * 7);
            let big = segment(64, ident, from, len, ACK, true);
            stack.handle_frame_offloaded(Instant::from_nanos(0), IN, &big, rx);
            expected.push(segment(63, ident, from, len, ACK, true));
        }
        let out = sent(&mut stack);
        assert_eq!(out.len(), queued, "round {round}: one frame a segment");
        for (index, ((iface, bytes, gso), want)) in out.iter().zip(&expected).enumerate() {
            assert_eq!((*iface, *gso), (OUT, Some(MSS as u16)), "round {round}");
            assert!(
                bytes == want,
                "round {round}, segment {index}: bytes changed"
            );
        }
        let large = stack.pool.len();
        assert!(large >= 1, "round {round}: the segment's buffer is kept");
        assert!(
            stack.pool.cached_bytes() <= 8 * 66 * 1024,
            "round {round}: at most 8 large buffers kept, not {} bytes",
            stack.pool.cached_bytes()
        );
    }
}
