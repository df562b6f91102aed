//! Parsing of the quantities of scenario files: sizes (`100M`), rates (`100mbit`),
//! durations (`20ms`) and probabilities (`1%`) are the link model's, parsed in
//! [`impnet_phy::units`] for the command line too; CPU costs (`911us`) are the
//! simulator's own. Every error says what was expected.

pub use impnet_phy::units::{
    QuantityError, parse_bytes, parse_duration, parse_probability, parse_rate,
};

/// A small time as picoseconds (a per-byte or per-packet CPU cost): `911us`, `1.5us`,
/// `0.05ns`, `2ms`; a bare number must be 0.
pub fn parse_picos(text: &str) -> Result<u64, String> {
    let (value, unit) = impnet_phy::units::split_number(text).map_err(|e| e.to_string())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_parse_and_bad_ones_name_the_input() {
        assert_eq!(parse_picos("911us"), Ok(911_000_000));
        assert_eq!(parse_picos("0.05ns"), Ok(50));
        assert_eq!(parse_picos("0"), Ok(0));
        assert_eq!(
            parse_picos("5").unwrap_err(),
            "unknown time unit `` in `5` (use ps, ns, us, ms or s)"
        );
        assert_eq!(
            parse_picos("-1us").unwrap_err(),
            "`-1us` is negative; give a value of 0 or more"
        );
    }
}
