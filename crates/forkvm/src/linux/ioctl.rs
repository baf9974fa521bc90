//! ioctl(2): the few requests programs make on descriptors forkvm knows
//! (non-blocking and close-on-exec flags, bytes available) and terminal
//! queries, which go to the host's terminal; changing the terminal is
//! refused, so a guest cannot leave the user's terminal in raw mode.

use super::copy_range::{ioctl_clone, FICLONE, FICLONERANGE};
use super::fdtable::{lock, oflags::O_NONBLOCK, FileKind};
use super::io::host_std;
use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

pub(super) const TCGETS: u32 = 0x5401;
pub(super) const TCSETS: u32 = 0x5402;
pub(super) const TCSETSW: u32 = 0x5403;
pub(super) const TCSETSF: u32 = 0x5404;
pub(super) const TIOCGWINSZ: u32 = 0x5413;
pub(super) const TIOCSWINSZ: u32 = 0x5414;
pub(super) const FIONREAD: u32 = 0x541b;
/// Whether a socket's next byte is the urgent mark.
const SIOCATMARK: u32 = 0x8905;
pub(super) const FIONBIO: u32 = 0x5421;
pub(super) const FIONCLEX: u32 = 0x5450;
pub(super) const FIOCLEX: u32 = 0x5451;
/// Kernel `struct termios` on x86-64.
const TERMIOS_SIZE: usize = 36;
/// `struct winsize`.
const WINSIZE_SIZE: usize = 8;

/// Host ioctl that copies a fixed-size result out of the host kernel.
fn host_ioctl_out(fd: BorrowedFd<'_>, request: u32, out: &mut [u8; 64]) -> Result<(), Errno> {
    // SAFETY: `request` is TCGETS or TIOCGWINSZ, which write at most 36
    // bytes into the pointed-to buffer; `out` is 64 bytes and borrowed
    // exclusively for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, out.as_mut_ptr()) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// Implements ioctl(2).
pub(super) fn sys_ioctl(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    let fd = a[0] as i32;
    let file = p.fds.get(fd)?;
    let (req, arg) = (a[1] as u32, a[2]);
    if lock(&file).path_only() {
        return Err(Errno::EBADF);
    }
    match req {
        FIOCLEX | FIONCLEX => {
            p.fds.set_cloexec(fd, req == FIOCLEX)?;
            Ok(0)
        }
        FIONBIO => {
            let on = mem.read_u32(arg)? != 0;
            let mut f = lock(&file);
            f.flags = if on {
                f.flags | O_NONBLOCK
            } else {
                f.flags & !O_NONBLOCK
            };
            Ok(0)
        }
        super::fasync::FIOASYNC => {
            let on = mem.read_u32(arg)? != 0;
            super::fasync::set_async(&file, on);
            Ok(0)
        }
        _ if matches!(lock(&file).kind, FileKind::Pty(_)) => {
            super::pty::ioctl(p, mem, &file, req, arg)
        }
        FIONREAD => {
            let f = lock(&file);
            let n = match &f.kind {
                FileKind::Pipe(end) if end.read => lock(&end.pipe).buf.len() as u64,
                FileKind::Socket(s) => s.available() as u64,
                FileKind::File { fd, .. } => {
                    let size = rustix::fs::fstat(fd.as_fd())?.st_size.max(0) as u64;
                    size.saturating_sub(f.offset)
                }
                FileKind::Stdin => rustix::io::ioctl_fionread(std::io::stdin().as_fd())?,
                _ => return Err(Errno::ENOTTY),
            };
            mem.write_u32(arg, n.min(i32::MAX as u64) as u32)?;
            Ok(0)
        }
        TCGETS | TIOCGWINSZ | TCSETS | TCSETSW | TCSETSF | TIOCSWINSZ => {
            let Some(h) = host_std(&lock(&file).kind) else {
                return Err(Errno::ENOTTY);
            };
            // Queries go to the host terminal; changing it is refused so a
            // guest cannot leave the user's terminal in raw mode.
            let mut out = [0u8; 64];
            host_ioctl_out(h.as_fd(), TCGETS, &mut out)?;
            let len = match req {
                TCGETS => TERMIOS_SIZE,
                TIOCGWINSZ => {
                    host_ioctl_out(h.as_fd(), TIOCGWINSZ, &mut out)?;
                    WINSIZE_SIZE
                }
                _ => return Err(Errno::EPERM),
            };
            mem.write(arg, &out[..len])?;
            Ok(0)
        }
        FICLONE | FICLONERANGE => ioctl_clone(p, mem, &file, req, arg),
        SIOCATMARK => {
            let at = match &lock(&file).kind {
                FileKind::Socket(s) => s.at_mark(),
                _ => Err(Errno::ENOTTY),
            }?;
            mem.write_u32(arg, u32::from(at))?;
            Ok(0)
        }
        r if super::netdev::is_interface_request(r)
            && matches!(lock(&file).kind, FileKind::Socket(_)) =>
        {
            super::netdev::ioctl(mem, r, arg)
        }
        _ => Err(Errno::ENOTTY),
    }
}

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 16, name: "ioctl", handler: sys_ioctl, support: Support::Partial,
        note: "FIONBIO, FIOASYNC (no SIGIO is sent), FIONREAD, FIOCLEX/FIONCLEX; TCGETS/TIOCGWINSZ on the host's stdio query the host terminal, changes to it are refused (EPERM); on a pty (see pty.rs) TCGETS/TCSETS/TCSETSW/TCSETSF, TIOCGWINSZ/TIOCSWINSZ (shared by both ends; SIGWINCH to the foreground group), FIONREAD/TIOCINQ, TIOCOUTQ (0), TCFLSH, TCXONC and TCSBRK (accepted), TIOCGPTN, TIOCSPTLCK/TIOCGPTLCK, TIOCGPTPEER, TIOCSCTTY/TIOCNOTTY/TIOCGPGRP/TIOCSPGRP/TIOCGSID on the run's process groups; FICLONE/FICLONERANGE are EOPNOTSUPP after Linux's checks (no shared extents); on sockets, SIOCATMARK (TCP's urgent mark) and the SIOCGIF* queries of the VM's one interface, lo (changes EPERM; see netdev.rs); others ENOTTY" },
];
