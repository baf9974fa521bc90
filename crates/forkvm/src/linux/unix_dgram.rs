//! AF_UNIX datagram sockets addressed by name: a datagram socket bound to a
//! path or an abstract name has a receive queue ([`Inbox`]) that any
//! datagram socket of the run reaches with sendto(2) to that name, or with
//! send(2) after connect(2) to it (the default destination). This is what
//! syslog clients, Python's logging handlers and sd_notify do.
//!
//! As on Linux: each datagram keeps its boundaries and carries its
//! sender's name (none for an unbound sender: recvfrom gives an empty
//! address); a queue holding more than `MAX_DGRAM_QLEN` datagrams makes
//! senders wait (EAGAIN when nonblocking); a send to a name whose socket
//! is closed is ECONNREFUSED (a connected sender is then disconnected:
//! ENOTCONN next); a receiver connected to another socket takes nothing
//! from the others (EPERM); one shut down for reading refuses (EPIPE).
//! A connected pair from socketpair(2) keeps its own queues
//! ([`super::unix_socket`]); a bound end of one also receives by name.

use super::fdtable::{lock, FileRef};
use super::Errno;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};

/// Datagrams a receive queue holds before senders wait: Linux lets one
/// more in than `net.unix.max_dgram_qlen` (10 by default).
pub const MAX_DGRAM_QLEN: usize = 10;

/// One queued datagram.
pub struct Datagram {
    /// Its bytes.
    pub data: Vec<u8>,
    /// Descriptions passed with SCM_RIGHTS.
    pub fds: Vec<FileRef>,
    /// The sender's name, if it was bound.
    pub from: Option<Vec<u8>>,
}

/// The receive queue of a bound datagram socket.
#[derive(Default)]
pub struct Inbox {
    /// Datagrams not yet read.
    pub queue: VecDeque<Datagram>,
    /// Its socket is closed: senders are refused.
    pub closed: bool,
    /// Its socket was shut down for reading: senders get EPIPE.
    pub shut_rd: bool,
    /// The queue its socket is connected to: only that socket may send here.
    pub peer: Option<Weak<Mutex<Inbox>>>,
    /// Datagrams queued and taken so far (see `Socket::edge_token`).
    pub moves: u64,
}

/// A shared receive queue.
pub type InboxRef = Arc<Mutex<Inbox>>;

impl Inbox {
    /// Whether a sender must wait (Linux's `unix_recvq_full`).
    pub fn full(&self) -> bool {
        self.queue.len() > MAX_DGRAM_QLEN
    }

    /// A copy for a forked process: the same datagrams, without the
    /// descriptors in flight (they would be shared with the original).
    fn fork_copy(&self) -> Inbox {
        Inbox {
            queue: self
                .queue
                .iter()
                .map(|d| Datagram {
                    data: d.data.clone(),
                    fds: Vec::new(),
                    from: d.from.clone(),
                })
                .collect(),
            closed: self.closed,
            shut_rd: self.shut_rd,
            peer: None,
            moves: self.moves,
        }
    }
}

/// What a fork copies once for all the sockets that share it: pairs and
/// receive queues, keyed by the original's address.
#[derive(Default)]
pub struct ForkCopies {
    /// Copies of connected pairs.
    pub pairs: Vec<(usize, Arc<Mutex<super::unix_socket::Pair>>)>,
    /// Copies of receive queues.
    inboxes: Vec<(usize, InboxRef)>,
}

impl ForkCopies {
    /// The copy of `inbox` (made on first use, with the copy of the queue
    /// its socket is connected to as its peer).
    pub fn inbox(&mut self, inbox: &InboxRef) -> InboxRef {
        let key = Arc::as_ptr(inbox) as usize;
        if let Some((_, c)) = self.inboxes.iter().find(|(k, _)| *k == key) {
            return c.clone();
        }
        let (copy, peer) = {
            let g = lock(inbox);
            (g.fork_copy(), g.peer.as_ref().and_then(Weak::upgrade))
        };
        let c = Arc::new(Mutex::new(copy));
        self.inboxes.push((key, c.clone()));
        if let Some(peer) = peer {
            let p = self.inbox(&peer);
            lock(&c).peer = Some(Arc::downgrade(&p));
        }
        c
    }
}

/// Whether `peer` is `mine`.
fn is_mine(peer: &Weak<Mutex<Inbox>>, mine: Option<&InboxRef>) -> bool {
    mine.is_some_and(|m| std::ptr::eq(peer.as_ptr(), Arc::as_ptr(m)))
}

