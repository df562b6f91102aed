//! Commands (RFC 959 §4.1, RFC 2428, RFC 3659): parsing a control line into a
//! [`Command`], or into the reply that says what was wrong with it; and the address
//! forms of PORT/PASV (`h1,h2,h3,h4,p1,p2`) and EPRT/EPSV (`|1|addr|port|`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};

use crate::reply::Reply;

/// TYPE's argument (RFC 959 §3.1.1): ASCII non-print, or image (binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferType {
    /// `A` (or `A N`): text, lines ending in CRLF on the wire.
    Ascii,
    /// `I` (or `L 8`): bytes as they are.
    Image,
}

/// EPSV's argument (RFC 2428 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpsvArg {
    /// No argument: the control connection's protocol.
    Any,
    /// A network protocol number (1: IPv4, 2: IPv6).
    Protocol(u8),
    /// `EPSV ALL`: from now on only EPSV sets up data connections.
    All,
}

/// One command from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// USER name.
    User(String),
    /// PASS password.
    Pass(String),
    /// CWD path.
    Cwd(String),
    /// CDUP.
    Cdup,
    /// PWD (or XPWD).
    Pwd,
    /// TYPE.
    Type(TransferType),
    /// MODE S (the only mode).
    Mode,
    /// STRU F (the only structure).
    Stru,
    /// PORT h1,h2,h3,h4,p1,p2.
    Port(SocketAddr),
    /// PASV.
    Pasv,
    /// EPRT |proto|addr|port|.
    Eprt(SocketAddr),
    /// EPSV, with an optional protocol or ALL.
    Epsv(EpsvArg),
    /// RETR path.
    Retr(String),
    /// STOR path.
    Stor(String),
    /// LIST, with an optional path.
    List(Option<String>),
    /// NLST, with an optional path.
    Nlst(Option<String>),
    /// SIZE path (RFC 3659 §4).
    Size(String),
    /// MDTM path (RFC 3659 §3).
    Mdtm(String),
    /// REST offset (RFC 3659 §5, stream mode).
    Rest(u64),
    /// ABOR.
    Abor,
    /// QUIT.
    Quit,
    /// NOOP.
    Noop,
    /// SYST.
    Syst,
    /// FEAT (RFC 2389).
    Feat,
    /// OPTS (RFC 2389): the option's text.
    Opts(String),
    /// HELP.
    Help,
}

/// RFC 959 commands this server knows but does not carry out (502).
const NOT_IMPLEMENTED: &[&str] = &[
    "ACCT", "SMNT", "REIN", "STOU", "APPE", "ALLO", "RNFR", "RNTO", "DELE", "RMD", "MKD", "XMKD",
    "XRMD", "SITE", "STAT", "MLSD", "MLST", "AUTH", "PBSZ", "PROT", "CCC", "LANG",
];

