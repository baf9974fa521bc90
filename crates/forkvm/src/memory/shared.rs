//! Shared mappings (`MAP_SHARED`): guest ranges whose host pages are those
//! of a host object mapped shared at the same place, so that what the
//! program writes there is what everyone else sees. For a file, that is the
//! file itself (the Go linker, LMDB and others write their output through
//! such a mapping and read it back with `read`); for `MAP_SHARED |
//! MAP_ANONYMOUS`, a memfd that a forked child maps at the same addresses,
//! so parent and child share the pages as on Linux (counters, semaphores and
//! queues of pre-forking servers and python's multiprocessing).
//!
//! A file is mapped over the whole range asked for, past the file's end
//! too: those pages become the file's when it grows (by `ftruncate` or
//! `write`, from this process or another), and until then an access there
//! faults on the host, which the run loop turns into the program's SIGBUS
//! as on Linux ([`GuestMemory::past_end_of_file`]). A read-only shared
//! mapping is the file mapped copy-on-write: nothing writes through it (the
//! program mapped it read-only), so it shows every change to the file, and
//! the program's descriptor need not be writable.
//!
//! A shared range is also a file-mapped range ([`GuestMemory::file_mapped`]):
//! unmapping it puts anonymous memory back, page moves leave it alone, and a
//! snapshot or a child copies what it holds like any other file mapping.
//! Only plain guest RAM can hold one: a fork's memory (a view of a
//! snapshot) refuses, and the caller falls back to a private copy.
//!
//! Private file mappings (`MAP_PRIVATE` of a file) are remembered too
//! ([`GuestMemory::note_private_file`]), with the file they came from:
//! `MADV_DONTNEED` drops the program's changes to them and reads the file
//! again, as Linux does, instead of zeroing them.

use super::guest_memory::GuestMemory;
use crate::abi::PAGE_SIZE;
use std::collections::BTreeMap;
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
    /// A read-only mapping of a file: mapped copy-on-write on the host
    /// (its pages are the file's while nothing writes them).
    pub read_only: bool,
}

/// A private mapping of a file: its end, the file, and the offset in it of
/// the range's first byte.
#[derive(Debug, Clone)]
pub struct FileRange {
    pub end: u64,
    pub backing: Arc<OwnedFd>,
    pub offset: u64,
    /// The file's identity on the host (device, inode), to share one
    /// descriptor between the mappings of a file.
    id: (u64, u64),
}

/// A range in a map by start, that can be cut.
trait Cut: Clone {
    fn end(&self) -> u64;
    /// This range from `at` on (`start <= at < end`).
    fn from(&self, start: u64, at: u64) -> Self;
    /// This range up to `at`.
    fn until(&self, at: u64) -> Self;
}

/// [`Cut`] for a range type with `end` and `offset` fields.
macro_rules! cut_by_end_and_offset {
    ($($t:ty),*) => {$(
        impl Cut for $t {
            fn end(&self) -> u64 {
                self.end
            }
            fn from(&self, start: u64, at: u64) -> Self {
                Self {
                    offset: self.offset + (at - start),
                    ..self.clone()
                }
            }
            fn until(&self, at: u64) -> Self {
                Self {
                    end: at,
                    ..self.clone()
                }
            }
        }
    )*};
}

cut_by_end_and_offset!(SharedRange, FileRange);

/// Removes `addr..end` from the ranges of `map`, keeping the parts outside it.
fn cut_out<R: Cut>(map: &mut BTreeMap<u64, R>, addr: u64, end: u64) {
    let hit: Vec<(u64, R)> = map
        .range(..end)
        .filter(|(_, r)| r.end() > addr)
        .map(|(&s, r)| (s, r.clone()))
        .collect();
    for (s, r) in hit {
        map.remove(&s);
        if s < addr {
            map.insert(s, r.until(addr));
        }
        if r.end() > end {
            map.insert(end, r.from(s, end));
        }
    }
}

