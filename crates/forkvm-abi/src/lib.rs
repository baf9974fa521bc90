//! Everything the forkvm host, its guest kernel and guest programs must agree
//! on, in one place. `no_std`, so guest programs can use it too.
//!
//! Guest virtual addresses equal guest physical addresses (identity map), so
//! every address below is both. The guest kernel is assembled at run time
//! from these constants (see `forkvm::guest_kernel`): nothing here is copied
//! by hand into assembly.
//!
//! ```text
//! 0x0000_0000  null guard page (never mapped)
//! 0x0000_1000  GDT                       supervisor, RW
//! 0x0000_2000  IDT (256 gates)           supervisor, RW
//! 0x0000_3000  TSS                       supervisor, RW
//! 0x0000_4000  kernel code (entries)     supervisor, RX
//! 0x0000_5000  syscall stub              user, RX   (LSTAR points here)
//! 0x0000_6000  IST stack (8 KiB)         supervisor, RW, top 0x8000
//! 0x0000_9000  master FPU state (XSAVE)  user, R      (restored at every call)
//! 0x0000_a000  fast-path data            user, RW, NX (host-written answers, exitless call slot; see `fast`)
//! 0x0000_b000  vDSO (AT_SYSINFO_EHDR)    user, RX
//! 0x0001_0000  page tables               supervisor, RW
//! 0x0020_0000  user memory: ELF, brk heap ->  ... <- mmap area, stack (top = end of RAM)
//! ```

#![no_std]

/// Size of a small page.
pub const PAGE_SIZE: u64 = 0x1000;
/// Size of a large (2 MiB) page.
pub const HUGE_PAGE_SIZE: u64 = 0x20_0000;

/// Global descriptor table.
pub const GDT_ADDR: u64 = 0x1000;
/// Interrupt descriptor table.
pub const IDT_ADDR: u64 = 0x2000;
/// Task state segment (holds RSP0 and IST1).
pub const TSS_ADDR: u64 = 0x3000;
/// Guest kernel code: exception entries and the initial `iretq`.
pub const KERNEL_CODE_ADDR: u64 = 0x4000;
/// The syscall entry stub, user-executable because on PVM `syscall` stays at CPL3.
pub const SYSCALL_STUB_ADDR: u64 = 0x5000;
/// Bottom of the interrupt stack (IST1).
pub const IST_STACK_BOTTOM: u64 = 0x6000;
/// Top of the interrupt stack; every exception frame is pushed below it.
pub const IST_STACK_TOP: u64 = 0x8000;
/// The master's FPU/SSE/AVX state in XSAVE format; every host-initiated call
/// starts with `xrstor` from here, so no FPU state leaks between calls.
pub const XSAVE_AREA_ADDR: u64 = 0x9000;
/// Size of the XSAVE area (KVM's `struct kvm_xsave` region).
pub const XSAVE_AREA_SIZE: u64 = 0x1000;
/// The page the in-guest syscall dispatcher answers from (see [`fast`]).
pub const FAST_DATA_ADDR: u64 = 0xa000;
/// forkvm's vDSO (clock_gettime & co. without a syscall), announced with AT_SYSINFO_EHDR.
pub const VDSO_ADDR: u64 = 0xb000;
/// Room for the vDSO image.
pub const VDSO_SIZE: u64 = 0x1000;
/// First page-table page (the PML4); the rest follow it.
pub const PAGE_TABLES_ADDR: u64 = 0x1_0000;
/// End of the page-table area.
pub const PAGE_TABLES_END: u64 = USER_BASE;
/// Lowest address the guest program may use.
pub const USER_BASE: u64 = 0x20_0000;

/// Default load address of a position-independent (static-pie) program.
pub const PIE_LOAD_BASE: u64 = 0x40_0000;
/// Largest guest memory we accept (the page tables must fit their area).
pub const MAX_GUEST_MEMORY: u64 = 64 << 30;

