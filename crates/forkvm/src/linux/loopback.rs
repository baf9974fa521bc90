//! TCP over loopback inside one VM. A program that connects to an address it
//! listens on itself (node's `http.get` of its own server, a test suite that
//! starts a server and calls it, an in-process RPC client) reaches its own
//! listening socket, as on Linux: the connection is a stream pair from
//! [`super::unix_socket`], one end for the connecting socket and the other
//! queued for accept, with TCP names on both. Nothing leaves the VM, so
//! `--allow-connect` is not involved; an address nobody in the VM listens on
//! is refused as before.

use super::fdtable::{lock, FileKind};
use super::inet::{find_listener, next_port, Inet, Listener};
use super::unix_socket::Socket;
use super::{Errno, Process, SysResult};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

/// A listening socket of this process that a connect to `to` reaches.
pub(super) struct OwnListener {
    queue: Arc<Mutex<Listener>>,
    /// The listening socket's family (its accepted sockets have it too).
    family: u16,
}

/// Whether `ip` names this host: loopback, or the unspecified address (which
/// Linux connects to the local host).
fn this_host(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip.is_loopback() || ip.is_unspecified()
}

/// Whether a socket bound to `local` (with IPV6_V6ONLY as `v6only`) accepts
/// a connection to `to` (same port, checked by the caller).
fn accepts(local: SocketAddr, v6only: bool, to: IpAddr) -> bool {
    let to = to.to_canonical();
    match local.ip() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED) => to.is_ipv4(),
        IpAddr::V6(Ipv6Addr::UNSPECIFIED) => !(v6only && to.is_ipv4()),
        ip => {
            let ip = ip.to_canonical();
            ip == to || (to.is_unspecified() && ip.is_loopback() && ip.is_ipv4() == to.is_ipv4())
        }
    }
}

/// The listening socket of this process that a TCP connect to `to` reaches, if any.
pub(super) fn own_listener(p: &Process, to: SocketAddr) -> Option<OwnListener> {
    if !this_host(to.ip()) {
        return None;
    }
    let (queue, family, _) = find_listener(p, |i| {
        i.local
            .is_some_and(|local| local.port() == to.port() && accepts(local, i.v6only(), to.ip()))
    })?;
    Some(OwnListener { queue, family })
}

/// Connections queued past the backlog: Linux drops the SYNs it has no room
/// for and the client sends them again, so a burst larger than the backlog
/// still connects, later; here they are queued at once, up to this many
/// more (a bound on what a program that connects and closes can pile up).
const PAST_BACKLOG: usize = super::inet::SOMAXCONN as usize;

/// connect(2) of the TCP socket `fd` to `to`, which `listener` listens on:
/// connected at once (a nonblocking connect too, which Linux allows), the
/// other end queued for accept. A queue already holding [`PAST_BACKLOG`]
/// more than the backlog refuses (ECONNREFUSED) rather than leaving the
/// connect pending.
pub(super) fn connect(
    p: &mut Process,
    fd: u64,
    to: SocketAddr,
    listener: OwnListener,
) -> SysResult {
    {
        let l = lock(&listener.queue);
        if l.pending.len() > l.backlog.max(0) as usize + PAST_BACKLOG {
            return Err(Errno::ECONNREFUSED);
        }
    }
    // The address the connection is between: `to`, with an unspecified
    // address made the loopback one of its family.
    let ip = match to.ip() {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::UNSPECIFIED) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let server = SocketAddr::new(ip, to.port());
    // A socket bound before connect keeps its port (and a specific address):
    // the server sees the client by them.
    let bound = {
        let file = p.fds.get(fd as i32)?;
        let of = lock(&file);
        match &of.kind {
            FileKind::Socket(s) => s.inet.as_ref().and_then(|i| i.local),
            _ => None,
        }
    };
    let client = match bound {
        Some(b) if b.port() != 0 => {
            let ip = if b.ip().is_unspecified() { ip } else { b.ip() };
            SocketAddr::new(ip, b.port())
        }
        _ => SocketAddr::new(ip, next_port()),
    };
    let (mut mine, mut theirs) = Socket::tcp_pair();
    let mut accepted = Inet::new(listener.family);
    accepted.local = Some(server);
    accepted.peer = Some(client);
    theirs.inet = Some(Box::new(accepted));
    // The connecting socket takes over `mine`'s side (dropping a socket that
    // still holds it would close it).
    let side = mine.conn.take();
    let file = p.fds.get(fd as i32)?;
    {
        let mut of = lock(&file);
        let FileKind::Socket(s) = &mut of.kind else {
            return Err(Errno::ENOTSOCK);
        };
        let i = s.inet.as_deref_mut().ok_or(Errno::ENOTSOCK)?;
        i.local = Some(client);
        i.peer = Some(server);
        s.conn = side;
    }
    let mut queue = lock(&listener.queue);
    queue.pending.push_back(theirs);
    queue.arrivals += 1;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn which_bound_addresses_a_connect_reaches() {
        let lo4: IpAddr = "127.0.0.1".parse().unwrap();
        let lo6: IpAddr = "::1".parse().unwrap();
        assert!(accepts(sa("0.0.0.0:80"), false, lo4));
        assert!(!accepts(sa("0.0.0.0:80"), false, lo6), "v4 any is not v6");
        assert!(accepts(sa("[::]:80"), false, lo4), "dual stack");
        assert!(!accepts(sa("[::]:80"), true, lo4), "IPV6_V6ONLY");
        assert!(accepts(sa("[::]:80"), true, lo6));
        assert!(accepts(sa("127.0.0.1:80"), false, lo4));
        assert!(accepts(
            sa("127.0.0.1:80"),
            false,
            "::ffff:127.0.0.1".parse().unwrap()
        ));
        assert!(!accepts(sa("127.0.0.2:80"), false, lo4));
        assert!(accepts(
            sa("127.0.0.1:80"),
            false,
            "0.0.0.0".parse().unwrap()
        ));
        assert!(this_host("127.3.4.5".parse().unwrap()));
        assert!(this_host("0.0.0.0".parse().unwrap()));
        assert!(!this_host("10.0.0.1".parse().unwrap()));
        assert!(!this_host("93.184.216.34".parse().unwrap()));
    }
}
