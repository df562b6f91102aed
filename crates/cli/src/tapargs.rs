//! The options every device command shares (`--tap` or `--tun`, `--addr`, `--gateway`,
//! `--impair`, `--no-offloads`, `--gro`, `--gso`) and the imp runtime they describe.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use clap::Args;
use impnet::PollFd;
use impnet::Runtime;
use impnet::core::{AddrState, IfaceConfig, IfaceId, StackConfig};
use impnet::phy::{
    Checksums, Device, Framing, Impair, LinkConfig, LinkModel, Offload, Tap, TapConfig, TapError,
    Tun,
};
use impnet::shard::{Exchange, ShardDevice};
use impnet::wire::ethernet;
use impnet::wire::ipv4::Cidr;
use impnet::wire::ipv6::Cidr as Cidr6;

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
    /// imp's address and prefix length on the device's network, IPv4 or IPv6, e.g.
    /// 10.0.0.2/24 or fd00:1::2/64; may be given several times. On a TAP, IPv6 is on
    /// in any case (a link-local address, and addresses from routers' advertisements),
    /// so a TAP needs no --addr for IPv6.
    #[arg(long, value_name = "A/LEN", value_parser = parse_host_cidr)]
    pub addr: Vec<HostCidr>,
    /// Route everything off imp's networks through this gateway (an IPv4 one, an
    /// IPv6 one, or one of each).
    #[arg(long, value_name = "G")]
    pub gateway: Vec<IpAddr>,
    /// Impair imp's frames with the link model, both ways (so delay=20ms adds 40 ms to
    /// the round trip): delay=20ms,loss=1%,rate=100mbit[,queue=64K,reorder=1%/5ms,
    /// duplicate=0.1%,corrupt=0.1%]. Turns the TAP's offloads off, so the model sees
    /// wire-sized frames.
    #[arg(long, value_name = "SPEC", value_parser = impair::parse_impair)]
    pub impair: Option<LinkConfig>,
    /// Open the TAP without the virtio-net header (no checksum offload or large segments).
    #[arg(long)]
    pub no_offloads: bool,
    /// Read and write the device in batches through io_uring (`TapConfig::batched`):
    /// set by a command, not an option of its own (`imp proxy` turns it on).
    #[arg(skip)]
    pub batched: bool,
    /// imp's own generic receive offload: consecutive in-order TCP segments of a flow
    /// are joined into one large segment before the stack takes them. For a device
    /// without the kernel's offloads (--no-offloads, --impair, or refused).
    #[arg(long)]
    pub gro: bool,
    /// imp's own generic segmentation offload: the stack builds TCP segments up to
    /// 64 KiB and imp cuts them at the MTU before writing them to the device. For a
    /// device without the kernel's offloads (--no-offloads, --impair, or refused).
    #[arg(long)]
    pub gso: bool,
    /// Get imp's IPv4 address, default route and DNS servers from a DHCP server on the
    /// TAP's network (RFC 2131) instead of an IPv4 --addr (IPv6 ones may be given
    /// too). imp keeps the lease: it renews and rebinds it, and drops the address if
    /// the lease ends. TAP only.
    #[arg(long)]
    pub dhcp: bool,
    /// A DNS server to resolve names with (HOST arguments, --connect NAME); may be
    /// given several times. Asked before any server DHCP names.
    #[arg(long, value_name = "IP")]
    pub dns: Vec<IpAddr>,
}

/// How long `--dhcp` waits for a lease before giving up.
const DHCP_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

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

/// One `--addr`: an IPv4 or an IPv6 address with its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostCidr {
    /// An IPv4 address, e.g. 10.0.0.2/24.
    V4(Cidr),
    /// An IPv6 address, e.g. fd00:1::2/64.
    V6(Cidr6),
}

impl HostCidr {
    /// The address without its prefix length.
    pub fn address(self) -> IpAddr {
        match self {
            HostCidr::V4(c) => IpAddr::V4(c.address),
            HostCidr::V6(c) => IpAddr::V6(c.address),
        }
    }

