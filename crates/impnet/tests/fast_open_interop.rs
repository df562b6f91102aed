//! TCP Fast Open (RFC 7413) between imp and the Linux kernel over a TAP, imp the
//! client: a Linux server in the namespace (`net.ipv4.tcp_fastopen=3`, its listener
//! with `TCP_FASTOPEN`) gives imp a cookie on the first connection, and takes imp's
//! request on the SYN of the second. Checked on both sides: imp's `tcp_info` says the
//! SYN's data was acknowledged, the kernel's `TcpExtTCPFastOpenPassive` counts one
//! connection, and the server read every request byte for byte. (The other way round,
//! curl's SYN data to `imp serve`, is in the CLI's `tap_cli.rs`.) Needs root, python3
//! and nstat; skips, saying why, without them.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::time::Duration;

use common::{Link, have};
use impnet::TcpStream;

/// The Linux server: accepts connections on `port` with Fast Open (a queue of 16),
/// reads each to its end and answers with the byte count and a digest of what it read.
const SERVER: &str = r#"
import hashlib, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, 16)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    c.sendall(("%d %s\n" % (len(data), hashlib.sha256(data).hexdigest())).encode())
    c.close()
"#;

/// One connection with `request` as the connect's data; returns whether the SYN's data
/// was acknowledged (imp's view) and the server's answer.
fn exchange(link: &Link, server: SocketAddr, request: &[u8]) -> (bool, String) {
    let (mut stream, taken) =
        TcpStream::connect_with_data(&link.rt, &server, request).expect("connect with data");
    assert_eq!(
        taken,
        request.len(),
        "the send buffer took the whole request"
    );
    let acked = stream.info().expect("tcp_info").syn_data_acked;
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("the server's answer");
    (acked, answer)
}

fn digest(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn imp_sends_its_request_on_the_syn_to_a_linux_server() {
    let Some(link) = Link::new(61, false) else {
        return;
    };
    for tool in ["python3", "nstat", "sysctl"] {
        if !have(tool) {
            return;
        }
    }
    // Server and client Fast Open in this namespace only (its own sysctl).
    let out = link.ns.exec("sysctl", &["-qw", "net.ipv4.tcp_fastopen=3"]);
    assert!(out.status.success(), "sysctl: {}", common::text(&out));
    let port = 8090;
    let mut server = link.ns.spawn(
        "python3",
        &["-u", "-c", SERVER, &link.kernel_addr.to_string(), "8090"],
    );
    let stdout = server.0.as_mut().unwrap().stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    assert_eq!(line, "listening\n", "the server did not start");
    let addr = SocketAddr::new(link.kernel_addr.into(), port);
    let passive_before = link.ns.counter("TcpExtTCPFastOpenPassive");

    // First: no cookie yet; the SYN asks for one, the request follows the handshake.
    let first = b"GET /first HTTP/1.0\r\n\r\n".to_vec();
    let (acked, answer) = exchange(&link, addr, &first);
    assert!(!acked, "no cookie yet, so no data on the first SYN");
    assert_eq!(answer, format!("{} {}\n", first.len(), digest(&first)));
    assert_eq!(
        link.ns.counter("TcpExtTCPFastOpenPassive"),
        passive_before,
        "the kernel took no SYN data yet"
    );

    // Second: the cookie from the first SYN-ACK; the request rides on the SYN (it fits
    // one segment) and the kernel hands it to the server before the handshake ends.
    let second: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
    let (acked, answer) = exchange(&link, addr, &second);
    assert!(acked, "the kernel acknowledged the SYN's data");
    assert_eq!(answer, format!("{} {}\n", second.len(), digest(&second)));
    assert_eq!(
        link.ns.counter("TcpExtTCPFastOpenPassive"),
        passive_before + 1,
        "the kernel counts one connection opened with data on its SYN"
    );
}