/// GDT selectors (Linux values, so STAR matches what programs expect).
pub mod selector {
    /// Kernel 64-bit code.
    pub const KERNEL_CS: u16 = 0x10;
    /// Kernel data.
    pub const KERNEL_DS: u16 = 0x18;
    /// User 32-bit code (base for SYSRET selector arithmetic).
    pub const USER_CS32: u16 = 0x23;
    /// User data.
    pub const USER_DS: u16 = 0x2b;
    /// User 64-bit code.
    pub const USER_CS: u16 = 0x33;
    /// Task state segment.
    pub const TSS: u16 = 0x40;
}

/// I/O ports the guest kernel uses to reach the host (`out %al, $port`).
pub mod port {
    /// Hardware-KVM syscall stub: `out` at CPL0 right at LSTAR.
    pub const SYSCALL: u16 = 0x7f;
    /// Exception vector `v` exits on port `EXCEPTION_BASE + v`.
    pub const EXCEPTION_BASE: u16 = 0x80;
    /// Number of exception vectors with an entry.
    pub const EXCEPTION_COUNT: u16 = 32;
}

/// x86 exception vectors that matter to the host.
pub mod vector {
    pub const DIVIDE_ERROR: u8 = 0;
    pub const DEBUG: u8 = 1;
    pub const BREAKPOINT: u8 = 3;
    pub const OVERFLOW: u8 = 4;
    pub const BOUND_RANGE: u8 = 5;
    pub const INVALID_OPCODE: u8 = 6;
    pub const DEVICE_NOT_AVAILABLE: u8 = 7;
    pub const DOUBLE_FAULT: u8 = 8;
    pub const INVALID_TSS: u8 = 10;
    pub const SEGMENT_NOT_PRESENT: u8 = 11;
    pub const STACK_FAULT: u8 = 12;
    pub const GENERAL_PROTECTION: u8 = 13;
    pub const PAGE_FAULT: u8 = 14;
    pub const X87_FP: u8 = 16;
    pub const ALIGNMENT_CHECK: u8 = 17;
    pub const MACHINE_CHECK: u8 = 18;
    pub const SIMD_FP: u8 = 19;
    pub const CONTROL_PROTECTION: u8 = 21;

    /// Whether the CPU pushes an error code for this vector.
    pub const fn has_error_code(v: u8) -> bool {
        matches!(v, 8 | 10..=14 | 17 | 21 | 29 | 30)
    }
}

/// Entry points inside the guest kernel's code and stub pages.
pub mod entry {
    use super::{port, KERNEL_CODE_ADDR, SYSCALL_STUB_ADDR};

