//! The driver: simulated hosts, their tokio runtimes and the links between them, run
//! together on one virtual clock.

use std::cell::{RefCell, RefMut};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use impnet_core::{Instant, StackConfig};
use impnet_phy::{LinkConfig, LinkConfigError};
use impnet_sim::{HostId, LinkId};
use impnet_wire::ipv4::Cidr;

use crate::host::HostRuntime;
use crate::world::{self, HostState, World};

/// Events a run may process before it is stopped as a runaway (a cap, like
/// [`impnet_sim::Sim::run_until`]'s, so a livelock fails instead of hanging).
const STEP_CAP: u64 = 100_000_000;

/// A host's software: made again from this factory when the host restarts.
type Software = Box<dyn Fn() -> Pin<Box<dyn Future<Output = ()>>>>;

/// Why a run stopped early.
#[derive(Debug)]
pub enum SimError {
    /// The network simulator stopped (step cap); it names the seed.
    Net(impnet_sim::SimError),
    /// The awaited task had not finished at the time limit.
    TimeLimit {
        /// The seed of the run, to replay it.
        seed: u64,
        /// Virtual time when the limit was reached.
        at: Instant,
    },
    /// The awaited task's host crashed before it finished.
    Crashed {
        /// The seed of the run, to replay it.
        seed: u64,
        /// The host.
        host: String,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Net(e) => e.fmt(f),
            SimError::TimeLimit { seed, at } => write!(
                f,
                "simulation (seed {seed}): the task had not finished at its time limit \
                 t={at}; rerun with the same seed to replay"
            ),
            SimError::Crashed { seed, host } => write!(
                f,
                "simulation (seed {seed}): host {host} crashed before the task finished; \
                 rerun with the same seed to replay"
            ),
        }
    }
}

impl std::error::Error for SimError {}

impl From<impnet_sim::SimError> for SimError {
    fn from(e: impnet_sim::SimError) -> SimError {
        SimError::Net(e)
    }
}

/// A task started with [`Sim::spawn`]; [`Sim::run_until_complete`] runs the simulation
/// until it has finished and returns its output.
pub struct Task<T> {
    host: HostId,
    incarnation: u64,
    handle: tokio::task::JoinHandle<T>,
}

impl<T> Task<T> {
    /// The host the task runs on.
    pub fn host(&self) -> HostId {
        self.host
    }

    /// The task has finished (or was dropped with its crashed host): for a driver that
    /// runs the simulation in steps and stops when its clients are done.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// A host as the driver keeps it.
struct Host {
    /// Its tokio runtime (None: a router, or a host that is down).
    runtime: Option<HostRuntime>,
    /// Started at once and again on every restart.
    software: Vec<Software>,
    /// The stack's configuration, for restarts.
    config: StackConfig,
    /// Takes tasks (false for routers).
    runs_tasks: bool,
}

/// A deterministic simulation of tokio applications on imp stacks.
///
/// Call order: add hosts ([`Sim::host`], [`Sim::router`]) and links ([`Sim::link`]);
/// give hosts software ([`Sim::software`], restarted after a crash) or one-off tasks
/// ([`Sim::spawn`]); then run ([`Sim::run_for`], [`Sim::run_until_complete`]),
/// changing the network between runs ([`Sim::partition`], [`Sim::heal`],
/// [`Sim::set_link`], [`Sim::crash`], [`Sim::restart`]). Inside a host's tasks, the
/// sockets of [`crate::net`] are that host's.
///
/// Virtual time moves from event to event: a frame's arrival or a stack timer, and the
/// millisecond boundaries at which tokio timers can fire. No wall-clock time is spent
/// waiting. The same seed and the same calls give the same run, frame for frame.
pub struct Sim {
    pub(crate) world: Rc<RefCell<World>>,
    hosts: Vec<Host>,
    seed: u64,
}

impl Sim {
    /// An empty simulation at virtual time zero; every random choice derives from `seed`.
    pub fn new(seed: u64) -> Sim {
        let world = World {
            net: impnet_sim::Sim::new(seed),
            hosts: Vec::new(),
        };
        Sim {
            world: Rc::new(RefCell::new(world)),
            hosts: Vec::new(),
            seed,
        }
    }

    /// The seed the simulation was built from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Current virtual time.
    pub fn now(&self) -> Instant {
        self.world.borrow().net.now()
    }

