//! Outbound TCP connections backed by real host sockets (`--allow-connect`).
//!
//! A guest `connect()` on a virtual TCP socket ([`super::inet`]) to an
//! address in the allow-list opens a nonblocking host socket and connects
//! it; from then on the guest's socket is a thin view of it: send, recv,
//! shutdown, SO_ERROR, FIONREAD and poll bits are the host kernel's own
//! answers (asked without ever blocking), so TCP semantics (EOF, EPIPE,
//! ECONNRESET, half-close) are Linux's. Every other address is refused with
//! ECONNREFUSED, what Linux gives for a firewall REJECT (the default
//! `icmp-port-unreachable` and `tcp-reset`), so clients treat it as "nothing
//! listens there" and try their next address.
//!
//! Waiting: a guest call that finds a host socket not ready records what it
//! waits for in the socket ([`HostStream::want`]); when every guest thread
//! waits, the run loop sleeps in [`sleep`], a host poll over exactly those
//! sockets, and a wake-up makes the retrying threads look again. Bits that
//! are ready are never waited for, so an unread socket cannot make the
//! loop spin.
//!
//! A connection is owned by one process: a fork's copy of a host-backed
//! socket is reset (ECONNRESET), never a second user of the same stream.
//! Closing the guest's last descriptor, or dropping the process (a serve
//! reset), closes the host socket.

use super::fdtable::{lock, FileKind, FileRef};
use super::Errno;
use rustix::net::{self as rnet, RecvFlags, SendFlags, Shutdown};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI16, Ordering};
use std::sync::Arc;
use std::time::Duration;

const POLLIN: i16 = 0x1;
const POLLOUT: i16 = 0x4;
const POLLERR: i16 = 0x8;
const POLLHUP: i16 = 0x10;
const POLLRDHUP: i16 = 0x2000;
/// `ECONNRESET`.
pub const ECONNRESET: Errno = Errno(104);
/// Most bytes one receive asks the host for (bounds the bounce buffer).
const MAX_AVAILABLE: usize = 1 << 20;
/// Refused addresses named in `-v` notes; later ones are refused silently.
const MAX_NOTED: usize = 32;

/// What outbound connections the process may make: the resolved
/// `--allow-connect` addresses.
#[derive(Debug, Clone, Default)]
pub struct Outbound {
    allowed: Arc<Vec<SocketAddr>>,
    noted: Vec<SocketAddr>,
    /// The host names given to `--allow-connect`, with the addresses they
    /// resolved to, for the guest's own /etc/hosts (see `procfs::etc_file`).
    names: Arc<Vec<(String, std::net::IpAddr)>>,
}

impl Outbound {
    /// An allow-list of these addresses (IPv4-mapped IPv6 is compared as IPv4).
    pub fn new(addrs: Vec<SocketAddr>) -> Self {
        Self {
            allowed: Arc::new(addrs.into_iter().map(canonical).collect()),
            noted: Vec::new(),
            names: Arc::default(),
        }
    }

    /// Names the guest resolves through its own /etc/hosts: the host names
    /// of `--allow-connect`, as the host resolved them at start-up (the
    /// guest has no DNS: no datagram leaves the VM).
    pub fn set_names(&mut self, names: Vec<(String, std::net::IpAddr)>) {
        self.names = Arc::new(names);
    }

    /// The names set with [`Outbound::set_names`].
    pub fn names(&self) -> &[(String, std::net::IpAddr)] {
        &self.names
    }

    /// The allowed addresses.
    pub fn allowed(&self) -> &[SocketAddr] {
        &self.allowed
    }

    /// Whether a connection to `to` may be made; a refusal is noted once per address.
    pub fn check(&mut self, to: SocketAddr) -> bool {
        let to = canonical(to);
        if self.allowed.contains(&to) {
            return true;
        }
        if self.noted.len() < MAX_NOTED && !self.noted.contains(&to) {
            self.noted.push(to);
            tracing::debug!(
                "refused by policy: connect to {to}: outbound connections need --allow-connect {to} (ECONNREFUSED)"
            );
        }
        false
    }
}

