//! The runtime: one [`Stack`] driven over one or more devices by a background thread,
//! shared with the sockets through a mutex and a condition variable.
//!
//! The loop thread waits (`ppoll`) on every device's file descriptor, an eventfd that
//! socket calls use to wake it, and the earliest of the stack's `poll_timeout()` and
//! the devices' `poll_at()`. When woken it reads up to [`RX_BATCH`] frames or
//! [`RX_BATCH_BYTES`] per device, fires due timers, sends everything the stack has to
//! send, and wakes the blocked sockets (if any sleep) when the stack reported events.
//! Socket calls do their own output under the same lock (so a write goes out at once,
//! without a thread switch) and wake the loop only when they moved the stack's next
//! deadline earlier; a blocking call about to sleep first takes in what the devices
//! hold itself, so data already queued needs no hand-off between threads.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use imp_core::tcp::{TcpEvent, TcpHandle};
use imp_core::{Event, IfaceConfig, IfaceId, Instant, Stack, StackConfig};
use imp_phy::{Device, DeviceError};
use imp_wire::ipv4::Cidr;

use crate::PollFd;

/// Frames read from one device per loop turn before the others get a turn.
pub const RX_BATCH: usize = 64;

/// Bytes read from one device per loop turn: with large (GRO/TSO-sized) frames the
/// turn ends after a few of them, so the ACKs the stack owes go out and a blocked
/// reader is woken while the sender still has data in flight, rather than after 64
/// frames of 64 KiB.
pub const RX_BATCH_BYTES: usize = 256 * 1024;

/// How long a blocked socket call sleeps at most before it looks again, in case a
/// wake-up was missed (readiness is always re-checked from the stack itself).
const RECHECK: StdDuration = StdDuration::from_millis(200);

/// How often the loop looks at devices without a file descriptor (in-memory pipes).
const FDLESS_POLL: StdDuration = StdDuration::from_millis(1);

/// Counters of the runtime itself (the stack keeps its own in `Stack::stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Loop turns.
    pub turns: u64,
    /// Frames read from devices.
    pub rx_frames: u64,
    /// Frames written to devices.
    pub tx_frames: u64,
    /// Frames a device could not take (full) or refused with an error; TCP recovers
    /// them by retransmission, UDP loses them as on a wire.
    pub tx_dropped: u64,
    /// Device receive errors.
    pub rx_errors: u64,
    /// Times a socket call woke the loop because it moved the next deadline earlier.
    pub wakeups: u64,
    /// Times the loop woke blocked socket calls (readiness changed).
    pub notifies: u64,
    /// Times a blocking socket call went to sleep waiting for readiness.
    pub waits: u64,
}

/// One device and the interface it serves.
struct Port {
    iface: IfaceId,
    device: Box<dyn Device + Send>,
    fd: Option<RawFd>,
    rx_buf: Vec<u8>,
}

/// What the loop thread and the sockets share under one lock.
pub(crate) struct State {
    pub(crate) stack: Stack,
    ports: Vec<Port>,
    /// Frame buffer for `poll_transmit`: the largest device MTU.
    tx_buf: Vec<u8>,
    /// Set by `Runtime::shutdown`; every blocked call then fails.
    pub(crate) stopped: bool,
    /// When the loop thread will look at the stack next if nothing wakes it.
    sleep_until: Option<Instant>,
    stats: RuntimeStats,
    /// Async tasks waiting on a TCP socket: (readable, writable) wakers.
    pub(crate) wakers: HashMap<TcpHandle, (Option<Waker>, Option<Waker>)>,
    /// Blocking socket calls asleep on `Shared::ready` now: the loop notifies only
    /// when there is someone to wake.
    waiting: usize,
}

/// The shared half of a runtime that sockets keep alive.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Notified whenever the stack reported events (readiness changes).
    ready: Condvar,
    /// Wakes the loop thread from `ppoll`.
    waker: OwnedFd,
    epoch: StdInstant,
}

