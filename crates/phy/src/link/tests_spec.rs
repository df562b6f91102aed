//! [`LinkConfig`]'s [`FromStr`](std::str::FromStr): the `--impair` line.

use impnet_core::Duration;
use impnet_core::qdisc::{CodelConfig, FqCodelConfig, Limit, QdiscConfig};
use proptest::prelude::*;

use super::spec::{ContractError, DEFAULT_REORDER_DELAY, LinkSpecError, ValueError};
use super::{GcraConfig, LinkConfig, PoliceAction, Policer};
use crate::units::{Quantity, QuantityError};

fn parse(spec: &str) -> Result<LinkConfig, LinkSpecError> {
    spec.parse()
}

fn message(spec: &str) -> String {
    parse(spec).expect_err(spec).to_string()
}

#[test]
fn the_usual_impairment_parses() {
    let c = parse("delay=20ms,loss=1%,rate=100mbit").unwrap();
    assert_eq!(c.delay, Duration::from_millis(20));
    assert_eq!(c.loss, 0.01);
    assert_eq!(c.rate_bps, 100_000_000);
    let c = parse("queue=64K, reorder=5%/3ms ,duplicate=0.1,corrupt=0").unwrap();
    assert_eq!(c.queue_limit_bytes, 64 * 1024);
    assert_eq!(c.reorder, 0.05);
    assert_eq!(c.reorder_delay, Duration::from_millis(3));
    assert_eq!(c.duplicate, 0.1);
    let c = parse("reorder=1%").unwrap();
    assert_eq!(c.reorder_delay, DEFAULT_REORDER_DELAY);
    let c = parse("reorder_delay=4ms,reorder=1%").unwrap();
    assert_eq!(c.reorder_delay, Duration::from_millis(4));
    assert_eq!(parse("mtu=9000").unwrap().mtu, 9000);
    assert_eq!(parse("").unwrap(), LinkConfig::default());
    assert_eq!(parse(" , ,").unwrap(), LinkConfig::default());
}

#[test]
fn errors_name_the_bad_key_or_value() {
    assert_eq!(
        parse("delay=20ms,jitter=5ms"),
        Err(LinkSpecError::UnknownKey {
            key: "jitter".into(),
            item: "jitter=5ms".into()
        })
    );
    assert_eq!(
        message("delay=20ms,jitter=5ms"),
        "unknown impairment `jitter` in `jitter=5ms` (keys: delay, rate, loss, queue, \
         reorder, reorder-delay, duplicate, corrupt, mtu, qdisc, target, interval, shape, \
         police, arq)"
    );
    assert_eq!(
        message("loss=150%"),
        "loss=150%: `150%` is not a probability between 0 and 100%"
    );
    assert_eq!(
        message("delay = fast"),
        "delay=fast: `fast` does not start with a number"
    );
    assert_eq!(
        parse("rate=100furlongs"),
        Err(LinkSpecError::BadValue {
            key: "rate".into(),
            value: "100furlongs".into(),
            error: ValueError::Quantity(QuantityError::UnknownUnit {
                quantity: Quantity::Rate,
                unit: "furlongs".into(),
                text: "100furlongs".into()
            })
        })
    );
    assert!(message("delay").contains("`delay` is not key=value (keys: delay,"));
    assert_eq!(
        message("mtu=0"),
        "bad impairment `mtu=0`: link MTU is 0; give at least 64 bytes"
    );
    assert!(message("reorder=x/1ms").starts_with("reorder=x/1ms: `x` does not"));
    // Of two bad parts, the delay is reported.
    assert!(message("reorder=x/y").starts_with("reorder=x/y: `y` does not"));
}

#[test]
fn shape_and_police_contracts() {
    let c = parse("shape=622mbit/100mbit/64K,police=622mbit/100mbit/64K/mark").unwrap();
    let contract = GcraConfig {
        peak_bps: 622_000_000,
        sustained_bps: 100_000_000,
        burst_bytes: 64 * 1024,
    };
    assert_eq!(c.shape, Some(contract));
    assert_eq!(
        c.police,
        Some(Policer {
            contract,
            action: PoliceAction::Mark
        })
    );
    let c = parse("police=10mbit/1mbit/3000/drop").unwrap();
    assert_eq!(c.police.map(|p| p.action), Some(PoliceAction::Drop));
    let c = parse("police=10mbit/1mbit/3000").unwrap();
    assert_eq!(c.police.map(|p| p.action), Some(PoliceAction::Drop));
    assert_eq!(
        message("police=10mbit/1mbit"),
        "police=10mbit/1mbit: give PEAK/SUSTAINED/BURST[/drop|/mark], e.g. 622mbit/100mbit/64K"
    );
    assert_eq!(
        message("shape=10mbit/1mbit/3000/mark"),
        "shape=10mbit/1mbit/3000/mark: give PEAK/SUSTAINED/BURST, e.g. 622mbit/100mbit/64K"
    );
    assert_eq!(
        message("police=10mbit/1mbit/3000/tag"),
        "police=10mbit/1mbit/3000/tag: unknown action `tag`; give drop or mark"
    );
    assert!(message("police=1mbit/10mbit/3000").contains("below the sustained"));
    assert_eq!(
        message("shape=10mbit/fast/3000"),
        "shape=10mbit/fast/3000: sustained: `fast` does not start with a number"
    );
    assert!(message("shape=fast/1mbit/3000").contains("peak: `fast`"));
    assert!(matches!(
        parse("shape=10mbit/1mbit/0"),
        Err(LinkSpecError::BadValue {
            error: ValueError::Contract(ContractError::Invalid(_)),
            ..
        })
    ));
    assert!(message("shape=10mbit/1mbit/0").contains("burst"));
}

