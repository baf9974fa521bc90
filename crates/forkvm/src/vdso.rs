//! forkvm's vDSO: a tiny shared object built from `vdso/vdso.c` by build.rs,
//! placed at [`abi::VDSO_ADDR`] and announced to the program with
//! `AT_SYSINFO_EHDR`. glibc, musl and Go then call its `__vdso_clock_gettime`,
//! `__vdso_gettimeofday`, `__vdso_time`, `__vdso_clock_getres` and
//! `__vdso_getcpu` instead of making those system calls; the time comes from
//! the host's time base in the fast-path data page (see [`crate::clock`]).

use crate::abi;
use crate::memory::{Fault, GuestMemory};

/// The vDSO image (an ELF shared object whose one PT_LOAD is the file itself).
pub const IMAGE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/vdso.so"));

/// Copies the vDSO into guest memory at [`abi::VDSO_ADDR`].
pub fn install(mem: &mut GuestMemory) -> Result<(), Fault> {
    mem.kernel_write(abi::VDSO_ADDR, IMAGE)
}

/// The offset of an exported function in the image.
pub fn symbol(name: &str) -> Option<u64> {
    use object::{Object, ObjectSymbol};
    let copy = IMAGE.to_vec(); // `object` wants the header aligned
    let elf = object::File::parse(&copy[..]).ok()?;
    let addr = elf
        .dynamic_symbols()
        .find(|s| s.name() == Ok(name))
        .map(|s| s.address());
    addr
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSymbol};

    #[test]
    fn image_exports_the_linux_vdso_functions_and_fits() {
        assert!(IMAGE.len() as u64 <= abi::VDSO_SIZE);
        // A heap copy: `object` wants the header aligned, include_bytes! is not.
        let copy = IMAGE.to_vec();
        let elf = object::File::parse(&copy[..]).expect("an ELF file");
        assert_eq!(elf.kind(), object::ObjectKind::Dynamic);
        let names: Vec<String> = elf
            .dynamic_symbols()
            .filter_map(|s| s.name().ok().map(str::to_string))
            .collect();
        for f in [
            "__vdso_clock_gettime",
            "__vdso_gettimeofday",
            "__vdso_time",
            "__vdso_clock_getres",
            "__vdso_getcpu",
        ] {
            assert!(names.iter().any(|n| n == f), "{f} in {names:?}");
        }
        // No relocations: the image works wherever it is copied.
        assert!(elf
            .dynamic_relocations()
            .is_none_or(|mut r| r.next().is_none()));
    }
}
