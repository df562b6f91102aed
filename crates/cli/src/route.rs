//! `imp route`: imp as a gateway between two or more TAP (or TUN) devices, in real time (RFC
//! 1812 forwarding in the core, seed 004's gateway functions around it): routing,
//! statistics per interface printed at an interval and on exit, the link model on any
//! interface, and a pcap per interface for debugging. It answers pings to its own
//! addresses, as any imp stack does. IPv4 and IPv6 alike: each interface may have
//! addresses of both families, routes and access rules take either, and `--ra` makes
//! imp advertise itself as the IPv6 router of its links (RFC 4861), so Linux hosts
//! configure addresses (SLAAC) and a default route from it.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant, SystemTime, UNIX_EPOCH};

use crate::impair;
use crate::tapargs::{
    HostCidr, check_host_addr, check_host_addr6, check_ifname, fit_mtu, mac_for_addrs, model,
    parse_host_cidr,
};
use clap::Args;
use impnet::PollFd;
use impnet::Runtime;
use impnet::core::acl::{Acl, Action, Rule};
use impnet::core::qdisc::QdiscConfig;
use impnet::core::{Duration, ForwardStats, IfaceConfig, IfaceId, IfaceStats, StackConfig};
use impnet::phy::pcap::{LINKTYPE_ETHERNET, LINKTYPE_RAW};
use impnet::phy::{
    Device, Framing, Impair, LinkConfig, Pcap, PcapWriter, Tap, TapConfig, TapError, Tun,
};
use impnet::shard::{Exchange, ShardDevice};
use impnet::wire::ethernet;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

/// Options of `imp route`.
#[derive(Debug, Args)]
pub struct RouteArgs {
    /// An interface: a TAP device (created if missing) and imp's addresses on it,
    /// IPv4 or IPv6 (one or more, comma-separated), with an optional IP MTU:
    /// `NAME=ADDR/LEN[,ADDR/LEN...][,mtu=N]`, e.g. tap0=10.0.1.1/24,fd00:1::1/64. Give
    /// two or more.
    #[arg(long = "tap", value_name = "NAME=ADDR/LEN[,ADDR/LEN...][,mtu=N]", value_parser = parse_tap, required_unless_present = "tuns")]
    pub taps: Vec<TapSpec>,
    /// An IP-level interface: a TUN device (bare IP packets, no ARP or neighbour
    /// discovery; created if missing) and imp's addresses on it, as for --tap. Counts
    /// with the --tap interfaces, which come first.
    #[arg(long = "tun", value_name = "NAME=ADDR/LEN[,ADDR/LEN...][,mtu=N]", value_parser = parse_tun)]
    pub tuns: Vec<TapSpec>,
    /// A route: destinations CIDR through gateway GW, of one family (on one of the
    /// interfaces' networks): 10.9.0.0/16=10.0.2.7 or 2001:db8:9::/48=fd00:2::7.
    #[arg(long = "route", value_name = "CIDR=GW", value_parser = parse_route)]
    pub routes: Vec<(HostCidr, IpAddr)>,
    /// Advertise imp as the IPv6 router of every interface (RFC 4861 router
    /// advertisements: unsolicited every 200 to 600 s, the first three 16 s apart at
    /// most, and in answer to solicitations), with each interface's /64 prefixes for
    /// SLAAC and its MTU. Without it imp sends none.
    #[arg(long)]
    pub ra: bool,
    /// The link model on one interface, both ways: NAME:delay=10ms,rate=10mbit,...
    #[arg(long = "impair", value_name = "NAME:SPEC", value_parser = parse_named_impair)]
    pub impair: Vec<(String, LinkConfig)>,
    /// An access rule for forwarded datagrams, IPv4 or IPv6, in order (the first
    /// that matches wins; without a match the datagram is forwarded): `deny proto=tcp
    /// dst=10.0.2.0/24 dport=8081`, `allow in=tap0 src=fd00:1::/64`. Keys: in, out,
    /// src, dst (prefixes of one family: the rule's), proto (tcp, udp, icmp, icmpv6 or
    /// a number), sport, dport (N or N-M).
    #[arg(long = "acl", value_name = "RULE", value_parser = parse_rule)]
    pub acl: Vec<Rule>,
    /// The queue discipline of every --impair'ed interface that names none in its
    /// spec: fifo (drop-tail), codel or fq_codel (RFC 8289, 8290; ECN-capable packets
    /// are marked rather than dropped). Queues build only where a rate is set.
    #[arg(long, value_name = "NAME", value_parser = parse_qdisc)]
    pub qdisc: Option<QdiscConfig>,
    /// Generate traffic from imp itself (seed 004's fake host): `udp:DST:PORT` or
    /// `icmp:DST`, with `,rate=PPS` (default 100), `,size=BYTES` of payload (default
    /// 64) and `,count=N` (default: until stopped).
    #[arg(long = "generate", value_name = "SPEC", value_parser = parse_generate)]
    pub generate: Vec<Generate>,
    /// Print the statistics table every SECONDS (it is always printed on exit).
    #[arg(long, value_name = "SECONDS")]
    pub stats: Option<f64>,
    /// Print the statistics as one JSON object per report instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write a pcap per interface into DIR (DIR/NAME.pcap), for debugging.
    #[arg(long, value_name = "DIR")]
    pub pcap: Option<PathBuf>,
    /// Open the TAPs and TUNs without the kernel's offloads: every frame crosses at
    /// the MTU, one system call each. By default an interface with no `--impair` and
    /// no `--pcap` takes the virtio-net header, so a TCP segment the kernel hands over
    /// whole (TSO/GSO, up to 64 KiB) is forwarded whole with its segment size, and a
    /// partial checksum stays partial, as over a Linux bridge or veth.
    #[arg(long)]
    pub no_offloads: bool,
    /// Read and write the TAPs and TUNs in batches through io_uring: up to 32 reads
    /// per call, and the frames of one turn of the loop written in one call (large TCP
    /// segments, and everything where the kernel has no io_uring or refuses it, go one
    /// per call: a note says so). Off by default until it measures faster: it cuts the
    /// system calls per frame from about 2 to 0.09, but on a loaded 2-core machine it
    /// forwarded 64-byte UDP slower.
    #[arg(long)]
    pub batch: bool,
    /// Run N shards: N router stacks with the same addresses, routes and rules, one
    /// loop thread each, over N queues of every interface (multi-queue TAPs and TUNs),
    /// each flow forwarded by the shard its addresses and ports pick (both directions
    /// by the same one). Default: the cores, or one with --impair, --pcap, --generate
    /// or --ra (which run on one stack), or when an interface exists already as a
    /// single-queue device.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

impl RouteArgs {
    /// Every interface asked for: the --tap ones, then the --tun ones.
    pub fn interfaces(&self) -> Vec<TapSpec> {
        self.taps.iter().chain(&self.tuns).cloned().collect()
    }
}

/// One `--tap` (or `--tun`): the device, imp's addresses on it, its IP MTU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapSpec {
    /// A TUN (`--tun`: IP packets) rather than a TAP (Ethernet frames).
    pub tun: bool,
    /// The TAP's name.
    pub name: String,
    /// imp's addresses and prefixes on the TAP's networks (at least one).
    pub addrs: Vec<HostCidr>,
    /// The IP MTU (1500 unless given).
    pub mtu: usize,
}

