//! [`Sim::test`]: a simulation test in a `#[test]`, its seed printed when it fails.

use std::panic::{self, AssertUnwindSafe};

use crate::Sim;

/// Replays one seed: `IMPNET_SIM_SEED=7 cargo test ...`.
const SEED_VAR: &str = "IMPNET_SIM_SEED";
/// Runs more seeds from the test's own: `IMPNET_SIM_SEEDS=100 cargo test ...`.
const SEEDS_VAR: &str = "IMPNET_SIM_SEEDS";

impl Sim {
    /// Run `test` on a new simulation seeded with `seed`, in a `#[test]`:
    ///
    /// ```
    /// use impnet_sim_tokio::{Sim, net::{UdpSocket, lookup}};
    /// use std::time::Duration;
    ///
    /// // The body of a `#[test] fn`:
    /// Sim::test(7, |sim| {
    ///     let server = sim.host("server");
    ///     let client = sim.host("client");
    ///     let link = impnet_phy::LinkConfig::default();
    ///     sim.link(server, "10.0.0.1/24".parse().unwrap(), client, "10.0.0.2/24".parse().unwrap(), link)
    ///         .unwrap();
    ///     sim.software(server, || async {
    ///         let socket = UdpSocket::bind("0.0.0.0:7").await.unwrap();
    ///         let mut buf = [0; 1500];
    ///         while let Ok((n, from)) = socket.recv_from(&mut buf).await {
    ///             let _ = socket.send_to(&buf[..n], from).await;
    ///         }
    ///     });
    ///     let task = sim.spawn(client, async {
    ///         let socket = UdpSocket::bind("0.0.0.0:0").await.unwrap();
    ///         socket.send_to(b"ping", (lookup("server").unwrap(), 7)).await.unwrap();
    ///         let mut buf = [0; 4];
    ///         socket.recv_from(&mut buf).await.unwrap();
    ///         buf
    ///     });
    ///     assert_eq!(&sim.run_until_complete(task, Duration::from_secs(5)).unwrap(), b"ping");
    /// });
    /// ```
    ///
    /// If the test panics, the panic is raised again with the seed, the virtual time
    /// and the command that replays the run appended to its message. The environment
    /// can change the seeds: `IMPNET_SIM_SEED=N` runs seed N alone (the replay),
    /// `IMPNET_SIM_SEEDS=K` runs the K seeds `seed`, `seed + 1`, ... one after
    /// another, stopping at the first that fails (a search for a failing seed).
    pub fn test(seed: u64, test: impl Fn(&mut Sim)) {
        for seed in seeds(seed) {
            let mut sim = Sim::new(seed);
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| test(&mut sim)));
            if let Err(payload) = outcome {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned());
                let Some(message) = message else {
                    eprintln!("{}", replay(seed, &sim));
                    panic::resume_unwind(payload);
                };
                panic!("{message}\n{}", replay(seed, &sim));
            }
        }
    }
}

/// The seeds to run: `IMPNET_SIM_SEED` alone, or `IMPNET_SIM_SEEDS` of them from `seed`.
fn seeds(seed: u64) -> std::ops::Range<u64> {
    let var = |name| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    match (var(SEED_VAR), var(SEEDS_VAR)) {
        (Some(one), _) => one..one.saturating_add(1),
        (None, Some(count)) => seed..seed.saturating_add(count.max(1)),
        (None, None) => seed..seed.saturating_add(1),
    }
}

/// What a failed run prints: its seed and how to replay it.
fn replay(seed: u64, sim: &Sim) -> String {
    let thread = std::thread::current();
    // libtest names each test's thread after the test.
    let name = thread
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("<test name>");
    let at = sim.world.try_borrow().map(|w| w.net.now().to_string());
    let at = at.unwrap_or_else(|_| "?".to_string());
    format!(
        "impnet-sim-tokio: the run with seed {seed} failed at virtual time {at}; \
         replay it with: {SEED_VAR}={seed} cargo test {name} -- --exact"
    )
}
