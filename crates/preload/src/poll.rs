//! `poll`, `ppoll` and `select` over imp sockets and kernel descriptors together.
//!
//! An imp socket's entry is answered from imp (registering the socket's waker when
//! the events asked for do not hold) and waited on as its eventfd's `POLLIN`; kernel
//! descriptors go to the kernel as they are, in the same `poll` system call. A wake-up
//! that leaves every asked-for event false (the eventfd signals "may have changed")
//! sends the call round again until its timeout.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libc::{c_int, nfds_t, pollfd};

use crate::errno::{guarded, unsupported};
use crate::real::real;
use crate::socket::Socket;
use crate::table;

/// `poll` over `fds`, some of them imp's (`socks[i]`); `timeout` as `poll` has it
/// (negative: forever).
fn poll_mixed(
    fds: &mut [pollfd],
    socks: &[Option<Arc<Socket>>],
    timeout: Option<Duration>,
) -> io::Result<c_int> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut kernel: Vec<pollfd> = fds.to_vec();
    loop {
        let mut ready = 0;
        for ((entry, k), sock) in fds.iter_mut().zip(kernel.iter_mut()).zip(socks) {
            match sock {
                Some(s) => {
                    let _ = s.drain_all();
                    entry.revents = s.revents(entry.events);
                    ready += c_int::from(entry.revents != 0);
                    *k = pollfd {
                        fd: s.fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                }
                None => {
                    *k = pollfd {
                        revents: 0,
                        ..*entry
                    }
                }
            }
        }
        let wait_ms = if ready > 0 {
            0
        } else {
            match deadline {
                Some(d) => c_int::try_from(d.saturating_duration_since(Instant::now()).as_millis())
                    .unwrap_or(c_int::MAX),
                None => -1,
            }
        };
        // SAFETY: a live array of `kernel.len()` pollfds.
        let n = unsafe {
            real!(poll: fn(*mut pollfd, nfds_t, c_int) -> c_int)(
                kernel.as_mut_ptr(),
                kernel.len() as nfds_t,
                wait_ms,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        for ((entry, k), sock) in fds.iter_mut().zip(&kernel).zip(socks) {
            if sock.is_none() {
                entry.revents = k.revents;
                ready += c_int::from(k.revents != 0);
            }
        }
        if ready > 0 || wait_ms == 0 {
            return Ok(ready);
        }
        // Only imp eventfds woke us: look again.
    }
}

/// The imp sockets among `fds`, or None when there are none.
fn imp_entries(fds: &[pollfd]) -> Option<Vec<Option<Arc<Socket>>>> {
    if !table::any(fds.iter().map(|p| p.fd)) {
        return None;
    }
    Some(fds.iter().map(|p| table::get(p.fd)).collect())
}

/// The pollfds of a C call.
///
/// # Safety
/// `fds` points to `nfds` pollfds (or `nfds` is 0).
unsafe fn entries<'a>(fds: *mut pollfd, nfds: nfds_t) -> &'a mut [pollfd] {
    if fds.is_null() || nfds == 0 {
        return &mut [];
    }
    // SAFETY: the caller's.
    unsafe { std::slice::from_raw_parts_mut(fds, nfds as usize) }
}

/// # Safety
/// A C `poll(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn poll(fds: *mut pollfd, nfds: nfds_t, timeout: c_int) -> c_int {
    // SAFETY: the caller's array.
    let entries = unsafe { entries(fds, nfds) };
    let Some(socks) = imp_entries(entries) else {
        return unsafe { real!(poll: fn(*mut pollfd, nfds_t, c_int) -> c_int)(fds, nfds, timeout) };
    };
    let timeout = u64::try_from(timeout).ok().map(Duration::from_millis);
    guarded("poll", || {
        crate::check_not_forked("poll")?;
        poll_mixed(entries, &socks, timeout)
    })
}

/// # Safety
/// glibc's fortified `poll`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn __poll_chk(
    fds: *mut pollfd,
    nfds: nfds_t,
    timeout: c_int,
    _fdslen: libc::size_t,
) -> c_int {
    // SAFETY: forwarded as given.
    unsafe { poll(fds, nfds, timeout) }
}

