//! `Sim::test`: a simulation test in a `#[test]`; a failing one names its seed and the
//! command that replays it.

use std::panic;

use impnet_sim_tokio::Sim;

/// The seed `Sim::test(seed, ..)` runs, `IMPNET_SIM_SEED` set or not.
fn expected(seed: u64) -> u64 {
    std::env::var("IMPNET_SIM_SEED")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(seed)
}

#[test]
fn the_test_gets_a_simulation_of_its_seed() {
    let ran = std::cell::Cell::new(0);
    Sim::test(5, |sim| {
        assert_eq!(sim.seed(), expected(5) + ran.get());
        assert_eq!(sim.now(), impnet_core::Instant::ZERO);
        ran.set(ran.get() + 1);
    });
    assert!(ran.get() >= 1);
}

#[test]
fn a_failing_run_names_its_seed_and_its_replay() {
    let outcome = panic::catch_unwind(|| {
        Sim::test(42, |sim| {
            sim.run_for(std::time::Duration::from_millis(1500)).unwrap();
            panic!("the service lost a write");
        });
    });
    let payload = outcome.expect_err("the failing test passed");
    let message = payload.downcast_ref::<String>().expect("a message");
    let seed = expected(42);
    assert!(
        message.starts_with("the service lost a write\n"),
        "{message}"
    );
    assert!(
        message.contains(&format!("seed {seed} failed at virtual time 1.5")),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "IMPNET_SIM_SEED={seed} cargo test a_failing_run_names_its_seed_and_its_replay"
        )),
        "{message}"
    );
}

#[impnet_sim_tokio::test(seed = 11)]
fn the_attribute_runs_the_body_on_its_seed(sim: &mut Sim) {
    assert_eq!(sim.seed(), expected(11));
    let host = sim.host("a");
    let task = sim.spawn(host, async {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        impnet_sim_tokio::elapsed()
    });
    let slept = sim
        .run_until_complete(task, std::time::Duration::from_secs(1))
        .unwrap();
    assert_eq!(slept, Some(std::time::Duration::from_millis(250)));
}

#[impnet_sim_tokio::test]
fn the_attribute_without_a_seed_takes_one_from_the_name(sim: &mut Sim) {
    // FNV-1a of the test's name, unless IMPNET_SIM_SEED chose one.
    let name = "the_attribute_without_a_seed_takes_one_from_the_name";
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    assert_eq!(sim.seed(), expected(hash));
}

#[impnet_sim_tokio::test(seed = 3)]
#[should_panic(expected = "failed at virtual time 0.000000s; replay it with: IMPNET_SIM_SEED=")]
fn a_failing_attribute_test_names_its_replay(_sim: &mut Sim) {
    panic!("the client saw a stale read");
}
