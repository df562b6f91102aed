//! Hand-built traces: one case per classification, read back from the report.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use impnet_wire::tcp::Flags;

use super::*;

const C: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40000));
const S: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 80));
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

/// An IPv6 packet (raw IP) from `src` to `dst` whose payload is `ext` (extension
/// headers, the first of type `first`) and then a TCP header with `len` data bytes.
fn tcp6(
    first: u8,
    ext: &[u8],
    (src, dst): (u8, u8),
    seq: u32,
    flags: Flags,
    len: usize,
) -> Vec<u8> {
    let mut tcp = vec![0u8; 20 + len];
    tcp[0..2].copy_from_slice(&(40000u16 + u16::from(src)).to_be_bytes());
    tcp[2..4].copy_from_slice(&(40000u16 + u16::from(dst)).to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = flags.0;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    let mut p = vec![0x60, 0, 0, 0];
    p.extend_from_slice(&((ext.len() + tcp.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[first, 64]);
    for host in [src, dst] {
        let mut addr = [0u8; 16];
        addr[0] = 0xfd;
        addr[15] = host;
        p.extend_from_slice(&addr);
    }
    p.extend_from_slice(ext);
    p.extend_from_slice(&tcp);
    p
}

/// Connections over IPv6 are read as over IPv4: through extension headers, with
/// fragments counted apart, and a retransmission over IPv6 is one.
#[test]
fn ipv6_connections_are_judged_through_extension_headers() {
    use impnet_phy::pcap::LINKTYPE_RAW;
    const TCP: u8 = 6;
    let mut a = Analyzer::new();
    let pkt = |ext: &[u8], first, dir, seq, flags, len| {
        let ends = if dir == 0 { (1, 2) } else { (2, 1) };
        tcp6(first, ext, ends, seq, flags, len)
    };
    a.frame(0, LINKTYPE_RAW, &pkt(&[], TCP, 0, 100, Flags::SYN, 0));
    a.frame(
        MS,
        LINKTYPE_RAW,
        &pkt(&[], TCP, 1, 900, Flags::SYN | Flags::ACK, 0),
    );
    // Data behind a hop-by-hop header (PadN) and a destination options header.
    let hop_dst = [60, 0, 1, 4, 0, 0, 0, 0, TCP, 0, 1, 4, 0, 0, 0, 0];
    a.frame(
        2 * MS,
        LINKTYPE_RAW,
        &pkt(&hop_dst, 0, 0, 101, Flags::ACK, 500),
    );
    // The same data again, much later: a retransmission.
    a.frame(
        900 * MS,
        LINKTYPE_RAW,
        &pkt(&[], TCP, 0, 101, Flags::ACK, 500),
    );
    // A first fragment (more follow) and an atomic fragment (offset 0, no more).
    let first = [TCP, 0, 0, 1, 0, 0, 0, 7];
    a.frame(
        901 * MS,
        LINKTYPE_RAW,
        &pkt(&first, 44, 0, 601, Flags::ACK, 100),
    );
    let atomic = [TCP, 0, 0, 0, 0, 0, 0, 8];
    a.frame(
        902 * MS,
        LINKTYPE_RAW,
        &pkt(&atomic, 44, 0, 601, Flags::ACK, 100),
    );
    // A truncated IPv6 header.
    a.frame(
        903 * MS,
        LINKTYPE_RAW,
        &pkt(&[], TCP, 0, 701, Flags::ACK, 0)[..30],
    );
    let report = a.finish();
    assert_eq!(report.fragments, 1);
    assert_eq!(report.malformed, 1);
    assert_eq!(report.tcp_segments, 5);
    assert_eq!(report.connections.len(), 1);
    let conn = &report.connections[0];
    assert_eq!(conn.client, "[fd00::1]:40001");
    assert_eq!(conn.server, "[fd00::2]:40002");
    assert_eq!(conn.retransmissions, 1);
    assert_eq!(conn.directions[0].unique_bytes, 600);
}

/// The server sends `len` bytes at its byte offset `off`, acknowledging the client's
/// byte offset `ack`, at `at` ms.
fn server_data(t: &mut Trace, at: u64, off: u32, ack: u32, len: u32) {
    let s = seg(SISN + 1 + off, CISN + 1 + ack, Flags::ACK, len, 65535);
    t.a.segment(at * MS, S, C, &s);
}

#[test]
fn an_ack_sent_alone_before_a_reply_is_uncombined_and_judged() {
    // Three request/reply exchanges: the server acknowledges each request alone and
    // replies 5 ms later with the same acknowledgment (the VM's way), twice; the
    // third reply carries its ACK (a delayed-ACK TCP's way).
    let mut t = Trace::new();
    for (i, lone) in [(0u32, true), (1, true), (2, false)] {
        let at = 20 + 100 * u64::from(i);
        t.data(at, 10 * i, 10);
        if lone {
            t.ack(at + 10, 10 * (i + 1), 65535);
        }
        server_data(&mut t, at + 15, 20 * i, 10 * (i + 1), 20);
    }
    let c = t.report();
    let server = &c.directions[1];
    assert_eq!((server.uncombined_acks, server.combined_acks), (2, 1));
    assert!(server.verdict.uncombined_acks, "{server:?}");
    assert_eq!(
        server.verdict.failings(),
        ["failure to combine ACKs with bidirectional data"]
    );
    // Short messages answered by the peer are not segments cut short.
    let client = &c.directions[0];
    assert_eq!(client.segments_below_mss, 0, "{client:?}");
    assert!(client.verdict.failings().is_empty(), "{client:?}");
}

#[test]
fn a_bulk_sender_of_small_segments_and_long_timeouts_is_judged() {
    let mut t = Trace::new();
    for i in 0..8 {
        t.data(20 + i, 100 * i as u32, 100);
    }
    t.ack(40, 800, 65535);
    t.data(50, 800, 100);
    // 25 s of silence, then the same segment again.
    t.data(25_050, 800, 100);
    t.ack(25_060, 900, 65535);
    t.data(25_070, 900, 100);
    t.ack(25_080, 1000, 65535);
    let c = t.report();
    let d = &c.directions[0];
    assert!(d.longest_timeout_ms >= 25_000.0, "{d:?}");
    assert!(d.verdict.small_segments && d.verdict.long_timeouts, "{d:?}");
    assert!(!d.verdict.too_many_retransmissions, "{d:?}");
}

#[test]
fn a_sender_that_gives_up_after_its_transmission_timeout_is_reported() {
    // Go back N over two segments, the timer doubled from 1 s, no ACK after 30 ms;
    // then a RST (the user timeout) or silence.
    let trace = |end: Option<(u64, bool)>| {
        let mut t = Trace::new();
        t.data(20, 0, 1000);
        t.data(20, 1000, 1000);
        t.ack(30, 1000, 65535);
        let mut at = 1_020;
        for backoff in 0..5 {
            t.data(at, 1000, 1000);
            at += 1000 << backoff;
        }
        match end {
            Some((when, true)) => {
                let s = seg(CISN + 2001, SISN + 1, Flags::RST | Flags::ACK, 0, 65535);
                t.a.segment(when * MS, C, S, &s);
            }
            // The peer's frame, acknowledging nothing new.
            Some((when, false)) => t.ack(when, 1000, 65535),
            None => {}
        }
        t.report()
    };
    let reset = trace(Some((60_000, true)));
    let gave_up = reset.directions[0]
        .gave_up
        .expect("a RST after the retries");
    assert_eq!(gave_up.retransmissions, 5);
    assert!(gave_up.reset);
    // From the last ACK that advanced (30 ms) to the RST.
    assert!((gave_up.seconds - 59.97).abs() < 1e-9, "{gave_up:?}");
    assert!(
        gave_up
            .describe()
            .contains("5 retransmissions of the same data")
    );
    // The capture ends at the last retransmission: still trying, nothing to report.
    assert_eq!(trace(None).directions[0].gave_up, None);
    // Silence for the rest of a capture that goes on (the peer's frame at 200 s).
    let silent = trace(Some((200_000, false)));
    let gave_up = silent.directions[0]
        .gave_up
        .expect("silence after the retries");
    assert!(!gave_up.reset);
    assert!(
        (gave_up.seconds - (16.02 - 0.03)).abs() < 1e-9,
        "{gave_up:?}"
    );
    // A retransmission that gets through is progress.
    let mut t = Trace::new();
    t.data(20, 0, 1000);
    for at in [1_020, 2_020, 4_020] {
        t.data(at, 0, 1000);
    }
    t.ack(4_030, 1000, 65535);
    t.ack(200_000, 1000, 65535);
    assert_eq!(t.report().directions[0].gave_up, None);
}
