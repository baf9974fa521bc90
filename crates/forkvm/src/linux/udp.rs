//! UDP inside the run (AF_INET and AF_INET6 datagram sockets). The guest
//! has no network, but programs make UDP sockets for local things: a
//! metrics client sending to a statsd agent on localhost, a test that talks
//! to its own UDP server, a resolver asking a local name server, the
//! "connect a UDP socket and read its address" idiom. Refusing `socket()`
//! (EACCES, as forkvm did) stopped them at start-up.
//!
//! A UDP socket is a datagram socket whose names are internet addresses:
//! its [`Inet`] part holds the bound and connected addresses (so bind,
//! getsockname, getpeername and the IP-level options are virtual TCP's,
//! with its own port space), and a bound one gets a receive queue
//! ([`super::unix_dgram::Inbox`]) that the run's UDP sockets reach by port,
//! as AF_UNIX datagram sockets are reached by name. As on Linux:
//! - a send on an unbound socket binds it to an ephemeral port first (so
//!   the receiver can answer), and so does connect;
//! - a datagram to a local address (loopback, the unspecified address or an
//!   address one of the run's sockets bound) on which nothing listens is
//!   dropped, and a connected socket learns it: its send is ECONNREFUSED
//!   (Linux reports the ICMP error on the next call; here it is this one);
//! - a full receive queue drops datagrams (UDP never makes a sender wait);
//! - a connected socket receives only from its peer;
//! - a datagram keeps its boundaries; a read shorter than it loses the rest
//!   (MSG_TRUNC tells).
//!
//! Any other destination is unreachable (ENETUNREACH), at once, so a
//! resolver asking a name server out there fails fast instead of waiting
//! for answers that cannot come. No UDP traffic ever leaves the VM.

use super::fdtable::{lock, FileKind, FileRef};
use super::inet::{self, Inet, AF_INET, AF_INET6};
use super::unix_dgram::{Datagram, Inbox, InboxRef};
use super::unix_names::Named;
use super::unix_socket::{Socket, SOCK_DGRAM};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

/// `IPPROTO_UDP`.
pub const IPPROTO_UDP: u64 = 17;
/// Datagrams a receive queue holds before more are dropped (Linux's limit
/// is the receive buffer, ~200 KiB: a few hundred small datagrams).
const UDP_QLEN: usize = 256;
/// Bytes a receive queue holds before more are dropped (Linux's default
/// receive buffer), so the host memory a guest's sockets hold stays bounded.
const UDP_QBYTES: usize = 212_992;
/// Largest UDP payload (IPv4: 65,535 less the IP and UDP headers).
const MAX_PAYLOAD: u64 = 65_507;
const ENETUNREACH: Errno = Errno(101);
const EDESTADDRREQ: Errno = Errno(89);
/// `AF_UNSPEC` (a connect to it disconnects).
const AF_UNSPEC: u16 = 0;
/// First byte of the internal name of a bound UDP socket: never the first
/// byte of an AF_UNIX name that can be looked up (abstract names begin with
/// NUL, and a path is looked up by its file, not its bytes).
const NAME_TAG: [u8; 4] = [0xff, b'u', b'd', b'p'];

/// Whether `s` is a UDP socket.
pub(super) fn is_udp_socket(s: &Socket) -> bool {
    s.ty == SOCK_DGRAM && s.inet.is_some()
}

/// The family of the UDP socket behind `fd`, if it is one.
pub(super) fn family(p: &Process, fd: u64) -> Option<u16> {
    let file = p.fds.get(fd as i32).ok()?;
    let of = lock(&file);
    match &of.kind {
        FileKind::Socket(s) if is_udp_socket(s) => s.inet.as_ref().map(|i| i.family),
        _ => None,
    }
}

/// A new UDP socket of `family`.
pub(super) fn new_socket(family: u16) -> Socket {
    let mut s = Socket::new(SOCK_DGRAM);
    s.inet = Some(Box::new(Inet::new(family)));
    s
}

/// The internal name of the UDP socket bound to `port` by a socket of
/// `family`: what its datagrams carry as their sender.
fn name(port: u16, family: u16) -> Vec<u8> {
    let mut n = NAME_TAG.to_vec();
    n.extend_from_slice(&port.to_be_bytes());
    n.push(if family == AF_INET6 { 6 } else { 4 });
    n
}

/// The port and family in an internal name.
fn parse_name(n: &[u8]) -> Option<(u16, u16)> {
    if n.len() != NAME_TAG.len() + 3 || n[..4] != NAME_TAG {
        return None;
    }
    let fam = if n[6] == 6 { AF_INET6 } else { AF_INET };
    Some((u16::from_be_bytes([n[4], n[5]]), fam))
}

