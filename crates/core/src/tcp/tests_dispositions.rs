//! The dispositions of LISTEN and SYN-SENT, decided from the state and the segment alone
//! (no connection, no table): one case per branch of RFC 9293 §3.10.7.2 and §3.10.7.3,
//! and the SYN cookie branches of a listener (RFC 4987 §3.6).

use core::net::SocketAddr;

use impnet_wire::tcp::{Flags, Repr};

use super::buffer::SendBuffer;
use super::cookie::CookieJar;
use super::listen::{ListenDisposition, Listener};
use super::rtt::HandshakeTimer;
use super::segment::Reset;
use super::seq::SeqNumber;
use super::state::{SynSent, SynSentDisposition};
use crate::secret::Secret;
use crate::time::{Duration, Instant};

const ISS: u32 = 5000;
const PEER_ISS: u32 = 9000;

fn ends() -> (SocketAddr, SocketAddr) {
    (
        "10.0.0.1:80".parse().unwrap(),
        "10.0.0.2:40000".parse().unwrap(),
    )
}

fn segment(flags: Flags, seq: u32, ack: u32) -> Repr<'static> {
    Repr {
        src_port: 40000,
        dst_port: 80,
        seq,
        ack,
        flags,
        window: 1000,
        ..Repr::default()
    }
}

fn syn_sent(syn_data: usize, first_sent: Option<Instant>) -> SynSent {
    let mut timer = HandshakeTimer::new();
    if let Some(at) = first_sent {
        timer.on_send(at);
    }
    SynSent {
        iss: SeqNumber(ISS),
        snd_nxt: SeqNumber(ISS) + 1,
        buffer: SendBuffer::new(0),
        timer,
        fast_open: Default::default(),
        syn_data,
    }
}

#[test]
fn syn_sent_answers_each_segment_as_rfc_9293_says() {
    let s = syn_sent(0, None);
    let on = |flags, ack| s.on_segment(&segment(flags, PEER_ISS, ack), ends(), None);
    let bad_ack = segment(Flags::ACK, PEER_ISS, ISS);
    // "If SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset".
    assert_eq!(
        on(Flags::ACK, ISS),
        SynSentDisposition::Reset(Reset::for_segment(ends().0, ends().1, &bad_ack))
    );
    assert!(matches!(
        on(Flags::SYN | Flags::ACK, ISS + 2),
        SynSentDisposition::Reset(_)
    ));
    // "... unless the RST bit is set, if so drop the segment".
    assert_eq!(on(Flags::RST | Flags::ACK, ISS), SynSentDisposition::Drop);
    // An acceptable ACK with RST: refused. A RST without ACK: dropped.
    assert_eq!(
        on(Flags::RST | Flags::ACK, ISS + 1),
        SynSentDisposition::Refused
    );
    assert_eq!(on(Flags::RST, 0), SynSentDisposition::Drop);
    // Neither SYN nor RST: dropped, even with an acceptable ACK.
    assert_eq!(on(Flags::ACK, ISS + 1), SynSentDisposition::Drop);
    assert_eq!(
        on(Flags::SYN | Flags::ACK, ISS + 1),
        SynSentDisposition::Establish
    );
    assert_eq!(on(Flags::SYN, 0), SynSentDisposition::SimultaneousOpen);
}

#[test]
fn syn_sent_takes_an_ack_of_fast_open_data_up_to_what_the_syn_carried() {
    let s = syn_sent(100, None);
    let on = |ack| {
        s.on_segment(
            &segment(Flags::SYN | Flags::ACK, PEER_ISS, ack),
            ends(),
            None,
        )
    };
    assert_eq!(on(ISS + 101), SynSentDisposition::Establish);
    assert!(matches!(on(ISS + 102), SynSentDisposition::Reset(_)));
}