    /// LSTAR on PVM: a one-byte `int3` (user page).
    pub const PVM_SYSCALL_STUB: u64 = SYSCALL_STUB_ADDR;
    /// LSTAR on hardware KVM: `out %al, $SYSCALL; sysretq`.
    pub const HW_SYSCALL_STUB: u64 = SYSCALL_STUB_ADDR + 0x10;
    /// LSTAR on PVM with the fast path on: the in-guest dispatcher (CPL3),
    /// which answers guest-local calls from [`super::fast`] and sends the
    /// rest to [`PVM_SYSCALL_STUB`].
    pub const PVM_FAST_SYSCALL: u64 = SYSCALL_STUB_ADDR + 0x100;
    /// LSTAR on hardware KVM with the fast path on: the same dispatcher at
    /// CPL0, returning with `sysretq`; the rest go to [`HW_SYSCALL_STUB`].
    pub const HW_FAST_SYSCALL: u64 = SYSCALL_STUB_ADDR + 0x300;
    /// Most bytes of each dispatcher.
    pub const FAST_SYSCALL_SIZE: u64 = 0x1f0;
    /// The hardware dispatcher's one `sysretq` (the host recognises a #GP
    /// here, on PVM with the hardware path forced, as an answered call).
    pub const HW_FAST_SYSRET: u64 = SYSCALL_STUB_ADDR + 0x4f0;
    /// getrandom's in-guest fill loop, shared by both dispatchers: fills
    /// RSI bytes at RDI with RDRAND (CF clear: RDRAND failed). Called with
    /// the caller's RDI and RSI saved just above the return address, so a
    /// fault inside it (a bad buffer) is answered by the host with EFAULT.
    pub const GETRANDOM_FILL: u64 = SYSCALL_STUB_ADDR + 0x500;
    /// Bytes of [`GETRANDOM_FILL`] (a fault at an address in this range is the fill's).
    pub const GETRANDOM_FILL_SIZE: u64 = 0x80;
    /// What the dispatchers skip below the program's RSP before they push
    /// anything: the x86-64 red zone (128 bytes leaf code may use) and one slot.
    pub const RED_ZONE_SKIP: u64 = 136;
    /// Where host-initiated calls enter user mode: `r11` holds the function,
    /// `rdi..r9` its arguments; the code restores the master's FPU state,
    /// calls it and returns the result with the `CALL_RETURN` hypercall.
    pub const CALL_ENTRY: u64 = SYSCALL_STUB_ADDR + 0x40;
    /// The exitless host call blocks, one per platform (see [`super::exitless`]):
    /// `POST` (the dispatcher's way to the host: post the call to the data
    /// page's call slot, or go on to the exit stub), `SPIN` (wait for the
    /// answer, bounded; the host settles a call found posted or answered
    /// while the vCPU is anywhere in `[SPIN, SPIN + SPIN_SIZE)`), `CANCEL`
    /// (reload RAX with the call number and take the exit stub) and
    /// `RETURN` (return to the program with RAX as the answer).
    pub mod exitless {
        use super::super::SYSCALL_STUB_ADDR;
        /// The PVM block (CPL3, returns like the PVM dispatcher).
        pub const PVM: u64 = SYSCALL_STUB_ADDR + 0x600;
        /// The hardware block (CPL0, returns with `sysretq`).
        pub const HW: u64 = SYSCALL_STUB_ADDR + 0x800;
        /// Offset of the post code in a block.
        pub const POST: u64 = 0x00;
        /// Offset of the spin loop in a block.
        pub const SPIN: u64 = 0x80;
        /// Bytes of the spin loop.
        pub const SPIN_SIZE: u64 = 0xe0;
        /// Offset of the cancel code in a block.
        pub const CANCEL: u64 = 0x160;
        /// Offset of the answered-call code (read the answer, free the slot).
        pub const DONE: u64 = 0x170;
        /// Offset of the return to the program (RAX holds the answer).
        pub const RETURN: u64 = 0x190;
        /// Bytes of a block.
        pub const SIZE: u64 = 0x200;
    }
    /// Bytes reserved for each exception vector's entry (vector `v` at `KERNEL_CODE_ADDR + v * ENTRY_SIZE`).
    pub const ENTRY_SIZE: u64 = 16;
    /// The `iretq` the vCPU starts at, returning into the program.
    pub const IRET_ENTRY: u64 = KERNEL_CODE_ADDR + ENTRY_SIZE * port::EXCEPTION_COUNT as u64;
}

