//! A minimal synthetic /proc: the guest's own view, never the host's; and
//! the guest's own /etc/hosts, passwd, group and nsswitch.conf where the
//! host's are not allowed ([`etc_file`]).
//!
//! `/proc/self/maps` (what the program mapped), `/proc/self/cmdline` (its
//! argument strings, read from its stack), `/proc/self/comm`, `status`,
//! `/proc/self/stat` and `statm` (its memory and threads),
//! `/proc/meminfo` (its memory limit), `/proc/cpuinfo` and `/proc/stat` (one CPU),
//! `/proc/uptime` and `/proc/loadavg` (since it started, no load), the mount
//! table `/proc/self/mounts` and `mountinfo` (one file system at /) are
//! generated when opened, into a sealed in-memory file, so every read,
//! seek, fstat and mmap path treats them as ordinary read-only files.
//! Which names exist there (files, directories such as `/proc/self/fd`,
//! and the links `/proc/self`, `/proc/self/{exe,cwd,fd/N}`, `/dev/std*`,
//! `/dev/fd`), how they stat, list and are followed, is the file-system
//! view's business (`fs/virt.rs`); here are their contents and
//! [`fd_link`], what `/proc/self/fd/N` reads as.

use super::event::EventObj;
use super::fdtable::{lock, FileKind, OpenFile};
use super::process::{PPID, UID};
use super::Process;
use crate::memory::GuestMemory;
use std::fmt::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;

/// The guest's own view of the few files in /etc that name resolution and
/// user lookup read (glibc's getaddrinfo and getpwuid, Go's net and os/user,
/// node's dns.lookup), for when the host's are not allowed: `localhost`
/// resolves, and the guest's uid has a name. The host's files (its users,
/// its names) stay private; `--allow-read` of the real file wins.
pub fn etc_file(p: &Process, path: &[u8]) -> Option<std::borrow::Cow<'static, str>> {
    let text = match path {
        // 127.0.1.1 names the host, as Debian's installer writes it (see
        // process::HOSTNAME; a unit test checks the two agree); then the
        // host names `--allow-connect` gave, as they resolved at start-up.
        b"/etc/hosts" => {
            let base =
                "127.0.0.1\tlocalhost\n127.0.1.1\tforkvm\n::1\tlocalhost ip6-localhost ip6-loopback\n";
            let names = p.outbound.names();
            if names.is_empty() {
                base
            } else {
                let mut text = base.to_string();
                for (name, ip) in names {
                    text.push_str(&format!("{ip}\t{name}\n"));
                }
                return allowed_etc(p, path).then_some(text.into());
            }
        }
        b"/etc/passwd" => {
            "root:x:0:0:root:/root:/usr/sbin/nologin\n\
             user:x:1000:1000:forkvm guest:/:/bin/sh\n\
             nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        }
        b"/etc/group" => "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n",
        b"/etc/nsswitch.conf" => "passwd: files\ngroup: files\nhosts: files dns\n",
        _ => return None,
    };
    allowed_etc(p, path).then_some(text.into())
}

/// `/proc/self/maps`: the program's mappings with their rights (the user
/// map's), whether executable and shared, and the file, offset, device and
/// inode each maps (`memory::labels`), as Linux prints them; the vDSO and
/// its data page as `[vdso]` and `[vvar]`, the heap and stack by name.
/// Neighbours that Linux would keep as one mapping (same rights and name,
/// the same file at following offsets) are one line, as a heap grown by
/// several brk calls is.
fn maps(p: &Process, mem: &GuestMemory) -> Vec<u8> {
    let mut lines: Vec<MapsLine> = Vec::new();
    let mut add = |l: MapsLine| match lines.last_mut() {
        Some(prev) if prev.continued_by(&l) => prev.end = l.end,
        _ => lines.push(l),
    };
    if p.mm.vdso != 0 {
        let page = crate::abi::PAGE_SIZE;
        let data = crate::abi::FAST_DATA_ADDR;
        let vdso_end = p.mm.vdso + (crate::vdso::IMAGE.len() as u64).next_multiple_of(page);
        add(MapsLine::named(data, data + page, *b"r--p", "[vvar]"));
        add(MapsLine::named(p.mm.vdso, vdso_end, *b"r-xp", "[vdso]"));
    }
    let stack_lo = mem.size() - p.mm.stack_size(mem.size());
    for (start, end, r) in mem.user_mappings() {
        let name = if start >= stack_lo {
            "[stack]"
        } else if start >= p.mm.brk_start && start < p.mm.brk.max(p.mm.brk_start + 1) {
            "[heap]"
        } else {
            ""
        };
        // One line per run of the range with one label.
        let mut at = start;
        while at < end {
            let (to, label) = match p.mm.labels.range_at(at) {
                Some((s, e, l)) => (e.min(end), Some((s, l))),
                None => (p.mm.labels.next_start(at).map_or(end, |n| n.min(end)), None),
            };
            let flag = |set: bool, c: u8, unset: u8| if set { c } else { unset };
            let perms = [
                flag(r.read, b'r', b'-'),
                flag(r.write, b'w', b'-'),
                flag(label.is_some_and(|(_, l)| l.exec), b'x', b'-'),
                flag(label.is_some_and(|(_, l)| l.shared), b's', b'p'),
            ];
            let mut line = MapsLine::named(at, to, perms, name);
            if let Some((s, l)) = label {
                if l.file.is_some() {
                    line.file = l.file.clone();
                    line.offset = l.offset + (at - s);
                    line.mapping = s;
                }
            }
            add(line);
            at = to;
        }
    }
    let mut s = String::new();
    for l in &lines {
        l.write(&mut s);
    }
    s.into_bytes()
}

