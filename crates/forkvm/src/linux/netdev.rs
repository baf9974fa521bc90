//! The interface ioctls of sockets (`SIOCGIF*`), answered for the VM's one
//! interface, `lo`, as route netlink answers (`netlink.rs`). Older code
//! lists interfaces this way: the JVM's `NetworkInterface` (SIOCGIFCONF,
//! then each interface's index, flags, netmask and MTU), glibc's
//! `if_nametoindex` and `if_indextoname`, net-tools. They were ENOTTY,
//! which Java turned into an exception. Changes are EPERM, as for an
//! unprivileged process; an unknown name is ENODEV.

use super::netlink::{LO_INDEX, LO_MTU};
use super::{Errno, SysResult};
use crate::memory::GuestMemory;

const SIOCGIFNAME: u32 = 0x8910;
const SIOCGIFCONF: u32 = 0x8912;
const SIOCGIFFLAGS: u32 = 0x8913;
const SIOCGIFADDR: u32 = 0x8915;
const SIOCGIFBRDADDR: u32 = 0x8919;
const SIOCGIFNETMASK: u32 = 0x891b;
const SIOCGIFMETRIC: u32 = 0x891d;
const SIOCGIFMTU: u32 = 0x8921;
const SIOCGIFHWADDR: u32 = 0x8927;
const SIOCGIFINDEX: u32 = 0x8933;
const SIOCGIFTXQLEN: u32 = 0x8942;

/// `struct ifreq`: a name of IFNAMSIZ bytes, then a 24-byte union.
const IFREQ: u64 = 40;
const IFNAMSIZ: usize = 16;
/// `struct ifconf`: a length, padding, a pointer.
const IFCONF: u64 = 16;
/// IFF_UP | IFF_LOOPBACK | IFF_RUNNING (the flags that fit a short).
const LO_SHORT_FLAGS: u16 = 0x1 | 0x8 | 0x40;
const AF_INET: u16 = 2;
const ARPHRD_LOOPBACK: u16 = 772;

/// Whether `req` is an interface request of a socket (SIOCGIF* and the
/// SIOCSIF* that change an interface).
pub(super) fn is_interface_request(req: u32) -> bool {
    (0x8910..=0x8960).contains(&req)
}

/// An IPv4 `struct sockaddr_in` with address `ip` (16 bytes).
fn sockaddr_in(ip: [u8; 4]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..2].copy_from_slice(&AF_INET.to_le_bytes());
    a[4..8].copy_from_slice(&ip);
    a
}

/// Answers interface request `req` with its argument at `arg`.
pub(super) fn ioctl(mem: &mut GuestMemory, req: u32, arg: u64) -> SysResult {
    if req == SIOCGIFCONF {
        return ifconf(mem, arg);
    }
    let ifr = mem.read(arg, IFREQ)?;
    let mut out = [0u8; 24];
    if req == SIOCGIFNAME {
        let index = i32::from_le_bytes([ifr[16], ifr[17], ifr[18], ifr[19]]);
        if index != LO_INDEX {
            return Err(Errno::ENODEV);
        }
        let mut name = [0u8; IFNAMSIZ];
        name[..2].copy_from_slice(b"lo");
        mem.write(arg, &name)?;
        return Ok(0);
    }
    let name = &ifr[..IFNAMSIZ];
    if name.split(|&b| b == 0).next() != Some(b"lo") {
        return Err(Errno::ENODEV);
    }
    match req {
        SIOCGIFFLAGS => out[..2].copy_from_slice(&LO_SHORT_FLAGS.to_le_bytes()),
        SIOCGIFADDR => out[..16].copy_from_slice(&sockaddr_in([127, 0, 0, 1])),
        // lo has no broadcast address: Linux shows 0.0.0.0.
        SIOCGIFBRDADDR => out[..16].copy_from_slice(&sockaddr_in([0; 4])),
        SIOCGIFNETMASK => out[..16].copy_from_slice(&sockaddr_in([255, 0, 0, 0])),
        SIOCGIFMETRIC => {}
        SIOCGIFMTU => out[..4].copy_from_slice(&LO_MTU.to_le_bytes()),
        SIOCGIFHWADDR => out[..2].copy_from_slice(&ARPHRD_LOOPBACK.to_le_bytes()),
        SIOCGIFINDEX => out[..4].copy_from_slice(&LO_INDEX.to_le_bytes()),
        SIOCGIFTXQLEN => out[..4].copy_from_slice(&1000u32.to_le_bytes()),
        // Setting anything needs CAP_NET_ADMIN.
        r if is_setting(r) => return Err(Errno::EPERM),
        _ => return Err(Errno::EINVAL),
    }
    mem.write(arg + IFNAMSIZ as u64, &out)?;
    Ok(0)
}

