//! Child processes: the process tree of one run, fork/vfork/clone without
//! CLONE_VM (each child is its own VM on its own host thread, see
//! `machine::children`), wait4/waitid, signals between processes, process
//! groups and sessions.
//!
//! Every process of a run holds a [`Family`]: its pid and the shared
//! [`Tree`]. The tree records, per pid, the parent, group, session, the exit
//! status once the process ended (a zombie until reaped) and a word of
//! signals other processes sent it. A process takes its signals at its next
//! system call ([`take_signals`], from `linux::dispatch`), so a process that
//! spins in user mode without system calls sees them only at the end of the
//! run (its timeout).

use super::fdtable::{FileRef, OpenFile};
use super::signal::{Inbox, SigInfo};
use super::table::{Support, SyscallEntry};
use super::thread::Sched;
use super::{Args, Errno, Process, SysResult};
use crate::machine::Config;
use crate::memory::GuestMemory;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

/// Processes one run may have alive at once (`forkvm run --max-processes`).
pub const DEFAULT_MAX_PROCESSES: usize = 64;
/// The most `--max-processes` may say.
pub const MAX_PROCESSES_LIMIT: usize = 4096;
/// The first pid handed to a child (threads of the first process take the
/// small numbers after its pid).
const FIRST_CHILD_PID: u64 = 1000;
/// How often a blocked wait4/waitid/sigsuspend looks at the tree again:
/// at first often (most children are short-lived), then backing off to the
/// longest interval as the wait goes on (a quarter of the time waited).
const WAIT_RECHECK_MIN: Duration = Duration::from_micros(50);
const WAIT_RECHECK_MAX: Duration = Duration::from_millis(5);

const SIGCHLD: u64 = 17;
const SIGKILL: u64 = 9;
const WNOHANG: u64 = 1;
const WUNTRACED: u64 = 2;
/// waitid's name for WUNTRACED.
const WSTOPPED: u64 = 2;
const WEXITED: u64 = 4;
const WCONTINUED: u64 = 8;
const WNOWAIT: u64 = 0x0100_0000;
const WALL_FLAGS: u64 = 0x4000_0000 | 0x8000_0000 | 0x2000_0000; // __WNOTHREAD, __WCLONE, __WALL

const CLONE_VM: u64 = 0x100;
const CLONE_VFORK: u64 = 0x4000;
const CLONE_SETTLS: u64 = 0x8_0000;
const CLONE_PARENT_SETTID: u64 = 0x10_0000;
const CLONE_CHILD_CLEARTID: u64 = 0x20_0000;
const CLONE_CHILD_SETTID: u64 = 0x100_0000;
const CLONE_THREAD: u64 = 0x1_0000;
/// Flags a new process may carry (others are refused with EINVAL): the
/// exit signal in the low byte, the tid reports, TLS and vfork, and the
/// sharing flags glibc and musl pass that change nothing for a copy.
const PROCESS_FLAGS: u64 = 0xff
    | CLONE_VM
    | CLONE_VFORK
    | CLONE_SETTLS
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_CLEARTID
    | CLONE_CHILD_SETTID;

/// One process as the tree knows it.
#[derive(Debug)]
struct Entry {
    ppid: u64,
    pgid: u64,
    sid: u64,
    /// The wait status once it ended (a zombie until reaped).
    status: Option<i32>,
    /// Signals sent to it by other processes.
    signals: Arc<Inbox>,
    /// It ignores SIGCHLD (or set SA_NOCLDWAIT): its children leave no
    /// zombie, and a wait for them ends with ECHILD once none is left.
    no_zombies: bool,
    /// It stopped or continued, and no wait has reported that yet.
    change: Option<stop::Change>,
    /// The signal it gets when its parent ends (PR_SET_PDEATHSIG; 0: none).
    pdeathsig: u64,
    /// Orphaned descendants become its children (PR_SET_CHILD_SUBREAPER).
    subreaper: bool,
    /// Set when it gets a new parent (see [`refresh_ppid`]).
    adopted: Arc<AtomicBool>,
    /// Set while it waits in a call (see [`set_asleep`]).
    asleep: Arc<AtomicBool>,
    /// Its CPU time and its waited-for children's, once it ended (what
    /// wait4's rusage reports).
    cpu: Duration,
    /// What the run's other processes see of it in /proc (see `shown`).
    shown: Shown,
    /// How often it published `shown`.
    publishes: u32,
}

