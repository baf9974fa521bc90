//! File-system semantics real programs rely on, native vs `forkvm run`:
//! metadata changes under `--allow-write` (gzip, xz, bzip2, tar -x, git),
//! ancestors of the allowed roots (find with the default cwd, stat/listdir
//! of `/`), ENOENT for missing parents, and ownership as the guest sees it.

mod common;

use common::{assert_same, glibc_and_musl, glibc_and_musl_in_a_dir, installed, Case, Run, LIBS};
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8 path").to_string()
}

/// Two scratch copies of the same starting tree: one for the native run, one for forkvm.
struct Pair {
    native: PathBuf,
    vm: PathBuf,
    /// Compare modification times too (only when the program sets them).
    times: bool,
}

impl Pair {
    fn new(name: &str, times: bool, fill: impl Fn(&Path)) -> Self {
        let base = common::scratch_dir(name);
        let (native, vm) = (base.join("native"), base.join("vm"));
        for d in [&native, &vm] {
            std::fs::create_dir_all(d).expect("mkdir");
            fill(d);
        }
        Pair { native, vm, times }
    }

    /// Runs `prog args` with the cwd in each copy (forkvm: writable there,
    /// plus `flags`), asserts the same output and status, then the same
    /// resulting trees.
    fn run(&self, prog: &str, args: &[&str], flags: &[&str]) -> (Run, Run) {
        let case = |dir: &Path, write: bool| {
            let mut f: Vec<String> = LIBS.iter().map(|s| s.to_string()).collect();
            f.extend(["--cwd".into(), s(dir)]);
            if write {
                f.extend(["--allow-write".into(), s(dir)]);
            }
            f.extend(flags.iter().map(|f| f.replace("{dir}", &s(dir))));
            Case::new(prog).args(args.iter().copied()).flags(f)
        };
        let native = case(&self.native, false).run_native();
        let vm_case = case(&self.vm, true);
        let vm = vm_case.run_forkvm();
        assert_same(&vm_case, &native, &vm);
        assert_eq!(
            tree(&self.native, self.times),
            tree(&self.vm, self.times),
            "the trees differ after {prog} {args:?}\n{}",
            vm.describe()
        );
        (native, vm)
    }
}

/// Every entry under `root`: relative path, type, permission bits, size,
/// mtime, link target and content.
fn tree(root: &Path, times: bool) -> Vec<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .expect("read_dir")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for p in entries {
            let md = std::fs::symlink_metadata(&p).expect("lstat");
            let rel = p
                .strip_prefix(root)
                .expect("under root")
                .display()
                .to_string();
            let ft = md.file_type();
            let detail = if ft.is_symlink() {
                format!("-> {}", std::fs::read_link(&p).expect("readlink").display())
            } else if ft.is_dir() {
                todo.push(p.clone());
                String::new()
            } else {
                format!("{:?}", std::fs::read(&p).expect("read"))
            };
            // .git holds index and lock files whose timestamps and bytes
            // record when they were written; compare their presence only.
            let volatile = rel.starts_with(".git/") && !ft.is_dir();
            out.push(if volatile {
                format!("{rel} {:o}", md.mode())
            } else if ft.is_symlink() {
                format!("{rel} {detail}")
            } else {
                // A time set by the program (kept, carried over) is compared
                // exactly; "just now" is compared as such, since the native
                // and forkvm runs may straddle a second boundary.
                let mtime = if ft.is_dir() || !times {
                    "0".to_string()
                } else if (now - md.mtime()).abs() < 600 {
                    "now".to_string()
                } else {
                    md.mtime().to_string()
                };
                format!("{rel} {:o} {} mtime={mtime} {detail}", md.mode(), md.len())
            });
        }
    }
    out.sort();
    out
}

