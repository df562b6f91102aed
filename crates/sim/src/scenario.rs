//! Scenario files: an experiment described in TOML (hosts, links, flows, duration,
//! seed), parsed and validated into a [`Scenario`] that [`crate::experiment`] runs.
//!
//! The format is documented in `scenarios/README.md`. Every mistake in a file is one
//! [`ScenarioError`] whose message is a single line naming the file, the line and the
//! field; parsing never panics.

use std::fmt;
use std::ops::Range;

use impnet_core::Duration;
use impnet_core::tcp::TcpConfig;
use impnet_core::tcp::cc::CcAlgorithm;
use impnet_phy::LinkConfig;
use impnet_phy::link::GilbertElliott;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use toml::Spanned;

use crate::units;

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
    /// The hosts, in file order.
    pub hosts: Vec<HostSpec>,
    /// The links, in file order.
    pub links: Vec<LinkSpec>,
    /// The flows, in file order.
    pub flows: Vec<FlowSpec>,
}

/// One host and its stack settings.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// Unique name.
    pub name: String,
    /// TCP settings of its stack.
    pub tcp: TcpConfig,
}

/// A point-to-point link between two hosts.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// Unique name (used for the pcap file).
    pub name: String,
    /// Index of the first host (address 10.x.y.1).
    pub a: usize,
    /// Index of the second host (address 10.x.y.2).
    pub b: usize,
    /// The link model, both directions alike; `mtu` includes the 14-byte Ethernet header.
    pub config: LinkConfig,
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
    /// Index of the other host.
    pub to: usize,
    /// Index of the link joining them.
    pub link: usize,
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
            FlowKind::RequestResponse { .. } => "rr",
            FlowKind::Ping { .. } => "ping",
        }
    }
}

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
                        let parse: fn(&str) -> Result<$inner, String> = $parse;
                        parse(v).map($name).map_err(E::custom)
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
    #[serde(default)]
    host: Vec<Spanned<RawHost>>,
    #[serde(default)]
    link: Vec<Spanned<RawLink>>,
    #[serde(default)]
    flow: Vec<Spanned<RawFlow>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: Spanned<String>,
    #[serde(default)]
    tcp: RawTcp,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTcp {
    send_buffer: Option<Bytes>,
    recv_buffer: Option<Bytes>,
    cc: Option<Spanned<String>>,
    sack: Option<bool>,
    timestamps: Option<bool>,
    window_scaling: Option<bool>,
    delayed_ack: Option<Dur>,
    nagle: Option<bool>,
    initial_window: Option<Spanned<u32>>,
    segment_size: Option<Spanned<u32>>,
    initial_rto: Option<Dur>,
    min_rto: Option<Dur>,
    max_rto: Option<Dur>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: Option<String>,
    a: Spanned<String>,
    b: Spanned<String>,
    rate: Option<Rate>,
    delay: Option<Dur>,
    queue: Option<Bytes>,
    loss: Option<Prob>,
    burst_loss: Option<RawBurst>,
    reorder: Option<Prob>,
    reorder_delay: Option<Dur>,
    duplicate: Option<Prob>,
    corrupt: Option<Prob>,
    mtu: Option<Spanned<Bytes>>,
    seed: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBurst {
    good_to_bad: Prob,
    bad_to_good: Prob,
    loss_good: Option<Prob>,
    loss_bad: Option<Prob>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    name: Option<String>,
    #[serde(rename = "type")]
    kind: Spanned<String>,
    from: Spanned<String>,
    to: Spanned<String>,
    start: Option<Dur>,
    // bulk
    bytes: Option<Bytes>,
    record: Option<Bytes>,
    text_mode: Option<bool>,
    cpu_per_byte: Option<Dur>,
    translate_per_byte: Option<Dur>,
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
        let start = key
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
            .map_or(0, |i| i + 1);
        let key = key[start..].trim_matches('"');
        (!key.is_empty()).then(|| key.to_string())
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
        let at_top = |field: &str, message: String| ScenarioError {
            origin: origin.to_string(),
            line: None,
            field: Some(field.to_string()),
            message,
        };
        if raw.duration.0 == Duration::ZERO {
            return Err(at_top("duration", "must be longer than 0".into()));
        }
        if let Some(snap) = &raw.pcap_snaplen
            && *snap.get_ref() < 64
        {
            return Err(ctx.error(snap.span(), "pcap_snaplen", "must be at least 64 bytes"));
        }
        let hosts = hosts(&ctx, &raw.host)?;
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        let links = links(&ctx, &raw.link, &names)?;
        let flows = flows(&ctx, &raw.flow, &names, &links)?;
        if flows.is_empty() {
            return Err(at_top(
                "flow",
                "the scenario has no [[flow]]; add one".into(),
            ));
        }
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
            hosts,
            links,
            flows,
        })
    }

    /// Reads and parses a scenario file.
    pub fn load(path: &std::path::Path) -> Result<Scenario, ScenarioError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            origin: origin.clone(),
            line: None,
            field: None,
            message: format!("cannot read the file: {e}"),
        })?;
        Scenario::parse(&text, &origin)
    }

    /// Index of the host called `name`.
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }
}

