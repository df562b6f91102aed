//! Scenario files: an experiment described in TOML (hosts, links, flows, duration,
//! seed), parsed and validated into a [`Scenario`] that [`crate::experiment`] runs.
//!
//! The format is documented in `scenarios/README.md`. Every mistake in a file is one
//! [`ScenarioError`] whose message is a single line naming the file, the line and the
//! field; parsing never panics.

use std::fmt;
use std::net::Ipv4Addr;
use std::ops::Range;

use impnet_core::Duration;
use impnet_core::qdisc::QdiscConfig;
use impnet_core::tcp::cc::CcAlgorithm;
use impnet_core::tcp::{EcnMode, LegacyProfile, MtuProbing, RtoRule, TcpConfig};
use impnet_phy::LinkConfig;
use impnet_phy::link::spec::{QdiscKeys, UnknownAction};
use impnet_phy::link::{CrossTraffic, GcraConfig, GilbertElliott, PoliceAction, Policer};
use impnet_wire::ipv4::Cidr;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use toml::Spanned;

use crate::units;

mod cpu;
mod dumbbell;
mod overrides;
mod topology;

pub use cpu::RungSpec;
pub use overrides::Override;

/// A validated experiment.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Short name (the file stem when the file gives none).
    pub name: String,
    /// What the experiment shows.
    pub description: String,
    /// Seed of every random choice.
    pub seed: u64,
    /// Virtual time after which the run stops; unfinished flows are reported as such.
    pub duration: Duration,
    /// How often each TCP sender's `tcp_info` is sampled for the plots.
    pub sample_interval: Duration,
    /// Bytes of each frame kept in the pcap files (`None`: whole frames).
    pub pcap_snaplen: Option<usize>,
    /// The nodes (hosts and routers): the `[[host]]` entries in file order, then the
    /// `[[node]]` entries, then those a `[dumbbell]` generates.
    pub nodes: Vec<NodeSpec>,
    /// The links, in file order (then the dumbbell's).
    pub links: Vec<LinkSpec>,
    /// How routes were found.
    pub routing: Routing,
    /// Every node's static routes: computed, then those the file gives (which replace a
    /// computed route for the same prefix). Connected routes are not listed.
    pub routes: Vec<RouteSpec>,
    /// The flows, in file order (then the dumbbell's).
    pub flows: Vec<FlowSpec>,
    /// The scenario came from a `[dumbbell]`: its flows share one bottleneck.
    pub dumbbell: bool,
    /// The `[[ladder]]`: flows set beside historical figures, in order.
    pub ladder: Vec<RungSpec>,
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeKind {
    /// An end system: runs applications, never forwards.
    Host,
    /// Forwards packets between its interfaces (every interface forwards).
    Router,
}

impl NodeKind {
    /// The kind as the file spells it.
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Host => "host",
            NodeKind::Router => "router",
        }
    }
}

/// One node (host or router) and its stack settings.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Unique name.
    pub name: String,
    /// Host or router.
    pub kind: NodeKind,
    /// TCP settings of its stack.
    pub tcp: TcpConfig,
    /// Its CPU's cost model (None: the host costs no time).
    pub cpu: Option<crate::cpu::CpuProfile>,
}

/// How a scenario's routes are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// Shortest paths by hop count (ties: the smaller total delay).
    Hops,
    /// Shortest paths by total one-way delay (ties: fewer hops).
    Delay,
    /// No computed routes: only the `[[route]]` entries (and connected subnets).
    Static,
}

/// A static route on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec {
    /// The node whose table holds it.
    pub node: usize,
    /// The destinations (`0.0.0.0/0` for the default route).
    pub dest: Cidr,
    /// The link (the node's interface on it) packets leave on.
    pub link: usize,
    /// The next hop: the neighbour's address on that link.
    pub gateway: Ipv4Addr,
}

/// A point-to-point link between two nodes.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// Unique name (used for the pcap file).
    pub name: String,
    /// Index of the first node.
    pub a: usize,
    /// Index of the second node.
    pub b: usize,
    /// The first node's address and prefix on this link (default 10.x.y.1/24 for link
    /// x * 256 + y).
    pub a_addr: Cidr,
    /// The second node's address and prefix (default 10.x.y.2/24).
    pub b_addr: Cidr,
    /// The link model, both directions alike; `mtu` includes the 14-byte Ethernet header.
    pub config: LinkConfig,
    /// A firewall on the link drops every ICMP datagram (both directions).
    pub block_icmp: bool,
    /// Seed of the link's random choices, when the file fixes it (links with the same
    /// seed impair the same frames), else derived from the scenario seed.
    pub seed: Option<u64>,
}

/// One flow of traffic.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    /// Unique name.
    pub name: String,
    /// Index of the host that opens the flow (sender, client, pinger).
    pub from: usize,
    /// Index of the other node (a host; a ping may go to a router).
    pub to: usize,
    /// The links from `from` to `to`, in order: one when a link joins them, else the
    /// shortest path through routers.
    pub path: Vec<usize>,
    /// `from`'s address on the first link of the path.
    pub from_addr: Ipv4Addr,
    /// `to`'s address on the last link of the path.
    pub to_addr: Ipv4Addr,
    /// The flow runs over IPv6 (`family = "ipv6"`): between the two ends' IPv6
    /// addresses on the same links (`experiment::link_address6`), not `from_addr` and
    /// `to_addr`.
    pub ipv6: bool,
    /// When the flow starts.
    pub start: Duration,
    /// What the flow does.
    pub kind: FlowKind,
}

/// What a flow does.
#[derive(Debug, Clone, PartialEq)]
pub enum FlowKind {
    /// A ttcp-style transfer of `bytes` in `record`-byte writes.
    Bulk {
        /// Bytes of the file (before any text-mode translation).
        bytes: u64,
        /// Bytes per application write.
        record: usize,
        /// FTP ASCII mode: LF becomes CRLF at the sender, CRLF becomes LF at the
        /// receiver, each end paying `translate_per_byte` for it.
        text_mode: bool,
        /// Application CPU time per byte at each end (copies, system calls).
        cpu_per_byte: Duration,
        /// Extra CPU time per byte at each end for the text-mode translation.
        translate_per_byte: Duration,
    },
    /// An FTP session (RFC 959, the `impnet-ftp` state machines at both ends): the
    /// client (`from`) logs in anonymously, sets TYPE A or I, sets up the data
    /// connection as `data` says, RETRieves a text file of `bytes` bytes that the
    /// server (`to`) sends in `record`-byte writes, and QUITs. Goodput is the data
    /// transfer's, from RETR to the end of the data, as an FTP client reports it. With
    /// `list`, the request is a LIST of a directory of that many files instead, and
    /// `bytes` the listing's length.
    Ftp {
        /// Bytes of the file (lines of printable ASCII), or of the listing.
        bytes: u64,
        /// LIST a directory of this many files ([`ftp_directory`]) instead of RETR.
        list: Option<u32>,
        /// Bytes per server write.
        record: usize,
        /// TYPE A (LF to CRLF at the server and back at the client) instead of TYPE I.
        text_mode: bool,
        /// Application CPU time per byte at each end (charged to the host's CPU when
        /// it has a cost model).
        cpu_per_byte: Duration,
        /// Extra CPU time per byte at each end for the TYPE A translation.
        translate_per_byte: Duration,
        /// How the data connection is set up (PASV, EPSV, PORT or EPRT).
        data: impnet_ftp::DataMode,
    },
    /// Request/response (an echo when both sizes are equal): up to `pipeline` requests
    /// outstanding, `count` transactions or until the end of the run.
    RequestResponse {
        /// Bytes per request.
        request: usize,
        /// Bytes per response.
        response: usize,
        /// Transactions to complete (`None`: until the run ends).
        count: Option<u64>,
        /// Requests outstanding at once.
        pipeline: u32,
        /// How the server writes each response.
        write: ResponseWrite,
    },
    /// An interactive session, TELNET-like: the client types one byte every `interval`
    /// (whether or not earlier echoes have come back) and the server echoes each byte,
    /// `count` keystrokes in all; where Nagle's algorithm and delayed ACKs show.
    Keystroke {
        /// Keystrokes to type.
        count: u64,
        /// Time between keystrokes.
        interval: Duration,
    },
    /// ICMP echo.
    Ping {
        /// Requests to send.
        count: u32,
        /// Time between requests.
        interval: Duration,
        /// Bytes of data per request.
        size: usize,
    },
}

