//! The master: a program run to its ready point and frozen. It is never run
//! again; its RAM is an immutable [`Snapshot`] that every [`Fork`] maps
//! copy-on-write, and its process state (files, signal dispositions, brk,
//! cwd) is the template every fork starts from and returns to on reset.
//!
//! ```no_run
//! use forkvm::machine::{Arg, Config, ReadyAt};
//! use forkvm::master::Master;
//! let master = Master::load("tests/guests/out/api_demo.musl", Config::default(), &ReadyAt::Call)?;
//! let mut fork = master.fork()?;
//! let sum = fork.vmcall("add", &[Arg::Int(2), Arg::Int(3)])?;
//! assert_eq!(sum, 5);
//! fork.reset()?; // back to the master's state; cost follows what the call wrote
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::fork::Fork;
use crate::hypervisor::pool::{Slot, VmPool};
use crate::linux::Process;
use crate::loader::Symbols;
use crate::machine::{Config, Machine, MachineError, Outcome, ReadyAt, ReadyPoint};
use crate::memory::Snapshot;
use std::sync::Arc;
use std::time::Duration;

/// Why a master could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MasterError {
    /// Loading or running the program failed.
    #[error(transparent)]
    Machine(#[from] MachineError),
    /// The program ended before its ready point.
    #[error("the program ended before it was ready (status {0})")]
    NotReady(i32),
    /// Its state could not be captured.
    #[error("cannot snapshot the program: {0}")]
    Snapshot(String),
}

/// What forks share: the frozen image of the initialised program.
pub(crate) struct Image {
    pub(crate) snapshot: Arc<Snapshot>,
    pub(crate) process: Process,
    pub(crate) symbols: Arc<Symbols>,
    pub(crate) ready: ReadyPoint,
    pub(crate) timeout: Duration,
    pub(crate) at_random: Option<u64>,
    /// Where forks' `syscall` lands (the master's choice).
    pub(crate) syscall_path: crate::hypervisor::SyscallPath,
    /// Give each fork fresh AT_RANDOM bytes on reset.
    pub(crate) reseed: bool,
    /// What a fork's child processes are started with (their exec), if
    /// forks may make them.
    pub(crate) config: Option<Config>,
    /// The process ids of its forks' first process, when not a run's
    /// usual ones (a pre-fork server's worker).
    pub(crate) ids: Option<crate::linux::child::Ids>,
}

/// An initialised program, frozen; the source of forks.
#[derive(Clone)]
pub struct Master {
    pub(crate) image: Arc<Image>,
}

impl Master {
    /// Loads `path`, runs it to `at` and freezes it.
    pub fn load(path: &str, config: Config, at: &ReadyAt) -> Result<Self, MasterError> {
        let mut m = Machine::from_file(path, config)?;
        match m.run_until_ready(at)? {
            Outcome::Ready => Self::from_machine(m),
            other => Err(MasterError::NotReady(other.status())),
        }
    }

    /// Freezes a machine that reached its ready point. Its VM joins the pool.
    pub fn from_machine(m: Machine) -> Result<Self, MasterError> {
        let ready = m.ready.ok_or(MasterError::NotReady(0))?;
        let snapshot =
            Snapshot::capture(&m.mem).map_err(|e| MasterError::Snapshot(e.to_string()))?;
        let process = m
            .proc
            .fork_copy()
            .map_err(|e| MasterError::Snapshot(format!("open files: {}", e.name())))?;
        let image = Arc::new(Image {
            snapshot: snapshot.clone(),
            process,
            symbols: m.symbols.clone(),
            ready,
            timeout: m.timeout,
            at_random: m.at_random,
            syscall_path: m.syscall_path,
            reseed: true,
            config: m.serve_config.clone(),
            ids: m.serve_ids,
        });
        // The master's own VM is as good as a pooled one once its memory is a view of the snapshot.
        let Machine { vcpu, mut mem, .. } = m;
        if mem.remap(&snapshot).is_ok() {
            VmPool::global().give(Slot { vcpu, mem });
        }
        Ok(Self { image })
    }

    /// Whether forks get fresh AT_RANDOM bytes on reset (default true).
    pub fn set_reseed(&mut self, reseed: bool) {
        if let Some(img) = Arc::get_mut(&mut self.image) {
            img.reseed = reseed;
        }
    }

    /// A copy-on-write fork in exactly the master's state.
    pub fn fork(&self) -> Result<Fork, MachineError> {
        Fork::new(self.image.clone())
    }

    /// Creates `n` VMs ahead of time so that forks do not have to.
    pub fn prewarm(&self, n: usize) -> Result<(), MachineError> {
        let forks = (0..n).map(|_| self.fork()).collect::<Result<Vec<_>, _>>()?;
        drop(forks);
        Ok(())
    }

    /// A hash of the master's memory (it must never change).
    pub fn digest(&self) -> u64 {
        self.image.snapshot.digest()
    }

    /// Guest RAM size.
    pub fn memory_size(&self) -> u64 {
        self.image.snapshot.size()
    }

    /// Address of a symbol in the program.
    pub fn symbol(&self, name: &str) -> Option<u64> {
        self.image.symbols.address_of(name)
    }
}
