//! A stub resolver (RFC 1035 §7) over imp's own sockets: A and AAAA queries over UDP to
//! each server in turn (the `--dns` ones first, then those DHCP named), again over TCP
//! when the answer comes back truncated (§4.2.2), CNAME chains followed, answers kept
//! in a small cache for their TTL. [`lookup_host`] is the entry point;
//! [`TcpStream::connect`](crate::TcpStream::connect) takes `"name:port"` through it.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::Duration as StdDuration;

use impnet_core::{Duration, Instant};
use impnet_wire::dns::{self, Builder, Flags, Message, RData, Type};

use crate::{Runtime, TcpStream, UdpSocket};

/// Rounds over the server list before giving up (RFC 1035 §4.2.1 asks for
/// retransmission; RFC 1536 §1 warns against too many).
const ROUNDS: u32 = 2;
/// How long one UDP query waits in round `n` (0-based): 1 s, then 2 s.
fn udp_wait(round: u32) -> StdDuration {
    StdDuration::from_secs(1 << round)
}
/// How long a TCP query (connect, send, answer) may take.
const TCP_WAIT: StdDuration = StdDuration::from_secs(5);
/// Entries the cache holds; beyond it expired entries go, then the soonest to expire.
const CACHE_ENTRIES: usize = 256;
/// The longest a record is cached, whatever its TTL (one day, as many stubs do).
const MAX_TTL_SECS: u32 = 86_400;
/// CNAMEs followed within one answer.
const MAX_CNAMES: usize = 8;

/// Cached answers, keyed by lower-case name and type. Time is a parameter (`now`), so
/// tests run it on a virtual clock.
#[derive(Debug, Default)]
pub struct DnsCache {
    entries: HashMap<(String, u16), CacheEntry>,
}

#[derive(Debug, Clone)]
struct CacheEntry {
    addrs: Vec<IpAddr>,
    expires_at: Instant,
}

impl DnsCache {
    /// The addresses cached for `name` and `qtype` that are still valid at `now`.
    pub fn get(&self, now: Instant, name: &str, qtype: Type) -> Option<Vec<IpAddr>> {
        let entry = self.entries.get(&key(name, qtype))?;
        (now < entry.expires_at).then(|| entry.addrs.clone())
    }

    /// Cache `addrs` for `ttl` seconds from `now` (at most a day; TTL 0: not cached,
    /// RFC 1035 §3.2.1: "Zero values are interpreted to mean that the RR can only be
    /// used for the transaction in progress").
    pub fn insert(&mut self, now: Instant, name: &str, qtype: Type, addrs: Vec<IpAddr>, ttl: u32) {
        if ttl == 0 {
            return;
        }
        if self.entries.len() >= CACHE_ENTRIES {
            self.entries.retain(|_, e| now < e.expires_at);
        }
        if self.entries.len() >= CACHE_ENTRIES {
            let soonest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.expires_at)
                .map(|(k, _)| k.clone());
            if let Some(soonest) = soonest {
                self.entries.remove(&soonest);
            }
        }
        let expires_at = now + Duration::from_secs(u64::from(ttl.min(MAX_TTL_SECS)));
        self.entries
            .insert(key(name, qtype), CacheEntry { addrs, expires_at });
    }

    /// Entries held (expired ones included until they are pushed out).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn key(name: &str, qtype: Type) -> (String, u16) {
    let name = name.strip_suffix('.').unwrap_or(name);
    (name.to_ascii_lowercase(), u16::from(qtype))
}

/// The resolver's settings and cache, one per [`Runtime`].
#[derive(Debug, Default)]
pub(crate) struct ResolverState {
    /// Servers given by hand (`--dns`), asked before DHCP's.
    pub(crate) servers: Mutex<Vec<IpAddr>>,
    pub(crate) cache: Mutex<DnsCache>,
}

/// Resolve `"host:port"` (a name, an IPv4 address, or `[IPv6]`) to socket addresses:
/// IPv4 ones first. Names go to the runtime's DNS servers ([`Runtime::set_dns_servers`],
/// then those DHCP named); `localhost` is 127.0.0.1 and ::1.
pub fn lookup_host(rt: &Runtime, host_port: &str) -> io::Result<Vec<SocketAddr>> {
    if let Ok(addr) = host_port.parse::<SocketAddr>() {
        return Ok(vec![addr]);
    }
    let (host, port) = host_port.rsplit_once(':').ok_or_else(|| {
        io::Error::new(
            ErrorKind::InvalidInput,
            format!("`{host_port}` is not HOST:PORT (e.g. example.com:80)"),
        )
    })?;
    let port: u16 = port.parse().map_err(|_| {
        io::Error::new(
            ErrorKind::InvalidInput,
            format!("`{port}` in `{host_port}` is not a port number (0 to 65535)"),
        )
    })?;
    let ips = lookup_ips(rt, host)?;
    Ok(ips
        .into_iter()
        .map(|ip| SocketAddr::new(ip, port))
        .collect())
}

