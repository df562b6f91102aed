//! The client's side as a state machine: log in, set the type, set up the data
//! connection (PASV, EPSV, PORT or EPRT), run one request (RETR, STOR, LIST, NLST),
//! QUIT.
//!
//! The driver (`imp ftp`, the simulator's `ftp` flow) owns the sockets. It calls
//! [`Client::poll`] until [`ClientAction::Wait`] and does what each action says;
//! feeds every reply from the control connection ([`crate::ReplyParser`]) to
//! [`Client::handle_reply`]; reports a data connection opened with
//! [`Client::data_ready`] (passive) or a listener with [`Client::listening`]
//! (active); and says when the data has all moved with [`Client::data_finished`].
//! The transfer's 226 may come before or after the data's end: the client waits for
//! both.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};

use crate::command::{format_extended, format_host_port, parse_epsv_reply, parse_pasv_reply};
use crate::reply::Reply;

/// How the data connection is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataMode {
    /// PASV: the client connects to the address the server gives.
    Passive,
    /// EPSV (RFC 2428): the client connects to the port the server gives.
    ExtendedPassive,
    /// PORT: the server connects to the client's listener.
    Active,
    /// EPRT (RFC 2428): as PORT, any address family.
    ExtendedActive,
}

impl DataMode {
    /// The client opens the data connection.
    pub fn passive(self) -> bool {
        matches!(self, DataMode::Passive | DataMode::ExtendedPassive)
    }
}

/// The one request of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Download a file.
    Retr(String),
    /// Upload a file.
    Stor(String),
    /// A long listing.
    List(Option<String>),
    /// Names only.
    Nlst(Option<String>),
}

impl Request {
    /// The data goes from the client to the server.
    pub fn uploads(&self) -> bool {
        matches!(self, Request::Stor(_))
    }

    fn line(&self) -> String {
        match self {
            Request::Retr(p) => format!("RETR {p}"),
            Request::Stor(p) => format!("STOR {p}"),
            Request::List(Some(p)) => format!("LIST {p}"),
            Request::List(None) => "LIST".into(),
            Request::Nlst(Some(p)) => format!("NLST {p}"),
            Request::Nlst(None) => "NLST".into(),
        }
    }
}

/// What a session does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// USER.
    pub user: String,
    /// PASS.
    pub pass: String,
    /// TYPE A (else TYPE I).
    pub ascii: bool,
    /// The data connection's setup.
    pub mode: DataMode,
    /// The request.
    pub request: Request,
}

/// What the driver does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAction {
    /// Send this command line (the driver adds CRLF).
    Send(String),
    /// Connect the data connection to this address, then call [`Client::data_ready`].
    Connect(SocketAddr),
    /// Open a listener for the data connection on the control connection's local
    /// address, then call [`Client::listening`].
    Listen,
    /// Move the data now (active: accept the server's connection first); call
    /// [`Client::data_finished`] once it has all moved.
    Transfer,
    /// Wait for a reply (or for the data).
    Wait,
    /// The session ended well (221 received).
    Done,
    /// The session failed: why, with the reply that said so.
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Greeting,
    User,
    Pass,
    Type,
    Passive,
    Connecting,
    Listening,
    Port,
    Start,
    Transferring { data_done: bool, reply_done: bool },
    Quit,
    Over,
}

/// One client session.
#[derive(Debug)]
pub struct Client {
    plan: Plan,
    /// The server's address (EPSV gives only a port).
    server: IpAddr,
    stage: Stage,
    out: VecDeque<ClientAction>,
    /// Every reply received, in order (for `-v` output and the tests).
    pub transcript: Vec<Reply>,
}

