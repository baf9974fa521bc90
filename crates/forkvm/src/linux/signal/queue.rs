//! Signals waiting to be taken: those pending for a process, and those
//! other processes of the run sent it.

use super::info::code::*;
use super::info::SigInfo;
use super::Errno;

/// Most signals one process may have queued (RLIMIT_SIGPENDING): beyond
/// it, another instance of a signal already pending is refused (EAGAIN for
/// sigqueue) or, sent by kill, dropped, as Linux does. A signal not yet
/// pending always fits, so each number is pending at least once.
pub const MAX_QUEUED: usize = 1024;

/// First real-time signal (the kernel's SIGRTMIN; libcs keep the first few).
const SIGRTMIN: i32 = 32;
const SIGCONT: i32 = 18;
const SIGCHLD: i32 = 17;
/// SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU.
const STOP_SIGNALS: u64 = 0xf << 18;

/// The bit of `s`'s signal in a set (bit n-1 for signal n).
fn bit(s: &SigInfo) -> u64 {
    1 << ((s.signo - 1) & 63)
}

/// Signals pending for a process, each with what it carries: a standard
/// signal at most once (another is merged into it), a real-time one once
/// per send, in the order sent.
#[derive(Debug, Clone, Default)]
pub struct Pending {
    list: std::collections::VecDeque<SigInfo>,
    /// Bit n-1 for each signal n in `list`.
    bits: u64,
}

impl Pending {
    /// The pending signals (bit n-1 for signal n).
    pub fn bits(&self) -> u64 {
        self.bits
    }

    /// Whether none is pending.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Queues `info` (see [`MAX_QUEUED`]): EAGAIN when a real-time signal
    /// other than kill's does not fit.
    pub fn push(&mut self, info: SigInfo) -> Result<(), Errno> {
        if !(1..=64).contains(&info.signo) {
            return Err(Errno::EINVAL);
        }
        // As Linux, when it is sent: SIGCONT discards pending stop signals,
        // a stop signal a pending SIGCONT (the last sent wins, whatever
        // order they are taken in).
        match info.signo {
            SIGCONT => self.discard(STOP_SIGNALS),
            19..=22 => self.discard(1 << (SIGCONT - 1)),
            _ => {}
        }
        let bit = 1u64 << (info.signo - 1);
        // One instance per receiver: the process, or one of its threads.
        let dup = self.bits & bit != 0
            && self
                .list
                .iter()
                .any(|s| s.signo == info.signo && s.thread == info.thread);
        if dup {
            if info.signo < SIGRTMIN {
                // One instance of a standard signal. A SIGCHLD keeps the
                // news of a child's end over that of a stop or continue,
                // which the receiver drops under SA_NOCLDSTOP (the end was
                // lost with it, and a shell's `wait` hung).
                let stop_news = |code| matches!(code, CLD_STOPPED | CLD_CONTINUED);
                if info.signo == SIGCHLD && !stop_news(info.code) {
                    let older = self
                        .list
                        .iter_mut()
                        .find(|s| s.signo == SIGCHLD && s.thread == info.thread);
                    if let Some(older) = older.filter(|s| stop_news(s.code)) {
                        *older = info;
                    }
                }
                return Ok(());
            }
            if self.list.len() >= MAX_QUEUED {
                return if info.code == SI_USER {
                    Ok(())
                } else {
                    Err(Errno::EAGAIN)
                };
            }
        }
        self.list.push_back(info);
        self.bits |= bit;
        Ok(())
    }

    /// Drops every pending signal of `set`.
    pub fn discard(&mut self, set: u64) {
        if self.bits & set != 0 {
            self.list.retain(|s| set & (bit(s)) == 0);
            self.bits &= !set;
        }
    }

    /// The signals thread `tid` may take: those sent to it or to the process.
    pub fn bits_for(&self, tid: u64) -> u64 {
        self.sent_to(0) | self.sent_to(tid)
    }

    /// The signals sent to `thread` (0: to the process).
    pub fn sent_to(&self, thread: u64) -> u64 {
        if self.bits == 0 {
            return 0;
        }
        self.bits_of(|s| s.thread == thread)
    }

    /// The signals of the queued ones `which` selects.
    fn bits_of(&self, which: impl Fn(&SigInfo) -> bool) -> u64 {
        self.list
            .iter()
            .filter(|s| which(s))
            .fold(0, |b, s| b | bit(s))
    }