/// Parse `NAME=ADDR/LEN[,mtu=N]` (a `--tap`).
pub fn parse_tap(text: &str) -> Result<TapSpec, String> {
    parse_device(text, false)
}

/// Parse `NAME=ADDR/LEN[,mtu=N]` (a `--tun`).
pub fn parse_tun(text: &str) -> Result<TapSpec, String> {
    parse_device(text, true)
}

impl TapSpec {
    /// The option that gave it.
    pub fn flag(&self) -> &'static str {
        if self.tun { "--tun" } else { "--tap" }
    }

    /// The addresses as given: `10.0.1.1/24, fd00:1::1/64`.
    pub fn addrs_text(&self) -> String {
        let addrs: Vec<String> = self.addrs.iter().map(ToString::to_string).collect();
        addrs.join(", ")
    }
}

fn parse_device(text: &str, tun: bool) -> Result<TapSpec, String> {
    let flag = if tun { "--tun" } else { "--tap" };
    let (name, rest) = text.split_once('=').ok_or_else(|| {
        format!(
            "`{text}` is not NAME=ADDR/LEN[,ADDR/LEN...][,mtu=N] (e.g. tap0=10.0.1.1/24,fd00:1::1/64)"
        )
    })?;
    check_ifname(flag, name)?;
    let mut addrs: Vec<HostCidr> = Vec::new();
    let mut mtu = 1500;
    for part in rest.split(',') {
        match part.split_once('=') {
            Some(("mtu", value)) => {
                mtu = value
                    .parse()
                    .ok()
                    .filter(|m| (576..=65535).contains(m))
                    .ok_or_else(|| format!("`{value}` in `{text}` is not an MTU (576 to 65535)"))?;
            }
            Some(_) => return Err(format!("`{part}` in `{text}`: the only option is mtu=N")),
            None => {
                let addr = parse_host_cidr(part)?;
                let at = format!("{flag} {name}=");
                match addr {
                    HostCidr::V4(c) => check_host_addr(&at, c)?,
                    HostCidr::V6(c) => check_host_addr6(&at, c)?,
                }
                if addrs.iter().any(|a| a.address() == addr.address()) {
                    return Err(format!("`{text}`: {} is given twice", addr.address()));
                }
                addrs.push(addr);
            }
        }
    }
    if addrs.is_empty() {
        return Err(format!(
            "`{text}` gives no address: NAME=ADDR/LEN[,ADDR/LEN...][,mtu=N] (e.g. tap0=10.0.1.1/24)"
        ));
    }
    if mtu < 1280 && addrs.iter().any(|a| matches!(a, HostCidr::V6(_))) {
        return Err(format!(
            "`{text}`: IPv6 needs an MTU of at least 1280 (RFC 8200 §5)"
        ));
    }
    Ok(TapSpec {
        tun,
        name: name.to_string(),
        addrs,
        mtu,
    })
}

/// Parse `CIDR=GW`, IPv4 or IPv6 (both of one family).
pub fn parse_route(text: &str) -> Result<(HostCidr, IpAddr), String> {
    let (cidr, gateway) = text.split_once('=').ok_or_else(|| {
        format!(
            "`{text}` is not CIDR=GATEWAY (e.g. 10.9.0.0/16=10.0.2.1 or 2001:db8:9::/48=fd00:2::7)"
        )
    })?;
    let cidr = parse_host_cidr(cidr)?;
    let gateway: IpAddr = gateway
        .parse()
        .map_err(|_| format!("`{gateway}` in `{text}` is not an IP address"))?;
    if matches!(cidr, HostCidr::V6(_)) != gateway.is_ipv6() {
        return Err(format!(
            "`{text}`: the prefix and the gateway are of different families (IPv4 and IPv6)"
        ));
    }
    Ok((cidr, gateway))
}

/// A traffic generator: what to send, how fast, how big, how many.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Generate {
    /// UDP to this address and port, or ICMP echo requests (port None).
    pub dst: Ipv4Addr,
    /// The UDP port; None for ICMP.
    pub port: Option<u16>,
    /// Packets per second.
    pub rate: f64,
    /// Payload bytes.
    pub size: usize,
    /// Packets to send (None: until stopped).
    pub count: Option<u64>,
}

/// The slowest `--generate` rate: a packet every 1000 s.
const MIN_GENERATE_RATE: f64 = 0.001;
/// The fastest `--generate` rate, packets per second.
const MAX_GENERATE_RATE: f64 = 10_000_000.0;
/// The longest `--stats` interval: a day.
const MAX_STATS_SECONDS: f64 = 86_400.0;

/// Parse `udp:DST:PORT[,rate=PPS][,size=N][,count=N]` or `icmp:DST[,...]`.
pub fn parse_generate(text: &str) -> Result<Generate, String> {
    let mut parts = text.split(',');
    let head = parts.next().unwrap_or_default();
    let bad = |what: &str| format!("`{text}`: {what} (e.g. udp:10.0.2.1:9,rate=1000,size=64)");
    let (dst, port) = match head.split(':').collect::<Vec<_>>()[..] {
        ["udp", dst, port] => (dst, Some(port.parse::<u16>().map_err(|_| bad("bad port"))?)),
        ["icmp", dst] => (dst, None),
        _ => return Err(bad("start with udp:DST:PORT or icmp:DST")),
    };
    let dst = dst.parse().map_err(|_| bad("bad destination address"))?;
    let mut generate = Generate {
        dst,
        port,
        rate: 100.0,
        size: 64,
        count: None,
    };
    for part in parts {
        match part.split_once('=') {
            Some(("rate", v)) => {
                generate.rate = v
                    .parse()
                    .ok()
                    .filter(|r: &f64| (MIN_GENERATE_RATE..=MAX_GENERATE_RATE).contains(r))
                    .ok_or_else(|| bad("rate is packets per second, 0.001 to 10000000"))?;
            }
            Some(("size", v)) => {
                generate.size = v
                    .parse()
                    .ok()
                    .filter(|&s| s <= 65_000)
                    .ok_or_else(|| bad("size is payload bytes, 0 to 65000"))?;
            }
            Some(("count", v)) => {
                generate.count = Some(v.parse().map_err(|_| bad("count is a number"))?);
            }
            _ => return Err(bad("the options are rate=, size= and count=")),
        }
    }
    Ok(generate)
}

/// Send what `generate` asks from imp's own stack until done or `stop`; returns the
/// packets sent.
fn run_generator(rt: &Runtime, generate: Generate, stop: &AtomicBool) -> Result<u64, String> {
    enum Socket {
        Udp(impnet::UdpSocket),
        Icmp(impnet::IcmpSocket),
    }
    let socket = match generate.port {
        Some(_) => Socket::Udp(
            impnet::UdpSocket::bind(rt, "0.0.0.0:0").map_err(|e| format!("--generate: {e}"))?,
        ),
        None => Socket::Icmp(
            impnet::IcmpSocket::bind(rt, 0x9e4).map_err(|e| format!("--generate: {e}"))?,
        ),
    };
    let payload = vec![0x67u8; generate.size];
    let gap = StdDuration::from_secs_f64(1.0 / generate.rate);
    let start = StdInstant::now();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) && generate.count.is_none_or(|c| sent < c) {
        let due = start + gap.mul_f64(sent as f64);
        let now = StdInstant::now();
        if due > now {
            std::thread::sleep((due - now).min(StdDuration::from_millis(50)));
            continue;
        }
        let result = match &socket {
            Socket::Udp(s) => s
                .send_to(&payload, (generate.dst, generate.port.unwrap_or(9)))
                .map(|_| ()),
            Socket::Icmp(s) => s.send_echo(generate.dst, sent as u16, &payload),
        };
        // A full queue or an unreachable destination is counted, not fatal.
        if result.is_ok() {
            sent += 1;
        } else {
            std::thread::sleep(gap.min(StdDuration::from_millis(10)));
            sent += 1;
        }
    }
    Ok(sent)
}

