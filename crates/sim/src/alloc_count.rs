//! A counting allocator for tests that bound memory: it forwards to the system allocator
//! and keeps, per thread, the bytes live and the highest they reached.
//!
//! A test binary installs it with
//! `#[global_allocator] static ALLOC: CountingAlloc = CountingAlloc;` and reads
//! [`live_bytes`] and [`peak_bytes`] around the code it measures. The counts are per
//! thread so tests that run in parallel in one binary do not see each other's
//! allocations; a simulation runs on one thread, so its stacks, links and applications
//! are all counted, except what [`uncounted`] excludes: the simulator runs its links'
//! work (the frames on the wire) that way, so that what is measured is the hosts.
//! Memory freed on another thread than the one that allocated it shows up as a negative
//! balance on the freeing thread (no simulator structure does that).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The allocator: [`System`] with per-thread byte counts.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
    static PAUSED: Cell<bool> = const { Cell::new(false) };
}

fn add(delta: isize) {
    if PAUSED.try_with(Cell::get).unwrap_or(false) {
        return;
    }
    // `try_with`: during a thread's teardown the slots may already be gone; those
    // allocations are simply not counted.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| {
            if now > peak.get() {
                peak.set(now);
            }
        });
    });
}

// SAFETY: every call forwards to `System` with the caller's own arguments; the counters
// are thread-local cells that never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged; the caller upholds `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            add(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            add(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        add(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by its contract.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            add(new_size as isize - layout.size() as isize);
        }
        new
    }
}

/// Bytes this thread has allocated and not freed (0 when the counting allocator is not
/// the global one).
pub fn live_bytes() -> isize {
    LIVE.with(Cell::get)
}

/// The highest [`live_bytes`] reached since the last [`reset_peak`] on this thread.
pub fn peak_bytes() -> isize {
    PEAK.with(Cell::get)
}

/// Restart the peak from the current live count.
pub fn reset_peak() {
    let now = live_bytes();
    PEAK.with(|peak| peak.set(now));
}

/// Run `f` with this thread's counts paused: what it allocates and frees is not
/// counted. Memory must not cross the boundary (allocated inside and freed outside, or
/// the reverse) or the live count drifts by its size. The simulator runs its links'
/// work this way: the frames on the wire and the link models' queues are the
/// simulation's, not the stacks'.
pub fn uncounted<R>(f: impl FnOnce() -> R) -> R {
    let was = PAUSED.try_with(|p| p.replace(true)).unwrap_or(false);
    let result = f();
    let _ = PAUSED.try_with(|p| p.set(was));
    result
}
