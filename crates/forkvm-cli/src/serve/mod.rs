//! `forkvm serve`: an HTTP server (hyper on tokio) that serves every request
//! in a worker VM forked from the program's master, reset after each
//! request when ephemeral.

mod attendant;
mod debug;
mod js;
mod metrics;
mod server;
mod workers;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics::{KindLabel, Metrics, StatusLabel};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use workers::{Job, Rejected, Workers};

/// Options of `forkvm serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:8080; for a server program,
    /// the address it bound, on loopback).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Worker VMs forked from the master (default: number of CPUs).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Reset the VM after every request (true), or keep state between requests on a worker (false).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "true|false")]
    ephemeral: bool,
    /// When a server program's VM is reset: `per-request` (HTTP, parsed by
    /// forkvm) or `per-connection` (any protocol: the client's connection is
    /// the guest's, reset when it closes; with `--ephemeral false` the VM is
    /// kept from one connection to the next unless it crashed).
    #[arg(long, value_enum, default_value = "per-request")]
    reset: ResetMode,
    /// Time limit of one request's handler, in seconds (exceeded: 504).
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    request_timeout: f64,
    /// Largest request body in bytes (exceeded: 413).
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    max_body: usize,
    /// Synthetic `GET /` requests each worker serves (and forgets: it is reset)
    /// before taking real ones, so the first real request is as fast as the
    /// rest (default 0). For a JavaScript module, the master serves them
    /// itself before its snapshot instead (default 100), so node's HTTP path
    /// and the module are compiled and warm in every fork.
    #[arg(long, value_name = "N")]
    warmup: Option<usize>,
    /// Requests that may wait for a worker; beyond that: 503.
    #[arg(long, default_value_t = 256)]
    queue: usize,
    /// Open client connections at most (each holds one host fd); a connection
    /// beyond that is answered 503 and closed. Also capped by the fd limit.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    max_connections: usize,
    /// Time a client has to send a request's headers, in seconds (also the
    /// time an idle connection that sent nothing is kept).
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    header_timeout: f64,
    /// Guest memory limit in MiB (default 256; 1024 for a JavaScript module).
    #[arg(long, value_name = "MIB")]
    memory: Option<u64>,
    /// The node binary that serves a JavaScript module (default: `node` on PATH).
    #[arg(long, value_name = "PATH")]
    node: Option<PathBuf>,
    /// The engine that serves a JavaScript module: `node` (V8, JIT) or
    /// `quickjs` (forkvm-qjs, an interpreter built with forkvm: faster to
    /// start and fork, slower to compute; Web APIs of its own, no node APIs).
    #[arg(long, value_enum, default_value = "node")]
    engine: js::Engine,
    /// A V8/node flag for a JavaScript module, replacing the defaults
    /// (--max-old-space-size=64 --max-semi-space-size=64 --single-threaded); repeatable.
    #[arg(long = "v8-flag", value_name = "FLAG", allow_hyphen_values = true)]
    v8_flags: Vec<String>,
    /// Let the guest read files under PATH (repeatable). System library directories are
    /// readable by default, as for `forkvm run` (see --no-default-allow).
    #[arg(long = "allow-read", value_name = "PATH")]
    allow_read: Vec<PathBuf>,
    /// Do not let the guest read the system library directories by default (as for
    /// `forkvm run`); the program file itself stays readable.
    #[arg(long)]
    no_default_allow: bool,
    /// The guest's working directory.
    #[arg(long, value_name = "DIR", default_value = "/")]
    cwd: String,
    /// Let the guest also write under DIR (repeatable). What a request changes there is
    /// private to it: copied into its VM on its first change, gone at reset; the host's
    /// files are not changed (the program's own initialisation writes through).
    #[arg(long = "allow-write", value_name = "DIR")]
    allow_write: Vec<PathBuf>,
    /// A directory every request writes through to the host (repeatable): a channel
    /// between requests, by design; not reset.
    #[arg(long = "persist", value_name = "DIR")]
    persist: Vec<PathBuf>,
    /// Guest environment variable (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = crate::parse_env)]
    env: Vec<String>,
    /// Admin listener serving GET /.forkvm/metrics (Prometheus text).
    #[arg(long, value_name = "ADDR:PORT")]
    admin: Option<SocketAddr>,
    /// A request that stops (an int3 such as forkvm_breakpoint(), or a crash)
    /// waits for gdb on ADDR (`target remote ADDR`); its time limit is
    /// suspended meanwhile. Turns host seccomp off.
    #[arg(long, value_name = "ADDR:PORT")]
    gdb: Option<String>,
    /// Do not confine forkvm itself with its host seccomp allow-list (for debugging only).
    #[arg(long)]
    no_seccomp: bool,
    /// Let the program open TCP connections to HOST:PORT (repeatable; HOST is resolved
    /// once at start). Every other address is refused (ECONNREFUSED). A request's
    /// connections are closed when its VM is reset.
    #[arg(long = "allow-connect", value_name = "HOST:PORT")]
    allow_connect: Vec<String>,
    /// Log less (only warnings and errors).
    #[arg(short, long)]
    quiet: bool,
    /// Print one line per guest syscall (stderr).
    #[arg(long)]
    trace_syscalls: bool,
    /// How system calls are answered (as for `forkvm run`): `fast` answers guest-local
    /// calls inside the VM and, on PVM, posts simple file calls to a host poller; `guest`
    /// is `fast` without the poller; `exit` sends every call to the host through an exit
    #[arg(long, value_name = "fast|guest|exit", default_value = "fast")]
    syscalls: forkvm::hypervisor::SyscallPath,
    /// The program to serve (default: a built-in example), then its arguments.
    #[arg(value_name = "PROGRAM [ARGS]...", num_args = 0.., trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

