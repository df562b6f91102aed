//! DHCPv4 messages (RFC 2131) with the options of RFC 2132 a client needs: the BOOTP
//! header (RFC 951), the magic cookie, and message type, server identifier, requested
//! address, lease time, T1 and T2, subnet mask, router, DNS servers, client identifier
//! and parameter request list. Other options are skipped; `pad` and `end` are honoured.
//!
//! Every option's length is checked: one that runs past the message is
//! [`Error::Truncated`], a fixed-size option of the wrong size is [`Error::BadOption`].

use core::net::Ipv4Addr;

use crate::ethernet;
use crate::{Error, Result};

/// Length of the BOOTP header up to the options (the magic cookie included).
pub const HEADER_LEN: usize = 240;
/// The smallest message we emit: RFC 1542 §3.2.1 has BOOTP relays expect 300 bytes.
pub const MIN_LEN: usize = 300;
/// The server's UDP port.
pub const SERVER_PORT: u16 = 67;
/// The client's UDP port.
pub const CLIENT_PORT: u16 = 68;
/// RFC 2131 §3: the first four octets of the options field, 99.130.83.99.
pub const MAGIC_COOKIE: [u8; 4] = [99, 130, 83, 99];
/// The BROADCAST bit of `flags` (RFC 2131 §2, figure 2).
const FLAG_BROADCAST: u16 = 0x8000;
/// Most addresses kept from a list option (router, DNS servers); later ones are dropped.
pub const MAX_ADDRS: usize = 4;

mod field {
    use core::ops::Range;
    pub const OP: usize = 0;
    pub const HTYPE: usize = 1;
    pub const HLEN: usize = 2;
    pub const XID: Range<usize> = 4..8;
    pub const SECS: Range<usize> = 8..10;
    pub const FLAGS: Range<usize> = 10..12;
    pub const CIADDR: Range<usize> = 12..16;
    pub const YIADDR: Range<usize> = 16..20;
    pub const SIADDR: Range<usize> = 20..24;
    pub const GIADDR: Range<usize> = 24..28;
    pub const CHADDR: Range<usize> = 28..34;
    pub const COOKIE: Range<usize> = 236..240;
}

/// Option codes (RFC 2132).
mod opt {
    pub const PAD: u8 = 0;
    pub const SUBNET_MASK: u8 = 1;
    pub const ROUTER: u8 = 3;
    pub const DNS: u8 = 6;
    pub const REQUESTED_IP: u8 = 50;
    pub const LEASE_TIME: u8 = 51;
    pub const MESSAGE_TYPE: u8 = 53;
    pub const SERVER_ID: u8 = 54;
    pub const PARAMETER_REQUEST: u8 = 55;
    pub const RENEWAL_TIME: u8 = 58;
    pub const REBINDING_TIME: u8 = 59;
    pub const CLIENT_ID: u8 = 61;
    pub const END: u8 = 255;
}

/// The option codes a client asks for: subnet mask, router, DNS servers, lease, T1, T2.
pub const CLIENT_PARAMETERS: &[u8] = &[
    opt::SUBNET_MASK,
    opt::ROUTER,
    opt::DNS,
    opt::LEASE_TIME,
    opt::RENEWAL_TIME,
    opt::REBINDING_TIME,
];

/// The DHCP message type (option 53, RFC 2132 §9.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    /// Client looks for servers.
    Discover,
    /// Server offers an address.
    Offer,
    /// Client asks for (or renews) an address.
    Request,
    /// Client says the address is in use.
    Decline,
    /// Server grants the lease.
    Ack,
    /// Server refuses the request.
    Nak,
    /// Client gives the address up.
    Release,
    /// Client asks for parameters only.
    Inform,
}

