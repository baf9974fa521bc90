//! Private `/tmp` and `/dev/shm`: each process (each VM, each fork) gets
//! its own, empty, writable trees at those paths unless the policy maps a
//! host path there (a root at or above them). Roots below them are mounted
//! in the private trees (see [`with_private`]).
//!
//! They live in a host directory of forkvm's own, created on first use
//! (under `/dev/shm` when the host has it, so in memory) with mode 0700,
//! and removed when the process is dropped. A fork gets a copy of the
//! master's trees (nothing when they are empty, the usual case), so forks
//! never see each other's files, and a reset (a new copy of the template)
//! starts from the master's again. Their total size is bounded by
//! the VM's memory (`--memory`): writes that would grow them past it fail
//! with ENOSPC.

use super::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Guest paths that are private unless the policy maps them.
pub(super) const MOUNTS: [&[u8]; 2] = [b"/tmp", b"/dev/shm"];

/// One process's private trees.
pub struct PrivateTmp {
    /// Host directory holding them; created on first use, removed on drop.
    pub(super) base: PathBuf,
    /// Bytes written so far that grew files (an upper bound between recounts).
    pub(super) grown: AtomicU64,
    /// The copies of the write roots in a fork (see `overlay`).
    pub(super) overlay: Overlay,
    /// Another process's trees, seen by a child process of the same run
    /// (see [`PrivateTmp::share`]): not removed when this view is dropped.
    shared: bool,
    /// The process's roots as walks see them (see [`RootsCache`]).
    pub(super) roots: RootsCache,
}

/// A process's roots as walks see them, made once for each state of its
/// write roots (copied up in a fork or not) instead of for every path:
/// building them (a few dozen small allocations, ~10 µs here) cost more
/// than the host calls of a whole lookup. The policy and the private trees'
/// place are fixed for the life of a process; `--persist` is set before it
/// runs, and clears them.
#[derive(Default)]
pub(super) struct RootsCache {
    /// For looking (`path::roots`).
    read: CachedRoots,
    /// For changing (`path::write_roots`), blocked roots included.
    write: CachedRoots,
}

/// Roots made while the write roots were copied up (true) or not.
type CachedRoots = Mutex<Option<(bool, Arc<[Root]>)>>;

impl RootsCache {
    /// The roots for looking while the write roots are `copied` (or not).
    pub(super) fn read(&self, copied: bool, make: impl FnOnce() -> Vec<Root>) -> Arc<[Root]> {
        Self::get(&self.read, copied, make)
    }

    /// The roots for changing while the write roots are `copied` (or not).
    pub(super) fn write(&self, copied: bool, make: impl FnOnce() -> Vec<Root>) -> Arc<[Root]> {
        Self::get(&self.write, copied, make)
    }

    fn get(slot: &CachedRoots, copied: bool, make: impl FnOnce() -> Vec<Root>) -> Arc<[Root]> {
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Some((c, r)) if *c == copied => r.clone(),
            _ => {
                let r: Arc<[Root]> = make().into();
                *slot = Some((copied, r.clone()));
                r
            }
        }
    }

    /// Forgets them (the write roots' sharing changed).
    pub(super) fn clear(&self) {
        for slot in [&self.read, &self.write] {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = None;
        }
    }
}

impl std::fmt::Debug for PrivateTmp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateTmp")
            .field("base", &self.base)
            .finish()
    }
}

impl Default for PrivateTmp {
    fn default() -> Self {
        Self::new()
    }
}

