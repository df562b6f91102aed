//! SYN cookies (RFC 4987 §3.6): when a listener's backlog is full, its SYN-ACK carries
//! the connection's state in the initial sequence number instead of a SYN-RECEIVED
//! child, and the returning ACK, which acknowledges ISS + 1, proves the peer received it.
//!
//! The cookie (our ISS) is 32 bits:
//! - bits 27-31: a counter of 64-second periods (the low 5 bits of now / 64 s), so a
//!   cookie expires: it is accepted in the period it was made and the next one;
//! - bits 24-26: the peer's MSS, as an index into [`MSS_TABLE`] (rounded down);
//! - bits 0-23: a MAC, SipHash-2-4 keyed by the stack's secret over the connection's
//!   addresses and ports, the peer's ISN, the full period counter and the MSS index.
//!
//! The cookie has no room for window scaling and SACK-permitted; when the peer offered
//! timestamps, they travel in the low 6 bits of our SYN-ACK's TSval, which the peer
//! echoes in every TSecr: bits 0-3 the peer's window-scale shift (15: none), bit 4
//! SACK-permitted, bit 5 ECN (RFC 3168: the SYN was an ECN-setup SYN and we agreed, so
//! the SYN-ACK carried ECE). Without timestamps a cookie connection has none of them,
//! and the SYN-ACK does not offer them.

use core::net::SocketAddr;

use impnet_wire::tcp::{Flags, Options, Repr};

use super::segment::{Fill, write_segment};
use super::seq::SeqNumber;
use crate::secret::Secret;
use crate::siphash::siphash24;
use crate::time::Instant;

/// The MSS values a cookie can carry, smallest first: the peer's MSS is rounded down to
/// one of these (the common ones: RFC 879's default, IPv6 and tunnel paths, Ethernet,
/// and jumbo frames).
pub const MSS_TABLE: [u16; 8] = [536, 1200, 1300, 1400, 1440, 1460, 4312, 8960];

/// The length of one cookie period in milliseconds.
const PERIOD_MS: u64 = 64_000;

/// Low bits of TSval that carry options.
const TS_OPTION_BITS: u32 = 6;
/// The window-scale field value meaning "no window scaling".
const NO_WSCALE: u32 = 15;

/// Makes and checks cookies with a key derived from the stack's secret.
#[derive(Clone)]
pub(crate) struct CookieJar {
    key: (u64, u64),
}

impl core::fmt::Debug for CookieJar {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CookieJar").finish_non_exhaustive()
    }
}

impl CookieJar {
    pub fn new(secret: &Secret) -> CookieJar {
        CookieJar {
            key: (
                secret.derive(b"syn cookie k0"),
                secret.derive(b"syn cookie k1"),
            ),
        }
    }

    /// The 24-bit MAC of a cookie.
    fn mac(
        &self,
        ends: (SocketAddr, SocketAddr),
        peer_isn: u32,
        period: u64,
        mss_index: u32,
    ) -> u32 {
        let (local, remote) = ends;
        // IPv4: 12 bytes of tuple (as before IPv6), IPv6: 36; then 16 more.
        let mut data = [0u8; 52];
        let mut ip = [0u8; 16];
        let mut at = 0;
        for end in [local, remote] {
            let n = super::addr_octets(end.ip(), &mut ip);
            data[at..at + n].copy_from_slice(&ip[..n]);
            data[at + n..at + n + 2].copy_from_slice(&end.port().to_be_bytes());
            at += n + 2;
        }
        data[at..at + 4].copy_from_slice(&peer_isn.to_be_bytes());
        data[at + 4..at + 12].copy_from_slice(&period.to_be_bytes());
        data[at + 12..at + 16].copy_from_slice(&mss_index.to_be_bytes());
        (siphash24(self.key.0, self.key.1, &data[..at + 16]) & 0x00ff_ffff) as u32
    }

    /// The cookie (our ISS) for a SYN from `ends.1` with ISN `peer_isn` and MSS option
    /// `peer_mss` at `now`.
    pub fn make(
        &self,
        now: Instant,
        ends: (SocketAddr, SocketAddr),
        peer_isn: u32,
        peer_mss: u16,
    ) -> SeqNumber {
        let period = now.as_millis() / PERIOD_MS;
        let index = MSS_TABLE.iter().rposition(|&m| m <= peer_mss).unwrap_or(0) as u32;
        let mac = self.mac(ends, peer_isn, period, index);
        SeqNumber(((period as u32 & 0x1f) << 27) | (index << 24) | mac)
    }

    /// The peer's MSS if `cookie` is one this jar made for `ends` and `peer_isn` in the
    /// current period or the one before.
    pub fn check(
        &self,
        now: Instant,
        ends: (SocketAddr, SocketAddr),
        peer_isn: u32,
        cookie: u32,
    ) -> Option<u16> {
        let current = now.as_millis() / PERIOD_MS;
        let index = (cookie >> 24) & 0x7;
        let period = [Some(current), current.checked_sub(1)]
            .into_iter()
            .flatten()
            .find(|p| (*p as u32 & 0x1f) == cookie >> 27)?;
        (self.mac(ends, peer_isn, period, index) == cookie & 0x00ff_ffff)
            .then(|| MSS_TABLE[index as usize])
    }
}

