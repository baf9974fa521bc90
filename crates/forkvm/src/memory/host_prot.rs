//! The program's memory rights, enforced on the host mapping behind guest
//! RAM rather than in the guest page tables (which PVM cannot have edited
//! once the guest runs, see docs/design.md, "Memory").
//!
//! Guest virtual == guest physical == offset into the host mapping, so
//! `mprotect` of the host range behind a guest range takes the rights away
//! from the guest too: lowering host rights makes KVM drop its shadow (or
//! EPT) entries through its MMU notifier, and a later guest access that
//! needs the missing right makes KVM_RUN fail with EFAULT, which the run
//! loop turns into the program's SIGSEGV (`Machine::host_fault`).
//!
//! [`Protections`] is the bookkeeping: the parts of guest user memory whose
//! host rights are less than read-write (PROT_READ or PROT_NONE), merged
//! where neighbours are equal. Each such range costs the host process up to
//! two areas, and a process may have only ~65,000 of them, shared by every
//! VM in it: the number of ranges is bounded per memory and for the whole
//! process ([`MAX_PER_MEMORY`], [`MAX_IN_PROCESS`]).

use crate::abi::PAGE_SIZE;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Host rights of a range: `libc::PROT_NONE`, `PROT_READ` or read-write.
pub(super) type Prot = i32;

/// Read-write: the host rights everywhere [`Protections`] has no range.
pub(super) const RW: Prot = libc::PROT_READ | libc::PROT_WRITE;

/// Most protected ranges one memory may have.
pub const MAX_PER_MEMORY: usize = 4096;

/// Most protected ranges all memories of this host process may have
/// together (about half of the default `vm.max_map_count`, at two areas a
/// range at worst, leaving room for everything else forkvm maps).
pub const MAX_IN_PROCESS: usize = 16_384;

/// Protected ranges of every memory in the process.
static IN_PROCESS: AtomicUsize = AtomicUsize::new(0);

/// Adds `new - old` to the process-wide count of protected ranges.
pub(super) fn recount(old: usize, new: usize) {
    if new > old {
        IN_PROCESS.fetch_add(new - old, Ordering::Relaxed);
    } else {
        let _ = IN_PROCESS.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            Some(n.saturating_sub(old - new))
        });
    }
}

/// Protected ranges of every memory in the process.
pub fn in_process() -> usize {
    IN_PROCESS.load(Ordering::Relaxed)
}

/// The host rights that carry `rights`.
pub(super) fn prot_of(rights: super::Rights) -> Prot {
    match (rights.read, rights.write) {
        (_, true) => RW,
        (true, false) => libc::PROT_READ,
        (false, false) => libc::PROT_NONE,
    }
}

/// Ranges (page aligned, start → (end, rights)) whose host rights are less
/// than read-write; never overlapping, equal neighbours merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protections {
    ranges: BTreeMap<u64, (u64, Prot)>,
}

