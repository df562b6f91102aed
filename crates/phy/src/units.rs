//! The quantities of the link model as people write them: sizes (`100M`), rates
//! (`100mbit`, `9600`), durations (`20ms`) and probabilities (`1%`). One parser for
//! the command line (`--impair`, `--rate`, ...) and scenario files; every error is a
//! [`QuantityError`] that names the text it could not use and says what was expected.

use std::fmt;

use impnet_core::Duration;

/// Which quantity a text was meant to be, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// A byte count ([`parse_bytes`]).
    Size,
    /// Bits per second ([`parse_rate`]).
    Rate,
    /// A duration ([`parse_duration`]).
    Duration,
    /// A probability ([`parse_probability`]).
    Probability,
}

/// Why a text is not the quantity asked for. `text` is the text as given.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantityError {
    /// It starts with a minus sign.
    Negative {
        /// The text (trimmed).
        text: String,
    },
    /// It does not start with a number.
    NotANumber {
        /// The text (trimmed).
        text: String,
    },
    /// Its number is not finite.
    NotFinite {
        /// The text (trimmed).
        text: String,
    },
    /// Its unit is not one the quantity takes.
    UnknownUnit {
        /// What was being parsed.
        quantity: Quantity,
        /// The unit found.
        unit: String,
        /// The text.
        text: String,
    },
    /// The value is outside what the quantity allows (a size or duration too large, a
    /// rate outside 1 bit/s to 10 Tbit/s, a probability outside 0 to 100%).
    OutOfRange {
        /// What was being parsed.
        quantity: Quantity,
        /// The text.
        text: String,
    },
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantityError::Negative { text } => {
                write!(f, "`{text}` is negative; give a value of 0 or more")
            }
            QuantityError::NotANumber { text } => {
                write!(f, "`{text}` does not start with a number")
            }
            QuantityError::NotFinite { text } => write!(f, "`{text}` is not a finite number"),
            QuantityError::UnknownUnit {
                quantity,
                unit,
                text,
            } => {
                let (noun, hint) = match quantity {
                    Quantity::Size => ("size unit", "use k, M or G"),
                    Quantity::Rate => ("rate unit", "use bit, kbit, mbit or gbit"),
                    Quantity::Duration => ("time unit", "use ns, us, ms or s"),
                    Quantity::Probability => ("unit", "use a fraction or %"),
                };
                write!(f, "unknown {noun} `{unit}` in `{text}` ({hint})")
            }
            QuantityError::OutOfRange { quantity, text } => match quantity {
                Quantity::Size => write!(f, "size `{text}` is too large"),
                Quantity::Rate => write!(f, "rate `{text}` is out of range (1 bit/s to 10 Tbit/s)"),
                Quantity::Duration => write!(f, "duration `{text}` is too long"),
                Quantity::Probability => {
                    write!(f, "`{text}` is not a probability between 0 and 100%")
                }
            },
        }
    }
}

impl std::error::Error for QuantityError {}

/// The leading number of `text` (trimmed) and the unit after it (trimmed): `20ms` is
/// `(20.0, "ms")`. Refuses a negative, missing or infinite number.
pub fn split_number(text: &str) -> Result<(f64, &str), QuantityError> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(QuantityError::Negative { text: text.into() });
    }
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    let value: f64 = number
        .parse()
        .map_err(|_| QuantityError::NotANumber { text: text.into() })?;
    if !value.is_finite() {
        return Err(QuantityError::NotFinite { text: text.into() });
    }
    Ok((value, unit.trim()))
}

fn unknown_unit(quantity: Quantity, unit: &str, text: &str) -> QuantityError {
    QuantityError::UnknownUnit {
        quantity,
        unit: unit.into(),
        text: text.into(),
    }
}

fn out_of_range(quantity: Quantity, text: &str) -> QuantityError {
    QuantityError::OutOfRange {
        quantity,
        text: text.into(),
    }
}

/// A byte count: plain, or with a binary suffix k/K (1024), M (2^20), G (2^30),
/// optionally followed by `B` or `iB`.
pub fn parse_bytes(text: &str) -> Result<u64, QuantityError> {
    let (value, unit) = split_number(text)?;
    let unit = unit.trim_end_matches("iB").trim_end_matches('B');
    let scale = match unit {
        "" => 1u64,
        "k" | "K" => 1 << 10,
        "m" | "M" => 1 << 20,
        "g" | "G" => 1 << 30,
        other => return Err(unknown_unit(Quantity::Size, other, text)),
    };
    let bytes = value * scale as f64;
    if bytes > u64::MAX as f64 / 2.0 {
        return Err(out_of_range(Quantity::Size, text));
    }
    Ok(bytes.round() as u64)
}

