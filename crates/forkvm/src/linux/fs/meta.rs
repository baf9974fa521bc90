//! Metadata: stat, statfs, access, readlink, getdents, cwd and umask.

use super::*;

/// File metadata in a layout-neutral form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatInfo {
    /// Device of the file system.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Hard links.
    pub nlink: u64,
    /// Type and permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number of a device node.
    pub rdev: u64,
    /// Size in bytes.
    pub size: i64,
    /// Preferred I/O size.
    pub blksize: i64,
    /// 512-byte blocks allocated.
    pub blocks: i64,
    /// Access time (seconds, nanoseconds).
    pub atime: (i64, u64),
    /// Modification time.
    pub mtime: (i64, u64),
    /// Status-change time.
    pub ctime: (i64, u64),
}

impl From<&Stat> for StatInfo {
    fn from(s: &Stat) -> Self {
        Self {
            dev: s.st_dev,
            ino: s.st_ino,
            nlink: s.st_nlink,
            mode: s.st_mode,
            uid: guest_uid(s.st_uid),
            gid: guest_gid(s.st_gid),
            rdev: s.st_rdev,
            size: s.st_size,
            blksize: s.st_blksize,
            blocks: s.st_blocks,
            atime: (s.st_atime, s.st_atime_nsec),
            mtime: (s.st_mtime, s.st_mtime_nsec),
            ctime: (s.st_ctime, s.st_ctime_nsec),
        }
    }
}

/// Linux `makedev`.
pub(super) const fn makedev(major: u64, minor: u64) -> u64 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12) | ((major & !0xfff) << 32)
}

pub(super) const fn dev_major(dev: u64) -> u32 {
    (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)) as u32
}

pub(super) const fn dev_minor(dev: u64) -> u32 {
    ((dev & 0xff) | ((dev >> 12) & !0xff)) as u32
}

pub(super) fn dev_stat(d: Dev) -> StatInfo {
    let minor = match d {
        Dev::Null => 3,
        Dev::Zero => 5,
        Dev::Urandom => 9,
        Dev::Random => 8,
        Dev::Ptmx => {
            return StatInfo {
                dev: makedev(0, 5),
                ino: 90,
                nlink: 1,
                mode: S_IFCHR | 0o666,
                gid: 5,
                rdev: makedev(5, 2),
                blksize: 4096,
                ..StatInfo::default()
            }
        }
        Dev::Tty => {
            return StatInfo {
                dev: makedev(0, 5),
                ino: 89,
                nlink: 1,
                mode: S_IFCHR | 0o666,
                gid: 5,
                rdev: makedev(5, 0),
                blksize: 4096,
                ..StatInfo::default()
            }
        }
        // devpts numbers a slave's inode N + 3 (its root 1, ptmx 2); the
        // slave belongs to the guest, group tty.
        Dev::Pts(n) => {
            return StatInfo {
                dev: makedev(0, 24),
                ino: u64::from(n) + 3,
                nlink: 1,
                mode: S_IFCHR | 0o620,
                uid: crate::linux::process::UID as u32,
                gid: 5,
                rdev: makedev(136, u64::from(n)),
                blksize: 1024,
                ..StatInfo::default()
            }
        }
    };
    StatInfo {
        dev: makedev(0, 5),
        ino: 100 + minor,
        nlink: 1,
        mode: S_IFCHR | 0o666,
        rdev: makedev(1, minor),
        blksize: 4096,
        ..StatInfo::default()
    }
}

