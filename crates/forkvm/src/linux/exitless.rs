//! Which system calls a host poller may answer without a VM exit (see
//! `crate::machine::exitless` for the mechanism).
//!
//! A poller serves a call on its own thread while the vCPU keeps running, so
//! it may only take calls that finish at once and touch nothing but the
//! process's files, sockets, memory map and signal bookkeeping: no blocking,
//! no signal sent, no scheduling, no change to the registers. Memory calls
//! (mmap and the like) are bookkeeping plus host `mmap`/`madvise` on guest
//! RAM, which KVM follows while the vCPU runs; a chunk of RAM they map for
//! the first time gets its memory slot at the next entry, and an access to
//! it before that is done by the run loop (`GuestMemory::in_used_chunk`).
//! Those are the calls listed in [`EXITLESS`], on descriptors [`classify`]
//! does not refuse, and a call that finds nothing ready is declined after the
//! fact. Everything else takes the exit, where the run loop does what a call
//! may need after it. The answer is the same either way: both paths call
//! [`super::dispatch`] with the same checks.

use super::fdtable::{lock, FileKind};
use super::thread::Sched;
use super::{Args, Process};
use crate::memory::GuestMemory;

/// What a call needs for a poller to take it.
#[derive(Clone, Copy)]
enum Needs {
    /// Nothing beyond being listed (path calls, fd-less calls).
    Nothing,
    /// Its first argument is a descriptor a poller may use.
    Fd,
    /// Its first argument is any open descriptor, the host's standard
    /// streams included: the call moves no data (a query, a seek), so it
    /// cannot wait on them.
    Query,
    /// As `Fd`; a write to a pipe or stream socket may raise SIGPIPE, which only
    /// the run loop can deliver: unless SIGPIPE is ignored or blocked, or
    /// MSG_NOSIGNAL is in the argument at this index, a send that fails
    /// with EPIPE (it sent nothing) is declined, and the exit makes it again.
    Send(Option<usize>),
    /// As `Fd`; ends a connection (close, shutdown), which the host may
    /// be waiting for (see [`serve`]'s `output_watched`).
    Ends,
    /// fcntl: a command that cannot block (it keeps the descriptor's
    /// flags, as for [`Needs::Query`]).
    Fcntl,
    /// As `Fd`, for a call with a signal mask of its own (epoll_pwait): no
    /// blocked signal is waiting, which that mask could let through (only
    /// the run loop can deliver it).
    FdUnderMask,
    /// clock_gettime of a clock that is not a CPU-time clock: those read
    /// the CPU time of the thread that answers, which must be the vCPU's
    /// (from the poller, process CPU time went backwards).
    WallClock,
    /// rt_sigprocmask: no blocked signal is waiting (so unblocking one
    /// cannot make it due, which only the run loop can deliver).
    NoWaitingSignal,
    /// mmap: anonymous, or of a descriptor (its fifth argument) a poller
    /// may use.
    Map,
}

/// The calls a poller may answer (x86-64 numbers) and what each needs.
const EXITLESS: &[(u64, &str, Needs)] = &[
    (0, "read", Needs::Fd),
    (1, "write", Needs::Send(None)),
    (2, "open", Needs::Nothing),
    (3, "close", Needs::Ends),
    (4, "stat", Needs::Nothing),
    (5, "fstat", Needs::Query),
    (6, "lstat", Needs::Nothing),
    (8, "lseek", Needs::Query),
    (9, "mmap", Needs::Map),
    (10, "mprotect", Needs::Nothing),
    (11, "munmap", Needs::Nothing),
    (12, "brk", Needs::Nothing),
    (13, "rt_sigaction", Needs::Nothing),
    (14, "rt_sigprocmask", Needs::NoWaitingSignal),
    (16, "ioctl", Needs::Query),
    (17, "pread64", Needs::Fd),
    (18, "pwrite64", Needs::Fd),
    (19, "readv", Needs::Fd),
    (20, "writev", Needs::Send(None)),
    (21, "access", Needs::Nothing),
    (25, "mremap", Needs::Nothing),
    (28, "madvise", Needs::Nothing),
    (43, "accept", Needs::Fd),
    (44, "sendto", Needs::Send(Some(3))),
    (45, "recvfrom", Needs::Fd),
    (46, "sendmsg", Needs::Send(Some(2))),
    (47, "recvmsg", Needs::Fd),
    (48, "shutdown", Needs::Ends),
    (51, "getsockname", Needs::Fd),
    (52, "getpeername", Needs::Fd),
    (54, "setsockopt", Needs::Fd),
    (55, "getsockopt", Needs::Fd),
    (63, "uname", Needs::Nothing),
    (72, "fcntl", Needs::Fcntl),
    (79, "getcwd", Needs::Nothing),
    (89, "readlink", Needs::Nothing),
    (96, "gettimeofday", Needs::Nothing),
    (99, "sysinfo", Needs::Nothing),
    (131, "sigaltstack", Needs::Nothing),
    (201, "time", Needs::Nothing),
    (217, "getdents64", Needs::Fd),
    (221, "fadvise64", Needs::Fd),
    (228, "clock_gettime", Needs::WallClock),
    (232, "epoll_wait", Needs::Fd),
    (233, "epoll_ctl", Needs::Fd),
    (257, "openat", Needs::Nothing),
    (262, "newfstatat", Needs::Nothing),
    (267, "readlinkat", Needs::Nothing),
    (269, "faccessat", Needs::Nothing),
    (281, "epoll_pwait", Needs::FdUnderMask),
    (288, "accept4", Needs::Fd),
    (295, "preadv", Needs::Fd),
    (296, "pwritev", Needs::Fd),
    (332, "statx", Needs::Nothing),
    (439, "faccessat2", Needs::Nothing),
];