/// A link rate in bits per second: `9600`, `50kbit`, `100mbit`, `10gbit` (decimal
/// multipliers, as tc(8) uses), also `bps`/`kbps`/`mbps`/`gbps` for the same; from
/// 1 bit/s to 10 Tbit/s.
pub fn parse_rate(text: &str) -> Result<u64, QuantityError> {
    let (value, unit) = split_number(text)?;
    let scale: f64 = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bps" | "b" => 1.0,
        "k" | "kbit" | "kbps" => 1e3,
        "m" | "mbit" | "mbps" => 1e6,
        "g" | "gbit" | "gbps" => 1e9,
        other => return Err(unknown_unit(Quantity::Rate, other, text)),
    };
    let bps = value * scale;
    if !(1.0..=1e13).contains(&bps) {
        return Err(out_of_range(Quantity::Rate, text));
    }
    Ok(bps.round() as u64)
}

/// A duration: `20ms`, `1.5s`, `500us`, `100ns`; a bare number is milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, QuantityError> {
    let (value, unit) = split_number(text)?;
    let nanos_per: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "" | "ms" => 1e6,
        "s" => 1e9,
        other => return Err(unknown_unit(Quantity::Duration, other, text)),
    };
    let nanos = value * nanos_per;
    if nanos > 1e18 {
        return Err(out_of_range(Quantity::Duration, text));
    }
    Ok(Duration::from_nanos(nanos.round() as u64))
}

/// A probability: `1%`, or a fraction `0.01`; must lie in 0..=1.
pub fn parse_probability(text: &str) -> Result<f64, QuantityError> {
    let (value, unit) = split_number(text)?;
    let p = match unit {
        "%" => value / 100.0,
        "" => value,
        other => return Err(unknown_unit(Quantity::Probability, other, text)),
    };
    if !(0.0..=1.0).contains(&p) {
        return Err(out_of_range(Quantity::Probability, text));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_rates_durations_and_probabilities_parse() {
        assert_eq!(parse_bytes("100M"), Ok(100 << 20));
        assert_eq!(parse_bytes("8K"), Ok(8192));
        assert_eq!(parse_bytes("1500"), Ok(1500));
        assert_eq!(parse_bytes("4MiB"), Ok(4 << 20));
        assert_eq!(parse_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("100M"), Ok(100_000_000));
        assert_eq!(parse_rate("9600"), Ok(9600));
        assert_eq!(parse_rate("10gbit"), Ok(10_000_000_000));
        assert_eq!(parse_duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("20"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_probability("1%"), Ok(0.01));
        assert_eq!(parse_probability("0.1"), Ok(0.1));
    }

    #[test]
    fn errors_are_typed_and_their_messages_name_the_input() {
        let message = |e: QuantityError| e.to_string();
        assert_eq!(
            message(parse_bytes("lots").unwrap_err()),
            "`lots` does not start with a number"
        );
        assert_eq!(
            parse_bytes("3X"),
            Err(QuantityError::UnknownUnit {
                quantity: Quantity::Size,
                unit: "X".into(),
                text: "3X".into()
            })
        );
        assert_eq!(
            message(parse_bytes("3X").unwrap_err()),
            "unknown size unit `X` in `3X` (use k, M or G)"
        );
        assert_eq!(
            message(parse_rate("0bit").unwrap_err()),
            "rate `0bit` is out of range (1 bit/s to 10 Tbit/s)"
        );
        assert_eq!(
            message(parse_rate("5furlongs").unwrap_err()),
            "unknown rate unit `furlongs` in `5furlongs` (use bit, kbit, mbit or gbit)"
        );
        assert_eq!(
            message(parse_duration("3 weeks").unwrap_err()),
            "unknown time unit `weeks` in `3 weeks` (use ns, us, ms or s)"
        );
        assert_eq!(
            message(parse_probability("150%").unwrap_err()),
            "`150%` is not a probability between 0 and 100%"
        );
        assert_eq!(
            message(parse_probability(" -1").unwrap_err()),
            "`-1` is negative; give a value of 0 or more"
        );
        assert_eq!(
            message(parse_probability("1x").unwrap_err()),
            "unknown unit `x` in `1x` (use a fraction or %)"
        );
        assert_eq!(
            message(parse_bytes("99999999999G").unwrap_err()),
            "size `99999999999G` is too large"
        );
        assert_eq!(
            message(parse_duration("1e30").unwrap_err()),
            "unknown time unit `e30` in `1e30` (use ns, us, ms or s)"
        );
        assert_eq!(
            message(parse_duration("99999999999s").unwrap_err()),
            "duration `99999999999s` is too long"
        );
    }

    proptest! {
        #[test]
        fn no_text_panics(text in "\\PC{0,24}") {
            let _ = parse_bytes(&text);
            let _ = parse_rate(&text);
            let _ = parse_duration(&text);
            let _ = parse_probability(&text);
        }

        #[test]
        fn whole_numbers_with_units_scale(n in 1u64..1_000_000) {
            prop_assert_eq!(parse_bytes(&format!("{n}K")), Ok(n << 10));
            prop_assert_eq!(parse_rate(&format!("{n}kbit")), Ok(n * 1000));
            prop_assert_eq!(parse_duration(&format!("{n}us")), Ok(Duration::from_micros(n)));
            prop_assert_eq!(parse_probability(&format!("{}%", n % 101)), Ok((n % 101) as f64 / 100.0));
        }
    }
}
