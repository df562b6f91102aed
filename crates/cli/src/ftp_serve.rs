//! `imp serve --ftp DIR`: an FTP server (RFC 959, RFC 2428's EPSV/EPRT, RFC 3659's
//! SIZE, MDTM and REST) on imp's sockets. The protocol is `impnet-ftp`'s
//! [`Session`]; this file drives it: a thread per control connection, data
//! connections accepted on a passive listener or connected to the client's PORT, a
//! thread per transfer so the control connection can still be read (ABOR), and TYPE
//! A's translation both ways.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use impnet::{Runtime, TcpListener, TcpStream};
use impnet_ftp::ascii::{self, FromNetwork};
use impnet_ftp::{
    Action, DataPeer, Direction, DiskFs, LineBuffer, Reply, ServerConfig, Session, Transfer,
    TransferOutcome,
};

/// How long a data connection may take to open, and a silent peer may stall one.
const DATA_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a control connection may say nothing between transfers before the
/// server closes it (421, RFC 959 §4.2: "service closing control connection").
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// How often a control connection looks whether its transfer has ended.
const CONTROL_POLL: Duration = Duration::from_millis(50);
/// Ports for passive listeners: the next one tried (wrapping within the range).
static NEXT_PASSIVE_PORT: AtomicU16 = AtomicU16::new(PASSIVE_PORTS.0);
/// The range passive listeners use.
const PASSIVE_PORTS: (u16, u16) = (50_000, 59_999);

/// What every control connection shares.
#[derive(Clone)]
pub struct Server {
    /// The runtime: data connections are made on it (a read lock while making them;
    /// the write lock stops it).
    pub rt: Arc<RwLock<Runtime>>,
    /// The served tree.
    pub fs: DiskFs,
    /// Logins and uploads.
    pub config: ServerConfig,
}

