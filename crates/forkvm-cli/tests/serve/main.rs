//! `forkvm serve` end to end: a real server on a loopback port, real HTTP clients (curl,
//! raw TCP for what curl will not send, nginx as a reverse proxy when installed).
//!
//! The guests are the examples in `examples/` and the test guests in `tests/guests/serve/`,
//! built into `examples/out/` by `examples/build.sh` (run once per test binary; quick when
//! up to date). The native build of the same handlers (`*.native`, see
//! `examples/native/server.c`) is the reference for differential checks.
//!
//! Every server is started on a free port, waited for until it accepts connections, and
//! killed when its guard is dropped, so a failing test leaves nothing running. Its stdout
//! and stderr go to files in a scratch directory and are shown when an assertion fails.

#[path = "../common/mod.rs"]
mod common;
mod harness;

use common::{forkvm_bin, repo_root};
use harness::*;
use std::io::Write;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

// ---------------------------------------------------------------------------- tests

#[test]
fn hello_over_curl() {
    let s = Server::start("hello", &["--concurrency", "1"], &[&example("hello")]);
    let r = s.get("/");
    assert_eq!(r.status, 200, "{}\n{}", r.describe(), s.describe());
    assert_eq!(r.text(), "Hello from forkvm!\n", "{}", r.describe());
    assert!(
        r.header("content-type")
            .is_some_and(|v| v.starts_with("text/plain")),
        "{}",
        r.describe()
    );
    assert_eq!(r.header("content-length"), Some("19"), "{}", r.describe());
    // Any path and method reach the same handler.
    let r = curl(&["-X", "DELETE", &s.url("/some/where?x=1")]);
    assert_eq!(r.status, 200, "{}", r.describe());
    assert_eq!(r.text(), "Hello from forkvm!\n");
}

#[test]
fn builtin_example_without_program() {
    let s = Server::start("builtin", &["--concurrency", "1"], &[]);
    for _ in 0..3 {
        let r = s.get("/");
        assert_eq!(r.status, 200, "{}\n{}", r.describe(), s.describe());
        assert!(!r.body.is_empty(), "{}", r.describe());
        assert_server_timing(&r, &s);
    }
}

