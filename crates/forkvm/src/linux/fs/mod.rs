//! File-system syscalls: open, stat, getdents, readlink, access, cwd, and
//! the namespace changes (mkdir, unlink, rename, chmod, ...) allowed under
//! `--allow-write` roots.
//!
//! # Path policy
//!
//! The guest sees a namespace made of the host paths in `policy.allow_read`
//! and `policy.allow_write`, each at its own path; only the latter can be
//! changed (elsewhere EROFS; a missing parent is ENOENT as on Linux).
//! Directories above an allowed root (its ancestors, up to `/`) are visible
//! as directories: stat, open (O_PATH, O_DIRECTORY), chdir and getdents64
//! work, with the host's metadata, but a listing shows only `.`, `..` and
//! the names that lead to roots. Everything else is ENOENT. Paths are resolved here, one component at a
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
//! readlink with EINVAL, so realpath() works.
//!
//! Devices, the guest's /proc and its /etc files are synthetic names of the
//! namespace (see `virt`): the walker checks each canonical path it builds
//! against them before the host, so they are found however the path is
//! spelled, and stat, list and open as on Linux.
//!
//! Ownership is shown as a user namespace would (see `attr`): the invoking
//! host user is the guest's uid/gid 1000, every other owner 65534.

mod attr;
mod change;
mod fifo;
mod meta;
mod moved;
mod overlay;
mod path;
mod perm;
#[cfg(test)]
mod tests;
mod tmp;
mod unnamed;
mod virt;

use attr::*;
use change::*;
pub use change::{make_socket_file, socket_file};
pub use fifo::{interrupted_open, FifoWait};
use meta::*;
pub use meta::{encode_stat, encode_statx, stat_of_file, StatInfo};
use moved::*;
use overlay::*;
pub use overlay::{COPY_MAX_BYTES, COPY_MAX_ENTRIES};
use path::*;
pub use path::{absolute_at, check_path, exec_host_path, read_path, watch_target};
use perm::*;
use tmp::*;
pub use tmp::{charge_write, reaches, PrivateTmp};
use unnamed::*;
use virt::{Node, Step, Stepped};

use super::fdtable::{lock, oflags::*, FileKind, FileRef, OpenFile, PipeEnd};
use super::io::{guest_buf_mut, host_std};
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Policy, Process, SysResult};
use crate::memory::GuestMemory;
use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, Stat, CWD};
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
const DEVPTS_MAGIC: i64 = 0x1cd1;
const TMPFS_MAGIC: i64 = 0x0102_1994;
const ST_RDONLY: i64 = 1;

/// Size of the x86-64 `struct stat`.
const STAT_SIZE: usize = 144;
/// Size of `struct statx`.
const STATX_SIZE: usize = 256;
/// Size of the x86-64 `struct statfs`.
const STATFS_SIZE: usize = 120;

