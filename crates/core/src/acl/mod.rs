//! Access control lists: an ordered list of allow/deny rules over IPv4 and IPv6
//! packets, first match wins.
//!
//! A rule is written as text, one per line:
//!
//! ```text
//! deny proto=tcp dst=10.0.2.0/24 dport=8081
//! allow in=tap0 src=10.0.1.0/24
//! deny proto=udp dport=1000-2000
//! deny proto=tcp dst=fd00:2::/64 dport=22
//! allow proto=icmpv6
//! ```
//!
//! An action (`allow` or `deny`) then `key=value` fields, each at most once: `in` and
//! `out` (interface names), `src` and `dst` (CIDR prefixes), `proto` (`tcp`, `udp`,
//! `icmp` or a number 0-255), `sport` and `dport` (a port or a range `lo-hi`, only with
//! `proto=tcp` or `proto=udp`). A field left out matches anything.
//!
//! Interfaces are named in the text; [`Acl::resolve`] turns the names into
//! [`IfaceId`]s once, so matching compares ids. A rule naming an interface that did not
//! resolve matches no packet.
//!
//! Matching parses the packet with `impnet_wire`'s views and never panics. An IPv6
//! packet's protocol is the one after its extension headers (`ipv6ext::walk`). A
//! non-first fragment carries no ports: a rule with ports does not match it, a rule
//! without does. Bytes that are not a valid IPv4 header, or an IPv6 header with a
//! walkable extension header chain, match no rule and are denied ([`Acl::check`]
//! counts them in [`Acl::malformed`]).

mod parse;

#[cfg(test)]
mod tests;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::net::IpAddr;

use impnet_wire::{ipv4, ipv6, ipv6ext};

use crate::iface::IfaceId;

pub use parse::{AclParseError, AclParseErrorKind};

/// What to do with a matching packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Let it through.
    Allow,
    /// Drop it.
    Deny,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Allow => "allow",
            Action::Deny => "deny",
        })
    }
}

/// An inclusive range of ports; one port is a range of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    /// Lowest port matched.
    pub first: u16,
    /// Highest port matched (not below `first`).
    pub last: u16,
}

impl PortRange {
    /// Whether `port` is in the range.
    pub const fn contains(&self, port: u16) -> bool {
        self.first <= port && port <= self.last
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

/// IANA protocol numbers the rule text names (IPv4's Protocol and IPv6's Next Header
/// share them).
pub mod proto {
    /// ICMP for IPv4 (`proto=icmp`).
    pub const ICMP: u8 = 1;
    /// TCP (`proto=tcp`).
    pub const TCP: u8 = 6;
    /// UDP (`proto=udp`).
    pub const UDP: u8 = 17;
    /// ICMPv6 (`proto=icmpv6`).
    pub const ICMPV6: u8 = 58;
}

/// An address prefix of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prefix {
    /// An IPv4 prefix, e.g. `10.0.2.0/24`.
    V4(ipv4::Cidr),
    /// An IPv6 prefix, e.g. `fd00:2::/64`.
    V6(ipv6::Cidr),
}

impl Prefix {
    /// Whether `addr` is in the prefix (never for an address of the other family).
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self, addr) {
            (Prefix::V4(c), IpAddr::V4(a)) => c.contains(a),
            (Prefix::V6(c), IpAddr::V6(a)) => c.contains(a),
            _ => false,
        }
    }

    /// True for an IPv6 prefix.
    pub const fn is_ipv6(&self) -> bool {
        matches!(self, Prefix::V6(_))
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prefix::V4(c) => c.fmt(f),
            Prefix::V6(c) => c.fmt(f),
        }
    }
}

impl From<ipv4::Cidr> for Prefix {
    fn from(cidr: ipv4::Cidr) -> Prefix {
        Prefix::V4(cidr)
    }
}

impl From<ipv6::Cidr> for Prefix {
    fn from(cidr: ipv6::Cidr) -> Prefix {
        Prefix::V6(cidr)
    }
}

/// An interface named in a rule, with its id once [`Acl::resolve`] found it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IfaceMatch {
    /// The name written in the rule.
    pub name: String,
    /// The interface it names; `None` until resolved, or if no interface has the name.
    pub id: Option<IfaceId>,
}

/// One rule: an action and the fields a packet must match (each `None` matches
/// anything).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    /// What to do with a matching packet.
    pub action: Action,
    /// The interface the packet came in on.
    pub in_iface: Option<IfaceMatch>,
    /// The interface the packet is going out on.
    pub out_iface: Option<IfaceMatch>,
    /// Prefix containing the source address (its family is the rule's).
    pub src: Option<Prefix>,
    /// Prefix containing the destination address (of the same family as `src`).
    pub dst: Option<Prefix>,
    /// The protocol number (IPv4's Protocol, IPv6's upper-layer Next Header; see
    /// [`proto`]).
    pub proto: Option<u8>,
    /// TCP or UDP source ports (only with `proto` TCP or UDP).
    pub sport: Option<PortRange>,
    /// TCP or UDP destination ports (only with `proto` TCP or UDP).
    pub dport: Option<PortRange>,
}

