//! Paths, opening, reading, directories, stat, escapes and bad pointers.

use super::*;

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
    assert_eq!(p.cwd, t.s("allowed/sub/deeper").into_bytes());
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
    assert_eq!(p.cwd, b"/");
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
        // (to_root/etc/passwd is the guest's own, see `etc_files_are_the_guests`.)
        t.s("allowed/to_root/etc/shadow"),
        format!("/proc/self/root{secret}"),
        format!("/proc/thread-self/root{secret}"),
        format!("/proc/{}/root{secret}", std::process::id()),
        format!("/proc/self/cwd/{secret}"),
        "/proc/self/mem".to_string(),
        "/proc/self/environ".to_string(),
        "/etc/shadow".to_string(),
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
    // /etc/passwd is the guest's own, never the host's.
    let sys_read = crate::linux::table::lookup(0).unwrap().handler;
    let sys_close = crate::linux::table::lookup(3).unwrap().handler;
    let fd = open(&mut p, &mut m, "/etc/passwd", O_RDONLY).unwrap();
    let n = call(&mut p, &mut m, sys_read, &[fd, BUF, 4096]).unwrap();
    let text = String::from_utf8(m.read(BUF, n).unwrap().to_vec()).unwrap();
    assert!(text.contains("user:x:1000:1000"), "{text}");
    assert_ne!(
        text,
        std::fs::read_to_string("/etc/passwd").unwrap_or_default()
    );
    call(&mut p, &mut m, sys_close, &[fd]).unwrap();
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
            // The private /dev/shm and /tmp.
            names.retain(|n| n != "dev" && n != "tmp");
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
    p.cwd = t.s("allowed").into_bytes();
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

#[test]
fn a_root_replaced_on_the_host_is_seen_anew() {
    // Roots are kept open between lookups; a deployment that swaps in a
    // new copy of the directory (or an editor that renames a new file over
    // a root file) must still be seen, as a lookup by path would.
    let t = Tree::new();
    let file_root = t.root.join("config.txt");
    std::fs::write(&file_root, b"old config").unwrap();
    let (mut p, mut m) = setup(vec![t.allowed(), file_root.clone()]);
    let fd = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), b"hello world");
    let fd = open(&mut p, &mut m, &t.s("config.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), b"old config");
    std::fs::rename(t.allowed(), t.root.join("old-allowed")).unwrap();
    std::fs::create_dir(t.allowed()).unwrap();
    std::fs::write(t.allowed().join("hello.txt"), b"new world").unwrap();
    let new_file = t.root.join("config.txt.new");
    std::fs::write(&new_file, b"new config").unwrap();
    std::fs::rename(&new_file, &file_root).unwrap();
    let fd = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), b"new world");
    let fd = open(&mut p, &mut m, &t.s("config.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), b"new config");
    // A root gone from the host is gone for the guest too.
    std::fs::remove_dir_all(t.allowed()).unwrap();
    assert_eq!(
        stat(&mut p, &mut m, &t.s("allowed/hello.txt"), true).err(),
        Some(Errno::ENOENT)
    );
}

#[test]
fn a_host_file_whose_size_reads_as_zero_still_gives_its_contents() {
    // The host's sysctls (and sysfs, cgroup files) stat with size 0 and are
    // made when read; a read sized by that 0 gave every program "".
    let (mut p, mut m) = setup(vec![PathBuf::from("/proc/sys/kernel")]);
    let want = std::fs::read("/proc/sys/kernel/ostype").unwrap();
    assert_eq!(want, b"Linux\n");
    let fd = open(&mut p, &mut m, "/proc/sys/kernel/ostype", O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), want);
    assert_eq!(read_all(&mut p, &mut m, fd), b"");
    // pread, readv.
    assert_eq!(call(&mut p, &mut m, io(17), &[fd, BUF, 100, 2]), Ok(4));
    assert_eq!(m.read(BUF, 4).unwrap(), b"nux\n");
    assert_eq!(call(&mut p, &mut m, io(8), &[fd, 0, 0]), Ok(0));
    m.write_u64(BUF + 512, BUF).unwrap();
    m.write_u64(BUF + 520, 3).unwrap();
    m.write_u64(BUF + 528, BUF + 64).unwrap();
    m.write_u64(BUF + 536, 100).unwrap();
    assert_eq!(call(&mut p, &mut m, io(19), &[fd, BUF + 512, 2]), Ok(6));
    assert_eq!(m.read(BUF, 3).unwrap(), b"Lin");
    assert_eq!(m.read(BUF + 64, 3).unwrap(), b"ux\n");
    // A buffer that cannot take what arrived is EFAULT, and the offset
    // stays; at the end of the contents any buffer reads 0, as on Linux.
    assert_eq!(call(&mut p, &mut m, io(8), &[fd, 0, 0]), Ok(0));
    assert_eq!(
        call(&mut p, &mut m, io(0), &[fd, (8 << 20) - 2, 100]),
        Err(Errno::EFAULT)
    );
    assert_eq!(read_all(&mut p, &mut m, fd), want);
    assert_eq!(call(&mut p, &mut m, io(0), &[fd, 0, 100]), Ok(0));
}