#[test]
fn missing_program_is_an_error() {
    let out = Command::new(forkvm_bin())
        .args(["serve", "--listen"])
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("/nonexistent/forkvm-guest")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run forkvm");
    assert!(
        out.status.code().is_some_and(|c| c != 0),
        "expected a non-zero exit, got {}",
        out.status
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/forkvm-guest"),
        "stderr should name the program: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rust_examples_match_c_and_native() {
    let data = repo_root().join("examples/data");
    let csv = data.join("products.csv");
    let (data, csv) = (
        data.to_string_lossy().into_owned(),
        csv.to_string_lossy().into_owned(),
    );
    let hello = Server::start("hello_rs", &["--concurrency", "1"], &[&example("hello_rs")]);
    hello.expect("/", "Hello from forkvm!\n");

    let flags = ["--concurrency", "1", "--allow-read", &data];
    let c = Server::start("render_c", &flags, &[&example("render")]);
    let rs = Server::start("render_rs", &flags, &[&example("render_rs")]);
    let native = Server::native("render_native", &["render"]);
    let c_csv = Server::start("render_c_csv", &flags, &[&example("render"), &csv]);
    let rs_csv = Server::start("render_rs_csv", &flags, &[&example("render_rs"), &csv]);
    let native_csv = Server::native("render_native_csv", &["render", &csv]);
    for path in [
        "/",
        "/shop/%3Cx%3E?user=%3Cscript%3Ealert(1)%3C/script%3E&sort=price",
        "/?sort=name&user=a+b%26c",
        "/?sort=stock&sort=price",
        "/a&b'c(d)?user=%00hidden",
        "/?user=%zz%4",
    ] {
        for (a, b, what) in [(&c, &rs, "C vs Rust"), (&c, &native, "guest vs native")] {
            let (ra, rb) = (a.get(path), b.get(path));
            assert_eq!(
                ra.status,
                200,
                "{path}: {}\n{}",
                ra.describe(),
                a.describe()
            );
            assert_eq!(
                rb.status,
                200,
                "{path}: {}\n{}",
                rb.describe(),
                b.describe()
            );
            assert!(
                ra.body == rb.body,
                "{what}: pages for {path} differ\n--- {}\n{}\n--- {}\n{}",
                a.command,
                ra.text(),
                b.command,
                rb.text()
            );
        }
        for (a, b, what) in [
            (&c_csv, &rs_csv, "C vs Rust (CSV)"),
            (&c_csv, &native_csv, "guest vs native (CSV)"),
        ] {
            let (ra, rb) = (a.get(path), b.get(path));
            assert_eq!(
                ra.status,
                200,
                "{path}: {}\n{}",
                ra.describe(),
                a.describe()
            );
            assert!(
                ra.body == rb.body,
                "{what}: pages for {path} differ\n--- {}\n{}\n--- {}\n{}",
                a.command,
                ra.text(),
                b.command,
                rb.text()
            );
        }
    }
    let r = c_csv.get("/");
    assert!(
        r.text().contains("Espresso Cup &amp; Saucer"),
        "{}",
        r.describe()
    );
    assert!(r.text().contains("8 products;"), "{}", r.describe());
}

#[test]
fn render_page_is_escaped_and_deterministic() {
    let s = Server::start("render", &["--concurrency", "2"], &[&example("render")]);
    let path = "/shop/%3Cb%3E?user=%3Cscript%3E&sort=price";
    let first = s.get(path);
    assert_eq!(first.status, 200, "{}\n{}", first.describe(), s.describe());
    assert!(first
        .header("content-type")
        .is_some_and(|v| v.starts_with("text/html")));
    let page = first.text();
    assert!(page.len() > 25_000, "page is only {} bytes", page.len());
    assert!(
        page.contains("Hello, &lt;script&gt;!"),
        "user not escaped:\n{page}"
    );
    assert!(!page.contains("<script>"), "user echoed unescaped:\n{page}");
    assert!(page.contains("sorted by price"), "{page}");
    assert!(page.contains("200 products;"), "{page}");
    for _ in 0..5 {
        let again = s.get(path);
        assert!(
            again.body == first.body,
            "render output changed between requests"
        );
    }
}

#[test]
fn counter_ephemeral_is_always_one() {
    let s = Server::start(
        "counter_eph",
        &["--ephemeral", "true", "--concurrency", "2"],
        &[&example("counter")],
    );
    for _ in 0..10 {
        s.expect("/", "1\n");
    }
}

#[test]
fn counter_persistent_counts_up() {
    let s = Server::start(
        "counter_persist",
        &["--ephemeral", "false", "--concurrency", "1"],
        &[&example("counter")],
    );
    for i in 1..=10 {
        s.expect("/", &format!("{i}\n"));
    }
}

#[test]
fn warmup_requests_are_forgotten() {
    // Each worker serves two synthetic requests first, then is reset: even a
    // worker that keeps state counts real requests from 1.
    let s = Server::start(
        "counter_warmup",
        &[
            "--ephemeral",
            "false",
            "--concurrency",
            "1",
            "--warmup",
            "2",
        ],
        &[&example("counter")],
    );
    for i in 1..=3 {
        s.expect("/", &format!("{i}\n"));
    }
}

#[test]
fn secrets_never_reach_a_later_request() {
    let s = Server::start("secret", &["--concurrency", "1"], &[&example("counter")]);
    for i in 0..5 {
        s.expect(&format!("/?secret=TOPSECRET{i}"), "stored\n");
        s.expect("/?peek=1", "heap=\nglobal=\n");
    }
    // Two workers, requests interleaved from several clients at once.
    let s2 = Server::start("secret2", &["--concurrency", "2"], &[&example("counter")]);
    thread::scope(|scope| {
        for t in 0..4 {
            let s2 = &s2;
            scope.spawn(move || {
                for i in 0..5 {
                    s2.expect(&format!("/?secret=T{t}S{i}"), "stored\n");
                    s2.expect("/?peek=1", "heap=\nglobal=\n");
                }
            });
        }
    });
}

#[test]
fn secrets_persist_without_ephemeral_control() {
    // The control for the isolation test: without resets the peek does see the secret.
    let s = Server::start(
        "secret_control",
        &["--ephemeral", "false", "--concurrency", "1"],
        &[&example("counter")],
    );
    s.expect("/?secret=VISIBLE", "stored\n");
    s.expect("/?peek=1", "heap=VISIBLE\nglobal=VISIBLE\n");
}

#[test]
fn crash_is_500_and_the_next_request_works() {
    let s = Server::start("crash", &["--concurrency", "1"], &[&example("counter")]);
    for _ in 0..3 {
        let r = s.get("/?crash=1");
        assert_eq!(r.status, 500, "{}\n{}", r.describe(), s.describe());
        assert_server_timing(&r, &s);
        s.expect("/", "1\n");
    }
    // Also when the worker would otherwise keep its state.
    let p = Server::start(
        "crash_persist",
        &["--ephemeral", "false", "--concurrency", "1"],
        &[&example("counter")],
    );
    let r = p.get("/?crash=1");
    assert_eq!(r.status, 500, "{}\n{}", r.describe(), p.describe());
    let r = p.get("/");
    assert_eq!(r.status, 200, "{}\n{}", r.describe(), p.describe());
}

#[test]
fn spin_is_504_and_the_next_request_works() {
    let s = Server::start(
        "spin",
        &["--concurrency", "1", "--request-timeout", "1"],
        &[&example("counter")],
    );
    let r = s.get("/?spin=1");
    assert_eq!(r.status, 504, "{}\n{}", r.describe(), s.describe());
    assert!(
        r.elapsed < Duration::from_secs(10),
        "the timeout took {:?}",
        r.elapsed
    );
    assert_server_timing(&r, &s);
    s.expect("/", "1\n");
}

#[test]
fn no_response_is_502() {
    let s = Server::start("noresp", &["--concurrency", "1"], &[&example("counter")]);
    let r = s.get("/?noresp=1");
    assert_eq!(r.status, 502, "{}\n{}", r.describe(), s.describe());
    assert_server_timing(&r, &s);
    s.expect("/", "1\n");
}

#[test]
fn body_over_max_body_is_413() {
    let s = Server::start(
        "maxbody",
        &["--concurrency", "1", "--max-body", "1000"],
        &[&example("counter")],
    );
    let dir = scratch("maxbody-data");
    let big = write_file(&dir, "big", &payload(5000, 1));
    let exact = write_file(&dir, "exact", &payload(1000, 2));
    let big_arg = format!("@{}", big.display());
    let exact_arg = format!("@{}", exact.display());
    let r = curl(&["--data-binary", &big_arg, &s.url("/")]);
    assert_eq!(r.status, 413, "{}\n{}", r.describe(), s.describe());
    let r = curl(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &big_arg,
        &s.url("/"),
    ]);
    assert_eq!(r.status, 413, "chunked: {}\n{}", r.describe(), s.describe());
    let r = curl(&["--data-binary", &exact_arg, &s.url("/")]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "len=1000\n"),
        "{}\n{}",
        r.describe(),
        s.describe()
    );
}

