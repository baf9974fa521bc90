use super::*;
use crate::linux::fdtable::{FileKind, OpenFile};

#[test]
fn stream_pair_round_trip_and_eof() {
    let (mut a, mut b) = Socket::pair(SOCK_STREAM);
    assert_eq!(a.send(b"hello", Vec::new()), Ok(5));
    assert_eq!(a.send(b" world", Vec::new()), Ok(6));
    assert_eq!(b.available(), 11);
    let mut buf = [0u8; 64];
    let r = b.recv(&mut buf, true).unwrap();
    assert_eq!(&buf[..r.copied], b"hello world", "peek joins messages");
    let r = b.recv(&mut buf[..3], false).unwrap();
    assert_eq!(&buf[..r.copied], b"hel");
    let r = b.recv(&mut buf, false).unwrap();
    assert_eq!(&buf[..r.copied], b"lo world");
    assert_eq!(b.recv(&mut buf, false).err(), Some(Errno::EAGAIN));
    assert_eq!(b.poll() & POLLIN, 0);
    drop(a);
    assert_eq!(b.recv(&mut buf, false).map(|r| r.copied), Ok(0));
    assert_ne!(b.poll() & POLLHUP, 0);
    assert_eq!(b.send(b"x", Vec::new()), Err(Errno::EPIPE));
}

#[test]
fn datagrams_keep_boundaries_and_truncate() {
    let (mut a, mut b) = Socket::pair(SOCK_DGRAM);
    a.send(b"one", Vec::new()).unwrap();
    a.send(b"three", Vec::new()).unwrap();
    a.send(b"", Vec::new()).unwrap();
    let mut buf = [0u8; 4];
    let r = b.recv(&mut buf, false).unwrap();
    assert_eq!((r.copied, r.full), (3, 3));
    let r = b.recv(&mut buf, false).unwrap();
    assert_eq!((r.copied, r.full), (4, 5), "truncated, rest dropped");
    let r = b.recv(&mut buf, false).unwrap();
    assert_eq!((r.copied, r.full), (0, 0), "empty datagram");
    assert_eq!(b.recv(&mut buf, false).err(), Some(Errno::EAGAIN));
    let huge = vec![0u8; DEFAULT_BUF as usize];
    assert_eq!(a.send(&huge, Vec::new()), Err(Errno::EMSGSIZE));
    // Filling up: EAGAIN, never unbounded memory.
    let mut n = 0;
    while a.send(&[0u8; 1000], Vec::new()).is_ok() {
        n += 1;
        assert!(n < 10_000);
    }
    assert_eq!(a.poll() & POLLOUT, 0);
    // Peer closed: datagram sends are refused, then not connected.
    drop(b);
    assert_eq!(a.send(b"x", Vec::new()), Err(Errno::ECONNREFUSED));
    assert_eq!(a.send(b"x", Vec::new()), Err(Errno::ENOTCONN));
}

#[test]
fn shutdown_propagates_for_streams_only() {
    let (mut a, mut b) = Socket::pair(SOCK_STREAM);
    a.shutdown(1).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(b.recv(&mut buf, false).map(|r| r.copied), Ok(0));
    assert_ne!(b.poll() & POLLRDHUP, 0);
    assert_eq!(a.send(b"x", Vec::new()), Err(Errno::EPIPE));
    assert_eq!(b.send(b"x", Vec::new()), Ok(1), "the other way still works");
    assert_eq!(a.shutdown(7), Err(Errno::EINVAL));
    let (mut c, mut d) = Socket::pair(SOCK_DGRAM);
    c.shutdown(1).unwrap();
    assert_eq!(d.recv(&mut buf, false).err(), Some(Errno::EAGAIN));
    assert_eq!(c.send(b"x", Vec::new()), Err(Errno::EPIPE));
    let mut lone = Socket::new(SOCK_STREAM);
    assert_eq!(lone.recv(&mut buf, false).err(), Some(Errno::EINVAL));
    assert_eq!(lone.poll(), POLLOUT | POLLWRNORM | POLLHUP);
    assert_eq!(lone.shutdown(2), Ok(()));
    assert_eq!(lone.send(b"x", Vec::new()), Err(Errno::ENOTCONN));
    // Closing with unread data resets the peer once.
    let (mut e, f) = Socket::pair(SOCK_STREAM);
    e.send(b"unread", Vec::new()).unwrap();
    drop(f);
    assert_ne!(e.poll() & POLLERR, 0);
    assert_eq!(e.recv(&mut buf, false).err(), Some(Errno(ECONNRESET)));
    assert_eq!(e.recv(&mut buf, false).map(|r| r.copied), Ok(0));
}

