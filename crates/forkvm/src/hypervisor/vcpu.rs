//! One KVM VM with one vCPU, set up for the guest kernel: long mode, our
//! GDT/IDT/TSS, the syscall MSRs, CPUID and XCR0.
//!
//! Register traffic on the hot path goes through `KVM_CAP_SYNC_REGS`: the
//! general registers arrive with every exit and are written back only when
//! changed, so a syscall costs one `KVM_RUN` and no other ioctl.

use super::platform::{Platform, SyscallPath};
use super::xsave::{XsaveArea, XsaveLayout};
use crate::abi::{self, cr, msr, selector};
use crate::guest_kernel::{self, Frame};
use crate::memory::GuestMemory;
use kvm_bindings::{
    kvm_msr_entry, kvm_regs, kvm_segment, kvm_sregs, kvm_userspace_memory_region, kvm_xcrs, CpuId,
    Msrs, KVM_MAX_CPUID_ENTRIES,
};
use kvm_ioctls::{Kvm, SyncReg, VcpuExit, VcpuFd, VmFd};
use std::sync::OnceLock;

/// Failures talking to KVM.
#[derive(Debug, thiserror::Error)]
pub enum KvmError {
    /// /dev/kvm could not be opened.
    #[error("cannot open /dev/kvm ({0}); is KVM available and are you allowed to use it?")]
    Open(#[source] kvm_ioctls::Error),
    /// An ioctl failed.
    #[error("KVM {what} failed: {source}")]
    Ioctl {
        /// Which operation.
        what: &'static str,
        /// The errno.
        #[source]
        source: kvm_ioctls::Error,
    },
    /// The host lacks a capability forkvm needs.
    #[error("KVM lacks {0}")]
    Missing(&'static str),
}

fn ioctl<T>(
    what: &'static str,
    mut call: impl FnMut() -> Result<T, kvm_ioctls::Error>,
) -> Result<T, KvmError> {
    // A signal meant to kick this thread out of KVM_RUN (the watchdog, the
    // thread-switch tick) may land in any ioctl. The slow ones are made with
    // kicks held (`KicksHeld`); for the rest, an interrupted ioctl did
    // nothing: make it again.
    let mut tries = 0;
    loop {
        match call() {
            Err(e) if e.errno() == libc::EINTR && tries < MAX_EINTR_RETRIES => tries += 1,
            r => return r.map_err(|source| KvmError::Ioctl { what, source }),
        }
    }
}

/// How often an ioctl is made again after EINTR before the error stands.
const MAX_EINTR_RETRIES: u32 = 100;

/// Process-wide KVM state: the /dev/kvm handle and the CPUID it supports.
pub struct Hypervisor {
    kvm: Kvm,
    cpuid: CpuId,
    xcr0: u64,
    /// The extended state the guest may use (XCR0) and its XSAVE size.
    pub xsave_layout: XsaveLayout,
    /// The syscall entry path in use.
    pub platform: Platform,
}

impl Hypervisor {
    /// The shared instance, opened on first use.
    pub fn get() -> Result<&'static Hypervisor, KvmError> {
        static HV: OnceLock<Hypervisor> = OnceLock::new();
        if let Some(h) = HV.get() {
            return Ok(h);
        }
        let h = Self::open()?;
        Ok(HV.get_or_init(|| h))
    }

    fn open() -> Result<Self, KvmError> {
        let kvm = Kvm::new().map_err(KvmError::Open)?;
        if !kvm.check_extension(kvm_ioctls::Cap::SyncRegs) {
            return Err(KvmError::Missing("KVM_CAP_SYNC_REGS"));
        }
        let cpuid = ioctl("GET_SUPPORTED_CPUID", || {
            kvm.get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        })?;
        // XCR0: x87, SSE, AVX and the AVX-512 states, as far as supported.
        let mut xcr0 = 0b11;
        for e in cpuid.as_slice() {
            if e.function == 0xd && e.index == 0 {
                xcr0 = (u64::from(e.edx) << 32 | u64::from(e.eax)) & 0xe7;
            }
        }
        let platform = Platform::detect().unwrap_or_else(|e| {
            tracing::warn!("{e}; detecting instead");
            Platform::probe()
        });
        let xcr0 = xcr0 | 0b11;
        let xsave_layout = XsaveLayout::from_cpuid(cpuid.as_slice(), xcr0);
        Ok(Self {
            kvm,
            cpuid,
            xcr0,
            xsave_layout,
            platform,
        })
    }

    /// Whether guest code may use RDRAND: KVM reports it (CPUID.1:ECX bit
    /// 30), or the platform is PVM, whose guests execute it natively and see
    /// the host's CPUID (PVM leaves it out of KVM's supported list).
    pub fn has_rdrand(&self) -> bool {
        let reported = self
            .cpuid
            .as_slice()
            .iter()
            .find(|e| e.function == 1)
            .is_some_and(|e| e.ecx & (1 << 30) != 0);
        reported
            || (self.platform == super::Platform::Pvm
                && std::arch::is_x86_feature_detected!("rdrand"))
    }

    /// The vCPU's AT_HWCAP (CPUID.1:EDX, as Linux reports it).
    pub fn hwcap(&self) -> u64 {
        self.cpuid
            .as_slice()
            .iter()
            .find(|e| e.function == 1)
            .map(|e| u64::from(e.edx))
            .unwrap_or(0)
    }
}

/// What stopped the vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `out` to this port (the only way the guest kernel talks to us).
    Io(u16),
    /// KVM_RUN was interrupted by a signal (the watchdog's kick).
    Interrupted,
    /// The guest triple-faulted.
    Shutdown,
    /// The guest touched `addr`, where no memory slot is: memory the
    /// program never mapped, or mapped by a call a poller answered while the
    /// vCPU ran (its chunk gets a slot at the next entry).
    Mmio {
        /// The address.
        addr: u64,
        /// A store (else a load).
        write: bool,
        /// The access's width in bytes (at most 8).
        len: usize,
        /// A store's bytes (the first `len`).
        data: [u8; 8],
    },
    /// KVM could not get the host page behind a guest access (EFAULT):
    /// a page of a mapped file past the file's end (where Linux raises
    /// SIGBUS), or a forkvm bug. KVM does not say which address (the
    /// hypervisors forkvm runs on fill no `KVM_EXIT_MEMORY_FAULT`).
    HostFault,
    /// KVM could not emulate an instruction: one it took for an MMIO
    /// access (where no memory slot is) that its emulator does not know,
    /// such as a vector load.
    EmulationFailure,
    /// Anything else; a broken guest kernel or an unsupported hypervisor.
    Other(&'static str),
}

/// A KVM VM with one vCPU over one guest memory slot.
pub struct Vcpu {
    // Field order matters for drop: the vCPU goes before its VM.
    vcpu: VcpuFd,
    vm: VmFd,
    /// Chunks of guest RAM with a memory slot (bit n: slot n).
    slots: u64,
    /// The system registers set by `reset` (restored after a guest fault).
    sregs: Option<kvm_sregs>,
    /// The guest's extended-state layout.
    xsave_layout: XsaveLayout,
    /// What LSTAR holds.
    lstar: u64,
    /// The debug registers were set (by a debugger's watchpoints).
    debug_regs_set: bool,
}

impl Vcpu {
    /// Creates the VM, gives the chunks of `mem` in use their memory slots
    /// and creates the vCPU.
    pub fn new(hv: &Hypervisor, mem: &GuestMemory) -> Result<Self, KvmError> {
        let held = super::watchdog::KicksHeld::new();
        let vm = ioctl("CREATE_VM", || hv.kvm.create_vm())?;
        let mut vcpu = ioctl("CREATE_VCPU", || vm.create_vcpu(0))?;
        drop(held);
        ioctl("SET_CPUID2", || vcpu.set_cpuid2(&hv.cpuid))?;
        // The rate of the TSC the guest reads, for the shared time function.
        if let Ok(khz) = vcpu.get_tsc_khz() {
            crate::clock::set_tsc_khz(u64::from(khz));
        }
        vcpu.set_sync_valid_reg(SyncReg::Register);
        let mut me = Self {
            vcpu,
            vm,
            sregs: None,
            xsave_layout: hv.xsave_layout,
            lstar: 0,
            slots: 0,
            debug_regs_set: false,
        };
        me.sync_slots(mem)?;
        Ok(me)
    }

