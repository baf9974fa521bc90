//! Which guest addresses the program has mapped, and with what rights, as
//! Linux would see them: the ELF segments, the stack, the brk heap and the
//! mmap regions. The page tables map all of RAM (PVM cannot change them
//! later), so this map is what makes a system call given an address the
//! program never mapped, or a read-only one to write into, fail with EFAULT
//! as on Linux.

use crate::abi::PAGE_SIZE;
use std::collections::BTreeMap;

/// Access rights of a mapped range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rights {
    /// Readable (not PROT_NONE).
    pub read: bool,
    /// Writable.
    pub write: bool,
}

/// Page-granular ranges: start → (end, rights); never overlapping, so
/// their ends are in order too (lookups walk back from the end of a range
/// only as far as it reaches).
#[derive(Debug, Clone, Default)]
pub struct UserMap {
    ranges: BTreeMap<u64, (u64, Rights)>,
    /// Bytes mapped accessible (not PROT_NONE): what counts against the memory limit.
    committed: u64,
}

fn down(v: u64) -> u64 {
    v & !(PAGE_SIZE - 1)
}

fn up(v: u64) -> u64 {
    v.saturating_add(PAGE_SIZE - 1) & !(PAGE_SIZE - 1)
}

impl UserMap {
    /// Maps `start..end` (rounded out to pages) with `rights`, replacing what was there.
    pub fn insert(&mut self, start: u64, end: u64, rights: Rights) {
        let (start, end) = (down(start), up(end));
        if end <= start {
            return;
        }
        self.remove(start, end);
        if rights.read {
            self.committed += end - start;
        }
        self.ranges.insert(start, (end, rights));
    }

    /// The ranges, lowest first.
    pub fn ranges(&self) -> Vec<(u64, u64, Rights)> {
        self.ranges.iter().map(|(&s, &(e, r))| (s, e, r)).collect()
    }

    /// The ranges overlapping `start..end`, clipped to it, lowest first.
    pub fn ranges_in(&self, start: u64, end: u64) -> Vec<(u64, u64, Rights)> {
        let first = self
            .ranges
            .range(..=start)
            .next_back()
            .filter(|(_, (e, _))| *e > start)
            .map(|(&s, _)| s)
            .unwrap_or(start);
        self.ranges
            .range(first..end)
            .map(|(&s, &(e, r))| (s.max(start), e.min(end), r))
            .filter(|(s, e, _)| s < e)
            .collect()
    }

    /// The rights at `addr`, if it is mapped.
    pub fn rights_at(&self, addr: u64) -> Option<Rights> {
        self.ranges
            .range(..=addr)
            .next_back()
            .filter(|(_, (e, _))| *e > addr)
            .map(|(_, &(_, r))| r)
    }

    /// Bytes mapped accessible.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// Bytes of `start..end` that are mapped but not accessible (PROT_NONE).
    pub fn reserved_in(&self, start: u64, end: u64) -> u64 {
        let (start, end) = (down(start), up(end));
        self.ranges
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > start)
            .filter(|(_, (_, r))| !r.read)
            .map(|(&s, &(e, _))| e.min(end) - s.max(start))
            .sum()
    }

    /// Unmaps `start..end` (rounded out to pages).
    pub fn remove(&mut self, start: u64, end: u64) {
        let (start, end) = (down(start), up(end));
        let hit: Vec<(u64, u64, Rights)> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > start)
            .map(|(&s, &(e, r))| (s, e, r))
            .collect();
        for (s, e, r) in hit {
            self.ranges.remove(&s);
            if r.read {
                self.committed -= e.min(end) - s.max(start);
            }
            if s < start {
                self.ranges.insert(s, (start, r));
            }
            if e > end {
                self.ranges.insert(end, (e, r));
            }
        }
    }

    /// Changes the rights of the mapped parts of `start..end`.
    pub fn protect(&mut self, start: u64, end: u64, rights: Rights) {
        let (start, end) = (down(start), up(end));
        let hit: Vec<(u64, u64)> = self
            .ranges
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > start)
            .map(|(&s, &(e, _))| (s.max(start), e.min(end)))
            .collect();
        for (s, e) in hit {
            self.insert(s, e, rights);
        }
    }

    /// Bytes from `addr` that are mapped with the wanted rights, without a gap.
    pub fn run(&self, addr: u64, write: bool) -> u64 {
        let mut at = addr;
        while let Some((_, &(end, r))) = self.ranges.range(..=at).next_back() {
            if end <= at || !r.read || (write && !r.write) {
                break;
            }
            at = end;
        }
        at - addr
    }

    /// Whether `addr..addr+len` is mapped with the wanted rights.
    pub fn covers(&self, addr: u64, len: u64, write: bool) -> bool {
        len == 0 || self.run(addr, write) >= len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RW: Rights = Rights {
        read: true,
        write: true,
    };
    const RO: Rights = Rights {
        read: true,
        write: false,
    };

    #[test]
    fn covers_follows_rights_and_gaps() {
        let mut m = UserMap::default();
        m.insert(0x40_0000, 0x40_2000, RO);
        m.insert(0x40_2000, 0x40_4000, RW);
        assert!(m.covers(0x40_0000, 0x4000, false));
        assert!(!m.covers(0x40_0000, 0x4000, true), "text is read-only");
        assert!(m.covers(0x40_2000, 0x2000, true));
        assert!(!m.covers(0x40_3000, 0x2000, false), "runs past the end");
        m.remove(0x40_1000, 0x40_3000);
        assert!(!m.covers(0x40_1800, 1, false));
        assert!(m.covers(0x40_0000, 0x1000, false));
        assert!(m.covers(0x40_3000, 0x1000, true));
        assert_eq!(m.committed(), 0x2000);
        m.protect(0x40_3000, 0x40_4000, RO);
        m.protect(
            0x40_3000,
            0x40_4000,
            Rights {
                read: false,
                write: false,
            },
        );
        assert_eq!(m.committed(), 0x1000);
        m.protect(0x40_3000, 0x40_4000, RO);
        assert!(!m.covers(0x40_3000, 1, true));
        assert!(m.covers(0x40_3000, 1, false));
    }
}
