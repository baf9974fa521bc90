//! What the run's processes see of each other in /proc/<pid>: a process
//! publishes its name, command line and program in the tree when it starts,
//! forks, execs or renames itself, and `/proc/<pid>/{stat,status,cmdline,
//! comm,exe}` of another process of the run are made from that record and
//! the tree's ids (ps, pgrep and `cat /proc/$$/status` from a shell's child).
//! A process's own /proc/self is made from its live state instead (see
//! `procfs`).

use super::{lock, pid_of, Family};
use crate::linux::Process;
use crate::memory::GuestMemory;
use std::time::Instant;

/// A process as others see it in /proc.
#[derive(Debug, Clone)]
pub struct Shown {
    /// Its name (`comm`, 15 bytes at most, NUL-padded).
    pub comm: [u8; 16],
    /// Its argument strings, each NUL-terminated (/proc/<pid>/cmdline).
    pub cmdline: Vec<u8>,
    /// The program's path in the guest namespace (/proc/<pid>/exe).
    pub exe: String,
    /// When the process began (exec keeps it, as on Linux).
    pub started: Instant,
}

impl Shown {
    /// A process that has published nothing yet.
    pub(super) fn new() -> Self {
        Self {
            comm: [0; 16],
            cmdline: Vec::new(),
            exe: String::new(),
            started: Instant::now(),
        }
    }
}

/// Another process of the run (or the caller itself) as /proc shows it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub ppid: u64,
    pub pgid: u64,
    pub sid: u64,
    /// It ended and its parent has not waited for it yet.
    pub zombie: bool,
    /// It waits in a call (see `child::set_asleep`).
    pub asleep: bool,
    pub shown: Shown,
}

impl Family {
    /// Publishes what others see of this process from its state now: its
    /// name, the argument strings in its memory and its program.
    pub fn publish(&self, p: &Process, mem: &GuestMemory) {
        let (start, end) = p.mm.args;
        let cmdline = end
            .checked_sub(start)
            .and_then(|len| mem.read(start, len).ok())
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
        if let Some(e) = lock(&self.tree.inner).procs.get_mut(&self.pid) {
            // Counted: once a use of a `forkvm serve` fork changed what its
            // first process shows, the next use needs a tree of its own.
            e.publishes = e.publishes.saturating_add(1);
            e.shown.comm = p.comm;
            e.shown.cmdline = cmdline;
            e.shown.exe.clone_from(&p.exe_path);
        }
    }
}

/// Process `pid` of the caller's run as /proc shows it, if there is one.
pub fn seen(p: &Process, pid: u64) -> Option<Seen> {
    let f = p.family.as_ref()?;
    let t = lock(&f.tree.inner);
    let e = t.procs.get(&pid)?;
    Some(Seen {
        ppid: e.ppid,
        pgid: e.pgid,
        sid: e.sid,
        zombie: e.status.is_some(),
        asleep: e.asleep.load(std::sync::atomic::Ordering::Relaxed),
        shown: e.shown.clone(),
    })
}

/// The pids of the caller's run that /proc lists (the caller's own included).
pub fn pids(p: &Process) -> Vec<u64> {
    match p.family.as_ref() {
        Some(f) => lock(&f.tree.inner).procs.keys().copied().collect(),
        None => vec![pid_of(p)],
    }
}
