//! Signal-driven I/O settings of an open file description: the O_ASYNC
//! flag (`fcntl(F_SETFL)` or `ioctl(FIOASYNC)`) and the owner that would
//! get SIGIO (`fcntl(F_SETOWN)`, `F_SETOWN_EX`, `F_SETSIG`).
//!
//! They are recorded and read back as on Linux, but forkvm sends no SIGIO
//! (noted once under `-v`): the programs that set them and that forkvm
//! meets (nginx's master on its channels to the workers) wait in epoll and
//! treat the signal as a hint. A program driven by SIGIO alone would wait.

use super::child::pid_visible;
use super::fdtable::{lock, oflags::O_ASYNC, FileRef};
use super::{Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::sync::atomic::{AtomicBool, Ordering};

pub(super) const F_SETOWN: u64 = 8;
pub(super) const F_GETOWN: u64 = 9;
pub(super) const F_SETSIG: u64 = 10;
pub(super) const F_GETSIG: u64 = 11;
pub(super) const F_SETOWN_EX: u64 = 15;
pub(super) const F_GETOWN_EX: u64 = 16;
pub(super) const FIOASYNC: u32 = 0x5452;

/// `struct f_owner_ex`'s owner kinds.
const F_OWNER_TID: i32 = 0;
const F_OWNER_PID: i32 = 1;
const F_OWNER_PGRP: i32 = 2;
/// Largest signal number.
const SIGRTMAX: u64 = 64;

static NOTE_NO_SIGIO: AtomicBool = AtomicBool::new(false);

/// Sets or clears O_ASYNC on `file`.
pub(super) fn set_async(file: &FileRef, on: bool) {
    let mut f = lock(file);
    if on && f.flags & O_ASYNC == 0 && !NOTE_NO_SIGIO.swap(true, Ordering::Relaxed) {
        tracing::debug!("O_ASYNC is recorded, but no SIGIO is ever sent");
    }
    f.flags = if on {
        f.flags | O_ASYNC
    } else {
        f.flags & !O_ASYNC
    };
}

/// The owner commands of fcntl(2): `cmd` with argument `arg`.
pub(super) fn fcntl_owner(
    p: &Process,
    mem: &mut GuestMemory,
    file: &FileRef,
    cmd: u64,
    arg: u64,
) -> SysResult {
    match cmd {
        F_SETOWN => {
            let who = arg as i32;
            set_owner(p, file, F_OWNER_PID, who)
        }
        // A process group is returned negated (as Linux does, which makes
        // some groups look like errors: F_GETOWN_EX is the way around).
        F_GETOWN => Ok(i64::from(lock(file).owner.1) as u64),
        F_SETOWN_EX => {
            let raw = mem.read(arg, 8)?;
            let kind = i32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
            let pid = i32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]);
            if !(F_OWNER_TID..=F_OWNER_PGRP).contains(&kind) || pid < 0 {
                return Err(Errno::EINVAL);
            }
            set_owner(p, file, kind, if kind == F_OWNER_PGRP { -pid } else { pid })
        }
        F_GETOWN_EX => {
            let (kind, who) = lock(file).owner;
            let mut out = [0u8; 8];
            out[..4].copy_from_slice(&kind.to_le_bytes());
            out[4..].copy_from_slice(&who.unsigned_abs().to_le_bytes());
            mem.write(arg, &out)?;
            Ok(0)
        }
        F_SETSIG => {
            if arg > SIGRTMAX {
                return Err(Errno::EINVAL);
            }
            lock(file).owner_signal = arg as u8;
            Ok(0)
        }
        F_GETSIG => Ok(u64::from(lock(file).owner_signal)),
        _ => Err(Errno::EINVAL),
    }
}

/// Records the owner: `who` a pid, a tid, or a negated process group; 0
/// for none. ESRCH for one the caller cannot see, as Linux.
fn set_owner(p: &Process, file: &FileRef, kind: i32, who: i32) -> SysResult {
    if who != 0 && !pid_visible(p, u64::from(who.unsigned_abs())) {
        return Err(Errno::ESRCH);
    }
    let kind = match (kind, who < 0) {
        (F_OWNER_PID, true) => F_OWNER_PGRP,
        (k, _) => k,
    };
    lock(file).owner = (kind, who);
    Ok(0)
}
