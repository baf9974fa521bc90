//! prctl(2): the per-process settings programs read and set there. Those
//! about the process tree (parent-death signal, subreaper) live in the run's
//! tree (`child`); the rest in [`Settings`]. And capget/capset: the guest
//! runs as an unprivileged user, with no capabilities to get or give.

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;

const PR_SET_PDEATHSIG: u64 = 1;
const PR_GET_PDEATHSIG: u64 = 2;
const PR_GET_DUMPABLE: u64 = 3;
const PR_SET_DUMPABLE: u64 = 4;
const PR_GET_KEEPCAPS: u64 = 7;
const PR_SET_KEEPCAPS: u64 = 8;
const PR_SET_NAME: u64 = 15;
const PR_GET_NAME: u64 = 16;
const PR_GET_SECCOMP: u64 = 21;
const PR_CAPBSET_READ: u64 = 23;
const PR_CAPBSET_DROP: u64 = 24;
const PR_SET_TIMERSLACK: u64 = 29;
const PR_GET_TIMERSLACK: u64 = 30;
const PR_SET_MM: u64 = 35;
const PR_SET_CHILD_SUBREAPER: u64 = 36;
const PR_GET_CHILD_SUBREAPER: u64 = 37;
const PR_SET_NO_NEW_PRIVS: u64 = 38;
const PR_GET_NO_NEW_PRIVS: u64 = 39;
const PR_GET_TID_ADDRESS: u64 = 40;
const PR_SET_THP_DISABLE: u64 = 41;
const PR_GET_THP_DISABLE: u64 = 42;
const PR_CAP_AMBIENT: u64 = 47;

/// The highest capability number (CAP_CHECKPOINT_RESTORE).
const CAP_LAST_CAP: u64 = 40;
/// Linux's default timer slack.
const DEFAULT_TIMER_SLACK_NS: u64 = 50_000;

/// What prctl sets that forkvm keeps per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// PR_SET_DUMPABLE.
    pub dumpable: bool,
    /// PR_SET_KEEPCAPS.
    pub keep_caps: bool,
    /// PR_SET_TIMERSLACK, in ns.
    pub timer_slack_ns: u64,
    /// PR_SET_NO_NEW_PRIVS: once set, never cleared.
    pub no_new_privs: bool,
    /// PR_SET_THP_DISABLE.
    pub thp_disabled: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            dumpable: true,
            keep_caps: false,
            timer_slack_ns: DEFAULT_TIMER_SLACK_NS,
            no_new_privs: false,
            thp_disabled: false,
        }
    }
}

impl Settings {
    /// What a new program keeps across execve: all but the keep-capabilities
    /// flag, and it is dumpable again.
    pub fn after_exec(self) -> Self {
        Self {
            dumpable: true,
            keep_caps: false,
            ..self
        }
    }
}

/// A 0-or-1 argument.
fn flag(v: u64) -> Result<bool, Errno> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Errno::EINVAL),
    }
}