fn numbers(dir: &Path) {
    let text: String = (1..20000).map(|i| format!("{i} {}\n", i * i)).collect();
    std::fs::write(dir.join("data.txt"), text).expect("write");
    // A fixed, old mtime: the compressors must carry it over.
    let f = std::fs::File::options()
        .write(true)
        .open(dir.join("data.txt"))
        .expect("open");
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_500_000_000))
        .expect("set mtime");
    std::fs::set_permissions(
        dir.join("data.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o640),
    )
    .expect("chmod");
}

fn compress_roundtrip(tool: &str, ext: &str) {
    let prog = format!("/usr/bin/{tool}");
    if !installed(&prog) {
        return;
    }
    let pair = Pair::new(&format!("compress-{tool}"), true, numbers);
    // Compress in place: output file with the input's mode and times, input removed.
    pair.run(&prog, &["data.txt"], &[]);
    assert!(pair.vm.join(format!("data.txt.{ext}")).is_file());
    assert!(!pair.vm.join("data.txt").exists());
    // And back.
    pair.run(&prog, &["-d", &format!("data.txt.{ext}")], &[]);
    assert!(pair.vm.join("data.txt").is_file());
}

#[test]
fn gzip_compresses_and_restores_in_a_writable_dir() {
    compress_roundtrip("gzip", "gz");
}

#[test]
fn xz_compresses_and_restores_in_a_writable_dir() {
    compress_roundtrip("xz", "xz");
}

#[test]
fn bzip2_compresses_and_restores_in_a_writable_dir() {
    compress_roundtrip("bzip2", "bz2");
}

#[test]
fn tar_extracts_files_dirs_links_modes_and_times() {
    if !installed("/usr/bin/tar") {
        return;
    }
    let base = common::scratch_dir("tar-src");
    let src = base.join("src");
    std::fs::create_dir_all(src.join("sub/deeper")).expect("mkdir");
    std::fs::write(src.join("sub/f.txt"), "hello\n").expect("write");
    std::fs::write(src.join("sub/deeper/x.sh"), "#!/bin/sh\n").expect("write");
    std::fs::write(src.join("top"), "top\n").expect("write");
    std::os::unix::fs::symlink("sub/f.txt", src.join("link")).expect("symlink");
    std::fs::hard_link(src.join("top"), src.join("hard")).expect("link");
    use std::os::unix::fs::PermissionsExt;
    for (p, m) in [
        ("sub/f.txt", 0o640),
        ("sub/deeper/x.sh", 0o755),
        ("top", 0o604),
    ] {
        std::fs::set_permissions(src.join(p), std::fs::Permissions::from_mode(m)).expect("chmod");
    }
    let archive = base.join("a.tar");
    let st = std::process::Command::new("tar")
        .args(["--mtime=2021-02-03 04:05:06", "-C"])
        .arg(&src)
        .args(["-cf"])
        .arg(&archive)
        .arg(".")
        .status()
        .expect("tar");
    assert!(st.success());
    let pair = Pair::new("tar-x", true, |_| {});
    let a = s(&archive);
    // --no-same-owner: the native run is as the host user (root in CI), which
    // would otherwise try to restore the archive's owners.
    pair.run(
        "/usr/bin/tar",
        &["--no-same-owner", "-xf", &a],
        &["--allow-read", &a, "--env", "TZ=UTC"],
    );
    assert!(pair.vm.join("sub/deeper/x.sh").is_file());
    assert_eq!(
        std::fs::metadata(pair.vm.join("hard")).expect("stat").ino(),
        std::fs::metadata(pair.vm.join("top")).expect("stat").ino()
    );
}

