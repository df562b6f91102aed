//! The `ftp` flow: a real FTP session in virtual time. Both ends run `impnet-ftp`'s
//! state machines (the server's [`Session`] over a [`MemFs`] holding the file, the
//! [`Client`] running one RETR, or a LIST of a directory), over a control connection and a data connection of
//! the simulated stacks, exactly as `imp serve --ftp` and `imp ftp` run them over a
//! TAP. The CPU costs per byte of a `bulk` flow apply to the data: the server pays
//! for each record it reads (and translates) before writing it, the client for each
//! read (and its translation back). At a host with a CPU model those costs, and the
//! server's [`CpuProfile::file_byte`](crate::cpu::CpuProfile::file_byte) for reading
//! the file, are charged to its CPU, after the stack work of the calls made so far;
//! the next record is read or written when the CPU is done, so each record is a batch
//! of socket calls of its own (a process switch each, where the profile prices one).

use std::cell::RefCell;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::rc::Rc;

use impnet_core::tcp::{TcpError, TcpHandle, TcpState};
use impnet_core::{Duration, Instant, Stack};
use impnet_ftp::ascii::{self, FromNetwork};
use impnet_ftp::fs::Reader;
use impnet_ftp::{
    Action, Client, ClientAction, DataPeer, Direction, LineBuffer, MemFs, Plan, ReplyParser,
    Request, ServerConfig, Session, TransferOutcome,
};

use super::{App, AppState, Step, TextSource, tcp_err};
use crate::bulk::{Pattern, StreamHash};
use crate::scenario::FlowKind;
use crate::trace::Tracer;
use crate::{HostId, LinkId, Sim};

/// The file's name on the server.
const FILE: &str = "/pub/file.txt";

/// The directory a LIST flow lists ([`crate::scenario::ftp_directory`]).
const DIRECTORY: &str = "/pub";

/// What an `ftp` flow pays per byte, and how the server writes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Costs {
    /// Bytes per server write.
    record: usize,
    /// CPU time per byte at each end (with the translation in TYPE A).
    per_byte: Duration,
    /// The client reads a record at a time (its host has a CPU model, or bytes cost
    /// time), rather than all that is there.
    record_reads: bool,
    /// The server's file system, per byte read (picoseconds; 0 without a CPU model).
    file_byte: u64,
}

impl Costs {
    /// What reading (or writing) `n` bytes of the file costs at an end, the server's
    /// file system read included when `server`.
    fn of(&self, n: usize, server: bool) -> Duration {
        let file = if server {
            Duration::from_nanos(self.file_byte.saturating_mul(n as u64) / 1000)
        } else {
            Duration::ZERO
        };
        self.per_byte.saturating_mul(n as u64) + file
    }
}

/// Both ends of one `ftp` flow.
pub(super) struct FtpApp {
    server: Server,
    client: ClientEnd,
    /// Port of the server's passive listener.
    passive_port: u16,
    /// Port of the client's active-mode listener.
    active_port: u16,
    /// The hash of the file as the server read it, and its length.
    pub(super) sent: StreamHash,
    /// When RETR (or LIST) went out and when the data's end arrived.
    pub(super) transfer: (Option<Instant>, Option<Instant>),
    /// The tracer's index of the data connection, once it is followed.
    pub(super) traced: Option<usize>,
}

struct Server {
    listener: Option<TcpHandle>,
    control: Option<TcpHandle>,
    session: Session<MemFs>,
    lines: LineBuffer,
    out: Vec<u8>,
    /// Close the control connection once `out` has gone.
    closing: bool,
    /// The control connection is closed: the session is over.
    closed: bool,
    passive: Option<TcpHandle>,
    data: Option<ServerData>,
}

