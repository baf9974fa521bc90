//! copy_file_range(2): copying between two regular files without the data
//! passing through the program (coreutils cp, Go's io.Copy between files,
//! python's shutil).
//!
//! Both descriptors must be regular host files (files under the read and
//! write roots, the private /tmp and /dev/shm, overlay copies, memfds).
//! The checks are Linux's, made here; then the host copies between the two
//! host descriptors at explicit offsets (its own copy_file_range, or
//! positional reads and writes through a fixed bounce buffer where it
//! refuses), and the offsets are moved here. Files on different host
//! filesystems answer EXDEV, as Linux does for filesystems without a
//! cross-device copy; programs then copy by read and write.

use super::fdtable::{lock, FileKind, FileRef, OpenFile};
use super::io::MAX_RW;
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

/// Bounce-buffer size for one step of the copy.
const CHUNK: usize = 64 * 1024;

/// A descriptor as fdget(2) sees it: EBADF unless open (O_PATH is not).
fn fd_file(p: &Process, fd: u64) -> Result<FileRef, Errno> {
    let file = p.fds.get(fd as i32)?;
    if lock(&file).path_only() {
        return Err(Errno::EBADF);
    }
    Ok(file)
}

/// An offset pointer's value (`None` for NULL: the file offset is used).
fn read_offset(mem: &GuestMemory, ptr: u64) -> Result<Option<i64>, Errno> {
    if ptr == 0 {
        return Ok(None);
    }
    Ok(Some(mem.read_u64(ptr)? as i64))
}

/// The host descriptor of a regular file, after Linux's file-type and
/// access-mode checks (generic_file_rw_checks): EISDIR for a directory,
/// EINVAL for anything else that is not a regular file.
fn host_fd(f: &OpenFile) -> Result<BorrowedFd<'_>, Errno> {
    match &f.kind {
        FileKind::File { fd, .. } => Ok(fd.as_fd()),
        FileKind::Dir { .. } => Err(Errno::EISDIR),
        _ => Err(Errno::EINVAL),
    }
}

/// What the checks decided: the host descriptors, where to start, how much.
struct Plan {
    pos_in: u64,
    pos_out: u64,
    count: u64,
}

/// Linux's checks of a copy (generic_copy_file_checks, rw_verify_area),
/// in its order; the count shortened to the input's end.
fn plan(
    inf: &OpenFile,
    outf: &OpenFile,
    pos_in: i64,
    pos_out: i64,
    len: u64,
) -> Result<Plan, Errno> {
    let (fin, fout) = (host_fd(inf)?, host_fd(outf)?);
    if !inf.readable() || !outf.writable() || outf.flags & super::fdtable::oflags::O_APPEND != 0 {
        return Err(Errno::EBADF);
    }
    let (sin, sout) = (rustix::fs::fstat(fin)?, rustix::fs::fstat(fout)?);
    if sin.st_dev != sout.st_dev {
        return Err(Errno::EXDEV);
    }
    // Offsets that would wrap (loff_t plus size_t, as unsigned).
    let (uin, uout) = (pos_in as u64, pos_out as u64);
    if uin.checked_add(len).is_none() || uout.checked_add(len).is_none() {
        return Err(Errno::EOVERFLOW);
    }
    let size = sin.st_size.max(0);
    let count = if pos_in >= size {
        0
    } else {
        len.min((size - pos_in) as u64)
    };
    let same = sin.st_ino == sout.st_ino;
    if same
        && uout.wrapping_add(count) > uin
        && uout < uin.wrapping_add(count)
        && pos_in >= 0
        && pos_out >= 0
    {
        return Err(Errno::EINVAL);
    }
    if pos_in < 0 || pos_out < 0 {
        return Err(Errno::EINVAL);
    }
    Ok(Plan {
        pos_in: uin,
        pos_out: uout,
        count: count.min(MAX_RW),
    })
}

