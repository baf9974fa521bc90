//! open and the namespace changes: create, mkdir, unlink, rename, and the refused ones.

use super::*;

pub(super) fn dev_kind(d: Dev) -> FileKind {
    match d {
        Dev::Null => FileKind::Null,
        Dev::Zero => FileKind::Zero,
        Dev::Urandom | Dev::Random => FileKind::Urandom,
        // Opened by `do_open` itself (a new object each time).
        Dev::Ptmx | Dev::Pts(_) | Dev::Tty => FileKind::Null,
    }
}

pub(super) fn do_open(
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
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    if flags & O_TMPFILE != 0 {
        let abs = absolute(p, dirfd, &path)?;
        return open_tmpfile(p, &abs, flags, mode, status, cloexec);
    }
    let writes = acc != O_RDONLY || flags & (O_CREAT | O_TRUNC) != 0;
    let follow = flags & O_NOFOLLOW == 0 && flags & (O_CREAT | O_EXCL) != O_CREAT | O_EXCL;
    // "." in a removed directory is that directory, which has no path.
    let (abs, found) = match removed_itself(p, dirfd, &path)? {
        Some(_) if writes && !path_only => return Err(Errno::EISDIR),
        Some(r) => (Vec::new(), Ok(Target::Host(r))),
        None => {
            let abs = absolute(p, dirfd, &path)?;
            let found = resolve(p, &abs, follow);
            (abs, found)
        }
    };
    // Resolved first, so a device or /proc file is known by what it is, not
    // by how the path spells it (a link to /dev/null, /dev/./null).
    let r = match found {
        Ok(Target::Dev(d)) => {
            if flags & O_DIRECTORY != 0 {
                return Err(Errno::ENOTDIR);
            }
            if flags & (O_CREAT | O_EXCL) == O_CREAT | O_EXCL {
                return Err(Errno::EEXIST);
            }
            let status = if path_only { O_PATH } else { status };
            match d {
                Dev::Ptmx if !path_only => {
                    return crate::linux::pty::open_master(p, status, cloexec)
                }
                Dev::Pts(n) if !path_only => {
                    return crate::linux::pty::open_slave(p, n, flags, cloexec)
                }
                Dev::Tty if !path_only => return crate::linux::pty::open_tty(p, flags, cloexec),
                _ => {}
            }
            return Ok(p.fds.insert(OpenFile::new(dev_kind(d), status), cloexec)? as u64);
        }
        Ok(Target::Fd(f)) => {
            // A regular file is opened anew, as Linux does through the magic
            // link: its own offset, the flags asked for, O_TRUNC applied
            // (`cat /dev/fd/3` after a read starts at 0; `> /dev/stderr`
            // truncates a file). Pipes, sockets and the host's stdio stay
            // shared descriptions.
            if let Some(kind) = reopen_regular(p, &f, acc, flags)? {
                return Ok(p.fds.insert(OpenFile::new(kind, status), cloexec)? as u64);
            }
            return Ok(p.fds.insert_from(0, f, cloexec)? as u64);
        }
        Ok(Target::Virt(gpath, node)) => {
            let status = if path_only { O_PATH } else { status };
            let kind = open_virtual(p, mem, gpath, node, flags, writes)?;
            return Ok(p.fds.insert(OpenFile::new(kind, status), cloexec)? as u64);
        }
        Ok(Target::Host(r)) if !writes || path_only => r,
        Err(e) if !writes || path_only => return Err(e),
        Ok(Target::Host(_)) | Err(_) => {
            // open("n/", O_CREAT) never makes a file n.
            if flags & O_CREAT != 0 && tail(&path).slash {
                return Err(Errno::EISDIR);
            }
            // "d/." and "d/.." are directories that exist, never written or created.
            if tail(&path).dots != 0 {
                walk_host(&roots(p), &abs, true)?;
                return Err(Errno::EISDIR);
            }
            return open_for_writing(p, &abs, flags, mode, status, cloexec);
        }
    };
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
        // Reading or listing needs read permission.
        if matches!(ty, S_IFDIR | S_IFREG | S_IFIFO) {
            may_read(&r.stat)?;
        }
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
            S_IFIFO => return super::fifo::open(p, r, flags, status, cloexec),
            // Sockets and device nodes of the host stay closed.
            _ => return Err(Errno::EACCES),
        }
    };
    Ok(p.fds.insert(OpenFile::new(kind, status), cloexec)? as u64)
}