/// The server's side of a RETR under way.
struct ServerData {
    peer: DataPeer,
    handle: Option<TcpHandle>,
    reader: Reader,
    ascii: bool,
    /// The 150 reply, sent once the data connection is open.
    start: Option<impnet_ftp::Reply>,
    /// The current record in its network form, and how much of it went.
    record: Vec<u8>,
    offset: usize,
    file_done: bool,
    sent: u64,
    busy_until: Instant,
}

struct ClientEnd {
    control: Option<TcpHandle>,
    client: Client,
    replies: ReplyParser,
    out: Vec<u8>,
    listener: Option<TcpHandle>,
    data: Option<TcpHandle>,
    /// The data connection is being opened (passive): report it when established.
    connecting: bool,
    transferring: bool,
    eof: bool,
    text: FromNetwork,
    pub(super) received: StreamHash,
    pub(super) read_bytes: u64,
    /// Reads of the data that returned bytes.
    pub(super) reads: u64,
    busy_until: Instant,
    done: bool,
}

impl FtpApp {
    /// The flow's file (seeded lines of text) on a fresh server, and a client that will
    /// fetch it from `server`.
    pub(super) fn new(
        kind: &FlowKind,
        seed: u64,
        index: usize,
        (client, server): (Ipv4Addr, Ipv4Addr),
    ) -> FtpApp {
        let FlowKind::Ftp {
            bytes,
            list,
            text_mode,
            data,
            ..
        } = *kind
        else {
            unreachable!("an ftp app for a flow of another kind")
        };
        let (fs, request) = match list {
            Some(files) => (
                crate::scenario::ftp_directory(files),
                Request::List(Some(DIRECTORY.into())),
            ),
            None => {
                let mut file = vec![0u8; bytes as usize];
                TextSource {
                    pattern: Pattern::new(seed ^ (index as u64) << 32),
                    text: true,
                    column: 0,
                }
                .fill(&mut file);
                let fs = MemFs::new();
                fs.insert(FILE, file);
                (fs, Request::Retr(FILE.into()))
            }
        };
        let config = ServerConfig {
            anonymous: true,
            ..ServerConfig::default()
        };
        let plan = Plan {
            user: "anonymous".into(),
            pass: "imp@".into(),
            ascii: text_mode,
            mode: data,
            request,
        };
        let index = index as u16;
        FtpApp {
            server: Server {
                listener: None,
                control: None,
                // PORT and EPRT may name only the client's own address.
                session: Session::new(config, fs, client.into()),
                lines: LineBuffer::new(),
                out: Vec::new(),
                closing: false,
                closed: false,
                passive: None,
                data: None,
            },
            client: ClientEnd {
                control: None,
                client: Client::new(plan, server.into()),
                replies: ReplyParser::new(),
                out: Vec::new(),
                listener: None,
                data: None,
                connecting: false,
                transferring: false,
                eof: false,
                text: FromNetwork::new(),
                received: StreamHash::default(),
                read_bytes: 0,
                reads: 0,
                busy_until: Instant::ZERO,
                done: false,
            },
            passive_port: 20_000u16.wrapping_add(index),
            active_port: 40_000u16.wrapping_add(index),
            sent: StreamHash::default(),
            transfer: (None, None),
            traced: None,
        }
    }

    /// The control listener and the client's control connection.
    pub(super) fn open(
        &mut self,
        sim: &mut Sim,
        (from, to): (HostId, HostId),
        (a, b): (Ipv4Addr, Ipv4Addr),
        port: u16,
    ) -> Step {
        let now = sim.now();
        self.server.listener = Some(
            sim.host_mut(to)
                .tcp_listen(SocketAddrV4::new(b, port), 16)
                .map_err(|e| tcp_err("listen", e))?,
        );
        self.client.control = Some(
            sim.host_mut(from)
                .tcp_connect(now, SocketAddrV4::new(a, 0), SocketAddrV4::new(b, port))
                .map_err(|e| tcp_err("connect", e))?,
        );
        Ok(())
    }

