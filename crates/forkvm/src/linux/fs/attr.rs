//! Ownership as the guest sees it, and the metadata changes allowed under
//! `--allow-write` roots: chmod, chown, utimensat, truncate.
//!
//! # Identity
//!
//! The guest runs as uid/gid [`GUEST_ID`] (1000), while the host files it
//! sees belong to host users. As a user namespace with one mapped id does,
//! the invoking host user's effective uid (and gid) is shown as the guest's
//! own id, and every other owner as the overflow id 65534 ("nobody"), so
//! the guest never mistakes a stranger's file for its own. Permission
//! checks made here (access, chmod, chown, utimensat, writes) use the same
//! view: the guest may change what it owns, and only to ids it has.

use super::*;
use std::os::fd::AsRawFd;

/// The guest's uid and gid.
pub(super) const GUEST_ID: u32 = crate::linux::process::UID as u32;
/// The id shown for host owners the guest has no name for (overflowuid).
pub(super) const OVERFLOW_ID: u32 = 65534;

const UTIME_NOW: i64 = (1 << 30) - 1;
const UTIME_OMIT: i64 = (1 << 30) - 2;

/// The host user forkvm runs as, asked once: forkvm never changes it, and
/// every ownership check on a path (each directory of a walk) needs it.
pub(super) fn host_uid() -> u32 {
    static UID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UID.get_or_init(|| rustix::process::geteuid().as_raw())
}

/// The host group forkvm runs as, asked once (see [`host_uid`]).
fn host_gid() -> u32 {
    static GID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *GID.get_or_init(|| rustix::process::getegid().as_raw())
}

/// The owner a host uid shows as in the guest.
pub(super) fn guest_uid(host: u32) -> u32 {
    if host == host_uid() {
        GUEST_ID
    } else {
        OVERFLOW_ID
    }
}

/// The group a host gid shows as in the guest.
pub(super) fn guest_gid(host: u32) -> u32 {
    if host == host_gid() {
        GUEST_ID
    } else {
        OVERFLOW_ID
    }
}

/// Whether the guest owns a host object.
pub(super) fn guest_owns(st: &Stat) -> bool {
    st.st_uid == host_uid()
}

/// Whether the guest may access a host object with `want` (R=4, W=2, X=1
/// bits), judged from its mode and the guest's view of its owner.
pub(super) fn guest_may(st: &Stat, want: u32) -> bool {
    let mode = st.st_mode;
    let bits = if guest_owns(st) {
        (mode >> 6) & 7
    } else if st.st_gid == host_gid() {
        (mode >> 3) & 7
    } else {
        mode & 7
    };
    bits & want == want
}

/// A host object that a metadata change applies to, known to lie under a
/// `--allow-write` root.
pub(super) struct Obj {
    /// A descriptor of it (O_PATH or real).
    fd: Rc<OwnedFd>,
    /// Its host metadata.
    stat: Stat,
    /// For a symlink (not followed): its directory and name.
    link_at: Option<(Rc<OwnedFd>, Vec<u8>)>,
}

impl Obj {
    /// The magic /proc path of the descriptor: reaches exactly this object.
    fn proc_path(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }

    fn is_link(&self) -> bool {
        self.stat.st_mode & S_IFMT == S_IFLNK
    }

    /// A directory.
    pub(super) fn is_dir(&self) -> bool {
        self.stat.st_mode & S_IFMT == S_IFDIR
    }

    /// Gives it the new name `name` in `dir` (a hard link).
    pub(super) fn link_to(&self, dir: &OwnedFd, name: &[u8]) -> Result<(), Errno> {
        match &self.link_at {
            // The symlink itself: by its name, never followed.
            Some((odir, oname)) => {
                rustix::fs::linkat(&**odir, oname.as_slice(), dir, name, AtFlags::empty())?
            }
            // Exactly this object, through its descriptor's magic link.
            None => rustix::fs::linkat(
                CWD,
                self.proc_path().as_str(),
                dir,
                name,
                AtFlags::SYMLINK_FOLLOW,
            )?,
        }
        Ok(())
    }
}

/// Whether `r` (resolved in the whole namespace) is also reachable, as the
/// same host object, under a write root.
/// A question only (access, statfs): a fork's write roots are not copied up.
pub(super) fn in_write_roots(p: &Process, path: &[u8], st: &Stat) -> bool {
    same_under(&change_roots(p), path, st)
}