/// Implements prctl(2).
fn sys_prctl(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    // The option is an int; the arguments are unsigned longs.
    let [option, arg2, arg3, arg4, arg5, _] = *a;
    let option = u64::from(option as u32);
    // Options that take fewer arguments want the others 0.
    let zero = |args: u64| match args {
        0 => Ok(()),
        _ => Err(Errno::EINVAL),
    };
    match option {
        PR_SET_PDEATHSIG => {
            if arg2 > 64 {
                return Err(Errno::EINVAL);
            }
            if let Some(f) = p.family.as_ref() {
                f.set_parent_death_signal(arg2);
            }
            Ok(0)
        }
        PR_GET_PDEATHSIG => {
            let sig = p.family.as_ref().map_or(0, |f| f.parent_death_signal());
            mem.write_u32(arg2, sig as u32)?;
            Ok(0)
        }
        PR_GET_DUMPABLE => Ok(u64::from(p.prctl.dumpable)),
        PR_SET_DUMPABLE => {
            p.prctl.dumpable = flag(arg2)?;
            Ok(0)
        }
        PR_GET_KEEPCAPS => Ok(u64::from(p.prctl.keep_caps)),
        PR_SET_KEEPCAPS => {
            p.prctl.keep_caps = flag(arg2)?;
            Ok(0)
        }
        PR_SET_NAME => {
            let name = mem.read_cstr(arg2, 15).or_else(|_| mem.read(arg2, 16))?;
            let mut n = [0u8; 16];
            let len = name.len().min(15);
            n[..len].copy_from_slice(&name[..len]);
            p.comm = n;
            if let Some(f) = &p.family {
                f.publish(p, mem);
            }
            Ok(0)
        }
        PR_GET_NAME => {
            mem.write(arg2, &p.comm)?;
            Ok(0)
        }
        // No seccomp filter of the guest's own is ever in force.
        PR_GET_SECCOMP => Ok(0),
        // The bounding set of an unprivileged process is full; only
        // CAP_SETPCAP could drop from it.
        PR_CAPBSET_READ if arg2 <= CAP_LAST_CAP => Ok(1),
        PR_CAPBSET_DROP | PR_SET_MM => Err(Errno::EPERM),
        PR_SET_TIMERSLACK => {
            p.prctl.timer_slack_ns = if arg2 == 0 {
                DEFAULT_TIMER_SLACK_NS
            } else {
                arg2
            };
            Ok(0)
        }
        PR_GET_TIMERSLACK => Ok(p.prctl.timer_slack_ns),
        PR_SET_CHILD_SUBREAPER => {
            if let Some(f) = p.family.as_ref() {
                f.set_subreaper(arg2 != 0);
            }
            Ok(0)
        }
        PR_GET_CHILD_SUBREAPER => {
            let on = p.family.as_ref().is_some_and(|f| f.subreaper());
            mem.write_u32(arg2, u32::from(on))?;
            Ok(0)
        }
        PR_SET_NO_NEW_PRIVS => {
            zero(arg3 | arg4 | arg5)?;
            if arg2 != 1 {
                return Err(Errno::EINVAL);
            }
            p.prctl.no_new_privs = true;
            Ok(0)
        }
        PR_GET_NO_NEW_PRIVS => {
            zero(arg2 | arg3 | arg4 | arg5)?;
            Ok(u64::from(p.prctl.no_new_privs))
        }
        PR_GET_TID_ADDRESS => {
            mem.write_u64(arg2, p.clear_child_tid)?;
            Ok(0)
        }
        PR_SET_THP_DISABLE => {
            zero(arg3 | arg4 | arg5)?;
            p.prctl.thp_disabled = flag(arg2)?;
            Ok(0)
        }
        PR_GET_THP_DISABLE => {
            zero(arg2 | arg3 | arg4 | arg5)?;
            Ok(u64::from(p.prctl.thp_disabled))
        }
        PR_CAP_AMBIENT => {
            const IS_SET: u64 = 1;
            const RAISE: u64 = 2;
            const LOWER: u64 = 3;
            const CLEAR_ALL: u64 = 4;
            match arg2 {
                CLEAR_ALL if arg3 | arg4 | arg5 == 0 => Ok(0),
                _ if arg4 | arg5 != 0 || arg3 > CAP_LAST_CAP => Err(Errno::EINVAL),
                // The ambient set is empty and stays so: a capability not
                // permitted and inheritable cannot be raised.
                IS_SET | LOWER => Ok(0),
                RAISE => Err(Errno::EPERM),
                _ => Err(Errno::EINVAL),
            }
        }
        _ => Err(Errno::EINVAL),
    }
}

const CAP_VERSION_1: u32 = 0x1998_0330;
const CAP_VERSION_2: u32 = 0x2007_1026;
const CAP_VERSION_3: u32 = 0x2008_0522;

/// The header of capget/capset: how many 32-bit words each set has, after
/// Linux's checks of the version and pid (an unknown version is EINVAL,
/// with the one the kernel prefers written back).
fn cap_header(
    p: &Process,
    mem: &mut GuestMemory,
    hdr: u64,
    data: u64,
) -> Result<Option<u64>, Errno> {
    let words = match mem.read_u32(hdr)? {
        CAP_VERSION_1 => 1,
        CAP_VERSION_2 | CAP_VERSION_3 => 2,
        _ => {
            mem.write_u32(hdr, CAP_VERSION_3)?;
            return if data == 0 {
                Ok(None)
            } else {
                Err(Errno::EINVAL)
            };
        }
    };
    let pid = mem.read_u32(hdr + 4)? as i32;
    if pid < 0 {
        return Err(Errno::EINVAL);
    }
    let own = super::child::pid_of(p);
    if pid != 0 && pid as u64 != own && super::child::seen(p, pid as u64).is_none() {
        return Err(Errno::ESRCH);
    }
    Ok(Some(words))
}

/// Implements capget(2): every set of every process of the run is empty
/// (libcap's users, such as iproute2's `ip`, read them before dropping them).
fn sys_capget(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let Some(words) = cap_header(p, mem, a[0], a[1])? else {
        return Ok(0);
    };
    if a[1] != 0 {
        mem.write(a[1], &vec![0u8; 12 * words as usize])?;
    }
    Ok(0)
}