/// After bind(2) gave `s` its address: its receive queue and name, so the
/// run's UDP sockets reach it.
pub(super) fn on_bind(s: &mut Socket) {
    let Some(i) = &s.inet else { return };
    let Some(local) = i.local else { return };
    let n = name(local.port(), i.family);
    let named = s.unix.get_or_insert_with(|| Box::new(Named::default()));
    named.local = Some(n);
    named.bound = true;
    if named.inbox.is_none() {
        named.inbox = Some(Arc::new(Mutex::new(Inbox::default())));
    }
}

/// Binds the UDP socket `fd` to an ephemeral port if it has no address yet.
fn autobind(p: &mut Process, fd: u64) -> Result<(), Errno> {
    let unbound = super::net::with_socket(p, fd, |s, _| {
        Ok(s.inet.as_ref().is_some_and(|i| i.local.is_none()))
    })?;
    if unbound {
        inet::bind_any(p, fd)?;
        // Reachable from the run's other processes, as a bound one is.
        super::net::publish(p, fd);
    }
    Ok(())
}

/// Whether `ip` is an address of this (virtual) host: loopback, the
/// unspecified address (which means this host as a destination), or one a
/// socket of the run bound.
fn is_local(p: &Process, ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    if ip.is_loopback() || ip.is_unspecified() {
        return true;
    }
    super::net::named_sockets(p).iter().any(|f| {
        matches!(&lock(f).kind, FileKind::Socket(s)
            if s.inet.as_ref().and_then(|i| i.local).is_some_and(|l| l.ip().to_canonical() == ip))
    })
}

/// connect(2) of a UDP socket: its default destination and the only
/// address it receives from; AF_UNSPEC disconnects. Nothing is sent, so
/// any address is accepted (the "which address would I use" idiom).
pub(super) fn connect(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let len = a[2] as u32 as u64;
    if len >= 2 {
        let b = mem.read(a[1], 2)?;
        if u16::from_le_bytes([b[0], b[1]]) == AF_UNSPEC {
            return super::net::with_socket(p, a[0], |s, _| {
                if let Some(i) = s.inet.as_mut() {
                    i.peer = None;
                    if std::mem::take(&mut i.source_by_connect) {
                        if let Some(l) = i.local.as_mut() {
                            l.set_ip(unspecified(i.family));
                        }
                    }
                }
                Ok(0)
            });
        }
    }
    let family = family(p, a[0]).ok_or(Errno::ENOTSOCK)?;
    let mut to = inet::read_addr(mem, a[1], a[2], family)?;
    if to.ip().is_unspecified() {
        to.set_ip(loopback(family));
    }
    autobind(p, a[0])?;
    // Beyond this host the route would leave through an interface the VM
    // does not have: its loopback address is the only one it has.
    let via = if is_local(p, to.ip()) {
        to.ip()
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    super::net::with_socket(p, a[0], |s, _| {
        if let Some(i) = s.inet.as_mut() {
            i.peer = Some(to);
            // The route to the peer picks the source address, as Linux
            // does for a socket bound to the unspecified one: getsockname
            // then names it (Go's Dial shows it as the local address).
            if let Some(l) = i.local.as_mut().filter(|l| l.ip().is_unspecified()) {
                l.set_ip(source_for(i.family, via));
                i.source_by_connect = true;
            }
        }
        Ok(0)
    })
}

/// The source address of a datagram to `dest`, an address of this host,
/// from a socket of `family`: `dest` itself (a loopback address, or one a
/// socket bound), loopback for the unspecified one; an IPv4 one as
/// v4-mapped on an IPv6 socket.
fn source_for(family: u16, dest: IpAddr) -> IpAddr {
    let v4 = match dest.to_canonical() {
        IpAddr::V4(v4) if v4.is_unspecified() => Ipv4Addr::LOCALHOST,
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) if v6.is_unspecified() => return loopback(family),
        IpAddr::V6(v6) => return IpAddr::V6(v6),
    };
    if family == AF_INET6 {
        IpAddr::V6(v4.to_ipv6_mapped())
    } else {
        IpAddr::V4(v4)
    }
}

