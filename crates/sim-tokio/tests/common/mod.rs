//! What the application-pair tests (tests/tonic.rs, tests/quinn.rs) share: a server and
//! a client joined by one link, and a capture of that link to compare runs byte for byte.
//! tests/hyper.rs uses the pair. The HTTP servers' responses carry a date from the
//! virtual clock ([`dated`]).

#![allow(dead_code)]

use std::cell::Cell;
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use impnet_phy::LinkConfig;
use impnet_sim_tokio::{HostId, LinkId, Sim};

/// A link of `rate_bps` (0: unlimited), `delay_ms` each way and `loss`.
pub fn path(rate_bps: u64, delay_ms: u64, loss: f64) -> LinkConfig {
    LinkConfig {
        rate_bps,
        loss,
        ..LinkConfig::default().with_delay(impnet_core::Duration::from_millis(delay_ms))
    }
}

/// A server ("server", 10.0.0.1) and a client ("client", 10.0.0.2) joined by one link
/// of `config`.
pub fn pair(seed: u64, config: LinkConfig) -> (Sim, HostId, HostId, LinkId) {
    let mut sim = Sim::new(seed);
    let server = sim.host("server");
    let client = sim.host("client");
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

/// The payload of request `seq`: `len` bytes that no shifted copy of itself matches.
pub fn payload(seq: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seq).rotate_left(7) as u8)
        .collect()
}

/// The sizes of the requests `requests` sends, one after another on one connection:
/// about 280 kB in all.
pub const SIZES: [usize; 7] = [0, 1, 100, 1_000, 16_384, 65_536, 200_000];

/// `requests` (which returns the start number of the server that answered each request
/// of [`SIZES`]) on the client of a 10 Mbit/s, 5 ms pair whose server `install` set up
/// (it returns the server's start count): every answer comes from the server's first
/// start, and the bytes took the virtual time they must.
pub fn assert_exchange<F>(install: impl FnOnce(&mut Sim, HostId) -> Rc<Cell<u32>>, requests: F)
where
    F: Future<Output = Vec<u32>> + 'static,
{
    let (mut sim, server, client, _) = pair(1, path(10_000_000, 5, 0.0));
    let starts = install(&mut sim, server);
    let task = sim.spawn(client, requests);
    let generations = sim
        .run_until_complete(task, Duration::from_secs(60))
        .unwrap();
    assert_eq!(generations, vec![1; SIZES.len()]);
    assert_eq!(starts.get(), 1);
    // About 280 kB each way at 10 Mbit/s: at least 220 ms of virtual time.
    assert!(sim.now().as_millis() >= 220, "virtual time {}", sim.now());
}

/// One run over a lossy link (5 Mbit/s, 10 ms, 2% loss): `install` gives the server its
/// software, `client` runs on the client; returns the capture of the link.
pub fn lossy_capture<F>(
    seed: u64,
    name: &str,
    install: impl FnOnce(&mut Sim, HostId),
    client: F,
) -> Vec<u8>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let (mut sim, server, client_host, link) = pair(seed, path(5_000_000, 10, 0.02));
    let pcap = capture(&mut sim, link, name);
    install(&mut sim, server);
    let task = sim.spawn(client_host, client);
    sim.run_until_complete(task, Duration::from_secs(120))
        .unwrap();
    take_capture(&mut sim, &pcap)
}

/// `run(seed)` twice gives the same capture, byte for byte, and `run(seed + 1)` another.
pub fn assert_replays(seed: u64, run: impl Fn(u64) -> Vec<u8>) {
    let first = run(seed);
    assert!(first.len() > 400_000, "a capture of {} bytes", first.len());
    assert!(
        first == run(seed),
        "seed {seed} did not replay byte for byte"
    );
    assert!(
        first != run(seed + 1),
        "seeds {seed} and {} gave the same capture",
        seed + 1
    );
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

/// `response` with a `Date` header from the virtual clock (a fixed date plus the
/// virtual time). hyper stamps every response that has none with the wall clock's
/// second, so two runs of one seed would differ whenever they straddled one.
pub fn dated<B>(mut response: hyper::Response<B>) -> hyper::Response<B> {
    let now = SystemTime::UNIX_EPOCH
        + Duration::from_secs(1_800_000_000)
        + impnet_sim_tokio::elapsed().unwrap_or_default();
    let date = hyper::header::HeaderValue::from_str(&httpdate::fmt_http_date(now))
        .expect("an HTTP date is a valid header value");
    response.headers_mut().insert(hyper::header::DATE, date);
    response
}
