//! The shim through its C interface, as packetdrill uses it: the test loads the built
//! shared object with `dlopen`, fills the table through `packetdrill_interface_init`,
//! and plays the remote side of a connection packet by packet (a handshake, data both
//! ways with SACK and a fast retransmit, a close), checking every packet the stack
//! sends, its time, and the socket calls' results and errno values.
//!
//! The library is the cdylib cargo builds beside this test (`target/<profile>/deps`).
//! Without it the test fails: it never skips.

use std::ffi::{CStr, CString, c_int, c_void};
use std::net::Ipv4Addr;

use impnet_packetdrill::PacketdrillInterface;
use impnet_wire::ipv4::{self, Protocol};
use impnet_wire::tcp::{self, Flags, Options, SackBlock};

const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 2);
const REMOTE: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const REMOTE_PORT: u16 = 40000;
const PORT: u16 = 8080;
/// The remote side's initial sequence number.
const PEER_ISS: u32 = 1_000_000;

/// The shared object, loaded; the table it filled.
struct Shim {
    table: PacketdrillInterface,
    handle: *mut c_void,
}

fn library_path() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let deps = exe.parent().expect("the test's directory");
    let name = "libimpnet_packetdrill.so";
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        if dir.join(name).exists() {
            return dir.join(name);
        }
    }
    panic!(
        "{name} not found beside {} or its parent: cargo builds it with the crate \
         (crate-type cdylib); build with `cargo test -p impnet-packetdrill`",
        exe.display()
    );
}

impl Shim {
    fn load(flags: &str) -> Shim {
        let path = CString::new(library_path().to_str().unwrap()).unwrap();
        // SAFETY: dlopen/dlsym with valid C strings; the symbol has the signature
        // packetdrill.h gives it.
        unsafe {
            let handle = libc::dlopen(
                path.as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE,
            );
            assert!(
                !handle.is_null(),
                "dlopen: {:?}",
                CStr::from_ptr(libc::dlerror())
            );
            let symbol = libc::dlsym(handle, c"packetdrill_interface_init".as_ptr());
            assert!(
                !symbol.is_null(),
                "no packetdrill_interface_init in the library"
            );
            let init: unsafe extern "C" fn(*const libc::c_char, *mut PacketdrillInterface) =
                std::mem::transmute(symbol);
            let mut table = std::mem::MaybeUninit::<PacketdrillInterface>::zeroed();
            let flags = CString::new(flags).unwrap();
            init(flags.as_ptr(), table.as_mut_ptr());
            Shim {
                table: table.assume_init(),
                handle,
            }
        }
    }

    fn ud(&self) -> *mut c_void {
        self.table.userdata
    }

    /// The last call's errno.
    fn errno() -> c_int {
        // SAFETY: this thread's errno.
        unsafe { *libc::__errno_location() }
    }

    fn now_micros(&self) -> i64 {
        let mut tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        };
        // SAFETY: a valid timeval.
        let rc = unsafe {
            (self.table.gettimeofday.unwrap())(self.ud(), &raw mut tv, std::ptr::null_mut())
        };
        assert_eq!(rc, 0);
        tv.tv_sec * 1_000_000 + tv.tv_usec
    }

    fn usleep(&self, micros: u32) {
        // SAFETY: plain values.
        assert_eq!(
            unsafe { (self.table.usleep.unwrap())(self.ud(), micros) },
            0
        );
    }

    fn send(&self, packet: &[u8]) {
        // SAFETY: the packet's bytes.
        let rc = unsafe {
            (self.table.netdev_send.unwrap())(self.ud(), packet.as_ptr().cast(), packet.len())
        };
        assert_eq!(rc, 0);
    }

    /// The next packet the stack sends, and when (microseconds on the shim's clock).
    fn receive(&self) -> (Vec<u8>, i64) {
        let mut buf = vec![0u8; 70_000];
        let mut len = buf.len();
        let mut at = 0i64;
        // SAFETY: a buffer of `len` bytes and two out-parameters.
        let rc = unsafe {
            (self.table.netdev_receive.unwrap())(
                self.ud(),
                buf.as_mut_ptr().cast(),
                &raw mut len,
                &raw mut at,
            )
        };
        assert_eq!(rc, 0);
        assert!(len > 0, "the stack sent nothing and has no timer pending");
        buf.truncate(len);
        (buf, at)
    }
}

