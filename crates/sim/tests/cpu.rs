//! The hosts' CPU cost model (`impnet_sim::cpu`): a host with a CPU serialises its
//! work, saturates, drops what its receive buffers cannot hold, and pays only for the
//! work its toggles leave it; and every byte still arrives.

use impnet_sim::experiment::{self, FlowReport, Report};
use impnet_sim::scenario::Scenario;

/// Two hosts on a 100 Mbit/s link; `{A}` and `{B}` are their `cpu` lines.
const PAIR: &str = r#"
name = "cpu-pair"
duration = "60s"
seed = 3

[[cpu]]
name = "slow"
frame = "20us"
packet = "10us"
segment = "80us"
checksum_byte = "40ns"
copy_byte = "10ns"
call = "15us"
rx_buffers = {RX}

[[host]]
name = "a"
{A}
[[host]]
name = "b"
{B}

[[link]]
name = "ab"
a = "a"
b = "b"
rate = "100mbit"
delay = "1ms"
queue = "256K"

[[flow]]
name = "bulk"
type = "bulk"
from = "a"
to = "b"
bytes = "2M"
record = "8K"
"#;

fn run(a: &str, b: &str, rx_buffers: u32) -> Report {
    let text = PAIR
        .replace("{A}", a)
        .replace("{B}", b)
        .replace("{RX}", &rx_buffers.to_string());
    let scenario = Scenario::parse(&text, "pair.toml").unwrap_or_else(|e| panic!("{e}"));
    experiment::run(&scenario, None, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

fn bulk(r: &Report) -> &FlowReport {
    &r.flows[0]
}

#[test]
fn a_saturated_sender_sets_the_pace_and_every_byte_arrives() {
    let free = run("", "", 64);
    let slow = run("cpu = \"slow\"", "", 64);
    for r in [&free, &slow] {
        let f = bulk(r);
        assert!(f.completed && f.data_ok == Some(true), "{f:?}");
    }
    let (free, slow) = (bulk(&free), bulk(&slow));
    assert!(free.cpu.is_none());
    let cpu = slow.cpu.as_ref().expect("the sender has a CPU");
    assert!(cpu.receiver_busy_pct.is_none(), "b has no CPU: {cpu:?}");
    // The sender's CPU, not the wire, is the limit: it is busy all the time and the
    // transfer is slower than the free one.
    assert!(cpu.sender_busy_pct.unwrap() > 95.0, "{cpu:?}");
    assert!(
        slow.goodput_bps < 0.8 * free.goodput_bps,
        "{slow:?} vs {free:?}"
    );
}

#[test]
fn toggles_remove_their_costs_and_speed_the_saturated_host_up() {
    let base = run("cpu = \"slow\"", "", 64);
    let offload = run(
        "cpu = { profile = \"slow\", checksum_offload = true }",
        "",
        64,
    );
    let zero_copy = run(
        "cpu = { profile = \"slow\", checksum_offload = true, copy_on_send = false }",
        "",
        64,
    );
    let rates: Vec<f64> = [&base, &offload, &zero_copy]
        .iter()
        .map(|r| {
            let f = bulk(r);
            assert!(f.completed && f.data_ok == Some(true), "{f:?}");
            f.goodput_bps
        })
        .collect();
    assert!(rates[1] > rates[0] && rates[2] > rates[1], "{rates:?}");
}

#[test]
fn a_receiver_out_of_buffers_drops_frames_and_tcp_recovers_them() {
    // A fast sender, a receiver whose CPU cannot keep up and has four buffers.
    let r = run("", "cpu = \"slow\"", 4);
    let f = bulk(&r);
    assert!(f.completed && f.data_ok == Some(true), "{f:?}");
    let cpu = f.cpu.as_ref().expect("the receiver has a CPU");
    assert!(cpu.receiver_no_rx_buffer > 0, "{cpu:?}");
    assert!(
        f.retransmits > 0,
        "the dropped frames were sent again: {f:?}"
    );
    // With buffers for the whole window nothing is dropped.
    let roomy = run("", "cpu = \"slow\"", 1024);
    let cpu = bulk(&roomy).cpu.clone().unwrap();
    assert_eq!(cpu.receiver_no_rx_buffer, 0, "{cpu:?}");
}

#[test]
fn cpu_runs_replay_exactly_from_their_seed() {
    let one = run("cpu = \"slow\"", "cpu = \"vax-11/780\"", 16);
    let two = run("cpu = \"slow\"", "cpu = \"vax-11/780\"", 16);
    assert_eq!(one.trace_hash, two.trace_hash);
    assert_eq!(bulk(&one).goodput_bps, bulk(&two).goodput_bps);
}

#[test]
fn bad_cpu_settings_are_clear_errors() {
    for (a, needle) in [
        ("cpu = \"pdp-11\"", "unknown cpu profile `pdp-11`"),
        ("cpu = 5", "profile name"),
        ("cpu = { profile = \"slow\", warp = true }", "warp"),
        ("cpu = { profile = \"slow\", rx_buffers = 0 }", "at least 1"),
    ] {
        let text = PAIR
            .replace("{A}", a)
            .replace("{B}", "")
            .replace("{RX}", "8");
        let e = Scenario::parse(&text, "pair.toml")
            .expect_err(a)
            .to_string();
        assert!(e.contains(needle), "{a}: {e}");
        assert!(e.starts_with("pair.toml:"), "{e}");
    }
    let bad_cost = PAIR
        .replace("frame = \"20us\"", "frame = \"20 furlongs\"")
        .replace("{A}", "")
        .replace("{B}", "")
        .replace("{RX}", "8");
    let e = Scenario::parse(&bad_cost, "pair.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("furlongs"), "{e}");
    let bad_rung = format!("{}\n[[ladder]]\nstep = \"x\"\nflow = \"nope\"\n", PAIR)
        .replace("{A}", "")
        .replace("{B}", "")
        .replace("{RX}", "8");
    let e = Scenario::parse(&bad_rung, "pair.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("no flow called `nope`"), "{e}");
}
