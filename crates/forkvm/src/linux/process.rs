//! Process identity and lifetime: exit, ids, uname, limits, TLS, affinity,
//! randomness.

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;

/// The guest's process (and only thread) id.
pub const PID: u64 = 2;
/// Its parent.
pub const PPID: u64 = 1;
/// uid/gid the guest sees (matches the auxv).
pub const UID: u64 = 1000;

/// Implements exit(2) and exit_group(2).
fn sys_exit(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    p.exit_status = Some((a[0] & 0xff) as i32);
    Ok(0)
}

/// Implements getpid(2).
fn sys_getpid(p: &mut Process, m: &mut GuestMemory, a: &Args) -> SysResult {
    super::child::sys_getpid(p, m, a)
}

/// Implements getppid(2).
fn sys_getppid(p: &mut Process, m: &mut GuestMemory, a: &Args) -> SysResult {
    super::child::sys_getppid(p, m, a)
}

/// Implements getuid/geteuid/getgid/getegid(2).
fn sys_getuid(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Ok(UID)
}

/// Implements getpgid(2).
fn sys_getpgid(p: &mut Process, m: &mut GuestMemory, a: &Args) -> SysResult {
    super::child::sys_getpgid(p, m, a)
}

/// Implements getresuid(2)/getresgid(2).
fn sys_getresuid(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    for &ptr in &a[..3] {
        mem.write_u32(ptr, UID as u32)?;
    }
    Ok(0)
}

/// Implements sethostname(2) and setdomainname(2) as for an unprivileged
/// user: EINVAL for a name longer than 64 bytes, EFAULT for a bad one,
/// else EPERM (it needs CAP_SYS_ADMIN).
fn sys_setname(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [name, len, ..] = *a;
    if len > 64 {
        return Err(Errno::EINVAL);
    }
    mem.read(name, len)?;
    Err(Errno::EPERM)
}

/// The guest's host name (uname's nodename). The guest's own /etc/hosts
/// names it too ([`super::procfs::etc_file`]), so that resolving one's own
/// name (Java's `InetAddress.getLocalHost`, Python's `socket.getfqdn`)
/// works as on a Debian system, where the installer lists it there.
pub const HOSTNAME: &str = "forkvm";

/// Implements uname(2).
fn sys_uname(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let mut buf = [0u8; 65 * 6];
    let fields: [&[u8]; 6] = [
        b"Linux",
        HOSTNAME.as_bytes(),
        super::sysctl::RELEASE.as_bytes(),
        super::sysctl::VERSION.as_bytes(),
        b"x86_64",
        b"(none)",
    ];
    for (i, f) in fields.iter().enumerate() {
        buf[i * 65..i * 65 + f.len()].copy_from_slice(f);
    }
    mem.write(a[0], &buf)?;
    Ok(0)
}

const ARCH_SET_GS: u64 = 0x1001;
const ARCH_SET_FS: u64 = 0x1002;
const ARCH_GET_FS: u64 = 0x1003;
const ARCH_GET_GS: u64 = 0x1004;

/// Implements arch_prctl(2): the FS base (TLS) for the program.
fn sys_arch_prctl(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    match a[0] {
        ARCH_SET_FS => {
            if a[1] >= 0x0000_8000_0000_0000 {
                return Err(Errno::EPERM);
            }
            p.fs_base = a[1];
            p.pending_fs_base = Some(a[1]);
            Ok(0)
        }
        ARCH_GET_FS => {
            mem.write_u64(a[1], p.fs_base)?;
            Ok(0)
        }
        ARCH_GET_GS => {
            mem.write_u64(a[1], 0)?;
            Ok(0)
        }
        ARCH_SET_GS => Err(Errno::EPERM),
        _ => Err(Errno::EINVAL),
    }
}

/// Implements set_tid_address(2).
fn sys_set_tid_address(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    p.clear_child_tid = a[0];
    Ok(p.tid)
}