#[test]
fn malformed_requests_are_400() {
    let s = Server::start("malformed", &["--concurrency", "1"], &[&example("hello")]);
    for garbage in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: x\r\nthis is not a header\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n",
    ] {
        let mut r = ResponseReader::new({
            let mut c = connect(s.port);
            c.write_all(garbage).expect("write");
            c
        });
        let resp = r.next().unwrap_or_else(|| {
            panic!(
                "no answer to {:?}\n{}",
                String::from_utf8_lossy(garbage),
                s.describe()
            )
        });
        assert_eq!(
            resp.status,
            400,
            "{:?}: {}\n{}",
            String::from_utf8_lossy(garbage),
            resp.head,
            s.describe()
        );
    }
    s.expect("/", "Hello from forkvm!\n");
}

#[test]
fn chunked_request_body_arrives_whole() {
    let s = Server::start("chunked", &["--concurrency", "1"], &[&example("counter")]);
    let e = Server::start(
        "chunked_echo",
        &["--concurrency", "1"],
        &[&example("tests/echo")],
    );
    let dir = scratch("chunked-data");
    let data = payload(100_000, 3);
    let file = write_file(&dir, "body", &data);
    let arg = format!("@{}", file.display());
    let r = curl(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &arg,
        &s.url("/"),
    ]);
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "len=100000\n"),
        "{}\n{}",
        r.describe(),
        s.describe()
    );
    let r = curl(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &arg,
        &e.url("/"),
    ]);
    assert_eq!(r.status, 200, "{}\n{}", r.describe(), e.describe());
    let text = r.text();
    assert_eq!(
        echo_field(&text, "body_len").as_deref(),
        Some("100000"),
        "{text}"
    );
    assert_eq!(
        echo_field(&text, "body_fnv"),
        Some(format!("{:016x}", fnv1a(&data))),
        "{text}"
    );

    // Hand-made chunks with an extension and a trailer, on a raw connection.
    let req = b"POST /raw HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
                5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n";
    let resp = raw_exchange(e.port, req, 1).remove(0);
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    assert_eq!(resp.status, 200, "{}\n{text}", resp.head);
    assert_eq!(
        echo_field(&text, "body_len").as_deref(),
        Some("12"),
        "{text}"
    );
    assert_eq!(
        echo_field(&text, "body_fnv"),
        Some(format!("{:016x}", fnv1a(b"hello, world"))),
        "{text}"
    );
}

