//! The runtime: one [`Stack`] driven over one or more devices by a background thread,
//! shared with the sockets through a mutex and a condition variable.
//!
//! The loop thread waits (`ppoll`) on an epoll instance holding every device's file
//! descriptor, an eventfd that socket calls use to wake it, and the earliest of the
//! stack's `poll_timeout()` and the devices' `poll_at()`. When woken it reads up to
//! [`RX_BATCH`] frames or [`RX_BATCH_BYTES`] per device, fires due timers, sends
//! everything the stack has to send, and wakes the blocked sockets (if any sleep) when
//! the stack reported events. Socket calls do their own output under the same lock (so
//! a write goes out at once, without a thread switch) and wake the loop only when they
//! moved the stack's next deadline earlier; a blocking call about to sleep first takes
//! in what the devices hold itself, so data already queued needs no hand-off between
//! threads.
//!
//! A blocking call that must sleep waits on the devices itself (one such call at a
//! time; others sleep on a condition variable): when a frame arrives, the thread that
//! wants it is woken, takes it in and returns, and the loop thread sleeps on. Both wait
//! on the devices through epoll with `EPOLLEXCLUSIVE`, the blocked calls' instance
//! registered first, so the kernel wakes a blocked call when one waits and the loop
//! thread only otherwise (an exclusive entry whose epoll has no thread in `epoll_wait`
//! passes the wake-up on). Without that, every frame would cost two thread switches
//! (device to loop thread, loop thread to reader): on a host with few cores those
//! hand-offs, not the protocol work, bound a bulk transfer. When its last wait on the
//! devices ended within [`DEVICE_SPIN`], the call polls them that long before it
//! sleeps (yielding the CPU between looks): frames that close together are taken
//! without a sleep and a wake-up.
//!
//! Blocking calls also take in what the devices hold on their way in, so while a call
//! that waits for input (a read, accept, connect) runs, and for [`RECEIVERS_GRACE`]
//! after the last one left, the loop thread does not watch the devices at all: the
//! frames a reader's own ACKs call forth from the peer then wait for the reader's next
//! call instead of waking the loop thread, which would only fight the reader for the
//! lock; nor does it take turns meanwhile: it looks every [`RECEIVERS_GRACE`], without
//! the lock, whether such a call still runs, and takes the lock only after
//! [`RECEIVERS_HORIZON`] of that, or for a deadline or a wake-up. A writer keeps the
//! loop thread watching: the ACKs that come back while it
//! sends are then taken in between its calls, not only when it is back (see
//! [`Awaits`]). This applies when every device has a file descriptor; with in-memory
//! devices the loop thread does all the device work.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use impnet_core::tcp::{TcpEvent, TcpHandle};
use impnet_core::{
    Duration, Event, IfaceConfig, IfaceId, Instant, RawHandle, Secret, Stack, StackConfig,
    UdpHandle,
};
use impnet_phy::{Device, DeviceError};
use impnet_wire::ipv4::Cidr;
use rustix::event::{Timespec, epoll};

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

/// Batches a blocking call that took in frames itself reads at most before it leaves
/// the rest to the loop thread (woken for them): enough to empty a device the sender
/// filled up to our receive window, while a flood cannot keep the call from returning.
const CALLER_RX_BATCHES: usize = 4;

/// How long after calls waiting for input last ran the loop thread still leaves the
/// devices to them. A program that reads in a loop is back within microseconds, takes
/// in what arrived itself and sleeps on the devices, so the frames its own ACKs call
/// forth need not wake the loop thread too (a thread switch and a fight for the lock
/// each); one that stopped calling has what arrives meanwhile taken in at most this
/// late.
const RECEIVERS_GRACE: Duration = Duration::from_millis(1);

/// While calls waiting for input run, the loop thread looks every [`RECEIVERS_GRACE`]
/// whether they still do without taking the lock (`Shared::receivers_running`), for at
/// most this long before it takes the lock for a turn of its own. A receiver inside a
/// call takes in the frames itself; a turn of the loop thread every millisecond only
/// fought it for the lock and the CPU: in W5-rx (Linux -> imp over a TAP, 512 MiB; the
/// kernel's sender, the reader and the loop thread sharing one core of a loaded 2-core
/// machine) the loop thread took 222-230 turns and the process 0.503-0.517 CPU s/GB,
/// with these looks 105-132 turns and 0.492-0.502 s/GB. Callers wake the loop for
/// deadlines earlier than this horizon (`State::sleep_until`), as before for those
/// earlier than the grace.
const RECEIVERS_HORIZON: Duration = Duration::from_millis(10);

/// How often the loop thread looks at the devices while an async driver watches them
/// (in case its executor stalls).
const ASYNC_DRIVER_RECHECK: Duration = Duration::from_millis(10);

/// How long a blocking call about to sleep on the devices polls them first (a look
/// without waiting, then `sched_yield`, in turn), when its last wait on them ended
/// this soon: while frames come this close together, the call takes the next one
/// without sleeping, and the sender of it (the kernel's TCP over a TAP) without waking
/// a sleeper, which in a VM costs it an inter-processor interrupt. Yielding leaves the
/// CPU to whatever else is runnable on it (the sender itself, on a loaded machine).
/// The price is a CPU kept busy for at most this long after the last frame. W5-rx
/// (Linux -> imp over a TAP with offloads, 512 MiB; 6 runs interleaved with runs
/// without) when both cores of the 2-core machine were free: 27.7-29.1 Gbit/s against
/// 20.8-21.4 without, veth 20.6-22.4 beside them; on a loaded machine about the same
/// as without (11-17 both).
const DEVICE_SPIN: StdDuration = StdDuration::from_micros(50);

/// The epoll token of the eventfd that wakes a blocked call waiting on the devices.
const CALLER_WAKER_TOKEN: u64 = u64::MAX;

/// Bytes queued on a connection from which a tokio write takes in the devices' frames
/// first (see `Shared::poll_tcp`).
const INTAKE_QUEUED: usize = 64 * 1024;

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
    /// Of `waits`, those that waited on the devices themselves (woken by a frame
    /// directly, without the loop thread).
    pub device_waits: u64,
    /// Of `device_waits`, those that polled the devices before sleeping (the wait
    /// before ended within `DEVICE_SPIN`, 50 µs).
    pub device_spins: u64,
    /// Of `device_spins`, those that found something ready while polling and did not
    /// sleep.
    pub device_spin_hits: u64,
}

/// What a port keeps: a device that can still lend its descriptor, to be taken out of
/// the epoll instances when it is gone.
trait PortDevice: Device + PollFd + Send {}

impl<D: Device + PollFd + Send> PortDevice for D {}

