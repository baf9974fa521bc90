//! Real programs nobody wrote for forkvm, run natively and under `forkvm run`:
//! threads, signal handlers, and dynamically linked programs from Debian.
//! (Their file-system calls are in `fs_semantics.rs`.)

mod common;

use common::{check, differential, glibc_and_musl, glibc_and_musl_in_a_dir, installed, Case, LIBS};

/// `node -e script`, natively and under forkvm (with room for V8's heap).
fn node_script(script: &str) {
    check(
        &Case::new("/usr/bin/node")
            .args(["-e", script])
            .flags(["--memory", "1024"])
            .limit(std::time::Duration::from_secs(60)),
    );
}

#[test]
fn pthreads_mutex_and_condvar_glibc() {
    differential("pthreads.glibc", &[], &[]);
}

#[test]
fn pthreads_mutex_and_condvar_musl() {
    differential("pthreads.musl", &[], &[]);
}

/// Calls taking a process or thread id, made with a thread's own id: glibc's
/// `pthread_getattr_np` asks `sched_getaffinity` with it, and the JVM stops
/// at start-up when that fails (it did, ESRCH, before threads' ids counted).
#[test]
fn per_thread_id_calls_glibc() {
    differential("thread_ids.glibc", &[], &[]);
}

#[test]
fn per_thread_id_calls_musl() {
    differential("thread_ids.musl", &[], &[]);
}

#[test]
fn rust_threads_and_channels() {
    differential("threads_rs", &[], &[]);
}

#[test]
fn sigsegv_handler_recovers_with_siglongjmp_glibc() {
    differential("sigsegv_recover.glibc", &[], &[]);
}

#[test]
fn sigsegv_handler_recovers_with_siglongjmp_musl() {
    differential("sigsegv_recover.musl", &[], &[]);
}

/// Threads keep live values in xmm/ymm registers, MXCSR and the x87 control
/// word across many preemption ticks with no syscall between, and signal
/// handlers see and restore the interrupted code's vector state through the
/// frame. Before each thread had its own extended state, every run failed;
/// repeated because a preemption lands at a different place each time.
#[test]
fn vector_state_survives_preemption_and_signals_glibc() {
    for _ in 0..3 {
        differential("vector_state.glibc", &[], &[]);
    }
}

#[test]
fn vector_state_survives_preemption_and_signals_musl() {
    for _ in 0..3 {
        differential("vector_state.musl", &[], &[]);
    }
}

/// A handler that writes garbage over the saved vector state: Linux refuses
/// the frame at sigreturn (SIGSEGV); so must forkvm, without loading it.
#[test]
fn garbage_vector_state_in_a_signal_frame_is_refused() {
    let (native, _) = differential("vector_state.glibc", &["scribble"], &[]);
    assert_eq!(native.status, 139, "{}", native.describe());
}

#[test]
fn python3_script_with_stdlib_and_an_allowed_file() {
    if !installed("/usr/bin/python3") {
        return;
    }
    let dir = common::scratch_dir("python3");
    let data = dir.join("data.json");
    std::fs::write(
        &data,
        r#"{"words": ["forkvm", "runs", "python", "runs"], "n": 7}"#,
    )
    .expect("write data");
    let script = r#"
import json, re, hashlib, math, datetime, collections, sys
d = json.load(open(sys.argv[1]))
c = collections.Counter(d["words"])
print(sorted(c.items()))
print(re.sub(r"[aeiou]", "_", " ".join(d["words"])))
print(hashlib.sha256(b"forkvm").hexdigest())
print(math.factorial(d["n"]), round(math.sqrt(2), 12))
print(datetime.date(2026, 11, 21).isoformat(), datetime.timedelta(days=3))
"#;
    let mut flags: Vec<String> = LIBS.iter().map(|s| s.to_string()).collect();
    flags.extend(["--allow-read".into(), dir.display().to_string()]);
    check(
        &Case::new("/usr/bin/python3")
            .args(["-S", "-c", script, data.to_str().expect("utf-8 path")])
            .flags(flags),
    );
}

#[test]
fn the_dynamic_loader_run_as_the_program_loads_one() {
    // `ld.so PROGRAM` (what ldd does): the loader is a shared object without
    // an interpreter, which the kernel maps high, leaving 0x400000 to a
    // non-PIE program (Debian's python3 is one). It used to sit there itself.
    if !installed("/usr/bin/python3") || !installed("/lib64/ld-linux-x86-64.so.2") {
        return;
    }
    let mut flags: Vec<String> = LIBS.iter().map(|s| s.to_string()).collect();
    flags.extend(["--allow-read".into(), "/usr/bin".into()]);
    let (_, vm) = check(
        &Case::new("/lib64/ld-linux-x86-64.so.2")
            .args([
                "/usr/bin/python3",
                "-S",
                "-c",
                "import sys; print(sys.version_info[0], sum(range(10**6)), len(bytearray(1 << 25)))",
            ])
            .flags(flags.clone()),
    );
    assert!(vm.stdout_str().starts_with("3 "), "{}", vm.describe());
    // The objects ldd lists, the vDSO included, by name (the addresses differ).
    let names = |out: &str| -> Vec<String> {
        out.lines()
            .map(|l| l.split(" (0x").next().unwrap_or(l).trim().to_string())
            .collect()
    };
    let case = Case::new("/lib64/ld-linux-x86-64.so.2")
        .args(["--list", "/usr/bin/python3"])
        .flags(flags);
    let (native, vm) = (case.run_native(), case.run_forkvm());
    assert_eq!(native.status, vm.status, "{}", vm.describe());
    assert!(
        names(&native.stdout_str()).len() > 1,
        "{}",
        native.describe()
    );
    assert_eq!(
        names(&native.stdout_str()),
        names(&vm.stdout_str()),
        "{}",
        vm.describe()
    );
}

