//! `imp route`: imp as a gateway between two or more TAP devices, in real time (RFC
//! 1812 forwarding in the core, seed 004's gateway functions around it): routing,
//! statistics per interface printed at an interval and on exit, the link model on any
//! interface, and a pcap per interface for debugging. It answers pings to its own
//! addresses, as any imp stack does.

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant, SystemTime, UNIX_EPOCH};

use clap::Args;
use impnet::Runtime;
use impnet::core::{IfaceConfig, IfaceId, IfaceStats, StackConfig};
use impnet::phy::{Device, Impair, LinkConfig, Pcap, PcapWriter, Tap, TapConfig};
use impnet::wire::ipv4::Cidr;

use crate::impair;
use crate::tapargs::{fit_mtu, mac_for, model, parse_cidr};

/// Options of `imp route`.
#[derive(Debug, Args)]
pub struct RouteArgs {
    /// An interface: a TAP device (created if missing) and imp's address on it, with
    /// an optional IP MTU: NAME=ADDR/LEN[,mtu=N]. Give two or more.
    #[arg(long = "tap", value_name = "NAME=ADDR/LEN[,mtu=N]", value_parser = parse_tap, required = true)]
    pub taps: Vec<TapSpec>,
    /// A route: destinations CIDR through gateway GW (on one of the TAPs' networks).
    #[arg(long = "route", value_name = "CIDR=GW", value_parser = parse_route)]
    pub routes: Vec<(Cidr, Ipv4Addr)>,
    /// The link model on one interface, both ways: NAME:delay=10ms,rate=10mbit,...
    #[arg(long = "impair", value_name = "NAME:SPEC", value_parser = parse_named_impair)]
    pub impair: Vec<(String, LinkConfig)>,
    /// Print the statistics table every SECONDS (it is always printed on exit).
    #[arg(long, value_name = "SECONDS")]
    pub stats: Option<f64>,
    /// Print the statistics as one JSON object per report instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write a pcap per interface into DIR (DIR/NAME.pcap), for debugging.
    #[arg(long, value_name = "DIR")]
    pub pcap: Option<PathBuf>,
}

/// One `--tap`: the device, imp's address on it, its IP MTU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapSpec {
    /// The TAP's name.
    pub name: String,
    /// imp's address and prefix on the TAP's network.
    pub addr: Cidr,
    /// The IP MTU (1500 unless given).
    pub mtu: usize,
}

/// Parse `NAME=ADDR/LEN[,mtu=N]`.
pub fn parse_tap(text: &str) -> Result<TapSpec, String> {
    let (name, rest) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not NAME=ADDR/LEN[,mtu=N] (e.g. tap0=10.0.1.1/24)"))?;
    if name.is_empty() || name.len() > 15 {
        return Err(format!(
            "`{name}` in `{text}` is not a TAP name (1 to 15 characters)"
        ));
    }
    let mut parts = rest.split(',');
    let addr = parse_cidr(parts.next().unwrap_or_default())?;
    let mut mtu = 1500;
    for part in parts {
        match part.split_once('=') {
            Some(("mtu", value)) => {
                mtu = value
                    .parse()
                    .ok()
                    .filter(|m| (576..=65535).contains(m))
                    .ok_or_else(|| format!("`{value}` in `{text}` is not an MTU (576 to 65535)"))?;
            }
            _ => return Err(format!("`{part}` in `{text}`: the only option is mtu=N")),
        }
    }
    Ok(TapSpec {
        name: name.to_string(),
        addr,
        mtu,
    })
}

/// Parse `CIDR=GW`.
pub fn parse_route(text: &str) -> Result<(Cidr, Ipv4Addr), String> {
    let (cidr, gateway) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not CIDR=GATEWAY (e.g. 10.9.0.0/16=10.0.2.1)"))?;
    let cidr = parse_cidr(cidr)?;
    let gateway = gateway
        .parse()
        .map_err(|_| format!("`{gateway}` in `{text}` is not an IPv4 address"))?;
    Ok((cidr, gateway))
}