/// Metadata of an open file.
pub fn stat_of_file(f: &OpenFile) -> Result<StatInfo, Errno> {
    match &f.kind {
        FileKind::File { fd, path } => Ok(virt::stat_open(fd, path, false).map_or_else(
            || Ok(StatInfo::from(&rustix::fs::fstat(fd)?)),
            Ok::<_, Errno>,
        )?),
        FileKind::Dir { fd, path } => Ok(virt::stat_open(fd, path, true).map_or_else(
            || Ok(StatInfo::from(&rustix::fs::fstat(fd)?)),
            Ok::<_, Errno>,
        )?),
        FileKind::PathOnly { fd, .. } => Ok(StatInfo::from(&rustix::fs::fstat(fd)?)),
        FileKind::Pipe(PipeEnd {
            node: Some(node), ..
        }) => Ok(StatInfo::from(&rustix::fs::fstat(&node.fd)?)),
        FileKind::Pipe(end) => {
            let uid = crate::linux::process::UID as u32;
            Ok(StatInfo {
                dev: makedev(0, 14),
                ino: lock(&end.pipe).id,
                nlink: 1,
                mode: S_IFIFO | 0o600,
                uid,
                gid: uid,
                blksize: 4096,
                ..StatInfo::default()
            })
        }
        FileKind::Socket(s) => Ok(crate::linux::net::socket_stat(s)),
        FileKind::Pty(end) => Ok(dev_stat(match end.master {
            true => Dev::Ptmx,
            false => Dev::Pts(end.index()),
        })),
        FileKind::Null => Ok(dev_stat(Dev::Null)),
        FileKind::Zero => Ok(dev_stat(Dev::Zero)),
        FileKind::Urandom => Ok(dev_stat(Dev::Urandom)),
        k => match host_std(k) {
            Some(h) => Ok(StatInfo::from(&rustix::fs::fstat(h.as_fd())?)),
            None => Err(Errno::EBADF),
        },
    }
}

pub(super) fn stat_of(p: &Process, t: &Target) -> Result<StatInfo, Errno> {
    match t {
        Target::Dev(d) => Ok(dev_stat(*d)),
        Target::Fd(f) => stat_of_file(&lock(f)),
        Target::Host(r) => Ok(StatInfo::from(&r.stat)),
        Target::Virt(path, node) => virt::stat(p, path, node),
    }
}

pub(super) fn put(b: &mut [u8], off: usize, bytes: &[u8]) {
    b[off..off + bytes.len()].copy_from_slice(bytes);
}

/// The x86-64 `struct stat` bytes.
pub fn encode_stat(s: &StatInfo) -> [u8; STAT_SIZE] {
    let mut b = [0u8; STAT_SIZE];
    put(&mut b, 0, &s.dev.to_le_bytes());
    put(&mut b, 8, &s.ino.to_le_bytes());
    put(&mut b, 16, &s.nlink.to_le_bytes());
    put(&mut b, 24, &s.mode.to_le_bytes());
    put(&mut b, 28, &s.uid.to_le_bytes());
    put(&mut b, 32, &s.gid.to_le_bytes());
    put(&mut b, 40, &s.rdev.to_le_bytes());
    put(&mut b, 48, &s.size.to_le_bytes());
    put(&mut b, 56, &s.blksize.to_le_bytes());
    put(&mut b, 64, &s.blocks.to_le_bytes());
    for (i, t) in [s.atime, s.mtime, s.ctime].iter().enumerate() {
        put(&mut b, 72 + 16 * i, &t.0.to_le_bytes());
        put(&mut b, 80 + 16 * i, &t.1.to_le_bytes());
    }
    b
}

/// The `struct statx` bytes (basic stats; no birth time or mount id).
pub fn encode_statx(s: &StatInfo) -> [u8; STATX_SIZE] {
    let mut b = [0u8; STATX_SIZE];
    put(&mut b, 0, &STATX_BASIC_STATS.to_le_bytes());
    put(&mut b, 4, &(s.blksize as u32).to_le_bytes());
    put(&mut b, 16, &(s.nlink as u32).to_le_bytes());
    put(&mut b, 20, &s.uid.to_le_bytes());
    put(&mut b, 24, &s.gid.to_le_bytes());
    put(&mut b, 28, &(s.mode as u16).to_le_bytes());
    put(&mut b, 32, &s.ino.to_le_bytes());
    put(&mut b, 40, &s.size.to_le_bytes());
    put(&mut b, 48, &s.blocks.to_le_bytes());
    for (off, t) in [(64, s.atime), (96, s.ctime), (112, s.mtime)] {
        put(&mut b, off, &t.0.to_le_bytes());
        put(&mut b, off + 8, &(t.1 as u32).to_le_bytes());
    }
    put(&mut b, 128, &dev_major(s.rdev).to_le_bytes());
    put(&mut b, 132, &dev_minor(s.rdev).to_le_bytes());
    put(&mut b, 136, &dev_major(s.dev).to_le_bytes());
    put(&mut b, 140, &dev_minor(s.dev).to_le_bytes());
    b
}

