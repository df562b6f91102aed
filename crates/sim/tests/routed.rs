//! Topologies with routers: scenario parsing and its errors, the dumbbell generator,
//! and the routed scenarios of `scenarios/routed/` with their expected outcomes.
#![allow(clippy::too_many_lines)] // tests may be long; the lint is for library code

use std::path::PathBuf;

use impnet_sim::experiment::{self, FlowReport, InterfaceReport, Outcome, Report};
use impnet_sim::scenario::{NodeKind, Scenario};
use impnet_wire::ipv4::Cidr;

fn run(scenario: &Scenario) -> Outcome {
    experiment::run(scenario, None, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

fn routed(file: &str) -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/routed")
        .join(file);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn flow<'a>(report: &'a Report, name: &str) -> &'a FlowReport {
    report
        .flows
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no flow {name}"))
}

/// The interface of `router` on `link`.
fn iface<'a>(report: &'a Report, router: &str, link: &str) -> &'a InterfaceReport {
    let r = report
        .routers
        .iter()
        .find(|r| r.name == router)
        .unwrap_or_else(|| panic!("no router {router}"));
    r.interfaces
        .iter()
        .find(|i| i.link == link)
        .unwrap_or_else(|| panic!("{router} has no interface on {link}"))
}

const LINE: &str = r#"
duration = "20s"
seed = 5

[[node]]
name = "h1"
[[node]]
name = "r1"
kind = "router"
[[node]]
name = "r2"
kind = "router"
[[node]]
name = "h2"

[[link]]
name = "lan1"
a = "h1"
b = "r1"
rate = "100mbit"
delay = "1ms"
[[link]]
name = "wan"
a = "r1"
b = "r2"
rate = "10mbit"
delay = "10ms"
loss = "1%"
[[link]]
name = "lan2"
a = "r2"
b = "h2"
rate = "100mbit"
delay = "1ms"

[[flow]]
name = "bulk"
type = "bulk"
from = "h1"
to = "h2"
bytes = "1M"

[[flow]]
name = "echo"
type = "rr"
from = "h2"
to = "h1"
request = 100
response = 3000
count = 20

[[flow]]
name = "ping-router"
type = "ping"
from = "h1"
to = "r2"
count = 3
interval = "100ms"
"#;

#[test]
fn flows_cross_two_routers_byte_exact_and_routers_count_what_they_forward() {
    let scenario = Scenario::parse(LINE, "line.toml").unwrap();
    assert_eq!(scenario.nodes[1].kind, NodeKind::Router);
    assert_eq!(scenario.flows[0].path, vec![0, 1, 2]);
    // Hosts on one link get one default route; each router reaches the far LAN.
    let h1: Vec<_> = scenario.routes.iter().filter(|r| r.node == 0).collect();
    assert_eq!(h1.len(), 1);
    assert_eq!(h1[0].dest, Cidr::DEFAULT_ROUTE);
    let out = run(&scenario);
    let r = &out.report;
    let bulk = flow(r, "bulk");
    assert!(bulk.completed && bulk.data_ok == Some(true), "{bulk:?}");
    assert_eq!(
        bulk.rate_bps, 10_000_000,
        "the flow's rate is its bottleneck's"
    );
    let echo = flow(r, "echo");
    assert!(echo.completed, "{echo:?}");
    assert_eq!(echo.transactions, Some(20));
    let ping = flow(r, "ping-router");
    assert_eq!(ping.pings_received, Some(3));
    // The WAN's losses show on the routers' WAN interfaces, equal to the link's.
    let wan = r.links.iter().find(|l| l.name == "wan").unwrap();
    let r1 = iface(r, "r1", "wan");
    let r2 = iface(r, "r2", "wan");
    assert_eq!(r1.drops.wire_loss, wan.directions[0].lost);
    assert_eq!(r2.drops.wire_loss, wan.directions[1].lost);
    assert!(r1.drops.wire_loss > 0);
    assert!(iface(r, "r1", "lan1").forwarded > 700, "{r1:?}");
    assert!(
        r.hosts.iter().all(|h| h.name.starts_with('h')),
        "routers are not hosts"
    );
    // The report is deterministic.
    let again = run(&scenario);
    assert_eq!(
        serde_json::to_string(&out.report).unwrap(),
        serde_json::to_string(&again.report).unwrap()
    );
}

