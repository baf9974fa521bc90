//! `forkvm serve` running unmodified network servers (issue 10): a C epoll
//! server (musl static, glibc dynamic), a Go net/http server and Debian's
//! `python3 -m http.server`, each compared with the same server run
//! natively, with real clients (std TcpStream, wrk).
//!
//! Each server listens on a free loopback port given on its command line;
//! forkvm serves on the address the program bound. Servers are killed when
//! their guard is dropped; their output is shown when an assertion fails.

mod common;

use common::http::{
    call, connect, free_port, get, head, keep_alive, read_response, request, wrk, Server,
};
use common::{forkvm_bin, guest, installed, LIBS};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `forkvm serve [flags] PROGRAM ARGS...` on `port` (the program's own choice).
fn forkvm(prog: &Path, args: &[&str], flags: &[&str], port: u16) -> Server {
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["serve", "--concurrency", "1", "--request-timeout", "20"])
        .args(flags)
        .arg(prog)
        .args(args);
    Server::start(cmd, port, "forkvm")
}

fn native(prog: &Path, args: &[&str], port: u16) -> Server {
    let mut cmd = Command::new(prog);
    cmd.args(args);
    Server::start(cmd, port, "native")
}

/// What every server must show: same answers as natively, a counter at 1
/// on every request (ephemeral), POST echoed, keep-alive and pipelining, a
/// crash confined to its request, and a clean wrk run.
fn check_server(prog: &Path, flags: &[&str], hello: &str, header: (&str, &str)) {
    let nport = free_port();
    let _ns = native(prog, &[&nport.to_string()], nport);
    let port = free_port();
    let fs = forkvm(prog, &[&port.to_string()], flags, port);
    let ctx = || format!("--- forkvm output:\n{}", fs.output());

    for (method, path, body) in [
        ("GET", "/", &b""[..]),
        ("POST", "/echo", &b"posted body \x00\x01 bytes"[..]),
        ("GET", "/nowhere", &b""[..]),
    ] {
        let want = call(nport, method, path, body);
        let got = call(port, method, path, body);
        assert_eq!(got.status, want.status, "{method} {path}\n{}", ctx());
        assert_eq!(got.body, want.body, "{method} {path}\n{}", ctx());
        assert_eq!(
            got.header(header.0),
            want.header(header.0),
            "{method} {path}\n{}",
            ctx()
        );
    }
    assert_eq!(get(port, "/").text(), hello, "{}", ctx());
    assert_eq!(get(port, "/").header(header.0), Some(header.1));

    // Natively the counter counts up; each forked request sees a fresh process.
    let native_counts: Vec<String> = (0..3).map(|_| get(nport, "/count").text()).collect();
    assert_ne!(
        native_counts[0], native_counts[2],
        "the native counter counts"
    );
    for _ in 0..3 {
        assert_eq!(get(port, "/count").text(), "count=1\n", "{}", ctx());
    }

    let rs = keep_alive(port, "/count", "/");
    assert_eq!(rs.len(), 4);
    for (i, r) in rs.iter().enumerate() {
        assert_eq!(r.status, 200, "keep-alive response {i}\n{}", ctx());
    }
    assert_eq!(rs[0].text(), "count=1\n");
    assert_eq!(rs[1].text(), hello);
    assert_eq!(rs[2].text(), "count=1\n");
    assert_eq!(rs[3].text(), hello);

    // A crash answers 502 and does not affect the next request.
    let crash = get(port, "/crash");
    assert_eq!(crash.status, 502, "{}", ctx());
    assert_eq!(get(port, "/count").text(), "count=1\n", "{}", ctx());
    wrk(port, "/");
    assert_eq!(get(port, "/").status, 200, "{}", ctx());
}

#[test]
fn c_epoll_server_musl_static() {
    check_server(
        &guest("epoll_server.musl"),
        &[],
        "hello from epoll\n",
        ("X-Server", "epoll-c"),
    );
}

