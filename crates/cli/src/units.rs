//! The command line's quantities (`100M`, `100mbit`, `20ms`, `1%`) parse exactly as in
//! scenario files: one parser, in `impnet_sim::units`.

pub use impnet_sim::units::{parse_bytes, parse_duration, parse_probability, parse_rate};