#[test]
fn delay_routing_takes_the_faster_longer_path() {
    let text = LINE.replace("seed = 5", "seed = 5\nrouting = \"delay\"")
        + r#"
[[node]]
name = "r3"
kind = "router"
[[link]]
name = "slow"
a = "r1"
b = "h2"
delay = "200ms"
[[link]]
name = "fast1"
a = "r1"
b = "r3"
delay = "1ms"
[[link]]
name = "fast2"
a = "r3"
b = "r2"
delay = "1ms"
"#;
    let scenario = Scenario::parse(&text, "delay.toml").unwrap();
    // h1 and h2 share no link; by delay lan1, fast1, fast2, lan2 (4 ms) beats
    // lan1, wan, lan2 (12 ms) and lan1, slow (201 ms).
    assert_eq!(scenario.flows[0].path, vec![0, 4, 5, 2]);
    let hops = Scenario::parse(&text.replace("routing = \"delay\"", ""), "hops.toml").unwrap();
    assert_eq!(hops.flows[0].path, vec![0, 3], "by hops the slow link wins");
}

#[test]
fn given_routes_replace_computed_ones() {
    let text = LINE.to_string()
        + r#"
[[route]]
node = "h1"
dest = "10.0.2.0/24"
via = "r1"
[[route]]
node = "r1"
dest = "default"
via = "r2"
link = "wan"
"#;
    let scenario = Scenario::parse(&text, "routes.toml").unwrap();
    let h1: Vec<_> = scenario.routes.iter().filter(|r| r.node == 0).collect();
    assert_eq!(h1.len(), 2);
    let run = run(&scenario);
    assert!(flow(&run.report, "bulk").completed);
}

fn error_of(text: &str) -> String {
    let e = Scenario::parse(text, "bad.toml").expect_err("the scenario should be rejected");
    let message = e.to_string();
    assert!(!message.contains('\n'), "not one line: {message}");
    assert!(message.starts_with("bad.toml"), "{message}");
    message
}

