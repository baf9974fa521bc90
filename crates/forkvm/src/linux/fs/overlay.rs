//! Per-fork isolation of the `--allow-write` roots.
//!
//! A fork (every worker of `forkvm serve`, every [`crate::fork::Fork`])
//! must not leave files behind for the next request, nor change the host.
//! So in a fork each write root is an overlay: it reads the host directory
//! until the fork first changes anything under a write root; then the root
//! is copied up, whole, into the fork's private scratch directory (the one
//! behind its private `/tmp`, on `/dev/shm`, so in memory) and from then on
//! the guest path of the root leads to that copy. The copy is dropped with
//! the process, that is at reset (a reset makes a new process from the
//! master's template) and when the fork goes.
//!
//! Why the whole root and not file by file: every file-system call here
//! works on host descriptors resolved one component at a time; once the
//! root is a real host directory holding the fork's view, listings,
//! renames (of directories too), deletions, links, `stat` and `mmap` are
//! the host kernel's, exact, with no whiteouts or merged listings to get
//! wrong. The price is a copy of the root on the first change in a request
//! (none for a request that changes nothing: reset costs nothing more), so
//! roots are capped: [`COPY_MAX_BYTES`] and [`COPY_MAX_ENTRIES`]; a bigger
//! root cannot be changed in a fork (ENOSPC). Writes into the copy count
//! against the `--memory` budget with the private `/tmp` (ENOSPC past it).
//!
//! Not isolated: the master (`forkvm run`, and `serve`'s program before it
//! said ready) writes through to the host, as its initialisation; roots
//! named with `--persist` are written through by every fork, a channel
//! between requests by design; and a file the master opened for writing
//! stays that host file in every fork.

use super::*;
use std::sync::atomic::Ordering;

/// Largest total size of the write roots a fork may copy up.
pub const COPY_MAX_BYTES: u64 = 256 << 20;
/// Most entries (files, directories, links) copied up.
pub const COPY_MAX_ENTRIES: u64 = 100_000;

/// The overlay state of one process, kept in its [`PrivateTmp`].
#[derive(Debug, Default)]
pub(super) struct Overlay {
    /// This process is a fork: its write roots are overlays.
    pub(super) isolate: bool,
    /// Write roots shared by all forks, written through (`--persist`).
    pub(super) persist: Vec<PathBuf>,
    /// The write roots have been copied up.
    pub(super) copied: std::sync::atomic::AtomicBool,
}

impl Overlay {
    /// The state a fork of a process with this state starts with: isolated,
    /// nothing copied yet.
    pub(super) fn for_fork(&self) -> Self {
        Self {
            isolate: true,
            persist: self.persist.clone(),
            copied: Default::default(),
        }
    }

    fn persists(&self, root: &Path) -> bool {
        self.persist.iter().any(|p| p == root)
    }
}

impl PrivateTmp {
    /// Marks `dirs` (canonical host paths, also write roots) as shared by
    /// every fork: written through to the host, never copied up.
    pub fn set_persist(&mut self, dirs: Vec<PathBuf>) {
        self.overlay.persist = dirs;
        self.roots.clear();
    }

    /// Whether this process's write roots are isolated (it is a fork).
    pub fn isolates_writes(&self) -> bool {
        self.overlay.isolate
    }

    /// Host directory holding the copy of write root number `i`.
    fn upper(&self, i: usize) -> PathBuf {
        self.base.join(format!("w{i}"))
    }
}

/// Whether write root `host` is an overlay in `p` (a fork, not `--persist`).
fn overlaid(p: &Process, host: &Path) -> bool {
    p.tmp.overlay.isolate && !p.tmp.overlay.persists(host)
}

/// The `--allow-write` roots of `p` as they are now: the host directories,
/// or their copies once copied up.
pub(super) fn allow_write_roots(p: &Process) -> Vec<Root> {
    let copied = p.tmp.overlay.copied.load(Ordering::Relaxed);
    let mut out = to_roots(p.policy.allow_write.iter());
    for (i, r) in out.iter_mut().enumerate() {
        if overlaid(p, &r.host) {
            if copied {
                r.host = p.tmp.upper(i);
            }
            r.mount = true;
        } else if p.tmp.overlay.isolate {
            // A persisted root inside an overlaid one leads to the host.
            r.mount = true;
        }
    }
    out
}

/// Before a change: in a fork, copies the overlaid roots up first (once).
pub(super) fn prepare_change(p: &Process) -> Result<(), Errno> {
    if p.tmp.overlay.isolate && !p.tmp.overlay.copied.load(Ordering::Relaxed) {
        copy_up(p)?;
    }
    Ok(())
}

