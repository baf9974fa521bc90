//! UNIX-domain sockets inside one VM: `socketpair(AF_UNIX)`, and
//! `socket(AF_UNIX)` connected through names the process binds
//! ([`super::unix_names`]). No network and no host socket is involved: a
//! connected pair is two in-process queues, one per direction.
//!
//! Each queue holds messages (a write's bytes plus any descriptors passed
//! with SCM_RIGHTS). A stream read joins messages; a datagram or
//! seqpacket read takes exactly one. Shutdown and close follow Linux's
//! `sk_shutdown` bits: for stream and seqpacket sockets they propagate to
//! the peer (EOF, EPIPE), for datagram sockets they stay local and a send
//! to a closed peer is ECONNREFUSED.

use super::fdtable::{lock, FileRef};
use super::unix_dgram::{ForkCopies, InboxRef};
use super::Errno;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `SOCK_STREAM`.
pub const SOCK_STREAM: u32 = 1;
/// `SOCK_DGRAM`.
pub const SOCK_DGRAM: u32 = 2;
/// `SOCK_SEQPACKET`.
pub const SOCK_SEQPACKET: u32 = 5;

/// Default (and largest settable, doubled) send buffer, as Linux's wmem_default.
pub const DEFAULT_BUF: u32 = 212_992;
/// What a virtual TCP connection buffers unless SO_SNDBUF is set: Linux
/// autotunes a loopback connection's buffers up to tcp_wmem's 4 MiB, and
/// single-threaded programs write megabytes to their own connection before
/// reading it.
pub const TCP_AUTO_SNDBUF: u32 = 4 << 20;
/// Smallest send buffer Linux allows (SOCK_MIN_SNDBUF).
pub const MIN_SNDBUF: u32 = 4608;
/// Smallest receive buffer Linux allows (SOCK_MIN_RCVBUF).
pub const MIN_RCVBUF: u32 = 2304;
/// Bytes each queued message is charged beyond its data (roughly an skb).
const MSG_OVERHEAD: usize = 576;
/// Most descriptors one message may carry (SCM_MAX_FD).
pub const MAX_FDS_PER_MSG: usize = 253;

const ECONNRESET: i32 = 104;
const EPIPE: i32 = 32;

/// `sk_shutdown` bit: no more receiving.
pub const RCV_SHUTDOWN: u8 = 1;
/// `sk_shutdown` bit: no more sending.
pub(super) const SEND_SHUTDOWN: u8 = 2;

const POLLIN: i16 = 0x1;
const POLLPRI: i16 = 0x2;
const POLLOUT: i16 = 0x4;
const POLLERR: i16 = 0x8;
const POLLHUP: i16 = 0x10;
const POLLRDNORM: i16 = 0x40;
const POLLWRNORM: i16 = 0x100;
/// Peer closed its writing side (epoll's EPOLLRDHUP).
pub const POLLRDHUP: i16 = 0x2000;

/// One queued write.
pub struct Msg {
    /// Its bytes.
    pub data: Vec<u8>,
    /// How many of them a stream reader already took.
    pub off: usize,
    /// Descriptions passed with SCM_RIGHTS (taken by the first read that reaches them).
    pub fds: Vec<FileRef>,
    /// TCP: its last byte is the urgent mark (see `urgent.rs`).
    pub urgent: bool,
}

/// What both ends of a connected pair share.
pub struct Pair {
    /// Receive queue of each side (side `s` reads `queues[s]`).
    pub queues: [VecDeque<Msg>; 2],
    /// Bytes charged to each receive queue.
    pub bytes: [usize; 2],
    /// `sk_shutdown` of each side.
    pub shut: [u8; 2],
    /// Whether each side has been closed.
    pub closed: [bool; 2],
    /// Pending `sk_err` of each side (ECONNRESET when the peer closed with unread data).
    pub error: [i32; 2],
    /// Socket type (the same for both sides).
    pub ty: u32,
    /// A virtual TCP connection ([`Socket::tcp_pair`]): a close is a FIN
    /// (or a reset), not the end of both directions.
    pub tcp: bool,
    /// TCP: whether each side received the peer's FIN (its reads end there,
    /// before a pending error).
    pub fin: [bool; 2],
    /// TCP: whether each side's connection was reset (it received a RST, or
    /// answered a send after the peer's close with one): Linux's TCP_CLOSE,
    /// where getpeername is ENOTCONN though unread data stays readable.
    pub reset: [bool; 2],
    /// TCP: the urgent byte each side was sent (MSG_OOB), until taken or read past.
    pub urgent: [Option<super::urgent::Urgent>; 2],
    /// Messages queued and taken so far, either way: each is an edge for
    /// EPOLLET even when the readiness an epoll_wait last saw looks
    /// unchanged (drained and refilled between two looks).
    pub moves: u64,
}