#[test]
fn git_init_add_commit_in_a_writable_dir() {
    if !installed("/usr/bin/git") {
        return;
    }
    let pair = Pair::new("git", false, |d| {
        std::fs::write(d.join("a.txt"), "hello\n").expect("write");
        std::fs::create_dir(d.join("src")).expect("mkdir");
        std::fs::write(d.join("src/b.txt"), "world\n").expect("write");
    });
    let env: Vec<String> = [
        "HOME={dir}",
        "GIT_AUTHOR_NAME=t",
        "GIT_AUTHOR_EMAIL=t@example.org",
        "GIT_COMMITTER_NAME=t",
        "GIT_COMMITTER_EMAIL=t@example.org",
        "GIT_AUTHOR_DATE=2020-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z",
        "GIT_CONFIG_NOSYSTEM=1",
    ]
    .iter()
    .flat_map(|kv| ["--env".to_string(), kv.to_string()])
    .collect();
    let mut flags: Vec<&str> = env.iter().map(String::as_str).collect();
    flags.extend(["--allow-read", "/usr/share/git-core"]);
    // No background maintenance: it would fork.
    let git = |args: &[&str]| {
        let mut all = vec!["-c", "maintenance.auto=false", "-c", "gc.auto=0"];
        all.extend_from_slice(args);
        pair.run("/usr/bin/git", &all, &flags)
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "a.txt", "src"]);
    git(&["commit", "-q", "-m", "first"]);
    let (_, vm) = git(&["log", "--format=%H %an %s"]);
    assert!(vm.stdout_str().ends_with(" t first\n"), "{}", vm.describe());
    git(&["status", "--porcelain"]);
    git(&["cat-file", "-p", "HEAD^{tree}"]);
}

/// A program run natively and under forkvm with the same flags (cwd `/` unless given).
fn same(prog: &str, args: &[&str], flags: &[String]) -> (Run, Run) {
    let mut f: Vec<String> = LIBS.iter().map(|s| s.to_string()).collect();
    f.extend(flags.iter().cloned());
    common::check(&Case::new(prog).args(args.iter().copied()).flags(f))
}

#[test]
fn find_with_the_default_cwd() {
    if !installed("/usr/bin/find") {
        return;
    }
    let dir = common::scratch_dir("find");
    std::fs::create_dir_all(dir.join("a/b")).expect("mkdir");
    std::fs::write(dir.join("a/b/f"), "x").expect("write");
    std::fs::write(dir.join("g"), "yy").expect("write");
    let d = s(&dir);
    // find saves and restores its starting directory, "/": it must be a directory.
    same(
        "/usr/bin/find",
        &[&d, "-printf", "%y %s %P\n"],
        &["--allow-read".into(), d.clone()],
    );
    same(
        "/usr/bin/find",
        &[
            &d,
            "-name",
            "f",
            "-newer",
            &format!("{d}/g"),
            "-o",
            "-type",
            "d",
            "-print",
        ],
        &["--allow-read".into(), d.clone()],
    );
}

/// The ancestors of `p`, from "/" down to its parent.
fn ancestors(p: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = p.ancestors().skip(1).map(Path::to_path_buf).collect();
    v.reverse();
    v
}

const PY: &str = "/usr/bin/python3";

