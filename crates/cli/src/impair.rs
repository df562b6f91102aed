//! `--impair delay=20ms,loss=1%,rate=100mbit`: the link model applied in real time to
//! the frames of a device command, parsed into a [`LinkConfig`].
//!
//! Keys: `delay`, `rate`, `loss`, `queue`, `reorder`, `reorder-delay`, `duplicate`,
//! `corrupt`, `mtu`, `qdisc`, `target`, `interval`. `reorder` takes `P` or `P/DELAY`
//! (held-back frames wait DELAY more, default 10 ms). `qdisc` is `fifo` (the default
//! drop-tail queue), `codel` or `fq_codel`; `target` and `interval` set CoDel's and
//! need one of the last two; `queue` then limits the discipline in bytes. `shape` and
//! `police` take a GCRA traffic contract as `PEAK/SUSTAINED/BURST` (rates and a size:
//! `shape=622mbit/100mbit/64K`); `police` may end in `/drop` (the default) or `/mark`.
//! Every error names the key and value it could not use.

use impnet_core::Duration;
use impnet_core::qdisc::{Limit, QdiscConfig};
use impnet_phy::LinkConfig;
use impnet_phy::link::{GcraConfig, PoliceAction, Policer};

use crate::units;

/// What `--impair` accepts, for messages.
const KEYS: &str = "delay, rate, loss, queue, reorder, reorder-delay, duplicate, corrupt, mtu, \
                    qdisc, target, interval, shape, police";

/// A traffic contract `PEAK/SUSTAINED/BURST`, with `/drop` or `/mark` after it when
/// `action_allowed`.
fn parse_contract(value: &str, action_allowed: bool) -> Result<(GcraConfig, PoliceAction), String> {
    let parts: Vec<&str> = value.split('/').map(str::trim).collect();
    let (peak, sustained, burst, action) = match parts[..] {
        [p, s, b] => (p, s, b, PoliceAction::Drop),
        [p, s, b, "drop"] if action_allowed => (p, s, b, PoliceAction::Drop),
        [p, s, b, "mark"] if action_allowed => (p, s, b, PoliceAction::Mark),
        [_, _, _, other] if action_allowed => {
            return Err(format!("unknown action `{other}`; give drop or mark"));
        }
        _ => {
            let form = if action_allowed {
                "PEAK/SUSTAINED/BURST[/drop|/mark]"
            } else {
                "PEAK/SUSTAINED/BURST"
            };
            return Err(format!("give {form}, e.g. 622mbit/100mbit/64K"));
        }
    };
    let config = GcraConfig {
        peak_bps: units::parse_rate(peak).map_err(|e| format!("peak: {e}"))?,
        sustained_bps: units::parse_rate(sustained).map_err(|e| format!("sustained: {e}"))?,
        burst_bytes: units::parse_bytes(burst).map_err(|e| format!("burst: {e}"))?,
    };
    config.validate().map_err(|e| e.to_string())?;
    Ok((config, action))
}

/// What `qdisc=`, `target=`, `interval=` and `queue=` said.
#[derive(Default)]
struct QdiscKeys {
    qdisc: Option<QdiscConfig>,
    /// The item that set `target` or `interval`, for the error if no CoDel follows.
    codel_item: Option<String>,
    target: Option<Duration>,
    interval: Option<Duration>,
    queue_given: bool,
}

impl QdiscKeys {
    /// The discipline for `config`, or why the keys do not fit together.
    fn finish(self, config: &LinkConfig) -> Result<Option<QdiscConfig>, String> {
        let Some(qdisc) = self.qdisc else {
            if let Some(item) = self.codel_item {
                return Err(format!("{item}: needs qdisc=codel or qdisc=fq_codel"));
            }
            return Ok(None);
        };
        let mut qdisc = qdisc.with_mtu(config.mtu);
        if self.queue_given {
            qdisc = qdisc.with_limit(Limit::Bytes(config.queue_limit_bytes));
        }
        if let Some(target) = self.target {
            qdisc = qdisc.with_target(target);
        }
        if let Some(interval) = self.interval {
            qdisc = qdisc.with_interval(interval);
        }
        Ok(Some(qdisc))
    }
}

/// How long a reordered frame is held back when `reorder=P` gives no delay.
const DEFAULT_REORDER_DELAY: Duration = Duration::from_millis(10);

/// `shape=VALUE` or `police=VALUE` on `config`.
fn set_contract(config: &mut LinkConfig, key: &str, value: &str) -> Result<(), String> {
    let police = key == "police";
    let (contract, action) = parse_contract(value, police)?;
    if police {
        config.police = Some(Policer { contract, action });
    } else {
        config.shape = Some(contract);
    }
    Ok(())
}

