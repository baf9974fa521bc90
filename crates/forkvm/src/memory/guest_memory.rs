//! Guest physical memory: one host mapping, and the only place that turns a
//! guest address into host bytes.
//!
//! Guest virtual == guest physical (identity map), so a guest pointer is an
//! offset into this mapping. Every access is bounds-checked against the
//! region the guest program may touch ([`abi::USER_BASE`]..size); the guest
//! kernel area below it is reachable only through the `kernel_*` methods the
//! host uses to build and drive the guest kernel.

mod host_pages;

use super::Budget;
use crate::abi;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// A guest address the guest passed that does not name guest user memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bad guest address {addr:#x} (+{len:#x})")]
pub struct Fault {
    /// The address the guest gave.
    pub addr: u64,
    /// The length it asked for.
    pub len: u64,
}

/// Failure to reserve guest memory on the host.
#[derive(Debug, thiserror::Error)]
#[error("cannot reserve {size} bytes of guest memory: {source}")]
pub struct MapError {
    pub(super) size: u64,
    #[source]
    pub(super) source: std::io::Error,
}

impl MapError {
    /// Whether the memory did not fit the run's memory limit (or the host's).
    pub fn is_out_of_memory(&self) -> bool {
        self.source.raw_os_error() == Some(libc::ENOMEM)
    }
}

/// The host mapping that backs guest RAM: anonymous for a fresh machine, or
/// a private copy-on-write view of a [`super::Snapshot`] for a fork.
pub struct GuestMemory {
    pub(super) base: NonNull<u8>,
    pub(super) size: u64,
    /// The snapshot this memory is a private copy-on-write view of, if any.
    pub(super) snapshot: Option<std::sync::Arc<super::Snapshot>>,
    /// What the program has mapped; `None` until tracking is enabled (then
    /// user accesses outside it fault, as they would on Linux).
    pub(super) user_map: Option<super::UserMap>,
    /// For a fork: kept private pages (by offset) equal to the master's, and
    /// for how many resets; or whether a page was returned for that, or came
    /// back after (see `memory::snapshot`).
    pub(super) idle: std::collections::HashMap<u64, u8>,
    /// Most bytes the program may have mapped accessible (its memory limit).
    pub(super) commit_limit: u64,
    /// Ranges where a host file is mapped directly (start → end), shared
    /// with every other mapping of that file until written.
    pub(super) file_mapped: std::collections::BTreeMap<u64, u64>,
    /// The file-mapped ranges that are shared (`MAP_SHARED`), by start.
    pub(super) shared: std::collections::BTreeMap<u64, super::shared::SharedRange>,
    /// Private mappings of files made by mmap, by start (see `memory::shared`).
    pub(super) private_files: std::collections::BTreeMap<u64, super::shared::FileRange>,
    /// This memory's slot in [`super::bus_guard`], once a file is mapped in it.
    pub(super) bus_slot: Option<usize>,
    /// Chunks of guest RAM (bit n: the n-th [`GuestMemory::chunk_size`]
    /// bytes) the program has mapped something in, ever. Only these get a
    /// KVM memory slot: on shadow-paging hypervisors (PVM) KVM allocates and
    /// zeroes reverse maps for every page of a slot, which for an 8 GiB
    /// address space cost more than running a small program.
    pub(super) chunks: u64,
    /// The budget shared with the run's other processes, once it has any
    /// (`None`: only `commit_limit` against this memory's own mappings).
    pub(super) budget: Option<Arc<Budget>>,
    /// What this memory has charged to `budget`.
    pub(super) charged: u64,
    /// Bytes of its mappings `budget` lends it rather than charges (a vfork
    /// child's copy of its parent's mappings, until it execs, exits or
    /// forks); never more than it has mapped: `charged` + `loan` =
    /// `committed()` while it is in a budget.
    pub(super) loan: u64,
    /// Page moves ([`GuestMemory::move_pages`]) left: each splits the host
    /// mapping into more areas, of which a process may have only so many.
    pub(super) moves_left: u32,
    /// Host rights below read-write that carry the program's (see
    /// `memory::host_prot`), applied to the host mapping unless `lifted`.
    pub(super) prot: super::host_prot::Protections,
    /// How many ranges of `prot` are counted process-wide.
    pub(super) prot_counted: usize,
    /// The host mapping is read-write everywhere for now (`prot` not
    /// applied): the host is reading or writing protected guest pages, or
    /// the memory was just made; [`GuestMemory::reprotect`] applies `prot`
    /// again before the guest runs.
    pub(super) lifted: std::cell::Cell<bool>,
    /// The snapshot the last vfork child's memory was a view of, kept to be
    /// brought up to date for the next one instead of captured anew (see
    /// `Snapshot::capture_reusing`).
    pub(super) vfork_snapshot: std::cell::Cell<Option<std::sync::Arc<super::Snapshot>>>,
    /// Emptied for a copy but still holding what a finished process left
    /// in its anonymous pages (see [`GuestMemory::empty_keeping_pages`]):
    /// only [`GuestMemory::copy_from`] may take such a memory, and it
    /// overwrites or zeroes every page.
    pub(super) stale: bool,
    /// The host mapping is a private view of a snapshot's memfd (set by
    /// `remap`, kept when the snapshot is let go of, cleared when anonymous
    /// memory replaces it all): where the view holds no page of its own it
    /// shows the memfd's bytes, and `MADV_DONTNEED` brings those back.
    pub(super) view: bool,
}

