//! Pseudo-terminals: `/dev/ptmx` opens a new master, `/dev/pts/N` its slave
//! (see `fs::virt`). Both ends share one [`Pty`] (the line discipline is in
//! `pty/ldisc.rs`); the run's ptys are numbered in its process tree
//! ([`Registry`]), so a child opens the slave its parent made. The
//! descriptors hold a [`PtyEnd`] through `FileKind::Pty`; blocking reads and
//! writes wait as a pipe's do (EAGAIN made again by the run loop).

mod ldisc;

pub use ldisc::Pty;
use ldisc::{Termios, TERMIOS_SIZE};

use super::fdtable::{lock, oflags::*, FileKind, FileRef, OpenFile};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Ptys a run may have open at once (Linux's kernel.pty.max is 4096).
const MAX_PTYS: usize = 256;

const TCGETS: u32 = 0x5401;
const TCSETS: u32 = 0x5402;
const TCSETSW: u32 = 0x5403;
const TCSETSF: u32 = 0x5404;
const TCSBRK: u32 = 0x5409;
const TCXONC: u32 = 0x540a;
const TCFLSH: u32 = 0x540b;
const TIOCSCTTY: u32 = 0x540e;
const TIOCGPGRP: u32 = 0x540f;
const TIOCSPGRP: u32 = 0x5410;
const TIOCOUTQ: u32 = 0x5411;
const TIOCGWINSZ: u32 = 0x5413;
const TIOCSWINSZ: u32 = 0x5414;
const FIONREAD: u32 = 0x541b;
const TIOCNOTTY: u32 = 0x5422;
const TCSBRKP: u32 = 0x5425;
const TIOCGSID: u32 = 0x5429;
const TIOCGPTN: u32 = 0x8004_5430;
const TIOCSPTLCK: u32 = 0x4004_5431;
const TIOCGPTLCK: u32 = 0x8004_5439;
const TIOCGPTPEER: u32 = 0x5441;

const SIGWINCH: u64 = 28;

/// Locks a pty (a poisoned lock is still usable: the state stays consistent).
pub fn lock_pty(p: &Mutex<Pty>) -> std::sync::MutexGuard<'_, Pty> {
    p.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The run's ptys by number (one devpts instance).
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<RegistryInner>,
}

#[derive(Debug, Default)]
struct RegistryInner {
    live: BTreeMap<u32, Weak<Mutex<Pty>>>,
    /// A pty was ever opened (a served tree is then not reused).
    used: bool,
}

impl Registry {
    fn inner(&self) -> std::sync::MutexGuard<'_, RegistryInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a pty was ever opened in the run.
    pub fn used(&self) -> bool {
        self.inner().used
    }

    /// A new pty with the lowest free number; ENOSPC past [`MAX_PTYS`].
    fn create(&self) -> Result<Arc<Mutex<Pty>>, Errno> {
        let mut r = self.inner();
        r.live.retain(|_, w| w.strong_count() > 0);
        if r.live.len() >= MAX_PTYS {
            return Err(Errno::ENOSPC);
        }
        let index = (0u32..)
            .find(|i| !r.live.contains_key(i))
            .ok_or(Errno::ENOSPC)?;
        let pty = Arc::new(Mutex::new(Pty::new(index)));
        r.live.insert(index, Arc::downgrade(&pty));
        r.used = true;
        Ok(pty)
    }

    /// The pty numbered `index` whose master is open.
    fn find(&self, index: u32) -> Option<Arc<Mutex<Pty>>> {
        let pty = self.inner().live.get(&index)?.upgrade()?;
        let open = lock_pty(&pty).masters > 0;
        open.then_some(pty)
    }

    /// The pty whose master is open that is session `sid`'s controlling terminal.
    fn controlling(&self, sid: u64) -> Option<Arc<Mutex<Pty>>> {
        self.inner()
            .live
            .values()
            .filter_map(std::sync::Weak::upgrade)
            .find(|p| {
                let g = lock_pty(p);
                g.masters > 0 && g.session == Some(sid)
            })
    }