#[test]
fn lua_script() {
    if !installed("/usr/bin/lua5.4") {
        return;
    }
    let script = "local t = {} for i = 1, 10 do t[#t+1] = i * i end print(table.concat(t, ',')) \
                  print(string.format('%.3f', math.pi), #'forkvm')";
    check(
        &Case::new("/usr/bin/lua5.4")
            .args(["-e", script])
            .flags(LIBS.to_vec()),
    );
}

fn busybox() -> Option<&'static str> {
    installed("/bin/busybox").then_some("/bin/busybox")
}

#[test]
fn busybox_text_tools() {
    let Some(bb) = busybox() else { return };
    let dir = common::scratch_dir("busybox");
    let f = dir.join("words.txt");
    std::fs::write(&f, "pear\napple\nfig\napple\nbanana\n").expect("write");
    let file = f.to_str().expect("utf-8 path");
    let allow = ["--allow-read", dir.to_str().expect("utf-8 path")];
    for args in [
        vec!["sha256sum", file],
        vec!["sort", file],
        vec!["wc", file],
        vec!["awk", "{ n += length($0) } END { print n, NR }", file],
        vec!["sed", "s/a/A/g", file],
    ] {
        check(&Case::new(bb).args(args).flags(allow));
    }
}

#[test]
fn busybox_ls_of_an_allowed_directory() {
    let Some(bb) = busybox() else { return };
    let dir = common::scratch_dir("busybox-ls");
    for (name, body) in [("a.txt", "1"), ("b.txt", "22"), ("c.txt", "333")] {
        std::fs::write(dir.join(name), body).expect("write");
    }
    std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
    let d = dir.to_str().expect("utf-8 path");
    // `ls -l`: times in a fixed zone; the listing is sorted by name on both
    // sides. Owners differ by design: the guest sees the invoking user's files
    // as its own uid 1000 (docs/design.md, "Identity"), so they are masked.
    check(
        &Case::new(bb)
            .args(["ls", "-l", d])
            .normalize(mask_owners)
            .flags([
                "--allow-read",
                d,
                "--allow-read",
                "/etc/passwd",
                "--allow-read",
                "/etc/group",
                "--env",
                "TZ=UTC",
            ]),
    );
}

/// `ls -l` lines with the owner and group columns replaced.
fn mask_owners(out: &str) -> String {
    out.lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 4 {
                f[2] = "OWNER";
                f[3] = "GROUP";
            }
            f.join(" ") + "\n"
        })
        .collect()
}

#[test]
fn go_goroutines_channels_timers_gc_and_a_file() {
    let prog = common::guests_out().join("goroutines");
    if !prog.exists() {
        eprintln!("skipped: Go is not installed, so tests/guests/go was not built");
        return;
    }
    let dir = common::scratch_dir("go");
    let f = dir.join("input.txt");
    std::fs::write(&f, "forkvm runs Go\n").expect("write");
    let d = dir.to_str().expect("utf-8 path").to_string();
    check(
        &Case::new(prog)
            .args([f.to_str().expect("utf-8 path")])
            .flags(["--allow-read", d.as_str()]),
    );
}

#[test]
fn synthetic_proc_shows_the_guest_not_the_host() {
    let Some(bb) = busybox() else { return };
    let run = common::forkvm(&[
        "run",
        bb,
        "cat",
        "/proc/self/maps",
        "/proc/meminfo",
        "/proc/self/status",
    ]);
    common::assert_host_exited_normally(&run);
    let out = run.stdout_str();
    assert!(
        out.contains("[stack]") && out.contains("MemTotal:"),
        "{out}"
    );
    assert!(out.contains("Name:\tbusybox"), "{out}");
    // The host's own mappings (its libc, the forkvm binary) never appear.
    assert!(!out.contains(".so") && !out.contains("forkvm-cli"), "{out}");
    let exe = common::forkvm(&["run", bb, "head", "-c", "4", "/proc/self/exe"]);
    assert_eq!(&exe.stdout[..], b"\x7fELF");
}

