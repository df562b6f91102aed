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
        // A record's end (MSG_EOR) splits segments, never the byte stream.
        stream.write_all(b" record").unwrap();
        stream.end_record().unwrap();
        stream.write_all(b" next").unwrap();
    });
    let mut client = TcpStream::connect(&a, "192.0.2.2:81").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"head body corked pieces record next");
    server.join().unwrap();
}

#[test]
fn tcp_fast_open_over_a_pipe() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, "192.0.2.2:80").unwrap();
    listener.set_fast_open(16).unwrap();
    let server = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 5];
            stream.read_exact(&mut request).unwrap();
            stream.write_all(&request).unwrap();
        }
    });
    let server_addr = "192.0.2.2:80".parse().unwrap();
    for (i, request) in [b"first", b"again"].into_iter().enumerate() {
        let (mut client, taken) = TcpStream::connect_with_data(&a, &server_addr, request).unwrap();
        assert_eq!(taken, 5);
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut echo = [0u8; 5];
        client.read_exact(&mut echo).unwrap();
        assert_eq!(&echo, request);
        // The first connection asked for a cookie; the second sent its data on the SYN.
        let active = a.with_stack(|s, _| s.tcp_stats().fast_open_active);
        assert_eq!(active, i as u64);
    }
    server.join().unwrap();
    let accepted = b.with_stack(|s, _| s.tcp_stats().fast_open_accepted);
    assert_eq!(accepted, 1);
}

#[cfg(feature = "tokio")]
#[test]
fn async_tcp_fast_open_over_a_pipe() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (a, b) = pair();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = impnet::tokio::TcpListener::bind(&b, "192.0.2.2:81").unwrap();
        listener.set_fast_open(4).unwrap();
        let server = async {
            for _ in 0..2 {
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut request = [0u8; 4];
                stream.read_exact(&mut request).await.unwrap();
                stream.write_all(&request).await.unwrap();
            }
        };
        let client = async {
            for request in [b"ping", b"pong"] {
                let (mut stream, taken) =
                    impnet::tokio::TcpStream::connect_with_data(&a, "192.0.2.2:81", request)
                        .await
                        .unwrap();
                assert_eq!(taken, 4);
                let mut echo = [0u8; 4];
                stream.read_exact(&mut echo).await.unwrap();
                assert_eq!(&echo, request);
            }
        };
        tokio::time::timeout(Duration::from_secs(30), async {
            tokio::join!(server, client)
        })
        .await
        .expect("exchange timed out");
    });
    assert_eq!(a.with_stack(|s, _| s.tcp_stats().fast_open_active), 1);
    assert_eq!(b.with_stack(|s, _| s.tcp_stats().fast_open_accepted), 1);
}