/// Opens a synthetic object (see `virt`): a generated file is made into a
/// sealed in-memory file when opened, a directory is an empty one that keeps
/// the listing's position.
fn open_virtual(
    p: &Process,
    mem: &GuestMemory,
    path: Vec<u8>,
    node: Node,
    flags: u32,
    writes: bool,
) -> Result<FileKind, Errno> {
    let dir = flags & O_DIRECTORY != 0;
    match node {
        Node::File(_) | Node::Exe if dir => Err(Errno::ENOTDIR),
        Node::File(_) | Node::Exe if writes => Err(Errno::EACCES),
        Node::File(_) => {
            let content = virt::content_path(p, &path);
            let data = crate::linux::procfs::synthesize(p, mem, &content).ok_or(Errno::ENOENT)?;
            let fd = crate::linux::procfs::memory_file(&data)?;
            Ok(FileKind::File { fd, path })
        }
        Node::Exe => {
            let fd = rustix::fs::open(
                p.exe_host.as_str(),
                OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|_| Errno::ENOENT)?;
            Ok(FileKind::File { fd, path })
        }
        Node::Dir if writes => Err(Errno::EISDIR),
        Node::Dir => Ok(FileKind::Dir {
            fd: crate::linux::procfs::memory_file(&[])?,
            path,
        }),
        // A link not followed (O_NOFOLLOW).
        _ => Err(Errno::ELOOP),
    }
}

/// A new open of the regular file behind the open description `f` with
/// access mode `acc` and `flags` (O_TRUNC), for /dev/fd/N and friends;
/// None for anything but a host regular file. Writing needs the file to be
/// under a write root (or the private /tmp), as any open for writing.
fn reopen_regular(
    p: &Process,
    f: &FileRef,
    acc: u32,
    flags: u32,
) -> Result<Option<FileKind>, Errno> {
    let of = lock(f);
    let FileKind::File { fd, path } = &of.kind else {
        return Ok(None);
    };
    let st = rustix::fs::fstat(fd)?;
    if st.st_mode & S_IFMT != S_IFREG || path.starts_with(b"/proc/") {
        return Ok(None);
    }
    // A description that writes already (a memfd's) may be opened again for writing.
    let writes = acc != O_RDONLY || flags & O_TRUNC != 0;
    let host_writable = is_memfd(path) && rustix::fs::fcntl_getfl(fd)?.contains(OFlags::RDWR);
    if writes && !host_writable && !super::attr::in_write_roots(p, path, &st) {
        return Err(Errno::EACCES);
    }
    let mut host = match acc {
        O_WRONLY => OFlags::WRONLY,
        O_RDWR => OFlags::RDWR,
        _ => OFlags::RDONLY,
    } | OFlags::CLOEXEC
        | OFlags::NOCTTY
        | OFlags::NONBLOCK;
    if flags & O_TRUNC != 0 && acc != O_RDONLY {
        host |= OFlags::TRUNC;
    }
    if flags & O_APPEND != 0 {
        host |= OFlags::APPEND;
    }
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd));
    let new = rustix::fs::open(link.as_str(), host, rustix::fs::Mode::empty())?;
    Ok(Some(FileKind::File {
        fd: new,
        path: path.clone(),
    }))
}

/// Implements open(2).
pub(super) fn sys_open(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_open(p, mem, AT_FDCWD, a[0], a[1], a[2])
}

/// Implements openat(2).
pub(super) fn sys_openat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_open(p, mem, a[0] as i32, a[1], a[2], a[3])
}

/// Implements creat(2): open(O_CREAT|O_WRONLY|O_TRUNC), under `--allow-write` roots.
pub(super) fn sys_creat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
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
pub(super) fn writable_parent(
    p: &Process,
    abs: &[u8],
) -> Result<(OwnedFd, Vec<u8>, Vec<u8>), Errno> {
    let roots = write_roots(p)?;
    // Only the last name is split off as text: the rest is resolved, since
    // a `..` after a symlink leaves the link's target, not the link's
    // directory ("a/../x" with a -> b/c is b/x).
    let (dir, name) = split_last(abs)?;
    if name == b"." || name == b".." {
        // The entry is a directory that exists: named by its canonical path.
        let canon = walk_host(&super::path::roots(p), abs, true)?.path;
        let (dir, name) = split_last(&canon)?;
        if name == b"." || name == b".." {
            return Err(Errno::EINVAL);
        }
        return writable_parent_of(p, &roots, dir, name);
    }
    writable_parent_of(p, &roots, dir, name)
}