/// Serve the control connections `listener` accepts until the runtime stops.
pub fn accept_loop(listener: &TcpListener, server: &Server, counted: impl Fn()) {
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                counted();
                let server = server.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("ftp {peer}"))
                    .spawn(move || {
                        if let Err(e) = session(&stream, peer, &server)
                            && e.kind() != io::ErrorKind::NotConnected
                        {
                            eprintln!("imp serve: ftp with {peer}: {e}");
                        }
                    });
                if let Err(e) = spawned {
                    eprintln!("imp serve: ftp: cannot start a thread for {peer}: {e}");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
            Err(e) => {
                eprintln!("imp serve: ftp: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// How the watch over a transfer ended.
enum Watched {
    /// The transfer ended by itself.
    Finished(TransferOutcome),
    /// ABOR, or the control connection closed.
    Aborted,
}

/// One control connection's state beside its session.
struct Control<'a> {
    stream: &'a TcpStream,
    server: &'a Server,
    session: Session<DiskFs>,
    passive: Option<TcpListener>,
    /// Lines read while a transfer ran, answered after it.
    queued: VecDeque<Vec<u8>>,
}

/// One control connection, from the greeting to QUIT (or the client's going).
fn session(stream: &TcpStream, peer: SocketAddr, server: &Server) -> io::Result<()> {
    let mut control = Control {
        stream,
        server,
        session: Session::new(server.config.clone(), server.fs.clone(), peer.ip()),
        passive: None,
        queued: VecDeque::new(),
    };
    reply(stream, &control.session.greeting())?;
    stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
    let mut lines = LineBuffer::new();
    let mut buf = [0u8; 4096];
    loop {
        while let Some(line) = control.queued.pop_front() {
            if !control.line(&line, &mut lines)? {
                return Ok(());
            }
        }
        let n = match (&*stream).read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if is_timeout(&e) => {
                return reply(stream, &Reply::new(421, "Idle too long; closing"));
            }
            Err(e) => return Err(e),
        };
        for line in lines.push(&buf[..n]) {
            let line = match line {
                Ok(line) => line,
                Err(r) => {
                    reply(stream, &r)?;
                    continue;
                }
            };
            control.queued.push_back(line);
        }
    }
}

fn reply(mut stream: &TcpStream, reply: &Reply) -> io::Result<()> {
    stream.write_all(&reply.to_bytes())
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl Control<'_> {
    /// Answers one line; false when the session is over.
    fn line(&mut self, line: &[u8], lines: &mut LineBuffer) -> io::Result<bool> {
        match self.session.handle_line(line) {
            Action::Reply(r) => reply(self.stream, &r)?,
            Action::Close(r) => {
                reply(self.stream, &r)?;
                let _ = self.stream.shutdown(Shutdown::Write);
                return Ok(false);
            }
            Action::Listen { extended } => {
                let r = match self.listen() {
                    Ok(addr) => self.session.passive_ready(addr, extended),
                    Err(e) => self.session.passive_failed(&e.to_string()),
                };
                reply(self.stream, &r)?;
            }
            Action::Transfer(t) => self.transfer(t, lines)?,
        }
        Ok(true)
    }

    /// A passive listener on the control connection's own address.
    fn listen(&mut self) -> io::Result<SocketAddr> {
        let ip = self.stream.local_addr()?.ip();
        let rt = self.server.rt.read().unwrap_or_else(|e| e.into_inner());
        let span = PASSIVE_PORTS.1 - PASSIVE_PORTS.0 + 1;
        for _ in 0..64 {
            let n = NEXT_PASSIVE_PORT.fetch_add(1, Ordering::Relaxed);
            let port = PASSIVE_PORTS.0 + n.wrapping_sub(PASSIVE_PORTS.0) % span;
            if let Ok(listener) = TcpListener::bind(&rt, SocketAddr::new(ip, port)) {
                let addr = listener.local_addr()?;
                self.passive = Some(listener);
                return Ok(addr);
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "no free port for a passive listener",
        ))
    }

    /// Opens the data connection, sends 150, runs the transfer on its own thread while
    /// reading the control connection for ABOR, then sends the transfer's end.
    fn transfer(&mut self, t: Transfer, lines: &mut LineBuffer) -> io::Result<()> {
        let data = match self.open_data(t.peer) {
            Ok(d) => d,
            Err(e) => {
                let r = self
                    .session
                    .transfer_done(TransferOutcome::NoConnection(e.to_string()));
                return reply(self.stream, &r);
            }
        };
        reply(self.stream, &t.start)?;
        let abort = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = mpsc::channel();
        let data = Arc::new(data);
        let mover = {
            let (data, abort) = (Arc::clone(&data), Arc::clone(&abort));
            let (direction, ascii) = (t.direction, t.ascii);
            std::thread::Builder::new()
                .name("ftp data".into())
                .spawn(move || {
                    let _ = done_tx.send(move_data(&data, direction, ascii, &abort));
                })?
        };
        self.stream.set_read_timeout(Some(CONTROL_POLL))?;
        let watched = self.watch(&done_rx, &data, &abort, lines);
        self.stream.set_read_timeout(Some(IDLE_TIMEOUT))?;
        if !matches!(watched, Ok(Watched::Finished(_))) {
            abort.store(true, Ordering::Relaxed);
            let _ = data.shutdown(Shutdown::Both);
        }
        let _ = mover.join();
        let outcome = match watched? {
            Watched::Finished(outcome) => outcome,
            Watched::Aborted => TransferOutcome::Aborted,
        };
        let aborted = outcome == TransferOutcome::Aborted && abort.load(Ordering::Relaxed);
        reply(self.stream, &self.session.transfer_done(outcome))?;
        if aborted {
            reply(self.stream, &self.session.abort_done())?;
        }
        Ok(())
    }

    /// Reads the control connection while the transfer runs: ABOR (or the client's
    /// going) stops it; other lines wait for it to end.
    fn watch(
        &mut self,
        done: &mpsc::Receiver<TransferOutcome>,
        data: &TcpStream,
        abort: &AtomicBool,
        lines: &mut LineBuffer,
    ) -> io::Result<Watched> {
        let mut buf = [0u8; 1024];
        loop {
            match done.try_recv() {
                Ok(outcome) => return Ok(Watched::Finished(outcome)),
                Err(mpsc::TryRecvError::Disconnected) => {
                    return Ok(Watched::Finished(TransferOutcome::LocalError(
                        "the transfer thread ended".into(),
                    )));
                }
                Err(mpsc::TryRecvError::Empty) => {}
            }
            let n = match (&*self.stream).read(&mut buf) {
                Ok(0) => return Ok(Watched::Aborted),
                Ok(n) => n,
                Err(e) if is_timeout(&e) => continue,
                Err(e) => return Err(e),
            };
            for line in lines.push(&buf[..n]).into_iter().flatten() {
                if line.eq_ignore_ascii_case(b"ABOR") {
                    abort.store(true, Ordering::Relaxed);
                    let _ = data.shutdown(Shutdown::Both);
                    return Ok(Watched::Aborted);
                }
                self.queued.push_back(line);
            }
        }
    }

    /// The data connection: accept on the passive listener, or connect to the client.
    fn open_data(&mut self, peer: DataPeer) -> io::Result<TcpStream> {
        let stream = match peer {
            DataPeer::Accept => {
                let listener = self.passive.take().ok_or_else(|| {
                    io::Error::new(io::ErrorKind::NotConnected, "no passive listener")
                })?;
                accept_within(&listener, DATA_TIMEOUT)?
            }
            DataPeer::Connect(addr) => {
                let rt = self.server.rt.read().unwrap_or_else(|e| e.into_inner());
                TcpStream::connect_timeout(&rt, &addr, DATA_TIMEOUT)?
            }
        };
        stream.set_read_timeout(Some(DATA_TIMEOUT))?;
        stream.set_write_timeout(Some(DATA_TIMEOUT))?;
        Ok(stream)
    }
}

/// Accepts one connection, giving up after `timeout`.
fn accept_within(listener: &TcpListener, timeout: Duration) -> io::Result<TcpStream> {
    listener.set_nonblocking(true)?;
    let until = Instant::now() + timeout;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                return Ok(stream);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client did not connect",
                ));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Moves a transfer's bytes (translating in TYPE A) until the end, an error or an