#[test]
fn syn_sent_refuses_an_echo_of_a_timestamp_no_syn_carried_only_when_checking() {
    let first = Instant::from_millis(10_000);
    let now = first + Duration::from_millis(50);
    let s = syn_sent(0, Some(first));
    let mut seg = segment(Flags::SYN | Flags::ACK, PEER_ISS, ISS + 1);
    // An echo from before the first SYN went out.
    seg.options.timestamps = Some((1, super::segment::tsval(first).wrapping_sub(1000)));
    assert!(matches!(
        s.on_segment(&seg, ends(), Some(now)),
        SynSentDisposition::Reset(_)
    ));
    assert_eq!(
        s.on_segment(&seg, ends(), None),
        SynSentDisposition::Establish
    );
    seg.options.timestamps = Some((1, super::segment::tsval(first)));
    assert_eq!(
        s.on_segment(&seg, ends(), Some(now)),
        SynSentDisposition::Establish
    );
}

#[test]
fn listen_answers_each_segment_as_rfc_9293_says() {
    let jar = CookieJar::new(&Secret::from_bytes([7; Secret::LEN]));
    let mut l = Listener::new(ends().0, 2);
    let now = Instant::from_millis(1000);
    let on = |l: &Listener, flags, cookies| {
        l.on_segment(now, ends(), &segment(flags, PEER_ISS, ISS), (&jar, cookies))
    };
    assert_eq!(on(&l, Flags::RST, false), ListenDisposition::Drop);
    assert_eq!(
        on(&l, Flags::RST | Flags::ACK, false),
        ListenDisposition::Drop
    );
    assert!(matches!(
        on(&l, Flags::ACK, false),
        ListenDisposition::Reset(_)
    ));
    assert_eq!(on(&l, Flags::FIN, false), ListenDisposition::Drop);
    assert_eq!(on(&l, Flags::SYN, false), ListenDisposition::Open);
    l.pending = 2;
    assert_eq!(on(&l, Flags::SYN, false), ListenDisposition::Overflow);
    assert_eq!(on(&l, Flags::SYN, true), ListenDisposition::SendCookie);
    l.max_half_open = Some(2);
    assert_eq!(on(&l, Flags::SYN, true), ListenDisposition::HalfOpenFull);
}

#[test]
fn listen_checks_a_returned_cookie_only_after_sending_one() {
    let jar = CookieJar::new(&Secret::from_bytes([7; Secret::LEN]));
    let mut l = Listener::new(ends().0, 1);
    let now = Instant::from_millis(1000);
    let cookie = jar.make(now, ends(), PEER_ISS - 1, 1460);
    let ack = segment(Flags::ACK, PEER_ISS, cookie.0.wrapping_add(1));
    let on = |l: &Listener, seg: &Repr<'_>| l.on_segment(now, ends(), seg, (&jar, true));
    assert!(matches!(on(&l, &ack), ListenDisposition::Reset(_)));
    l.cookie_sent_at = Some(now);
    assert_eq!(
        on(&l, &ack),
        ListenDisposition::AcceptCookie { peer_mss: 1460 }
    );
    let forged = segment(Flags::ACK, PEER_ISS, cookie.0.wrapping_add(2));
    assert!(matches!(
        on(&l, &forged),
        ListenDisposition::RejectCookie(_)
    ));
    // A SYN-ACK never carries a cookie back.
    let syn_ack = Repr {
        flags: Flags::SYN | Flags::ACK,
        ..ack
    };
    assert!(matches!(on(&l, &syn_ack), ListenDisposition::Reset(_)));
    l.queue.push_back(super::TcpHandle {
        index: 9,
        generation: 1,
    });
    assert_eq!(on(&l, &ack), ListenDisposition::CookieOverflow);
    // Two cookie periods later the listener takes no cookie.
    let later = now + Duration::from_secs(128);
    assert!(matches!(
        l.on_segment(later, ends(), &ack, (&jar, true)),
        ListenDisposition::Reset(_)
    ));
}