#[test]
fn ancestors_of_allowed_roots_are_directories() {
    if !installed(PY) {
        return;
    }
    let dir = common::scratch_dir("ancestors");
    std::fs::write(dir.join("f.txt"), "data").expect("write");
    let d = s(&dir);
    // Natively and in forkvm alike: each ancestor is a directory (stat,
    // lstat, open as O_PATH and O_DIRECTORY agree on its inode), readlink
    // says EINVAL, and its listing contains the way down.
    let script = r#"
import os, sys, errno, stat
target = sys.argv[1]
parts = target.strip("/").split("/")
for i in range(len(parts)):
    a = "/" + "/".join(parts[:i])
    st, lst = os.stat(a), os.lstat(a)
    fd = os.open(a, os.O_PATH)
    dfd = os.open(a, os.O_RDONLY | os.O_DIRECTORY)
    same = st.st_ino == lst.st_ino == os.fstat(fd).st_ino == os.fstat(dfd).st_ino
    os.close(fd); os.close(dfd)
    try:
        os.readlink(a); rl = "link"
    except OSError as e:
        rl = errno.errorcode[e.errno]
    print(a, stat.S_ISDIR(lst.st_mode), same, rl, parts[i] in os.listdir(a), os.access(a, os.R_OK | os.X_OK))
print(os.path.realpath(target + "/f.txt") == target + "/f.txt", open(target + "/f.txt").read())
print(os.stat(target).st_uid == os.getuid(), os.stat(target).st_gid == os.getgid())
os.chdir("/")
print(os.getcwd(), sorted(os.listdir(".")) == sorted(os.listdir("/")))
"#;
    same(
        PY,
        &["-S", "-c", script, &d],
        &["--allow-read".into(), d.clone()],
    );
    // In forkvm the listings hold only the way to the roots: nothing else leaks.
    let parents = ancestors(&dir);
    let parent = parents.last().expect("parent");
    let run = common::forkvm(
        &[
            &["run"],
            LIBS,
            &[
                "--allow-read",
                &d,
                "--",
                PY,
                "-S",
                "-c",
                "import sys, os\nfor a in sys.argv[1:]: print(a, ','.join(sorted(os.listdir(a))))",
                "/",
                "/etc",
                parent.to_str().expect("utf-8"),
            ],
        ]
        .concat(),
    );
    assert_eq!(run.status, 0, "{}", run.describe());
    // The allowed roots and the private /tmp and /dev/shm.
    let roots: Vec<PathBuf> = ["/lib", "/usr/lib", "/lib64", "/etc/ld.so.cache", &d]
        .iter()
        .map(|r| std::fs::canonicalize(r).expect("canonical root"))
        .chain([PathBuf::from("/tmp"), PathBuf::from("/dev/shm")])
        .collect();
    let expect = |a: &Path| -> BTreeSet<String> {
        roots
            .iter()
            .filter_map(|r| r.strip_prefix(a).ok())
            .filter_map(|rest| rest.components().next())
            .map(|c| c.as_os_str().to_str().expect("utf-8").to_string())
            .collect()
    };
    let out = run.stdout_str();
    let parent = ancestors(&dir).pop().expect("parent");
    for (line, a) in out
        .lines()
        .zip([PathBuf::from("/"), PathBuf::from("/etc"), parent])
    {
        let want: Vec<String> = expect(&a).into_iter().collect();
        let want = format!("{} {}", a.display(), want.join(","));
        assert_eq!(line, want, "{}", run.describe());
    }
    assert_eq!(out.lines().count(), 3, "{}", run.describe());
}

#[test]
fn creating_under_a_missing_parent_is_enoent() {
    if !installed(PY) {
        return;
    }
    let script = r#"
import os, errno
open("f", "w").write("x")
def t(name, fn):
    try:
        fn(); print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
t("open-creat", lambda: open("missing/x", "w"))
t("mkdir", lambda: os.mkdir("missing/b"))
t("mkdir-p-parent", lambda: os.mkdir("missing/b/c"))
t("symlink", lambda: os.symlink("f", "missing/l"))
t("link", lambda: os.link("f", "missing/h"))
t("rename", lambda: os.rename("f", "missing/g"))
t("mknod", lambda: os.mknod("missing/n", 0o600))
t("mkdir-exists", lambda: os.mkdir("."))
t("mkdir-parent-exists", lambda: os.mkdir(".."))
t("rename-missing", lambda: os.rename("nothing", "g"))
t("unlink-missing", lambda: os.unlink("nothing"))
t("chmod-missing", lambda: os.chmod("nothing", 0o600))
t("utime-missing", lambda: os.utime("nothing"))
t("file-as-dir", lambda: os.mkdir("f/sub"))
os.mkdir("missing"); t("retry", lambda: open("missing/x", "w").write("y"))
os.chmod("f", 0o600); os.utime("f", (1000000, 2000000)); os.chown("f", os.getuid(), os.getgid())
os.symlink("f", "l"); os.link("f", "h")
st = os.stat("f")
print(oct(st.st_mode), st.st_mtime, st.st_size, st.st_nlink, st.st_uid == os.getuid())
os.truncate("h", 0); print(os.stat("f").st_size)
print(os.access("f", os.W_OK), os.readlink("l"))
"#;
    let pair = Pair::new("enoent", false, |_| {});
    pair.run(PY, &["-S", "-c", script], &[]);
}