impl ServeArgs {
    pub fn quiet(&self) -> bool {
        self.quiet
    }
}

/// `--reset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ResetMode {
    PerRequest,
    PerConnection,
}

struct State {
    workers: Arc<Workers>,
    metrics: Arc<Metrics>,
    max_body: usize,
    /// One permit per client connection that may be open.
    connections: Arc<tokio::sync::Semaphore>,
    header_timeout: Duration,
    /// The program is a network server (502 rather than 500 when it crashes).
    server: bool,
    /// The program is a JavaScript module: a request node never answers is a
    /// handler that never settled (504).
    js: bool,
}

/// Host fds kept aside from client connections: the VMs, logs, listeners.
const RESERVED_FDS: u64 = 128;

/// Raises the soft limit on open files to the hard one (idle clients each
/// hold an fd) and returns how many connections it leaves room for.
fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the rlimit we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024 - RESERVED_FDS;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the rlimit we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    lim.rlim_cur.saturating_sub(RESERVED_FDS).max(1)
}

/// Builds the master, starts the workers and serves until SIGTERM/SIGINT.
pub fn main(args: ServeArgs) -> anyhow::Result<()> {
    use forkvm::machine::{Config, Machine, Outcome, ReadyAt};
    use forkvm::master::Master;
    let timeout = Duration::try_from_secs_f64(args.request_timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .context("--request-timeout must be a positive number of seconds")?;
    let header_timeout = Duration::try_from_secs_f64(args.header_timeout)
        .ok()
        .filter(|d| !d.is_zero())
        .context("--header-timeout must be a positive number of seconds")?;
    let fd_room = raise_fd_limit();
    let max_connections = (args.max_connections as u64).min(fd_room).max(1) as usize;
    if max_connections < args.max_connections {
        tracing::warn!(
            "--max-connections {} lowered to {max_connections}: the open-file limit leaves room for no more",
            args.max_connections
        );
    }
    // A JavaScript module: served by node through forkvm's adapter.
    let mut args = args;
    let js = args.command.first().is_some_and(|p| js::is_module(p));
    if js {
        let module = args.command[0].clone();
        let port = args.listen.map_or(8080, |a| a.port());
        let warmup = args.warmup.unwrap_or(js::DEFAULT_WARMUP);
        let (node, memory) = match args.engine {
            js::Engine::Node => (
                js::node_program(
                    &module,
                    args.node.as_deref(),
                    &crate::launch::search_path(&args.env),
                    port,
                    warmup,
                    &args.v8_flags,
                )?,
                js::DEFAULT_MEMORY_MIB,
            ),
            js::Engine::Quickjs => (
                js::quickjs_program(&module, None, warmup)?,
                js::QUICKJS_MEMORY_MIB,
            ),
        };
        tracing::info!(
            "serving the JavaScript module {module} with {} ({}), warmed up with {warmup} request(s) in the master",
            node.node.display(),
            match args.engine {
                js::Engine::Node => "V8",
                js::Engine::Quickjs => "QuickJS",
            },
        );
        args.allow_read.extend(crate::launch::default_allow_read());
        args.allow_read.extend(node.allow_read);
        args.memory = Some(args.memory.unwrap_or(memory));
        // The master warms the module up; forks need not.
        args.warmup = Some(0);
        args.command = node.argv;
    }
    let memory_mib = args.memory.unwrap_or(256);
    // As `forkvm run`: a program named without '/' is looked up in PATH, a `#!`
    // script runs its interpreter, and the system libraries are readable.
    let (image, name, argv, exe) = match args.command.first() {
        Some(first) => {
            let command: Vec<std::ffi::OsString> = args.command.iter().map(Into::into).collect();
            let launch = crate::launch::resolve(&command, &crate::launch::search_path(&args.env))?;
            if !js && !args.no_default_allow {
                args.allow_read.extend(crate::launch::default_allow_read());
            }
            args.allow_read.extend(launch.files.iter().cloned());
            let program = &launch.program;
            let image = std::fs::read(program)
                .with_context(|| format!("cannot read {}", program.display()))?;
            // The guest's /proc/self/exe is absolute, as on Linux (glibc's static
            // start-up asserts it); argv[0] stays as typed.
            let exe = std::path::absolute(program)
                .with_context(|| format!("cannot resolve {}", program.display()))?
                .to_string_lossy()
                .into_owned();
            (image, first.clone(), launch.argv, exe)
        }
        None => {
            let name = "built-in example".to_string();
            let argv = vec![name.clone().into()];
            (forkvm::builtin::serve_hello()?, name.clone(), argv, name)
        }
    };
    crate::launch::check_write_dirs(&args.allow_write, "--allow-write")?;
    crate::launch::check_write_dirs(&args.persist, "--persist")?;
    let config = Config {
        // V8 reserves ~10 GiB for a WebAssembly memory (node's own fetch
        // uses one): room for it beside the heap cage.
        address_space: (js && args.engine == js::Engine::Node).then_some(js::ADDRESS_SPACE),
        memory: memory_mib
            .checked_mul(1 << 20)
            .context("--memory is out of range")?,
        timeout: Duration::from_secs(60).max(timeout),
        argv,
        env: args.env.iter().map(Into::into).collect(),
        cwd: args.cwd.clone(),
        allow_read: args.allow_read.clone(),
        allow_write: args
            .allow_write
            .iter()
            .chain(&args.persist)
            .cloned()
            .collect(),
        trace_syscalls: args.trace_syscalls,
        syscalls: args.syscalls,
    };
    let mut machine =
        Machine::new(&image, &exe, config).with_context(|| format!("cannot start {name}"))?;
    machine.set_persist(&args.persist);
    let allow_connect = crate::launch::resolve_connect(&args.allow_connect)?;
    machine.set_allow_connect(allow_connect.addrs);
    machine.set_connect_names(allow_connect.names);
    let mut listen = args.listen;
    // A server program's other listening sockets (without --listen): one host listener each.
    let mut also_listen = Vec::new();
    match machine.run_until_ready(&ReadyAt::Call)? {
        Outcome::Ready if machine.ready_point().is_some_and(|r| r.handler != 0) => {}
        Outcome::Ready if machine.ready_point().is_some_and(|r| r.server) => {
            let bound = machine.listening_addr();
            tracing::info!(
                "{name} waits for connections on {} (virtual): each request is a new connection in a fork",
                bound.map_or("?".into(), |a| a.to_string())
            );
            if listen.is_none() {
                listen = bound.map(on_loopback);
                for a in machine.listening_addrs().into_iter().skip(1) {
                    let a = on_loopback(a);
                    // One port bound on 0.0.0.0 and on [::] (redis, nginx's
                    // `listen [::]:80`) is two host listeners, one per family.
                    if Some(a) != listen && !also_listen.contains(&a) {
                        also_listen.push(a);
                    }
                }
            }
        }
        Outcome::Ready => {
            anyhow::bail!("{name} said ready without a handler: use forkvm_serve(handler)")
        }
        Outcome::Crashed(info) => {
            eprint!("{}", machine.crash_report(&info));
            anyhow::bail!("{name} crashed during initialisation");
        }
        other => anyhow::bail!(
            "{name} ended before it was ready (status {})",
            other.status()
        ),
    }
    let server = machine.ready_point().is_some_and(|r| r.server);
    if args.reset == ResetMode::PerConnection && !server {
        anyhow::bail!("--reset per-connection is for server programs (that listen on a socket)");
    }
    let listen = listen.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8080)));
    let master = Master::from_machine(machine)?;
    let workers_n = args
        .concurrency
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let metrics = Arc::new(Metrics::new());
    let workers = Workers::start(
        &master,
        workers::Settings {
            workers: workers_n,
            queue: args.queue.max(1),
            ephemeral: args.ephemeral,
            timeout,
            warmup: args.warmup.unwrap_or(0),
            gdb: debug::listen(args.gdb.as_deref())?,
        },
        metrics.clone(),
    )?;
    let state = Arc::new(State {
        workers,
        metrics,
        max_body: args.max_body,
        connections: Arc::new(tokio::sync::Semaphore::new(max_connections)),
        header_timeout,
        server,
        js,
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers::runtime_threads(workers_n))
        .enable_all()
        .build()?;
    state.workers.attend(rt.handle().clone())?;
    // Everything is built (VMs, worker and runtime threads): from here on,
    // every thread of the process is confined.
    crate::seccomp::confine(
        crate::seccomp::Mode::Serve,
        args.no_seccomp || args.gdb.is_some(),
        !args.allow_connect.is_empty(),
    )?;
    let result = rt.block_on(run(
        state.clone(),
        &args,
        listen,
        also_listen,
        &name,
        workers_n,
    ));
    state.workers.close();
    drop(rt);
    result
}

