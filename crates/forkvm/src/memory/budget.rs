//! The memory limit of a run (`--memory`): one [`Budget`] shared by every
//! process of the run, which each process's [`GuestMemory`] charges with what
//! it has mapped accessible, and lends to vfork children until they exec.

use super::guest_memory::GuestMemory;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The memory limit one run's processes share: bytes mapped accessible by
/// all of them together (each [`GuestMemory`] in it charges its own).
///
/// A vfork child (until its execve or exit) is not charged for the copy of
/// its parent's mappings it starts with: those bytes are *lent* to it (see
/// [`GuestMemory::borrow_budget`]). Loans are bounded too: all of a run's
/// together stay within the limit, so while vfork children wait to exec the
/// host holds at most twice the limit.
#[derive(Debug, Default)]
pub struct Budget {
    used: AtomicU64,
    lent: AtomicU64,
}

impl Budget {
    /// Bytes charged by every process together.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    fn add(&self, n: u64) {
        self.used.fetch_add(n, Ordering::Relaxed);
    }

    fn sub(&self, n: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(n))
            });
    }

    /// Bytes lent to vfork children that have not exec'd or exited yet.
    pub fn lent(&self) -> u64 {
        self.lent.load(Ordering::Relaxed)
    }

    /// Lends `n` bytes if all loans together stay within `limit`.
    fn lend(&self, n: u64, limit: u64) -> bool {
        self.lent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                let next = l.saturating_add(n);
                (next <= limit).then_some(next)
            })
            .is_ok()
    }

    /// Takes back `n` bytes lent.
    fn unlend(&self, n: u64) {
        let _ = self
            .lent
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                Some(l.saturating_sub(n))
            });
    }

    /// Replaces `old` bytes charged by `new` ones if the total stays within
    /// `limit` (or does not grow).
    fn swap_charge(&self, old: u64, new: u64, limit: u64) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                let next = u.saturating_sub(old).saturating_add(new);
                (new <= old || next <= limit).then_some(next)
            })
            .is_ok()
    }
}

impl GuestMemory {
    /// Whether the program may map `more` accessible bytes within its memory limit.
    pub fn may_commit(&self, more: u64) -> bool {
        match (&self.user_map, &self.budget) {
            (None, _) => true,
            (Some(_), Some(b)) => b.used().saturating_add(more) <= self.commit_limit,
            (Some(m), None) => m.committed().saturating_add(more) <= self.commit_limit,
        }
    }

    /// Brings this memory's charge to the shared budget up to date with what
    /// it has mapped (after every change to the mappings).
    /// A loan never grows: it shrinks to what the program still has mapped
    /// (the rest goes back to the budget), and whatever the program maps
    /// (or makes accessible) beyond it is charged.
    pub(super) fn settle(&mut self) {
        if let Some(b) = &self.budget {
            let committed = self.committed();
            if committed < self.loan {
                b.unlend(self.loan - committed);
                self.loan = committed;
            }
            let now = committed - self.loan;
            if now > self.charged {
                b.add(now - self.charged);
            } else {
                b.sub(self.charged - now);
            }
            self.charged = now;
        }
    }

    /// Gives back this memory's charge and loan: it leaves the budget (its
    /// process ended).
    pub fn leave_budget(&mut self) {
        if let Some(b) = self.budget.take() {
            b.sub(self.charged);
            b.unlend(self.loan);
        }
        self.charged = 0;
        self.loan = 0;
    }

    /// The budget this memory's mappings count against, made now (holding
    /// them) if there is none yet: a forking process shares it with its child.
    pub fn share_budget(&mut self) -> Arc<Budget> {
        if let Some(b) = &self.budget {
            return b.clone();
        }
        let b = Arc::new(Budget::default());
        self.charged = self.committed();
        b.add(self.charged);
        self.budget = Some(b.clone());
        b
    }

    /// Joins `budget` (a fork's child, or a program built by exec) charging
    /// what this memory has mapped, in place of `replacing` bytes the caller
    /// gives back; false (nothing charged) if that goes over the limit.
    pub fn join_budget(&mut self, budget: Arc<Budget>, replacing: u64) -> bool {
        self.leave_budget();
        let now = self.committed();
        if !budget.swap_charge(replacing, now, self.commit_limit) {
            return false;
        }
        self.charged = now;
        self.budget = Some(budget);
        true
    }

