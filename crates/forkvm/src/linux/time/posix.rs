//! POSIX per-process timers (timer_create and friends) and the CPU time
//! of each guest thread, which timers on a thread's CPU clock follow.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How an expiry is announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notify {
    /// SIGEV_NONE: nothing (timer_gettime shows the progress).
    None,
    /// SIGEV_SIGNAL: this signal to the process.
    Signal(u64),
    /// SIGEV_THREAD_ID: this signal to that thread.
    Thread(u64, u64),
}

/// One timer.
#[derive(Debug, Clone)]
pub struct Timer {
    /// The clock it was created on.
    pub clock: u64,
    /// What an expiry does.
    pub notify: Notify,
    /// Next expiry, if armed.
    pub next: Option<Instant>,
    /// Period (zero: one shot).
    pub interval: Duration,
    /// Expirations folded into the last signal (timer_getoverrun).
    pub overrun: u64,
    /// `sigev_value`, which its signal carries (the id without a sigevent).
    pub value: u64,
    /// A CPU-time timer: whose CPU time it follows (0: the process's,
    /// else that thread's), and the CPU time of its next expiry.
    pub cpu: Option<(u64, Option<Duration>)>,
}

/// The process's timers, by id.
#[derive(Debug, Clone, Default)]
pub struct Timers {
    /// Live timers.
    pub map: BTreeMap<i32, Timer>,
}

impl Timers {
    /// The earliest armed expiry of a wall-clock timer.
    pub fn next_due(&self) -> Option<Instant> {
        self.map.values().filter_map(|t| t.next).min()
    }
}

/// CPU time per guest thread. One vCPU thread runs all of a process's
/// threads, so each one's share is counted at the switches
/// (`Machine::adopt`): a thread that sleeps spends none.
#[derive(Debug, Clone, Default)]
pub struct ThreadCpu {
    /// CPU time of each thread up to its last switch out, by tid.
    spent: std::collections::HashMap<u64, Duration>,
    /// The process's CPU time when the running thread came in.
    mark: Duration,
}

impl ThreadCpu {
    /// Thread `from` leaves the vCPU at process CPU time `now`; the next
    /// one starts counting. Threads `live` does not name are forgotten
    /// once there are many (tids are not reused for long).
    pub fn switch(&mut self, from: u64, now: Duration, live: impl Fn(u64) -> bool) {
        let d = now.saturating_sub(self.mark);
        *self.spent.entry(from).or_default() += d;
        self.mark = now;
        if self.spent.len() > 256 {
            self.spent.retain(|tid, _| live(*tid));
        }
    }

    /// CPU time of thread `tid` at process CPU time `now`, `running`
    /// being the thread on the vCPU.
    pub fn of(&self, tid: u64, running: u64, now: Duration) -> Duration {
        let spent = self.spent.get(&tid).copied().unwrap_or_default();
        if tid == running {
            spent + now.saturating_sub(self.mark)
        } else {
            spent
        }
    }
}
