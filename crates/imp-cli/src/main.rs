//! The `imp` command: experiments and tools on the imp TCP/IP stack.

mod ping;
mod ttcp;
mod units;

use clap::{Parser, Subcommand};

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
}

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Ping(args) => ping::run(args),
        Command::Ttcp(args) => ttcp::run(args),
    };
    if let Err(message) = result {
        eprintln!("imp: {message}");
        std::process::exit(1);
    }
}
