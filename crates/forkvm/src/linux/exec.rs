//! execve/execveat: the calling process's VM gets a new program.
//!
//! The handler checks what Linux checks before the point of no return: the
//! path under the read policy (a program outside `--allow-read` is EACCES,
//! as any file there is), a regular executable file, `#!` scripts (their
//! interpreter resolved the same way, up to 4 levels), a loadable ELF and its
//! interpreter (ld.so) readable too. The run loop then builds the new
//! program with the loader every run uses and moves the process state that
//! survives exec into it (`machine::children`): pid, open files without
//! FD_CLOEXEC, cwd, ignored signals, the signal mask, the private /tmp.

use super::fs::read_path;
use super::table::{Support, SyscallEntry};
use super::thread::Sched;
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStringExt;

/// Most argv + envp strings accepted.
const MAX_STRINGS: usize = 32 * 1024;
/// Most bytes of argv + envp strings (Linux's default ARG_MAX is 2 MiB).
const MAX_ARG_BYTES: usize = 2 << 20;
/// Interpreters nested this deep are refused (ELOOP), as on Linux.
const MAX_SCRIPT_DEPTH: usize = 4;
/// Bytes of a `#!` line looked at (BINPRM_BUF_SIZE).
const SHEBANG_MAX: usize = 256;
const AT_FDCWD: i32 = -100;
const AT_EMPTY_PATH: u64 = 0x1000;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;

/// What the run loop needs to replace the program.
#[derive(Debug)]
pub struct ExecReq {
    /// Host path of the ELF file to load.
    pub program: String,
    /// Its canonical path in the guest's namespace (/proc/self/exe): not
    /// `program` where the file is in a private /tmp or a fork's copy.
    pub guest: Vec<u8>,
    /// The new argv (bytes as the guest gave them).
    pub argv: Vec<OsString>,
    /// The new environment.
    pub env: Vec<OsString>,
    /// The path execve was given (the process's new name comes from it).
    pub name: Vec<u8>,
}

/// Reads a NULL-terminated array of strings at `addr` (NULL: empty).
fn read_strings(mem: &GuestMemory, addr: u64, total: &mut usize) -> Result<Vec<OsString>, Errno> {
    let mut out = Vec::new();
    if addr == 0 {
        return Ok(out);
    }
    for i in 0.. {
        if i >= MAX_STRINGS {
            return Err(Errno::E2BIG);
        }
        let ptr = mem.read_u64(addr.checked_add(8 * i as u64).ok_or(Errno::EFAULT)?)?;
        if ptr == 0 {
            break;
        }
        let s = mem.read_cstr(ptr, MAX_ARG_BYTES as u64)?;
        *total += s.len() + 1;
        if *total > MAX_ARG_BYTES {
            return Err(Errno::E2BIG);
        }
        out.push(OsString::from_vec(s.to_vec()));
    }
    Ok(out)
}

/// The guest path made absolute against the cwd.
fn absolute(p: &Process, path: &[u8]) -> Vec<u8> {
    if path.starts_with(b"/") {
        return path.to_vec();
    }
    let mut abs = p.cwd.clone();
    if !abs.ends_with(b"/") {
        abs.push(b'/');
    }
    abs.extend_from_slice(path);
    abs
}

/// Checks that the guest may read and execute `path`; returns its host path
/// and its canonical guest path.
fn executable(p: &Process, path: &[u8]) -> Result<(String, Vec<u8>), Errno> {
    let mut abs = absolute(p, path);
    let pid = super::child::pid_of(p).to_string();
    if abs == b"/proc/self/exe" || abs == format!("/proc/{pid}/exe").as_bytes() {
        // The running program itself (the host's link would name forkvm).
        abs = p.exe_path.as_bytes().to_vec();
    }
    // Resolved in the guest's namespace, links included, to the host file
    // it is (a guest path names a host path only inside plain read roots).
    super::fs::exec_host_path(p, &abs)
}

/// A `#!` line: the interpreter and its optional argument.
type Shebang = (Vec<u8>, Option<Vec<u8>>);

/// The `#!` line of `host`, if it has one: (interpreter, optional argument).
fn shebang(host: &str) -> Result<Option<Shebang>, Errno> {
    let mut head = [0u8; SHEBANG_MAX];
    let mut f = std::fs::File::open(host).map_err(|e| Errno(e.raw_os_error().unwrap_or(5)))?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(Errno(e.raw_os_error().unwrap_or(5))),
        }
    }
    let head = &head[..n];
    let Some(rest) = head.strip_prefix(b"#!") else {
        return Ok(None);
    };
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    let line: Vec<u8> = line.iter().copied().filter(|&b| b != b'\r').collect();
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return Err(Errno::ENOEXEC);
    }
    let (interp, arg) = match trimmed.iter().position(|b| b.is_ascii_whitespace()) {
        None => (trimmed.to_vec(), None),
        Some(i) => {
            let arg = trimmed[i..].trim_ascii();
            (
                trimmed[..i].to_vec(),
                (!arg.is_empty()).then(|| arg.to_vec()),
            )
        }
    };
    Ok(Some((interp, arg)))
}