/// Parse an `--impair` specification: comma-separated `key=value` pairs.
pub fn parse_impair(spec: &str) -> Result<LinkConfig, String> {
    let mut config = LinkConfig::default();
    let mut reorder_delay = None;
    let mut qdisc = QdiscKeys::default();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!(
                "`{item}` is not key=value (keys: {KEYS}; e.g. delay=20ms,loss=1%)"
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        let bad = |e: String| format!("{key}={value}: {e}");
        match key {
            "delay" => config.delay = units::parse_duration(value).map_err(bad)?,
            "rate" => config.rate_bps = units::parse_rate(value).map_err(bad)?,
            "loss" => config.loss = units::parse_probability(value).map_err(bad)?,
            "duplicate" => config.duplicate = units::parse_probability(value).map_err(bad)?,
            "corrupt" => config.corrupt = units::parse_probability(value).map_err(bad)?,
            "queue" => {
                let bytes = units::parse_bytes(value).map_err(bad)?;
                config.queue_limit_bytes =
                    usize::try_from(bytes).map_err(|_| bad("too large".into()))?;
                qdisc.queue_given = true;
            }
            "qdisc" => {
                // `fifo` is the link's own drop-tail queue (the same behaviour, computed
                // without holding frames).
                qdisc.qdisc = match value
                    .parse()
                    .map_err(|e: impnet_core::qdisc::UnknownQdisc| bad(e.to_string()))?
                {
                    QdiscConfig::Fifo(_) => None,
                    other => Some(other),
                };
            }
            "target" | "interval" => {
                let d = units::parse_duration(value).map_err(bad)?;
                if d == Duration::ZERO {
                    return Err(bad("must be more than 0".into()));
                }
                if key == "target" {
                    qdisc.target = Some(d);
                } else {
                    qdisc.interval = Some(d);
                }
                qdisc.codel_item.get_or_insert_with(|| item.to_string());
            }
            "mtu" => {
                let bytes = units::parse_bytes(value).map_err(bad)?;
                config.mtu = usize::try_from(bytes).map_err(|_| bad("too large".into()))?;
            }
            "reorder" => {
                let (p, delay) = match value.split_once('/') {
                    Some((p, d)) => (p, Some(units::parse_duration(d).map_err(bad)?)),
                    None => (value, None),
                };
                config.reorder = units::parse_probability(p).map_err(bad)?;
                if delay.is_some() {
                    reorder_delay = delay;
                }
            }
            "shape" | "police" => set_contract(&mut config, key, value).map_err(bad)?,
            "reorder-delay" | "reorder_delay" => {
                reorder_delay = Some(units::parse_duration(value).map_err(bad)?);
            }
            other => {
                return Err(format!(
                    "unknown impairment `{other}` in `{item}` (keys: {KEYS})"
                ));
            }
        }
    }
    config.qdisc = qdisc.finish(&config)?;
    if config.reorder > 0.0 {
        config.reorder_delay = reorder_delay.unwrap_or(DEFAULT_REORDER_DELAY);
    }
    config
        .validate()
        .map_err(|e| format!("bad impairment `{spec}`: {e}"))?;
    Ok(config)
}

