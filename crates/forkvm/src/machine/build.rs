//! Building a machine: load the ELF (and its interpreter), place the guest
//! kernel, page tables, vDSO and fast-path data page, and set up the initial
//! stack and process state.

use super::{exitless, Config, Machine, MachineError, Mode, ReadyPoint};
use crate::abi;
use crate::guest_kernel::{self, Frame};
use crate::hypervisor::pool::VmPool;
use crate::hypervisor::{Hypervisor, SyscallPath, Vcpu};
use crate::linux::{self, Policy, Process};
use crate::loader::{self, LoadError, StackParams, Symbols};
use crate::memory::{page_tables, AddressSpace, GuestMemory, Rights};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

impl Machine {
    /// Loads the program at `path` (argv[0] defaults to it).
    pub fn from_file(path: &str, config: Config) -> Result<Self, MachineError> {
        Self::from_file_in(path, config, None)
    }

    /// As [`Self::from_file`], in a VM from `pool` when it has one of the
    /// size the program gets (exec: creating a VM costs more than building
    /// the program).
    pub(crate) fn from_file_in(
        path: &str,
        mut config: Config,
        pool: Option<&VmPool>,
    ) -> Result<Self, MachineError> {
        let file = loader::ProgramFile::open(path).map_err(|source| MachineError::Read {
            path: path.to_string(),
            source,
        })?;
        if config.argv.is_empty() {
            config.argv.push(path.into());
        }
        let exe = std::fs::canonicalize(path)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| path.to_string());
        let mut m = Self::build(file.bytes(), Some(file.fd()), &exe, config, pool)?;
        // Named as the path it was started by, not the file that leads to.
        m.proc.comm = linux::comm_of(path.as_bytes());
        m.publish();
        Ok(m)
    }

    /// Shows the first process to the run's others (see `child::shown`).
    fn publish(&self) {
        if let Some(f) = &self.proc.family {
            f.publish(&self.proc, &self.mem);
        }
    }

    /// Makes write roots `dirs` (also in `allow_write`) shared by every fork
    /// of this machine: written through to the host, never copied per fork.
    pub fn set_persist(&mut self, dirs: &[PathBuf]) {
        let dirs = dirs
            .iter()
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
            .collect();
        self.proc.tmp.set_persist(dirs);
    }

    /// Builds a VM for the ELF image `bytes`, which the guest knows as `exe_path`.
    pub fn new(bytes: &[u8], exe_path: &str, config: Config) -> Result<Self, MachineError> {
        let m = Self::build(bytes, None, exe_path, config, None)?;
        m.publish();
        Ok(m)
    }

    /// As [`Self::new`]; `fd` is the open file `bytes` come from, if any
    /// (its pages are then mapped rather than copied); in a VM from `pool`
    /// if it has one of the right size.
    fn build(
        bytes: &[u8],
        fd: Option<std::os::fd::BorrowedFd<'_>>,
        exe_path: &str,
        config: Config,
        pool: Option<&VmPool>,
    ) -> Result<Self, MachineError> {
        let image = loader::parse(bytes)?;
        let limit = config
            .memory
            .checked_next_multiple_of(abi::HUGE_PAGE_SIZE)
            .filter(|m| (8 << 20..=abi::MAX_GUEST_MEMORY).contains(m))
            .ok_or(MachineError::MemoryLimit(config.memory >> 20))?;
        let symbols = image.symbols();
        let is_go = ["runtime.rt0_go.abi0", "runtime.rt0_go", "_rt0_amd64_linux"]
            .iter()
            .any(|s| symbols.address_of(s).is_some());
        // A dynamically linked Go program (cgo) has glibc's allocator too,
        // whose per-thread arenas reserve 128 MiB each: it gets the dynamic
        // programs' room (1 GiB ran out: "fatal error: out of memory").
        // A dynamic loader run as the program (`ld.so PROGRAM`, as ldd does)
        // loads a dynamically linked program: it needs that room too.
        let dynamic = image.interp().is_some() || image.is_shared_object();
        let wanted = config.address_space.unwrap_or(if dynamic {
            DYNAMIC_ADDRESS_SPACE
        } else if is_go {
            GO_ADDRESS_SPACE
        } else {
            0
        });
        let memory = wanted
            .checked_next_multiple_of(abi::HUGE_PAGE_SIZE)
            .map_or(limit, |w| w.max(limit))
            .min(abi::MAX_GUEST_MEMORY);
        let hv = Hypervisor::get()?;
        // A pooled VM, as new (`VmPool::take_renewed`), or a new one.
        let (mut mem, vcpu) = match pool.and_then(|p| p.take_renewed(memory)) {
            Some(slot) => (slot.mem, Some(slot.vcpu)),
            None => (GuestMemory::new(memory)?, None),
        };
        guest_kernel::install(&mut mem)?;

        // The stack sits at the top of RAM; mmap regions grow down below it.
        let stack_reserve = (memory / 8).min(8 << 20);
        let stack_top = memory;
        // A shared object run as the program (a dynamic loader given the
        // program to load) goes where the kernel puts it: into the mmap
        // area, as an interpreter would (below), leaving the low addresses
        // to the program it loads (a non-PIE one at 0x400000 with MAP_FIXED).
        let loader_run = image.is_shared_object();
        // The program's own segments, built into the page tables.
        let own_regions = if loader_run {
            Vec::new()
        } else {
            image.regions()
        };
        let mut regions = own_regions.clone();
        let program = if loader_run {
            None
        } else {
            Some(image.load_from(bytes, fd, &mut mem)?)
        };
        if !image.exec_stack() {
            regions.push(page_tables::Region {
                start: stack_top - stack_reserve,
                end: stack_top,
                perm: page_tables::Perm {
                    write: true,
                    exec: false,
                },
            });
        }
        // A gap below the stack that is never mapped (not present in the page
        // tables): an overflow faults (SIGSEGV) instead of running into the
        // mmap area, as Linux's stack guard gap does.
        let stack_bottom = stack_top - stack_reserve;
        // The heap starts at the next 2 MiB boundary past the image (Linux
        // starts it at a random offset up to 32 MiB past it). On PVM a change
        // of host rights in a 2 MiB region makes every page used there fault
        // again, and allocators change rights at the heap's start (musl puts
        // a PROT_NONE guard page there in every request that first grows
        // the heap): next to the image, the program's text faulted again too
        // (17 pages a request of the C epoll server).
        // With a loader run as the program the heap starts where programs
        // do; it grows until the first mapping above it (glibc's malloc goes
        // on with mmap), as the kernel's is bounded by what lies above it.
        let brk_start = program.as_ref().map_or(abi::PIE_LOAD_BASE, |p| {
            p.image_end
                .checked_next_multiple_of(abi::HUGE_PAGE_SIZE)
                .unwrap_or(p.image_end)
        });
        let mut mm = AddressSpace::new(brk_start, stack_bottom);
        mm.reserve_stack_guard((stack_reserve / 8).clamp(abi::PAGE_SIZE, STACK_GUARD_MAX));
        let cr3 = page_tables::build_guarded(&mut mem, &regions, mm.mmap_top..stack_bottom)?;

        // From here on, system calls see only what the program has mapped.
        mem.track_mappings();
        mem.set_commit_limit(limit);
        // The page tables already give the program's own segments their
        // rights: the host need not (a fork would apply them at each start).
        for r in &own_regions {
            let rights = Rights {
                read: true,
                write: r.perm.write,
            };
            mem.map_user_in_page_tables(r.start, r.end, rights);
        }
        mem.map_user(
            stack_top - stack_reserve,
            stack_top,
            Rights {
                read: true,
                write: true,
            },
        );

        // A dynamically linked program starts in its interpreter (ld.so),
        // loaded like the kernel does: into the mmap area, told where the
        // program is through the auxv.
        let (image, program, symbols) = match program {
            Some(p) => (image, p, symbols),
            None => {
                let (image, program, _) = load_high(bytes, image.span(), fd, &mut mem, &mut mm)?;
                let symbols = image.symbols();
                (image, program, symbols)
            }
        };
        label_image(&mut mm, &image, exe_path, std::path::Path::new(exe_path));
        let (entry, interp_base) = match image.interp() {
            None => (program.entry, 0),
            Some(path) => load_interpreter(path, &mut mem, &mut mm)?,
        };

        // A trace must see every call, so it takes the exit path (and gets no vDSO).
        let syscall_path = if config.trace_syscalls {
            SyscallPath::Exit
        } else {
            config.syscalls
        };
        let vdso = if syscall_path.in_guest() {
            crate::vdso::install(&mut mem).map_err(|f| MachineError::Internal(f.to_string()))?;
            abi::VDSO_ADDR
        } else {
            0
        };
        mm.vdso = vdso;

        let mut random = [0u8; 16];
        getrandom::fill(&mut random).map_err(|e| MachineError::Internal(e.to_string()))?;
        let execfn = config.argv.first().cloned().unwrap_or_default();
        let execfn = execfn.as_bytes();
        let rsp = loader::build_stack(
            &mut mem,
            stack_top,
            &program,
            &StackParams {
                argv: &config.argv,
                envp: &config.env,
                execfn,
                random,
                hwcap: hv.hwcap(),
                hwcap2: 0,
                platform: "x86_64",
                interp_base,
                vdso,
                minsigstksz: linux::signal::frame_bytes(hv.xsave_layout),
            },
        )?;
        // The argument strings lie together from argv[0] up.
        if !config.argv.is_empty() {
            let start = mem
                .read_u64(rsp + 8)
                .map_err(|e| MachineError::Internal(e.to_string()))?;
            let len: u64 = config.argv.iter().map(|a| a.len() as u64 + 1).sum();
            mm.args = (start, start.saturating_add(len));
        }

        let policy = Policy {
            // Roots are compared with resolved paths: resolve `..` and symlinks in them once.
            allow_read: config
                .allow_read
                .iter()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect(),
            allow_write: config
                .allow_write
                .iter()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
                .collect(),
            trace_syscalls: config.trace_syscalls,
        };
        let mut proc = Process::new(policy, mm, config.cwd.clone(), exe_path.to_string());
        // The first process of a run: child processes it makes share this tree.
        proc.family = Some(linux::child::Tree::root(config.clone()));

        let mut vcpu = match vcpu {
            Some(mut v) => {
                v.sync_slots(&mem)?;
                v
            }
            None => Vcpu::new(hv, &mem)?,
        };
        vcpu.reset(hv, &mut mem, cr3, Frame::user(entry, rsp, 0), 0)?;
        vcpu.set_syscall_path(hv, syscall_path)?;
        fast_page_init(&mut mem, proc.tid, hv.has_rdrand())?;
        let at_random = find_auxv(&mem, rsp, loader::stack::auxv::AT_RANDOM);
        let never = ReadyPoint {
            rsp: 0,
            fs_base: 0,
            handler: 0,
            server: false,
        };
        let mut m = Self::from_parts(
            vcpu,
            mem,
            proc,
            Arc::new(symbols),
            config.timeout,
            never,
            at_random,
            syscall_path,
        );
        // A fresh program: no ready point yet, and the FS base the vCPU was
        // just reset with (0).
        m.ready = None;
        m.vcpu_fs_base = 0;
        Ok(m)
    }

    /// A machine over an existing VM and memory, in `proc`'s state at `ready`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        vcpu: Vcpu,
        mem: GuestMemory,
        proc: Process,
        symbols: Arc<Symbols>,
        timeout: Duration,
        ready: ReadyPoint,
        at_random: Option<u64>,
        syscall_path: SyscallPath,
    ) -> Self {
        let mut mem = mem;
        let exitless = match Hypervisor::get() {
            Ok(hv) if syscall_path.exitless(hv.platform) => exitless::Exitless::new(&mut mem),
            _ => None,
        };
        Self {
            exitless,
            syscall_path,
            vcpu,
            mem,
            proc,
            symbols,
            timeout,
            ready: Some(ready),
            serve_config: None,
            serve_ids: None,
            handoff: None,
            startup: None,
            poisoned: false,
            vcpu_fs_base: u64::MAX,
            breakpoint: None,
            stalled: false,
            mode: Mode::Program,
            output_watched: false,
            in_kernel: true,
            trap_rsp: 0,
            trap_nr: 0,
            at_random,
            ready_handler: ready.handler,
            stage_sp: None,
            response: None,
            respond_ends_call: false,
            debugger: None,
            net_ready: false,
            exits_by_call: Default::default(),
            vfork_parent: None,
            vfork_waits: Vec::new(),
            retired: None,
        }
    }
}

