//! imp downloads from `python3 -m http.server` in the namespace over a TAP, plain (100
//! MiB) and with imp's frames impaired by 20 ms and 1% loss each way; sha256 checked,
//! and the kernel's `ss -ti` shows window scaling with imp (imp's own `tcp_info`
//! shows SACK, timestamps and window scaling negotiated); and over IPv6 from
//! `http.server --bind ::`. Needs root; skips without.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use common::{ChildGuard, Link, have};
use impnet::TcpStream;
use impnet::phy::LinkConfig;
use sha2::{Digest, Sha256};

fn pattern(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

struct Dir(std::path::PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Start `python3 -m http.server` on the kernel side (bound to `bind`) serving `size`
/// bytes as /file.bin; returns its guard, the directory and the file's sha256.
fn python_server(link: &Link, bind: &str, size: usize) -> (ChildGuard, Dir, [u8; 32]) {
    // One directory per server: tests run in parallel, and two serving the same size
    // must not rewrite (truncate) each other's file while the other serves it.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("imp-pyhttp-{}-{n}-{size}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = pattern(size);
    std::fs::write(dir.join("file.bin"), &data).unwrap();
    let sum: [u8; 32] = Sha256::digest(&data).into();
    let mut server = link.ns.spawn(
        "python3",
        &[
            "-u",
            "-m",
            "http.server",
            "8080",
            "--bind",
            bind,
            "--directory",
            dir.to_str().unwrap(),
        ],
    );
    // http.server prints "Serving HTTP on ..." once it listens.
    let stdout = server.0.as_mut().unwrap().stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    assert!(line.contains("Serving HTTP"), "{line}");
    (server, Dir(dir), sum)
}

/// GET /file.bin from `ip`:8080 over imp; returns (sha256 of the body, body length,
/// the stream).
fn get(link: &Link, ip: IpAddr, timeout: Duration) -> ([u8; 32], usize, TcpStream) {
    let addr = SocketAddr::new(ip, 8080);
    let mut stream = TcpStream::connect_timeout(&link.rt, &addr, Duration::from_secs(5))
        .expect("connect to http.server");
    stream.set_read_timeout(Some(timeout)).unwrap();
    let request = format!("GET /file.bin HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut head = Vec::new();
    let body_start = loop {
        let n = stream.read(&mut buf).expect("response head");
        assert!(n > 0, "connection closed before the response head");
        head.extend_from_slice(&buf[..n]);
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let text = String::from_utf8_lossy(&head[..body_start]).to_string();
    assert!(
        text.starts_with("HTTP/1.0 200") || text.starts_with("HTTP/1.1 200"),
        "{text}"
    );
    let mut hasher = Sha256::new();
    hasher.update(&head[body_start..]);
    let mut len = head.len() - body_start;
    loop {
        let n = stream.read(&mut buf).expect("body");
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        len += n;
    }
    (hasher.finalize().into(), len, stream)
}

/// `ss -tin` in the namespace, sampled until it shows the connection with imp.
fn sample_ss(link: &Link, until: Instant) -> String {
    let imp = link.imp_addr.to_string();
    while Instant::now() < until {
        let out = link.ns.exec("ss", &["-tin", "dst", &imp]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("ESTAB") && text.contains("wscale") {
            return text;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    String::new()
}

fn download(link: Link, size: usize, timeout: Duration) {
    if !have("python3") || !have("ss") {
        return;
    }
    let (server, _dir, sum) = python_server(&link, &link.kernel_addr.to_string(), size);
    let start = Instant::now();
    let ((got, len, stream), ss) = std::thread::scope(|s| {
        let sampler = s.spawn(|| sample_ss(&link, Instant::now() + timeout));
        (
            get(&link, link.kernel_addr.into(), timeout),
            sampler.join().unwrap(),
        )
    });
    let secs = start.elapsed().as_secs_f64();
    if len != size {
        // The server ended the body early: what it said (an exception?) tells why.
        let out = common::wait_limited(server, Duration::from_millis(200));
        panic!(
            "short download: {len} of {size} bytes in {secs:.2} s; imp's side: {:?}\n\
             http.server: {}\nss: {ss}",
            stream.info(),
            common::text(&out)
        );
    }
    assert!(got == sum, "sha256 of the download differs");
    println!(
        "imp downloaded {} MiB from http.server in {secs:.2} s ({:.1} Mbit/s)",
        size >> 20,
        size as f64 * 8.0 / secs / 1e6
    );
    let info = stream.info().expect("tcp_info");
    assert!(
        info.sack && info.timestamps && info.wscale.is_some(),
        "imp's side: {info:?}"
    );
    // The kernel's view. (iproute2 6.1's ss prints no `ts`/`sack` on newer kernels even
    // between two Linux sockets; `wscale` it prints.)
    assert!(ss.contains("wscale:"), "ss -ti: {ss:?}");
    println!("kernel side: {}", ss.lines().nth(2).unwrap_or("").trim());
}

#[test]
fn imp_downloads_100_mb_from_python_http_server() {
    let Some(link) = Link::new(51, true) else {
        return;
    };
    download(link, 100 << 20, Duration::from_secs(20));
}

#[test]
fn imp_downloads_from_python_http_server_impaired() {
    let impair = LinkConfig::default()
        .with_delay(impnet::core::Duration::from_millis(20))
        .with_loss(0.01);
    let Some(link) = Link::impaired(52, impair) else {
        return;
    };
    download(link, 20 << 20, Duration::from_secs(30));
}

#[test]
fn imp_downloads_over_ipv6_from_python_http_server_on_any6() {
    let Some(link) = Link::new(53, true) else {
        return;
    };
    if !have("python3") || !have("sysctl") {
        return;
    }
    for key in ["all", "default", &link.tap_name] {
        let out = link.ns.exec(
            "sysctl",
            &["-qw", &format!("net.ipv6.conf.{key}.disable_ipv6=0")],
        );
        assert!(out.status.success(), "sysctl: {}", common::text(&out));
    }
    let kernel: Ipv6Addr = "fd00:53::1".parse().unwrap();
    let imp: Ipv6Addr = "fd00:53::2".parse().unwrap();
    link.ns.ip(&[
        "-6",
        "addr",
        "add",
        &format!("{kernel}/64"),
        "dev",
        &link.tap_name,
        "nodad",
    ]);
    link.rt
        .add_address6(link.iface, impnet::wire::ipv6::Cidr::new(imp, 64).unwrap());
    // Duplicate address detection: about a second.
    let give_up = Instant::now() + Duration::from_secs(10);
    while link.rt.with_stack(|s, _| {
        s.ipv6_addresses(link.iface)
            .iter()
            .any(|a| a.cidr.address == imp && a.state != impnet::core::AddrState::Preferred)
    }) {
        assert!(Instant::now() < give_up, "imp's {imp} never left DAD");
        std::thread::sleep(Duration::from_millis(20));
    }
    let size = 20 << 20;
    let (_server, _dir, sum) = python_server(&link, "::", size);
    let (got, len, stream) = get(&link, kernel.into(), Duration::from_secs(30));
    assert_eq!(len, size);
    assert!(got == sum, "sha256 of the download over IPv6 differs");
    let info = stream.info().expect("tcp_info");
    assert!(info.sack && info.wscale.is_some(), "imp's side: {info:?}");
}