/// Copies every overlaid write root into the fork's scratch directory.
fn copy_up(p: &Process) -> Result<(), Errno> {
    let lower = to_roots(p.policy.allow_write.iter());
    let mut count = Count::default();
    for r in lower.iter().filter(|r| overlaid(p, &r.host)) {
        count.add_tree(&r.host, 0)?;
    }
    if count.bytes > COPY_MAX_BYTES || count.entries > COPY_MAX_ENTRIES {
        return Err(Errno::ENOSPC);
    }
    for (i, r) in lower.iter().enumerate() {
        if !overlaid(p, &r.host) {
            continue;
        }
        let to = p.tmp.upper(i);
        ensure_base(&to)?;
        // A root missing on the host stays missing in the copy.
        let Ok(md) = std::fs::symlink_metadata(&r.host) else {
            continue;
        };
        if md.is_dir() {
            make_dir(&to, 0o700)?;
            copy_tree(&r.host, &to, 0)?;
            copy_attrs(&md, &to)?;
        } else if md.is_file() {
            copy_file(&r.host, &to)?;
            copy_attrs(&md, &to)?;
        }
    }
    p.tmp.grown.fetch_add(count.bytes, Ordering::Relaxed);
    p.tmp.overlay.copied.store(true, Ordering::Relaxed);
    Ok(())
}

/// What a tree holds, counted before it is copied.
#[derive(Default)]
struct Count {
    bytes: u64,
    entries: u64,
}

impl Count {
    fn add_tree(&mut self, dir: &Path, depth: u32) -> Result<(), Errno> {
        if depth > MAX_DEPTH {
            return Err(Errno::ELOOP);
        }
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        for e in rd {
            let e = e.map_err(Errno::from)?;
            self.entries += 1;
            if self.entries > COPY_MAX_ENTRIES {
                return Ok(());
            }
            let md = std::fs::symlink_metadata(e.path()).map_err(Errno::from)?;
            if md.is_dir() {
                self.add_tree(&e.path(), depth + 1)?;
            } else if md.is_file() {
                self.bytes = self.bytes.saturating_add(md.len());
            }
            if self.bytes > COPY_MAX_BYTES {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Whether guest `path` lies in an overlaid write root that has been copied
/// up (its files count against the private trees' budget).
pub(super) fn is_overlay_path(p: &Process, path: &[u8]) -> bool {
    if !p.tmp.overlay.copied.load(Ordering::Relaxed) {
        return false;
    }
    let comps: Vec<Vec<u8>> = components(path).into_iter().collect();
    allow_write_roots(p).iter().any(|r| {
        r.host.starts_with(&p.tmp.base)
            && r.comps.len() <= comps.len()
            && r.comps.iter().zip(&comps).all(|(a, b)| a == b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `--allow-write` roots of `p`, ready for a change.
    fn roots_for_change(p: &Process) -> Result<Vec<Root>, Errno> {
        prepare_change(p)?;
        Ok(allow_write_roots(p))
    }
    use crate::linux::test_setup;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("forkvm-overlay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("a.txt"), b"lower").unwrap();
        std::fs::write(d.join("sub/b.txt"), b"deep").unwrap();
        d.canonicalize().unwrap()
    }

    fn fork_of(dir: &Path, persist: bool) -> Process {
        let (mut p, _) = test_setup(Policy {
            allow_write: vec![dir.to_path_buf()],
            ..Policy::default()
        });
        if persist {
            p.tmp.set_persist(vec![dir.to_path_buf()]);
        }
        p.fork_copy().unwrap()
    }

    #[test]
    fn a_master_writes_through() {
        let d = scratch("master");
        let (p, _) = test_setup(Policy {
            allow_write: vec![d.clone()],
            ..Policy::default()
        });
        let r = roots_for_change(&p).unwrap();
        assert_eq!(r[0].host, d);
        assert!(!p.tmp.isolates_writes());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_fork_copies_up_on_the_first_change_and_drops_the_copy() {
        let d = scratch("fork");
        let f = fork_of(&d, false);
        assert!(f.tmp.isolates_writes());
        // Before any change: the host directory.
        assert_eq!(allow_write_roots(&f)[0].host, d);
        let r = roots_for_change(&f).unwrap();
        let upper = r[0].host.clone();
        assert_ne!(upper, d);
        assert_eq!(std::fs::read(upper.join("sub/b.txt")).unwrap(), b"deep");
        std::fs::write(upper.join("a.txt"), b"changed").unwrap();
        assert_eq!(std::fs::read(d.join("a.txt")).unwrap(), b"lower");
        let g = f.fork_copy().unwrap();
        assert_eq!(allow_write_roots(&g)[0].host, d, "a new fork starts clean");
        drop(f);
        assert!(!upper.exists(), "the copy goes with the process");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn persisted_roots_are_written_through() {
        let d = scratch("persist");
        let f = fork_of(&d, true);
        assert_eq!(roots_for_change(&f).unwrap()[0].host, d);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_root_too_big_to_copy_cannot_be_changed() {
        let d = scratch("big");
        let big = std::fs::File::create(d.join("big")).unwrap();
        big.set_len(COPY_MAX_BYTES + 1).unwrap();
        let f = fork_of(&d, false);
        assert_eq!(roots_for_change(&f).err(), Some(Errno::ENOSPC));
        assert_eq!(allow_write_roots(&f)[0].host, d);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