/// Where the host listens for a socket the program bound: its own address,
/// or the loopback address of its family for a wildcard one.
fn on_loopback(mut a: SocketAddr) -> SocketAddr {
    if a.ip().is_unspecified() {
        a.set_ip(match a {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    a
}

/// The host port a connection came in on (a request extension).
#[derive(Clone, Copy)]
struct LocalPort(Option<u16>);

/// The next connection on the main listener or on one of the others.
async fn accept_any(
    main: &tokio::net::TcpListener,
    extra: &mut tokio::sync::mpsc::Receiver<std::io::Result<(tokio::net::TcpStream, SocketAddr)>>,
) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    tokio::select! {
        a = main.accept() => a,
        Some(a) = extra.recv() => a,
    }
}

async fn run(
    state: Arc<State>,
    args: &ServeArgs,
    listen: SocketAddr,
    also_listen: Vec<SocketAddr>,
    name: &str,
    workers: usize,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    // Per connection, the bytes are the program's protocol, not necessarily HTTP.
    let per_connection = args.reset == ResetMode::PerConnection;
    let scheme = if per_connection { "tcp://" } else { "http://" };
    // Connections to the program's other listening sockets arrive through this channel.
    let (extra_tx, mut extra) = tokio::sync::mpsc::channel(64);
    for addr in also_listen {
        let l = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            // A host without IPv6 loopback still serves the program's IPv4 sockets.
            Err(e) if addr.is_ipv6() && e.kind() == std::io::ErrorKind::AddrNotAvailable => {
                tracing::warn!("not serving {name} on {addr}: {e}");
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("cannot listen on {addr}")),
        };
        tracing::info!("also serving {name} on {scheme}{}", l.local_addr()?);
        let tx = extra_tx.clone();
        tokio::spawn(async move { while tx.send(l.accept().await).await.is_ok() {} });
    }
    drop(extra_tx);
    tracing::info!(
        "serving {name} on {scheme}{} with {workers} worker VM(s), {}",
        listener.local_addr()?,
        if per_connection {
            "reset when each connection closes"
        } else if args.ephemeral {
            "reset after every request"
        } else {
            "state kept between requests"
        }
    );
    if let Some(admin) = args.admin {
        let admin = tokio::net::TcpListener::bind(admin)
            .await
            .with_context(|| format!("cannot listen on {admin}"))?;
        tokio::spawn(serve_admin(admin, state.clone()));
    }
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            accepted = accept_any(&listener, &mut extra) => {
                let Ok((stream, _)) = accepted else {
                    // Out of fds (or another passing error): let others close first.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let Ok(permit) = state.connections.clone().try_acquire_owned() else {
                    tokio::spawn(too_many_connections(stream, state.metrics.clone()));
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let peer = stream.peer_addr().ok();
                let local_port = LocalPort(stream.local_addr().ok().map(|a| a.port()));
                if args.reset == ResetMode::PerConnection {
                    let workers = state.workers.clone();
                    tokio::spawn(async move {
                        let _ = workers.serve_connection(stream).await;
                        drop(permit);
                    });
                    continue;
                }
                // hyper and this task share the one socket: hyper closes connections it
                // cannot parse without a word, and this task answers them.
                let stream = Arc::new(stream);
                let st = state.clone();
                let metrics = state.metrics.clone();
                let conn = http1::Builder::new()
                    .keep_alive(true)
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(state.header_timeout)
                    .pipeline_flush(true)
                    .serve_connection(
                        TokioIo::new(Shared(stream.clone())),
                        service_fn(move |mut req: Request<Incoming>| {
                            req.extensions_mut().insert(peer);
                            req.extensions_mut().insert(local_port);
                            handle(st.clone(), req)
                        }),
                    );
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let result = conn.await;
                    // hyper has dropped its handle: the socket is this task's alone.
                    if let Ok(stream) = Arc::try_unwrap(stream) {
                        match result {
                            Err(e) if e.is_parse() => malformed(&e, stream, &metrics).await,
                            _ => shutdown(stream).await,
                        }
                    }
                    drop(permit);
                });
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        }
    }
    tracing::info!("shutting down: finishing requests in flight");
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(30), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some connections did not finish within 30 s");
    }
    Ok(())
}

