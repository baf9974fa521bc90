//! A handle on one process of the run, for a pidfd (see `linux::pidfd`):
//! it names the process itself, not its number, and tells whether it runs,
//! ended (a zombie) or was reaped.

use super::{lock, pid_of, Inbox, Tree};
use crate::linux::{Errno, Process};
use std::sync::{Arc, Weak};

/// Where a process is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Life {
    /// It runs (or is stopped).
    Running,
    /// It ended; its parent has not reaped it yet.
    Ended,
    /// It ended and was reaped (or its run is over).
    Reaped,
}

/// One process of the run, as a pidfd holds it.
#[derive(Debug, Clone)]
pub struct ProcHandle {
    pid: u64,
    /// The run's tree; `None` for a process without one (alone in its
    /// run), which can only name itself.
    tree: Option<Weak<Tree>>,
    /// The process's signal inbox: what tells it from a later process
    /// with the same number.
    inbox: Weak<Inbox>,
}

impl ProcHandle {
    /// The process's id.
    pub fn pid(&self) -> u64 {
        self.pid
    }

    /// Where it is in its life now.
    pub fn life(&self) -> Life {
        let Some(tree) = &self.tree else {
            return Life::Running;
        };
        let Some(tree) = tree.upgrade() else {
            return Life::Reaped;
        };
        let t = lock(&tree.inner);
        match t.procs.get(&self.pid) {
            Some(e) if std::ptr::eq(Arc::as_ptr(&e.signals), self.inbox.as_ptr()) => {
                if e.status.is_some() {
                    Life::Ended
                } else {
                    Life::Running
                }
            }
            _ => Life::Reaped,
        }
    }

    /// Its process group, while it is not reaped.
    pub fn pgid(&self) -> Option<u64> {
        let Some(tree) = &self.tree else {
            return Some(self.pid);
        };
        let tree = tree.upgrade()?;
        let t = lock(&tree.inner);
        t.procs
            .get(&self.pid)
            .filter(|e| std::ptr::eq(Arc::as_ptr(&e.signals), self.inbox.as_ptr()))
            .map(|e| e.pgid)
    }

    /// Its signal inbox, while it runs (for signals from other processes).
    pub fn inbox(&self) -> Option<Arc<Inbox>> {
        (self.life() == Life::Running)
            .then(|| self.inbox.upgrade())
            .flatten()
    }
}

/// A handle on process `pid` of the caller's run, running or ended but not
/// reaped; ESRCH otherwise.
pub fn handle_of(p: &Process, pid: u64) -> Result<ProcHandle, Errno> {
    match p.family.as_ref() {
        None if pid == pid_of(p) => Ok(ProcHandle {
            pid,
            tree: None,
            inbox: Weak::new(),
        }),
        None => Err(Errno::ESRCH),
        Some(f) => {
            let t = lock(&f.tree.inner);
            let e = t.procs.get(&pid).ok_or(Errno::ESRCH)?;
            Ok(ProcHandle {
                pid,
                tree: Some(Arc::downgrade(&f.tree)),
                inbox: Arc::downgrade(&e.signals),
            })
        }
    }
}
