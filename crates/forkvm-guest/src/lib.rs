//! The forkvm guest API for Rust programs.
//!
//! A program initialises itself, then calls [`ready`]: forkvm freezes it
//! there as the master. The host then calls functions the program exports
//! (`#[no_mangle] pub extern "C" fn`) in copy-on-write forks of it. Build
//! the program static (`RUSTFLAGS="-C target-feature=+crt-static"`).
//!
//! ```no_run
//! #[no_mangle]
//! pub extern "C" fn add(a: u64, b: u64) -> u64 {
//!     a + b
//! }
//!
//! fn main() {
//!     // ... load data, warm caches ...
//!     forkvm_guest::ready();
//! }
//! ```
//!
//! Natively, and under plain `forkvm run`, [`ready`] does nothing.

#![no_std]

pub use forkvm_abi as abi;

/// Tells forkvm the program is initialised; returns when a fork is made
/// from this point (never, for the master itself) or at once natively.
#[inline]
pub fn ready() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a `syscall` with forkvm's READY number: under forkvm it is
    // answered by the host; natively the kernel returns -ENOSYS. Either way
    // only rax, rcx and r11 change, as declared.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") abi::hypercall::READY => _,
            out("rcx") _,
            out("r11") _,
            options(nostack),
        );
    }
}
