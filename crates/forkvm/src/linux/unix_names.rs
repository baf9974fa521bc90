//! Named AF_UNIX sockets inside one VM: bind, listen, connect and accept
//! (see [`super::unix_socket`] for the connected pairs they make).
//!
//! A name is what follows `sun_family` in the address: an abstract name
//! (a leading NUL) or a path. Binding a path creates a socket file there
//! (mode 0777 less the umask, EADDRINUSE if the name exists), as Linux
//! does, and a connect to a path looks the file up and finds the socket
//! bound to that very file: unlinking it, or binding another socket after
//! that, behaves as on Linux. Abstract names are compared as bytes. A
//! connect finds its listener among the process's own sockets and those the
//! run's other processes bound (see `child::Tree::publish_socket`), so a
//! server started after a fork, or not inherited across an exec, is
//! reachable, as in one network namespace; nothing reaches the host's
//! sockets. A connect to a name nothing listens on is ECONNREFUSED (ENOENT
//! for a path with no file). A bound datagram socket receives what is sent
//! to its name, and a datagram connect names the default destination
//! ([`super::unix_dgram`]).

use super::fdtable::{lock, FileKind};
use super::inet::{install_accepted, Listener};
use super::net::with_socket;
use super::unix_dgram::{ForkCopies, Inbox, InboxRef};
use super::unix_socket::{Socket, RCV_SHUTDOWN, SOCK_DGRAM};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// `AF_UNIX`.
const AF_UNIX: u16 = 1;
/// Size of `struct sockaddr_un`.
const SOCKADDR_UN_SIZE: usize = 110;
/// `AF_UNSPEC` (a datagram connect to it disconnects).
const AF_UNSPEC: u16 = 0;
const EADDRINUSE: Errno = Errno(98);
const EPROTOTYPE: Errno = Errno(91);

/// The AF_UNIX names of a socket.
#[derive(Default)]
pub struct Named {
    /// Its name (an accepted socket: its listener's).
    pub local: Option<Vec<u8>>,
    /// Bound to `local` by bind(2) (an accepted socket only carries it).
    pub bound: bool,
    /// The socket file a path bind made: host device and inode.
    pub file: Option<(u64, u64)>,
    /// The name of the listener it connected to.
    pub peer: Option<Vec<u8>>,
    /// Set by listen(2): connections not yet accepted.
    pub listener: Option<Arc<Mutex<Listener>>>,
    /// A bound datagram socket's receive queue ([`super::unix_dgram`]).
    pub inbox: Option<InboxRef>,
    /// A datagram socket's default destination, set by connect(2).
    pub dest: Option<InboxRef>,
}

impl Named {
    /// A copy for a forked process: a listening socket keeps listening,
    /// with no pending connection (they belong to the original).
    /// Datagram queues are copied once through `copies`, so that sockets
    /// of the copy reach each other as the originals did.
    pub fn fork_copy(&self, copies: &mut ForkCopies) -> Named {
        Named {
            local: self.local.clone(),
            bound: self.bound,
            file: self.file,
            peer: self.peer.clone(),
            listener: self.listener.as_ref().map(Listener::fork_copy),
            inbox: self.inbox.as_ref().map(|i| copies.inbox(i)),
            dest: self.dest.as_ref().map(|i| copies.inbox(i)),
        }
    }

    /// The name datagrams from this socket carry: its own, if bound.
    pub fn sender_name(&self) -> Option<Vec<u8>> {
        self.local.clone().filter(|_| self.bound)
    }
}