/// Parse an access rule.
pub fn parse_rule(text: &str) -> Result<Rule, String> {
    text.parse()
        .map_err(|e| format!("bad --acl rule `{text}`: {e}"))
}

/// Parse a queue discipline's name.
pub fn parse_qdisc(text: &str) -> Result<QdiscConfig, String> {
    text.parse().map_err(|e| format!("bad --qdisc: {e}"))
}

/// Parse `NAME:SPEC`.
pub fn parse_named_impair(text: &str) -> Result<(String, LinkConfig), String> {
    let (name, spec) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not NAME:SPEC (e.g. tap1:rate=10mbit,delay=5ms)"))?;
    Ok((name.to_string(), impair::parse_impair(spec)?))
}

/// The interfaces as opened: name, id, addresses.
struct Iface {
    name: String,
    id: IfaceId,
    addrs: Vec<HostCidr>,
}

/// Check the arguments against each other before opening anything.
pub fn validate(args: &RouteArgs) -> Result<(), String> {
    let taps = &args.interfaces();
    if taps.len() < 2 {
        return Err(format!(
            "imp route forwards between two or more interfaces (--tap or --tun NAME=ADDR/LEN, twice or more); {} given",
            taps.len()
        ));
    }
    for (i, tap) in taps.iter().enumerate() {
        if taps[..i].iter().any(|t| t.name == tap.name) {
            return Err(format!("{} {} is given twice", tap.flag(), tap.name));
        }
        for addr in &tap.addrs {
            if let Some(other) = taps[..i]
                .iter()
                .find(|t| t.addrs.iter().any(|a| a.address() == addr.address()))
            {
                return Err(format!(
                    "{} {}: address {} is already {} {}'s",
                    tap.flag(),
                    tap.name,
                    addr.address(),
                    other.flag(),
                    other.name
                ));
            }
        }
    }
    for (i, (name, _)) in args.impair.iter().enumerate() {
        if !taps.iter().any(|t| &t.name == name) {
            return Err(format!("--impair {name}: no --tap or --tun of that name"));
        }
        if args.impair[..i].iter().any(|(n, _)| n == name) {
            return Err(format!("--impair {name}: given twice for the same TAP"));
        }
    }
    for rule in &args.acl {
        for named in [&rule.in_iface, &rule.out_iface].into_iter().flatten() {
            if !taps.iter().any(|t| t.name == named.name) {
                return Err(format!(
                    "--acl `{rule}` names interface {}, which is no --tap or --tun",
                    named.name
                ));
            }
        }
    }
    validate_routes(args, taps)?;
    if let Some(dir) = &args.pcap
        && dir.exists()
        && !dir.is_dir()
    {
        return Err(format!(
            "--pcap {}: exists and is not a directory",
            dir.display()
        ));
    }
    if args.qdisc.is_some() && args.impair.is_empty() {
        return Err(
            "--qdisc needs a link with a queue: give --impair NAME:rate=... for the interface it should manage"
                .into(),
        );
    }
    crate::tapargs::check_threads(args.threads, unshardable(args))?;
    if let Some(seconds) = args.stats
        && !(seconds.is_finite() && seconds > 0.0 && seconds <= MAX_STATS_SECONDS)
    {
        return Err(format!(
            "--stats {seconds}: give a positive number of seconds, at most {MAX_STATS_SECONDS} (a day)"
        ));
    }
    Ok(())
}

/// What keeps `imp route` on one stack: the flag, if any. A link model and a capture
/// belong to one device, a generator's flows to one stack, and router advertisements
/// must come from one router.
fn unshardable(args: &RouteArgs) -> Option<&'static str> {
    if !args.impair.is_empty() {
        Some("--impair")
    } else if args.pcap.is_some() {
        Some("--pcap")
    } else if !args.generate.is_empty() {
        Some("--generate")
    } else if args.ra {
        Some("--ra")
    } else {
        None
    }
}

/// The number of shards: `--threads`, else the cores when nothing keeps imp on one.
fn shard_count(args: &RouteArgs) -> usize {
    crate::tapargs::shard_count(args.threads, unshardable(args))
}

/// The checks of `--route` and `--ra` against the interfaces `taps`.
fn validate_routes(args: &RouteArgs, taps: &[TapSpec]) -> Result<(), String> {
    for (cidr, gateway) in &args.routes {
        if gateway_iface(taps, *gateway).is_none() {
            return Err(format!(
                "--route {cidr}={gateway}: the gateway is on none of the interfaces' networks"
            ));
        }
        if taps
            .iter()
            .any(|t| t.addrs.iter().any(|a| a.address() == *gateway))
        {
            return Err(format!(
                "--route {cidr}={gateway}: the gateway is imp's own address; give the next router's"
            ));
        }
    }
    if args.ra
        && !taps
            .iter()
            .any(|t| t.addrs.iter().any(|a| matches!(a, HostCidr::V6(_))))
    {
        return Err(
            "--ra advertises IPv6 prefixes: give an interface an IPv6 address (e.g. --tap tap0=10.0.1.1/24,fd00:1::1/64)"
                .into(),
        );
    }
    Ok(())
}

/// The interface whose network (of the gateway's family) holds `gateway`.
fn gateway_iface(taps: &[TapSpec], gateway: IpAddr) -> Option<usize> {
    taps.iter()
        .position(|t| t.addrs.iter().any(|a| a.on_network(gateway)))
}

/// Milliseconds since midnight UT now, for the IPv4 Timestamp option.
fn ut_offset_ms() -> Option<u64> {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    Some((since_epoch.as_millis() % 86_400_000) as u64)
}

/// Open every TAP and TUN and add it to the runtime, with its link model and pcap
/// when asked. With neither (and without `--no-offloads`) it takes the kernel's
/// offloads with partial checksums: large TCP segments cross whole (see
/// `RxOffload`); a link model or a capture sees wire-sized frames instead.
fn open_interfaces(args: &RouteArgs, rt: &Runtime) -> Result<Vec<Iface>, String> {
    let mut ifaces = Vec::new();
    let mut macs = Vec::new();
    for (index, spec) in args.interfaces().iter().enumerate() {
        let impaired = args.impair.iter().any(|(name, _)| name == &spec.name);
        let offloads = !args.no_offloads && !impaired && args.pcap.is_none();
        let config = tap_config(spec, offloads).batched(args.batch);
        let seed = 0x5eed_0000 + index as u64;
        let id = if spec.tun {
            let tun = Tun::open_with(&config)
                .map_err(|e| format!("cannot open TUN {}: {e}", spec.name))?;
            note_unbatched(spec, tun.batch_refused());
            let iface_config = IfaceConfig::ip(spec.mtu).with_offloads(tun.stack_offloads());
            add_interface(args, rt, spec, seed, tun, iface_config)?
        } else {
            let tap = Tap::open_with(&config)
                .map_err(|e| format!("cannot open TAP {}: {e}", spec.name))?;
            note_unbatched(spec, tap.batch_refused());
            let mac = unique_mac(spec, index, &mut macs);
            let iface_config = IfaceConfig::new(mac, spec.mtu).with_offloads(tap.stack_offloads());
            add_interface(args, rt, spec, seed, tap, iface_config)?
        };
        ifaces.push(configure_iface(args, rt, spec, id));
    }
    wait_for_dad(rt, &ifaces)?;
    Ok(ifaces)
}