/// One line of `/proc/self/maps`.
struct MapsLine {
    start: u64,
    end: u64,
    perms: [u8; 4],
    file: Option<std::sync::Arc<crate::memory::MappedFile>>,
    offset: u64,
    /// Where the file mapping this line shows starts (its label's range).
    mapping: u64,
    /// The name of a mapping of no file (`[heap]`, `[stack]`...).
    name: &'static str,
}

impl MapsLine {
    fn named(start: u64, end: u64, perms: [u8; 4], name: &'static str) -> Self {
        Self {
            start,
            end,
            perms,
            file: None,
            offset: 0,
            mapping: 0,
            name,
        }
    }

    /// Whether `next` goes on where this line ends, as one mapping: memory
    /// of no file with the same rights and name (Linux merges those), or
    /// the rest of the same file mapping.
    fn continued_by(&self, next: &Self) -> bool {
        self.end == next.start
            && self.perms == next.perms
            && self.name == next.name
            && match (&self.file, &next.file) {
                (None, None) => true,
                (Some(_), Some(_)) => self.mapping == next.mapping,
                _ => false,
            }
    }

    /// As Linux prints it: a line without a name ends with the inode's
    /// space; a name starts at the 74th column at the earliest.
    fn write(&self, s: &mut String) {
        let (dev, ino, name) = match &self.file {
            Some(f) => (f.dev, f.ino, String::from_utf8_lossy(&f.path)),
            None => (0, 0, std::borrow::Cow::Borrowed(self.name)),
        };
        let (major, minor) = (
            ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
            (dev & 0xff) | ((dev >> 12) & !0xff),
        );
        let perms = String::from_utf8_lossy(&self.perms);
        let head = format!(
            "{:08x}-{:08x} {perms} {:08x} {major:02x}:{minor:02x} {ino} ",
            self.start, self.end, self.offset
        );
        if name.is_empty() {
            let _ = writeln!(s, "{head}");
        } else {
            let _ = writeln!(s, "{head:<72} {name}");
        }
    }
}

/// Whether the guest sees its own file at `path` in /etc: the host's is not
/// allowed (`--allow-read` of the real file wins).
fn allowed_etc(p: &Process, path: &[u8]) -> bool {
    let host = std::path::Path::new(std::ffi::OsStr::from_bytes(path));
    !p.policy
        .allow_read
        .iter()
        .any(|root| host.starts_with(root))
}

/// The CPU lists of sysfs (`/sys/devices/system/cpu/{online,possible,present}`),
/// which glibc's `sysconf(_SC_NPROCESSORS_ONLN/CONF)` reads first (so
/// python's `os.cpu_count()`, `nproc --all`, `getconf`): the VM's one CPU,
/// as sched_getaffinity, /proc/cpuinfo and /proc/stat say. They are met
/// only where the policy shows the host's /sys (`--allow-read /`), whose
/// own lists named the host's CPUs: two answers to one question.
pub fn cpu_list(path: &[u8]) -> Option<&'static str> {
    match path {
        b"/sys/devices/system/cpu/online"
        | b"/sys/devices/system/cpu/possible"
        | b"/sys/devices/system/cpu/present" => Some("0\n"),
        _ => None,
    }
}

