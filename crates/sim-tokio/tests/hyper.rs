//! An unmodified hyper 1.x server and client on simulated hosts: the body arrives byte
//! for byte, a seed replays its run frame for frame, a partition times a request out
//! and the heal lets the next one through, and a crashed server answers again after
//! its restart.

mod common;

use std::cell::Cell;
use std::convert::Infallible;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use impnet_sim_tokio::SimError;
use impnet_sim_tokio::net::{TcpListener, TcpStream};

use common::{pair, path};

const SERVER: &str = "10.0.0.1:80";

/// `len` bytes that no shifted or truncated copy of itself matches.
fn pattern(len: usize) -> Bytes {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ (i / 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// `GET /n` answers `pattern(n)`.
async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let len = req.uri().path()[1..].parse().unwrap_or(0);
    Ok(common::dated(Response::new(Full::new(pattern(len)))))
}

/// A hyper server: a task per connection, as hyper's examples write it.
async fn serve() {
    let listener = TcpListener::bind(SERVER).await.expect("bind");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(handle))
                .await;
        });
    }
}

/// A hyper client's GET on a new connection.
async fn get(path: &str) -> Result<(StatusCode, Bytes), Box<dyn std::error::Error + Send + Sync>> {
    let stream = TcpStream::connect(SERVER).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let request = Request::get(path)
        .header("host", "server")
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

#[test]
fn hyper_body_arrives_byte_exact() {
    let (mut sim, server, client, _) = pair(1, path(10_000_000, 5, 0.0));
    sim.software(server, serve);
    let task = sim.spawn(client, get("/300000"));
    let (status, body) = sim
        .run_until_complete(task, Duration::from_secs(60))
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.len(), 300_000);
    assert!(
        body == pattern(300_000),
        "the body differs from what the server sent"
    );
    // 300 kB at 10 Mbit/s take at least 240 ms of virtual time.
    assert!(sim.now().as_millis() >= 240, "virtual time {}", sim.now());
}

/// Three requests over a lossy path; the trace hash and the virtual end time.
fn lossy_run(seed: u64) -> (u64, u64) {
    let (mut sim, server, client, _) = pair(seed, path(5_000_000, 10, 0.02));
    sim.software(server, serve);
    let task = sim.spawn(client, async {
        let mut bodies = Vec::new();
        for len in [1_000, 50_000, 200_000] {
            let (_, body) = get(&format!("/{len}")).await.unwrap();
            bodies.push(body);
        }
        bodies
    });
    let bodies = sim
        .run_until_complete(task, Duration::from_secs(120))
        .unwrap();
    for (body, len) in bodies.iter().zip([1_000, 50_000, 200_000]) {
        assert!(
            *body == pattern(len),
            "seed {seed}: a {len}-byte body differs"
        );
    }
    (sim.trace_hash(), sim.now().as_nanos())
}

#[test]
fn same_seed_same_trace_other_seed_differs() {
    let first = lossy_run(11);
    assert_eq!(first, lossy_run(11), "seed 11 did not replay");
    assert_ne!(
        first.0,
        lossy_run(12).0,
        "seeds 11 and 12 lost the same frames"
    );
}

#[test]
fn partition_times_out_and_heal_lets_through() {
    let (mut sim, server, client, link) = pair(3, path(10_000_000, 20, 0.0));
    sim.software(server, serve);
    let before = sim.spawn(client, get("/1000"));
    let (status, _) = sim
        .run_until_complete(before, Duration::from_secs(10))
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::OK);

    sim.partition(link);
    // The timeout is made inside the task: tokio's timers need the host's runtime.
    let cut = sim.spawn(client, async {
        let start = tokio::time::Instant::now();
        let outcome = tokio::time::timeout(Duration::from_secs(5), get("/1000")).await;
        (outcome.is_err(), start.elapsed())
    });
    let (timed_out, waited) = sim
        .run_until_complete(cut, Duration::from_secs(60))
        .unwrap();
    assert!(timed_out, "a request crossed the partition");
    // The timeout fires on tokio's next millisecond boundary after its deadline, and
    // the simulator stops there: not a millisecond late.
    assert_eq!(waited.as_millis(), 5_000, "timed out after {waited:?}");
    assert!(
        sim.net().lost_down(link, 1) > 0,
        "the client sent nothing into the cut"
    );

    sim.heal(link);
    let after = sim.spawn(client, async {
        tokio::time::timeout(Duration::from_secs(5), get("/20000")).await
    });
    let (status, body) = sim
        .run_until_complete(after, Duration::from_secs(120))
        .unwrap()
        .expect("no timeout after the heal")
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(body == pattern(20_000));
}

#[test]
fn crashed_server_answers_after_restart() {
    let (mut sim, server, client, _) = pair(5, path(10_000_000, 5, 0.0));
    let starts = Rc::new(Cell::new(0));
    let counter = Rc::clone(&starts);
    sim.software(server, move || {
        counter.set(counter.get() + 1);
        serve()
    });
    sim.run_for(Duration::from_millis(100)).unwrap();
    sim.crash(server);
    // The fresh stack has no listener: the connection is refused (a reset).
    let refused = sim.spawn(client, get("/10"));
    let error = sim
        .run_until_complete(refused, Duration::from_secs(30))
        .unwrap()
        .expect_err("a crashed server answered");
    let io = error.downcast_ref::<std::io::Error>().expect("an io error");
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);

    sim.restart(server);
    let task = sim.spawn(client, get("/5000"));
    let (status, body) = sim
        .run_until_complete(task, Duration::from_secs(60))
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(body == pattern(5_000));
    assert_eq!(starts.get(), 2);
}

#[test]
fn a_task_that_cannot_finish_names_the_seed() {
    let (mut sim, _, client, _) = pair(9, path(0, 1, 0.0));
    let task = sim.spawn(client, std::future::pending::<()>());
    let error = sim
        .run_until_complete(task, Duration::from_secs(60))
        .unwrap_err();
    assert!(matches!(error, SimError::TimeLimit { seed: 9, .. }));
    assert!(error.to_string().contains("seed 9"));
}

#[test]
fn a_loss_episode_mid_transfer_costs_frames_not_bytes() {
    let clean = path(2_000_000, 10, 0.0);
    let (mut sim, server, client, link) = pair(13, clean);
    sim.software(server, serve);
    let task = sim.spawn(client, get("/400000"));
    // 400 kB at 2 Mbit/s take 1.6 s: a quarter of the frames are lost in the middle.
    sim.run_for(Duration::from_millis(500)).unwrap();
    sim.set_link(link, path(2_000_000, 10, 0.25)).unwrap();
    sim.run_for(Duration::from_millis(500)).unwrap();
    sim.set_link(link, clean).unwrap();
    let (status, body) = sim
        .run_until_complete(task, Duration::from_secs(120))
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert!(
        body == pattern(400_000),
        "the body differs after the loss episode"
    );
    let lost = sim.net().link_stats(link, 0).dropped_loss;
    assert!(lost > 10, "the episode lost {lost} of the server's frames");
}
