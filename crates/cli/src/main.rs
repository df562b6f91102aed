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
    /// A transparent proxy on a TUN (tun2socks): relay every TCP connection and UDP flow,
    /// to any address, through the host's sockets or a SOCKS5 server.
    Proxy(proxy::ProxyArgs),
    /// Forward IPv4 between two or more TAP devices: imp as a gateway (RFC 1812).
    Route(route::RouteArgs),
    /// Judge every TCP connection in a pcap/pcapng: retransmissions (as tshark counts them), stalls, RTT.
    Analyze(analyze::AnalyzeArgs),
    /// Show a running imp serve's or imp route's TCP sockets like `ss -tin`
    /// (`--counters`: its counters like `nstat`).
    Ss(ss::SsArgs),
}

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