pub(super) fn stat_path(
    p: &Process,
    mem: &mut GuestMemory,
    path: u64,
    buf: u64,
    follow: bool,
) -> SysResult {
    let path = read_path(mem, path)?;
    let st = stat_of(p, &lookup(p, AT_FDCWD, &path, follow)?)?;
    mem.write(buf, &encode_stat(&st))?;
    Ok(0)
}

/// Implements stat(2).
pub(super) fn sys_stat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    stat_path(p, mem, a[0], a[1], true)
}

/// Implements lstat(2).
pub(super) fn sys_lstat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    stat_path(p, mem, a[0], a[1], false)
}

/// Implements fstat(2).
pub(super) fn sys_fstat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let st = stat_of_file(&lock(&file))?;
    mem.write(a[1], &encode_stat(&st))?;
    Ok(0)
}

/// Implements newfstatat(2).
pub(super) fn sys_newfstatat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [dirfd, path, buf, flags, ..] = *a;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let st = stat_of(p, &lookup_at(p, mem, dirfd as i32, path, flags)?)?;
    mem.write(buf, &encode_stat(&st))?;
    Ok(0)
}

/// Implements statx(2).
pub(super) fn sys_statx(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [dirfd, path, flags, mask, buf, _] = *a;
    let flags = flags as u32 as u64;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH | AT_STATX_SYNC_TYPE) != 0
        || flags & AT_STATX_SYNC_TYPE == AT_STATX_SYNC_TYPE
        || mask as u32 & STATX_RESERVED != 0
    {
        return Err(Errno::EINVAL);
    }
    let st = stat_of(p, &lookup_at(p, mem, dirfd as i32, path, flags)?)?;
    mem.write(buf, &encode_statx(&st))?;
    Ok(0)
}

/// Implements getdents64(2).
pub(super) fn sys_getdents64(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    use std::os::fd::AsRawFd;
    let file = p.fds.get(a[0] as i32)?;
    let f = lock(&file);
    if f.path_only() {
        return Err(Errno::EBADF);
    }
    let FileKind::Dir { fd, path } = &f.kind else {
        return Err(Errno::ENOTDIR);
    };
    let roots = roots(p);
    if is_ancestor(&roots, path) {
        let entries = ancestor_entries(&roots, path);
        return emit_dents(&entries, fd, mem, a[1], u64::from(a[2] as u32));
    }
    if virt::stat_open(fd, path, true).is_some() {
        let entries = virt_entries(p, path);
        return emit_dents(&entries, fd, mem, a[1], u64::from(a[2] as u32));
    }
    // The whole buffer must be valid; the kernel fills only whole records
    // that fit, so passing it a bounded prefix is safe.
    let buf = guest_buf_mut(mem, a[1], u64::from(a[2] as u32))?;
    let len = buf.len().min(1 << 20);
    let buf = &mut buf[..len];
    // The directory holding forkvm's scratch trees lists without them (it
    // is looked at only when a name might be one).
    let mut dir_stat = None;
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes of
        // linux_dirent64 records into `buf`, which is valid, writable and
        // exclusively borrowed; the host and guest record layouts are the
        // same (x86-64).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let got = usize::try_from(rc).map_err(|_| Errno::EIO)?.min(buf.len());
        let kept = drop_hidden(&mut buf[..got], || {
            *dir_stat.get_or_insert_with(|| rustix::fs::fstat(fd).ok())
        });
        // Only hidden names in this batch: the directory may hold more.
        if kept > 0 || got == 0 {
            return Ok(kept as u64);
        }
    }
}