impl PrivateTmp {
    /// Empty private trees; nothing exists on the host until they are used.
    /// Made at every reset, so it makes no system call: where they go and
    /// the process id are looked up once, and the name's nonce comes from
    /// a generator seeded once from the OS.
    pub fn new() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let Scratch {
            parent, pid, keys, ..
        } = scratch();
        let n = N.fetch_add(1, Ordering::Relaxed);
        // An unguessable name (SipHash under secret keys); ownership is
        // checked when it is created anyway.
        let nonce = std::hash::BuildHasher::hash_one(keys, n);
        let base = parent.join(format!("forkvm-tmp-{pid}-{n}-{nonce:016x}"));
        Self {
            base,
            grown: AtomicU64::new(0),
            overlay: Overlay::default(),
            shared: false,
            roots: RootsCache::default(),
        }
    }

    /// The same trees, for a child process of the run (fork(2)): its files
    /// are the parent's, as one /tmp is on Linux, and its write roots are
    /// what the parent's are. The first process's drop removes the trees.
    pub fn share(&self) -> Self {
        Self {
            base: self.base.clone(),
            grown: AtomicU64::new(self.grown.load(Ordering::Relaxed)),
            overlay: Overlay {
                isolate: self.overlay.isolate,
                persist: self.overlay.persist.clone(),
                copied: self.overlay.copied.load(Ordering::Relaxed).into(),
            },
            shared: true,
            roots: RootsCache::default(),
        }
    }

    /// The host directory backing guest `mount` (one of [`MOUNTS`]); it
    /// may not exist yet (see [`ensure`]).
    pub(super) fn host_dir(&self, mount: &[u8]) -> PathBuf {
        self.base.join(sub_name(mount))
    }

    /// A copy for a fork: its own trees with the same contents. Trees that
    /// hold only the ways to the roots mounted in them (see [`make_ways`])
    /// are not copied: the fork makes its own when it first uses them.
    pub fn fork_copy(&self, policy: &Policy) -> Result<Self, Errno> {
        let mut new = Self::new();
        new.overlay = self.overlay.for_fork();
        if self.base.is_dir() && !is_empty_tree(&self.base, policy)? {
            for m in MOUNTS {
                // A mount the program never wrote in has no tree to copy.
                if !self.host_dir(m).is_dir() {
                    continue;
                }
                let to = new.host_dir(m);
                ensure(&to)?;
                copy_tree(&self.host_dir(m), &to, 0)?;
            }
        }
        new.grown
            .store(self.grown.load(Ordering::Relaxed), Ordering::Relaxed);
        Ok(new)
    }

    /// Whether a write that makes a private file reach `end` bytes (from
    /// `size`) fits in `limit` bytes for all the trees: ENOSPC if not.
    pub(super) fn charge(&self, size: u64, end: u64, limit: u64) -> Result<(), Errno> {
        if end <= size {
            return Ok(());
        }
        let more = end - size;
        let grown = self.grown.fetch_add(more, Ordering::Relaxed) + more;
        if grown <= limit {
            return Ok(());
        }
        // The running sum only grows: recount what the trees really hold.
        let used = if self.base.is_dir() {
            tree_bytes(&self.base, 0)?
        } else {
            0
        };
        if used.saturating_add(more) > limit {
            self.grown.store(used, Ordering::Relaxed);
            return Err(Errno::ENOSPC);
        }
        self.grown.store(used + more, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        if !self.shared && self.base.is_dir() {
            // Does not follow symlinks: only the trees themselves go.
            remove_tree(&self.base);
        }
    }
}

/// Where every process's private trees go, found once.
struct Scratch {
    /// The host directory holding them (`/dev/shm` when the host has it).
    parent: PathBuf,
    /// This forkvm's process id, in their names.
    pid: u32,
    /// Keys of the nonces in their names.
    keys: std::hash::RandomState,
    /// Device and inode of `parent`, to hide the trees from walks.
    id: Option<(u64, u64)>,
}

fn scratch() -> &'static Scratch {
    static WHERE: std::sync::OnceLock<Scratch> = std::sync::OnceLock::new();
    WHERE.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let parent = if rustix::fs::access(
            shm,
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        )
        .is_ok()
        {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let id = rustix::fs::stat(&parent)
            .ok()
            .map(|st| (st.st_dev, st.st_ino));
        Scratch {
            parent,
            pid: std::process::id(),
            keys: std::hash::RandomState::new(),
            id,
        }
    })
}

/// Whether `name` in the host directory `dir` is forkvm's own: the private
/// trees and write-root copies of every process and fork of every forkvm on
/// the host. No walk reaches them and no listing shows them, whatever the
/// policy allows (`--allow-read /dev/shm`, or `/` with the host's `/tmp`
/// as their place), or one guest could read another's private files.
pub(super) fn is_hidden(dir: &Stat, name: &[u8]) -> bool {
    may_be_hidden(name) && scratch().id == Some((dir.st_dev, dir.st_ino))
}

