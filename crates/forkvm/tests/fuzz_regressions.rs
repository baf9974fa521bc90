//! Replays the fuzz targets' seed corpus (fuzz/corpus/TARGET/) and every
//! input the fuzzers found a bug with (fuzz/regressions/TARGET/) through the
//! same harness code the AFL++ targets run (fuzz/src/harness.rs), plus one
//! test per bug found, in its smallest form. No /dev/kvm needed.

#[path = "../../../fuzz/src/harness.rs"]
mod harness;

use std::path::PathBuf;

/// The files of fuzz/DIR/TARGET (none if it does not exist).
fn inputs(dir: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(dir)
        .join(target);
    let mut out: Vec<_> = std::fs::read_dir(&d)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out.into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect()
}

fn all_inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = inputs("corpus", target);
    v.extend(inputs("regressions", target));
    v
}

#[test]
fn loader_corpus_and_regressions_do_not_panic() {
    let v = all_inputs("loader");
    assert!(v.len() >= 4, "seed corpus missing: {v:?}");
    for (path, data) in v {
        eprintln!("{}", path.display());
        harness::loader(&data);
    }
}

#[test]
fn loader_seeds_really_load() {
    // The seeds are meant to get past parsing (else the fuzzer starts blind).
    for (path, data) in inputs("corpus", "loader") {
        let image =
            forkvm::loader::parse(&data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut mem = forkvm::memory::GuestMemory::new(64 << 20).unwrap();
        image
            .load(&data, &mut mem)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn syscall_corpus_and_regressions_stay_in_the_sandbox() {
    let sandbox = harness::Sandbox::new().unwrap();
    let v = all_inputs("syscalls");
    assert!(v.len() >= 8, "seed corpus missing: {v:?}");
    for (path, data) in v {
        eprintln!("{}", path.display());
        harness::syscalls(&data, &sandbox);
    }
}

/// The network and synthetic-file seeds get past the first checks (bytes
/// stored into the scratch area make real requests), so the fuzzer starts
/// from inside netlink, the interface ioctls, UDP and /proc/sys.
#[test]
fn the_network_seeds_reach_their_code() {
    let sandbox = harness::Sandbox::new().unwrap();
    let results = |name: &str| {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/syscalls");
        let data = std::fs::read(path.join(name)).unwrap();
        let r = harness::syscall_results(&data, &sandbox);
        eprintln!("{name}: {r:?}");
        r
    };
    let nl = results("netlink");
    assert_eq!(nl[0], (41, 0), "a netlink socket (0, 1 and 2 are closed)");
    assert_eq!(nl[1], (44, 56), "a dump request of each kind sent");
    assert!(nl[2].1 > 0, "the link dump answered");
    let dev = results("netdev");
    assert_eq!(
        &dev[1..4],
        &[(16, 0), (16, 0), (16, 0)],
        "lo's index, address, flags"
    );
    let udp = results("udp");
    assert_eq!(udp[3], (1, 40), "a write on the connected socket");
    assert_eq!(udp[5], (0, 40), "read back");
    let sys = results("sysctl");
    assert_eq!(sys[1], (0, 37), "a uuid and a newline");
    let pty = results("pty");
    assert_eq!(
        &pty[..4],
        &[(2, 0), (16, 0), (16, 0), (2, 1)],
        "master, unlocked, slave"
    );
    assert!(pty[7].1 > 0, "the slave reads an edited line: {pty:?}");
    assert_eq!(
        pty[14],
        (0, -5),
        "EIO on the master once the slave is closed"
    );
}

#[test]
fn the_confinement_check_catches_a_write_outside() {
    let sandbox = harness::Sandbox::new().unwrap();
    sandbox.check_confined();
    std::fs::write(sandbox.outside.join("sentinel"), b"changed").unwrap();
    let caught = std::panic::catch_unwind(|| sandbox.check_confined());
    assert!(
        caught.is_err(),
        "a changed file outside the root went unnoticed"
    );
}

#[test]
fn staging_corpus_and_regressions_do_not_panic() {
    let v = all_inputs("staging");
    assert!(v.len() >= 3, "seed corpus missing: {v:?}");
    for (path, data) in v {
        eprintln!("{}", path.display());
        harness::staging(&data);
    }
}

#[test]
fn gdb_corpus_and_regressions_do_not_panic() {
    // Real VMs: needs /dev/kvm, like the rest of the suite.
    let v = all_inputs("gdb");
    assert!(v.len() >= 4, "seed corpus missing: {v:?}");
    for (path, data) in v {
        eprintln!("{}", path.display());
        harness::gdb(&data);
    }
}

/// Found by the gdb harness, which hands `Machine::new` the program as an
/// `include_bytes!` slice: the loader refused a valid ELF file ("truncated
/// ELF file: the ELF header extend past the end of the file") whenever the
/// slice was not 8-byte aligned, because `object` read its structures as
/// aligned types. Fixed with object's "unaligned" feature.
#[test]
fn the_loader_accepts_a_valid_elf_at_any_alignment() {
    let elf = inputs("corpus", "loader")
        .into_iter()
        .find(|(p, _)| p.ends_with("nostdlib_symtab"))
        .expect("seed nostdlib_symtab")
        .1;
    // Eight consecutive offsets give every alignment modulo 8.
    let mut buf = vec![0u8; elf.len() + 8];
    let mut seen = std::collections::BTreeSet::new();
    for off in 0..8 {
        buf[off..off + elf.len()].copy_from_slice(&elf);
        let slice = &buf[off..off + elf.len()];
        seen.insert(slice.as_ptr() as usize % 8);
        let image = forkvm::loader::parse(slice).unwrap_or_else(|e| panic!("offset {off}: {e}"));
        assert_eq!(image.entry(), 0x401000, "offset {off}");
        assert!(
            image.symbols().address_of("counter").is_some(),
            "offset {off}"
        );
    }
    assert_eq!(seen.len(), 8);
}
