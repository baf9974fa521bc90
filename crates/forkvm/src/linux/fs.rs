//! File-system syscalls: open, stat, getdents, readlink, access, cwd, and
//! the refused namespace changes (mkdir, unlink, rename, ...).
//!
//! # Path policy
//!
//! The guest sees a read-only namespace made of the host paths in
//! `policy.allow_read`, each at its own path. Directories above an allowed
//! root exist only as a way through (they are never openable: ENOENT), and
//! everything else is ENOENT. Paths are resolved here, one component at a
//! time, never by the host kernel: every step is an `openat2` of a single
//! name under the previous directory with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` and `O_PATH | O_NOFOLLOW`.
//! `..` is applied to the guest path we keep (so it cannot climb above an
//! allowed root on the host), and symlinks are read and their targets
//! resolved again inside the guest namespace, so an absolute or relative
//! link that points outside the allowed roots ends in ENOENT. Magic links in
//! /proc are read as plain text the same way, and `/proc/self`,
//! `/proc/thread-self` and `/proc/<pid>` are hidden even if /proc is
//! allowed, since they would describe the host process.
//!
//! Above the roots, guest paths are host paths; a host symlink there (say
//! `/lib -> usr/lib` when the root is the canonical `/usr/lib`) is followed
//! like any other link, and is itself visible (lstat/readlink) only when it
//! leads back into the namespace. Directories above the roots answer
//! readlink with EINVAL, so realpath() works, and are otherwise ENOENT.

use super::fdtable::{lock, oflags::*, FileKind, FileRef, OpenFile};
use super::io::{guest_buf_mut, host_std};
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Policy, Process, SysResult};
use crate::memory::GuestMemory;
use rustix::fs::{Access, AtFlags, Mode, OFlags, ResolveFlags, Stat, CWD};
use std::collections::VecDeque;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

/// Longest path the guest may pass, including the NUL (PATH_MAX).
pub const PATH_MAX: u64 = 4096;
/// Symlinks followed in one lookup before ELOOP (MAXSYMLINKS).
const MAX_LINKS: u32 = 40;

const AT_FDCWD: i32 = -100;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const AT_EACCESS: u64 = 0x200;
const AT_NO_AUTOMOUNT: u64 = 0x800;
const AT_EMPTY_PATH: u64 = 0x1000;
const AT_STATX_SYNC_TYPE: u64 = 0x6000;
const STATX_BASIC_STATS: u32 = 0x7ff;
const STATX_RESERVED: u32 = 0x8000_0000;

const S_IFMT: u32 = 0o170000;
const S_IFIFO: u32 = 0o010000;
const S_IFCHR: u32 = 0o020000;
const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;

const W_OK: u64 = 2;
const PROC_SUPER_MAGIC: i64 = 0x9fa0;
const PIPEFS_MAGIC: i64 = 0x5049_5045;
const TMPFS_MAGIC: i64 = 0x0102_1994;
const ST_RDONLY: i64 = 1;

/// Size of the x86-64 `struct stat`.
const STAT_SIZE: usize = 144;
/// Size of `struct statx`.
const STATX_SIZE: usize = 256;
/// Size of the x86-64 `struct statfs`.
const STATFS_SIZE: usize = 120;

/// Reads a guest path: EFAULT on a bad pointer, ENAMETOOLONG past [`PATH_MAX`].
pub fn read_path(mem: &GuestMemory, addr: u64) -> Result<Vec<u8>, Errno> {
    match mem.read_cstr(addr, PATH_MAX - 1) {
        Ok(s) => Ok(s.to_vec()),
        Err(_) if mem.read(addr, PATH_MAX).is_ok() => Err(Errno::ENAMETOOLONG),
        Err(_) => Err(Errno::EFAULT),
    }
}

fn components(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// An allowed host root, as guest path components.
struct Root {
    comps: Vec<Vec<u8>>,
    host: PathBuf,
}

impl Root {
    fn is(&self, path: &[&[u8]]) -> bool {
        self.comps.len() == path.len() && self.comps.iter().zip(path).all(|(a, b)| a == b)
    }

    fn is_below(&self, path: &[&[u8]]) -> bool {
        self.comps.len() > path.len() && self.comps.iter().zip(path).all(|(a, b)| a == b)
    }
}

/// The usable roots of the policy: absolute paths without `..`.
fn roots(policy: &Policy) -> Vec<Root> {
    to_roots(policy.allow_read.iter().chain(&policy.allow_write))
}

/// The roots the guest may change things under (`--allow-write`).
fn write_roots(policy: &Policy) -> Vec<Root> {
    to_roots(policy.allow_write.iter())
}

fn to_roots<'a>(paths: impl Iterator<Item = &'a std::path::PathBuf>) -> Vec<Root> {
    paths
        .filter_map(|p| {
            if !p.is_absolute() {
                return None;
            }
            let mut comps = Vec::new();
            for c in p.components() {
                match c {
                    Component::RootDir | Component::CurDir => {}
                    Component::Normal(s) => comps.push(s.as_bytes().to_vec()),
                    Component::ParentDir | Component::Prefix(_) => return None,
                }
            }
            Some(Root {
                comps,
                host: p.clone(),
            })
        })
        .collect()
}

/// One directory on the way down a path.
struct Level {
    name: Vec<u8>,
    /// O_PATH descriptor; None for a directory above every allowed root.
    fd: Option<Rc<OwnedFd>>,
    stat: Option<Stat>,
    /// Host path when this level is exactly an allowed root.
    root: Option<PathBuf>,
}

/// How to open a resolved object again with real flags.
enum Reach {
    /// An allowed root, by its host path.
    Root(PathBuf),
    /// A name under an open directory.
    Child { parent: Rc<OwnedFd>, name: Vec<u8> },
    /// A symlink above the roots: only ever looked at, never opened.
    Link,
}

/// A path resolved inside the guest namespace.
struct Resolved {
    /// O_PATH descriptor of the object (the symlink itself when not followed).
    fd: Rc<OwnedFd>,
    /// Host metadata of `fd`.
    stat: Stat,
    /// Canonical guest path (no symlinks, `.` or `..`).
    path: Vec<u8>,
    reach: Reach,
}

fn is_proc_pid_entry(name: &[u8]) -> bool {
    name == b"self" || name == b"thread-self" || name.iter().all(u8::is_ascii_digit)
}

/// Opens one name under `dir` as O_PATH, never following anything.
fn open_child(dir: &OwnedFd, dir_stat: &Stat, name: &[u8]) -> Result<OwnedFd, Errno> {
    // /proc/self and friends would describe the host process.
    if dir_stat.st_ino == 1 && is_proc_pid_entry(name) {
        if let Ok(sfs) = rustix::fs::fstatfs(dir) {
            if sfs.f_type == PROC_SUPER_MAGIC {
                return Err(Errno::ENOENT);
            }
        }
    }
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(dir, name, flags, Mode::empty(), resolve) {
        // Kernels before 5.6 (or seccomp filters) without openat2: a single
        // name with O_NOFOLLOW is just as contained.
        Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
            Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
        }
        r => Ok(r?),
    }
}