/// Records an ELF image's segments, with their rights, as mapped by the program.
fn map_image(mem: &mut GuestMemory, image: &loader::ElfImage) {
    for r in image.regions() {
        let rights = Rights {
            read: true,
            write: r.perm.write,
        };
        mem.map_user(r.start, r.end, rights);
    }
}

/// Loads a position-independent ELF without an interpreter into the mmap
/// area, highest first, as the kernel loads an interpreter.
/// `span` is its [`loader::ElfImage::span`], from the parse that found it is one.
fn load_high(
    bytes: &[u8],
    span: u64,
    fd: Option<std::os::fd::BorrowedFd<'_>>,
    mem: &mut GuestMemory,
    mm: &mut AddressSpace,
) -> Result<(loader::ElfImage, loader::LoadedProgram, u64), LoadError> {
    let base = mm.alloc(span).ok_or(LoadError::NoRoom { need: span })?;
    let image = loader::parse_at(bytes, base)?;
    // Writable while the host copies the segments in, then as the ELF says.
    for r in image.regions() {
        mem.map_user(
            r.start,
            r.end,
            Rights {
                read: true,
                write: true,
            },
        );
    }
    let loaded = image.load_from(bytes, fd, mem)?;
    map_image(mem, &image);
    Ok((image, loaded, base))
}

