//! `imp ping`: ICMP echo between two simulated hosts (ICMPv6 with `-6`), printed like
//! ping(8); with `--tap`, echo requests from imp over a TAP device to a real host, IPv4
//! or IPv6 (a link-local one with its `%scope`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use clap::Args;
use impnet_core::ip_options::{self, Hop, TimestampKind};
use impnet_core::{Duration, IcmpError, Instant, StackConfig};
use impnet_phy::LinkConfig;
use impnet_sim::{Flow, Sim};
use impnet_wire::ipv4::Cidr;
use serde::Serialize;

use crate::tapargs::TapArgs;
use crate::units;

/// Options of `imp ping`.
#[derive(Debug, Args)]
pub struct PingArgs {
    /// Stop after sending this many echo requests.
    #[arg(short = 'c', long, default_value_t = 5)]
    pub count: u16,
    /// Bytes of data in each request (ICMP payload).
    #[arg(short = 's', long, default_value_t = 56)]
    pub size: usize,
    /// Time between requests.
    #[arg(short = 'i', long, default_value = "1s", value_parser = units::parse_duration)]
    pub interval: Duration,
    /// Link rate of the simulated link (e.g. 10mbit, 9600).
    #[arg(long, default_value = "10mbit", value_parser = units::parse_rate)]
    pub rate: u64,
    /// One-way propagation delay of the simulated link.
    #[arg(long, default_value = "10ms", value_parser = units::parse_duration)]
    pub delay: Duration,
    /// Probability that the link loses a frame (e.g. 1% or 0.01), each direction.
    #[arg(long, default_value = "0", value_parser = units::parse_probability)]
    pub loss: f64,
    /// Seed of the simulation: the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write every frame on the link to this pcap file.
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Ask every hop to record its address (IPv4 Record Route option, as `ping -R`):
    /// the route there and back is printed with each reply.
    #[arg(short = 'R', long, conflicts_with = "timestamp")]
    pub record_route: bool,
    /// Ask every hop for a timestamp (IPv4 Timestamp option, as `ping -T`): `tsonly`
    /// or `tsandaddr`.
    #[arg(short = 'T', long, value_name = "KIND", value_parser = parse_timestamp)]
    pub timestamp: Option<TimestampKind>,
    /// Print one JSON object instead of ping(8)-style lines.
    #[arg(long)]
    pub json: bool,
    /// How long to wait for replies after the last request (with --tap).
    #[arg(short = 'W', long, default_value = "2s", value_parser = units::parse_duration)]
    pub wait: Duration,
    /// Ping over IPv6 on the simulated network (fd00::1 pings fd00::2); with --tap the
    /// HOST's family decides.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// The host to ping over the TAP (with --tap; the simulated network pings 10.0.0.2):
    /// an IPv4 or IPv6 address, a link-local one optionally with its scope
    /// (`fe80::1%tap0`, the TAP's name), or a name (resolved with --dns or DHCP's
    /// servers; its first IPv4 address, else its first IPv6 one).
    #[arg(value_name = "HOST", value_parser = parse_target)]
    pub host: Option<Target>,
    #[command(flatten)]
    pub device: TapArgs,
}

/// One answered request.
#[derive(Debug, Serialize, Clone)]
struct Reply {
    seq: u16,
    bytes: usize,
    ttl: u8,
    rtt_ms: f64,
    /// The hops a Record Route option collected, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    route: Vec<String>,
    /// The hops a Timestamp option collected: (address if recorded, stamp in ms; the
    /// high bit set means a clock not tied to UT).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    timestamps: Vec<(Option<String>, u32)>,
}

/// The address `imp ping` pings, with the scope a link-local IPv6 address was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The address.
    pub addr: IpAddr,
    /// The interface named after `%` (only for a link-local IPv6 address).
    pub scope: Option<String>,
}

/// What HOST names: an address, or a name to resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An IPv4 or IPv6 address (with its scope).
    Addr(Host),
    /// A host name.
    Name(String),
}

impl Target {
    /// The address, when HOST was one.
    pub fn addr(&self) -> Option<IpAddr> {
        match self {
            Target::Addr(h) => Some(h.addr),
            Target::Name(_) => None,
        }
    }
}