/// Parses one control line (its CRLF already removed). A line that is not a command
/// this server carries out gives the reply saying why: 500 (unknown or not a
/// command), 501 (a bad or missing argument), 502 (known, not implemented), 504 (an
/// argument value not implemented), 522 (EPRT/EPSV with a protocol not supported).
pub fn parse(line: &[u8]) -> Result<Command, Reply> {
    let line = std::str::from_utf8(line).map_err(|_| Reply::new(501, "Not UTF-8"))?;
    if line.bytes().any(|b| b == 0 || b == b'\r' || b == b'\n') {
        return Err(Reply::new(501, "A NUL, CR or LF inside the command"));
    }
    let (verb, arg) = match line.split_once(' ') {
        Some((verb, arg)) => (verb, Some(arg)),
        None => (line, None),
    };
    if verb.is_empty() || verb.len() > 4 || !verb.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(Reply::new(500, "Syntax error: no command"));
    }
    let verb = verb.to_ascii_uppercase();
    let need = |what: &str| -> Result<String, Reply> {
        match arg {
            Some(a) if !a.is_empty() => Ok(a.to_string()),
            _ => Err(Reply::new(501, format!("{verb} needs {what}"))),
        }
    };
    let none = |command: Command| -> Result<Command, Reply> {
        match arg {
            Some(a) if !a.trim().is_empty() => {
                Err(Reply::new(501, format!("{verb} takes no argument")))
            }
            _ => Ok(command),
        }
    };
    let optional = || {
        arg.map(str::trim)
            .filter(|a| !a.is_empty())
            .map(String::from)
    };
    Ok(match verb.as_str() {
        "USER" => Command::User(need("a user name")?),
        "PASS" => Command::Pass(arg.unwrap_or("").to_string()),
        "CWD" | "XCWD" => Command::Cwd(need("a directory")?),
        "CDUP" | "XCUP" => none(Command::Cdup)?,
        "PWD" | "XPWD" => none(Command::Pwd)?,
        "TYPE" => Command::Type(parse_type(&need("a type (A or I)")?)?),
        "MODE" => parse_single(&need("a mode (S)")?, "S", "mode", Command::Mode)?,
        "STRU" => parse_single(&need("a structure (F)")?, "F", "structure", Command::Stru)?,
        "PORT" => Command::Port(parse_port(&need("h1,h2,h3,h4,p1,p2")?)?),
        "PASV" => none(Command::Pasv)?,
        "EPRT" => Command::Eprt(parse_eprt(&need("|proto|address|port|")?)?),
        "EPSV" => Command::Epsv(parse_epsv(arg)?),
        "RETR" => Command::Retr(need("a file name")?),
        "STOR" => Command::Stor(need("a file name")?),
        "LIST" => Command::List(optional()),
        "NLST" => Command::Nlst(optional()),
        "SIZE" => Command::Size(need("a file name")?),
        "MDTM" => Command::Mdtm(need("a file name")?),
        "REST" => Command::Rest(
            need("a byte offset")?
                .parse()
                .map_err(|_| Reply::new(501, "REST needs a byte offset (a decimal number)"))?,
        ),
        "ABOR" => none(Command::Abor)?,
        "QUIT" => none(Command::Quit)?,
        "NOOP" => none(Command::Noop)?,
        "SYST" => none(Command::Syst)?,
        "FEAT" => none(Command::Feat)?,
        "OPTS" => Command::Opts(need("an option")?),
        "HELP" => Command::Help,
        v if NOT_IMPLEMENTED.contains(&v) => {
            return Err(Reply::new(502, format!("{v} is not implemented here")));
        }
        v => return Err(Reply::new(500, format!("Unknown command {v}"))),
    })
}

fn parse_type(arg: &str) -> Result<TransferType, Reply> {
    let words: Vec<String> = arg
        .split_ascii_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["A"] | ["A", "N"] => Ok(TransferType::Ascii),
        ["I"] | ["L", "8"] => Ok(TransferType::Image),
        ["A" | "E", _] | ["E"] | ["L", _] => Err(Reply::new(
            504,
            format!("TYPE {arg} is not implemented; use A or I"),
        )),
        _ => Err(Reply::new(501, format!("TYPE {arg}: not a type"))),
    }
}

fn parse_single(arg: &str, only: &str, what: &str, command: Command) -> Result<Command, Reply> {
    let arg = arg.trim().to_ascii_uppercase();
    if arg == only {
        Ok(command)
    } else if arg.len() == 1 && arg.bytes().all(|b| b.is_ascii_alphabetic()) {
        Err(Reply::new(
            504,
            format!("{what} {arg} is not implemented; only {only}"),
        ))
    } else {
        Err(Reply::new(501, format!("{arg}: not a {what}")))
    }
}