    /// The numbers of the ptys whose master is open (`/dev/pts`).
    pub fn indices(&self) -> Vec<u32> {
        let r = self.inner();
        r.live
            .iter()
            .filter(|(_, w)| w.upgrade().is_some_and(|p| lock_pty(&p).masters > 0))
            .map(|(&i, _)| i)
            .collect()
    }
}

/// The run's registry (none without a process tree).
fn registry(p: &Process) -> Option<&Registry> {
    p.family.as_ref().map(|f| &f.tree.ptys)
}

/// Whether `/dev/pts/<index>` exists for `p`.
pub fn slave_exists(p: &Process, index: u32) -> bool {
    registry(p).is_some_and(|r| r.find(index).is_some())
}

/// The live numbers under `/dev/pts`.
pub fn listing(p: &Process) -> Vec<u32> {
    registry(p).map_or_else(Vec::new, Registry::indices)
}

/// One end of a pty; dropping it (the last fd of its description) closes it.
pub struct PtyEnd {
    pub pty: Arc<Mutex<Pty>>,
    /// The master (else the slave).
    pub master: bool,
}

impl PtyEnd {
    fn open(pty: &Arc<Mutex<Pty>>, master: bool) -> PtyEnd {
        let mut g = lock_pty(pty);
        if master {
            g.masters += 1;
        } else {
            g.slaves += 1;
            g.slave_closed = false;
        }
        PtyEnd {
            pty: pty.clone(),
            master,
        }
    }

    /// An end of a copy of the pty (a served fork's copy of the master's
    /// descriptors: not reachable by /dev/pts/N there).
    pub fn fork_copy(&self, copies: &mut Vec<(*const Mutex<Pty>, Arc<Mutex<Pty>>)>) -> PtyEnd {
        let key = Arc::as_ptr(&self.pty);
        let pty = match copies.iter().find(|(k, _)| *k == key) {
            Some((_, p)) => p.clone(),
            None => {
                let mut copy = lock_pty(&self.pty).clone();
                copy.masters = 0;
                copy.slaves = 0;
                let p = Arc::new(Mutex::new(copy));
                copies.push((key, p.clone()));
                p
            }
        };
        PtyEnd::open(&pty, self.master)
    }

    /// Its number.
    pub fn index(&self) -> u32 {
        lock_pty(&self.pty).index
    }

    /// What /proc/self/fd/N reads as.
    pub fn link(&self) -> String {
        match self.master {
            true => "/dev/ptmx".into(),
            false => format!("/dev/pts/{}", self.index()),
        }
    }

    /// Reads (`nonblocking`: VMIN is not waited for).
    pub fn read(&self, buf: &mut [u8], nonblocking: bool) -> Result<usize, Errno> {
        let mut p = lock_pty(&self.pty);
        match self.master {
            true => p.master_read(buf),
            false => p.slave_read(buf, nonblocking),
        }
    }

    /// Writes.
    pub fn write(&self, buf: &[u8]) -> Result<usize, Errno> {
        let mut p = lock_pty(&self.pty);
        match self.master {
            true => p.master_write(buf),
            false => p.slave_write(buf),
        }
    }

    /// poll(2) bits.
    pub fn poll(&self) -> i16 {
        const IN: i16 = 0x1 | 0x40;
        const OUT: i16 = 0x4 | 0x100;
        const ERR: i16 = 0x8;
        const HUP: i16 = 0x10;
        let p = lock_pty(&self.pty);
        let mut r = 0;
        if self.master {
            if !p.out.is_empty() || p.slave_closed {
                r |= IN;
            }
            if p.master_writable() {
                r |= OUT;
            }
            if p.slave_closed {
                r |= HUP;
            }
        } else if p.masters == 0 {
            r = IN | OUT | ERR | HUP;
        } else {
            if p.slave_readable() {
                r |= IN;
            }
            if p.slave_writable() {
                r |= OUT;
            }
        }
        r
    }

