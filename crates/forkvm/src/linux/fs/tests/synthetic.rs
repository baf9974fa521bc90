//! The synthetic names: devices, the guest's /proc and /etc files, found
//! by what the resolved path is, and shown as Linux shows them.

use super::*;

fn access(p: &mut Process, m: &mut GuestMemory, path: &str, mode: u64) -> SysResult {
    put_path(m, PATH, path);
    call(p, m, sys_access, &[PATH, mode])
}

fn readlink(p: &mut Process, m: &mut GuestMemory, path: &str) -> Result<String, Errno> {
    put_path(m, PATH, path);
    let n = call(p, m, sys_readlink, &[PATH, BUF, 200])?;
    Ok(String::from_utf8(m.read(BUF, n).unwrap().to_vec()).unwrap())
}

fn fstat_mode(p: &mut Process, m: &mut GuestMemory, fd: u64) -> (u32, i64) {
    call(p, m, sys_fstat, &[fd, BUF]).unwrap();
    let size = i64::from_le_bytes(m.read(BUF + 48, 8).unwrap().try_into().unwrap());
    (m.read_u32(BUF + 24).unwrap(), size)
}

/// stat, lstat and access of what open+read serve (they were ENOENT).
#[test]
fn generated_files_stat_as_regular_files() {
    let (mut p, mut m) = setup(vec![]);
    for path in [
        "/proc/self/status",
        "/proc/self/maps",
        "/proc/self/stat",
        "/proc/self/statm",
        "/proc/thread-self/status",
        "/proc/2/status",
        "/proc/meminfo",
        "/proc/cpuinfo",
        "/proc/stat",
        "/proc/uptime",
        "/proc/loadavg",
    ] {
        for follow in [true, false] {
            let st = stat(&mut p, &mut m, path, follow).unwrap_or_else(|e| panic!("{path}: {e:?}"));
            assert_eq!((st.mode, st.size), (S_IFREG | 0o444, 0), "{path}");
        }
        assert_eq!(access(&mut p, &mut m, path, 4), Ok(0), "{path}");
        assert_eq!(
            access(&mut p, &mut m, path, 2),
            Err(Errno::EACCES),
            "{path}"
        );
        assert_eq!(
            access(&mut p, &mut m, path, 1),
            Err(Errno::EACCES),
            "{path}"
        );
        let fd = open(&mut p, &mut m, path, O_RDONLY).unwrap();
        // (The test process maps nothing: its maps are empty.)
        assert!(
            path.ends_with("maps") || !read_all(&mut p, &mut m, fd).is_empty(),
            "{path}"
        );
        assert_eq!(
            fstat_mode(&mut p, &mut m, fd),
            (S_IFREG | 0o444, 0),
            "{path}"
        );
        assert_eq!(open(&mut p, &mut m, path, O_WRONLY), Err(Errno::EACCES));
    }
    for path in [
        "/etc/hosts",
        "/etc/passwd",
        "/etc/group",
        "/etc/nsswitch.conf",
    ] {
        let st = stat(&mut p, &mut m, path, true).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        assert_eq!(st.mode, S_IFREG | 0o644, "{path}");
        let fd = open(&mut p, &mut m, path, O_RDONLY).unwrap();
        let len = read_all(&mut p, &mut m, fd).len() as i64;
        assert_eq!(st.size, len, "{path}");
        assert_eq!(fstat_mode(&mut p, &mut m, fd), (S_IFREG | 0o644, len));
        assert_eq!(access(&mut p, &mut m, path, 4), Ok(0), "{path}");
    }
    assert_eq!(
        stat(&mut p, &mut m, "/etc/shadow", true).err(),
        Some(Errno::ENOENT)
    );
    assert_eq!(
        stat(&mut p, &mut m, "/proc/self/status/", true).err(),
        Some(Errno::ENOTDIR)
    );
    assert_eq!(
        stat(&mut p, &mut m, "/proc/self/environ", true).err(),
        Some(Errno::ENOENT)
    );
}

