//! What forkvm tells its user about the guest's system calls:
//!
//! - `--trace-syscalls` lines decoded as strace prints them: paths and
//!   strings (escaped, truncated), open/mmap/`AT_*` flags, `AT_FDCWD`, and
//!   errno names with their meaning;
//! - notes for `-v`, each said once per process: calls refused by policy
//!   (network, process creation, writes outside the writable roots), paths
//!   refused because they are outside the allow-list, and mmap failing for
//!   lack of memory or address space. The paths outside the allow-list are
//!   also kept (a few) so the command line can give a hint when the program
//!   fails.
//!
//! Everything here only reads guest memory, and nothing the guest passes
//! sizes an allocation beyond the small caps below.

use super::table::{self, Support};
use super::{fs, names, Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::collections::HashSet;
use std::fmt::Write as _;

/// mmap's MAP_HUGETLB flag.
const MAP_HUGETLB: u64 = 0x4_0000;
/// Bytes of a buffer argument shown in a trace (strace's default `-s 32`).
const STRING_LIMIT: usize = 32;
/// Distinct notes kept per process; beyond it nothing more is checked or said.
const MAX_NOTES: usize = 256;
/// Paths outside the allow-list kept for the hint.
pub(crate) const MAX_DENIED: usize = 8;

/// Notes already given, and what the command line may want to say at the end.
#[derive(Debug, Clone, Default)]
pub struct Notes {
    seen: HashSet<String>,
    /// Existing host paths the guest was refused as outside the allow-list (first few).
    pub denied: Vec<String>,
    /// The size of an mmap that failed with ENOMEM, if one did.
    pub mmap_enomem: Option<u64>,
}

impl Notes {
    /// Logs `msg` (at debug level, shown by `forkvm run -v`, not by a serve's
    /// default log: requests must not fill it) unless it was logged before.
    fn once(&mut self, msg: String) {
        self.once_as(msg.clone(), msg);
    }

    /// Logs `msg` unless something was logged with `key` before.
    fn once_as(&mut self, key: String, msg: String) {
        if self.seen.len() < MAX_NOTES && self.seen.insert(key) {
            tracing::debug!("{msg}");
        }
    }

    fn full(&self) -> bool {
        self.seen.len() >= MAX_NOTES
    }
}

/// How a syscall argument is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Signed decimal.
    Int,
    /// Hexadecimal (pointers, sizes of mappings, opaque values).
    Hex,
    /// A file descriptor or `AT_FDCWD`.
    DirFd,
    /// A NUL-terminated path.
    Path,
    /// Bytes the guest passes in; the length is argument `n`.
    In(usize),
    /// Bytes the call fills in; their length is the result.
    Out,
    /// open(2) flags.
    OpenFlags,
    /// A mode, in octal.
    Mode,
    /// mmap/mprotect protection.
    Prot,
    /// mmap flags.
    MapFlags,
    /// `AT_*` flags.
    AtFlags,
}

use Kind::*;