/// `abs` (absolute) cut before its last name, trailing slashes ignored:
/// EINVAL for `/` itself, which has no name.
fn split_last(abs: &[u8]) -> Result<(&[u8], &[u8]), Errno> {
    let end = abs.iter().rposition(|&b| b != b'/').ok_or(Errno::EINVAL)? + 1;
    let trimmed = &abs[..end];
    let cut = trimmed
        .iter()
        .rposition(|&b| b == b'/')
        .ok_or(Errno::ENOENT)?;
    let dir = match trimmed[..cut].iter().rposition(|&b| b != b'/') {
        Some(i) => &trimmed[..=i],
        None => b"/".as_slice(),
    };
    Ok((dir, &trimmed[cut + 1..]))
}

/// Whether a root is mounted at the canonical guest path `guest` (see
/// `Root::mount`), or with `below`, anywhere under it too.
fn mount_at_or_below(roots: &[Root], guest: &[u8], below: bool) -> bool {
    let c: Vec<Vec<u8>> = components(guest).into_iter().collect();
    let c: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
    roots
        .iter()
        .any(|r| r.mount && (r.is(&c) || (below && r.is_below(&c))))
}

fn writable_parent_of(
    p: &Process,
    roots: &[Root],
    dir: &[u8],
    name: &[u8],
) -> Result<(OwnedFd, Vec<u8>, Vec<u8>), Errno> {
    let parent = match walk(roots, dir, true) {
        Ok(Some(r)) => r,
        Ok(None) => return Err(Errno::EROFS),
        Err(Errno::ENOENT) => {
            // A missing parent is ENOENT as on Linux (programs create it and
            // retry); one that exists outside the write roots is read-only.
            let r = walk_host(&super::path::roots(p), dir, true)?;
            if r.stat.st_mode & S_IFMT != S_IFDIR {
                return Err(Errno::ENOTDIR);
            }
            return Err(Errno::EROFS);
        }
        Err(e) => return Err(e),
    };
    if parent.stat.st_mode & S_IFMT != S_IFDIR {
        return Err(Errno::ENOTDIR);
    }
    // The name is looked up in it: search permission.
    may_search(&parent.stat)?;
    let fd = reopen(&parent, OFlags::RDONLY | OFlags::DIRECTORY)?;
    let mut guest = parent.path.clone();
    if guest != b"/" {
        guest.push(b'/');
    }
    guest.extend_from_slice(name);
    // A root mounted here is not the entry of this directory (which holds
    // only its mount point): as on Linux, the mount point is busy.
    if mount_at_or_below(roots, &guest, false) {
        return Err(Errno::EBUSY);
    }
    // Private trees stay shallow enough for the host to copy and remove.
    if guest.len() > PRIVATE_PATH_MAX && is_scratch_path(p, &guest) {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok((fd, name.to_vec(), guest))
}

/// The entry an open for writing works on.
struct Entry {
    /// The directory it is in.
    dir: OwnedFd,
    name: Vec<u8>,
    /// Its canonical guest path.
    guest: Vec<u8>,
    /// Its metadata (not following a link) if it exists.
    existing: Option<Stat>,
}

/// The entry an open for writing of `abs` works on. A last symlink is
/// followed as Linux does (unless O_NOFOLLOW, or O_EXCL with O_CREAT), to an
/// existing object or, with
/// O_CREAT, to the name to create: a dangling `link -> target` makes
/// `target` next to the link. Each step is resolved anew in the namespace,
/// so a link can only lead to another name under the write roots.
fn writable_entry(p: &Process, abs: &[u8], flags: u32) -> Result<Entry, Errno> {
    let follow = flags & O_NOFOLLOW == 0 && flags & (O_CREAT | O_EXCL) != O_CREAT | O_EXCL;
    let mut abs = abs.to_vec();
    let mut links = 0;
    // A trailing slash (on the path or a followed link) asks for a directory.
    let mut dir_only = tail(&abs).slash;
    loop {
        let (dir, name, guest) = writable_parent(p, &abs).map_err(|e| match e {
            Errno::EROFS | Errno::EBUSY => Errno::EACCES,
            e => e,
        })?;
        let existing = rustix::fs::statat(&dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW).ok();
        let is_link = existing
            .as_ref()
            .is_some_and(|st| st.st_mode & S_IFMT == S_IFLNK);
        if !follow || !is_link {
            if dir_only {
                match &existing {
                    Some(st) if st.st_mode & S_IFMT != S_IFDIR => return Err(Errno::ENOTDIR),
                    None => return Err(Errno::ENOENT),
                    _ => {}
                }
            }
            return Ok(Entry {
                dir,
                name,
                guest,
                existing,
            });
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(Errno::ELOOP);
        }
        let target = rustix::fs::readlinkat(&dir, name.as_slice(), Vec::new())?.into_bytes();
        if target.is_empty() {
            return Err(Errno::ENOENT);
        }
        // "link -> name/" names a directory: never a file to create.
        if target.ends_with(b"/") {
            if flags & O_CREAT != 0 {
                return Err(Errno::EISDIR);
            }
            dir_only = true;
        }
        abs = if target.starts_with(b"/") {
            target
        } else {
            let parent = guest.strip_suffix(name.as_slice()).ok_or(Errno::ENOENT)?;
            join(parent, &target)
        };
    }
}

/// open(2) with write access or O_CREAT/O_TRUNC: only under `--allow-write`
/// roots; a last symlink is followed by [`writable_entry`], never by the host.
pub(super) fn open_for_writing(
    p: &mut Process,
    abs: &[u8],
    flags: u32,
    mode: u64,
    status: u32,
    cloexec: bool,
) -> SysResult {
    let Entry {
        dir,
        name,
        guest,
        existing,
    } = writable_entry(p, abs, flags)?;
    // O_NONBLOCK: a fifo in a write root (mknod makes them) must not block
    // the host thread waiting for a reader; only regular files and
    // directories are kept, where it changes nothing.
    let mut of = OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK;
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
    // A FIFO is opened as one (see `fifo`).
    if let Some(st) = &existing {
        if st.st_mode & S_IFMT == S_IFIFO {
            if let Ok(r) = walk_host(&super::path::roots(p), &guest, false) {
                if r.stat.st_mode & S_IFMT == S_IFIFO {
                    return super::fifo::open(p, r, flags, status, cloexec);
                }
            }
        }
    }
    // Writing an existing file needs the guest's write permission (the host
    // user may have more, say root).
    if flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0 {
        if let Some(st) = &existing {
            let exclusive = flags & (O_CREAT | O_EXCL) == O_CREAT | O_EXCL;
            let want = if flags & O_ACCMODE == O_RDWR { 6 } else { 2 };
            if st.st_mode & S_IFMT == S_IFREG && !exclusive && !guest_may(st, want) {
                return Err(Errno::EACCES);
            }
        }
    }
    // Whether O_CREAT makes the file: its mode is then set exactly (below).
    let creates = flags & O_CREAT != 0 && existing.is_none();
    if creates {
        may_change(&dir, &name, NameChange::Create)?;
    } else if let Some(st) = &existing {
        if st.st_mode & S_IFMT == S_IFREG && flags & O_ACCMODE == O_RDONLY {
            may_read(st)?;
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
    // The host's umask applied too: the mode must be the guest's (umask(0)
    // and 0666 is 0666, not 0644). Only set when it differs, so a watcher
    // sees no IN_ATTRIB the guest did not cause.
    let mut st = rustix::fs::fstat(&fd)?;
    if creates && st.st_mode & 0o7777 != mode.bits() {
        rustix::fs::fchmod(&fd, mode)?;
        st = rustix::fs::fstat(&fd)?;
    }
    let kind = match st.st_mode & S_IFMT {
        S_IFREG => FileKind::File { fd, path: guest },
        S_IFDIR => FileKind::Dir { fd, path: guest },
        _ => return Err(Errno::EACCES),
    };
    Ok(p.fds.insert(OpenFile::new(kind, status), cloexec)? as u64)
}

/// As [`change_target_path`] for a call that creates the entry: one that
/// already exists where nothing can be created is EEXIST, as on Linux
/// (`mkdir -p` and `tar -x` rely on it for the directories above their work).
pub(super) fn create_target(
    p: &Process,
    dirfd: i32,
    path: &[u8],
) -> Result<(OwnedFd, Vec<u8>), Errno> {
    change_target_path(p, dirfd, path).map_err(|e| {
        let exists = || {
            absolute(p, dirfd, path)
                .and_then(|abs| walk_host(&super::path::roots(p), &abs, false))
                .is_ok()
        };
        if matches!(e, Errno::EROFS | Errno::EINVAL | Errno::EBUSY) && exists() {
            Errno::EEXIST
        } else {
            e
        }
    })
}

/// What a path says about its last component beyond its name, which the
/// lexical clean-up of paths drops: a trailing slash demands a directory, and
/// a last component "." or ".." is never removed, renamed or created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tail {
    /// The path ends with '/'.
    pub slash: bool,
    /// The last component is "." (1) or ".." (2); 0 otherwise.
    pub dots: u8,
}

pub(super) fn tail(path: &[u8]) -> Tail {
    let trimmed = match path.iter().rposition(|&b| b != b'/') {
        Some(i) => &path[..=i],
        None => path,
    };
    let last = trimmed.rsplit(|&b| b == b'/').next().unwrap_or(b"");
    Tail {
        slash: trimmed.len() < path.len() && !trimmed.is_empty(),
        dots: match last {
            b"." => 1,
            b".." => 2,
            _ => 0,
        },
    }
}

/// Whether `name` in `dir` is a directory (without following a last
/// symlink); ENOENT and the like when it does not exist.
fn is_dir_at(dir: &OwnedFd, name: &[u8]) -> Result<bool, Errno> {
    let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
    Ok(st.st_mode & S_IFMT == S_IFDIR)
}

/// A name that calls creating something other than a directory cannot take:
/// one with a trailing slash (EEXIST if it exists, else ENOENT, as Linux).
fn refuse_slash_for_non_dir(p: &Process, dirfd: i32, path: &[u8]) -> Result<(), Errno> {
    if !tail(path).slash {
        return Ok(());
    }
    let abs = absolute(p, dirfd, path)?;
    match walk_host(&roots(p), &abs, false) {
        Ok(_) => Err(Errno::EEXIST),
        Err(_) => Err(Errno::ENOENT),
    }
}

/// A path argument resolved for a change: (parent dir fd, name).
pub(super) fn change_target_path(
    p: &Process,
    dirfd: i32,
    path: &[u8],
) -> Result<(OwnedFd, Vec<u8>), Errno> {
    let abs = absolute(p, dirfd, path)?;
    let (dir, name, _) = writable_parent(p, &abs)?;
    Ok((dir, name))
}

/// As [`change_target_path`] for an entry that goes away or moves (unlink,
/// rmdir, rename): EBUSY when a root is mounted at or under it, whose way
/// would be lost.
fn moved_target_path(p: &Process, dirfd: i32, path: &[u8]) -> Result<(OwnedFd, Vec<u8>), Errno> {
    let abs = absolute(p, dirfd, path)?;
    let (dir, name, guest) = writable_parent(p, &abs)?;
    if mount_at_or_below(&roots(p), &guest, true) {
        return Err(Errno::EBUSY);
    }
    Ok((dir, name))
}

/// Implements mkdir(2) under `--allow-write` roots (elsewhere EROFS).
pub(super) fn sys_mkdir(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_mkdir(p, mem, AT_FDCWD, a[0], a[1])
}

/// Implements mkdirat(2).
pub(super) fn sys_mkdirat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_mkdir(p, mem, a[0] as i32, a[1], a[2])
}

pub(super) fn do_mkdir(
    p: &mut Process,
    mem: &GuestMemory,
    dirfd: i32,
    addr: u64,
    mode: u64,
) -> SysResult {
    let (dir, name) = create_target(p, dirfd, &read_name(mem, addr)?)?;
    may_change(&dir, &name, NameChange::Create)?;
    // mkdir keeps the sticky bit, as Linux does (a shared scratch directory).
    let mode = Mode::from_bits_truncate((mode as u32 & 0o1777) & !p.fds.umask);
    rustix::fs::mkdirat(&dir, name.as_slice(), mode)?;
    // Usually the mode is right already: then nothing more (no open or
    // IN_ATTRIB a watcher would see).
    if rustix::fs::statat(&dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| st.st_mode & 0o7777 == mode.bits())
    {
        return Ok(0);
    }
    // The host's umask applied too (and never to the sticky bit): set the
    // guest's mode on the directory just made, opened without following a
    // link another process might have put there since.
    let made = rustix::fs::openat(
        &dir,
        name.as_slice(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fchmod(&made, mode)?;
    Ok(0)
}

/// Implements unlink(2).
pub(super) fn sys_unlink(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_unlink(p, mem, AT_FDCWD, a[0], 0)
}

/// Implements rmdir(2).
pub(super) fn sys_rmdir(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_unlink(p, mem, AT_FDCWD, a[0], AT_REMOVEDIR)
}

/// Implements unlinkat(2).
pub(super) fn sys_unlinkat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[2] & !AT_REMOVEDIR != 0 {
        return Err(Errno::EINVAL);
    }
    do_unlink(p, mem, a[0] as i32, a[1], a[2])
}

pub(super) const AT_REMOVEDIR: u64 = 0x200;

pub(super) fn do_unlink(
    p: &mut Process,
    mem: &GuestMemory,
    dirfd: i32,
    addr: u64,
    flags: u64,
) -> SysResult {
    let path = read_name(mem, addr)?;
    let t = tail(&path);
    let rmdir = flags & AT_REMOVEDIR != 0;
    match (rmdir, t.dots) {
        (true, 1) => return Err(Errno::EINVAL),
        (true, 2) => return Err(Errno::ENOTEMPTY),
        (false, 1 | 2) => return Err(Errno::EISDIR),
        _ => {}
    }
    let (dir, name) = moved_target_path(p, dirfd, &path)?;
    // unlink("f/") names a directory: never the file f.
    if t.slash && !rmdir {
        return Err(if is_dir_at(&dir, &name)? {
            Errno::EISDIR
        } else {
            Errno::ENOTDIR
        });
    }
    may_change(&dir, &name, NameChange::Remove)?;
    let f = if rmdir {
        rustix::fs::AtFlags::REMOVEDIR
    } else {
        rustix::fs::AtFlags::empty()
    };
    rustix::fs::unlinkat(&dir, name.as_slice(), f)?;
    Ok(0)
}

/// Implements rename(2).
pub(super) fn sys_rename(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_rename(p, mem, AT_FDCWD, a[0], AT_FDCWD, a[1], 0)
}

/// Implements renameat(2).
pub(super) fn sys_renameat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_rename(p, mem, a[0] as i32, a[1], a[2] as i32, a[3], 0)
}

/// Implements renameat2(2) (RENAME_NOREPLACE only).
pub(super) fn sys_renameat2(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_rename(p, mem, a[0] as i32, a[1], a[2] as i32, a[3], a[4])
}

pub(super) fn do_rename(
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
    // Both names are read before either is looked at, as Linux does.
    let newpath = read_name(mem, new)?;
    let oldpath = read_name(mem, old)?;
    let (ot, nt) = (tail(&oldpath), tail(&newpath));
    if ot.dots != 0 || nt.dots != 0 {
        return Err(Errno::EBUSY);
    }
    let (od, on) = moved_target_path(p, olddir, &oldpath)?;
    // A trailing slash on either name says the source is a directory.
    if (ot.slash || nt.slash) && !is_dir_at(&od, &on)? {
        return Err(Errno::ENOTDIR);
    }
    let abs = absolute(p, newdir, &newpath)?;
    let (nd, nn, guest) = writable_parent(p, &abs)?;
    if mount_at_or_below(&roots(p), &guest, true) {
        return Err(Errno::EBUSY);
    }
    may_change(&od, &on, NameChange::Remove)?;
    may_change(&nd, &nn, NameChange::Replace)?;
    // A directory moved into a private tree must keep it shallow.
    if is_scratch_path(p, &guest) {
        let depth = subtree_path_len(&od, &on, PRIVATE_PATH_MAX)?;
        if guest.len().saturating_add(depth) > PRIVATE_PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
    }
    let f = if flags & RENAME_NOREPLACE != 0 {
        rustix::fs::RenameFlags::NOREPLACE
    } else {
        rustix::fs::RenameFlags::empty()
    };
    rustix::fs::renameat_with(&od, on.as_slice(), &nd, nn.as_slice(), f)?;
    // Directory descriptors and working directories below it are elsewhere now.
    if is_dir_at(&nd, &nn).unwrap_or(true) {
        note_dir_moved();
    }
    Ok(0)
}

/// Implements link(2) under `--allow-write` roots.
pub(super) fn sys_link(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_link(p, mem, AT_FDCWD, a[0], AT_FDCWD, a[1], 0)
}

/// Implements linkat(2) under `--allow-write` roots (both names there).
pub(super) fn sys_linkat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_link(
        p,
        mem,
        a[0] as i32,
        a[1],
        a[2] as i32,
        a[3],
        a[4] as u32 as u64,
    )
}

