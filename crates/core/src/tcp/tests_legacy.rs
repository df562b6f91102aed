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

/// A 1975 retransmission process waking every 500 ms over a 500 ms fixed timeout.
fn process_1975() -> TcpConfig {
    let mut config = config();
    crate::tcp::legacy::LegacyProfile::Exerciser1975 {
        timeout: Duration::from_millis(500),
    }
    .apply(&mut config);
    config
}

#[test]
fn a_retransmission_process_times_each_letter_from_its_own_send() {
    // The process wakes every 100 ms here.
    let (mut tcp, c, snd) = established_with(TcpConfig {
        retransmit_process: Some(Duration::from_millis(100)),
        ..process_1975()
    });
    // Letter 1 at 20 ms, letter 2 at 300 ms; letter 1 is acknowledged at 400 ms.
    tcp.send(ms(20), c, &[1u8; 10]).unwrap();
    assert_eq!(lengths_at(&mut tcp, 20), [10]);
    tcp.send(ms(300), c, &[2u8; 10]).unwrap();
    assert_eq!(lengths_at(&mut tcp, 300), [10]);
    send!(tcp, 400, peer_ack(snd, 10, 64000));
    // RFC 6298 would restart the timer at the ACK (due at 900 ms), a timer for the
    // whole queue would not (due at 520 ms, found at 600); here letter 2's own timeout
    // is due at 800 ms.
    let t = fire_rto(&mut tcp);
    assert_eq!(t, 800);
    assert_eq!(lengths_at(&mut tcp, t), [10]);
    // The letter sent again is timed from then.
    assert_eq!(fire_rto(&mut tcp), 1300);
}

#[test]
fn a_delayed_ack_waits_for_the_process_to_wake() {
    let (mut tcp, _c, snd) = established_with(TcpConfig {
        delayed_ack: Duration::from_millis(40),
        ..process_1975()
    });
    // A letter from the peer at 20 ms: no ACK at 60 ms (the delayed-ACK timer's
    // 40 ms), one at the process's wakeup at 500 ms.
    send!(
        tcp,
        20,
        Repr {
            seq: RISS + 1,
            ack: snd,
            payload: &[5u8; 10],
            ..SEND_TEMPL
        }
    );
    recv_nothing!(tcp, 60);
    assert_eq!(tcp.poll_timeout(), Some(ms(500)));
}
