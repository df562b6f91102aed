//! The socket table's storage: a vector that grows by fixed chunks, never by doubling.
//!
//! A connection is about a kilobyte and lives inline in its slot (no allocation per
//! connection, and the slot is the cache line the 4-tuple lookup leads to). In one
//! `Vec` the slots would cost a third more than they hold on average, the slack of
//! doubling; in chunks of [`CHUNK`] slots the slack is under two chunks, and a chunk
//! never moves, so growing copies no connection.

use alloc::boxed::Box;
use alloc::vec::Vec;

/// Slots per chunk: small, so the slack is a few slots, and a power of two, so an
/// index splits with a shift and a mask (and the mask needs no bounds check).
pub(crate) const CHUNK: usize = 8;

/// A growable sequence of `T` stored in chunks of [`CHUNK`]. Every slot of a chunk
/// holds a `T`: those at or past `len` hold what `pop` left (`T::default()`) or what
/// `pop_emptied` left (an element its caller emptied), and [`Slab::get`] returns them
/// too (the table finds no socket there).
#[derive(Debug)]
pub(crate) struct Slab<T> {
    /// The chunks holding `0..len`, and at most one more (kept so that a table that
    /// grows and shrinks across a chunk boundary does not allocate every time).
    chunks: Vec<Box<[T; CHUNK]>>,
    len: usize,
}

impl<T: Default> Slab<T> {
    /// An empty slab (no allocation).
    pub fn new() -> Slab<T> {
        Slab {
            chunks: Vec::new(),
            len: 0,
        }
    }

    /// Elements held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Elements the chunks have room for.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    /// Elements the chunk table has room for without growing.
    pub fn reserved(&self) -> usize {
        self.chunks.capacity() * CHUNK
    }

    /// The element at `index` (for `len <= index` below [`Slab::capacity`], a default
    /// one; the caller tells them apart by what they hold).
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        Some(&self.chunks.get(index / CHUNK)?[index % CHUNK])
    }

    /// The element at `index`, as [`Slab::get`].
    #[inline]
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        Some(&mut self.chunks.get_mut(index / CHUNK)?[index % CHUNK])
    }

    /// The last element.
    pub fn last(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// Append `value` (a new chunk when the last is full).
    #[cfg(test)]
    pub fn push(&mut self, value: T) {
        *self.push_default() = value;
    }

    /// Append `T::default()` (a new chunk when the last is full) and return it, to be
    /// filled in place: a large element written there is moved once, where building
    /// it and then pushing it moves it twice.
    pub fn push_default(&mut self) -> &mut T {
        if self.len / CHUNK == self.chunks.len() {
            let chunk: Box<[T]> = (0..CHUNK).map(|_| T::default()).collect();
            let Ok(chunk) = chunk.try_into() else {
                unreachable!("CHUNK elements were collected")
            };
            self.chunks.push(chunk);
        }
        let index = self.len;
        self.len += 1;
        let slot = &mut self.chunks[index / CHUNK][index % CHUNK];
        *slot = T::default();
        slot
    }

    /// Remove the last element, dropped where it is (its slot holds `T::default()`
    /// again; nothing is moved out, a connection's slot being most of a kilobyte), and
    /// free the chunks past the one it was in. False when there is none.
    #[cfg(test)]
    pub fn pop(&mut self) -> bool {
        let Some(index) = self.len.checked_sub(1) else {
            return false;
        };
        self.chunks[index / CHUNK][index % CHUNK] = T::default();
        self.len = index;
        self.chunks.truncate(index / CHUNK + 1);
        true
    }

    /// Remove the last element, which the caller has emptied already (it owns nothing
    /// more): left where it is as it is, to be overwritten by the next
    /// [`Slab::push_default`] or dropped with its chunk. [`Slab::pop`] writes a
    /// default over it, a copy of the whole element (most of a kilobyte for a socket
    /// slot) on every connection that ends in the table's last slot (W3 churn).
    /// False when there is none.
    pub fn pop_emptied(&mut self) -> bool {
        let Some(index) = self.len.checked_sub(1) else {
            return false;
        };
        self.len = index;
        self.chunks.truncate(index / CHUNK + 1);
        true
    }

    /// Give back the chunk table's unused capacity beyond twice its length.
    pub fn shrink(&mut self) {
        self.chunks.shrink_to(2 * self.chunks.len());
    }

    /// Every element below `len`, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flat_map(|c| c.iter()).take(self.len)
    }
}

