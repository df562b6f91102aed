//! `tcp_conn`: one `Tcp` with a listener and a connection whose peer the input scripts.
//!
//! The first five bytes choose the configuration (active or passive open, options,
//! buffers, MSS, congestion control, the peer's ISN and SYN options). The rest is a
//! sequence of operations: a segment from the peer described relative to what the
//! connection last showed (its RCV.NXT, SND.NXT, SND.UNA), emitted to bytes with a
//! valid checksum and parsed back as the stack would; a user call (send, recv,
//! shutdown, close, abort, Nagle, cork); an ICMP notice; time advancing with the
//! timers that fall due.
//!
//! Checks, after every operation: nothing panics; every segment `Tcp` emits parses with
//! a good checksum; its payload is exactly what the user wrote at those sequence
//! numbers, never past it; it acknowledges only sequence numbers the peer sent; what
//! the user reads is, byte for byte, what the peer sent at those sequence numbers, in
//! order, and end of stream comes only where the peer put a FIN; `TcpInfo` stays
//! coherent (queued bytes within the send buffer, SACKed within in-flight, the RTO
//! within its bounds).

use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_core::secret::Secret;
use impnet_core::tcp::cc::CcAlgorithm;
use impnet_core::tcp::{
    IcmpNotice, Keepalive, Tcp, TcpConfig, TcpError, TcpHandle, TcpInfo, TcpState,
};
use impnet_core::{Duration, Instant};
use impnet_wire::tcp::{FastOpenCookie, Flags, Options, Packet, Repr, SackBlock};

use crate::Input;

mod peer;

use peer::{Model, Peer, peer_byte, user_byte};

/// Our end.
pub const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
/// The scripted peer.
pub const REMOTE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 49500);
/// Operations per input at most, so one execution stays short.
const MAX_OPS: usize = 512;
/// Timers fired at most while time advances in one operation.
const MAX_TIMER_STEPS: usize = 64;

/// Run one input.
pub fn run(data: &[u8]) {
    drive(data, |_| {});
}

/// Run one input, describing the connection after each operation (for debugging a
/// crash: `cargo run -p impnet-fuzz-harness --example trace -- tcp_conn <file>`).
pub fn trace(data: &[u8], mut line: impl FnMut(String)) {
    drive(data, |h| {
        let info = h.conn.and_then(|c| h.tcp.info(c));
        line(format!(
            "t={} {:?} {:?} {:?}",
            h.now.as_millis(),
            info.map(|i| i.state),
            h.model,
            info
        ));
    });
}

fn drive(data: &[u8], mut after: impl FnMut(&Harness)) {
    let mut input = Input::new(data);
    let mut h = Harness::new(&mut input);
    after(&h);
    for _ in 0..MAX_OPS {
        if input.is_empty() {
            break;
        }
        h.step(&mut input);
        h.drain_and_check();
        after(&h);
    }
}

struct Harness {
    tcp: Tcp,
    config: TcpConfig,
    now: Instant,
    listener: Option<TcpHandle>,
    conn: Option<TcpHandle>,
    model: Model,
    peer: Peer,
    buf: Vec<u8>,
}

/// The configuration the first bytes choose, and the peer's ISN and SYN options.
fn decode_config(input: &mut Input<'_>) -> (bool, TcpConfig, u32, Options, bool) {
    let (c0, c1, c2, c3, c4) = (input.u8(), input.u8(), input.u8(), input.u8(), input.u8());
    let config = TcpConfig {
        timestamps: c0 & 2 != 0,
        sack: c0 & 4 != 0,
        window_scaling: c0 & 8 != 0,
        nodelay: c0 & 16 != 0,
        congestion: [CcAlgorithm::NewReno, CcAlgorithm::Cubic, CcAlgorithm::Vegas]
            [usize::from(c0 >> 5 & 3) % 3],
        hystart: c0 >> 5 & 3 != 3,
        delayed_ack: Duration::from_millis(if c0 & 128 != 0 { 0 } else { 40 }),
        recv_buffer: [8192, 65535, 2048, 300_000][usize::from(c1 & 3)],
        send_buffer: [16384, 65536, 4096, 1 << 20][usize::from(c1 >> 2 & 3)],
        mss: [536, 1460, 1000, 100][usize::from(c1 >> 4 & 3)],
        keepalive: (c1 & 64 != 0).then_some(Keepalive {
            idle: Duration::from_secs(10),
            interval: Duration::from_secs(1),
            count: 3,
        }),
        user_timeout: (c1 & 128 != 0).then_some(Duration::from_secs(5)),
        msl: Duration::from_secs(2),
        max_retransmits: 5,
        syn_retransmits: 3,
        ..TcpConfig::default()
    };
    let peer_isn = u32::from(c2) << 24 | 0x00ff_f000;
    let options = Options {
        mss: (c3 & 1 != 0).then_some(if c4 == 0 { 1460 } else { u16::from(c4) * 8 }),
        timestamps: (c3 & 2 != 0).then_some((1, 0)),
        sack_permitted: c3 & 4 != 0,
        window_scale: (c3 & 8 != 0).then_some(c3 >> 4),
        ..Options::default()
    };
    // TCP Fast Open: on the listener, in the passive open's SYN (a cookie request), and
    // in the active open (which asks for a cookie).
    let fast_open = c4 & 1 != 0;
    let options = Options {
        fast_open: fast_open.then_some(FastOpenCookie::REQUEST),
        ..options
    };
    (c0 & 1 != 0, config, peer_isn, options, fast_open)
}

