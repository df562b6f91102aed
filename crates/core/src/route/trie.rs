//! The forwarding half of the routing table: a Poptrie-style multibit trie
//! (Asai & Ohara, "Poptrie: A Compressed Trie with Population Count for Fast and
//! Scalable Software IP Routing Table Lookup", SIGCOMM 2015), without direct pointing.
//!
//! The 32-bit address, padded with four zero bits to 36, is read six bits at a time: a
//! node has 64 slots and the trie at most six levels (offsets 0, 6, ..., 30; the last
//! level's slots repeat the address's last two bits sixteen times over). Each slot is
//! either a child node or a leaf; leaves are pushed (a leaf holds the longest match for
//! every address in its slot, shorter routes from above included), so a lookup reads
//! one leaf, at the end. Both kinds are stored compressed: `children` holds only the
//! slots whose bit is set in `child_bits`, and `leaves` holds one entry per run of leaf
//! slots with the same value, a run starting where `run_bits` has a bit. A population
//! count of the bits below a slot gives its position in either array.
//!
//! Memory is proportional to the routes: a node costs 48 bytes plus its leaf runs, an
//! empty trie allocates nothing. Updates rebuild the smallest subtree a change can
//! reach (see [`Trie::rebuild`]); the routes themselves live in the caller's table,
//! which the trie names by index.

use alloc::boxed::Box;
use alloc::vec::Vec;

/// A leaf naming no route.
pub(super) const NO_ROUTE: u32 = u32::MAX;

/// Bits read per level.
const STRIDE: u8 = 6;

/// A prefix as the builder sees it: network bits (host bits clear), length, route index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Prefix {
    /// The network, host bits clear.
    pub network: u32,
    /// The prefix length, 0..=32.
    pub len: u8,
    /// The route's index in the caller's table.
    pub route: u32,
}

/// One trie node: 64 slots, each a child or a leaf.
#[derive(Debug, Clone, Default)]
struct Node {
    /// Bit `s` set: slot `s` is a child, `children[popcount(child_bits below s)]`.
    child_bits: u64,
    /// Bit `s` set: slot `s` is a leaf that starts a new run (its value differs from the
    /// leaf slot before it, or it is the first leaf slot). Never set for child slots.
    run_bits: u64,
    /// The children, in slot order.
    children: Box<[Node]>,
    /// One route index (or `NO_ROUTE`) per run of leaf slots, in slot order.
    leaves: Box<[u32]>,
}

/// The trie; an empty one allocates nothing.
#[derive(Debug, Clone, Default)]
pub(super) struct Trie {
    /// Covers every address (offset 0).
    root: Node,
}

/// The slot `key` falls in at the node reading bits `offset..offset + 6`.
fn slot_of(key: u32, offset: u8) -> u32 {
    // Address bits 0..32 are bits 35..4 of the padded 36-bit key.
    let padded = u64::from(key) << 4;
    let shift = 30u8.saturating_sub(offset);
    // Truncation intended: the value is masked to six bits.
    #[allow(clippy::cast_possible_truncation)]
    let slot = ((padded >> shift) & 63) as u32;
    slot
}

/// The mask of slots `0..=slot`.
fn up_to(slot: u32) -> u64 {
    let bit = 1u64 << (slot & 63);
    bit | (bit - 1)
}

/// The mask of the network bits of a prefix of `len` bits.
fn mask(len: u8) -> u32 {
    match len {
        0 => 0,
        n if n >= 32 => u32::MAX,
        n => u32::MAX << (32 - u32::from(n)),
    }
}

impl Trie {
    /// The index of the longest route covering `key`, or `NO_ROUTE`.
    #[inline]
    pub(super) fn lookup(&self, key: u32) -> u32 {
        let mut node = &self.root;
        let mut offset = 0;
        loop {
            let slot = slot_of(key, offset);
            let below = up_to(slot);
            if node.child_bits & (1 << slot) == 0 {
                let run = (node.run_bits & below).count_ones() as usize;
                return node
                    .leaves
                    .get(run.wrapping_sub(1))
                    .copied()
                    .unwrap_or(NO_ROUTE);
            }
            let child = (node.child_bits & below).count_ones() as usize - 1;
            match node.children.get(child) {
                Some(next) => node = next,
                None => return NO_ROUTE,
            }
            offset += STRIDE;
        }
    }

