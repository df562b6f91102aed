//! The `imp` command: experiments and tools on the imp TCP/IP stack.

mod analyze;
#[cfg(test)]
mod cli_fuzz;
mod http;
mod impair;
mod link;
mod ping;
mod route;
mod serve;
mod sim;
mod tapargs;
mod ttcp;
mod ttcp_tap;
mod units;

use clap::{Parser, Subcommand};
use impnet_cli::bench;

/// Counted, for `imp bench`'s allocations per GiB and memory per connection.
#[global_allocator]
static GLOBAL: bench::alloc::Counting = bench::alloc::Counting;

/// imp: a user-space TCP/IP stack, its network simulator and measurement tools.
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
    /// Measure imp against smoltcp and the Linux kernel (bulk, ping-pong, churn, scale).
    Bench(bench::BenchArgs),
    /// Serve echo (7), discard (9), chargen (19) and HTTP files (80) on imp over a TAP.
    Serve(serve::ServeArgs),
    /// Join two TAP devices by an emulated link (delay, rate, loss, ...) in real time.
    Link(link::LinkArgs),
    /// Forward IPv4 between two or more TAP devices: imp as a gateway (RFC 1812).
    Route(route::RouteArgs),
    /// Judge every TCP connection in a pcap/pcapng: retransmissions (as tshark counts them), stalls, RTT.
    Analyze(analyze::AnalyzeArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Ping(args) => ping::run(args),
        Command::Ttcp(args) => ttcp::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Sim(args) => sim::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Link(args) => link::run(args),
        Command::Route(args) => route::run(args),
        Command::Analyze(args) => analyze::run(args),
    };
    if let Err(message) = result {
        eprintln!("imp: {message}");
        std::process::exit(1);
    }
}
