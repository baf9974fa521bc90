//! The guest's `/proc/sys`: the few kernel settings programs read to size
//! themselves (Go's listen backlog from `net/core/somaxconn`, jemalloc's
//! `vm/overcommit_memory`, pipe sizes, descriptor limits), with the values
//! that hold inside forkvm, and the names `uname` and `/proc/version`
//! agree with. Never the host's: its settings (and its host name) are not
//! the guest's business, and most of them would be wrong about the VM.
//! A root naming `/proc` or a path below it (`--allow-read /proc/sys`)
//! shows the host's instead, as for the rest of /proc.
//!
//! Read-only, as for an unprivileged process on Linux: writing is EACCES
//! (the file-system view's rule for generated files).

use super::process::HOSTNAME;

/// The kernel release `uname` reports (and `/proc/version`).
pub const RELEASE: &str = "6.1.0-forkvm";
/// The kernel version string `uname` reports.
pub const VERSION: &str = "#1 SMP PREEMPT forkvm";

/// The directories, each with its entries (a name ending in `/` is a directory).
const DIRS: &[(&str, &[&str])] = &[
    ("", &["fs/", "kernel/", "net/", "vm/"]),
    ("fs", &["file-max", "nr_open", "pipe-max-size"]),
    (
        "kernel",
        &[
            "cap_last_cap",
            "domainname",
            "hostname",
            "ngroups_max",
            "osrelease",
            "ostype",
            "pid_max",
            "random/",
            "version",
        ],
    ),
    (
        "kernel/random",
        &["boot_id", "entropy_avail", "poolsize", "uuid"],
    ),
    ("net", &["core/"]),
    ("net/core", &["somaxconn"]),
    ("vm", &["max_map_count", "overcommit_memory"]),
];

/// What `/proc/sys/<rel>` is: `Some(true)` a directory, `Some(false)` a file.
pub fn kind(rel: &[u8]) -> Option<bool> {
    let rel = std::str::from_utf8(rel).ok()?;
    if DIRS.iter().any(|(d, _)| *d == rel) {
        return Some(true);
    }
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let (_, names) = DIRS.iter().find(|(d, _)| *d == dir)?;
    names.contains(&name).then_some(false)
}

/// The entries of directory `/proc/sys/<rel>`: (name, is a directory).
pub fn list(rel: &[u8]) -> Vec<(Vec<u8>, bool)> {
    let Some((_, names)) = DIRS.iter().find(|(d, _)| d.as_bytes() == rel) else {
        return Vec::new();
    };
    names
        .iter()
        .map(|n| match n.strip_suffix('/') {
            Some(dir) => (dir.as_bytes().to_vec(), true),
            None => (n.as_bytes().to_vec(), false),
        })
        .collect()
}

/// The contents of file `/proc/sys/<rel>`, made when it is opened.
pub fn contents(rel: &[u8]) -> Option<String> {
    let value = match rel {
        b"fs/file-max" => "9223372036854775807".to_string(),
        b"fs/nr_open" => super::fdtable::MAX_FDS.to_string(),
        b"fs/pipe-max-size" => super::fdtable::PIPE_MAX_SIZE.to_string(),
        b"kernel/cap_last_cap" => "40".into(),
        b"kernel/domainname" => "(none)".into(),
        b"kernel/hostname" => HOSTNAME.into(),
        b"kernel/ngroups_max" => "65536".into(),
        b"kernel/osrelease" => RELEASE.into(),
        b"kernel/ostype" => "Linux".into(),
        // Linux's on 64-bit machines; the run's own pids are far below it.
        b"kernel/pid_max" => "4194304".into(),
        b"kernel/version" => VERSION.into(),
        b"kernel/random/boot_id" => uuid(boot_id()),
        b"kernel/random/entropy_avail" | b"kernel/random/poolsize" => "256".into(),
        // A new one at every open, as Linux makes one at every read.
        b"kernel/random/uuid" => uuid(fresh()),
        b"net/core/somaxconn" => "4096".into(),
        b"vm/max_map_count" => "65530".into(),
        // Linux's default heuristic overcommit: address space may be
        // reserved beyond memory (forkvm charges what is touched).
        b"vm/overcommit_memory" => "0".into(),
        _ => return None,
    };
    Some(value + "\n")
}

/// `/proc/version`.
pub fn proc_version() -> String {
    format!("Linux version {RELEASE} (forkvm) {VERSION}\n")
}

/// One id for every process of this host process ("this boot").
fn boot_id() -> [u8; 16] {
    static ID: std::sync::OnceLock<[u8; 16]> = std::sync::OnceLock::new();
    *ID.get_or_init(fresh)
}

fn fresh() -> [u8; 16] {
    let mut b = [0u8; 16];
    // Without the host's randomness the id is all zeros: unique no more,
    // but still well formed.
    let _ = getrandom::fill(&mut b);
    b
}

/// A version-4 UUID in its text form.
fn uuid(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_has_a_kind_and_every_file_contents() {
        for (dir, names) in DIRS {
            assert_eq!(kind(dir.as_bytes()), Some(true), "{dir}");
            for n in *names {
                let (name, is_dir) = n.strip_suffix('/').map_or((*n, false), |d| (d, true));
                let rel = if dir.is_empty() {
                    name.to_string()
                } else {
                    format!("{dir}/{name}")
                };
                assert_eq!(kind(rel.as_bytes()), Some(is_dir), "{rel}");
                assert_eq!(contents(rel.as_bytes()).is_some(), !is_dir, "{rel}");
            }
        }
        assert_eq!(kind(b"kernel/nothing"), None);
        assert_eq!(kind(b"kernel/random/uuid/x"), None);
    }

    #[test]
    fn uuids_are_version_4_and_new_at_every_open() {
        let a = contents(b"kernel/random/uuid").unwrap();
        let b = contents(b"kernel/random/uuid").unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 37);
        assert_eq!(&a[14..15], "4");
        assert!("89ab".contains(&a[19..20]));
        assert_eq!(
            contents(b"kernel/random/boot_id"),
            contents(b"kernel/random/boot_id")
        );
    }
}
