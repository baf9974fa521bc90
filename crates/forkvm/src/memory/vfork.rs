//! A vfork child's memory, and the stores it makes there, which are its
//! parent's: on Linux a child of vfork or clone(CLONE_VM | CLONE_VFORK)
//! runs in its parent's memory (glibc's posix_spawn child writes exec's
//! errno into a variable of the parent's).
//!
//! Here the child is its own VM over a copy-on-write view of a snapshot of
//! the parent's memory ([`GuestMemory::vfork_copy_from`]). The snapshot is
//! the memory as the child found it, and the pages the child wrote are
//! exactly its view's private pages (`PAGEMAP_SCAN`, as a fork's reset finds
//! them). When the child execs or ends, the parent takes the bytes of those
//! pages that differ from the snapshot ([`GuestMemory::take_vfork_stores`]):
//! only what the child changed, so what the parent's other threads stored
//! meanwhile stays.
//!
//! A parent that is itself a view of a snapshot (a `forkvm serve` request)
//! gives the child a view of the same snapshot plus copies of its private
//! pages; what those copies held at first is kept aside ([`VforkBase`]).
//!
//! Mappings the child makes or removes are not carried over: its stores
//! into a mapping of its own are dropped, and what it unmapped stays mapped
//! in the parent, as it was. In the child, shared mappings are private
//! copies (a view maps no files); what it stores there reaches the parent's
//! shared mapping when it execs or ends.

use super::guest_memory::{GuestMemory, MapError};
use super::pagemap::{self, PAGE_IS_FILE, PAGE_IS_PRESENT};
use super::Snapshot;
use crate::abi::{PAGE_SIZE, USER_BASE};
use std::collections::HashMap;
use std::sync::Arc;

/// What a vfork child's memory held when it started.
pub struct VforkBase {
    /// The snapshot its memory is a view of.
    snap: Arc<Snapshot>,
    /// Pages copied into the view (a view parent's private pages), by
    /// offset, with their first contents.
    copied: HashMap<u64, Box<[u8]>>,
}

fn err(size: u64, errno: i32) -> MapError {
    MapError {
        size,
        source: std::io::Error::from_raw_os_error(errno),
    }
}

/// The runs `from..to` where `now` differs from `was` (same length).
fn changed_runs<'a>(was: &'a [u8], now: &'a [u8]) -> impl Iterator<Item = (usize, usize)> + 'a {
    let differs = move |i: usize| now[i] != was[i];
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < now.len() && !differs(i) {
            i += 1;
        }
        let from = i;
        while i < now.len() && differs(i) {
            i += 1;
        }
        (from < i).then_some((from, i))
    })
}

impl GuestMemory {
    /// Makes this memory (same size, e.g. a pooled VM's, whose KVM slot
    /// must keep pointing at it) a vfork child's copy of `src`: a view of a
    /// snapshot of it (or of the snapshot it is a view of, plus copies of
    /// its private pages). The copy is lent, not charged, by `src`'s budget
    /// (see [`GuestMemory::borrow_budget`]). Returns what the child starts
    /// with, for [`GuestMemory::take_vfork_stores`].
    pub fn vfork_copy_from(&mut self, src: &GuestMemory) -> Result<VforkBase, MapError> {
        let size = src.size;
        if self.size != size {
            return Err(err(size, libc::EINVAL));
        }
        if let Some(snap) = src.snapshot.clone() {
            self.copy_from(src, true)?;
            // The pages copied are this view's private ones (at the same
            // host offsets as the source's): keep them as they are now.
            let base = self.base.as_ptr() as u64;
            let own = pagemap::scan(base, base + size, PAGE_IS_PRESENT, PAGE_IS_FILE)
                .map_err(|e| MapError { size, source: e })?;
            let mut copied = HashMap::new();
            for (s, e) in own {
                for page in (s - base..e.saturating_sub(base).min(size)).step_by(PAGE_SIZE as usize)
                {
                    let bytes = self
                        .kernel_read(page, PAGE_SIZE)
                        .map_err(|_| err(size, libc::EFAULT))?;
                    copied.insert(page, bytes.into());
                }
            }
            return Ok(VforkBase { snap, copied });
        }
        let snap = Snapshot::capture_reusing(src, src.vfork_snapshot.take())?;
        src.vfork_snapshot.set(Some(snap.clone()));
        self.leave_budget();
        // The snapshot brings the mappings, limit and chunks of `src`. Its
        // shared mappings stay private copies here: a view maps no files.
        self.remap(&snap)?;
        if let Some(b) = &src.budget {
            if !self.borrow_budget(b.clone()) {
                return Err(err(size, libc::ENOMEM));
            }
        }
        Ok(VforkBase {
            snap,
            copied: HashMap::new(),
        })
    }

