//! The `imp` command: experiments and tools on the imp TCP/IP stack.
//!
//! Exit status: 0 on success, 2 when the command line is wrong (clap's parse errors
//! and each command's own checks of its arguments, made before anything is opened
//! or run), 1 when a command fails while running (including a scenario file that
//! does not parse). Every error is one line on stderr naming what is wrong.

mod analyze;
#[cfg(test)]
mod cli_fuzz;
mod control;
mod ftp;
mod ftp_serve;
mod http;
mod impair;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod libm;
mod link;
mod ping;
mod proxy;
mod quic_echo;
mod route;
mod serve;
mod sim;
mod ss;
mod tapargs;
mod ttcp;
mod ttcp_tap;
mod units;

use clap::{Parser, Subcommand};

/// imp: a user-space TCP/IP stack, its network simulator and measurement tools.
///
/// The benchmarks against smoltcp and the Linux kernel are a program of their own,
/// imp-bench (crates/bench in imp's repository).
#[derive(Debug, Parser)]
#[command(name = "imp", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// `imp` with no command under it, as far as a command's help and errors show it.
    fn root() -> clap::Command {
        clap::Command::new("imp")
            .version(env!("CARGO_PKG_VERSION"))
            .subcommand_required(true)
            .arg_required_else_help(true)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Send ICMP echo requests across a simulated two-host network and print the replies.
    Ping(ping::PingArgs),
    /// Transfer bytes over TCP between two simulated hosts and print the throughput.
    Ttcp(ttcp::TtcpArgs),
    /// Run a scenario file in virtual time: tables per flow, pcaps, JSON summary, plots.
    Sim(sim::SimArgs),
    /// Serve echo (7), discard (9), chargen (19), HTTP (80) and FTP (21) files on imp over a TAP.
    Serve(serve::ServeArgs),
    /// Fetch (or list, or store) a file by FTP from a server over a TAP, or run an FTP
    /// session between two simulated hosts, and print the rate.
    Ftp(ftp::FtpArgs),
    /// Join two TAP devices by an emulated link (delay, rate, loss, ...) in real time.
    Link(link::LinkArgs),
    #[command(about = PROXY_ABOUT)]
    Proxy(proxy::ProxyArgs),
    /// Forward IPv4 between two or more TAP devices: imp as a gateway (RFC 1812).
    Route(route::RouteArgs),
    /// Judge every TCP connection in a pcap/pcapng: retransmissions (as tshark counts them), stalls, RTT.
    Analyze(analyze::AnalyzeArgs),
    /// Show a running imp serve's or imp route's TCP sockets like `ss -tin`
    /// (`--counters`: its counters like `nstat`).
    Ss(ss::SsArgs),
}

/// `imp proxy`'s line in `imp --help` (and atop `imp proxy --help`).
const PROXY_ABOUT: &str = "A transparent proxy on a TUN (tun2socks): relay every TCP \
                           connection and UDP flow, to any address, through the host's \
                           sockets or a SOCKS5 server";

/// Exit status of a command line that is wrong: clap's own parse errors and the
/// checks each command makes of its arguments before it does anything
/// ([`validate`]). A command that fails while running exits with 1.
const USAGE: i32 = 2;

/// The checks each command makes of its arguments before it does anything: no
/// device opened, no packet sent, no simulation run, no file written (only
/// looking whether a path exists). An error names the offending option or value.
fn validate(command: &Command) -> Result<(), String> {
    match command {
        Command::Ping(args) => ping::validate(args),
        Command::Ttcp(args) if args.device.is_set() => ttcp_tap::validate(args),
        Command::Ttcp(args) => ttcp::validate(args),
        Command::Sim(args) => sim::validate(args),
        Command::Serve(args) => serve::validate(args),
        Command::Ftp(args) => ftp::validate(args),
        Command::Link(args) => link::validate(args),
        Command::Route(args) => route::validate(args),
        Command::Proxy(args) => proxy::validate(args),
        Command::Analyze(args) => analyze::validate(args),
        Command::Ss(_) => Ok(()),
    }
}

fn main() {
    // A closed standard output (`imp sim FILE | head`) ends imp quietly, as it does
    // any Unix filter, instead of a panic in `println!`. No socket imp uses relies on
    // EPIPE from the kernel: std's sockets send with MSG_NOSIGNAL, imp's are its own.
    // SAFETY: restoring a signal's default disposition at start-up, before any thread
    // is started; `signal` has no other preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match proxy_only(std::env::args_os()) {
        Some(args) => run_proxy(&args),
        None => run_any(),
    }
}