/// fcntl commands that neither block nor touch locks: F_GETFD, F_SETFD,
/// F_GETFL, F_SETFL.
const FCNTL_OK: [u64; 4] = [1, 2, 3, 4];
/// SIGPIPE.
const SIGPIPE: usize = 13;
/// SIG_IGN.
const SIG_IGN: u64 = 1;
/// MAP_ANONYMOUS.
const MAP_ANONYMOUS: u64 = 0x20;
/// MSG_NOSIGNAL.
const MSG_NOSIGNAL: u64 = 0x4000;

/// The bitmap the guest's dispatcher consults before it posts a call
/// (`forkvm_abi::fast::CALL_MAP`): bit `nr` set for every call in [`EXITLESS`].
pub fn call_map() -> [u8; forkvm_abi::fast::CALL_MAP_SIZE as usize] {
    let mut map = [0u8; forkvm_abi::fast::CALL_MAP_SIZE as usize];
    for &(nr, _, _) in EXITLESS {
        map[(nr / 8) as usize] |= 1 << (nr % 8);
    }
    map
}

/// What a descriptor is to a poller.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FdClass {
    /// Not open: EBADF is as quick to give here as by an exit.
    Bad,
    /// Host files and directories, /dev/null, /dev/zero, /dev/urandom:
    /// calls on them finish at once.
    Plain,
    /// Pipes, eventfd/timerfd/epoll and sockets (all in-process): a call
    /// on them may find nothing ready, and is then declined (see [`serve`]).
    Waitable {
        /// A pipe or stream socket, whose writes may raise SIGPIPE.
        sigpipe: bool,
        /// A virtual TCP socket: its peer, if connected, is the host's end
        /// of a client connection (see [`serve`]'s `output_watched`).
        virtual_tcp: bool,
    },
    /// The host's standard streams: a host read or write may block for
    /// long, and the poller is shared by every VM in the process.
    Refused,
}

fn classify(p: &Process, fd: u64) -> FdClass {
    let Ok(fd) = i32::try_from(fd) else {
        return FdClass::Bad;
    };
    let Ok(file) = p.fds.get(fd) else {
        return FdClass::Bad;
    };
    let f = lock(&file);
    match &f.kind {
        FileKind::File { .. }
        | FileKind::Dir { .. }
        | FileKind::PathOnly { .. }
        | FileKind::Null
        | FileKind::Zero
        | FileKind::Urandom => FdClass::Plain,
        FileKind::Pipe(_) => FdClass::Waitable {
            sigpipe: true,
            virtual_tcp: false,
        },
        FileKind::Event(_) | FileKind::Pty(_) => FdClass::Waitable {
            sigpipe: false,
            virtual_tcp: false,
        },
        FileKind::Socket(s) => FdClass::Waitable {
            sigpipe: s.sigpipe(),
            virtual_tcp: s.inet.is_some() && s.connection(),
        },
        FileKind::Stdin | FileKind::Stdout | FileKind::Stderr => FdClass::Refused,
    }
}

/// How a poller may answer a call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Not at all: the call takes the exit.
    Exit,
    /// As the exit would.
    Serve,
    /// As the exit would, unless it fails with EPIPE, which must raise
    /// SIGPIPE: then it is declined (see [`Needs::Send`]).
    ServeUnlessEpipe,
}