/// Loads the program interpreter at `path` into the mmap area; returns its entry and base.
fn load_interpreter(
    path: &str,
    mem: &mut GuestMemory,
    mm: &mut AddressSpace,
) -> Result<(u64, u64), MachineError> {
    let fail = |reason: String| {
        MachineError::Load(LoadError::Interpreter {
            path: path.to_string(),
            reason,
        })
    };
    let file = loader::ProgramFile::open(path).map_err(|e| fail(e.to_string()))?;
    let bytes = file.bytes();
    let probe = loader::parse(bytes).map_err(|e| fail(e.to_string()))?;
    if probe.interp().is_some() || !probe.is_pie() {
        return Err(fail("not a self-contained position-independent ELF".into()));
    }
    let (image, loaded, base) = load_high(bytes, probe.span(), Some(file.fd()), mem, mm)
        .map_err(|e| fail(e.to_string()))?;
    // Named as the kernel names it: where the file is, links resolved.
    let shown =
        std::fs::canonicalize(path).map_or_else(|_| path.to_string(), |p| p.display().to_string());
    label_image(mm, &image, &shown, std::path::Path::new(path));
    Ok((loaded.entry, base))
}

/// Labels an ELF image's segments for `/proc/self/maps` (see
/// `memory::labels`): the file the guest knows as `guest_path` (at `host` on
/// the host), executable where the segment is.
fn label_image(
    mm: &mut AddressSpace,
    image: &loader::ElfImage,
    guest_path: &str,
    host: &std::path::Path,
) {
    let (dev, ino) = rustix::fs::stat(host).map_or((0, 0), |st| (st.st_dev, st.st_ino));
    let file = mm.labels.file(guest_path.as_bytes(), dev, ino);
    for (start, end, exec, offset) in image.mapped_segments() {
        let end = end.next_multiple_of(abi::PAGE_SIZE);
        mm.labels.set(
            start,
            end,
            crate::memory::Label {
                exec,
                shared: false,
                file: Some(file.clone()),
                offset,
            },
        );
    }
}