    /// What moved through it, for EPOLLET.
    pub fn edge_token(&self) -> u64 {
        let p = lock_pty(&self.pty);
        p.master_moves.wrapping_add(p.slave_moves)
    }

    /// Bytes FIONREAD reports.
    pub fn available(&self) -> usize {
        let p = lock_pty(&self.pty);
        match self.master {
            true => p.out.len(),
            false => p.slave_available(),
        }
    }
}

impl Drop for PtyEnd {
    fn drop(&mut self) {
        let mut p = lock_pty(&self.pty);
        if self.master {
            p.masters = p.masters.saturating_sub(1);
        } else {
            p.slaves = p.slaves.saturating_sub(1);
            if p.slaves == 0 {
                p.slave_closed = true;
            }
        }
    }
}

/// Opens `/dev/ptmx`: a new master, locked, numbered in the run.
pub fn open_master(p: &mut Process, status: u32, cloexec: bool) -> SysResult {
    let reg = registry(p).ok_or(Errno::ENODEV)?;
    let pty = reg.create()?;
    let end = PtyEnd::open(&pty, true);
    Ok(p.fds
        .insert(OpenFile::new(FileKind::Pty(end), status), cloexec)? as u64)
}

/// Opens `/dev/pts/<index>`: ENOENT once its master is gone, EIO while it
/// is locked. A session leader opening it without O_NOCTTY makes it its
/// controlling terminal if it is nobody's.
pub fn open_slave(p: &mut Process, index: u32, flags: u32, cloexec: bool) -> SysResult {
    let reg = registry(p).ok_or(Errno::ENOENT)?;
    let pty = reg.find(index).ok_or(Errno::ENOENT)?;
    open_slave_of(p, &pty, flags, cloexec)
}

/// Opens `/dev/tty`: the caller's controlling terminal if it is one of the
/// run's ptys (opened as its slave), else ENXIO, as on Linux for a process
/// without one. The host's terminal is never the guest's.
pub fn open_tty(p: &mut Process, flags: u32, cloexec: bool) -> SysResult {
    let (_, _, sid) = ids(p);
    let pty = registry(p)
        .and_then(|r| r.controlling(sid))
        .ok_or(Errno::ENXIO)?;
    open_slave_of(p, &pty, flags | O_NOCTTY, cloexec)
}

fn open_slave_of(p: &mut Process, pty: &Arc<Mutex<Pty>>, flags: u32, cloexec: bool) -> SysResult {
    if lock_pty(pty).locked {
        return Err(Errno::EIO);
    }
    if flags & O_NOCTTY == 0 {
        if let Some(ids) = p.family.as_ref().map(|f| f.ids()) {
            let mut g = lock_pty(pty);
            if ids.pid == ids.sid && g.session.is_none() {
                g.session = Some(ids.sid);
                g.fg_pgrp = Some(ids.pgid);
            }
        }
    }
    let end = PtyEnd::open(pty, false);
    let status = (flags & (O_ACCMODE | O_APPEND | O_NONBLOCK)) | O_LARGEFILE;
    Ok(p.fds
        .insert(OpenFile::new(FileKind::Pty(end), status), cloexec)? as u64)
}

/// The caller's (pid, process group, session).
fn ids(p: &Process) -> (u64, u64, u64) {
    match p.family.as_ref().map(|f| f.ids()) {
        Some(i) => (i.pid, i.pgid, i.sid),
        None => {
            let pid = super::child::pid_of(p);
            (pid, pid, super::process::PPID)
        }
    }
}

/// Sends the signals the line discipline raised (ISIG) to the foreground
/// process group; after a write to `file`, by the writer.
pub fn send_signals(p: &mut Process, file: &FileRef) {
    let (signals, group) = {
        let f = lock(file);
        let FileKind::Pty(end) = &f.kind else { return };
        let mut g = lock_pty(&end.pty);
        (std::mem::take(&mut g.signals), g.fg_pgrp)
    };
    // No foreground group: no signal, as on Linux.
    let Some(group) = group else { return };
    for sig in signals {
        let _ = super::child::kill(p, -(group as i64), u64::from(sig));
    }
}

