//! Socket options: setsockopt(2) and getsockopt(2). SOL_SOCKET options
//! live here (buffer sizes, timeouts, common flags, SO_PEERCRED); virtual
//! TCP's IPPROTO_IP/TCP/IPV6 options are recorded by [`super::inet`].

use super::net::{socket_ref, with_socket, AF_UNIX, SOL_SOCKET};
use super::table::{Support, SyscallEntry};
use super::unix_socket::{DEFAULT_BUF, MIN_RCVBUF, MIN_SNDBUF};
use super::{inet, Args, Errno, Process, SysResult};
use crate::memory::GuestMemory;
use std::time::Duration;

const SO_REUSEADDR: u64 = 2;
pub(super) const SO_TYPE: u64 = 3;
const SO_ERROR: u64 = 4;
const SO_DONTROUTE: u64 = 5;
const SO_BROADCAST: u64 = 6;
pub(super) const SO_SNDBUF: u64 = 7;
const SO_RCVBUF: u64 = 8;
const SO_KEEPALIVE: u64 = 9;
const SO_OOBINLINE: u64 = 10;
const SO_LINGER: u64 = 13;
const SO_REUSEPORT: u64 = 15;
const SO_PASSCRED: u64 = 16;
const SO_PEERCRED: u64 = 17;
/// Netlink's socket option level.
const SOL_NETLINK: u64 = 270;
const SO_RCVLOWAT: u64 = 18;
const SO_SNDLOWAT: u64 = 19;
const SO_RCVTIMEO: u64 = 20;
const SO_SNDTIMEO: u64 = 21;
const SO_ACCEPTCONN: u64 = 30;
const SO_SNDBUFFORCE: u64 = 32;
const SO_RCVBUFFORCE: u64 = 33;
const SO_PASSSEC: u64 = 34;
const SO_PROTOCOL: u64 = 38;
const SO_DOMAIN: u64 = 39;

/// Reads an int option value (at least 4 bytes).
fn opt_int(mem: &GuestMemory, val: u64, len: u64) -> Result<i32, Errno> {
    if (len as u32) < 4 {
        return Err(Errno::EINVAL);
    }
    Ok(mem.read_u32(val)? as i32)
}

/// Reads a `struct timeval` option (SO_RCVTIMEO/SO_SNDTIMEO); zero is "forever".
fn opt_timeval(mem: &GuestMemory, val: u64, len: u64) -> Result<Option<Duration>, Errno> {
    if (len as u32) < 16 {
        return Err(Errno::EINVAL);
    }
    let s = mem.read_u64(val)? as i64;
    let us = mem.read_u64(val + 8)? as i64;
    if !(0..1_000_000).contains(&us) {
        return Err(Errno::EDOM);
    }
    if s < 0 {
        return Ok(Some(Duration::ZERO));
    }
    let d = Duration::new(s as u64, us as u32 * 1000);
    Ok((!d.is_zero()).then_some(d))
}

/// Options accepted and reported back as plain ints.
fn plain_int_option(name: u64) -> bool {
    matches!(
        name,
        SO_REUSEADDR
            | SO_DONTROUTE
            | SO_BROADCAST
            | SO_KEEPALIVE
            | SO_OOBINLINE
            | SO_REUSEPORT
            | SO_PASSCRED
            | SO_RCVLOWAT
            | SO_SNDLOWAT
            | SO_PASSSEC
    )
}

/// Implements setsockopt(2) (SOL_SOCKET options).
pub(super) fn sys_setsockopt(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if let Some(r) = inet::setsockopt(p, mem, a) {
        return r;
    }
    let [fd, level, name, val, len, _] = *a;
    socket_ref(p, fd)?;
    if level as u32 as u64 == SOL_NETLINK && super::netlink::is_netlink_fd(p, fd) {
        // Extended acks, strict checking, group membership: nothing
        // changes what the guest's netlink answers.
        opt_int(mem, val, len)?;
        return Ok(0);
    }
    if level as u32 as u64 != SOL_SOCKET {
        return Err(Errno::EOPNOTSUPP);
    }
    let name = name as u32 as u64;
    match name {
        SO_SNDBUF | SO_SNDBUFFORCE | SO_RCVBUF | SO_RCVBUFFORCE => {
            let v = opt_int(mem, val, len)?.max(0) as u32;
            // Linux doubles the value (bookkeeping overhead), within its limits.
            let doubled = v.min(DEFAULT_BUF).saturating_mul(2);
            with_socket(p, fd, |s, _| {
                if matches!(name, SO_SNDBUF | SO_SNDBUFFORCE) {
                    s.sndbuf = doubled.max(MIN_SNDBUF);
                    s.sndbuf_set = true;
                } else {
                    s.rcvbuf = doubled.max(MIN_RCVBUF);
                }
                Ok(0)
            })
        }
        SO_RCVTIMEO | SO_SNDTIMEO => {
            let t = opt_timeval(mem, val, len)?;
            with_socket(p, fd, |s, _| {
                if name == SO_RCVTIMEO {
                    s.rcvtimeo = t;
                } else {
                    s.sndtimeo = t;
                }
                Ok(0)
            })
        }
        SO_LINGER => {
            if (len as u32) < 8 {
                return Err(Errno::EINVAL);
            }
            let onoff = mem.read_u32(val)?;
            let secs = mem.read_u32(val + 4)?;
            with_socket(p, fd, |s, _| {
                // Turning it off keeps the time (getsockopt shows it).
                s.linger = if onoff != 0 {
                    (true, secs)
                } else {
                    (false, s.linger.1)
                };
                Ok(0)
            })
        }
        n if plain_int_option(n) => {
            let v = opt_int(mem, val, len)?;
            with_socket(p, fd, |s, _| {
                let key = n as i32;
                match s.flags.iter_mut().find(|(k, _)| *k == key) {
                    Some(e) => e.1 = v,
                    None => s.flags.push((key, v)),
                }
                Ok(0)
            })
        }
        _ => Err(Errno::ENOPROTOOPT),
    }
}