/// The contents of a synthetic file at the canonical absolute `path`
/// (`/proc/<pid>/...` or `/proc/self/...`), if it is one.
pub fn synthesize(p: &Process, mem: &GuestMemory, path: &[u8]) -> Option<Vec<u8>> {
    if let Some(text) = cpu_list(path) {
        return Some(text.as_bytes().to_vec());
    }
    if let Some(text) = etc_file(p, path) {
        return Some(text.as_bytes().to_vec());
    }
    // A child process is itself, with its parent: not the run's first process.
    let pid = super::child::pid_of(p);
    let ppid = p.family.as_ref().map_or(PPID, super::child::Family::ppid);
    if let Some(text) = other_process(p, path, pid) {
        return Some(text);
    }
    let path = path
        .strip_prefix(b"/proc/self/")
        .map(|rest| [b"self/".as_slice(), rest].concat())
        .or_else(|| {
            path.strip_prefix(format!("/proc/{pid}/").as_bytes())
                .map(|rest| [b"self/".as_slice(), rest].concat())
        })
        .or_else(|| path.strip_prefix(b"/proc/").map(<[u8]>::to_vec))?;
    if let Some(sys) = path.strip_prefix(b"sys/") {
        return super::sysctl::contents(sys).map(String::into_bytes);
    }
    let mut s = String::new();
    match path.as_slice() {
        b"version" => return Some(super::sysctl::proc_version().into_bytes()),
        // The VM's IPv6 addresses (the JVM's NetworkInterface reads them
        // here): ::1 on lo, index 1, /128, host scope, permanent.
        b"net/if_inet6" => {
            return Some(b"00000000000000000000000000000001 01 80 10 80       lo\n".to_vec())
        }
        // The argument strings as they are now in the program's memory.
        b"self/cmdline" => {
            let (start, end) = p.mm.args;
            return Some(
                mem.read(start, end - start)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default(),
            );
        }
        // Its name (prctl PR_SET_NAME, node's process.title), as ps and
        // psutil read it.
        b"self/comm" => {
            let name = p.comm.split(|&b| b == 0).next().unwrap_or(b"");
            return Some([name, b"\n"].concat());
        }
        b"self/maps" => return Some(maps(p, mem)),
        b"self/status" => {
            let name = String::from_utf8_lossy(p.comm.split(|&b| b == 0).next().unwrap_or(b""));
            let _ = write!(
                s,
                "Name:\t{name}\nState:\tR (running)\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t{ppid}\n\
                 Uid:\t{UID}\t{UID}\t{UID}\t{UID}\nGid:\t{UID}\t{UID}\t{UID}\t{UID}\n\
                 VmRSS:\t{} kB\nThreads:\t{}\n",
                mem.committed() >> 10,
                p.threads.count(),
            );
            // The signal masks (python's subprocess tests read SigIgn).
            let (mut ign, mut cgt) = (0u64, 0u64);
            for (i, a) in p.sigactions.iter().enumerate() {
                match a.handler {
                    0 => {}
                    1 => ign |= 1 << i,
                    _ => cgt |= 1 << i,
                }
            }
            let _ = write!(
                s,
                "SigPnd:\t{:016x}\nShdPnd:\t{:016x}\nSigBlk:\t{:016x}\nSigIgn:\t{ign:016x}\nSigCgt:\t{cgt:016x}\n",
                p.sigqueue.sent_to(p.tid),
                p.sigqueue.sent_to(0),
                p.sigmask,
            );
        }
        b"self/stat" => {
            // libuv reads the resident size (field 24) for node's
            // process.memoryUsage().
            let (pgid, sid) = super::child::seen(p, pid).map_or((pid, PPID), |s| (s.pgid, s.sid));
            let line = StatLine {
                pid,
                comm: &p.comm,
                state: 'R',
                ppid,
                pgid,
                sid,
                threads: p.threads.count() as u64,
                start_ticks: 0,
                vsize: mem.committed(),
                blocked: p.sigmask,
                nice: p.nice,
            };
            line.write(&mut s);
        }
        b"self/statm" => {
            // size resident shared text lib data dt, in pages.
            let pages = mem.committed() / crate::abi::PAGE_SIZE;
            let _ = writeln!(s, "{pages} {pages} 0 0 0 {pages} 0");
        }
        b"meminfo" => {
            let total = mem.commit_limit() >> 10;
            let free = total.saturating_sub(mem.committed_by_all() >> 10);
            let _ = write!(
                s,
                "MemTotal:       {total:8} kB\nMemFree:        {free:8} kB\nMemAvailable:   {free:8} kB\n\
                 Buffers:               0 kB\nCached:                0 kB\nSwapTotal:             0 kB\n\
                 SwapFree:              0 kB\n"
            );
        }
        b"stat" => {
            // One CPU, busy since the process started (in clock ticks, 100
            // a second): libuv counts the cpuN lines for node's os.cpus().
            let ticks = p.started.elapsed().as_millis() / 10;
            let boot = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
                .saturating_sub(p.started.elapsed().as_secs());
            let _ = write!(
                s,
                "cpu  {ticks} 0 0 0 0 0 0 0 0 0\ncpu0 {ticks} 0 0 0 0 0 0 0 0 0\nintr 0\nctxt 0\n\
                 btime {boot}\nprocesses 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0\n"
            );
        }
        // One file system, the guest's view from / (df, findmnt and
        // getmntent read these; df failed with no mount table).
        b"self/mounts" => s.push_str("forkvm / forkvm rw,relatime 0 0\n"),
        b"self/mountinfo" => s.push_str("1 0 0:1 / / rw,relatime - forkvm forkvm rw\n"),
        b"uptime" => {
            // Up since the process started, as sysinfo and /proc/stat's
            // btime say; never idle (uptime(1), procps).
            let up = p.started.elapsed();
            let _ = writeln!(s, "{}.{:02} 0.00", up.as_secs(), up.subsec_millis() / 10);
        }
        b"loadavg" => {
            // No load, as sysinfo's; one running of one, and the last pid
            // (getloadavg(3), uptime(1)).
            let _ = writeln!(s, "0.00 0.00 0.00 1/1 {pid}");
        }
        b"cpuinfo" => {
            let _ = write!(
                s,
                "processor\t: 0\nvendor_id\t: forkvm\nmodel name\t: forkvm vCPU\ncpu MHz\t\t: 0.000\n\
                 cache size\t: 0 KB\nsiblings\t: 1\ncpu cores\t: 1\nflags\t\t: fpu tsc cx8 cmov mmx fxsr sse sse2 \
                 lm\n\n"
            );
        }
        _ => return None,
    }
    Some(s.into_bytes())
}

