//! The control socket of a running `imp serve` or `imp route`: a Unix socket only its
//! owner may use (`$XDG_RUNTIME_DIR/imp/PID.sock`, else `/tmp/imp-UID/PID.sock`; the
//! directory 0700, the socket 0600) answering one request a connection, a line
//! (`sockets`, `counters`, `kill PEER` or `set PEER KEY=VALUE`), with one JSON
//! document. `imp ss` (`ss.rs`) is its client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use impnet::Runtime;
use impnet::core::Stack;
use impnet::core::tcp::cc::CcAlgorithm;
use impnet::core::tcp::{SocketOption, TcpError, TcpHandle};
use serde_json::{Map, Value, json};

/// How often the accept loop looks whether its program is stopping.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// How long a client may take to send its request line.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The directory the control sockets live in, created (0700) if missing; an error if
/// it exists but is not ours or others may enter it.
pub fn socket_dir() -> Result<PathBuf, String> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let dir = match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(base) if !base.is_empty() => PathBuf::from(base).join("imp"),
        _ => PathBuf::from(format!("/tmp/imp-{uid}")),
    };
    if !dir.exists() {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let meta = std::fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{}: not a directory owned by uid {uid} with mode 0700: refusing to use it",
            dir.display()
        ));
    }
    Ok(dir)
}

/// [`Control::bind`], or None with a warning from `program` (which runs on without a
/// control socket: `imp ss` will not find it).
pub fn bind_or_warn(program: &str) -> Option<Control> {
    Control::bind()
        .inspect_err(|e| eprintln!("{program}: no control socket (imp ss will not find it): {e}"))
        .ok()
}

/// A bound control socket; the file is removed when dropped.
pub struct Control {
    listener: UnixListener,
    path: PathBuf,
}

impl Control {
    /// Bind this process's control socket.
    pub fn bind() -> Result<Control, String> {
        let path = socket_dir()?.join(format!("{}.sock", std::process::id()));
        // A file left by an earlier process with our pid is stale.
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let control = Control { listener, path };
        std::fs::set_permissions(&control.path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", control.path.display()))?;
        control
            .listener
            .set_nonblocking(true)
            .map_err(|e| format!("{}: {e}", control.path.display()))?;
        Ok(control)
    }

    /// Answer requests with `answer` until `stop` is set.
    pub fn serve(&self, stop: &AtomicBool, answer: impl Fn(&str) -> Value) {
        while !stop.load(Ordering::Relaxed) {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if let Err(e) = respond(stream, &answer) {
                        eprintln!("imp: control socket: {e}");
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(STOP_CHECK);
                }
                Err(e) => {
                    eprintln!("imp: control socket: {e}");
                    std::thread::sleep(STOP_CHECK);
                }
            }
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Read one request line and write the answer.
fn respond(stream: UnixStream, answer: &impl Fn(&str) -> Value) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new(&stream).take(256).read_line(&mut line)?;
    let reply = answer(line.trim());
    let mut stream = stream;
    stream.write_all(reply.to_string().as_bytes())?;
    stream.write_all(b"\n")
}

/// The answer to `request` about the stacks of `rts` (one program's: one, or every
/// shard's): `sockets` (each with its `shard` when there are several), `counters`
/// (added up), `kill PEER` (reset every connection to PEER, `ADDR:PORT`) or `set PEER
/// KEY=VALUE` (change a setting of every connection to PEER; see [`Setting::parse`]).
pub fn answer(rts: &[&Runtime], request: &str) -> Value {
    let words: Vec<&str> = request.split_whitespace().collect();
    let pid = std::process::id();
    match words.as_slice() {
        ["sockets"] => {
            let mut list = Vec::new();
            for (shard, rt) in rts.iter().enumerate() {
                let shard = (rts.len() > 1).then_some(shard);
                rt.with_stack(|stack, _| sockets(stack, shard, &mut list));
            }
            json!({ "pid": pid, "tcp": list })
        }
        ["counters"] => {
            let mut out = Map::new();
            for rt in rts {
                rt.with_stack(|stack, _| counters(stack, &mut out));
            }
            json!({ "pid": pid, "counters": out })
        }
        ["kill", peer] => match peer.parse::<SocketAddr>() {
            Ok(peer) => {
                let count: usize = rts
                    .iter()
                    .map(|rt| {
                        rt.with_stack(|stack, now| {
                            for_each_conn_to(stack, peer, |stack, handle| {
                                stack.tcp_kill(now, handle)
                            })
                        })
                    })
                    .sum();
                json!({ "pid": pid, "killed": count })
            }
            Err(_) => json!({ "error": format!("kill {peer}: not ADDRESS:PORT") }),
        },
        ["set", peer, setting] => match (peer.parse::<SocketAddr>(), Setting::parse(setting)) {
            (Ok(peer), Ok(setting)) => {
                let count: usize = rts.iter().map(|rt| set_on(rt, peer, setting)).sum();
                json!({ "pid": pid, "changed": count })
            }
            (Err(_), _) => json!({ "error": format!("set {peer}: not ADDRESS:PORT") }),
            (_, Err(e)) => json!({ "error": e }),
        },
        _ => json!({
            "error": format!(
                "unknown request {request:?}: sockets, counters, kill PEER or set PEER KEY=VALUE"
            )
        }),
    }
}

/// Change `setting` on every connection of `rt`'s stack to `peer`; how many.
fn set_on(rt: &Runtime, peer: SocketAddr, setting: Setting) -> usize {
    rt.with_stack(|stack, now| {
        for_each_conn_to(stack, peer, |stack, handle| match setting {
            Setting::Option(option) => stack.tcp_set_option(now, handle, option),
            Setting::NoDelay(on) => stack.tcp_set_nodelay(handle, on),
        })
    })
}

/// A connection setting `imp ss --set` changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    Option(SocketOption),
    NoDelay(bool),
}

impl Setting {
    /// `KEY=VALUE`: `cc=NAME` (a congestion controller), `nodelay=0|1`,
    /// `user-timeout=MS`, `notsent-lowat=BYTES`, `sndbuf=BYTES`, `rcvbuf=BYTES`.
    pub fn parse(text: &str) -> Result<Setting, String> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?}: not KEY=VALUE"))?;
        let number = || {
            value
                .parse::<u32>()
                .map_err(|_| format!("{key}={value}: not a whole number"))
        };
        Ok(match key {
            "cc" => Setting::Option(SocketOption::Congestion(
                CcAlgorithm::from_name(value)
                    .ok_or_else(|| format!("cc={value}: no such congestion controller"))?,
            )),
            "nodelay" => match value {
                "0" => Setting::NoDelay(false),
                "1" => Setting::NoDelay(true),
                _ => return Err(format!("nodelay={value}: 0 or 1")),
            },
            "user-timeout" => Setting::Option(SocketOption::UserTimeout(
                impnet::core::Duration::from_millis(u64::from(number()?)),
            )),
            "notsent-lowat" => Setting::Option(SocketOption::NotSentLowWater(number()?)),
            "sndbuf" => Setting::Option(SocketOption::SendBuffer(number()? as usize)),
            "rcvbuf" => Setting::Option(SocketOption::RecvBuffer(number()? as usize)),
            other => {
                return Err(format!(
                    "{other}: not a setting (cc, nodelay, user-timeout, notsent-lowat, \
                     sndbuf, rcvbuf)"
                ));
            }
        })
    }
}

