//! Threads and futexes. The guest has one thread, so a futex wait can only
//! be woken by a timeout; waking finds no waiters.

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::time::Duration;

const FUTEX_WAIT: u64 = 0;
const FUTEX_WAKE: u64 = 1;
const FUTEX_REQUEUE: u64 = 3;
const FUTEX_CMP_REQUEUE: u64 = 4;
const FUTEX_WAKE_OP: u64 = 5;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAKE_BITSET: u64 = 10;
const FUTEX_CMD_MASK: u64 = !(128 | 256); // PRIVATE_FLAG, CLOCK_REALTIME

/// Implements futex(2) for a single-threaded process.
fn sys_futex(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [uaddr, op, val, timeout, _uaddr2, val3] = *a;
    if uaddr % 4 != 0 {
        return Err(Errno::EINVAL);
    }
    match op & FUTEX_CMD_MASK {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            if op & FUTEX_CMD_MASK == FUTEX_WAIT_BITSET && val3 as u32 == 0 {
                return Err(Errno::EINVAL);
            }
            if mem.read_u32(uaddr)? != val as u32 {
                return Err(Errno::EAGAIN);
            }
            if timeout == 0 {
                // Nobody else can ever change the word: a real kernel would hang here.
                tracing::warn!("futex wait with no other thread and no timeout: deadlock");
                p.exit_status = Some(128 + 6);
                p.killed_by = Some(6);
                return Err(Errno::EDEADLK);
            }
            let sec = mem.read_u64(timeout)?;
            let nsec = mem.read_u64(timeout + 8)?;
            if nsec >= 1_000_000_000 {
                return Err(Errno::EINVAL);
            }
            if op & FUTEX_CMD_MASK == FUTEX_WAIT {
                // Relative timeout: sleep it out (a watchdog kick ends it early).
                let d = Duration::new(sec, nsec as u32);
                let req = rustix::time::Timespec {
                    tv_sec: d.as_secs() as i64,
                    tv_nsec: d.subsec_nanos() as _,
                };
                if let rustix::thread::NanosleepRelativeResult::Interrupted(_) =
                    rustix::thread::nanosleep(&req)
                {
                    return Err(Errno::EINTR);
                }
            } else {
                let clock = if op & 256 != 0 {
                    rustix::thread::ClockId::Realtime
                } else {
                    rustix::thread::ClockId::Monotonic
                };
                let req = rustix::time::Timespec {
                    tv_sec: sec as i64,
                    tv_nsec: nsec as _,
                };
                if rustix::thread::clock_nanosleep_absolute(clock, &req).is_err() {
                    return Err(Errno::EINTR);
                }
            }
            Err(Errno::ETIMEDOUT)
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => Ok(0),
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE => {
            if op & FUTEX_CMD_MASK == FUTEX_CMP_REQUEUE && mem.read_u32(uaddr)? != val3 as u32 {
                return Err(Errno::EAGAIN);
            }
            Ok(0)
        }
        FUTEX_WAKE_OP => Ok(0),
        _ => Err(Errno::ENOSYS),
    }
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[SyscallEntry {
    nr: 202,
    name: "futex",
    handler: sys_futex,
    support: Support::Partial,
    note: "single thread: waits time out or report a deadlock; wakes find no waiters; PI futexes are ENOSYS",
}];
