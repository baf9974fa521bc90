use super::super::ioctl::{sys_ioctl, FIOCLEX, FIONBIO, FIONREAD, TCGETS, TCSETS};
use super::super::poll::{sys_poll, sys_ppoll, POLLHUP, POLLNVAL, POLLOUT};
use super::*;
use crate::abi::USER_BASE;
use crate::linux::fdtable::{oflags::*, PIPE_CAPACITY};
use crate::linux::{Handler, Policy};

const BAD: [u64; 4] = [0, 0xffff_8000_0000_0000, 8 << 20, u64::MAX - 7];

fn setup() -> (Process, GuestMemory) {
    crate::linux::test_setup(Policy::default())
}

use crate::linux::test_call as call;

fn open_dev(p: &mut Process, kind: FileKind, flags: u32) -> u64 {
    p.fds.insert(OpenFile::new(kind, flags), false).unwrap() as u64
}

#[test]
fn pipe_round_trip() {
    let (mut p, mut m) = setup();
    let fds = USER_BASE;
    assert_eq!(
        call(&mut p, &mut m, sys_pipe2, &[fds, u64::from(O_CLOEXEC)]),
        Ok(0)
    );
    let (r, w) = (
        u64::from(m.read_u32(fds).unwrap()),
        u64::from(m.read_u32(fds + 4).unwrap()),
    );
    assert_eq!((r, w), (3, 4));
    assert_eq!(p.fds.cloexec(3), Ok(true));
    let buf = USER_BASE + 0x1000;
    m.write(buf, b"hello pipe").unwrap();
    assert_eq!(call(&mut p, &mut m, sys_write, &[w, buf, 10]), Ok(10));
    let out = USER_BASE + 0x2000;
    assert_eq!(call(&mut p, &mut m, sys_read, &[r, out, 4]), Ok(4));
    assert_eq!(m.read(out, 4).unwrap(), b"hell");
    assert_eq!(call(&mut p, &mut m, sys_read, &[r, out, 100]), Ok(6));
    assert_eq!(m.read(out, 6).unwrap(), b"o pipe");
    // Empty with a live writer: a blocking read waits (the call is made again later).
    assert_eq!(call(&mut p, &mut m, sys_read, &[r, out, 100]), Ok(0));
    assert!(matches!(
        p.sched.take(),
        Some(crate::linux::thread::Sched::Retry(_))
    ));
    p.waiting = None;
    // Wrong directions.
    assert_eq!(
        call(&mut p, &mut m, sys_read, &[w, out, 1]),
        Err(Errno::EBADF)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_write, &[r, buf, 1]),
        Err(Errno::EBADF)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_lseek, &[r, 0, 0]),
        Err(Errno::ESPIPE)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_pread64, &[r, out, 1, 0]),
        Err(Errno::ESPIPE)
    );
    // Poll: writable, not readable; then readable.
    let pfd = USER_BASE + 0x3000;
    let mut ent = Vec::new();
    ent.extend_from_slice(&(r as i32).to_le_bytes());
    ent.extend_from_slice(&(POLLIN).to_le_bytes());
    ent.extend_from_slice(&0i16.to_le_bytes());
    ent.extend_from_slice(&(w as i32).to_le_bytes());
    ent.extend_from_slice(&(POLLOUT).to_le_bytes());
    ent.extend_from_slice(&0i16.to_le_bytes());
    m.write(pfd, &ent).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_poll, &[pfd, 2, 0]), Ok(1));
    assert_eq!(m.read(pfd + 6, 2).unwrap(), &0i16.to_le_bytes());
    assert_eq!(m.read(pfd + 14, 2).unwrap(), &POLLOUT.to_le_bytes());
    call(&mut p, &mut m, sys_write, &[w, buf, 3]).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_poll, &[pfd, 2, 0]), Ok(2));
    // Closing the writer: remaining data, then EOF and POLLHUP.
    p.fds.close(w as i32).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_read, &[r, out, 100]), Ok(3));
    assert_eq!(call(&mut p, &mut m, sys_read, &[r, out, 100]), Ok(0));
    assert_eq!(call(&mut p, &mut m, sys_poll, &[pfd, 1, 0]), Ok(1));
    assert_eq!(m.read(pfd + 6, 2).unwrap(), &POLLHUP.to_le_bytes());
}

#[test]
fn poll_sees_eventfd_readiness() {
    let (mut p, mut m) = setup();
    let ev = super::super::event::EventObj::EventFd {
        count: 1,
        semaphore: false,
    };
    let fd = open_dev(&mut p, FileKind::Event(ev), O_RDWR);
    let pfd = USER_BASE;
    let mut ent = Vec::new();
    ent.extend_from_slice(&(fd as i32).to_le_bytes());
    ent.extend_from_slice(&POLLIN.to_le_bytes());
    ent.extend_from_slice(&0i16.to_le_bytes());
    m.write(pfd, &ent).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_poll, &[pfd, 1, 0]), Ok(1));
    assert_eq!(m.read(pfd + 6, 2).unwrap(), &POLLIN.to_le_bytes());
}

