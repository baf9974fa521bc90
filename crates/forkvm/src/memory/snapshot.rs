//! Snapshots of guest RAM and copy-on-write forks of them.
//!
//! A [`Snapshot`] is a memfd holding the master's RAM, never written again.
//! A fork maps it `MAP_PRIVATE`: reads share the master's pages, the first
//! write to a page gets the fork a private copy (host-level copy-on-write,
//! no guest page-table edits, which PVM could not see anyway).
//!
//! Reset finds the private pages with `PAGEMAP_SCAN`. Those the last use
//! changed get the master's contents copied back and stay mapped, so the
//! next use writes them without another copy-on-write fault (a VM exit
//! each, 28 µs on PVM); those it left equal to the master's are returned
//! (MADV_DONTNEED). The kept set therefore follows what each use writes.
//! Beyond [`KEEP_PRIVATE_PAGES`] private pages, reset returns them all.

use super::guest_memory::{GuestMemory, MapError};
use super::pagemap::{self, PAGE_IS_FILE, PAGE_IS_PRESENT};
use crate::abi::PAGE_SIZE;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;

/// Private pages a fork keeps across resets (restored by copying); beyond
/// this, reset returns them to the host.
pub const KEEP_PRIVATE_PAGES: u64 = 2048;

/// Resets a kept private page may stay equal to the master's before it is
/// returned. Node writes ~76 pages only every ninth or tenth request of a
/// worker (its heap's periodic work): with 8 they were returned just before
/// being written again, each a copy-on-write fault and a shadow-MMU refault
/// (~35 µs on PVM). With 64, `bench/js.sh` (alternating): hello 1.87-2.00 →
/// 1.56-1.77 ms, React 2.17-2.62 → 1.85-1.87 ms; the C and Go servers,
/// which keep few pages, unchanged. The kept set stays bounded by
/// [`KEEP_PRIVATE_PAGES`]; an idle kept page costs a 4 KiB compare a reset.
const IDLE_RESETS: u8 = 64;

/// In `GuestMemory::idle`: a page returned for staying idle.
const RETURNED: u8 = u8::MAX;
/// In `GuestMemory::idle`: a page that was returned and came back (written
/// again, if only with the master's bytes): it is kept from then on, a
/// 4 KiB compare a reset instead of a copy-on-write fault now and then.
/// Node writes ~60 such pages back to the master's contents, each about
/// every 65 requests: one copy-on-write fault (~35 µs here) a request.
const STICKY: u8 = u8::MAX - 1;

/// Bound on the pages `GuestMemory::idle` remembers as returned.
const RETURNED_REMEMBERED: usize = 4 * KEEP_PRIVATE_PAGES as usize;

/// Up to this many bytes a fork's discard looks at every page: a page-table
/// scan and two seeks cost more than faulting in a few pages.
const SMALL_DISCARD: u64 = 16 * PAGE_SIZE;

/// An immutable image of guest RAM in a memfd.
pub struct Snapshot {
    /// What the program had mapped at the snapshot.
    user_map: Option<super::UserMap>,
    /// The host rights that enforce its memory rights.
    prot: super::Protections,
    /// Its memory limit.
    commit_limit: u64,
    /// The chunks of guest RAM in use (see `GuestMemory::chunks_in_use`).
    chunks: u64,
    /// Its private file mappings (their pages are copies in the snapshot;
    /// `MADV_DONTNEED` reads the file again).
    private_files: std::collections::BTreeMap<u64, super::shared::FileRange>,
    fd: OwnedFd,
    size: u64,
    /// A read-only shared view, the source for restoring pages.
    view: NonNull<u8>,
}

// SAFETY: the view is a read-only mapping of a memfd written only by
// `capture` and by `refresh`, which needs the snapshot unshared (it takes
// it out of its last `Arc`), so sharing it between threads is sound; the fd
// is an ordinary owned fd.
unsafe impl Send for Snapshot {}
// SAFETY: as above: all access through `view` is reads of immutable memory.
unsafe impl Sync for Snapshot {}