/// The fast-path data page at [`FAST_DATA_ADDR`]: offsets of the values the
/// host writes (each a little-endian u64) and the dispatcher and the vDSO
/// read (they write only the exitless call slot). The page is writable by the program, so the
/// host trusts nothing in it: a program that scribbles here only gets wrong
/// answers to its own calls.
pub mod fast {
    /// getpid.
    pub const PID: u64 = 0x00;
    /// getppid.
    pub const PPID: u64 = 0x08;
    /// getuid/geteuid.
    pub const UID: u64 = 0x10;
    /// getgid/getegid.
    pub const GID: u64 = 0x18;
    /// gettid: the running thread, rewritten by the host before every entry.
    pub const TID: u64 = 0x20;
    /// Nonzero when the running thread is the only one (sched_yield is then
    /// a no-op answered in the guest); rewritten before every entry.
    pub const ALONE: u64 = 0x28;
    /// Nonzero when the vCPU has RDRAND: getrandom is then answered in the
    /// guest (hardware random numbers, nothing kept that a snapshot or a
    /// fork could share).
    pub const RDRAND: u64 = 0x30;
    /// The vDSO's time base: eight u64 (generation, TSC start and end, CLOCK_MONOTONIC
    /// at the start, realtime and boottime offsets, mult, shift); see `forkvm::clock`.
    pub const TIME: u64 = 0x100;
    /// Bytes of the time base.
    pub const TIME_SIZE: u64 = 64;
    /// The exitless call slot (see [`super::exitless`]): state.
    pub const CALL_STATE: u64 = 0x200;
    /// The posted call's number.
    pub const CALL_NR: u64 = 0x208;
    /// The posted call's six arguments (RDI, RSI, RDX, R10, R8, R9).
    pub const CALL_ARGS: u64 = 0x210;
    /// The host's answer.
    pub const CALL_RESULT: u64 = 0x240;
    /// How many `pause` rounds the guest waits for a poller before it takes
    /// the exit instead (host-written, calibrated to a few tens of µs).
    pub const CALL_SPIN: u64 = 0x248;
    /// Nonzero while a host poller watches this VM's slot (host-written).
    pub const CALL_AWAKE: u64 = 0x250;
    /// Calls the guest took back after waiting its whole spin budget
    /// (guest-written; the host backs off when it grows: no poller got a CPU).
    pub const CALL_CANCELS: u64 = 0x258;
    /// How many `pause` rounds the guest waits for the answer once a poller
    /// has claimed its call, before it leaves through the exit with
    /// [`super::hypercall::AWAIT_ANSWER`] (host-written).
    pub const CALL_ANSWER_SPIN: u64 = 0x260;
    /// Bitmap of the call numbers (0..512) worth posting (host-written).
    pub const CALL_MAP: u64 = 0x280;
    /// Bytes of [`CALL_MAP`].
    pub const CALL_MAP_SIZE: u64 = 64;
}

/// Exitless host calls: the in-guest dispatcher posts a call that only the
/// host can answer to the call slot of the fast-path data page and spins
/// while a host poller thread, which watches the slot, answers it; no VM exit.
/// The slot is written by the program too, so the host trusts none of it: a
/// posted call is checked exactly as one that arrives by an exit.
///
/// States of [`fast::CALL_STATE`]: the guest stores [`POSTED`]; a poller
/// claims the call by clearing that bit atomically (the guest cancels the
/// same way when it tires of waiting, so exactly one of them wins), serves
/// it, writes [`fast::CALL_RESULT`] and stores [`DONE`], or [`DECLINED`] when
/// the call must go through an exit after all.
pub mod exitless {
    /// Nothing posted.
    pub const IDLE: u64 = 0;
    /// A call is posted and unclaimed (bit 0).
    pub const POSTED: u64 = 1;
    /// The call was served; its answer is in the slot.
    pub const DONE: u64 = 2;
    /// The poller would not serve the call: the guest takes the exit.
    pub const DECLINED: u64 = 4;
}

/// Where the exception frame (`[err], RIP, CS, RFLAGS, RSP, SS`) sits on the IST stack.
pub const fn exception_frame_addr(vector: u8) -> u64 {
    // The CPU aligns the IST top to 16 bytes and pushes 5 qwords (+1 with an error code).
    if vector::has_error_code(vector) {
        IST_STACK_TOP - 6 * 8
    } else {
        IST_STACK_TOP - 5 * 8
    }
}

/// Model-specific registers the host programs.
pub mod msr {
    pub const TSC: u32 = 0x10;
    pub const EFER: u32 = 0xc000_0080;
    pub const STAR: u32 = 0xc000_0081;
    pub const LSTAR: u32 = 0xc000_0082;
    pub const CSTAR: u32 = 0xc000_0083;
    pub const SFMASK: u32 = 0xc000_0084;
    pub const FS_BASE: u32 = 0xc000_0100;
    pub const GS_BASE: u32 = 0xc000_0101;
    pub const KERNEL_GS_BASE: u32 = 0xc000_0102;
}

/// STAR: SYSCALL loads CS=0x10/SS=0x18, SYSRET loads CS=0x33/SS=0x2b.
pub const STAR_VALUE: u64 =
    ((selector::USER_CS32 as u64) << 48) | ((selector::KERNEL_CS as u64) << 32);