    /// Makes a VM that ran another program (a pooled one) as good as a new
    /// one for a program about to be built over `mem`, its memory renewed
    /// (`GuestMemory::renew`) at the same host addresses: no event pending,
    /// no debug registers, the initial FPU/SSE/AVX state, no queued
    /// registers. [`Self::sync_slots`] and [`Self::reset`] then give it the
    /// slots, system registers, MSRs and registers as to a new VM. Slots of
    /// chunks only the last program used stay (their memory reads as
    /// zeros), as in a pooled VM a fork's copy takes.
    pub fn renew(&mut self) -> Result<(), KvmError> {
        self.vcpu.clear_sync_dirty_reg(SyncReg::Register);
        // An exception or interrupt on its way in would be the last
        // program's (not seen after an exit: an error, and the VM dropped).
        if self.event_in_flight()? {
            return Err(KvmError::Missing("a vCPU with no event in flight"));
        }
        // As a new VM's: DR6 and DR7 with only their fixed bits set (an
        // ioctl a debugger's VM alone needs; no other sets them).
        if self.debug_regs_set {
            self.set_debug_regs(&kvm_bindings::kvm_debugregs {
                dr6: 0xffff_0ff0,
                dr7: 0x400,
                ..Default::default()
            })?;
            self.debug_regs_set = false;
        }
        self.set_xsave_area(&self.initial_xsave_area())
    }

