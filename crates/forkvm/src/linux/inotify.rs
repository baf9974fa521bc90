//! inotify: inotify_init, inotify_init1, inotify_add_watch,
//! inotify_rm_watch, and reading events (read, poll, epoll, select).
//!
//! The guest's files are host files, so each guest instance is a host
//! inotify instance and each watch a host watch on the object the guest
//! path resolves to (resolved in the guest namespace like any path, then
//! named to the host as `/proc/self/fd/N`). The events, their order,
//! cookies, watch descriptors and errors are then the host kernel's own.
//! Watches on the emulated devices and on directories above the roots are
//! refused (EACCES): the latter would report host names the guest cannot
//! see. Since a host user has few inotify instances (128 by default), a
//! forkvm process holds at most [`MAX_INSTANCES`] at once (EMFILE beyond,
//! Linux's answer at its own limit) and each at most [`MAX_WATCHES`]
//! watches (ENOSPC beyond).

use super::event::EventObj;
use super::fdtable::{lock, oflags, FileKind, OpenFile};
use super::poll::{host_poll, READABLE};
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use rustix::fs::inotify;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Host inotify instances one forkvm process may hold at once.
pub const MAX_INSTANCES: usize = 32;
/// Watches one instance may hold.
pub const MAX_WATCHES: usize = 8192;

const IN_NONBLOCK: u64 = 0o4000;
const IN_CLOEXEC: u64 = 0o2000000;
const IN_DONT_FOLLOW: u32 = 0x0200_0000;
const IN_ONLYDIR: u32 = 0x0100_0000;
const IN_MASK_CREATE: u32 = 0x1000_0000;
const IN_MASK_ADD: u32 = 0x2000_0000;
const IN_IGNORED: u32 = 0x8000;
/// Every bit inotify_add_watch knows (Linux's ALL_INOTIFY_BITS).
const ALL_INOTIFY_BITS: u32 = 0xfff // IN_ALL_EVENTS
    | 0x2000 // IN_UNMOUNT
    | 0x4000 // IN_Q_OVERFLOW
    | IN_IGNORED
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | 0x0400_0000 // IN_EXCL_UNLINK
    | IN_MASK_CREATE
    | IN_MASK_ADD
    | 0x4000_0000 // IN_ISDIR
    | 0x8000_0000; // IN_ONESHOT

/// Host instances alive in this forkvm process.
static INSTANCES: AtomicUsize = AtomicUsize::new(0);

/// A host inotify instance (non-blocking; the guest's O_NONBLOCK is its
/// file's), shared by every descriptor dup'ed from it. A fork gets an
/// instance of its own without watches (see `fdtable::fork_copy`): its
/// files are copies, and a served request must not read another's events.
#[derive(Debug)]
pub struct Instance {
    fd: OwnedFd,
    /// Watch descriptors added and not removed by the guest.
    watches: Mutex<Vec<i32>>,
}

