//! W7 over devices: forwarding between network namespaces the bench creates (and
//! deletes), host A — router — host B, measured with iperf3 from A to B.
//!
//! - imp: `imp route` (the `imp` binary of `imp_bin.rs`) between two TAPs, opened in
//!   the router's namespace (with the kernel's offloads: TCP segments cross whole, as
//!   over veth) and then moved into A's and B's; once with one shard (one runtime
//!   thread) and once with two (`--threads 2`: two-queue TAPs, two router stacks).
//! - Linux: the router namespace joined to A and B by two veth pairs, with
//!   `net.ipv4.ip_forward=1` there.
//!
//! Rows: `W7-route-udp64` (UDP with 64-byte payloads, `-b 0`: packets/s B received, in
//! kpps), `W7-route-udp64-tx` (what A's iperf3 sent, kpps: when it is close to the
//! received rate, the sender was the limit, not the router) and `W7-route-tcp` (one
//! TCP stream, Gbit/s B received). imp's figures stand in the `imp` column, the
//! kernel's in `linux`; imp's two-shard runs add the same rows with `-2shards`
//! (the kernel forwards on every core in its rows).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant as StdInstant};

use super::Sample;
use super::w5::Netns;
use super::w6::{Server, imp_binary, installed, ns_command};

/// How long a server may take to start listening.
const START: Duration = Duration::from_secs(10);
/// The port iperf3 listens on.
const IPERF_PORT: &str = "5201";
/// UDP payload bytes of the small-packet row.
const PAYLOAD: u64 = 64;

/// Why W7's device rows cannot run here, if they cannot: what is missing.
pub(crate) fn unavailable() -> Option<String> {
    if let Some(reason) = super::w5::unavailable() {
        return Some(reason);
    }
    if !installed("iperf3") {
        return Some("iperf3 not installed (apt-get install -y iperf3)".into());
    }
    imp_binary().err()
}

/// The three namespaces of one run and the addresses on A's and B's links.
struct Path {
    a: Netns,
    b: Netns,
    router: Netns,
    /// B's address, iperf3's server.
    b_addr: String,
}

impl Path {
    fn new() -> Result<Path, String> {
        Ok(Path {
            router: Netns::new()?,
            a: Netns::new()?,
            b: Netns::new()?,
            b_addr: String::new(),
        })
    }

    /// Give the hosts their side of the links (`dev` in each, already in its
    /// namespace): `net`.1/24, default route through `net`.2 (the router).
    fn hosts(&mut self, devs: [&str; 2], nets: [&str; 2]) -> Result<(), String> {
        for ((ns, dev), net) in [&self.a, &self.b].into_iter().zip(devs).zip(nets) {
            ns.ip(&["addr", "add", &format!("{net}.1/24"), "dev", dev])?;
            ns.ip(&["link", "set", dev, "mtu", "1500"])?;
            ns.ip(&["link", "set", dev, "up"])?;
            ns.ip(&["route", "add", "default", "via", &format!("{net}.2")])?;
        }
        self.b_addr = format!("{}.1", nets[1]);
        Ok(())
    }
}

/// W7 on imp: `imp route` between two TAPs, with one shard and with two.
pub(crate) fn imp(secs: u32) -> Result<Vec<Sample>, String> {
    let mut samples = imp_shards(secs, 1)?;
    for sample in imp_shards(secs, 2)? {
        let workload = format!("{}-2shards", sample.workload);
        samples.push(Sample { workload, ..sample });
    }
    Ok(samples)
}