impl Harness {
    fn new(input: &mut Input<'_>) -> Harness {
        let (active, config, peer_isn, syn_options, fast_open) = decode_config(input);
        let tcp = Tcp::new(config.clone(), &Secret::from_bytes([7; Secret::LEN]));
        let mut h = Harness {
            tcp,
            config,
            now: Instant::from_millis(0),
            listener: None,
            conn: None,
            model: Model::default(),
            peer: Peer::new(peer_isn),
            buf: vec![0; 65536],
        };
        let listener = h.tcp.listen(LOCAL, 4).expect("a fresh table listens");
        if fast_open {
            h.tcp
                .set_fast_open(listener, 2)
                .expect("a listener takes Fast Open");
        }
        h.listener = Some(listener);
        if active {
            let mss = h.config.mss;
            let conn = if fast_open {
                h.tcp
                    .connect_with_data(h.now, LOCAL, REMOTE, mss, &[])
                    .map(|(c, _)| c)
            } else {
                h.tcp.connect(h.now, LOCAL, REMOTE, mss)
            };
            h.conn = Some(conn.expect("a fresh table connects"));
        } else {
            let syn = Repr {
                seq: peer_isn,
                flags: Flags::SYN,
                options: syn_options,
                ..peer::template()
            };
            h.deliver(syn);
        }
        h.drain_and_check();
        h
    }

    fn step(&mut self, input: &mut Input<'_>) {
        let op = input.u8();
        match op % 12 {
            0 | 1 => {
                let segment = self.decode_segment(input, op);
                self.deliver_tracked(segment);
            }
            2 => self.user_send(usize::from(input.u8()) * 64 + 1),
            3 => self.user_recv(usize::from(input.u8()) * 64 + 1),
            4 => {
                let b = input.u8();
                let ms = u64::from(b & 63) * [1, 10, 200, 5000][usize::from(b >> 6)];
                self.advance(self.now + Duration::from_millis(ms));
            }
            5 => {
                if let Some(at) = self.tcp.poll_timeout() {
                    self.advance(at.max(self.now));
                }
            }
            6 => self.user_call(|tcp, now, h| tcp.shutdown_write(now, h)),
            7 => {
                self.model.released = true;
                self.user_call(|tcp, now, h| tcp.close(now, h));
            }
            8 => {
                self.model.released = true;
                self.user_call(|tcp, now, h| tcp.abort(now, h));
            }
            9 => self.toggles(input.u8()),
            10 => self.icmp(input.u8()),
            _ => {
                if let Some(listener) = self.listener.take() {
                    let _ = self.tcp.close(self.now, listener);
                }
            }
        }
    }

    fn state(&self) -> Option<TcpState> {
        self.conn.and_then(|h| self.tcp.info(h)).map(|i| i.state)
    }

    /// Deliver a peer segment, learning the peer's ISN when it completes an active
    /// open (our SYN-SENT left for a synchronized state).
    fn deliver_tracked(&mut self, segment: Vec<u8>) {
        let before = self.state();
        let repr = parse_peer(&segment);
        let (seq, syn) = (repr.seq, repr.flags.syn());
        self.tcp
            .handle_segment(self.now, *REMOTE.ip(), *LOCAL.ip(), &repr);
        self.peer.sent(&repr);
        let after = self.state();
        if syn
            && before == Some(TcpState::SynSent)
            && !matches!(after, Some(TcpState::SynSent | TcpState::Closed) | None)
        {
            self.model.irs = Some(seq);
        }
    }

    fn deliver(&mut self, repr: Repr<'_>) {
        let bytes = peer::emit(&repr);
        self.deliver_tracked(bytes);
    }