/// Our SYN-ACK's TSval near `now_ts` carrying the peer's window-scale shift, SACK
/// permission and ECN in its low bits; never above `now_ts`, so the peer sees time go
/// forward.
pub(crate) fn encode_ts(now_ts: u32, window_scale: Option<u8>, sack: bool, ecn: bool) -> u32 {
    let wscale = window_scale.map_or(NO_WSCALE, |s| u32::from(s.min(14)));
    let bits = wscale | (u32::from(sack) << 4) | (u32::from(ecn) << 5);
    let base = now_ts.wrapping_sub(1 << TS_OPTION_BITS) & !((1 << TS_OPTION_BITS) - 1);
    base | bits
}

/// The options [`encode_ts`] put into the TSval the peer now echoes as `tsecr`.
pub(crate) fn decode_ts(tsecr: u32) -> (Option<u8>, bool, bool) {
    let wscale = tsecr & 0xf;
    let window_scale = (wscale != NO_WSCALE).then_some(wscale.min(14) as u8);
    (window_scale, tsecr & 0x10 != 0, tsecr & 0x20 != 0)
}

/// A SYN-ACK that carries a cookie and leaves no state behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CookieSynAck {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The cookie.
    pub seq: u32,
    /// The peer's ISN + 1.
    pub ack: u32,
    /// Our receive window (unscaled, as on every SYN).
    pub window: u16,
    pub options: Options,
    /// An ECN-setup SYN-ACK (ECE set, RFC 3168 §6.1.1).
    pub ecn: bool,
}

impl CookieSynAck {
    /// Write it into `buf` (the checksum computed when `checksum`).
    pub fn write(&self, buf: &mut [u8], checksum: bool) -> Option<usize> {
        let repr = Repr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq: self.seq,
            ack: self.ack,
            flags: if self.ecn {
                Flags::SYN | Flags::ACK | Flags::ECE
            } else {
                Flags::SYN | Flags::ACK
            },
            window: self.window,
            options: self.options,
            ..Repr::default()
        };
        let fill = if checksum {
            Fill::Checksum
        } else {
            Fill::Partial
        };
        write_segment(
            &repr,
            super::buffer::Slices::empty(),
            (self.local.ip(), self.remote.ip()),
            buf,
            fill,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, SocketAddrV4};

    fn ends(port: u16) -> (SocketAddr, SocketAddr) {
        (
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80).into(),
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), port).into(),
        )
    }

    fn jar(seed: u8) -> CookieJar {
        CookieJar::new(&Secret::from_bytes([seed; Secret::LEN]))
    }

    #[test]
    fn a_cookie_checks_for_its_connection_only_and_expires() {
        let jar = jar(1);
        let t = Instant::from_millis(1_000_000);
        let cookie = jar.make(t, ends(5000), 777, 1460).0;
        assert_eq!(jar.check(t, ends(5000), 777, cookie), Some(1460));
        assert_eq!(
            jar.check(
                t + crate::time::Duration::from_secs(70),
                ends(5000),
                777,
                cookie
            ),
            Some(1460)
        );
        assert_eq!(
            jar.check(
                t + crate::time::Duration::from_secs(140),
                ends(5000),
                777,
                cookie
            ),
            None
        );
        assert_eq!(jar.check(t, ends(5001), 777, cookie), None, "another port");
        assert_eq!(
            jar.check(t, ends(5000), 778, cookie),
            None,
            "another peer ISN"
        );
        assert_eq!(
            jar.check(t, ends(5000), 777, cookie ^ 1),
            None,
            "a forged MAC"
        );
        assert_eq!(
            jar.check(t, ends(5000), 777, cookie ^ (1 << 24)),
            None,
            "another MSS"
        );
        assert_eq!(
            self::jar(2).check(t, ends(5000), 777, cookie),
            None,
            "another secret"
        );
    }

    #[test]
    fn the_mss_rounds_down_to_the_table() {
        let jar = jar(3);
        let t = Instant::from_millis(5);
        for (offered, kept) in [
            (1460, 1460),
            (1459, 1440),
            (9000, 8960),
            (100, 536),
            (536, 536),
        ] {
            let cookie = jar.make(t, ends(1), 9, offered).0;
            assert_eq!(jar.check(t, ends(1), 9, cookie), Some(kept), "{offered}");
        }
    }

    #[test]
    fn options_travel_in_the_timestamp() {
        for (wscale, sack, ecn) in [
            (None, false, true),
            (Some(0), true, false),
            (Some(7), false, true),
            (Some(14), true, true),
        ] {
            let ts = encode_ts(1_000_000, wscale, sack, ecn);
            assert!(ts <= 1_000_000 && ts > 1_000_000 - 128);
            assert_eq!(decode_ts(ts), (wscale, sack, ecn));
        }
        assert_eq!(
            decode_ts(encode_ts(10, Some(3), true, false)),
            (Some(3), true, false)
        );
    }
}
