//! The synthetic part of the namespace: emulated devices, the guest's own
//! /proc and the guest's /etc files (see `procfs`). These are names the
//! walker (`path::walk_inner`) meets on the *canonical* path it has built,
//! after `.`, `..` and symlinks, so `/dev/./null`, `//dev//null`, a link
//! to /dev/null and `/proc/self/../self/status` are all recognised, and they
//! stat, list and open as the same objects would on Linux.

use super::*;

/// A synthetic object, by its canonical guest path.
#[derive(Clone)]
pub(super) enum Node {
    /// An emulated device node.
    Dev(Dev),
    /// A generated read-only file (`procfs::synthesize` makes its contents).
    File(Generated),
    /// A directory whose entries are [`list`]ed.
    Dir,
    /// A symbolic link whose target is resolved again in the guest namespace.
    Link(Vec<u8>),
    /// `/proc/self/fd/N`: reads as what N is; following it reaches the open file.
    FdLink(i32),
    /// `/proc/self/exe`: reads as the program's path; following it reaches the program.
    ExeLink,
    /// What following `/proc/self/exe` reaches.
    Exe,
    /// What following `/proc/self/fd/N` reaches: the open file itself.
    Open(FileRef),
}

/// A generated file: /proc's are mode 0444 with size 0 (as Linux shows
/// them), the /etc ones 0644 with their length.
#[derive(Clone, Copy)]
pub(super) struct Generated {
    pub(super) mode: u32,
    pub(super) size: i64,
    /// Owned by root (the guest's uid otherwise).
    pub(super) root_owned: bool,
}

/// The files of a process directory (`/proc/<pid>` and `/proc/<pid>/task/<tid>`).
const PROCESS_FILES: &[&[u8]] = &[
    b"cmdline",
    b"comm",
    b"maps",
    b"mountinfo",
    b"mounts",
    b"stat",
    b"statm",
    b"status",
];
/// The files of another process's directory (see `child::shown`).
const OTHER_PROCESS_FILES: &[&[u8]] = &[b"cmdline", b"comm", b"stat", b"status"];
/// The files directly in /proc.
const PROC_FILES: &[&[u8]] = &[
    b"cpuinfo", b"loadavg", b"meminfo", b"stat", b"uptime", b"version",
];
/// The /etc files the guest may be given (see `procfs::etc_file`).
const ETC_FILES: &[&[u8]] = &[b"group", b"hosts", b"nsswitch.conf", b"passwd"];

const PROC_FILE: Generated = Generated {
    mode: S_IFREG | 0o444,
    size: 0,
    root_owned: false,
};

/// The ids of the process's threads, the running one first.
fn tids(p: &Process) -> Vec<u64> {
    let mut out = vec![p.tid];
    out.extend(p.threads.others.iter().map(|t| t.tid));
    out
}

fn split_first(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().position(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (path, b""),
    }
}

/// What the canonical guest path `path` names in the synthetic namespace.
pub(super) fn node(p: &Process, path: &[u8]) -> Option<Node> {
    if let Some(rest) = path.strip_prefix(b"/dev/") {
        return dev_node(p, rest);
    }
    if path == b"/proc" {
        return Some(Node::Dir);
    }
    if let Some(rest) = path.strip_prefix(b"/proc/") {
        return proc_node(p, rest);
    }
    if path == b"/etc" {
        return Some(Node::Dir);
    }
    if crate::linux::procfs::cpu_list(path).is_some() {
        // sysfs shows its attributes as a page long.
        return Some(Node::File(Generated {
            mode: S_IFREG | 0o444,
            size: 4096,
            root_owned: true,
        }));
    }
    let size = crate::linux::procfs::etc_file(p, path)?.len();
    Some(Node::File(Generated {
        mode: S_IFREG | 0o644,
        size: size as i64,
        root_owned: true,
    }))
}

