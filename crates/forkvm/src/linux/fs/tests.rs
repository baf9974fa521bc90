//! Unit tests of the file-system syscalls.

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
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
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

#[test]
fn open_read_stat_allowed_file() {
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    let fd = open(
        &mut p,
        &mut m,
        &t.s("allowed/hello.txt"),
        O_RDONLY | O_CLOEXEC,
    )
    .unwrap();
    assert_eq!(fd, 3);
    assert_eq!(p.fds.cloexec(3), Ok(true));
    assert_eq!(read_all(&mut p, &mut m, fd), b"hello world");
    assert_eq!(read_all(&mut p, &mut m, fd), b"");
    // fstat agrees with the host.
    assert_eq!(call(&mut p, &mut m, sys_fstat, &[fd, BUF]), Ok(0));
    let host = std::fs::metadata(t.allowed().join("hello.txt")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(m.read_u64(BUF + 8), Ok(host.ino()));
    assert_eq!(m.read_u64(BUF + 48), Ok(11));
    assert_eq!(m.read_u32(BUF + 24), Ok(host.mode()));
    assert_eq!(m.read_u64(BUF + 88), Ok(host.mtime() as u64));
    let st = stat(&mut p, &mut m, &t.s("allowed/hello.txt"), true).unwrap();
    assert_eq!(
        (st.ino, st.size, st.mode & S_IFMT),
        (host.ino(), 11, S_IFREG)
    );
    // lseek + pread, and a dup shares the offset.
    assert_eq!(call(&mut p, &mut m, io(8), &[fd, 6, 0]), Ok(6));
    let d = call(
        &mut p,
        &mut m,
        crate::linux::fdtable::SYSCALLS[1].handler,
        &[fd],
    )
    .unwrap();
    assert_eq!(read_all(&mut p, &mut m, d), b"world");
    assert_eq!(call(&mut p, &mut m, io(8), &[fd, 0, 1]), Ok(11));
    assert_eq!(call(&mut p, &mut m, io(8), &[fd, -2i64 as u64, 2]), Ok(9));
    assert_eq!(
        call(&mut p, &mut m, io(8), &[fd, -20i64 as u64, 1]),
        Err(Errno::EINVAL)
    );
    assert_eq!(call(&mut p, &mut m, io(17), &[fd, BUF, 5, 0]), Ok(5));
    assert_eq!(m.read(BUF, 5).unwrap(), b"hello");
    // Only the bytes a read can transfer must be valid (as Linux copies lazily).
    assert_eq!(call(&mut p, &mut m, io(17), &[fd, BUF, 1 << 40, 6]), Ok(5));
    assert_eq!(
        call(&mut p, &mut m, io(17), &[fd, (8 << 20) - 4, 100, 0]),
        Err(Errno::EFAULT)
    );
    assert_eq!(
        call(&mut p, &mut m, io(17), &[fd, (8 << 20) - 4, 100, 7]),
        Ok(4)
    );
    assert_eq!(call(&mut p, &mut m, io(17), &[fd, 0, 100, 11]), Ok(0));
    // Writing is refused.
    assert_eq!(
        call(&mut p, &mut m, io(1), &[fd, BUF, 1]),
        Err(Errno::EBADF)
    );
    assert_eq!(
        call(&mut p, &mut m, io(18), &[fd, BUF, 1, 0]),
        Err(Errno::EBADF)
    );
    for flags in [
        O_WRONLY,
        O_RDWR,
        O_CREAT,
        O_TRUNC,
        O_RDONLY | O_CREAT | O_EXCL,
    ] {
        assert_eq!(
            open(&mut p, &mut m, &t.s("allowed/hello.txt"), flags),
            Err(Errno::EACCES)
        );
    }
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/new.txt"), O_CREAT | O_WRONLY),
        Err(Errno::EACCES)
    );
    m.write(PATH, b"/x\0").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_creat, &[PATH, 0o644]),
        Err(Errno::EACCES)
    );
    // mmap support used by mem.rs.
    let mut page = [0u8; 16];
    p.fds.read_at_for_mmap(fd as i32, &mut page, 6).unwrap();
    assert_eq!(&page[..6], b"world\0");
    assert_eq!(p.fds.check_mappable(0), Err(Errno::ENODEV));
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

#[test]
fn directories_getdents_and_cwd() {
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    let dir = open(&mut p, &mut m, &t.s("allowed"), O_RDONLY | O_DIRECTORY).unwrap();
    let names = list(&mut p, &mut m, dir);
    assert!(
        names.contains(&"hello.txt".to_string()) && names.contains(&"sub".to_string()),
        "{names:?}"
    );
    assert_eq!(
        call(&mut p, &mut m, sys_getdents64, &[dir, BUF, 4]),
        Ok(0),
        "at end"
    );
    assert_eq!(call(&mut p, &mut m, io(8), &[dir, 0, 0]), Ok(0));
    assert_eq!(
        call(&mut p, &mut m, sys_getdents64, &[dir, BUF, 4]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(&mut p, &mut m, io(0), &[dir, BUF, 4]),
        Err(Errno::EISDIR)
    );
    // getdents on a non-directory and a bad fd.
    assert_eq!(
        call(&mut p, &mut m, sys_getdents64, &[1, BUF, 200]),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_getdents64, &[77, BUF, 200]),
        Err(Errno::EBADF)
    );
    // openat relative to the directory fd, with `..` that stays inside.
    m.write(PATH, b"sub/../sub/inner.txt\0").unwrap();
    let f = call(&mut p, &mut m, sys_openat, &[dir, PATH, 0]).unwrap();
    assert_eq!(read_all(&mut p, &mut m, f), b"inner");
    m.write(PATH, b"hello.txt\0").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_openat, &[f, PATH, 0]),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_openat, &[99, PATH, 0]),
        Err(Errno::EBADF)
    );
    // An absolute path ignores a bad dirfd.
    let abs = format!("{}\0", t.s("allowed/hello.txt"));
    m.write(PATH, abs.as_bytes()).unwrap();
    assert!(call(&mut p, &mut m, sys_openat, &[99, PATH, 0]).is_ok());
    // fchdir + getcwd + relative open.
    assert_eq!(call(&mut p, &mut m, sys_fchdir, &[dir]), Ok(0));
    let want = t.s("allowed");
    assert_eq!(
        call(&mut p, &mut m, sys_getcwd, &[BUF, 4096]),
        Ok(want.len() as u64 + 1)
    );
    assert_eq!(
        m.read(BUF, want.len() as u64 + 1).unwrap(),
        format!("{want}\0").as_bytes()
    );
    assert_eq!(
        call(&mut p, &mut m, sys_getcwd, &[BUF, want.len() as u64]),
        Err(Errno::ERANGE)
    );
    assert_eq!(call(&mut p, &mut m, sys_fchdir, &[f]), Err(Errno::ENOTDIR));
    let f = open(&mut p, &mut m, "sub_link/inner.txt", O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, f), b"inner");
    // chdir into a subdirectory through a symlink: cwd is canonical.
    m.write(PATH, b"sub_link/deeper\0").unwrap();
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    assert_eq!(p.cwd, t.s("allowed/sub/deeper"));
    m.write(PATH, b"../inner.txt\0").unwrap();
    assert!(call(&mut p, &mut m, sys_open, &[PATH, 0]).is_ok());
    m.write(PATH, b"../../../secret.txt\0").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_open, &[PATH, 0]),
        Err(Errno::ENOENT)
    );
    m.write(PATH, b"../inner.txt\0").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_chdir, &[PATH]),
        Err(Errno::ENOTDIR)
    );
    // "/" is an ancestor of the root: a directory one can stand in.
    m.write(PATH, b"/\0").unwrap();
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    assert_eq!(p.cwd, "/");
    let back = format!("{}\0", t.s("allowed/sub/deeper"));
    m.write(PATH, back.as_bytes()).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    // O_DIRECTORY on a file.
    assert_eq!(
        open(&mut p, &mut m, "../inner.txt", O_DIRECTORY),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        open(&mut p, &mut m, "../inner.txt/", 0),
        Err(Errno::ENOTDIR)
    );
    assert!(open(&mut p, &mut m, "../", O_DIRECTORY).is_ok());
}

