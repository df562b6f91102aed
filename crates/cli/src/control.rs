//! The control socket of a running `imp serve` or `imp route`: a Unix socket only its
//! owner may use (`$XDG_RUNTIME_DIR/imp/PID.sock`, else `/tmp/imp-UID/PID.sock`; the
//! directory 0700, the socket 0600) answering one request a connection, a line
//! (`sockets` or `counters`), with one JSON document. `imp ss` (`ss.rs`) is its client.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use impnet::Runtime;
use impnet::core::Stack;
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

/// The answer to `request` about the stack of `rt`.
pub fn answer(rt: &Runtime, request: &str) -> Value {
    match request {
        "sockets" => rt.with_stack(|stack, _| sockets(stack)),
        "counters" => rt.with_stack(|stack, _| counters(stack)),
        other => json!({ "error": format!("unknown request {other:?}: sockets or counters") }),
    }
}

/// Every TCP socket with what `ss -tin` shows.
fn sockets(stack: &mut Stack) -> Value {
    let stack: &Stack = stack;
    let list: Vec<Value> = stack
        .tcp_handles()
        .filter_map(|(handle, listener)| {
            if listener {
                let local = stack.tcp_listen_addr(handle)?;
                return Some(json!({ "state": "LISTEN", "local": local.to_string(), "peer": "*", "recv_q": 0, "send_q": 0 }));
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
            }))
        })
        .collect();
    json!({ "pid": std::process::id(), "tcp": list })
}

/// The stack's non-zero counters by dotted name (`tcp.rx_segments`), as `nstat` lists
/// the kernel's.
fn counters(stack: &mut Stack) -> Value {
    let mut out = Map::new();
    stack.stats().for_each(&mut |name, value| {
        if value != 0 {
            out.insert(name.to_string(), Value::from(value));
        }
    });
    json!({ "pid": std::process::id(), "counters": out })
}
