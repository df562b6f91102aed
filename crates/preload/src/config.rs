//! The library's settings, all from the environment, read once when the first socket
//! is made:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `IMP_TAP` | the TAP device to open (created if absent, needs `CAP_NET_ADMIN`) | |
//! | `IMP_TUN` | a TUN device instead (IP packets, no Ethernet) | |
//! | `IMP_ADDR` | imp's IPv4 address and prefix, `10.0.0.2/24` | required with a device |
//! | `IMP_GW` | the IPv4 default gateway | none (only the local subnet) |
//! | `IMP_MTU` | the device's MTU | the device's own |
//! | `IMP_MAC` | imp's Ethernet address on a TAP, `02:69:6d:70:00:02` | that one |
//! | `IMP_DNS` | name servers for imp's resolver behind `getaddrinfo`, `10.0.0.1[,ADDR...]` | none: the C library resolves (over imp's UDP) |
//! | `IMP_KERNEL_UDP` | `1`: UDP and other non-TCP inet sockets go to the kernel | imp's UDP; others refused |
//!
//! With neither `IMP_TAP` nor `IMP_TUN` set the library stays out of the way: every
//! call goes to the kernel (one line on stderr says so at the first socket).

use std::net::{IpAddr, Ipv4Addr};

use impnet::wire::ethernet;
use impnet::wire::ipv4::Cidr;

/// Which device imp runs over.
#[derive(Debug, Clone)]
pub(crate) enum Device {
    /// A TAP of this name: Ethernet frames.
    Tap(String),
    /// A TUN of this name: IP packets.
    Tun(String),
}

/// Everything the runtime is started with.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub device: Device,
    pub address: Cidr,
    pub gateway: Option<Ipv4Addr>,
    pub mtu: Option<usize>,
    pub mac: ethernet::Address,
    /// `IMP_DNS`: the servers imp's resolver asks.
    pub dns: Vec<IpAddr>,
}

/// imp's Ethernet address unless `IMP_MAC` says otherwise (locally administered).
const DEFAULT_MAC: ethernet::Address = ethernet::Address([0x02, 0x69, 0x6d, 0x70, 0x00, 0x02]);

/// Whether non-TCP inet sockets go to the kernel (`IMP_KERNEL_UDP=1`).
pub(crate) fn kernel_udp() -> bool {
    std::env::var("IMP_KERNEL_UDP").is_ok_and(|v| v == "1")
}

/// The configuration from the environment: `Ok(None)` when no device is named, an
/// error naming the variable when one is malformed.
pub(crate) fn from_env() -> Result<Option<Config>, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let device = match (var("IMP_TAP"), var("IMP_TUN")) {
        (Some(_), Some(_)) => return Err("set IMP_TAP or IMP_TUN, not both".into()),
        (Some(name), None) => Device::Tap(name),
        (None, Some(name)) => Device::Tun(name),
        (None, None) => return Ok(None),
    };
    let address = var("IMP_ADDR").ok_or("IMP_ADDR (imp's address, e.g. 10.0.0.2/24) is not set")?;
    let address = parse_cidr(&address).ok_or(format!("IMP_ADDR={address}: not ADDRESS/PREFIX"))?;
    let gateway = match var("IMP_GW") {
        Some(gw) => Some(
            gw.parse()
                .map_err(|_| format!("IMP_GW={gw}: not an IPv4 address"))?,
        ),
        None => None,
    };
    let mtu = match var("IMP_MTU") {
        Some(mtu) => Some(
            mtu.parse()
                .ok()
                .filter(|m| (576..=65535).contains(m))
                .ok_or(format!("IMP_MTU={mtu}: not a number from 576 to 65535"))?,
        ),
        None => None,
    };
    let mac = match var("IMP_MAC") {
        Some(mac) => parse_mac(&mac).ok_or(format!("IMP_MAC={mac}: not six hex bytes"))?,
        None => DEFAULT_MAC,
    };
    let dns = match var("IMP_DNS") {
        Some(list) => list
            .split(',')
            .map(|a| a.trim().parse::<IpAddr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| format!("IMP_DNS={list}: not a comma-separated list of addresses"))?,
        None => Vec::new(),
    };
    Ok(Some(Config {
        device,
        address,
        gateway,
        mtu,
        mac,
        dns,
    }))
}

fn parse_cidr(text: &str) -> Option<Cidr> {
    let (address, prefix) = text.split_once('/')?;
    let prefix_len: u8 = prefix.parse().ok().filter(|p| *p <= 32)?;
    Some(Cidr {
        address: address.parse().ok()?,
        prefix_len,
    })
}

fn parse_mac(text: &str) -> Option<ethernet::Address> {
    let mut bytes = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut bytes {
        *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(ethernet::Address(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_and_mac_parse_and_refuse() {
        let cidr = parse_cidr("10.1.2.3/24").unwrap();
        assert_eq!(
            (cidr.address, cidr.prefix_len),
            (Ipv4Addr::new(10, 1, 2, 3), 24)
        );
        assert!(parse_cidr("10.1.2.3").is_none());
        assert!(parse_cidr("10.1.2.3/33").is_none());
        assert_eq!(
            parse_mac("02:00:00:00:00:0a").unwrap().0,
            [2, 0, 0, 0, 0, 10]
        );
        assert!(parse_mac("02:00:00:00:00").is_none());
        assert!(parse_mac("02:00:00:00:00:00:00").is_none());
    }
}
