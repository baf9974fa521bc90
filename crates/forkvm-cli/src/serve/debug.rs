//! `forkvm serve --gdb ADDR`: a request whose handler stops on its own (an
//! `int3` such as `forkvm_breakpoint()`, or a crash) waits for gdb on ADDR
//! in its worker; the other workers keep serving. The mechanism is in
//! `forkvm::debug`; this only wires it into the pool.

use forkvm::debug::GdbWaiter;
use forkvm::fork::Fork;
use std::sync::Arc;

/// Listens on `addr` for gdb (when given) and says where on stderr.
pub fn listen(addr: Option<&str>) -> anyhow::Result<Option<Arc<GdbWaiter>>> {
    use anyhow::Context;
    let Some(addr) = addr else {
        return Ok(None);
    };
    let waiter =
        GdbWaiter::bind(addr).with_context(|| format!("--gdb: cannot listen on {addr}"))?;
    eprintln!(
        "forkvm: a request that stops (int3, forkvm_breakpoint(), a crash) waits for gdb on {}",
        waiter.addr()
    );
    tracing::info!("--gdb: host seccomp is off while a debugger may attach");
    Ok(Some(waiter))
}

/// Makes `fork` wait for gdb when a request stops in it.
pub fn arm(fork: &mut Fork, waiter: Option<&Arc<GdbWaiter>>) {
    if let Some(w) = waiter {
        fork.set_gdb_waiter(w.clone());
    }
}

/// Whether the worker must be reset after its request because gdb was
/// attached (gdb may have changed anything in it).
pub fn needs_reset(fork: &mut Fork) -> bool {
    fork.take_debugged()
}