fn open_root(host: &Path) -> Result<OwnedFd, Errno> {
    Ok(rustix::fs::open(
        host,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

fn level_names(stack: &[Level]) -> Vec<&[u8]> {
    stack.iter().skip(1).map(|l| l.name.as_slice()).collect()
}

fn canonical(stack: &[Level]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in stack.iter().skip(1) {
        out.push(b'/');
        out.extend_from_slice(&l.name);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

/// Queues a symlink's target in place of the link.
fn follow_link(
    stack: &mut Vec<Level>,
    todo: &mut VecDeque<Vec<u8>>,
    target: &[u8],
    links: &mut u32,
) -> Result<(), Errno> {
    *links += 1;
    if *links > MAX_LINKS {
        return Err(Errno::ELOOP);
    }
    if target.is_empty() {
        return Err(Errno::ENOENT);
    }
    if target.starts_with(b"/") {
        stack.truncate(1);
    }
    let mut expanded = components(target);
    if target.ends_with(b"/") {
        expanded.push_back(b".".to_vec());
    }
    for c in expanded.into_iter().rev() {
        todo.push_front(c);
    }
    Ok(())
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = dir.to_vec();
    if !out.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

/// Resolves an absolute guest path inside the namespace of `roots`: a host
/// object, or None for a directory above the roots (a way through, never an
/// object itself).
fn walk(roots: &[Root], path: &[u8], follow_last: bool) -> Result<Option<Resolved>, Errno> {
    walk_inner(roots, path, follow_last, &mut 0)
}

fn walk_inner(
    roots: &[Root],
    path: &[u8],
    follow_last: bool,
    links: &mut u32,
) -> Result<Option<Resolved>, Errno> {
    let mut top = Level {
        name: Vec::new(),
        fd: None,
        stat: None,
        root: None,
    };
    if let Some(r) = roots.iter().find(|r| r.comps.is_empty()) {
        let fd = open_root(&r.host)?;
        top.stat = Some(rustix::fs::fstat(&fd)?);
        top.fd = Some(Rc::new(fd));
        top.root = Some(r.host.clone());
    }
    let mut stack = vec![top];
    let mut todo = components(path);
    if path.ends_with(b"/") && !todo.is_empty() {
        // "name/" must be a directory (and a symlink there is followed).
        todo.push_back(b".".to_vec());
    }
    while let Some(comp) = todo.pop_front() {
        if comp == b"." {
            continue;
        }
        if comp == b".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let last = todo.is_empty();
        let parent = stack.last().ok_or(Errno::ENOENT)?;
        let (fd, root) = match (&parent.fd, &parent.stat) {
            (Some(dir), Some(st)) => (open_child(dir, st, &comp)?, None),
            _ => {
                let mut want = level_names(&stack);
                want.push(&comp);
                if let Some(r) = roots.iter().find(|r| r.is(&want)) {
                    (open_root(&r.host)?, Some(r.host.clone()))
                } else if roots.iter().any(|r| r.is_below(&want)) {
                    stack.push(Level {
                        name: comp,
                        fd: None,
                        stat: None,
                        root: None,
                    });
                    continue;
                } else {
                    // Above the roots, guest paths are host paths. A host
                    // symlink here (/lib -> usr/lib with the root /usr/lib,
                    // /tmp -> private/tmp) is followed inside the namespace;
                    // anything else does not exist for the guest.
                    let link = join(&canonical(&stack), &comp);
                    let host = PathBuf::from(std::ffi::OsStr::from_bytes(&link));
                    let Ok(target) = rustix::fs::readlinkat(CWD, &host, Vec::new()) else {
                        return Err(Errno::ENOENT);
                    };
                    let target = target.into_bytes();
                    if !last || follow_last {
                        follow_link(&mut stack, &mut todo, &target, links)?;
                        continue;
                    }
                    // The link itself is visible only if it leads into the namespace.
                    *links += 1;
                    if *links > MAX_LINKS {
                        return Err(Errno::ELOOP);
                    }
                    let dest = if target.starts_with(b"/") {
                        target
                    } else {
                        join(&canonical(&stack), &target)
                    };
                    walk_inner(roots, &dest, true, links)?;
                    let fd = rustix::fs::open(
                        &host,
                        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?;
                    let stat = rustix::fs::fstat(&fd)?;
                    if stat.st_mode & S_IFMT != S_IFLNK {
                        return Err(Errno::ENOENT);
                    }
                    return Ok(Some(Resolved {
                        fd: Rc::new(fd),
                        stat,
                        path: link,
                        reach: Reach::Link,
                    }));
                }
            }
        };
        let st = rustix::fs::fstat(&fd)?;
        let ty = st.st_mode & S_IFMT;
        if ty == S_IFLNK && (!last || follow_last) {
            let target = rustix::fs::readlinkat(&fd, "", Vec::new())?.into_bytes();
            follow_link(&mut stack, &mut todo, &target, links)?;
            continue;
        }
        if !last && ty != S_IFDIR {
            return Err(Errno::ENOTDIR);
        }
        stack.push(Level {
            name: comp,
            fd: Some(Rc::new(fd)),
            stat: Some(st),
            root,
        });
    }
    let path = canonical(&stack);
    let top = stack.pop().ok_or(Errno::ENOENT)?;
    let (Some(fd), Some(stat)) = (top.fd, top.stat) else {
        return Ok(None);
    };
    let reach = match top.root {
        Some(host) => Reach::Root(host),
        None => Reach::Child {
            parent: stack
                .last()
                .and_then(|l| l.fd.clone())
                .ok_or(Errno::ENOENT)?,
            name: top.name,
        },
    };
    Ok(Some(Resolved {
        fd,
        stat,
        path,
        reach,
    }))
}

/// Resolves a path that must name a host object (directories above the roots are ENOENT).
fn walk_host(roots: &[Root], path: &[u8], follow_last: bool) -> Result<Resolved, Errno> {
    walk(roots, path, follow_last)?.ok_or(Errno::ENOENT)
}

/// Opens a resolved object again with real `flags` and checks it is the same one.
fn reopen(r: &Resolved, flags: OFlags) -> Result<OwnedFd, Errno> {
    let fd = match &r.reach {
        Reach::Root(host) => rustix::fs::open(host, flags | OFlags::CLOEXEC, Mode::empty())?,
        Reach::Child { parent, name } => rustix::fs::openat(
            parent.as_fd(),
            name.as_slice(),
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?,
        Reach::Link => return Err(Errno::ELOOP),
    };
    let st = rustix::fs::fstat(&fd)?;
    if st.st_dev != r.stat.st_dev || st.st_ino != r.stat.st_ino {
        return Err(Errno::ENOENT);
    }
    Ok(fd)
}

fn owned(fd: Rc<OwnedFd>) -> Result<OwnedFd, Errno> {
    Rc::try_unwrap(fd).or_else(|rc| rc.try_clone().map_err(Errno::from))
}

/// Applies `.` and `..` textually (only to recognise the emulated device paths).
fn lexical(path: &[u8]) -> Vec<u8> {
    let mut out: Vec<&[u8]> = Vec::new();
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    let mut s = Vec::new();
    for c in out {
        s.push(b'/');
        s.extend_from_slice(c);
    }
    if s.is_empty() {
        s.push(b'/');
    }
    s
}

/// Devices emulated in-process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dev {
    Null,
    Zero,
    Urandom,
}

/// What a guest path names.
enum Target {
    /// An emulated device node.
    Dev(Dev),
    /// An already-open file (/dev/stdout, /proc/self/fd/N, ...).
    Fd(FileRef),
    /// A host object inside the allowed roots.
    Host(Resolved),
}

fn parse_fd(s: &[u8]) -> Option<i32> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// The emulated paths: /dev/{null,zero,urandom,random,stdin,stdout,stderr,fd/N}, /proc/self/fd/N.
fn special(p: &Process, abs: &[u8]) -> Option<Result<Target, Errno>> {
    let norm = lexical(abs);
    let fd = match norm.as_slice() {
        b"/dev/null" => return Some(Ok(Target::Dev(Dev::Null))),
        b"/dev/zero" => return Some(Ok(Target::Dev(Dev::Zero))),
        b"/dev/urandom" | b"/dev/random" => return Some(Ok(Target::Dev(Dev::Urandom))),
        b"/dev/stdin" => 0,
        b"/dev/stdout" => 1,
        b"/dev/stderr" => 2,
        n => {
            let rest = n
                .strip_prefix(b"/dev/fd/")
                .or_else(|| n.strip_prefix(b"/proc/self/fd/"))?;
            match parse_fd(rest) {
                Some(fd) => fd,
                None => return Some(Err(Errno::ENOENT)),
            }
        }
    };
    Some(p.fds.get(fd).map(Target::Fd).map_err(|_| Errno::ENOENT))
}

/// The guest directory a relative path starts from.
fn base_dir(p: &Process, dirfd: i32) -> Result<Vec<u8>, Errno> {
    if dirfd == AT_FDCWD {
        return Ok(p.cwd.as_bytes().to_vec());
    }
    let file = p.fds.get(dirfd)?;
    let f = lock(&file);
    match &f.kind {
        FileKind::Dir { path, .. } => Ok(path.clone()),
        _ => Err(Errno::ENOTDIR),
    }
}

/// `path` made absolute against `dirfd` (AT_FDCWD: the cwd).
fn absolute(p: &Process, dirfd: i32, path: &[u8]) -> Result<Vec<u8>, Errno> {
    if path.starts_with(b"/") {
        return Ok(path.to_vec());
    }
    let mut abs = base_dir(p, dirfd)?;
    if !abs.ends_with(b"/") {
        abs.push(b'/');
    }
    abs.extend_from_slice(path);
    Ok(abs)
}

/// Looks a (non-empty) guest path up.
fn lookup(p: &Process, dirfd: i32, path: &[u8], follow: bool) -> Result<Target, Errno> {
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    let abs = absolute(p, dirfd, path)?;
    if let Some(t) = special(p, &abs) {
        return t;
    }
    Ok(Target::Host(walk_host(&roots(&p.policy), &abs, follow)?))
}

/// The object `dirfd` itself (AT_EMPTY_PATH).
fn lookup_fd(p: &Process, dirfd: i32) -> Result<Target, Errno> {
    if dirfd == AT_FDCWD {
        let cwd = p.cwd.clone();
        return lookup(p, AT_FDCWD, cwd.as_bytes(), true);
    }
    Ok(Target::Fd(p.fds.get(dirfd)?))
}

/// Reads the path argument of a `*at` call honouring AT_EMPTY_PATH (NULL allowed then).
fn lookup_at(
    p: &Process,
    mem: &GuestMemory,
    dirfd: i32,
    addr: u64,
    flags: u64,
) -> Result<Target, Errno> {
    let empty_ok = flags & AT_EMPTY_PATH != 0;
    let path = if addr == 0 && empty_ok {
        Vec::new()
    } else {
        read_path(mem, addr)?
    };
    if path.is_empty() {
        return if empty_ok {
            lookup_fd(p, dirfd)
        } else {
            Err(Errno::ENOENT)
        };
    }
    lookup(p, dirfd, &path, flags & AT_SYMLINK_NOFOLLOW == 0)
}

fn dev_kind(d: Dev) -> FileKind {
    match d {
        Dev::Null => FileKind::Null,
        Dev::Zero => FileKind::Zero,
        Dev::Urandom => FileKind::Urandom,
    }
}

fn do_open(
    p: &mut Process,
    mem: &GuestMemory,
    dirfd: i32,
    addr: u64,
    flags: u64,
    mode: u64,
) -> SysResult {
    let path = read_path(mem, addr)?;
    let flags = flags as u32;
    let path_only = flags & O_PATH != 0;
    let acc = flags & O_ACCMODE;
    if acc == O_ACCMODE && !path_only {
        return Err(Errno::EINVAL);
    }
    let cloexec = flags & O_CLOEXEC != 0;
    let status = (flags & (O_ACCMODE | O_APPEND | O_NONBLOCK)) | O_LARGEFILE;
    let target = if path.is_empty() {
        return Err(Errno::ENOENT);
    } else {
        let abs = absolute(p, dirfd, &path)?;
        special(p, &abs)
    };
    match target {
        Some(Err(e)) => return Err(e),
        Some(Ok(Target::Dev(d))) => {
            if flags & O_DIRECTORY != 0 {
                return Err(Errno::ENOTDIR);
            }
            if flags & (O_CREAT | O_EXCL) == O_CREAT | O_EXCL {
                return Err(Errno::EEXIST);
            }
            let status = if path_only { O_PATH } else { status };
            return Ok(p.fds.insert(OpenFile::new(dev_kind(d), status), cloexec)? as u64);
        }
        Some(Ok(Target::Fd(f))) => {
            return Ok(p.fds.insert_from(0, f, cloexec)? as u64);
        }
        Some(Ok(Target::Host(_))) | None => {}
    }
    let abs = lexical(&absolute(p, dirfd, &path)?);
    if let Some(data) = super::procfs::synthesize(p, mem, &abs) {
        if acc != O_RDONLY || flags & (O_CREAT | O_TRUNC) != 0 {
            return Err(Errno::EACCES);
        }
        let fd = super::procfs::memory_file(&data)?;
        let kind = FileKind::File { fd, path: abs };
        return Ok(p.fds.insert(OpenFile::new(kind, status), cloexec)? as u64);
    }
    if abs == b"/proc/self/exe" {
        let fd = rustix::fs::open(
            p.exe_path.as_str(),
            OFlags::RDONLY | OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|_| Errno::ENOENT)?;
        let kind = FileKind::File { fd, path: abs };
        return Ok(p.fds.insert(OpenFile::new(kind, status), cloexec)? as u64);
    }
    let writes = acc != O_RDONLY || flags & (O_CREAT | O_TRUNC | O_TMPFILE) != 0;
    if writes && !path_only {
        return open_for_writing(p, &abs, flags, mode, status, cloexec);
    }
    let abs = absolute(p, dirfd, &path)?;
    let r = walk_host(&roots(&p.policy), &abs, flags & O_NOFOLLOW == 0)?;
    let ty = r.stat.st_mode & S_IFMT;
    if flags & O_DIRECTORY != 0 && ty != S_IFDIR {
        return Err(Errno::ENOTDIR);
    }
    let gpath = r.path.clone();
    let (kind, status) = if path_only {
        let fd = owned(r.fd)?;
        let kind = match ty {
            S_IFDIR => FileKind::Dir { fd, path: gpath },
            S_IFREG => FileKind::File { fd, path: gpath },
            _ => FileKind::PathOnly { fd, path: gpath },
        };
        (kind, O_PATH)
    } else {
        match ty {
            S_IFDIR => (
                FileKind::Dir {
                    fd: reopen(&r, OFlags::RDONLY | OFlags::DIRECTORY)?,
                    path: gpath,
                },
                status,
            ),
            S_IFREG => (
                FileKind::File {
                    fd: reopen(&r, OFlags::RDONLY | OFlags::NOCTTY | OFlags::NONBLOCK)?,
                    path: gpath,
                },
                status,
            ),
            S_IFLNK => return Err(Errno::ELOOP),
            // FIFOs, sockets and device nodes of the host stay closed.
            _ => return Err(Errno::EACCES),
        }
    };
    Ok(p.fds.insert(OpenFile::new(kind, status), cloexec)? as u64)
}

/// Implements open(2).
fn sys_open(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_open(p, mem, AT_FDCWD, a[0], a[1], a[2])
}

/// Implements openat(2).
fn sys_openat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_open(p, mem, a[0] as i32, a[1], a[2], a[3])
}

/// Implements creat(2): open(O_CREAT|O_WRONLY|O_TRUNC), under `--allow-write` roots.
fn sys_creat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_open(
        p,
        mem,
        AT_FDCWD,
        a[0],
        u64::from(O_CREAT | O_WRONLY | O_TRUNC),
        a[1],
    )
}

/// The directory that will hold `abs` (which must lie under a write root)
/// and the new entry's name.
fn writable_parent(p: &Process, abs: &[u8]) -> Result<(OwnedFd, Vec<u8>, Vec<u8>), Errno> {
    let roots = write_roots(&p.policy);
    if roots.is_empty() {
        return Err(Errno::EROFS);
    }
    let norm = lexical(abs);
    let cut = norm.iter().rposition(|&b| b == b'/').ok_or(Errno::ENOENT)?;
    let (dir, name) = (&norm[..cut.max(1)], &norm[cut + 1..]);
    if name.is_empty() || name == b"." || name == b".." {
        return Err(Errno::EINVAL);
    }
    let parent = walk(&roots, dir, true)
        .map_err(|e| if e == Errno::ENOENT { Errno::EROFS } else { e })?
        .ok_or(Errno::EROFS)?;
    if parent.stat.st_mode & S_IFMT != S_IFDIR {
        return Err(Errno::ENOTDIR);
    }
    let fd = reopen(&parent, OFlags::RDONLY | OFlags::DIRECTORY)?;
    let mut guest = parent.path.clone();
    if guest != b"/" {
        guest.push(b'/');
    }
    guest.extend_from_slice(name);
    Ok((fd, name.to_vec(), guest))
}

/// open(2) with write access or O_CREAT/O_TRUNC: only under `--allow-write`
/// roots; the last component is never followed if it is a symlink.
fn open_for_writing(
    p: &mut Process,
    abs: &[u8],
    flags: u32,
    mode: u64,
    status: u32,
    cloexec: bool,
) -> SysResult {
    let (dir, name, guest) = writable_parent(p, abs).map_err(|e| match e {
        Errno::EROFS => Errno::EACCES,
        e => e,
    })?;
    let mut of = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
    of |= match flags & O_ACCMODE {
        O_WRONLY => OFlags::WRONLY,
        O_RDWR => OFlags::RDWR,
        _ => OFlags::RDONLY,
    };
    for (bit, f) in [
        (O_CREAT, OFlags::CREATE),
        (O_EXCL, OFlags::EXCL),
        (O_TRUNC, OFlags::TRUNC),
        (O_APPEND, OFlags::APPEND),
        (O_DIRECTORY, OFlags::DIRECTORY),
    ] {
        if flags & bit != 0 {
            of |= f;
        }
    }
    let mode = Mode::from_bits_truncate((mode as u32 & 0o777) & !p.fds.umask);
    let fd = rustix::fs::openat(&dir, name.as_slice(), of, mode).map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            Errno::ELOOP
        } else {
            Errno::from(e)
        }
    })?;
    let st = rustix::fs::fstat(&fd)?;
    let kind = match st.st_mode & S_IFMT {
        S_IFREG => FileKind::File { fd, path: guest },
        S_IFDIR => FileKind::Dir { fd, path: guest },
        _ => return Err(Errno::EACCES),
    };
    Ok(p.fds.insert(OpenFile::new(kind, status), cloexec)? as u64)
}

/// A path argument resolved for a change: (parent dir fd, name).
fn change_target(
    p: &Process,
    mem: &GuestMemory,
    dirfd: i32,
    addr: u64,
) -> Result<(OwnedFd, Vec<u8>), Errno> {
    let path = read_path(mem, addr)?;
    let abs = absolute(p, dirfd, &path)?;
    let (dir, name, _) = writable_parent(p, &abs)?;
    Ok((dir, name))
}

/// Implements mkdir(2) under `--allow-write` roots (elsewhere EROFS).
fn sys_mkdir(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_mkdir(p, mem, AT_FDCWD, a[0], a[1])
}

/// Implements mkdirat(2).
fn sys_mkdirat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_mkdir(p, mem, a[0] as i32, a[1], a[2])
}

fn do_mkdir(p: &mut Process, mem: &GuestMemory, dirfd: i32, addr: u64, mode: u64) -> SysResult {
    let (dir, name) = change_target(p, mem, dirfd, addr)?;
    let mode = Mode::from_bits_truncate((mode as u32 & 0o777) & !p.fds.umask);
    rustix::fs::mkdirat(&dir, name.as_slice(), mode)?;
    Ok(0)
}

/// Implements unlink(2).
fn sys_unlink(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_unlink(p, mem, AT_FDCWD, a[0], 0)
}

/// Implements rmdir(2).
fn sys_rmdir(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_unlink(p, mem, AT_FDCWD, a[0], AT_REMOVEDIR)
}

/// Implements unlinkat(2).
fn sys_unlinkat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[2] & !AT_REMOVEDIR != 0 {
        return Err(Errno::EINVAL);
    }
    do_unlink(p, mem, a[0] as i32, a[1], a[2])
}