/// ioctl(2) on a pty end.
pub fn ioctl(
    p: &mut Process,
    mem: &mut GuestMemory,
    file: &FileRef,
    req: u32,
    arg: u64,
) -> SysResult {
    let (pty, master) = match &lock(file).kind {
        FileKind::Pty(end) => (end.pty.clone(), end.master),
        _ => return Err(Errno::ENOTTY),
    };
    match req {
        TCGETS => {
            let t = lock_pty(&pty).termios;
            mem.write(arg, &t.to_bytes())?;
            Ok(0)
        }
        TCSETS | TCSETSW | TCSETSF => {
            let mut b = [0u8; TERMIOS_SIZE];
            b.copy_from_slice(mem.read(arg, TERMIOS_SIZE as u64)?);
            let mut g = lock_pty(&pty);
            if req == TCSETSF {
                g.flush_input();
            }
            g.set_termios(Termios::from_bytes(&b));
            Ok(0)
        }
        TIOCGWINSZ => {
            let w = lock_pty(&pty).winsize;
            mem.write(arg, &w)?;
            Ok(0)
        }
        TIOCSWINSZ => {
            let mut w = [0u8; 8];
            w.copy_from_slice(mem.read(arg, 8)?);
            let group = {
                let mut g = lock_pty(&pty);
                let changed = g.winsize != w;
                g.winsize = w;
                g.fg_pgrp.filter(|_| changed)
            };
            if let Some(group) = group {
                let _ = super::child::kill(p, -(group as i64), SIGWINCH);
            }
            Ok(0)
        }
        FIONREAD => {
            let n = match &lock(file).kind {
                FileKind::Pty(end) => end.available(),
                _ => 0,
            };
            mem.write_u32(arg, n.min(i32::MAX as usize) as u32)?;
            Ok(0)
        }
        TIOCOUTQ => {
            // A pty's output goes straight to the other end's queue.
            mem.write_u32(arg, 0)?;
            Ok(0)
        }
        TCFLSH => {
            let mut g = lock_pty(&pty);
            // The master's input is the slave's output and the other way round.
            let (input, output) = match arg {
                0 => (true, false),
                1 => (false, true),
                2 => (true, true),
                _ => return Err(Errno::EINVAL),
            };
            let (flush_in, flush_out) = if master {
                (output, input)
            } else {
                (input, output)
            };
            if flush_in {
                g.flush_input();
            }
            if flush_out {
                g.out.clear();
            }
            Ok(0)
        }
        TCXONC => match arg {
            0..=3 => Ok(0),
            _ => Err(Errno::EINVAL),
        },
        TCSBRK | TCSBRKP => Ok(0),
        TIOCGPTN if master => {
            let n = lock_pty(&pty).index;
            mem.write_u32(arg, n)?;
            Ok(0)
        }
        TIOCSPTLCK if master => {
            let on = mem.read_u32(arg)? != 0;
            lock_pty(&pty).locked = on;
            Ok(0)
        }
        TIOCGPTLCK if master => {
            let on = lock_pty(&pty).locked;
            mem.write_u32(arg, u32::from(on))?;
            Ok(0)
        }
        TIOCGPTPEER if master => {
            let flags = u32::try_from(arg).map_err(|_| Errno::EINVAL)?;
            if flags & !(O_ACCMODE | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) != 0 {
                return Err(Errno::EINVAL);
            }
            open_slave_of(p, &pty, flags | O_NOCTTY, flags & O_CLOEXEC != 0)
        }
        TIOCSCTTY => {
            let (pid, pgid, sid) = ids(p);
            let mut g = lock_pty(&pty);
            if g.session == Some(sid) {
                return Ok(0);
            }
            if pid != sid || g.session.is_some() {
                return Err(Errno::EPERM);
            }
            g.session = Some(sid);
            g.fg_pgrp = Some(pgid);
            Ok(0)
        }
        TIOCNOTTY => {
            let (pid, _, sid) = ids(p);
            let mut g = lock_pty(&pty);
            if master || g.session != Some(sid) {
                return Err(Errno::ENOTTY);
            }
            if pid == sid {
                g.session = None;
                g.fg_pgrp = None;
            }
            Ok(0)
        }
        TIOCGPGRP => {
            let (_, _, sid) = ids(p);
            let g = lock_pty(&pty);
            // The master may ask whatever its session; the slave only as
            // the controlling terminal of the caller's.
            if !master && g.session != Some(sid) {
                return Err(Errno::ENOTTY);
            }
            let group = g.fg_pgrp.unwrap_or(0);
            drop(g);
            mem.write_u32(arg, group as u32)?;
            Ok(0)
        }
        TIOCSPGRP => {
            let (_, _, sid) = ids(p);
            let group = mem.read_u32(arg)? as i32;
            let mut g = lock_pty(&pty);
            if g.session != Some(sid) {
                return Err(Errno::ENOTTY);
            }
            if group < 0 {
                return Err(Errno::EINVAL);
            }
            if !super::child::group_in_session(p, group as u64, sid) {
                return Err(Errno::EPERM);
            }
            g.fg_pgrp = Some(group as u64);
            Ok(0)
        }
        TIOCGSID => {
            let (_, _, sid) = ids(p);
            let g = lock_pty(&pty);
            let Some(s) = g.session.filter(|&s| master || s == sid) else {
                return Err(Errno::ENOTTY);
            };
            drop(g);
            mem.write_u32(arg, s as u32)?;
            Ok(0)
        }
        _ => Err(Errno::ENOTTY),
    }
}

