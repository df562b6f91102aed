//! `scenario_parse`: arbitrary text as a scenario file. `Scenario::parse` must return a
//! scenario or an error, never panic, and an error must say something.

use impnet_sim::scenario::Scenario;

/// Run one input.
pub fn run(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = Scenario::parse(&text, "fuzz.toml") {
        assert!(!e.to_string().is_empty(), "an empty error message");
    }
}