#[test]
fn private_tmp_and_dev_shm_work_like_the_hosts() {
    if !installed(PY) {
        return;
    }
    // The same work natively (in the host's /tmp) and in forkvm (in the
    // VM's private /tmp), in a directory of its own that it removes again.
    let script = r#"
import os, sys, mmap, stat
for top in ("/tmp", "/dev/shm"):
    d = os.path.join(top, sys.argv[1])
    os.mkdir(d, 0o700)
    with open(d + "/a.txt", "w") as f:
        f.write("0123456789" * 1000)
    os.mkdir(d + "/sub")
    os.rename(d + "/a.txt", d + "/sub/b.txt")
    st = os.stat(d + "/sub/b.txt")
    print(top, sorted(os.listdir(d)), os.listdir(d + "/sub"), st.st_size, stat.S_ISREG(st.st_mode),
          st.st_uid == os.getuid(), oct(os.stat(d).st_mode))
    with open(d + "/sub/b.txt", "r+b") as f:
        m = mmap.mmap(f.fileno(), 0, mmap.MAP_PRIVATE)
        print(m[5:15], len(m), m.find(b"9012"))
        m.close()
    fd = os.open(d + "/t", os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
    os.write(fd, b"abc"); os.ftruncate(fd, 10); os.lseek(fd, 0, 0)
    print(os.read(fd, 100), os.fstat(fd).st_size); os.close(fd)
    os.unlink(d + "/t"); os.unlink(d + "/sub/b.txt"); os.rmdir(d + "/sub"); os.rmdir(d)
    print(os.path.exists(d), stat.S_ISDIR(os.stat(top).st_mode))
"#;
    let name = format!("forkvm-fs-semantics-{}", std::process::id());
    same(PY, &["-S", "-c", script, &name], &[]);
}

#[test]
fn each_run_has_its_own_private_tmp() {
    if !installed(PY) {
        return;
    }
    let run = |code: &str| {
        let mut args: Vec<&str> = vec!["run"];
        args.extend_from_slice(LIBS);
        args.extend(["--", PY, "-S", "-c", code]);
        let r = common::forkvm(&args);
        assert_eq!(r.status, 0, "{}", r.describe());
        r.stdout_str()
    };
    assert_eq!(
        run("open('/tmp/left-behind', 'w').write('x'); import os; print(os.listdir('/tmp'))"),
        "['left-behind']\n"
    );
    // Nothing of the first run remains, neither in the next VM nor on the host.
    assert_eq!(
        run("import os; print(os.listdir('/tmp'), os.listdir('/dev/shm'))"),
        "[] []\n"
    );
    assert!(!Path::new("/tmp/left-behind").exists());
    // Private trees belong to live forkvm processes only: none is left behind.
    let leftovers: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    let pid = n
                        .strip_prefix("forkvm-tmp-")
                        .and_then(|r| r.split('-').next());
                    pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists())
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn coreutils_change_files_in_a_writable_dir() {
    if !installed("/usr/bin/sed") {
        return;
    }
    let pair = Pair::new("coreutils", true, |d| {
        std::fs::write(d.join("f"), "hello world\n").expect("write");
        let f = std::fs::File::options()
            .write(true)
            .open(d.join("f"))
            .expect("open");
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000))
            .expect("set mtime");
    });
    for cmd in [
        &["/usr/bin/cp", "-a", "f", "copy"][..],
        &["/usr/bin/sed", "-i", "s/world/there/", "copy"],
        &["/usr/bin/mkdir", "-p", "a/b/c"],
        &["/usr/bin/touch", "-d", "2001-02-03 04:05:06", "a/b/c/t"],
        &["/usr/bin/chmod", "-R", "go-rwx", "a"],
        &["/usr/bin/install", "-m", "600", "f", "a/inst"],
        &["/usr/bin/ln", "-s", "../f", "a/sl"],
        &["/usr/bin/touch", "-h", "-d", "2002-01-01", "a/sl"],
        &["/usr/bin/mv", "a/b", "moved"],
        // (Not u+s: forkvm drops set-user-ID bits on host files, see
        // docs/security.md; `linux/fs/tests/write.rs` checks that.)
        &["/usr/bin/chmod", "g+r,o+x", "a/inst"],
        &["/usr/bin/truncate", "-s", "3", "a/inst"],
        &["/usr/bin/rm", "-r", "moved"],
    ] {
        pair.run(cmd[0], &cmd[1..], &["--env", "TZ=UTC"]);
    }
}

