//! imp's TCP against the Linux kernel over a TAP, in namespaces the harness creates:
//! `curl` downloads from imp, imp downloads from a Python server, error paths. Needs
//! root; skips (printing why) without.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use common::{ChildGuard, Link, have};
use impnet::{TcpListener, TcpStream};

/// Deterministic test data: not all one byte, so reordering or misplacement shows.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x1234_5678;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Serve one HTTP/1.0-style response with `body` to each of `count` connections.
fn serve_http(listener: TcpListener, body: Vec<u8>, count: usize) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for _ in 0..count {
            let (mut stream, _) = listener.accept().expect("accept");
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).expect("read request");
                assert!(n > 0, "request cut short");
                request.extend_from_slice(&buf[..n]);
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).expect("write head");
            stream.write_all(&body).expect("write body");
        }
    })
}

fn curl_download(offloads: bool, subnet: u8) {
    let Some(link) = Link::new(subnet, offloads) else {
        return;
    };
    if !have("curl") {
        return;
    }
    let body = pattern(4 << 20);
    let listener = TcpListener::bind(&link.rt, (link.imp_addr, 80)).expect("listen");
    let server = serve_http(listener, body.clone(), 1);
    let url = format!("http://{}/file", link.imp_addr);
    let out = link.ns.exec("curl", &["-sS", "--max-time", "20", &url]);
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len(), body.len());
    assert!(out.stdout == body, "downloaded bytes differ");
    server.join().expect("server thread");
}

#[test]
fn curl_downloads_from_imp() {
    curl_download(false, 21);
}

#[test]
fn curl_downloads_from_imp_with_offloads() {
    curl_download(true, 22);
}

/// Sends argv[2] bytes of the same pattern to each connection, then closes.
const PY_SOURCE: &str = "
import socket, sys
n = int(sys.argv[2])
x = 0x12345678
out = bytearray(n)
for i in range(n):
    x ^= (x << 13) & 0xffffffff
    x ^= x >> 17
    x ^= (x << 5) & 0xffffffff
    out[i] = x & 0xff
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 8000))
s.listen(1)
print('ready', flush=True)
c, _ = s.accept()
c.sendall(out)
c.close()
";

fn download_from_linux(offloads: bool, subnet: u8) {
    let Some(link) = Link::new(subnet, offloads) else {
        return;
    };
    if !have("python3") {
        return;
    }
    let len = 4 << 20;
    let kernel = link.kernel_addr.to_string();
    let mut server = link.ns.spawn(
        "python3",
        &["-u", "-c", PY_SOURCE, &kernel, &len.to_string()],
    );
    wait_ready(&mut server);
    let addr = SocketAddr::from((link.kernel_addr, 8000));
    let mut stream =
        TcpStream::connect_timeout(&link.rt, &addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut got = Vec::new();
    stream.read_to_end(&mut got).expect("read to end");
    assert_eq!(got.len(), len);
    assert!(got == pattern(len), "received bytes differ");
    let info = stream.info().expect("info");
    assert!(
        info.sack && info.timestamps && info.wscale.is_some(),
        "{info:?}"
    );
    // With no blocking call running any more, the loop thread serves the TAP again.
    // (Whether the blocked calls slept on the TAP themselves, the runtime's
    // `device_waits`, is scheduling, not behaviour: the benches look at it.)
    if have("ping") {
        let target = link.imp_addr.to_string();
        let out = link
            .ns
            .exec("ping", &["-c", "2", "-i", "0.2", "-W", "2", &target]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("2 received"), "{text}");
    }
}

#[test]
fn imp_downloads_from_linux() {
    download_from_linux(false, 23);
}

#[test]
fn imp_downloads_from_linux_with_offloads() {
    download_from_linux(true, 24);
}

#[test]
fn tcp_errors_refused_in_use_reset_and_timeouts() {
    let Some(link) = Link::new(25, false) else {
        return;
    };
    // Connection refused: nothing listens on the kernel side.
    let addr = SocketAddr::from((link.kernel_addr, 4));
    let err =
        TcpStream::connect_timeout(&link.rt, &addr, Duration::from_secs(5)).expect_err("refused");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    // Port in use.
    let _listener = TcpListener::bind(&link.rt, (link.imp_addr, 81)).expect("listen");
    let err = TcpListener::bind(&link.rt, (link.imp_addr, 81)).expect_err("in use");
    assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
    // A connect to a neighbour that never answers gives up at the timeout.
    let silent = SocketAddr::from(([10, 202, 25, 99], 80));
    let err = TcpStream::connect_timeout(&link.rt, &silent, Duration::from_millis(500))
        .expect_err("no answer");
    assert!(
        matches!(err.kind(), ErrorKind::TimedOut | ErrorKind::HostUnreachable),
        "{err}"
    );
    if !have("python3") {
        return;
    }
    // Reset by peer: the kernel side closes with SO_LINGER 0 (RST) once it has read.
    let script = "
import socket, struct, sys
s = socket.socket()
s.bind((sys.argv[1], 8001))
s.listen(1)
print('ready', flush=True)
c, _ = s.accept()
c.recv(100)
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
c.close()
";
    let kernel = link.kernel_addr.to_string();
    let mut server = link.ns.spawn("python3", &["-u", "-c", script, &kernel]);
    wait_ready(&mut server);
    let mut stream = TcpStream::connect(&link.rt, (link.kernel_addr, 8001)).expect("connect");
    // Idle: a read times out.
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let err = stream.read(&mut [0u8; 16]).expect_err("nothing to read");
    assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
    stream.write_all(b"bye").unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let err = stream.read(&mut [0u8; 16]).expect_err("reset");
    assert_eq!(err.kind(), ErrorKind::ConnectionReset, "{err}");
}

/// Echo through imp: Linux connects, sends, half-closes; imp echoes and closes.
#[test]
fn echo_with_half_close() {
    let Some(link) = Link::new(26, false) else {
        return;
    };
    if !have("python3") {
        return;
    }
    let listener = TcpListener::bind(&link.rt, (link.imp_addr, 7)).expect("listen");
    let server = std::thread::spawn(move || {
        let (stream, peer) = listener.accept().expect("accept");
        assert_eq!(stream.peer_addr().unwrap(), peer);
        stream.set_nodelay(true).unwrap();
        assert!(stream.nodelay().unwrap());
        let mut reader = &stream;
        let mut writer = &stream;
        std::io::copy(&mut reader, &mut writer).expect("echo");
        stream.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let script = "
import socket, sys
s = socket.create_connection((sys.argv[1], 7), timeout=10)
data = bytes(range(256)) * 2000
s.sendall(data)
s.shutdown(socket.SHUT_WR)
got = bytearray()
while True:
    b = s.recv(65536)
    if not b: break
    got += b
assert got == data, len(got)
print('ok')
";
    let target = link.imp_addr.to_string();
    let out = link.ns.exec("python3", &["-c", script, &target]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ok"),
        "client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.join().expect("server");
}

fn wait_ready(child: &mut ChildGuard) {
    use std::io::BufRead;
    let stdout = child
        .0
        .as_mut()
        .expect("child")
        .stdout
        .as_mut()
        .expect("piped");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read");
    assert!(line.contains("ready"), "server did not start: {line:?}");
}
