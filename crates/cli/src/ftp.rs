//! `imp ftp`: an FTP client (`impnet-ftp`'s [`Client`]) that runs one request and
//! prints the transfer's rate as the seeds' tables give it (bytes per second, from
//! the request to the end of the data). With `--tap` it talks to a real server over
//! a TAP device; without, it runs a whole session between two simulated hosts over
//! the link the options describe (a scenario with one `ftp` flow).

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use clap::Args;
use impnet::{TcpListener, TcpStream};
use impnet_core::Duration;
use impnet_ftp::ascii::{self, FromNetwork};
use impnet_ftp::{Client, ClientAction, DataMode, Plan, ReplyParser, Request};

use crate::tapargs::TapArgs;
use crate::units;

/// Options of `imp ftp`.
#[derive(Debug, Args)]
pub struct FtpArgs {
    /// With --tap: the server, ADDRESS or ADDRESS:PORT (port 21 by default).
    pub server: Option<String>,
    /// With --tap: the file to fetch (RETR), the directory to list, or the name to
    /// store under (--put).
    pub path: Option<String>,
    /// How the data connection is opened: passive (PASV), epsv, active (PORT) or eprt.
    #[arg(long, default_value = "passive", value_parser = parse_mode)]
    pub mode: DataMode,
    /// TYPE A: text, lines ending in CRLF on the wire (else TYPE I, bytes as they are).
    #[arg(long)]
    pub ascii: bool,
    /// With --tap: the user to log in as.
    #[arg(long, default_value = "anonymous")]
    pub user: String,
    /// With --tap: the password (anonymous FTP asks for an e-mail address).
    #[arg(long, default_value = "imp@")]
    pub password: String,
    /// With --tap: LIST (a long listing) instead of RETR; printed on standard output.
    #[arg(long)]
    pub list: bool,
    /// With --tap: NLST (names only) instead of RETR; printed on standard output.
    #[arg(long)]
    pub nlst: bool,
    /// With --tap: STOR this local file under PATH instead of RETR.
    #[arg(long, value_name = "FILE")]
    pub put: Option<PathBuf>,
    /// With --tap: write what RETR fetches to FILE (else it is counted and dropped).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// With --tap: give up on a connection, or a server that says nothing, after this.
    #[arg(long, default_value = "10s", value_parser = units::parse_duration)]
    pub timeout: Duration,
    /// Print the commands and replies on standard error.
    #[arg(long, short)]
    pub verbose: bool,
    /// Simulated: the file's size.
    #[arg(long, default_value = "1M", value_parser = units::parse_bytes)]
    pub bytes: u64,
    /// Simulated: bytes per server write.
    #[arg(long, default_value = "8K", value_parser = units::parse_bytes)]
    pub record: u64,
    /// Simulated: link rate, each direction.
    #[arg(long, default_value = "10mbit", value_parser = units::parse_rate)]
    pub rate: u64,
    /// Simulated: round-trip propagation delay.
    #[arg(long, default_value = "2ms", value_parser = units::parse_duration)]
    pub rtt: Duration,
    /// Simulated: probability that the link loses a frame, each direction.
    #[arg(long, default_value = "0", value_parser = units::parse_probability)]
    pub loss: f64,
    /// Simulated: IP MTU of the link.
    #[arg(long, default_value_t = 1500)]
    pub mtu: usize,
    /// Simulated: seed of the run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[command(flatten)]
    pub device: TapArgs,
}

fn parse_mode(text: &str) -> Result<DataMode, String> {
    match text {
        "passive" | "pasv" => Ok(DataMode::Passive),
        "epsv" => Ok(DataMode::ExtendedPassive),
        "active" | "port" => Ok(DataMode::Active),
        "eprt" => Ok(DataMode::ExtendedActive),
        _ => Err(format!("`{text}`: expected passive, epsv, active or eprt")),
    }
}

/// The server's address, `ADDRESS` or `ADDRESS:PORT`.
fn server_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    text.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 21))
        .map_err(|_| format!("SERVER `{text}`: give the server as ADDRESS or ADDRESS:PORT"))
}