/// Say on standard error that `spec`'s device reads and writes one frame per system
/// call although batches were asked for, and why.
fn note_unbatched(spec: &TapSpec, refused: Option<&str>) {
    if let Some(why) = refused {
        eprintln!(
            "imp route: {}: one frame per system call (no io_uring: {why})",
            spec.name
        );
    }
}

/// The device options of `spec`'s interface.
fn tap_config(spec: &TapSpec, offloads: bool) -> TapConfig {
    TapConfig::new(&spec.name)
        .mtu(spec.mtu)
        .offloads(offloads)
        .partial_checksums(offloads)
}

/// The MAC of the `index`th interface, `spec`, different from those in `macs` (where
/// it is added).
fn unique_mac(
    spec: &TapSpec,
    index: usize,
    macs: &mut Vec<ethernet::Address>,
) -> ethernet::Address {
    let mut mac = mac_for_addrs(&spec.addrs, &spec.name);
    // Two interfaces with the same MAC would share a link-local address: IPv6-only
    // ones whose addresses end alike (fd00:1::1, fd00:2::1) get the interface's index
    // in the MAC.
    if macs.contains(&mac) {
        mac.0[2] = 0x80 | index as u8;
    }
    macs.push(mac);
    mac
}

/// Make `id` a forwarding interface with `spec`'s addresses (and router
/// advertisements with `--ra`).
fn configure_iface(args: &RouteArgs, rt: &Runtime, spec: &TapSpec, id: IfaceId) -> Iface {
    // Forwarding first: a router sends no router solicitations.
    rt.with_stack(|stack, _| stack.set_forwarding(id, true));
    rt.enable_ipv6(id);
    for addr in &spec.addrs {
        match *addr {
            HostCidr::V4(c) => rt.add_address(id, c),
            HostCidr::V6(c) => rt.add_address6(id, c),
        }
    }
    if args.ra {
        rt.with_stack(|stack, now| {
            stack.set_router_advertisements(now, id, Some(RA_INTERVAL));
        });
    }
    Iface {
        name: spec.name.clone(),
        id,
        addrs: spec.addrs.clone(),
    }
}

fn wait_for_dad(rt: &Runtime, ifaces: &[Iface]) -> Result<(), String> {
    for iface in ifaces {
        crate::tapargs::wait_for_dad(rt, iface.id, &iface.addrs)
            .map_err(|e| format!("{}: {e}", iface.name))?;
    }
    Ok(())
}

/// One router stack and its interfaces.
struct Shard {
    rt: Runtime,
    ifaces: Vec<Iface>,
}

/// Start `shards` router stacks over `shards` queues of every interface, each
/// interface's queues joined by an [`Exchange`] that hands every frame to the shard
/// that owns its flow. `None` when `fallback` and an interface exists already as a
/// single-queue device (the caller then runs one stack).
fn open_shards(
    args: &RouteArgs,
    shards: usize,
    fallback: bool,
) -> Result<Option<Vec<Shard>>, String> {
    let key = RandomState::new().hash_one(std::process::id());
    let specs = args.interfaces();
    let offloads = !args.no_offloads;
    let mut queues = Vec::new();
    for spec in &specs {
        let config = tap_config(spec, offloads).batched(args.batch);
        let (framing, opened) = if spec.tun {
            let tun = Tun::open_queues(&config, shards)
                .map(|q| q.into_iter().map(Queue::Tun).collect::<Vec<_>>());
            (Framing::Ip, tun)
        } else {
            let tap =
                Tap::open_queues(&config, shards).map(|q| q.into_iter().map(Queue::Tap).collect());
            (Framing::Ethernet, tap)
        };
        let opened = match opened {
            Ok(opened) => opened,
            Err(TapError::NameTaken { .. }) if fallback => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "cannot open {} {} with {shards} queues: {e}",
                    spec.flag().trim_start_matches("--").to_uppercase(),
                    spec.name
                ));
            }
        };
        let exchange = Exchange::new(shards, framing, key)
            .map_err(|e| format!("cannot start the shards: {e}"))?;
        queues.push((opened.into_iter(), exchange));
    }
    let mut stacks = Vec::new();
    for shard in 0..shards {
        let rt = new_runtime()?;
        let (mut ifaces, mut macs) = (Vec::new(), Vec::new());
        for (index, (spec, (queue, exchange))) in specs.iter().zip(&mut queues).enumerate() {
            let exchange = Arc::clone(exchange);
            let id = match queue.next() {
                Some(Queue::Tun(tun)) => {
                    note_unbatched(spec, tun.batch_refused());
                    let config = IfaceConfig::ip(spec.mtu).with_offloads(tun.stack_offloads());
                    rt.add_device(ShardDevice::new(tun, shard, exchange), config)
                }
                Some(Queue::Tap(tap)) => {
                    note_unbatched(spec, tap.batch_refused());
                    let mac = unique_mac(spec, index, &mut macs);
                    let config =
                        IfaceConfig::new(mac, spec.mtu).with_offloads(tap.stack_offloads());
                    rt.add_device(ShardDevice::new(tap, shard, exchange), config)
                }
                None => return Err(format!("{}: fewer queues than shards", spec.name)),
            };
            ifaces.push(configure_iface(args, &rt, spec, id));
        }
        wait_for_dad(&rt, &ifaces)?;
        stacks.push(Shard { rt, ifaces });
    }
    Ok(Some(stacks))
}

/// One queue of a multi-queue device.
enum Queue {
    Tap(Tap),
    Tun(Tun),
}

/// A router stack's runtime.
fn new_runtime() -> Result<Runtime, String> {
    Runtime::new(StackConfig {
        ut_offset_ms: ut_offset_ms(),
        ..StackConfig::default()
    })
    .map_err(|e| format!("cannot start the imp runtime: {e}"))
}

/// The router's stacks: `--threads` shards, or one.
fn open_stacks(args: &RouteArgs) -> Result<Vec<Shard>, String> {
    let shards = shard_count(args);
    if shards > 1
        && let Some(stacks) = open_shards(args, shards, args.threads.is_none())?
    {
        return Ok(stacks);
    }
    let rt = new_runtime()?;
    let ifaces = open_interfaces(args, &rt)?;
    Ok(vec![Shard { rt, ifaces }])
}

/// `MaxRtrAdvInterval` of `--ra` (RFC 4861 §6.2.1's default, 600 s).
const RA_INTERVAL: Duration = Duration::from_secs(600);

