//! Header prediction against the full path: the same random exchange (writes, reads,
//! segments delivered, dropped, duplicated, swapped or altered, time passing) run twice,
//! once with prediction on and once with it off, must put the same bytes on the wire,
//! deliver the same bytes and events to the users and leave the same `TcpInfo`.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use core::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::tcp::{Flags, Packet, Repr};
use proptest::prelude::*;

use super::*;
use crate::testutil::secret;
use crate::time::{Duration, Instant};

const A: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40000);
const B: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 80);

/// What happens next in an exchange.
#[derive(Debug, Clone)]
enum Op {
    /// The user of A (true) or B writes this many bytes.
    Write(bool, usize),
    /// The user of A or B reads up to this many bytes.
    Read(bool, usize),
    /// The oldest segment toward B (true) or A is handled as `Fate` says.
    Deliver(bool, Fate),
    /// Time passes (ms); due timers fire.
    Wait(u64),
}

/// What the wire does with a segment.
#[derive(Debug, Clone, Copy)]
enum Fate {
    Pass,
    Drop,
    /// Delivered twice.
    Duplicate,
    /// Held back behind the next one.
    Swap,
    /// Delivered with this added to its window field.
    Window(u16),
    /// Delivered with PSH toggled.
    Push,
    /// Delivered with its TSval moved back by this much (PAWS).
    OldTimestamp(u32),
}

/// One run: the two ends, their wire and what they told their users.
struct World {
    a: Tcp,
    b: Tcp,
    client: TcpHandle,
    server: TcpHandle,
    now: Instant,
    to_b: VecDeque<Vec<u8>>,
    to_a: VecDeque<Vec<u8>>,
    /// Everything observable, in order: segments sent, bytes read, events.
    log: Vec<Vec<u8>>,
}

impl World {
    fn new(config: &TcpConfig, prediction: bool) -> World {
        let mut a = Tcp::new(config.clone(), &secret(1));
        let mut b = Tcp::new(config.clone(), &secret(2));
        a.set_fast_paths(prediction);
        b.set_fast_paths(prediction);
        let listener = b.listen(B, 4).unwrap();
        let client = a.connect(Instant::ZERO, A, B, 1460).unwrap();
        let mut world = World {
            a,
            b,
            client,
            server: client,
            now: Instant::ZERO,
            to_b: VecDeque::new(),
            to_a: VecDeque::new(),
            log: Vec::new(),
        };
        for _ in 0..4 {
            world.transmit();
            while let Some(bytes) = world.to_b.pop_front() {
                world.deliver(true, &bytes, Fate::Pass);
            }
            world.transmit();
            while let Some(bytes) = world.to_a.pop_front() {
                world.deliver(false, &bytes, Fate::Pass);
            }
        }
        world.server = world.b.accept(listener).expect("handshake done");
        world
    }

    /// Queue what both sides send now, logging every segment.
    fn transmit(&mut self) {
        let mut buf = vec![0u8; 2000];
        for from_a in [true, false] {
            let tcp = if from_a { &mut self.a } else { &mut self.b };
            while let Some(tx) = tcp.poll_transmit(self.now, &mut buf) {
                let bytes = buf[..tx.len].to_vec();
                self.log.push(bytes.clone());
                if from_a {
                    self.to_b.push_back(bytes);
                } else {
                    self.to_a.push_back(bytes);
                }
            }
            while let Some(event) = tcp.poll_event() {
                self.log
                    .push(alloc::format!("{from_a} {event:?}").into_bytes());
            }
        }
    }

    fn deliver(&mut self, to_b: bool, bytes: &[u8], fate: Fate) {
        let (src, dst) = if to_b { (A, B) } else { (B, A) };
        let packet = Packet::new_checked(bytes).unwrap();
        let mut repr = Repr::parse(&packet, src.ip(), dst.ip(), true).unwrap();
        match fate {
            Fate::Window(delta) => repr.window = repr.window.wrapping_add(delta),
            Fate::Push => repr.flags = Flags(repr.flags.0 ^ Flags::PSH.0),
            Fate::OldTimestamp(back) => {
                if let Some((tsval, tsecr)) = repr.options.timestamps {
                    repr.options.timestamps = Some((tsval.wrapping_sub(back), tsecr));
                }
            }
            _ => {}
        }
        let tcp = if to_b { &mut self.b } else { &mut self.a };
        tcp.handle_segment(self.now, *src.ip(), *dst.ip(), &repr);
    }