impl Drop for Shim {
    fn drop(&mut self) {
        // SAFETY: the table's own free, then the library it came from.
        unsafe {
            (self.table.free.unwrap())(self.table.userdata);
            // RTLD_NODELETE (as packetdrill loads it): the library stays mapped, so
            // the thread-local destructors Rust registered in it remain callable.
            libc::dlclose(self.handle);
        }
    }
}

fn sockaddr(ip: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A segment from the remote side.
fn segment(seq: u32, ack: u32, flags: Flags, options: Options, payload: &[u8]) -> Vec<u8> {
    let repr = tcp::Repr {
        src_port: REMOTE_PORT,
        dst_port: PORT,
        seq,
        ack,
        flags,
        window: 1000,
        urgent: 0,
        options,
        payload,
    };
    let ip = ipv4::Repr {
        src_addr: REMOTE,
        dst_addr: LOCAL,
        protocol: Protocol::Tcp,
        payload_len: repr.buffer_len(),
        ttl: 64,
        ident: 0,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        dscp: 0,
        ecn: 0,
        options: &[],
    };
    let mut packet = vec![0u8; ip.buffer_len() + repr.buffer_len()];
    ip.emit(&mut ipv4::Packet::new_unchecked(&mut packet[..]));
    let header = ip.header_len();
    repr.emit(
        &mut tcp::Packet::new_unchecked(&mut packet[header..]),
        &REMOTE,
        &LOCAL,
        true,
    );
    packet
}

/// What the stack sent: checked as IPv4 from us to the remote side, TCP with a valid
/// checksum; (seq, ack, flags, options, payload).
struct Seen {
    seq: u32,
    ack: u32,
    flags: Flags,
    window: u16,
    options: Options,
    payload: Vec<u8>,
}

fn parse(packet: &[u8]) -> Seen {
    let ip = ipv4::Packet::new_checked(packet).expect("an IPv4 packet");
    let repr = ipv4::Repr::parse(&ip, true).expect("a valid IPv4 header");
    assert_eq!((repr.src_addr, repr.dst_addr), (LOCAL, REMOTE));
    assert_eq!(repr.protocol, Protocol::Tcp);
    let body = &packet[ip.header_len()..];
    let segment = tcp::Packet::new_checked(body).expect("a TCP segment");
    let tcp = tcp::Repr::parse(&segment, &LOCAL, &REMOTE, true).expect("a valid TCP segment");
    assert_eq!((tcp.src_port, tcp.dst_port), (PORT, REMOTE_PORT));
    Seen {
        seq: tcp.seq,
        ack: tcp.ack,
        flags: tcp.flags,
        window: tcp.window,
        options: tcp.options,
        payload: tcp.payload.to_vec(),
    }
}

const ACK: Flags = Flags::ACK;

fn flags(a: Flags, b: Flags) -> Flags {
    a | b
}

#[test]
#[allow(clippy::too_many_lines)]
fn handshake_data_with_sack_and_close_through_the_c_table() {
    let shim = Shim::load("local_ip=192.168.0.2 mtu=1500 cc=reno");
    let t = &shim.table;
    let ud = shim.ud();
    let start = shim.now_micros();

    // socket, SO_REUSEADDR, bind, listen.
    // SAFETY (all calls below): plain values and buffers that outlive each call.
    let fd =
        unsafe { (t.socket.unwrap())(ud, libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_TCP) };
    assert!(fd >= 0, "socket: errno {}", Shim::errno());
    let one: c_int = 1;
    let rc = unsafe {
        (t.setsockopt.unwrap())(
            ud,
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&raw const one).cast(),
            4,
        )
    };
    assert_eq!(rc, 0);
    let addr = sockaddr(LOCAL, PORT);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    assert_eq!(
        unsafe { (t.bind.unwrap())(ud, fd, (&raw const addr).cast(), len) },
        0
    );
    assert_eq!(unsafe { (t.listen.unwrap())(ud, fd, 1) }, 0);
    // Nothing to accept yet: a non-blocking accept says EAGAIN.
    assert_eq!(
        unsafe { (t.fcntl.unwrap())(ud, fd, libc::F_SETFL, libc::O_NONBLOCK.into()) },
        0
    );
    let rc = unsafe { (t.accept.unwrap())(ud, fd, std::ptr::null_mut(), std::ptr::null_mut()) };
    assert_eq!((rc, Shim::errno()), (-1, libc::EAGAIN));
    // An unknown option is ENOPROTOOPT; a bad descriptor EBADF.
    let rc = unsafe {
        (t.setsockopt.unwrap())(
            ud,
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_REPAIR,
            (&raw const one).cast(),
            4,
        )
    };
    assert_eq!((rc, Shim::errno()), (-1, libc::ENOPROTOOPT));
    assert_eq!(unsafe { (t.listen.unwrap())(ud, 999, 1) }, -1);
    assert_eq!(Shim::errno(), libc::EBADF);

    // SYN with MSS, SACK-permitted, timestamps and window scale.
    shim.usleep(100_000);
    let syn_options = Options {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some((100, 0)),
        ..Options::default()
    };
    shim.send(&segment(PEER_ISS, 0, Flags::SYN, syn_options, &[]));
    let sent_at = shim.now_micros();
    let (packet, at) = shim.receive();
    let syn_ack = parse(&packet);
    assert_eq!(syn_ack.flags, flags(Flags::SYN, ACK));
    assert_eq!(syn_ack.ack, PEER_ISS + 1);
    assert_eq!(syn_ack.options.mss, Some(1460));
    assert!(syn_ack.options.sack_permitted);
    assert_eq!(
        syn_ack.options.window_scale,
        Some(8),
        "Linux's scale for tcp_rmem's 15 MiB"
    );
    assert_eq!(syn_ack.options.timestamps.map(|(_, ecr)| ecr), Some(100));
    assert!(
        (at - sent_at).abs() <= 1,
        "the SYN-ACK leaves when the SYN arrives"
    );
    assert!(at - start >= 100_000, "usleep moved the clock");
    let iss = syn_ack.seq;
    let tsval = syn_ack.options.timestamps.unwrap().0;
    let ts = |val: u32| Options {
        timestamps: Some((val, tsval)),
        ..Options::default()
    };

    // ACK; accept gives fd 4 and the peer's address.
    shim.usleep(10_000);
    shim.send(&segment(PEER_ISS + 1, iss + 1, ACK, ts(110), &[]));
    let mut peer: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut peer_len = len;
    let child = unsafe { (t.accept.unwrap())(ud, fd, (&raw mut peer).cast(), &raw mut peer_len) };
    assert!(child >= 0 && child != fd, "accept gave {child}");
    assert_eq!(u32::from_be(peer.sin_addr.s_addr), u32::from(REMOTE));
    assert_eq!(u16::from_be(peer.sin_port), REMOTE_PORT);

    // TCP_INFO: ESTABLISHED, MSS 1460 less the timestamp option.
    let mut info = [0u8; 512];
    let mut info_len: libc::socklen_t = 512;
    let rc = unsafe {
        (t.getsockopt.unwrap())(
            ud,
            child,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &raw mut info_len,
        )
    };
    assert_eq!(rc, 0);
    assert_eq!(info_len, 280, "Linux's struct tcp_info");
    assert_eq!(info[0], 1, "tcpi_state TCP_ESTABLISHED");
    assert_eq!(
        info[5] & 0x7,
        0x7,
        "tcpi_options: timestamps, SACK, window scale"
    );
    assert_eq!(
        u32::from_ne_bytes(info[16..20].try_into().unwrap()),
        1448,
        "tcpi_snd_mss"
    );

    // Write 4000 bytes: one TSO segment of them, PSH on it.
    let data: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
    let n = unsafe { (t.write.unwrap())(ud, child, data.as_ptr().cast(), data.len()) };
    assert_eq!(n, 4000);
    let mut sent = Vec::new();
    while sent.len() < data.len() {
        let seg = parse(&shim.receive().0);
        assert_eq!(seg.seq, iss + 1 + sent.len() as u32);
        assert_eq!(seg.ack, PEER_ISS + 1);
        assert!(seg.flags.contains(ACK));
        sent.extend_from_slice(&seg.payload);
    }
    assert_eq!(sent, data, "the bytes written, in order");

    // The peer got all but the first 1448 bytes: three duplicate ACKs with SACK blocks,
    // 5 ms later (before the tail loss probe, 2 x SRTT = 20 ms), make the stack
    // retransmit the first segment (RACK, RFC 8985) after its reordering window
    // (min RTT / 4 = 1.25 ms: the SACKs measure 5 ms, below the handshake's 10, and
    // RACK's min_RTT takes them as Linux's does), long before the retransmission
    // timeout.
    shim.usleep(5_000);
    let mut ack_options = ts(120);
    for right in [iss + 1 + 2896, iss + 1 + 4000, iss + 1 + 4000] {
        ack_options.sack_blocks[0] = SackBlock {
            left: iss + 1 + 1448,
            right,
        };
        ack_options.sack_len = 1;
        shim.send(&segment(PEER_ISS + 1, iss + 1, ACK, ack_options, &[]));
    }
    let retransmitted_at = shim.now_micros();
    let (packet, at) = shim.receive();
    let repair = parse(&packet);
    assert_eq!(repair.seq, iss + 1);
    assert_eq!(repair.payload, data[..1448]);
    let delay = at - retransmitted_at;
    assert!(
        (1_250..=1_350).contains(&delay),
        "retransmitted {delay} us after the third SACK"
    );
    shim.send(&segment(PEER_ISS + 1, iss + 1 + 4000, ACK, ts(130), &[]));

    // Data from the peer out of order: the stack answers at once with a SACK block.
    let first: Vec<u8> = vec![b'a'; 500];
    let second: Vec<u8> = vec![b'b'; 500];
    shim.send(&segment(
        PEER_ISS + 1 + 500,
        iss + 1 + 4000,
        ACK,
        ts(140),
        &second,
    ));
    let dup = parse(&shim.receive().0);
    assert_eq!(dup.ack, PEER_ISS + 1, "a duplicate ACK for the hole");
    assert_eq!(
        dup.options.sack(),
        &[SackBlock {
            left: PEER_ISS + 501,
            right: PEER_ISS + 1001
        }]
    );
    // FIONREAD: nothing in order yet; a non-blocking read says EAGAIN.
    let mut pending: c_int = -1;
    assert_eq!(
        unsafe { (t.ioctl.unwrap())(ud, child, libc::FIONREAD, (&raw mut pending).cast()) },
        0
    );
    assert_eq!(pending, 0);
    let mut buf = [0u8; 2000];
    let rc = unsafe {
        (t.recv.unwrap())(
            ud,
            child,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    assert_eq!((rc, Shim::errno()), (-1, libc::EAGAIN));
    shim.send(&segment(PEER_ISS + 1, iss + 1 + 4000, ACK, ts(150), &first));
    let filled = parse(&shim.receive().0);
    assert_eq!(
        filled.ack,
        PEER_ISS + 1001,
        "the hole filled: everything acknowledged at once"
    );
    assert!(filled.options.sack().is_empty());
    assert_eq!(
        unsafe { (t.ioctl.unwrap())(ud, child, libc::FIONREAD, (&raw mut pending).cast()) },
        0
    );
    assert_eq!(pending, 1000);
    let n = unsafe { (t.read.unwrap())(ud, child, buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(n, 1000);
    assert_eq!(&buf[..500], &first[..]);
    assert_eq!(&buf[500..1000], &second[..]);

    // poll: writable, not readable.
    let mut pfd = libc::pollfd {
        fd: child,
        events: libc::POLLIN | libc::POLLOUT,
        revents: 0,
    };
    assert_eq!(unsafe { (t.poll.unwrap())(ud, &raw mut pfd, 1, 0) }, 1);
    assert_eq!(pfd.revents, libc::POLLOUT);

    // Close: our FIN; the peer's FIN; our last ACK.
    shim.usleep(10_000);
    assert_eq!(unsafe { (t.close.unwrap())(ud, child) }, 0);
    let fin = parse(&shim.receive().0);
    assert_eq!(fin.flags, flags(Flags::FIN, ACK));
    assert_eq!((fin.seq, fin.ack), (iss + 4001, PEER_ISS + 1001));
    shim.usleep(10_000);
    shim.send(&segment(
        PEER_ISS + 1001,
        iss + 4002,
        flags(Flags::FIN, ACK),
        ts(160),
        &[],
    ));
    let last = parse(&shim.receive().0);
    assert_eq!(last.flags, ACK);
    assert_eq!((last.seq, last.ack), (iss + 4002, PEER_ISS + 1002));
    assert!(last.window > 0);
    // The fd is gone.
    assert_eq!(unsafe { (t.close.unwrap())(ud, child) }, -1);
    assert_eq!(Shim::errno(), libc::EBADF);
    assert_eq!(unsafe { (t.close.unwrap())(ud, fd) }, 0);
}

#[test]
fn bad_flags_fail_every_call_with_einval() {
    let shim = Shim::load("mtu=12");
    // SAFETY: plain values.
    let rc =
        unsafe { (shim.table.socket.unwrap())(shim.ud(), libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert_eq!((rc, Shim::errno()), (-1, libc::EINVAL));
}

#[test]
fn connect_blocks_on_virtual_time_until_the_retries_run_out() {
    let shim = Shim::load("");
    let t = &shim.table;
    let ud = shim.ud();
    // SAFETY: plain values and a sockaddr that outlives the call.
    let fd = unsafe { (t.socket.unwrap())(ud, libc::AF_INET, libc::SOCK_STREAM, 0) };
    let remote = sockaddr(REMOTE, PORT);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let start = shim.now_micros();
    // Nobody answers the SYNs: the blocking connect moves the clock through every
    // retransmission (1 s, doubling) and reports ETIMEDOUT.
    let rc = unsafe { (t.connect.unwrap())(ud, fd, (&raw const remote).cast(), len) };
    assert_eq!((rc, Shim::errno()), (-1, libc::ETIMEDOUT));
    let waited = shim.now_micros() - start;
    assert!(
        waited >= 60_000_000,
        "six retries take over a minute of virtual time: {waited} us"
    );
    let mut syns = 0;
    loop {
        let mut buf = vec![0u8; 2000];
        let mut n = buf.len();
        let mut at = 0i64;
        // SAFETY: a buffer and two out-parameters.
        unsafe {
            (t.netdev_receive.unwrap())(ud, buf.as_mut_ptr().cast(), &raw mut n, &raw mut at)
        };
        if n == 0 {
            break;
        }
        let seg = parse_any(&buf[..n]);
        assert!(seg.contains(Flags::SYN));
        syns += 1;
    }
    assert_eq!(syns, 7, "the SYN and its six retransmissions");
}

fn parse_any(packet: &[u8]) -> Flags {
    let ip = ipv4::Packet::new_checked(packet).unwrap();
    let segment = tcp::Packet::new_checked(&packet[ip.header_len()..]).unwrap();
    segment.flags()
}
