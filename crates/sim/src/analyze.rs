//! Judging the TCP connections in a capture (`imp analyze`): per connection and
//! direction, segments below the MSS, retransmissions (classified as Wireshark does, so
//! the count agrees with tshark's `tcp.analysis.retransmission`), spurious ones, the
//! longest stall, RTO-like retransmissions, pure and piggy-backed ACKs, zero-window
//! events, RTT samples and goodput.
//!
//! [`analyze_capture`] reads a pcap or pcapng file ([`impnet_phy::PcapReader`]);
//! [`Analyzer`] takes frames ([`Analyzer::frame`]) or parsed segments
//! ([`Analyzer::segment`]) one at a time.
//!
//! Definitions (per direction, "the sender" being the side that sends it):
//!
//! - **MSS**: what the peer announced in its SYN (536 without one), lowered to the
//!   sender's own announcement, minus 12 bytes when both SYNs carried timestamps.
//!   **Segments below the MSS** are new-data segments (retransmissions not counted)
//!   shorter than that, except the last data segment before the sender's FIN, the
//!   end of the capture or data from the peer (a reply: the short segment ended a
//!   message, as an FTP command or reply does).
//! - **Retransmissions**: Wireshark's three kinds (see `analyze/wireshark.rs`); out of
//!   order segments, keep-alives and zero-window probes are not retransmissions.
//!   **Spurious**: a retransmission of data the peer had already acknowledged.
//! - **Stall**: a time with data outstanding (sent, not yet acknowledged) and nothing
//!   sent by the sender; it runs from the sender's last segment with data, SYN or FIN
//!   to its next one or to the ACK that covers everything.
//! - **RTO**: a retransmission sent after the sender had been silent for at least
//!   200 ms (the smallest RTO of Linux and imp); a fast retransmission does not wait
//!   that long.
//! - **Pure ACK**: ACK set, no data, no SYN/FIN/RST; **piggy-backed**: ACK on data.
//! - **Uncombined ACK**: a pure ACK followed within 200 ms (the longest delayed ACK of
//!   Linux and imp) by data from the same side carrying the same acknowledgment, the
//!   peer having sent nothing between: the ACK could have ridden on that data.
//!   **Combined**: data whose acknowledgment is new (the first this side sends for the
//!   peer's latest segments).
//! - **Timeout**: the longest silence before a retransmission (`longest_timeout_ms`).
//! - **Verdict** ([`Verdict`]): seed 003's four failings ("less than MSS sized
//!   packets, too many retransmissions, timeouts of 20 seconds or more, and failure to
//!   combine ACKs with bidirectional data"), each judged from the counts above.
//! - **Given up** ([`GaveUp`]): the sender's last segments with data were at least
//!   [`GAVE_UP_RETRANSMISSIONS`] retransmissions of the same unacknowledged data, with
//!   no progress after, and then it sent a RST, or fell silent for the rest of the
//!   capture (at least twice the last gap between its retransmissions, and a minute):
//!   the connection was aborted by its transmission (user) timeout, as seed 003's
//!   "10 minute transmission timeout". The span runs from the last acknowledgment that
//!   advanced (or the first transmission of the data) to the RST or the last
//!   retransmission.
//! - **Zero-window events**: the sender starts advertising a zero window (segments
//!   repeating it are counted in `zero_window_segments`).
//! - **RTT**: from a segment with new data (or SYN/FIN) to the first ACK covering it,
//!   one sample per advancing ACK (from the newest segment it covers), none from a
//!   segment any part of which was sent again (Karn). Measured at the capture point.
//! - **Goodput**: bytes of new data over the time from the first to the last segment
//!   carrying data.

mod wireshark;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use impnet_phy::pcap::{PcapError, PcapReader, ip_payload};
use impnet_wire::{ipv4, ipv6, ipv6ext, tcp};
use serde::Serialize;

use wireshark::{Flow, Seg};

/// A silence this long before a retransmission makes it an RTO.
pub const RTO_GAP_NS: u64 = 200_000_000;
/// Data this soon after a pure ACK with the same acknowledgment could have carried it.
pub const COMBINE_WINDOW_NS: u64 = 200_000_000;
/// Seed 003's "timeouts of 20 seconds or more".
pub const LONG_TIMEOUT_MS: f64 = 20_000.0;
/// Retransmissions of the same data, with nothing acknowledged after, that make a
/// sender's end a give-up ([`GaveUp`]) rather than a loss repaired.
pub const GAVE_UP_RETRANSMISSIONS: u64 = 3;
/// The least silence after the last retransmission that counts as giving up, when no
/// RST says so.
pub const GAVE_UP_SILENCE_NS: u64 = 60_000_000_000;
/// The MSS assumed when the peer's SYN was not captured (RFC 9293 §3.7.1).
pub const DEFAULT_MSS: u16 = 536;

