//! Hand-built traces: one case per classification, read back from the report.

use std::net::{Ipv4Addr, SocketAddrV4};

use impnet_wire::tcp::Flags;

use super::*;

const C: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40000);
const S: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 80);
const MS: u64 = 1_000_000;
const CISN: u32 = 1000;
const SISN: u32 = 5000;

/// A trace from the client's side: `at` in milliseconds.
struct Trace {
    a: Analyzer,
}

fn seg(seq: u32, ack: u32, flags: Flags, len: u32, window: u16) -> Segment {
    Segment {
        seq,
        ack,
        flags,
        window,
        len,
        mss: None,
        timestamps: false,
    }
}

impl Trace {
    /// The handshake at 0, 10 and 10 ms (RTT 10 ms), MSS 1000 both ways.
    fn new() -> Trace {
        let mut a = Analyzer::new();
        let mut syn = seg(CISN, 0, Flags::SYN, 0, 65535);
        syn.mss = Some(1000);
        a.segment(MS, C, S, &syn);
        let mut syn_ack = seg(SISN, CISN + 1, Flags::SYN | Flags::ACK, 0, 65535);
        syn_ack.mss = Some(1000);
        a.segment(11 * MS, S, C, &syn_ack);
        a.segment(
            11 * MS,
            C,
            S,
            &seg(CISN + 1, SISN + 1, Flags::ACK, 0, 65535),
        );
        Trace { a }
    }

    /// The client sends `len` bytes at byte offset `off` at `at` ms.
    fn data(&mut self, at: u64, off: u32, len: u32) {
        let s = seg(CISN + 1 + off, SISN + 1, Flags::ACK, len, 65535);
        self.a.segment(at * MS, C, S, &s);
    }

    /// The server acknowledges up to byte offset `off` at `at` ms, advertising `window`.
    fn ack(&mut self, at: u64, off: u32, window: u16) {
        let s = seg(SISN + 1, CISN + 1 + off, Flags::ACK, 0, window);
        self.a.segment(at * MS, S, C, &s);
    }

    fn report(self) -> Connection {
        let mut analysis = self.a.finish();
        assert_eq!(analysis.connections.len(), 1);
        analysis.connections.remove(0)
    }
}

#[test]
fn clean_transfer_has_no_retransmissions() {
    let mut t = Trace::new();
    t.data(20, 0, 1000);
    t.data(20, 1000, 1000);
    t.data(21, 2000, 500);
    t.ack(30, 2000, 65535);
    t.ack(31, 2500, 65535);
    let c = t.report();
    assert_eq!(c.client, C.to_string());
    assert_eq!(c.retransmissions, 0);
    let d = &c.directions[0];
    assert_eq!((d.data_segments, d.bytes, d.unique_bytes), (3, 2500, 2500));
    assert_eq!(d.mss, 1000);
    assert_eq!(
        d.segments_below_mss, 0,
        "the last, short segment is excluded"
    );
    assert_eq!(c.pure_acks, 3, "the handshake's ACK and the server's two");
    assert_eq!(d.rtt_ms.samples, 3, "the SYN and one per advancing ACK");
    assert!((d.rtt_ms.min - 10.0).abs() < 1e-9);
    // 2500 bytes from 20 to 21 ms.
    assert!((d.goodput_bps - 20_000_000.0).abs() < 1.0);
}

#[test]
fn retransmission_after_a_timeout() {
    let mut t = Trace::new();
    t.data(20, 0, 1000);
    t.data(20, 1000, 1000);
    t.ack(30, 1000, 65535);
    t.data(300, 1000, 1000); // the second segment again, 280 ms later
    t.ack(310, 2000, 65535);
    let c = t.report();
    assert_eq!(c.retransmissions, 1);
    assert_eq!((c.fast_retransmissions, c.spurious_retransmissions), (0, 0));
    assert_eq!(c.rtos, 1);
    assert!((c.longest_stall_ms - 280.0).abs() < 1e-9);
    let d = &c.directions[0];
    assert_eq!(d.unique_bytes, 2000);
    // Karn: the ACK at 310 ms covers a segment sent twice, so no sample from it.
    assert_eq!(d.rtt_ms.samples, 2);
    assert!(d.rtt_ms.max < 11.0);
}

