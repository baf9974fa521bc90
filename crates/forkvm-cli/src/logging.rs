//! Where forkvm's own log lines go: stderr, written in batches by a thread
//! of their own for `serve`, directly for everything else.
//!
//! `forkvm serve` logs a line per request. Handing each line to a writer
//! thread that sleeps between lines (tracing-appender's non-blocking writer)
//! woke that thread once per request: on a machine whose idle vCPU must be
//! woken first, that cost each request ~20 µs at `wrk -t1 -c1` (handler
//! hello 166 µs with the log against 146 µs with `-q`). Here a request's
//! thread appends its line to a shared buffer, and wakes the writer only
//! when the writer sleeps with nothing to write; a writer that found lines
//! looks again [`FLUSH_EVERY`] later, so under load it wakes ~100 times a
//! second whatever the request rate. A stderr nobody reads never blocks a
//! request: beyond [`MAX_PENDING`] bytes lines are dropped, and how many is
//! said once the writer gets through again; nor does it keep the process
//! from exiting (the last lines get [`FINAL_FLUSH`]).

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How long the writer waits for more lines after it wrote some.
pub const FLUSH_EVERY: Duration = Duration::from_millis(10);
/// Most bytes waiting to be written; lines beyond are dropped.
pub const MAX_PENDING: usize = 4 << 20;

#[derive(Default)]
struct Pending {
    buf: Vec<u8>,
    dropped: u64,
    /// The writer waits for a wake-up (rather than for [`FLUSH_EVERY`]).
    idle: bool,
    closing: bool,
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The `MakeWriter` of batched output.
#[derive(Clone)]
pub struct Batched {
    shared: Arc<Shared>,
}

/// How long the guard's drop waits for what is left to be written (a
/// stderr nobody reads must not keep the process from exiting).
pub const FINAL_FLUSH: Duration = Duration::from_secs(1);

/// Writes what is left (for up to [`FINAL_FLUSH`]) and stops the writer
/// thread when dropped.
pub struct Guard {
    shared: Arc<Shared>,
    /// Closed by the writer thread when it returns.
    finished: std::sync::mpsc::Receiver<()>,
}

impl Batched {
    /// Starts the writer thread, which writes to `out`.
    pub fn start(mut out: impl Write + Send + 'static) -> std::io::Result<(Self, Guard)> {
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
        });
        let s = shared.clone();
        let (done, finished) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("forkvm-log".into())
            .spawn(move || {
                write_batches(&s, &mut out);
                drop(done);
            })?;
        Ok((
            Self {
                shared: shared.clone(),
            },
            Guard { shared, finished },
        ))
    }
}

fn write_batches(shared: &Shared, out: &mut impl Write) {
    loop {
        let (batch, dropped, closing) = {
            let mut p = shared.lock();
            while p.buf.is_empty() && p.dropped == 0 && !p.closing {
                p.idle = true;
                p = shared.wake.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            p.idle = false;
            (
                std::mem::take(&mut p.buf),
                std::mem::take(&mut p.dropped),
                p.closing,
            )
        };
        // Nowhere to report a failing stderr: its lines are lost.
        if dropped > 0 {
            let _ = writeln!(
                out,
                "forkvm: {dropped} log line(s) dropped: stderr did not keep up"
            );
        }
        let _ = out.write_all(&batch);
        let _ = out.flush();
        if closing {
            if shared.lock().buf.is_empty() {
                return;
            }
            continue;
        }
        // Let lines gather (producers do not wake a writer that is not
        // idle); the guard's drop cuts the wait short.
        let p = shared.lock();
        let _ = shared
            .wake
            .wait_timeout_while(p, FLUSH_EVERY, |p| !p.closing)
            .map_err(|e| e.into_inner());
    }
}

/// One line's writer (tracing writes a formatted line in one call).
pub struct Line<'a>(&'a Shared);

impl Write for Line<'_> {
    fn write(&mut self, line: &[u8]) -> std::io::Result<usize> {
        let mut p = self.0.lock();
        if p.buf.len() + line.len() > MAX_PENDING {
            p.dropped += 1;
        } else {
            p.buf.extend_from_slice(line);
        }
        if p.idle {
            p.idle = false;
            self.0.wake.notify_one();
        }
        Ok(line.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Batched {
    type Writer = Line<'a>;

    fn make_writer(&'a self) -> Line<'a> {
        Line(&self.shared)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.wake.notify_one();
        // Returns when the writer is done (its sender dropped) or gives up.
        let _ = self.finished.recv_timeout(FINAL_FLUSH);
    }
}

/// Sets up logging with `default` as the filter unless `FORKVM_LOG` gives
/// one; `batched`: through [`Batched`] (for `serve`), else straight to stderr
/// (`run`'s rare lines, in order with the guest's own output). Returns what
/// must live until the end of `main` (it writes what is left when dropped).
pub fn init(default: &str, batched: bool) -> Option<Guard> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FORKVM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .without_time();
    if batched {
        if let Ok((writer, guard)) = Batched::start(std::io::stderr()) {
            builder.with_writer(writer).init();
            return Some(guard);
        }
    }
    builder.with_writer(std::io::stderr).init();
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::fmt::MakeWriter;

    /// A `Write` whose bytes the test can read, and which can be made to
    /// block (a stderr nobody reads).
    #[derive(Clone, Default)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        stuck: Arc<Mutex<()>>,
    }

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let _stuck = self.stuck.lock().unwrap();
            self.bytes.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_arrives_in_order_by_the_time_the_guard_is_dropped() {
        let sink = Sink::default();
        let (w, guard) = Batched::start(sink.clone()).unwrap();
        for i in 0..1000 {
            writeln!(w.make_writer(), "line {i}").unwrap();
        }
        drop(guard);
        let text = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        let want: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        assert_eq!(text, want);
    }

    #[test]
    fn a_stderr_stuck_for_good_does_not_keep_the_guard_from_returning() {
        let sink = Sink::default();
        let _stuck = sink.stuck.lock().unwrap();
        let (w, guard) = Batched::start(sink.clone()).unwrap();
        writeln!(w.make_writer(), "never written").unwrap();
        drop(guard); // returns after FINAL_FLUSH instead of waiting forever
    }

    #[test]
    fn a_stuck_stderr_drops_lines_instead_of_blocking_and_says_so() {
        let sink = Sink::default();
        let stuck = sink.stuck.lock().unwrap();
        let (w, guard) = Batched::start(sink.clone()).unwrap();
        // The writer takes what came first and blocks on the sink; the rest
        // fill the buffer and overflow it (at most two thirds can be held),
        // and no call here blocks.
        let line = vec![b'x'; 1023];
        let n = 3 * MAX_PENDING / 1024;
        for _ in 0..n {
            let mut l = line.clone();
            l.push(b'\n');
            w.make_writer().write_all(&l).unwrap();
        }
        drop(stuck);
        drop(guard);
        let text = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        assert!(text.contains("log line(s) dropped"), "no notice");
        let kept = text.lines().filter(|l| l.starts_with('x')).count();
        assert!(kept < n && kept >= MAX_PENDING / 1024, "{kept} of {n}");
    }
}
