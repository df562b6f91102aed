//! Segment-level tests of the switches old TCPs are modelled with (`legacy.rs`): a
//! segment per write, no congestion control (go back N over the whole window), Karn's
//! rule off. A child of `tests`, whose helpers and macros it uses.

use super::push::peer_ack;
use super::*;
use crate::tcp::cc::CcAlgorithm;

/// Payload lengths of every segment `tcp` sends at `t` ms.
fn lengths_at(tcp: &mut Tcp, t: u64) -> Vec<usize> {
    core::iter::from_fn(|| poll(tcp, t))
        .map(|b| parse(&b).payload.len())
        .collect()
}

/// Fire the retransmission timer; returns when it fired, in ms.
fn fire_rto(tcp: &mut Tcp) -> u64 {
    let at = tcp.poll_timeout().unwrap();
    tcp.handle_timeout(at);
    at.as_millis()
}

#[test]
fn a_segment_per_write_keeps_writes_apart() {
    // Three 100-byte writes while the first is unacknowledged: Nagle off, they leave
    // at once either way, but queued behind a full window they would share a segment.
    for per_write in [false, true] {
        let (mut tcp, c, snd) = established_with(TcpConfig {
            segment_per_write: per_write,
            nodelay: true,
            ..config()
        });
        // A zero window holds everything back while the writes queue.
        send!(tcp, 15, peer_ack(snd, 0, 0));
        for _ in 0..3 {
            tcp.send(ms(20), c, &[7u8; 100]).unwrap();
        }
        recv_nothing!(tcp, 20);
        send!(tcp, 30, peer_ack(snd, 0, 64000));
        let sent = lengths_at(&mut tcp, 30);
        if per_write {
            assert_eq!(sent, [100, 100, 100]);
        } else {
            assert_eq!(sent, [300]);
        }
    }
}

#[test]
fn without_congestion_control_a_timeout_resends_the_whole_window() {
    for cc in [CcAlgorithm::NewReno, CcAlgorithm::None] {
        let (mut tcp, c, _snd) = established_with(TcpConfig {
            congestion: cc,
            initial_window: 2,
            nodelay: true,
            ..config()
        });
        tcp.send(ms(20), c, &[1u8; 4000]).unwrap();
        let first = lengths_at(&mut tcp, 20);
        let t = fire_rto(&mut tcp);
        let again = lengths_at(&mut tcp, t);
        match cc {
            // RFC 5681: two segments of initial window, one after the timeout.
            CcAlgorithm::NewReno => {
                assert_eq!(first, [1000, 1000]);
                assert_eq!(again, [1000]);
            }
            // The peer's window alone: everything at once, and again after it.
            _ => {
                assert_eq!(first, [1000, 1000, 1000, 1000]);
                assert_eq!(again, [1000, 1000, 1000, 1000]);
            }
        }
    }
}

#[test]
fn without_karn_a_retransmissions_ack_samples_from_the_first_send() {
    let mut srtts = Vec::new();
    for karn in [true, false] {
        let (mut tcp, c, snd) = established_with(TcpConfig { karn, ..config() });
        let before = tcp.info(c).unwrap().srtt;
        tcp.send(ms(20), c, &[1u8; 100]).unwrap();
        assert_eq!(lengths_at(&mut tcp, 20), [100]);
        let t = fire_rto(&mut tcp);
        assert_eq!(lengths_at(&mut tcp, t), [100]);
        // The ACK comes 10 ms after the retransmission.
        send!(tcp, t + 10, peer_ack(snd, 100, 64000));
        let after = tcp.info(c).unwrap().srtt;
        if karn {
            assert_eq!(
                after, before,
                "Karn: no sample from a retransmitted segment"
            );
        }
        srtts.push((t, after));
    }
    // Without Karn the sample runs from the first send (20 ms) to the ACK.
    let (t, srtt) = srtts[1];
    // (At least an eighth of it goes into SRTT: RFC 6298's alpha.)
    let eighth = Duration::from_millis((t + 10 - 20) / 8);
    assert!(srtt.is_some_and(|s| s >= eighth), "{srtt:?}");
    assert_ne!(srtts[0].1, srtt);
}
