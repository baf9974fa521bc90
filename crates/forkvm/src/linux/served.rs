//! The host's side of a server program's virtual TCP (`forkvm serve`):
//! the addresses the program listens on, and the connections the host
//! pushes onto its listening sockets ([`HostConn`]: what the host pushes
//! the guest reads, what the guest writes the host takes).

use super::fdtable::{lock, FileKind};
use super::inet::{find_listener, Inet, AF_INET, AF_INET6};
use super::unix_socket::Socket;
use super::{Errno, Process};
use crate::memory::GuestMemory;
use std::collections::VecDeque;
use std::net::SocketAddr;

/// The send buffer of the host's end: what the host may push at once.
const HOST_PUSH_BUF: u32 = 8 << 20;
/// Most bytes the host takes from a connection at once.
const TAKE_CHUNK: usize = 1 << 20;

/// The address the program listens on (its first listening virtual socket).
pub fn listening_addr(p: &Process) -> Option<SocketAddr> {
    for fd in p.fds.open_fds() {
        let Ok(f) = p.fds.get(fd) else { continue };
        let of = lock(&f);
        if let FileKind::Socket(s) = &of.kind {
            if let Some(i) = &s.inet {
                if i.listener.is_some() {
                    return i.local;
                }
            }
        }
    }
    None
}

/// Whether `fd` is one of the program's listening virtual sockets.
fn is_listening(p: &Process, fd: i64) -> bool {
    let Ok(fd) = i32::try_from(fd) else {
        return false;
    };
    let Ok(f) = p.fds.get(fd) else { return false };
    let of = lock(&f);
    matches!(&of.kind, FileKind::Socket(s) if s.inet.as_ref().is_some_and(|i| i.listener.is_some()))
}

/// Most descriptors of a poll or select set looked at.
const MAX_SET: u64 = 4096;

/// Whether the call the program waits in (number `nr`, arguments `a`) waits
/// for a connection: accept or accept4 on a listening virtual socket, or a
/// poll, ppoll, select, pselect6 or epoll wait whose set holds one. A
/// pre-fork server's arbiter holds the listening socket too, but sleeps in
/// a select of its own pipe (gunicorn) or of nothing: that is not its
/// worker's ready point. A set the host cannot read is not a wait for one.
pub fn waits_for_connection(p: &Process, mem: &GuestMemory, nr: u64, a: &[u64; 6]) -> bool {
    const ACCEPT: u64 = 43;
    const ACCEPT4: u64 = 288;
    const POLL: u64 = 7;
    const PPOLL: u64 = 271;
    const SELECT: u64 = 23;
    const PSELECT6: u64 = 270;
    const EPOLL_WAITS: [u64; 3] = [232, 281, 441];
    match nr {
        ACCEPT | ACCEPT4 => is_listening(p, a[0] as i32 as i64),
        POLL | PPOLL => {
            let n = a[1].min(MAX_SET);
            let Ok(set) = mem.read(a[0], n * 8) else {
                return false;
            };
            set.chunks_exact(8).any(|e| {
                let fd = i32::from_le_bytes([e[0], e[1], e[2], e[3]]);
                let events = i16::from_le_bytes([e[4], e[5]]);
                events & super::poll::POLLIN != 0 && is_listening(p, fd.into())
            })
        }
        SELECT | PSELECT6 => {
            let n = (a[0] as i32).clamp(0, MAX_SET as i32) as u64;
            if a[1] == 0 || n == 0 {
                return false;
            }
            let Ok(bits) = mem.read(a[1], n.div_ceil(64) * 8) else {
                return false;
            };
            (0..n).any(|fd| {
                bits[(fd / 8) as usize] & (1 << (fd % 8)) != 0 && is_listening(p, fd as i64)
            })
        }
        nr if EPOLL_WAITS.contains(&nr) => {
            let Ok(file) = p.fds.get(a[0] as i32) else {
                return false;
            };
            let watched: Vec<i32> = match &lock(&file).kind {
                FileKind::Event(super::event::EventObj::Epoll(set)) => set
                    .iter()
                    .filter(|(_, i)| !i.disabled)
                    .map(|(&fd, _)| fd)
                    .collect(),
                _ => return false,
            };
            watched.into_iter().any(|fd| is_listening(p, fd.into()))
        }
        _ => false,
    }
}

