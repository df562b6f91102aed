//! W10: tun2socks. `imp proxy` next to xjasonlyu/tun2socks (Go, on gVisor's netstack)
//! on the same TUN setup, one proxy after the other and interleaved over the
//! repetitions. Three namespaces the bench creates and deletes for every run, as in
//! `crates/cli/tests/proxy_tun.rs`: C, the client, whose default route is a TUN (MTU
//! 1500); P, where the proxy runs (the TUN is created in P, the proxy attaches to it, then it
//! moves to C); S, nginx (one worker, sendfile) over a veth from P. Only when named
//! (`--only W10`), as root, with curl, wrk and nginx; tun2socks from `$TUN2SOCKS_BIN`
//! (without it only imp's column is filled, and the bench says why). Run it under
//! `flock /tmp/imp-netns.lock` beside the namespace tests.
//!
//! Rows: `W10-bulk` (curl in C downloads one sparse file of [`super::Sizes`]'
//! `proxy_bulk` bytes from S, Gbit/s of payload over curl's total time),
//! `W10-conn-first` (wrk, one thread, 50 connections at a time, `Connection: close`,
//! a 1 KiB file, for the first 2 s after the download: connections/s), `W10-conn`
//! (the same for the W6 run length after that) and `W10-conn-err` (wrk's socket
//! errors and non-2xx answers in both). Both
//! proxies see the same plain TUN: tun2socks opens it without the virtio-net header
//! (no offloads), so imp runs with `--no-offloads` in these rows. imp's default, with
//! the TUN's checksum and TSO offloads, is in `W10-bulk-tso` / `W10-conn-tso` (and with
//! two shards, `imp proxy --threads 2` over a two-queue TUN, in `-tso-2shards`), beside
//! tun2socks' plain figures; imp on the plain TUN with its own GRO and GSO
//! (`--no-offloads --gro --gso`) in the `-soft` rows. Every other option is each proxy's default (tun2socks
//! `--proxy direct://`, its MTU the device's, its TCP buffers gVisor's defaults;
//! imp on one stack (`--threads 1`) but in the `-2shards` rows; imp's limit of new connections per client, `--rate`, at its default of 20000/s).
//!
//! The `-socks` rows put `imp proxy --no-offloads --socks5` beside hev-socks5-tunnel
//! (C, on lwIP; from `$HEV_BIN`), both through the same SOCKS5 server (microsocks in
//! P, on 127.0.0.1:1080), the plain TUN, hev's defaults but the MTU (1500); the
//! `-socks-tso` rows put `imp proxy --socks5` with its defaults (the TUN's offloads,
//! which hev does not use) beside the same hev runs. Every
//! variant also reports its CPU seconds per GiB of the download (`-cpu`), its
//! resident memory once ready (`-rss-idle`), with 1,000 connections held open through
//! it to a server in S that keeps them (`-rss-1000`; python3), and its peak over the
//! whole run (`-rss-peak`), in MB.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant as StdInstant};

use super::w5::Netns;
use super::w6::{Server, installed, ns_command, parse_wrk};
use super::{Row, median};

/// S's address on the veth; P's is .1; C's on the TUN is 10.217.0.1, imp's .2.
const SERVER: &str = "10.217.1.2";

/// The proxies under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proxy {
    /// `imp proxy --no-offloads`: the same plain TUN as tun2socks.
    Imp,
    /// `imp proxy` with its default offloads.
    ImpTso,
    /// `imp proxy --no-offloads --gro --gso`: the plain TUN, imp's own GRO and GSO.
    ImpSoft,
    Tun2socks,
    /// `imp proxy --no-offloads --socks5`: through microsocks, as hev.
    ImpSocks,
    /// hev-socks5-tunnel through microsocks.
    Hev,
    /// `imp proxy --threads 2` with its default offloads: two shards over a two-queue
    /// TUN.
    ImpTso2,
    /// `imp proxy --socks5` with its default offloads (the TUN's): what a user of
    /// `imp proxy --socks5` gets, beside hev on the same plain path to microsocks.
    ImpSocksTso,
}

