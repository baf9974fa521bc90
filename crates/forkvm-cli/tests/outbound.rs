//! Outbound TCP connections (`--allow-connect`, issue 10): a guest connect()
//! to an allowed address is a real host connection; everything else is
//! ECONNREFUSED. Clients (a C program in four waiting styles, Go's
//! net/http, Python's urllib) fetch from a loopback backend run by the test
//! and must print what they print natively; `forkvm serve` runs a Go server
//! whose handler proxies to the backend, and its host connections must be
//! closed when each request's VM is reset.

mod common;

use common::http::{free_port, get, Server};
use common::{check, forkvm_bin, guest, installed, Case};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A keep-alive HTTP/1.1 backend on a loopback port: answers
/// "backend path=PATH" and counts connections accepted and still open.
struct Backend {
    port: u16,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicIsize>,
}

impl Backend {
    fn start() -> Backend {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind backend");
        let port = l.local_addr().expect("addr").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicIsize::new(0));
        let (a, o) = (accepted.clone(), open.clone());
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                a.fetch_add(1, Ordering::SeqCst);
                o.fetch_add(1, Ordering::SeqCst);
                let o = o.clone();
                std::thread::spawn(move || {
                    serve_conn(s);
                    o.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Backend {
            port,
            accepted,
            open,
        }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Waits (bounded) until no connection is open; returns how many are.
    fn settle(&self) -> isize {
        let t = Instant::now();
        while self.open.load(Ordering::SeqCst) > 0 && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.open.load(Ordering::SeqCst)
    }
}

/// Serves requests on one connection until the client closes it (or asks to).
fn serve_conn(mut s: TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        let path = head.split_whitespace().nth(1).unwrap_or("?").to_string();
        let lower = head.to_ascii_lowercase();
        let close = lower.contains("connection: close") || head.contains("HTTP/1.0");
        let body = format!("backend path={path}");
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{}\r\n{body}",
            body.len(),
            if close { "Connection: close\r\n" } else { "" }
        );
        if s.write_all(resp.as_bytes()).is_err() || close {
            return;
        }
    }
}

#[test]
fn c_client_fetches_through_allow_connect_as_natively() {
    let b = Backend::start();
    let allow = b.addr();
    for mode in ["block", "poll", "epoll", "select"] {
        let path = format!("/c-{mode}");
        let case = Case::new(guest("fetch.musl"))
            .args([mode, "127.0.0.1", &b.port.to_string(), &path])
            .flags(["--allow-connect", &allow]);
        let (native, vm) = check(&case);
        assert!(
            vm.stdout_str().contains(&format!("backend path={path}")),
            "{mode}: {}",
            vm.describe()
        );
        assert_eq!(native.status, vm.status);
    }
    assert_eq!(b.settle(), 0, "every connection closed");
}

/// `--allow-connect` is the run's: a program a shell starts (fork, exec)
/// may connect too. The exec'd program lost it (ECONNREFUSED).
#[test]
fn a_program_started_by_a_shell_keeps_allow_connect() {
    let b = Backend::start();
    let fetch = guest("fetch.musl");
    let dir = fetch
        .parent()
        .expect("guest dir")
        .to_string_lossy()
        .into_owned();
    let script = format!("{} block 127.0.0.1 {} /sh", fetch.display(), b.port);
    let case = Case::new("/bin/busybox")
        .args(["sh", "-c", &script])
        .flags(["--allow-connect", &b.addr(), "--allow-read", &dir]);
    let (_, vm) = check(&case);
    assert!(
        vm.stdout_str().contains("backend path=/sh"),
        "{}",
        vm.describe()
    );
}

#[test]
fn connect_is_refused_without_the_flag_and_named_in_verbose_notes() {
    let b = Backend::start();
    let port = b.port.to_string();
    let out = Command::new(forkvm_bin())
        .args(["run", "-v"])
        .arg(guest("fetch.musl"))
        .args(["block", "127.0.0.1", &port, "/x"])
        .output()
        .expect("run forkvm");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "connect: ECONNREFUSED\n"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("connect to 127.0.0.1:{port}")) && err.contains("--allow-connect"),
        "{err}"
    );
    // Another port of the same host is not allowed by one HOST:PORT.
    let out = Command::new(forkvm_bin())
        .args([
            "run",
            "--allow-connect",
            &format!("127.0.0.1:{}", b.port + 1),
        ])
        .arg(guest("fetch.musl"))
        .args(["poll", "127.0.0.1", &port, "/x"])
        .output()
        .expect("run forkvm");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "connect: ECONNREFUSED\n"
    );
    assert_eq!(
        b.accepted.load(Ordering::SeqCst),
        0,
        "nothing reached the backend"
    );
}

