//! The Linux system-call personality: process state, the syscall table (as
//! data) and dispatch. One file per syscall family; every handler has the
//! same signature and is pure host code over [`Process`] and
//! [`GuestMemory`], so it can be tested without a VM.

pub mod child;
pub mod copy_range;
pub mod epoll;
pub mod errno;
pub mod event;
pub mod exec;
pub mod exitless;
mod fasync;
pub mod fdtable;
pub mod fs;
pub mod host_socket;
pub mod inet;
pub mod inotify;
pub mod io;
pub mod ioctl;
pub mod locks;
pub mod loopback;
pub mod mem;
pub mod names;
pub mod net;
pub mod net_recv;
pub mod netdev;
pub mod netlink;
pub mod pidfd;
pub mod pipe;
pub mod poll;
pub mod prctl;
pub mod process;
pub mod procfs;
pub mod pty;
mod served;
pub mod shared_futex;
pub mod signal;
pub mod signalfd;
pub mod sockopt;
pub mod sysctl;
pub mod sysv_shm;
pub mod table;
pub mod thread;
pub mod time;
pub mod trace;
pub mod udp;
pub mod unix_dgram;
pub mod unix_names;
pub mod unix_socket;
pub mod urgent;
pub mod xattr;

use crate::memory::{AddressSpace, Fault, GuestMemory};
pub use errno::Errno;
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

/// What a handler returns: the value for RAX, or an errno (returned as `-errno`).
pub type SysResult = Result<u64, Errno>;

/// The six syscall argument registers (rdi, rsi, rdx, r10, r8, r9).
pub type Args = [u64; 6];

/// Every syscall handler has this signature. "Implements xyz(2)" in its doc.
pub type Handler = fn(&mut Process, &mut GuestMemory, &Args) -> SysResult;

impl From<Fault> for Errno {
    fn from(_: Fault) -> Self {
        Errno::EFAULT
    }
}

/// How the program asked to be configured: the sandbox policy for one process.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Host directories (or files) the guest may read, at the same path.
    pub allow_read: Vec<PathBuf>,
    /// Host directories the guest may also create, write, rename and delete in.
    pub allow_write: Vec<PathBuf>,
    /// Print one line per syscall to stderr.
    pub trace_syscalls: bool,
}

/// Saved `rt_sigaction` state for one signal (recorded; delivery comes later).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SigAction {
    /// Handler address (SIG_DFL = 0, SIG_IGN = 1).
    pub handler: u64,
    /// SA_* flags.
    pub flags: u64,
    /// SA_RESTORER trampoline.
    pub restorer: u64,
    /// Signals blocked while the handler runs.
    pub mask: u64,
}

