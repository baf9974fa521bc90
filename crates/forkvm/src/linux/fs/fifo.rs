//! Named FIFOs (mkfifo) with Linux's open semantics.
//!
//! The node is the host's (mknod makes it under the write roots), but the
//! data never goes through the host kernel: every open of one node, by any
//! process of the run (each on its own host thread), shares one in-process
//! [`Pipe`], found by the node's device and inode number. A host FIFO
//! outside the write roots stays closed (EACCES), so the guest never talks
//! to a host program through a FIFO it did not make.
//!
//! Opening follows Linux's `fifo_open`: a read-only open waits for a writer
//! (unless O_NONBLOCK), a write-only open waits for a reader (O_NONBLOCK:
//! ENXIO when there is none), O_RDWR never waits. A waiting open already
//! counts as a reader or writer (so its partner's open completes), and it
//! completes once a partner opened since, even if it went away again. The
//! wait is the usual one (the call is made again, see `thread::wait`): the
//! end opened on the first attempt is kept in [`Process::fifo_waits`]
//! until the call completes, or is dropped when a signal interrupts it.

use super::*;
use crate::linux::fdtable::{FifoNode, Pipe, PipeEnd};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

/// The pipes of the FIFOs open somewhere in this host process, by host
/// (device, inode). A pipe lives while an end is open (its data too, as on
/// Linux, where the last close of a FIFO discards what was not read).
static FIFOS: Mutex<BTreeMap<NodeKey, Weak<Mutex<Pipe>>>> = Mutex::new(BTreeMap::new());

/// A FIFO node by host (device, inode).
type NodeKey = (u64, u64);

/// A FIFO open waiting for its partner.
pub struct FifoWait {
    /// The waiting thread.
    tid: u64,
    /// The node, by host (device, inode).
    key: NodeKey,
    /// The access mode asked for.
    acc: u32,
    /// The end it opened (counted as a reader or writer meanwhile).
    end: PipeEnd,
    /// The partner's open count when it started.
    since: u64,
}

/// The pipe shared by every open of the FIFO `key`.
fn shared_pipe(key: NodeKey) -> Arc<Mutex<Pipe>> {
    let mut map = lock(&FIFOS);
    if let Some(pipe) = map.get(&key).and_then(Weak::upgrade) {
        return pipe;
    }
    map.retain(|_, w| w.strong_count() > 0);
    let pipe = Arc::new(Mutex::new(Pipe::new()));
    map.insert(key, Arc::downgrade(&pipe));
    pipe
}

/// Forgets the waiting FIFO open of the running thread (a signal ended
/// its wait): its end closes.
pub fn interrupted_open(p: &mut Process) {
    let tid = p.tid;
    p.fifo_waits.retain(|w| w.tid != tid);
}

/// Opens the FIFO `r` (resolved, not O_PATH) with open(2) `flags`.
pub(super) fn open(
    p: &mut Process,
    r: Resolved,
    flags: u32,
    status: u32,
    cloexec: bool,
) -> SysResult {
    if !in_write_roots(p, &r.path, &r.stat) {
        // The host's FIFOs stay closed.
        return Err(Errno::EACCES);
    }
    if flags & O_DIRECTORY != 0 {
        return Err(Errno::ENOTDIR);
    }
    if flags & (O_CREAT | O_EXCL) == O_CREAT | O_EXCL {
        return Err(Errno::EEXIST);
    }
    let key = (r.stat.st_dev, r.stat.st_ino);
    let acc = flags & O_ACCMODE;
    let nonblocking = flags & O_NONBLOCK != 0;
    let tid = p.tid;
    let pending = p
        .fifo_waits
        .iter()
        .position(|w| w.tid == tid)
        .map(|i| p.fifo_waits.swap_remove(i))
        .filter(|w| w.key == key && w.acc == acc);
    let (end, since) = match pending {
        Some(w) => (w.end, w.since),
        None => {
            let pipe = shared_pipe(key);
            let (read, write) = match acc {
                O_RDONLY => (true, false),
                O_WRONLY => (false, true),
                _ => (true, true),
            };
            let since = {
                let g = lock(&pipe);
                if acc == O_WRONLY && nonblocking && g.readers == 0 {
                    return Err(Errno::ENXIO);
                }
                if read {
                    g.writer_opens
                } else {
                    g.reader_opens
                }
            };
            let node = Arc::new(FifoNode {
                fd: owned(r.fd)?,
                path: r.path,
            });
            (PipeEnd::open(&pipe, read, write, Some(node)), since)
        }
    };
    let ready = {
        let g = lock(&end.pipe);
        match acc {
            O_RDONLY => nonblocking || g.writers > 0 || g.writer_opens != since,
            O_WRONLY => g.readers > 0 || g.reader_opens != since,
            _ => true,
        }
    };
    if !ready {
        p.fifo_waits.push(FifoWait {
            tid,
            key,
            acc,
            end,
            since,
        });
        let _ = crate::linux::thread::wait(p, None, None);
        return Ok(0);
    }
    let file = OpenFile::new(FileKind::Pipe(end), status);
    Ok(p.fds.insert(file, cloexec)? as u64)
}
