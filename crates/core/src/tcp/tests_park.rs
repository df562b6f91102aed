//! Parked TIME-WAIT (`conn/park.rs`) against TIME-WAIT kept whole: the same random
//! segments (old and new sequence numbers, SYN, RST, FIN, data, old and new
//! timestamps), ICMP errors, listeners coming and going and time passing, sent to a
//! server whose connection waits in TIME-WAIT, must draw the same bytes, events,
//! counters and deadlines either way.

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

/// What reaches the server next.
#[derive(Debug, Clone)]
enum Op {
    /// A segment from A's address: the client's FIN with its sequence number moved
    /// by `seq`, its acknowledgment by `ack`, these flags, this much payload and its
    /// timestamp moved by `ts`.
    Segment {
        seq: i32,
        ack: i32,
        flags: u8,
        len: usize,
        ts: i32,
    },
    /// An ICMP error quoting a segment of the server's with this sequence offset.
    Icmp(i32, bool),
    /// Close the listener, or listen again.
    Listener,
    /// Time passes (ms); due timers fire.
    Wait(u64),
}

struct World {
    a: Tcp,
    b: Tcp,
    listener: Option<TcpHandle>,
    /// The server's connection (released: it waits in TIME-WAIT).
    server: TcpHandle,
    /// The client's FIN, the template of the segments sent.
    fin: Vec<u8>,
    snd_nxt: u32,
    now: Instant,
    log: Vec<Vec<u8>>,
}

fn deliver(tcp: &mut Tcp, now: Instant, to_b: bool, bytes: &[u8]) {
    let (src, dst) = if to_b { (A, B) } else { (B, A) };
    let packet = Packet::new_checked(bytes).unwrap();
    let repr = Repr::parse(&packet, src.ip(), dst.ip(), true).unwrap();
    tcp.handle_segment(now, *src.ip(), *dst.ip(), &repr);
}

impl World {
    fn new(config: &TcpConfig, park: bool) -> World {
        let mut a = Tcp::new(config.clone(), &secret(1));
        let mut b = Tcp::new(config.clone(), &secret(2));
        a.set_park_time_wait(park);
        b.set_park_time_wait(park);
        let listener = b.listen(B, 4).unwrap();
        let client = a.connect(Instant::ZERO, A, B, 1460).unwrap();
        let mut world = World {
            a,
            b,
            listener: Some(listener),
            server: client,
            fin: Vec::new(),
            snd_nxt: 0,
            now: Instant::ZERO,
            log: Vec::new(),
        };
        world.pump();
        world.server = world.b.accept(listener).expect("handshake done");
        let now = world.now;
        world.b.send(now, world.server, b"hello").unwrap();
        world.a.send(now, client, b"hi").unwrap();
        world.pump();
        let mut buf = [0u8; 8];
        assert_eq!(world.b.recv(now, world.server, &mut buf), Ok(2));
        assert_eq!(world.a.recv(now, client, &mut buf), Ok(5));
        world.b.close(now, world.server).unwrap();
        world.pump();
        world.a.close(now, client).unwrap();
        world.pump();
        assert_eq!(
            world.b.info_parked_too(world.server).map(|i| i.state),
            Some(TcpState::TimeWait)
        );
        world
    }