fn dev_node(p: &Process, name: &[u8]) -> Option<Node> {
    if let Some(n) = name.strip_prefix(b"pts/") {
        let index: u32 = std::str::from_utf8(n).ok()?.parse().ok()?;
        if index.to_string().as_bytes() != n || !crate::linux::pty::slave_exists(p, index) {
            return None;
        }
        return Some(Node::Dev(Dev::Pts(index)));
    }
    Some(match name {
        b"ptmx" => Node::Dev(Dev::Ptmx),
        b"tty" => Node::Dev(Dev::Tty),
        b"pts" => Node::Dir,
        b"null" => Node::Dev(Dev::Null),
        b"zero" => Node::Dev(Dev::Zero),
        b"urandom" => Node::Dev(Dev::Urandom),
        b"random" => Node::Dev(Dev::Random),
        b"stdin" => Node::Link(b"/proc/self/fd/0".to_vec()),
        b"stdout" => Node::Link(b"/proc/self/fd/1".to_vec()),
        b"stderr" => Node::Link(b"/proc/self/fd/2".to_vec()),
        b"fd" => Node::Link(b"/proc/self/fd".to_vec()),
        _ => return None,
    })
}

fn proc_node(p: &Process, rest: &[u8]) -> Option<Node> {
    let pid = crate::linux::child::pid_of(p).to_string();
    match rest {
        b"self" => return Some(Node::Link(pid.into_bytes())),
        b"thread-self" => return Some(Node::Link(format!("{pid}/task/{}", p.tid).into_bytes())),
        b"mounts" => return Some(Node::Link(b"self/mounts".to_vec())),
        r if PROC_FILES.contains(&r) => {
            return Some(Node::File(Generated {
                root_owned: true,
                ..PROC_FILE
            }))
        }
        b"sys" | b"net" => return Some(Node::Dir),
        b"net/if_inet6" => {
            return Some(Node::File(Generated {
                root_owned: true,
                ..PROC_FILE
            }))
        }
        r => {
            if let Some(sys) = r.strip_prefix(b"sys/") {
                if host_proc_shown(p, rest) {
                    return None;
                }
                return match crate::linux::sysctl::kind(sys)? {
                    true => Some(Node::Dir),
                    // Settings show as 0644 (root may write them), sized 0.
                    false => Some(Node::File(Generated {
                        mode: S_IFREG | 0o644,
                        root_owned: true,
                        ..PROC_FILE
                    })),
                };
            }
        }
    }
    let (first, rest) = split_first(rest);
    if first != pid.as_bytes() {
        return other_process_node(p, first, rest);
    }
    if rest.is_empty() {
        return Some(Node::Dir);
    }
    // A thread's directory holds what its process's does, but its threads.
    if let Some(task) = rest.strip_prefix(b"task") {
        if task.is_empty() {
            return Some(Node::Dir);
        }
        let (tid, inner) = split_first(task.strip_prefix(b"/")?);
        let tid: u64 = std::str::from_utf8(tid).ok()?.parse().ok()?;
        if !tids(p).contains(&tid) {
            return None;
        }
        if inner.is_empty() {
            return Some(Node::Dir);
        }
        if inner.starts_with(b"task") {
            return None;
        }
        return process_node(p, inner);
    }
    process_node(p, rest)
}

/// Whether `/proc/<rest>` is the host's: a root names /proc or a path
/// below it that holds this one (`--allow-read /proc/sys`). A root above
/// /proc (`--allow-read /`) does not show the host's (see `walk`).
fn host_proc_shown(p: &Process, rest: &[u8]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let path = [b"/proc/".as_slice(), rest].concat();
    let path = std::path::Path::new(std::ffi::OsStr::from_bytes(&path));
    p.policy
        .allow_read
        .iter()
        .any(|root| root.starts_with("/proc") && path.starts_with(root))
}

/// A name in the directory of another process of the run: what it
/// published (see `child::shown`), never its memory or files.
fn other_process_node(p: &Process, pid: &[u8], rest: &[u8]) -> Option<Node> {
    let n: u64 = std::str::from_utf8(pid).ok()?.parse().ok()?;
    if n.to_string().as_bytes() != pid {
        return None;
    }
    let seen = crate::linux::child::seen(p, n)?;
    match rest {
        b"" => Some(Node::Dir),
        r if OTHER_PROCESS_FILES.contains(&r) => Some(Node::File(PROC_FILE)),
        // A zombie's program link reads as nothing (ENOENT).
        b"exe" if !seen.zombie && !seen.shown.exe.is_empty() => {
            Some(Node::Link(seen.shown.exe.into_bytes()))
        }
        _ => None,
    }
}

