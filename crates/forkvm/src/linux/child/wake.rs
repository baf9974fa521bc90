//! Waking a run's waiting processes when another process of the run may
//! have made their calls ready (a pipe written or read, a socket's peer, a
//! lock let go, a signal sent, an exit).
//!
//! Each process runs on its own host thread. One whose threads all wait
//! sleeps between looks at its calls; without a wake-up it looked again only
//! every millisecond, so a pipe's round trip between two processes took
//! ~1.3 ms instead of ~10 µs natively. Now a process that may have made
//! another's call ready bumps the run's epoch, and a sleeping process wakes
//! when the epoch moved past what it had seen before its last look: no
//! wake-up is lost, and the periodic look stays as the backstop for what
//! does not bump (a timer, the host).

use crate::linux::{Args, Process};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A run's wake-up epoch and its sleepers.
#[derive(Debug, Default)]
pub struct Wake {
    epoch: AtomicU64,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Wake {
    /// The epoch now: read before looking at whether a call is ready.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Something another process may wait for changed: wakes the sleepers.
    pub fn notify(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        // A sleeper counted itself before it read the epoch (SeqCst both):
        // either it sees this bump, or it is counted here and woken.
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.cv.notify_all();
        }
    }

    /// Sleeps up to `d` unless the epoch moves past `seen`; true if it did.
    pub fn sleep(&self, d: Duration, seen: u64) -> bool {
        let until = Instant::now() + d;
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let woken = loop {
            if self.epoch() != seen {
                break true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break false;
            }
            g = self
                .cv
                .wait_timeout(g, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        drop(g);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        woken
    }
}

/// Whether a completed call may have made another process's call ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// No.
    Quiet,
    /// Yes: an end closed, a futex woken, a lock let go, a signal sent, a
    /// connection made, a process ended.
    Always,
    /// If its descriptor (the first argument) is a pipe, socket or event
    /// object: data moved, or room made.
    OnFd,
}

/// What call `nr` may do for other processes (one jump table on the
/// dispatch path, by libc's names of the numbers).
#[allow(non_upper_case_globals)]
pub fn call_kind(nr: u64) -> CallKind {
    use libc::*;
    let Ok(nr) = c_long::try_from(nr) else {
        return CallKind::Quiet;
    };
    match nr {
        SYS_read | SYS_write | SYS_readv | SYS_writev | SYS_preadv | SYS_pwritev | SYS_sendto
        | SYS_recvfrom | SYS_sendmsg | SYS_recvmsg | SYS_sendmmsg | SYS_recvmmsg | SYS_ioctl => {
            CallKind::OnFd
        }
        SYS_sendfile
        | SYS_splice
        | SYS_tee
        | SYS_vmsplice
        | SYS_close
        | SYS_close_range
        | SYS_dup2
        | SYS_dup3
        | SYS_shutdown
        | SYS_connect
        | SYS_accept
        | SYS_accept4
        | SYS_futex
        | SYS_flock
        | SYS_fcntl
        | SYS_kill
        | SYS_tkill
        | SYS_tgkill
        | SYS_rt_sigqueueinfo
        | SYS_rt_tgsigqueueinfo
        | SYS_pidfd_send_signal
        | SYS_exit
        | SYS_exit_group
        | SYS_openat
        | SYS_shmdt
        | SYS_shmctl => CallKind::Always,
        _ => CallKind::Quiet,
    }
}

/// A process's side of the wake-ups: what it saw, and how often it was
/// woken for nothing.
#[derive(Debug, Clone, Default)]
pub struct Waiter {
    /// The run's epoch as the process first looked at its calls since it
    /// last slept: a sleep ends at once if it moved since.
    seen: Option<u64>,
    /// The process's `progress` when another process last woke it.
    woken_at: Option<u64>,
    /// Wake-ups in a row after which nothing of its own completed.
    vain: u32,
}

/// Notes the run's wake-up epoch before the process looks at a call (the
/// first look since it last slept counts).
pub(in crate::linux) fn note_wake_epoch(p: &mut Process) {
    if p.waiter.seen.is_none() {
        if let Some(f) = &p.family {
            p.waiter.seen = Some(f.tree.wake.epoch());
        }
    }
}

/// After call `nr` completed: wakes the run's sleeping processes if the
/// call may have made one of theirs ready.
pub(in crate::linux) fn wake_others_after(p: &Process, nr: u64, args: &Args) {
    let Some(f) = &p.family else { return };
    let wakes = match call_kind(nr) {
        CallKind::Quiet => false,
        CallKind::Always => true,
        // Data through a descriptor: only a pipe, socket or event object
        // is something another process may wait on (not a file, nor
        // /dev/null: a child writing a log must not wake its waiting parent
        // at every line).
        CallKind::OnFd => p.fds.get(args[0] as i32).is_ok_and(|f| {
            matches!(
                crate::linux::fdtable::lock(&f).kind,
                crate::linux::fdtable::FileKind::Pipe(_)
                    | crate::linux::fdtable::FileKind::Socket(_)
                    | crate::linux::fdtable::FileKind::Event(_)
                    | crate::linux::fdtable::FileKind::Pty(_)
            )
        }),
    };
    if wakes {
        f.tree.wake.notify();
    }
}

/// Shortest and longest pause before a process that was woken in vain
/// (nothing of its own completed since) may be woken again.
const VAIN_WAKE_MIN: Duration = Duration::from_micros(50);
const VAIN_WAKE_MAX: Duration = Duration::from_millis(1);
/// Vain wake-ups in a row that cost no pause.
const FREE_VAIN_WAKES: u32 = 4;

/// Sleeps up to `d` while every thread of the process waits; true if
/// another process of the run changed something since the process last
/// looked (its threads should look again), false when `d` ran out. A
/// process woken again and again for others' business (nothing of its own
/// completed in between) pauses longer each time first, up to the periodic
/// look's interval.
pub fn sleep_until_woken(p: &mut Process, d: Duration) -> bool {
    let w = &mut p.waiter;
    let seen = w.seen.take();
    // A few in a row are normal (a pipe's reader woken by the write of the
    // other pipe it does not wait on); beyond that, the pause grows.
    w.vain = match w.woken_at == Some(p.progress) {
        true => w.vain.saturating_add(1),
        false => 0,
    };
    let pause = match w.vain.checked_sub(FREE_VAIN_WAKES) {
        Some(n) => VAIN_WAKE_MIN
            .saturating_mul(1 << n.min(8))
            .min(VAIN_WAKE_MAX)
            .min(d),
        None => Duration::ZERO,
    };
    let (Some(f), Some(seen)) = (&p.family, seen) else {
        std::thread::sleep(d);
        return false;
    };
    if !pause.is_zero() {
        std::thread::sleep(pause);
    }
    let woken = f.tree.wake.sleep(d - pause, seen);
    p.waiter.woken_at = woken.then_some(p.progress);
    woken
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn calls_are_sorted_by_what_they_may_do_for_others() {
        assert_eq!(call_kind(libc::SYS_write as u64), CallKind::OnFd);
        assert_eq!(call_kind(libc::SYS_recvmsg as u64), CallKind::OnFd);
        assert_eq!(call_kind(libc::SYS_close as u64), CallKind::Always);
        assert_eq!(call_kind(libc::SYS_futex as u64), CallKind::Always);
        assert_eq!(call_kind(libc::SYS_getpid as u64), CallKind::Quiet);
        assert_eq!(call_kind(u64::MAX), CallKind::Quiet);
    }

    #[test]
    fn a_bump_after_the_look_ends_the_sleep_and_none_is_lost() {
        let w = Arc::new(Wake::default());
        // Bumped between the look and the sleep: no sleep at all.
        let seen = w.epoch();
        w.notify();
        assert!(w.sleep(Duration::from_secs(60), seen));
        // Bumped while asleep: woken.
        let seen = w.epoch();
        let other = {
            let w = w.clone();
            std::thread::spawn(move || {
                while w.sleepers.load(Ordering::SeqCst) == 0 {
                    std::thread::yield_now();
                }
                w.notify();
            })
        };
        assert!(w.sleep(Duration::from_secs(60), seen));
        other.join().unwrap();
        // Nothing: the sleep runs out.
        assert!(!w.sleep(Duration::from_millis(5), w.epoch()));
    }
}
