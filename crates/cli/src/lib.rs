//! The library half of the `imp` command: `imp bench`'s workloads and their drivers,
//! shared by the command (`src/main.rs`) and the criterion benches (`benches/`), so
//! both measure the same code.

pub mod bench;