/// Add `device` to the runtime as `spec`'s interface, wrapped in its link model and
/// pcap when asked (a TUN's pcap holds raw IP packets).
fn add_interface<D: Device + PollFd + Send + 'static>(
    args: &RouteArgs,
    rt: &Runtime,
    spec: &TapSpec,
    seed: u64,
    device: D,
    iface_config: IfaceConfig,
) -> Result<IfaceId, String> {
    let impairment = args
        .impair
        .iter()
        .find(|(name, _)| name == &spec.name)
        .map(|(_, c)| {
            let c = fit_mtu(*c, device.mtu());
            if c.qdisc.is_none() {
                c.with_qdisc(args.qdisc)
            } else {
                c
            }
        });
    let pcap = match &args.pcap {
        Some(dir) => {
            let path = dir.join(format!("{}.pcap", spec.name));
            let link_type = if spec.tun {
                LINKTYPE_RAW
            } else {
                LINKTYPE_ETHERNET
            };
            Some(
                PcapWriter::create_with_link_type(&path, link_type)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
            )
        }
        None => None,
    };
    // A TUN's link model sees bare IP packets.
    let link = |c, seed| model(c, seed).map(|m| if spec.tun { m.ip_level() } else { m });
    Ok(match (impairment, pcap) {
        (Some(c), Some(w)) => {
            let device = Impair::new(device, link(c, seed)?).with_rx(link(c, !seed)?);
            rt.add_device(Pcap::new(device, w), iface_config)
        }
        (Some(c), None) => {
            let device = Impair::new(device, link(c, seed)?).with_rx(link(c, !seed)?);
            rt.add_device(device, iface_config)
        }
        (None, Some(w)) => rt.add_device(Pcap::new(device, w), iface_config),
        (None, None) => rt.add_device(device, iface_config),
    })
}

/// Run `imp route`.
pub fn run(args: &RouteArgs) -> Result<(), String> {
    validate(args)?;
    if let Some(dir) = &args.pcap {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create --pcap {}: {e}", dir.display()))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| format!("cannot install the signal handler: {e}"))?;
    }
    let stacks = open_stacks(args)?;
    for Shard { rt, ifaces } in &stacks {
        set_acl(args, rt, ifaces)?;
        add_routes(args, rt, ifaces);
    }
    let (rt, ifaces) = (&stacks[0].rt, &stacks[0].ifaces);
    let names: Vec<String> = ifaces
        .iter()
        .zip(args.interfaces())
        .map(|(i, spec)| format!("{} ({})", i.name, spec.addrs_text()))
        .collect();
    // Bound before the startup line, so `imp ss` finds it once that is out.
    let control = crate::control::bind_or_warn("imp route");
    let sharded = match stacks.len() {
        1 => String::new(),
        n => format!(" in {n} shards"),
    };
    println!(
        "imp route: forwarding between {}{sharded}; stop with Ctrl-C",
        names.join(", ")
    );
    let _ = std::io::stdout().flush();
    let generated = std::thread::scope(|scope| {
        let generators: Vec<_> = args
            .generate
            .iter()
            .map(|&generate| {
                let stop = &stop;
                scope.spawn(move || run_generator(rt, generate, stop))
            })
            .collect();
        if let Some(control) = &control {
            let stop = &stop;
            let rts: Vec<&Runtime> = stacks.iter().map(|shard| &shard.rt).collect();
            scope.spawn(move || {
                control.serve(stop, |request| crate::control::answer(&rts, request))
            });
        }
        serve(&stacks, args, &stop);
        generators
            .into_iter()
            .map(|g| {
                g.join()
                    .unwrap_or_else(|_| Err("a --generate thread panicked".into()))
            })
            .collect::<Result<Vec<u64>, String>>()
    })?;
    report(&stacks, args.json);
    if !args.json {
        for sent in generated {
            println!("imp route: generated {sent} packets");
        }
    }
    drop(stacks);
    Ok(())
}

/// Install `--acl` on one router stack.
fn set_acl(args: &RouteArgs, rt: &Runtime, ifaces: &[Iface]) -> Result<(), String> {
    if args.acl.is_empty() {
        return Ok(());
    }
    let acl = Acl::new(args.acl.clone(), Action::Allow);
    let names: Vec<(IfaceId, String)> = ifaces.iter().map(|i| (i.id, i.name.clone())).collect();
    let unresolved = rt.with_stack(|stack, _| {
        stack.set_acl(Some(acl), |id| {
            names.iter().find(|(i, _)| *i == id).map(|(_, n)| n.clone())
        })
    });
    match unresolved.first() {
        Some(name) => Err(format!(
            "--acl names interface {name}, which is no --tap or --tun"
        )),
        None => Ok(()),
    }
}

/// Add `--route`s to one router stack.
fn add_routes(args: &RouteArgs, rt: &Runtime, ifaces: &[Iface]) {
    for (cidr, gateway) in &args.routes {
        let iface = ifaces[gateway_iface(&args.interfaces(), *gateway).unwrap_or(0)].id;
        rt.with_stack(|stack, _| match (*cidr, *gateway) {
            (HostCidr::V4(c), IpAddr::V4(g)) => stack.routes_mut().add(c, Some(g), iface),
            (HostCidr::V6(c), IpAddr::V6(g)) => stack.routes6_mut().add(c, Some(g), iface),
            _ => {} // parse_route refused mixed families
        });
    }
}

/// Report every `--stats` seconds until stopped.
fn serve(stacks: &[Shard], args: &RouteArgs, stop: &AtomicBool) {
    let interval = args.stats.map(StdDuration::from_secs_f64);
    let mut next_report = interval.map(|i| StdInstant::now() + i);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(StdDuration::from_millis(50));
        if let (Some(at), Some(every)) = (next_report, interval)
            && StdInstant::now() >= at
        {
            report(stacks, args.json);
            next_report = Some(at + every);
        }
    }
}

/// Print the statistics, every shard's added up: a table, or one JSON object.
fn report(stacks: &[Shard], json: bool) {
    let mut shards = stacks
        .iter()
        .map(|shard| shard_report(&shard.rt, &shard.ifaces));
    let (mut stats, mut routes, mut rules) = shards.next().unwrap_or_default();
    for (more_stats, more_routes, more_rules) in shards {
        for ((_, s), (_, more)) in stats.iter_mut().zip(more_stats) {
            *s = add_stats(s, &more);
        }
        for (r, more) in routes.iter_mut().zip(more_routes) {
            (r.packets, r.bytes) = (r.packets + more.packets, r.bytes + more.bytes);
        }
        for (r, more) in rules.iter_mut().zip(more_rules) {
            (r.packets, r.bytes) = (r.packets + more.packets, r.bytes + more.bytes);
        }
    }
    let ifaces = &stacks[0].ifaces;
    let ipv6 = ifaces
        .iter()
        .any(|i| i.addrs.iter().any(|a| matches!(a, HostCidr::V6(_))));
    if json {
        println!("{}", stats_json(&stats, &routes, &rules));
    } else {
        print!("{}", stats_table(&stats, &routes, &rules, ipv6));
    }
    let _ = std::io::stdout().flush();
}

/// One stack's statistics, routes and rules (with their counters).
type StackReport = (Vec<(String, IfaceStats)>, Vec<RouteRow>, Vec<RuleRow>);