    /// Whether `mem` uses chunks that have no memory slot yet.
    pub fn slots_missing(&self, mem: &GuestMemory) -> bool {
        mem.chunks_in_use() & !self.slots != 0
    }

    /// Gives every chunk of `mem` the program has mapped something in a KVM
    /// memory slot (one per chunk), if it has none yet; cheap when nothing is
    /// new. Guest RAM is registered piecemeal because KVM sizes (and zeroes)
    /// per-slot bookkeeping by the slot's size when it shadows page tables,
    /// as on PVM: a program's whole reserved address space would be paid for
    /// at every start. An access outside every slot is an MMIO exit, which
    /// the run loop reports as a segmentation fault.
    pub fn sync_slots(&mut self, mem: &GuestMemory) -> Result<(), KvmError> {
        let missing = mem.chunks_in_use() & !self.slots;
        if missing == 0 {
            return Ok(());
        }
        if !mem.tracks_mappings() && self.slots == 0 {
            // Bare memory (floors, tests): all of it in use, one slot.
            let region = kvm_userspace_memory_region {
                slot: 0,
                flags: 0,
                guest_phys_addr: 0,
                memory_size: mem.size(),
                userspace_addr: mem.host_base(),
            };
            // SAFETY: as below: `mem`'s whole mapping, which outlives this VM.
            ioctl("SET_USER_MEMORY_REGION", || unsafe {
                self.vm.set_user_memory_region(region)
            })?;
            self.slots = u64::MAX;
            return Ok(());
        }
        let chunk = crate::memory::chunk_size(mem.size());
        for n in 0..u64::BITS {
            let start = u64::from(n) * chunk;
            if missing & (1 << n) == 0 || start >= mem.size() {
                continue;
            }
            let region = kvm_userspace_memory_region {
                slot: n,
                flags: 0,
                guest_phys_addr: start,
                memory_size: chunk.min(mem.size() - start),
                userspace_addr: mem.host_base() + start,
            };
            // SAFETY: the region lies within `mem`'s mapping, which outlives
            // this VM: the owner (Machine, pool Slot) keeps both and drops the
            // VM first, and a remap keeps the mapping's host addresses.
            ioctl("SET_USER_MEMORY_REGION", || unsafe {
                self.vm.set_user_memory_region(region)
            })?;
            self.slots |= 1 << n;
        }
        Ok(())
    }