/// Argument kinds of the syscalls a trace decodes; others print six hex values.
fn signature(nr: u64) -> Option<&'static [Kind]> {
    Some(match nr {
        0 => &[DirFd, Out, Int],                            // read
        1 => &[DirFd, In(2), Int],                          // write
        2 => &[Path, OpenFlags, Mode],                      // open
        3 => &[DirFd],                                      // close
        4 | 6 => &[Path, Hex],                              // stat, lstat
        5 => &[DirFd, Hex],                                 // fstat
        8 => &[DirFd, Int, Int],                            // lseek
        9 => &[Hex, Hex, Prot, MapFlags, DirFd, Hex],       // mmap
        10 => &[Hex, Hex, Prot],                            // mprotect
        11 => &[Hex, Hex],                                  // munmap
        12 => &[Hex],                                       // brk
        13 | 14 => &[Int, Hex, Hex, Int],                   // rt_sigaction, rt_sigprocmask
        24 | 39 | 102 | 104 | 107 | 108 | 110 | 186 => &[], // no arguments
        35 => &[Hex, Hex],                                  // nanosleep
        56 => &[Hex, Hex, Hex, Hex, Hex],                   // clone
        158 => &[Hex, Hex],                                 // arch_prctl
        202 => &[Hex, Int, Int, Hex, Hex, Int],             // futex
        218 => &[Hex],                                      // set_tid_address
        228 => &[Int, Hex],                                 // clock_gettime
        230 => &[Int, Int, Hex, Hex],                       // clock_nanosleep
        273 => &[Hex, Int],                                 // set_robust_list
        302 => &[Int, Int, Hex, Hex],                       // prlimit64
        318 => &[Hex, Int, Hex],                            // getrandom
        334 => &[Hex, Int, Hex, Hex],                       // rseq
        16 => &[DirFd, Hex, Hex],                           // ioctl
        17 => &[DirFd, Out, Int, Int],                      // pread64
        18 => &[DirFd, In(2), Int, Int],                    // pwrite64
        21 => &[Path, Int],                                 // access
        32 => &[DirFd],                                     // dup
        33 => &[DirFd, DirFd],                              // dup2
        59 => &[Path, Hex, Hex],                            // execve
        60 | 231 => &[Int],                                 // exit, exit_group
        72 => &[DirFd, Int, Hex],                           // fcntl
        76 => &[Path, Int],                                 // truncate
        79 => &[Out, Int],                                  // getcwd
        80 | 84 | 87 => &[Path],                            // chdir, rmdir, unlink
        82 | 86 | 88 => &[Path, Path],                      // rename, link, symlink
        83 | 90 => &[Path, Mode],                           // mkdir, chmod
        85 => &[Path, Mode],                                // creat
        89 => &[Path, Out, Int],                            // readlink
        217 => &[DirFd, Hex, Int],                          // getdents64
        257 => &[DirFd, Path, OpenFlags, Mode],             // openat
        258 => &[DirFd, Path, Mode],                        // mkdirat
        262 => &[DirFd, Path, Hex, AtFlags],                // newfstatat
        263 => &[DirFd, Path, Hex],                         // unlinkat
        264 => &[DirFd, Path, DirFd, Path],                 // renameat
        267 => &[DirFd, Path, Out, Int],                    // readlinkat
        268 => &[DirFd, Path, Mode],                        // fchmodat
        269 => &[DirFd, Path, Int],                         // faccessat
        280 => &[DirFd, Path, Hex, AtFlags],                // utimensat
        292 => &[DirFd, DirFd, OpenFlags],                  // dup3
        316 => &[DirFd, Path, DirFd, Path, Hex],            // renameat2
        322 => &[DirFd, Path, Hex, Hex, AtFlags],           // execveat
        332 => &[DirFd, Path, AtFlags, Hex, Hex],           // statx
        437 => &[DirFd, Path, Hex, Int],                    // openat2
        439 => &[DirFd, Path, Int, AtFlags],                // faccessat2
        247 => &[Int, Int, Hex, Hex, Hex],                  // waitid
        253 => &[],                                         // inotify_init
        254 => &[DirFd, Path, Hex],                         // inotify_add_watch
        255 | 424 => &[DirFd, Int, Hex, Hex],               // inotify_rm_watch, pidfd_send_signal
        294 => &[Hex],                                      // inotify_init1
        326 => &[DirFd, Hex, DirFd, Hex, Int, Hex],         // copy_file_range
        434 => &[Int, Hex],                                 // pidfd_open
        438 => &[DirFd, DirFd, Hex],                        // pidfd_getfd
        _ => return None,
    })
}

/// Called by dispatch after every syscall: the trace line and the notes.
pub fn after(p: &mut Process, mem: &GuestMemory, nr: u64, args: &Args, result: &SysResult) {
    if let Err(e) = result {
        note(p, mem, nr, args, *e);
    }
    if p.policy.trace_syscalls {
        eprintln!("[forkvm] {}", line(mem, nr, args, result));
    }
}