/// Whether a poller may answer call `nr` with `args` in `p` now.
fn may_serve(p: &Process, nr: u64, args: &Args, output_watched: bool) -> Verdict {
    let Some(&(_, _, needs)) = EXITLESS.iter().find(|(n, _, _)| *n == nr) else {
        return Verdict::Exit;
    };
    if p.exit_status.is_some()
        || p.pending_signal.is_some()
        || p.sched.is_some()
        || super::child::signals_waiting(p)
    {
        return Verdict::Exit;
    }
    let usable = || classify(p, args[0]) != FdClass::Refused;
    let serve_if = |ok: bool| if ok { Verdict::Serve } else { Verdict::Exit };
    // The host looks at its client connections only between exits.
    let to_watched_host = |c| {
        matches!(
            c,
            FdClass::Waitable {
                virtual_tcp: true,
                ..
            }
        ) && output_watched
    };
    match needs {
        Needs::Nothing | Needs::Query => Verdict::Serve,
        Needs::Fd => serve_if(usable()),
        Needs::Ends => {
            let c = classify(p, args[0]);
            serve_if(c != FdClass::Refused && !to_watched_host(c))
        }
        Needs::Send(flags) => match classify(p, args[0]) {
            FdClass::Refused => Verdict::Exit,
            c if to_watched_host(c) => Verdict::Exit,
            FdClass::Waitable { sigpipe: true, .. } => {
                let ignored = p.sigactions[SIGPIPE - 1].handler == SIG_IGN
                    || p.sigmask & (1 << (SIGPIPE - 1)) != 0;
                if ignored || flags.is_some_and(|i| args[i] & MSG_NOSIGNAL != 0) {
                    Verdict::Serve
                } else {
                    Verdict::ServeUnlessEpipe
                }
            }
            _ => Verdict::Serve,
        },
        Needs::Fcntl => serve_if(FCNTL_OK.contains(&args[1])),
        Needs::NoWaitingSignal => serve_if(p.sigqueue.is_empty()),
        Needs::WallClock => serve_if(!matches!(args[0] as i32, 2 | 3 | i32::MIN..=-1)),
        Needs::FdUnderMask => serve_if(usable() && p.sigqueue.is_empty()),
        Needs::Map => {
            serve_if(args[3] & MAP_ANONYMOUS != 0 || classify(p, args[4]) != FdClass::Refused)
        }
    }
}

/// What raising a signal changes in a process (see `signal::send_self`),
/// kept to put back when a send that raised SIGPIPE is declined.
struct SignalState {
    pending_signal: Option<super::signal::SigInfo>,
    sigqueue: super::signal::Pending,
    exit_status: Option<i32>,
    killed_by: Option<i32>,
}

impl SignalState {
    fn of(p: &Process) -> Self {
        Self {
            pending_signal: p.pending_signal,
            sigqueue: p.sigqueue.clone(),
            exit_status: p.exit_status,
            killed_by: p.killed_by,
        }
    }

    fn restore(self, p: &mut Process) {
        p.pending_signal = self.pending_signal;
        p.sigqueue = self.sigqueue;
        p.exit_status = self.exit_status;
        p.killed_by = self.killed_by;
    }
}

/// Serves call `nr` for a poller: `Some(answer)` when it may (see
/// [`may_serve`]), `None` when the call must take the exit.
/// `output_watched`: the host stops the run as soon as the program's answer
/// is whole, looking between exits (`Machine::run_until_answered`), so
/// sends and closes on virtual TCP sockets take the exit. Served, they left
/// the host blind until some later exit: node went on with timers and
/// garbage collection after its answer, ~10 ms a request. A call that
/// finds nothing ready (it would wait) is declined after the fact, leaving
/// no trace: waiting calls change nothing but the wait bookkeeping, which is
/// put back, and the exit path then makes the call again and waits.
pub fn serve(
    p: &mut Process,
    mem: &mut GuestMemory,
    nr: u64,
    args: &Args,
    output_watched: bool,
) -> Option<u64> {
    let verdict = may_serve(p, nr, args, output_watched);
    if verdict == Verdict::Exit {
        return None;
    }
    let waiting = p.waiting;
    let signals = SignalState::of(p);
    let answer = super::dispatch_leaving_signals(p, mem, nr, args);
    if verdict == Verdict::ServeUnlessEpipe && answer == (-(super::Errno::EPIPE.0 as i64)) as u64 {
        // Nothing was sent; the exit sends nothing again and raises SIGPIPE.
        signals.restore(p);
        p.waiting = waiting;
        return None;
    }
    if matches!(p.sched, Some(Sched::Retry(_))) {
        p.sched = None;
        p.waiting = waiting;
        return None;
    }
    // As the exit path does; the calling thread spins for this answer, so
    // no guest code reads the time page meanwhile.
    if super::time::after_host_answer(p, mem, nr, false).is_err() {
        tracing::warn!("exitless: cannot write the vDSO's time base");
    }
    if let Some(other) = &p.sched {
        // Not expected of these calls; the run loop acts on it at the next exit.
        tracing::warn!("exitless call {nr} asked the run loop for {other:?}");
    }
    if p.pending_signal.is_some() {
        tracing::warn!("exitless call {nr} raised a signal; delivered at the next exit");
    }
    Some(answer)
}