#[test]
fn escapes_are_refused() {
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed(), PathBuf::from("/proc")]);
    let secret = t.s("secret.txt");
    let tries = [
        secret.clone(),
        t.s("allowed/../secret.txt"),
        t.s("allowed/sub/../../secret.txt"),
        t.s("allowed/abs_out"),
        t.s("allowed/rel_out"),
        t.s("allowed/rel_out2"),
        t.s("allowed/to_root/etc/passwd"),
        format!("/proc/self/root{secret}"),
        format!("/proc/thread-self/root{secret}"),
        format!("/proc/{}/root{secret}", std::process::id()),
        format!("/proc/self/cwd/{secret}"),
        "/proc/self/mem".to_string(),
        "/proc/self/environ".to_string(),
        "/etc/passwd".to_string(),
    ];
    for path in &tries {
        assert_eq!(
            open(&mut p, &mut m, path, O_RDONLY),
            Err(Errno::ENOENT),
            "{path}"
        );
        assert_eq!(
            open(&mut p, &mut m, path, O_PATH),
            Err(Errno::ENOENT),
            "{path}"
        );
        assert_eq!(
            stat(&mut p, &mut m, path, true).err(),
            Some(Errno::ENOENT),
            "{path}"
        );
    }
    assert!(p.fds.open_fds().len() == 3);
    // The links themselves are inside and visible to lstat/readlink.
    let st = stat(&mut p, &mut m, &t.s("allowed/rel_out"), false).unwrap();
    assert_eq!(st.mode & S_IFMT, S_IFLNK);
    let path = format!("{}\0", t.s("allowed/rel_out"));
    m.write(PATH, path.as_bytes()).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]),
        Ok(13)
    );
    assert_eq!(m.read(BUF, 13).unwrap(), b"../secret.txt");
    assert_eq!(call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 3]), Ok(3));
    assert_eq!(
        call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 0]),
        Err(Errno::EINVAL)
    );
    let path = format!("{}\0", t.s("allowed/hello.txt"));
    m.write(PATH, path.as_bytes()).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]),
        Err(Errno::EINVAL)
    );
    // Links that stay inside work.
    let fd = open(&mut p, &mut m, &t.s("allowed/abs_in"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), b"hello world");
    let fd = open(&mut p, &mut m, &t.s("allowed/rel_in"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), b"inner");
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/rel_in"), O_NOFOLLOW),
        Err(Errno::ELOOP)
    );
    assert!(open(&mut p, &mut m, &t.s("allowed/rel_in"), O_NOFOLLOW | O_PATH).is_ok());
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/loop"), 0),
        Err(Errno::ELOOP)
    );
    // A file root allows exactly itself.
    let (mut p, mut m) = setup(vec![t.allowed().join("hello.txt")]);
    assert!(open(&mut p, &mut m, &t.s("allowed/hello.txt"), 0).is_ok());
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/hello.txt/"), 0),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/rel_in"), 0),
        Err(Errno::ENOENT)
    );
    // Its directory is only a way to it.
    let fd = open(&mut p, &mut m, &t.s("allowed"), 0).unwrap();
    assert_eq!(list(&mut p, &mut m, fd), [".", "..", "hello.txt"]);
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/hello.txt/.."), 0),
        Err(Errno::ENOTDIR)
    );
    // Relative roots are ignored.
    let (mut p, mut m) = setup(vec![PathBuf::from("relative"), PathBuf::from("/a/../b")]);
    assert_eq!(open(&mut p, &mut m, "relative", 0), Err(Errno::ENOENT));
}

