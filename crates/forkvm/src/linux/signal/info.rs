//! What a signal carries: `si_code` values and the `siginfo_t` a handler,
//! sigwaitinfo or a signalfd record is given.

use super::SIGCHLD;

/// Size of `siginfo_t`.
pub(super) const SIGINFO_SIZE: u64 = 128;

/// `si_code` values (x86-64).
pub mod code {
    /// kill(2).
    pub const SI_USER: i32 = 0;
    /// Sent by the kernel (SIGALRM of alarm and setitimer).
    pub const SI_KERNEL: i32 = 0x80;
    /// sigqueue(3).
    pub const SI_QUEUE: i32 = -1;
    /// A POSIX timer expired.
    pub const SI_TIMER: i32 = -2;
    /// tkill(2), tgkill(2).
    pub const SI_TKILL: i32 = -6;
    /// SIGCHLD: the child exited, was killed, was killed and dumped core.
    pub const CLD_EXITED: i32 = 1;
    /// See [`CLD_EXITED`].
    pub const CLD_KILLED: i32 = 2;
    /// See [`CLD_EXITED`].
    pub const CLD_DUMPED: i32 = 3;
    /// SIGCHLD: the child stopped.
    pub const CLD_STOPPED: i32 = 5;
    /// SIGCHLD: the child continued.
    pub const CLD_CONTINUED: i32 = 6;
}
use code::*;

/// What a signal carries into `siginfo_t` (and a signalfd record). Which
/// fields mean something depends on the code, as Linux's `siginfo_layout`
/// says: see [`SigInfo::to_siginfo`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SigInfo {
    /// Signal number.
    pub signo: i32,
    /// si_code (SEGV_MAPERR, SI_USER, SI_QUEUE, CLD_EXITED...).
    pub code: i32,
    /// Faulting address (faults).
    pub addr: u64,
    /// Sender's pid (kill, sigqueue) or the child's (SIGCHLD).
    pub pid: u32,
    /// Sender's uid.
    pub uid: u32,
    /// SIGCHLD: exit code or signal.
    pub status: i32,
    /// sigqueue's or the timer's `sigval` (int or pointer).
    pub value: u64,
    /// POSIX timer: its id and overrun count.
    pub timer: i32,
    /// See `timer`.
    pub overrun: i32,
    /// The thread it was sent to (tgkill, pthread_kill, SIGEV_THREAD_ID):
    /// only that thread takes it while it waits. 0: sent to the process.
    /// Not part of `siginfo_t`.
    pub thread: u64,
}

/// What the union of `siginfo_t` holds (Linux's `enum siginfo_layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Kill,
    Timer,
    Rt,
    Child,
    Fault,
}

impl SigInfo {
    /// Sent by process `pid` with kill(2) (also what the kernel sends on a
    /// process's behalf: SIGPIPE).
    pub fn user(signo: u64, pid: u64) -> Self {
        Self::from_process(signo, SI_USER, pid)
    }

    /// Sent by process `pid` with tkill/tgkill (raise, pthread_kill).
    pub fn tkill(signo: u64, pid: u64) -> Self {
        Self::from_process(signo, SI_TKILL, pid)
    }

    fn from_process(signo: u64, code: i32, pid: u64) -> Self {
        Self {
            signo: signo as i32,
            code,
            pid: pid as u32,
            uid: crate::linux::process::UID as u32,
            ..Self::default()
        }
    }

    /// Sent by the kernel (the interval timer's SIGALRM).
    pub fn kernel(signo: u64) -> Self {
        Self {
            signo: signo as i32,
            code: SI_KERNEL,
            ..Self::default()
        }
    }

    /// A fault at `addr` (SEGV_MAPERR, BUS_ADRERR...).
    pub fn fault(signo: i32, code: i32, addr: u64) -> Self {
        Self {
            signo,
            code,
            addr,
            ..Self::default()
        }
    }

    /// SIGCHLD for child `pid` that ended with wait status `status`.
    pub fn child(pid: u64, status: i32) -> Self {
        let (code, value) = if status & 0x7f == 0 {
            (CLD_EXITED, (status >> 8) & 0xff)
        } else if status & 0x80 != 0 {
            (CLD_DUMPED, status & 0x7f)
        } else {
            (CLD_KILLED, status & 0x7f)
        };
        Self {
            signo: SIGCHLD as i32,
            code,
            pid: pid as u32,
            uid: crate::linux::process::UID as u32,
            status: value,
            ..Self::default()
        }
    }

    /// SIGCHLD for child `pid` that stopped (CLD_STOPPED, by signal
    /// `value`) or continued (CLD_CONTINUED, `value` SIGCONT).
    pub fn child_changed(pid: u64, code: i32, value: i32) -> Self {
        Self {
            signo: SIGCHLD as i32,
            code,
            pid: pid as u32,
            uid: crate::linux::process::UID as u32,
            status: value,
            ..Self::default()
        }
    }

    /// POSIX timer `id` expired, carrying its `sigev_value`.
    pub fn timer(signo: u64, id: i32, overrun: u64, value: u64) -> Self {
        Self {
            signo: signo as i32,
            code: SI_TIMER,
            timer: id,
            overrun: i32::try_from(overrun).unwrap_or(i32::MAX),
            value,
            ..Self::default()
        }
    }