/// The request the options ask for.
fn request(args: &FtpArgs) -> Result<Request, String> {
    let path = args.path.clone();
    match (args.list, args.nlst, &args.put) {
        (true, false, None) => Ok(Request::List(path)),
        (false, true, None) => Ok(Request::Nlst(path)),
        (false, false, Some(_)) => path
            .map(Request::Stor)
            .ok_or_else(|| "--put FILE needs PATH, the name to store it under".into()),
        (false, false, None) => path
            .map(Request::Retr)
            .ok_or_else(|| "imp ftp --tap needs PATH, the file to fetch (or --list)".into()),
        _ => Err("--list, --nlst and --put exclude each other".into()),
    }
}

/// Check the arguments before anything opens or runs.
pub fn validate(args: &FtpArgs) -> Result<(), String> {
    args.device.validate()?;
    if args.device.tap.is_some() {
        args.device.required("ftp")?;
        let server = args
            .server
            .as_deref()
            .ok_or("imp ftp --tap needs SERVER, the server's address")?;
        let addr = server_addr(server)?;
        if addr.port() == 0 || addr.ip().is_unspecified() || addr.ip().is_multicast() {
            return Err(format!(
                "{server}: give a host's unicast address and a non-zero port"
            ));
        }
        if let Some(file) = &args.put
            && !file.is_file()
        {
            return Err(format!("--put {}: not a readable file", file.display()));
        }
        if args.timeout == Duration::ZERO {
            return Err("--timeout 0: give the time to wait (e.g. 10s)".into());
        }
        return request(args).map(|_| ());
    }
    let mut given: Vec<&str> = args.device.given();
    for (on, flag) in [
        (args.server.is_some(), "SERVER"),
        (args.path.is_some(), "PATH"),
        (args.list, "--list"),
        (args.nlst, "--nlst"),
        (args.put.is_some(), "--put"),
        (args.output.is_some(), "--output"),
    ] {
        if on {
            given.push(flag);
        }
    }
    if !given.is_empty() {
        return Err(format!(
            "{} {} for a session over a TAP: add --tap NAME (without it imp ftp runs on its \
             simulated network)",
            given.join(", "),
            if given.len() == 1 { "is" } else { "are" }
        ));
    }
    if args.bytes == 0 || args.bytes > 256 << 20 {
        return Err(format!("--bytes {}: give 1 byte to 256M", args.bytes));
    }
    if args.record == 0 || args.record > 1 << 30 {
        return Err(format!("--record {}: give 1 byte to 1G", args.record));
    }
    if !(68..=65535).contains(&args.mtu) {
        return Err(format!("--mtu {} is outside 68..=65535", args.mtu));
    }
    if args.rtt > Duration::from_secs(3600) {
        return Err(format!("--rtt {}: at most an hour", args.rtt));
    }
    Ok(())
}

/// Run `imp ftp`.
pub fn run(args: &FtpArgs) -> Result<(), String> {
    validate(args)?;
    if args.device.tap.is_some() {
        run_tap(args)
    } else {
        run_sim(args)
    }
}

/// `N bytes received in T s (R B/s)`: the FTP client's line, in the seeds' units.
fn rate_line(bytes: u64, seconds: f64, verb: &str) -> String {
    let rate = bytes as f64 / seconds.max(1e-9);
    let shown = if rate >= 10e6 {
        format!("{:.1} MB/s", rate / 1e6)
    } else if rate >= 10e3 {
        format!("{:.1} kB/s", rate / 1e3)
    } else {
        format!("{rate:.1} B/s")
    };
    format!("{bytes} bytes {verb} in {seconds:.3} s ({shown}, {rate:.0} bytes/s)")
}

