//! `imp ping`: ICMP echo between two simulated hosts, printed like ping(8); with
//! `--tap`, echo requests from imp over a TAP device to a real host.

use std::net::Ipv4Addr;
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
    /// The host to ping over the TAP, an IPv4 address or a name (resolved with --dns
    /// or DHCP's servers) (with --tap; the simulated network pings 10.0.0.2).
    #[arg(value_name = "HOST")]
    pub host: Option<String>,
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
const IDENT: u16 = 0x1e7;

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
    if args.size > 65507 - 8 {
        return Err(format!(
            "--size {} is larger than an IPv4 datagram can carry (65499)",
            args.size
        ));
    }
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
        args.device.required("ping")?;
        let host = args
            .host
            .as_deref()
            .ok_or("imp ping --tap needs the HOST to ping (an IPv4 address or a name)")?;
        return check_host(host).map(|_| ());
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

/// Run `imp ping`: on the built-in two-host network, or over a TAP with `--tap`.
pub fn run(args: &PingArgs) -> Result<(), String> {
    validate(args)?;
    if args.device.is_set() {
        return run_tap(args);
    }
    let link = sim_link(args);
    let mut sim = Sim::new(args.seed);
    let a = sim.add_host("a", StackConfig::default());
    let b = sim.add_host("b", StackConfig::default());
    let cidr = |addr| Cidr::new(addr, 24).expect("a /24 is a valid prefix");
    let link_id = sim
        .connect(a, cidr(SRC), b, cidr(DST), link)
        .map_err(|e| format!("bad link settings: {e}"))?;
    if let Some(path) = &args.pcap {
        sim.capture(link_id, path)
            .map_err(|e| format!("cannot write pcap file {}: {e}", path.display()))?;
    }
    let socket = sim
        .host_mut(a)
        .icmp_bind(IDENT)
        .map_err(|e| format!("cannot open an ICMP socket: {e}"))?;
    if !args.json {
        println!(
            "PING {DST} ({DST}) {}({}) bytes of data.",
            args.size,
            args.size + 28
        );
    }
    let replies = exchange(&mut sim, args, a, socket)?;
    sim.flush_captures()
        .map_err(|e| format!("cannot write pcap file: {e}"))?;
    report(args, DST, &replies, sim.seed());
    Ok(())
}

/// HOST as given: an IPv4 unicast address (Some), or a name to resolve (None).
fn check_host(host: &str) -> Result<Option<Ipv4Addr>, String> {
    if let Ok(addr) = host.parse::<Ipv4Addr>() {
        if addr.is_unspecified() || addr.is_multicast() || addr.is_broadcast() {
            return Err(format!(
                "HOST {addr}: not a host's address (imp pings one unicast address)"
            ));
        }
        return Ok(Some(addr));
    }
    let name_like = !host.is_empty()
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !name_like || host.len() > 253 {
        return Err(format!(
            "HOST `{host}`: neither an IPv4 address nor a host name (imp ping speaks IPv4)"
        ));
    }
    Ok(None)
}

/// The IPv4 address of HOST: itself, or its name's first IPv4 address.
fn resolve_host(rt: &impnet::Runtime, host: &str) -> Result<Ipv4Addr, String> {
    if let Some(addr) = check_host(host)? {
        return Ok(addr);
    }
    let ips = impnet::lookup_ips(rt, host).map_err(|e| format!("HOST {host}: {e}"))?;
    ips.into_iter()
        .find_map(|ip| match ip {
            std::net::IpAddr::V4(a) => Some(a),
            std::net::IpAddr::V6(_) => None,
        })
        .ok_or_else(|| format!("HOST {host}: has no IPv4 address (imp ping speaks IPv4)"))
}

/// `imp ping --tap`: echo requests from imp to a real host, at `--interval`.
fn run_tap(args: &PingArgs) -> Result<(), String> {
    let name = args
        .host
        .as_deref()
        .ok_or("imp ping --tap needs the HOST to ping (an IPv4 address or a name)")?;
    let stack = args.device.start("ping")?;
    let host = resolve_host(&stack.rt, name)?;
    let socket = impnet::IcmpSocket::bind(&stack.rt, IDENT)
        .map_err(|e| format!("cannot open an ICMP socket: {e}"))?;
    if !args.json {
        println!(
            "PING {name} ({host}) {}({}) bytes of data, from {}.",
            args.size,
            args.size + 28,
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

/// Take echo replies until `until` (or every request is answered).
#[allow(clippy::too_many_arguments)]
fn receive_until(
    args: &PingArgs,
    socket: &impnet::IcmpSocket,
    host: Ipv4Addr,
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

fn exchange(
    sim: &mut Sim,
    args: &PingArgs,
    a: impnet_sim::HostId,
    socket: impnet_core::IcmpHandle,
) -> Result<Vec<Reply>, String> {
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
                    let mut reply = Reply {
                        seq: echo.seq_no + 1,
                        bytes: echo.len + 8,
                        ttl: echo.ttl,
                        rtt_ms: (now - sent).as_nanos() as f64 / 1e6,
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
                    replies.push(reply);
                }
                Err(IcmpError::WouldBlock) => break,
                Err(e) => {
                    if !args.json {
                        println!("From {SRC} icmp_seq={}: {e}", sent_at.len());
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
                DST,
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

fn report(args: &PingArgs, destination: Ipv4Addr, replies: &[Reply], seed: u64) {
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
