//! Write roots, metadata changes, ownership, the private /tmp, and forks.

use super::*;

#[test]
fn metadata_changes_under_write_roots() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let t = Tree::new();
    let rw = t.root.join("rw");
    std::fs::create_dir(&rw).unwrap();
    let (mut p, mut m) = setup_rw(vec![t.allowed()], vec![rw.clone()]);
    let f = t.s("rw/f");
    let fd = open(&mut p, &mut m, &f, O_CREAT | O_WRONLY).unwrap();
    // fchmod / chmod / fchmodat.
    assert_eq!(call(&mut p, &mut m, sys_fchmod, &[fd, 0o640]), Ok(0));
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o640);
    put_path(&mut m, PATH, &f);
    assert_eq!(call(&mut p, &mut m, sys_chmod, &[PATH, 0o604]), Ok(0));
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o604);
    let cwd = AT_FDCWD as u64;
    assert_eq!(
        call(&mut p, &mut m, sys_fchmodat, &[cwd, PATH, 0o600, 0]),
        Ok(0)
    );
    // fchmodat has no flags argument: whatever is in the fourth register is ignored.
    assert_eq!(
        call(&mut p, &mut m, sys_fchmodat, &[cwd, PATH, 0o600, 0xdead]),
        Ok(0)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_fchmodat2, &[cwd, PATH, 0o600, 0xdead]),
        Err(Errno::EINVAL)
    );
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o600);
    // chown: to the guest's own ids only.
    let me = u64::from(GUEST_ID);
    assert_eq!(call(&mut p, &mut m, sys_fchown, &[fd, me, me]), Ok(0));
    assert_eq!(
        call(&mut p, &mut m, sys_chown, &[PATH, u64::MAX, me]),
        Ok(0)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_chown, &[PATH, 0, me]),
        Err(Errno::EPERM)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_fchown, &[fd, me, 0]),
        Err(Errno::EPERM)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_fchownat, &[cwd, PATH, me, me, 0]),
        Ok(0)
    );
    // Ownership shows as the guest's.
    let st = call(&mut p, &mut m, sys_fstat, &[fd, BUF]);
    assert_eq!(st, Ok(0));
    assert_eq!(m.read_u32(BUF + 28), Ok(GUEST_ID));
    assert_eq!(m.read_u32(BUF + 32), Ok(GUEST_ID));
    // utimensat with explicit times, then futimens(NULL).
    let times = [1_000_000i64, 5, 2_000_000, 7];
    for (i, v) in times.iter().enumerate() {
        m.write(BUF + 8 * i as u64, &v.to_le_bytes()).unwrap();
    }
    assert_eq!(
        call(&mut p, &mut m, sys_utimensat, &[cwd, PATH, BUF, 0]),
        Ok(0)
    );
    let md = std::fs::metadata(&f).unwrap();
    assert_eq!(
        (md.atime(), md.mtime(), md.mtime_nsec()),
        (1_000_000, 2_000_000, 7)
    );
    assert_eq!(call(&mut p, &mut m, sys_utimensat, &[fd, 0, 0, 0]), Ok(0));
    assert!(std::fs::metadata(&f).unwrap().mtime() > 2_000_000);
    m.write(BUF + 8, &(2_000_000_000i64).to_le_bytes()).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_utimensat, &[cwd, PATH, BUF, 0]),
        Err(Errno::EINVAL)
    );
    // statfs: writable here, read-only in the read root.
    assert_eq!(call(&mut p, &mut m, sys_statfs, &[PATH, BUF]), Ok(0));
    assert_eq!(m.read_u64(BUF + 80).unwrap() & 1, 0);
    assert_eq!(call(&mut p, &mut m, sys_fstatfs, &[fd, BUF]), Ok(0));
    assert_eq!(m.read_u64(BUF + 80).unwrap() & 1, 0);
    let h = format!("{}\0", t.s("allowed/hello.txt"));
    m.write(PATH + 0x200, h.as_bytes()).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_statfs, &[PATH + 0x200, BUF]),
        Ok(0)
    );
    assert_eq!(m.read_u64(BUF + 80).unwrap() & 1, 1);
    // truncate.
    assert_eq!(call(&mut p, &mut m, sys_truncate, &[PATH, 10]), Ok(0));
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 10);
    // A read-only file of the guest's cannot be opened for writing or truncated.
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
    assert_eq!(open(&mut p, &mut m, &f, O_WRONLY), Err(Errno::EACCES));
    put_path(&mut m, PATH, &f);
    assert_eq!(
        call(&mut p, &mut m, sys_truncate, &[PATH, 0]),
        Err(Errno::EACCES)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_access, &[PATH, 2]),
        Err(Errno::EACCES)
    );
    assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 4]), Ok(0));
    assert_eq!(call(&mut p, &mut m, sys_chmod, &[PATH, 0o644]), Ok(0));
    assert_eq!(call(&mut p, &mut m, sys_access, &[PATH, 2]), Ok(0));
    // symlink, link, mknod.
    put_path(&mut m, PATH, "f");
    put_path(&mut m, PATH + 0x100, &t.s("rw/l"));
    assert_eq!(
        call(&mut p, &mut m, sys_symlink, &[PATH, PATH + 0x100]),
        Ok(0)
    );
    assert_eq!(std::fs::read_link(rw.join("l")).unwrap(), Path::new("f"));
    put_path(&mut m, PATH, &t.s("rw/f"));
    put_path(&mut m, PATH + 0x100, &t.s("rw/h"));
    assert_eq!(call(&mut p, &mut m, sys_link, &[PATH, PATH + 0x100]), Ok(0));
    assert_eq!(std::fs::metadata(rw.join("h")).unwrap().ino(), md.ino());
    put_path(&mut m, PATH, &t.s("rw/n"));
    assert_eq!(call(&mut p, &mut m, sys_mknod, &[PATH, 0o100644, 0]), Ok(0));
    assert!(rw.join("n").is_file());
    assert_eq!(
        call(&mut p, &mut m, sys_mknod, &[PATH, 0o20644, 0]),
        Err(Errno::EPERM)
    );
    // A fifo can be made, and opening it never blocks the host thread (see
    // `fifos_open_as_on_linux`).
    put_path(&mut m, PATH, &t.s("rw/fifo"));
    assert_eq!(call(&mut p, &mut m, sys_mknod, &[PATH, 0o10644, 0]), Ok(0));
    assert_eq!(
        open(&mut p, &mut m, &t.s("rw/fifo"), O_WRONLY | O_NONBLOCK),
        Err(Errno::ENXIO)
    );
    assert_eq!(open(&mut p, &mut m, &t.s("rw/fifo"), O_RDONLY), Ok(0));
    assert!(p.sched.take().is_some());
    crate::linux::fs::interrupted_open(&mut p);
    // A read-only file cannot get a writable name, nor be changed.
    put_path(&mut m, PATH, &t.s("allowed/hello.txt"));
    put_path(&mut m, PATH + 0x100, &t.s("rw/stolen"));
    assert_eq!(
        call(&mut p, &mut m, sys_link, &[PATH, PATH + 0x100]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_chown, &[PATH, me, me]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_utimensat, &[cwd, PATH, 0, 0]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_truncate, &[PATH, 0]),
        Err(Errno::EROFS)
    );
    let ro = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_RDONLY).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_fchmod, &[ro, 0o777]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_fchown, &[ro, me, me]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_utimensat, &[ro, 0, 0, 0]),
        Err(Errno::EROFS)
    );
    // A link in the write root to a read-only file does not make it writable.
    std::os::unix::fs::symlink(t.allowed().join("hello.txt"), rw.join("ro_link")).unwrap();
    put_path(&mut m, PATH, &t.s("rw/ro_link"));
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_chown, &[PATH, me, me]),
        Err(Errno::EROFS)
    );
    // The link itself is the guest's.
    assert_eq!(call(&mut p, &mut m, sys_lchown, &[PATH, me, me]), Ok(0));
    // Missing things are ENOENT, not EROFS.
    put_path(&mut m, PATH, &t.s("rw/missing"));
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::ENOENT)
    );
    put_path(&mut m, PATH, "/no/such/place");
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]),
        Err(Errno::ENOENT)
    );
}

