//! `shape` and `police` link keys in scenario files: parsed into the link model's
//! GCRA contracts, and every bad value refused with a one-line error naming the line
//! and the key.

use impnet_phy::link::{GcraConfig, PoliceAction, Policer};
use impnet_sim::scenario::Scenario;

fn with(keys: &str) -> String {
    format!(
        "name = \"c\"\nduration = \"1s\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n\
         [[link]]\na = \"a\"\nb = \"b\"\nrate = \"1gbit\"\n{keys}\n\
         [[flow]]\ntype = \"ping\"\nfrom = \"a\"\nto = \"b\"\n"
    )
}

fn error_of(keys: &str) -> String {
    let e = Scenario::parse(&with(keys), "bad.toml").expect_err("should be rejected");
    let message = e.to_string();
    assert!(!message.contains('\n'), "not one line: {message}");
    assert!(message.starts_with("bad.toml:11"), "{message}");
    message
}

#[test]
fn shape_and_police_tables_become_contracts() {
    let s = Scenario::parse(
        &with(
            "shape = { peak = \"622mbit\", sustained = \"100mbit\", burst = \"64K\" }\n\
             police = { peak = \"622mbit\", sustained = \"100mbit\", burst = 65536, action = \"mark\" }",
        ),
        "ok.toml",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let contract = GcraConfig {
        peak_bps: 622_000_000,
        sustained_bps: 100_000_000,
        burst_bytes: 65536,
    };
    let config = s.links[0].config;
    assert_eq!(config.shape, Some(contract));
    assert_eq!(
        config.police,
        Some(Policer {
            contract,
            action: PoliceAction::Mark
        })
    );
}

#[test]
fn bad_contracts_get_one_line_errors() {
    let e = error_of("police = { peak = \"10mbit\", sustained = \"100mbit\", burst = \"64K\" }");
    assert!(
        e.contains("`police`") && e.contains("below the sustained"),
        "{e}"
    );
    let e = error_of("shape = { peak = \"10mbit\", sustained = \"1mbit\", burst = 0 }");
    assert!(e.contains("`shape`") && e.contains("burst"), "{e}");
    let e = error_of("shape = { peak = \"10mbit\", sustained = \"1mbit\" }");
    assert!(e.contains("burst"), "{e}");
    let e = error_of("shape = { peak = \"10mbit\", sustained = \"fast\", burst = 1 }");
    assert!(e.contains("fast"), "{e}");
    let e = error_of(
        "police = { peak = \"10mbit\", sustained = \"1mbit\", burst = 1, action = \"tag\" }",
    );
    assert!(e.contains("police.action") && e.contains("\"mark\""), "{e}");
    let e = error_of(
        "shape = { peak = \"10mbit\", sustained = \"1mbit\", burst = 1, action = \"drop\" }",
    );
    assert!(e.contains("shape.action") && e.contains("no action"), "{e}");
}
