//! Memory-management syscalls: brk, mmap, munmap, mremap, mprotect, madvise.
//!
//! All guest RAM is mapped by the page tables from the start (the host
//! cannot edit entries later on PVM), so these calls are accounting in
//! [`crate::memory::AddressSpace`] plus zeroing: freed pages are returned to
//! the host with MADV_DONTNEED and read as zero when handed out again.
//! Rights (mprotect, PROT_NONE, unmapped ranges) are enforced on the host
//! mapping behind guest RAM (`memory::host_prot`).

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::abi::PAGE_SIZE;
use crate::memory::{GuestMemory, Label, Rights};
use std::os::fd::AsFd;

const PROT_EXEC_READ_WRITE: u64 = 0x7;
const RW: Rights = Rights {
    read: true,
    write: true,
};
const MAP_SHARED: u64 = 0x01;
const MAP_PRIVATE: u64 = 0x02;
const MAP_FIXED: u64 = 0x10;
const MAP_ANONYMOUS: u64 = 0x20;
const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
const MAP_HUGETLB: u64 = 0x4_0000;
const MREMAP_MAYMOVE: u64 = 1;
const MREMAP_FIXED: u64 = 2;
const MADV_DONTNEED: u64 = 4;
const MADV_WIPEONFORK: u64 = 18;
const MADV_KEEPONFORK: u64 = 19;
/// Freed ranges up to this size keep their pages (zeroed when reused).
const KEEP_FREED: u64 = 256 << 10;

fn page_up(v: u64) -> Result<u64, Errno> {
    v.checked_add(PAGE_SIZE - 1)
        .map(|x| x & !(PAGE_SIZE - 1))
        .ok_or(Errno::ENOMEM)
}

fn aligned(v: u64) -> Result<(), Errno> {
    if v.is_multiple_of(PAGE_SIZE) {
        Ok(())
    } else {
        Err(Errno::EINVAL)
    }
}

/// Zeroes the parts of `addr..addr+len` that lie in guest user memory.
fn discard(mem: &mut GuestMemory, addr: u64, len: u64) {
    let end = addr.saturating_add(len).min(mem.size());
    let start = addr.max(crate::abi::USER_BASE);
    if end > start {
        // In range by construction; a failure would only mean nothing to zero.
        let _ = mem.discard(start, end - start);
    }
}

/// Whether `fd` names a file that can back a private mapping.
fn check_mappable(p: &Process, fd: u64) -> Result<(), Errno> {
    p.fds
        .check_mappable(i32::try_from(fd).map_err(|_| Errno::EBADF)?)
}

/// Copies the file behind `fd` from `off` into `buf` (zero past its end).
fn read_file_into(p: &mut Process, fd: u64, buf: &mut [u8], off: u64) -> Result<(), Errno> {
    p.fds
        .read_at_for_mmap(i32::try_from(fd).map_err(|_| Errno::EBADF)?, buf, off)
}

/// Zeroes pages in place, keeping them mapped (no fault on the next touch);
/// pages the program protected are discarded instead (V8 frees pages with
/// PROT_NONE and MADV_DONTNEED: writing them would lift every protection).
fn zero_kept(mem: &mut GuestMemory, addr: u64, len: u64) {
    if mem.host_protected(addr, len) {
        discard(mem, addr, len);
    } else if let Ok(b) = mem.kernel_slice_mut(addr, len) {
        b.fill(0);
    }
}

/// Largest mapping or heap growth populated as it is made (see
/// [`GuestMemory::populate`]): at this size programs use what they map
/// (python's 1 MiB arenas, malloc's heap steps, a library's data);
/// larger ranges are often touched sparsely, and a large file mapped
/// writable would be read whole. `python3 -c pass` takes 444 guest page
/// faults instead of 757, and a loop building 10⁶ strings 4,700 instead of
/// 18,700.
const POPULATE_MAX: u64 = 1 << 20;

/// Populates `addr..addr+len` if it is no larger than [`POPULATE_MAX`].
fn populate_small(mem: &mut GuestMemory, addr: u64, len: u64) {
    if len <= POPULATE_MAX {
        mem.populate(addr, len);
    }
}

/// Implements brk(2).
fn sys_brk(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let old = p.mm.brk;
    if a[0] > old && !mem.may_commit(page_up(a[0])?.saturating_sub(page_up(old)?)) {
        return Ok(old); // over the memory limit: brk fails as on Linux (unchanged break)
    }
    let new = p.mm.set_brk(a[0]);
    let (from, to) = (page_up(new.min(old))?, page_up(new.max(old))?);
    if new < old {
        // Shrinking: the released pages must read as zero if the heap grows again.
        if to > from {
            discard(mem, from, to - from);
        }
        mem.unmap_user(from, to);
    } else if new > old && to > from {
        // Only the new pages: what the program unmapped or mapped over in
        // the heap before keeps its state, as on Linux.
        mem.map_user(from, to, RW);
        populate_small(mem, from, to - from);
    }
    Ok(new)
}