#[test]
fn qdisc_keys() {
    assert_eq!(parse("qdisc=fifo").unwrap(), LinkConfig::default());
    let c = parse("qdisc=codel,target=2ms,interval=50ms").unwrap();
    let Some(QdiscConfig::Codel(codel)) = c.qdisc else {
        panic!("{:?}", c.qdisc)
    };
    assert_eq!(
        codel,
        CodelConfig {
            target: Duration::from_millis(2),
            interval: Duration::from_millis(50),
            ..CodelConfig::default()
        }
    );
    let c = parse("queue=64K,qdisc=fq_codel").unwrap();
    let Some(QdiscConfig::FqCodel(fq)) = c.qdisc else {
        panic!("{:?}", c.qdisc)
    };
    assert_eq!(fq.limit, Limit::Bytes(64 * 1024));
    assert_eq!(fq.quantum, FqCodelConfig::default().quantum);
    let e = message("qdisc=red");
    assert!(e.contains("qdisc=red") && e.contains("fq_codel"), "{e}");
    assert_eq!(
        message("target=5ms"),
        "target=5ms: needs qdisc=codel or qdisc=fq_codel"
    );
    assert!(message("qdisc=codel,interval=soon").contains("interval=soon"));
    assert_eq!(
        message("qdisc=codel,target=0ms"),
        "target=0ms: must be more than 0"
    );
}

/// One item that parses on its own and with any others of these.
fn item() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..10_000).prop_map(|ms| format!("delay={ms}ms")),
        (1u64..100_000).prop_map(|k| format!("rate={k}kbit")),
        (0u64..=100).prop_map(|p| format!("loss={p}%")),
        (0u64..=100).prop_map(|p| format!("duplicate={p}%")),
        (0u64..=100).prop_map(|p| format!("corrupt={p}%")),
        (0u64..=100, 1u64..100).prop_map(|(p, ms)| format!("reorder={p}%/{ms}ms")),
        (1u64..1000).prop_map(|k| format!("queue={k}K")),
        (64u64..10_000).prop_map(|b| format!("mtu={b}")),
        (1u64..100, 1u64..100)
            .prop_map(|(s, extra)| format!("police={}mbit/{s}mbit/{extra}K/mark", s + extra)),
        (1u64..100, 1u64..100)
            .prop_map(|(s, extra)| format!("shape={}mbit/{s}mbit/{extra}K", s + extra)),
    ]
}

proptest! {
    #[test]
    fn no_text_panics(spec in "\\PC{0,40}") {
        let _ = parse(&spec);
    }

    #[test]
    fn no_near_miss_panics(
        parts in prop::collection::vec(
            (
                prop::sample::select(vec![
                    "delay", "rate", "loss", "queue", "reorder", "reorder-delay", "duplicate",
                    "corrupt", "mtu", "qdisc", "target", "interval", "shape", "police", "x",
                ]),
                "[0-9a-z%./_ -]{0,16}",
            ),
            0..6,
        )
    ) {
        let spec: Vec<String> = parts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let spec = spec.join(",");
        if let Err(e) = parse(&spec) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    /// Valid items in any order and number parse, and each one alone sets what the
    /// same item sets among the others when it is the last of its key.
    #[test]
    fn valid_items_parse_and_the_last_of_a_key_wins(items in prop::collection::vec(item(), 0..8)) {
        let spec = items.join(",");
        let config = parse(&spec);
        prop_assert!(config.is_ok(), "{spec}: {config:?}");
        let config = config.unwrap();
        if let Some(last) = items.last() {
            let alone = parse(last).unwrap();
            let key = last.split('=').next().unwrap();
            let same = match key {
                "delay" => config.delay == alone.delay,
                "rate" => config.rate_bps == alone.rate_bps,
                "loss" => config.loss == alone.loss,
                "duplicate" => config.duplicate == alone.duplicate,
                "corrupt" => config.corrupt == alone.corrupt,
                "reorder" => config.reorder == alone.reorder
                    && (config.reorder == 0.0 || config.reorder_delay == alone.reorder_delay),
                "queue" => config.queue_limit_bytes == alone.queue_limit_bytes,
                "mtu" => config.mtu == alone.mtu,
                "police" => config.police == alone.police,
                _ => config.shape == alone.shape,
            };
            prop_assert!(same, "{spec}: {config:?} vs {alone:?}");
        }
    }
}
