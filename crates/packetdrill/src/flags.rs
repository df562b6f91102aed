//! The `--so_flags` string: how the stack under test is set up.
//!
//! Space-separated `key=value` words, each optional, named after the packetdrill
//! options they must agree with:
//!
//! | key | default | what |
//! |---|---|---|
//! | `local_ip` | `192.168.0.2` | the interface's address (give packetdrill the same `--local_ip`) |
//! | `prefix_len` | `16` | its prefix length (packetdrill's netmask, 255.255.0.0) |
//! | `gateway_ip` | `192.168.0.1` | the default route's next hop |
//! | `local_ip6` | `fd3d:fa7b:d17d::2` | the interface's IPv6 address, in packetdrill's IPv6 prefix (give packetdrill `--ip_version=ipv6 --local_ip=` the same) |
//! | `prefix_len6` | `48` | its prefix length (packetdrill's IPv6 default) |
//! | `gateway_ip6` | `fd3d:fa7b:d17d:8888::` | the IPv6 default route's next hop (packetdrill's) |
//! | `mtu` | `1500` | the interface's IP MTU (packetdrill's `--mtu`) |
//! | `cc` | `cubic` | congestion control (`reno`, `cubic`, `vegas`, `bbr`) |
//! | `ecn` | `off` | `off`, `accept` or `request` (Linux `tcp_ecn` 0, 2, 1) |
//! | `rcvbuf`, `sndbuf` | `15728640`, `262144` | buffer sizes: `tcp_rmem`'s maximum (Linux derives its window scale, 8, from it) and `tcp_wmem`'s default |
//! | `seed` | `1` | keys the stack's secret (ISNs, ports): runs repeat exactly |
//! | `fastopen` | `0x70403` | Linux's `net.ipv4.tcp_fastopen` bits the shim knows: 0x1 client (`MSG_FASTOPEN`, `TCP_FASTOPEN_CONNECT`), 0x2 server, 0x200 server takes data without a cookie, 0x400 every listener has Fast Open (queue: its backlog) |
//! | `fastopen_key` | `a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4` | the server's cookie key, as `net.ipv4.tcp_fastopen_key` writes it: with it imp's cookies are Linux's |
//! | `rto_floor` | `variance` | what the 200 ms RTO floor bounds: `variance` as Linux (`RTO = SRTT + max(200 ms, 4*RTTVAR)`), `rto` as RFC 6298 §2.4 (imp's default; `TcpConfig::rto_floor`) |
//! | `mtu_probing` | `0` | Linux's `net.ipv4.tcp_mtu_probing` (`TcpConfig::mtu_probing`): 0 no black-hole detection and no probing, 1 both once a black hole is found, 2 probing from the start |
//! | `base_mss` | `1024` | Linux's `tcp_base_mss` (`TcpConfig::base_mss`) |
//! | `sysctls` | `off` | `on`: read `fastopen`, `fastopen_key`, `tcp_timestamps`, `tcp_ecn`, `tcp_mtu_probing`, `tcp_base_mss`, `tcp_probe_interval` and `tcp_probe_threshold` from `/proc/sys/net/ipv4/` when a call needs them, so a script's own `sysctl` commands set them (run each script in its own network namespace, as `run-upstream.sh` does) |
//!
//! The defaults are the settings of upstream's `gtests/net/common/defaults.sh`, so
//! upstream scripts see the stack they were written for where imp has the knob.

use core::net::{Ipv4Addr, Ipv6Addr};

use impnet_core::tcp::cc::CcAlgorithm;
use impnet_core::tcp::{EcnMode, MtuProbing, RtoFloor};