/// How the server of a request/response flow writes each response: in one write, or
/// as a head and a body (an HTTP server writing its header and then the file), each
/// write handed to the stack at once, as a runtime does after every socket call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseWrite {
    /// One write of the whole response.
    One,
    /// Two writes: `head` bytes, then the rest. With Nagle's algorithm on, the rest
    /// waits for the head's ACK, which the client may delay.
    Two {
        /// Bytes in the first write.
        head: usize,
    },
    /// The head and the rest in one gather write (`Stack::tcp_send_vectored`).
    Gather {
        /// Bytes in the first slice.
        head: usize,
    },
    /// Cork, write the head, write the rest, uncork (Linux's TCP_CORK).
    Corked {
        /// Bytes in the first write.
        head: usize,
    },
}

impl FlowKind {
    /// The flow type as the file spells it.
    pub fn type_name(&self) -> &'static str {
        match self {
            FlowKind::Bulk { .. } => "bulk",
            FlowKind::Ftp { .. } => "ftp",
            FlowKind::RequestResponse { .. } => "rr",
            FlowKind::Keystroke { .. } => "keystroke",
            FlowKind::Ping { .. } => "ping",
        }
    }
}

/// The largest scenario file [`Scenario::load`] reads.
pub const MAX_SCENARIO_BYTES: u64 = 16 << 20;

/// A mistake in a scenario file: where it is and what is wrong, on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file (or other origin) named in the message.
    pub origin: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The field, when known.
    pub field: Option<String>,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": ")?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScenarioError {}

// ---- quantities: strings with units, or plain numbers ----------------------------

macro_rules! quantity {
    ($name:ident, $inner:ty, $expect:literal, $parse:expr, $from_u64:expr, $from_f64:expr) => {
        #[derive(Debug, Clone, Copy)]
        struct $name($inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expect)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        ($parse)(v).map($name).map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$name, E> {
                        if v < 0 {
                            return Err(E::custom(format!(
                                "{v} is negative; give a value of 0 or more"
                            )));
                        }
                        self.visit_u64(v as u64)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$name, E> {
                        let from: fn(u64) -> Result<$inner, String> = $from_u64;
                        from(v).map($name).map_err(E::custom)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$name, E> {
                        if v < 0.0 {
                            return Err(E::custom(format!(
                                "{v} is negative; give a value of 0 or more"
                            )));
                        }
                        let from: fn(f64) -> Result<$inner, String> = $from_f64;
                        from(v).map($name).map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

quantity!(
    Bytes,
    u64,
    "a size: a number of bytes or a string such as \"4M\", \"1K\"",
    units::parse_bytes,
    Ok,
    |v| {
        if v.fract() == 0.0 && v < 1e18 {
            Ok(v as u64)
        } else {
            Err(format!("{v} is not a whole number of bytes"))
        }
    }
);

quantity!(
    Rate,
    u64,
    "a rate: bits per second or a string such as \"9600bit\", \"10mbit\"",
    units::parse_rate,
    |v| if v == 0 {
        Err("a rate of 0 is not allowed; leave `rate` out for an infinitely fast link".into())
    } else {
        Ok(v)
    },
    |v| if (1.0..=1e13).contains(&v) {
        Ok(v.round() as u64)
    } else {
        Err(format!("rate {v} is out of range (1 bit/s to 10 Tbit/s)"))
    }
);

quantity!(
    Dur,
    Duration,
    "a duration string such as \"20ms\", \"1.5s\", \"40us\" (or 0)",
    units::parse_duration,
    |v| if v == 0 {
        Ok(Duration::ZERO)
    } else {
        Err(format!("{v} has no unit; write \"{v}ms\" or \"{v}s\""))
    },
    |v| if v == 0.0 {
        Ok(Duration::ZERO)
    } else {
        Err(format!("{v} has no unit; write \"{v}ms\" or \"{v}s\""))
    }
);

quantity!(
    Prob,
    f64,
    "a probability: a fraction from 0 to 1 or a percentage string such as \"1%\"",
    units::parse_probability,
    |v| if v <= 1 {
        Ok(v as f64)
    } else {
        Err(format!(
            "{v} is not a probability; give 0..1 or a percentage such as \"1%\""
        ))
    },
    |v| if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{v} is not a probability; give 0..1 or a percentage such as \"1%\""
        ))
    }
);

quantity!(
    Cost,
    u64,
    "a cost in time such as \"911us\", \"1.5us\" or \"0.05ns\" (or 0)",
    units::parse_picos,
    |v| if v == 0 {
        Ok(0)
    } else {
        Err(format!("{v} has no unit; write \"{v}us\" or \"{v}ns\""))
    },
    |v| if v == 0.0 {
        Ok(0)
    } else {
        Err(format!("{v} has no unit; write \"{v}us\" or \"{v}ns\""))
    }
);

// ---- the file as written ---------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    seed: Option<u64>,
    duration: Dur,
    sample_interval: Option<Dur>,
    pcap_snaplen: Option<Spanned<u32>>,
    routing: Option<Spanned<String>>,
    #[serde(default)]
    host: Vec<Spanned<RawNode>>,
    #[serde(default)]
    node: Vec<Spanned<RawNode>>,
    #[serde(default)]
    link: Vec<Spanned<RawLink>>,
    #[serde(default)]
    route: Vec<Spanned<RawRoute>>,
    #[serde(default)]
    flow: Vec<Spanned<RawFlow>>,
    dumbbell: Option<Spanned<RawDumbbell>>,
    #[serde(default)]
    cpu: Vec<Spanned<cpu::RawCpuProfile>>,
    #[serde(default)]
    ladder: Vec<Spanned<cpu::RawRung>>,
}

/// A `[[host]]` or `[[node]]` entry (`kind` only in `[[node]]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
    kind: Option<Spanned<String>>,
    #[serde(default)]
    tcp: RawTcp,
    cpu: Option<Spanned<cpu::RawHostCpu>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    node: Spanned<String>,
    dest: Spanned<String>,
    via: Spanned<String>,
    link: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDumbbell {
    pairs: Spanned<u32>,
    #[serde(default)]
    access: Option<Spanned<RawLink>>,
    bottleneck: Spanned<RawLink>,
    #[serde(default)]
    tcp: RawTcp,
    flow: Spanned<RawFlow>,
    stagger: Option<Dur>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTcp {
    send_buffer: Option<Bytes>,
    recv_buffer: Option<Bytes>,
    cc: Option<Spanned<String>>,
    pacing: Option<bool>,
    sack: Option<bool>,
    hystart: Option<bool>,
    rack: Option<bool>,
    timestamps: Option<bool>,
    window_scaling: Option<bool>,
    ecn: Option<Spanned<String>>,
    delayed_ack: Option<Dur>,
    nagle: Option<bool>,
    initial_window: Option<Spanned<u32>>,
    segment_size: Option<Spanned<u32>>,
    initial_rto: Option<Dur>,
    min_rto: Option<Dur>,
    max_rto: Option<Dur>,
    share_control_blocks: Option<bool>,
    black_hole_detection: Option<bool>,
    mtu_probing: Option<Spanned<String>>,
    profile: Option<Spanned<String>>,
    retransmit_timer: Option<Dur>,
    retransmit_process: Option<Dur>,
    ack_on_wakeup: Option<bool>,
    retransmit_due_only: Option<bool>,
    karn: Option<bool>,
    segment_per_write: Option<bool>,
    quick_acks: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: Option<String>,
    a: Option<Spanned<String>>,
    b: Option<Spanned<String>>,
    a_addr: Option<Spanned<String>>,
    b_addr: Option<Spanned<String>>,
    qdisc: Option<Spanned<String>>,
    block_icmp: Option<bool>,
    target: Option<Dur>,
    interval: Option<Dur>,
    rate: Option<Rate>,
    delay: Option<Dur>,
    queue: Option<Bytes>,
    loss: Option<Prob>,
    burst_loss: Option<RawBurst>,
    cross: Option<RawCross>,
    shape: Option<Spanned<RawContract>>,
    police: Option<Spanned<RawContract>>,
    reorder: Option<Prob>,
    reorder_delay: Option<Dur>,
    duplicate: Option<Prob>,
    corrupt: Option<Prob>,
    mtu: Option<Spanned<Bytes>>,
    seed: Option<u64>,
    arq: Option<RawArq>,
}

/// An `arq` table: link-level retransmission (each field defaults to LAPB's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawArq {
    window: Option<u16>,
    timeout: Option<Dur>,
    tries: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBurst {
    good_to_bad: Prob,
    bad_to_good: Prob,
    loss_good: Option<Prob>,
    loss_bad: Option<Prob>,
}

/// A link's `cross` table: an on/off cross-traffic source.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCross {
    rate: Rate,
    on: Dur,
    off: Dur,
}

/// A `shape` or `police` table: a GCRA traffic contract (`action` only for `police`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContract {
    peak: Rate,
    sustained: Rate,
    burst: Bytes,
    action: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    name: Option<String>,
    #[serde(rename = "type")]
    kind: Spanned<String>,
    from: Option<Spanned<String>>,
    to: Option<Spanned<String>>,
    start: Option<Dur>,
    /// "ipv4" (the default) or "ipv6".
    family: Option<Spanned<String>>,
    // bulk
    bytes: Option<Bytes>,
    record: Option<Bytes>,
    text_mode: Option<bool>,
    cpu_per_byte: Option<Dur>,
    translate_per_byte: Option<Dur>,
    // ftp
    data: Option<Spanned<String>>,
    list: Option<u32>,
    // rr
    request: Option<Bytes>,
    response: Option<Bytes>,
    count: Option<Spanned<u64>>,
    pipeline: Option<Spanned<u32>>,
    response_head: Option<Bytes>,
    response_write: Option<Spanned<String>>,
    // ping
    interval: Option<Dur>,
    size: Option<Bytes>,
}