/// File mappings coherent with their file as on Linux: a read-only
/// MAP_SHARED mapping and an untouched MAP_PRIVATE one show later writes to
/// the file, their last partial page too (it was a stale copy); a MAP_SHARED
/// mapping longer than its file reaches the file once the file grows (stores
/// there were lost); MADV_DONTNEED on a private file mapping reads the file
/// again (it zeroed it); and an access past the end of a file that shrank
/// under its mapping is a SIGBUS the program catches (it ended the run with
/// "KVM RUN failed: Bad address").
#[test]
fn file_mappings_follow_the_file() {
    glibc_and_musl_in_a_dir("file_mappings");
}

/// flock and fcntl record locks exclude between the run's processes (they
/// were all granted: four processes adding to a counter under flock lost
/// about half the additions, and concurrent sqlite3 writers corrupted
/// their updates), with POSIX and OFD ownership rules and waiting locks.
#[test]
fn file_locks_exclude_between_processes() {
    glibc_and_musl_in_a_dir("file_locks");
}

/// memfd_create: MFD_CLOEXEC and MFD_ALLOW_SEALING, fstat, read/write,
/// ftruncate, MAP_SHARED and MAP_PRIVATE mappings, seals (F_ADD_SEALS,
/// F_GET_SEALS, what they forbid), reopening through /proc/self/fd and its
/// link "/memfd:NAME (deleted)" (it was ENOSYS).
#[test]
fn memfd_create_files_map_and_seal() {
    glibc_and_musl("memfd");
}

/// open(O_TMPFILE) in /dev/shm: an unnamed file, read and written, linked
/// as "DIR/#INODE (deleted)", with O_EXCL; the refused uses (it was EACCES).
#[test]
fn o_tmpfile_makes_an_unnamed_file() {
    glibc_and_musl("tmpfile");
}

/// readlink of /proc/self/fd/N for files, directories, deleted files,
/// pipes, sockets, devices and eventfds; /dev/stdin and /dev/fd; the
/// /proc/self/cwd link read and followed; /proc/self/exe (links were
/// EINVAL, /proc/self/cwd did not exist).
#[test]
fn proc_self_fd_and_cwd_links_read_as_on_linux() {
    glibc_and_musl("fd_links");
}

/// Symlinks in the paths of calls that create and remove names resolve as on
/// Linux: open(O_CREAT) through a dangling link creates its target (it was
/// ELOOP), and a ".." after a link leaves the link's target, not the link's
/// directory (mkdir and unlink applied it to the text: "a/../x" with
/// a -> b/c made ./x instead of b/x). An empty name is ENOENT (unlink("")
/// was EROFS or EISDIR, mkdir("") EEXIST: LTP's unlink07).
#[test]
fn symlinks_in_created_and_removed_paths() {
    glibc_and_musl_in_a_dir("symlink_paths");
}