#[test]
fn bad_topologies_get_one_line_errors() {
    let cases = [
        (LINE.replace("b = \"r1\"\nrate", "b = \"r9\"\nrate"), "no node called `r9`"),
        (
            LINE.replace("name = \"r2\"", "name = \"r1\""),
            "a router called `r1` already exists",
        ),
        (LINE.replace("kind = \"router\"", "kind = \"switch\""), "unknown node kind"),
        (
            LINE.replace("a = \"r1\"\nb = \"r2\"", "a = \"r1\"\nb = \"r1\""),
            "two different nodes",
        ),
        (
            // Without the WAN, h1 cannot reach h2.
            LINE.replace("a = \"r1\"\nb = \"r2\"", "a = \"h1\"\nb = \"h2\"")
                .replace("to = \"h2\"\nbytes", "to = \"r2\"\nbytes"),
            "a router; only a ping",
        ),
        (
            LINE.replace(
                "name = \"wan\"\na = \"r1\"\nb = \"r2\"",
                "name = \"wan\"\na = \"h1\"\nb = \"r1\"",
            ),
            "no path from `h1` to `h2`",
        ),
        (
            LINE.to_string() + "[[route]]\nnode = \"h1\"\ndest = \"default\"\nvia = \"h2\"\n",
            "not a neighbour",
        ),
        (
            LINE.to_string() + "[[route]]\nnode = \"h1\"\ndest = \"ten\"\nvia = \"r1\"\n",
            "neither \"default\" nor a prefix",
        ),
        (
            LINE.replace("name = \"lan2\"", "name = \"lan2\"\na_addr = \"10.0.0.5/24\"\nb_addr = \"10.0.0.6/24\""),
            "overlaps",
        ),
        (
            LINE.replace("name = \"lan2\"", "name = \"lan2\"\na_addr = \"10.9.0.5/24\""),
            "give both",
        ),
        (
            LINE.replace("name = \"lan2\"", "name = \"lan2\"\na_addr = \"10.9.0.5/24\"\nb_addr = \"10.8.0.6/24\""),
            "subnet",
        ),
        (LINE.replace("seed = 5", "seed = 5\nrouting = \"ospf\""), "unknown routing"),
        (LINE.replace("name = \"wan\"", "name = \"wan\"\nqdisc = \"red\""), "unknown queue discipline"),
        (LINE.replace("name = \"wan\"", "name = \"wan\"\ntarget = \"5ms\""), "needs `qdisc"),
        (
            "duration = \"1s\"\n[[host]]\nname = \"a\"\nkind = \"router\"".into(),
            "use [[node]]",
        ),
        (
            "duration = \"1s\"\n[dumbbell]\npairs = 0\nbottleneck = { rate = \"1mbit\" }\nflow = { type = \"bulk\", bytes = 1 }".into(),
            "must be 1 to",
        ),
        (
            "duration = \"1s\"\n[dumbbell]\npairs = 2\nbottleneck = { a = \"x\" }\nflow = { type = \"bulk\", bytes = 1 }".into(),
            "give only the link model",
        ),
        (
            "duration = \"1s\"\n[dumbbell]\npairs = 2\nbottleneck = { rate = \"1mbit\" }\nflow = { type = \"bulk\", bytes = 1, to = \"x\" }".into(),
            "names its flows",
        ),
        (
            "duration = \"1s\"\n[[node]]\nname = \"left\"\n[dumbbell]\npairs = 2\nbottleneck = { rate = \"1mbit\" }\nflow = { type = \"bulk\", bytes = 1 }".into(),
            "already exists",
        ),
    ];
    for (text, expect) in &cases {
        let message = error_of(text);
        assert!(
            message.contains(expect),
            "expected `{expect}` in: {message}"
        );
    }
}

#[test]
fn a_dumbbell_shares_its_bottleneck_fairly_and_delivers_every_byte() {
    let text = r#"
duration = "30s"
seed = 11
[dumbbell]
pairs = 4
access = { rate = "1gbit", delay = "1ms" }
bottleneck = { rate = "20mbit", delay = "10ms", queue = "200K" }
flow = { type = "bulk", bytes = "2M" }
stagger = "10ms"
"#;
    let scenario = Scenario::parse(text, "db.toml").unwrap();
    assert!(scenario.dumbbell);
    assert_eq!(scenario.nodes.len(), 10);
    assert_eq!(scenario.links.len(), 9);
    assert_eq!(scenario.flows.len(), 4);
    assert_eq!(scenario.flows[3].start.as_millis(), 30);
    assert_eq!(scenario.links[4].name, "bottleneck");
    let out = run(&scenario);
    for f in &out.report.flows {
        assert!(f.completed && f.data_ok == Some(true), "{f:?}");
        assert!(f.goodput_bps > 1e6, "{f:?}");
    }
    let fairness = out.report.fairness.expect("a fairness index");
    assert!(fairness > 0.5 && fairness <= 1.0, "{fairness}");
    let left = iface(&out.report, "left", "bottleneck");
    assert!(
        left.queue.samples > 0 && left.queue.max_bytes > 0,
        "{left:?}"
    );
    assert!(left.queue.max_bytes <= 200 * 1024 + 1600, "{left:?}");
    assert!(!out.queues.is_empty());
}