/// A call that found nothing ready and waits (it is made again until it
/// is): traced once, as `read(6, 0x7ffc0, 1) = ? (waits)`; its result is
/// traced when it completes.
pub fn waits(p: &Process, mem: &GuestMemory, nr: u64, args: &Args) {
    if p.policy.trace_syscalls {
        // As a failed call: output buffers show as addresses, nothing was read.
        let line = line(mem, nr, args, &Err(Errno::EAGAIN));
        let call = line.rsplit_once(" = ").map_or(line.as_str(), |(c, _)| c);
        eprintln!("[forkvm] {call} = ? (waits)");
    }
}

/// One strace-like line: `openat(AT_FDCWD, "/etc/x", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file or directory)`.
pub fn line(mem: &GuestMemory, nr: u64, args: &Args, result: &SysResult) -> String {
    let name = table::lookup(nr)
        .map(|e| e.name)
        .or_else(|| names::name(nr))
        .unwrap_or("unknown");
    let mut s = String::with_capacity(96);
    let _ = write!(s, "{name}(");
    match signature(nr) {
        Some(kinds) => {
            for (i, k) in kinds.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                arg(&mut s, mem, *k, args, i, result);
            }
        }
        None => {
            for (i, a) in args.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                let _ = write!(s, "{a:#x}");
            }
        }
    }
    s.push_str(") = ");
    match result {
        Ok(v) => {
            let pointer = matches!(nr, 9 | 12 | 25); // mmap, brk, mremap
            if pointer {
                let _ = write!(s, "{v:#x}");
            } else {
                let _ = write!(s, "{}", *v as i64);
            }
        }
        Err(e) => {
            let _ = write!(s, "-1 {} ({})", e.name(), describe(*e));
        }
    }
    s
}

/// The errno's meaning, as strerror(3) gives it on the host (which is Linux x86-64 too).
pub fn describe(e: Errno) -> String {
    let full = std::io::Error::from_raw_os_error(e.0).to_string();
    match full.rfind(" (os error") {
        Some(i) => full[..i].to_string(),
        None => full,
    }
}

fn arg(s: &mut String, mem: &GuestMemory, kind: Kind, args: &Args, i: usize, result: &SysResult) {
    let v = args[i];
    match kind {
        Int => {
            let _ = write!(s, "{}", v as i64);
        }
        Hex if v == 0 => s.push('0'),
        Hex => {
            let _ = write!(s, "{v:#x}");
        }
        DirFd => match v as i32 {
            -100 => s.push_str("AT_FDCWD"),
            fd => {
                let _ = write!(s, "{fd}");
            }
        },
        Path => match mem.read_cstr(v, fs::PATH_MAX - 1) {
            Ok(bytes) => quote(s, bytes, usize::MAX),
            Err(_) => {
                let _ = write!(s, "{v:#x}");
            }
        },
        In(n) => buffer(s, mem, v, args.get(n).copied().unwrap_or(0)),
        Out => match result {
            Ok(len) => buffer(s, mem, v, *len),
            Err(_) => {
                let _ = write!(s, "{v:#x}");
            }
        },
        OpenFlags => s.push_str(&open_flags(v)),
        Mode => {
            let _ = if v == 0 {
                write!(s, "0")
            } else {
                write!(s, "0{v:o}")
            };
        }
        Prot => s.push_str(&prot(v)),
        MapFlags => s.push_str(&map_flags(v)),
        AtFlags => s.push_str(&at_flags(v)),
    }
}

/// A guest buffer of `len` bytes, quoted and truncated as strace does.
fn buffer(s: &mut String, mem: &GuestMemory, addr: u64, len: u64) {
    let shown = len.min(STRING_LIMIT as u64);
    match mem.read(addr, shown) {
        Ok(bytes) => {
            quote(s, bytes, STRING_LIMIT);
            if len > shown {
                s.push_str("...");
            }
        }
        Err(_) => {
            let _ = write!(s, "{addr:#x}");
        }
    }
}