/// Resolves `path` with `argv` as execve does (scripts included) into what
/// the run loop loads.
pub fn resolve(
    p: &Process,
    path: &[u8],
    mut argv: Vec<OsString>,
    env: Vec<OsString>,
) -> Result<ExecReq, Errno> {
    let name = path.to_vec();
    let mut path = path.to_vec();
    for _ in 0..=MAX_SCRIPT_DEPTH {
        let (host, guest) = executable(p, &path)?;
        match shebang(&host)? {
            Some((interp, arg)) => {
                // As execve: interpreter, optional argument, the script's path, the rest.
                let script = OsString::from_vec(absolute(p, &path));
                let mut next = vec![OsString::from_vec(interp.clone())];
                if let Some(a) = arg {
                    next.push(OsString::from_vec(a));
                }
                next.push(script);
                next.extend(argv.into_iter().skip(1));
                argv = next;
                path = interp;
            }
            None => {
                let file = crate::loader::ProgramFile::open(&host)
                    .map_err(|e| Errno(e.raw_os_error().unwrap_or(5)))?;
                let image = crate::loader::parse(file.bytes()).map_err(|_| Errno::ENOEXEC)?;
                if let Some(interp) = image.interp() {
                    // The dynamic loader must be readable by the guest too.
                    executable(p, interp.as_bytes()).map_err(|e| {
                        if e == Errno::EACCES {
                            Errno::EACCES
                        } else {
                            Errno::ENOENT
                        }
                    })?;
                }
                return Ok(ExecReq {
                    program: host,
                    guest,
                    argv,
                    env,
                    name,
                });
            }
        }
    }
    Err(Errno::ELOOP)
}

fn exec(p: &mut Process, mem: &GuestMemory, path: Vec<u8>, argv: u64, envp: u64) -> SysResult {
    let mut total = 0;
    let argv = read_strings(mem, argv, &mut total)?;
    let env = read_strings(mem, envp, &mut total)?;
    if p.family.is_none() {
        return Err(Errno::ENOSYS);
    }
    let req = resolve(p, &path, argv, env)?;
    p.sched = Some(Sched::Exec(Box::new(req)));
    Ok(0)
}

/// Implements execve(2).
fn sys_execve(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let path = read_path(mem, a[0])?;
    if path.is_empty() {
        return Err(Errno::ENOENT);
    }
    exec(p, mem, path, a[1], a[2])
}

/// Implements execveat(2): a path relative to a directory descriptor, or
/// with AT_EMPTY_PATH the file a descriptor refers to (fexecve), named
/// /dev/fd/N as Linux names it to a script's interpreter.
fn sys_execveat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [dirfd, path, argv, envp, flags, _] = *a;
    if flags & !(AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0 {
        return Err(Errno::EINVAL);
    }
    let dirfd = dirfd as i32;
    let path = read_path(mem, path)?;
    let path = if path.is_empty() {
        if flags & AT_EMPTY_PATH == 0 {
            return Err(Errno::ENOENT);
        }
        if dirfd == AT_FDCWD {
            return Err(Errno::EACCES);
        }
        p.fds.get(dirfd)?;
        format!("/dev/fd/{dirfd}").into_bytes()
    } else {
        super::fs::absolute_at(p, dirfd, &path)?
    };
    exec(p, mem, path, argv, envp)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 59, name: "execve", handler: sys_execve, support: Support::Partial,
        note: "ELF (static, dynamic) and #! scripts inside --allow-read, in the same VM slot; not under forkvm serve" },
    SyscallEntry { nr: 322, name: "execveat", handler: sys_execveat, support: Support::Partial,
        note: "as execve; AT_EMPTY_PATH runs the file a descriptor refers to (fexecve)" },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_lines_split_like_linux() {
        let dir = std::env::temp_dir().join(format!("forkvm-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s");
        std::fs::write(&f, b"#! /bin/sh  -e -x \nexit 0\n").unwrap();
        let got = shebang(f.to_str().unwrap()).unwrap().unwrap();
        assert_eq!(got.0, b"/bin/sh");
        assert_eq!(got.1.as_deref(), Some(&b"-e -x"[..]));
        std::fs::write(&f, b"\x7fELF").unwrap();
        assert!(shebang(f.to_str().unwrap()).unwrap().is_none());
        std::fs::write(&f, b"#!\n").unwrap();
        assert_eq!(shebang(f.to_str().unwrap()), Err(Errno::ENOEXEC));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn exec_outside_the_policy_is_eacces_or_enoent() {
        let (mut p, mut m, buf) = super::super::test_process();
        m.write(buf, b"/bin/true\0").unwrap();
        // No family (a serve fork): ENOSYS before anything else is looked at.
        assert_eq!(
            super::super::test_call(&mut p, &mut m, sys_execve, &[buf, 0, 0]),
            Err(Errno::ENOSYS)
        );
        // With an empty allow-list the file is not there for the guest.
        let r = resolve(&p, b"/bin/true", vec!["true".into()], vec![]);
        assert!(
            matches!(r, Err(Errno::EACCES) | Err(Errno::ENOENT)),
            "{r:?}"
        );
    }
}
