//! Out-of-tree harness for scripts/bisect-costs: imp's in-process workloads W2, W3 and
//! W1a (as crates/bench/src/imp_side.rs runs them: two Stacks back to back, frames
//! handed from one's poll_transmit to the other's handle_frame, a virtual clock) on
//! whatever commit's core crate `Cargo.toml` points at. The measured loops are the
//! functions `breakdown::measured_*` (callgrind --toggle-collect='*breakdown::measured_*').
//!
//! `bisect-harness w2|w3|w1a N`: set up, warm up, run N round trips / connections /
//! payload bytes in the measured loop. `bisect-harness mem N`: N idle connections,
//! prints the heap growth per connection end (both ends live in this process).
//!
//! `w2`, `w3` and `w1a` also print the frames the measured loop moved.
//!
//! API differences between commits are features: `secret` (Stack::new(config,
//! Secret), else StackConfig::seed), `ipv6cfg` (StackConfig::ipv6 has dad_transmits
//! and router_solicitations, set to 0 as the bench does).

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicIsize, Ordering};

use core_crate::tcp::{TcpConfig, TcpError, TcpHandle};
use core_crate::{IfaceConfig, IfaceId, Instant, Offloads, Stack, StackConfig};
use wire_crate::ethernet;
use wire_crate::ipv4::Cidr;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 5001;
const BULK_TICK_NS: u64 = 20_000;
const PING_TICK_NS: u64 = 10_000;
const BULK_BUFFER: usize = 256 << 10;