#[test]
fn pipe_full_and_broken() {
    let (mut p, mut m) = setup();
    call(&mut p, &mut m, sys_pipe, &[USER_BASE]).unwrap();
    let buf = USER_BASE + 0x1000;
    // A blocking write of more than fits sends what fits and waits for
    // room for the rest (the call is made again).
    assert_eq!(call(&mut p, &mut m, sys_write, &[4, buf, 100_000]), Ok(0));
    assert!(matches!(
        p.sched.take(),
        Some(crate::linux::thread::Sched::Retry(_))
    ));
    assert_eq!(p.writes[0].done, PIPE_CAPACITY as u64);
    p.waiting = None;
    // Made again with the pipe still full: it waits on.
    assert_eq!(call(&mut p, &mut m, sys_write, &[4, buf, 100_000]), Ok(0));
    p.sched = None;
    p.waiting = None;
    // The reader goes: the write answers what it sent; the next one EPIPE.
    p.fds.close(3).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_write, &[4, buf, 100_000]),
        Ok(PIPE_CAPACITY as u64)
    );
    assert!(p.writes.is_empty());
    assert_eq!(p.killed_by, None);
    assert_eq!(
        call(&mut p, &mut m, sys_write, &[4, buf, 1]),
        Err(Errno::EPIPE)
    );
    // With SIGPIPE at its default, as on Linux: death (`yes | head -1`).
    assert_eq!(p.killed_by, Some(13));
    // pipe() with a bad pointer allocates nothing.
    for bad in BAD {
        assert_eq!(call(&mut p, &mut m, sys_pipe, &[bad]), Err(Errno::EFAULT));
    }
    assert_eq!(p.fds.open_fds(), vec![0, 1, 2, 4]);
    assert_eq!(
        call(&mut p, &mut m, sys_pipe2, &[USER_BASE, 0x1]),
        Err(Errno::EINVAL)
    );
}

#[test]
fn devices_and_vectors() {
    let (mut p, mut m) = setup();
    let zero = open_dev(&mut p, FileKind::Zero, O_RDWR);
    let null = open_dev(&mut p, FileKind::Null, O_RDWR);
    let rnd = open_dev(&mut p, FileKind::Urandom, O_RDONLY);
    let buf = USER_BASE + 0x1000;
    m.write(buf, &[0xaa; 64]).unwrap();
    assert_eq!(call(&mut p, &mut m, sys_read, &[zero, buf, 64]), Ok(64));
    assert_eq!(m.read(buf, 64).unwrap(), &[0u8; 64]);
    assert_eq!(call(&mut p, &mut m, sys_read, &[null, buf, 64]), Ok(0));
    assert_eq!(call(&mut p, &mut m, sys_write, &[null, buf, 64]), Ok(64));
    assert_eq!(call(&mut p, &mut m, sys_read, &[rnd, buf, 64]), Ok(64));
    assert_eq!(
        call(&mut p, &mut m, sys_write, &[rnd, buf, 1]),
        Err(Errno::EBADF)
    );
    // A zero-length transfer needs no buffer.
    assert_eq!(call(&mut p, &mut m, sys_read, &[zero, 0, 0]), Ok(0));
    // readv of /dev/zero into two iovecs.
    let iov = USER_BASE + 0x2000;
    let (b1, b2) = (USER_BASE + 0x3000, USER_BASE + 0x4000);
    m.write(b1, &[1; 8]).unwrap();
    m.write(b2, &[1; 8]).unwrap();
    for (i, v) in [b1, 3, b2, 5].iter().enumerate() {
        m.write_u64(iov + 8 * i as u64, *v).unwrap();
    }
    assert_eq!(call(&mut p, &mut m, sys_readv, &[zero, iov, 2]), Ok(8));
    assert_eq!(m.read(b1, 4).unwrap(), &[0, 0, 0, 1]);
    assert_eq!(m.read(b2, 6).unwrap(), &[0, 0, 0, 0, 0, 1]);
    assert_eq!(call(&mut p, &mut m, sys_writev, &[null, iov, 2]), Ok(8));
    assert_eq!(
        call(&mut p, &mut m, sys_readv, &[zero, iov, 1025]),
        Err(Errno::EINVAL)
    );
    // Bad iovec entries and arrays.
    for bad in BAD {
        assert_eq!(
            call(&mut p, &mut m, sys_readv, &[zero, bad, 2]),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_writev, &[null, bad, 2]),
            Err(Errno::EFAULT)
        );
        m.write_u64(iov + 16, bad).unwrap();
        assert_eq!(
            call(&mut p, &mut m, sys_readv, &[zero, iov, 2]),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_writev, &[null, iov, 2]),
            Err(Errno::EFAULT)
        );
    }
    m.write_u64(iov + 16, b2).unwrap();
    m.write_u64(iov + 24, 1 << 63).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_readv, &[zero, iov, 2]),
        Err(Errno::EINVAL)
    );
    m.write_u64(iov + 24, 1 << 40).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_readv, &[zero, iov, 2]),
        Err(Errno::EFAULT)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_lseek, &[zero, 100, SEEK_SET]),
        Ok(0)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_lseek, &[zero, 0, 9]),
        Err(Errno::EINVAL)
    );
}