/// The parsed flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Flags {
    /// The interface's address.
    pub local_ip: Ipv4Addr,
    /// Its prefix length.
    pub prefix_len: u8,
    /// The default route's next hop.
    pub gateway_ip: Ipv4Addr,
    /// The interface's IPv6 address.
    pub local_ip6: Ipv6Addr,
    /// Its prefix length.
    pub prefix_len6: u8,
    /// The IPv6 default route's next hop.
    pub gateway_ip6: Ipv6Addr,
    /// IP MTU.
    pub mtu: usize,
    /// Congestion control.
    pub congestion: CcAlgorithm,
    /// ECN mode.
    pub ecn: EcnMode,
    /// Receive buffer, bytes.
    pub rcvbuf: usize,
    /// Send buffer, bytes.
    pub sndbuf: usize,
    /// Keys the stack's secret.
    pub seed: u64,
    /// Linux's `net.ipv4.tcp_fastopen`.
    pub fastopen: u32,
    /// Linux's `net.ipv4.tcp_fastopen_key`, as bytes.
    pub fastopen_key: [u8; 16],
    /// Read the sysctls from `/proc/sys` instead.
    pub sysctls: bool,
    /// What the RTO's floor bounds.
    pub rto_floor: RtoFloor,
    /// Linux's `net.ipv4.tcp_mtu_probing`.
    pub mtu_probing: MtuProbing,
    /// Linux's `net.ipv4.tcp_base_mss`.
    pub base_mss: u16,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            local_ip: Ipv4Addr::new(192, 168, 0, 2),
            prefix_len: 16,
            gateway_ip: Ipv4Addr::new(192, 168, 0, 1),
            local_ip6: Ipv6Addr::new(0xfd3d, 0xfa7b, 0xd17d, 0, 0, 0, 0, 2),
            prefix_len6: 48,
            gateway_ip6: Ipv6Addr::new(0xfd3d, 0xfa7b, 0xd17d, 0x8888, 0, 0, 0, 0),
            mtu: 1500,
            congestion: CcAlgorithm::Cubic,
            ecn: EcnMode::Off,
            rcvbuf: 15 * 1024 * 1024,
            sndbuf: 256 * 1024,
            seed: 1,
            fastopen: 0x70403,
            fastopen_key: parse_fastopen_key("a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4")
                .unwrap_or_default(),
            sysctls: false,
            rto_floor: RtoFloor::Variance,
            mtu_probing: MtuProbing::Off,
            base_mss: 1024,
        }
    }
}