/// As [`in_write_roots`], before a change: a fork's write roots are copied up
/// first, so a descriptor of the host's file is no longer under them.
fn in_write_roots_for_change(p: &Process, path: &[u8], st: &Stat) -> bool {
    match write_roots(p) {
        Ok(roots) => same_under(&roots, path, st),
        Err(_) => false,
    }
}

fn same_under(roots: &[Root], path: &[u8], st: &Stat) -> bool {
    match walk(roots, path, false) {
        Ok(Some(w)) => {
            !matches!(w.reach, Reach::Link)
                && w.stat.st_dev == st.st_dev
                && w.stat.st_ino == st.st_ino
        }
        _ => false,
    }
}

fn obj_of_resolved(r: Resolved) -> Result<Obj, Errno> {
    let link_at = if r.stat.st_mode & S_IFMT == S_IFLNK {
        match &r.reach {
            Reach::Child { parent, name } => Some((parent.clone(), name.clone())),
            _ => return Err(Errno::EROFS),
        }
    } else {
        None
    };
    Ok(Obj {
        fd: r.fd,
        stat: r.stat,
        link_at,
    })
}

/// The object an open descriptor refers to, if it may be changed.
pub(super) fn obj_of_fd(p: &Process, fd: i32) -> Result<Obj, Errno> {
    obj_of_file(p, &p.fds.get(fd)?)
}

/// As [`obj_of_fd`] for an open file description.
fn obj_of_file(p: &Process, file: &FileRef) -> Result<Obj, Errno> {
    let f = lock(file);
    let (hfd, path) = match &f.kind {
        FileKind::File { fd, path }
        | FileKind::Dir { fd, path }
        | FileKind::PathOnly { fd, path } => (fd, path.clone()),
        _ => return Err(Errno::EROFS),
    };
    let stat = rustix::fs::fstat(hfd)?;
    // Opened for writing means opened under a write root; otherwise its
    // path must still lead there.
    let writable = matches!(f.kind, FileKind::File { .. }) && f.writable();
    if !writable && !in_write_roots_for_change(p, &path, &stat) {
        return Err(Errno::EROFS);
    }
    Ok(Obj {
        fd: Rc::new(hfd.try_clone()?),
        stat,
        link_at: None,
    })
}

/// The object a path argument of a `*at` metadata call names (honouring
/// AT_SYMLINK_NOFOLLOW and AT_EMPTY_PATH), if it may be changed: EROFS for
/// objects outside the write roots, ENOENT for ones that do not exist.
pub(super) fn obj_at(
    p: &Process,
    mem: &GuestMemory,
    dirfd: i32,
    addr: u64,
    flags: u64,
) -> Result<Obj, Errno> {
    let empty_ok = flags & AT_EMPTY_PATH != 0;
    let path = if addr == 0 && empty_ok {
        Vec::new()
    } else {
        read_path(mem, addr)?
    };
    if path.is_empty() {
        if !empty_ok {
            return Err(Errno::ENOENT);
        }
        if dirfd != AT_FDCWD {
            return obj_of_fd(p, dirfd);
        }
    }
    let follow = flags & AT_SYMLINK_NOFOLLOW == 0;
    let abs = if path.is_empty() {
        cwd_path(p)
    } else {
        absolute(p, dirfd, &path)?
    };
    // Devices, descriptors and generated files are not the guest's to change;
    // a file or directory reached through /proc/self/fd/N is the one open
    // there (glibc's fchmodat with AT_SYMLINK_NOFOLLOW chmods
    // /proc/self/fd/N of an O_PATH descriptor: GNU tar -p).
    match resolve(p, &abs, follow) {
        Ok(Target::Fd(f))
            if matches!(
                lock(&f).kind,
                FileKind::File { .. } | FileKind::Dir { .. } | FileKind::PathOnly { .. }
            ) =>
        {
            return obj_of_file(p, &f);
        }
        Ok(Target::Fd(_) | Target::Dev(_) | Target::Virt(..)) => return Err(Errno::EPERM),
        Ok(Target::Host(_)) | Err(_) => {}
    }
    match walk(&write_roots(p)?, &abs, follow) {
        Ok(Some(r)) if !matches!(r.reach, Reach::Link) => obj_of_resolved(r),
        Ok(_) => Err(Errno::EROFS),
        Err(Errno::ENOENT) => {
            // Exists elsewhere in the namespace: read-only there.
            walk_host(&roots(p), &abs, follow)?;
            Err(Errno::EROFS)
        }
        Err(e) => Err(e),
    }
}

