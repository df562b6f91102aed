//! epoll over imp sockets and kernel descriptors together.
//!
//! An imp socket added to an epoll instance is registered with the kernel as its
//! eventfd (`EPOLLIN`, tagged data), and its own interest (events, the program's data)
//! is kept here. `epoll_wait` first asks imp which of the instance's imp sockets are
//! ready, then waits in the kernel (not at all if some were): kernel events are
//! passed on, an eventfd's wake-up sends the call round again. Edge-triggered interest
//! (`EPOLLET`) is reported when the socket was woken since the last look (or was just
//! added or modified); `EPOLLONESHOT` disarms the interest until `EPOLL_CTL_MOD`.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use libc::{c_int, epoll_event};

use impnet::Runtime;

use crate::errno::{guarded, unsupported};
use crate::real::real;
use crate::table;

/// The kernel-side data of an imp socket's eventfd: this tag, the descriptor in the
/// low 32 bits.
const TAG: u64 = 0x696d_7065_0000_0000;
const TAG_MASK: u64 = 0xffff_ffff_0000_0000;
/// The kernel-side data of the runtime's device descriptor
/// ([`Runtime::event_loop_fd`]) in an instance: no socket's (no descriptor is -1).
const DEVICES: u64 = TAG | 0xffff_ffff;

/// One imp socket's interest in one epoll instance.
#[derive(Debug, Clone, Copy)]
struct Interest {
    /// `EPOLLIN`, `EPOLLOUT`, `EPOLLRDHUP`, `EPOLLET`, `EPOLLONESHOT`, ...
    events: u32,
    /// The program's data, handed back with each event.
    data: u64,
    /// Added or modified since the last look: reported even edge-triggered.
    fresh: bool,
    /// The socket's [`Socket::ops`](crate::socket::Socket::ops) when last reported.
    seen_ops: u64,
}

/// Imp sockets in epoll instances; 0 lets `epoll_wait` go straight to the kernel.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Some instance holds the runtime's device descriptor (`close` then looks).
static WATCHING_ANY: AtomicBool = AtomicBool::new(false);
/// epoll descriptor -> imp descriptor -> interest.
static INTERESTS: Mutex<BTreeMap<c_int, BTreeMap<c_int, Interest>>> = Mutex::new(BTreeMap::new());

/// The epoll instances that hold the runtime's device descriptor.
static WATCHING: Mutex<BTreeSet<c_int>> = Mutex::new(BTreeSet::new());

fn watching() -> MutexGuard<'static, BTreeSet<c_int>> {
    WATCHING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn interests() -> MutexGuard<'static, BTreeMap<c_int, BTreeMap<c_int, Interest>>> {
    INTERESTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `fd` is closing: out of every instance (and, if it is an instance, its list).