fn map_err(size: u64) -> impl Fn(std::io::Error) -> MapError {
    move |source| MapError { size, source }
}

fn mmap(
    addr: *mut libc::c_void,
    size: u64,
    prot: i32,
    flags: i32,
    fd: i32,
) -> std::io::Result<NonNull<u8>> {
    // SAFETY: callers pass either a null hint or a range they own (for
    // MAP_FIXED); the fd is a live memfd of at least `size` bytes.
    let ptr = unsafe { libc::mmap(addr, size as usize, prot, flags, fd, 0) };
    if ptr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    NonNull::new(ptr.cast()).ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// The offsets where `mem` may hold bytes for an image: its populated pages
/// and its directly mapped files (part of the image even where never
/// touched), in order, merged.
fn image_ranges(mem: &GuestMemory) -> std::io::Result<Vec<(u64, u64)>> {
    let (base, size) = (mem.base.as_ptr() as u64, mem.size);
    let mut ranges: Vec<(u64, u64)> = pagemap::scan(base, base + size, PAGE_IS_PRESENT, 0)?
        .into_iter()
        .map(|(s, e)| (s - base, (e - base).min(size)))
        .chain(mem.file_mapped.iter().map(|(&s, &e)| (s, e.min(size))))
        .collect();
    ranges.sort_unstable();
    let mut merged = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        pagemap::push_range(&mut merged, s, e);
    }
    Ok(merged)
}