/// Resolve a host name (or an address literal) to its addresses, IPv4 first.
pub fn lookup_ips(rt: &Runtime, host: &str) -> io::Result<Vec<IpAddr>> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(vec![Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()]);
    }
    check_host_name(host)?;
    let servers = rt.dns_servers();
    if servers.is_empty() {
        return Err(io::Error::new(
            ErrorKind::NotFound,
            format!(
                "cannot resolve `{host}`: no DNS server (give one with --dns, or let DHCP \
                 name one)"
            ),
        ));
    }
    let v4 = resolve(rt, &servers, host, Type::A);
    let v6 = resolve(rt, &servers, host, Type::Aaaa);
    let mut ips = Vec::new();
    let mut first_error = None;
    for result in [v4, v6] {
        match result {
            Ok(found) => ips.extend(found),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if ips.is_empty() {
        return Err(first_error.unwrap_or_else(|| {
            io::Error::new(
                ErrorKind::NotFound,
                format!("`{host}` has no IPv4 or IPv6 address"),
            )
        }));
    }
    Ok(ips)
}

/// RFC 1035 §2.3.4 limits, checked before anything is sent.
fn check_host_name(host: &str) -> io::Result<()> {
    let mut buf = [0u8; 300];
    let mut builder = Builder::new(&mut buf, 0, Flags::default()).map_err(wire_error)?;
    builder.question(host, Type::A, dns::CLASS_IN).map_err(|e| {
        io::Error::new(
            ErrorKind::InvalidInput,
            format!("`{host}` is not a host name ({e}): labels of 1 to 63 bytes, 255 in all"),
        )
    })
}

fn wire_error(e: impnet_wire::Error) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, e)
}

/// The addresses of type `qtype` for `name`: from the cache, else asked of `servers`.
fn resolve(rt: &Runtime, servers: &[IpAddr], name: &str, qtype: Type) -> io::Result<Vec<IpAddr>> {
    let state = rt.resolver();
    if let Some(hit) = lock(&state.cache).get(rt.now(), name, qtype) {
        return Ok(hit);
    }
    let mut last_error = None;
    for round in 0..ROUNDS {
        for &server in servers {
            match query(rt, server, name, qtype, udp_wait(round)) {
                Ok(Answer::Found { addrs, ttl }) => {
                    lock(&state.cache).insert(rt.now(), name, qtype, addrs.clone(), ttl);
                    return Ok(addrs);
                }
                // An authoritative "no such name" ends the search (RFC 1035 §4.1.1 RCODE 3).
                Ok(Answer::NoSuchName) => {
                    return Err(io::Error::new(
                        ErrorKind::NotFound,
                        format!("`{name}`: no such name (DNS server {server})"),
                    ));
                }
                Err(e) => last_error = Some(e),
            }
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::new(ErrorKind::TimedOut, "no answer")))
}

/// What a server said.
#[derive(Debug)]
enum Answer {
    /// Addresses (maybe none: the name exists without records of the type) and the
    /// smallest TTL among the records used.
    Found { addrs: Vec<IpAddr>, ttl: u32 },
    /// RCODE 3.
    NoSuchName,
}

