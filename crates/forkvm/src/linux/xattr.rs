//! Extended attributes. The guest sees files without any: reads answer
//! ENODATA, lists are empty, and setting or removing one is not supported
//! (ENOTSUP). Paths are checked as stat would check them, so a file outside
//! the allow-list is ENOENT/EACCES as usual and the host's real attributes
//! never leak.

use super::fdtable::lock;
use super::fs::{check_path, read_path};
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;

/// Longest attribute name (XATTR_NAME_MAX).
const NAME_MAX: u64 = 255;
/// Largest value or list size the kernel accepts (XATTR_SIZE_MAX / XATTR_LIST_MAX).
const SIZE_MAX: u64 = 65536;

/// Reads and checks an attribute name: ERANGE if empty or too long,
/// EOPNOTSUPP outside the known namespaces.
fn check_name(mem: &GuestMemory, addr: u64) -> Result<(), Errno> {
    let name = match mem.read_cstr(addr, NAME_MAX + 1) {
        Ok(n) => n,
        Err(_) if mem.read(addr, NAME_MAX + 1).is_ok() => return Err(Errno::ERANGE),
        Err(_) => return Err(Errno::EFAULT),
    };
    if name.is_empty() {
        return Err(Errno::ERANGE);
    }
    let known = [&b"user."[..], b"trusted.", b"security.", b"system."];
    if !known
        .iter()
        .any(|k| name.starts_with(k) && name.len() > k.len())
    {
        return Err(Errno::EOPNOTSUPP);
    }
    Ok(())
}

/// The file behind a path (following the last symlink or not), as stat sees it.
fn path_target(p: &Process, mem: &GuestMemory, addr: u64, follow: bool) -> Result<(), Errno> {
    check_path(p, &read_path(mem, addr)?, follow)
}

/// The file behind a descriptor: EBADF if not open or opened with O_PATH.
fn fd_target(p: &Process, fd: u64) -> Result<(), Errno> {
    let f = p.fds.get(fd as i32)?;
    if lock(&f).path_only() {
        return Err(Errno::EBADF);
    }
    Ok(())
}

/// Reading: the name is checked, then ENODATA (the value buffer is never written).
fn get(mem: &GuestMemory, name: u64) -> SysResult {
    check_name(mem, name)?;
    Err(Errno::ENODATA)
}

/// Implements getxattr(2): no attribute exists.
fn sys_getxattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    path_target(p, mem, a[0], true)?;
    get(mem, a[1])
}

/// Implements lgetxattr(2): no attribute exists.
fn sys_lgetxattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    path_target(p, mem, a[0], false)?;
    get(mem, a[1])
}

/// Implements fgetxattr(2): no attribute exists.
fn sys_fgetxattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    fd_target(p, a[0])?;
    get(mem, a[1])
}

/// Implements listxattr(2): the list is empty.
fn sys_listxattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    path_target(p, mem, a[0], true)?;
    Ok(0)
}

/// Implements llistxattr(2): the list is empty.
fn sys_llistxattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    path_target(p, mem, a[0], false)?;
    Ok(0)
}

/// Implements flistxattr(2): the list is empty.
fn sys_flistxattr(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    fd_target(p, a[0])?;
    Ok(0)
}

/// Setting: the name is checked, then ENOTSUP.
fn set(mem: &GuestMemory, name: u64, size: u64, flags: u64) -> SysResult {
    // XATTR_CREATE | XATTR_REPLACE.
    if flags & !3 != 0 {
        return Err(Errno::EINVAL);
    }
    check_name(mem, name)?;
    if size > SIZE_MAX {
        return Err(Errno::E2BIG);
    }
    Err(Errno::EOPNOTSUPP)
}

/// Implements setxattr(2): not supported (ENOTSUP).
fn sys_setxattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    path_target(p, mem, a[0], true)?;
    set(mem, a[1], a[3], a[4])
}

/// Implements lsetxattr(2): not supported (ENOTSUP).
fn sys_lsetxattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    path_target(p, mem, a[0], false)?;
    set(mem, a[1], a[3], a[4])
}

/// Implements fsetxattr(2): not supported (ENOTSUP).
fn sys_fsetxattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    fd_target(p, a[0])?;
    set(mem, a[1], a[3], a[4])
}

/// Implements removexattr(2): not supported (ENOTSUP).
fn sys_removexattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    path_target(p, mem, a[0], true)?;
    check_name(mem, a[1])?;
    Err(Errno::EOPNOTSUPP)
}

/// Implements lremovexattr(2): not supported (ENOTSUP).
fn sys_lremovexattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    path_target(p, mem, a[0], false)?;
    check_name(mem, a[1])?;
    Err(Errno::EOPNOTSUPP)
}

/// Implements fremovexattr(2): not supported (ENOTSUP).
fn sys_fremovexattr(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    fd_target(p, a[0])?;
    check_name(mem, a[1])?;
    Err(Errno::EOPNOTSUPP)
}

