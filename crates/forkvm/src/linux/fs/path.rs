//! Path resolution inside the guest namespace (see the module docs of `fs`).

use super::*;
use std::sync::Arc;

/// Reads a guest path: EFAULT on a bad pointer, ENAMETOOLONG past [`PATH_MAX`].
pub fn read_path(mem: &GuestMemory, addr: u64) -> Result<Vec<u8>, Errno> {
    match mem.read_cstr(addr, PATH_MAX - 1) {
        Ok(s) => Ok(s.to_vec()),
        Err(_) if mem.read(addr, PATH_MAX).is_ok() => Err(Errno::ENAMETOOLONG),
        Err(_) => Err(Errno::EFAULT),
    }
}

/// Reads a guest path that must name something (a call without
/// AT_EMPTY_PATH that creates, removes or renames): an empty one is ENOENT
/// as soon as it is read, as Linux's `getname` has it. unlink(""), mkdir("")
/// and the like answered EROFS, EEXIST or EISDIR (LTP's unlink07).
pub fn read_name(mem: &GuestMemory, addr: u64) -> Result<Vec<u8>, Errno> {
    let path = read_path(mem, addr)?;
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    Ok(path)
}

pub(super) fn components(path: &[u8]) -> VecDeque<Vec<u8>> {
    path.split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// An allowed host root, as guest path components.
pub(super) struct Root {
    pub(super) comps: Vec<Vec<u8>>,
    pub(super) host: PathBuf,
    /// Reached at its guest path even through another root above it (a
    /// fork's copy of a write root, a `--persist` root inside one, or a
    /// root below a private `/tmp` or `/dev/shm`).
    pub(super) mount: bool,
    /// Listed only to stop a walk for a change: a read-only root mounted in
    /// a private tree (see `tmp::with_private`). Reaching it is EROFS.
    pub(super) blocked: bool,
}

impl Root {
    pub(super) fn is(&self, path: &[&[u8]]) -> bool {
        self.comps.len() == path.len() && self.comps.iter().zip(path).all(|(a, b)| a == b)
    }

    pub(super) fn is_below(&self, path: &[&[u8]]) -> bool {
        self.comps.len() > path.len() && self.comps.iter().zip(path).all(|(a, b)| a == b)
    }
}

/// The usable roots of the policy: absolute paths without `..`.
pub(super) fn roots(p: &Process) -> Arc<[Root]> {
    let copied = p
        .tmp
        .overlay
        .copied
        .load(std::sync::atomic::Ordering::Relaxed);
    p.tmp.roots.read(copied, || {
        let mut r = to_roots(p.policy.allow_read.iter());
        r.extend(allow_write_roots(p));
        with_private(p, r, false)
    })
}

/// The roots the guest may change things under (`--allow-write`).
/// In a fork, this copies the write roots up (see `overlay`): call it only
/// to change something.
pub(super) fn write_roots(p: &Process) -> Result<Arc<[Root]>, Errno> {
    prepare_change(p)?;
    Ok(change_roots(p))
}

/// The roots for a change as they are now, without copying anything up: a
/// question only (see `attr::in_write_roots`), or after [`prepare_change`].
pub(super) fn change_roots(p: &Process) -> Arc<[Root]> {
    let copied = p
        .tmp
        .overlay
        .copied
        .load(std::sync::atomic::Ordering::Relaxed);
    p.tmp
        .roots
        .write(copied, || with_private(p, allow_write_roots(p), true))
}

pub(super) fn to_roots<'a>(paths: impl Iterator<Item = &'a std::path::PathBuf>) -> Vec<Root> {
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
                mount: false,
                blocked: false,
            })
        })
        .collect()
}

/// One directory on the way down a path.
pub(super) struct Level {
    pub(super) name: Vec<u8>,
    /// O_PATH descriptor; None for a directory above every allowed root.
    pub(super) fd: Option<Rc<OwnedFd>>,
    pub(super) stat: Option<Stat>,
    /// Host path when this level is exactly an allowed root.
    pub(super) root: Option<PathBuf>,
    /// A synthetic directory (see `virt`): only synthetic names and roots below it.
    pub(super) virt: bool,
    /// At or below a blocked root (see `Root::blocked`), with no root below
    /// that: a walk ending here is EROFS.
    pub(super) blocked: bool,
}