/// Implements getsockopt(2) (SOL_SOCKET options).
pub(super) fn sys_getsockopt(p: &mut Process, mem: &mut GuestMemory, a: &Args) -> SysResult {
    if let Some(r) = inet::getsockopt(p, mem, a) {
        return r;
    }
    let [fd, level, name, val, len_ptr, _] = *a;
    socket_ref(p, fd)?;
    if level as u32 as u64 != SOL_SOCKET {
        return Err(Errno::EOPNOTSUPP);
    }
    let len = mem.read_u32(len_ptr)? as i32;
    if len < 0 {
        return Err(Errno::EINVAL);
    }
    let name = name as u32 as u64;
    let int = |v: i32| v.to_le_bytes().to_vec();
    let timeval = |d: Option<Duration>| {
        let d = d.unwrap_or(Duration::ZERO);
        let mut b = d.as_secs().to_le_bytes().to_vec();
        b.extend_from_slice(&u64::from(d.subsec_micros()).to_le_bytes());
        b
    };
    let bytes = with_socket(p, fd, |s, _| {
        Ok(match name {
            SO_TYPE => int(s.ty as i32),
            SO_ERROR => int(s.take_error()),
            SO_SNDBUF => int(s.sndbuf as i32),
            SO_RCVBUF => int(s.rcvbuf as i32),
            SO_DOMAIN => int(AF_UNIX as i32),
            SO_PROTOCOL => int(0),
            SO_ACCEPTCONN => int(0),
            SO_RCVTIMEO => timeval(s.rcvtimeo),
            SO_SNDTIMEO => timeval(s.sndtimeo),
            SO_LINGER => {
                let mut b = u32::from(s.linger.0).to_le_bytes().to_vec();
                b.extend_from_slice(&s.linger.1.to_le_bytes());
                b
            }
            SO_PEERCRED => {
                if !s.connected() {
                    return Err(Errno::ENOTCONN);
                }
                // TCP has no peer process: Linux says pid 0, uid and gid -1.
                let (pid, id) = if s.inet.is_some() {
                    (0, u32::MAX)
                } else {
                    (s.peer_pid as u32, super::process::UID as u32)
                };
                let mut b = pid.to_le_bytes().to_vec();
                b.extend_from_slice(&id.to_le_bytes());
                b.extend_from_slice(&id.to_le_bytes());
                b
            }
            SO_RCVLOWAT => {
                let v = s.flags.iter().find(|(k, _)| *k == name as i32);
                int(v.map_or(1, |e| e.1))
            }
            n if plain_int_option(n) => {
                let v = s.flags.iter().find(|(k, _)| *k == n as i32);
                int(v.map_or(0, |e| i32::from(e.1 != 0)))
            }
            _ => return Err(Errno::ENOPROTOOPT),
        })
    })?;
    let n = bytes.len().min(len as usize);
    if n > 0 {
        mem.write(val, &bytes[..n])?;
    }
    mem.write_u32(len_ptr, n as u32)?;
    Ok(0)
}

#[rustfmt::skip]
pub(super) const SYSCALLS: &[SyscallEntry] = &[
    SyscallEntry { nr: 54, name: "setsockopt", handler: sys_setsockopt, support: Support::Partial,
        note: "SOL_SOCKET: buffer sizes, timeouts and common flags; virtual TCP also IPPROTO_IP/TCP/IPV6 (recorded); other levels EOPNOTSUPP" },
    SyscallEntry { nr: 55, name: "getsockopt", handler: sys_getsockopt, support: Support::Partial,
        note: "SOL_SOCKET: SO_TYPE, SO_ERROR, SO_DOMAIN, SO_PROTOCOL, buffer sizes, timeouts, SO_PEERCRED, flags" },
];
