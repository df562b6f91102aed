//! The command line's quantities (`100M`, `100mbit`, `20ms`, `1%`) parse exactly as in
//! scenario files and `--impair`: one parser, in `impnet_phy::units`.

pub use impnet_phy::units::{parse_bytes, parse_duration, parse_probability, parse_rate};