#[test]
fn echo_sees_the_request_and_sets_response_headers() {
    let s = Server::start("echo", &["--concurrency", "1"], &[&example("tests/echo")]);
    let r = curl(&[
        "-H",
        "X-Test: hello there",
        &s.url("/a/b?x=1&y=2&status=201"),
    ]);
    assert_eq!(r.status, 201, "{}\n{}", r.describe(), s.describe());
    assert_eq!(r.header("x-echo"), Some("yes"), "{}", r.describe());
    assert_eq!(r.header("x-path-len"), Some("4"), "{}", r.describe());
    let text = r.text();
    assert_eq!(
        echo_field(&text, "method").as_deref(),
        Some("GET"),
        "{text}"
    );
    assert_eq!(echo_field(&text, "path").as_deref(), Some("/a/b"), "{text}");
    assert_eq!(
        echo_field(&text, "query").as_deref(),
        Some("x=1&y=2&status=201"),
        "{text}"
    );
    assert_eq!(
        echo_field(&text, "body_len").as_deref(),
        Some("0"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.eq_ignore_ascii_case("header=x-test: hello there")),
        "the request header did not reach the guest:\n{text}"
    );
    let data = payload(70_000, 4);
    let file = write_file(&scratch("echo-data"), "body", &data);
    let r = curl(&[
        "--data-binary",
        &format!("@{}", file.display()),
        &s.url("/post"),
    ]);
    let text = r.text();
    assert_eq!(
        echo_field(&text, "method").as_deref(),
        Some("POST"),
        "{text}"
    );
    assert_eq!(
        echo_field(&text, "body_len").as_deref(),
        Some("70000"),
        "{text}"
    );
    assert_eq!(
        echo_field(&text, "body_fnv"),
        Some(format!("{:016x}", fnv1a(&data))),
        "{text}"
    );
}

#[test]
fn guest_output_goes_to_forkvm_output() {
    let s = Server::start("output", &["--concurrency", "1"], &[&example("tests/echo")]);
    let r = s.get("/?log=marker-4711");
    assert_eq!(r.status, 200, "{}\n{}", r.describe(), s.describe());
    s.wait_for_output(
        Duration::from_secs(5),
        "the guest's stdout/stderr did not reach forkvm's",
        |out, err| {
            out.contains("echo-stdout: marker-4711") && err.contains("echo-stderr: marker-4711")
        },
    );
}