/// Page moves a memory may make before mremap copies instead. A move adds
/// about two areas to the host process's mappings (its limit is ~65,000 by
/// default, shared by every VM and every guest process in it): 128 moves in
/// each of `--max-processes`' 64 processes stay far below it, and a python
/// list grown to 10⁶ entries takes 17.
pub const MAX_MOVES: u32 = 128;

/// Most memory slots a VM uses (one per chunk of guest RAM).
pub const MAX_CHUNKS: u64 = 64;

/// Size of the chunks guest RAM of `size` bytes is registered with KVM in:
/// a power of two, at least 2 MiB, at most [`MAX_CHUNKS`] of them.
pub fn chunk_size(size: u64) -> u64 {
    size.div_ceil(MAX_CHUNKS)
        .next_power_of_two()
        .max(abi::HUGE_PAGE_SIZE)
}

/// The chunks (as a bitmap) that `start..end` touches; chunk 0, the guest
/// kernel's, always.
fn chunk_bits(size: u64, start: u64, end: u64) -> u64 {
    let shift = chunk_size(size).trailing_zeros();
    let mut bits = 1;
    if end > start {
        let (first, last) = (start >> shift, (end - 1) >> shift);
        for n in first..=last.min(MAX_CHUNKS - 1) {
            bits |= 1 << n;
        }
    }
    bits
}

// SAFETY: GuestMemory owns its mapping exclusively; the raw pointer is not
// shared with other threads except through KVM, which only touches it while
// the owning thread is inside KVM_RUN.
unsafe impl Send for GuestMemory {}

