//! Seed 004's gateway functions "local net reliability" and "retransmission between
//! Gateways" as a serial line retransmitting frames itself (`arq` on a link: HDLC-like
//! go-back-N, `impnet_phy::link::arq`), under TCP on seed 003's noisy 9600 bit/s line
//! (`scenarios/seeds/004-serial-arq.toml`): every byte arrives intact, and the noise
//! the line repairs no longer costs TCP retransmissions.

use std::path::PathBuf;

use impnet_sim::experiment::{self, FlowReport, Report};
use impnet_sim::scenario::Scenario;

fn report() -> Report {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/seeds/004-serial-arq.toml");
    let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    experiment::run(&scenario, None, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
        .report
}

fn flow<'a>(r: &'a Report, name: &str) -> &'a FlowReport {
    r.flows.iter().find(|f| f.name == name).unwrap()
}

#[test]
fn link_level_retransmission_spares_tcp_the_noisy_lines_losses() {
    let r = report();
    for name in ["good", "good-arq", "vm", "vm-arq", "large", "large-arq"] {
        let f = flow(&r, name);
        assert!(f.completed && f.data_ok == Some(true), "{name}: {f:?}");
    }
    for (plain, arq) in [("good", "good-arq"), ("vm", "vm-arq")] {
        let (plain, arq) = (flow(&r, plain), flow(&r, arq));
        println!(
            "{}: {} retransmissions, {} B/s; with ARQ {} retransmissions, {} B/s",
            plain.name,
            plain.retransmits,
            plain.goodput_bytes_per_s,
            arq.retransmits,
            arq.goodput_bytes_per_s
        );
        assert!(plain.retransmits > 0, "the line must be noisy: {plain:?}");
        // The line repairs its losses below TCP: on the small window, whose losses
        // are the line's (the 384-byte window never fills the modem's buffer), TCP
        // retransmits nothing.
        assert_eq!(arq.retransmits, 0, "{arq:?}");
    }
    // The 8 KB window overruns the modem's 4 KB buffer: those drops are before the
    // line, where its retransmission cannot help.
    let (large, large_arq) = (flow(&r, "large"), flow(&r, "large-arq"));
    assert!(large_arq.retransmits > 0 && large_arq.retransmits <= large.retransmits);
    for link in r.links.iter().filter(|l| l.name.ends_with("-arq")) {
        let d = &link.directions[0];
        assert!(
            d.lost > 0 && d.arq_retransmitted > 0,
            "{}: {d:?}",
            link.name
        );
        assert_eq!(d.arq_abandoned, 0, "{}: {d:?}", link.name);
    }
    for link in r.links.iter().filter(|l| !l.name.ends_with("-arq")) {
        assert_eq!(link.directions[0].arq_retransmitted, 0, "{}", link.name);
    }
}

#[test]
fn scenario_files_name_what_is_wrong_with_arq_and_list() {
    let base = r#"
name = "t"
duration = "1s"
[[host]]
name = "a"
[[host]]
name = "b"
[[link]]
a = "a"
b = "b"
"#;
    let parse = |extra: &str| Scenario::parse(&format!("{base}{extra}"), "t.toml");
    let ping = "[[flow]]\ntype = \"ping\"\nfrom = \"a\"\nto = \"b\"\n";
    let ok = parse(&format!(
        "arq = {{ window = 3, timeout = \"500ms\" }}\n{ping}"
    ))
    .unwrap();
    let arq = ok.links[0].config.arq.unwrap();
    assert_eq!((arq.window, arq.tries), (3, 10));
    let e = parse(&format!("arq = {{ window = 0 }}\n{ping}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("arq") && e.contains("window"), "{e}");
    let e = parse(&format!("arq = {{}}\nqdisc = \"codel\"\n{ping}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("arq"), "{e}");
    let flow = "[[flow]]\ntype = \"ftp\"\nfrom = \"a\"\nto = \"b\"\n";
    let e = parse(&format!("{flow}list = 5\nbytes = 100\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bytes"), "{e}");
    let ok = parse(&format!("{flow}list = 5\n")).unwrap();
    let listing = impnet_sim::scenario::ftp_listing(5);
    assert_eq!(listing.lines().count(), 5);
    assert!(matches!(
        ok.flows[0].kind,
        impnet_sim::scenario::FlowKind::Ftp { bytes, list: Some(5), .. } if bytes == listing.len() as u64
    ));
}
