//! Worker VMs: forks of the master, kept in an idle pool. A request takes
//! one, calls the guest's handler on the connection's own runtime thread,
//! and answers. The reset happens after the answer, in a task of its own,
//! before the worker goes back to the pool.
//!
//! A VM call blocks the runtime thread that makes it: no hand-off to another
//! thread on the critical path. Every such blocking section holds a worker VM
//! (a call, a reset, a per-connection pump), so at most `workers` runtime
//! threads block at once, and the runtime has one thread more than that
//! ([`runtime_threads`]): it keeps accepting, parsing, queueing and answering
//! 503 while every VM is busy, once the blocked thread has handed on the I/O
//! driver (`super::attendant`). One thing such a thread holds up: a task
//! woken on it just before (tokio's LIFO slot, which other threads do not
//! steal). A task that calls a VM wakes none before it blocks, and a thread
//! runs that slot before its other tasks, so this is rare, and the wait is
//! one call's. `tokio::task::block_in_place` kept the thread free by moving
//! its scheduler to another thread for every call, which cost 20-40 µs a
//! request on this machine (docs/design.md, "Serving"); yielding once before
//! each call, to empty that slot, cost part of the gain back and was left
//! out.

use super::attendant::Attendant;
use super::metrics::Metrics;
use bytes::Bytes;
use forkvm::abi;
use forkvm::fork::Fork;
use forkvm::machine::{CallError, Response};
use forkvm::master::Master;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The parts of an HTTP request the guest sees.
pub struct Job {
    pub method: Bytes,
    pub path: Bytes,
    pub query: Bytes,
    /// `Name: value` lines separated by `\n`.
    pub headers: Bytes,
    pub body: Bytes,
    /// The client's address (a server program's accept/getpeername).
    pub peer: Option<std::net::SocketAddr>,
    /// The host port the client connected to: which of a server program's
    /// listening sockets gets the connection (the first if none matches).
    pub local_port: Option<u16>,
}

/// How serving a job went.
pub enum Result {
    /// The guest answered.
    Answered(Response),
    /// The handler returned without answering.
    NoResponse,
    /// The guest crashed (report attached).
    Crashed(String),
    /// The handler ran out of time.
    TimedOut,
    /// The worker's VM failed.
    Failed(String),
    /// A server program went idle without a whole response (reason attached).
    Incomplete(String),
}

/// A job's result and where its time went.
pub struct Outcome {
    pub result: Result,
    pub queue: Duration,
    /// The reset that made this worker clean before the job.
    pub reset: Duration,
    pub run: Duration,
}

/// Settings of the worker pool.
pub struct Settings {
    pub workers: usize,
    pub queue: usize,
    pub ephemeral: bool,
    pub timeout: Duration,
    /// Synthetic `GET /` requests each worker serves (then resets) before
    /// taking real ones, so the first real request finds its pages mapped.
    pub warmup: usize,
    /// `--gdb`: where a request that stops waits for gdb (super::debug).
    pub gdb: Option<Arc<forkvm::debug::GdbWaiter>>,
}

struct Worker {
    fork: Fork,
    last_reset: Duration,
    /// Its slot in the attendant.
    slot: usize,
}

/// The worker VMs.
pub struct Workers {
    idle: Mutex<Vec<Worker>>,
    /// One permit per idle worker.
    free: Arc<Semaphore>,
    /// Requests waiting for a worker.
    waiting: AtomicUsize,
    settings: Settings,
    metrics: Arc<Metrics>,
    attendant: Arc<Attendant>,
}

/// Why a job was not served.
pub enum Rejected {
    /// Every worker is busy and the queue is full.
    Full,
    /// The pool is shutting down.
    Closed,
}

