//! Waiting for children: wait4 and waitid, for children that ended,
//! stopped or continued.

use super::{
    lock, stop, wait_done, wait_for_tree, SigInfo, SIGCHLD, WALL_FLAGS, WCONTINUED, WEXITED,
    WNOHANG, WNOWAIT, WSTOPPED, WUNTRACED,
};
use crate::linux::thread::Sched;
use crate::linux::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::time::Duration;

/// waitid's id types.
const P_ALL: u64 = 0;
const P_PID: u64 = 1;
const P_PGID: u64 = 2;
const P_PIDFD: u64 = 3;

/// Which children a wait selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Select {
    Any,
    Pid(u64),
    Group(u64),
}

/// What a wait reports about a child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// It ended with this wait status (it is then reaped).
    Ended(i32),
    /// It stopped or continued (see [`stop::Change`]).
    Changed(stop::Change),
}

impl Event {
    /// The status wait4 stores.
    fn wait_status(self) -> i32 {
        match self {
            Event::Ended(s) => s,
            Event::Changed(c) => c.wait_status(),
        }
    }
}

/// Which events a wait asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Want {
    ended: bool,
    stopped: bool,
    continued: bool,
}

/// A child that `sel` selects with an event `want` asks for: (pid, event,
/// its CPU time if it ended); an ended child is removed (its CPU time added
/// to the caller's children's) and a change forgotten unless `keep`.
/// ECHILD when no child matches at all.
fn reap(
    p: &mut Process,
    sel: Select,
    want: Want,
    keep: bool,
) -> Result<Option<(u64, Event, Duration)>, Errno> {
    let Some(f) = p.family.as_ref() else {
        return Err(Errno::ECHILD);
    };
    let mut t = lock(&f.tree.inner);
    let mut any = false;
    let mut found = None;
    for (&pid, e) in &t.procs {
        if e.ppid != f.pid {
            continue;
        }
        let hit = match sel {
            Select::Any => true,
            Select::Pid(x) => pid == x,
            Select::Group(g) => e.pgid == g,
        };
        if !hit {
            continue;
        }
        any = true;
        let event = match (e.status, e.change) {
            (Some(s), _) if want.ended => Some(Event::Ended(s)),
            (None, Some(c @ stop::Change::Stopped(_))) if want.stopped => Some(Event::Changed(c)),
            (None, Some(c @ stop::Change::Continued)) if want.continued => Some(Event::Changed(c)),
            _ => None,
        };
        if let Some(event) = event {
            found = Some((pid, event, e.cpu));
            break;
        }
    }
    if !any {
        return Err(Errno::ECHILD);
    }
    match (found, keep) {
        (Some((pid, Event::Ended(_), cpu)), false) => {
            t.procs.remove(&pid);
            drop(t);
            p.children_cpu = p.children_cpu.saturating_add(cpu);
        }
        (Some((pid, Event::Changed(_), _)), false) => {
            if let Some(e) = t.procs.get_mut(&pid) {
                e.change = None;
            }
        }
        _ => {}
    }
    Ok(found)
}

/// The `struct rusage` a wait reports: an ended child's CPU time (its own
/// and its waited-for children's) as user time; nothing for a stop or
/// continue.
fn rusage_of(event: Event, cpu: Duration) -> [u8; 144] {
    match event {
        Event::Ended(_) => crate::linux::time::rusage(cpu),
        _ => crate::linux::time::rusage(Duration::ZERO),
    }
}

fn my_pgid(p: &Process) -> u64 {
    let Some(f) = p.family.as_ref() else {
        return crate::linux::process::PID;
    };
    lock(&f.tree.inner)
        .procs
        .get(&f.pid)
        .map_or(f.pid, |e| e.pgid)
}

/// Implements wait4(2).
pub(super) fn sys_wait4(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let r = wait4_once(p, mem, a);
    if !matches!(p.sched, Some(Sched::Retry(_))) {
        wait_done(p);
    }
    r
}