/// A key as `net.ipv4.tcp_fastopen_key` shows it: four words of eight hex digits
/// joined by `-`, each stored little-endian (a backup key after a comma is ignored).
pub fn parse_fastopen_key(text: &str) -> Option<[u8; 16]> {
    let primary = text.trim().split(',').next()?;
    let mut key = [0u8; 16];
    let mut words = primary.split('-');
    for chunk in key.chunks_exact_mut(4) {
        let word = u32::from_str_radix(words.next()?, 16).ok()?;
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    words.next().is_none().then_some(key)
}

/// A number as sysctl takes it: decimal, or hex after `0x`.
pub fn parse_sysctl_int(text: &str) -> Option<u32> {
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// A word of the flags string that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagsError(pub String);

impl core::fmt::Display for FlagsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Flags {
    /// Parse a flags string (None or empty: the defaults).
    pub fn parse(text: Option<&str>) -> Result<Flags, FlagsError> {
        let mut flags = Flags::default();
        for word in text.unwrap_or("").split_whitespace() {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| FlagsError(format!("so_flags word '{word}' is not key=value")))?;
            flags.set(key, value)?;
        }
        if flags.mtu < 68 || flags.mtu > 65535 {
            return Err(FlagsError(format!(
                "so_flags mtu={} is outside 68..=65535",
                flags.mtu
            )));
        }
        if flags.prefix_len > 32 {
            return Err(FlagsError(format!(
                "so_flags prefix_len={} is above 32",
                flags.prefix_len
            )));
        }
        if flags.prefix_len6 > 128 {
            return Err(FlagsError(format!(
                "so_flags prefix_len6={} is above 128",
                flags.prefix_len6
            )));
        }
        Ok(flags)
    }

    fn set(&mut self, key: &str, value: &str) -> Result<(), FlagsError> {
        let bad = |what: &str| FlagsError(format!("so_flags {key}={value}: {what}"));
        match key {
            "local_ip" => self.local_ip = value.parse().map_err(|_| bad("not an IPv4 address"))?,
            "gateway_ip" => {
                self.gateway_ip = value.parse().map_err(|_| bad("not an IPv4 address"))?;
            }
            "prefix_len" => self.prefix_len = value.parse().map_err(|_| bad("not a number"))?,
            "local_ip6" => {
                self.local_ip6 = value.parse().map_err(|_| bad("not an IPv6 address"))?;
            }
            "gateway_ip6" => {
                self.gateway_ip6 = value.parse().map_err(|_| bad("not an IPv6 address"))?;
            }
            "prefix_len6" => self.prefix_len6 = value.parse().map_err(|_| bad("not a number"))?,
            "mtu" => self.mtu = value.parse().map_err(|_| bad("not a number"))?,
            "rcvbuf" => self.rcvbuf = value.parse().map_err(|_| bad("not a number"))?,
            "sndbuf" => self.sndbuf = value.parse().map_err(|_| bad("not a number"))?,
            "seed" => self.seed = value.parse().map_err(|_| bad("not a number"))?,
            "fastopen" => {
                self.fastopen = parse_sysctl_int(value).ok_or_else(|| bad("not a number"))?
            }
            "fastopen_key" => {
                self.fastopen_key = parse_fastopen_key(value)
                    .ok_or_else(|| bad("use four words of eight hex digits joined by '-'"))?;
            }
            "sysctls" => {
                self.sysctls = match value {
                    "on" | "1" => true,
                    "off" | "0" => false,
                    _ => return Err(bad("use on or off")),
                }
            }
            "rto_floor" => {
                self.rto_floor = match value {
                    "variance" | "linux" => RtoFloor::Variance,
                    "rto" | "rfc6298" => RtoFloor::Rto,
                    _ => return Err(bad("use variance (Linux) or rto (RFC 6298)")),
                }
            }
            "mtu_probing" => {
                self.mtu_probing = parse_sysctl_int(value)
                    .and_then(MtuProbing::from_sysctl)
                    .ok_or_else(|| bad("use 0, 1 or 2"))?;
            }
            "base_mss" => {
                self.base_mss = value
                    .parse()
                    .ok()
                    .filter(|&mss| mss >= 48)
                    .ok_or_else(|| bad("a number of 48 or more"))?;
            }
            "cc" => {
                self.congestion = CcAlgorithm::from_name(value)
                    .ok_or_else(|| bad("imp has reno, cubic, vegas and bbr"))?;
            }
            "ecn" => {
                self.ecn = match value {
                    "off" | "0" => EcnMode::Off,
                    "accept" | "2" => EcnMode::Accept,
                    "request" | "1" => EcnMode::Request,
                    _ => return Err(bad("use off, accept or request")),
                }
            }
            _ => {
                return Err(FlagsError(format!(
                    "unknown so_flags key '{key}' (known: local_ip, prefix_len, gateway_ip, \
                     local_ip6, prefix_len6, gateway_ip6, mtu, cc, ecn, rcvbuf, sndbuf, seed, \
                     fastopen, fastopen_key, sysctls, rto_floor, mtu_probing, base_mss)"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(Flags::parse(None), Ok(Flags::default()));
        let flags = Flags::parse(Some("local_ip=10.0.0.2 mtu=9000 cc=reno ecn=request")).unwrap();
        assert_eq!(flags.local_ip, Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(flags.mtu, 9000);
        assert_eq!(flags.congestion, CcAlgorithm::NewReno);
        assert_eq!(flags.ecn, EcnMode::Request);
        let flags = Flags::parse(Some("local_ip6=2001:db8::2 prefix_len6=64")).unwrap();
        assert_eq!(flags.local_ip6, "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(flags.prefix_len6, 64);
        let flags = Flags::parse(Some(
            "fastopen=0x203 fastopen_key=00000001-0-0-a0 sysctls=on",
        ))
        .unwrap();
        assert_eq!(flags.fastopen, 0x203);
        let mut key = [0u8; 16];
        key[0] = 1;
        key[12] = 0xa0;
        assert_eq!(flags.fastopen_key, key);
        assert!(flags.sysctls);
        assert_eq!(Flags::default().mtu_probing, MtuProbing::Off);
        let flags = Flags::parse(Some("mtu_probing=2 base_mss=512")).unwrap();
        assert_eq!(
            (flags.mtu_probing, flags.base_mss),
            (MtuProbing::Always, 512)
        );
        assert_eq!(Flags::default().rto_floor, RtoFloor::Variance);
        let flags = Flags::parse(Some("rto_floor=rto")).unwrap();
        assert_eq!(flags.rto_floor, RtoFloor::Rto);
    }

    #[test]
    fn errors_name_the_word() {
        for (text, needle) in [
            ("mtu", "not key=value"),
            ("mtu=x", "mtu=x"),
            ("mtu=20", "68..=65535"),
            ("colour=red", "unknown so_flags key 'colour'"),
            ("cc=westwood", "cc=westwood"),
            ("local_ip=1.2.3", "local_ip=1.2.3"),
            ("local_ip6=fd3d::1::2", "not an IPv6 address"),
            ("prefix_len6=129", "above 128"),
            ("fastopen_key=1-2-3", "fastopen_key=1-2-3"),
            ("sysctls=maybe", "on or off"),
            ("rto_floor=never", "variance (Linux) or rto"),
            ("mtu_probing=3", "0, 1 or 2"),
            ("base_mss=10", "48 or more"),
        ] {
            let error = Flags::parse(Some(text)).unwrap_err();
            assert!(error.0.contains(needle), "{text}: {error}");
        }
    }
}