/// A name inside a process directory.
fn process_node(p: &Process, rest: &[u8]) -> Option<Node> {
    match rest {
        r if PROCESS_FILES.contains(&r) => Some(Node::File(PROC_FILE)),
        b"exe" => Some(Node::ExeLink),
        b"cwd" => Some(Node::Link(cwd_path(p))),
        b"fd" => Some(Node::Dir),
        r => {
            let n = parse_fd(r.strip_prefix(b"fd/")?)?;
            // "07" is not fd 7.
            if n.to_string().as_bytes() != r.strip_prefix(b"fd/")? {
                return None;
            }
            p.fds.get(n).ok().map(|_| Node::FdLink(n))
        }
    }
}

/// The content path `procfs::synthesize` knows a generated file by: a
/// thread's files are its process's.
pub(super) fn content_path(p: &Process, path: &[u8]) -> Vec<u8> {
    let pid = crate::linux::child::pid_of(p);
    let prefix = format!("/proc/{pid}/task/");
    if let Some(rest) = path.strip_prefix(prefix.as_bytes()) {
        let (_, inner) = split_first(rest);
        return [format!("/proc/{pid}/").as_bytes(), inner].concat();
    }
    path.to_vec()
}

/// The text a synthetic link reads as.
pub(super) fn link_text(p: &Process, node: &Node) -> Option<Vec<u8>> {
    match node {
        Node::Link(t) => Some(t.clone()),
        Node::ExeLink => Some(p.exe_path.as_bytes().to_vec()),
        Node::FdLink(n) => {
            let f = p.fds.get(*n).ok()?;
            let mut f = lock(&f);
            // A directory renamed since it was opened reads as where it is now.
            if let FileKind::Dir { fd, path } = &mut f.kind {
                if let Some(now) = fresh_path(p, fd, path) {
                    *path = now;
                }
            }
            Some(crate::linux::procfs::fd_link(p, &f))
        }
        _ => None,
    }
}

/// The entries of the synthetic directory `dir`, as (name, d_type), without `.` and `..`.
pub(super) fn list(p: &Process, dir: &[u8]) -> Vec<(Vec<u8>, u8)> {
    let names = |names: &[&[u8]], ty: u8| -> Vec<(Vec<u8>, u8)> {
        names.iter().map(|n| (n.to_vec(), ty)).collect()
    };
    let pid = crate::linux::child::pid_of(p).to_string();
    if dir == b"/etc" {
        return ETC_FILES
            .iter()
            .filter(|n| node(p, &join(dir, n)).is_some())
            .map(|n| (n.to_vec(), DT_REG))
            .collect();
    }
    if dir == b"/proc" {
        let mut out = names(PROC_FILES, DT_REG);
        out.push((b"sys".to_vec(), DT_DIR));
        out.push((b"net".to_vec(), DT_DIR));
        out.push((b"mounts".to_vec(), DT_LNK));
        out.push((b"self".to_vec(), DT_LNK));
        out.push((b"thread-self".to_vec(), DT_LNK));
        for n in crate::linux::child::pids(p) {
            out.push((n.to_string().into_bytes(), DT_DIR));
        }
        if !out.iter().any(|(n, _)| n == pid.as_bytes()) {
            out.push((pid.into_bytes(), DT_DIR));
        }
        return out;
    }
    if dir == b"/dev/pts" {
        return crate::linux::pty::listing(p)
            .into_iter()
            .map(|n| (n.to_string().into_bytes(), DT_CHR))
            .collect();
    }
    if dir == b"/proc/net" {
        return vec![(b"if_inet6".to_vec(), DT_REG)];
    }
    if let Some(sys) = dir
        .strip_prefix(b"/proc/sys")
        .and_then(|r| r.strip_prefix(b"/").or(r.is_empty().then_some(r)))
    {
        return crate::linux::sysctl::list(sys)
            .into_iter()
            .map(|(n, d)| (n, if d { DT_DIR } else { DT_REG }))
            .collect();
    }
    let own = format!("/proc/{pid}");
    let Some(rest) = dir
        .strip_prefix(own.as_bytes())
        .filter(|r| r.is_empty() || r.starts_with(b"/"))
    else {
        return other_process_list(p, dir);
    };
    let (rest, in_task) = match rest.strip_prefix(b"/task/") {
        Some(t) => (split_first(t).1, true),
        None => (rest.strip_prefix(b"/").unwrap_or(rest), false),
    };
    match rest {
        b"" => {
            let mut out = names(PROCESS_FILES, DT_REG);
            out.extend(names(&[b"cwd", b"exe"], DT_LNK));
            out.push((b"fd".to_vec(), DT_DIR));
            if !in_task {
                out.push((b"task".to_vec(), DT_DIR));
            }
            out
        }
        b"fd" => p
            .fds
            .open_fds()
            .into_iter()
            .map(|n| (n.to_string().into_bytes(), DT_LNK))
            .collect(),
        b"task" if !in_task => tids(p)
            .into_iter()
            .map(|t| (t.to_string().into_bytes(), DT_DIR))
            .collect(),
        _ => Vec::new(),
    }
}

