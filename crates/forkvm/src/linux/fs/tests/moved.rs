//! Directory descriptors and the working directory after their directory
//! is renamed (see `fs/moved.rs`).

use super::*;

fn rename(p: &mut Process, m: &mut GuestMemory, from: &str, to: &str) -> SysResult {
    put_path(m, PATH, from);
    put_path(m, PATH + 0x100, to);
    call(p, m, sys_rename, &[PATH, PATH + 0x100])
}

fn getcwd(p: &mut Process, m: &mut GuestMemory) -> String {
    let n = call(p, m, sys_getcwd, &[BUF, 4096]).unwrap();
    String::from_utf8(m.read(BUF, n - 1).unwrap().to_vec()).unwrap()
}

/// In the private /tmp, whose host path is not its guest path.
#[test]
fn renamed_directories_are_followed() {
    let (mut p, mut m) = setup(vec![]);
    put_path(&mut m, PATH, "/tmp/d");
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]), Ok(0));
    // Mode 0600: the guest reads it again below (a mode-0 file it may not).
    put_path(&mut m, PATH, "/tmp/d/f");
    let flags = u64::from(O_CREAT | O_WRONLY);
    call(
        &mut p,
        &mut m,
        sys_openat,
        &[AT_FDCWD as u64, PATH, flags, 0o600],
    )
    .unwrap();
    let d = open(&mut p, &mut m, "/tmp/d", O_RDONLY | O_DIRECTORY).unwrap();
    assert_eq!(rename(&mut p, &mut m, "/tmp/d", "/tmp/e"), Ok(0));
    put_path(&mut m, PATH, &format!("/proc/self/fd/{d}"));
    let n = call(&mut p, &mut m, sys_readlink, &[PATH, BUF, 100]).unwrap();
    assert_eq!(m.read(BUF, n).unwrap(), b"/tmp/e");
    put_path(&mut m, PATH, "f");
    assert!(call(&mut p, &mut m, sys_openat, &[d, PATH, u64::from(O_RDONLY)]).is_ok());
    // A new directory at the old name is not the one the descriptor is.
    put_path(&mut m, PATH, "/tmp/d");
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]), Ok(0));
    put_path(&mut m, PATH, "f");
    assert!(call(&mut p, &mut m, sys_openat, &[d, PATH, u64::from(O_RDONLY)]).is_ok());
    // The working directory, renamed from inside.
    put_path(&mut m, PATH, "/tmp/e");
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    assert_eq!(rename(&mut p, &mut m, "/tmp/e", "/tmp/g"), Ok(0));
    assert_eq!(getcwd(&mut p, &mut m), "/tmp/g");
    assert!(open(&mut p, &mut m, "f", O_RDONLY).is_ok());
    // fchdir to the descriptor, renamed again.
    assert_eq!(rename(&mut p, &mut m, "/tmp/g", "/tmp/h"), Ok(0));
    assert_eq!(call(&mut p, &mut m, sys_fchdir, &[d]), Ok(0));
    assert_eq!(getcwd(&mut p, &mut m), "/tmp/h");
    // ".." from it stays in the namespace.
    assert!(stat(&mut p, &mut m, "../../../..", true).is_ok());
    assert_eq!(getcwd(&mut p, &mut m), "/tmp/h");
}