/// A session between two simulated hosts: a scenario with one `ftp` flow.
fn run_sim(args: &FtpArgs) -> Result<(), String> {
    let mode = match args.mode {
        DataMode::Passive => "passive",
        DataMode::ExtendedPassive => "epsv",
        DataMode::Active => "active",
        DataMode::ExtendedActive => "eprt",
    };
    let text = format!(
        "name = \"imp-ftp\"\nduration = \"3600s\"\nseed = {seed}\n\
         [[host]]\nname = \"client\"\n[[host]]\nname = \"server\"\n\
         [[link]]\nname = \"line\"\na = \"client\"\nb = \"server\"\nrate = \"{rate}bit\"\n\
         delay = \"{delay}ns\"\nloss = {loss}\nmtu = {mtu}\n\
         [[flow]]\nname = \"ftp\"\ntype = \"ftp\"\nfrom = \"client\"\nto = \"server\"\n\
         bytes = {bytes}\nrecord = {record}\ndata = \"{mode}\"\ntext_mode = {ascii}\n",
        seed = args.seed,
        rate = args.rate,
        delay = args.rtt.as_nanos() / 2,
        loss = args.loss,
        mtu = args.mtu,
        bytes = args.bytes,
        record = args.record,
        ascii = args.ascii,
    );
    let scenario =
        impnet_sim::scenario::Scenario::parse(&text, "imp ftp").map_err(|e| e.to_string())?;
    let out =
        impnet_sim::experiment::run(&scenario, None, &mut |_| {}).map_err(|e| e.to_string())?;
    let f = out.report.flows.first().ok_or("the session did not run")?;
    let ty = if args.ascii { "TYPE A" } else { "TYPE I" };
    println!(
        "imp ftp (simulated, {mode}, {ty}): {}; data {}, {} retransmitted segments",
        rate_line(f.bytes, f.seconds, "received"),
        if f.data_ok == Some(true) {
            "intact"
        } else {
            "NOT intact"
        },
        f.retransmits
    );
    if !f.completed || f.data_ok != Some(true) {
        return Err(format!("the session did not complete (seed {})", args.seed));
    }
    Ok(())
}

/// Where a TAP session's data goes or comes from.
enum Local {
    Sink(Box<dyn Write>),
    Source(File),
}