/// A client gets a whole answer whatever the program does after it (here, a
/// crash), as a client of the native server does: with a reset after every
/// request the request ends at the answer and the crash is never run; with
/// the VM kept, it runs and is logged, and the VM starts over.
#[test]
fn an_answer_is_delivered_whatever_the_program_does_after_it() {
    let prog = guest("epoll_server.musl");
    let port = free_port();
    let fs = forkvm(&prog, &[&port.to_string()], &[], port);
    for _ in 0..2 {
        let r = get(port, "/answer-then-crash");
        assert_eq!(r.status, 200, "{}", fs.output());
        assert_eq!(r.text(), "answered\n", "{}", fs.output());
    }
    assert_eq!(get(port, "/count").text(), "count=1\n", "{}", fs.output());
    drop(fs);
    // Kept between requests, the VM runs on after answering and crashes: the
    // client still gets the answer, the crash is logged, the VM starts over.
    let port = free_port();
    let fs = forkvm(&prog, &[&port.to_string()], &["--ephemeral", "false"], port);
    assert_eq!(get(port, "/count").text(), "count=1\n", "{}", fs.output());
    let r = get(port, "/answer-then-crash");
    assert_eq!(r.status, 200, "{}", fs.output());
    assert_eq!(r.text(), "answered\n", "{}", fs.output());
    let out = fs.output_once_it_says("crashed after a whole answer");
    assert!(out.contains("crashed after a whole answer"), "{out}");
    assert_eq!(get(port, "/count").text(), "count=1\n", "{}", fs.output());
}

/// No flags: the system libraries are readable by default, as under `forkvm run`.
#[test]
fn c_epoll_server_glibc_dynamic() {
    check_server(
        &guest("epoll_server.dyn"),
        &[],
        "hello from epoll\n",
        ("X-Server", "epoll-c"),
    );
}

#[test]
fn c_epoll_server_large_response_and_state_kept_without_reset() {
    let prog = guest("epoll_server.musl");
    let port = free_port();
    let fs = forkvm(&prog, &[&port.to_string()], &["--ephemeral", "false"], port);
    for i in 1..=3 {
        assert_eq!(
            get(port, "/count").text(),
            format!("count={i}\n"),
            "{}",
            fs.output()
        );
    }
    // 5 MB: many times the socket buffer, so the guest blocks in write and
    // the host drains it between runs.
    let big = get(port, "/big?n=5000000");
    assert_eq!(big.status, 200);
    assert_eq!(big.body.len(), 5_000_000);
    assert!(big
        .body
        .iter()
        .enumerate()
        .all(|(i, &b)| b == b'a' + (i % 26) as u8));
    // A large POST body: more than one receive buffer's worth.
    let body: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
    let echoed = call(port, "POST", "/echo", &body);
    assert_eq!(echoed.body, body);
    assert_eq!(get(port, "/count").text(), "count=6\n", "{}", fs.output());
}

#[test]
fn go_net_http_server() {
    let prog = common::guests_out().join("go_server");
    if !prog.exists() {
        eprintln!("skipped: Go is not installed (out/go_server was not built)");
        return;
    }
    check_server(&prog, &[], "hello from go\n", ("X-Server", "go"));
    // Without reset the same process serves every request.
    let port = free_port();
    let fs = forkvm(&prog, &[&port.to_string()], &["--ephemeral", "false"], port);
    for i in 1..=3 {
        assert_eq!(
            get(port, "/count").text(),
            format!("count={i}\n"),
            "{}",
            fs.output()
        );
    }
}

