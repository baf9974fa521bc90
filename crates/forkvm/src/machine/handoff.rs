//! Pre-fork servers: a program whose first process forks the process that
//! waits for connections (gunicorn's arbiter and its worker, nginx's
//! master and its worker, a daemon that forks and exits).
//!
//! While a master starts ([`Machine::run_until_ready`] for the ready call
//! or a server's first wait), its processes may fork. Every child process
//! then runs towards a ready point of its own (see `children::run_child`),
//! and the first one to reach it hands its whole machine over here. The
//! first process's run stops when one arrives (or, when the first process
//! ended, waits for one while other processes live); the machine that
//! started becomes the worker, and every other process of the start-up
//! ends. So the snapshot every request forks is the worker as it waits
//! for its first connection, with its own pid and parent pid (a tree of
//! that identity per request, see `Fork::new_tree`): programs keep them
//! (gunicorn's worker stops when getppid no longer gives the pid it saved).

use super::{Machine, Outcome};
use crate::linux::child::others_alive;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Where a child process of a starting master leaves its machine once it
/// reached its ready point (one place: the first to arrive wins).
#[derive(Default)]
pub(crate) struct Handoff {
    slot: Mutex<Option<Box<Machine>>>,
    arrived: Condvar,
}

impl Handoff {
    /// Leaves `m` here; gives it back when another one came first.
    pub(crate) fn offer(&self, mut m: Machine) -> Result<(), Box<Machine>> {
        // Kept here, it must not hold the place it is kept in.
        m.handoff = None;
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return Err(Box::new(m));
        }
        // The first process may be in a call that waits long (a sleep):
        // it ends, and its machine goes on to take this one.
        if let Some(f) = &m.proc.family {
            f.end_first();
        }
        *slot = Some(Box::new(m));
        self.arrived.notify_all();
        Ok(())
    }

    /// Whether a machine waits here.
    pub(crate) fn has_arrived(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// The machine left here, waiting for it at most until `until`.
    fn take_by(&self, until: Instant) -> Option<Box<Machine>> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(m) = slot.take() {
                return Some(m);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            slot = self
                .arrived
                .wait_timeout(slot, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// The start-up's other processes, kept until the master's process state
/// was copied (its template): the ends of pipes and sockets they hold are
/// then still open in every fork, as they are natively while the arbiter
/// lives (node's cluster worker exits when its channel to the primary
/// closes; nginx's worker reads EOF from its master's and closes it). Dropped,
/// they end (SIGKILL at their next call or tick), and the first process's
/// machine goes.
pub(super) struct Startup {
    family: crate::linux::child::Family,
    first: Option<Box<Machine>>,
}

impl Drop for Startup {
    fn drop(&mut self) {
        self.family.end_others();
        drop(self.first.take());
    }
}

impl Startup {
    /// The processes of `family`'s tree but the master's, and the
    /// start-up's first machine if it is not the master.
    pub(super) fn new(family: crate::linux::child::Family, first: Option<Machine>) -> Box<Self> {
        Box::new(Startup {
            family,
            first: first.map(Box::new),
        })
    }
}

/// How often a master whose first process ended looks whether any other
/// process of its start-up still lives.
const ORPHAN_LOOK: Duration = Duration::from_millis(20);

impl Machine {
    /// A child process of a starting master: runs until it waits for a
    /// connection or makes the ready call ([`Outcome::Ready`], its ready
    /// point recorded), or ends otherwise.
    pub(super) fn run_to_ready_point(&mut self) -> Result<Outcome, super::MachineError> {
        let outcome = self.run_in_ready_mode(&mut || false)?;
        if matches!(outcome, Outcome::Ready) {
            self.mark_ready()?;
        }
        Ok(outcome)
    }

    /// After the start-up run of a master that may fork ended with
    /// `outcome`: if a child process handed over its machine (or hands
    /// one over before the run's time is up, when the first process ended
    /// and others live on), this machine becomes that one and the outcome
    /// is [`Outcome::Ready`]. The start-up's other processes end.
    pub(super) fn take_handed_over(&mut self, handoff: &Handoff, outcome: Outcome) -> Outcome {
        let deadline = Instant::now() + self.timeout;
        // Stopped when a machine arrived, or ended by it (SIGKILL, see
        // `Handoff::offer`), or ended by itself (a daemon's first process):
        // then one may still come while other processes live.
        let worker = match outcome {
            Outcome::Exited(_) => loop {
                if let Some(m) = handoff.take_by(Instant::now() + ORPHAN_LOOK) {
                    break Some(m);
                }
                if !others_alive(&self.proc) || Instant::now() >= deadline {
                    break handoff.take_by(Instant::now());
                }
            },
            _ => handoff.take_by(Instant::now()),
        };
        let Some(mut worker) = worker else {
            return outcome;
        };
        let family = worker.proc.family.take();
        let comm = &worker.proc.comm;
        let name =
            String::from_utf8_lossy(&comm[..comm.iter().position(|&b| b == 0).unwrap_or(16)]);
        tracing::info!(
            "process {} ({name}) is the server: it waits for connections; the start-up's other processes end",
            family.as_ref().map_or(0, |f| f.pid)
        );
        worker.serve_config = family.as_ref().map(|f| f.tree.config.clone());
        worker.serve_ids = family.as_ref().map(|f| f.ids());
        worker.timeout = self.timeout;
        worker.handoff = None;
        let first = std::mem::replace(self, *worker);
        match family {
            Some(f) => self.startup = Some(Startup::new(f, Some(first))),
            None => drop(first),
        }
        Outcome::Ready
    }
}