#[test]
fn localhost_resolves_at_start_and_ipv6_loopback_works() {
    let l6 = match TcpListener::bind("[::1]:0") {
        Ok(l) => l,
        Err(_) => return, // no IPv6 loopback on this host
    };
    let port = l6.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in l6.incoming().flatten() {
            std::thread::spawn(move || serve_conn(s));
        }
    });
    let case = Case::new(guest("fetch.musl"))
        .args(["epoll", "::1", &port.to_string(), "/v6"])
        .flags(["--allow-connect", &format!("[::1]:{port}")]);
    let (_, vm) = check(&case);
    assert!(
        vm.stdout_str().contains("backend path=/v6"),
        "{}",
        vm.describe()
    );
    // `localhost` names what the host's resolver gives it (127.0.0.1 at least).
    let b = Backend::start();
    let case = Case::new(guest("fetch.musl"))
        .args(["block", "127.0.0.1", &b.port.to_string(), "/lh"])
        .flags(["--allow-connect", &format!("localhost:{}", b.port)]);
    let (_, vm) = check(&case);
    assert!(
        vm.stdout_str().contains("backend path=/lh"),
        "{}",
        vm.describe()
    );
}

/// A host name given to `--allow-connect` resolves in the guest too (its
/// own /etc/hosts names it): the guest has no DNS, so a client that
/// resolved the name itself found nothing. The name is this machine's host
/// name where it resolves to 127.0.0.1 (skipped elsewhere).
#[test]
fn an_allowed_host_name_resolves_in_the_guest() {
    let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
        return;
    };
    let name = name.trim().to_string();
    let b = Backend::start();
    let spec = format!("{name}:{}", b.port);
    let loopback = std::net::ToSocketAddrs::to_socket_addrs(&spec.as_str())
        .is_ok_and(|mut a| a.any(|a| a.ip() == std::net::Ipv4Addr::LOCALHOST));
    if name.is_empty() || name == "localhost" || !loopback {
        return;
    }
    let url = format!("http://{spec}/by-name");
    let case = Case::new(guest("go_proxy"))
        .args(["get", &url])
        .flags(["--allow-connect", &spec]);
    let (_, vm) = check(&case);
    assert_eq!(vm.stdout_str(), "status=200 backend path=/by-name\n");
}

#[test]
fn go_http_client_fetches_as_natively() {
    let b = Backend::start();
    let url = format!("http://{}/go-client", b.addr());
    let case = Case::new(guest("go_proxy"))
        .args(["get", &url])
        .flags(["--allow-connect", &b.addr()]);
    let (_, vm) = check(&case);
    assert_eq!(vm.stdout_str(), "status=200 backend path=/go-client\n");
    assert_eq!(b.settle(), 0);
}

#[test]
fn python_urllib_fetches_as_natively() {
    let py = "/usr/bin/python3";
    if !installed(py) {
        return;
    }
    let b = Backend::start();
    let code = format!(
        "import urllib.request\nr = urllib.request.urlopen('http://{}/py', timeout=30)\nprint(r.status, r.read().decode())",
        b.addr()
    );
    let case = Case::new(py)
        .args(["-c", &code])
        .flags(["--allow-connect", &b.addr(), "--memory", "512"])
        .limit(Duration::from_secs(120));
    let (_, vm) = check(&case);
    assert_eq!(vm.stdout_str(), "200 backend path=/py\n");
}