fn unspecified(family: u16) -> IpAddr {
    if family == AF_INET6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

fn loopback(family: u16) -> IpAddr {
    if family == AF_INET6 {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    }
}

/// Where a send on the UDP socket `fd` goes: the receive queue of the run's
/// socket bound to the destination (the address `to` gives, or the one it
/// is connected to), or None when the datagram is dropped; with the name it
/// goes out under. Binds the socket first if it has no address.
pub(super) fn target(
    p: &mut Process,
    mem: &GuestMemory,
    fd: u64,
    to: Option<(u64, u64)>,
    len: u64,
) -> Result<(Option<InboxRef>, Vec<u8>), Errno> {
    let (family, peer) = super::net::with_socket(p, fd, |s, _| {
        let i = s.inet.as_ref().ok_or(Errno::ENOTSOCK)?;
        Ok((i.family, i.peer))
    })?;
    let dest = match to {
        Some((addr, alen)) => inet::read_addr(mem, addr, alen, family)?,
        None => peer.ok_or(EDESTADDRREQ)?,
    };
    if len > MAX_PAYLOAD {
        return Err(Errno::EMSGSIZE);
    }
    if dest.port() == 0 {
        return Err(Errno::EINVAL);
    }
    if !is_local(p, dest.ip()) {
        return Err(ENETUNREACH);
    }
    autobind(p, fd)?;
    let mine = super::net::with_socket(p, fd, |s, _| {
        s.inet.as_ref().and_then(|i| i.local).ok_or(Errno::EINVAL)
    })?;
    let found = receiver(p, dest, mine);
    if found.is_none() && to.is_none() {
        // A connected socket hears of the port unreachable.
        return Err(Errno::ECONNREFUSED);
    }
    Ok((found, name(mine.port(), family)))
}

/// The receive queue of the run's UDP socket that a datagram from `from`
/// to `dest` reaches, if any.
/// The sender's own socket is among them (sending to itself): no lock is
/// held here.
fn receiver(p: &Process, dest: SocketAddr, from: SocketAddr) -> Option<InboxRef> {
    for f in super::net::named_sockets(p) {
        let of = lock(&f);
        let FileKind::Socket(s) = &of.kind else {
            continue;
        };
        if !is_udp_socket(s) {
            continue;
        }
        let Some(i) = &s.inet else { continue };
        let Some(local) = i.local else { continue };
        if local.port() != dest.port() || !inet::overlap(local, i.v6only(), dest, false) {
            continue;
        }
        // A connected socket takes only what its peer sends.
        if let Some(peer) = i.peer {
            if peer.port() != from.port() {
                continue;
            }
        }
        if let Some(inbox) = s.unix.as_ref().and_then(|n| n.inbox.clone()) {
            return Some(inbox);
        }
    }
    None
}

/// Queues a datagram on `to` (None: no socket is there, and it is lost):
/// dropped too when the queue is full or its socket is gone or shut down
/// for reading, as a network would. SCM_RIGHTS is EINVAL on an internet
/// socket.
pub(super) fn deliver(
    to: Option<&InboxRef>,
    from: Vec<u8>,
    data: &[u8],
    fds: Vec<FileRef>,
) -> Result<usize, Errno> {
    if !fds.is_empty() {
        return Err(Errno::EINVAL);
    }
    if let Some(to) = to {
        let mut g = lock(to);
        let held: usize = g.queue.iter().map(|d| d.data.len()).sum();
        let room = held + data.len() <= UDP_QBYTES && g.queue.len() < UDP_QLEN;
        if !g.closed && !g.shut_rd && room {
            g.queue.push_back(Datagram {
                data: data.to_vec(),
                fds,
                from: Some(from),
            });
            g.moves += 1;
        }
    }
    Ok(data.len())
}

/// Writes the sender of a datagram (its internal name) as a socket of
/// `family` reports it: from this host, so a loopback address of the
/// sender's family (IPv4 as v4-mapped for an IPv6 receiver).
pub(super) fn write_sender(
    mem: &mut GuestMemory,
    addr: u64,
    len_ptr: u64,
    family: u16,
    from: Option<&[u8]>,
) -> Result<(), Errno> {
    let (port, from_family) = from.and_then(parse_name).unwrap_or((0, family));
    let ip = match (family, from_family) {
        (AF_INET6, AF_INET6) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    let bytes = inet::encode_addr(SocketAddr::new(ip, port), family);
    inet::write_addr(mem, addr, len_ptr, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_port_and_family_and_are_never_unix_names() {
        let n = name(5353, AF_INET6);
        assert_eq!(parse_name(&n), Some((5353, AF_INET6)));
        assert_eq!(parse_name(&name(1, AF_INET)), Some((1, AF_INET)));
        assert_ne!(n[0], 0, "not an abstract name");
        assert_eq!(parse_name(b"\0abc"), None);
        assert_eq!(parse_name(b"/tmp/sock"), None);
    }

    #[test]
    fn a_full_queue_drops_and_descriptors_are_refused() {
        let to: InboxRef = Arc::default();
        for _ in 0..UDP_QLEN + 5 {
            assert_eq!(
                deliver(Some(&to), name(9, AF_INET), b"x", Vec::new()),
                Ok(1)
            );
        }
        assert_eq!(lock(&to).queue.len(), UDP_QLEN);
        // Large datagrams fill it by bytes first.
        let big: InboxRef = Arc::default();
        let d = vec![7u8; 60_000];
        for _ in 0..5 {
            assert_eq!(
                deliver(Some(&big), name(9, AF_INET), &d, Vec::new()),
                Ok(60_000)
            );
        }
        assert_eq!(lock(&big).queue.len(), 3);
        assert_eq!(deliver(None, name(9, AF_INET), b"lost", Vec::new()), Ok(4));
        lock(&to).closed = true;
        assert_eq!(
            deliver(Some(&to), name(9, AF_INET), b"late", Vec::new()),
            Ok(4)
        );
    }
}