impl Workers {
    /// Forks `settings.workers` VMs from `master`.
    pub fn start(
        master: &Master,
        settings: Settings,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Arc<Self>> {
        let mut idle = Vec::with_capacity(settings.workers);
        for slot in 0..settings.workers {
            let mut fork = master.fork()?;
            // Ephemeral workers are reset after each request: the handler's
            // answer ends the request, saving the exit back from the handler.
            fork.set_respond_ends_call(settings.ephemeral);
            for _ in 0..settings.warmup {
                let job = Job {
                    method: Bytes::from_static(b"GET"),
                    path: Bytes::from_static(b"/"),
                    query: Bytes::new(),
                    headers: Bytes::from_static(b"host: forkvm-warmup\n"),
                    body: Bytes::new(),
                    peer: None,
                    local_port: None,
                };
                if let Result::Crashed(report) = serve_one(&mut fork, &job, settings.timeout) {
                    tracing::warn!("the guest crashed on a warm-up request:\n{report}");
                }
                fork.reset()?;
            }
            super::debug::arm(&mut fork, settings.gdb.as_ref());
            idle.push(Worker {
                fork,
                last_reset: Duration::ZERO,
                slot,
            });
            metrics.workers.inc();
        }
        Ok(Arc::new(Self {
            idle: Mutex::new(idle),
            free: Arc::new(Semaphore::new(settings.workers)),
            waiting: AtomicUsize::new(0),
            attendant: Attendant::new(settings.workers),
            settings,
            metrics,
        }))
    }

    /// Starts keeping `runtime`'s I/O attended while VM calls block its
    /// threads (before the host's seccomp filter: it starts a thread).
    pub fn attend(&self, runtime: tokio::runtime::Handle) -> std::io::Result<()> {
        self.attendant.start(runtime)
    }

    /// Serves `job` in a worker VM, waiting for one if all are busy.
    pub async fn serve(self: &Arc<Self>, job: Job) -> std::result::Result<Outcome, Rejected> {
        let enqueued = Instant::now();
        let queued = self.waiting.fetch_add(1, Ordering::SeqCst);
        if queued >= self.settings.queue + self.settings.workers {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(Rejected::Full);
        }
        let permit = self.free.clone().acquire_owned().await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        let permit = permit.map_err(|_| Rejected::Closed)?;
        let worker = self.idle.lock().ok().and_then(|mut v| v.pop());
        let Some(mut worker) = worker else {
            return Err(Rejected::Closed);
        };
        let queue = enqueued.elapsed();
        let timeout = self.settings.timeout;
        let t = Instant::now();
        let result = self
            .attendant
            .blocking(worker.slot, || serve_one(&mut worker.fork, &job, timeout));
        let run = t.elapsed();
        let outcome = Outcome {
            result,
            queue,
            reset: worker.last_reset,
            run,
        };
        // Reset after the answer is on its way.
        let pool = self.clone();
        // (On a blocking-pool thread instead, -c1 latency moved within the
        // noise and -c16 throughput fell by a fifth.)
        tokio::spawn(async move { pool.put_back(worker, permit) });
        Ok(outcome)
    }

    /// Resets `worker` if it must be, and returns it to the pool.
    fn put_back(&self, mut worker: Worker, permit: tokio::sync::OwnedSemaphorePermit) {
        let debugged = super::debug::needs_reset(&mut worker.fork);
        if self.settings.ephemeral || worker.fork.is_poisoned() || debugged {
            let t = Instant::now();
            let ok = self.attendant.blocking(worker.slot, || worker.fork.reset());
            worker.last_reset = t.elapsed();
            if let Ok(stats) = &ok {
                tracing::debug!(
                    "reset: {} page(s) copied back from the snapshot, {} dropped",
                    stats.copied,
                    stats.dropped
                );
            }
            self.metrics.resets.inc();
            if let Err(e) = ok {
                tracing::error!("worker reset failed; worker retired: {e}");
                self.metrics.workers.dec();
                permit.forget();
                return;
            }
        } else {
            worker.last_reset = Duration::ZERO;
        }
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(worker);
        }
        drop(permit);
    }

    /// `--reset per-connection`: one worker for a whole client connection
    /// ([`super::server::pump`]), reset when the connection ends.
    pub async fn serve_connection(
        self: &Arc<Self>,
        stream: tokio::net::TcpStream,
    ) -> std::result::Result<(), Rejected> {
        let permit = self
            .free
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Rejected::Closed)?;
        let worker = self.idle.lock().ok().and_then(|mut v| v.pop());
        let Some(mut worker) = worker else {
            return Err(Rejected::Closed);
        };
        let t = Instant::now();
        let busy = (&*self.attendant, worker.slot);
        let failed = match super::server::pump(
            &mut worker.fork,
            stream,
            self.settings.timeout,
            busy,
        )
        .await
        {
            Ok(n) => {
                tracing::info!(
                    "connection served: {n} bytes out, {:.3}ms",
                    t.elapsed().as_secs_f64() * 1000.0
                );
                false
            }
            Err(e) => {
                tracing::warn!("connection ended: {e}");
                true
            }
        };
        // `--ephemeral false`: the program keeps its state from one
        // connection to the next (a key-value store), unless the connection
        // ended in a crash, an exit or a timeout.
        let debugged = super::debug::needs_reset(&mut worker.fork);
        if !self.settings.ephemeral && !failed && !worker.fork.is_poisoned() && !debugged {
            worker.last_reset = Duration::ZERO;
            if let Ok(mut idle) = self.idle.lock() {
                idle.push(worker);
            }
            drop(permit);
            return Ok(());
        }
        let t = Instant::now();
        let ok = self.attendant.blocking(worker.slot, || worker.fork.reset());
        worker.last_reset = t.elapsed();
        self.metrics.resets.inc();
        if let Err(e) = ok {
            tracing::error!("worker reset failed; worker retired: {e}");
            self.metrics.workers.dec();
            permit.forget();
            return Ok(());
        }
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(worker);
        }
        drop(permit);
        Ok(())
    }

    /// Refuses new work; requests already waiting are answered 503.
    pub fn close(&self) {
        self.free.close();
    }
}

/// Runtime threads for `workers` worker VMs: one more than can block at once.
pub fn runtime_threads(workers: usize) -> usize {
    workers.saturating_add(1)
}

fn serve_one(fork: &mut Fork, job: &Job, timeout: Duration) -> Result {
    if fork.is_server() {
        return super::server::serve_one(fork, job, timeout);
    }
    let staged = (|| -> std::result::Result<u64, CallError> {
        let (method, path, query) = (
            fork.stage(&job.method)?,
            fork.stage(&job.path)?,
            fork.stage(&job.query)?,
        );
        let (headers, body) = (fork.stage(&job.headers)?, fork.stage(&job.body)?);
        let req = abi::Request {
            method,
            method_len: job.method.len() as u64,
            path,
            path_len: job.path.len() as u64,
            query,
            query_len: job.query.len() as u64,
            headers,
            headers_len: job.headers.len() as u64,
            body,
            body_len: job.body.len() as u64,
        };
        fork.stage(&req.to_bytes())
    })();
    let req = match staged {
        Ok(addr) => addr,
        Err(e) => return Result::Failed(e.to_string()),
    };
    match fork.call_handler(req, timeout) {
        Ok(_) => match fork.take_response() {
            Some(r) => Result::Answered(r),
            None => Result::NoResponse,
        },
        Err(CallError::Crashed(info)) => Result::Crashed(fork.crash_report(&info)),
        Err(CallError::TimedOut(_)) => Result::TimedOut,
        Err(e) => Result::Failed(e.to_string()),
    }
}
