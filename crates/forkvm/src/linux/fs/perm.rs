//! Directory permissions, judged as the guest's uid sees them (see `attr`
//! for the identity model): the host user may be root, or own files the
//! guest must not change, so the host kernel's own checks are not enough.
//!
//! As on Linux for an unprivileged user:
//! - every lookup of a name needs search (x) permission on the directory it
//!   is in (the path walker checks each step);
//! - adding or removing a name (create, mkdir, mknod, link, symlink, unlink,
//!   rmdir, rename) needs write and search permission on the directory;
//! - in a sticky directory (/tmp-style) only the owner of the entry or of the
//!   directory may remove or replace the entry (EPERM);
//! - opening a directory to list it, or a file to read it, needs read (r).

use super::*;

/// Search permission on a directory a lookup passes through: EACCES without.
pub(super) fn may_search(dir: &Stat) -> Result<(), Errno> {
    if guest_may(dir, 1) {
        Ok(())
    } else {
        Err(Errno::EACCES)
    }
}

/// What a change does to the name it works on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum NameChange {
    /// Makes a new name (mkdir, link, ...): a name that exists is left to the
    /// host call, which says EEXIST first, as Linux does.
    Create,
    /// Removes the name (unlink, rmdir, the source of rename): a name that
    /// does not exist is left to the host call (ENOENT).
    Remove,
    /// Makes the name, or replaces what is there (the target of rename).
    Replace,
}

const S_ISVTX: u32 = 0o1000;

/// Whether the guest may change the name `name` in the open directory `dir`
/// as `how` says: EACCES without write and search permission on it, EPERM
/// for a sticky directory's entry that is neither its nor the directory's.
pub(super) fn may_change(dir: &OwnedFd, name: &[u8], how: NameChange) -> Result<(), Errno> {
    let dst = rustix::fs::fstat(dir)?;
    let existing = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok();
    match (how, &existing) {
        (NameChange::Create, Some(_)) | (NameChange::Remove, None) => return Ok(()),
        _ => {}
    }
    if !guest_may(&dst, 3) {
        return Err(Errno::EACCES);
    }
    if let Some(st) = existing {
        if dst.st_mode & S_ISVTX != 0 && !guest_owns(&dst) && !guest_owns(&st) {
            return Err(Errno::EPERM);
        }
    }
    Ok(())
}

/// Read permission to open `st` for reading or listing: EACCES without.
pub(super) fn may_read(st: &Stat) -> Result<(), Errno> {
    if guest_may(st, 4) {
        Ok(())
    } else {
        Err(Errno::EACCES)
    }
}
