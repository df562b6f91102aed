//! `--impair delay=20ms,loss=1%,rate=100mbit`: the link model applied in real time to
//! the frames of a device command, parsed into a [`LinkConfig`] by its `FromStr`
//! (`impnet_phy::link::spec`, which lists the keys; scenario files share its parts).
//! Every error names the key and value it could not use.

use impnet_phy::LinkConfig;
use impnet_phy::link::{GcraConfig, PoliceAction};

/// Parse an `--impair` specification: comma-separated `key=value` pairs.
pub fn parse_impair(spec: &str) -> Result<LinkConfig, String> {
    spec.parse()
        .map_err(|e: impnet_phy::link::spec::LinkSpecError| e.to_string())
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
    fn parse_impair_is_the_phy_parser_with_its_messages() {
        let c = parse_impair("delay=20ms,loss=1%,rate=100mbit").unwrap();
        assert_eq!(c.rate_bps, 100_000_000);
        assert_eq!(
            parse_impair("loss=150%").unwrap_err(),
            "loss=150%: `150%` is not a probability between 0 and 100%"
        );
    }
}
