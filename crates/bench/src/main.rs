//! `imp-bench`: imp against smoltcp and the Linux kernel on the same workloads, and
//! where imp's instructions go (`--breakdown`). The workloads are in the library
//! (`src/lib.rs`); the device ones run the `imp` binary found beside this one.
//!
//! Exit status: 0 on success, 2 when the command line is wrong (clap's parse errors
//! and the checks of the arguments made before anything runs), 1 when a workload
//! fails while running. Every error is one line on stderr naming what is wrong.

use clap::Parser;
use impnet_bench::BenchArgs;

/// Counted, for the allocations per GiB and the memory per connection.
#[global_allocator]
static GLOBAL: impnet_bench::alloc::Counting = impnet_bench::alloc::Counting;

/// Measure imp against smoltcp and the Linux kernel (bulk, ping-pong, churn, scale,
/// TAP, HTTP, forwarding, paths, the speed-up ladder, tun2socks).
#[derive(Debug, Parser)]
#[command(name = "imp-bench", version, about)]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

/// Exit status of a command line that is wrong; a failure while running exits with 1.
const USAGE: i32 = 2;

fn main() {
    // A closed standard output (`imp-bench --json | head`) ends the bench quietly, as
    // it does any Unix filter, instead of a panic in `println!`.
    // SAFETY: restoring a signal's default disposition at start-up, before any thread
    // is started; `signal` has no other preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    if let Err(message) = impnet_bench::validate(&cli.args) {
        eprintln!("imp-bench: {message}");
        std::process::exit(USAGE);
    }
    if let Err(message) = impnet_bench::run(&cli.args) {
        eprintln!("imp-bench: {message}");
        std::process::exit(1);
    }
}