/// abort.
fn move_data(
    data: &TcpStream,
    direction: Direction,
    ascii: bool,
    abort: &AtomicBool,
) -> TransferOutcome {
    let result = match direction {
        Direction::Send(reader) => send_file(data, reader, ascii, abort),
        Direction::Receive(writer) => receive_file(data, writer, ascii, abort),
    };
    match result {
        _ if abort.load(Ordering::Relaxed) => TransferOutcome::Aborted,
        Ok(bytes) => TransferOutcome::Done { bytes },
        Err(Failure::Network) => TransferOutcome::Aborted,
        Err(Failure::File(e)) => TransferOutcome::LocalError(e.to_string()),
    }
}

/// Which side of a transfer failed.
enum Failure {
    Network,
    File(io::Error),
}

fn send_file(
    mut data: &TcpStream,
    mut reader: impnet_ftp::fs::Reader,
    ascii: bool,
    abort: &AtomicBool,
) -> Result<u64, Failure> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut wire = Vec::with_capacity(buf.len() * 2);
    let mut sent = 0u64;
    while !abort.load(Ordering::Relaxed) {
        let n = reader.read(&mut buf).map_err(Failure::File)?;
        if n == 0 {
            break;
        }
        let out = if ascii {
            wire.clear();
            ascii::to_network(&buf[..n], &mut wire);
            &wire[..]
        } else {
            &buf[..n]
        };
        data.write_all(out).map_err(|_| Failure::Network)?;
        sent += out.len() as u64;
    }
    data.shutdown(Shutdown::Write)
        .map_err(|_| Failure::Network)?;
    Ok(sent)
}

fn receive_file(
    mut data: &TcpStream,
    mut writer: impnet_ftp::fs::Writer,
    ascii: bool,
    abort: &AtomicBool,
) -> Result<u64, Failure> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut file = Vec::with_capacity(buf.len());
    let mut text = FromNetwork::new();
    let mut received = 0u64;
    while !abort.load(Ordering::Relaxed) {
        let n = data.read(&mut buf).map_err(|_| Failure::Network)?;
        file.clear();
        if n == 0 {
            text.finish(&mut file);
        } else if ascii {
            text.push(&buf[..n], &mut file);
        } else {
            file.extend_from_slice(&buf[..n]);
        }
        writer.write_all(&file).map_err(Failure::File)?;
        received += n as u64;
        if n == 0 {
            break;
        }
    }
    writer.flush().map_err(Failure::File)?;
    Ok(received)
}