impl Shared {
    /// Now, as nanoseconds since the runtime started.
    pub(crate) fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn wake_loop(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe { libc::write(self.waker.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// After a socket call changed the stack: send what it has to send, wake waiters,
    /// and wake the loop if its sleep would overrun the new deadline of the stack or
    /// of a device (an `Impair` holding a frame just sent).
    pub(crate) fn settle(&self, state: &mut State, now: Instant) {
        if state.flush(now) {
            self.notify(state);
        }
        if let Some(deadline) = state.next_deadline()
            && state.sleep_until.is_none_or(|t| deadline < t)
        {
            state.sleep_until = Some(deadline);
            state.stats.wakeups += 1;
            self.wake_loop();
        }
    }

    /// Wake the blocking socket calls asleep on `ready`, if there are any.
    fn notify(&self, state: &mut State) {
        if state.waiting > 0 {
            state.stats.notifies += 1;
            self.ready.notify_all();
        }
    }

    /// Run `attempt` under the lock until it returns `Some`, sleeping on readiness
    /// changes in between; `deadline` bounds the wait (then `TimedOut`), `nonblocking`
    /// returns `WouldBlock` instead of waiting.
    ///
    /// Before it sleeps, the call takes in what the devices hold itself (as the loop
    /// thread would) and tries again: when the frames it waits for are already queued,
    /// it needs no wake-up from the loop thread, which saves two thread switches.
    pub(crate) fn block_on<T>(
        &self,
        deadline: Option<StdInstant>,
        nonblocking: bool,
        mut attempt: impl FnMut(&mut State, Instant) -> Option<io::Result<T>>,
    ) -> io::Result<T> {
        let mut state = self.lock();
        loop {
            if state.stopped {
                return Err(stopped());
            }
            let now = self.now();
            let mut result = attempt(&mut state, now);
            self.settle(&mut state, now);
            if result.is_none() && !nonblocking && state.receive(now).frames > 0 {
                result = attempt(&mut state, now);
                self.settle(&mut state, now);
            }
            if let Some(result) = result {
                return result;
            }
            if nonblocking {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "the operation would block (socket is non-blocking)",
                ));
            }
            let wait = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(StdInstant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "timed out waiting for the socket",
                        ));
                    }
                    left.min(RECHECK)
                }
                None => RECHECK,
            };
            state.stats.waits += 1;
            state.waiting += 1;
            state = self
                .ready
                .wait_timeout(state, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            state.waiting -= 1;
        }
    }

    /// One attempt for an async task: `Pending` (with the task's waker registered for
    /// `handle`, readable or `write`able) when `attempt` returns `None`.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn poll_tcp<T>(
        &self,
        cx: &mut std::task::Context<'_>,
        handle: TcpHandle,
        write: bool,
        attempt: impl FnOnce(&mut State, Instant) -> Option<io::Result<T>>,
    ) -> std::task::Poll<io::Result<T>> {
        let mut state = self.lock();
        if state.stopped {
            return std::task::Poll::Ready(Err(stopped()));
        }
        let now = self.now();
        let result = attempt(&mut state, now);
        if result.is_none() {
            // Before `settle` drains the events, so a readiness change it finds wakes us.
            state.register(handle, write, cx.waker());
        }
        self.settle(&mut state, now);
        match result {
            Some(result) => std::task::Poll::Ready(result),
            None => std::task::Poll::Pending,
        }
    }

    /// Run `f` on the stack once, then settle.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut State, Instant) -> T) -> io::Result<T> {
        let mut state = self.lock();
        if state.stopped {
            return Err(stopped());
        }
        let now = self.now();
        let out = f(&mut state, now);
        self.settle(&mut state, now);
        Ok(out)
    }
}

pub(crate) fn stopped() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "the imp runtime has been shut down",
    )
}

impl State {
    /// Send every frame the stack has, then drain its events. True if there were
    /// events (sockets to wake).
    fn flush(&mut self, now: Instant) -> bool {
        while let Some(tx) = self.stack.poll_transmit(now, &mut self.tx_buf) {
            let frame = &self.tx_buf[..tx.len];
            let Some(port) = self.ports.iter_mut().find(|p| p.iface == tx.iface) else {
                self.stats.tx_dropped += 1;
                continue;
            };
            match port.device.send(now, frame) {
                Ok(true) => self.stats.tx_frames += 1,
                Ok(false) | Err(_) => self.stats.tx_dropped += 1,
            }
        }
        let mut any = false;
        while let Some(event) = self.stack.poll_event() {
            any = true;
            self.wake_tasks(event);
        }
        any
    }

