//! Replays one fuzz input with a line per operation, or random inputs as a smoke test:
//! `cargo run -p impnet-fuzz-harness --example trace -- tcp_conn <file>`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, target, file] = &args[..] else {
        eprintln!("usage: trace <target> <file>");
        std::process::exit(2);
    };
    let data = std::fs::read(file).expect("the input reads");
    match target.as_str() {
        "tcp_conn" => impnet_fuzz_harness::tcp_conn::trace(&data, |line| println!("{line}")),
        "reassembly" => impnet_fuzz_harness::reassembly::run(&data),
        "sim_impair" => impnet_fuzz_harness::sim_impair::run(&data),
        "scenario_parse" => impnet_fuzz_harness::scenario_parse::run(&data),
        other => panic!("no target {other}"),
    }
}