#[derive(Debug, Default)]
struct Inner {
    next_pid: u64,
    /// Processes running (not yet ended), including the first.
    alive: usize,
    procs: BTreeMap<u64, Entry>,
}

/// Who a tree's first process is: its pid, parent, group and session.
/// A run's is [`Ids::FIRST`]; a served pre-fork server's forks keep the
/// worker's own (see `machine::handoff`), which the program may have
/// stored (gunicorn's worker compares its saved parent pid with getppid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    pub pid: u64,
    pub ppid: u64,
    pub pgid: u64,
    pub sid: u64,
}

impl Ids {
    /// A program run from an interactive shell: the leader of its own
    /// group, in its parent's session (see child/ids.rs).
    pub const FIRST: Ids = Ids {
        pid: super::process::PID,
        ppid: super::process::PPID,
        pgid: super::process::PID,
        sid: super::process::PPID,
    };
}

/// The processes of one run.
#[derive(Debug)]
pub struct Tree {
    inner: Mutex<Inner>,
    /// The first process (the one not started by another of the run).
    pub first: Ids,
    /// Most processes alive at once.
    max: AtomicU64,
    /// What every process of the run was started with (for execve).
    pub config: Config,
    /// When the whole run ends (its --timeout), if ever.
    pub deadline: Option<Instant>,
    /// Set when the first process ended: children stop at their next syscall.
    pub ended: AtomicBool,
    /// Paths the run's other processes were refused as outside the
    /// allow-list (a shell's `exec` of a tool), for the first one's hints.
    refused: Mutex<Vec<String>>,
    /// The size of an mmap an ended process was refused for lack of memory
    /// (the first one), for the same hint.
    mmap_enomem: Mutex<Option<u64>>,
    /// The run's bound and listening sockets, whichever process made them,
    /// so that a bind or connect by address finds those its process did not
    /// inherit (made after a fork, or closed on exec), as in one network
    /// namespace. Sockets closed everywhere drop out.
    sockets: Mutex<Vec<Weak<Mutex<OpenFile>>>>,
    /// The run's SysV shared memory segments (one IPC namespace).
    pub shm: Arc<super::sysv_shm::Namespace>,
    /// Wakes the run's sleeping processes (see `wake`).
    wake: wake::Wake,
    /// The run's waits on futexes in shared memory.
    pub futexes: super::shared_futex::Registry,
    /// The run's pseudo-terminals (one devpts instance).
    pub ptys: super::pty::Registry,
}

/// A process's place in its run's tree.
#[derive(Debug, Clone)]
pub struct Family {
    /// The tree of the run.
    pub tree: Arc<Tree>,
    /// This process's id.
    pub pid: u64,
    /// Signals other processes sent to this one.
    signals: Arc<Inbox>,
    /// Set when its parent ended and another took it (see [`refresh_ppid`]).
    adopted: Arc<AtomicBool>,
    /// Set while it waits in a call: /proc shows it sleeping (see [`set_asleep`]).
    asleep: Arc<AtomicBool>,
    /// When the current blocking wait for a child or signal began.
    wait_started: Option<Instant>,
}

mod handle;
mod ids;
mod shown;
mod stop;
mod wait;
mod wake;
pub(super) use wake::{note_wake_epoch, wake_others_after};
pub use wake::{sleep_until_woken, Waiter};