    /// Takes, for thread `tid`, the first sent of the lowest-numbered
    /// signal of `set` sent to it, else of those sent to the process (as
    /// Linux's dequeue_signal looks at the thread's own queue first).
    pub fn take(&mut self, set: u64, tid: u64) -> Option<SigInfo> {
        if self.bits & set == 0 {
            return None;
        }
        let lowest = |thread: u64| {
            self.list
                .iter()
                .filter(|s| s.thread == thread && set & (bit(s)) != 0)
                .map(|s| s.signo)
                .min()
                .map(|signo| (signo, thread))
        };
        let (signo, thread) = lowest(tid).filter(|_| tid != 0).or_else(|| lowest(0))?;
        let i = self
            .list
            .iter()
            .position(|s| s.signo == signo && s.thread == thread)?;
        let info = self.list.remove(i)?;
        if !self.list.iter().any(|s| s.signo == signo) {
            self.bits &= !(1 << (signo - 1));
        }
        Some(info)
    }

    /// If the signal of POSIX timer `id` is still queued, counts `missed`
    /// more expiries into its overrun and returns true: Linux queues one
    /// signal per timer at a time.
    pub fn add_overrun(&mut self, id: i32, missed: u64) -> bool {
        let Some(i) = self
            .list
            .iter_mut()
            .find(|s| s.code == SI_TIMER && s.timer == id)
        else {
            return false;
        };
        let missed = i32::try_from(missed).unwrap_or(i32::MAX);
        i.overrun = i.overrun.saturating_add(missed);
        true
    }

    /// How many of the pending signals of `set` thread `tid` may take.
    pub fn count(&self, set: u64, tid: u64) -> usize {
        if self.bits & set == 0 {
            return 0;
        }
        self.list
            .iter()
            .filter(|s| set & (bit(s)) != 0)
            .filter(|s| s.thread == 0 || s.thread == tid)
            .count()
    }

    /// Drops the signals sent to thread `tid`, which ended.
    pub fn forget_thread(&mut self, tid: u64) {
        if self.list.iter().any(|s| s.thread == tid) {
            self.list.retain(|s| s.thread != tid);
            self.bits = self.bits_of(|_| true);
        }
    }

    /// After an exec by thread `old`, which goes on as thread `new`: its
    /// own signals follow it, the other threads' are gone with them.
    pub fn exec_by(&mut self, old: u64, new: u64) {
        self.list.retain(|s| s.thread == 0 || s.thread == old);
        for s in self.list.iter_mut().filter(|s| s.thread == old) {
            s.thread = new;
        }
        self.bits = self.bits_of(|_| true);
    }
}

/// Signals other processes of the run sent to one process, with what each
/// carries, until it takes them at its next system call
/// (`child::take_signals`). Bounded like [`Pending`].
#[derive(Debug, Default)]
pub struct Inbox {
    /// Whether any waits: looked at on every call, without the lock.
    any: std::sync::atomic::AtomicBool,
    queue: std::sync::Mutex<Pending>,
}