/// One query to one server: over UDP, and over TCP if the answer was truncated.
fn query(
    rt: &Runtime,
    server: IpAddr,
    name: &str,
    qtype: Type,
    wait: StdDuration,
) -> io::Result<Answer> {
    let id = random_id();
    let mut buf = [0u8; 300];
    let flags = Flags {
        recursion_desired: true,
        ..Flags::default()
    };
    let mut builder = Builder::new(&mut buf, id, flags).map_err(wire_error)?;
    builder
        .question(name, qtype, dns::CLASS_IN)
        .map_err(wire_error)?;
    let request = builder.finish();
    let server_addr = SocketAddr::new(server, dns::PORT);
    let local: SocketAddr = match server {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(rt, local)?;
    socket.set_read_timeout(Some(wait))?;
    socket.send_to(request, server_addr)?;
    let mut reply = vec![0u8; 4096];
    loop {
        let (len, from) = socket.recv_from(&mut reply)?;
        if from != server_addr {
            continue; // RFC 5452 §9.1: only the server asked may answer
        }
        let message = match Message::parse(&reply[..len]) {
            Ok(m) if m.id == id && m.flags.response => m,
            _ => continue,
        };
        if message.flags.truncated {
            return query_tcp(rt, server_addr, request, id, name, qtype);
        }
        return interpret(&message, name, qtype, server);
    }
}

/// RFC 1035 §4.2.2: the same query over TCP, each message behind a 2-byte length.
fn query_tcp(
    rt: &Runtime,
    server: SocketAddr,
    request: &[u8],
    id: u16,
    name: &str,
    qtype: Type,
) -> io::Result<Answer> {
    let mut stream = TcpStream::connect_timeout(rt, &server, TCP_WAIT)?;
    stream.set_read_timeout(Some(TCP_WAIT))?;
    stream.set_write_timeout(Some(TCP_WAIT))?;
    let mut framed = Vec::with_capacity(request.len() + 2);
    framed.extend_from_slice(&(request.len() as u16).to_be_bytes());
    framed.extend_from_slice(request);
    stream.write_all(&framed)?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len)?;
    let mut reply = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut reply)?;
    let message = Message::parse(&reply).map_err(wire_error)?;
    if message.id != id || !message.flags.response {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            format!("DNS server {server} answered over TCP with another query's reply"),
        ));
    }
    interpret(&message, name, qtype, server.ip())
}

/// The addresses an answer gives for `name`, following CNAMEs within it.
fn interpret(message: &Message<'_>, name: &str, qtype: Type, server: IpAddr) -> io::Result<Answer> {
    match message.flags.rcode {
        0 => {}
        3 => return Ok(Answer::NoSuchName),
        rcode => {
            return Err(io::Error::other(format!(
                "DNS server {server} failed the query for `{name}` (RCODE {rcode})"
            )));
        }
    }
    if !message
        .questions()
        .any(|q| q.name.eq_text(name) && q.qtype == qtype)
    {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            format!("DNS server {server} answered another question"),
        ));
    }
    let mut target = name.to_string();
    let mut ttl = u32::MAX;
    for _ in 0..MAX_CNAMES {
        let cname = message.answers().find_map(|r| match r.data {
            RData::Cname(to) if r.name.eq_text(&target) => Some((to.to_string(), r.ttl)),
            _ => None,
        });
        let Some((to, cname_ttl)) = cname else { break };
        target = to;
        ttl = ttl.min(cname_ttl);
    }
    let mut addrs = Vec::new();
    for record in message.answers().filter(|r| r.name.eq_text(&target)) {
        let ip = match (record.data, qtype) {
            (RData::A(a), Type::A) => IpAddr::V4(a),
            (RData::Aaaa(a), Type::Aaaa) => IpAddr::V6(a),
            _ => continue,
        };
        addrs.push(ip);
        ttl = ttl.min(record.ttl);
    }
    if addrs.is_empty() {
        ttl = 0; // no negative caching
    }
    Ok(Answer::Found { addrs, ttl })
}