    /// Wake the async tasks an event concerns (all of them for events not tied to one
    /// TCP socket, which is rare and harmless: a woken task re-checks).
    fn wake_tasks(&mut self, event: Event) {
        if self.wakers.is_empty() {
            return;
        }
        let (handle, read, write) = match event {
            Event::Tcp(TcpEvent::Readable(h)) => (h, true, false),
            Event::Tcp(TcpEvent::Writable(h)) => (h, false, true),
            Event::Tcp(TcpEvent::Closed(h)) => (h, true, true),
            _ => {
                for (r, w) in self.wakers.values_mut() {
                    r.take().into_iter().chain(w.take()).for_each(Waker::wake);
                }
                return;
            }
        };
        if let Some((r, w)) = self.wakers.get_mut(&handle) {
            if read && let Some(waker) = r.take() {
                waker.wake();
            }
            if write && let Some(waker) = w.take() {
                waker.wake();
            }
        }
    }

    /// Ask to be woken when `handle` may be readable (`write` false) or writable.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn register(&mut self, handle: TcpHandle, write: bool, waker: &Waker) {
        let slot = self.wakers.entry(handle).or_default();
        let slot = if write { &mut slot.1 } else { &mut slot.0 };
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    /// Read up to [`RX_BATCH`] frames or [`RX_BATCH_BYTES`] from each device into the
    /// stack.
    pub(crate) fn receive(&mut self, now: Instant) -> Received {
        let mut received = Received::default();
        for port in &mut self.ports {
            let mut n = 0;
            let mut bytes = 0;
            while n < RX_BATCH && bytes < RX_BATCH_BYTES {
                match port.device.recv(now, &mut port.rx_buf) {
                    Ok(Some(len)) => {
                        self.stack
                            .handle_frame(now, port.iface, &port.rx_buf[..len]);
                        self.stats.rx_frames += 1;
                        n += 1;
                        bytes += len;
                    }
                    Ok(None) => break,
                    Err(DeviceError::BufferTooSmall { len, .. }) => {
                        port.rx_buf.resize(len, 0);
                    }
                    Err(_) => {
                        self.stats.rx_errors += 1;
                        break;
                    }
                }
            }
            received.frames += n;
            received.more |= n == RX_BATCH || bytes >= RX_BATCH_BYTES;
        }
        received
    }

    /// The earliest time the loop must look again: the stack's timers and the devices'
    /// own deadlines.
    fn next_deadline(&self) -> Option<Instant> {
        let devices = self.ports.iter().filter_map(|p| p.device.poll_at());
        self.stack.poll_timeout().into_iter().chain(devices).min()
    }
}

/// What one [`State::receive`] took in.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Received {
    /// Frames handed to the stack.
    frames: usize,
    /// Some device stopped at its batch limit and may hold more.
    more: bool,
}