impl Inbox {
    /// Whether signals wait to be taken.
    pub fn waiting(&self) -> bool {
        self.any.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Adds `info` (EAGAIN when it does not fit, see [`Pending::push`]).
    pub fn push(&self, info: SigInfo) -> Result<(), Errno> {
        let mut q = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        q.push(info)?;
        self.any.store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Takes every waiting signal.
    pub fn take(&self) -> Pending {
        let mut q = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.any.store(false, std::sync::atomic::Ordering::Release);
        std::mem::take(&mut *q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signal sent to one thread is that thread's to take; the process's
    /// are anyone's, after the thread's own.
    #[test]
    fn a_thread_takes_its_own_signals_then_the_process_s() {
        let sent = |signo, thread| SigInfo {
            signo,
            thread,
            ..SigInfo::default()
        };
        let mut q = Pending::default();
        q.push(sent(10, 7)).unwrap();
        q.push(sent(10, 0)).unwrap();
        q.push(sent(12, 8)).unwrap();
        q.push(sent(10, 7)).unwrap();
        assert_eq!(
            q.count(u64::MAX, 7),
            2,
            "one SIGUSR1 each for thread 7 and the process"
        );
        assert_eq!(q.bits_for(9), 1 << 9);
        assert_eq!(q.sent_to(8), 1 << 11);
        assert_eq!(q.take(1 << 11, 7), None, "thread 8's SIGUSR2");
        assert_eq!(q.take(u64::MAX, 7).map(|s| s.thread), Some(7));
        assert_eq!(q.take(u64::MAX, 7).map(|s| s.thread), Some(0));
        assert_eq!(q.take(u64::MAX, 7), None);
        q.push(sent(14, 8)).unwrap();
        q.forget_thread(8);
        assert_eq!(q.bits(), 0);
        q.push(sent(10, 5)).unwrap();
        q.push(sent(12, 6)).unwrap();
        q.exec_by(5, 1);
        assert_eq!((q.sent_to(1), q.bits()), (1 << 9, 1 << 9));
    }

    #[test]
    fn a_childs_end_is_not_merged_away_behind_news_of_a_stop() {
        let chld = |code| SigInfo {
            signo: 17,
            code,
            ..SigInfo::default()
        };
        let mut q = Pending::default();
        q.push(chld(CLD_CONTINUED)).unwrap();
        q.push(chld(CLD_KILLED)).unwrap();
        assert_eq!(q.take(u64::MAX, 0).map(|s| s.code), Some(CLD_KILLED));
        assert!(q.is_empty());
        q.push(chld(CLD_EXITED)).unwrap();
        q.push(chld(CLD_STOPPED)).unwrap();
        assert_eq!(q.take(u64::MAX, 0).map(|s| s.code), Some(CLD_EXITED));
    }

    #[test]
    fn the_last_of_stop_and_continue_sent_wins() {
        let sig = |signo| SigInfo {
            signo,
            ..SigInfo::default()
        };
        let mut q = Pending::default();
        q.push(sig(19)).unwrap(); // SIGSTOP
        q.push(sig(18)).unwrap(); // SIGCONT
        assert_eq!(q.take(u64::MAX, 0).map(|s| s.signo), Some(18));
        assert!(q.is_empty(), "the stop sent before SIGCONT is gone");
        q.push(sig(18)).unwrap();
        q.push(sig(15)).unwrap();
        q.push(sig(20)).unwrap(); // SIGTSTP
        assert_eq!(q.take(u64::MAX, 0).map(|s| s.signo), Some(15));
        assert_eq!(q.take(u64::MAX, 0).map(|s| s.signo), Some(20));
        assert!(q.is_empty(), "the SIGCONT sent before the stop is gone");
    }

    #[test]
    fn standard_signals_merge_real_time_ones_queue_in_order_and_are_bounded() {
        let mut q = Pending::default();
        let rt = |sig: u64, v: u64| SigInfo {
            code: SI_QUEUE,
            value: v,
            ..SigInfo::user(sig, 2)
        };
        q.push(rt(35, 1)).unwrap();
        q.push(SigInfo::user(10, 2)).unwrap();
        q.push(SigInfo::user(10, 3)).unwrap();
        q.push(rt(34, 2)).unwrap();
        q.push(rt(35, 3)).unwrap();
        assert_eq!(q.count(u64::MAX, 0), 4, "the second SIGUSR1 merged");
        assert_eq!(q.bits(), (1 << 9) | (1 << 33) | (1 << 34));
        let order: Vec<_> = std::iter::from_fn(|| q.take(u64::MAX, 0))
            .map(|i| (i.signo, i.pid, i.value))
            .collect();
        assert_eq!(order, [(10, 2, 0), (34, 2, 2), (35, 2, 1), (35, 2, 3)]);
        assert!(q.is_empty() && q.bits() == 0);
        // Bounded: further instances are refused (kill's dropped), but a
        // signal not yet pending still gets in.
        for v in 0..MAX_QUEUED as u64 {
            q.push(rt(40, v)).unwrap();
        }
        assert_eq!(q.push(rt(40, 0)), Err(Errno::EAGAIN));
        assert_eq!(q.push(SigInfo::user(40, 2)), Ok(()));
        assert_eq!(q.count(1 << 39, 0), MAX_QUEUED);
        q.push(rt(41, 0)).unwrap();
        q.push(SigInfo::user(12, 2)).unwrap();
        assert_eq!(q.count(u64::MAX, 0), MAX_QUEUED + 2);
        assert_eq!(q.push(SigInfo::user(65, 2)), Err(Errno::EINVAL));
        assert_eq!(q.push(SigInfo::user(0, 2)), Err(Errno::EINVAL));
        // A timer's signal still queued gathers the expiries as overrun.
        assert!(!q.add_overrun(3, 1));
        q.push(SigInfo::timer(42, 3, 0, 9)).unwrap();
        assert!(q.add_overrun(3, 2) && q.add_overrun(3, 1));
        assert_eq!(q.take(1 << 41, 0).map(|i| i.overrun), Some(3));
    }
}