pub(crate) fn forget(fd: c_int) {
    if WATCHING_ANY.load(Ordering::Acquire) {
        watching().remove(&fd);
    }
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut all = interests();
    if let Some(list) = all.remove(&fd) {
        COUNT.fetch_sub(list.len(), Ordering::AcqRel);
    }
    for list in all.values_mut() {
        if list.remove(&fd).is_some() {
            COUNT.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// `epoll_ctl` for an imp socket.
fn ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut epoll_event) -> io::Result<()> {
    // SAFETY: the caller's event, read by copy (the struct is packed).
    let wanted = (!event.is_null()).then(|| unsafe { std::ptr::read_unaligned(event) });
    let mut all = interests();
    let list = all.entry(epfd).or_default();
    match op {
        libc::EPOLL_CTL_ADD => {
            if list.contains_key(&fd) {
                return Err(io::Error::from_raw_os_error(libc::EEXIST));
            }
            let wanted = wanted.ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
            let mut kernel = epoll_event {
                events: libc::EPOLLIN as u32,
                u64: TAG | u64::from(fd as u32),
            };
            // SAFETY: a live event; the eventfd behind `fd` is the kernel's to watch.
            let rc = unsafe {
                real!(epoll_ctl: fn(c_int, c_int, c_int, *mut epoll_event) -> c_int)(
                    epfd,
                    op,
                    fd,
                    &mut kernel,
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            list.insert(
                fd,
                Interest {
                    events: wanted.events,
                    data: wanted.u64,
                    fresh: true,
                    seen_ops: 0,
                },
            );
            COUNT.fetch_add(1, Ordering::AcqRel);
        }
        libc::EPOLL_CTL_MOD => {
            let wanted = wanted.ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
            let interest = list
                .get_mut(&fd)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
            *interest = Interest {
                events: wanted.events,
                data: wanted.u64,
                fresh: true,
                seen_ops: 0,
            };
        }
        libc::EPOLL_CTL_DEL => {
            list.remove(&fd)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
            COUNT.fetch_sub(1, Ordering::AcqRel);
            // SAFETY: no event needed for a removal.
            unsafe {
                real!(epoll_ctl: fn(c_int, c_int, c_int, *mut epoll_event) -> c_int)(
                    epfd,
                    op,
                    fd,
                    std::ptr::null_mut(),
                )
            };
        }
        _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
    }
    Ok(())
}

/// The imp events that hold for `epfd`'s imp sockets, at most `room` of them.
fn imp_events(epfd: c_int, room: usize) -> Vec<epoll_event> {
    let snapshot: Vec<(c_int, Interest)> = match interests().get(&epfd) {
        Some(list) => list.iter().map(|(fd, i)| (*fd, *i)).collect(),
        None => return Vec::new(),
    };
    let mut out = Vec::new();
    for (fd, interest) in snapshot {
        if out.len() >= room {
            break;
        }
        let Some(socket) = table::get(fd) else {
            continue;
        };
        let woke = socket.drain();
        let ops = socket.ops();
        let mut want = 0i16;
        if interest.events & libc::EPOLLIN as u32 != 0 {
            want |= libc::POLLIN;
        }
        if interest.events & libc::EPOLLOUT as u32 != 0 {
            want |= libc::POLLOUT;
        }
        if interest.events & libc::EPOLLRDHUP as u32 != 0 {
            want |= libc::POLLRDHUP;
        }
        if want == 0 {
            continue;
        }
        let got = socket.revents(want);
        let edge = interest.events & libc::EPOLLET as u32 != 0;
        // Edge-triggered: reported after a wake-up, or after the program read or
        // wrote (the kernel would report data that came meanwhile, which woke
        // nothing here: no waker is registered while a socket is readable).
        let changed = woke || interest.fresh || ops != interest.seen_ops;
        if got == 0 || (edge && !changed) {
            continue;
        }
        // poll's and epoll's bits agree for IN, OUT, ERR, HUP and RDHUP.
        out.push(epoll_event {
            events: u32::from(got as u16),
            u64: interest.data,
        });
        if let Some(kept) = interests().get_mut(&epfd).and_then(|l| l.get_mut(&fd)) {
            kept.fresh = false;
            kept.seen_ops = ops;
            if interest.events & libc::EPOLLONESHOT as u32 != 0 {
                kept.events = 0;
            }
        }
    }
    out
}

/// The runtime, when `epfd` holds (now) its device descriptor, so that a frame wakes
/// the program's thread in `epoll_wait` and is taken in there (see
/// [`Runtime::event_loop_fd`]); `None` leaves the devices to the runtime's thread.
fn event_loop(epfd: c_int) -> Option<&'static Runtime> {
    let rt = crate::imp().ok().flatten()?;
    let devices = rt.event_loop_fd()?;
    let mut watching = watching();
    if !watching.contains(&epfd) {
        let mut kernel = epoll_event {
            events: libc::EPOLLIN as u32,
            u64: DEVICES,
        };
        // SAFETY: a live event; the descriptor is the runtime's, open while it runs.
        let rc = unsafe {
            real!(epoll_ctl: fn(c_int, c_int, c_int, *mut epoll_event) -> c_int)(
                epfd,
                libc::EPOLL_CTL_ADD,
                devices,
                &mut kernel,
            )
        };
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return None;
        }
        watching.insert(epfd);
        WATCHING_ANY.store(true, Ordering::Release);
    }
    Some(rt)
}

/// `epoll_wait` on an instance that holds imp sockets.
///
/// When the instance holds the runtime's device descriptor too, the call takes in
/// the frames that woke it itself, and before it sleeps, what the devices hold: a
/// request then reaches the program in one wake-up, not two (device to runtime
/// thread, runtime thread to program).
fn wait(epfd: c_int, events: *mut epoll_event, max: c_int, timeout: c_int) -> io::Result<c_int> {
    let room = usize::try_from(max)
        .ok()
        .filter(|m| *m > 0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    let deadline = u64::try_from(timeout)
        .ok()
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    let driver = event_loop(epfd);
    let mut kernel = vec![epoll_event { events: 0, u64: 0 }; room];
    loop {
        let mut out = imp_events(epfd, room);
        let mut entered = None;
        if out.is_empty()
            && let Some(rt) = driver
            && rt.event_loop_enter().is_ok()
        {
            entered = Some(rt);
            out = imp_events(epfd, room);
        }
        // The imp events are looked at again after the frames the wait took in only if
        // there were none (a level-triggered socket must not be reported twice).
        let imp_found = !out.is_empty();
        let wait_ms = if out.is_empty() {
            deadline.map_or(-1, |d| {
                c_int::try_from(d.saturating_duration_since(Instant::now()).as_millis())
                    .unwrap_or(c_int::MAX)
            })
        } else {
            0
        };
        let slots = c_int::try_from(room - out.len()).unwrap_or(0).max(1);
        // SAFETY: `kernel` holds `room` events, `slots` at most that.
        let n = unsafe {
            real!(epoll_wait: fn(c_int, *mut epoll_event, c_int, c_int) -> c_int)(
                epfd,
                kernel.as_mut_ptr(),
                slots,
                wait_ms,
            )
        };
        let failed = (n < 0).then(io::Error::last_os_error);
        if let Some(rt) = entered {
            rt.event_loop_leave();
        }
        if let Some(error) = failed {
            return Err(error);
        }
        let mut frames = false;
        for event in &kernel[..n as usize] {
            let data = event.u64;
            if data == DEVICES {
                frames = true;
            } else if data & TAG_MASK != TAG {
                if out.len() < room {
                    out.push(*event);
                }
            } else if let Some(socket) = table::get((data & !TAG_MASK) as u32 as c_int) {
                // Its eventfd is readable: empty it, or it would wake every wait; the
                // wake-up counts for edge-triggered interest.
                socket.drain_all();
                socket.mark_woken();
            }
        }
        if frames && let Some(rt) = driver {
            let _ = rt.event_loop_poll();
            if !imp_found && out.len() < room {
                out.extend(imp_events(epfd, room - out.len()));
            }
        }
        if !out.is_empty() || wait_ms == 0 {
            // SAFETY: the caller's array of `max` events; we write at most `room`.
            unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), events, out.len()) };
            return Ok(out.len() as c_int);
        }
    }
}