/// Whether `name` has the form of forkvm's scratch trees (see [`is_hidden`]).
pub(super) fn may_be_hidden(name: &[u8]) -> bool {
    name.starts_with(b"forkvm-tmp-")
}

/// Whether `host` is the backing directory of a private mount.
pub(super) fn is_private_dir(host: &Path) -> bool {
    host.parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n.as_bytes().starts_with(b"forkvm-tmp-"))
        && host.file_name().is_some_and(|n| n == "tmp" || n == "shm")
}

/// Whether `host` is in a directory of forkvm's own scratch trees (a
/// private mount, a fork's copy of a write root).
pub(super) fn is_forkvm_scratch(host: &Path) -> bool {
    host.ancestors()
        .filter_map(Path::file_name)
        .any(|n| n.as_bytes().starts_with(b"forkvm-tmp-"))
}

/// Creates a private mount's backing directory `host` (and its parent, ours
/// alone: mode 0700, owned by us, not a link) if it does not exist.
pub(super) fn ensure(host: &Path) -> Result<(), Errno> {
    ensure_base(host)?;
    match make_dir(host, 0o1777) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates the parent of `host` (the process's base directory: mode 0700,
/// owned by us, not a link) if it does not exist.
pub(super) fn ensure_base(host: &Path) -> Result<(), Errno> {
    let base = host.parent().ok_or(Errno::ENOENT)?;
    static SWEEP: std::sync::Once = std::sync::Once::new();
    if let Some(parent) = base.parent() {
        SWEEP.call_once(|| sweep_stale(parent));
    }
    match make_dir(base, 0o700) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(e),
    }
    let st = rustix::fs::lstat(base)?;
    if st.st_mode & S_IFMT != S_IFDIR || st.st_uid != host_uid() || st.st_mode & 0o077 != 0 {
        return Err(Errno::EACCES);
    }
    Ok(())
}

fn sub_name(mount: &[u8]) -> &'static str {
    if mount == b"/tmp" {
        "tmp"
    } else {
        "shm"
    }
}

pub(super) fn make_dir(p: &Path, mode: u32) -> Result<(), Errno> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .mode(mode)
        .create(p)
        .map_err(Errno::from)?;
    // The umask may have cleared bits (the sticky world-writable /tmp).
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(Errno::from)?;
    Ok(())
}