#[test]
fn host_links_above_the_roots() {
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    for via in ["via_link", "abs_via_link", "via_link/sub/..", "slash_link/"] {
        let path = if via.starts_with("slash") {
            format!("{}{}", t.s(via), t.s("allowed/hello.txt"))
        } else {
            t.s(&format!("{via}/hello.txt"))
        };
        let fd = open(&mut p, &mut m, &path, O_RDONLY).unwrap();
        assert_eq!(read_all(&mut p, &mut m, fd), b"hello world", "{path}");
    }
    // The link into the root is visible as a link; realpath() can walk it.
    let st = stat(&mut p, &mut m, &t.s("via_link"), false).unwrap();
    assert_eq!(st.mode & S_IFMT, S_IFLNK);
    let link = format!("{}\0", t.s("via_link"));
    m.write(PATH, link.as_bytes()).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]), Ok(7));
    assert_eq!(m.read(BUF, 7).unwrap(), b"allowed");
    let link = format!("{}\0", t.s("slash_link"));
    m.write(PATH, link.as_bytes()).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]), Ok(1));
    // Directories above the root are not links (EINVAL); they are
    // directories that list only the way to the root.
    for dir in [
        t.s(""),
        "/".to_string(),
        t.s("via_link/.."),
        t.s("allowed/to_root"),
    ] {
        let z = format!("{dir}\0");
        m.write(PATH, z.as_bytes()).unwrap();
        if !dir.ends_with("to_root") {
            assert_eq!(
                call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]),
                Err(Errno::EINVAL),
                "{dir}"
            );
        }
        let fd = open(&mut p, &mut m, &dir, O_RDONLY | O_DIRECTORY).unwrap();
        let mut names = list(&mut p, &mut m, fd);
        if dir == "/" || dir.ends_with("to_root") {
            // The private /dev/shm leads through /dev.
            names.retain(|n| n != "dev");
        }
        assert_eq!(names.len(), 3, "{dir}: {names:?}");
        assert!(names.contains(&".".into()) && names.contains(&"..".into()));
        let st = stat(&mut p, &mut m, &dir, true).unwrap();
        assert_eq!(st.mode & S_IFMT, S_IFDIR, "{dir}");
        // fstat of the open directory agrees with stat of its path.
        assert_eq!(call(&mut p, &mut m, sys_fstat, &[fd, BUF]), Ok(0));
        assert_eq!(m.read_u64(BUF + 8), Ok(st.ino), "{dir}");
        assert!(open(&mut p, &mut m, &dir, O_PATH).is_ok());
    }
    // The listing of the tree's top names the way down and nothing else
    // (not secret.txt, nor the links beside it); rewinding starts again.
    let fd = open(&mut p, &mut m, &t.s(""), O_RDONLY).unwrap();
    assert_eq!(list(&mut p, &mut m, fd), [".", "..", "allowed"]);
    assert_eq!(list(&mut p, &mut m, fd), Vec::<String>::new());
    assert_eq!(call(&mut p, &mut m, io(8), &[fd, 0, 0]), Ok(0));
    assert_eq!(list(&mut p, &mut m, fd), [".", "..", "allowed"]);
    // Nothing can be created or changed there.
    let f = format!("{}\0", t.s("new"));
    m.write(PATH, f.as_bytes()).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_mkdir, &[PATH, 0o777]),
        Err(Errno::EROFS)
    );
    m.write(PATH, z_path(&t.s("")).as_bytes()).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::EROFS)
    );
    // Links above the root that lead elsewhere do not exist.
    for path in [
        t.s("secret_link"),
        t.s("via_link/../secret.txt"),
        t.s("nothing"),
    ] {
        assert_eq!(
            open(&mut p, &mut m, &path, O_RDONLY),
            Err(Errno::ENOENT),
            "{path}"
        );
        assert_eq!(
            open(&mut p, &mut m, &path, O_PATH | O_NOFOLLOW),
            Err(Errno::ENOENT),
            "{path}"
        );
        assert_eq!(
            stat(&mut p, &mut m, &path, false).err(),
            Some(Errno::ENOENT),
            "{path}"
        );
        let z = format!("{path}\0");
        m.write(PATH, z.as_bytes()).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]),
            Err(Errno::ENOENT),
            "{path}"
        );
    }
    // stdio, the four files, two descriptors per ancestor and the top listing.
    assert_eq!(p.fds.open_fds().len(), 3 + 4 + 8 + 1);
}

#[test]
fn devices_and_stdio_paths() {
    let (mut p, mut m) = setup(vec![]);
    let null = open(&mut p, &mut m, "/dev/null", O_RDWR).unwrap();
    m.write(BUF, b"abc").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[null, BUF, 3]), Ok(3));
    assert_eq!(read_all(&mut p, &mut m, null), b"");
    let zero = open(&mut p, &mut m, "/dev/../dev/zero", O_RDONLY).unwrap();
    assert_eq!(call(&mut p, &mut m, io(0), &[zero, BUF, 3]), Ok(3));
    assert_eq!(m.read(BUF, 3).unwrap(), &[0, 0, 0]);
    assert!(open(&mut p, &mut m, "/dev/urandom", O_RDONLY).is_ok());
    assert_eq!(
        open(&mut p, &mut m, "/dev/null", O_DIRECTORY),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        open(&mut p, &mut m, "/dev/sda", O_RDONLY),
        Err(Errno::ENOENT)
    );
    let st = stat(&mut p, &mut m, "/dev/null", true).unwrap();
    assert_eq!(st.mode, S_IFCHR | 0o666);
    let out = open(&mut p, &mut m, "/dev/stdout", O_WRONLY).unwrap();
    assert!(matches!(
        lock(&p.fds.get(out as i32).unwrap()).kind,
        FileKind::Stdout
    ));
    assert_eq!(
        open(&mut p, &mut m, "/proc/self/fd/77", O_RDONLY),
        Err(Errno::ENOENT)
    );
    // Access checks.
    m.write(PATH, b"/dev/null\0").unwrap();
    assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 6]), Ok(0));
    assert_eq!(
        call(&mut p, &mut m, sys_access, &[PATH, 8]),
        Err(Errno::EINVAL)
    );
    // fstat of a pipe and of a device.
    call(&mut p, &mut m, io(22), &[BUF]).unwrap();
    let r = m.read_u32(BUF).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_fstat, &[u64::from(r), BUF]), Ok(0));
    assert_eq!(m.read_u32(BUF + 24).unwrap() & S_IFMT, S_IFIFO);
    assert_eq!(call(&mut p, &mut m, sys_fstat, &[zero, BUF]), Ok(0));
    assert_eq!(m.read_u64(BUF + 40), Ok(makedev(1, 5)));
    // AT_EMPTY_PATH on any fd (glibc's fstat), with NULL too.
    m.write(PATH, b"\0").unwrap();
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_newfstatat,
            &[zero, PATH, BUF, AT_EMPTY_PATH]
        ),
        Ok(0)
    );
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_newfstatat,
            &[zero, 0, BUF, AT_EMPTY_PATH]
        ),
        Ok(0)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_newfstatat, &[zero, PATH, BUF, 0]),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_newfstatat, &[zero, PATH, BUF, 1]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_newfstatat,
            &[1, PATH, BUF, AT_EMPTY_PATH]
        ),
        Ok(0)
    );
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_statx,
            &[zero, PATH, AT_EMPTY_PATH, 0xfff, BUF]
        ),
        Ok(0)
    );
    assert_eq!(m.read_u32(BUF), Ok(STATX_BASIC_STATS));
    assert_eq!(
        m.read(BUF + 28, 2).unwrap(),
        &((S_IFCHR | 0o666) as u16).to_le_bytes()
    );
    assert_eq!(
        (m.read_u32(BUF + 128), m.read_u32(BUF + 132)),
        (Ok(1), Ok(5))
    );
    // umask.
    assert_eq!(call(&mut p, &mut m, sys_umask, &[0o077]), Ok(0o022));
    assert_eq!(call(&mut p, &mut m, sys_umask, &[0o022]), Ok(0o077));
    // /proc/self/exe.
    m.write(PATH, b"/proc/self/exe\0").unwrap();
    assert_eq!(call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]), Ok(5));
    assert_eq!(m.read(BUF, 5).unwrap(), b"/prog");
}

