//! Issue 10, the stack's side of the stall: a server that writes a response's head and
//! body in two small writes waits, by Nagle's algorithm (RFC 9293 §3.7.4), for the
//! client's ACK of the head, which the client delays (§3.8.6.3): 40 ms per request.
//! A gather write, the cork and no-delay each make it one round trip. On the pair's
//! virtual clock (`tests_loop`), so the times are exact.

use super::*;

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: b\r\n\r\n";
const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
const BODY: &[u8] = b"hello";
/// One round trip on the pair's wire.
const RTT: Duration = Duration::from_millis(10);

/// How the server writes its response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Respond {
    /// Two writes, the head leaving before the body is written: Nagle's case.
    TwoWrites,
    /// Head and body in one gather write.
    Vectored,
    /// Cork, write, write, uncork.
    Corked,
    /// No-delay, then two writes.
    NoDelay,
}

/// Open a connection A -> B; returns (client, server).
fn open(p: &mut Pair) -> (TcpHandle, TcpHandle) {
    let listener = p.b.listen(SocketAddrV4::new(B, 80), 8).unwrap();
    let any = SocketAddrV4::new(A, 0);
    let client =
        p.a.connect(p.now, any, SocketAddrV4::new(B, 80), 1460)
            .unwrap();
    for _ in 0..100 {
        if let Ok(server) = p.b.accept(listener) {
            return (client, server);
        }
        p.step();
    }
    panic!("no connection");
}

/// The server's response, written as `how` says; the pair's `transmit` between the
/// writes is the runtime sending what the first write made ready.
fn respond(p: &mut Pair, server: TcpHandle, how: Respond) {
    let now = p.now;
    match how {
        Respond::TwoWrites | Respond::NoDelay => {
            p.b.send(now, server, HEAD).unwrap();
            p.transmit();
            p.b.send(now, server, BODY).unwrap();
        }
        Respond::Vectored => {
            assert_eq!(p.b.send_vectored(now, server, [HEAD, BODY]), Ok(43));
        }
        Respond::Corked => {
            p.b.set_cork(now, server, true).unwrap();
            p.b.send(now, server, HEAD).unwrap();
            p.transmit();
            p.b.send(now, server, BODY).unwrap();
            p.transmit();
            p.b.set_cork(now, server, false).unwrap();
        }
    }
}

/// Read from `handle` until `want` bytes are in `got`; false if not yet.
fn read_up_to(
    tcp: &mut Tcp,
    now: Instant,
    handle: TcpHandle,
    got: &mut Vec<u8>,
    want: usize,
) -> bool {
    let mut buf = [0u8; 256];
    while got.len() < want {
        match tcp.recv(now, handle, &mut buf) {
            Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return false,
        }
    }
    true
}

/// `rounds` requests one after the other on one connection; each one's time from the
/// client's write to the whole response read.
fn request_response(how: Respond, rounds: usize) -> Vec<Duration> {
    let mut p = Pair::new(TcpConfig::default(), 0);
    let (client, server) = open(&mut p);
    if how == Respond::NoDelay {
        p.b.set_nodelay(server, true).unwrap();
    }
    let mut times = Vec::new();
    for _ in 0..rounds {
        let start = p.now;
        p.a.send(start, client, REQUEST).unwrap();
        let (mut request, mut response) = (Vec::new(), Vec::new());
        let mut answered = false;
        while !read_up_to(
            &mut p.a,
            p.now,
            client,
            &mut response,
            HEAD.len() + BODY.len(),
        ) {
            assert!(p.step(), "{how:?}: the exchange stopped");
            if !answered && read_up_to(&mut p.b, p.now, server, &mut request, REQUEST.len()) {
                respond(&mut p, server, how);
                answered = true;
            }
        }
        assert_eq!(response, [HEAD, BODY].concat());
        times.push(p.now.saturating_duration_since(start));
    }
    times
}

#[test]
fn two_small_writes_stall_for_the_delayed_ack() {
    let times = request_response(Respond::TwoWrites, 20);
    // While the client is in quick-ACK mode (16 segments, two a response), the body
    // waits one more round trip for the ACK of the head.
    assert_eq!(times[0], RTT.saturating_mul(2));
    // Past it, Nagle holds the body until the client's delayed ACK (40 ms) of the head.
    let delayed = TcpConfig::default().delayed_ack;
    assert_eq!(times[19], RTT.saturating_mul(2) + delayed, "{times:?}");
}

#[test]
fn a_gather_write_answers_in_one_round_trip() {
    let times = request_response(Respond::Vectored, 20);
    assert!(times.iter().all(|&t| t == RTT), "{times:?}");
}

#[test]
fn cork_write_write_uncork_answers_in_one_round_trip() {
    let times = request_response(Respond::Corked, 20);
    assert!(times.iter().all(|&t| t == RTT), "{times:?}");
}

#[test]
fn no_delay_answers_in_one_round_trip() {
    let times = request_response(Respond::NoDelay, 20);
    assert!(times.iter().all(|&t| t == RTT), "{times:?}");
}