pub use handle::{handle_of, Life, ProcHandle};
pub(super) use ids::{pid_visible, sys_getpgid, sys_getpgrp, sys_getpid, sys_getppid, sys_getsid};
use ids::{sys_setpgid, sys_setsid};
pub use shown::{pids, seen, Seen, Shown};
pub use stop::stop_if_asked;
use wait::{sys_wait4, sys_waitid};

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tree {
    /// Adds what an ended process was refused to the run's list (the first
    /// few paths, repeats once; the first mmap refused for lack of memory):
    /// a failed run's hints name what any of its processes lacked.
    pub fn note_refused(&self, notes: &super::trace::Notes) {
        let mut all = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        for path in &notes.denied {
            if all.len() < super::trace::MAX_DENIED && !all.contains(path) {
                all.push(path.clone());
            }
        }
        if let Some(len) = notes.mmap_enomem {
            self.mmap_enomem
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert(len);
        }
    }

    /// The first mmap an ended process of the run was refused for lack of
    /// memory (see [`Tree::note_refused`]).
    pub fn mmap_enomem(&self) -> Option<u64> {
        *self
            .mmap_enomem
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// What the run's other processes were refused (see [`Tree::note_refused`]).
    pub fn refused(&self) -> Vec<String> {
        self.refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Adds a bound or listening socket to the run's (once).
    pub fn publish_socket(&self, file: &FileRef) {
        let mut all = self.sockets.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|w| w.strong_count() > 0);
        if !all
            .iter()
            .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(file)))
        {
            all.push(Arc::downgrade(file));
        }
    }

    /// The run's bound and listening sockets still open somewhere.
    pub fn sockets(&self) -> Vec<FileRef> {
        let mut all = self.sockets.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|w| w.strong_count() > 0);
        all.iter().filter_map(Weak::upgrade).collect()
    }

    /// The tree of a new run whose first process has pid `PID` and the
    /// configuration `config`.
    pub fn root(config: Config) -> Family {
        Self::root_as(config, Ids::FIRST)
    }

    /// [`Tree::root`] for a first process known as `first`.
    pub fn root_as(config: Config, first: Ids) -> Family {
        let deadline = Instant::now().checked_add(config.timeout);
        let signals = Arc::new(Inbox::default());
        let pid = first.pid;
        let asleep = Arc::new(AtomicBool::new(false));
        let mut inner = Inner {
            next_pid: FIRST_CHILD_PID,
            alive: 1,
            procs: BTreeMap::new(),
        };
        inner.procs.insert(
            pid,
            Entry {
                ppid: first.ppid,
                pgid: first.pgid,
                sid: first.sid,
                status: None,
                signals: signals.clone(),
                no_zombies: false,
                change: None,
                pdeathsig: 0,
                subreaper: false,
                adopted: Arc::default(),
                asleep: asleep.clone(),
                cpu: Duration::ZERO,
                shown: Shown::new(),
                publishes: 0,
            },
        );
        let tree = Tree {
            inner: Mutex::new(inner),
            first,
            max: AtomicU64::new(DEFAULT_MAX_PROCESSES as u64),
            config,
            deadline,
            ended: AtomicBool::new(false),
            refused: Mutex::new(Vec::new()),
            mmap_enomem: Mutex::new(None),
            sockets: Mutex::new(Vec::new()),
            shm: Arc::default(),
            wake: wake::Wake::default(),
            futexes: Default::default(),
            ptys: Default::default(),
        };
        Family {
            tree: Arc::new(tree),
            pid,
            signals,
            adopted: Arc::default(),
            asleep,
            wait_started: None,
        }
    }

    /// The most processes alive at once (`--max-processes`).
    pub fn max_processes(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Sets the most processes alive at once (1 forbids children).
    pub fn set_max(&self, n: usize) {
        let n = n.clamp(1, MAX_PROCESSES_LIMIT) as u64;
        self.max.store(n, Ordering::Relaxed);
    }

    /// Time left before the run's deadline.
    pub fn remaining(&self) -> Duration {
        match self.deadline {
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => Duration::MAX,
        }
    }

    /// Records a new child of `parent`; EAGAIN beyond the limit.
    fn add_child(self: &Arc<Self>, parent: u64) -> Result<Family, Errno> {
        let mut t = lock(&self.inner);
        if t.alive as u64 >= self.max.load(Ordering::Relaxed) {
            return Err(Errno::EAGAIN);
        }
        // A child inherits its parent's dispositions, SIGCHLD's included,
        // and shows what its parent did until it publishes its own.
        let (pgid, sid, no_zombies, mut shown) = t.procs.get(&parent).map_or_else(
            || (parent, parent, false, Shown::new()),
            |e| (e.pgid, e.sid, e.no_zombies, e.shown.clone()),
        );
        shown.started = Instant::now();
        let mut pid = t.next_pid;
        while t.procs.contains_key(&pid) {
            pid += 1;
        }
        t.next_pid = pid + 1;
        t.alive += 1;
        let signals = Arc::new(Inbox::default());
        let adopted = Arc::new(AtomicBool::new(false));
        let asleep = Arc::new(AtomicBool::new(false));
        t.procs.insert(
            pid,
            Entry {
                ppid: parent,
                pgid,
                sid,
                status: None,
                signals: signals.clone(),
                no_zombies,
                change: None,
                pdeathsig: 0,
                subreaper: false,
                adopted: adopted.clone(),
                asleep: asleep.clone(),
                cpu: Duration::ZERO,
                shown,
                publishes: 0,
            },
        );
        drop(t);
        Ok(Family {
            tree: self.clone(),
            pid,
            signals,
            adopted,
            asleep,
            wait_started: None,
        })
    }
}

