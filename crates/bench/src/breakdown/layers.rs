//! Which layer an instruction belongs to, by Rust module path: the module of the
//! source file it came from (inlined code keeps its own file, so `impnet_wire::checksum`
//! inlined into TCP output is still checksum), else the module of the function it ran
//! in; `memcpy`/`memmove` are copies. Modules shared by input and output (the
//! connection, the socket table, the rings, `stack/tcp.rs`) go by the function the
//! instructions ran in: under `handle_frame` they are input, under `poll_transmit`
//! output, under `tcp_send`/`tcp_recv` socket calls.

use serde::Serialize;

/// The rows of the breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Layer {
    /// Frame demultiplexing, the transmit queue, ARP and the neighbour cache.
    Ethernet,
    /// IPv4 input and output, routes, reassembly, ICMP.
    Ipv4,
    /// Segment arrival: header prediction, ACK processing, recovery, congestion control.
    TcpInput,
    /// Deciding what to send and writing the segment.
    TcpOutput,
    /// The Internet checksum (`impnet_wire::checksum`).
    Checksum,
    /// `memcpy` and `memmove`.
    Copies,
    /// Deadlines and timer handling.
    Timers,
    /// The socket calls (`tcp_send`, `tcp_recv`) outside their copies.
    SocketCalls,
    /// Everything else: the bench's driver loop, the allocator, the C library.
    Other,
}

impl Layer {
    /// Every layer, in the order of the table.
    pub const ALL: [Layer; 9] = [
        Layer::Ethernet,
        Layer::Ipv4,
        Layer::TcpInput,
        Layer::TcpOutput,
        Layer::Checksum,
        Layer::Copies,
        Layer::Timers,
        Layer::SocketCalls,
        Layer::Other,
    ];

    /// The row's label.
    pub fn label(self) -> &'static str {
        match self {
            Layer::Ethernet => "Ethernet",
            Layer::Ipv4 => "IPv4",
            Layer::TcpInput => "TCP input",
            Layer::TcpOutput => "TCP output",
            Layer::Checksum => "checksum",
            Layer::Copies => "copies (memcpy/memmove)",
            Layer::Timers => "timers",
            Layer::SocketCalls => "socket calls",
            Layer::Other => "runtime/device/other",
        }
    }
}

