//! Files without a name: memfd_create(2) and open(O_TMPFILE).
//!
//! A memfd is a host memfd (so read, write, ftruncate, fstat, seals and
//! MAP_SHARED mappings behave as the host kernel makes them), known to the
//! guest by the path Linux shows for it, `/memfd:NAME`. The memory it holds
//! is the host's: what the guest writes into memfds is bounded by the VM's
//! memory (ENOSPC past it), as the private /tmp is. An O_TMPFILE file is
//! the host's unnamed file in the (writable) directory, named
//! `DIR/#INODE` as Linux does; it is charged as any file there.

use super::*;

/// Longest memfd name (Linux's MFD_NAME_MAX_LEN: NAME_MAX less "memfd:").
const MFD_NAME_MAX: u64 = 249;
const MFD_CLOEXEC: u64 = 0x1;
const MFD_ALLOW_SEALING: u64 = 0x2;
const MFD_HUGETLB: u64 = 0x4;
const MFD_NOEXEC_SEAL: u64 = 0x8;
const MFD_EXEC: u64 = 0x10;
/// The guest path prefix of a memfd (its name follows).
const MEMFD_PREFIX: &[u8] = b"/memfd:";

/// Whether a file's guest path is a memfd's.
pub(super) fn is_memfd(path: &[u8]) -> bool {
    path.starts_with(MEMFD_PREFIX)
}

/// Implements memfd_create(2).
pub(super) fn sys_memfd_create(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let flags = a[1];
    if flags & !(MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB | MFD_NOEXEC_SEAL | MFD_EXEC) != 0
        || flags & (MFD_NOEXEC_SEAL | MFD_EXEC) == MFD_NOEXEC_SEAL | MFD_EXEC
    {
        return Err(Errno::EINVAL);
    }
    if flags & MFD_HUGETLB != 0 {
        // No huge pages for the guest.
        return Err(Errno::EINVAL);
    }
    let name = match mem.read_cstr(a[0], MFD_NAME_MAX) {
        Ok(s) => s.to_vec(),
        Err(_) if mem.read(a[0], MFD_NAME_MAX + 1).is_ok() => return Err(Errno::EINVAL),
        Err(_) => return Err(Errno::EFAULT),
    };
    use rustix::fs::{MemfdFlags, SealFlags};
    let mut host = MemfdFlags::CLOEXEC;
    if flags & (MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL) != 0 {
        host |= MemfdFlags::ALLOW_SEALING;
    }
    let fd = rustix::fs::memfd_create("forkvm-memfd", host)?;
    if flags & MFD_NOEXEC_SEAL != 0 {
        // Not executable, and never made so (a host without F_SEAL_EXEC
        // still gets the mode).
        rustix::fs::fchmod(&fd, Mode::from_bits_truncate(0o666))?;
        let _ = rustix::fs::fcntl_add_seals(&fd, SealFlags::EXEC);
    }
    let mut path = MEMFD_PREFIX.to_vec();
    path.extend_from_slice(&name);
    let file = OpenFile::new(FileKind::File { fd, path }, O_RDWR | O_LARGEFILE);
    Ok(p.fds.insert(file, flags & MFD_CLOEXEC != 0)? as u64)
}

/// The memory a write of `len` bytes to the memfd `f` may take: ENOSPC when
/// the process's memfds would hold more than `limit` bytes.
pub(super) fn charge_memfd(p: &Process, f: &OpenFile, len: u64, limit: u64) -> Result<(), Errno> {
    let mut seen: Vec<(u64, u64)> = Vec::new();
    let mut used = 0u64;
    let mut count = |st: &Stat| {
        if !seen.contains(&(st.st_dev, st.st_ino)) {
            seen.push((st.st_dev, st.st_ino));
            used = used.saturating_add(st.st_blocks.max(0) as u64 * 512);
        }
    };
    if let FileKind::File { fd, .. } = &f.kind {
        count(&rustix::fs::fstat(fd)?);
    }
    for n in p.fds.open_fds() {
        let Ok(file) = p.fds.get(n) else { continue };
        // The description being written is locked by the caller (counted
        // above); one another process uses right now is left out.
        let Ok(g) = file.try_lock() else { continue };
        if let FileKind::File { fd, path } = &g.kind {
            if is_memfd(path) {
                if let Ok(st) = rustix::fs::fstat(fd) {
                    count(&st);
                }
            }
        }
    }
    if used.saturating_add(len) > limit {
        return Err(Errno::ENOSPC);
    }
    Ok(())
}

/// open(2) with O_TMPFILE: an unnamed regular file in the directory `abs`,
/// which must lie under the write roots (elsewhere EACCES, as any open
/// for writing).
pub(super) fn open_tmpfile(
    p: &mut Process,
    abs: &[u8],
    flags: u32,
    mode: u64,
    status: u32,
    cloexec: bool,
) -> SysResult {
    let acc = flags & O_ACCMODE;
    if flags & O_DIRECTORY == 0
        || flags & (O_CREAT | O_PATH) != 0
        || !matches!(acc, O_WRONLY | O_RDWR)
    {
        return Err(Errno::EINVAL);
    }
    let dir = match walk(&write_roots(p)?, abs, true) {
        Ok(Some(r)) => r,
        Ok(None) => return Err(Errno::EACCES),
        Err(Errno::ENOENT) => {
            // One that exists outside the write roots is not writable.
            walk_host(&super::path::roots(p), abs, true)?;
            return Err(Errno::EACCES);
        }
        Err(e) => return Err(e),
    };
    if dir.stat.st_mode & S_IFMT != S_IFDIR {
        return Err(Errno::ENOTDIR);
    }
    if !guest_may(&dir.stat, 3) {
        return Err(Errno::EACCES);
    }
    let dfd = reopen(&dir, OFlags::RDONLY | OFlags::DIRECTORY)?;
    let mut of = OFlags::TMPFILE | OFlags::CLOEXEC;
    of |= if acc == O_WRONLY {
        OFlags::WRONLY
    } else {
        OFlags::RDWR
    };
    if flags & O_EXCL != 0 {
        of |= OFlags::EXCL;
    }
    if flags & O_APPEND != 0 {
        of |= OFlags::APPEND;
    }
    let mode = Mode::from_bits_truncate((mode as u32 & 0o7777) & !p.fds.umask);
    let fd = rustix::fs::openat(&dfd, ".", of, mode)?;
    // The host's umask applied too: the mode must be the guest's.
    rustix::fs::fchmod(&fd, mode)?;
    let ino = rustix::fs::fstat(&fd)?.st_ino;
    let mut path = dir.path.clone();
    if path != b"/" {
        path.push(b'/');
    }
    path.extend_from_slice(format!("#{ino}").as_bytes());
    let file = OpenFile::new(FileKind::File { fd, path }, status);
    Ok(p.fds.insert(file, cloexec)? as u64)
}