/// Implements set_robust_list(2).
fn sys_set_robust_list(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    if a[1] != 24 {
        return Err(Errno::EINVAL);
    }
    p.robust_list = a[0];
    Ok(0)
}

/// Implements rseq(2): refused, as on kernels without it; libcs fall back.
fn sys_enosys(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Err(Errno::ENOSYS)
}

pub const RLIM_INFINITY: u64 = u64::MAX;
/// Resource numbers are below this (RLIMIT_RTTIME is 15).
pub const RLIMITS: usize = 16;
pub const RLIMIT_CPU: u64 = 0;
pub const RLIMIT_NOFILE: u64 = 7;

/// The (soft, hard) limit of `resource`: what the program lowered it to,
/// else forkvm's.
pub fn rlimit(p: &Process, mem: &GuestMemory, resource: u64) -> Result<(u64, u64), Errno> {
    let default = default_rlimit(p, mem, resource)?;
    Ok(p.rlimits[resource as usize].unwrap_or(default))
}

/// The limits a process starts with: forkvm's own where it has one.
fn default_rlimit(p: &Process, mem: &GuestMemory, resource: u64) -> Result<(u64, u64), Errno> {
    Ok(match resource {
        2 | 9 => (mem.size(), mem.size()), // DATA, AS
        3 => (p.mm.stack_size(mem.size()), p.mm.stack_size(mem.size())), // STACK
        4 => (0, 0),                       // CORE
        7 => (
            super::fdtable::DEFAULT_FD_LIMIT as u64,
            super::fdtable::MAX_FDS as u64,
        ), // NOFILE
        6 => {
            // NPROC: the run's --max-processes (one where there are no children).
            let n = p.family.as_ref().map_or(1, |f| f.tree.max_processes());
            (n, n)
        }
        11 => {
            let n = super::signal::MAX_QUEUED as u64; // SIGPENDING
            (n, n)
        }
        // Linux's own defaults (init_task's): MEMLOCK 8 MiB, MSGQUEUE
        // 819200 bytes, NICE and RTPRIO 0 (no raising of priority, which
        // setpriority enforces).
        8 => (8 << 20, 8 << 20),
        12 => (819_200, 819_200),
        13 | 14 => (0, 0),
        0 | 1 | 5 | 10 | 15 => (RLIM_INFINITY, RLIM_INFINITY),
        _ => return Err(Errno::EINVAL),
    })
}

/// Whether `id` names the caller for the calls that take a process or
/// thread id (`sched_*affinity`, `sched_*param`, `prlimit64`, PRIO_PROCESS
/// priorities): 0, the process's pid, or the id of one of its threads, as
/// `pthread_getaffinity_np` passes.
fn is_own_task(p: &Process, id: u64) -> bool {
    id == 0
        || id == super::child::pid_of(p)
        || id == p.tid
        || p.threads.others.iter().any(|t| t.tid == id)
}

/// Implements prlimit64(2) for the process itself: a limit may be lowered
/// (and a soft one raised up to its hard one), not raised past forkvm's.
/// Enforced: RLIMIT_NOFILE (new descriptors stay below it, and poll's
/// count), RLIMIT_CPU (SIGXCPU at the soft limit and every second after,
/// SIGKILL at the hard one); the others are only reported back.
fn sys_prlimit64(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [pid, resource, new, old, ..] = *a;
    if !is_own_task(p, pid) {
        return Err(Errno::ESRCH);
    }
    let (cur, max) = rlimit(p, mem, resource)?;
    if new != 0 {
        let ncur = mem.read_u64(new)?;
        let nmax = mem.read_u64(new + 8)?;
        if ncur > nmax {
            return Err(Errno::EINVAL);
        }
        if nmax > max {
            return Err(Errno::EPERM);
        }
        if old != 0 {
            mem.write_u64(old, cur)?;
            mem.write_u64(old + 8, max)?;
        }
        p.rlimits[resource as usize] = Some((ncur, nmax));
        if resource == RLIMIT_NOFILE {
            p.fds.set_limit(ncur);
        }
        return Ok(0);
    }
    if old != 0 {
        mem.write_u64(old, cur)?;
        mem.write_u64(old + 8, max)?;
    }
    Ok(0)
}

