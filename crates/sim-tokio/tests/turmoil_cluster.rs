//! turmoil's `examples/cluster`, ported: 50 echo servers, 50 clients that keep echoing
//! "hello world" for 10 s of virtual time through a client that reconnects to a random
//! server with backoff, and an attrition task that crashes 40 servers meanwhile.
//!
//! The server, client and workload code is turmoil's as written, with the socket types
//! and `turmoil::elapsed()` swapped for impnet-sim-tokio's. What changed is the harness:
//! turmoil joins every host to every other implicitly; here each host hangs off one
//! router by a link of its own (10 ms each way, so 20 ms host to host, turmoil's mean
//! latency), and the driver loop runs the simulation in 1 ms steps (turmoil's tick)
//! and stops when both clients have finished, instead of `sim.step()`.

use std::cell::{RefCell, RefMut};
use std::collections::VecDeque;
use std::error::Error;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use impnet_phy::LinkConfig;
use impnet_sim_tokio::net::{TcpListener, TcpStream};
use impnet_sim_tokio::{HostId, Sim, Task};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

// ---- the harness: turmoil's implicit full mesh as a star around one router ----

/// The router every host hangs off, and the next subnet to give out.
struct Star {
    router: HostId,
    next: u8,
}

impl Star {
    fn new(sim: &mut Sim) -> Star {
        Star {
            router: sim.router("switch"),
            next: 0,
        }
    }

    /// A host on a link of its own to the router (10.0.n.2, the router 10.0.n.1).
    fn host(&mut self, sim: &mut Sim, name: &str) -> HostId {
        let n = self.next;
        self.next += 1;
        let host = sim.host(name);
        let config = LinkConfig::default().with_delay(impnet_core::Duration::from_millis(10));
        let link = sim
            .link(
                host,
                format!("10.0.{n}.2/24").parse().unwrap(),
                self.router,
                format!("10.0.{n}.1/24").parse().unwrap(),
                config,
            )
            .unwrap();
        sim.default_route(host, link);
        host
    }
}

// ---- turmoil's examples/cluster/src/lib.rs ----

#[derive(Clone)]
pub struct Cluster {
    shared: Rc<RefCell<State>>,
    rng: Rc<RefCell<SmallRng>>,
}

pub struct State {
    machines: Vec<Machine>,
    events: VecDeque<Event>,
}

pub enum Event {
    Crash(String),
}

#[derive(Clone, Debug)]
pub struct Machine {
    pub name: String,
    pub failed: bool,
}

impl Cluster {
    pub fn new(servers: usize, seed: u64) -> Self {
        let machines = (0..servers)
            .map(|i| format!("server_{}", i))
            .map(|name| Machine {
                name,
                failed: false,
            })
            .collect();
        let rng = Rc::new(RefCell::new(SmallRng::seed_from_u64(seed)));
        let state = State {
            machines,
            events: VecDeque::new(),
        };
        Cluster {
            shared: Rc::new(RefCell::new(state)),
            rng,
        }
    }

    fn setup(&self, sim: &mut Sim, star: &mut Star) {
        let me = self.shared.borrow();
        for machine in me.machines.iter() {
            let host = star.host(sim, &machine.name);
            sim.software(host, move || async move {
                if let Err(e) = server("0.0.0.0:8080".into()).await {
                    tracing::error!("server error: {:?}", e);
                }
            });
        }
    }

    pub fn get_machines(&self) -> Vec<Machine> {
        self.shared.borrow().machines.clone()
    }

    pub fn crash(&self, machine: String) {
        self.shared
            .borrow_mut()
            .events
            .push_back(Event::Crash(machine));
    }

    pub fn rng(&self) -> RefMut<'_, SmallRng> {
        self.rng.borrow_mut()
    }

    /// Apply the crashes the workload asked for between 1 ms steps until every client
    /// has finished (turmoil: `sim.step()` until it returns true); the crashes made.
    fn run<T>(&mut self, sim: &mut Sim, clients: &[Task<T>]) -> Result<usize, Box<dyn Error>> {
        let limit = Duration::from_secs(360);
        let mut crashes = 0;
        loop {
            for event in self.shared.borrow_mut().events.drain(..) {
                match event {
                    Event::Crash(machine) => {
                        let host = sim.host_named(&machine).ok_or("no such machine")?;
                        sim.crash(host);
                        crashes += 1;
                    }
                }
            }
            if clients.iter().all(Task::is_finished) {
                return Ok(crashes);
            }
            if Duration::from_nanos(sim.now().as_nanos()) >= limit {
                return Err(format!("still running after {limit:?} (seed {})", sim.seed()).into());
            }
            sim.run_for(Duration::from_millis(1))?;
        }
    }
}

#[expect(clippy::manual_async_fn, reason = "turmoil's example as written")]
pub fn echo_client_cycle(
    cluster: Cluster,
    clients: usize,
    duration: Duration,
) -> impl Future<Output = Result<(), Box<dyn Error>>> {
    async move {
        let mut join = JoinSet::new();

        for _client in 0..clients {
            let cluster = cluster.clone();

            join.spawn_local(async move {
                let mut client = Client::new(cluster);

                while elapsed() < duration {
                    if let Err(e) = client.request().await {
                        client.reset();
                        tracing::debug!("request error: {:?}", e)
                    }
                }
                client.requests
            });
        }

        let done = join.join_all().await;
        // Not in turmoil's example: the clients got their echoes.
        assert!(done.iter().all(|&n| n > 0), "requests per client: {done:?}");
        Ok(())
    }
}

/// turmoil's `turmoil::elapsed()`.
fn elapsed() -> Duration {
    impnet_sim_tokio::elapsed().expect("inside a simulated host")
}

