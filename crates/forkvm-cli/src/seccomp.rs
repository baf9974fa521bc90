//! Host seccomp: once forkvm has started (the program is loaded, the VMs and
//! threads of `serve` exist), every thread of the process runs under one
//! seccomp-bpf allow-list of the host system calls forkvm needs. It is
//! installed process-wide with TSYNC, and threads started later (vCPU threads
//! of guest threads, blocking-pool threads) inherit it.
//!
//! A call outside the list is trapped (SECCOMP_RET_TRAP): the SIGSYS handler
//! writes one line naming the call to stderr and ends the process with status
//! 159 (128 + SIGSYS). One list serves `run` and `serve`: a guest's calls are
//! served by the same host code in both (files, sockets, threads, exec).
//!
//! The list was found by tracing the whole test suite (`strace -f`) and
//! reading the code; `ioctl` is allowed for the request numbers forkvm uses
//! only (KVM, terminal queries, FIONBIO/FIONREAD, PAGEMAP_SCAN), and `prctl`,
//! `socket`, `socketpair` for the first arguments forkvm passes.

use anyhow::Context;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Status forkvm exits with after a forbidden call (128 + SIGSYS).
pub const VIOLATION_STATUS: i32 = 128 + libc::SIGSYS;

/// Host system calls `run` and `serve` may make after start-up, allowed
/// whatever their arguments (ioctl is filtered by request, below).
const ALLOWED: &[i64] = &[
    // Files the guest may reach under its policy, and /proc/self for guest memory.
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_lseek,
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_close,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_fstatfs,
    libc::SYS_statfs,
    libc::SYS_access,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_getdents64,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
    libc::SYS_getcwd,
    libc::SYS_fcntl,
    libc::SYS_flock,
    libc::SYS_dup,
    libc::SYS_dup3,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_ftruncate,
    libc::SYS_fallocate,
    libc::SYS_copy_file_range,
    libc::SYS_poll,
    libc::SYS_ppoll,
    // The guest's inotify instances are host ones (linux/inotify.rs).
    libc::SYS_inotify_init1,
    libc::SYS_inotify_add_watch,
    libc::SYS_inotify_rm_watch,
    // Changes under --allow-write and in the private /tmp.
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_rmdir,
    libc::SYS_unlinkat,
    libc::SYS_renameat2,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    libc::SYS_mknodat,
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchownat,
    libc::SYS_utimensat,
    // Guest memory, VMs and their copies.
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_brk,
    libc::SYS_memfd_create,
    // Threads (vCPU threads for guest threads, the watchdog, the logger) and signals.
    libc::SYS_clone3,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_futex,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_tgkill,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_sigaltstack,
    libc::SYS_restart_syscall,
    libc::SYS_getpid,
    libc::SYS_gettid,
    // The nice value a new guest process starts with (forkvm's own).
    libc::SYS_getpriority,
    libc::SYS_getppid,
    libc::SYS_geteuid,
    libc::SYS_getegid,
    libc::SYS_prlimit64,
    // Time and randomness.
    libc::SYS_clock_gettime,
    libc::SYS_gettimeofday,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_getrandom,
];

/// What `serve` needs besides: its HTTP listener and tokio's event loop.
const SERVE_ALLOWED: &[i64] = &[
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_accept4,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    libc::SYS_shutdown,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_pipe2,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_eventfd2,
];

/// What outbound connections need (`--allow-connect`), in `run` and `serve`:
/// nonblocking TCP sockets, connect, send/recv, SO_ERROR and TCP_NODELAY.
const OUTBOUND_ALLOWED: &[i64] = &[
    libc::SYS_connect,
    libc::SYS_getsockname,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    libc::SYS_shutdown,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
];

/// Calls allowed only with one of the given first arguments:
/// prctl for thread names (std), naming mappings (glibc) and reading our own auxv.
const BY_FIRST_ARG: &[(i64, &[u64])] = &[(
    libc::SYS_prctl,
    &[
        libc::PR_SET_NAME as u64,
        libc::PR_GET_NAME as u64,
        0x5356_4d41, // PR_SET_VMA
        0x4155_5856, // PR_GET_AUXV (rustix reads the host's auxv lazily: hwcap)
    ],
)];

/// The same for `serve`: its listener (IPv4 or IPv6) and tokio's signal socket pair.
const SERVE_BY_FIRST_ARG: &[(i64, &[u64])] = &[
    (
        libc::SYS_socket,
        &[libc::AF_INET as u64, libc::AF_INET6 as u64],
    ),
    (libc::SYS_socketpair, &[libc::AF_UNIX as u64]),
];