/// One device and the interface it serves.
struct Port {
    iface: IfaceId,
    device: Box<dyn PortDevice>,
    /// The device's descriptor when the loop must `ppoll` it directly (it has one, but
    /// the loop thread's epoll would not take it); None otherwise.
    direct_fd: Option<RawFd>,
    /// The device has no descriptor: the loop looks at it every [`FDLESS_POLL`].
    fdless: bool,
    /// Its descriptor ([`PollFd::poll_fd`]) is in the two epoll instances (cleared
    /// when the device is gone and taken out).
    watched: bool,
    /// The device said it is closed for good: it is not read again (an interface
    /// deleted under a TUN keeps its descriptor readable with an error forever).
    gone: bool,
    rx_buf: Vec<u8>,
}

/// What the loop thread and the sockets share under one lock.
pub(crate) struct State {
    pub(crate) stack: Stack,
    ports: Vec<Port>,
    /// Frame buffer for `poll_transmit`: the largest device MTU.
    tx_buf: Vec<u8>,
    /// Every device sends frames in pieces (`Device::gathers`): TCP payloads are sent
    /// from the send buffers, not copied into `tx_buf` first.
    gather: bool,
    /// Set by `Runtime::shutdown`, or when every device is gone; every blocked call
    /// then fails.
    pub(crate) stopped: bool,
    /// Why the runtime stopped by itself: every device reported
    /// [`DeviceError::Closed`] (its interface was deleted).
    devices_gone: Option<String>,
    /// When the loop thread will look at the stack next if nothing wakes it.
    sleep_until: Option<Instant>,
    stats: RuntimeStats,
    /// Async tasks waiting on a TCP socket: (readable, writable) wakers.
    pub(crate) wakers: HashMap<TcpHandle, (Option<Waker>, Option<Waker>)>,
    /// Async tasks waiting on a UDP socket.
    pub(crate) udp_waiters: HashMap<UdpHandle, UdpWaiters>,
    /// Async tasks waiting for a raw socket to be readable.
    pub(crate) raw_waiters: HashMap<RawHandle, Waker>,
    /// Blocking socket calls asleep on `Shared::ready` now: the loop notifies only
    /// when there is someone to wake.
    waiting: usize,
    /// Every device has a descriptor and all are in `Shared::callers`: blocking calls
    /// take in frames and may wait on the devices (else they only sleep on
    /// `Shared::ready` and the loop thread always watches the devices).
    callers_poll: bool,
    /// Blocking calls awaiting [`Awaits::Input`] inside [`Shared::block_on`] and not
    /// asleep on `Shared::ready` (the device waiter among them if it is one).
    running_receivers: usize,
    /// When a blocking call awaiting [`Awaits::Input`] last left [`Shared::block_on`].
    receivers_seen: Option<Instant>,
    /// A blocking call is waiting on the devices (in `Shared::callers`); at most one.
    device_waiter: bool,
    /// Async drivers ([`Shared::drive`]) watching the devices from their executor's
    /// thread: the loop thread then leaves the devices to them.
    async_drivers: usize,
    /// When an async driver's thread last took in frames (its [`Shared::drive`], or a
    /// task's write taking in the ACKs first): while that is recent the loop thread
    /// leaves the devices to it (see [`State::driven_recently`]).
    driven_at: Option<Instant>,
    /// The device waiter was sent a wake-up it has not consumed yet.
    device_waiter_woken: bool,
    /// The last wait on the devices ended within [`DEVICE_SPIN`]: the next one polls
    /// first.
    device_wait_short: bool,
    /// Programs' event loops asleep in the kernel with the devices' descriptor among
    /// theirs ([`Runtime::event_loop_enter`]): the loop thread leaves the devices to
    /// them, as to async drivers.
    event_loops: usize,
}

/// The shared half of a runtime that sockets keep alive.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Notified whenever the stack reported events (readiness changes).
    ready: Condvar,
    /// Wakes the loop thread from `ppoll`.
    waker: OwnedFd,
    /// The loop thread's epoll: every device descriptor, `EPOLLEXCLUSIVE`, registered
    /// after `callers` (so a blocked call waiting there is woken first).
    devices: Epoll,
    /// The blocked calls' epoll: every device descriptor (`EPOLLEXCLUSIVE`) and
    /// `caller_waker`.
    callers: Epoll,
    /// Wakes the blocking call waiting in `callers` (readiness changed, shutdown).
    caller_waker: OwnedFd,
    /// `State::running_receivers`, for the loop thread to read without the lock (written
    /// under it).
    receivers_running: AtomicUsize,
    /// When a call awaiting input last left [`Shared::block_on`] (`State::receivers_seen`
    /// as nanoseconds of [`Shared::now`]), for the loop thread to read without the lock.
    receivers_left: AtomicU64,
    epoch: StdInstant,
}

impl Shared {
    /// Stop: every blocked call and waiting task is woken and fails.
    fn stop(&self, state: &mut State) {
        state.stopped = true;
        for (_, (r, w)) in state.wakers.drain() {
            r.into_iter().chain(w).for_each(Waker::wake);
        }
        for (_, mut waiters) in state.udp_waiters.drain() {
            waiters.wake(true, true);
        }
        state.raw_waiters.drain().for_each(|(_, w)| w.wake());
        self.ready.notify_all();
        signal(&self.caller_waker);
    }