impl Pair {
    /// Queues `data` (with `fds`) for side `side` to read, charged to its
    /// receive queue.
    fn enqueue(&mut self, side: usize, data: &[u8], fds: Vec<FileRef>) {
        self.queues[side].push_back(Msg {
            data: data.to_vec(),
            off: 0,
            fds,
            urgent: false,
        });
        self.bytes[side] += data.len() + MSG_OVERHEAD;
        self.moves += 1;
    }

    /// Drops side `side`'s first message once a stream read has taken all of
    /// it, and gives its room back.
    pub(super) fn pop_if_read(&mut self, side: usize) {
        if self.queues[side]
            .front()
            .is_some_and(|m| m.off == m.data.len())
        {
            if let Some(m) = self.queues[side].pop_front() {
                self.bytes[side] = self.bytes[side].saturating_sub(m.data.len() + MSG_OVERHEAD);
            }
        }
    }
}

/// One socket: an open file description's view of a UNIX socket.
pub struct Socket {
    /// SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET.
    pub ty: u32,
    /// The connection, if any, and which side of it this is.
    pub conn: Option<(Arc<Mutex<Pair>>, usize)>,
    /// `sk_shutdown` of an unconnected socket (a connected one keeps it in the pair).
    pub shut: u8,
    /// SO_SNDBUF as getsockopt reports it.
    pub sndbuf: u32,
    /// SO_SNDBUF was set (Linux's SOCK_SNDBUF_LOCK): no autotuning.
    pub sndbuf_set: bool,
    /// SO_RCVBUF as getsockopt reports it.
    pub rcvbuf: u32,
    /// SO_RCVTIMEO (None: forever).
    pub rcvtimeo: Option<Duration>,
    /// SO_SNDTIMEO (None: forever).
    pub sndtimeo: Option<Duration>,
    /// Other boolean/int options set with setsockopt (SO_PASSCRED, SO_KEEPALIVE, ...), by name.
    pub flags: Vec<(i32, i32)>,
    /// SO_LINGER: whether it is on, and its time in seconds (kept while
    /// off, as Linux does). A virtual TCP socket closed with it on and 0
    /// resets the connection (the peer's reads fail with ECONNRESET)
    /// instead of sending a FIN.
    pub linger: (bool, u32),
    /// Inode number reported by fstat.
    pub ino: u64,
    /// The AF_INET/AF_INET6 part of a virtual TCP socket ([`super::inet`]).
    pub inet: Option<Box<super::inet::Inet>>,
    /// Names of a bound, listening or connected AF_UNIX socket ([`super::unix_names`]).
    pub unix: Option<Box<super::unix_names::Named>>,
    /// The pid SO_PEERCRED reports: the process that connected to this
    /// accepted socket, the listener's for a connecting one, the caller of
    /// socketpair for both ends.
    pub peer_pid: u64,
}