/// Implements getrlimit(2).
fn sys_getrlimit(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[1] == 0 {
        return Err(Errno::EFAULT);
    }
    sys_prlimit64(p, mem, &[0, a[0], 0, a[1], 0, 0])
}

/// Implements setrlimit(2) (see [`sys_prlimit64`]).
fn sys_setrlimit(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if a[1] == 0 {
        return Err(Errno::EFAULT);
    }
    sys_prlimit64(p, mem, &[0, a[0], a[1], 0, 0, 0])
}

/// Implements sched_getaffinity(2): one CPU.
fn sys_sched_getaffinity(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [pid, len, ptr, ..] = *a;
    if !is_own_task(p, pid) {
        return Err(Errno::ESRCH);
    }
    if len < 8 || len % 8 != 0 {
        return Err(Errno::EINVAL);
    }
    mem.write_u64(ptr, 1)?;
    Ok(8)
}

/// Implements getcpu(2).
fn sys_getcpu(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    for &ptr in &a[..2] {
        if ptr != 0 {
            mem.write_u32(ptr, 0)?;
        }
    }
    Ok(0)
}

const GRND_NONBLOCK: u64 = 1;
const GRND_RANDOM: u64 = 2;
const GRND_INSECURE: u64 = 4;

/// Implements getrandom(2) from the host's generator.
fn sys_getrandom(_: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [buf, len, flags, ..] = *a;
    if flags & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0
        || flags & (GRND_RANDOM | GRND_INSECURE) == (GRND_RANDOM | GRND_INSECURE)
    {
        return Err(Errno::EINVAL);
    }
    // Linux returns at most 32 MiB per call.
    let len = len.min(32 << 20);
    let out = mem.slice_mut(buf, len)?;
    getrandom::fill(out).map_err(|_| Errno::EIO)?;
    Ok(len)
}

/// Implements sysinfo(2).
fn sys_sysinfo(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let mut info = [0u8; 112];
    let uptime = p.started.elapsed().as_secs().max(1);
    // The memory limit is the program's RAM, as in /proc/meminfo: runtimes
    // size their heaps from it (the JVM takes a quarter, glibc's
    // sysconf(_SC_PHYS_PAGES) reads it), and the address space can be far
    // larger than what the program may use.
    let ram = mem.commit_limit().min(mem.size());
    let free = ram.saturating_sub(mem.committed_by_all());
    info[0..8].copy_from_slice(&uptime.to_le_bytes());
    info[32..40].copy_from_slice(&ram.to_le_bytes()); // totalram
    info[40..48].copy_from_slice(&free.to_le_bytes()); // freeram
    info[80..82].copy_from_slice(&1u16.to_le_bytes()); // procs
    info[104..108].copy_from_slice(&1u32.to_le_bytes()); // mem_unit
    mem.write(a[0], &info)?;
    Ok(0)
}

/// Implements setuid(2)/setgid(2): only to the id the process already has.
fn sys_setid(_: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    if a[0] as u32 == UID as u32 {
        Ok(0)
    } else {
        Err(Errno::EPERM)
    }
}

/// Implements setresuid/setresgid(2): each id unchanged (-1) or its own.
fn sys_setids(_: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    own_ids(&a[..3])
}

/// Implements setreuid/setregid(2): two ids (the third register is not an
/// argument: judged on it, `setreuid(-1, -1)` failed with what it held).
fn sys_setids2(_: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    own_ids(&a[..2])
}

fn own_ids(ids: &[u64]) -> SysResult {
    if ids
        .iter()
        .all(|&v| v as u32 == u32::MAX || v as u32 == UID as u32)
    {
        Ok(0)
    } else {
        Err(Errno::EPERM)
    }
}

