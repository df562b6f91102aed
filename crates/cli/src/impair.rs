//! `--impair delay=20ms,loss=1%,rate=100mbit`: the link model applied in real time to
//! the frames of a device command, parsed into a [`LinkConfig`].
//!
//! Keys: `delay`, `rate`, `loss`, `queue`, `reorder`, `reorder-delay`, `duplicate`,
//! `corrupt`, `mtu`. `reorder` takes `P` or `P/DELAY` (held-back frames wait DELAY more,
//! default 10 ms). Every error names the key and value it could not use.

use impnet_core::Duration;
use impnet_phy::LinkConfig;

use crate::units;

/// What `--impair` accepts, for messages.
const KEYS: &str = "delay, rate, loss, queue, reorder, reorder-delay, duplicate, corrupt, mtu";

/// How long a reordered frame is held back when `reorder=P` gives no delay.
const DEFAULT_REORDER_DELAY: Duration = Duration::from_millis(10);

/// Parse an `--impair` specification: comma-separated `key=value` pairs.
pub fn parse_impair(spec: &str) -> Result<LinkConfig, String> {
    let mut config = LinkConfig::default();
    let mut reorder_delay = None;
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
    parts.push(format!("queue {} bytes", config.queue_limit_bytes));
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
}
