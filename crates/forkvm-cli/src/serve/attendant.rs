//! Keeps the runtime's I/O attended while VM calls block runtime threads.
//!
//! A VM call runs on the runtime thread of the task that makes it (see
//! `super::workers`). tokio's I/O driver (epoll, timers) is polled by one
//! parked worker thread at a time; the others sleep on a condition variable
//! and are woken only for new tasks. A thread that the driver woke for the
//! request it then serves leaves the driver to nobody until it parks again:
//! harmless for a call of a few hundred microseconds, but a long one (a slow
//! handler, a request stopped in gdb, the per-connection pump) would leave
//! every other connection unheard for as long (a hang found by
//! `gdb_serve`'s test one run in four under load).
//!
//! So each worker VM has a slot saying since when it blocks a thread, and
//! one thread looks at the slots every [`TICK`]: for a call older than that
//! it spawns an empty task from outside the runtime, which wakes a sleeping
//! worker thread; having nothing else to do, that thread parks on the free
//! driver. The runtime has a thread more than there are VMs, so one is always
//! free for it. Short calls cost two atomic stores; the looking thread stops
//! after a second without calls and is woken by the next one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often calls are looked at, and how old one is before the runtime is
/// kicked for it.
pub const TICK: Duration = Duration::from_millis(2);

/// Without calls for this long, the looking thread sleeps until the next.
const REST_AFTER: Duration = Duration::from_secs(1);

pub struct Attendant {
    base: Instant,
    /// Per worker VM: when its current blocking section began (nanoseconds
    /// since `base`, plus one), or 0.
    since: Vec<AtomicU64>,
    /// The looking thread sleeps until a call begins.
    resting: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Attendant {
    /// Slots for `workers` VMs; nothing looks at them until [`start`](Self::start).
    pub fn new(workers: usize) -> Arc<Self> {
        Arc::new(Self {
            base: Instant::now(),
            since: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            resting: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        })
    }

    /// Starts the looking thread for `runtime` (before the host's seccomp
    /// filter is installed: it creates a thread).
    pub fn start(self: &Arc<Self>, runtime: tokio::runtime::Handle) -> std::io::Result<()> {
        let me = self.clone();
        std::thread::Builder::new()
            .name("forkvm-attend".into())
            .spawn(move || me.look(runtime))
            .map(drop)
    }

    /// Runs `f`, which blocks this thread in worker VM `slot`.
    pub fn blocking<R>(&self, slot: usize, f: impl FnOnce() -> R) -> R {
        let Some(s) = self.since.get(slot) else {
            return f();
        };
        let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        s.store(now + 1, Ordering::SeqCst);
        if self.resting.load(Ordering::SeqCst) {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.resting.store(false, Ordering::SeqCst);
            self.wake.notify_one();
        }
        // Cleared however `f` ends, so a slot never reads busy forever.
        struct Clear<'a>(&'a AtomicU64);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                self.0.store(0, Ordering::SeqCst);
            }
        }
        let _clear = Clear(s);
        f()
    }

    fn look(&self, runtime: tokio::runtime::Handle) {
        // The call each slot was last kicked for.
        let mut kicked = vec![0u64; self.since.len()];
        let mut last_call = Instant::now();
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            guard = match self.wake.wait_timeout(guard, TICK) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
            let now = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let tick = TICK.as_nanos() as u64;
            let mut busy = false;
            for (s, k) in self.since.iter().zip(kicked.iter_mut()) {
                let since = s.load(Ordering::SeqCst);
                if since == 0 {
                    continue;
                }
                busy = true;
                if since != *k && now.saturating_sub(since - 1) >= tick {
                    *k = since;
                    // From outside the runtime: wakes a sleeping worker.
                    drop(runtime.spawn(async {}));
                }
            }
            if busy {
                last_call = Instant::now();
                continue;
            }
            if last_call.elapsed() < REST_AFTER {
                continue;
            }
            // Rest, unless a call began meanwhile (it stores its slot before
            // it reads `resting`; this stores `resting` before it reads the
            // slots: one of the two sees the other).
            self.resting.store(true, Ordering::SeqCst);
            if self.since.iter().any(|s| s.load(Ordering::SeqCst) != 0) {
                self.resting.store(false, Ordering::SeqCst);
                continue;
            }
            while self.resting.load(Ordering::SeqCst) {
                guard = self.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            last_call = Instant::now();
        }
    }
}