/// The name in the address at `addr` (`len` bytes): EINVAL unless AF_UNIX
/// and of a plausible length; `None` for an empty name (autobind). A path
/// ends at its first NUL, an abstract name takes every byte given.
fn read_name(mem: &GuestMemory, addr: u64, len: u64) -> Result<Option<Vec<u8>>, Errno> {
    let len = usize::try_from(len as u32).map_err(|_| Errno::EINVAL)?;
    if !(2..=SOCKADDR_UN_SIZE).contains(&len) {
        return Err(Errno::EINVAL);
    }
    let b = mem.read(addr, len as u64)?;
    if u16::from_le_bytes([b[0], b[1]]) != AF_UNIX {
        return Err(Errno::EINVAL);
    }
    let path = &b[2..];
    Ok(match path.first() {
        None => None,
        Some(0) => Some(path.to_vec()),
        Some(_) => {
            let end = path.iter().position(|&c| c == 0).unwrap_or(path.len());
            Some(path[..end].to_vec())
        }
    })
}

/// Writes `name` as a `struct sockaddr_un` to `addr`, its length to
/// `len_ptr` (truncated to the room the caller gave, as Linux does).
pub fn write_name(
    mem: &mut GuestMemory,
    addr: u64,
    len_ptr: u64,
    name: Option<&[u8]>,
) -> Result<(), Errno> {
    let room = mem.read_u32(len_ptr)? as i32;
    if room < 0 {
        return Err(Errno::EINVAL);
    }
    let mut full = AF_UNIX.to_le_bytes().to_vec();
    if let Some(n) = name {
        full.extend_from_slice(n);
        if n.first() != Some(&0) {
            full.push(0); // a path is NUL-terminated, and counted so
        }
    }
    let n = (room as usize).min(full.len());
    if n > 0 {
        mem.write(addr, &full[..n])?;
    }
    mem.write_u32(len_ptr, full.len() as u32)?;
    Ok(())
}

/// A listener found by name, and its socket type.
type Found = (Arc<Mutex<Listener>>, u32);

/// What a name refers to: the bytes of an abstract name, or the socket
/// file of a path.
#[derive(PartialEq)]
enum Key<'a> {
    Abstract(&'a [u8]),
    File((u64, u64)),
}

impl Named {
    fn is(&self, key: &Key) -> bool {
        self.bound
            && match key {
                Key::Abstract(name) => self.file.is_none() && self.local.as_deref() == Some(*name),
                Key::File(id) => self.file == Some(*id),
            }
    }
}

/// The type of the socket of the process or its run bound to `key`, if
/// one is; the listener (and its type) if one listens there.
fn lookup(p: &Process, key: &Key) -> (Option<u32>, Option<Found>) {
    let mut bound = None;
    for f in super::net::named_sockets(p) {
        let of = lock(&f);
        let FileKind::Socket(s) = &of.kind else {
            continue;
        };
        let Some(n) = &s.unix else { continue };
        if !n.is(key) {
            continue;
        }
        bound = Some(s.ty);
        if let Some(l) = &n.listener {
            return (bound, Some((l.clone(), s.ty)));
        }
    }
    (bound, None)
}

/// What `name` refers to: ENOENT for a path with no file, ECONNREFUSED for
/// a file of another kind.
fn key_of<'a>(p: &Process, name: &'a [u8]) -> Result<Key<'a>, Errno> {
    Ok(if name.first() == Some(&0) {
        Key::Abstract(name)
    } else {
        Key::File(super::fs::socket_file(p, name)?)
    })
}

/// The receive queue of the datagram socket bound to the name at `addr`
/// (`len` bytes), and that name: ENOENT for a path with no file,
/// EPROTOTYPE for a path a socket of another type is bound to (an abstract
/// name is looked up by type: ECONNREFUSED), ECONNREFUSED when no socket
/// is bound there.
pub(super) fn dgram_target(
    p: &Process,
    mem: &GuestMemory,
    addr: u64,
    len: u64,
) -> Result<(InboxRef, Vec<u8>), Errno> {
    let Some(name) = read_name(mem, addr, len)? else {
        return Err(Errno::EINVAL);
    };
    let key = key_of(p, &name)?;
    for f in super::net::named_sockets(p) {
        let of = lock(&f);
        let FileKind::Socket(s) = &of.kind else {
            continue;
        };
        let Some(n) = s.unix.as_ref().filter(|n| n.is(&key)) else {
            continue;
        };
        if s.ty != SOCK_DGRAM {
            if matches!(key, Key::File(_)) {
                return Err(EPROTOTYPE);
            }
            continue;
        }
        if let Some(inbox) = &n.inbox {
            let inbox = inbox.clone();
            drop(of);
            return Ok((inbox, name));
        }
    }
    Err(Errno::ECONNREFUSED)
}

