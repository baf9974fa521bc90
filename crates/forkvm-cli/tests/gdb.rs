//! `forkvm run --gdb ADDR`: real gdb (batch mode) against a real guest built
//! with debug info (tests/guests/gdb_target.c), and hostile bytes against the
//! stub. Every wait is bounded; nothing asserts on time.

mod common;

use common::{run_cmd, scratch_dir, Run, WATCHDOG};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::{Duration, Instant};

/// tests/guests/gdb_target.c built static, -O0 -g, with frame pointers.
fn target() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| build_target("gdb_target", &["-static"]))
        .clone()
}

/// The same, dynamically linked (a PIE, as gcc builds by default here).
fn dynamic_target() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| build_target("gdb_target_dyn", &[]))
        .clone()
}

fn build_target(name: &str, flags: &[&str]) -> PathBuf {
    let dir = scratch_dir(name);
    let out = dir.join(name);
    let src = common::repo_root().join("tests/guests/gdb_target.c");
    let mut c = Command::new("gcc");
    c.args(flags)
        .args(["-O0", "-g", "-fno-omit-frame-pointer", "-pthread"])
        .arg("-o")
        .arg(&out)
        .arg(&src);
    let run = run_cmd(c, b"", WATCHDOG);
    assert_eq!(run.status, 0, "cannot build {name}\n{}", run.describe());
    out
}

/// A `forkvm run --gdb 127.0.0.1:0` waiting for gdb, and the address it listens on.
struct Stub {
    child: Child,
    addr: String,
    stdout: mpsc::Receiver<Vec<u8>>,
    stderr: mpsc::Receiver<Vec<u8>>,
    /// stdout received so far.
    out: Vec<u8>,
}

fn start(args: &[&str]) -> Stub {
    start_with(&[], args)
}

/// [`start`] with more forkvm options (`flags`, before the program).
fn start_with(flags: &[&str], args: &[&str]) -> Stub {
    start_program(&target(), flags, args)
}

/// [`start`] for any program.
fn start_program(program: &std::path::Path, flags: &[&str], args: &[&str]) -> Stub {
    let mut child = Command::new(common::forkvm_bin())
        .args(["run", "--gdb", "127.0.0.1:0"])
        .args(flags)
        .arg(program)
        .args(args)
        .env_remove("FORKVM_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn forkvm");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let out = child.stdout.take().expect("stdout");
    // The first stderr line names the address; the rest is collected.
    let (tx_addr, rx_addr) = mpsc::channel();
    let (tx_err, stderr) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = err.read_line(&mut line);
        let _ = tx_addr.send(line.clone());
        let mut rest = Vec::new();
        let _ = err.read_to_end(&mut rest);
        let mut all = line.into_bytes();
        all.extend(rest);
        let _ = tx_err.send(all);
    });
    // stdout arrives in chunks, so a test can wait for a line the program printed.
    let (tx_out, stdout) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = out;
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = out.read(&mut buf) {
            if tx_out.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let line = match rx_addr.recv_timeout(WATCHDOG) {
        Ok(l) => l,
        Err(_) => {
            let _ = child.kill();
            panic!("forkvm never said where it waits for gdb");
        }
    };
    let addr = line
        .split_whitespace()
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    Stub {
        child,
        addr,
        stdout,
        stderr,
        out: Vec::new(),
    }
}