    /// Deliver everything both sides send until neither has more; keep the
    /// client's FIN and the server's SND.NXT.
    fn pump(&mut self) {
        let mut buf = vec![0u8; 2000];
        for _ in 0..6 {
            let mut to_b = VecDeque::new();
            while let Some(tx) = self.a.poll_transmit(self.now, &mut buf) {
                let bytes = buf[..tx.len].to_vec();
                let packet = Packet::new_checked(&bytes[..]).unwrap();
                if packet.flags().fin() {
                    self.fin.clone_from(&bytes);
                }
                to_b.push_back(bytes);
            }
            for bytes in to_b {
                deliver(&mut self.b, self.now, true, &bytes);
            }
            let mut to_a = VecDeque::new();
            while let Some(tx) = self.b.poll_transmit(self.now, &mut buf) {
                let bytes = buf[..tx.len].to_vec();
                let packet = Packet::new_checked(&bytes[..]).unwrap();
                self.snd_nxt = packet
                    .seq_number()
                    .wrapping_add(u32::from(packet.flags().fin()));
                to_a.push_back(bytes);
            }
            for bytes in to_a {
                deliver(&mut self.a, self.now, false, &bytes);
            }
        }
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Segment {
                seq,
                ack,
                flags,
                len,
                ts,
            } => {
                let packet = Packet::new_checked(&self.fin[..]).unwrap();
                let mut repr = Repr::parse(&packet, A.ip(), B.ip(), true).unwrap();
                repr.seq = repr.seq.wrapping_add_signed(seq);
                repr.ack = repr.ack.wrapping_add_signed(ack);
                repr.flags = Flags(flags & 0x17);
                repr.payload = &b"abcdefgh"[..len];
                if let Some((tsval, tsecr)) = repr.options.timestamps {
                    repr.options.timestamps = Some((tsval.wrapping_add_signed(ts), tsecr));
                }
                self.b.handle_segment(self.now, *A.ip(), *B.ip(), &repr);
            }
            Op::Icmp(seq, hard) => {
                let notice = if hard {
                    IcmpNotice::Hard(TcpError::ConnectionReset)
                } else {
                    IcmpNotice::PacketTooBig { mtu: 600 }
                };
                let seq = self.snd_nxt.wrapping_add_signed(seq);
                let took = self.b.handle_icmp(self.now, B, A, seq, notice);
                self.log.push(alloc::format!("icmp {took}").into_bytes());
            }
            Op::Listener => match self.listener.take() {
                Some(listener) => self.b.close(self.now, listener).unwrap(),
                None => self.listener = Some(self.b.listen(B, 4).unwrap()),
            },
            Op::Wait(ms) => {
                self.now += Duration::from_millis(ms);
                self.b.handle_timeout(self.now);
            }
        }
        let mut buf = vec![0u8; 2000];
        while let Some(tx) = self.b.poll_transmit(self.now, &mut buf) {
            self.log.push(buf[..tx.len].to_vec());
        }
        while let Some(event) = self.b.poll_event() {
            // Handles of new connections may differ (the parked one's slot is free).
            let (kind, h) = match event {
                TcpEvent::Readable(h) => ("readable", h),
                TcpEvent::Writable(h) => ("writable", h),
                TcpEvent::Closed(h) => ("closed", h),
            };
            let ours = h == self.server;
            self.log.push(alloc::format!("{kind} {ours}").into_bytes());
        }
        let b = &self.b;
        self.log.push(
            alloc::format!(
                "{:?} {:?} {} {} {} {:?}",
                b.info_parked_too(self.server).map(|i| i.state),
                b.poll_timeout(),
                b.timer_count(),
                b.socket_count(),
                b.connection_count(),
                b.stats(),
            )
            .into_bytes(),
        );
    }
}

fn op() -> impl Strategy<Value = Op> {
    let delta = prop_oneof![-3i32..=3, -70_000i32..70_000];
    prop_oneof![
        10 => (delta.clone(), delta, any::<u8>(), 0usize..=8, prop_oneof![-3i32..=3, -100_000i32..100_000])
            .prop_map(|(seq, ack, flags, len, ts)| Op::Segment { seq, ack, flags, len, ts }),
        1 => (-3i32..=3, any::<bool>()).prop_map(|(seq, hard)| Op::Icmp(seq, hard)),
        1 => Just(Op::Listener),
        3 => prop_oneof![0u64..5, 100u64..3000, 5000u64..70_000].prop_map(Op::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Parked and whole: the same observable behaviour, step by step.
    #[test]
    fn parked_time_wait_behaves_as_a_whole_one(
        ops in proptest::collection::vec(op(), 1..40),
        timestamps: bool,
        max_connections in prop_oneof![Just(2usize), Just(16)],
    ) {
        let config = TcpConfig {
            timestamps,
            max_connections,
            ..TcpConfig::default()
        };
        let mut parked = World::new(&config, true);
        let mut whole = World::new(&config, false);
        prop_assert_eq!(&parked.log, &whole.log);
        for (i, op) in ops.iter().enumerate() {
            parked.step(op);
            whole.step(op);
            prop_assert!(parked.log == whole.log, "diverged at step {} ({:?}): {:?}", i, op, parked.log.iter().zip(&whole.log).filter(|(a, b)| a != b).map(|(a, b)| (alloc::string::String::from_utf8_lossy(a).into_owned(), alloc::string::String::from_utf8_lossy(b).into_owned())).collect::<Vec<_>>());
        }
    }
}

/// The server's TIME-WAIT connection is parked (else the test above proves little):
/// it leaves its slot, which the next connection takes.
#[test]
fn a_released_time_wait_connection_leaves_its_slot() {
    let world = World::new(&TcpConfig::default(), true);
    assert_eq!(world.b.parked_count(), 1);
    assert_eq!(world.b.connection_count(), 1);
    assert!(world.b.info(world.server).is_none(), "the slot is free");
    // Listed as `ss` lists sockets: its handle, addresses and state.
    let listed: Vec<TcpHandle> = world
        .b
        .handles()
        .filter(|&(_, listener)| !listener)
        .map(|(h, _)| h)
        .collect();
    assert_eq!(listed.len(), 1);
    assert_eq!(world.b.addresses(listed[0]), Some((B.into(), A.into())));
    assert_eq!(
        world.b.info(listed[0]).map(|i| i.state),
        Some(TcpState::TimeWait)
    );
    let whole = World::new(&TcpConfig::default(), false);
    assert_eq!(whole.b.parked_count(), 0);
    assert_eq!(
        whole.b.info(whole.server).map(|i| i.state),
        Some(TcpState::TimeWait)
    );
}