/// Writes `whole[from..to]` into the image at offset `from`.
fn write_run(fd: &OwnedFd, whole: &[u8], from: u64, to: u64) -> std::io::Result<()> {
    let mut at = from;
    while at < to {
        let n = rustix::io::pwrite(fd, &whole[at as usize..to as usize], at)?;
        if n == 0 {
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        at += n as u64;
    }
    Ok(())
}

impl Snapshot {
    /// Copies the populated pages of `mem` into a new memfd.
    pub fn capture(mem: &GuestMemory) -> Result<Arc<Self>, MapError> {
        let size = mem.size;
        let err = map_err(size);
        let fd = rustix::fs::memfd_create("forkvm-snapshot", rustix::fs::MemfdFlags::CLOEXEC)
            .map_err(|e| err(e.into()))?;
        rustix::fs::ftruncate(&fd, size).map_err(|e| err(e.into()))?;
        let ranges = image_ranges(mem).map_err(&err)?;
        let whole = mem
            .kernel_read(0, size)
            .map_err(|_| err(std::io::Error::from_raw_os_error(libc::EFAULT)))?;
        // Pages of a shared mapping past its file's end have no bytes (the
        // host faults there): zero in the snapshot, and left alone here.
        let past_end = mem.shared_past_end();
        // Runs of pages that hold something go in one write each (a vfork
        // child's copy of a 100 MiB heap: 25,600 writes a page at a time).
        let write = |from: u64, to: u64| write_run(&fd, whole, from, to).map_err(&err);
        for (lo, hi) in ranges {
            let mut run = None;
            for at in (lo..hi).step_by(PAGE_SIZE as usize) {
                // Pages that are all zero are skipped: the memfd reads as
                // zero there already.
                let page = &whole[at as usize..(at + PAGE_SIZE).min(hi) as usize];
                let keep = !past_end.iter().any(|&(s, e)| (s..e).contains(&at))
                    && page.iter().any(|&b| b != 0);
                match (keep, run) {
                    (true, None) => run = Some(at),
                    (false, Some(from)) => {
                        write(from, at)?;
                        run = None;
                    }
                    _ => {}
                }
            }
            if let Some(from) = run {
                write(from, hi)?;
            }
        }
        let view = mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd.as_fd().as_raw_fd(),
        )
        .map_err(&err)?;
        Ok(Arc::new(Self {
            user_map: mem.user_map.clone(),
            prot: mem.prot.clone(),
            commit_limit: mem.commit_limit,
            chunks: mem.chunks_in_use(),
            private_files: mem.private_files.clone(),
            fd,
            size,
            view,
        }))
    }

    /// A snapshot of `mem` for a vfork child: `old` (an earlier one of the
    /// same memory) brought up to date when nothing else holds it any more,
    /// else a new capture. Bringing it up to date compares every page `mem`
    /// holds with the image and writes only those that changed, so a
    /// process that spawns again and again (python's subprocess, a shell)
    /// pays for its memory once, not at every spawn.
    pub fn capture_reusing(
        mem: &GuestMemory,
        old: Option<Arc<Self>>,
    ) -> Result<Arc<Self>, MapError> {
        let unshared = old
            .and_then(|a| Arc::try_unwrap(a).ok())
            .filter(|s| s.size == mem.size);
        match unshared {
            Some(mut snap) => match snap.refresh(mem) {
                Ok(()) => Ok(Arc::new(snap)),
                Err(e) => {
                    tracing::debug!("a kept snapshot could not be brought up to date: {e}");
                    Self::capture(mem)
                }
            },
            None => Self::capture(mem),
        }
    }

    /// Makes the image hold exactly what `mem` holds now (see
    /// [`Self::capture_reusing`]).
    fn refresh(&mut self, mem: &GuestMemory) -> Result<(), MapError> {
        const ZERO: [u8; PAGE_SIZE as usize] = [0; PAGE_SIZE as usize];
        let size = self.size;
        let err = map_err(size);
        let merged = image_ranges(mem).map_err(&err)?;
        let held = self.data_in(0, size).map_err(&err)?;
        let punch = |from: u64, to: u64| -> Result<(), MapError> {
            use rustix::fs::FallocateFlags;
            rustix::fs::fallocate(
                &self.fd,
                FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
                from,
                to - from,
            )
            .map_err(|e| err(e.into()))
        };
        // Data the image has where `mem` now has nothing: holes again.
        let mut next = 0;
        for &(s, e) in &held {
            let mut at = s;
            while next < merged.len() && merged[next].1 <= at {
                next += 1;
            }
            let mut i = next;
            while at < e {
                match merged.get(i) {
                    Some(&(ms, me)) if ms < e => {
                        if at < ms {
                            punch(at, ms)?;
                        }
                        at = at.max(me);
                        i += 1;
                    }
                    _ => {
                        punch(at, e)?;
                        at = e;
                    }
                }
            }
        }
        let whole = mem
            .kernel_read(0, size)
            .map_err(|_| err(std::io::Error::from_raw_os_error(libc::EFAULT)))?;
        let past_end = mem.shared_past_end();
        let write = |from: u64, to: u64| write_run(&self.fd, whole, from, to).map_err(&err);
        // Pages that changed since: written, in runs. A page the image has
        // no data for is compared with zeros (looking at it through the view
        // would make the memfd allocate it).
        let mut h = 0;
        for (lo, hi) in merged {
            let mut run = None;
            for at in (lo..hi).step_by(PAGE_SIZE as usize) {
                let len = PAGE_SIZE.min(hi - at);
                while h < held.len() && held[h].1 <= at {
                    h += 1;
                }
                let in_image = held.get(h).is_some_and(|&(s, _)| s <= at);
                let same = if past_end.iter().any(|&(s, e)| (s..e).contains(&at)) {
                    // No bytes on the host there: zero in the image.
                    if in_image {
                        punch(at, at + len)?;
                    }
                    true
                } else {
                    let now = &whole[at as usize..(at + len) as usize];
                    if in_image {
                        now == self.bytes(at, len)
                    } else {
                        now == &ZERO[..len as usize]
                    }
                };
                match (same, run) {
                    (false, None) => run = Some(at),
                    (true, Some(from)) => {
                        write(from, at)?;
                        run = None;
                    }
                    _ => {}
                }
            }
            if let Some(from) = run {
                write(from, hi)?;
            }
        }
        self.user_map = mem.user_map.clone();
        self.prot = mem.prot.clone();
        self.commit_limit = mem.commit_limit;
        self.chunks = mem.chunks_in_use();
        self.private_files = mem.private_files.clone();
        Ok(())
    }

    /// Size of the guest RAM it holds.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The master's bytes at guest physical `addr..addr+len`.
    pub(super) fn bytes(&self, addr: u64, len: u64) -> &[u8] {
        debug_assert!(addr + len <= self.size);
        // SAFETY: the view maps `size` bytes read-only for the snapshot's
        // lifetime; callers stay in range (checked by `GuestMemory::reset`).
        unsafe { std::slice::from_raw_parts(self.view.as_ptr().add(addr as usize), len as usize) }
    }

    /// The parts of `start..end` (offsets into the image) where it holds
    /// data; the rest are holes and read as zero.
    fn data_in(&self, start: u64, end: u64) -> std::io::Result<Vec<(u64, u64)>> {
        use rustix::fs::SeekFrom;
        let mut out = Vec::new();
        let mut at = start;
        while at < end {
            let from = match rustix::fs::seek(&self.fd, SeekFrom::Data(at)) {
                Ok(from) => from,
                Err(rustix::io::Errno::NXIO) => break,
                Err(e) => return Err(e.into()),
            };
            if from >= end {
                break;
            }
            let to = rustix::fs::seek(&self.fd, SeekFrom::Hole(from))?.min(end);
            out.push((from, to));
            at = to;
        }
        Ok(out)
    }

    /// A hash of the whole image (for tests that prove the master never changes).
    pub fn digest(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.bytes(0, self.size).hash(&mut h);
        h.finish()
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        // SAFETY: `view` is the mapping made in `capture`, unmapped once.
        unsafe { libc::munmap(self.view.as_ptr().cast(), self.size as usize) };
    }
}