#[test]
fn allow_write_is_a_scratch_area_and_nothing_more() {
    let Some(bb) = busybox() else { return };
    let base = common::scratch_dir("allow-write");
    let (rw, ro) = (base.join("rw"), base.join("ro"));
    std::fs::create_dir_all(&rw).expect("mkdir");
    std::fs::create_dir_all(&ro).expect("mkdir");
    std::fs::write(ro.join("keep.txt"), "original").expect("write");
    std::os::unix::fs::symlink(ro.join("keep.txt"), rw.join("link")).expect("symlink");
    let (rw_s, ro_s) = (rw.to_str().expect("utf-8"), ro.to_str().expect("utf-8"));
    let run = |args: &[&str]| {
        let mut all = vec!["run", "--allow-write", rw_s, "--allow-read", ro_s, bb];
        all.extend_from_slice(args);
        let r = common::forkvm(&all);
        common::assert_host_exited_normally(&r);
        r
    };
    let f = format!("{rw_s}/new.txt");
    assert_eq!(run(&["cp", &format!("{ro_s}/keep.txt"), &f]).status, 0);
    assert_eq!(std::fs::read_to_string(&f).expect("created"), "original");
    assert_eq!(run(&["mkdir", &format!("{rw_s}/sub")]).status, 0);
    assert_eq!(run(&["mv", &f, &format!("{rw_s}/sub/moved.txt")]).status, 0);
    assert!(rw.join("sub/moved.txt").exists());
    // Outside the scratch area nothing changes: read-only roots, `..`, and a
    // symlink that points out are all refused.
    assert_ne!(
        run(&[
            "cp",
            &format!("{rw_s}/sub/moved.txt"),
            &format!("{ro_s}/keep.txt")
        ])
        .status,
        0
    );
    // (Above the write root is the host's directory, read-only, unless the
    // checkout is in the host's /tmp: the guest's private /tmp is there then,
    // and the file lands in it. Either way the host's directory stays as it is.)
    let escaped = run(&["touch", &format!("{rw_s}/../escaped")]);
    if !base.starts_with("/tmp") {
        assert_ne!(escaped.status, 0);
    }
    assert_ne!(
        run(&[
            "cp",
            &format!("{rw_s}/sub/moved.txt"),
            &format!("{rw_s}/link")
        ])
        .status,
        0
    );
    assert_eq!(
        std::fs::read_to_string(ro.join("keep.txt")).expect("read"),
        "original"
    );
    assert!(!base.join("escaped").exists());
    assert_eq!(run(&["rm", "-r", &format!("{rw_s}/sub")]).status, 0);
    assert!(!rw.join("sub").exists());
}

#[test]
fn tokio_runtime_timers_channels_and_blocking_tasks() {
    differential("tokio_rs", &[], &[]);
}

#[test]
fn signal_to_another_thread_runs_its_handler_there() {
    glibc_and_musl("thread_signal");
}

/// A signal for the process that the running thread blocks goes to a
/// thread that does not (it waited in the queue; Go's crash dump, which
/// relays SIGQUIT from thread to thread, showed one thread of four).
#[test]
fn a_process_signal_reaches_a_thread_that_does_not_block_it() {
    glibc_and_musl("signal_routing");
}

/// A signal ends another thread's nanosleep or clock_nanosleep at once with
/// EINTR and the time left (the sleep ran to its end first).
#[test]
fn a_signal_ends_another_threads_sleep() {
    glibc_and_musl("thread_sleep_signal");
}

/// pthread_kill of a thread blocked in a read or a write ends the call as
/// on Linux: EINTR, a restart under SA_RESTART, the count a write had sent.
/// (The handler ran and the call went on waiting: python's
/// test_socketserver test_write hung.)
#[test]
fn signal_to_a_blocked_thread_ends_its_call() {
    glibc_and_musl("thread_interrupt");
}

/// sigaltstack is per thread: one thread's used to be every thread's, so
/// Go's signal handlers (each thread has its own signal stack) overwrote
/// each other's frames and crashed under a stream of signals.
#[test]
fn each_thread_has_its_own_signal_stack() {
    glibc_and_musl("thread_altstack");
}

/// /proc/self/cmdline exists (it did not) and reads the argument strings
/// from the program's memory, as Linux does.
#[test]
fn proc_self_cmdline_is_the_argument_strings() {
    for libc in ["glibc", "musl"] {
        differential(&format!("proc_cmdline.{libc}"), &["a", "b c", ""], &[]);
    }
}

#[test]
fn interval_timers_and_sigalrm() {
    glibc_and_musl("alarm");
}

/// sysinfo, /proc/meminfo and sysconf(_SC_PHYS_PAGES) give one RAM size,
/// the memory limit, also for a dynamically linked program, whose address
/// space is far larger (sysinfo used to report the address space: 8 GiB).
#[test]
fn the_memory_limit_is_the_ram_every_interface_reports() {
    differential("memory_size.dyn", &[], &[]);
    let guest = common::guest("memory_size.dyn");
    let run = common::forkvm(&[
        "run",
        "--memory",
        "300",
        guest.to_str().expect("utf-8 path"),
        "print",
    ]);
    assert!(
        run.stdout_str().contains("MemTotal 307200 kB"),
        "{}",
        run.describe()
    );
}