    /// Puts the vCPU in long mode at the guest kernel's initial `iretq`,
    /// which enters the program at `frame`.
    pub fn reset(
        &mut self,
        hv: &Hypervisor,
        mem: &mut GuestMemory,
        cr3: u64,
        frame: Frame,
        fs_base: u64,
    ) -> Result<(), KvmError> {
        frame
            .write(mem, guest_kernel::INITIAL_FRAME_ADDR)
            .map_err(|_| KvmError::Missing("room for the initial frame"))?;
        let mut sregs: kvm_sregs = ioctl("GET_SREGS", || self.vcpu.get_sregs())?;
        let code = |sel: u16, dpl: u8| kvm_segment {
            base: 0,
            limit: 0xffff_ffff,
            selector: sel,
            type_: 0xb,
            present: 1,
            dpl,
            db: 0,
            s: 1,
            l: 1,
            g: 1,
            avl: 0,
            unusable: 0,
            padding: 0,
        };
        let data = |sel: u16, dpl: u8| kvm_segment {
            type_: 0x3,
            db: 1,
            l: 0,
            ..code(sel, dpl)
        };
        sregs.cs = code(selector::KERNEL_CS, 0);
        sregs.ss = data(selector::KERNEL_DS, 0);
        sregs.ds = data(0, 0);
        sregs.es = data(0, 0);
        sregs.gs = data(0, 0);
        sregs.fs = kvm_segment {
            base: fs_base,
            ..data(0, 0)
        };
        sregs.tr = kvm_segment {
            base: abi::TSS_ADDR,
            limit: (guest_kernel::TSS_SIZE - 1) as u32,
            selector: selector::TSS,
            type_: 0xb, // busy 64-bit TSS
            present: 1,
            dpl: 0,
            db: 0,
            s: 0,
            l: 0,
            g: 0,
            avl: 0,
            unusable: 0,
            padding: 0,
        };
        sregs.ldt = kvm_segment {
            unusable: 1,
            type_: 2,
            ..sregs.tr
        };
        sregs.gdt.base = abi::GDT_ADDR;
        sregs.gdt.limit = guest_kernel::GDT_LIMIT;
        sregs.idt.base = abi::IDT_ADDR;
        sregs.idt.limit = guest_kernel::IDT_LIMIT;
        sregs.cr0 = cr::CR0_PE
            | cr::CR0_MP
            | cr::CR0_ET
            | cr::CR0_NE
            | cr::CR0_WP
            | cr::CR0_AM
            | cr::CR0_PG;
        sregs.cr3 = cr3;
        sregs.cr4 = cr::CR4_PAE | cr::CR4_OSFXSR | cr::CR4_OSXMMEXCPT | cr::CR4_OSXSAVE;
        sregs.efer = cr::EFER_SCE | cr::EFER_LME | cr::EFER_LMA | cr::EFER_NXE;
        ioctl("SET_SREGS", || self.vcpu.set_sregs(&sregs))?;
        self.sregs = Some(sregs);

        let mut xcrs = kvm_xcrs {
            nr_xcrs: 1,
            ..Default::default()
        };
        xcrs.xcrs[0].xcr = 0;
        xcrs.xcrs[0].value = hv.xcr0;
        ioctl("SET_XCRS", || self.vcpu.set_xcrs(&xcrs))?;

        let entries = [
            (msr::STAR, abi::STAR_VALUE),
            (msr::LSTAR, hv.platform.lstar(SyscallPath::Exit)),
            (msr::CSTAR, 0),
            (msr::SFMASK, abi::SFMASK_VALUE),
            (msr::FS_BASE, fs_base),
            (msr::GS_BASE, 0),
            (msr::KERNEL_GS_BASE, 0),
        ]
        .map(|(index, data)| kvm_msr_entry {
            index,
            data,
            ..Default::default()
        });
        self.set_msrs(&entries)?;
        self.lstar = hv.platform.lstar(SyscallPath::Exit);
        // The vDSO computes time from the TSC with the host's time base, so the
        // guest must read the host's TSC. On PVM it does; hardware KVM gives each
        // VM its own offset, so set the guest's TSC to the host's (a write of
        // IA32_TSC; the few microseconds of the ioctl are far below the vDSO's
        // one-second segments, and the time function never goes backwards).
        if hv.platform == Platform::Hardware {
            self.set_msrs(&[kvm_msr_entry {
                index: msr::TSC,
                data: crate::clock::rdtsc(),
                ..Default::default()
            }])?;
        }

        let regs = kvm_regs {
            rip: guest_kernel::IRET_ENTRY,
            rsp: guest_kernel::INITIAL_FRAME_ADDR,
            rflags: 0x2,
            ..Default::default()
        };
        ioctl("SET_REGS", || self.vcpu.set_regs(&regs))?;
        Ok(())
    }