    fn step(&mut self, op: &Op, message: &[u8]) {
        match *op {
            Op::Write(on_a, len) => {
                let (tcp, h) = if on_a {
                    (&mut self.a, self.client)
                } else {
                    (&mut self.b, self.server)
                };
                let n = tcp.send(self.now, h, &message[..len]);
                self.log.push(alloc::format!("send {n:?}").into_bytes());
            }
            Op::Read(on_a, len) => {
                let (tcp, h) = if on_a {
                    (&mut self.a, self.client)
                } else {
                    (&mut self.b, self.server)
                };
                let mut buf = vec![0u8; len];
                let n = tcp.recv(self.now, h, &mut buf);
                self.log.push(alloc::format!("recv {n:?}").into_bytes());
                if let Ok(n) = n {
                    self.log.push(buf[..n].to_vec());
                }
            }
            Op::Deliver(to_b, fate) => {
                let queue = if to_b { &mut self.to_b } else { &mut self.to_a };
                let Some(bytes) = queue.pop_front() else {
                    return;
                };
                match fate {
                    Fate::Drop => {}
                    Fate::Swap => {
                        let second = queue.pop_front();
                        if let Some(second) = second {
                            self.deliver(to_b, &second, Fate::Pass);
                        }
                        self.deliver(to_b, &bytes, Fate::Pass);
                    }
                    Fate::Duplicate => {
                        self.deliver(to_b, &bytes, Fate::Pass);
                        self.deliver(to_b, &bytes, Fate::Pass);
                    }
                    fate => self.deliver(to_b, &bytes, fate),
                }
            }
            Op::Wait(ms) => {
                self.now += Duration::from_millis(ms);
                self.a.handle_timeout(self.now);
                self.b.handle_timeout(self.now);
            }
        }
        self.transmit();
        for (tcp, h) in [(&self.a, self.client), (&self.b, self.server)] {
            self.log
                .push(alloc::format!("{:?}", tcp.info(h)).into_bytes());
            // The deadline heap (kept by `sync_open_conn` on the fast path).
            self.log.push(
                alloc::format!("{:?} {}", tcp.poll_timeout(), tcp.timer_count()).into_bytes(),
            );
        }
    }
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        12 => Just(Fate::Pass),
        2 => Just(Fate::Drop),
        1 => Just(Fate::Duplicate),
        2 => Just(Fate::Swap),
        1 => (1u16..=u16::MAX).prop_map(Fate::Window),
        1 => Just(Fate::Push),
        1 => (1u32..100).prop_map(Fate::OldTimestamp),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), prop_oneof![1usize..3, 1usize..5000]).prop_map(|(a, n)| Op::Write(a, n)),
        3 => (any::<bool>(), prop_oneof![1usize..3, 1usize..20_000]).prop_map(|(a, n)| Op::Read(a, n)),
        10 => (any::<bool>(), fate()).prop_map(|(b, f)| Op::Deliver(b, f)),
        2 => prop_oneof![0u64..5, 30u64..300, 1000u64..3000].prop_map(Op::Wait),
    ]
}

fn config(timestamps: bool, sack: bool, nodelay: bool, keepalive: bool) -> TcpConfig {
    TcpConfig {
        timestamps,
        sack,
        nodelay,
        keepalive: keepalive.then_some(Keepalive {
            idle: Duration::from_millis(2500),
            interval: Duration::from_millis(500),
            count: 3,
        }),
        send_buffer: 16 * 1024,
        recv_buffer: 8 * 1024,
        ..TcpConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Fast paths on and off: the same observable behaviour, step by step.
    #[test]
    fn prediction_matches_the_full_path(
        ops in proptest::collection::vec(op(), 1..120),
        timestamps: bool, sack: bool, nodelay: bool, keepalive: bool,
    ) {
        let config = config(timestamps, sack, nodelay, keepalive);
        let message: Vec<u8> = (0..5000u32).map(|i| (i * 13 + 1) as u8).collect();
        let mut on = World::new(&config, true);
        let mut off = World::new(&config, false);
        prop_assert_eq!(&on.log, &off.log);
        for (i, op) in ops.iter().enumerate() {
            on.step(op, &message);
            off.step(op, &message);
            prop_assert!(on.log == off.log, "diverged at step {} ({:?})", i, op);
        }
    }
}

/// The common exchanges do take the predicted path (else the test above proves little):
/// a request/response loop is handled without the full path after the handshake.
#[test]
fn request_response_is_predicted() {
    let config = config(true, true, true, false);
    let message = [7u8; 100];
    let mut world = World::new(&config, true);
    for _ in 0..10 {
        world.step(&Op::Write(true, 1), &message);
        world.step(&Op::Deliver(true, Fate::Pass), &message);
        world.step(&Op::Read(false, 10), &message);
        world.step(&Op::Write(false, 1), &message);
        world.step(&Op::Deliver(false, Fate::Pass), &message);
        world.step(&Op::Read(true, 10), &message);
    }
    // Every segment after the handshake was a request or a response with the ACK of
    // the previous one, or a pure ACK: all of them predicted.
    let predicted = world.a.stats().predicted + world.b.stats().predicted;
    let segments = world.a.stats().segments_in + world.b.stats().segments_in;
    assert_eq!(predicted, 20, "{:?} {:?}", world.a.stats(), world.b.stats());
    assert_eq!(segments, 3 + 20, "the handshake and 20 data segments");
}
