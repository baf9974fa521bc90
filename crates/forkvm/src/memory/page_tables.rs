//! The guest page tables, built by the host before the first run.
//!
//! An identity map of all guest RAM. Each 2 MiB region whose pages all have
//! the same permissions is one large page; the others (the guest kernel area,
//! regions where ELF segments with different permissions meet) get a 4 KiB
//! page table. On PVM the host cannot change an existing entry later, so the
//! tables are complete before the first `KVM_RUN` and never edited.

use super::{Fault, GuestMemory};
use crate::abi::{self, pte, HUGE_PAGE_SIZE, PAGE_SIZE};

/// Access rights of a range of user pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Perm {
    /// Writable.
    pub write: bool,
    /// Executable.
    pub exec: bool,
}

/// A user range that needs rights other than the default (read/write/execute).
#[derive(Debug, Clone, Copy)]
pub struct Region {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Rights of its pages.
    pub perm: Perm,
}

/// Why the page tables could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PageTableError {
    /// Too many 4 KiB page tables for the reserved area.
    #[error("the program layout needs more page tables than the guest kernel area holds")]
    TooManyTables,
    /// Writing the tables failed (a layout bug).
    #[error("page table outside guest memory: {0}")]
    Fault(#[from] Fault),
}

/// Accessed and dirty, set in every present entry from the start. The guest
/// kernel never reads them, and with them set the hypervisor's page-fault
/// handler may map a faulting page's neighbours in the same exit (KVM's
/// shadow MMU prefetches only entries already marked accessed) and maps a
/// page writable on its first access instead of at its first write.
const AD: u64 = pte::ACCESSED | pte::DIRTY;

/// Rights and presence of one 4 KiB guest page, as entry flags; pages in
/// `guard` are not present (any access faults).
fn page_flags(addr: u64, regions: &[Region], guard: &std::ops::Range<u64>) -> u64 {
    let mut flags = pte::PRESENT | AD;
    if guard.contains(&addr) {
        return 0;
    }
    if addr < abi::USER_BASE {
        // The guest kernel area: supervisor only, except the syscall stub.
        return match addr {
            0 => 0, // null guard
            abi::KERNEL_CODE_ADDR => flags,
            abi::SYSCALL_STUB_ADDR => flags | pte::USER,
            abi::XSAVE_AREA_ADDR => flags | pte::USER | pte::NO_EXECUTE,
            abi::FAST_DATA_ADDR => flags | pte::USER | pte::WRITABLE | pte::NO_EXECUTE,
            abi::VDSO_ADDR => flags | pte::USER,
            _ => flags | pte::WRITABLE | pte::NO_EXECUTE,
        };
    }
    flags |= pte::USER;
    let mut matched: Option<Perm> = None;
    for r in regions {
        if addr < r.end && addr + PAGE_SIZE > r.start {
            let m = matched.get_or_insert(Perm::default());
            m.write |= r.perm.write;
            m.exec |= r.perm.exec;
        }
    }
    let perm = matched.unwrap_or(Perm {
        write: true,
        exec: true,
    });
    if perm.write {
        flags |= pte::WRITABLE;
    }
    if !perm.exec {
        flags |= pte::NO_EXECUTE;
    }
    flags
}

/// Builds the tables for `mem` with the given special `regions`; returns CR3.
pub fn build(mem: &mut GuestMemory, regions: &[Region]) -> Result<u64, PageTableError> {
    build_guarded(mem, regions, 0..0)
}