/// `a` with an IPv4-mapped IPv6 address written as IPv4.
pub fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// A guest TCP connection backed by a host socket.
pub struct HostStream {
    /// The host socket (nonblocking); None once reset (a fork's copy).
    fd: Option<OwnedFd>,
    /// connect() has not completed yet.
    connecting: bool,
    /// Poll bits a waiting guest call found missing (what [`sleep`] waits for).
    want: AtomicI16,
    /// Times the guest found it drained (EAGAIN): a new readiness edge for epoll's EPOLLET.
    drains: u64,
    /// The guest sent (or connected) and has received nothing since: a reply is due.
    awaiting: bool,
    /// The reset has been reported (SO_ERROR or a receive).
    reset_told: bool,
    /// connect() has told the guest it is connected (a later one is EISCONN).
    pub confirmed: bool,
}

/// How a connect went.
pub enum Connect {
    /// Connected at once.
    Done,
    /// In progress (EINPROGRESS).
    Pending,
}

impl HostStream {
    /// Opens a host socket and starts connecting it to `to`. Errors are the
    /// host's (ECONNREFUSED, ENETUNREACH...).
    pub fn connect(to: SocketAddr, nodelay: bool) -> Result<(HostStream, Connect), Errno> {
        let family = if to.is_ipv4() {
            rnet::AddressFamily::INET
        } else {
            rnet::AddressFamily::INET6
        };
        let fd = rnet::socket_with(
            family,
            rnet::SocketType::STREAM,
            rnet::SocketFlags::NONBLOCK | rnet::SocketFlags::CLOEXEC,
            None,
        )?;
        if nodelay {
            rnet::sockopt::set_tcp_nodelay(&fd, true)?;
        }
        let how = match rnet::connect(&fd, &to) {
            Ok(()) => Connect::Done,
            Err(rustix::io::Errno::INPROGRESS) => Connect::Pending,
            Err(e) => return Err(e.into()),
        };
        let stream = HostStream {
            fd: Some(fd),
            connecting: matches!(how, Connect::Pending),
            want: AtomicI16::new(0),
            drains: 0,
            awaiting: true,
            reset_told: false,
            confirmed: matches!(how, Connect::Done),
        };
        Ok((stream, how))
    }

    /// A fork's copy: the connection belongs to the original, so this one is reset.
    pub fn reset_copy(&self) -> HostStream {
        HostStream {
            fd: None,
            connecting: false,
            want: AtomicI16::new(0),
            drains: 0,
            awaiting: false,
            reset_told: false,
            confirmed: true,
        }
    }

    fn fd(&self) -> Result<&OwnedFd, Errno> {
        self.fd.as_ref().ok_or(ECONNRESET)
    }

    fn wants(&self, bits: i16) {
        self.want.fetch_or(bits, Ordering::Relaxed);
    }

    /// The host socket's poll bits now (never blocks).
    fn host_bits(&self) -> i16 {
        let Some(fd) = &self.fd else {
            return POLLIN | POLLOUT | POLLERR | POLLHUP;
        };
        let mut pfd = [libc::pollfd {
            fd: fd.as_raw_fd(),
            events: POLLIN | POLLOUT | POLLRDHUP,
            revents: 0,
        }];
        match super::poll::host_poll(&mut pfd, 0) {
            Ok(_) => pfd[0].revents,
            Err(_) => 0,
        }
    }

    /// poll(2) bits for the guest; what is not ready is what a wait waits for.
    pub fn poll(&self) -> i16 {
        let r = self.host_bits();
        if r & (POLLERR | POLLHUP) == 0 {
            self.wants(!r & (POLLIN | POLLOUT));
        }
        r
    }

    /// Whether connect() is still in progress; checks the host once more first.
    pub fn still_connecting(&mut self) -> bool {
        if self.connecting && self.host_bits() & (POLLOUT | POLLERR | POLLHUP) != 0 {
            self.connecting = false;
        }
        if self.connecting {
            self.wants(POLLOUT);
        }
        self.connecting
    }

    /// Takes the pending socket error (SO_ERROR), 0 if none.
    pub fn take_error(&mut self) -> i32 {
        let Some(fd) = &self.fd else {
            if self.reset_told {
                return 0;
            }
            self.reset_told = true;
            return ECONNRESET.0;
        };
        match rnet::sockopt::socket_error(fd) {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => e.raw_os_error(),
            Err(e) => e.raw_os_error(),
        }
    }

