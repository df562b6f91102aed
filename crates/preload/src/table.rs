//! Which descriptors are imp's: a map from descriptor to socket, and a count so that a
//! program without imp sockets (or a call on one of its files) pays one atomic load.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use libc::c_int;

use crate::socket::Socket;

/// Imp sockets open; 0 lets every lookup return at once.
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// The sockets by descriptor. Nothing is written to stderr and no socket call is made
/// while this is locked (either could come back here).
static TABLE: Mutex<BTreeMap<c_int, Arc<Socket>>> = Mutex::new(BTreeMap::new());

fn table() -> MutexGuard<'static, BTreeMap<c_int, Arc<Socket>>> {
    TABLE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The imp socket behind `fd`, if it is one.
pub(crate) fn get(fd: c_int) -> Option<Arc<Socket>> {
    if fd < 0 || COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    table().get(&fd).cloned()
}

/// Whether any of `fds` is imp's (one lock for all).
pub(crate) fn any(fds: impl IntoIterator<Item = c_int>) -> bool {
    if COUNT.load(Ordering::Acquire) == 0 {
        return false;
    }
    let table = table();
    fds.into_iter().any(|fd| table.contains_key(&fd))
}

/// Enter a new socket under its descriptor.
pub(crate) fn insert(socket: Arc<Socket>) -> c_int {
    let fd = socket.fd();
    let old = table().insert(fd, socket);
    if old.is_none() {
        COUNT.fetch_add(1, Ordering::AcqRel);
    }
    // `old` (a socket whose descriptor the kernel handed out again, which cannot
    // happen while its eventfd is open) drops here, outside the lock.
    drop(old);
    fd
}

/// Take `fd` out of the table (its socket closes when the last user lets go).
pub(crate) fn remove(fd: c_int) -> Option<Arc<Socket>> {
    if fd < 0 || COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    let removed = table().remove(&fd);
    if removed.is_some() {
        COUNT.fetch_sub(1, Ordering::AcqRel);
    }
    removed
}
