//! TCP Fast Open (RFC 7413): data on the SYN, accepted by a server only with a cookie
//! it gave the client before.
//!
//! The state lives where the handshake lives, so an established connection carries
//! none of it: the server's key ([`CookieKey`], in the table) and per-listener cap
//! ([`ListenFastOpen`]); the client's cookies per server ([`CookieCache`], shared by
//! the stack's connections) and what its SYN carries ([`SynFastOpen`], in SYN-SENT).
//!
//! A server child opened by a valid cookie with data is ESTABLISHED at once: the data
//! is readable and the application may answer before the handshake's third segment,
//! which is the round trip saved. Its SYN-ACK leaves through the table's stateless
//! SYN-ACK queue (as SYN cookies' do) ahead of any data, and goes again for each
//! retransmission of the SYN until the peer acknowledges it: the child starts with
//! SND.WL1 = IRS - 1 ([`syn_ack_unacked`]), which the peer's first acceptable ACK moves.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::net::IpAddr;

use impnet_wire::tcp::FastOpenCookie;

use super::TcpHandle;
use super::seq::SeqNumber;
use crate::secret::Secret;
use crate::siphash::siphash24;
use crate::time::{Duration, Instant};

/// Bytes of the cookies we make (Linux's size; RFC 7413 §4.1.1 allows 4 to 16).
pub const COOKIE_LEN: usize = 8;
/// Bytes of SYN options (all of them and the largest cookie) kept out of the SYN's
/// data, so a SYN with data never exceeds the peer's MSS (Linux's
/// `MAX_TCP_OPTION_SPACE` in `tcp_send_syn_data`).
pub const SYN_OPTION_ROOM: u16 = 40;
/// Servers whose cookies (or trouble) a stack remembers; the oldest goes first.
pub const CACHE_SIZE: usize = 256;
/// How long a client leaves Fast Open off towards a server after `losses` SYNs with
/// the option in a row went unanswered or lost their data (RFC 7413 §4.1.3: a
/// middlebox may drop them): none after one (it may be an ordinary loss), then a
/// minute doubled per loss, as Linux's `tcp_send_syn_data` ("Recurring FO SYN losses:
/// revert to regular handshake temporarily": `60 * HZ << syn_loss`).
pub fn blackhole_timeout(losses: u8) -> Option<Duration> {
    (losses > 1).then(|| Duration::from_secs(60 << losses.min(16)))
}

/// The server's cookies: SipHash-2-4 over the client's and the server's IP addresses
/// (RFC 7413 §4.1.2: "the server ... generates a cookie ... by encrypting the client
/// IP address"; the server's address too, as Linux's `__tcp_fastopen_cookie_gen_cipher`
/// does), keyed from the stack's secret or a key the application sets. With the key
/// Linux has (`net.ipv4.tcp_fastopen_key`, `TCP_FASTOPEN_KEY`) the cookie is the one
/// Linux gives: SipHash of the SYN's source and destination addresses under the key's
/// two little-endian halves, stored little-endian. A cookie from another key fails
/// the check.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct CookieKey {
    key: (u64, u64),
}

impl core::fmt::Debug for CookieKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CookieKey").finish_non_exhaustive()
    }
}

impl CookieKey {
    pub fn new(secret: &Secret) -> CookieKey {
        CookieKey {
            key: (
                secret.derive(b"fast open cookie k0"),
                secret.derive(b"fast open cookie k1"),
            ),
        }
    }

    /// The key of these 16 bytes, as Linux reads a `TCP_FASTOPEN_KEY`.
    pub fn from_bytes(bytes: &[u8; 16]) -> CookieKey {
        let mut k0 = [0u8; 8];
        let mut k1 = [0u8; 8];
        k0.copy_from_slice(&bytes[..8]);
        k1.copy_from_slice(&bytes[8..]);
        CookieKey {
            key: (u64::from_le_bytes(k0), u64::from_le_bytes(k1)),
        }
    }