#[cfg(feature = "secret")]
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(feature = "secret")]
fn new_stack(config: StackConfig, seed: u64) -> Stack {
    use core_crate::Secret;
    let mut state = seed;
    let mut bytes = [0u8; Secret::LEN];
    for half in bytes.chunks_exact_mut(8) {
        half.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    Stack::new(config, Secret::from_bytes(bytes))
}

#[cfg(not(feature = "secret"))]
fn new_stack(config: StackConfig, seed: u64) -> Stack {
    Stack::new(StackConfig { seed, ..config })
}

struct Pair {
    a: Stack,
    b: Stack,
    ia: IfaceId,
    ib: IfaceId,
    frame: Vec<u8>,
    clock: Instant,
    step: u64,
    /// Frames moved so far.
    frames: u64,
}

impl Pair {
    fn new(mtu: usize, tcp: TcpConfig, step: u64) -> Pair {
        let stack = |seed, mac: u8, addr| {
            #[allow(unused_mut)]
            let mut config = StackConfig {
                tcp: tcp.clone(),
                ..StackConfig::default()
            };
            #[cfg(feature = "ipv6cfg")]
            {
                config.ipv6.dad_transmits = 0;
                config.ipv6.router_solicitations = 0;
            }
            let mut stack = new_stack(config, seed);
            let mac = ethernet::Address([2, 0, 0, 0, 0, mac]);
            let iface =
                stack.add_interface(IfaceConfig::new(mac, mtu).with_offloads(Offloads::NONE));
            stack.add_address(
                Instant::ZERO,
                iface,
                Cidr::new(addr, 24).expect("valid prefix"),
            );
            (stack, iface)
        };
        let (a, ia) = stack(1, 1, A);
        let (b, ib) = stack(2, 2, B);
        let mut pair = Pair {
            a,
            b,
            ia,
            ib,
            frame: vec![0; mtu + ethernet::HEADER_LEN],
            clock: Instant::ZERO,
            step,
            frames: 0,
        };
        pair.pump();
        pair
    }

    fn pump(&mut self) {
        let now = Instant::from_nanos(self.clock.as_nanos() + self.step);
        self.clock = now;
        for stack in [&mut self.a, &mut self.b] {
            if stack.poll_timeout().is_some_and(|t| t <= now) {
                stack.handle_timeout(now);
            }
        }
        loop {
            let mut moved = 0;
            while let Some(tx) = self.a.poll_transmit(now, &mut self.frame) {
                self.b.handle_frame(now, self.ib, &self.frame[..tx.len]);
                moved += 1;
            }
            while let Some(tx) = self.b.poll_transmit(now, &mut self.frame) {
                self.a.handle_frame(now, self.ia, &self.frame[..tx.len]);
                moved += 1;
            }
            self.frames += moved;
            if moved == 0 {
                break;
            }
        }
        while self.a.poll_event().is_some() {}
        while self.b.poll_event().is_some() {}
    }

    fn listen(&mut self, port: u16, backlog: usize) -> TcpHandle {
        self.b
            .tcp_listen(SocketAddrV4::new(B, port), backlog)
            .expect("listen")
    }

    fn open(&mut self, listener: TcpHandle, port: u16) -> (TcpHandle, TcpHandle) {
        let now = self.clock;
        let client = self
            .a
            .tcp_connect(now, SocketAddrV4::new(A, 0), SocketAddrV4::new(B, port))
            .expect("connect");
        for _ in 0..1000 {
            self.pump();
            if let Ok(server) = self.b.tcp_accept(listener) {
                return (client, server);
            }
        }
        panic!("connection to port {port} never established");
    }
}

fn options() -> TcpConfig {
    TcpConfig {
        timestamps: true,
        sack: true,
        ..TcpConfig::default()
    }
}

fn small_config() -> TcpConfig {
    TcpConfig {
        nodelay: true,
        ..options()
    }
}

fn round_trip(pair: &mut Pair, client: TcpHandle, server: TcpHandle) {
    let now = pair.clock;
    let mut byte = [0u8; 1];
    pair.a.tcp_send(now, client, b"q").expect("send request");
    pair.pump();
    let n = pair
        .b
        .tcp_recv(now, server, &mut byte)
        .expect("read request");
    assert_eq!(n, 1);
    pair.b.tcp_send(now, server, b"r").expect("send response");
    pair.pump();
    let n = pair
        .a
        .tcp_recv(now, client, &mut byte)
        .expect("read response");
    assert_eq!(n, 1);
}

fn churn_connection(pair: &mut Pair, listener: TcpHandle) {
    let mut byte = [0u8; 1];
    let (client, server) = pair.open(listener, PORT);
    let now = pair.clock;
    pair.a.tcp_send(now, client, b"x").expect("send");
    pair.pump();
    let n = pair
        .b
        .tcp_recv(now, server, &mut byte)
        .expect("server read");
    assert_eq!(n, 1);
    pair.b.tcp_close(now, server).expect("server close");
    pair.pump();
    match pair.a.tcp_recv(now, client, &mut byte) {
        Ok(0) => {}
        other => panic!("churn: client expected EOF, got {other:?}"),
    }
    pair.a.tcp_close(now, client).expect("client close");
    pair.pump();
}

struct Bulk {
    pair: Pair,
    client: TcpHandle,
    server: TcpHandle,
    pattern: Vec<u8>,
    read_buffer: Vec<u8>,
    sent: u64,
    received: u64,
}

impl Bulk {
    fn open() -> Bulk {
        let tcp = TcpConfig {
            send_buffer: BULK_BUFFER,
            recv_buffer: BULK_BUFFER,
            ..options()
        };
        let mut pair = Pair::new(1500, tcp, BULK_TICK_NS);
        let listener = pair.listen(PORT, 8);
        let (client, server) = pair.open(listener, PORT);
        // The bench's pattern: any bytes do (no offload: checksums are computed).
        let pattern = (0..256 * 1024u32)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        Bulk {
            pair,
            client,
            server,
            pattern,
            read_buffer: vec![0; 256 * 1024],
            sent: 0,
            received: 0,
        }
    }

    fn step(&mut self, limit: u64) -> u64 {
        let now = self.pair.clock;
        let len = self.pattern.len() as u64;
        while self.sent < limit {
            let start = (self.sent % len) as usize;
            let end = (start as u64 + (limit - self.sent).min(len)).min(len) as usize;
            let n = match self
                .pair
                .a
                .tcp_send(now, self.client, &self.pattern[start..end])
            {
                Ok(n) => n,
                Err(TcpError::WouldBlock) => 0,
                Err(e) => panic!("send: {e}"),
            };
            if n == 0 {
                break;
            }
            self.sent += n as u64;
        }
        self.pair.pump();
        loop {
            match self
                .pair
                .b
                .tcp_recv(now, self.server, &mut self.read_buffer)
            {
                Ok(0) | Err(TcpError::WouldBlock) => return self.received,
                Ok(n) => self.received += n as u64,
                Err(e) => panic!("recv: {e}"),
            }
        }
    }
}

mod breakdown {
    use super::*;

    #[inline(never)]
    pub fn measured_ping_pong(pair: &mut Pair, c: TcpHandle, s: TcpHandle, rounds: u64) {
        for _ in 0..rounds {
            round_trip(pair, c, s);
        }
    }

    #[inline(never)]
    pub fn measured_churn(pair: &mut Pair, listener: TcpHandle, connections: u64) {
        for _ in 0..connections {
            churn_connection(pair, listener);
        }
    }

    #[inline(never)]
    pub fn measured_bulk(flow: &mut Bulk, limit: u64) -> u64 {
        let mut received = 0;
        while received < limit {
            received = flow.step(limit);
        }
        received
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map(String::as_str).unwrap_or("");
    let amount: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1000);
    match what {
        "w2" => {
            let mut pair = Pair::new(1500, small_config(), PING_TICK_NS);
            let listener = pair.listen(PORT, 8);
            let (c, s) = pair.open(listener, PORT);
            for _ in 0..100 {
                round_trip(&mut pair, c, s);
            }
            let frames = pair.frames;
            breakdown::measured_ping_pong(&mut pair, c, s, amount);
            println!("w2 {amount} frames {}", pair.frames - frames);
        }
        "w3" => {
            let mut pair = Pair::new(1500, small_config(), PING_TICK_NS);
            let listener = pair.listen(PORT, 64);
            for _ in 0..100 {
                churn_connection(&mut pair, listener);
            }
            let frames = pair.frames;
            breakdown::measured_churn(&mut pair, listener, amount);
            println!("w3 {amount} frames {}", pair.frames - frames);
        }
        "w1a" => {
            let mut flow = Bulk::open();
            let warm = (amount / 8).max(256 << 10);
            let mut received = 0;
            while received < warm {
                received = flow.step(warm);
            }
            let frames = flow.pair.frames;
            let got = breakdown::measured_bulk(&mut flow, received + amount) - received;
            println!("w1a {got} frames {}", flow.pair.frames - frames);
        }
        "mem" => {
            let n = amount as usize;
            let mut pair = Pair::new(1500, small_config(), PING_TICK_NS);
            let listener = pair.listen(PORT, 1024);
            let mut conns = Vec::with_capacity(n);
            let base = LIVE.load(Ordering::Relaxed);
            for _ in 0..n {
                conns.push(pair.open(listener, PORT));
            }
            let grown = LIVE.load(Ordering::Relaxed) - base;
            println!("mem {n} {:.0}", grown as f64 / (2 * n) as f64);
        }
        _ => {
            eprintln!("usage: bisect-harness w2|w3|w1a|mem N");
            std::process::exit(2);
        }
    }
}