#[test]
fn a_hundred_pair_dumbbell_parses_with_one_default_route_per_host() {
    let text = r#"
duration = "1s"
[dumbbell]
pairs = 100
bottleneck = { rate = "100mbit", delay = "20ms", queue = "500K" }
flow = { type = "bulk", bytes = "1M" }
"#;
    let scenario = Scenario::parse(text, "db100.toml").unwrap();
    assert_eq!(scenario.nodes.len(), 202);
    assert_eq!(scenario.links.len(), 201);
    for (i, node) in scenario.nodes.iter().enumerate() {
        let routes = scenario.routes.iter().filter(|r| r.node == i).count();
        assert_eq!(routes, 1, "{}", node.name);
    }
}

// ---- the routed scenarios ---------------------------------------------------------

#[test]
fn routed002_the_wan_router_counts_the_cell_losses() {
    let out = run(&routed("002-oc12-routed.toml"));
    let r = &out.report;
    let sack = flow(r, "sack");
    assert!(sack.completed && sack.data_ok == Some(true), "{sack:?}");
    let oc12 = r.links.iter().find(|l| l.name == "oc12").unwrap();
    let gw = iface(r, "lbnl-gw", "oc12");
    assert!(
        gw.drops.wire_loss > 0,
        "the run should see cell loss: {gw:?}"
    );
    assert_eq!(gw.drops.wire_loss, oc12.directions[0].lost);
    assert_eq!(
        iface(r, "anl-gw", "oc12").drops.wire_loss,
        oc12.directions[1].lost
    );
    assert!(sack.retransmits >= gw.drops.wire_loss / 2, "{sack:?}");
}

#[test]
fn routed004_letters_loop_through_one_router() {
    let out = run(&routed("004-loop-router.toml"));
    let r = &out.report;
    let letters = flow(r, "letters-90");
    assert!(letters.transactions.unwrap_or(0) > 100, "{letters:?}");
    assert!(iface(r, "imp", "line-in").forwarded > 200);
    assert!(iface(r, "imp", "line-out").forwarded > 200);
}

#[test]
fn bufferbloat_codel_and_fq_codel_keep_the_ping_fast() {
    let out = run(&routed("bufferbloat.toml"));
    let r = &out.report;
    let rtt = |name: &str| flow(r, name).rtt.mean_ms;
    let (droptail, codel, fq) = (rtt("droptail-ping"), rtt("codel-ping"), rtt("fqcodel-ping"));
    assert!(
        droptail > 5.0 * codel,
        "drop-tail {droptail} ms, CoDel {codel} ms"
    );
    assert!(fq <= codel, "FQ-CoDel {fq} ms, CoDel {codel} ms");
    // CoDel signals congestion: by CE marks, the hosts negotiating ECN by default.
    let codel = &iface(r, "codel-left", "codel-bottleneck").drops;
    assert!(codel.ce_marked > 0 && codel.aqm == 0, "{codel:?}");
    // HyStart++ leaves slow start before the 1 MB buffer overflows, but congestion
    // avoidance goes on growing into it: the ping waits behind hundreds of ms of queue.
    assert!(droptail > 200.0, "drop-tail {droptail} ms");
    for v in ["droptail", "codel", "fqcodel"] {
        assert!(flow(r, &format!("{v}-bulk")).goodput_bps > 7e6, "{v}");
    }
}

/// The host report of `name`.
fn host<'a>(report: &'a Report, name: &str) -> &'a impnet_sim::experiment::HostReport {
    report
        .hosts
        .iter()
        .find(|h| h.name == name)
        .unwrap_or_else(|| panic!("no host {name}"))
}

