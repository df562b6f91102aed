//! A ttcp-style bulk transfer between two simulated hosts: the experiment behind
//! `imp ttcp`, the TCP acceptance matrix and the seed-paper scenarios.
//!
//! Host `a` (10.0.0.1) connects to host `b` (10.0.0.2) port 5001 and writes `bytes`
//! bytes of a seeded pseudo-random stream ([`StreamPattern`]) in `record`-byte writes,
//! then closes. `b` reads until end of stream, comparing what it gets with the stream
//! ([`StreamCheck`]). The transfer is good when `b` saw exactly the stream `a` wrote:
//! same length, same bytes. [`Pattern`] and [`StreamHash`] are for streams made
//! elsewhere (the simulator's text-mode flows, the tests' own senders).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

use impnet_core::tcp::{TcpConfig, TcpError, TcpHandle, TcpInfo, TcpStats};
use impnet_core::{Duration, Instant, StackConfig};
use impnet_phy::LinkConfig;
use impnet_wire::ipv4::Cidr;

use crate::stream::{StreamCheck, StreamPattern};
use crate::{Flow, HostId, LinkId, Sim, SimError};

/// Sender's address.
pub const SENDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Receiver's address.
pub const RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Receiver's port (ttcp's).
pub const PORT: u16 = 5001;

/// What to transfer and over what.
#[derive(Debug, Clone)]
pub struct BulkConfig {
    /// Bytes to move.
    pub bytes: u64,
    /// Bytes per application write.
    pub record: usize,
    /// The link between the hosts (both directions alike).
    pub link: LinkConfig,
    /// TCP settings of the sender.
    pub sender_tcp: TcpConfig,
    /// TCP settings of the receiver.
    pub receiver_tcp: TcpConfig,
    /// Simulation seed.
    pub seed: u64,
    /// Give up (an error naming the seed) after this much virtual time.
    pub time_limit: Duration,
    /// Capture the link to this pcap file.
    pub pcap: Option<PathBuf>,
}

impl BulkConfig {
    /// A transfer of `bytes` over `link` with default TCP settings.
    pub fn new(bytes: u64, link: LinkConfig, seed: u64) -> BulkConfig {
        BulkConfig {
            bytes,
            record: 8192,
            link,
            sender_tcp: TcpConfig::default(),
            receiver_tcp: TcpConfig::default(),
            seed,
            time_limit: Duration::from_secs(3600 * 24),
            pcap: None,
        }
    }
}

/// What a bulk transfer measured.
#[derive(Debug, Clone)]
pub struct BulkResult {
    /// Bytes the receiver got.
    pub bytes: u64,
    /// Virtual seconds from the first SYN to the last byte read.
    pub seconds: f64,
    /// Payload bits per second over the whole transfer.
    pub goodput_bps: f64,
    /// Payload bits per second from the moment a tenth of the bytes had arrived to the
    /// end: the rate after slow start.
    pub steady_goodput_bps: f64,
    /// Goodput as a percentage of the raw link rate (0 when the rate is unlimited).
    pub capacity_pct: f64,
    /// Segments the sender retransmitted.
    pub retransmits: u64,
    /// Sent and received streams are identical: the same length, and every byte read
    /// compared with the one written there ([`StreamCheck`]).
    pub hash_ok: bool,
    /// Hash over every frame and its delivery time: equal runs have equal hashes.
    pub trace_hash: u64,
    /// Simulator events processed.
    pub steps: u64,
    /// Frames the link delivered from sender to receiver (data, fragments, ACKs of the
    /// reverse direction excluded).
    pub frames_sender_to_receiver: u64,
    /// The sender's connection state at the end.
    pub sender_info: Option<TcpInfo>,
    /// The sender's TCP counters at the end.
    pub sender_stats: TcpStats,
    /// The sender's TCP counters when the receiver had read half the bytes: subtract
    /// them from `sender_stats` for what the second half of the transfer cost.
    pub sender_stats_at_half: Option<TcpStats>,
}