/// The guest's own /etc/hosts names the host name uname gives, so that a
/// program resolving its own name finds it (Python's testHostnameRes).
#[test]
fn own_hosts_file_names_the_host_name() {
    let (mut p, mut m) = setup(vec![]);
    let fd = open(&mut p, &mut m, "/etc/hosts", O_RDONLY).unwrap();
    let hosts = String::from_utf8(read_all(&mut p, &mut m, fd)).unwrap();
    let named = hosts.lines().any(|l| {
        let mut words = l.split_whitespace();
        words.next().is_some_and(|a| a.starts_with("127."))
            && words.any(|w| w == crate::linux::process::HOSTNAME)
    });
    assert!(named, "{hosts}");
}

/// /proc and the process's directories are directories, listed with what exists.
#[test]
fn proc_directories_stat_and_list() {
    let (mut p, mut m) = setup(vec![]);
    for path in [
        "/proc",
        "/proc/self",
        "/proc/self/fd",
        "/proc/self/task",
        "/proc/self/task/2",
        "/etc",
    ] {
        let st = stat(&mut p, &mut m, path, true).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        assert_eq!(st.mode & S_IFMT, S_IFDIR, "{path}");
        assert_eq!(access(&mut p, &mut m, path, 5), Ok(0), "{path}");
    }
    assert_eq!(
        stat(&mut p, &mut m, "/proc/self", false).unwrap().mode & S_IFMT,
        S_IFLNK
    );
    assert_eq!(readlink(&mut p, &mut m, "/proc/self").as_deref(), Ok("2"));
    assert_eq!(
        readlink(&mut p, &mut m, "/proc/thread-self").as_deref(),
        Ok("2/task/2")
    );
    let d = open(&mut p, &mut m, "/proc/self", O_RDONLY | O_DIRECTORY).unwrap();
    let (mode, _) = fstat_mode(&mut p, &mut m, d);
    assert_eq!(mode & S_IFMT, S_IFDIR);
    assert_eq!(
        list(&mut p, &mut m, d),
        [
            ".",
            "..",
            "cmdline",
            "comm",
            "cwd",
            "exe",
            "fd",
            "maps",
            "mountinfo",
            "mounts",
            "stat",
            "statm",
            "status",
            "task"
        ]
    );
    let fds = open(&mut p, &mut m, "/proc/self/fd", O_RDONLY | O_DIRECTORY).unwrap();
    assert_eq!(
        list(&mut p, &mut m, fds),
        [".", "..", "0", "1", "2", "3", "4"]
    );
    let top = open(&mut p, &mut m, "/proc", O_RDONLY | O_DIRECTORY).unwrap();
    assert_eq!(
        list(&mut p, &mut m, top),
        [
            ".",
            "..",
            "2",
            "cpuinfo",
            "loadavg",
            "meminfo",
            "mounts",
            "net",
            "self",
            "stat",
            "sys",
            "thread-self",
            "uptime",
            "version"
        ]
    );
    // A *at call and fchdir from a synthetic directory.
    put_path(&mut m, PATH, "status");
    assert_eq!(
        call(&mut p, &mut m, sys_newfstatat, &[d, PATH, BUF, 0]),
        Ok(0)
    );
    assert_eq!(call(&mut p, &mut m, sys_fchdir, &[d]), Ok(0));
    assert_eq!(p.cwd, b"/proc/2");
    assert_eq!(
        stat(&mut p, &mut m, "fd/../status", true).unwrap().mode,
        S_IFREG | 0o444
    );
    assert_eq!(
        open(&mut p, &mut m, "/proc/self", O_WRONLY),
        Err(Errno::EISDIR)
    );
    assert_eq!(
        open(&mut p, &mut m, "/proc/self/nothing", O_CREAT | O_WRONLY),
        Err(Errno::ENOENT)
    );
}

