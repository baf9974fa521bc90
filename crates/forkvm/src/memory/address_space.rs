//! Bookkeeping of the guest's user address space: the brk heap grows up from
//! the end of the program, mmap regions are handed out top-down below the
//! stack, and the two may not meet. All guest RAM is mapped by the page
//! tables from the start, so this is pure accounting: running out of it is
//! the guest's ENOMEM.

use crate::abi::PAGE_SIZE;
use std::collections::BTreeMap;

fn page_up(v: u64) -> Option<u64> {
    v.checked_add(PAGE_SIZE - 1).map(|x| x & !(PAGE_SIZE - 1))
}

/// The guest address-space layout and its allocations.
#[derive(Debug, Clone)]
pub struct AddressSpace {
    /// Initial program break (end of the program image, page aligned).
    pub brk_start: u64,
    /// Current program break.
    pub brk: u64,
    /// Where the argument strings are on the initial stack (start, end):
    /// `/proc/self/cmdline` reads them there, as Linux does.
    pub args: (u64, u64),
    /// Lowest address the mmap area may use (moves with the brk).
    mmap_floor_min: u64,
    /// Top of the mmap area (bottom of the stack guard gap, or of the stack
    /// reservation when there is no gap).
    pub mmap_top: u64,
    /// Bytes between the mmap area and the stack that nothing may map.
    stack_guard: u64,
    /// Live mappings: start → length (page multiples).
    maps: BTreeMap<u64, u64>,
    /// Freed ranges whose old contents are still there: zeroed when handed
    /// out again instead of when freed, so their pages stay mapped (a fault
    /// each on PVM when dropped).
    dirty: BTreeMap<u64, u64>,
    /// Ranges marked `MADV_WIPEONFORK`: a forked child sees them zeroed.
    wipe_on_fork: BTreeMap<u64, u64>,
    /// What `/proc/self/maps` says of the mappings beyond their rights.
    pub labels: super::Labels,
    /// Where the vDSO is (0: none; a traced run has none).
    pub vdso: u64,
}

/// Removes the parts of `start..start+len` from `ranges` (start → length)
/// and returns them, lowest first.
fn cut(ranges: &mut BTreeMap<u64, u64>, start: u64, len: u64) -> Vec<(u64, u64)> {
    let end = start.saturating_add(len);
    let hit: Vec<(u64, u64)> = ranges
        .range(..end)
        .filter(|(&s, &l)| s + l > start)
        .map(|(&s, &l)| (s, l))
        .collect();
    let mut out = Vec::new();
    for (s, l) in hit {
        ranges.remove(&s);
        let (from, to) = (s.max(start), (s + l).min(end));
        out.push((from, to - from));
        if s < from {
            ranges.insert(s, from - s);
        }
        if s + l > to {
            ranges.insert(to, s + l - to);
        }
    }
    out
}

impl AddressSpace {
    /// A layout whose heap starts at `brk_start` and whose mmap area ends at `mmap_top`.
    pub fn new(brk_start: u64, mmap_top: u64) -> Self {
        let brk_start = page_up(brk_start).unwrap_or(brk_start);
        Self {
            brk_start,
            brk: brk_start,
            args: (0, 0),
            mmap_floor_min: brk_start,
            mmap_top,
            stack_guard: 0,
            maps: BTreeMap::new(),
            dirty: BTreeMap::new(),
            wipe_on_fork: BTreeMap::new(),
            labels: super::Labels::default(),
            vdso: 0,
        }
    }

    /// Lowest address currently used by an mmap region (or the top when none).
    fn mmap_low(&self) -> u64 {
        self.maps.keys().next().copied().unwrap_or(self.mmap_top)
    }

    /// Moves the break to `new`; returns the resulting break (unchanged on failure, as Linux).
    pub fn set_brk(&mut self, new: u64) -> u64 {
        if new < self.brk_start {
            return self.brk;
        }
        match page_up(new) {
            Some(end) if end <= self.mmap_low() => {
                self.brk = new;
                self.mmap_floor_min = end.max(self.brk_start);
            }
            _ => {}
        }
        self.brk
    }