const AT_SYMLINK_FOLLOW: u64 = 0x400;

fn do_link(
    p: &mut Process,
    mem: &GuestMemory,
    olddir: i32,
    old: u64,
    newdir: i32,
    new: u64,
    flags: u64,
) -> SysResult {
    if flags & !(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(Errno::EINVAL);
    }
    // The existing object must itself be under a write root: a new name for
    // a read-only file would make it writable.
    let nofollow = if flags & AT_SYMLINK_FOLLOW != 0 {
        0
    } else {
        AT_SYMLINK_NOFOLLOW
    };
    let newpath = read_name(mem, new)?;
    let obj = super::attr::obj_at(p, mem, olddir, old, nofollow | (flags & AT_EMPTY_PATH))?;
    if obj.is_dir() {
        return Err(Errno::EPERM);
    }
    refuse_slash_for_non_dir(p, newdir, &newpath)?;
    let (nd, nn) = create_target(p, newdir, &newpath)?;
    may_change(&nd, &nn, NameChange::Create)?;
    obj.link_to(&nd, &nn)?;
    Ok(0)
}

/// Implements symlink(2) under `--allow-write` roots.
pub(super) fn sys_symlink(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_symlink(p, mem, a[0], AT_FDCWD, a[1])
}

/// Implements symlinkat(2) under `--allow-write` roots.
pub(super) fn sys_symlinkat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_symlink(p, mem, a[0], a[1] as i32, a[2])
}