#[test]
fn missing_parents_are_enoent() {
    let t = Tree::new();
    let rw = t.root.join("rw");
    std::fs::create_dir(&rw).unwrap();
    let (mut p, mut m) = setup_rw(vec![t.allowed()], vec![rw.clone()]);
    let missing = t.s("rw/a/b");
    assert_eq!(
        open(&mut p, &mut m, &missing, O_CREAT | O_WRONLY),
        Err(Errno::ENOENT)
    );
    put_path(&mut m, PATH, &missing);
    put_path(&mut m, PATH + 0x100, &t.s("rw/x"));
    assert_eq!(
        call(&mut p, &mut m, sys_mkdir, &[PATH, 0o777]),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_mknod, &[PATH, 0o100644, 0]),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_symlink, &[PATH + 0x100, PATH]),
        Err(Errno::ENOENT)
    );
    std::fs::write(rw.join("x"), b"x").unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH + 0x100, PATH]),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_link, &[PATH + 0x100, PATH]),
        Err(Errno::ENOENT)
    );
    // A file in the way is ENOTDIR; an existing read-only parent EROFS.
    put_path(&mut m, PATH, &t.s("rw/x/y"));
    assert_eq!(
        call(&mut p, &mut m, sys_mkdir, &[PATH, 0o777]),
        Err(Errno::ENOTDIR)
    );
    put_path(&mut m, PATH, &t.s("allowed/newdir"));
    assert_eq!(
        call(&mut p, &mut m, sys_mkdir, &[PATH, 0o777]),
        Err(Errno::EROFS)
    );
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/new"), O_CREAT | O_WRONLY),
        Err(Errno::EACCES)
    );
    // Then creating the parent and retrying works.
    put_path(&mut m, PATH, &t.s("rw/a"));
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o777]), Ok(0));
    assert!(open(&mut p, &mut m, &missing, O_CREAT | O_WRONLY).is_ok());
}

