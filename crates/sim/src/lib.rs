//! The deterministic simulator: hosts made of impnet-core stacks, joined by links that
//! apply the link model, all on one virtual clock.
//!
//! Nothing here reads a real clock or draws unseeded randomness: the same seed and the
//! same calls give the same frames at the same virtual instants, so every failure can be
//! replayed from the seed it prints.
//!
//! Call order: build with [`Sim::add_host`] and [`Sim::connect`], configure the stacks
//! through [`Sim::host_mut`], then drive with [`Sim::step`], [`Sim::run_until_idle`] or
//! [`Sim::run`], which calls your application code after every event.
#![warn(missing_docs)]

pub mod alloc_count;
pub mod analyze;
pub mod bulk;
pub mod cpu;
pub mod experiment;
pub mod forge;
pub mod plot;
pub mod scenario;
pub mod seed_tables;
mod sim;
pub mod stream;
pub mod test_plan;
pub mod trace;
pub mod units;

pub use sim::{
    Flow, FrameEvent, FrameKind, FrameObserver, HostId, LinkId, RunSummary, Sim, SimError,
    secret_for_seed,
};
