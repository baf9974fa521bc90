//! Pipes: the buffer one pipe's (or named FIFO's) ends share, and the ends,
//! which count readers and writers so EOF, EPIPE and FIFO opens wait as on
//! Linux. Descriptors hold them through [`super::fdtable::FileKind`].

use super::fdtable::lock;
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes a pipe buffers before writes return EAGAIN.
pub const PIPE_CAPACITY: usize = 65536;

/// The shared buffer of one pipe (or of a named FIFO, see `fs::fifo`).
pub struct Pipe {
    /// Bytes written and not yet read (at most `capacity`).
    pub buf: VecDeque<u8>,
    /// How many bytes it holds ([`PIPE_CAPACITY`] unless F_SETPIPE_SZ).
    pub capacity: usize,
    /// Open read-end descriptions.
    pub readers: usize,
    /// Open write-end descriptions.
    pub writers: usize,
    /// Inode number reported by fstat.
    pub id: u64,
    /// Writes that put bytes in, and reads that took bytes out, so far:
    /// each is an edge for EPOLLET (readable, writable), even when the
    /// state an epoll_wait last saw looks unchanged (a reader that drained
    /// the pipe while a writer in another process refilled it).
    pub writes: u64,
    /// See `writes`.
    pub reads: u64,
    /// Read-end opens so far (Linux's `r_counter`): a FIFO's blocking
    /// write-open waits for it to change.
    pub reader_opens: u64,
    /// Write-end opens so far (`w_counter`): a FIFO's blocking read-open
    /// waits for it to change, and a reader reports POLLHUP only once a
    /// writer came (and went) after it opened.
    pub writer_opens: u64,
}

impl Pipe {
    /// An empty pipe with no ends open yet.
    pub fn new() -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Pipe {
            buf: VecDeque::new(),
            capacity: PIPE_CAPACITY,
            readers: 0,
            writers: 0,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            writes: 0,
            reads: 0,
            reader_opens: 0,
            writer_opens: 0,
        }
    }
}

impl Default for Pipe {
    fn default() -> Self {
        Self::new()
    }
}

/// The file system node a FIFO's ends were opened through: fstat and
/// /proc/self/fd/N describe it.
pub struct FifoNode {
    /// Host O_PATH descriptor of the FIFO.
    pub fd: OwnedFd,
    /// Guest path it was opened as.
    pub path: Vec<u8>,
}

/// One end of a pipe (or both, for a FIFO opened O_RDWR); dropping it (the
/// last fd of its description) closes the end.
pub struct PipeEnd {
    /// The pipe both ends share.
    pub pipe: Arc<Mutex<Pipe>>,
    /// Whether this end reads.
    pub read: bool,
    /// Whether this end writes.
    pub write: bool,
    /// The FIFO it was opened through (None: an anonymous pipe).
    pub node: Option<Arc<FifoNode>>,
    /// `writer_opens` when a reader opened: POLLHUP waits for a writer
    /// opened after that (a FIFO read-opened with O_NONBLOCK and no writer
    /// is not hung up, as on Linux).
    pub writers_seen: u64,
}

impl PipeEnd {
    /// A new pipe: (read end, write end).
    pub fn pair() -> (PipeEnd, PipeEnd) {
        let pipe = Arc::new(Mutex::new(Pipe::new()));
        let r = PipeEnd::open(&pipe, true, false, None);
        let w = PipeEnd::open(&pipe, false, true, None);
        (r, w)
    }

    /// Opens another end of `pipe`: counted as a reader and/or writer.
    pub fn open(
        pipe: &Arc<Mutex<Pipe>>,
        read: bool,
        write: bool,
        node: Option<Arc<FifoNode>>,
    ) -> PipeEnd {
        let mut p = lock(pipe);
        if read {
            p.readers += 1;
            p.reader_opens = p.reader_opens.wrapping_add(1);
        }
        if write {
            p.writers += 1;
            p.writer_opens = p.writer_opens.wrapping_add(1);
        }
        // With no writer now, a reader sees a hang-up only after one came;
        // with one (an anonymous pipe's is opened right after), once it is gone.
        let writers_seen = if p.writers == 0 {
            p.writer_opens
        } else {
            p.writer_opens.wrapping_sub(1)
        };
        PipeEnd {
            pipe: pipe.clone(),
            read,
            write,
            node,
            writers_seen,
        }
    }

    /// Whether a reader of this end sees a hang-up: no writer left, and
    /// one came after the reader opened.
    pub fn hung_up(&self, p: &Pipe) -> bool {
        p.writers == 0 && p.writer_opens != self.writers_seen
    }
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        let mut p = lock(&self.pipe);
        if self.write {
            p.writers = p.writers.saturating_sub(1);
        }
        if self.read {
            p.readers = p.readers.saturating_sub(1);
        }
    }
}