    /// The cookie for a client at `client` reaching us at `server`.
    pub fn make(&self, client: IpAddr, server: IpAddr) -> FastOpenCookie {
        let mut ip = [0u8; 32];
        let mut one = [0u8; 16];
        let n = super::addr_octets(client, &mut one);
        ip[..n].copy_from_slice(&one[..n]);
        let m = super::addr_octets(server, &mut one);
        ip[n..n + m].copy_from_slice(&one[..m]);
        let mac = siphash24(self.key.0, self.key.1, &ip[..n + m]).to_le_bytes();
        FastOpenCookie::new(&mac[..COOKIE_LEN]).unwrap_or(FastOpenCookie::REQUEST)
    }

    /// Whether `cookie` is the one [`CookieKey::make`] gives `client` at `server`, in
    /// either form of the option.
    pub fn check(&self, client: IpAddr, server: IpAddr, cookie: &FastOpenCookie) -> bool {
        !cookie.is_request() && self.make(client, server).same_bytes(cookie)
    }
}

/// Fast Open on a listener (Linux's `TCP_FASTOPEN` socket option).
#[derive(Debug, Clone, Default)]
pub(crate) struct ListenFastOpen {
    /// Most children opened by Fast Open whose SYN-ACK is not acknowledged yet (the
    /// option's queue length, RFC 7413 §5.1's defence against SYN floods with valid
    /// cookies); beyond it a SYN's data waits for a plain handshake.
    pub max_pending: usize,
    /// The children opened by Fast Open, oldest first; those acknowledged or gone are
    /// dropped when the list is full.
    pub children: Vec<TcpHandle>,
    /// This listener's own key (Linux's `TCP_FASTOPEN_KEY` on a listener); None: the
    /// stack's.
    pub key: Option<CookieKey>,
    /// Data on a SYN is taken without a cookie (Linux's `TFO_SERVER_COOKIE_NOT_REQD`,
    /// 0x200 in `net.ipv4.tcp_fastopen`): for servers whose clients are known.
    pub no_cookie: bool,
}

/// What a server does with a SYN's Fast Open option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServerVerdict {
    /// Plain handshake, no cookie in the SYN-ACK (no option, no Fast Open on the
    /// listener, or a valid cookie that cannot be used now).
    Plain,
    /// Plain handshake, the SYN's data unacknowledged, our cookie in the SYN-ACK: a
    /// cookie request, or a cookie that failed the check (RFC 7413 §4.2.2: "If the
    /// cookie is not valid, the server ... MUST ACK only the SYN ... MAY include a valid
    /// cookie").
    Grant(FastOpenCookie),
    /// A valid cookie with data: open the child with the data accepted.
    Accept,
}

/// What our SYN carries (SYN-SENT only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SynFastOpen {
    /// A plain SYN.
    #[default]
    Off,
    /// The SYN with the option timed out: its retransmissions go plain, but the
    /// SYN-ACK may still grant a cookie (the first SYN may have arrived late).
    Dropped,
    /// An empty Fast Open option: a cookie request, no data.
    Request,
    /// The server's cookie and the first data.
    Cookie(FastOpenCookie),
    /// The first data without a cookie or the option (Linux's
    /// `TFO_CLIENT_NO_COOKIE`, for servers that take data on any SYN).
    NoCookie,
}

impl SynFastOpen {
    /// The option on the SYN.
    pub fn option(&self) -> Option<FastOpenCookie> {
        match self {
            SynFastOpen::Off | SynFastOpen::Dropped | SynFastOpen::NoCookie => None,
            SynFastOpen::Request => Some(FastOpenCookie::REQUEST),
            SynFastOpen::Cookie(cookie) => Some(*cookie),
        }
    }
}

