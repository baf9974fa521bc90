//! `forkvm serve app.mjs` (issue 11): a fetch-style JavaScript module served
//! by an unmodified node (V8) in a VM forked for every request, compared with
//! the same module served natively by node through the same adapter.

mod common;

use common::http::{call, free_port, get, keep_alive, wrk, Resp, Server};
use common::{forkvm_bin, installed, repo_root};
use std::path::PathBuf;
use std::process::Command;

const NODE: &str = "/usr/bin/node";

fn app() -> PathBuf {
    repo_root().join("tests/guests/js/app.mjs")
}

fn forkvm_js(port: u16, flags: &[&str]) -> Server {
    let mut cmd = Command::new(forkvm_bin());
    cmd.args(["serve", "--concurrency", "1", "--request-timeout", "20"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(flags)
        .arg(app());
    Server::start(cmd, port, "forkvm-js")
}

/// The module under node natively, through forkvm's own adapter file.
fn native_js(port: u16) -> Server {
    let adapter =
        std::fs::read_to_string(repo_root().join("crates/forkvm-cli/src/serve/node_adapter.mjs"))
            .expect("adapter source");
    let mut cmd = Command::new(NODE);
    cmd.args(["--input-type=module", "-e", &adapter, "--"])
        .arg(app())
        .arg(port.to_string())
        .arg("0");
    Server::start(cmd, port, "native-js")
}

/// What a client can compare: status, the headers the module sets, body.
fn seen(r: &Resp) -> (u16, Option<String>, Option<String>, Option<String>, String) {
    (
        r.status,
        r.header("content-type").map(str::to_string),
        r.header("x-custom").map(str::to_string),
        r.header("set-cookie").map(str::to_string),
        r.text(),
    )
}

#[test]
fn a_module_answers_as_under_node_with_every_request_in_a_fresh_vm() {
    answers_as_under_node(&[]);
}

/// The same module, served by forkvm-qjs (QuickJS) instead of node: the same
/// answers as node natively gives.
#[test]
fn quickjs_answers_as_node_does_with_every_request_in_a_fresh_vm() {
    answers_as_under_node(&["--engine", "quickjs"]);
}

fn answers_as_under_node(engine: &[&str]) {
    if !installed(NODE) {
        eprintln!("skipped: {NODE} is not installed");
        return;
    }
    let (np, vp) = (free_port(), free_port());
    let _native = native_js(np);
    let mut flags = vec!["--warmup", "0"];
    flags.extend(engine);
    let vm = forkvm_js(vp, &flags);
    for path in [
        "/",
        "/json?q=forkvm",
        "/html",
        "/status",
        "/nope",
        "/throw",
        "/reject",
        "/timers",
        "/webapi",
    ] {
        let (n, v) = (get(np, path), get(vp, path));
        assert_eq!(seen(&v), seen(&n), "GET {path}\nforkvm:\n{}", vm.output());
    }
    let body = vec![b'x'; 70_000];
    let (n, v) = (
        call(np, "POST", "/echo", &body),
        call(vp, "POST", "/echo", &body),
    );
    assert_eq!(v.status, 200, "{}", vm.output());
    assert_eq!(v.body, n.body);
    assert_eq!(v.header("x-echo-length"), Some("70000"));
    // Module state never leaks from one request to the next.
    for _ in 0..3 {
        assert_eq!(get(vp, "/counter").text(), "counter 1\n", "{}", vm.output());
    }
    // Keep-alive and pipelining on one connection, each request its own fork.
    for r in keep_alive(vp, "/counter", "/") {
        assert_eq!(r.status, 200);
        assert!(r.text() == "counter 1\n" || r.text() == "hello from javascript\n");
    }
    // A thrown error and a rejected promise are 500s with the message logged.
    let log = vm.output();
    assert!(log.contains("the handler threw on purpose"), "{log}");
    assert!(log.contains("rejected on purpose"), "{log}");
    // A handler that never settles is a 504, and the next request is fine.
    assert_eq!(get(vp, "/pending").status, 504, "{}", vm.output());
    assert_eq!(get(vp, "/").text(), "hello from javascript\n");
    wrk(vp, "/");
}

#[test]
fn warm_up_runs_in_the_master_and_state_is_kept_when_not_ephemeral() {
    if !installed(NODE) {
        eprintln!("skipped: {NODE} is not installed");
        return;
    }
    warm_up_and_state(&[]);
}

#[test]
fn quickjs_warms_up_in_the_master_and_keeps_state_when_not_ephemeral() {
    warm_up_and_state(&["--engine", "quickjs"]);
}

fn warm_up_and_state(engine: &[&str]) {
    // Three warm-up requests in the master: every fork starts after them.
    let port = free_port();
    let mut flags = vec!["--warmup", "3"];
    flags.extend(engine);
    let vm = forkvm_js(port, &flags);
    for _ in 0..2 {
        assert_eq!(
            get(port, "/counter").text(),
            "counter 4\n",
            "{}",
            vm.output()
        );
    }
    // Over real sockets (an abstract AF_UNIX name inside the VM), so node's
    // socket code is compiled in the master, not in every fork.
    assert!(!vm.output().contains("in-memory stream"), "{}", vm.output());
    drop(vm);
    // Not ephemeral: one worker keeps the module's state between requests.
    let port = free_port();
    let mut flags = vec!["--warmup", "0", "--ephemeral", "false"];
    flags.extend(engine);
    let vm = forkvm_js(port, &flags);
    let seen: Vec<String> = (0..3).map(|_| get(port, "/counter").text()).collect();
    assert_eq!(
        seen,
        ["counter 1\n", "counter 2\n", "counter 3\n"],
        "{}",
        vm.output()
    );
}

#[test]
fn a_module_without_a_fetch_handler_is_a_clear_error() {
    if !installed(NODE) {
        eprintln!("skipped: {NODE} is not installed");
        return;
    }
    no_fetch_is_an_error(&[]);
}

#[test]
fn quickjs_says_so_of_a_module_without_a_fetch_handler() {
    no_fetch_is_an_error(&["--engine", "quickjs"]);
}

fn no_fetch_is_an_error(engine: &[&str]) {
    let dir = common::scratch_dir(&format!("js-no-handler{}", engine.len()));
    let bad = dir.join("bad.mjs");
    std::fs::write(&bad, "export const x = 1;\n").expect("write module");
    let out = Command::new(forkvm_bin())
        .args(["serve", "--listen", &format!("127.0.0.1:{}", free_port())])
        .args(engine)
        .arg(&bad)
        .output()
        .expect("run forkvm");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("has no default export with a fetch(request) method"),
        "{err}"
    );
}
