//! Fuzz target: gdb remote-protocol packets into forkvm's stub (needs /dev/kvm).
fn main() {
    afl::fuzz!(|data: &[u8]| {
        forkvm_fuzz::harness::gdb(data);
    });
}