fn wait4_once(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [pid, status, options, rusage, ..] = *a;
    if options & !(WNOHANG | WUNTRACED | WCONTINUED | WALL_FLAGS) != 0 {
        return Err(Errno::EINVAL);
    }
    let pid = pid as i32 as i64;
    let sel = match pid {
        -1 => Select::Any,
        0 => Select::Group(my_pgid(p)),
        x if x < 0 => Select::Group(x.unsigned_abs()),
        x => Select::Pid(x as u64),
    };
    let want = Want {
        ended: true,
        stopped: options & WUNTRACED != 0,
        continued: options & WCONTINUED != 0,
    };
    match reap(p, sel, want, false)? {
        Some((child, event, cpu)) => {
            if status != 0 {
                mem.write_u32(status, event.wait_status() as u32)?;
            }
            if rusage != 0 {
                mem.write(rusage, &rusage_of(event, cpu))?;
            }
            Ok(child)
        }
        None if options & WNOHANG != 0 => Ok(0),
        None => {
            wait_for_tree(p);
            Ok(0)
        }
    }
}

/// Implements waitid(2) (P_ALL, P_PID, P_PGID, P_PIDFD).
pub(super) fn sys_waitid(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let r = waitid_once(p, mem, a);
    if !matches!(p.sched, Some(Sched::Retry(_))) {
        wait_done(p);
    }
    r
}

fn waitid_once(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [idtype, id, infop, options, rusage, ..] = *a;
    if options & !(WNOHANG | WEXITED | WNOWAIT | WSTOPPED | WCONTINUED | WALL_FLAGS) != 0
        || options & (WEXITED | WSTOPPED | WCONTINUED) == 0
    {
        return Err(Errno::EINVAL);
    }
    let upid = id as i32;
    // A non-blocking pidfd waits as with WNOHANG, and says EAGAIN.
    let mut nonblocking = false;
    let sel = match idtype {
        P_ALL => Select::Any,
        P_PID if upid > 0 => Select::Pid(upid as u64),
        P_PGID if upid == 0 => Select::Group(my_pgid(p)),
        P_PGID if upid > 0 => Select::Group(upid as u64),
        P_PIDFD if upid >= 0 => {
            let (fd, nb) = crate::linux::pidfd::pidfd_of(p, upid)?;
            nonblocking = nb;
            Select::Pid(fd.proc.pid())
        }
        _ => return Err(Errno::EINVAL),
    };
    let no_hang = options & WNOHANG != 0 || nonblocking;
    let want = Want {
        ended: options & WEXITED != 0,
        stopped: options & WSTOPPED != 0,
        continued: options & WCONTINUED != 0,
    };
    match reap(p, sel, want, options & WNOWAIT != 0)? {
        Some((child, event, cpu)) => {
            if infop != 0 {
                let mut info = [0u8; 128];
                // The same code and value as the SIGCHLD for the event.
                let sig = match event {
                    Event::Ended(st) => SigInfo::child(child, st),
                    Event::Changed(c) => c.sigchld(child),
                };
                let (code, value) = (sig.code, sig.status);
                info[0..4].copy_from_slice(&(SIGCHLD as i32).to_le_bytes());
                info[8..12].copy_from_slice(&code.to_le_bytes());
                info[16..20].copy_from_slice(&(child as i32).to_le_bytes());
                info[20..24].copy_from_slice(&(crate::linux::process::UID as u32).to_le_bytes());
                info[24..28].copy_from_slice(&value.to_le_bytes());
                mem.write(infop, &info)?;
            }
            if rusage != 0 {
                mem.write(rusage, &rusage_of(event, cpu))?;
            }
            Ok(0)
        }
        None if no_hang => {
            if infop != 0 {
                mem.write(infop, &[0u8; 128])?;
            }
            if options & WNOHANG == 0 {
                return Err(Errno::EAGAIN);
            }
            Ok(0)
        }
        None => {
            wait_for_tree(p);
            Ok(0)
        }
    }
}