    /// The client's file bytes so far (after TYPE A's translation back).
    pub(super) fn received(&self) -> &StreamHash {
        &self.client.received
    }

    /// Bytes read from the data connection.
    pub(super) fn read_bytes(&self) -> u64 {
        self.client.read_bytes
    }

    /// Reads of the data that returned bytes (a record each at most).
    pub(super) fn reads(&self) -> u64 {
        self.client.reads
    }

    /// The data connection's sender: the server's handle.
    pub(super) fn data_sender(&self) -> Option<TcpHandle> {
        self.server.data.as_ref().and_then(|d| d.handle)
    }

    /// The client received exactly the file the server read.
    pub(super) fn data_ok(&self) -> bool {
        self.client.eof
            && self.sent.finish() == self.client.received.finish()
            && self.sent.len() == self.client.received.len()
    }
}

impl App {
    /// Both ends of an `ftp` flow, as far as they can go now.
    pub(super) fn drive_ftp(
        &mut self,
        sim: &mut Sim,
        (from, to): (HostId, HostId),
        tracer: &Rc<RefCell<Tracer>>,
    ) -> Step {
        let now = sim.now();
        let FlowKind::Ftp {
            record,
            text_mode,
            cpu_per_byte,
            translate_per_byte,
            ..
        } = self.spec.kind
        else {
            return Ok(());
        };
        let costs = Costs {
            record,
            per_byte: if text_mode {
                cpu_per_byte + translate_per_byte
            } else {
                cpu_per_byte
            },
            record_reads: sim.cpu_report(from).is_some(),
            file_byte: sim.cpu_profile(to).map_or(0, |p| p.file_byte),
        };
        let (link, addrs) = (self.link, self.addrs);
        let AppState::Ftp(f) = &mut self.state else {
            return Ok(());
        };
        let server_wake = f.serve(sim, (from, to), now, costs, (link, addrs, tracer))?;
        let client_wake = f.fetch(sim, (from, to), now, costs, (link, addrs, tracer))?;
        let wake = [server_wake, client_wake].into_iter().flatten().min();
        if f.client.done && self.done_at.is_none() {
            self.done_at = Some(now);
        }
        self.wake = wake;
        Ok(())
    }
}

/// Where a data connection is followed: the flow's link, its addresses, the tracer.
type Follow<'a> = (LinkId, (Ipv4Addr, Ipv4Addr), &'a Rc<RefCell<Tracer>>);

fn send_pending(stack: &mut Stack, now: Instant, handle: TcpHandle, out: &mut Vec<u8>) -> Step {
    while !out.is_empty() {
        match stack.tcp_send(now, handle, out) {
            Ok(0) | Err(TcpError::WouldBlock) => break,
            Ok(n) => {
                out.drain(..n);
            }
            Err(e) => return Err(tcp_err("send", e)),
        }
    }
    Ok(())
}

/// A whole record can be read, or the peer has finished sending: a host with a CPU
/// model takes its data a record at a time, as a board handing over full DMA buffers.
fn whole_record_or_end(stack: &Stack, handle: TcpHandle, record: usize) -> bool {
    stack.tcp_readable(handle) >= record
        || stack.tcp_info(handle).is_none_or(|i| {
            !matches!(
                i.state,
                TcpState::Established | TcpState::FinWait1 | TcpState::FinWait2
            )
        })
}

fn established(stack: &Stack, handle: TcpHandle) -> bool {
    stack
        .tcp_info(handle)
        .is_some_and(|i| !matches!(i.state, TcpState::SynSent | TcpState::SynReceived))
}