/// Implements mmap(2).
/// The hint of a non-fixed mmap, rounded down to a page, if `len` bytes are free there.
fn free_hint(p: &Process, addr: u64, len: u64) -> Option<u64> {
    let at = addr & !(PAGE_SIZE - 1);
    let end = at.checked_add(len)?;
    let free =
        at != 0 && p.mm.fixed_ok(at, len) && !p.mm.mappings().any(|(s, l)| s < end && s + l > at);
    free.then_some(at)
}

fn sys_mmap(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [addr, len, prot, flags, fd, off] = *a;
    if len == 0 || prot & !PROT_EXEC_READ_WRITE != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & (MAP_SHARED | MAP_PRIVATE) == 0 {
        return Err(Errno::EINVAL);
    }
    let len = page_up(len)?;
    if len > mem.size() {
        return Err(Errno::ENOMEM);
    }
    if prot != 0 && !mem.may_commit(len) {
        return Err(Errno::ENOMEM);
    }
    let anonymous = flags & MAP_ANONYMOUS != 0;
    if anonymous && flags & MAP_HUGETLB != 0 {
        // No huge pages for the guest, as on a host whose pool is empty
        // (vm.nr_hugepages 0, the default): programs fall back to ordinary
        // pages (PHP's opcache, whose huge mapping is a MAP_FIXED at an
        // address it rounded up, over whatever it did not reserve).
        return Err(Errno::ENOMEM);
    }
    // MAP_SHARED (or MAP_SHARED_VALIDATE): written through to the file, or
    // shared with forked children. A read-only one of a file is the file
    // mapped copy-on-write (nothing writes through it), which shows its
    // changes; of /dev/zero, private zeroes.
    let shared_flag = flags & (MAP_SHARED | MAP_PRIVATE) != MAP_PRIVATE;
    let mut shared = None;
    if !anonymous {
        aligned(off)?;
        // Validate the fd before taking address space.
        check_mappable(p, fd)?;
        if flags & MAP_HUGETLB != 0 {
            return Err(Errno::EINVAL); // not a hugetlbfs file
        }
        let fd = i32::try_from(fd).map_err(|_| Errno::EBADF)?;
        if shared_flag && prot & 2 != 0 {
            shared = Some(match p.fds.host_file_for_shared_mmap(fd)? {
                Some((fd, _)) => Share::File {
                    fd,
                    read_only: false,
                },
                None => Share::Anonymous,
            });
        } else if shared_flag {
            shared = p.fds.host_file_for_mmap(fd).map(|(fd, _)| Share::File {
                fd,
                read_only: true,
            });
        }
    } else if shared_flag {
        shared = Some(Share::Anonymous);
    }
    let start = if flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0 && p.mm.in_heap(addr, len) {
        aligned(addr)?;
        if flags & MAP_FIXED_NOREPLACE != 0 {
            return Err(Errno::EEXIST); // the heap is there
        }
        addr
    } else if flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0 {
        aligned(addr)?;
        if !p.mm.fixed_ok(addr, len) {
            return Err(Errno::ENOMEM);
        }
        if flags & MAP_FIXED_NOREPLACE != 0
            && p.mm.mappings().any(|(s, l)| s < addr + len && s + l > addr)
        {
            return Err(Errno::EEXIST);
        }
        p.mm.insert_fixed(addr, len);
        addr
    } else if let Some(at) = free_hint(p, addr, len) {
        // A hint is honoured when the range is free, as Linux does (runtimes
        // such as Go and V8 ask for addresses and retry when they differ).
        p.mm.insert_fixed(at, len);
        at
    } else {
        p.mm.alloc(len).ok_or(Errno::ENOMEM)?
    };
    let rights = Rights {
        read: prot != 0,
        write: prot & 2 != 0,
    };
    // Writable while the host fills it; then as asked. The host rights
    // follow only at the end (a library segment mapped over a read-only
    // reservation would otherwise be made read-write and read-only again),
    // except where the host populates fresh anonymous memory, which needs
    // them first.
    if anonymous && rights.write {
        mem.map_user(start, start + len, RW);
    } else {
        mem.map_user_deferred(start, start + len, RW);
    }
    // Fresh anonymous memory reads as zero; freed pages were discarded when
    // freed, but a fixed mapping may replace live data.
    if flags & MAP_FIXED != 0 || !anonymous {
        discard(mem, start, len);
    }
    for (s, l) in p.mm.take_dirty(start, len) {
        zero_kept(mem, s, l);
    }
    let heap = p.mm.in_heap(start, len);
    if !heap {
        label(
            p,
            start,
            len,
            prot,
            shared_flag,
            (!anonymous).then_some((fd, off)),
        );
    }
    if shared.is_some_and(|what| share(mem, start, len, off, what)) {
        mem.map_user(start, start + len, rights);
        return Ok(start);
    }
    if !anonymous {
        // The pages the file covers, its last partial one too, are mapped
        // from the host's page cache (shared between VMs; until written,
        // they show the file's changes, as on Linux); what lies past the
        // end of the file is copied (zero-filled).
        let host = p
            .fds
            .host_file_for_mmap(i32::try_from(fd).map_err(|_| Errno::EBADF)?);
        let direct = host
            .as_ref()
            .and_then(|(hfd, size)| {
                let inside = size
                    .saturating_sub(off)
                    .next_multiple_of(PAGE_SIZE)
                    .min(len);
                (inside > 0 && mem.map_file(start, inside, hfd.as_fd(), off)).then_some(inside)
            })
            .unwrap_or(0);
        // A writable private file mapping (a library's data) is written
        // where it is used: copy it now, so that its faults can be batched.
        if rights.write && flags & MAP_PRIVATE != 0 && direct > 0 {
            populate_small(mem, start, direct);
        }
        let buf = mem.kernel_slice_mut(start + direct, len - direct)?;
        if let Err(e) = read_file_into(p, fd, buf, off + direct) {
            p.mm.remove(start, len);
            mem.unmap_user(start, start + len);
            return Err(e);
        }
        if let Some((hfd, _)) = host {
            // For MADV_DONTNEED, which reads the file again.
            mem.note_private_file(start, len, hfd, off);
        }
    }
    if anonymous && rights.write {
        populate_small(mem, start, len);
    }
    mem.map_user(start, start + len, rights);
    Ok(start)
}

