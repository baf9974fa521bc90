//! Signals: dispositions, masks and the alternate stack are recorded
//! faithfully; a signal sent to itself with the default action ends the
//! process like Linux would (status 128+signal). Delivery to handlers is not
//! implemented yet.

use super::table::{Support, SyscallEntry};
use super::{process::PID, Args, Errno, Process, SigAction, SysResult};
use crate::memory::GuestMemory;

const SIGKILL: u64 = 9;
const SIGSTOP: u64 = 19;
const SIG_DFL: u64 = 0;
const SIG_IGN: u64 = 1;
const SIGSET_SIZE: u64 = 8;
const SS_ONSTACK: i32 = 1;
const SS_DISABLE: i32 = 2;
const SS_AUTODISARM: i32 = 1 << 31;
const MINSIGSTKSZ: u64 = 2048;
/// Signals that cannot be blocked.
const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));

fn check_sig(sig: u64) -> Result<usize, Errno> {
    if (1..=64).contains(&sig) {
        Ok(sig as usize - 1)
    } else {
        Err(Errno::EINVAL)
    }
}

/// Implements rt_sigaction(2).
fn sys_rt_sigaction(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [sig, act, oldact, size, ..] = *a;
    let idx = check_sig(sig)?;
    if size != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    let new = if act != 0 {
        if sig == SIGKILL || sig == SIGSTOP {
            return Err(Errno::EINVAL);
        }
        let b = mem.read(act, 32)?;
        let q = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        Some(SigAction {
            handler: q(0),
            flags: q(1),
            restorer: q(2),
            mask: q(3) & !UNBLOCKABLE,
        })
    } else {
        None
    };
    if oldact != 0 {
        let o = p.sigactions[idx];
        let mut b = [0u8; 32];
        for (i, v) in [o.handler, o.flags, o.restorer, o.mask].iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        mem.write(oldact, &b)?;
    }
    if let Some(n) = new {
        p.sigactions[idx] = n;
    }
    Ok(0)
}

/// Implements rt_sigprocmask(2).
fn sys_rt_sigprocmask(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [how, set, oldset, size, ..] = *a;
    if size != SIGSET_SIZE {
        return Err(Errno::EINVAL);
    }
    let new = if set != 0 {
        let s = mem.read_u64(set)?;
        Some(match how {
            0 => p.sigmask | s,
            1 => p.sigmask & !s,
            2 => s,
            _ => return Err(Errno::EINVAL),
        })
    } else {
        None
    };
    if oldset != 0 {
        mem.write_u64(oldset, p.sigmask)?;
    }
    if let Some(m) = new {
        p.sigmask = m & !UNBLOCKABLE;
    }
    Ok(0)
}

/// Implements sigaltstack(2).
fn sys_sigaltstack(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [ss, old, ..] = *a;
    let new = if ss != 0 {
        let sp = mem.read_u64(ss)?;
        let flags = mem.read_u32(ss + 8)? as i32;
        let size = mem.read_u64(ss + 16)?;
        if flags & !(SS_DISABLE | SS_AUTODISARM) != 0 {
            return Err(Errno::EINVAL);
        }
        if flags & SS_DISABLE == 0 && size < MINSIGSTKSZ {
            return Err(Errno::ENOMEM);
        }
        Some((sp, flags, size))
    } else {
        None
    };
    if old != 0 {
        let (sp, flags, size) = p.altstack;
        mem.write_u64(old, sp)?;
        mem.write_u64(old + 8, (flags & !SS_ONSTACK) as u32 as u64)?;
        mem.write_u64(old + 16, size)?;
    }
    if let Some(n) = new {
        p.altstack = n;
    }
    Ok(0)
}

/// Whether the default action of `sig` terminates the process.
fn default_terminates(sig: u64) -> bool {
    // Ignored by default: SIGCHLD, SIGCONT, SIGURG, SIGWINCH; stop signals stop.
    !matches!(sig, 17 | 18 | 23 | 28 | 19 | 20 | 21 | 22)
}

/// Sends `sig` to the process itself.
fn send_self(p: &mut Process, sig: u64) -> SysResult {
    if sig == 0 {
        return Ok(0);
    }
    let idx = check_sig(sig)?;
    let action = p.sigactions[idx];
    let blocked = p.sigmask & (1 << idx) != 0;
    if sig == SIGKILL || (action.handler == SIG_DFL && !blocked && default_terminates(sig)) {
        p.exit_status = Some(128 + sig as i32);
        p.killed_by = Some(sig as i32);
        return Ok(0);
    }
    if action.handler == SIG_IGN || blocked || action.handler == SIG_DFL {
        return Ok(0);
    }
    // A guest handler is installed; delivery is not implemented yet.
    tracing::warn!(
        sig,
        "signal delivery to a guest handler is not implemented; dropped"
    );
    Ok(0)
}

/// Implements kill(2) for the process itself.
fn sys_kill(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let pid = a[0] as i64;
    if pid == PID as i64 || pid == 0 || pid == -1 || pid == -(PID as i64) {
        send_self(p, a[1])
    } else {
        Err(Errno::ESRCH)
    }
}

/// Implements tgkill(2) for the process itself.
fn sys_tgkill(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] != PID || a[1] != PID {
        return Err(Errno::ESRCH);
    }
    send_self(p, a[2])
}

/// Implements tkill(2) for the thread itself.
fn sys_tkill(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] != PID {
        return Err(Errno::ESRCH);
    }
    send_self(p, a[1])
}

/// Implements rt_sigreturn(2): no frames are ever pushed, so there is nothing to return from.
fn sys_rt_sigreturn(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Err(Errno::ENOSYS)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 13, name: "rt_sigaction", handler: sys_rt_sigaction, support: Support::Partial,
        note: "dispositions are recorded; handlers are not invoked yet" },
    SyscallEntry { nr: 14, name: "rt_sigprocmask", handler: sys_rt_sigprocmask, support: Support::Full, note: "" },
    SyscallEntry { nr: 15, name: "rt_sigreturn", handler: sys_rt_sigreturn, support: Support::Refused,
        note: "ENOSYS: no signal frames are delivered yet" },
    SyscallEntry { nr: 62, name: "kill", handler: sys_kill, support: Support::Partial,
        note: "to itself only: default actions terminate (status 128+sig); handlers are not invoked yet" },
    SyscallEntry { nr: 131, name: "sigaltstack", handler: sys_sigaltstack, support: Support::Full, note: "" },
    SyscallEntry { nr: 200, name: "tkill", handler: sys_tkill, support: Support::Partial,
        note: "to itself only, as kill" },
    SyscallEntry { nr: 234, name: "tgkill", handler: sys_tgkill, support: Support::Partial,
        note: "to itself only, as kill" },
];
