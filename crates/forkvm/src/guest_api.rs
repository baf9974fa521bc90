//! The guest API for C programs: `guest/include/forkvm.h`, generated from
//! [`crate::abi`] so the numbers can never drift (a test checks the
//! committed header is current; `forkvm guest-header` prints it).

use crate::abi::hypercall;

/// The C header, as committed at `guest/include/forkvm.h`.
pub fn c_header() -> String {
    format!(
        r#"/* forkvm guest API for C and C++.
 *
 * Generated from crates/forkvm-abi by `forkvm guest-header`; do not edit.
 *
 * A program initialises itself, then calls forkvm_ready(): forkvm freezes it
 * there as the master. The host then calls functions exported with
 * FORKVM_EXPORT in copy-on-write forks of it. Under plain `forkvm run` (or
 * natively) forkvm_ready() does nothing.
 */
#ifndef FORKVM_H
#define FORKVM_H

#define FORKVM_HYPERCALL_READY {ready:#x}L
#define FORKVM_HYPERCALL_CALL_RETURN {ret:#x}L

/* Keep a function and its symbol so the host can call it by name. */
#define FORKVM_EXPORT __attribute__((used, noinline, visibility("default")))

/* Tells forkvm the program is initialised. Returns 0 (also natively). */
static inline long forkvm_ready(void)
{{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(FORKVM_HYPERCALL_READY)
                     : "rcx", "r11", "memory");
    /* Natively the kernel answers -ENOSYS: report success either way. */
    return ret < 0 ? 0 : ret;
}}

#endif /* FORKVM_H */
"#,
        ready = hypercall::READY,
        ret = hypercall::CALL_RETURN
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn committed_header_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guest/include/forkvm.h");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            committed,
            super::c_header(),
            "guest/include/forkvm.h is stale: run `forkvm guest-header > guest/include/forkvm.h`"
        );
    }
}