    /// Takes the stores of a vfork child: `child` is its memory (it exec'd
    /// or ended) and `base` what that memory started as. Every byte of a
    /// page the child wrote that differs from what the page held at first
    /// is copied here, where this program has something mapped (not in the
    /// guest kernel's area, which holds the child's pid, nor in file pages
    /// past their file's end, where the host faults). Returns the pages
    /// the child changed. Cost follows the pages the child wrote.
    pub fn take_vfork_stores(
        &mut self,
        child: &GuestMemory,
        base: &VforkBase,
    ) -> Result<u64, MapError> {
        let size = self.size;
        let same_view = child
            .snapshot
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, &base.snap));
        if child.size != size || !same_view {
            return Err(err(size, libc::EINVAL));
        }
        let at = child.base.as_ptr() as u64;
        let written = pagemap::scan(at, at + size, PAGE_IS_PRESENT, PAGE_IS_FILE)
            .map_err(|e| MapError { size, source: e })?;
        let mapped: Vec<(u64, u64)> = self
            .user_mappings()
            .into_iter()
            .map(|(s, e, _)| (s.max(USER_BASE), e.min(size)))
            .filter(|(s, e)| s < e)
            .collect();
        let past_end = self.past_end_of_file();
        let fault = |_| err(size, libc::EFAULT);
        let mut changed = 0;
        for (s, e) in written {
            let (lo, hi) = (s - at, e.saturating_sub(at).min(size));
            let first = mapped.partition_point(|&(_, me)| me <= lo);
            for &(ms, me) in mapped[first..].iter().take_while(|&&(ms, _)| ms < hi) {
                for page in (lo.max(ms)..hi.min(me)).step_by(PAGE_SIZE as usize) {
                    if past_end.iter().any(|&(s, e)| (s..e).contains(&page)) {
                        continue;
                    }
                    let now = child.kernel_read(page, PAGE_SIZE).map_err(fault)?;
                    let was = match base.copied.get(&page) {
                        Some(b) => &b[..],
                        None => base.snap.bytes(page, PAGE_SIZE),
                    };
                    if now == was {
                        continue;
                    }
                    changed += 1;
                    // Byte runs, so that the parent's own stores around them stay.
                    for (from, to) in changed_runs(was, now) {
                        self.kernel_write(page + from as u64, &now[from..to])
                            .map_err(fault)?;
                    }
                }
            }
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_runs_are_the_differing_bytes() {
        let runs: Vec<_> = changed_runs(b"abcdef", b"aXcYZf").collect();
        assert_eq!(runs, vec![(1, 2), (3, 5)]);
        assert_eq!(changed_runs(b"same", b"same").count(), 0);
        assert_eq!(changed_runs(b"ab", b"XY").collect::<Vec<_>>(), vec![(0, 2)]);
    }
    use crate::abi::{FAST_DATA_ADDR, HUGE_PAGE_SIZE};

    const RW: super::super::Rights = super::super::Rights {
        read: true,
        write: true,
    };

    #[test]
    fn a_vfork_childs_stores_go_back_and_the_parents_own_stay() {
        let size = 8 * HUGE_PAGE_SIZE;
        let area = USER_BASE + HUGE_PAGE_SIZE;
        let mut parent = GuestMemory::new(size).unwrap();
        parent.track_mappings();
        parent.map_user(area, area + 0x10_000, RW);
        parent.kernel_write(area, b"parent").unwrap();
        parent.kernel_write(area + 0x1000, b"left alone").unwrap();
        parent.kernel_write(area + 0x4000, b"zeroed").unwrap();
        parent.kernel_write(FAST_DATA_ADDR, b"pid 1").unwrap();
        let mut child = GuestMemory::new(size).unwrap();
        let base = child.vfork_copy_from(&parent).unwrap();
        assert_eq!(child.kernel_read(area + 0x1000, 10).unwrap(), b"left alone");
        child.kernel_write(area, b"child!").unwrap();
        child.kernel_write(area + 0x3000, b"a new page").unwrap();
        child.kernel_write(area + 0x4000, &[0; 6]).unwrap();
        // Not the program's: the guest kernel's area, and outside its mappings.
        child.kernel_write(FAST_DATA_ADDR, b"pid 2").unwrap();
        child.kernel_write(area + 0x20_0000, b"unmapped").unwrap();
        // Meanwhile another thread of the parent stores next to the child's
        // bytes, and where the child read only.
        parent.kernel_write(area + 8, b"thread").unwrap();
        parent.kernel_write(area + 0x1000, b"LEFT").unwrap();
        assert_eq!(parent.take_vfork_stores(&child, &base).unwrap(), 3);
        assert_eq!(parent.kernel_read(area, 14).unwrap(), b"child!\0\0thread");
        assert_eq!(
            parent.kernel_read(area + 0x1000, 10).unwrap(),
            b"LEFT alone"
        );
        assert_eq!(
            parent.kernel_read(area + 0x3000, 10).unwrap(),
            b"a new page"
        );
        assert_eq!(parent.kernel_read(area + 0x4000, 6).unwrap(), [0; 6]);
        assert_eq!(parent.kernel_read(FAST_DATA_ADDR, 5).unwrap(), b"pid 1");
        assert_eq!(parent.kernel_read(area + 0x20_0000, 8).unwrap(), [0; 8]);
    }

    #[test]
    fn a_vfork_child_of_a_snapshot_view_gives_back_only_what_it_wrote() {
        let size = 8 * HUGE_PAGE_SIZE;
        let area = USER_BASE + HUGE_PAGE_SIZE;
        let mut master = GuestMemory::new(size).unwrap();
        master.track_mappings();
        master.map_user(area, area + 0x10_000, RW);
        master.kernel_write(area, b"master").unwrap();
        let snap = Snapshot::capture(&master).unwrap();
        let mut view = GuestMemory::fork_of(&snap).unwrap();
        view.kernel_write(area + 0x1000, b"view's").unwrap();
        let mut child = GuestMemory::new(size).unwrap();
        let base = child.vfork_copy_from(&view).unwrap();
        assert_eq!(child.kernel_read(area + 0x1000, 6).unwrap(), b"view's");
        child.kernel_write(area + 0x2000, b"child's").unwrap();
        child.kernel_write(area + 0x1000, b"V").unwrap();
        // The view's page changes meanwhile beside the child's byte.
        view.kernel_write(area + 0x1005, b"S").unwrap();
        assert_eq!(view.take_vfork_stores(&child, &base).unwrap(), 2);
        assert_eq!(view.kernel_read(area, 6).unwrap(), b"master");
        assert_eq!(view.kernel_read(area + 0x1000, 6).unwrap(), b"View'S");
        assert_eq!(view.kernel_read(area + 0x2000, 7).unwrap(), b"child's");
    }

    #[test]
    fn a_vfork_childs_copy_is_lent_by_the_budget() {
        const MIB: u64 = 1 << 20;
        let mut parent = GuestMemory::new(64 * MIB).unwrap();
        parent.track_mappings();
        parent.set_commit_limit(16 * MIB);
        parent.map_user(USER_BASE, USER_BASE + 10 * MIB, RW);
        let budget = parent.share_budget();
        let mut child = GuestMemory::new(64 * MIB).unwrap();
        child.vfork_copy_from(&parent).unwrap();
        assert_eq!((budget.used(), budget.lent()), (10 * MIB, 10 * MIB));
        // Loans are bounded by the limit too: a second child does not fit.
        let mut second = GuestMemory::new(64 * MIB).unwrap();
        assert!(second.vfork_copy_from(&parent).is_err());
        child.empty_all().unwrap();
        assert_eq!((budget.used(), budget.lent()), (10 * MIB, 0));
    }
}