/// chmod of `o` with the guest's rights.
pub(super) fn chmod_obj(o: &Obj, mode: u64) -> SysResult {
    if o.is_link() {
        return Err(Errno::EOPNOTSUPP);
    }
    if !guest_owns(&o.stat) {
        return Err(Errno::EPERM);
    }
    let mut mode = mode as u32 & 0o7777;
    // Without the group, the set-group-ID bit is silently dropped.
    if o.stat.st_gid != host_gid() {
        mode &= !0o2000;
    }
    // A guest's file is the host user's file (root's, when forkvm runs as
    // root): a set-user-ID or set-group-ID program the guest wrote would
    // run with that user's rights for anyone on the host. Those bits are
    // dropped on files (a directory keeps set-group-ID, which grants nothing).
    if o.stat.st_mode & S_IFMT != S_IFDIR {
        mode &= !0o6000;
    }
    rustix::fs::chmodat(
        CWD,
        o.proc_path().as_str(),
        Mode::from_bits_truncate(mode),
        AtFlags::empty(),
    )?;
    Ok(0)
}

/// chown of `o` with the guest's rights: only to its own uid and gid.
pub(super) fn chown_obj(o: &Obj, uid: u64, gid: u64) -> SysResult {
    let uid = uid as u32;
    let gid = gid as u32;
    if uid == u32::MAX && gid == u32::MAX {
        return Ok(0);
    }
    let own = guest_owns(&o.stat);
    if (uid != u32::MAX && (uid != GUEST_ID || !own))
        || (gid != u32::MAX && (gid != GUEST_ID || !own))
    {
        return Err(Errno::EPERM);
    }
    let hu = (uid != u32::MAX).then(|| rustix::process::Uid::from_raw(host_uid()));
    let hg = (gid != u32::MAX).then(|| rustix::process::Gid::from_raw(host_gid()));
    rustix::fs::chownat(&*o.fd, "", hu, hg, AtFlags::EMPTY_PATH)?;
    Ok(0)
}

/// utimensat of `o` with the guest's rights; `times` None means now.
pub(super) fn utimes_obj(o: &Obj, times: Option<[(i64, i64); 2]>) -> SysResult {
    use rustix::fs::{Timespec, Timestamps};
    let t = times.unwrap_or([(0, UTIME_NOW), (0, UTIME_NOW)]);
    for &(_, nsec) in &t {
        if nsec != UTIME_NOW && nsec != UTIME_OMIT && !(0..1_000_000_000).contains(&nsec) {
            return Err(Errno::EINVAL);
        }
    }
    if t.iter().all(|&(_, n)| n == UTIME_OMIT) {
        return Ok(0);
    }
    let only_now = t.iter().all(|&(_, n)| n == UTIME_NOW || n == UTIME_OMIT);
    if !guest_owns(&o.stat) {
        // Setting the time to now needs write access; anything else ownership.
        if !only_now {
            return Err(Errno::EPERM);
        }
        if o.is_link() || !guest_may(&o.stat, 2) {
            return Err(Errno::EACCES);
        }
    }
    let ts = |(sec, nsec): (i64, i64)| Timespec {
        tv_sec: sec,
        tv_nsec: nsec as _,
    };
    let stamps = Timestamps {
        last_access: ts(t[0]),
        last_modification: ts(t[1]),
    };
    match &o.link_at {
        Some((dir, name)) => {
            rustix::fs::utimensat(&**dir, name.as_slice(), &stamps, AtFlags::SYMLINK_NOFOLLOW)?
        }
        None => rustix::fs::utimensat(CWD, o.proc_path().as_str(), &stamps, AtFlags::empty())?,
    }
    Ok(0)
}

/// Reads the `struct timespec[2]` of utimensat (NULL: now).
fn read_times(mem: &GuestMemory, addr: u64) -> Result<Option<[(i64, i64); 2]>, Errno> {
    if addr == 0 {
        return Ok(None);
    }
    let b = mem.read(addr, 32)?;
    let at = |o: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[o..o + 8]);
        i64::from_le_bytes(x)
    };
    Ok(Some([(at(0), at(8)), (at(16), at(24))]))
}

/// EBADF for an O_PATH descriptor (fchmod, fchown and futimens need a real one).
fn not_path_only(p: &Process, fd: i32) -> Result<(), Errno> {
    let file = p.fds.get(fd)?;
    if lock(&file).path_only() {
        return Err(Errno::EBADF);
    }
    Ok(())
}