/// The fields of a /proc/<pid>/stat line forkvm knows.
struct StatLine<'a> {
    pid: u64,
    comm: &'a [u8; 16],
    state: char,
    ppid: u64,
    pgid: u64,
    sid: u64,
    threads: u64,
    /// When it started, in clock ticks (100 a second) after "boot" (when
    /// the reader started, as /proc/stat's btime and /proc/uptime say).
    start_ticks: u64,
    vsize: u64,
    blocked: u64,
    /// Its nice value (the priority field is 20 more).
    nice: i32,
}

impl StatLine<'_> {
    /// Linux's 52 fields; what is not tracked is 0.
    fn write(&self, s: &mut String) {
        let name = String::from_utf8_lossy(self.comm.split(|&b| b == 0).next().unwrap_or(b""));
        let pages = self.vsize / crate::abi::PAGE_SIZE;
        let _ = writeln!(
            s,
            "{pid} ({name}) {state} {ppid} {pgid} {sid} 0 -1 4194304 0 0 0 0 0 0 0 0 {prio} {nice} {threads} 0 \
             {start} {vsize} {pages} 18446744073709551615 0 0 0 0 0 0 {blocked} 0 0 0 0 0 17 0 0 0 0 \
             0 0 0 0 0 0 0 0 0 0",
            pid = self.pid,
            prio = 20 + self.nice,
            nice = self.nice,
            state = self.state,
            ppid = self.ppid,
            pgid = self.pgid,
            sid = self.sid,
            threads = self.threads,
            start = self.start_ticks,
            vsize = self.vsize,
            blocked = self.blocked,
        );
    }
}

/// A file of another process's directory (`/proc/<pid>/...`, `pid` not the
/// caller's), from what that process published (see `child::shown`).
fn other_process(p: &Process, path: &[u8], own: u64) -> Option<Vec<u8>> {
    let rest = path.strip_prefix(b"/proc/")?;
    let slash = rest.iter().position(|&b| b == b'/')?;
    let (digits, file) = (&rest[..slash], &rest[slash + 1..]);
    let pid: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    if pid == own || pid.to_string().as_bytes() != digits {
        return None;
    }
    let seen = super::child::seen(p, pid)?;
    let shown = &seen.shown;
    let name = String::from_utf8_lossy(shown.comm.split(|&b| b == 0).next().unwrap_or(b""));
    let state = match (seen.zombie, seen.asleep) {
        (true, _) => 'Z',
        (false, true) => 'S',
        (false, false) => 'R',
    };
    let mut s = String::new();
    match file {
        // A zombie's memory is gone: its command line reads as empty.
        b"cmdline" if seen.zombie => return Some(Vec::new()),
        b"cmdline" => return Some(shown.cmdline.clone()),
        b"comm" => {
            let _ = writeln!(s, "{name}");
        }
        b"stat" => {
            let since = shown.started.saturating_duration_since(p.started);
            StatLine {
                pid,
                comm: &shown.comm,
                state,
                ppid: seen.ppid,
                pgid: seen.pgid,
                sid: seen.sid,
                threads: 1,
                start_ticks: (since.as_millis() / 10) as u64,
                vsize: 0,
                blocked: 0,
                nice: 0,
            }
            .write(&mut s);
        }
        b"status" => {
            let long = match state {
                'Z' => "zombie",
                'S' => "sleeping",
                _ => "running",
            };
            let _ = write!(
                s,
                "Name:\t{name}\nState:\t{state} ({long})\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t{}\n\
                 Uid:\t{UID}\t{UID}\t{UID}\t{UID}\nGid:\t{UID}\t{UID}\t{UID}\t{UID}\nThreads:\t1\n",
                seen.ppid
            );
        }
        _ => return None,
    }
    Some(s.into_bytes())
}