impl MessageType {
    fn from_u8(value: u8) -> Result<MessageType> {
        Ok(match value {
            1 => MessageType::Discover,
            2 => MessageType::Offer,
            3 => MessageType::Request,
            4 => MessageType::Decline,
            5 => MessageType::Ack,
            6 => MessageType::Nak,
            7 => MessageType::Release,
            8 => MessageType::Inform,
            _ => return Err(Error::BadField("DHCP message type")),
        })
    }

    fn to_u8(self) -> u8 {
        match self {
            MessageType::Discover => 1,
            MessageType::Offer => 2,
            MessageType::Request => 3,
            MessageType::Decline => 4,
            MessageType::Ack => 5,
            MessageType::Nak => 6,
            MessageType::Release => 7,
            MessageType::Inform => 8,
        }
    }

    /// True for the types a server sends (`op` BOOTREPLY).
    pub fn is_reply(self) -> bool {
        matches!(
            self,
            MessageType::Offer | MessageType::Ack | MessageType::Nak
        )
    }
}

/// Up to [`MAX_ADDRS`] IPv4 addresses from a list option, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrList {
    addrs: [Ipv4Addr; MAX_ADDRS],
    len: u8,
}

impl Default for AddrList {
    fn default() -> AddrList {
        AddrList {
            addrs: [Ipv4Addr::UNSPECIFIED; MAX_ADDRS],
            len: 0,
        }
    }
}

impl AddrList {
    /// The list of the first [`MAX_ADDRS`] of `addrs`.
    pub fn new(addrs: &[Ipv4Addr]) -> AddrList {
        let mut list = AddrList::default();
        for &addr in addrs.iter().take(MAX_ADDRS) {
            list.addrs[usize::from(list.len)] = addr;
            list.len += 1;
        }
        list
    }

    /// The addresses.
    pub fn as_slice(&self) -> &[Ipv4Addr] {
        &self.addrs[..usize::from(self.len)]
    }

    /// True when the list holds no address (the option is left out).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn from_option(kind: u8, data: &[u8]) -> Result<AddrList> {
        // RFC 2132 §3.5, §3.8: "The minimum length for the router option is 4 octets,
        // and the length MUST always be a multiple of 4."
        if data.is_empty() || !data.len().is_multiple_of(4) {
            return Err(bad_option(kind, data));
        }
        let mut list = AddrList::default();
        for chunk in data.chunks_exact(4).take(MAX_ADDRS) {
            list.addrs[usize::from(list.len)] =
                Ipv4Addr::new(chunk[0], chunk[1], chunk[2], chunk[3]);
            list.len += 1;
        }
        Ok(list)
    }
}

/// A DHCP message: the BOOTP fields a client uses and the options it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr<'a> {
    /// The message type (option 53); `op` follows from it.
    pub message_type: MessageType,
    /// Transaction id, chosen by the client.
    pub xid: u32,
    /// Seconds since the client began acquiring or renewing.
    pub secs: u16,
    /// The BROADCAST flag: the client cannot take unicast before it has an address.
    pub broadcast: bool,
    /// The client's address, when it has one (BOUND, RENEWING, REBINDING).
    pub ciaddr: Ipv4Addr,
    /// "your" address: the one the server offers or grants.
    pub yiaddr: Ipv4Addr,
    /// The next server (for booting).
    pub siaddr: Ipv4Addr,
    /// The relay agent.
    pub giaddr: Ipv4Addr,
    /// The client's Ethernet address (`htype` 1, `hlen` 6).
    pub client_hw: ethernet::Address,
    /// Option 54: the server's identifier.
    pub server_id: Option<Ipv4Addr>,
    /// Option 50: the address the client asks for.
    pub requested_ip: Option<Ipv4Addr>,
    /// Option 51: lease time in seconds (0xffffffff: infinite).
    pub lease_time: Option<u32>,
    /// Option 58: T1, seconds until RENEWING.
    pub renewal_time: Option<u32>,
    /// Option 59: T2, seconds until REBINDING.
    pub rebinding_time: Option<u32>,
    /// Option 1: the subnet mask.
    pub subnet_mask: Option<Ipv4Addr>,
    /// Option 3: routers, in order of preference.
    pub routers: AddrList,
    /// Option 6: DNS servers, in order of preference.
    pub dns_servers: AddrList,
    /// Option 61: the client identifier (type byte and value), 2 to 255 bytes.
    pub client_id: Option<&'a [u8]>,
    /// Option 55: the option codes the client asks for, 1 to 255 of them.
    pub parameter_request_list: Option<&'a [u8]>,
}