    /// Devices closed for good leave both epoll instances (else their descriptors,
    /// readable with an error forever, would spin the loop); when none is left, the
    /// runtime stops and says why. Returns whether it stopped.
    fn forget_gone(&self, state: &mut State) -> bool {
        for port in state.ports.iter_mut().filter(|p| p.gone) {
            if std::mem::take(&mut port.watched) {
                for fd in port
                    .device
                    .poll_fd()
                    .into_iter()
                    .chain(port.device.extra_poll_fd())
                {
                    self.callers.remove(fd);
                    self.devices.remove(fd);
                }
            }
            port.direct_fd = None;
            port.fdless = false;
        }
        if !state.ports.iter().all(|p| p.gone) {
            return false;
        }
        state.devices_gone = Some(format!(
            "the imp runtime stopped: its device{} closed ({})",
            if state.ports.len() == 1 {
                " was"
            } else {
                "s were all"
            },
            DeviceError::Closed
        ));
        self.stop(state);
        true
    }

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
        signal(&self.waker);
    }

    /// After a socket call changed the stack: send what it has to send, wake waiters,
    /// and wake the loop if its sleep would overrun the new deadline of the stack or
    /// of a device (an `Impair` holding a frame just sent).
    pub(crate) fn flush_and_wake(&self, state: &mut State, now: Instant) {
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

    /// Wake the blocking socket calls asleep on `ready` and the one waiting on the
    /// devices, if there are any.
    fn notify(&self, state: &mut State) {
        if state.waiting > 0 {
            state.stats.notifies += 1;
            self.ready.notify_all();
        }
        if state.device_waiter && !state.device_waiter_woken {
            state.device_waiter_woken = true;
            state.stats.notifies += 1;
            signal(&self.caller_waker);
        }
    }

    /// Take in frames as a blocking call: up to [`CALLER_RX_BATCHES`] batches, the ACKs
    /// they call for sent after each; what is left (a flood) goes to the loop thread,
    /// which a device wait-up may not reach while this call is not waiting. The number
    /// of frames taken.
    fn receive_as_caller(&self, state: &mut State, now: Instant) -> usize {
        let mut frames = 0;
        for _ in 0..CALLER_RX_BATCHES {
            let received = state.receive(now);
            frames += received.frames;
            if !received.gone.is_empty() && self.forget_gone(state) {
                return frames;
            }
            if !received.more {
                return frames;
            }
            self.flush_and_wake(state, now);
        }
        state.stats.wakeups += 1;
        self.wake_loop();
        frames
    }

    /// Sleep until a device has a frame, a readiness change is signalled, or `wait`
    /// passed, as the one blocking call waiting on the devices (the lock released).
    fn wait_on_devices<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        wait: StdDuration,
    ) -> MutexGuard<'a, State> {
        state.stats.device_waits += 1;
        state.device_waiter = true;
        state.device_waiter_woken = false;
        let spin = state.device_wait_short;
        if spin {
            state.stats.device_spins += 1;
        }
        drop(state);
        let start = StdInstant::now();
        let spin_for = DEVICE_SPIN.min(wait);
        let mut woken = None;
        if spin && !spin_for.is_zero() {
            loop {
                if let Some(token) = self.callers.poll_now(CALLER_WAKER_TOKEN) {
                    woken = Some(token);
                    break;
                }
                if start.elapsed() >= spin_for {
                    break;
                }
                std::thread::yield_now();
            }
        }
        let woke = woken.unwrap_or_else(|| {
            let left = wait.saturating_sub(start.elapsed());
            self.callers.wait(left, CALLER_WAKER_TOKEN)
        });
        if woke {
            drain(&self.caller_waker);
        }
        let short = start.elapsed() < DEVICE_SPIN;
        let mut state = self.lock();
        state.device_waiter = false;
        state.device_wait_short = short;
        if woken.is_some() {
            state.stats.device_spin_hits += 1;
        }
        state
    }

    /// Run `attempt` under the lock until it returns `Some`, sleeping on readiness
    /// changes in between; `deadline` bounds the wait (then `TimedOut`), `nonblocking`
    /// returns `WouldBlock` instead of waiting, `awaits` says what the call waits for.
    ///
    /// Each time round, the call first takes in what the devices hold (as the loop
    /// thread would, which leaves them to calls awaiting input while these run: see
    /// [`State::devices_covered`]), and again before it sleeps: when the frames it
    /// waits for are already queued, it needs no wake-up from the loop thread. It
    /// sleeps on the devices themselves when no other call does (a frame wakes it
    /// directly), else on `ready`.
    pub(crate) fn block_on<T>(
        &self,
        deadline: Option<StdInstant>,
        nonblocking: bool,
        awaits: Awaits,
        attempt: impl FnMut(&mut State, Instant) -> Option<io::Result<T>>,
    ) -> io::Result<T> {
        let receiver = usize::from(awaits == Awaits::Input);
        let mut state = self.lock();
        self.count_receivers(&mut state, receiver, true);
        let (mut state, result) =
            self.block_on_locked(state, deadline, nonblocking, receiver, attempt);
        self.count_receivers(&mut state, receiver, false);
        if receiver > 0 {
            let now = self.now();
            state.receivers_seen = Some(now);
            self.receivers_left.store(now.as_nanos(), Ordering::Relaxed);
        }
        result
    }

    /// Add (`enter`) or take away `receiver` (0 or 1) from the calls awaiting input that
    /// run, and mirror the count for the loop thread.
    fn count_receivers(&self, state: &mut State, receiver: usize, enter: bool) {
        if receiver == 0 {
            return;
        }
        if enter {
            state.running_receivers += receiver;
        } else {
            state.running_receivers -= receiver;
        }
        self.receivers_running
            .store(state.running_receivers, Ordering::Relaxed);
    }

    /// [`Shared::block_on`] with the lock taken; `receiver` is 1 for a call awaiting
    /// input (counted in `running_receivers` while it is not asleep on `ready`), else 0.
    fn block_on_locked<'a, T>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        deadline: Option<StdInstant>,
        nonblocking: bool,
        receiver: usize,
        mut attempt: impl FnMut(&mut State, Instant) -> Option<io::Result<T>>,
    ) -> (MutexGuard<'a, State>, io::Result<T>) {
        loop {
            if state.stopped {
                let error = stopped(&state);
                return (state, Err(error));
            }
            let now = self.now();
            // On the way in and after every wake-up: a frame whose wake-up this call
            // took from the loop thread must not be left behind if `attempt` succeeds.
            if state.callers_poll {
                self.receive_as_caller(&mut state, now);
            }
            let mut result = attempt(&mut state, now);
            self.flush_and_wake(&mut state, now);
            if result.is_none() && !nonblocking && self.receive_as_caller(&mut state, now) > 0 {
                result = attempt(&mut state, now);
                self.flush_and_wake(&mut state, now);
            }
            if let Some(result) = result {
                return (state, result);
            }
            if nonblocking {
                let e = io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "the operation would block (socket is non-blocking)",
                );
                return (state, Err(e));
            }
            let wait = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(StdInstant::now());
                    if left.is_zero() {
                        let e = io::Error::new(
                            io::ErrorKind::TimedOut,
                            "timed out waiting for the socket",
                        );
                        return (state, Err(e));
                    }
                    left.min(RECHECK)
                }
                None => RECHECK,
            };
            state.stats.waits += 1;
            if state.callers_poll && !state.device_waiter {
                state = self.wait_on_devices(state, wait);
                continue;
            }
            state.waiting += 1;
            self.count_receivers(&mut state, receiver, false);
            state = self
                .ready
                .wait_timeout(state, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            self.count_receivers(&mut state, receiver, true);
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
            return std::task::Poll::Ready(Err(stopped(&state)));
        }
        let now = self.now();
        if write && state.async_drivers > 0 && state.stack.tcp_send_queued(handle) >= INTAKE_QUEUED
        {
            // Take in the ACKs the peer has sent for what is queued before queuing more,
            // rather than when the driver task's turn comes: the send ring then empties
            // and refills from its start, so a task writes to memory it just used (warm
            // in the cache) instead of cycling through the whole ring.
            state.receive(now);
            state.driven_at = Some(now);
        }
        let result = attempt(&mut state, now);
        if result.is_none() {
            // Before `flush_and_wake` drains the events, so a readiness change it finds
            // wakes us.
            state.register(handle, write, cx.waker());
        }
        self.flush_and_wake(&mut state, now);
        match result {
            Some(result) => std::task::Poll::Ready(result),
            None => std::task::Poll::Pending,
        }
    }

    /// One attempt for an async task on a UDP socket: `Pending` (with the task's waker
    /// registered for `handle`, readable or `write`able) when `attempt` returns `None`.
    /// A send refused for lack of buffer space sets `UdpWaiters::send_blocked` in
    /// `attempt`; such a sender is woken once the stack sends frames again.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn poll_udp<T>(
        &self,
        cx: &mut std::task::Context<'_>,
        handle: UdpHandle,
        write: bool,
        attempt: impl FnOnce(&mut State, Instant) -> Option<io::Result<T>>,
    ) -> std::task::Poll<io::Result<T>> {
        self.poll_socket(cx, attempt, |state, waker| {
            let waiters = state.udp_waiters.entry(handle).or_default();
            waiters.register(write, waker);
        })
    }

    /// [`Shared::poll_udp`] for a raw socket's reads: the waker registered for the
    /// socket's next datagram.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn poll_raw<T>(
        &self,
        cx: &mut std::task::Context<'_>,
        handle: RawHandle,
        attempt: impl FnOnce(&mut State, Instant) -> Option<io::Result<T>>,
    ) -> std::task::Poll<io::Result<T>> {
        self.poll_socket(cx, attempt, |state, waker| {
            state.raw_waiters.insert(handle, waker.clone());
        })
    }

    /// `attempt`, and when it returns None, `register` the task's waker (before
    /// `flush_and_wake` drains the events, so what it takes in wakes the task).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    fn poll_socket<T>(
        &self,
        cx: &mut std::task::Context<'_>,
        attempt: impl FnOnce(&mut State, Instant) -> Option<io::Result<T>>,
        register: impl FnOnce(&mut State, &Waker),
    ) -> std::task::Poll<io::Result<T>> {
        let mut state = self.lock();
        if state.stopped {
            return std::task::Poll::Ready(Err(stopped(&state)));
        }
        let now = self.now();
        let result = attempt(&mut state, now);
        if result.is_none() {
            register(&mut state, cx.waker());
        }
        self.flush_and_wake(&mut state, now);
        match result {
            Some(result) => std::task::Poll::Ready(result),
            None => std::task::Poll::Pending,
        }
    }

    /// The descriptor an async driver waits on (readable when a device has a frame),
    /// if every device has one; registers the driver, which must call
    /// [`Shared::end_drive`] when it stops.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn start_drive(&self) -> Option<RawFd> {
        let mut state = self.lock();
        if !state.callers_poll || state.stopped {
            return None;
        }
        state.async_drivers += 1;
        Some(self.callers.0.as_raw_fd())
    }

    /// An async driver stopped: the loop thread watches the devices again.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn end_drive(&self) {
        let mut state = self.lock();
        state.async_drivers -= 1;
        drop(state);
        self.wake_loop();
    }

    /// An event loop goes to sleep watching the devices: take in what they hold (the
    /// sockets' readiness then is current), and leave them to it until
    /// [`Shared::event_loop_leave`].
    fn event_loop_enter(&self) -> io::Result<()> {
        let mut state = self.lock();
        if state.stopped {
            return Err(stopped(&state));
        }
        state.event_loops += 1;
        let now = self.now();
        self.receive_as_caller(&mut state, now);
        self.flush_and_wake(&mut state, now);
        Ok(())
    }

    /// The event loop woke: the loop thread watches the devices again after
    /// [`RECEIVERS_GRACE`] (the program is usually back in its wait by then).
    fn event_loop_leave(&self) {
        let mut state = self.lock();
        state.event_loops -= 1;
        state.receivers_seen = Some(self.now());
    }

    /// Take in what the devices hold, for an async driver on its executor's thread
    /// (the tasks it wakes are then woken from their own thread). True if a device may
    /// hold more; `NotConnected` once the runtime stopped.
    pub(crate) fn drive(&self) -> io::Result<bool> {
        let mut state = self.lock();
        if state.stopped {
            return Err(stopped(&state));
        }
        let now = self.now();
        let received = state.receive(now);
        state.driven_at = Some(now);
        if !received.gone.is_empty() && self.forget_gone(&mut state) {
            return Err(stopped(&state));
        }
        self.flush_and_wake(&mut state, now);
        Ok(received.more)
    }

    /// Run `f` on the stack once, then flush and wake.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut State, Instant) -> T) -> io::Result<T> {
        let mut state = self.lock();
        if state.stopped {
            return Err(stopped(&state));
        }
        let now = self.now();
        let out = f(&mut state, now);
        self.flush_and_wake(&mut state, now);
        Ok(out)
    }
}

