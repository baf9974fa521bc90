//! A machine: one program in one VM. Load an ELF, build the guest kernel,
//! page tables and initial stack, then run it to completion, serving its
//! system calls on the host.

use crate::abi;
use crate::crash::{self, CrashInfo};
use crate::guest_kernel::{self, Frame, SyscallReturn, Trap};
use crate::hypervisor::{Deadline, Exit, Hypervisor, KvmError, Vcpu};
use crate::linux::{self, Policy, Process};
use crate::loader::{self, LoadError, StackParams, Symbols};
use crate::memory::{page_tables, AddressSpace, GuestMemory, MapError};
use std::path::PathBuf;
use std::time::Duration;

/// How to run a program.
#[derive(Debug, Clone)]
pub struct Config {
    /// Guest RAM in bytes (rounded up to 2 MiB); the program's memory limit.
    pub memory: u64,
    /// Wall-clock limit for the whole run.
    pub timeout: Duration,
    /// argv, including argv[0].
    pub argv: Vec<String>,
    /// The environment, `KEY=VALUE`.
    pub env: Vec<String>,
    /// Guest working directory.
    pub cwd: String,
    /// Host paths the guest may read.
    pub allow_read: Vec<PathBuf>,
    /// Print every syscall.
    pub trace_syscalls: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            memory: 256 << 20,
            timeout: Duration::from_secs(10),
            argv: Vec::new(),
            env: Vec::new(),
            cwd: "/".into(),
            allow_read: Vec::new(),
            trace_syscalls: false,
        }
    }
}