#[test]
fn statx_and_newfstatat_on_files() {
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    p.cwd = t.s("allowed");
    m.write(PATH, b"rel_in\0").unwrap();
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_statx,
            &[AT_FDCWD as u64, PATH, 0, 0x7ff, BUF]
        ),
        Ok(0)
    );
    assert_eq!(m.read_u64(BUF + 40), Ok(5));
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_statx,
            &[AT_FDCWD as u64, PATH, AT_SYMLINK_NOFOLLOW, 0x7ff, BUF]
        ),
        Ok(0)
    );
    let mode = u16::from_le_bytes([
        m.read(BUF + 28, 2).unwrap()[0],
        m.read(BUF + 29, 1).unwrap()[0],
    ]);
    assert_eq!(u32::from(mode) & S_IFMT, S_IFLNK);
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_statx,
            &[AT_FDCWD as u64, PATH, 0x6000, 0, BUF]
        ),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_statx,
            &[AT_FDCWD as u64, PATH, 0, 1 << 31, BUF]
        ),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_newfstatat,
            &[AT_FDCWD as u64, PATH, BUF, 0]
        ),
        Ok(0)
    );
    assert_eq!(m.read_u64(BUF + 48), Ok(5));
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_newfstatat,
            &[AT_FDCWD as u64, PATH, BUF, AT_SYMLINK_NOFOLLOW]
        ),
        Ok(0)
    );
    assert_eq!(m.read_u32(BUF + 24).unwrap() & S_IFMT, S_IFLNK);
    // AT_EMPTY_PATH with AT_FDCWD is the cwd.
    m.write(PATH, b"\0").unwrap();
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_newfstatat,
            &[AT_FDCWD as u64, PATH, BUF, AT_EMPTY_PATH]
        ),
        Ok(0)
    );
    assert_eq!(m.read_u32(BUF + 24).unwrap() & S_IFMT, S_IFDIR);
    // access: read yes, write no, missing ENOENT.
    m.write(PATH, b"hello.txt\0").unwrap();
    assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 4]), Ok(0));
    assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 0]), Ok(0));
    assert_eq!(
        call(&mut p, &mut m, sys_access, &[PATH, 2]),
        Err(Errno::EACCES)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_faccessat, &[AT_FDCWD as u64, PATH, 4]),
        Ok(0)
    );
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_faccessat2,
            &[AT_FDCWD as u64, PATH, 4, AT_EACCESS]
        ),
        Ok(0)
    );
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_faccessat2,
            &[AT_FDCWD as u64, PATH, 4, 1]
        ),
        Err(Errno::EINVAL)
    );
    m.write(PATH, b"nope\0").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_access, &[PATH, 0]),
        Err(Errno::ENOENT)
    );
    m.write(PATH, b"sub\0").unwrap();
    assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 1]), Ok(0));
    // statfs reports read-only.
    assert_eq!(call(&mut p, &mut m, sys_statfs, &[PATH, BUF]), Ok(0));
    assert_eq!(m.read_u64(BUF + 80).unwrap() & 1, 1);
    // Refused namespace changes.
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_linkat,
            &[AT_FDCWD as u64, PATH, AT_FDCWD as u64, PATH]
        ),
        Err(Errno::EROFS)
    );
    assert_eq!(call(&mut p, &mut m, sys_fchmod, &[1]), Err(Errno::EROFS));
    assert_eq!(call(&mut p, &mut m, sys_fchown, &[50]), Err(Errno::EBADF));
    assert_eq!(
        call(&mut p, &mut m, sys_ftruncate, &[1]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_utimensat, &[1, 0, 0, 0]),
        Err(Errno::EROFS)
    );
}

