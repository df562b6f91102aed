//! The socket table's storage: a vector that grows by fixed chunks, never by doubling.
//!
//! A connection is about a kilobyte and lives inline in its slot (no allocation per
//! connection, and the slot is the cache line the 4-tuple lookup leads to). In one
//! `Vec` the slots would cost a third more than they hold on average, the slack of
//! doubling; in chunks of [`CHUNK`] slots the slack is under one chunk, and a chunk
//! never moves, so growing copies no connection.

use alloc::vec::Vec;

/// Slots per chunk: small, so the last chunk's slack is a few slots, and a power of
/// two, so an index splits with a shift and a mask.
pub(crate) const CHUNK: usize = 8;

/// A growable sequence of `T` stored in chunks of [`CHUNK`].
#[derive(Debug)]
pub(crate) struct Slab<T> {
    /// Every chunk but the last is full; each was allocated for exactly `CHUNK`.
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Slab<T> {
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

    /// The element at `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<&T> {
        self.chunks.get(index / CHUNK)?.get(index % CHUNK)
    }

    /// The element at `index`.
    #[inline]
    pub fn get_mut(&mut self, index: usize) -> Option<&mut T> {
        self.chunks.get_mut(index / CHUNK)?.get_mut(index % CHUNK)
    }

    /// The last element.
    pub fn last(&self) -> Option<&T> {
        self.chunks.last()?.last()
    }

    /// Append `value` (a new chunk when the last is full).
    pub fn push(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(value),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// Remove the last element, and its chunk once empty.
    pub fn pop(&mut self) -> Option<T> {
        let chunk = self.chunks.last_mut()?;
        let value = chunk.pop()?;
        if chunk.is_empty() {
            self.chunks.pop();
        }
        self.len -= 1;
        Some(value)
    }

    /// Give back the chunk table's unused capacity beyond twice its length.
    pub fn shrink(&mut self) {
        self.chunks.shrink_to(2 * self.chunks.len());
    }

    /// Every element, in index order.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.chunks.iter().flatten()
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
        for i in 0..3 * CHUNK + 1 {
            slab.push(i);
        }
        assert_eq!(slab.len(), 3 * CHUNK + 1);
        assert_eq!(slab.capacity(), 4 * CHUNK);
        assert_eq!(slab.get(2 * CHUNK + 3), Some(&(2 * CHUNK + 3)));
        assert_eq!(slab.get(3 * CHUNK + 1), None);
        *slab.get_mut(CHUNK).unwrap() = 100;
        assert_eq!(slab[CHUNK], 100);
        assert!(slab.iter().copied().eq((0..3 * CHUNK + 1).map(|i| {
            if i == CHUNK { 100 } else { i }
        })));
        assert_eq!(slab.pop(), Some(3 * CHUNK));
        assert_eq!(slab.capacity(), 3 * CHUNK);
        assert_eq!(slab.last(), Some(&(3 * CHUNK - 1)));
        while slab.pop().is_some() {}
        assert_eq!((slab.len(), slab.capacity()), (0, 0));
    }
}
