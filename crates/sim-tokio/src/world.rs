//! The simulation as the sockets see it from inside a host's tasks: the simulator with
//! every stack, each host's waiting tasks, and which host is running now.
//!
//! Everything runs on one thread. The driver ([`crate::Sim`]) owns the world behind an
//! `Rc<RefCell<_>>` and, while it polls one host's tokio runtime, names that host in a
//! thread-local ([`enter`]); a socket call borrows the world for the length of one call
//! into its host's stack and never across an `.await`. The sockets themselves hold only
//! ids (host, incarnation, stack handle), so they are `Send` and work in tasks started
//! with `tokio::spawn` as well as `spawn_local`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::rc::Rc;
use std::task::Waker;

use impnet_core::tcp::{TcpError, TcpEvent, TcpHandle};
use impnet_core::{Event, Instant, Stack, UdpError, UdpHandle};
use impnet_sim::HostId;

/// The simulator and what the sockets of each host wait for.
pub(crate) struct World {
    /// The network: stacks, links, the virtual clock.
    pub(crate) net: impnet_sim::Sim,
    /// Per host (indexed by `HostId`), routers included (they have no tasks).
    pub(crate) hosts: Vec<HostState>,
}

/// A host's tasks waiting on its sockets.
#[derive(Default)]
pub(crate) struct HostState {
    /// Counts the host's crashes: a socket made in an earlier incarnation is dead (its
    /// handle may name a socket of the new stack).
    pub(crate) incarnation: u64,
    /// Tasks waiting for a TCP socket: (to read or accept, to write or connect).
    pub(crate) tcp: BTreeMap<TcpHandle, (Option<Waker>, Option<Waker>)>,
    /// Tasks waiting for a UDP socket: (to receive, to send).
    pub(crate) udp: BTreeMap<UdpHandle, (Option<Waker>, Option<Waker>)>,
    /// A waker was woken since the driver last ran the host's tasks.
    pub(crate) woken: bool,
}

impl HostState {
    /// Wake what `event` concerns (every waiter for an event of no socket) into `out`.
    fn wake_for(&mut self, event: Event, out: &mut Vec<Waker>) {
        let (tcp, read, write) = match event {
            Event::Tcp(TcpEvent::Readable(h)) => (h, true, false),
            Event::Tcp(TcpEvent::Writable(h)) => (h, false, true),
            Event::Tcp(TcpEvent::Closed(h)) => (h, true, true),
            Event::Udp(h) => {
                if let Some((r, _)) = self.udp.get_mut(&h) {
                    out.extend(r.take());
                }
                return;
            }
            _ => {
                for (r, w) in self.tcp.values_mut().chain(self.udp.values_mut()) {
                    out.extend(r.take().into_iter().chain(w.take()));
                }
                return;
            }
        };
        if let Some((r, w)) = self.tcp.get_mut(&tcp) {
            if read {
                out.extend(r.take());
            }
            if write {
                out.extend(w.take());
            }
        }
    }

    /// Wake every task waiting to send on UDP (the stack sent frames, so its queues
    /// may have room again).
    fn wake_udp_senders(&mut self, out: &mut Vec<Waker>) {
        for (_, w) in self.udp.values_mut() {
            out.extend(w.take());
        }
    }
}

impl World {
    /// The address of the host named `name`: that of its first link (None for an
    /// unknown name or a host without links).
    pub(crate) fn address_of(&self, name: &str) -> Option<std::net::IpAddr> {
        let host = (0..self.net.host_count())
            .map(HostId)
            .find(|&h| self.net.host_name(h) == name)?;
        (0..self.net.link_count())
            .find_map(|link| self.net.address_on(host, impnet_sim::LinkId(link)))
            .map(Into::into)
    }

    /// Drain `host`'s stack events into the wakers they concern; after the network
    /// moved (`stepped`), also the tasks waiting for room to send UDP (not after a
    /// socket call, where a refused sender would wake itself forever).
    pub(crate) fn collect_wakers(&mut self, host: HostId, stepped: bool, out: &mut Vec<Waker>) {
        let before = out.len();
        let stack = self.net.host_mut(host);
        let state = &mut self.hosts[host.0];
        while let Some(event) = stack.poll_event() {
            state.wake_for(event, out);
        }
        if stepped {
            state.wake_udp_senders(out);
        }
        if out.len() > before {
            state.woken = true;
        }
    }
}

thread_local! {
    /// The world and the host whose tasks run now (set by [`enter`]).
    static CURRENT: RefCell<Option<(Rc<RefCell<World>>, HostId)>> = const { RefCell::new(None) };
}

/// Run `f` (which polls `host`'s runtime) with `host` as the current host.
pub(crate) fn enter<R>(world: &Rc<RefCell<World>>, host: HostId, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<(Rc<RefCell<World>>, HostId)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|c| *c.borrow_mut() = previous);
        }
    }
    let previous = CURRENT.with(|c| c.borrow_mut().replace((Rc::clone(world), host)));
    let _restore = Restore(previous);
    f()
}