    fn set_msrs(&self, entries: &[kvm_msr_entry]) -> Result<(), KvmError> {
        let msrs = Msrs::from_entries(entries).map_err(|_| KvmError::Missing("MSR list"))?;
        let n = ioctl("SET_MSRS", || self.vcpu.set_msrs(&msrs))?;
        if n != entries.len() {
            return Err(KvmError::Missing("a writable syscall MSR"));
        }
        Ok(())
    }

    /// Points LSTAR at the syscall entry for `path` (an ioctl, skipped when
    /// it is there already, as for a pooled VM reused by the same kind of master).
    pub fn set_syscall_path(&mut self, hv: &Hypervisor, path: SyscallPath) -> Result<(), KvmError> {
        let lstar = hv.platform.lstar(path);
        if lstar != self.lstar {
            self.set_lstar(lstar)?;
        }
        Ok(())
    }

    /// Points LSTAR at `lstar` (an ioctl).
    pub fn set_lstar(&mut self, lstar: u64) -> Result<(), KvmError> {
        self.set_msrs(&[kvm_msr_entry {
            index: msr::LSTAR,
            data: lstar,
            ..Default::default()
        }])?;
        self.lstar = lstar;
        Ok(())
    }

    /// Loads a new FS base (arch_prctl(ARCH_SET_FS)).
    pub fn set_fs_base(&self, base: u64) -> Result<(), KvmError> {
        self.set_msrs(&[kvm_msr_entry {
            index: msr::FS_BASE,
            data: base,
            ..Default::default()
        }])
    }

    /// Loads the FS base and a GS base of 0 in one ioctl: what every call
    /// starts from, whatever the last one did to FS or GS (a segment load
    /// changes the bases without a system call the host would see).
    pub fn set_segment_bases(&self, fs_base: u64) -> Result<(), KvmError> {
        self.set_msrs(&[
            kvm_msr_entry {
                index: msr::FS_BASE,
                data: fs_base,
                ..Default::default()
            },
            kvm_msr_entry {
                index: msr::GS_BASE,
                data: 0,
                ..Default::default()
            },
        ])
    }