impl Family {
    /// Adds a child of this process to the tree (EAGAIN beyond the limit).
    pub fn new_child(&self) -> Result<Family, Errno> {
        self.tree.add_child(self.pid)
    }

    /// Records whether this process ignores SIGCHLD (or set SA_NOCLDWAIT).
    pub fn set_no_zombies(&self, on: bool) {
        if let Some(e) = lock(&self.tree.inner).procs.get_mut(&self.pid) {
            e.no_zombies = on;
        }
    }

    /// Whether this is the run's first process.
    pub fn is_first(&self) -> bool {
        self.pid == self.tree.first.pid
    }

    /// This process as the tree knows it now (for a tree of its own, see
    /// [`Tree::root_as`]).
    pub fn ids(&self) -> Ids {
        let t = lock(&self.tree.inner);
        let e = t.procs.get(&self.pid);
        Ids {
            pid: self.pid,
            ppid: e.map_or(super::process::PPID, |e| e.ppid),
            pgid: e.map_or(self.pid, |e| e.pgid),
            sid: e.map_or(super::process::PPID, |e| e.sid),
        }
    }

    /// The parent's pid.
    pub fn ppid(&self) -> u64 {
        lock(&self.tree.inner)
            .procs
            .get(&self.pid)
            .map_or(super::process::PPID, |e| e.ppid)
    }

    /// Called when this process's run ended: if it is the first process,
    /// every other process stops at its next system call (SIGKILL).
    pub fn run_over(&self) {
        if self.is_first() {
            self.tree.ended.store(true, Ordering::SeqCst);
        }
    }

    /// Ends every process of the tree but the first (they take SIGKILL at
    /// their next system call or tick), without waiting for them.
    pub fn end_others(&self) {
        self.tree.ended.store(true, Ordering::SeqCst);
        self.tree.wake.notify();
    }

    /// Ends the tree's first process (SIGKILL, taken at its next call, or
    /// at once if it sleeps or waits): a pre-fork server's arbiter once its
    /// worker took over (see `machine::handoff`).
    pub fn end_first(&self) {
        if let Some(e) = lock(&self.tree.inner).procs.get(&self.tree.first.pid) {
            let _ = e.signals.push(SigInfo::kernel(SIGKILL));
        }
        self.tree.wake.notify();
    }

