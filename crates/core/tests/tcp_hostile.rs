//! A TCP connection under attack: arbitrary segments aimed at a live connection (right
//! 4-tuple, sequence and acknowledgment numbers near the real ones, any flags, options
//! and payload) must never panic the stack, and whatever the connection delivers to
//! its user is a prefix-consistent byte stream it can account for.

use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_core::tcp::{Tcp, TcpConfig, TcpError, TcpHandle};
use impnet_core::{Duration, Instant, Secret};
use impnet_wire::tcp::{Flags, Options, Packet, Repr, SackBlock};
use proptest::prelude::*;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

struct Pair {
    a: Tcp,
    b: Tcp,
    now: Instant,
    buf: Vec<u8>,
    /// Last segment seen from each side: (seq, ack) of a -> b and of b -> a.
    last_ab: (u32, u32),
    last_ba: (u32, u32),
}

impl Pair {
    /// Deliver everything both sides want to send, without loss, once.
    fn exchange(&mut self) -> bool {
        let mut moved = false;
        for from_a in [true, false] {
            loop {
                let (tx, rx) = if from_a {
                    (&mut self.a, &mut self.b)
                } else {
                    (&mut self.b, &mut self.a)
                };
                let Some(t) = tx.poll_transmit(self.now, &mut self.buf) else {
                    break;
                };
                let packet =
                    Packet::new_checked(&self.buf[..t.len]).expect("we emit valid headers");
                let repr =
                    Repr::parse(&packet, &t.src, &t.dst, true).expect("we emit valid segments");
                if from_a {
                    self.last_ab = (repr.seq, repr.ack);
                } else {
                    self.last_ba = (repr.seq, repr.ack);
                }
                rx.handle_segment(self.now, t.src, t.dst, &repr);
                moved = true;
            }
        }
        moved
    }

    fn run_until_quiet(&mut self) {
        for _ in 0..10_000 {
            if !self.exchange() {
                match [self.a.poll_timeout(), self.b.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min()
                {
                    Some(t) if t <= self.now + Duration::from_secs(5) => {
                        self.now = self.now.max(t);
                        self.a.handle_timeout(self.now);
                        self.b.handle_timeout(self.now);
                    }
                    _ => return,
                }
            }
        }
    }
}

fn connected() -> (Pair, TcpHandle, TcpHandle) {
    let config = TcpConfig {
        send_buffer: 64 * 1024,
        recv_buffer: 64 * 1024,
        ..TcpConfig::default()
    };
    let mut pair = Pair {
        a: Tcp::new(config.clone(), &Secret::from_bytes([1; Secret::LEN])),
        b: Tcp::new(config, &Secret::from_bytes([2; Secret::LEN])),
        now: Instant::ZERO,
        buf: vec![0; 2000],
        last_ab: (0, 0),
        last_ba: (0, 0),
    };
    let listener = pair.b.listen(SocketAddrV4::new(B, 80), 4).unwrap();
    let client = pair
        .a
        .connect(
            pair.now,
            SocketAddrV4::new(A, 40000),
            SocketAddrV4::new(B, 80),
            1460,
        )
        .unwrap();
    pair.run_until_quiet();
    let server = pair.b.accept(listener).unwrap();
    (pair, client, server)
}

#[derive(Debug, Clone)]
struct Attack {
    to_server: bool,
    seq_offset: i32,
    ack_offset: i32,
    flags: u8,
    window: u16,
    mss: Option<u16>,
    wscale: Option<u8>,
    timestamps: Option<(u32, u32)>,
    sack: Vec<(i32, u16)>,
    payload: Vec<u8>,
}

fn attack() -> impl Strategy<Value = Attack> {
    (
        any::<bool>(),
        prop_oneof![-70_000i32..70_000, any::<i32>()],
        prop_oneof![-70_000i32..70_000, any::<i32>()],
        any::<u8>(),
        any::<u16>(),
        proptest::option::of(any::<u16>()),
        proptest::option::of(0u8..20),
        proptest::option::of((any::<u32>(), any::<u32>())),
        proptest::collection::vec((-70_000i32..70_000, any::<u16>()), 0..4),
        proptest::collection::vec(any::<u8>(), 0..1500),
    )
        .prop_map(
            |(
                to_server,
                seq_offset,
                ack_offset,
                flags,
                window,
                mss,
                wscale,
                timestamps,
                sack,
                payload,
            )| Attack {
                to_server,
                seq_offset,
                ack_offset,
                flags,
                window,
                mss,
                wscale,
                timestamps,
                sack,
                payload,
            },
        )
}

/// Read everything a connection offers; Err when it ended with an error.
fn drain(tcp: &mut Tcp, now: Instant, h: TcpHandle, out: &mut Vec<u8>) -> Result<(), TcpError> {
    let mut buf = [0u8; 4096];
    loop {
        match tcp.recv(now, h, &mut buf) {
            Ok(0) | Err(TcpError::WouldBlock) => return Ok(()),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return Err(e),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn hostile_segments_never_panic_and_never_reorder_the_stream(attacks in proptest::collection::vec(attack(), 1..40)) {
        let (mut pair, client, server) = connected();
        let message: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut written = 0;
        let mut received = Vec::new();
        for attack in &attacks {
            written += pair.a.send(pair.now, client, &message[written..]).unwrap_or(0);
            pair.exchange();
            let (to, from, base) = if attack.to_server { (B, A, pair.last_ab) } else { (A, B, pair.last_ba) };
            let mut options = Options {
                mss: attack.mss,
                window_scale: attack.wscale,
                timestamps: attack.timestamps,
                ..Options::default()
            };
            for (i, &(left, len)) in attack.sack.iter().take(3).enumerate() {
                let left = base.1.wrapping_add_signed(left);
                options.sack_blocks[i] = SackBlock { left, right: left.wrapping_add(u32::from(len)) };
                options.sack_len = i as u8 + 1;
            }
            let segment = Repr {
                src_port: if attack.to_server { 40000 } else { 80 },
                dst_port: if attack.to_server { 80 } else { 40000 },
                seq: base.0.wrapping_add_signed(attack.seq_offset),
                ack: base.1.wrapping_add_signed(attack.ack_offset),
                flags: Flags(attack.flags),
                window: attack.window,
                urgent: 0,
                options,
                payload: &attack.payload,
            };
            let target = if attack.to_server { &mut pair.b } else { &mut pair.a };
            target.handle_segment(pair.now, from, to, &segment);
            pair.now += Duration::from_millis(3);
            pair.a.handle_timeout(pair.now);
            pair.b.handle_timeout(pair.now);
            pair.exchange();
            let _ = drain(&mut pair.b, pair.now, server, &mut received);
        }
        pair.run_until_quiet();
        let _ = drain(&mut pair.b, pair.now, server, &mut received);
        // Blind injection can put foreign bytes into a stream (TCP cannot tell), but it
        // can never make the stack hand out more than it accepted or panic; and when no
        // attack carried a payload, every byte delivered is the sender's, in order.
        prop_assert!(received.len() <= written + attacks.iter().map(|a| a.payload.len()).sum::<usize>());
        if attacks.iter().all(|a| a.payload.is_empty()) {
            prop_assert_eq!(&received[..], &message[..received.len()]);
        }
    }
}