impl GuestMemory {
    /// Reserves `size` bytes (a multiple of 2 MiB) of zeroed guest memory.
    pub fn new(size: u64) -> Result<Self, MapError> {
        assert!(size.is_multiple_of(abi::HUGE_PAGE_SIZE) && size > abi::USER_BASE);
        let len = usize::try_from(size).map_err(|_| MapError {
            size,
            source: std::io::Error::from_raw_os_error(libc::ENOMEM),
        })?;
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // affected. The result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(MapError {
                size,
                source: std::io::Error::last_os_error(),
            });
        }
        // No MADV_HUGEPAGE: with the usual `defrag=madvise` setting a first
        // touch would compact and zero 2 MiB synchronously, which costs more
        // than a whole small program's run. Guest page tables still use 2 MiB
        // pages; the host follows its system-wide THP policy.
        let base = NonNull::new(ptr.cast::<u8>()).ok_or(MapError {
            size,
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        })?;
        Ok(Self {
            base,
            size,
            snapshot: None,
            user_map: None,
            idle: Default::default(),
            commit_limit: size,
            file_mapped: Default::default(),
            shared: Default::default(),
            private_files: Default::default(),
            bus_slot: None,
            chunks: 1,
            budget: None,
            charged: 0,
            loan: 0,
            moves_left: MAX_MOVES,
            prot: Default::default(),
            prot_counted: 0,
            lifted: std::cell::Cell::new(false),
            stale: false,
            view: false,
            vfork_snapshot: std::cell::Cell::new(None),
        })
    }

    /// Size of guest RAM in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Host address of guest physical address 0 (for the KVM memory slot).
    pub fn host_base(&self) -> u64 {
        self.base.as_ptr() as u64
    }

    pub(super) fn check(&self, lo: u64, addr: u64, len: u64) -> Result<usize, Fault> {
        if len == 0 {
            // An empty range names no memory: valid wherever it points (as on Linux).
            return Ok(0);
        }
        let end = addr.checked_add(len).ok_or(Fault { addr, len })?;
        if addr < lo || end > self.size {
            return Err(Fault { addr, len });
        }
        Ok(addr as usize)
    }

    /// A user access: in user RAM, and mapped by the program with the rights it needs.
    /// The vDSO's page is readable too, as on Linux, where it is ordinary user
    /// memory (ld.so writes the vDSO's name straight from its string table);
    /// the program cannot write it, so neither can its system calls.
    fn check_user(&self, addr: u64, len: u64, write: bool) -> Result<usize, Fault> {
        let in_vdso = addr >= abi::VDSO_ADDR
            && addr
                .checked_add(len)
                .is_some_and(|end| end <= abi::VDSO_ADDR + abi::VDSO_SIZE);
        if !write && in_vdso {
            return self.check(abi::VDSO_ADDR, addr, len);
        }
        let start = self.check(abi::USER_BASE, addr, len)?;
        match &self.user_map {
            Some(map) if !map.covers(addr, len, write) => Err(Fault { addr, len }),
            _ => Ok(start),
        }
    }

    /// Starts checking user accesses against what the program mapped.
    pub fn track_mappings(&mut self) {
        self.user_map.get_or_insert_with(Default::default);
    }

    /// The chunks of guest RAM that need a KVM memory slot (bit n: the n-th
    /// [`chunk_size`] bytes): every chunk the program ever mapped something
    /// in, and all of them until mappings are tracked.
    pub fn chunks_in_use(&self) -> u64 {
        match self.user_map {
            Some(_) => self.chunks,
            None => chunk_bits(self.size, 0, self.size),
        }
    }

    /// Whether `addr` lies in a chunk the program maps something in. An
    /// access there that reaches the host as MMIO was made before the chunk
    /// got its memory slot: mapped by a call a poller answered while the
    /// vCPU ran (`crate::machine::exitless`), the slot is added at the next
    /// entry; KVM may split one instruction's access into several exits.
    pub fn in_used_chunk(&self, addr: u64) -> bool {
        addr < self.size && self.chunks_in_use() & chunk_bits(self.size, addr, addr + 1) & !1 != 0
    }

    /// Whether user mappings are tracked (a program's memory; not the bare
    /// memory of floors and unit tests).
    pub fn tracks_mappings(&self) -> bool {
        self.user_map.is_some()
    }

    /// Records that the program mapped `start..end` (no-op without tracking).
    pub fn map_user(&mut self, start: u64, end: u64, rights: super::Rights) {
        self.chunks |= chunk_bits(self.size, start, end);
        if let Some(m) = &mut self.user_map {
            m.insert(start, end, rights);
        }
        self.settle();
        self.sync_host(start, end);
    }

    /// Records that the program mapped `start..end` with rights the guest
    /// page tables already give it (the program's own ELF segments, built
    /// into them at load): the host mapping stays read-write there until a
    /// later change of rights.
    pub fn map_user_in_page_tables(&mut self, start: u64, end: u64, rights: super::Rights) {
        self.chunks |= chunk_bits(self.size, start, end);
        if let Some(m) = &mut self.user_map {
            m.insert(start, end, rights);
        }
        self.settle();
    }

    /// Records that the program maps `start..end`, leaving the host rights
    /// as they are until the caller's next [`Self::map_user`] of the range
    /// (mmap: read-write while the host fills it, then as asked). Host
    /// writes in between go through `kernel_*`, which lift protected pages,
    /// so the caller must not use the user accessors there meanwhile.
    pub fn map_user_deferred(&mut self, start: u64, end: u64, rights: super::Rights) {
        self.map_user_in_page_tables(start, end, rights);
    }

    /// Records that the program unmapped `start..end`: the guest can no
    /// longer reach it (PROT_NONE on the host), as on Linux.
    pub fn unmap_user(&mut self, start: u64, end: u64) {
        if let Some(m) = &mut self.user_map {
            m.remove(start, end);
        }
        self.settle();
        self.sync_host(start, end);
    }

    /// The user part of `start..end`, rounded out to pages; `None` when it
    /// is empty or mappings are not tracked (nothing is enforced then).
    fn host_range(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        self.user_map.as_ref()?;
        let from = start.max(abi::USER_BASE) & !(abi::PAGE_SIZE - 1);
        let to = end
            .min(self.size)
            .checked_next_multiple_of(abi::PAGE_SIZE)?
            .min(self.size);
        (to > from).then_some((from, to))
    }

    /// Makes the host rights of `start..end` those the program has there
    /// (see `memory::host_prot`): read-write, read-only, or none where it
    /// is PROT_NONE or unmapped.
    fn sync_host(&mut self, start: u64, end: u64) {
        let Some((from, to)) = self.host_range(start, end) else {
            return;
        };
        let Some(map) = &self.user_map else { return };
        let mut pieces: Vec<(u64, u64, super::host_prot::Prot)> = Vec::new();
        let mut at = from;
        for (s, e, r) in map.ranges_in(from, to) {
            if s > at {
                pieces.push((at, s, libc::PROT_NONE));
            }
            pieces.push((s, e, super::host_prot::prot_of(r)));
            at = e;
        }
        if at < to {
            pieces.push((at, to, libc::PROT_NONE));
        }
        for (s, e, p) in pieces {
            self.set_host(s, e, p);
        }
    }

    /// Gives `start..end` host rights `prot` (bookkeeping, and the host
    /// mapping unless lifted). Past the bounds on protected ranges, taking
    /// rights away is skipped (the program's accesses there are then not
    /// caught, never wrongly refused) and giving rights back covers whole
    /// ranges (which never adds one).
    fn set_host(&mut self, start: u64, end: u64, prot: super::host_prot::Prot) {
        use super::host_prot::{in_process, MAX_IN_PROCESS, MAX_PER_MEMORY, RW};
        if self.prot.is(start, end, prot) {
            return;
        }
        let (mut start, mut end) = (start, end);
        let after = self.prot.len_after(start, end, prot);
        let now = self.prot.len();
        if after > now && (after > MAX_PER_MEMORY || in_process() + (after - now) > MAX_IN_PROCESS)
        {
            if prot != RW {
                tracing::debug!(
                    "{start:#x}..{end:#x} keeps its host rights: too many protected ranges"
                );
                return;
            }
            (start, end) = self.prot.widen(start, end);
        }
        self.prot.set(start, end, prot);
        self.recount_prot();
        if !self.lifted.get() && !self.host_protect(start, end, prot) {
            // The host refused (its own limit on areas): the range stays
            // read-write, so nothing the program may do faults.
            self.prot.set(start, end, RW);
            self.recount_prot();
            self.host_protect(start, end, RW);
        }
    }

    /// Brings the process-wide count of protected ranges up to date.
    pub(super) fn recount_prot(&mut self) {
        super::host_prot::recount(self.prot_counted, self.prot.len());
        self.prot_counted = self.prot.len();
    }

    /// `mprotect`s the host range behind guest `start..end` (in the mapping).
    fn host_protect(&self, start: u64, end: u64, prot: super::host_prot::Prot) -> bool {
        if start >= end || end > self.size {
            return false;
        }
        // SAFETY: `start..end` lies inside our own mapping (checked above);
        // changing its rights affects no Rust reference: the host reads and
        // writes guest memory only through `kernel_*` (which lift the
        // rights first) or the user accessors, which the program's rights
        // (never more than these) already allow.
        let rc = unsafe {
            libc::mprotect(
                self.base.as_ptr().add(start as usize).cast(),
                (end - start) as usize,
                prot,
            )
        };
        if rc != 0 {
            tracing::debug!(
                "mprotect of guest {start:#x}..{end:#x}: {}",
                std::io::Error::last_os_error()
            );
        }
        rc == 0
    }

    /// Makes the whole host mapping read-write for the host's own access
    /// (a fork's copy, a snapshot, a reset, gdb, a crash report), until
    /// [`Self::reprotect`] before the guest runs again.
    pub(super) fn lift(&self) {
        if self.lifted.get() {
            return;
        }
        for (s, e, _) in self.prot.iter() {
            self.host_protect(s, e, super::host_prot::RW);
        }
        self.lifted.set(true);
    }

    /// Lifts the rights if `addr..addr+len` has protected pages (for a
    /// read, pages the host cannot read).
    fn open(&self, addr: u64, len: u64, write: bool) {
        if self.lifted.get() || len == 0 {
            return;
        }
        let end = addr.saturating_add(len);
        let closed = if write {
            self.prot.overlaps(addr, end)
        } else {
            self.prot.unreadable_in(addr, end)
        };
        if closed {
            self.lift();
        }
    }

    /// Applies the program's rights to the host mapping again after they
    /// were lifted; called before every entry into the guest (cheap when
    /// nothing was lifted).
    pub fn reprotect(&mut self) {
        if !self.lifted.get() {
            return;
        }
        self.lifted.set(false);
        let ranges: Vec<_> = self.prot.iter().collect();
        for (s, e, p) in ranges {
            self.protect_or_open(s, e, p);
        }
        self.recount_prot();
    }

    /// Applies host rights `p` to `s..e`, as the bookkeeping already says;
    /// a range the host would not protect is read-write instead, in both.
    fn protect_or_open(&mut self, s: u64, e: u64, p: super::host_prot::Prot) {
        if !self.host_protect(s, e, p) {
            self.prot.set(s, e, super::host_prot::RW);
            self.host_protect(s, e, super::host_prot::RW);
        }
    }

    /// Takes `prot` as this memory's host rights (a child's copy, a reset
    /// to a snapshot): the host mapping is left read-write here (lifted)
    /// and gets them at the next [`Self::reprotect`].
    pub(super) fn adopt_prot(&mut self, prot: super::host_prot::Protections) {
        self.lift();
        self.prot = prot;
        self.recount_prot();
    }

    /// Takes `prot` as this memory's host rights (a reset to its snapshot),
    /// changing on the host only the pieces where they differ. Every host
    /// `mprotect` makes KVM drop shadow entries beyond its range (on PVM,
    /// those of the whole 2 MiB around it: the request then faults again on
    /// every page it uses there), so rights that stay the same are left
    /// alone; lifting them all and putting them back, as a reset did,
    /// cost that for every protected range.
    pub(super) fn take_prot(&mut self, prot: super::host_prot::Protections) {
        if self.lifted.get() {
            // Read-write everywhere now: the rights go on at the next entry.
            self.adopt_prot(prot);
            return;
        }
        let changes = self.prot.changes_to(&prot);
        self.prot = prot;
        for (s, e, p) in changes {
            self.protect_or_open(s, e, p);
        }
        self.recount_prot();
    }

    /// Forgets the host rights of `start..end` after the host mapping
    /// there was replaced (a fresh mapping is read-write).
    pub(super) fn forget_prot(&mut self, start: u64, end: u64) {
        if self.prot.overlaps(start, end) {
            let (from, to) = (
                start & !(abi::PAGE_SIZE - 1),
                end.next_multiple_of(abi::PAGE_SIZE),
            );
            self.prot.set(from, to, super::host_prot::RW);
            self.recount_prot();
            if !self.lifted.get() {
                // Other pages may be protected still: put back the rest.
                self.sync_host(from, to);
            }
        }
    }

    /// The host rights (bookkeeping) of this memory.
    pub fn protections(&self) -> &super::host_prot::Protections {
        &self.prot
    }

    /// Whether the program's memory rights are currently in force on the
    /// host for `addr`: what a guest access there that made KVM fail
    /// lacked. `Some((read, write))` where the program mapped it, `None`
    /// where it did not.
    pub fn user_rights_at(&self, addr: u64) -> Option<super::Rights> {
        self.user_map.as_ref()?.rights_at(addr)
    }

    /// Whether the program may access `addr..addr+len` (for writing if
    /// `write`) by its own rights; always where mappings are not tracked.
    pub fn allows(&self, addr: u64, len: u64, write: bool) -> bool {
        match &self.user_map {
            Some(map) => map.covers(addr, len, write),
            None => true,
        }
    }

    /// Whether part of `addr..addr+len` is protected on the host now (a
    /// host access there would lift every protection until the next entry).
    pub fn host_protected(&self, addr: u64, len: u64) -> bool {
        !self.lifted.get() && self.prot.overlaps(addr, addr.saturating_add(len))
    }

    /// Whether the host enforces any of the program's rights now.
    pub fn enforces_rights(&self) -> bool {
        !self.prot.is_empty()
    }

    /// What the program has mapped: (start, end, rights), lowest first.
    pub fn user_mappings(&self) -> Vec<(u64, u64, super::Rights)> {
        self.user_map.as_ref().map_or_else(Vec::new, |m| m.ranges())
    }

    /// Bytes the program has mapped accessible.
    pub fn committed(&self) -> u64 {
        self.user_map.as_ref().map_or(0, |m| m.committed())
    }

    /// The program's memory limit.
    pub fn commit_limit(&self) -> u64 {
        self.commit_limit
    }

    /// Bytes of `start..end` mapped PROT_NONE (which mprotect would make count).
    pub fn reserved_in(&self, start: u64, end: u64) -> u64 {
        self.user_map
            .as_ref()
            .map_or(0, |m| m.reserved_in(start, end))
    }

    /// Sets the memory limit (accessible mappings), which may be below the RAM size.
    pub fn set_commit_limit(&mut self, limit: u64) {
        self.commit_limit = limit;
    }

    /// Records new rights for the mapped parts of `start..end`, and
    /// enforces them; false, with nothing changed, when this memory has
    /// as many protected ranges as it may have (ENOMEM, as Linux past its
    /// own limit on mappings).
    pub fn protect_user(&mut self, start: u64, end: u64, rights: super::Rights) -> bool {
        use super::host_prot::{in_process, MAX_IN_PROCESS, MAX_PER_MEMORY};
        if rights.write && self.user_map.is_some() {
            // Giving rights: always possible.
        } else if self.user_map.is_some()
            && (self.prot.len() + 2 > MAX_PER_MEMORY || in_process() + 2 > MAX_IN_PROCESS)
        {
            return false;
        }
        if let Some(m) = &mut self.user_map {
            m.protect(start, end, rights);
        }
        self.settle();
        self.sync_host(start, end);
        true
    }

    fn whole(&self) -> &[u8] {
        // SAFETY: the mapping is `size` bytes, readable, and lives as long as
        // self. The guest only runs while the owning thread is inside KVM_RUN,
        // which needs `&mut` access to the VM, so no guest write races this.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.size as usize) }
    }

    fn whole_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `whole`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr(), self.size as usize) }
    }

    /// Guest user memory at `addr..addr+len`, or a fault.
    pub fn read(&self, addr: u64, len: u64) -> Result<&[u8], Fault> {
        let start = self.check_user(addr, len, false)?;
        Ok(&self.whole()[start..start + len as usize])
    }

    /// Writable guest user memory at `addr..addr+len`, or a fault.
    pub fn slice_mut(&mut self, addr: u64, len: u64) -> Result<&mut [u8], Fault> {
        let start = self.check_user(addr, len, true)?;
        Ok(&mut self.whole_mut()[start..start + len as usize])
    }

    /// Copies `data` into guest user memory at `addr`.
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.slice_mut(addr, data.len() as u64)?
            .copy_from_slice(data);
        Ok(())
    }

    /// Reads a little-endian u64 from guest user memory.
    pub fn read_u64(&self, addr: u64) -> Result<u64, Fault> {
        let b = self.read(addr, 8)?;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| Fault { addr, len: 8 })?,
        ))
    }

    /// Reads a little-endian u32 from guest user memory.
    pub fn read_u32(&self, addr: u64) -> Result<u32, Fault> {
        let b = self.read(addr, 4)?;
        Ok(u32::from_le_bytes(
            b.try_into().map_err(|_| Fault { addr, len: 4 })?,
        ))
    }

    /// Writes a little-endian u64 to guest user memory.
    pub fn write_u64(&mut self, addr: u64, v: u64) -> Result<(), Fault> {
        self.write(addr, &v.to_le_bytes())
    }

    /// Writes a little-endian u32 to guest user memory.
    pub fn write_u32(&mut self, addr: u64, v: u32) -> Result<(), Fault> {
        self.write(addr, &v.to_le_bytes())
    }

    /// Reads a NUL-terminated string of at most `max` bytes (without the NUL).
    pub fn read_cstr(&self, addr: u64, max: u64) -> Result<&[u8], Fault> {
        let start = self.check_user(addr, 1, false)?;
        let mut avail = (self.size as usize - start).min((max as usize).saturating_add(1));
        if let Some(map) = &self.user_map {
            avail = avail.min(map.run(addr, false) as usize);
        }
        let bytes = &self.whole()[start..start + avail];
        match bytes.iter().position(|&b| b == 0) {
            Some(n) => Ok(&bytes[..n]),
            None => Err(Fault {
                addr,
                len: avail as u64,
            }),
        }
    }

    /// Fills guest user memory with zeroes.
    pub fn zero(&mut self, addr: u64, len: u64) -> Result<(), Fault> {
        self.slice_mut(addr, len)?.fill(0);
        Ok(())
    }

    /// Host-only access to the guest kernel area and everything else.
    pub fn kernel_write(&mut self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        let start = self.check(0, addr, data.len() as u64)?;
        self.open(addr, data.len() as u64, true);
        self.whole_mut()[start..start + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Host-only mutable access to any guest memory (kernel area included).
    pub fn kernel_slice_mut(&mut self, addr: u64, len: u64) -> Result<&mut [u8], Fault> {
        let start = self.check(0, addr, len)?;
        self.open(addr, len, true);
        Ok(&mut self.whole_mut()[start..start + len as usize])
    }

    /// Host-only read of any guest memory (kernel area included).
    pub fn kernel_read(&self, addr: u64, len: u64) -> Result<&[u8], Fault> {
        let start = self.check(0, addr, len)?;
        self.open(addr, len, false);
        Ok(&self.whole()[start..start + len as usize])
    }

    /// Host-only u64 read of any guest memory.
    pub fn kernel_read_u64(&self, addr: u64) -> Result<u64, Fault> {
        let b = self.kernel_read(addr, 8)?;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| Fault { addr, len: 8 })?,
        ))
    }

    /// A u64 of guest memory the vCPU may read and write while the host does
    /// (the exitless call slot), for atomic host access. `None` when `addr`
    /// is not 8-aligned or not inside guest RAM.
    pub fn kernel_atomic_u64(&self, addr: u64) -> Option<&AtomicU64> {
        if !addr.is_multiple_of(8) {
            return None;
        }
        let start = self.check(0, addr, 8).ok()?;
        // SAFETY: `start + 8` is within the mapping (checked above), so the
        // offset stays inside one allocation.
        let ptr = unsafe { self.base.as_ptr().add(start) } as *const AtomicU64;
        // SAFETY: the 8 bytes are inside the mapping, which lives as long as
        // `self` (the borrow of the result); they are 8-aligned (the base is
        // page-aligned and `addr` is a multiple of 8), and AtomicU64 has the
        // layout of u64. Other writers (the guest, through KVM) use the CPU's
        // own atomic accesses to the same location, as the host does through
        // the atomic.
        Some(unsafe { &*ptr })
    }

    /// Host-only u64 write to any guest memory.
    pub fn kernel_write_u64(&mut self, addr: u64, v: u64) -> Result<(), Fault> {
        self.kernel_write(addr, &v.to_le_bytes())
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        self.leave_budget();
        super::host_prot::recount(self.prot_counted, 0);
        if let Some(slot) = self.bus_slot.take() {
            super::bus_guard::unregister(slot);
        }
        // SAFETY: base/size describe the mapping created in `new`, unmapped once.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.size as usize) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked() {
        let mut m = GuestMemory::new(4 << 20).unwrap();
        assert!(m.read(0, 1).is_err(), "null page");
        assert!(m.read(abi::GDT_ADDR, 8).is_err(), "kernel area");
        assert!(m.read(4 << 20, 1).is_err(), "past the end");
        assert!(m.read(u64::MAX - 3, 8).is_err(), "overflow");
        assert!(m.read((4 << 20) - 8, 8).is_ok());
        m.write(abi::USER_BASE, b"hi\0").unwrap();
        assert_eq!(m.read_cstr(abi::USER_BASE, 10).unwrap(), b"hi");
        m.write((4 << 20) - 2, b"xy").unwrap();
        assert!(
            m.read_cstr((4 << 20) - 2, 10).is_err(),
            "unterminated at end"
        );
        assert_eq!(
            m.read_cstr((4 << 20) - 2, 1),
            Err(Fault {
                addr: (4 << 20) - 2,
                len: 2
            })
        );
        m.discard(abi::USER_BASE, abi::PAGE_SIZE).unwrap();
        assert_eq!(m.read(abi::USER_BASE, 3).unwrap(), &[0, 0, 0]);
    }
}
