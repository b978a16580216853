//! The guest's allocator: free lists of small blocks in front of a general allocator.
//!
//! With a general allocator alone, the pizza bot in the sandbox spends a quarter of the
//! guest's time in allocation: the engine, serde_json and boa make many small, short-lived allocations, and a
//! general allocator (dlmalloc, or talc) spends tens of wasm instructions on each. Blocks of
//! up to [`MAX_SMALL`] bytes are therefore served from per-size-class free lists (a push or a
//! pop: a handful of instructions); bigger blocks go to the inner allocator.
//!
//! Small blocks are never handed back to the inner allocator, so the guest's small-block
//! memory is its peak use per size class; the instance's memory cap bounds it like any other.
//! Not thread-safe: the guest is single-threaded wasm (no `atomics`).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr;

/// Size-class granularity, and the alignment every small block has.
const GRANULE: usize = 16;
/// The largest block served from the free lists.
pub const MAX_SMALL: usize = 512;
const CLASSES: usize = MAX_SMALL / GRANULE;

/// A free-list cache of small blocks in front of `A`.
pub struct SmallBlocks<A> {
    inner: A,
    /// Head of each size class's free list; a free block's first word links to the next.
    free: UnsafeCell<[*mut u8; CLASSES]>,
}

impl<A> SmallBlocks<A> {
    pub const fn new(inner: A) -> SmallBlocks<A> {
        SmallBlocks {
            inner,
            free: UnsafeCell::new([ptr::null_mut(); CLASSES]),
        }
    }
}

/// The size class of a layout, when it is small.
#[inline]
fn class_of(layout: Layout) -> Option<usize> {
    if layout.size() <= MAX_SMALL && layout.align() <= GRANULE {
        Some(layout.size().max(1).div_ceil(GRANULE) - 1)
    } else {
        None
    }
}

#[inline]
fn class_layout(class: usize) -> Layout {
    // SAFETY: non-zero size, power-of-two alignment, far below isize::MAX.
    unsafe { Layout::from_size_align_unchecked((class + 1) * GRANULE, GRANULE) }
}

unsafe impl<A: GlobalAlloc> GlobalAlloc for SmallBlocks<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(c) => unsafe {
                let heads = &mut *self.free.get();
                let head = heads[c];
                if head.is_null() {
                    self.inner.alloc(class_layout(c))
                } else {
                    heads[c] = *(head as *mut *mut u8);
                    head
                }
            },
            None => unsafe { self.inner.alloc(layout) },
        }
    }

    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        match class_of(layout) {
            Some(c) => unsafe {
                let heads = &mut *self.free.get();
                *(p as *mut *mut u8) = heads[c];
                heads[c] = p;
            },
            None => unsafe { self.inner.dealloc(p, layout) },
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees new_size is valid for layout's alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(layout), class_of(new_layout)) {
            // Still fits its block.
            (Some(a), Some(b)) if a == b => p,
            // Both big: the inner allocator may grow or shrink in place.
            (None, None) => unsafe { self.inner.realloc(p, layout, new_size) },
            _ => unsafe {
                let q = self.alloc(new_layout);
                if !q.is_null() {
                    ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                    self.dealloc(p, layout);
                }
                q
            },
        }
    }
}

/// The guest is single-threaded: nothing else can touch the free lists.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
unsafe impl<A: Sync> Sync for SmallBlocks<A> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;

    #[test]
    fn small_blocks_are_reused_per_class_and_never_overlap() {
        let a = SmallBlocks::new(System);
        unsafe {
            let l24 = Layout::from_size_align(24, 8).unwrap();
            let l32 = Layout::from_size_align(32, 8).unwrap();
            let x = a.alloc(l24);
            let y = a.alloc(l32);
            assert!(!x.is_null() && !y.is_null() && x != y);
            assert_eq!(x as usize % GRANULE, 0);
            ptr::write_bytes(x, 0xAA, 24);
            ptr::write_bytes(y, 0xBB, 32);
            assert_eq!(*x.add(23), 0xAA, "blocks do not overlap");
            a.dealloc(x, l24);
            // 17..=32 bytes share a class: the freed block comes back.
            assert_eq!(a.alloc(l32), x);
            // Freed blocks come back last-in first-out.
            a.dealloc(y, l32);
            a.dealloc(x, l32);
            assert_eq!(a.alloc(l24), x);
            assert_eq!(a.alloc(l24), y);
            a.dealloc(x, l24);
            a.dealloc(y, l24);
        }
    }

    #[test]
    fn realloc_keeps_contents_across_classes_and_to_big_blocks() {
        let a = SmallBlocks::new(System);
        unsafe {
            let l = Layout::from_size_align(10, 1).unwrap();
            let p = a.alloc(l);
            for i in 0..10 {
                *p.add(i) = i as u8;
            }
            // Same class: same block.
            assert_eq!(a.realloc(p, l, 16), p);
            // Bigger class, then a big block, then back to small.
            let q = a.realloc(p, Layout::from_size_align(16, 1).unwrap(), 200);
            let r = a.realloc(q, Layout::from_size_align(200, 1).unwrap(), 4000);
            let s = a.realloc(r, Layout::from_size_align(4000, 1).unwrap(), 12);
            for i in 0..10 {
                assert_eq!(*s.add(i), i as u8);
            }
            a.dealloc(s, Layout::from_size_align(12, 1).unwrap());
        }
    }

    #[test]
    fn big_or_over_aligned_layouts_go_to_the_inner_allocator() {
        assert_eq!(class_of(Layout::from_size_align(513, 8).unwrap()), None);
        assert_eq!(class_of(Layout::from_size_align(64, 32).unwrap()), None);
        assert_eq!(class_of(Layout::from_size_align(0, 1).unwrap()), Some(0));
        assert_eq!(
            class_of(Layout::from_size_align(512, 16).unwrap()),
            Some(CLASSES - 1)
        );
    }
}