/// Devices are known by the resolved path: through `.`, `//`, `..` after a
/// link, and symlinks, with Linux's device numbers.
#[test]
fn devices_are_known_by_the_resolved_path() {
    let t = Tree::new();
    let a = t.allowed();
    std::os::unix::fs::symlink("/dev/null", a.join("null_link")).unwrap();
    std::os::unix::fs::symlink("/dev", a.join("dev_link")).unwrap();
    std::os::unix::fs::symlink("/proc/self", a.join("me")).unwrap();
    let (mut p, mut m) = setup(vec![a.clone()]);
    let al = a.display().to_string();
    // From allowed/sub up to / (the tree's depth depends on where it is).
    let ups = "../".repeat(a.components().count());
    for (path, rdev) in [
        ("/dev/./null".to_string(), (1, 3)),
        ("//dev//null".to_string(), (1, 3)),
        (format!("{al}/null_link"), (1, 3)),
        (format!("{al}/dev_link/zero"), (1, 5)),
        (format!("{al}/sub_link/{ups}dev/urandom"), (1, 9)),
    ] {
        let st = stat(&mut p, &mut m, &path, true).unwrap_or_else(|e| panic!("{path}: {e:?}"));
        assert_eq!(st.mode, S_IFCHR | 0o666, "{path}");
        let fd = open(&mut p, &mut m, &path, O_RDWR).unwrap();
        call(&mut p, &mut m, sys_fstat, &[fd, BUF]).unwrap();
        let got = u64::from_le_bytes(m.read(BUF + 40, 8).unwrap().try_into().unwrap());
        assert_eq!(got, makedev(rdev.0, rdev.1), "{path}");
        assert_eq!(m.read_u32(BUF + 24).unwrap(), S_IFCHR | 0o666, "{path}");
    }
    let fd = open(&mut p, &mut m, &format!("{al}/null_link"), O_WRONLY).unwrap();
    m.write(BUF, b"abc").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[fd, BUF, 3]), Ok(3));
    // A link is a link (lstat), and /dev/stdin is one too.
    let st = stat(&mut p, &mut m, &format!("{al}/null_link"), false).unwrap();
    assert_eq!(st.mode & S_IFMT, S_IFLNK);
    assert_eq!(
        stat(&mut p, &mut m, "/dev/stdin", false).unwrap().mode & S_IFMT,
        S_IFLNK
    );
    assert_eq!(
        readlink(&mut p, &mut m, "/dev/stdin").as_deref(),
        Ok("/proc/self/fd/0")
    );
    // Through a link to /proc/self.
    let st = stat(&mut p, &mut m, &format!("{al}/me/status"), true).unwrap();
    assert_eq!(st.mode, S_IFREG | 0o444);
    let fd = open(&mut p, &mut m, &format!("{al}/me/status"), O_RDONLY).unwrap();
    assert!(read_all(&mut p, &mut m, fd).starts_with(b"Name:"));
    // Not something to change.
    put_path(&mut m, PATH, &format!("{al}/null_link"));
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o600]),
        Err(Errno::EPERM)
    );
    // /dev/fd/N and /proc/self/fd/N are the open files; a closed one is ENOENT.
    put_path(&mut m, PATH, "/dev/fd/0");
    assert_eq!(call(&mut p, &mut m, sys_stat, &[PATH, BUF]), Ok(0));
    assert_eq!(
        stat(&mut p, &mut m, "/proc/self/fd/99", true).err(),
        Some(Errno::ENOENT)
    );
    assert_eq!(
        stat(&mut p, &mut m, "/dev/sda", true).err(),
        Some(Errno::ENOENT)
    );
}

/// Odd and hostile spellings end in errors, never outside the namespace.
#[test]
fn odd_synthetic_paths_are_errors() {
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    let root = open(&mut p, &mut m, &t.s("allowed"), O_RDONLY | O_DIRECTORY).unwrap();
    for (path, want) in [
        ("/proc/self/fd/-1", Errno::ENOENT),
        ("/proc/self/fd/03", Errno::ENOENT),
        ("/proc/self/fd/99999999999", Errno::ENOENT),
        ("/proc/2/task/abc", Errno::ENOENT),
        ("/proc/2/task/2/task", Errno::ENOENT),
        ("/proc/1/status", Errno::ENOENT),
        ("/proc/self/root", Errno::ENOENT),
        ("/proc/self/cwd/../../etc/shadow", Errno::ENOENT),
        ("/dev/fd/0/x", Errno::ENOTDIR),
        ("/dev/null/", Errno::ENOTDIR),
        ("/proc/meminfo/x", Errno::ENOTDIR),
    ] {
        assert_eq!(stat(&mut p, &mut m, path, true).err(), Some(want), "{path}");
        assert_eq!(
            open(&mut p, &mut m, path, O_RDONLY).err(),
            Some(want),
            "{path}"
        );
    }
    // Through a directory descriptor's magic link, and up out of it: still the namespace.
    let via = format!("/proc/self/fd/{root}/hello.txt");
    assert_eq!(stat(&mut p, &mut m, &via, true).unwrap().size, 11);
    let up = format!("/proc/self/fd/{root}/../secret.txt");
    assert_eq!(stat(&mut p, &mut m, &up, true).err(), Some(Errno::ENOENT));
    let link = format!("/proc/self/fd/{root}");
    assert_eq!(
        stat(&mut p, &mut m, &link, false).unwrap().mode & S_IFMT,
        S_IFLNK
    );
    assert_eq!(
        stat(&mut p, &mut m, &link, true).unwrap().mode & S_IFMT,
        S_IFDIR
    );
}