#[test]
fn ownership_maps_the_host_user_to_the_guest() {
    use std::os::unix::fs::MetadataExt;
    let t = Tree::new();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    let f = t.s("allowed/hello.txt");
    let host = std::fs::metadata(&f).unwrap();
    assert_eq!(host.uid(), rustix::process::geteuid().as_raw());
    stat(&mut p, &mut m, &f, true).unwrap();
    assert_eq!(m.read_u32(BUF + 28), Ok(GUEST_ID));
    assert_eq!(m.read_u32(BUF + 32), Ok(GUEST_ID));
    // Another owner shows as the overflow id.
    let mut other = rustix::fs::stat(f.as_str()).unwrap();
    other.st_uid = other.st_uid.wrapping_add(1);
    other.st_gid = other.st_gid.wrapping_add(1);
    let info = StatInfo::from(&other);
    assert_eq!((info.uid, info.gid), (OVERFLOW_ID, OVERFLOW_ID));
}

#[test]
fn private_tmp_and_dev_shm() {
    let (mut p, mut m) = setup(vec![]);
    let host_tmp = p.tmp.host_dir(b"/tmp");
    // Nothing exists on the host until the guest uses it.
    assert!(!host_tmp.exists());
    let fd = open(&mut p, &mut m, "/tmp/a.txt", O_CREAT | O_RDWR).unwrap();
    assert!(host_tmp.join("a.txt").is_file());
    m.write(BUF, b"hello").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[fd, BUF, 5]), Ok(5));
    assert_eq!(call(&mut p, &mut m, io(8), &[fd, 0, 0]), Ok(0));
    assert_eq!(read_all(&mut p, &mut m, fd), b"hello");
    put_path(&mut m, PATH, "/tmp/d");
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]), Ok(0));
    put_path(&mut m, PATH, "/tmp/a.txt");
    put_path(&mut m, PATH + 0x100, "/tmp/d/b.txt");
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x100]),
        Ok(0)
    );
    let st = stat(&mut p, &mut m, "/tmp/d/b.txt", true).unwrap();
    assert_eq!((st.mode & S_IFMT, st.size), (S_IFREG, 5));
    assert_eq!(m.read_u32(BUF + 28), Ok(GUEST_ID));
    // /tmp is sticky and world-writable, as on Linux.
    let st = stat(&mut p, &mut m, "/tmp", true).unwrap();
    assert_eq!(st.mode & 0o7777, 0o1777);
    let dir = open(&mut p, &mut m, "/tmp", O_RDONLY | O_DIRECTORY).unwrap();
    assert_eq!(list(&mut p, &mut m, dir), [".", "..", "d"]);
    let dir = open(&mut p, &mut m, "/", O_RDONLY | O_DIRECTORY).unwrap();
    assert_eq!(list(&mut p, &mut m, dir), [".", "..", "dev", "tmp"]);
    let shm = open(&mut p, &mut m, "/dev/shm/sem.x", O_CREAT | O_EXCL | O_RDWR).unwrap();
    assert!(p.tmp.host_dir(b"/dev/shm").join("sem.x").is_file());
    // Private trees are kept shallow.
    put_path(&mut m, PATH, "/tmp");
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    put_path(&mut m, PATH, "d");
    let mut depth = 0;
    let refused = loop {
        match call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]) {
            Ok(_) | Err(Errno::EEXIST) => {}
            Err(e) => break e,
        }
        assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
        depth += 1;
        assert!(depth < 1000);
    };
    assert_eq!((refused, depth), (Errno::ENAMETOOLONG, 510));
    put_path(&mut m, PATH, "/");
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    // Growing past the VM's memory is ENOSPC; within it works.
    let big = m.size() + 1;
    assert_eq!(
        call(&mut p, &mut m, sys_ftruncate, &[shm, big]),
        Err(Errno::ENOSPC)
    );
    assert_eq!(call(&mut p, &mut m, sys_ftruncate, &[shm, 1 << 20]), Ok(0));
    // A fork has a copy: changes on either side stay there.
    let mut child = p.fork_copy().unwrap();
    let child_tmp = child.tmp.host_dir(b"/tmp");
    assert_ne!(child_tmp, host_tmp);
    assert_eq!(std::fs::read(child_tmp.join("d/b.txt")).unwrap(), b"hello");
    put_path(&mut m, PATH, "/tmp/d/b.txt");
    assert_eq!(call(&mut child, &mut m, sys_unlink, &[PATH]), Ok(0));
    assert!(stat(&mut p, &mut m, "/tmp/d/b.txt", true).is_ok());
    assert_eq!(
        stat(&mut child, &mut m, "/tmp/d/b.txt", true).err(),
        Some(Errno::ENOENT)
    );
    let cfd = open(&mut child, &mut m, "/tmp/only-child", O_CREAT | O_WRONLY).unwrap();
    assert!(cfd > 2);
    assert_eq!(
        stat(&mut p, &mut m, "/tmp/only-child", true).err(),
        Some(Errno::ENOENT)
    );
    // Dropping a process removes its trees from the host.
    drop(child);
    assert!(!child_tmp.exists());
    drop(p);
    assert!(!host_tmp.exists());
}

#[test]
fn a_mapped_tmp_is_not_private() {
    // The user's own mapping of /tmp (a root at it) is the host's /tmp.
    let (mut p, mut m) = setup(vec![PathBuf::from("/tmp")]);
    let host = stat(&mut p, &mut m, "/tmp", true).unwrap();
    let real = std::fs::metadata("/tmp").unwrap();
    assert_eq!(host.ino, std::os::unix::fs::MetadataExt::ino(&real));
    assert_eq!(
        open(&mut p, &mut m, "/tmp/forkvm-never", O_CREAT | O_WRONLY),
        Err(Errno::EACCES)
    );
    assert!(!p.tmp.host_dir(b"/tmp").exists());
    // /dev/shm stays private.
    assert!(open(&mut p, &mut m, "/dev/shm/x", O_CREAT | O_WRONLY).is_ok());
}