#[test]
fn bad_pointers_and_names() {
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    let fd = open(&mut p, &mut m, &t.s("allowed"), O_RDONLY).unwrap();
    let good = format!("{}\0", t.s("allowed/hello.txt"));
    m.write(PATH, good.as_bytes()).unwrap();
    let cwd = AT_FDCWD as u64;
    for bad in BAD {
        let cases: Vec<(&str, Handler, Vec<u64>)> = vec![
            ("open", sys_open, vec![bad, 0]),
            ("openat", sys_openat, vec![cwd, bad, 0]),
            ("creat", sys_creat, vec![bad, 0]),
            ("stat path", sys_stat, vec![bad, BUF]),
            ("stat buf", sys_stat, vec![PATH, bad]),
            ("lstat path", sys_lstat, vec![bad, BUF]),
            ("lstat buf", sys_lstat, vec![PATH, bad]),
            ("fstat", sys_fstat, vec![fd, bad]),
            ("newfstatat path", sys_newfstatat, vec![cwd, bad, BUF, 0]),
            ("newfstatat buf", sys_newfstatat, vec![cwd, PATH, bad, 0]),
            ("statx path", sys_statx, vec![cwd, bad, 0, 0x7ff, BUF]),
            ("statx buf", sys_statx, vec![cwd, PATH, 0, 0x7ff, bad]),
            ("getdents64", sys_getdents64, vec![fd, bad, 4096]),
            ("readlink path", sys_readlink, vec![bad, BUF, 10]),
            ("readlinkat path", sys_readlinkat, vec![cwd, bad, BUF, 10]),
            ("access", sys_access, vec![bad, 0]),
            ("faccessat", sys_faccessat, vec![cwd, bad, 0]),
            ("faccessat2", sys_faccessat2, vec![cwd, bad, 0, 0]),
            ("getcwd", sys_getcwd, vec![bad, 4096]),
            ("chdir", sys_chdir, vec![bad]),
            ("statfs path", sys_statfs, vec![bad, BUF]),
            ("statfs buf", sys_statfs, vec![PATH, bad]),
            ("fstatfs", sys_fstatfs, vec![fd, bad]),
            ("mkdir", sys_mkdir, vec![bad]),
            ("mkdirat", sys_mkdirat, vec![cwd, bad]),
            ("rename", sys_rename, vec![PATH, bad]),
            ("renameat", sys_renameat, vec![cwd, PATH, cwd, bad]),
            ("link", sys_link, vec![PATH, bad]),
            ("chmod", sys_chmod, vec![bad, 0]),
            ("chown", sys_chown, vec![bad, 0, 0]),
            ("truncate", sys_truncate, vec![bad, 0]),
            ("mknod", sys_mknod, vec![bad, 0, 0]),
            ("symlinkat", sys_symlinkat, vec![bad, cwd, PATH]),
            ("utimensat", sys_utimensat, vec![cwd, bad, 0, 0]),
        ];
        for (name, h, args) in cases {
            assert_eq!(
                call(&mut p, &mut m, h, &args),
                Err(Errno::EFAULT),
                "{name} {bad:#x}"
            );
        }
    }
    // readlink's buffer.
    let link = format!("{}\0", t.s("allowed/rel_in"));
    m.write(PATH, link.as_bytes()).unwrap();
    for bad in BAD {
        assert_eq!(
            call(&mut p, &mut m, sys_readlink, &[PATH, bad, 10]),
            Err(Errno::EFAULT)
        );
    }
    // Huge getdents count.
    assert_eq!(
        call(&mut p, &mut m, sys_getdents64, &[fd, BUF, u64::MAX]),
        Err(Errno::EFAULT)
    );
    // Path length limits.
    let long = vec![b'a'; PATH_MAX as usize];
    m.write(PATH, &long).unwrap();
    m.write(PATH + PATH_MAX, &[0]).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_open, &[PATH, 0]),
        Err(Errno::ENAMETOOLONG)
    );
    m.write(PATH + PATH_MAX - 1, &[0]).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_open, &[PATH, 0]),
        Err(Errno::ENOENT)
    );
    // A path running off the end of guest memory.
    let end = (8 << 20) - 3;
    m.write(end, b"abc").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_open, &[end, 0]),
        Err(Errno::EFAULT)
    );
    // Empty path.
    m.write(PATH, b"\0").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_open, &[PATH, 0]),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_stat, &[PATH, BUF]),
        Err(Errno::ENOENT)
    );
    // Bad fds.
    for bad in [99u64, u64::MAX, 5000] {
        assert_eq!(
            call(&mut p, &mut m, sys_fstat, &[bad, BUF]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_fstatfs, &[bad, BUF]),
            Err(Errno::EBADF)
        );
        assert_eq!(call(&mut p, &mut m, sys_fchdir, &[bad]), Err(Errno::EBADF));
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_newfstatat,
                &[bad, PATH, BUF, AT_EMPTY_PATH]
            ),
            Err(Errno::EBADF)
        );
    }
}

#[test]
fn path_only_descriptors() {
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    let f = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_PATH).unwrap();
    assert_eq!(call(&mut p, &mut m, io(0), &[f, BUF, 4]), Err(Errno::EBADF));
    assert_eq!(call(&mut p, &mut m, sys_fstat, &[f, BUF]), Ok(0));
    assert_eq!(m.read_u64(BUF + 48), Ok(11));
    let d = open(&mut p, &mut m, &t.s("allowed/sub"), O_PATH | O_DIRECTORY).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_getdents64, &[d, BUF, 4096]),
        Err(Errno::EBADF)
    );
    m.write(PATH, b"inner.txt\0").unwrap();
    let i = call(&mut p, &mut m, sys_openat, &[d, PATH, 0]).unwrap();
    assert_eq!(read_all(&mut p, &mut m, i), b"inner");
    let l = open(&mut p, &mut m, &t.s("allowed/rel_in"), O_PATH | O_NOFOLLOW).unwrap();
    m.write(PATH, b"\0").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_readlinkat, &[l, PATH, BUF, 100]),
        Ok(13)
    );
    assert_eq!(m.read(BUF, 13).unwrap(), b"sub/inner.txt");
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

