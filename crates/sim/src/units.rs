//! Parsing of the quantities of scenario files and the command line: sizes (`100M`), rates (`100mbit`),
//! durations (`20ms`) and probabilities (`1%`). Every error says what was expected.

use impnet_core::Duration;

fn split_number(text: &str) -> Result<(f64, &str), String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(format!("`{text}` is negative; give a value of 0 or more"));
    }
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a number"))?;
    if !value.is_finite() {
        return Err(format!("`{text}` is not a finite number"));
    }
    Ok((value, unit.trim()))
}

/// A byte count: plain, or with a binary suffix k/K (1024), M (2^20), G (2^30),
/// optionally followed by `B` or `iB`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let (value, unit) = split_number(text)?;
    let unit = unit.trim_end_matches("iB").trim_end_matches('B');
    let scale = match unit {
        "" => 1u64,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{text}` (use k, M or G)"
            ));
        }
    };
    let bytes = value * scale as f64;
    if bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("size `{text}` is too large"));
    }
    Ok(bytes.round() as u64)
}

/// A link rate in bits per second: `9600`, `50kbit`, `100mbit`, `10gbit` (decimal
/// multipliers, as tc(8) uses), also `bps`/`kbps`/`mbps`/`gbps` for the same.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let (value, unit) = split_number(text)?;
    let scale: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bps" | "b" => 1.0,
        "k" | "kbit" | "kbps" => 1e3,
        "m" | "mbit" | "mbps" => 1e6,
        "g" | "gbit" | "gbps" => 1e9,
        other => {
            return Err(format!(
                "unknown rate unit `{other}` in `{text}` (use bit, kbit, mbit or gbit)"
            ));
        }
    };
    let bps = value * scale;
    if !(1.0..=1e13).contains(&bps) {
        return Err(format!(
            "rate `{text}` is out of range (1 bit/s to 10 Tbit/s)"
        ));
    }
    Ok(bps.round() as u64)
}

/// A duration: `20ms`, `1.5s`, `500us`, `100ns`; a bare number is milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (value, unit) = split_number(text)?;
    let nanos_per: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "" | "ms" => 1e6,
        "s" => 1e9,
        other => {
            return Err(format!(
                "unknown time unit `{other}` in `{text}` (use ns, us, ms or s)"
            ));
        }
    };
    let nanos = value * nanos_per;
    if nanos > 1e18 {
        return Err(format!("duration `{text}` is too long"));
    }
    Ok(Duration::from_nanos(nanos.round() as u64))
}

/// A small time as picoseconds (a per-byte or per-packet CPU cost): `911us`, `1.5us`,
/// `0.05ns`, `2ms`; a bare number must be 0.
pub fn parse_picos(text: &str) -> Result<u64, String> {
    let (value, unit) = split_number(text)?;
    let picos_per: f64 = match unit {
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        "" if value == 0.0 => 1.0,
        other => {
            return Err(format!(
                "unknown time unit `{other}` in `{text}` (use ps, ns, us, ms or s)"
            ));
        }
    };
    let picos = value * picos_per;
    if !(0.0..=1e18).contains(&picos) {
        return Err(format!("cost `{text}` is out of range"));
    }
    Ok(picos.round() as u64)
}

/// A probability: `1%`, or a fraction `0.01`; must lie in 0..=1.
pub fn parse_probability(text: &str) -> Result<f64, String> {
    let (value, unit) = split_number(text)?;
    let p = match unit {
        "%" => value / 100.0,
        "" => value,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}` (use a fraction or %)"
            ));
        }
    };
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("`{text}` is not a probability between 0 and 100%"));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_rates_durations_and_probabilities_parse() {
        assert_eq!(parse_bytes("100M"), Ok(100 << 20));
        assert_eq!(parse_bytes("8K"), Ok(8192));
        assert_eq!(parse_bytes("1500"), Ok(1500));
        assert_eq!(parse_bytes("4MiB"), Ok(4 << 20));
        assert_eq!(parse_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("9600"), Ok(9600));
        assert_eq!(parse_rate("10gbit"), Ok(10_000_000_000));
        assert_eq!(parse_duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_probability("1%"), Ok(0.01));
        assert_eq!(parse_probability("0.1"), Ok(0.1));
    }

    #[test]
    fn bad_quantities_are_errors_that_name_the_input() {
        assert!(parse_bytes("lots").unwrap_err().contains("lots"));
        assert!(parse_bytes("3X").unwrap_err().contains("X"));
        assert!(parse_rate("0bit").is_err());
        assert!(parse_rate("5furlongs").unwrap_err().contains("furlongs"));
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_probability("150%").is_err());
        assert!(parse_probability("-1").is_err());
    }
}