const AT_REMOVEDIR: u64 = 0x200;

fn do_unlink(p: &mut Process, mem: &GuestMemory, dirfd: i32, addr: u64, flags: u64) -> SysResult {
    let (dir, name) = change_target(p, mem, dirfd, addr)?;
    let f = if flags & AT_REMOVEDIR != 0 {
        rustix::fs::AtFlags::REMOVEDIR
    } else {
        rustix::fs::AtFlags::empty()
    };
    rustix::fs::unlinkat(&dir, name.as_slice(), f)?;
    Ok(0)
}

/// Implements rename(2).
fn sys_rename(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_rename(p, mem, AT_FDCWD, a[0], AT_FDCWD, a[1], 0)
}

/// Implements renameat(2).
fn sys_renameat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_rename(p, mem, a[0] as i32, a[1], a[2] as i32, a[3], 0)
}

/// Implements renameat2(2) (RENAME_NOREPLACE only).
fn sys_renameat2(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_rename(p, mem, a[0] as i32, a[1], a[2] as i32, a[3], a[4])
}

fn do_rename(
    p: &mut Process,
    mem: &GuestMemory,
    olddir: i32,
    old: u64,
    newdir: i32,
    new: u64,
    flags: u64,
) -> SysResult {
    const RENAME_NOREPLACE: u64 = 1;
    if flags & !RENAME_NOREPLACE != 0 {
        return Err(Errno::EINVAL);
    }
    let (od, on) = change_target(p, mem, olddir, old)?;
    let (nd, nn) = change_target(p, mem, newdir, new)?;
    let f = if flags & RENAME_NOREPLACE != 0 {
        rustix::fs::RenameFlags::NOREPLACE
    } else {
        rustix::fs::RenameFlags::empty()
    };
    rustix::fs::renameat_with(&od, on.as_slice(), &nd, nn.as_slice(), f)?;
    Ok(0)
}

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
            uid: s.st_uid,
            gid: s.st_gid,
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
const fn makedev(major: u64, minor: u64) -> u64 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12) | ((major & !0xfff) << 32)
}

const fn dev_major(dev: u64) -> u32 {
    (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff)) as u32
}

const fn dev_minor(dev: u64) -> u32 {
    ((dev & 0xff) | ((dev >> 12) & !0xff)) as u32
}

