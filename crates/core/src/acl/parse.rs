//! The text form of a [`Rule`]: `deny proto=tcp dst=10.0.2.0/24 dport=8081`.

use alloc::string::{String, ToString};
use core::fmt;
use core::str::FromStr;

use impnet_wire::{ipv4, ipv6};

use super::{Action, IfaceMatch, PortRange, Prefix, Rule, proto};

/// What is wrong with a rule's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AclParseErrorKind {
    /// The rule is empty or does not start with `allow` or `deny`.
    MissingAction,
    /// A field is not `key=value`.
    NotKeyValue,
    /// The key is none of `in out src dst proto sport dport`.
    UnknownKey,
    /// The key was already given in this rule.
    DuplicateKey,
    /// The value is empty.
    EmptyValue,
    /// Not an `a.b.c.d/n` or an IPv6 `x:y::/n` prefix.
    BadCidr,
    /// `src` and `dst` are prefixes of different families.
    MixedFamilies,
    /// `icmp` with IPv6 prefixes, or `icmpv6` with IPv4 ones.
    ProtoFamily,
    /// Not `tcp`, `udp`, `icmp`, `icmpv6` or a number 0-255.
    BadProto,
    /// Not a port (0-65535) or a range of ports `lo-hi`.
    BadPort,
    /// A port range whose first port is above its last.
    ReversedRange,
    /// Ports given without `proto=tcp` or `proto=udp`.
    PortsWithoutProto,
}

/// Why a rule's text could not be read: the offending token and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclParseError {
    /// The token (`key=value`, or the first word for a missing action; empty for an
    /// empty rule).
    pub token: String,
    /// What is wrong with it.
    pub kind: AclParseErrorKind,
}

impl AclParseError {
    fn new(token: &str, kind: AclParseErrorKind) -> AclParseError {
        AclParseError {
            token: token.to_string(),
            kind,
        }
    }
}

impl fmt::Display for AclParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use AclParseErrorKind as K;
        let why = match self.kind {
            K::MissingAction => "a rule starts with `allow` or `deny`",
            K::NotKeyValue => "not key=value",
            K::UnknownKey => "unknown key (keys: in, out, src, dst, proto, sport, dport)",
            K::DuplicateKey => "key given twice in one rule",
            K::EmptyValue => "empty value",
            K::BadCidr => "not a prefix like 10.0.1.0/24 or fd00:1::/64",
            K::MixedFamilies => "src and dst of one rule are both IPv4 or both IPv6 prefixes",
            K::ProtoFamily => {
                "icmp is IPv4's protocol and icmpv6 IPv6's: it does not go with the rule's prefixes"
            }
            K::BadProto => "protocol is tcp, udp, icmp, icmpv6 or a number 0-255",
            K::BadPort => "port is a number 0-65535 or a range like 1000-2000",
            K::ReversedRange => "port range is reversed (first port above last)",
            K::PortsWithoutProto => "ports need proto=tcp or proto=udp in the same rule",
        };
        if self.token.is_empty() {
            write!(f, "empty rule: {why}")
        } else {
            write!(f, "`{}`: {why}", self.token)
        }
    }
}

impl core::error::Error for AclParseError {}

/// A port: ASCII digits only (`u16`'s parser would take a leading `+`).
fn port(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn port_range(token: &str, value: &str) -> Result<PortRange, AclParseError> {
    let bad = || AclParseError::new(token, AclParseErrorKind::BadPort);
    let (first, last) = match value.split_once('-') {
        Some((a, b)) => (port(a).ok_or_else(bad)?, port(b).ok_or_else(bad)?),
        None => {
            let p = port(value).ok_or_else(bad)?;
            (p, p)
        }
    };
    if first > last {
        return Err(AclParseError::new(token, AclParseErrorKind::ReversedRange));
    }
    Ok(PortRange { first, last })
}

fn protocol(token: &str, value: &str) -> Result<u8, AclParseError> {
    match value.to_ascii_lowercase().as_str() {
        "tcp" => Ok(proto::TCP),
        "udp" => Ok(proto::UDP),
        "icmp" => Ok(proto::ICMP),
        "icmpv6" | "ipv6-icmp" => Ok(proto::ICMPV6),
        number if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) => number
            .parse::<u8>()
            .map_err(|_| AclParseError::new(token, AclParseErrorKind::BadProto)),
        _ => Err(AclParseError::new(token, AclParseErrorKind::BadProto)),
    }
}