/// `imp proxy`: its checks, then the proxy. Out of line, as [`run_any`].
#[inline(never)]
fn run_proxy(args: &proxy::ProxyArgs) {
    if let Err(message) = proxy::validate(args) {
        eprintln!("imp: {message}");
        std::process::exit(USAGE);
    }
    if let Err(message) = proxy::run(args) {
        eprintln!("imp: {message}");
        std::process::exit(1);
    }
}

/// Any command: its command line among every command's, its checks, the command.
/// Out of line: an `imp proxy` does not run this code, nor keep it resident (see
/// [`proxy_only`]).
#[inline(never)]
fn run_any() {
    let cli = Cli::parse();
    if let Err(message) = validate(&cli.command) {
        eprintln!("imp: {message}");
        std::process::exit(USAGE);
    }
    let result = match &cli.command {
        Command::Ping(args) => ping::run(args),
        Command::Ttcp(args) if args.device.is_set() => ttcp_tap::run(args),
        Command::Ttcp(args) => ttcp::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Ftp(args) => ftp::run(args),
        Command::Link(args) => link::run(args),
        Command::Route(args) => route::run(args),
        Command::Proxy(args) => proxy::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Ss(args) => ss::run(args),
    };
    if let Err(message) = result {
        eprintln!("imp: {message}");
        std::process::exit(1);
    }
}

/// `imp` with only the `proxy` command: what [`Cli`] parses, for the same command
/// lines, with the same help and errors (`tests` below compares them).
fn proxy_command() -> clap::Command {
    use clap::Args;
    let proxy = proxy::ProxyArgs::augment_args(clap::Command::new("proxy"))
        .about(PROXY_ABOUT)
        .long_about(None);
    Cli::root().subcommand(proxy)
}

/// The command line of `imp proxy ...` (None for any other), built and parsed with
/// the proxy's options alone: clap builds every command's otherwise, and the code
/// that builds them, some 0.4 MB, would stay resident in an idle proxy.
fn proxy_only(args: impl IntoIterator<Item = std::ffi::OsString>) -> Option<proxy::ProxyArgs> {
    use clap::FromArgMatches;
    let args: Vec<std::ffi::OsString> = args.into_iter().collect();
    if args.get(1).is_none_or(|word| word != "proxy") {
        return None;
    }
    let matches = proxy_command().get_matches_from(args);
    let (_, sub) = matches.subcommand()?;
    Some(proxy::ProxyArgs::from_arg_matches(sub).unwrap_or_else(|e| e.exit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn words(line: &str) -> Vec<std::ffi::OsString> {
        line.split_whitespace().map(Into::into).collect()
    }

    /// What a command line comes to: the parsed command, or clap's message and kind.
    fn outcome(command: clap::Command, line: &str) -> String {
        use clap::FromArgMatches;
        match command.try_get_matches_from(words(line)) {
            Ok(matches) => format!("{:?}", Cli::from_arg_matches(&matches).map(|c| c.command)),
            Err(e) => format!("{:?}: {}", e.kind(), e.render()),
        }
    }

    /// The proxy's command line alone parses, helps and fails as the whole one does.
    #[test]
    fn proxy_only_same_as_every_command() {
        for line in [
            "imp proxy --help",
            "imp proxy -h",
            "imp proxy",
            "imp proxy --bogus",
            "imp proxy --tun t0 --rate x",
            "imp proxy --tun t0 --addr 10.0.0.2/24",
            "imp proxy --tun t0 --addr 10.0.0.2/24 --socks5 127.0.0.1:1080 --threads 2 \
             --udp-idle 5 --rate 100 --max-half-open 9 --buffer-size 64K --max-memory 64M",
            "imp proxy --tun t0 extra",
            "imp proxy --version",
            "imp proxy -V",
        ] {
            assert_eq!(
                outcome(proxy_command(), line),
                outcome(Cli::command(), line),
                "{line}"
            );
        }
    }

    /// Only `imp proxy ...` takes the short way.
    #[test]
    fn proxy_only_for_proxy_alone() {
        assert!(proxy_only(words("imp ping --help")).is_none());
        assert!(proxy_only(words("imp")).is_none());
        assert!(proxy_only(words("imp --proxy")).is_none());
        let args = proxy_only(words("imp proxy --tun t0 --addr 10.0.0.2/24")).unwrap();
        assert_eq!(args.device.tun.as_deref(), Some("t0"));
    }
}