    /// Runs the guest until its next exit.
    pub fn run(&mut self) -> Result<Exit, KvmError> {
        match self.vcpu.run() {
            Ok(VcpuExit::IoOut(port, _)) => Ok(Exit::Io(port)),
            Ok(VcpuExit::Shutdown) => Ok(Exit::Shutdown),
            Ok(VcpuExit::Hlt) => Ok(Exit::Other("hlt")),
            Ok(VcpuExit::InternalError) => Ok(Exit::EmulationFailure),
            Ok(VcpuExit::FailEntry(..)) => Ok(Exit::Other("failed VM entry")),
            Ok(VcpuExit::MmioRead(addr, d)) => Ok(Exit::Mmio {
                addr,
                write: false,
                len: d.len().min(8),
                data: [0; 8],
            }),
            Ok(VcpuExit::MmioWrite(addr, d)) => {
                let mut data = [0u8; 8];
                let len = d.len().min(8);
                data[..len].copy_from_slice(&d[..len]);
                Ok(Exit::Mmio {
                    addr,
                    write: true,
                    len,
                    data,
                })
            }
            Ok(_) => Ok(Exit::Other("unexpected exit")),
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                Ok(Exit::Interrupted)
            }
            Err(e) if e.errno() == libc::EFAULT => Ok(Exit::HostFault),
            Err(source) => Err(KvmError::Ioctl {
                what: "RUN",
                source,
            }),
        }
    }

    /// Lets KVM finish the instruction of an MMIO exit without running the
    /// guest (KVM_RUN with `immediate_exit`), so that registers set
    /// afterwards are not overwritten by its completion. A read gets zeros.
    pub fn finish_mmio(&mut self) -> Result<(), KvmError> {
        self.vcpu.set_kvm_immediate_exit(1);
        let r = self.vcpu.run().map(|_| ());
        self.vcpu.set_kvm_immediate_exit(0);
        match r {
            Err(e) if e.errno() != libc::EINTR && e.errno() != libc::EAGAIN => {
                Err(KvmError::Ioctl {
                    what: "RUN",
                    source: e,
                })
            }
            _ => Ok(()),
        }
    }

    /// Answers the load of the last exit (an MMIO read) with `bytes`; the
    /// next `run` completes the instruction with them.
    pub fn answer_mmio_read(&mut self, bytes: &[u8]) {
        let run = self.vcpu.get_kvm_run();
        // SAFETY: called only after `run` returned `Exit::Mmio` for a load,
        // so KVM filled the run structure's union as its `mmio` member; the
        // copy is bounded by that member's 8-byte array and its `len`.
        let mmio = unsafe { &mut run.__bindgen_anon_1.mmio };
        let n = bytes.len().min(mmio.len as usize).min(mmio.data.len());
        mmio.data[..n].copy_from_slice(&bytes[..n]);
    }

    /// The general registers as of the last exit (free: SYNC_REGS).
    pub fn regs(&self) -> kvm_regs {
        self.vcpu.sync_regs().regs
    }

    /// Sets RAX for the next entry (free: SYNC_REGS).
    pub fn set_rax(&mut self, v: u64) {
        self.vcpu.sync_regs_mut().regs.rax = v;
        self.vcpu.set_sync_dirty_reg(SyncReg::Register);
    }

    /// Replaces all general registers for the next entry.
    pub fn set_regs(&mut self, regs: &kvm_regs) {
        self.vcpu.sync_regs_mut().regs = *regs;
        self.vcpu.set_sync_dirty_reg(SyncReg::Register);
    }

    /// The general registers through KVM_GET_REGS (an ioctl; for floors and debugging).
    pub fn get_regs_ioctl(&self) -> Result<kvm_regs, KvmError> {
        ioctl("GET_REGS", || self.vcpu.get_regs())
    }

    /// The guest's debug registers DR0-3, DR6, DR7 (an ioctl; gdb's watchpoints).
    pub fn debug_regs(&self) -> Result<kvm_bindings::kvm_debugregs, KvmError> {
        ioctl("GET_DEBUGREGS", || self.vcpu.get_debug_regs())
    }

    /// Loads the guest's debug registers (an ioctl; gdb's watchpoints).
    pub fn set_debug_regs(&mut self, regs: &kvm_bindings::kvm_debugregs) -> Result<(), KvmError> {
        self.debug_regs_set = true;
        ioctl("SET_DEBUGREGS", || self.vcpu.set_debug_regs(regs))
    }