/// Copies `plan.count` bytes (fewer at a short read or write); an error
/// only when nothing was copied. The host's copy_file_range first (the
/// kernel copies, or shares extents); where the host will not (procfs
/// and other filesystems it refuses), a bounce buffer.
fn copy(fin: BorrowedFd<'_>, fout: BorrowedFd<'_>, plan: &Plan) -> Result<u64, Errno> {
    let mut done = 0u64;
    while done < plan.count {
        let (mut at_in, mut at_out) = (plan.pos_in + done, plan.pos_out + done);
        let want = (plan.count - done) as usize;
        match rustix::fs::copy_file_range(fin, Some(&mut at_in), fout, Some(&mut at_out), want) {
            Ok(0) => return Ok(done),
            Ok(n) => done += n as u64,
            Err(e) if done > 0 => {
                tracing::debug!("copy_file_range: host copy stopped ({e}) after {done} bytes");
                return Ok(done);
            }
            // Copied by hand below, with the host's own errors if any.
            Err(_) => break,
        }
    }
    if done > 0 {
        return Ok(done);
    }
    bounce(fin, fout, plan)
}

/// [`copy`] through a bounce buffer of [`CHUNK`] bytes.
fn bounce(fin: BorrowedFd<'_>, fout: BorrowedFd<'_>, plan: &Plan) -> Result<u64, Errno> {
    let mut buf = vec![0u8; (plan.count as usize).min(CHUNK)];
    let mut done = 0u64;
    while done < plan.count {
        let want = ((plan.count - done) as usize).min(CHUNK);
        let n = match rustix::io::pread(fin, &mut buf[..want], plan.pos_in + done) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if done == 0 => return Err(e.into()),
            Err(_) => break,
        };
        let w = match rustix::io::pwrite(fout, &buf[..n], plan.pos_out + done) {
            Ok(w) => w,
            Err(e) if done == 0 => return Err(e.into()),
            Err(_) => break,
        };
        done += w as u64;
        if w < n {
            break;
        }
    }
    Ok(done)
}

/// Implements copy_file_range(2).
fn sys_copy_file_range(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd_in, off_in, fd_out, off_out, len, flags] = *a;
    let input = fd_file(p, fd_in)?;
    let output = fd_file(p, fd_out)?;
    let given_in = read_offset(mem, off_in)?;
    let given_out = read_offset(mem, off_out)?;
    if flags as u32 != 0 {
        return Err(Errno::EINVAL);
    }
    // One description may be both ends (the same fd twice, or a dup).
    let aliased = Arc::ptr_eq(&input, &output);
    let inf = lock(&input);
    let outf = if aliased { None } else { Some(lock(&output)) };
    let out_ref: &OpenFile = outf.as_deref().unwrap_or(&inf);
    let pos_in = given_in.unwrap_or(inf.offset as i64);
    let pos_out = given_out.unwrap_or(out_ref.offset as i64);
    let plan = plan(&inf, out_ref, pos_in, pos_out, len)?;
    if plan.count == 0 {
        return Ok(0);
    }
    super::fs::charge_write(
        p,
        mem.size(),
        out_ref,
        plan.count as usize,
        Some(plan.pos_out),
    )?;
    let done = copy(host_fd(&inf)?, host_fd(out_ref)?, &plan)?;
    drop(outf);
    drop(inf);
    if done == 0 {
        return Ok(0);
    }
    let (end_in, end_out) = (plan.pos_in + done, plan.pos_out + done);
    // The data is copied; a pointer that cannot take the new offset is
    // still EFAULT, as on Linux.
    match given_in {
        Some(_) => mem.write_u64(off_in, end_in)?,
        None => lock(&input).offset = end_in,
    }
    match given_out {
        Some(_) => mem.write_u64(off_out, end_out)?,
        None => lock(&output).offset = end_out,
    }
    Ok(done)
}

/// ioctl(2) on the destination: share the source's data (its descriptor
/// as the argument), or a range of it (`struct file_clone_range`).
pub(super) const FICLONE: u32 = 0x4004_9409;
pub(super) const FICLONERANGE: u32 = 0x4020_940d;
/// `struct file_clone_range`: src_fd, src_offset, src_length, dest_offset.
const CLONE_RANGE_SIZE: u64 = 32;