/// Removes the records of hidden names (see `tmp::is_hidden`) from the
/// linux_dirent64 records in `recs`, which the host kernel wrote for the
/// directory `dir` gives the metadata of; returns the bytes left. A removed
/// record's `d_off` (the place after it) passes to the record before it, so
/// seeking there skips it too.
fn drop_hidden(recs: &mut [u8], mut dir: impl FnMut() -> Option<Stat>) -> usize {
    // d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name.
    const NAME: usize = 19;
    let (mut at, mut out) = (0usize, 0usize);
    let mut prev: Option<usize> = None;
    while at + NAME <= recs.len() {
        let reclen = usize::from(u16::from_ne_bytes([recs[at + 16], recs[at + 17]]));
        if reclen < NAME || at + reclen > recs.len() {
            break;
        }
        let name = &recs[at + NAME..at + reclen];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if may_be_hidden(name) && dir().is_some_and(|d| is_hidden(&d, name)) {
            if let Some(p) = prev {
                let off: [u8; 8] = recs[at + 8..at + 16].try_into().unwrap_or_default();
                recs[p + 8..p + 16].copy_from_slice(&off);
            }
        } else {
            recs.copy_within(at..at + reclen, out);
            prev = Some(out);
            out += reclen;
        }
        at += reclen;
    }
    out
}

/// The parent of the canonical guest directory `dir`.
fn parent_of(dir: &[u8]) -> Vec<u8> {
    match dir.iter().rposition(|&b| b == b'/') {
        Some(0) | None => b"/".to_vec(),
        Some(i) => dir[..i].to_vec(),
    }
}

/// The entries of a directory above the roots: ".", ".." and only the
/// names that lead to roots, with their host inode numbers and types (the
/// types the guest's stat shows: roots as the host objects, links
/// followed, directories on the way as directories).
fn ancestor_entries(roots: &[Root], dir: &[u8]) -> Vec<(Vec<u8>, u64, u8)> {
    let mut names: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b".".to_vec(), dir.to_vec()),
        (b"..".to_vec(), parent_of(dir)),
    ];
    for n in names_toward_roots(roots, dir) {
        let full = join(dir, &n);
        // A root is shown as what it is on the host (a private /tmp is
        // not the host's /tmp).
        let comps: Vec<Vec<u8>> = components(&full).into_iter().collect();
        let host = match roots.iter().find(|r| r.comps == comps) {
            Some(r) => r.host.as_os_str().as_bytes().to_vec(),
            None => full,
        };
        names.push((n, host));
    }
    let mut out = Vec::new();
    for (name, full) in names {
        let host = PathBuf::from(std::ffi::OsStr::from_bytes(&full));
        // Opened as walks open roots (a private /tmp comes into being).
        let Ok((_, st)) = open_root(roots, &host) else {
            continue;
        };
        let ty = match st.st_mode & S_IFMT {
            S_IFREG => virt::DT_REG,
            S_IFLNK => virt::DT_LNK,
            S_IFDIR => virt::DT_DIR,
            _ => 0,
        };
        out.push((name, st.st_ino, ty));
    }
    out
}

/// The entries of a synthetic directory, with the inode numbers stat shows.
fn virt_entries(p: &Process, dir: &[u8]) -> Vec<(Vec<u8>, u64, u8)> {
    let mut out = vec![
        (b".".to_vec(), virt::ino_of(dir), virt::DT_DIR),
        (b"..".to_vec(), virt::ino_of(&parent_of(dir)), virt::DT_DIR),
    ];
    for (name, ty) in virt::list(p, dir) {
        let ino = virt::ino_of(&join(dir, &name));
        out.push((name, ino, ty));
    }
    out
}