/// Address space given to Go programs (their runtime reserves 512 MiB of it).
const GO_ADDRESS_SPACE: u64 = 1 << 30;
/// Largest gap left unmapped below the stack (Linux's stack_guard_gap is 1 MiB too).
const STACK_GUARD_MAX: u64 = 1 << 20;

/// Address space given to dynamically linked programs: language runtimes
/// (V8 reserves its code range, JVMs their heaps) need room to reserve.
/// V8 reserves ~10 GiB for each WebAssembly memory and node's fetch makes
/// one (undici's HTTP parser): with 8 GiB fetch failed ("Cannot allocate
/// Wasm memory"); 32 GiB holds three, with no measurable cost at start or fork.
const DYNAMIC_ADDRESS_SPACE: u64 = 32 << 30;

/// The value of auxv entry `key` on an initial stack at `rsp`.
fn find_auxv(mem: &GuestMemory, rsp: u64, key: u64) -> Option<u64> {
    let argc = mem.read_u64(rsp).ok()?;
    // Skip argc, argv[] and its NULL, then envp[] up to its NULL.
    let mut p = rsp.checked_add(8 * (argc + 2))?;
    while mem.read_u64(p).ok()? != 0 {
        p += 8;
    }
    p += 8;
    loop {
        let k = mem.read_u64(p).ok()?;
        if k == 0 {
            return None;
        }
        if k == key {
            return mem.read_u64(p + 8).ok();
        }
        p += 16;
    }
}

/// Writes the constant answers of the in-guest dispatcher (identity); the
/// per-entry ones are kept current by [`Machine::sync_fast_page`].
fn fast_page_init(mem: &mut GuestMemory, tid: u64, rdrand: bool) -> Result<(), MachineError> {
    use crate::linux::process::{PID, PPID, UID};
    for (off, v) in [
        (abi::fast::PID, PID),
        (abi::fast::PPID, PPID),
        (abi::fast::UID, UID),
        (abi::fast::GID, UID),
        (abi::fast::TID, tid),
        (abi::fast::ALONE, 1),
        (abi::fast::RDRAND, u64::from(rdrand)),
    ] {
        mem.kernel_write_u64(abi::FAST_DATA_ADDR + off, v)
            .map_err(|f| MachineError::Internal(f.to_string()))?;
    }
    // The vDSO's first time base (see `linux::time::after_host_answer`).
    crate::clock::refresh_page(mem).map_err(|f| MachineError::Internal(f.to_string()))
}
