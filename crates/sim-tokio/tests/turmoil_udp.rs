//! turmoil's `examples/udp_vpv4_multicast` and `udp_vpv4_broadcast`, ported as far as
//! imp's topology allows: the examples' receiver and sender code (bind 0.0.0.0:9000,
//! join 239.0.0.1 or `set_broadcast(true)` and send to 255.255.255.255, three
//! datagrams 100 ms apart), with one receiver instead of two. Simulated links are point
//! to point and routers forward no multicast or broadcast, so one datagram cannot reach
//! two hosts. The IPv6 multicast example is blocked by the lack of IPv6 addresses on
//! links.

use std::net::Ipv4Addr;
use std::time::Duration;

use impnet_phy::LinkConfig;
use impnet_sim_tokio::net::UdpSocket;
use impnet_sim_tokio::{HostId, Sim};

const N_STEPS: usize = 3;

#[test]
fn multicast_v4_reaches_the_receiver_that_joined() {
    let tick = Duration::from_millis(100);
    let mut sim = Sim::new(5);
    let server = sim.host("server-0");
    let client = sim.host("client");
    sim.link(
        server,
        "10.0.0.1/24".parse().unwrap(),
        client,
        "10.0.0.2/24".parse().unwrap(),
        LinkConfig::default().with_delay(impnet_core::Duration::from_millis(1)),
    )
    .unwrap();

    let multicast_port = 9000;
    let multicast_addr: Ipv4Addr = "239.0.0.1".parse().unwrap();

    let received = sim.spawn(server, async move {
        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, multicast_port)).await?;
        socket.join_multicast_v4(multicast_addr, Ipv4Addr::UNSPECIFIED)?;

        let mut buf = [0; 1024];
        let mut got = Vec::new();
        for _ in 0..N_STEPS {
            let (n, addr) = socket.recv_from(&mut buf).await?;
            got.push((buf[..n].to_vec(), addr));
        }
        Ok::<_, std::io::Error>(got)
    });

    let sent = sim.spawn(client, async move {
        let dst = (multicast_addr, multicast_port);
        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).await?;

        for _ in 0..N_STEPS {
            let _ = socket.send_to(&[1, 2, 3], dst).await?;
            tokio::time::sleep(tick).await;
        }
        Ok::<_, std::io::Error>(())
    });

    sim.run_until_complete(sent, Duration::from_secs(10))
        .unwrap()
        .unwrap();
    let got = sim
        .run_until_complete(received, Duration::from_secs(10))
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), N_STEPS);
    for (data, from) in got {
        assert_eq!(data, [1, 2, 3]);
        assert_eq!(from.ip(), "10.0.0.2".parse::<std::net::IpAddr>().unwrap());
    }
}

/// Two hosts on a 1 ms link.
fn pair(seed: u64) -> (Sim, HostId, HostId) {
    let mut sim = Sim::new(seed);
    let server = sim.host("server-0");
    let client = sim.host("client");
    sim.link(
        server,
        "10.0.0.1/24".parse().unwrap(),
        client,
        "10.0.0.2/24".parse().unwrap(),
        LinkConfig::default().with_delay(impnet_core::Duration::from_millis(1)),
    )
    .unwrap();
    (sim, server, client)
}

#[test]
fn broadcast_reaches_the_receiver_once_allowed() {
    let tick = Duration::from_millis(100);
    let (mut sim, server, client) = pair(7);
    let broadcast_port = 9000;

    let received = sim.spawn(server, async move {
        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, broadcast_port)).await?;

        let mut buf = [0; 1024];
        let mut got = Vec::new();
        for _ in 0..N_STEPS {
            let (n, addr) = socket.recv_from(&mut buf).await?;
            got.push((buf[..n].to_vec(), addr));
        }
        Ok::<_, std::io::Error>(got)
    });

    let sent = sim.spawn(client, async move {
        let dst = (Ipv4Addr::BROADCAST, broadcast_port);
        let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).await?;
        // Not in turmoil's example: without SO_BROADCAST the send is refused.
        let refused = socket.send_to(&[0], dst).await.unwrap_err().kind();
        assert_eq!(refused, std::io::ErrorKind::PermissionDenied);
        socket.set_broadcast(true)?;
        assert!(socket.broadcast()?);

        for _ in 0..N_STEPS {
            let _ = socket.send_to(&[1, 2, 3], dst).await?;
            tokio::time::sleep(tick).await;
        }
        Ok::<_, std::io::Error>(())
    });

    sim.run_until_complete(sent, Duration::from_secs(10))
        .unwrap()
        .unwrap();
    let got = sim
        .run_until_complete(received, Duration::from_secs(10))
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), N_STEPS);
    for (data, from) in got {
        assert_eq!(data, [1, 2, 3]);
        assert_eq!(from.ip(), "10.0.0.2".parse::<std::net::IpAddr>().unwrap());
    }
}

#[test]
fn multicast_joins_check_the_group_and_repeats() {
    let mut sim = Sim::new(6);
    let host = sim.host("a");
    let peer = sim.host("b");
    sim.link(
        host,
        "10.0.0.1/24".parse().unwrap(),
        peer,
        "10.0.0.2/24".parse().unwrap(),
        LinkConfig::default(),
    )
    .unwrap();
    let task = sim.spawn(host, async {
        let socket = UdpSocket::bind("0.0.0.0:9000").await.unwrap();
        let unicast = socket.join_multicast_v4("10.0.0.9".parse().unwrap(), Ipv4Addr::UNSPECIFIED);
        let twice = (
            socket.join_multicast_v4("239.0.0.1".parse().unwrap(), Ipv4Addr::UNSPECIFIED),
            socket.join_multicast_v4("239.0.0.1".parse().unwrap(), Ipv4Addr::UNSPECIFIED),
        );
        let left = socket.leave_multicast_v4("239.0.0.1".parse().unwrap(), Ipv4Addr::UNSPECIFIED);
        (
            unicast.is_err(),
            twice.0.is_ok(),
            twice.1.is_err(),
            left.is_ok(),
        )
    });
    let outcome = sim
        .run_until_complete(task, Duration::from_secs(1))
        .unwrap();
    assert_eq!(outcome, (true, true, true, true));
}