#[test]
fn the_server_answers_while_every_worker_vm_is_busy() {
    // A VM call blocks the runtime thread that makes it; the runtime must keep
    // a thread free for everything else (here: the metrics endpoint).
    let s = Server::start_with_admin(
        "allbusy",
        &["--concurrency", "2"],
        &[&example("tests/echo")],
    );
    let busy: Vec<_> = (0..2)
        .map(|i| {
            let url = s.url(&format!("/slow?log=busy-{i}&sleep_ms=5000"));
            thread::spawn(move || curl(&[&url]))
        })
        .collect();
    // Both requests are in their VMs once each has logged.
    s.wait_for_output(
        Duration::from_secs(30),
        "the slow requests did not start",
        |_, err| (0..2).all(|i| err.contains(&format!("echo-stderr: busy-{i}"))),
    );
    let admin = s.admin_port.expect("admin port");
    let r = curl(&[&format!("http://127.0.0.1:{admin}/.forkvm/metrics")]);
    assert_eq!(r.status, 200, "{}\n{}", r.describe(), s.describe());
    assert!(
        busy.iter().all(|h| !h.is_finished()),
        "the metrics were answered only after the busy requests ended\n{}",
        s.describe()
    );
    for h in busy {
        let r = h.join().expect("client");
        assert_eq!(r.status, 200, "{}\n{}", r.describe(), s.describe());
    }
}

#[test]
fn keep_alive_reuses_the_connection() {
    let s = Server::start("keepalive", &["--concurrency", "1"], &[&example("hello")]);
    let out = Command::new("curl")
        .args(["-sS", "-v", "--max-time", &EXCHANGE_SECS.to_string()])
        .arg(s.url("/one"))
        .arg(s.url("/two"))
        .output()
        .expect("run curl");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "curl failed: {stderr}\n{}",
        s.describe()
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello from forkvm!\nHello from forkvm!\n"
    );
    assert!(
        stderr
            .to_ascii_lowercase()
            .contains("re-using existing connection"),
        "curl opened a second connection:\n{stderr}\n{}",
        s.describe()
    );
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let s = Server::start(
        "pipeline",
        &["--concurrency", "2"],
        &[&example("tests/echo")],
    );
    let mut req = Vec::new();
    req.extend_from_slice(b"GET /first?sleep_ms=300 HTTP/1.1\r\nHost: x\r\n\r\n");
    req.extend_from_slice(b"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    req.extend_from_slice(b"GET /third HTTP/1.1\r\nHost: x\r\n\r\n");
    let resps = raw_exchange(s.port, &req, 3);
    for (resp, path) in resps.iter().zip(["/first", "/second", "/third"]) {
        let text = String::from_utf8_lossy(&resp.body);
        assert_eq!(resp.status, 200, "{}\n{text}\n{}", resp.head, s.describe());
        assert_eq!(
            echo_field(&text, "path").as_deref(),
            Some(path),
            "out of order:\n{text}"
        );
    }
    let second = String::from_utf8_lossy(&resps[1].body);
    assert_eq!(
        echo_field(&second, "body_len").as_deref(),
        Some("5"),
        "{second}"
    );
}

#[test]
fn large_response_arrives_intact() {
    let s = Server::start("big", &["--concurrency", "1"], &[&example("counter")]);
    let r = s.get("/?big=12");
    assert_eq!(r.status, 200, "{}\n{}", r.describe(), s.describe());
    assert_eq!(r.body.len(), 12 << 20, "{}", r.describe());
    assert_eq!(
        r.header("content-length"),
        Some((12usize << 20).to_string().as_str())
    );
    assert!(r.body == big_body(12), "the 12 MiB body was corrupted");
    s.expect("/", "1\n");
}

#[test]
fn concurrent_clients_are_all_served() {
    let s = Server::start("concurrent", &["--concurrency", "2"], &[&example("hello")]);
    thread::scope(|scope| {
        let handles: Vec<_> = (0..16).map(|_| scope.spawn(|| s.get("/"))).collect();
        for h in handles {
            let r = h.join().expect("client thread");
            assert_eq!(r.status, 200, "{}\n{}", r.describe(), s.describe());
            assert_eq!(r.text(), "Hello from forkvm!\n");
        }
    });
}