#[expect(clippy::manual_async_fn, reason = "turmoil's example as written")]
pub fn machine_attrition(
    cluster: Cluster,
    duration: Duration,
    machines_to_kill: usize,
    machines_to_leave: usize,
) -> impl Future<Output = Result<(), Box<dyn Error>>> {
    async move {
        tracing::info!("starting attrition workload");
        let mut killed_machines = 0;

        let mean_delay = duration / machines_to_kill as u32;

        loop {
            if elapsed() > duration {
                break;
            }

            let jitter = cluster.rng().random_range(0..mean_delay.as_millis());
            tokio::time::sleep(Duration::from_millis(jitter as u64)).await;

            let machines = cluster.get_machines();

            let alive_machines = machines.iter().filter(|m| !m.failed).collect::<Vec<_>>();

            if killed_machines < machines_to_kill && alive_machines.len() > machines_to_leave {
                // Kill random machine
                let machine_to_kill = alive_machines.choose(&mut *cluster.rng()).unwrap();

                tracing::info!("assassinating: {}", machine_to_kill.name);

                cluster.crash(machine_to_kill.name.clone());
                killed_machines += 1;
            }
        }

        Ok(())
    }
}

async fn server(addr: String) -> Result<(), Box<dyn Error>> {
    let listener = TcpListener::bind(&addr).await?;
    tracing::debug!("Listening on: {addr}");

    loop {
        let (mut socket, _) = listener.accept().await?;

        tokio::spawn(async move {
            let mut buf = vec![0; 1024];

            loop {
                let Ok(n) = socket.read(&mut buf).await else {
                    tracing::error!("failed to read data from socket");
                    return;
                };

                if n == 0 {
                    return;
                }

                let Ok(_) = socket.write_all(&buf[0..n]).await else {
                    tracing::error!("failed to write data to socket");
                    return;
                };
            }
        });
    }
}

struct Client {
    cluster: Cluster,
    conn: Option<TcpStream>,
    /// Not in turmoil's example: echoes received, for the test's assertion.
    requests: u64,
}

impl Client {
    fn new(cluster: Cluster) -> Self {
        Self {
            cluster,
            conn: None,
            requests: 0,
        }
    }

    async fn connect(&mut self) -> Result<(), Box<dyn Error>> {
        let mut attempt = 0;
        let init_backoff = 50;

        let machines = self.cluster.get_machines();

        loop {
            let machine = machines.choose(&mut *self.cluster.rng()).unwrap();

            tracing::debug!("connecting to {}", machine.name);

            let addr = format!("{}:8080", machine.name);

            match tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(&addr)).await {
                Ok(Ok(stream)) => {
                    self.conn = Some(stream);
                    return Ok(());
                }
                Ok(Err(e)) => {
                    tracing::debug!("connect error: {:?}", e);
                }
                Err(_) => {
                    tracing::debug!("connect timeout");
                }
            };

            attempt += 1;

            let backoff = std::cmp::min(init_backoff * 2u64.pow(attempt), 3600);
            let jitter = self.cluster.rng().random_range(0..backoff);

            tokio::time::sleep(Duration::from_millis(jitter)).await;
        }
    }

    async fn request(&mut self) -> Result<(), Box<dyn Error>> {
        if self.conn.is_none() {
            self.connect()
                .await
                .map_err(|e| format!("connect: {}", e))?;
        }

        let stream = self.conn.as_mut().unwrap();

        let msg = b"hello world";
        stream
            .write_all(msg)
            .await
            .map_err(|e| format!("write: {}", e))?;

        let mut buf = vec![0; msg.len()];
        let _n = stream
            .read_exact(&mut buf)
            .await
            .map_err(|e| format!("read: {}", e))?;
        assert_eq!(buf, msg);
        self.requests += 1;

        Ok(())
    }

    fn reset(&mut self) {
        self.conn = None;
    }
}

// ---- turmoil's examples/cluster/tests/cluster.rs ----

/// Runs turmoil's `retries` scenario; returns the trace hash and the wall time it took.
fn retries(seed: u64) -> (u64, Duration, Duration) {
    let started = std::time::Instant::now();
    let test_duration = Duration::from_secs(10);

    let mut cluster = Cluster::new(50, seed);
    let mut sim = Sim::new(seed);
    let mut star = Star::new(&mut sim);
    cluster.setup(&mut sim, &mut star);

    let echo = star.host(&mut sim, "echo_client_cycle");
    let echo = sim.spawn(echo, echo_client_cycle(cluster.clone(), 50, test_duration));
    let attrition = star.host(&mut sim, "attrition");
    let attrition = sim.spawn(
        attrition,
        machine_attrition(cluster.clone(), test_duration, 40, 10),
    );

    let clients = [echo, attrition];
    let crashes = cluster.run(&mut sim, &clients).unwrap();
    assert_eq!(crashes, 40, "the attrition workload's crashes");
    let [echo, attrition] = clients;
    let limit = Duration::from_secs(360);
    sim.run_until_complete(echo, limit).unwrap().unwrap();
    sim.run_until_complete(attrition, limit).unwrap().unwrap();
    let virtual_time = Duration::from_nanos(sim.now().as_nanos());
    (sim.trace_hash(), virtual_time, started.elapsed())
}

#[test]
fn cluster_retries() {
    let (hash, virtual_time, wall) = retries(8877673959163467592);
    eprintln!(
        "turmoil cluster example on imp: {virtual_time:?} virtual in {wall:?} wall, \
         {:.3} wall s per virtual s",
        wall.as_secs_f64() / virtual_time.as_secs_f64()
    );
    // The same seed replays the run frame for frame.
    assert_eq!(retries(8877673959163467592).0, hash);
}