/// What a reset did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResetStats {
    /// Private pages restored by copying from the snapshot.
    pub copied: u64,
    /// Private pages returned to the host.
    pub dropped: u64,
}

impl GuestMemory {
    /// A copy-on-write view of `snap`.
    pub fn fork_of(snap: &Arc<Snapshot>) -> Result<Self, MapError> {
        let base = mmap(
            std::ptr::null_mut(),
            snap.size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_NORESERVE,
            snap.fd.as_raw_fd(),
        )
        .map_err(map_err(snap.size))?;
        Ok(Self {
            base,
            size: snap.size,
            snapshot: Some(snap.clone()),
            user_map: snap.user_map.clone(),
            idle: Default::default(),
            commit_limit: snap.commit_limit,
            file_mapped: Default::default(),
            shared: Default::default(),
            private_files: snap.private_files.clone(),
            bus_slot: None,
            chunks: snap.chunks,
            budget: None,
            charged: 0,
            loan: 0,
            moves_left: super::guest_memory::MAX_MOVES,
            // Read-write on the host until the first entry applies these.
            prot: snap.prot.clone(),
            prot_counted: 0,
            lifted: std::cell::Cell::new(true),
            vfork_snapshot: std::cell::Cell::new(None),
            stale: false,
            view: true,
        })
        .map(|mut m: GuestMemory| {
            m.recount_prot();
            m
        })
    }