/// The entries of another process's directory.
fn other_process_list(p: &Process, dir: &[u8]) -> Vec<(Vec<u8>, u8)> {
    let Some(pid) = dir.strip_prefix(b"/proc/") else {
        return Vec::new();
    };
    if !matches!(other_process_node(p, pid, b""), Some(Node::Dir)) {
        return Vec::new();
    }
    let mut out: Vec<(Vec<u8>, u8)> = OTHER_PROCESS_FILES
        .iter()
        .map(|n| (n.to_vec(), DT_REG))
        .collect();
    if other_process_node(p, pid, b"exe").is_some() {
        out.push((b"exe".to_vec(), DT_LNK));
    }
    out
}

pub(super) const DT_CHR: u8 = 2;
pub(super) const DT_DIR: u8 = 4;
pub(super) const DT_REG: u8 = 8;
pub(super) const DT_LNK: u8 = 10;

/// A stable inode number for a synthetic path (FNV-1a).
pub(super) fn ino_of(path: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in path {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h | 1 << 62
}

/// The device synthetic files are on (procfs's anonymous device).
const PROC_DEV: u64 = makedev(0, 22);

fn now() -> (i64, u64) {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or((0, 0), |d| {
            (d.as_secs() as i64, u64::from(d.subsec_nanos()))
        })
}

/// The metadata of a synthetic object that is not an open file.
pub(super) fn stat(p: &Process, path: &[u8], node: &Node) -> Result<StatInfo, Errno> {
    let uid = crate::linux::process::UID as u32;
    let t = now();
    let base = StatInfo {
        dev: PROC_DEV,
        ino: ino_of(path),
        nlink: 1,
        uid,
        gid: uid,
        blksize: 1024,
        atime: t,
        mtime: t,
        ctime: t,
        ..StatInfo::default()
    };
    Ok(match node {
        Node::Dev(d) => dev_stat(*d),
        Node::File(g) => generated_stat(base, *g),
        // Root's, as on Linux, but for a process's own directories.
        Node::Dir if root_owned(path) => StatInfo {
            mode: S_IFDIR | 0o555,
            nlink: 2,
            uid: 0,
            gid: 0,
            ..base
        },
        Node::Dir => StatInfo {
            mode: S_IFDIR | 0o555,
            nlink: 2,
            ..base
        },
        Node::Link(_) | Node::FdLink(_) | Node::ExeLink => StatInfo {
            mode: S_IFLNK | 0o777,
            size: link_text(p, node).map_or(0, |t| t.len() as i64),
            ..base
        },
        // The program as the guest's namespace has it, else as opening
        // /proc/self/exe reaches it.
        Node::Exe => match walk_host(&roots(p), p.exe_path.as_bytes(), true) {
            Ok(r) => StatInfo::from(&r.stat),
            Err(_) => StatInfo::from(&rustix::fs::stat(p.exe_host.as_str())?),
        },
        Node::Open(f) => stat_of_file(&lock(f))?,
    })
}

/// Whether a synthetic name is root's, as on Linux: all but those inside
/// a process's directory (`/proc/<pid>/...`), which are the process's.
fn root_owned(path: &[u8]) -> bool {
    !path.starts_with(b"/proc/") || !path.get(6).is_some_and(u8::is_ascii_digit)
}

fn generated_stat(base: StatInfo, g: Generated) -> StatInfo {
    StatInfo {
        mode: g.mode,
        size: g.size,
        uid: if g.root_owned { 0 } else { base.uid },
        gid: if g.root_owned { 0 } else { base.gid },
        ..base
    }
}

/// fstat of an open generated file (a sealed memfd, see
/// `procfs::memory_file`) or synthetic directory (an empty memfd that keeps
/// the listing's position): shown as `stat` shows the path. None for
/// anything else.
pub(super) fn stat_open(fd: &OwnedFd, path: &[u8], dir: bool) -> Option<StatInfo> {
    if !(path.starts_with(b"/proc") || path.starts_with(b"/etc") || path == b"/dev/pts") {
        return None;
    }
    let st = rustix::fs::fstat(fd).ok()?;
    if st.st_mode & S_IFMT != S_IFREG || st.st_nlink != 0 {
        return None;
    }
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd));
    let host = rustix::fs::readlink(link.as_str(), Vec::new()).ok()?;
    if !host
        .as_bytes()
        .starts_with(format!("/memfd:{}", crate::linux::procfs::MEMORY_FILE_NAME).as_bytes())
    {
        return None;
    }
    let mut info = StatInfo::from(&st);
    info.dev = PROC_DEV;
    info.ino = ino_of(path);
    info.blocks = 0;
    info.blksize = 1024;
    if dir {
        info.mode = S_IFDIR | 0o555;
        info.nlink = 2;
        info.size = 0;
        return Some(info);
    }
    let g = if path.starts_with(b"/etc") {
        Generated {
            mode: S_IFREG | 0o644,
            size: st.st_size,
            root_owned: true,
        }
    } else {
        Generated {
            root_owned: root_owned(path),
            ..PROC_FILE
        }
    };
    info.nlink = 1;
    Some(generated_stat(info, g))
}

