//! Host mappings under guest RAM: file pages mapped copy-on-write instead of
//! copied, pages populated in advance, pages moved (mremap) and discarded.

use super::{Fault, GuestMemory};
use crate::abi;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `MREMAP_DONTUNMAP` (Linux 5.7; not in every libc crate version).
const MREMAP_DONTUNMAP: libc::c_int = 4;

impl GuestMemory {
    /// Maps `len` bytes of the host file `fd` from `offset` at guest `addr`,
    /// private and copy-on-write, sharing the host's page cache with every
    /// other VM that maps it (libraries are not copied per VM). Only for
    /// page-aligned ranges of plain guest RAM (not a fork's snapshot view);
    /// returns false when the caller must copy instead.
    pub fn map_file(&mut self, addr: u64, len: u64, fd: BorrowedFd<'_>, offset: u64) -> bool {
        self.map_host(addr, len, fd, offset, libc::MAP_PRIVATE)
    }

    /// Maps `fd` from `offset` over guest `addr..addr+len` with `flags`
    /// (MAP_PRIVATE or MAP_SHARED), recorded as file-mapped; false, with no
    /// mapping there, where it cannot (a fork, unaligned, out of range, the
    /// host refused, or no room in [`super::bus_guard`]).
    pub(in crate::memory) fn map_host(
        &mut self,
        addr: u64,
        len: u64,
        fd: BorrowedFd<'_>,
        offset: u64,
        flags: libc::c_int,
    ) -> bool {
        let aligned = [addr, len, offset]
            .iter()
            .all(|v| v.is_multiple_of(abi::PAGE_SIZE));
        if self.snapshot.is_some() || !aligned || len == 0 || !self.guard_host_faults() {
            return false;
        }
        let Ok(start) = self.check(abi::USER_BASE, addr, len) else {
            return false;
        };
        self.unmap_files(addr, len);
        // SAFETY: the target range lies inside our own mapping (checked above),
        // which MAP_FIXED replaces in place; `fd` is an open host file or memfd.
        let ptr = unsafe {
            libc::mmap(
                self.base.as_ptr().add(start).cast(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                flags | libc::MAP_FIXED,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        // The new host mapping is read-write: the program's rights go back.
        self.forget_prot(addr, addr + len);
        // A failed MAP_FIXED may have unmapped the range: zeroes go back.
        self.file_mapped.insert(addr, addr + len);
        if ptr == libc::MAP_FAILED {
            self.unmap_files(addr, len);
            return false;
        }
        true
    }

    /// Makes the pages of `addr..addr+len` present and writable on the host
    /// now, for memory the program is about to use: file-mapped pages become
    /// private copies (they stop sharing the host's page cache), anonymous
    /// ones are allocated zeroed. KVM maps a faulting page's neighbours along
    /// with it (up to 8 on a shadow-paging hypervisor) only when their host
    /// pages are present and writable; otherwise every page the program
    /// touches costs its own fault (~7-10 µs on PVM, where a fault leaves
    /// guest user mode, against ~2.5 µs to populate a page here). Does nothing
    /// in a fork, whose pages are the snapshot's until written (populating
    /// would copy them, and its reset drop them again). A failure (a file
    /// that shrank) only loses the batching.
    pub fn populate(&mut self, addr: u64, len: u64) {
        const MADV_POPULATE_WRITE: libc::c_int = 23;
        if self.snapshot.is_some() {
            return;
        }
        let Ok(start) = self.check(abi::USER_BASE, addr, len) else {
            return;
        };
        // SAFETY: `start..start+len` lies inside our own mapping (checked);
        // populating only faults pages in, it changes no contents.
        unsafe {
            libc::madvise(
                self.base.as_ptr().add(start).cast(),
                len as usize,
                MADV_POPULATE_WRITE,
            )
        };
    }

    /// Moves the pages of `from..from+len` to `to..to+len` without copying
    /// them (the host moves its page-table entries, as Linux's mremap does),
    /// leaving `from..from+len` reading as zero. Page aligned, not
    /// overlapping. Returns false, having changed nothing, where it cannot:
    /// in a fork (its pages are views of the snapshot at their own offsets),
    /// where a file is mapped, or once [`MAX_MOVES`] were made; the caller
    /// copies then. Growing a 7 MiB python list by mremap copied 7 MiB and
    /// made the host allocate every destination page.
    pub fn move_pages(&mut self, from: u64, to: u64, len: u64) -> bool {
        let aligned = [from, to, len]
            .iter()
            .all(|v| v.is_multiple_of(abi::PAGE_SIZE));
        let overlap = from < to.saturating_add(len) && to < from.saturating_add(len);
        if !aligned || overlap || len == 0 || self.snapshot.is_some() || self.moves_left == 0 {
            return false;
        }
        let (Ok(src), Ok(dst)) = (
            self.check(abi::USER_BASE, from, len),
            self.check(abi::USER_BASE, to, len),
        ) else {
            return false;
        };
        let files = |a: u64| self.file_mapped.range(..a + len).any(|(_, &e)| e > a);
        if files(from) || files(to) {
            return false;
        }
        // Moved host pages keep their host rights: lift them all (the
        // program's go back on before it runs).
        if self.prot.overlaps(from, from + len) || self.prot.overlaps(to, to + len) {
            self.lift();
        }
        // SAFETY: both ranges lie inside our own anonymous private mapping
        // (checked above, no file mapped in either) and do not overlap;
        // MREMAP_FIXED replaces the destination pages, and MREMAP_DONTUNMAP
        // leaves the source mapped, empty (zero on the next touch). No
        // reference into either range outlives `&mut self`.
        let moved = unsafe {
            libc::mremap(
                self.base.as_ptr().add(src).cast(),
                len as usize,
                len as usize,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | MREMAP_DONTUNMAP,
                self.base.as_ptr().add(dst).cast::<libc::c_void>(),
            )
        };
        if moved == libc::MAP_FAILED {
            return false;
        }
        self.moves_left -= 1;
        true
    }

    /// Registers this memory with [`super::bus_guard`] (once), so that a
    /// host access to a page of a mapped file past the file's end reads
    /// zeroes instead of killing forkvm; false when it cannot be (map
    /// nothing from a file then).
    pub(in crate::memory) fn guard_host_faults(&mut self) -> bool {
        if self.bus_slot.is_none() {
            self.bus_slot =
                crate::memory::bus_guard::register(self.base.as_ptr() as usize, self.size as usize);
        }
        self.bus_slot.is_some()
    }

    /// Leaves [`super::bus_guard`] once no file is mapped here any more.
    pub(in crate::memory) fn unguard_if_no_files(&mut self) {
        if self.file_mapped.is_empty() {
            if let Some(slot) = self.bus_slot.take() {
                crate::memory::bus_guard::unregister(slot);
            }
        }
    }

    /// Puts plain anonymous memory back over file-mapped (and shared) parts
    /// of `addr..addr+len`, and forgets the file mappings there.
    pub fn unmap_files(&mut self, addr: u64, len: u64) {
        let end = addr.saturating_add(len);
        if !self.private_files.is_empty() || !self.shared.is_empty() {
            self.forget_files(addr, end);
        }
        if self.file_mapped.is_empty() {
            return;
        }
        let hit: Vec<(u64, u64)> = self
            .file_mapped
            .range(..end)
            .filter(|(_, &e)| e > addr)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in hit {
            self.file_mapped.remove(&s);
            let (from, to) = (s.max(addr), e.min(end));
            // Inside our mapping (it was file-mapped there); a failure
            // leaves the file's pages, readable as before.
            let _ = self.zero_fill(from, to - from);
            if s < from {
                self.file_mapped.insert(s, from);
            }
            if e > to {
                self.file_mapped.insert(to, e);
            }
            self.forget_prot(from, to);
        }
    }

    /// Returns guest pages to the host; they read as zero afterwards.
    pub fn discard(&mut self, addr: u64, len: u64) -> Result<(), Fault> {
        let start = self.check(abi::USER_BASE, addr, len)?;
        self.unmap_files(addr, len);
        // In a fork, MADV_DONTNEED would bring back the master's bytes, not zeroes.
        let aligned = addr.is_multiple_of(abi::PAGE_SIZE) && len.is_multiple_of(abi::PAGE_SIZE);
        if self.snapshot.is_some() || !aligned {
            // Only the parts that may hold something are looked at, and of
            // those only pages holding something are written: writing every
            // page would copy each out of the snapshot (a fork's munmap of a
            // 64 MiB malloc arena reservation cost ~250 ms).
            for (from, to) in self.may_hold_data(addr, addr + len) {
                for page in self
                    .kernel_slice_mut(from, to - from)?
                    .chunks_mut(abi::PAGE_SIZE as usize)
                {
                    // A slice comparison (memcmp) is fast even in debug builds.
                    static ZERO: [u8; abi::PAGE_SIZE as usize] = [0; abi::PAGE_SIZE as usize];
                    if page != &ZERO[..page.len()] {
                        page.fill(0);
                    }
                }
            }
            return Ok(());
        }
        // SAFETY: the range lies inside our private anonymous mapping (checked
        // above); MADV_DONTNEED makes it read as zero, which is what we want.
        let rc = unsafe {
            libc::madvise(
                self.base.as_ptr().add(start).cast(),
                len as usize,
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            self.kernel_slice_mut(addr, len)?.fill(0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn populated_file_pages_are_private_and_hold_the_file() {
        use crate::memory::pagemap::{scan, PAGE_IS_FILE, PAGE_IS_PRESENT};
        use std::io::Write;
        use std::os::fd::AsFd;
        let mut file = crate::memory::temp_file();
        let data: Vec<u8> = (0..4 * abi::PAGE_SIZE)
            .map(|i| (i / 4096) as u8 + 1)
            .collect();
        file.write_all(&data).unwrap();
        let mut m = GuestMemory::new(4 << 20).unwrap();
        let at = abi::USER_BASE;
        assert!(m.map_file(at, 4 * abi::PAGE_SIZE, file.as_fd(), 0));
        let host = m.host_base() + at;
        let private = || {
            scan(
                host,
                host + 4 * abi::PAGE_SIZE,
                PAGE_IS_PRESENT,
                PAGE_IS_FILE,
            )
            .unwrap()
        };
        assert!(private().is_empty(), "mapped, not yet copied");
        m.populate(at, 4 * abi::PAGE_SIZE);
        assert_eq!(private(), vec![(host, host + 4 * abi::PAGE_SIZE)]);
        assert_eq!(m.read(at, data.len() as u64).unwrap(), &data[..]);
        // Anonymous pages: present, zero.
        let anon = at + (1 << 20);
        let h = m.host_base() + anon;
        let present = || scan(h, h + 8 * abi::PAGE_SIZE, PAGE_IS_PRESENT, 0).unwrap();
        assert!(present().is_empty());
        m.populate(anon, 8 * abi::PAGE_SIZE);
        assert_eq!(present(), vec![(h, h + 8 * abi::PAGE_SIZE)]);
        assert!(m
            .read(anon, 8 * abi::PAGE_SIZE)
            .unwrap()
            .iter()
            .all(|&b| b == 0));
        // Out of range: nothing happens.
        m.populate(u64::MAX - 4096, 4096);
    }

    #[test]
    fn moved_pages_keep_their_bytes_and_leave_zeroes_behind() {
        let page = abi::PAGE_SIZE;
        let mut m = GuestMemory::new(8 << 20).unwrap();
        let (from, to, len) = (abi::USER_BASE, abi::USER_BASE + (2 << 20), 4 * page);
        m.write(from, b"first").unwrap();
        m.write(from + 3 * page + 10, b"last").unwrap();
        m.write(to + page, b"was at the destination").unwrap();
        assert!(m.move_pages(from, to, len));
        assert_eq!(m.read(to, 5).unwrap(), b"first");
        assert_eq!(m.read(to + 3 * page + 10, 4).unwrap(), b"last");
        assert!(m.read(to + page, page).unwrap().iter().all(|&b| b == 0));
        assert!(m.read(from, len).unwrap().iter().all(|&b| b == 0));
        // Refused: overlapping, unaligned, outside user memory, a file there.
        assert!(!m.move_pages(to, to + page, len));
        assert!(!m.move_pages(to + 1, from, len));
        assert!(!m.move_pages(abi::USER_BASE - page, from, page));
        assert!(!m.move_pages(to, u64::MAX - page, page));
        let mut file = crate::memory::temp_file();
        std::io::Write::write_all(&mut file, &[7u8; 4096]).unwrap();
        let at = abi::USER_BASE + (4 << 20);
        assert!(m.map_file(at, page, std::os::fd::AsFd::as_fd(&file), 0));
        assert!(!m.move_pages(to, at, page));
        assert!(!m.move_pages(at, to, page));
        assert_eq!(
            m.read(to, 5).unwrap(),
            b"first",
            "a refusal changes nothing"
        );
        // The budget of moves.
        m.moves_left = 1;
        assert!(m.move_pages(to, from, len));
        assert!(!m.move_pages(from, to, len));
        assert_eq!(m.read(from, 5).unwrap(), b"first");
    }
}
