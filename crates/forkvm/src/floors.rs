//! Floors for the benchmark: the cheapest things this machine can do, built
//! from the same guest kernel and VM wrapper as real runs, so every figure
//! `forkvm bench` prints can be put beside one measured in the same run.

use crate::abi;
use crate::guest_kernel::{self, Frame, Trap};
use crate::hypervisor::{Exit, Hypervisor, Vcpu};
use crate::machine::MachineError;
use crate::memory::{page_tables, GuestMemory};
use iced_x86::code_asm::{self as asm, CodeAssembler};
use std::time::{Duration, Instant};

/// Which privilege level the raw code starts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ring {
    /// Kernel mode: `out` exits straight to the host.
    Kernel,
    /// User mode: every exit goes through the guest kernel's IDT.
    User,
}

/// A VM running a few raw instructions at `USER_BASE` (no ELF, no syscalls).
pub struct RawGuest {
    vcpu: Vcpu,
    mem: GuestMemory,
}

impl RawGuest {
    /// Builds a VM whose code is `code` (assembled at `USER_BASE`), started in `ring`.
    pub fn new(
        ring: Ring,
        code: impl FnOnce(&mut CodeAssembler) -> Result<(), iced_x86::IcedError>,
    ) -> Result<Self, MachineError> {
        let hv = Hypervisor::get()?;
        let mut mem = GuestMemory::new(8 << 20)?;
        guest_kernel::install(&mut mem)?;
        let cr3 = page_tables::build(&mut mem, &[])?;
        let mut a = CodeAssembler::new(64).map_err(|e| MachineError::Internal(e.to_string()))?;
        code(&mut a).map_err(|e| MachineError::Internal(e.to_string()))?;
        let bytes = a
            .assemble(abi::USER_BASE)
            .map_err(|e| MachineError::Internal(e.to_string()))?;
        mem.write(abi::USER_BASE, &bytes)
            .map_err(|e| MachineError::Internal(e.to_string()))?;
        let stack = mem.size() - 64;
        let mut frame = Frame::user(abi::USER_BASE, stack, 0);
        if ring == Ring::Kernel {
            frame.cs = u64::from(abi::selector::KERNEL_CS);
            frame.ss = u64::from(abi::selector::KERNEL_DS);
            frame.rflags = 0x2;
        }
        let mut vcpu = Vcpu::new(hv, &mem)?;
        vcpu.reset(hv, &mut mem, cr3, frame, 0)?;
        Ok(Self { vcpu, mem })
    }

    /// Runs to the next exit and decodes it.
    pub fn step(&mut self) -> Result<Trap, MachineError> {
        match self.vcpu.run()? {
            Exit::Io(port) => guest_kernel::decode(port, &self.mem)
                .map_err(|f| MachineError::Internal(f.to_string())),
            other => Err(MachineError::Internal(format!("unexpected exit {other:?}"))),
        }
    }

    /// The vCPU, for ioctl floors.
    pub fn vcpu(&self) -> &Vcpu {
        &self.vcpu
    }
}

/// Per-iteration times of `n` runs of `f`.
pub fn sample(
    n: usize,
    mut f: impl FnMut() -> Result<(), MachineError>,
) -> Result<Vec<Duration>, MachineError> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed());
    }
    Ok(v)
}

/// One exit round trip from guest kernel mode: `out` in a loop.
pub fn exit_round_trip(n: usize) -> Result<Vec<Duration>, MachineError> {
    let mut g = RawGuest::new(Ring::Kernel, |a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.out(0x10u32, asm::al)?;
        a.jmp(top)
    })?;
    g.step()?; // warm up
    sample(n, || g.step().map(|_| ()))
}

/// The cheapest user-mode-to-host round trip: `int3` → IDT → `out` → `iretq`.
pub fn user_trap_round_trip(n: usize) -> Result<Vec<Duration>, MachineError> {
    let mut g = RawGuest::new(Ring::User, |a| {
        let mut top = a.create_label();
        a.set_label(&mut top)?;
        a.int3()?;
        a.jmp(top)
    })?;
    g.step()?;
    sample(n, || match g.step()? {
        Trap::Exception { vector: 3, .. } => Ok(()),
        t => Err(MachineError::Internal(format!("unexpected trap {t:?}"))),
    })
}