/// `run --allow-connect`: the sockets of outbound connections.
const OUTBOUND_BY_FIRST_ARG: &[(i64, &[u64])] = &[(
    libc::SYS_socket,
    &[libc::AF_INET as u64, libc::AF_INET6 as u64],
)];

/// ioctl requests forkvm makes (the request argument is compared, 32 bits).
const IOCTLS: &[u64] = &[
    0xae01,     // KVM_CREATE_VM
    0xae03,     // KVM_CHECK_EXTENSION
    0xae04,     // KVM_GET_VCPU_MMAP_SIZE
    0xae41,     // KVM_CREATE_VCPU
    0xae80,     // KVM_RUN
    0xc008ae05, // KVM_GET_SUPPORTED_CPUID
    0x4008ae90, // KVM_SET_CPUID2
    0x4020ae46, // KVM_SET_USER_MEMORY_REGION
    0x8090ae81, // KVM_GET_REGS
    0x4090ae82, // KVM_SET_REGS
    0x8138ae83, // KVM_GET_SREGS
    0x4138ae84, // KVM_SET_SREGS
    0x4008ae89, // KVM_SET_MSRS
    0x9000aea4, // KVM_GET_XSAVE
    0x5000aea5, // KVM_SET_XSAVE
    0x4188aea7, // KVM_SET_XCRS
    0x8040ae9f, // KVM_GET_VCPU_EVENTS
    0xaea3,     // KVM_GET_TSC_KHZ (the vDSO time base: clock.rs)
    0x5401,     // TCGETS (the guest's terminal queries on stdio)
    0x5402,     // TCSETS
    0x5403,     // TCSETSW
    0x5404,     // TCSETSF
    0x5413,     // TIOCGWINSZ
    0x5414,     // TIOCSWINSZ
    0x541b,     // FIONREAD
    0x5421,     // FIONBIO
    0x5451,     // FIOCLEX
    0xc0606610, // PAGEMAP_SCAN (/proc/self/pagemap, for resets)
];

/// Which command the filter is for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// `forkvm run`: no network at all.
    Run,
    /// `forkvm serve`: also the HTTP listener.
    Serve,
}

/// Confines the process for `mode` (with the calls of outbound connections
/// when `outbound`), or says loudly that it is not confined.
pub fn confine(mode: Mode, disabled: bool, outbound: bool) -> anyhow::Result<()> {
    if disabled {
        tracing::warn!(
            "--no-seccomp: forkvm runs without its host seccomp allow-list; for debugging only"
        );
        return Ok(());
    }
    install(mode, outbound)
}

/// Installs the allow-list on every thread of the process.
fn install(mode: Mode, outbound: bool) -> anyhow::Result<()> {
    install_sigsys_handler()?;
    let program = compile(mode, outbound).context("building the seccomp filter")?;
    seccompiler::apply_filter_all_threads(&program).context("installing the seccomp filter")?;
    Ok(())
}

fn compile(mode: Mode, outbound: bool) -> anyhow::Result<BpfProgram> {
    let (extra, extra_by_arg): (&[i64], &[(i64, &[u64])]) = match mode {
        Mode::Run => (&[], &[]),
        Mode::Serve => (SERVE_ALLOWED, SERVE_BY_FIRST_ARG),
    };
    // Outbound connections add their calls and AF_INET/AF_INET6 sockets
    // (which `serve` allows already); `run` without them has no network at all.
    let (out, out_by_arg): (&[i64], &[(i64, &[u64])]) = match (outbound, mode) {
        (false, _) => (&[], &[]),
        (true, Mode::Run) => (OUTBOUND_ALLOWED, OUTBOUND_BY_FIRST_ARG),
        (true, Mode::Serve) => (OUTBOUND_ALLOWED, &[]),
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = ALLOWED
        .iter()
        .chain(extra)
        .chain(out)
        .map(|&nr| (nr, Vec::new()))
        .collect();
    // One rule per allowed value of the argument (rules are alternatives).
    let one_of = |arg: u8, values: &[u64]| {
        values
            .iter()
            .map(|&v| {
                SeccompRule::new(vec![SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    v,
                )?])
            })
            .collect::<Result<Vec<_>, _>>()
    };
    for &(nr, values) in BY_FIRST_ARG.iter().chain(extra_by_arg).chain(out_by_arg) {
        rules.insert(nr, one_of(0, values)?);
    }
    rules.insert(libc::SYS_ioctl, one_of(1, IOCTLS)?);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Trap,
        SeccompAction::Allow,
        TargetArch::x86_64,
    )?;
    Ok(filter.try_into()?)
}