impl<'a> Repr<'a> {
    /// A message of `message_type` from or to `client_hw`, every other field empty.
    pub fn new(message_type: MessageType, xid: u32, client_hw: ethernet::Address) -> Repr<'a> {
        Repr {
            message_type,
            xid,
            secs: 0,
            broadcast: false,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            yiaddr: Ipv4Addr::UNSPECIFIED,
            siaddr: Ipv4Addr::UNSPECIFIED,
            giaddr: Ipv4Addr::UNSPECIFIED,
            client_hw,
            server_id: None,
            requested_ip: None,
            lease_time: None,
            renewal_time: None,
            rebinding_time: None,
            subnet_mask: None,
            routers: AddrList::default(),
            dns_servers: AddrList::default(),
            client_id: None,
            parameter_request_list: None,
        }
    }

    /// Parse a message (the UDP payload). Errors: shorter than the header, no magic
    /// cookie, a hardware type other than Ethernet, an option that runs past the end
    /// or has the wrong size, no message type, an `op` contradicting the type.
    pub fn parse(bytes: &'a [u8]) -> Result<Repr<'a>> {
        if bytes.len() < HEADER_LEN {
            return Err(Error::Truncated {
                need: HEADER_LEN,
                have: bytes.len(),
            });
        }
        if bytes[field::COOKIE] != MAGIC_COOKIE {
            return Err(Error::BadField("DHCP magic cookie"));
        }
        if bytes[field::HTYPE] != 1 || bytes[field::HLEN] != 6 {
            return Err(Error::Unsupported("DHCP hardware type other than Ethernet"));
        }
        let addr = |r: core::ops::Range<usize>| {
            Ipv4Addr::new(
                bytes[r.start],
                bytes[r.start + 1],
                bytes[r.start + 2],
                bytes[r.start + 3],
            )
        };
        let u16_at =
            |r: core::ops::Range<usize>| u16::from_be_bytes([bytes[r.start], bytes[r.start + 1]]);
        let mut hw = [0u8; 6];
        hw.copy_from_slice(&bytes[field::CHADDR]);
        let xid = &bytes[field::XID];
        let mut repr = Repr::new(
            MessageType::Discover,
            u32::from_be_bytes([xid[0], xid[1], xid[2], xid[3]]),
            ethernet::Address(hw),
        );
        repr.secs = u16_at(field::SECS);
        repr.broadcast = u16_at(field::FLAGS) & FLAG_BROADCAST != 0;
        repr.ciaddr = addr(field::CIADDR);
        repr.yiaddr = addr(field::YIADDR);
        repr.siaddr = addr(field::SIADDR);
        repr.giaddr = addr(field::GIADDR);
        let mut message_type = None;
        let mut options = Options {
            bytes: &bytes[HEADER_LEN..],
        };
        while let Some((kind, data)) = options.next_option()? {
            if kind == opt::MESSAGE_TYPE {
                let [value] = data else {
                    return Err(bad_option(kind, data));
                };
                message_type = Some(MessageType::from_u8(*value)?);
            } else {
                repr.take_option(kind, data)?;
            }
        }
        repr.message_type = message_type.ok_or(Error::Unsupported(
            "BOOTP message without a DHCP message type",
        ))?;
        let op = bytes[field::OP];
        if op != 1 + u8::from(repr.message_type.is_reply()) {
            return Err(Error::BadField("BOOTP op"));
        }
        Ok(repr)
    }

    /// Fill the field of option `kind` from its data.
    fn take_option(&mut self, kind: u8, data: &'a [u8]) -> Result<()> {
        let addr = || match data {
            [a, b, c, d] => Ok(Ipv4Addr::new(*a, *b, *c, *d)),
            _ => Err(bad_option(kind, data)),
        };
        let secs = || match data {
            [a, b, c, d] => Ok(u32::from_be_bytes([*a, *b, *c, *d])),
            _ => Err(bad_option(kind, data)),
        };
        match kind {
            opt::SUBNET_MASK => self.subnet_mask = Some(addr()?),
            opt::ROUTER => self.routers = AddrList::from_option(kind, data)?,
            opt::DNS => self.dns_servers = AddrList::from_option(kind, data)?,
            opt::REQUESTED_IP => self.requested_ip = Some(addr()?),
            opt::SERVER_ID => self.server_id = Some(addr()?),
            opt::LEASE_TIME => self.lease_time = Some(secs()?),
            opt::RENEWAL_TIME => self.renewal_time = Some(secs()?),
            opt::REBINDING_TIME => self.rebinding_time = Some(secs()?),
            // RFC 2132 §9.14: "The minimum length is 2."
            opt::CLIENT_ID if data.len() < 2 => return Err(bad_option(kind, data)),
            opt::CLIENT_ID => self.client_id = Some(data),
            opt::PARAMETER_REQUEST if data.is_empty() => return Err(bad_option(kind, data)),
            opt::PARAMETER_REQUEST => self.parameter_request_list = Some(data),
            _ => {} // an option a client need not understand
        }
        Ok(())
    }

    /// Bytes [`Repr::emit`] writes: header, options, `end`, padded to [`MIN_LEN`].
    pub fn buffer_len(&self) -> usize {
        let addr = |o: Option<Ipv4Addr>| if o.is_some() { 6 } else { 0 };
        let secs = |o: Option<u32>| if o.is_some() { 6 } else { 0 };
        let list = |l: &AddrList| {
            if l.is_empty() {
                0
            } else {
                2 + 4 * l.as_slice().len()
            }
        };
        let bytes = |b: Option<&[u8]>| b.map_or(0, |b| 2 + b.len().min(255));
        let options = 3
            + addr(self.server_id)
            + addr(self.requested_ip)
            + addr(self.subnet_mask)
            + secs(self.lease_time)
            + secs(self.renewal_time)
            + secs(self.rebinding_time)
            + list(&self.routers)
            + list(&self.dns_servers)
            + bytes(self.client_id)
            + bytes(self.parameter_request_list)
            + 1;
        (HEADER_LEN + options).max(MIN_LEN)
    }

    /// Write the message into `buf`, which must hold [`Repr::buffer_len`] bytes; the
    /// bytes after `end` are zeroed (pad). Client id and parameter list are cut at
    /// 255 bytes, the most an option holds.
    ///
    /// # Panics
    /// If `buf` is shorter than [`Repr::buffer_len`].
    pub fn emit(&self, buf: &mut [u8]) {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        buf.fill(0);
        buf[field::OP] = 1 + u8::from(self.message_type.is_reply());
        buf[field::HTYPE] = 1;
        buf[field::HLEN] = 6;
        buf[field::XID].copy_from_slice(&self.xid.to_be_bytes());
        buf[field::SECS].copy_from_slice(&self.secs.to_be_bytes());
        let flags = if self.broadcast { FLAG_BROADCAST } else { 0 };
        buf[field::FLAGS].copy_from_slice(&flags.to_be_bytes());
        buf[field::CIADDR].copy_from_slice(&self.ciaddr.octets());
        buf[field::YIADDR].copy_from_slice(&self.yiaddr.octets());
        buf[field::SIADDR].copy_from_slice(&self.siaddr.octets());
        buf[field::GIADDR].copy_from_slice(&self.giaddr.octets());
        buf[field::CHADDR].copy_from_slice(&self.client_hw.0);
        buf[field::COOKIE].copy_from_slice(&MAGIC_COOKIE);
        let mut w = Writer {
            buf,
            at: HEADER_LEN,
        };
        w.option(opt::MESSAGE_TYPE, &[self.message_type.to_u8()]);
        let addrs = [
            (opt::SERVER_ID, self.server_id),
            (opt::REQUESTED_IP, self.requested_ip),
            (opt::SUBNET_MASK, self.subnet_mask),
        ];
        for (kind, addr) in addrs {
            if let Some(addr) = addr {
                w.option(kind, &addr.octets());
            }
        }
        let times = [
            (opt::LEASE_TIME, self.lease_time),
            (opt::RENEWAL_TIME, self.renewal_time),
            (opt::REBINDING_TIME, self.rebinding_time),
        ];
        for (kind, secs) in times {
            if let Some(secs) = secs {
                w.option(kind, &secs.to_be_bytes());
            }
        }
        for (kind, list) in [(opt::ROUTER, &self.routers), (opt::DNS, &self.dns_servers)] {
            if !list.is_empty() {
                w.addr_list(kind, list.as_slice());
            }
        }
        let blobs = [
            (opt::CLIENT_ID, self.client_id),
            (opt::PARAMETER_REQUEST, self.parameter_request_list),
        ];
        for (kind, data) in blobs {
            if let Some(data) = data {
                w.option(kind, &data[..data.len().min(255)]);
            }
        }
        w.buf[w.at] = opt::END;
    }
}