/// A running stack: owns the loop thread. Dropping it (or [`Runtime::shutdown`]) stops
/// the thread; sockets still open then fail with `NotConnected`.
pub struct Runtime {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Runtime {
    /// Start a runtime with a stack made from `config` and no devices yet. A `seed` of
    /// 0 is replaced by a random one (so restarts do not reuse ISNs and ports); give
    /// any other value for a reproducible stack.
    pub fn new(mut config: StackConfig) -> io::Result<Runtime> {
        if config.seed == 0 {
            config.seed = RandomState::new().hash_one(std::process::id()) | 1;
        }
        // SAFETY: eventfd has no memory arguments; we own the returned descriptor.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        let waker = unsafe { OwnedFd::from_raw_fd(fd) };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                stack: Stack::new(config),
                ports: Vec::new(),
                tx_buf: vec![0; 1514],
                stopped: false,
                sleep_until: None,
                stats: RuntimeStats::default(),
                wakers: HashMap::new(),
                waiting: 0,
            }),
            ready: Condvar::new(),
            waker,
            epoch: StdInstant::now(),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("imp-runtime".into())
            .spawn(move || run_loop(&thread_shared))?;
        Ok(Runtime {
            shared,
            thread: Some(thread),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Add an interface to the stack, served by `device` (its file descriptor, if any,
    /// is waited on; one without is looked at every millisecond).
    pub fn add_device<D>(&self, device: D, iface: IfaceConfig) -> IfaceId
    where
        D: Device + PollFd + Send + 'static,
    {
        let fd = device.poll_fd();
        let frame_len = device.mtu().max(iface.mtu + 18);
        let mut state = self.shared.lock();
        let id = state.stack.add_interface(iface);
        if state.tx_buf.len() < frame_len {
            state.tx_buf.resize(frame_len, 0);
        }
        state.ports.push(Port {
            iface: id,
            device: Box::new(device),
            fd,
            rx_buf: vec![0; frame_len],
        });
        let now = self.shared.now();
        self.shared.settle(&mut state, now);
        drop(state);
        self.shared.wake_loop();
        id
    }

    /// Add an interface served by a TAP device, set up the way the TAP asks: its IP
    /// MTU, and the offloads it got from the kernel ([`Tap::stack_offloads`]: large
    /// segments for the kernel to cut, and TCP/UDP checksums left to it when the TAP
    /// was opened with [`TapConfig::partial_checksums`]). Without offloads this is
    /// `add_device(tap, IfaceConfig::new(mac, tap.ip_mtu()))`.
    ///
    /// [`Tap::stack_offloads`]: imp_phy::Tap::stack_offloads
    /// [`TapConfig::partial_checksums`]: imp_phy::TapConfig::partial_checksums
    #[cfg(target_os = "linux")]
    pub fn add_tap(&self, tap: imp_phy::Tap, mac: imp_wire::ethernet::Address) -> IfaceId {
        let iface = IfaceConfig::new(mac, tap.ip_mtu()).with_offloads(tap.stack_offloads());
        self.add_device(tap, iface)
    }

    /// Assign an address to an interface (adds the connected route, announces it).
    pub fn add_address(&self, iface: IfaceId, cidr: Cidr) {
        self.with_stack(|stack, now| stack.add_address(now, iface, cidr));
    }

    /// Route everything without a more specific route through `gateway`.
    pub fn add_default_route(&self, gateway: std::net::Ipv4Addr, iface: IfaceId) {
        self.with_stack(|stack, _| stack.routes_mut().add_default(gateway, iface));
    }

    /// Run `f` on the stack under the runtime's lock (with the current time), then send
    /// what it queued. For setup and for calls the sockets do not wrap (`stats`,
    /// `tcp().info`, routes).
    pub fn with_stack<T>(&self, f: impl FnOnce(&mut Stack, Instant) -> T) -> T {
        let mut state = self.shared.lock();
        let now = self.shared.now();
        let out = f(&mut state.stack, now);
        self.shared.settle(&mut state, now);
        out
    }

    /// Time since the runtime started, as the stack sees it.
    pub fn now(&self) -> Instant {
        self.shared.now()
    }

    /// The runtime's own counters.
    pub fn stats(&self) -> RuntimeStats {
        self.shared.lock().stats
    }

    /// Stop the loop thread and fail every blocked and later socket call.
    pub fn shutdown(&mut self) {
        {
            let mut state = self.shared.lock();
            state.stopped = true;
            for (_, (r, w)) in state.wakers.drain() {
                r.into_iter().chain(w).for_each(Waker::wake);
            }
        }
        self.shared.ready.notify_all();
        self.shared.wake_loop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The loop thread: receive, fire timers, transmit, sleep until the next event.
fn run_loop(shared: &Shared) {
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        let timeout = {
            let mut state = shared.lock();
            if state.stopped {
                return;
            }
            state.stats.turns += 1;
            let now = shared.now();
            let more = state.receive(now).more;
            if state.stack.poll_timeout().is_some_and(|t| t <= now) {
                state.stack.handle_timeout(now);
            }
            if state.flush(now) {
                shared.notify(&mut state);
            }
            let deadline = state.next_deadline();
            state.sleep_until = deadline;
            fds.clear();
            fds.push(pollfd(shared.waker.as_raw_fd()));
            let mut fdless = false;
            for port in &state.ports {
                match port.fd {
                    Some(fd) => fds.push(pollfd(fd)),
                    None => fdless = true,
                }
            }
            let mut wait = deadline
                .map(|d| StdDuration::from_nanos(d.saturating_duration_since(now).as_nanos()));
            if fdless {
                wait = Some(wait.map_or(FDLESS_POLL, |w| w.min(FDLESS_POLL)));
            }
            if more {
                wait = Some(StdDuration::ZERO);
            }
            wait
        };
        wait_fds(&mut fds, timeout);
        if fds[0].revents & libc::POLLIN != 0 {
            let mut counter = 0u64;
            // SAFETY: reads 8 bytes into a live u64 from our non-blocking eventfd.
            unsafe {
                libc::read(
                    shared.waker.as_raw_fd(),
                    (&mut counter as *mut u64).cast(),
                    8,
                )
            };
        }
    }
}

fn pollfd(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// `ppoll` with nanosecond precision; `None` waits until a descriptor is ready.
fn wait_fds(fds: &mut [libc::pollfd], timeout: Option<StdDuration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a live slice of pollfd of the given length, `ts_ptr` is null or
    // points at a live timespec, and a null signal mask is allowed.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
}