/// The parts of `start..end` (mapping `fd` from `offset`) that lie past the
/// file's end now, by whole pages: an access there faults on the host.
fn past_end(fd: &OwnedFd, start: u64, end: u64, offset: u64) -> Option<(u64, u64)> {
    let size = rustix::fs::fstat(fd).ok()?.st_size as u64;
    let inside = size
        .saturating_sub(offset)
        .next_multiple_of(PAGE_SIZE)
        .min(end - start);
    (start + inside < end).then_some((start + inside, end))
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
        self.map_range(
            addr,
            SharedRange {
                end: addr + len,
                backing,
                offset,
                anonymous,
                read_only: false,
            },
        )
    }

    /// Maps `len` bytes of the file `backing` from `offset` at guest `addr`
    /// for a read-only `MAP_SHARED` mapping: copy-on-write on the host, so
    /// it reads what the file holds now (and `backing` may be read-only).
    /// False, with nothing changed, where it cannot (as [`Self::map_shared`]).
    pub fn map_shared_read_only(
        &mut self,
        addr: u64,
        len: u64,
        backing: Arc<OwnedFd>,
        offset: u64,
    ) -> bool {
        self.map_range(
            addr,
            SharedRange {
                end: addr + len,
                backing,
                offset,
                anonymous: false,
                read_only: true,
            },
        )
    }

    /// Maps `r` at `addr` (`r.end` is its end); false where it cannot.
    pub fn map_range(&mut self, addr: u64, r: SharedRange) -> bool {
        let flags = if r.read_only {
            libc::MAP_PRIVATE
        } else {
            libc::MAP_SHARED
        };
        let Some(len) = r.end.checked_sub(addr) else {
            return false;
        };
        if !self.map_host(addr, len, r.backing.as_fd(), r.offset, flags) {
            return false;
        }
        self.shared.insert(addr, r);
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

    /// Forgets the shared ranges and private file mappings inside
    /// `addr..end` (their host mapping is being replaced), keeping the
    /// parts outside it.
    pub(super) fn forget_files(&mut self, addr: u64, end: u64) {
        cut_out(&mut self.shared, addr, end);
        cut_out(&mut self.private_files, addr, end);
    }

    /// Remembers that `addr..addr+len` is a private mapping of the host
    /// file `fd` from `offset` (see [`Self::reload_private_files`]). One
    /// descriptor is kept per file, whatever the number of its mappings.
    pub fn note_private_file(&mut self, addr: u64, len: u64, fd: OwnedFd, offset: u64) {
        let Ok(st) = rustix::fs::fstat(&fd) else {
            return;
        };
        let id = (st.st_dev, st.st_ino);
        let backing = self
            .private_files
            .values()
            .find(|r| r.id == id)
            .map_or_else(|| Arc::new(fd), |r| r.backing.clone());
        cut_out(&mut self.private_files, addr, addr + len);
        self.private_files.insert(
            addr,
            FileRange {
                end: addr + len,
                backing,
                offset,
                id,
            },
        );
    }

    /// Drops the program's changes to the private file mappings in
    /// `addr..end` (page aligned): their pages are the file's again, as
    /// `MADV_DONTNEED` makes them on Linux (mapped from the file anew where
    /// this memory can, read from it otherwise; zero past its end). Returns
    /// the parts of `addr..end` that are no private file mapping.
    pub fn reload_private_files(&mut self, addr: u64, end: u64) -> Vec<(u64, u64)> {
        let hit: Vec<(u64, FileRange)> = self
            .private_files
            .range(..end)
            .filter(|(_, r)| r.end > addr)
            .map(|(&s, r)| (s, r.clone()))
            .collect();
        let mut rest = Vec::new();
        let mut at = addr;
        for (s, r) in hit {
            let (from, to) = (s.max(addr), r.end.min(end));
            if from > at {
                rest.push((at, from));
            }
            at = at.max(to);
            let offset = r.offset + (from - s);
            let size = rustix::fs::fstat(&*r.backing).map_or(0, |st| st.st_size as u64);
            let inside = size
                .saturating_sub(offset)
                .next_multiple_of(PAGE_SIZE)
                .min(to - from);
            let mapped = inside > 0
                && self.map_host(from, inside, r.backing.as_fd(), offset, libc::MAP_PRIVATE);
            // map_host forgot (part of) the range: it is still the same mapping.
            cut_out(&mut self.private_files, from, to);
            self.private_files.insert(
                from,
                FileRange {
                    end: to,
                    offset,
                    ..r.clone()
                },
            );
            let copied = if mapped { from + inside } else { from };
            if copied < to {
                self.read_file_into(&r.backing, copied, to, offset + (copied - from));
            }
        }
        if at < end {
            rest.push((at, end));
        }
        rest
    }

    /// Copies `fd` from `offset` into guest `from..to` (zero past its end).
    fn read_file_into(&mut self, fd: &OwnedFd, from: u64, to: u64, offset: u64) {
        let Ok(buf) = self.kernel_slice_mut(from, to - from) else {
            return;
        };
        let mut done = 0;
        while done < buf.len() {
            match rustix::io::pread(fd, &mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
        }
        buf[done..].fill(0);
    }

    /// The pages of file mappings (shared, or private ones made by mmap)
    /// that lie past the end of their file now, as (start, end), lowest
    /// first: an access there raises SIGBUS on Linux, and faults on the
    /// host here.
    pub fn past_end_of_file(&self) -> Vec<(u64, u64)> {
        let shared = self.shared_past_end().into_iter();
        let private = self
            .private_files
            .iter()
            .filter_map(|(&s, r)| past_end(&r.backing, s, r.end, r.offset));
        let mut out: Vec<(u64, u64)> = shared.chain(private).collect();
        out.sort_unstable();
        out
    }

    /// The pages of shared file mappings past the end of their file now.
    pub(super) fn shared_past_end(&self) -> Vec<(u64, u64)> {
        self.shared
            .iter()
            .filter(|(_, r)| !r.anonymous)
            .filter_map(|(&s, r)| past_end(&r.backing, s, r.end, r.offset))
            .collect()
    }

    /// Maps the shared ranges of `src` at the same places here (a forked
    /// child shares them with its parent). Ranges that cannot be mapped
    /// (this memory is a view of a snapshot) keep the copy already made.
    pub(super) fn share_ranges_of(&mut self, src: &GuestMemory) {
        for (&s, r) in &src.shared {
            if !self.map_range(s, r.clone()) {
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

    #[test]
    fn dropped_private_pages_are_the_file_again_and_past_its_end_is_listed() {
        let page = abi::PAGE_SIZE;
        let mut m = GuestMemory::new(16 * MIB).unwrap();
        let at = abi::USER_BASE + MIB;
        let (f, _) = file_of(2, b'c');
        // Two pages of the file and one past its end, private.
        assert!(m.map_file(at, 2 * page, f.as_fd(), 0));
        m.note_private_file(at, 3 * page, OwnedFd::from(f.try_clone().unwrap()), 0);
        m.write(at + 5, b"mine").unwrap();
        m.write(at + 2 * page, b"past").unwrap();
        rustix::io::pwrite(&f, b"new", page + 1).unwrap();
        let outside = m.reload_private_files(at - page, at + 3 * page);
        assert_eq!(outside, vec![(at - page, at)]);
        assert_eq!(m.read(at + 5, 4).unwrap(), b"cccc", "the change is dropped");
        assert_eq!(m.read(at + page, 4).unwrap(), b"cnew", "the file's bytes");
        assert_eq!(
            m.read(at + 2 * page, 4).unwrap(),
            &[0; 4],
            "zero past the end"
        );
        // Still remembered: a second drop reads the file again.
        m.write(at, b"again").unwrap();
        m.reload_private_files(at, at + page);
        assert_eq!(m.read(at, 5).unwrap(), b"ccccc");
        // The file shrinks: its mapped pages past the new end are listed.
        rustix::fs::ftruncate(&f, 10).unwrap();
        assert_eq!(m.past_end_of_file(), vec![(at + page, at + 3 * page)]);
        // Unmapping forgets the mapping.
        m.unmap_files(at, 3 * page);
        assert!(m.past_end_of_file().is_empty());
        assert_eq!(m.reload_private_files(at, at + page), vec![(at, at + page)]);
    }

    #[test]
    fn a_shared_mapping_longer_than_its_file_follows_its_growth() {
        let page = abi::PAGE_SIZE;
        let mut m = GuestMemory::new(16 * MIB).unwrap();
        let at = abi::USER_BASE + MIB;
        let (f, fd) = file_of(1, b'd');
        assert!(m.map_shared(at, 4 * page, fd.clone(), 0, false));
        assert_eq!(m.past_end_of_file(), vec![(at + page, at + 4 * page)]);
        rustix::fs::ftruncate(&f, 3 * page).unwrap();
        assert_eq!(m.past_end_of_file(), vec![(at + 3 * page, at + 4 * page)]);
        m.write(at + 2 * page, b"grown").unwrap();
        let mut buf = [0u8; 5];
        rustix::io::pread(&f, &mut buf, 2 * page).unwrap();
        assert_eq!(&buf, b"grown");
        // A read-only one shows the file's changes and writes nothing to it.
        let ro = at + 8 * page;
        assert!(m.map_shared_read_only(ro, page, fd, 0));
        rustix::io::pwrite(&f, b"later", 7).unwrap();
        assert_eq!(m.read(ro + 7, 5).unwrap(), b"later");
    }
}