#[test]
fn fast_retransmission_after_duplicate_acks() {
    let mut t = Trace::new();
    for i in 0..5 {
        t.data(20, i * 1000, 1000);
    }
    t.ack(30, 1000, 65535); // the second segment was lost
    t.ack(30, 1000, 65535);
    t.ack(31, 1000, 65535);
    t.ack(31, 1000, 65535);
    t.data(31, 1000, 1000);
    t.ack(41, 5000, 65535);
    let c = t.report();
    assert_eq!(c.directions[1].duplicate_acks, 3);
    assert_eq!(
        (c.retransmissions, c.fast_retransmissions, c.rtos),
        (1, 1, 0)
    );
}

#[test]
fn spurious_retransmission_of_acknowledged_data() {
    let mut t = Trace::new();
    t.data(20, 0, 1000);
    t.ack(30, 1000, 65535);
    t.data(250, 0, 1000); // sent again although acknowledged
    let c = t.report();
    assert_eq!((c.retransmissions, c.spurious_retransmissions), (1, 1));
}

#[test]
fn out_of_order_is_not_a_retransmission() {
    let mut t = Trace::new();
    t.data(20, 1000, 1000);
    t.data(21, 0, 1000); // 1 ms later, below the first RTT (10 ms): reordered
    t.ack(31, 2000, 65535);
    let c = t.report();
    assert_eq!(c.retransmissions, 0);
    assert_eq!(c.directions[0].out_of_order, 1);
    // The same, 50 ms later: a retransmission.
    let mut t = Trace::new();
    t.data(20, 1000, 1000);
    t.data(70, 0, 1000);
    assert_eq!(t.report().retransmissions, 1);
}

#[test]
fn keep_alive_is_not_a_retransmission() {
    let mut t = Trace::new();
    t.data(20, 0, 1000);
    t.ack(30, 1000, 65535);
    // A keep-alive: one byte (or none) at SND.NXT - 1, long after.
    t.data(7_200_030, 999, 1);
    t.data(7_275_030, 999, 0);
    let c = t.report();
    assert_eq!(c.retransmissions, 0);
    assert_eq!(c.directions[0].keep_alives, 2);
}

#[test]
fn zero_window_and_its_probe() {
    let mut t = Trace::new();
    t.data(20, 0, 1000);
    t.ack(30, 1000, 0); // the receiver's buffer is full
    t.data(230, 1000, 1); // a zero-window probe
    t.ack(240, 1000, 0);
    t.ack(500, 1000, 65535); // the window opens
    t.data(501, 1000, 1000); // the probe's byte again: not a retransmission (>1 byte at nextseq-1)
    t.ack(511, 2000, 0);
    let c = t.report();
    let server = &c.directions[1];
    assert_eq!(server.zero_window_events, 2);
    assert_eq!(server.zero_window_segments, 3);
    assert_eq!(c.directions[0].zero_window_probes, 1);
    assert_eq!(c.retransmissions, 0);
}

#[test]
fn small_segments_are_counted_except_the_last() {
    let mut t = Trace::new();
    t.data(20, 0, 100);
    t.data(30, 100, 1000);
    t.data(40, 1100, 200);
    t.data(50, 1300, 300);
    let c = t.report();
    assert_eq!(c.segments_below_mss, 2, "100 and 200, not the final 300");
}

#[test]
fn a_syn_with_a_new_isn_opens_a_new_connection() {
    let mut t = Trace::new();
    t.data(20, 0, 10);
    let syn = seg(CISN + 777_777, 0, Flags::SYN, 0, 65535);
    t.a.segment(100 * MS, C, S, &syn);
    t.a.segment(150 * MS, C, S, &syn); // the SYN sent again
    let analysis = t.a.finish();
    assert_eq!(analysis.connections.len(), 2);
    assert_eq!(analysis.connections[1].retransmissions, 1);
}

#[test]
fn damaged_captures_give_errors_not_panics() {
    assert!(analyze_bytes(b"").is_err());
    assert!(analyze_bytes(b"not a capture at all").is_err());
    // A pcap header and a record header that claims more than the file holds.
    let mut file = Vec::new();
    file.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    file.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0]);
    file.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 100, 0, 0, 0, 1, 2]);
    let analysis = analyze_bytes(&file).unwrap();
    let error = analysis.read_error.unwrap();
    assert!(error.contains("byte 24"), "{error}");
    // Every prefix of a small valid capture, and garbage of every length.
    for n in 0..file.len() {
        let _ = analyze_bytes(&file[..n]);
        let junk: Vec<u8> = (0..n).map(|i| (i * 37 + n) as u8).collect();
        let _ = analyze_bytes(&junk);
    }
}