/// The host name of the files [`memory_file`] makes (the file-system view
/// knows them by it).
pub const MEMORY_FILE_NAME: &str = "forkvm-proc";

/// A read-only in-memory file holding `data`.
pub fn memory_file(data: &[u8]) -> Result<OwnedFd, super::Errno> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(
        MEMORY_FILE_NAME,
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    let mut done = 0;
    while done < data.len() {
        done += rustix::io::write(&fd, &data[done..])?;
    }
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
    )?;
    Ok(fd)
}

/// What `/proc/self/fd/N` reads for an open file, as Linux shows it.
pub fn fd_link(p: &Process, f: &OpenFile) -> Vec<u8> {
    let host_path = |fd: &OwnedFd, path: &[u8]| {
        if path == b"/proc/self/exe" {
            return p.exe_path.as_bytes().to_vec();
        }
        let mut out = path.to_vec();
        let gone = rustix::fs::fstat(fd).is_ok_and(|st| st.st_nlink == 0);
        if gone && !path.starts_with(b"/proc/") {
            out.extend_from_slice(b" (deleted)");
        }
        out
    };
    let text = match &f.kind {
        FileKind::File { fd, path }
        | FileKind::Dir { fd, path }
        | FileKind::PathOnly { fd, path } => return host_path(fd, path),
        FileKind::Pipe(end) => match &end.node {
            Some(node) => return host_path(&node.fd, &node.path),
            None => format!("pipe:[{}]", lock(&end.pipe).id),
        },
        FileKind::Socket(s) => format!("socket:[{}]", super::net::socket_stat(s).ino),
        FileKind::Pty(end) => end.link(),
        FileKind::Null => "/dev/null".into(),
        FileKind::Zero => "/dev/zero".into(),
        FileKind::Urandom => "/dev/urandom".into(),
        FileKind::Event(e) => match e {
            EventObj::EventFd { .. } => "anon_inode:[eventfd]".into(),
            EventObj::TimerFd(_) => "anon_inode:[timerfd]".into(),
            EventObj::Epoll(_) => "anon_inode:[eventpoll]".into(),
            EventObj::SignalFd { .. } => "anon_inode:[signalfd]".into(),
            EventObj::Pidfd(_) => "anon_inode:[pidfd]".into(),
            EventObj::Inotify(_) => "anon_inode:inotify".into(),
        },
        FileKind::Stdin | FileKind::Stdout | FileKind::Stderr => {
            let name = match f.kind {
                FileKind::Stdin => "/dev/stdin",
                FileKind::Stdout => "/dev/stdout",
                _ => "/dev/stderr",
            };
            host_stdio_link(&f.kind).unwrap_or_else(|| name.into())
        }
    };
    text.into_bytes()
}

/// What the host's standard stream behind `kind` is, as its link reads: a
/// pipe or socket by inode, a device by its path; None for anything else (a
/// host file's path is the host's business).
fn host_stdio_link(kind: &FileKind) -> Option<String> {
    use std::os::fd::{AsFd, AsRawFd};
    let h = super::io::host_std(kind)?;
    let fd = h.as_fd();
    let st = rustix::fs::fstat(fd).ok()?;
    match st.st_mode & 0o170000 {
        0o010000 => Some(format!("pipe:[{}]", st.st_ino)),
        0o140000 => Some(format!("socket:[{}]", st.st_ino)),
        0o020000 => {
            let at = format!("/proc/self/fd/{}", fd.as_raw_fd());
            let link = rustix::fs::readlink(at, Vec::new())
                .ok()?
                .into_string()
                .ok()?;
            link.starts_with("/dev/").then_some(link)
        }
        _ => None,
    }
}
