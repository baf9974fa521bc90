//! `forkvm serve --gdb ADDR`: a request that stops (forkvm_breakpoint(), a
//! crash) waits for real gdb (batch mode) while the other worker serves;
//! breakpoints stay in the debugged fork only; hostile bytes on the gdb
//! port never hurt the server. Every wait is bounded; nothing asserts on time.

mod common;

use common::http::free_port;

use common::{run_cmd, scratch_dir, Run, WATCHDOG};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

/// tests/guests/serve/debug_target.c built static, -O0 -g.
fn target() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = scratch_dir("gdb_serve_target");
            let out = dir.join("debug_target");
            let root = common::repo_root();
            let mut c = Command::new("gcc");
            c.args(["-static", "-O0", "-g", "-fno-omit-frame-pointer", "-I"])
                .arg(root.join("guest/include"))
                .arg("-o")
                .arg(&out)
                .arg(root.join("tests/guests/serve/debug_target.c"));
            let run = run_cmd(c, b"", WATCHDOG);
            assert_eq!(run.status, 0, "cannot build the guest\n{}", run.describe());
            out
        })
        .clone()
}

/// A `forkvm serve --gdb 127.0.0.1:0` with two workers, killed on drop.
struct Server {
    child: Child,
    port: u16,
    /// Where gdb connects.
    gdb: String,
    stderr: mpsc::Receiver<String>,
    /// stderr lines received so far.
    log: Vec<String>,
}

impl Server {
    fn start(timeout_secs: &str) -> Server {
        let port = free_port();
        let mut child = Command::new(common::forkvm_bin())
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--gdb", "127.0.0.1:0", "--concurrency", "2"])
            .args(["--request-timeout", timeout_secs])
            .arg(target())
            .env_remove("FORKVM_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn forkvm serve");
        let err = BufReader::new(child.stderr.take().expect("stderr"));
        let (tx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            for line in err.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut s = Server {
            child,
            port,
            gdb: String::new(),
            stderr,
            log: Vec::new(),
        };
        let line = s.wait_log("waits for gdb on ");
        s.gdb = line
            .split_whitespace()
            .find(|w| w.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("no gdb address in {line:?}"))
            .to_string();
        // Ready once it accepts connections (bounded).
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < WATCHDOG, "serve never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    /// Waits (bounded) for a stderr line containing `needle`.
    fn wait_log(&mut self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.log.iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            let left = WATCHDOG.saturating_sub(start.elapsed());
            match self.stderr.recv_timeout(left) {
                Ok(l) => self.log.push(l),
                Err(_) => panic!(
                    "forkvm serve never said {needle:?}; it said:\n{}",
                    self.log.join("\n")
                ),
            }
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `curl` of `url`: "STATUS BODY" (bounded).
fn curl(url: &str) -> String {
    let mut c = Command::new("curl");
    c.args(["-s", "-m", "100", "-w", " %{http_code}", url]);
    let run: Run = run_cmd(c, b"", WATCHDOG);
    run.stdout_str().replace('\n', "").trim().to_string()
}

/// The same in a thread: its answer arrives on the channel.
fn curl_async(url: String) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(curl(&url));
    });
    rx
}

/// Real gdb in batch mode on the guest with `commands` (after `target remote`),
/// its output collected in a thread.
fn gdb(program: &Path, addr: &str, commands: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut c = Command::new("gdb");
    c.args(["-q", "-batch", "-nx", "-ex", "set pagination off"])
        .args(["-ex", "set confirm off"])
        .args(["-ex", &format!("target remote {addr}")]);
    for cmd in commands {
        c.args(["-ex", cmd]);
    }
    let mut child = c
        .arg(program)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gdb");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        let mut e = String::new();
        let _ = err.read_to_string(&mut e);
        let _ = tx.send(format!("{text}\n--- gdb stderr ---\n{e}"));
    });
    (child, rx)
}

fn assert_has(text: &str, needle: &str, what: &str) {
    assert!(
        text.contains(needle),
        "{what}: expected {needle:?} in gdb's output:\n{text}"
    );
}

fn line_of(marker: &str) -> usize {
    let src =
        std::fs::read_to_string(common::repo_root().join("tests/guests/serve/debug_target.c"))
            .expect("read debug_target.c");
    1 + src
        .lines()
        .position(|l| l.contains(marker))
        .expect("marked line")
}