// ---- parsing and validation ------------------------------------------------------

struct Ctx<'a> {
    text: &'a str,
    origin: &'a str,
}

impl Ctx<'_> {
    fn line_of(&self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        self.text.as_bytes()[..offset]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn error(&self, span: Range<usize>, field: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            origin: self.origin.to_string(),
            line: Some(self.line_of(span.start)),
            field: Some(field.to_string()),
            message: message.into(),
        }
    }

    /// An error about `field` of the table spanning `table`: at the line that sets the
    /// field when the table has one, else at the table's first line.
    fn field_error(
        &self,
        table: Range<usize>,
        field: &str,
        message: impl Into<String>,
    ) -> ScenarioError {
        // The span may cover only the `[[table]]` header: look on to the next header.
        let start = table.start.min(self.text.len());
        let mut offset = start;
        for (i, line) in self.text[start..].split_inclusive('\n').enumerate() {
            let trimmed = line.trim_start();
            if i > 0 && trimmed.starts_with('[') {
                break;
            }
            if let Some(rest) = trimmed.strip_prefix(field)
                && rest.trim_start().starts_with('=')
            {
                return self.error(offset..offset, field, message);
            }
            offset += line.len();
        }
        self.error(table, field, message)
    }

    /// The key whose value starts at `offset`: the identifier before the nearest `=`.
    fn key_before(&self, offset: usize) -> Option<String> {
        let before = &self.text[..offset.min(self.text.len())];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = &before[line_start..];
        let eq = line.rfind('=')?;
        let key = line[..eq].trim_end();
        // Past the last character that cannot be in a key, whatever its width (found by
        // fuzz target scenario_parse: `é==` cut inside the `é`).
        let start = key
            .char_indices()
            .rfind(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let key = key[start..].trim_matches('"');
        (!key.is_empty()).then(|| key.to_string())
    }

    /// An error about a top-level field, with no line.
    fn top(&self, field: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            origin: self.origin.to_string(),
            line: None,
            field: Some(field.to_string()),
            message: message.into(),
        }
    }

    fn toml_error(&self, e: &toml::de::Error) -> ScenarioError {
        let message = e.message().trim().replace('\n', " ");
        let (line, field) = match e.span() {
            Some(span) => {
                let field = if message.starts_with("unknown field")
                    || message.starts_with("missing field")
                {
                    None
                } else {
                    self.key_before(span.start)
                };
                (Some(self.line_of(span.start)), field)
            }
            None => (None, None),
        };
        ScenarioError {
            origin: self.origin.to_string(),
            line,
            field,
            message,
        }
    }
}