/// `tests/guests/java/<class>.java` compiled with javac, then run with java
/// natively and in forkvm (classes readable), compared. Nothing without a JDK.
fn java_differential(class: &str) {
    if !installed("/usr/bin/java") || !installed("/usr/bin/javac") {
        return;
    }
    let dir = common::scratch_dir(&format!("java-{}", class.to_lowercase()));
    let src = common::repo_root().join(format!("tests/guests/java/{class}.java"));
    let status = std::process::Command::new("/usr/bin/javac")
        .arg("-d")
        .arg(&dir)
        .arg(&src)
        .status()
        .expect("run javac");
    assert!(status.success(), "javac failed");
    let classes = dir.to_str().expect("utf-8 path");
    check(
        &Case::new("/usr/bin/java")
            .args(["-cp", classes, class])
            .flags(["--allow-read", classes])
            .limit(std::time::Duration::from_secs(120)),
    );
}

/// OpenJDK at forkvm's defaults: it sizes its heap from the RAM sysinfo
/// reports and calls sched_getaffinity with each thread's id (it stopped at
/// start-up on both before). GC, a thread pool and JIT-compiled loops.
#[test]
fn java_threads_gc_and_jit_at_default_memory() {
    java_differential("Threads");
}

/// The JVM's NetworkInterface (interface ioctls on a socket, then
/// /proc/net/if_inet6): `getNetworkInterfaces` threw "Inappropriate ioctl
/// for device" before, which network libraries meet at start-up.
#[test]
fn java_lists_the_loopback_interface() {
    java_differential("Interfaces");
}

/// TCP between a program's own sockets: blocking and nonblocking connects to
/// its listener over IPv4 and IPv6, data both ways, names that agree, and a
/// closed port refused. The connect was refused (no network) before.
#[test]
fn tcp_over_loopback_inside_one_program() {
    glibc_and_musl("tcp_loopback");
}

/// UDP between a run's own sockets (and a child's): datagrams both ways
/// with the sender bound on its first send, IPv4, IPv6 and dual stack,
/// connect, truncation, readiness, a connected socket hearing only its peer,
/// a port nothing listens on, ports in use. `socket()` was EACCES before.
/// Also through exits only, which the poller otherwise spares these calls.
#[test]
fn udp_over_loopback_inside_one_run() {
    glibc_and_musl("udp");
    differential("udp.musl", &[], &["--syscalls", "exit"]);
}

/// The interfaces as programs list them: glibc's and musl's getifaddrs and
/// if_nameindex, and a route netlink request by hand (the VM has `lo`, as
/// every Linux machine does). `socket(AF_NETLINK)` was EACCES, so node's
/// `os.networkInterfaces()` threw and Go's `net.Interfaces` failed.
#[test]
fn interfaces_list_the_loopback_one() {
    glibc_and_musl("ifaddrs");
    if installed("/usr/bin/node") {
        node_script(
            "const lo = require('os').networkInterfaces().lo; \
             console.log(lo.map(a => a.cidr + ' ' + a.mac + ' ' + a.internal).join(', '))",
        );
    }
}

/// node's child_process under the default --memory: libuv spawns with a plain
/// fork, whose copy of node's memory was charged in full (two nodes did not fit
/// 256 MiB: spawnSync failed with ENOMEM); a fork child now borrows it until
/// its execve, as a vfork child does.
#[test]
fn node_spawns_children_under_the_default_memory_limit() {
    if !installed("/usr/bin/node") {
        return;
    }
    let script = "const cp = require('child_process'); \
        console.log(cp.execFileSync('/usr/bin/echo', ['spawned']).toString().trim()); \
        console.log(cp.spawnSync('/usr/bin/sh', ['-c', 'exit 3']).status); \
        cp.exec('echo $((6 * 7))', (e, out) => console.log(e, out.trim()));";
    check(
        &Case::new("/usr/bin/node")
            .args(["-e", script])
            .flags(["--env", "PATH=/usr/bin:/bin", "--allow-read", "/usr/bin"])
            .limit(std::time::Duration::from_secs(60)),
    );
}

/// node's `http.get` of its own `http` server, as tests and in-process
/// clients do.
#[test]
fn node_http_client_reaches_its_own_server() {
    if !installed("/usr/bin/node") {
        return;
    }
    let script = "const http = require('http'); \
        const s = http.createServer((q, r) => r.end('ok ' + q.method + ' ' + q.url)); \
        s.listen(0, '127.0.0.1', () => http.get('http://127.0.0.1:' + s.address().port + '/x', res => { \
          let b = ''; res.on('data', d => b += d); \
          res.on('end', () => { console.log(res.statusCode, b); s.close(); }); }));";
    node_script(script);
}

/// MAP_SHARED: writes through a file mapping reach the file (they stayed in
/// a private copy, silently, before), mremap growth, MADV_DONTNEED, anonymous
/// and /dev/zero memory shared with a forked child, and a file truncated
/// under its mappings whose pages are handed to system calls (that killed
/// forkvm with SIGBUS before).
#[test]
fn shared_mappings_reach_the_file_and_the_child() {
    glibc_and_musl_in_a_dir("shared_mappings");
}

