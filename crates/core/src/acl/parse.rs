//! The text form of a [`Rule`]: `deny proto=tcp dst=10.0.2.0/24 dport=8081`.

use alloc::string::{String, ToString};
use core::fmt;
use core::str::FromStr;

use impnet_wire::ipv4::{Cidr, Protocol};

use super::{Action, IfaceMatch, PortRange, Rule};

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
    /// Not an `a.b.c.d/n` prefix.
    BadCidr,
    /// Not `tcp`, `udp`, `icmp` or a number 0-255.
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
            K::BadCidr => "not a prefix like 10.0.1.0/24",
            K::BadProto => "protocol is tcp, udp, icmp or a number 0-255",
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

fn protocol(token: &str, value: &str) -> Result<Protocol, AclParseError> {
    match value.to_ascii_lowercase().as_str() {
        "tcp" => Ok(Protocol::Tcp),
        "udp" => Ok(Protocol::Udp),
        "icmp" => Ok(Protocol::Icmp),
        number if !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) => number
            .parse::<u8>()
            .map(Protocol::from)
            .map_err(|_| AclParseError::new(token, AclParseErrorKind::BadProto)),
        _ => Err(AclParseError::new(token, AclParseErrorKind::BadProto)),
    }
}

/// Sets `slot` to `value` unless the key was already given.
fn once<T>(slot: &mut Option<T>, token: &str, value: T) -> Result<(), AclParseError> {
    if slot.is_some() {
        return Err(AclParseError::new(token, AclParseErrorKind::DuplicateKey));
    }
    *slot = Some(value);
    Ok(())
}

/// Reads one `key=value` token into `rule`; returns the token of a port field, for the
/// check that ports come with TCP or UDP.
fn field<'a>(rule: &mut Rule, token: &'a str) -> Result<Option<&'a str>, AclParseError> {
    use AclParseErrorKind as K;
    let (key, value) = token
        .split_once('=')
        .ok_or_else(|| AclParseError::new(token, K::NotKeyValue))?;
    if value.is_empty() {
        return Err(AclParseError::new(token, K::EmptyValue));
    }
    let cidr = || {
        value
            .parse::<Cidr>()
            .map_err(|_| AclParseError::new(token, K::BadCidr))
    };
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
        "sport" => {
            once(&mut rule.sport, token, port_range(token, value)?)?;
            return Ok(Some(token));
        }
        "dport" => {
            once(&mut rule.dport, token, port_range(token, value)?)?;
            return Ok(Some(token));
        }
        _ => return Err(AclParseError::new(token, K::UnknownKey)),
    }
    Ok(None)
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
        let mut port_token = None;
        for token in tokens {
            if let Some(t) = field(&mut rule, token)? {
                port_token = port_token.or(Some(t));
            }
        }
        if let Some(token) = port_token
            && !matches!(rule.proto, Some(Protocol::Tcp | Protocol::Udp))
        {
            return Err(AclParseError::new(
                token,
                AclParseErrorKind::PortsWithoutProto,
            ));
        }
        Ok(rule)
    }
}
