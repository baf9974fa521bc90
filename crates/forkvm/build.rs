//! Assembles the guest kernel at build time (see src/guest_kernel/assemble.rs).

#[path = "src/guest_kernel/assemble.rs"]
mod assemble;

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let code = assemble::code().expect("assembling the guest kernel code");
    let stubs = assemble::stubs().expect("assembling the guest kernel stubs");
    std::fs::write(out.join("kernel_code.bin"), code).expect("writing kernel_code.bin");
    std::fs::write(out.join("kernel_stubs.bin"), stubs).expect("writing kernel_stubs.bin");
    build_vdso(&out);
    println!("cargo::rerun-if-changed=src/guest_kernel/assemble.rs");
    println!("cargo::rerun-if-changed=../forkvm-abi/src/lib.rs");
}

/// Compiles vdso/vdso.c into the tiny shared object the guest gets as its vDSO.
fn build_vdso(out: &std::path::Path) {
    use forkvm_abi as abi;
    for f in ["vdso/vdso.c", "vdso/vdso.lds", "vdso/vdso.map"] {
        println!("cargo::rerun-if-changed={f}");
    }
    println!("cargo::rerun-if-env-changed=CC");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let so = out.join("vdso.so");
    let status = std::process::Command::new(&cc)
        .args([
            "-O2",
            "-fPIC",
            "-shared",
            "-nostdlib",
            "-fno-stack-protector",
            "-fno-asynchronous-unwind-tables",
            "-fno-builtin",
            "-fcf-protection=none",
        ])
        .arg(format!(
            "-DFORKVM_TIME={:#x}",
            abi::FAST_DATA_ADDR + abi::fast::TIME
        ))
        .args([
            "-Wl,-T,vdso/vdso.lds",
            "-Wl,--version-script=vdso/vdso.map",
            "-Wl,-soname=linux-vdso.so.1",
            "-Wl,--hash-style=both",
            "-Wl,-z,max-page-size=4096",
            "-Wl,--build-id=none",
            "-o",
        ])
        .arg(&so)
        .arg("vdso/vdso.c")
        .status()
        .unwrap_or_else(|e| panic!("building the vDSO needs a C compiler ({cc}): {e}"));
    assert!(status.success(), "building the vDSO with {cc} failed");
    let len = std::fs::metadata(&so).map(|m| m.len()).unwrap_or(u64::MAX);
    assert!(
        len <= abi::VDSO_SIZE,
        "the vDSO ({len} bytes) does not fit its {} bytes",
        abi::VDSO_SIZE
    );
}
