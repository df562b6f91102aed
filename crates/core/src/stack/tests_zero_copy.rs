//! `tcp_send_owned` and `tcp_recv_with` through two whole stacks: byte-exact streams
//! mixing owned buffers, copied writes, lent reads with partial consumption and plain
//! reads, across loss and IP fragmentation; the all-or-nothing rule and its refusals.

use alloc::vec;
use alloc::vec::Vec;
use core::net::SocketAddrV4;

use crate::iface::Offloads;
use crate::rng::Rng;
use crate::stack::{Stack, StackConfig};
use crate::tcp::{TcpConfig, TcpError, TcpHandle, buffer::OWNED_MIN};
use crate::testutil::{IP_A, IP_B, MAC_A, MAC_B, Pair, drain};
use crate::time::Duration;

/// A and B at `mtu` with `tcp` on both, and an established connection A -> B.
fn connected(mtu: usize, tcp: &TcpConfig) -> (Pair, TcpHandle, TcpHandle) {
    connected_with(mtu, tcp, Offloads::NONE)
}

/// As [`connected`], A's device with `offloads` (B's with none: it checks every sum).
fn connected_with(mtu: usize, tcp: &TcpConfig, offloads: Offloads) -> (Pair, TcpHandle, TcpHandle) {
    let mut pair = Pair::with_mtu(mtu);
    let config = StackConfig {
        tcp: tcp.clone(),
        ..StackConfig::default()
    };
    for (stack, seed, mac, ip) in [(&mut pair.a, 1, MAC_A, IP_A), (&mut pair.b, 2, MAC_B, IP_B)] {
        *stack = Stack::new(config.clone(), crate::testutil::secret(seed));
        let mut iface = crate::iface::IfaceConfig::new(mac, mtu);
        if seed == 1 {
            iface = iface.with_offloads(offloads);
        }
        iface.addrs = vec![impnet_wire::ipv4::Cidr::new(ip, 24).expect("prefix")];
        stack.add_interface(iface);
        drain(stack, pair.now);
    }
    let listener = pair.b.tcp_listen(SocketAddrV4::new(IP_B, 80), 4).unwrap();
    let client = pair
        .a
        .tcp_connect(
            pair.now,
            SocketAddrV4::new(IP_A, 0),
            SocketAddrV4::new(IP_B, 80),
        )
        .unwrap();
    device_exchange(&mut pair);
    let server = pair.b.tcp_accept(listener).unwrap();
    (pair, client, server)
}

/// Move frames both ways until quiet, completing the TCP and UDP checksums of A's
/// unfragmented packets as a device with checksum offload does (a fragment it leaves
/// as it is: it cannot sum a datagram it sees in part).
fn device_exchange(pair: &mut Pair) {
    use impnet_wire::{ipv4, tcp, udp};
    for _ in 0..1000 {
        let from_a = drain(&mut pair.a, pair.now);
        let from_b = drain(&mut pair.b, pair.now);
        if from_a.is_empty() && from_b.is_empty() {
            return;
        }
        for mut frame in from_a {
            let header = ipv4::Packet::new_checked(&frame[14..]).ok().map(|ip| {
                let whole = !ip.more_frags() && ip.frag_offset() == 0;
                (
                    whole,
                    ip.src_addr(),
                    ip.dst_addr(),
                    ip.protocol(),
                    ip.header_len(),
                )
            });
            if let Some((true, src, dst, proto, header_len)) = header {
                let payload = &mut frame[14 + header_len..];
                match proto {
                    ipv4::Protocol::Tcp => {
                        tcp::Packet::new_unchecked(payload).fill_checksum(&src, &dst);
                    }
                    ipv4::Protocol::Udp => {
                        udp::Packet::new_unchecked(payload).fill_checksum(&src, &dst);
                    }
                    _ => {}
                }
            }
            pair.b.handle_frame(pair.now, pair.b_if, &frame);
        }
        for frame in from_b {
            pair.a.handle_frame(pair.now, pair.a_if, &frame);
        }
    }
    panic!("stacks still talking");
}

/// The stream's byte at `at`.
fn byte(at: usize) -> u8 {
    (at * 31 + at / 251) as u8
}

