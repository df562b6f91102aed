//! What the application-pair tests (tests/tonic.rs, tests/quinn.rs) share: a server and
//! a client joined by one link, and a capture of that link to compare runs byte for byte.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use impnet_phy::LinkConfig;
use impnet_sim_tokio::{HostId, LinkId, Sim};

/// A server ("server", 10.0.0.1) and a client ("client", 10.0.0.2) joined by one link
/// of `delay_ms` each way, `rate_bps` and `loss`.
pub fn pair(seed: u64, rate_bps: u64, delay_ms: u64, loss: f64) -> (Sim, HostId, HostId, LinkId) {
    let mut sim = Sim::new(seed);
    let server = sim.host("server");
    let client = sim.host("client");
    let config = LinkConfig {
        rate_bps,
        loss,
        ..LinkConfig::default().with_delay(impnet_core::Duration::from_millis(delay_ms))
    };
    let link = sim
        .link(
            server,
            "10.0.0.1/24".parse().unwrap(),
            client,
            "10.0.0.2/24".parse().unwrap(),
            config,
        )
        .unwrap();
    (sim, server, client, link)
}

/// A pcap file of `link` for this run, in the temporary directory (named by the test,
/// the seed, the process and a count, so no two runs share one).
pub fn capture(sim: &mut Sim, link: LinkId, name: &str) -> PathBuf {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "impnet-sim-tokio-{name}-{}-{}-{}.pcap",
        sim.seed(),
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    sim.net().capture(link, &path).unwrap();
    path
}

/// The bytes of the capture at `path` (flushed first); the file is removed.
pub fn take_capture(sim: &mut Sim, path: &PathBuf) -> Vec<u8> {
    sim.net().flush_captures().unwrap();
    let bytes = std::fs::read(path).unwrap();
    let _ = std::fs::remove_file(path);
    bytes
}