/// SysV shared memory (PostgreSQL's interlock segment, older servers'
/// shared state): a segment shared with forked children both ways,
/// shm_nattch through attach, fork, detach, munmap, exec and exit, keys with
/// IPC_CREAT/IPC_EXCL, permissions for the unprivileged user, a removed
/// segment living until its last detach, and Linux's errnos (shmget was
/// ENOSYS: initdb failed with "could not create shared memory segment").
#[test]
fn sysv_shared_memory_is_shared_with_children() {
    glibc_and_musl_in_a_dir("sysv_shm");
}

/// Memory rights are enforced as on Linux: a write to a read-only page is
/// a SIGSEGV (SEGV_ACCERR, at the address) whose handler can make the page
/// writable and return; PROT_NONE and munmap'd memory fault; read() into a
/// read-only buffer is EFAULT; a forked child has its parent's rights; a
/// thread overflowing its stack hits its guard page. Before, mprotect was
/// bookkeeping only: every one of these read or wrote the memory.
#[test]
fn memory_protection_is_enforced() {
    glibc_and_musl("memory_protection");
}

/// mremap keeps a mapping's rights: a read-only or PROT_NONE mapping that
/// moved or grew stays so (it became writable and readable: writes to a
/// moved read-only mapping went through), its bytes move with it, and the
/// old range and a shrunk tail are gone.
#[test]
fn mremap_keeps_a_mappings_rights() {
    glibc_and_musl("mremap_rights");
}

/// F_SETFL's O_APPEND decides where writes land, and the CPU-time clocks
/// never go backwards (both were silently wrong: appending after O_APPEND was
/// cleared, and the poller's thread answering for the CPU clocks).
#[test]
fn append_flag_and_cpu_clocks() {
    glibc_and_musl_in_a_dir("append_and_cpu_clocks");
}

/// Edge-triggered epoll reports a socket again after it was drained and
/// refilled between two looks (loopback TCP and AF_UNIX lost the edge, so
/// Go's netpoller, which always uses EPOLLET, hung in ping-pong traffic).
#[test]
fn epoll_edges_survive_a_drain_and_refill() {
    glibc_and_musl("epoll_edges");
}

/// An epoll set inside another, or under poll/select, is readable when it
/// has an event (it never was: a nested event loop waited forever; LTP's
/// epoll_wait09); loops and nesting past 4 are ELOOP, /dev/null and
/// /dev/zero EPERM, in Linux's order of checks (epoll_ctl04-07); and with
/// more descriptors ready than a call takes, the calls go round all of
/// them (the first three were reported every time, the rest never:
/// epoll_wait14).
#[test]
fn epoll_sets_nest_and_report_fairly() {
    glibc_and_musl("epoll_sets");
}

/// TCP urgent data (MSG_OOB): reads stop at the mark, the byte is out of the
/// stream or inline (SO_OOBINLINE), POLLPRI and select's exceptional set
/// show it (ftplib's abort and asyncore's handle_expt got EOPNOTSUPP).
#[test]
fn tcp_urgent_data_as_on_linux() {
    glibc_and_musl("tcp_urgent");
}

/// splice, tee and vmsplice move bytes between pipes, files, TCP sockets and
/// guest memory, block and fail as on Linux (all three were EINVAL, so
/// programs without a read/write fallback stopped, and Go's io.Copy between
/// sockets always fell back).
#[test]
fn splice_tee_and_vmsplice_as_on_linux() {
    glibc_and_musl_in_a_dir("splice");
}

/// ITIMER_VIRTUAL and ITIMER_PROF fire on CPU time (they were EINVAL, so
/// profilers got nothing), and clocks named by number work: CLOCK_TAI and
/// the CPU clocks of clock_getcpuclockid and pthread_getcpuclockid.
#[test]
fn cpu_time_timers_and_clocks_by_number() {
    glibc_and_musl("cpu_timers");
}

/// The Go toolchain links inside forkvm: its linker sizes the output with
/// fallocate and writes it through a shared mapping (it stopped at
/// fallocate, ENOSYS, and would have written nothing). The build cache is
/// filled natively first, so the run is the link (and a check of the cache).
#[test]
fn go_build_links_a_working_binary() {
    let go = "/usr/local/go/bin/go";
    if !installed(go) {
        return;
    }
    let dir = common::scratch_dir("go-build");
    let src = common::repo_root().join("tests/guests/go");
    let d = dir.to_str().expect("utf-8 path");
    for f in ["main.go", "go.mod"] {
        std::fs::copy(src.join(f), dir.join(f)).expect("copy the Go program");
    }
    std::fs::create_dir_all(dir.join("tmp")).expect("tmp");
    let env = [
        "PATH=/usr/local/go/bin:/usr/bin:/bin".to_string(),
        format!("HOME={d}"),
        format!("GOCACHE={d}/cache"),
        format!("GOPATH={d}/gopath"),
        format!("TMPDIR={d}/tmp"),
        "CGO_ENABLED=0".to_string(),
        "GOFLAGS=-mod=mod".to_string(),
        "GOTOOLCHAIN=local".to_string(),
    ];
    let mut native = std::process::Command::new(go);
    native
        .args(["build", "-o", "native.out", "."])
        .current_dir(&dir)
        .env_clear();
    for kv in &env {
        let (k, v) = kv.split_once('=').expect("K=V");
        native.env(k, v);
    }
    assert!(
        native.status().expect("run go").success(),
        "native go build"
    );
    let mut args = vec![
        "run",
        "--memory",
        "2048",
        "--cwd",
        d,
        "--allow-read",
        "/usr",
        "--allow-read",
        "/etc",
        "--allow-write",
        d,
    ];
    for kv in &env {
        args.extend(["--env", kv.as_str()]);
    }
    args.extend([go, "build", "-o", "forkvm.out", "."]);
    let run = common::forkvm(&args);
    assert_eq!(run.status, 0, "{}", run.describe());
    let built = std::process::Command::new(dir.join("forkvm.out"))
        .output()
        .expect("run the binary linked in forkvm");
    let reference = std::process::Command::new(dir.join("native.out"))
        .output()
        .expect("run the binary linked natively");
    assert!(built.status.success(), "the binary linked in forkvm fails");
    assert_eq!(built.stdout, reference.stdout);
}

