//! The syscall table as data: number → name, handler, support level, note.
//!
//! Each family file exports a `SYSCALLS` slice; this module joins them into
//! a dense lookup array and renders `docs/syscalls.md`.

use super::Handler;
use std::sync::OnceLock;

/// How completely a syscall is implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Behaves as on Linux for everything a sandboxed program can ask.
    Full,
    /// Works for common uses; the note says what is missing.
    Partial,
    /// Deliberately refused with an errno; the note says why.
    Refused,
}

/// One row of the table.
pub struct SyscallEntry {
    /// x86-64 syscall number.
    pub nr: u64,
    /// Linux name.
    pub name: &'static str,
    /// The implementation.
    pub handler: Handler,
    /// How complete it is.
    pub support: Support,
    /// What is missing or why it is refused; empty when `Full`.
    pub note: &'static str,
}

/// Highest syscall number + 1 that the dense table covers.
const TABLE_SIZE: usize = 512;

fn families() -> [&'static [SyscallEntry]; 23] {
    [
        super::fs::SYSCALLS,
        super::io::SYSCALLS,
        super::ioctl::SYSCALLS,
        super::sockopt::SYSCALLS,
        super::poll::SYSCALLS,
        super::mem::SYSCALLS,
        super::process::SYSCALLS,
        super::prctl::SYSCALLS,
        super::signal::SYSCALLS,
        super::signalfd::SYSCALLS,
        super::time::SYSCALLS,
        super::fdtable::SYSCALLS,
        super::thread::SYSCALLS,
        super::event::SYSCALLS,
        super::epoll::SYSCALLS,
        super::net::SYSCALLS,
        super::xattr::SYSCALLS,
        super::child::SYSCALLS,
        super::exec::SYSCALLS,
        super::copy_range::SYSCALLS,
        super::pidfd::SYSCALLS,
        super::inotify::SYSCALLS,
        super::sysv_shm::SYSCALLS,
    ]
}

/// All rows, sorted by number.
pub fn all() -> Vec<&'static SyscallEntry> {
    let mut v: Vec<_> = families().into_iter().flatten().collect();
    v.sort_by_key(|e| e.nr);
    v
}

fn dense() -> &'static [Option<&'static SyscallEntry>; TABLE_SIZE] {
    static DENSE: OnceLock<[Option<&'static SyscallEntry>; TABLE_SIZE]> = OnceLock::new();
    DENSE.get_or_init(|| {
        let mut t = [None; TABLE_SIZE];
        for e in families().into_iter().flatten() {
            if let Some(slot) = t.get_mut(e.nr as usize) {
                *slot = Some(e);
            }
        }
        t
    })
}

/// The entry for syscall `nr`, if we handle it.
pub fn lookup(nr: u64) -> Option<&'static SyscallEntry> {
    dense().get(usize::try_from(nr).ok()?).copied().flatten()
}

/// The compatibility document, generated from the table.
pub fn render_markdown() -> String {
    let rows = all();
    let count = |s| rows.iter().filter(|e| e.support == s).count();
    let mut out = String::new();
    out.push_str("# Linux syscalls in forkvm\n\n");
    out.push_str("Generated from the syscall table (`crates/forkvm/src/linux/table.rs`) by ");
    out.push_str("`forkvm syscalls`. Do not edit by hand.\n\n");
    out.push_str(&format!(
        "{} syscalls handled: {} full, {} partial, {} deliberately refused. \
         Any other number returns -ENOSYS and is logged once.\n\n",
        rows.len(),
        count(Support::Full),
        count(Support::Partial),
        count(Support::Refused)
    ));
    out.push_str(
        "With `--syscalls fast` on PVM, a host poller may answer these without a VM exit \
         (docs/design.md, \"Exitless host calls\"): ",
    );
    out.push_str(&super::exitless::names().collect::<Vec<_>>().join(", "));
    out.push_str(".\n\n");
    out.push_str("| nr | name | support | note |\n| ---: | --- | --- | --- |\n");
    for e in rows {
        let s = match e.support {
            Support::Full => "full",
            Support::Partial => "partial",
            Support::Refused => "refused",
        };
        out.push_str(&format!("| {} | {} | {} | {} |\n", e.nr, e.name, s, e.note));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique_and_named() {
        let rows = all();
        for w in rows.windows(2) {
            assert_ne!(
                w[0].nr, w[1].nr,
                "{} and {} share a number",
                w[0].name, w[1].name
            );
        }
        for e in &rows {
            assert!((e.nr as usize) < TABLE_SIZE);
            assert!(!e.name.is_empty());
            if e.support != Support::Full {
                assert!(!e.note.is_empty(), "{} needs a note", e.name);
            }
        }
        assert!(lookup(1).is_some(), "write is handled");
        assert!(lookup(10_000).is_none());
    }

    #[test]
    fn committed_doc_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/syscalls.md");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == render_markdown(),
            "docs/syscalls.md is stale: run `forkvm syscalls > docs/syscalls.md`"
        );
    }

    /// Every handler in the table, called with hostile arguments (NULL, the
    /// kernel half, unmapped and read-only addresses, huge lengths, bad fds):
    /// each answers (a value or an errno) and none panics.
    #[test]
    fn every_handler_survives_hostile_arguments() {
        use crate::linux::{Policy, Process};
        use crate::memory::{AddressSpace, GuestMemory, Rights};
        let mut m = GuestMemory::new(16 << 20).unwrap();
        m.track_mappings();
        let ro = crate::abi::USER_BASE;
        let rw = ro + 0x10_0000;
        m.map_user(
            ro,
            ro + 0x1000,
            Rights {
                read: true,
                write: false,
            },
        );
        m.map_user(
            rw,
            rw + 0x10_0000,
            Rights {
                read: true,
                write: true,
            },
        );
        let bad = [
            0u64,
            0xffff_8000_0000_0000,
            0x7fff_0000_0000,
            ro,
            u64::MAX - 7,
        ];
        let mut calls = 0;
        for e in all() {
            for &ptr in &bad {
                for fd in [1u64, 77, u64::MAX] {
                    let mut p = Process::new(
                        Policy::default(),
                        AddressSpace::new(0x50_0000, 0xe0_0000),
                        "/".into(),
                        "/prog".into(),
                    );
                    // stdio is /dev/null here: nothing reaches the test's own output or input.
                    for n in 0..3 {
                        use crate::linux::fdtable::{oflags::O_RDWR, FileKind, OpenFile};
                        p.fds
                            .install(n, OpenFile::new(FileKind::Null, O_RDWR).into_ref(), false)
                            .unwrap();
                    }
                    for args in [
                        [fd, ptr, 1 << 40, ptr, 0, 0],
                        [ptr, ptr, ptr, ptr, ptr, ptr],
                        [fd, rw, 16, 0, 0, 0],
                    ] {
                        let _ = (e.handler)(&mut p, &mut m, &args);
                        calls += 1;
                    }
                }
            }
        }
        assert!(calls > 150 * 45);
    }

    #[test]
    fn at_least_150_syscalls_are_handled() {
        assert!(all().len() >= 150, "{}", all().len());
    }
}
