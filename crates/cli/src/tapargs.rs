//! The options every device command shares (`--tap` or `--tun`, `--addr`, `--gateway`,
//! `--impair`, `--no-offloads`) and the imp runtime they describe.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::Ipv4Addr;

use clap::Args;
use impnet::Runtime;
use impnet::core::{IfaceConfig, StackConfig};
use impnet::phy::{Device, Impair, LinkConfig, LinkModel, Tap, TapConfig, Tun};
use impnet::wire::ethernet;
use impnet::wire::ipv4::Cidr;

use crate::impair;

/// How imp reaches a Linux TAP device.
#[derive(Debug, Clone, Args)]
pub struct TapArgs {
    /// Run over the Linux TAP device NAME (created if it does not exist; needs root or
    /// CAP_NET_ADMIN). The kernel's side of the TAP needs an address on the same network.
    #[arg(long, value_name = "NAME")]
    pub tap: Option<String>,
    /// Run over the Linux TUN device NAME instead (bare IP packets, no Ethernet or ARP;
    /// created if it does not exist, needs root or CAP_NET_ADMIN). The kernel's side
    /// needs an address on the same network.
    #[arg(long, value_name = "NAME", conflicts_with = "tap")]
    pub tun: Option<String>,
    /// imp's address and prefix length on the TAP's network, e.g. 10.0.0.2/24.
    #[arg(long, value_name = "A/LEN", value_parser = parse_cidr)]
    pub addr: Option<Cidr>,
    /// Route everything off the TAP's network through this gateway.
    #[arg(long, value_name = "G")]
    pub gateway: Option<Ipv4Addr>,
    /// Impair imp's frames with the link model, both ways (so delay=20ms adds 40 ms to
    /// the round trip): delay=20ms,loss=1%,rate=100mbit[,queue=64K,reorder=1%/5ms,
    /// duplicate=0.1%,corrupt=0.1%]. Turns the TAP's offloads off, so the model sees
    /// wire-sized frames.
    #[arg(long, value_name = "SPEC", value_parser = impair::parse_impair)]
    pub impair: Option<LinkConfig>,
    /// Open the TAP without the virtio-net header (no checksum offload or large segments).
    #[arg(long)]
    pub no_offloads: bool,
}

/// Check a network interface name as Linux does (`dev_valid_name`): 1 to 15 bytes,
/// not `.` or `..`, no `/`, `:` or white space.
pub fn check_ifname(flag: &str, name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        Some("is empty")
    } else if name.len() > 15 {
        Some("is longer than 15 bytes")
    } else if name == "." || name == ".." {
        Some("is `.` or `..`")
    } else if name
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        Some("holds `/`, `:` or white space")
    } else {
        None
    };
    match why {
        Some(why) => Err(format!(
            "{flag} `{name}`: not a network interface name (it {why}; Linux allows 1 to 15 \
             bytes without `/`, `:` or white space)"
        )),
        None => Ok(()),
    }
}

/// Check that `cidr` can be a host's address on its network: unicast, not loopback,
/// and neither the network's own address nor its broadcast address. `flag` starts
/// the message, right before the address (`"--addr "`, `"--tap tap0="`).
pub fn check_host_addr(flag: &str, cidr: Cidr) -> Result<(), String> {
    let addr = cidr.address;
    let host_bits = 32 - u32::from(cidr.prefix_len);
    let host_mask = u32::MAX
        .checked_shr(u32::from(cidr.prefix_len))
        .unwrap_or(0);
    let host = addr.to_bits() & host_mask;
    let why = if addr.is_unspecified() {
        Some("is the unspecified address")
    } else if addr.is_broadcast() {
        Some("is the broadcast address")
    } else if addr.is_multicast() {
        Some("is a multicast address")
    } else if addr.is_loopback() {
        Some("is a loopback address")
    } else if cidr.prefix_len == 0 {
        Some("has prefix length 0 (a host address needs a network)")
    } else if host_bits >= 2 && host == 0 {
        Some("is the network's own address (its host part is 0)")
    } else if host_bits >= 2 && host == host_mask {
        Some("is the network's broadcast address")
    } else {
        None
    };
    match why {
        Some(why) => Err(format!(
            "{flag}{}/{}: {why}; give imp's own address and prefix, e.g. 10.0.0.2/24",
            cidr.address, cidr.prefix_len
        )),
        None => Ok(()),
    }
}

/// Whether `addr` lies on `cidr`'s network.
pub fn on_network(cidr: Cidr, addr: Ipv4Addr) -> bool {
    let mask = u32::MAX
        .checked_shl(32 - u32::from(cidr.prefix_len))
        .unwrap_or(0);
    cidr.address.to_bits() & mask == addr.to_bits() & mask
}