/// The floor of an in-guest syscall: `syscall` to an LSTAR stub that returns
/// at once (`jmp *%rcx` at CPL3 on PVM, `sysretq` at CPL0 on hardware KVM),
/// per call, from batches of 10,000 between exits.
pub fn guest_syscall_round_trip(n: usize) -> Result<Vec<Duration>, MachineError> {
    const BATCH: u32 = 10_000;
    const STUB: u64 = abi::USER_BASE + 0x800;
    let hv = Hypervisor::get()?;
    let mut g = RawGuest::new(Ring::User, |a| {
        let mut outer = a.create_label();
        let mut inner = a.create_label();
        a.set_label(&mut outer)?;
        a.mov(asm::ebx, BATCH)?;
        a.set_label(&mut inner)?;
        a.syscall()?;
        a.dec(asm::ebx)?;
        a.jnz(inner)?;
        a.int3()?;
        a.jmp(outer)?;
        // Pad to the stub.
        while (a.instructions().len() as u64) < 0x800 {
            a.nop()?;
        }
        match hv.platform {
            crate::hypervisor::Platform::Pvm => a.jmp(asm::rcx),
            crate::hypervisor::Platform::Hardware => a.sysretq(),
        }
    })?;
    g.vcpu.set_lstar(STUB)?;
    g.step()?; // warm up
    sample(n, || match g.step()? {
        Trap::Exception { vector: 3, .. } => Ok(()),
        t => Err(MachineError::Internal(format!("unexpected trap {t:?}"))),
    })
    .map(|v| v.into_iter().map(|d| d / BATCH).collect())
}

/// A vCPU ioctl (KVM_GET_REGS).
pub fn vcpu_ioctl(n: usize) -> Result<Vec<Duration>, MachineError> {
    let g = RawGuest::new(Ring::Kernel, |a| a.hlt())?;
    sample(n, || {
        g.vcpu()
            .get_regs_ioctl()
            .map(|_| ())
            .map_err(MachineError::from)
    })
}

/// A native system call (getppid) on the host; each sample averages a batch of 1,000.
pub fn native_syscall(n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..1000 {
                std::hint::black_box(rustix::process::getppid());
            }
            t.elapsed() / 1000
        })
        .collect()
}

/// Native getrandom of 16 bytes (per call).
pub fn native_getrandom(n: usize) -> Vec<Duration> {
    let mut buf = [0u8; 16];
    (0..n)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..100 {
                let _ = getrandom::fill(&mut buf);
                std::hint::black_box(&buf);
            }
            t.elapsed() / 100
        })
        .collect()
}

/// Native write(2) of one byte to /dev/null (per call).
pub fn native_null_write(n: usize) -> std::io::Result<Vec<Duration>> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        for _ in 0..100 {
            f.write_all(b"x")?;
        }
        v.push(t.elapsed() / 100);
    }
    Ok(v)
}

/// Native pread(2) of 64 bytes at offset 0 of `path` (per call).
pub fn native_pread(n: usize, path: &std::path::Path) -> std::io::Result<Vec<Duration>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path)?;
    let mut buf = [0u8; 64];
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        for _ in 0..100 {
            f.read_exact_at(&mut buf, 0)?;
            std::hint::black_box(&buf);
        }
        v.push(t.elapsed() / 100);
    }
    Ok(v)
}

/// Native stat(2) of `path` (per call).
pub fn native_stat(n: usize, path: &std::path::Path) -> std::io::Result<Vec<Duration>> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        for _ in 0..100 {
            std::hint::black_box(rustix::fs::stat(path)?);
        }
        v.push(t.elapsed() / 100);
    }
    Ok(v)
}

/// Native clock_gettime(CLOCK_MONOTONIC), through the host's vDSO (per call).
pub fn native_clock_gettime(n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..1000 {
                std::hint::black_box(rustix::time::clock_gettime(
                    rustix::time::ClockId::Monotonic,
                ));
            }
            t.elapsed() / 1000
        })
        .collect()
}

/// Creating and setting up a VM with guest kernel and page tables (what construction cannot avoid).
pub fn vm_create(n: usize) -> Result<Vec<Duration>, MachineError> {
    sample(n, || RawGuest::new(Ring::Kernel, |a| a.hlt()).map(drop))
}
