//! Copies of a running program's guest memory, for child processes (fork).
//!
//! A child gets its own anonymous memory holding the bytes of every page
//! the parent has populated (and of its directly mapped file ranges); pages
//! that are all zeros are left untouched, so they cost nothing. Copying
//! into anonymous memory (rather than capturing a snapshot memfd and mapping
//! it) keeps the copy itself forkable: a child's child is made the same way.
//! A parent that is itself a view of a snapshot (a `forkvm serve` request)
//! gives its child a view of the same snapshot plus a copy of its own
//! private pages.

use super::guest_memory::{GuestMemory, MapError};
use super::pagemap::{self, PAGE_IS_FILE, PAGE_IS_PRESENT, PAGE_IS_SWAPPED};
use crate::abi::PAGE_SIZE;

fn map_err(size: u64, source: std::io::Error) -> MapError {
    MapError { size, source }
}

/// Whether a page holds only zero bytes (OR-folded in blocks, which the
/// compiler vectorises, rather than byte by byte with an early exit).
fn is_zero(page: &[u8]) -> bool {
    page.chunks(64)
        .all(|c| c.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

impl GuestMemory {
    /// A new memory with the same contents and mappings as `src`;
    /// `borrow`: a vfork child's, which `src`'s budget lends its mappings to
    /// (see [`GuestMemory::borrow_budget`]) rather than charges.
    pub fn copy_of(src: &GuestMemory, borrow: bool) -> Result<GuestMemory, MapError> {
        let mut dst = GuestMemory::new(src.size)?;
        dst.copy_from(src, borrow)?;
        Ok(dst)
    }

    /// Makes this memory (same size, e.g. a pooled VM's, whose KVM slot
    /// must keep pointing at it) a copy of `src`: emptied first (or, when
    /// `src` is a view of a snapshot, a fresh view of the same snapshot),
    /// then the pages `src` has of its own copied in. `borrow` as for
    /// [`GuestMemory::copy_of`].
    pub fn copy_from(&mut self, src: &GuestMemory, borrow: bool) -> Result<(), MapError> {
        let size = src.size;
        if self.size != size {
            return Err(map_err(
                size,
                std::io::Error::from_raw_os_error(libc::EINVAL),
            ));
        }
        // Pages of a snapshot view that are still the snapshot's (file
        // pages) come with the new view; only the private ones are copied.
        let unwanted = match &src.snapshot {
            Some(snap) => {
                self.leave_budget();
                self.remap(snap)?;
                PAGE_IS_FILE
            }
            // Pages a finished process left are overwritten below, or
            // zeroed after: no allocation for what both hold.
            None if self.stale => 0,
            None => {
                self.empty_all()?;
                0
            }
        };
        let stale = self.stale;
        // Shared mappings are the same pages in both: mapped first, and
        // only where that fails copied below (reading a page of one past
        // its file's end would fault, so those are left out).
        self.share_ranges_of(src);
        let past_end = src.shared_past_end();
        let base = src.base.as_ptr() as u64;
        let mut ranges = pagemap::scan(base, base + size, PAGE_IS_PRESENT, unwanted)
            .map_err(|e| map_err(size, e))?;
        ranges.extend(src.file_mapped.iter().map(|(&s, &e)| (base + s, base + e)));
        let fault = |_| map_err(size, std::io::Error::from_raw_os_error(libc::EFAULT));
        // Emptied memory reads as zeros: a page is copied when the
        // source's is not all zeros. A view already holds the snapshot's
        // bytes, a stale memory what was left in it: a page is copied when
        // it differs from them.
        let fresh = unwanted == 0 && !stale;
        // Of a stale memory, the pages that hold anything: one that holds
        // nothing reads as zeros, so it is written only where the source's
        // is not all zeros, and never read first (a read would map the zero
        // page, and the write then fault again for a page of its own).
        let held = match stale {
            true => self.held_pages().map_err(|e| map_err(size, e))?,
            false => Vec::new(),
        };
        let holds = |page: u64| {
            let i = held.partition_point(|&(_, e)| e <= page);
            held.get(i).is_some_and(|&(s, _)| s <= page)
        };
        // Of a stale memory, what holds the source's bytes once the loop is
        // done (the source's ranges, less pages left out); the rest is
        // zeroed after.
        let mut done: Vec<(u64, u64)> = Vec::new();
        let wanted = |dst: &GuestMemory, page: u64| -> Result<bool, MapError> {
            if past_end.iter().any(|&(s, e)| (s..e).contains(&page)) {
                return Ok(false);
            }
            let from = src.kernel_read(page, PAGE_SIZE).map_err(fault)?;
            Ok(if fresh || (stale && !holds(page)) {
                !is_zero(from)
            } else {
                dst.kernel_read(page, PAGE_SIZE).map_err(fault)? != from
            })
        };
        for (s, e) in ranges {
            let (off, len) = (s - base, e.saturating_sub(s));
            if off.checked_add(len).is_none_or(|end| end > size) {
                continue;
            }
            for (from, to) in self.outside_shared(off, off + len) {
                if stale {
                    let mut at = from;
                    for &(s, e) in &past_end {
                        if s < to && e > at {
                            done.push((at, s.max(at)));
                            at = e.min(to);
                        }
                    }
                    done.push((at, to));
                }
                // Runs of pages to copy, each copied at once; into emptied
                // memory after the host allocated the whole run in one call,
                // not with a read fault (the zero page) and then a write
                // fault (a new page, cleared) for every page.
                let mut page = from;
                while page < to {
                    let run = page;
                    while page < to && wanted(self, page)? {
                        page += PAGE_SIZE;
                    }
                    if page == run {
                        page += PAGE_SIZE;
                        continue;
                    }
                    if fresh || stale {
                        self.populate_host(run, page - run);
                    }
                    let bytes = src.kernel_read(run, page - run).map_err(fault)?;
                    self.kernel_slice_mut(run, page - run)
                        .map_err(fault)?
                        .copy_from_slice(bytes);
                }
            }
        }
        if stale {
            // Shared ranges are the source's pages (mapped above).
            done.extend(self.shared.iter().map(|(&s, r)| (s, r.end)));
            self.zero_outside(done);
            self.stale = false;
        }
        self.private_files = src.private_files.clone();
        self.user_map = src.user_map.clone();
        // The child has its parent's rights (from its first entry).
        self.adopt_prot(src.prot.clone());
        self.commit_limit = src.commit_limit;
        self.chunks |= src.chunks;
        // A copy's mappings count against the budget its source is in
        // (charged, or for a vfork child lent while loans fit): one that
        // does not fit is refused (ENOMEM).
        if let Some(b) = &src.budget {
            let joined = if borrow {
                self.borrow_budget(b.clone())
            } else {
                self.join_budget(b.clone(), 0)
            };
            if !joined {
                return Err(map_err(
                    size,
                    std::io::Error::from_raw_os_error(libc::ENOMEM),
                ));
            }
        }
        Ok(())
    }

    /// Offsets of the ranges of this memory whose pages hold anything:
    /// present, or swapped out.
    fn held_pages(&self) -> std::io::Result<Vec<(u64, u64)>> {
        let base = self.base.as_ptr() as u64;
        let end = base + self.size;
        let mut all = pagemap::scan(base, end, PAGE_IS_PRESENT, 0)?;
        all.extend(pagemap::scan(base, end, PAGE_IS_SWAPPED, 0)?);
        all.sort_unstable();
        let mut out = Vec::with_capacity(all.len());
        for (s, e) in all {
            pagemap::push_range(&mut out, s - base, e - base);
        }
        Ok(out)
    }

    /// Has the host allocate the pages of `off..off+len` (inside this
    /// memory) in one call, as written pages; where that fails (an older
    /// kernel) they are faulted in one by one as before.
    fn populate_host(&self, off: u64, len: u64) {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        if off.checked_add(len).is_none_or(|end| end > self.size) {
            return;
        }
        // SAFETY: `off..off+len` lies inside our own mapping (checked just
        // above); populating only faults pages in, it changes no contents.
        unsafe {
            libc::madvise(
                self.base.as_ptr().add(off as usize).cast(),
                len as usize,
                MADV_POPULATE_WRITE,
            )
        };
    }

    /// Zeroes (returns to the host) every page of this memory outside
    /// `keep` (offsets; any order, overlaps allowed).
    fn zero_outside(&mut self, mut keep: Vec<(u64, u64)>) {
        keep.sort_unstable();
        let mut at = 0;
        let mut gaps = Vec::new();
        for (s, e) in keep {
            if s > at {
                gaps.push((at, s));
            }
            at = at.max(e);
        }
        if at < self.size {
            gaps.push((at, self.size));
        }
        for (s, e) in gaps {
            let (s, e) = (
                s.next_multiple_of(PAGE_SIZE),
                e.min(self.size) & !(PAGE_SIZE - 1),
            );
            if s < e {
                // SAFETY: `s..e` lies inside our own private anonymous
                // mapping (clamped to its size above); MADV_DONTNEED makes
                // those pages read as zeros and holds no reference.
                unsafe {
                    libc::madvise(
                        self.base.as_ptr().add(s as usize).cast(),
                        (e - s) as usize,
                        libc::MADV_DONTNEED,
                    )
                };
            }
        }
    }

    /// Empties this memory for the next fork's copy, as
    /// [`GuestMemory::empty_all`] does, but keeps the host pages of its
    /// private anonymous memory: allocating a page is most of what a fork
    /// costs, and a process that forks again and again (a shell, a server
    /// forking per connection) gets a finished child's memory back, mostly
    /// holding the same bytes. The memory is `stale` until
    /// [`GuestMemory::copy_from`] overwrites or zeroes every page; the pool
    /// empties a stale memory fully before giving it to anything else.
    /// Ranges mapping files (each replaced by anonymous memory, which splits
    /// the host mapping) count against the moves left: when those run
    /// short, or the memory is a view of a snapshot (even one let go of:
    /// `GuestMemory::release_snapshot`), it is emptied fully.
    pub fn empty_keeping_pages(&mut self) -> Result<(), MapError> {
        let mut files: Vec<(u64, u64)> = self.file_mapped.iter().map(|(&s, &e)| (s, e)).collect();
        files.extend(self.shared.iter().map(|(&s, r)| (s, r.end)));
        files.extend(self.private_files.iter().map(|(&s, r)| (s, r.end)));
        let splits = u32::try_from(files.len()).unwrap_or(u32::MAX);
        if self.view || splits.saturating_mul(2) >= self.moves_left {
            return self.empty_all();
        }
        for (s, e) in files {
            let (s, e) = (
                s & !(PAGE_SIZE - 1),
                e.min(self.size).next_multiple_of(PAGE_SIZE),
            );
            if s >= e || e > self.size {
                continue;
            }
            if self.zero_fill(s, e - s).is_err() {
                return self.empty_all();
            }
        }
        // All read-write again, keeping the pages.
        self.lift();
        self.forget_mappings();
        self.moves_left -= splits;
        self.leave_budget();
        self.stale = true;
        Ok(())
    }

    /// Replaces `off..off+len` (page aligned, inside this memory) with
    /// fresh zero-filled read-write anonymous memory.
    pub(super) fn zero_fill(&self, off: u64, len: u64) -> std::io::Result<()> {
        if off.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: `off..off+len` lies inside our own mapping (checked
        // above); MAP_FIXED replaces what is mapped there with anonymous
        // memory, and the host reaches guest memory only through this
        // memory's accessors, whose borrows end before it changes.
        let ptr = unsafe {
            libc::mmap(
                self.base.as_ptr().add(off as usize).cast(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        match ptr == libc::MAP_FAILED {
            true => Err(std::io::Error::last_os_error()),
            false => Ok(()),
        }
    }

    /// Forgets the program's mappings once the host mapping is plain
    /// read-write anonymous memory again: rights, files, kept pages.
    fn forget_mappings(&mut self) {
        self.prot = Default::default();
        self.lifted.set(false);
        self.recount_prot();
        self.idle.clear();
        self.file_mapped.clear();
        self.shared.clear();
        self.private_files.clear();
        self.unguard_if_no_files();
    }

    /// Whether this memory still holds a finished process's bytes (see
    /// [`GuestMemory::empty_keeping_pages`]).
    pub fn is_stale(&self) -> bool {
        self.stale
    }

    /// Returns every page to the host: the memory reads as zeros again
    /// (same host addresses), and it is nobody's view of a snapshot.
    pub fn empty_all(&mut self) -> Result<(), MapError> {
        self.zero_fill(0, self.size)
            .map_err(|e| map_err(self.size, e))?;
        self.snapshot = None;
        self.stale = false;
        self.view = false;
        self.forget_mappings();
        // One mapping again: the moves it was split by are gone.
        self.moves_left = super::guest_memory::MAX_MOVES;
        self.leave_budget();
        Ok(())
    }

    /// Makes this memory as [`GuestMemory::new`] made it, at the same host
    /// addresses (so a pooled VM's memory slots stay valid): every page reads
    /// as zeros, and nothing of what its last program mapped, limited or
    /// charged is left. For a program built by exec into a VM from the pool.
    ///
    /// Plain anonymous memory (a finished child's, see
    /// [`GuestMemory::empty_keeping_pages`], or one emptied already) returns
    /// only the pages it holds: replacing the whole mapping costs ~0.3-0.5 ms
    /// here, as the hypervisor then looks at every page of each memory slot
    /// it covers. Other memory (a view of a snapshot, files or rights
    /// mapped) is emptied whole.
    pub fn renew(&mut self) -> Result<(), MapError> {
        let plain = !self.view
            && self.file_mapped.is_empty()
            && self.shared.is_empty()
            && self.private_files.is_empty()
            && self.prot.is_empty();
        match plain {
            true => self.return_held().map_err(|e| map_err(self.size, e))?,
            false => self.empty_all()?,
        }
        self.leave_budget();
        // Every field named: one added later must be thought about here.
        let Self {
            base: _,
            size,
            snapshot,
            user_map,
            idle,
            commit_limit,
            file_mapped,
            shared,
            private_files,
            bus_slot,
            chunks,
            budget,
            charged,
            loan,
            moves_left: _, // the host mapping's areas: as they are
            prot,
            prot_counted,
            lifted,
            vfork_snapshot,
            stale,
            view,
        } = self;
        // Gone with the files and rights (checked or emptied above).
        debug_assert!(!*view && snapshot.is_none() && budget.is_none() && bus_slot.is_none());
        debug_assert!(file_mapped.is_empty() && shared.is_empty() && private_files.is_empty());
        debug_assert!(prot.is_empty() && *prot_counted == 0 && !lifted.get());
        debug_assert!(*charged == 0 && *loan == 0);
        *user_map = None;
        idle.clear();
        *commit_limit = *size;
        *chunks = 1;
        vfork_snapshot.set(None);
        *stale = false;
        Ok(())
    }

    /// Returns every page this plain anonymous memory holds to the host, so
    /// that all of it reads as zeros.
    fn return_held(&mut self) -> std::io::Result<()> {
        for (s, e) in self.held_pages()? {
            self.return_pages(s, e)?;
        }
        Ok(())
    }

    /// Returns the pages of `s..e` (page aligned, inside this plain
    /// anonymous memory) to the host: they read as zeros.
    fn return_pages(&mut self, s: u64, e: u64) -> std::io::Result<()> {
        if s >= e || e > self.size {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: `s..e` lies inside our own private anonymous mapping
        // (checked above); MADV_DONTNEED makes it read as zeros, and no Rust
        // reference into guest memory outlives this call.
        let rc = unsafe {
            libc::madvise(
                self.base.as_ptr().add(s as usize).cast(),
                (e - s) as usize,
                libc::MADV_DONTNEED,
            )
        };
        match rc {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_has_the_bytes_and_is_independent() {
        let size = 4 * crate::abi::HUGE_PAGE_SIZE;
        let mut a = GuestMemory::new(size).unwrap();
        a.kernel_slice_mut(0x20_1000, 5)
            .unwrap()
            .copy_from_slice(b"hello");
        a.kernel_slice_mut(size - 8, 8)
            .unwrap()
            .copy_from_slice(b"the end!");
        let mut b = GuestMemory::copy_of(&a, false).unwrap();
        assert_eq!(b.kernel_read(0x20_1000, 5).unwrap(), b"hello");
        assert_eq!(b.kernel_read(size - 8, 8).unwrap(), b"the end!");
        b.kernel_slice_mut(0x20_1000, 5)
            .unwrap()
            .copy_from_slice(b"HELLO");
        assert_eq!(a.kernel_read(0x20_1000, 5).unwrap(), b"hello");
        // A copy of the copy, into reused memory that held something else.
        let mut c = GuestMemory::new(size).unwrap();
        c.kernel_slice_mut(0x40_0000, 3)
            .unwrap()
            .copy_from_slice(b"old");
        c.copy_from(&b, false).unwrap();
        assert_eq!(c.kernel_read(0x20_1000, 5).unwrap(), b"HELLO");
        assert_eq!(c.kernel_read(0x40_0000, 3).unwrap(), [0, 0, 0]);
    }

    #[test]
    fn a_copy_into_emptied_memory_has_every_run_of_pages() {
        // Runs of written pages between zero pages (also pages written
        // back to zeros), one run ending the memory: each is copied whole.
        let size = 4 * crate::abi::HUGE_PAGE_SIZE;
        let mut a = GuestMemory::new(size).unwrap();
        let pattern = |i: u64| matches!(i % 7, 0 | 3 | 4) && !i.is_multiple_of(11);
        let pages = (0x20_0000..size).step_by(PAGE_SIZE as usize);
        for (i, page) in pages.clone().enumerate() {
            let i = i as u64;
            let fill = if pattern(i) { (i % 250) as u8 + 1 } else { 0 };
            a.kernel_slice_mut(page, PAGE_SIZE).unwrap().fill(fill);
        }
        a.kernel_slice_mut(size - PAGE_SIZE, PAGE_SIZE)
            .unwrap()
            .fill(0xee);
        // Into a reused memory that held something everywhere.
        let mut b = GuestMemory::new(size).unwrap();
        b.kernel_slice_mut(0x20_0000, size - 0x20_0000)
            .unwrap()
            .fill(0x55);
        b.copy_from(&a, false).unwrap();
        for page in pages {
            assert_eq!(
                b.kernel_read(page, PAGE_SIZE).unwrap(),
                a.kernel_read(page, PAGE_SIZE).unwrap(),
                "page {page:#x}"
            );
        }
    }

    /// Every page of `m` reads as zeros.
    fn all_zero(m: &GuestMemory) -> bool {
        (0..m.size())
            .step_by(PAGE_SIZE as usize)
            .all(|page| is_zero(m.kernel_read(page, PAGE_SIZE).unwrap()))
    }

    /// A vfork child's memory, its stores taken and its snapshot let go of
    /// (`release_snapshot`), emptied for the pool: it was still a view of
    /// the parent's capture, and emptying it keeping its pages left the
    /// capture's bytes wherever the child held no page of its own.
    #[test]
    fn a_released_vfork_view_keeps_nothing_of_the_parent() {
        let size = 4 * crate::abi::HUGE_PAGE_SIZE;
        let mut parent = GuestMemory::new(size).unwrap();
        parent
            .kernel_slice_mut(0x40_0000, 4 * PAGE_SIZE)
            .unwrap()
            .fill(0x5a);
        let mut child = GuestMemory::new(size).unwrap();
        child.vfork_copy_from(&parent).unwrap();
        child.kernel_slice_mut(0x40_0000, 8).unwrap().fill(1);
        child.release_snapshot();
        child.empty_keeping_pages().unwrap();
        // The next fork's copy of an empty program into it.
        let empty = GuestMemory::new(size).unwrap();
        child.copy_from(&empty, false).unwrap();
        assert!(all_zero(&child));
        // The same memory renewed for exec.
        let mut child = GuestMemory::new(size).unwrap();
        child.vfork_copy_from(&parent).unwrap();
        child.release_snapshot();
        child.renew().unwrap();
        assert!(all_zero(&child));
    }

    /// A memory renewed for exec is as new, whatever its last program left:
    /// bytes, a file, rights, a limit, a stale memory's kept pages.
    #[test]
    fn a_renewed_memory_is_as_new() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let size = 4 * crate::abi::HUGE_PAGE_SIZE;
        let rw = crate::memory::Rights {
            read: true,
            write: true,
        };
        for keep_pages in [false, true] {
            let mut m = GuestMemory::new(size).unwrap();
            m.track_mappings();
            m.set_commit_limit(size / 2);
            m.map_user(0x40_0000, 0x60_0000, rw);
            m.kernel_slice_mut(0x20_0000, size - 0x20_0000)
                .unwrap()
                .fill(0xab);
            m.kernel_slice_mut(0, PAGE_SIZE).unwrap().fill(0xcd);
            let mut file = super::super::temp_file();
            file.write_all(&vec![0xef; 4 * PAGE_SIZE as usize]).unwrap();
            assert!(m.map_file(0x50_0000, 4 * PAGE_SIZE, file.as_fd(), 0));
            if keep_pages {
                m.empty_keeping_pages().unwrap();
                assert!(m.is_stale());
            }
            m.renew().unwrap();
            assert!(all_zero(&m), "keep_pages {keep_pages}");
            assert!(!m.is_stale() && !m.tracks_mappings());
            assert_eq!(m.commit_limit(), size);
            assert_eq!(m.committed(), 0);
            assert_eq!(
                m.chunks_in_use(),
                GuestMemory::new(size).unwrap().chunks_in_use()
            );
        }
    }

    #[test]
    fn a_copy_into_a_finished_processs_memory_keeps_nothing_of_it() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let size = 4 * crate::abi::HUGE_PAGE_SIZE;
        let p = PAGE_SIZE;
        // The finished process: a secret everywhere, a file mapped directly,
        // a shared mapping.
        let mut old = GuestMemory::new(size).unwrap();
        old.kernel_slice_mut(0x20_0000, size - 0x20_0000)
            .unwrap()
            .fill(0xab);
        let mut file = super::super::temp_file();
        file.write_all(&vec![0xcd; 4 * p as usize]).unwrap();
        assert!(old.map_file(0x40_0000, 4 * p, file.as_fd(), 0));
        let mut shared = super::super::temp_file();
        shared.write_all(&vec![0xef; 2 * p as usize]).unwrap();
        let shared = std::sync::Arc::new(std::os::fd::OwnedFd::from(shared));
        assert!(old.map_shared(0x50_0000, 2 * p, shared, 0, false));
        old.empty_keeping_pages().unwrap();
        assert!(old.is_stale());
        // The next fork's source: a few written pages, one shared mapping
        // of its own, zeros elsewhere.
        let mut src = GuestMemory::new(size).unwrap();
        src.kernel_slice_mut(0x20_0000, 3 * p).unwrap().fill(0x11);
        src.kernel_slice_mut(0x40_1000, p).unwrap().fill(0x22);
        src.kernel_slice_mut(size - p, p).unwrap().fill(0x33);
        // Where the finished process held nothing (its first 2 MiB), and a
        // page of zeros the source has populated over one it held.
        src.kernel_slice_mut(p, p).unwrap().fill(0x66);
        src.kernel_slice_mut(0x30_0000, p).unwrap().fill(0);
        let mut theirs = super::super::temp_file();
        theirs.write_all(&vec![0x44; p as usize]).unwrap();
        let theirs = std::sync::Arc::new(std::os::fd::OwnedFd::from(theirs));
        assert!(src.map_shared(0x60_0000, p, theirs, 0, false));
        old.copy_from(&src, false).unwrap();
        assert!(!old.is_stale());
        for page in (0..size).step_by(p as usize) {
            assert_eq!(
                old.kernel_read(page, p).unwrap(),
                src.kernel_read(page, p).unwrap(),
                "page {page:#x}"
            );
        }
        // The shared mapping is the same pages in both.
        src.kernel_slice_mut(0x60_0000, 1).unwrap()[0] = 0x55;
        assert_eq!(old.kernel_read(0x60_0000, 1).unwrap(), [0x55]);
    }

    #[test]
    fn a_copy_of_a_snapshot_view_has_its_private_pages_too() {
        let size = 4 * crate::abi::HUGE_PAGE_SIZE;
        let mut master = GuestMemory::new(size).unwrap();
        master
            .kernel_slice_mut(0x20_0000, 6)
            .unwrap()
            .copy_from_slice(b"master");
        master
            .kernel_slice_mut(0x30_0000, 4)
            .unwrap()
            .copy_from_slice(b"keep");
        let snap = super::super::Snapshot::capture(&master).unwrap();
        let mut view = GuestMemory::fork_of(&snap).unwrap();
        view.kernel_slice_mut(0x40_0000, 7)
            .unwrap()
            .copy_from_slice(b"private");
        // A page the view zeroed must read as zeros in the copy, not as the snapshot's.
        view.kernel_slice_mut(0x20_0000, 6).unwrap().fill(0);
        let mut c = GuestMemory::new(size).unwrap();
        c.copy_from(&view, false).unwrap();
        assert_eq!(c.kernel_read(0x20_0000, 6).unwrap(), [0; 6]);
        assert_eq!(c.kernel_read(0x30_0000, 4).unwrap(), b"keep");
        assert_eq!(c.kernel_read(0x40_0000, 7).unwrap(), b"private");
        // The copy is its own: writing it changes neither the view nor the snapshot.
        c.kernel_slice_mut(0x30_0000, 4)
            .unwrap()
            .copy_from_slice(b"mine");
        assert_eq!(view.kernel_read(0x30_0000, 4).unwrap(), b"keep");
        assert_eq!(
            GuestMemory::copy_of(&view, false)
                .unwrap()
                .kernel_read(0x30_0000, 4)
                .unwrap(),
            b"keep"
        );
    }
}