    /// Puts the vCPU back into guest-kernel mode with the system registers
    /// `reset` set, whatever the guest did (after a fault or a timeout).
    pub fn restore_kernel_mode(&mut self) -> Result<(), KvmError> {
        let sregs = self.sregs.ok_or(KvmError::Missing("an initialised vCPU"))?;
        ioctl("SET_SREGS", || self.vcpu.set_sregs(&sregs))?;
        // Any general registers queued through SYNC_REGS would be stale now.
        self.vcpu.clear_sync_dirty_reg(SyncReg::Register);
        Ok(())
    }

    /// Puts the vCPU in guest-kernel mode (the code and stack segments
    /// `reset` set) and keeps every other system register, FS/GS bases
    /// included: for resuming through the kernel's `iretq` after an exit
    /// taken in user mode (an MMIO exit), which exceptions never are.
    pub fn enter_kernel_mode(&mut self) -> Result<(), KvmError> {
        let base = self.sregs.ok_or(KvmError::Missing("an initialised vCPU"))?;
        let mut now: kvm_sregs = ioctl("GET_SREGS", || self.vcpu.get_sregs())?;
        if now.cs.dpl == base.cs.dpl {
            return Ok(());
        }
        now.cs = base.cs;
        now.ss = base.ss;
        ioctl("SET_SREGS", || self.vcpu.set_sregs(&now))?;
        Ok(())
    }

    /// Whether an exception or interrupt is on its way into the guest (an
    /// ioctl): the vCPU stopped in the middle of delivering it, so its
    /// registers must not be swapped for another thread's.
    pub fn event_in_flight(&self) -> Result<bool, KvmError> {
        let ev = ioctl("GET_VCPU_EVENTS", || self.vcpu.get_vcpu_events())?;
        Ok(ev.exception.injected != 0
            || ev.exception.pending != 0
            || ev.interrupt.injected != 0
            || ev.nmi.injected != 0
            || ev.nmi.pending != 0)
    }

    /// The FPU/SSE/AVX state in XSAVE format (an ioctl).
    pub fn xsave(&self) -> Result<[u8; 4096], KvmError> {
        let x = ioctl("GET_XSAVE", || self.vcpu.get_xsave())?;
        let mut out = [0u8; 4096];
        for (chunk, word) in out.chunks_exact_mut(4).zip(x.region.iter()) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        Ok(out)
    }

    /// The running thread's extended state (an ioctl).
    pub fn xsave_area(&self) -> Result<XsaveArea, KvmError> {
        let x = ioctl("GET_XSAVE", || self.vcpu.get_xsave())?;
        Ok(XsaveArea::from_kvm(&x, self.xsave_layout))
    }

    /// Loads a thread's extended state (an ioctl). KVM refuses state it
    /// considers invalid (EINVAL); areas built from guest data go through
    /// [`XsaveArea::from_sigframe`] first.
    pub fn set_xsave_area(&self, area: &XsaveArea) -> Result<(), KvmError> {
        let x = area.to_kvm();
        // SAFETY: KVM_SET_XSAVE reads `size_of::<kvm_xsave>()` (4096) bytes
        // unless dynamically enabled state (AMX) was granted to this process
        // with arch_prctl(ARCH_REQ_XCOMP_GUEST_PERM); forkvm never asks for it
        // and XCR0 excludes those components, so the kernel reads only `x`.
        ioctl("SET_XSAVE", || unsafe { self.vcpu.set_xsave(&x) })
    }

    /// The state signal handlers start with.
    pub fn initial_xsave_area(&self) -> XsaveArea {
        XsaveArea::init(self.xsave_layout)
    }

    /// The system registers (an ioctl: for crash reports, not hot paths).
    pub fn sregs(&self) -> Result<kvm_sregs, KvmError> {
        ioctl("GET_SREGS", || self.vcpu.get_sregs())
    }
}