    /// Joins `budget` as a vfork child's copy of its parent's memory: what
    /// it has mapped now is lent, not charged, if the run's loans together
    /// stay within the limit (else it is charged as for a fork; false if
    /// that does not fit). Its new mappings are charged as usual.
    pub fn borrow_budget(&mut self, budget: Arc<Budget>) -> bool {
        self.leave_budget();
        let now = self.committed();
        if !budget.lend(now, self.commit_limit) {
            return self.join_budget(budget, 0);
        }
        self.loan = now;
        self.budget = Some(budget);
        true
    }

    /// Bytes of this memory's mappings lent rather than charged.
    pub fn loan(&self) -> u64 {
        self.loan
    }

    /// Ends the loan: this memory is charged for everything it has mapped;
    /// false, with nothing changed, if that does not fit the limit.
    pub fn repay_loan(&mut self) -> bool {
        let Some(b) = &self.budget else {
            return true;
        };
        if self.loan == 0 {
            return true;
        }
        let now = self.committed();
        if !b.swap_charge(self.charged, now, self.commit_limit) {
            return false;
        }
        b.unlend(self.loan);
        self.charged = now;
        self.loan = 0;
        true
    }

    /// Takes over `old`'s place in its budget (exec: this memory replaces
    /// it, and what `old` borrowed is given back); false, with both
    /// unchanged, if this one's mappings do not fit.
    pub fn take_budget_of(&mut self, old: &mut GuestMemory) -> bool {
        let Some(b) = old.budget.clone() else {
            return true;
        };
        if !self.join_budget(b.clone(), old.charged) {
            return false;
        }
        b.unlend(old.loan);
        old.budget = None;
        old.charged = 0;
        old.loan = 0;
        true
    }

    /// Bytes the run's processes have mapped accessible together (this
    /// memory's own when it shares no budget).
    pub fn committed_by_all(&self) -> u64 {
        self.budget
            .as_ref()
            .map_or_else(|| self.committed(), |b| b.used())
    }

