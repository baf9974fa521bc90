//! UNIX socket pairs and named listeners, POSIX timers and xattrs: real
//! guest programs compared with native runs.

mod common;

use common::{check, differential, installed, Case, LIBS};
use std::path::Path;

#[test]
fn unix_socket_pairs_named_listeners_rights_and_readiness_glibc() {
    let (native, _) = differential("unix_sockets.glibc", &[], &[]);
    // The program ends by dying of SIGPIPE; make sure it got that far.
    assert_eq!(native.status, 128 + 13, "{}", native.describe());
}

#[test]
fn unix_socket_pairs_named_listeners_rights_and_readiness_musl() {
    differential("unix_sockets.musl", &[], &[]);
}

/// SCM_CREDENTIALS claiming another uid, gid or pid is EPERM (it was
/// accepted), and recvmsg hands MSG_CMSG_CLOEXEC back in msg_flags (it did
/// not): both from Go's syscall tests.
#[test]
fn credentials_are_checked_and_cmsg_cloexec_is_reported() {
    differential("unix_creds.glibc", &[], &[]);
    differential("unix_creds.musl", &[], &[]);
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

#[test]
fn tokio_signal_driver_over_a_socketpair() {
    differential("tokio_signal_rs", &[], &[]);
}

#[test]
fn ruby_timer_threads_and_signals_without_warnings() {
    if !installed("/usr/bin/ruby") {
        return;
    }
    // Ruby's timer thread uses timer_create (else it warns "signals racy")
    // and wakes sleeping threads through an eventfd it polls.
    let script = r#"
t = Thread.new { sleep 0.05; :done }
r, w = IO.pipe
Signal.trap("USR1") { w.write "x" }
Process.kill("USR1", Process.pid)
puts r.read(1)
puts t.value
q = Queue.new
3.times.map { |i| Thread.new { q << i * i } }.each(&:join)
puts 3.times.map { q.pop }.sort.inspect
puts 1 + 1
"#;
    let mut flags: Vec<&str> = LIBS.to_vec();
    for d in [
        "/usr/share/ruby",
        "/usr/share/rubygems-integration",
        "/var/lib/gems",
        "/usr/local/lib/site_ruby",
    ] {
        if Path::new(d).exists() {
            flags.extend(["--allow-read", d]);
        }
    }
    let (_, vm) = check(&Case::new("/usr/bin/ruby").args(["-e", script]).flags(flags));
    assert!(vm.stderr.is_empty(), "{}", vm.describe());
}
