//! Readiness (`poll`, `epoll`) of the shim's sockets, as Linux's `tcp_poll` reports it:
//! the bits, and what an epoll instance watches. The shim computes them (`shim/poll.rs`).

use std::collections::BTreeMap;

/// `poll` bits (the `epoll` ones have the same values).
pub const POLLIN: u32 = libc::POLLIN as u32;
/// Room to write.
pub const POLLOUT: u32 = libc::POLLOUT as u32;
/// An error is pending.
pub const POLLERR: u32 = libc::POLLERR as u32;
/// Both directions are closed.
pub const POLLHUP: u32 = libc::POLLHUP as u32;
/// The peer closed its sending half.
pub const POLLRDHUP: u32 = libc::POLLRDHUP as u32;
/// Always reported, asked for or not.
pub(crate) const ALWAYS: u32 = POLLERR | POLLHUP;

/// One epoll instance: the descriptors it watches.
#[derive(Debug, Default)]
pub struct Epoll {
    /// fd -> interest.
    pub(crate) interests: BTreeMap<i32, Interest>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Interest {
    pub(crate) events: u32,
    pub(crate) data: u64,
    /// For EPOLLET: the bits, readable bytes, write-space and error-queue wake-ups
    /// seen last. An edge is a new bit, more bytes to read (new data), a write-space
    /// wake-up (`sk_stream_write_space`: an ACK made a writer out of room writable) or
    /// a record queued on the error queue, as Linux's wake-ups on data arrival, on
    /// freed send space and `sk_error_report`.
    pub(crate) last: (u32, usize, u64, u64),
    /// EPOLLONESHOT fired: nothing more until EPOLL_CTL_MOD.
    pub(crate) disarmed: bool,
}

impl Epoll {
    /// Forget a closed descriptor.
    pub fn forget(&mut self, fd: i32) {
        self.interests.remove(&fd);
    }
}