/// RTT samples of one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rtt {
    /// Samples taken.
    pub samples: u64,
    /// Smallest, milliseconds.
    pub min: f64,
    /// Mean, milliseconds.
    pub avg: f64,
    /// Largest, milliseconds.
    pub max: f64,
}

impl Rtt {
    fn add(&mut self, ns: u64) {
        let ms = ns as f64 / 1e6;
        if self.samples == 0 {
            self.min = ms;
            self.max = ms;
        }
        self.min = self.min.min(ms);
        self.max = self.max.max(ms);
        self.avg += (ms - self.avg) / (self.samples + 1) as f64;
        self.samples += 1;
    }

    fn merge(&self, other: &Rtt) -> Rtt {
        if other.samples == 0 {
            return *self;
        }
        if self.samples == 0 {
            return *other;
        }
        let n = self.samples + other.samples;
        Rtt {
            samples: n,
            min: self.min.min(other.min),
            max: self.max.max(other.max),
            avg: (self.avg * self.samples as f64 + other.avg * other.samples as f64) / n as f64,
        }
    }
}

/// What one direction of a connection did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Direction {
    /// Sender, `a.b.c.d:port`.
    pub from: String,
    /// Receiver.
    pub to: String,
    /// Segments sent.
    pub segments: u64,
    /// Segments carrying data.
    pub data_segments: u64,
    /// Payload bytes, retransmissions included.
    pub bytes: u64,
    /// Payload bytes of new data.
    pub unique_bytes: u64,
    /// The MSS segments are measured against.
    pub mss: u16,
    /// New-data segments shorter than the MSS (the last one excluded).
    pub segments_below_mss: u64,
    /// Retransmissions of all three kinds (tshark's `tcp.analysis.retransmission`).
    pub retransmissions: u64,
    /// Of which fast retransmissions.
    pub fast_retransmissions: u64,
    /// Of which spurious.
    pub spurious_retransmissions: u64,
    /// Retransmissions after at least 200 ms of silence.
    pub rtos: u64,
    /// Out-of-order segments (not retransmissions).
    pub out_of_order: u64,
    /// Keep-alives.
    pub keep_alives: u64,
    /// Zero-window probes.
    pub zero_window_probes: u64,
    /// Duplicate ACKs.
    pub duplicate_acks: u64,
    /// Longest stall, milliseconds.
    pub longest_stall_ms: f64,
    /// Pure ACKs.
    pub pure_acks: u64,
    /// ACKs on data.
    pub piggybacked_acks: u64,
    /// Pure ACKs whose acknowledgment the same side's data carried again soon after.
    pub uncombined_acks: u64,
    /// Data segments carrying a new acknowledgment (see the module docs).
    pub combined_acks: u64,
    /// Longest silence before a retransmission, milliseconds.
    pub longest_timeout_ms: f64,
    /// Seed 003's failings, judged for this direction.
    pub verdict: Verdict,
    /// Times the sender started advertising a zero window.
    pub zero_window_events: u64,
    /// Segments advertising a zero window.
    pub zero_window_segments: u64,
    /// RTT of this direction's data.
    pub rtt_ms: Rtt,
    /// New-data bits per second between the first and the last data segment.
    pub goodput_bps: f64,
    /// The sender gave the connection up after retransmitting the same data (the
    /// transmission timeout), if it did.
    pub gave_up: Option<GaveUp>,
}

/// A sender that retransmitted the same data with no progress and then stopped: a
/// connection aborted by its transmission (user) timeout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct GaveUp {
    /// Retransmissions of the data at SND.UNA, one after another, nothing acknowledged.
    pub retransmissions: u64,
    /// Seconds from the last progress (an acknowledgment that advanced, or the data's
    /// first transmission) to the RST or, without one, the last retransmission.
    pub seconds: f64,
    /// Whether it ended with a RST (else with silence).
    pub reset: bool,
}

impl GaveUp {
    /// The verdict line: "aborted after the transmission timeout: ...".
    pub fn describe(&self) -> String {
        let span = if self.seconds >= 120.0 {
            format!("{:.1} min", self.seconds / 60.0)
        } else {
            format!("{:.1} s", self.seconds)
        };
        let end = if self.reset {
            "then a RST"
        } else {
            "then silence"
        };
        format!(
            "connection aborted after the transmission timeout: {} retransmissions of the \
             same data over {span} without progress, {end}",
            self.retransmissions
        )
    }
}

