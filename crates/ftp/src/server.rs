//! The server's side of one control connection, as a state machine.
//!
//! The driver (a thread per connection in `imp serve --ftp`, the simulator's `ftp`
//! flow) owns the sockets and calls, in order:
//!
//! 1. [`Session::greeting`] once, and sends it;
//! 2. for every line of the control connection ([`LineBuffer`] cuts them),
//!    [`Session::handle_line`], and does what the [`Action`] says: send a reply, close
//!    after one, open a passive listener and report its address with
//!    [`Session::passive_ready`] (or [`Session::passive_failed`]), or run a
//!    [`Transfer`]: open the data connection, send its `start` reply, move the bytes
//!    (translating with [`crate::ascii`] when `ascii`), and send what
//!    [`Session::transfer_done`] replies;
//! 3. during a transfer, an ABOR line ends it: [`TransferOutcome::Aborted`], then the
//!    reply of [`Session::abort_done`].
//!
//! The session reads and writes files only through its [`FileTree`].

use std::fmt;
use std::io::Read;
use std::net::{IpAddr, SocketAddr};

use crate::ascii;
use crate::command::{self, Command, EpsvArg, TransferType};
use crate::fs::{FileTree, Meta, Reader, Writer, civil};
use crate::path::{self, PathError};
use crate::reply::{MAX_LINE, Reply};

/// Who may log in and where uploads may go.
#[derive(Debug, Clone, Default)]
pub struct ServerConfig {
    /// `anonymous` (or `ftp`) logs in with any password.
    pub anonymous: bool,
    /// A user name and its password.
    pub user: Option<(String, String)>,
    /// The directory (a normalised path in the tree) STOR may write into; `None`: no
    /// uploads.
    pub upload_dir: Option<String>,
}

/// What the driver does after a line.
pub enum Action {
    /// Send this reply.
    Reply(Reply),
    /// Send this reply and close the control connection.
    Close(Reply),
    /// Open a listener for a passive data connection on the control connection's local
    /// address (any port), then call [`Session::passive_ready`] with its address.
    Listen {
        /// EPSV (RFC 2428) rather than PASV.
        extended: bool,
    },
    /// Open the data connection and move the data.
    Transfer(Transfer),
}

/// How the data connection is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPeer {
    /// Accept one connection on the passive listener.
    Accept,
    /// Connect to the client's PORT/EPRT address.
    Connect(SocketAddr),
}

/// Which way the bytes go.
pub enum Direction {
    /// Server to client: read this and send it.
    Send(Reader),
    /// Client to server: receive and write it here.
    Receive(Writer),
}

impl fmt::Debug for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Send(_) => "Send",
            Direction::Receive(_) => "Receive",
        })
    }
}

/// A data transfer to run.
#[derive(Debug)]
pub struct Transfer {
    /// Where the data connection comes from.
    pub peer: DataPeer,
    /// TYPE A: translate (LF to CRLF sending, CRLF to LF receiving).
    pub ascii: bool,
    /// The data.
    pub direction: Direction,
    /// The 150 reply to send once the data connection is open.
    pub start: Reply,
}

/// How a transfer ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransferOutcome {
    /// Every byte moved (a count of data-connection bytes).
    Done {
        /// Bytes on the data connection.
        bytes: u64,
    },
    /// The data connection could not be opened (425).
    NoConnection(String),
    /// The data connection broke, or ABOR ended it (426).
    Aborted,
    /// Reading or writing the file failed (451).
    LocalError(String),
}

enum Login {
    NeedUser,
    NeedPass { user: String },
    In,
}

enum DataSetup {
    None,
    Passive,
    Active(SocketAddr),
}

/// One control connection's state.
pub struct Session<F: FileTree> {
    config: ServerConfig,
    fs: F,
    /// The client's address: PORT and EPRT may only name it (RFC 2577 §3).
    peer: IpAddr,
    login: Login,
    /// The working directory, normalised.
    cwd: String,
    ty: TransferType,
    data: DataSetup,
    /// The REST offset for the next RETR or STOR.
    rest: u64,
    /// EPSV ALL was given: only EPSV sets up data connections.
    epsv_all: bool,
}