#[test]
fn a_root_above_tmp_leaves_it_private() {
    // `--allow-read /` lets the guest read the host, but its /tmp and
    // /dev/shm stay its own and writable, as sort, tempfile and
    // multiprocessing need.
    let (mut p, mut m) = setup(vec![PathBuf::from("/")]);
    let fd = open(&mut p, &mut m, "/tmp/mine.txt", O_CREAT | O_WRONLY).unwrap();
    assert!(fd > 2);
    assert!(p.tmp.host_dir(b"/tmp").join("mine.txt").is_file());
    assert!(!Path::new("/tmp/mine.txt").exists());
    assert!(open(&mut p, &mut m, "/dev/shm/sem.x", O_CREAT | O_WRONLY).is_ok());
    // The rest of the host is read-only as allowed.
    assert!(stat(&mut p, &mut m, "/usr/bin", true).is_ok());
    assert_eq!(
        open(&mut p, &mut m, "/usr/forkvm-never", O_CREAT | O_WRONLY),
        Err(Errno::EACCES)
    );
}

#[test]
fn no_guest_reaches_another_ones_private_trees() {
    // One process's private /tmp holds a file...
    let (mut a, mut ma) = setup(vec![]);
    let fd = open(&mut a, &mut ma, "/tmp/secret", O_CREAT | O_WRONLY).unwrap();
    assert!(fd > 2);
    let base = a.tmp.host_dir(b"/tmp");
    let dir = base.parent().unwrap().to_path_buf();
    let parent = dir.parent().unwrap().to_path_buf();
    let name = dir.file_name().unwrap().to_str().unwrap().to_string();
    // ...which another, allowed to read where the trees live, cannot reach
    // by its host path, nor see listed.
    let (mut b, mut mb) = setup(vec![parent.clone()]);
    let path = format!("{}/{name}/tmp/secret", parent.display());
    assert_eq!(
        stat(&mut b, &mut mb, &path, true).err(),
        Some(Errno::ENOENT)
    );
    assert_eq!(
        stat(
            &mut b,
            &mut mb,
            &format!("{}/{name}", parent.display()),
            true
        )
        .err(),
        Some(Errno::ENOENT)
    );
    let listing = open(&mut b, &mut mb, &parent.display().to_string(), O_RDONLY).unwrap();
    let names = list(&mut b, &mut mb, listing);
    assert!(
        names.iter().all(|n| !n.starts_with("forkvm-tmp-")),
        "{names:?}"
    );
    assert!(names.contains(&".".to_string()));
}

#[test]
fn a_root_below_tmp_is_mounted_in_the_private_tmp() {
    let t = Tree::in_tmp();
    let out = t.root.join("out");
    std::fs::create_dir(&out).unwrap();
    let (mut p, mut m) = setup_rw(vec![t.allowed()], vec![out.clone()]);
    // The tree lives under the host's /tmp: /tmp stays private, with the
    // two roots reached at their paths inside it.
    assert!(t.root.starts_with("/tmp"));
    let fd = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), b"hello world");
    assert!(open(&mut p, &mut m, &t.s("out/new.txt"), O_CREAT | O_WRONLY).is_ok());
    assert!(out.join("new.txt").is_file(), "a write root writes through");
    assert!(open(&mut p, &mut m, "/tmp/mine.txt", O_CREAT | O_WRONLY).is_ok());
    assert!(p.tmp.host_dir(b"/tmp").join("mine.txt").is_file());
    assert!(!Path::new("/tmp/mine.txt").exists());
    // Nothing else of the host's /tmp shows, around the roots or above.
    assert_eq!(
        stat(&mut p, &mut m, &t.s("secret.txt"), true).err(),
        Some(Errno::ENOENT)
    );
    assert_eq!(
        stat(&mut p, &mut m, &t.s("via_link"), false).err(),
        Some(Errno::ENOENT)
    );
    let dir = open(&mut p, &mut m, &t.s(""), O_RDONLY).unwrap();
    assert_eq!(list(&mut p, &mut m, dir), [".", "..", "allowed", "out"]);
    // The roots are what the host has there: the read root stays read-only
    // (not its mount point in the private tree, which nothing reaches).
    let st = stat(&mut p, &mut m, &t.s("allowed"), true).unwrap();
    let real = std::fs::metadata(t.allowed()).unwrap();
    assert_eq!(st.ino, std::os::unix::fs::MetadataExt::ino(&real));
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/made.txt"), O_CREAT | O_WRONLY),
        Err(Errno::EACCES)
    );
    assert_eq!(
        open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_WRONLY),
        Err(Errno::EACCES)
    );
    put_path(&mut m, PATH, &t.s("allowed/sub/new"));
    assert_eq!(
        call(&mut p, &mut m, sys_mkdir, &[PATH, 0o755]),
        Err(Errno::EROFS)
    );
    put_path(&mut m, PATH, &t.s("allowed/hello.txt"));
    assert_eq!(
        call(&mut p, &mut m, sys_chmod, &[PATH, 0o600]),
        Err(Errno::EROFS)
    );
    // Mount points and the way to them cannot be removed or replaced.
    put_path(&mut m, PATH, &t.s("allowed"));
    assert_eq!(call(&mut p, &mut m, sys_rmdir, &[PATH]), Err(Errno::EBUSY));
    assert_eq!(
        call(&mut p, &mut m, sys_mkdir, &[PATH, 0o755]),
        Err(Errno::EEXIST)
    );
    put_path(&mut m, PATH, &t.s(""));
    put_path(&mut m, PATH + 0x1000, "/tmp/elsewhere");
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x1000]),
        Err(Errno::EBUSY)
    );
    put_path(&mut m, PATH, "/tmp/mine.txt");
    put_path(&mut m, PATH + 0x1000, &t.s("out"));
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x1000]),
        Err(Errno::EBUSY)
    );
    assert!(t.allowed().join("hello.txt").is_file());
    assert!(out.is_dir());
}