/// # Safety
/// A C `epoll_ctl(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_ctl(
    epfd: c_int,
    op: c_int,
    fd: c_int,
    event: *mut epoll_event,
) -> c_int {
    if table::get(fd).is_none() {
        return unsafe {
            real!(epoll_ctl: fn(c_int, c_int, c_int, *mut epoll_event) -> c_int)(
                epfd, op, fd, event,
            )
        };
    }
    guarded("epoll_ctl", || {
        crate::check_not_forked("epoll_ctl")?;
        ctl(epfd, op, fd, event).map(|()| 0)
    })
}

/// Whether `epfd` holds imp sockets.
fn has_imp(epfd: c_int) -> bool {
    COUNT.load(Ordering::Acquire) > 0 && interests().get(&epfd).is_some_and(|l| !l.is_empty())
}

/// # Safety
/// A C `epoll_wait(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
) -> c_int {
    if !has_imp(epfd) {
        return unsafe {
            real!(epoll_wait: fn(c_int, *mut epoll_event, c_int, c_int) -> c_int)(
                epfd, events, max, timeout,
            )
        };
    }
    guarded("epoll_wait", || wait(epfd, events, max, timeout))
}

/// `epoll_pwait`: with imp sockets, only without a signal mask.
///
/// # Safety
/// A C `epoll_pwait(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut epoll_event,
    max: c_int,
    timeout: c_int,
    sigmask: *const libc::sigset_t,
) -> c_int {
    if !has_imp(epfd) {
        return unsafe {
            real!(epoll_pwait: fn(c_int, *mut epoll_event, c_int, c_int, *const libc::sigset_t) -> c_int)(
                epfd, events, max, timeout, sigmask,
            )
        };
    }
    guarded("epoll_pwait", || {
        if !sigmask.is_null() {
            return Err(unsupported("epoll_pwait with a signal mask"));
        }
        wait(epfd, events, max, timeout)
    })
}
