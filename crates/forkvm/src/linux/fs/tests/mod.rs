//! Unit tests of the file-system syscalls: the shared set-up here, the
//! tests by concept in `read` (paths, opening, reading, directories, stat,
//! escapes and bad pointers) and `write` (write roots, private /tmp, forks).

use super::*;
use crate::abi::USER_BASE;
use crate::linux::io::SYSCALLS as IO;
use crate::linux::Handler;
use std::sync::atomic::{AtomicU32, Ordering};

const BAD: [u64; 4] = [0, 0xffff_8000_0000_0000, 8 << 20, u64::MAX - 7];
const PATH: u64 = USER_BASE;
const BUF: u64 = USER_BASE + 0x2000;

/// A host directory tree, removed on drop.
struct Tree {
    root: PathBuf,
}

impl Tree {
    /// A tree outside the host's /tmp (which the guest sees as its private
    /// /tmp, with only the roots below it mounted there), so that the
    /// directories above the roots are the host's.
    fn new() -> Self {
        Self::under(&crate::linux::test_scratch())
    }

    /// A tree under the host's /tmp.
    fn in_tmp() -> Self {
        Self::under(Path::new("/tmp"))
    }

    fn under(parent: &Path) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let root = parent.join(format!(
            "forkvm-fs-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        let a = root.join("allowed");
        std::fs::create_dir_all(a.join("sub/deeper")).unwrap();
        std::fs::write(root.join("secret.txt"), b"secret").unwrap();
        std::fs::write(a.join("hello.txt"), b"hello world").unwrap();
        std::fs::write(a.join("sub/inner.txt"), b"inner").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, a.join(name)).unwrap();
        };
        link(&root.join("secret.txt"), "abs_out");
        link(Path::new("../secret.txt"), "rel_out");
        link(Path::new("sub/../../secret.txt"), "rel_out2");
        link(Path::new("sub/inner.txt"), "rel_in");
        link(&a.join("hello.txt"), "abs_in");
        link(Path::new("/"), "to_root");
        link(Path::new("loop"), "loop");
        link(Path::new("sub"), "sub_link");
        // Links above the root (where the guest sees no directory contents).
        std::os::unix::fs::symlink("allowed", root.join("via_link")).unwrap();
        std::os::unix::fs::symlink(&a, root.join("abs_via_link")).unwrap();
        std::os::unix::fs::symlink("secret.txt", root.join("secret_link")).unwrap();
        std::os::unix::fs::symlink("/", root.join("slash_link")).unwrap();
        Self { root }
    }

    fn allowed(&self) -> PathBuf {
        self.root.join("allowed")
    }

    fn s(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root.display())
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn setup(allow: Vec<PathBuf>) -> (Process, GuestMemory) {
    crate::linux::test_setup(Policy {
        allow_read: allow,
        ..Policy::default()
    })
}

use crate::linux::test_call as call;

fn io(nr: u64) -> Handler {
    IO.iter().find(|e| e.nr == nr).unwrap().handler
}

fn open(p: &mut Process, m: &mut GuestMemory, path: &str, flags: u32) -> SysResult {
    m.write(PATH, path.as_bytes()).unwrap();
    m.write(PATH + path.len() as u64, &[0]).unwrap();
    call(p, m, sys_openat, &[AT_FDCWD as u64, PATH, u64::from(flags)])
}

fn read_all(p: &mut Process, m: &mut GuestMemory, fd: u64) -> Vec<u8> {
    let n = call(p, m, io(0), &[fd, BUF, 4096]).unwrap();
    m.read(BUF, n).unwrap().to_vec()
}

fn stat(p: &mut Process, m: &mut GuestMemory, path: &str, follow: bool) -> Result<StatInfo, Errno> {
    m.write(PATH, path.as_bytes()).unwrap();
    m.write(PATH + path.len() as u64, &[0]).unwrap();
    let h = if follow { sys_stat } else { sys_lstat };
    call(p, m, h, &[PATH, BUF])?;
    let b = m.read(BUF, 144).unwrap();
    let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    Ok(StatInfo {
        dev: u64at(0),
        ino: u64at(8),
        nlink: u64at(16),
        mode: u32at(24),
        size: u64at(48) as i64,
        ..StatInfo::default()
    })
}

/// All names getdents64 gives for `dir` from its current position, sorted.
fn list(p: &mut Process, m: &mut GuestMemory, dir: u64) -> Vec<String> {
    let mut names = Vec::new();
    loop {
        let n = call(p, m, sys_getdents64, &[dir, BUF, 200]).unwrap();
        if n == 0 {
            break;
        }
        let b = m.read(BUF, n).unwrap().to_vec();
        let mut off = 0;
        while off < b.len() {
            let reclen = u16::from_le_bytes([b[off + 16], b[off + 17]]) as usize;
            let name = &b[off + 19..off + reclen];
            let end = name.iter().position(|&c| c == 0).unwrap();
            names.push(String::from_utf8(name[..end].to_vec()).unwrap());
            off += reclen;
        }
    }
    names.sort();
    names
}

fn z_path(s: &str) -> String {
    format!("{s}\0")
}

fn setup_rw(read: Vec<PathBuf>, write: Vec<PathBuf>) -> (Process, GuestMemory) {
    crate::linux::test_setup(Policy {
        allow_read: read,
        allow_write: write,
        ..Policy::default()
    })
}

fn put_path(m: &mut GuestMemory, at: u64, s: &str) {
    m.write(at, z_path(s).as_bytes()).unwrap();
}

mod moved;
mod read;
mod synthetic;
mod write;
