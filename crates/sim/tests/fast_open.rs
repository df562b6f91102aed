//! TCP Fast Open (RFC 7413) in the simulator: a 100-byte request and its 100-byte
//! response on a fresh connection over a 100 ms round trip. A plain connection gets its
//! response two round trips after the connect; the first Fast Open connection (a
//! cookie request) too; the next one, whose SYN carries the cookie and the request,
//! one round trip after, exactly (the link serialises infinitely fast, so virtual time
//! holds nothing but the propagation delays).

use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_core::tcp::TcpHandle;
use impnet_core::{Duration, StackConfig};
use impnet_phy::LinkConfig;
use impnet_sim::{Flow, HostId, Sim};
use impnet_wire::ipv4::Cidr;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PORT: u16 = 80;
const RTT: Duration = Duration::from_millis(100);

struct Net {
    sim: Sim,
    server: HostId,
    client: HostId,
    listener: TcpHandle,
}

fn net() -> Net {
    let mut sim = Sim::new(7413);
    let server = sim.add_host("server", StackConfig::default());
    let client = sim.add_host("client", StackConfig::default());
    let link = LinkConfig {
        delay: Duration::from_millis(50),
        ..LinkConfig::default()
    };
    sim.connect(
        client,
        Cidr::new(CLIENT, 24).unwrap(),
        server,
        Cidr::new(SERVER, 24).unwrap(),
        link,
    )
    .unwrap();
    let s = sim.host_mut(server);
    let listener = s.tcp_listen(SocketAddrV4::new(SERVER, PORT), 16).unwrap();
    s.tcp_set_fast_open(listener, 16).unwrap();
    Net {
        sim,
        server,
        client,
        listener,
    }
}

/// One request/response on a new connection from `port`; returns the time from the
/// connect call to the whole response read, and the SYN's sequence space used.
fn exchange(net: &mut Net, port: u16, fast_open: bool) -> Duration {
    let request = [b'q'; 100];
    let response = [b'r'; 100];
    let start = net.sim.now();
    let from = SocketAddrV4::new(CLIENT, port);
    let to = SocketAddrV4::new(SERVER, PORT);
    let c = net.sim.host_mut(net.client);
    let conn = if fast_open {
        let (conn, n) = c.tcp_connect_with_data(start, from, to, &request).unwrap();
        assert_eq!(n, 100);
        conn
    } else {
        let conn = c.tcp_connect(start, from, to).unwrap();
        assert_eq!(c.tcp_send(start, conn, &request).unwrap(), 100);
        conn
    };
    let (server, client, listener) = (net.server, net.client, net.listener);
    let mut accepted = None;
    let mut got_request = Vec::new();
    let mut got_response = Vec::new();
    let mut done_at = None;
    net.sim
        .run(1_000_000, start + Duration::from_secs(10), |sim| {
            let now = sim.now();
            let s = sim.host_mut(server);
            if accepted.is_none() {
                accepted = s.tcp_accept(listener).ok();
            }
            if let Some(a) = accepted {
                let mut buf = [0u8; 200];
                if let Ok(n) = s.tcp_recv(now, a, &mut buf) {
                    got_request.extend_from_slice(&buf[..n]);
                    if got_request.len() == 100 {
                        assert_eq!(s.tcp_send(now, a, &response).unwrap(), 100);
                    }
                }
            }
            let c = sim.host_mut(client);
            let mut buf = [0u8; 200];
            if let Ok(n) = c.tcp_recv(now, conn, &mut buf) {
                got_response.extend_from_slice(&buf[..n]);
                if got_response.len() == 100 {
                    done_at = Some(now);
                    return Flow::Done;
                }
            }
            Flow::Continue
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got_request, request, "the request, byte for byte");
    assert_eq!(got_response, response, "the response, byte for byte");
    // Let the connections finish their handshakes' last segments before the next.
    let later = net.sim.now() + Duration::from_secs(1);
    let _ = net.sim.run_until(later, 1_000_000);
    done_at.unwrap() - start
}

#[test]
fn fast_open_saves_one_round_trip_on_a_short_request() {
    let mut net = net();
    // ARP first, so no exchange below pays for it.
    exchange(&mut net, 40000, false);
    let plain = exchange(&mut net, 40001, false);
    assert_eq!(
        plain,
        RTT.saturating_mul(2),
        "SYN, SYN-ACK; request, response"
    );
    // The first Fast Open connection only asks for a cookie.
    let asking = exchange(&mut net, 40002, true);
    assert_eq!(asking, plain);
    let with_cookie = exchange(&mut net, 40003, true);
    assert_eq!(
        with_cookie, RTT,
        "SYN with the request, SYN-ACK and the response"
    );
    assert_eq!(plain - with_cookie, RTT);
    let server = net.sim.host(net.server).tcp_stats();
    assert_eq!(server.fast_open_accepted, 1);
    assert_eq!(server.fast_open_cookies_granted, 1);
    assert_eq!(net.sim.host(net.client).tcp_stats().fast_open_active, 1);
}