/// Parse HOST: an address (see [`parse_host`]) or a host name (`example.test`).
fn parse_target(text: &str) -> Result<Target, String> {
    if text.contains([':', '%']) || text.parse::<IpAddr>().is_ok() {
        return parse_host(text).map(Target::Addr);
    }
    let name_like = !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        && !text
            .split('.')
            .all(|l| l.bytes().all(|b| b.is_ascii_digit()));
    if name_like {
        Ok(Target::Name(text.to_string()))
    } else {
        Err(format!(
            "`{text}` is neither an IPv4 or IPv6 address nor a host name"
        ))
    }
}

/// Parse HOST: `10.0.0.1`, `2001:db8::1` or `fe80::1%tap0`.
fn parse_host(text: &str) -> Result<Host, String> {
    let (addr, scope) = match text.split_once('%') {
        Some((addr, scope)) => (addr, Some(scope)),
        None => (text, None),
    };
    let addr: IpAddr = addr
        .parse()
        .map_err(|_| format!("`{text}` is not an IPv4 or IPv6 address"))?;
    match (addr, scope) {
        (_, None) => Ok(Host { addr, scope: None }),
        (IpAddr::V6(v6), Some(scope)) if v6.is_unicast_link_local() && !scope.is_empty() => {
            Ok(Host {
                addr,
                scope: Some(scope.to_string()),
            })
        }
        _ => Err(format!(
            "`{text}`: only a link-local IPv6 address (fe80::/10) takes a %scope"
        )),
    }
}

/// Parse `-T`'s kind.
fn parse_timestamp(text: &str) -> Result<TimestampKind, String> {
    match text {
        "tsonly" => Ok(TimestampKind::Only),
        "tsandaddr" => Ok(TimestampKind::WithAddress),
        _ => Err(format!(
            "`{text}` is not a timestamp kind: tsonly or tsandaddr"
        )),
    }
}

/// The IPv4 options the requests carry.
fn request_options(args: &PingArgs) -> Vec<u8> {
    match (args.record_route, args.timestamp) {
        (true, _) => ip_options::record_route(9),
        (false, Some(kind)) => ip_options::timestamp(kind),
        (false, None) => Vec::new(),
    }
}

/// The reply's Record Route and Timestamp hops, into `reply`.
fn take_hops(reply: &mut Reply, options: &impnet_core::ip_options::IpOptions) {
    for hop in options.hops().0 {
        match hop {
            Hop::Route(addr) => reply.route.push(addr.to_string()),
            Hop::Stamp(addr, stamp) => reply.timestamps.push((addr.map(|a| a.to_string()), stamp)),
        }
    }
}

/// ping(8)'s lines for the hops: `RR:` then one address per line; `TS:` then address
/// (if recorded) and stamp per line.
fn print_hops(reply: &Reply) {
    for (i, hop) in reply.route.iter().enumerate() {
        println!("{}\t{hop}", if i == 0 { "RR:" } else { "" });
    }
    for (i, (addr, stamp)) in reply.timestamps.iter().enumerate() {
        let when = if stamp & 0x8000_0000 == 0 {
            format!("{stamp} absolute")
        } else {
            format!("{} (not UT)", stamp & 0x7fff_ffff)
        };
        let addr = addr.as_deref().map_or(String::new(), |a| format!("{a}\t"));
        println!("{}\t{addr}{when}", if i == 0 { "TS:" } else { "" });
    }
}

/// The whole run, as `--json` prints it.
#[derive(Debug, Serialize)]
struct Report {
    destination: String,
    transmitted: u16,
    received: usize,
    loss_pct: f64,
    time_ms: f64,
    rtt_min_ms: Option<f64>,
    rtt_avg_ms: Option<f64>,
    rtt_max_ms: Option<f64>,
    rtt_mdev_ms: Option<f64>,
    replies: Vec<Reply>,
    seed: u64,
}

/// The longest run `imp ping` accepts: a hundred years, well within the simulator's
/// 64-bit nanosecond clock.
const MAX_RUN: Duration = Duration::from_secs(100 * 365 * 86_400);

const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SRC6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const DST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const IDENT: u16 = 0x1e7;

/// Bytes of headers before the echo data: IPv4 (20) or IPv6 (40), and ICMP's 8.
fn header_bytes(v6: bool) -> usize {
    if v6 { 48 } else { 28 }
}

/// ping(8)'s first line.
fn banner(name: &str, host: IpAddr, size: usize) -> String {
    format!(
        "PING {name} ({host}) {size}({}) bytes of data",
        size + header_bytes(host.is_ipv6())
    )
}

