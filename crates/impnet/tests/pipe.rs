//! Two runtimes joined by an in-memory pipe: the sockets API end to end without root.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::io::{ErrorKind, IoSlice, Read, Write};
use std::net::Ipv4Addr;
use std::time::Duration;

use impnet::core::{IfaceConfig, Secret, StackConfig};
use impnet::phy::pipe;
use impnet::wire::{ethernet, ipv4::Cidr};
use impnet::{IcmpSocket, Runtime, TcpListener, TcpStream, UdpSocket};

fn pair() -> (Runtime, Runtime) {
    let (a_end, b_end) = pipe(1514);
    let make = |end, last: u8, seed| {
        let rt = Runtime::with_secret(StackConfig::default(), Secret::from_bytes([seed; 16]))
            .expect("runtime");
        let mac = ethernet::Address([0x02, 0, 0, 0, 0, last]);
        let iface = rt.add_device(end, IfaceConfig::new(mac, 1500));
        rt.add_address(
            iface,
            Cidr {
                address: Ipv4Addr::new(192, 0, 2, last),
                prefix_len: 24,
            },
        );
        rt
    };
    (make(a_end, 1, 1), make(b_end, 2, 2))
}

#[test]
fn udp_and_ping_over_a_pipe() {
    let (a, b) = pair();
    let sa = UdpSocket::bind(&a, "192.0.2.1:1000").unwrap();
    let sb = UdpSocket::bind(&b, "192.0.2.2:2000").unwrap();
    sb.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    sa.send_to(b"over the pipe", "192.0.2.2:2000").unwrap();
    let mut buf = [0u8; 64];
    let (n, src) = sb.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"over the pipe");
    assert_eq!(src, "192.0.2.1:1000".parse().unwrap());
    let ping = IcmpSocket::bind(&a, 7).unwrap();
    let (reply, _) = ping
        .ping(
            Ipv4Addr::new(192, 0, 2, 2),
            1,
            b"abc",
            Duration::from_secs(3),
        )
        .unwrap();
    assert_eq!(reply.len, 3);
}

#[test]
fn tcp_transfer_over_a_pipe() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, "192.0.2.2:80").unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let expected = data.clone();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).unwrap();
        stream.write_all(b"thanks").unwrap();
        got
    });
    let mut client = TcpStream::connect(&a, "192.0.2.2:80").unwrap();
    assert_eq!(client.peer_addr().unwrap(), "192.0.2.2:80".parse().unwrap());
    client.write_all(&data).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = Vec::new();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    client.read_to_end(&mut reply).unwrap();
    assert_eq!(reply, b"thanks");
    assert!(server.join().unwrap() == expected);
}

#[test]
fn refused_and_stopped_runtime() {
    let (a, mut b) = pair();
    let err = TcpStream::connect(&a, "192.0.2.2:9").expect_err("nothing listens");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    let socket = UdpSocket::bind(&b, "192.0.2.2:53").unwrap();
    b.shutdown();
    let err = socket.recv_from(&mut [0u8; 8]).expect_err("stopped");
    assert_eq!(err.kind(), ErrorKind::NotConnected, "{err}");
    assert!(err.to_string().contains("shut down"));
}

#[test]
fn gather_writes_and_the_cork_over_a_pipe() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, "192.0.2.2:81").unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let head = IoSlice::new(b"head ");
        let body = IoSlice::new(b"body ");
        assert_eq!(stream.write_vectored(&[head, body]).unwrap(), 10);
        stream.set_cork(true).unwrap();
        assert!(stream.cork().unwrap());
        stream.write_all(b"corked ").unwrap();
        stream.write_all(b"pieces").unwrap();
        stream.set_cork(false).unwrap();
        assert!(!stream.cork().unwrap());
    });
    let mut client = TcpStream::connect(&a, "192.0.2.2:81").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"head body corked pieces");
    server.join().unwrap();
}
