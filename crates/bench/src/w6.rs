//! W6: HTTP. `wrk` (one thread) against `imp serve --http` over a TAP and against nginx
//! (Debian's nginx-light, one worker, `access_log off`) over a veth pair, each server in
//! a network namespace the bench creates and deletes, serving the same two files: 1 KiB
//! and 1 MiB, each with keep-alive at 1 and at 50 connections and with one connection
//! per request (`Connection: close`, 50 at a time).
//!
//! Rows per cell (`W6-1k-ka1`, `W6-1k-ka50`, `W6-1k-close`, then `1m`): requests/s,
//! body Gbit/s, errors (wrk's socket errors and non-2xx/3xx answers) and the p99
//! latency in ms. imp's figures stand in the `imp` column, nginx's in `linux`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant as StdInstant};

use super::Sample;
use super::w5::Netns;

/// The files served: name, size.
const FILES: [(&str, usize); 2] = [("1k", 1024), ("1m", 1 << 20)];

/// The load shapes: row tag, connections, one connection per request.
const SHAPES: [(&str, u32, bool); 3] =
    [("ka1", 1, false), ("ka50", 50, false), ("close", 50, true)];

/// How long a server may take to start listening.
const START: Duration = Duration::from_secs(10);

/// Why W6 cannot run here, if it cannot: what is missing.
pub(crate) fn unavailable() -> Option<String> {
    if let Some(reason) = super::w5::unavailable() {
        return Some(reason);
    }
    let missing: Vec<&str> = ["wrk", "nginx"]
        .into_iter()
        .filter(|tool| !installed(tool))
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "{} not installed (apt-get install -y wrk nginx-light)",
            missing.join(" and ")
        ));
    }
    if let Err(e) = imp_binary() {
        return Some(e);
    }
    None
}

