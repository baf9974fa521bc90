//! Fuzz target: syscall sequences through `forkvm::linux::dispatch`.
fn main() {
    // Made before AFL's fork server starts: every child reuses it (each
    // input empties the guest's root first); scripts/fuzz.sh removes it.
    let sandbox = match forkvm_fuzz::harness::Sandbox::new() {
        Ok(s) => Box::leak(Box::new(s)),
        Err(e) => panic!("cannot create the fuzzing sandbox: {e}"),
    };
    afl::fuzz!(|data: &[u8]| {
        forkvm_fuzz::harness::syscalls(data, sandbox);
    });
    // A replay outside AFL (one process, one input) cleans up after itself;
    // under AFL the next child still needs the sandbox.
    if std::env::var_os("__AFL_SHM_ID").is_none() {
        let _ = std::fs::remove_dir_all(&sandbox.base);
    }
}
