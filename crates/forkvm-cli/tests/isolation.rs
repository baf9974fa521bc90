//! Per-request isolation of `forkvm serve`: what a request does to the files under
//! `--allow-write` is private to its fork and gone at reset; `--persist` directories are
//! shared on purpose; `forkvm run` writes through. And the short soak run
//! (`scripts/soak.sh --seconds 20`), which also checks for globals, fds and /tmp files left
//! by earlier requests, and for growing RSS, fds, threads and VMs.
//!
//! The guest is `tests/guests/serve/isolation.c`, built here with the flags
//! `examples/build.sh` uses for serve guests.

mod common;

use common::http::free_port;

use common::{forkvm_bin, repo_root, run_cmd, scratch_dir};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The isolation guest, compiled once per test process.
fn guest() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = repo_root();
            let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("isolation-guest");
            let cc = if Path::new("/usr/bin/musl-gcc").exists() {
                "musl-gcc"
            } else {
                "gcc"
            };
            let st = Command::new(cc)
                .args(["-static", "-O2", "-g0", "-Wall", "-Wextra", "-I"])
                .arg(root.join("guest/include"))
                .arg("-o")
                .arg(&out)
                .arg(root.join("tests/guests/serve/isolation.c"))
                .status()
                .expect("run the C compiler");
            assert!(st.success(), "cannot build the isolation guest");
            out
        })
        .clone()
}

/// A directory with the files the guest's `op=mutate` changes.
fn data_dir(test: &str) -> PathBuf {
    let d = scratch_dir(test).join("data");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("data.txt"), "original\n").unwrap();
    std::fs::write(d.join("old.txt"), "old\n").unwrap();
    std::fs::write(d.join("victim.txt"), "victim\n").unwrap();
    d
}

/// Names, sizes and contents of the files in `dir`, recursively, sorted.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                out.push((rel + "/", Vec::new()));
                todo.push(p);
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// A running `forkvm serve`, killed on drop.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    fn start(test: &str, flags: &[&str], dir: &Path) -> Self {
        let port = free_port();
        let log = scratch_dir(&format!("{test}-log")).join("server.log");
        let child = Command::new(forkvm_bin())
            .arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(flags)
            .arg(guest())
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::fs::File::create(&log).unwrap()))
            .stderr(Stdio::from(
                std::fs::File::create(log.with_extension("err")).unwrap(),
            ))
            .spawn()
            .expect("start forkvm serve");
        let mut s = Self { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        while TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err() {
            if let Ok(Some(st)) = s.child.try_wait() {
                panic!("forkvm serve exited ({st}):\n{}", s.logs());
            }
            assert!(Instant::now() < deadline, "forkvm serve did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    fn logs(&self) -> String {
        let read =
            |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
        format!(
            "{}{}",
            read(&self.log),
            read(&self.log.with_extension("err"))
        )
    }

    /// GET `/?query`: (status, body).
    fn get(&self, query: &str) -> (u16, String) {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "30", "-w", "\n%{http_code}"])
            .arg(format!("http://127.0.0.1:{}/?{query}", self.port))
            .output()
            .expect("run curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }

    fn expect_ok(&self, query: &str) -> String {
        let (status, body) = self.get(query);
        assert_eq!(status, 200, "GET /?{query}: {body}\n{}", self.logs());
        body
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_request_changes_files_only_in_its_own_fork() {
    let dir = data_dir("iso-own-fork");
    let s = Server::start(
        "iso-own-fork",
        &["--concurrency", "2", "--allow-write", dir.to_str().unwrap()],
        &dir,
    );
    // The program's initialisation wrote through to the host.
    assert_eq!(std::fs::read(dir.join("init.txt")).unwrap(), b"init\n");
    let host = snapshot(&dir);
    let before = s.expect_ok("op=list");
    assert!(before.contains("victim.txt") && before.contains("data=original\n"));
    for _ in 0..3 {
        let during = s.expect_ok("op=mutate");
        // Inside the request: its changes, coherent in listings, stat and reads.
        for want in [
            "created.txt 8\n",
            "moved.txt 4\n",
            "newdir ",
            "data=original\nappended\n",
        ] {
            assert!(
                during.contains(want),
                "{want:?} missing after op=mutate:\n{during}"
            );
        }
        assert!(
            !during.contains("victim.txt") && !during.contains("old.txt"),
            "{during}"
        );
        // The next request sees the original state, and so does the host.
        assert_eq!(s.expect_ok("op=list"), before);
        assert_eq!(snapshot(&dir), host, "the host's files changed");
    }
}

#[test]
fn persisted_directories_are_shared_between_requests() {
    let dir = data_dir("iso-persist");
    let shared = dir.parent().unwrap().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let s = Server::start(
        "iso-persist",
        &[
            "--concurrency",
            "1",
            "--allow-write",
            dir.to_str().unwrap(),
            "--persist",
            shared.to_str().unwrap(),
        ],
        &dir,
    );
    let host = snapshot(&dir);
    let q = format!("op=mutate&persist={}", shared.display());
    s.expect_ok(&q);
    s.expect_ok(&q);
    assert_eq!(
        std::fs::read_to_string(shared.join("log.txt")).unwrap(),
        "request\nrequest\n",
        "both requests wrote through to the --persist directory"
    );
    assert_eq!(snapshot(&dir), host, "the --allow-write directory changed");
}

#[test]
fn forkvm_run_writes_through() {
    let dir = data_dir("iso-run");
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["run", "--allow-write"])
        .arg(&dir)
        .arg(guest())
        .arg("--mutate")
        .arg(&dir);
    let r = run_cmd(cmd, b"", Duration::from_secs(60));
    assert_eq!(r.status, 0, "{}", r.describe());
    assert_eq!(
        std::fs::read_to_string(dir.join("data.txt")).unwrap(),
        "original\nappended\n"
    );
    assert!(dir.join("created.txt").is_file() && dir.join("moved.txt").is_file());
    assert!(dir.join("newdir/f").is_file());
    assert!(!dir.join("victim.txt").exists() && !dir.join("old.txt").exists());
}

fn soak(seconds: &str, serve_flags: &str) -> common::Run {
    let mut cmd = Command::new("bash");
    cmd.arg(repo_root().join("scripts/soak.sh"))
        .args(["--seconds", seconds, "--forkvm"])
        .arg(forkvm_bin())
        .env("SOAK_SERVE_FLAGS", serve_flags);
    // run_cmd kills the script's process group and fails the test past the limit.
    run_cmd(cmd, b"", Duration::from_secs(60))
}

#[test]
fn the_short_soak_run_passes() {
    if !common::installed("/usr/bin/wrk") {
        return;
    }
    let r = soak("20", "");
    assert_eq!(r.status, 0, "{}", r.describe());
    let err = r.stderr_str();
    assert!(
        err.contains("soak.sh: PASS") && err.contains("unexpected=0 leaks=0"),
        "{err}"
    );
}

#[test]
fn the_soak_run_fails_when_requests_leak_state() {
    if !common::installed("/usr/bin/wrk") {
        return;
    }
    // Without a reset between requests, the guest finds the last one's leftovers.
    let r = soak("3", "--ephemeral false");
    assert_ne!(r.status, 0, "{}", r.describe());
    assert!(
        r.stderr_str().contains("FAIL: state leaks"),
        "{}",
        r.describe()
    );
}
