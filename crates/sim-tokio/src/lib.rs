//! tokio applications on imp's deterministic simulator.
//!
//! Each simulated host is a full imp stack ([`impnet_sim::Sim`]) with a tokio runtime of
//! its own whose clock is the simulator's virtual clock; the host's tasks use the
//! sockets of [`net`] (tokio's `AsyncRead`/`AsyncWrite`), so an unmodified hyper server
//! or client runs on it. Links have imp's link model (rate, delay, queue, loss, ...),
//! and the test changes the network between runs: partitions and heals, new loss or
//! delay, host crashes and restarts. The same seed replays the same run, frame for
//! frame ([`Sim::trace_hash`]), and no wall-clock time is spent waiting: a minute of
//! idle virtual time passes in a fraction of a second.
//!
//! ```no_run
//! use impnet_sim_tokio::{Sim, net::{TcpListener, TcpStream}};
//! use impnet_phy::LinkConfig;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! let mut sim = Sim::new(7);
//! let server = sim.host("server");
//! let client = sim.host("client");
//! let link = LinkConfig::default().with_delay(impnet_core::Duration::from_millis(10));
//! sim.link(server, "10.0.0.1/24".parse().unwrap(), client, "10.0.0.2/24".parse().unwrap(), link)
//!     .unwrap();
//! sim.software(server, || async {
//!     let listener = TcpListener::bind("10.0.0.1:7").await.unwrap();
//!     loop {
//!         let (mut conn, _) = listener.accept().await.unwrap();
//!         tokio::spawn(async move {
//!             let mut buf = [0; 1024];
//!             while let Ok(n @ 1..) = conn.read(&mut buf).await {
//!                 let _ = conn.write_all(&buf[..n]).await;
//!             }
//!         });
//!     }
//! });
//! let task = sim.spawn(client, async {
//!     let mut conn = TcpStream::connect("10.0.0.1:7").await.unwrap();
//!     conn.write_all(b"hello").await.unwrap();
//!     let mut reply = [0; 5];
//!     conn.read_exact(&mut reply).await.unwrap();
//!     reply
//! });
//! let reply = sim.run_until_complete(task, std::time::Duration::from_secs(10)).unwrap();
//! assert_eq!(&reply, b"hello");
//! ```
//!
//! A string address may name a simulated host (`TcpStream::connect("server:80")`,
//! [`net::lookup`]).
//!
//! A test is `#[impnet_sim_tokio::test(seed = 7)] fn name(sim: &mut Sim) { .. }`
//! ([`test`](macro@test)), or, in a plain `#[test]`, `Sim::test(7, |sim| { .. })` ([`Sim::test`]):
//! either builds the simulation from the seed and, when the test fails, adds the seed
//! and the command that replays it (`IMPNET_SIM_SEED=7 cargo test NAME -- --exact`) to
//! the panic; `IMPNET_SIM_SEEDS=K` runs K seeds in a row.
//!
//! Application pairs run unmodified on simulated hosts, each with a test that they
//! exchange data byte for byte, that a seed replays its run (the same trace hash; for
//! tonic and quinn the same pcap of the link, byte for byte), and that they come
//! through a partition and a server crash and restart as their code expects (the
//! crate's tests/):
//! - hyper 1.x server and client (`hyper.rs`), axum server and hyper-util's pooled
//!   client (`turmoil_axum.rs`);
//! - tonic 0.14 gRPC server and client (`tonic.rs`): the server takes the accepted
//!   [`net::TcpStream`]s as its incoming stream, the client's channel dials through a
//!   connector; prost messages and a hand-written service, so no `protoc`;
//! - quinn 0.11 endpoints (`quinn.rs`) over [`net::UdpSocket`] through quinn's
//!   `AsyncUdpSocket` ([`net::UdpSocket::try_send_to`] and
//!   [`net::UdpSocket::poll_send_ready`] are what it needs); quinn's and rustls's
//!   randomness and wall clock come from the seed and the virtual clock through their
//!   configuration (the test file lists each input).
//!
//! The wall clock is the one input a simulation cannot hand an application: hyper's
//! servers stamp each response that has no `Date` header with the wall clock's second,
//! so the HTTP tests' handlers set it from the virtual clock ([`elapsed`]), or two runs
//! of a seed would differ whenever they straddled a second.
//!
//! Not yet: IPv6 addresses on links, broadcast and multicast beyond one link (links are
//! point to point, routers forward neither).
#![warn(missing_docs)]

mod host;
pub mod net;
mod seeded;
mod sim;
mod world;

pub use impnet_sim::{HostId, LinkId};
/// `#[impnet_sim_tokio::test]` / `#[impnet_sim_tokio::test(seed = N)]` on
/// `fn name(sim: &mut Sim) { .. }`: a `#[test]` whose body [`Sim::test`] runs on a
/// simulation of that seed (without one, a hash of the test's name), and which names
/// the seed and the replay command when it fails.
pub use impnet_sim_tokio_macros::test;
pub use sim::{Sim, SimError, Task};

/// Virtual time since the simulation began, as the current simulated host's task sees
/// it (turmoil's `elapsed`); None outside a simulated host's tasks.
pub fn elapsed() -> Option<std::time::Duration> {
    world::elapsed()
}