#[test]
fn a_request_stops_at_forkvm_breakpoint_for_gdb_while_others_are_served() {
    // A 1 s time limit, and gdb keeps the request stopped longer than that.
    let mut server = Server::start("1");
    let first = curl_async(server.url("/stop"));
    server.wait_log("waiting for gdb on");
    let other = server.url("/other");
    let (mut gdb_child, gdb_out) = gdb(
        &target(),
        &server.gdb,
        &[
            "bt",
            "frame 1",
            "print local_answer",
            // Planted in this fork only: the other worker's request runs
            // square() too and must not stop.
            "break square",
            "shell sleep 2",
            &format!("shell curl -s -m 60 {other}"),
            "continue",
            "bt",
            // Request 1 is answered; gdb waits for this worker's next stop:
            // its reset kept the breakpoint.
            "continue",
            "print x",
            "detach",
        ],
    );
    let answer = first
        .recv_timeout(WATCHDOG)
        .expect("request 1 never answered");
    assert_eq!(answer, "n=43 200", "request 1 (stopped past its 1 s limit)");
    // Requests until one lands on the debugged worker, stops at the
    // planted breakpoint, and gdb detaches (the pool is LIFO: the first, unless
    // the reset was still under way).
    let mut gdb_done = None;
    for _ in 0..20 {
        assert_eq!(curl(&server.url("/again")), "n=49 200");
        if let Some(status) = gdb_child.try_wait().expect("gdb status") {
            gdb_done = Some(status);
            break;
        }
    }
    if gdb_done.is_none() {
        let _ = gdb_child.kill();
    }
    let out = gdb_out.recv_timeout(WATCHDOG).expect("gdb output");
    assert!(
        gdb_done.is_some(),
        "the debugged worker never stopped again:\n{out}"
    );
    let bp_line = format!("debug_target.c:{}", line_of("forkvm_breakpoint();"));
    assert_has(&out, "stop_here (depth=7) at", "backtrace");
    assert_has(&out, &bp_line, "the breakpoint's line");
    assert_has(&out, "in handler (r=", "backtrace to the handler");
    assert_has(&out, "$1 = 42", "a local");
    assert_has(&out, "n=49", "the other worker answered meanwhile");
    assert_has(&out, "Breakpoint 1, square (x=1)", "gdb's breakpoint");
    assert_has(&out, "$2 = 7", "the breakpoint after the reset");
    assert_has(&out, "detached", "detach");
    // The other worker answered before gdb's breakpoint was hit, and the
    // master's copy never had it: no request after detach stops.
    let curl_at = out.find("n=49").unwrap_or(usize::MAX);
    let bp_at = out.find("Breakpoint 1, square").unwrap_or(0);
    assert!(curl_at < bp_at, "{out}");
    for _ in 0..4 {
        assert_eq!(curl(&server.url("/after")), "n=49 200");
    }
    assert!(server.child.try_wait().expect("status").is_none());
}

#[test]
fn a_crashing_request_stops_at_the_fault_for_gdb() {
    let mut server = Server::start("1");
    let first = curl_async(server.url("/crash"));
    server.wait_log("waiting for gdb on");
    server.wait_log("the request crashed (SIGSEGV)");
    let (mut gdb_child, gdb_out) = gdb(&target(), &server.gdb, &["bt", "detach"]);
    let answer = first.recv_timeout(WATCHDOG).expect("never answered");
    assert!(answer.ends_with(" 500"), "{answer}");
    let _ = gdb_child.wait();
    let out = gdb_out.recv_timeout(WATCHDOG).expect("gdb output");
    let fault = format!("debug_target.c:{}", line_of("*p = 1;"));
    assert_has(&out, "in handler (r=", "the faulting frame");
    assert_has(&out, &fault, "the faulting line");
    // The worker was reset and serves again.
    assert_eq!(curl(&server.url("/x")), "n=49 200");
}

/// A packet with its checksum.
fn packet(body: &[u8]) -> Vec<u8> {
    let sum = body.iter().fold(0u8, |s, b| s.wrapping_add(*b));
    let mut p = vec![b'$'];
    p.extend_from_slice(body);
    p.extend_from_slice(format!("#{sum:02x}").as_bytes());
    p
}

/// xorshift: deterministic "random" bytes.
fn noise(seed: &mut u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            *seed as u8
        })
        .collect()
}

#[test]
fn hostile_gdb_packets_never_crash_the_server() {
    let mut server = Server::start("1");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..4 {
        let first = curl_async(server.url("/stop"));
        let mut conn = TcpStream::connect(&server.gdb).expect("connect");
        let mut bytes = Vec::new();
        match round {
            // Raw noise.
            0 => bytes.extend(noise(&mut seed, 64 << 10)),
            // Framed packets with random bodies (no kill, detach or resume).
            1 => {
                for _ in 0..2000 {
                    let len = (noise(&mut seed, 1)[0] % 48) as usize;
                    let mut body = noise(&mut seed, len);
                    body.retain(|b| !matches!(b, b'$' | b'#' | b'}' | b'*'));
                    if body
                        .first()
                        .is_some_and(|b| matches!(b, b'k' | b'D' | b'v' | b'c' | b's' | b'R'))
                    {
                        continue;
                    }
                    bytes.extend(packet(&body));
                }
            }
            // Bad checksums and a packet that never ends.
            2 => {
                for _ in 0..500 {
                    bytes.extend(b"$m400000,10#00");
                    bytes.extend(b"$g#zz");
                }
                bytes.push(b'$');
                bytes.extend(vec![b'7'; 200_000]);
            }
            // Plausible packets with hostile lengths and addresses.
            _ => {
                for body in [
                    &b"m0,ffffffffffffffff"[..],
                    b"mffffffffffffffff,ffffffffffffffff",
                    b"m400000,7fffffff",
                    b"m10,10",
                    b"M400000,ffffffff:00",
                    b"M0,1:cc",
                    b"X0,10:abc",
                    b"Z0,0,1",
                    b"Z0,ffffffffffffffff,1",
                    b"Z2,400000,8",
                    b"z0,401000,1",
                    b"Hgffffffff",
                    b"p9999",
                    b"P99=00",
                    b"G00",
                    b"qXfer:features:read:target.xml:ffffffff,ffffffff",
                    b"qXfer:auxv:read::0,ffffffff",
                ] {
                    bytes.extend(packet(body));
                }
            }
        }
        let _ = conn.write_all(&bytes);
        drop(conn);
        // The broken session ends as a detach: the request runs on.
        let answer = first.recv_timeout(WATCHDOG).expect("never answered");
        assert!(
            answer == "n=43 200" || answer.ends_with(" 500"),
            "round {round}: {answer}"
        );
        assert!(
            server.child.try_wait().expect("status").is_none(),
            "round {round}: the server died"
        );
        assert_eq!(curl(&server.url("/x")), "n=49 200", "round {round}");
    }
    assert!(
        !server.log.iter().any(|l| l.contains("panicked")),
        "{}",
        server.log.join("\n")
    );
}