fn hosts(ctx: &Ctx<'_>, raw: &[Spanned<RawHost>]) -> Result<Vec<HostSpec>, ScenarioError> {
    let mut out: Vec<HostSpec> = Vec::new();
    for host in raw {
        let name = host.get_ref().name.get_ref();
        if name.is_empty() {
            return Err(ctx.error(host.get_ref().name.span(), "name", "must not be empty"));
        }
        if out.iter().any(|h| &h.name == name) {
            return Err(ctx.error(
                host.get_ref().name.span(),
                "name",
                format!("a host called `{name}` already exists; names must be unique"),
            ));
        }
        let tcp = tcp_config(ctx, &host.get_ref().tcp)?;
        out.push(HostSpec {
            name: name.clone(),
            tcp,
        });
    }
    if out.len() < 2 {
        return Err(ScenarioError {
            origin: ctx.origin.to_string(),
            line: None,
            field: Some("host".into()),
            message: "a scenario needs at least two [[host]] entries".into(),
        });
    }
    Ok(out)
}

fn tcp_config(ctx: &Ctx<'_>, raw: &RawTcp) -> Result<TcpConfig, ScenarioError> {
    let mut tcp = TcpConfig::default();
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
                    "unknown congestion control `{}`; imp has \"newreno\" (\"reno\"), \"cubic\" and \"vegas\"",
                    cc.get_ref()
                ),
            )
        })?;
    }
    if let Some(v) = raw.sack {
        tcp.sack = v;
    }
    if let Some(v) = raw.timestamps {
        tcp.timestamps = v;
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
    if let Some(v) = raw.initial_rto {
        tcp.initial_rto = v.0;
    }
    if let Some(v) = raw.min_rto {
        tcp.min_rto = v.0;
    }
    if let Some(v) = raw.max_rto {
        tcp.max_rto = v.0;
    }
    Ok(tcp)
}

fn host_ref(
    ctx: &Ctx<'_>,
    name: &Spanned<String>,
    field: &str,
    names: &[&str],
) -> Result<usize, ScenarioError> {
    names
        .iter()
        .position(|n| *n == name.get_ref())
        .ok_or_else(|| {
            ctx.error(
                name.span(),
                field,
                format!(
                    "no host called `{}` (hosts: {})",
                    name.get_ref(),
                    names.join(", ")
                ),
            )
        })
}

fn links(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawLink>],
    names: &[&str],
) -> Result<Vec<LinkSpec>, ScenarioError> {
    let mut out: Vec<LinkSpec> = Vec::new();
    for (i, spanned) in raw.iter().enumerate() {
        let link = spanned.get_ref();
        let a = host_ref(ctx, &link.a, "a", names)?;
        let b = host_ref(ctx, &link.b, "b", names)?;
        if a == b {
            return Err(ctx.error(
                link.b.span(),
                "b",
                "a link joins two different hosts (a self-loop is an echo flow over a link)",
            ));
        }
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
        let name = link.name.clone().unwrap_or_else(|| format!("link{i}"));
        if out.iter().any(|l| l.name == name) {
            return Err(ctx.error(
                spanned.span(),
                "name",
                format!("a link called `{name}` already exists"),
            ));
        }
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
        };
        config.validate().map_err(|e| {
            let field = match e {
                impnet_phy::LinkConfigError::ProbabilityOutOfRange { name, .. } => name,
                impnet_phy::LinkConfigError::ZeroMtu => "mtu",
                _ => "reorder_delay",
            };
            let key = field.rsplit('.').next().unwrap_or(field);
            ctx.field_error(spanned.span(), key, e.to_string())
        })?;
        out.push(LinkSpec {
            name,
            a,
            b,
            config,
            seed: link.seed,
        });
    }
    Ok(out)
}

fn flows(
    ctx: &Ctx<'_>,
    raw: &[Spanned<RawFlow>],
    names: &[&str],
    links: &[LinkSpec],
) -> Result<Vec<FlowSpec>, ScenarioError> {
    let mut out: Vec<FlowSpec> = Vec::new();
    for (i, spanned) in raw.iter().enumerate() {
        let flow = spanned.get_ref();
        let from = host_ref(ctx, &flow.from, "from", names)?;
        let to = host_ref(ctx, &flow.to, "to", names)?;
        let link = links
            .iter()
            .position(|l| (l.a, l.b) == (from, to) || (l.a, l.b) == (to, from))
            .ok_or_else(|| {
                ctx.error(
                    flow.to.span(),
                    "to",
                    format!(
                        "no link joins `{}` and `{}` (routers come later: flows run over one link)",
                        names[from], names[to]
                    ),
                )
            })?;
        let kind = flow_kind(ctx, spanned)?;
        let name = flow.name.clone().unwrap_or_else(|| format!("flow{i}"));
        if out.iter().any(|f| f.name == name) {
            return Err(ctx.error(
                spanned.span(),
                "name",
                format!("a flow called `{name}` already exists"),
            ));
        }
        out.push(FlowSpec {
            name,
            from,
            to,
            link,
            start: flow.start.map_or(Duration::ZERO, |d| d.0),
            kind,
        });
    }
    Ok(out)
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
        "rr" => &[
            "request",
            "response",
            "count",
            "pipeline",
            "response_head",
            "response_write",
        ],
        "ping" => &["count", "interval", "size"],
        other => {
            return Err(ctx.error(
                flow.kind.span(),
                "type",
                format!("unknown flow type `{other}`; use \"bulk\", \"rr\" or \"ping\""),
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
