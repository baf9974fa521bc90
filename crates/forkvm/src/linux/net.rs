//! Networking: refused. The sandbox has no network; a program that tries
//! gets the error a host without network access would give, never a host
//! socket.

use super::table::{Support, SyscallEntry};
use super::{Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;

/// Implements the socket family: EACCES (no network in the sandbox).
fn sys_no_network(_: &mut Process, _: &mut GuestMemory, _: &Args) -> SysResult {
    Err(Errno::EACCES)
}

/// Implements calls on a socket descriptor: there are none, so EBADF or ENOTSOCK.
fn sys_not_a_socket(p: &mut Process, _: &mut GuestMemory, a: &Args) -> SysResult {
    p.fds.get(a[0] as i32)?;
    Err(Errno::ENOTSOCK)
}

const NO_NET: &str = "no network in the sandbox: EACCES";
const NO_SOCK: &str = "no socket can exist: EBADF or ENOTSOCK";

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 41, name: "socket", handler: sys_no_network, support: Support::Refused, note: NO_NET },
    SyscallEntry { nr: 42, name: "connect", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 43, name: "accept", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 44, name: "sendto", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 45, name: "recvfrom", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 46, name: "sendmsg", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 47, name: "recvmsg", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 48, name: "shutdown", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 49, name: "bind", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 50, name: "listen", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 51, name: "getsockname", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 52, name: "getpeername", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 53, name: "socketpair", handler: sys_no_network, support: Support::Refused, note: NO_NET },
    SyscallEntry { nr: 54, name: "setsockopt", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 55, name: "getsockopt", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 288, name: "accept4", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 299, name: "recvmmsg", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
    SyscallEntry { nr: 307, name: "sendmmsg", handler: sys_not_a_socket, support: Support::Refused, note: NO_SOCK },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::{Policy, Process};
    use crate::memory::AddressSpace;

    #[test]
    fn every_network_call_is_refused_without_touching_the_host() {
        let mut m = GuestMemory::new(8 << 20).unwrap();
        let mut p = Process::new(
            Policy::default(),
            AddressSpace::new(0x40_0000, 0x70_0000),
            "/".into(),
            "/p".into(),
        );
        for e in SYSCALLS {
            // fd 1 exists (stdout) but is no socket; fd 77 does not exist.
            for args in [[1u64, 0, 0, 0, 0, 0], [77, u64::MAX, 0, 0, 0, 0]] {
                let r = (e.handler)(&mut p, &mut m, &args);
                assert!(
                    matches!(r, Err(Errno::EACCES | Errno::ENOTSOCK | Errno::EBADF)),
                    "{}: {r:?}",
                    e.name
                );
            }
        }
    }
}