/// A query id nobody off the path can guess (RFC 5452 §4.3): from the process's
/// random hasher keys and a counter.
fn random_id() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let state = RandomState::new();
    state.hash_one(COUNTER.fetch_add(1, Ordering::Relaxed)) as u16
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_honours_ttl_on_a_virtual_clock() {
        let mut cache = DnsCache::default();
        let t0 = Instant::from_millis(1_000);
        let ip: IpAddr = Ipv4Addr::new(10, 0, 0, 9).into();
        cache.insert(t0, "Host.Example.", Type::A, vec![ip], 30);
        assert_eq!(cache.get(t0, "host.example", Type::A), Some(vec![ip]));
        assert_eq!(cache.get(t0, "host.example", Type::Aaaa), None);
        let almost = t0 + Duration::from_secs(30) - Duration::from_millis(1);
        assert_eq!(cache.get(almost, "HOST.example", Type::A), Some(vec![ip]));
        assert_eq!(
            cache.get(t0 + Duration::from_secs(30), "host.example", Type::A),
            None
        );
        cache.insert(t0, "zero.example", Type::A, vec![ip], 0);
        assert_eq!(
            cache.get(t0, "zero.example", Type::A),
            None,
            "TTL 0 is not cached"
        );
    }

    #[test]
    fn cache_is_bounded() {
        let mut cache = DnsCache::default();
        let t0 = Instant::from_millis(0);
        for i in 0..(CACHE_ENTRIES as u32 + 50) {
            cache.insert(t0, &format!("h{i}.test"), Type::A, Vec::new(), 10 + i);
        }
        assert_eq!(cache.len(), CACHE_ENTRIES);
        // The soonest to expire went first; the last one is there.
        assert!(cache.get(t0, "h0.test", Type::A).is_none());
        let last = format!("h{}.test", CACHE_ENTRIES + 49);
        assert!(cache.get(t0, &last, Type::A).is_some());
    }

    fn answer(buf: &mut [u8], rcode: u8) -> Message<'_> {
        let flags = Flags {
            response: true,
            rcode,
            ..Flags::default()
        };
        let mut b = Builder::new(buf, 1, flags).unwrap();
        b.question("www.test", Type::A, dns::CLASS_IN).unwrap();
        let section = dns::Section::Answer;
        b.record(
            section,
            "www.test",
            300,
            dns::RecordData::Cname("real.test"),
        )
        .unwrap();
        b.record(
            section,
            "other.test",
            5,
            dns::RecordData::A(Ipv4Addr::new(1, 1, 1, 1)),
        )
        .unwrap();
        b.record(
            section,
            "real.test",
            60,
            dns::RecordData::A(Ipv4Addr::new(10, 0, 0, 7)),
        )
        .unwrap();
        let len = b.finish().len();
        Message::parse(&buf[..len]).unwrap()
    }

    #[test]
    fn answers_follow_cnames_and_take_the_smallest_ttl() {
        let mut buf = [0u8; 512];
        let server = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let message = answer(&mut buf, 0);
        let Answer::Found { addrs, ttl } =
            interpret(&message, "WWW.test", Type::A, server).unwrap()
        else {
            panic!("no addresses");
        };
        assert_eq!(addrs, vec![IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7))]);
        assert_eq!(ttl, 60);
        assert!(interpret(&message, "elsewhere.test", Type::A, server).is_err());
        let mut buf = [0u8; 512];
        let nx = answer(&mut buf, 3);
        assert!(matches!(
            interpret(&nx, "www.test", Type::A, server),
            Ok(Answer::NoSuchName)
        ));
        let mut buf = [0u8; 512];
        let servfail = answer(&mut buf, 2);
        assert!(interpret(&servfail, "www.test", Type::A, server).is_err());
    }
}

/// What [`TcpStream::connect`](crate::TcpStream::connect) accepts: the types
/// `std::net::ToSocketAddrs` takes, except that a host name (`"example.com:80"`,
/// `("example.com", 80)`) is resolved by imp's resolver ([`lookup_host`]) rather than
/// the host system's.
pub trait ToSocketAddrs {
    /// The addresses, in the order to try them.
    fn to_imp_addrs(&self, rt: &Runtime) -> io::Result<Vec<SocketAddr>>;
}

macro_rules! plain_addrs {
    ($($t:ty),*) => {$(
        impl ToSocketAddrs for $t {
            fn to_imp_addrs(&self, _rt: &Runtime) -> io::Result<Vec<SocketAddr>> {
                Ok(vec![SocketAddr::from(*self)])
            }
        }
    )*};
}

plain_addrs!(
    SocketAddr,
    std::net::SocketAddrV4,
    std::net::SocketAddrV6,
    (IpAddr, u16),
    (Ipv4Addr, u16),
    (Ipv6Addr, u16)
);

impl ToSocketAddrs for str {
    fn to_imp_addrs(&self, rt: &Runtime) -> io::Result<Vec<SocketAddr>> {
        lookup_host(rt, self)
    }
}

impl ToSocketAddrs for String {
    fn to_imp_addrs(&self, rt: &Runtime) -> io::Result<Vec<SocketAddr>> {
        lookup_host(rt, self)
    }
}

impl ToSocketAddrs for (&str, u16) {
    fn to_imp_addrs(&self, rt: &Runtime) -> io::Result<Vec<SocketAddr>> {
        let ips = lookup_ips(rt, self.0)?;
        Ok(ips
            .into_iter()
            .map(|ip| SocketAddr::new(ip, self.1))
            .collect())
    }
}

impl ToSocketAddrs for (String, u16) {
    fn to_imp_addrs(&self, rt: &Runtime) -> io::Result<Vec<SocketAddr>> {
        (self.0.as_str(), self.1).to_imp_addrs(rt)
    }
}

impl ToSocketAddrs for [SocketAddr] {
    fn to_imp_addrs(&self, _rt: &Runtime) -> io::Result<Vec<SocketAddr>> {
        Ok(self.to_vec())
    }
}

impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {
    fn to_imp_addrs(&self, rt: &Runtime) -> io::Result<Vec<SocketAddr>> {
        (**self).to_imp_addrs(rt)
    }
}