/// A 64-bit hash of a byte stream fed in arbitrary pieces (the result does not depend
/// on how the stream was cut): FNV-1a over the stream's 8-byte words, the last partial
/// word kept until more bytes come.
#[derive(Debug, Clone, Copy)]
pub struct StreamHash {
    hash: u64,
    len: u64,
    /// The stream's bytes since the last whole word (`len % 8` of them).
    partial: [u8; 8],
}

impl Default for StreamHash {
    fn default() -> Self {
        StreamHash {
            hash: 0xcbf2_9ce4_8422_2325,
            len: 0,
            partial: [0; 8],
        }
    }
}

const STREAM_PRIME: u64 = 0x0000_0100_0000_01b3;

impl StreamHash {
    /// Feed more of the stream.
    pub fn update(&mut self, mut bytes: &[u8]) {
        let have = (self.len % 8) as usize;
        self.len += bytes.len() as u64;
        if have > 0 {
            let take = (8 - have).min(bytes.len());
            self.partial[have..have + take].copy_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if have + take < 8 {
                return;
            }
            self.word(self.partial);
        }
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.word(w);
        }
        let rest = words.remainder();
        self.partial[..rest.len()].copy_from_slice(rest);
    }

    fn word(&mut self, word: [u8; 8]) {
        self.hash = (self.hash ^ u64::from_le_bytes(word)).wrapping_mul(STREAM_PRIME);
    }

    /// The hash so far, mixed with the length.
    pub fn finish(&self) -> u64 {
        let mut hash = self.hash;
        for &b in &self.partial[..(self.len % 8) as usize] {
            hash = (hash ^ u64::from(b)).wrapping_mul(STREAM_PRIME);
        }
        let mut z = hash ^ self.len.rotate_left(32);
        z = (z ^ (z >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        z ^ (z >> 33)
    }
    /// Bytes fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }
    /// Nothing fed yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The seeded pseudo-random byte stream the sender writes.
#[derive(Debug, Clone)]
pub struct Pattern {
    state: u64,
}

impl Pattern {
    /// The stream for `seed`.
    pub fn new(seed: u64) -> Pattern {
        Pattern {
            state: seed ^ 0x5851_f42d_4c95_7f2d | 1,
        }
    }
    /// Fill `out` with the next bytes of the stream.
    /// A short last chunk takes the first bytes of a whole step (the rest of that
    /// step is not carried over to the next call).
    pub fn fill(&mut self, out: &mut [u8]) {
        // Whole words first: a fixed-size copy is one store, where a chunk of
        // variable length would be a `memcpy` call per 8 bytes.
        let mut words = out.chunks_exact_mut(8);
        for word in &mut words {
            word.copy_from_slice(&self.step().to_le_bytes());
        }
        let rest = words.into_remainder();
        if !rest.is_empty() {
            let len = rest.len();
            rest.copy_from_slice(&self.step().to_le_bytes()[..len]);
        }
    }

    /// The next xorshift64 state.
    #[inline]
    fn step(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }
}

struct Sender {
    handle: TcpHandle,
    /// The stream: record `n` is its bytes from `written` when it was made.
    stream: StreamPattern,
    record: Vec<u8>,
    /// Bytes of the current record in `record`.
    filled: usize,
    /// Bytes of the current record the stack has accepted.
    offset: usize,
    written: u64,
    closed: bool,
}

struct Receiver {
    listener: TcpHandle,
    conn: Option<TcpHandle>,
    /// What was read, checked against the sender's stream.
    check: StreamCheck,
    eof: bool,
    tenth_at: Option<Instant>,
    done_at: Option<Instant>,
    /// The sender's counters when half the bytes were read.
    half_stats: Option<TcpStats>,
}

/// What [`run_bulk_beside`]'s companion sees of the transfer.
#[derive(Debug, Clone, Copy)]
pub struct Transfer {
    /// The link between the hosts (side 0 is the sender's).
    pub link: LinkId,
    /// The sending host (10.0.0.1).
    pub sender: HostId,
    /// The receiving host (10.0.0.2).
    pub receiver: HostId,
    /// The sender's connection.
    pub sender_conn: TcpHandle,
    /// The receiver's connection, once accepted.
    pub receiver_conn: Option<TcpHandle>,
}

/// Run a bulk transfer and measure it.
pub fn run_bulk(config: &BulkConfig) -> Result<BulkResult, BulkError> {
    run_bulk_beside(config, |_, _| None)
}

/// [`run_bulk`] with `beside` running next to the transfer: an attacker or a flood
/// that injects frames ([`Sim::inject`]) or drives other sockets. It is called after
/// every simulator event and returns when it must be called next at the latest
/// (`None`: after the next event only).
pub fn run_bulk_beside<F>(config: &BulkConfig, mut beside: F) -> Result<BulkResult, BulkError>
where
    F: FnMut(&mut Sim, &Transfer) -> Option<Instant>,
{
    let (mut sim, (a, b), link, listener, handle, start) = setup(config)?;
    let mut sender = Sender {
        handle,
        stream: StreamPattern::new(config.seed),
        record: vec![0; config.record],
        filled: 0,
        offset: 0,
        written: 0,
        closed: false,
    };
    let mut receiver = Receiver {
        listener,
        conn: None,
        check: StreamCheck::new(StreamPattern::new(config.seed)),
        eof: false,
        tenth_at: None,
        done_at: None,
        half_stats: None,
    };
    let mut buf = vec![0u8; 256 * 1024];
    let mut failure = None;
    let steps_cap = 200 + config.bytes / 100 + config.time_limit.as_millis() * 20;
    let run = sim.run(steps_cap, start + config.time_limit, |sim| {
        let step = drive_sender(sim, a, config, &mut sender)
            .and_then(|()| drive_receiver(sim, (a, b), config.bytes, &mut receiver, &mut buf));
        match step {
            Err(e) => {
                failure = Some(e);
                Flow::Done
            }
            Ok(()) if receiver.eof && sender.closed => Flow::Done,
            Ok(()) => {
                let transfer = Transfer {
                    link,
                    sender: a,
                    receiver: b,
                    sender_conn: sender.handle,
                    receiver_conn: receiver.conn,
                };
                match beside(sim, &transfer) {
                    Some(at) => Flow::WakeAt(at.max(sim.now())),
                    None => Flow::Continue,
                }
            }
        }
    });
    // A failed call, or a connection that ended and left the network quiet (timed
    // out, refused, unreachable): report why, not the silence.
    let conns = [(a, Some(sender.handle)), (b, receiver.conn)];
    if let Some(e) = failure.or_else(|| run.is_err().then(|| ended_with(&mut sim, conns))?) {
        return Err(BulkError::Tcp(e).with_seed(config.seed));
    }
    run.map_err(BulkError::Sim)?;
    sim.flush_captures()
        .map_err(|e| BulkError::Config(format!("cannot write the pcap file: {e}")))?;
    Ok(measure(&sim, a, config, &sender, &receiver, start))
}

/// The two hosts, their link, the listener and the sender's connect call.
#[allow(clippy::type_complexity)]
fn setup(
    config: &BulkConfig,
) -> Result<(Sim, (HostId, HostId), LinkId, TcpHandle, TcpHandle, Instant), BulkError> {
    config
        .link
        .validate()
        .map_err(|e| BulkError::Config(format!("bad link settings: {e}")))?;
    if config.record == 0 {
        return Err(BulkError::Config(
            "the record size must be at least 1 byte".into(),
        ));
    }
    let mut sim = Sim::new(config.seed);
    let stack = |tcp: &TcpConfig| StackConfig {
        tcp: tcp.clone(),
        ..StackConfig::default()
    };
    let a = sim.add_host("sender", stack(&config.sender_tcp));
    let b = sim.add_host("receiver", stack(&config.receiver_tcp));
    let cidr = |addr| Cidr::new(addr, 24).expect("a /24 is a valid prefix");
    let link = sim
        .connect(a, cidr(SENDER), b, cidr(RECEIVER), config.link)
        .map_err(|e| BulkError::Config(format!("bad link settings: {e}")))?;
    if let Some(path) = &config.pcap {
        sim.capture(link, path)
            .map_err(|e| BulkError::Config(format!("cannot write {}: {e}", path.display())))?;
    }
    let listener = sim
        .host_mut(b)
        .tcp_listen(SocketAddrV4::new(RECEIVER, PORT), 16)
        .map_err(BulkError::Tcp)?;
    let start = sim.now();
    let handle = sim
        .host_mut(a)
        .tcp_connect(
            start,
            SocketAddrV4::new(SENDER, 0),
            SocketAddrV4::new(RECEIVER, PORT),
        )
        .map_err(BulkError::Tcp)?;
    Ok((sim, (a, b), link, listener, handle, start))
}

/// The error one of `conns` (host, handle) ended with, if one did and is still known.
fn ended_with(sim: &mut Sim, conns: [(HostId, Option<TcpHandle>); 2]) -> Option<TcpError> {
    conns
        .into_iter()
        .find_map(|(host, conn)| sim.host_mut(host).tcp_error(conn?).ok().flatten())
}

fn drive_sender(
    sim: &mut Sim,
    a: HostId,
    config: &BulkConfig,
    s: &mut Sender,
) -> Result<(), TcpError> {
    let now = sim.now();
    let stack = sim.host_mut(a);
    while s.written < config.bytes || s.offset < s.filled {
        if s.offset == s.filled {
            let n = (config.bytes - s.written).min(config.record as u64) as usize;
            s.stream.fill(s.written, &mut s.record[..n]);
            s.written += n as u64;
            s.filled = n;
            s.offset = 0;
        }
        match stack.tcp_send(now, s.handle, &s.record[s.offset..s.filled]) {
            Ok(0) | Err(TcpError::WouldBlock) => return Ok(()),
            Ok(n) => s.offset += n,
            Err(e) => return Err(e),
        }
    }
    if !s.closed {
        stack.tcp_close(now, s.handle)?;
        s.closed = true;
    }
    Ok(())
}

fn drive_receiver(
    sim: &mut Sim,
    (a, b): (HostId, HostId),
    expected: u64,
    r: &mut Receiver,
    buf: &mut [u8],
) -> Result<(), TcpError> {
    let now = sim.now();
    let stack = sim.host_mut(b);
    let conn = match r.conn {
        Some(c) => c,
        None => match stack.tcp_accept(r.listener) {
            Ok(c) => *r.conn.insert(c),
            Err(TcpError::WouldBlock) => return Ok(()),
            Err(e) => return Err(e),
        },
    };
    while !r.eof {
        match stack.tcp_recv(now, conn, buf) {
            Ok(0) => {
                r.eof = true;
                r.done_at = Some(now);
                stack.tcp_close(now, conn)?;
            }
            Ok(n) => {
                r.check.update(&buf[..n]);
                if r.tenth_at.is_none() && r.check.len() * 10 >= expected {
                    r.tenth_at = Some(now);
                }
            }
            Err(TcpError::WouldBlock) => break,
            Err(e) => return Err(e),
        }
    }
    if r.half_stats.is_none() && r.check.len() * 2 >= expected {
        r.half_stats = Some(sim.host(a).tcp_stats().clone());
    }
    Ok(())
}

fn measure(
    sim: &Sim,
    a: HostId,
    config: &BulkConfig,
    s: &Sender,
    r: &Receiver,
    start: Instant,
) -> BulkResult {
    let end = r.done_at.unwrap_or(sim.now());
    let seconds = (end - start).as_secs_f64().max(1e-9);
    let bytes = r.check.len();
    let goodput_bps = bytes as f64 * 8.0 / seconds;
    let tenth = r.tenth_at.unwrap_or(start);
    let steady_secs = (end - tenth).as_secs_f64();
    let steady_bytes = bytes - bytes / 10;
    let steady_goodput_bps = if steady_secs > 0.0 {
        steady_bytes as f64 * 8.0 / steady_secs
    } else {
        goodput_bps
    };
    let rate = config.link.rate_bps as f64;
    let sender_info = sim.host(a).tcp_info(s.handle);
    BulkResult {
        bytes,
        seconds,
        goodput_bps,
        steady_goodput_bps,
        capacity_pct: if rate > 0.0 {
            100.0 * goodput_bps / rate
        } else {
            0.0
        },
        retransmits: sim.host(a).tcp_stats().retransmitted,
        hash_ok: r.check.intact() && s.written == bytes,
        trace_hash: sim.trace_hash(),
        steps: sim.steps(),
        frames_sender_to_receiver: sim.link_stats(crate::LinkId(0), 0).delivered,
        sender_info,
        sender_stats: sim.host(a).tcp_stats().clone(),
        sender_stats_at_half: r.half_stats.clone(),
    }
}

/// Why a bulk transfer could not be measured.
#[derive(Debug, Clone)]
pub enum BulkError {
    /// The configuration is impossible.
    Config(String),
    /// A TCP call failed (with the seed, when known).
    Tcp(TcpError),
    /// A TCP call failed in the run with this seed.
    TcpInRun(TcpError, u64),
    /// The simulation stopped (step cap, time limit, deadlock); names its seed.
    Sim(SimError),
}

impl BulkError {
    fn with_seed(self, seed: u64) -> BulkError {
        match self {
            BulkError::Tcp(e) => BulkError::TcpInRun(e, seed),
            other => other,
        }
    }
}

impl std::fmt::Display for BulkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BulkError::Config(msg) => f.write_str(msg),
            BulkError::Tcp(e) => write!(f, "the transfer failed: {e}"),
            BulkError::TcpInRun(e, seed) => {
                write!(f, "the transfer failed in the run with seed {seed}: {e}")
            }
            BulkError::Sim(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BulkError {}

#[cfg(test)]
mod tests {
    use super::{Pattern, StreamHash};

    #[test]
    fn the_pattern_is_one_xorshift_step_per_eight_bytes_and_a_cut_word_is_not_carried() {
        // Written out independently of `Pattern::fill`: xorshift64 (13, 7, 17), each
        // state's little-endian bytes, a short tail taking the first bytes of a step.
        let seed = 0x1234_5678_9abc_def0u64;
        let mut state = seed ^ 0x5851_f42d_4c95_7f2d | 1;
        let mut expected = Vec::new();
        for len in [0usize, 1, 8, 13, 1448, 7, 64, 3] {
            let mut left = len;
            while left > 0 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let take = left.min(8);
                expected.extend_from_slice(&state.to_le_bytes()[..take]);
                left -= take;
            }
        }
        let mut pattern = Pattern::new(seed);
        let mut got = Vec::new();
        for len in [0usize, 1, 8, 13, 1448, 7, 64, 3] {
            let mut out = vec![0u8; len];
            pattern.fill(&mut out);
            got.extend_from_slice(&out);
        }
        assert_eq!(got, expected);
        assert!(got.iter().any(|&b| b != 0));
    }

    #[test]
    fn the_stream_hash_does_not_depend_on_the_cuts_but_on_every_byte() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let mut whole = StreamHash::default();
        whole.update(&data);
        for cut in [1, 3, 7, 8, 9, 64, 333] {
            let mut pieces = StreamHash::default();
            for chunk in data.chunks(cut) {
                pieces.update(chunk);
            }
            assert_eq!(pieces.finish(), whole.finish(), "cut {cut}");
        }
        for at in [0, 5, 500, 999] {
            let mut changed = data.clone();
            changed[at] ^= 1;
            let mut other = StreamHash::default();
            other.update(&changed);
            assert_ne!(other.finish(), whole.finish(), "byte {at}");
        }
        let mut shorter = StreamHash::default();
        shorter.update(&data[..999]);
        assert_ne!(shorter.finish(), whole.finish());
    }
}