/// Run `f` on every connection (not listener) whose peer is `peer`; how many it
/// succeeded on.
fn for_each_conn_to(
    stack: &mut Stack,
    peer: SocketAddr,
    mut f: impl FnMut(&mut Stack, TcpHandle) -> Result<(), TcpError>,
) -> usize {
    let handles: Vec<TcpHandle> = stack
        .tcp_handles()
        .filter(|&(handle, listener)| {
            !listener && stack.tcp_addresses(handle).is_some_and(|(_, p)| p == peer)
        })
        .map(|(handle, _)| handle)
        .collect();
    handles
        .into_iter()
        .filter(|&handle| f(stack, handle).is_ok())
        .count()
}

/// Every TCP socket with what `ss -tin` shows, added to `list` (with `shard`, if
/// given).
fn sockets(stack: &mut Stack, shard: Option<usize>, list: &mut Vec<Value>) {
    let stack: &Stack = stack;
    let sockets = stack
        .tcp_handles()
        .filter_map(|(handle, listener)| {
            if listener {
                let local = stack.tcp_listen_addr(handle)?;
                return Some(json!({ "state": "LISTEN", "local": local.to_string(), "peer": "*", "recv_q": 0, "send_q": 0, "shard": shard }));
            }
            let info = stack.tcp_info(handle)?;
            let (local, peer) = stack.tcp_addresses(handle)?;
            let millis = |d: impnet::core::Duration| d.as_nanos() as f64 / 1e6;
            Some(json!({
                "state": format!("{:?}", info.state),
                "local": local.to_string(),
                "peer": peer.to_string(),
                "recv_q": stack.tcp_readable(handle),
                "send_q": info.bytes_queued,
                "congestion": info.congestion,
                "mss": info.snd_mss,
                "cwnd": info.cwnd,
                "ssthresh": info.ssthresh,
                "bytes_in_flight": info.bytes_in_flight,
                "rtt_ms": info.srtt.map(millis),
                "rttvar_ms": millis(info.rttvar),
                "rto_ms": millis(info.rto),
                "retransmits": info.retransmits,
                "pacing_rate": info.pacing_rate,
                "snd_wnd": info.snd_wnd,
                "rcv_wnd": info.rcv_wnd,
                "shard": shard,
            }))
        });
    list.extend(sockets);
}

/// The stack's non-zero counters by dotted name (`tcp.rx_segments`), as `nstat` lists
/// the kernel's.
/// (Added to `out`, where another shard's may be.)
fn counters(stack: &mut Stack, out: &mut Map<String, Value>) {
    stack.stats().for_each(&mut |name, value| {
        if value != 0 {
            let sum = out.get(name).and_then(Value::as_u64).unwrap_or(0) + value;
            out.insert(name.to_string(), Value::from(sum));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{CcAlgorithm, Setting, SocketOption};

    #[test]
    fn settings_parse_and_bad_ones_say_why() {
        assert_eq!(
            Setting::parse("cc=bbr1"),
            Ok(Setting::Option(SocketOption::Congestion(CcAlgorithm::Bbr1)))
        );
        assert_eq!(Setting::parse("nodelay=1"), Ok(Setting::NoDelay(true)));
        assert_eq!(
            Setting::parse("notsent-lowat=16384"),
            Ok(Setting::Option(SocketOption::NotSentLowWater(16384)))
        );
        assert!(Setting::parse("cc=reno2").unwrap_err().contains("no such"));
        assert!(
            Setting::parse("nodelay=yes")
                .unwrap_err()
                .contains("0 or 1")
        );
        assert!(
            Setting::parse("sndbuf=-1")
                .unwrap_err()
                .contains("whole number")
        );
        assert!(Setting::parse("window").unwrap_err().contains("KEY=VALUE"));
        assert!(
            Setting::parse("mtu=9000")
                .unwrap_err()
                .contains("not a setting")
        );
    }
}