/// connect(2) of a datagram socket: the name's socket becomes the default
/// destination and the only sender this one takes from; AF_UNSPEC
/// disconnects.
fn connect_dgram(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let len = a[2] as u32 as u64;
    let family = |mem: &GuestMemory| -> Result<u16, Errno> {
        let b = mem.read(a[1], 2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    };
    if len >= 2 && family(mem)? == AF_UNSPEC {
        return with_socket(p, a[0], |s, _| {
            if let Some(n) = s.unix.as_mut() {
                n.dest = None;
                n.peer = None;
                if let Some(i) = &n.inbox {
                    lock(i).peer = None;
                }
            }
            Ok(0)
        });
    }
    let (to, name) = dgram_target(p, mem, a[1], a[2])?;
    let mine = with_socket(p, a[0], |s, _| {
        Ok(s.unix.as_ref().and_then(|n| n.inbox.clone()))
    })?;
    super::unix_dgram::may_send(&to, mine.as_ref())?;
    with_socket(p, a[0], |s, _| {
        let n = s.unix.get_or_insert_with(Default::default);
        if let Some(i) = &n.inbox {
            lock(i).peer = Some(Arc::downgrade(&to));
        }
        n.dest = Some(to);
        n.peer = Some(name);
        Ok(0)
    })
}

/// A fresh abstract name for autobind (Linux: five hex digits).
fn autobind_name() -> Vec<u8> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) & 0xf_ffff;
    let mut v = vec![0u8];
    v.extend_from_slice(format!("{n:05x}").as_bytes());
    v
}

/// bind(2) on an AF_UNIX socket.
pub(super) fn bind(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    with_socket(p, a[0], |_, _| Ok(()))?;
    let name = read_name(mem, a[1], a[2])?.unwrap_or_else(autobind_name);
    if with_socket(p, a[0], |s, _| {
        Ok(s.unix.as_ref().is_some_and(|n| n.local.is_some()))
    })? {
        return Err(Errno::EINVAL);
    }
    let file = if name.first() == Some(&0) {
        if lookup(p, &Key::Abstract(&name)).0.is_some() {
            return Err(EADDRINUSE);
        }
        None
    } else {
        Some(super::fs::make_socket_file(p, &name)?)
    };
    with_socket(p, a[0], |s, _| {
        let dgram = s.ty == SOCK_DGRAM;
        let shut_rd = s.shut & RCV_SHUTDOWN != 0;
        let n = s.unix.get_or_insert_with(Default::default);
        n.local = Some(name);
        n.bound = true;
        n.file = file;
        if dgram {
            // Reachable by name from now on.
            n.inbox = Some(Arc::new(Mutex::new(Inbox {
                shut_rd,
                peer: n.dest.as_ref().map(Arc::downgrade),
                ..Default::default()
            })));
        }
        Ok(0)
    })
}

/// listen(2) on an AF_UNIX socket: it must be a bound stream or seqpacket socket.
pub(super) fn listen(p: &mut Process, a: &Args) -> SysResult {
    let pid = super::child::pid_of(p);
    with_socket(p, a[0], |s, _| {
        if s.ty == SOCK_DGRAM {
            return Err(Errno::EOPNOTSUPP);
        }
        if s.connected() {
            return Err(Errno::EINVAL);
        }
        let Some(n) = s.unix.as_mut().filter(|n| n.bound) else {
            return Err(Errno::EINVAL);
        };
        Listener::listen(&mut n.listener, a[1] as i64, pid);
        Ok(0)
    })
}