/// Parse `NAME:SPEC`.
pub fn parse_named_impair(text: &str) -> Result<(String, LinkConfig), String> {
    let (name, spec) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}` is not NAME:SPEC (e.g. tap1:rate=10mbit,delay=5ms)"))?;
    Ok((name.to_string(), impair::parse_impair(spec)?))
}

/// The interfaces as opened: name, id, address.
struct Iface {
    name: String,
    id: IfaceId,
    addr: Cidr,
}

/// Check the arguments against each other before opening anything.
fn validate(args: &RouteArgs) -> Result<(), String> {
    if args.taps.len() < 2 {
        return Err(format!(
            "imp route forwards between two or more interfaces (--tap NAME=ADDR/LEN, twice or more); {} given",
            args.taps.len()
        ));
    }
    for (i, tap) in args.taps.iter().enumerate() {
        if args.taps[..i].iter().any(|t| t.name == tap.name) {
            return Err(format!("--tap {} is given twice", tap.name));
        }
    }
    for (name, _) in &args.impair {
        if !args.taps.iter().any(|t| &t.name == name) {
            return Err(format!("--impair {name}: no --tap of that name"));
        }
    }
    for (cidr, gateway) in &args.routes {
        if gateway_iface(&args.taps, *gateway).is_none() {
            return Err(format!(
                "--route {}/{}={gateway}: the gateway is on none of the TAPs' networks",
                cidr.address, cidr.prefix_len
            ));
        }
    }
    if let Some(seconds) = args.stats
        && !(seconds.is_finite() && seconds > 0.0)
    {
        return Err(format!(
            "--stats {seconds}: give a positive number of seconds"
        ));
    }
    Ok(())
}

/// The TAP whose network holds `gateway`.
fn gateway_iface(taps: &[TapSpec], gateway: Ipv4Addr) -> Option<usize> {
    taps.iter().position(|t| {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(t.addr.prefix_len))
            .unwrap_or(0);
        t.addr.address.to_bits() & mask == gateway.to_bits() & mask
    })
}

/// Milliseconds since midnight UT now, for the IPv4 Timestamp option.
fn ut_offset_ms() -> Option<u64> {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    Some((since_epoch.as_millis() % 86_400_000) as u64)
}

/// Open every TAP (without offloads: a gateway forwards wire-sized packets) and add
/// it to the runtime, with its link model and pcap when asked.
fn open_interfaces(args: &RouteArgs, rt: &Runtime) -> Result<Vec<Iface>, String> {
    let mut ifaces = Vec::new();
    for (index, spec) in args.taps.iter().enumerate() {
        let config = TapConfig::new(&spec.name).mtu(spec.mtu).offloads(false);
        let tap =
            Tap::open_with(&config).map_err(|e| format!("cannot open TAP {}: {e}", spec.name))?;
        let iface_config = IfaceConfig::new(mac_for(spec.addr.address), spec.mtu);
        let impairment = args
            .impair
            .iter()
            .find(|(name, _)| name == &spec.name)
            .map(|(_, c)| fit_mtu(*c, Device::mtu(&tap)));
        let pcap = match &args.pcap {
            Some(dir) => {
                let path = dir.join(format!("{}.pcap", spec.name));
                Some(
                    PcapWriter::create(&path)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?,
                )
            }
            None => None,
        };
        let seed = 0x5eed_0000 + index as u64;
        let id = match (impairment, pcap) {
            (Some(c), Some(w)) => {
                let device = Impair::new(tap, model(c, seed)?).with_rx(model(c, !seed)?);
                rt.add_device(Pcap::new(device, w), iface_config)
            }
            (Some(c), None) => {
                let device = Impair::new(tap, model(c, seed)?).with_rx(model(c, !seed)?);
                rt.add_device(device, iface_config)
            }
            (None, Some(w)) => rt.add_device(Pcap::new(tap, w), iface_config),
            (None, None) => rt.add_device(tap, iface_config),
        };
        rt.add_address(id, spec.addr);
        rt.with_stack(|stack, _| stack.set_forwarding(id, true));
        ifaces.push(Iface {
            name: spec.name.clone(),
            id,
            addr: spec.addr,
        });
    }
    Ok(ifaces)
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
    let rt = Runtime::new(StackConfig {
        ut_offset_ms: ut_offset_ms(),
        ..StackConfig::default()
    })
    .map_err(|e| format!("cannot start the imp runtime: {e}"))?;
    let ifaces = open_interfaces(args, &rt)?;
    for (cidr, gateway) in &args.routes {
        let iface = ifaces[gateway_iface(&args.taps, *gateway).unwrap_or(0)].id;
        rt.with_stack(|stack, _| stack.routes_mut().add(*cidr, Some(*gateway), iface));
    }
    let names: Vec<String> = ifaces
        .iter()
        .map(|i| format!("{} ({})", i.name, i.addr))
        .collect();
    println!(
        "imp route: forwarding between {}; stop with Ctrl-C",
        names.join(", ")
    );
    let _ = std::io::stdout().flush();
    let interval = args.stats.map(StdDuration::from_secs_f64);
    let mut next_report = interval.map(|i| StdInstant::now() + i);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(StdDuration::from_millis(50));
        if let (Some(at), Some(every)) = (next_report, interval)
            && StdInstant::now() >= at
        {
            report(&rt, &ifaces, args.json);
            next_report = Some(at + every);
        }
    }
    report(&rt, &ifaces, args.json);
    drop(rt);
    Ok(())
}

/// Print the statistics: a table, or one JSON object.
fn report(rt: &Runtime, ifaces: &[Iface], json: bool) {
    let stats: Vec<(String, IfaceStats)> = rt.with_stack(|stack, _| {
        ifaces
            .iter()
            .map(|i| {
                let s = stack.iface_stats(i.id).cloned().unwrap_or_default();
                (i.name.clone(), s)
            })
            .collect()
    });
    if json {
        println!("{}", stats_json(&stats));
    } else {
        print!("{}", stats_table(&stats));
    }
    let _ = std::io::stdout().flush();
}

/// The statistics as a table: one row per interface.
pub(crate) fn stats_table(stats: &[(String, IfaceStats)]) -> String {
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
    out
}

/// The statistics as one JSON object: `{"interfaces": {NAME: {...}}}`.
pub(crate) fn stats_json(stats: &[(String, IfaceStats)]) -> String {
    let mut interfaces = serde_json::Map::new();
    for (name, s) in stats {
        let f = &s.forward;
        interfaces.insert(
            name.clone(),
            serde_json::json!({
                "rx_frames": s.rx_frames,
                "rx_bytes": s.rx_bytes,
                "tx_frames": s.tx_frames,
                "tx_bytes": s.tx_bytes,
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
            }),
        );
    }
    serde_json::json!({ "interfaces": interfaces }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_specs_parse_with_clear_errors() {
        let spec = parse_tap("tap0=10.0.1.1/24,mtu=1280").unwrap();
        assert_eq!(spec.name, "tap0");
        assert_eq!(spec.addr.address, Ipv4Addr::new(10, 0, 1, 1));
        assert_eq!(spec.mtu, 1280);
        assert_eq!(parse_tap("t=10.0.0.1/8").unwrap().mtu, 1500);
        assert!(parse_tap("tap0").unwrap_err().contains("NAME=ADDR/LEN"));
        assert!(parse_tap("tap0=10.0.1.1").unwrap_err().contains("PREFIX"));
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
        assert!(parse_tap("=10.0.1.1/24").unwrap_err().contains("TAP name"));
        assert!(
            parse_tap("averyveryverylongname=10.0.1.1/24")
                .unwrap_err()
                .contains("TAP name")
        );
    }

    #[test]
    fn routes_and_impairments_parse_with_clear_errors() {
        let (cidr, gw) = parse_route("10.9.0.0/16=10.0.2.1").unwrap();
        assert_eq!((cidr.prefix_len, gw), (16, Ipv4Addr::new(10, 0, 2, 1)));
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
            routes: Vec::new(),
            impair: Vec::new(),
            stats: None,
            json: false,
            pcap: None,
        }
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
                .contains("none of the TAPs")
        );
        let mut good = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        good.routes
            .push(parse_route("10.9.0.0/16=10.0.2.7").unwrap());
        assert_eq!(validate(&good), Ok(()));
        assert_eq!(
            gateway_iface(&good.taps, Ipv4Addr::new(10, 0, 2, 7)),
            Some(1)
        );
        let mut bad_impair = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        bad_impair
            .impair
            .push(parse_named_impair("c:delay=1ms").unwrap());
        assert!(validate(&bad_impair).unwrap_err().contains("no --tap"));
        let mut bad_stats = args(&["a=10.0.1.1/24", "b=10.0.2.1/24"]);
        bad_stats.stats = Some(0.0);
        assert!(validate(&bad_stats).unwrap_err().contains("positive"));
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
        let table = stats_table(&stats);
        assert!(table.lines().nth(1).unwrap().starts_with("tap0"));
        let json: serde_json::Value = serde_json::from_str(&stats_json(&stats)).unwrap();
        assert_eq!(json["interfaces"]["tap0"]["forwarded"], 2);
        assert_eq!(json["interfaces"]["tap0"]["drops"]["ttl_exceeded"], 1);
    }
}