/// Seed 003's four failings of a TCP, judged per direction from a trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// "less than MSS sized packets": more than a quarter of the new-data segments
    /// (at least 4) below the MSS.
    pub small_segments: bool,
    /// "too many retransmissions": at least 2, and a tenth or more of the
    /// retransmissions, of data the peer had already acknowledged (spurious: sent
    /// again for nothing).
    pub too_many_retransmissions: bool,
    /// "timeouts of 20 seconds or more": a retransmission after 20 s of silence.
    pub long_timeouts: bool,
    /// "failure to combine ACKs with bidirectional data": more ACKs sent alone just
    /// before data that could have carried them than ACKs carried on data (at least
    /// 2).
    pub uncombined_acks: bool,
}

impl Verdict {
    fn judge(d: &Direction) -> Verdict {
        let new_segments = d.data_segments.saturating_sub(d.retransmissions);
        Verdict {
            small_segments: d.segments_below_mss >= 4 && d.segments_below_mss * 4 > new_segments,
            too_many_retransmissions: d.spurious_retransmissions >= 2
                && d.spurious_retransmissions * 10 >= d.retransmissions,
            long_timeouts: d.longest_timeout_ms >= LONG_TIMEOUT_MS,
            uncombined_acks: d.uncombined_acks >= 2 && d.uncombined_acks > d.combined_acks,
        }
    }

    /// The failings found, in the seed's words; empty when none.
    pub fn failings(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.small_segments {
            out.push("less than MSS sized packets");
        }
        if self.too_many_retransmissions {
            out.push("too many retransmissions");
        }
        if self.long_timeouts {
            out.push("timeouts of 20 seconds or more");
        }
        if self.uncombined_acks {
            out.push("failure to combine ACKs with bidirectional data");
        }
        out
    }
}

/// One connection: totals over both directions, and each direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Connection {
    /// The side that sent the SYN (else the first sender seen).
    pub client: String,
    /// The other side.
    pub server: String,
    /// First segment, seconds from the capture's first frame.
    pub start_s: f64,
    /// Last segment minus first, seconds.
    pub duration_s: f64,
    /// Segments, both directions.
    pub segments: u64,
    /// Retransmissions, both directions.
    pub retransmissions: u64,
    /// Fast retransmissions, both directions.
    pub fast_retransmissions: u64,
    /// Spurious retransmissions, both directions.
    pub spurious_retransmissions: u64,
    /// Segments below the MSS, both directions.
    pub segments_below_mss: u64,
    /// The longer of the two directions' longest stalls, milliseconds.
    pub longest_stall_ms: f64,
    /// RTO-like retransmissions, both directions.
    pub rtos: u64,
    /// Pure ACKs, both directions.
    pub pure_acks: u64,
    /// Piggy-backed ACKs, both directions.
    pub piggybacked_acks: u64,
    /// Zero-window events, both directions.
    pub zero_window_events: u64,
    /// RTT samples of both directions.
    pub rtt_ms: Rtt,
    /// Goodput of the direction that moved more new data, bits per second.
    pub goodput_bps: f64,
    /// Client to server, then server to client.
    pub directions: [Direction; 2],
}

/// Everything a capture showed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Analysis {
    /// Connections in order of their first segment.
    pub connections: Vec<Connection>,
    /// Frames read.
    pub frames: u64,
    /// TCP segments analysed.
    pub tcp_segments: u64,
    /// Frames that are not TCP over IPv4 or IPv6 (ARP, UDP, other link types), skipped.
    pub not_tcp: u64,
    /// IPv4 and IPv6 fragments, skipped.
    pub fragments: u64,
    /// Frames too short or malformed to read as TCP over IP, skipped.
    pub malformed: u64,
    /// Capture records the reader skipped.
    pub skipped_records: u64,
    /// Why reading stopped before the end of the file, if it did.
    pub read_error: Option<String>,
}

/// A failure to read a capture at all.
#[derive(Debug)]
pub enum AnalyzeError {
    /// The file could not be read.
    Io(std::io::Error),
    /// The file is not a capture.
    Capture(PcapError),
}

