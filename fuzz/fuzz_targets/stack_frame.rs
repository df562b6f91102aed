//! The whole receive path: arbitrary bytes arrive as a frame on an interface with an
//! address (and two multicast groups joined, one source-specific); the stack must
//! neither panic nor emit anything it cannot account for.
//! The input is a sequence of frames, each preceded by its length as two big-endian
//! bytes, so state built by one frame (ARP entries, reassembly queues, connections) is
//! exercised by the next.
#![no_main]

use impnet_core::{IfaceConfig, Instant, Secret, Stack, StackConfig};
use impnet_wire::{ethernet, ipv4};
use libfuzzer_sys::fuzz_target;

const MAC: ethernet::Address = ethernet::Address([0x02, 0, 0, 0, 0, 1]);

fuzz_target!(|data: &[u8]| {
    // A fuzz target needs no secrecy, only the same stack every run.
    let mut stack = Stack::new(StackConfig::default(), Secret::from_bytes([0; Secret::LEN]));
    let mut config = IfaceConfig::new(MAC, 1500);
    config
        .addrs
        .push("10.0.0.1/24".parse::<ipv4::Cidr>().unwrap());
    let iface = stack.add_interface(config);
    // Multicast state for queries and group datagrams to meet: a source-specific
    // join (239.0.0.1 from 10.0.0.2) and one for every source (239.0.0.2).
    let any = core::net::Ipv4Addr::UNSPECIFIED;
    let start = Instant::from_millis(0);
    let ssm = stack.udp_bind((any, 5000)).unwrap();
    let group = core::net::Ipv4Addr::new(239, 0, 0, 1);
    let source = core::net::Ipv4Addr::new(10, 0, 0, 2);
    stack
        .udp_join_source_multicast_v4(start, ssm, (group, source), any)
        .unwrap();
    let asm = stack.udp_bind((any, 5001)).unwrap();
    stack
        .udp_join_multicast_v4(start, asm, core::net::Ipv4Addr::new(239, 0, 0, 2), any)
        .unwrap();

    let mut now = Instant::from_millis(0);
    let mut buf = vec![0u8; 2048];
    let mut rest = data;
    while let [hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (frame, next) = tail.split_at(len);
        rest = next;
        stack.handle_frame(now, iface, frame);
        while let Some(tx) = stack.poll_transmit(now, &mut buf) {
            assert!(tx.len <= buf.len());
            // Everything the stack sends must itself be a well-formed frame.
            ethernet::Frame::new_checked(&buf[..tx.len]).expect("stack emitted a bad frame");
        }
        now = Instant::from_millis(now.as_millis() + 100);
        if stack.poll_timeout().is_some_and(|deadline| deadline <= now) {
            stack.handle_timeout(now);
        }
    }
});