/// Every address the program listens on (its listening virtual sockets, in fd order).
pub fn listening_addrs(p: &Process) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for fd in p.fds.open_fds() {
        let Ok(f) = p.fds.get(fd) else { continue };
        let of = lock(&f);
        if let FileKind::Socket(s) = &of.kind {
            if let Some(i) = &s.inet {
                if let (Some(_), Some(a)) = (&i.listener, i.local) {
                    if !out.contains(&a) {
                        out.push(a);
                    }
                }
            }
        }
    }
    out
}

/// The host's end of a virtual connection.
pub struct HostConn {
    end: Socket,
    /// Bytes pushed but not yet taken by the guest's buffer.
    backlog: VecDeque<u8>,
    eof_pending: bool,
}

impl HostConn {
    /// Queues bytes for the guest to read (pushed as its receive buffer takes them).
    pub fn push(&mut self, data: &[u8]) {
        self.backlog.extend(data);
        self.flush();
    }

    /// Ends what the guest can read (EOF after the pushed bytes).
    pub fn finish(&mut self) {
        self.eof_pending = true;
        self.flush();
    }

    /// Moves pushed bytes into the guest's receive queue; true if any moved.
    pub fn flush(&mut self) -> bool {
        let mut moved = false;
        while !self.backlog.is_empty() {
            let (a, _) = self.backlog.as_slices();
            let n = a.len().min(TAKE_CHUNK);
            match self.end.send(&a[..n], Vec::new()) {
                Ok(k) if k > 0 => {
                    self.backlog.drain(..k);
                    moved = true;
                }
                _ => break,
            }
        }
        if self.backlog.is_empty() && self.eof_pending {
            let _ = self.end.shutdown(1);
            self.eof_pending = false;
        }
        moved
    }

    /// Whether pushed bytes still wait for room in the guest's buffer.
    pub fn pending_input(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// Takes what the guest wrote so far into `out`. Returns true once the
    /// guest has closed its sending side (closed or shut down) and all was taken.
    pub fn take(&mut self, out: &mut Vec<u8>) -> bool {
        // Sized by what is queued: serving asks between every two exits,
        // mostly when nothing is (a byte is enough to see EOF or EAGAIN).
        let mut buf = vec![0u8; self.end.available().clamp(1, 64 * 1024)];
        loop {
            match self.end.recv(&mut buf, false) {
                Ok(r) if r.copied == 0 => return true,
                Ok(r) => out.extend_from_slice(&buf[..r.copied]),
                Err(Errno::EAGAIN) => return false,
                Err(_) => return true,
            }
        }
    }

    /// Whether the guest closed the connection (or shut both ways).
    pub fn guest_gone(&self) -> bool {
        self.end
            .conn
            .as_ref()
            .is_some_and(|(pair, side)| lock(pair).closed[1 - *side])
    }
}

/// Pushes a new connection from `peer` onto the program's listening socket;
/// the host keeps the other end. ECONNREFUSED if nothing listens.
pub fn connect_to_listener(p: &Process, peer: SocketAddr) -> Result<HostConn, Errno> {
    connect_to_listener_on(p, peer, None)
}

/// The same, onto the listening socket bound to `port` when given (a server
/// with several listeners), else the first.
pub fn connect_to_listener_on(
    p: &Process,
    peer: SocketAddr,
    port: Option<u16>,
) -> Result<HostConn, Errno> {
    let listeners = listening_addrs(p);
    let port = port.filter(|want| listeners.iter().any(|a| a.port() == *want));
    let on_port = |i: &Inet| port.is_none_or(|want| i.local.map(|a| a.port()) == Some(want));
    // A port bound for both families (0.0.0.0 and [::]): the peer's own.
    let peer_family = if peer.is_ipv4() { AF_INET } else { AF_INET6 };
    let Some((l, family, local)) = find_listener(p, |i| on_port(i) && i.family == peer_family)
        .or_else(|| find_listener(p, on_port))
    else {
        return Err(Errno::ECONNREFUSED);
    };
    let mut listener = lock(&l);
    // A program that does not accept: its queue is full, as on Linux
    // (plus some slack: the host pushes one connection per request).
    if listener.pending.len() >= listener.backlog.max(0) as usize + 16 {
        return Err(Errno::ECONNREFUSED);
    }
    let (mut guest, mut host) = Socket::tcp_pair();
    let mut gi = Inet::new(family);
    gi.local = local;
    gi.peer = Some(peer);
    guest.inet = Some(Box::new(gi));
    host.sndbuf = HOST_PUSH_BUF;
    listener.pending.push_back(guest);
    listener.arrivals += 1;
    Ok(HostConn {
        end: host,
        backlog: VecDeque::new(),
        eof_pending: false,
    })
}