const NONE: &str = "files have no extended attributes: ENODATA";
const EMPTY: &str = "files have no extended attributes: an empty list";
const NOSET: &str = "extended attributes cannot be set or removed: ENOTSUP";

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 188, name: "setxattr", handler: sys_setxattr, support: Support::Refused, note: NOSET },
    SyscallEntry { nr: 189, name: "lsetxattr", handler: sys_lsetxattr, support: Support::Refused, note: NOSET },
    SyscallEntry { nr: 190, name: "fsetxattr", handler: sys_fsetxattr, support: Support::Refused, note: NOSET },
    SyscallEntry { nr: 191, name: "getxattr", handler: sys_getxattr, support: Support::Partial, note: NONE },
    SyscallEntry { nr: 192, name: "lgetxattr", handler: sys_lgetxattr, support: Support::Partial, note: NONE },
    SyscallEntry { nr: 193, name: "fgetxattr", handler: sys_fgetxattr, support: Support::Partial, note: NONE },
    SyscallEntry { nr: 194, name: "listxattr", handler: sys_listxattr, support: Support::Partial, note: EMPTY },
    SyscallEntry { nr: 195, name: "llistxattr", handler: sys_llistxattr, support: Support::Partial, note: EMPTY },
    SyscallEntry { nr: 196, name: "flistxattr", handler: sys_flistxattr, support: Support::Partial, note: EMPTY },
    SyscallEntry { nr: 197, name: "removexattr", handler: sys_removexattr, support: Support::Refused, note: NOSET },
    SyscallEntry { nr: 198, name: "lremovexattr", handler: sys_lremovexattr, support: Support::Refused, note: NOSET },
    SyscallEntry { nr: 199, name: "fremovexattr", handler: sys_fremovexattr, support: Support::Refused, note: NOSET },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::USER_BASE;
    use crate::linux::test_call as call;
    use crate::linux::{test_setup, Policy};

    #[test]
    fn attributes_are_absent_and_paths_are_checked_like_stat() {
        let dir = std::env::temp_dir().join(format!("forkvm-xattr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), b"x").unwrap();
        let (mut p, mut m) = test_setup(Policy {
            allow_read: vec![dir.clone()],
            ..Policy::default()
        });
        let (path, name, hidden, missing) = (
            USER_BASE,
            USER_BASE + 0x400,
            USER_BASE + 0x800,
            USER_BASE + 0xc00,
        );
        let mut pb = dir.join("f").into_os_string().into_encoded_bytes();
        pb.push(0);
        m.write(path, &pb).unwrap();
        m.write(name, b"user.mime_type\0").unwrap();
        m.write(hidden, b"/etc/shadow\0").unwrap();
        let mut mb = dir.join("nope").into_os_string().into_encoded_bytes();
        mb.push(0);
        m.write(missing, &mb).unwrap();
        let buf = USER_BASE + 0x1000;
        for h in [sys_getxattr as crate::linux::Handler, sys_lgetxattr] {
            assert_eq!(
                call(&mut p, &mut m, h, &[path, name, buf, 64]),
                Err(Errno::ENODATA)
            );
            assert_eq!(
                call(&mut p, &mut m, h, &[missing, name, buf, 64]),
                Err(Errno::ENOENT)
            );
            let r = call(&mut p, &mut m, h, &[hidden, name, buf, 64]);
            assert!(matches!(r, Err(Errno::ENOENT | Errno::EACCES)), "{r:?}");
            assert_eq!(
                call(&mut p, &mut m, h, &[0, name, buf, 64]),
                Err(Errno::EFAULT)
            );
            assert_eq!(
                call(&mut p, &mut m, h, &[path, 0, buf, 64]),
                Err(Errno::EFAULT)
            );
        }
        for h in [sys_listxattr as crate::linux::Handler, sys_llistxattr] {
            assert_eq!(call(&mut p, &mut m, h, &[path, buf, 64]), Ok(0));
            assert_eq!(
                call(&mut p, &mut m, h, &[missing, buf, 64]),
                Err(Errno::ENOENT)
            );
        }
        assert_eq!(call(&mut p, &mut m, sys_flistxattr, &[1, buf, 64]), Ok(0));
        assert_eq!(
            call(&mut p, &mut m, sys_flistxattr, &[99, buf, 64]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_fgetxattr, &[1, name, buf, 64]),
            Err(Errno::ENODATA)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_setxattr, &[path, name, buf, 1, 0]),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_setxattr, &[path, name, buf, 1, 8]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_fremovexattr, &[1, name]),
            Err(Errno::EOPNOTSUPP)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_removexattr, &[missing, name]),
            Err(Errno::ENOENT)
        );
        // Names: empty or too long is ERANGE, an unknown namespace EOPNOTSUPP.
        m.write(name, b"\0").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_getxattr, &[path, name, buf, 64]),
            Err(Errno::ERANGE)
        );
        m.write(name, &[b'a'; 300]).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_getxattr, &[path, name, buf, 64]),
            Err(Errno::ERANGE)
        );
        m.write(name, b"bogus.x\0").unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_getxattr, &[path, name, buf, 64]),
            Err(Errno::EOPNOTSUPP)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