/// How a walk takes one synthetic name.
pub(super) struct Step<'a> {
    /// It is the last name of the path.
    pub(super) last: bool,
    /// The last name is followed if it is a link.
    pub(super) follow_last: bool,
    /// Links followed so far.
    pub(super) links: &'a mut u32,
}

/// What the walk does after a synthetic name.
pub(super) enum Stepped {
    /// The walk ends here, on this synthetic object.
    Done(Vec<u8>, Node),
    /// On with the next name.
    Next,
    /// The host has it: walk it as a host name.
    Host,
}

/// One step of `walk_inner` onto the synthetic `node`, named `comp` under the top of `stack`.
pub(super) fn step(
    p: &Process,
    roots: &[Root],
    stack: &mut Vec<Level>,
    todo: &mut VecDeque<Vec<u8>>,
    comp: &[u8],
    node: Node,
    how: Step<'_>,
) -> Result<Stepped, Errno> {
    let follow = !how.last || how.follow_last;
    let path = join(&canonical(stack), comp);
    match node {
        Node::Link(target) if follow => {
            follow_link(stack, todo, &target, how.links)?;
            Ok(Stepped::Next)
        }
        Node::FdLink(n) if follow => {
            let f = p.fds.get(n).map_err(|_| Errno::ENOENT)?;
            if how.last {
                return Ok(Stepped::Done(path, Node::Open(f)));
            }
            // A directory's descriptor leads on from where it is.
            let dir = match &lock(&f).kind {
                FileKind::Dir { path, .. } => path.clone(),
                _ => return Err(Errno::ENOTDIR),
            };
            follow_link(stack, todo, &dir, how.links)?;
            Ok(Stepped::Next)
        }
        Node::ExeLink if follow => {
            if !how.last {
                return Err(Errno::ENOTDIR);
            }
            Ok(Stepped::Done(path, Node::Exe))
        }
        Node::Dir => {
            let mut want = level_names(stack);
            want.push(comp);
            let parent = stack.last().ok_or(Errno::ENOENT)?;
            // An allowed host directory of that name (an allowed /proc or /etc) is the host's.
            if roots.iter().any(|r| r.is(&want) || r.is_below(&want)) {
                return Ok(Stepped::Host);
            }
            // So is /etc below a root that holds it (`--allow-read /`), but
            // not /proc: the host's would show its processes, its kernel's
            // command line and settings (as /tmp stays private, `tmp.rs`).
            // Nor /dev/pts: the run's ptys are its own.
            let proc = want == [b"proc".as_slice()] || want == [b"dev".as_slice(), b"pts"];
            if let (Some(dir), Some(st), false) = (&parent.fd, &parent.stat, proc) {
                if let Ok(fd) = open_child(dir, st, comp) {
                    if rustix::fs::fstat(&fd).is_ok_and(|s| s.st_mode & S_IFMT == S_IFDIR) {
                        return Ok(Stepped::Host);
                    }
                }
            }
            stack.push(Level {
                name: comp.to_vec(),
                fd: None,
                stat: None,
                root: None,
                virt: true,
                blocked: false,
            });
            Ok(Stepped::Next)
        }
        _ if !how.last => Err(Errno::ENOTDIR),
        node => Ok(Stepped::Done(path, node)),
    }
}