    fn layout(&self) -> Layout {
        if self.code > SI_USER && self.code < SI_KERNEL {
            match self.signo {
                4 | 5 | 7 | 8 | 11 => Layout::Fault,
                17 => Layout::Child,
                _ => Layout::Kill,
            }
        } else if self.code == SI_TIMER {
            Layout::Timer
        } else if self.code < 0 {
            Layout::Rt
        } else {
            Layout::Kill
        }
    }

    /// The `siginfo_t` (128 bytes) Linux would write.
    pub fn to_siginfo(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        let put32 = |b: &mut [u8; 128], off: usize, v: u32| {
            b[off..off + 4].copy_from_slice(&v.to_le_bytes())
        };
        put32(&mut b, 0, self.signo as u32);
        put32(&mut b, 8, self.code as u32);
        match self.layout() {
            Layout::Fault => b[16..24].copy_from_slice(&self.addr.to_le_bytes()),
            Layout::Timer => {
                put32(&mut b, 16, self.timer as u32);
                put32(&mut b, 20, self.overrun as u32);
                b[24..32].copy_from_slice(&self.value.to_le_bytes());
            }
            l => {
                put32(&mut b, 16, self.pid);
                put32(&mut b, 20, self.uid);
                // kill's is 0; rt_sigqueueinfo to itself may give one any code.
                match l {
                    Layout::Child => put32(&mut b, 24, self.status as u32),
                    _ => b[24..32].copy_from_slice(&self.value.to_le_bytes()),
                }
            }
        }
        b
    }

    /// What a guest's `siginfo_t` `b` (128 bytes, for rt_sigqueueinfo) says
    /// for signal `signo` (which replaces its own si_signo, as on Linux).
    pub fn from_siginfo(signo: u64, b: &[u8]) -> Self {
        let u32_at = |off: usize| {
            b.get(off..off + 4)
                .and_then(|s| s.try_into().ok())
                .map_or(0, u32::from_le_bytes)
        };
        let u64_at = |off: usize| {
            b.get(off..off + 8)
                .and_then(|s| s.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        };
        let mut i = Self {
            signo: signo as i32,
            code: u32_at(8) as i32,
            ..Self::default()
        };
        match i.layout() {
            Layout::Fault => i.addr = u64_at(16),
            Layout::Timer => {
                i.timer = u32_at(16) as i32;
                i.overrun = u32_at(20) as i32;
                i.value = u64_at(24);
            }
            l => {
                i.pid = u32_at(16);
                i.uid = u32_at(20);
                match l {
                    Layout::Child => i.status = u32_at(24) as i32,
                    _ => i.value = u64_at(24),
                }
            }
        }
        i
    }

    /// The `struct signalfd_siginfo` (128 bytes) a signalfd read returns.
    pub fn to_signalfd(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
        put(0, &(self.signo as u32).to_le_bytes());
        put(8, &self.code.to_le_bytes());
        match self.layout() {
            Layout::Fault => put(72, &self.addr.to_le_bytes()),
            Layout::Timer => {
                put(24, &(self.timer as u32).to_le_bytes());
                put(32, &(self.overrun as u32).to_le_bytes());
                put(44, &(self.value as u32).to_le_bytes());
                put(48, &self.value.to_le_bytes());
            }
            l => {
                put(12, &self.pid.to_le_bytes());
                put(16, &self.uid.to_le_bytes());
                match l {
                    Layout::Rt => {
                        put(44, &(self.value as u32).to_le_bytes());
                        put(48, &self.value.to_le_bytes());
                    }
                    Layout::Child => put(40, &self.status.to_le_bytes()),
                    _ => {}
                }
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siginfo_layouts_follow_the_code() {
        let b = SigInfo::child(1000, 7 << 8).to_siginfo();
        let u32_at = |b: &[u8; 128], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(
            [0, 8, 16, 20, 24].map(|o| u32_at(&b, o)),
            [17, CLD_EXITED as u32, 1000, 1000, 7]
        );
        assert_eq!(SigInfo::child(1000, 15).code, CLD_KILLED);
        assert_eq!(SigInfo::child(1000, 0x80 | 11).status, 11);
        let t = SigInfo::timer(34, 3, 2, 0x1234).to_siginfo();
        assert_eq!(
            [8, 16, 20, 24].map(|o| u32_at(&t, o)),
            [SI_TIMER as u32, 3, 2, 0x1234]
        );
        let f = SigInfo::fault(11, 1, 0).to_siginfo();
        assert_eq!(u64::from_le_bytes(f[16..24].try_into().unwrap()), 0);
        // A guest's siginfo round-trips through what sigqueue keeps.
        let q = SigInfo {
            code: SI_QUEUE,
            value: 77,
            ..SigInfo::user(34, 1000)
        };
        assert_eq!(SigInfo::from_siginfo(34, &q.to_siginfo()), q);
        let sfd = q.to_signalfd();
        assert_eq!([12, 16, 44].map(|o| u32_at(&sfd, o)), [1000, 1000, 77]);
        // Garbage never panics.
        let _ = SigInfo::from_siginfo(99, &[0xff; 3]);
    }
}