/// The figures of one run: bulk Gbit/s, connections/s in the first seconds and after,
/// wrk's errors, CPU s/GiB of the download, and resident MB idle, with 1,000
/// connections open and at peak (NaN where it could not be measured).
const FIGURES: usize = 8;

/// Rows of each imp variant: (name, figure index, unit).
const ROWS: [(&str, usize, &str); FIGURES] = [
    ("bulk", 0, "Gbit/s"),
    ("conn-first", 1, "conn/s"),
    ("conn", 2, "conn/s"),
    ("conn-err", 3, "errors"),
    ("cpu", 4, "s/GiB"),
    ("rss-idle", 5, "MB"),
    ("rss-1000", 6, "MB"),
    ("rss-peak", 7, "MB"),
];

/// hev-socks5-tunnel: `$HEV_BIN`, which must exist.
fn hev_binary() -> Result<PathBuf, String> {
    let Some(path) = std::env::var_os("HEV_BIN") else {
        return Err(
            "HEV_BIN is not set (build heiher/hev-socks5-tunnel with `make` and set \
             HEV_BIN to bin/hev-socks5-tunnel)"
                .into(),
        );
    };
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Err(format!("HEV_BIN={}: no such file", path.to_string_lossy()));
    }
    Ok(path)
}

/// Why W10 cannot run here at all, if it cannot.
pub(crate) fn unavailable() -> Option<String> {
    if let Some(reason) = super::w5::unavailable() {
        return Some(reason);
    }
    let missing: Vec<&str> = ["curl", "wrk", "nginx"]
        .into_iter()
        .filter(|tool| !installed(tool))
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "{} not installed (apt-get install -y curl wrk nginx-light)",
            missing.join(", ")
        ));
    }
    super::w6::imp_binary().err()
}

/// The tun2socks binary: `$TUN2SOCKS_BIN`, which must exist.
pub(crate) fn tun2socks_binary() -> Result<PathBuf, String> {
    let Some(path) = std::env::var_os("TUN2SOCKS_BIN") else {
        return Err(
            "TUN2SOCKS_BIN is not set (build xjasonlyu/tun2socks with `go build` \
                    and set TUN2SOCKS_BIN to the binary)"
                .into(),
        );
    };
    let path = PathBuf::from(path);
    if !path.is_file() {
        return Err(format!(
            "TUN2SOCKS_BIN={}: no such file",
            path.to_string_lossy()
        ));
    }
    Ok(path)
}