#[test]
fn bad_buffers_and_fds() {
    let (mut p, mut m) = setup();
    let zero = open_dev(&mut p, FileKind::Zero, O_RDWR);
    for bad in BAD {
        for h in [sys_read as Handler, sys_write] {
            assert_eq!(
                call(&mut p, &mut m, h, &[zero, bad, 16]),
                Err(Errno::EFAULT)
            );
        }
        for h in [sys_pread64 as Handler, sys_pwrite64] {
            assert_eq!(
                call(&mut p, &mut m, h, &[zero, bad, 16, 0]),
                Err(Errno::EFAULT)
            );
        }
        assert_eq!(
            call(&mut p, &mut m, sys_poll, &[bad, 1, 0]),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_ppoll, &[bad, 1, 0, 0, 8]),
            Err(Errno::EFAULT)
        );
        if bad != 0 {
            // NULL timeout/sigmask are valid (and would wait forever).
            let ts = USER_BASE + 0x100;
            assert_eq!(
                call(&mut p, &mut m, sys_ppoll, &[USER_BASE, 0, bad, 0, 8]),
                Err(Errno::EFAULT)
            );
            assert_eq!(
                call(&mut p, &mut m, sys_ppoll, &[USER_BASE, 0, ts, bad, 8]),
                Err(Errno::EFAULT)
            );
        }
        assert_eq!(
            call(&mut p, &mut m, sys_ioctl, &[zero, u64::from(FIONBIO), bad]),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_sendfile, &[zero, zero, bad, 1]),
            Err(Errno::EINVAL)
        );
    }
    // Huge lengths within the table are EFAULT, never a host allocation.
    let buf = USER_BASE + 0x1000;
    for len in [1u64 << 40, u64::MAX, 8 << 20] {
        assert_eq!(
            call(&mut p, &mut m, sys_read, &[zero, buf, len]),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_write, &[zero, buf, len]),
            Err(Errno::EFAULT)
        );
    }
    assert_eq!(
        call(&mut p, &mut m, sys_poll, &[buf, 1025, 0]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_pread64, &[zero, buf, 1, u64::MAX]),
        Err(Errno::EINVAL)
    );
    for fd in [99u64, u64::MAX, 1 << 32 | 99, 5000] {
        for h in [
            sys_read as Handler,
            sys_write,
            sys_readv,
            sys_writev,
            sys_lseek,
            sys_fsync,
        ] {
            assert_eq!(call(&mut p, &mut m, h, &[fd, buf, 1]), Err(Errno::EBADF));
        }
        assert_eq!(
            call(&mut p, &mut m, sys_ioctl, &[fd, u64::from(TCGETS), buf]),
            Err(Errno::EBADF)
        );
        assert_eq!(
            call(&mut p, &mut m, sys_sendfile, &[1, fd, 0, 1]),
            Err(Errno::EBADF)
        );
    }
    // Bad fds in poll are POLLNVAL, negative ones ignored.
    m.write(
        buf,
        &[99, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0],
    )
    .unwrap();
    assert_eq!(call(&mut p, &mut m, sys_poll, &[buf, 2, 0]), Ok(1));
    assert_eq!(m.read(buf + 6, 2).unwrap(), &POLLNVAL.to_le_bytes());
    assert_eq!(m.read(buf + 14, 2).unwrap(), &[0, 0]);
    // A pure sleep.
    assert_eq!(call(&mut p, &mut m, sys_poll, &[0, 0, 1]), Ok(0));
}

