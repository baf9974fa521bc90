//! sync, syncfs and sync_file_range: flushing is the host's business (what
//! the guest writes is already in host files), so these check their
//! arguments as Linux does and succeed.

use super::host_std;
use crate::linux::fdtable::{lock, FileKind};
use crate::linux::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use rustix::fs::FileType;
use std::os::fd::AsFd;

/// SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER.
const SYNC_FILE_RANGE_VALID: u64 = 7;

/// Implements sync(2): always succeeds.
pub(super) fn sys_sync(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Ok(0)
}

/// Implements syncfs(2): any open descriptor but an O_PATH one (EBADF, as
/// Linux's fdget) names a filesystem to flush.
pub(super) fn sys_syncfs(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let file = p.fds.get(a[0] as i32)?;
    if lock(&file).path_only() {
        return Err(Errno::EBADF);
    }
    Ok(0)
}

/// Implements sync_file_range(2) in Linux's order: the descriptor (EBADF,
/// O_PATH ones too), the flags and range (EINVAL), then the file's type
/// (ESPIPE for anything but a regular file, directory, block device or
/// symlink).
pub(super) fn sys_sync_file_range(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd, offset, nbytes, flags, ..] = *a;
    let file = p.fds.get(fd as i32)?;
    let f = lock(&file);
    if f.path_only() {
        return Err(Errno::EBADF);
    }
    // Linux adds in 64-bit wrapping arithmetic, then rejects a negative
    // start or end and an end before the start.
    let (offset, end) = (offset as i64, (offset as i64).wrapping_add(nbytes as i64));
    if u64::from(flags as u32) & !SYNC_FILE_RANGE_VALID != 0 || offset < 0 || end < offset {
        return Err(Errno::EINVAL);
    }
    let seekable = match &f.kind {
        FileKind::File { .. } | FileKind::Dir { .. } => true,
        k => match host_std(k) {
            Some(h) => {
                let kind = FileType::from_raw_mode(rustix::fs::fstat(h.as_fd())?.st_mode);
                matches!(
                    kind,
                    FileType::RegularFile
                        | FileType::Directory
                        | FileType::BlockDevice
                        | FileType::Symlink
                )
            }
            None => false,
        },
    };
    if seekable {
        Ok(0)
    } else {
        Err(Errno::ESPIPE)
    }
}
