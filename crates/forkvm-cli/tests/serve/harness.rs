//! The harness of the `forkvm serve` tests: servers started on free ports
//! and killed on drop, curl and raw HTTP/1.1 clients, and request payloads.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::common::{forkvm_bin, repo_root};

/// How long a server may take to start accepting connections.
pub(crate) const STARTUP: Duration = Duration::from_secs(60);
/// Upper bound for any single HTTP exchange (curl --max-time, socket timeouts).
pub(crate) const EXCHANGE_SECS: u64 = 60;

// ---------------------------------------------------------------------------- setup

/// Runs `examples/build.sh` once per test process.
pub(crate) fn build_examples() {
    super::common::run_build_script("examples/build.sh");
}

/// A built program in `examples/out`, e.g. `example("hello")`, `example("tests/echo")`.
pub(crate) fn example(name: &str) -> String {
    build_examples();
    let p = repo_root().join("examples/out").join(name);
    assert!(
        p.is_file(),
        "{} is missing; run examples/build.sh",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

/// A fresh scratch directory for one test.
pub(crate) fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("forkvm-serve-tests")
        .join(format!(
            "{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

pub(crate) use crate::common::http::free_port;

pub(crate) fn tail(path: &Path) -> String {
    let s = std::fs::read(path).unwrap_or_default();
    let s = String::from_utf8_lossy(&s);
    const MAX: usize = 4000;
    if s.len() <= MAX {
        return s.into_owned();
    }
    let mut start = s.len() - MAX;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("[...]\n{}", &s[start..])
}

/// Where a program is on the PATH (or in /usr/sbin, where Debian puts nginx).
pub(crate) fn which(prog: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
}

// --------------------------------------------------------------------------- server

/// A running `forkvm serve` (or native example server), killed on drop.
pub(crate) struct Server {
    pub(crate) child: Option<Child>,
    pub(crate) port: u16,
    pub(crate) admin_port: Option<u16>,
    pub(crate) dir: PathBuf,
    pub(crate) command: String,
}

impl Server {
    /// `forkvm serve --listen 127.0.0.1:PORT FLAGS... [PROGRAM ARGS...]`.
    pub(crate) fn start(name: &str, flags: &[&str], program: &[&str]) -> Server {
        Self::launch(name, flags, program, false)
    }

    /// Like [`Server::start`], with `--admin 127.0.0.1:ADMIN_PORT`.
    pub(crate) fn start_with_admin(name: &str, flags: &[&str], program: &[&str]) -> Server {
        Self::launch(name, flags, program, true)
    }

    pub(crate) fn launch(name: &str, flags: &[&str], program: &[&str], admin: bool) -> Server {
        let port = free_port();
        let admin_port = admin.then(free_port);
        let mut cmd = Command::new(forkvm_bin());
        cmd.arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"));
        if let Some(a) = admin_port {
            cmd.arg("--admin").arg(format!("127.0.0.1:{a}"));
        }
        cmd.args(flags).args(program).env_remove("RUST_LOG");
        Self::spawn(name, cmd, port, admin_port)
    }

    /// A native example server (`examples/out/NAME.native`) on a free port.
    pub(crate) fn native(name: &str, program: &[&str]) -> Server {
        let port = free_port();
        let mut cmd = Command::new(example(&format!("{}.native", program[0])));
        cmd.args(&program[1..])
            .env("FORKVM_NATIVE_LISTEN", format!("127.0.0.1:{port}"));
        Self::spawn(name, cmd, port, None)
    }

    pub(crate) fn spawn(
        name: &str,
        mut cmd: Command,
        port: u16,
        admin_port: Option<u16>,
    ) -> Server {
        let dir = scratch(name);
        let command = format!(
            "{} {}",
            cmd.get_program().to_string_lossy(),
            cmd.get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let stdout = File::create(dir.join("stdout.log")).expect("create stdout.log");
        let stderr = File::create(dir.join("stderr.log")).expect("create stderr.log");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr));
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
        let mut s = Server {
            child: Some(child),
            port,
            admin_port,
            dir,
            command,
        };
        s.wait_accepting(port);
        if let Some(a) = admin_port {
            s.wait_accepting(a);
        }
        s
    }

    /// Waits until `port` accepts connections; panics if the server exits or takes too long.
    pub(crate) fn wait_accepting(&mut self, port: u16) {
        let deadline = Instant::now() + STARTUP;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(st)) = child.try_wait() {
                    self.child = None;
                    panic!(
                        "the server exited ({st}) before accepting connections\n{}",
                        self.describe()
                    );
                }
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "the server did not accept connections on port {port} within {STARTUP:?}\n{}",
                    self.describe()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(Child::id)
            .expect("the server is running")
    }

    pub(crate) fn stdout_log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.dir.join("stdout.log")).unwrap_or_default())
            .into_owned()
    }

    pub(crate) fn stderr_log(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.dir.join("stderr.log")).unwrap_or_default())
            .into_owned()
    }

    /// Waits until `seen(stdout, stderr)` holds, failing with `what` after
    /// `limit` (a bound on a hang, not a timing assertion).
    pub(crate) fn wait_for_output(
        &self,
        limit: Duration,
        what: &str,
        seen: impl Fn(&str, &str) -> bool,
    ) {
        let deadline = std::time::Instant::now() + limit;
        while !seen(&self.stdout_log(), &self.stderr_log()) {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}\n{}",
                self.describe()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The command and the tails of its output, for assertion messages.
    pub(crate) fn describe(&self) -> String {
        format!(
            "server: {}\n--- server stdout:\n{}\n--- server stderr:\n{}\n---",
            self.command,
            tail(&self.dir.join("stdout.log")),
            tail(&self.dir.join("stderr.log"))
        )
    }

    /// `curl` GET of `path`.
    pub(crate) fn get(&self, path: &str) -> Reply {
        curl(&[&self.url(path)])
    }

    /// Asserts a 200 with exactly `body`.
    pub(crate) fn expect(&self, path: &str, body: &str) {
        let r = self.get(path);
        assert!(
            r.status == 200 && r.body == body.as_bytes(),
            "GET {path}: expected 200 {body:?}\n{}\n{}",
            r.describe(),
            self.describe()
        );
    }

    /// Sends SIGTERM and waits (at most `limit`) for the exit status.
    pub(crate) fn terminate(&mut self, limit: Duration) -> ExitStatus {
        let pid = self.pid();
        let st = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().expect("the server is running");
        loop {
            if let Some(st) = child.try_wait().expect("wait for the server") {
                self.child = None;
                return st;
            }
            if Instant::now() > deadline {
                panic!(
                    "the server did not exit within {limit:?} of SIGTERM\n{}",
                    self.describe()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

// ------------------------------------------------------------------------------ curl

/// One HTTP answer as curl saw it.
#[derive(Debug)]
pub(crate) struct Reply {
    /// 0 when curl got no answer.
    pub(crate) status: u16,
    /// The final header block's fields (names as sent).
    pub(crate) headers: Vec<(String, String)>,
    /// The raw final header block.
    pub(crate) head: String,
    pub(crate) body: Vec<u8>,
    pub(crate) curl_status: Option<i32>,
    pub(crate) curl_stderr: String,
    pub(crate) elapsed: Duration,
}

impl Reply {
    /// The value of header `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub(crate) fn describe(&self) -> String {
        let body = if self.body.len() > 2000 {
            format!(
                "[{} bytes] {}...",
                self.body.len(),
                String::from_utf8_lossy(&self.body[..2000])
            )
        } else {
            self.text()
        };
        format!(
            "curl exit {:?} after {:?}; status {}\n--- head:\n{}\n--- body:\n{}\n--- curl stderr:\n{}",
            self.curl_status, self.elapsed, self.status, self.head, body, self.curl_stderr
        )
    }
}

/// Splits curl `-i` output into the final header block and the body (skipping 1xx blocks).
pub(crate) fn parse_curl_output(out: &[u8]) -> (u16, String, Vec<(String, String)>, Vec<u8>) {
    let mut rest = out;
    loop {
        let Some(end) = find(rest, b"\r\n\r\n") else {
            return (
                0,
                String::from_utf8_lossy(rest).into_owned(),
                Vec::new(),
                Vec::new(),
            );
        };
        let head = String::from_utf8_lossy(&rest[..end]).into_owned();
        let body = &rest[end + 4..];
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .unwrap_or(0);
        if (100..200).contains(&status) && body.starts_with(b"HTTP/") {
            rest = body;
            continue;
        }
        let headers = head
            .lines()
            .skip(1)
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((k.trim().to_string(), v.trim().to_string()))
            })
            .collect();
        return (status, head, headers, body.to_vec());
    }
}

pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Runs `curl -sS -i --max-time 60 ARGS...` (one URL) and parses the answer.
pub(crate) fn curl(args: &[&str]) -> Reply {
    let start = Instant::now();
    let out = Command::new("curl")
        .args(["-sS", "-i", "--max-time", &EXCHANGE_SECS.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run curl (is it installed?): {e}"));
    let (status, head, headers, body) = parse_curl_output(&out.stdout);
    Reply {
        status,
        headers,
        head,
        body,
        curl_status: out.status.code(),
        curl_stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
    }
}

// ------------------------------------------------------------------------- raw HTTP

/// One response read off a raw connection.
#[derive(Debug)]
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: Vec<u8>,
}

pub(crate) fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect to the server");
    s.set_read_timeout(Some(Duration::from_secs(EXCHANGE_SECS)))
        .expect("set_read_timeout");
    s.set_write_timeout(Some(Duration::from_secs(EXCHANGE_SECS)))
        .expect("set_write_timeout");
    s
}

/// A reader of HTTP/1.1 responses from a stream, keeping bytes past the current one.
pub(crate) struct ResponseReader {
    pub(crate) stream: TcpStream,
    pub(crate) buf: Vec<u8>,
}

impl ResponseReader {
    pub(crate) fn new(stream: TcpStream) -> Self {
        ResponseReader {
            stream,
            buf: Vec::new(),
        }
    }

    /// Reads more bytes; false at EOF.
    pub(crate) fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 65536];
        match self.stream.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e) => panic!(
                "reading from the server: {e} (got so far: {:?})",
                String::from_utf8_lossy(&self.buf)
            ),
        }
    }

    pub(crate) fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            if !self.fill() {
                panic!(
                    "connection closed inside a response body (have {} of {n} bytes)",
                    self.buf.len()
                );
            }
        }
        self.buf.drain(..n).collect()
    }

    pub(crate) fn line(&mut self) -> String {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                let l = self.take(i + 2);
                return String::from_utf8_lossy(&l[..i]).into_owned();
            }
            if !self.fill() {
                panic!(
                    "connection closed inside a line: {:?}",
                    String::from_utf8_lossy(&self.buf)
                );
            }
        }
    }

    /// The next response (skipping 1xx), or None at a clean EOF.
    pub(crate) fn next(&mut self) -> Option<RawResponse> {
        loop {
            while self.buf.is_empty() {
                if !self.fill() {
                    return None;
                }
            }
            let status_line = self.line();
            let status = status_line
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
            let mut head = status_line.clone();
            let (mut length, mut chunked) = (None, false);
            loop {
                let l = self.line();
                if l.is_empty() {
                    break;
                }
                if let Some((k, v)) = l.split_once(':') {
                    let v = v.trim();
                    if k.eq_ignore_ascii_case("content-length") {
                        length = v.parse::<usize>().ok();
                    } else if k.eq_ignore_ascii_case("transfer-encoding") {
                        chunked = v.to_ascii_lowercase().contains("chunked");
                    }
                }
                head.push('\n');
                head.push_str(&l);
            }
            if (100..200).contains(&status) {
                continue;
            }
            let body = if chunked {
                let mut body = Vec::new();
                loop {
                    let size_line = self.line();
                    let hex = size_line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(hex, 16)
                        .unwrap_or_else(|_| panic!("bad chunk size {size_line:?}"));
                    if size == 0 {
                        while !self.line().is_empty() {}
                        break;
                    }
                    body.extend(self.take(size));
                    self.take(2);
                }
                body
            } else if let Some(n) = length {
                self.take(n)
            } else {
                // Delimited by the end of the connection.
                while self.fill() {}
                std::mem::take(&mut self.buf)
            };
            return Some(RawResponse { status, head, body });
        }
    }
}

