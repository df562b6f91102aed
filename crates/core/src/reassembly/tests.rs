//! Reassembler unit tests: fragments built by hand, no stack around them.

use alloc::vec::Vec;
use core::net::Ipv4Addr;

use super::*;

const HEADER: [u8; 20] = [
    0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
];

fn fragment<'a>(ident: u16, offset: usize, more_frags: bool, payload: &'a [u8]) -> Fragment<'a> {
    Fragment {
        src: Ipv4Addr::new(10, 0, 0, 1).into(),
        dst: Ipv4Addr::new(10, 0, 0, 2).into(),
        protocol: 17,
        ident: u32::from(ident),
        strict: false,
        offset,
        more_frags,
        header: &HEADER,
        payload,
    }
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 253) as u8).collect()
}

#[test]
fn pieces_in_any_order_with_overlaps_reassemble() {
    let bytes = data(3000);
    let t = Instant::from_nanos(0);
    let mut stats = ReassemblyStats::default();
    let mut r = Reassembler::new(ReassemblyConfig::default());
    // Overlapping but identical: 1000..2008 and 1504..2504.
    assert!(
        r.handle_fragment(t, &fragment(1, 1504, true, &bytes[1504..2504]), &mut stats)
            .is_err()
    );
    assert!(
        r.handle_fragment(t, &fragment(1, 2504, false, &bytes[2504..]), &mut stats)
            .is_err()
    );
    assert!(
        r.handle_fragment(t, &fragment(1, 1000, true, &bytes[1000..2008]), &mut stats)
            .is_err()
    );
    let whole = r
        .handle_fragment(t, &fragment(1, 0, true, &bytes[..1000]), &mut stats)
        .unwrap();
    assert_eq!(whole.payload, bytes);
    assert_eq!(whole.header, HEADER);
    assert_eq!(r.accounted(), 0);
    assert_eq!(r.datagrams(), 0);
    assert_eq!(stats.reassembled, 1);
}

#[test]
fn conflicting_bytes_drop_the_datagram() {
    let bytes = data(2000);
    let mut other = bytes.clone();
    other[1200] ^= 1;
    let t = Instant::from_nanos(0);
    let mut stats = ReassemblyStats::default();
    let mut r = Reassembler::new(ReassemblyConfig::default());
    let _ = r.handle_fragment(t, &fragment(1, 0, true, &bytes[..1600]), &mut stats);
    assert_eq!(
        r.handle_fragment(t, &fragment(1, 1008, false, &other[1008..]), &mut stats)
            .unwrap_err(),
        Outcome::Dropped
    );
    assert_eq!(
        (stats.overlap_conflict, r.accounted(), r.datagrams()),
        (1, 0, 0)
    );
}

#[test]
fn contradicting_ends_and_bad_fragments_are_rejected() {
    let bytes = data(2000);
    let t = Instant::from_nanos(0);
    let mut stats = ReassemblyStats::default();
    let mut r = Reassembler::new(ReassemblyConfig::default());
    // Non-final fragment not a multiple of 8.
    assert!(
        r.handle_fragment(t, &fragment(1, 0, true, &bytes[..1001]), &mut stats)
            .is_err()
    );
    // Beyond 65535 bytes.
    assert!(
        r.handle_fragment(t, &fragment(1, 65528, false, &bytes[..100]), &mut stats)
            .is_err()
    );
    assert_eq!(stats.bad_fragment, 2);
    // Two different ends.
    let _ = r.handle_fragment(t, &fragment(2, 800, false, &bytes[800..1000]), &mut stats);
    let _ = r.handle_fragment(t, &fragment(2, 800, false, &bytes[800..1200]), &mut stats);
    assert_eq!((stats.bad_fragment, r.datagrams()), (3, 0));
}

#[test]
fn memory_pressure_drops_the_oldest_datagram() {
    let bytes = data(1480);
    let config = ReassemblyConfig {
        timeout: Duration::from_secs(30),
        max_bytes: 4 * (1480 + DATAGRAM_OVERHEAD + PIECE_OVERHEAD),
    };
    let mut stats = ReassemblyStats::default();
    let mut r = Reassembler::new(config.clone());
    for ident in 0..10u16 {
        let t = Instant::from_nanos(u64::from(ident));
        let _ = r.handle_fragment(t, &fragment(ident, 0, true, &bytes), &mut stats);
        assert!(r.accounted() <= config.max_bytes);
    }
    assert_eq!(r.datagrams(), 4);
    assert_eq!(stats.memory, 6);
    // The survivors are the newest: ident 9 completes.
    let t = Instant::from_nanos(10);
    assert!(
        r.handle_fragment(t, &fragment(9, 1480, false, &bytes[..8]), &mut stats)
            .is_ok()
    );
    assert!(
        r.handle_fragment(t, &fragment(0, 1480, false, &bytes[..8]), &mut stats)
            .is_err()
    );
}

#[test]
fn timeout_frees_everything_and_quotes_fragment_zero() {
    let bytes = data(100);
    let config = ReassemblyConfig::default();
    let mut stats = ReassemblyStats::default();
    let mut r = Reassembler::new(config.clone());
    let t = Instant::from_nanos(5);
    let _ = r.handle_fragment(t, &fragment(1, 0, true, &bytes[..64]), &mut stats);
    let _ = r.handle_fragment(t, &fragment(2, 64, true, &bytes[..16]), &mut stats);
    assert_eq!(r.poll_timeout(), Some(t + config.timeout));
    let mut expired = Vec::new();
    r.handle_timeout(
        t + config.timeout - Duration::from_nanos(1),
        &mut stats,
        &mut expired,
    );
    assert!(expired.is_empty());
    r.handle_timeout(t + config.timeout, &mut stats, &mut expired);
    assert_eq!((stats.timeout, r.accounted(), r.datagrams()), (2, 0, 0));
    let quotes: Vec<_> = expired
        .iter()
        .map(|e| e.quote.as_ref().map(Vec::len))
        .collect();
    assert_eq!(quotes, [Some(28), None]);
    assert_eq!(r.poll_timeout(), None);
}
