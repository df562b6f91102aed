//! tokio's clock on a simulated host is the simulator's: timers fire at their virtual
//! instant, and a host's tasks see the time the network does.

use std::time::Duration;

use impnet_phy::LinkConfig;
use impnet_sim_tokio::Sim;

#[test]
fn a_timer_fires_at_its_virtual_instant() {
    let mut sim = Sim::new(1);
    let host = sim.host("a");
    let task = sim.spawn(host, async {
        let start = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let slept = start.elapsed();
        tokio::time::sleep(Duration::from_secs(60)).await;
        (slept, start.elapsed())
    });
    let (slept, total) = sim
        .run_until_complete(task, Duration::from_secs(120))
        .unwrap();
    assert_eq!(slept, Duration::from_millis(1500));
    assert_eq!(total, Duration::from_millis(61_500));
    assert_eq!(sim.now().as_millis(), 61_500);
}

#[test]
fn hosts_added_later_keep_their_own_clock_grid() {
    let mut sim = Sim::new(2);
    let early = sim.host("early");
    sim.run_for(Duration::from_micros(2_500)).unwrap();
    let late = sim.host("late");
    let other = sim.host("other");
    sim.link(
        late,
        "10.0.0.1/24".parse().unwrap(),
        other,
        "10.0.0.2/24".parse().unwrap(),
        LinkConfig::default(),
    )
    .unwrap();
    let started = sim.now();
    let task = sim.spawn(late, async {
        tokio::time::sleep(Duration::from_millis(10)).await
    });
    let _ = early;
    sim.run_until_complete(task, Duration::from_secs(1))
        .unwrap();
    assert_eq!((sim.now() - started).as_millis(), 10);
    assert_eq!((sim.now() - started).as_nanos() % 1_000_000, 0);
}