    /// Whether `addr` lies on this address's network.
    pub fn on_network(self, addr: IpAddr) -> bool {
        match (self, addr) {
            (HostCidr::V4(c), IpAddr::V4(a)) => on_network(c, a),
            (HostCidr::V6(c), IpAddr::V6(a)) => c.contains(a),
            _ => false,
        }
    }
}

impl fmt::Display for HostCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostCidr::V4(c) => write!(f, "{}/{}", c.address, c.prefix_len),
            HostCidr::V6(c) => write!(f, "{}/{}", c.address, c.prefix_len),
        }
    }
}

/// Parse `A/LEN`, IPv4 or IPv6 (an address with a `:` is IPv6).
pub fn parse_host_cidr(text: &str) -> Result<HostCidr, String> {
    let Some((addr, len)) = text.split_once('/') else {
        return Err(format!(
            "`{text}` is not ADDRESS/PREFIX-LENGTH (e.g. 10.0.0.2/24 or fd00:1::2/64)"
        ));
    };
    if !addr.contains(':') {
        return parse_cidr(text).map(HostCidr::V4);
    }
    let address: Ipv6Addr = addr
        .parse()
        .map_err(|_| format!("`{addr}` in `{text}` is not an IPv6 address"))?;
    let prefix_len: u8 = len
        .parse()
        .ok()
        .filter(|&n| n <= 128)
        .ok_or_else(|| format!("`{len}` in `{text}` is not a prefix length (0 to 128)"))?;
    Cidr6::new(address, prefix_len)
        .map(HostCidr::V6)
        .map_err(|e| format!("`{text}`: {e}"))
}

/// Check that an IPv6 `cidr` can be a host's address: unicast, not loopback, not
/// unspecified, not an IPv4-mapped address, with a network (prefix length 1 to 128).
pub fn check_host_addr6(flag: &str, cidr: Cidr6) -> Result<(), String> {
    let addr = cidr.address;
    let why = if addr.is_unspecified() {
        Some("is the unspecified address")
    } else if addr.is_multicast() {
        Some("is a multicast address")
    } else if addr.is_loopback() {
        Some("is the loopback address")
    } else if addr.to_ipv4_mapped().is_some() {
        Some("is an IPv4-mapped address (give the IPv4 address itself)")
    } else if cidr.prefix_len == 0 {
        Some("has prefix length 0 (a host address needs a network)")
    } else {
        None
    };
    match why {
        Some(why) => Err(format!(
            "{flag}{cidr}: {why}; give imp's own address and prefix, e.g. fd00:1::2/64"
        )),
        None => Ok(()),
    }
}

/// The stacks of a sharded device command: one per queue of a multi-queue TAP or
/// TUN, each on its own runtime (one alone without shards).
pub struct Shards {
    /// The shards' stacks, shard 0 first.
    pub stacks: Vec<TapStack>,
    /// What the shards share (None for one shard on a plain device).
    pub exchange: Option<Arc<Exchange>>,
}

/// One queue of a multi-queue device.
enum Queue {
    Tap(Tap),
    Tun(Tun),
}

impl Queue {
    fn name(&self) -> &str {
        match self {
            Queue::Tap(tap) => tap.name(),
            Queue::Tun(tun) => tun.name(),
        }
    }

    fn offloads(&self) -> bool {
        match self {
            Queue::Tap(tap) => tap.offloads(),
            Queue::Tun(tun) => tun.offloads(),
        }
    }

    /// Whether the queue reads and writes in batches, and why not if it was asked to.
    fn batching(&self) -> (bool, Option<&str>) {
        match self {
            Queue::Tap(tap) => (tap.batched(), tap.batch_refused()),
            Queue::Tun(tun) => (tun.batched(), tun.batch_refused()),
        }
    }
}

/// Say on standard error that `name` reads and writes one frame per system call
/// although batches were asked for, and why (`refused`; nothing when it batches).
fn note_unbatched(command: &str, name: &str, refused: Option<&str>) {
    if let Some(why) = refused {
        eprintln!("imp {command}: {name}: one frame per system call (no io_uring: {why})");
    }
}