impl Scenario {
    /// Parses and validates a scenario; `origin` (the file name) starts every error.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        let ctx = Ctx { text, origin };
        let raw: RawScenario = toml::from_str(text).map_err(|e| ctx.toml_error(&e))?;
        if raw.duration.0 == Duration::ZERO {
            return Err(ctx.top("duration", "must be longer than 0"));
        }
        if let Some(snap) = &raw.pcap_snaplen
            && *snap.get_ref() < 64
        {
            return Err(ctx.error(snap.span(), "pcap_snaplen", "must be at least 64 bytes"));
        }
        let routing = routing(&ctx, raw.routing.as_ref())?;
        let mut nodes = nodes(&ctx, &raw.host, &raw.node)?;
        let profiles = cpu::profiles(&ctx, &raw.cpu)?;
        for (node, raw_node) in nodes.iter_mut().zip(raw.host.iter().chain(&raw.node)) {
            if let Some(c) = &raw_node.get_ref().cpu {
                node.cpu = Some(cpu::host_cpu(&ctx, c, &profiles)?);
            }
        }
        let mut links = links(&ctx, &raw.link, &nodes)?;
        let mut pending = pending_flows(&ctx, &raw.flow, &nodes)?;
        if let Some(d) = &raw.dumbbell {
            dumbbell::expand(&ctx, d, &mut nodes, &mut links, &mut pending)?;
        }
        if nodes.iter().filter(|n| n.kind == NodeKind::Host).count() < 2 {
            return Err(ctx.top(
                "host",
                "a scenario needs at least two hosts ([[host]], [[node]] or a [dumbbell])",
            ));
        }
        check_subnets(&ctx, &raw, &links)?;
        let kinds: Vec<NodeKind> = nodes.iter().map(|n| n.kind).collect();
        let mut routes = match routing {
            Routing::Static => Vec::new(),
            metric => topology::compute_routes(&kinds, &links, metric),
        };
        given_routes(&ctx, &raw.route, &nodes, &links, &mut routes)?;
        let flows = topology::resolve_flows(&ctx, pending, &nodes, &links, routing)?;
        if flows.is_empty() {
            return Err(ctx.top("flow", "the scenario has no [[flow]]; add one"));
        }
        let ladder = cpu::ladder(&ctx, &raw.ladder, &flows)?;
        let stem = std::path::Path::new(origin)
            .file_stem()
            .map_or("scenario".to_string(), |s| s.to_string_lossy().into_owned());
        Ok(Scenario {
            name: raw.name.unwrap_or(stem),
            description: raw.description.unwrap_or_default(),
            seed: raw.seed.unwrap_or(1),
            duration: raw.duration.0,
            sample_interval: raw
                .sample_interval
                .map_or(Duration::from_millis(10), |d| d.0)
                .max(Duration::from_micros(10)),
            pcap_snaplen: raw.pcap_snaplen.map(|s| *s.get_ref() as usize),
            nodes,
            links,
            routing,
            routes,
            flows,
            dumbbell: raw.dumbbell.is_some(),
            ladder,
        })
    }

    /// Reads and parses a scenario file: a regular file of at most
    /// [`MAX_SCENARIO_BYTES`] (not a device such as `/dev/zero`, a FIFO or a
    /// directory, which would never end or would block).
    pub fn load(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
        Scenario::load_with(path, &[])
    }

    /// As [`Scenario::load`], with `overrides` applied as [`Scenario::parse_with`]
    /// does (`imp sim --set`).
    pub fn load_with(
        path: &std::path::Path,
        overrides: &[Override],
    ) -> Result<Scenario, ScenarioError> {
        use std::io::Read;
        let origin = path.display().to_string();
        let fail = |message: String| ScenarioError {
            origin: origin.clone(),
            line: None,
            field: None,
            message,
        };
        let cannot = |e: std::io::Error| fail(format!("cannot read the file: {e}"));
        if !std::fs::metadata(path).map_err(cannot)?.is_file() {
            return Err(fail(
                "not a regular file: give a scenario file (TOML; see scenarios/README.md)".into(),
            ));
        }
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .map_err(cannot)?
            .take(MAX_SCENARIO_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(cannot)?;
        if bytes.len() as u64 > MAX_SCENARIO_BYTES {
            return Err(fail(format!(
                "larger than {} MiB: not a scenario file",
                MAX_SCENARIO_BYTES >> 20
            )));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            fail(format!(
                "not UTF-8 text (at byte {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        Scenario::parse_with(&text, &origin, overrides)
    }

    /// Index of the node called `name`.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|h| h.name == name)
    }

    /// The smallest rate on a flow's path (0 when every link is infinitely fast).
    pub fn bottleneck_rate(&self, flow: &FlowSpec) -> u64 {
        flow.path
            .iter()
            .map(|&l| self.links[l].config.rate_bps)
            .filter(|&r| r > 0)
            .min()
            .unwrap_or(0)
    }
}

/// The `routing` key.
fn routing(ctx: &Ctx<'_>, raw: Option<&Spanned<String>>) -> Result<Routing, ScenarioError> {
    let Some(raw) = raw else {
        return Ok(Routing::Hops);
    };
    match raw.get_ref().as_str() {
        "hops" => Ok(Routing::Hops),
        "delay" => Ok(Routing::Delay),
        "static" => Ok(Routing::Static),
        other => Err(ctx.error(
            raw.span(),
            "routing",
            format!("unknown routing `{other}`; use \"hops\", \"delay\" or \"static\""),
        )),
    }
}

/// The `[[host]]` entries, then the `[[node]]` entries.
fn nodes(
    ctx: &Ctx<'_>,
    hosts: &[Spanned<RawNode>],
    nodes: &[Spanned<RawNode>],
) -> Result<Vec<NodeSpec>, ScenarioError> {
    let mut out: Vec<NodeSpec> = Vec::new();
    for (node, is_host_table) in hosts
        .iter()
        .map(|h| (h, true))
        .chain(nodes.iter().map(|n| (n, false)))
    {
        let raw = node.get_ref();
        let kind = match (&raw.kind, is_host_table) {
            (Some(k), true) => {
                return Err(ctx.error(
                    k.span(),
                    "kind",
                    "a [[host]] is a host; use [[node]] with `kind` for routers",
                ));
            }
            (None, _) => NodeKind::Host,
            (Some(k), false) => match k.get_ref().as_str() {
                "host" => NodeKind::Host,
                "router" => NodeKind::Router,
                other => {
                    return Err(ctx.error(
                        k.span(),
                        "kind",
                        format!("unknown node kind `{other}`; use \"host\" or \"router\""),
                    ));
                }
            },
        };
        let tcp = tcp_config(ctx, &raw.tcp)?;
        push_node(ctx, &mut out, &raw.name, kind, tcp)?;
    }
    Ok(out)
}

/// Adds a node, refusing an empty or duplicate name (reported at `name`).
fn push_node(
    ctx: &Ctx<'_>,
    out: &mut Vec<NodeSpec>,
    name: &Spanned<String>,
    kind: NodeKind,
    tcp: TcpConfig,
) -> Result<(), ScenarioError> {
    let text = name.get_ref();
    if text.is_empty() {
        return Err(ctx.error(name.span(), "name", "must not be empty"));
    }
    if let Some(other) = out.iter().find(|h| &h.name == text) {
        return Err(ctx.error(
            name.span(),
            "name",
            format!(
                "a {} called `{text}` already exists; names must be unique",
                other.kind.name()
            ),
        ));
    }
    out.push(NodeSpec {
        name: text.clone(),
        kind,
        tcp,
        cpu: None,
    });
    Ok(())
}

fn tcp_config(ctx: &Ctx<'_>, raw: &RawTcp) -> Result<TcpConfig, ScenarioError> {
    let mut tcp = TcpConfig::default();
    legacy_settings(ctx, raw, &mut tcp)?;
    let size = |b: Option<Bytes>, default: usize| -> usize {
        b.map_or(default, |b| usize::try_from(b.0).unwrap_or(usize::MAX))
    };
    tcp.send_buffer = size(raw.send_buffer, tcp.send_buffer).max(1);
    tcp.recv_buffer = size(raw.recv_buffer, tcp.recv_buffer).max(1);
    if let Some(cc) = &raw.cc {
        tcp.congestion = CcAlgorithm::from_name(cc.get_ref()).ok_or_else(|| {
            ctx.error(
                cc.span(),
                "cc",
                format!(
                    "unknown congestion control `{}`; imp has \"newreno\" (\"reno\"), \"cubic\", \"vegas\", \"bbr\", \"bbr1\" and \"none\"",
                    cc.get_ref()
                ),
            )
        })?;
    }
    if raw.pacing.is_some() {
        tcp.pacing = raw.pacing;
    }
    if let Some(v) = raw.sack {
        tcp.sack = v;
    }
    if let Some(v) = raw.hystart {
        tcp.hystart = v;
    }
    if let Some(v) = raw.rack {
        tcp.rack = v;
    }
    if let Some(v) = raw.timestamps {
        tcp.timestamps = v;
    }
    if let Some(mode) = &raw.ecn {
        tcp.ecn = EcnMode::from_name(mode.get_ref()).ok_or_else(|| {
            ctx.error(
                mode.span(),
                "ecn",
                format!(
                    "unknown ECN mode `{}`; use \"on\" (ask and accept), \"accept\" or \"off\"",
                    mode.get_ref()
                ),
            )
        })?;
    }
    if let Some(v) = raw.window_scaling {
        tcp.window_scaling = v;
    }
    if let Some(v) = raw.delayed_ack {
        tcp.delayed_ack = v.0;
    }
    if let Some(v) = raw.nagle {
        tcp.nodelay = !v;
    }
    if let Some(size) = &raw.segment_size {
        let bytes = *size.get_ref();
        if !(64..=65495).contains(&bytes) {
            return Err(ctx.error(size.span(), "segment_size", "must be 64 to 65495 bytes"));
        }
        tcp.segment_size = u16::try_from(bytes).ok();
    }
    if let Some(iw) = &raw.initial_window {
        if *iw.get_ref() == 0 {
            return Err(ctx.error(iw.span(), "initial_window", "must be at least 1 segment"));
        }
        tcp.initial_window = *iw.get_ref();
    }
    rto_settings(raw, &mut tcp);
    if let Some(v) = raw.share_control_blocks {
        tcp.share_control_blocks = v;
    }
    path_mtu_settings(ctx, raw, &mut tcp)?;
    Ok(tcp)
}

/// `profile` (an old TCP's algorithms, `LegacyProfile`), applied before every other
/// key so they can change it, and the switches old TCPs differ by: `retransmit_timer`
/// (a fixed RTO, never backed off), `retransmit_process` (the period of a 1975
/// retransmission process, `TcpConfig::retransmit_process`), `ack_on_wakeup`,
/// `retransmit_due_only`, `karn`, `segment_per_write`.
fn legacy_settings(ctx: &Ctx<'_>, raw: &RawTcp, tcp: &mut TcpConfig) -> Result<(), ScenarioError> {
    if let Some(name) = &raw.profile {
        let profile = LegacyProfile::from_name(name.get_ref()).ok_or_else(|| {
            ctx.error(
                name.span(),
                "profile",
                format!(
                    "unknown TCP profile `{}`; imp has {}",
                    name.get_ref(),
                    LegacyProfile::NAMES.map(|n| format!("\"{n}\"")).join(", ")
                ),
            )
        })?;
        let profile = match (profile, raw.retransmit_timer) {
            (LegacyProfile::Exerciser1975 { .. }, Some(timer)) => {
                LegacyProfile::Exerciser1975 { timeout: timer.0 }
            }
            (profile, _) => profile,
        };
        profile.apply(tcp);
    }
    if let Some(timer) = raw.retransmit_timer {
        tcp.rto_rule = RtoRule::Fixed(timer.0);
        tcp.initial_rto = timer.0;
        tcp.min_rto = timer.0;
        tcp.max_rto = timer.0;
        if tcp.retransmit_process.is_some() {
            tcp.retransmit_process = Some(timer.0);
        }
    }
    if let Some(period) = raw.retransmit_process {
        tcp.retransmit_process = Some(period.0);
    }
    if let Some(v) = raw.ack_on_wakeup {
        tcp.ack_on_wakeup = v;
    }
    if let Some(v) = raw.retransmit_due_only {
        tcp.retransmit_due_only = v;
    }
    if let Some(v) = raw.karn {
        tcp.karn = v;
    }
    if let Some(v) = raw.segment_per_write {
        tcp.segment_per_write = v;
    }
    if let Some(v) = raw.quick_acks {
        tcp.quick_acks = v;
    }
    Ok(())
}

/// `initial_rto`, `min_rto` and `max_rto`.
fn rto_settings(raw: &RawTcp, tcp: &mut TcpConfig) {
    if let Some(v) = raw.initial_rto {
        tcp.initial_rto = v.0;
    }
    if let Some(v) = raw.min_rto {
        tcp.min_rto = v.0;
    }
    if let Some(v) = raw.max_rto {
        tcp.max_rto = v.0;
    }
}

/// `black_hole_detection` and `mtu_probing` (`TcpConfig`'s RFC 4821 settings).
fn path_mtu_settings(
    ctx: &Ctx<'_>,
    raw: &RawTcp,
    tcp: &mut TcpConfig,
) -> Result<(), ScenarioError> {
    if let Some(v) = raw.black_hole_detection {
        tcp.black_hole_detection = v;
    }
    if let Some(mode) = &raw.mtu_probing {
        tcp.mtu_probing = match mode.get_ref().as_str() {
            "off" | "0" => MtuProbing::Off,
            "on_black_hole" | "1" => MtuProbing::OnBlackHole,
            "always" | "2" => MtuProbing::Always,
            other => {
                return Err(ctx.error(
                    mode.span(),
                    "mtu_probing",
                    format!("unknown mode `{other}`; use \"off\", \"on_black_hole\" or \"always\""),
                ));
            }
        };
    }
    Ok(())
}

fn node_ref(
    ctx: &Ctx<'_>,
    name: &Spanned<String>,
    field: &str,
    nodes: &[NodeSpec],
) -> Result<usize, ScenarioError> {
    nodes
        .iter()
        .position(|n| n.name == *name.get_ref())
        .ok_or_else(|| {
            let mut names: Vec<&str> = nodes.iter().take(12).map(|n| n.name.as_str()).collect();
            if nodes.len() > names.len() {
                names.push("...");
            }
            ctx.error(
                name.span(),
                field,
                format!(
                    "no node called `{}` (nodes: {})",
                    name.get_ref(),
                    names.join(", ")
                ),
            )
        })
}

/// A required name field of a table (`a`, `b`, `from`, `to`).
fn required<'a>(
    ctx: &Ctx<'_>,
    table: &Range<usize>,
    value: Option<&'a Spanned<String>>,
    field: &str,
    what: &str,
) -> Result<&'a Spanned<String>, ScenarioError> {
    value.ok_or_else(|| ctx.error(table.clone(), field, format!("missing; {what}")))
}