#[test]
fn forks_make_their_own_way_to_the_roots_below_tmp() {
    let t = Tree::in_tmp();
    let (mut p, mut m) = setup(vec![t.allowed()]);
    let fd = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, fd), b"hello world");
    assert!(p.tmp.host_dir(b"/tmp").is_dir());
    // Only the way is there: a fork does not copy it, and finds the root.
    let mut f = p.fork_copy().unwrap();
    assert!(!f.tmp.host_dir(b"/tmp").exists());
    let fd = open(&mut f, &mut m, &t.s("allowed/hello.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut f, &mut m, fd), b"hello world");
    // With a file of its own in /tmp, the master's tree is copied, way
    // included.
    assert!(open(&mut p, &mut m, "/tmp/mine.txt", O_CREAT | O_WRONLY).is_ok());
    let mut g = p.fork_copy().unwrap();
    assert!(g.tmp.host_dir(b"/tmp").join("mine.txt").is_file());
    let fd = open(&mut g, &mut m, &t.s("allowed/sub/inner.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut g, &mut m, fd), b"inner");
}

#[test]
fn private_trees_stay_shallow_and_deep_ones_are_removed() {
    let (mut p, mut m) = setup(vec![]);
    // A deep chain, then another place to move it into.
    put_path(&mut m, PATH, "/tmp");
    assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    for top in ["a", "b"] {
        put_path(&mut m, PATH, top);
        assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]), Ok(0));
        assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
        put_path(&mut m, PATH, "dd");
        for _ in 0..200 {
            assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o700]), Ok(0));
            assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
        }
        put_path(&mut m, PATH, "/tmp");
        assert_eq!(call(&mut p, &mut m, sys_chdir, &[PATH]), Ok(0));
    }
    // Moving one chain under the other would make it twice as deep.
    let deep_b = format!("/tmp/b{}/a", "/dd".repeat(200));
    put_path(&mut m, PATH, "/tmp/a");
    put_path(&mut m, PATH + 0x1000, &deep_b);
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x1000]),
        Err(Errno::ENAMETOOLONG)
    );
    put_path(&mut m, PATH + 0x1000, "/tmp/b/a");
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x1000]),
        Ok(0)
    );
    // Whatever the host holds there, however deep, goes with the process.
    let host = p.tmp.host_dir(b"/tmp");
    let mut deep = host.join("host-made");
    std::fs::create_dir(&deep).unwrap();
    let fd = rustix::fs::open(&deep, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
    let mut cur = fd;
    for _ in 0..3000 {
        rustix::fs::mkdirat(&cur, "x", Mode::RWXU).unwrap();
        cur = rustix::fs::openat(&cur, "x", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .unwrap();
    }
    rustix::fs::openat(&cur, "f", OFlags::CREATE | OFlags::WRONLY, Mode::RUSR).unwrap();
    rustix::fs::chmodat(&cur, ".", Mode::empty(), AtFlags::empty()).unwrap();
    deep.push("x");
    assert!(deep.is_dir());
    drop(p);
    assert!(!host.exists());
    assert!(!host.parent().unwrap().exists());
}

#[test]
fn a_fork_changes_only_its_copy_of_the_write_roots() {
    let t = Tree::new();
    let w = t.root.join("allowed/sub");
    // The write root lies inside a read root: the fork's copy must win there.
    let (master, mut m) = setup_rw(vec![t.root.clone()], vec![w.clone()]);
    let mut p = master.fork_copy().unwrap();
    let inner = t.s("allowed/sub/inner.txt");
    let fd = open(&mut p, &mut m, &inner, O_WRONLY | O_APPEND).unwrap();
    m.write(BUF, b" more").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[fd, BUF, 5]), Ok(5));
    assert_eq!(stat(&mut p, &mut m, &inner, true).unwrap().size, 10);
    put_path(&mut m, PATH, &inner);
    put_path(&mut m, PATH + 0x800, &t.s("allowed/sub/renamed.txt"));
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[PATH, PATH + 0x800]),
        Ok(0)
    );
    put_path(&mut m, PATH, &t.s("allowed/sub/deeper"));
    assert_eq!(call(&mut p, &mut m, sys_rmdir, &[PATH]), Ok(0));
    put_path(&mut m, PATH, &t.s("allowed/sub/new"));
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o755]), Ok(0));
    let dir = open(&mut p, &mut m, &t.s("allowed/sub"), O_RDONLY | O_DIRECTORY).unwrap();
    assert_eq!(list(&mut p, &mut m, dir), [".", "..", "new", "renamed.txt"]);
    let f = open(&mut p, &mut m, &t.s("allowed/sub/renamed.txt"), O_RDONLY).unwrap();
    assert_eq!(read_all(&mut p, &mut m, f), b"inner more");
    // The host and the master see the original tree.
    assert_eq!(std::fs::read(w.join("inner.txt")).unwrap(), b"inner");
    assert!(w.join("deeper").is_dir() && !w.join("new").exists());
    let mut mp = master;
    assert_eq!(stat(&mut mp, &mut m, &inner, true).unwrap().size, 5);
    // Outside the write root, still read-only.
    put_path(&mut m, PATH, &t.s("allowed/hello.txt"));
    assert_eq!(call(&mut p, &mut m, sys_unlink, &[PATH]), Err(Errno::EROFS));
    // A reset (a new fork of the master) starts from the host's tree again.
    drop(p);
    let mut q = mp.fork_copy().unwrap();
    assert_eq!(stat(&mut q, &mut m, &inner, true).unwrap().size, 5);
    assert!(stat(&mut q, &mut m, &t.s("allowed/sub/new"), true).is_err());
}