impl FtpApp {
    /// The server: accept the control connection, answer its lines, run the transfer.
    fn serve(
        &mut self,
        sim: &mut Sim,
        (_, to): (HostId, HostId),
        now: Instant,
        costs: Costs,
        follow: Follow<'_>,
    ) -> Result<Option<Instant>, String> {
        let stack = sim.host_mut(to);
        let s = &mut self.server;
        if s.closed {
            return Ok(None);
        }
        let control = match s.control {
            Some(c) => c,
            None => match stack.tcp_accept(s.listener.ok_or("no listener")?) {
                Ok(c) => {
                    s.out.extend(s.session.greeting().to_bytes());
                    *s.control.insert(c)
                }
                Err(TcpError::WouldBlock) => return Ok(None),
                Err(e) => return Err(tcp_err("accept", e)),
            },
        };
        let mut buf = [0u8; 2048];
        while !s.closing {
            match stack.tcp_recv(now, control, &mut buf) {
                Ok(0) => s.closing = true,
                Ok(n) => {
                    for line in s.lines.push(&buf[..n]) {
                        let action = match line {
                            Ok(line) => s.session.handle_line(&line),
                            Err(reply) => Action::Reply(reply),
                        };
                        self_action(s, stack, action, follow.1.1, self.passive_port)?;
                    }
                }
                Err(TcpError::WouldBlock) => break,
                Err(e) => return Err(tcp_err("recv", e)),
            }
        }
        let wake = self.serve_data(sim, to, now, costs, follow)?;
        let s = &mut self.server;
        let stack = sim.host_mut(to);
        send_pending(stack, now, control, &mut s.out)?;
        if s.closing && s.out.is_empty() && s.data.is_none() {
            stack
                .tcp_close(now, control)
                .map_err(|e| tcp_err("close", e))?;
            s.closed = true;
        }
        Ok(wake)
    }
}

/// Carries out what the server's session asked for.
fn self_action(
    s: &mut Server,
    stack: &mut Stack,
    action: Action,
    server_ip: Ipv4Addr,
    passive_port: u16,
) -> Step {
    match action {
        Action::Reply(r) => s.out.extend(r.to_bytes()),
        Action::Close(r) => {
            s.out.extend(r.to_bytes());
            s.closing = true;
        }
        Action::Listen { extended } => {
            let addr = SocketAddrV4::new(server_ip, passive_port);
            let reply = match s.passive {
                Some(_) => s.session.passive_ready(addr.into(), extended),
                None => match stack.tcp_listen(addr, 1) {
                    Ok(l) => {
                        s.passive = Some(l);
                        s.session.passive_ready(addr.into(), extended)
                    }
                    Err(e) => s.session.passive_failed(&e.to_string()),
                },
            };
            s.out.extend(reply.to_bytes());
        }
        Action::Transfer(t) => {
            let Direction::Send(reader) = t.direction else {
                return Err("the simulator's ftp flows only download (RETR)".into());
            };
            s.data = Some(ServerData {
                peer: t.peer,
                handle: None,
                reader,
                ascii: t.ascii,
                start: Some(t.start),
                record: Vec::new(),
                offset: 0,
                file_done: false,
                sent: 0,
                busy_until: Instant::ZERO,
            });
        }
    }
    Ok(())
}

