//! `getsockopt` and `setsockopt`; Linux's `struct tcp_info` is the core's
//! ([`LinuxTcpInfo`], filled from imp's `TcpInfo`).

use impnet_core::tcp::{LinuxTcpInfo, SocketOption, TcpHandle, TcpState, linux_state};

use crate::errno::Errno;
use crate::errqueue::{SO_TIMESTAMPING, SO_ZEROCOPY};
use crate::socket::{Options, Phase, receive_window_space};

use super::Shim;

/// A size as a C int, saturated.
fn clamp_int(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn int_of(value: &[u8]) -> Result<i32, Errno> {
    let bytes: [u8; 4] = value
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or(libc::EINVAL)?;
    Ok(i32::from_ne_bytes(bytes))
}

/// The SOL_SOCKET options kept as set (SO_TYPE, SO_REUSEADDR, SO_KEEPALIVE,
/// SO_ZEROCOPY, SO_MARK, SO_TIMESTAMPING's `ts_flags`) as getsockopt reports them;
/// None for the others.
fn socket_flag(options: &Options, ts_flags: u32, name: i32) -> Option<i32> {
    Some(match name {
        libc::SO_TYPE => libc::SOCK_STREAM,
        libc::SO_REUSEADDR => i32::from(options.reuse_addr),
        libc::SO_KEEPALIVE => i32::from(options.keepalive),
        SO_ZEROCOPY => i32::from(options.zerocopy),
        libc::SO_MARK => options.mark,
        SO_TIMESTAMPING => ts_flags as i32,
        _ => return None,
    })
}

/// TCP_SYNCNT (the stack's SYN retransmissions unless set), TCP_KEEPIDLE,
/// TCP_KEEPINTVL or TCP_KEEPCNT (Linux's defaults, `tcp_keepalive_time` 7200 s,
/// `_intvl` 75 s, `_probes` 9, unless set) as getsockopt reports it.
fn retry_option(options: &Options, name: i32, syn_retransmits: u32) -> i32 {
    match name {
        libc::TCP_SYNCNT => options.syncnt.map_or(
            i32::try_from(syn_retransmits).unwrap_or(i32::MAX),
            i32::from,
        ),
        libc::TCP_KEEPIDLE => options.keepidle.unwrap_or(7200),
        libc::TCP_KEEPINTVL => options.keepintvl.unwrap_or(75),
        _ => options.keepcnt.unwrap_or(9),
    }
}

/// The TCP-level options kept as the application set them (TCP_MAXSEG,
/// TCP_USER_TIMEOUT, TCP_NOTSENT_LOWAT, TCP_INQ, TCP_SYNCNT, TCP_KEEPIDLE,
/// TCP_KEEPINTVL, TCP_KEEPCNT), recorded in `options`; returns what
/// the stack keeps of it, if anything.
fn record_tcp_option(
    options: &mut Options,
    name: i32,
    value: i32,
) -> Result<Option<SocketOption>, Errno> {
    Ok(match name {
        libc::TCP_MAXSEG => {
            // Linux: between TCP_MIN_MSS (88) and MAX_TCP_WINDOW; 0 resets.
            if value != 0 && !(88..=32767).contains(&value) {
                return Err(libc::EINVAL);
            }
            options.maxseg = u16::try_from(value).ok().filter(|&v| v != 0);
            // A listener announces it on its SYN-ACKs; a connection did on connect.
            Some(SocketOption::MaxSegment(options.maxseg.unwrap_or(0)))
        }
        libc::TCP_USER_TIMEOUT => {
            // Linux: "Cap the max time in ms TCP will retry or probe the window"; a
            // negative value is EINVAL, 0 the system default.
            let ms = u32::try_from(value).map_err(|_| libc::EINVAL)?;
            options.user_timeout = ms;
            let timeout = impnet_core::Duration::from_millis(u64::from(ms));
            Some(SocketOption::UserTimeout(timeout))
        }
        libc::TCP_NOTSENT_LOWAT => {
            // Linux takes the int as an unsigned limit; 0 is the sysctl's, which
            // is none (`tcp_notsent_lowat`: "tp->notsent_lowat ?: sysctl").
            // The shim applies it ([`crate::sndbuf`]: Linux's write may pass it by
            // up to one skb, the stack's would stop at it).
            let lowat = value as u32;
            options.notsent_lowat = Some(lowat).filter(|&v| v != 0);
            None
        }
        libc::TCP_INQ => {
            if !(0..=1).contains(&value) {
                return Err(libc::EINVAL);
            }
            options.inq = value != 0;
            None
        }
        libc::TCP_SYNCNT => {
            // Linux: 1 to MAX_TCP_SYNCNT (127).
            let count = u8::try_from(value)
                .ok()
                .filter(|c| (1..=127).contains(c))
                .ok_or(libc::EINVAL)?;
            options.syncnt = Some(count);
            Some(SocketOption::SynRetries(count))
        }
        libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL => {
            // Linux: 1 to MAX_TCP_KEEPIDLE (MAX_TCP_KEEPINTVL), 32767 seconds.
            if !(1..=32767).contains(&value) {
                return Err(libc::EINVAL);
            }
            if name == libc::TCP_KEEPIDLE {
                options.keepidle = Some(value);
            } else {
                options.keepintvl = Some(value);
            }
            None
        }
        libc::TCP_KEEPCNT => {
            // Linux: 1 to MAX_TCP_KEEPCNT (127).
            if !(1..=127).contains(&value) {
                return Err(libc::EINVAL);
            }
            options.keepcnt = Some(value);
            None
        }
        _ => return Err(libc::ENOPROTOOPT),
    })
}

impl Shim {
    /// `setsockopt`.
    pub fn set_option(
        &mut self,
        fd: i32,
        level: i32,
        name: i32,
        value: &[u8],
    ) -> Result<i32, Errno> {
        match (level, name) {
            (libc::SOL_SOCKET, libc::SO_LINGER) => {
                let on = int_of(value)? != 0;
                let seconds = int_of(value.get(4..).ok_or(libc::EINVAL)?)?;
                self.tcp_socket(fd)?.options.linger = Some((on, seconds));
            }
            (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => self.set_congestion(fd, value)?,
            (libc::SOL_SOCKET, SO_TIMESTAMPING) => {
                // An int, or Linux's `struct so_timestamping` (flags, bind_phc).
                let flags = int_of(value)? as u32;
                let acked = self.acked_bytes(fd)?;
                self.tcp_socket(fd)?.errq.set_timestamping(flags, acked)?;
            }
            (
                libc::IPPROTO_TCP,
                libc::TCP_FASTOPEN | libc::TCP_FASTOPEN_CONNECT | libc::TCP_FASTOPEN_KEY,
            ) => self.set_fast_open_option(fd, name, value)?,
            _ => self.set_int_option(fd, level, name, int_of(value)?)?,
        }
        self.flush();
        Ok(0)
    }

    fn set_int_option(&mut self, fd: i32, level: i32, name: i32, value: i32) -> Result<(), Errno> {
        let now = self.now;
        let socket = self.tcp_socket(fd)?;
        let handle = match socket.phase {
            Phase::Conn(handle) | Phase::Listener(handle) => Some(handle),
            Phase::Fresh { .. } => None,
        };
        let conn = match socket.phase {
            Phase::Conn(handle) => Some(handle),
            _ => None,
        };
        let options = &mut socket.options;
        // What the stack keeps per socket, to hand over once there is a handle.
        let stack_option = match (level, name) {
            (libc::SOL_SOCKET, libc::SO_REUSEADDR) => {
                options.reuse_addr = value != 0;
                None
            }
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => {
                options.keepalive = value != 0;
                None
            }
            (libc::SOL_SOCKET, SO_ZEROCOPY) => {
                // Linux's sock_setsockopt: a boolean, 0 or 1.
                if !(0..=1).contains(&value) {
                    return Err(libc::EINVAL);
                }
                options.zerocopy = value != 0;
                None
            }
            (libc::SOL_SOCKET, libc::SO_MARK) => {
                options.mark = value;
                None
            }
            (libc::SOL_SOCKET, libc::SO_SNDBUF) => {
                options.sndbuf = Some(value.max(0));
                Some(SocketOption::SendBuffer(crate::socket::stack_send_buffer(
                    value.max(0),
                )))
            }
            (libc::SOL_SOCKET, libc::SO_RCVBUF) => {
                options.rcvbuf = Some(value.max(0));
                Some(SocketOption::RecvBuffer(receive_window_space(value)))
            }
            (libc::IPPROTO_TCP, libc::TCP_NODELAY) => {
                options.nodelay = value != 0;
                let (corked, more) = (options.cork, socket.more_corked);
                if let Some(handle) = conn {
                    let _ = self.stack.tcp_set_nodelay(handle, value != 0);
                    // tcp(7): "setting this option forces an explicit flush of pending
                    // output, even if TCP_CORK is currently set".
                    if value != 0 && more {
                        let _ = self.stack.tcp_set_more(handle, false);
                        self.flush();
                    }
                    if value != 0 && corked {
                        let _ = self.stack.tcp_set_cork(now, handle, false);
                        self.flush();
                        let _ = self.stack.tcp_set_cork(now, handle, true);
                    }
                }
                None
            }
            (libc::IPPROTO_TCP, libc::TCP_CORK) => {
                options.cork = value != 0;
                if let Some(handle) = conn {
                    let _ = self.stack.tcp_set_cork(now, handle, value != 0);
                }
                None
            }
            (libc::IPPROTO_TCP, _) => record_tcp_option(options, name, value)?,
            _ => return Err(libc::ENOPROTOOPT),
        };
        if let (Some(handle), Some(option)) = (handle, stack_option) {
            // A connection announced its MSS when it connected: TCP_MAXSEG later is
            // only reported back, as on Linux.
            let later_maxseg = conn.is_some() && matches!(option, SocketOption::MaxSegment(_));
            if !later_maxseg {
                self.apply_options(handle, &[option]);
            }
        }
        Ok(())
    }

    /// TCP_CONGESTION: any algorithm imp has (`newreno` is also `reno`, Linux's name),
    /// for the socket alone; an unknown name is ENOENT (Linux's answer for a module
    /// that does not exist).
    fn set_congestion(&mut self, fd: i32, value: &[u8]) -> Result<(), Errno> {
        let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
        let name = core::str::from_utf8(&value[..end]).map_err(|_| libc::ENOENT)?;
        let cc = impnet_core::tcp::cc::CcAlgorithm::from_name(name).ok_or(libc::ENOENT)?;
        let socket = self.tcp_socket(fd)?;
        socket.options.congestion = Some(cc);
        if let Phase::Conn(handle) | Phase::Listener(handle) = socket.phase {
            self.apply_options(handle, &[SocketOption::Congestion(cc)]);
        }
        Ok(())
    }

    /// `getsockopt`: the option's bytes (the caller copies what fits).
    pub fn get_option(&mut self, fd: i32, level: i32, name: i32) -> Result<Vec<u8>, Errno> {
        let int = |v: i32| Ok(v.to_ne_bytes().to_vec());
        let socket = self.tcp_socket(fd)?;
        let options = socket.options;
        let phase = socket.phase;
        let conn = match phase {
            Phase::Conn(handle) => Some(handle),
            _ => None,
        };
        if level == libc::SOL_SOCKET
            && let Some(value) = socket_flag(&options, socket.errq.ts_flags, name)
        {
            return int(value);
        }
        match (level, name) {
            (libc::SOL_SOCKET, libc::SO_ERROR) => int(self.take_error(fd)?.unwrap_or(0)),
            // Linux: doubled, at least SOCK_MIN_SNDBUF.
            (libc::SOL_SOCKET, libc::SO_SNDBUF) => int(clamp_int(
                options
                    .sndbuf
                    .map_or(self.flags.sndbuf, crate::sndbuf::locked_sndbuf),
            )),
            (libc::SOL_SOCKET, libc::SO_RCVBUF) => int(options
                .rcvbuf
                .map_or(i32::try_from(self.flags.rcvbuf).unwrap_or(i32::MAX), |v| {
                    v.saturating_mul(2)
                })),
            (libc::SOL_SOCKET, libc::SO_LINGER) => {
                let (on, seconds) = options.linger.unwrap_or((false, 0));
                let mut bytes = i32::from(on).to_ne_bytes().to_vec();
                bytes.extend_from_slice(&seconds.to_ne_bytes());
                Ok(bytes)
            }
            (libc::IPPROTO_TCP, libc::TCP_NODELAY) => int(i32::from(options.nodelay)),
            (libc::IPPROTO_TCP, libc::TCP_CORK) => int(i32::from(options.cork)),
            (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => {
                let info = conn.and_then(|h| self.stack.tcp_info(h));
                let mss = match info {
                    Some(info) if info.state != TcpState::SynSent => info.snd_mss,
                    _ => options.maxseg.unwrap_or(536),
                };
                int(i32::from(mss))
            }
            (libc::IPPROTO_TCP, libc::TCP_INFO) => Ok(self.tcp_info_bytes(phase)),
            (
                libc::IPPROTO_TCP,
                libc::TCP_FASTOPEN | libc::TCP_FASTOPEN_CONNECT | libc::TCP_FASTOPEN_KEY,
            ) => self.get_fast_open_option(fd, name),
            // Linux: an algorithm without `get_info` (reno, cubic) gives nothing.
            (libc::IPPROTO_TCP, libc::TCP_CC_INFO) => Ok(Vec::new()),
            (libc::SOL_SOCKET, libc::SO_MEMINFO) => Ok(self.meminfo(conn, options)),
            (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => {
                int(i32::try_from(options.user_timeout).unwrap_or(i32::MAX))
            }
            (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) => {
                // Linux reports the socket's own value, 0 when unset.
                int(options.notsent_lowat.unwrap_or(0) as i32)
            }
            (libc::IPPROTO_TCP, libc::TCP_INQ) => int(i32::from(options.inq)),
            (
                libc::IPPROTO_TCP,
                libc::TCP_SYNCNT | libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT,
            ) => {
                let syn_retransmits = self.stack.tcp_config().syn_retransmits;
                int(retry_option(&options, name, syn_retransmits))
            }
            (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => {
                let name = match phase {
                    Phase::Conn(handle) | Phase::Listener(handle) => {
                        self.stack.tcp_congestion(handle)
                    }
                    Phase::Fresh { .. } => None,
                };
                let name =
                    name.unwrap_or(options.congestion.unwrap_or(self.flags.congestion).name());
                let mut name = name.as_bytes().to_vec();
                if name == b"newreno" {
                    name = b"reno".to_vec();
                }
                name.resize(16, 0);
                Ok(name)
            }
            _ => Err(libc::ENOPROTOOPT),
        }
    }

    /// SO_MEMINFO's `u32[SK_MEMINFO_VARS]`: rmem_alloc, rcvbuf, wmem_alloc, sndbuf,
    /// fwd_alloc, wmem_queued, optmem, backlog, drops; imp knows the bytes queued each
    /// way and the buffer sizes.
    fn meminfo(&mut self, conn: Option<TcpHandle>, options: Options) -> Vec<u8> {
        let clamp = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let (readable, queued) = conn.map_or((0, 0), |h| {
            (self.stack.tcp_readable(h), self.stack.tcp_send_queued(h))
        });
        let rcvbuf = options
            .rcvbuf
            .map_or(self.flags.rcvbuf, |v| v.unsigned_abs() as usize * 2);
        let sndbuf = options
            .sndbuf
            .map_or(self.flags.sndbuf, crate::sndbuf::locked_sndbuf);
        let values = [
            clamp(readable),
            clamp(rcvbuf),
            clamp(queued),
            clamp(sndbuf),
            0,
            clamp(queued),
            0,
            0,
            0,
        ];
        values.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    fn tcp_info_bytes(&mut self, phase: Phase) -> Vec<u8> {
        let mtu = u32::try_from(self.flags.mtu).unwrap_or(u32::MAX);
        let info = match phase {
            Phase::Conn(handle) => self.stack.tcp_info(handle).map(|info| {
                let mut linux = LinuxTcpInfo::from_info(&info, mtu);
                // Linux's `tcpi_last_data_recv`: milliseconds since in-order data
                // last arrived, or since the handshake before any did.
                let since = info
                    .last_data_at
                    .or_else(|| self.opened_at.get(&handle).copied());
                if let Some(at) = since {
                    let ms = self.now.saturating_duration_since(at).as_millis();
                    linux.last_data_recv = u32::try_from(ms).unwrap_or(u32::MAX);
                }
                // Linux's chronographs, in microseconds up to now.
                let (busy, rwnd) = info.chronograph.totals(self.now);
                linux.busy_time = busy.as_micros();
                linux.rwnd_limited = rwnd.as_micros();
                linux
            }),
            _ => None,
        };
        let info = info.unwrap_or(LinuxTcpInfo {
            state: match phase {
                Phase::Listener(_) => linux_state(TcpState::Listen),
                _ => linux_state(TcpState::Closed),
            },
            ..LinuxTcpInfo::default()
        });
        info.to_bytes()
    }
}