/// An allowed host file wins over the guest's own /etc file.
#[test]
fn etc_files_are_the_guests() {
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    let fd = open(&mut p, &mut m, &t.s("allowed/to_root/etc/passwd"), O_RDONLY).unwrap();
    let text = read_all(&mut p, &mut m, fd);
    assert!(text.starts_with(b"root:x:0:0:root:/root:/usr/sbin/nologin\n"));
    let (mut p, mut m) = setup(vec![PathBuf::from("/etc/passwd")]);
    let fd = open(&mut p, &mut m, "/etc/passwd", O_RDONLY).unwrap();
    assert_eq!(
        read_all(&mut p, &mut m, fd),
        std::fs::read("/etc/passwd").unwrap()
            [..4096.min(std::fs::read("/etc/passwd").unwrap().len())]
    );
    let st = stat(&mut p, &mut m, "/etc/passwd", true).unwrap();
    assert_eq!(
        st.ino,
        std::fs::metadata("/etc/passwd")
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .unwrap()
    );
}

/// /proc/sys is the guest's: the settings forkvm keeps, owned by root,
/// read-only; `--allow-read /` does not show the host's /proc (its
/// processes, command line and settings), a root naming /proc/sys does.
#[test]
fn proc_sys_is_the_guests_unless_a_root_names_it() {
    for roots in [vec![], vec![PathBuf::from("/")]] {
        let (mut p, mut m) = setup(roots);
        let read = |p: &mut Process, m: &mut GuestMemory, path: &str| {
            let fd = open(p, m, path, O_RDONLY).unwrap_or_else(|e| panic!("{path}: {e:?}"));
            String::from_utf8(read_all(p, m, fd)).unwrap()
        };
        assert_eq!(read(&mut p, &mut m, "/proc/sys/kernel/ostype"), "Linux\n");
        assert_eq!(
            read(&mut p, &mut m, "/proc/sys/kernel/hostname"),
            format!("{}\n", crate::linux::process::HOSTNAME)
        );
        assert_eq!(
            read(&mut p, &mut m, "/proc/sys/net/core/somaxconn"),
            "4096\n"
        );
        assert!(read(&mut p, &mut m, "/proc/version").contains(crate::linux::sysctl::RELEASE));
        let a = read(&mut p, &mut m, "/proc/sys/kernel/random/uuid");
        let b = read(&mut p, &mut m, "/proc/sys/kernel/random/uuid");
        assert_ne!(a, b);
        let st = stat(&mut p, &mut m, "/proc/sys/vm/overcommit_memory", true).unwrap();
        assert_eq!((st.mode, st.uid, st.size), (S_IFREG | 0o644, 0, 0));
        let st = stat(&mut p, &mut m, "/proc/sys/kernel/random", true).unwrap();
        assert_eq!((st.mode & S_IFMT, st.uid), (S_IFDIR, 0));
        assert_eq!(
            open(&mut p, &mut m, "/proc/sys/vm/overcommit_memory", O_WRONLY),
            Err(Errno::EACCES)
        );
        let d = open(&mut p, &mut m, "/proc/sys", O_RDONLY | O_DIRECTORY).unwrap();
        assert_eq!(
            list(&mut p, &mut m, d),
            [".", "..", "fs", "kernel", "net", "vm"]
        );
        // Nothing of the host's /proc shows.
        for path in ["/proc/cmdline", "/proc/1/status", "/proc/sys/kernel/panic"] {
            assert_eq!(
                stat(&mut p, &mut m, path, true).err(),
                Some(Errno::ENOENT),
                "{path}"
            );
        }
    }
    let (mut p, mut m) = setup(vec![PathBuf::from("/proc/sys/kernel")]);
    let fd = open(&mut p, &mut m, "/proc/sys/kernel/osrelease", O_RDONLY).unwrap();
    let host = std::fs::read("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), host);
}