/// The longest relative path (in bytes, "/name" per level) below `name` in
/// `dir`, counting no further than `cap`; 0 for anything but a directory.
pub(super) fn subtree_path_len(dir: &OwnedFd, name: &[u8], cap: usize) -> Result<usize, Errno> {
    let open = |d: &OwnedFd, n: &[u8]| {
        rustix::fs::openat(
            d,
            n,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    let Ok(top) = open(dir, name) else {
        return Ok(0);
    };
    // Iterative: (directory, its relative path length); depth is bounded
    // by `cap` since each level adds at least two bytes.
    let mut todo = vec![(top, 0usize)];
    let mut longest = 0usize;
    while let Some((d, len)) = todo.pop() {
        for e in rustix::fs::Dir::read_from(&d)? {
            let e = e?;
            let n = e.file_name().to_bytes();
            if n == b"." || n == b".." {
                continue;
            }
            let l = len + 1 + n.len();
            longest = longest.max(l);
            if l > cap {
                return Ok(l);
            }
            if e.file_type() == rustix::fs::FileType::Directory {
                if let Ok(sub) = open(&d, n) {
                    todo.push((sub, l));
                }
            }
        }
    }
    Ok(longest)
}

/// Removes the tree at `base` without recursion and with a bounded number
/// of descriptors, however deep it is: subdirectories are moved up to the
/// top level before their parent goes.
fn remove_tree(base: &Path) {
    let Ok(top) = rustix::fs::open(
        base,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let mut n = 0u64;
    // Each round empties every top-level directory or moves its
    // subdirectories up; it ends when nothing is left (or nothing changes).
    for _ in 0..1_000_000 {
        let Ok(mut it) = rustix::fs::Dir::read_from(&top) else {
            break;
        };
        let mut names = Vec::new();
        while let Some(Ok(e)) = it.next() {
            let name = e.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                names.push(name);
            }
        }
        if names.is_empty() {
            break;
        }
        let mut progress = false;
        for name in names {
            if rustix::fs::unlinkat(&top, name.as_slice(), AtFlags::empty()).is_ok()
                || rustix::fs::unlinkat(&top, name.as_slice(), AtFlags::REMOVEDIR).is_ok()
            {
                progress = true;
                continue;
            }
            // The guest may have made it unreadable.
            let _ = rustix::fs::chmodat(&top, name.as_slice(), Mode::RWXU, AtFlags::empty());
            let Ok(d) = rustix::fs::openat(
                &top,
                name.as_slice(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) else {
                continue;
            };
            let Ok(mut sub) = rustix::fs::Dir::read_from(&d) else {
                continue;
            };
            let mut inner = Vec::new();
            while let Some(Ok(e)) = sub.next() {
                let c = e.file_name().to_bytes().to_vec();
                if c != b"." && c != b".." {
                    inner.push(c);
                }
            }
            for c in inner {
                progress |= rustix::fs::unlinkat(&d, c.as_slice(), AtFlags::empty()).is_ok() || {
                    n += 1;
                    let up = format!(".up-{n}");
                    rustix::fs::renameat_with(
                        &d,
                        c.as_slice(),
                        &top,
                        up.as_str(),
                        rustix::fs::RenameFlags::empty(),
                    )
                    .is_ok()
                };
            }
        }
        if !progress {
            break;
        }
    }
    let _ = std::fs::remove_dir(base);
}

/// Removes the private trees of forkvm processes that no longer exist (a
/// process killed outright cannot remove its own); only ours, by owner.
fn sweep_stale(parent: &Path) {
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    let me = host_uid();
    for e in rd.filter_map(Result::ok) {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("forkvm-tmp-"))
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = Path::new("/proc").join(pid.to_string()).exists();
        let ours = rustix::fs::lstat(e.path())
            .is_ok_and(|st| st.st_uid == me && st.st_mode & S_IFMT == S_IFDIR);
        if !alive && ours {
            remove_tree(&e.path());
        }
    }
}

/// Longest guest path of anything in a private tree: it bounds their depth
/// (512 levels), so copying, counting and removing them stays within the
/// host's stack and descriptors.
pub(super) const PRIVATE_PATH_MAX: usize = 1024;

/// Deepest directory nesting copied or counted (beyond what paths allow).
pub(super) const MAX_DEPTH: u32 = 1024;

fn is_empty_tree(base: &Path, policy: &Policy) -> Result<bool, Errno> {
    for m in MOUNTS {
        // Never created (or only the copies of write roots were made,
        // which are not copied): empty.
        let ways = ways_in(policy, m);
        let ways: Vec<&[Vec<u8>]> = ways.iter().map(Vec::as_slice).collect();
        if !only_ways(&base.join(sub_name(m)), &ways, 0)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Copies the tree `from` into the existing directory `to`: directories,
/// regular files, symlinks and fifos with their modes and times.
pub(super) fn copy_tree(from: &Path, to: &Path, depth: u32) -> Result<(), Errno> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if depth > MAX_DEPTH {
        return Err(Errno::ELOOP);
    }
    for e in std::fs::read_dir(from).map_err(Errno::from)? {
        let e = e.map_err(Errno::from)?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let md = std::fs::symlink_metadata(&src).map_err(Errno::from)?;
        let ft = md.file_type();
        if ft.is_symlink() {
            let t = std::fs::read_link(&src).map_err(Errno::from)?;
            std::os::unix::fs::symlink(t, &dst).map_err(Errno::from)?;
            continue;
        }
        if ft.is_dir() {
            // Writable while it is filled; its own mode comes after.
            make_dir(&dst, 0o700)?;
            copy_tree(&src, &dst, depth + 1)?;
        } else if ft.is_file() {
            copy_file(&src, &dst)?;
        } else if ft.is_fifo() {
            rustix::fs::mknodat(
                CWD,
                &dst,
                rustix::fs::FileType::Fifo,
                Mode::from_bits_truncate(md.permissions().mode()),
                0,
            )?;
        } else {
            continue;
        }
        copy_attrs(&md, &dst)?;
    }
    Ok(())
}

/// Copies the regular file `src` to the new file `dst` with read and
/// write alone (std's copy would use calls outside the host seccomp list:
/// fchmod, sendfile).
pub(super) fn copy_file(src: &Path, dst: &Path) -> Result<(), Errno> {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let mut from = std::fs::File::options()
        .read(true)
        .custom_flags(libc_o_nofollow())
        .open(src)
        .map_err(Errno::from)?;
    let mut to = std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dst)
        .map_err(Errno::from)?;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = from.read(&mut buf).map_err(Errno::from)?;
        if n == 0 {
            return Ok(());
        }
        to.write_all(&buf[..n]).map_err(Errno::from)?;
    }
}

fn libc_o_nofollow() -> i32 {
    OFlags::NOFOLLOW.bits() as i32
}

/// Gives `dst` the mode and times in `md`.
pub(super) fn copy_attrs(md: &std::fs::Metadata, dst: &Path) -> Result<(), Errno> {
    std::fs::set_permissions(dst, md.permissions()).map_err(Errno::from)?;
    let times = std::fs::FileTimes::new()
        .set_accessed(md.accessed().map_err(Errno::from)?)
        .set_modified(md.modified().map_err(Errno::from)?);
    if let Ok(f) = std::fs::File::options().read(true).open(dst) {
        let _ = f.set_times(times);
    }
    Ok(())
}

/// Bytes the files under `dir` hold.
fn tree_bytes(dir: &Path, depth: u32) -> Result<u64, Errno> {
    if depth > MAX_DEPTH {
        return Ok(0);
    }
    let mut sum = 0u64;
    for e in std::fs::read_dir(dir).map_err(Errno::from)? {
        let e = e.map_err(Errno::from)?;
        let md = std::fs::symlink_metadata(e.path()).map_err(Errno::from)?;
        if md.is_dir() {
            sum = sum.saturating_add(tree_bytes(&e.path(), depth + 1)?);
        } else {
            sum = sum.saturating_add(md.len());
        }
    }
    Ok(sum)
}

/// Whether the policy maps a host path at guest `mount` itself (a root
/// `/tmp` or `/dev/shm`): the mount is then the user's mapping, not
/// private. A root *above* it (`--allow-read /`) leaves it private, as a
/// read-only root with a private `/tmp` does in bubblewrap or systemd's
/// `PrivateTmp`: programs need a writable `/tmp` (sort's spill files,
/// python's `tempfile` and `multiprocessing`, compilers), and the host's
/// is shared with everything else on it. A root *below* it (a program or
/// script kept in the host's /tmp, `--allow-write /tmp/out`) leaves it
/// private too and is mounted inside it (see [`with_private`]).
fn mapped_by_policy(policy: &Policy, mount: &[u8]) -> bool {
    let m = components(mount);
    policy
        .allow_read
        .iter()
        .chain(&policy.allow_write)
        .any(|r| components(r.as_os_str().as_bytes()) == m)
}

/// Whether the guest reaches the host path `path` through `policy`'s
/// roots: it lies under one, and not in a private `/tmp` or `/dev/shm`
/// unless a root mounted there holds it (`--allow-read /` shows the host's
/// files, but not those in its `/tmp`).
pub fn reaches(policy: &Policy, path: &Path) -> bool {
    let roots: Vec<&PathBuf> = policy
        .allow_read
        .iter()
        .chain(&policy.allow_write)
        .collect();
    let comps: Vec<Vec<u8>> = components(path.as_os_str().as_bytes())
        .into_iter()
        .collect();
    match private_mounts(policy).find(|m| strictly_below(&comps, m)) {
        Some(m) => roots.iter().any(|r| {
            let rc: Vec<Vec<u8>> = components(r.as_os_str().as_bytes()).into_iter().collect();
            strictly_below(&rc, m) && path.starts_with(r)
        }),
        None => roots.iter().any(|r| path.starts_with(r)),
    }
}

/// The guest mounts of `policy` that are private.
fn private_mounts(policy: &Policy) -> impl Iterator<Item = &'static [u8]> + '_ {
    MOUNTS
        .into_iter()
        .filter(move |m| !mapped_by_policy(policy, m))
}

/// Whether the components `c` lie strictly below the private mount `m`.
fn strictly_below(c: &[Vec<u8>], m: &[u8]) -> bool {
    let m = components(m);
    c.len() > m.len() && c.iter().zip(&m).all(|(a, b)| a == b)
}

/// `roots` (the policy's, as they are now) with the private roots added:
/// guest `/tmp` and `/dev/shm` on their host directories, except where the
/// policy maps those paths. A policy root below a private mount is mounted
/// in it (reached at its guest path through the private tree, whose way to
/// it [`make_ways`] creates). With `writing`, each read-only root mounted
/// there is listed too, blocked: a walk for a change stops at it (EROFS)
/// instead of going on into the private tree's placeholder under it.
pub(super) fn with_private(p: &Process, mut roots: Vec<Root>, writing: bool) -> Vec<Root> {
    let mounts: Vec<&[u8]> = private_mounts(&p.policy).collect();
    for r in roots.iter_mut() {
        if mounts.iter().any(|m| strictly_below(&r.comps, m)) {
            r.mount = true;
        }
    }
    if writing {
        let read = to_roots(p.policy.allow_read.iter());
        for mut r in read {
            let nested = mounts.iter().any(|m| strictly_below(&r.comps, m));
            // Reached through a write root (at or above it): the write
            // root's host tree holds it, as everywhere else.
            let through_write = roots.iter().any(|w| {
                !w.blocked
                    && w.comps.len() <= r.comps.len()
                    && w.comps.iter().zip(&r.comps).all(|(a, b)| a == b)
            });
            if nested && !through_write {
                r.mount = true;
                r.blocked = true;
                roots.push(r);
            }
        }
    }
    for m in mounts {
        roots.push(Root {
            comps: components(m).into_iter().collect(),
            host: p.tmp.host_dir(m),
            // It wins over a root above it (`--allow-read /`).
            mount: true,
            blocked: false,
        });
    }
    roots
}

/// Makes, in the new private tree `host` (backing the guest mount at
/// `comps`), the way to each root of `roots` mounted below it: its
/// directories, and an empty directory or file where the root itself is
/// mounted, so that the private tree lists them as a host directory with a
/// mount in it would. Nothing of the host's is copied: a mounted root's own
/// metadata and contents come from the host whenever it is looked up.
pub(super) fn make_ways(roots: &[Root], comps: &[Vec<u8>], host: &Path) -> Result<(), Errno> {
    let open_dir = |at: &OwnedFd, name: &[u8]| {
        rustix::fs::openat(
            at,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    for r in roots.iter().filter(|r| r.mount) {
        if r.comps.len() <= comps.len() || !r.comps.iter().zip(comps).all(|(a, b)| a == b) {
            continue;
        }
        let rel = &r.comps[comps.len()..];
        // One directory at a time, never following a link: another process
        // of the run shares this tree and may already have put a symlink
        // where a way goes (it then goes no further).
        let mut dir = rustix::fs::open(
            host,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        for (i, c) in rel.iter().enumerate() {
            let last = i + 1 == rel.len();
            let is_dir = !last || std::fs::metadata(&r.host).is_ok_and(|m| m.is_dir());
            if is_dir {
                match rustix::fs::mkdirat(&dir, c.as_slice(), Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                if !last {
                    dir = open_dir(&dir, c)?;
                }
            } else {
                let made = rustix::fs::openat(
                    &dir,
                    c.as_slice(),
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o644),
                );
                match made {
                    Ok(_) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    Ok(())
}

/// The paths (components below the mount) of the roots mounted in the
/// private mount `m`.
fn ways_in(policy: &Policy, m: &[u8]) -> Vec<Vec<Vec<u8>>> {
    let n = components(m).len();
    to_roots(policy.allow_read.iter().chain(&policy.allow_write))
        .into_iter()
        .filter(|r| strictly_below(&r.comps, m))
        .map(|r| r.comps[n..].to_vec())
        .collect()
}

/// Whether the directory `dir` holds nothing but the ways to `ways` (paths
/// of components below it): directories on the way and the mount points.
fn only_ways(dir: &Path, ways: &[&[Vec<u8>]], depth: u32) -> Result<bool, Errno> {
    if depth > MAX_DEPTH {
        return Ok(false);
    }
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(Errno::from(e)),
    };
    for e in rd {
        let e = e.map_err(Errno::from)?;
        let name = e.file_name();
        let name = name.as_bytes();
        let mine: Vec<&[Vec<u8>]> = ways
            .iter()
            .filter(|w| w.first().is_some_and(|c| c.as_slice() == name))
            .copied()
            .collect();
        if mine.is_empty() {
            return Ok(false);
        }
        // A mount point hides what is under it; a directory on the way
        // holds only ways too.
        if mine.iter().any(|w| w.len() == 1) {
            continue;
        }
        let rest: Vec<&[Vec<u8>]> = mine.iter().map(|w| &w[1..]).collect();
        if !only_ways(&e.path(), &rest, depth + 1)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The private trees' share of a write of `len` bytes to `f` (at `at`, or
/// its offset): ENOSPC when the trees would outgrow `limit` bytes.
pub fn charge_write(
    p: &Process,
    limit: u64,
    f: &OpenFile,
    len: usize,
    at: Option<u64>,
) -> Result<(), Errno> {
    let FileKind::File { fd, path } = &f.kind else {
        return Ok(());
    };
    if is_memfd(path) {
        return charge_memfd(p, f, len as u64, limit);
    }
    if !is_scratch_path(p, path) {
        return Ok(());
    }
    let size = rustix::fs::fstat(fd)?.st_size.max(0) as u64;
    let start = if at.is_none() && f.flags & O_APPEND != 0 {
        size
    } else {
        at.unwrap_or(f.offset)
    };
    p.tmp.charge(size, start.saturating_add(len as u64), limit)
}

/// Whether a guest path lies in a private mount (not in a root mounted there).
pub(super) fn is_private_path(policy: &Policy, path: &[u8]) -> bool {
    let in_mount =
        private_mounts(policy).any(|m| path.starts_with(m) && path.get(m.len()) == Some(&b'/'));
    if !in_mount {
        return false;
    }
    let c: Vec<Vec<u8>> = components(path).into_iter().collect();
    !to_roots(policy.allow_read.iter().chain(&policy.allow_write))
        .iter()
        .any(|r| r.comps.len() <= c.len() && r.comps.iter().zip(&c).all(|(a, b)| a == b))
}

/// Whether a guest path lies in forkvm's scratch directory: a private mount,
/// or a fork's copy of a write root.
pub(super) fn is_scratch_path(p: &Process, path: &[u8]) -> bool {
    is_private_path(&p.policy, path) || is_overlay_path(p, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ways_are_made_without_following_links() {
        let base = crate::linux::test_scratch().join(format!("forkvm-ways-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (tree, outside) = (base.join("tree"), base.join("outside"));
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // Another process of the run put a link where a way goes.
        std::os::unix::fs::symlink(&outside, tree.join("x")).unwrap();
        let root = |comps: &[&str], mount: bool| Root {
            comps: comps.iter().map(|c| c.as_bytes().to_vec()).collect(),
            host: outside.clone(),
            mount,
            blocked: false,
        };
        let roots = [root(&["tmp"], false), root(&["tmp", "x", "y"], true)];
        assert!(make_ways(&roots, &roots[0].comps, &tree).is_err());
        assert!(
            !outside.join("y").exists(),
            "nothing is made through the link"
        );
        // Without the link, the way is made.
        std::fs::remove_file(tree.join("x")).unwrap();
        make_ways(&roots, &roots[0].comps, &tree).unwrap();
        assert!(tree.join("x/y").is_dir());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