fn next_ino() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Socket {
    /// An unconnected socket of type `ty`.
    pub fn new(ty: u32) -> Socket {
        Socket {
            ty,
            conn: None,
            shut: 0,
            sndbuf: DEFAULT_BUF,
            sndbuf_set: false,
            rcvbuf: DEFAULT_BUF,
            rcvtimeo: None,
            sndtimeo: None,
            flags: Vec::new(),
            linger: (false, 0),
            ino: next_ino(),
            inet: None,
            unix: None,
            peer_pid: super::process::PID,
        }
    }

    /// A connected pair of type `ty` (socketpair).
    pub fn pair(ty: u32) -> (Socket, Socket) {
        let pair = Arc::new(Mutex::new(Pair {
            queues: [VecDeque::new(), VecDeque::new()],
            bytes: [0, 0],
            shut: [0, 0],
            closed: [false, false],
            error: [0, 0],
            ty,
            tcp: false,
            fin: [false, false],
            reset: [false, false],
            urgent: [None, None],
            moves: 0,
        }));
        let mut a = Socket::new(ty);
        let mut b = Socket::new(ty);
        a.conn = Some((pair.clone(), 0));
        b.conn = Some((pair, 1));
        (a, b)
    }

    /// A connected pair of virtual TCP sockets (without their TCP names).
    /// It behaves as Linux's TCP where that differs from AF_UNIX streams: a
    /// close sends a FIN (a reset if unread data is dropped), so the peer
    /// reads EOF and may still send once; that send is answered by a reset
    /// (POLLERR|POLLHUP, the next send EPIPE).
    pub fn tcp_pair() -> (Socket, Socket) {
        let (a, b) = Socket::pair(SOCK_STREAM);
        if let Some((pair, _)) = &a.conn {
            lock(pair).tcp = true;
        }
        (a, b)
    }

    /// The bytes it may have queued at its peer: its send buffer, or for a
    /// virtual TCP socket whose buffer the program left alone, what Linux
    /// autotunes a loopback connection to ([`TCP_AUTO_SNDBUF`]).
    pub fn send_capacity(&self) -> u32 {
        if self.inet.is_some() && !self.sndbuf_set {
            TCP_AUTO_SNDBUF
        } else {
            self.sndbuf
        }
    }

    /// Whether this is a connection-oriented type (stream or seqpacket).
    pub fn connection(&self) -> bool {
        self.ty != SOCK_DGRAM
    }

    /// A virtual TCP connection that was reset (see [`Pair::reset`]).
    pub fn tcp_reset(&self) -> bool {
        self.conn
            .as_ref()
            .is_some_and(|(pair, side)| lock(pair).reset[*side])
    }

    /// SO_OOBINLINE: urgent data stays in the stream.
    pub fn oob_inline(&self) -> bool {
        const SO_OOBINLINE: i32 = 10;
        self.flags.iter().any(|&(k, v)| k == SO_OOBINLINE && v != 0)
    }

    /// A send with MSG_OOB: as [`Self::send`], its last byte marked urgent
    /// once all of `data` is queued. Virtual TCP only (EOPNOTSUPP elsewhere).
    pub fn send_urgent(&mut self, data: &[u8]) -> Result<usize, Errno> {
        let tcp = self.inet.is_some()
            && self.host_stream().is_none()
            && self.conn.as_ref().is_some_and(|(pair, _)| lock(pair).tcp);
        if !tcp {
            return Err(Errno::EOPNOTSUPP);
        }
        let n = self.send(data, Vec::new())?;
        if n == data.len() && n > 0 {
            if let Some((pair, side)) = &self.conn {
                let mut g = lock(pair);
                if !g.closed[1 - *side] {
                    super::urgent::mark_last(&mut g, 1 - *side);
                }
            }
        }
        Ok(n)
    }

    /// A read (not a peek) starting at a TCP urgent mark whose byte is out of
    /// the stream consumes that byte first, whatever else it finds.
    pub fn pass_urgent_mark(&mut self) {
        if self.inet.is_none() || self.oob_inline() {
            return;
        }
        if let Some((pair, side)) = &self.conn {
            let mut g = lock(pair);
            if g.tcp {
                super::urgent::skip_at_head(&mut g, *side);
            }
        }
    }

    /// `recv(MSG_OOB)`: the urgent byte (see `urgent.rs`); EINVAL if none.
    pub fn recv_urgent(&mut self, peek: bool) -> Result<u8, Errno> {
        let inline = self.oob_inline();
        match &self.conn {
            Some((pair, side)) if self.inet.is_some() => {
                super::urgent::take(&mut lock(pair), *side, inline, peek)
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// SIOCATMARK: whether the next byte read is a TCP connection's urgent
    /// mark (0 on other stream sockets); EOPNOTSUPP on other AF_UNIX
    /// sockets, ENOTTY on UDP and netlink ones, as Linux answers.
    pub fn at_mark(&self) -> Result<bool, Errno> {
        if self.ty != SOCK_STREAM {
            let unix = self.inet.is_none() && !super::netlink::is_netlink(self);
            return Err(if unix {
                Errno::EOPNOTSUPP
            } else {
                Errno::ENOTTY
            });
        }
        Ok(match &self.conn {
            Some((pair, side)) if self.inet.is_some() => super::urgent::at_mark(&lock(pair), *side),
            _ => false,
        })
    }

    /// Whether the socket is connected (a peer exists, even if closed since).
    pub fn connected(&self) -> bool {
        self.conn.is_some() || self.host_stream().is_some() || self.dest().is_some()
    }

    /// A datagram socket's receive queue for what is sent to its name.
    fn inbox(&self) -> Option<&InboxRef> {
        self.unix.as_ref().and_then(|n| n.inbox.as_ref())
    }

    /// A datagram socket's default destination (set by connect to a name).
    fn dest(&self) -> Option<&InboxRef> {
        self.unix.as_ref().and_then(|n| n.dest.as_ref())
    }

    /// A copy for a forked process: same state and queued bytes, a new pair
    /// shared only with the copies made through the same `pairs` list.
    /// Descriptors in flight are not copied (they would be shared with the original).
    pub fn fork_copy(&self, copies: &mut ForkCopies) -> Socket {
        let pairs = &mut copies.pairs;
        let conn = self.conn.as_ref().map(|(pair, side)| {
            let key = Arc::as_ptr(pair) as usize;
            let copy = match pairs.iter().find(|(k, _)| *k == key) {
                Some((_, c)) => c.clone(),
                None => {
                    let old = lock(pair);
                    let q = |q: &VecDeque<Msg>| {
                        q.iter()
                            .map(|m| Msg {
                                data: m.data.clone(),
                                off: m.off,
                                fds: Vec::new(),
                                urgent: m.urgent,
                            })
                            .collect::<VecDeque<Msg>>()
                    };
                    let c = Arc::new(Mutex::new(Pair {
                        queues: [q(&old.queues[0]), q(&old.queues[1])],
                        bytes: old.bytes,
                        shut: old.shut,
                        closed: old.closed,
                        error: old.error,
                        ty: old.ty,
                        tcp: old.tcp,
                        fin: old.fin,
                        reset: old.reset,
                        urgent: old.urgent,
                        moves: old.moves,
                    }));
                    pairs.push((key, c.clone()));
                    c
                }
            };
            (copy, *side)
        });
        Socket {
            ty: self.ty,
            conn,
            shut: self.shut,
            sndbuf: self.sndbuf,
            sndbuf_set: self.sndbuf_set,
            rcvbuf: self.rcvbuf,
            rcvtimeo: self.rcvtimeo,
            sndtimeo: self.sndtimeo,
            flags: self.flags.clone(),
            linger: self.linger,
            ino: self.ino,
            inet: self.inet.as_ref().map(|i| Box::new(i.fork_copy())),
            unix: self.unix.as_ref().map(|n| Box::new(n.fork_copy(copies))),
            peer_pid: self.peer_pid,
        }
    }

    /// shutdown(2): `how` is SHUT_RD (0), SHUT_WR (1) or SHUT_RDWR (2).
    pub fn shutdown(&mut self, how: u64) -> Result<(), Errno> {
        let mask = match how {
            0 => RCV_SHUTDOWN,
            1 => SEND_SHUTDOWN,
            2 => RCV_SHUTDOWN | SEND_SHUTDOWN,
            _ => return Err(Errno::EINVAL),
        };
        if let Some(h) = self.host_stream_mut() {
            return h.shutdown(how);
        }
        let Some((pair, side)) = &self.conn else {
            // Linux accepts it and only records it (a named datagram
            // socket then refuses what is sent to it).
            self.shut |= mask;
            if let Some(i) = self.inbox() {
                lock(i).shut_rd |= mask & RCV_SHUTDOWN != 0;
            }
            return Ok(());
        };
        let mut g = lock(pair);
        g.shut[*side] |= mask;
        if self.ty != SOCK_DGRAM {
            // What I stop sending, the peer stops receiving, and the reverse
            // (TCP tells the peer nothing of a SHUT_RD).
            let mut peer = 0;
            if mask & RCV_SHUTDOWN != 0 && !g.tcp {
                peer |= SEND_SHUTDOWN;
            }
            if mask & SEND_SHUTDOWN != 0 {
                peer |= RCV_SHUTDOWN;
                g.fin[1 - *side] = true;
            }
            g.shut[1 - *side] |= peer;
        }
        Ok(())
    }

    /// Bytes the next read could return (stream: all queued; otherwise the next message).
    pub fn available(&self) -> usize {
        if let Some(h) = self.host_stream() {
            return h.available();
        }
        let from_inbox = || {
            self.inbox()
                .and_then(|i| lock(i).queue.front().map(|d| d.data.len()))
                .unwrap_or(0)
        };
        let Some((pair, side)) = &self.conn else {
            return from_inbox();
        };
        let g = lock(pair);
        let q = &g.queues[*side];
        if self.ty == SOCK_DGRAM && q.is_empty() {
            drop(g);
            return from_inbox();
        }
        if self.ty == SOCK_STREAM {
            super::urgent::readable(&g, *side, self.oob_inline())
        } else {
            q.front().map_or(0, |m| m.data.len())
        }
    }

    /// Whether a read would find nothing and wait (or EAGAIN): no data,
    /// no end of file, no error, and not a listener (whose reads fail). A
    /// host socket says no: its reads go to the host, which records what
    /// its wait must watch for.
    pub fn read_would_block(&self) -> bool {
        if self.host_stream().is_some() {
            return false;
        }
        self.listener().is_none()
            && self.available() == 0
            && self.poll() & (POLLIN | POLLERR | POLLHUP) == 0
    }

    /// Takes the pending error (SO_ERROR), 0 if none.
    pub fn take_error(&mut self) -> i32 {
        if let Some(h) = self.host_stream_mut() {
            return h.take_error();
        }
        match &self.conn {
            Some((pair, side)) => std::mem::take(&mut lock(pair).error[*side]),
            None => 0,
        }
    }

    /// Whether EPIPE from a send raises SIGPIPE (stream sockets only, as on Linux).
    pub fn sigpipe(&self) -> bool {
        self.ty == SOCK_STREAM
    }

    /// Changes whenever data moved into or out of this socket's queues
    /// (its connection's, a host stream's drains, a bound datagram socket's
    /// inbox) or a connection came to it (a listener): epoll's EPOLLET reports readiness again after such a move
    /// even if no look saw it drop.
    pub fn edge_token(&self) -> u64 {
        if let Some(h) = self.host_stream() {
            return h.edge_token();
        }
        let pair = self.conn.as_ref().map_or(0, |(p, _)| lock(p).moves);
        let named = self.inbox().map_or(0, |i| lock(i).moves);
        let arrivals = self.listener().map_or(0, |l| lock(l).arrivals);
        pair.wrapping_add(named).wrapping_add(arrivals)
    }

    /// The queue of connections of a listening TCP or AF_UNIX socket.
    fn listener(&self) -> Option<&Arc<Mutex<super::inet::Listener>>> {
        let tcp = self.inet.as_ref().and_then(|i| i.listener.as_ref());
        tcp.or_else(|| self.unix.as_ref().and_then(|n| n.listener.as_ref()))
    }

    /// poll(2) bits now.
    pub fn poll(&self) -> i16 {
        if let Some(l) = self.listener() {
            return if lock(l).pending.is_empty() {
                0
            } else {
                POLLIN | POLLRDNORM
            };
        }
        if let Some(h) = self.host_stream() {
            return h.poll();
        }
        let shut_bits = |shut: u8| {
            let mut r = 0;
            if shut & RCV_SHUTDOWN != 0 {
                r |= POLLIN | POLLRDNORM | POLLRDHUP;
            }
            if shut == RCV_SHUTDOWN | SEND_SHUTDOWN {
                r |= POLLHUP;
            }
            r
        };
        // What is sent to a bound datagram socket's name.
        let named_in = match self.inbox() {
            Some(i) if !lock(i).queue.is_empty() => POLLIN | POLLRDNORM,
            _ => 0,
        };
        let Some((pair, side)) = &self.conn else {
            // Unconnected: a stream/seqpacket socket is "closed" (POLLHUP); a
            // datagram one can send (to an address) unless its destination's
            // queue is full, and reads what comes to its name.
            let hup = if self.connection() { POLLHUP } else { 0 };
            let out = match self.dest() {
                Some(d) if lock(d).full() => 0,
                _ => POLLOUT | POLLWRNORM,
            };
            return out | hup | named_in | shut_bits(self.shut);
        };
        let g = lock(pair);
        let s = *side;
        let mut r = shut_bits(g.shut[s]) | named_in;
        let readable = match self.ty {
            // An urgent byte out of the stream is not something to read.
            SOCK_STREAM => super::urgent::readable(&g, s, self.oob_inline()) > 0,
            _ => !g.queues[s].is_empty(),
        };
        if readable {
            r |= POLLIN | POLLRDNORM;
        }
        if super::urgent::pending(&g, s) {
            r |= POLLPRI;
        }
        if g.error[s] != 0 {
            r |= POLLERR;
        }
        // Linux: writable while at most a quarter of the send buffer is in flight.
        let writable = g.bytes[1 - s].saturating_mul(4) <= self.send_capacity() as usize
            || g.closed[1 - s]
            || g.shut[s] & SEND_SHUTDOWN != 0;
        if writable {
            r |= POLLOUT | POLLWRNORM;
        }
        r
    }

    /// Sends `data` (and `fds`) to the peer. Stream sockets may take part of
    /// it (the count is returned); others take the whole message or nothing.
    /// EAGAIN when there is no room; EPIPE when the peer is gone or shut
    /// down (the caller raises SIGPIPE).
    pub fn send(&mut self, data: &[u8], fds: Vec<FileRef>) -> Result<usize, Errno> {
        if let Some(h) = self.host_stream_mut() {
            // TCP carries no descriptors.
            return if fds.is_empty() {
                h.send(data)
            } else {
                Err(Errno::EINVAL)
            };
        }
        if let Some(to) = self.dest().cloned() {
            return self.send_to(&to, data, fds);
        }
        let Some((pair, side)) = &self.conn else {
            if self.shut & SEND_SHUTDOWN != 0 && !self.connection() {
                return Err(Errno::EPIPE);
            }
            // TCP that never connected (or listens) is EPIPE, with SIGPIPE,
            // where AF_UNIX says ENOTCONN.
            if self.inet.is_some() && self.ty == SOCK_STREAM {
                return Err(Errno::EPIPE);
            }
            return Err(Errno::ENOTCONN);
        };
        let (s, peer) = (*side, 1 - *side);
        let mut g = lock(pair);
        if g.tcp {
            let cap = self.send_capacity() as usize;
            return tcp_send(&mut g, s, data, fds, cap);
        }
        if self.ty == SOCK_SEQPACKET && g.error[s] != 0 {
            // Datagram-style sends report a pending error first.
            return Err(Errno(std::mem::take(&mut g.error[s])));
        }
        if g.shut[s] & SEND_SHUTDOWN != 0 {
            return Err(Errno::EPIPE);
        }
        if g.closed[peer] {
            // Only datagram sockets get here (stream peers set SEND_SHUTDOWN on close).
            drop(g);
            self.conn = None;
            return Err(Errno::ECONNREFUSED);
        }
        if g.shut[peer] & RCV_SHUTDOWN != 0 {
            return Err(Errno::EPIPE);
        }
        let cap = self.sndbuf as usize;
        let used = g.bytes[peer];
        if self.ty == SOCK_STREAM {
            if data.is_empty() && fds.is_empty() {
                return Ok(0);
            }
            let room = cap.saturating_sub(used + MSG_OVERHEAD);
            if room == 0 {
                return Err(Errno::EAGAIN);
            }
            let n = room.min(data.len());
            g.enqueue(peer, &data[..n], fds);
            return Ok(n);
        }
        if data.len() + MSG_OVERHEAD > cap {
            return Err(Errno::EMSGSIZE);
        }
        if used + data.len() + MSG_OVERHEAD > cap {
            return Err(Errno::EAGAIN);
        }
        g.enqueue(peer, data, fds);
        Ok(data.len())
    }

    /// Sends the datagram `data` (and `fds`) to the named socket whose queue
    /// is `to`. A refusal from a closed destination disconnects a socket
    /// connected to it (ENOTCONN next), as Linux does.
    pub fn send_to(
        &mut self,
        to: &InboxRef,
        data: &[u8],
        fds: Vec<FileRef>,
    ) -> Result<usize, Errno> {
        if self.shut & SEND_SHUTDOWN != 0 {
            return Err(Errno::EPIPE);
        }
        let from = self.unix.as_ref().and_then(|n| n.sender_name());
        let r = super::unix_dgram::deliver(to, self.inbox(), from, data, fds);
        if r == Err(Errno::ECONNREFUSED) && self.dest().is_some_and(|d| Arc::ptr_eq(d, to)) {
            if let Some(n) = self.unix.as_mut() {
                n.dest = None;
                n.peer = None;
                if let Some(i) = &n.inbox {
                    lock(i).peer = None;
                }
            }
        }
        r
    }

    /// Receives into `buf`. Returns the bytes copied, the full length of
    /// the message (datagrams: more than copied when truncated) and the
    /// descriptors that came with it. Ok with 0 bytes is end of file;
    /// EAGAIN when nothing is there yet.
    pub fn recv(&mut self, buf: &mut [u8], peek: bool) -> Result<Received, Errno> {
        if let Some(h) = self.host_stream_mut() {
            let n = h.recv(buf, peek)?;
            return Ok(Received {
                copied: n,
                full: n,
                ..Received::default()
            });
        }
        let inbox = self.inbox().cloned();
        let named = |buf: &mut [u8]| {
            inbox
                .as_ref()
                .and_then(|i| super::unix_dgram::take(i, buf, peek))
        };
        let Some((pair, side)) = &self.conn else {
            if let Some(got) = named(buf) {
                return Ok(got);
            }
            if self.ty == SOCK_DGRAM && self.shut & RCV_SHUTDOWN != 0 {
                return Ok(Received::default());
            }
            return Err(match self.ty {
                SOCK_STREAM => Errno::EINVAL,
                SOCK_SEQPACKET => Errno::ENOTCONN,
                _ => Errno::EAGAIN,
            });
        };
        let s = *side;
        let inline = self.oob_inline();
        let mut g = lock(pair);
        if g.tcp && !peek && !inline {
            // An urgent byte where the read starts is out of the stream.
            super::urgent::skip_at_head(&mut g, s);
        }
        if g.queues[s].is_empty() && self.ty == SOCK_DGRAM {
            if let Some(got) = named(buf) {
                return Ok(got);
            }
        }
        if g.queues[s].is_empty() {
            if g.tcp && g.fin[s] {
                // After the peer's FIN, Linux reads EOF even with an error pending.
                return Ok(Received::default());
            }
            if g.error[s] != 0 {
                return Err(Errno(std::mem::take(&mut g.error[s])));
            }
            return if g.shut[s] & RCV_SHUTDOWN != 0 {
                Ok(Received::default())
            } else {
                Err(Errno::EAGAIN)
            };
        }
        let mut out = Received::default();
        if self.ty != SOCK_STREAM {
            let Some(m) = g.queues[s].front() else {
                return Err(Errno::EAGAIN);
            };
            let n = m.data.len().min(buf.len());
            buf[..n].copy_from_slice(&m.data[..n]);
            out.copied = n;
            out.full = m.data.len();
            if peek {
                out.fds = m.fds.clone();
            } else if let Some(m) = g.queues[s].pop_front() {
                g.bytes[s] = g.bytes[s].saturating_sub(m.data.len() + MSG_OVERHEAD);
                g.moves += 1;
                out.fds = m.fds;
            }
            return Ok(out);
        }
        // Stream: join messages, but never across descriptors (they belong
        // to the read that reaches their message first).
        let mut done = 0usize;
        let mut i = 0usize;
        while done < buf.len() {
            let Some(m) = g.queues[s].get_mut(i) else {
                break;
            };
            if !m.fds.is_empty() && done > 0 {
                break;
            }
            let has_fds = !m.fds.is_empty();
            // A read stops at the urgent mark: before its byte, or (read
            // inline) at it only when nothing came before.
            let mark = super::urgent::mark_of(m);
            let (mut start, mut end) = (m.off, m.data.len());
            if let Some(k) = mark {
                if k > start {
                    end = k;
                } else if done > 0 {
                    break;
                } else if !inline {
                    start = k + 1; // a peek past the out-of-band byte
                }
            }
            let avail = &m.data[start..end];
            let n = avail.len().min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&avail[..n]);
            done += n;
            let stopped = end < m.data.len() && start + n == end;
            if peek {
                if has_fds {
                    out.fds = m.fds.clone();
                    break;
                }
                if stopped {
                    break;
                }
                i += 1;
                continue;
            }
            out.fds.append(&mut m.fds);
            m.off = start + n;
            let past_mark = mark.is_some_and(|k| m.off > k);
            if past_mark {
                m.urgent = false;
            }
            g.pop_if_read(s);
            if past_mark {
                super::urgent::passed(&mut g, s);
            }
            if has_fds || stopped {
                break;
            }
        }
        if done > 0 && !peek {
            g.moves += 1;
        }
        out.copied = done;
        out.full = done;
        Ok(out)
    }
}

/// A send on side `s` of a virtual TCP connection (the pair locked as `g`),
/// as Linux's TCP: a pending error first (ECONNRESET after a reset, EPIPE
/// once the reset answered a send after the peer's close), then EPIPE when
/// shut down for sending. A send to a peer that closed is taken (and
/// dropped) and brings the reset back; a peer's SHUT_RD stops nothing.
fn tcp_send(
    g: &mut Pair,
    s: usize,
    data: &[u8],
    fds: Vec<FileRef>,
    cap: usize,
) -> Result<usize, Errno> {
    let peer = 1 - s;
    if g.error[s] != 0 {
        return Err(Errno(std::mem::take(&mut g.error[s])));
    }
    if g.shut[s] & SEND_SHUTDOWN != 0 {
        return Err(Errno::EPIPE);
    }
    if !fds.is_empty() {
        return Err(Errno::EINVAL);
    }
    if data.is_empty() {
        return Ok(0);
    }
    if g.closed[peer] {
        g.shut[s] = RCV_SHUTDOWN | SEND_SHUTDOWN;
        g.error[s] = EPIPE;
        g.reset[s] = true;
        return Ok(data.len().min(cap));
    }
    let room = cap.saturating_sub(g.bytes[peer] + MSG_OVERHEAD);
    if room == 0 {
        return Err(Errno::EAGAIN);
    }
    let n = room.min(data.len());
    g.enqueue(peer, &data[..n], fds);
    Ok(n)
}

/// What one receive returned.
#[derive(Default)]
pub struct Received {
    /// Bytes copied into the caller's buffer.
    pub copied: usize,
    /// Length of the message (datagrams; equal to `copied` for streams).
    pub full: usize,
    /// Descriptions passed with the message.
    pub fds: Vec<FileRef>,
    /// The sender's name (a datagram from a bound socket).
    pub from: Option<Vec<u8>>,
}

impl Drop for Socket {
    fn drop(&mut self) {
        if let Some(i) = self.inbox() {
            super::unix_dgram::close(i);
        }
        let Some((pair, side)) = self.conn.take() else {
            return;
        };
        let dropped;
        {
            let mut g = lock(&pair);
            g.closed[side] = true;
            g.shut[side] = RCV_SHUTDOWN | SEND_SHUTDOWN;
            // What was never read goes away with the socket; it is dropped
            // after the lock is released, since it may hold descriptions of
            // this very pair.
            dropped = std::mem::take(&mut g.queues[side]);
            let other = 1 - side;
            let abort = self.linger == (true, 0);
            if g.tcp && dropped.is_empty() && !abort {
                // A FIN: the peer reads EOF, and may still send.
                g.shut[other] |= RCV_SHUTDOWN;
                g.fin[other] = true;
            } else if g.ty != SOCK_DGRAM {
                g.shut[other] = RCV_SHUTDOWN | SEND_SHUTDOWN;
                if !dropped.is_empty() || (g.tcp && abort) {
                    g.error[other] = ECONNRESET;
                    g.reset[other] = g.tcp;
                }
            }
            g.bytes[side] = 0;
        }
        drop(dropped);
    }
}

#[cfg(test)]
mod tests;