/// The connection's socket, shared between hyper and the accept loop's task
/// (one fd per connection), with shutdown left to that task: hyper shuts the
/// socket on a parse error before we can answer 400.
struct Shared(Arc<tokio::net::TcpStream>);

impl tokio::io::AsyncRead for Shared {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        loop {
            match self.0.poll_read_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
            // Zero (initialise) at most 64 KiB of hyper's buffer per read, not all of it.
            let n = buf.remaining().min(64 * 1024);
            match self.0.try_read(buf.initialize_unfilled_to(n)) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // Readiness was cleared: poll again to register for the next event.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl tokio::io::AsyncWrite for Shared {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.poll_write_vectored(cx, &[std::io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::Poll;
        loop {
            match self.0.poll_write_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
            match self.0.try_write_vectored(bufs) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                other => return Poll::Ready(other),
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Ends our side of a connection (FIN after what was written) and closes it.
async fn shutdown(stream: tokio::net::TcpStream) {
    if let Ok(s) = stream.into_std() {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
}

/// Writes all of `data`, giving up after a second (a client that does not read).
async fn write_all(stream: &tokio::net::TcpStream, data: &[u8]) -> bool {
    let write = async {
        let mut rest = data;
        while !rest.is_empty() {
            stream.writable().await?;
            match stream.try_write(rest) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok::<(), std::io::Error>(())
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), write).await,
        Ok(Ok(()))
    )
}

/// Answers a connection over the cap with 503 and closes it.
async fn too_many_connections(stream: tokio::net::TcpStream, metrics: Arc<Metrics>) {
    const BODY: &str = "too many connections\n";
    let msg = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    if write_all(&stream, msg.as_bytes()).await {
        metrics
            .requests
            .get_or_create(&StatusLabel { status: 503 })
            .inc();
        metrics
            .errors
            .get_or_create(&KindLabel {
                kind: "connections",
            })
            .inc();
    }
    shutdown(stream).await;
}

/// Answers a request hyper could not parse (it closes such connections
/// without a word) with 400, or 431 for oversized headers.
async fn malformed(e: &hyper::Error, stream: tokio::net::TcpStream, metrics: &Metrics) {
    if e.is_parse() {
        let (status, text) = if e.is_parse_too_large() {
            (431, "Request Header Fields Too Large")
        } else {
            (400, "Bad Request")
        };
        let body = format!("malformed request: {e}\n");
        let msg = format!(
            "HTTP/1.1 {status} {text}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        if write_all(&stream, msg.as_bytes()).await {
            metrics
                .requests
                .get_or_create(&StatusLabel { status })
                .inc();
            metrics
                .errors
                .get_or_create(&KindLabel {
                    kind: "bad_request",
                })
                .inc();
            tracing::info!("malformed request: {status} ({e})");
        }
    }
    shutdown(stream).await;
}

async fn serve_admin(listener: tokio::net::TcpListener, state: Arc<State>) {
    while let Ok((stream, _)) = listener.accept().await {
        let st = state.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let st = st.clone();
                async move {
                    let resp = if req.uri().path() == "/.forkvm/metrics" {
                        let mut r = Response::new(Full::new(Bytes::from(st.metrics.render())));
                        r.headers_mut().insert(
                            CONTENT_TYPE,
                            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                        );
                        r
                    } else {
                        plain(StatusCode::NOT_FOUND, "not found\n")
                    };
                    Ok::<_, Infallible>(resp)
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    crate::seccomp::forbidden_call_for_tests();
    let start = Instant::now();
    let method = req.method().to_string();
    let path_q = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let (resp, kind, timing) = answer(&state, req).await;
    let status = resp.status().as_u16();
    let m = &state.metrics;
    m.requests.get_or_create(&StatusLabel { status }).inc();
    if let Some(kind) = kind {
        m.errors.get_or_create(&KindLabel { kind }).inc();
    }
    let elapsed = start.elapsed();
    m.latency.observe(elapsed.as_secs_f64());
    let bytes = resp.body().size_hint_exact();
    match timing {
        Some((q, r, run)) => tracing::info!(
            "{method} {path_q} {status} {bytes}B queue={:.3}ms reset={:.3}ms run={:.3}ms total={:.3}ms",
            ms(q), ms(r), ms(run), ms(elapsed)
        ),
        None => tracing::info!("{method} {path_q} {status} {bytes}B total={:.3}ms", ms(elapsed)),
    }
    Ok(resp)
}

trait ExactSize {
    fn size_hint_exact(&self) -> u64;
}

impl ExactSize for Full<Bytes> {
    fn size_hint_exact(&self) -> u64 {
        hyper::body::Body::size_hint(self).exact().unwrap_or(0)
    }
}

type Timing = (Duration, Duration, Duration);

async fn answer(
    state: &State,
    req: Request<Incoming>,
) -> (Response<Full<Bytes>>, Option<&'static str>, Option<Timing>) {
    let too_large = || {
        (
            plain(StatusCode::PAYLOAD_TOO_LARGE, "request body too large\n"),
            Some("too_large"),
            None,
        )
    };
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.max_body as u64) {
        return too_large();
    }
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, state.max_body).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return too_large()
        }
        Err(_) => {
            return (
                plain(StatusCode::BAD_REQUEST, "bad request body\n"),
                Some("bad_request"),
                None,
            )
        }
    };
    let mut headers = Vec::new();
    for (k, v) in &parts.headers {
        headers.extend_from_slice(k.as_str().as_bytes());
        headers.extend_from_slice(b": ");
        headers.extend_from_slice(v.as_bytes());
        headers.push(b'\n');
    }
    let job = Job {
        method: Bytes::copy_from_slice(parts.method.as_str().as_bytes()),
        path: Bytes::copy_from_slice(parts.uri.path().as_bytes()),
        query: Bytes::copy_from_slice(parts.uri.query().unwrap_or("").as_bytes()),
        headers: Bytes::from(headers),
        body,
        peer: parts
            .extensions
            .get::<Option<SocketAddr>>()
            .copied()
            .flatten(),
        local_port: parts.extensions.get::<LocalPort>().and_then(|p| p.0),
    };
    let out = match state.workers.serve(job).await {
        Ok(out) => out,
        Err(Rejected::Full) => {
            return (
                plain(StatusCode::SERVICE_UNAVAILABLE, "all workers are busy\n"),
                Some("overload"),
                None,
            )
        }
        Err(Rejected::Closed) => {
            return (
                plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
                Some("overload"),
                None,
            )
        }
    };
    let timing = Some((out.queue, out.reset, out.run));
    let (mut resp, kind) = match out.result {
        workers::Result::Answered(r) => (guest_response(r, parts.method == Method::HEAD), None),
        workers::Result::NoResponse => (
            plain(
                StatusCode::BAD_GATEWAY,
                "the handler returned without responding\n",
            ),
            Some("no_response"),
        ),
        workers::Result::Crashed(report) => {
            tracing::error!(
                "guest crashed serving {} {}:\n{report}",
                parts.method,
                parts.uri
            );
            if state.server {
                (
                    plain(StatusCode::BAD_GATEWAY, "the server crashed\n"),
                    Some("crash"),
                )
            } else {
                (
                    plain(StatusCode::INTERNAL_SERVER_ERROR, "the handler crashed\n"),
                    Some("crash"),
                )
            }
        }
        workers::Result::Incomplete(why) if state.js => {
            // node went idle without answering: the handler's promise never settles.
            tracing::warn!(
                "no response to {} {}: the handler never settled ({why})",
                parts.method,
                parts.uri
            );
            (
                plain(StatusCode::GATEWAY_TIMEOUT, "the handler never settled\n"),
                Some("timeout"),
            )
        }
        workers::Result::Incomplete(why) => {
            tracing::warn!("no response to {} {}: {why}", parts.method, parts.uri);
            (
                plain(
                    StatusCode::BAD_GATEWAY,
                    "the server gave no complete response\n",
                ),
                Some("no_response"),
            )
        }
        workers::Result::TimedOut => (
            plain(StatusCode::GATEWAY_TIMEOUT, "the handler timed out\n"),
            Some("timeout"),
        ),
        workers::Result::Failed(e) => {
            tracing::error!("worker failed serving {} {}: {e}", parts.method, parts.uri);
            (
                plain(StatusCode::INTERNAL_SERVER_ERROR, "the worker failed\n"),
                Some("worker"),
            )
        }
    };
    let st = format!(
        "queue;dur={:.3}, reset;dur={:.3}, run;dur={:.3}",
        ms(out.queue),
        ms(out.reset),
        ms(out.run)
    );
    if let Ok(v) = HeaderValue::from_str(&st) {
        resp.headers_mut()
            .insert(HeaderName::from_static("server-timing"), v);
    }
    (resp, kind, timing)
}

/// The guest's answer as hyper's; `head`: to a HEAD request, whose
/// Content-Length (the size of what a GET gets) the server chose.
fn guest_response(r: forkvm::machine::Response, head: bool) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(r.body)));
    *resp.status_mut() =
        StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // The server's own words (werkzeug's `404 NOT FOUND`), as a client of it sees them.
    let standard = resp.status().canonical_reason().map(str::as_bytes);
    if !r.reason.is_empty() && standard != Some(&r.reason[..]) {
        if let Ok(reason) = hyper::ext::ReasonPhrase::try_from(r.reason) {
            resp.extensions_mut().insert(reason);
        }
    }
    for line in r.headers.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (k, v) = line.split_at(colon);
        let v = v[1..].trim_ascii();
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.trim_ascii()),
            HeaderValue::from_bytes(v),
        ) {
            // The server owns framing (a HEAD answer's length aside: it has no body).
            let framing = (k == hyper::header::CONTENT_LENGTH && !head)
                || k == hyper::header::TRANSFER_ENCODING;
            if !framing {
                resp.headers_mut().append(k, v);
            }
        }
    }
    resp
}
