//! A SYN flood in the simulator (RFC 4987): 100,000 SYNs a second from spoofed sources
//! against a listener with a backlog of 128, while a legitimate client opens a
//! connection every 20 ms. With SYN cookies every client connects within 3 RTTs; without
//! them the flood's half-open connections fill the backlog and keep the clients out.

use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_core::tcp::{TcpHandle, TcpState};
use impnet_core::{Duration, Instant, StackConfig};
use impnet_phy::LinkConfig;
use impnet_sim::forge::tcp_frame;
use impnet_sim::{Flow, HostId, LinkId, Sim};
use impnet_wire::ipv4::Cidr;
use impnet_wire::{ethernet, tcp};

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PORT: u16 = 80;
/// 20 ms round trip.
const ONE_WAY: Duration = Duration::from_millis(10);
const RTT: Duration = Duration::from_millis(20);
/// 100,000 SYNs a second: 100 every millisecond, for two seconds.
const SYNS_PER_MS: u32 = 100;
const FLOOD: Duration = Duration::from_secs(2);
const CLIENTS: usize = 100;
const CLIENT_EVERY: Duration = Duration::from_millis(20);

struct Outcome {
    /// Client connections established within 3 RTTs of their connect call.
    in_time: usize,
    /// Connections the server accepted.
    accepted: usize,
    cookies_sent: u64,
    /// Most sockets the server held at once (listener and children).
    max_server_sockets: usize,
}

/// A spoofed SYN from an address in 198.18.0.0/15 (off the link: the server's SYN-ACK
/// goes to its default gateway and dies there, as it would on the Internet).
fn spoofed_syn(rng: &mut u64, macs: (ethernet::Address, ethernet::Address)) -> Vec<u8> {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let r = *rng;
    let src = Ipv4Addr::new(198, 18 + (r & 1) as u8, (r >> 8) as u8, (r >> 16) as u8);
    let segment = tcp::Repr {
        src_port: 0,
        dst_port: 0,
        seq: (r >> 32) as u32,
        ack: 0,
        flags: tcp::Flags::SYN,
        window: 65_535,
        urgent: 0,
        options: tcp::Options {
            mss: Some(1460),
            ..tcp::Options::default()
        },
        payload: &[],
    };
    let from = SocketAddrV4::new(src, 1024 + (r >> 24) as u16 % 60_000);
    tcp_frame(
        macs,
        (from, SocketAddrV4::new(SERVER, PORT)),
        &segment,
        r as u16,
    )
}

fn setup(cookies: bool, seed: u64) -> (Sim, HostId, HostId, LinkId, TcpHandle) {
    let mut sim = Sim::new(seed);
    let mut config = StackConfig::default();
    config.tcp.syn_cookies = cookies;
    let server = sim.add_host("server", config);
    let client = sim.add_host("client", StackConfig::default());
    let link = LinkConfig {
        rate_bps: 1_000_000_000,
        delay: ONE_WAY,
        queue_limit_bytes: 1 << 20,
        ..LinkConfig::default()
    };
    let link = sim
        .connect(
            client,
            Cidr::new(CLIENT, 24).unwrap(),
            server,
            Cidr::new(SERVER, 24).unwrap(),
            link,
        )
        .unwrap();
    let iface = sim.iface_on(server, link).unwrap();
    sim.host_mut(server).routes_mut().add_default(CLIENT, iface);
    let listener = sim
        .host_mut(server)
        .tcp_listen(SocketAddrV4::new(SERVER, PORT), 128)
        .unwrap();
    (sim, server, client, link, listener)
}

fn run(cookies: bool, seed: u64) -> Outcome {
    let (mut sim, server, client, link, listener) = setup(cookies, seed);
    let macs = (
        sim.mac_on(client, link).unwrap(),
        sim.mac_on(server, link).unwrap(),
    );
    let mut rng = seed | 1;
    let mut next_flood = Instant::ZERO;
    let mut next_client = Instant::ZERO + Duration::from_millis(100);
    let end = Instant::ZERO + FLOOD + Duration::from_millis(500);
    let mut attempts: Vec<(TcpHandle, Instant, Option<Instant>)> = Vec::new();
    let mut outcome = Outcome {
        in_time: 0,
        accepted: 0,
        cookies_sent: 0,
        max_server_sockets: 0,
    };
    let summary = sim.run(50_000_000, end + Duration::from_secs(1), |sim| {
        let now = sim.now();
        while next_flood <= now && next_flood < Instant::ZERO + FLOOD {
            for _ in 0..SYNS_PER_MS {
                sim.inject(link, 0, &spoofed_syn(&mut rng, macs));
            }
            next_flood += Duration::from_millis(1);
        }
        if next_client <= now && attempts.len() < CLIENTS {
            let remote = SocketAddrV4::new(SERVER, PORT);
            let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
            let handle = sim.host_mut(client).tcp_connect(now, any, remote).unwrap();
            attempts.push((handle, now, None));
            next_client += CLIENT_EVERY;
        }
        for (handle, _, done) in &mut attempts {
            let state = sim.host(client).tcp_info(*handle).map(|i| i.state);
            if done.is_none() && state == Some(TcpState::Established) {
                *done = Some(now);
            }
        }
        let s = sim.host_mut(server);
        while s.tcp_accept(listener).is_ok() {
            outcome.accepted += 1;
        }
        outcome.max_server_sockets = outcome.max_server_sockets.max(s.tcp_socket_count());
        if now >= end {
            return Flow::Done;
        }
        Flow::WakeAt(next_flood.min(next_client).min(end).max(now))
    });
    summary.unwrap_or_else(|e| panic!("{e}"));
    outcome.in_time = attempts
        .iter()
        .filter(|(_, start, done)| {
            done.is_some_and(|d| d.saturating_duration_since(*start) <= RTT.saturating_mul(3))
        })
        .count();
    outcome.cookies_sent = sim.host(server).tcp_stats().syn_cookies_sent;
    outcome
}

#[test]
fn with_syn_cookies_clients_connect_through_a_flood_of_100k_syns_a_second() {
    let with = run(true, 4987);
    assert!(
        with.in_time * 100 >= CLIENTS * 99,
        "{} of {CLIENTS} clients connected within 3 RTTs",
        with.in_time
    );
    assert_eq!(with.accepted, CLIENTS, "the server accepted every client");
    assert!(with.cookies_sent > 150_000, "{} cookies", with.cookies_sent);
    // The listener, its 128 half-open children, and the accepted clients: the flood
    // adds no state beyond the backlog.
    assert!(
        with.max_server_sockets <= 1 + 128 + CLIENTS,
        "{} sockets",
        with.max_server_sockets
    );
    let without = run(false, 4987);
    assert!(
        without.in_time * 2 < CLIENTS,
        "without cookies {} of {CLIENTS} clients still connected in time",
        without.in_time
    );
}