    /// Replaces this memory, in place (same host addresses, so a KVM slot
    /// over it stays valid), with a fresh copy-on-write view of `snap`.
    pub fn remap(&mut self, snap: &Arc<Snapshot>) -> Result<(), MapError> {
        if snap.size != self.size {
            return Err(MapError {
                size: snap.size,
                source: std::io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        mmap(
            self.base.as_ptr().cast(),
            self.size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_NORESERVE | libc::MAP_FIXED,
            snap.fd.as_raw_fd(),
        )
        .map_err(map_err(self.size))?;
        // Whatever was there is gone.
        self.stale = false;
        self.view = true;
        self.snapshot = Some(snap.clone());
        self.user_map = snap.user_map.clone();
        // A fresh view is read-write: the snapshot's rights go on before the guest runs.
        self.prot = snap.prot.clone();
        self.lifted.set(true);
        self.recount_prot();
        self.settle();
        self.commit_limit = snap.commit_limit;
        self.chunks |= snap.chunks;
        self.idle.clear();
        self.file_mapped.clear();
        self.shared.clear();
        self.private_files = snap.private_files.clone();
        self.unguard_if_no_files();
        Ok(())
    }

    /// Lets go of the snapshot this memory is a view of, for a vfork
    /// child's memory whose stores were taken and which is emptied next:
    /// its parent may then bring that snapshot up to date in place for its
    /// next child ([`Snapshot::capture_reusing`]), which changes what this
    /// memory shows where it did not write; nothing reads it any more. The
    /// host mapping stays a view of the snapshot's memfd until emptied
    /// ([`GuestMemory::empty_all`]): emptying it keeping its pages would
    /// leave the memfd's bytes wherever it holds none of its own.
    pub fn release_snapshot(&mut self) {
        self.snapshot = None;
    }

    /// The snapshot this memory is a view of.
    pub fn snapshot(&self) -> Option<&Arc<Snapshot>> {
        self.snapshot.as_ref()
    }

    /// The parts of guest `start..end` that may hold something other than
    /// zeroes: all of it, except in a fork, where only pages present in its
    /// view or holding data in the snapshot can. Looking at the others would
    /// fault each one into the view (and make the snapshot's memfd allocate a
    /// page for a hole): node's first request in a fork unmaps 64 MiB it
    /// reserved, which left 16,000 page-table entries that every later reset
    /// scanned (node's reset 1.6-1.8 → 0.5-0.8 ms) and cost that request
    /// ~90 ms instead of ~32.
    pub(super) fn may_hold_data(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let whole = vec![(start, end)];
        let Some(snap) = self.snapshot.as_ref() else {
            return whole;
        };
        if end - start <= SMALL_DISCARD {
            // Cheaper to look than to ask (musl's free of a few pages).
            return whole;
        }
        let (lo, hi) = (
            start & !(PAGE_SIZE - 1),
            end.next_multiple_of(PAGE_SIZE).min(self.size),
        );
        let base = self.base.as_ptr() as u64;
        let (Ok(present), Ok(data)) = (
            pagemap::scan(base + lo, base + hi, PAGE_IS_PRESENT, 0),
            snap.data_in(lo, hi),
        ) else {
            return whole;
        };
        let mut parts: Vec<(u64, u64)> = present
            .into_iter()
            .map(|(s, e)| (s - base, e - base))
            .chain(data)
            .map(|(s, e)| (s.max(start), e.min(end)))
            .filter(|(s, e)| s < e)
            .collect();
        parts.sort_unstable();
        let mut merged = Vec::with_capacity(parts.len());
        for (s, e) in parts {
            pagemap::push_range(&mut merged, s, e);
        }
        merged
    }

    /// Makes this memory equal to its snapshot again; cost follows the pages written.
    pub fn reset(&mut self) -> std::io::Result<ResetStats> {
        let Some(snap) = self.snapshot.clone() else {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        };
        let base = self.base.as_ptr() as u64;
        self.user_map = snap.user_map.clone();
        self.private_files = snap.private_files.clone();
        self.settle();
        let private = pagemap::scan(base, base + self.size, PAGE_IS_PRESENT, PAGE_IS_FILE)?;
        let pages: u64 = private.iter().map(|(s, e)| (e - s) / PAGE_SIZE).sum();
        if tracing::enabled!(tracing::Level::TRACE) {
            // Where the written pages are, per 2 MiB of guest memory (for
            // finding what a request writes: FORKVM_LOG=forkvm::memory=trace).
            let mut per: std::collections::BTreeMap<u64, u64> = Default::default();
            for (s, e) in &private {
                let mut a = *s;
                while a < *e {
                    *per.entry((a - base) & !(crate::abi::HUGE_PAGE_SIZE - 1))
                        .or_default() += 1;
                    a += PAGE_SIZE;
                }
            }
            tracing::trace!("reset: {pages} written page(s) per 2 MiB of guest memory: {per:x?}");
        }
        let mut stats = ResetStats::default();
        let mut drop: Vec<(u64, u64)> = Vec::new();
        for (s, e) in private {
            let (off, len) = (s - base, e - s);
            if off + len > self.size {
                continue;
            }
            if pages > KEEP_PRIVATE_PAGES {
                pagemap::push_range(&mut drop, s, e);
                stats.dropped += len / PAGE_SIZE;
                continue;
            }
            // Pages this use changed are copied back and kept (no copy-on-write
            // fault next time). Pages left equal to the master's are kept for a
            // few resets (a request may have written and freed them), then
            // returned, so the kept set follows what recent uses write.
            for page in (0..len).step_by(PAGE_SIZE as usize) {
                let at = off + page;
                let src = snap.bytes(at, PAGE_SIZE);
                let Ok(dst) = self.kernel_slice_mut(at, PAGE_SIZE) else {
                    continue;
                };
                let changed = dst != src;
                if changed {
                    dst.copy_from_slice(src);
                    stats.copied += 1;
                }
                match self.idle.get(&at).copied() {
                    // Returned as idle, and written again since: the program
                    // writes it now and then, leaving the master's bytes.
                    Some(RETURNED) => {
                        self.idle.insert(at, STICKY);
                    }
                    Some(STICKY) => {}
                    _ if changed => {
                        self.idle.remove(&at);
                    }
                    idle => {
                        let idle = idle.unwrap_or(0) + 1;
                        if idle > IDLE_RESETS {
                            self.idle.insert(at, RETURNED);
                            pagemap::push_range(&mut drop, s + page, s + page + PAGE_SIZE);
                            stats.dropped += 1;
                        } else {
                            self.idle.insert(at, idle);
                        }
                    }
                }
            }
        }
        if self.prot != snap.prot {
            // The request changed rights: the master's go back on, where
            // they differ. The pages copied back above were written under
            // the request's rights (lifting them only where it protected a
            // page it had written).
            self.take_prot(snap.prot.clone());
        }
        if self.idle.len() > RETURNED_REMEMBERED {
            self.idle.retain(|_, v| *v != RETURNED);
        }
        for (s, e) in drop {
            // SAFETY: the range lies in our private mapping; DONTNEED reverts
            // it to the snapshot's contents (which it equals or must equal).
            unsafe {
                libc::madvise(
                    s as *mut libc::c_void,
                    (e - s) as usize,
                    libc::MADV_DONTNEED,
                )
            };
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{HUGE_PAGE_SIZE, USER_BASE};

    #[test]
    fn a_kept_snapshot_is_brought_up_to_date_and_a_shared_one_is_left_alone() {
        let size = 4 * HUGE_PAGE_SIZE;
        let (changed, emptied, added) = (USER_BASE, USER_BASE + 0x10_0000, USER_BASE + 0x18_0000);
        let mut m = GuestMemory::new(size).unwrap();
        m.kernel_write(changed, b"one").unwrap();
        m.kernel_write(emptied, b"gone").unwrap();
        let first = Snapshot::capture(&m).unwrap();
        let fd = first.fd.as_raw_fd();
        m.kernel_write(changed, b"two").unwrap();
        m.discard(emptied, PAGE_SIZE).unwrap();
        m.kernel_write(added, b"new").unwrap();
        // Held by nobody else: the same memfd, brought up to date.
        let second = Snapshot::capture_reusing(&m, Some(first)).unwrap();
        assert_eq!(second.fd.as_raw_fd(), fd);
        assert_eq!(second.bytes(changed, 3), b"two");
        assert_eq!(second.bytes(added, 3), b"new");
        assert!(
            second
                .data_in(emptied, emptied + PAGE_SIZE)
                .unwrap()
                .is_empty(),
            "a page the memory no longer has is a hole again"
        );
        assert_eq!(second.bytes(emptied, 4), [0; 4]);
        // Held by a view: a new capture, and the old image stays as it was.
        let view = GuestMemory::fork_of(&second).unwrap();
        m.kernel_write(changed, b"3rd").unwrap();
        let third = Snapshot::capture_reusing(&m, Some(second.clone())).unwrap();
        assert!(!Arc::ptr_eq(&third, &second));
        assert_eq!(second.bytes(changed, 3), b"two");
        assert_eq!(view.kernel_read(changed, 3).unwrap(), b"two");
        assert_eq!(third.bytes(changed, 3), b"3rd");
    }

    fn present_pages(mem: &GuestMemory) -> u64 {
        let base = mem.host_base();
        pagemap::scan(base, base + mem.size(), PAGE_IS_PRESENT, 0)
            .unwrap()
            .iter()
            .map(|(s, e)| (e - s) / PAGE_SIZE)
            .sum()
    }

    #[test]
    fn discarding_in_a_fork_zeroes_what_was_there_and_touches_nothing_else() {
        let size = 64 * HUGE_PAGE_SIZE;
        let mut master = GuestMemory::new(size).unwrap();
        let area = USER_BASE + 8 * HUGE_PAGE_SIZE;
        let len = 32 * HUGE_PAGE_SIZE;
        master.kernel_write(area + 0x5000, b"master's").unwrap();
        master.kernel_write(area + len - 8, b"last one").unwrap();
        let snap = Snapshot::capture(&master).unwrap();
        let mut fork = GuestMemory::fork_of(&snap).unwrap();
        fork.kernel_write(area + 0x30_0000, b"fork's").unwrap();
        let before = present_pages(&fork);
        // Populating is for fresh memory: in a fork it would copy pages the
        // reset then has to drop.
        fork.populate(area, len);
        assert_eq!(present_pages(&fork), before);
        // Nor are a fork's pages moved: each is the snapshot's at its own offset.
        assert!(!fork.move_pages(area, area + len, PAGE_SIZE));
        fork.discard(area, len).unwrap();
        assert_eq!(fork.kernel_read(area + 0x5000, 8).unwrap(), [0; 8]);
        assert_eq!(fork.kernel_read(area + len - 8, 8).unwrap(), [0; 8]);
        assert_eq!(fork.kernel_read(area + 0x30_0000, 6).unwrap(), [0; 6]);
        // 64 MiB were discarded; only the pages that held something were
        // looked at (each a page-table entry every later reset scans).
        let after = present_pages(&fork);
        assert!(after <= before + 2, "{before} → {after} pages present");
        // An unaligned discard in a fork still zeroes exactly its bytes.
        fork.kernel_write(area + 0x40_0000, b"abcdef").unwrap();
        fork.discard(area + 0x40_0001, 4).unwrap();
        assert_eq!(
            fork.kernel_read(area + 0x40_0000, 6).unwrap(),
            b"a\0\0\0\0f"
        );
        // The reset brings the master's bytes back.
        fork.reset().unwrap();
        assert_eq!(fork.kernel_read(area + 0x5000, 8).unwrap(), b"master's");
        assert_eq!(fork.kernel_read(area + len - 8, 8).unwrap(), b"last one");
    }

    #[test]
    fn a_page_written_back_to_the_masters_bytes_is_returned_once_then_kept() {
        let size = 8 * HUGE_PAGE_SIZE;
        let mut master = GuestMemory::new(size).unwrap();
        let at = USER_BASE + 0x1000;
        master.kernel_write(at, b"lock: free").unwrap();
        let snap = Snapshot::capture(&master).unwrap();
        let mut fork = GuestMemory::fork_of(&snap).unwrap();
        // Each "request" takes the lock and frees it: the page is written,
        // but holds the master's bytes at every reset.
        let request = |fork: &mut GuestMemory| {
            fork.kernel_write(at, b"lock: held").unwrap();
            fork.kernel_write(at, b"lock: free").unwrap();
            fork.reset().unwrap()
        };
        let dropped: u64 = (0..=IDLE_RESETS).map(|_| request(&mut fork).dropped).sum();
        assert_eq!(dropped, 1, "returned after {IDLE_RESETS} idle resets");
        let dropped: u64 = (0..3 * u64::from(IDLE_RESETS))
            .map(|_| request(&mut fork).dropped)
            .sum();
        assert_eq!(dropped, 0, "written again after it was returned: kept");
        assert_eq!(present_pages(&fork), 1);
        // A page that changes is still put back.
        fork.kernel_write(at, b"lock: lost").unwrap();
        assert_eq!(fork.reset().unwrap().copied, 1);
        assert_eq!(fork.kernel_read(at, 10).unwrap(), b"lock: free");
    }
}