/// The SIOCS* requests among the interface ones.
fn is_setting(req: u32) -> bool {
    matches!(
        req,
        0x8914
            | 0x8916
            | 0x8918
            | 0x891a
            | 0x891c
            | 0x891e
            | 0x891f
            | 0x8922
            | 0x8923
            | 0x8924
            | 0x8930
            | 0x8931
            | 0x8934
            | 0x8936
            | 0x8943
    )
}

/// SIOCGIFCONF: one `struct ifreq` per interface with an IPv4 address
/// (`lo`, 127.0.0.1); with no buffer, the length it needs.
fn ifconf(mem: &mut GuestMemory, arg: u64) -> SysResult {
    let c = mem.read(arg, IFCONF)?;
    let len = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    let buf = u64::from_le_bytes(c[8..16].try_into().map_err(|_| Errno::EFAULT)?);
    if buf == 0 {
        mem.write_u32(arg, IFREQ as u32)?;
        return Ok(0);
    }
    if len < 0 {
        return Err(Errno::EINVAL);
    }
    let mut used = 0u32;
    if len as u64 >= IFREQ {
        let mut r = [0u8; IFREQ as usize];
        r[..2].copy_from_slice(b"lo");
        r[IFNAMSIZ..IFNAMSIZ + 16].copy_from_slice(&sockaddr_in([127, 0, 0, 1]));
        mem.write(buf, &r)?;
        used = IFREQ as u32;
    }
    mem.write_u32(arg, used)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::test_process;

    #[test]
    fn lo_answers_and_others_are_enodev() {
        let (_p, mut m, buf) = test_process();
        let ifr = |m: &mut GuestMemory, name: &[u8]| {
            let mut r = [0u8; IFREQ as usize];
            r[..name.len()].copy_from_slice(name);
            m.write(buf, &r).unwrap();
        };
        ifr(&mut m, b"lo");
        assert_eq!(ioctl(&mut m, SIOCGIFINDEX, buf), Ok(0));
        assert_eq!(m.read_u32(buf + 16), Ok(1));
        assert_eq!(ioctl(&mut m, SIOCGIFMTU, buf), Ok(0));
        assert_eq!(m.read_u32(buf + 16), Ok(65536));
        assert_eq!(ioctl(&mut m, SIOCGIFNETMASK, buf), Ok(0));
        assert_eq!(m.read(buf + 20, 4).unwrap(), [255, 0, 0, 0]);
        assert_eq!(ioctl(&mut m, 0x8914, buf), Err(Errno::EPERM));
        ifr(&mut m, b"eth0");
        assert_eq!(ioctl(&mut m, SIOCGIFINDEX, buf), Err(Errno::ENODEV));
        m.write_u32(buf + 16, 1).unwrap();
        assert_eq!(ioctl(&mut m, SIOCGIFNAME, buf), Ok(0));
        assert_eq!(m.read(buf, 3).unwrap(), b"lo\0");
        // SIOCGIFCONF: the size first, then the entry.
        let conf = buf + 512;
        m.write(conf, &[0; 16]).unwrap();
        assert_eq!(ioctl(&mut m, SIOCGIFCONF, conf), Ok(0));
        assert_eq!(m.read_u32(conf), Ok(40));
        m.write_u32(conf, 40).unwrap();
        m.write_u64(conf + 8, buf + 1024).unwrap();
        assert_eq!(ioctl(&mut m, SIOCGIFCONF, conf), Ok(0));
        assert_eq!(m.read(buf + 1024, 2).unwrap(), b"lo");
        assert_eq!(m.read(buf + 1024 + 20, 4).unwrap(), [127, 0, 0, 1]);
        m.write_u32(conf, 39).unwrap();
        assert_eq!(ioctl(&mut m, SIOCGIFCONF, conf), Ok(0));
        assert_eq!(m.read_u32(conf), Ok(0));
        assert_eq!(ioctl(&mut m, SIOCGIFINDEX, 1 << 40), Err(Errno::EFAULT));
    }
}