impl fmt::Display for AnalyzeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalyzeError::Io(e) => write!(f, "{e}"),
            AnalyzeError::Capture(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AnalyzeError {}

/// Reads and analyses the capture at `path`.
pub fn analyze_capture(path: impl AsRef<Path>) -> Result<Analysis, AnalyzeError> {
    let data = std::fs::read(path).map_err(AnalyzeError::Io)?;
    analyze_bytes(&data).map_err(AnalyzeError::Capture)
}

/// Analyses a capture held in memory. A file damaged past its header gives what was
/// read before the damage, with [`Analysis::read_error`] saying where.
pub fn analyze_bytes(data: &[u8]) -> Result<Analysis, PcapError> {
    let mut reader = PcapReader::new(data)?;
    let mut analyzer = Analyzer::new();
    let mut read_error = None;
    for record in reader.by_ref() {
        match record {
            Ok(r) => analyzer.frame(r.ts_nanos, r.linktype, r.data),
            Err(e) => read_error = Some(e.to_string()),
        }
    }
    let mut analysis = analyzer.finish();
    analysis.skipped_records = reader.skipped();
    analysis.read_error = read_error;
    Ok(analysis)
}

/// A TCP segment as the analyzer sees it.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number as carried.
    pub ack: u32,
    /// Control bits.
    pub flags: tcp::Flags,
    /// Window field, unscaled.
    pub window: u16,
    /// Payload length (from the IP total length, so a cut capture still counts).
    pub len: u32,
    /// MSS option.
    pub mss: Option<u16>,
    /// Whether the timestamps option is present.
    pub timestamps: bool,
}

#[derive(Debug, Default)]
struct Side {
    addr: Option<SocketAddr>,
    flow: Flow,
    base: Option<u32>,
    syn_mss: Option<u16>,
    syn_timestamps: bool,
    stats: Direction,
    /// Highest sequence number sent plus one (data, SYN, FIN).
    snd_max: Option<u32>,
    /// Highest acknowledgment received from the peer.
    acked: Option<u32>,
    last_send: Option<u64>,
    first_data: Option<u64>,
    last_data: Option<u64>,
    data_max: Option<u32>,
    pending_small: bool,
    zero_window: bool,
    /// The acknowledgment of this side's last pure ACK and when it went, while the
    /// peer has sent nothing since.
    lone_ack: Option<(u32, u64)>,
    /// The last acknowledgment this side sent.
    last_ack: Option<u32>,
    /// Segments waiting for an ACK: (end, sent at, sent again).
    rtt_queue: VecDeque<(u32, u64, bool)>,
    /// When data last became outstanding or an ACK last advanced with data still
    /// outstanding: the last progress.
    progress: Option<u64>,
    /// The run of retransmissions of the data at SND.UNA since the last progress:
    /// (sequence number, count, time between the last two, the last one's time).
    stuck: Option<(u32, u64, u64, u64)>,
    /// When this side sent a RST after such a run.
    reset_at: Option<u64>,
}

#[derive(Debug, Default)]
struct Conn {
    sides: [Side; 2],
    first_ts: u64,
    last_ts: u64,
    segments: u64,
    mru_syn: u64,
    first_rtt: u64,
}

fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn seq_max(a: Option<u32>, b: u32) -> u32 {
    match a {
        Some(a) if seq_lt(b, a) => a,
        _ => b,
    }
}

/// Feeds on frames or segments and keeps per-connection state.
#[derive(Debug, Default)]
pub struct Analyzer {
    conns: Vec<Conn>,
    by_pair: HashMap<(SocketAddr, SocketAddr), usize>,
    /// The last pair looked up in `by_pair` and its entry: a capture of one
    /// connection (the simulator's followed flows) finds it without hashing.
    last_pair: Option<((SocketAddr, SocketAddr), usize)>,
    first_ts: Option<u64>,
    /// The last frame's time: the end of the capture.
    last_ts: u64,
    frames: u64,
    tcp_segments: u64,
    not_tcp: u64,
    fragments: u64,
    malformed: u64,
}

impl Analyzer {
    /// An analyzer that has seen nothing.
    pub fn new() -> Analyzer {
        Analyzer::default()
    }

    /// One captured frame of link type `linktype`, at `ts` nanoseconds.
    pub fn frame(&mut self, ts: u64, linktype: u32, frame: &[u8]) {
        self.frames += 1;
        self.first_ts.get_or_insert(ts);
        self.last_ts = self.last_ts.max(ts);
        let Some(ip) = ip_payload(linktype, frame) else {
            self.not_tcp += 1;
            return;
        };
        let parsed = if ip[0] >> 4 == 6 {
            parse_ipv6_tcp(ip)
        } else {
            parse_ipv4_tcp(ip)
        };
        match parsed {
            Parsed::Tcp(src, dst, seg) => self.segment(ts, src, dst, &seg),
            Parsed::NotTcp => self.not_tcp += 1,
            Parsed::Fragment => self.fragments += 1,
            Parsed::Malformed => self.malformed += 1,
        }
    }

    /// One TCP segment from `src` to `dst` at `ts` nanoseconds.
    pub fn segment(&mut self, ts: u64, src: SocketAddr, dst: SocketAddr, seg: &Segment) {
        self.tcp_segments += 1;
        self.first_ts.get_or_insert(ts);
        self.last_ts = self.last_ts.max(ts);
        let index = self.conn_for(ts, src, dst, seg);
        let conn = &mut self.conns[index];
        let dir = usize::from(conn.sides[0].addr != Some(src));
        conn.observe(dir, ts, seg);
    }