#[test]
fn metadata_changes_under_write_roots() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let t = Tree::new();
    let rw = t.root.join("rw");
    std::fs::create_dir(&rw).unwrap();
    let (mut p, mut m) = setup_rw(vec![t.allowed()], vec![rw.clone()]);
    let f = t.s("rw/f");
    let fd = open(&mut p, &mut m, &f, O_CREAT | O_WRONLY).unwrap();
    // fchmod / chmod / fchmodat.
    assert_eq!(call(&mut p, &mut m, sys_fchmod, &[fd, 0o640]), Ok(0));
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o640);
    put_path(&mut m, PATH, &f);
    assert_eq!(call(&mut p, &mut m, sys_chmod, &[PATH, 0o604]), Ok(0));
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o604);
    let cwd = AT_FDCWD as u64;
    assert_eq!(
        call(&mut p, &mut m, sys_fchmodat, &[cwd, PATH, 0o600, 0]),
        Ok(0)
    );
    // fchmodat has no flags argument: whatever is in the fourth register is ignored.
    assert_eq!(
        call(&mut p, &mut m, sys_fchmodat, &[cwd, PATH, 0o600, 0xdead]),
        Ok(0)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_fchmodat2, &[cwd, PATH, 0o600, 0xdead]),
        Err(Errno::EINVAL)
    );
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o600);
    // chown: to the guest's own ids only.
    let me = u64::from(GUEST_ID);
    assert_eq!(call(&mut p, &mut m, sys_fchown, &[fd, me, me]), Ok(0));
    assert_eq!(
        call(&mut p, &mut m, sys_chown, &[PATH, u64::MAX, me]),
        Ok(0)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_chown, &[PATH, 0, me]),
        Err(Errno::EPERM)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_fchown, &[fd, me, 0]),
        Err(Errno::EPERM)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_fchownat, &[cwd, PATH, me, me, 0]),
        Ok(0)
    );
    // Ownership shows as the guest's.
    let st = call(&mut p, &mut m, sys_fstat, &[fd, BUF]);
    assert_eq!(st, Ok(0));
    assert_eq!(m.read_u32(BUF + 28), Ok(GUEST_ID));
    assert_eq!(m.read_u32(BUF + 32), Ok(GUEST_ID));
    // utimensat with explicit times, then futimens(NULL).
    let times = [1_000_000i64, 5, 2_000_000, 7];
    for (i, v) in times.iter().enumerate() {
        m.write(BUF + 8 * i as u64, &v.to_le_bytes()).unwrap();
    }
    assert_eq!(
        call(&mut p, &mut m, sys_utimensat, &[cwd, PATH, BUF, 0]),
        Ok(0)
    );
    let md = std::fs::metadata(&f).unwrap();
    assert_eq!(
        (md.atime(), md.mtime(), md.mtime_nsec()),
        (1_000_000, 2_000_000, 7)
    );
    assert_eq!(call(&mut p, &mut m, sys_utimensat, &[fd, 0, 0, 0]), Ok(0));
    assert!(std::fs::metadata(&f).unwrap().mtime() > 2_000_000);
    m.write(BUF + 8, &(2_000_000_000i64).to_le_bytes()).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_utimensat, &[cwd, PATH, BUF, 0]),
        Err(Errno::EINVAL)
    );
    // statfs: writable here, read-only in the read root.
    assert_eq!(call(&mut p, &mut m, sys_statfs, &[PATH, BUF]), Ok(0));
    assert_eq!(m.read_u64(BUF + 80).unwrap() & 1, 0);
    assert_eq!(call(&mut p, &mut m, sys_fstatfs, &[fd, BUF]), Ok(0));
    assert_eq!(m.read_u64(BUF + 80).unwrap() & 1, 0);
    let h = format!("{}\0", t.s("allowed/hello.txt"));
    m.write(PATH + 0x200, h.as_bytes()).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_statfs, &[PATH + 0x200, BUF]),
        Ok(0)
    );
    assert_eq!(m.read_u64(BUF + 80).unwrap() & 1, 1);
    // truncate.
    assert_eq!(call(&mut p, &mut m, sys_truncate, &[PATH, 10]), Ok(0));
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 10);
    // A read-only file of the guest's cannot be opened for writing or truncated.
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
    assert_eq!(open(&mut p, &mut m, &f, O_WRONLY), Err(Errno::EACCES));
    put_path(&mut m, PATH, &f);
    assert_eq!(
        call(&mut p, &mut m, sys_truncate, &[PATH, 0]),
        Err(Errno::EACCES)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_access, &[PATH, 2]),
        Err(Errno::EACCES)
    );
    assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 4]), Ok(0));
    assert_eq!(call(&mut p, &mut m, sys_chmod, &[PATH, 0o644]), Ok(0));
    assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 2]), Ok(0));
    // symlink, link, mknod.
    put_path(&mut m, PATH, "f");
    put_path(&mut m, PATH + 0x100, &t.s("rw/l"));
    assert_eq!(
        call(&mut p, &mut m, sys_symlink, &[PATH, PATH + 0x100]),
        Ok(0)
    );
    assert_eq!(std::fs::read_link(rw.join("l")).unwrap(), Path::new("f"));
    put_path(&mut m, PATH, &t.s("rw/f"));
    put_path(&mut m, PATH + 0x100, &t.s("rw/h"));
    assert_eq!(call(&mut p, &mut m, sys_link, &[PATH, PATH + 0x100]), Ok(0));
    assert_eq!(std::fs::metadata(rw.join("h")).unwrap().ino(), md.ino());
    put_path(&mut m, PATH, &t.s("rw/n"));
    assert_eq!(call(&mut p, &mut m, sys_mknod, &[PATH, 0o100644, 0]), Ok(0));
    assert!(rw.join("n").is_file());
    assert_eq!(
        call(&mut p, &mut m, sys_mknod, &[PATH, 0o20644, 0]),
        Err(Errno::EPERM)
    );
    // A fifo can be made, but opening it never blocks the host thread.
    put_path(&mut m, PATH, &t.s("rw/fifo"));
    assert_eq!(call(&mut p, &mut m, sys_mknod, &[PATH, 0o10644, 0]), Ok(0));
    assert!(open(&mut p, &mut m, &t.s("rw/fifo"), O_WRONLY).is_err());
    assert!(open(&mut p, &mut m, &t.s("rw/fifo"), O_RDONLY).is_err());
    // A read-only file cannot get a writable name, nor be changed.
    put_path(&mut m, PATH, &t.s("allowed/hello.txt"));
    put_path(&mut m, PATH + 0x100, &t.s("rw/stolen"));
    assert_eq!(
        call(&mut p, &mut m, sys_link, &[PATH, PATH + 0x100]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_chown, &[PATH, me, me]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_utimensat, &[cwd, PATH, 0, 0]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_truncate, &[PATH, 0]),
        Err(Errno::EROFS)
    );
    let ro = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_RDONLY).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_fchmod, &[ro, 0o777]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_fchown, &[ro, me, me]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_utimensat, &[ro, 0, 0, 0]),
        Err(Errno::EROFS)
    );
    // A link in the write root to a read-only file does not make it writable.
    std::os::unix::fs::symlink(t.allowed().join("hello.txt"), rw.join("ro_link")).unwrap();
    put_path(&mut m, PATH, &t.s("rw/ro_link"));
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_chown, &[PATH, me, me]),
        Err(Errno::EROFS)
    );
    // The link itself is the guest's.
    assert_eq!(call(&mut p, &mut m, sys_lchown, &[PATH, me, me]), Ok(0));
    // Missing things are ENOENT, not EROFS.
    put_path(&mut m, PATH, &t.s("rw/missing"));
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::ENOENT)
    );
    put_path(&mut m, PATH, "/no/such/place");
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::ENOENT)
    );
}

#[test]
fn missing_parents_are_enoent() {
    let t = Tree::new();
    let rw = t.root.join("rw");
    std::fs::create_dir(&rw).unwrap();
    let (mut p, mut m) = setup_rw(vec![t.allowed()], vec![rw.clone()]);
    let missing = t.s("rw/a/b");
    assert_eq!(
        open(&mut p, &mut m, &missing, O_CREAT | O_WRONLY),
        Err(Errno::ENOENT)
    );
    put_path(&mut m, PATH, &missing);
    put_path(&mut m, PATH + 0x100, &t.s("rw/x"));
    assert_eq!(
        call(&mut p, &mut m, sys_mkdir, &[PATH, 0o777]),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_mknod, &[PATH, 0o100644, 0]),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_symlink, &[PATH + 0x100, PATH]),
        Err(Errno::ENOENT)
    );
    std::fs::write(rw.join("x"), b"x").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH + 0x100, PATH]),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_link, &[PATH + 0x100, PATH]),
        Err(Errno::ENOENT)
    );
    // A file in the way is ENOTDIR; an existing read-only parent EROFS.
    put_path(&mut m, PATH, &t.s("rw/x/y"));
    assert_eq!(
        call(&mut p, &mut m, sys_mkdir, &[PATH, 0o777]),
        Err(Errno::ENOTDIR)
    );
    put_path(&mut m, PATH, &t.s("allowed/newdir"));
    assert_eq!(
        call(&mut p, &mut m, sys_mkdir, &[PATH, 0o777]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/new"), O_CREAT | O_WRONLY),
        Err(Errno::EACCES)
    );
    // Then creating the parent and retrying works.
    put_path(&mut m, PATH, &t.s("rw/a"));
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o777]), Ok(0));
    assert!(open(&mut p, &mut m, &missing, O_CREAT | O_WRONLY).is_ok());
}