impl Client {
    /// A session following `plan` with the server at `server`.
    pub fn new(plan: Plan, server: IpAddr) -> Client {
        Client {
            plan,
            server,
            stage: Stage::Greeting,
            out: VecDeque::new(),
            transcript: Vec::new(),
        }
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The next thing to do.
    pub fn poll(&mut self) -> ClientAction {
        self.out.pop_front().unwrap_or(ClientAction::Wait)
    }

    fn fail(&mut self, what: &str, reply: &Reply) {
        self.stage = Stage::Over;
        self.out.clear();
        self.out.push_back(ClientAction::Failed(format!(
            "{what}: {} {}",
            reply.code,
            reply.text()
        )));
    }

    fn send(&mut self, stage: Stage, line: String) {
        self.stage = stage;
        self.out.push_back(ClientAction::Send(line));
    }

    /// A reply from the control connection.
    pub fn handle_reply(&mut self, reply: Reply) {
        self.transcript.push(reply.clone());
        let ok = reply.is_completion();
        match self.stage {
            Stage::Greeting if reply.is_preliminary() => {}
            Stage::Greeting if ok => self.send(Stage::User, format!("USER {}", self.plan.user)),
            Stage::User if reply.is_intermediate() => {
                self.send(Stage::Pass, format!("PASS {}", self.plan.pass));
            }
            Stage::User | Stage::Pass if ok => {
                let ty = if self.plan.ascii { "A" } else { "I" };
                self.send(Stage::Type, format!("TYPE {ty}"));
            }
            Stage::Type if ok => self.set_up_data(),
            Stage::Passive => self.on_passive(&reply),
            Stage::Port if ok => self.send(Stage::Start, self.plan.request.line()),
            Stage::Start if reply.is_preliminary() => {
                self.stage = Stage::Transferring {
                    data_done: false,
                    reply_done: false,
                };
                self.out.push_back(ClientAction::Transfer);
            }
            Stage::Transferring { data_done, .. } if ok => self.transferring(data_done, true),
            Stage::Quit if ok => {
                self.stage = Stage::Over;
                self.out.push_back(ClientAction::Done);
            }
            Stage::Over => {}
            stage => self.fail(&format!("{stage:?}"), &reply),
        }
    }

    fn set_up_data(&mut self) {
        match self.plan.mode {
            DataMode::Passive => self.send(Stage::Passive, "PASV".into()),
            DataMode::ExtendedPassive => self.send(Stage::Passive, "EPSV".into()),
            DataMode::Active | DataMode::ExtendedActive => {
                self.stage = Stage::Listening;
                self.out.push_back(ClientAction::Listen);
            }
        }
    }

    fn on_passive(&mut self, reply: &Reply) {
        let addr = match (reply.code, self.plan.mode) {
            (227, DataMode::Passive) => parse_pasv_reply(reply.text()).map(SocketAddr::V4),
            (229, DataMode::ExtendedPassive) => {
                parse_epsv_reply(reply.text()).map(|port| SocketAddr::new(self.server, port))
            }
            _ => None,
        };
        match addr {
            Some(addr) => {
                self.stage = Stage::Connecting;
                self.out.push_back(ClientAction::Connect(addr));
            }
            None => self.fail("passive mode", reply),
        }
    }

    /// The passive data connection is open.
    pub fn data_ready(&mut self) {
        if self.stage == Stage::Connecting {
            self.send(Stage::Start, self.plan.request.line());
        }
    }

    /// The active-mode listener is open at `addr`.
    pub fn listening(&mut self, addr: SocketAddr) {
        if self.stage != Stage::Listening {
            return;
        }
        let line = match (self.plan.mode, addr) {
            (DataMode::Active, SocketAddr::V4(a)) => format!("PORT {}", format_host_port(a)),
            _ => format!("EPRT {}", format_extended(addr)),
        };
        self.send(Stage::Port, line);
    }

    /// The data connection could not be opened, or broke.
    pub fn data_failed(&mut self, why: &str) {
        self.stage = Stage::Over;
        self.out.clear();
        self.out
            .push_back(ClientAction::Failed(format!("data connection: {why}")));
    }

    /// All the data has moved (the download reached its end, or the upload was sent
    /// and its connection closed).
    pub fn data_finished(&mut self) {
        if let Stage::Transferring { reply_done, .. } = self.stage {
            self.transferring(true, reply_done);
        }
    }

    fn transferring(&mut self, data_done: bool, reply_done: bool) {
        if data_done && reply_done {
            self.send(Stage::Quit, "QUIT".into());
        } else {
            self.stage = Stage::Transferring {
                data_done,
                reply_done,
            };
        }
    }

    /// The session is over (done or failed).
    pub fn is_over(&self) -> bool {
        self.stage == Stage::Over
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(mode: DataMode) -> Plan {
        Plan {
            user: "anonymous".into(),
            pass: "imp@".into(),
            ascii: true,
            mode,
            request: Request::Retr("f".into()),
        }
    }

    fn r(code: u16, text: &str) -> Reply {
        Reply::new(code, text)
    }

    #[test]
    fn a_passive_download_from_greeting_to_quit() {
        let mut c = Client::new(plan(DataMode::Passive), "10.0.0.1".parse().unwrap());
        assert_eq!(c.poll(), ClientAction::Wait);
        c.handle_reply(r(220, "hi"));
        assert_eq!(c.poll(), ClientAction::Send("USER anonymous".into()));
        c.handle_reply(r(331, "pass"));
        assert_eq!(c.poll(), ClientAction::Send("PASS imp@".into()));
        c.handle_reply(r(230, "in"));
        assert_eq!(c.poll(), ClientAction::Send("TYPE A".into()));
        c.handle_reply(r(200, "ok"));
        assert_eq!(c.poll(), ClientAction::Send("PASV".into()));
        c.handle_reply(r(227, "Entering Passive Mode (10,0,0,1,4,1)"));
        assert_eq!(
            c.poll(),
            ClientAction::Connect("10.0.0.1:1025".parse().unwrap())
        );
        c.data_ready();
        assert_eq!(c.poll(), ClientAction::Send("RETR f".into()));
        c.handle_reply(r(150, "go"));
        assert_eq!(c.poll(), ClientAction::Transfer);
        c.handle_reply(r(226, "done"));
        assert_eq!(c.poll(), ClientAction::Wait, "the data has not all arrived");
        c.data_finished();
        assert_eq!(c.poll(), ClientAction::Send("QUIT".into()));
        c.handle_reply(r(221, "bye"));
        assert_eq!(c.poll(), ClientAction::Done);
        assert!(c.is_over());
    }

    #[test]
    fn active_and_extended_modes_and_failures() {
        let mut c = Client::new(plan(DataMode::ExtendedActive), "10.0.0.1".parse().unwrap());
        for reply in [r(220, ""), r(230, "no password needed"), r(200, "")] {
            c.handle_reply(reply);
        }
        let sent: Vec<ClientAction> = std::iter::from_fn(|| Some(c.poll()))
            .take_while(|a| *a != ClientAction::Wait)
            .collect();
        assert_eq!(
            sent,
            [
                ClientAction::Send("USER anonymous".into()),
                ClientAction::Send("TYPE A".into()),
                ClientAction::Listen
            ]
        );
        c.listening("10.0.0.2:6000".parse().unwrap());
        assert_eq!(
            c.poll(),
            ClientAction::Send("EPRT |1|10.0.0.2|6000|".into())
        );
        c.handle_reply(r(200, ""));
        assert_eq!(c.poll(), ClientAction::Send("RETR f".into()));
        c.handle_reply(r(550, "f: no such file or directory"));
        assert_eq!(
            c.poll(),
            ClientAction::Failed("Start: 550 f: no such file or directory".into())
        );
        let mut e = Client::new(plan(DataMode::ExtendedPassive), "10.0.0.1".parse().unwrap());
        for reply in [r(220, ""), r(230, ""), r(200, "")] {
            e.handle_reply(reply);
        }
        e.handle_reply(r(229, "Entering Extended Passive Mode (|||6446|)"));
        let actions: Vec<ClientAction> = std::iter::from_fn(|| Some(e.poll()))
            .take_while(|a| *a != ClientAction::Wait)
            .collect();
        assert_eq!(
            actions.last(),
            Some(&ClientAction::Connect("10.0.0.1:6446".parse().unwrap()))
        );
        let mut bad = Client::new(plan(DataMode::Passive), "10.0.0.1".parse().unwrap());
        bad.handle_reply(r(421, "too many users"));
        assert!(matches!(bad.poll(), ClientAction::Failed(_)));
    }
}