    /// Sends what the host takes now (EAGAIN if nothing). Never raises SIGPIPE on the host.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, Errno> {
        let fd = self.fd().map_err(|_| Errno::EPIPE)?;
        match rnet::send(fd, data, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
            Ok(n) => {
                self.connecting = false;
                if n > 0 {
                    self.awaiting = true;
                }
                Ok(n)
            }
            Err(rustix::io::Errno::AGAIN) => {
                self.drains += 1;
                self.wants(POLLOUT);
                Err(Errno::EAGAIN)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Receives what is there now (EAGAIN if nothing, 0 at EOF).
    pub fn recv(&mut self, buf: &mut [u8], peek: bool) -> Result<usize, Errno> {
        let Some(fd) = &self.fd else {
            if self.reset_told {
                return Ok(0);
            }
            self.reset_told = true;
            return Err(ECONNRESET);
        };
        let mut flags = RecvFlags::DONTWAIT;
        if peek {
            flags |= RecvFlags::PEEK;
        }
        match rnet::recv(fd, &mut *buf, flags) {
            Ok((n, _)) => {
                self.connecting = false;
                self.awaiting = false;
                Ok(n)
            }
            Err(rustix::io::Errno::AGAIN) => {
                self.drains += 1;
                self.wants(POLLIN);
                Err(Errno::EAGAIN)
            }
            Err(e) => {
                self.awaiting = false;
                Err(e.into())
            }
        }
    }

    /// shutdown(2) on the host socket.
    pub fn shutdown(&mut self, how: u64) -> Result<(), Errno> {
        let how = match how {
            0 => Shutdown::Read,
            1 => Shutdown::Write,
            2 => Shutdown::Both,
            _ => return Err(Errno::EINVAL),
        };
        if how != Shutdown::Write {
            self.awaiting = false;
        }
        Ok(rnet::shutdown(
            self.fd().map_err(|_| Errno::ENOTCONN)?,
            how,
        )?)
    }

    /// Bytes a receive could return now (FIONREAD), capped.
    pub fn available(&self) -> usize {
        let Some(fd) = &self.fd else { return 0 };
        rustix::io::ioctl_fionread(fd).map_or(0, |n| (n as usize).min(MAX_AVAILABLE))
    }

    /// Sets TCP_NODELAY on the host socket (the guest set it).
    pub fn set_nodelay(&self, on: bool) {
        if let Some(fd) = &self.fd {
            let _ = rnet::sockopt::set_tcp_nodelay(fd, on);
        }
    }

    /// The host socket's local address (getsockname).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        let a = rnet::getsockname(self.fd.as_ref()?).ok()?;
        SocketAddr::try_from(a).ok()
    }

    /// Changes whenever the guest drained the socket: epoll's EPOLLET reports
    /// readiness again after a drain even if no look saw it drop.
    pub fn edge_token(&self) -> u64 {
        self.drains
    }

    /// Whether a reply is due: connecting, or sent to and not read from since.
    pub fn awaiting(&self) -> bool {
        let connecting = self.connecting && self.host_bits() & (POLLOUT | POLLERR | POLLHUP) == 0;
        self.fd.is_some() && (connecting || self.awaiting)
    }
}

/// The host-backed sockets of the process's descriptor table.
fn host_files(p: &super::Process) -> Vec<FileRef> {
    let mut out = Vec::new();
    for fd in p.fds.open_fds() {
        let Ok(f) = p.fds.get(fd) else { continue };
        let is_host = matches!(&lock(&f).kind, FileKind::Socket(s) if s.host_stream().is_some());
        if is_host && !out.iter().any(|o| Arc::ptr_eq(o, &f)) {
            out.push(f);
        }
    }
    out
}

/// Whether some host connection of the process waits for its peer (a
/// request in `forkvm serve` is not idle while its backend still answers).
pub fn awaiting(p: &super::Process) -> bool {
    if p.outbound.allowed().is_empty() {
        return false; // no host socket can exist: skip the table walk
    }
    host_files(p).iter().any(|f| match &lock(f).kind {
        FileKind::Socket(s) => s.host_stream().is_some_and(HostStream::awaiting),
        _ => false,
    })
}

/// Sleeps up to `d` while every guest thread waits, waking early when a
/// host socket becomes ready for what a guest call waited for. Returns
/// true if one did (the waiting threads should look again).
pub fn sleep(p: &mut super::Process, d: Duration) -> bool {
    if p.outbound.allowed().is_empty() {
        return super::child::sleep_until_woken(p, d);
    }
    let files = host_files(p);
    let mut pfds = Vec::new();
    let mut polled = Vec::new();
    for f in &files {
        let of = lock(f);
        let FileKind::Socket(s) = &of.kind else {
            continue;
        };
        let Some(h) = s.host_stream() else { continue };
        let (Some(fd), want) = (&h.fd, h.want.load(Ordering::Relaxed)) else {
            continue;
        };
        if want != 0 {
            pfds.push(libc::pollfd {
                fd: fd.as_fd().as_raw_fd(),
                events: want | POLLRDHUP,
                revents: 0,
            });
            polled.push(f.clone());
        }
    }
    if pfds.is_empty() {
        return super::child::sleep_until_woken(p, d);
    }
    // Round up: a zero timeout would spin until the deadline.
    let ms = d.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    match super::poll::host_poll(&mut pfds, ms) {
        Ok(n) if n > 0 => {
            for (pfd, f) in pfds.iter().zip(&polled) {
                if pfd.revents == 0 {
                    continue;
                }
                if let FileKind::Socket(s) = &lock(f).kind {
                    if let Some(h) = s.host_stream() {
                        let fired = if pfd.revents & (POLLERR | POLLHUP) != 0 {
                            POLLIN | POLLOUT
                        } else {
                            pfd.revents
                        };
                        h.want.fetch_and(!fired, Ordering::Relaxed);
                    }
                }
            }
            true
        }
        // Timed out, or a signal (the watchdog) cut it short.
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn wait_until(h: &mut HostStream, bits: i16) -> i16 {
        for _ in 0..2000 {
            let r = h.poll();
            if r & bits != 0 {
                return r;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("never ready for {bits:#x}");
    }

    #[test]
    fn allow_list_compares_mapped_addresses_as_ipv4() {
        let mut o = Outbound::new(vec!["127.0.0.1:80".parse().unwrap()]);
        assert!(o.check("127.0.0.1:80".parse().unwrap()));
        assert!(o.check("[::ffff:127.0.0.1]:80".parse().unwrap()));
        assert!(!o.check("127.0.0.1:81".parse().unwrap()));
        assert!(!o.check("[::1]:80".parse().unwrap()));
        assert!(!Outbound::default().check("127.0.0.1:80".parse().unwrap()));
    }

    #[test]
    fn stream_talks_to_a_real_listener_and_reports_eof() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (mut h, _) = HostStream::connect(addr, true).unwrap();
        let (mut peer, _) = l.accept().unwrap();
        wait_until(&mut h, POLLOUT);
        assert!(!h.still_connecting());
        assert_eq!(h.take_error(), 0);
        assert_eq!(h.local_addr().unwrap().ip(), addr.ip());
        let mut buf = [0u8; 16];
        assert_eq!(h.recv(&mut buf, false), Err(Errno::EAGAIN));
        assert!(h.want.load(Ordering::Relaxed) & POLLIN != 0);
        assert_eq!(h.send(b"ping"), Ok(4));
        assert!(h.awaiting());
        let mut got = [0u8; 4];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        peer.write_all(b"pong").unwrap();
        drop(peer);
        wait_until(&mut h, POLLIN);
        assert_eq!(h.recv(&mut buf, true), Ok(4), "peek");
        assert_eq!(h.recv(&mut buf, false), Ok(4));
        assert_eq!(&buf[..4], b"pong");
        assert!(!h.awaiting());
        assert_eq!(h.recv(&mut buf, false), Ok(0), "EOF");
        let copy = h.reset_copy();
        let mut copy = copy;
        assert_eq!(copy.recv(&mut buf, false), Err(ECONNRESET));
        assert_eq!(copy.send(b"x"), Err(Errno::EPIPE));
        assert!(!copy.awaiting());
    }

    #[test]
    fn refused_connection_shows_in_so_error() {
        // A port nothing listens on: bind, learn the port, close.
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        match HostStream::connect(addr, false) {
            Err(e) => assert_eq!(e, Errno::ECONNREFUSED),
            Ok((mut h, _)) => {
                wait_until(&mut h, POLLOUT | POLLERR);
                assert_eq!(h.take_error(), Errno::ECONNREFUSED.0);
            }
        }
    }
}