    /// Ends every other process of the tree (they take SIGKILL at their
    /// next system call or tick) and waits, at most `limit`, until their
    /// threads are done with their VMs. Returns whether all ended.
    pub fn end_tree(&self, limit: Duration) -> bool {
        self.tree.ended.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + limit;
        loop {
            // The first process (the caller) is never recorded as ended.
            if lock(&self.tree.inner).alive <= 1 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether the tree is as `Tree::root` made it: no other process was
    /// ever added, no signal is waiting, the group and session are the
    /// first process's own (so it can serve another use as it is).
    pub fn untouched(&self) -> bool {
        let t = lock(&self.tree.inner);
        t.next_pid == FIRST_CHILD_PID
            && t.procs.len() == 1
            && self.wait_started.is_none()
            && !self.signals.waiting()
            && !self.tree.ended.load(Ordering::SeqCst)
            && !self.tree.ptys.used()
            && t.procs.get(&self.pid).is_some_and(|e| {
                e.pgid == self.tree.first.pgid
                    && e.sid == self.tree.first.sid
                    && e.status.is_none()
                    && e.publishes <= 1
            })
    }

    /// A child that could not be started: forget it.
    pub fn abandon(&self) {
        let mut t = lock(&self.tree.inner);
        if t.procs.remove(&self.pid).is_some() {
            t.alive = t.alive.saturating_sub(1);
        }
    }

    /// The CPU time of the ending process (its own and its waited-for
    /// children's), for its parent's wait to report.
    pub fn record_cpu(&self, cpu: Duration) {
        if let Some(e) = lock(&self.tree.inner).procs.get_mut(&self.pid) {
            e.cpu = cpu;
        }
    }

    /// The process ended with wait status `status`: it becomes a zombie for
    /// its parent (which gets SIGCHLD); its own children go to the first
    /// process, as orphans go to init.
    pub fn exited(&self, status: i32) {
        tracing::debug!("process {} ended with wait status {status:#x}", self.pid);
        // Its parent may wait for it (and others for its pipes' ends).
        self.tree.wake.notify();
        let mut t = lock(&self.tree.inner);
        t.alive = t.alive.saturating_sub(1);
        let Some(e) = t.procs.get_mut(&self.pid) else {
            return;
        };
        e.status = Some(status);
        let ppid = e.ppid;
        if t.procs.get(&ppid).is_some_and(|parent| parent.no_zombies) {
            // Reaped at once, as Linux does for a parent that ignores SIGCHLD.
            t.procs.remove(&self.pid);
        }
        // Its children go to the nearest living ancestor that is a
        // subreaper, else to init (pid 1, outside the run), as on Linux; a
        // child that asked for PR_SET_PDEATHSIG gets its signal.
        let mut reaper = ppid;
        while let Some(e) = t.procs.get(&reaper) {
            if e.status.is_none() && e.subreaper {
                break;
            }
            reaper = e.ppid;
        }
        if !t.procs.contains_key(&reaper) {
            reaper = super::process::PPID;
        }
        let mut zombies = Vec::new();
        for (&pid, e) in t.procs.iter_mut() {
            if e.ppid != self.pid {
                continue;
            }
            e.ppid = reaper;
            e.adopted.store(true, Ordering::Release);
            if e.pdeathsig != 0 && e.status.is_none() {
                let _ = e.signals.push(SigInfo::user(e.pdeathsig, self.pid));
            }
            if let Some(s) = e.status {
                zombies.push((pid, s));
            }
        }
        for (pid, s) in zombies {
            match t.procs.get(&reaper) {
                // An ended child waits for its new parent's wait.
                Some(r) => {
                    let _ = r.signals.push(SigInfo::child(pid, s));
                }
                // init reaps it at once.
                None => {
                    t.procs.remove(&pid);
                }
            }
        }
        if self.is_first() {
            // The first process: nobody waits for it; the run is over.
            self.tree.ended.store(true, Ordering::SeqCst);
        } else if let Some(parent) = t.procs.get(&ppid) {
            let _ = parent.signals.push(SigInfo::child(self.pid, status));
        } else {
            // An orphan: init reaps it.
            t.procs.remove(&self.pid);
        }
    }

    /// PR_SET_PDEATHSIG: the signal this process gets when its parent ends.
    pub fn set_parent_death_signal(&self, sig: u64) {
        if let Some(e) = lock(&self.tree.inner).procs.get_mut(&self.pid) {
            e.pdeathsig = sig;
        }
    }

    /// PR_GET_PDEATHSIG.
    pub fn parent_death_signal(&self) -> u64 {
        lock(&self.tree.inner)
            .procs
            .get(&self.pid)
            .map_or(0, |e| e.pdeathsig)
    }

    /// PR_SET_CHILD_SUBREAPER.
    pub fn set_subreaper(&self, on: bool) {
        if let Some(e) = lock(&self.tree.inner).procs.get_mut(&self.pid) {
            e.subreaper = on;
        }
    }

    /// PR_GET_CHILD_SUBREAPER.
    pub fn subreaper(&self) -> bool {
        lock(&self.tree.inner)
            .procs
            .get(&self.pid)
            .is_some_and(|e| e.subreaper)
    }
}

/// Whether other processes of the run are alive (a pipe's other end, a
/// child to wait for may then change by itself at any moment).
pub fn others_alive(p: &Process) -> bool {
    p.family.as_ref().is_some_and(others_alive_in)
}

/// [`others_alive`] for the process whose place is `f`.
pub fn others_alive_in(f: &Family) -> bool {
    lock(&f.tree.inner).alive > 1
}

/// The calling thread blocks in wait4/waitid/sigsuspend: retried soon at
/// first, less often as the wait goes on.
fn wait_for_tree(p: &mut Process) {
    let now = Instant::now();
    let since = match p.family.as_mut() {
        Some(f) => *f.wait_started.get_or_insert(now),
        None => now,
    };
    let step = (now.duration_since(since) / 4).clamp(WAIT_RECHECK_MIN, WAIT_RECHECK_MAX);
    let _ = super::thread::wait(p, None, Some(now + step));
}

/// A wait ended (with a result or an error).
fn wait_done(p: &mut Process) {
    if let Some(f) = p.family.as_mut() {
        f.wait_started = None;
    }
}

/// The calling process's pid.
pub fn pid_of(p: &Process) -> u64 {
    p.family.as_ref().map_or(super::process::PID, |f| f.pid)
}

/// Whether other processes sent signals [`take_signals`] has not moved in
/// yet (or the run is over for a child): the host's poller then leaves the
/// call to the exit path, which delivers them.
pub fn signals_waiting(p: &Process) -> bool {
    p.family.as_ref().is_some_and(|f| {
        f.signals.waiting() || (!f.is_first() && f.tree.ended.load(Ordering::Relaxed))
    })
}

/// Says whether the process waits in a call (one that is made again until
/// it is ready, or a sleep): the run's other processes see it in /proc as
/// sleeping ('S') then, else running ('R'). It showed 'S' always, so a
/// process that waits for another to block before signalling it (LTP's
/// TST_PROCESS_STATE_WAIT) signalled too early: the handler ran before the
/// call, which then waited for good (epoll_wait08).
pub fn set_asleep(p: &Process, asleep: bool) {
    // A plain load first: this runs after every host-served call.
    if let Some(f) = p
        .family
        .as_ref()
        .filter(|f| f.asleep.load(Ordering::Relaxed) != asleep)
    {
        f.asleep.store(asleep, Ordering::Relaxed);
    }
}

/// After its parent ended: the parent id the in-guest getppid answers
/// from the fast-path data page becomes the new one.
pub fn refresh_ppid(p: &Process, mem: &mut GuestMemory) {
    let Some(f) = p.family.as_ref() else {
        return;
    };
    // A plain load first: this runs after every host-served call.
    if f.adopted.load(Ordering::Relaxed) && f.adopted.swap(false, Ordering::Acquire) {
        let at = crate::abi::FAST_DATA_ADDR + crate::abi::fast::PPID;
        if let Err(e) = mem.kernel_write_u64(at, f.ppid()) {
            tracing::warn!("cannot update the parent id the guest reads: {e}");
        }
    }
}

/// Moves the signals other processes sent into the process (see
/// `signal::send_self`) and stops it if one of them (or one it sent itself)
/// says so; called before and after every system call the host serves.
pub fn take_signals(p: &mut Process) {
    take_sent(p);
    stop_if_asked(p);
}

/// Moves the signals other processes sent into the process (see
/// [`take_signals`]).
fn take_sent(p: &mut Process) {
    let Some(f) = p.family.as_ref() else {
        return;
    };
    if !f.signals.waiting() && (f.is_first() || !f.tree.ended.load(Ordering::Relaxed)) {
        return;
    }
    let mut taken = f.signals.take();
    if !f.is_first() && f.tree.ended.load(Ordering::Relaxed) {
        // The run is over: children end with it.
        let _ = taken.push(SigInfo::kernel(SIGKILL));
    }
    // Lowest number first; one handler at a time, the rest wait in the
    // process's queue for the handler's return (see `signal::send`).
    while let Some(info) = taken.take(u64::MAX, 0) {
        let _ = super::signal::send(p, info);
        if p.exit_status.is_some() {
            return;
        }
    }
}

/// The wait status of a process that exited with `code` (0..=255).
pub fn exit_status(code: i32) -> i32 {
    (code & 0xff) << 8
}

/// The wait status of a process killed by `sig`.
pub fn killed_status(sig: i32) -> i32 {
    sig & 0x7f
}

/// What the run loop needs to start a child (see `machine::children`).
#[derive(Debug)]
pub struct ForkReq {
    /// The child's place in the tree (its pid is already the parent's result).
    pub family: Family,
    /// Its stack pointer (0: the parent's).
    pub stack: u64,
    /// Its TLS base, if CLONE_SETTLS.
    pub tls: Option<u64>,
    /// CLONE_CHILD_SETTID: where the child's memory gets its tid.
    pub set_tid: Option<u64>,
    /// CLONE_CHILD_CLEARTID address.
    pub clear_tid: u64,
    /// CLONE_VFORK: the child borrows its copy of the caller's memory
    /// rather than being charged for it (`GuestMemory::borrow_budget`), and
    /// the caller waits until the child execs or ends.
    pub vfork: bool,
    /// CLONE_VM (with CLONE_VFORK): the child's stores into its memory are
    /// the caller's (`GuestMemory::take_vfork_stores`).
    pub shares_memory: bool,
}

static NOTE_SHARED_VM: AtomicBool = AtomicBool::new(false);
static NOTE_NO_TREE: AtomicBool = AtomicBool::new(false);
static NOTE_LIMIT: AtomicBool = AtomicBool::new(false);

/// Logs `msg` (shown by `-v`) the first time only.
fn note(said: &AtomicBool, msg: &str) {
    if !said.swap(true, Ordering::Relaxed) {
        tracing::debug!("{msg}");
    }
}

/// fork, vfork and clone/clone3 without CLONE_THREAD: a new process.
/// `flags` are clone's. The child is a copy of the caller, memory included.
/// With CLONE_VFORK the calling thread waits until the child execs or ends,
/// and with CLONE_VM too (vfork, posix_spawn) what the child stored in its
/// copy is then copied into the caller's memory, as if it had run there
/// (see `machine::vfork`). A CLONE_VFORK child is not charged for the copy
/// against --memory until it forks in turn; its execve or exit gives the
/// copy back (see `GuestMemory::borrow_budget`).
pub(super) fn fork(
    p: &mut Process,
    mem: &mut GuestMemory,
    flags: u64,
    stack: u64,
    ptid: u64,
    ctid: u64,
    tls: u64,
) -> SysResult {
    if flags & !PROCESS_FLAGS != 0 || flags & CLONE_THREAD != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & CLONE_VM != 0 && flags & CLONE_VFORK == 0 {
        // Two processes sharing one memory would need one VM for both.
        note(&NOTE_SHARED_VM, "clone with CLONE_VM but neither CLONE_VFORK nor CLONE_THREAD is not supported (ENOSYS)");
        return Err(Errno::ENOSYS);
    }
    let Some(family) = p.family.as_ref() else {
        note(
            &NOTE_NO_TREE,
            "fork: a program started up to a chosen symbol cannot make child processes; the call returns ENOSYS",
        );
        return Err(Errno::ENOSYS);
    };
    let child = match family.new_child() {
        Ok(c) => c,
        Err(e) => {
            note(
                &NOTE_LIMIT,
                "fork refused: --max-processes reached (the call returns EAGAIN)",
            );
            return Err(e);
        }
    };
    let pid = child.pid;
    if flags & CLONE_PARENT_SETTID != 0 {
        if let Err(f) = mem.write_u32(ptid, pid as u32) {
            child.abandon();
            return Err(f.into());
        }
    }
    let (tls, clear_tid) = super::thread::tls_and_clear_tid(flags, tls, ctid);
    p.sched = Some(Sched::Fork(Box::new(ForkReq {
        family: child,
        stack,
        tls,
        set_tid: (flags & CLONE_CHILD_SETTID != 0).then_some(ctid),
        clear_tid,
        vfork: flags & CLONE_VFORK != 0,
        shares_memory: flags & CLONE_VM != 0,
    })));
    Ok(pid)
}

/// Implements fork(2).
fn sys_fork(p: &mut Process, mem: &mut GuestMemory, _: &Args) -> SysResult {
    fork(p, mem, SIGCHLD, 0, 0, 0, 0)
}

/// Implements vfork(2): as clone(CLONE_VM | CLONE_VFORK), see [`fork`].
fn sys_vfork(p: &mut Process, mem: &mut GuestMemory, _: &Args) -> SysResult {
    fork(p, mem, CLONE_VM | CLONE_VFORK | SIGCHLD, 0, 0, 0, 0)
}

/// Sends `sig` to the processes `pid` selects as kill(2) does (SI_USER with
/// the caller's pid); the caller (if selected) through `send_self`. ESRCH
/// when none.
pub(super) fn kill(p: &mut Process, pid: i64, sig: u64) -> SysResult {
    if !(0..=64).contains(&sig) {
        return Err(Errno::EINVAL);
    }
    let me = pid_of(p);
    let mut targets = Vec::new();
    let mut self_too = false;
    match p.family.as_ref() {
        None => self_too = pid == me as i64 || pid == 0 || pid == -1 || pid == -(me as i64),
        Some(f) => {
            let t = lock(&f.tree.inner);
            let group = t.procs.get(&me).map_or(me, |e| e.pgid);
            for (&q, e) in &t.procs {
                if e.status.is_some() {
                    continue;
                }
                let hit = match pid {
                    -1 => true,
                    0 => e.pgid == group,
                    x if x < 0 => e.pgid == x.unsigned_abs(),
                    x => q == x as u64,
                };
                if !hit {
                    continue;
                }
                if q == me {
                    self_too = true;
                } else {
                    targets.push(e.signals.clone());
                }
            }
        }
    }
    if !self_too && targets.is_empty() {
        // The first process's parent, pid 1, is outside the sandbox: it is
        // alive for as long as the run lasts (signal 0 succeeds, as for a
        // parent of the same user on Linux), but no signal reaches it.
        return match pid == super::process::PPID as i64 {
            true if sig == 0 => Ok(0),
            true => Err(Errno::EPERM),
            false => Err(Errno::ESRCH),
        };
    }
    if sig != 0 {
        for t in targets {
            let _ = t.push(SigInfo::user(sig, me));
        }
    }
    if self_too {
        super::signal::send_self(p, sig)?;
    }
    Ok(0)
}

/// Whether process group `pgid` has a live member in session `sid` (a
/// terminal's foreground group must, TIOCSPGRP).
pub(super) fn group_in_session(p: &Process, pgid: u64, sid: u64) -> bool {
    match p.family.as_ref() {
        None => pgid == pid_of(p),
        Some(f) => lock(&f.tree.inner)
            .procs
            .values()
            .any(|e| e.status.is_none() && e.pgid == pgid && e.sid == sid),
    }
}

/// Sends the signal `info` describes (sigqueue) to process `pid`, another
/// process of the run. ESRCH when there is none; EAGAIN when its queue is full.
pub(super) fn queue_to(p: &Process, pid: u64, info: SigInfo) -> SysResult {
    let Some(f) = p.family.as_ref() else {
        return Err(Errno::ESRCH);
    };
    let target = lock(&f.tree.inner)
        .procs
        .get(&pid)
        .filter(|e| e.status.is_none())
        .map(|e| e.signals.clone())
        .ok_or(Errno::ESRCH)?;
    if info.signo != 0 {
        target.push(info)?;
    }
    Ok(0)
}

/// Implements rt_sigsuspend(2): waits, with `mask` as the signal mask,
/// until a signal with a handler arrives (then EINTR and the handler runs).
/// While it waits the call is made again every few milliseconds, taking
/// the signals other processes sent (`take_signals`) each time.
fn sys_rt_sigsuspend(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let r = rt_sigsuspend_once(p, mem, a);
    if !matches!(p.sched, Some(Sched::Retry(_))) {
        wait_done(p);
    }
    r
}

fn rt_sigsuspend_once(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[1] != 8 {
        return Err(Errno::EINVAL);
    }
    // A signal the suspend mask lets through ends it (EINTR); its handler
    // runs under that mask and sigreturn restores the one from before.
    super::signal::take_under_mask(p, mem.read_u64(a[0])?)?;
    wait_for_tree(p);
    Ok(0)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 130, name: "rt_sigsuspend", handler: sys_rt_sigsuspend, support: Support::Partial,
        note: "wakes for signals from other processes and itself, looked at every 2 ms" },
    SyscallEntry { nr: 57, name: "fork", handler: sys_fork, support: Support::Partial,
        note: "the child is a VM with a copy of the populated memory, on its own host thread (not under forkvm serve); --max-processes limits them (EAGAIN)" },
    SyscallEntry { nr: 58, name: "vfork", handler: sys_vfork, support: Support::Partial,
        note: "the child is a VM over a copy of memory, lent (not charged against --memory) until it execs, exits or forks; the calling thread waits until it execs or exits, then gets the bytes it stored (within the parent's mappings; mappings it made or removed are not carried over)" },
    SyscallEntry { nr: 61, name: "wait4", handler: sys_wait4, support: Support::Partial,
        note: "exit and kill statuses (none kept when SIGCHLD is ignored), WUNTRACED and WCONTINUED; rusage holds an ended child's CPU time (with its waited-for children's) as user time" },
    SyscallEntry { nr: 109, name: "setpgid", handler: sys_setpgid, support: Support::Full, note: "" },
    SyscallEntry { nr: 112, name: "setsid", handler: sys_setsid, support: Support::Full, note: "" },
    SyscallEntry { nr: 247, name: "waitid", handler: sys_waitid, support: Support::Partial,
        note: "P_ALL, P_PID, P_PGID, P_PIDFD (a non-blocking pidfd: EAGAIN); WEXITED, WSTOPPED, WCONTINUED, WNOWAIT; rusage as wait4's" },
];

#[cfg(test)]
mod tests;