/// A module's layer, or `None`: decided by the function the code ran in.
type Rule = (&'static str, Option<Layer>);

/// Module prefixes, longest first where they nest (the first match wins).
const MODULES: &[Rule] = &[
    ("impnet_wire::checksum", Some(Layer::Checksum)),
    ("impnet_wire::ethernet", Some(Layer::Ethernet)),
    ("impnet_wire::arp", Some(Layer::Ethernet)),
    ("impnet_wire::ipv4", Some(Layer::Ipv4)),
    ("impnet_wire::icmpv4", Some(Layer::Ipv4)),
    ("impnet_wire::tcp", None),
    ("impnet_core::stack::arp", Some(Layer::Ethernet)),
    ("impnet_core::stack::ipv4", Some(Layer::Ipv4)),
    ("impnet_core::stack::icmp", Some(Layer::Ipv4)),
    ("impnet_core::stack::forward", Some(Layer::Ipv4)),
    ("impnet_core::stack::ip_options", Some(Layer::Ipv4)),
    ("impnet_core::stack::tcp", None),
    ("impnet_core::stack", Some(Layer::Ethernet)),
    ("impnet_core::neighbor", Some(Layer::Ethernet)),
    ("impnet_core::route", Some(Layer::Ipv4)),
    ("impnet_core::reassembly", Some(Layer::Ipv4)),
    ("impnet_core::tcp::input", Some(Layer::TcpInput)),
    ("impnet_core::tcp::predict", Some(Layer::TcpInput)),
    ("impnet_core::tcp::demux", Some(Layer::TcpInput)),
    ("impnet_core::tcp::listen", Some(Layer::TcpInput)),
    ("impnet_core::tcp::cookie", Some(Layer::TcpInput)),
    ("impnet_core::tcp::rtt", Some(Layer::TcpInput)),
    ("impnet_core::tcp::sack", Some(Layer::TcpInput)),
    ("impnet_core::tcp::rack", Some(Layer::TcpInput)),
    ("impnet_core::tcp::recovery", Some(Layer::TcpInput)),
    ("impnet_core::tcp::cc", Some(Layer::TcpInput)),
    ("impnet_core::tcp::icmp", Some(Layer::TcpInput)),
    ("impnet_core::tcp::output", Some(Layer::TcpOutput)),
    ("impnet_core::tcp::pacing", Some(Layer::TcpOutput)),
    ("impnet_core::tcp::timer", Some(Layer::Timers)),
    ("impnet_core::tcp::deadlines", Some(Layer::Timers)),
    ("impnet_core::time", Some(Layer::Timers)),
    ("impnet_core", None),
    ("impnet_wire", None),
];

/// Markers in a function's name, for the modules shared by several layers (first
/// match wins). LTO inlines whole call chains into the entry points, so these are
/// mostly the stack's own calls.
const FUNCTIONS: &[(&str, Layer)] = &[
    ("poll_transmit", Layer::TcpOutput),
    ("::output::", Layer::TcpOutput),
    ("write_segment", Layer::TcpOutput),
    ("handle_timeout", Layer::Timers),
    ("poll_timeout", Layer::Timers),
    ("Deadlines", Layer::Timers),
    ("handle_frame", Layer::TcpInput),
    ("handle_ipv4", Layer::TcpInput),
    ("deliver", Layer::TcpInput),
    ("handle_tcp", Layer::TcpInput),
    ("handle_segment", Layer::TcpInput),
    ("::input::", Layer::TcpInput),
    ("::predict::", Layer::TcpInput),
    ("tcp_send", Layer::SocketCalls),
    ("tcp_recv", Layer::SocketCalls),
    ("SendBuffer", Layer::SocketCalls),
    ("RecvBuffer", Layer::SocketCalls),
    ("::send", Layer::SocketCalls),
    ("::recv", Layer::SocketCalls),
];

/// The module path of a source file in this workspace
/// (`.../crates/core/src/tcp/input.rs` -> `impnet_core::tcp::input`), or `None`.
pub fn file_module(file: &str) -> Option<String> {
    let at = file.rfind("/crates/")?;
    let rest = &file[at + "/crates/".len()..];
    let (krate, path) = rest.split_once("/src/")?;
    let krate = match krate {
        "impnet" => "impnet".to_string(),
        other => format!("impnet_{}", other.replace('-', "_")),
    };
    let path = path.strip_suffix(".rs")?;
    let path = path.strip_suffix("/mod").unwrap_or(path);
    if path == "lib" || path == "main" {
        return Some(krate);
    }
    Some(format!("{krate}::{}", path.replace('/', "::")))
}

/// The module path a function's name starts with: `<a::b::C as T>::f` -> `a::b::C`,
/// `a::b::<impl a::C>::f` -> `a::b::`.
fn function_module(function: &str) -> &str {
    let name = function.trim_start_matches('<');
    let end = name.find(['<', ' ', '>']).unwrap_or(name.len());
    &name[..end]
}

/// The rule for `module` (a prefix match on `::` boundaries).
fn module_rule(module: &str) -> Option<Option<Layer>> {
    MODULES.iter().find_map(|&(prefix, layer)| {
        let rest = module.strip_prefix(prefix)?;
        (rest.is_empty() || rest.starts_with("::")).then_some(layer)
    })
}

/// The layer that the function `function` (its full name) stands for.
fn by_function(function: &str) -> Option<Layer> {
    FUNCTIONS
        .iter()
        .find(|(marker, _)| function.contains(marker))
        .map(|&(_, layer)| layer)
}

/// Whether `function` is the C library's (or valgrind's replacement's) memcpy/memmove.
fn is_copy(function: &str) -> bool {
    let f = function.trim_start_matches('_');
    ["memcpy", "memmove", "mempcpy", "GI_memcpy", "GI_memmove"]
        .iter()
        .any(|name| f.starts_with(name))
}

/// The layer of instructions from `file` that ran in `function`.
pub fn classify(file: &str, function: &str) -> Layer {
    if is_copy(function) {
        return Layer::Copies;
    }
    let rule = match file_module(file).and_then(|m| module_rule(&m)) {
        Some(rule) => rule,
        // Library code (`core`, `alloc`) inlined into one of ours belongs where the
        // function it ran in does: the stack's entry points by name, others by module.
        None => match module_rule(function_module(function)) {
            Some(_) if by_function(function).is_some() => None,
            Some(rule) => rule,
            None => return Layer::Other,
        },
    };
    rule.or_else(|| by_function(function))
        .unwrap_or(Layer::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_map_to_modules() {
        let f = |s| file_module(s);
        assert_eq!(
            f("/w/crates/core/src/tcp/input.rs").as_deref(),
            Some("impnet_core::tcp::input")
        );
        assert_eq!(
            f("/w/crates/wire/src/checksum.rs").as_deref(),
            Some("impnet_wire::checksum")
        );
        assert_eq!(
            f("/w/crates/core/src/tcp/cc/mod.rs").as_deref(),
            Some("impnet_core::tcp::cc")
        );
        assert_eq!(
            f("/w/crates/core/src/lib.rs").as_deref(),
            Some("impnet_core")
        );
        assert_eq!(f("/rustc/abc/library/core/src/slice/mod.rs"), None);
        assert_eq!(f("???"), None);
    }

    #[test]
    fn layers() {
        let stack = "/w/crates/core/src/stack.rs";
        let std_file = "/rustc/abc/library/core/src/slice/mod.rs";
        // Checksum code is checksum wherever it was inlined.
        assert_eq!(
            classify(
                "/w/crates/wire/src/checksum.rs",
                "impnet_core::stack::Stack::poll_transmit_tcp_frames"
            ),
            Layer::Checksum
        );
        assert_eq!(
            classify(std_file, "impnet_wire::checksum::data"),
            Layer::Checksum
        );
        assert_eq!(
            classify("memmove.S", "__memcpy_avx_unaligned_erms"),
            Layer::Copies
        );
        assert_eq!(
            classify(stack, "impnet_core::stack::Stack::handle_frame"),
            Layer::Ethernet
        );
        // Shared TCP code goes by the entry point it ran under.
        let table = "/w/crates/core/src/tcp/table.rs";
        assert_eq!(
            classify(table, "impnet_core::stack::Stack::poll_transmit_tcp_frames"),
            Layer::TcpOutput
        );
        assert_eq!(
            classify(
                table,
                "impnet_core::tcp::table::Tcp::handle_segment_with_ecn"
            ),
            Layer::TcpInput
        );
        assert_eq!(
            classify(table, "impnet_core::stack::tcp::<impl Stack>::tcp_recv"),
            Layer::SocketCalls
        );
        assert_eq!(
            classify(
                "/w/crates/core/src/tcp/deadlines.rs",
                "impnet_core::tcp::table::Tcp::handle_segment_with_ecn"
            ),
            Layer::Timers
        );
        // Library code inlined into an entry point goes with it.
        assert_eq!(
            classify(
                std_file,
                "impnet_core::stack::Stack::poll_transmit_tcp_frames"
            ),
            Layer::TcpOutput
        );
        assert_eq!(
            classify(stack, "impnet_core::stack::Stack::poll_transmit_tcp_frames"),
            Layer::Ethernet
        );
        assert_eq!(
            classify(std_file, "impnet_bench::workload::Stream::write"),
            Layer::Other
        );
        assert_eq!(classify("", "malloc"), Layer::Other);
    }
}