/// One router stack's counters, as [`report`] prints them.
fn shard_report(rt: &Runtime, ifaces: &[Iface]) -> StackReport {
    let name_of = |id: IfaceId| {
        ifaces
            .iter()
            .find(|i| i.id == id)
            .map_or_else(|| format!("#{}", id.index()), |i| i.name.clone())
    };
    rt.with_stack(|stack, _| {
        let stats: Vec<(String, IfaceStats)> = ifaces
            .iter()
            .map(|i| {
                (
                    i.name.clone(),
                    stack.iface_stats(i.id).cloned().unwrap_or_default(),
                )
            })
            .collect();
        let mut routes: Vec<RouteRow> = stack
            .routes()
            .iter_indexed()
            .map(|(index, r)| {
                let c = stack.routes().counters(index).unwrap_or_default();
                RouteRow {
                    prefix: format!("{}/{}", r.cidr.address, r.cidr.prefix_len),
                    via: r
                        .gateway
                        .map_or_else(|| "on-link".to_string(), |g| g.to_string()),
                    iface: name_of(r.iface),
                    packets: c.packets,
                    bytes: c.bytes,
                }
            })
            .collect();
        routes.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        routes.extend(routes6_rows(stack, &name_of));
        let rules: Vec<RuleRow> = stack.acl().map_or_else(Vec::new, |acl| {
            let mut rows: Vec<RuleRow> = acl
                .rules()
                .iter()
                .enumerate()
                .map(|(i, rule)| {
                    let hits = acl.hits(i).unwrap_or_default();
                    RuleRow {
                        rule: rule.to_string(),
                        packets: hits.packets,
                        bytes: hits.bytes,
                    }
                })
                .collect();
            let hits = acl.default_hits();
            rows.push(RuleRow {
                rule: "(default allow)".into(),
                packets: hits.packets,
                bytes: hits.bytes,
            });
            rows
        });
        (stats, routes, rules)
    })
}

/// Two sets of one interface's counters added up.
fn add_stats(a: &IfaceStats, b: &IfaceStats) -> IfaceStats {
    IfaceStats {
        rx_frames: a.rx_frames + b.rx_frames,
        rx_bytes: a.rx_bytes + b.rx_bytes,
        tx_frames: a.tx_frames + b.tx_frames,
        tx_bytes: a.tx_bytes + b.tx_bytes,
        forward: a.forward.plus(&b.forward),
        forward6: a.forward6.plus(&b.forward6),
    }
}

/// The IPv6 routes with their counters, by prefix.
fn routes6_rows(stack: &impnet::core::Stack, name_of: &dyn Fn(IfaceId) -> String) -> Vec<RouteRow> {
    let mut rows: Vec<RouteRow> = stack
        .routes6()
        .iter_counted()
        .map(|(r, c)| RouteRow {
            prefix: r.cidr.to_string(),
            via: r
                .gateway
                .map_or_else(|| "on-link".to_string(), |g| g.to_string()),
            iface: name_of(r.iface),
            packets: c.packets,
            bytes: c.bytes,
        })
        .collect();
    rows.sort_by(|a, b| a.prefix.cmp(&b.prefix));
    rows
}

/// One route's counters, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct RouteRow {
    prefix: String,
    via: String,
    iface: String,
    packets: u64,
    bytes: u64,
}

/// One access rule's hits, for the report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct RuleRow {
    rule: String,
    packets: u64,
    bytes: u64,
}

/// The statistics as a table: one row per interface (its frames, and IPv4
/// forwarding), then with `ipv6` a row per interface of IPv6 forwarding (`iface6`),
/// the routes of both families, and the access rules' hits.
pub(crate) fn stats_table(
    stats: &[(String, IfaceStats)],
    routes: &[RouteRow],
    rules: &[RuleRow],
    ipv6: bool,
) -> String {
    let mut out = format!(
        "{:<10} {:>10} {:>12} {:>10} {:>12} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
        "iface",
        "rx frames",
        "rx bytes",
        "tx frames",
        "tx bytes",
        "forwarded",
        "noroute",
        "ttl",
        "toobig",
        "martian",
        "denied",
        "egress"
    );
    for (name, s) in stats {
        let f = &s.forward;
        out.push_str(&format!(
            "{:<10} {:>10} {:>12} {:>10} {:>12} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
            name,
            s.rx_frames,
            s.rx_bytes,
            s.tx_frames,
            s.tx_bytes,
            f.forwarded,
            f.no_route,
            f.ttl_exceeded,
            f.frag_needed,
            f.martian + f.broadcast,
            f.denied,
            f.egress_dropped
        ));
    }
    if ipv6 {
        out.push_str(&ipv6_table(stats));
    }
    out.push_str(&format!(
        "\n{:<28} {:<26} {:<10} {:>10} {:>12}\n",
        "route", "via", "iface", "packets", "bytes"
    ));
    for r in routes {
        out.push_str(&format!(
            "{:<28} {:<26} {:<10} {:>10} {:>12}\n",
            r.prefix, r.via, r.iface, r.packets, r.bytes
        ));
    }
    if !rules.is_empty() {
        out.push_str(&format!(
            "\n{:<48} {:>10} {:>12}\n",
            "access rule", "packets", "bytes"
        ));
        for r in rules {
            out.push_str(&format!(
                "{:<48} {:>10} {:>12}\n",
                r.rule, r.packets, r.bytes
            ));
        }
    }
    out
}

/// IPv6 forwarding per interface, the columns of IPv4's: `hoplimit` (Time Exceeded),
/// `toobig` (Packet Too Big), `scope` (link-local or unspecified addresses, never
/// forwarded).
fn ipv6_table(stats: &[(String, IfaceStats)]) -> String {
    let mut out = format!(
        "\n{:<10} {:>10} {:>12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
        "iface6",
        "forwarded",
        "bytes",
        "noroute",
        "hoplimit",
        "toobig",
        "scope",
        "denied",
        "egress"
    );
    for (name, s) in stats {
        let f = &s.forward6;
        out.push_str(&format!(
            "{:<10} {:>10} {:>12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
            name,
            f.forwarded,
            f.forwarded_bytes,
            f.no_route,
            f.ttl_exceeded,
            f.frag_needed,
            f.martian,
            f.denied,
            f.egress_dropped
        ));
    }
    out
}

/// One family's forwarding counters as JSON.
fn forward_json(f: &ForwardStats) -> serde_json::Value {
    serde_json::json!({
        "forwarded": f.forwarded,
        "forwarded_bytes": f.forwarded_bytes,
        "fragmented": f.fragmented,
        "drops": {
            "no_route": f.no_route,
            "ttl_exceeded": f.ttl_exceeded,
            "frag_needed": f.frag_needed,
            "martian": f.martian,
            "broadcast": f.broadcast,
            "bad_option": f.bad_option,
            "denied": f.denied,
            "egress": f.egress_dropped,
        },
    })
}