/// `h1,h2,h3,h4,p1,p2` (RFC 959 §4.1.2, PORT; also the PASV reply's numbers).
pub fn parse_host_port(text: &str) -> Option<SocketAddrV4> {
    let numbers: Vec<u8> = text
        .trim()
        .split(',')
        .map(|n| n.trim().parse::<u8>())
        .collect::<Result<_, _>>()
        .ok()?;
    let [h1, h2, h3, h4, p1, p2] = numbers.as_slice().try_into().ok()?;
    Some(SocketAddrV4::new(
        Ipv4Addr::new(h1, h2, h3, h4),
        u16::from_be_bytes([p1, p2]),
    ))
}

/// The `h1,h2,h3,h4,p1,p2` form of an address.
pub fn format_host_port(addr: SocketAddrV4) -> String {
    let [h1, h2, h3, h4] = addr.ip().octets();
    let [p1, p2] = addr.port().to_be_bytes();
    format!("{h1},{h2},{h3},{h4},{p1},{p2}")
}

fn parse_port(arg: &str) -> Result<SocketAddr, Reply> {
    match parse_host_port(arg) {
        Some(a) if a.port() != 0 => Ok(SocketAddr::V4(a)),
        _ => Err(Reply::new(
            501,
            format!("PORT {arg}: expected h1,h2,h3,h4,p1,p2 (six numbers 0-255, port not 0)"),
        )),
    }
}

/// `|1|132.235.1.2|6275|` (RFC 2428 §2): any delimiter from 33 to 126.
pub fn parse_extended(arg: &str) -> Result<SocketAddr, Reply> {
    let bad = || Reply::new(501, format!("EPRT {arg}: expected |proto|address|port|"));
    let delim = arg
        .chars()
        .next()
        .filter(|c| ('!'..='~').contains(c))
        .ok_or_else(bad)?;
    let fields: Vec<&str> = arg.split(delim).collect();
    let ["", proto, addr, port, ""] = fields.as_slice() else {
        return Err(bad());
    };
    let port: u16 = port.parse().ok().filter(|&p| p != 0).ok_or_else(bad)?;
    let ip: IpAddr = match *proto {
        "1" => IpAddr::V4(addr.parse().map_err(|_| bad())?),
        "2" => IpAddr::V6(addr.parse().map_err(|_| bad())?),
        _ => return Err(Reply::new(522, "Network protocol not supported, use (1,2)")),
    };
    Ok(SocketAddr::new(ip, port))
}

fn parse_eprt(arg: &str) -> Result<SocketAddr, Reply> {
    parse_extended(arg)
}

/// The EPRT argument for an address.
pub fn format_extended(addr: SocketAddr) -> String {
    let proto = if addr.is_ipv4() { 1 } else { 2 };
    format!("|{proto}|{}|{}|", addr.ip(), addr.port())
}

fn parse_epsv(arg: Option<&str>) -> Result<EpsvArg, Reply> {
    match arg.map(str::trim) {
        None | Some("") => Ok(EpsvArg::Any),
        Some(a) if a.eq_ignore_ascii_case("ALL") => Ok(EpsvArg::All),
        Some("1") => Ok(EpsvArg::Protocol(1)),
        Some("2") => Ok(EpsvArg::Protocol(2)),
        Some(a) if a.parse::<u8>().is_ok() => {
            Err(Reply::new(522, "Network protocol not supported, use (1,2)"))
        }
        Some(a) => Err(Reply::new(501, format!("EPSV {a}: expected 1, 2 or ALL"))),
    }
}

/// The address in a 227 reply's text (`Entering Passive Mode (h1,h2,h3,h4,p1,p2)`;
/// RFC 1123 §4.1.2.6: find the first digit, the parentheses may be missing).
pub fn parse_pasv_reply(text: &str) -> Option<SocketAddrV4> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let rest = &text[start..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ','))
        .unwrap_or(rest.len());
    parse_host_port(&rest[..end])
}

