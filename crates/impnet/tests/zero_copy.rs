//! `send_owned` and `recv_with` between two runtimes over an in-memory pipe, blocking
//! and (feature `tokio`) async: byte-exact streams mixing them with `write` and
//! `read`, partial consumption, end of stream, and every refusal giving the buffer
//! back.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown};
use std::time::Duration;

use impnet::core::{IfaceConfig, Secret, StackConfig};
use impnet::phy::pipe;
use impnet::wire::{ethernet, ipv4::Cidr};
use impnet::{Runtime, TcpListener, TcpStream};

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
    (make(a_end, 1, 7), make(b_end, 2, 8))
}

fn byte(at: usize) -> u8 {
    (at * 31 + at / 251) as u8
}

/// The stream's bytes `[from, from + len)`.
fn piece(from: usize, len: usize) -> Vec<u8> {
    (from..from + len).map(byte).collect()
}

/// Piece lengths the writers cycle through: under and over the 2 KiB copy threshold.
const LENGTHS: [usize; 6] = [100, 70_000, 4096, 1, 20_000, 2047];

#[test]
fn owned_writes_and_lent_reads_between_two_runtimes() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, "192.0.2.2:80").unwrap();
    let total = 1_000_000;
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 3000];
        for turn in 0usize.. {
            // Lent reads take half of what they see (at least a byte), or none of it
            // every seventh time; plain reads in between.
            let n = if turn % 3 == 2 {
                (&stream).read(&mut buf).inspect(|&n| {
                    got.extend_from_slice(&buf[..n]);
                })
            } else {
                stream.recv_with(|data| {
                    let n = if turn % 7 == 0 {
                        0
                    } else {
                        data.len().div_ceil(2)
                    };
                    got.extend_from_slice(&data[..n]);
                    n
                })
            }
            .unwrap();
            if n == 0 && turn % 7 != 0 {
                break;
            }
        }
        // End of stream: the closure sees an empty slice, again and again.
        let mut seen = None;
        assert_eq!(
            stream
                .recv_with(|d| {
                    seen = Some(d.len());
                    0
                })
                .unwrap(),
            0
        );
        assert_eq!(seen, Some(0));
        got
    });
    let client = TcpStream::connect(&a, "192.0.2.2:80").unwrap();
    let mut sent = 0;
    for (i, len) in LENGTHS.iter().cycle().enumerate() {
        let len = (*len).min(total - sent);
        if len == 0 {
            break;
        }
        if i % 4 == 3 {
            (&client).write_all(&piece(sent, len)).unwrap();
        } else {
            client.send_owned(piece(sent, len)).unwrap();
        }
        sent += len;
    }
    client.shutdown(Shutdown::Write).unwrap();
    let got = server.join().unwrap();
    assert_eq!(got.len(), total);
    assert!(got == piece(0, total), "byte-exact");
}

#[test]
fn owned_writes_refused_give_the_buffer_back() {
    let (a, b) = pair();
    let listener = TcpListener::bind(&b, "192.0.2.2:81").unwrap();
    let client = TcpStream::connect(&a, "192.0.2.2:81").unwrap();
    let (server, _) = listener.accept().unwrap();
    // Larger than the send buffer (256 KiB): it could never be taken.
    let huge = client.send_owned(vec![1; 300 * 1024]).unwrap_err();
    assert_eq!(huge.error.kind(), ErrorKind::InvalidInput);
    assert_eq!(huge.data.len(), 300 * 1024);
    // Non-blocking with the peer not reading: the buffers fill, then `WouldBlock`.
    client.set_nonblocking(true).unwrap();
    let mut queued = 0;
    let refused = loop {
        match client.send_owned(vec![2; 64 * 1024]) {
            Ok(()) => queued += 64 * 1024,
            Err(e) => break e,
        }
        assert!(queued < 4 << 20, "never full");
    };
    assert_eq!(refused.error.kind(), ErrorKind::WouldBlock);
    assert_eq!(refused.data, vec![2; 64 * 1024]);
    // A timeout gives it back too (once the peer's window has closed: ACKs in flight
    // may still make room for a few).
    client.set_nonblocking(false).unwrap();
    client
        .set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut data = refused.data;
    let timed_out = loop {
        match client.send_owned(data) {
            Ok(()) => queued += 64 * 1024,
            Err(e) => break e,
        }
        data = vec![2; 64 * 1024];
        assert!(queued < 4 << 20, "never full");
    };
    assert_eq!(timed_out.error.kind(), ErrorKind::TimedOut);
    assert_eq!(timed_out.data.len(), 64 * 1024);
    // After our shutdown: `BrokenPipe`, as `write` says.
    client.shutdown(Shutdown::Write).unwrap();
    let closed = client.send_owned(timed_out.data).unwrap_err();
    assert_eq!(closed.error.kind(), ErrorKind::BrokenPipe);
    assert_eq!(closed.data.len(), 64 * 1024);
    // Everything queued before arrives, then the end of the stream.
    server
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut read = 0;
    loop {
        match server.recv_with(|d| {
            assert!(d.iter().all(|&b| b == 2));
            d.len()
        }) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => panic!("read: {e}"),
        }
    }
    assert_eq!(read, queued);
    // A non-blocking lent read with nothing there: `WouldBlock`, closure not called.
    let (c2, s2) = (
        TcpStream::connect(&a, "192.0.2.2:81").unwrap(),
        listener.accept().unwrap().0,
    );
    s2.set_nonblocking(true).unwrap();
    let mut called = false;
    let e = s2
        .recv_with(|_| {
            called = true;
            0
        })
        .unwrap_err();
    assert_eq!((e.kind(), called), (ErrorKind::WouldBlock, false));
    drop(c2);
}

#[cfg(feature = "tokio")]
#[test]
fn async_owned_writes_and_lent_reads() {
    let (a, b) = pair();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let total = 600_000;
    let got = rt.block_on(async {
        let listener = impnet::tokio::TcpListener::bind(&b, "192.0.2.2:82").unwrap();
        let writer = async {
            let stream = impnet::tokio::TcpStream::connect(&a, "192.0.2.2:82")
                .await
                .unwrap();
            let mut sent = 0;
            for len in LENGTHS.iter().cycle() {
                let len = (*len).min(total - sent);
                if len == 0 {
                    break;
                }
                stream.send_owned(piece(sent, len)).await.unwrap();
                sent += len;
            }
            stream.shutdown_write().unwrap();
        };
        let reader = async {
            let (stream, _) = listener.accept().await.unwrap();
            let mut got = Vec::new();
            loop {
                let n = stream
                    .recv_with(|data| {
                        let n = data.len().min(1000);
                        got.extend_from_slice(&data[..n]);
                        n
                    })
                    .await
                    .unwrap();
                if n == 0 {
                    break;
                }
            }
            got
        };
        let both = async { tokio::join!(writer, reader).1 };
        tokio::time::timeout(Duration::from_secs(30), both)
            .await
            .expect("transfer timed out")
    });
    assert_eq!(got.len(), total);
    assert!(got == piece(0, total), "byte-exact");
}