/// getdents64 of a directory whose entries are made here, not read from the
/// host. The position is the descriptor's offset, counted in entries, so
/// lseek/rewinddir work.
fn emit_dents(
    entries: &[(Vec<u8>, u64, u8)],
    fd: &OwnedFd,
    mem: &mut GuestMemory,
    buf: u64,
    len: u64,
) -> SysResult {
    use rustix::fs::SeekFrom;
    let start = rustix::fs::seek(fd, SeekFrom::Current(0))?;
    let out = guest_buf_mut(mem, buf, len)?;
    let mut used = 0usize;
    let mut pos = start;
    for (off, (name, ino, ty)) in dent_offsets(entries) {
        if off <= start {
            continue;
        }
        let reclen = (19 + name.len() + 1).next_multiple_of(8);
        if used + reclen > out.len() {
            if used == 0 {
                return Err(Errno::EINVAL);
            }
            break;
        }
        pos = off;
        let rec = &mut out[used..used + reclen];
        rec.fill(0);
        rec[0..8].copy_from_slice(&ino.to_le_bytes());
        rec[8..16].copy_from_slice(&(pos as i64).to_le_bytes());
        rec[16..18].copy_from_slice(&(reclen as u16).to_le_bytes());
        rec[18] = *ty;
        rec[19..19 + name.len()].copy_from_slice(name);
        used += reclen;
    }
    rustix::fs::seek(fd, SeekFrom::Start(pos))?;
    Ok(used as u64)
}

/// A listing entry: name, inode number, d_type.
type Dent = (Vec<u8>, u64, u8);

/// The entries of a synthetic listing in order, each with the directory
/// offset just past it. A listing of numbers (descriptors, threads) is
/// placed by number, as Linux's /proc does: "." 1, ".." 2, n at n + 3, so a
/// listing that goes on after some of them closed (a child closing every
/// descriptor it finds, while it reads /proc/self/fd) skips none of the
/// rest. Other listings are placed by index.
fn dent_offsets(entries: &[Dent]) -> Vec<(u64, &Dent)> {
    let number = |n: &[u8]| -> Option<u64> {
        if n.is_empty() || !n.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(n).ok()?.parse::<u64>().ok()
    };
    let numeric = entries
        .iter()
        .all(|(n, ..)| n == b"." || n == b".." || number(n).is_some());
    let mut out: Vec<(u64, &Dent)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let off = match (numeric, e.0.as_slice()) {
                (true, b".") => 1,
                (true, b"..") => 2,
                (true, n) => number(n).unwrap_or(0).saturating_add(3),
                (false, _) => i as u64 + 1,
            };
            (off, e)
        })
        .collect();
    out.sort_by_key(|&(off, _)| off);
    out
}

pub(super) fn do_readlink(
    p: &Process,
    mem: &mut GuestMemory,
    dirfd: i32,
    addr: u64,
    buf: u64,
    size: u64,
) -> SysResult {
    let size = size as i32;
    if size <= 0 {
        return Err(Errno::EINVAL);
    }
    let path = read_path(mem, addr)?;
    let target = if path.is_empty() {
        // readlinkat(fd, "") reads the symlink an O_PATH fd refers to.
        match lookup_fd(p, dirfd)? {
            Target::Fd(f) => match &lock(&f).kind {
                FileKind::PathOnly { fd, .. } => {
                    rustix::fs::readlinkat(fd, "", Vec::new())?.into_bytes()
                }
                _ => return Err(Errno::ENOENT),
            },
            _ => return Err(Errno::ENOENT),
        }
    } else {
        match lookup(p, dirfd, &path, false)? {
            Target::Virt(_, node) => virt::link_text(p, &node).ok_or(Errno::EINVAL)?,
            Target::Host(r) if r.stat.st_mode & S_IFMT == S_IFLNK => {
                rustix::fs::readlinkat(&*r.fd, "", Vec::new())?.into_bytes()
            }
            // Directories above the roots exist (not links): EINVAL, which
            // realpath() needs to walk down to an allowed file.
            _ => return Err(Errno::EINVAL),
        }
    };
    let n = target.len().min(size as usize);
    guest_buf_mut(mem, buf, n as u64)?.copy_from_slice(&target[..n]);
    Ok(n as u64)
}

/// Implements readlink(2).
pub(super) fn sys_readlink(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_readlink(p, mem, AT_FDCWD, a[0], a[1], a[2])
}

/// Implements readlinkat(2).
pub(super) fn sys_readlinkat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_readlink(p, mem, a[0] as i32, a[1], a[2], a[3])
}