/// The host whose task is running, and its incarnation: where a new socket goes.
pub(crate) fn current_host() -> io::Result<(HostId, u64)> {
    let (world, host) = CURRENT.with(|c| c.borrow().clone()).ok_or_else(outside)?;
    let incarnation = world.borrow().hosts[host.0].incarnation;
    Ok((host, incarnation))
}

fn outside() -> io::Error {
    io::Error::other(
        "impnet-sim-tokio sockets work only inside a simulated host's tasks \
         (Sim::spawn or Sim::software)",
    )
}

/// [`World::address_of`] in the running simulation (fails outside one).
pub(crate) fn lookup(name: &str) -> io::Result<Option<std::net::IpAddr>> {
    let (world, _) = CURRENT.with(|c| c.borrow().clone()).ok_or_else(outside)?;
    let address = world.borrow().address_of(name);
    Ok(address)
}

/// Virtual time since the simulation began, inside a simulated host's tasks.
pub(crate) fn elapsed() -> Option<std::time::Duration> {
    let (world, _) = CURRENT.with(|c| c.borrow().clone())?;
    let nanos = world.borrow().net.now().as_nanos();
    Some(std::time::Duration::from_nanos(nanos))
}

/// Call into `host`'s stack at the current virtual time, then wake the tasks its events
/// concern. Fails if no simulation is running here, or if the host crashed since the
/// socket was made (`incarnation`).
pub(crate) fn with_stack<R>(
    host: HostId,
    incarnation: u64,
    f: impl FnOnce(&mut Stack, Instant, &mut HostState) -> R,
) -> io::Result<R> {
    let world = CURRENT
        .with(|c| c.borrow().as_ref().map(|(w, _)| Rc::clone(w)))
        .ok_or_else(outside)?;
    let mut wake = Vec::new();
    let result = {
        let mut world = world.borrow_mut();
        let world = &mut *world;
        if world.hosts[host.0].incarnation != incarnation {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the host crashed since this socket was made: its connections are gone",
            ));
        }
        let now = world.net.now();
        let result = f(world.net.host_mut(host), now, &mut world.hosts[host.0]);
        world.collect_wakers(host, false, &mut wake);
        result
    };
    wake.into_iter().for_each(Waker::wake);
    Ok(result)
}

/// [`with_stack`] for a socket's `Drop`: does nothing outside a running simulation, for
/// a crashed host, or while the world is borrowed.
pub(crate) fn on_drop(
    host: HostId,
    incarnation: u64,
    f: impl FnOnce(&mut Stack, Instant, &mut HostState),
) {
    let Some(world) = CURRENT.with(|c| c.borrow().as_ref().map(|(w, _)| Rc::clone(w))) else {
        return;
    };
    let mut wake = Vec::new();
    {
        let Ok(mut world) = world.try_borrow_mut() else {
            return;
        };
        let world = &mut *world;
        if world.hosts[host.0].incarnation != incarnation {
            return;
        }
        let now = world.net.now();
        f(world.net.host_mut(host), now, &mut world.hosts[host.0]);
        world.collect_wakers(host, false, &mut wake);
    }
    wake.into_iter().for_each(Waker::wake);
}

/// The core's UDP error as the `io::Error` a tokio user expects.
pub(crate) fn udp_error(e: UdpError) -> io::Error {
    use io::ErrorKind as K;
    let kind = match e {
        UdpError::WouldBlock | UdpError::NoBufferSpace => K::WouldBlock,
        UdpError::AddrInUse => K::AddrInUse,
        UdpError::AddrNotAvailable | UdpError::NoPortsAvailable => K::AddrNotAvailable,
        UdpError::InvalidHandle => K::NotConnected,
        UdpError::MessageTooLong | UdpError::FragmentationNeeded { .. } => K::InvalidInput,
        UdpError::NoRoute | UdpError::NetUnreachable => K::NetworkUnreachable,
        UdpError::HostUnreachable => K::HostUnreachable,
        UdpError::PortUnreachable => K::ConnectionRefused,
        _ => K::Other,
    };
    io::Error::new(kind, e)
}

/// The core's TCP error as the `io::Error` a tokio user expects (the kinds of
/// `impnet`'s sockets, which follow Linux).
pub(crate) fn tcp_error(e: TcpError) -> io::Error {
    use io::ErrorKind as K;
    let kind = match e {
        TcpError::WouldBlock => K::WouldBlock,
        TcpError::AddrInUse => K::AddrInUse,
        TcpError::ConnectionReset => K::ConnectionReset,
        TcpError::ConnectionRefused => K::ConnectionRefused,
        TcpError::TimedOut => K::TimedOut,
        TcpError::NoPortsAvailable | TcpError::AddrNotAvailable => K::AddrNotAvailable,
        TcpError::InvalidHandle | TcpError::InvalidState => K::NotConnected,
        TcpError::Closing => K::BrokenPipe,
        TcpError::HostUnreachable | TcpError::Prohibited => K::HostUnreachable,
        TcpError::NetUnreachable => K::NetworkUnreachable,
        TcpError::BufferTooLarge => K::InvalidInput,
        _ => K::Other,
    };
    io::Error::new(kind, e)
}
