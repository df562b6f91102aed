//! The interop harness the TAP tests share: a network namespace with a TAP device whose
//! kernel side has an address, and an imp runtime on the other end of the TAP.
//!
//! Everything lives inside a namespace the harness creates (the TAP is created from a
//! thread that entered it), so the host's interfaces and addresses are never touched;
//! dropping the [`Link`] stops the runtime and deletes the namespace with all in it,
//! also when the test panics. Tests call [`Link::new`] and skip (printing why) when it
//! returns `None`: not root, no `/dev/net/tun`, no `ip`. With `IMP_REQUIRE_ROOT` set such
//! a skip fails instead (see [`require`]).
#![allow(dead_code)]

pub mod require;

pub use require::{can_run, have};

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use impnet::Runtime;
use impnet::core::{IfaceConfig, IfaceId, StackConfig};
use impnet::phy::{Tap, TapConfig};
use impnet::wire::ethernet;
use impnet::wire::ipv4::Cidr;

/// A network namespace, deleted on drop.
pub struct NetNs {
    pub name: String,
}

impl NetNs {
    pub fn new() -> NetNs {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "imp-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run("ip", &["netns", "add", &name]);
        let ns = NetNs { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NS args...`, panicking on failure.
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all);
    }

    /// A command run inside the namespace (`ip netns exec`).
    pub fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]).args(args);
        cmd
    }

    /// Run a command inside the namespace to completion.
    pub fn exec(&self, program: &str, args: &[&str]) -> Output {
        self.command(program, args)
            .stdin(Stdio::null())
            .output()
            .expect("spawn ip netns exec")
    }

    /// A kernel counter of the namespace, absolute (`nstat -asz NAME`, e.g.
    /// `TcpExtTCPFastOpenPassive`); panics when nstat fails or does not know it.
    pub fn counter(&self, name: &str) -> u64 {
        let out = self.exec("nstat", &["-asz", name]);
        assert!(out.status.success(), "nstat: {}", text(&out));
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        stdout
            .lines()
            .find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some(name)).then(|| words.next()?.parse().ok())?
            })
            .unwrap_or_else(|| panic!("nstat has no {name}: {stdout}"))
    }

    /// Start a command inside the namespace; it is killed when the guard drops.
    pub fn spawn(&self, program: &str, args: &[&str]) -> ChildGuard {
        let child = self
            .command(program, args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ip netns exec");
        ChildGuard(Some(child))
    }

    /// Run `f` on a thread inside the namespace (a network namespace is per thread).
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::scope(|s| {
            s.spawn(|| {
                let file = std::fs::File::open(&path).expect("namespace file");
                // SAFETY: setns on a valid namespace fd affects only this thread, which
                // ends when the closure returns.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .expect("namespace thread")
        })
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A child process killed (and reaped) on drop.
pub struct ChildGuard(pub Option<Child>);

impl ChildGuard {
    /// Wait for the child and return its output.
    pub fn wait(mut self) -> Output {
        self.0
            .take()
            .expect("child")
            .wait_with_output()
            .expect("wait")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// imp on one end of a TAP, the kernel (in its own namespace) on the other:
/// kernel 10.202.S.1/24, imp 10.202.S.2/24.
pub struct Link {
    pub rt: Runtime,
    pub iface: IfaceId,
    pub imp_addr: Ipv4Addr,
    pub kernel_addr: Ipv4Addr,
    pub tap_name: String,
    pub offloads: bool,
    pub ns: NetNs,
}

/// imp's MAC on every test link.
pub const IMP_MAC: ethernet::Address = ethernet::Address([0x02, 0x69, 0x6d, 0x70, 0x00, 0x02]);

impl Link {
    /// A fresh namespace and runtime; `None` (after printing why) if the test must skip.
    pub fn new(subnet: u8, offloads: bool) -> Option<Link> {
        Link::with_config(subnet, offloads, StackConfig::default())
    }

    pub fn with_config(subnet: u8, offloads: bool, config: StackConfig) -> Option<Link> {
        Link::build(subnet, offloads, config, None)
    }

    /// imp's frames pass the link model `impair` both ways (offloads off, so the model
    /// sees wire-sized frames).
    pub fn impaired(subnet: u8, impair: impnet::phy::LinkConfig) -> Option<Link> {
        Link::build(subnet, false, StackConfig::default(), Some(impair))
    }

    fn build(
        subnet: u8,
        offloads: bool,
        config: StackConfig,
        impair: Option<impnet::phy::LinkConfig>,
    ) -> Option<Link> {
        if !can_run() {
            return None;
        }
        let ns = NetNs::new();
        let tap_name = "imp0".to_string();
        // With offloads, imp sends large segments with partial checksums (TSO) and the
        // kernel cuts and completes them.
        let config_tap = TapConfig::new(tap_name.clone())
            .offloads(offloads)
            .partial_checksums(true);
        let tap = ns
            .enter(|| Tap::open_with(&config_tap))
            .expect("open TAP in the namespace");
        let offloads = tap.offloads();
        let kernel_addr = Ipv4Addr::new(10, 202, subnet, 1);
        let imp_addr = Ipv4Addr::new(10, 202, subnet, 2);
        ns.ip(&[
            "addr",
            "add",
            &format!("{kernel_addr}/24"),
            "dev",
            &tap_name,
        ]);
        ns.ip(&["link", "set", &tap_name, "up"]);
        let rt = Runtime::new(config).expect("runtime");
        let iface = match impair {
            Some(link) => {
                use impnet::phy::{Device, Impair, LinkModel};
                let link = impnet::phy::LinkConfig {
                    mtu: tap.mtu(),
                    ..link
                };
                let seed = u64::from(subnet) * 7919;
                let device = Impair::new(tap, LinkModel::new(link, seed))
                    .with_rx(LinkModel::new(link, seed + 1));
                rt.add_device(device, IfaceConfig::new(IMP_MAC, 1500))
            }
            None => rt.add_tap(tap, IMP_MAC),
        };
        rt.add_address(
            iface,
            Cidr {
                address: imp_addr,
                prefix_len: 24,
            },
        );
        Some(Link {
            rt,
            iface,
            imp_addr,
            kernel_addr,
            tap_name,
            offloads,
            ns,
        })
    }
}

/// Wait for a child, killing it after `limit`.
pub fn wait_limited(mut child: ChildGuard, limit: std::time::Duration) -> Output {
    let start = std::time::Instant::now();
    loop {
        let done = child.0.as_mut().unwrap().try_wait().expect("try_wait");
        if done.is_some() || start.elapsed() > limit {
            if done.is_none() {
                let _ = child.0.as_mut().unwrap().kill();
            }
            return child.wait();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A process's status and output, for failure messages.
pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
