//! Futexes in shared memory, woken across the run's processes.
//!
//! A thread that waits on a word in a `MAP_SHARED` mapping looks at the word
//! again every millisecond (see `thread::sys_futex`), since another process
//! may change it. That alone missed a wake that changes nothing: LTP's
//! checkpoints (`TST_CHECKPOINT_WAIT`/`WAKE`) wait on a word that stays 0
//! and wake it with FUTEX_WAKE until the wake reports a waiter; the waiter
//! never woke and the waker, told 0 forever, gave up after 10 s. So each
//! such wait is also registered with the run ([`Registry`]), keyed as Linux
//! keys a shared futex: the host object behind the mapping and the offset in
//! it (the same word wherever each process maps it). A FUTEX_WAKE marks up to
//! its count of matching waiters as woken, counts them in its result, and
//! the waiter's next look returns 0. A FUTEX_PRIVATE_FLAG wait or wake keys
//! on the process as well, so it only meets its own process's threads.

use super::Process;
use crate::memory::GuestMemory;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Which futex a word in shared memory is: the host object's (device,
/// inode), the word's offset in it, and for a private futex the pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    dev: u64,
    ino: u64,
    offset: u64,
    private_to: Option<u64>,
}

/// The key of the futex at `uaddr` if it lies in shared memory.
pub fn key(p: &Process, mem: &GuestMemory, uaddr: u64, private: bool) -> Option<Key> {
    let (start, range) = mem.shared_at(uaddr)?;
    let st = rustix::fs::fstat(&*range.backing).ok()?;
    Some(Key {
        dev: st.st_dev,
        ino: st.st_ino,
        offset: range.offset + (uaddr - start),
        private_to: private.then(|| super::child::pid_of(p)),
    })
}

/// One thread's wait on a shared futex; the registry holds it weakly, so a
/// wait that ended (or a process that exited) drops out by itself.
#[derive(Debug)]
pub struct Waiter {
    /// The futex it waits on: the one it waited on, or where a requeue moved it.
    key: Mutex<Key>,
    bitset: u32,
    woken: AtomicBool,
    requeued: AtomicBool,
}

impl Waiter {
    /// Whether a FUTEX_WAKE chose this waiter.
    pub fn woken(&self) -> bool {
        self.woken.load(Ordering::SeqCst)
    }

    /// Whether a FUTEX_REQUEUE moved it to another futex: it then waits
    /// for a wake there, whatever becomes of the word it first waited on.
    pub fn requeued(&self) -> bool {
        self.requeued.load(Ordering::SeqCst)
    }

    fn key(&self) -> Key {
        *self.key.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The run's waits on shared futexes, oldest first.
#[derive(Debug, Default)]
pub struct Registry {
    waiters: Mutex<Vec<Weak<Waiter>>>,
}

impl Registry {
    /// Registers a wait on `key` for the bits of `bitset`.
    pub fn wait(&self, key: Key, bitset: u32) -> Arc<Waiter> {
        let w = Arc::new(Waiter {
            key: Mutex::new(key),
            bitset,
            woken: AtomicBool::new(false),
            requeued: AtomicBool::new(false),
        });
        let mut all = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&w));
        w
    }

    /// Wakes up to `n` waiters on `key` whose bitset meets `bitset`, oldest
    /// first; returns how many.
    pub fn wake(&self, key: Key, n: u64, bitset: u32) -> u64 {
        let mut all = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|w| w.strong_count() > 0);
        let mut woken = 0;
        for w in all.iter().filter_map(Weak::upgrade) {
            if woken >= n {
                break;
            }
            if w.key() == key && w.bitset & bitset != 0 && !w.woken() {
                w.woken.store(true, Ordering::SeqCst);
                woken += 1;
            }
        }
        all.retain(|w| w.upgrade().is_some_and(|w| !w.woken()));
        woken
    }

    /// Moves up to `n` waiters on `from` (not woken) to `to`, oldest first;
    /// returns how many.
    pub fn requeue(&self, from: Key, to: Key, n: u64) -> u64 {
        let all = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        let mut moved = 0;
        for w in all.iter().filter_map(Weak::upgrade) {
            if moved >= n {
                break;
            }
            let mut key = w.key.lock().unwrap_or_else(PoisonError::into_inner);
            if *key == from && !w.woken() {
                *key = to;
                w.requeued.store(true, Ordering::SeqCst);
                moved += 1;
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(offset: u64, private_to: Option<u64>) -> Key {
        Key {
            dev: 1,
            ino: 2,
            offset,
            private_to,
        }
    }

    /// A wake takes the oldest matching waiters up to its count, skips other
    /// words, other bitsets and other processes' private futexes, and never
    /// counts a wait that has ended.
    #[test]
    fn wakes_count_live_matching_waiters() {
        let r = Registry::default();
        let a = r.wait(key(0, None), u32::MAX);
        let b = r.wait(key(0, None), u32::MAX);
        let other_word = r.wait(key(4, None), u32::MAX);
        let other_bits = r.wait(key(0, None), 1);
        let private = r.wait(key(0, Some(7)), u32::MAX);
        assert_eq!(r.wake(key(0, None), 1, 2), 1);
        assert!(a.woken() && !b.woken());
        assert_eq!(r.wake(key(0, None), 5, 2), 1);
        assert!(b.woken() && !other_word.woken() && !other_bits.woken() && !private.woken());
        assert_eq!(r.wake(key(0, Some(8)), 5, u32::MAX), 0);
        assert_eq!(r.wake(key(0, Some(7)), 5, u32::MAX), 1);
        drop(other_bits);
        assert_eq!(r.wake(key(0, None), 5, u32::MAX), 0);
        assert_eq!(r.wake(key(4, None), 5, u32::MAX), 1);
    }

    /// A requeue moves waiters that were not woken, up to its count,
    /// oldest first; a wake on the new word finds them, one on the old does not.
    #[test]
    fn requeued_waiters_wait_on_the_new_word() {
        let r = Registry::default();
        let a = r.wait(key(0, None), u32::MAX);
        let b = r.wait(key(0, None), u32::MAX);
        let c = r.wait(key(0, None), u32::MAX);
        assert_eq!(r.wake(key(0, None), 1, u32::MAX), 1);
        assert_eq!(r.requeue(key(0, None), key(8, None), 1), 1);
        assert!(a.woken() && !a.requeued());
        assert!(b.requeued() && !c.requeued());
        assert_eq!(r.wake(key(0, None), 5, u32::MAX), 1, "only c is left there");
        assert_eq!(r.wake(key(8, None), 5, u32::MAX), 1);
        assert!(b.woken() && c.woken());
    }
}