/// Whether `a` (an ioctl's arguments) is about a pty (the run's sleepers may then wait on it).
pub fn is_pty(p: &Process, a: &Args) -> bool {
    p.fds
        .get(a[0] as i32)
        .is_ok_and(|f| matches!(lock(&f).kind, FileKind::Pty(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_reused_lowest_first_and_bounded() {
        let reg = Registry::default();
        assert!(!reg.used());
        let a = reg.create().unwrap();
        let ea = PtyEnd::open(&a, true);
        let b = reg.create().unwrap();
        let eb = PtyEnd::open(&b, true);
        assert_eq!((ea.index(), eb.index()), (0, 1));
        assert_eq!(reg.indices(), vec![0, 1]);
        drop(ea);
        drop(a);
        assert!(reg.find(0).is_none());
        assert_eq!(reg.indices(), vec![1]);
        let c = reg.create().unwrap();
        assert_eq!(lock_pty(&c).index, 0);
        let mut keep = Vec::new();
        while let Ok(p) = reg.create() {
            keep.push(p);
        }
        assert_eq!(keep.len() + 2, MAX_PTYS);
        assert!(reg.used());
    }

    #[test]
    fn closing_ends_hangs_up_the_other() {
        let pty = Arc::new(Mutex::new(Pty::new(0)));
        let m = PtyEnd::open(&pty, true);
        let s = PtyEnd::open(&pty, false);
        assert_eq!(m.poll() & 0x10, 0);
        assert_eq!(s.write(b"x\n"), Ok(2));
        drop(s);
        assert_ne!(m.poll() & 0x10, 0);
        let mut b = [0u8; 8];
        assert_eq!(m.read(&mut b, true), Ok(3));
        assert_eq!(m.read(&mut b, true), Err(Errno::EIO));
        let s = PtyEnd::open(&pty, false);
        assert_eq!(m.poll() & 0x10, 0);
        drop(m);
        assert_eq!(s.poll(), 0x1 | 0x40 | 0x4 | 0x100 | 0x8 | 0x10);
        assert_eq!(s.read(&mut b, false), Ok(0));
        assert_eq!(s.write(b"x"), Err(Errno::EIO));
    }
}