/// Why a machine could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// The program file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path given.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The ELF file was rejected.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// KVM refused something.
    #[error(transparent)]
    Kvm(#[from] KvmError),
    /// Guest memory could not be reserved.
    #[error(transparent)]
    Map(#[from] MapError),
    /// The memory limit is unusable.
    #[error("--memory {0} MiB is out of range (8 .. {max} MiB)", max = abi::MAX_GUEST_MEMORY >> 20)]
    MemoryLimit(u64),
    /// The page tables did not fit.
    #[error(transparent)]
    PageTables(#[from] page_tables::PageTableError),
    /// The guest kernel could not be built.
    #[error(transparent)]
    Kernel(#[from] guest_kernel::KernelError),
    /// The guest kernel misbehaved (a forkvm bug, or a hypervisor we do not support).
    #[error("guest kernel failure: {0}")]
    Internal(String),
}

/// How a run ended.
#[derive(Debug)]
pub enum Outcome {
    /// exit/exit_group with this status.
    Exited(i32),
    /// Killed by a fault, like a signal.
    Crashed(Box<CrashInfo>),
    /// The wall-clock limit passed.
    TimedOut(Duration),
}

impl Outcome {
    /// The shell-style exit status: the code, 128+signal, or 124 for a timeout.
    pub fn status(&self) -> i32 {
        match self {
            Outcome::Exited(c) => *c & 0xff,
            Outcome::Crashed(c) => 128 + c.signal,
            Outcome::TimedOut(_) => 124,
        }
    }
}

/// A program loaded into its own VM.
pub struct Machine {
    // Drop order: the VM goes before the memory it maps.
    vcpu: Vcpu,
    mem: GuestMemory,
    proc: Process,
    symbols: Symbols,
    timeout: Duration,
}

impl Machine {
    /// Loads the program at `path` (argv[0] defaults to it).
    pub fn from_file(path: &str, mut config: Config) -> Result<Self, MachineError> {
        let bytes = std::fs::read(path).map_err(|source| MachineError::Read {
            path: path.to_string(),
            source,
        })?;
        if config.argv.is_empty() {
            config.argv.push(path.to_string());
        }
        let exe = std::fs::canonicalize(path)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| path.to_string());
        Self::new(&bytes, &exe, config)
    }

    /// Builds a VM for the ELF image `bytes`, which the guest knows as `exe_path`.
    pub fn new(bytes: &[u8], exe_path: &str, config: Config) -> Result<Self, MachineError> {
        let image = loader::parse(bytes)?;
        let memory = config
            .memory
            .checked_next_multiple_of(abi::HUGE_PAGE_SIZE)
            .filter(|m| (8 << 20..=abi::MAX_GUEST_MEMORY).contains(m))
            .ok_or(MachineError::MemoryLimit(config.memory >> 20))?;
        let hv = Hypervisor::get()?;
        let mut mem = GuestMemory::new(memory)?;
        guest_kernel::install(&mut mem)?;

        // The stack sits at the top of RAM; mmap regions grow down below it.
        let stack_reserve = (memory / 8).min(8 << 20);
        let stack_top = memory;
        let mut regions = image.regions();
        let program = image.load(bytes, &mut mem)?;
        if !program.exec_stack {
            regions.push(page_tables::Region {
                start: stack_top - stack_reserve,
                end: stack_top,
                perm: page_tables::Perm {
                    write: true,
                    exec: false,
                },
            });
        }
        let cr3 = page_tables::build(&mut mem, &regions)?;

        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|e| MachineError::Internal(e.to_string()))?;
        let execfn = config.argv.first().cloned().unwrap_or_default();
        let rsp = loader::build_stack(
            &mut mem,
            stack_top,
            &program,
            &StackParams {
                argv: &config.argv,
                envp: &config.env,
                execfn: &execfn,
                random,
                hwcap: hv.hwcap(),
                hwcap2: 0,
                platform: "x86_64",
            },
        )?;

        let mm = AddressSpace::new(program.image_end, stack_top - stack_reserve);
        let policy = Policy {
            allow_read: config.allow_read.clone(),
            trace_syscalls: config.trace_syscalls,
        };
        let proc = Process::new(policy, mm, config.cwd.clone(), exe_path.to_string());

        let mut vcpu = Vcpu::new(hv, &mem)?;
        vcpu.reset(hv, &mut mem, cr3, Frame::user(program.entry, rsp, 0), 0)?;
        Ok(Self {
            vcpu,
            mem,
            proc,
            symbols: image.symbols(),
            timeout: config.timeout,
        })
    }

    /// Runs the program until it exits, crashes or times out.
    pub fn run(&mut self) -> Result<Outcome, MachineError> {
        let deadline = Deadline::arm(self.timeout);
        loop {
            if deadline.expired() {
                return Ok(Outcome::TimedOut(self.timeout));
            }
            if let Some(base) = self.proc.pending_fs_base.take() {
                self.vcpu.set_fs_base(base)?;
            }
            match self.vcpu.run()? {
                Exit::Io(port) => {
                    let trap = guest_kernel::decode(port, &self.mem)
                        .map_err(|f| MachineError::Internal(f.to_string()))?;
                    match trap {
                        Trap::Syscall(ret) => {
                            if let Some(outcome) = self.syscall(ret)? {
                                return Ok(outcome);
                            }
                        }
                        Trap::Exception {
                            vector,
                            error_code,
                            frame,
                        } => return self.crash(vector, error_code, frame),
                        Trap::Unknown(p) => {
                            return Err(MachineError::Internal(format!("exit on port {p:#x}")))
                        }
                    }
                }
                Exit::Interrupted => continue,
                Exit::Shutdown => {
                    return Err(MachineError::Internal("the guest triple-faulted".into()))
                }
                Exit::Other(what) => return Err(MachineError::Internal(what.into())),
            }
        }
    }

    /// Serves one system call; `Some` when the program is done.
    fn syscall(&mut self, ret: SyscallReturn) -> Result<Option<Outcome>, MachineError> {
        let regs = self.vcpu.regs();
        let args = [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9];
        let result = linux::dispatch(&mut self.proc, &mut self.mem, regs.rax, &args);
        if let Some(status) = self.proc.exit_status {
            return Ok(Some(Outcome::Exited(status)));
        }
        self.vcpu.set_rax(result);
        if let SyscallReturn::Iret(frame_addr) = ret {
            // Turn the #BP/#GP frame into the syscall's return: RIP←RCX, RFLAGS←R11.
            let internal = |f: crate::memory::Fault| MachineError::Internal(f.to_string());
            let saved = Frame::read(&self.mem, frame_addr).map_err(internal)?;
            Frame::user(regs.rcx, saved.rsp, regs.r11)
                .write(&mut self.mem, frame_addr)
                .map_err(internal)?;
        }
        Ok(None)
    }

    fn crash(
        &mut self,
        vector: u8,
        error_code: u64,
        frame: Frame,
    ) -> Result<Outcome, MachineError> {
        let mut regs = self.vcpu.regs();
        // The registers are the guest kernel's view; the program's RIP/RSP/RFLAGS are in the frame.
        regs.rip = frame.rip;
        regs.rsp = frame.rsp;
        regs.rflags = frame.rflags;
        let cr2 = if vector == abi::vector::PAGE_FAULT {
            self.vcpu.sregs()?.cr2
        } else {
            0
        };
        Ok(Outcome::Crashed(Box::new(CrashInfo::from_exception(
            vector, error_code, cr2, regs,
        ))))
    }

    /// A human-readable report for a crash outcome.
    pub fn crash_report(&self, info: &CrashInfo) -> String {
        crash::render(info, &self.mem, Some(&self.symbols))
    }

    /// Guest memory (for tests and embedding).
    pub fn memory(&self) -> &GuestMemory {
        &self.mem
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin;

    fn config() -> Config {
        Config {
            memory: 16 << 20,
            argv: vec!["prog".into()],
            ..Config::default()
        }
    }

    #[test]
    fn syscalls_round_trip_and_exit() {
        let img = builtin::syscall_loop(100).unwrap();
        let mut m = Machine::new(&img, "/prog", config()).unwrap();
        assert_eq!(m.run().unwrap().status(), 0);
    }

    #[test]
    fn timeout_stops_a_spinning_guest() {
        let img = builtin::spin().unwrap();
        let cfg = Config {
            timeout: Duration::from_millis(200),
            ..config()
        };
        let mut m = Machine::new(&img, "/prog", cfg).unwrap();
        assert!(matches!(m.run().unwrap(), Outcome::TimedOut(_)));
    }
}