impl Protections {
    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranges, lowest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, u64, Prot)> + '_ {
        self.ranges.iter().map(|(&s, &(e, p))| (s, e, p))
    }

    /// The ranges overlapping `start..end`.
    fn overlapping(&self, start: u64, end: u64) -> Vec<(u64, u64, Prot)> {
        self.ranges
            .range(..end)
            .rev()
            .take_while(|(_, &(e, _))| e > start)
            .map(|(&s, &(e, p))| (s, e, p))
            .collect()
    }

    /// Whether any range overlaps `start..end`.
    pub(super) fn overlaps(&self, start: u64, end: u64) -> bool {
        self.ranges
            .range(..end)
            .next_back()
            .is_some_and(|(_, &(e, _))| e > start)
    }

    /// Whether a range without read rights overlaps `start..end`.
    pub(super) fn unreadable_in(&self, start: u64, end: u64) -> bool {
        self.ranges
            .range(..end)
            .rev()
            .take_while(|(_, &(e, _))| e > start)
            .any(|(_, &(_, p))| p & libc::PROT_READ == 0)
    }

    /// Whether all of `start..end` already has host rights `prot`.
    pub(super) fn is(&self, start: u64, end: u64, prot: Prot) -> bool {
        let hit = self.overlapping(start, end);
        if prot == RW {
            return hit.is_empty();
        }
        matches!(hit.as_slice(), [(s, e, p)] if *s <= start && *e >= end && *p == prot)
    }

    /// How many ranges there would be at most after [`Self::set`]`(start, end, prot)`.
    pub(super) fn len_after(&self, start: u64, end: u64, prot: Prot) -> usize {
        let hit = self.overlapping(start, end);
        let splits = hit
            .iter()
            .map(|&(s, e, _)| usize::from(s < start) + usize::from(e > end))
            .sum::<usize>();
        self.len() - hit.len() + splits + usize::from(prot != RW)
    }

    /// The smallest range holding `start..end` and every range overlapping it.
    pub(super) fn widen(&self, start: u64, end: u64) -> (u64, u64) {
        self.overlapping(start, end)
            .iter()
            .fold((start, end), |(a, b), &(s, e, _)| (a.min(s), b.max(e)))
    }

    /// The pieces where `other`'s rights differ from these, with `other`'s
    /// rights there, lowest first: what turns one into the other on the
    /// host with the fewest `mprotect`s.
    pub(super) fn changes_to(&self, other: &Protections) -> Vec<(u64, u64, Prot)> {
        // Every boundary of either side; between two, both are constant.
        let mut edges: Vec<u64> = self
            .iter()
            .chain(other.iter())
            .flat_map(|(s, e, _)| [s, e])
            .collect();
        edges.sort_unstable();
        edges.dedup();
        let at = |p: &Protections, a: u64| {
            p.ranges
                .range(..=a)
                .next_back()
                .filter(|(_, &(e, _))| e > a)
                .map_or(RW, |(_, &(_, prot))| prot)
        };
        let mut out: Vec<(u64, u64, Prot)> = Vec::new();
        for w in edges.windows(2) {
            let (s, e) = (w[0], w[1]);
            let want = at(other, s);
            if at(self, s) == want {
                continue;
            }
            match out.last_mut() {
                Some((_, end, p)) if *end == s && *p == want => *end = e,
                _ => out.push((s, e, want)),
            }
        }
        out
    }

    /// Records host rights `prot` for `start..end` (page aligned).
    pub(super) fn set(&mut self, start: u64, end: u64, prot: Prot) {
        debug_assert!(start.is_multiple_of(PAGE_SIZE) && end.is_multiple_of(PAGE_SIZE));
        if end <= start {
            return;
        }
        for (s, e, p) in self.overlapping(start, end) {
            self.ranges.remove(&s);
            if s < start {
                self.ranges.insert(s, (start, p));
            }
            if e > end {
                self.ranges.insert(end, (e, p));
            }
        }
        if prot == RW {
            return;
        }
        let (mut from, mut to) = (start, end);
        // Merge with equal neighbours (one host area instead of two).
        if let Some((&s, &(e, p))) = self.ranges.range(..from).next_back() {
            if e == from && p == prot {
                self.ranges.remove(&s);
                from = s;
            }
        }
        if let Some(&(e, p)) = self.ranges.get(&to) {
            if p == prot {
                self.ranges.remove(&to);
                to = e;
            }
        }
        self.ranges.insert(from, (to, prot));
    }
}

#[cfg(test)]
mod tests {
    use super::super::{GuestMemory, Rights, Snapshot};
    use super::*;
    use crate::abi;
    const P: u64 = PAGE_SIZE;
    const RW_: Rights = Rights {
        read: true,
        write: true,
    };
    const RO_: Rights = Rights {
        read: true,
        write: false,
    };
    const NONE_: Rights = Rights {
        read: false,
        write: false,
    };

    /// The host rights ("rw", "r-", "--") of guest `addr` in `m`, from /proc/self/maps.
    fn host_rights(m: &GuestMemory, addr: u64) -> String {
        let at = m.host_base() + addr;
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for line in maps.lines() {
            let mut f = line.split_whitespace();
            let (range, perms) = (f.next().unwrap(), f.next().unwrap());
            let (lo, hi) = range.split_once('-').unwrap();
            let (lo, hi) = (
                u64::from_str_radix(lo, 16).unwrap(),
                u64::from_str_radix(hi, 16).unwrap(),
            );
            if (lo..hi).contains(&at) {
                return perms[..2].to_string();
            }
        }
        panic!("{at:#x} is not mapped");
    }