impl Stub {
    /// Waits (bounded) until the program printed `needle`.
    fn wait_stdout(&mut self, needle: &str) {
        let start = Instant::now();
        while !String::from_utf8_lossy(&self.out).contains(needle) {
            let left = WATCHDOG.saturating_sub(start.elapsed());
            match self.stdout.recv_timeout(left) {
                Ok(chunk) => self.out.extend(chunk),
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("the program never printed {needle:?}");
                }
            }
        }
    }

    /// Waits (bounded) for forkvm to end; its status and output.
    fn finish(mut self) -> Run {
        let start = Instant::now();
        let status = loop {
            match self.child.try_wait().expect("wait") {
                Some(s) => break s,
                None if start.elapsed() > WATCHDOG => {
                    let _ = self.child.kill();
                    panic!("forkvm did not end after the gdb session");
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        use std::os::unix::process::ExitStatusExt;
        Run {
            status: status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
            signal: status.signal(),
            stdout: {
                let mut out = std::mem::take(&mut self.out);
                // The sender ends with the process; bounded all the same.
                while let Ok(chunk) = self.stdout.recv_timeout(WATCHDOG) {
                    out.extend(chunk);
                }
                out
            },
            stderr: self.stderr.recv_timeout(WATCHDOG).unwrap_or_default(),
            elapsed: start.elapsed(),
            command: "forkvm run --gdb".into(),
        }
    }
}

/// Runs gdb in batch mode against `stub` with these commands; its output.
fn gdb(stub: &Stub, commands: &[&str]) -> String {
    gdb_on(&target(), stub, commands)
}

/// [`gdb`] with the symbols of `program`.
fn gdb_on(program: &std::path::Path, stub: &Stub, commands: &[&str]) -> String {
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch"])
        .arg("-ex")
        .arg(format!("target remote {}", stub.addr));
    for c in commands {
        cmd.arg("-ex").arg(c);
    }
    cmd.arg(program);
    let run = run_cmd(cmd, b"", WATCHDOG);
    format!("{}{}", run.stdout_str(), run.stderr_str())
}

fn assert_has(text: &str, needle: &str, what: &str) {
    assert!(
        text.contains(needle),
        "{what}: expected {needle:?} in gdb's output:\n{text}"
    );
}

/// The value of `rip` in an `info registers rip` line.
fn rips(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("rip"))
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .collect()
}

#[test]
fn breakpoint_backtrace_stepi_and_continue() {
    let stub = start(&[]);
    let out = gdb(
        &stub,
        &[
            "break add",
            "continue",
            "bt",
            "info registers rip",
            "stepi",
            "info registers rip",
            "print greeting",
            "print counter",
            "info registers fs_base",
            "continue",
        ],
    );
    let run = stub.finish();
    assert_has(
        &out,
        "Breakpoint 1, add (a=41, b=41)",
        "breakpoint by function",
    );
    assert_has(&out, "#1 ", "backtrace depth");
    assert_has(&out, "in twice_plus_one (x=41)", "backtrace caller");
    assert_has(&out, "in main (argc=1", "backtrace main");
    assert_has(&out, "\"hello from the guest\"", "a string global");
    assert_has(&out, "$2 = 41", "an int global");
    assert_has(
        &out,
        "[Inferior 1 (process 1) exited normally]",
        "continue to exit",
    );
    let r = rips(&out);
    assert_eq!(r.len(), 2, "two rip lines expected:\n{out}");
    assert_ne!(r[0], r[1], "stepi did not move:\n{out}");
    assert!(r[1] > r[0] && r[1] - r[0] < 16, "stepi went astray:\n{out}");
    // glibc sets the thread pointer before main: fs_base is read, not zero.
    let fs = out
        .lines()
        .find_map(|l| l.strip_prefix("fs_base"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no fs_base line:\n{out}"));
    assert_ne!(fs, "0x0", "fs_base:\n{out}");
    assert_eq!(run.status, 0, "{}", run.describe());
    assert_eq!(run.stdout_str(), "result=83 counter=41\n");
}

#[test]
fn memory_write_changes_output_and_finish_returns() {
    let stub = start(&[]);
    let out = gdb(
        &stub,
        &[
            "break main",
            "continue",
            "set var counter = 5",
            "break add",
            "continue",
            "finish",
            "next",
            "continue",
        ],
    );
    let run = stub.finish();
    assert_has(&out, "Breakpoint 2, add (a=5, b=5)", "second breakpoint");
    assert_has(&out, "Value returned is $1 = 10", "finish");
    assert_eq!(run.status, 0, "{}\n{out}", run.describe());
    assert_eq!(run.stdout_str(), "result=11 counter=5\n", "{out}");
}

#[test]
fn sigsegv_stops_in_gdb_before_the_crash_report() {
    let stub = start(&["crash"]);
    let out = gdb(&stub, &["continue", "bt", "continue"]);
    let run = stub.finish();
    assert_has(&out, "Program received signal SIGSEGV", "fault stop");
    assert_has(&out, "crash () at ", "faulting function");
    let src = std::fs::read_to_string(common::repo_root().join("tests/guests/gdb_target.c"))
        .expect("read gdb_target.c");
    let line = 1 + src
        .lines()
        .position(|l| l.contains("/* the faulting line */"))
        .expect("marked line");
    assert_has(&out, &format!("gdb_target.c:{line}"), "faulting line");
    assert_has(&out, "*p = 1; /* the faulting line */", "faulting source");
    assert_has(&out, "in main (argc=2", "backtrace from the fault");
    assert_has(&out, "Program terminated with signal SIGSEGV", "the end");
    assert_eq!(run.status, 128 + 11, "{}", run.describe());
    assert!(
        run.stderr_str().contains("guest killed by SIGSEGV"),
        "crash report after gdb:\n{}",
        run.describe()
    );
}

#[test]
fn abort_stops_in_gdb_with_sigabrt() {
    let stub = start(&["abort"]);
    let out = gdb(&stub, &["continue", "bt", "continue"]);
    let run = stub.finish();
    assert_has(&out, "Program received signal SIGABRT", "signal stop");
    assert_has(&out, "in abort ()", "backtrace through abort");
    assert_has(&out, "in main (argc=2", "backtrace to main");
    assert_has(&out, "Program terminated with signal SIGABRT", "the end");
    assert_eq!(run.status, 128 + 6, "{}", run.describe());
}

#[test]
fn a_second_thread_is_listed_and_inspected() {
    let stub = start(&["thread"]);
    let out = gdb(
        &stub,
        &[
            "break worker_marker",
            "continue",
            "info threads",
            "thread apply all bt",
            "continue",
        ],
    );
    let run = stub.finish();
    assert_has(
        &out,
        "hit Breakpoint 1, worker_marker (id=7)",
        "breakpoint in a thread",
    );
    assert_has(&out, "in worker (arg=0x7)", "the thread's frames");
    assert_has(&out, "main (argc=2", "the other thread's frames");
    let listed = out
        .lines()
        .filter(|l| l.trim_start().starts_with(['1', '2', '*']) && l.contains("Thread "))
        .count();
    assert_eq!(listed, 2, "two threads in `info threads`:\n{out}");
    assert_eq!(run.status, 0, "{}", run.describe());
    assert_eq!(
        run.stdout_str(),
        "result=83 counter=41\njoined counter=48\n"
    );
}

#[test]
fn stepi_over_a_syscall_stops_right_after_it() {
    // Both ways a call reaches the host: answered in the guest (getppid is
    // guest-local) and through an exit.
    for path in ["fast", "exit"] {
        let stub = start_with(&["--syscalls", path], &["syscall"]);
        let out = gdb(
            &stub,
            &[
                "break *syscall_insn",
                "continue",
                "stepi",
                "print $pc - (long)&syscall_insn",
                "print $rax",
                "continue",
            ],
        );
        let run = stub.finish();
        assert_has(&out, "Breakpoint 1, ", "at the syscall");
        assert_has(
            &out,
            "$1 = (void (*)()) 0x2",
            "one instruction (2 bytes) on",
        );
        assert_has(&out, "$2 = 1", "getppid's answer in rax");
        assert_eq!(run.status, 0, "{path}: {}\n{out}", run.describe());
        assert_eq!(run.stdout_str(), "result=83 counter=41\nppid=1\n", "{path}");
    }
}

#[test]
fn dynamically_linked_pie_with_shared_libraries() {
    // gdb relocates the PIE and finds ld.so and libc from the auxv; its
    // solib breakpoint stays planted while it reads code (hidden from it).
    let prog = dynamic_target();
    let stub = start_program(&prog, &[], &[]);
    let out = gdb_on(
        &prog,
        &stub,
        &[
            "break add",
            "continue",
            "bt",
            "info sharedlibrary",
            "continue",
        ],
    );
    let run = stub.finish();
    assert_has(
        &out,
        "Breakpoint 1, add (a=41, b=41)",
        "breakpoint in a PIE",
    );
    assert_has(&out, "in twice_plus_one (x=41)", "backtrace");
    assert_has(&out, "libc.so.6", "shared libraries");
    assert_has(&out, "exited normally", "continue to exit");
    assert_eq!(run.status, 0, "{}\n{out}", run.describe());
    assert_eq!(run.stdout_str(), "result=83 counter=41\n");
}

#[test]
fn rust_and_go_programs() {
    // Rust (static-pie, release): a breakpoint on `main`, a backtrace.
    let rust = common::guest("hello_rs");
    let stub = start_program(&rust, &[], &[]);
    let out = gdb_on(&rust, &stub, &["break main", "continue", "bt", "continue"]);
    let run = stub.finish();
    assert_has(&out, "Breakpoint 1, ", "Rust breakpoint");
    assert_has(&out, "in main ()", "Rust backtrace");
    assert_has(&out, "exited normally", "Rust continue");
    assert_eq!(run.status, 0, "{}\n{out}", run.describe());

    // Go: main.main with its source line, and the runtime's threads listed.
    let go = common::guest("goroutines");
    let stub = start_program(&go, &[], &[]);
    let out = gdb_on(
        &go,
        &stub,
        &[
            "break main.main",
            "continue",
            "bt",
            "info threads",
            "continue",
        ],
    );
    let run = stub.finish();
    assert_has(&out, "hit Breakpoint 1, main.main () at ", "Go breakpoint");
    assert_has(&out, "main.go:", "Go source line");
    let threads = out
        .lines()
        .filter(|l| {
            l.trim_start()
                .starts_with(|c: char| c == '*' || c.is_ascii_digit())
                && l.contains("Thread ")
        })
        .count();
    assert!(threads >= 2, "Go runtime threads in `info threads`:\n{out}");
    assert_has(&out, "exited normally", "Go continue");
    assert_eq!(run.status, 0, "{}\n{out}", run.describe());
}

#[test]
fn detach_lets_the_program_finish_and_kill_ends_it() {
    let stub = start(&[]);
    let out = gdb(&stub, &["break add", "continue", "detach"]);
    let run = stub.finish();
    assert_has(&out, "Breakpoint 1, add", "stopped before detach");
    assert_eq!(run.status, 0, "{}\n{out}", run.describe());
    // The breakpoint went with gdb: the program ran through `add` unharmed.
    assert_eq!(run.stdout_str(), "result=83 counter=41\n");

    let stub = start(&[]);
    let out = gdb(&stub, &["break add", "continue", "kill"]);
    let run = stub.finish();
    assert_has(&out, "Breakpoint 1, add", "stopped before kill");
    assert_eq!(run.status, 128 + 9, "{}\n{out}", run.describe());
    assert_eq!(run.stdout_str(), "", "killed before printing");
}

/// A packet with its checksum.
fn packet(body: &[u8]) -> Vec<u8> {
    let sum = body.iter().fold(0u8, |s, b| s.wrapping_add(*b));
    let mut p = vec![b'$'];
    p.extend_from_slice(body);
    p.extend_from_slice(format!("#{sum:02x}").as_bytes());
    p
}

/// Reads one reply packet body (bounded).
fn reply(conn: &mut TcpStream) -> String {
    conn.set_read_timeout(Some(WATCHDOG)).expect("timeout");
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match conn.read(&mut b) {
            Ok(1) => got.push(b[0]),
            _ => panic!("no reply; got {:?}", String::from_utf8_lossy(&got)),
        }
        if got.len() >= 3 && got[got.len() - 3] == b'#' && got.contains(&b'$') {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let body = text.split('$').nth(1).unwrap_or("");
    body.split('#').next().unwrap_or("").to_string()
}

/// A `G` packet body: registers that would run on as they are, but with
/// this `fs_base` and `mxcsr`.
fn g_packet(fs_base: u64, mxcsr: u32) -> Vec<u8> {
    let mut raw = vec![0u8; 0x218 + 24];
    raw[0x214..0x218].copy_from_slice(&mxcsr.to_le_bytes());
    raw[0x218 + 8..0x218 + 16].copy_from_slice(&fs_base.to_le_bytes());
    let mut body = b"G".to_vec();
    for b in raw {
        body.extend(format!("{b:02x}").as_bytes());
    }
    body
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
fn unmapped_memory_and_bad_registers_are_errors_to_gdb() {
    let stub = start(&[]);
    let mut conn = TcpStream::connect(&stub.addr).expect("connect");
    conn.write_all(&packet(b"m0,8")).expect("send");
    let r = reply(&mut conn);
    assert!(r.starts_with('E'), "read of address 0: {r:?}");
    conn.write_all(&packet(b"mfffffffffffffff0,40"))
        .expect("send");
    let r = reply(&mut conn);
    assert!(
        r.starts_with('E'),
        "read at the top of the address space: {r:?}"
    );
    conn.write_all(&packet(b"M10,4:01020304")).expect("send");
    let r = reply(&mut conn);
    assert!(r.starts_with('E'), "write to address 16: {r:?}");
    // Registers KVM would refuse later are refused now (for the current thread).
    conn.write_all(&packet(b"qfThreadInfo")).expect("send");
    let threads = reply(&mut conn);
    let tid = threads
        .strip_prefix('m')
        .and_then(|l| l.split(',').next())
        .unwrap_or_else(|| panic!("qfThreadInfo: {threads:?}"));
    conn.write_all(&packet(format!("Hg{tid}").as_bytes()))
        .expect("send");
    assert_eq!(reply(&mut conn), "OK");
    conn.write_all(&packet(&g_packet(0xdead_0000_0000_0000, 0x1f80)))
        .expect("send");
    let r = reply(&mut conn);
    assert!(r.starts_with("E"), "non-canonical fs_base: {r:?}");
    conn.write_all(&packet(&g_packet(0, 0x1_0000)))
        .expect("send");
    let r = reply(&mut conn);
    assert!(r.starts_with('E'), "reserved MXCSR bit: {r:?}");
    // The program's own memory reads fine: the ELF header of the image.
    conn.write_all(&packet(b"m400000,4")).expect("send");
    assert_eq!(reply(&mut conn), "7f454c46");
    drop(conn);
    let run = stub.finish();
    assert_eq!(run.status, 0, "{}", run.describe());
    assert_eq!(run.stdout_str(), "result=83 counter=41\n");
}

#[test]
fn hostile_packets_never_crash_the_host() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..3 {
        let stub = start(&[]);
        let mut conn = TcpStream::connect(&stub.addr).expect("connect");
        let mut bytes = Vec::new();
        match round {
            // Raw noise.
            0 => bytes.extend(noise(&mut seed, 64 << 10)),
            // Well-framed packets with random bodies (never a kill or a detach).
            1 => {
                for _ in 0..2000 {
                    let len = (noise(&mut seed, 1)[0] % 40) as usize;
                    let mut body = noise(&mut seed, len);
                    body.retain(|b| !matches!(b, b'$' | b'#' | b'}' | b'*'));
                    if body
                        .first()
                        .is_some_and(|b| matches!(b, b'k' | b'D' | b'v' | b'R'))
                    {
                        continue;
                    }
                    bytes.extend(packet(&body));
                }
            }
            // Plausible packets with hostile arguments.
            _ => {
                for body in [
                    &b"g"[..],
                    b"G00",
                    b"Gzz",
                    b"m0,ffffffffffffffff",
                    b"mffffffffffffffff,ffffffffffffffff",
                    b"M400000,ffffffff:00",
                    b"X0,10:abc",
                    b"Z0,0,1",
                    b"Z0,ffffffffffffffff,1",
                    b"z0,401000,1",
                    b"Hgffffffff",
                    b"Hg-5",
                    b"T7fffffff",
                    b"P99=00",
                    b"p9999",
                    b"qXfer:features:read:target.xml:ffffffff,ffffffff",
                    b"qXfer:features:read:../../etc/passwd:0,100",
                    b"qSupported:xmlRegisters=i386;multiprocess+;swbreak+",
                    // A non-canonical fs_base and a reserved MXCSR bit (refused).
                    &g_packet(0xdead_0000_0000_0000, 0x1f80),
                    &g_packet(0, 0x1_0000),
                    b"vCont;s:p1.ffff",
                    b"vCont;x",
                    b"qfThreadInfo",
                    b"qsThreadInfo",
                ] {
                    bytes.extend(packet(body));
                }
                bytes.extend(vec![b'$'; 70_000]);
            }
        }
        // The stub may hang up on garbage: a failed write is fine.
        let _ = conn.write_all(&bytes);
        drop(conn);
        let run = stub.finish();
        common::assert_host_exited_normally(&run);
        assert!(
            run.status == 0 || run.status == 128 + 9,
            "round {round}: forkvm failed\n{}",
            run.describe()
        );
        assert!(
            !run.stderr_str().contains("panicked"),
            "round {round}: the host panicked\n{}",
            run.describe()
        );
    }
}

#[test]
fn crash_report_has_a_backtrace_with_source_lines() {
    let src = std::fs::read_to_string(common::repo_root().join("tests/guests/gdb_target.c"))
        .expect("read gdb_target.c");
    let line_of = |marker: &str| {
        1 + src
            .lines()
            .position(|l| l.contains(marker))
            .expect("marked line")
    };
    let fault = format!("gdb_target.c:{}", line_of("/* the faulting line */"));
    let call = format!("gdb_target.c:{}", line_of("        crash();"));
    // Static, and static-pie (loaded at a bias the DWARF lookup must undo).
    let static_pie = build_target("gdb_target_spie", &["-static-pie"]);
    for prog in [target(), static_pie] {
        let run = common::forkvm(&["run", prog.to_str().expect("utf-8 path"), "crash"]);
        assert_eq!(run.status, 128 + 11, "{}", run.describe());
        let err = run.stderr_str();
        // Frame pointers, or CFI where it walks further (through libc).
        let bt = err
            .split("backtrace (frame pointers):\n")
            .nth(1)
            .or_else(|| err.split("backtrace (DWARF CFI):\n").nth(1))
            .unwrap_or_else(|| panic!("no backtrace in the report:\n{err}"));
        let frames: Vec<&str> = bt.lines().map(str::trim).collect();
        assert!(
            frames[0].starts_with("#0 ") && frames[0].contains(" in crash+"),
            "{err}"
        );
        assert!(
            frames[1].starts_with("#1 ") && frames[1].contains(" in main+"),
            "{err}"
        );
        let src_lines = err
            .split("  source:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("no source lines in the report:\n{err}"));
        let mut lines = src_lines.lines().map(str::trim);
        let first = lines.next().unwrap_or_default();
        assert!(
            first.starts_with("#0 crash at ") && first.ends_with(&fault),
            "{err}"
        );
        let second = lines.next().unwrap_or_default();
        assert!(
            second.starts_with("#1 main at ") && second.ends_with(&call),
            "{err}"
        );
    }
}

#[test]
fn a_sleep_under_gdb_is_not_cut_short() {
    // The Ctrl-C poll must not interrupt host sleeps (EINTR to the program).
    let stub = start(&["sleep"]);
    let out = gdb(&stub, &["continue"]);
    let run = stub.finish();
    assert_has(&out, "exited normally", "continue");
    assert_eq!(
        run.stdout_str(),
        "result=83 counter=41\nusleep=0\n",
        "{out}"
    );
}

#[test]
fn ctrl_c_interrupts_a_loop_of_short_sleeps() {
    // Mostly in host sleeps, in program code only for moments: the stop
    // comes at a syscall's return.
    let (out, run) = interrupt(&["naps"], &["continue", "bt", "kill"]);
    assert_has(&out, "Program received signal SIGINT", "interrupt");
    assert_has(&out, "in main (argc=2", "backtrace");
    assert_eq!(run.status, 128 + 9, "killed from gdb\n{}", run.describe());
}

/// Runs gdb with `commands` against the program with `args`, sends gdb
/// SIGINT once the program printed its first line; gdb's output and forkvm's run.
fn interrupt(args: &[&str], commands: &[&str]) -> (String, Run) {
    let mut stub = start(args);
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch"])
        .arg("-ex")
        .arg(format!("target remote {}", stub.addr));
    for c in commands {
        cmd.arg("-ex").arg(c);
    }
    let mut gdb = cmd
        .arg(target())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gdb");
    stub.wait_stdout("result=83");
    let pid = gdb.id().to_string();
    let sent = run_cmd(
        {
            let mut c = Command::new("kill");
            c.args(["-INT", &pid]);
            c
        },
        b"",
        WATCHDOG,
    );
    assert_eq!(sent.status, 0, "{}", sent.describe());
    let start = Instant::now();
    while gdb.try_wait().expect("wait gdb").is_none() {
        if start.elapsed() > WATCHDOG {
            let _ = gdb.kill();
            panic!("gdb did not finish after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = String::new();
    if let Some(mut o) = gdb.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = gdb.stderr.take() {
        let _ = e.read_to_string(&mut out);
    }
    (out, stub.finish())
}

#[test]
fn ctrl_c_interrupts_an_endless_loop() {
    let (out, run) = interrupt(
        &["spin"],
        &[
            "continue",
            "bt",
            "info registers rip",
            "stepi",
            "info registers rip",
            "kill",
        ],
    );
    assert_has(&out, "Program received signal SIGINT", "interrupt");
    assert_has(&out, "in main (argc=2", "backtrace");
    let r = rips(&out);
    assert_eq!(r.len(), 2, "two rip lines expected:\n{out}");
    assert_ne!(r[0], r[1], "stepi did not move:\n{out}");
    // Almost always the stop is in the loop (the poll tick). Under load gdb's
    // Ctrl-C can come so fast that it is taken at the return of the write
    // that printed the line the test waited for: also right, and then the
    // stop is in write().
    let in_loop = out
        .lines()
        .filter(|l| l.starts_with("rip") && l.contains("<spin_forever+"))
        .count();
    let in_write = out
        .lines()
        .filter(|l| l.starts_with("rip") && l.contains("<write+"))
        .count();
    assert!(
        in_loop == 2 || in_write == 2,
        "both stops in the loop (or both in the write before it):\n{out}"
    );
    assert_eq!(run.status, 128 + 9, "killed from gdb\n{}", run.describe());
}

#[test]
fn crash_report_unwinds_code_without_frame_pointers_by_cfi() {
    // tests/guests/cfi_target.c faults three calls below main, built -O2
    // without frame pointers: only .eh_frame can walk it.
    let src_path = common::repo_root().join("tests/guests/cfi_target.c");
    let src = std::fs::read_to_string(&src_path).expect("read cfi_target.c");
    let fault_line = 1 + src
        .lines()
        .position(|l| l.contains("/* the faulting line */"))
        .expect("marked line");
    for (name, flags) in [
        ("cfi_target", &["-static"][..]),
        ("cfi_target_pie", &["-static-pie"][..]),
        ("cfi_target_dyn", &[][..]),
    ] {
        let dir = scratch_dir(name);
        let prog = dir.join(name);
        let mut c = Command::new("gcc");
        c.args(flags)
            .args(["-O2", "-g", "-fomit-frame-pointer", "-o"])
            .arg(&prog)
            .arg(&src_path);
        let built = run_cmd(c, b"", WATCHDOG);
        assert_eq!(built.status, 0, "cannot build {name}\n{}", built.describe());
        let run = common::forkvm(&["run", prog.to_str().expect("utf-8 path")]);
        assert_eq!(run.status, 128 + 11, "{name}: {}", run.describe());
        let err = run.stderr_str();
        let bt = err
            .split("backtrace (DWARF CFI):\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{name}: no CFI backtrace in the report:\n{err}"));
        let frames: Vec<&str> = bt.lines().map(str::trim).collect();
        for (i, func) in ["innermost", "middle", "outer", "main"].iter().enumerate() {
            let f = frames.get(i).copied().unwrap_or_default();
            assert!(
                f.starts_with(&format!("#{i} ")) && f.contains(&format!(" in {func}+")),
                "{name}: frame {i} should be {func}:\n{err}"
            );
        }
        assert_has(
            &err,
            &format!("#0 innermost at {}:{fault_line}", src_path.display()),
            "faulting line",
        );
        assert_has(&err, "#3 main at ", "main's source line");
    }
}

#[test]
fn watchpoints_in_hardware_where_the_platform_allows_else_in_software() {
    // PVM runs a guest's debug registers nowhere (no #DB, no debug exit):
    // the stub offers no hardware watchpoints there, and gdb's software
    // ones (single steps) do the job. On VMX/SVM, DR0-3/DR7 are the guest's.
    let pvm = std::path::Path::new("/sys/module/kvm_pvm").exists();
    let stub = start(&["spin"]);
    let mut commands = Vec::new();
    if pvm {
        commands.push("set can-use-hw-watchpoints 0");
    }
    commands.extend([
        "break spin_forever",
        "continue",
        "watch spins",
        "continue",
        "print spins",
        "kill",
    ]);
    let out = gdb(&stub, &commands);
    let run = stub.finish();
    let kind = if pvm {
        "Watchpoint 2: spins"
    } else {
        "Hardware watchpoint 2: spins"
    };
    assert_has(&out, kind, "the watchpoint");
    assert_has(&out, "Old value = 0", "the old value");
    assert_has(&out, "New value = 1", "the new value");
    assert_has(&out, "$1 = 1", "stopped right after the write");
    assert_eq!(run.status, 128 + 9, "{}\n{out}", run.describe());
    if pvm {
        // And the stub says so at the protocol level: Z2 is not supported (empty reply).
        let stub = start(&[]);
        let mut conn = TcpStream::connect(&stub.addr).expect("connect");
        conn.write_all(&packet(b"Z2,4b0000,4")).expect("send");
        assert_eq!(reply(&mut conn), "", "Z2 on PVM");
        drop(conn);
        let run = stub.finish();
        assert_eq!(run.status, 0, "{}", run.describe());
    }
}