#[test]
fn python_http_server_serves_a_directory() {
    let py = "/usr/bin/python3";
    if !installed(py) {
        return;
    }
    let dir = common::scratch_dir("servers-python-root");
    std::fs::write(dir.join("a.txt"), "hello from a file\n").expect("write a.txt");
    let dir_s = dir.to_string_lossy().into_owned();
    let args = |port: u16| {
        vec![
            "-m".to_string(),
            "http.server".to_string(),
            port.to_string(),
            "--bind".to_string(),
            "127.0.0.1".to_string(),
            "--directory".to_string(),
            dir_s.clone(),
        ]
    };
    let nport = free_port();
    let nargs = args(nport);
    let nargs: Vec<&str> = nargs.iter().map(String::as_str).collect();
    let _ns = native(Path::new(py), &nargs, nport);
    let port = free_port();
    let fargs = args(port);
    let fargs: Vec<&str> = fargs.iter().map(String::as_str).collect();
    // By name, looked up in the guest's PATH, with the libraries readable by default.
    let mut flags = vec!["--env", "PATH=/usr/bin:/bin"];
    flags.extend([
        "--allow-read",
        "/usr",
        "--allow-read",
        "/etc",
        "--allow-read",
    ]);
    flags.push(&dir_s);
    let fs = forkvm(Path::new("python3"), &fargs, &flags, port);
    for path in ["/a.txt", "/", "/missing.txt"] {
        let want = get(nport, path);
        let got = get(port, path);
        assert_eq!(got.status, want.status, "{path}\n{}", fs.output());
        assert_eq!(got.body, want.body, "{path}\n{}", fs.output());
        assert_eq!(got.header("Content-Type"), want.header("Content-Type"));
        // The server's own reason phrase ("File not found"), not the standard one.
        assert_eq!(got.reason, want.reason, "{path}\n{}", fs.output());
        let (want, got) = (head(nport, path), head(port, path));
        assert_eq!(got.status, want.status, "HEAD {path}\n{}", fs.output());
        assert_eq!(got.header("Content-Length"), want.header("Content-Length"));
    }
    assert_eq!(get(port, "/a.txt").text(), "hello from a file\n");
    // HTTP/1.0 server: forkvm keeps the client's connection alive all the same.
    let mut s = connect(port);
    let mut buf = Vec::new();
    for _ in 0..2 {
        s.write_all(&request("GET", "/a.txt", b"", false))
            .expect("send");
        let r = read_response(&mut s, &mut buf);
        assert_eq!(r.text(), "hello from a file\n", "{}", fs.output());
    }
    wrk(port, "/a.txt");
}

/// An nginx configuration serving `root` on `port`, everything under `dir`.
fn nginx_conf(dir: &Path, root: &Path, port: u16) -> PathBuf {
    nginx_conf_with(dir, root, port, "")
}

/// The same with `more` in its server block.
fn nginx_conf_with(dir: &Path, root: &Path, port: u16, more: &str) -> PathBuf {
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log stderr notice;\n\
         pid {d}/nginx.pid;\nevents {{ worker_connections 64; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{\n    listen 127.0.0.1:{port};\n    root {};\n    add_header X-Server nginx;\n\
         location / {{ }}\n{more}  }}\n}}\n",
        root.display()
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf).expect("write nginx.conf");
    path
}

/// `forkvm serve` of nginx with configuration `conf`, its files under `dir`
/// (written) and `root` (read), and `more` flags.
fn nginx_in_forkvm(conf: &Path, dir: &Path, root: &Path, more: &[&str], port: u16) -> Server {
    let conf_s = conf.to_string_lossy().into_owned();
    let dir_s = dir.to_string_lossy().into_owned();
    let root_s = root.to_string_lossy().into_owned();
    let mut flags: Vec<&str> = LIBS.to_vec();
    flags.extend(["--allow-read", "/usr", "--allow-read", "/etc"]);
    flags.extend(["--allow-read", &root_s, "--allow-write", &dir_s]);
    flags.extend(more);
    forkvm(
        Path::new("/usr/sbin/nginx"),
        &["-p", &dir_s, "-c", &conf_s],
        &flags,
        port,
    )
}

#[test]
fn nginx_serves_a_static_file() {
    let nginx = "/usr/sbin/nginx";
    if !installed(nginx) {
        return;
    }
    let root = common::scratch_dir("servers-nginx-root");
    std::fs::write(root.join("index.html"), "hello from nginx\n").expect("index.html");
    let nport = free_port();
    let ndir = common::scratch_dir(&format!("servers-nginx-native-{nport}"));
    let nconf = nginx_conf(&ndir, &root, nport);
    let nconf_s = nconf.to_string_lossy().into_owned();
    let ndir_s = ndir.to_string_lossy().into_owned();
    let _ns = native(Path::new(nginx), &["-p", &ndir_s, "-c", &nconf_s], nport);
    let port = free_port();
    let dir = common::scratch_dir(&format!("servers-nginx-forkvm-{port}"));
    let conf = nginx_conf(&dir, &root, port);
    let fs = nginx_in_forkvm(&conf, &dir, &root, &[], port);
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/index.html"),
        ("GET", "/missing"),
        ("POST", "/"),
    ] {
        let want = call(nport, method, path, b"x");
        let got = call(port, method, path, b"x");
        assert_eq!(got.status, want.status, "{method} {path}\n{}", fs.output());
        assert_eq!(got.body, want.body, "{method} {path}\n{}", fs.output());
        assert_eq!(got.header("X-Server"), want.header("X-Server"));
        assert_eq!(got.header("ETag"), want.header("ETag"));
    }
    assert_eq!(get(port, "/").text(), "hello from nginx\n");
    let rs = keep_alive(port, "/", "/index.html");
    for r in &rs {
        assert_eq!(r.text(), "hello from nginx\n", "{}", fs.output());
    }
    wrk(port, "/");
}

