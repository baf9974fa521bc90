//! The initial process stack, laid out as Linux's `create_elf_tables` does.
//!
//! ```text
//! stack_top ->  8 zero bytes (end marker)
//!               execfn string
//!               envp strings (envp[0] lowest)
//!               argv strings (argv[0] lowest)
//!               platform string
//!               (align 16) 16 random bytes (AT_RANDOM)
//!               (padding so that rsp is 16-byte aligned)
//!               auxv pairs ... AT_NULL, 0
//!               NULL, envp pointers
//!               NULL, argv pointers
//! rsp ->        argc
//! ```

use super::{LoadError, LoadedProgram};
use crate::abi;
use crate::memory::GuestMemory;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;

/// Auxiliary vector keys (`<elf.h>` AT_*).
pub mod auxv {
    pub const AT_NULL: u64 = 0;
    pub const AT_PHDR: u64 = 3;
    pub const AT_PHENT: u64 = 4;
    pub const AT_PHNUM: u64 = 5;
    pub const AT_PAGESZ: u64 = 6;
    pub const AT_BASE: u64 = 7;
    pub const AT_FLAGS: u64 = 8;
    pub const AT_ENTRY: u64 = 9;
    pub const AT_UID: u64 = 11;
    pub const AT_EUID: u64 = 12;
    pub const AT_GID: u64 = 13;
    pub const AT_EGID: u64 = 14;
    pub const AT_PLATFORM: u64 = 15;
    pub const AT_HWCAP: u64 = 16;
    pub const AT_CLKTCK: u64 = 17;
    pub const AT_SECURE: u64 = 23;
    pub const AT_RANDOM: u64 = 25;
    pub const AT_HWCAP2: u64 = 26;
    pub const AT_EXECFN: u64 = 31;
    pub const AT_MINSIGSTKSZ: u64 = 51;
    /// Where the vDSO's ELF header is.
    pub const AT_SYSINFO_EHDR: u64 = 33;
}

/// The user and group id the guest sees (AT_UID/AT_EUID/AT_GID/AT_EGID).
pub const GUEST_ID: u64 = 1000;
/// AT_CLKTCK: clock ticks per second (USER_HZ).
pub const CLOCK_TICKS: u64 = 100;
/// AT_MINSIGSTKSZ.
pub const MIN_SIGSTKSZ: u64 = 2048;
/// Longest single argument or environment string, NUL included (Linux MAX_ARG_STRLEN).
pub const MAX_ARG_STRLEN: u64 = 32 * abi::PAGE_SIZE;
/// Limit on argv + envp strings and pointers (Linux: a quarter of the 8 MiB stack rlimit).
pub const MAX_ARG_TOTAL: u64 = 2 << 20;

/// What goes on the initial stack besides the program's own numbers.
#[derive(Debug, Clone)]
pub struct StackParams<'a> {
    /// argv, argv[0] first.
    pub argv: &'a [OsString],
    /// Environment strings, "NAME=value".
    pub envp: &'a [OsString],
    /// AT_EXECFN: the path the program was executed as.
    pub execfn: &'a [u8],
    /// AT_RANDOM bytes (the libc stack protector and pointer guard seed).
    pub random: [u8; 16],
    /// AT_HWCAP (CPUID.1:EDX on x86).
    pub hwcap: u64,
    /// AT_HWCAP2.
    pub hwcap2: u64,
    /// AT_PLATFORM, "x86_64".
    pub platform: &'a str,
    /// Load address of the program interpreter (AT_BASE), 0 for static programs.
    pub interp_base: u64,
    /// Where the vDSO is (AT_SYSINFO_EHDR); 0: no vDSO, the entry is left out.
    pub vdso: u64,
    /// Bytes a signal frame needs (with the XSAVE image); AT_MINSIGSTKSZ is
    /// this or [`MIN_SIGSTKSZ`], whichever is larger.
    pub minsigstksz: u64,
}

fn check_string(s: &[u8], what: impl FnOnce() -> String) -> Result<u64, LoadError> {
    if s.contains(&0) {
        return Err(LoadError::NulInString { what: what() });
    }
    let len = s.len() as u64 + 1;
    if len > MAX_ARG_STRLEN {
        return Err(LoadError::ArgsTooLarge {
            size: len,
            limit: MAX_ARG_STRLEN,
        });
    }
    Ok(len)
}