fn dev_stat(d: Dev) -> StatInfo {
    let minor = match d {
        Dev::Null => 3,
        Dev::Zero => 5,
        Dev::Urandom => 9,
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
        FileKind::File { fd, .. } | FileKind::Dir { fd, .. } | FileKind::PathOnly { fd, .. } => {
            Ok(StatInfo::from(&rustix::fs::fstat(fd)?))
        }
        FileKind::Pipe(end) => {
            let uid = super::process::UID as u32;
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
        FileKind::Socket(s) => Ok(super::net::socket_stat(s)),
        FileKind::Null => Ok(dev_stat(Dev::Null)),
        FileKind::Zero => Ok(dev_stat(Dev::Zero)),
        FileKind::Urandom => Ok(dev_stat(Dev::Urandom)),
        k => match host_std(k) {
            Some(h) => Ok(StatInfo::from(&rustix::fs::fstat(h.as_fd())?)),
            None => Err(Errno::EBADF),
        },
    }
}

fn stat_of(t: &Target) -> Result<StatInfo, Errno> {
    match t {
        Target::Dev(d) => Ok(dev_stat(*d)),
        Target::Fd(f) => stat_of_file(&lock(f)),
        Target::Host(r) => Ok(StatInfo::from(&r.stat)),
    }
}

fn put(b: &mut [u8], off: usize, bytes: &[u8]) {
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

fn stat_path(p: &Process, mem: &mut GuestMemory, path: u64, buf: u64, follow: bool) -> SysResult {
    let path = read_path(mem, path)?;
    let st = stat_of(&lookup(p, AT_FDCWD, &path, follow)?)?;
    mem.write(buf, &encode_stat(&st))?;
    Ok(0)
}

/// Whether `path` (relative to the cwd) names something the guest may see,
/// with stat's errors (ENOENT, EACCES, ...) otherwise.
pub(super) fn check_path(p: &Process, path: &[u8], follow: bool) -> Result<(), Errno> {
    lookup(p, AT_FDCWD, path, follow).map(|_| ())
}

/// Implements stat(2).
fn sys_stat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    stat_path(p, mem, a[0], a[1], true)
}

/// Implements lstat(2).
fn sys_lstat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    stat_path(p, mem, a[0], a[1], false)
}

/// Implements fstat(2).
fn sys_fstat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let st = stat_of_file(&lock(&file))?;
    mem.write(a[1], &encode_stat(&st))?;
    Ok(0)
}

/// Implements newfstatat(2).
fn sys_newfstatat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [dirfd, path, buf, flags, ..] = *a;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    let st = stat_of(&lookup_at(p, mem, dirfd as i32, path, flags)?)?;
    mem.write(buf, &encode_stat(&st))?;
    Ok(0)
}

/// Implements statx(2).
fn sys_statx(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [dirfd, path, flags, mask, buf, _] = *a;
    let flags = flags as u32 as u64;
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_EMPTY_PATH | AT_STATX_SYNC_TYPE) != 0
        || flags & AT_STATX_SYNC_TYPE == AT_STATX_SYNC_TYPE
        || mask as u32 & STATX_RESERVED != 0
    {
        return Err(Errno::EINVAL);
    }
    let st = stat_of(&lookup_at(p, mem, dirfd as i32, path, flags)?)?;
    mem.write(buf, &encode_statx(&st))?;
    Ok(0)
}

/// Implements getdents64(2).
fn sys_getdents64(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    use std::os::fd::AsRawFd;
    let file = p.fds.get(a[0] as i32)?;
    let f = lock(&file);
    if f.path_only() {
        return Err(Errno::EBADF);
    }
    let FileKind::Dir { fd, .. } = &f.kind else {
        return Err(Errno::ENOTDIR);
    };
    // The whole buffer must be valid; the kernel fills only whole records
    // that fit, so passing it a bounded prefix is safe.
    let buf = guest_buf_mut(mem, a[1], u64::from(a[2] as u32))?;
    let len = buf.len().min(1 << 20);
    let buf = &mut buf[..len];
    // SAFETY: the kernel writes at most `buf.len()` bytes of linux_dirent64
    // records into `buf`, which is valid, writable and exclusively borrowed;
    // the host and guest record layouts are the same (x86-64).
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
    Ok(rc as u64)
}

fn do_readlink(
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
        let abs = absolute(p, dirfd, &path)?;
        if lexical(&abs) == b"/proc/self/exe" {
            p.exe_path.as_bytes().to_vec()
        } else if let Some(t) = special(p, &abs) {
            t?;
            return Err(Errno::EINVAL);
        } else {
            // Directories above the roots exist (not links): EINVAL, which
            // realpath() needs to walk down to an allowed file.
            match walk(&roots(&p.policy), &abs, false)? {
                Some(r) if r.stat.st_mode & S_IFMT == S_IFLNK => {
                    rustix::fs::readlinkat(&*r.fd, "", Vec::new())?.into_bytes()
                }
                _ => return Err(Errno::EINVAL),
            }
        }
    };
    let n = target.len().min(size as usize);
    guest_buf_mut(mem, buf, n as u64)?.copy_from_slice(&target[..n]);
    Ok(n as u64)
}

/// Implements readlink(2).
fn sys_readlink(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_readlink(p, mem, AT_FDCWD, a[0], a[1], a[2])
}

/// Implements readlinkat(2).
fn sys_readlinkat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_readlink(p, mem, a[0] as i32, a[1], a[2], a[3])
}

fn do_access(
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
    let Target::Host(r) = target else {
        // Emulated devices and open stdio/pipes: usable as opened.
        return Ok(0);
    };
    if mode & W_OK != 0 {
        return Err(Errno::EACCES);
    }
    if mode == 0 || r.stat.st_mode & S_IFMT == S_IFLNK {
        return Ok(0);
    }
    let access = Access::from_bits_truncate(mode as u32);
    let eaccess = if flags & AT_EACCESS != 0 {
        AtFlags::EACCESS
    } else {
        AtFlags::empty()
    };
    match &r.reach {
        Reach::Root(host) => rustix::fs::accessat(CWD, host, access, eaccess)?,
        Reach::Child { parent, name } => rustix::fs::accessat(
            parent.as_fd(),
            name.as_slice(),
            access,
            eaccess | AtFlags::SYMLINK_NOFOLLOW,
        )?,
        Reach::Link => {}
    }
    Ok(0)
}

/// Implements access(2).
fn sys_access(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_access(p, mem, AT_FDCWD, a[0], a[1], 0)
}

/// Implements faccessat(2).
fn sys_faccessat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_access(p, mem, a[0] as i32, a[1], a[2], 0)
}

/// Implements faccessat2(2).
fn sys_faccessat2(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_access(p, mem, a[0] as i32, a[1], a[2], a[3] as u32 as u64)
}

/// Implements getcwd(2).
fn sys_getcwd(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let cwd = p.cwd.as_bytes();
    let len = cwd.len() as u64 + 1;
    if a[1] < len {
        return Err(Errno::ERANGE);
    }
    let out = mem.slice_mut(a[0], len)?;
    out[..cwd.len()].copy_from_slice(cwd);
    out[cwd.len()] = 0;
    Ok(len)
}

fn set_cwd(p: &mut Process, path: Vec<u8>) -> SysResult {
    p.cwd = String::from_utf8(path).map_err(|_| Errno::ENOENT)?;
    Ok(0)
}

/// Implements chdir(2).
fn sys_chdir(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let path = read_path(mem, a[0])?;
    match lookup(p, AT_FDCWD, &path, true)? {
        Target::Host(r) if r.stat.st_mode & S_IFMT == S_IFDIR => set_cwd(p, r.path),
        _ => Err(Errno::ENOTDIR),
    }
}

/// Implements fchdir(2).
fn sys_fchdir(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let path = match &lock(&file).kind {
        FileKind::Dir { path, .. } => path.clone(),
        _ => return Err(Errno::ENOTDIR),
    };
    set_cwd(p, path)
}

/// Implements umask(2).
fn sys_umask(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let old = p.fds.umask;
    p.fds.umask = a[0] as u32 & 0o777;
    Ok(u64::from(old))
}

fn encode_statfs(sfs: Option<&rustix::fs::StatFs>, magic: i64) -> [u8; STATFS_SIZE] {
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

fn statfs_of(t: &Target) -> Result<[u8; STATFS_SIZE], Errno> {
    let host = |fd: &OwnedFd| -> Result<_, Errno> {
        Ok(encode_statfs(Some(&rustix::fs::fstatfs(fd)?), 0))
    };
    match t {
        Target::Dev(_) => Ok(encode_statfs(None, TMPFS_MAGIC)),
        Target::Host(r) => host(&r.fd),
        Target::Fd(f) => {
            let f = lock(f);
            match &f.kind {
                FileKind::File { fd, .. }
                | FileKind::Dir { fd, .. }
                | FileKind::PathOnly { fd, .. } => host(fd),
                FileKind::Pipe(_) => Ok(encode_statfs(None, PIPEFS_MAGIC)),
                k => match host_std(k) {
                    Some(h) => Ok(encode_statfs(Some(&rustix::fs::fstatfs(h.as_fd())?), 0)),
                    None => Ok(encode_statfs(None, TMPFS_MAGIC)),
                },
            }
        }
    }
}

/// Implements statfs(2).
fn sys_statfs(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let path = read_path(mem, a[0])?;
    let b = statfs_of(&lookup(p, AT_FDCWD, &path, true)?)?;
    mem.write(a[1], &b)?;
    Ok(0)
}

/// Implements fstatfs(2).
fn sys_fstatfs(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let b = statfs_of(&Target::Fd(p.fds.get(a[0] as i32)?))?;
    mem.write(a[1], &b)?;
    Ok(0)
}

fn refuse_paths(mem: &GuestMemory, addrs: &[u64]) -> SysResult {
    for &addr in addrs {
        read_path(mem, addr)?;
    }
    Err(Errno::EROFS)
}

/// Implements mkdir(2), rmdir(2), unlink(2), chmod(2), chown(2), lchown(2), truncate(2), mknod(2): read-only namespace.
fn sys_refuse_p0(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    refuse_paths(mem, &[a[0]])
}

/// Implements mkdirat(2), mknodat(2), fchownat(2), unlinkat(2), fchmodat(2): read-only namespace.
fn sys_refuse_p1(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    refuse_paths(mem, &[a[1]])
}

/// Implements rename(2), link(2), symlink(2): read-only namespace.
fn sys_refuse_p01(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    refuse_paths(mem, &[a[0], a[1]])
}

/// Implements renameat(2), renameat2(2), linkat(2): read-only namespace.
fn sys_refuse_p13(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    refuse_paths(mem, &[a[1], a[3]])
}

/// Implements symlinkat(2): read-only namespace.
fn sys_symlinkat(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    refuse_paths(mem, &[a[0], a[2]])
}

/// Implements utimensat(2): read-only namespace.
fn sys_utimensat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[1] == 0 && a[0] as i32 != AT_FDCWD {
        p.fds.get(a[0] as i32)?;
        return Err(Errno::EROFS);
    }
    refuse_paths(mem, &[a[1]])
}