/// Run W10 `repeats` times, the proxies' order rotated each time: the rows of medians,
/// empty when W10 cannot run (the reason printed).
pub(crate) fn run(bulk: u64, secs: u32, repeats: usize, progress: bool) -> Vec<Row> {
    if let Some(reason) = unavailable() {
        eprintln!("imp-bench: W10 skipped: {reason}");
        return Vec::new();
    }
    let mut proxies = vec![Proxy::Imp, Proxy::ImpTso, Proxy::ImpSoft, Proxy::ImpTso2];
    match tun2socks_binary() {
        Ok(_) => proxies.push(Proxy::Tun2socks),
        Err(reason) => eprintln!("imp-bench: W10's tun2socks column skipped: {reason}"),
    }
    if installed("microsocks") {
        proxies.extend([Proxy::ImpSocks, Proxy::ImpSocksTso]);
        match hev_binary() {
            Ok(_) => proxies.push(Proxy::Hev),
            Err(reason) => eprintln!("imp-bench: W10's hev-socks5-tunnel column skipped: {reason}"),
        }
    } else {
        eprintln!(
            "imp-bench: W10's -socks rows skipped: microsocks not installed (apt-get install -y microsocks)"
        );
    }
    let mut samples: Vec<[Vec<f64>; FIGURES]> = vec![Default::default(); 8];
    let started = StdInstant::now();
    for repeat in 0..repeats {
        for k in 0..proxies.len() {
            let proxy = proxies[(k + repeat) % proxies.len()];
            match once(proxy, bulk, secs) {
                Ok(figures) => {
                    for (slot, figure) in samples[proxy as usize].iter_mut().zip(figures) {
                        if !figure.is_nan() {
                            slot.push(figure);
                        }
                    }
                }
                Err(e) => eprintln!("imp-bench: W10 on {proxy:?}: {e}"),
            }
        }
        if progress {
            eprintln!(
                "imp-bench: W10 repetition {}/{repeats} done ({:.1} s)",
                repeat + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    rows(&mut samples)
}

/// The rows from every proxy's samples: per imp variant (plain, its own GRO/GSO
/// `-soft`, the kernel's offloads `-tso`, through SOCKS5 `-socks`) every figure of
/// [`ROWS`], each beside the other proxy's (tun2socks; hev for `-socks`).
fn rows(samples: &mut [[Vec<f64>; FIGURES]]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (proxy, other, suffix) in [
        (Proxy::Imp, Proxy::Tun2socks, ""),
        (Proxy::ImpSoft, Proxy::Tun2socks, "-soft"),
        (Proxy::ImpTso, Proxy::Tun2socks, "-tso"),
        (Proxy::ImpTso2, Proxy::Tun2socks, "-tso-2shards"),
        (Proxy::ImpSocks, Proxy::Hev, "-socks"),
        (Proxy::ImpSocksTso, Proxy::Hev, "-socks-tso"),
    ] {
        if samples[proxy as usize][0].is_empty() {
            continue;
        }
        for (name, i, unit) in ROWS {
            // As before: W10-bulk-soft, W10-conn-soft-err.
            let workload = match name.strip_suffix("-err") {
                Some(stem) => format!("W10-{stem}{suffix}-err"),
                None => format!("W10-{name}{suffix}"),
            };
            rows.push(Row {
                workload,
                unit,
                imp: median(&mut samples[proxy as usize][i]),
                smoltcp: None,
                linux: None,
                tun2socks: median(&mut samples[other as usize][i]),
            });
        }
    }
    rows
}

/// The W10 table: imp, tun2socks and their ratio.
pub(crate) fn print(rows: &[Row], repeats: usize, bulk: u64, secs: u32) {
    println!(
        "W10: imp proxy and tun2socks on the same TUN (MTU 1500), medians of {repeats} \
         run(s); bulk {} MiB; conn = wrk -c 50, Connection: close, 1 KiB: the first \
         {FIRST_SECS} s, then {secs} s",
        bulk >> 20
    );
    println!(
        "W10 rows: imp --no-offloads (as tun2socks: no TUN offloads); -soft rows: with imp's own \
         --gro --gso; -tso rows: imp's default, the TUN's offloads; -socks rows: imp and \
         hev-socks5-tunnel (in the 'other' column) through microsocks; -socks-tso rows: imp's \
         default offloads beside the same hev"
    );
    println!(
        "{:<20} {:<8} {:>10} {:>10} {:>14}",
        "workload", "unit", "imp", "other", "imp/other"
    );
    let cell = |v: Option<f64>| match v {
        None => "-".to_string(),
        Some(v) if v.abs() >= 10.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.3}"),
    };
    for r in rows {
        let ratio = match (r.imp, r.tun2socks) {
            (Some(a), Some(b)) if b != 0.0 && !r.workload.ends_with("-err") => {
                format!("{:.2}x", a / b)
            }
            _ => "-".to_string(),
        };
        println!(
            "{:<20} {:<8} {:>10} {:>10} {:>14}",
            r.workload,
            r.unit,
            cell(r.imp),
            cell(r.tun2socks),
            ratio
        );
    }
}

/// The served files (`big.bin`, sparse, and `1k.bin`) and nginx's, removed on drop.
struct Site(PathBuf);

impl Site {
    fn new(bulk: u64) -> Result<Site, String> {
        let dir = std::env::temp_dir().join(format!("imp-bench-w10-{}", std::process::id()));
        let www = dir.join("www");
        std::fs::create_dir_all(&www).map_err(|e| format!("{}: {e}", www.display()))?;
        let big = std::fs::File::create(www.join("big.bin"))
            .and_then(|f| f.set_len(bulk))
            .map_err(|e| format!("{}: {e}", www.display()));
        let small = std::fs::write(www.join("1k.bin"), super::pattern(1024))
            .map_err(|e| format!("{}: {e}", www.display()));
        let site = Site(dir);
        big.and(small)?;
        Ok(site)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One run of one proxy in fresh namespaces: bulk Gbit/s, connections/s in the first
/// [`FIRST_SECS`] and in the `secs` after, wrk's errors.
fn once(proxy: Proxy, bulk: u64, secs: u32) -> Result<[f64; FIGURES], String> {
    let site = Site::new(bulk)?;
    let (client, middle, server) = (Netns::new()?, Netns::new()?, Netns::new()?);
    middle.ip(&[
        "link",
        "add",
        "vp",
        "type",
        "veth",
        "peer",
        "name",
        "vs",
        "netns",
        &server.name,
    ])?;
    middle.ip(&["addr", "add", "10.217.1.1/24", "dev", "vp"])?;
    middle.ip(&["link", "set", "vp", "up"])?;
    server.ip(&["addr", "add", &format!("{SERVER}/24"), "dev", "vs"])?;
    server.ip(&["link", "set", "vs", "up"])?;
    let _nginx = start_nginx(&server, &site.0)?;
    let _hold = start_hold_server(&server)?;
    let _socks = match proxy {
        Proxy::ImpSocks | Proxy::ImpSocksTso | Proxy::Hev => Some(start_microsocks(&middle)?),
        _ => None,
    };
    // Two shards open one queue each: the device must have been made multi-queue
    // (a single-queue open of such a device fails, so only for them).
    if proxy == Proxy::ImpTso2 {
        middle.ip(&["tuntap", "add", "dev", "pt0", "mode", "tun", "multi_queue"])?;
    } else {
        middle.ip(&["tuntap", "add", "dev", "pt0", "mode", "tun"])?;
    }
    // Up in P too, so that its carrier shows when the proxy attaches.
    middle.ip(&["link", "set", "pt0", "up"])?;
    let running = start_proxy(proxy, &middle, &site.0)?;
    let pid = running.0.id();
    middle.ip(&["link", "set", "pt0", "netns", &client.name])?;
    client.ip(&["addr", "add", "10.217.0.1/24", "dev", "pt0"])?;
    client.ip(&["link", "set", "pt0", "up"])?;
    client.ip(&["route", "add", "default", "dev", "pt0"])?;
    wait_through(&client)?;
    let idle = resident_mb(pid, "VmRSS");
    let cpu = cpu_seconds(pid);
    let gbits = download(&client, bulk)?;
    let cpu_per_gib = (cpu_seconds(pid) - cpu) * (1u64 << 30) as f64 / bulk as f64;
    // The first seconds on a fresh proxy, then a longer stretch: tun2socks slows down
    // sharply after some 3300 connections (see the README), which the second shows.
    let (first, first_errors) = connections(&client, FIRST_SECS.min(secs))?;
    let (rate, errors) = connections(&client, secs)?;
    let held = hold_open(&client, pid)?;
    let peak = resident_mb(pid, "VmHWM");
    Ok([
        gbits,
        first,
        rate,
        first_errors + errors,
        cpu_per_gib,
        idle,
        held,
        peak,
    ])
}

/// A field of `/proc/PID/status` (`VmRSS`, `VmHWM`) in MB; NaN if unreadable.
fn resident_mb(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib * 1024.0 / 1e6)
}

/// User and system CPU seconds of process `pid` (all its threads) so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<f64>().ok());
    // SAFETY: sysconf has no memory arguments.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    match (ticks(14), ticks(15)) {
        (Some(user), Some(system)) if hz > 0.0 => (user + system) / hz,
        _ => f64::NAN,
    }
}

/// The port of S's server that keeps every connection open.
const HOLD_PORT: u16 = 9000;

/// Python in S: echo a connection's first bytes, then keep it until the client closes.
const HOLD_SERVER: &str = r#"
import asyncio, sys
async def main():
    async def hold(r, w):
        w.write(await r.read(100))
        await w.drain()
        await r.read(100)
        w.close()
    server = await asyncio.start_server(hold, sys.argv[1], int(sys.argv[2]), backlog=4096)
    async with server:
        await server.serve_forever()
asyncio.run(main())
"#;

/// Python in C: open argv[3] connections to argv[1]:argv[2], one after the other, each
/// echoed once; print "open", then keep them until stdin closes.
const HOLD_CLIENT: &str = r#"
import asyncio, sys
async def main():
    held = []
    for _ in range(int(sys.argv[3])):
        r, w = await asyncio.wait_for(asyncio.open_connection(sys.argv[1], int(sys.argv[2])), 10)
        w.write(b"hi")
        await w.drain()
        await asyncio.wait_for(r.readexactly(2), 10)
        held.append(w)
    print("open", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
asyncio.run(main())
"#;

/// The hold server in `ns` (none without python3: the `-rss-1000` figure is then NaN).
fn start_hold_server(ns: &Netns) -> Result<Option<Server>, String> {
    if !installed("python3") {
        return Ok(None);
    }
    let port = HOLD_PORT.to_string();
    let child = ns_command(ns, "python3", &["-c", HOLD_SERVER, SERVER, &port])
        .spawn()
        .map_err(|e| format!("cannot start python3: {e}"))?;
    Ok(Some(Server(child)))
}

/// 1,000 connections from `client` held open through the proxy `pid`: its resident
/// MB with all of them open (NaN without python3).
fn hold_open(client: &Netns, pid: u32) -> Result<f64, String> {
    if !installed("python3") {
        return Ok(f64::NAN);
    }
    let port = HOLD_PORT.to_string();
    let mut child = ns_command(
        client,
        "python3",
        &["-c", HOLD_CLIENT, SERVER, &port, "1000"],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .map_err(|e| format!("cannot start python3: {e}"))?;
    let stdout = child.stdout.take().ok_or("the hold client has no stdout")?;
    let mut line = String::new();
    let _ = BufReader::new(stdout).read_line(&mut line);
    let rss = resident_mb(pid, "VmRSS");
    // Closing its stdin lets the client go, closing the connections.
    drop(child.stdin.take());
    let _ = child.wait();
    if line.trim() != "open" {
        return Err("1,000 connections did not all open through the proxy".into());
    }
    Ok(rss)
}

/// microsocks on 127.0.0.1:1080 in `ns`, once it listens.
fn start_microsocks(ns: &Netns) -> Result<Server, String> {
    let child = ns_command(ns, "microsocks", &["-i", "127.0.0.1", "-p", "1080"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start microsocks: {e}"))?;
    let server = Server(child);
    let deadline = StdInstant::now() + Duration::from_secs(10);
    while StdInstant::now() < deadline {
        let out = ns_command(ns, "ss", &["-Htln", "sport = :1080"])
            .output()
            .map_err(|e| format!("ss: {e}"))?;
        if !out.stdout.is_empty() {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err("microsocks did not listen within 10 s".into())
}

/// The length of `W10-conn-first`'s window, in seconds.
const FIRST_SECS: u32 = 2;

/// wrk in `client` for `secs` seconds, one connection per request: (connections/s,
/// errors).
fn connections(client: &Netns, secs: u32) -> Result<(f64, f64), String> {
    let url = format!("http://{SERVER}/1k.bin");
    let (c, d) = ("50", format!("{secs}s"));
    let args = [
        "-t",
        "1",
        "-c",
        c,
        "-d",
        &d,
        "--latency",
        "-H",
        "Connection: close",
        &url,
    ];
    let out = ns_command(client, "wrk", &args)
        .output()
        .map_err(|e| format!("cannot run wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let wrk = parse_wrk(&text).ok_or_else(|| format!("cannot read wrk's report:\n{text}"))?;
    Ok((wrk.requests_per_sec, wrk.errors))
}

/// nginx (one worker) on SERVER:80 in `ns`, serving `dir`/www.
fn start_nginx(ns: &Netns, dir: &Path) -> Result<Server, String> {
    let conf = super::w6::nginx_conf(dir, &dir.join("www"), &format!("{SERVER}:80"))?;
    let child = ns_command(ns, "nginx", &["-c", &conf, "-p", &dir.to_string_lossy()])
        .spawn()
        .map_err(|e| format!("cannot start nginx: {e}"))?;
    Ok(Server(child))
}

/// Start `proxy` on the TUN pt0 in `ns`; returns once it holds the device.
fn start_proxy(proxy: Proxy, ns: &Netns, dir: &Path) -> Result<Server, String> {
    let imp = super::w6::imp_binary()?;
    let imp = imp.to_string_lossy();
    let t2s = match proxy {
        Proxy::Tun2socks => tun2socks_binary()?.to_string_lossy().into_owned(),
        Proxy::Hev => hev_binary()?.to_string_lossy().into_owned(),
        _ => String::new(),
    };
    let hev_conf = dir.join("hev.yml");
    if proxy == Proxy::Hev {
        let conf = "tunnel:\n  name: pt0\n  mtu: 1500\n  ipv4: 198.18.0.1\n\
                    socks5:\n  port: 1080\n  address: 127.0.0.1\n  udp: 'udp'\n\
                    misc:\n  log-level: error\n";
        std::fs::write(&hev_conf, conf).map_err(|e| format!("{}: {e}", hev_conf.display()))?;
    }
    let hev_conf = hev_conf.to_string_lossy();
    let (program, args): (&str, Vec<&str>) = match proxy {
        Proxy::Imp
        | Proxy::ImpTso
        | Proxy::ImpSoft
        | Proxy::ImpSocks
        | Proxy::ImpTso2
        | Proxy::ImpSocksTso => {
            // imp's defaults, as tun2socks' (its per-client limit of new connections,
            // 20000/s, is above what wrk opens here), on one stack but in `ImpTso2`.
            let threads = if proxy == Proxy::ImpTso2 { "2" } else { "1" };
            let mut args = vec![
                "proxy",
                "--tun",
                "pt0",
                "--addr",
                "10.217.0.2/24",
                "--threads",
                threads,
            ];
            match proxy {
                Proxy::Imp => args.push("--no-offloads"),
                Proxy::ImpSoft => args.extend(["--no-offloads", "--gro", "--gso"]),
                Proxy::ImpSocks => args.extend(["--no-offloads", "--socks5", "127.0.0.1:1080"]),
                Proxy::ImpSocksTso => args.extend(["--socks5", "127.0.0.1:1080"]),
                _ => {}
            }
            (&imp, args)
        }
        Proxy::Hev => (&t2s, vec![&*hev_conf]),
        Proxy::Tun2socks => (
            &t2s,
            vec![
                "--device",
                "tun://pt0",
                "--proxy",
                "direct://",
                "--loglevel",
                "error",
            ],
        ),
    };
    let mut child = ns_command(ns, program, &args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let stdout = child.stdout.take().ok_or("the proxy has no stdout")?;
    let server = Server(child);
    // Keep reading, so the proxy's lines find their pipe open.
    std::thread::spawn(move || for _ in BufReader::new(stdout).lines() {});
    // A TUN's carrier comes on when a process attaches.
    let deadline = StdInstant::now() + Duration::from_secs(10);
    while StdInstant::now() < deadline {
        let out = ns_command(ns, "ip", &["link", "show", "pt0"])
            .output()
            .map_err(|e| format!("ip: {e}"))?;
        if String::from_utf8_lossy(&out.stdout).contains("LOWER_UP") {
            return Ok(server);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("{proxy:?} did not attach to the TUN within 10 s"))
}

/// Wait until the 1 KiB file comes through the proxy.
fn wait_through(client: &Netns) -> Result<(), String> {
    let url = format!("http://{SERVER}/1k.bin");
    let deadline = StdInstant::now() + Duration::from_secs(10);
    while StdInstant::now() < deadline {
        let out = ns_command(
            client,
            "curl",
            &["-sf", "--max-time", "2", "-o", "/dev/null", &url],
        )
        .output()
        .map_err(|e| format!("curl: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("{url} did not come through the proxy within 10 s"))
}

/// curl in `client` downloads big.bin: Gbit/s of payload.
fn download(client: &Netns, bulk: u64) -> Result<f64, String> {
    let url = format!("http://{SERVER}/big.bin");
    let args = [
        "-sS",
        "--max-time",
        "300",
        "-o",
        "/dev/null",
        "-w",
        "%{size_download} %{time_total}",
        &url,
    ];
    let out = ns_command(client, "curl", &args)
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let size: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
    let secs: f64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0.0);
    if !out.status.success() || size != bulk || secs <= 0.0 {
        return Err(format!(
            "curl {url}: {size} of {bulk} bytes in {secs} s ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(size as f64 * 8.0 / secs / 1e9)
}
