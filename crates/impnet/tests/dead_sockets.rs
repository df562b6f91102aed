//! Every socket call on a dead connection returns the `io::ErrorKind` a `std::net`
//! program gets from Linux in the same case (the table is on `error::tcp`): reset by
//! the peer, refused, timed out, unreachable, after our own `shutdown(Write)`, after
//! the end of the stream, and on sockets whose runtime has stopped. Two runtimes
//! joined by an in-memory pipe; no root.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use impnet::core::tcp::TcpState;
use impnet::core::{IfaceConfig, Secret, StackConfig};
use impnet::phy::pipe;
use impnet::wire::{ethernet, ipv4::Cidr};
use impnet::{IcmpSocket, Runtime, TcpListener, TcpStream, UdpSocket};

const B: &str = "192.0.2.2:80";

fn pair_with(a_config: StackConfig) -> (Runtime, Runtime) {
    let (a_end, b_end) = pipe(1514);
    let make = |end, last: u8, config| {
        let rt = Runtime::with_secret(config, Secret::from_bytes([last; 16])).expect("runtime");
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
    (
        make(a_end, 1, a_config),
        make(b_end, 2, StackConfig::default()),
    )
}

fn pair() -> (Runtime, Runtime) {
    pair_with(StackConfig::default())
}

/// A connected to B: (client on A, server on B, B's listener).
fn connected(a: &Runtime, b: &Runtime) -> (TcpStream, TcpStream, TcpListener) {
    let listener = TcpListener::bind(b, B).unwrap();
    let client = TcpStream::connect(a, B).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server, listener)
}