/// Open descriptors of a process (its /proc/PID/fd).
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn served_proxy_connects_per_request_and_closes_at_reset() {
    let b = Backend::start();
    let backend = format!("http://{}", b.addr());
    // Natively the proxy keeps its backend connection and counts up.
    let nport = free_port();
    let mut ncmd = Command::new(guest("go_proxy"));
    ncmd.args(["serve", &nport.to_string(), &backend]);
    let native = Server::start(ncmd, nport, "native-proxy");
    let want = get(nport, "/a").text();
    assert_eq!(want, "proxied: status=200 backend path=/a count=1\n");
    drop(native);
    assert_eq!(b.settle(), 0);
    let before = b.accepted.load(Ordering::SeqCst);

    let port = free_port();
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["serve", "--concurrency", "1", "--request-timeout", "20"])
        .args(["--allow-connect", &b.addr()])
        .arg(guest("go_proxy"))
        .args(["serve", &port.to_string(), &backend]);
    let fs = Server::start(cmd, port, "forkvm-proxy");
    let pid = fs.child.id();
    let ctx = || format!("--- forkvm output:\n{}", fs.output());
    let mut fds_after_warmup = 0;
    for i in 0..40 {
        let r = get(port, "/a");
        assert_eq!(r.status, 200, "request {i}\n{}", ctx());
        // Every request is a fresh fork: its counter reads 1, its Go client a new connection.
        assert_eq!(r.text(), want, "request {i}\n{}", ctx());
        if i == 4 {
            fds_after_warmup = fd_count(pid);
        }
    }
    assert_eq!(
        b.accepted.load(Ordering::SeqCst) - before,
        40,
        "one backend connection per request\n{}",
        ctx()
    );
    // Go keeps its backend connection for reuse; the reset closed every one.
    assert_eq!(b.settle(), 0, "backend connections left open\n{}", ctx());
    // A leak per request would add 35; allow the one or two descriptors of
    // connections still closing when a count is taken.
    let fds = fd_count(pid);
    assert!(
        fds <= fds_after_warmup + 2,
        "forkvm's descriptors grew from {fds_after_warmup} to {fds}\n{}",
        ctx()
    );
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[test]
fn allowed_address_with_nothing_listening_is_refused_as_natively() {
    let port = closed_port();
    let allow = format!("127.0.0.1:{port}");
    for mode in ["block", "poll", "epoll"] {
        let case = Case::new(guest("fetch.musl"))
            .args([mode, "127.0.0.1", &port.to_string(), "/"])
            .flags(["--allow-connect", &allow]);
        let (_, vm) = check(&case);
        assert_eq!(vm.stdout_str(), "connect: ECONNREFUSED\n", "{mode}");
    }
}

#[test]
fn served_proxy_with_its_backend_down_answers_its_own_error() {
    let backend = closed_port();
    let port = free_port();
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["serve", "--concurrency", "1", "--request-timeout", "20"])
        .args(["--allow-connect", &format!("127.0.0.1:{backend}")])
        .arg(guest("go_proxy"))
        .args([
            "serve",
            &port.to_string(),
            &format!("http://127.0.0.1:{backend}"),
        ]);
    let fs = Server::start(cmd, port, "forkvm-proxy-down");
    for _ in 0..3 {
        let r = get(port, "/a");
        assert_eq!(r.status, 502, "{}", fs.output());
        assert!(r.text().contains("connection refused"), "{}", r.text());
    }
}

#[test]
fn a_server_with_two_listening_sockets_is_served_on_both() {
    let (n1, n2) = (free_port(), free_port());
    let mut ncmd = Command::new(guest("two_ports.musl"));
    ncmd.args([n1.to_string(), n2.to_string()]);
    let native = Server::start(ncmd, n2, "native-two-ports");
    // Natively one process counts every request (the start-up probe included).
    let (a, b) = (get(n1, "/").text(), get(n2, "/").text());
    assert!(a.starts_with(&format!("port={n1} count=")), "{a}");
    assert!(b.starts_with(&format!("port={n2} count=")), "{b}");
    assert_ne!(
        a[a.len() - 2..],
        b[b.len() - 2..],
        "the native counter counts"
    );
    drop(native);

    let (p1, p2) = (free_port(), free_port());
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["serve", "--concurrency", "1", "--request-timeout", "20"])
        .arg(guest("two_ports.musl"))
        .args([p1.to_string(), p2.to_string()]);
    let fs = Server::start(cmd, p2, "forkvm-two-ports");
    for _ in 0..2 {
        for p in [p1, p2, p2, p1] {
            let r = get(p, "/");
            assert_eq!(r.text(), format!("port={p} count=1\n"), "{}", fs.output());
        }
    }
}