    /// A fingerprint of every frame delivered so far and when
    /// ([`impnet_sim::Sim::trace_hash`]): equal for runs that replay each other.
    pub fn trace_hash(&self) -> u64 {
        self.world.borrow().net.trace_hash()
    }

    /// The network simulator underneath: stacks (routes, configuration), link counters,
    /// captures, the frame observer. Do not hold it across a run.
    pub fn net(&self) -> RefMut<'_, impnet_sim::Sim> {
        RefMut::map(self.world.borrow_mut(), |w| &mut w.net)
    }

    /// The host named `name` ([`Sim::host`], [`Sim::router`]).
    pub fn host_named(&self, name: &str) -> Option<HostId> {
        let world = self.world.borrow();
        (0..world.net.host_count())
            .map(HostId)
            .find(|&h| world.net.host_name(h) == name)
    }

    /// The address [`crate::net::lookup`] gives for `name` in the host's tasks: the
    /// address of the host's first link.
    pub fn lookup(&self, name: &str) -> Option<std::net::IpAddr> {
        self.world.borrow().address_of(name)
    }

    /// Give `host` a default route through the other end of `link` (a host joined to
    /// a router by `link` reaches every other host behind that router). Kept across
    /// the host's crashes.
    ///
    /// # Panics
    /// If `host` is not an end of `link`.
    pub fn default_route(&mut self, host: HostId, link: LinkId) {
        let mut world = self.world.borrow_mut();
        let net = &mut world.net;
        let ends = net.link_ends(link);
        let (peer, _) = if ends[0].0 == host { ends[1] } else { ends[0] };
        let iface = net
            .iface_on(host, link)
            .expect("Sim::default_route: the host is not an end of the link");
        let gateway = net
            .address_on(peer, link)
            .expect("every end of a link has an address");
        net.host_mut(host).routes_mut().add_default(gateway, iface);
    }

    /// Add a host with a default stack; it runs tasks.
    pub fn host(&mut self, name: &str) -> HostId {
        self.host_with(name, StackConfig::default())
    }

    /// Add a host whose stack has `config` (kept for its restarts).
    pub fn host_with(&mut self, name: &str, config: StackConfig) -> HostId {
        let now = self.now();
        let id = self.world.borrow_mut().net.add_host(name, config.clone());
        self.push_host(config, true);
        let runtime = HostRuntime::new(now).expect("a current-thread tokio runtime");
        self.hosts[id.0].runtime = Some(runtime);
        id
    }

    /// Add a router: it forwards between its links and runs no tasks.
    pub fn router(&mut self, name: &str) -> HostId {
        let config = StackConfig::default();
        let id = self.world.borrow_mut().net.add_router(name, config.clone());
        self.push_host(config, false);
        id
    }

    fn push_host(&mut self, config: StackConfig, runs_tasks: bool) {
        self.world.borrow_mut().hosts.push(HostState::default());
        self.hosts.push(Host {
            runtime: None,
            software: Vec::new(),
            config,
            runs_tasks,
        });
    }

    /// Join two hosts with a point-to-point link (each end gets an interface with its
    /// address and the connected route); both directions follow `config` (rate,
    /// delay, queue, loss, ...).
    pub fn link(
        &mut self,
        a: HostId,
        a_addr: Cidr,
        b: HostId,
        b_addr: Cidr,
        config: LinkConfig,
    ) -> Result<LinkId, LinkConfigError> {
        self.world
            .borrow_mut()
            .net
            .connect(a, a_addr, b, b_addr, config)
    }