impl<F: FileTree> Session<F> {
    /// A session for a client at `peer`.
    pub fn new(config: ServerConfig, fs: F, peer: IpAddr) -> Session<F> {
        Session {
            config,
            fs,
            peer,
            login: Login::NeedUser,
            cwd: "/".into(),
            ty: TransferType::Ascii,
            data: DataSetup::None,
            rest: 0,
            epsv_all: false,
        }
    }

    /// The 220 sent when the connection opens.
    pub fn greeting(&self) -> Reply {
        Reply::new(220, "imp FTP server ready")
    }

    /// One command line (without its CRLF).
    pub fn handle_line(&mut self, line: &[u8]) -> Action {
        let command = match command::parse(line) {
            Ok(c) => c,
            Err(reply) => return Action::Reply(reply),
        };
        match command {
            Command::Quit => return Action::Close(Reply::new(221, "Goodbye")),
            Command::User(_) | Command::Pass(_) => return Action::Reply(self.on_login(command)),
            Command::Noop => return reply(200, "NOOP ok"),
            Command::Syst => return reply(215, "UNIX Type: L8"),
            Command::Feat => return Action::Reply(features()),
            Command::Help => return Action::Reply(help()),
            Command::Opts(o) => return Action::Reply(options(&o)),
            Command::Abor => return reply(226, "No transfer to abort"),
            _ if !matches!(self.login, Login::In) => {
                return reply(530, "Please log in with USER and PASS");
            }
            _ => {}
        }
        self.logged_in(command)
    }

    fn logged_in(&mut self, command: Command) -> Action {
        if !matches!(
            command,
            Command::Rest(_) | Command::Retr(_) | Command::Stor(_)
        ) {
            self.rest = 0;
        }
        match command {
            Command::Cwd(dir) => Action::Reply(self.on_cwd(&dir)),
            Command::Cdup => Action::Reply(self.on_cwd("..")),
            Command::Pwd => reply(
                257,
                format!(
                    "\"{}\" is the current directory",
                    self.cwd.replace('"', "\"\"")
                ),
            ),
            Command::Type(t) => {
                self.ty = t;
                let name = if t == TransferType::Ascii { "A" } else { "I" };
                reply(200, format!("Type set to {name}"))
            }
            Command::Mode => reply(200, "Mode set to S"),
            Command::Stru => reply(200, "Structure set to F"),
            Command::Port(a) | Command::Eprt(a) => Action::Reply(self.on_port(a)),
            Command::Pasv if self.epsv_all => reply(503, "EPSV ALL was given: use EPSV"),
            Command::Pasv => Action::Listen { extended: false },
            Command::Epsv(EpsvArg::All) => {
                self.epsv_all = true;
                reply(200, "EPSV ALL ok: only EPSV from now on")
            }
            Command::Epsv(_) => Action::Listen { extended: true },
            Command::Rest(offset) if offset > 0 && self.ty == TransferType::Ascii => {
                reply(504, "REST in TYPE A is not implemented; use TYPE I")
            }
            Command::Rest(offset) => {
                self.rest = offset;
                reply(350, format!("Restarting at {offset}; send RETR or STOR"))
            }
            Command::Retr(name) => self.on_retr(&name),
            Command::Stor(name) => self.on_stor(&name),
            Command::List(arg) => self.on_list(arg.as_deref(), true),
            Command::Nlst(arg) => self.on_list(arg.as_deref(), false),
            Command::Size(name) => Action::Reply(self.on_size(&name)),
            Command::Mdtm(name) => Action::Reply(self.on_mdtm(&name)),
            _ => reply(502, "Not implemented"),
        }
    }

    fn on_login(&mut self, command: Command) -> Reply {
        match (command, std::mem::replace(&mut self.login, Login::NeedUser)) {
            (Command::User(user), _) => {
                let anonymous = user == "anonymous" || user == "ftp";
                let text = if anonymous && self.config.anonymous {
                    "Anonymous login ok, send your e-mail address as the password"
                } else {
                    "Password required"
                };
                self.login = Login::NeedPass { user };
                Reply::new(331, text)
            }
            (Command::Pass(_), Login::NeedUser) => Reply::new(503, "Send USER first"),
            (Command::Pass(_), Login::In) => {
                self.login = Login::In;
                Reply::new(503, "Already logged in")
            }
            (Command::Pass(pass), Login::NeedPass { user }) => {
                let anonymous = self.config.anonymous && (user == "anonymous" || user == "ftp");
                let known = self
                    .config
                    .user
                    .as_ref()
                    .is_some_and(|(u, p)| *u == user && *p == pass);
                if anonymous || known {
                    self.login = Login::In;
                    self.cwd = "/".into();
                    Reply::new(230, "Logged in")
                } else {
                    Reply::new(530, "Login incorrect")
                }
            }
            (_, login) => {
                self.login = login;
                Reply::new(503, "Bad sequence of commands")
            }
        }
    }