    /// What this memory has charged to a shared budget.
    pub fn charged(&self) -> u64 {
        self.charged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi;

    #[test]
    fn a_shared_budget_counts_every_memory_in_it() {
        const MIB: u64 = 1 << 20;
        let rw = super::super::Rights {
            read: true,
            write: true,
        };
        let mut a = GuestMemory::new(64 * MIB).unwrap();
        a.track_mappings();
        a.set_commit_limit(16 * MIB);
        a.map_user(abi::USER_BASE, abi::USER_BASE + 6 * MIB, rw);
        let budget = a.share_budget();
        assert_eq!(budget.used(), 6 * MIB);
        // A copy charges what it holds; a second one no longer fits.
        let mut b = GuestMemory::copy_of(&a, false).unwrap();
        assert_eq!(budget.used(), 12 * MIB);
        let err = GuestMemory::copy_of(&a, false).err().unwrap();
        assert!(err.is_out_of_memory());
        assert_eq!(budget.used(), 12 * MIB);
        // Each one's mappings count for all of them.
        assert!(a.may_commit(4 * MIB) && !b.may_commit(5 * MIB));
        b.map_user(abi::USER_BASE + 8 * MIB, abi::USER_BASE + 12 * MIB, rw);
        assert!(!a.may_commit(MIB));
        b.unmap_user(abi::USER_BASE, abi::USER_BASE + 6 * MIB);
        assert!(a.may_commit(6 * MIB) && !a.may_commit(7 * MIB));
        // An exec's new memory takes the old one's place.
        let mut c = GuestMemory::new(64 * MIB).unwrap();
        c.track_mappings();
        c.set_commit_limit(16 * MIB);
        c.map_user(abi::USER_BASE, abi::USER_BASE + 11 * MIB, rw);
        assert!(!c.take_budget_of(&mut b), "4 MiB out, 11 in: over");
        c.unmap_user(abi::USER_BASE + 5 * MIB, abi::USER_BASE + 11 * MIB);
        assert!(c.take_budget_of(&mut b));
        assert_eq!(budget.used(), 11 * MIB);
        // An ended process gives its share back.
        drop(b);
        drop(c);
        assert_eq!(budget.used(), 6 * MIB);
        a.empty_all().unwrap();
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_vfork_child_borrows_its_copy_and_pays_for_the_rest() {
        const MIB: u64 = 1 << 20;
        let rw = super::super::Rights {
            read: true,
            write: true,
        };
        let mut a = GuestMemory::new(64 * MIB).unwrap();
        a.track_mappings();
        a.set_commit_limit(16 * MIB);
        a.map_user(abi::USER_BASE, abi::USER_BASE + 10 * MIB, rw);
        let budget = a.share_budget();
        // 10 + 10 do not fit 16 as a fork's copy, but are lent to a vfork child.
        assert!(GuestMemory::copy_of(&a, false).is_err());
        let mut v = GuestMemory::copy_of(&a, true).unwrap();
        assert_eq!(
            (budget.used(), budget.lent(), v.loan()),
            (10 * MIB, 10 * MIB, 10 * MIB)
        );
        // Loans are bounded by the limit too: a second child pays (and does not fit).
        assert!(GuestMemory::copy_of(&a, true).is_err());
        assert_eq!((budget.used(), budget.lent()), (10 * MIB, 10 * MIB));
        // What the child maps is charged: 10 + 6 fit, one more MiB does not.
        assert!(v.may_commit(6 * MIB) && !v.may_commit(7 * MIB));
        v.map_user(abi::USER_BASE + 20 * MIB, abi::USER_BASE + 22 * MIB, rw);
        assert_eq!(budget.used(), 12 * MIB);
        // The loan never grows: it shrinks to what the child still has
        // mapped (12 - 4 = 8: the 2 MiB mapped after count as in it), and
        // whatever is mapped beyond it is charged again.
        v.unmap_user(abi::USER_BASE, abi::USER_BASE + 4 * MIB);
        assert_eq!(
            (budget.lent(), v.loan(), budget.used()),
            (8 * MIB, 8 * MIB, 10 * MIB)
        );
        v.map_user(abi::USER_BASE, abi::USER_BASE + 4 * MIB, rw);
        assert_eq!((budget.lent(), budget.used()), (8 * MIB, 14 * MIB));
        v.unmap_user(abi::USER_BASE, abi::USER_BASE + 4 * MIB);
        // Paying for the copy (before it forks) needs room: 10 + 8 > 16.
        assert!(!v.repay_loan());
        assert_eq!((budget.used(), budget.lent()), (10 * MIB, 8 * MIB));
        v.unmap_user(abi::USER_BASE + 4 * MIB, abi::USER_BASE + 8 * MIB);
        assert!(v.repay_loan());
        assert_eq!((budget.used(), budget.lent(), v.loan()), (14 * MIB, 0, 0));
        drop(v);
        // Exec: the new image is charged in place of what the child paid,
        // and its loan is given back.
        let mut w = GuestMemory::copy_of(&a, true).unwrap();
        w.map_user(abi::USER_BASE + 20 * MIB, abi::USER_BASE + 21 * MIB, rw);
        let mut n = GuestMemory::new(64 * MIB).unwrap();
        n.track_mappings();
        n.set_commit_limit(16 * MIB);
        n.map_user(abi::USER_BASE, abi::USER_BASE + 7 * MIB, rw);
        assert!(!n.take_budget_of(&mut w), "11 - 1 + 7: over");
        assert_eq!((budget.used(), budget.lent()), (11 * MIB, 10 * MIB));
        n.unmap_user(abi::USER_BASE + 6 * MIB, abi::USER_BASE + 7 * MIB);
        assert!(n.take_budget_of(&mut w));
        assert_eq!((budget.used(), budget.lent()), (16 * MIB, 0));
        drop(w);
        drop(n);
        // An exit gives the loan back as well.
        let v = GuestMemory::copy_of(&a, true).unwrap();
        assert_eq!(budget.lent(), 10 * MIB);
        drop(v);
        assert_eq!((budget.used(), budget.lent()), (10 * MIB, 0));
    }
}
