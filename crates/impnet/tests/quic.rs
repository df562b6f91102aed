//! quinn over imp: a QUIC client and server, each on its own imp stack, the two joined
//! by an in-memory pipe through the link model (delay and random loss). Streams are
//! echoed byte-exact: 1 MiB each way on one bidirectional stream, and several streams
//! at once; over IPv6 too. No root needed.
#![cfg(feature = "quic")]
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use impnet::Runtime;
use impnet::core::{Duration as ImpDuration, IfaceConfig, Secret, StackConfig};
use impnet::phy::{Impair, LinkConfig, LinkModel, pipe};
use impnet::quic::{self, quinn};
use impnet::wire::{ethernet, ipv4, ipv6};

const SERVER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// Two runtimes on a pipe; the client's end goes through the link model both ways.
fn pair(link: LinkConfig) -> (Runtime, Runtime) {
    let (a_end, b_end) = pipe(1514);
    let a_end = Impair::new(a_end, LinkModel::new(link, 7)).with_rx(LinkModel::new(link, 8));
    let mut config = StackConfig::default();
    config.ipv6.dad_transmits = 0;
    let node = |last: u8| {
        let rt =
            Runtime::with_secret(config.clone(), Secret::from_bytes([last; 16])).expect("runtime");
        (rt, ethernet::Address([0x02, 0, 0, 0, 0, last]))
    };
    let (a, a_mac) = node(1);
    let (b, b_mac) = node(2);
    let a_iface = a.add_device(a_end, IfaceConfig::new(a_mac, 1500));
    let b_iface = b.add_device(b_end, IfaceConfig::new(b_mac, 1500));
    for (rt, iface, last) in [(&a, a_iface, 1u8), (&b, b_iface, 2)] {
        rt.add_address(
            iface,
            ipv4::Cidr {
                address: Ipv4Addr::new(192, 0, 2, last),
                prefix_len: 24,
            },
        );
        let v6 = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(last));
        rt.add_address6(
            iface,
            ipv6::Cidr {
                address: v6,
                prefix_len: 64,
            },
        );
    }
    (a, b)
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13).wrapping_add(seed) as u8)
        .collect()
}

/// Echo every bidirectional stream of every connection until the endpoint closes.
async fn echo_server(endpoint: quinn::Endpoint) {
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(async move {
            let Ok(connection) = incoming.await else {
                return;
            };
            while let Ok((mut send, mut recv)) = connection.accept_bi().await {
                tokio::spawn(async move {
                    let data = recv.read_to_end(16 << 20).await.expect("server read");
                    send.write_all(&data).await.expect("server write");
                    send.finish().expect("server finish");
                    let _ = send.stopped().await;
                });
            }
        });
    }
}

/// Send `data` on a new bidirectional stream and return what comes back.
async fn round_trip(connection: &quinn::Connection, data: &[u8]) -> Vec<u8> {
    let (mut send, mut recv) = connection.open_bi().await.expect("open_bi");
    send.write_all(data).await.expect("client write");
    send.finish().expect("client finish");
    recv.read_to_end(16 << 20).await.expect("client read")
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime")
}

/// Connect a client on `a` to an echo server on `b` at `server_ip`, then run `f`.
async fn with_connection<F, Fut>(
    a: &Runtime,
    b: &Runtime,
    server_ip: IpAddr,
    f: F,
) -> quinn::ConnectionStats
where
    F: FnOnce(quinn::Connection) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (server_config, cert) = quic::self_signed(vec!["imp.test".into()]).expect("certificate");
    let server =
        quic::endpoint(b, (server_ip, 4433), Some(server_config)).expect("server endpoint");
    assert_eq!(
        server.local_addr().unwrap(),
        SocketAddr::new(server_ip, 4433)
    );
    tokio::spawn(echo_server(server.clone()));
    let unspecified: IpAddr = if server_ip.is_ipv4() {
        Ipv4Addr::UNSPECIFIED.into()
    } else {
        Ipv6Addr::UNSPECIFIED.into()
    };
    let client = quic::endpoint(a, (unspecified, 0), None).expect("client endpoint");
    let config = quic::client_trusting(cert).expect("client config");
    let connection = client
        .connect_with(config, SocketAddr::new(server_ip, 4433), "imp.test")
        .expect("connect")
        .await
        .expect("handshake");
    f(connection.clone()).await;
    let stats = connection.stats();
    connection.close(0u32.into(), b"done");
    client.wait_idle().await;
    server.close(0u32.into(), b"done");
    stats
}

#[test]
fn one_mebibyte_each_way_and_many_streams_over_a_lossy_link() {
    let link = LinkConfig {
        delay: ImpDuration::from_millis(2),
        loss: 0.01,
        ..LinkConfig::default()
    };
    let (a, b) = pair(link);
    let stats = tokio_runtime().block_on(async {
        let run = with_connection(&a, &b, SERVER_V4.into(), |connection| async move {
            let big = pattern(1 << 20, 1);
            let echoed = round_trip(&connection, &big).await;
            assert_eq!(echoed.len(), big.len());
            assert!(echoed == big, "1 MiB echoed byte-exact");
            // Several streams at once, each its own content.
            let streams = (0..8u32).map(|i| {
                let connection = connection.clone();
                async move {
                    let data = pattern(64 * 1024 + i as usize * 1000, 100 + i);
                    let echoed = round_trip(&connection, &data).await;
                    assert!(echoed == data, "stream {i} echoed byte-exact");
                }
            });
            let handles: Vec<_> = streams.map(tokio::spawn).collect();
            for handle in handles {
                handle.await.expect("stream task");
            }
        });
        tokio::time::timeout(Duration::from_secs(120), run)
            .await
            .expect("transfer timed out")
    });
    // The link lost packets, and QUIC recovered them.
    assert!(stats.path.lost_packets > 0, "no loss seen: {stats:?}");
    assert!(stats.udp_tx.datagrams > 700, "{stats:?}");
}

#[test]
fn a_connection_over_ipv6() {
    let (a, b) = pair(LinkConfig::default());
    tokio_runtime().block_on(async {
        let run = with_connection(&a, &b, SERVER_V6.into(), |connection| async move {
            assert_eq!(
                connection.remote_address(),
                SocketAddr::new(SERVER_V6.into(), 4433)
            );
            let data = pattern(200_000, 9);
            assert!(round_trip(&connection, &data).await == data);
        });
        tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .expect("timed out")
    });
}