/// nginx beyond a static file, answered as natively: HEAD (its
/// Content-Length is the file's, not the empty body's), gzip, byte ranges, a
/// `return`, a 304, a large file by sendfile, and `proxy_pass` to a backend
/// (the native nginx) reached through --allow-connect.
#[test]
fn nginx_head_range_gzip_return_and_proxy() {
    let nginx = "/usr/sbin/nginx";
    if !installed(nginx) {
        return;
    }
    let root = common::scratch_dir("servers-nginx-features-root");
    std::fs::write(root.join("index.html"), "hello from nginx\n".repeat(64)).expect("index");
    let big: Vec<u8> = (0..3u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(root.join("big.bin"), &big).expect("big.bin");
    let nport = free_port();
    let more = format!(
        "    gzip on;\n    gzip_types text/plain;\n    gzip_min_length 20;\n\
         \x20   location = /ret {{ return 200 \"returned $request_method $args\\n\"; }}\n\
         \x20   location /proxy/ {{ proxy_pass http://127.0.0.1:{nport}/; }}\n"
    );
    let ndir = common::scratch_dir(&format!("servers-nginx-features-native-{nport}"));
    let nconf = nginx_conf_with(&ndir, &root, nport, &more);
    let nconf_s = nconf.to_string_lossy().into_owned();
    let ndir_s = ndir.to_string_lossy().into_owned();
    let _ns = native(Path::new(nginx), &["-p", &ndir_s, "-c", &nconf_s], nport);
    let port = free_port();
    let dir = common::scratch_dir(&format!("servers-nginx-features-forkvm-{port}"));
    let conf = nginx_conf_with(&dir, &root, port, &more);
    let backend = format!("127.0.0.1:{nport}");
    let fs = nginx_in_forkvm(&conf, &dir, &root, &["--allow-connect", &backend], port);
    let ctx = || format!("--- forkvm output:\n{}", fs.output());

    for path in ["/", "/index.html", "/big.bin", "/missing"] {
        let (want, got) = (head(nport, path), head(port, path));
        assert_eq!(got.status, want.status, "HEAD {path}\n{}", ctx());
        for h in ["Content-Length", "ETag", "Last-Modified", "Content-Type"] {
            assert_eq!(got.header(h), want.header(h), "HEAD {path}: {h}\n{}", ctx());
        }
    }
    let send = |port: u16, extra: &str, path: &str| {
        let mut s = connect(port);
        let req =
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Connection: close\r\n\r\n");
        s.write_all(req.as_bytes()).expect("send");
        read_response(&mut s, &mut Vec::new())
    };
    let etag = get(nport, "/index.html")
        .header("ETag")
        .map(str::to_string)
        .unwrap_or_default();
    let cases = [
        ("Accept-Encoding: gzip\r\n".to_string(), "/index.html"),
        ("Range: bytes=3-7\r\n".to_string(), "/index.html"),
        ("Range: bytes=2000000-2000099\r\n".to_string(), "/big.bin"),
        ("Range: bytes=99999999-\r\n".to_string(), "/index.html"),
        (format!("If-None-Match: {etag}\r\n"), "/index.html"),
        (String::new(), "/ret?a=1"),
        (String::new(), "/proxy/index.html"),
        (String::new(), "/big.bin"),
    ];
    for (extra, path) in &cases {
        let (want, got) = (send(nport, extra, path), send(port, extra, path));
        let what = format!("GET {path} with {extra:?}");
        assert_eq!(got.status, want.status, "{what}\n{}", ctx());
        assert_eq!(got.body, want.body, "{what}\n{}", ctx());
        for h in ["Content-Encoding", "Content-Range", "Content-Type", "ETag"] {
            assert_eq!(got.header(h), want.header(h), "{what}: {h}\n{}", ctx());
        }
    }
    assert_eq!(get(port, "/big.bin").body, big, "{}", ctx());
    assert_eq!(get(port, "/ret?b=2").text(), "returned GET b=2\n");
    wrk(port, "/ret");
}

/// Shared memory a server maps before it listens (opcache's, a pre-forking
/// server's scoreboard) is the master's in every request: its contents, a
/// function pointer kept there, and a counter reset with the request.
#[test]
fn shared_memory_made_before_listening_is_the_masters_in_every_request() {
    let prog = guest("shared_map.musl");
    let nport = free_port();
    let _ns = native(&prog, &[&nport.to_string()], nport);
    let port = free_port();
    let fs = forkvm(&prog, &[&port.to_string()], &[], port);
    let want = "hello marker=5eed5eed far=far page count=1\n";
    assert_eq!(get(nport, "/").text(), want);
    assert_ne!(get(nport, "/").text(), want, "natively the counter counts");
    for _ in 0..3 {
        assert_eq!(get(port, "/").text(), want, "{}", fs.output());
    }
}

/// Concurrent requests that take the same file lock (php -S: opcache's lock
/// file, opened before listening) wait for each other: one holding it while
/// the other asks is served when the first is done, not 502 (the waiting
/// fork was taken for a server waiting without answering).
#[test]
fn a_request_waits_for_a_lock_another_request_holds() {
    let prog = guest("shared_map.musl");
    let dir = common::scratch_dir("servers-lock-wait");
    let dir_s = dir.to_string_lossy().into_owned();
    let lock = dir.join("lock").to_string_lossy().into_owned();
    let port = free_port();
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["serve", "--concurrency", "2", "--request-timeout", "20"])
        .args(["--allow-write", &dir_s])
        .arg(&prog)
        .args([&port.to_string(), &lock]);
    let fs = Server::start(cmd, port, "forkvm");
    let want = "hello marker=5eed5eed far=far page count=1\n";
    assert_eq!(get(port, "/").text(), want, "{}", fs.output());
    // /slow holds the lock a second; the next request asks for it meanwhile.
    let slow = std::thread::spawn(move || get(port, "/slow"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let other = get(port, "/");
    let slow = slow.join().expect("the slow request");
    assert_eq!(
        (slow.status, slow.text()),
        (200, want.into()),
        "{}",
        fs.output()
    );
    assert_eq!(
        (other.status, other.text()),
        (200, want.into()),
        "{}",
        fs.output()
    );
}

#[test]
fn reset_per_connection_shares_state_within_a_connection_only() {
    let prog = guest("epoll_server.musl");
    let port = free_port();
    let fs = forkvm(
        &prog,
        &[&port.to_string()],
        &["--reset", "per-connection"],
        port,
    );
    for _ in 0..2 {
        // Raw bytes both ways: forkvm parses nothing; the connection is the guest's.
        let mut s = connect(port);
        let mut buf = Vec::new();
        for i in 1..=3 {
            s.write_all(&request("GET", "/count", b"", false))
                .expect("send");
            let r = read_response(&mut s, &mut buf);
            assert_eq!(r.text(), format!("count={i}\n"), "{}", fs.output());
            assert_eq!(
                r.header("X-Server"),
                Some("epoll-c"),
                "the guest's own headers"
            );
        }
        // The guest closes after "Connection: close": so does the client's connection.
        s.write_all(&request("POST", "/echo", b"bye", true))
            .expect("send");
        let r = read_response(&mut s, &mut buf);
        assert_eq!(r.text(), "bye");
        let mut rest = Vec::new();
        s.read_to_end(&mut rest).expect("EOF after close");
        assert!(rest.is_empty());
    }
    // A crash ends that connection only.
    let mut s = connect(port);
    s.write_all(&request("GET", "/crash", b"", false))
        .expect("send");
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "no answer from a crashed server");
    assert_eq!(get(port, "/count").text(), "count=1\n", "{}", fs.output());
}

#[test]
fn rust_tokio_hyper_server() {
    check_server(
        &guest("rust_server"),
        &[],
        "hello from rust\n",
        ("X-Server", "rust-hyper"),
    );
}

#[test]
fn socket_names_are_real_looking() {
    let prog = guest("epoll_server.musl");
    let nport = free_port();
    let _ns = native(&prog, &[&nport.to_string()], nport);
    let port = free_port();
    let fs = forkvm(&prog, &[&port.to_string()], &[], port);
    // The guest's getpeername is the real client's address; getsockname the bound one.
    for p in [nport, port] {
        let mut s = connect(p);
        let me = s.local_addr().expect("local addr");
        s.write_all(&request("GET", "/peer", b"", true))
            .expect("send");
        let r = read_response(&mut s, &mut Vec::new());
        assert_eq!(
            r.text(),
            format!("peer={me} local=127.0.0.1:{p}\n"),
            "{}",
            fs.output()
        );
    }
}

#[test]
fn run_of_a_server_times_out_with_a_hint() {
    let prog = guest("epoll_server.musl");
    let out = Command::new(forkvm_bin())
        .args(["run", "--timeout", "1"])
        .arg(&prog)
        .arg(free_port().to_string())
        .output()
        .expect("run forkvm");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(124), "{err}");
    assert!(err.contains("serve it with `forkvm serve`"), "{err}");
}