/// SIGSYS: one line on stderr, then exit. Only async-signal-safe calls
/// (write, exit_group), no allocation.
extern "C" fn on_sigsys(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // The SIGSYS fields of siginfo: call address at byte 16, call number (int) at 24.
    let nr = if info.is_null() {
        -1
    } else {
        // SAFETY: the kernel passes a valid siginfo_t (128 bytes) for SA_SIGINFO
        // handlers; bytes 24..28 hold si_syscall for SIGSYS.
        unsafe { std::ptr::read_unaligned(info.cast::<u8>().add(24).cast::<i32>()) }
    };
    let mut line = [0u8; 160];
    let mut len = 0;
    let mut put = |bytes: &[u8]| {
        for &b in bytes {
            if len < line.len() {
                line[len] = b;
                len += 1;
            }
        }
    };
    put(b"forkvm: host seccomp: system call ");
    let mut digits = [0u8; 12];
    let mut n = i64::from(nr).unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if nr < 0 {
        put(b"-");
    }
    put(&digits[i..]);
    // A lookup in a static table: no allocation.
    if let Some(name) = u64::try_from(nr).ok().and_then(forkvm::linux::names::name) {
        put(b" (");
        put(name.as_bytes());
        put(b")");
    }
    put(b" is not in forkvm's allow-list; stopping (a forkvm bug: --no-seccomp to debug)\n");
    // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffer is ours.
    unsafe {
        libc::write(2, line.as_ptr().cast(), len);
        libc::_exit(VIOLATION_STATUS);
    }
}

fn install_sigsys_handler() -> anyhow::Result<()> {
    // SAFETY: an all-zero sigaction is valid (empty mask, no flags).
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_sigsys as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO;
    // SAFETY: the handler has the SA_SIGINFO signature and only makes
    // async-signal-safe calls; `sa` outlives the call.
    if unsafe { libc::sigaction(libc::SIGSYS, &sa, std::ptr::null_mut()) } != 0 {
        return Err(std::io::Error::last_os_error()).context("installing the SIGSYS handler");
    }
    Ok(())
}

/// Test hook (debug builds only): with FORKVM_TEST_FORBIDDEN_SYSCALL set,
/// makes a call that is not on the list, to show what happens.
pub fn forbidden_call_for_tests() {
    if cfg!(debug_assertions) && std::env::var_os("FORKVM_TEST_FORBIDDEN_SYSCALL").is_some() {
        // personality(0xffffffff) only queries; forkvm never calls it.
        // SAFETY: a query with no pointer arguments.
        unsafe {
            libc::syscall(libc::SYS_personality, 0xffff_ffffu64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles() {
        for mode in [Mode::Run, Mode::Serve] {
            for outbound in [false, true] {
                assert!(!compile(mode, outbound).unwrap().is_empty());
            }
        }
    }

    #[test]
    fn lists_are_distinct_and_leave_out_what_forkvm_never_needs() {
        let all: Vec<i64> = ALLOWED
            .iter()
            .chain(SERVE_ALLOWED)
            .chain(
                BY_FIRST_ARG
                    .iter()
                    .chain(SERVE_BY_FIRST_ARG)
                    .map(|(nr, _)| nr),
            )
            .copied()
            .collect();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len(), "a call is listed twice");
        for nr in [
            libc::SYS_personality, // the test hook
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_ptrace,
            libc::SYS_fork,
            libc::SYS_vfork,
            libc::SYS_clone, // threads come from clone3, whose flags a filter cannot see
            libc::SYS_kill,
            libc::SYS_mount,
            libc::SYS_setuid,
            libc::SYS_init_module,
            libc::SYS_bpf,
        ] {
            assert!(!all.contains(&nr), "{nr} must not be allowed");
        }
        assert!(
            !all.contains(&libc::SYS_ioctl),
            "ioctl is filtered by request"
        );
        assert!(!ALLOWED.contains(&libc::SYS_socket), "run has no network");
        assert!(BY_FIRST_ARG.iter().all(|(nr, _)| *nr != libc::SYS_socket));
    }
}