/// A running imp stack on a TAP.
pub struct TapStack {
    /// The runtime driving the stack.
    pub rt: Runtime,
    /// imp's addresses on it, as given (IPv6 ones from routers come on top).
    pub addrs: Vec<HostCidr>,
    /// The interface the device serves.
    pub iface: IfaceId,
    /// The TAP's (or TUN's) name as the kernel gave it.
    pub name: String,
    /// "TAP" or "TUN".
    pub kind: &'static str,
    /// Whether the TAP runs with offloads.
    pub offloads: bool,
    /// imp's own GRO and GSO (`--gro`, `--gso`).
    pub software: (bool, bool),
    /// Whether the device reads and writes in batches through io_uring.
    pub batched: bool,
}

impl TapStack {
    /// imp's first IPv4 address, if it has one.
    pub fn addr4(&self) -> Option<Cidr> {
        self.addrs.iter().find_map(|a| match a {
            HostCidr::V4(c) => Some(*c),
            HostCidr::V6(_) => None,
        })
    }

    /// The address a service on `port` listens on: imp's IPv4 address when it was
    /// given only IPv4 ones, else `[::]` (every address, IPv4 and IPv6).
    pub fn listen_addr(&self, port: u16) -> SocketAddr {
        match self.addrs.as_slice() {
            [HostCidr::V4(c)] => SocketAddr::new(IpAddr::V4(c.address), port),
            _ => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
        }
    }

    /// The address to name imp by: its first given one, else its IPv6 link-local.
    pub fn first_addr(&self) -> IpAddr {
        self.addrs.first().map_or_else(
            || {
                let ll = self.rt.with_stack(|s, _| {
                    s.ipv6_addresses(self.iface).first().map(|a| a.cidr.address)
                });
                IpAddr::V6(ll.unwrap_or(Ipv6Addr::UNSPECIFIED))
            },
            |a| a.address(),
        )
    }

