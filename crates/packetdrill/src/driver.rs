//! Blocking semantics on virtual time, shared by packetdrill's two threads.
//!
//! packetdrill runs a call the script marks as blocking (`0...0.1 read(...)`) on a
//! second thread and goes on with the script on its main thread; it waits for the
//! call's thread to be asleep before it does. So a blocked call sleeps on a condition
//! variable and looks again whenever anything changed (`Shim::generation`). Who moves
//! the clock meanwhile:
//! - on the thread that made the interface (packetdrill's main thread, or a
//!   single-threaded harness) nobody else can: the call moves it itself, to the
//!   stack's next deadline, until it can complete;
//! - on another thread the main thread moves it (`usleep`, `gettimeofday`,
//!   `netdev_receive`); only when nothing at all happened for `IDLE_GRACE` (250 ms) of real
//!   time (the main thread waits for this call) does the call move it itself.
//!
//! `netdev_receive` lets a blocked call look again before it moves the clock to the
//! next deadline, so a call that can now complete does so at the right instant.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};
use std::time::Duration as RealDuration;

use impnet_core::{Duration, Instant};

use crate::errno::{Errno, TIMED_OUT};
use crate::shim::{Sent, Shim};
use crate::socket::Fd;

/// Real time a blocked call on the second thread waits for any activity before it
/// moves the clock itself.
const IDLE_GRACE: RealDuration = RealDuration::from_millis(250);
/// Real time `netdev_receive` gives a blocked call to look again.
const CATCH_UP: RealDuration = RealDuration::from_millis(200);

/// The shim behind a lock, and the waits.
#[derive(Debug)]
pub struct Driver {
    state: Mutex<State>,
    changed: Condvar,
    owner: ThreadId,
}

#[derive(Debug)]
struct State {
    shim: Shim,
    /// A call blocked on another thread: that thread, and the generation it last
    /// looked at.
    blocked: Option<(ThreadId, u64)>,
}

impl State {
    /// A call blocked on a thread other than the caller's has not looked since the
    /// last change.
    fn stale(&self) -> bool {
        let me = thread::current().id();
        self.blocked
            .is_some_and(|(thread, seen)| thread != me && seen != self.shim.generation)
    }
}

impl Driver {
    /// A driver for `shim`, owned by the calling thread.
    pub fn new(shim: Shim) -> Driver {
        Driver {
            state: Mutex::new(State {
                shim,
                blocked: None,
            }),
            changed: Condvar::new(),
            owner: thread::current().id(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Run `f` on the shim, then wake whoever waits. A call blocked on another thread
    /// that has not looked since the last change goes first (for up to `CATCH_UP` of
    /// real time): packetdrill's main thread spins on the clock, and without this the
    /// blocked call would win the lock only later, at a later virtual time.
    pub fn with<R>(&self, f: impl FnOnce(&mut Shim) -> R) -> R {
        let mut state = self.catch_up(self.lock());
        let result = f(&mut state.shim);
        drop(state);
        self.changed.notify_all();
        result
    }

    /// Let a stale blocked call look again before going on.
    fn catch_up<'a>(&'a self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        if !state.stale() {
            return state;
        }
        self.changed.notify_all();
        self.changed
            .wait_timeout_while(state, CATCH_UP, |s| s.stale())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
    }

    /// Run `f` until it does not say `EAGAIN` (at once for a non-blocking `fd`; `fd` -1
    /// always waits), waiting as the module docs say; with `timeout`, at most that
    /// long, then [`TIMED_OUT`].
    pub fn blocking<R>(
        &self,
        fd: i32,
        timeout: Option<Duration>,
        mut f: impl FnMut(&mut Shim) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let mut state = self.lock();
        let nonblocking = match state.shim.fds.get(&fd) {
            Some(Fd::Tcp(socket)) => socket.nonblocking,
            _ => false,
        };
        let limit = timeout.map(|t| state.shim.now + t);
        let result = loop {
            match f(&mut state.shim) {
                Err(libc::EAGAIN) if !nonblocking => {}
                other => break other,
            }
            if limit.is_some_and(|limit| state.shim.now >= limit) {
                break Err(TIMED_OUT);
            }
            match self.wait(state, limit) {
                Ok(next) => state = next,
                Err(next) => {
                    state = next;
                    break Err(libc::EAGAIN);
                }
            }
        };
        state.blocked = None;
        drop(state);
        self.changed.notify_all();
        result
    }

    /// One wait of a blocked call; Err when it can never complete (nothing pending and
    /// nobody else to act).
    #[allow(clippy::result_large_err)]
    fn wait<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        limit: Option<Instant>,
    ) -> Result<MutexGuard<'a, State>, MutexGuard<'a, State>> {
        if thread::current().id() == self.owner {
            let moved = state.shim.advance_to_next_deadline(limit);
            if !moved && limit.is_none() {
                eprintln!(
                    "imp-packetdrill: a blocking call can never complete: no timer is pending \
                     at {:.6} s and nothing else drives the stack",
                    state.shim.now.as_nanos() as f64 / 1e9
                );
                return Err(state);
            }
            return Ok(state);
        }
        let generation = state.shim.generation;
        state.blocked = Some((thread::current().id(), generation));
        self.changed.notify_all();
        let (mut state, waited) = self
            .changed
            .wait_timeout_while(state, IDLE_GRACE, |s| s.shim.generation == generation)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if waited.timed_out() {
            state.shim.advance_to_next_deadline(limit);
        }
        Ok(state)
    }

    /// The next packet the stack sends, moving the clock to the deadlines that make it
    /// send; None when nothing is pending at all.
    pub fn receive(&self) -> Option<Sent> {
        let mut state = self.lock();
        loop {
            if let Some(sent) = state.shim.next_sent() {
                return Some(sent);
            }
            if state.stale() {
                self.changed.notify_all();
                let (next, waited) = self
                    .changed
                    .wait_timeout_while(state, CATCH_UP, |s| s.stale())
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                state = next;
                if !waited.timed_out() {
                    continue;
                }
            }
            if !state.shim.advance_to_next_deadline(None) {
                return None;
            }
            self.changed.notify_all();
        }
    }
}