/// Writes the initial stack below `stack_top` and returns the initial RSP
/// (16-byte aligned, pointing at argc).
pub fn build_stack(
    mem: &mut GuestMemory,
    stack_top: u64,
    prog: &LoadedProgram,
    p: &StackParams,
) -> Result<u64, LoadError> {
    // Validate and size everything first.
    let mut args_total = 0u64;
    for (i, a) in p.argv.iter().enumerate() {
        args_total =
            args_total.saturating_add(check_string(a.as_bytes(), || format!("argv[{i}]"))? + 8);
    }
    for (i, e) in p.envp.iter().enumerate() {
        args_total = args_total
            .saturating_add(check_string(e.as_bytes(), || format!("environment string {i}"))? + 8);
    }
    if args_total > MAX_ARG_TOTAL {
        return Err(LoadError::ArgsTooLarge {
            size: args_total,
            limit: MAX_ARG_TOTAL,
        });
    }
    let execfn_len = check_string(p.execfn, || "the program path".into())?;
    let platform_len = check_string(p.platform.as_bytes(), || "the platform string".into())?;

    let mut aux: Vec<(u64, u64)> = vec![
        (auxv::AT_MINSIGSTKSZ, p.minsigstksz.max(MIN_SIGSTKSZ)),
        (auxv::AT_HWCAP, p.hwcap),
        (auxv::AT_PAGESZ, abi::PAGE_SIZE),
        (auxv::AT_CLKTCK, CLOCK_TICKS),
        (auxv::AT_PHDR, prog.phdr_addr),
        (auxv::AT_PHENT, prog.phent),
        (auxv::AT_PHNUM, prog.phnum),
        (auxv::AT_BASE, p.interp_base),
        (auxv::AT_FLAGS, 0),
        (auxv::AT_ENTRY, prog.entry),
        (auxv::AT_UID, GUEST_ID),
        (auxv::AT_EUID, GUEST_ID),
        (auxv::AT_GID, GUEST_ID),
        (auxv::AT_EGID, GUEST_ID),
        (auxv::AT_SECURE, 0),
        (auxv::AT_RANDOM, 0), // filled below
        (auxv::AT_HWCAP2, p.hwcap2),
        (auxv::AT_EXECFN, 0),   // filled below
        (auxv::AT_PLATFORM, 0), // filled below
    ];
    if p.vdso != 0 {
        aux.push((auxv::AT_SYSINFO_EHDR, p.vdso));
    }
    let argc = p.argv.len() as u64;
    let envc = p.envp.len() as u64;
    let table_words = 1 + (argc + 1) + (envc + 1) + 2 * (aux.len() as u64 + 1);
    // Upper bound of everything, alignment slack included.
    let need = 8 + execfn_len + args_total + platform_len + 16 + 16 + table_words * 8 + 16;

    let top = stack_top & !15;
    if top < abi::USER_BASE || top - abi::USER_BASE < need || stack_top > mem.size() {
        return Err(LoadError::StackTooSmall {
            need,
            top: stack_top,
        });
    }
    // From here on `top - need >= USER_BASE`, so no subtraction below underflows.
    let mut sp = top - 8;
    mem.write_u64(sp, 0)?;

    let mut push_str = |mem: &mut GuestMemory, s: &[u8]| -> Result<u64, LoadError> {
        sp -= s.len() as u64 + 1;
        mem.write(sp, s)?;
        mem.write(sp + s.len() as u64, &[0])?;
        Ok(sp)
    };
    let execfn_addr = push_str(mem, p.execfn)?;
    let mut env_addrs = vec![0u64; p.envp.len()];
    for (slot, s) in env_addrs.iter_mut().zip(p.envp).rev() {
        *slot = push_str(mem, s.as_bytes())?;
    }
    let mut arg_addrs = vec![0u64; p.argv.len()];
    for (slot, s) in arg_addrs.iter_mut().zip(p.argv).rev() {
        *slot = push_str(mem, s.as_bytes())?;
    }
    let platform_addr = push_str(mem, p.platform.as_bytes())?;

    sp = (sp & !15) - 16;
    let random_addr = sp;
    mem.write(random_addr, &p.random)?;

    sp = (sp - table_words * 8) & !15;
    let rsp = sp;

    let mut table = Vec::with_capacity(table_words as usize);
    table.push(argc);
    table.extend_from_slice(&arg_addrs);
    table.push(0);
    table.extend_from_slice(&env_addrs);
    table.push(0);
    for (key, value) in aux.iter().copied() {
        let value = match key {
            auxv::AT_RANDOM => random_addr,
            auxv::AT_EXECFN => execfn_addr,
            auxv::AT_PLATFORM => platform_addr,
            _ => value,
        };
        table.push(key);
        table.push(value);
    }
    table.push(auxv::AT_NULL);
    table.push(0);
    let bytes: Vec<u8> = table.iter().flat_map(|w| w.to_le_bytes()).collect();
    mem.write(rsp, &bytes)?;
    Ok(rsp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::os::unix::ffi::OsStringExt;

    fn prog() -> LoadedProgram {
        LoadedProgram {
            entry: 0x40_1000,
            load_bias: 0,
            phdr_addr: 0x40_0040,
            phent: 56,
            phnum: 9,
            image_end: 0x50_0000,
            exec_stack: false,
            tls: None,
        }
    }

    fn params<'a>(argv: &'a [OsString], envp: &'a [OsString]) -> StackParams<'a> {
        StackParams {
            argv,
            envp,
            execfn: b"/bin/true",
            random: *b"0123456789abcdef",
            hwcap: 0x178b_fbff,
            hwcap2: 2,
            platform: "x86_64",
            interp_base: 0,
            vdso: 0,
            minsigstksz: 0,
        }
    }

    struct Parsed {
        argv: Vec<OsString>,
        envp: Vec<OsString>,
        aux: Vec<(u64, u64)>,
    }

    fn parse_back(m: &GuestMemory, rsp: u64) -> Parsed {
        let s = |a| OsString::from_vec(m.read_cstr(a, 1 << 20).unwrap().to_vec());
        let argc = m.read_u64(rsp).unwrap();
        let mut p = rsp + 8;
        let mut argv = Vec::new();
        for _ in 0..argc {
            argv.push(s(m.read_u64(p).unwrap()));
            p += 8;
        }
        assert_eq!(m.read_u64(p).unwrap(), 0, "argv NULL");
        p += 8;
        let mut envp = Vec::new();
        loop {
            let a = m.read_u64(p).unwrap();
            p += 8;
            if a == 0 {
                break;
            }
            envp.push(s(a));
        }
        let mut aux = Vec::new();
        loop {
            let k = m.read_u64(p).unwrap();
            let v = m.read_u64(p + 8).unwrap();
            p += 16;
            if k == auxv::AT_NULL {
                break;
            }
            aux.push((k, v));
        }
        Parsed { argv, envp, aux }
    }

    #[test]
    fn layout_parses_back() {
        let mut m = GuestMemory::new(4 << 20).unwrap();
        let top = m.size();
        // Any bytes but NUL pass through unchanged, UTF-8 or not.
        let argv: Vec<OsString> = vec![
            "prog".into(),
            "-x".into(),
            "".into(),
            "ünï".into(),
            OsString::from_vec(b"caf\xe9".to_vec()),
        ];
        let envp: Vec<OsString> = vec!["HOME=/root".into(), OsString::from_vec(b"A=\xff".to_vec())];
        let rsp = build_stack(&mut m, top, &prog(), &params(&argv, &envp)).unwrap();
        assert_eq!(rsp % 16, 0);
        assert!(rsp < top && top - rsp < 4096);
        let p = parse_back(&m, rsp);
        assert_eq!(p.argv, argv);
        assert_eq!(p.envp, envp);
        let aux: HashMap<u64, u64> = p.aux.iter().copied().collect();
        assert_eq!(aux.len(), p.aux.len(), "no duplicate keys");
        assert_eq!(aux[&auxv::AT_PHDR], 0x40_0040);
        assert_eq!(aux[&auxv::AT_PHENT], 56);
        assert_eq!(aux[&auxv::AT_PHNUM], 9);
        assert_eq!(aux[&auxv::AT_PAGESZ], 4096);
        assert_eq!(aux[&auxv::AT_BASE], 0);
        assert_eq!(aux[&auxv::AT_FLAGS], 0);
        assert_eq!(aux[&auxv::AT_ENTRY], 0x40_1000);
        for k in [auxv::AT_UID, auxv::AT_EUID, auxv::AT_GID, auxv::AT_EGID] {
            assert_eq!(aux[&k], 1000);
        }
        assert_eq!(aux[&auxv::AT_HWCAP], 0x178b_fbff);
        assert_eq!(aux[&auxv::AT_HWCAP2], 2);
        assert_eq!(aux[&auxv::AT_CLKTCK], 100);
        assert_eq!(aux[&auxv::AT_SECURE], 0);
        assert_eq!(aux[&auxv::AT_MINSIGSTKSZ], 2048);
        assert!(!aux.contains_key(&33), "no AT_SYSINFO_EHDR");
        assert_eq!(
            m.read(aux[&auxv::AT_RANDOM], 16).unwrap(),
            b"0123456789abcdef"
        );
        assert_eq!(aux[&auxv::AT_RANDOM] % 16, 0);
        assert_eq!(
            m.read_cstr(aux[&auxv::AT_EXECFN], 64).unwrap(),
            b"/bin/true"
        );
        assert_eq!(m.read_cstr(aux[&auxv::AT_PLATFORM], 64).unwrap(), b"x86_64");
        // Strings sit above the table, argv[0] lowest, execfn highest.
        let a0 = m.read_u64(rsp + 8).unwrap();
        assert!(a0 > rsp + 8 * (1 + 6 + 3 + 40));
        assert!(aux[&auxv::AT_EXECFN] > a0);
        assert_eq!(m.read_u64(top - 8).unwrap(), 0, "end marker");
    }

    #[test]
    fn alignment_for_every_shape() {
        let mut m = GuestMemory::new(4 << 20).unwrap();
        for n in 0..6usize {
            for extra in 0..17usize {
                let argv: Vec<OsString> = (0..n).map(|i| "a".repeat(i + extra).into()).collect();
                let envp: Vec<OsString> = (0..(n + extra) % 4)
                    .map(|i| format!("V{i}=1").into())
                    .collect();
                let top = m.size() - extra as u64; // unaligned tops too
                let rsp = build_stack(&mut m, top, &prog(), &params(&argv, &envp)).unwrap();
                assert_eq!(rsp % 16, 0);
                let p = parse_back(&m, rsp);
                assert_eq!(p.argv, argv);
                assert_eq!(p.envp, envp);
            }
        }
    }

    #[test]
    fn too_large_is_refused() {
        let mut m = GuestMemory::new(4 << 20).unwrap();
        let top = m.size();
        let big = vec![OsString::from("x".repeat(100_000)); 30];
        let e = build_stack(&mut m, top, &prog(), &params(&big, &[])).unwrap_err();
        assert!(matches!(e, LoadError::ArgsTooLarge { .. }), "{e}");
        let huge = vec![OsString::from("x".repeat(200_000))];
        let e = build_stack(&mut m, top, &prog(), &params(&[], &huge)).unwrap_err();
        assert!(matches!(e, LoadError::ArgsTooLarge { .. }), "{e}");
        let nul = vec![OsString::from("a\0b")];
        let e = build_stack(&mut m, top, &prog(), &params(&nul, &[])).unwrap_err();
        assert!(e.to_string().contains("argv[0]"), "{e}");
        // A stack top too close to the start of user memory.
        let e = build_stack(&mut m, abi::USER_BASE + 64, &prog(), &params(&[], &[])).unwrap_err();
        assert!(matches!(e, LoadError::StackTooSmall { .. }), "{e}");
        let e = build_stack(&mut m, u64::MAX, &prog(), &params(&[], &[])).unwrap_err();
        assert!(matches!(e, LoadError::StackTooSmall { .. }), "{e}");
    }
}