pub(crate) fn stopped(state: &State) -> io::Error {
    match &state.devices_gone {
        Some(reason) => io::Error::new(io::ErrorKind::NotConnected, reason.clone()),
        None => io::Error::new(
            io::ErrorKind::NotConnected,
            "the imp runtime has been shut down",
        ),
    }
}

impl State {
    /// Send every frame the stack has, then drain its events. True if there were
    /// events (sockets to wake).
    fn flush(&mut self, now: Instant) -> bool {
        let mut frames_out = false;
        loop {
            let tx = if self.gather {
                self.stack.poll_transmit_gather(now, &mut self.tx_buf)
            } else {
                self.stack.poll_transmit(now, &mut self.tx_buf)
            };
            let Some(tx) = tx else { break };
            let Some(port) = self.ports.iter_mut().find(|p| p.iface == tx.iface) else {
                self.stats.tx_dropped += 1;
                continue;
            };
            // A payload left in the send buffer goes from there, behind the headers.
            let sent = match self.stack.gathered_payload() {
                Some((a, b)) => {
                    let head = &self.tx_buf[..tx.len - a.len() - b.len()];
                    port.device.send_gather(now, head, (a, b))
                }
                None => match self.stack.transmit_gso_size() {
                    Some(gso_size) => {
                        port.device
                            .send_segmented(now, &self.tx_buf[..tx.len], gso_size)
                    }
                    None => port.device.send(now, &self.tx_buf[..tx.len]),
                },
            };
            match sent {
                Ok(true) => self.stats.tx_frames += 1,
                Ok(false) | Err(_) => self.stats.tx_dropped += 1,
            }
            frames_out = true;
        }
        // Devices that batch their writes send them now, in one system call each.
        for port in &mut self.ports {
            if !port.gone && port.device.flush(now).is_err() {
                self.stats.tx_dropped += 1;
            }
        }
        if frames_out {
            self.wake_blocked_udp_senders();
        }
        let mut any = false;
        while let Some(event) = self.stack.poll_event() {
            any = true;
            self.wake_tasks(event);
        }
        any
    }

    /// The stack sent frames, so its queues (the transmit queue, a neighbour's queue
    /// that resolution just emptied) have room again: wake the UDP senders it refused.
    fn wake_blocked_udp_senders(&mut self) {
        for waiters in self.udp_waiters.values_mut() {
            if waiters.send_blocked {
                waiters.send_blocked = false;
                waiters.wake(false, true);
            }
        }
    }