/// RFLAGS bits cleared on `syscall` (TF, IF, DF, IOPL, AC, NT), as Linux does.
pub const SFMASK_VALUE: u64 = 0x0004_7700;

/// RFLAGS bits a user program may control (CF PF AF ZF SF TF DF OF AC ID); IF is forced on.
pub const USER_RFLAGS_MASK: u64 = 0x0025_4dd5;
/// Reserved bit 1 and IF.
pub const USER_RFLAGS_FORCED: u64 = 0x0202;

/// Control-register and EFER bits.
pub mod cr {
    pub const CR0_PE: u64 = 1 << 0;
    pub const CR0_MP: u64 = 1 << 1;
    pub const CR0_ET: u64 = 1 << 4;
    pub const CR0_NE: u64 = 1 << 5;
    pub const CR0_WP: u64 = 1 << 16;
    pub const CR0_AM: u64 = 1 << 18;
    pub const CR0_PG: u64 = 1 << 31;
    pub const CR4_PAE: u64 = 1 << 5;
    pub const CR4_OSFXSR: u64 = 1 << 9;
    pub const CR4_OSXMMEXCPT: u64 = 1 << 10;
    pub const CR4_OSXSAVE: u64 = 1 << 18;
    pub const EFER_SCE: u64 = 1 << 0;
    pub const EFER_LME: u64 = 1 << 8;
    pub const EFER_LMA: u64 = 1 << 10;
    pub const EFER_NXE: u64 = 1 << 11;
}

/// Page-table entry bits.
pub mod pte {
    pub const PRESENT: u64 = 1 << 0;
    pub const WRITABLE: u64 = 1 << 1;
    pub const USER: u64 = 1 << 2;
    pub const ACCESSED: u64 = 1 << 5;
    pub const DIRTY: u64 = 1 << 6;
    pub const HUGE: u64 = 1 << 7;
    pub const NO_EXECUTE: u64 = 1 << 63;
}

/// forkvm's own system calls, made by guest programs with the `syscall`
/// instruction. Their numbers are far above Linux's, so they never collide.
pub mod hypercall {
    /// The program is initialised: snapshot it here as the master.
    pub const READY: u64 = 0x666f_0001;
    /// Return from a host-initiated call (`vmcall`); the result is in the first argument.
    pub const CALL_RETURN: u64 = 0x666f_0002;
    /// Answer the request being served: `(status, headers, headers_len, body, body_len)`.
    /// Headers are `Name: value` lines separated by `\n`.
    pub const RESPOND: u64 = 0x666f_0003;
    /// From the exitless block only: a poller claimed the posted call and
    /// has not answered within the wait's bound (it lost its core). The
    /// host finishes the call once the poller is done with it (see
    /// `machine::exitless` in the forkvm crate).
    pub const AWAIT_ANSWER: u64 = 0x666f_0004;
}

/// The request a serving guest's handler receives (a pointer to this, in
/// guest memory, valid for the duration of the call). Strings are not
/// NUL-terminated; use the lengths.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Request {
    pub method: u64,
    pub method_len: u64,
    pub path: u64,
    pub path_len: u64,
    pub query: u64,
    pub query_len: u64,
    /// `Name: value` lines separated by `\n`.
    pub headers: u64,
    pub headers_len: u64,
    pub body: u64,
    pub body_len: u64,
}

impl Request {
    /// Size in bytes of the struct in guest memory.
    pub const SIZE: usize = 10 * 8;

    /// The struct's bytes as the guest sees them.
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let f = [
            self.method,
            self.method_len,
            self.path,
            self.path_len,
            self.query,
            self.query_len,
            self.headers,
            self.headers_len,
            self.body,
            self.body_len,
        ];
        let mut out = [0u8; Self::SIZE];
        let mut i = 0;
        while i < 10 {
            let b = f[i].to_le_bytes();
            let mut j = 0;
            while j < 8 {
                out[i * 8 + j] = b[j];
                j += 1;
            }
            i += 1;
        }
        out
    }
}
