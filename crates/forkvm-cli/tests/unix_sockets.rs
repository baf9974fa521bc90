//! UNIX socket pairs, POSIX timers and xattrs (issue 8, items 7 and 8): real
//! guest programs compared with native runs.

mod common;

use common::{check, differential, Case};
use std::path::Path;

/// The --allow-read roots a dynamically linked Debian program needs.
const LIBS: &[&str] = &[
    "--allow-read",
    "/lib",
    "--allow-read",
    "/usr/lib",
    "--allow-read",
    "/lib64",
    "--allow-read",
    "/etc/ld.so.cache",
];

fn installed(p: &str) -> bool {
    let ok = Path::new(p).exists();
    if !ok {
        eprintln!("skipped: {p} is not installed");
    }
    ok
}

#[test]
fn socketpair_stream_dgram_seqpacket_rights_and_readiness_glibc() {
    let (native, _) = differential("unix_sockets.glibc", &[], &[]);
    // The program ends by dying of SIGPIPE; make sure it got that far.
    assert_eq!(native.status, 128 + 13, "{}", native.describe());
}

#[test]
fn socketpair_stream_dgram_seqpacket_rights_and_readiness_musl() {
    differential("unix_sockets.musl", &[], &[]);
}

#[test]
fn python_asyncio_self_pipe_and_socketpair() {
    if !installed("/usr/bin/python3") {
        return;
    }
    // asyncio's event loop wakes itself through a socketpair; the streams
    // API here runs over another one.
    let script = r#"
import asyncio, socket
async def main():
    a, b = socket.socketpair()
    r1, w1 = await asyncio.open_connection(sock=a)
    r2, w2 = await asyncio.open_connection(sock=b)
    w1.write(b"ping\n")
    await w1.drain()
    print("got", (await r2.readline()).decode().strip())
    w2.write(b"pong\n")
    await w2.drain()
    print("got", (await r1.readline()).decode().strip())
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    loop.call_soon_threadsafe(fut.set_result, "woken from a thread")
    print(await fut)
    print(await loop.run_in_executor(None, sum, range(10)))
    await asyncio.sleep(0.01)
    w1.close()
    print("eof", await r2.read())
    w2.close()
asyncio.run(main())
print(socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)[0].type)
"#;
    check(
        &Case::new("/usr/bin/python3")
            .args(["-c", script])
            .flags(LIBS.iter().copied()),
    );
}

#[test]
fn posix_timers_signal_none_absolute_and_default_action() {
    for prog in ["posix_timers.glibc", "posix_timers.musl"] {
        let (native, _) = differential(prog, &[], &[]);
        assert_eq!(native.status, 128 + 14, "{}", native.describe());
    }
}