/// Parse `A/LEN`.
pub fn parse_cidr(text: &str) -> Result<Cidr, String> {
    let (addr, len) = text
        .split_once('/')
        .ok_or_else(|| format!("`{text}` is not ADDRESS/PREFIX-LENGTH (e.g. 10.0.0.2/24)"))?;
    let address: Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("`{addr}` in `{text}` is not an IPv4 address"))?;
    let prefix_len: u8 = len
        .parse()
        .map_err(|_| format!("`{len}` in `{text}` is not a prefix length (0 to 32)"))?;
    Cidr::new(address, prefix_len).map_err(|e| format!("`{text}`: {e}"))
}

/// A running imp stack on a TAP.
pub struct TapStack {
    /// The runtime driving the stack.
    pub rt: Runtime,
    /// imp's address on it.
    pub addr: Cidr,
    /// The TAP's (or TUN's) name as the kernel gave it.
    pub name: String,
    /// "TAP" or "TUN".
    pub kind: &'static str,
    /// Whether the TAP runs with offloads.
    pub offloads: bool,
}

impl TapStack {
    /// One line for the startup message: `tap imp0 (offloads on, delay 20ms, ...)`.
    pub fn describe(&self, impairment: Option<&LinkConfig>) -> String {
        let mut text = format!(
            "{} on {} {} (offloads {}",
            self.addr,
            self.kind,
            self.name,
            if self.offloads { "on" } else { "off" }
        );
        if let Some(config) = impairment {
            text.push_str(", impaired both ways: ");
            text.push_str(&impair::describe(config));
        }
        text.push(')');
        text
    }
}

impl TapArgs {
    /// Check the options against each other without opening anything: a TAP name
    /// Linux accepts, a host address, a gateway on that address's network.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(name) = &self.tap {
            check_ifname("--tap", name)?;
        }
        if let Some(name) = &self.tun {
            check_ifname("--tun", name)?;
        }
        if let Some(addr) = self.addr {
            check_host_addr("--addr ", addr)?;
        }
        if let Some(gateway) = self.gateway {
            let Some(addr) = self.addr else {
                return Err(format!(
                    "--gateway {gateway} needs --addr A/LEN (the gateway must be on imp's network)"
                ));
            };
            if !on_network(addr, gateway) || gateway == addr.address {
                return Err(format!(
                    "--gateway {gateway} is not another host on --addr {}/{}'s network",
                    addr.address, addr.prefix_len
                ));
            }
        }
        Ok(())
    }

    /// True when a device was given (`--tap` or `--tun`).
    pub fn is_set(&self) -> bool {
        self.tap.is_some() || self.tun.is_some()
    }

    /// The device options given, by flag, for a command run without `--tap`.
    pub fn given(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        if self.addr.is_some() {
            given.push("--addr");
        }
        if self.gateway.is_some() {
            given.push("--gateway");
        }
        if self.impair.is_some() {
            given.push("--impair");
        }
        if self.no_offloads {
            given.push("--no-offloads");
        }
        given
    }

    /// The TAP name and address, which a device command cannot do without.
    pub fn required(&self, command: &str) -> Result<(&str, Cidr), String> {
        let (flag, name) = match (&self.tap, &self.tun) {
            (Some(tap), _) => ("--tap", tap),
            (None, Some(tun)) => ("--tun", tun),
            (None, None) => {
                return Err(format!(
                    "imp {command} needs --tap NAME or --tun NAME (a TAP or TUN device to run on)"
                ));
            }
        };
        let addr = self.addr.ok_or_else(|| {
            format!(
                "imp {command} {flag} needs --addr A/LEN (imp's address on the device's network)"
            )
        })?;
        Ok((name, addr))
    }

    /// Open the TAP and start a stack on it, with the address, default route and
    /// impairment asked for.
    pub fn start(&self, command: &str) -> Result<TapStack, String> {
        self.start_with(command, StackConfig::default())
    }

    /// As [`TapArgs::start`], the stack configured by `stack` (TCP buffers, congestion
    /// control).
    pub fn start_with(&self, command: &str, stack: StackConfig) -> Result<TapStack, String> {
        let (name, addr) = self.required(command)?;
        let offloads = !self.no_offloads && self.impair.is_none();
        let config = TapConfig::new(name)
            .offloads(offloads)
            .partial_checksums(true);
        let rt = Runtime::new(stack).map_err(|e| format!("cannot start the imp runtime: {e}"))?;
        let (iface, name, offloads, kind) = if self.tun.is_some() {
            let tun =
                Tun::open_with(&config).map_err(|e| format!("cannot open TUN {name}: {e}"))?;
            let (name, offloads) = (tun.name().to_string(), tun.offloads());
            let iface_config = IfaceConfig::ip(tun.ip_mtu());
            let iface = match self.impaired(&tun)? {
                Some(model) => rt.add_device(model.wrap(tun), iface_config),
                None => rt.add_tun(tun),
            };
            (iface, name, offloads, "TUN")
        } else {
            let tap =
                Tap::open_with(&config).map_err(|e| format!("cannot open TAP {name}: {e}"))?;
            let (name, offloads) = (tap.name().to_string(), tap.offloads());
            let iface_config = IfaceConfig::new(mac_for(addr.address), tap.ip_mtu());
            let iface = match self.impaired(&tap)? {
                Some(model) => rt.add_device(model.wrap(tap), iface_config),
                // With offloads: large segments and checksums left to the kernel.
                None => rt.add_tap(tap, iface_config.mac),
            };
            (iface, name, offloads, "TAP")
        };
        rt.add_address(iface, addr);
        if let Some(gateway) = self.gateway {
            rt.add_default_route(gateway, iface);
        }
        Ok(TapStack {
            rt,
            addr,
            name,
            kind,
            offloads,
        })
    }

    /// The link models of `--impair` for `device`, both ways, if asked for.
    fn impaired(&self, device: &impl Device) -> Result<Option<Impairment>, String> {
        let Some(config) = self.impair else {
            return Ok(None);
        };
        let config = fit_mtu(config, device.mtu());
        let seed = RandomState::new().hash_one(std::process::id());
        Ok(Some(Impairment {
            tx: model(config, seed)?,
            rx: model(config, seed.rotate_left(17) ^ 0x9e37)?,
        }))
    }
}

