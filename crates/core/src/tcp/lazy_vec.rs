//! A `Vec` that costs 8 bytes, not 24, in a structure that rarely uses it: no
//! allocation until the first push, and then the room its user asks for (the SACK
//! scoreboard all it may hold at once; a receive buffer's out-of-order ranges room for
//! 32, grown as a `Vec` grows). Every connection has such vectors, few ever see a hole.

use alloc::boxed::Box;
use alloc::vec::Vec;

/// A vector allocated, with its whole room, on first use.
#[derive(Debug, Clone)]
#[expect(
    clippy::box_collection,
    reason = "the box is the point: 8 bytes in every connection instead of 24"
)]
pub(crate) struct LazyVec<T>(Option<Box<Vec<T>>>);

impl<T> Default for LazyVec<T> {
    fn default() -> LazyVec<T> {
        LazyVec(None)
    }
}

impl<T> core::ops::Deref for LazyVec<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

impl<T> LazyVec<T> {
    /// The vector, to change: allocated with capacity `room` on first use (it keeps
    /// that allocation after, so it never reallocates while it holds at most `room`).
    #[inline]
    pub(crate) fn make_mut(&mut self, room: usize) -> &mut Vec<T> {
        self.0
            .get_or_insert_with(|| Box::new(Vec::with_capacity(room)))
    }

    /// The elements, each to change in place.
    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        self.0.as_deref_mut().map_or(&mut [], Vec::as_mut_slice)
    }

    /// Whether nothing is allocated (never used, or given back).
    pub(crate) fn is_unallocated(&self) -> bool {
        self.0.is_none()
    }

    /// Remove every element (the allocation stays).
    pub(crate) fn clear(&mut self) {
        if let Some(v) = self.0.as_deref_mut() {
            v.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_allocated_until_the_first_change_and_then_all_the_room() {
        let mut v: LazyVec<(u32, u32)> = LazyVec::default();
        assert!(v.is_empty() && v.0.is_none());
        assert!(v.as_mut_slice().is_empty());
        v.clear();
        assert!(v.0.is_none());
        v.make_mut(4).push((1, 2));
        v.make_mut(4).insert(0, (0, 1));
        assert_eq!(&*v, &[(0, 1), (1, 2)]);
        assert_eq!(v.0.as_ref().map(|b| b.capacity()), Some(4));
        v.as_mut_slice()[1].1 = 3;
        assert_eq!(v[1], (1, 3));
        v.clear();
        assert!(v.is_empty() && v.0.is_some());
    }
}