pub(super) fn installed(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The `imp` binary to run `imp serve` (and `imp route`, ...) from: see `imp_bin`.
pub(super) fn imp_binary() -> Result<PathBuf, String> {
    super::imp_bin::path()
}

/// A directory holding the served files, removed on drop.
struct Files(PathBuf);

impl Files {
    fn new() -> Result<Files, String> {
        let dir = std::env::temp_dir().join(format!("imp-bench-w6-{}", std::process::id()));
        let www = dir.join("www");
        std::fs::create_dir_all(&www).map_err(|e| format!("{}: {e}", www.display()))?;
        for (name, size) in FILES {
            let path = www.join(format!("{name}.bin"));
            std::fs::write(&path, super::pattern(size))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(Files(dir))
    }

    fn www(&self) -> PathBuf {
        self.0.join("www")
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server process, stopped (SIGTERM, then SIGKILL) on drop.
pub(super) struct Server(pub(super) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.0.id() as i32;
        // SAFETY: kill has no memory arguments; the pid is our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = StdInstant::now() + Duration::from_secs(5);
        while StdInstant::now() < deadline {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// W6 on imp: `imp serve --http` on a TAP in a namespace, wrk in the same namespace.
pub(crate) fn imp(secs: u32) -> Result<Vec<Sample>, String> {
    let files = Files::new()?;
    let ns = Netns::new()?;
    ns.ip(&["tuntap", "add", "dev", "imp0", "mode", "tap"])?;
    ns.ip(&["addr", "add", "10.209.1.1/24", "dev", "imp0"])?;
    ns.ip(&["link", "set", "imp0", "up"])?;
    let imp = imp_binary()?;
    let www = files.www();
    let args = [
        "serve",
        "--tap",
        "imp0",
        "--addr",
        "10.209.1.2/24",
        "--http",
        www.to_str().ok_or("the temporary directory is not UTF-8")?,
    ];
    let server = imp_serve(&ns, &imp, &args, "http (80)")?;
    let samples = cells(&ns, "10.209.1.2", secs);
    drop(server);
    samples
}

/// Start `imp args...` (an `imp serve`) in `ns`; its startup line must name `service`.
/// Its output is read on to the end, so its closing line finds the pipe open.
pub(super) fn imp_serve(
    ns: &Netns,
    imp: &Path,
    args: &[&str],
    service: &str,
) -> Result<Server, String> {
    let mut child = ns_command(ns, imp.to_str().unwrap_or("imp"), args)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start imp serve: {e}"))?;
    let stdout = child.stdout.take().ok_or("imp serve has no stdout")?;
    let server = Server(child);
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .map_err(|e| format!("imp serve: {e}"))?;
    if !line.contains(service) {
        return Err(format!("imp serve did not start: {line:?}"));
    }
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    Ok(server)
}

/// W6 on nginx: nginx in one namespace, wrk in another, joined by a veth pair.
pub(crate) fn nginx(secs: u32) -> Result<Vec<Sample>, String> {
    let files = Files::new()?;
    let server_ns = Netns::new()?;
    let client_ns = Netns::new()?;
    server_ns.veth_to(&client_ns, "10.209.2")?;
    let conf = nginx_conf(&files.0, &files.www(), "10.209.2.1:80")?;
    let child = ns_command(
        &server_ns,
        "nginx",
        &["-c", &conf, "-p", &files.0.to_string_lossy()],
    )
    .spawn()
    .map_err(|e| format!("cannot start nginx: {e}"))?;
    let server = Server(child);
    wait_listening(&client_ns, "10.209.2.1:80")?;
    let samples = cells(&client_ns, "10.209.2.1", secs);
    drop(server);
    samples
}

/// An nginx configuration for one worker in the foreground, its files under `dir`.
pub(super) fn nginx_conf(dir: &Path, www: &Path, listen: &str) -> Result<String, String> {
    let d = dir.display();
    let text = format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  tcp_nodelay on;\n\
         keepalive_requests 1000000;\n  default_type application/octet-stream;\n\
         client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n\
         scgi_temp_path {d}/scgi;\n\
         server {{ listen {listen}; root {}; }}\n}}\n",
        www.display()
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path.to_string_lossy().into_owned())
}

/// `ip netns exec NS program args...`.
pub(super) fn ns_command(ns: &Netns, program: &str, args: &[&str]) -> Command {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &ns.name, program])
        .args(args)
        .stdin(Stdio::null());
    command
}

/// Wait until something accepts connections on `addr` inside `ns`.
fn wait_listening(ns: &Netns, addr: &'static str) -> Result<(), String> {
    ns.enter(move || {
        let deadline = StdInstant::now() + START;
        let target = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
        while StdInstant::now() < deadline {
            if std::net::TcpStream::connect_timeout(&target, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("nothing listens on {addr}"))
    })
}

/// Every cell against the server at `host`, wrk running in `ns`.
fn cells(ns: &Netns, host: &str, secs: u32) -> Result<Vec<Sample>, String> {
    let mut samples = Vec::new();
    for (file, size) in FILES {
        for (shape, connections, close) in SHAPES {
            let url = format!("http://{host}/{file}.bin");
            let result = wrk(ns, &url, connections, close, secs)?;
            let name = format!("W6-{file}-{shape}");
            let gbits = result.requests_per_sec * size as f64 * 8.0 / 1e9;
            samples.push(Sample::new(name.clone(), "req/s", result.requests_per_sec));
            samples.push(Sample::new(format!("{name}-gbit"), "Gbit/s", gbits));
            samples.push(Sample::new(format!("{name}-err"), "errors", result.errors));
            samples.push(Sample::new(format!("{name}-p99"), "p99 ms", result.p99_ms));
        }
    }
    Ok(samples)
}

/// What one wrk run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct WrkResult {
    pub(super) requests_per_sec: f64,
    /// Socket errors (connect, read, write, timeout) plus non-2xx/3xx answers.
    pub(super) errors: f64,
    pub(super) p99_ms: f64,
}

/// Run wrk (one thread) in `ns` for `secs` seconds.
fn wrk(
    ns: &Netns,
    url: &str,
    connections: u32,
    close: bool,
    secs: u32,
) -> Result<WrkResult, String> {
    let (c, d) = (connections.to_string(), format!("{secs}s"));
    let mut args = vec!["-t", "1", "-c", &c, "-d", &d, "--latency"];
    if close {
        args.extend(["-H", "Connection: close"]);
    }
    args.push(url);
    let out = ns_command(ns, "wrk", &args)
        .output()
        .map_err(|e| format!("cannot run wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "wrk {url}: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    parse_wrk(&text).ok_or_else(|| format!("cannot read wrk's report:\n{text}"))
}

/// Requests/s, errors and p99 latency from wrk's `--latency` report.
pub(super) fn parse_wrk(text: &str) -> Option<WrkResult> {
    let mut result = WrkResult {
        requests_per_sec: f64::NAN,
        errors: 0.0,
        p99_ms: f64::NAN,
    };
    for line in text.lines().map(str::trim) {
        if let Some(rate) = line.strip_prefix("Requests/sec:") {
            result.requests_per_sec = rate.trim().parse().ok()?;
        } else if let Some(latency) = line.strip_prefix("99%") {
            result.p99_ms = millis(latency.trim())?;
        } else if let Some(errors) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            for part in errors.split(',') {
                let count = part.split_whitespace().nth(1)?;
                result.errors += count.parse::<f64>().ok()?;
            }
        } else if let Some(count) = line.strip_prefix("Non-2xx or 3xx responses:") {
            result.errors += count.trim().parse::<f64>().ok()?;
        }
    }
    (result.requests_per_sec.is_finite() && result.p99_ms.is_finite()).then_some(result)
}

/// wrk's latency (`812.00us`, `1.20ms`, `2.00s`) in milliseconds.
fn millis(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let value: f64 = text[..split].parse().ok()?;
    match &text[split..] {
        "us" => Some(value / 1000.0),
        "ms" => Some(value),
        "s" => Some(value * 1000.0),
        "m" => Some(value * 60_000.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_reports_are_read() {
        let report = "Running 1s test @ http://10.0.0.2/1k.bin
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.10ms  200.00us   5.00ms   90.00%
  Latency Distribution
     50%  900.00us
     99%    2.50ms
  9000 requests in 1.00s, 10.00MB read
  Socket errors: connect 1, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 4
Requests/sec:   9000.50
Transfer/sec:     10.00MB
";
        let r = parse_wrk(report).unwrap();
        assert_eq!(r.requests_per_sec, 9000.5);
        assert_eq!(r.errors, 10.0);
        assert_eq!(r.p99_ms, 2.5);
        assert_eq!(millis("812.00us"), Some(0.812));
        assert_eq!(millis("2.00s"), Some(2000.0));
        assert!(parse_wrk("garbage").is_none());
    }
}