/// A program that ends while starting is told so, with its status.
#[test]
fn a_server_that_ends_while_starting_says_so() {
    let out = Command::new(forkvm_bin())
        .args(["serve", "/bin/sh", "-c", "/bin/true; exit 3"])
        .output()
        .expect("run forkvm");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("ended before it was ready (status 3)"),
        "{err}"
    );
}

/// A pre-fork server: the first process listens and forks the worker that
/// accepts, then watches it in a select of its own (gunicorn's arbiter) or
/// sleeps (ended for the hand-over: the sleep never came back to the run
/// loop), or forks and exits first (a daemon: its child forks the worker). The worker
/// waiting for its first connection is what every request forks, with the
/// pid and parent pid it saved (forkvm refused fork while starting), and
/// with the pipe its parent holds still open (the start-up's processes end
/// only after the master is frozen). The arbiter holds the listening socket
/// too, but its wait is not for it.
#[test]
fn a_pre_fork_servers_worker_is_served() {
    let prog = guest("prefork.musl");
    let nport = free_port();
    let _ns = native(&prog, &[&nport.to_string(), "arbiter"], nport);
    // Natively the count goes on (the start-up's probe was a connection).
    let native_text = get(nport, "/").text();
    assert!(
        native_text.ends_with(" same_pid=1 same_parent=1 pipe_open=1\n"),
        "{native_text}"
    );
    let want = "count=1 same_pid=1 same_parent=1 pipe_open=1\n";
    for mode in ["arbiter", "sleeper", "daemon"] {
        let port = free_port();
        let fs = forkvm(&prog, &[&port.to_string(), mode], &[], port);
        for _ in 0..3 {
            let got = get(port, "/");
            assert_eq!(got.text(), want, "{mode}\n{}", fs.output());
        }
        assert!(fs.output().contains("is the server"), "{}", fs.output());
        drop(fs);
        let port = free_port();
        let fs = forkvm(
            &prog,
            &[&port.to_string(), mode],
            &["--ephemeral", "false"],
            port,
        );
        for n in 1..=3 {
            let got = get(port, "/");
            let kept = format!("count={n} same_pid=1 same_parent=1 pipe_open=1\n");
            assert_eq!(got.text(), kept, "{mode}\n{}", fs.output());
        }
    }
}

