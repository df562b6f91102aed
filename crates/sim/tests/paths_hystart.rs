//! `scenarios/paths/hystart.toml`: slow start with and without HyStart++ side by side.

use std::path::PathBuf;

use impnet_sim::experiment::{self, FlowReport, Report};
use impnet_sim::scenario::Scenario;

fn flow<'a>(report: &'a Report, name: &str) -> &'a FlowReport {
    report
        .flows
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no flow {name}"))
}

#[test]
fn hystart_avoids_the_slow_start_overshoot_that_plain_slow_start_makes() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/paths/hystart.toml");
    let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let out = experiment::run(&scenario, None, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let (hystart, plain) = (flow(&out.report, "hystart"), flow(&out.report, "plain"));
    for f in [hystart, plain] {
        assert!(f.completed && f.data_ok == Some(true), "{f:?}");
    }
    // 50 MB is 36,207 segments of 1448 bytes.
    assert!(plain.retransmits > 362, "plain slow start: {plain:?}");
    assert!(hystart.retransmits < 36, "HyStart++: {hystart:?}");
    assert!(hystart.capacity_pct >= 93.0, "HyStart++: {hystart:?}");
    assert!(hystart.goodput_bps > plain.goodput_bps);
}