/// Move `total` bytes A -> B, the writer and the reader each picking at random among
/// their two calls, dropping every `drop_every`th frame from A; returns what B read.
fn transfer(mtu: usize, tcp: &TcpConfig, total: usize, drop_every: usize, seed: u64) -> Vec<u8> {
    let (mut pair, client, server) = connected(mtu, tcp);
    let mut rng = Rng::new(seed);
    let (mut written, mut frames) = (0usize, 0usize);
    let mut got = Vec::with_capacity(total);
    for _ in 0..100_000 {
        if got.len() == total {
            break;
        }
        // The writer: owned buffers of 1 byte to 40 KiB, or copied slices.
        for _ in 0..4 {
            if written == total {
                break;
            }
            let len = (rng.in_range(1, 40_000) as usize).min(total - written);
            let data: Vec<u8> = (written..written + len).map(byte).collect();
            if rng.next_u64().is_multiple_of(2) {
                match pair.a.tcp_send_owned(pair.now, client, data) {
                    Ok(()) => written += len,
                    Err(e) => {
                        assert_eq!(e.error, TcpError::WouldBlock, "seed {seed}");
                        assert_eq!(
                            e.data.len(),
                            len,
                            "seed {seed}: the buffer comes back whole"
                        );
                        assert_eq!(e.data[0], byte(written), "seed {seed}: untouched");
                        break;
                    }
                }
            } else {
                match pair.a.tcp_send(pair.now, client, &data) {
                    Ok(n) => written += n,
                    Err(TcpError::WouldBlock) => break,
                    Err(e) => panic!("seed {seed}: send: {e}"),
                }
            }
        }
        pair.exchange_filtered(|from_a, _| {
            frames += usize::from(from_a);
            !(from_a && drop_every > 0 && frames % drop_every == 0)
        });
        // The reader: lent reads that take a random part, or plain reads.
        loop {
            let result = if rng.next_u64().is_multiple_of(2) {
                let part = rng.next_u64() as usize;
                pair.b.tcp_recv_with(pair.now, server, |data| {
                    let n = part % (data.len() + 1);
                    got.extend_from_slice(&data[..n]);
                    n
                })
            } else {
                let mut buf = vec![0u8; rng.in_range(1, 9000) as usize];
                pair.b.tcp_recv(pair.now, server, &mut buf).inspect(|&n| {
                    got.extend_from_slice(&buf[..n]);
                })
            };
            match result {
                Ok(_) => {}
                Err(TcpError::WouldBlock) => break,
                Err(e) => panic!("seed {seed}: recv: {e}"),
            }
            if got.len() == total {
                break;
            }
        }
        pair.exchange();
        pair.advance(Duration::from_millis(50));
    }
    got
}

#[test]
fn owned_sends_and_lent_reads_move_a_stream_byte_exact() {
    let tcp = TcpConfig::default();
    for seed in 1..=4 {
        let total = 1_500_000;
        let got = transfer(1500, &tcp, total, 0, seed);
        assert_eq!(got.len(), total, "seed {seed}: all of it");
        assert!(
            got.iter().enumerate().all(|(i, &b)| b == byte(i)),
            "seed {seed}: byte-exact"
        );
    }
}

#[test]
fn owned_sends_survive_loss_and_retransmission() {
    let tcp = TcpConfig::default();
    for (seed, drop_every) in [(5, 7), (6, 13), (7, 29)] {
        let total = 600_000;
        let got = transfer(1500, &tcp, total, drop_every, seed);
        assert_eq!(got.len(), total, "seed {seed}: all of it");
        assert!(
            got.iter().enumerate().all(|(i, &b)| b == byte(i)),
            "seed {seed}: byte-exact"
        );
    }
}

/// The 1981 plan: segments of 4096 bytes, larger than the MTU, fragmented by IP.
#[test]
fn owned_sends_in_fragmented_segments() {
    let tcp = TcpConfig {
        segment_size: Some(4096),
        ..TcpConfig::default()
    };
    let total = 500_000;
    let got = transfer(1500, &tcp, total, 0, 8);
    assert_eq!(got.len(), total);
    assert!(
        got.iter().enumerate().all(|(i, &b)| b == byte(i)),
        "byte-exact"
    );
}

#[test]
fn a_lent_read_consumes_only_what_the_closure_used() {
    let (mut pair, client, server) = connected(1500, &TcpConfig::default());
    pair.a.tcp_send(pair.now, client, b"0123456789").unwrap();
    pair.exchange();
    let mut seen = Vec::new();
    let n = pair.b.tcp_recv_with(pair.now, server, |data| {
        seen.extend_from_slice(data);
        3
    });
    assert_eq!(n, Ok(3));
    assert_eq!(seen, b"0123456789", "the closure sees all that is readable");
    // Claiming more than it was lent consumes only what there was.
    assert_eq!(pair.b.tcp_recv_with(pair.now, server, |_| 0), Ok(0));
    let mut buf = [0u8; 4];
    assert_eq!(pair.b.tcp_recv(pair.now, server, &mut buf), Ok(4));
    assert_eq!(&buf, b"3456");
    assert_eq!(
        pair.b.tcp_recv_with(pair.now, server, |d| d.len() + 100),
        Ok(3)
    );
    let mut called = false;
    let nothing = pair.b.tcp_recv_with(pair.now, server, |_| {
        called = true;
        0
    });
    assert_eq!(nothing, Err(TcpError::WouldBlock));
    assert!(!called, "no data, no call");
    // End of stream: the closure sees an empty slice.
    pair.a.tcp_shutdown(pair.now, client).unwrap();
    pair.exchange();
    let mut lent = None;
    let eof = pair.b.tcp_recv_with(pair.now, server, |data| {
        lent = Some(data.len());
        0
    });
    assert_eq!((eof, lent), (Ok(0), Some(0)));
}