#[test]
fn ownership_maps_the_host_user_to_the_guest() {
    use std::os::unix::fs::MetadataExt;
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    let f = t.s("allowed/hello.txt");
    let host = std::fs::metadata(&f).unwrap();
    assert_eq!(host.uid(), rustix::process::geteuid().as_raw());
    stat(&mut p, &mut m, &f, true).unwrap();
    assert_eq!(m.read_u32(BUF + 28), Ok(GUEST_ID));
    assert_eq!(m.read_u32(BUF + 32), Ok(GUEST_ID));
    // Another owner shows as the overflow id.
    let mut other = rustix::fs::stat(f.as_str()).unwrap();
    other.st_uid = other.st_uid.wrapping_add(1);
    other.st_gid = other.st_gid.wrapping_add(1);
    let info = StatInfo::from(&other);
    assert_eq!((info.uid, info.gid), (OVERFLOW_ID, OVERFLOW_ID));
}

#[test]
fn private_tmp_and_dev_shm() {
    let (mut p, mut m) = setup(vec![]);
    let host_tmp = p.tmp.host_dir(b"/tmp");
    // Nothing exists on the host until the guest uses it.
    assert!(!host_tmp.exists());
    let fd = open(&mut p, &mut m, "/tmp/a.txt", O_CREAT | O_RDWR).unwrap();
    assert!(host_tmp.join("a.txt").is_file());
    m.write(BUF, b"hello").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[fd, BUF, 5]), Ok(5));
    assert_eq!(call(&mut p, &mut m, io(8), &[fd, 0, 0]), Ok(0));
    assert_eq!(read_all(&mut p, &mut m, fd), b"hello");
    put_path(&mut m, PATH, "/tmp/d");
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]), Ok(0));
    put_path(&mut m, PATH, "/tmp/a.txt");
    put_path(&mut m, PATH + 0x100, "/tmp/d/b.txt");
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x100]),
        Ok(0)
    );
    let st = stat(&mut p, &mut m, "/tmp/d/b.txt", true).unwrap();
    assert_eq!((st.mode & S_IFMT, st.size), (S_IFREG, 5));
    assert_eq!(m.read_u32(BUF + 28), Ok(GUEST_ID));
    // /tmp is sticky and world-writable, as on Linux.
    let st = stat(&mut p, &mut m, "/tmp", true).unwrap();
    assert_eq!(st.mode & 0o7777, 0o1777);
    let dir = open(&mut p, &mut m, "/tmp", O_RDONLY | O_DIRECTORY).unwrap();
    assert_eq!(list(&mut p, &mut m, dir), [".", "..", "d"]);
    let dir = open(&mut p, &mut m, "/", O_RDONLY | O_DIRECTORY).unwrap();
    assert_eq!(list(&mut p, &mut m, dir), [".", "..", "dev", "tmp"]);
    let shm = open(&mut p, &mut m, "/dev/shm/sem.x", O_CREAT | O_EXCL | O_RDWR).unwrap();
    assert!(p.tmp.host_dir(b"/dev/shm").join("sem.x").is_file());
    // Private trees are kept shallow.
    put_path(&mut m, PATH, "/tmp");
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    put_path(&mut m, PATH, "d");
    let mut depth = 0;
    let refused = loop {
        match call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]) {
            Ok(_) | Err(Errno::EEXIST) => {}
            Err(e) => break e,
        }
        assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
        depth += 1;
        assert!(depth < 1000);
    };
    assert_eq!((refused, depth), (Errno::ENAMETOOLONG, 510));
    put_path(&mut m, PATH, "/");
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    // Growing past the VM's memory is ENOSPC; within it works.
    let big = m.size() + 1;
    assert_eq!(
        call(&mut p, &mut m, sys_ftruncate, &[shm, big]),
        Err(Errno::ENOSPC)
    );
    assert_eq!(call(&mut p, &mut m, sys_ftruncate, &[shm, 1 << 20]), Ok(0));
    // A fork has a copy: changes on either side stay there.
    let mut child = p.fork_copy().unwrap();
    let child_tmp = child.tmp.host_dir(b"/tmp");
    assert_ne!(child_tmp, host_tmp);
    assert_eq!(std::fs::read(child_tmp.join("d/b.txt")).unwrap(), b"hello");
    put_path(&mut m, PATH, "/tmp/d/b.txt");
    assert_eq!(call(&mut child, &mut m, sys_unlink, &[PATH]), Ok(0));
    assert!(stat(&mut p, &mut m, "/tmp/d/b.txt", true).is_ok());
    assert_eq!(
        stat(&mut child, &mut m, "/tmp/d/b.txt", true).err(),
        Some(Errno::ENOENT)
    );
    let cfd = open(&mut child, &mut m, "/tmp/only-child", O_CREAT | O_WRONLY).unwrap();
    assert!(cfd > 2);
    assert_eq!(
        stat(&mut p, &mut m, "/tmp/only-child", true).err(),
        Some(Errno::ENOENT)
    );
    // Dropping a process removes its trees from the host.
    drop(child);
    assert!(!child_tmp.exists());
    drop(p);
    assert!(!host_tmp.exists());
}

#[test]
fn a_mapped_tmp_is_not_private() {
    let t = Tree::new();
    let (mut p, mut m) = setup_rw(vec![], vec![t.root.clone()]);
    // The tree lives under the host's /tmp: /tmp is the user's mapping.
    assert!(t.root.starts_with("/tmp"));
    let f = t.s("new.txt");
    assert!(open(&mut p, &mut m, &f, O_CREAT | O_WRONLY).is_ok());
    assert!(t.root.join("new.txt").is_file());
    assert!(!p.tmp.host_dir(b"/tmp").exists());
    // Only the way to the root shows in /tmp; /dev/shm stays private.
    let dir = open(&mut p, &mut m, "/tmp", O_RDONLY).unwrap();
    let names = list(&mut p, &mut m, dir);
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(open(&mut p, &mut m, "/dev/shm/x", O_CREAT | O_WRONLY).is_ok());
}