#[test]
fn a_fork_writes_persisted_roots_through() {
    let t = Tree::new();
    let w = t.root.join("allowed/sub");
    let (mut master, mut m) = setup_rw(vec![], vec![w.clone()]);
    master.tmp.set_persist(vec![w.clone()]);
    let mut p = master.fork_copy().unwrap();
    let fd = open(
        &mut p,
        &mut m,
        &t.s("allowed/sub/shared"),
        O_CREAT | O_WRONLY,
    )
    .unwrap();
    m.write(BUF, b"x").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[fd, BUF, 1]), Ok(1));
    assert_eq!(std::fs::read(w.join("shared")).unwrap(), b"x");
}

#[test]
fn a_fork_never_changes_the_host_through_an_early_descriptor() {
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new();
    let w = t.allowed();
    let (master, mut m) = setup_rw(vec![], vec![w.clone()]);
    let mut p = master.fork_copy().unwrap();
    // Opened before the fork changed anything: the host's file.
    let fd = open(&mut p, &mut m, &t.s("allowed/hello.txt"), O_RDONLY).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let before = mode(&w.join("hello.txt"));
    assert_eq!(
        call(&mut p, &mut m, sys_fchmod, &[fd, 0o600]),
        Err(Errno::EROFS)
    );
    assert_eq!(mode(&w.join("hello.txt")), before);
    // By path, the change lands in the fork's copy.
    put_path(&mut m, PATH, &t.s("allowed/hello.txt"));
    assert_eq!(call(&mut p, &mut m, sys_chmod, &[PATH, 0o600]), Ok(0));
    assert_eq!(
        stat(&mut p, &mut m, &t.s("allowed/hello.txt"), true)
            .unwrap()
            .mode
            & 0o777,
        0o600
    );
    assert_eq!(mode(&w.join("hello.txt")), before);
}

/// A trailing slash names a directory and "." / ".." are never removed or
/// renamed: the lexical clean-up of paths used to drop both, so unlink("f/")
/// deleted the file f and rmdir("d/.") removed d.
#[test]
fn trailing_slashes_and_dots_keep_their_meaning() {
    let t = Tree::new();
    let rw = t.root.join("rw");
    std::fs::create_dir(&rw).unwrap();
    std::fs::write(rw.join("f"), b"x").unwrap();
    std::fs::create_dir(rw.join("d")).unwrap();
    let (mut p, mut m) = setup_rw(vec![t.allowed()], vec![rw.clone()]);
    let at = |m: &mut GuestMemory, slot: u64, rel: &str| {
        put_path(m, PATH + slot * 0x100, &t.s(rel));
        PATH + slot * 0x100
    };
    let f_slash = at(&mut m, 0, "rw/f/");
    let d_slash = at(&mut m, 1, "rw/d/");
    let d_dot = at(&mut m, 2, "rw/d/.");
    let d_dotdot = at(&mut m, 3, "rw/d/..");
    let e = at(&mut m, 4, "rw/e");
    let f = at(&mut m, 5, "rw/f");
    let s_slash = at(&mut m, 6, "rw/s/");
    assert_eq!(
        call(&mut p, &mut m, sys_unlink, &[f_slash]),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_unlink, &[d_slash]),
        Err(Errno::EISDIR)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_rmdir, &[d_dot]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_rmdir, &[d_dotdot]),
        Err(Errno::ENOTEMPTY)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_rmdir, &[f_slash]),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[f_slash, e]),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[f, s_slash]),
        Err(Errno::ENOTDIR)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_rename, &[d_dot, e]),
        Err(Errno::EBUSY)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_symlink, &[f, s_slash]),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        open(&mut p, &mut m, &t.s("rw/n/"), O_CREAT | O_WRONLY),
        Err(Errno::EISDIR)
    );
    assert!(rw.join("f").is_file() && rw.join("d").is_dir());
    assert!(!rw.join("n").exists() && !rw.join("s").exists() && !rw.join("e").exists());
    // A directory may be named with its slash.
    assert_eq!(call(&mut p, &mut m, sys_rename, &[d_slash, e]), Ok(0));
    assert!(rw.join("e").is_dir());
}