impl Drop for Instance {
    fn drop(&mut self) {
        INSTANCES.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What an inotify descriptor holds.
pub type Inotify = Arc<Instance>;

fn watches(i: &Instance) -> std::sync::MutexGuard<'_, Vec<i32>> {
    i.watches.lock().unwrap_or_else(PoisonError::into_inner)
}

/// poll(2) bits of an instance: readable when events wait.
pub fn readiness(i: &Instance) -> i16 {
    let mut pfd = [libc::pollfd {
        fd: i.fd.as_raw_fd(),
        events: READABLE,
        revents: 0,
    }];
    match host_poll(&mut pfd, 0) {
        Ok(_) => pfd[0].revents,
        Err(_) => 0,
    }
}

/// read(2): whole `struct inotify_event` records, as the host gives them
/// (EINVAL when the next does not fit, EAGAIN when none waits).
pub fn read(i: &Instance, buf: &mut [u8]) -> Result<usize, Errno> {
    let n = rustix::io::read(i.fd.as_fd(), &mut *buf)?;
    // Watches the host ended (IN_IGNORED: removed, or their object gone)
    // no longer count.
    let mut at = 0;
    while let Some(head) = buf.get(at..at + 16).filter(|_| at + 16 <= n) {
        let word = |o: usize| u32::from_le_bytes([head[o], head[o + 1], head[o + 2], head[o + 3]]);
        if word(4) & IN_IGNORED != 0 {
            let wd = word(0) as i32;
            watches(i).retain(|&w| w != wd);
        }
        at += 16 + word(12) as usize;
    }
    Ok(n)
}

/// The instance behind descriptor `fd`: EBADF when not open, EINVAL when
/// not an inotify descriptor.
fn instance_of(p: &Process, fd: u64) -> Result<Inotify, Errno> {
    let file = p.fds.get(fd as i32)?;
    let f = lock(&file);
    match &f.kind {
        FileKind::Event(EventObj::Inotify(i)) => Ok(i.clone()),
        _ if f.path_only() => Err(Errno::EBADF),
        _ => Err(Errno::EINVAL),
    }
}

/// A new host instance without watches; EMFILE beyond [`MAX_INSTANCES`].
pub fn new_instance() -> Result<Inotify, Errno> {
    if INSTANCES.fetch_add(1, Ordering::Relaxed) >= MAX_INSTANCES {
        INSTANCES.fetch_sub(1, Ordering::Relaxed);
        return Err(Errno::EMFILE);
    }
    let fd = match inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC) {
        Ok(fd) => fd,
        Err(e) => {
            INSTANCES.fetch_sub(1, Ordering::Relaxed);
            return Err(e.into());
        }
    };
    // From here the instance's drop gives the count back.
    Ok(Arc::new(Instance {
        fd,
        watches: Mutex::new(Vec::new()),
    }))
}

/// Implements inotify_init1(2).
fn sys_inotify_init1(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let flags = u64::from(a[0] as u32);
    if flags & !(IN_NONBLOCK | IN_CLOEXEC) != 0 {
        return Err(Errno::EINVAL);
    }
    let inst = new_instance()?;
    let mut fl = oflags::O_RDONLY;
    if flags & IN_NONBLOCK != 0 {
        fl |= oflags::O_NONBLOCK;
    }
    let file = OpenFile::new(FileKind::Event(EventObj::Inotify(inst)), fl);
    Ok(p.fds.insert(file, flags & IN_CLOEXEC != 0)? as u64)
}

/// Implements inotify_init(2).
fn sys_inotify_init(p: &mut Process, mem: &mut GuestMemory, _: &Args) -> SysResult {
    sys_inotify_init1(p, mem, &[0; 6])
}

/// Implements inotify_add_watch(2).
fn sys_inotify_add_watch(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let [fd, path, mask, ..] = *a;
    let mask = mask as u32;
    if mask & IN_MASK_ADD != 0 && mask & IN_MASK_CREATE != 0 {
        return Err(Errno::EINVAL);
    }
    if mask & ALL_INOTIFY_BITS == 0 {
        return Err(Errno::EINVAL);
    }
    let inst = instance_of(p, fd)?;
    let path = super::fs::read_path(mem, path)?;
    let target = super::fs::watch_target(p, &path, mask & IN_DONT_FOLLOW == 0)?;
    if mask & IN_ONLYDIR != 0 && rustix::fs::fstat(&target)?.st_mode & libc::S_IFMT != libc::S_IFDIR
    {
        return Err(Errno::ENOTDIR);
    }
    let mut w = watches(&inst);
    // The magic link leads to the very object resolved; following it is
    // how the host is told which (IN_DONT_FOLLOW would watch the link in
    // /proc instead, so it is applied by the resolution above).
    let name = format!("/proc/self/fd/{}", target.as_raw_fd());
    let flags = inotify::WatchFlags::from_bits_retain(mask & !IN_DONT_FOLLOW);
    if w.len() >= MAX_WATCHES {
        return Err(Errno::ENOSPC);
    }
    let wd = inotify::add_watch(inst.fd.as_fd(), name.as_str(), flags)?;
    if !w.contains(&wd) {
        w.push(wd);
    }
    Ok(wd as u64)
}