/// nginx as it runs by default: a daemon whose master process forks the
/// worker (`master_process off` was needed). Its master sets signal-driven
/// I/O on the channel to the worker (FIOASYNC, F_SETOWN), which forkvm
/// refused, so the master gave up the worker.
#[test]
fn nginx_with_its_default_master_process_and_daemon() {
    let nginx = "/usr/sbin/nginx";
    if !installed(nginx) {
        return;
    }
    let root = common::scratch_dir("servers-nginx-master-root");
    std::fs::write(root.join("index.html"), "hello from nginx\n").expect("index.html");
    let port = free_port();
    let dir = common::scratch_dir(&format!("servers-nginx-master-{port}"));
    let conf = nginx_conf(&dir, &root, port);
    let text = std::fs::read_to_string(&conf).expect("nginx.conf");
    let text = text.replace("daemon off;\nmaster_process off;\n", "");
    std::fs::write(&conf, text).expect("nginx.conf");
    let fs = nginx_in_forkvm(&conf, &dir, &root, &[], port);
    for _ in 0..3 {
        let got = get(port, "/");
        assert_eq!(got.status, 200, "{}", fs.output());
        assert_eq!(got.text(), "hello from nginx\n", "{}", fs.output());
    }
    assert!(fs.output().contains("is the server"), "{}", fs.output());
    wrk(port, "/");
}