    /// Wake the async tasks an event concerns (all of them for events not tied to one
    /// TCP socket, which is rare and harmless: a woken task re-checks).
    fn wake_tasks(&mut self, event: Event) {
        if self.wakers.is_empty() && self.udp_waiters.is_empty() && self.raw_waiters.is_empty() {
            return;
        }
        let (handle, read, write) = match event {
            Event::Tcp(TcpEvent::Readable(h)) => (h, true, false),
            Event::Tcp(TcpEvent::Writable(h)) => (h, false, true),
            Event::Tcp(TcpEvent::Closed(h)) => (h, true, true),
            Event::Udp(h) => {
                if let Some(waiters) = self.udp_waiters.get_mut(&h) {
                    waiters.wake(true, false);
                }
                return;
            }
            Event::Raw(h) => {
                if let Some(waker) = self.raw_waiters.remove(&h) {
                    waker.wake();
                }
                return;
            }
            _ => {
                for (r, w) in self.wakers.values_mut() {
                    r.take().into_iter().chain(w.take()).for_each(Waker::wake);
                }
                for waiters in self.udp_waiters.values_mut() {
                    waiters.send_blocked = false;
                    waiters.wake(true, true);
                }
                self.raw_waiters.drain().for_each(|(_, w)| w.wake());
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
            while !port.gone && n < RX_BATCH && bytes < RX_BATCH_BYTES {
                match port.device.recv_offloaded(now, &mut port.rx_buf) {
                    Ok(Some((len, rx))) => {
                        let frame = &port.rx_buf[..len];
                        self.stack
                            .handle_frame_offloaded(now, port.iface, frame, rx);
                        self.stats.rx_frames += 1;
                        n += 1;
                        bytes += len;
                    }
                    Ok(None) => break,
                    Err(DeviceError::BufferTooSmall { len, .. }) => {
                        port.rx_buf.resize(len, 0);
                    }
                    Err(DeviceError::Closed) => {
                        self.stats.rx_errors += 1;
                        port.gone = true;
                        received.gone.push(port.iface);
                        break;
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

    /// Whether blocking calls watch the devices for the loop thread now, and until when
    /// the loop may leave them to them: while a call awaiting input runs or waits on the
    /// devices (it takes in frames on its way in and before it sleeps), and
    /// [`RECEIVERS_GRACE`] after the last one left. Writers do not count (see
    /// [`Awaits::SendRoom`]).
    fn devices_covered(&self, now: Instant) -> Option<Instant> {
        if !self.callers_poll {
            return None;
        }
        if self.running_receivers > 0 {
            return Some(now + RECEIVERS_GRACE);
        }
        if self.async_drivers > 0 || self.event_loops > 0 {
            return Some(now + ASYNC_DRIVER_RECHECK);
        }
        self.receivers_seen
            .map(|seen| seen + RECEIVERS_GRACE)
            .filter(|&until| until > now)
    }

    /// Whether an async driver took in frames less than [`ASYNC_DRIVER_RECHECK`] ago:
    /// the loop thread, woken for a timer or by a socket call, then leaves the devices
    /// to it. Frames the loop thread took in would wake their tasks from this other
    /// thread, and a single-threaded tokio runtime takes such wake-ups from its remote
    /// queue only once every 31 tasks while local ones wait: under load the tasks
    /// woken here starved behind those the driver woke (W6, 50 connections fetching
    /// 1 MiB: a p99 of 389 ms against a mean of 33).
    fn driven_recently(&self, now: Instant) -> bool {
        driven_recently(self.async_drivers, self.driven_at, now)
    }

    /// The earliest time the loop must look again: the stack's timers and the devices'
    /// own deadlines.
    fn next_deadline(&self) -> Option<Instant> {
        let devices = self.ports.iter().filter_map(|p| p.device.poll_at());
        self.stack.poll_timeout().into_iter().chain(devices).min()
    }
}

/// What a blocking call waits for, which decides whether the loop thread leaves the
/// devices to it while it runs (see [`State::devices_covered`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Awaits {
    /// Something from the peer: data (read), a connection (accept, connect), a datagram
    /// or an echo reply. The loop thread leaves the devices to such calls: a reader is
    /// back within microseconds and takes in what its ACKs called forth itself.
    Input,
    /// Room in the send buffer (write). The loop thread keeps watching the devices: it
    /// takes in the peer's ACKs while the writer is busy sending frames, so the room
    /// is there when the writer comes back and it seldom has to sleep. Leaving the
    /// devices to the writer too made imp -> Linux without offloads (W5-tx-plain, an
    /// ACK every two 1500-byte frames) about 20% slower: 2.23-2.33 against 2.78-2.91
    /// Gbit/s, the writer sleeping 979 times per 512 MiB instead of 147. With offloads
    /// (W5-tx, far fewer ACKs) it made no difference beyond the noise (both ~23 Gbit/s).
    SendRoom,
}

/// The async tasks waiting on one UDP socket.
#[derive(Debug, Default)]
pub(crate) struct UdpWaiters {
    /// Woken when a datagram (or a pending error) arrives.
    pub(crate) read: Option<Waker>,
    /// Woken when the stack sent frames after refusing this socket's datagram.
    pub(crate) write: Option<Waker>,
    /// The stack refused a datagram for lack of buffer space (`NoBufferSpace`: its
    /// transmit queue or the next hop's resolution queue was full) and has sent
    /// nothing since: sending waits for `write` to be woken.
    pub(crate) send_blocked: bool,
}

impl UdpWaiters {
    /// Wake the reader and/or the writer.
    pub(crate) fn wake(&mut self, read: bool, write: bool) {
        if read && let Some(waker) = self.read.take() {
            waker.wake();
        }
        if write && let Some(waker) = self.write.take() {
            waker.wake();
        }
    }

    /// Ask to be woken when the socket may be readable (`write` false) or writable.
    pub(crate) fn register(&mut self, write: bool, waker: &Waker) {
        let slot = if write {
            &mut self.write
        } else {
            &mut self.read
        };
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }
}

/// What one [`State::receive`] took in.
#[derive(Debug, Default, Clone)]
pub(crate) struct Received {
    /// Frames handed to the stack.
    frames: usize,
    /// Devices found closed for good in this call (see [`Port::gone`]).
    gone: Vec<IfaceId>,
    /// Some device stopped at its batch limit and may hold more.
    more: bool,
}

/// A secret from the operating system's random source (`/dev/urandom`, which never
/// blocks once the kernel's pool is initialised, and the kernel initialises it at boot).
fn os_secret() -> io::Result<Secret> {
    use std::io::Read;
    let mut bytes = [0u8; Secret::LEN];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(Secret::from_bytes(bytes))
}

/// A running stack: owns the loop thread. Dropping it (or [`Runtime::shutdown`]) stops
/// the thread; sockets still open then fail with `NotConnected`.
pub struct Runtime {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    resolver: crate::dns::ResolverState,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
}

impl Runtime {
    /// Start a runtime with a stack made from `config` and no devices yet. The stack's
    /// [`Secret`] (which keys its ISNs, ports and hashes) is read from the operating
    /// system's random source, `/dev/urandom`; an error reading it is returned.
    pub fn new(config: StackConfig) -> io::Result<Runtime> {
        Runtime::with_secret(config, os_secret()?)
    }

    /// Start a runtime whose stack has the given `secret`: for a reproducible stack
    /// (tests); a real one should use [`Runtime::new`].
    pub fn with_secret(config: StackConfig, secret: Secret) -> io::Result<Runtime> {
        let waker = eventfd()?;
        let caller_waker = eventfd()?;
        let callers = Epoll::new()?;
        callers.add(caller_waker.as_fd(), CALLER_WAKER_TOKEN, false)?;
        let devices = Epoll::new()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                stack: Stack::new(config, secret),
                ports: Vec::new(),
                tx_buf: vec![0; 1514],
                gather: false,
                stopped: false,
                devices_gone: None,
                sleep_until: None,
                stats: RuntimeStats::default(),
                wakers: HashMap::new(),
                udp_waiters: HashMap::new(),
                raw_waiters: HashMap::new(),
                waiting: 0,
                callers_poll: false,
                running_receivers: 0,
                receivers_seen: None,
                device_waiter: false,
                device_waiter_woken: false,
                device_wait_short: false,
                async_drivers: 0,
                driven_at: None,
                event_loops: 0,
            }),
            ready: Condvar::new(),
            waker,
            devices,
            callers,
            caller_waker,
            receivers_running: AtomicUsize::new(0),
            receivers_left: AtomicU64::new(0),
            epoch: StdInstant::now(),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("imp-runtime".into())
            .spawn(move || run_loop(&thread_shared))?;
        Ok(Runtime {
            shared,
            thread: Some(thread),
            resolver: crate::dns::ResolverState::default(),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// For a program's own event loop that waits in the kernel (epoll, poll) on
    /// descriptors that stand for imp sockets, as the `LD_PRELOAD` library does: a
    /// descriptor that is readable when a device has a frame, for the loop to wait on
    /// beside its own; then [`Runtime::event_loop_poll`] takes the frames in on the
    /// program's thread, not on the runtime's (a frame then costs one thread switch
    /// fewer). `None` when a device has no descriptor: the runtime's thread keeps them.
    /// Pair each sleep with [`Runtime::event_loop_enter`] and
    /// [`Runtime::event_loop_leave`].
    pub fn event_loop_fd(&self) -> Option<RawFd> {
        let state = self.shared.lock();
        (state.callers_poll && !state.stopped).then(|| self.shared.callers.0.as_raw_fd())
    }

    /// Before the event loop sleeps with [`Runtime::event_loop_fd`] among its
    /// descriptors: takes in what the devices hold (the sockets' readiness is then
    /// current: look at it before sleeping), and leaves the devices to the loop while
    /// it sleeps. Fails once the runtime stopped.
    pub fn event_loop_enter(&self) -> io::Result<()> {
        self.shared.event_loop_enter()
    }

    /// After the event loop woke (whatever woke it): the runtime's thread watches the
    /// devices again unless the loop is back within a millisecond.
    pub fn event_loop_leave(&self) {
        self.shared.event_loop_leave();
    }

    /// [`Runtime::event_loop_fd`] was readable: take in what the devices hold, on
    /// this thread.
    pub fn event_loop_poll(&self) -> io::Result<()> {
        while self.shared.drive()? {}
        Ok(())
    }

    /// Add an interface to the stack, served by `device` (its file descriptor, if any,
    /// is waited on; one without is looked at every millisecond).
    pub fn add_device<D>(&self, device: D, iface: IfaceConfig) -> IfaceId
    where
        D: Device + PollFd + Send + 'static,
    {
        let frame_len = device.mtu().max(iface.mtu + 18);
        let mut state = self.shared.lock();
        let id = state.stack.add_interface(iface);
        if state.tx_buf.len() < frame_len {
            state.tx_buf.resize(frame_len, 0);
        }
        let token = state.ports.len() as u64;
        // Blocked calls' epoll first: the order of registration is the order in which
        // the kernel offers a frame's wake-up (see the module documentation).
        let first = state.ports.is_empty();
        state.gather = device.gathers() && (first || state.gather);
        let fd = device.poll_fd();
        // An extra descriptor (a shard's inbox) goes with the first, never alone.
        let extra = fd.and(device.extra_poll_fd());
        let in_callers = fd.is_some_and(|fd| self.shared.callers.add(fd, token, true).is_ok())
            && extra.is_none_or(|fd| self.shared.callers.add(fd, token, true).is_ok());
        state.callers_poll = in_callers && (first || state.callers_poll);
        let direct_fd = fd
            .filter(|&fd| self.shared.devices.add(fd, token, true).is_err())
            .map(|fd| fd.as_raw_fd());
        if let Some(extra) = extra {
            // An eventfd, which epoll always takes.
            let _ = self.shared.devices.add(extra, token, true);
        }
        let watched = fd.is_some();
        state.ports.push(Port {
            iface: id,
            device: Box::new(device),
            direct_fd,
            fdless: !watched,
            watched,
            gone: false,
            rx_buf: vec![0; frame_len],
        });
        let now = self.shared.now();
        self.shared.flush_and_wake(&mut state, now);
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
    /// [`Tap::stack_offloads`]: impnet_phy::Tap::stack_offloads
    /// [`TapConfig::partial_checksums`]: impnet_phy::TapConfig::partial_checksums
    #[cfg(target_os = "linux")]
    pub fn add_tap(&self, tap: impnet_phy::Tap, mac: impnet_wire::ethernet::Address) -> IfaceId {
        let iface = IfaceConfig::new(mac, tap.ip_mtu()).with_offloads(tap.stack_offloads());
        self.add_device(tap, iface)
    }

    /// Add an IP-level interface ([`Medium::Ip`](impnet_core::Medium::Ip): no Ethernet,
    /// no ARP) served by a TUN device, set up the way the TUN asks, as
    /// [`Runtime::add_tap`] does for a TAP: its IP MTU and the offloads it got from the
    /// kernel ([`Tun::stack_offloads`](impnet_phy::Tun::stack_offloads)).
    #[cfg(target_os = "linux")]
    pub fn add_tun(&self, tun: impnet_phy::Tun) -> IfaceId {
        let iface = IfaceConfig::ip(tun.ip_mtu()).with_offloads(tun.stack_offloads());
        self.add_device(tun, iface)
    }

    /// Switch the accept-any mode of `iface` on (with these limits) or off: packets
    /// arriving there for any address are taken in, for
    /// [`TcpListener::bind_any`](crate::TcpListener::bind_any) and
    /// [`UdpSocket::bind_any`](crate::UdpSocket::bind_any) (a transparent proxy).
    pub fn set_accept_any(&self, iface: IfaceId, mode: Option<impnet_core::AcceptAny>) {
        self.with_stack(|stack, _| stack.set_accept_any(iface, mode));
    }

    /// Assign an address to an interface (adds the connected route, announces it).
    pub fn add_address(&self, iface: IfaceId, cidr: Cidr) {
        self.with_stack(|stack, now| stack.add_address(now, iface, cidr));
    }

    /// Start IPv6 on an interface: on an Ethernet one its link-local address (checked
    /// for duplicates) and router solicitations, so a router's advertisement
    /// configures addresses (SLAAC) and a default route. See [`Stack::enable_ipv6`].
    pub fn enable_ipv6(&self, iface: IfaceId) {
        self.with_stack(|stack, now| stack.enable_ipv6(now, iface));
    }

    /// Assign an IPv6 address to an interface (starting IPv6 there; usable once
    /// duplicate address detection passed, and its prefix is on-link).
    pub fn add_address6(&self, iface: IfaceId, cidr: impnet_wire::ipv6::Cidr) {
        self.with_stack(|stack, now| stack.add_address6(now, iface, cidr));
    }

    /// Route every IPv6 destination without a more specific route through `gateway`.
    pub fn add_default_route6(&self, gateway: std::net::Ipv6Addr, iface: IfaceId) {
        self.with_stack(|stack, _| {
            stack
                .routes6_mut()
                .add(impnet_wire::ipv6::Cidr::DEFAULT_ROUTE, Some(gateway), iface);
        });
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
        self.shared.flush_and_wake(&mut state, now);
        out
    }

    /// Start the DHCP client on `iface` (an Ethernet interface: a TAP or a pipe): its
    /// lease configures the address, default route and DNS servers, and it renews,
    /// rebinds and, if the lease is lost, removes them again by itself.
    pub fn dhcp_start(&self, iface: IfaceId) -> io::Result<()> {
        self.with_stack(|stack, now| stack.dhcp_start(now, iface))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
    }

    /// Wait up to `timeout` for `iface`'s DHCP lease.
    pub fn wait_for_lease(
        &self,
        iface: IfaceId,
        timeout: std::time::Duration,
    ) -> io::Result<impnet_core::Lease> {
        let deadline = StdInstant::now() + timeout;
        loop {
            if let Some(lease) = self.with_stack(|stack, _| stack.dhcp_lease(iface).copied()) {
                return Ok(lease);
            }
            if StdInstant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no DHCP lease within {timeout:?} (is a DHCP server on the link?)"),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Give `iface`'s DHCP lease back (DHCPRELEASE) and stop its client.
    pub fn dhcp_release(&self, iface: IfaceId) {
        self.with_stack(|stack, now| stack.dhcp_release(now, iface));
    }

    /// Use these DNS servers (before any DHCP named) for [`lookup_host`](crate::lookup_host)
    /// and connects by name.
    pub fn set_dns_servers(&self, servers: &[std::net::IpAddr]) {
        *self
            .resolver
            .servers
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = servers.to_vec();
    }

    /// The DNS servers names go to: those set by hand, then those DHCP named.
    pub fn dns_servers(&self) -> Vec<std::net::IpAddr> {
        let mut servers = self
            .resolver
            .servers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for server in self.with_stack(|stack, _| stack.dns_servers()) {
            let server = std::net::IpAddr::V4(server);
            if !servers.contains(&server) {
                servers.push(server);
            }
        }
        servers
    }

    pub(crate) fn resolver(&self) -> &crate::dns::ResolverState {
        &self.resolver
    }

    /// Time since the runtime started, as the stack sees it.
    pub fn now(&self) -> Instant {
        self.shared.now()
    }

    /// The runtime's own counters.
    pub fn stats(&self) -> RuntimeStats {
        self.shared.lock().stats
    }

    /// Why the runtime stopped by itself, if it did: every device was closed for good
    /// (its interface deleted). Blocked and later calls then fail with this text.
    pub fn devices_gone(&self) -> Option<String> {
        self.shared.lock().devices_gone.clone()
    }

    /// Stop the loop thread and fail every blocked and later socket call.
    pub fn shutdown(&mut self) {
        {
            let mut state = self.shared.lock();
            self.shared.stop(&mut state);
        }
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
    no_timer_slack();
    let mut fds: Vec<libc::pollfd> = Vec::new();
    loop {
        let (timeout, recheck_until) = {
            let mut state = shared.lock();
            if state.stopped {
                return;
            }
            state.stats.turns += 1;
            let now = shared.now();
            let more = !state.driven_recently(now) && state.receive(now).more;
            // A device found closed here or by a caller's receive.
            let unforgotten = state
                .ports
                .iter()
                .any(|p| p.gone && (p.watched || p.direct_fd.is_some() || p.fdless));
            if unforgotten && shared.forget_gone(&mut state) {
                return;
            }
            if state.stack.poll_timeout().is_some_and(|t| t <= now) {
                state.stack.handle_timeout(now);
            }
            if state.flush(now) {
                shared.notify(&mut state);
            }
            let covered = state.devices_covered(now);
            let deadline = state.next_deadline();
            let wake_at = deadline.into_iter().chain(covered).min();
            // Calls awaiting input run: look again at `wake_at` whether they still do,
            // and go on sleeping if so, up to the horizon or the next deadline.
            let recheck_until =
                (state.running_receivers > 0 && covered.is_some() && !more).then(|| {
                    let horizon = now + RECEIVERS_HORIZON;
                    deadline.map_or(horizon, |d| d.min(horizon))
                });
            state.sleep_until = recheck_until.or(wake_at);
            fds.clear();
            fds.push(pollfd(shared.waker.as_raw_fd()));
            if covered.is_none() {
                fds.push(pollfd(shared.devices.0.as_raw_fd()));
            }
            let mut fdless = false;
            for port in &state.ports {
                fds.extend(port.direct_fd.map(pollfd));
                fdless |= port.fdless;
            }
            let mut wait = wake_at
                .map(|d| StdDuration::from_nanos(d.saturating_duration_since(now).as_nanos()));
            if fdless {
                wait = Some(wait.map_or(FDLESS_POLL, |w| w.min(FDLESS_POLL)));
            }
            if more {
                wait = Some(StdDuration::ZERO);
            }
            (wait, recheck_until.filter(|_| !fdless))
        };
        wait_while_receivers_run(shared, &mut fds, timeout, recheck_until);
    }
}

/// Sleep on `fds` for `timeout`; then, until `recheck_until` (if set), again for up to
/// [`RECEIVERS_GRACE`] at a time while calls awaiting input still run or one left less
/// than [`RECEIVERS_GRACE`] ago (read without the lock, as `State::devices_covered`
/// says for them), and nothing woke the loop.
fn wait_while_receivers_run(
    shared: &Shared,
    fds: &mut [libc::pollfd],
    mut timeout: Option<StdDuration>,
    recheck_until: Option<Instant>,
) {
    loop {
        wait_fds(fds, timeout);
        if fds[0].revents & libc::POLLIN != 0 {
            drain(&shared.waker);
            return;
        }
        let Some(until) = recheck_until else { return };
        if fds.iter().any(|f| f.revents != 0) {
            return;
        }
        let now = shared.now();
        let covered_until = if shared.receivers_running.load(Ordering::Relaxed) > 0 {
            now + RECEIVERS_GRACE
        } else {
            Instant::from_nanos(shared.receivers_left.load(Ordering::Relaxed)) + RECEIVERS_GRACE
        };
        if now >= until || now >= covered_until {
            return;
        }
        let left = covered_until.min(until).saturating_duration_since(now);
        timeout = Some(StdDuration::from_nanos(left.as_nanos()));
        for fd in fds.iter_mut() {
            fd.revents = 0;
        }
    }
}

/// [`State::driven_recently`]'s rule: an async driver runs and took in frames less
/// than [`ASYNC_DRIVER_RECHECK`] before `now`.
fn driven_recently(async_drivers: usize, driven_at: Option<Instant>, now: Instant) -> bool {
    async_drivers > 0
        && driven_at.is_some_and(|t| now.saturating_duration_since(t) < ASYNC_DRIVER_RECHECK)
}

/// Ask the kernel to wake this thread at its deadlines without the timer slack it
/// adds by default (50 µs, to batch wake-ups). The loop's deadlines include pacing
/// releases about a millisecond apart (`impnet_core`'s `tcp::pacing`), and every
/// microsecond a release starts late must be made good within it: with the default
/// slack, BBRv1 over a TAP at 100 Mbit/s and 20 ms (W8 quick, 0% loss, pacing already
/// in releases) reached 86.8 Mbit/s, with none 87.4 (and 77.8 against 81.3 at 1% loss)
/// on a loaded 2-core machine. A failure (not Linux's `prctl`) leaves the default.
fn no_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument (the slack in
    // nanoseconds, 1 the least) and changes only the calling thread's timer slack.
    #[cfg(target_os = "linux")]
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

/// A new non-blocking eventfd.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    use rustix::event::EventfdFlags;
    Ok(rustix::event::eventfd(
        0,
        EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC,
    )?)
}

/// Make an eventfd readable. A failure (the counter at its maximum, which already
/// reads as readable) needs nothing done.
fn signal(eventfd: &OwnedFd) {
    let _ = rustix::io::write(eventfd, &1u64.to_ne_bytes());
}

/// Make a non-blocking eventfd unreadable again. A failure (`EAGAIN`: it was not
/// readable) needs nothing done.
fn drain(eventfd: &OwnedFd) {
    let mut counter = [0u8; 8];
    let _ = rustix::io::read(eventfd, &mut counter);
}

/// An epoll instance watching descriptors for input.
struct Epoll(OwnedFd);

impl Epoll {
    fn new() -> io::Result<Epoll> {
        Ok(Epoll(epoll::create(epoll::CreateFlags::CLOEXEC)?))
    }

    /// Watch `fd` for input, reported as `token`; `exclusive` adds it with
    /// `EPOLLEXCLUSIVE` (a wake-up goes to one exclusive waiter, in registration order,
    /// that has a thread asleep in `epoll_wait`). Level-triggered, as without
    /// `EPOLLET`.
    fn add(&self, fd: BorrowedFd<'_>, token: u64, exclusive: bool) -> io::Result<()> {
        let mut flags = epoll::EventFlags::IN;
        if exclusive {
            flags |= epoll::EventFlags::EXCLUSIVE;
        }
        Ok(epoll::add(
            &self.0,
            fd,
            epoll::EventData::new_u64(token),
            flags,
        )?)
    }

    /// Stop watching `fd` (a descriptor not watched is no error here).
    fn remove(&self, fd: BorrowedFd<'_>) {
        let _ = epoll::delete(&self.0, fd);
    }

    /// Whether anything is ready, without waiting: `Some(whether token is among it)`.
    fn poll_now(&self, token: u64) -> Option<bool> {
        let mut events = [epoll::Event {
            flags: epoll::EventFlags::empty(),
            data: epoll::EventData::new_u64(0),
        }; 8];
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let n = epoll::wait(&self.0, &mut events, Some(&zero)).unwrap_or(0);
        (n > 0).then(|| events[..n].iter().any(|e| e.data.u64() == token))
    }

    /// Wait (at most `timeout`, rounded up to milliseconds and capped at `i32::MAX` of
    /// them, as `epoll_wait` takes it) for input; true if `token` was among what is
    /// ready. An interrupted wait (`EINTR`) returns false, as a timeout does.
    fn wait(&self, timeout: StdDuration, token: u64) -> bool {
        let mut events = [epoll::Event {
            flags: epoll::EventFlags::empty(),
            data: epoll::EventData::new_u64(0),
        }; 8];
        let millis = i32::try_from(timeout.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX);
        // Whole milliseconds, so rustix passes exactly `millis` to `epoll_pwait` (a
        // timeout beyond `i32::MAX` ms would make it try `epoll_pwait2` instead).
        let timeout = Timespec {
            tv_sec: (millis / 1000).into(),
            tv_nsec: (millis % 1000 * 1_000_000).into(),
        };
        let n = epoll::wait(&self.0, &mut events, Some(&timeout)).unwrap_or(0);
        events[..n].iter().any(|e| e.data.u64() == token)
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

#[cfg(test)]
mod driver_tests {
    use super::{ASYNC_DRIVER_RECHECK, Duration, Instant, driven_recently};

    #[test]
    fn the_loop_leaves_the_devices_only_to_a_driver_that_took_in_frames_lately() {
        let at = Instant::from_nanos(1_000_000_000);
        let just_before_recheck = at + ASYNC_DRIVER_RECHECK - Duration::from_nanos(1);
        // A running driver that took in frames within the recheck interval.
        assert!(driven_recently(1, Some(at), at));
        assert!(driven_recently(2, Some(at), just_before_recheck));
        // Its executor stalled for the whole interval: the loop looks again.
        assert!(!driven_recently(1, Some(at), at + ASYNC_DRIVER_RECHECK));
        // A driver that has taken in nothing yet, or none running.
        assert!(!driven_recently(1, None, at));
        assert!(!driven_recently(0, Some(at), at));
    }
}

#[cfg(test)]
mod secret_tests {
    #[test]
    fn the_os_gives_a_new_secret_every_time() {
        let a = super::os_secret().expect("/dev/urandom");
        let b = super::os_secret().expect("/dev/urandom");
        assert_ne!(a, b);
    }
}
