//! Explicit Congestion Notification (RFC 3168) for one connection: the negotiation on
//! the SYN and SYN-ACK (§6.1.1), the IP ECN field of what we send (§6.1.2, §6.1.5),
//! the receiver's echo of Congestion Experienced (§6.1.3), and the sender's reduction
//! (§6.1.2).
//!
//! The IP layer hands TCP the ECN codepoint of every segment that arrives
//! ([`Tcp::handle_segment_with_ecn`](super::Tcp::handle_segment_with_ecn)) and puts
//! the codepoint TCP chose ([`TcpTransmit::ecn`](super::TcpTransmit::ecn)) in the IP
//! header of every segment it sends. Only new data segments of a connection that
//! negotiated ECN are ECN-capable (ECT(0)); pure ACKs, retransmissions, SYNs, RSTs and
//! probes are not, so a router drops rather than marks them.
//!
//! This file holds the types and the negotiation rule (`peer_agrees`); what a
//! connection does with them (`ecn_input`, `ecn_on_ack`, `ecn_output`) is in
//! `conn/ecn.rs`.

use impnet_wire::tcp::{Flags, Repr};

use super::seq::SeqNumber;

/// Whether a stack uses ECN, as Linux's `net.ipv4.tcp_ecn` (0, 2, 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EcnMode {
    /// Never: no ECN-setup SYN, and an ECN-setup SYN is answered without ECE.
    Off,
    /// Only when the peer asks: an ECN-setup SYN gets an ECN-setup SYN-ACK, our own
    /// SYNs do not ask (Linux's default, `tcp_ecn = 2`).
    Accept,
    /// Ask on our SYNs and accept the peer's (`tcp_ecn = 1`).
    #[default]
    Request,
}

impl EcnMode {
    /// The mode called `name`: `off`, `accept` or `on`.
    pub fn from_name(name: &str) -> Option<EcnMode> {
        match name {
            "off" | "0" => Some(EcnMode::Off),
            "accept" | "2" => Some(EcnMode::Accept),
            "on" | "request" | "1" => Some(EcnMode::Request),
            _ => None,
        }
    }
}

/// The ECN field of an IPv4 header (RFC 3168 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ecn {
    /// 00: the sender's transport is not ECN-capable.
    #[default]
    NotEct,
    /// 01: ECN-capable, ECT(1).
    Ect1,
    /// 10: ECN-capable, ECT(0).
    Ect0,
    /// 11: Congestion Experienced, set by a router instead of dropping.
    Ce,
}

impl Ecn {
    /// The codepoint from the two low bits of the IPv4 TOS byte.
    pub fn from_bits(bits: u8) -> Ecn {
        match bits & 0x03 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
    /// The two bits, for the IPv4 TOS byte.
    pub fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }
}

/// One connection's ECN state once negotiated (`Negotiated::ecn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct EcnState {
    /// Receiver: a CE arrived and no CWR since, so every ACK carries ECE.
    pub echo: bool,
    /// Receiver: the last data segment carried CE (a change is acknowledged at once).
    pub last_ce: bool,
    /// Sender: the window was reduced for an ECE; CWR goes on the next new data.
    pub cwr_due: bool,
    /// Sender: a reduction was made (`reduced_at` holds its SND.MAX). A flag and a
    /// number rather than an `Option<SeqNumber>`: 8 bytes, not 12, in every connection.
    pub reduced: bool,
    /// Sender: SND.MAX at the last reduction, when `reduced`; ECE reduces again only
    /// on an ACK beyond it, which covers data sent after the reduction (once per window
    /// of data).
    pub reduced_at: SeqNumber,
}

/// RFC 3168 §6.1.1 from the peer's SYN (or SYN-ACK): whether it agrees to ECN.
pub(crate) fn peer_agrees(seg: &Repr<'_>) -> bool {
    let (ece, cwr) = (
        seg.flags.contains(Flags::ECE),
        seg.flags.contains(Flags::CWR),
    );
    if seg.flags.ack() {
        // A SYN-ACK with both ECE and CWR is no ECN-setup SYN-ACK: §6.1.1 makes them
        // differ so that "a receiver's reflection of its own flags in the Reserved
        // field" reads as no ECN.
        ece && !cwr
    } else {
        ece && cwr
    }
}
