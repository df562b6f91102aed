//! The forwarding half of the routing table: a Poptrie (Asai & Ohara, "Poptrie: A
//! Compressed Trie with Population Count for Fast and Scalable Software IP Routing Table
//! Lookup", SIGCOMM 2015), with direct pointing for large tables.
//!
//! The address, padded with four zero bits to 36, is read six bits at a time: a node has
//! 64 slots (the last level's slots repeat the address's last bits over several slots).
//! Each slot is either a child node or a leaf; leaves are pushed (a leaf holds the
//! longest match for every address in its slot, shorter routes from above included), so
//! a lookup reads one leaf, at the end. Both kinds are stored compressed and contiguous:
//! a node's children sit side by side in `nodes` from `child_base`, one per bit of
//! `child_bits`, and its leaves in `leaves` from `leaf_base`, one per run of leaf slots
//! with the same value, a run starting where `run_bits` has a bit. A population count of
//! the bits below a slot gives its position in either array. A node whose leaf slots all
//! hold one value keeps it in `leaf_base` itself (`run_bits` zero): no leaf to fetch.
//!
//! Small tables are one trie from the root (`nodes[0]`, bits 0..6 first): a node costs
//! 24 bytes, an empty table allocates nothing. A table of more than [`DIRECT_MIN`] routes
//! also has `direct`, an array indexed by the address's top 16 bits whose entries are
//! either a leaf (a route index) or, tagged with [`NODE_TAG`], the node reading bits
//! 16..22 of that /16: most lookups read one entry of `direct` (256 KiB, cache-friendly),
//! one or two nodes and a leaf.
//!
//! Updates rebuild the smallest subtree a change can reach (see [`Trie::update`]),
//! appending the new nodes and leaves; what they replace is counted as garbage, and the
//! whole trie is rebuilt (compacted) when garbage outweighs what is live. The routes
//! themselves live in the caller's table, which the trie names by index.

use alloc::vec;
use alloc::vec::Vec;

/// A leaf naming no route; route indices are below it.
pub(super) const NO_ROUTE: u32 = NODE_TAG - 1;

/// In `direct`, the bit marking an entry as a node index rather than a leaf.
const NODE_TAG: u32 = 1 << 31;

/// Bits read per node.
const STRIDE: u8 = 6;

/// Bits `direct` resolves.
const DIRECT_BITS: u8 = 16;

/// Tables with more routes than this use `direct`; they drop it again below half this.
pub(super) const DIRECT_MIN: usize = 1024;

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

/// Where the trie learns the routes it is built from (the caller's prefix map).
pub(super) trait Source {
    /// Every prefix inside `region/len` with a length above `len`, sorted by (network,
    /// length).
    fn prefixes_in(&self, region: u32, len: u8) -> Vec<Prefix>;
    /// The index of the longest route of length at most `len` covering `region`, or
    /// `NO_ROUTE`.
    fn best_covering(&self, region: u32, len: u8) -> u32;
    /// How many routes there are.
    fn count(&self) -> usize;
}

/// One trie node: 64 slots, each a child or a leaf (24 bytes).
#[derive(Debug, Clone, Copy, Default)]
struct Node {
    /// Bit `s` set: slot `s` is a child, `nodes[child_base + popcount(child_bits below
    /// s)]`.
    child_bits: u64,
    /// Bit `s` set: slot `s` is a leaf that starts a new run (its value differs from the
    /// leaf slot before it, or it is the first leaf slot). Never set for child slots.
    /// Zero when every leaf slot holds the same value, `leaf_base` itself.
    run_bits: u64,
    /// The first of this node's leaves in `leaves` (or the only leaf value, above).
    leaf_base: u32,
    /// The first of this node's children in `nodes`.
    child_base: u32,
}

/// The trie; an empty one allocates nothing.
#[derive(Debug, Clone, Default)]
pub(super) struct Trie {
    /// Every node; without `direct`, `nodes[0]` is the root.
    nodes: Vec<Node>,
    /// Every leaf run.
    leaves: Vec<u32>,
    /// Empty, or one entry per /16: a leaf, or `NODE_TAG |` the index of its node.
    direct: Vec<u32>,
    /// Nodes and leaves no longer reachable.
    garbage: usize,
}

