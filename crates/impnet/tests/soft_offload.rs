//! Two runtimes joined by an in-memory pipe through software GRO and GSO
//! ([`impnet::phy::Offload`] on both ends): a stream moves byte-exact both ways, the
//! stacks send segments larger than the pipe's MTU (cut by GSO) and take merged ones
//! (joined by GRO).

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use impnet::core::{IfaceConfig, Instant, Offloads, Secret, StackConfig};
use impnet::phy::{Device, DeviceError, Framing, Offload, PipeEnd, pipe};
use impnet::wire::{ethernet, ipv4::Cidr};
use impnet::{PollFd, Runtime, TcpListener, TcpStream};

/// The largest frames the stack sent and received through a device.
#[derive(Default)]
struct Largest {
    sent: AtomicUsize,
    received: AtomicUsize,
}

/// Notes the largest frame each way, between the stack and the wrapper.
struct Watch<D> {
    inner: D,
    largest: Arc<Largest>,
}

impl<D: Device> Device for Watch<D> {
    fn recv(&mut self, now: Instant, buf: &mut [u8]) -> Result<Option<usize>, DeviceError> {
        let got = self.inner.recv(now, buf)?;
        if let Some(len) = got {
            self.largest.received.fetch_max(len, Ordering::Relaxed);
        }
        Ok(got)
    }

    fn send(&mut self, now: Instant, frame: &[u8]) -> Result<bool, DeviceError> {
        self.largest.sent.fetch_max(frame.len(), Ordering::Relaxed);
        self.inner.send(now, frame)
    }

    fn mtu(&self) -> usize {
        self.inner.mtu()
    }

    fn poll_at(&self) -> Option<Instant> {
        self.inner.poll_at()
    }
}

impl<D> PollFd for Watch<D> {
    fn poll_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
}

fn runtime(end: PipeEnd, framing: Framing, last: u8, largest: &Arc<Largest>) -> Runtime {
    let rt = Runtime::with_secret(StackConfig::default(), Secret::from_bytes([last; 16]))
        .expect("runtime");
    let device = Offload::new(end, framing, 1500).gro(true).gso(true);
    let offloads = device.stack_offloads(Offloads::NONE);
    let device = Watch {
        inner: device,
        largest: Arc::clone(largest),
    };
    let iface = match framing {
        Framing::Ethernet => IfaceConfig::new(ethernet::Address([0x02, 0, 0, 0, 0, last]), 1500),
        Framing::Ip => IfaceConfig::ip(1500),
    };
    let iface = rt.add_device(device, iface.with_offloads(offloads));
    rt.add_address(
        iface,
        Cidr {
            address: Ipv4Addr::new(192, 0, 2, last),
            prefix_len: 24,
        },
    );
    rt
}

#[test]
fn a_stream_crosses_gro_and_gso_byte_exact() {
    stream_both_ways(Framing::Ethernet, 1514);
}

#[test]
fn a_stream_crosses_gro_and_gso_byte_exact_without_a_link_layer() {
    stream_both_ways(Framing::Ip, 1500);
}

/// Two runtimes on a pipe of `mtu`, their frames `framing`: 3 MB one way and back.
fn stream_both_ways(framing: Framing, mtu: usize) {
    let (a_end, b_end) = pipe(mtu);
    let (a_seen, b_seen) = (Arc::new(Largest::default()), Arc::new(Largest::default()));
    let a = runtime(a_end, framing, 1, &a_seen);
    let b = runtime(b_end, framing, 2, &b_seen);
    let listener = TcpListener::bind(&b, "192.0.2.2:80").unwrap();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let expected = data.clone();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).unwrap();
        stream.write_all(&got).unwrap();
        got
    });
    let mut client = TcpStream::connect(&a, "192.0.2.2:80").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let writer = {
        let mut client = client.try_clone().unwrap();
        std::thread::spawn(move || {
            client.write_all(&data).unwrap();
            client.shutdown(std::net::Shutdown::Write).unwrap();
        })
    };
    let mut echoed = Vec::new();
    client.read_to_end(&mut echoed).unwrap();
    writer.join().unwrap();
    assert!(server.join().unwrap() == expected, "a -> b differs");
    assert!(echoed == expected, "b -> a differs");
    for seen in [&a_seen, &b_seen] {
        assert!(
            seen.sent.load(Ordering::Relaxed) > 1514,
            "no segment for GSO"
        );
        assert!(
            seen.received.load(Ordering::Relaxed) > 1514,
            "no merged frame"
        );
    }
}
