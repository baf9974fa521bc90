//! Fuzz target: ELF bytes through forkvm's loader into guest memory.
fn main() {
    afl::fuzz!(|data: &[u8]| {
        forkvm_fuzz::harness::loader(data);
    });
}