    /// The connection `seg` belongs to, opening one for a new 4-tuple or for a SYN with
    /// a new initial sequence number (the ports were reused, as Wireshark decides).
    fn conn_for(&mut self, ts: u64, src: SocketAddr, dst: SocketAddr, seg: &Segment) -> usize {
        let key = if (src.ip(), src.port()) <= (dst.ip(), dst.port()) {
            (src, dst)
        } else {
            (dst, src)
        };
        let found = match self.last_pair {
            Some((pair, index)) if pair == key => Some(index),
            _ => self.by_pair.get(&key).copied(),
        };
        if let Some(index) = found {
            self.last_pair = Some((key, index));
            let conn = &self.conns[index];
            let side = &conn.sides[usize::from(conn.sides[0].addr != Some(src))];
            let reused =
                seg.flags.syn() && !seg.flags.ack() && side.base.is_some_and(|b| b != seg.seq);
            if !reused {
                return index;
            }
        }
        // The SYN-ACK's sender is the server; otherwise the sender is the client.
        let (client, server) = if seg.flags.syn() && seg.flags.ack() {
            (dst, src)
        } else {
            (src, dst)
        };
        let mut conn = Conn {
            first_ts: ts,
            ..Conn::default()
        };
        conn.sides[0].addr = Some(client);
        conn.sides[1].addr = Some(server);
        self.conns.push(conn);
        self.by_pair.insert(key, self.conns.len() - 1);
        self.last_pair = Some((key, self.conns.len() - 1));
        self.conns.len() - 1
    }

    /// The report.
    pub fn finish(self) -> Analysis {
        let first = self.first_ts.unwrap_or(0);
        let end = self.last_ts;
        Analysis {
            connections: self
                .conns
                .into_iter()
                .map(|c| c.report(first, end))
                .collect(),
            frames: self.frames,
            tcp_segments: self.tcp_segments,
            not_tcp: self.not_tcp,
            fragments: self.fragments,
            malformed: self.malformed,
            skipped_records: 0,
            read_error: None,
        }
    }
}

enum Parsed {
    Tcp(SocketAddr, SocketAddr, Segment),
    NotTcp,
    Fragment,
    Malformed,
}

/// Reads an IPv4 header and the TCP header after it. The payload may be cut short by
/// the capture's snap length: its length comes from the IP total length.
fn parse_ipv4_tcp(ip: &[u8]) -> Parsed {
    if ip.len() < ipv4::HEADER_LEN {
        return Parsed::Malformed;
    }
    let packet = ipv4::Packet::new_unchecked(ip);
    let header_len = packet.header_len();
    let total = usize::from(packet.total_len());
    if header_len < ipv4::HEADER_LEN || header_len > ip.len() || total < header_len {
        return Parsed::Malformed;
    }
    if packet.protocol() != ipv4::Protocol::Tcp {
        return Parsed::NotTcp;
    }
    if packet.is_fragment() {
        return Parsed::Fragment;
    }
    let Ok(tcp) = tcp::Packet::new_checked(&ip[header_len..]) else {
        return Parsed::Malformed;
    };
    let tcp_len = tcp.header_len();
    if total < header_len + tcp_len {
        return Parsed::Malformed;
    }
    let src = IpAddr::V4(packet.src_addr());
    let dst = IpAddr::V4(packet.dst_addr());
    tcp_parsed((src, dst), &tcp, total - header_len - tcp_len)
}

/// Reads an IPv6 header, walks its extension headers and reads the TCP header after
/// them. As for IPv4, the payload length comes from the header, not the capture.
fn parse_ipv6_tcp(ip: &[u8]) -> Parsed {
    if ip.len() < ipv6::HEADER_LEN {
        return Parsed::Malformed;
    }
    let packet = ipv6::Packet::new_unchecked(ip);
    let total = ipv6::HEADER_LEN + usize::from(packet.payload_len());
    // The walk needs the headers only; a capture cut short still holds them.
    let Ok(walk) = ipv6ext::walk(&ip[..total.min(ip.len())]) else {
        return Parsed::Malformed;
    };
    if walk
        .fragment
        .is_some_and(|(_, f)| f.frag_offset != 0 || f.more_frags)
    {
        return Parsed::Fragment;
    }
    if walk.protocol != ipv6::NextHeader::Tcp {
        return Parsed::NotTcp;
    }
    let Some(Ok(tcp)) = ip.get(walk.offset..).map(tcp::Packet::new_checked) else {
        return Parsed::Malformed;
    };
    let tcp_len = tcp.header_len();
    if total < walk.offset + tcp_len {
        return Parsed::Malformed;
    }
    let src = IpAddr::V6(packet.src_addr());
    let dst = IpAddr::V6(packet.dst_addr());
    tcp_parsed((src, dst), &tcp, total - walk.offset - tcp_len)
}