/// The names of the calls a poller may answer, for `forkvm syscalls`.
pub fn names() -> impl Iterator<Item = &'static str> {
    EXITLESS.iter().map(|&(_, name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write to a stream socket whose peer is gone, with SIGPIPE at its
    /// default (death), is declined without a trace; with MSG_NOSIGNAL it
    /// is answered (EPIPE), and a write to a live peer is answered.
    #[test]
    fn a_send_that_would_raise_sigpipe_is_declined_without_a_trace() {
        let (mut p, mut m, buf) = crate::linux::test_process();
        // socketpair(AF_UNIX, SOCK_STREAM, 0, buf)
        assert_eq!(
            super::super::dispatch(&mut p, &mut m, 53, &[1, 1, 0, buf, 0, 0]),
            0
        );
        let a = u64::from(m.read_u32(buf).unwrap());
        let b = u64::from(m.read_u32(buf + 4).unwrap());
        m.write(buf + 16, b"x").unwrap();
        assert_eq!(
            serve(&mut p, &mut m, 1, &[a, buf + 16, 1, 0, 0, 0], false),
            Some(1)
        );
        assert_eq!(
            super::super::dispatch(&mut p, &mut m, 3, &[b, 0, 0, 0, 0, 0]),
            0
        );
        assert_eq!(
            serve(&mut p, &mut m, 1, &[a, buf + 16, 1, 0, 0, 0], false),
            None
        );
        assert_eq!(
            (
                p.exit_status,
                p.killed_by,
                p.pending_signal,
                p.sigqueue.bits()
            ),
            (None, None, None, 0)
        );
        let epipe = (-(crate::linux::Errno::EPIPE.0 as i64)) as u64;
        // sendto(a, buf+16, 1, MSG_NOSIGNAL, NULL, 0)
        assert_eq!(
            serve(
                &mut p,
                &mut m,
                44,
                &[a, buf + 16, 1, MSG_NOSIGNAL, 0, 0],
                false
            ),
            Some(epipe)
        );
        assert_eq!(p.exit_status, None);
    }

    /// The same for a pipe whose reader is gone: `yes | head -1` ends
    /// `yes` with SIGPIPE, which only the exit path can deliver.
    #[test]
    fn a_pipe_write_that_would_raise_sigpipe_is_declined() {
        let (mut p, mut m, buf) = crate::linux::test_process();
        // pipe(buf)
        assert_eq!(
            super::super::dispatch(&mut p, &mut m, 22, &[buf, 0, 0, 0, 0, 0]),
            0
        );
        let r = u64::from(m.read_u32(buf).unwrap());
        let w = u64::from(m.read_u32(buf + 4).unwrap());
        m.write(buf + 16, b"x").unwrap();
        assert_eq!(
            serve(&mut p, &mut m, 1, &[w, buf + 16, 1, 0, 0, 0], false),
            Some(1)
        );
        assert_eq!(
            super::super::dispatch(&mut p, &mut m, 3, &[r, 0, 0, 0, 0, 0]),
            0
        );
        assert_eq!(
            serve(&mut p, &mut m, 1, &[w, buf + 16, 1, 0, 0, 0], false),
            None
        );
        assert_eq!(
            (p.exit_status, p.killed_by, p.pending_signal),
            (None, None, None)
        );
        // The exit path raises it.
        let epipe = (-(crate::linux::Errno::EPIPE.0 as i64)) as u64;
        assert_eq!(
            super::super::dispatch(&mut p, &mut m, 1, &[w, buf + 16, 1, 0, 0, 0]),
            epipe
        );
        assert_eq!(p.killed_by, Some(SIGPIPE as i32));
    }

    /// While the host watches for the program's answer, what could send or
    /// end it on a virtual TCP socket exits; other sockets are still served.
    #[test]
    fn sends_on_virtual_tcp_exit_while_the_host_watches_for_the_answer() {
        let (mut p, mut m, buf) = crate::linux::test_process();
        // socket(AF_INET, SOCK_STREAM, 0)
        let tcp = super::super::dispatch(&mut p, &mut m, 41, &[2, 1, 0, 0, 0, 0]);
        assert!(tcp < 1024, "socket: {tcp:#x}");
        // socketpair(AF_UNIX, SOCK_STREAM, 0, buf)
        assert_eq!(
            super::super::dispatch(&mut p, &mut m, 53, &[1, 1, 0, buf, 0, 0]),
            0
        );
        let unix = u64::from(m.read_u32(buf).unwrap());
        m.write(buf + 16, b"x").unwrap();
        let write = |fd| [fd, buf + 16, 1, 0, 0, 0];
        assert_eq!(serve(&mut p, &mut m, 1, &write(tcp), true), None);
        assert_eq!(serve(&mut p, &mut m, 48, &[tcp, 1, 0, 0, 0, 0], true), None);
        assert_eq!(serve(&mut p, &mut m, 3, &[tcp, 0, 0, 0, 0, 0], true), None);
        assert_eq!(serve(&mut p, &mut m, 1, &write(unix), true), Some(1));
        // The same calls are served while the host waits for the program
        // to go idle instead.
        assert_ne!(
            serve(&mut p, &mut m, 48, &[tcp, 1, 0, 0, 0, 0], false),
            None
        );
        assert_ne!(
            serve(
                &mut p,
                &mut m,
                44,
                &[tcp, buf + 16, 1, MSG_NOSIGNAL, 0, 0],
                false
            ),
            None
        );
        assert_eq!(
            serve(&mut p, &mut m, 3, &[tcp, 0, 0, 0, 0, 0], false),
            Some(0)
        );
    }

    /// On the host's standard streams, calls that move data exit (a host
    /// pipe or terminal may keep them waiting); queries, seeks and flags
    /// are answered.
    #[test]
    fn standard_streams_are_queried_without_an_exit_and_used_through_one() {
        let (mut p, mut m, buf) = crate::linux::test_process();
        let call = |p: &mut Process, m: &mut GuestMemory, nr, a: [u64; 3]| {
            serve(p, m, nr, &[a[0], a[1], a[2], 0, 0, 0], false)
        };
        assert_eq!(call(&mut p, &mut m, 0, [0, buf, 1]), None, "read stdin");
        assert_eq!(call(&mut p, &mut m, 1, [1, buf, 1]), None, "write stdout");
        assert_eq!(call(&mut p, &mut m, 20, [2, buf, 0]), None, "writev stderr");
        let espipe = (-(crate::linux::Errno::ESPIPE.0 as i64)) as u64;
        assert_eq!(call(&mut p, &mut m, 8, [1, 0, 1]), Some(espipe), "lseek");
        assert_eq!(call(&mut p, &mut m, 5, [2, buf, 0]), Some(0), "fstat");
        assert!(
            call(&mut p, &mut m, 16, [1, 0x5401, buf]).is_some(),
            "TCGETS"
        );
        assert!(call(&mut p, &mut m, 72, [0, 3, 0]).is_some(), "F_GETFL");
        assert_eq!(call(&mut p, &mut m, 72, [0, 7, 0]), None, "F_SETLKW");
    }

    /// mmap's descriptor is its fifth argument (a zero hint is not stdin).
    #[test]
    fn a_file_mapping_is_judged_by_its_descriptor() {
        let (mut p, mut m, buf) = crate::linux::test_process();
        m.write(buf, b"/dev/zero\0").unwrap();
        // openat(AT_FDCWD, "/dev/zero", O_RDONLY)
        let fd = super::super::dispatch(&mut p, &mut m, 257, &[-100i64 as u64, buf, 0, 0, 0, 0]);
        assert!(fd < 1024, "openat: {fd:#x}");
        // mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0)
        let at = serve(&mut p, &mut m, 9, &[0, 4096, 1, 2, fd, 0], false);
        assert!(at.is_some_and(|a| a < u64::MAX - 4096), "{at:?}");
        // The same from stdin exits.
        assert_eq!(
            serve(&mut p, &mut m, 9, &[0, 4096, 1, 2, 0, 0], false),
            None
        );
    }

    #[test]
    fn map_has_exactly_the_listed_calls() {
        let map = call_map();
        for nr in 0..(map.len() as u64 * 8) {
            let set = map[(nr / 8) as usize] & (1 << (nr % 8)) != 0;
            assert_eq!(set, EXITLESS.iter().any(|(n, _, _)| *n == nr), "call {nr}");
        }
    }

    #[test]
    fn names_match_the_syscall_table() {
        for &(nr, name, _) in EXITLESS {
            assert_eq!(super::super::names::name(nr), Some(name), "call {nr}");
        }
    }
}