#[test]
fn overload_gives_503() {
    let help = Command::new(forkvm_bin())
        .args(["serve", "--help"])
        .output()
        .expect("run forkvm serve --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let Some(flag) = help
        .split_whitespace()
        .find(|w| w.starts_with("--") && w.contains("queue"))
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string()
        })
    else {
        eprintln!("skipped: `forkvm serve --help` shows no queue-size option");
        return;
    };
    let s = Server::start(
        "overload",
        &["--concurrency", "1", &flag, "1", "--request-timeout", "2"],
        &[&example("counter")],
    );
    let statuses: Vec<u16> = thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| s.get("/?spin=1").status))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client"))
            .collect()
    });
    assert!(
        statuses.contains(&503),
        "8 spinning requests against 1 worker and a queue of 1: no 503 in {statuses:?}\n{}",
        s.describe()
    );
    assert!(
        statuses.iter().all(|st| *st == 503 || *st == 504),
        "{statuses:?}\n{}",
        s.describe()
    );
    s.expect("/", "1\n");
}

#[test]
fn server_timing_is_on_every_answer() {
    let s = Server::start("timing", &["--concurrency", "1"], &[&example("counter")]);
    for path in ["/", "/?secret=x", "/?big=1"] {
        let r = s.get(path);
        assert_eq!(r.status, 200, "{}", r.describe());
        assert_server_timing(&r, &s);
    }
}

#[test]
fn admin_serves_metrics() {
    let s = Server::start_with_admin("admin", &["--concurrency", "1"], &[&example("hello")]);
    for _ in 0..3 {
        s.expect("/", "Hello from forkvm!\n");
    }
    let admin = s.admin_port.expect("admin port");
    let r = curl(&[&format!("http://127.0.0.1:{admin}/.forkvm/metrics")]);
    assert_eq!(r.status, 200, "{}\n{}", r.describe(), s.describe());
    let text = r.text();
    let total: f64 = text
        .lines()
        .filter(|l| l.starts_with("forkvm_requests_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        total >= 3.0,
        "forkvm_requests_total should count 3 requests:\n{text}"
    );
    // The admin endpoint is not served on the main port.
    let r = s.get("/.forkvm/metrics");
    assert!(
        !r.text().contains("forkvm_requests_total"),
        "metrics leak on the public port"
    );
}

#[test]
fn sigterm_finishes_the_request_in_flight_and_exits_0() {
    let mut s = Server::start(
        "sigterm",
        &["--concurrency", "1"],
        &[&example("tests/echo")],
    );
    let url = s.url("/slow?sleep_ms=2000");
    let client = thread::spawn(move || curl(&[&url]));
    // Let the request reach the worker.
    thread::sleep(Duration::from_millis(700));
    let st = s.terminate(Duration::from_secs(30));
    let r = client.join().expect("client thread");
    assert_eq!(
        r.status,
        200,
        "the request in flight was dropped: {}\n{}",
        r.describe(),
        s.describe()
    );
    assert_eq!(
        echo_field(&r.text(), "path").as_deref(),
        Some("/slow"),
        "{}",
        r.describe()
    );
    assert_eq!(
        st.code(),
        Some(0),
        "exit status after SIGTERM: {st}\n{}",
        s.describe()
    );
}

#[test]
fn hostile_guest_cannot_break_the_server() {
    let s = Server::start(
        "hostile",
        &[
            "--concurrency",
            "1",
            "--memory",
            "64",
            "--request-timeout",
            "10",
        ],
        &[&example("tests/hostile")],
    );
    let ok = |s: &Server| s.expect("/?mode=none", "ok\n");
    let r = s.get("/?mode=badptr");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "rc=-14\n"),
        "{}\n{}",
        r.describe(),
        s.describe()
    );
    let r = s.get("/?mode=badstatus");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "rc=-22\n"),
        "{}\n{}",
        r.describe(),
        s.describe()
    );
    let r = s.get("/?mode=hugeheaders");
    assert_eq!(r.status, 200, "{}\n{}", r.describe(), s.describe());
    assert!(
        r.text().starts_with("rc=-"),
        "100 KiB of headers accepted? {}",
        r.describe()
    );
    let r = s.get("/?mode=inject");
    assert!(
        !r.head.lines().any(|l| {
            let l = l.to_ascii_lowercase();
            l.starts_with("injected") || l.starts_with("bad name")
        }),
        "a bare CR in a guest header value injected a field:\n{}",
        r.head
    );
    assert!(r.status == 200 || r.status >= 500, "{}", r.describe());
    ok(&s);
    let r = s.get("/?mode=twice");
    assert!(
        (r.status, r.text().as_str()) == (200, "first\n")
            || (r.status, r.text().as_str()) == (201, "second\n"),
        "status and body of two answers mixed: {}",
        r.describe()
    );
    for mode in ["exit", "stack", "kernel"] {
        let r = s.get(&format!("/?mode={mode}"));
        assert!(
            r.status >= 500 && r.status < 600,
            "mode={mode}: {}\n{}",
            r.describe(),
            s.describe()
        );
        ok(&s);
    }
    let r = s.get("/?mode=oom");
    assert!(
        r.status == 200 || r.status == 500,
        "{}\n{}",
        r.describe(),
        s.describe()
    );
    if r.status == 200 {
        let mib: u64 = r
            .text()
            .trim()
            .trim_start_matches("mib=")
            .parse()
            .unwrap_or(u64::MAX);
        assert!(mib <= 64, "the guest got {mib} MiB with --memory 64");
    }
    ok(&s);
}