/// The guest's generated files stat as Linux's: /proc/self/status,
/// /proc/meminfo and the rest are regular files of mode 0444 and size 0 for
/// stat, lstat, fstatat, statx, access and faccessat (they were ENOENT
/// though open and read worked, so python's os.path.exists said False), the
/// synthetic /etc files are regular files, /proc, /proc/self, its fd and
/// task are directories (and /proc/self a link), /proc/self lists what it
/// has; devices are known by the resolved path (/dev/./null, //dev//zero, a
/// symlink to /dev/null) with Linux's device numbers.
#[test]
fn synthetic_files_and_devices_stat_as_on_linux() {
    glibc_and_musl("synthetic_stat");
}

/// A directory descriptor and the working directory follow their directory
/// when it is renamed, as on Linux: after open("d", O_DIRECTORY) and
/// rename("d", "e"), openat(fd, "f") finds e/f (it was ENOENT: the
/// descriptor was only the text "d"), and getcwd, relative paths and fchdir
/// find a working directory renamed from inside.
#[test]
fn directory_descriptors_and_cwd_follow_renames() {
    glibc_and_musl_in_a_dir("dir_moves");
}

/// Directory permissions hold for the guest's unprivileged uid as on Linux:
/// creating, removing or renaming a name needs write and search permission
/// on its directory, every lookup needs search permission on the way, and
/// listing a directory or reading a file needs read permission (the host
/// user, root here, was allowed all of it: python's rmtree and tempfile
/// tests saw no EACCES).
#[test]
fn directory_permissions_hold_for_the_guest_user() {
    glibc_and_musl_in_a_dir("dir_perms");
}

/// A child closing every descriptor it finds in /proc/self/fd while it
/// reads the listing (python's subprocess with close_fds and pass_fds)
/// finds them all: the listing went by index, so each close skipped an
/// entry (test_subprocess.test_pass_fds saw four descriptors passed).
#[test]
fn closing_descriptors_while_listing_proc_self_fd_skips_none() {
    glibc_and_musl("fd_listing");
}

/// A working directory whose name is not UTF-8 works as on Linux: chdir,
/// getcwd, relative paths, and exec keeps it (chdir was ENOENT: the cwd was
/// kept as text; python's test_posixpath.test_nonascii_abspath).
#[test]
fn a_working_directory_may_have_any_bytes_in_its_name() {
    glibc_and_musl_in_a_dir("odd_cwd");
}

/// copy_file_range between /dev/shm files and between memfds: offsets
/// taken from pointers or the files and advanced, 0 at the end, overlap in
/// one file, EXDEV from a memfd to /dev/shm, and the EINVAL, EBADF, EISDIR,
/// EFAULT and EOVERFLOW cases (it was ENOSYS).
#[test]
fn copy_file_range_as_on_linux() {
    glibc_and_musl("copy_range");
}

/// inotify on a directory in /dev/shm and on a file: the events of the
/// program's own create, write, close, chmod, ftruncate, rename (with its
/// cookie), mkdir, rmdir and unlink, IN_IGNORED after inotify_rm_watch,
/// poll and epoll readiness, a too-small read buffer, and the errors (they
/// were ENOSYS).
#[test]
fn inotify_reports_the_programs_changes() {
    glibc_and_musl("inotify");
}

/// sync, syncfs and sync_file_range on files, directories, pipes, sockets
/// and /dev/null, with Linux's errors in its order (they were ENOSYS, and
/// coreutils' `sync -f FILE` failed).
#[test]
fn sync_calls_as_on_linux() {
    glibc_and_musl_in_a_dir("sync_calls");
}

/// chmod, chown and utimensat of /proc/self/fd/N change the file or
/// directory open there (they were EPERM), so glibc's and musl's fchmodat
/// with AT_SYMLINK_NOFOLLOW work, and GNU `tar -xp` no longer fails setting
/// its directories' modes; a symlink's is EOPNOTSUPP.
#[test]
fn chmod_through_proc_self_fd() {
    glibc_and_musl_in_a_dir("fd_path_chmod");
}

/// The mount table exists: /proc/self/mounts and /proc/mounts list a file
/// system at /, and /proc/self/mountinfo opens (they were ENOENT, and df
/// failed: "cannot read table of mounted file systems").
#[test]
fn mount_table_lists_the_root() {
    glibc_and_musl("mount_table");
}