    /// Bring the trie up to date after the routes for `network/len` changed (added,
    /// removed). `prefixes_in(network, len)` lists, sorted by (network, length), every
    /// prefix lying inside `network/len` with a length above `len`; `best_covering(
    /// network, len)` gives the longest route of length at most `len` covering it.
    ///
    /// Leaves are pushed, so a change reaches every slot under the prefix at any depth:
    /// the subtree rebuilt is that of the deepest existing node whose region holds the
    /// prefix (offset below `len`), or the node above it when that subtree has emptied.
    pub(super) fn rebuild(
        &mut self,
        network: u32,
        len: u8,
        prefixes_in: impl Fn(u32, u8) -> Vec<Prefix>,
        best_covering: impl Fn(u32, u8) -> u32,
    ) {
        // The slot taken at each level on the way down to the node rebuilt.
        let mut path: Vec<u32> = Vec::new();
        let mut node = &self.root;
        let mut offset = 0;
        while len > offset + STRIDE {
            let slot = slot_of(network, offset);
            if node.child_bits & (1 << slot) == 0 {
                break;
            }
            let child = (node.child_bits & up_to(slot)).count_ones() as usize - 1;
            let Some(next) = node.children.get(child) else {
                break;
            };
            path.push(slot);
            node = next;
            offset += STRIDE;
        }
        loop {
            let region = network & mask(offset);
            let prefixes = prefixes_in(region, offset);
            // An emptied node goes: its parent's slot becomes a leaf again.
            if prefixes.is_empty() && !path.is_empty() {
                path.pop();
                offset -= STRIDE;
                continue;
            }
            let inherited = best_covering(region, offset);
            let fresh = build(offset, inherited, &prefixes);
            if let Some(node) = self.node_at(network, &path) {
                *node = fresh;
            }
            return;
        }
    }

    /// The node reached from the root through the slots of `path`.
    fn node_at(&mut self, network: u32, path: &[u32]) -> Option<&mut Node> {
        let mut node = &mut self.root;
        let mut offset = 0;
        for &expected in path {
            let slot = slot_of(network, offset);
            debug_assert_eq!(slot, expected);
            let child = (node.child_bits & up_to(slot)).count_ones() as usize;
            node = node.children.get_mut(child.checked_sub(1)?)?;
            offset += STRIDE;
        }
        Some(node)
    }

    /// The bytes of every node and leaf run below the root.
    pub(super) fn heap_bytes(&self) -> usize {
        fn below(node: &Node) -> usize {
            core::mem::size_of_val::<[Node]>(&node.children)
                + core::mem::size_of_val::<[u32]>(&node.leaves)
                + node.children.iter().map(below).sum::<usize>()
        }
        below(&self.root)
    }

    /// Replace the whole trie with one built from `prefixes` (sorted by network, then
    /// length; the default route, if any, given as `default`).
    pub(super) fn rebuild_all(&mut self, default: u32, prefixes: &[Prefix]) {
        self.root = build(0, default, prefixes);
    }
}

/// The node reading bits `offset..offset + 6` of a region where the longest route of
/// length at most `offset` is `inherited`, and `prefixes` (sorted by network, then
/// length) are the longer ones.
fn build(offset: u8, inherited: u32, prefixes: &[Prefix]) -> Node {
    let mut value = [inherited; 64];
    let mut child_bits = 0u64;
    // Prefixes ending in this node, shortest first so longer ones overwrite them.
    let mut local: Vec<Prefix> = prefixes
        .iter()
        .filter(|p| p.len <= offset + STRIDE)
        .copied()
        .collect();
    local.sort_by_key(|p| p.len);
    for p in &local {
        let first = slot_of(p.network, offset) as usize;
        // A prefix `STRIDE - k` bits into this node covers 2^k slots.
        let count = 1usize << (offset + STRIDE - p.len);
        if let Some(range) = value.get_mut(first..first + count) {
            range.fill(p.route);
        }
    }
    for p in prefixes.iter().filter(|p| p.len > offset + STRIDE) {
        child_bits |= 1 << slot_of(p.network, offset);
    }
    let children = build_children(offset, child_bits, &value, prefixes);
    let (run_bits, leaves) = leaf_runs(child_bits, &value);
    Node {
        child_bits,
        run_bits,
        children,
        leaves,
    }
}

/// The children of a node built by [`build`], in slot order.
fn build_children(
    offset: u8,
    child_bits: u64,
    value: &[u32; 64],
    prefixes: &[Prefix],
) -> Box<[Node]> {
    if child_bits == 0 {
        return Box::default();
    }
    let deeper: Vec<Prefix> = prefixes
        .iter()
        .filter(|p| p.len > offset + STRIDE)
        .copied()
        .collect();
    let mut children = Vec::with_capacity(child_bits.count_ones() as usize);
    let mut rest = deeper.as_slice();
    while let Some(first) = rest.first() {
        let slot = slot_of(first.network, offset);
        let end = rest
            .iter()
            .position(|p| slot_of(p.network, offset) != slot)
            .unwrap_or(rest.len());
        let (mine, after) = rest.split_at(end);
        children.push(build(offset + STRIDE, value[slot as usize], mine));
        rest = after;
    }
    children.into_boxed_slice()
}

/// The run bits and run values of the leaf slots (those not in `child_bits`).
fn leaf_runs(child_bits: u64, value: &[u32; 64]) -> (u64, Box<[u32]>) {
    let mut run_bits = 0u64;
    let mut leaves = Vec::new();
    let mut previous = None;
    for (slot, &v) in value.iter().enumerate() {
        if child_bits & (1 << slot) != 0 {
            continue;
        }
        if previous != Some(v) {
            run_bits |= 1 << slot;
            leaves.push(v);
            previous = Some(v);
        }
    }
    (run_bits, leaves.into_boxed_slice())
}