/// Implements fchmod(2) and fchown(2): read-only namespace.
fn sys_refuse_fd(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    p.fds.get(a[0] as i32)?;
    Err(Errno::EROFS)
}

/// Implements ftruncate(2) for files opened for writing (under `--allow-write`).
fn sys_ftruncate(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let f = lock(&file);
    if (a[1] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    match &f.kind {
        FileKind::File { fd, .. } if f.writable() => {
            rustix::fs::ftruncate(fd, a[1])?;
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

const RO: &str = "read-only namespace: EROFS";
const RW: &str = "under --allow-write roots; elsewhere EROFS";

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 2, name: "open", handler: sys_open, support: Support::Partial,
        note: "read-only: files and directories under the allowed roots, plus /dev/{null,zero,urandom}; /dev/std{in,out,err}, /dev/fd/N and /proc/self/fd/N share the open fd's description; writes EACCES, host fifos/devices EACCES, other paths ENOENT" },
    SyscallEntry { nr: 4, name: "stat", handler: sys_stat, support: Support::Full, note: "" },
    SyscallEntry { nr: 5, name: "fstat", handler: sys_fstat, support: Support::Full, note: "" },
    SyscallEntry { nr: 6, name: "lstat", handler: sys_lstat, support: Support::Full, note: "" },
    SyscallEntry { nr: 21, name: "access", handler: sys_access, support: Support::Partial,
        note: "W_OK is always EACCES (read-only namespace)" },
    SyscallEntry { nr: 76, name: "truncate", handler: sys_refuse_p0, support: Support::Refused, note: RO },
    SyscallEntry { nr: 77, name: "ftruncate", handler: sys_ftruncate, support: Support::Partial,
        note: "files opened for writing under --allow-write roots; others EINVAL" },
    SyscallEntry { nr: 79, name: "getcwd", handler: sys_getcwd, support: Support::Full, note: "" },
    SyscallEntry { nr: 80, name: "chdir", handler: sys_chdir, support: Support::Full, note: "" },
    SyscallEntry { nr: 81, name: "fchdir", handler: sys_fchdir, support: Support::Full, note: "" },
    SyscallEntry { nr: 82, name: "rename", handler: sys_rename, support: Support::Partial, note: RW },
    SyscallEntry { nr: 83, name: "mkdir", handler: sys_mkdir, support: Support::Partial, note: RW },
    SyscallEntry { nr: 84, name: "rmdir", handler: sys_rmdir, support: Support::Partial, note: RW },
    SyscallEntry { nr: 85, name: "creat", handler: sys_creat, support: Support::Partial,
        note: "under --allow-write roots; elsewhere EACCES" },
    SyscallEntry { nr: 86, name: "link", handler: sys_refuse_p01, support: Support::Refused, note: RO },
    SyscallEntry { nr: 87, name: "unlink", handler: sys_unlink, support: Support::Partial, note: RW },
    SyscallEntry { nr: 88, name: "symlink", handler: sys_refuse_p01, support: Support::Refused, note: RO },
    SyscallEntry { nr: 89, name: "readlink", handler: sys_readlink, support: Support::Partial,
        note: "/proc/self/exe gives the program path; /proc/self/fd/N links are not emulated" },
    SyscallEntry { nr: 90, name: "chmod", handler: sys_refuse_p0, support: Support::Refused, note: RO },
    SyscallEntry { nr: 91, name: "fchmod", handler: sys_refuse_fd, support: Support::Refused, note: RO },
    SyscallEntry { nr: 92, name: "chown", handler: sys_refuse_p0, support: Support::Refused, note: RO },
    SyscallEntry { nr: 93, name: "fchown", handler: sys_refuse_fd, support: Support::Refused, note: RO },
    SyscallEntry { nr: 94, name: "lchown", handler: sys_refuse_p0, support: Support::Refused, note: RO },
    SyscallEntry { nr: 95, name: "umask", handler: sys_umask, support: Support::Full, note: "" },
    SyscallEntry { nr: 133, name: "mknod", handler: sys_refuse_p0, support: Support::Refused, note: RO },
    SyscallEntry { nr: 137, name: "statfs", handler: sys_statfs, support: Support::Partial,
        note: "host values with ST_RDONLY; emulated devices and pipes get synthetic values" },
    SyscallEntry { nr: 138, name: "fstatfs", handler: sys_fstatfs, support: Support::Partial,
        note: "as statfs" },
    SyscallEntry { nr: 217, name: "getdents64", handler: sys_getdents64, support: Support::Full, note: "" },
    SyscallEntry { nr: 257, name: "openat", handler: sys_openat, support: Support::Partial,
        note: "as open" },
    SyscallEntry { nr: 258, name: "mkdirat", handler: sys_mkdirat, support: Support::Partial, note: RW },
    SyscallEntry { nr: 259, name: "mknodat", handler: sys_refuse_p1, support: Support::Refused, note: RO },
    SyscallEntry { nr: 260, name: "fchownat", handler: sys_refuse_p1, support: Support::Refused, note: RO },
    SyscallEntry { nr: 262, name: "newfstatat", handler: sys_newfstatat, support: Support::Full, note: "" },
    SyscallEntry { nr: 263, name: "unlinkat", handler: sys_unlinkat, support: Support::Partial, note: RW },
    SyscallEntry { nr: 264, name: "renameat", handler: sys_renameat, support: Support::Partial, note: RW },
    SyscallEntry { nr: 265, name: "linkat", handler: sys_refuse_p13, support: Support::Refused, note: RO },
    SyscallEntry { nr: 266, name: "symlinkat", handler: sys_symlinkat, support: Support::Refused, note: RO },
    SyscallEntry { nr: 267, name: "readlinkat", handler: sys_readlinkat, support: Support::Partial,
        note: "as readlink" },
    SyscallEntry { nr: 268, name: "fchmodat", handler: sys_refuse_p1, support: Support::Refused, note: RO },
    SyscallEntry { nr: 269, name: "faccessat", handler: sys_faccessat, support: Support::Partial,
        note: "as access" },
    SyscallEntry { nr: 280, name: "utimensat", handler: sys_utimensat, support: Support::Refused, note: RO },
    SyscallEntry { nr: 316, name: "renameat2", handler: sys_renameat2, support: Support::Partial, note: "under --allow-write roots (RENAME_NOREPLACE only); elsewhere EROFS" },
    SyscallEntry { nr: 332, name: "statx", handler: sys_statx, support: Support::Partial,
        note: "basic stats only (no birth time, mount id or attributes)" },
    SyscallEntry { nr: 439, name: "faccessat2", handler: sys_faccessat2, support: Support::Partial,
        note: "as access" },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::USER_BASE;
    use crate::linux::io::SYSCALLS as IO;
    use crate::linux::Handler;
    use std::sync::atomic::{AtomicU32, Ordering};

    const BAD: [u64; 4] = [0, 0xffff_8000_0000_0000, 8 << 20, u64::MAX - 7];
    const PATH: u64 = USER_BASE;
    const BUF: u64 = USER_BASE + 0x2000;

    /// A host directory tree, removed on drop.
    struct Tree {
        root: PathBuf,
    }

    impl Tree {
        fn new() -> Self {
            static N: AtomicU32 = AtomicU32::new(0);
            let root = std::env::temp_dir().join(format!(
                "forkvm-fs-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&root);
            let a = root.join("allowed");
            std::fs::create_dir_all(a.join("sub/deeper")).unwrap();
            std::fs::write(root.join("secret.txt"), b"secret").unwrap();
            std::fs::write(a.join("hello.txt"), b"hello world").unwrap();
            std::fs::write(a.join("sub/inner.txt"), b"inner").unwrap();
            let link = |target: &Path, name: &str| {
                std::os::unix::fs::symlink(target, a.join(name)).unwrap();
            };
            link(&root.join("secret.txt"), "abs_out");
            link(Path::new("../secret.txt"), "rel_out");
            link(Path::new("sub/../../secret.txt"), "rel_out2");
            link(Path::new("sub/inner.txt"), "rel_in");
            link(&a.join("hello.txt"), "abs_in");
            link(Path::new("/"), "to_root");
            link(Path::new("loop"), "loop");
            link(Path::new("sub"), "sub_link");
            // Links above the root (where the guest sees no directory contents).
            std::os::unix::fs::symlink("allowed", root.join("via_link")).unwrap();
            std::os::unix::fs::symlink(&a, root.join("abs_via_link")).unwrap();
            std::os::unix::fs::symlink("secret.txt", root.join("secret_link")).unwrap();
            std::os::unix::fs::symlink("/", root.join("slash_link")).unwrap();
            Self { root }
        }

        fn allowed(&self) -> PathBuf {
            self.root.join("allowed")
        }

        fn s(&self, rel: &str) -> String {
            format!("{}/{rel}", self.root.display())
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    fn setup(allow: Vec<PathBuf>) -> (Process, GuestMemory) {
        crate::linux::test_setup(Policy {
            allow_read: allow,
            ..Policy::default()
        })
    }

    use crate::linux::test_call as call;

    fn io(nr: u64) -> Handler {
        IO.iter().find(|e| e.nr == nr).unwrap().handler
    }

    fn open(p: &mut Process, m: &mut GuestMemory, path: &str, flags: u32) -> SysResult {
        m.write(PATH, path.as_bytes()).unwrap();
        m.write(PATH + path.len() as u64, &[0]).unwrap();
        call(p, m, sys_openat, &[AT_FDCWD as u64, PATH, u64::from(flags)])
    }

    fn read_all(p: &mut Process, m: &mut GuestMemory, fd: u64) -> Vec<u8> {
        let n = call(p, m, io(0), &[fd, BUF, 4096]).unwrap();
        m.read(BUF, n).unwrap().to_vec()
    }

    fn stat(
        p: &mut Process,
        m: &mut GuestMemory,
        path: &str,
        follow: bool,
    ) -> Result<StatInfo, Errno> {
        m.write(PATH, path.as_bytes()).unwrap();
        m.write(PATH + path.len() as u64, &[0]).unwrap();
        let h = if follow { sys_stat } else { sys_lstat };
        call(p, m, h, &[PATH, BUF])?;
        let b = m.read(BUF, 144).unwrap();
        let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        Ok(StatInfo {
            dev: u64at(0),
            ino: u64at(8),
            nlink: u64at(16),
            mode: u32at(24),
            size: u64at(48) as i64,
            ..StatInfo::default()
        })
    }

    #[test]
    fn open_read_stat_allowed_file() {
        let t = Tree::new();
        let (mut p, mut m) = setup(vec![t.allowed()]);
        let fd = open(
            &mut p,
            &mut m,
            &t.s("allowed/hello.txt"),
            O_RDONLY | O_CLOEXEC,
        )
        .unwrap();
        assert_eq!(fd, 3);
        assert_eq!(p.fds.cloexec(3), Ok(true));
        assert_eq!(read_all(&mut p, &mut m, fd), b"hello world");
        assert_eq!(read_all(&mut p, &mut m, fd), b"");
        // fstat agrees with the host.
        assert_eq!(call(&mut p, &mut m, sys_fstat, &[fd, BUF]), Ok(0));
        let host = std::fs::metadata(t.allowed().join("hello.txt")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(m.read_u64(BUF + 8), Ok(host.ino()));
        assert_eq!(m.read_u64(BUF + 48), Ok(11));
        assert_eq!(m.read_u32(BUF + 24), Ok(host.mode()));
        assert_eq!(m.read_u64(BUF + 88), Ok(host.mtime() as u64));
        let st = stat(&mut p, &mut m, &t.s("allowed/hello.txt"), true).unwrap();
        assert_eq!(
            (st.ino, st.size, st.mode & S_IFMT),
            (host.ino(), 11, S_IFREG)
        );
        // lseek + pread, and a dup shares the offset.
        assert_eq!(call(&mut p, &mut m, io(8), &[fd, 6, 0]), Ok(6));
        let d = call(
            &mut p,
            &mut m,
            crate::linux::fdtable::SYSCALLS[1].handler,
            &[fd],
        )
        .unwrap();
        assert_eq!(read_all(&mut p, &mut m, d), b"world");
        assert_eq!(call(&mut p, &mut m, io(8), &[fd, 0, 1]), Ok(11));
        assert_eq!(call(&mut p, &mut m, io(8), &[fd, -2i64 as u64, 2]), Ok(9));
        assert_eq!(
            call(&mut p, &mut m, io(8), &[fd, -20i64 as u64, 1]),
            Err(Errno::EINVAL)
        );
        assert_eq!(call(&mut p, &mut m, io(17), &[fd, BUF, 5, 0]), Ok(5));
        assert_eq!(m.read(BUF, 5).unwrap(), b"hello");
        // Only the bytes a read can transfer must be valid (as Linux copies lazily).
        assert_eq!(call(&mut p, &mut m, io(17), &[fd, BUF, 1 << 40, 6]), Ok(5));
        assert_eq!(
            call(&mut p, &mut m, io(17), &[fd, (8 << 20) - 4, 100, 0]),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            call(&mut p, &mut m, io(17), &[fd, (8 << 20) - 4, 100, 7]),
            Ok(4)
        );
        assert_eq!(call(&mut p, &mut m, io(17), &[fd, 0, 100, 11]), Ok(0));
        // Writing is refused.
        assert_eq!(
            call(&mut p, &mut m, io(1), &[fd, BUF, 1]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, io(18), &[fd, BUF, 1, 0]),
            Err(Errno::EBADF)
        );
        for flags in [
            O_WRONLY,
            O_RDWR,
            O_CREAT,
            O_TRUNC,
            O_RDONLY | O_CREAT | O_EXCL,
        ] {
            assert_eq!(
                open(&mut p, &mut m, &t.s("allowed/hello.txt"), flags),
                Err(Errno::EACCES)
            );
        }
        assert_eq!(
            open(&mut p, &mut m, &t.s("allowed/new.txt"), O_CREAT | O_WRONLY),
            Err(Errno::EACCES)
        );
        m.write(PATH, b"/x\0").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_creat, &[PATH, 0o644]),
            Err(Errno::EACCES)
        );
        // mmap support used by mem.rs.
        let mut page = [0u8; 16];
        p.fds.read_at_for_mmap(fd as i32, &mut page, 6).unwrap();
        assert_eq!(&page[..6], b"world\0");
        assert_eq!(p.fds.check_mappable(0), Err(Errno::ENODEV));
    }

    #[test]
    fn directories_getdents_and_cwd() {
        let t = Tree::new();
        let (mut p, mut m) = setup(vec![t.allowed()]);
        let dir = open(&mut p, &mut m, &t.s("allowed"), O_RDONLY | O_DIRECTORY).unwrap();
        let mut names = Vec::new();
        loop {
            let n = call(&mut p, &mut m, sys_getdents64, &[dir, BUF, 200]).unwrap();
            if n == 0 {
                break;
            }
            let b = m.read(BUF, n).unwrap().to_vec();
            let mut off = 0;
            while off < b.len() {
                let reclen = u16::from_le_bytes([b[off + 16], b[off + 17]]) as usize;
                let name = &b[off + 19..off + reclen];
                let end = name.iter().position(|&c| c == 0).unwrap();
                names.push(String::from_utf8(name[..end].to_vec()).unwrap());
                off += reclen;
            }
        }
        names.sort();
        assert!(
            names.contains(&"hello.txt".to_string()) && names.contains(&"sub".to_string()),
            "{names:?}"
        );
        assert_eq!(
            call(&mut p, &mut m, sys_getdents64, &[dir, BUF, 4]),
            Ok(0),
            "at end"
        );
        assert_eq!(call(&mut p, &mut m, io(8), &[dir, 0, 0]), Ok(0));
        assert_eq!(
            call(&mut p, &mut m, sys_getdents64, &[dir, BUF, 4]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, io(0), &[dir, BUF, 4]),
            Err(Errno::EISDIR)
        );
        // getdents on a non-directory and a bad fd.
        assert_eq!(
            call(&mut p, &mut m, sys_getdents64, &[1, BUF, 200]),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_getdents64, &[77, BUF, 200]),
            Err(Errno::EBADF)
        );
        // openat relative to the directory fd, with `..` that stays inside.
        m.write(PATH, b"sub/../sub/inner.txt\0").unwrap();
        let f = call(&mut p, &mut m, sys_openat, &[dir, PATH, 0]).unwrap();
        assert_eq!(read_all(&mut p, &mut m, f), b"inner");
        m.write(PATH, b"hello.txt\0").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_openat, &[f, PATH, 0]),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_openat, &[99, PATH, 0]),
            Err(Errno::EBADF)
        );
        // An absolute path ignores a bad dirfd.
        let abs = format!("{}\0", t.s("allowed/hello.txt"));
        m.write(PATH, abs.as_bytes()).unwrap();
        assert!(call(&mut p, &mut m, sys_openat, &[99, PATH, 0]).is_ok());
        // fchdir + getcwd + relative open.
        assert_eq!(call(&mut p, &mut m, sys_fchdir, &[dir]), Ok(0));
        let want = t.s("allowed");
        assert_eq!(
            call(&mut p, &mut m, sys_getcwd, &[BUF, 4096]),
            Ok(want.len() as u64 + 1)
        );
        assert_eq!(
            m.read(BUF, want.len() as u64 + 1).unwrap(),
            format!("{want}\0").as_bytes()
        );
        assert_eq!(
            call(&mut p, &mut m, sys_getcwd, &[BUF, want.len() as u64]),
            Err(Errno::ERANGE)
        );
        assert_eq!(call(&mut p, &mut m, sys_fchdir, &[f]), Err(Errno::ENOTDIR));
        let f = open(&mut p, &mut m, "sub_link/inner.txt", O_RDONLY).unwrap();
        assert_eq!(read_all(&mut p, &mut m, f), b"inner");
        // chdir into a subdirectory through a symlink: cwd is canonical.
        m.write(PATH, b"sub_link/deeper\0").unwrap();
        assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
        assert_eq!(p.cwd, t.s("allowed/sub/deeper"));
        m.write(PATH, b"../inner.txt\0").unwrap();
        assert!(call(&mut p, &mut m, sys_open, &[PATH, 0]).is_ok());
        m.write(PATH, b"../../../secret.txt\0").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_open, &[PATH, 0]),
            Err(Errno::ENOENT)
        );
        m.write(PATH, b"../inner.txt\0").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_chdir, &[PATH]),
            Err(Errno::ENOTDIR)
        );
        m.write(PATH, b"/\0").unwrap();
        assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Err(Errno::ENOENT));
        assert_eq!(p.cwd, t.s("allowed/sub/deeper"));
        // O_DIRECTORY on a file.
        assert_eq!(
            open(&mut p, &mut m, "../inner.txt", O_DIRECTORY),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(
            open(&mut p, &mut m, "../inner.txt/", 0),
            Err(Errno::ENOTDIR)
        );
        assert!(open(&mut p, &mut m, "../", O_DIRECTORY).is_ok());
    }

    #[test]
    fn escapes_are_refused() {
        let t = Tree::new();
        let (mut p, mut m) = setup(vec![t.allowed(), PathBuf::from("/proc")]);
        let secret = t.s("secret.txt");
        let tries = [
            secret.clone(),
            t.s("allowed/../secret.txt"),
            t.s("allowed/sub/../../secret.txt"),
            t.s("allowed/abs_out"),
            t.s("allowed/rel_out"),
            t.s("allowed/rel_out2"),
            t.s("allowed/to_root/etc/passwd"),
            t.s("allowed/to_root"),
            format!("/proc/self/root{secret}"),
            format!("/proc/thread-self/root{secret}"),
            format!("/proc/{}/root{secret}", std::process::id()),
            format!("/proc/self/cwd/{secret}"),
            "/proc/self/mem".to_string(),
            "/proc/self/environ".to_string(),
            "/etc/passwd".to_string(),
            "/".to_string(),
            t.s(""),
        ];
        for path in &tries {
            assert_eq!(
                open(&mut p, &mut m, path, O_RDONLY),
                Err(Errno::ENOENT),
                "{path}"
            );
            assert_eq!(
                open(&mut p, &mut m, path, O_PATH),
                Err(Errno::ENOENT),
                "{path}"
            );
            assert_eq!(
                stat(&mut p, &mut m, path, true).err(),
                Some(Errno::ENOENT),
                "{path}"
            );
        }
        assert!(p.fds.open_fds().len() == 3);
        // The links themselves are inside and visible to lstat/readlink.
        let st = stat(&mut p, &mut m, &t.s("allowed/rel_out"), false).unwrap();
        assert_eq!(st.mode & S_IFMT, S_IFLNK);
        let path = format!("{}\0", t.s("allowed/rel_out"));
        m.write(PATH, path.as_bytes()).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]),
            Ok(13)
        );
        assert_eq!(m.read(BUF, 13).unwrap(), b"../secret.txt");
        assert_eq!(call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 3]), Ok(3));
        assert_eq!(
            call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 0]),
            Err(Errno::EINVAL)
        );
        let path = format!("{}\0", t.s("allowed/hello.txt"));
        m.write(PATH, path.as_bytes()).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]),
            Err(Errno::EINVAL)
        );
        // Links that stay inside work.
        let fd = open(&mut p, &mut m, &t.s("allowed/abs_in"), O_RDONLY).unwrap();
        assert_eq!(read_all(&mut p, &mut m, fd), b"hello world");
        let fd = open(&mut p, &mut m, &t.s("allowed/rel_in"), O_RDONLY).unwrap();
        assert_eq!(read_all(&mut p, &mut m, fd), b"inner");
        assert_eq!(
            open(&mut p, &mut m, &t.s("allowed/rel_in"), O_NOFOLLOW),
            Err(Errno::ELOOP)
        );
        assert!(open(&mut p, &mut m, &t.s("allowed/rel_in"), O_NOFOLLOW | O_PATH).is_ok());
        assert_eq!(
            open(&mut p, &mut m, &t.s("allowed/loop"), 0),
            Err(Errno::ELOOP)
        );
        // A file root allows exactly itself.
        let (mut p, mut m) = setup(vec![t.allowed().join("hello.txt")]);
        assert!(open(&mut p, &mut m, &t.s("allowed/hello.txt"), 0).is_ok());
        assert_eq!(
            open(&mut p, &mut m, &t.s("allowed/hello.txt/"), 0),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(
            open(&mut p, &mut m, &t.s("allowed/rel_in"), 0),
            Err(Errno::ENOENT)
        );
        assert_eq!(open(&mut p, &mut m, &t.s("allowed"), 0), Err(Errno::ENOENT));
        assert_eq!(
            open(&mut p, &mut m, &t.s("allowed/hello.txt/.."), 0),
            Err(Errno::ENOTDIR)
        );
        // Relative roots are ignored.
        let (mut p, mut m) = setup(vec![PathBuf::from("relative"), PathBuf::from("/a/../b")]);
        assert_eq!(open(&mut p, &mut m, "relative", 0), Err(Errno::ENOENT));
    }

    #[test]
    fn host_links_above_the_roots() {
        let t = Tree::new();
        let (mut p, mut m) = setup(vec![t.allowed()]);
        for via in ["via_link", "abs_via_link", "via_link/sub/..", "slash_link/"] {
            let path = if via.starts_with("slash") {
                format!("{}{}", t.s(via), t.s("allowed/hello.txt"))
            } else {
                t.s(&format!("{via}/hello.txt"))
            };
            let fd = open(&mut p, &mut m, &path, O_RDONLY).unwrap();
            assert_eq!(read_all(&mut p, &mut m, fd), b"hello world", "{path}");
        }
        // The link into the root is visible as a link; realpath() can walk it.
        let st = stat(&mut p, &mut m, &t.s("via_link"), false).unwrap();
        assert_eq!(st.mode & S_IFMT, S_IFLNK);
        let link = format!("{}\0", t.s("via_link"));
        m.write(PATH, link.as_bytes()).unwrap();
        assert_eq!(call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]), Ok(7));
        assert_eq!(m.read(BUF, 7).unwrap(), b"allowed");
        let link = format!("{}\0", t.s("slash_link"));
        m.write(PATH, link.as_bytes()).unwrap();
        assert_eq!(call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]), Ok(1));
        // Directories above the root are not links (EINVAL) but cannot be opened.
        for dir in [t.s(""), "/".to_string(), t.s("via_link/..")] {
            let z = format!("{dir}\0");
            m.write(PATH, z.as_bytes()).unwrap();
            assert_eq!(
                call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]),
                Err(Errno::EINVAL),
                "{dir}"
            );
            assert_eq!(
                open(&mut p, &mut m, &dir, O_RDONLY),
                Err(Errno::ENOENT),
                "{dir}"
            );
            assert_eq!(
                stat(&mut p, &mut m, &dir, true).err(),
                Some(Errno::ENOENT),
                "{dir}"
            );
        }
        // Links above the root that lead elsewhere do not exist.
        for path in [
            t.s("secret_link"),
            t.s("via_link/../secret.txt"),
            t.s("nothing"),
        ] {
            assert_eq!(
                open(&mut p, &mut m, &path, O_RDONLY),
                Err(Errno::ENOENT),
                "{path}"
            );
            assert_eq!(
                open(&mut p, &mut m, &path, O_PATH | O_NOFOLLOW),
                Err(Errno::ENOENT),
                "{path}"
            );
            assert_eq!(
                stat(&mut p, &mut m, &path, false).err(),
                Some(Errno::ENOENT),
                "{path}"
            );
            let z = format!("{path}\0");
            m.write(PATH, z.as_bytes()).unwrap();
            assert_eq!(
                call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]),
                Err(Errno::ENOENT),
                "{path}"
            );
        }
        assert_eq!(p.fds.open_fds().len(), 3 + 4);
    }

    #[test]
    fn devices_and_stdio_paths() {
        let (mut p, mut m) = setup(vec![]);
        let null = open(&mut p, &mut m, "/dev/null", O_RDWR).unwrap();
        m.write(BUF, b"abc").unwrap();
        assert_eq!(call(&mut p, &mut m, io(1), &[null, BUF, 3]), Ok(3));
        assert_eq!(read_all(&mut p, &mut m, null), b"");
        let zero = open(&mut p, &mut m, "/dev/../dev/zero", O_RDONLY).unwrap();
        assert_eq!(call(&mut p, &mut m, io(0), &[zero, BUF, 3]), Ok(3));
        assert_eq!(m.read(BUF, 3).unwrap(), &[0, 0, 0]);
        assert!(open(&mut p, &mut m, "/dev/urandom", O_RDONLY).is_ok());
        assert_eq!(
            open(&mut p, &mut m, "/dev/null", O_DIRECTORY),
            Err(Errno::ENOTDIR)
        );
        assert_eq!(
            open(&mut p, &mut m, "/dev/sda", O_RDONLY),
            Err(Errno::ENOENT)
        );
        let st = stat(&mut p, &mut m, "/dev/null", true).unwrap();
        assert_eq!(st.mode, S_IFCHR | 0o666);
        let out = open(&mut p, &mut m, "/dev/stdout", O_WRONLY).unwrap();
        assert!(matches!(
            lock(&p.fds.get(out as i32).unwrap()).kind,
            FileKind::Stdout
        ));
        assert_eq!(
            open(&mut p, &mut m, "/proc/self/fd/77", O_RDONLY),
            Err(Errno::ENOENT)
        );
        // Access checks.
        m.write(PATH, b"/dev/null\0").unwrap();
        assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 6]), Ok(0));
        assert_eq!(
            call(&mut p, &mut m, sys_access, &[PATH, 8]),
            Err(Errno::EINVAL)
        );
        // fstat of a pipe and of a device.
        call(&mut p, &mut m, io(22), &[BUF]).unwrap();
        let r = m.read_u32(BUF).unwrap();
        assert_eq!(call(&mut p, &mut m, sys_fstat, &[u64::from(r), BUF]), Ok(0));
        assert_eq!(m.read_u32(BUF + 24).unwrap() & S_IFMT, S_IFIFO);
        assert_eq!(call(&mut p, &mut m, sys_fstat, &[zero, BUF]), Ok(0));
        assert_eq!(m.read_u64(BUF + 40), Ok(makedev(1, 5)));
        // AT_EMPTY_PATH on any fd (glibc's fstat), with NULL too.
        m.write(PATH, b"\0").unwrap();
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_newfstatat,
                &[zero, PATH, BUF, AT_EMPTY_PATH]
            ),
            Ok(0)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_newfstatat,
                &[zero, 0, BUF, AT_EMPTY_PATH]
            ),
            Ok(0)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_newfstatat, &[zero, PATH, BUF, 0]),
            Err(Errno::ENOENT)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_newfstatat, &[zero, PATH, BUF, 1]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_newfstatat,
                &[1, PATH, BUF, AT_EMPTY_PATH]
            ),
            Ok(0)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_statx,
                &[zero, PATH, AT_EMPTY_PATH, 0xfff, BUF]
            ),
            Ok(0)
        );
        assert_eq!(m.read_u32(BUF), Ok(STATX_BASIC_STATS));
        assert_eq!(
            m.read(BUF + 28, 2).unwrap(),
            &((S_IFCHR | 0o666) as u16).to_le_bytes()
        );
        assert_eq!(
            (m.read_u32(BUF + 128), m.read_u32(BUF + 132)),
            (Ok(1), Ok(5))
        );
        // umask.
        assert_eq!(call(&mut p, &mut m, sys_umask, &[0o077]), Ok(0o022));
        assert_eq!(call(&mut p, &mut m, sys_umask, &[0o022]), Ok(0o077));
        // /proc/self/exe.
        m.write(PATH, b"/proc/self/exe\0").unwrap();
        assert_eq!(call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]), Ok(5));
        assert_eq!(m.read(BUF, 5).unwrap(), b"/prog");
    }

    #[test]
    fn statx_and_newfstatat_on_files() {
        let t = Tree::new();
        let (mut p, mut m) = setup(vec![t.allowed()]);
        p.cwd = t.s("allowed");
        m.write(PATH, b"rel_in\0").unwrap();
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_statx,
                &[AT_FDCWD as u64, PATH, 0, 0x7ff, BUF]
            ),
            Ok(0)
        );
        assert_eq!(m.read_u64(BUF + 40), Ok(5));
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_statx,
                &[AT_FDCWD as u64, PATH, AT_SYMLINK_NOFOLLOW, 0x7ff, BUF]
            ),
            Ok(0)
        );
        let mode = u16::from_le_bytes([
            m.read(BUF + 28, 2).unwrap()[0],
            m.read(BUF + 29, 1).unwrap()[0],
        ]);
        assert_eq!(u32::from(mode) & S_IFMT, S_IFLNK);
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_statx,
                &[AT_FDCWD as u64, PATH, 0x6000, 0, BUF]
            ),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_statx,
                &[AT_FDCWD as u64, PATH, 0, 1 << 31, BUF]
            ),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_newfstatat,
                &[AT_FDCWD as u64, PATH, BUF, 0]
            ),
            Ok(0)
        );
        assert_eq!(m.read_u64(BUF + 48), Ok(5));
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_newfstatat,
                &[AT_FDCWD as u64, PATH, BUF, AT_SYMLINK_NOFOLLOW]
            ),
            Ok(0)
        );
        assert_eq!(m.read_u32(BUF + 24).unwrap() & S_IFMT, S_IFLNK);
        // AT_EMPTY_PATH with AT_FDCWD is the cwd.
        m.write(PATH, b"\0").unwrap();
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_newfstatat,
                &[AT_FDCWD as u64, PATH, BUF, AT_EMPTY_PATH]
            ),
            Ok(0)
        );
        assert_eq!(m.read_u32(BUF + 24).unwrap() & S_IFMT, S_IFDIR);
        // access: read yes, write no, missing ENOENT.
        m.write(PATH, b"hello.txt\0").unwrap();
        assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 4]), Ok(0));
        assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 0]), Ok(0));
        assert_eq!(
            call(&mut p, &mut m, sys_access, &[PATH, 2]),
            Err(Errno::EACCES)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_faccessat, &[AT_FDCWD as u64, PATH, 4]),
            Ok(0)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_faccessat2,
                &[AT_FDCWD as u64, PATH, 4, AT_EACCESS]
            ),
            Ok(0)
        );
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_faccessat2,
                &[AT_FDCWD as u64, PATH, 4, 1]
            ),
            Err(Errno::EINVAL)
        );
        m.write(PATH, b"nope\0").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_access, &[PATH, 0]),
            Err(Errno::ENOENT)
        );
        m.write(PATH, b"sub\0").unwrap();
        assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 1]), Ok(0));
        // statfs reports read-only.
        assert_eq!(call(&mut p, &mut m, sys_statfs, &[PATH, BUF]), Ok(0));
        assert_eq!(m.read_u64(BUF + 80).unwrap() & 1, 1);
        // Refused namespace changes.
        assert_eq!(
            call(&mut p, &mut m, sys_refuse_p0, &[PATH]),
            Err(Errno::EROFS)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_refuse_p13, &[0, PATH, 0, PATH]),
            Err(Errno::EROFS)
        );
        assert_eq!(call(&mut p, &mut m, sys_refuse_fd, &[1]), Err(Errno::EROFS));
        assert_eq!(
            call(&mut p, &mut m, sys_refuse_fd, &[50]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_ftruncate, &[1]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_utimensat, &[1, 0, 0, 0]),
            Err(Errno::EROFS)
        );
    }

    #[test]
    fn bad_pointers_and_names() {
        let t = Tree::new();
        let (mut p, mut m) = setup(vec![t.allowed()]);
        let fd = open(&mut p, &mut m, &t.s("allowed"), O_RDONLY).unwrap();
        let good = format!("{}\0", t.s("allowed/hello.txt"));
        m.write(PATH, good.as_bytes()).unwrap();
        let cwd = AT_FDCWD as u64;
        for bad in BAD {
            let cases: Vec<(&str, Handler, Vec<u64>)> = vec![
                ("open", sys_open, vec![bad, 0]),
                ("openat", sys_openat, vec![cwd, bad, 0]),
                ("creat", sys_creat, vec![bad, 0]),
                ("stat path", sys_stat, vec![bad, BUF]),
                ("stat buf", sys_stat, vec![PATH, bad]),
                ("lstat path", sys_lstat, vec![bad, BUF]),
                ("lstat buf", sys_lstat, vec![PATH, bad]),
                ("fstat", sys_fstat, vec![fd, bad]),
                ("newfstatat path", sys_newfstatat, vec![cwd, bad, BUF, 0]),
                ("newfstatat buf", sys_newfstatat, vec![cwd, PATH, bad, 0]),
                ("statx path", sys_statx, vec![cwd, bad, 0, 0x7ff, BUF]),
                ("statx buf", sys_statx, vec![cwd, PATH, 0, 0x7ff, bad]),
                ("getdents64", sys_getdents64, vec![fd, bad, 4096]),
                ("readlink path", sys_readlink, vec![bad, BUF, 10]),
                ("readlinkat path", sys_readlinkat, vec![cwd, bad, BUF, 10]),
                ("access", sys_access, vec![bad, 0]),
                ("faccessat", sys_faccessat, vec![cwd, bad, 0]),
                ("faccessat2", sys_faccessat2, vec![cwd, bad, 0, 0]),
                ("getcwd", sys_getcwd, vec![bad, 4096]),
                ("chdir", sys_chdir, vec![bad]),
                ("statfs path", sys_statfs, vec![bad, BUF]),
                ("statfs buf", sys_statfs, vec![PATH, bad]),
                ("fstatfs", sys_fstatfs, vec![fd, bad]),
                ("mkdir", sys_refuse_p0, vec![bad]),
                ("mkdirat", sys_refuse_p1, vec![cwd, bad]),
                ("rename", sys_refuse_p01, vec![PATH, bad]),
                ("renameat", sys_refuse_p13, vec![cwd, PATH, cwd, bad]),
                ("symlinkat", sys_symlinkat, vec![bad, cwd, PATH]),
                ("utimensat", sys_utimensat, vec![cwd, bad, 0, 0]),
            ];
            for (name, h, args) in cases {
                assert_eq!(
                    call(&mut p, &mut m, h, &args),
                    Err(Errno::EFAULT),
                    "{name} {bad:#x}"
                );
            }
        }
        // readlink's buffer.
        let link = format!("{}\0", t.s("allowed/rel_in"));
        m.write(PATH, link.as_bytes()).unwrap();
        for bad in BAD {
            assert_eq!(
                call(&mut p, &mut m, sys_readlink, &[PATH, bad, 10]),
                Err(Errno::EFAULT)
            );
        }
        // Huge getdents count.
        assert_eq!(
            call(&mut p, &mut m, sys_getdents64, &[fd, BUF, u64::MAX]),
            Err(Errno::EFAULT)
        );
        // Path length limits.
        let long = vec![b'a'; PATH_MAX as usize];
        m.write(PATH, &long).unwrap();
        m.write(PATH + PATH_MAX, &[0]).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_open, &[PATH, 0]),
            Err(Errno::ENAMETOOLONG)
        );
        m.write(PATH + PATH_MAX - 1, &[0]).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_open, &[PATH, 0]),
            Err(Errno::ENOENT)
        );
        // A path running off the end of guest memory.
        let end = (8 << 20) - 3;
        m.write(end, b"abc").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_open, &[end, 0]),
            Err(Errno::EFAULT)
        );
        // Empty path.
        m.write(PATH, b"\0").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_open, &[PATH, 0]),
            Err(Errno::ENOENT)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_stat, &[PATH, BUF]),
            Err(Errno::ENOENT)
        );
        // Bad fds.
        for bad in [99u64, u64::MAX, 5000] {
            assert_eq!(
                call(&mut p, &mut m, sys_fstat, &[bad, BUF]),
                Err(Errno::EBADF)
            );
            assert_eq!(
                call(&mut p, &mut m, sys_fstatfs, &[bad, BUF]),
                Err(Errno::EBADF)
            );
            assert_eq!(call(&mut p, &mut m, sys_fchdir, &[bad]), Err(Errno::EBADF));
            assert_eq!(
                call(
                    &mut p,
                    &mut m,
                    sys_newfstatat,
                    &[bad, PATH, BUF, AT_EMPTY_PATH]
                ),
                Err(Errno::EBADF)
            );
        }
    }

    #[test]
    fn path_only_descriptors() {
        let t = Tree::new();
        let (mut p, mut m) = setup(vec![t.allowed()]);
        let f = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_PATH).unwrap();
        assert_eq!(call(&mut p, &mut m, io(0), &[f, BUF, 4]), Err(Errno::EBADF));
        assert_eq!(call(&mut p, &mut m, sys_fstat, &[f, BUF]), Ok(0));
        assert_eq!(m.read_u64(BUF + 48), Ok(11));
        let d = open(&mut p, &mut m, &t.s("allowed/sub"), O_PATH | O_DIRECTORY).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_getdents64, &[d, BUF, 4096]),
            Err(Errno::EBADF)
        );
        m.write(PATH, b"inner.txt\0").unwrap();
        let i = call(&mut p, &mut m, sys_openat, &[d, PATH, 0]).unwrap();
        assert_eq!(read_all(&mut p, &mut m, i), b"inner");
        let l = open(&mut p, &mut m, &t.s("allowed/rel_in"), O_PATH | O_NOFOLLOW).unwrap();
        m.write(PATH, b"\0").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_readlinkat, &[l, PATH, BUF, 100]),
            Ok(13)
        );
        assert_eq!(m.read(BUF, 13).unwrap(), b"sub/inner.txt");
    }
}