/// What a client knows of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CacheEntry {
    /// The server's cookie.
    pub cookie: Option<FastOpenCookie>,
    /// The MSS the server announced last: bounds the data on the next SYN.
    pub mss: u16,
    /// SYNs with the option lost in a row (see [`blackhole_timeout`]).
    pub syn_losses: u8,
    /// Fast Open stays off towards this server until then.
    pub off_until: Option<Instant>,
}

impl CacheEntry {
    /// The most data a SYN with Fast Open carries towards this server at `now`, our
    /// MSS `mss_ours`: None without a cookie or while Fast Open is off towards it.
    pub fn syn_room(&self, now: Instant, mss_ours: u16, default_mss: u16) -> Option<usize> {
        if self.off_until.is_some_and(|t| now < t) || self.cookie.is_none() {
            return None;
        }
        let mss = self.mss.max(default_mss).min(mss_ours);
        Some(usize::from(mss.saturating_sub(SYN_OPTION_ROOM)))
    }
}

/// The client's cookies, per server address (RFC 7413 §4.1.2: "the client caches the
/// cookie"), at most [`CACHE_SIZE`] servers.
#[derive(Debug, Default)]
pub(crate) struct CookieCache {
    entries: VecDeque<(IpAddr, CacheEntry)>,
    /// SYNs carry data without a cookie ([`SynFastOpen::NoCookie`]).
    pub no_cookie: bool,
}

impl CookieCache {
    /// What is known of `server`.
    pub fn get(&self, server: IpAddr) -> Option<CacheEntry> {
        self.entries
            .iter()
            .find(|(ip, _)| *ip == server)
            .map(|(_, e)| *e)
    }

    fn entry(&mut self, server: IpAddr) -> &mut CacheEntry {
        if let Some(at) = self.entries.iter().position(|(ip, _)| *ip == server) {
            return &mut self.entries[at].1;
        }
        if self.entries.len() >= CACHE_SIZE {
            self.entries.pop_front();
        }
        self.entries.push_back((
            server,
            CacheEntry {
                cookie: None,
                mss: 0,
                syn_losses: 0,
                off_until: None,
            },
        ));
        let last = self.entries.len() - 1;
        &mut self.entries[last].1
    }

    /// What `server`'s SYN-ACK to a SYN with the option said: a cookie (kept; an
    /// invalid one is never stored, the old one stays) and its MSS (kept in any case,
    /// as Linux's `tcp_fastopen_cache_set`).
    pub fn store(&mut self, server: IpAddr, cookie: Option<FastOpenCookie>, mss: u16) {
        let entry = self.entry(server);
        if cookie.is_some() {
            entry.cookie = cookie;
        }
        entry.mss = mss;
    }

    /// A SYN with the option towards `server` was lost (`lost`: it timed out, or the
    /// answer to its retransmission had neither cookie nor its data), or not; two in a
    /// row leave Fast Open off for a while from `now` ([`blackhole_timeout`]).
    pub fn syn_lost(&mut self, server: IpAddr, lost: bool, now: Instant) {
        let entry = self.entry(server);
        entry.syn_losses = if lost {
            entry.syn_losses.saturating_add(1)
        } else {
            0
        };
        entry.off_until = blackhole_timeout(entry.syn_losses).map(|d| now + d);
    }