/// Creation modes are the guest's (its umask, not the host's), mkdir keeps
/// the sticky bit, and no host file gets a set-user-ID or set-group-ID bit:
/// a guest's file is the host user's, root's when forkvm runs as root.
#[test]
fn creation_modes_follow_the_guest_umask_and_never_set_id_bits() {
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new();
    let rw = t.root.join("rw");
    std::fs::create_dir(&rw).unwrap();
    let (mut p, mut m) = setup_rw(vec![t.allowed()], vec![rw.clone()]);
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    p.fds.umask = 0;
    put_path(&mut m, PATH, &t.s("rw/f"));
    let flags = u64::from(O_CREAT | O_WRONLY);
    let fd = call(
        &mut p,
        &mut m,
        sys_openat,
        &[AT_FDCWD as u64, PATH, flags, 0o666],
    );
    assert!(fd.is_ok_and(|fd| fd > 2));
    assert_eq!(mode(&rw.join("f")), 0o666);
    put_path(&mut m, PATH, &t.s("rw/d"));
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o1777]), Ok(0));
    assert_eq!(mode(&rw.join("d")), 0o1777);
    p.fds.umask = 0o002;
    put_path(&mut m, PATH, &t.s("rw/e"));
    assert_eq!(call(&mut p, &mut m, sys_mkdir, &[PATH, 0o775]), Ok(0));
    assert_eq!(mode(&rw.join("e")), 0o775);
    put_path(&mut m, PATH, &t.s("rw/f"));
    assert_eq!(call(&mut p, &mut m, sys_chmod, &[PATH, 0o6755]), Ok(0));
    assert_eq!(mode(&rw.join("f")), 0o755);
}

/// FIFOs under a write root: Linux's open semantics, a blocking open that
/// waits (the call made again) without blocking the host thread and
/// completes once a partner came, data through the shared pipe, and host
/// FIFOs outside the write roots closed.
#[test]
fn fifos_open_as_on_linux() {
    use crate::linux::thread::Sched;
    use std::os::unix::fs::MetadataExt;
    let sys_close = crate::linux::table::lookup(3).unwrap().handler;
    let t = Tree::new();
    let rw = t.root.join("rw");
    std::fs::create_dir(&rw).unwrap();
    rustix::fs::mknodat(
        CWD,
        rw.join("p"),
        rustix::fs::FileType::Fifo,
        Mode::from(0o600),
        0,
    )
    .unwrap();
    rustix::fs::mknodat(
        CWD,
        t.allowed().join("host_fifo"),
        rustix::fs::FileType::Fifo,
        Mode::from(0o666),
        0,
    )
    .unwrap();
    let (mut p, mut m) = setup_rw(vec![t.allowed()], vec![rw.clone()]);
    let fifo = t.s("rw/p");
    // A host FIFO the guest may only read stays closed.
    for flags in [O_RDONLY | O_NONBLOCK, O_RDWR] {
        assert_eq!(
            open(&mut p, &mut m, &t.s("allowed/host_fifo"), flags),
            Err(Errno::EACCES)
        );
    }
    assert_eq!(
        open(&mut p, &mut m, &fifo, O_WRONLY | O_NONBLOCK),
        Err(Errno::ENXIO)
    );
    // A blocking read-open waits: the thread retries the call.
    assert_eq!(open(&mut p, &mut m, &fifo, O_RDONLY), Ok(0));
    assert!(matches!(p.sched.take(), Some(Sched::Retry(_))));
    assert_eq!(p.fifo_waits.len(), 1);
    // Meanwhile the waiting reader counts: a non-blocking writer (another
    // thread) gets in.
    let reader_tid = p.tid;
    p.tid += 1;
    let w = open(&mut p, &mut m, &fifo, O_WRONLY | O_NONBLOCK).unwrap();
    m.write(BUF, b"through").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[w, BUF, 7]), Ok(7));
    assert_eq!(call(&mut p, &mut m, sys_close, &[w]), Ok(0));
    p.tid = reader_tid;
    // The writer came and went: the read-open completes, reads, then EOF.
    p.waiting = None;
    let r = open(&mut p, &mut m, &fifo, O_RDONLY).unwrap();
    assert!(p.sched.is_none() && p.fifo_waits.is_empty());
    assert_eq!(read_all(&mut p, &mut m, r), b"through");
    assert_eq!(read_all(&mut p, &mut m, r), b"");
    // fstat describes the node.
    let node = std::fs::metadata(rw.join("p")).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_fstat, &[r, BUF]), Ok(0));
    assert_eq!(m.read_u64(BUF + 8).unwrap(), node.ino());
    assert_eq!(m.read_u32(BUF + 24).unwrap() & S_IFMT, S_IFIFO);
    // O_RDWR never waits and is both ends; O_CREAT|O_EXCL is EEXIST.
    let both = open(&mut p, &mut m, &fifo, O_RDWR).unwrap();
    m.write(BUF, b"thr").unwrap();
    assert_eq!(call(&mut p, &mut m, io(1), &[both, BUF, 3]), Ok(3));
    assert_eq!(read_all(&mut p, &mut m, both), b"thr");
    assert_eq!(
        open(&mut p, &mut m, &fifo, O_WRONLY | O_CREAT | O_EXCL),
        Err(Errno::EEXIST)
    );
    assert_eq!(
        open(&mut p, &mut m, &fifo, O_RDONLY | O_DIRECTORY),
        Err(Errno::ENOTDIR)
    );
    // A waiting write-open interrupted by a signal closes its end.
    assert_eq!(call(&mut p, &mut m, sys_close, &[both]), Ok(0));
    assert_eq!(call(&mut p, &mut m, sys_close, &[r]), Ok(0));
    assert_eq!(open(&mut p, &mut m, &fifo, O_WRONLY), Ok(0));
    assert_eq!(p.fifo_waits.len(), 1);
    crate::linux::fs::interrupted_open(&mut p);
    p.sched = None;
    p.waiting = None;
    let r = open(&mut p, &mut m, &fifo, O_RDONLY | O_NONBLOCK).unwrap();
    assert_eq!(call(&mut p, &mut m, io(0), &[r, BUF, 8]), Ok(0));
}