/// Node `i`'s address on link `index` when the file gives none: 10.x.y.1/24 for the
/// first end and 10.x.y.2/24 for the second, x * 256 + y = `index`.
pub(crate) fn default_address(index: usize, side: usize) -> Option<Cidr> {
    let index = u16::try_from(index).ok()?;
    let [x, y] = index.to_be_bytes();
    Cidr::new(Ipv4Addr::new(10, x, y, 1 + side as u8), 24).ok()
}

/// A link's `a_addr` and `b_addr`: both given (two addresses in one subnet) or neither.
fn link_addresses(
    ctx: &Ctx<'_>,
    span: &Range<usize>,
    link: &RawLink,
    index: usize,
) -> Result<(Cidr, Cidr), ScenarioError> {
    let parse = |field: &str, v: &Spanned<String>| -> Result<Cidr, ScenarioError> {
        let cidr: Cidr = v.get_ref().parse().map_err(|_| {
            ctx.error(
                v.span(),
                field,
                format!(
                    "`{}` is not an address with a prefix such as \"192.168.1.1/24\"",
                    v.get_ref()
                ),
            )
        })?;
        if cidr.prefix_len > 30 || cidr.prefix_len < 8 {
            return Err(ctx.error(v.span(), field, "the prefix must be /8 to /30"));
        }
        Ok(cidr)
    };
    match (&link.a_addr, &link.b_addr) {
        (None, None) => match (default_address(index, 0), default_address(index, 1)) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => Err(ctx.error(
                span.clone(),
                "a_addr",
                "past 65536 links every link needs `a_addr` and `b_addr`",
            )),
        },
        (Some(a), Some(b)) => {
            let (a_cidr, b_cidr) = (parse("a_addr", a)?, parse("b_addr", b)?);
            if a_cidr.network() != b_cidr.network() || a_cidr.address == b_cidr.address {
                return Err(ctx.error(
                    b.span(),
                    "b_addr",
                    format!("{b_cidr} must be another address in {a_cidr}'s subnet"),
                ));
            }
            Ok((a_cidr, b_cidr))
        }
        (Some(a), None) => Err(ctx.error(a.span(), "b_addr", "give both `a_addr` and `b_addr`")),
        (None, Some(b)) => Err(ctx.error(b.span(), "a_addr", "give both `a_addr` and `b_addr`")),
    }
}

/// A link model from the keys of a `[[link]]` (or a `[dumbbell]` link table).
fn link_config(ctx: &Ctx<'_>, spanned: &Spanned<RawLink>) -> Result<LinkConfig, ScenarioError> {
    let link = spanned.get_ref();
    let mtu = match &link.mtu {
        Some(m) if !(68..=65535).contains(&m.get_ref().0) => {
            return Err(ctx.error(
                m.span(),
                "mtu",
                format!("IP MTU {} is outside 68..=65535", m.get_ref().0),
            ));
        }
        Some(m) => m.get_ref().0 as usize,
        None => 1500,
    };
    let p = |v: Option<Prob>| v.map_or(0.0, |p| p.0);
    let config = LinkConfig {
        rate_bps: link.rate.map_or(0, |r| r.0),
        delay: link.delay.map_or(Duration::ZERO, |d| d.0),
        queue_limit_bytes: link
            .queue
            .map_or(1 << 20, |q| usize::try_from(q.0).unwrap_or(usize::MAX)),
        qdisc: None,
        loss: p(link.loss),
        reorder: p(link.reorder),
        reorder_delay: link.reorder_delay.map_or(Duration::ZERO, |d| d.0),
        duplicate: p(link.duplicate),
        corrupt: p(link.corrupt),
        mtu: mtu + impnet_wire::ethernet::HEADER_LEN,
        burst_loss: link.burst_loss.as_ref().map(|b| GilbertElliott {
            good_to_bad: b.good_to_bad.0,
            bad_to_good: b.bad_to_good.0,
            loss_good: p(b.loss_good),
            loss_bad: b.loss_bad.map_or(1.0, |p| p.0),
        }),
        shape: None,
        police: None,
        cross: link.cross.as_ref().map(|c| CrossTraffic {
            rate_bps: c.rate.0,
            mean_on: c.on.0,
            mean_off: c.off.0,
        }),
        arq: link.arq.as_ref().map(|a| {
            let lapb = impnet_phy::link::ArqConfig::default();
            impnet_phy::link::ArqConfig {
                window: a.window.unwrap_or(lapb.window),
                timeout: a.timeout.map_or(lapb.timeout, |d| d.0),
                tries: a.tries.unwrap_or(lapb.tries),
            }
        }),
    };
    let config = LinkConfig {
        qdisc: qdisc(ctx, spanned, &config)?,
        shape: contract(ctx, link.shape.as_ref(), "shape")?.map(|(c, _)| c),
        police: contract(ctx, link.police.as_ref(), "police")?
            .map(|(contract, action)| Policer { contract, action }),
        ..config
    };
    config.validate().map_err(|e| {
        let field = match e {
            impnet_phy::LinkConfigError::ProbabilityOutOfRange { name, .. } => name,
            impnet_phy::LinkConfigError::ZeroMtu => "mtu",
            impnet_phy::LinkConfigError::Cross { .. } => "cross",
            impnet_phy::LinkConfigError::Arq { .. } => "arq",
            _ => "reorder_delay",
        };
        let key = field.rsplit('.').next().unwrap_or(field);
        ctx.field_error(spanned.span(), key, e.to_string())
    })?;
    Ok(config)
}