/// One line describing an impairment, for the startup message.
pub fn describe(config: &LinkConfig) -> String {
    let mut parts = vec![format!("delay {}", config.delay)];
    if config.rate_bps > 0 {
        parts.push(format!("rate {:.3} Mbit/s", config.rate_bps as f64 / 1e6));
    }
    for (name, p) in [
        ("loss", config.loss),
        ("reorder", config.reorder),
        ("duplicate", config.duplicate),
        ("corrupt", config.corrupt),
    ] {
        if p > 0.0 {
            parts.push(format!("{name} {}%", p * 100.0));
        }
    }
    let contract = |c: GcraConfig| {
        format!(
            "peak {:.3} Mbit/s, sustained {:.3} Mbit/s, burst {} bytes",
            c.peak_bps as f64 / 1e6,
            c.sustained_bps as f64 / 1e6,
            c.burst_bytes
        )
    };
    if let Some(shape) = config.shape {
        parts.push(format!("shaped to {}", contract(shape)));
    }
    if let Some(police) = config.police {
        let action = match police.action {
            PoliceAction::Drop => "dropping",
            PoliceAction::Mark => "marking",
        };
        parts.push(format!(
            "policed ({action}) at {}",
            contract(police.contract)
        ));
    }
    match config.qdisc {
        Some(qdisc) => parts.push(format!("qdisc {qdisc}")),
        None => parts.push(format!("queue {} bytes", config.queue_limit_bytes)),
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_impairment_parses() {
        let c = parse_impair("delay=20ms,loss=1%,rate=100mbit").unwrap();
        assert_eq!(c.delay, Duration::from_millis(20));
        assert_eq!(c.loss, 0.01);
        assert_eq!(c.rate_bps, 100_000_000);
        let c = parse_impair("queue=64K, reorder=5%/3ms ,duplicate=0.1,corrupt=0").unwrap();
        assert_eq!(c.queue_limit_bytes, 64 * 1024);
        assert_eq!(c.reorder, 0.05);
        assert_eq!(c.reorder_delay, Duration::from_millis(3));
        assert_eq!(c.duplicate, 0.1);
        let c = parse_impair("reorder=1%").unwrap();
        assert_eq!(c.reorder_delay, DEFAULT_REORDER_DELAY);
        assert_eq!(parse_impair("").unwrap(), LinkConfig::default());
    }

    #[test]
    fn errors_name_the_bad_key_or_value() {
        let e = parse_impair("delay=20ms,jitter=5ms").unwrap_err();
        assert!(e.contains("jitter") && e.contains("keys:"), "{e}");
        let e = parse_impair("loss=150%").unwrap_err();
        assert!(e.contains("loss=150%"), "{e}");
        let e = parse_impair("delay=fast").unwrap_err();
        assert!(e.contains("delay=fast"), "{e}");
        let e = parse_impair("rate=100furlongs").unwrap_err();
        assert!(e.contains("rate=") && e.contains("furlongs"), "{e}");
        let e = parse_impair("delay").unwrap_err();
        assert!(e.contains("key=value"), "{e}");
        assert!(parse_impair("mtu=0").unwrap_err().contains("MTU"));
    }

    #[test]
    fn shape_and_police_contracts() {
        let c = parse_impair("shape=622mbit/100mbit/64K,police=622mbit/100mbit/64K/mark").unwrap();
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
        let c = parse_impair("police=10mbit/1mbit/3000").unwrap();
        assert_eq!(c.police.map(|p| p.action), Some(PoliceAction::Drop));
        let e = parse_impair("police=10mbit/1mbit").unwrap_err();
        assert!(
            e.contains("police=10mbit/1mbit") && e.contains("PEAK/SUSTAINED/BURST"),
            "{e}"
        );
        let e = parse_impair("shape=10mbit/1mbit/3000/mark").unwrap_err();
        assert!(
            e.contains("shape=") && e.contains("PEAK/SUSTAINED/BURST"),
            "{e}"
        );
        let e = parse_impair("police=10mbit/1mbit/3000/tag").unwrap_err();
        assert!(e.contains("tag") && e.contains("mark"), "{e}");
        let e = parse_impair("police=1mbit/10mbit/3000").unwrap_err();
        assert!(e.contains("below the sustained"), "{e}");
        let e = parse_impair("shape=10mbit/fast/3000").unwrap_err();
        assert!(e.contains("sustained") && e.contains("fast"), "{e}");
        let e = parse_impair("shape=10mbit/1mbit/0").unwrap_err();
        assert!(e.contains("burst"), "{e}");
    }

    #[test]
    fn qdisc_keys() {
        use impnet_core::qdisc::{CodelConfig, FqCodelConfig};
        assert_eq!(parse_impair("qdisc=fifo").unwrap(), LinkConfig::default());
        let c = parse_impair("qdisc=codel,target=2ms,interval=50ms").unwrap();
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
        let c = parse_impair("queue=64K,qdisc=fq_codel").unwrap();
        let Some(QdiscConfig::FqCodel(fq)) = c.qdisc else {
            panic!("{:?}", c.qdisc)
        };
        assert_eq!(fq.limit, Limit::Bytes(64 * 1024));
        assert_eq!(fq.quantum, FqCodelConfig::default().quantum);
        let e = parse_impair("qdisc=red").unwrap_err();
        assert!(e.contains("qdisc=red") && e.contains("fq_codel"), "{e}");
        let e = parse_impair("target=5ms").unwrap_err();
        assert!(e.contains("target=5ms") && e.contains("qdisc=codel"), "{e}");
        let e = parse_impair("qdisc=codel,interval=soon").unwrap_err();
        assert!(e.contains("interval=soon"), "{e}");
        let e = parse_impair("qdisc=codel,target=0ms").unwrap_err();
        assert!(e.contains("target=0ms"), "{e}");
    }
}