fn payload(seq: u16, size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| (i as u8).wrapping_add(seq as u8))
        .collect()
}

/// The simulated link the arguments describe.
fn sim_link(args: &PingArgs) -> LinkConfig {
    LinkConfig {
        rate_bps: args.rate,
        delay: args.delay,
        loss: args.loss,
        ..LinkConfig::default()
    }
}

/// Check the arguments before anything runs (no I/O): every error names the option.
pub fn validate(args: &PingArgs) -> Result<(), String> {
    if args.count == 0 {
        return Err("--count 0: send at least 1 request".into());
    }
    let v6 = args.ipv6
        || args
            .host
            .as_ref()
            .and_then(Target::addr)
            .is_some_and(|a| a.is_ipv6());
    check_family(args, v6)?;
    // The whole run must fit the (virtual or real) clock: the simulator's counts
    // nanoseconds in 64 bits (584 years), so --interval 1e9s with -c 65535 overflowed
    // it and sent most requests at once at its end.
    let run_nanos = args
        .interval
        .as_nanos()
        .checked_mul(u64::from(args.count - 1))
        .and_then(|n| n.checked_add(args.wait.as_nanos()))
        .and_then(|n| n.checked_add(args.delay.as_nanos().checked_mul(4)?));
    if run_nanos.is_none_or(|n| n > MAX_RUN.as_nanos()) {
        return Err(format!(
            "--interval {} x --count {}: the run would last longer than {} years",
            args.interval,
            args.count,
            MAX_RUN.as_nanos() / 1_000_000_000 / 86_400 / 365
        ));
    }
    args.device.validate()?;
    if args.device.is_set() {
        let (name, _) = args.device.required("ping")?;
        let host = args
            .host
            .as_ref()
            .ok_or("imp ping --tap needs the HOST to ping (an IPv4 or IPv6 address or a name)")?;
        return match host {
            Target::Addr(host) => check_host(host, name),
            Target::Name(_) => Ok(()),
        };
    }
    let mut given = args.device.given();
    if args.host.is_some() {
        given.insert(0, "HOST");
    }
    if !given.is_empty() {
        return Err(format!(
            "{} {} for pinging over a TAP: add --tap NAME (without it imp ping runs on its \
             simulated network, set by --rate/--delay/--loss)",
            given.join(", "),
            if given.len() == 1 { "is" } else { "are" }
        ));
    }
    sim_link(args)
        .validate()
        .map_err(|e| format!("bad link settings (--rate, --delay, --loss): {e}"))
}

/// The checks that depend on the family pinged: -6 with an IPv4 HOST, IPv4 options
/// over IPv6, the largest payload of each.
fn check_family(args: &PingArgs, v6: bool) -> Result<(), String> {
    if let Some(host) = args
        .host
        .as_ref()
        .and_then(Target::addr)
        .filter(|a| args.ipv6 && a.is_ipv4())
    {
        return Err(format!("-6 with the IPv4 HOST {host}: drop one"));
    }
    if v6 && (args.record_route || args.timestamp.is_some()) {
        return Err(
            "--record-route (-R) and --timestamp (-T) are IPv4 options: IPv6 (--ipv6, -6, \
             or an IPv6 HOST) has no record route or timestamp option"
                .into(),
        );
    }
    let (max, family) = if v6 {
        (65535 - 8, "ICMPv6 message")
    } else {
        (65507 - 8, "IPv4 datagram")
    };
    if args.size > max {
        return Err(format!(
            "--size {} is larger than an {family} can carry ({max})",
            args.size
        ));
    }
    Ok(())
}

/// HOST over a device named `name`: one unicast address; a scope names that device.
fn check_host(host: &Host, name: &str) -> Result<(), String> {
    let addr = host.addr;
    let unicast = match addr {
        IpAddr::V4(a) => !(a.is_unspecified() || a.is_multicast() || a.is_broadcast()),
        IpAddr::V6(a) => !(a.is_unspecified() || a.is_multicast() || a.is_loopback()),
    };
    if !unicast {
        return Err(format!(
            "HOST {addr}: not a host's address (imp pings one unicast address)"
        ));
    }
    match &host.scope {
        Some(scope) if scope != name => Err(format!(
            "HOST {addr}%{scope}: imp's only interface is {name} (write {addr}%{name} or \
             leave the scope out)"
        )),
        _ => Ok(()),
    }
}