fn do_symlink(p: &mut Process, mem: &GuestMemory, target: u64, dirfd: i32, addr: u64) -> SysResult {
    // The target is only text: the guest resolves it inside its own namespace.
    let target = read_name(mem, target)?;
    if target.is_empty() {
        return Err(Errno::ENOENT);
    }
    let path = read_name(mem, addr)?;
    refuse_slash_for_non_dir(p, dirfd, &path)?;
    let (dir, name) = create_target(p, dirfd, &path)?;
    may_change(&dir, &name, NameChange::Create)?;
    rustix::fs::symlinkat(target.as_slice(), &dir, name.as_slice())?;
    Ok(0)
}

/// Implements mknod(2) under `--allow-write` roots (regular files, fifos and sockets).
pub(super) fn sys_mknod(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_mknod(p, mem, AT_FDCWD, a[0], a[1], a[2])
}

/// Implements mknodat(2) under `--allow-write` roots.
pub(super) fn sys_mknodat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    do_mknod(p, mem, a[0] as i32, a[1], a[2], a[3])
}

fn do_mknod(
    p: &mut Process,
    mem: &GuestMemory,
    dirfd: i32,
    addr: u64,
    mode: u64,
    dev: u64,
) -> SysResult {
    const S_IFSOCK: u32 = 0o140000;
    const S_IFBLK: u32 = 0o060000;
    let mode = mode as u32;
    let kind = match mode & S_IFMT {
        0 | S_IFREG => rustix::fs::FileType::RegularFile,
        S_IFIFO => rustix::fs::FileType::Fifo,
        S_IFSOCK => rustix::fs::FileType::Socket,
        // Device nodes need CAP_MKNOD.
        S_IFCHR | S_IFBLK => {
            read_name(mem, addr)?;
            return Err(Errno::EPERM);
        }
        _ => return Err(Errno::EINVAL),
    };
    let (dir, name) = create_target(p, dirfd, &read_name(mem, addr)?)?;
    may_change(&dir, &name, NameChange::Create)?;
    // No set-user-ID or set-group-ID bit on a host file (see `attr::chmod_obj`).
    let perm = Mode::from_bits_truncate((mode & 0o1777) & !p.fds.umask);
    rustix::fs::mknodat(&dir, name.as_slice(), kind, perm, dev)?;
    Ok(0)
}