pub(super) fn do_access(
    p: &Process,
    mem: &GuestMemory,
    dirfd: i32,
    addr: u64,
    mode: u64,
    flags: u64,
) -> SysResult {
    if mode & !7 != 0 || flags & !(AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let target = lookup_at(p, mem, dirfd, addr, flags)?;
    let r = match target {
        Target::Host(r) => r,
        // Generated files and directories are read-only, and not programs.
        Target::Virt(path, node) => {
            let st = virt::stat(p, &path, &node)?;
            let ty = st.mode & S_IFMT;
            let allowed = if ty == S_IFLNK { 7 } else { (st.mode >> 6) & 7 };
            return if (mode as u32) & !allowed == 0 {
                Ok(0)
            } else {
                Err(Errno::EACCES)
            };
        }
        // Emulated devices and open stdio/pipes: usable as opened.
        _ => return Ok(0),
    };
    if mode & W_OK != 0 && !in_write_roots(p, &r.path, &r.stat) {
        return Err(Errno::EACCES);
    }
    if mode == 0 || r.stat.st_mode & S_IFMT == S_IFLNK {
        return Ok(0);
    }
    // Judged as the guest's uid sees the file, not as the host user.
    if !guest_may(&r.stat, mode as u32) {
        return Err(Errno::EACCES);
    }
    Ok(0)
}

/// Implements access(2).
pub(super) fn sys_access(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_access(p, mem, AT_FDCWD, a[0], a[1], 0)
}

/// Implements faccessat(2).
pub(super) fn sys_faccessat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_access(p, mem, a[0] as i32, a[1], a[2], 0)
}

/// Implements faccessat2(2).
pub(super) fn sys_faccessat2(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_access(p, mem, a[0] as i32, a[1], a[2], a[3] as u32 as u64)
}

/// Implements getcwd(2).
pub(super) fn sys_getcwd(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    // Removed: Linux says so before looking at the buffer.
    if cwd_removed(p) {
        return Err(Errno::ENOENT);
    }
    // Where the working directory is now, if it was renamed.
    let now = cwd_path(p);
    if now != p.cwd {
        p.cwd = now;
    }
    let cwd = p.cwd.as_slice();
    let len = cwd.len() as u64 + 1;
    if a[1] < len {
        return Err(Errno::ERANGE);
    }
    let out = mem.slice_mut(a[0], len)?;
    out[..cwd.len()].copy_from_slice(cwd);
    out[cwd.len()] = 0;
    Ok(len)
}

/// Makes `path` the working directory; `dir` is the host directory it is, if any.
pub(super) fn set_cwd(p: &mut Process, path: Vec<u8>, dir: Option<OwnedFd>) -> SysResult {
    // Any bytes but NUL, as on Linux (not only UTF-8).
    p.cwd = path;
    p.cwd_dir = dir.map(std::sync::Arc::new);
    Ok(0)
}

/// Implements chdir(2).
pub(super) fn sys_chdir(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let path = read_path(mem, a[0])?;
    match lookup(p, AT_FDCWD, &path, true)? {
        Target::Host(r) if r.stat.st_mode & S_IFMT == S_IFDIR => {
            may_search(&r.stat)?;
            let dir = owned(r.fd)?;
            set_cwd(p, r.path, Some(dir))
        }
        Target::Virt(path, Node::Dir) => set_cwd(p, path, None),
        _ => Err(Errno::ENOTDIR),
    }
}

/// Implements fchdir(2).
pub(super) fn sys_fchdir(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    // Where the directory is now, if it was renamed since it was opened.
    let path = base_dir(p, a[0] as i32)?;
    let file = p.fds.get(a[0] as i32)?;
    let dir = match &lock(&file).kind {
        FileKind::Dir { fd, .. } => {
            // A host directory (a synthetic one is a memory file).
            let st = rustix::fs::fstat(fd)?;
            if st.st_mode & S_IFMT == S_IFDIR {
                may_search(&st)?;
            }
            fd.try_clone().ok()
        }
        _ => return Err(Errno::ENOTDIR),
    };
    set_cwd(p, path, dir)
}

