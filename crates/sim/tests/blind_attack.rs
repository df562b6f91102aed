//! Blind in-window attacks (RFC 5961, CVE-2016-5696) during a bulk transfer: an
//! off-path attacker who knows the 4-tuple but not the sequence numbers sprays spoofed
//! RSTs, SYNs and data segments with random sequence and acknowledgment numbers at both
//! ends. The connection must not be reset, no byte of the attacker's may reach either
//! user, and the transfer must arrive byte for byte.

use impnet_core::tcp::{TcpConfig, TcpStats};
use impnet_core::{Duration, Instant};
use impnet_phy::LinkConfig;
use impnet_sim::Sim;
use impnet_sim::bulk::{BulkConfig, BulkResult, Transfer, run_bulk, run_bulk_beside};
use impnet_sim::forge::tcp_frame;
use impnet_wire::{ethernet, tcp};

/// 1 Gbit/s, 10 ms each way: the 256 KiB default buffers hold the transfer near
/// 100 Mbit/s, so the attack's frames (a few hundred Mbit/s) never crowd it out: this
/// tests the protocol, not the link's capacity.
fn path() -> LinkConfig {
    LinkConfig {
        rate_bps: 1_000_000_000,
        delay: Duration::from_millis(10),
        queue_limit_bytes: 4 << 20,
        ..LinkConfig::default()
    }
}

fn config(bytes: u64, seed: u64, tcp: &TcpConfig) -> BulkConfig {
    BulkConfig {
        sender_tcp: tcp.clone(),
        receiver_tcp: tcp.clone(),
        ..BulkConfig::new(bytes, path(), seed)
    }
}

/// The attacker: xorshift draws, a budget of segments, a rate.
struct Attacker {
    rng: u64,
    left: u64,
    per_ms: u64,
    next: Instant,
    sent: [u64; 3],
    /// The most bytes the sender's socket ever had to read (it is sent nothing).
    sender_readable: usize,
}

