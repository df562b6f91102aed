//! imp against the Linux kernel over a TAP, in namespaces the harness creates: ICMP echo
//! both ways, UDP both ways, and error paths. Needs root; skips (printing why) without.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

mod common;

use std::io::ErrorKind;
use std::time::Duration;

use common::{Link, have};
use impnet::{IcmpSocket, UdpSocket};

#[test]
fn linux_ping_gets_replies_from_imp() {
    let Some(link) = Link::new(1, false) else {
        return;
    };
    if !have("ping") {
        return;
    }
    let target = link.imp_addr.to_string();
    let out = link.ns.exec(
        "ping",
        &["-c", "3", "-i", "0.2", "-W", "2", "-s", "1000", &target],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ping failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("3 received"), "{text}");
}

#[test]
fn imp_pings_linux() {
    let Some(link) = Link::new(2, false) else {
        return;
    };
    let socket = IcmpSocket::bind(&link.rt, 0x1234).expect("bind");
    let payload: Vec<u8> = (0..56u8).collect();
    for seq in 1..=3 {
        // The round trip is wall-clock time: printed by `imp ping`, never asserted here.
        let (reply, _rtt) = socket
            .ping(link.kernel_addr, seq, &payload, Duration::from_secs(3))
            .expect("Linux answers the echo request");
        assert_eq!(reply.src, std::net::IpAddr::from(link.kernel_addr));
        assert_eq!(reply.seq_no, seq);
        assert_eq!(reply.len, payload.len());
    }
    // A large echo is fragmented by imp and reassembled by Linux, and back.
    let big = vec![0xa5u8; 4000];
    let (reply, _) = socket
        .ping(link.kernel_addr, 9, &big, Duration::from_secs(3))
        .expect("fragmented echo");
    assert_eq!(reply.len, big.len());
}

/// Python one-liners run in the namespace as the kernel-side peer.
const UDP_CLIENT: &str = "
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
for i in range(5):
    msg = b'hello imp %d ' % i + b'x' * (i * 300)
    s.sendto(msg, (sys.argv[1], 7))
    data, src = s.recvfrom(65536)
    assert data == msg, (data, msg)
    assert src == (sys.argv[1], 7), src
print('ok')
";

#[test]
fn udp_echo_from_linux_to_imp() {
    let Some(link) = Link::new(3, false) else {
        return;
    };
    if !have("python3") {
        return;
    }
    let socket = UdpSocket::bind(&link.rt, (link.imp_addr, 7)).expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let target = link.imp_addr.to_string();
    let client = link.ns.spawn("python3", &["-c", UDP_CLIENT, &target]);
    let mut buf = [0u8; 2048];
    for _ in 0..5 {
        let (n, src) = socket.recv_from(&mut buf).expect("datagram from Linux");
        socket.send_to(&buf[..n], src).expect("echo");
    }
    let out = client.wait();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ok"),
        "client: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const UDP_SERVER: &str = "
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9999))
s.settimeout(5)
print('ready', flush=True)
data, src = s.recvfrom(65536)
s.sendto(data.upper(), src)
";

#[test]
fn udp_from_imp_to_linux_and_back() {
    let Some(link) = Link::new(4, false) else {
        return;
    };
    if !have("python3") {
        return;
    }
    let kernel = link.kernel_addr.to_string();
    let mut server = link.ns.spawn("python3", &["-u", "-c", UDP_SERVER, &kernel]);
    wait_for_line(&mut server, "ready");
    let socket = UdpSocket::bind(&link.rt, (link.imp_addr, 0)).expect("bind");
    socket.connect((link.kernel_addr, 9999)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket.send(b"shout this").expect("send");
    let mut buf = [0u8; 64];
    let n = socket.recv(&mut buf).expect("reply");
    assert_eq!(&buf[..n], b"SHOUT THIS");
    assert_eq!(socket.peer_addr().unwrap(), (link.kernel_addr, 9999).into());
}

#[test]
fn udp_errors_port_in_use_unreachable_and_timeout() {
    let Some(link) = Link::new(5, false) else {
        return;
    };
    let a = UdpSocket::bind(&link.rt, (link.imp_addr, 5000)).expect("bind");
    let err = UdpSocket::bind(&link.rt, (link.imp_addr, 5000)).expect_err("port in use");
    assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
    let err = UdpSocket::bind(&link.rt, ("192.0.2.77", 5000)).expect_err("not our address");
    assert_eq!(err.kind(), ErrorKind::AddrNotAvailable, "{err}");
    // Nothing listens on the kernel side: ICMP port unreachable comes back.
    a.send_to(b"anyone?", (link.kernel_addr, 4)).expect("send");
    a.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let err = a.recv_from(&mut [0u8; 16]).expect_err("port unreachable");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    // Then nothing at all: the read times out.
    a.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let err = a.recv_from(&mut [0u8; 16]).expect_err("timeout");
    assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
    a.set_nonblocking(true).unwrap();
    let err = a.recv_from(&mut [0u8; 16]).expect_err("would block");
    assert_eq!(err.kind(), ErrorKind::WouldBlock, "{err}");
}

/// Read the child's stdout until a line containing `want`.
pub fn wait_for_line(child: &mut common::ChildGuard, want: &str) {
    use std::io::BufRead;
    let stdout = child
        .0
        .as_mut()
        .expect("child")
        .stdout
        .as_mut()
        .expect("piped stdout");
    let mut reader = std::io::BufReader::new(stdout);
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).expect("read child output");
        assert!(n > 0, "child exited before printing {want:?}");
        if line.contains(want) {
            return;
        }
    }
}