/// Run `imp ping`: on the built-in two-host network, or over a TAP with `--tap`.
pub fn run(args: &PingArgs) -> Result<(), String> {
    validate(args)?;
    if args.device.is_set() {
        return run_tap(args);
    }
    let link = sim_link(args);
    let mut sim = Sim::new(args.seed);
    let config = StackConfig {
        // The simulated link has no one else on it: addresses are usable at once.
        ipv6: impnet_core::Ipv6Config {
            dad_transmits: 0,
            router_solicitations: 0,
            ..impnet_core::Ipv6Config::default()
        },
        ..StackConfig::default()
    };
    let a = sim.add_host("a", config.clone());
    let b = sim.add_host("b", config);
    let cidr = |addr| Cidr::new(addr, 24).expect("a /24 is a valid prefix");
    let link_id = sim
        .connect(a, cidr(SRC), b, cidr(DST), link)
        .map_err(|e| format!("bad link settings: {e}"))?;
    let dst = if args.ipv6 {
        for (host, addr) in [(a, SRC6), (b, DST6)] {
            let iface = sim
                .iface_on(host, link_id)
                .ok_or("no interface on the link")?;
            let cidr = impnet_wire::ipv6::Cidr::new(addr, 64).expect("a /64 is a valid prefix");
            let now = sim.now();
            sim.host_mut(host).add_address6(now, iface, cidr);
        }
        IpAddr::V6(DST6)
    } else {
        IpAddr::V4(DST)
    };
    if let Some(path) = &args.pcap {
        sim.capture(link_id, path)
            .map_err(|e| format!("cannot write pcap file {}: {e}", path.display()))?;
    }
    let socket = sim
        .host_mut(a)
        .icmp_bind(IDENT)
        .map_err(|e| format!("cannot open an ICMP socket: {e}"))?;
    if !args.json {
        println!("{}.", banner(&dst.to_string(), dst, args.size));
    }
    let replies = exchange(&mut sim, args, (a, dst), socket)?;
    sim.flush_captures()
        .map_err(|e| format!("cannot write pcap file: {e}"))?;
    report(args, dst, &replies, sim.seed());
    Ok(())
}

/// The first address of `name`: IPv4 if it has one, else IPv6.
fn resolve_name(rt: &impnet::Runtime, name: &str) -> Result<IpAddr, String> {
    let ips = impnet::lookup_ips(rt, name).map_err(|e| format!("HOST {name}: {e}"))?;
    ips.iter()
        .find(|ip| ip.is_ipv4())
        .or_else(|| ips.first())
        .copied()
        .ok_or_else(|| format!("HOST {name}: the name has no address"))
}

/// `imp ping --tap`: echo requests from imp to a real host, at `--interval`.
fn run_tap(args: &PingArgs) -> Result<(), String> {
    let name = args
        .host
        .as_ref()
        .ok_or("imp ping --tap needs the HOST to ping (an IPv4 or IPv6 address or a name)")?;
    let stack = args.device.start("ping")?;
    let (name, host) = match name {
        Target::Addr(h) => (h.addr.to_string(), h.addr),
        Target::Name(n) => (n.clone(), resolve_name(&stack.rt, n)?),
    };
    if let IpAddr::V6(h) = host
        && h.is_unicast_link_local()
    {
        wait_for_link_local(&stack)?;
    }
    let socket = impnet::IcmpSocket::bind(&stack.rt, IDENT)
        .map_err(|e| format!("cannot open an ICMP socket: {e}"))?;
    if !args.json {
        println!(
            "{}, from {}.",
            banner(&name, host, args.size),
            stack.describe(args.device.impair.as_ref())
        );
    }
    let interval = std::time::Duration::from_nanos(args.interval.as_nanos());
    let start = std::time::Instant::now();
    let mut sent_at = Vec::new();
    let mut replies = Vec::new();
    let mut buf = vec![0u8; args.size.max(1)];
    let mut last_error = None;
    for seq in 0..args.count {
        let options = request_options(args);
        if let Err(e) = socket.send_echo_with_options(host, seq, &payload(seq, args.size), &options)
        {
            println!("From {} icmp_seq={}: {e}", stack.first_addr(), seq + 1);
            last_error = Some(e.to_string());
        }
        sent_at.push(std::time::Instant::now());
        let until = if seq + 1 == args.count {
            start
                + interval * u32::from(seq)
                + std::time::Duration::from_nanos(args.wait.as_nanos())
        } else {
            start + interval * u32::from(seq + 1)
        };
        receive_until(
            args,
            &socket,
            host,
            until,
            &sent_at,
            &mut buf,
            &mut replies,
            &mut last_error,
        );
    }
    report(args, host, &replies, 0);
    if replies.is_empty() {
        let why = last_error.map_or(String::new(), |e| format!(" ({e})"));
        return Err(format!("no echo reply from {host}{why}"));
    }
    Ok(())
}