    /// Run `software()` on `host` now and again after every [`Sim::restart`]: a server's
    /// main loop. Its errors are its own to report (it returns nothing); a panic in it
    /// is printed by tokio and ends that software until the next restart.
    pub fn software<F, Fut>(&mut self, host: HostId, software: F)
    where
        F: Fn() -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let software: Software = Box::new(move || Box::pin(software()));
        if let Some(runtime) = &self.hosts[host.0].runtime {
            drop(runtime.spawn(software()));
        }
        self.hosts[host.0].software.push(software);
        self.world.borrow_mut().hosts[host.0].woken = true;
    }

    /// Start `task` on `host` once (not again after a restart). It first runs at the
    /// host's next stop: now, or, when the host's clock ran ahead to its next timer
    /// (it had nothing to do until then; at most the shortest link delay into it),
    /// there.
    ///
    /// The future is polled only on the host's runtime, but it is made by the caller:
    /// one that touches tokio's timer when made (`tokio::time::timeout(..)`,
    /// `tokio::time::sleep(..)`) must be wrapped in an `async` block, or tokio panics
    /// with "there is no reactor running".
    ///
    /// # Panics
    /// If `host` is a router or is down.
    pub fn spawn<F>(&mut self, host: HostId, task: F) -> Task<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let h = &self.hosts[host.0];
        let runtime = h
            .runtime
            .as_ref()
            .expect("Sim::spawn: the host runs no tasks (a router, or crashed)");
        let handle = runtime.spawn(task);
        let mut world = self.world.borrow_mut();
        world.hosts[host.0].woken = true;
        Task {
            host,
            incarnation: world.hosts[host.0].incarnation,
            handle,
        }
    }

    /// Cut `link` (both directions): frames sent on it are lost until [`Sim::heal`].
    pub fn partition(&mut self, link: LinkId) {
        self.world.borrow_mut().net.set_link_up(link, false);
    }

    /// Mend a link cut by [`Sim::partition`].
    pub fn heal(&mut self, link: LinkId) {
        self.world.borrow_mut().net.set_link_up(link, true);
    }

    /// Give both directions of `link` a new configuration from now on (a loss episode,
    /// a longer delay, a slower rate).
    pub fn set_link(&mut self, link: LinkId, config: LinkConfig) -> Result<(), LinkConfigError> {
        let mut world = self.world.borrow_mut();
        world.net.set_link_config(link, 0, config)?;
        world.net.set_link_config(link, 1, config)
    }

    /// Crash `host`: its tasks are dropped mid-flight and its stack replaced by a fresh
    /// one (same interfaces and addresses), so peers see resets for what they send it,
    /// and silence until then. It runs nothing until [`Sim::restart`].
    pub fn crash(&mut self, host: HostId) {
        let h = &mut self.hosts[host.0];
        // Dropped outside `world::enter`: the dead sockets' `Drop` leave the stack alone.
        drop(h.runtime.take());
        let config = h.config.clone();
        let mut world = self.world.borrow_mut();
        let state = &mut world.hosts[host.0];
        state.incarnation += 1;
        state.tcp.clear();
        state.udp.clear();
        let incarnation = state.incarnation;
        // The fresh stack keeps the routes the test gave the host (a default route).
        let routes = world.net.host(host).routes().clone();
        world.net.reset_host(host, config, incarnation);
        *world.net.host_mut(host).routes_mut() = routes;
    }

    /// Start a crashed host again: a new runtime (its clock at the current time) runs
    /// the host's [`Sim::software`] from the start.
    pub fn restart(&mut self, host: HostId) {
        let now = self.now();
        let h = &mut self.hosts[host.0];
        if !h.runs_tasks || h.runtime.is_some() {
            return;
        }
        let runtime = HostRuntime::new(now).expect("a current-thread tokio runtime");
        for software in &h.software {
            drop(runtime.spawn(software()));
        }
        h.runtime = Some(runtime);
        self.world.borrow_mut().hosts[host.0].woken = true;
    }

    /// Run for `duration` of virtual time.
    pub fn run_for(&mut self, duration: std::time::Duration) -> Result<(), SimError> {
        let end = self.now() + to_core(duration);
        self.run_until(end, |_| false).map(|_| ())
    }

    /// Run until `task` has finished and return its output; fails, naming the seed, if
    /// it has not by virtual time `limit` (from the start of the simulation) or its
    /// host crashed. A panic of the task is resumed here.
    pub fn run_until_complete<T>(
        &mut self,
        task: Task<T>,
        limit: std::time::Duration,
    ) -> Result<T, SimError> {
        let end = Instant::ZERO + to_core(limit);
        let host = task.host;
        let finished = self.run_until(end, |sim| {
            sim.world.borrow().hosts[host.0].incarnation != task.incarnation
                || task.handle.is_finished()
        })?;
        let alive = self.world.borrow().hosts[host.0].incarnation == task.incarnation;
        let runtime = self.hosts[host.0].runtime.as_ref();
        match (finished, alive, runtime) {
            (true, true, Some(runtime)) => {
                let world = Rc::clone(&self.world);
                let output = world::enter(&world, host, || runtime.take_output(task.handle));
                output.ok_or_else(|| self.crashed(host))
            }
            (true, _, _) => Err(self.crashed(host)),
            (false, ..) => Err(SimError::TimeLimit {
                seed: self.seed,
                at: end,
            }),
        }
    }

    fn crashed(&self, host: HostId) -> SimError {
        SimError::Crashed {
            seed: self.seed,
            host: self.world.borrow().net.host_name(host).to_string(),
        }
    }

    /// Run until `done` says so (checked after every stop; returns true) or virtual time
    /// reaches `end` (returns false, the clock at `end`).
    fn run_until(
        &mut self,
        end: Instant,
        mut done: impl FnMut(&Sim) -> bool,
    ) -> Result<bool, SimError> {
        let start_steps = self.world.borrow().net.steps();
        loop {
            let now = self.now();
            self.run_hosts(now, end);
            if done(self) {
                return Ok(true);
            }
            let next = self.next_stop(now);
            let t = next.map_or(end, |t| t.min(end));
            let mut world = self.world.borrow_mut();
            world.net.run_until(t, STEP_CAP)?;
            if world.net.steps() - start_steps > STEP_CAP {
                return Err(SimError::Net(impnet_sim::SimError::StepCapExceeded {
                    seed: self.seed,
                    steps: STEP_CAP,
                    at: t,
                }));
            }
            for host in 0..world.hosts.len() {
                let mut wakers = Vec::new();
                world.collect_wakers(HostId(host), true, &mut wakers);
                wakers.into_iter().for_each(std::task::Waker::wake);
            }
            drop(world);
            if next.is_none_or(|n| n > end) {
                self.run_hosts(end, end);
                return Ok(done(self));
            }
        }
    }

    /// The next instant something may happen: a network event, or a millisecond boundary
    /// of a host's timer grid.
    fn next_stop(&self, now: Instant) -> Option<Instant> {
        let net = self.world.borrow().net.next_event();
        let ticks = (self.hosts.iter())
            .filter_map(|h| h.runtime.as_ref())
            .map(|r| r.next_stop(now))
            .min();
        Instant::earliest(net, ticks)
    }

    /// Run, at `t`, the tasks of every host that may have something to do: one woken
    /// since it last ran, or whose timer grid `t` reaches.
    fn run_hosts(&mut self, t: Instant, end: Instant) {
        for (index, host) in self.hosts.iter_mut().enumerate() {
            let Some(runtime) = host.runtime.as_mut() else {
                continue;
            };
            if runtime.clock() > t {
                // A probe moved its clock ahead: nothing reaches it before then, and what
                // was started on it meanwhile (a task spawned between runs) starts then.
                continue;
            }
            let woken = std::mem::take(&mut self.world.borrow_mut().hosts[index].woken);
            if woken || runtime.due(t) {
                world::enter(&self.world, HostId(index), || runtime.run_at(t));
            }
        }
        // What the tasks sent leaves now, not at the next event.
        self.world.borrow_mut().net.transmit_now().ok();
        self.probe_hosts(t, end);
    }

    /// Let each idle host's clock skip the timer-grid boundaries where it has nothing to
    /// do, up to the first instant anything could reach it: the next network event (a
    /// frame's arrival, a stack timer), or a frame sent from now on, which arrives one
    /// link delay later at the earliest (the shortest link into the host).
    fn probe_hosts(&mut self, t: Instant, end: Instant) {
        let (next_event, reach) = {
            let world = self.world.borrow();
            let reach: Vec<impnet_core::Duration> = (0..self.hosts.len())
                .map(|host| shortest_link_into(&world.net, HostId(host)))
                .collect();
            (world.net.next_event(), reach)
        };
        for (index, host) in self.hosts.iter_mut().enumerate() {
            let Some(runtime) = host.runtime.as_mut() else {
                continue;
            };
            let reach = reach[index];
            let bound = Instant::earliest(next_event, Some(t + reach)).map_or(end, |b| b.min(end));
            world::enter(&self.world, HostId(index), || runtime.probe(bound));
        }
    }
}

/// The shortest propagation delay of the links into `host`: no frame sent from now on
/// reaches it sooner. `Duration::MAX` for a host with no link.
fn shortest_link_into(net: &impnet_sim::Sim, host: HostId) -> impnet_core::Duration {
    (0..net.link_count())
        .map(LinkId)
        .flat_map(|link| {
            let ends = net.link_ends(link);
            (0..2)
                .filter(move |&side| ends[1 - side].0 == host)
                .map(move |side| (link, side))
        })
        .map(|(link, side)| net.link_model(link, side).config().delay)
        .min()
        .unwrap_or(impnet_core::Duration::MAX)
}

/// A std duration as the core's (saturating at its range).
fn to_core(d: std::time::Duration) -> impnet_core::Duration {
    impnet_core::Duration::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