impl Attacker {
    fn next_u64(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn step(&mut self, sim: &mut Sim, t: &Transfer) -> Option<Instant> {
        self.sender_readable = self
            .sender_readable
            .max(sim.host_mut(t.sender).tcp_readable(t.sender_conn));
        if self.left == 0 {
            return None;
        }
        // Wait for the handshake: before it the 4-tuple exists only at the sender.
        t.receiver_conn?;
        let (src, dst) = sim.host(t.sender).tcp_addresses(t.sender_conn)?;
        let macs = (
            sim.mac_on(t.sender, t.link)?,
            sim.mac_on(t.receiver, t.link)?,
        );
        let now = sim.now();
        while self.next <= now && self.left > 0 {
            for _ in 0..self.per_ms.min(self.left) {
                let r = self.next_u64();
                // Alternate targets: the receiver (as if from the sender) and the
                // sender (as if from the receiver).
                let (side, from, to, eth) = if r & 1 == 0 {
                    (0, src, dst, macs)
                } else {
                    (1, dst, src, (macs.1, macs.0))
                };
                let kind = ((r >> 1) % 3) as usize;
                let seq = (r >> 32) as u32;
                let ack = self.next_u64() as u32;
                let frame = spoofed(kind, from, to, eth, seq, ack, r);
                sim.inject(t.link, side, &frame);
                self.sent[kind] += 1;
                self.left -= 1;
            }
            self.next += Duration::from_millis(1);
        }
        (self.left > 0).then_some(self.next)
    }
}

/// 0: RST, 1: SYN, 2: data with ACK (1 to 64 bytes of 0xEE): random numbers, right tuple.
fn spoofed(
    kind: usize,
    from: std::net::SocketAddr,
    to: std::net::SocketAddr,
    (src_mac, dst_mac): (ethernet::Address, ethernet::Address),
    seq: u32,
    ack: u32,
    r: u64,
) -> Vec<u8> {
    let (std::net::SocketAddr::V4(from), std::net::SocketAddr::V4(to)) = (from, to) else {
        panic!("this test's connection is IPv4");
    };
    let payload = [0xEEu8; 64];
    let (flags, ack, payload) = match kind {
        0 => (tcp::Flags::RST, 0, &payload[..0]),
        1 => (tcp::Flags::SYN, 0, &payload[..0]),
        _ => (
            tcp::Flags::ACK | tcp::Flags::PSH,
            ack,
            &payload[..1 + (r >> 8) as usize % 64],
        ),
    };
    let segment = tcp::Repr {
        src_port: from.port(),
        dst_port: to.port(),
        seq,
        ack,
        flags,
        window: 65_535,
        urgent: 0,
        options: tcp::Options::default(),
        payload,
    };
    tcp_frame((src_mac, dst_mac), (from, to), &segment, r as u16)
}

struct Outcome {
    result: BulkResult,
    sent: [u64; 3],
    sender_readable: usize,
    receiver: TcpStats,
}

fn attacked(bytes: u64, segments: u64, per_ms: u64, seed: u64, tcp: &TcpConfig) -> Outcome {
    let mut config = config(bytes, seed, tcp);
    // A capture of the attack, for looking into a failure: BLIND_PCAP=file.pcap.
    config.pcap = std::env::var_os("BLIND_PCAP").map(Into::into);
    let mut attacker = Attacker {
        rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        left: segments,
        per_ms,
        next: Instant::ZERO,
        sent: [0; 3],
        sender_readable: 0,
    };
    let mut receiver = None;
    let result = run_bulk_beside(&config, |sim, t| {
        let at = attacker.step(sim, t);
        receiver = Some(sim.host(t.receiver).tcp_stats().clone());
        at
    })
    .unwrap_or_else(|e| panic!("the transfer failed under attack: {e:?}"));
    Outcome {
        result,
        sent: attacker.sent,
        sender_readable: attacker.sender_readable,
        receiver: receiver.expect("the transfer ran"),
    }
}

fn check(bytes: u64, segments: u64, per_ms: u64, seed: u64, tcp: &TcpConfig) {
    let clean = run_bulk(&config(bytes, seed, tcp)).expect("clean transfer");
    let o = attacked(bytes, segments, per_ms, seed, tcp);
    let r = &o.result;
    let sender = &r.sender_stats;
    println!(
        "{segments} spoofed segments (RST {}, SYN {}, data {}): {} of {bytes} bytes, \
         hash ok {}, {:.1} Mbit/s ({:.1} clean), {} retransmitted ({} clean); \
         receiver: {} challenge ACKs, {} limited, {} bad seq, {} bad ack; \
         sender: {} challenge ACKs, {} limited",
        o.sent[0],
        o.sent[1],
        o.sent[2],
        r.bytes,
        r.hash_ok,
        r.goodput_bps / 1e6,
        clean.goodput_bps / 1e6,
        r.retransmits,
        clean.retransmits,
        o.receiver.challenge_acks,
        o.receiver.challenge_acks_limited,
        o.receiver.bad_seq,
        o.receiver.bad_ack,
        sender.challenge_acks,
        sender.challenge_acks_limited,
    );
    println!(
        "sender: {} fast retransmits, {} timeouts, {} segments in",
        sender.fast_retransmits, sender.timeouts, sender.segments_in
    );
    assert_eq!(o.sent.iter().sum::<u64>(), segments, "the whole attack ran");
    assert!(
        r.hash_ok && r.bytes == bytes,
        "the stream arrived byte for byte"
    );
    assert_eq!(
        o.sender_readable, 0,
        "no attacker byte reached the sender's user"
    );
    assert_eq!(sender.resets_received, 0, "the sender was not reset");
    assert_eq!(o.receiver.resets_received, 0, "the receiver was not reset");
    // The spray hit the windows often enough to be answered (challenge ACKs) and the
    // answers were rate limited, per connection.
    assert!(o.receiver.challenge_acks > 0 && sender.challenge_acks > 0);
    assert!(o.receiver.challenge_acks_limited + sender.challenge_acks_limited > 0);
    // Blind segments cost the transfer nothing: the challenge ACKs are spaced out, so
    // the peer never sees three of them in a row as duplicate ACKs, and the ACKs for
    // out-of-window data come from the same budget.
    assert!(
        r.retransmits <= clean.retransmits,
        "{} retransmissions under attack, {} without",
        r.retransmits,
        clean.retransmits
    );
    assert!(
        r.goodput_bps >= 0.95 * clean.goodput_bps,
        "goodput under attack {:.1} Mbit/s, clean {:.1}",
        r.goodput_bps / 1e6,
        clean.goodput_bps / 1e6
    );
}

#[test]
fn a_million_blind_segments_neither_reset_nor_inject() {
    // 32 MiB at about 100 Mbit/s takes some 2.7 s; 400 spoofed segments a millisecond
    // spread the million over it.
    check(32 << 20, 1_000_000, 400, 5961, &TcpConfig::default());
}

#[test]
fn blind_attack_with_other_seeds() {
    for seed in [1, 2, 3] {
        check(8 << 20, 200_000, 400, seed, &TcpConfig::default());
    }
}

#[test]
fn blind_attack_on_a_connection_without_options() {
    // No timestamps (so no PAWS to discard old segments), no SACK (so duplicate ACKs
    // count towards fast retransmit), no window scaling: only RFC 5961 stands between
    // the attacker and the stream.
    let bare = TcpConfig {
        timestamps: false,
        sack: false,
        window_scaling: false,
        ..TcpConfig::default()
    };
    check(8 << 20, 200_000, 400, 793, &bare);
}

#[test]
#[ignore = "long: ten million blind segments (cargo test --release -- --ignored)"]
fn ten_million_blind_segments() {
    check(
        256 << 20,
        10_000_000,
        600,
        20_165_696,
        &TcpConfig::default(),
    );
}