/// A symlink in a write root never lets a change escape the roots: not by a
/// ".." after it (now resolved from the link's target, not its text), nor by
/// open(O_CREAT) through it to a name that does not exist yet.
#[test]
fn links_never_lead_changes_out_of_the_roots() {
    let t = Tree::new();
    let rw = t.root.join("rw");
    let outside = t.root.join("outside");
    std::fs::create_dir(&rw).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(rw.join("mine"), b"mine").unwrap();
    // rw/a/.. is the (unallowed) parent of the roots; rw/ro/.. the read-only root.
    std::os::unix::fs::symlink(&outside, rw.join("a")).unwrap();
    std::os::unix::fs::symlink(t.allowed().join("sub"), rw.join("ro")).unwrap();
    std::os::unix::fs::symlink("../outside/new.txt", rw.join("dangling")).unwrap();
    std::os::unix::fs::symlink(t.root.join("new2.txt"), rw.join("dangling_abs")).unwrap();
    std::os::unix::fs::symlink(t.root.join("secret.txt"), rw.join("to_secret")).unwrap();
    let (mut p, mut m) = setup_rw(vec![t.allowed()], vec![rw.clone()]);
    let secret = t.s("rw/a/../secret.txt");
    put_path(&mut m, PATH, &secret);
    put_path(&mut m, PATH + 0x200, &t.s("rw/mine"));
    assert_eq!(
        call(&mut p, &mut m, sys_unlink, &[PATH]),
        Err(Errno::ENOENT)
    );
    assert!(call(&mut p, &mut m, sys_truncate, &[PATH, 0]).is_err());
    assert!(call(&mut p, &mut m, sys_chmod, &[PATH, 0o777]).is_err());
    assert!(call(&mut p, &mut m, sys_rename, &[PATH + 0x200, PATH]).is_err());
    assert!(call(&mut p, &mut m, sys_link, &[PATH + 0x200, PATH]).is_err());
    assert!(call(&mut p, &mut m, sys_symlink, &[PATH + 0x200, PATH]).is_err());
    assert!(open(&mut p, &mut m, &secret, O_WRONLY | O_TRUNC).is_err());
    assert!(open(&mut p, &mut m, &secret, O_WRONLY | O_CREAT).is_err());
    assert_eq!(std::fs::read(t.root.join("secret.txt")).unwrap(), b"secret");
    assert!(rw.join("mine").exists());
    for made in ["rw/a/../newdir", "rw/ro/../newdir"] {
        put_path(&mut m, PATH, &t.s(made));
        assert!(
            call(&mut p, &mut m, sys_mkdir, &[PATH, 0o755]).is_err(),
            "{made}"
        );
        assert!(
            call(&mut p, &mut m, sys_mknod, &[PATH, 0o100644, 0]).is_err(),
            "{made}"
        );
    }
    // The read-only root, reached through the link: EROFS as directly.
    put_path(&mut m, PATH, &t.s("rw/ro/../hello.txt"));
    assert_eq!(call(&mut p, &mut m, sys_unlink, &[PATH]), Err(Errno::EROFS));
    assert!(t.allowed().join("hello.txt").exists());
    assert!(!t.root.join("newdir").exists() && !t.allowed().join("newdir").exists());
    assert!(!rw.join("newdir").exists());
    // Through a dangling link, relative or absolute, and a link to a file outside.
    for link in ["rw/dangling", "rw/dangling_abs", "rw/to_secret"] {
        let r = open(&mut p, &mut m, &t.s(link), O_WRONLY | O_CREAT | O_TRUNC);
        assert!(r.is_err(), "{link}: {r:?}");
    }
    assert!(!outside.join("new.txt").exists() && !t.root.join("new2.txt").exists());
    assert_eq!(std::fs::read(t.root.join("secret.txt")).unwrap(), b"secret");
    // A dangling link inside the root works, and what it makes is the guest's file.
    std::os::unix::fs::symlink("made.txt", rw.join("inside")).unwrap();
    assert!(open(&mut p, &mut m, &t.s("rw/inside"), O_WRONLY | O_CREAT).is_ok());
    assert!(rw.join("made.txt").is_file());
}
