//! Process ids, groups and sessions: getpid, getppid, getpgid, getpgrp,
//! getsid, setpgid and setsid, answered from the run's process tree.
//!
//! The run's first process is as a program started from an interactive
//! shell: the leader of its own process group, in the session of its
//! parent (pid 1, outside the run). So setpgid(0, 0) succeeds in it, before
//! and after it forks, and setsid is EPERM (a group leader); its children
//! may make sessions of their own.

use super::{lock, pid_of, Family};
use crate::linux::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;

/// Implements getpid(2).
pub(in crate::linux) fn sys_getpid(p: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Ok(pid_of(p))
}

/// Implements getppid(2).
pub(in crate::linux) fn sys_getppid(p: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Ok(p.family
        .as_ref()
        .map_or(crate::linux::process::PPID, Family::ppid))
}

/// The (pgid, sid) of process `pid` (0: the caller), ESRCH if unknown.
fn ids_of(p: &Process, pid: u64) -> Result<(u64, u64), Errno> {
    let me = pid_of(p);
    let pid = if pid == 0 { me } else { pid };
    match p.family.as_ref() {
        None if pid == me => Ok((me, crate::linux::process::PPID)),
        None => Err(Errno::ESRCH),
        Some(f) => lock(&f.tree.inner)
            .procs
            .get(&pid)
            .filter(|e| e.status.is_none() || pid == me)
            .map(|e| (e.pgid, e.sid))
            .ok_or(Errno::ESRCH),
    }
}

/// Whether `pid` names a process the guest can see: its own, one of its
/// family's live ones, or its parent.
pub(in crate::linux) fn pid_visible(p: &Process, pid: u64) -> bool {
    let ppid = p
        .family
        .as_ref()
        .map_or(crate::linux::process::PPID, Family::ppid);
    pid == ppid || ids_of(p, pid).is_ok()
}

/// Implements getpgid(2).
pub(in crate::linux) fn sys_getpgid(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    ids_of(p, a[0]).map(|(g, _)| g)
}

/// Implements getpgrp(2).
pub(in crate::linux) fn sys_getpgrp(p: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    ids_of(p, 0).map(|(g, _)| g)
}

/// Implements getsid(2).
pub(in crate::linux) fn sys_getsid(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    ids_of(p, a[0]).map(|(_, s)| s)
}

/// Implements setpgid(2): the caller or one of its children, within its session.
pub(super) fn sys_setpgid(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let me = pid_of(p);
    let pid = if a[0] == 0 { me } else { a[0] };
    if a[1] > i32::MAX as u64 {
        return Err(Errno::EINVAL);
    }
    let pgid = if a[1] == 0 { pid } else { a[1] };
    let Some(f) = p.family.as_ref() else {
        return match (pid == me, pgid == me) {
            (true, true) => Ok(0),
            // No group of that id in its session.
            (true, false) => Err(Errno::EPERM),
            (false, _) => Err(Errno::ESRCH),
        };
    };
    let mut t = lock(&f.tree.inner);
    let my_sid = t.procs.get(&me).map_or(me, |e| e.sid);
    let Some(target) = t.procs.get(&pid) else {
        return Err(Errno::ESRCH);
    };
    if pid != me && target.ppid != me {
        return Err(Errno::ESRCH);
    }
    if target.sid != my_sid {
        return Err(Errno::EPERM);
    }
    if target.sid == pid {
        // A session leader cannot move.
        return Err(Errno::EPERM);
    }
    if pgid != pid && !t.procs.values().any(|e| e.pgid == pgid && e.sid == my_sid) {
        return Err(Errno::EPERM);
    }
    if let Some(e) = t.procs.get_mut(&pid) {
        e.pgid = pgid;
    }
    Ok(0)
}

/// Implements setsid(2).
pub(super) fn sys_setsid(p: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    let me = pid_of(p);
    let Some(f) = p.family.as_ref() else {
        return Err(Errno::EPERM);
    };
    let mut t = lock(&f.tree.inner);
    if t.procs.iter().any(|(&q, e)| q != me && e.pgid == me)
        || t.procs.get(&me).is_some_and(|e| e.pgid == me)
    {
        // Already a group leader.
        return Err(Errno::EPERM);
    }
    if let Some(e) = t.procs.get_mut(&me) {
        e.pgid = me;
        e.sid = me;
    }
    Ok(me)
}