impl Rule {
    /// A rule with `action` and no fields: it matches every packet.
    pub const fn any(action: Action) -> Rule {
        Rule {
            action,
            in_iface: None,
            out_iface: None,
            src: None,
            dst: None,
            proto: None,
            sport: None,
            dport: None,
        }
    }

    /// Whether the packet described by `fields`, from `in_iface` to `out_iface`,
    /// matches this rule.
    pub fn matches(
        &self,
        fields: &PacketFields,
        in_iface: Option<IfaceId>,
        out_iface: Option<IfaceId>,
    ) -> bool {
        let iface_ok = |rule: &Option<IfaceMatch>, actual: Option<IfaceId>| match rule {
            None => true,
            Some(m) => m.id.is_some() && m.id == actual,
        };
        let port_ok = |rule: Option<PortRange>, actual: Option<u16>| match rule {
            None => true,
            Some(range) => actual.is_some_and(|port| range.contains(port)),
        };
        iface_ok(&self.in_iface, in_iface)
            && iface_ok(&self.out_iface, out_iface)
            && self.src.is_none_or(|c| c.contains(fields.src))
            && self.dst.is_none_or(|c| c.contains(fields.dst))
            && self.proto.is_none_or(|p| p == fields.proto)
            && port_ok(self.sport, fields.ports.map(|(s, _)| s))
            && port_ok(self.dport, fields.ports.map(|(_, d)| d))
    }
}

impl fmt::Display for Rule {
    /// The canonical text: the action, then the fields in the order `proto in out src
    /// dst sport dport`; [`FromStr`](core::str::FromStr) reads it back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.action)?;
        if let Some(p) = self.proto {
            match p {
                proto::TCP => write!(f, " proto=tcp")?,
                proto::UDP => write!(f, " proto=udp")?,
                proto::ICMP => write!(f, " proto=icmp")?,
                proto::ICMPV6 => write!(f, " proto=icmpv6")?,
                n => write!(f, " proto={n}")?,
            }
        }
        if let Some(m) = &self.in_iface {
            write!(f, " in={}", m.name)?;
        }
        if let Some(m) = &self.out_iface {
            write!(f, " out={}", m.name)?;
        }
        if let Some(c) = self.src {
            write!(f, " src={c}")?;
        }
        if let Some(c) = self.dst {
            write!(f, " dst={c}")?;
        }
        if let Some(r) = self.sport {
            write!(f, " sport={r}")?;
        }
        if let Some(r) = self.dport {
            write!(f, " dport={r}")?;
        }
        Ok(())
    }
}

/// What the rules look at in a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketFields {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Protocol number: IPv4's Protocol, or IPv6's Next Header after the extension
    /// headers.
    pub proto: u8,
    /// (source, destination) ports of TCP or UDP; `None` for other protocols, for
    /// non-first fragments, and when the payload is too short to hold them.
    pub ports: Option<(u16, u16)>,
}

/// TCP and UDP both start with the source and destination ports.
fn ports_of(proto: u8, first_fragment: bool, payload: &[u8]) -> Option<(u16, u16)> {
    if !(first_fragment && matches!(proto, proto::TCP | proto::UDP)) {
        return None;
    }
    let p = payload.get(0..4)?;
    Some((
        u16::from_be_bytes([p[0], p[1]]),
        u16::from_be_bytes([p[2], p[3]]),
    ))
}

impl PacketFields {
    /// The fields of an IP packet (header first, the family from its version), or
    /// `None` if the bytes are neither a valid IPv4 header
    /// ([`ipv4::Packet::check_len`]) nor a valid IPv6 header whose extension header
    /// chain walks ([`ipv6ext::walk`]).
    pub fn parse(packet: &[u8]) -> Option<PacketFields> {
        match packet.first()? >> 4 {
            4 => PacketFields::parse_ipv4(packet),
            6 => PacketFields::parse_ipv6(packet),
            _ => None,
        }
    }

    fn parse_ipv4(packet: &[u8]) -> Option<PacketFields> {
        let ip = ipv4::Packet::new_checked(packet).ok()?;
        let proto = u8::from(ip.protocol());
        Some(PacketFields {
            src: IpAddr::V4(ip.src_addr()),
            dst: IpAddr::V4(ip.dst_addr()),
            proto,
            ports: ports_of(proto, ip.frag_offset() == 0, ip.payload()),
        })
    }

    fn parse_ipv6(packet: &[u8]) -> Option<PacketFields> {
        let ip = ipv6::Packet::new_checked(packet).ok()?;
        let bytes = ip.packet();
        let walk = ipv6ext::walk(bytes).ok()?;
        let proto = u8::from(walk.protocol);
        let first = walk.fragment.is_none_or(|(_, f)| f.frag_offset == 0);
        let payload = bytes.get(walk.offset..).unwrap_or(&[]);
        Some(PacketFields {
            src: IpAddr::V6(ip.src_addr()),
            dst: IpAddr::V6(ip.dst_addr()),
            proto,
            ports: ports_of(proto, first, payload),
        })
    }
}