/// A blocking write or writev of megabytes into a pipe read by another
/// thread or a child: every byte goes in before the call returns (it
/// returned what fitted, 64 KiB, and python's os.write lost the rest).
///
/// F_SETPIPE_SZ sizes a pipe as Linux does (it was EINVAL; F_GETPIPE_SZ
/// always said 64 KiB).
#[test]
fn big_blocking_pipe_writes_complete() {
    glibc_and_musl("pipe_writes");
}

/// SA_RESTART makes an interrupted read go on (it failed with EINTR), a
/// signal a handler raises again runs after it returns (it was lost), and
/// the SIGTERM idiom of node (reset, raise again) ends the process.
/// SA_RESETHAND resets only the handler, keeping the flags (they were
/// cleared too: LTP's sigaction01).
#[test]
fn restarted_calls_and_signals_raised_in_handlers() {
    glibc_and_musl("signal_restart");
}

/// recv(MSG_WAITALL) and recvmsg(MSG_WAITALL) on a blocking stream return
/// the whole length (they returned what was queued), over AF_UNIX and
/// loopback TCP.
#[test]
fn recv_waitall_waits_for_the_whole_length() {
    glibc_and_musl("recv_waitall");
}

/// select counts an error condition as readable and writable, and only
/// POLLPRI as exceptional (a select on a pipe whose reader is gone waited
/// for ever: python's communicate() without poll, asyncio's select loop).
#[test]
fn select_sorts_errors_as_linux_does() {
    glibc_and_musl("select_sets");
}

/// Loopback TCP after the peer's close is Linux's: POLLIN|POLLRDHUP and EOF
/// (it also said POLLHUP), the first send succeeds and draws a reset
/// (POLLERR|POLLHUP), the next is EPIPE with SIGPIPE (the first was); half
/// closes, a close with unread data or with SO_LINGER 0 (ECONNRESET: the
/// latter was a FIN) and SHUT_RD as well.
#[test]
fn tcp_close_is_a_fin_not_a_hangup() {
    glibc_and_musl("tcp_close");
}

/// Pseudo-terminals: posix_openpt/grantpt/unlockpt/ptsname, ttyname and
/// stat of /dev/pts/N, termios with canonical editing and echo, raw mode,
/// window size, a child in its own session that reads the slave and gets
/// SIGINT from ^C and writes through /dev/tty, its controlling terminal
/// (ENXIO before it has one; it was EACCES), EIO on the master once the
/// slave is closed, EOF and EIO on the slave once the master is
/// (`open("/dev/ptmx")` was refused).
#[test]
fn pseudo_terminals_behave_as_on_linux() {
    glibc_and_musl("pty");
}

/// A TCP socket bound before connect keeps its port (the connection used a
/// fresh one), and a dual-stack server binds `0.0.0.0:P` and an
/// IPV6_V6ONLY `[::]:P` (EADDRINUSE).
#[test]
fn tcp_names_follow_bind() {
    glibc_and_musl("tcp_names");
}

/// sendfile to a blocking socket whose buffer is full waits for room (it
/// failed with EAGAIN).
#[test]
fn sendfile_to_a_full_blocking_socket_waits() {
    glibc_and_musl("sendfile_blocking");
}

/// A write to a pipe without readers raises SIGPIPE: ignored, caught, in a
/// child and in the program itself (exit 141). It used to return EPIPE only,
/// so `yes | head -1` never ended.
#[test]
fn pipe_writes_without_a_reader_raise_sigpipe() {
    glibc_and_musl("sigpipe");
}

/// The shell idiom that needs it: the producer dies of SIGPIPE once its
/// reader has what it wants, and the pipeline goes on.
#[test]
fn a_pipeline_ends_when_its_reader_does() {
    let Some(bb) = busybox() else { return };
    check(&Case::new(bb).args([
        "sh",
        "-c",
        "yes | head -n 2; while :; do echo x; done | head -n 1; echo status $?",
    ]));
}