    fn user_call(&mut self, f: impl FnOnce(&mut Tcp, Instant, TcpHandle) -> Result<(), TcpError>) {
        if let Some(h) = self.conn {
            let _ = f(&mut self.tcp, self.now, h);
        }
    }

    fn toggles(&mut self, b: u8) {
        if let Some(h) = self.conn {
            let _ = self.tcp.set_nodelay(h, b & 1 != 0);
            let _ = self.tcp.set_cork(self.now, h, b & 2 != 0);
        }
    }

    fn icmp(&mut self, b: u8) {
        let notice = match b & 3 {
            0 => IcmpNotice::PacketTooBig {
                mtu: 68 + u16::from(b >> 2) * 24,
            },
            1 => IcmpNotice::Soft(TcpError::HostUnreachable),
            2 => IcmpNotice::Hard(TcpError::Prohibited),
            _ => IcmpNotice::Soft(TcpError::NetUnreachable),
        };
        let seq = self.peer.snd_una.unwrap_or(0);
        self.tcp.handle_icmp(self.now, LOCAL, REMOTE, seq, notice);
    }

    fn user_send(&mut self, n: usize) {
        let (Some(h), Some(iss)) = (self.conn, self.model.iss) else {
            return;
        };
        let start = iss.wrapping_add(1).wrapping_add(self.model.written as u32);
        let data: Vec<u8> = (0..n as u32)
            .map(|i| user_byte(start.wrapping_add(i)))
            .collect();
        if let Ok(sent) = self.tcp.send(self.now, h, &data) {
            assert!(sent <= n, "send took {sent} of {n} bytes");
            self.model.written += sent as u64;
        }
    }

    fn user_recv(&mut self, n: usize) {
        let Some(h) = self.conn else {
            return;
        };
        let mut out = vec![0u8; n];
        match self.tcp.recv(self.now, h, &mut out) {
            Ok(0) => self.model.eof_at(&self.peer),
            Ok(k) => self.model.read_data(&self.peer, &out[..k]),
            Err(_) => {}
        }
    }