/// The segment of a TCP header between `src` and `dst` carrying `len` payload bytes.
fn tcp_parsed((src, dst): (IpAddr, IpAddr), tcp: &tcp::Packet<&[u8]>, len: usize) -> Parsed {
    let options = tcp::Options::parse(tcp.options()).unwrap_or_default();
    let seg = Segment {
        seq: tcp.seq_number(),
        ack: tcp.ack_number(),
        flags: tcp.flags(),
        window: tcp.window_len(),
        len: len as u32,
        mss: options.mss,
        timestamps: options.timestamps.is_some(),
    };
    Parsed::Tcp(
        SocketAddr::new(src, tcp.src_port()),
        SocketAddr::new(dst, tcp.dst_port()),
        seg,
    )
}

impl Conn {
    fn observe(&mut self, dir: usize, ts: u64, seg: &Segment) {
        self.last_ts = ts;
        self.segments += 1;
        let s = Seg {
            ts,
            seq: seg.seq,
            ack: seg.ack,
            len: seg.len,
            flags: seg.flags,
            window: seg.window,
        };
        self.note_base(dir, seg);
        let [a, b] = &mut self.sides;
        let (fwd, rev) = if dir == 0 { (a, b) } else { (b, a) };
        let class = wireshark::step(&mut fwd.flow, &mut rev.flow, self.first_rtt, &s);
        let mss = effective_mss(fwd, rev);
        fwd.on_sent(&s, class, mss);
        if seg.flags.ack() {
            rev.on_ack(ts, seg.ack);
        }
        fwd.on_header(seg);
        fwd.note_combining(ts, seg);
        rev.lone_ack = None;
        if seg.len > 0 {
            // A reply ends the peer's message: its last short segment was not a
            // segment cut short.
            rev.pending_small = false;
        }
        if seg.flags.syn() && !seg.flags.ack() {
            self.mru_syn = ts;
        }
        if seg.flags.ack() && !seg.flags.syn() && self.mru_syn != 0 && self.first_rtt == 0 {
            self.first_rtt = ts.saturating_sub(self.mru_syn);
        }
    }

    /// The first sequence number seen per side (Wireshark's base), which tells a SYN on
    /// reused ports from a SYN sent again; and the SYN's options.
    fn note_base(&mut self, dir: usize, seg: &Segment) {
        let side = &mut self.sides[dir];
        if side.base.is_none() {
            side.base = Some(if seg.flags.syn() {
                seg.seq
            } else {
                seg.seq.wrapping_sub(1)
            });
        }
        if seg.flags.syn() {
            side.syn_mss = seg.mss.or(side.syn_mss);
            side.syn_timestamps = seg.timestamps;
        }
        let other = &mut self.sides[1 - dir];
        if other.base.is_none() && seg.flags.ack() {
            other.base = Some(seg.ack.wrapping_sub(1));
        }
    }

    fn report(self, first: u64, end: u64) -> Connection {
        let [a, b] = &self.sides;
        let dirs = [a.report(b, end), b.report(a, end)];
        let sum = |f: fn(&Direction) -> u64| f(&dirs[0]) + f(&dirs[1]);
        let main = usize::from(dirs[1].unique_bytes > dirs[0].unique_bytes);
        Connection {
            client: dirs[0].from.clone(),
            server: dirs[0].to.clone(),
            start_s: self.first_ts.saturating_sub(first) as f64 / 1e9,
            duration_s: self.last_ts.saturating_sub(self.first_ts) as f64 / 1e9,
            segments: self.segments,
            retransmissions: sum(|d| d.retransmissions),
            fast_retransmissions: sum(|d| d.fast_retransmissions),
            spurious_retransmissions: sum(|d| d.spurious_retransmissions),
            segments_below_mss: sum(|d| d.segments_below_mss),
            longest_stall_ms: dirs[0].longest_stall_ms.max(dirs[1].longest_stall_ms),
            rtos: sum(|d| d.rtos),
            pure_acks: sum(|d| d.pure_acks),
            piggybacked_acks: sum(|d| d.piggybacked_acks),
            zero_window_events: sum(|d| d.zero_window_events),
            rtt_ms: dirs[0].rtt_ms.merge(&dirs[1].rtt_ms),
            goodput_bps: dirs[main].goodput_bps,
            directions: dirs,
        }
    }
}