/// A link's `shape` or `police` table: the contract, and (for `police`) its action.
fn contract(
    ctx: &Ctx<'_>,
    raw: Option<&Spanned<RawContract>>,
    key: &str,
) -> Result<Option<(GcraConfig, PoliceAction)>, ScenarioError> {
    let Some(spanned) = raw else {
        return Ok(None);
    };
    let raw = spanned.get_ref();
    let action = match &raw.action {
        None => PoliceAction::Drop,
        Some(a) if key == "shape" => {
            return Err(ctx.error(
                a.span(),
                "shape.action",
                "a shaper holds frames, it has no action; `action` belongs to `police`",
            ));
        }
        Some(a) => a.get_ref().parse().map_err(|UnknownAction(other)| {
            ctx.error(
                a.span(),
                "police.action",
                format!("unknown action `{other}`; give \"drop\" or \"mark\""),
            )
        })?,
    };
    let config = GcraConfig {
        peak_bps: raw.peak.0,
        sustained_bps: raw.sustained.0,
        burst_bytes: raw.burst.0,
    };
    config
        .validate()
        .map_err(|e| ctx.error(spanned.span(), key, e.to_string()))?;
    Ok(Some((config, action)))
}

/// A link's `qdisc`, `target` and `interval`: the queue discipline holding the frames
/// that wait for the transmitter (`queue` its byte limit when given).
fn qdisc(
    ctx: &Ctx<'_>,
    spanned: &Spanned<RawLink>,
    config: &LinkConfig,
) -> Result<Option<QdiscConfig>, ScenarioError> {
    let link = spanned.get_ref();
    let Some(name) = &link.qdisc else {
        if link.target.is_some() || link.interval.is_some() {
            let field = if link.target.is_some() {
                "target"
            } else {
                "interval"
            };
            return Err(ctx.field_error(
                spanned.span(),
                field,
                "needs `qdisc = \"codel\"` or `\"fq_codel\"`",
            ));
        }
        return Ok(None);
    };
    let qdisc: QdiscConfig = name.get_ref().parse().map_err(|_| {
        ctx.error(
            name.span(),
            "qdisc",
            format!(
                "unknown queue discipline `{}`; use \"fifo\", \"codel\" or \"fq_codel\"",
                name.get_ref()
            ),
        )
    })?;
    let keys = QdiscKeys {
        queue_given: link.queue.is_some(),
        target: link.target.map(|d| d.0),
        interval: link.interval.map(|d| d.0),
    };
    Ok(Some(keys.apply(qdisc, config)))
}

fn links(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawLink>],
    nodes: &[NodeSpec],
) -> Result<Vec<LinkSpec>, ScenarioError> {
    let mut out: Vec<LinkSpec> = Vec::new();
    for (i, spanned) in raw.iter().enumerate() {
        let link = spanned.get_ref();
        let joins = "a link joins two nodes `a` and `b`";
        let a = required(ctx, &spanned.span(), link.a.as_ref(), "a", joins)?;
        let b = required(ctx, &spanned.span(), link.b.as_ref(), "b", joins)?;
        let (a, b_index) = (node_ref(ctx, a, "a", nodes)?, node_ref(ctx, b, "b", nodes)?);
        if a == b_index {
            return Err(ctx.error(
                b.span(),
                "b",
                "a link joins two different nodes (a self-loop is an echo flow over a link)",
            ));
        }
        let config = link_config(ctx, spanned)?;
        let (a_addr, b_addr) = link_addresses(ctx, &spanned.span(), link, i)?;
        let name = link.name.clone().unwrap_or_else(|| format!("link{i}"));
        if out.iter().any(|l| l.name == name) {
            return Err(ctx.error(
                spanned.span(),
                "name",
                format!("a link called `{name}` already exists"),
            ));
        }
        out.push(LinkSpec {
            name,
            a,
            b: b_index,
            a_addr,
            b_addr,
            config,
            block_icmp: link.block_icmp.unwrap_or(false),
            seed: link.seed,
        });
    }
    Ok(out)
}

/// Refuses two links whose subnets overlap (routes could not tell them apart).
fn check_subnets(
    ctx: &Ctx<'_>,
    raw: &RawScenario,
    links: &[LinkSpec],
) -> Result<(), ScenarioError> {
    let mut seen: Vec<(Cidr, usize)> = Vec::with_capacity(links.len());
    for (i, link) in links.iter().enumerate() {
        let net = link.a_addr.network();
        if let Some(&(_, j)) = seen
            .iter()
            .find(|(other, _)| other.contains_cidr(&net) || net.contains_cidr(other))
        {
            let span = raw
                .link
                .get(i)
                .map(Spanned::span)
                .or_else(|| raw.dumbbell.as_ref().map(Spanned::span))
                .unwrap_or(0..0);
            return Err(ctx.field_error(
                span,
                "a_addr",
                format!(
                    "link `{}`'s subnet {net} overlaps link `{}`'s {}",
                    link.name,
                    links[j].name,
                    links[j].a_addr.network()
                ),
            ));
        }
        seen.push((net, i));
    }
    Ok(())
}

/// The `[[route]]` entries, each replacing a computed route for the same prefix.
fn given_routes(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawRoute>],
    nodes: &[NodeSpec],
    links: &[LinkSpec],
    routes: &mut Vec<RouteSpec>,
) -> Result<(), ScenarioError> {
    for spanned in raw {
        let route = spanned.get_ref();
        let node = node_ref(ctx, &route.node, "node", nodes)?;
        let via = node_ref(ctx, &route.via, "via", nodes)?;
        let dest = match route.dest.get_ref().as_str() {
            "default" => Cidr::DEFAULT_ROUTE,
            text => text.parse::<Cidr>().map_err(|_| {
                ctx.error(
                    route.dest.span(),
                    "dest",
                    format!("`{text}` is neither \"default\" nor a prefix such as \"10.0.3.0/24\""),
                )
            })?,
        }
        .network();
        let joins = |l: &LinkSpec| (l.a, l.b) == (node, via) || (l.a, l.b) == (via, node);
        let link = match &route.link {
            Some(name) => links
                .iter()
                .position(|l| l.name == *name.get_ref() && joins(l))
                .ok_or_else(|| {
                    ctx.error(
                        name.span(),
                        "link",
                        format!(
                            "no link `{}` joins `{}` and `{}`",
                            name.get_ref(),
                            nodes[node].name,
                            nodes[via].name
                        ),
                    )
                })?,
            None => links.iter().position(joins).ok_or_else(|| {
                ctx.error(
                    route.via.span(),
                    "via",
                    format!(
                        "`{}` is not a neighbour of `{}` (no link joins them)",
                        nodes[via].name, nodes[node].name
                    ),
                )
            })?,
        };
        let spec = RouteSpec {
            node,
            dest,
            link,
            gateway: topology::address_on(&links[link], via),
        };
        match routes.iter_mut().find(|r| r.node == node && r.dest == dest) {
            Some(existing) => *existing = spec,
            None => routes.push(spec),
        }
    }
    Ok(())
}

/// A flow as parsed, before its path is known.
#[derive(Debug, Clone)]
pub(crate) struct PendingFlow {
    name: String,
    from: usize,
    to: usize,
    /// Where errors about the flow's endpoints point.
    span: Range<usize>,
    start: Duration,
    kind: FlowKind,
    /// Over IPv6.
    ipv6: bool,
}