/// Labels a new mapping for `/proc/self/maps` (see `memory::labels`):
/// executable or not, shared or private, and the file `fd` maps from `off`.
fn label(p: &mut Process, start: u64, len: u64, prot: u64, shared: bool, file: Option<(u64, u64)>) {
    let file = file.and_then(|(fd, off)| {
        let f = p.fds.get(i32::try_from(fd).ok()?).ok()?;
        let f = super::fdtable::lock(&f);
        match &f.kind {
            super::fdtable::FileKind::File { fd, path } => {
                let st = rustix::fs::fstat(fd).ok()?;
                Some((path.clone(), st.st_dev, st.st_ino, off))
            }
            _ => None,
        }
    });
    let (file, offset) = match file {
        Some((path, dev, ino, off)) => (Some(p.mm.labels.file(&path, dev, ino)), off),
        None => (None, 0),
    };
    let label = Label {
        exec: prot & 4 != 0,
        shared,
        file,
        offset,
    };
    p.mm.labels.set(start, start.saturating_add(len), label);
}

/// What a shared mapping maps.
enum Share {
    /// The program's file (a duplicate of its host descriptor); a
    /// read-only mapping is copy-on-write (see [`crate::memory::SharedRange`]).
    File {
        fd: std::os::fd::OwnedFd,
        read_only: bool,
    },
    /// `MAP_ANONYMOUS` or /dev/zero: a new memfd.
    Anonymous,
}

/// Maps `start..start+len` shared (see [`crate::memory::SharedRange`]):
/// the file from `off`, over the whole range (pages past its end become the
/// file's when it grows; until then, accessing them is SIGBUS, as on
/// Linux), or a new memfd. False when the memory cannot share (a fork's, or
/// the host refused): the caller maps privately then, and the program's
/// writes stay in this process.
fn share(mem: &mut GuestMemory, start: u64, len: u64, off: u64, what: Share) -> bool {
    let done = match what {
        Share::File { fd, read_only } => {
            let fd = std::sync::Arc::new(fd);
            if read_only {
                mem.map_shared_read_only(start, len, fd, off)
            } else {
                mem.map_shared(start, len, fd, off, false)
            }
        }
        Share::Anonymous => crate::memory::anonymous_backing(len)
            .is_ok_and(|b| mem.map_shared(start, len, b, 0, true)),
    };
    if !done {
        tracing::debug!(
            "a MAP_SHARED mapping at {start:#x} is private to this process (its memory cannot share: a fork's)"
        );
    }
    done
}

/// Implements munmap(2).
fn sys_munmap(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [addr, len, ..] = *a;
    aligned(addr)?;
    if len == 0 {
        return Err(Errno::EINVAL);
    }
    let len = page_up(len)?;
    addr.checked_add(len).ok_or(Errno::EINVAL)?;
    unmap(p, mem, addr, len);
    // A SysV shared memory segment mapped there whole is detached, as on Linux.
    p.shm.unmapped(addr, len);
    Ok(0)
}

