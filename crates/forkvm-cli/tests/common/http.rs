//! HTTP test clients and server processes for the serving tests: start a
//! server command and wait until it listens, send requests on fresh or
//! kept-alive connections, read responses, run a short wrk.

use super::{installed, scratch_dir};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const STARTUP: Duration = Duration::from_secs(60);
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// A loopback port for a test server: below the kernel's ephemeral range
/// (where clients' own ports come from) and never the same twice in one test
/// binary. A port from `bind(:0)` is free only until someone else asks, and
/// tests run in parallel: two servers were once handed one port, and a
/// test's first request reached the other one.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering::Relaxed};
    const FIRST: u16 = 20_000;
    const COUNT: u16 = 12_000;
    static NEXT: AtomicU16 = AtomicU16::new(u16::MAX);
    // Each binary starts somewhere else (a previous one's servers may linger).
    let start = (std::process::id() % u32::from(COUNT)) as u16;
    let _ = NEXT.compare_exchange(u16::MAX, start, Relaxed, Relaxed);
    for _ in 0..COUNT {
        let port = FIRST + NEXT.fetch_add(1, Relaxed) % COUNT;
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + COUNT);
}

/// A running server; killed on drop.
pub struct Server {
    pub child: Child,
    log: PathBuf,
}

impl Server {
    pub fn start(mut cmd: Command, port: u16, name: &str) -> Server {
        let dir = scratch_dir(&format!("servers-{name}-{port}"));
        let log = dir.join("log.txt");
        let f = std::fs::File::create(&log).expect("log file");
        cmd.stdin(Stdio::null())
            .stdout(f.try_clone().expect("clone log"))
            .stderr(f);
        let child = cmd.spawn().expect("spawn server");
        let mut s = Server { child, log };
        let t = Instant::now();
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            if let Ok(Some(st)) = s.child.try_wait() {
                panic!("{name} exited ({st}) before listening:\n{}", s.output());
            }
            assert!(
                t.elapsed() < STARTUP,
                "{name} never listened:\n{}",
                s.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    pub fn output(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }

    /// What the server has written once it says `what`, or after
    /// [`IO_TIMEOUT`] if it never does. The server logs through a background
    /// writer, so a line logged before an answer may reach the file after it.
    pub fn output_once_it_says(&self, what: &str) -> String {
        let t = Instant::now();
        loop {
            let out = self.output();
            if out.contains(what) || t.elapsed() > IO_TIMEOUT {
                return out;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    /// The status line's reason phrase.
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one response (Content-Length framed, or up to EOF) from `s`, keeping extra bytes in `buf`.
pub fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Resp {
    read_answer(s, buf, false)
}

/// Reads one response to a HEAD request (no body, whatever its length says).
pub fn read_head_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Resp {
    read_answer(s, buf, true)
}

fn read_answer(s: &mut TcpStream, buf: &mut Vec<u8>, head_only: bool) -> Resp {
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk).expect("read response head");
        assert!(n > 0, "connection closed before a response: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut status_line = lines.next().unwrap_or("").splitn(3, ' ');
    let status: u16 = status_line
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line in {head:?}"));
    let reason = status_line.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse::<usize>().expect("content-length"));
    buf.drain(..head_end);
    let len = if head_only { Some(0) } else { len };
    match len {
        Some(n) => {
            while buf.len() < n {
                let k = s.read(&mut chunk).expect("read body");
                assert!(k > 0, "closed in the body");
                buf.extend_from_slice(&chunk[..k]);
            }
        }
        None => loop {
            let k = s.read(&mut chunk).expect("read body to EOF");
            if k == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..k]);
        },
    }
    let n = len.unwrap_or(buf.len());
    let mut body: Vec<u8> = buf.drain(..n).collect();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    if chunked && len.is_none() {
        body = dechunk(&body);
    }
    Resp {
        status,
        reason,
        headers,
        body,
    }
}

/// A whole chunked body (read to EOF) decoded.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&b[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size_text:?}"));
        b = &b[eol + 2..];
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
    out
}

pub fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s
}

pub fn request(method: &str, path: &str, body: &[u8], close: bool) -> Vec<u8> {
    let mut r = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n{}\r\n",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// One request on a fresh connection.
pub fn call(port: u16, method: &str, path: &str, body: &[u8]) -> Resp {
    let mut s = connect(port);
    s.write_all(&request(method, path, body, true))
        .expect("send");
    read_response(&mut s, &mut Vec::new())
}

/// A HEAD request on a fresh connection.
pub fn head(port: u16, path: &str) -> Resp {
    let mut s = connect(port);
    s.write_all(&request("HEAD", path, b"", true))
        .expect("send");
    read_head_response(&mut s, &mut Vec::new())
}

pub fn get(port: u16, path: &str) -> Resp {
    call(port, "GET", path, b"")
}

/// Two requests on one kept-alive connection (sent one after the other), then two pipelined.
pub fn keep_alive(port: u16, a: &str, b: &str) -> Vec<Resp> {
    let mut s = connect(port);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    s.write_all(&request("GET", a, b"", false)).expect("send 1");
    out.push(read_response(&mut s, &mut buf));
    s.write_all(&request("GET", b, b"", false)).expect("send 2");
    out.push(read_response(&mut s, &mut buf));
    let mut both = request("GET", a, b"", false);
    both.extend_from_slice(&request("GET", b, b"", true));
    s.write_all(&both).expect("send pipelined");
    out.push(read_response(&mut s, &mut buf));
    out.push(read_response(&mut s, &mut buf));
    out
}

/// A short wrk run (1 thread, 2 connections, 1 s): requests were made and none failed.
pub fn wrk(port: u16, path: &str) {
    if !installed("/usr/bin/wrk") {
        return;
    }
    let out = Command::new("wrk")
        .args(["-t1", "-c2", "-d1s"])
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("run wrk");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "wrk failed:\n{text}");
    assert!(
        !text.contains("Socket errors") && !text.contains("Non-2xx"),
        "wrk saw errors:\n{text}"
    );
    let n: u64 = text
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(n > 0, "wrk made no request:\n{text}");
}