impl<T> core::ops::Index<usize> for Slab<T> {
    type Output = T;
    fn index(&self, index: usize) -> &T {
        &self.chunks[index / CHUNK][index % CHUNK]
    }
}

impl<T> core::ops::IndexMut<usize> for Slab<T> {
    fn index_mut(&mut self, index: usize) -> &mut T {
        &mut self.chunks[index / CHUNK][index % CHUNK]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_stay_at_their_index_across_chunks_and_chunks_go_when_emptied() {
        let mut slab = Slab::new();
        for i in 1..=3 * CHUNK + 1 {
            slab.push(i);
        }
        assert_eq!(slab.len(), 3 * CHUNK + 1);
        assert_eq!(slab.capacity(), 4 * CHUNK);
        assert_eq!(slab.get(2 * CHUNK + 3), Some(&(2 * CHUNK + 4)));
        assert_eq!(slab.get(3 * CHUNK + 1), Some(&0), "past len: a default");
        assert_eq!(slab.get(4 * CHUNK), None);
        *slab.get_mut(CHUNK).unwrap() = 100;
        assert_eq!(slab[CHUNK], 100);
        assert!(
            slab.iter()
                .copied()
                .eq((1..=3 * CHUNK + 1).map(|i| { if i == CHUNK + 1 { 100 } else { i } }))
        );
        assert!(slab.pop());
        assert_eq!(slab.get(3 * CHUNK), Some(&0), "popped: a default again");
        assert_eq!(slab.capacity(), 4 * CHUNK, "one spare chunk is kept");
        assert_eq!(slab.last(), Some(&(3 * CHUNK)));
        assert!(slab.pop());
        assert_eq!(slab.capacity(), 3 * CHUNK, "but no more");
        assert_eq!(slab.last(), Some(&(3 * CHUNK - 1)));
        assert_eq!(slab.get(3 * CHUNK - 1), Some(&0));
        *slab.push_default() = 7;
        assert_eq!(slab.last(), Some(&7));
        assert!(slab.pop());
        while slab.pop() {}
        assert!(!slab.pop());
        assert_eq!((slab.len(), slab.capacity()), (0, CHUNK));
    }

    #[test]
    fn pop_emptied_leaves_the_element_until_the_next_push_overwrites_it() {
        let mut slab = Slab::new();
        for i in 1..=CHUNK + 2 {
            slab.push(i);
        }
        *slab.get_mut(CHUNK + 1).unwrap() = 0;
        assert!(slab.pop_emptied());
        assert_eq!(slab.len(), CHUNK + 1);
        assert_eq!(slab.last(), Some(&(CHUNK + 1)));
        assert_eq!(slab.capacity(), 2 * CHUNK, "the chunk it was in is kept");
        assert_eq!(*slab.push_default(), 0, "pushed anew: a default");
        assert!(slab.pop_emptied() && slab.pop_emptied());
        assert_eq!(slab.last(), Some(&CHUNK));
        assert_eq!(slab.capacity(), 2 * CHUNK);
        assert!(slab.pop_emptied());
        assert_eq!(slab.capacity(), CHUNK, "chunks past the spare one go");
        while slab.pop_emptied() {}
        assert!(!slab.pop_emptied());
        assert_eq!((slab.len(), slab.capacity()), (0, CHUNK));
        assert_eq!(*slab.push_default(), 0);
    }
}