/// FICLONE and FICLONERANGE on `out`: Linux's checks (ioctl_file_clone,
/// vfs_clone_file_range) in its order, then EOPNOTSUPP, the answer of a
/// filesystem that cannot share extents, after which programs copy (cp's
/// default --reflink=auto, node's COPYFILE_FICLONE). Host extents are
/// never shared: the files look like files of such a filesystem. It was
/// ENOTTY, which node's COPYFILE_FICLONE_FORCE reported instead of ENOTSUP.
pub(super) fn ioctl_clone(
    p: &Process,
    mem: &GuestMemory,
    out: &FileRef,
    req: u32,
    arg: u64,
) -> SysResult {
    let src = if req == FICLONERANGE {
        mem.read(arg, CLONE_RANGE_SIZE)?;
        mem.read_u64(arg)?
    } else {
        arg
    };
    // The descriptor is an unsigned int to the kernel.
    let input = fd_file(p, u64::from(src as u32))?;
    let aliased = Arc::ptr_eq(&input, out);
    let inf = lock(&input);
    let outf = if aliased { None } else { Some(lock(out)) };
    let out_ref: &OpenFile = outf.as_deref().unwrap_or(&inf);
    // Different superblocks first: pipes and sockets are on none of ours.
    let dev = |f: &OpenFile| match &f.kind {
        FileKind::File { fd, .. } | FileKind::Dir { fd, .. } => {
            rustix::fs::fstat(fd).ok().map(|st| st.st_dev)
        }
        _ => None,
    };
    match (dev(&inf), dev(out_ref)) {
        (Some(a), Some(b)) if a != b => return Err(Errno::EXDEV),
        (Some(_), None) | (None, Some(_)) => return Err(Errno::EXDEV),
        _ => {}
    }
    host_fd(&inf)?;
    host_fd(out_ref)?;
    if !inf.readable()
        || !out_ref.writable()
        || out_ref.flags & super::fdtable::oflags::O_APPEND != 0
    {
        return Err(Errno::EBADF);
    }
    Err(Errno::EOPNOTSUPP)
}

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 326, name: "copy_file_range", handler: sys_copy_file_range, support: Support::Partial,
        note: "regular files only (pipes, sockets, devices and stdio are EINVAL, as for non-files on Linux); EXDEV across host filesystems" },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::USER_BASE;
    use crate::linux::fdtable::oflags::*;
    use crate::linux::{test_call as call, test_setup, Policy};
    use std::os::fd::OwnedFd;

    /// A scratch directory of this test, removed when dropped.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let d = std::env::temp_dir().join(format!("forkvm-cfr-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn host_file(dir: &std::path::Path, name: &str, data: &[u8]) -> OwnedFd {
        let path = dir.join(name);
        std::fs::write(&path, data).unwrap();
        let f = std::fs::File::options()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        OwnedFd::from(f)
    }

    fn install(p: &mut Process, fd: OwnedFd, flags: u32) -> u64 {
        let kind = FileKind::File {
            fd,
            path: b"/x".to_vec(),
        };
        p.fds.insert(OpenFile::new(kind, flags), false).unwrap() as u64
    }

    #[test]
    fn copies_with_and_without_offset_pointers() {
        let dir = Scratch::new("copy");
        let (mut p, mut m) = test_setup(Policy::default());
        let src = install(&mut p, host_file(dir.path(), "a", b"0123456789"), O_RDONLY);
        let dst = install(&mut p, host_file(dir.path(), "b", b""), O_RDWR);
        // NULL pointers: the file offsets are used and advanced.
        assert_eq!(
            call(&mut p, &mut m, sys_copy_file_range, &[src, 0, dst, 0, 4, 0]),
            Ok(4)
        );
        assert_eq!(lock(&p.fds.get(src as i32).unwrap()).offset, 4);
        assert_eq!(lock(&p.fds.get(dst as i32).unwrap()).offset, 4);
        // A pointer: its value is used and advanced, the file offset stays.
        let off = USER_BASE;
        m.write_u64(off, 8).unwrap();
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_copy_file_range,
                &[src, off, dst, 0, 100, 0]
            ),
            Ok(2)
        );
        assert_eq!(m.read_u64(off).unwrap(), 10);
        assert_eq!(lock(&p.fds.get(src as i32).unwrap()).offset, 4);
        assert_eq!(std::fs::read(dir.path().join("b")).unwrap(), b"012389");
        // At the end: 0.
        assert_eq!(
            call(
                &mut p,
                &mut m,
                sys_copy_file_range,
                &[src, off, dst, 0, 100, 0]
            ),
            Ok(0)
        );
        // Within one file, overlapping: EINVAL; apart: copied.
        let (a, b) = (USER_BASE + 8, USER_BASE + 16);
        m.write_u64(a, 0).unwrap();
        m.write_u64(b, 2).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_copy_file_range, &[dst, a, dst, b, 4, 0]),
            Err(Errno::EINVAL)
        );
        m.write_u64(b, 6).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_copy_file_range, &[dst, a, dst, b, 2, 0]),
            Ok(2)
        );
        assert_eq!(std::fs::read(dir.path().join("b")).unwrap(), b"01238901");
        // The same fd with its own offset twice: overlapping.
        assert_eq!(
            call(&mut p, &mut m, sys_copy_file_range, &[dst, 0, dst, 0, 1, 0]),
            Err(Errno::EINVAL)
        );
    }

    #[test]
    fn bad_arguments_are_errnos() {
        let dir = Scratch::new("bad");
        let (mut p, mut m) = test_setup(Policy::default());
        let src = install(&mut p, host_file(dir.path(), "a", b"abc"), O_RDONLY);
        let dst = install(&mut p, host_file(dir.path(), "b", b""), O_WRONLY);
        let app = install(&mut p, host_file(dir.path(), "c", b""), O_WRONLY | O_APPEND);
        let null = p
            .fds
            .insert(OpenFile::new(FileKind::Null, O_RDWR), false)
            .unwrap() as u64;
        let cfr = sys_copy_file_range;
        assert_eq!(
            call(&mut p, &mut m, cfr, &[src, 0, dst, 0, 1, 1]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, cfr, &[99, 0, dst, 0, 1, 0]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, cfr, &[src, 0, 99, 0, 1, 0]),
            Err(Errno::EBADF)
        );
        // Wrong directions, O_APPEND.
        assert_eq!(
            call(&mut p, &mut m, cfr, &[dst, 0, src, 0, 1, 0]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, cfr, &[src, 0, app, 0, 1, 0]),
            Err(Errno::EBADF)
        );
        // Not regular files.
        assert_eq!(
            call(&mut p, &mut m, cfr, &[null, 0, dst, 0, 1, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, cfr, &[src, 0, null, 0, 1, 0]),
            Err(Errno::EINVAL)
        );
        // Bad pointers, negative and wrapping offsets.
        for bad in [8u64 << 20, 0xffff_8000_0000_0000, u64::MAX - 7] {
            assert_eq!(
                call(&mut p, &mut m, cfr, &[src, bad, dst, 0, 1, 0]),
                Err(Errno::EFAULT)
            );
            assert_eq!(
                call(&mut p, &mut m, cfr, &[src, 0, dst, bad, 1, 0]),
                Err(Errno::EFAULT)
            );
        }
        let off = USER_BASE;
        m.write_u64(off, (-1i64) as u64).unwrap();
        assert_eq!(
            call(&mut p, &mut m, cfr, &[src, off, dst, 0, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            call(&mut p, &mut m, cfr, &[src, off, dst, 0, 1, 0]),
            Err(Errno::EOVERFLOW)
        );
        m.write_u64(off, 1).unwrap();
        assert_eq!(
            call(&mut p, &mut m, cfr, &[src, 0, dst, off, u64::MAX, 0]),
            Err(Errno::EOVERFLOW)
        );
        // A huge length is cut to what the file holds.
        assert_eq!(
            call(&mut p, &mut m, cfr, &[src, 0, dst, 0, 1 << 40, 0]),
            Ok(3)
        );
    }
}