    /// Finds `len` bytes (rounded to pages) of free space, highest first.
    pub fn alloc(&mut self, len: u64) -> Option<u64> {
        let len = page_up(len)?;
        if len == 0 {
            return None;
        }
        // Walk gaps from the top down.
        let mut top = self.mmap_top;
        for (&start, &l) in self.maps.iter().rev() {
            let end = start + l;
            if top >= end + len {
                let addr = top - len;
                self.maps.insert(addr, len);
                return Some(addr);
            }
            top = start;
        }
        let floor = self.mmap_floor_min;
        if top >= floor.checked_add(len)? {
            let addr = top - len;
            self.maps.insert(addr, len);
            return Some(addr);
        }
        None
    }

    /// Whether `addr..addr+len` lies within the mmap area (for MAP_FIXED).
    pub fn fixed_ok(&self, addr: u64, len: u64) -> bool {
        let Some(end) = addr.checked_add(len) else {
            return false;
        };
        addr >= self.mmap_floor_min && end <= self.mmap_top
    }

    /// Whether `addr..addr+len` lies within the brk heap's pages, where a
    /// MAP_FIXED mapping replaces heap pages as on Linux (musl's malloc puts
    /// a PROT_NONE guard page there). Such a mapping is not one of `maps`:
    /// it is part of the heap, and goes when the break moves below it.
    pub fn in_heap(&self, addr: u64, len: u64) -> bool {
        match (addr.checked_add(len), page_up(self.brk)) {
            (Some(end), Some(top)) => addr >= self.brk_start && end <= top,
            _ => false,
        }
    }

    /// Records a fixed mapping at `addr` (caller checked it with `fixed_ok`).
    pub fn insert_fixed(&mut self, addr: u64, len: u64) {
        let Some(len) = page_up(len) else { return };
        self.remove(addr, len);
        self.maps.insert(addr, len);
    }

    /// Forgets any part of mappings overlapping `addr..addr+len`.
    pub fn remove(&mut self, addr: u64, len: u64) {
        let Some(len) = page_up(len) else { return };
        cut(&mut self.wipe_on_fork, addr, len);
        self.labels.clear(addr, addr.saturating_add(len));
        let end = addr.saturating_add(len);
        let overlapping: Vec<(u64, u64)> = self
            .maps
            .range(..end)
            .filter(|(&s, &l)| s + l > addr)
            .map(|(&s, &l)| (s, l))
            .collect();
        for (s, l) in overlapping {
            self.maps.remove(&s);
            if s < addr {
                self.maps.insert(s, addr - s);
            }
            if s + l > end {
                self.maps.insert(end, s + l - end);
            }
        }
    }

    /// Length of the mapping starting exactly at `addr`.
    pub fn mapping_at(&self, addr: u64) -> Option<u64> {
        self.maps.get(&addr).copied()
    }

    /// Tries to grow the mapping at `addr` in place to `new_len`.
    pub fn grow_in_place(&mut self, addr: u64, new_len: u64) -> bool {
        let (Some(old), Some(new_len)) = (self.mapping_at(addr), page_up(new_len)) else {
            return false;
        };
        let next = self
            .maps
            .range(addr + 1..)
            .next()
            .map(|(&s, _)| s)
            .unwrap_or(self.mmap_top);
        if new_len <= old || addr + new_len <= next {
            self.maps.insert(addr, new_len);
            if new_len < old {
                // The tail is freed by the caller.
            }
            return true;
        }
        false
    }

    /// Size of the stack reservation between the guard gap and the top of RAM.
    pub fn stack_size(&self, mem_size: u64) -> u64 {
        mem_size
            .saturating_sub(self.mmap_top)
            .saturating_sub(self.stack_guard)
    }

    /// Keeps the top `guard` bytes of the mmap area (right below the stack)
    /// free for good: the stack's guard gap. Called once, before any mmap.
    pub fn reserve_stack_guard(&mut self, guard: u64) {
        let guard = guard.min(self.mmap_top.saturating_sub(self.brk_start));
        self.mmap_top -= guard;
        self.stack_guard += guard;
    }

    /// Records `start..start+len` as freed but not zeroed.
    pub fn add_dirty(&mut self, start: u64, len: u64) {
        if len > 0 {
            self.take_dirty(start, len);
            self.dirty.insert(start, len);
        }
    }

    /// Removes and returns the parts of `start..start+len` that were freed but not zeroed.
    pub fn take_dirty(&mut self, start: u64, len: u64) -> Vec<(u64, u64)> {
        cut(&mut self.dirty, start, len)
    }

    /// Marks `start..start+len` `MADV_WIPEONFORK` (`wipe`) or `MADV_KEEPONFORK`.
    pub fn set_wipe_on_fork(&mut self, start: u64, len: u64, wipe: bool) {
        cut(&mut self.wipe_on_fork, start, len);
        if wipe && len > 0 {
            self.wipe_on_fork.insert(start, len);
        }
    }

