//! The keystroke flow (TELNET-like typing with echoes): Nagle's algorithm and delayed
//! ACKs change how many packets each keystroke costs and how long its echo takes.

use impnet_sim::experiment::{self, FlowReport, Report};
use impnet_sim::scenario::Scenario;

/// Two identical 1 Mbit/s, 100 ms RTT links, 100 keystrokes typed every 30 ms (faster
/// than the round trip) on each: one pair of hosts with Nagle and 40 ms delayed ACKs
/// (the defaults), the other with neither.
const KEYS: &str = r#"
name = "keys"
duration = "30s"
seed = 5
[[host]]
name = "a"
[[host]]
name = "b"
[[host]]
name = "c"
tcp = { nagle = false, delayed_ack = "0ms" }
[[host]]
name = "d"
tcp = { nagle = false, delayed_ack = "0ms" }
[[link]]
a = "a"
b = "b"
rate = "1mbit"
delay = "50ms"
[[link]]
a = "c"
b = "d"
rate = "1mbit"
delay = "50ms"
[[flow]]
name = "nagle"
type = "keystroke"
from = "a"
to = "b"
count = 100
interval = "30ms"
[[flow]]
name = "nodelay"
type = "keystroke"
from = "c"
to = "d"
count = 100
interval = "30ms"
"#;

fn flow<'a>(r: &'a Report, name: &str) -> &'a FlowReport {
    r.flows.iter().find(|f| f.name == name).unwrap()
}

#[test]
fn nagle_and_delayed_acks_cut_packets_per_keystroke_and_delay_echoes() {
    let scenario = Scenario::parse(KEYS, "keys.toml").unwrap_or_else(|e| panic!("{e}"));
    let out = experiment::run(&scenario, None, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let (nagle, nodelay) = (flow(&out.report, "nagle"), flow(&out.report, "nodelay"));
    for f in [nagle, nodelay] {
        assert!(f.completed, "{f:?}");
        assert_eq!(f.transactions, Some(100), "every keystroke echoed: {f:?}");
        assert_eq!(f.rtt.samples, 100);
        // No echo comes back sooner than the round trip.
        assert!(f.rtt.min_ms >= 100.0, "{f:?}");
    }
    let (with, without) = (
        nagle.packets_per_keystroke.unwrap(),
        nodelay.packets_per_keystroke.unwrap(),
    );
    // Without Nagle and delayed ACKs every keystroke costs its segment, the echo and
    // an ACK for each (about 4 frames); with them, keystrokes typed within a round trip
    // share a segment and the ACKs ride on echoes and later keystrokes (under 2).
    assert!(without > 3.0, "no Nagle: {without} frames per keystroke");
    assert!(with < 2.0, "Nagle: {with} frames per keystroke");
    // The price: a keystroke waits for the previous segment's ACK, so echoes are later.
    assert!(
        nagle.rtt.mean_ms > nodelay.rtt.mean_ms + 20.0,
        "echo {} ms with Nagle vs {} ms without",
        nagle.rtt.mean_ms,
        nodelay.rtt.mean_ms
    );
}

#[test]
fn keystroke_flows_refuse_fields_that_do_not_apply() {
    let bad = KEYS.replace(
        "count = 100\ninterval = \"30ms\"\n[[flow]]",
        "size = 10\n[[flow]]",
    );
    let e = Scenario::parse(&bad, "keys.toml").unwrap_err().to_string();
    assert!(e.contains("size") && e.contains("keystroke"), "{e}");
    let bad = KEYS.replacen("interval = \"30ms\"", "interval = \"0ms\"", 1);
    let e = Scenario::parse(&bad, "keys.toml").unwrap_err().to_string();
    assert!(e.contains("interval") && e.contains("more than 0"), "{e}");
}
