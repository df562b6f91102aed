//! The stub resolver over imp: two runtimes joined by an in-memory pipe, B running a
//! small DNS server on imp's own sockets. Names resolve over UDP, a server that does
//! not answer (port unreachable) is skipped for the next, a truncated answer is asked
//! again over TCP, "no such name" is an error, answers are cached, and
//! `TcpStream::connect("name:port")` connects. No root.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use impnet::core::{IfaceConfig, Secret, StackConfig};
use impnet::phy::pipe;
use impnet::wire::dns::{self, Builder, Flags, Message, RecordData, Section, Type};
use impnet::wire::{ethernet, ipv4::Cidr};
use impnet::{Runtime, TcpListener, TcpStream, UdpSocket, lookup_host};

const SERVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// B's second address: nothing listens on port 53 there.
const DEAD_SERVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 3);

fn runtime(end: impnet::phy::PipeEnd, last: u8, addrs: &[Ipv4Addr]) -> Runtime {
    let rt = Runtime::with_secret(StackConfig::default(), Secret::from_bytes([last; 16])).unwrap();
    let iface = rt.add_device(
        end,
        IfaceConfig::new(ethernet::Address([2, 0, 0, 0, 0, last]), 1500),
    );
    for &address in addrs {
        rt.add_address(
            iface,
            Cidr {
                address,
                prefix_len: 24,
            },
        );
    }
    rt
}

/// Queries seen: over UDP and over TCP.
#[derive(Default)]
struct Counts {
    udp: AtomicUsize,
    tcp: AtomicUsize,
}

/// The answer to `query`: web.test and big.test are SERVER (big.test with 40 extra
/// A records, too big for UDP: truncated there); anything else is "no such name".
fn answer(query: &[u8], over_tcp: bool, out: &mut [u8]) -> usize {
    let message = Message::parse(query).unwrap();
    let question = message.questions().next().unwrap();
    let name = question.name.to_string();
    let big = question.name.eq_text("big.test");
    let known = big || question.name.eq_text("web.test");
    let flags = Flags {
        response: true,
        recursion_desired: true,
        recursion_available: true,
        truncated: big && !over_tcp && question.qtype == Type::A,
        rcode: if known { 0 } else { 3 },
        ..Flags::default()
    };
    let mut b = Builder::new(out, message.id, flags).unwrap();
    b.question(&name, question.qtype, dns::CLASS_IN).unwrap();
    if known && question.qtype == Type::A && !flags.truncated {
        b.record(Section::Answer, &name, 300, RecordData::A(SERVER))
            .unwrap();
        for i in 0..if big { 40 } else { 0 } {
            let filler = RecordData::A(Ipv4Addr::new(198, 51, 100, i));
            b.record(Section::Answer, "filler.test", 300, filler)
                .unwrap();
        }
    }
    b.finish().len()
}

fn serve_dns(rt: &Runtime, counts: Arc<Counts>) {
    let udp = UdpSocket::bind(rt, (SERVER, 53)).unwrap();
    let listener = TcpListener::bind(rt, (SERVER, 53)).unwrap();
    let udp_counts = Arc::clone(&counts);
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        let mut out = [0u8; 4096];
        while let Ok((len, from)) = udp.recv_from(&mut buf) {
            udp_counts.udp.fetch_add(1, Ordering::SeqCst);
            let n = answer(&buf[..len], false, &mut out);
            let _ = udp.send_to(&out[..n.min(dns::UDP_MAX)], from);
        }
    });
    std::thread::spawn(move || {
        while let Ok((mut stream, _)) = listener.accept() {
            counts.tcp.fetch_add(1, Ordering::SeqCst);
            let mut len = [0u8; 2];
            stream.read_exact(&mut len).unwrap();
            let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
            stream.read_exact(&mut query).unwrap();
            let mut out = [0u8; 4096];
            let n = answer(&query, true, &mut out);
            stream.write_all(&(n as u16).to_be_bytes()).unwrap();
            stream.write_all(&out[..n]).unwrap();
        }
    });
}

#[test]
fn names_resolve_over_udp_and_tcp_with_a_cache() {
    let (a_end, b_end) = pipe(1514);
    let a = runtime(a_end, 1, &[Ipv4Addr::new(192, 0, 2, 1)]);
    let b = runtime(b_end, 2, &[SERVER, DEAD_SERVER]);
    let counts = Arc::new(Counts::default());
    serve_dns(&b, Arc::clone(&counts));

    let none = lookup_host(&a, "web.test:80").unwrap_err();
    assert_eq!(none.kind(), ErrorKind::NotFound, "{none}");
    assert!(none.to_string().contains("no DNS server"), "{none}");

    a.set_dns_servers(&[IpAddr::V4(DEAD_SERVER), IpAddr::V4(SERVER)]);
    let found = lookup_host(&a, "web.test:80").unwrap();
    assert_eq!(found, vec![SocketAddr::from((SERVER, 80))]);
    // One A and one AAAA query reached the live server (the dead one refused both).
    assert_eq!(counts.udp.load(Ordering::SeqCst), 2);

    // Cached: the A answer (TTL 300) is not asked for again; the AAAA one had no
    // records, and is.
    let again = lookup_host(&a, "WEB.test.:80").unwrap();
    assert_eq!(again, found);
    assert_eq!(counts.udp.load(Ordering::SeqCst), 3);

    // Truncated over UDP: asked again over TCP.
    let big = lookup_host(&a, "big.test:443").unwrap();
    assert_eq!(big[0], SocketAddr::from((SERVER, 443)));
    assert_eq!(big.len(), 1, "filler records are another name's");
    assert_eq!(counts.tcp.load(Ordering::SeqCst), 1);

    let nx = lookup_host(&a, "nowhere.test:80").unwrap_err();
    assert_eq!(nx.kind(), ErrorKind::NotFound);
    assert!(nx.to_string().contains("no such name"), "{nx}");

    let bad = lookup_host(&a, "web.test").unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidInput);
    let bad = lookup_host(&a, "a..b:1").unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidInput, "{bad}");

    // Connect by name.
    let listener = TcpListener::bind(&b, (SERVER, 8080)).unwrap();
    let mut client = TcpStream::connect(&a, "web.test:8080").unwrap();
    let (mut server, _) = listener.accept().unwrap();
    client.write_all(b"hello").unwrap();
    let mut buf = [0u8; 5];
    server.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    assert_eq!(
        client.peer_addr().unwrap(),
        SocketAddr::from((SERVER, 8080))
    );
}