    /// The client's name as a path in the tree, or the 550/553 saying why not.
    fn resolve(&self, name: &str) -> Result<String, Reply> {
        path::resolve(&self.cwd, name).map_err(|e| match e {
            PathError::Escape => Reply::new(550, format!("{name}: outside the served directory")),
            PathError::BadCharacter => Reply::new(553, format!("{name}: file name not allowed")),
        })
    }

    fn stat(&self, name: &str) -> Result<(String, Meta), Reply> {
        let path = self.resolve(name)?;
        let meta = self
            .fs
            .stat(&path)
            .map_err(|e| Reply::new(550, format!("{name}: {}", io_text(&e))))?;
        Ok((path, meta))
    }

    fn on_cwd(&mut self, dir: &str) -> Reply {
        match self.stat(dir) {
            Ok((path, meta)) if meta.is_dir => {
                let text = format!("Directory changed to {path}");
                self.cwd = path;
                Reply::new(250, text)
            }
            Ok(_) => Reply::new(550, format!("{dir}: not a directory")),
            Err(r) => r,
        }
    }

    fn on_port(&mut self, addr: SocketAddr) -> Reply {
        if self.epsv_all {
            return Reply::new(503, "EPSV ALL was given: use EPSV");
        }
        // RFC 2577 §3 (the bounce attack): only the client's own address, no
        // privileged port.
        if addr.ip() != self.peer {
            return Reply::new(501, "PORT/EPRT must name your own address");
        }
        if addr.port() < 1024 {
            return Reply::new(501, "PORT/EPRT to a port below 1024 is refused");
        }
        self.data = DataSetup::Active(addr);
        Reply::new(200, "PORT command successful")
    }

    /// The passive listener is open at `addr`: the 227 or 229 reply.
    pub fn passive_ready(&mut self, addr: SocketAddr, extended: bool) -> Reply {
        if extended {
            self.data = DataSetup::Passive;
            return Reply::new(
                229,
                format!("Entering Extended Passive Mode (|||{}|)", addr.port()),
            );
        }
        match addr {
            SocketAddr::V4(a) => {
                self.data = DataSetup::Passive;
                Reply::new(
                    227,
                    format!("Entering Passive Mode ({})", command::format_host_port(a)),
                )
            }
            SocketAddr::V6(_) => Reply::new(522, "PASV is IPv4 only: use EPSV"),
        }
    }

    /// The passive listener could not be opened.
    pub fn passive_failed(&mut self, why: &str) -> Reply {
        self.data = DataSetup::None;
        Reply::new(425, format!("Cannot open a passive connection: {why}"))
    }

    /// The data connection set up by PORT/PASV, used up by this transfer.
    fn take_peer(&mut self) -> Result<DataPeer, Reply> {
        match std::mem::replace(&mut self.data, DataSetup::None) {
            DataSetup::None => Err(Reply::new(425, "Use PORT, PASV, EPRT or EPSV first")),
            DataSetup::Passive => Ok(DataPeer::Accept),
            DataSetup::Active(a) => Ok(DataPeer::Connect(a)),
        }
    }

    fn on_retr(&mut self, name: &str) -> Action {
        let offset = std::mem::take(&mut self.rest);
        let (path, meta) = match self.stat(name) {
            Ok((_, m)) if m.is_dir => return reply(550, format!("{name}: is a directory")),
            Ok(found) => found,
            Err(r) => return Action::Reply(r),
        };
        let reader = match self.fs.open(&path, offset) {
            Ok(r) => r,
            Err(e) => return reply(550, format!("{name}: {}", io_text(&e))),
        };
        let ascii = self.ty == TransferType::Ascii;
        let mode = if ascii { "ASCII" } else { "BINARY" };
        self.transfer(
            Direction::Send(reader),
            ascii,
            format!(
                "Opening {mode} mode data connection for {name} ({} bytes)",
                meta.len
            ),
        )
    }

