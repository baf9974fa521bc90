//! Fuzz target: `forkvm serve`'s request staging into guest memory.
fn main() {
    afl::fuzz!(|data: &[u8]| {
        forkvm_fuzz::harness::staging(data);
    });
}