/// The emulated kernel's view of the one process running in a VM.
pub struct Process {
    /// What the guest may do.
    pub policy: Policy,
    /// What `-v` already said about refusals, and paths denied (for hints).
    pub notes: trace::Notes,
    /// Open files.
    pub fds: fdtable::FdTable,
    /// brk and mmap bookkeeping of the guest address space.
    pub mm: AddressSpace,
    /// Guest working directory (absolute, no trailing slash except "/").
    pub cwd: Vec<u8>,
    /// The host directory the working directory is, when it is one (see
    /// `fs/moved.rs`: `cwd` is found again from it after a rename).
    pub cwd_dir: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// The program path as the guest sees it (/proc/self/exe): canonical,
    /// in the guest's namespace.
    pub exe_path: String,
    /// The program's file on the host (crash reports read it; opening
    /// /proc/self/exe reaches it). The same path as `exe_path` but where
    /// the file lives in a private /tmp or a fork's copy of a write root.
    pub exe_host: String,
    /// Current FS base (TLS pointer).
    pub fs_base: u64,
    /// FS base the run loop must load into the vCPU before resuming.
    pub pending_fs_base: Option<u64>,
    /// Set by exit/exit_group: the process is done with this status.
    pub exit_status: Option<i32>,
    /// Set with `exit_status` when a signal's default action ended the process.
    pub killed_by: Option<i32>,
    /// A signal whose handler runs when the syscall returns (the run loop
    /// delivers it), with what it carries.
    pub pending_signal: Option<signal::SigInfo>,
    /// The running thread's id.
    pub tid: u64,
    /// The other threads.
    pub threads: thread::Threads,
    /// What the run loop must do when the current syscall returns.
    pub sched: Option<thread::Sched>,
    /// The running thread is waiting in a syscall until this deadline (None inside: forever).
    pub waiting: Option<Option<std::time::Instant>>,
    /// FIFO opens waiting for their partner, one per waiting thread (see `fs::fifo`).
    pub fifo_waits: Vec<fs::FifoWait>,
    /// Blocking writes to pipes and stream sockets under way, one per
    /// waiting thread: what they sent so far (see `io::do_write`).
    pub writes: Vec<io::WriteProgress>,
    /// ITIMER_REAL (setitimer/alarm): next expiry and period (zero: one shot).
    pub itimer: Option<(std::time::Instant, std::time::Duration)>,
    /// ITIMER_VIRTUAL and ITIMER_PROF: the process CPU time at which each
    /// next expires, and its period (see `time::cpu_time`).
    pub cpu_itimers: [Option<(std::time::Duration, std::time::Duration)>; 2],
    /// A stop signal took effect: the process stops when the current call
    /// ends (see `child::stop_if_asked`).
    pub stopping: Option<i32>,
    /// What prctl set (see `prctl::Settings`).
    pub prctl: prctl::Settings,
    /// Resource limits the program lowered (soft, hard), by resource;
    /// the others are forkvm's (see `process::rlimit`).
    pub rlimits: [Option<(u64, u64)>; process::RLIMITS],
    /// The CPU second RLIMIT_CPU's last SIGXCPU was sent in.
    pub xcpu_sent: u64,
    /// Signals sent while blocked (or while another handler was due),
    /// waiting to be unblocked or taken, each with its siginfo.
    pub sigqueue: signal::Pending,
    /// Those of `sigqueue` that a timer sent while blocked: sigreturn leaves them
    /// for the next call that unblocks them (see `signal::sigreturn`).
    pub timer_blocked: u64,
    /// set_tid_address pointer.
    pub clear_child_tid: u64,
    /// set_robust_list head.
    pub robust_list: u64,
    /// Signal dispositions, indexed by signal number - 1.
    pub sigactions: [SigAction; 64],
    /// Blocked-signal mask.
    pub sigmask: u64,
    /// The mask the next signal frame saves instead of `sigmask`: set by a
    /// call that waited under a mask of its own (`signal::take_under_mask`).
    pub frame_mask: Option<u64>,
    /// The mask from before the call the running thread waits in under a
    /// mask of its own (`signal::take_under_mask`), put back when the wait
    /// ends (`signal::end_wait_mask`).
    pub wait_mask: Option<u64>,
    /// The running thread's wait on a futex in shared memory, registered
    /// with the run so that another process's FUTEX_WAKE finds it (see
    /// `shared_futex`); dropped when the wait ends.
    pub shared_futex: Option<std::sync::Arc<shared_futex::Waiter>>,
    /// The running thread's sigaltstack (ss_sp, ss_flags, ss_size); the
    /// others keep theirs in their `thread::ThreadCtx`.
    pub altstack: (u64, i32, u64),
    /// Thread name (prctl PR_SET_NAME).
    pub comm: [u8; 16],
    /// When the process started (for CLOCK_PROCESS_CPUTIME_ID and friends).
    pub started: Instant,
    /// CPU time of the children it waited for (with their own waited-for
    /// children's), for getrusage(RUSAGE_CHILDREN) and times' tms_cutime.
    pub children_cpu: std::time::Duration,
    /// Unknown syscalls already logged, so each is logged once.
    pub unknown_logged: HashSet<u64>,
    /// Calls completed without waiting, by any thread: a thread whose wait
    /// last looked at an older count may find something ready now
    /// (`thread::Threads::take_next`).
    pub progress: u64,
    /// Its side of being woken by the run's other processes (`child::wake`).
    pub waiter: child::Waiter,
    /// Time calls (clock_gettime, gettimeofday, time) the host answered for
    /// this copy of the process: from the second on, the vDSO's time base
    /// is refreshed (see `crate::clock::refresh_page`).
    pub time_reads: u32,
    /// POSIX timers (timer_create).
    pub posix_timers: time::posix::Timers,
    /// CPU time of each guest thread (counted at thread switches).
    pub thread_cpu: time::posix::ThreadCpu,
    /// The private /tmp and /dev/shm (see `fs::PrivateTmp`).
    pub tmp: fs::PrivateTmp,
    /// Outbound connections the process may make (`--allow-connect`).
    pub outbound: host_socket::Outbound,
    /// Its place in the run's process tree (None: no child processes, as in serve).
    pub family: Option<child::Family>,
    /// Its POSIX record locks (never copied: a child or fork holds none).
    pub record_locks: locks::RecordLocks,
    /// Its nice value (setpriority): remembered and inherited, not enforced
    /// (one vCPU per process).
    pub nice: i32,
    /// The SysV shared memory segments it has attached.
    pub shm: sysv_shm::Attachments,
}

