//! Host faults on file-backed guest memory. Where a host file is mapped into
//! guest RAM (a library mapped directly, a `MAP_SHARED` file), a page the
//! file no longer covers (the program, or anyone on the host, truncated it)
//! raises SIGBUS on access. Guest accesses then fail KVM_RUN (EFAULT); host
//! accesses (a path or buffer the program passes to a system call) would
//! kill forkvm itself. This module's SIGBUS handler turns such a page of a
//! registered guest memory into a zero page instead, so the access reads
//! zeroes (the program asked for bytes past the end of a file), and passes
//! every other SIGBUS on to the handler that was there before.
//!
//! Memories register when they first map a file (at most [`SLOTS`] at once;
//! beyond, the caller copies the file instead) and leave when dropped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Most guest memories with file-backed ranges at once.
pub const SLOTS: usize = 256;

struct Region {
    base: AtomicUsize,
    len: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Region = Region {
    base: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
};
static REGIONS: [Region; SLOTS] = [EMPTY; SLOTS];

/// The SIGBUS action before ours (put back for faults that are not ours).
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for r in &REGIONS {
        let base = r.base.load(Ordering::Acquire);
        let len = r.len.load(Ordering::Acquire);
        if base == 0 || addr < base || addr - base >= len {
            continue;
        }
        let page = addr & !(crate::abi::PAGE_SIZE as usize - 1);
        // SAFETY: `page` lies inside a registered guest memory mapping, owned
        // by forkvm; replacing one page of it with a private zero page is
        // what its file-backed ranges allow (their bookkeeping is put right
        // when they are unmapped). mmap is async-signal-safe.
        let p = unsafe {
            libc::mmap(
                page as *mut libc::c_void,
                crate::abi::PAGE_SIZE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            return; // the access is made again and reads zeroes
        }
    }
    // Not a page of ours: the previous action takes the fault when the
    // access is made again.
    if let Some(prev) = PREVIOUS.get() {
        // SAFETY: restores an action the kernel gave us; sigaction is
        // async-signal-safe.
        unsafe { libc::sigaction(libc::SIGBUS, prev, std::ptr::null_mut()) };
    }
}

fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask"
        // value; we fill in the handler and flags before installing it.
        let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
        act.sa_sigaction = on_sigbus as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: as above.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: installs a handler that only touches atomics and calls
        // async-signal-safe functions; `old` receives the previous action.
        let rc = unsafe { libc::sigaction(libc::SIGBUS, &act, &mut old) };
        if rc != 0 {
            return false;
        }
        let _ = PREVIOUS.set(old);
        true
    })
}

/// Registers the guest memory at `base..base+len`; its slot, or `None` when
/// every slot is taken (or the handler could not be installed).
pub fn register(base: usize, len: usize) -> Option<usize> {
    if !install() {
        return None;
    }
    for (i, r) in REGIONS.iter().enumerate() {
        if r.base
            .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            r.len.store(len, Ordering::Release);
            r.base.store(base, Ordering::Release);
            return Some(i);
        }
    }
    None
}

/// Gives a slot back (the memory is being unmapped).
pub fn unregister(slot: usize) {
    if let Some(r) = REGIONS.get(slot) {
        r.len.store(0, Ordering::Release);
        r.base.store(0, Ordering::Release);
    }
}