#[test]
fn ioctl_basics() {
    let (mut p, mut m) = setup();
    let zero = open_dev(&mut p, FileKind::Zero, O_RDWR);
    let buf = USER_BASE;
    m.write_u32(buf, 1).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_ioctl, &[zero, u64::from(FIONBIO), buf]),
        Ok(0)
    );
    assert!(lock(&p.fds.get(zero as i32).unwrap()).nonblocking());
    assert_eq!(
        call(&mut p, &mut m, sys_ioctl, &[zero, u64::from(TCGETS), buf]),
        Err(Errno::ENOTTY)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_ioctl, &[zero, 0x1234, buf]),
        Err(Errno::ENOTTY)
    );
    assert_eq!(
        call(&mut p, &mut m, sys_ioctl, &[zero, u64::from(FIOCLEX), 0]),
        Ok(0)
    );
    assert_eq!(p.fds.cloexec(zero as i32), Ok(true));
    // On stdio the answer comes from the host (ENOTTY when not a terminal).
    let r = call(&mut p, &mut m, sys_ioctl, &[1, u64::from(TCSETS), buf]);
    assert!(r == Err(Errno::ENOTTY) || r == Err(Errno::EPERM), "{r:?}");
    call(&mut p, &mut m, sys_pipe, &[buf]).unwrap();
    let w = m.read_u32(buf + 4).unwrap();
    let r = m.read_u32(buf).unwrap();
    m.write(buf + 0x100, b"abc").unwrap();
    call(&mut p, &mut m, sys_write, &[u64::from(w), buf + 0x100, 3]).unwrap();
    assert_eq!(
        call(
            &mut p,
            &mut m,
            sys_ioctl,
            &[u64::from(r), u64::from(FIONREAD), buf + 0x200]
        ),
        Ok(0)
    );
    assert_eq!(m.read_u32(buf + 0x200), Ok(3));
}

#[test]
fn sendfile_between_devices() {
    let (mut p, mut m) = setup();
    let zero = open_dev(&mut p, FileKind::Zero, O_RDONLY);
    let null = open_dev(&mut p, FileKind::Null, O_WRONLY);
    let off = USER_BASE;
    m.write_u64(off, 10).unwrap();
    assert_eq!(
        call(&mut p, &mut m, sys_sendfile, &[null, zero, off, 200_000]),
        Ok(200_000)
    );
    assert_eq!(m.read_u64(off), Ok(200_010));
    assert_eq!(
        call(&mut p, &mut m, sys_sendfile, &[zero, null, 0, 1]),
        Err(Errno::EBADF)
    );
    for bad in BAD.into_iter().filter(|&b| b != 0) {
        assert_eq!(
            call(&mut p, &mut m, sys_sendfile, &[null, zero, bad, 1]),
            Err(Errno::EFAULT)
        );
    }
}

#[test]
fn splice_needs_a_pipe_and_checks_every_guest_pointer() {
    let (mut p, mut m) = setup();
    let zero = open_dev(&mut p, FileKind::Zero, O_RDONLY);
    let null = open_dev(&mut p, FileKind::Null, O_WRONLY);
    let splice = super::splice::sys_splice;
    let vmsplice = super::splice::sys_vmsplice;
    assert_eq!(
        call(&mut p, &mut m, splice, &[zero, 0, null, 0, 4096, 0]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(&mut p, &mut m, splice, &[999, 0, null, 0, 1, 0]),
        Err(Errno::EBADF)
    );
    let fds = USER_BASE;
    assert_eq!(call(&mut p, &mut m, sys_pipe2, &[fds, 0]), Ok(0));
    let (r, w) = (
        u64::from(m.read_u32(fds).unwrap()),
        u64::from(m.read_u32(fds + 4).unwrap()),
    );
    for bad in BAD.into_iter().filter(|&b| b != 0) {
        assert_eq!(
            call(&mut p, &mut m, splice, &[zero, bad, w, 0, 8, 0]),
            Err(Errno::EFAULT)
        );
        assert_eq!(
            call(&mut p, &mut m, vmsplice, &[w, bad, 1, 0]),
            Err(Errno::EFAULT)
        );
    }
    let off = USER_BASE + 0x100;
    m.write_u64(off, 7).unwrap();
    assert_eq!(
        call(&mut p, &mut m, splice, &[zero, off, w, 0, u64::MAX, 0]),
        Ok(PIPE_CAPACITY as u64)
    );
    assert_eq!(m.read_u64(off), Ok(7 + PIPE_CAPACITY as u64));
    // An iovec whose buffer is not guest memory takes nothing out of the pipe.
    let iov = USER_BASE + 0x200;
    m.write_u64(iov, BAD[1]).unwrap();
    m.write_u64(iov + 8, 16).unwrap();
    assert_eq!(
        call(&mut p, &mut m, vmsplice, &[r, iov, 1, 0]),
        Err(Errno::EFAULT)
    );
    assert_eq!(
        call(&mut p, &mut m, vmsplice, &[r, iov, 1025, 0]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(&mut p, &mut m, splice, &[r, 0, null, 0, u64::MAX, 0]),
        Ok(PIPE_CAPACITY as u64)
    );
}