/// A flow's `family`: "ipv4" (the default) or "ipv6"; pings and ftp flows are IPv4
/// only.
fn flow_family(ctx: &Ctx<'_>, flow: &RawFlow, kind: &FlowKind) -> Result<bool, ScenarioError> {
    let Some(family) = &flow.family else {
        return Ok(false);
    };
    match family.get_ref().as_str() {
        "ipv4" => Ok(false),
        "ipv6" if matches!(kind, FlowKind::Ping { .. }) => Err(ctx.error(
            family.span(),
            "family",
            "ping flows run over IPv4 only (the simulator has no ICMPv6 echo flows)",
        )),
        "ipv6" if matches!(kind, FlowKind::Ftp { .. }) => Err(ctx.error(
            family.span(),
            "family",
            "ftp flows run over IPv4 only (their data connections are IPv4)",
        )),
        "ipv6" => Ok(true),
        other => Err(ctx.error(
            family.span(),
            "family",
            format!("`{other}`: give \"ipv4\" or \"ipv6\""),
        )),
    }
}

fn pending_flows(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawFlow>],
    nodes: &[NodeSpec],
) -> Result<Vec<PendingFlow>, ScenarioError> {
    let mut out: Vec<PendingFlow> = Vec::new();
    for (i, spanned) in raw.iter().enumerate() {
        let flow = spanned.get_ref();
        let ends = "a flow runs from one host `from` to another `to`";
        let from = required(ctx, &spanned.span(), flow.from.as_ref(), "from", ends)?;
        let to = required(ctx, &spanned.span(), flow.to.as_ref(), "to", ends)?;
        let (from_index, to_index) = (
            node_ref(ctx, from, "from", nodes)?,
            node_ref(ctx, to, "to", nodes)?,
        );
        let kind = flow_kind(ctx, spanned)?;
        let ipv6 = flow_family(ctx, flow, &kind)?;
        if nodes[from_index].kind != NodeKind::Host {
            return Err(ctx.error(
                from.span(),
                "from",
                format!("`{}` is a router; flows start at hosts", from.get_ref()),
            ));
        }
        if nodes[to_index].kind != NodeKind::Host && !matches!(kind, FlowKind::Ping { .. }) {
            return Err(ctx.error(
                to.span(),
                "to",
                format!(
                    "`{}` is a router; only a ping may go to a router",
                    to.get_ref()
                ),
            ));
        }
        if from_index == to_index {
            return Err(ctx.error(to.span(), "to", "a flow runs between two different nodes"));
        }
        let name = flow.name.clone().unwrap_or_else(|| format!("flow{i}"));
        push_flow(
            ctx,
            &mut out,
            PendingFlow {
                name,
                from: from_index,
                to: to_index,
                span: to.span(),
                start: flow.start.map_or(Duration::ZERO, |d| d.0),
                kind,
                ipv6,
            },
            spanned.span(),
        )?;
    }
    Ok(out)
}

/// Adds a flow, refusing a duplicate name (reported at `span`).
fn push_flow(
    ctx: &Ctx<'_>,
    out: &mut Vec<PendingFlow>,
    flow: PendingFlow,
    span: Range<usize>,
) -> Result<(), ScenarioError> {
    if out.iter().any(|f| f.name == flow.name) {
        return Err(ctx.error(
            span,
            "name",
            format!("a flow called `{}` already exists", flow.name),
        ));
    }
    out.push(flow);
    Ok(())
}

fn flow_kind(ctx: &Ctx<'_>, spanned: &Spanned<RawFlow>) -> Result<FlowKind, ScenarioError> {
    let flow = spanned.get_ref();
    let kind = flow.kind.get_ref().as_str();
    check_flow_fields(ctx, spanned, kind)?;
    let size = |b: Option<Bytes>, default: u64| b.map_or(default, |b| b.0);
    let nonzero = |value: u64, field: &str| -> Result<usize, ScenarioError> {
        if value == 0 || value > (1 << 30) {
            Err(ctx.field_error(
                spanned.span(),
                field,
                format!("{value} is out of range (1 byte to 1 GiB)"),
            ))
        } else {
            Ok(value as usize)
        }
    };
    let dur = |d: Option<Dur>| d.map_or(Duration::ZERO, |d| d.0);
    Ok(match kind {
        "bulk" => {
            let bytes = flow.bytes.ok_or_else(|| {
                ctx.error(
                    spanned.span(),
                    "bytes",
                    "a bulk flow needs `bytes` (e.g. \"4M\")",
                )
            })?;
            FlowKind::Bulk {
                bytes: bytes.0,
                record: nonzero(size(flow.record, 8192), "record")?,
                text_mode: flow.text_mode.unwrap_or(false),
                cpu_per_byte: dur(flow.cpu_per_byte),
                translate_per_byte: dur(flow.translate_per_byte),
            }
        }
        "rr" => {
            let response = nonzero(size(flow.response, 1), "response")?;
            FlowKind::RequestResponse {
                request: nonzero(size(flow.request, 1), "request")?,
                response,
                count: flow.count.as_ref().map(|c| *c.get_ref()),
                pipeline: match &flow.pipeline {
                    Some(p) if *p.get_ref() == 0 => {
                        return Err(ctx.error(p.span(), "pipeline", "must be at least 1"));
                    }
                    Some(p) => *p.get_ref(),
                    None => 1,
                },
                write: response_write(ctx, spanned, response)?,
            }
        }
        "ftp" => ftp_kind(ctx, spanned)?,
        "keystroke" => keystroke_kind(ctx, spanned)?,
        _ => ping_kind(ctx, spanned)?,
    })
}

/// An rr flow's `response_head` and `response_write`: how each response is written.
fn response_write(
    ctx: &Ctx<'_>,
    spanned: &Spanned<RawFlow>,
    response: usize,
) -> Result<ResponseWrite, ScenarioError> {
    let flow = spanned.get_ref();
    let Some(head) = flow.response_head else {
        return match &flow.response_write {
            Some(w) => Err(ctx.error(
                w.span(),
                "response_write",
                "needs `response_head`, the bytes of the first write (e.g. 200)",
            )),
            None => Ok(ResponseWrite::One),
        };
    };
    let head = usize::try_from(head.0).unwrap_or(usize::MAX);
    if head == 0 || head >= response {
        return Err(ctx.field_error(
            spanned.span(),
            "response_head",
            format!("{head} must be at least 1 and less than `response` ({response})"),
        ));
    }
    match flow
        .response_write
        .as_ref()
        .map(|w| (w.get_ref().as_str(), w.span()))
    {
        None | Some(("two", _)) => Ok(ResponseWrite::Two { head }),
        Some(("gather", _)) => Ok(ResponseWrite::Gather { head }),
        Some(("cork", _)) => Ok(ResponseWrite::Corked { head }),
        Some((other, span)) => Err(ctx.error(
            span,
            "response_write",
            format!("unknown `{other}`; use \"two\", \"gather\" or \"cork\""),
        )),
    }
}

