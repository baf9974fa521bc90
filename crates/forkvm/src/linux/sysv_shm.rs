//! SysV shared memory: shmget, shmat, shmdt, shmctl.
//!
//! A segment is a memfd, as a `MAP_SHARED | MAP_ANONYMOUS` mapping's is
//! (`memory::shared`): shmat maps it shared at the attach address, so every
//! process of the run that attaches it, and every fork child of one that
//! did (the child's memory maps the parent's shared ranges again), sees the
//! same pages. The segments of a run are one [`Namespace`], held by its
//! process tree (`child::Tree`), as one IPC namespace on Linux.
//!
//! A process's attaches are its [`Attachments`]: they count in the
//! segment's `shm_nattch`; a fork copies them (counting again), and they
//! are detached when the process execs or ends (the state is dropped). A
//! removed segment (IPC_RMID) loses its key and lives until its last
//! detach.
//!
//! Limits: at most [`SHMMNI`] segments, and their sizes together (SHMALL,
//! and each one's, SHMMAX) at most the run's memory limit (`--memory`),
//! since a segment's pages are held while nothing maps them; attached,
//! they are charged to each process that maps them, as a shared mapping is.

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::abi::PAGE_SIZE;
use crate::memory::{GuestMemory, Rights};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Most segments at once (Linux's default is 4,096; each is a host memfd).
pub const SHMMNI: usize = 1024;
/// Linux's bound on the index part of an id (`IPCMNI`): ids are
/// `seq * IPCMNI + index`.
const IPCMNI: i32 = 32768;
/// Largest sequence number (`INT_MAX >> 15`), after which it wraps to 0.
const SEQ_MAX: i32 = i32::MAX / IPCMNI;

const IPC_PRIVATE: i32 = 0;
const IPC_CREAT: i32 = 0o1000;
const IPC_EXCL: i32 = 0o2000;
const SHM_HUGETLB: i32 = 0o4000;
const SHM_RDONLY: i32 = 0o10000;
const SHM_RND: i32 = 0o20000;
const SHM_REMAP: i32 = 0o40000;
const SHM_EXEC: i32 = 0o100000;
/// In `shm_perm.mode`: removed, waiting for its last detach.
const SHM_DEST: u32 = 0o1000;
/// In `shm_perm.mode`: locked in memory (SHM_LOCK).
const SHM_LOCKED: u32 = 0o2000;
const S_IRWXUGO: u32 = 0o777;

const IPC_RMID: i32 = 0;
const IPC_SET: i32 = 1;
const IPC_STAT: i32 = 2;
const IPC_INFO: i32 = 3;
const SHM_LOCK: i32 = 11;
const SHM_UNLOCK: i32 = 12;
const SHM_STAT: i32 = 13;
const SHM_INFO: i32 = 14;
const SHM_STAT_ANY: i32 = 15;

/// `struct shmid64_ds` on x86-64: the size, and where its fields are.
const SHMID_DS_SIZE: usize = 112;
/// `struct shminfo64`: nine unsigned longs.
const SHMINFO_SIZE: usize = 72;
/// `struct shm_info`: an int (padded) and five unsigned longs.
const SHM_INFO_SIZE: usize = 48;

/// Who the calling process is (the guest's ids are fixed).
const UID: u32 = super::process::UID as u32;
const GID: u32 = super::process::UID as u32;

/// One segment.
#[derive(Debug)]
struct Segment {
    key: i32,
    seq: i32,
    size: u64,
    backing: Arc<OwnedFd>,
    uid: u32,
    gid: u32,
    cuid: u32,
    cgid: u32,
    /// Permission bits, with SHM_DEST and SHM_LOCKED.
    mode: u32,
    atime: i64,
    dtime: i64,
    ctime: i64,
    cpid: u32,
    lpid: u32,
    nattch: u64,
}

impl Segment {
    fn pages(&self) -> u64 {
        self.size.div_ceil(PAGE_SIZE)
    }

    /// Whether the caller may access it as `flag`'s permission bits ask
    /// (Linux's `ipcperms`: the owner's or creator's bits, else the group's,
    /// else the others').
    fn permits(&self, flag: u32) -> bool {
        let requested = (flag >> 6) | (flag >> 3) | flag;
        let mut granted = self.mode;
        if UID == self.uid || UID == self.cuid {
            granted >>= 6;
        } else if GID == self.gid || GID == self.cgid {
            granted >>= 3;
        }
        requested & !granted & 0o7 == 0
    }

    /// Whether the caller owns or created it (may change or remove it).
    fn owned(&self) -> bool {
        UID == self.uid || UID == self.cuid
    }

    /// `struct shmid64_ds`.
    fn to_bytes(&self) -> [u8; SHMID_DS_SIZE] {
        let mut b = [0u8; SHMID_DS_SIZE];
        let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(0, &self.key.to_le_bytes());
        put(4, &self.uid.to_le_bytes());
        put(8, &self.gid.to_le_bytes());
        put(12, &self.cuid.to_le_bytes());
        put(16, &self.cgid.to_le_bytes());
        put(20, &self.mode.to_le_bytes());
        put(24, &(self.seq as u16).to_le_bytes());
        put(48, &self.size.to_le_bytes());
        put(56, &self.atime.to_le_bytes());
        put(64, &self.dtime.to_le_bytes());
        put(72, &self.ctime.to_le_bytes());
        put(80, &self.cpid.to_le_bytes());
        put(84, &self.lpid.to_le_bytes());
        put(88, &self.nattch.to_le_bytes());
        b
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// By index (the low 15 bits of the id).
    segs: BTreeMap<i32, Segment>,
    /// The sequence number new ids take (it grows when indices wrap).
    seq: i32,
    /// The index last handed out (indices go round, as Linux's do).
    last_idx: Option<i32>,
    /// Pages of all segments together.
    total_pages: u64,
}

impl Inner {
    fn by_id(&mut self, id: i32) -> Result<&mut Segment, Errno> {
        if id < 0 {
            return Err(Errno::EINVAL);
        }
        self.segs
            .get_mut(&(id % IPCMNI))
            .filter(|s| s.seq == id / IPCMNI)
            .ok_or(Errno::EINVAL)
    }

    /// A free index, after the last one handed out first.
    fn free_index(&mut self) -> Option<i32> {
        let start = self.last_idx.map_or(0, |i| i + 1) % IPCMNI;
        let idx = (start..IPCMNI)
            .chain(0..start)
            .find(|i| !self.segs.contains_key(i))?;
        if self.last_idx.is_some_and(|last| idx <= last) {
            self.seq = if self.seq >= SEQ_MAX { 0 } else { self.seq + 1 };
        }
        self.last_idx = Some(idx);
        Some(idx)
    }

    /// Drops the segment at `idx` if it was removed and nothing attaches it.
    fn reap(&mut self, idx: i32) {
        if let Some(s) = self.segs.get(&idx) {
            if s.mode & SHM_DEST != 0 && s.nattch == 0 {
                self.total_pages = self.total_pages.saturating_sub(s.pages());
                self.segs.remove(&idx);
            }
        }
    }

    fn max_index(&self) -> u64 {
        self.segs.keys().next_back().map_or(0, |&i| i as u64)
    }
}

/// The SysV shared memory segments of one run (an IPC namespace).
#[derive(Debug, Default)]
pub struct Namespace {
    inner: Mutex<Inner>,
}

impl Namespace {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One more attach of segment `id` (a fork copied it).
    fn attach_again(&self, id: i32) {
        if let Ok(s) = self.lock().by_id(id) {
            s.nattch += 1;
        }
    }

    /// One attach of segment `id` fewer, by process `pid`.
    fn detach(&self, id: i32, pid: u32) {
        let mut inner = self.lock();
        if let Ok(s) = inner.by_id(id) {
            s.nattch = s.nattch.saturating_sub(1);
            s.dtime = now();
            s.lpid = pid;
            inner.reap(id % IPCMNI);
        }
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// One attach of a segment in a process.
#[derive(Debug)]
struct Attached {
    addr: u64,
    len: u64,
    id: i32,
    ns: Arc<Namespace>,
}

/// The segments a process has attached (detached when it is dropped: the
/// process exec'd or ended).
#[derive(Debug, Default)]
pub struct Attachments {
    list: Vec<Attached>,
    /// The process's pid (for `shm_lpid` when it detaches).
    pid: u32,
}

impl Attachments {
    /// The copy a fork child starts with: the same attaches, counted again.
    pub fn fork_copy(&self) -> Self {
        let list = self
            .list
            .iter()
            .map(|a| {
                a.ns.attach_again(a.id);
                Attached {
                    ns: a.ns.clone(),
                    ..*a
                }
            })
            .collect();
        Self {
            list,
            pid: self.pid,
        }
    }

    /// Names the process these attaches belong to.
    pub fn set_pid(&mut self, pid: u64) {
        self.pid = pid as u32;
    }

    /// `addr..addr+len` was unmapped: the attaches wholly inside it are gone.
    pub fn unmapped(&mut self, addr: u64, len: u64) {
        let end = addr.saturating_add(len);
        let pid = self.pid;
        self.list.retain(|a| {
            let inside = a.addr >= addr && a.addr + a.len <= end;
            if inside {
                a.ns.detach(a.id, pid);
            }
            !inside
        });
    }

    /// Whether `addr..addr+len` meets an attach.
    fn meets(&self, addr: u64, len: u64) -> bool {
        self.list
            .iter()
            .any(|a| a.addr < addr + len && addr < a.addr + a.len)
    }
}

impl Drop for Attachments {
    fn drop(&mut self) {
        for a in &self.list {
            a.ns.detach(a.id, self.pid);
        }
    }
}

/// The run's namespace (none outside a run's process tree).
fn namespace(p: &Process) -> Result<Arc<Namespace>, Errno> {
    p.family
        .as_ref()
        .map(|f| f.tree.shm.clone())
        .ok_or(Errno::ENOSYS)
}

fn pid(p: &Process) -> u32 {
    super::child::pid_of(p) as u32
}

/// Implements shmget(2).
fn sys_shmget(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let (key, size, flg) = (a[0] as i32, a[1], a[2] as i32);
    let ns = namespace(p)?;
    let mut inner = ns.lock();
    if key != IPC_PRIVATE {
        let found = inner
            .segs
            .iter()
            .find(|(_, s)| s.key == key)
            .map(|(&i, _)| i);
        if let Some(idx) = found {
            if flg & IPC_CREAT != 0 && flg & IPC_EXCL != 0 {
                return Err(Errno::EEXIST);
            }
            let s = &inner.segs[&idx];
            if s.size < size {
                return Err(Errno::EINVAL);
            }
            if !s.permits(flg as u32) {
                return Err(Errno::EACCES);
            }
            return Ok((s.seq * IPCMNI + idx) as u64);
        }
        if flg & IPC_CREAT == 0 {
            return Err(Errno::ENOENT);
        }
    }
    // A new segment (Linux's `newseg`).
    let limit = mem.commit_limit();
    if size < 1 || size > limit {
        return Err(Errno::EINVAL);
    }
    let pages = size.div_ceil(PAGE_SIZE);
    if inner.total_pages.saturating_add(pages) > limit / PAGE_SIZE {
        return Err(Errno::ENOSPC);
    }
    if flg & SHM_HUGETLB != 0 {
        // Not in the hugetlb group and no CAP_IPC_LOCK.
        return Err(Errno::EPERM);
    }
    if inner.segs.len() >= SHMMNI {
        return Err(Errno::ENOSPC);
    }
    let backing = crate::memory::anonymous_backing(pages * PAGE_SIZE).map_err(|e| {
        tracing::debug!("shmget: no memfd for a segment: {e}");
        Errno::ENOMEM
    })?;
    let idx = inner.free_index().ok_or(Errno::ENOSPC)?;
    let seq = inner.seq;
    inner.total_pages += pages;
    inner.segs.insert(
        idx,
        Segment {
            key,
            seq,
            size,
            backing,
            uid: UID,
            gid: GID,
            cuid: UID,
            cgid: GID,
            mode: flg as u32 & S_IRWXUGO,
            atime: 0,
            dtime: 0,
            ctime: now(),
            cpid: pid(p),
            lpid: 0,
            nattch: 0,
        },
    );
    Ok((seq * IPCMNI + idx) as u64)
}

/// Implements shmat(2).
fn sys_shmat(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let (id, mut addr, flg) = (a[0] as i32, a[1], a[2] as i32);
    if id < 0 {
        return Err(Errno::EINVAL);
    }
    if addr != 0 {
        if !addr.is_multiple_of(PAGE_SIZE) {
            if flg & SHM_RND == 0 {
                return Err(Errno::EINVAL);
            }
            addr &= !(PAGE_SIZE - 1);
            if addr == 0 {
                // Linux maps at 0 (refused by mmap_min_addr) or fails.
                return Err(Errno::EINVAL);
            }
        }
    } else if flg & SHM_REMAP != 0 {
        return Err(Errno::EINVAL);
    }
    let (mut acc, rights) = if flg & SHM_RDONLY != 0 {
        (
            0o444,
            Rights {
                read: true,
                write: false,
            },
        )
    } else {
        (
            0o666,
            Rights {
                read: true,
                write: true,
            },
        )
    };
    if flg & SHM_EXEC != 0 {
        acc |= 0o111;
    }
    let ns = namespace(p)?;
    let (backing, size) = {
        let mut inner = ns.lock();
        let s = inner.by_id(id)?;
        if !s.permits(acc) {
            return Err(Errno::EACCES);
        }
        s.nattch += 1;
        (s.backing.clone(), s.size)
    };
    let len = size.div_ceil(PAGE_SIZE) * PAGE_SIZE;
    let mut result = Ok(0);
    if addr != 0 && flg & SHM_REMAP == 0 {
        let taken = addr.checked_add(len).is_none_or(|end| {
            p.mm.in_heap(addr, len)
                || p.mm.mappings().any(|(s, l)| s < end && addr < s + l)
                || p.shm.meets(addr, len)
        });
        if taken {
            result = Err(Errno::EINVAL);
        }
    }
    if result.is_ok() {
        if addr != 0 {
            // SHM_REMAP: the attaches it replaces are gone.
            p.shm.unmapped(addr, len);
        }
        result = super::mem::map_shared_object(
            p,
            mem,
            (addr != 0).then_some(addr),
            len,
            backing,
            rights,
        );
    }
    let pid = pid(p);
    p.shm.pid = pid;
    match result {
        Ok(at) => {
            if let Ok(s) = ns.lock().by_id(id) {
                s.atime = now();
                s.lpid = pid;
            }
            p.shm.list.push(Attached {
                addr: at,
                len,
                id,
                ns,
            });
            Ok(at)
        }
        Err(e) => {
            let mut inner = ns.lock();
            if let Ok(s) = inner.by_id(id) {
                s.nattch = s.nattch.saturating_sub(1);
                inner.reap(id % IPCMNI);
            }
            Err(e)
        }
    }
}

/// Implements shmdt(2).
fn sys_shmdt(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let addr = a[0];
    if !addr.is_multiple_of(PAGE_SIZE) {
        return Err(Errno::EINVAL);
    }
    let at = p
        .shm
        .list
        .iter()
        .position(|x| x.addr == addr)
        .ok_or(Errno::EINVAL)?;
    let gone = p.shm.list.remove(at);
    super::mem::unmap(p, mem, gone.addr, gone.len);
    p.shm.pid = pid(p);
    gone.ns.detach(gone.id, p.shm.pid);
    Ok(0)
}

/// Reads `struct shmid64_ds`'s uid, gid and mode at `buf` (IPC_SET).
fn read_set(mem: &GuestMemory, buf: u64) -> Result<(u32, u32, u32), Errno> {
    let b = mem.read(buf, SHMID_DS_SIZE as u64)?;
    let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    Ok((word(4), word(8), word(20)))
}

/// Implements shmctl(2).
fn sys_shmctl(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let (id, cmd, buf) = (a[0] as i32, a[1] as i32, a[2]);
    if cmd < 0 || id < 0 {
        return Err(Errno::EINVAL);
    }
    let ns = namespace(p)?;
    match cmd {
        IPC_INFO => {
            let limit = mem.commit_limit();
            let max = ns.lock().max_index();
            let mut b = [0u8; SHMINFO_SIZE];
            let fields = [limit, 1, SHMMNI as u64, SHMMNI as u64, limit / PAGE_SIZE];
            for (i, v) in fields.iter().enumerate() {
                b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
            }
            mem.write(buf, &b)?;
            Ok(max)
        }
        SHM_INFO => {
            let (used, total, rss, max) = {
                let inner = ns.lock();
                let rss: u64 = inner
                    .segs
                    .values()
                    .map(|s| {
                        rustix::fs::fstat(&*s.backing).map_or(0, |st| st.st_blocks as u64 * 512)
                            / PAGE_SIZE
                    })
                    .sum();
                (
                    inner.segs.len() as u64,
                    inner.total_pages,
                    rss,
                    inner.max_index(),
                )
            };
            let mut b = [0u8; SHM_INFO_SIZE];
            b[..4].copy_from_slice(&(used as i32).to_le_bytes());
            b[8..16].copy_from_slice(&total.to_le_bytes());
            b[16..24].copy_from_slice(&rss.to_le_bytes());
            mem.write(buf, &b)?;
            Ok(max)
        }
        IPC_STAT | SHM_STAT | SHM_STAT_ANY => {
            let (bytes, ret) = {
                let mut inner = ns.lock();
                let (s, ret) = if cmd == IPC_STAT {
                    (inner.by_id(id)?, 0)
                } else {
                    let s = inner.segs.get_mut(&id).ok_or(Errno::EINVAL)?;
                    let full = s.seq * IPCMNI + id;
                    (s, full as u64)
                };
                if cmd != SHM_STAT_ANY && !s.permits(0o444) {
                    return Err(Errno::EACCES);
                }
                (s.to_bytes(), ret)
            };
            mem.write(buf, &bytes)?;
            Ok(ret)
        }
        IPC_SET | IPC_RMID => {
            let set = if cmd == IPC_SET {
                Some(read_set(mem, buf)?)
            } else {
                None
            };
            let mut inner = ns.lock();
            let s = inner.by_id(id)?;
            if !s.owned() {
                return Err(Errno::EPERM);
            }
            match set {
                Some((uid, gid, mode)) => {
                    if uid == u32::MAX || gid == u32::MAX {
                        return Err(Errno::EINVAL);
                    }
                    s.uid = uid;
                    s.gid = gid;
                    s.mode = (s.mode & !S_IRWXUGO) | (mode & S_IRWXUGO);
                    s.ctime = now();
                }
                None => {
                    s.mode |= SHM_DEST;
                    s.key = IPC_PRIVATE;
                    inner.reap(id % IPCMNI);
                }
            }
            Ok(0)
        }
        SHM_LOCK | SHM_UNLOCK => {
            let mut inner = ns.lock();
            let s = inner.by_id(id)?;
            if !s.owned() {
                return Err(Errno::EPERM);
            }
            if cmd == SHM_LOCK {
                s.mode |= SHM_LOCKED;
            } else {
                s.mode &= !SHM_LOCKED;
            }
            Ok(0)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// SysV semaphores and message queues: not implemented.
fn sys_ipc_not_done(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Err(Errno::ENOSYS)
}

pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 29, name: "shmget", handler: sys_shmget, support: Support::Partial,
        note: "segments are shared by the processes of one run (one IPC namespace); at most 1,024 segments, each and all together at most the run's memory limit (EINVAL, ENOSPC); SHM_HUGETLB is EPERM" },
    SyscallEntry { nr: 30, name: "shmat", handler: sys_shmat, support: Support::Partial,
        note: "mapped shared as MAP_SHARED memory is (a fork child shares its parent's attaches; exec and exit detach); SHM_EXEC maps without execute, as mmap does" },
    SyscallEntry { nr: 31, name: "shmctl", handler: sys_shmctl, support: Support::Full, note: "" },
    SyscallEntry { nr: 67, name: "shmdt", handler: sys_shmdt, support: Support::Full, note: "" },
    SyscallEntry { nr: 64, name: "semget", handler: sys_ipc_not_done, support: Support::Refused,
        note: "ENOSYS: SysV semaphores are not implemented (POSIX semaphores are, as futexes in shared memory)" },
    SyscallEntry { nr: 65, name: "semop", handler: sys_ipc_not_done, support: Support::Refused,
        note: "ENOSYS: SysV semaphores are not implemented" },
    SyscallEntry { nr: 66, name: "semctl", handler: sys_ipc_not_done, support: Support::Refused,
        note: "ENOSYS: SysV semaphores are not implemented" },
    SyscallEntry { nr: 220, name: "semtimedop", handler: sys_ipc_not_done, support: Support::Refused,
        note: "ENOSYS: SysV semaphores are not implemented" },
    SyscallEntry { nr: 68, name: "msgget", handler: sys_ipc_not_done, support: Support::Refused,
        note: "ENOSYS: SysV message queues are not implemented" },
    SyscallEntry { nr: 69, name: "msgsnd", handler: sys_ipc_not_done, support: Support::Refused,
        note: "ENOSYS: SysV message queues are not implemented" },
    SyscallEntry { nr: 70, name: "msgrcv", handler: sys_ipc_not_done, support: Support::Refused,
        note: "ENOSYS: SysV message queues are not implemented" },
    SyscallEntry { nr: 71, name: "msgctl", handler: sys_ipc_not_done, support: Support::Refused,
        note: "ENOSYS: SysV message queues are not implemented" },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::child::Tree;
    use crate::linux::{test_call, test_process};
    use crate::machine::Config;

    #[test]
    fn segments_are_bounded_by_the_memory_limit() {
        let (mut p, mut m, _) = test_process();
        p.family = Some(Tree::root(Config::default()));
        let limit = m.commit_limit();
        let create = |p: &mut Process, m: &mut GuestMemory, size: u64| {
            test_call(p, m, sys_shmget, &[0, size, (IPC_CREAT | 0o600) as u64])
        };
        assert_eq!(create(&mut p, &mut m, limit + 1), Err(Errno::EINVAL));
        assert_eq!(create(&mut p, &mut m, 0), Err(Errno::EINVAL));
        let half = create(&mut p, &mut m, limit / 2).expect("half the limit");
        assert!(create(&mut p, &mut m, limit / 2).is_ok());
        assert_eq!(create(&mut p, &mut m, 1), Err(Errno::ENOSPC), "SHMALL");
        // Removing one makes room again (nothing attaches it).
        assert_eq!(
            test_call(&mut p, &mut m, sys_shmctl, &[half, IPC_RMID as u64]),
            Ok(0)
        );
        assert!(create(&mut p, &mut m, 1).is_ok());
        // Outside a run's process tree there is no namespace.
        p.family = None;
        assert_eq!(create(&mut p, &mut m, 1), Err(Errno::ENOSYS));
    }

    #[test]
    fn ids_go_round_and_a_stale_id_is_refused() {
        let (mut p, mut m, _) = test_process();
        p.family = Some(Tree::root(Config::default()));
        let flags = (IPC_CREAT | 0o600) as u64;
        let a = test_call(&mut p, &mut m, sys_shmget, &[0, 100, flags]).expect("shmget");
        let b = test_call(&mut p, &mut m, sys_shmget, &[0, 100, flags]).expect("shmget");
        assert_eq!((a, b), (0, 1), "indices in turn, as Linux's");
        assert_eq!(
            test_call(&mut p, &mut m, sys_shmctl, &[a, IPC_RMID as u64]),
            Ok(0)
        );
        // The same index with another sequence number is another segment.
        let stale = a + IPCMNI as u64;
        assert_eq!(
            test_call(&mut p, &mut m, sys_shmat, &[stale, 0, 0]),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            test_call(&mut p, &mut m, sys_shmctl, &[a, IPC_STAT as u64, 8]),
            Err(Errno::EINVAL)
        );
    }
}