    /// The ranges a forked child sees zeroed (`MADV_WIPEONFORK`).
    pub fn wipe_on_fork(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.wipe_on_fork.iter().map(|(&s, &l)| (s, l))
    }

    /// Live mappings, lowest first.
    pub fn mappings(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.maps.iter().map(|(&s, &l)| (s, l))
    }

    /// The live mappings that overlap `start..end`, highest first (a range
    /// lookup: an allocator's madvise need not walk every mapping).
    pub fn mappings_in(&self, start: u64, end: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        // Mappings do not overlap: going down from `end`, the first that
        // ends at or below `start` has only such ones below it.
        self.maps
            .range(..end)
            .rev()
            .map(|(&s, &l)| (s, l))
            .take_while(move |&(s, l)| s + l > start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_guard_is_never_handed_out() {
        let mut a = AddressSpace::new(0x50_0000, 0x100_0000);
        a.reserve_stack_guard(0x10_0000);
        assert_eq!(
            a.stack_size(0x110_0000),
            0x10_0000,
            "the guard is not stack"
        );
        let m = a.alloc(0x1000).unwrap();
        assert_eq!(m, 0x100_0000 - 0x10_0000 - 0x1000);
        // A guard larger than the mmap area takes only what there is.
        let mut b = AddressSpace::new(0x50_0000, 0x60_0000);
        b.reserve_stack_guard(0x100_0000);
        assert_eq!(b.mmap_top, 0x50_0000);
    }

    #[test]
    fn brk_and_mmap_do_not_meet() {
        let mut a = AddressSpace::new(0x50_0000, 0x100_0000);
        assert_eq!(a.set_brk(0x60_0000), 0x60_0000);
        let m = a.alloc(0x1000).unwrap();
        assert_eq!(m, 0x100_0000 - 0x1000);
        assert!(a.alloc(0x100_0000).is_none(), "too big");
        // brk may not grow into the mapping.
        assert_eq!(a.set_brk(0x100_0000), 0x60_0000);
        a.remove(m, 0x1000);
        assert_eq!(a.alloc(0x2000).unwrap(), 0x100_0000 - 0x2000);
        assert_eq!(a.set_brk(0x10), 0x60_0000, "below start is refused");
    }

    #[test]
    fn mappings_in_finds_exactly_the_overlapping_ones() {
        let mut a = AddressSpace::new(0x50_0000, 0x100_0000);
        for at in [0x80_0000, 0x80_3000, 0x90_0000] {
            a.insert_fixed(at, 0x2000);
        }
        let got = |a: &AddressSpace, s, e| a.mappings_in(s, e).collect::<Vec<_>>();
        assert_eq!(
            got(&a, 0x80_1000, 0x80_4000),
            [(0x80_3000, 0x2000), (0x80_0000, 0x2000)]
        );
        assert_eq!(got(&a, 0x80_2000, 0x80_3000), []);
        assert_eq!(got(&a, 0x80_4000, 0x80_5000), [(0x80_3000, 0x2000)]);
        assert_eq!(got(&a, 0x70_0000, 0xa0_0000).len(), 3);
        assert_eq!(got(&a, 0x90_2000, 0xa0_0000), []);
    }

    #[test]
    fn partial_unmap_splits() {
        let mut a = AddressSpace::new(0x50_0000, 0x100_0000);
        let m = a.alloc(0x3000).unwrap();
        a.remove(m + 0x1000, 0x1000);
        let v: Vec<_> = a.mappings().collect();
        assert_eq!(v, vec![(m, 0x1000), (m + 0x2000, 0x1000)]);
        // The hole can be reused.
        assert_eq!(a.alloc(0x1000).unwrap(), m + 0x1000);
    }

    #[test]
    fn dirty_ranges_are_split_and_taken_once() {
        let mut a = AddressSpace::new(0x50_0000, 0x100_0000);
        a.add_dirty(0x60_0000, 0x3000);
        assert_eq!(a.take_dirty(0x60_1000, 0x1000), vec![(0x60_1000, 0x1000)]);
        assert_eq!(
            a.take_dirty(0x5f_f000, 0x5000),
            vec![(0x60_0000, 0x1000), (0x60_2000, 0x1000)]
        );
        assert!(a.take_dirty(0x60_0000, 0x3000).is_empty());
    }
}