/// A session with a real server over a TAP.
fn run_tap(args: &FtpArgs) -> Result<(), String> {
    let server = server_addr(args.server.as_deref().unwrap_or_default())?;
    let request = request(args)?;
    let listing = matches!(request, Request::List(_) | Request::Nlst(_));
    let mut local = match (&args.put, &args.output) {
        (Some(file), _) => {
            Local::Source(File::open(file).map_err(|e| format!("--put {}: {e}", file.display()))?)
        }
        (None, Some(path)) => Local::Sink(Box::new(BufWriter::new(
            File::create(path).map_err(|e| format!("--output {}: {e}", path.display()))?,
        ))),
        (None, None) if listing => Local::Sink(Box::new(io::stdout())),
        (None, None) => Local::Sink(Box::new(io::sink())),
    };
    let uploads = request.uploads();
    let plan = Plan {
        user: args.user.clone(),
        pass: args.password.clone(),
        ascii: args.ascii,
        mode: args.mode,
        request,
    };
    let stack = args.device.start("ftp")?;
    let timeout = StdDuration::from_nanos(args.timeout.as_nanos());
    let control = TcpStream::connect_timeout(&stack.rt, &server, timeout)
        .map_err(|e| format!("cannot connect to {server}: {e}"))?;
    control
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let mut session = TapSession {
        rt: &stack.rt,
        control: &control,
        client: Client::new(plan, server.ip()),
        replies: ReplyParser::new(),
        listener: None,
        data: None,
        timeout,
        verbose: args.verbose,
        started: None,
        moved: None,
    };
    session.run(&mut local)?;
    if let Some((bytes, seconds)) = session.moved {
        let verb = if uploads { "sent" } else { "received" };
        let line = format!("imp ftp: {}", rate_line(bytes, seconds, verb));
        if listing && args.output.is_none() {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    Ok(())
}

/// A client session over a TAP: the state machine and its sockets.
struct TapSession<'a> {
    rt: &'a impnet::Runtime,
    control: &'a TcpStream,
    client: Client,
    replies: ReplyParser,
    listener: Option<TcpListener>,
    data: Option<TcpStream>,
    timeout: StdDuration,
    verbose: bool,
    /// When the request went out.
    started: Option<StdInstant>,
    /// Bytes on the data connection and the seconds from the request to their end.
    moved: Option<(u64, f64)>,
}

impl TapSession<'_> {
    fn run(&mut self, local: &mut Local) -> Result<(), String> {
        loop {
            match self.client.poll() {
                ClientAction::Send(line) => self.send(&line)?,
                ClientAction::Connect(addr) => {
                    let data = TcpStream::connect_timeout(self.rt, &addr, self.timeout)
                        .map_err(|e| format!("data connection to {addr}: {e}"))?;
                    self.data = Some(data);
                    self.client.data_ready();
                }
                ClientAction::Listen => {
                    let addr = self.listen()?;
                    self.client.listening(addr);
                }
                ClientAction::Transfer => {
                    let bytes = self.transfer(local)?;
                    let seconds = self.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
                    self.moved = Some((bytes, seconds));
                    self.client.data_finished();
                }
                ClientAction::Wait => self.read_replies()?,
                ClientAction::Done => return Ok(()),
                ClientAction::Failed(why) => return Err(why),
            }
        }
    }

    fn send(&mut self, line: &str) -> Result<(), String> {
        if self.verbose {
            let shown = if line.starts_with("PASS ") {
                "PASS ****"
            } else {
                line
            };
            eprintln!("--> {shown}");
        }
        if ["RETR ", "STOR ", "LIST", "NLST"]
            .iter()
            .any(|v| line.starts_with(v))
        {
            self.started = Some(StdInstant::now());
        }
        let mut control = self.control;
        control
            .write_all(format!("{line}\r\n").as_bytes())
            .map_err(|e| format!("control connection: {e}"))
    }

    fn read_replies(&mut self) -> Result<(), String> {
        let mut buf = [0u8; 4096];
        let n = match (&*self.control).read(&mut buf) {
            Ok(0) => return Err("the server closed the control connection".into()),
            Ok(n) => n,
            Err(e) => return Err(format!("control connection: {e}")),
        };
        for reply in self.replies.push(&buf[..n]).map_err(|e| e.to_string())? {
            if self.verbose {
                eprint!("<-- {reply}");
            }
            self.client.handle_reply(reply);
        }
        Ok(())
    }

    /// A listener for an active data connection, on the control connection's address.
    fn listen(&mut self) -> Result<SocketAddr, String> {
        let ip = self.control.local_addr().map_err(|e| e.to_string())?.ip();
        let base = 40_000 + (std::process::id() % 10_000) as u16;
        for port in (base..u16::MAX).take(100) {
            if let Ok(listener) = TcpListener::bind(self.rt, SocketAddr::new(ip, port)) {
                let addr = listener.local_addr().map_err(|e| e.to_string())?;
                self.listener = Some(listener);
                return Ok(addr);
            }
        }
        Err("no free port for the data connection's listener".into())
    }

    /// Moves the data; returns the bytes on the data connection.
    fn transfer(&mut self, local: &mut Local) -> Result<u64, String> {
        let data = match (self.data.take(), self.listener.take()) {
            (Some(d), _) => d,
            (None, Some(listener)) => {
                let (d, _) = listener
                    .accept()
                    .map_err(|e| format!("data connection: {e}"))?;
                d
            }
            (None, None) => return Err("no data connection".into()),
        };
        data.set_read_timeout(Some(self.timeout))
            .map_err(|e| e.to_string())?;
        let ascii = self.client.plan().ascii;
        let moved = match local {
            Local::Sink(out) => download(&data, out.as_mut(), ascii),
            Local::Source(file) => upload(&data, file, ascii),
        };
        moved.map_err(|e| format!("data connection: {e}"))
    }
}

fn download(mut data: &TcpStream, out: &mut dyn Write, ascii: bool) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut file = Vec::with_capacity(buf.len());
    let mut text = FromNetwork::new();
    let mut total = 0u64;
    loop {
        let n = data.read(&mut buf)?;
        file.clear();
        if n == 0 {
            text.finish(&mut file);
            out.write_all(&file)?;
            out.flush()?;
            return Ok(total);
        }
        total += n as u64;
        if ascii {
            text.push(&buf[..n], &mut file);
            out.write_all(&file)?;
        } else {
            out.write_all(&buf[..n])?;
        }
    }
}

fn upload(mut data: &TcpStream, file: &mut File, ascii: bool) -> io::Result<u64> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut wire = Vec::with_capacity(buf.len() * 2);
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            data.shutdown(std::net::Shutdown::Write)?;
            return Ok(total);
        }
        let out = if ascii {
            wire.clear();
            ascii::to_network(&buf[..n], &mut wire);
            &wire[..]
        } else {
            &buf[..n]
        };
        data.write_all(out)?;
        total += out.len() as u64;
    }
}
