//! Stopping and continuing a process: SIGSTOP, and SIGTSTP, SIGTTIN and
//! SIGTTOU by their default action, stop it; SIGCONT continues it. A
//! stopped process's host thread waits, looking at the signals sent to it,
//! until SIGCONT or SIGKILL comes (others wait for it to continue, as on
//! Linux); its parent hears of the stop and the continue by SIGCHLD
//! (CLD_STOPPED, CLD_CONTINUED) and from wait4/waitid (WUNTRACED,
//! WCONTINUED).

use super::{lock, Family, SIGKILL};
use crate::linux::signal::{self, code, Pending, SigInfo};
use crate::linux::Process;
use std::sync::atomic::Ordering;
use std::time::Duration;

const SIGCONT: i32 = 18;
/// How often a stopped process looks for SIGCONT.
const STOPPED_CHECK: Duration = Duration::from_millis(5);

/// A change of a child's state that its parent may wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Stopped by this signal.
    Stopped(i32),
    /// Continued by SIGCONT.
    Continued,
}

impl Change {
    /// The status wait4 reports for it.
    pub(super) fn wait_status(self) -> i32 {
        match self {
            Change::Stopped(sig) => (sig << 8) | 0x7f,
            Change::Continued => 0xffff,
        }
    }

    /// The SIGCHLD that tells the parent of it.
    pub(super) fn sigchld(self, pid: u64) -> SigInfo {
        match self {
            Change::Stopped(sig) => SigInfo::child_changed(pid, code::CLD_STOPPED, sig),
            Change::Continued => SigInfo::child_changed(pid, code::CLD_CONTINUED, SIGCONT),
        }
    }
}

impl Family {
    /// Records `change` for the parent's wait and tells the parent by SIGCHLD.
    fn report(&self, change: Change) {
        let mut t = lock(&self.tree.inner);
        let Some(e) = t.procs.get_mut(&self.pid) else {
            return;
        };
        e.change = Some(change);
        let ppid = e.ppid;
        if let Some(parent) = t.procs.get(&ppid) {
            let _ = parent.signals.push(change.sigchld(self.pid));
        }
    }
}

/// If a stop signal took effect (`Process::stopping`), the process stops
/// here until SIGCONT (it then goes on, and the signals that came meanwhile
/// are delivered) or SIGKILL (it ends). It also stops waiting when the run
/// is over or out of time, so that the run loop can end it.
pub fn stop_if_asked(p: &mut Process) {
    let Some(sig) = p.stopping.take() else {
        return;
    };
    if p.exit_status.is_some() {
        return;
    }
    // A served request has no tree: nobody could continue it.
    let Some(f) = p.family.clone() else {
        return;
    };
    tracing::debug!("process {} stopped by signal {sig}", f.pid);
    f.report(Change::Stopped(sig));
    let mut held = Pending::default();
    loop {
        let over = !f.is_first() && f.tree.ended.load(Ordering::Relaxed);
        if over || f.tree.remaining().is_zero() {
            return;
        }
        let mut taken = f.signals.take();
        let mut continued = false;
        while let Some(info) = taken.take(u64::MAX, 0) {
            if info.signo == SIGKILL as i32 {
                let _ = signal::send(p, info);
                return;
            }
            continued |= info.signo == SIGCONT;
            let _ = held.push(info);
        }
        if continued {
            break;
        }
        std::thread::sleep(STOPPED_CHECK);
    }
    tracing::debug!("process {} continued", f.pid);
    f.report(Change::Continued);
    while let Some(info) = held.take(u64::MAX, 0) {
        let _ = signal::send(p, info);
        if p.exit_status.is_some() {
            return;
        }
    }
}