    /// Servers known.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

/// True while a Fast Open child's SYN-ACK is unacknowledged: no acceptable ACK has
/// moved SND.WL1 from where the child started it, IRS - 1 (every other connection
/// starts it at IRS or later).
pub(crate) fn syn_ack_unacked(snd_wl1: SeqNumber, irs: SeqNumber) -> bool {
    snd_wl1 == irs - 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    #[test]
    fn cookies_depend_on_secret_and_address() {
        let key = CookieKey::new(&Secret::from_bytes([1; 16]));
        let other = CookieKey::new(&Secret::from_bytes([2; 16]));
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let server = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9));
        let cookie = key.make(a, server);
        assert_eq!(cookie.as_bytes().len(), COOKIE_LEN);
        assert!(key.check(a, server, &cookie));
        assert!(key.check(a, server, &cookie.with_experimental(true)));
        assert!(!key.check(b, server, &cookie));
        assert!(!key.check(a, b, &cookie));
        assert!(!other.check(a, server, &cookie));
        assert!(!key.check(a, server, &FastOpenCookie::REQUEST));
    }

    /// Linux's cookies for a key set as `net.ipv4.tcp_fastopen_key`'s four hex words
    /// (each stored little-endian): those packetdrill's upstream scripts expect
    /// (`run_all.py`'s TFO_COOKIE and the `server/simple*.pkt` scripts).
    #[test]
    fn cookies_match_linux() {
        let key_of = |words: [u32; 4]| {
            let mut bytes = [0u8; 16];
            for (chunk, word) in bytes.chunks_exact_mut(4).zip(words) {
                chunk.copy_from_slice(&word.to_le_bytes());
            }
            CookieKey::from_bytes(&bytes)
        };
        let hex = |cookie: FastOpenCookie| {
            cookie
                .as_bytes()
                .iter()
                .map(|b| alloc::format!("{b:02x}"))
                .collect::<alloc::string::String>()
        };
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let defaults = key_of([0xa1a1_a1a1, 0xb2b2_b2b2, 0xc3c3_c3c3, 0xd4d4_d4d4]);
        let cookie = defaults.make(ip("192.0.2.1"), ip("192.168.0.1"));
        assert_eq!(hex(cookie), "3021b9d889017eeb");
        let cookie = defaults.make(ip("fd3d:fa7b:d17d::1"), ip("fd3d:a0b:17d6::1"));
        assert_eq!(hex(cookie), "c1d1e9742a47a9bc");
        let simple = key_of([0xa0bf_63f7, 0xed80_3d81, 0xcd64_1d30, 0xcebc_4a90]);
        let cookie = simple.make(ip("10.248.0.2"), ip("192.168.0.2"));
        assert_eq!(hex(cookie), "00abaaabe8e954c2");
        let zero = CookieKey::from_bytes(&[0; 16]);
        assert_eq!(
            hex(zero.make(ip("10.248.0.2"), ip("192.168.0.2"))),
            "93b7aa4f550f8a1a"
        );
    }

    #[test]
    fn cache_is_bounded_and_forgets_the_oldest() {
        let mut cache = CookieCache::default();
        let cookie = FastOpenCookie::new(&[1, 2, 3, 4]).unwrap();
        for i in 0..CACHE_SIZE as u32 + 5 {
            cache.store(IpAddr::V4(Ipv4Addr::from(i)), Some(cookie), 1460);
        }
        assert_eq!(cache.len(), CACHE_SIZE);
        assert_eq!(cache.get(IpAddr::V4(Ipv4Addr::from(0))), None);
        let last = IpAddr::V4(Ipv4Addr::from(CACHE_SIZE as u32 + 4));
        assert_eq!(cache.get(last).unwrap().cookie, Some(cookie));
        // One loss leaves Fast Open on, the second turns it off for four minutes.
        cache.syn_lost(last, true, Instant::ZERO);
        assert_eq!(cache.get(last).unwrap().off_until, None);
        cache.syn_lost(last, true, Instant::ZERO);
        let off = Instant::ZERO + Duration::from_secs(240);
        assert_eq!(cache.get(last).unwrap().off_until, Some(off));
        assert_eq!(cache.get(last).unwrap().cookie, Some(cookie));
        // An answer without a cookie keeps the cookie and takes the MSS.
        cache.store(last, None, 940);
        assert_eq!(cache.get(last).unwrap().cookie, Some(cookie));
        assert_eq!(cache.get(last).unwrap().mss, 940);
        cache.syn_lost(last, false, Instant::ZERO);
        assert_eq!(cache.get(last).unwrap().off_until, None);
    }
}
