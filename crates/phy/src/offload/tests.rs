use super::*;
use crate::segmentation::tests::{Spec, build, refs, train};
use crate::testutil::MockDevice;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn both(inner: MockDevice) -> Offload<MockDevice> {
    Offload::new(inner, Framing::Ethernet, 1500)
        .gro(true)
        .gso(true)
}

#[test]
fn gro_hands_out_merged_trains_then_the_rest() {
    let mut inner = MockDevice::default();
    let frames = train(&Spec::new(0), 1460, 6, 1000);
    for frame in &frames {
        inner.push_rx(frame);
    }
    let arp = [0xffu8; 42];
    inner.push_rx(&arp);
    let mut device = both(inner);
    assert!(device.mtu() >= 14 + 65535);
    let mut buf = vec![0; device.mtu()];
    let len = device.recv(at(1), &mut buf).unwrap().expect("merged");
    assert_eq!(len, 54 + 5 * 1460 + 1000);
    assert_eq!(device.poll_at(), Some(at(1)), "the ARP frame waits here");
    let expected = segmentation::coalesce(Framing::Ethernet, &refs(&frames), Checksums::Verify);
    assert_eq!(&buf[..len], &expected[0][..]);
    assert_eq!(device.recv(at(1), &mut buf).unwrap(), Some(42));
    assert_eq!(device.recv(at(1), &mut buf).unwrap(), None);
    assert_eq!(device.poll_at(), None);
    let stats = device.stats();
    assert_eq!(
        (stats.rx_frames_in, stats.rx_frames_out, stats.rx_merged),
        (7, 2, 1)
    );
}

#[test]
fn a_small_buffer_is_told_and_the_frame_kept() {
    let mut inner = MockDevice::default();
    for frame in train(&Spec::new(0), 1000, 3, 1000) {
        inner.push_rx(&frame);
    }
    let mut device = both(inner);
    let mut small = vec![0; 1514];
    assert_eq!(
        device.recv(at(1), &mut small),
        Err(DeviceError::BufferTooSmall {
            len: 3054,
            capacity: 1514
        })
    );
    let mut buf = vec![0; 4000];
    assert_eq!(device.recv(at(1), &mut buf).unwrap(), Some(3054));
}

#[test]
fn gso_cuts_large_segments_and_keeps_what_the_device_refused() {
    let mut device = both(MockDevice::default());
    let frame = build(&Spec::new(5000));
    assert!(device.send(at(1), &frame).unwrap());
    let sent: Vec<usize> = device.inner().sent.iter().map(|(_, f)| f.len()).collect();
    assert_eq!(sent, [1514, 1514, 1514, 54 + 620]);
    let pieces: Vec<Vec<u8>> = device.inner().sent.iter().map(|(_, f)| f.clone()).collect();
    let joined = segmentation::coalesce(Framing::Ethernet, &refs(&pieces), Checksums::Verify);
    assert_eq!(joined, vec![frame.clone()]);
    // The device refuses the first piece: the frame is taken, the pieces wait here
    // and go before the next frame.
    let mut device = both(MockDevice::default());
    assert!(device.send(at(2), &build(&Spec::new(100))).unwrap());
    device.inner_mut().refuse_sends = 1;
    assert!(device.send(at(3), &frame).unwrap(), "taken, pieces kept");
    assert_eq!(device.inner().sent.len(), 1);
    assert_eq!(device.poll_at(), Some(at(3)));
    let small = build(&Spec::new(10));
    assert!(device.send(at(4), &small).unwrap());
    let lens: Vec<usize> = device.inner().sent.iter().map(|(_, f)| f.len()).collect();
    assert_eq!(lens, [154, 1514, 1514, 1514, 674, 64]);
    let stats = device.stats();
    assert_eq!((stats.tx_cut, stats.tx_pieces), (1, 4));
}

#[test]
fn switched_off_it_passes_through() {
    let mut inner = MockDevice::default();
    let frames = train(&Spec::new(0), 1000, 2, 1000);
    for frame in &frames {
        inner.push_rx(frame);
    }
    let mut device = Offload::new(inner, Framing::Ethernet, 1500);
    assert_eq!(device.mtu(), 1514);
    let mut buf = vec![0; 1514];
    assert_eq!(device.recv(at(1), &mut buf).unwrap(), Some(1054));
    let large = build(&Spec::new(3000));
    assert!(
        device.send(at(1), &large).unwrap(),
        "the mock takes anything"
    );
    assert_eq!(device.inner().sent.len(), 1);
    assert_eq!(
        device.stack_offloads(Offloads::NONE),
        Offloads::NONE,
        "no TSO without GSO"
    );
    let device = device.gso(true);
    assert_eq!(
        device.stack_offloads(Offloads::NONE).tso_max,
        Some(MAX_MERGED_IP_LEN)
    );
}
