//! From what the user typed to what the VM runs, as a shell and execve(2)
//! would do it: PATH lookup, `#!` scripts, and the default allow-list.
//!
//! - A PROGRAM without a `/` is looked up in the guest's `PATH` (given with
//!   `--env PATH=...`), or else in forkvm's own `PATH`, as env(1) does;
//!   argv[0] stays as typed.
//! - A file starting with `#!` runs its interpreter with the optional
//!   argument and the script's path, as execve(2) does (up to 4 levels).
//!   `#!/usr/bin/env NAME` runs NAME looked up in PATH, as env would (the
//!   guest cannot start env as a second process).
//! - The program file and the scripts are always readable by the guest (the
//!   user named them); system library directories are too unless
//!   `--no-default-allow`: see [`DEFAULT_ALLOW_READ`].

use anyhow::{bail, Context};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Read-only roots every `forkvm run` gets unless `--no-default-allow`:
/// shared libraries, the loader's cache, language runtimes' standard
/// libraries under the lib directories, time zones. Nothing user-specific
/// (/home, /root) and no /etc beyond the loader cache and the local time zone.
pub const DEFAULT_ALLOW_READ: &[&str] = &[
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/share/zoneinfo",
    "/etc/ld.so.cache",
    "/etc/localtime",
];

/// Checks that each of `dirs` (given with `flag`: `--allow-write`,
/// `--persist`) is a directory: a program writes under a directory, never
/// in a file root alone (its name could not be created, replaced or
/// removed), and a missing one would leave every write refused with no word
/// of why.
pub fn check_write_dirs(dirs: &[PathBuf], flag: &str) -> anyhow::Result<()> {
    for d in dirs {
        match std::fs::metadata(d) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!(
                "{flag} {}: not a directory (a program writes under a directory: allow the one that holds the file)",
                d.display()
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                bail!("{flag} {}: no such directory", d.display())
            }
            Err(e) => bail!("{flag} {}: {e}", d.display()),
        }
    }
    Ok(())
}

/// What `--allow-connect` allows, resolved once at start-up.
#[derive(Debug, Default)]
pub struct Connect {
    /// Every address a guest may connect to.
    pub addrs: Vec<std::net::SocketAddr>,
    /// Each host name given (not an address literal) with the addresses it
    /// resolved to, for the guest's own /etc/hosts.
    pub names: Vec<(String, std::net::IpAddr)>,
}

/// Resolves `--allow-connect HOST:PORT` values once, at start-up: every
/// address HOST has (IPv4 and IPv6; `localhost` through the host's resolver).
pub fn resolve_connect(specs: &[String]) -> anyhow::Result<Connect> {
    use std::net::ToSocketAddrs;
    let mut out = Connect::default();
    for spec in specs {
        let addrs = spec
            .to_socket_addrs()
            .with_context(|| format!("--allow-connect {spec}: expected HOST:PORT that resolves"))?;
        let host = spec.rsplit_once(':').map_or(spec.as_str(), |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let named = host.parse::<std::net::IpAddr>().is_err();
        for a in addrs {
            if !out.addrs.contains(&a) {
                out.addrs.push(a);
            }
            let name = (host.to_string(), a.ip());
            if named && !out.names.contains(&name) {
                out.names.push(name);
            }
        }
    }
    for a in &out.addrs {
        tracing::debug!("--allow-connect: the guest may connect to {a}");
    }
    Ok(out)
}

/// Interpreters nested this deep are refused (as Linux does beyond 4 levels).
const MAX_SCRIPT_DEPTH: usize = 4;

/// Bytes of a `#!` line looked at (Linux's BINPRM_BUF_SIZE).
const SHEBANG_MAX: usize = 256;

/// What to start in the VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The ELF file to load (host path).
    pub program: PathBuf,
    /// The guest's argv (arguments pass as bytes, UTF-8 or not).
    pub argv: Vec<OsString>,
    /// Files the guest must be able to read: the program and any scripts.
    pub files: Vec<PathBuf>,
}

/// Resolves `argv` (argv[0] as typed) with `path` as the search PATH.
pub fn resolve(argv: &[OsString], path: &str) -> anyhow::Result<Launch> {
    let Some(first) = argv.first() else {
        bail!("no program given");
    };
    let Some(first) = first.to_str() else {
        bail!("the program name {first:?} is not UTF-8");
    };
    let mut program = find_program(first, path)?;
    let mut argv = argv.to_vec();
    let mut files = vec![program.clone()];
    for _ in 0..=MAX_SCRIPT_DEPTH {
        let Some((interp, arg)) = shebang(&program)? else {
            return Ok(Launch {
                program,
                argv,
                files,
            });
        };
        // As execve: interpreter, optional argument, the script's path, the rest.
        // The guest's cwd is not forkvm's: the interpreter gets an absolute path.
        let script = std::path::absolute(&program).unwrap_or_else(|_| program.clone());
        let script_name = script.display().to_string();
        let rest = argv.get(1..).unwrap_or_default().to_vec();
        let env_name = match (is_env(&interp), &arg) {
            (true, Some(a)) if !a.starts_with('-') && !a.contains(char::is_whitespace) => {
                Some(a.clone())
            }
            _ => None,
        };
        argv = match env_name {
            // `#!/usr/bin/env NAME`: what env would exec, without env.
            Some(name) => {
                program = find_program(&name, path)
                    .with_context(|| format!("{script_name}: cannot run its #! line"))?;
                [name.into(), script.into_os_string()]
                    .into_iter()
                    .chain(rest)
                    .collect()
            }
            None => {
                program = PathBuf::from(&interp);
                if !program.is_absolute() {
                    bail!("{script_name}: the #! interpreter {interp} is not an absolute path");
                }
                std::iter::once(interp.into())
                    .chain(arg.map(OsString::from))
                    .chain([script.into_os_string()])
                    .chain(rest)
                    .collect()
            }
        };
        files.push(program.clone());
    }
    bail!("{first}: more than {MAX_SCRIPT_DEPTH} levels of #! interpreters")
}