/// Implements umask(2).
pub(super) fn sys_umask(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let old = p.fds.umask;
    p.fds.umask = a[0] as u32 & 0o777;
    Ok(u64::from(old))
}

pub(super) fn encode_statfs(sfs: Option<&rustix::fs::StatFs>, magic: i64) -> [u8; STATFS_SIZE] {
    let mut b = [0u8; STATFS_SIZE];
    match sfs {
        Some(s) => {
            put(&mut b, 0, &s.f_type.to_le_bytes());
            put(&mut b, 8, &s.f_bsize.to_le_bytes());
            put(&mut b, 16, &s.f_blocks.to_le_bytes());
            put(&mut b, 24, &s.f_bfree.to_le_bytes());
            put(&mut b, 32, &s.f_bavail.to_le_bytes());
            put(&mut b, 40, &s.f_files.to_le_bytes());
            put(&mut b, 48, &s.f_ffree.to_le_bytes());
            put(&mut b, 64, &s.f_namelen.to_le_bytes());
            put(&mut b, 72, &s.f_frsize.to_le_bytes());
            put(&mut b, 80, &(s.f_flags | ST_RDONLY).to_le_bytes());
        }
        None => {
            put(&mut b, 0, &magic.to_le_bytes());
            put(&mut b, 8, &4096i64.to_le_bytes());
            put(&mut b, 64, &255i64.to_le_bytes());
            put(&mut b, 72, &4096i64.to_le_bytes());
        }
    }
    b
}

/// statfs of what `t` names: the host's values, read-only (ST_RDONLY)
/// except under the write roots.
pub(super) fn statfs_of(p: &Process, t: &Target) -> Result<[u8; STATFS_SIZE], Errno> {
    let host = |fd: &OwnedFd, path: &[u8]| -> Result<_, Errno> {
        let mut b = encode_statfs(Some(&rustix::fs::fstatfs(fd)?), 0);
        if in_write_roots(p, path, &rustix::fs::fstat(fd)?) {
            let flags = i64::from_le_bytes(b[80..88].try_into().map_err(|_| Errno::EIO)?);
            put(&mut b, 80, &(flags & !ST_RDONLY).to_le_bytes());
        }
        Ok(b)
    };
    match t {
        Target::Dev(_) => Ok(encode_statfs(None, TMPFS_MAGIC)),
        Target::Virt(path, _) if path.starts_with(b"/proc") => {
            Ok(encode_statfs(None, PROC_SUPER_MAGIC))
        }
        Target::Virt(..) => Ok(encode_statfs(None, TMPFS_MAGIC)),
        Target::Host(r) => host(&r.fd, &r.path),
        Target::Fd(f) => {
            let f = lock(f);
            match &f.kind {
                FileKind::File { fd, path }
                | FileKind::Dir { fd, path }
                | FileKind::PathOnly { fd, path } => host(fd, path),
                FileKind::Pipe(PipeEnd {
                    node: Some(node), ..
                }) => host(&node.fd, &node.path),
                FileKind::Pipe(_) => Ok(encode_statfs(None, PIPEFS_MAGIC)),
                FileKind::Pty(end) if !end.master => Ok(encode_statfs(None, DEVPTS_MAGIC)),
                k => match host_std(k) {
                    Some(h) => Ok(encode_statfs(Some(&rustix::fs::fstatfs(h.as_fd())?), 0)),
                    None => Ok(encode_statfs(None, TMPFS_MAGIC)),
                },
            }
        }
    }
}

/// Implements statfs(2).
pub(super) fn sys_statfs(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let path = read_path(mem, a[0])?;
    let b = statfs_of(p, &lookup(p, AT_FDCWD, &path, true)?)?;
    mem.write(a[1], &b)?;
    Ok(0)
}

/// Implements fstatfs(2).
pub(super) fn sys_fstatfs(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let b = statfs_of(p, &Target::Fd(p.fds.get(a[0] as i32)?))?;
    mem.write(a[1], &b)?;
    Ok(0)
}