    /// One line for the startup message: `tap imp0 (offloads on, delay 20ms, ...)`.
    pub fn describe(&self, impairment: Option<&LinkConfig>) -> String {
        let addrs: Vec<String> = self.addrs.iter().map(ToString::to_string).collect();
        let addrs = if addrs.is_empty() {
            "IPv6 (link-local and autoconfigured)".to_string()
        } else {
            addrs.join(", ")
        };
        let mut text = format!(
            "{addrs} on {} {} (offloads {}",
            self.kind,
            self.name,
            if self.offloads { "on" } else { "off" }
        );
        match self.software {
            (false, false) => {}
            (gro, gso) => {
                let on: Vec<&str> = [(gro, "GRO"), (gso, "GSO")]
                    .iter()
                    .filter_map(|&(on, name)| on.then_some(name))
                    .collect();
                text.push_str(&format!(", software {}", on.join(" and ")));
            }
        }
        if self.batched {
            text.push_str(", batched through io_uring");
        }
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
    /// Linux accepts, host addresses, each gateway on one of imp's networks (an IPv6
    /// one may also be link-local), at most one gateway per family.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(name) = &self.tap {
            check_ifname("--tap", name)?;
        }
        if let Some(name) = &self.tun {
            check_ifname("--tun", name)?;
        }
        for addr in &self.addr {
            match *addr {
                HostCidr::V4(c) => check_host_addr("--addr ", c)?,
                HostCidr::V6(c) => check_host_addr6("--addr ", c)?,
            }
        }
        for (i, addr) in self.addr.iter().enumerate() {
            if self.addr[..i].iter().any(|a| a.address() == addr.address()) {
                return Err(format!("--addr {addr}: that address is given twice"));
            }
        }
        self.validate_dhcp()?;
        for (i, gateway) in self.gateway.iter().enumerate() {
            if self.gateway[..i]
                .iter()
                .any(|g| g.is_ipv4() == gateway.is_ipv4())
            {
                return Err(format!(
                    "--gateway {gateway}: only one gateway per address family"
                ));
            }
            self.check_gateway(*gateway)?;
        }
        Ok(())
    }

    /// `--dhcp` gives imp its IPv4 address and router: not with an IPv4 `--addr` or
    /// `--gateway`, and only on a TAP (a TUN has no broadcast to find a server by).
    fn validate_dhcp(&self) -> Result<(), String> {
        for dns in &self.dns {
            if dns.is_unspecified() || dns.is_multicast() || *dns == IpAddr::V4(Ipv4Addr::BROADCAST)
            {
                return Err(format!("--dns {dns}: not a server's address"));
            }
        }
        if !self.dhcp {
            return Ok(());
        }
        if self.tun.is_some() {
            return Err(
                "--dhcp needs --tap: a TUN device carries no broadcast, so no DHCP server can \
                 be found on it; give --addr A/LEN instead"
                    .into(),
            );
        }
        if let Some(addr) = self.addr.iter().find(|a| matches!(a, HostCidr::V4(_))) {
            return Err(format!(
                "--dhcp and --addr {addr} both give imp its IPv4 address: use one (an IPv6 \
                 --addr may go with --dhcp)"
            ));
        }
        if let Some(gateway) = self.gateway.iter().find(|g| g.is_ipv4()) {
            return Err(format!(
                "--dhcp and --gateway {gateway}: the DHCP lease names imp's IPv4 router; \
                 drop --gateway (or give --addr instead of --dhcp)"
            ));
        }
        Ok(())
    }

    /// A gateway must be another host on one of imp's networks (or, for IPv6, a
    /// link-local address: routers are known by those).
    fn check_gateway(&self, gateway: IpAddr) -> Result<(), String> {
        if let IpAddr::V6(g) = gateway
            && Cidr6::LINK_LOCAL.contains(g)
            && !g.is_unspecified()
        {
            return Ok(());
        }
        let own = self.addr.iter().any(|a| a.address() == gateway);
        if own || !self.addr.iter().any(|a| a.on_network(gateway)) {
            let family = if gateway.is_ipv4() { "IPv4" } else { "IPv6" };
            return Err(format!(
                "--gateway {gateway} is not another host on the network of an {family} \
                 --addr A/LEN (the gateway must be on imp's network)"
            ));
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
        if !self.addr.is_empty() {
            given.push("--addr");
        }
        if !self.gateway.is_empty() {
            given.push("--gateway");
        }
        if self.impair.is_some() {
            given.push("--impair");
        }
        if self.no_offloads {
            given.push("--no-offloads");
        }
        if self.gro {
            given.push("--gro");
        }
        if self.gso {
            given.push("--gso");
        }
        if self.dhcp {
            given.push("--dhcp");
        }
        if !self.dns.is_empty() {
            given.push("--dns");
        }
        given
    }

    /// The device's name and imp's addresses, which a device command cannot do
    /// without: a TUN needs an `--addr`; a TAP has IPv6 link-local and autoconfigured
    /// addresses without one.
    pub fn required(&self, command: &str) -> Result<(&str, &[HostCidr]), String> {
        let (flag, name) = match (&self.tap, &self.tun) {
            (Some(tap), _) => ("--tap", tap),
            (None, Some(tun)) => ("--tun", tun),
            (None, None) => {
                return Err(format!(
                    "imp {command} needs --tap NAME or --tun NAME (a TAP or TUN device to run on)"
                ));
            }
        };
        if self.tun.is_some() && self.addr.is_empty() {
            return Err(format!(
                "imp {command} {flag} needs --addr A/LEN (imp's address on the device's network)"
            ));
        }
        Ok((name, &self.addr))
    }

    /// Open the TAP and start a stack on it, with the address, default route and
    /// impairment asked for.
    pub fn start(&self, command: &str) -> Result<TapStack, String> {
        self.start_with(command, StackConfig::default())
    }

    /// As [`TapArgs::start`], the stack configured by `stack` (TCP buffers, congestion
    /// control).
    pub fn start_with(&self, command: &str, stack: StackConfig) -> Result<TapStack, String> {
        let (name, addrs) = self.required(command)?;
        let offloads = !self.no_offloads && self.impair.is_none();
        let config = TapConfig::new(name)
            .offloads(offloads)
            .partial_checksums(true)
            .batched(self.batched);
        let rt = Runtime::new(stack).map_err(|e| format!("cannot start the imp runtime: {e}"))?;
        let (iface, name, offloads, kind) = if self.tun.is_some() {
            let tun = either_queueing(|| Tun::open_with(&config), || Tun::open_queues(&config, 1))
                .map_err(|e| format!("cannot open TUN {name}: {e}"))?;
            let (name, offloads) = (tun.name().to_string(), tun.offloads());
            note_unbatched(command, &name, tun.batch_refused());
            let batched = tun.batched();
            let iface_config = IfaceConfig::ip(tun.ip_mtu()).with_offloads(tun.stack_offloads());
            let iface = match self.impaired(&tun)? {
                Some(mut model) => {
                    // The TUN carries bare IP packets.
                    model.tx = model.tx.ip_level();
                    model.rx = model.rx.ip_level();
                    self.add(&rt, model.wrap(tun), iface_config, Framing::Ip)
                }
                None => self.add(&rt, tun, iface_config, Framing::Ip),
            };
            (iface, name, (offloads, batched), "TUN")
        } else {
            let tap = either_queueing(|| Tap::open_with(&config), || Tap::open_queues(&config, 1))
                .map_err(|e| format!("cannot open TAP {name}: {e}"))?;
            let (name, offloads) = (tap.name().to_string(), tap.offloads());
            note_unbatched(command, &name, tap.batch_refused());
            let batched = tap.batched();
            let mac = mac_for_addrs(addrs, &name);
            let iface_config = IfaceConfig::new(mac, tap.ip_mtu());
            let iface = match self.impaired(&tap)? {
                Some(model) => self.add(&rt, model.wrap(tap), iface_config, Framing::Ethernet),
                // With offloads: large segments and checksums left to the kernel.
                None => {
                    let iface_config = iface_config.with_offloads(tap.stack_offloads());
                    self.add(&rt, tap, iface_config, Framing::Ethernet)
                }
            };
            (iface, name, (offloads, batched), "TAP")
        };
        self.finish(rt, iface, name, offloads, kind)
    }

    /// Configure the stack on `iface` (addresses, gateways, DHCP), wait for its IPv6
    /// addresses, and describe it; `offloads` and `batched` say how the device runs.
    fn finish(
        &self,
        rt: Runtime,
        iface: IfaceId,
        name: String,
        (offloads, batched): (bool, bool),
        kind: &'static str,
    ) -> Result<TapStack, String> {
        self.configure(&rt, iface);
        wait_for_dad(&rt, iface, &self.addr)?;
        let mut addrs = self.addr.clone();
        if self.dhcp {
            addrs.insert(0, HostCidr::V4(dhcp_lease(&rt, iface, &name)?));
        }
        Ok(TapStack {
            rt,
            addrs,
            iface,
            name,
            kind,
            offloads,
            software: (self.gro, self.gso),
            batched,
        })
    }

    /// Whether these options can run on shards (several stacks over the queues of one
    /// multi-queue device): not with `--impair` (one link model per device) nor
    /// `--dhcp` (one lease per host). The flag that forbids it, if one does.
    pub fn unshardable(&self) -> Option<&'static str> {
        if self.impair.is_some() {
            Some("--impair")
        } else if self.dhcp {
            Some("--dhcp")
        } else {
            None
        }
    }

    /// Open `shards` queues of a multi-queue TAP (or TUN) and start a stack on each,
    /// with the same addresses and MAC, joined by an [`Exchange`] that hands each
    /// frame to the shard owning its flow. One shard is [`TapArgs::start_with`] (a
    /// plain single-queue device, as without shards). When `fallback` is set and the
    /// device exists single-queue, one shard on it.
    pub fn start_shards(
        &self,
        command: &str,
        stack: &StackConfig,
        shards: usize,
        fallback: bool,
    ) -> Result<Shards, String> {
        let single = || {
            Ok(Shards {
                stacks: vec![self.start_with(command, stack.clone())?],
                exchange: None,
            })
        };
        if shards <= 1 {
            return single();
        }
        let (name, _) = self.required(command)?;
        let config = TapConfig::new(name)
            .offloads(!self.no_offloads)
            .partial_checksums(true)
            .batched(self.batched);
        let (framing, kind) = match self.tun {
            Some(_) => (Framing::Ip, "TUN"),
            None => (Framing::Ethernet, "TAP"),
        };
        let opened = match framing {
            Framing::Ip => Tun::open_queues(&config, shards)
                .map(|queues| queues.into_iter().map(Queue::Tun).collect::<Vec<_>>()),
            Framing::Ethernet => Tap::open_queues(&config, shards)
                .map(|queues| queues.into_iter().map(Queue::Tap).collect()),
        };
        let queues = match opened {
            Ok(queues) => queues,
            Err(TapError::NameTaken { .. }) if fallback => return single(),
            Err(e) => {
                return Err(format!(
                    "cannot open {kind} {name} with {shards} queues: {e}"
                ));
            }
        };
        let key = RandomState::new().hash_one(std::process::id());
        let exchange = Exchange::new(shards, framing, key)
            .map_err(|e| format!("cannot start the shards: {e}"))?;
        let mut stacks = Vec::new();
        for (shard, queue) in queues.into_iter().enumerate() {
            let rt = Runtime::new(stack.clone())
                .map_err(|e| format!("cannot start the imp runtime: {e}"))?;
            let (name, offloads) = (queue.name().to_string(), queue.offloads());
            let (batched, refused) = queue.batching();
            if shard == 0 {
                note_unbatched(command, &name, refused);
            }
            let iface = match queue {
                Queue::Tap(tap) => {
                    let mac = mac_for_addrs(&self.addr, &name);
                    let iface =
                        IfaceConfig::new(mac, tap.ip_mtu()).with_offloads(tap.stack_offloads());
                    let device = ShardDevice::new(tap, shard, Arc::clone(&exchange));
                    self.add(&rt, device, iface, framing)
                }
                Queue::Tun(tun) => {
                    let iface = IfaceConfig::ip(tun.ip_mtu()).with_offloads(tun.stack_offloads());
                    let device = ShardDevice::new(tun, shard, Arc::clone(&exchange));
                    self.add(&rt, device, iface, framing)
                }
            };
            stacks.push(self.finish(rt, iface, name, (offloads, batched), kind)?);
        }
        Ok(Shards {
            stacks,
            exchange: Some(exchange),
        })
    }

    /// Add `device` to the runtime as `iface` says, behind imp's own GRO and GSO when
    /// `--gro` or `--gso` asked for them (received checksums verified before merging
    /// unless the device vouched for them).
    fn add<D>(&self, rt: &Runtime, device: D, iface: IfaceConfig, framing: Framing) -> IfaceId
    where
        D: Device + PollFd + Send + 'static,
    {
        if !self.gro && !self.gso {
            return rt.add_device(device, iface);
        }
        let checksums = match iface.offloads.rx_checksum {
            true => Checksums::Trusted,
            false => Checksums::Verify,
        };
        let device = Offload::new(device, framing, iface.mtu)
            .gro(self.gro)
            .gso(self.gso)
            .checksums(checksums);
        let offloads = device.stack_offloads(iface.offloads);
        rt.add_device(device, iface.with_offloads(offloads))
    }

    /// Give `iface` IPv6 (always), the addresses and the gateways.
    fn configure(&self, rt: &Runtime, iface: IfaceId) {
        rt.set_dns_servers(&self.dns);
        rt.enable_ipv6(iface);
        for addr in &self.addr {
            match *addr {
                HostCidr::V4(c) => rt.add_address(iface, c),
                HostCidr::V6(c) => rt.add_address6(iface, c),
            }
        }
        for gateway in &self.gateway {
            match *gateway {
                IpAddr::V4(g) => rt.add_default_route(g, iface),
                IpAddr::V6(g) => rt.add_default_route6(g, iface),
            }
        }
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

/// The number of shards a device command runs: `threads` (`--threads`), else the
/// cores when no flag (`unshardable`) keeps it on one stack.
pub fn shard_count(threads: Option<usize>, unshardable: Option<&str>) -> usize {
    match (threads, unshardable) {
        (Some(n), _) => n,
        (None, Some(_)) => 1,
        (None, None) => std::thread::available_parallelism().map_or(1, usize::from),
    }
}

/// Check `--threads` against the flag that keeps the command on one stack, if any.
pub fn check_threads(threads: Option<usize>, unshardable: Option<&str>) -> Result<(), String> {
    match (threads, unshardable) {
        (Some(0), _) => Err("--threads 0: give the number of shards (1 or more)".into()),
        (Some(n), Some(flag)) if n > 1 => Err(format!(
            "--threads {n} with {flag}: {flag} runs on one stack; give --threads 1 or drop {flag}"
        )),
        _ => Ok(()),
    }
}

/// A device opened single-queue, or, when the name is an existing multi-queue device
/// (which refuses a single-queue open), as one queue of it.
fn either_queueing<T>(
    single: impl FnOnce() -> Result<T, TapError>,
    queues: impl FnOnce() -> Result<Vec<T>, TapError>,
) -> Result<T, TapError> {
    match single() {
        Err(TapError::NameTaken { name }) => match queues() {
            Ok(mut one) if !one.is_empty() => Ok(one.swap_remove(0)),
            _ => Err(TapError::NameTaken { name }),
        },
        other => other,
    }
}

/// Start DHCP on `iface` and wait for the lease; its address with prefix.
fn dhcp_lease(rt: &Runtime, iface: IfaceId, name: &str) -> Result<Cidr, String> {
    rt.dhcp_start(iface)
        .map_err(|e| format!("--dhcp on {name}: {e}"))?;
    let lease = rt
        .wait_for_lease(iface, DHCP_WAIT)
        .map_err(|e| format!("--dhcp on {name}: {e}"))?;
    Ok(Cidr {
        address: lease.addr,
        prefix_len: lease.prefix_len,
    })
}

/// Wait until duplicate address detection passed for every IPv6 address in `addrs`
/// (about a second, RFC 4861's RetransTimer per probe), so a command can use them at
/// once; an error if another host has one.
pub fn wait_for_dad(rt: &Runtime, iface: IfaceId, addrs: &[HostCidr]) -> Result<(), String> {
    let wanted: Vec<Ipv6Addr> = addrs
        .iter()
        .filter_map(|a| match a {
            HostCidr::V6(c) => Some(c.address),
            HostCidr::V4(_) => None,
        })
        .collect();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let have = rt.with_stack(|s, _| s.ipv6_addresses(iface));
        let mut pending = false;
        for addr in &wanted {
            match have.iter().find(|a| a.cidr.address == *addr) {
                None => {
                    return Err(format!(
                        "--addr {addr}: another host on the link has that address \
                         (duplicate address detection, RFC 4862 §5.4)"
                    ));
                }
                Some(a) => pending |= matches!(a.state, AddrState::Tentative { .. }),
            }
        }
        if !pending {
            return Ok(());
        }
        if std::time::Instant::now() > give_up {
            return Err("IPv6 duplicate address detection did not finish in 10 s".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
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

/// The MAC for a TAP with these addresses: from the first IPv4 one
/// ([`mac_for`]), else from the last 32 bits of the first IPv6 one, else from the
/// device's name (so a restarted imp keeps its link-local address).
pub fn mac_for_addrs(addrs: &[HostCidr], name: &str) -> ethernet::Address {
    let v4 = addrs.iter().find_map(|a| match a {
        HostCidr::V4(c) => Some(c.address),
        HostCidr::V6(_) => None,
    });
    let v6 = addrs.iter().find_map(|a| match a {
        HostCidr::V6(c) => Some(c.address),
        HostCidr::V4(_) => None,
    });
    let bits = match (v4, v6) {
        (Some(a), _) => a,
        // The low 32 bits of the IPv6 address; the truncation is the point.
        (None, Some(a)) => Ipv4Addr::from_bits(a.to_bits() as u32),
        (None, None) => {
            // FNV-1a of the name: stable across runs, unlike `RandomState`.
            let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
                (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
            });
            Ipv4Addr::from_bits(hash)
        }
    };
    mac_for(bits)
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
        let args = |addrs: &[&str], gateways: &[&str]| TapArgs {
            tap: Some("tap0".into()),
            tun: None,
            addr: addrs.iter().map(|a| parse_host_cidr(a).unwrap()).collect(),
            gateway: gateways.iter().map(|g| g.parse().unwrap()).collect(),
            impair: None,
            no_offloads: false,
            batched: false,
            gro: false,
            gso: false,
            dhcp: false,
            dns: Vec::new(),
        };
        assert_eq!(args(&["10.0.0.2/24"], &["10.0.0.1"]).validate(), Ok(()));
        let e = args(&["10.0.0.2/24"], &["10.0.1.1"])
            .validate()
            .unwrap_err();
        assert!(e.contains("--gateway 10.0.1.1"), "{e}");
        let e = args(&["10.0.0.2/24"], &["10.0.0.2"])
            .validate()
            .unwrap_err();
        assert!(e.contains("--gateway 10.0.0.2"), "{e}");
        // IPv6 and IPv4 mixed, a gateway of each family.
        let both = args(&["10.0.0.2/24", "fd00:1::2/64"], &["10.0.0.1", "fd00:1::1"]);
        assert_eq!(both.validate(), Ok(()));
        assert_eq!(args(&["10.0.0.2/24"], &["fe80::1"]).validate(), Ok(()));
        let e = args(&["10.0.0.2/24"], &["fd00:1::1"])
            .validate()
            .unwrap_err();
        assert!(
            e.contains("--gateway fd00:1::1") && e.contains("IPv6"),
            "{e}"
        );
        let e = args(&["fd00:1::2/64"], &["fd00:1::2"])
            .validate()
            .unwrap_err();
        assert!(e.contains("--gateway fd00:1::2"), "{e}");
        let e = args(&["10.0.0.2/24"], &["10.0.0.1", "10.0.0.3"])
            .validate()
            .unwrap_err();
        assert!(e.contains("one gateway per address family"), "{e}");
        let e = args(&["fd00:1::2/64", "fd00:1::2/48"], &[])
            .validate()
            .unwrap_err();
        assert!(e.contains("given twice"), "{e}");
    }

    #[test]
    fn ipv6_addresses_parse_and_are_checked() {
        let HostCidr::V6(c) = parse_host_cidr("fd00:1::2/64").unwrap() else {
            panic!("fd00:1::2/64 is IPv6");
        };
        assert_eq!(c.address, "fd00:1::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(c.prefix_len, 64);
        assert!(matches!(
            parse_host_cidr("10.0.0.2/24"),
            Ok(HostCidr::V4(_))
        ));
        for (bad, needle) in [
            ("fd00::2", "PREFIX"),
            ("fd00::g/64", "not an IPv6 address"),
            ("fd00::2/129", "0 to 128"),
            ("fd00::2/x", "0 to 128"),
        ] {
            let e = parse_host_cidr(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        for bad in [
            "::/64",
            "::1/128",
            "ff02::1/64",
            "::ffff:10.0.0.1/96",
            "fd00::2/0",
        ] {
            let HostCidr::V6(c) = parse_host_cidr(bad).unwrap() else {
                panic!("{bad} is IPv6");
            };
            let e = check_host_addr6("--addr ", c).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
        let v6 = parse_host_cidr("fd00:1::a:b/64").unwrap();
        assert_eq!(mac_for_addrs(&[v6], "t").0, [2, 0x69, 0, 0xa, 0, 0xb]);
        assert_eq!(mac_for_addrs(&[], "t"), mac_for_addrs(&[], "t"));
        assert_ne!(mac_for_addrs(&[], "t"), mac_for_addrs(&[], "u"));
    }
}