    fn transfer(&mut self, direction: Direction, ascii: bool, text: String) -> Action {
        match self.take_peer() {
            Ok(peer) => Action::Transfer(Transfer {
                peer,
                ascii,
                direction,
                start: Reply::new(150, text),
            }),
            Err(r) => Action::Reply(r),
        }
    }

    fn on_stor(&mut self, name: &str) -> Action {
        let offset = std::mem::take(&mut self.rest);
        let Some(upload) = self.config.upload_dir.clone() else {
            return reply(502, "STOR is not enabled: this server takes no uploads");
        };
        let path = match self.resolve(name) {
            Ok(p) => p,
            Err(r) => return Action::Reply(r),
        };
        if !path::is_within(&path, &upload) || path == upload {
            return reply(553, format!("{name}: uploads go into {upload} only"));
        }
        if matches!(self.data, DataSetup::None) {
            return reply(425, "Use PORT, PASV, EPRT or EPSV first");
        }
        let writer = match self.fs.create(&path, offset) {
            Ok(w) => w,
            Err(e) => return reply(553, format!("{name}: {}", io_text(&e))),
        };
        let ascii = self.ty == TransferType::Ascii;
        self.transfer(
            Direction::Receive(writer),
            ascii,
            format!("Ok to send data for {name}"),
        )
    }

    fn on_list(&mut self, arg: Option<&str>, long: bool) -> Action {
        // `LIST -la [dir]`: ls options some clients send; there are none here.
        let name = arg
            .map(|a| a.split_ascii_whitespace().filter(|w| !w.starts_with('-')))
            .and_then(|mut words| words.next())
            .unwrap_or(".");
        let (path, meta) = match self.stat(name) {
            Ok(found) => found,
            Err(r) => return Action::Reply(r),
        };
        let entries = if meta.is_dir {
            match self.fs.list(&path) {
                Ok(e) => e,
                Err(e) => return reply(550, format!("{name}: {}", io_text(&e))),
            }
        } else {
            vec![crate::fs::Entry {
                name: path::file_name(&path).to_string(),
                meta,
            }]
        };
        let text = listing(&entries, long);
        // The listing is written in the network form already: no translation.
        self.transfer(
            Direction::Send(Box::new(std::io::Cursor::new(text.into_bytes()))),
            false,
            "Here comes the directory listing".into(),
        )
    }

    fn on_size(&mut self, name: &str) -> Reply {
        let (path, meta) = match self.stat(name) {
            Ok((_, m)) if m.is_dir => {
                return Reply::new(550, format!("{name}: not a regular file"));
            }
            Ok(found) => found,
            Err(r) => return r,
        };
        if self.ty == TransferType::Image {
            return Reply::new(213, meta.len.to_string());
        }
        // RFC 3659 §4: in TYPE A, the bytes the transfer would send.
        match self.fs.open(&path, 0).and_then(ascii_len) {
            Ok(n) => Reply::new(213, n.to_string()),
            Err(e) => Reply::new(550, format!("{name}: {}", io_text(&e))),
        }
    }

    fn on_mdtm(&mut self, name: &str) -> Reply {
        match self.stat(name) {
            Ok((_, m)) if m.is_dir => Reply::new(550, format!("{name}: not a regular file")),
            Ok((
                _,
                Meta {
                    modified: Some(t), ..
                },
            )) => {
                let (y, mo, d, h, mi, s) = civil(t);
                Reply::new(213, format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}"))
            }
            Ok(_) => Reply::new(550, format!("{name}: modification time unknown")),
            Err(r) => r,
        }
    }

    /// The reply that ends a transfer.
    pub fn transfer_done(&mut self, outcome: TransferOutcome) -> Reply {
        match outcome {
            TransferOutcome::Done { bytes } => {
                Reply::new(226, format!("Transfer complete ({bytes} bytes)"))
            }
            TransferOutcome::NoConnection(why) => {
                Reply::new(425, format!("Cannot open the data connection: {why}"))
            }
            TransferOutcome::Aborted => Reply::new(426, "Connection closed; transfer aborted"),
            TransferOutcome::LocalError(why) => {
                Reply::new(451, format!("Local error in processing: {why}"))
            }
        }
    }

