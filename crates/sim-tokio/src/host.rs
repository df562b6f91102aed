//! One simulated host's tokio runtime, whose clock is the simulator's.
//!
//! Each host has a current-thread tokio runtime with its clock paused (tokio's
//! `test-util`) and a `LocalSet` for its tasks. The runtime's clock never moves by
//! itself: [`HostRuntime::run_at`] moves it to the simulator's time with
//! `tokio::time::advance` and runs the tasks until none can make progress. Tokio would
//! auto-advance a paused clock to its next timer when the runtime goes idle; a hook on
//! the runtime's park (`on_thread_park`) wakes the driver's future first, so the
//! runtime never parks and its clock stays where the simulator put it.
//!
//! Tokio's timers have a resolution of one millisecond counted from the runtime's
//! start: a timer fires when the clock reaches the next millisecond boundary of that
//! grid at or after its deadline. The driver stops at every boundary of every host's
//! grid ([`HostRuntime::next_tick_after`]), so timers fire when tokio says they do.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use impnet_core::{Duration, Instant};
use tokio::runtime::{Builder, Runtime};
use tokio::task::LocalSet;

/// Tokio's timer resolution.
const TICK: Duration = Duration::from_millis(1);

/// Park rounds a settle waits for: the first park fires the timers due now, whose
/// tasks then run; the second finds the runtime idle (a task that sleeps for zero
/// time during the second round runs at the next stop).
const SETTLE_ROUNDS: u8 = 2;

/// A host's tokio runtime and its tasks.
pub(crate) struct HostRuntime {
    runtime: Runtime,
    local: LocalSet,
    parks: Arc<ParkHook>,
    /// Simulated time of the runtime's start: its timers fire on `origin + k ms`.
    origin: Instant,
    /// Simulated time the runtime's clock shows (ahead of the simulator's after a
    /// probe, never behind it once the host has run at a stop).
    clock: Instant,
    /// Where a probe left the clock ([`HostRuntime::probe`]): the host must run there
    /// (the tasks of the timer that fired wait), and has nothing to do before.
    pending: Option<Instant>,
}

/// What the runtime's park hooks share with the driver's future.
#[derive(Default)]
struct ParkHook {
    /// Times the runtime was about to park (it had nothing to run).
    parks: AtomicU64,
    /// Times it came back from a park.
    unparks: AtomicU64,
    /// A probe runs: let the clock auto-advance, and wake the driver after the park.
    probing: AtomicBool,
    /// The driver's future.
    waiter: Mutex<Option<Waker>>,
}

impl ParkHook {
    /// Before a park: outside a probe, wake the driver's future so that the runtime
    /// does not park (and its clock does not move).
    fn parking(&self) {
        self.parks.fetch_add(1, Ordering::Relaxed);
        if !self.probing.load(Ordering::Relaxed) {
            self.wake();
        }
    }

    /// After a park: in a probe, the clock has jumped to the next timer; wake the
    /// driver's future, which runs before the tasks that timer woke.
    fn unparked(&self) {
        self.unparks.fetch_add(1, Ordering::Relaxed);
        if self.probing.load(Ordering::Relaxed) {
            self.wake();
        }
    }

    fn wake(&self) {
        if let Some(waker) = self.waiter.lock().unwrap_or_else(|e| e.into_inner()).take() {
            waker.wake();
        }
    }

    fn wait(&self, waker: &Waker) {
        *self.waiter.lock().unwrap_or_else(|e| e.into_inner()) = Some(waker.clone());
    }
}

impl HostRuntime {
    /// A runtime whose clock starts at simulated time `now`.
    pub(crate) fn new(now: Instant) -> io::Result<HostRuntime> {
        let parks = Arc::new(ParkHook::default());
        let (hook, unhook) = (Arc::clone(&parks), Arc::clone(&parks));
        let runtime = Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .on_thread_park(move || hook.parking())
            .on_thread_unpark(move || unhook.unparked())
            .build()?;
        Ok(HostRuntime {
            runtime,
            local: LocalSet::new(),
            parks,
            origin: now,
            clock: now,
            pending: None,
        })
    }