/// Creates the socket file of an AF_UNIX bind to `path` (relative to the
/// cwd), with mode 0777 less the umask as on Linux; a name that exists is
/// EADDRINUSE. Returns the file's host device and inode, by which a connect
/// finds the socket again (see `unix_names`).
pub fn make_socket_file(p: &Process, path: &[u8]) -> Result<(u64, u64), Errno> {
    const EADDRINUSE: Errno = Errno(98);
    let in_use = |e| if e == Errno::EEXIST { EADDRINUSE } else { e };
    if tail(path).slash {
        return Err(Errno::ENOENT);
    }
    let (dir, name) = create_target(p, AT_FDCWD, path).map_err(in_use)?;
    may_change(&dir, &name, NameChange::Create)?;
    let perm = Mode::from_bits_truncate(0o777 & !p.fds.umask);
    rustix::fs::mknodat(&dir, name.as_slice(), rustix::fs::FileType::Socket, perm, 0)
        .map_err(|e| in_use(e.into()))?;
    let st = rustix::fs::statat(&dir, name.as_slice(), AtFlags::SYMLINK_NOFOLLOW)?;
    Ok((st.st_dev, st.st_ino))
}

/// The host device and inode of the socket file `path` names, for an
/// AF_UNIX connect: stat's errors (ENOENT when nothing is there), and
/// ECONNREFUSED for a file that is not a socket, as Linux says.
pub fn socket_file(p: &Process, path: &[u8]) -> Result<(u64, u64), Errno> {
    match lookup(p, AT_FDCWD, path, true)? {
        Target::Host(r) if r.stat.st_mode & S_IFMT == 0o140000 => {
            Ok((r.stat.st_dev, r.stat.st_ino))
        }
        _ => Err(Errno::ECONNREFUSED),
    }
}