/// Reject fields that do not apply to a flow of type `kind` (or an unknown type).
fn check_flow_fields(
    ctx: &Ctx<'_>,
    spanned: &Spanned<RawFlow>,
    kind: &str,
) -> Result<(), ScenarioError> {
    let flow = spanned.get_ref();
    let present = [
        ("bytes", flow.bytes.is_some()),
        ("record", flow.record.is_some()),
        ("text_mode", flow.text_mode.is_some()),
        ("cpu_per_byte", flow.cpu_per_byte.is_some()),
        ("translate_per_byte", flow.translate_per_byte.is_some()),
        ("data", flow.data.is_some()),
        ("list", flow.list.is_some()),
        ("request", flow.request.is_some()),
        ("response", flow.response.is_some()),
        ("count", flow.count.is_some()),
        ("pipeline", flow.pipeline.is_some()),
        ("response_head", flow.response_head.is_some()),
        ("response_write", flow.response_write.is_some()),
        ("interval", flow.interval.is_some()),
        ("size", flow.size.is_some()),
    ];
    let allowed: &[&str] = match kind {
        "bulk" => &[
            "bytes",
            "record",
            "text_mode",
            "cpu_per_byte",
            "translate_per_byte",
        ],
        "ftp" => &[
            "bytes",
            "record",
            "text_mode",
            "cpu_per_byte",
            "translate_per_byte",
            "data",
            "list",
        ],
        "rr" => &[
            "request",
            "response",
            "count",
            "pipeline",
            "response_head",
            "response_write",
        ],
        "ping" | "keystroke" => &["count", "interval", "size"],
        other => {
            return Err(ctx.error(
                flow.kind.span(),
                "type",
                format!(
                    "unknown flow type `{other}`; use \"bulk\", \"ftp\", \"rr\", \"keystroke\" or \"ping\""
                ),
            ));
        }
    };
    if let Some((field, _)) = present.iter().find(|(f, p)| *p && !allowed.contains(f)) {
        return Err(ctx.field_error(
            spanned.span(),
            field,
            format!(
                "does not apply to a `{kind}` flow (it takes: {})",
                allowed.join(", ")
            ),
        ));
    }
    Ok(())
}

/// The largest file an `ftp` flow serves (the server holds it in memory).
const MAX_FTP_FILE: u64 = 256 << 20;

/// One more than the most files a LIST flow's directory holds.
const MAX_FTP_LIST: u32 = 100_000;

/// The directory an `ftp` flow with `list = files` LISTs: `/pub`, holding
/// `rfc1.txt` ... `rfcN.txt`, the kth of `(k * 7919) % 60 + 1` KiB (RFC-like sizes,
/// 1 to 60 KiB, the same for every run), as the server's file system.
pub fn ftp_directory(files: u32) -> impnet_ftp::MemFs {
    let fs = impnet_ftp::MemFs::new();
    for k in 1..=files {
        let len = ((u64::from(k) * 7919) % 60 + 1) * 1024;
        fs.insert(&format!("/pub/rfc{k}.txt"), vec![b'x'; len as usize]);
    }
    fs
}

/// The listing a LIST of [`ftp_directory`]`(files)` sends (`ls -l` lines, CRLF).
pub fn ftp_listing(files: u32) -> String {
    use impnet_ftp::fs::FileTree;
    let entries = ftp_directory(files).list("/pub").unwrap_or_default();
    impnet_ftp::server::listing(&entries, true)
}

/// An `ftp` flow's settings: the file (`bytes`, required), the server's writes
/// (`record`, default 8 KiB), TYPE A or I (`text_mode`), the CPU costs, and the data
/// connection (`data`: "passive" (the default), "epsv", "active" or "eprt").
fn ftp_kind(ctx: &Ctx<'_>, spanned: &Spanned<RawFlow>) -> Result<FlowKind, ScenarioError> {
    let flow = spanned.get_ref();
    let bytes = match (flow.list, flow.bytes) {
        (Some(_), Some(_)) => {
            return Err(ctx.field_error(
                spanned.span(),
                "bytes",
                "a LIST (`list`) sends the directory's listing: give no `bytes`",
            ));
        }
        (Some(0 | MAX_FTP_LIST..), _) => {
            return Err(ctx.field_error(
                spanned.span(),
                "list",
                format!("give 1 to {} files", MAX_FTP_LIST - 1),
            ));
        }
        (Some(files), None) => Bytes(ftp_listing(files).len() as u64),
        (None, bytes) => bytes.ok_or_else(|| {
            ctx.error(
                spanned.span(),
                "bytes",
                "an ftp flow needs `bytes`, the size of the file (e.g. \"60K\"), or `list`",
            )
        })?,
    };
    if bytes.0 > MAX_FTP_FILE {
        return Err(ctx.field_error(
            spanned.span(),
            "bytes",
            format!("{} is more than an ftp flow serves (256 MiB)", bytes.0),
        ));
    }
    let record = flow.record.map_or(8192, |r| r.0);
    if record == 0 || record > (1 << 30) {
        return Err(ctx.field_error(
            spanned.span(),
            "record",
            format!("{record} is out of range (1 byte to 1 GiB)"),
        ));
    }
    use impnet_ftp::DataMode;
    let data = match flow.data.as_ref().map(|d| (d.get_ref().as_str(), d.span())) {
        None | Some(("passive", _)) => DataMode::Passive,
        Some(("epsv", _)) => DataMode::ExtendedPassive,
        Some(("active", _)) => DataMode::Active,
        Some(("eprt", _)) => DataMode::ExtendedActive,
        Some((other, span)) => {
            return Err(ctx.error(
                span,
                "data",
                format!("unknown `{other}`; use \"passive\", \"epsv\", \"active\" or \"eprt\""),
            ));
        }
    };
    let dur = |d: Option<Dur>| d.map_or(Duration::ZERO, |d| d.0);
    Ok(FlowKind::Ftp {
        bytes: bytes.0,
        list: flow.list,
        record: record as usize,
        text_mode: flow.text_mode.unwrap_or(false),
        cpu_per_byte: dur(flow.cpu_per_byte),
        translate_per_byte: dur(flow.translate_per_byte),
        data,
    })
}

/// A `keystroke` flow's settings: `count` (default 100) keystrokes, one per `interval`
/// (default 200 ms, a typist's pace).
fn keystroke_kind(ctx: &Ctx<'_>, spanned: &Spanned<RawFlow>) -> Result<FlowKind, ScenarioError> {
    let flow = spanned.get_ref();
    if flow.size.is_some() {
        return Err(ctx.field_error(
            spanned.span(),
            "size",
            "does not apply to a `keystroke` flow (each keystroke is one byte)",
        ));
    }
    let count = match &flow.count {
        Some(c) if *c.get_ref() == 0 => {
            return Err(ctx.error(c.span(), "count", "must be at least 1 keystroke"));
        }
        Some(c) => *c.get_ref(),
        None => 100,
    };
    let interval = flow.interval.map_or(Duration::from_millis(200), |d| d.0);
    if interval == Duration::ZERO {
        return Err(ctx.field_error(spanned.span(), "interval", "must be more than 0"));
    }
    Ok(FlowKind::Keystroke { count, interval })
}

/// A `ping` flow's settings.
fn ping_kind(ctx: &Ctx<'_>, spanned: &Spanned<RawFlow>) -> Result<FlowKind, ScenarioError> {
    let flow = spanned.get_ref();
    let size = |b: Option<Bytes>, default: u64| b.map_or(default, |b| b.0);
    Ok(FlowKind::Ping {
        count: match &flow.count {
            Some(c) if *c.get_ref() == 0 || *c.get_ref() > 65535 => {
                return Err(ctx.error(c.span(), "count", "must be 1..=65535"));
            }
            Some(c) => *c.get_ref() as u32,
            None => 5,
        },
        interval: flow.interval.map_or(Duration::from_secs(1), |d| d.0),
        size: match size(flow.size, 56) {
            s if s > 65000 => {
                return Err(ctx.field_error(spanned.span(), "size", "must be at most 65000 bytes"));
            }
            s => s as usize,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the CLI's argument property test: `imp sim /dev/zero` read forever.
    #[test]
    fn load_refuses_what_is_not_a_small_regular_file() {
        let check = |path: &std::path::Path, expect: &str| {
            let e = Scenario::load(path).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(expect), "{}: {text}", path.display());
            assert!(text.starts_with(&path.display().to_string()), "{text}");
        };
        check(std::path::Path::new("/dev/zero"), "not a regular file");
        check(&std::env::temp_dir(), "not a regular file");
        check(
            std::path::Path::new("/nonexistent/imp/scenario.toml"),
            "cannot read the file",
        );
        let dir = std::env::temp_dir().join(format!("imp-scenario-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.toml");
        std::fs::write(&big, vec![b'#'; (MAX_SCENARIO_BYTES + 1) as usize]).unwrap();
        check(&big, "larger than 16 MiB");
        let binary = dir.join("binary.toml");
        std::fs::write(&binary, b"seed = 1\n\xff\xfe").unwrap();
        check(&binary, "not UTF-8");
        std::fs::remove_dir_all(&dir).ok();
    }
}
