//! hello (Rust): answers every request with 200 "Hello from forkvm!\n" (text/plain),
//! like examples/c/hello.c.
//!
//! ```sh
//! examples/build.sh
//! forkvm serve examples/out/hello_rs
//! curl http://127.0.0.1:8080/
//! ```
//!
//! `main` initialises, then calls [`forkvm_guest::serve`]: `forkvm serve` snapshots the
//! program there and calls `handle` once per HTTP request in a fresh copy-on-write fork.
//! Natively, or under plain `forkvm run`, `serve` returns at once.

use forkvm_guest::{abi, respond, serve};

extern "C" fn handle(_req: *const abi::Request) {
    respond(
        200,
        b"Content-Type: text/plain; charset=utf-8",
        b"Hello from forkvm!\n",
    );
}

fn main() {
    serve(handle);
    eprintln!("hello: nothing to do here; serve me with `forkvm serve`");
}