/// Appends `bytes` as a C string literal (at most `limit` bytes, then `...`).
pub fn quote(s: &mut String, bytes: &[u8], limit: usize) {
    s.push('"');
    for &b in bytes.iter().take(limit) {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\r' => s.push_str("\\r"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('"');
    if bytes.len() > limit {
        s.push_str("...");
    }
}

/// Names the set bits of `v` from `table`; what is left is shown in hex.
fn flag_names(mut v: u64, table: &[(u64, &str)], out: &mut Vec<String>) {
    for &(bit, name) in table {
        if bit != 0 && v & bit == bit {
            out.push(name.to_string());
            v &= !bit;
        }
    }
    if v != 0 {
        out.push(format!("{v:#x}"));
    }
}

/// open(2) flags, e.g. `O_RDONLY|O_CLOEXEC`.
pub fn open_flags(v: u64) -> String {
    let mut out = vec![match v & 3 {
        0 => "O_RDONLY".to_string(),
        1 => "O_WRONLY".to_string(),
        2 => "O_RDWR".to_string(),
        _ => "O_ACCMODE".to_string(),
    }];
    const FLAGS: &[(u64, &str)] = &[
        (0o20200000, "O_TMPFILE"),
        (0o4010000, "O_SYNC"),
        (0o100, "O_CREAT"),
        (0o200, "O_EXCL"),
        (0o400, "O_NOCTTY"),
        (0o1000, "O_TRUNC"),
        (0o2000, "O_APPEND"),
        (0o4000, "O_NONBLOCK"),
        (0o10000, "O_DSYNC"),
        (0o20000, "O_ASYNC"),
        (0o40000, "O_DIRECT"),
        (0o100000, "O_LARGEFILE"),
        (0o200000, "O_DIRECTORY"),
        (0o400000, "O_NOFOLLOW"),
        (0o1000000, "O_NOATIME"),
        (0o2000000, "O_CLOEXEC"),
        (0o10000000, "O_PATH"),
    ];
    flag_names(v & !3 & 0xffff_ffff, FLAGS, &mut out);
    out.join("|")
}

/// mmap/mprotect protection, e.g. `PROT_READ|PROT_WRITE`.
pub fn prot(v: u64) -> String {
    if v == 0 {
        return "PROT_NONE".into();
    }
    let mut out = Vec::new();
    const FLAGS: &[(u64, &str)] = &[
        (1, "PROT_READ"),
        (2, "PROT_WRITE"),
        (4, "PROT_EXEC"),
        (0x0100_0000, "PROT_GROWSDOWN"),
        (0x0200_0000, "PROT_GROWSUP"),
    ];
    flag_names(v, FLAGS, &mut out);
    out.join("|")
}

/// mmap flags, e.g. `MAP_PRIVATE|MAP_ANONYMOUS`.
pub fn map_flags(v: u64) -> String {
    let mut out = vec![match v & 3 {
        1 => "MAP_SHARED".to_string(),
        2 => "MAP_PRIVATE".to_string(),
        3 => "MAP_SHARED_VALIDATE".to_string(),
        _ => "0".to_string(),
    }];
    const FLAGS: &[(u64, &str)] = &[
        (0x10, "MAP_FIXED"),
        (0x20, "MAP_ANONYMOUS"),
        (0x40, "MAP_32BIT"),
        (0x100, "MAP_GROWSDOWN"),
        (0x800, "MAP_DENYWRITE"),
        (0x1000, "MAP_EXECUTABLE"),
        (0x2000, "MAP_LOCKED"),
        (0x4000, "MAP_NORESERVE"),
        (0x8000, "MAP_POPULATE"),
        (0x1_0000, "MAP_NONBLOCK"),
        (0x2_0000, "MAP_STACK"),
        (0x4_0000, "MAP_HUGETLB"),
        (0x8_0000, "MAP_SYNC"),
        (0x10_0000, "MAP_FIXED_NOREPLACE"),
    ];
    flag_names(v & !3, FLAGS, &mut out);
    if out.len() > 1 && out[0] == "0" {
        out.remove(0);
    }
    out.join("|")
}

/// `AT_*` flags, e.g. `AT_SYMLINK_NOFOLLOW`, or `0`.
pub fn at_flags(v: u64) -> String {
    if v == 0 {
        return "0".into();
    }
    let mut out = Vec::new();
    const FLAGS: &[(u64, &str)] = &[
        (0x100, "AT_SYMLINK_NOFOLLOW"),
        (0x200, "AT_EACCESS"),
        (0x400, "AT_SYMLINK_FOLLOW"),
        (0x800, "AT_NO_AUTOMOUNT"),
        (0x1000, "AT_EMPTY_PATH"),
        (0x2000, "AT_STATX_FORCE_SYNC"),
        (0x4000, "AT_STATX_DONT_SYNC"),
    ];
    flag_names(v, FLAGS, &mut out);
    out.join("|")
}

/// The first path argument of syscall `nr`, made absolute against the cwd
/// when it is relative to it (None for paths relative to another fd).
fn path_arg(p: &Process, mem: &GuestMemory, nr: u64, args: &Args) -> Option<String> {
    let kinds = signature(nr)?;
    let i = kinds.iter().position(|k| *k == Path)?;
    let raw = mem.read_cstr(args[i], fs::PATH_MAX - 1).ok()?;
    let path = String::from_utf8_lossy(raw).into_owned();
    if path.starts_with('/') {
        return Some(path);
    }
    let relative_to_cwd = i == 0 || args[i - 1] as i32 == -100;
    if !relative_to_cwd || path.is_empty() {
        return None;
    }
    Some(if p.cwd == b"/" {
        format!("/{path}")
    } else {
        format!("{}/{path}", String::from_utf8_lossy(&p.cwd))
    })
}

/// Syscalls that change the file system when they succeed.
fn writes(nr: u64, args: &Args) -> bool {
    match nr {
        2 => args[1] & 3 != 0 || args[1] & 0o1100 != 0, // open for writing/creating/truncating
        257 | 437 => args[2] & 3 != 0 || args[2] & 0o1100 != 0, // openat, openat2 (flags are in how)
        76 | 82..=94 | 133 | 258..=260 | 263..=266 | 268 | 280 | 316 => true,
        _ => false,
    }
}

/// The notes for a failed syscall.
fn note(p: &mut Process, mem: &GuestMemory, nr: u64, args: &Args, e: Errno) {
    if p.notes.full() {
        return;
    }
    let name = names::name(nr).unwrap_or("unknown");
    if nr == 9 && e == Errno::ENOMEM && args[3] & MAP_HUGETLB != 0 {
        // Not a lack of memory: programs fall back to ordinary pages.
        p.notes
            .once("mmap with MAP_HUGETLB: no huge pages for the guest (ENOMEM)".into());
        return;
    }
    if nr == 9 && e == Errno::ENOMEM {
        p.notes.mmap_enomem.get_or_insert(args[1]);
        p.notes.once(format!(
            "mmap of {} MiB failed (ENOMEM): the guest is out of memory or address space; \
             raise --memory MIB (accessible memory) or --address-space MIB (reservations)",
            args[1].div_ceil(1 << 20)
        ));
        return;
    }
    let clone_process = match nr {
        56 => args[0] & CLONE_THREAD == 0,
        435 => mem.read_u64(args[0]).is_ok_and(|f| f & CLONE_THREAD == 0),
        _ => false,
    };
    if clone_process {
        p.notes.once(format!(
            "refused by policy: {name} of a new process (--max-processes reached, or under serve): {}",
            e.name()
        ));
        return;
    }
    let path = path_arg(p, mem, nr, args);
    if e == Errno::EROFS || (e == Errno::EACCES && writes(nr, args)) {
        let what = path.as_deref().unwrap_or("(a file descriptor)");
        p.notes.once(format!(
            "refused by policy: {name} {what}: writes are allowed only under --allow-write DIR ({})",
            e.name()
        ));
        return;
    }
    // Network and process creation; other refused calls are limitations, not policy.
    let policy = matches!(nr, 41..=55 | 57..=59 | 288 | 299 | 307 | 322);
    if let Some(entry) = table::lookup(nr).filter(|e| policy && e.support == Support::Refused) {
        p.notes
            .once(format!("refused by policy: {name}: {}", entry.note));
        return;
    }
    // socket(2) itself works for UNIX socket pairs; other families are the network.
    if nr == 41 && e == Errno::EACCES {
        p.notes.once(format!(
            "refused by policy: {name} of family {}: no network in the sandbox (EACCES)",
            args[0]
        ));
        return;
    }
    if matches!(e, Errno::ENOENT | Errno::EACCES) {
        let Some(path) = path else { return };
        if path.starts_with("/proc/") || path.starts_with("/dev/") {
            return;
        }
        // Only an existing host file outside every root was refused by
        // policy. Most failed lookups are probes for files that exist
        // nowhere (python looks for a dozen at start-up): one lstat says
        // so, where resolving the path cost a readlink per component.
        if std::fs::symlink_metadata(&path).is_err() {
            return;
        }
        let Ok(real) = std::fs::canonicalize(&path) else {
            return;
        };
        if fs::reaches(&p.policy, &real) {
            return;
        }
        let shown = real.to_string_lossy().into_owned();
        if p.notes.denied.len() < MAX_DENIED && !p.notes.denied.contains(&shown) {
            p.notes.denied.push(shown.clone());
        }
        let via = if shown == path {
            String::new()
        } else {
            format!(" (that is {shown})")
        };
        p.notes.once_as(
            format!("denied {shown}"),
            format!(
            "denied: {path}{via} is outside the allow-list ({name} gave {}); allow it with --allow-read {shown}",
            e.name()
        ),
        );
    }
}

/// clone(2)'s flag for a thread of the same process.
const CLONE_THREAD: u64 = 0x10000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::{test_process, Policy};
    use std::path::PathBuf;

    #[test]
    fn flags_decode_like_strace() {
        assert_eq!(open_flags(0), "O_RDONLY");
        assert_eq!(open_flags(0o2000000), "O_RDONLY|O_CLOEXEC");
        assert_eq!(open_flags(0o1101), "O_WRONLY|O_CREAT|O_TRUNC");
        assert_eq!(open_flags(0o2 | 0o20200000), "O_RDWR|O_TMPFILE");
        assert_eq!(open_flags(0o4010000), "O_RDONLY|O_SYNC");
        assert_eq!(prot(0), "PROT_NONE");
        assert_eq!(prot(3), "PROT_READ|PROT_WRITE");
        assert_eq!(prot(0x11), "PROT_READ|0x10");
        assert_eq!(map_flags(0x22), "MAP_PRIVATE|MAP_ANONYMOUS");
        assert_eq!(map_flags(0x20), "MAP_ANONYMOUS");
        assert_eq!(map_flags(0x812), "MAP_PRIVATE|MAP_FIXED|MAP_DENYWRITE");
        assert_eq!(at_flags(0), "0");
        assert_eq!(at_flags(0x1100), "AT_SYMLINK_NOFOLLOW|AT_EMPTY_PATH");
    }

    #[test]
    fn strings_are_escaped_and_truncated() {
        let mut s = String::new();
        quote(&mut s, b"a\"b\\\n\x01\xff", 64);
        assert_eq!(s, r#""a\"b\\\n\x01\xff""#);
        let mut s = String::new();
        quote(&mut s, b"abcdef", 3);
        assert_eq!(s, "\"abc\"...");
    }

    #[test]
    fn lines_decode_paths_fds_and_errnos() {
        let (_p, mut m, buf) = test_process();
        m.write(buf, b"/etc/hostname\0hello\n").unwrap();
        let args = [(-100i64) as u64, buf, 0o2000000, 0, 0, 0];
        let l = line(&m, 257, &args, &Err(Errno::ENOENT));
        assert_eq!(
            l,
            "openat(AT_FDCWD, \"/etc/hostname\", O_RDONLY|O_CLOEXEC, 0) = -1 ENOENT (No such file or directory)"
        );
        let l = line(&m, 1, &[1, buf + 14, 6, 0, 0, 0], &Ok(6));
        assert_eq!(l, "write(1, \"hello\\n\", 6) = 6");
        let l = line(&m, 0, &[0, buf, 4096, 0, 0, 0], &Ok(3));
        assert_eq!(l, "read(0, \"/et\", 4096) = 3");
        let l = line(&m, 9, &[0, 4096, 3, 0x22, u64::MAX, 0], &Ok(0x7000_0000));
        assert_eq!(
            l,
            "mmap(0, 0x1000, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x70000000"
        );
        // A bad pointer prints as a pointer.
        let l = line(&m, 2, &[8, 0, 0, 0, 0, 0], &Err(Errno::EFAULT));
        assert!(l.starts_with("open(0x8, O_RDONLY, 0) = -1 EFAULT"), "{l}");
        // Unknown signatures print raw arguments.
        let l = line(&m, 99, &[1, 2, 3, 4, 5, 6], &Ok(0));
        assert_eq!(l, "sysinfo(0x1, 0x2, 0x3, 0x4, 0x5, 0x6) = 0");
    }

    #[test]
    fn notes_record_denied_paths_once() {
        let (mut p, mut m, buf) = test_process();
        p.policy = Policy {
            allow_read: vec![PathBuf::from("/usr/lib")],
            ..Policy::default()
        };
        m.write(buf, b"/etc/passwd\0/no/such/file\0").unwrap();
        let args = [(-100i64) as u64, buf, 0, 0, 0, 0];
        after(&mut p, &m, 257, &args, &Err(Errno::ENOENT));
        after(&mut p, &m, 257, &args, &Err(Errno::ENOENT));
        assert_eq!(p.notes.denied, vec!["/etc/passwd".to_string()]);
        assert_eq!(p.notes.seen.len(), 1);
        // A path that does not exist on the host was not denied by policy.
        let args = [(-100i64) as u64, buf + 12, 0, 0, 0, 0];
        after(&mut p, &m, 257, &args, &Err(Errno::ENOENT));
        assert_eq!(p.notes.denied.len(), 1);
    }

    #[test]
    fn notes_name_policy_refusals() {
        let (mut p, mut m, buf) = test_process();
        m.write(buf, b"out.txt\0").unwrap();
        after(&mut p, &m, 41, &[2, 1, 0, 0, 0, 0], &Err(Errno::EACCES));
        after(&mut p, &m, 57, &[0; 6], &Err(Errno::ENOSYS));
        after(&mut p, &m, 56, &[0x11, 0, 0, 0, 0, 0], &Err(Errno::ENOSYS));
        let args = [(-100i64) as u64, buf, 0o101, 0o644, 0, 0];
        after(&mut p, &m, 257, &args, &Err(Errno::EACCES));
        after(
            &mut p,
            &m,
            9,
            &[0, 1 << 30, 0, 0x22, u64::MAX, 0],
            &Err(Errno::ENOMEM),
        );
        let seen: Vec<&String> = p.notes.seen.iter().collect();
        let has = |needle: &str| seen.iter().any(|s| s.contains(needle));
        assert!(has("refused by policy: socket"), "{seen:?}");
        assert!(has("clone of a new process"), "{seen:?}");
        assert!(
            has("openat /out.txt: writes are allowed only under --allow-write"),
            "{seen:?}"
        );
        assert!(has("--address-space"), "{seen:?}");
        assert_eq!(p.notes.mmap_enomem, Some(1 << 30));
        // fork(2) is no longer refused (linux::child): no note for it.
        assert_eq!(seen.len(), 4);
        // A huge-page mapping refused is not a lack of memory: no --memory hint.
        let mut q = test_process().0;
        after(
            &mut q,
            &m,
            9,
            &[0, 128 << 20, 3, 0x4_0021, u64::MAX, 0],
            &Err(Errno::ENOMEM),
        );
        assert_eq!(q.notes.mmap_enomem, None);
    }
}