    /// Start `task` on this host (it runs at the next [`HostRuntime::run_at`]).
    pub(crate) fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.local.spawn_local(task)
    }

    /// The first boundary of this runtime's timer grid after `now`.
    pub(crate) fn next_tick_after(&self, now: Instant) -> Instant {
        let since = now.saturating_duration_since(self.origin).as_nanos();
        let ticks = since / TICK.as_nanos() + 1;
        self.origin + Duration::from_nanos(ticks * TICK.as_nanos())
    }

    /// Simulated time the runtime's clock shows.
    pub(crate) fn clock(&self) -> Instant {
        self.clock
    }

    /// Whether the host must run at `t`: a timer-grid boundary it has not seen, or
    /// where a probe left it.
    pub(crate) fn due(&self, t: Instant) -> bool {
        t >= self.next_tick_after(self.clock) || self.pending.is_some_and(|p| p <= t)
    }

    /// The next instant the host must run at, counted from `now`.
    pub(crate) fn next_stop(&self, now: Instant) -> Instant {
        self.pending.unwrap_or_else(|| self.next_tick_after(now))
    }

    /// The last boundary of the timer grid at or before `t`.
    fn grid_floor(&self, t: Instant) -> Instant {
        let since = t.saturating_duration_since(self.origin).as_nanos();
        self.origin + Duration::from_nanos(since - since % TICK.as_nanos())
    }

    /// Let the clock jump, from the grid boundary it is on, to the runtime's next timer
    /// or to `bound`, whichever is first, without running the tasks that timer wakes:
    /// the host then has nothing to do before the clock ([`HostRuntime::next_stop`]).
    /// The caller promises that nothing reaches the host before `bound` (no frame can
    /// arrive, no stack timer fires). Does nothing off the grid, or when `bound` is not
    /// two boundaries ahead (the next boundary is a stop anyway).
    pub(crate) fn probe(&mut self, bound: Instant) {
        let bound = self.grid_floor(bound);
        if self.pending.is_some()
            || self.grid_floor(self.clock) != self.clock
            || bound <= self.next_tick_after(self.clock)
        {
            return;
        }
        let hook = Arc::clone(&self.parks);
        let span = std::time::Duration::from_nanos((bound - self.clock).as_nanos());
        hook.probing.store(true, Ordering::Relaxed);
        let moved = self.runtime.block_on(self.local.run_until(async move {
            let start = tokio::time::Instant::now();
            Probe::new(hook, tokio::time::sleep_until(start + span)).await;
            start.elapsed()
        }));
        self.parks.probing.store(false, Ordering::Relaxed);
        self.clock += Duration::from_nanos(u64::try_from(moved.as_nanos()).unwrap_or(u64::MAX));
        self.pending = Some(self.clock);
    }

    /// Move the clock to `t` (firing the timers due) and run the tasks until none can
    /// make progress at `t`.
    pub(crate) fn run_at(&mut self, t: Instant) {
        let delta = t.saturating_duration_since(self.clock);
        self.clock = self.clock.max(t);
        self.pending = None;
        let parks = Arc::clone(&self.parks);
        self.runtime.block_on(self.local.run_until(async move {
            if delta > Duration::ZERO {
                tokio::time::advance(std::time::Duration::from_nanos(delta.as_nanos())).await;
            }
            Settle::new(parks).await;
        }));
    }

    /// The output of a finished task (its panic resumed here).
    pub(crate) fn take_output<T>(&self, handle: tokio::task::JoinHandle<T>) -> Option<T> {
        match self.runtime.block_on(handle) {
            Ok(value) => Some(value),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => None,
        }
    }
}

/// Ready once the runtime has gone idle [`SETTLE_ROUNDS`] times.
struct Settle {
    hook: Arc<ParkHook>,
    seen: u64,
    rounds: u8,
}

impl Settle {
    fn new(hook: Arc<ParkHook>) -> Settle {
        let seen = hook.parks.load(Ordering::Relaxed);
        Settle {
            hook,
            seen,
            rounds: 0,
        }
    }
}

impl Future for Settle {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let parks = self.hook.parks.load(Ordering::Relaxed);
        if parks != self.seen {
            self.seen = parks;
            self.rounds += 1;
            if self.rounds >= SETTLE_ROUNDS {
                return Poll::Ready(());
            }
        }
        self.hook.wait(cx.waker());
        Poll::Pending
    }
}

/// Ready after the runtime's first park: its clock has jumped to its next timer, or to
/// the bound `sleep` sets.
struct Probe {
    hook: Arc<ParkHook>,
    seen: u64,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Probe {
    fn new(hook: Arc<ParkHook>, sleep: tokio::time::Sleep) -> Probe {
        let seen = hook.unparks.load(Ordering::Relaxed);
        Probe {
            hook,
            seen,
            sleep: Box::pin(sleep),
        }
    }
}

impl Future for Probe {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Polled for its registration: the bound is a timer like the tasks'.
        let _ = self.sleep.as_mut().poll(cx);
        if self.hook.unparks.load(Ordering::Relaxed) != self.seen {
            return Poll::Ready(());
        }
        self.hook.wait(cx.waker());
        Poll::Pending
    }
}