/// Implements getgroups(2): no supplementary groups.
fn sys_getgroups(_: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    if (a[0] as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    Ok(0)
}

/// Implements setgroups(2): refused (no privileges).
fn sys_eperm(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Err(Errno::EPERM)
}

/// The nice value a run's first process starts with: forkvm's own, as a
/// process inherits its parent's (`nice -n 5 forkvm run ...` is at 5).
pub(super) fn host_nice() -> i32 {
    static NICE: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *NICE.get_or_init(|| rustix::process::getpriority_process(None).unwrap_or(0))
}

/// Implements getpriority(2) (the kernel reports 20 - nice).
fn sys_getpriority(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    own_priority(p, a)?;
    // The system call answers 20 - nice (glibc turns it back).
    Ok((20 - p.nice) as u64)
}

/// Whether setpriority/getpriority's (which, who) names the process itself.
fn own_priority(p: &Process, a: &Args) -> Result<(), Errno> {
    match (a[0], a[1]) {
        (0..=2, 0) => Ok(()),
        (0, who) if is_own_task(p, who) => Ok(()),
        (0..=2, _) => Err(Errno::ESRCH),
        _ => Err(Errno::EINVAL),
    }
}

/// Implements setpriority(2) for the process itself: the nice value is
/// remembered (getpriority, children, exec) and not enforced (one vCPU). As
/// an unprivileged process it may only raise it (EACCES to lower it).
fn sys_setpriority(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    own_priority(p, a)?;
    let nice = (a[2] as i32).clamp(-20, 19);
    if nice < p.nice {
        return Err(Errno::EACCES);
    }
    p.nice = nice;
    Ok(0)
}

/// Implements sched_setaffinity(2): the mask must include CPU 0, the only one.
fn sys_sched_setaffinity(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [pid, len, ptr, ..] = *a;
    if !is_own_task(p, pid) {
        return Err(Errno::ESRCH);
    }
    if len == 0 {
        return Err(Errno::EINVAL);
    }
    let first = mem.read(ptr, 1)?[0];
    if first & 1 == 0 {
        return Err(Errno::EINVAL);
    }
    Ok(0)
}

/// The process a sched_* call names: EINVAL for a negative pid, ESRCH for
/// one the guest cannot see.
fn sched_target(p: &Process, pid: u64) -> Result<(), Errno> {
    if (pid as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let pid = u64::from(pid as u32);
    if is_own_task(p, pid) || super::child::pid_visible(p, pid) {
        Ok(())
    } else {
        Err(Errno::ESRCH)
    }
}

/// Implements sched_getscheduler(2): SCHED_OTHER.
fn sys_sched_getscheduler(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    sched_target(p, a[0])?;
    Ok(0)
}

/// Implements sched_getparam(2): priority 0.
fn sys_sched_getparam(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    sched_target(p, a[0])?;
    mem.write_u32(a[1], 0)?;
    Ok(0)
}

const SCHED_OTHER: u64 = 0;
const SCHED_FIFO: u64 = 1;
const SCHED_RR: u64 = 2;
const SCHED_BATCH: u64 = 3;
const SCHED_IDLE: u64 = 5;
const SCHED_RESET_ON_FORK: u64 = 0x4000_0000;

/// Sets the normal policies at priority 0 (all there is here): EINVAL for
/// another priority or an unknown policy, EPERM for the real-time ones, as
/// for an unprivileged user.
fn sched_set(p: &Process, mem: &GuestMemory, pid: u64, policy: u64, param: u64) -> SysResult {
    if param == 0 || (pid as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let prio = mem.read_u32(param)? as i32;
    sched_target(p, pid)?;
    match policy & !SCHED_RESET_ON_FORK {
        SCHED_OTHER | SCHED_BATCH | SCHED_IDLE if prio == 0 => Ok(0),
        SCHED_OTHER | SCHED_BATCH | SCHED_IDLE => Err(Errno::EINVAL),
        SCHED_FIFO | SCHED_RR if (1..=99).contains(&prio) => Err(Errno::EPERM),
        _ => Err(Errno::EINVAL),
    }
}

/// Implements sched_setparam(2): (pid, param), the current policy kept.
fn sys_sched_setparam(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    sched_set(p, mem, a[0], SCHED_OTHER, a[1])
}

/// Implements sched_setscheduler(2): (pid, policy, param).
fn sys_sched_setscheduler(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    sched_set(p, mem, a[0], a[1] as u32 as u64, a[2])
}

/// Implements sched_rr_get_interval(2): the round-robin quantum Linux
/// reports for a normal task is its time slice; 100 ms here.
fn sys_sched_rr_get_interval(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    sched_target(p, a[0])?;
    let mut ts = [0u8; 16];
    ts[8..].copy_from_slice(&100_000_000i64.to_le_bytes());
    mem.write(a[1], &ts)?;
    Ok(0)
}

/// Implements sched_get_priority_max(2) and sched_get_priority_min(2) for SCHED_OTHER (0).
fn sys_sched_prio(_: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    match a[0] {
        0 | 3 | 5 => Ok(0),
        1 | 2 => Ok(0),
        _ => Err(Errno::EINVAL),
    }
}

/// Implements personality(2): only PER_LINUX.
fn sys_personality(_: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    match a[0] as u32 {
        0 | 0xffff_ffff => Ok(0),
        _ => Err(Errno::EINVAL),
    }
}

/// Implements wait4(2) and waitid(2) where there are no children.
#[cfg(test)]
fn sys_no_children(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Err(Errno::ECHILD)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry {
        nr: 39,
        name: "getpid",
        handler: sys_getpid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 105,
        name: "setuid",
        handler: sys_setid,
        support: Support::Partial,
        note: "only to its own id",
    },
    SyscallEntry {
        nr: 106,
        name: "setgid",
        handler: sys_setid,
        support: Support::Partial,
        note: "only to its own id",
    },
    SyscallEntry {
        nr: 113,
        name: "setreuid",
        handler: sys_setids2,
        support: Support::Partial,
        note: "only to its own id",
    },
    SyscallEntry {
        nr: 114,
        name: "setregid",
        handler: sys_setids2,
        support: Support::Partial,
        note: "only to its own id",
    },
    SyscallEntry {
        nr: 115,
        name: "getgroups",
        handler: sys_getgroups,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 116,
        name: "setgroups",
        handler: sys_eperm,
        support: Support::Refused,
        note: "EPERM: no privileges",
    },
    SyscallEntry {
        nr: 117,
        name: "setresuid",
        handler: sys_setids,
        support: Support::Partial,
        note: "only to its own id",
    },
    SyscallEntry {
        nr: 119,
        name: "setresgid",
        handler: sys_setids,
        support: Support::Partial,
        note: "only to its own id",
    },
    SyscallEntry {
        nr: 135,
        name: "personality",
        handler: sys_personality,
        support: Support::Partial,
        note: "PER_LINUX only",
    },
    SyscallEntry {
        nr: 140,
        name: "getpriority",
        handler: sys_getpriority,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 141,
        name: "setpriority",
        handler: sys_setpriority,
        support: Support::Partial,
        note: "for itself: remembered (getpriority, children, exec), raised only (EACCES to lower); one vCPU, so not enforced",
    },
    SyscallEntry {
        nr: 142,
        name: "sched_setparam",
        handler: sys_sched_setparam,
        support: Support::Partial,
        note: "priority 0 only (EINVAL otherwise)",
    },
    SyscallEntry {
        nr: 143,
        name: "sched_getparam",
        handler: sys_sched_getparam,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 144,
        name: "sched_setscheduler",
        handler: sys_sched_setscheduler,
        support: Support::Partial,
        note: "normal policies at priority 0 only; real-time ones EPERM",
    },
    SyscallEntry {
        nr: 148,
        name: "sched_rr_get_interval",
        handler: sys_sched_rr_get_interval,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 145,
        name: "sched_getscheduler",
        handler: sys_sched_getscheduler,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 146,
        name: "sched_get_priority_max",
        handler: sys_sched_prio,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 147,
        name: "sched_get_priority_min",
        handler: sys_sched_prio,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 203,
        name: "sched_setaffinity",
        handler: sys_sched_setaffinity,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 170,
        name: "sethostname",
        handler: sys_setname,
        support: Support::Full,
        note: "as for an unprivileged user: EPERM",
    },
    SyscallEntry {
        nr: 171,
        name: "setdomainname",
        handler: sys_setname,
        support: Support::Full,
        note: "as for an unprivileged user: EPERM",
    },
    SyscallEntry {
        nr: 63,
        name: "uname",
        handler: sys_uname,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 97,
        name: "getrlimit",
        handler: sys_getrlimit,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 99,
        name: "sysinfo",
        handler: sys_sysinfo,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 102,
        name: "getuid",
        handler: sys_getuid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 104,
        name: "getgid",
        handler: sys_getuid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 107,
        name: "geteuid",
        handler: sys_getuid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 108,
        name: "getegid",
        handler: sys_getuid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 110,
        name: "getppid",
        handler: sys_getppid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 111,
        name: "getpgrp",
        handler: super::child::sys_getpgrp,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 118,
        name: "getresuid",
        handler: sys_getresuid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 120,
        name: "getresgid",
        handler: sys_getresuid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 121,
        name: "getpgid",
        handler: sys_getpgid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 124,
        name: "getsid",
        handler: super::child::sys_getsid,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 158,
        name: "arch_prctl",
        handler: sys_arch_prctl,
        support: Support::Partial,
        note: "FS base get/set and GS get; ARCH_SET_GS is refused (EPERM)",
    },
    SyscallEntry {
        nr: 160,
        name: "setrlimit",
        handler: sys_setrlimit,
        support: Support::Partial,
        note: "lowering holds; RLIMIT_NOFILE and RLIMIT_CPU are enforced, others reported back",
    },
    SyscallEntry {
        nr: 204,
        name: "sched_getaffinity",
        handler: sys_sched_getaffinity,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 218,
        name: "set_tid_address",
        handler: sys_set_tid_address,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 231,
        name: "exit_group",
        handler: sys_exit,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 273,
        name: "set_robust_list",
        handler: sys_set_robust_list,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 302,
        name: "prlimit64",
        handler: sys_prlimit64,
        support: Support::Partial,
        note: "own process and its threads only; a limit may be lowered, not raised past the sandbox's (see setrlimit)",
    },
    SyscallEntry {
        nr: 309,
        name: "getcpu",
        handler: sys_getcpu,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 318,
        name: "getrandom",
        handler: sys_getrandom,
        support: Support::Full,
        note: "",
    },
    SyscallEntry {
        nr: 334,
        name: "rseq",
        handler: sys_enosys,
        support: Support::Refused,
        note:
            "ENOSYS: restartable sequences need preemption notification; glibc and musl fall back",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Process, GuestMemory, u64) {
        crate::linux::test_process()
    }

    /// RLIMIT_NOFILE starts at Linux's 1024 (soft) and 4096 (hard): a
    /// program may raise its soft limit to the hard one and then hold more
    /// than 1024 descriptors (Go's runtime and node raise it at start), not
    /// raise the hard one.
    #[test]
    fn open_file_limit_rises_to_the_hard_limit() {
        let (mut p, mut m, buf) = setup();
        assert_eq!(
            sys_getrlimit(&mut p, &mut m, &[RLIMIT_NOFILE, buf, 0, 0, 0, 0]),
            Ok(0)
        );
        assert_eq!(m.read_u64(buf), Ok(1024));
        assert_eq!(m.read_u64(buf + 8), Ok(4096));
        let dup = |p: &mut Process, m: &mut GuestMemory| {
            crate::linux::dispatch(p, m, 32, &[0, 0, 0, 0, 0, 0]) as i64
        };
        while dup(&mut p, &mut m) >= 0 {}
        assert_eq!(p.fds.open_fds().len(), 1024);
        m.write_u64(buf + 8, 8192).expect("write");
        m.write_u64(buf, 4096).expect("write");
        assert_eq!(
            sys_setrlimit(&mut p, &mut m, &[RLIMIT_NOFILE, buf, 0, 0, 0, 0]),
            Err(Errno::EPERM)
        );
        m.write_u64(buf + 8, 4096).expect("write");
        assert_eq!(
            sys_setrlimit(&mut p, &mut m, &[RLIMIT_NOFILE, buf, 0, 0, 0, 0]),
            Ok(0)
        );
        let mut last = 0;
        loop {
            let fd = dup(&mut p, &mut m);
            if fd < 0 {
                assert_eq!(fd, -(Errno::EMFILE.0 as i64));
                break;
            }
            last = fd;
        }
        assert_eq!(last, 4095);
    }

    #[test]
    fn identity_and_scheduling_answers() {
        let (mut p, mut m, buf) = setup();
        let mut call = |h: crate::linux::Handler, a: [u64; 6]| h(&mut p, &mut m, &a);
        assert_eq!(call(sys_setid, [UID, 0, 0, 0, 0, 0]), Ok(0));
        // setreuid/setregid take two ids: the third register is whatever it held.
        assert_eq!(
            call(sys_setids2, [u64::MAX, u64::MAX, 0x5eed, 0, 0, 0]),
            Ok(0)
        );
        assert_eq!(call(sys_setids2, [UID, UID, 7, 0, 0, 0]), Ok(0));
        assert_eq!(call(sys_setids2, [0, UID, 0, 0, 0, 0]), Err(Errno::EPERM));
        assert_eq!(call(sys_setids, [UID, UID, 7, 0, 0, 0]), Err(Errno::EPERM));
        assert_eq!(
            call(sys_setid, [0, 0, 0, 0, 0, 0]),
            Err(Errno::EPERM),
            "no root"
        );
        assert_eq!(call(sys_setids, [u64::MAX, UID, u64::MAX, 0, 0, 0]), Ok(0));
        assert_eq!(call(sys_setids, [0, UID, UID, 0, 0, 0]), Err(Errno::EPERM));
        assert_eq!(call(sys_getgroups, [0, 0, 0, 0, 0, 0]), Ok(0));
        assert_eq!(call(sys_eperm, [1, buf, 0, 0, 0, 0]), Err(Errno::EPERM));
        assert_eq!(call(sys_getpriority, [0, 0, 0, 0, 0, 0]), Ok(20));
        assert_eq!(
            call(sys_getpriority, [0, 99, 0, 0, 0, 0]),
            Err(Errno::ESRCH)
        );
        assert_eq!(call(sys_setpriority, [0, 0, 5, 0, 0, 0]), Ok(0));
        assert_eq!(call(sys_getpriority, [0, 0, 0, 0, 0, 0]), Ok(15));
        assert_eq!(
            call(sys_setpriority, [0, 0, 4, 0, 0, 0]),
            Err(Errno::EACCES)
        );
        assert_eq!(call(sys_sched_getscheduler, [0, 0, 0, 0, 0, 0]), Ok(0));
        assert_eq!(call(sys_sched_prio, [9, 0, 0, 0, 0, 0]), Err(Errno::EINVAL));
        assert_eq!(call(sys_personality, [0xffff_ffff, 0, 0, 0, 0, 0]), Ok(0));
        assert_eq!(
            call(sys_personality, [0x0040_0000, 0, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(sys_no_children, [u64::MAX, 0, 0, 0, 0, 0]),
            Err(Errno::ECHILD)
        );
        assert_eq!(call(sys_enosys, [0; 6]), Err(Errno::ENOSYS));
    }

    #[test]
    fn default_limits_are_linuxs_where_forkvm_has_none() {
        let (mut p, mut m, buf) = setup();
        // (resource, Linux's default): MEMLOCK, MSGQUEUE, NICE, RTPRIO (they
        // were unlimited, so `ulimit -e` said the nice value could be raised
        // while setpriority refused it), then CPU, FSIZE, RTTIME.
        for (r, want) in [
            (8, 8 << 20),
            (12, 819_200),
            (13, 0),
            (14, 0),
            (0, RLIM_INFINITY),
            (1, RLIM_INFINITY),
            (15, RLIM_INFINITY),
        ] {
            assert_eq!(sys_getrlimit(&mut p, &mut m, &[r, buf, 0, 0, 0, 0]), Ok(0));
            assert_eq!(
                (m.read_u64(buf).unwrap(), m.read_u64(buf + 8).unwrap()),
                (want, want),
                "resource {r}"
            );
        }
        // Not raised past them.
        m.write_u64(buf, 1).unwrap();
        m.write_u64(buf + 8, 1).unwrap();
        assert_eq!(
            sys_setrlimit(&mut p, &mut m, &[13, buf, 0, 0, 0, 0]),
            Err(Errno::EPERM)
        );
    }

    #[test]
    fn sethostname_is_refused_as_for_an_unprivileged_user() {
        let (mut p, mut m, buf) = setup();
        m.write(buf, b"new").unwrap();
        let a = [buf, 3, 0, 0, 0, 0];
        assert_eq!(sys_setname(&mut p, &mut m, &a), Err(Errno::EPERM));
        let a = [buf, 65, 0, 0, 0, 0];
        assert_eq!(sys_setname(&mut p, &mut m, &a), Err(Errno::EINVAL));
        let a = [0, 3, 0, 0, 0, 0];
        assert_eq!(sys_setname(&mut p, &mut m, &a), Err(Errno::EFAULT));
    }

    #[test]
    fn affinity_and_params_check_their_pointers() {
        let (mut p, mut m, buf) = setup();
        m.write(buf, &[1]).unwrap();
        assert_eq!(
            sys_sched_setaffinity(&mut p, &mut m, &[0, 8, buf, 0, 0, 0]),
            Ok(0)
        );
        m.write(buf, &[2]).unwrap();
        assert_eq!(
            sys_sched_setaffinity(&mut p, &mut m, &[0, 8, buf, 0, 0, 0]),
            Err(Errno::EINVAL),
            "no CPU 0"
        );
        assert_eq!(
            sys_sched_setaffinity(&mut p, &mut m, &[0, 8, 0, 0, 0, 0]),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            sys_sched_getparam(&mut p, &mut m, &[0, buf, 0, 0, 0, 0]),
            Ok(0)
        );
        assert_eq!(m.read_u32(buf).unwrap(), 0);
        assert_eq!(
            sys_sched_getparam(&mut p, &mut m, &[0, 0, 0, 0, 0, 0]),
            Err(Errno::EFAULT)
        );
        m.write_u32(buf, 10).unwrap();
        assert_eq!(
            sys_sched_setscheduler(&mut p, &mut m, &[0, 1, buf, 0, 0, 0]),
            Err(Errno::EPERM),
            "no real-time"
        );
        // sched_setparam has two arguments: whatever is in the third is no
        // pointer (posix_spawn's child passed garbage there: EFAULT).
        m.write_u32(buf, 0).unwrap();
        assert_eq!(
            sys_sched_setparam(&mut p, &mut m, &[0, buf, 0xdead_0000, 0, 0, 0]),
            Ok(0)
        );
        assert_eq!(
            sys_sched_setparam(&mut p, &mut m, &[u64::MAX, buf, 0, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(p.comm[..4], *b"prog", "comm starts as the program name");
    }
}
