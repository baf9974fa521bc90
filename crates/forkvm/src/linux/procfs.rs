//! A minimal synthetic /proc: the guest's own view, never the host's.
//!
//! `/proc/self/maps` (what the program mapped), `/proc/self/status`,
//! `/proc/self/stat` and `statm` (its memory and threads),
//! `/proc/meminfo` (its memory limit), `/proc/cpuinfo` and `/proc/stat` (one CPU) are
//! generated when opened, into a sealed in-memory file, so every read,
//! seek, fstat and mmap path treats them as ordinary read-only files.
//! `/proc/self/exe` opens the program itself; `/proc/self/fd/N` is handled
//! with the other descriptor aliases in [`super::fs`].

use super::process::{PPID, UID};
use super::Process;
use crate::memory::GuestMemory;
use std::fmt::Write as _;
use std::os::fd::OwnedFd;

/// The contents of a synthetic file at the normalised absolute `path`, if it is one.
pub fn synthesize(p: &Process, mem: &GuestMemory, path: &[u8]) -> Option<Vec<u8>> {
    // A child process is itself, with its parent: not the run's first process.
    let pid = super::child::pid_of(p);
    let ppid = p.family.as_ref().map_or(PPID, super::child::Family::ppid);
    let path = path
        .strip_prefix(b"/proc/self/")
        .map(|rest| [b"self/".as_slice(), rest].concat())
        .or_else(|| {
            path.strip_prefix(format!("/proc/{pid}/").as_bytes())
                .map(|rest| [b"self/".as_slice(), rest].concat())
        })
        .or_else(|| path.strip_prefix(b"/proc/").map(<[u8]>::to_vec))?;
    let mut s = String::new();
    match path.as_slice() {
        b"self/maps" => {
            let stack_lo = mem.size() - p.mm.stack_size(mem.size());
            for (start, end, r) in mem.user_mappings() {
                let name = if start >= stack_lo {
                    "[stack]"
                } else if start >= p.mm.brk_start && start < p.mm.brk.max(p.mm.brk_start + 1) {
                    "[heap]"
                } else {
                    ""
                };
                let _ = writeln!(
                    s,
                    "{start:08x}-{end:08x} {}{}-p 00000000 00:00 0                          {name}",
                    if r.read { 'r' } else { '-' },
                    if r.write { 'w' } else { '-' },
                );
            }
        }
        b"self/status" => {
            let name = String::from_utf8_lossy(p.comm.split(|&b| b == 0).next().unwrap_or(b""));
            let _ = write!(
                s,
                "Name:\t{name}\nState:\tR (running)\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t{ppid}\n\
                 Uid:\t{UID}\t{UID}\t{UID}\t{UID}\nGid:\t{UID}\t{UID}\t{UID}\t{UID}\n\
                 VmRSS:\t{} kB\nThreads:\t{}\n",
                mem.committed() >> 10,
                p.threads.count(),
            );
        }
        b"self/stat" => {
            // Linux's 52 fields; what is not tracked is 0. libuv reads the
            // resident size (field 24) for node's process.memoryUsage().
            let name = String::from_utf8_lossy(p.comm.split(|&b| b == 0).next().unwrap_or(b""));
            let pages = mem.committed() / crate::abi::PAGE_SIZE;
            let _ = writeln!(
                s,
                "{pid} ({name}) R {ppid} {pid} {pid} 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 {threads} 0 0 \
                 {vsize} {pages} 18446744073709551615 0 0 0 0 0 0 {blocked} 0 0 0 0 0 17 0 0 0 0 0 0 \
                 0 0 0 0 0 0 0 0",
                threads = p.threads.count(),
                vsize = mem.committed(),
                blocked = p.sigmask,
            );
        }
        b"self/statm" => {
            // size resident shared text lib data dt, in pages.
            let pages = mem.committed() / crate::abi::PAGE_SIZE;
            let _ = writeln!(s, "{pages} {pages} 0 0 0 {pages} 0");
        }
        b"meminfo" => {
            let total = mem.commit_limit() >> 10;
            let free = total.saturating_sub(mem.committed_by_all() >> 10);
            let _ = write!(
                s,
                "MemTotal:       {total:8} kB\nMemFree:        {free:8} kB\nMemAvailable:   {free:8} kB\n\
                 Buffers:               0 kB\nCached:                0 kB\nSwapTotal:             0 kB\n\
                 SwapFree:              0 kB\n"
            );
        }
        b"stat" => {
            // One CPU, busy since the process started (in clock ticks, 100
            // a second): libuv counts the cpuN lines for node's os.cpus().
            let ticks = p.started.elapsed().as_millis() / 10;
            let boot = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
                .saturating_sub(p.started.elapsed().as_secs());
            let _ = write!(
                s,
                "cpu  {ticks} 0 0 0 0 0 0 0 0 0\ncpu0 {ticks} 0 0 0 0 0 0 0 0 0\nintr 0\nctxt 0\n\
                 btime {boot}\nprocesses 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0\n"
            );
        }
        b"cpuinfo" => {
            let _ = write!(
                s,
                "processor\t: 0\nvendor_id\t: forkvm\nmodel name\t: forkvm vCPU\ncpu MHz\t\t: 0.000\n\
                 cache size\t: 0 KB\nsiblings\t: 1\ncpu cores\t: 1\nflags\t\t: fpu tsc cx8 cmov mmx fxsr sse sse2 \
                 lm\n\n"
            );
        }
        _ => return None,
    }
    Some(s.into_bytes())
}

/// A read-only in-memory file holding `data`.
pub fn memory_file(data: &[u8]) -> Result<OwnedFd, super::Errno> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(
        "forkvm-proc",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )?;
    let mut done = 0;
    while done < data.len() {
        done += rustix::io::write(&fd, &data[done..])?;
    }
    rustix::fs::fcntl_add_seals(
        &fd,
        SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
    )?;
    Ok(fd)
}