/// sigwait, sigwaitinfo and sigtimedwait: a pending signal, one sent by a
/// thread while waiting (it killed the process, as if unblocked), a timer's,
/// timeouts, and a signal outside the set left pending.
#[test]
fn signals_taken_synchronously_with_sigwait() {
    glibc_and_musl("sigwait");
}

/// /proc/self/stat, /proc/self/statm and /proc/stat in the shapes programs
/// parse: node's process.memoryUsage() threw ENOENT without the first, and
/// os.cpus() was empty without the last (a worker pool sized by it: none).
#[test]
fn proc_stat_files_have_the_shape_programs_parse() {
    if installed("/usr/bin/python3") {
        let script = "s = open('/proc/self/stat').read().split(); m = open('/proc/self/statm').read().split(); \
                      c = [l for l in open('/proc/stat') if l.startswith('cpu')]; \
                      print(len(s), s[2].isalpha(), int(s[23]) > 0, len(m), int(m[1]) > 0, len(c) >= 2, len(c[1].split()) >= 8)";
        check(&Case::new("/usr/bin/python3").args(["-S", "-c", script]));
    }
    if installed("/usr/bin/node") {
        let script = "const os = require('os'); const m = process.memoryUsage(); \
                      console.log(m.rss > 0, os.cpus().length >= 1, typeof os.cpus()[0].model, process.cpuUsage().user >= 0)";
        node_script(script);
    }
}

/// GNU sort with two threads comparing floating-point keys (it gave wrong
/// output or crashed while threads shared one set of vector registers).
#[test]
fn gnu_sort_parallel_floating_point_keys() {
    if !installed("/usr/bin/sort") {
        return;
    }
    let dir = common::scratch_dir("sort-parallel");
    let input = dir.join("numbers.txt");
    // A fixed pseudo-random sequence (xorshift), large enough that sort splits the work.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut text = String::new();
    for _ in 0..150_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = (x % 2_000_000_000) as f64 / 1000.0 - 1_000_000.0;
        text.push_str(&format!("{v:.3} {}\n", x >> 24));
    }
    std::fs::write(&input, text).expect("write input");
    let file = input.to_str().expect("utf-8 path");
    let mut flags: Vec<String> = LIBS.iter().map(|s| s.to_string()).collect();
    flags.extend(["--allow-read".into(), file.into()]);
    for _ in 0..2 {
        check(
            &Case::new("/usr/bin/sort")
                .args(["-g", "--parallel=2", "-S", "50M", file])
                .flags(flags.clone()),
        );
    }
}

/// python's os.path.exists, isfile, isdir, listdir and access see the
/// guest's /proc and /etc files and devices as Linux's (exists was False
/// for /proc/self/status though open worked).
#[test]
fn python_sees_proc_and_etc_files_exist() {
    if !installed("/usr/bin/python3") {
        return;
    }
    let script = "import os\n\
        for p in ['/proc/self/status', '/proc/meminfo', '/proc/cpuinfo', '/etc/passwd', '/etc/hosts', \
                  '/proc/self', '/proc/self/fd', '/dev/null', '/dev/./null']:\n    \
            print(p, os.path.exists(p), os.path.isfile(p), os.path.isdir(p))\n\
        print(sorted(x for x in os.listdir('/proc/self') if x in ('status', 'maps', 'fd', 'task', 'cwd', 'exe')))\n\
        print(os.access('/proc/self/status', os.R_OK))";
    check(&Case::new("/usr/bin/python3").args(["-S", "-c", script]));
}

/// Calls python's own test suite (test_posix, test_mmap) found answered
/// unlike Linux: fexecve (execveat with AT_EMPTY_PATH was ENOSYS, and the
/// /dev/fd/N fallback EACCES), posix_spawn setting only the scheduling
/// parameter (sched_setparam took its unused third register for a pointer:
/// EFAULT), sched_getscheduler of the parent (ESRCH), sched_rr_get_interval
/// (ENOSYS), msync of an unaligned address (accepted; EINVAL on Linux) and
/// pidfd_send_signal with a /proc/<pid> descriptor (EBADF; test_signal).
#[test]
fn python_posix_calls_as_on_linux() {
    let script = "import os, sys, mmap\n\
        fd = os.open(sys.executable, os.O_RDONLY)\n\
        pid = os.fork()\n\
        if pid == 0:\n\
        \x20   os.execve(fd, [sys.executable, '-S', '-c', 'print(\"fexecve ran\")'], {})\n\
        print('fexecve', os.waitpid(pid, 0)[1])\n\
        pid = os.posix_spawn(sys.executable, [sys.executable, '-S', '-c', 'pass'], {}, scheduler=(None, os.sched_param(0)))\n\
        print('spawn', os.waitpid(pid, 0)[1])\n\
        print('parent policy', os.sched_getscheduler(os.getppid()))\n\
        i = os.sched_rr_get_interval(0)\n\
        print('rr interval', 0 <= i < 1)\n\
        m = mmap.mmap(-1, 16)\n\
        print('flush', m.flush())\n\
        try:\n\
        \x20   m.flush(1, 6)\n\
        except OSError as e:\n\
        \x20   print('flush unaligned', e.errno)\n\
        import signal\n\
        d = os.open(f'/proc/{os.getpid()}', os.O_DIRECTORY)\n\
        try:\n\
        \x20   signal.pidfd_send_signal(d, signal.SIGINT)\n\
        except KeyboardInterrupt:\n\
        \x20   print('pidfd_send_signal with a /proc/<pid> descriptor')";
    check(&Case::new("/usr/bin/python3").args(["-S", "-c", script]));
}