/// Implements inotify_rm_watch(2).
fn sys_inotify_rm_watch(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    let inst = instance_of(p, a[0])?;
    let wd = a[1] as i32;
    inotify::remove_watch(inst.fd.as_fd(), wd)?;
    watches(&inst).retain(|&w| w != wd);
    Ok(0)
}

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 253, name: "inotify_init", handler: sys_inotify_init, support: Support::Partial,
        note: "as inotify_init1" },
    SyscallEntry { nr: 294, name: "inotify_init1", handler: sys_inotify_init1, support: Support::Partial,
        note: "a host inotify instance (events are the host kernel's); at most 32 per forkvm process (EMFILE); a forked child's copy is a new instance without the parent's watches" },
    SyscallEntry { nr: 254, name: "inotify_add_watch", handler: sys_inotify_add_watch, support: Support::Partial,
        note: "a host watch on the object the guest path names; emulated devices and directories above the roots are EACCES; 8192 watches per instance (ENOSPC); truncate(2) by path also reports the open and close-write of the file it truncates" },
    SyscallEntry { nr: 255, name: "inotify_rm_watch", handler: sys_inotify_rm_watch, support: Support::Full,
        note: "" },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::{test_call as call, test_setup, Policy};

    #[test]
    fn watches_stay_inside_the_namespace() {
        let base =
            crate::linux::test_scratch().join(format!("forkvm-inotify-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(&root).unwrap();
        let policy = Policy {
            allow_read: vec![root.clone()],
            ..Policy::default()
        };
        let (mut p, mut m) = test_setup(policy);
        let buf = crate::abi::USER_BASE;
        assert_eq!(
            call(&mut p, &mut m, sys_inotify_init1, &[1]),
            Err(Errno::EINVAL)
        );
        let fd = call(&mut p, &mut m, sys_inotify_init1, &[IN_NONBLOCK]).unwrap();
        let watch = |p: &mut Process, m: &mut GuestMemory, path: &std::path::Path, mask: u64| {
            let mut bytes = path.as_os_str().as_encoded_bytes().to_vec();
            bytes.push(0);
            m.write(buf, &bytes).unwrap();
            call(p, m, sys_inotify_add_watch, &[fd, buf, mask])
        };
        // The root is watched; the directory above it would show host names.
        assert_eq!(watch(&mut p, &mut m, &root, 0x2), Ok(1));
        assert_eq!(watch(&mut p, &mut m, &base, 0x2), Err(Errno::EACCES));
        assert_eq!(
            watch(&mut p, &mut m, std::path::Path::new("/dev/null"), 0x2),
            Err(Errno::EACCES)
        );
        assert_eq!(
            watch(&mut p, &mut m, &base.join("elsewhere"), 0x2),
            Err(Errno::ENOENT)
        );
        assert_eq!(watch(&mut p, &mut m, &root, 0), Err(Errno::EINVAL));
        // Not an inotify descriptor, or none.
        assert_eq!(
            call(&mut p, &mut m, sys_inotify_add_watch, &[99, buf, 2]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_inotify_rm_watch, &[99, 1]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_inotify_add_watch, &[fd, 8 << 20, 2]),
            Err(Errno::EFAULT)
        );
        // Nothing happened yet: EAGAIN; after the removal, IN_IGNORED.
        let read = super::super::table::lookup(0).expect("read").handler;
        assert_eq!(
            call(&mut p, &mut m, read, &[fd, buf, 64]),
            Err(Errno::EAGAIN)
        );
        assert_eq!(call(&mut p, &mut m, sys_inotify_rm_watch, &[fd, 1]), Ok(0));
        assert_eq!(
            call(&mut p, &mut m, sys_inotify_rm_watch, &[fd, 1]),
            Err(Errno::EINVAL)
        );
        assert_eq!(call(&mut p, &mut m, read, &[fd, buf, 64]), Ok(16));
        assert_eq!(m.read_u32(buf + 4).unwrap(), IN_IGNORED);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_fork_gets_an_instance_of_its_own() {
        let (mut p, mut m) = test_setup(Policy::default());
        let fd = call(&mut p, &mut m, sys_inotify_init1, &[0]).unwrap() as i32;
        let inst = |t: &crate::linux::fdtable::FdTable| match &lock(&t.get(fd).unwrap()).kind {
            FileKind::Event(EventObj::Inotify(i)) => i.clone(),
            _ => panic!("not inotify"),
        };
        let copy = p.fds.fork_copy().unwrap();
        assert!(!Arc::ptr_eq(&inst(&p.fds), &inst(&copy)));
    }
}