pub(super) const RW: &str = "under --allow-write roots; elsewhere EROFS";
pub(super) const OWN: &str =
    "under --allow-write roots, with the rights of the guest's uid (owner only; chown to its own ids); elsewhere EROFS";

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 2, name: "open", handler: sys_open, support: Support::Partial,
        note: "files and directories under the allowed roots (writes under --allow-write roots only, else EACCES), their ancestors as directories listing only the way to the roots, a private /tmp and /dev/shm unless mapped, plus /dev/{null,zero,random,urandom}, the guest's own /proc and /etc files and directories (see fs/virt.rs; all known by the resolved path, so through symlinks too); /dev/std{in,out,err}, /dev/fd/N and /proc/self/fd/N open a regular file anew (own offset, O_TRUNC) and share a pipe's or socket's description; /proc/self/cwd leads to the cwd; fifos under --allow-write roots (and the private /tmp, /dev/shm) with Linux's open semantics, their data in-process (see fs/fifo.rs); O_TMPFILE in writable directories; other host fifos and devices EACCES, other paths ENOENT" },
    SyscallEntry { nr: 4, name: "stat", handler: sys_stat, support: Support::Full, note: "" },
    SyscallEntry { nr: 5, name: "fstat", handler: sys_fstat, support: Support::Full, note: "" },
    SyscallEntry { nr: 6, name: "lstat", handler: sys_lstat, support: Support::Full, note: "" },
    SyscallEntry { nr: 21, name: "access", handler: sys_access, support: Support::Partial,
        note: "judged as the guest's uid sees the file; W_OK only under --allow-write roots, else EACCES" },
    SyscallEntry { nr: 76, name: "truncate", handler: sys_truncate, support: Support::Partial, note: RW },
    SyscallEntry { nr: 77, name: "ftruncate", handler: sys_ftruncate, support: Support::Partial,
        note: "files opened for writing under --allow-write roots; others EINVAL" },
    SyscallEntry { nr: 285, name: "fallocate", handler: sys_fallocate, support: Support::Partial,
        note: "files opened for writing: allocate, punch holes, zero ranges (by the host); past the end without growing is refused in the private /tmp" },
    SyscallEntry { nr: 79, name: "getcwd", handler: sys_getcwd, support: Support::Full, note: "" },
    SyscallEntry { nr: 80, name: "chdir", handler: sys_chdir, support: Support::Full, note: "" },
    SyscallEntry { nr: 81, name: "fchdir", handler: sys_fchdir, support: Support::Full, note: "" },
    SyscallEntry { nr: 82, name: "rename", handler: sys_rename, support: Support::Partial, note: RW },
    SyscallEntry { nr: 83, name: "mkdir", handler: sys_mkdir, support: Support::Partial, note: RW },
    SyscallEntry { nr: 84, name: "rmdir", handler: sys_rmdir, support: Support::Partial, note: RW },
    SyscallEntry { nr: 85, name: "creat", handler: sys_creat, support: Support::Partial,
        note: "under --allow-write roots; elsewhere EACCES" },
    SyscallEntry { nr: 86, name: "link", handler: sys_link, support: Support::Partial, note: "under --allow-write roots (the existing file too); elsewhere EROFS" },
    SyscallEntry { nr: 87, name: "unlink", handler: sys_unlink, support: Support::Partial, note: RW },
    SyscallEntry { nr: 88, name: "symlink", handler: sys_symlink, support: Support::Partial, note: RW },
    SyscallEntry { nr: 89, name: "readlink", handler: sys_readlink, support: Support::Partial,
        note: "/proc/self/{exe,cwd,fd/N} (and /proc/<pid>/...), /proc/self, /dev/fd and /dev/std* read as on Linux (files by guest path, \" (deleted)\" when unlinked, pipe:[ino], socket:[ino], anon_inode:[...]); the host's stdio shows a pipe, socket or device only" },
    SyscallEntry { nr: 90, name: "chmod", handler: sys_chmod, support: Support::Partial, note: OWN },
    SyscallEntry { nr: 91, name: "fchmod", handler: sys_fchmod, support: Support::Partial, note: OWN },
    SyscallEntry { nr: 92, name: "chown", handler: sys_chown, support: Support::Partial, note: OWN },
    SyscallEntry { nr: 93, name: "fchown", handler: sys_fchown, support: Support::Partial, note: OWN },
    SyscallEntry { nr: 94, name: "lchown", handler: sys_lchown, support: Support::Partial, note: OWN },
    SyscallEntry { nr: 95, name: "umask", handler: sys_umask, support: Support::Full, note: "" },
    SyscallEntry { nr: 133, name: "mknod", handler: sys_mknod, support: Support::Partial, note: "regular files, fifos and sockets under --allow-write roots; devices EPERM; elsewhere EROFS" },
    SyscallEntry { nr: 137, name: "statfs", handler: sys_statfs, support: Support::Partial,
        note: "host values, with ST_RDONLY outside --allow-write roots; emulated devices and pipes get synthetic values" },
    SyscallEntry { nr: 138, name: "fstatfs", handler: sys_fstatfs, support: Support::Partial,
        note: "as statfs" },
    SyscallEntry { nr: 217, name: "getdents64", handler: sys_getdents64, support: Support::Full, note: "" },
    SyscallEntry { nr: 235, name: "utimes", handler: sys_utimes, support: Support::Partial, note: OWN },
    SyscallEntry { nr: 257, name: "openat", handler: sys_openat, support: Support::Partial,
        note: "as open" },
    SyscallEntry { nr: 258, name: "mkdirat", handler: sys_mkdirat, support: Support::Partial, note: RW },
    SyscallEntry { nr: 259, name: "mknodat", handler: sys_mknodat, support: Support::Partial, note: "as mknod" },
    SyscallEntry { nr: 260, name: "fchownat", handler: sys_fchownat, support: Support::Partial, note: OWN },
    SyscallEntry { nr: 262, name: "newfstatat", handler: sys_newfstatat, support: Support::Full, note: "" },
    SyscallEntry { nr: 263, name: "unlinkat", handler: sys_unlinkat, support: Support::Partial, note: RW },
    SyscallEntry { nr: 264, name: "renameat", handler: sys_renameat, support: Support::Partial, note: RW },
    SyscallEntry { nr: 265, name: "linkat", handler: sys_linkat, support: Support::Partial, note: "as link" },
    SyscallEntry { nr: 266, name: "symlinkat", handler: sys_symlinkat, support: Support::Partial, note: RW },
    SyscallEntry { nr: 267, name: "readlinkat", handler: sys_readlinkat, support: Support::Partial,
        note: "as readlink" },
    SyscallEntry { nr: 268, name: "fchmodat", handler: sys_fchmodat, support: Support::Partial, note: OWN },
    SyscallEntry { nr: 269, name: "faccessat", handler: sys_faccessat, support: Support::Partial,
        note: "as access" },
    SyscallEntry { nr: 280, name: "utimensat", handler: sys_utimensat, support: Support::Partial, note: OWN },
    SyscallEntry { nr: 316, name: "renameat2", handler: sys_renameat2, support: Support::Partial, note: "under --allow-write roots (RENAME_NOREPLACE only); elsewhere EROFS" },
    SyscallEntry { nr: 319, name: "memfd_create", handler: sys_memfd_create, support: Support::Partial,
        note: "a host memfd named /memfd:NAME (MFD_CLOEXEC, MFD_ALLOW_SEALING, MFD_NOEXEC_SEAL; seals as the host keeps them); writes past the VM's memory in all memfds ENOSPC; MFD_HUGETLB EINVAL" },
    SyscallEntry { nr: 332, name: "statx", handler: sys_statx, support: Support::Partial,
        note: "basic stats only (no birth time, mount id or attributes)" },
    SyscallEntry { nr: 439, name: "faccessat2", handler: sys_faccessat2, support: Support::Partial,
        note: "as access" },
    SyscallEntry { nr: 452, name: "fchmodat2", handler: sys_fchmodat2, support: Support::Partial, note: OWN },
];