/// The largest payload `fwd` may send: the peer's announced MSS, lowered to its own,
/// less the timestamps option when both SYNs carried it.
fn effective_mss(fwd: &Side, rev: &Side) -> u16 {
    let mut mss = rev.syn_mss.unwrap_or(DEFAULT_MSS);
    if let Some(own) = fwd.syn_mss {
        mss = mss.min(own);
    }
    if fwd.syn_timestamps && rev.syn_timestamps {
        mss = mss.saturating_sub(12);
    }
    mss
}

impl Side {
    /// Counts a segment this side sent, after Wireshark's analysis gave it `class`.
    fn on_sent(&mut self, s: &Seg, class: u32, mss: u16) {
        let st = &mut self.stats;
        st.segments += 1;
        st.mss = mss;
        count_class(st, class);
        let occupies = s.len > 0 || s.flags.0 & 0x03 != 0;
        if occupies {
            self.on_occupying(s, class);
        }
        if s.len > 0 {
            self.on_data(s, class, mss);
        }
        if s.flags.fin() {
            self.pending_small = false;
        }
        if s.flags.rst() && self.stuck.is_some() && self.reset_at.is_none() {
            self.reset_at = Some(s.ts);
        }
    }

    /// A segment with data, SYN or FIN: stalls, RTOs, RTT bookkeeping.
    fn on_occupying(&mut self, s: &Seg, class: u32) {
        let end = s
            .seq
            .wrapping_add(s.len)
            .wrapping_add(u32::from(s.flags.0 & 0x03 != 0));
        let outstanding = self.outstanding();
        if !outstanding {
            self.progress = Some(s.ts);
            self.stuck = None;
        }
        if class & wireshark::ANY_RETRANSMISSION != 0 {
            self.note_stuck(s);
        }
        if let Some(last) = self.last_send {
            let gap = s.ts.saturating_sub(last);
            if outstanding {
                self.stats.longest_stall_ms = self.stats.longest_stall_ms.max(gap as f64 / 1e6);
            }
            if class & wireshark::ANY_RETRANSMISSION != 0 {
                let gap_ms = gap as f64 / 1e6;
                self.stats.longest_timeout_ms = self.stats.longest_timeout_ms.max(gap_ms);
                if gap >= RTO_GAP_NS {
                    self.stats.rtos += 1;
                }
            }
        }
        self.last_send = Some(s.ts);
        let new = self.snd_max.is_none_or(|m| seq_lt(m, end));
        if class & wireshark::ANY_RETRANSMISSION != 0 || !new {
            for entry in &mut self.rtt_queue {
                if seq_lt(s.seq, entry.0) {
                    entry.2 = true;
                }
            }
        } else {
            self.rtt_queue.push_back((end, s.ts, false));
        }
        self.snd_max = Some(seq_max(self.snd_max, end));
    }

    /// A retransmission of `s.seq`: when it is the data at SND.UNA (the peer's last
    /// acknowledgment), the run of its retransmissions grows, or starts at a new
    /// SND.UNA; the rest of a go-back-N resend leaves the run as it is.
    fn note_stuck(&mut self, s: &Seg) {
        if self.acked.is_some_and(|una| una != s.seq) {
            return;
        }
        self.stuck = match self.stuck {
            Some((seq, n, _, last)) if seq == s.seq => {
                Some((seq, n + 1, s.ts.saturating_sub(last), s.ts))
            }
            _ => Some((s.seq, 1, 0, s.ts)),
        };
    }

    /// Whether this side gave up (see [`GaveUp`]), the capture ending at `end`.
    fn gave_up(&self, end: u64) -> Option<GaveUp> {
        let (_, count, gap, last) = self.stuck?;
        if count < GAVE_UP_RETRANSMISSIONS || !self.outstanding() {
            return None;
        }
        let silence = end.saturating_sub(last);
        let stopped = self.reset_at.map(|at| (at, true)).or_else(|| {
            (silence >= GAVE_UP_SILENCE_NS && silence >= 2 * gap).then_some((last, false))
        })?;
        Some(GaveUp {
            retransmissions: count,
            seconds: stopped.0.saturating_sub(self.progress.unwrap_or(0)) as f64 / 1e9,
            reset: stopped.1,
        })
    }

    fn on_data(&mut self, s: &Seg, class: u32, mss: u16) {
        let st = &mut self.stats;
        st.data_segments += 1;
        st.bytes += u64::from(s.len);
        self.first_data.get_or_insert(s.ts);
        self.last_data = Some(s.ts);
        let end = s.seq.wrapping_add(s.len);
        let from = seq_max(self.data_max, s.seq);
        if seq_lt(from, end) {
            st.unique_bytes += u64::from(end.wrapping_sub(from));
            self.data_max = Some(end);
        }
        if class & (wireshark::ANY_RETRANSMISSION | wireshark::OUT_OF_ORDER) == 0 {
            if self.pending_small {
                st.segments_below_mss += 1;
            }
            self.pending_small = s.len < u32::from(mss);
        }
    }