#[test]
fn ecn_with_a_codel_bottleneck_marks_instead_of_dropping() {
    let out = run(&routed("ecn-codel.toml"));
    let r = &out.report;
    let (ecn, drop) = (flow(r, "ecn"), flow(r, "drop"));
    for f in [ecn, drop] {
        assert!(f.completed && f.data_ok == Some(true), "{f:?}");
        assert!(f.goodput_bps > 8e6, "{f:?}");
    }
    let marked = iface(r, "ecn-left", "ecn-bottleneck");
    let dropped = iface(r, "drop-left", "drop-bottleneck");
    // With ECN, CoDel marks and drops nothing; the sender cuts its window once per
    // mark episode and repairs nothing.
    assert!(marked.drops.ce_marked > 10, "{:?}", marked.drops);
    assert_eq!(marked.drops.aqm + marked.drops.queue_full, 0);
    assert_eq!(ecn.retransmits, 0);
    let (sender, receiver) = (host(r, "ecn-sender"), host(r, "ecn-receiver"));
    assert_eq!(receiver.ecn_ce_received, marked.drops.ce_marked);
    assert!(sender.ecn_cuts > 10 && sender.ecn_cuts <= marked.drops.ce_marked);
    // Without, CoDel drops about as often, and each drop is a retransmission.
    assert!(dropped.drops.aqm > 10 && dropped.drops.ce_marked == 0);
    assert!(drop.retransmits >= dropped.drops.aqm, "{drop:?}");
    // Both keep the standing queue near CoDel's 5 ms target.
    for q in [&marked.queue, &dropped.queue] {
        assert!(q.mean_delay_ms < 10.0, "{q:?}");
    }
}

#[test]
fn pmtud_works_with_icmp_and_black_hole_detection_without() {
    let out = run(&routed("pmtud.toml"));
    let r = &out.report;
    let passed = flow(r, "passed");
    assert!(
        passed.completed && passed.data_ok == Some(true),
        "{passed:?}"
    );
    assert!(iface(r, "passed-r1", "passed-lan").drops.frag_needed > 0);
    // ICMP filtered: the fragmentation-needed messages never arrive; black-hole
    // detection (RFC 4821) lowers the segment size after repeated timeouts (and the
    // search climbs back) and the transfer completes, byte for byte, later than with
    // ICMP.
    let filtered = flow(r, "filtered");
    assert!(
        filtered.completed && filtered.data_ok == Some(true),
        "{filtered:?}"
    );
    assert!(filtered.seconds > passed.seconds, "{filtered:?} {passed:?}");
    assert!(iface(r, "filtered-r1", "filtered-lan").drops.icmp_filtered > 0);
    assert!(iface(r, "filtered-r1", "filtered-lan").drops.frag_needed > 0);
}

#[test]
fn plpmtud_passes_a_black_hole_that_stalls_a_sender_without_it() {
    let out = run(&routed("pmtu-probe.toml"));
    let r = &out.report;
    // No detection, no probing: full-sized segments vanish, nothing is delivered.
    let stuck = flow(r, "stuck");
    assert!(!stuck.completed && stuck.bytes == 0, "{stuck:?}");
    assert!(iface(r, "stuck-r1", "stuck-lan").drops.icmp_filtered > 0);
    // Detection alone (halving) and detection with the search both deliver every byte.
    for name in ["halved", "probing"] {
        let f = flow(r, name);
        assert!(f.completed && f.data_ok == Some(true), "{f:?}");
        assert_eq!(f.bytes, 2 << 20, "{f:?}");
    }
    // The search finds larger segments than halving keeps (about 950 bytes of data
    // against 718): the same bytes in at least a fifth fewer data segments.
    let data_segments = |name: &str| {
        let conn = flow(r, name).analysis.as_ref().expect("a capture analysis");
        conn.directions[0].data_segments
    };
    let (halved, probing) = (data_segments("halved"), data_segments("probing"));
    assert!(
        probing * 5 < halved * 4,
        "probing {probing}, halved {halved} data segments"
    );
}

#[test]
fn newreno_cubic_and_vegas_all_get_a_share() {
    let out = run(&routed("cc-share.toml"));
    let r = &out.report;
    for cc in ["newreno", "cubic", "vegas"] {
        let f = flow(r, cc);
        assert!(f.goodput_bps > 100e3, "{f:?}");
    }
    let fairness = r.fairness.expect("fairness is reported");
    assert!(fairness > 1.0 / 3.0 && fairness <= 1.0, "{fairness}");
}
