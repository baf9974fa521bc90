//! vfork and clone(CLONE_VFORK), which posix_spawn and python's subprocess
//! use: the caller waits until the child execs or ends, and with CLONE_VM
//! the child's stores are the caller's.
//!
//! On Linux such a child runs in its parent's memory while the calling
//! thread waits; what the child stores there (glibc's posix_spawn child
//! writes exec's errno into a variable of the parent's) the parent reads
//! afterwards. Here the child is its own VM over a copy-on-write view of a
//! snapshot of the parent's memory (`GuestMemory::vfork_copy_from`). When it
//! execs or ends, any way (killed, its VM failed), its thread hands the old
//! memory to the parent ([`ToParent::hand_over`]), which copies in what the
//! child changed (`GuestMemory::take_vfork_stores`) and gives it back, for
//! the child's thread to recycle or drop, so the parent goes on as soon as
//! it has the stores.
//!
//! The calling thread waits ([`Wait::Vfork`]) and the parent's other
//! threads run on (they take turns on one vCPU): the run loop looks for the
//! hand-over whenever it picks a thread to run, at least every preemption
//! tick, and when every thread waits it waits for the hand-over itself, a
//! tick at a time, so that the run's deadline (a served request's timeout)
//! still ends a wait for a child that never execs.

use super::{Machine, MachineError};
use crate::linux::thread::Wait;
use crate::memory::{GuestMemory, VforkBase};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::Duration;

/// How soon a parked server whose thread waits for a vfork child looks again.
pub(super) const RECHECK: Duration = Duration::from_millis(1);

/// The child's old memory, with the way back to the child's thread.
type Handover = (GuestMemory, Sender<GuestMemory>);

/// A vfork child's end of the link (in its [`Machine`] until it execs or
/// ends). Dropped without a hand-over (the child's thread never started,
/// or unwound), it lets the parent go on without the child's stores.
pub(crate) struct ToParent(Sender<Handover>);

/// The waiting parent's end: the child, and what its memory started as
/// (`None`: no CLONE_VM, its stores are its own).
pub(crate) struct FromChild {
    rx: Receiver<Handover>,
    pid: u64,
    base: Option<VforkBase>,
}

/// A thread of the parent blocked until its vfork child execs or ends.
pub(super) struct Waiting {
    tid: u64,
    from: FromChild,
}

/// A new link between vfork child `pid` and its parent.
pub(super) fn link(pid: u64, base: Option<VforkBase>) -> (ToParent, FromChild) {
    let (tx, rx) = mpsc::channel();
    (ToParent(tx), FromChild { rx, pid, base })
}

impl ToParent {
    /// Hands the child's memory (it has exec'd or ended) to the parent and
    /// waits until the parent has taken the stores; returns the memory,
    /// unless the parent is gone.
    pub(crate) fn hand_over(self, mem: GuestMemory) -> Option<GuestMemory> {
        let (back, returned) = mpsc::channel();
        match self.0.send((mem, back)) {
            Ok(()) => returned.recv().ok(),
            // The parent no longer waits (it ended or exec'd meanwhile).
            Err(mpsc::SendError((mem, _))) => Some(mem),
        }
    }
}

impl FromChild {
    /// Takes the stores of a hand-over into `mem`, the parent's memory,
    /// and gives the child's memory back.
    fn take(&self, (mut child, back): Handover, mem: &mut GuestMemory) {
        if let Some(base) = &self.base {
            match mem.take_vfork_stores(&child, base) {
                Ok(n) => tracing::trace!("vfork: child {} changed {n} page(s)", self.pid),
                Err(e) => tracing::warn!("vfork: child {}'s stores are lost: {e}", self.pid),
            }
        }
        // What it borrowed or was charged is free before the parent goes on
        // (its wait already finds the child ended: a spawn right after one
        // was refused with ENOMEM); the child's thread empties or drops the
        // memory itself, off the parent's path.
        child.leave_budget();
        child.release_snapshot();
        let _ = back.send(child);
    }

    /// Whether the child has exec'd or ended (its stores taken, if so),
    /// waiting for that at most `wait`.
    fn done(&self, mem: &mut GuestMemory, wait: Duration) -> bool {
        let got = if wait.is_zero() {
            self.rx
                .try_recv()
                .map_err(|e| e == TryRecvError::Disconnected)
        } else {
            self.rx
                .recv_timeout(wait)
                .map_err(|e| e == RecvTimeoutError::Disconnected)
        };
        match got {
            Ok(h) => {
                self.take(h, mem);
                true
            }
            Err(gone) => {
                if gone {
                    tracing::debug!("vfork: child {} went without a hand-over", self.pid);
                }
                gone
            }
        }
    }
}

impl Machine {
    /// After a vfork child started: the caller (`ctx`, with the child's pid
    /// as the result) waits for it. Returns whether the registers were
    /// replaced (another thread runs now, or none can).
    pub(super) fn wait_for_vfork(
        &mut self,
        from: FromChild,
        ctx: kvm_bindings::kvm_regs,
    ) -> Result<bool, MachineError> {
        let me = self.save_current(ctx, Wait::Vfork)?;
        self.vfork_waits.push(Waiting { tid: me.tid, from });
        self.proc.threads.others.push_back(me);
        self.stalled = !self.switch_thread_after_block()?;
        Ok(true)
    }

    /// Makes the threads whose vfork child has exec'd or ended runnable,
    /// with the child's stores taken.
    pub(super) fn look_at_vforks(&mut self) {
        self.look_at_vforks_waiting(Duration::ZERO);
    }

    /// [`Self::look_at_vforks`] when no thread can run: waits up to `wait`
    /// for the first waiting thread's child.
    pub(super) fn look_at_vforks_waiting(&mut self, wait: Duration) {
        if self.vfork_waits.is_empty() {
            return;
        }
        let mut waits = std::mem::take(&mut self.vfork_waits);
        let mut wait = wait;
        waits.retain(|w| {
            let done = w.from.done(&mut self.mem, std::mem::take(&mut wait));
            if done {
                if let Some(t) = self.proc.threads.others.iter_mut().find(|t| t.tid == w.tid) {
                    t.wait = Wait::Runnable;
                }
            }
            !done
        });
        self.vfork_waits = waits;
    }

    /// Stops waiting for vfork children (the process ended, or a served
    /// fork is reset): a child that execs or ends from now on keeps its
    /// stores, and is not kept waiting for this process to take them.
    pub(crate) fn forget_vforks(&mut self) {
        self.vfork_waits.clear();
    }

    /// Whether a thread waits for a vfork child.
    pub(super) fn vforks_pending(&self) -> bool {
        !self.vfork_waits.is_empty()
    }
}