/// Writes options one after another.
struct Writer<'b> {
    buf: &'b mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn option(&mut self, kind: u8, data: &[u8]) {
        self.buf[self.at] = kind;
        self.buf[self.at + 1] = data.len() as u8;
        self.buf[self.at + 2..self.at + 2 + data.len()].copy_from_slice(data);
        self.at += 2 + data.len();
    }

    fn addr_list(&mut self, kind: u8, addrs: &[Ipv4Addr]) {
        self.buf[self.at] = kind;
        self.buf[self.at + 1] = (4 * addrs.len()) as u8;
        self.at += 2;
        for addr in addrs {
            self.buf[self.at..self.at + 4].copy_from_slice(&addr.octets());
            self.at += 4;
        }
    }
}

/// The options field, read one option at a time.
struct Options<'a> {
    bytes: &'a [u8],
}

impl<'a> Options<'a> {
    /// The next option other than `pad`, or None at `end` (or the end of the bytes:
    /// RFC 2131 §4.1 has servers ignore options after `end`; a message without it is
    /// read to its last byte).
    fn next_option(&mut self) -> Result<Option<(u8, &'a [u8])>> {
        loop {
            let Some((&kind, rest)) = self.bytes.split_first() else {
                return Ok(None);
            };
            match kind {
                opt::PAD => self.bytes = rest,
                opt::END => return Ok(None),
                _ => {
                    let Some((&len, rest)) = rest.split_first() else {
                        return Err(Error::BadOption { kind, len: 0 });
                    };
                    let len_usize = usize::from(len);
                    if rest.len() < len_usize {
                        return Err(Error::Truncated {
                            need: len_usize,
                            have: rest.len(),
                        });
                    }
                    let (data, rest) = rest.split_at(len_usize);
                    self.bytes = rest;
                    return Ok(Some((kind, data)));
                }
            }
        }
    }
}

