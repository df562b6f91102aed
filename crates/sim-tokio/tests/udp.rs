//! UDP between simulated hosts: an echo across a lossy link, and a client that retries
//! on its own timer until an answer comes.

mod common;

use std::time::Duration;

use impnet_sim_tokio::net::UdpSocket;

/// One echo exchange with retries; the attempts it took.
fn echo_with_retries(seed: u64) -> u64 {
    let (mut sim, server, client, _) = common::pair(seed, common::path(0, 15, 0.5));
    sim.software(server, || async {
        let socket = UdpSocket::bind("10.0.0.1:53").await.unwrap();
        let mut buf = [0; 1500];
        loop {
            // A lost ARP exchange leaves an error on the socket (reported once): a
            // UDP server carries on.
            if let Ok((n, from)) = socket.recv_from(&mut buf).await {
                let _ = socket.send_to(&buf[..n], from).await;
            }
        }
    });
    let task = sim.spawn(client, async {
        let socket = UdpSocket::bind("0.0.0.0:0").await.unwrap();
        let mut buf = [0; 1500];
        for attempt in 1.. {
            let _ = socket.send_to(b"ping", "10.0.0.1:53").await;
            let wait = tokio::time::timeout(Duration::from_millis(100), socket.recv_from(&mut buf));
            if let Ok(Ok((n, from))) = wait.await {
                return (attempt, buf[..n].to_vec(), from);
            }
        }
        unreachable!()
    });
    let (attempts, reply, from) = sim
        .run_until_complete(task, Duration::from_secs(30))
        .unwrap();
    assert_eq!(reply, b"ping");
    assert_eq!(from, "10.0.0.1:53".parse().unwrap());
    // Each failed attempt waited its 100 ms of virtual time.
    assert!(sim.now().as_millis() >= 30 + 100 * (attempts - 1));
    attempts
}

#[test]
fn udp_echo_retries_through_loss() {
    let attempts: Vec<u64> = (21..29).map(echo_with_retries).collect();
    // Half the datagrams are lost each way: some seeds need retries.
    assert!(attempts.iter().any(|&a| a > 1), "attempts {attempts:?}");
    assert_eq!(
        attempts,
        (21..29).map(echo_with_retries).collect::<Vec<_>>()
    );
}