/// Debian's gunicorn (a pre-fork WSGI server: an arbiter and a sync
/// worker) answers as it does natively, module state reset per request.
#[test]
fn gunicorn_serves_a_wsgi_app() {
    let gunicorn = "/usr/bin/gunicorn";
    if !installed(gunicorn) {
        return;
    }
    let dir = common::scratch_dir("servers-gunicorn-app");
    std::fs::write(
        dir.join("app.py"),
        "count = 0\n\
         def app(environ, start_response):\n\
         \x20   global count\n\
         \x20   count += 1\n\
         \x20   body = ('%s %s\\n' % (environ['REQUEST_METHOD'], environ['PATH_INFO'])).encode()\n\
         \x20   body += environ['wsgi.input'].read()\n\
         \x20   if environ['PATH_INFO'] == '/count':\n\
         \x20       body = b'count=%d\\n' % count\n\
         \x20   start_response('200 OK', [('Content-Type', 'text/plain'), ('X-App', 'wsgi')])\n\
         \x20   return [body]\n",
    )
    .expect("app.py");
    let dir_s = dir.to_string_lossy().into_owned();
    let run = |port: u16, forkvm_flags: Option<&[&str]>| {
        let bind = format!("127.0.0.1:{port}");
        // Its heartbeat file in the scratch dir: the guest's /tmp is the host's,
        // read-only, when the tree is under it (a clone in /tmp), and gunicorn
        // found no usable temporary directory.
        let args = [
            "--chdir",
            &dir_s,
            "--worker-tmp-dir",
            &dir_s,
            "-b",
            &bind,
            "app:app",
        ];
        match forkvm_flags {
            None => native(Path::new(gunicorn), &args, port),
            Some(flags) => forkvm(Path::new(gunicorn), &args, flags, port),
        }
    };
    let nport = free_port();
    let _ns = run(nport, None);
    let port = free_port();
    let fs = run(port, Some(&["--allow-write", &dir_s]));
    for (method, path, body) in [("GET", "/a", &b""[..]), ("POST", "/b", &b"posted"[..])] {
        let want = call(nport, method, path, body);
        let got = call(port, method, path, body);
        assert_eq!(got.status, want.status, "{method} {path}\n{}", fs.output());
        assert_eq!(got.body, want.body, "{method} {path}\n{}", fs.output());
        assert_eq!(got.header("X-App"), want.header("X-App"));
    }
    for _ in 0..2 {
        assert_eq!(get(port, "/count").text(), "count=1\n", "{}", fs.output());
    }
}

#[test]
fn a_silent_server_is_502_and_a_spinning_one_504() {
    let prog = guest("epoll_server.musl");
    let port = free_port();
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["serve", "--concurrency", "1", "--request-timeout", "1"])
        .arg(&prog)
        .arg(port.to_string());
    let fs = Server::start(cmd, port, "forkvm");
    let silent = get(port, "/silent");
    assert_eq!(silent.status, 502, "{}", fs.output());
    let spin = get(port, "/spin");
    assert_eq!(spin.status, 504, "{}", fs.output());
    assert_eq!(get(port, "/count").text(), "count=1\n", "{}", fs.output());
    let out = fs.output();
    assert!(out.contains("the server waits without answering"), "{out}");
}