/// A removed working directory or directory descriptor: getcwd is ENOENT
/// (node's process.cwd() gave the old path) and no name is found or made
/// in it, not even once a directory of the same name is made again (files
/// went into that new directory); `..` still leads out.
#[test]
fn a_removed_directory_is_no_place_for_names() {
    glibc_and_musl_in_a_dir("removed_dirs");
}

/// ioctl FICLONE and FICLONERANGE between /dev/shm files: EOPNOTSUPP after
/// Linux's checks in its order (it was ENOTTY, which node's
/// COPYFILE_FICLONE_FORCE reported instead of ENOTSUP).
#[test]
fn file_clone_ioctls_as_on_a_filesystem_without_shared_extents() {
    glibc_and_musl("file_clone");
}

#[test]
fn a_script_kept_in_the_hosts_tmp_still_has_a_private_tmp() {
    if !installed(PY) {
        return;
    }
    // A newcomer's script in the host's /tmp: allowing it mounts it in the
    // VM's private /tmp, which stays writable (python's tempfile needs it)
    // and shows nothing else of the host's.
    let dir = Path::new("/tmp").join(format!("forkvm-script-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::write(dir.join("neighbour.txt"), "not allowed").expect("write");
    let script = dir.join("t.py");
    std::fs::write(
        &script,
        r#"
import os, sys, tempfile
here = os.path.dirname(sys.argv[0])
with tempfile.NamedTemporaryFile(dir="/tmp", prefix="made-", delete=False) as f:
    f.write(b"private")
print(open(f.name).read(), os.path.dirname(f.name))
print(sorted(n for n in os.listdir("/tmp") if not n.startswith("made-")), os.listdir(here))
print(os.path.exists(os.path.join(here, "neighbour.txt")))
try:
    os.unlink(sys.argv[0])
except OSError as e:
    print("unlink", e.errno)
"#,
    )
    .expect("write");
    let mut args: Vec<String> = vec!["run".into()];
    args.extend(LIBS.iter().map(|s| s.to_string()));
    args.extend(["--allow-read".into(), s(&script), "--".into(), PY.into()]);
    args.extend(["-S".into(), s(&script)]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = common::forkvm(&args);
    let name = dir.file_name().and_then(|n| n.to_str()).expect("name");
    let want = format!("private /tmp\n['{name}'] ['t.py']\nFalse\nunlink 16\n");
    assert_eq!(r.stdout_str(), want, "{}", r.describe());
    assert_eq!(r.status, 0, "{}", r.describe());
    // Nothing reached the host's /tmp, and the script is still there.
    let made = std::fs::read_dir("/tmp")
        .expect("read /tmp")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("made-"))
        .count();
    assert!(script.is_file());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(made, 0);
}

#[test]
fn reading_the_whole_host_still_gives_a_private_writable_tmp() {
    if !installed(PY) || !installed("/usr/bin/sort") {
        return;
    }
    // `--allow-read /` is the newcomer's "let it read anything". Programs
    // then still need a writable /tmp and /dev/shm: sort spills to /tmp,
    // multiprocessing's locks are POSIX semaphores in /dev/shm, tempfile
    // picks /tmp. Natively and in forkvm the same.
    let script = r#"
import multiprocessing, subprocess, tempfile, hashlib
lines = "".join("%d\n" % (i * 7919 % 100003) for i in range(150000)).encode()
out = subprocess.run(["/usr/bin/sort", "-n", "-S", "64K"], input=lines, capture_output=True)
print(out.returncode, out.stderr, hashlib.sha256(out.stdout).hexdigest()[:16])
with tempfile.TemporaryDirectory() as d:
    print(d.startswith("/tmp/"))
if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        print(sum(pool.map(abs, range(-500, 500))))
"#;
    same(
        PY,
        &["-S", "-c", script],
        &["--allow-read".into(), "/".into()],
    );
}