/// Whether a socket whose own queue is `mine` may send to `to` (EPERM if
/// `to`'s socket is connected to another).
pub fn may_send(to: &InboxRef, mine: Option<&InboxRef>) -> Result<(), Errno> {
    let g = lock(to);
    if g.closed {
        return Err(Errno::ECONNREFUSED);
    }
    match &g.peer {
        Some(peer) if !is_mine(peer, mine) => Err(Errno::EPERM),
        _ => Ok(()),
    }
}

/// Queues a datagram on `to` from a socket whose own queue is `mine` and
/// whose name is `from`.
pub fn deliver(
    to: &InboxRef,
    mine: Option<&InboxRef>,
    from: Option<Vec<u8>>,
    data: &[u8],
    fds: Vec<FileRef>,
) -> Result<usize, Errno> {
    may_send(to, mine)?;
    let mut g = lock(to);
    if g.shut_rd {
        return Err(Errno::EPIPE);
    }
    if g.full() {
        return Err(Errno::EAGAIN);
    }
    g.queue.push_back(Datagram {
        data: data.to_vec(),
        fds,
        from,
    });
    g.moves += 1;
    Ok(data.len())
}

/// Takes (or, with `peek`, copies) the next datagram of `inbox` into `buf`:
/// (bytes copied, datagram length, descriptors, sender), or None if empty.
pub fn take(inbox: &InboxRef, buf: &mut [u8], peek: bool) -> Option<super::unix_socket::Received> {
    let mut g = lock(inbox);
    let d = g.queue.front()?;
    let n = d.data.len().min(buf.len());
    buf[..n].copy_from_slice(&d.data[..n]);
    let mut out = super::unix_socket::Received {
        copied: n,
        full: d.data.len(),
        fds: Vec::new(),
        from: d.from.clone(),
    };
    if peek {
        out.fds = d.fds.clone();
    } else if let Some(d) = g.queue.pop_front() {
        g.moves += 1;
        out.fds = d.fds;
    }
    Some(out)
}

/// Closes `inbox` (its socket is gone): senders are refused from now on,
/// and what was never read goes away (after the lock is released, since
/// it may hold descriptions whose closing reaches this queue).
pub fn close(inbox: &InboxRef) {
    let dropped = {
        let mut g = lock(inbox);
        g.closed = true;
        g.peer = None;
        std::mem::take(&mut g.queue)
    };
    drop(dropped);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_limit_boundaries_and_refusals() {
        let to: InboxRef = Arc::default();
        let me: InboxRef = Arc::default();
        for i in 0..=MAX_DGRAM_QLEN {
            assert_eq!(deliver(&to, None, None, &[i as u8; 3], Vec::new()), Ok(3));
        }
        assert_eq!(
            deliver(&to, None, None, b"x", Vec::new()),
            Err(Errno::EAGAIN)
        );
        let mut buf = [0u8; 2];
        let r = take(&to, &mut buf, true).unwrap();
        assert_eq!((r.copied, r.full), (2, 3), "peek, truncated");
        let r = take(&to, &mut buf, false).unwrap();
        assert_eq!((r.copied, r.full, r.from), (2, 3, None));
        assert_eq!(
            deliver(&to, Some(&me), Some(b"me".to_vec()), b"y", Vec::new()),
            Ok(1)
        );
        // Connected to another socket: others are refused.
        let other: InboxRef = Arc::default();
        lock(&to).peer = Some(Arc::downgrade(&other));
        assert_eq!(may_send(&to, Some(&me)), Err(Errno::EPERM));
        assert_eq!(may_send(&to, None), Err(Errno::EPERM));
        assert_eq!(may_send(&to, Some(&other)), Ok(()));
        close(&to);
        assert_eq!(
            deliver(&to, Some(&other), None, b"z", Vec::new()),
            Err(Errno::ECONNREFUSED)
        );
        assert!(take(&to, &mut buf, false).is_none());
    }

    #[test]
    fn fork_copies_keep_sharing_and_peers() {
        let a: InboxRef = Arc::default();
        let b: InboxRef = Arc::default();
        deliver(&a, None, Some(b"b".to_vec()), b"queued", Vec::new()).unwrap();
        lock(&a).peer = Some(Arc::downgrade(&b));
        let mut copies = ForkCopies::default();
        let ca = copies.inbox(&a);
        let cb = copies.inbox(&b);
        assert!(Arc::ptr_eq(&ca, &copies.inbox(&a)), "copied once");
        assert_eq!(may_send(&ca, Some(&cb)), Ok(()));
        assert_eq!(may_send(&ca, Some(&b)), Err(Errno::EPERM));
        let mut buf = [0u8; 8];
        let r = take(&ca, &mut buf, false).unwrap();
        assert_eq!(&buf[..r.copied], b"queued");
        assert_eq!(lock(&a).queue.len(), 1, "the original keeps its own");
    }
}