impl FtpApp {
    /// The server's data connection: open it, send the file a record at a time (each
    /// paid for in CPU time first), close it and send the 226.
    fn serve_data(
        &mut self,
        sim: &mut Sim,
        to: HostId,
        now: Instant,
        costs: Costs,
        (link, (_, b), tracer): Follow<'_>,
    ) -> Result<Option<Instant>, String> {
        let stack = sim.host_mut(to);
        let s = &mut self.server;
        let Some(d) = &mut s.data else {
            return Ok(None);
        };
        let handle = match (d.handle, d.peer) {
            (Some(h), _) => h,
            (None, DataPeer::Accept) => {
                match stack.tcp_accept(s.passive.ok_or("no passive listener")?) {
                    Ok(h) => *d.handle.insert(h),
                    Err(TcpError::WouldBlock) => return Ok(None),
                    Err(e) => return Err(tcp_err("accept", e)),
                }
            }
            (None, DataPeer::Connect(SocketAddr::V4(client))) => {
                let h = stack
                    .tcp_connect(now, SocketAddrV4::new(b, 0), client)
                    .map_err(|e| tcp_err("connect", e))?;
                let (local, _) = stack.tcp_addresses(h).ok_or("no address")?;
                self.traced = Some(tracer.borrow_mut().follow(
                    link,
                    (local.ip(), local.port()),
                    (IpAddr::V4(*client.ip()), client.port()),
                ));
                *d.handle.insert(h)
            }
            (None, DataPeer::Connect(v6)) => return Err(format!("no IPv6 in the simulator: {v6}")),
        };
        if !established(stack, handle) {
            return Ok(None);
        }
        if let Some(start) = d.start.take() {
            s.out.extend(start.to_bytes());
        }
        loop {
            if d.offset < d.record.len() {
                if now < d.busy_until {
                    return Ok(Some(d.busy_until));
                }
                match sim
                    .host_mut(to)
                    .tcp_send(now, handle, &d.record[d.offset..])
                {
                    Ok(0) | Err(TcpError::WouldBlock) => return Ok(None),
                    Ok(n) => d.offset += n,
                    Err(e) => return Err(tcp_err("send", e)),
                }
                continue;
            }
            if d.file_done {
                break;
            }
            let mut raw = vec![0u8; costs.record];
            let n = read_full(&mut d.reader, &mut raw).map_err(|e| format!("read: {e}"))?;
            raw.truncate(n);
            self.sent.update(&raw);
            d.record.clear();
            d.offset = 0;
            if d.ascii {
                ascii::to_network(&raw, &mut d.record);
            } else {
                d.record.extend_from_slice(&raw);
            }
            d.sent += d.record.len() as u64;
            d.file_done = n < costs.record;
            let work = costs.of(n, true);
            d.busy_until = sim
                .charge_cpu(to, work)
                .unwrap_or_else(|| now.max(d.busy_until) + work);
        }
        sim.host_mut(to)
            .tcp_close(now, handle)
            .map_err(|e| tcp_err("close", e))?;
        let reply = s
            .session
            .transfer_done(TransferOutcome::Done { bytes: d.sent });
        s.out.extend(reply.to_bytes());
        s.data = None;
        Ok(None)
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(reader: &mut Reader, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

impl FtpApp {
    /// The client: read replies, do what the session says, read the data.
    fn fetch(
        &mut self,
        sim: &mut Sim,
        (from, _): (HostId, HostId),
        now: Instant,
        costs: Costs,
        follow: Follow<'_>,
    ) -> Result<Option<Instant>, String> {
        let c = &mut self.client;
        let Some(control) = c.control else {
            return Ok(None);
        };
        let stack = sim.host_mut(from);
        let mut buf = [0u8; 2048];
        loop {
            match stack.tcp_recv(now, control, &mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    for reply in c.replies.push(&buf[..n]).map_err(|e| e.to_string())? {
                        c.client.handle_reply(reply);
                    }
                }
                Err(TcpError::WouldBlock) => break,
                Err(e) => return Err(tcp_err("recv", e)),
            }
        }
        let wake = self.client_data(sim, from, now, costs)?;
        let stack = sim.host_mut(from);
        self.client_actions(stack, now, follow)?;
        let c = &mut self.client;
        send_pending(stack, now, control, &mut c.out)?;
        if c.done && c.out.is_empty() {
            stack
                .tcp_close(now, control)
                .map_err(|e| tcp_err("close", e))?;
            c.control = None;
        }
        Ok(wake)
    }

    fn client_actions(&mut self, stack: &mut Stack, now: Instant, follow: Follow<'_>) -> Step {
        let (link, (a, _), tracer) = follow;
        let c = &mut self.client;
        if c.connecting && c.data.is_some_and(|h| established(stack, h)) {
            c.connecting = false;
            c.client.data_ready();
        }
        loop {
            match c.client.poll() {
                ClientAction::Send(line) => {
                    if line.starts_with("RETR ") || line.starts_with("LIST") {
                        self.transfer.0 = Some(now);
                    }
                    c.out.extend(line.as_bytes());
                    c.out.extend(b"\r\n");
                }
                ClientAction::Connect(SocketAddr::V4(server)) => {
                    let h = stack
                        .tcp_connect(now, SocketAddrV4::new(a, 0), server)
                        .map_err(|e| tcp_err("connect", e))?;
                    let (local, _) = stack.tcp_addresses(h).ok_or("no address")?;
                    self.traced = Some(tracer.borrow_mut().follow(
                        link,
                        (IpAddr::V4(*server.ip()), server.port()),
                        (local.ip(), local.port()),
                    ));
                    c.data = Some(h);
                    c.connecting = true;
                }
                ClientAction::Connect(v6) => return Err(format!("no IPv6 in the simulator: {v6}")),
                ClientAction::Listen => {
                    let addr = SocketAddrV4::new(a, self.active_port);
                    c.listener = Some(
                        stack
                            .tcp_listen(addr, 1)
                            .map_err(|e| tcp_err("listen", e))?,
                    );
                    c.client.listening(addr.into());
                }
                ClientAction::Transfer => c.transferring = true,
                ClientAction::Wait => return Ok(()),
                ClientAction::Done => {
                    c.done = true;
                    return Ok(());
                }
                ClientAction::Failed(why) => return Err(format!("ftp: {why}")),
            }
        }
    }

    /// The client's data connection: accept it (active mode), read it a record at a
    /// time when bytes cost CPU time, translate back, hash; at its end, tell the client.
    fn client_data(
        &mut self,
        sim: &mut Sim,
        from: HostId,
        now: Instant,
        costs: Costs,
    ) -> Result<Option<Instant>, String> {
        let c = &mut self.client;
        let stack = sim.host_mut(from);
        if !c.transferring || c.eof {
            return Ok(None);
        }
        let handle = match c.data {
            Some(h) => h,
            None => match stack.tcp_accept(c.listener.ok_or("no data listener")?) {
                Ok(h) => *c.data.insert(h),
                Err(TcpError::WouldBlock) => return Ok(None),
                Err(e) => return Err(tcp_err("accept", e)),
            },
        };
        let ascii = c.client.plan().ascii;
        let mut buf = vec![0u8; 64 * 1024];
        let chunk = if costs.per_byte > Duration::ZERO || costs.record_reads {
            costs.record.min(buf.len())
        } else {
            buf.len()
        };
        let mut file = Vec::new();
        loop {
            if now < c.busy_until {
                return Ok(Some(c.busy_until));
            }
            let stack = sim.host_mut(from);
            if costs.record_reads && !whole_record_or_end(stack, handle, chunk) {
                return Ok(None);
            }
            match stack.tcp_recv(now, handle, &mut buf[..chunk]) {
                Ok(0) => {
                    file.clear();
                    c.text.finish(&mut file);
                    c.received.update(&file);
                    c.eof = true;
                    self.transfer.1 = Some(now);
                    stack
                        .tcp_close(now, handle)
                        .map_err(|e| tcp_err("close", e))?;
                    c.client.data_finished();
                    return Ok(None);
                }
                Ok(n) => {
                    c.read_bytes += n as u64;
                    file.clear();
                    if ascii {
                        c.text.push(&buf[..n], &mut file);
                    } else {
                        file.extend_from_slice(&buf[..n]);
                    }
                    c.received.update(&file);
                    c.reads += 1;
                    let work = costs.of(n, false);
                    c.busy_until = sim.charge_cpu(from, work).unwrap_or(now + work);
                }
                Err(TcpError::WouldBlock) => return Ok(None),
                Err(e) => return Err(tcp_err("recv", e)),
            }
        }
    }
}