fn bad_option(kind: u8, data: &[u8]) -> Error {
    Error::BadOption {
        kind,
        len: data.len() as u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HW: ethernet::Address = ethernet::Address([2, 0, 0, 0, 0, 1]);

    fn offer() -> Repr<'static> {
        Repr {
            yiaddr: Ipv4Addr::new(10, 0, 0, 50),
            server_id: Some(Ipv4Addr::new(10, 0, 0, 1)),
            lease_time: Some(120),
            renewal_time: Some(60),
            rebinding_time: Some(105),
            subnet_mask: Some(Ipv4Addr::new(255, 255, 255, 0)),
            routers: AddrList::new(&[Ipv4Addr::new(10, 0, 0, 1)]),
            dns_servers: AddrList::new(&[Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(9, 9, 9, 9)]),
            ..Repr::new(MessageType::Offer, 0x1234_5678, HW)
        }
    }

    fn emitted(repr: &Repr<'_>) -> [u8; 400] {
        let mut buf = [0u8; 400];
        repr.emit(&mut buf);
        buf
    }

    #[test]
    fn round_trip_and_layout() {
        let repr = offer();
        let buf = emitted(&repr);
        assert_eq!(repr.buffer_len(), MIN_LEN);
        assert_eq!(buf[0], 2, "an offer is a BOOTREPLY");
        assert_eq!(&buf[236..240], &MAGIC_COOKIE);
        assert_eq!(&buf[240..243], &[53, 1, 2]);
        assert_eq!(Repr::parse(&buf[..repr.buffer_len()]), Ok(repr));
    }

    #[test]
    fn bad_messages_are_errors() {
        let repr = offer();
        let buf = emitted(&repr);
        let len = repr.buffer_len();
        assert_eq!(
            Repr::parse(&buf[..100]),
            Err(Error::Truncated {
                need: 240,
                have: 100
            })
        );
        let mut bad = buf;
        bad[236] = 0;
        assert_eq!(
            Repr::parse(&bad[..len]),
            Err(Error::BadField("DHCP magic cookie"))
        );
        // An option whose length runs past the message.
        let mut bad = buf;
        bad[240..244].copy_from_slice(&[53, 1, 2, 51]);
        bad[244] = 200;
        assert_eq!(
            Repr::parse(&bad[..260]),
            Err(Error::Truncated {
                need: 200,
                have: 15
            })
        );
        // A kind with no length byte at the very end.
        let mut bad = buf;
        bad[240..244].copy_from_slice(&[53, 1, 2, 51]);
        assert_eq!(
            Repr::parse(&bad[..244]),
            Err(Error::BadOption { kind: 51, len: 0 })
        );
        // A lease time of 3 bytes, a DNS list not a multiple of 4.
        let mut bad = buf;
        bad[243..249].copy_from_slice(&[51, 3, 0, 0, 1, 255]);
        assert_eq!(
            Repr::parse(&bad[..len]),
            Err(Error::BadOption { kind: 51, len: 3 })
        );
        let mut bad = buf;
        bad[243..250].copy_from_slice(&[6, 5, 1, 2, 3, 4, 5]);
        assert_eq!(
            Repr::parse(&bad[..len]),
            Err(Error::BadOption { kind: 6, len: 5 })
        );
        // No message type: plain BOOTP.
        let mut bad = buf;
        bad[240] = opt::END;
        assert_eq!(
            Repr::parse(&bad[..len]),
            Err(Error::Unsupported(
                "BOOTP message without a DHCP message type"
            ))
        );
        // An offer claiming to be a BOOTREQUEST.
        let mut bad = buf;
        bad[0] = 1;
        assert_eq!(Repr::parse(&bad[..len]), Err(Error::BadField("BOOTP op")));
    }

    #[test]
    fn pads_and_unknown_options_are_skipped() {
        let repr = Repr::new(MessageType::Ack, 7, HW);
        let mut buf = emitted(&repr);
        // pad, an unknown option 43 of 2 bytes, then the message type, then end.
        buf[240..250].copy_from_slice(&[0, 0, 43, 2, 9, 9, 53, 1, 5, 255]);
        assert_eq!(Repr::parse(&buf[..300]), Ok(repr));
    }
}