/// redis-server as it starts by default, bound to both `0.0.0.0` and `[::]` on one
/// port, served without `--listen`: the host listens on 127.0.0.1 and ::1 (one
/// listener for both was "Address already in use"), and with `--ephemeral false` the
/// database lives on from one connection to the next instead of being reset.
#[test]
fn redis_on_both_families_keeps_its_data_with_ephemeral_false() {
    let redis = "/usr/bin/redis-server";
    if !installed(redis) || !installed("/usr/bin/redis-cli") {
        return;
    }
    let port = free_port();
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["serve", "--reset", "per-connection", "--ephemeral", "false"])
        .args(["--concurrency", "1", "--request-timeout", "20", redis])
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ]);
    let fs = Server::start(cmd, port, "forkvm");
    assert_eq!(
        redis_cli_on("127.0.0.1", port, "SET a 1\n"),
        "OK\n",
        "{}",
        fs.output()
    );
    assert_eq!(
        redis_cli_on("::1", port, "INCR a\n"),
        "2\n",
        "{}",
        fs.output()
    );
    assert_eq!(
        redis_cli(port, "INCR a\nDBSIZE\n"),
        "3\n1\n",
        "{}",
        fs.output()
    );
}

/// `redis-cli -p PORT` with `commands` on stdin (one connection): its output.
fn redis_cli(port: u16, commands: &str) -> String {
    redis_cli_on("127.0.0.1", port, commands)
}

/// The same, to the server on `host`.
fn redis_cli_on(host: &str, port: u16, commands: &str) -> String {
    let mut child = Command::new("/usr/bin/redis-cli")
        .args(["-h", host, "-p", &port.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn redis-cli");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(commands.as_bytes())
        .expect("write commands");
    let out = child.wait_with_output().expect("redis-cli");
    assert!(out.status.success(), "redis-cli failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An unmodified redis-server (threads, epoll, its own protocol) served by name with
/// `--reset per-connection`: the same answers as natively within a connection, a fresh
/// database on every new one, and a clean redis-benchmark run.
#[test]
fn redis_is_reset_when_each_connection_closes() {
    let redis = "/usr/bin/redis-server";
    if !installed(redis) || !installed("/usr/bin/redis-cli") {
        return;
    }
    let args = |port: u16| {
        let p = port.to_string();
        [
            "--port",
            &p,
            "--save",
            "",
            "--appendonly",
            "no",
            "--bind",
            "127.0.0.1",
        ]
        .map(str::to_string)
    };
    let nport = free_port();
    let ndir = common::scratch_dir(&format!("servers-redis-native-{nport}"));
    let mut cmd = Command::new(redis);
    cmd.args(args(nport)).arg("--dir").arg(&ndir);
    let _ns = Server::start(cmd, nport, "native");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["serve", "--reset", "per-connection", "--concurrency", "2"])
        .args([
            "--listen",
            &listen,
            "--request-timeout",
            "20",
            "redis-server",
        ])
        .args(args(6379));
    let fs = Server::start(cmd, port, "forkvm");
    let session = "SET a 1\nINCR a\nRPUSH l x y z\nLRANGE l 0 -1\nHSET h f v g w\n\
                   HGETALL h\nEVAL \"return redis.call('incr','a')\" 0\nDBSIZE\nGET missing\n";
    let want = redis_cli(nport, session);
    assert!(want.contains("\n3\n"), "{want}");
    assert_eq!(redis_cli(port, session), want, "{}", fs.output());
    // Natively the database lives on; here each connection starts from the master's.
    assert_eq!(redis_cli(nport, "INCR a\n"), "4\n");
    assert_eq!(redis_cli(port, "INCR a\n"), "1\n", "{}", fs.output());
    let bench = Command::new("/usr/bin/redis-benchmark")
        .args(["-p", &port.to_string(), "-n", "300", "-c", "1", "-q"])
        .args(["-t", "set,get,incr,lpush"])
        .output()
        .expect("redis-benchmark");
    let text = String::from_utf8_lossy(&bench.stdout);
    assert!(bench.status.success(), "{text}\n{}", fs.output());
    for t in ["SET", "GET", "INCR", "LPUSH"] {
        assert!(text.contains(&format!("{t}: ")), "{t} missing:\n{text}");
    }
    assert!(!fs.output().contains("crashed"), "{}", fs.output());
}