/// A process's name after it execs `path`, as Linux names it: the last
/// component of the path given to execve (a symlink's or a script's own
/// name, not what it leads to), 15 bytes at most.
pub fn comm_of(path: &[u8]) -> [u8; 16] {
    let mut comm = [0u8; 16];
    let base = path.rsplit(|&b| b == b'/').next().unwrap_or(b"");
    let n = base.len().min(15);
    comm[..n].copy_from_slice(&base[..n]);
    comm
}

impl Process {
    /// A fresh process with stdio open, at `cwd`, running `exe_path`.
    pub fn new(policy: Policy, mm: AddressSpace, cwd: String, exe_path: String) -> Self {
        let comm = comm_of(exe_path.as_bytes());
        Self {
            policy,
            notes: trace::Notes::default(),
            fds: fdtable::FdTable::with_stdio(),
            mm,
            cwd: cwd.into_bytes(),
            cwd_dir: None,
            exe_host: exe_path.clone(),
            exe_path,
            fs_base: 0,
            pending_fs_base: None,
            exit_status: None,
            killed_by: None,
            pending_signal: None,
            sigqueue: signal::Pending::default(),
            timer_blocked: 0,
            itimer: None,
            cpu_itimers: [None; 2],
            stopping: None,
            prctl: prctl::Settings::default(),
            rlimits: [None; process::RLIMITS],
            xcpu_sent: 0,
            tid: process::PID,
            threads: thread::Threads::default(),
            sched: None,
            waiting: None,
            writes: Vec::new(),
            fifo_waits: Vec::new(),
            clear_child_tid: 0,
            robust_list: 0,
            sigactions: [SigAction::default(); 64],
            sigmask: 0,
            frame_mask: None,
            wait_mask: None,
            shared_futex: None,
            altstack: signal::NO_ALTSTACK,
            comm,
            started: Instant::now(),
            children_cpu: std::time::Duration::ZERO,
            unknown_logged: HashSet::new(),
            progress: 0,
            waiter: Default::default(),
            time_reads: 0,
            posix_timers: time::posix::Timers::default(),
            thread_cpu: time::posix::ThreadCpu::default(),
            tmp: fs::PrivateTmp::new(),
            outbound: host_socket::Outbound::default(),
            family: None,
            record_locks: locks::RecordLocks::default(),
            nice: process::host_nice(),
            shm: sysv_shm::Attachments::default(),
        }
    }
}

impl Process {
    /// A copy for a fork: equal state, nothing shared with `self`.
    pub fn fork_copy(&self) -> Result<Self, Errno> {
        Ok(Self {
            policy: self.policy.clone(),
            notes: self.notes.clone(),
            fds: self.fds.fork_copy()?,
            mm: self.mm.clone(),
            cwd: self.cwd.clone(),
            cwd_dir: self.cwd_dir.clone(),
            exe_path: self.exe_path.clone(),
            exe_host: self.exe_host.clone(),
            fs_base: self.fs_base,
            pending_fs_base: None,
            exit_status: None,
            killed_by: None,
            pending_signal: None,
            sigqueue: signal::Pending::default(),
            timer_blocked: 0,
            itimer: None,
            cpu_itimers: [None; 2],
            stopping: None,
            prctl: self.prctl,
            rlimits: self.rlimits,
            xcpu_sent: self.xcpu_sent,
            tid: self.tid,
            threads: self.threads.clone(),
            sched: None,
            waiting: None,
            writes: Vec::new(),
            fifo_waits: Vec::new(),
            clear_child_tid: self.clear_child_tid,
            robust_list: self.robust_list,
            sigactions: self.sigactions,
            sigmask: self.sigmask,
            frame_mask: None,
            wait_mask: None,
            shared_futex: None,
            altstack: self.altstack,
            comm: self.comm,
            started: self.started,
            children_cpu: std::time::Duration::ZERO,
            unknown_logged: self.unknown_logged.clone(),
            progress: self.progress,
            waiter: Default::default(),
            time_reads: 0,
            posix_timers: time::posix::Timers::default(),
            thread_cpu: time::posix::ThreadCpu::default(),
            tmp: self.tmp.fork_copy(&self.policy)?,
            outbound: self.outbound.clone(),
            family: None,
            record_locks: locks::RecordLocks::default(),
            nice: self.nice,
            shm: self.shm.fork_copy(),
        })
    }
}