/// Writes `request` on a new connection and reads `n` responses.
pub(crate) fn raw_exchange(port: u16, request: &[u8], n: usize) -> Vec<RawResponse> {
    let mut s = connect(port);
    s.write_all(request).expect("write the request");
    let mut r = ResponseReader::new(s);
    (0..n)
        .map(|i| {
            r.next().unwrap_or_else(|| {
                panic!("the server closed the connection before response {}", i + 1)
            })
        })
        .collect()
}

// --------------------------------------------------------------------------- helpers

/// FNV-1a 64, as tests/guests/serve/echo.c reports it.
pub(crate) fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

/// Deterministic pseudo-random bytes (includes CR, LF, NUL and "0\r\n\r\n"-like runs).
pub(crate) fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The body examples/c/counter.c sends for `?big=MIB`.
pub(crate) fn big_body(mib: usize) -> Vec<u8> {
    let pattern = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012";
    let mut out = Vec::with_capacity(mib << 20);
    for line in 0..(mib << 20) / 64 {
        out.extend_from_slice(format!("{:07} ", line % 10_000_000).as_bytes());
        out.extend_from_slice(pattern);
        out.push(b'\n');
    }
    out
}

pub(crate) fn write_file(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
    p
}

/// The value of `key=` in echo's "key=value" lines.
pub(crate) fn echo_field(body: &str, key: &str) -> Option<String> {
    body.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
}

pub(crate) fn assert_server_timing(r: &Reply, s: &Server) {
    let st = r.header("server-timing").unwrap_or_else(|| {
        panic!(
            "no Server-Timing header\n{}\n{}",
            r.describe(),
            s.describe()
        )
    });
    for part in ["queue;dur=", "reset;dur=", "run;dur="] {
        assert!(
            st.contains(part),
            "Server-Timing {st:?} lacks {part:?}\n{}",
            s.describe()
        );
    }
    // Every dur must be a non-negative number.
    for piece in st.split(',') {
        if let Some((_, d)) = piece.split_once("dur=") {
            let v: f64 = d
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("Server-Timing {st:?}: {d:?} is not a number"));
            assert!(v >= 0.0 && v.is_finite(), "Server-Timing {st:?}");
        }
    }
}