    #[test]
    fn rights_reach_the_host_and_forks_and_resets_carry_them() {
        let mut m = GuestMemory::new(8 << 20).unwrap();
        m.track_mappings();
        let area = abi::USER_BASE + (1 << 20);
        m.map_user(area, area + 8 * P, RW_);
        m.kernel_write(area + P, b"read-only").unwrap();
        assert!(m.protect_user(area + P, area + 2 * P, RO_));
        assert!(m.protect_user(area + 3 * P, area + 4 * P, NONE_));
        m.unmap_user(area + 6 * P, area + 8 * P);
        let rights = |m: &GuestMemory| {
            (0..8)
                .map(|i| host_rights(m, area + i * P))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(rights(&m), "rw r- rw -- rw rw -- --");
        // The host reads and writes protected pages (gdb, a snapshot)
        // without faulting; the rights are back before the guest runs.
        m.kernel_write(area + 3 * P, b"host").unwrap();
        assert_eq!(rights(&m), "rw rw rw rw rw rw rw rw");
        m.reprotect();
        assert_eq!(rights(&m), "rw r- rw -- rw rw -- --");
        // A snapshot, a fork of it and a copy have the same rights.
        let snap = Snapshot::capture(&m).unwrap();
        m.reprotect();
        let mut fork = GuestMemory::fork_of(&snap).unwrap();
        fork.reprotect();
        assert_eq!(rights(&fork), "rw r- rw -- rw rw -- --");
        let mut copy = GuestMemory::copy_of(&m, false).unwrap();
        copy.reprotect();
        assert_eq!(rights(&copy), "rw r- rw -- rw rw -- --");
        assert_eq!(copy.kernel_read(area + P, 9).unwrap(), b"read-only");
        // A reset puts the master's rights back.
        assert!(fork.protect_user(area, area + 2 * P, NONE_));
        assert!(fork.protect_user(area + 3 * P, area + 4 * P, RW_));
        fork.map_user(area + 6 * P, area + 7 * P, RW_);
        assert_eq!(rights(&fork), "-- -- rw rw rw rw rw --");
        fork.reset().unwrap();
        // Only what differs changed, at once: nothing was lifted (an
        // `mprotect` costs the guest more than its range, on PVM).
        assert_eq!(rights(&fork), "rw r- rw -- rw rw -- --");
        fork.reprotect();
        assert_eq!(rights(&fork), "rw r- rw -- rw rw -- --");
        assert_eq!(fork.kernel_read(area + 3 * P, 4).unwrap(), b"host");
        fork.reprotect();
        assert_eq!(fork.protections(), m.protections());
    }
    const R: Prot = libc::PROT_READ;
    const N: Prot = libc::PROT_NONE;

    #[test]
    fn protected_ranges_are_bounded_and_rights_can_always_come_back() {
        let mut m = GuestMemory::new(64 << 20).unwrap();
        m.track_mappings();
        let area = abi::USER_BASE + (1 << 20);
        let pages = 2 * MAX_PER_MEMORY as u64 + 16;
        m.map_user(area, area + pages * P, RW_);
        let mut refused = None;
        for i in 0..pages / 2 {
            let at = area + 2 * i * P;
            if !m.protect_user(at, at + P, NONE_) {
                refused = Some(i);
                break;
            }
        }
        assert!(refused.is_some(), "mprotect is refused past the bound");
        let n = m.protections().len();
        assert!(n <= MAX_PER_MEMORY, "{n}");
        // Unmaps past the bound leave their ranges as they were (accessible).
        for i in 0..4 {
            let at = area + (pages - 1 - 2 * i) * P;
            m.unmap_user(at, at + P);
        }
        assert_eq!(host_rights(&m, area + (pages - 7) * P), "rw");
        assert_eq!(m.protections().len(), MAX_PER_MEMORY);
        assert!(n < MAX_PER_MEMORY);
        // Giving rights back works, and never adds a range.
        assert!(m.protect_user(area, area + pages * P, RW_));
        assert_eq!(m.protections().len(), 4, "the unmapped pages");
        assert_eq!(host_rights(&m, area), "rw");
    }

    #[test]
    fn changes_between_two_sets_of_rights_are_only_where_they_differ() {
        let mut from = Protections::default();
        from.set(0, 4 * P, N);
        from.set(8 * P, 10 * P, R);
        let mut to = Protections::default();
        to.set(0, 4 * P, N);
        assert!(to.changes_to(&to).is_empty(), "equal rights change nothing");
        assert_eq!(from.changes_to(&to), [(8 * P, 10 * P, RW)]);
        assert_eq!(to.changes_to(&from), [(8 * P, 10 * P, R)]);
        to.set(2 * P, 3 * P, R);
        to.set(3 * P, 5 * P, R);
        to.set(9 * P, 12 * P, N);
        assert_eq!(
            from.changes_to(&to),
            [(2 * P, 5 * P, R), (8 * P, 9 * P, RW), (9 * P, 12 * P, N)]
        );
    }

    #[test]
    fn ranges_split_and_merge() {
        let mut p = Protections::default();
        p.set(0, 4 * P, N);
        assert!(p.is(P, 2 * P, N) && !p.is(P, 2 * P, R));
        assert_eq!(p.len_after(P, 2 * P, RW), 2, "a hole splits");
        p.set(P, 2 * P, RW);
        assert_eq!(p.iter().collect::<Vec<_>>(), [(0, P, N), (2 * P, 4 * P, N)]);
        assert!(p.is(P, 2 * P, RW));
        assert_eq!(p.widen(P, 3 * P), (P, 4 * P));
        assert_eq!(p.widen(P - 1, 3 * P), (0, 4 * P));
        p.set(P, 2 * P, N);
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            [(0, 4 * P, N)],
            "merged again"
        );
        p.set(4 * P, 5 * P, N);
        p.set(5 * P, 6 * P, R);
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            [(0, 5 * P, N), (5 * P, 6 * P, R)]
        );
        assert!(p.overlaps(5 * P, 7 * P) && !p.overlaps(6 * P, 7 * P));
        p.set(0, 8 * P, RW);
        assert!(p.is_empty());
    }
}