/// An IPv4 prefix, or an IPv6 one (the text holds a `:`).
fn prefix(token: &str, value: &str) -> Result<Prefix, AclParseError> {
    let bad = |_| AclParseError::new(token, AclParseErrorKind::BadCidr);
    if value.contains(':') {
        value.parse::<ipv6::Cidr>().map(Prefix::V6).map_err(bad)
    } else {
        value.parse::<ipv4::Cidr>().map(Prefix::V4).map_err(bad)
    }
}

/// The checks across fields: ports only with TCP or UDP, prefixes of one family, and
/// ICMP of that family. `tokens` are the rule's fields, for naming the one at fault.
fn check_rule(rule: &Rule, tokens: &[&str]) -> Result<(), AclParseError> {
    use AclParseErrorKind as K;
    let token = |key: &str| {
        tokens
            .iter()
            .rev()
            .find(|t| t.split_once('=').is_some_and(|(k, _)| k == key))
            .copied()
            .unwrap_or("")
    };
    if (rule.sport.is_some() || rule.dport.is_some())
        && !matches!(rule.proto, Some(proto::TCP | proto::UDP))
    {
        let first = tokens
            .iter()
            .find(|t| t.starts_with("sport=") || t.starts_with("dport="))
            .copied()
            .unwrap_or("");
        return Err(AclParseError::new(first, K::PortsWithoutProto));
    }
    if let (Some(src), Some(dst)) = (rule.src, rule.dst)
        && src.is_ipv6() != dst.is_ipv6()
    {
        let later = tokens
            .iter()
            .rev()
            .find(|t| t.starts_with("src=") || t.starts_with("dst="))
            .copied()
            .unwrap_or("");
        return Err(AclParseError::new(later, K::MixedFamilies));
    }
    let ipv6 = rule.src.or(rule.dst).map(|p| p.is_ipv6());
    let wrong = matches!(
        (rule.proto, ipv6),
        (Some(proto::ICMP), Some(true)) | (Some(proto::ICMPV6), Some(false))
    );
    if wrong {
        return Err(AclParseError::new(token("proto"), K::ProtoFamily));
    }
    Ok(())
}

/// Sets `slot` to `value` unless the key was already given.
fn once<T>(slot: &mut Option<T>, token: &str, value: T) -> Result<(), AclParseError> {
    if slot.is_some() {
        return Err(AclParseError::new(token, AclParseErrorKind::DuplicateKey));
    }
    *slot = Some(value);
    Ok(())
}

/// Reads one `key=value` token into `rule`.
fn field(rule: &mut Rule, token: &str) -> Result<(), AclParseError> {
    use AclParseErrorKind as K;
    let (key, value) = token
        .split_once('=')
        .ok_or_else(|| AclParseError::new(token, K::NotKeyValue))?;
    if value.is_empty() {
        return Err(AclParseError::new(token, K::EmptyValue));
    }
    let cidr = || prefix(token, value);
    let iface = || IfaceMatch {
        name: value.to_string(),
        id: None,
    };
    match key {
        "in" => once(&mut rule.in_iface, token, iface())?,
        "out" => once(&mut rule.out_iface, token, iface())?,
        "src" => once(&mut rule.src, token, cidr()?)?,
        "dst" => once(&mut rule.dst, token, cidr()?)?,
        "proto" => once(&mut rule.proto, token, protocol(token, value)?)?,
        "sport" => once(&mut rule.sport, token, port_range(token, value)?)?,
        "dport" => once(&mut rule.dport, token, port_range(token, value)?)?,
        _ => return Err(AclParseError::new(token, K::UnknownKey)),
    }
    Ok(())
}

impl FromStr for Rule {
    type Err = AclParseError;

    /// Reads the text form: an action, then whitespace-separated `key=value` fields.
    fn from_str(text: &str) -> Result<Rule, AclParseError> {
        let mut tokens = text.split_whitespace();
        let first = tokens.next().unwrap_or("");
        let action = match first.to_ascii_lowercase().as_str() {
            "allow" => Action::Allow,
            "deny" => Action::Deny,
            _ => {
                return Err(AclParseError::new(first, AclParseErrorKind::MissingAction));
            }
        };
        let mut rule = Rule::any(action);
        let fields: alloc::vec::Vec<&str> = tokens.collect();
        for token in &fields {
            field(&mut rule, token)?;
        }
        check_rule(&rule, &fields)?;
        Ok(rule)
    }
}