/// How to open a resolved object again with real flags.
pub(super) enum Reach {
    /// An allowed root, by its host path.
    Root(PathBuf),
    /// A name under an open directory.
    Child { parent: Rc<OwnedFd>, name: Vec<u8> },
    /// A symlink above the roots: only ever looked at, never opened.
    Link,
    /// A directory above the roots, by its host path: looked at and listed, never changed.
    Ancestor(PathBuf),
    /// A removed directory, which has no name left: by a descriptor of it.
    Removed(Rc<OwnedFd>),
}

/// A path resolved inside the guest namespace.
pub(super) struct Resolved {
    /// O_PATH descriptor of the object (the symlink itself when not followed).
    pub(super) fd: Rc<OwnedFd>,
    /// Host metadata of `fd`.
    pub(super) stat: Stat,
    /// Canonical guest path (no symlinks, `.` or `..`).
    pub(super) path: Vec<u8>,
    pub(super) reach: Reach,
}

pub(super) fn is_proc_pid_entry(name: &[u8]) -> bool {
    name == b"self" || name == b"thread-self" || name.iter().all(u8::is_ascii_digit)
}

/// Opens one name under `dir` as O_PATH, never following anything.
pub(super) fn open_child(dir: &OwnedFd, dir_stat: &Stat, name: &[u8]) -> Result<OwnedFd, Errno> {
    // /proc/self and friends would describe the host process.
    if dir_stat.st_ino == 1 && is_proc_pid_entry(name) {
        if let Ok(sfs) = rustix::fs::fstatfs(dir) {
            if sfs.f_type == PROC_SUPER_MAGIC {
                return Err(Errno::ENOENT);
            }
        }
    }
    if is_hidden(dir_stat, name) {
        return Err(Errno::ENOENT);
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

/// Opens the root `host` of `roots`, with its metadata. The policy's
/// roots are opened once per host thread and kept (see [`ROOT_FDS`]).
pub(super) fn open_root(roots: &[Root], host: &Path) -> Result<(Rc<OwnedFd>, Stat), Errno> {
    let keep = !is_forkvm_scratch(host);
    if keep {
        if let Some(fd) = ROOT_FDS.with_borrow(|m| m.get(host).cloned()) {
            // Still the object at that path (it may have been replaced on the
            // host since, say a deployment's new copy of a directory): one
            // stat, where opening it again took an open, a stat and a close.
            let st = rustix::fs::stat(host)?;
            if (st.st_dev, st.st_ino) == (fd.1, fd.2) {
                return Ok((fd.0, st));
            }
            ROOT_FDS.with_borrow_mut(|m| m.remove(host));
        }
    }
    let open = || rustix::fs::open(host, OFlags::PATH | OFlags::CLOEXEC, Mode::empty());
    let fd = Rc::new(match open() {
        // A private /tmp or /dev/shm comes into being when first used,
        // with the way to the roots mounted in it.
        Err(rustix::io::Errno::NOENT) if is_private_dir(host) => {
            ensure(host)?;
            if let Some(r) = roots.iter().find(|r| r.host == host) {
                make_ways(roots, &r.comps, host)?;
            }
            open()?
        }
        r => r?,
    });
    let st = rustix::fs::fstat(&*fd)?;
    if keep {
        ROOT_FDS.with_borrow_mut(|m| {
            // The policy names a handful of roots; anything more is not
            // worth keeping.
            if m.len() < ROOT_FDS_MAX {
                m.insert(host.to_path_buf(), (fd.clone(), st.st_dev, st.st_ino));
            }
        });
    }
    Ok((fd, st))
}

thread_local! {
    /// O_PATH descriptors of the policy's roots (`--allow-read`,
    /// `--allow-write`, by host path) this thread has walked from, with
    /// their device and inode. Opening a root again for every path cost
    /// three host calls of the ~13 a lookup made; now a stat of its path
    /// checks the kept one is still what is there. forkvm's own scratch
    /// directories (private trees, copies of the write roots) come and go
    /// with processes and are never kept.
    static ROOT_FDS: std::cell::RefCell<RootFds> = Default::default();
}

/// See [`ROOT_FDS`].
type RootFds = std::collections::HashMap<PathBuf, (Rc<OwnedFd>, u64, u64)>;

/// Most roots [`ROOT_FDS`] keeps per thread.
const ROOT_FDS_MAX: usize = 64;

pub(super) fn level_names(stack: &[Level]) -> Vec<&[u8]> {
    stack.iter().skip(1).map(|l| l.name.as_slice()).collect()
}

pub(super) fn canonical(stack: &[Level]) -> Vec<u8> {
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
pub(super) fn follow_link(
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

pub(super) fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = dir.to_vec();
    if !out.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

/// What a walk ends on.
pub(super) enum Walked {
    /// A host object inside the roots (or a link above them).
    Obj(Resolved),
    /// A directory above the roots, by its canonical guest path.
    Above(Vec<u8>),
    /// A synthetic object (see `virt`), by its canonical guest path.
    Virt(Vec<u8>, Node),
}

/// Resolves an absolute guest path inside the namespace of `roots`: a host
/// object, or None for a directory above the roots (a way through, never an
/// object that can be changed).
pub(super) fn walk(
    roots: &[Root],
    path: &[u8],
    follow_last: bool,
) -> Result<Option<Resolved>, Errno> {
    match walk_inner(roots, path, follow_last, &mut 0, None)? {
        Walked::Obj(r) => Ok(Some(r)),
        Walked::Above(_) | Walked::Virt(..) => Ok(None),
    }
}

pub(super) fn walk_inner(
    roots: &[Root],
    path: &[u8],
    follow_last: bool,
    links: &mut u32,
    synthetic: Option<&Process>,
) -> Result<Walked, Errno> {
    let mut top = Level {
        name: Vec::new(),
        fd: None,
        stat: None,
        root: None,
        virt: false,
        blocked: false,
    };
    if let Some(r) = roots.iter().find(|r| r.comps.is_empty()) {
        let (fd, st) = open_root(roots, &r.host)?;
        top.stat = Some(st);
        top.fd = Some(fd);
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
        // Looking a name up (`..` too) needs search permission on the
        // host directory it is in.
        if let Some(st) = stack.last().and_then(|l| l.stat.as_ref()) {
            may_search(st)?;
        }
        if comp == b".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let last = todo.is_empty();
        // Synthetic names (devices, /proc, /etc) win over the host's.
        if let Some(p) = synthetic {
            let cand = join(&canonical(&stack), &comp);
            if let Some(node) = virt::node(p, &cand) {
                let how = Step {
                    last,
                    follow_last,
                    links,
                };
                match virt::step(p, roots, &mut stack, &mut todo, &comp, node, how)? {
                    Stepped::Done(path, node) => return Ok(Walked::Virt(path, node)),
                    Stepped::Next => continue,
                    Stepped::Host => {}
                }
            }
        }
        let parent = stack.last().ok_or(Errno::ENOENT)?;
        // A mounted root wins over the root (or ancestor) it lies in.
        let mounted = if roots.iter().any(|r| r.mount) {
            let mut want = level_names(&stack);
            want.push(&comp);
            roots.iter().find(|r| r.mount && r.is(&want))
        } else {
            None
        };
        // A blocked root is walked through in the tree it is mounted in (its
        // placeholder there holds only the way to roots below it), so that
        // only a walk that ends in it, or under it, is refused.
        let blocked = match mounted {
            Some(r) => r.blocked,
            None => parent.blocked,
        };
        let mounted = mounted.filter(|r| !r.blocked).map(|r| r.host.clone());
        let (fd, known, root) = match (&parent.fd, &parent.stat) {
            _ if mounted.is_some() => {
                let host = mounted.ok_or(Errno::ENOENT)?;
                let (fd, st) = open_root(roots, &host)?;
                (fd, Some(st), Some(host))
            }
            (Some(dir), Some(st)) => (Rc::new(open_child(dir, st, &comp)?), None, None),
            _ => {
                let mut want = level_names(&stack);
                want.push(&comp);
                if let Some(r) = roots.iter().find(|r| r.is(&want)) {
                    let (fd, st) = open_root(roots, &r.host)?;
                    (fd, Some(st), Some(r.host.clone()))
                } else if roots.iter().any(|r| r.is_below(&want)) {
                    stack.push(Level {
                        name: comp,
                        fd: None,
                        stat: None,
                        root: None,
                        virt: false,
                        blocked: false,
                    });
                    continue;
                } else if parent.virt {
                    // Nothing of the host's lies in a synthetic directory.
                    return Err(Errno::ENOENT);
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
                    walk_inner(roots, &dest, true, links, synthetic)?;
                    let fd = rustix::fs::open(
                        &host,
                        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?;
                    let stat = rustix::fs::fstat(&fd)?;
                    if stat.st_mode & S_IFMT != S_IFLNK {
                        return Err(Errno::ENOENT);
                    }
                    return Ok(Walked::Obj(Resolved {
                        fd: Rc::new(fd),
                        stat,
                        path: link,
                        reach: Reach::Link,
                    }));
                }
            }
        };
        let st = match known {
            Some(st) => st,
            None => rustix::fs::fstat(&*fd)?,
        };
        let ty = st.st_mode & S_IFMT;
        if ty == S_IFLNK && (!last || follow_last) {
            let target = rustix::fs::readlinkat(&*fd, "", Vec::new())?.into_bytes();
            follow_link(&mut stack, &mut todo, &target, links)?;
            continue;
        }
        if !last && ty != S_IFDIR {
            return Err(Errno::ENOTDIR);
        }
        stack.push(Level {
            name: comp,
            blocked: blocked && root.is_none(),
            fd: Some(fd),
            stat: Some(st),
            root,
            virt: false,
        });
    }
    let path = canonical(&stack);
    let top = stack.pop().ok_or(Errno::ENOENT)?;
    if top.blocked {
        return Err(Errno::EROFS);
    }
    if top.virt {
        return Ok(Walked::Virt(path, Node::Dir));
    }
    let (Some(fd), Some(stat)) = (top.fd, top.stat) else {
        return Ok(Walked::Above(path));
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
    Ok(Walked::Obj(Resolved {
        fd,
        stat,
        path,
        reach,
    }))
}

/// Resolves a path to something the guest can look at: a host object, or a
/// directory above the roots (an ancestor, shown with its host metadata and
/// listed with only the names that lead to roots).
pub(super) fn walk_host(roots: &[Root], path: &[u8], follow_last: bool) -> Result<Resolved, Errno> {
    match walk_inner(roots, path, follow_last, &mut 0, None)? {
        Walked::Obj(r) => Ok(r),
        Walked::Virt(..) => Err(Errno::ENOENT),
        Walked::Above(path) => ancestor(path),
    }
}

/// A directory above the roots, by its canonical guest path (which is its host path).
pub(super) fn ancestor(path: Vec<u8>) -> Result<Resolved, Errno> {
    let host = PathBuf::from(std::ffi::OsStr::from_bytes(&path));
    let fd = rustix::fs::open(
        &host,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|_| Errno::ENOENT)?;
    let stat = rustix::fs::fstat(&fd)?;
    Ok(Resolved {
        fd: Rc::new(fd),
        stat,
        path,
        reach: Reach::Ancestor(host),
    })
}

/// The names directly under `dir` (a canonical guest path) that lead to a root.
pub(super) fn names_toward_roots(roots: &[Root], dir: &[u8]) -> Vec<Vec<u8>> {
    let comps: Vec<Vec<u8>> = components(dir).into_iter().collect();
    let want: Vec<&[u8]> = comps.iter().map(Vec::as_slice).collect();
    let mut out: Vec<Vec<u8>> = Vec::new();
    for r in roots.iter().filter(|r| r.is_below(&want)) {
        let name = &r.comps[want.len()];
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    out
}

/// Whether `dir` (a canonical guest path) is a directory above the roots.
pub(super) fn is_ancestor(roots: &[Root], dir: &[u8]) -> bool {
    let comps: Vec<Vec<u8>> = components(dir).into_iter().collect();
    let want: Vec<&[u8]> = comps.iter().map(Vec::as_slice).collect();
    roots.iter().any(|r| r.is_below(&want))
        && !roots
            .iter()
            .any(|r| r.comps.len() <= want.len() && r.comps.iter().zip(&want).all(|(a, b)| a == b))
}

/// Opens a resolved object again with real `flags` and checks it is the same one.
pub(super) fn reopen(r: &Resolved, flags: OFlags) -> Result<OwnedFd, Errno> {
    let fd = match &r.reach {
        Reach::Root(host) => rustix::fs::open(host, flags | OFlags::CLOEXEC, Mode::empty())?,
        Reach::Child { parent, name } => rustix::fs::openat(
            parent.as_fd(),
            name.as_slice(),
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?,
        Reach::Link => return Err(Errno::ELOOP),
        Reach::Removed(fd) => {
            let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&**fd));
            rustix::fs::open(link.as_str(), flags | OFlags::CLOEXEC, Mode::empty())?
        }
        Reach::Ancestor(host) => {
            if flags.intersects(OFlags::WRONLY | OFlags::RDWR | OFlags::CREATE | OFlags::TRUNC) {
                return Err(Errno::EROFS);
            }
            rustix::fs::open(
                host,
                flags | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?
        }
    };
    let st = rustix::fs::fstat(&fd)?;
    if st.st_dev != r.stat.st_dev || st.st_ino != r.stat.st_ino {
        return Err(Errno::ENOENT);
    }
    Ok(fd)
}

pub(super) fn owned(fd: Rc<OwnedFd>) -> Result<OwnedFd, Errno> {
    Rc::try_unwrap(fd).or_else(|rc| rc.try_clone().map_err(Errno::from))
}

/// Devices emulated in-process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dev {
    Null,
    Zero,
    Urandom,
    /// Read as /dev/urandom; stats as itself.
    Random,
    /// /dev/ptmx: each open is a new pseudo-terminal master.
    Ptmx,
    /// /dev/pts/N: the slave of the run's pty N.
    Pts(u32),
    /// /dev/tty: the caller's controlling terminal (a pty of the run).
    Tty,
}

/// What a guest path names.
pub(super) enum Target {
    /// An emulated device node.
    Dev(Dev),
    /// An already-open file (/dev/stdout, /proc/self/fd/N, ...).
    Fd(FileRef),
    /// A host object inside the allowed roots.
    Host(Resolved),
    /// A synthetic file, directory or link (see `virt`), by its canonical path.
    Virt(Vec<u8>, Node),
}

pub(super) fn parse_fd(s: &[u8]) -> Option<i32> {
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// The guest directory a relative path starts from.
pub(super) fn base_dir(p: &Process, dirfd: i32) -> Result<Vec<u8>, Errno> {
    base_dir_removed(p, dirfd).map(|(path, _)| path)
}

/// [`base_dir`], and whether that directory was removed.
fn base_dir_removed(p: &Process, dirfd: i32) -> Result<(Vec<u8>, bool), Errno> {
    if dirfd == AT_FDCWD {
        return Ok((cwd_path(p), cwd_removed(p)));
    }
    let file = p.fds.get(dirfd)?;
    let mut f = lock(&file);
    match &mut f.kind {
        FileKind::Dir { fd, path } => {
            // Renamed since it was opened: where it is now.
            if let Some(now) = fresh_path(p, fd, path) {
                *path = now;
            }
            Ok((path.clone(), removed(fd)))
        }
        _ => Err(Errno::ENOTDIR),
    }
}

/// `path` made absolute against `dirfd` (AT_FDCWD: the cwd).
/// In a removed directory Linux finds no name (ENOENT, creating included):
/// only `..` leads out, to where it was (and `.` is the directory itself,
/// see [`lookup`]).
pub(super) fn absolute(p: &Process, dirfd: i32, path: &[u8]) -> Result<Vec<u8>, Errno> {
    if path.starts_with(b"/") {
        return Ok(path.to_vec());
    }
    let (mut abs, dead) = base_dir_removed(p, dirfd)?;
    if dead {
        let mut rest = path;
        while let Some(r) = rest.strip_prefix(b"/").or_else(|| rest.strip_prefix(b"./")) {
            rest = r;
        }
        let Some(rest) = rest
            .strip_prefix(b"..")
            .filter(|r| r.is_empty() || r[0] == b'/')
        else {
            return Err(Errno::ENOENT);
        };
        // The parent it was removed from, then the rest of the path.
        let cut = abs.iter().rposition(|&b| b == b'/').unwrap_or(0);
        abs.truncate(cut.max(1));
        if !abs.ends_with(b"/") && !rest.is_empty() {
            abs.push(b'/');
        }
        abs.extend_from_slice(rest.strip_prefix(b"/").unwrap_or(rest));
        return Ok(abs);
    }
    if !abs.ends_with(b"/") {
        abs.push(b'/');
    }
    abs.extend_from_slice(path);
    Ok(abs)
}

/// The host path of the regular file guest path `abs` names, for execve:
/// resolved in the guest's namespace (its private /tmp, a fork's copies of
/// the write roots, mounted roots), then named by where that very object is
/// on the host, and checked to still be it. A guest path is not a host path:
/// taken as one, a script in the private /tmp ran the host's file of the same
/// name. EACCES for anything but a regular file with an execute bit.
/// An open file named as /dev/fd/N or /proc/self/fd/N (fexecve) is the
/// host file behind the descriptor.
pub fn exec_host_path(p: &Process, abs: &[u8]) -> Result<(String, Vec<u8>), Errno> {
    let (fd, stat, guest) = match lookup(p, AT_FDCWD, abs, true)? {
        Target::Host(r) => (r.fd, r.stat, r.path),
        Target::Fd(f) => match &lock(&f).kind {
            FileKind::File { fd, path } if !is_memfd(path) && !path.starts_with(b"/proc/") => (
                Rc::new(fd.try_clone()?),
                rustix::fs::fstat(fd)?,
                path.clone(),
            ),
            _ => return Err(Errno::EACCES),
        },
        _ => return Err(Errno::EACCES),
    };
    // Executing needs a regular file the guest's uid may execute.
    if stat.st_mode & S_IFMT != S_IFREG || !guest_may(&stat, 1) {
        return Err(Errno::EACCES);
    }
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&*fd));
    let host = rustix::fs::readlink(link.as_str(), Vec::new())?;
    let host = host.into_string().map_err(|_| Errno::ENOENT)?;
    let st = rustix::fs::stat(host.as_str())?;
    if st.st_dev != stat.st_dev || st.st_ino != stat.st_ino {
        return Err(Errno::ENOENT);
    }
    Ok((host, guest))
}

/// The guest path `path` names relative to the directory `dirfd` (AT_FDCWD:
/// the cwd), made absolute: for execveat.
pub fn absolute_at(p: &Process, dirfd: i32, path: &[u8]) -> Result<Vec<u8>, Errno> {
    absolute(p, dirfd, path)
}

/// Looks a (non-empty) guest path up.
/// Whether `path` (relative to the cwd) names something the guest may see,
/// with stat's errors (ENOENT, EACCES, ...) otherwise.
pub fn check_path(p: &Process, path: &[u8], follow: bool) -> Result<(), Errno> {
    lookup(p, AT_FDCWD, path, follow).map(|_| ())
}

pub(super) fn lookup(p: &Process, dirfd: i32, path: &[u8], follow: bool) -> Result<Target, Errno> {
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    if let Some(r) = removed_itself(p, dirfd, path)? {
        return Ok(Target::Host(r));
    }
    resolve(p, &absolute(p, dirfd, path)?, follow)
}

/// When `path` is "." (or "./", "./.") in a removed directory: that
/// directory, which has no path left (see [`removed_base`]).
pub(super) fn removed_itself(
    p: &Process,
    dirfd: i32,
    path: &[u8],
) -> Result<Option<Resolved>, Errno> {
    if names_itself(path) {
        removed_base(p, dirfd)
    } else {
        Ok(None)
    }
}

/// Whether the relative `path` names the directory it starts from (".",
/// "./", "./.").
fn names_itself(path: &[u8]) -> bool {
    !path.starts_with(b"/")
        && path
            .split(|&b| b == b'/')
            .all(|c| c.is_empty() || c == b".")
}

/// The directory relative paths start from (`dirfd`, or the cwd), if it
/// was removed: it has no name left, but "." is still it, as on Linux
/// (stat says it has no links, a listing is empty; nothing can be made in it).
fn removed_base(p: &Process, dirfd: i32) -> Result<Option<Resolved>, Errno> {
    let (fd, path) = if dirfd == AT_FDCWD {
        match &p.cwd_dir {
            Some(d) if removed(d) => (d.try_clone()?, cwd_path(p)),
            _ => return Ok(None),
        }
    } else {
        let file = p.fds.get(dirfd)?;
        let f = lock(&file);
        match &f.kind {
            FileKind::Dir { fd, path } if removed(fd) => (fd.try_clone()?, path.clone()),
            _ => return Ok(None),
        }
    };
    let stat = rustix::fs::fstat(&fd)?;
    let fd = Rc::new(fd);
    Ok(Some(Resolved {
        fd: fd.clone(),
        stat,
        path,
        reach: Reach::Removed(fd),
    }))
}

/// Looks the absolute guest path `abs` up, synthetic names included.
pub(super) fn resolve(p: &Process, abs: &[u8], follow: bool) -> Result<Target, Errno> {
    Ok(match walk_inner(&roots(p), abs, follow, &mut 0, Some(p))? {
        Walked::Obj(r) => Target::Host(r),
        Walked::Above(path) => Target::Host(ancestor(path)?),
        Walked::Virt(_, Node::Dev(d)) => Target::Dev(d),
        Walked::Virt(_, Node::Open(f)) => Target::Fd(f),
        Walked::Virt(path, node) => Target::Virt(path, node),
    })
}

/// The object `dirfd` itself (AT_EMPTY_PATH).
pub(super) fn lookup_fd(p: &Process, dirfd: i32) -> Result<Target, Errno> {
    if dirfd == AT_FDCWD {
        return lookup(p, AT_FDCWD, &cwd_path(p), true);
    }
    Ok(Target::Fd(p.fds.get(dirfd)?))
}

/// Reads the path argument of a `*at` call honouring AT_EMPTY_PATH (NULL allowed then).
pub(super) fn lookup_at(
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

/// An O_PATH descriptor of the host object the guest path `path` (relative
/// to the cwd) names, for an inotify watch (see `linux::inotify`): the
/// symlink itself unless `follow`. EACCES for the emulated devices and for
/// directories above the roots, whose host events would name host files the
/// guest cannot see.
pub fn watch_target(p: &Process, path: &[u8], follow: bool) -> Result<OwnedFd, Errno> {
    match lookup(p, AT_FDCWD, path, follow)? {
        Target::Host(r) if matches!(r.reach, Reach::Ancestor(_)) => Err(Errno::EACCES),
        Target::Host(r) => owned(r.fd),
        Target::Fd(file) => match &lock(&file).kind {
            FileKind::File { fd, .. }
            | FileKind::Dir { fd, .. }
            | FileKind::PathOnly { fd, .. } => Ok(fd.try_clone()?),
            _ => Err(Errno::EACCES),
        },
        // The guest's own generated files and directories have no host
        // object to watch (and nothing else changes them).
        Target::Dev(_) | Target::Virt(..) => Err(Errno::EACCES),
    }
}
