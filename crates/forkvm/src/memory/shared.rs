//! Shared mappings (`MAP_SHARED`): guest ranges whose host pages are those
//! of a host object mapped shared at the same place, so that what the
//! program writes there is what everyone else sees. For a file, that is the
//! file itself (the Go linker, LMDB and others write their output through
//! such a mapping and read it back with `read`); for `MAP_SHARED |
//! MAP_ANONYMOUS`, a memfd that a forked child maps at the same addresses,
//! so parent and child share the pages as on Linux (counters, semaphores and
//! queues of pre-forking servers and python's multiprocessing).
//!
//! A shared range is also a file-mapped range ([`GuestMemory::file_mapped`]):
//! unmapping it puts anonymous memory back, page moves leave it alone, and a
//! snapshot or a child copies what it holds like any other file mapping.
//! Only plain guest RAM can hold one: a fork's memory (a view of a
//! snapshot) refuses, and the caller falls back to a private copy.

use super::guest_memory::GuestMemory;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// One shared range: its end, the host object behind it, and the offset in
/// that object of the range's first byte.
#[derive(Debug, Clone)]
pub struct SharedRange {
    pub end: u64,
    pub backing: Arc<OwnedFd>,
    pub offset: u64,
    /// A memfd made for `MAP_SHARED | MAP_ANONYMOUS` (grown by mremap),
    /// rather than the program's file.
    pub anonymous: bool,
}

impl GuestMemory {
    /// Maps `len` bytes of `backing` from `offset` at guest `addr`, shared
    /// and writable: the program's writes reach `backing` directly. False,
    /// with nothing changed, where it cannot (a fork, an unaligned or
    /// out-of-range request, a host refusal).
    pub fn map_shared(
        &mut self,
        addr: u64,
        len: u64,
        backing: Arc<OwnedFd>,
        offset: u64,
        anonymous: bool,
    ) -> bool {
        if !self.map_host(addr, len, backing.as_fd(), offset, libc::MAP_SHARED) {
            return false;
        }
        self.shared.insert(
            addr,
            SharedRange {
                end: addr + len,
                backing,
                offset,
                anonymous,
            },
        );
        true
    }

    /// The shared range that contains `addr`, as (start, range).
    pub fn shared_at(&self, addr: u64) -> Option<(u64, SharedRange)> {
        let (&s, r) = self.shared.range(..=addr).next_back()?;
        (r.end > addr).then(|| (s, r.clone()))
    }

    /// The parts of `addr..end` that are not shared (lowest first).
    pub fn outside_shared(&self, addr: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = addr;
        for (&s, r) in self.shared.range(..end) {
            if r.end <= at {
                continue;
            }
            if s > at {
                out.push((at, s.min(end)));
            }
            at = at.max(r.end);
        }
        if at < end {
            out.push((at, end));
        }
        out
    }

    /// Forgets the shared ranges inside `addr..end` (their host mapping is
    /// being replaced), keeping the parts outside it.
    pub(super) fn forget_shared(&mut self, addr: u64, end: u64) {
        let hit: Vec<(u64, SharedRange)> = self
            .shared
            .range(..end)
            .filter(|(_, r)| r.end > addr)
            .map(|(&s, r)| (s, r.clone()))
            .collect();
        for (s, r) in hit {
            self.shared.remove(&s);
            if s < addr {
                let mut left = r.clone();
                left.end = addr;
                self.shared.insert(s, left);
            }
            if r.end > end {
                let mut right = r.clone();
                right.offset += end - s;
                self.shared.insert(end, right);
            }
        }
    }

    /// Maps the shared ranges of `src` at the same places here (a forked
    /// child shares them with its parent). Ranges that cannot be mapped
    /// (this memory is a view of a snapshot) keep the copy already made.
    pub(super) fn share_ranges_of(&mut self, src: &GuestMemory) {
        for (&s, r) in &src.shared {
            if !self.map_shared(s, r.end - s, r.backing.clone(), r.offset, r.anonymous) {
                tracing::debug!(
                    "a shared mapping at {s:#x} is a private copy in the child (its memory is a view of a snapshot)"
                );
            }
        }
    }
}

/// A memfd of `len` bytes for `MAP_SHARED | MAP_ANONYMOUS`.
pub fn anonymous_backing(len: u64) -> std::io::Result<Arc<OwnedFd>> {
    let fd = rustix::fs::memfd_create("forkvm-shared", rustix::fs::MemfdFlags::CLOEXEC)?;
    rustix::fs::ftruncate(&fd, len)?;
    Ok(Arc::new(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi;
    use std::io::Write;

    const MIB: u64 = 1 << 20;

    fn file_of(pages: usize, byte: u8) -> (std::fs::File, Arc<OwnedFd>) {
        let mut f = super::super::temp_file();
        f.write_all(&vec![byte; pages * abi::PAGE_SIZE as usize])
            .unwrap();
        let fd = Arc::new(OwnedFd::from(f.try_clone().unwrap()));
        (f, fd)
    }

    #[test]
    fn writes_reach_the_file_and_unmapping_leaves_it_alone() {
        let mut m = GuestMemory::new(16 * MIB).unwrap();
        let at = abi::USER_BASE + MIB;
        let (f, fd) = file_of(4, b'a');
        assert!(m.map_shared(at, 4 * abi::PAGE_SIZE, fd, 0, false));
        m.write(at + 5, b"hello").unwrap();
        let mut buf = [0u8; 6];
        rustix::io::pread(&f, &mut buf, 4).unwrap();
        assert_eq!(&buf, b"ahello");
        assert_eq!(
            m.shared_at(at + 3 * abi::PAGE_SIZE).map(|(s, _)| s),
            Some(at)
        );
        // Unmapping the middle puts zeroes there and keeps both ends shared.
        m.unmap_files(at + abi::PAGE_SIZE, 2 * abi::PAGE_SIZE);
        m.write(at + abi::PAGE_SIZE, b"private").unwrap();
        rustix::io::pread(&f, &mut buf, abi::PAGE_SIZE).unwrap();
        assert_eq!(&buf, b"aaaaaa", "the file keeps its bytes");
        let right = m.shared_at(at + 3 * abi::PAGE_SIZE).unwrap();
        assert_eq!(right.0, at + 3 * abi::PAGE_SIZE);
        assert_eq!(right.1.offset, 3 * abi::PAGE_SIZE);
        assert_eq!(
            m.outside_shared(at, at + 4 * abi::PAGE_SIZE),
            vec![(at + abi::PAGE_SIZE, at + 3 * abi::PAGE_SIZE)]
        );
    }

    #[test]
    fn a_fork_refuses_and_a_truncated_page_reads_zero_on_the_host() {
        let mut m = GuestMemory::new(16 * MIB).unwrap();
        let at = abi::USER_BASE + MIB;
        let (f, fd) = file_of(4, b'b');
        assert!(m.map_shared(at, 4 * abi::PAGE_SIZE, fd.clone(), 0, false));
        rustix::fs::ftruncate(&f, 0).unwrap();
        // A host read of a page the file no longer has: zeroes, not SIGBUS.
        assert_eq!(m.kernel_read(at + 2 * abi::PAGE_SIZE, 4).unwrap(), &[0; 4]);
        let snap = crate::memory::Snapshot::capture(&m).unwrap();
        let mut view = GuestMemory::fork_of(&snap).unwrap();
        assert!(!view.map_shared(at, abi::PAGE_SIZE, fd, 0, false));
    }
}
