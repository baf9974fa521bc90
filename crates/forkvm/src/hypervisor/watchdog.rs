//! Wall-clock limits for guest runs, even for guests that never exit.
//!
//! One background thread serves every VM in the process. Arming returns a
//! guard; when its deadline passes, the thread marks it expired and sends a
//! signal to the vCPU's thread every millisecond until the guard is dropped.
//! The signal interrupts `KVM_RUN` (EINTR); the run loop sees the flag and
//! stops. Repeating the kick closes the race where the first signal lands
//! just before the thread enters `KVM_RUN`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

struct Entry {
    deadline: Instant,
    thread: libc::pthread_t,
    expired: Arc<AtomicBool>,
    /// A periodic tick (thread preemption) instead of a one-off deadline.
    period: Option<Duration>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    entries: BTreeMap<u64, Entry>,
    /// When the watchdog thread will look next on its own (None: it is busy).
    next_wake: Option<Instant>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

extern "C" fn on_kick(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

/// The signal used to kick a vCPU thread out of KVM_RUN.
fn kick_signal() -> libc::c_int {
    vmm_sys_util::signal::SIGRTMIN() + 2
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<&'static Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        if let Err(e) = vmm_sys_util::signal::register_signal_handler(kick_signal(), on_kick) {
            tracing::error!("cannot install the vCPU kick handler: {e}");
        }
        let s: &'static Shared = Box::leak(Box::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        }));
        if let Err(e) = std::thread::Builder::new()
            .name("forkvm-watchdog".into())
            .spawn(move || watch(s))
        {
            tracing::error!("cannot start the watchdog thread: {e}");
        }
        s
    })
}

fn watch(s: &'static Shared) {
    let Ok(mut st) = s.state.lock() else { return };
    loop {
        let now = Instant::now();
        let mut wait = Duration::from_secs(3600);
        for e in st.entries.values_mut() {
            if let (Some(period), true) = (e.period, e.deadline <= now) {
                // SAFETY: as below: the guard keeps the thread alive.
                unsafe { libc::pthread_kill(e.thread, kick_signal()) };
                e.deadline = now + period;
                wait = wait.min(period);
                continue;
            }
            if e.deadline <= now {
                e.expired.store(true, Ordering::SeqCst);
                // SAFETY: the thread id belongs to a thread that is alive: it
                // holds the guard, whose Drop removes this entry (under the
                // same lock) before the thread can exit.
                unsafe { libc::pthread_kill(e.thread, kick_signal()) };
                wait = wait.min(Duration::from_millis(1));
            } else {
                wait = wait.min(e.deadline - now);
            }
        }
        st.next_wake = Some(now + wait);
        st = match s.wake.wait_timeout(st, wait) {
            Ok((g, _)) => g,
            Err(_) => return,
        };
        st.next_wake = None;
    }
}

/// Holds kicks off the calling thread while it lives: they stay pending and
/// land when it drops, at no loss (deadlines and ticks kick again and the
/// run loop looks at their flags). For ioctls a signal would interrupt with
/// EINTR: KVM_CREATE_VM takes ~0.75 ms on PVM, more under load, and a child
/// process's 10 ms tick made an execve in the guest fail (ENOEXEC) for it.
pub struct KicksHeld {
    old: libc::sigset_t,
    /// A signal mask is per thread: the guard stays on the thread it was
    /// made on (not Send).
    _here: std::marker::PhantomData<*const ()>,
}

impl KicksHeld {
    /// Blocks the kick signal for the calling thread.
    pub fn new() -> Self {
        // SAFETY: sigset_t is plain data; sigemptyset/sigaddset initialise
        // it, and pthread_sigmask only reads `set` and writes `old`, both
        // valid for the call.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, kick_signal());
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            Self {
                old,
                _here: std::marker::PhantomData,
            }
        }
    }
}

impl Default for KicksHeld {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for KicksHeld {
    fn drop(&mut self) {
        // SAFETY: `old` is the mask `new` saved on this same thread (the
        // guard is not Send), a valid sigset_t.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

/// Deadlines this far away are none: they cannot come in the life of a
/// process.
const NEVER: Duration = Duration::from_secs(100 * 365 * 86400);

/// An armed deadline for the current thread; disarmed on drop.
pub struct Deadline {
    id: u64,
    expired: Arc<AtomicBool>,
}

impl Deadline {
    /// Arms a deadline `after` from now for the calling thread.
    pub fn arm(after: Duration) -> Self {
        Self::add(after, None)
    }

    /// Kicks the calling thread out of KVM_RUN every `period` until dropped
    /// (never "expires"): the tick that preempts guest threads.
    pub fn tick(period: Duration) -> Self {
        Self::add(period, Some(period))
    }

    fn add(after: Duration, period: Option<Duration>) -> Self {
        let expired = Arc::new(AtomicBool::new(false));
        let Some(deadline) = Instant::now().checked_add(after).filter(|_| after < NEVER) else {
            // No limit (`forkvm run` without --timeout): nothing to watch,
            // and no watchdog thread to start for it.
            return Self { id: 0, expired };
        };
        let s = shared();
        let mut wake = true;
        let id = match s.state.lock() {
            Ok(mut st) => {
                // Waking the watchdog costs a thread switch: only when it
                // would otherwise look too late (arming a 10 s call timeout
                // for every request should not wake it every time).
                wake = st.next_wake.is_none_or(|w| deadline < w);
                st.next_id += 1;
                let id = st.next_id;
                st.entries.insert(
                    id,
                    Entry {
                        deadline,
                        // SAFETY: pthread_self has no preconditions.
                        thread: unsafe { libc::pthread_self() },
                        expired: expired.clone(),
                        period,
                    },
                );
                id
            }
            Err(_) => 0,
        };
        if wake {
            s.wake.notify_one();
        }
        Self { id, expired }
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        self.expired.load(Ordering::SeqCst)
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        if self.id == 0 {
            return;
        }
        if let Ok(mut st) = shared().state.lock() {
            st.entries.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limitless_deadline_is_not_watched_and_a_real_one_expires() {
        let none = Deadline::arm(Duration::MAX);
        assert_eq!(none.id, 0, "nothing registered for no limit");
        let soon = Deadline::arm(Duration::from_millis(1));
        assert_ne!(soon.id, 0);
        // The watchdog kicks this thread once expired; the kick handler is
        // installed by `shared()`, so the signal is harmless here.
        let until = Instant::now() + Duration::from_secs(30);
        while !soon.expired() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(soon.expired());
        assert!(!none.expired());
    }
}
