//! Which system calls a host poller may answer without a VM exit (see
//! `crate::machine::exitless` for the mechanism).
//!
//! A poller serves a call on its own thread while the vCPU keeps running, so
//! it may only take calls that finish at once and touch nothing but the
//! process's files and signal bookkeeping: no blocking, no signal sent, no
//! scheduling, no change to the address space or the registers. Those are the calls listed in [`EXITLESS`],
//! on descriptors of the kinds [`fd_ok`] accepts (host files and directories,
//! /dev/null and friends, the host's standard output and error). Everything
//! else is declined and takes the exit, where the run loop does what a call
//! may need after it. The answer is the same either way: both paths call
//! [`super::dispatch`] with the same checks.

use super::fdtable::{lock, FileKind};
use super::{Args, Process};
use crate::memory::GuestMemory;

/// What a call needs for a poller to take it.
#[derive(Clone, Copy)]
enum Needs {
    /// Nothing beyond being listed (path calls, fd-less calls).
    Nothing,
    /// Its first argument is a descriptor of an accepted kind.
    Fd,
    /// fcntl: an accepted descriptor and a command that cannot block.
    Fcntl,
    /// rt_sigprocmask: no blocked signal is waiting (so unblocking one
    /// cannot make it due, which only the run loop can deliver).
    NoWaitingSignal,
}

/// The calls a poller may answer (x86-64 numbers) and what each needs.
const EXITLESS: &[(u64, &str, Needs)] = &[
    (0, "read", Needs::Fd),
    (1, "write", Needs::Fd),
    (2, "open", Needs::Nothing),
    (3, "close", Needs::Fd),
    (4, "stat", Needs::Nothing),
    (5, "fstat", Needs::Fd),
    (6, "lstat", Needs::Nothing),
    (8, "lseek", Needs::Fd),
    (13, "rt_sigaction", Needs::Nothing),
    (14, "rt_sigprocmask", Needs::NoWaitingSignal),
    (16, "ioctl", Needs::Fd),
    (17, "pread64", Needs::Fd),
    (18, "pwrite64", Needs::Fd),
    (19, "readv", Needs::Fd),
    (20, "writev", Needs::Fd),
    (21, "access", Needs::Nothing),
    (63, "uname", Needs::Nothing),
    (72, "fcntl", Needs::Fcntl),
    (79, "getcwd", Needs::Nothing),
    (89, "readlink", Needs::Nothing),
    (99, "sysinfo", Needs::Nothing),
    (131, "sigaltstack", Needs::Nothing),
    (217, "getdents64", Needs::Fd),
    (221, "fadvise64", Needs::Fd),
    (257, "openat", Needs::Nothing),
    (262, "newfstatat", Needs::Nothing),
    (267, "readlinkat", Needs::Nothing),
    (269, "faccessat", Needs::Nothing),
    (295, "preadv", Needs::Fd),
    (296, "pwritev", Needs::Fd),
    (332, "statx", Needs::Nothing),
    (439, "faccessat2", Needs::Nothing),
];

/// fcntl commands that neither block nor touch locks: F_GETFD, F_SETFD, F_GETFL.
const FCNTL_OK: [u64; 3] = [1, 2, 3];

/// The bitmap the guest's dispatcher consults before it posts a call
/// (`forkvm_abi::fast::CALL_MAP`): bit `nr` set for every call in [`EXITLESS`].
pub fn call_map() -> [u8; forkvm_abi::fast::CALL_MAP_SIZE as usize] {
    let mut map = [0u8; forkvm_abi::fast::CALL_MAP_SIZE as usize];
    for &(nr, _, _) in EXITLESS {
        map[(nr / 8) as usize] |= 1 << (nr % 8);
    }
    map
}

/// Whether descriptor `fd` is of a kind a poller may use: a host file or
/// directory, /dev/null, /dev/zero, /dev/urandom, or the host's stdout or
/// stderr. Pipes, sockets, eventfds and stdin may block or wake others.
fn fd_ok(p: &Process, fd: u64) -> bool {
    let Ok(fd) = i32::try_from(fd) else {
        return false;
    };
    let Ok(file) = p.fds.get(fd) else {
        // A bad descriptor: EBADF is as quick to give here as by an exit.
        return true;
    };
    let f = lock(&file);
    matches!(
        f.kind,
        FileKind::File { .. }
            | FileKind::Dir { .. }
            | FileKind::PathOnly { .. }
            | FileKind::Null
            | FileKind::Zero
            | FileKind::Urandom
            | FileKind::Stdout
            | FileKind::Stderr
    )
}

/// Whether a poller may answer call `nr` with `args` in `p` now.
pub fn may_serve(p: &Process, nr: u64, args: &Args) -> bool {
    let Some(&(_, _, needs)) = EXITLESS.iter().find(|(n, _, _)| *n == nr) else {
        return false;
    };
    if p.exit_status.is_some() || p.pending_signal.is_some() || p.sched.is_some() {
        return false;
    }
    match needs {
        Needs::Nothing => true,
        Needs::Fd => fd_ok(p, args[0]),
        Needs::Fcntl => FCNTL_OK.contains(&args[1]) && fd_ok(p, args[0]),
        Needs::NoWaitingSignal => p.blocked_pending == 0,
    }
}

/// Serves call `nr` for a poller: `Some(answer)` when it may (see
/// [`may_serve`]), `None` when the call must take the exit.
pub fn serve(p: &mut Process, mem: &mut GuestMemory, nr: u64, args: &Args) -> Option<u64> {
    if !may_serve(p, nr, args) {
        return None;
    }
    Some(super::dispatch(p, mem, nr, args))
}

/// The names of the calls a poller may answer, for `forkvm syscalls`.
pub fn names() -> impl Iterator<Item = &'static str> {
    EXITLESS.iter().map(|&(_, name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

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