/// `ppoll`: with imp sockets, only without a signal mask (the mask would have to be
/// swapped in atomically around the wait, which this library does not do).
///
/// # Safety
/// A C `ppoll(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    nfds: nfds_t,
    ts: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: the caller's array.
    let entries = unsafe { entries(fds, nfds) };
    let Some(socks) = imp_entries(entries) else {
        return unsafe {
            real!(ppoll: fn(*mut pollfd, nfds_t, *const libc::timespec, *const libc::sigset_t) -> c_int)(
                fds, nfds, ts, sigmask,
            )
        };
    };
    guarded("ppoll", || {
        crate::check_not_forked("ppoll")?;
        if !sigmask.is_null() {
            return Err(unsupported("ppoll with a signal mask"));
        }
        // SAFETY: the caller's timespec, if any.
        let timeout = (!ts.is_null()).then(|| unsafe {
            Duration::new(
                u64::try_from((*ts).tv_sec).unwrap_or(0),
                u32::try_from((*ts).tv_nsec).unwrap_or(0),
            )
        });
        poll_mixed(entries, &socks, timeout)
    })
}

/// The descriptors below `nfds` set in any of the three sets, as pollfds.
///
/// # Safety
/// Each set is null or a valid fd_set.
unsafe fn sets_to_pollfds(
    nfds: c_int,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
) -> Vec<pollfd> {
    let mut out = Vec::new();
    for fd in 0..nfds.min(libc::FD_SETSIZE as c_int) {
        // SAFETY: the caller's sets; fd is below FD_SETSIZE.
        let in_set = |set: *mut libc::fd_set| !set.is_null() && unsafe { libc::FD_ISSET(fd, set) };
        let mut events = 0;
        if in_set(read) {
            events |= libc::POLLIN;
        }
        if in_set(write) {
            events |= libc::POLLOUT;
        }
        if in_set(except) {
            events |= libc::POLLPRI;
        }
        if events != 0 {
            out.push(pollfd {
                fd,
                events,
                revents: 0,
            });
        }
    }
    out
}

/// # Safety
/// A C `select(2)` call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn select(
    nfds: c_int,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    // SAFETY: the caller's sets.
    let mut pfds = unsafe { sets_to_pollfds(nfds, read, write, except) };
    let Some(socks) = imp_entries(&pfds) else {
        return unsafe {
            real!(select: fn(c_int, *mut libc::fd_set, *mut libc::fd_set, *mut libc::fd_set, *mut libc::timeval) -> c_int)(
                nfds, read, write, except, timeout,
            )
        };
    };
    guarded("select", || {
        crate::check_not_forked("select")?;
        // SAFETY: the caller's timeval, if any.
        let limit = (!timeout.is_null()).then(|| unsafe {
            Duration::from_secs(u64::try_from((*timeout).tv_sec).unwrap_or(0))
                + Duration::from_micros(u64::try_from((*timeout).tv_usec).unwrap_or(0))
        });
        let start = Instant::now();
        poll_mixed(&mut pfds, &socks, limit)?;
        // SAFETY: the caller's sets and timeval.
        unsafe {
            pollfds_to_sets(
                &pfds,
                read,
                write,
                except,
                timeout,
                limit.map(|l| l.saturating_sub(start.elapsed())),
            )
        }
    })
}

/// Write `pfds`' results back into the sets (and, as Linux does, the time left into
/// `timeout`); the count of bits set.
///
/// # Safety
/// Each set is null or a valid fd_set; `timeout` null or valid.
unsafe fn pollfds_to_sets(
    pfds: &[pollfd],
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
    timeout: *mut libc::timeval,
    left: Option<Duration>,
) -> io::Result<c_int> {
    // SAFETY: the caller's.
    unsafe {
        for set in [read, write, except] {
            if !set.is_null() {
                libc::FD_ZERO(set);
            }
        }
        let mut count = 0;
        let mut mark = |set: *mut libc::fd_set, fd: c_int, on: bool| {
            if on && !set.is_null() {
                libc::FD_SET(fd, set);
                count += 1;
            }
        };
        for p in pfds {
            let r = p.revents;
            if r & libc::POLLNVAL != 0 {
                return Err(io::Error::from_raw_os_error(libc::EBADF));
            }
            let hangup = libc::POLLHUP | libc::POLLERR;
            mark(
                read,
                p.fd,
                p.events & libc::POLLIN != 0 && r & (libc::POLLIN | hangup) != 0,
            );
            mark(
                write,
                p.fd,
                p.events & libc::POLLOUT != 0 && r & (libc::POLLOUT | libc::POLLERR) != 0,
            );
            mark(
                except,
                p.fd,
                p.events & libc::POLLPRI != 0 && r & libc::POLLPRI != 0,
            );
        }
        if let (false, Some(left)) = (timeout.is_null(), left) {
            (*timeout).tv_sec = left.as_secs() as libc::time_t;
            (*timeout).tv_usec = libc::suseconds_t::from(left.subsec_micros());
        }
        Ok(count)
    }
}
