//! Worker VMs: one OS thread per fork of the master. A worker takes a job
//! from the bounded queue, calls the guest's handler, sends the answer back
//! and only then resets its VM (when ephemeral), so the reset is off the
//! request's critical path.

use super::metrics::Metrics;
use bytes::Bytes;
use forkvm::abi;
use forkvm::fork::Fork;
use forkvm::machine::{CallError, Response};
use forkvm::master::Master;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The parts of an HTTP request the guest sees.
pub struct Job {
    pub method: Bytes,
    pub path: Bytes,
    pub query: Bytes,
    /// `Name: value` lines separated by `\n`.
    pub headers: Bytes,
    pub body: Bytes,
    pub enqueued: Instant,
    pub reply: oneshot::Sender<Outcome>,
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
}

/// The worker threads and the queue feeding them.
pub struct Workers {
    tx: Option<SyncSender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

/// Why a job was not queued.
pub enum Rejected {
    /// Every worker is busy and the queue is full.
    Full,
    /// The pool is shutting down.
    Closed,
}

impl Workers {
    /// Forks `settings.workers` VMs from `master` and starts a thread for each.
    pub fn start(
        master: &Master,
        settings: Settings,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(settings.queue);
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::with_capacity(settings.workers);
        for i in 0..settings.workers {
            let fork = master.fork()?;
            let rx = rx.clone();
            let metrics = metrics.clone();
            let (ephemeral, timeout) = (settings.ephemeral, settings.timeout);
            metrics.workers.inc();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("forkvm-worker-{i}"))
                    .spawn(move || work(fork, &rx, ephemeral, timeout, &metrics))?,
            );
        }
        Ok(Self {
            tx: Some(tx),
            threads,
        })
    }

    /// Queues a job, or says why not.
    pub fn submit(&self, job: Job) -> std::result::Result<(), Rejected> {
        match self.tx.as_ref().map(|tx| tx.try_send(job)) {
            Some(Ok(())) => Ok(()),
            Some(Err(TrySendError::Full(_))) => Err(Rejected::Full),
            _ => Err(Rejected::Closed),
        }
    }

    /// Stops taking jobs, lets the workers finish the queue, and waits for them.
    pub fn shutdown(mut self) {
        self.tx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn work(
    mut fork: Fork,
    rx: &Mutex<Receiver<Job>>,
    ephemeral: bool,
    timeout: Duration,
    m: &Metrics,
) {
    let mut last_reset = Duration::ZERO;
    loop {
        let job = match rx.lock() {
            Ok(rx) => match rx.recv() {
                Ok(job) => job,
                Err(_) => break,
            },
            Err(_) => break,
        };
        let queue = job.enqueued.elapsed();
        let t = Instant::now();
        let result = serve_one(&mut fork, &job, timeout);
        let run = t.elapsed();
        let _ = job.reply.send(Outcome {
            result,
            queue,
            reset: last_reset,
            run,
        });
        if ephemeral || fork.is_poisoned() {
            let t = Instant::now();
            if let Err(e) = fork.reset() {
                tracing::error!("worker reset failed: {e}");
                break;
            }
            last_reset = t.elapsed();
            m.resets.inc();
        } else {
            last_reset = Duration::ZERO;
        }
    }
    m.workers.dec();
}

fn serve_one(fork: &mut Fork, job: &Job, timeout: Duration) -> Result {
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
