//! `sim_impair`: a short bulk transfer in the simulator over a link with impairments
//! the input chooses (loss, bursty loss, reorder, duplicate, corrupt, rate, delay,
//! queue, MTU), with TCP options and congestion control chosen too.
//!
//! Check: the transfer either delivers exactly the bytes written (same length, same
//! hash) or ends with an error; it never panics and never delivers wrong bytes.

use impnet_core::Duration;
use impnet_core::tcp::TcpConfig;
use impnet_core::tcp::cc::CcAlgorithm;
use impnet_phy::LinkConfig;
use impnet_phy::link::GilbertElliott;
use impnet_sim::bulk::{BulkConfig, run_bulk};

use crate::Input;

/// A probability from a byte, at most `max`.
fn prob(b: u8, max: f64) -> f64 {
    f64::from(b) / 255.0 * max
}

fn link(input: &mut Input<'_>) -> LinkConfig {
    let (b0, b1, b2, b3, b4, b5, b6, b7) = (
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
        input.u8(),
    );
    LinkConfig {
        rate_bps: [0, 1_000_000, 10_000_000, 100_000_000][usize::from(b0 & 3)],
        delay: Duration::from_millis(u64::from(b0 >> 2) * 2),
        queue_limit_bytes: [1 << 20, 16 * 1024, 4 * 1024, 100 * 1024][usize::from(b7 & 3)],
        loss: prob(b1, 0.3),
        reorder: prob(b2, 0.3),
        reorder_delay: Duration::from_millis(1 + u64::from(b3 & 31)),
        duplicate: prob(b4, 0.2),
        corrupt: prob(b5, 0.1),
        mtu: [1514, 1514, 1280, 600, 9014, 576, 1500, 1400][usize::from(b3 >> 5)],
        burst_loss: (b6 & 1 != 0).then_some(GilbertElliott {
            good_to_bad: prob(b6, 0.1),
            bad_to_good: 0.3,
            loss_good: 0.0,
            loss_bad: 0.5,
        }),
        ..LinkConfig::default()
    }
}

fn tcp(b: u8) -> TcpConfig {
    TcpConfig {
        sack: b & 1 == 0,
        timestamps: b & 2 == 0,
        window_scaling: b & 4 == 0,
        nodelay: b & 8 != 0,
        congestion: [
            CcAlgorithm::NewReno,
            CcAlgorithm::Cubic,
            CcAlgorithm::Vegas,
            CcAlgorithm::Bbr1,
        ][usize::from(b >> 4 & 3)],
        ..TcpConfig::default()
    }
}

/// Run one input.
pub fn run(data: &[u8]) {
    let mut input = Input::new(data);
    let link = link(&mut input);
    let (size, record, tcp_bits, seed) = (input.u8(), input.u16(), input.u8(), input.u16());
    let bytes = (u64::from(size) + 1) * 256;
    let mut config = BulkConfig::new(bytes, link, u64::from(seed));
    config.record = usize::from(record % 16384) + 1;
    config.sender_tcp = tcp(tcp_bits);
    config.receiver_tcp = tcp(tcp_bits);
    config.time_limit = Duration::from_secs(120);
    if let Ok(result) = run_bulk(&config) {
        assert!(result.hash_ok, "wrong bytes delivered: {result:?}");
        assert_eq!(result.bytes, bytes, "{result:?}");
    }
}