/// Whether `fd` is a listening AF_UNIX socket.
pub(super) fn is_listening(p: &Process, fd: u64) -> bool {
    with_socket(p, fd, |s, _| {
        Ok(s.unix.as_ref().is_some_and(|n| n.listener.is_some()))
    })
    .unwrap_or(false)
}

/// connect(2) of an AF_UNIX stream or seqpacket socket to a listener of
/// this process: a connected pair, whose other end waits to be accepted.
pub(super) fn connect(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let (ty, connected, listening) = with_socket(p, a[0], |s, _| {
        let listening = s.unix.as_ref().is_some_and(|n| n.listener.is_some());
        Ok((s.ty, s.connected(), listening))
    })?;
    if ty == SOCK_DGRAM {
        return connect_dgram(p, mem, a);
    }
    let Some(name) = read_name(mem, a[1], a[2])? else {
        return Err(Errno::EINVAL);
    };
    if connected || listening {
        return Err(Errno::EISCONN);
    }
    let key = key_of(p, &name)?;
    let (bound_ty, found) = lookup(p, &key);
    if matches!(key, Key::File(_)) && bound_ty.is_some_and(|b| b != ty) {
        // A path a socket of another type is bound to, as Linux answers.
        return Err(EPROTOTYPE);
    }
    let Some((listener, listener_ty)) = found else {
        return Err(Errno::ECONNREFUSED);
    };
    if listener_ty != ty {
        // Linux looks an abstract name up by type: a listener of another
        // type is none.
        return Err(Errno::ECONNREFUSED);
    }
    {
        let l = lock(&listener);
        // Linux queues one more than the backlog.
        if l.pending.len() > l.backlog as usize {
            drop(l);
            // A full queue: EAGAIN, or wait for accept to make room.
            let nonblocking = with_socket(p, a[0], |_, nb| Ok(nb))?;
            return install_accepted(p, None, nonblocking, 0).map(|_| 0);
        }
    }
    let (mut mine, mut theirs) = Socket::pair(ty);
    theirs.peer_pid = super::child::pid_of(p);
    let listener_pid = lock(&listener).pid;
    // The connecting socket takes over `mine`'s side (dropping a socket that
    // still holds it would close it).
    let side = mine.conn.take();
    theirs.unix = Some(Box::new(Named {
        local: Some(name.clone()),
        ..Default::default()
    }));
    with_socket(p, a[0], |s, _| {
        s.conn = side;
        s.peer_pid = listener_pid;
        s.unix.get_or_insert_with(Default::default).peer = Some(name);
        Ok(())
    })?;
    let mut queue = lock(&listener);
    queue.pending.push_back(theirs);
    queue.arrivals += 1;
    Ok(0)
}

/// accept(2)/accept4(2) on a listening AF_UNIX socket (flags checked by the
/// caller): the next connection, or a wait.
pub(super) fn accept(p: &mut Process, mem: &mut GuestMemory, a: &Args, flags: u64) -> SysResult {
    let (addr, len_ptr) = (a[1], a[2]);
    if addr != 0 && (mem.read_u32(len_ptr)? as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let (conn, nonblocking) = with_socket(p, a[0], |s, nb| {
        let l = s
            .unix
            .as_ref()
            .and_then(|n| n.listener.as_ref())
            .ok_or(Errno::EINVAL)?;
        Ok((lock(l).pending.pop_front(), nb))
    })?;
    let Some(fd) = install_accepted(p, conn, nonblocking, flags)? else {
        return Ok(0);
    };
    if addr != 0 {
        // The connecting socket was not bound: an unnamed address.
        if let Err(e) = write_name(mem, addr, len_ptr, None) {
            let _ = p.fds.close(fd);
            return Err(e);
        }
    }
    Ok(fd as u64)
}