/// Wait (up to 5 s) until imp's link-local address passed duplicate address detection:
/// a link-local HOST is pinged from it.
fn wait_for_link_local(stack: &crate::tapargs::TapStack) -> Result<(), String> {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let ready = stack.rt.with_stack(|s, _| {
            s.ipv6_addresses(stack.iface).iter().any(|a| {
                a.cidr.address.is_unicast_link_local()
                    && a.state == impnet_core::ipv6::AddrState::Preferred
            })
        });
        if ready {
            return Ok(());
        }
        if std::time::Instant::now() > give_up {
            return Err(format!(
                "imp has no usable link-local address on {} after 5 s",
                stack.name
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Take echo replies until `until` (or every request is answered).
#[allow(clippy::too_many_arguments)]
fn receive_until(
    args: &PingArgs,
    socket: &impnet::IcmpSocket,
    host: IpAddr,
    until: std::time::Instant,
    sent_at: &[std::time::Instant],
    buf: &mut [u8],
    replies: &mut Vec<Reply>,
    last_error: &mut Option<String>,
) {
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || replies.len() == usize::from(args.count) {
            return;
        }
        match socket.recv(buf, Some(left)) {
            Ok(echo) => {
                let Some(sent) = sent_at.get(usize::from(echo.seq_no)) else {
                    continue;
                };
                if echo.src != host || replies.iter().any(|r| r.seq == echo.seq_no + 1) {
                    continue;
                }
                let mut reply = Reply {
                    seq: echo.seq_no + 1,
                    bytes: echo.len + 8,
                    ttl: echo.ttl,
                    rtt_ms: sent.elapsed().as_secs_f64() * 1e3,
                    route: Vec::new(),
                    timestamps: Vec::new(),
                };
                take_hops(&mut reply, &echo.options);
                if buf[..echo.len.min(buf.len())]
                    != payload(echo.seq_no, args.size)[..echo.len.min(buf.len())]
                {
                    eprintln!("reply {} carried corrupted data", reply.seq);
                    continue;
                }
                if !args.json {
                    println!(
                        "{} bytes from {}: icmp_seq={} ttl={} time={:.3} ms",
                        reply.bytes, echo.src, reply.seq, reply.ttl, reply.rtt_ms
                    );
                    print_hops(&reply);
                }
                replies.push(reply);
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return,
            Err(e) => {
                if !args.json {
                    println!("From {host}: {e}");
                }
                *last_error = Some(e.to_string());
                std::thread::sleep(std::time::Duration::from_millis(10).min(left));
            }
        }
    }
}

/// A reply on the simulated network, printed unless `--json`.
fn sim_reply(args: &PingArgs, echo: &impnet_core::EchoReply, rtt_ms: f64) -> Reply {
    let mut reply = Reply {
        seq: echo.seq_no + 1,
        bytes: echo.len + 8,
        ttl: echo.ttl,
        rtt_ms,
        route: Vec::new(),
        timestamps: Vec::new(),
    };
    take_hops(&mut reply, &echo.options);
    if !args.json {
        println!(
            "{} bytes from {}: icmp_seq={} ttl={} time={:.3} ms",
            reply.bytes, echo.src, reply.seq, reply.ttl, reply.rtt_ms
        );
        print_hops(&reply);
    }
    reply
}

fn exchange(
    sim: &mut Sim,
    args: &PingArgs,
    (a, dst): (impnet_sim::HostId, IpAddr),
    socket: impnet_core::IcmpHandle,
) -> Result<Vec<Reply>, String> {
    let src: IpAddr = if dst.is_ipv6() {
        SRC6.into()
    } else {
        SRC.into()
    };
    let start = sim.now();
    let mut sent_at: Vec<Instant> = Vec::new();
    let mut replies = Vec::new();
    let mut buf = vec![0u8; 65536];
    // Requests the stack refused (a full transmit queue with `-i 0`): counted, and
    // reported once at the end rather than a line each.
    let mut unsent: (u64, Option<IcmpError>) = (0, None);
    let wait_after_last = Duration::from_secs(2) + args.delay.saturating_mul(4);
    let end = start + args.interval.saturating_mul(u64::from(args.count - 1)) + wait_after_last;
    let result = sim.run(10_000_000, end + Duration::from_secs(1), |sim| {
        let now = sim.now();
        let stack = sim.host_mut(a);
        loop {
            match stack.icmp_recv(socket, &mut buf) {
                Ok(echo) => {
                    let Some(&sent) = sent_at.get(usize::from(echo.seq_no)) else {
                        continue;
                    };
                    if buf[..echo.len] != payload(echo.seq_no, args.size)[..] {
                        eprintln!("reply {} carried corrupted data", echo.seq_no);
                        continue;
                    }
                    let rtt_ms = (now - sent).as_nanos() as f64 / 1e6;
                    replies.push(sim_reply(args, &echo, rtt_ms));
                }
                Err(IcmpError::WouldBlock) => break,
                Err(e) => {
                    if !args.json {
                        println!("From {src} icmp_seq={}: {e}", sent_at.len());
                    }
                }
            }
        }
        // Every request that is due goes now (all at once with `-i 0`).
        let due = |sent: usize| start + args.interval.saturating_mul(sent as u64);
        while sent_at.len() < usize::from(args.count) && now >= due(sent_at.len()) {
            let seq = sent_at.len() as u16;
            let options = request_options(args);
            if let Err(e) = stack.icmp_send_echo_with_options(
                now,
                socket,
                dst,
                seq,
                &payload(seq, args.size),
                &options,
            ) {
                unsent = (unsent.0 + 1, Some(e));
            }
            sent_at.push(now);
        }
        if sent_at.len() < usize::from(args.count) {
            return Flow::WakeAt(due(sent_at.len()));
        }
        if replies.len() == usize::from(args.count) || now >= end {
            Flow::Done
        } else {
            Flow::WakeAt(end)
        }
    });
    result.map_err(|e| e.to_string())?;
    if let (n @ 1.., Some(e)) = unsent {
        eprintln!(
            "imp ping: {n} of {} requests could not be sent ({e})",
            args.count
        );
    }
    Ok(replies)
}

fn report(args: &PingArgs, destination: IpAddr, replies: &[Reply], seed: u64) {
    let rtts: Vec<f64> = replies.iter().map(|r| r.rtt_ms).collect();
    let n = rtts.len() as f64;
    let stats = (!rtts.is_empty()).then(|| {
        let min = rtts.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rtts.iter().copied().fold(0.0, f64::max);
        let avg = rtts.iter().sum::<f64>() / n;
        let mdev = (rtts.iter().map(|r| (r - avg) * (r - avg)).sum::<f64>() / n).sqrt();
        (min, avg, max, mdev)
    });
    let loss_pct = 100.0 * (1.0 - n / f64::from(args.count));
    let time_ms = args.interval.as_nanos() as f64 / 1e6 * f64::from(args.count - 1);
    if args.json {
        let report = Report {
            destination: destination.to_string(),
            transmitted: args.count,
            received: rtts.len(),
            loss_pct,
            time_ms,
            rtt_min_ms: stats.map(|s| s.0),
            rtt_avg_ms: stats.map(|s| s.1),
            rtt_max_ms: stats.map(|s| s.2),
            rtt_mdev_ms: stats.map(|s| s.3),
            replies: replies.to_vec(),
            seed,
        };
        println!(
            "{}",
            serde_json::to_string(&report).expect("the report serialises")
        );
        return;
    }
    println!();
    println!("--- {destination} ping statistics ---");
    println!(
        "{} packets transmitted, {} received, {}% packet loss, time {:.0}ms",
        args.count,
        rtts.len(),
        loss_pct.round(),
        time_ms
    );
    if let Some((min, avg, max, mdev)) = stats {
        println!("rtt min/avg/max/mdev = {min:.3}/{avg:.3}/{max:.3}/{mdev:.3} ms");
    }
}