    /// Let time run to `until`, firing each timer at its deadline and draining output
    /// in between.
    fn advance(&mut self, until: Instant) {
        for _ in 0..MAX_TIMER_STEPS {
            match self.tcp.poll_timeout() {
                Some(at) if at <= until => {
                    self.now = self.now.max(at);
                    self.tcp.handle_timeout(self.now);
                    self.drain_and_check();
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
        self.tcp.handle_timeout(self.now);
    }

    /// Drain output (checking each segment), events and the accept queue, then check
    /// the connection's info.
    fn drain_and_check(&mut self) {
        while let Some(tx) = self.tcp.poll_transmit(self.now, &mut self.buf) {
            assert!(tx.len <= self.buf.len());
            assert_eq!(
                (tx.src, tx.dst),
                ((*LOCAL.ip()).into(), (*REMOTE.ip()).into())
            );
            let bytes = self.buf[..tx.len].to_vec();
            self.on_emitted(&bytes);
        }
        while self.tcp.poll_event().is_some() {}
        if let Some(listener) = self.listener {
            while let Ok(h) = self.tcp.accept(listener) {
                self.conn = Some(h);
                self.model = self.peer.take_pending();
            }
        }
        if let Some(info) = self.conn.and_then(|h| self.tcp.info(h)) {
            self.check_info(&info);
        }
    }

    fn on_emitted(&mut self, bytes: &[u8]) {
        let packet = Packet::new_checked(bytes).expect("emitted segment too short");
        let seg = Repr::parse(&packet, LOCAL.ip(), REMOTE.ip(), true)
            .expect("emitted segment does not parse with a good checksum");
        assert_eq!((seg.src_port, seg.dst_port), (LOCAL.port(), REMOTE.port()));
        let state = self.state();
        if let Some(cookie) = seg.options.fast_open.filter(|c| !c.is_request()) {
            self.peer.cookie = Some(cookie);
        }
        if seg.flags.syn() {
            let ours = matches!(state, Some(TcpState::SynSent | TcpState::SynReceived));
            self.peer.our_syn(&seg, ours.then_some(&mut self.model));
        }
        if seg.flags.ack() && !seg.flags.rst() {
            let acked = seg.ack.wrapping_sub(1);
            assert!(
                self.peer.covered(acked, 1),
                "acknowledged {} but the peer never sent sequence number {acked}",
                seg.ack
            );
        }
        self.check_payload(&seg);
        self.peer.received(&seg);
    }

    fn check_payload(&self, seg: &Repr<'_>) {
        if seg.payload.is_empty() {
            return;
        }
        let iss = self.model.iss.expect("data sent before any ISS");
        let start = seg.seq.wrapping_add(u32::from(seg.flags.syn()));
        let offset = start.wrapping_sub(iss.wrapping_add(1)) as i32;
        assert!(offset >= 0, "data before ISS+1 (offset {offset})");
        let end = offset as u64 + seg.payload.len() as u64;
        assert!(
            end <= self.model.written,
            "sent up to offset {end} but the user wrote {}",
            self.model.written
        );
        for (i, &b) in seg.payload.iter().enumerate() {
            let seq = start.wrapping_add(i as u32);
            assert_eq!(b, user_byte(seq), "byte at sequence {seq} invented");
        }
    }

    fn check_info(&self, info: &TcpInfo) {
        let c = &self.config;
        assert!(info.bytes_queued as usize <= c.send_buffer, "{info:?}");
        assert!(info.sacked <= info.bytes_in_flight, "{info:?}");
        assert!(info.bytes_in_flight <= info.bytes_queued + 1, "{info:?}");
        assert!(info.rto <= c.max_rto && info.rto >= c.min_rto, "{info:?}");
        assert!(info.snd_mss > 0, "{info:?}");
        assert!(
            info.rcv_wnd as usize <= c.recv_buffer + (1 << 14),
            "{info:?}"
        );
        if self.model.eof {
            assert!(
                matches!(
                    info.state,
                    TcpState::CloseWait
                        | TcpState::LastAck
                        | TcpState::Closing
                        | TcpState::TimeWait
                        | TcpState::Closed
                ),
                "end of stream read in {:?}",
                info.state
            );
        }
        if let Some(h) = self.conn {
            assert!(self.tcp.readable(h) <= c.recv_buffer);
        }
    }

    /// A peer segment from the operation's bytes.
    fn decode_segment(&self, input: &mut Input<'_>, op: u8) -> Vec<u8> {
        let flags = Flags(input.u8() ^ Flags::ACK.0);
        let sel = input.u8();
        let seq_off = scaled(input.u8(), sel & 16 != 0);
        let ack_off = scaled(input.u8(), sel & 32 != 0);
        let window = 0xffff_u32 >> (input.u8() % 17);
        let opts = input.u8();
        let len = usize::from(input.u8()) * if op & 0x80 != 0 { 1 } else { 8 };
        let seq = self.peer.seq_base(sel & 3).wrapping_add(seq_off as u32);
        let ack = self
            .peer
            .ack_base(sel >> 2 & 3, &self.model)
            .wrapping_add(ack_off as u32);
        let unit = self
            .conn
            .and_then(|h| self.tcp.info(h))
            .map_or(256, |i| u32::from(i.snd_mss) / 2);
        let options = self.peer.options(input, opts, flags, unit.max(1), self.now);
        let payload: Vec<u8> = (0..len as u32)
            .map(|i| peer_byte(seq.wrapping_add(u32::from(flags.syn())).wrapping_add(i)))
            .collect();
        peer::emit(&Repr {
            seq,
            ack,
            flags,
            window: window as u16,
            options,
            payload: &payload,
            ..peer::template()
        })
    }
}

/// A signed offset: the byte as i8, times 256 when `big`.
fn scaled(b: u8, big: bool) -> i32 {
    i32::from(b as i8) * if big { 256 } else { 1 }
}

/// Parse a segment the peer emitted, as the stack's input path would.
fn parse_peer(bytes: &[u8]) -> Repr<'_> {
    let packet = Packet::new_checked(bytes).expect("the peer's segment checks");
    Repr::parse(&packet, REMOTE.ip(), LOCAL.ip(), true).expect("the peer's segment parses")
}

/// SACK blocks described relative to the peer's SND.UNA, on a grid of `unit` bytes.
fn sack_blocks(input: &mut Input<'_>, count: u8, una: u32, unit: u32) -> ([SackBlock; 4], u8) {
    let mut blocks = [SackBlock { left: 0, right: 0 }; 4];
    for block in blocks.iter_mut().take(usize::from(count)) {
        let (l, r) = (input.u8(), input.u8());
        let left = una.wrapping_add(u32::from(l) * unit);
        let len = if r & 0x80 != 0 {
            u32::from(r & 0x7f)
        } else {
            (u32::from(r) + 1) * unit
        };
        *block = SackBlock {
            left,
            right: left.wrapping_add(len),
        };
    }
    (blocks, count)
}