/// /proc/self/status shows the signal masks (SigBlk, SigIgn, SigCgt) as
/// Linux does: python's test_subprocess skipped test_restore_signals
/// without SigIgn.
#[test]
fn proc_status_shows_the_signal_masks() {
    let script = "import signal\n\
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n\
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])\n\
        want = ('SigPnd', 'ShdPnd', 'SigBlk', 'SigIgn', 'SigCgt')\n\
        # Real-time signals the test harness may ignore are left out.\n\
        for l in open('/proc/self/status'):\n\
        \x20   k, _, v = l.partition(':')\n\
        \x20   if k in want:\n\
        \x20       print(k, hex(int(v, 16) & 0x7fffffff))";
    check(&Case::new("/usr/bin/python3").args(["-S", "-c", script]));
}

/// A loopback TCP connection takes a 1.5 MB blocking write with nobody
/// reading yet, as Linux's autotuned buffers do (it hung at 208 KiB, so a
/// Tcl server writing a big reply to its own client never returned), and a
/// set SO_SNDBUF bounds it again.
#[test]
fn tcp_loopback_buffers_megabytes() {
    glibc_and_musl("tcp_buffer");
}

/// /proc/uptime and /proc/loadavg exist, parse as Linux's and are listed
/// (they were ENOENT: uptime(1) failed and glibc's getloadavg was -1).
#[test]
fn proc_uptime_and_loadavg() {
    glibc_and_musl("proc_load");
}

/// node's `fetch` (undici parses HTTP with WebAssembly, for which V8
/// reserves ~10 GiB of address space) of its own server, under the default
/// address space: it failed with "Cannot allocate Wasm memory" in 8 GiB.
#[test]
fn node_fetch_and_webassembly_fit_the_default_address_space() {
    if !installed("/usr/bin/node") {
        return;
    }
    let script = "const http = require('http'); \
        const m = new WebAssembly.Memory({ initial: 1 }); \
        const s = http.createServer((q, r) => r.end('ok ' + q.method + ' ' + q.url)); \
        s.listen(0, '127.0.0.1', async () => { \
          const res = await fetch('http://127.0.0.1:' + s.address().port + '/x', { method: 'POST', body: 'b' }); \
          console.log(res.status, await res.text(), m.buffer.byteLength); s.close(); });";
    node_script(script);
}

/// /proc/uptime, which libuv reads for node's os.uptime() (and `uptime`,
/// procps and psutil read): it was missing (ENOENT).
#[test]
fn proc_uptime_reads_as_on_linux() {
    if installed("/usr/bin/node") {
        let script = "const fs = require('fs'), os = require('os'); \
                      const f = fs.readFileSync('/proc/uptime', 'utf8'); \
                      const [up, idle] = f.trim().split(' ').map(Number); \
                      console.log(/^\\d+\\.\\d\\d \\d+\\.\\d\\d\\n$/.test(f), up >= 0, idle >= 0, Math.abs(os.uptime() - up) < 2)";
        node_script(script);
    }
}

/// /proc/self/comm and /proc/self/task/TID/comm: the program's name, and
/// the one node's process.title gives it (ps and psutil read it; ENOENT).
#[test]
fn proc_comm_is_the_programs_name() {
    if installed("/usr/bin/node") {
        let script = "const fs = require('fs'); \
                      const a = fs.readFileSync('/proc/self/comm', 'utf8'); \
                      process.title = 'renamed-by-title'; \
                      const b = fs.readFileSync('/proc/self/comm', 'utf8'); \
                      const c = fs.readFileSync('/proc/self/task/' + process.pid + '/comm', 'utf8'); \
                      console.log(JSON.stringify([a, b, c]))";
        node_script(script);
    }
}

/// More connections at once than the listen backlog (node's default, 511):
/// Linux drops the SYNs it has no room for and the clients retry, so every
/// connection is made, only later; forkvm refused those past the backlog
/// (ECONNREFUSED).
#[test]
fn a_burst_of_connections_past_the_backlog_all_connect() {
    if !installed("/usr/bin/node") {
        return;
    }
    let script = "const net = require('net'); \
        const s = net.createServer(c => c.end('x')); \
        s.listen(0, '127.0.0.1', async () => { \
          const r = await Promise.all(Array.from({ length: 600 }, () => new Promise(res => { \
            const c = net.connect(s.address().port, '127.0.0.1'); let d = ''; \
            c.on('data', x => d += x); c.on('end', () => res(d)); c.on('error', e => res(e.code)); }))); \
          const n = {}; r.forEach(x => n[x] = (n[x] || 0) + 1); console.log(JSON.stringify(n)); s.close(); });";
    node_script(script);
}