/// The statistics as one JSON object: `{"interfaces": {NAME: {...}}}`, each with
/// its IPv4 forwarding at the top level (as before IPv6) and its IPv6 forwarding
/// under `"ipv6"` (`ttl_exceeded` is the hop limit, `frag_needed` Packet Too Big,
/// `martian` link-local or unspecified addresses).
pub(crate) fn stats_json(
    stats: &[(String, IfaceStats)],
    routes: &[RouteRow],
    rules: &[RuleRow],
) -> String {
    let mut interfaces = serde_json::Map::new();
    for (name, s) in stats {
        let mut entry = serde_json::json!({
            "rx_frames": s.rx_frames,
            "rx_bytes": s.rx_bytes,
            "tx_frames": s.tx_frames,
            "tx_bytes": s.tx_bytes,
        });
        if let (Some(entry), serde_json::Value::Object(v4)) =
            (entry.as_object_mut(), forward_json(&s.forward))
        {
            entry.extend(v4);
            entry.insert("ipv6".into(), forward_json(&s.forward6));
        }
        interfaces.insert(name.clone(), entry);
    }
    serde_json::json!({ "interfaces": interfaces, "routes": routes, "acl": rules }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_specs_parse_with_clear_errors() {
        let spec = parse_tap("tap0=10.0.1.1/24,mtu=1280").unwrap();
        assert_eq!(spec.name, "tap0");
        assert_eq!(spec.addrs.len(), 1);
        assert_eq!(spec.addrs[0].address(), Ipv4Addr::new(10, 0, 1, 1));
        assert_eq!(spec.mtu, 1280);
        assert_eq!(parse_tap("t=10.0.0.1/8").unwrap().mtu, 1500);
        assert!(parse_tap("tap0").unwrap_err().contains("NAME=ADDR/LEN"));
        assert!(parse_tap("tap0=10.0.1.1").unwrap_err().contains("PREFIX"));
        // Several addresses, of both families.
        let spec = parse_tap("tap0=10.0.1.1/24,fd00:1::1/64,fd00:9::1/64,mtu=1280").unwrap();
        assert_eq!(spec.addrs_text(), "10.0.1.1/24, fd00:1::1/64, fd00:9::1/64");
        let e = parse_tap("tap0=fd00:1::1/64,mtu=1000").unwrap_err();
        assert!(e.contains("1280"), "{e}");
        let e = parse_tap("tap0=fd00:1::1/64,fd00:1::1/64").unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let e = parse_tap("tap0=mtu=1500").unwrap_err();
        assert!(e.contains("no address"), "{e}");
        let e = parse_tap("tap0=fd00::g/64").unwrap_err();
        assert!(e.contains("not an IPv6 address"), "{e}");
        let e = parse_tap("tap0=ff02::1/64").unwrap_err();
        assert!(
            e.contains("--tap tap0=ff02::1/64") && e.contains("multicast"),
            "{e}"
        );
        assert!(
            parse_tap("tap0=10.0.1.1/24,mtu=70")
                .unwrap_err()
                .contains("576")
        );
        assert!(
            parse_tap("tap0=10.0.1.1/24,speed=1")
                .unwrap_err()
                .contains("mtu=N")
        );
        assert!(
            parse_tap("=10.0.1.1/24")
                .unwrap_err()
                .contains("interface name")
        );
        assert!(
            parse_tap("averyveryverylongname=10.0.1.1/24")
                .unwrap_err()
                .contains("interface name")
        );
        assert!(parse_tap("a/b=10.0.1.1/24").unwrap_err().contains("a/b"));
        let e = parse_tap("tap0=10.0.1.0/24").unwrap_err();
        assert!(
            e.contains("--tap tap0=10.0.1.0/24") && e.contains("network's own"),
            "{e}"
        );
    }

    #[test]
    fn routes_and_impairments_parse_with_clear_errors() {
        let (cidr, gw) = parse_route("10.9.0.0/16=10.0.2.1").unwrap();
        assert_eq!(cidr.to_string(), "10.9.0.0/16");
        assert_eq!(gw, Ipv4Addr::new(10, 0, 2, 1));
        let (cidr, gw) = parse_route("2001:db8:9::/48=fd00:2::7").unwrap();
        assert_eq!(cidr.to_string(), "2001:db8:9::/48");
        assert_eq!(gw, "fd00:2::7".parse::<IpAddr>().unwrap());
        let e = parse_route("2001:db8:9::/48=10.0.2.1").unwrap_err();
        assert!(e.contains("different families"), "{e}");
        let e = parse_route("2001:db8:9::/129=fd00:2::7").unwrap_err();
        assert!(e.contains("129"), "{e}");
        assert!(
            parse_route("10.9.0.0/16")
                .unwrap_err()
                .contains("CIDR=GATEWAY")
        );
        assert!(parse_route("10.9.0.0/16=x").unwrap_err().contains("`x`"));
        let (name, config) = parse_named_impair("tap1:delay=5ms").unwrap();
        assert_eq!(name, "tap1");
        assert_ne!(config, LinkConfig::default());
        assert!(
            parse_named_impair("delay=5ms")
                .unwrap_err()
                .contains("NAME:SPEC")
        );
        assert!(parse_named_impair("tap1:bogus=1").is_err());
    }

    fn args(taps: &[&str]) -> RouteArgs {
        RouteArgs {
            taps: taps.iter().map(|t| parse_tap(t).unwrap()).collect(),
            tuns: Vec::new(),
            routes: Vec::new(),
            ra: false,
            impair: Vec::new(),
            acl: Vec::new(),
            qdisc: None,
            generate: Vec::new(),
            stats: None,
            json: false,
            pcap: None,
            no_offloads: false,
            batch: false,
            threads: None,
        }
    }

    #[test]
    fn tuns_count_with_taps() {
        let mut two = args(&["a=10.0.1.1/24"]);
        two.tuns.push(parse_tun("t=10.0.2.1/24").unwrap());
        assert_eq!(validate(&two), Ok(()));
        assert!(two.interfaces()[1].tun && !two.interfaces()[0].tun);
        let mut clash = args(&["a=10.0.1.1/24"]);
        clash.tuns.push(parse_tun("t=10.0.1.1/24").unwrap());
        let e = validate(&clash).unwrap_err();
        assert!(e.contains("--tun t") && e.contains("--tap a"), "{e}");
        let mut one = args(&[]);
        one.tuns.push(parse_tun("t=10.0.2.1/24").unwrap());
        assert!(validate(&one).unwrap_err().contains("--tun"));
        let e = parse_tun("t/x=10.0.2.1/24").unwrap_err();
        assert!(e.contains("--tun"), "{e}");
    }

    #[test]
    fn generators_parse_with_clear_errors() {
        let g = parse_generate("udp:10.0.2.1:9,rate=1000,size=32,count=5").unwrap();
        assert_eq!(
            (g.port, g.rate, g.size, g.count),
            (Some(9), 1000.0, 32, Some(5))
        );
        let g = parse_generate("icmp:10.0.2.1").unwrap();
        assert_eq!((g.port, g.size, g.count), (None, 64, None));
        assert!(
            parse_generate("tcp:10.0.2.1:9")
                .unwrap_err()
                .contains("udp:DST:PORT")
        );
        assert!(
            parse_generate("udp:10.0.2.1:x")
                .unwrap_err()
                .contains("port")
        );
        assert!(
            parse_generate("udp:10.0.2:9")
                .unwrap_err()
                .contains("address")
        );
        // A rate so low that its gap overflowed `Duration::from_secs_f64` (a panic).
        for rate in ["0", "1e-300", "0.0009", "inf", "nan", "1e8"] {
            assert!(
                parse_generate(&format!("icmp:10.0.2.1,rate={rate}"))
                    .unwrap_err()
                    .contains("rate"),
                "{rate}"
            );
        }
        assert!(parse_generate("icmp:10.0.2.1,rate=0.001").is_ok());
        assert!(
            parse_generate("icmp:10.0.2.1,size=-1")
                .unwrap_err()
                .contains("size")
        );
        assert!(
            parse_generate("icmp:10.0.2.1,speed=1")
                .unwrap_err()
                .contains("options")
        );
    }

    #[test]
    fn acl_rules_and_qdiscs_parse_with_clear_errors() {
        assert_eq!(
            parse_rule("deny proto=tcp dst=10.0.2.0/24 dport=8081")
                .unwrap()
                .to_string(),
            "deny proto=tcp dst=10.0.2.0/24 dport=8081"
        );
        assert!(
            parse_rule("drop everything")
                .unwrap_err()
                .contains("bad --acl rule")
        );
        assert!(parse_qdisc("fq_codel").is_ok());
        assert!(parse_qdisc("red").unwrap_err().contains("bad --qdisc"));
    }

    #[test]
    fn arguments_are_checked_against_each_other() {
        let one = args(&["a=10.0.1.1/24"]);
        assert!(validate(&one).unwrap_err().contains("two or more"));
        let twice = args(&["a=10.0.1.1/24", "a=10.0.2.1/24"]);
        assert!(validate(&twice).unwrap_err().contains("twice"));
        let mut bad_route = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        bad_route
            .routes
            .push(parse_route("10.9.0.0/16=10.0.3.1").unwrap());
        assert!(
            validate(&bad_route)
                .unwrap_err()
                .contains("none of the interfaces")
        );
        let mut good = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        good.routes
            .push(parse_route("10.9.0.0/16=10.0.2.7").unwrap());
        assert_eq!(validate(&good), Ok(()));
        assert_eq!(
            gateway_iface(&good.taps, IpAddr::V4(Ipv4Addr::new(10, 0, 2, 7))),
            Some(1)
        );
        // Shards: none is no number of them, and a link model runs on one stack.
        let mut sharded = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        sharded.threads = Some(0);
        assert!(validate(&sharded).unwrap_err().contains("--threads 0"));
        sharded.threads = Some(2);
        assert_eq!(validate(&sharded), Ok(()));
        assert_eq!(shard_count(&sharded), 2);
        sharded
            .impair
            .push(parse_named_impair("a:delay=1ms").unwrap());
        let e = validate(&sharded).unwrap_err();
        assert!(e.contains("--threads 2 with --impair"), "{e}");
        sharded.threads = None;
        assert_eq!(validate(&sharded), Ok(()));
        assert_eq!(shard_count(&sharded), 1);
    }

    #[test]
    fn ipv6_arguments_are_checked_against_each_other() {
        // IPv6: routes through a gateway on an interface's IPv6 network, --ra with an
        // IPv6 address somewhere.
        let mut v6 = args(&["a=10.0.1.1/24,fd00:1::1/64", "b=fd00:2::1/64"]);
        v6.routes
            .push(parse_route("2001:db8:9::/48=fd00:2::7").unwrap());
        v6.ra = true;
        assert_eq!(validate(&v6), Ok(()));
        assert_eq!(
            gateway_iface(&v6.taps, "fd00:2::7".parse().unwrap()),
            Some(1)
        );
        v6.routes
            .push(parse_route("2001:db8:8::/48=fd00:3::7").unwrap());
        let e = validate(&v6).unwrap_err();
        assert!(e.contains("--route 2001:db8:8::/48=fd00:3::7"), "{e}");
        let mut ra4 = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        ra4.ra = true;
        assert!(validate(&ra4).unwrap_err().contains("--ra"));
        let same6 = args(&["a=fd00:1::1/64", "b=10.0.2.1/24,fd00:1::1/64"]);
        let e = validate(&same6).unwrap_err();
        assert!(
            e.contains("fd00:1::1") && e.contains("already --tap a"),
            "{e}"
        );
        let mut bad_impair = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        bad_impair
            .impair
            .push(parse_named_impair("c:delay=1ms").unwrap());
        assert!(validate(&bad_impair).unwrap_err().contains("no --tap"));
        let mut lone_qdisc = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        lone_qdisc.qdisc = Some(parse_qdisc("codel").unwrap());
        assert!(validate(&lone_qdisc).unwrap_err().contains("--impair"));
        let mut bad_stats = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        bad_stats.stats = Some(0.0);
        assert!(validate(&bad_stats).unwrap_err().contains("positive"));
        // `Duration::from_secs_f64` panicked on these once the TAPs were open.
        for seconds in [1e20, f64::INFINITY, f64::NAN, 86_401.0] {
            bad_stats.stats = Some(seconds);
            assert!(validate(&bad_stats).unwrap_err().contains("--stats"));
        }
        bad_stats.stats = Some(86_400.0);
        assert_eq!(validate(&bad_stats), Ok(()));
        let same_addr = args(&["a=10.0.1.1/24", "b=10.0.1.1/16"]);
        assert!(
            validate(&same_addr)
                .unwrap_err()
                .contains("already --tap a")
        );
        let mut acl = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        acl.acl.push(parse_rule("deny in=a out=c").unwrap());
        let e = validate(&acl).unwrap_err();
        assert!(e.contains("interface c") && e.contains("--acl"), "{e}");
        let mut own = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        own.routes
            .push(parse_route("10.9.0.0/16=10.0.2.1").unwrap());
        assert!(validate(&own).unwrap_err().contains("own address"));
        let mut twice = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        twice
            .impair
            .push(parse_named_impair("a:delay=1ms").unwrap());
        twice
            .impair
            .push(parse_named_impair("a:delay=2ms").unwrap());
        assert!(validate(&twice).unwrap_err().contains("twice"));
        let mut pcap = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        pcap.pcap = Some("/dev/null".into());
        assert!(validate(&pcap).unwrap_err().contains("--pcap /dev/null"));
    }

    #[test]
    fn statistics_print_as_a_table_and_as_json() {
        let s = IfaceStats {
            rx_frames: 3,
            forward: impnet::core::ForwardStats {
                forwarded: 2,
                ttl_exceeded: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let stats = vec![("tap0".to_string(), s)];
        let routes = vec![RouteRow {
            prefix: "10.0.1.0/24".into(),
            via: "on-link".into(),
            iface: "tap0".into(),
            packets: 7,
            bytes: 700,
        }];
        let rules = vec![RuleRow {
            rule: "deny proto=udp".into(),
            packets: 1,
            bytes: 30,
        }];
        let table = stats_table(&stats, &routes, &rules, false);
        assert!(table.lines().nth(1).unwrap().starts_with("tap0"));
        assert!(table.contains("10.0.1.0/24") && table.contains("deny proto=udp"));
        assert!(!table.contains("iface6"));
        let mut s6 = stats[0].1.clone();
        s6.forward6.forwarded = 9;
        s6.forward6.frag_needed = 4;
        let stats6 = vec![("tap0".to_string(), s6)];
        let table = stats_table(&stats6, &routes, &rules, true);
        let header = table.lines().find(|l| l.starts_with("iface6")).unwrap();
        let row = table
            .lines()
            .skip_while(|l| !l.starts_with("iface6"))
            .nth(1)
            .unwrap();
        let column = |name: &str| {
            let at = header.split_whitespace().position(|h| h == name).unwrap();
            row.split_whitespace().nth(at).unwrap().to_string()
        };
        assert_eq!(
            (column("forwarded"), column("toobig")),
            ("9".into(), "4".into())
        );
        let json: serde_json::Value =
            serde_json::from_str(&stats_json(&stats6, &routes, &rules)).unwrap();
        assert_eq!(json["interfaces"]["tap0"]["ipv6"]["forwarded"], 9);
        assert_eq!(
            json["interfaces"]["tap0"]["ipv6"]["drops"]["frag_needed"],
            4
        );
        assert_eq!(json["interfaces"]["tap0"]["forwarded"], 2);
        let json: serde_json::Value =
            serde_json::from_str(&stats_json(&stats, &routes, &rules)).unwrap();
        assert_eq!(json["routes"][0]["packets"], 7);
        assert_eq!(json["acl"][0]["rule"], "deny proto=udp");
        assert_eq!(json["interfaces"]["tap0"]["forwarded"], 2);
        assert_eq!(json["interfaces"]["tap0"]["drops"]["ttl_exceeded"], 1);
    }
}
