//! Directories that moved: a directory descriptor and the working
//! directory keep their canonical guest path as text, which a rename of the
//! directory (or of one above it) leaves stale. Each also holds the host
//! directory itself, so once any directory was renamed in this host process
//! ([`note_dir_moved`]), a relative lookup first checks that the text still
//! names that directory and, if not, finds where it is now: the host path
//! of the held directory, mapped back through the allowed root it lies
//! under, then walked again in the namespace and checked to be the same
//! object. The result is only ever a guest path walked like any other, so
//! it cannot lead out of the roots; when nothing matches (a directory
//! removed, or moved out of every root) the old text stays.
//!
//! A removed directory is no place at all: while the working directory or
//! a directory descriptor is one ([`removed`]), getcwd answers ENOENT and
//! names relative to it are not looked up by the old text (which may name a
//! new directory of the same name), as Linux finds nothing in a dead
//! directory (see [`path::absolute`]).

use super::*;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// Directories renamed by any guest of this host process so far.
static DIR_MOVES: AtomicU64 = AtomicU64::new(0);

/// Records that a directory was renamed: paths kept as text may be stale.
pub(super) fn note_dir_moved() {
    DIR_MOVES.fetch_add(1, Ordering::Relaxed);
}

/// The current canonical guest path of the host directory `dir`, last
/// known as `text`; None when `text` is still right or nothing better is found.
pub(super) fn fresh_path(p: &Process, dir: &OwnedFd, text: &[u8]) -> Option<Vec<u8>> {
    if DIR_MOVES.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let st = rustix::fs::fstat(dir).ok()?;
    if st.st_mode & S_IFMT != S_IFDIR {
        return None;
    }
    let roots = roots(p);
    let same = |r: &Resolved| r.stat.st_dev == st.st_dev && r.stat.st_ino == st.st_ino;
    if walk_host(&roots, text, true).is_ok_and(|r| same(&r)) {
        return None;
    }
    let link = format!("/proc/self/fd/{}", dir.as_raw_fd());
    let host = rustix::fs::readlink(link.as_str(), Vec::new()).ok()?;
    let host = PathBuf::from(std::ffi::OsStr::from_bytes(host.as_bytes()));
    // The deepest root holding it on the host names it in the guest.
    let mut best: Option<(usize, Vec<u8>)> = None;
    for r in roots.iter() {
        let Ok(canon) = std::fs::canonicalize(&r.host) else {
            continue;
        };
        let Ok(rest) = host.strip_prefix(&canon) else {
            continue;
        };
        let depth = canon.components().count();
        if best.as_ref().is_some_and(|(d, _)| *d >= depth) {
            continue;
        }
        let mut guest = Vec::new();
        for c in &r.comps {
            guest.push(b'/');
            guest.extend_from_slice(c);
        }
        for c in rest.components() {
            guest.push(b'/');
            guest.extend_from_slice(c.as_os_str().as_bytes());
        }
        if guest.is_empty() {
            guest.push(b'/');
        }
        best = Some((depth, guest));
    }
    let (_, guest) = best?;
    walk_host(&roots, &guest, true)
        .is_ok_and(|r| same(&r))
        .then_some(guest)
}

/// The working directory's current guest path.
pub(super) fn cwd_path(p: &Process) -> Vec<u8> {
    let text = p.cwd.as_slice();
    match &p.cwd_dir {
        Some(dir) => fresh_path(p, dir, text).unwrap_or_else(|| text.to_vec()),
        None => text.to_vec(),
    }
}

/// Whether the host directory `dir` was removed (rmdir, or replaced by a
/// rename over it): a directory's link count drops to 0 then.
pub(super) fn removed(dir: &OwnedFd) -> bool {
    rustix::fs::fstat(dir).is_ok_and(|st| st.st_mode & S_IFMT == S_IFDIR && st.st_nlink == 0)
}

/// The working directory was removed.
pub(super) fn cwd_removed(p: &Process) -> bool {
    p.cwd_dir.as_ref().is_some_and(|d| removed(d))
}
