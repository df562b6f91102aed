//! `TcpStream::into_split`: the halves work from different tasks, dropping the write
//! half sends our FIN while the read half still reads, and `reunite` gives the stream
//! back only from its own halves.

use std::time::Duration;

use impnet_phy::LinkConfig;
use impnet_sim_tokio::Sim;
use impnet_sim_tokio::net::{TcpListener, TcpStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn pair(seed: u64) -> (Sim, impnet_sim_tokio::HostId) {
    let mut sim = Sim::new(seed);
    let server = sim.host("server");
    let client = sim.host("client");
    sim.link(
        server,
        "10.0.0.1/24".parse().unwrap(),
        client,
        "10.0.0.2/24".parse().unwrap(),
        LinkConfig::default().with_delay(impnet_core::Duration::from_millis(5)),
    )
    .unwrap();
    // Reads everything until our FIN, then answers how many bytes it got and closes.
    sim.software(server, || async {
        let listener = TcpListener::bind("0.0.0.0:7").await.unwrap();
        while let Ok((conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = conn.into_split();
                let mut all = Vec::new();
                r.read_to_end(&mut all).await.unwrap();
                w.write_all(format!("got {}", all.len()).as_bytes())
                    .await
                    .unwrap();
            });
        }
    });
    (sim, client)
}

#[test]
fn halves_in_two_tasks_and_the_write_half_closes_our_side() {
    let (mut sim, client) = pair(1);
    let task = sim.spawn(client, async {
        let stream = TcpStream::connect("server:7").await.unwrap();
        let (mut r, mut w) = stream.into_split();
        assert_eq!(r.peer_addr().unwrap(), w.peer_addr().unwrap());
        let writer = tokio::spawn(async move {
            for _ in 0..100 {
                w.write_all(&[7; 1000]).await.unwrap();
            }
            // Dropped here: the FIN tells the server we are done.
        });
        let mut answer = String::new();
        r.read_to_string(&mut answer).await.unwrap();
        writer.await.unwrap();
        answer
    });
    let answer = sim
        .run_until_complete(task, Duration::from_secs(30))
        .unwrap();
    assert_eq!(answer, "got 100000");
}

#[test]
fn reunite_only_from_its_own_halves() {
    let (mut sim, client) = pair(2);
    let task = sim.spawn(client, async {
        let (r1, w1) = TcpStream::connect("server:7").await.unwrap().into_split();
        let (r2, w2) = TcpStream::connect("server:7").await.unwrap().into_split();
        let crossed = r1.reunite(w2).unwrap_err();
        let (r1, w2) = (crossed.0, crossed.1);
        let mut one = r1.reunite(w1).unwrap();
        drop(r2.reunite(w2).unwrap());
        // The reunited stream still writes and reads: the FIN goes with shutdown.
        one.write_all(b"abc").await.unwrap();
        one.shutdown().await.unwrap();
        let mut answer = String::new();
        one.read_to_string(&mut answer).await.unwrap();
        answer
    });
    let answer = sim
        .run_until_complete(task, Duration::from_secs(30))
        .unwrap();
    assert_eq!(answer, "got 3");
}