/// W7 on imp with `shards` router stacks.
fn imp_shards(secs: u32, shards: usize) -> Result<Vec<Sample>, String> {
    let mut path = Path::new()?;
    let nets = ["10.211.1", "10.211.2"];
    let imp = imp_binary()?;
    let (tap_a, tap_b) = (
        format!("w7a={}.2/24", nets[0]),
        format!("w7b={}.2/24", nets[1]),
    );
    let threads = shards.to_string();
    let args = [
        "route",
        "--tap",
        &tap_a,
        "--tap",
        &tap_b,
        "--threads",
        &threads,
    ];
    let mut child = ns_command(&path.router, imp.to_str().unwrap_or("imp"), &args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start imp route: {e}"))?;
    let stdout = child.stdout.take().ok_or("imp route has no stdout")?;
    let router = Server(child);
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .map_err(|e| format!("imp route: {e}"))?;
    if !line.contains("forwarding between") {
        return Err(format!("imp route did not start: {line:?}"));
    }
    // Keep reading, so imp route's closing statistics find their pipe open.
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    path.router
        .ip(&["link", "set", "w7a", "netns", &path.a.name])?;
    path.router
        .ip(&["link", "set", "w7b", "netns", &path.b.name])?;
    path.hosts(["w7a", "w7b"], nets)?;
    let samples = measure(&path, secs);
    drop(router);
    samples
}

/// W7 on Linux: the router namespace forwarding between two veth pairs.
pub(crate) fn linux(secs: u32) -> Result<Vec<Sample>, String> {
    let mut path = Path::new()?;
    let nets = ["10.212.1", "10.212.2"];
    for (host, dev, net) in [(&path.a, "w7a", nets[0]), (&path.b, "w7b", nets[1])] {
        path.router.ip(&[
            "link", "add", dev, "type", "veth", "peer", "name", dev, "netns", &host.name,
        ])?;
        path.router
            .ip(&["addr", "add", &format!("{net}.2/24"), "dev", dev])?;
        path.router.ip(&["link", "set", dev, "up"])?;
    }
    let out = ns_command(
        &path.router,
        "sysctl",
        &["-q", "-w", "net.ipv4.ip_forward=1"],
    )
    .output()
    .map_err(|e| format!("sysctl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sysctl net.ipv4.ip_forward=1: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    path.hosts(["w7a", "w7b"], nets)?;
    measure(&path, secs)
}

/// iperf3's server in B, a UDP and a TCP run from A.
fn measure(path: &Path, secs: u32) -> Result<Vec<Sample>, String> {
    let server = ns_command(
        &path.b,
        "iperf3",
        &["-s", "-B", &path.b_addr, "-p", IPERF_PORT],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .map_err(|e| format!("cannot start iperf3 -s: {e}"))?;
    let server = Server(server);
    wait_listening(&path.b)?;
    let (secs_text, limit) = (secs.to_string(), Duration::from_secs(u64::from(secs) + 30));
    let common = ["-c", &path.b_addr, "-p", IPERF_PORT, "-t", &secs_text, "-J"];
    let udp_args = [&common[..], &["-u", "-l", "64", "-b", "0"][..]].concat();
    let udp = iperf(&path.a, &udp_args, limit)?;
    let tcp = iperf(&path.a, &common, limit)?;
    drop(server);
    let (received, sent) = udp_rates(&udp).ok_or_else(|| format!("iperf3 -u said:\n{udp}"))?;
    let gbits = tcp_rate(&tcp).ok_or_else(|| format!("iperf3 said:\n{tcp}"))?;
    Ok(vec![
        Sample::new("W7-route-udp64", "kpps", received / 1e3),
        Sample::new("W7-route-udp64-tx", "kpps", sent / 1e3),
        Sample::new("W7-route-tcp", "Gbit/s", gbits),
    ])
}

/// Wait until iperf3 listens in `ns` (asking `ss`, so no stray connection reaches it).
pub(super) fn wait_listening(ns: &Netns) -> Result<(), String> {
    let deadline = StdInstant::now() + START;
    let filter = format!("sport = :{IPERF_PORT}");
    while StdInstant::now() < deadline {
        let out = ns_command(ns, "ss", &["-H", "-l", "-t", "-n", &filter])
            .output()
            .map_err(|e| format!("ss: {e}"))?;
        if out.status.success() && !out.stdout.is_empty() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("iperf3 never listened on port {IPERF_PORT}"))
}

/// Run the iperf3 client in `ns`, killed after `limit`; its JSON report.
pub(super) fn iperf(ns: &Netns, args: &[&str], limit: Duration) -> Result<String, String> {
    let child = ns_command(ns, "iperf3", args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run iperf3: {e}"))?;
    let out = wait_limited(child, limit)?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "iperf3 {}: {}{}",
            args.join(" "),
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(text)
}

/// Wait for `child` (its output read as it comes), killing it after `limit`.
pub(super) fn wait_limited(mut child: Child, limit: Duration) -> Result<Output, String> {
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = StdInstant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if StdInstant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {} s", limit.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// (packets/s received, packets/s sent) from `iperf3 -u -J`: the receiver's count is
/// its packets less the ones it found lost.
fn udp_rates(json: &str) -> Option<(f64, f64)> {
    let report: serde_json::Value = serde_json::from_str(json).ok()?;
    let end = &report["end"];
    let received = &end["sum_received"];
    let got = received["packets"].as_f64()? - received["lost_packets"].as_f64()?;
    let sent = &end["sum_sent"];
    let sent_packets = sent["bytes"].as_f64()? / PAYLOAD as f64;
    let rate = |n: f64, s: &serde_json::Value| Some(n / s["seconds"].as_f64()?.max(1e-9));
    Some((rate(got, received)?, rate(sent_packets, sent)?))
}

/// Gbit/s the receiver counted, from `iperf3 -J` over TCP.
pub(super) fn tcp_rate(json: &str) -> Option<f64> {
    let report: serde_json::Value = serde_json::from_str(json).ok()?;
    Some(report["end"]["sum_received"]["bits_per_second"].as_f64()? / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf_reports_are_read() {
        let udp = r#"{"end": {
            "sum_sent": {"seconds": 2.0, "bytes": 12800, "packets": 200},
            "sum_received": {"seconds": 2.0, "bytes": 6400, "packets": 180, "lost_packets": 80}
        }}"#;
        assert_eq!(udp_rates(udp), Some((50.0, 100.0)));
        let tcp = r#"{"end": {"sum_received": {"bits_per_second": 2.5e9}}}"#;
        assert_eq!(tcp_rate(tcp), Some(2.5));
        assert_eq!(udp_rates("{}"), None);
        assert_eq!(tcp_rate("not json"), None);
    }
}