    fn outstanding(&self) -> bool {
        match (self.snd_max, self.acked) {
            (Some(max), Some(acked)) => seq_lt(acked, max),
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// The peer acknowledged up to `ack` at `ts`.
    fn on_ack(&mut self, ts: u64, ack: u32) {
        if self.snd_max.is_none() {
            return;
        }
        let advanced = self.acked.is_none_or(|a| seq_lt(a, ack));
        if !advanced {
            return;
        }
        let was_outstanding = self.outstanding();
        self.acked = Some(ack);
        self.progress = Some(ts);
        self.stuck = None;
        if was_outstanding
            && !self.outstanding()
            && let Some(last) = self.last_send
        {
            let gap = ts.saturating_sub(last) as f64 / 1e6;
            self.stats.longest_stall_ms = self.stats.longest_stall_ms.max(gap);
        }
        let mut newest = None;
        while let Some(&(end, sent, again)) = self.rtt_queue.front() {
            if seq_lt(ack, end) {
                break;
            }
            self.rtt_queue.pop_front();
            newest = Some((sent, again));
        }
        if let Some((sent, false)) = newest {
            self.stats.rtt_ms.add(ts.saturating_sub(sent));
        }
    }

    /// ACK kinds and the advertised window of a segment this side sent.
    fn on_header(&mut self, seg: &Segment) {
        let st = &mut self.stats;
        if seg.flags.ack() && seg.len == 0 && seg.flags.0 & 0x07 == 0 {
            st.pure_acks += 1;
        } else if seg.flags.ack() && seg.len > 0 {
            st.piggybacked_acks += 1;
        }
        if seg.flags.0 & 0x07 == 0 {
            if seg.window == 0 {
                st.zero_window_segments += 1;
                if !self.zero_window {
                    st.zero_window_events += 1;
                }
            }
            self.zero_window = seg.window == 0;
        }
    }

    /// Whether `seg`, sent at `ts`, is data that carries the acknowledgment of this
    /// side's pure ACK just before (uncombined) or a new one (combined).
    fn note_combining(&mut self, ts: u64, seg: &Segment) {
        if !seg.flags.ack() || seg.flags.rst() {
            return;
        }
        let pure = seg.len == 0 && seg.flags.0 & 0x07 == 0;
        if seg.len > 0 {
            match self.lone_ack {
                Some((ack, at)) if ack == seg.ack && ts.saturating_sub(at) <= COMBINE_WINDOW_NS => {
                    self.stats.uncombined_acks += 1;
                }
                _ if self.last_ack.is_none_or(|last| seq_lt(last, seg.ack)) => {
                    self.stats.combined_acks += 1;
                }
                _ => {}
            }
        }
        self.lone_ack = pure.then_some((seg.ack, ts));
        self.last_ack = Some(seg.ack);
    }

    fn report(&self, peer: &Side, end: u64) -> Direction {
        let addr = |s: &Side| s.addr.map(|a| a.to_string()).unwrap_or_default();
        let mut stats = self.stats.clone();
        stats.from = addr(self);
        stats.to = addr(peer);
        if let (Some(first), Some(last)) = (self.first_data, self.last_data)
            && last > first
        {
            stats.goodput_bps = stats.unique_bytes as f64 * 8.0 / ((last - first) as f64 / 1e9);
        }
        if stats.mss == 0 {
            stats.mss = effective_mss(self, peer);
        }
        stats.verdict = Verdict::judge(&stats);
        stats.gave_up = self.gave_up(end);
        stats
    }
}

fn count_class(st: &mut Direction, class: u32) {
    if class & wireshark::ANY_RETRANSMISSION != 0 {
        st.retransmissions += 1;
    }
    if class & wireshark::FAST_RETRANSMISSION != 0 {
        st.fast_retransmissions += 1;
    }
    if class & wireshark::SPURIOUS_RETRANSMISSION != 0 {
        st.spurious_retransmissions += 1;
    }
    if class & wireshark::OUT_OF_ORDER != 0 {
        st.out_of_order += 1;
    }
    if class & wireshark::KEEP_ALIVE != 0 {
        st.keep_alives += 1;
    }
    if class & wireshark::ZERO_WINDOW_PROBE != 0 {
        st.zero_window_probes += 1;
    }
    if class & wireshark::DUPLICATE_ACK != 0 {
        st.duplicate_acks += 1;
    }
}

#[cfg(test)]
mod tests;