/// Like [`build`], with the pages of `guard` (page aligned) left not present:
/// the gap below the stack, so that an overflow faults as on Linux.
pub fn build_guarded(
    mem: &mut GuestMemory,
    regions: &[Region],
    guard: std::ops::Range<u64>,
) -> Result<u64, PageTableError> {
    let size = mem.size();
    let pml4 = abi::PAGE_TABLES_ADDR;
    let pdpt = pml4 + PAGE_SIZE;
    let gib = 1u64 << 30;
    let n_pd = size.div_ceil(gib);
    let mut next_table = pdpt + PAGE_SIZE + n_pd * PAGE_SIZE;
    let table_flags = pte::PRESENT | pte::WRITABLE | pte::USER | pte::ACCESSED;

    mem.kernel_write_u64(pml4, pdpt | table_flags)?;
    for i in 0..n_pd {
        let pd = pdpt + PAGE_SIZE + i * PAGE_SIZE;
        mem.kernel_write_u64(pdpt + i * 8, pd | table_flags)?;
    }
    // The 2 MiB regions a special region or the guard touches (first, last
    // index), sorted: every other user region is one uniform large page.
    // Looking only at these keeps a 32 GiB address space's 16,384 entries
    // cheap (checking each against every region cost ~0.5 ms per start).
    let mut touched: Vec<(u64, u64)> = regions
        .iter()
        .map(|r| (r.start, r.end))
        .chain(std::iter::once((guard.start, guard.end)))
        .filter(|&(s, e)| e > s)
        .map(|(s, e)| (s / HUGE_PAGE_SIZE, (e - 1) / HUGE_PAGE_SIZE))
        .collect();
    touched.sort_unstable();
    let mut next_touched = touched.iter().peekable();
    // A user region nothing special touches: read, write, execute.
    let plain = pte::PRESENT | AD | pte::USER | pte::WRITABLE | pte::HUGE;
    let mut pd_page = vec![0u8; PAGE_SIZE as usize];
    let mut page = vec![0u8; PAGE_SIZE as usize];
    for region in 0..size / HUGE_PAGE_SIZE {
        let base = region * HUGE_PAGE_SIZE;
        while next_touched.next_if(|&&(_, last)| last < region).is_some() {}
        let untouched = next_touched
            .peek()
            .is_none_or(|&&(first, _)| first > region);
        let entry = if base >= abi::USER_BASE && untouched {
            Some(base | plain)
        } else {
            let first = page_flags(base, regions, &guard);
            let uniform = base >= abi::USER_BASE
                && (1..512).all(|i| page_flags(base + i * PAGE_SIZE, regions, &guard) == first);
            match (uniform, first & pte::PRESENT != 0) {
                (true, true) => Some(base | first | pte::HUGE),
                (true, false) => Some(0),
                (false, _) => None,
            }
        };
        let entry = match entry {
            Some(e) => e,
            None => {
                if next_table + PAGE_SIZE > abi::PAGE_TABLES_END {
                    return Err(PageTableError::TooManyTables);
                }
                for i in 0..512u64 {
                    let addr = base + i * PAGE_SIZE;
                    let flags = page_flags(addr, regions, &guard);
                    let e = if flags & pte::PRESENT != 0 {
                        addr | flags
                    } else {
                        0
                    };
                    page[i as usize * 8..i as usize * 8 + 8].copy_from_slice(&e.to_le_bytes());
                }
                mem.kernel_write(next_table, &page)?;
                next_table += PAGE_SIZE;
                (next_table - PAGE_SIZE) | table_flags
            }
        };
        let at = (region % 512) as usize * 8;
        pd_page[at..at + 8].copy_from_slice(&entry.to_le_bytes());
        // A directory is written whole once its 512 entries are known.
        let last = region % 512 == 511 || region + 1 == size / HUGE_PAGE_SIZE;
        if last {
            let pd = pdpt + PAGE_SIZE + (region / 512) * PAGE_SIZE;
            let used = at + 8;
            mem.kernel_write(pd, &pd_page[..used])?;
            pd_page.fill(0);
        }
    }
    Ok(pml4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(mem: &GuestMemory, cr3: u64, va: u64) -> Option<u64> {
        let l4 = mem.kernel_read_u64(cr3 + ((va >> 39) & 511) * 8).ok()?;
        let l3 = mem
            .kernel_read_u64((l4 & 0x000f_ffff_ffff_f000) + ((va >> 30) & 511) * 8)
            .ok()?;
        let l2 = mem
            .kernel_read_u64((l3 & 0x000f_ffff_ffff_f000) + ((va >> 21) & 511) * 8)
            .ok()?;
        if l2 & pte::HUGE != 0 {
            return Some(l2);
        }
        let l1 = mem
            .kernel_read_u64((l2 & 0x000f_ffff_ffff_f000) + ((va >> 12) & 511) * 8)
            .ok()?;
        Some(l1)
    }

    #[test]
    fn identity_map_with_rights() {
        let mut mem = GuestMemory::new(8 << 20).unwrap();
        let text = Region {
            start: 0x40_1000,
            end: 0x40_3000,
            perm: Perm {
                write: false,
                exec: true,
            },
        };
        let cr3 = build(&mut mem, &[text]).unwrap();
        assert_eq!(walk(&mem, cr3, 0).unwrap() & pte::PRESENT, 0, "null page");
        let gdt = walk(&mem, cr3, abi::GDT_ADDR).unwrap();
        assert_eq!(gdt & pte::USER, 0);
        let stub = walk(&mem, cr3, abi::SYSCALL_STUB_ADDR).unwrap();
        assert_ne!(stub & pte::USER, 0);
        assert_eq!(stub & pte::WRITABLE, 0);
        let t = walk(&mem, cr3, 0x40_2000).unwrap();
        assert_eq!(t & !0xfff & !pte::NO_EXECUTE, 0x40_2000);
        assert_eq!(t & (pte::WRITABLE | pte::NO_EXECUTE), 0);
        let huge = walk(&mem, cr3, 0x60_0000).unwrap();
        assert_ne!(huge & pte::HUGE, 0);
        // Every present entry is born accessed and dirty.
        for e in [gdt, stub, t, huge] {
            assert_eq!(e & (pte::ACCESSED | pte::DIRTY), pte::ACCESSED | pte::DIRTY);
        }
        assert_eq!(huge & 0x000f_ffff_ffe0_0000, 0x60_0000);
    }

    #[test]
    fn guard_pages_are_not_present() {
        let mut mem = GuestMemory::new(8 << 20).unwrap();
        // Half of one 2 MiB region, and a whole one.
        let cr3 = build_guarded(&mut mem, &[], 0x30_0000..0x60_0000).unwrap();
        for va in [0x30_0000, 0x3f_f000, 0x40_0000, 0x5f_f000] {
            assert_eq!(walk(&mem, cr3, va).unwrap() & pte::PRESENT, 0, "{va:#x}");
        }
        for va in [0x2f_f000, 0x60_0000] {
            assert_ne!(walk(&mem, cr3, va).unwrap() & pte::PRESENT, 0, "{va:#x}");
        }
    }
}