/// The port in a 229 reply's text (`Entering Extended Passive Mode (|||6446|)`).
pub fn parse_epsv_reply(text: &str) -> Option<u16> {
    let open = text.find('(')?;
    let inner = &text[open + 1..text[open..].find(')')? + open];
    let delim = inner.chars().next()?;
    let fields: Vec<&str> = inner.split(delim).collect();
    match fields.as_slice() {
        ["", "", "", port, ""] => port.parse().ok().filter(|&p| p != 0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> u16 {
        parse(line.as_bytes()).unwrap_err().code
    }

    #[test]
    fn commands_parse() {
        assert_eq!(
            parse(b"user anonymous"),
            Ok(Command::User("anonymous".into()))
        );
        assert_eq!(parse(b"TYPE A"), Ok(Command::Type(TransferType::Ascii)));
        assert_eq!(parse(b"TYPE L 8"), Ok(Command::Type(TransferType::Image)));
        assert_eq!(parse(b"RETR a b.txt"), Ok(Command::Retr("a b.txt".into())));
        assert_eq!(parse(b"LIST"), Ok(Command::List(None)));
        assert_eq!(parse(b"PASS"), Ok(Command::Pass(String::new())));
        assert_eq!(parse(b"REST 100"), Ok(Command::Rest(100)));
        assert_eq!(parse(b"EPSV ALL"), Ok(Command::Epsv(EpsvArg::All)));
        assert_eq!(
            parse(b"PORT 10,0,0,1,4,1"),
            Ok(Command::Port("10.0.0.1:1025".parse().unwrap()))
        );
        assert_eq!(
            parse(b"EPRT |2|::1|5282|"),
            Ok(Command::Eprt("[::1]:5282".parse().unwrap()))
        );
        assert_eq!(
            parse(b"EPRT !1!10.1.2.3!80!"),
            Ok(Command::Eprt("10.1.2.3:80".parse().unwrap()))
        );
    }

    #[test]
    fn each_mistake_has_its_code() {
        assert_eq!(code("FOO"), 500);
        assert_eq!(code(""), 500);
        assert_eq!(code("R3TR x"), 500);
        assert_eq!(code("DELE x"), 502);
        assert_eq!(code("MKD x"), 502);
        assert_eq!(code("RETR"), 501);
        assert_eq!(code("TYPE X"), 501);
        assert_eq!(code("TYPE E"), 504);
        assert_eq!(code("TYPE L 7"), 504);
        assert_eq!(code("MODE B"), 504);
        assert_eq!(code("STRU R"), 504);
        assert_eq!(code("PORT 1,2,3"), 501);
        assert_eq!(code("PORT 1,2,3,4,0,0"), 501);
        assert_eq!(code("PORT 1,2,3,400,0,1"), 501);
        assert_eq!(code("EPRT |3|x|1|"), 522);
        assert_eq!(code("EPRT |1|::1|80|"), 501);
        assert_eq!(code("EPRT |1|1.2.3.4|0|"), 501);
        assert_eq!(code("EPSV 7"), 522);
        assert_eq!(code("REST -1"), 501);
        assert_eq!(code("QUIT now"), 501);
        assert_eq!(parse(b"RETR \xff").unwrap_err().code, 501);
        assert_eq!(parse(b"RETR a\0b").unwrap_err().code, 501);
    }

    #[test]
    fn passive_replies_give_their_addresses() {
        let a: SocketAddrV4 = "192.168.1.2:50000".parse().unwrap();
        let text = format!("Entering Passive Mode ({})", format_host_port(a));
        assert_eq!(parse_pasv_reply(&text), Some(a));
        assert_eq!(parse_pasv_reply("=192,168,1,2,195,80"), Some(a));
        assert_eq!(
            parse_epsv_reply("Entering Extended Passive Mode (|||6446|)"),
            Some(6446)
        );
        assert_eq!(parse_epsv_reply("(|||0|)"), None);
        assert_eq!(parse_epsv_reply("no parens"), None);
        let v6: SocketAddr = "[2001:db8::1]:21".parse().unwrap();
        assert_eq!(parse_extended(&format_extended(v6)), Ok(v6));
    }
}
