//! Host names as addresses (`TcpStream::connect("server:7")`, `net::lookup`), virtual
//! time since the start (`elapsed`), and hosts behind a router reaching each other by
//! their default routes, also after one of them crashed and restarted.

use std::io::ErrorKind;
use std::net::IpAddr;
use std::time::Duration;

use impnet_phy::LinkConfig;
use impnet_sim_tokio::net::{TcpListener, TcpStream, UdpSocket, lookup};
use impnet_sim_tokio::{HostId, LinkId, Sim};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `server` and `client`, each on a link of its own to one router, with default routes.
fn star(seed: u64) -> (Sim, HostId, HostId) {
    let mut sim = Sim::new(seed);
    let router = sim.router("router");
    let join = |sim: &mut Sim, name: &str, n: u8| -> (HostId, LinkId) {
        let host = sim.host(name);
        let config = LinkConfig::default().with_delay(impnet_core::Duration::from_millis(5));
        let link = sim
            .link(
                host,
                format!("10.0.{n}.2/24").parse().unwrap(),
                router,
                format!("10.0.{n}.1/24").parse().unwrap(),
                config,
            )
            .unwrap();
        sim.default_route(host, link);
        (host, link)
    };
    let (server, _) = join(&mut sim, "server", 1);
    let (client, _) = join(&mut sim, "client", 2);
    sim.software(server, || async {
        let listener = TcpListener::bind("0.0.0.0:7").await.unwrap();
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0; 64];
                while let Ok(n @ 1..) = conn.read(&mut buf).await {
                    let _ = conn.write_all(&buf[..n]).await;
                }
            });
        }
    });
    (sim, server, client)
}

async fn echo(to: &str) -> std::io::Result<Vec<u8>> {
    let mut conn = TcpStream::connect(to).await?;
    conn.write_all(b"by name").await?;
    let mut reply = vec![0; 7];
    conn.read_exact(&mut reply).await?;
    Ok(reply)
}

#[test]
fn names_resolve_to_the_hosts_first_address() {
    let (mut sim, _, client) = star(1);
    assert_eq!(sim.lookup("server"), Some("10.0.1.2".parse().unwrap()));
    assert_eq!(sim.lookup("nobody"), None);
    assert_eq!(sim.host_named("client"), Some(client));
    let task = sim.spawn(client, async {
        let server = lookup("server").unwrap();
        let by_name = echo("server:7").await.unwrap();
        let by_pair = TcpStream::connect(("server", 7)).await.unwrap().peer_addr();
        let unknown = TcpStream::connect("nobody:7").await.unwrap_err().kind();
        let no_port = UdpSocket::bind("client").await.unwrap_err().kind();
        (server, by_name, by_pair.unwrap(), unknown, no_port)
    });
    let (server, by_name, by_pair, unknown, no_port) = sim
        .run_until_complete(task, Duration::from_secs(10))
        .unwrap();
    assert_eq!(server, "10.0.1.2".parse::<IpAddr>().unwrap());
    assert_eq!(by_name, b"by name");
    assert_eq!(by_pair, "10.0.1.2:7".parse().unwrap());
    assert_eq!(unknown, ErrorKind::NotFound);
    assert_eq!(no_port, ErrorKind::InvalidInput);
}

#[test]
fn elapsed_is_virtual_time_since_the_start() {
    let (mut sim, _, client) = star(2);
    assert_eq!(impnet_sim_tokio::elapsed(), None, "outside a host");
    sim.run_for(Duration::from_secs(3)).unwrap();
    let task = sim.spawn(client, async {
        let before = impnet_sim_tokio::elapsed().unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        (before, impnet_sim_tokio::elapsed().unwrap())
    });
    let (before, after) = sim
        .run_until_complete(task, Duration::from_secs(10))
        .unwrap();
    assert_eq!(before, Duration::from_secs(3));
    assert_eq!(after, Duration::from_secs(5));
}

#[test]
fn default_routes_survive_a_crash() {
    let (mut sim, server, client) = star(3);
    sim.crash(server);
    sim.run_for(Duration::from_millis(100)).unwrap();
    sim.restart(server);
    let task = sim.spawn(client, echo("server:7"));
    let reply = sim
        .run_until_complete(task, Duration::from_secs(10))
        .unwrap();
    assert_eq!(reply.unwrap(), b"by name");
    // And the client's route after its own crash.
    sim.crash(client);
    sim.restart(client);
    let task = sim.spawn(client, echo("server:7"));
    let reply = sim
        .run_until_complete(task, Duration::from_secs(20))
        .unwrap();
    assert_eq!(reply.unwrap(), b"by name");
}