/// Implements ftruncate(2) for files opened for writing (under `--allow-write`).
pub(super) fn sys_ftruncate(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    let f = lock(&file);
    if (a[1] as i64) < 0 {
        return Err(Errno::EINVAL);
    }
    match &f.kind {
        FileKind::File { fd, path } if f.writable() => {
            if is_scratch_path(p, path) {
                let size = rustix::fs::fstat(fd)?.st_size.max(0) as u64;
                p.tmp.charge(size, a[1], mem.size())?;
            }
            rustix::fs::ftruncate(fd, a[1])?;
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

const FALLOC_FL_KEEP_SIZE: u64 = 0x01;
const FALLOC_FL_PUNCH_HOLE: u64 = 0x02;
const FALLOC_FL_ZERO_RANGE: u64 = 0x10;

/// Implements fallocate(2) on files opened for writing, by the host:
/// allocating (the Go linker sizes its output with it before mapping it),
/// punching holes and zeroing ranges. A file in the private /tmp or a
/// fork's scratch copy is charged for the size it grows to; there, space
/// kept past the end (FALLOC_FL_KEEP_SIZE) is refused (EOPNOTSUPP), since
/// nothing would charge it.
pub(super) fn sys_fallocate(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [_, mode, off, len, ..] = *a;
    let (off, len) = (off as i64, len as i64);
    if off < 0 || len <= 0 {
        return Err(Errno::EINVAL);
    }
    let end = off.checked_add(len).ok_or(Errno::EFBIG)? as u64;
    if mode & !(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if mode & FALLOC_FL_PUNCH_HOLE != 0
        && (mode & FALLOC_FL_KEEP_SIZE == 0 || mode & FALLOC_FL_ZERO_RANGE != 0)
    {
        return Err(Errno::EINVAL);
    }
    let file = p.fds.get(a[0] as i32)?;
    let f = lock(&file);
    match &f.kind {
        FileKind::File { fd, path } if f.writable() => {
            if is_memfd(path) && mode & FALLOC_FL_PUNCH_HOLE == 0 {
                charge_memfd(p, &f, len as u64, mem.size())?;
            }
            if is_scratch_path(p, path) && mode & FALLOC_FL_PUNCH_HOLE == 0 {
                let size = rustix::fs::fstat(fd)?.st_size.max(0) as u64;
                if end > size {
                    if mode & FALLOC_FL_KEEP_SIZE != 0 {
                        return Err(Errno::EOPNOTSUPP);
                    }
                    p.tmp.charge(size, end, mem.size())?;
                }
            }
            let flags = rustix::fs::FallocateFlags::from_bits_retain(mode as u32);
            rustix::fs::fallocate(fd, flags, off as u64, len as u64)?;
            Ok(0)
        }
        FileKind::File { .. } => Err(Errno::EBADF),
        FileKind::Dir { .. } => Err(Errno::EISDIR),
        _ => Err(Errno::ENODEV),
    }
}