    /// After ABOR ended a transfer (and its 426 went out): RFC 959 §4.1.3's 226.
    pub fn abort_done(&mut self) -> Reply {
        Reply::new(226, "ABOR successful")
    }
}

fn reply(code: u16, text: impl Into<String>) -> Action {
    Action::Reply(Reply::new(code, text))
}

fn io_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// The bytes of a file in TYPE A.
fn ascii_len(mut reader: Reader) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0;
    loop {
        match reader.read(&mut buf)? {
            0 => return Ok(total),
            n => total += ascii::network_len(&buf[..n]),
        }
    }
}

/// One `ls -l` line, as FTP clients parse them.
/// What LIST (`long`: `ls -l` lines) or NLST (names) sends for `entries`: a line each,
/// ending in CRLF.
pub fn listing(entries: &[crate::fs::Entry], long: bool) -> String {
    let mut text = String::new();
    for e in entries {
        if long {
            text.push_str(&list_line(&e.name, &e.meta));
        } else {
            text.push_str(&e.name);
        }
        text.push_str("\r\n");
    }
    text
}

fn list_line(name: &str, meta: &Meta) -> String {
    let (kind, mode) = if meta.is_dir {
        ('d', "rwxr-xr-x")
    } else {
        ('-', "rw-r--r--")
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, mo, d, ..) = civil(meta.modified.unwrap_or(0));
    let month = MONTHS[(mo as usize).saturating_sub(1) % 12];
    format!(
        "{kind}{mode} 1 ftp ftp {:>12} {month} {d:>2} {y:>5} {name}",
        meta.len
    )
}

fn features() -> Reply {
    let features = [
        "EPRT",
        "EPSV",
        "MDTM",
        "PASV",
        "REST STREAM",
        "SIZE",
        "UTF8",
    ];
    let mut lines = vec!["Features:".to_string()];
    lines.extend(features.iter().map(|f| f.to_string()));
    lines.push("End".into());
    Reply::multi(211, lines)
}

fn help() -> Reply {
    Reply::multi(
        214,
        vec![
            "Commands:".into(),
            "USER PASS CWD CDUP PWD TYPE MODE STRU PORT PASV EPRT EPSV".into(),
            "RETR STOR LIST NLST SIZE MDTM REST ABOR QUIT NOOP SYST FEAT OPTS HELP".into(),
            "Help ok".into(),
        ],
    )
}

fn options(option: &str) -> Reply {
    if option.eq_ignore_ascii_case("UTF8 ON") {
        Reply::new(200, "UTF8 is always on")
    } else {
        Reply::new(501, format!("OPTS {option}: not an option here"))
    }
}

/// Cuts the control connection's bytes into lines (CRLF or LF), dropping TELNET
/// commands (IAC and the byte after it: the IP and Synch a client may send before
/// ABOR, RFC 959 §4.1.3).
#[derive(Debug, Default)]
pub struct LineBuffer {
    partial: Vec<u8>,
    after_iac: bool,
    too_long: bool,
}

impl LineBuffer {
    /// An empty buffer.
    pub fn new() -> LineBuffer {
        LineBuffer::default()
    }

    /// Feeds bytes; returns the complete lines (an over-long line comes out as the
    /// 500 reply to send for it).
    pub fn push(&mut self, data: &[u8]) -> Vec<Result<Vec<u8>, Reply>> {
        let mut out = Vec::new();
        for &b in data {
            if std::mem::take(&mut self.after_iac) {
                continue;
            }
            match b {
                0xff => self.after_iac = true,
                b'\n' => {
                    let mut line = std::mem::take(&mut self.partial);
                    if line.last() == Some(&b'\r') {
                        line.pop();
                    }
                    if std::mem::take(&mut self.too_long) {
                        out.push(Err(Reply::new(500, "Command line too long")));
                    } else {
                        out.push(Ok(line));
                    }
                }
                _ if self.partial.len() >= MAX_LINE => self.too_long = true,
                _ => self.partial.push(b),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