/// Implements capset(2): only its own sets, and only to what they are
/// (empty); anything more is EPERM, as for an unprivileged process.
fn sys_capset(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let Some(words) = cap_header(p, mem, a[0], a[1])? else {
        return Err(Errno::EINVAL);
    };
    let pid = mem.read_u32(a[0] + 4)? as u64;
    if pid != 0 && pid != super::child::pid_of(p) {
        return Err(Errno::EPERM);
    }
    let sets = mem.read(a[1], 12 * words)?;
    if sets.iter().any(|&b| b != 0) {
        return Err(Errno::EPERM);
    }
    Ok(0)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 125, name: "capget", handler: sys_capget, support: Support::Full,
        note: "no capabilities: every set is empty" },
    SyscallEntry { nr: 126, name: "capset", handler: sys_capset, support: Support::Partial,
        note: "its own sets, to empty (all they can be); more is EPERM" },
    SyscallEntry { nr: 157, name: "prctl", handler: sys_prctl, support: Support::Partial,
        note: "names, parent-death signal, subreaper, dumpable, keepcaps, timer slack, no_new_privs, THP, capability queries; no seccomp (PR_SET_SECCOMP is EINVAL); others EINVAL" },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::{test_call, test_process};

    #[test]
    fn settings_round_trip_and_bad_values_are_einval() {
        let (mut p, mut m, _) = test_process();
        let mut call = |a: &[u64]| test_call(&mut p, &mut m, sys_prctl, a);
        assert_eq!(call(&[PR_GET_DUMPABLE]), Ok(1));
        assert_eq!(call(&[PR_SET_DUMPABLE, 2]), Err(Errno::EINVAL));
        assert_eq!(call(&[PR_SET_DUMPABLE, 0]), Ok(0));
        assert_eq!(call(&[PR_GET_DUMPABLE]), Ok(0));
        assert_eq!(call(&[PR_GET_TIMERSLACK]), Ok(DEFAULT_TIMER_SLACK_NS));
        assert_eq!(call(&[PR_SET_TIMERSLACK, 1000]), Ok(0));
        assert_eq!(call(&[PR_GET_TIMERSLACK]), Ok(1000));
        assert_eq!(call(&[PR_SET_NO_NEW_PRIVS, 0]), Err(Errno::EINVAL));
        assert_eq!(call(&[PR_SET_NO_NEW_PRIVS, 1, 1]), Err(Errno::EINVAL));
        assert_eq!(call(&[PR_SET_NO_NEW_PRIVS, 1]), Ok(0));
        assert_eq!(call(&[PR_GET_NO_NEW_PRIVS]), Ok(1));
        assert_eq!(call(&[PR_CAPBSET_READ, 0]), Ok(1));
        assert_eq!(call(&[PR_CAPBSET_READ, 41]), Err(Errno::EINVAL));
        assert_eq!(call(&[PR_CAP_AMBIENT, 2, 0]), Err(Errno::EPERM));
        assert_eq!(call(&[PR_SET_PDEATHSIG, 65]), Err(Errno::EINVAL));
        assert_eq!(
            call(&[0xffff_ffff_0000_0000 | PR_GET_KEEPCAPS]),
            Ok(0),
            "the option is an int"
        );
        assert_eq!(call(&[12345]), Err(Errno::EINVAL));
    }

    #[test]
    fn capabilities_are_empty_and_stay_so() {
        let (mut p, mut m, buf) = test_process();
        let (hdr, data) = (buf, buf + 64);
        m.write_u32(hdr, CAP_VERSION_3).unwrap();
        m.write_u32(hdr + 4, 0).unwrap();
        m.write(data, &[0xff; 24]).unwrap();
        assert_eq!(test_call(&mut p, &mut m, sys_capget, &[hdr, data]), Ok(0));
        assert_eq!(m.read(data, 24).unwrap(), [0; 24]);
        assert_eq!(test_call(&mut p, &mut m, sys_capset, &[hdr, data]), Ok(0));
        m.write_u32(data + 4, 1 << 12).unwrap();
        assert_eq!(
            test_call(&mut p, &mut m, sys_capset, &[hdr, data]),
            Err(Errno::EPERM)
        );
        // An unknown version: the kernel's is written back.
        m.write_u32(hdr, 1).unwrap();
        assert_eq!(test_call(&mut p, &mut m, sys_capget, &[hdr, 0]), Ok(0));
        assert_eq!(m.read_u32(hdr), Ok(CAP_VERSION_3));
        m.write_u32(hdr, 1).unwrap();
        assert_eq!(
            test_call(&mut p, &mut m, sys_capget, &[hdr, data]),
            Err(Errno::EINVAL)
        );
        m.write_u32(hdr, CAP_VERSION_1).unwrap();
        m.write_u32(hdr + 4, 424242).unwrap();
        assert_eq!(
            test_call(&mut p, &mut m, sys_capget, &[hdr, data]),
            Err(Errno::ESRCH)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_capget, &[1 << 40, data]),
            Err(Errno::EFAULT)
        );
    }
}