#[test]
fn an_owned_send_is_all_or_nothing_within_the_send_buffer() {
    let tcp = TcpConfig {
        send_buffer: 64 * 1024,
        ..TcpConfig::default()
    };
    let (mut pair, client, server) = connected(1500, &tcp);
    let big = vec![7u8; 40_000];
    assert_eq!(pair.a.tcp_send_owned(pair.now, client, big.clone()), Ok(()));
    // 24 KiB left: 30 000 bytes do not fit, and come back untouched.
    let refused = pair
        .a
        .tcp_send_owned(pair.now, client, vec![8u8; 30_000])
        .unwrap_err();
    assert_eq!(refused.error, TcpError::WouldBlock);
    assert_eq!(refused.data, vec![8u8; 30_000]);
    // Unused capacity counts: 8 KiB of data in a 32 KiB allocation does not fit.
    let mut roomy = Vec::with_capacity(32 * 1024);
    roomy.extend_from_slice(&[9u8; 8192]);
    let refused = pair.a.tcp_send_owned(pair.now, client, roomy).unwrap_err();
    assert_eq!(
        (refused.error, refused.data.len()),
        (TcpError::WouldBlock, 8192)
    );
    // Larger than the whole send buffer: it would never fit.
    let huge = pair
        .a
        .tcp_send_owned(pair.now, client, vec![1u8; 65 * 1024])
        .unwrap_err();
    assert_eq!(huge.error, TcpError::BufferTooLarge);
    // A small one is copied, so it fits where its allocation would not matter.
    assert_eq!(
        pair.a
            .tcp_send_owned(pair.now, client, vec![2u8; OWNED_MIN - 1]),
        Ok(())
    );
    // Once acknowledged and read, the buffers are gone: room for a large one again.
    let mut sink = vec![0u8; 64 * 1024];
    let mut read = 0;
    for _ in 0..100 {
        pair.exchange();
        while let Ok(n) = pair.b.tcp_recv(pair.now, server, &mut sink) {
            assert!(n > 0);
            read += n;
        }
        pair.advance(Duration::from_millis(50));
    }
    assert_eq!(read, 40_000 + OWNED_MIN - 1);
    assert_eq!(pair.a.tcp_info(client).unwrap().bytes_queued, 0);
    assert_eq!(
        pair.a.tcp_send_owned(pair.now, client, vec![3u8; 60_000]),
        Ok(())
    );
}

/// A device completes the checksum of one packet, not of a datagram cut into fragments:
/// with checksum offload on, a TCP segment larger than the MTU (`segment_size`) and a
/// large UDP datagram still leave with their whole checksum, which B verifies.
#[test]
fn fragmented_datagrams_carry_whole_checksums_under_offload() {
    let tcp = TcpConfig {
        segment_size: Some(4096),
        ..TcpConfig::default()
    };
    let (mut pair, client, server) = connected_with(1500, &tcp, Offloads::CHECKSUM);
    let data: Vec<u8> = (0..20_000).map(byte).collect();
    assert_eq!(pair.a.tcp_send(pair.now, client, &data), Ok(data.len()));
    device_exchange(&mut pair);
    let mut got = vec![0u8; 30_000];
    let n = pair.b.tcp_recv(pair.now, server, &mut got).unwrap();
    assert_eq!(&got[..n], &data[..], "every fragmented segment accepted");
    assert_eq!(pair.b.stats().tcp.rx_bad_checksum, 0);
    assert!(
        pair.a.stats().ipv4.tx_fragments > 0,
        "the segments were fragmented"
    );

    let from = pair.a.udp_bind(SocketAddrV4::new(IP_A, 9)).unwrap();
    let to = pair.b.udp_bind(SocketAddrV4::new(IP_B, 9)).unwrap();
    pair.a
        .udp_send_to(pair.now, from, SocketAddrV4::new(IP_B, 9), &data[..5000])
        .unwrap();
    device_exchange(&mut pair);
    let (n, _) = pair.b.udp_recv_from(to, &mut got).unwrap();
    assert_eq!(&got[..n], &data[..5000]);
    assert_eq!(pair.b.stats().udp.rx_bad_checksum, 0);
}
