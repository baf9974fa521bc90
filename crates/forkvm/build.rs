//! Assembles the guest kernel at build time (see src/guest_kernel/assemble.rs).

#[path = "src/guest_kernel/assemble.rs"]
mod assemble;

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let code = assemble::code().expect("assembling the guest kernel code");
    let stubs = assemble::stubs().expect("assembling the guest kernel stubs");
    std::fs::write(out.join("kernel_code.bin"), code).expect("writing kernel_code.bin");
    std::fs::write(out.join("kernel_stubs.bin"), stubs).expect("writing kernel_stubs.bin");
    println!("cargo::rerun-if-changed=src/guest_kernel/assemble.rs");
    println!("cargo::rerun-if-changed=../forkvm-abi/src/lib.rs");
}
