//! Two stacks on one Ethernet segment, driven by hand: the test harness until the
//! simulator exists. Frames move only when a test says so, at the `now` it chooses.

use alloc::vec;
use alloc::vec::Vec;
use core::net::Ipv4Addr;

use impnet_wire::ethernet;
use impnet_wire::ipv4::Cidr;

use crate::iface::{IfaceConfig, IfaceId};
use crate::stack::{Stack, StackConfig};
use crate::time::{Duration, Instant};

pub(crate) const MAC_A: ethernet::Address = ethernet::Address([0x02, 0, 0, 0, 0, 0x0a]);
pub(crate) const MAC_B: ethernet::Address = ethernet::Address([0x02, 0, 0, 0, 0, 0x0b]);
pub(crate) const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub(crate) const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// An address on the link nobody owns.
pub(crate) const IP_NOBODY: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 99);

/// Bound on exchange rounds, so a ping-pong bug fails instead of hanging.
const MAX_ROUNDS: usize = 10_000;

/// Two stacks, A and B, each with one interface on a shared /24.
pub(crate) struct Pair {
    pub(crate) a: Stack,
    pub(crate) b: Stack,
    pub(crate) a_if: IfaceId,
    pub(crate) b_if: IfaceId,
    pub(crate) now: Instant,
}

/// A stack with one interface holding `addr`/24.
pub(crate) fn host(
    seed: u64,
    mac: ethernet::Address,
    addr: Ipv4Addr,
    mtu: usize,
) -> (Stack, IfaceId) {
    let mut stack = Stack::new(StackConfig {
        seed,
        ..StackConfig::default()
    });
    let mut config = IfaceConfig::new(mac, mtu);
    config.addrs.push(Cidr {
        address: addr,
        prefix_len: 24,
    });
    let iface = stack.add_interface(config);
    (stack, iface)
}

/// Every frame `stack` has to send right now.
pub(crate) fn drain(stack: &mut Stack, now: Instant) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut buf = vec![0u8; 9000 + 14];
    while let Some(tx) = stack.poll_transmit(now, &mut buf) {
        frames.push(buf[..tx.len].to_vec());
    }
    frames
}

/// The EtherType of a frame.
pub(crate) fn ethertype(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[12], frame[13]])
}

impl Pair {
    /// A and B with MTU 1500, their announcements already exchanged away.
    pub(crate) fn new() -> Pair {
        Pair::with_mtu(1500)
    }

    /// A and B with the given MTU; the gratuitous ARPs of setup are discarded.
    pub(crate) fn with_mtu(mtu: usize) -> Pair {
        let (mut a, a_if) = host(1, MAC_A, IP_A, mtu);
        let (mut b, b_if) = host(2, MAC_B, IP_B, mtu);
        let now = Instant::from_nanos(0);
        drain(&mut a, now);
        drain(&mut b, now);
        Pair {
            a,
            b,
            a_if,
            b_if,
            now,
        }
    }

    /// Move frames both ways until neither side has anything to send; `keep(from_a,
    /// frame)` decides which frames reach the other side. Returns the frames moved.
    pub(crate) fn exchange_filtered(&mut self, mut keep: impl FnMut(bool, &[u8]) -> bool) -> usize {
        let mut moved = 0;
        for _ in 0..MAX_ROUNDS {
            let from_a = drain(&mut self.a, self.now);
            let from_b = drain(&mut self.b, self.now);
            if from_a.is_empty() && from_b.is_empty() {
                return moved;
            }
            for frame in from_a.iter().filter(|f| keep(true, f)) {
                self.b.handle_frame(self.now, self.b_if, frame);
                moved += 1;
            }
            for frame in from_b.iter().filter(|f| keep(false, f)) {
                self.a.handle_frame(self.now, self.a_if, frame);
                moved += 1;
            }
        }
        panic!("stacks still talking after {MAX_ROUNDS} rounds");
    }

    /// Move every frame both ways until quiet.
    pub(crate) fn exchange(&mut self) -> usize {
        self.exchange_filtered(|_, _| true)
    }

    /// Advance time by `by`, firing both stacks' timers.
    pub(crate) fn advance(&mut self, by: Duration) {
        self.now += by;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
    }
}