/// Implements chmod(2) under `--allow-write` roots (elsewhere EROFS).
pub(super) fn sys_chmod(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    chmod_obj(&obj_at(p, mem, AT_FDCWD, a[0], 0)?, a[1])
}

/// Implements fchmodat(2) under `--allow-write` roots (it has no flags argument).
pub(super) fn sys_fchmodat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    chmod_obj(&obj_at(p, mem, a[0] as i32, a[1], 0)?, a[2])
}

/// Implements fchmodat2(2) under `--allow-write` roots.
pub(super) fn sys_fchmodat2(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let flags = a[3] as u32 as u64;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    chmod_obj(&obj_at(p, mem, a[0] as i32, a[1], flags)?, a[2])
}

/// Implements fchmod(2) for files under `--allow-write` roots.
pub(super) fn sys_fchmod(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    not_path_only(p, a[0] as i32)?;
    chmod_obj(&obj_of_fd(p, a[0] as i32)?, a[1])
}

/// Implements chown(2) under `--allow-write` roots.
pub(super) fn sys_chown(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    chown_obj(&obj_at(p, mem, AT_FDCWD, a[0], 0)?, a[1], a[2])
}

/// Implements lchown(2) under `--allow-write` roots.
pub(super) fn sys_lchown(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    chown_obj(
        &obj_at(p, mem, AT_FDCWD, a[0], AT_SYMLINK_NOFOLLOW)?,
        a[1],
        a[2],
    )
}

/// Implements fchownat(2) under `--allow-write` roots.
pub(super) fn sys_fchownat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let flags = a[4] as u32 as u64;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    chown_obj(&obj_at(p, mem, a[0] as i32, a[1], flags)?, a[2], a[3])
}

/// Implements fchown(2) for files under `--allow-write` roots.
pub(super) fn sys_fchown(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    not_path_only(p, a[0] as i32)?;
    chown_obj(&obj_of_fd(p, a[0] as i32)?, a[1], a[2])
}

/// Implements utimensat(2) (and futimens) under `--allow-write` roots.
pub(super) fn sys_utimensat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let flags = a[3] as u32 as u64;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let times = read_times(mem, a[2])?;
    let obj = if a[1] == 0 {
        // futimens(fd): the descriptor itself.
        if a[0] as i32 == AT_FDCWD {
            return Err(Errno::EFAULT);
        }
        not_path_only(p, a[0] as i32)?;
        obj_of_fd(p, a[0] as i32)?
    } else {
        obj_at(p, mem, a[0] as i32, a[1], flags)?
    };
    utimes_obj(&obj, times)
}

/// Implements utimes(2) under `--allow-write` roots.
pub(super) fn sys_utimes(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let times = if a[1] == 0 {
        None
    } else {
        let b = mem.read(a[1], 32)?;
        let at = |o: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            i64::from_le_bytes(x)
        };
        let tv = |s: i64, us: i64| -> Result<(i64, i64), Errno> {
            if !(0..1_000_000).contains(&us) {
                return Err(Errno::EINVAL);
            }
            Ok((s, us * 1000))
        };
        Some([tv(at(0), at(8))?, tv(at(16), at(24))?])
    };
    utimes_obj(&obj_at(p, mem, AT_FDCWD, a[0], 0)?, times)
}

/// Implements truncate(2) under `--allow-write` roots.
pub(super) fn sys_truncate(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if (a[1] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    let o = obj_at(p, mem, AT_FDCWD, a[0], 0)?;
    match o.stat.st_mode & S_IFMT {
        S_IFDIR => return Err(Errno::EISDIR),
        S_IFREG => {}
        _ => return Err(Errno::EINVAL),
    }
    // Charged by where the file is, not by the text of its path (a link or
    // "a/.." may lead into the private /tmp).
    let abs = absolute(p, AT_FDCWD, &read_path(mem, a[0])?)?;
    let canon = walk_host(&roots(p), &abs, true)?.path;
    if is_scratch_path(p, &canon) {
        p.tmp
            .charge(o.stat.st_size.max(0) as u64, a[1], mem.size())?;
    }
    if !guest_may(&o.stat, 2) {
        return Err(Errno::EACCES);
    }
    let fd = rustix::fs::open(
        o.proc_path().as_str(),
        OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    if st.st_dev != o.stat.st_dev || st.st_ino != o.stat.st_ino {
        return Err(Errno::ENOENT);
    }
    rustix::fs::ftruncate(&fd, a[1])?;
    Ok(0)
}