/// The link models `--impair` puts on a device: what it sends and what it receives.
struct Impairment {
    tx: LinkModel,
    rx: LinkModel,
}

impl Impairment {
    fn wrap<D: Device>(self, device: D) -> Impair<D> {
        Impair::new(device, self.tx).with_rx(self.rx)
    }
}

/// A link model, or why the impairment cannot be used.
pub fn model(config: LinkConfig, seed: u64) -> Result<LinkModel, String> {
    LinkModel::try_new(config, seed).map_err(|e| format!("bad --impair: {e}"))
}

/// The link must carry the device's largest frame unless an MTU was asked for.
pub fn fit_mtu(config: LinkConfig, device_mtu: usize) -> LinkConfig {
    if config.mtu == LinkConfig::default().mtu {
        LinkConfig {
            mtu: device_mtu,
            ..config
        }
    } else {
        config
    }
}

/// A locally administered MAC made from the address: 02:69:<a.b.c.d>.
pub fn mac_for(addr: Ipv4Addr) -> ethernet::Address {
    let [a, b, c, d] = addr.octets();
    ethernet::Address([0x02, 0x69, a, b, c, d])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_parse_with_clear_errors() {
        let c = parse_cidr("10.1.2.3/24").unwrap();
        assert_eq!(c.address, Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(c.prefix_len, 24);
        assert!(parse_cidr("10.1.2.3").unwrap_err().contains("PREFIX"));
        assert!(parse_cidr("10.1.2/24").unwrap_err().contains("10.1.2"));
        assert!(parse_cidr("10.1.2.3/40").is_err());
    }

    #[test]
    fn names_and_addresses_are_checked_before_anything_opens() {
        for good in ["tap0", "imp-a", "x", "fifteen_chars_x"] {
            assert_eq!(check_ifname("--tap", good), Ok(()), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a:b",
            "a b",
            "sixteen_chars_xx",
            "tap\n0",
        ] {
            let e = check_ifname("--tap", bad).unwrap_err();
            assert!(e.contains("--tap") && e.contains("interface name"), "{e}");
        }
        let cidr = |t: &str| parse_cidr(t).unwrap();
        assert_eq!(check_host_addr("--addr ", cidr("10.0.0.2/24")), Ok(()));
        assert_eq!(check_host_addr("--addr ", cidr("10.0.0.0/31")), Ok(()));
        assert_eq!(check_host_addr("--addr ", cidr("10.0.0.7/32")), Ok(()));
        for bad in [
            "0.0.0.0/24",
            "255.255.255.255/24",
            "224.0.0.1/24",
            "127.0.0.1/8",
            "10.0.0.0/24",
            "10.0.0.255/24",
            "10.0.0.1/0",
        ] {
            let e = check_host_addr("--addr ", cidr(bad)).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
        let args = |addr: &str, gateway: &str| TapArgs {
            tap: Some("tap0".into()),
            tun: None,
            addr: Some(cidr(addr)),
            gateway: Some(gateway.parse().unwrap()),
            impair: None,
            no_offloads: false,
        };
        assert_eq!(args("10.0.0.2/24", "10.0.0.1").validate(), Ok(()));
        let e = args("10.0.0.2/24", "10.0.1.1").validate().unwrap_err();
        assert!(e.contains("--gateway 10.0.1.1"), "{e}");
        let e = args("10.0.0.2/24", "10.0.0.2").validate().unwrap_err();
        assert!(e.contains("--gateway 10.0.0.2"), "{e}");
    }
}