#[test]
fn a_tcp_close_is_a_fin_and_a_send_after_it_draws_a_reset() {
    let (mut a, b) = Socket::tcp_pair();
    drop(b);
    assert_eq!(
        a.poll(),
        POLLIN | POLLRDNORM | POLLRDHUP | POLLOUT | POLLWRNORM
    );
    let mut buf = [0u8; 8];
    assert_eq!(a.recv(&mut buf, false).map(|r| r.copied), Ok(0));
    assert_eq!(a.send(b"x", Vec::new()), Ok(1), "taken, and reset");
    assert_eq!(a.poll() & (POLLERR | POLLHUP), POLLERR | POLLHUP);
    assert_eq!(
        a.recv(&mut buf, false).map(|r| r.copied),
        Ok(0),
        "EOF first"
    );
    assert_eq!(a.send(b"y", Vec::new()), Err(Errno::EPIPE));
    assert_eq!(a.poll() & POLLERR, 0);
    assert_eq!(a.send(b"z", Vec::new()), Err(Errno::EPIPE));
    // Unread data dropped: a reset at once.
    let (mut c, d) = Socket::tcp_pair();
    c.send(b"unread", Vec::new()).unwrap();
    drop(d);
    assert_eq!(c.recv(&mut buf, false).err(), Some(Errno(ECONNRESET)));
    assert_eq!(c.recv(&mut buf, false).map(|r| r.copied), Ok(0));
    // SHUT_RD is not the peer's business.
    let (mut e, mut f) = Socket::tcp_pair();
    f.shutdown(0).unwrap();
    assert_eq!(e.send(b"abc", Vec::new()), Ok(3));
    assert_eq!(f.recv(&mut buf, false).map(|r| r.copied), Ok(3));
    assert_eq!(f.recv(&mut buf, false).map(|r| r.copied), Ok(0));
}

#[test]
fn descriptors_travel_with_their_bytes_and_cycles_do_not_deadlock() {
    let (mut a, b) = Socket::pair(SOCK_STREAM);
    let file = OpenFile::new(FileKind::Null, 0).into_ref();
    a.send(b"ab", Vec::new()).unwrap();
    a.send(b"cd", vec![file.clone()]).unwrap();
    let mut b = b;
    let mut buf = [0u8; 8];
    let r = b.recv(&mut buf, false).unwrap();
    assert_eq!((r.copied, r.fds.len()), (2, 0), "stops before the fds");
    let r = b.recv(&mut buf, false).unwrap();
    assert_eq!((r.copied, r.fds.len()), (2, 1));
    assert!(Arc::ptr_eq(&r.fds[0], &file));
    // A socket end queued inside its own pair: closing must not deadlock.
    let (x, y) = Socket::pair(SOCK_STREAM);
    let xref = OpenFile::new(FileKind::Socket(x), 2).into_ref();
    let mut y = y;
    let other = {
        let mut g = lock(&xref);
        match &mut g.kind {
            FileKind::Socket(s) => s.send(b"z", vec![xref.clone()]),
            _ => unreachable!(),
        }
    };
    assert_eq!(other, Ok(1));
    drop(xref);
    let r = y.recv(&mut buf, false).unwrap();
    assert_eq!(r.fds.len(), 1);
    drop(r);
    drop(y);
}