/// Wait (without asserting on how long) until the connection has ended; the bound
/// only turns a hang into a failure.
fn wait_closed(stream: &TcpStream) {
    let give_up = Instant::now() + Duration::from_secs(60);
    while stream.info().map(|i| i.state) != Some(TcpState::Closed) {
        assert!(Instant::now() < give_up, "the connection never ended");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn kind<T: std::fmt::Debug>(result: std::io::Result<T>) -> ErrorKind {
    let e = result.expect_err("an error");
    assert!(!e.to_string().is_empty());
    e.kind()
}

/// The calls whose answer does not depend on how the connection ended.
fn check_ended(stream: &TcpStream, case: &str) {
    assert_eq!(
        kind(stream.peer_addr()),
        ErrorKind::NotConnected,
        "{case}: peer_addr"
    );
    assert_eq!(
        stream.local_addr().unwrap().ip().to_string(),
        "192.0.2.1",
        "{case}: local_addr"
    );
    assert!(stream.set_nodelay(true).is_ok(), "{case}: set_nodelay");
    assert!(
        stream
            .set_read_timeout(Some(Duration::from_secs(1)))
            .is_ok(),
        "{case}"
    );
    assert!((&*stream).flush().is_ok(), "{case}: flush");
    for how in [Shutdown::Write, Shutdown::Read, Shutdown::Both] {
        assert_eq!(
            kind(stream.shutdown(how)),
            ErrorKind::NotConnected,
            "{case}: shutdown({how:?})"
        );
    }
}

#[test]
fn reset_by_peer_is_reported_once_to_a_read_then_end_of_stream_and_broken_pipe() {
    let (a, b) = pair();
    let (client, server, _l) = connected(&a, &b);
    server.abort().unwrap();
    let mut buf = [0u8; 16];
    // The first read waits for the RST and reports it.
    assert_eq!(
        kind((&client).read(&mut buf)),
        ErrorKind::ConnectionReset,
        "first read"
    );
    assert_eq!((&client).read(&mut buf).unwrap(), 0, "second read");
    assert_eq!((&client).read(&mut buf).unwrap(), 0, "third read");
    assert_eq!(kind((&client).write(b"x")), ErrorKind::BrokenPipe);
    assert_eq!(kind((&client).write(b"x")), ErrorKind::BrokenPipe);
    assert!(client.take_error().unwrap().is_none());
    check_ended(&client, "after RST");
}

#[test]
fn reset_by_peer_is_reported_once_to_a_write_then_broken_pipe() {
    let (a, b) = pair();
    let (client, server, _l) = connected(&a, &b);
    server.abort().unwrap();
    wait_closed(&client);
    // A clone shares the report: whichever call comes first gets it.
    let clone = client.try_clone().unwrap();
    assert_eq!(kind((&client).write(b"x")), ErrorKind::ConnectionReset);
    assert_eq!(kind((&clone).write(b"x")), ErrorKind::BrokenPipe);
    assert_eq!(kind((&client).write_all(b"xyz")), ErrorKind::BrokenPipe);
    assert_eq!((&clone).read(&mut [0u8; 4]).unwrap(), 0);
    check_ended(&client, "after RST, writing");
}

#[test]
fn take_error_reports_the_reset_once() {
    let (a, b) = pair();
    let (client, server, _l) = connected(&a, &b);
    assert!(client.take_error().unwrap().is_none(), "open: no error");
    server.abort().unwrap();
    wait_closed(&client);
    let e = client.take_error().unwrap().expect("the reset");
    assert_eq!(e.kind(), ErrorKind::ConnectionReset);
    assert!(client.take_error().unwrap().is_none(), "reported once");
    assert_eq!((&client).read(&mut [0u8; 4]).unwrap(), 0);
    assert_eq!(kind((&client).write(b"x")), ErrorKind::BrokenPipe);
}

#[test]
fn refused_and_unreachable_connects() {
    let (a, mut b) = pair();
    assert_eq!(
        kind(TcpStream::connect(&a, "192.0.2.2:9")),
        ErrorKind::ConnectionRefused
    );
    // Bad destinations, refused before anything is sent.
    assert_eq!(
        kind(TcpStream::connect(&a, "192.0.2.255:80")),
        ErrorKind::NetworkUnreachable
    );
    assert_eq!(
        kind(TcpStream::connect(&a, "198.51.100.1:80")),
        ErrorKind::NetworkUnreachable
    );
    assert_eq!(
        kind(TcpStream::connect(&a, "192.0.2.2:0")),
        ErrorKind::AddrNotAvailable
    );
    assert_eq!(
        kind(TcpListener::bind(&a, "192.0.2.2:80")),
        ErrorKind::AddrNotAvailable
    );
    assert_eq!(
        kind(TcpListener::bind(&a, "192.0.2.1:0")),
        ErrorKind::InvalidInput
    );
    let _held = TcpListener::bind(&a, "192.0.2.1:80").unwrap();
    assert_eq!(
        kind(TcpListener::bind(&a, "192.0.2.1:80")),
        ErrorKind::AddrInUse
    );
    // Nobody answers ARP for an address on the link: host unreachable; a connect
    // bounded by a timeout gives up first with TimedOut.
    b.shutdown();
    let addr: SocketAddr = "192.0.2.3:80".parse().unwrap();
    assert_eq!(
        kind(TcpStream::connect_timeout(
            &a,
            &addr,
            Duration::from_millis(100)
        )),
        ErrorKind::TimedOut
    );
    assert_eq!(
        kind(TcpStream::connect(&a, addr)),
        ErrorKind::HostUnreachable
    );
}

#[test]
fn a_connection_that_times_out_reports_timed_out_once() {
    let mut config = StackConfig::default();
    config.tcp.user_timeout = Some(impnet::core::Duration::from_millis(300));
    let (a, mut b) = pair_with(config);
    let (client, _server, _l) = connected(&a, &b);
    // The peer goes silent: A's data is never acknowledged.
    b.shutdown();
    (&client).write_all(b"into the void").unwrap();
    wait_closed(&client);
    let mut buf = [0u8; 4];
    assert_eq!(kind((&client).read(&mut buf)), ErrorKind::TimedOut);
    assert_eq!((&client).read(&mut buf).unwrap(), 0);
    assert_eq!(kind((&client).write(b"x")), ErrorKind::BrokenPipe);
    check_ended(&client, "after a timeout");
}

#[test]
fn write_after_our_shutdown_is_broken_pipe_and_reads_go_on() {
    let (a, b) = pair();
    let (client, server, _l) = connected(&a, &b);
    client.shutdown(Shutdown::Write).unwrap();
    client.shutdown(Shutdown::Write).unwrap();
    assert_eq!(kind((&client).write(b"x")), ErrorKind::BrokenPipe);
    assert_eq!(kind((&client).write(b"x")), ErrorKind::BrokenPipe);
    assert!(client.peer_addr().is_ok(), "still connected one way");
    // The server sees the end of the stream, again and again, and may still write.
    let mut buf = [0u8; 16];
    assert_eq!((&server).read(&mut buf).unwrap(), 0);
    assert_eq!((&server).read(&mut buf).unwrap(), 0);
    (&server).write_all(b"late reply").unwrap();
    drop(server);
    let mut got = Vec::new();
    (&client).read_to_end(&mut got).unwrap();
    assert_eq!(got, b"late reply");
    assert_eq!((&client).read(&mut buf).unwrap(), 0);
    assert_eq!(kind((&client).write(b"x")), ErrorKind::BrokenPipe);
    assert!(client.take_error().unwrap().is_none(), "a clean end");
}

#[test]
fn shutdown_read_gives_end_of_stream() {
    let (a, b) = pair();
    let (client, server, _l) = connected(&a, &b);
    client.shutdown(Shutdown::Read).unwrap();
    (&server).write_all(b"ignored").unwrap();
    assert_eq!((&client).read(&mut [0u8; 16]).unwrap(), 0);
    // Writing still works.
    (&client).write_all(b"still").unwrap();
    let mut buf = [0u8; 5];
    (&server).read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"still");
}

#[test]
fn every_call_after_the_runtime_stopped_is_not_connected() {
    let (mut a, b) = pair();
    let (client, _server, _l) = connected(&a, &b);
    let listener = TcpListener::bind(&a, "192.0.2.1:81").unwrap();
    let udp = UdpSocket::bind(&a, "192.0.2.1:53").unwrap();
    let icmp = IcmpSocket::bind(&a, 9).unwrap();
    a.shutdown();
    let mut buf = [0u8; 8];
    assert_eq!(kind((&client).read(&mut buf)), ErrorKind::NotConnected);
    assert_eq!(kind((&client).write(b"x")), ErrorKind::NotConnected);
    assert_eq!(kind(client.peer_addr()), ErrorKind::NotConnected);
    assert_eq!(kind(client.take_error()), ErrorKind::NotConnected);
    assert_eq!(kind(client.set_nodelay(true)), ErrorKind::NotConnected);
    assert_eq!(kind(client.set_cork(true)), ErrorKind::NotConnected);
    assert_eq!(kind(client.end_record()), ErrorKind::NotConnected);
    assert_eq!(
        kind(client.shutdown(Shutdown::Both)),
        ErrorKind::NotConnected
    );
    assert!(client.info().is_none());
    assert_eq!(kind(listener.accept()), ErrorKind::NotConnected);
    listener.set_nonblocking(true).unwrap();
    assert_eq!(kind(listener.accept()), ErrorKind::NotConnected);
    assert_eq!(
        kind(udp.send_to(b"x", "192.0.2.2:53")),
        ErrorKind::NotConnected
    );
    assert_eq!(kind(udp.recv_from(&mut buf)), ErrorKind::NotConnected);
    assert_eq!(kind(udp.send(b"x")), ErrorKind::NotConnected);
    udp.connect("192.0.2.2:53").unwrap();
    assert_eq!(kind(udp.send(b"x")), ErrorKind::NotConnected);
    assert_eq!(kind(udp.recv(&mut buf)), ErrorKind::NotConnected);
    assert_eq!(
        kind(icmp.send_echo(Ipv4Addr::new(192, 0, 2, 2), 1, b"x")),
        ErrorKind::NotConnected
    );
    assert_eq!(
        kind(TcpStream::connect(&a, B)),
        ErrorKind::NotConnected,
        "connect"
    );
    assert_eq!(
        kind(UdpSocket::bind(&a, "0.0.0.0:0")),
        ErrorKind::NotConnected
    );
}

#[cfg(feature = "tokio")]
mod tokio_sockets {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// A tokio client on A connected to a std server on B (whose `abort` resets).
    fn connected(a: &Runtime, b: &Runtime) -> (impnet::tokio::TcpStream, TcpStream, TcpListener) {
        let listener = TcpListener::bind(b, B).unwrap();
        let client = block_on(impnet::tokio::TcpStream::connect(a, B)).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server, listener)
    }

    /// Wait (without asserting on how long) until the connection has ended.
    fn wait_closed(stream: &impnet::tokio::TcpStream) {
        let give_up = Instant::now() + Duration::from_secs(60);
        while stream.info().map(|i| i.state) != Some(TcpState::Closed) {
            assert!(Instant::now() < give_up, "the connection never ended");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn tokio_reset_by_peer_is_reported_once_to_a_read() {
        let (a, b) = pair();
        let (mut client, server, _l) = connected(&a, &b);
        server.abort().unwrap();
        block_on(async {
            let mut buf = [0u8; 16];
            let e = client.read(&mut buf).await.expect_err("reset");
            assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
            assert_eq!(client.read(&mut buf).await.unwrap(), 0);
            assert_eq!(client.read(&mut buf).await.unwrap(), 0);
            let e = client.write(b"x").await.expect_err("broken pipe");
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
            let e = client.write_all(b"xyz").await.expect_err("broken pipe");
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
            assert!(client.take_error().unwrap().is_none());
            assert_eq!(
                client.peer_addr().unwrap_err().kind(),
                ErrorKind::NotConnected
            );
            assert!(client.local_addr().is_ok());
            assert!(client.set_nodelay(true).is_ok());
            client.flush().await.unwrap();
            assert_eq!(
                client.shutdown_write().unwrap_err().kind(),
                ErrorKind::NotConnected
            );
            // tokio's `shutdown` on a dead connection is not an error.
            client.shutdown().await.unwrap();
        });
    }

    #[test]
    fn tokio_reset_by_peer_is_reported_once_to_a_write_or_take_error() {
        let (a, b) = pair();
        let (mut writer, server, listener) = connected(&a, &b);
        let (asker, server2) = {
            let client = block_on(impnet::tokio::TcpStream::connect(&a, B)).unwrap();
            let (server, _) = listener.accept().unwrap();
            (client, server)
        };
        server.abort().unwrap();
        server2.abort().unwrap();
        wait_closed(&writer);
        wait_closed(&asker);
        block_on(async {
            let e = writer.write(b"x").await.expect_err("reset");
            assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}");
            let e = writer.write(b"x").await.expect_err("broken pipe");
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
            assert_eq!(writer.read(&mut [0u8; 4]).await.unwrap(), 0);
        });
        let e = asker.take_error().unwrap().expect("the reset");
        assert_eq!(e.kind(), ErrorKind::ConnectionReset);
        assert!(asker.take_error().unwrap().is_none(), "reported once");
    }

    #[test]
    fn tokio_write_after_shutdown_is_broken_pipe() {
        let (a, b) = pair();
        let (mut client, server, _l) = connected(&a, &b);
        block_on(async {
            client.shutdown().await.unwrap();
            client.shutdown().await.unwrap();
            let e = client.write(b"x").await.expect_err("broken pipe");
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "{e}");
        });
        assert_eq!((&server).read(&mut [0u8; 4]).unwrap(), 0);
        (&server).write_all(b"reply").unwrap();
        drop(server);
        block_on(async {
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            assert_eq!(got, b"reply");
            assert_eq!(client.read(&mut [0u8; 4]).await.unwrap(), 0);
        });
    }

    #[test]
    fn tokio_refused_and_stopped_runtime() {
        let (mut a, b) = pair();
        let listener = impnet::tokio::TcpListener::bind(&a, "192.0.2.1:81").unwrap();
        let (mut client, _server, _l) = connected(&a, &b);
        block_on(async {
            let e = impnet::tokio::TcpStream::connect(&a, "192.0.2.2:9")
                .await
                .expect_err("refused");
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
        });
        a.shutdown();
        block_on(async {
            let e = listener.accept().await.expect_err("stopped");
            assert_eq!(e.kind(), ErrorKind::NotConnected, "{e}");
            let e = client.read(&mut [0u8; 4]).await.expect_err("stopped");
            assert_eq!(e.kind(), ErrorKind::NotConnected, "{e}");
            let e = client.write(b"x").await.expect_err("stopped");
            assert_eq!(e.kind(), ErrorKind::NotConnected, "{e}");
            assert_eq!(
                client.peer_addr().unwrap_err().kind(),
                ErrorKind::NotConnected
            );
            assert_eq!(
                client.take_error().unwrap_err().kind(),
                ErrorKind::NotConnected
            );
        });
    }
}