/// Whether `interp` is env(1).
fn is_env(interp: &str) -> bool {
    matches!(interp, "/usr/bin/env" | "/bin/env")
}

/// `name` itself if it contains a `/`, else the first executable regular
/// file `DIR/name` for DIR in `path` (empty entries are skipped).
pub fn find_program(name: &str, path: &str) -> anyhow::Result<PathBuf> {
    if name.is_empty() {
        bail!("the program name is empty");
    }
    if name.contains('/') {
        return Ok(PathBuf::from(name));
    }
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .with_context(|| format!("{name}: not found in PATH ({path})"))
}

/// The `#!` line of `file` (interpreter, optional argument), or None for any other file.
fn shebang(file: &Path) -> anyhow::Result<Option<(String, Option<String>)>> {
    let mut f =
        std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut head = Vec::with_capacity(SHEBANG_MAX);
    // A directory or unreadable file fails here or later in the loader, with its own message.
    if f.by_ref()
        .take(SHEBANG_MAX as u64)
        .read_to_end(&mut head)
        .is_err()
    {
        return Ok(None);
    }
    Ok(parse_shebang(&head))
}

/// Parses a `#!` line as Linux does: the interpreter is the first word, the
/// rest of the line (trimmed) is one optional argument.
fn parse_shebang(head: &[u8]) -> Option<(String, Option<String>)> {
    let line = head.strip_prefix(b"#!")?;
    let line = match line.iter().position(|&b| b == b'\n') {
        Some(n) => &line[..n],
        None => line,
    };
    let line = String::from_utf8_lossy(line);
    let line = line.trim_matches([' ', '\t', '\r']);
    let (interp, arg) = match line.find([' ', '\t']) {
        Some(i) => (&line[..i], Some(line[i..].trim_matches([' ', '\t']))),
        None => (line, None),
    };
    if interp.is_empty() {
        return None;
    }
    Some((
        interp.to_string(),
        arg.filter(|a| !a.is_empty()).map(str::to_string),
    ))
}

/// The PATH to search: the guest's (`--env PATH=...`), else forkvm's own.
pub fn search_path(env: &[String]) -> String {
    env.iter()
        .rev()
        .find_map(|kv| kv.strip_prefix("PATH="))
        .map(str::to_string)
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_string())
}

/// The default read-only roots that exist on this host.
pub fn default_allow_read() -> Vec<PathBuf> {
    DEFAULT_ALLOW_READ
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn shebang_lines_parse_like_linux() {
        assert_eq!(
            parse_shebang(b"#!/bin/sh\necho"),
            Some(("/bin/sh".into(), None))
        );
        assert_eq!(
            parse_shebang(b"#! /usr/bin/python3 -u -x \r\n"),
            Some(("/usr/bin/python3".into(), Some("-u -x".into())))
        );
        assert_eq!(parse_shebang(b"#!\n"), None);
        assert_eq!(parse_shebang(b"\x7fELF"), None);
    }

    #[test]
    fn path_lookup_finds_executables_only() {
        let dir = std::env::temp_dir().join(format!("forkvm-launch-{}", std::process::id()));
        let a = dir.join("a");
        let b = dir.join("b");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("tool"), b"not executable").unwrap();
        std::fs::write(b.join("tool"), b"#!/bin/true\n").unwrap();
        std::fs::set_permissions(b.join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}::{}", a.display(), b.display());
        assert_eq!(find_program("tool", &path).unwrap(), b.join("tool"));
        assert!(find_program("missing", &path).is_err());
        assert_eq!(
            find_program("./rel/x", "").unwrap(),
            PathBuf::from("./rel/x")
        );

        // A script runs its interpreter with the script's path.
        let l = resolve(&os(&["tool", "x"]), &path).unwrap();
        assert_eq!(l.program, PathBuf::from("/bin/true"));
        let script = b.join("tool").to_string_lossy().into_owned();
        assert_eq!(l.argv, os(&["/bin/true", &script, "x"]));
        assert_eq!(l.files, vec![b.join("tool"), PathBuf::from("/bin/true")]);

        // `#!/usr/bin/env NAME` runs NAME from PATH, as env would.
        std::fs::write(a.join("s"), b"#!/usr/bin/env tool\n").unwrap();
        let l = resolve(&os(&[a.join("s").to_str().unwrap()]), &path).unwrap();
        assert_eq!(l.program, PathBuf::from("/bin/true"));
        assert_eq!(l.argv[0], "/bin/true");
        assert_eq!(l.argv[1], OsString::from(&script));

        // Scripts that name themselves loop: refused.
        let me = a.join("me");
        std::fs::write(&me, format!("#!{}\n", me.display())).unwrap();
        assert!(resolve(&os(&[me.to_str().unwrap()]), &path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn guest_path_wins_over_the_host_path() {
        assert_eq!(search_path(&s(&["A=1", "PATH=/x:/y"])), "/x:/y".to_string());
    }
}