/// The slot `key` falls in at the node reading bits `offset..offset + 6`.
#[inline]
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
#[inline]
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

/// An array position as stored in a node (positions past `u32` would need 96 GiB).
fn position(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The `direct` entry of the /16 holding `key`.
#[inline]
fn chunk_of(key: u32) -> usize {
    (key >> (32 - DIRECT_BITS)) as usize
}

impl Trie {
    /// The index of the longest route covering `key`, or `NO_ROUTE`.
    #[inline]
    pub(super) fn lookup(&self, key: u32) -> u32 {
        let (mut index, mut offset) = match self.direct.get(chunk_of(key)) {
            Some(&entry) if entry & NODE_TAG == 0 => return entry,
            Some(&entry) => ((entry & !NODE_TAG) as usize, DIRECT_BITS),
            None => (0, 0),
        };
        // Six levels at most: the loop always returns before it ends.
        for _ in 0..6 {
            let Some(node) = self.nodes.get(index) else {
                break;
            };
            let slot = slot_of(key, offset);
            let bit = 1u64 << slot;
            if node.child_bits & bit == 0 {
                if node.run_bits == 0 {
                    return node.leaf_base;
                }
                let run = (node.run_bits & up_to(slot)).count_ones();
                let at = (node.leaf_base as usize + run as usize).wrapping_sub(1);
                return self.leaves.get(at).copied().unwrap_or(NO_ROUTE);
            }
            index = node.child_base as usize + (node.child_bits & (bit - 1)).count_ones() as usize;
            offset += STRIDE;
        }
        NO_ROUTE
    }

    /// Bring the trie up to date after the routes for `network/len` changed (added,
    /// removed), `source` already holding the new routes.
    ///
    /// Leaves are pushed, so a change reaches every slot under the prefix at any depth:
    /// the subtree rebuilt is that of the deepest existing node whose region holds the
    /// prefix (offset below `len`), or the node above it when that subtree has emptied;
    /// with `direct`, a prefix of 16 bits or fewer rebuilds the /16s it covers. Crossing
    /// [`DIRECT_MIN`] either way, or garbage outgrowing the live trie, rebuilds it all.
    pub(super) fn update(&mut self, network: u32, len: u8, source: &impl Source) {
        let count = source.count();
        if self.wants_direct(count) != self.is_direct_now()
            || (self.nodes.is_empty() && self.direct.is_empty())
        {
            self.rebuild_all(source);
        } else if self.direct.is_empty() {
            self.rebuild_below(0, 0, network, len, source);
        } else if len <= DIRECT_BITS {
            self.build_range(network, len, source);
        } else {
            self.rebuild_chunk(network, len, source);
        }
        if self.garbage > (self.nodes.len() + self.leaves.len()) / 2 {
            self.rebuild_all(source);
        }
    }

    /// Whether lookups start at `direct`.
    #[cfg(test)]
    pub(super) fn is_direct(&self) -> bool {
        self.is_direct_now()
    }

    /// Whether lookups start at `direct` (they do from `DIRECT_MIN` routes on).
    fn is_direct_now(&self) -> bool {
        !self.direct.is_empty()
    }

    /// Whether a table of `count` routes should have `direct` (with hysteresis).
    fn wants_direct(&self, count: usize) -> bool {
        if self.direct.is_empty() {
            count > DIRECT_MIN
        } else {
            count >= DIRECT_MIN / 2
        }
    }

    /// Replace the whole trie with one built from `source`.
    pub(super) fn rebuild_all(&mut self, source: &impl Source) {
        let count = source.count();
        let direct = self.wants_direct(count);
        self.nodes.clear();
        self.leaves.clear();
        self.garbage = 0;
        if count == 0 {
            *self = Trie::default();
        } else if direct {
            self.direct.clear();
            self.direct.resize(1 << DIRECT_BITS, NO_ROUTE);
            self.build_range(0, 0, source);
        } else {
            self.direct = Vec::new();
            let prefixes = source.prefixes_in(0, 0);
            self.nodes.push(Node::default());
            let root = self.build(0, source.best_covering(0, 0), &prefixes);
            if let Some(slot) = self.nodes.first_mut() {
                *slot = root;
            }
        }
        self.nodes.shrink_to_fit();
        self.leaves.shrink_to_fit();
    }

    /// With `direct`: rebuild every /16 inside `network/len` (`len` at most 16).
    fn build_range(&mut self, network: u32, len: u8, source: &impl Source) {
        let first = chunk_of(network & mask(len));
        let chunks = 1usize << (DIRECT_BITS - len.min(DIRECT_BITS));
        let prefixes = source.prefixes_in(network & mask(len), len);
        // The leaf of each /16, painted shortest prefix first.
        let mut values = vec![source.best_covering(network, len); chunks];
        let mut short: Vec<&Prefix> = prefixes.iter().filter(|p| p.len <= DIRECT_BITS).collect();
        short.sort_by_key(|p| p.len);
        for p in short {
            let start = chunk_of(p.network).wrapping_sub(first);
            let count = 1usize << (DIRECT_BITS - p.len);
            if let Some(range) = values.get_mut(start..start + count) {
                range.fill(p.route);
            }
        }
        for chunk in first..first + chunks {
            if let Some(&entry) = self.direct.get(chunk) {
                self.discard_entry(entry);
            }
        }
        let mut rest: &[Prefix] = &prefixes;
        for (i, &value) in values.iter().enumerate() {
            let end = rest
                .iter()
                .position(|p| chunk_of(p.network) != first + i)
                .unwrap_or(rest.len());
            let (mine, after) = rest.split_at(end);
            rest = after;
            let long: Vec<Prefix> = mine
                .iter()
                .filter(|p| p.len > DIRECT_BITS)
                .copied()
                .collect();
            let entry = self.subtrie(value, &long);
            if let Some(slot) = self.direct.get_mut(first + i) {
                *slot = entry;
            }
        }
    }

    /// The `direct` entry for a /16 whose longest route of 16 bits or fewer is
    /// `inherited` and whose longer prefixes are `long`.
    fn subtrie(&mut self, inherited: u32, long: &[Prefix]) -> u32 {
        if long.is_empty() {
            return inherited;
        }
        let at = self.nodes.len();
        self.nodes.push(Node::default());
        let node = self.build(DIRECT_BITS, inherited, long);
        if let Some(slot) = self.nodes.get_mut(at) {
            *slot = node;
        }
        NODE_TAG | position(at)
    }

    /// With `direct`: rebuild after a change to `network/len`, `len` above 16.
    fn rebuild_chunk(&mut self, network: u32, len: u8, source: &impl Source) {
        let chunk = chunk_of(network);
        let Some(&entry) = self.direct.get(chunk) else {
            return;
        };
        if entry & NODE_TAG != 0
            && self.rebuild_below(
                (entry & !NODE_TAG) as usize,
                DIRECT_BITS,
                network,
                len,
                source,
            )
        {
            return;
        }
        // A leaf, or a subtrie that emptied: the /16 is built afresh.
        self.discard_entry(entry);
        let region = network & mask(DIRECT_BITS);
        let long = source.prefixes_in(region, DIRECT_BITS);
        let fresh = self.subtrie(source.best_covering(region, DIRECT_BITS), &long);
        if let Some(slot) = self.direct.get_mut(chunk) {
            *slot = fresh;
        }
    }

    /// Rebuild, within the subtrie whose top node is `nodes[top]` reading from bit
    /// `base`, the subtree a change to `network/len` reaches. False, changing nothing,
    /// when a `direct` subtrie has emptied and must be replaced by a leaf.
    fn rebuild_below(
        &mut self,
        top: usize,
        base: u8,
        network: u32,
        len: u8,
        source: &impl Source,
    ) -> bool {
        // The nodes on the way down to the node rebuilt.
        let mut path = vec![top];
        let mut offset = base;
        while len > offset + STRIDE {
            let Some(node) = path.last().and_then(|&i| self.nodes.get(i)) else {
                return false;
            };
            let slot = slot_of(network, offset);
            if node.child_bits & (1 << slot) == 0 {
                break;
            }
            let below = (node.child_bits & (up_to(slot) >> 1)).count_ones() as usize;
            path.push(node.child_base as usize + below);
            offset += STRIDE;
        }
        while let Some(&at) = path.last() {
            let region = network & mask(offset);
            let prefixes = source.prefixes_in(region, offset);
            // An emptied node goes: its parent's slot becomes a leaf again.
            if prefixes.is_empty() && (path.len() > 1 || base > 0) {
                path.pop();
                offset = offset.saturating_sub(STRIDE);
                continue;
            }
            self.discard_below(at);
            let fresh = self.build(offset, source.best_covering(region, offset), &prefixes);
            if let Some(slot) = self.nodes.get_mut(at) {
                *slot = fresh;
            }
            return true;
        }
        false
    }

    /// Count as garbage what a `direct` entry reaches.
    fn discard_entry(&mut self, entry: u32) {
        if entry & NODE_TAG != 0 {
            let at = (entry & !NODE_TAG) as usize;
            self.discard_below(at);
            self.garbage += 1;
        }
    }

    /// Count as garbage every node and leaf below `nodes[at]` (not the node itself).
    fn discard_below(&mut self, at: usize) {
        let Some(&node) = self.nodes.get(at) else {
            return;
        };
        if node.run_bits != 0 {
            self.garbage += node.run_bits.count_ones() as usize;
        }
        let children = node.child_bits.count_ones() as usize;
        self.garbage += children;
        for i in 0..children {
            self.discard_below(node.child_base as usize + i);
        }
    }

    /// The bytes of every node, leaf and `direct` entry.
    pub(super) fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * core::mem::size_of::<Node>()
            + (self.leaves.capacity() + self.direct.capacity()) * core::mem::size_of::<u32>()
    }

    /// The node reading bits `offset..offset + 6` of a region where the longest route of
    /// length at most `offset` is `inherited`, and `prefixes` (sorted by network, then
    /// length) are the longer ones; its children and leaves are appended.
    fn build(&mut self, offset: u8, inherited: u32, prefixes: &[Prefix]) -> Node {
        let mut value = [inherited; 64];
        let mut child_bits = 0u64;
        // Prefixes ending in this node, shortest first so longer ones overwrite them.
        let mut local: Vec<&Prefix> = prefixes
            .iter()
            .filter(|p| p.len <= offset + STRIDE)
            .collect();
        local.sort_by_key(|p| p.len);
        for p in local {
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
        let child_base = self.build_children(offset, child_bits, &value, prefixes);
        let (run_bits, leaf_base) = self.leaf_runs(child_bits, &value);
        Node {
            child_bits,
            run_bits,
            leaf_base,
            child_base,
        }
    }

    /// The children of a node built by [`Trie::build`], appended in slot order; the
    /// position of the first.
    fn build_children(
        &mut self,
        offset: u8,
        child_bits: u64,
        value: &[u32; 64],
        prefixes: &[Prefix],
    ) -> u32 {
        let base = self.nodes.len();
        if child_bits == 0 {
            return position(base);
        }
        let deeper: Vec<Prefix> = prefixes
            .iter()
            .filter(|p| p.len > offset + STRIDE)
            .copied()
            .collect();
        self.nodes
            .resize(base + child_bits.count_ones() as usize, Node::default());
        let mut rest = deeper.as_slice();
        let mut at = base;
        while let Some(first) = rest.first() {
            let slot = slot_of(first.network, offset);
            let end = rest
                .iter()
                .position(|p| slot_of(p.network, offset) != slot)
                .unwrap_or(rest.len());
            let (mine, after) = rest.split_at(end);
            let child = self.build(offset + STRIDE, value[slot as usize], mine);
            if let Some(node) = self.nodes.get_mut(at) {
                *node = child;
            }
            at += 1;
            rest = after;
        }
        position(base)
    }

    /// The run bits and first leaf of the leaf slots (those not in `child_bits`),
    /// appended; a single run is kept in the node instead (zero run bits, its value).
    fn leaf_runs(&mut self, child_bits: u64, value: &[u32; 64]) -> (u64, u32) {
        let mut run_bits = 0u64;
        let mut runs: Vec<u32> = Vec::new();
        let mut previous = None;
        for (slot, &v) in value.iter().enumerate() {
            if child_bits & (1 << slot) != 0 {
                continue;
            }
            if previous != Some(v) {
                run_bits |= 1 << slot;
                runs.push(v);
                previous = Some(v);
            }
        }
        match runs.as_slice() {
            [] => (0, NO_ROUTE),
            [single] => (0, *single),
            _ => {
                let base = position(self.leaves.len());
                self.leaves.extend_from_slice(&runs);
                (run_bits, base)
            }
        }
    }
}