/// Where unit tests make host trees to allow: outside the host's /tmp when
/// they can, since a root below /tmp is mounted in the guest's private /tmp
/// and the directories above it are then the guest's, not the host's.
#[cfg(test)]
pub(crate) fn test_scratch() -> std::path::PathBuf {
    let var_tmp = std::path::Path::new("/var/tmp");
    if var_tmp.is_dir() {
        var_tmp.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// A process with `policy` and 8 MiB of guest memory (no mapping checks),
/// for handler unit tests.
#[cfg(test)]
pub(crate) fn test_setup(policy: Policy) -> (Process, GuestMemory) {
    let p = Process::new(
        policy,
        AddressSpace::new(0x40_0000, 0x70_0000),
        "/".into(),
        "/prog".into(),
    );
    (p, GuestMemory::new(8 << 20).expect("guest memory"))
}

/// As [`test_setup`] with mapping checks on and one writable page mapped at
/// the returned address.
#[cfg(test)]
pub(crate) fn test_process() -> (Process, GuestMemory, u64) {
    let (p, mut m) = test_setup(Policy::default());
    m.track_mappings();
    let buf = crate::abi::USER_BASE;
    m.map_user(
        buf,
        buf + 0x1000,
        crate::memory::Rights {
            read: true,
            write: true,
        },
    );
    (p, m, buf)
}

/// Calls handler `h` with up to six arguments (the rest 0).
#[cfg(test)]
pub(crate) fn test_call(p: &mut Process, m: &mut GuestMemory, h: Handler, a: &[u64]) -> SysResult {
    let mut args = [0u64; 6];
    args[..a.len()].copy_from_slice(a);
    h(p, m, &args)
}

/// Runs syscall `nr` with `args`; returns the value for RAX (negative errno on failure).
pub fn dispatch(p: &mut Process, mem: &mut GuestMemory, nr: u64, args: &Args) -> u64 {
    child::take_signals(p);
    let r = dispatch_leaving_signals(p, mem, nr, args);
    // Signals that arrived during the call (one that ended a sleep with
    // EINTR) are handled on its way out, as Linux does on the return to
    // user mode, not after whatever the program does next.
    child::take_signals(p);
    child::refresh_ppid(p, mem);
    r
}

/// As [`dispatch`], leaving the signals other processes sent where they
/// wait: the host's poller serves calls this way, since only the run loop
/// can deliver a signal (it takes them at the next exit). Taken by the
/// poller, a child's SIGCHLD became a handler run late, after whatever the
/// program did without an exit meanwhile.
pub fn dispatch_leaving_signals(
    p: &mut Process,
    mem: &mut GuestMemory,
    nr: u64,
    args: &Args,
) -> u64 {
    let entry = table::lookup(nr);
    p.frame_mask = None;
    child::note_wake_epoch(p);
    let was_waiting = p.waiting.is_some();
    let result = match entry {
        // A signal from another process ended this one.
        _ if p.exit_status.is_some() => Ok(0),
        Some(e) => (e.handler)(p, mem, args),
        // forkvm's "ready" outside a run that waits for it (plain `forkvm run`): a no-op.
        None if nr == crate::abi::hypercall::READY => Ok(0),
        None => {
            if p.unknown_logged.insert(nr) {
                let name = names::name(nr).unwrap_or("(not a Linux syscall)");
                tracing::info!("unknown syscall {name} ({nr}): returning -ENOSYS");
            }
            Err(Errno::ENOSYS)
        }
    };
    // A call that did not find itself waiting again ends the thread's wait
    // (whichever path served it: an exit or the poller).
    if matches!(p.sched, Some(thread::Sched::Retry(_))) {
        // Nothing ready yet: the call is made again later (its 0 is no
        // result), so a trace shows the wait once, not each look.
        if !was_waiting {
            trace::waits(p, mem, nr, args);
            child::set_asleep(p, true);
        }
    } else {
        p.waiting = None;
        signal::end_wait_mask(p);
        p.shared_futex = None;
        child::set_asleep(p, false);
        p.progress = p.progress.wrapping_add(1);
        child::wake_others_after(p, nr, args);
        trace::after(p, mem, nr, args, &result);
    }
    match result {
        Ok(v) => v,
        Err(e) => (-(e.0 as i64)) as u64,
    }
}
