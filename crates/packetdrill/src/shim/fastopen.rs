//! The shim's side of TCP Fast Open ([`crate::fastopen`]): the socket options, the
//! sysctls, a listener's Fast Open and a client's first write.

use std::net::SocketAddr;

use impnet_core::Duration;
use impnet_core::tcp::{EcnMode, MtuProbing, TcpHandle};

use crate::errno::{Errno, errno_of};
use crate::fastopen::{CLIENT, CLIENT_NO_COOKIE, SERVER, SERVER_ALWAYS, SERVER_NO_COOKIE};
use crate::flags::{parse_fastopen_key, parse_sysctl_int};
use crate::gather::take;
use crate::socket::Phase;

use super::Shim;

impl Shim {
    /// `/proc/sys/net/ipv4/<name>` when the flags say to read sysctls.
    pub(crate) fn sysctl(&self, name: &str) -> Option<String> {
        if !self.flags.sysctls {
            return None;
        }
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).ok()
    }

    /// `net.ipv4.tcp_fastopen`.
    fn fast_open_mode(&self) -> u32 {
        self.sysctl("tcp_fastopen")
            .and_then(|text| parse_sysctl_int(&text))
            .unwrap_or(self.flags.fastopen)
    }

    /// Apply `net.ipv4.tcp_timestamps` and `tcp_ecn` to connections opened from now
    /// on (`socket`).
    pub(crate) fn read_sysctls(&mut self) {
        let read = |name| self.sysctl(name).and_then(|text| parse_sysctl_int(&text));
        let (timestamps, ecn) = (read("tcp_timestamps"), read("tcp_ecn"));
        // Linux's path MTU probing sysctls (`tcp_probe_interval` in seconds).
        let probing = read("tcp_mtu_probing").and_then(MtuProbing::from_sysctl);
        let base_mss = read("tcp_base_mss").and_then(|v| u16::try_from(v).ok());
        let interval = read("tcp_probe_interval").map(|s| Duration::from_secs(u64::from(s)));
        let threshold = read("tcp_probe_threshold").and_then(|v| u16::try_from(v).ok());
        if let Some(on) = timestamps {
            self.stack.tcp_set_timestamps(on != 0);
        }
        let ecn = match ecn {
            Some(0) => Some(EcnMode::Off),
            Some(1) => Some(EcnMode::Request),
            Some(2) => Some(EcnMode::Accept),
            _ => None,
        };
        if let Some(mode) = ecn {
            self.stack.tcp_set_ecn(mode);
        }
        if probing.is_some() || base_mss.is_some() || interval.is_some() || threshold.is_some() {
            self.stack
                .tcp_set_mtu_probing(probing, base_mss, interval, threshold);
        }
    }

    /// The stack's key from `net.ipv4.tcp_fastopen_key` (at `listen`).
    fn fast_open_stack_key(&mut self) {
        let key = self
            .sysctl("tcp_fastopen_key")
            .and_then(|text| parse_fastopen_key(&text))
            .unwrap_or(self.flags.fastopen_key);
        let _ = self.stack.tcp_set_fast_open_key(None, &key);
    }

    /// `listen` made `listener` for `fd`, asked for `backlog`: Fast Open on it when the
    /// socket option or the sysctl says so.
    pub(crate) fn listen_fast_open(&mut self, fd: i32, listener: TcpHandle, backlog: i32) {
        let Ok(socket) = self.tcp_socket(fd) else {
            return;
        };
        let settings = socket.fast_open;
        let mode = self.fast_open_mode();
        let qlen = match settings.qlen {
            0 if mode & SERVER_ALWAYS != 0 => backlog.max(0),
            qlen => qlen,
        };
        self.fast_open_stack_key();
        self.listener_fast_open(listener, qlen, settings.key, mode);
    }

    /// Fast Open on `listener` with a queue of `qlen` (0: off), its own key if set,
    /// as `mode` (`net.ipv4.tcp_fastopen`) allows.
    fn listener_fast_open(
        &mut self,
        listener: TcpHandle,
        qlen: i32,
        key: Option<[u8; 16]>,
        mode: u32,
    ) {
        let qlen = if mode & SERVER == 0 { 0 } else { qlen.max(0) };
        let _ = self
            .stack
            .tcp_set_fast_open(listener, usize::try_from(qlen).unwrap_or(0));
        if qlen == 0 {
            return;
        }
        if let Some(key) = key {
            let _ = self.stack.tcp_set_fast_open_key(Some(listener), &key);
        }
        let _ = self
            .stack
            .tcp_set_fast_open_no_cookie(listener, mode & SERVER_NO_COOKIE != 0);
    }

    /// `setsockopt(IPPROTO_TCP, TCP_FASTOPEN*)`.
    pub(crate) fn set_fast_open_option(
        &mut self,
        fd: i32,
        name: i32,
        value: &[u8],
    ) -> Result<(), Errno> {
        let mode = self.fast_open_mode();
        let socket = self.tcp_socket(fd)?;
        let phase = socket.phase;
        let int = || {
            value
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(i32::from_ne_bytes)
                .ok_or(libc::EINVAL)
        };
        match name {
            libc::TCP_FASTOPEN => {
                // Linux: on a closed or listening socket only.
                if matches!(phase, Phase::Conn(_)) {
                    return Err(libc::EINVAL);
                }
                let qlen = int()?.max(0);
                socket.fast_open.qlen = qlen;
                let key = socket.fast_open.key;
                if let Phase::Listener(listener) = phase {
                    self.listener_fast_open(listener, qlen, key, mode);
                }
            }
            libc::TCP_FASTOPEN_CONNECT => {
                let on = int()?;
                if !(0..=1).contains(&on) {
                    return Err(libc::EINVAL);
                }
                if mode & CLIENT == 0 {
                    return Err(libc::EOPNOTSUPP);
                }
                if !matches!(phase, Phase::Fresh { .. }) {
                    return Err(libc::EINVAL);
                }
                socket.fast_open.connect = on == 1;
            }
            libc::TCP_FASTOPEN_KEY => {
                // Linux takes a key, or a key and its backup (ignored here).
                if value.len() != 16 && value.len() != 32 {
                    return Err(libc::EINVAL);
                }
                let mut key = [0u8; 16];
                key.copy_from_slice(&value[..16]);
                socket.fast_open.key = Some(key);
                if let Phase::Listener(listener) = phase {
                    let _ = self.stack.tcp_set_fast_open_key(Some(listener), &key);
                }
            }
            _ => return Err(libc::ENOPROTOOPT),
        }
        Ok(())
    }

    /// `getsockopt(IPPROTO_TCP, TCP_FASTOPEN*)`.
    pub(crate) fn get_fast_open_option(&mut self, fd: i32, name: i32) -> Result<Vec<u8>, Errno> {
        let settings = self.tcp_socket(fd)?.fast_open;
        match name {
            libc::TCP_FASTOPEN => Ok(settings.qlen.to_ne_bytes().to_vec()),
            libc::TCP_FASTOPEN_CONNECT => Ok(i32::from(settings.connect).to_ne_bytes().to_vec()),
            libc::TCP_FASTOPEN_KEY => {
                let key = settings.key.unwrap_or_else(|| {
                    self.sysctl("tcp_fastopen_key")
                        .and_then(|text| parse_fastopen_key(&text))
                        .unwrap_or(self.flags.fastopen_key)
                });
                Ok(key.to_vec())
            }
            _ => Err(libc::ENOPROTOOPT),
        }
    }

    /// Whether `fd`'s first write opens its connection (a deferred
    /// `TCP_FASTOPEN_CONNECT`).
    pub fn fast_open_deferred(&mut self, fd: i32) -> bool {
        self.tcp_socket(fd)
            .is_ok_and(|socket| socket.fast_open.deferred.is_some())
    }

    /// `connect` on a socket with `TCP_FASTOPEN_CONNECT`: 0 at once with a cookie for
    /// `remote` (the SYN waits for the first write, as Linux's
    /// `tcp_fastopen_defer_connect`), else a connect whose SYN asks for a cookie.
    /// None: not such a socket, a plain connect.
    pub fn fast_open_connect(&mut self, fd: i32, remote: SocketAddr) -> Option<Result<i32, Errno>> {
        let socket = self.tcp_socket(fd).ok()?;
        if !socket.fast_open.connect || !matches!(socket.phase, Phase::Fresh { .. }) {
            return None;
        }
        if socket.fast_open.deferred.is_some() {
            return Some(Err(libc::EISCONN));
        }
        let mss = self.route_mss(remote.is_ipv6());
        if self
            .stack
            .tcp_fast_open_syn_room(self.now, remote.ip(), mss)
            .is_some()
        {
            if let Ok(socket) = self.tcp_socket(fd) {
                socket.fast_open.deferred = Some(remote);
            }
            return Some(Ok(0));
        }
        Some(
            self.fast_open_start(fd, Some(remote), &[], true)
                .and(Err(libc::EINPROGRESS)),
        )
    }

    /// A write with `MSG_FASTOPEN` to `remote` (None: a deferred connect's), or a
    /// deferred connect's first write: opens the connection with the data. Returns the
    /// bytes taken; without waiting (`nonblocking`) only what the SYN carries (with a
    /// cookie) or nothing (`EINPROGRESS`). On a connecting socket `EALREADY`; on a
    /// connected one None: Linux then ignores the flag (a plain write).
    pub fn fast_open_start(
        &mut self,
        fd: i32,
        remote: Option<SocketAddr>,
        bufs: &[&[u8]],
        nonblocking: bool,
    ) -> Result<Option<usize>, Errno> {
        let mode = self.fast_open_mode();
        if mode & CLIENT == 0 {
            return Err(libc::EOPNOTSUPP);
        }
        self.stack
            .tcp_set_fast_open_client_no_cookie(mode & CLIENT_NO_COOKIE != 0);
        let socket = self.tcp_socket(fd)?;
        let maxseg = socket.options.maxseg;
        let remote = match (socket.phase, socket.fast_open.deferred, remote) {
            (Phase::Fresh { .. }, Some(deferred), _) => deferred,
            (Phase::Fresh { .. }, None, Some(remote)) => remote,
            (Phase::Fresh { .. }, None, None) => return Err(libc::EDESTADDRREQ),
            (Phase::Conn(_), ..) => {
                return match self.connect_done(fd) {
                    Err(libc::EAGAIN) => Err(libc::EALREADY),
                    _ => Ok(None),
                };
            }
            (Phase::Listener(_), ..) => return Err(libc::ENOTCONN),
        };
        let remote = self.stack_address(fd, remote)?;
        let route_mss = self.route_mss(remote.is_ipv6());
        let mss = maxseg.unwrap_or(route_mss).min(route_mss);
        let room = self
            .stack
            .tcp_fast_open_syn_room(self.now, remote.ip(), mss);
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let limit = match room {
            Some(room) if nonblocking => room,
            None if nonblocking => 0,
            _ => self.send_limit(fd)?,
        };
        let data: Vec<u8> = take(bufs, total.min(limit)).concat();
        let handle = self.open(fd, remote)?;
        let now = self.now;
        let taken = self
            .stack
            .tcp_fast_open_data(now, handle, &data)
            .map_err(errno_of);
        if let Ok(socket) = self.tcp_socket(fd) {
            socket.fast_open.deferred = None;
            if let Ok(n) = taken {
                socket.errq.written += n as u64;
                socket.send.took(n);
            }
        }
        self.flush();
        taken.map(Some)
    }
}