#[test]
fn nginx_reverse_proxy() {
    let Some(nginx) = which("nginx") else {
        eprintln!("skipped: nginx is not installed (apt-get install -y nginx-light or nginx)");
        return;
    };
    let hello = Server::start("nginx_hello", &["--concurrency", "1"], &[&example("hello")]);
    let counter = Server::start(
        "nginx_counter",
        &["--concurrency", "1"],
        &[&example("counter")],
    );
    let dir = scratch("nginx");
    for d in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        std::fs::create_dir_all(dir.join(d)).expect("create nginx temp dir");
    }
    let port = free_port();
    let d = dir.display();
    let conf = format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream hello {{ server 127.0.0.1:{hp}; keepalive 4; }}
    upstream counter {{ server 127.0.0.1:{cp}; keepalive 4; }}
    server {{
        listen 127.0.0.1:{port};
        location /counter/ {{
            proxy_pass http://counter/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
        location / {{
            proxy_pass http://hello;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"#,
        hp = hello.port,
        cp = counter.port,
    );
    let conf_path = write_file(&dir, "nginx.conf", conf.as_bytes());
    let mut cmd = Command::new(&nginx);
    cmd.arg("-c")
        .arg(&conf_path)
        .arg("-p")
        .arg(&dir)
        .arg("-e")
        .arg(dir.join("error.log"));
    let proxy = Server::spawn("nginx_proc", cmd, port, None);
    let through = |path: &str| curl(&[&proxy.url(path)]);
    for _ in 0..3 {
        let r = through("/");
        assert_eq!(
            r.status,
            200,
            "{}\n{}\n{}",
            r.describe(),
            tail(&dir.join("error.log")),
            hello.describe()
        );
        assert_eq!(r.text(), "Hello from forkvm!\n");
        assert!(r.header("server-timing").is_some(), "{}", r.describe());
    }
    for _ in 0..5 {
        let r = through("/counter/");
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, "1\n"),
            "{}\n{}",
            r.describe(),
            counter.describe()
        );
    }
    let r = through("/counter/?crash=1");
    assert_eq!(r.status, 500, "{}", r.describe());
    let r = through("/counter/?noresp=1");
    assert_eq!(r.status, 502, "{}", r.describe());
    let r = through("/counter/");
    assert_eq!(
        (r.status, r.text().as_str()),
        (200, "1\n"),
        "{}",
        r.describe()
    );
    drop(proxy);
}