/// Unmaps `addr..addr+len` (page aligned, checked): its pages are freed and
/// the range faults afterwards.
pub(super) fn unmap(p: &mut Process, mem: &mut GuestMemory, addr: u64, len: u64) {
    // A file or shared mapping goes at once (a freed range kept for reuse
    // below would otherwise be zeroed through to the file).
    if addr >= crate::abi::USER_BASE && addr + len <= mem.size() {
        mem.unmap_files(addr, len);
    }
    let overlapping: Vec<(u64, u64)> =
        p.mm.mappings()
            .filter(|(s, l)| *s < addr + len && s + l > addr)
            .collect();
    for (s, l) in overlapping {
        let from = s.max(addr);
        let to = (s + l).min(addr + len);
        if to - from <= KEEP_FREED {
            p.mm.add_dirty(from, to - from);
        } else {
            discard(mem, from, to - from);
        }
    }
    p.mm.remove(addr, len);
    mem.unmap_user(addr, addr + len);
}

/// Maps `len` bytes (a page multiple) of the host object `backing` shared,
/// from its start, at `at` (replacing what is there) or where there is room:
/// a SysV shared memory attach (`sysv_shm`). A memory that cannot share (a
/// fork's view of a snapshot) gets a private copy of what `backing` holds.
pub(super) fn map_shared_object(
    p: &mut Process,
    mem: &mut GuestMemory,
    at: Option<u64>,
    len: u64,
    backing: std::sync::Arc<std::os::fd::OwnedFd>,
    rights: Rights,
) -> Result<u64, Errno> {
    if len == 0 || len > mem.size() || !mem.may_commit(len) {
        return Err(Errno::ENOMEM);
    }
    let start = match at {
        Some(addr) if p.mm.in_heap(addr, len) => addr,
        Some(addr) => {
            if !p.mm.fixed_ok(addr, len) {
                return Err(Errno::ENOMEM);
            }
            p.mm.insert_fixed(addr, len);
            addr
        }
        None => p.mm.alloc(len).ok_or(Errno::ENOMEM)?,
    };
    mem.map_user_deferred(start, start + len, RW);
    if at.is_some() {
        mem.unmap_files(start, len);
        discard(mem, start, len);
    }
    for (s, l) in p.mm.take_dirty(start, len) {
        zero_kept(mem, s, l);
    }
    // Not `anonymous`: the object never grows, so an mremap past its end
    // finds no pages there (SIGBUS), as on Linux.
    if !mem.map_shared(start, len, backing.clone(), 0, false) {
        tracing::debug!(
            "a SysV shared memory attach at {start:#x} is a private copy (its memory cannot share: a fork's)"
        );
        let buf = mem.kernel_slice_mut(start, len)?;
        let mut done = 0;
        while done < buf.len() {
            match rustix::io::pread(&*backing, &mut buf[done..], done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        buf[done..].fill(0);
    }
    mem.map_user(start, start + len, rights);
    Ok(start)
}

/// Implements mremap(2).
fn sys_mremap(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [old, old_len, new_len, flags, _new_addr, _] = *a;
    aligned(old)?;
    if new_len == 0 || flags & !(MREMAP_MAYMOVE | MREMAP_FIXED) != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & MREMAP_FIXED != 0 {
        return Err(Errno::EINVAL);
    }
    let old_len = page_up(old_len)?;
    let new_len = page_up(new_len)?;
    if p.mm.mapping_at(old).is_none() {
        return Err(Errno::EFAULT);
    }
    if new_len > old_len && !mem.may_commit(new_len - old_len) {
        return Err(Errno::ENOMEM);
    }
    if new_len > old_len {
        if let Some((s, r)) = mem.shared_at(old).filter(|(_, r)| r.end >= old + old_len) {
            return remap_shared(p, mem, old, old_len, new_len, flags, s, r);
        }
    }
    if new_len <= old_len {
        discard(mem, old + new_len, old_len - new_len);
        p.mm.remove(old + new_len, old_len - new_len);
        mem.unmap_user(old + new_len, old + old_len);
        return Ok(old);
    }
    // The mapping keeps its rights wherever it goes and however far it grows.
    let rights = mem.user_rights_at(old).unwrap_or(RW);
    if p.mm.mapping_at(old) == Some(old_len) && p.mm.grow_in_place(old, new_len) {
        grow_label(p, old, old_len, new_len);
        mem.map_user(old, old + new_len, RW);
        for (s, l) in p.mm.take_dirty(old + old_len, new_len - old_len) {
            zero_kept(mem, s, l);
        }
        keep_rights(mem, old, new_len, rights);
        return Ok(old);
    }
    if flags & MREMAP_MAYMOVE == 0 {
        return Err(Errno::ENOMEM);
    }
    let new = p.mm.alloc(new_len).ok_or(Errno::ENOMEM)?;
    mem.map_user(new, new + new_len, RW);
    for (s, l) in p.mm.take_dirty(new, new_len) {
        zero_kept(mem, s, l);
    }
    // Moved as Linux does, without a copy, where the memory allows it.
    if !mem.move_pages(old, new, old_len) {
        let data = mem.read(old, old_len)?.to_vec();
        mem.write(new, &data)?;
        discard(mem, old, old_len);
    }
    p.mm.labels.relocate(old, new, old_len);
    grow_label(p, new, old_len, new_len);
    p.mm.remove(old, old_len);
    mem.unmap_user(old, old + old_len);
    keep_rights(mem, new, new_len, rights);
    Ok(new)
}

/// Extends the label of the mapping at `addr` (`old_len` bytes, one label)
/// over its growth to `new_len`, as Linux grows the one mapping.
fn grow_label(p: &mut Process, addr: u64, old_len: u64, new_len: u64) {
    if let Some((end, label)) = p.mm.labels.at(addr) {
        if end == addr + old_len {
            let label = label.clone();
            p.mm.labels.set(addr, addr + new_len, label);
        }
    }
}

/// Gives a mapping mremap made (writable while its bytes moved in) back the
/// rights it had. Past the bound on protected ranges it stays writable, the
/// one way this can differ from Linux (which would have failed the call
/// before anything moved).
fn keep_rights(mem: &mut GuestMemory, addr: u64, len: u64, rights: Rights) {
    if rights != RW && !mem.protect_user(addr, addr + len, rights) {
        tracing::debug!("mremap: {addr:#x}+{len:#x} left writable: too many protected ranges");
    }
}

/// mremap's growth of a shared mapping: the backing is mapped over the
/// larger range, in place or at a new address (an anonymous one's memfd
/// grows first), so the pages stay shared.
#[allow(clippy::too_many_arguments)]
fn remap_shared(
    p: &mut Process,
    mem: &mut GuestMemory,
    old: u64,
    old_len: u64,
    new_len: u64,
    flags: u64,
    start: u64,
    r: crate::memory::SharedRange,
) -> SysResult {
    let rights = mem.user_rights_at(old).unwrap_or(RW);
    let offset = r.offset + (old - start);
    if r.anonymous {
        let want = offset + new_len;
        let size = rustix::fs::fstat(&*r.backing).map_err(Errno::from)?.st_size as u64;
        if size < want {
            rustix::fs::ftruncate(&*r.backing, want).map_err(Errno::from)?;
        }
    }
    let at = if p.mm.mapping_at(old) == Some(old_len) && p.mm.grow_in_place(old, new_len) {
        old
    } else if flags & MREMAP_MAYMOVE == 0 {
        return Err(Errno::ENOMEM);
    } else {
        p.mm.alloc(new_len).ok_or(Errno::ENOMEM)?
    };
    let grown = crate::memory::SharedRange {
        end: at + new_len,
        offset,
        ..r
    };
    if !mem.map_range(at, grown) {
        if at != old {
            p.mm.remove(at, new_len);
        }
        return Err(Errno::ENOMEM);
    }
    mem.map_user(at, at + new_len, RW);
    if at != old {
        p.mm.labels.relocate(old, at, old_len);
    }
    grow_label(p, at, old_len, new_len);
    if at != old {
        discard(mem, old, old_len);
        p.mm.remove(old, old_len);
        mem.unmap_user(old, old + old_len);
    }
    keep_rights(mem, at, new_len, rights);
    Ok(at)
}

/// Implements mprotect(2): read and write rights are enforced (not PROT_EXEC).
fn sys_mprotect(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [addr, len, prot, ..] = *a;
    aligned(addr)?;
    if prot & !(PROT_EXEC_READ_WRITE | 0x0100_0000 | 0x0200_0000) != 0 {
        return Err(Errno::EINVAL);
    }
    let end = addr.checked_add(page_up(len)?).ok_or(Errno::ENOMEM)?;
    if end == addr {
        return Ok(0);
    }
    if end > mem.size() {
        return Err(Errno::ENOMEM);
    }
    // A range with pages the program never mapped (below its image, or a
    // hole in the mmap area) is ENOMEM, as on Linux (which changes the
    // mapped part before the hole first; nothing is changed here). It was
    // changed anyway, and an access to a hole then went through.
    if addr < crate::abi::USER_BASE || mapped_parts(p, addr, end)?.1 {
        return Err(Errno::ENOMEM);
    }
    if prot != 0 && !mem.may_commit(mem.reserved_in(addr, end)) {
        return Err(Errno::ENOMEM);
    }
    // Enforced on the host mapping behind guest RAM (`memory::host_prot`):
    // the program's own accesses fault (SIGSEGV), system calls on its
    // behalf fail with EFAULT. Refused past the bound on protected ranges.
    let rights = Rights {
        read: prot != 0,
        write: prot & 2 != 0,
    };
    if !mem.protect_user(addr, end, rights) {
        return Err(Errno::ENOMEM);
    }
    p.mm.labels.set_exec(addr, end, prot & 4 != 0);
    Ok(0)
}

/// The parts of `addr..end` that the program has mapped (heap pages and
/// mmap regions), lowest first, and whether part of it in the mmap area is
/// unmapped. A range may span several mappings: allocators such as jemalloc
/// merge adjacent mmaps into one extent and purge it with one madvise. The
/// program image and the stack are not in `mm`'s bookkeeping, so only the
/// mmap area can have holes.
fn mapped_parts(p: &Process, addr: u64, end: u64) -> Result<(Vec<(u64, u64)>, bool), Errno> {
    let heap_top = page_up(p.mm.brk)?;
    let mut parts: Vec<(u64, u64)> = std::iter::once((p.mm.brk_start, heap_top))
        .chain(p.mm.mappings_in(addr, end).map(|(s, l)| (s, s + l)))
        .map(|(s, e)| (s.max(addr), e.min(end)))
        .filter(|(s, e)| s < e)
        .collect();
    parts.sort_unstable();
    let (mut at, hi) = (addr.max(heap_top), end.min(p.mm.mmap_top));
    let mut hole = false;
    for &(s, e) in &parts {
        if e <= at {
            continue;
        }
        if s > at && at < hi {
            hole = true;
        }
        at = e;
    }
    Ok((parts, hole || at < hi))
}

/// Implements mincore(2): every mapped page reads as resident (guest memory
/// is the host's to page; the guest cannot tell). An unaligned address is
/// EINVAL, a range with unmapped pages ENOMEM, a vector the guest cannot
/// write EFAULT, in Linux's order.
fn sys_mincore(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [addr, len, vec, ..] = *a;
    aligned(addr)?;
    let end = addr
        .checked_add(page_up(len)?)
        .filter(|&e| e <= mem.size())
        .ok_or(Errno::ENOMEM)?;
    if end == addr {
        return Ok(0);
    }
    if mapped_parts(p, addr, end)?.1 {
        return Err(Errno::ENOMEM);
    }
    let pages = (end - addr) / PAGE_SIZE;
    mem.slice_mut(vec, pages)?.fill(1);
    Ok(0)
}

/// Implements madvise(2): DONTNEED drops the contents of every mapped page
/// of the range (zero, or the file's for a private file mapping); other
/// advice is accepted. A range with unmapped pages is ENOMEM, after the
/// advice is applied to the mapped ones, as on Linux.
fn sys_madvise(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [addr, len, advice, ..] = *a;
    aligned(addr)?;
    let len = page_up(len).map_err(|_| Errno::EINVAL)?;
    let end = addr.checked_add(len).ok_or(Errno::EINVAL)?;
    if end > mem.size() {
        return Err(Errno::ENOMEM);
    }
    let (parts, hole) = mapped_parts(p, addr, end)?;
    if advice == MADV_WIPEONFORK || advice == MADV_KEEPONFORK {
        // Private anonymous memory only, as on Linux (the file's pages are
        // not checked: a private file mapping is wiped too).
        let shared = parts
            .iter()
            .any(|&(s, e)| mem.outside_shared(s, e) != [(s, e)]);
        if shared && advice == MADV_WIPEONFORK {
            return Err(Errno::EINVAL);
        }
        for &(s, e) in &parts {
            p.mm.set_wipe_on_fork(s, e - s, advice == MADV_WIPEONFORK);
        }
    }
    // MADV_FREE lets the kernel keep the contents: keeping them is cheapest.
    if advice == MADV_DONTNEED {
        for (start, end) in parts {
            // Shared pages keep their contents (they are the file's, or
            // shared with another process), as on Linux; private pages of a
            // file are the file's again, and anonymous ones zero.
            for (from, to) in mem.outside_shared(start, end) {
                for (from, to) in mem.reload_private_files(from, to) {
                    if to - from <= KEEP_FREED {
                        zero_kept(mem, from, to - from);
                    } else {
                        discard(mem, from, to - from);
                    }
                }
            }
        }
    }
    if hole {
        return Err(Errno::ENOMEM);
    }
    Ok(0)
}

/// Zeroes a forked child's `MADV_WIPEONFORK` ranges: Linux gives the child
/// fresh pages there (random-number generators such as AWS-LC's detect a
/// fork this way; with the parent's bytes, parent and child drew the same
/// numbers).
pub fn wipe_after_fork(p: &Process, mem: &mut GuestMemory) {
    let ranges: Vec<(u64, u64)> = p.mm.wipe_on_fork().collect();
    for (start, len) in ranges {
        zero_kept(mem, start, len);
    }
}

/// Implements msync(2): shared mappings write through already, so only the
/// arguments are checked as Linux does (EINVAL for an unaligned address or
/// unknown or contradictory flags, ENOMEM past guest memory).
fn sys_msync(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    const MS_ASYNC: u64 = 1;
    const MS_INVALIDATE: u64 = 2;
    const MS_SYNC: u64 = 4;
    let [addr, len, flags, ..] = *a;
    aligned(addr)?;
    if flags & !(MS_ASYNC | MS_INVALIDATE | MS_SYNC) != 0
        || flags & (MS_ASYNC | MS_SYNC) == MS_ASYNC | MS_SYNC
    {
        return Err(Errno::EINVAL);
    }
    let end = addr.checked_add(page_up(len)?).ok_or(Errno::ENOMEM)?;
    if end > mem.size() {
        return Err(Errno::ENOMEM);
    }
    Ok(0)
}

/// Implements mlock-family calls: nothing to do.
fn sys_nop(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Ok(0)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 9, name: "mmap", handler: sys_mmap, support: Support::Partial,
        note: "anonymous and file-backed; MAP_SHARED writes reach the file and are shared with forked children (in a serve request: private to it); file mappings show later changes to the file (but a writable private one of at most 1 MiB is copied at mmap); an access past the end of the file is SIGBUS; read and write rights are enforced as for mprotect, PROT_EXEC is not; no huge pages (MAP_HUGETLB: ENOMEM, as with an empty pool; of a file: EINVAL)" },
    SyscallEntry { nr: 10, name: "mprotect", handler: sys_mprotect, support: Support::Partial,
        note: "read and write rights are enforced on the host mapping behind guest RAM: the program's accesses fault (SIGSEGV, SEGV_ACCERR, which a handler may fix and retry) and system calls fail with EFAULT; PROT_EXEC is not (executability is fixed by the page tables built at load); ENOMEM past 4,096 protected ranges in a process (16,384 in a forkvm process), and for a range with unmapped pages (nothing is changed)" },
    SyscallEntry { nr: 11, name: "munmap", handler: sys_munmap, support: Support::Partial,
        note: "pages are freed; the range faults afterwards (SIGSEGV, SEGV_MAPERR), except past the bound on protected ranges (see mprotect), where it stays accessible, zeroed" },
    SyscallEntry { nr: 12, name: "brk", handler: sys_brk, support: Support::Full, note: "" },
    SyscallEntry { nr: 25, name: "mremap", handler: sys_mremap, support: Support::Partial,
        note: "MREMAP_FIXED is refused" },
    SyscallEntry { nr: 26, name: "msync", handler: sys_msync, support: Support::Full, note: "" },
    SyscallEntry { nr: 27, name: "mincore", handler: sys_mincore, support: Support::Partial,
        note: "every mapped page reads as resident" },
    SyscallEntry { nr: 28, name: "madvise", handler: sys_madvise, support: Support::Partial,
        note: "MADV_DONTNEED zeroes anonymous memory, reads a private file mapping's file again and leaves shared pages alone, across any number of mappings; a range with unmapped pages in the mmap area is ENOMEM after the advice is applied to the rest; MADV_WIPEONFORK zeroes the range in forked children (EINVAL on shared memory); MADV_FREE and other advice are accepted and ignored" },
    SyscallEntry { nr: 149, name: "mlock", handler: sys_nop, support: Support::Full, note: "" },
    SyscallEntry { nr: 150, name: "munlock", handler: sys_nop, support: Support::Full, note: "" },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::{test_call, test_process};

    const RW_PRIVATE_ANON: [u64; 2] = [3, 0x22]; // PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS

    #[test]
    fn msync_checks_its_arguments_as_linux() {
        let (mut p, mut m, _) = test_process();
        let [prot, flags] = RW_PRIVATE_ANON;
        let at =
            test_call(&mut p, &mut m, sys_mmap, &[0, 4096, prot, flags, u64::MAX]).expect("mmap");
        let mut msync = |a: &[u64]| test_call(&mut p, &mut m, sys_msync, a);
        assert_eq!(msync(&[at, 4096, 4]), Ok(0));
        // Python's mmap.flush(1, 6) is an OSError on Linux.
        assert_eq!(msync(&[at + 1, 6, 4]), Err(Errno::EINVAL));
        assert_eq!(msync(&[at, 4096, 5]), Err(Errno::EINVAL));
        assert_eq!(msync(&[at, 4096, 8]), Err(Errno::EINVAL));
    }

    /// Go's TestMincoreErrorSign wants EINVAL for an unaligned address (it
    /// was ENOSYS); libunwind-style probes want ENOMEM for unmapped pages.
    #[test]
    fn mincore_answers_mapped_pages_and_refuses_the_rest() {
        let (mut p, mut m, _) = test_process();
        let [prot, flags] = RW_PRIVATE_ANON;
        let at = test_call(
            &mut p,
            &mut m,
            sys_mmap,
            &[0, 0x3000, prot, flags, u64::MAX],
        )
        .expect("mmap");
        let vec = test_call(
            &mut p,
            &mut m,
            sys_mmap,
            &[0, 0x1000, prot, flags, u64::MAX],
        )
        .expect("mmap");
        assert_eq!(
            test_call(&mut p, &mut m, sys_munmap, &[at + 0x1000, 0x1000]),
            Ok(0)
        );
        let mut mincore = |a: &[u64]| test_call(&mut p, &mut m, sys_mincore, a);
        assert_eq!(mincore(&[1, 1, vec]), Err(Errno::EINVAL));
        assert_eq!(mincore(&[at, 0x1001, vec]), Err(Errno::ENOMEM));
        assert_eq!(mincore(&[at, u64::MAX, vec]), Err(Errno::ENOMEM));
        assert_eq!(mincore(&[at, 0, 0]), Ok(0));
        assert_eq!(mincore(&[at, 1, 0]), Err(Errno::EFAULT));
        assert_eq!(mincore(&[at + 0x2000, 0x1000, vec]), Ok(0));
        assert_eq!(m.read(vec, 2).expect("read"), [1, 0]);
    }

    /// PHP's opcache reserves 128 MiB, unmaps it and maps MAP_HUGETLB|MAP_FIXED
    /// at the address rounded up to 2 MiB, over what follows the reservation.
    /// With no huge pages (an empty pool, the default) Linux refuses and PHP
    /// falls back; accepting it cleared the mapping that followed (under
    /// forkvm serve, `php -S` jumped to 0 at the end of every request).
    #[test]
    fn huge_pages_are_refused_and_touch_nothing() {
        const MAP_SHARED_ANON: u64 = 0x21;
        let (mut p, mut m, _) = test_process();
        let [prot, flags] = RW_PRIVATE_ANON;
        let next = test_call(
            &mut p,
            &mut m,
            sys_mmap,
            &[0, 0x1000, prot, flags, u64::MAX],
        )
        .expect("mmap");
        m.write(next, b"kept").expect("write");
        let huge = MAP_SHARED_ANON | MAP_FIXED | MAP_HUGETLB;
        let over = next & !0xfff;
        assert_eq!(
            test_call(
                &mut p,
                &mut m,
                sys_mmap,
                &[over, 0x20_0000, prot, huge, u64::MAX]
            ),
            Err(Errno::ENOMEM)
        );
        assert_eq!(m.read(next, 4).expect("read"), b"kept");
        assert_eq!(
            test_call(
                &mut p,
                &mut m,
                sys_mmap,
                &[0, 0x20_0000, prot, MAP_SHARED_ANON | MAP_HUGETLB, u64::MAX]
            ),
            Err(Errno::ENOMEM)
        );
        // Of a file: not a hugetlbfs one (a bad descriptor is EBADF first).
        assert_eq!(
            test_call(
                &mut p,
                &mut m,
                sys_mmap,
                &[0, 0x1000, prot, 0x2 | MAP_HUGETLB, 99]
            ),
            Err(Errno::EBADF)
        );
    }

    #[test]
    fn a_free_hint_is_honoured_and_a_taken_one_is_not() {
        let (mut p, mut m, _) = test_process();
        let [prot, flags] = RW_PRIVATE_ANON;
        let any = test_call(
            &mut p,
            &mut m,
            sys_mmap,
            &[0, 0x2000, prot, flags, u64::MAX],
        )
        .expect("mmap");
        // A hint below the first mapping, in the mmap area and free: taken as asked.
        let hint = any - 0x10_0000;
        let at = test_call(
            &mut p,
            &mut m,
            sys_mmap,
            &[hint + 5, 0x1000, prot, flags, u64::MAX],
        )
        .expect("mmap at hint");
        assert_eq!(at, hint, "rounded down to the page and honoured");
        // The same hint again: taken, so the kernel picks elsewhere.
        let again = test_call(
            &mut p,
            &mut m,
            sys_mmap,
            &[hint, 0x1000, prot, flags, u64::MAX],
        )
        .expect("mmap elsewhere");
        assert_ne!(again, hint);
        // A hint outside the guest's address space is ignored, not an error.
        let far = test_call(
            &mut p,
            &mut m,
            sys_mmap,
            &[0xc0_0000_0000, 0x1000, prot, flags, u64::MAX],
        )
        .expect("mmap ignoring the hint");
        assert!(far < m.size());
    }
}
