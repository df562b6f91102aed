//! RFC 9040 temporal sharing (`TcpConfig::share_control_blocks`) in the simulator: a
//! second connection to the same host starts from the window the first one left, skips
//! slow start and finishes sooner; with the knob off it does not; a connection to
//! another host does not share.

use impnet_sim::experiment::{self, FlowReport, Report};
use impnet_sim::scenario::Scenario;

/// Host `c` with a 100 Mbit/s, 40 ms RTT link to `s` and another to `o`; three 4 MB
/// uploads from `c`: to `s` at 0 and again at 2 s (the first is done by then), then to
/// `o` at 4 s.
fn scenario(share: bool) -> Scenario {
    let link = |name: &str, b: &str| {
        format!(
            "[[link]]\nname = \"{name}\"\na = \"c\"\nb = \"{b}\"\nrate = \"100mbit\"\n\
             delay = \"20ms\"\nqueue = \"1M\"\n"
        )
    };
    let flow = |name: &str, to: &str, start: &str| {
        format!(
            "[[flow]]\nname = \"{name}\"\ntype = \"bulk\"\nfrom = \"c\"\nto = \"{to}\"\n\
             start = \"{start}\"\nbytes = \"4M\"\nrecord = \"64K\"\n"
        )
    };
    let text = format!(
        "name = \"share\"\nduration = \"10s\"\nseed = 9040\n\
         [[host]]\nname = \"c\"\ntcp = {{ share_control_blocks = {share}, send_buffer = \"4M\", recv_buffer = \"4M\" }}\n\
         [[host]]\nname = \"s\"\ntcp = {{ send_buffer = \"4M\", recv_buffer = \"4M\" }}\n\
         [[host]]\nname = \"o\"\ntcp = {{ send_buffer = \"4M\", recv_buffer = \"4M\" }}\n\
         {}{}{}{}{}",
        link("cs", "s"),
        link("co", "o"),
        flow("first", "s", "0s"),
        flow("second", "s", "2s"),
        flow("other", "o", "4s"),
    );
    Scenario::parse(&text, "share.toml").unwrap_or_else(|e| panic!("{e}"))
}

fn flow<'a>(r: &'a Report, name: &str) -> &'a FlowReport {
    r.flows.iter().find(|f| f.name == name).unwrap()
}

fn run(share: bool) -> Report {
    let out =
        experiment::run(&scenario(share), None, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    for f in &out.report.flows {
        assert!(f.completed && f.data_ok == Some(true), "{f:?}");
    }
    out.report
}

fn used(r: &Report) -> u64 {
    r.hosts
        .iter()
        .find(|h| h.name == "c")
        .unwrap()
        .shared_blocks_used
}

#[test]
fn a_second_connection_to_the_same_host_starts_from_the_learned_window() {
    let (on, off) = (run(true), run(false));
    let seconds = |r: &Report, name: &str| flow(r, name).seconds;
    eprintln!(
        "on: first {:.4} s, second {:.4} s, other {:.4} s; off: first {:.4} s, second {:.4} s, other {:.4} s",
        seconds(&on, "first"),
        seconds(&on, "second"),
        seconds(&on, "other"),
        seconds(&off, "first"),
        seconds(&off, "second"),
        seconds(&off, "other")
    );
    // Exactly one connection (the second to `s`) started from a cached block; none
    // with the knob off.
    assert_eq!((used(&on), used(&off)), (1, 0));
    // The second connection to `s` skipped slow start: it finished at least two round
    // trips (80 ms) sooner than the same connection without sharing.
    assert!(
        seconds(&on, "second") + 0.08 < seconds(&off, "second"),
        "second: {} s shared vs {} s not",
        seconds(&on, "second"),
        seconds(&off, "second")
    );
    // The learned window fitted the path: it cost no retransmission.
    assert_eq!(flow(&on, "second").retransmits, 0);
    // The first connection had nothing to learn from, and the one to `o` learned
    // nothing from those to `s`: both run exactly as without sharing.
    assert_eq!(seconds(&on, "first"), seconds(&off, "first"));
    assert_eq!(seconds(&on, "other"), seconds(&off, "other"));
}