/// Packets and bytes a rule (or the default) decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hits {
    /// Packets.
    pub packets: u64,
    /// Bytes (the lengths of the slices given to [`Acl::check`]).
    pub bytes: u64,
}

impl Hits {
    fn add(&mut self, len: usize) {
        self.packets += 1;
        self.bytes += len as u64;
    }
}

/// Which rule decided, and what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// The decision.
    pub action: Action,
    /// The index of the first matching rule, `None` for the default (or a malformed
    /// packet).
    pub rule: Option<usize>,
}

/// An ordered rule list: the first matching rule decides, else the default action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    rules: Vec<Rule>,
    hits: Vec<Hits>,
    default: Action,
    default_hits: Hits,
    malformed: Hits,
}

impl Default for Acl {
    /// No rules, default allow.
    fn default() -> Acl {
        Acl::new(Vec::new(), Action::Allow)
    }
}

impl Acl {
    /// A list of `rules`, in order, deciding `default` when none matches.
    pub fn new(rules: Vec<Rule>, default: Action) -> Acl {
        let hits = alloc::vec![Hits::default(); rules.len()];
        Acl {
            rules,
            hits,
            default,
            default_hits: Hits::default(),
            malformed: Hits::default(),
        }
    }

    /// Parses one rule per line (blank lines and lines starting with `#` skipped). The
    /// error names the line (1-based) with the problem.
    pub fn parse_lines(text: &str, default: Action) -> Result<Acl, (usize, AclParseError)> {
        let mut rules = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            rules.push(line.parse().map_err(|e| (number + 1, e))?);
        }
        Ok(Acl::new(rules, default))
    }

    /// Looks up every interface name the rules use with `lookup` and stores the ids.
    /// Returns the names that did not resolve (their rules then match nothing); call it
    /// again when interfaces change.
    pub fn resolve(&mut self, mut lookup: impl FnMut(&str) -> Option<IfaceId>) -> Vec<String> {
        let mut unresolved = Vec::new();
        for rule in &mut self.rules {
            for m in [&mut rule.in_iface, &mut rule.out_iface]
                .into_iter()
                .flatten()
            {
                m.id = lookup(&m.name);
                if m.id.is_none() && !unresolved.contains(&m.name) {
                    unresolved.push(m.name.clone());
                }
            }
        }
        unresolved
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The action when no rule matches.
    pub fn default_action(&self) -> Action {
        self.default
    }

    /// The verdict on an IP `packet` (IPv4 or IPv6) from `in_iface` to `out_iface`,
    /// without counting it. A packet that does not parse is denied.
    pub fn evaluate(
        &self,
        packet: &[u8],
        in_iface: Option<IfaceId>,
        out_iface: Option<IfaceId>,
    ) -> Verdict {
        PacketFields::parse(packet).map_or(
            Verdict {
                action: Action::Deny,
                rule: None,
            },
            |fields| self.evaluate_fields(&fields, in_iface, out_iface),
        )
    }

    /// The verdict on a packet already parsed into `fields`.
    pub fn evaluate_fields(
        &self,
        fields: &PacketFields,
        in_iface: Option<IfaceId>,
        out_iface: Option<IfaceId>,
    ) -> Verdict {
        let first = self
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches(fields, in_iface, out_iface));
        match first {
            Some((index, rule)) => Verdict {
                action: rule.action,
                rule: Some(index),
            },
            None => Verdict {
                action: self.default,
                rule: None,
            },
        }
    }

    /// [`evaluate`](Acl::evaluate), counting the packet against the rule (or default)
    /// that decided, or as malformed.
    pub fn check(
        &mut self,
        packet: &[u8],
        in_iface: Option<IfaceId>,
        out_iface: Option<IfaceId>,
    ) -> Action {
        let Some(fields) = PacketFields::parse(packet) else {
            self.malformed.add(packet.len());
            return Action::Deny;
        };
        let verdict = self.evaluate_fields(&fields, in_iface, out_iface);
        let counter = match verdict.rule {
            Some(index) => self.hits.get_mut(index),
            None => Some(&mut self.default_hits),
        };
        if let Some(counter) = counter {
            counter.add(packet.len());
        }
        verdict.action
    }

    /// What rule `index` decided so far (`None` past the last rule).
    pub fn hits(&self, index: usize) -> Option<Hits> {
        self.hits.get(index).copied()
    }

    /// What the default action decided so far.
    pub fn default_hits(&self) -> Hits {
        self.default_hits
    }

    /// Packets denied because they did not parse (see [`PacketFields::parse`]).
    pub fn malformed(&self) -> Hits {
        self.malformed
    }
}