#[test]
fn private_trees_stay_shallow_and_deep_ones_are_removed() {
    let (mut p, mut m) = setup(vec![]);
    // A deep chain, then another place to move it into.
    put_path(&mut m, PATH, "/tmp");
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    for top in ["a", "b"] {
        put_path(&mut m, PATH, top);
        assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]), Ok(0));
        assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
        put_path(&mut m, PATH, "dd");
        for _ in 0..200 {
            assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]), Ok(0));
            assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
        }
        put_path(&mut m, PATH, "/tmp");
        assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    }
    // Moving one chain under the other would make it twice as deep.
    let deep_b = format!("/tmp/b{}/a", "/dd".repeat(200));
    put_path(&mut m, PATH, "/tmp/a");
    put_path(&mut m, PATH + 0x1000, &deep_b);
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x1000]),
        Err(Errno::ENAMETOOLONG)
    );
    put_path(&mut m, PATH + 0x1000, "/tmp/b/a");
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x1000]),
        Ok(0)
    );
    // Whatever the host holds there, however deep, goes with the process.
    let host = p.tmp.host_dir(b"/tmp");
    let mut deep = host.join("host-made");
    std::fs::create_dir(&deep).unwrap();
    let fd = rustix::fs::open(&deep, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
    let mut cur = fd;
    for _ in 0..3000 {
        rustix::fs::mkdirat(&cur, "x", Mode::RWXU).unwrap();
        cur = rustix::fs::openat(&cur, "x", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .unwrap();
    }
    rustix::fs::openat(&cur, "f", OFlags::CREATE | OFlags::WRONLY, Mode::RUSR).unwrap();
    rustix::fs::chmodat(&cur, ".", Mode::empty(), AtFlags::empty()).unwrap();
    deep.push("x");
    assert!(deep.is_dir());
    drop(p);
    assert!(!host.exists());
    assert!(!host.parent().unwrap().exists());
}

#[test]
fn a_fork_changes_only_its_copy_of_the_write_roots() {
    let t = Tree::new();
    let w = t.root.join("allowed/sub");
    // The write root lies inside a read root: the fork's copy must win there.
    let (master, mut m) = setup_rw(vec![t.root.clone()], vec![w.clone()]);
    let mut p = master.fork_copy().unwrap();
    let inner = t.s("allowed/sub/inner.txt");
    let fd = open(&mut p, &mut m, &inner, O_WRONLY | O_APPEND).unwrap();
    m.write(BUF, b" more").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[fd, BUF, 5]), Ok(5));
    assert_eq!(stat(&mut p, &mut m, &inner, true).unwrap().size, 10);
    put_path(&mut m, PATH, &inner);
    put_path(&mut m, PATH + 0x800, &t.s("allowed/sub/renamed.txt"));
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x800]),
        Ok(0)
    );
    put_path(&mut m, PATH, &t.s("allowed/sub/deeper"));
    assert_eq!(call(&mut p, &mut m, sys_rmdir, &[PATH]), Ok(0));
    put_path(&mut m, PATH, &t.s("allowed/sub/new"));
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o755]), Ok(0));
    let dir = open(&mut p, &mut m, &t.s("allowed/sub"), O_RDONLY | O_DIRECTORY).unwrap();
    assert_eq!(list(&mut p, &mut m, dir), [".", "..", "new", "renamed.txt"]);
    let f = open(&mut p, &mut m, &t.s("allowed/sub/renamed.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, f), b"inner more");
    // The host and the master see the original tree.
    assert_eq!(std::fs::read(w.join("inner.txt")).unwrap(), b"inner");
    assert!(w.join("deeper").is_dir() && !w.join("new").exists());
    let mut mp = master;
    assert_eq!(stat(&mut mp, &mut m, &inner, true).unwrap().size, 5);
    // Outside the write root, still read-only.
    put_path(&mut m, PATH, &t.s("allowed/hello.txt"));
    assert_eq!(call(&mut p, &mut m, sys_unlink, &[PATH]), Err(Errno::EROFS));
    // A reset (a new fork of the master) starts from the host's tree again.
    drop(p);
    let mut q = mp.fork_copy().unwrap();
    assert_eq!(stat(&mut q, &mut m, &inner, true).unwrap().size, 5);
    assert!(stat(&mut q, &mut m, &t.s("allowed/sub/new"), true).is_err());
}

#[test]
fn a_fork_writes_persisted_roots_through() {
    let t = Tree::new();
    let w = t.root.join("allowed/sub");
    let (mut master, mut m) = setup_rw(vec![], vec![w.clone()]);
    master.tmp.set_persist(vec![w.clone()]);
    let mut p = master.fork_copy().unwrap();
    let fd = open(
        &mut p,
        &mut m,
        &t.s("allowed/sub/shared"),
        O_CREAT | O_WRONLY,
    )
    .unwrap();
    m.write(BUF, b"x").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[fd, BUF, 1]), Ok(1));
    assert_eq!(std::fs::read(w.join("shared")).unwrap(), b"x");
}

#[test]
fn a_fork_never_changes_the_host_through_an_early_descriptor() {
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new();
    let w = t.allowed();
    let (master, mut m) = setup_rw(vec![], vec![w.clone()]);
    let mut p = master.fork_copy().unwrap();
    // Opened before the fork changed anything: the host's file.
    let fd = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_RDONLY).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let before = mode(&w.join("hello.txt"));
    assert_eq!(
        call(&mut p, &mut m, sys_fchmod, &[fd, 0o600]),
        Err(Errno::EROFS)
    );
    assert_eq!(mode(&w.join("hello.txt")), before);
    // By path, the change lands in the fork's copy.
    put_path(&mut m, PATH, &t.s("allowed/hello.txt"));
    assert_eq!(call(&mut p, &mut m, sys_chmod, &[PATH, 0o600]), Ok(0));
    assert_eq!(
        stat(&mut p, &mut m, &t.s("allowed/hello.txt"), true)
            .unwrap()
            .mode
            & 0o777,
        0o600
    );
    assert_eq!(mode(&w.join("hello.txt")), before);
}
