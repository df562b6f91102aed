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
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// Simulated time the runtime's clock shows.
    clock: Instant,
}

/// What the runtime's park hook shares with the future that waits for idleness.
#[derive(Default)]
struct ParkHook {
    /// Times the runtime was about to park (it had nothing to run).
    parks: AtomicU64,
    /// The driver's future, to wake before the runtime parks.
    waiter: Mutex<Option<Waker>>,
}

impl ParkHook {
    fn parking(&self) {
        self.parks.fetch_add(1, Ordering::Relaxed);
        if let Some(waker) = self.waiter.lock().unwrap_or_else(|e| e.into_inner()).take() {
            waker.wake();
        }
    }
}

impl HostRuntime {
    /// A runtime whose clock starts at simulated time `now`.
    pub(crate) fn new(now: Instant) -> io::Result<HostRuntime> {
        let parks = Arc::new(ParkHook::default());
        let hook = Arc::clone(&parks);
        let runtime = Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .on_thread_park(move || hook.parking())
            .build()?;
        Ok(HostRuntime {
            runtime,
            local: LocalSet::new(),
            parks,
            origin: now,
            clock: now,
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

    /// Whether moving the clock to `t` reaches a timer-grid boundary it has not seen.
    pub(crate) fn crosses_tick(&self, t: Instant) -> bool {
        t >= self.next_tick_after(self.clock)
    }

    /// Move the clock to `t` (firing the timers due) and run the tasks until none can
    /// make progress at `t`.
    pub(crate) fn run_at(&mut self, t: Instant) {
        let delta = t.saturating_duration_since(self.clock);
        self.clock = self.clock.max(t);
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
        *self.hook.waiter.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        Poll::Pending
    }
}
