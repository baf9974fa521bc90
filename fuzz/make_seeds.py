#!/usr/bin/env python3
"""Writes the seed corpus of the syscall, staging and loader targets
(fuzz/corpus/<target>/). The loader's real programs are copied from
tests/guests/out by scripts/fuzz.sh when present; these are hand-made."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- syscalls: 0xf8 + u16 nr picks a syscall by number; per argument a kind
# byte: 0 small u8, 2 scratch+u16, 3 string index, 4 u64, 5 last result,
# 6 u16, 7 -u8.
def small(v):
    return bytes([0, v])


def scratch(off):
    return bytes([2]) + struct.pack("<H", off)


def string(i):
    return bytes([3, i])


def wide(v):
    return bytes([4]) + struct.pack("<Q", v & (2**64 - 1))


LAST = bytes([5])


def u16(v):
    return bytes([6]) + struct.pack("<H", v)


def call(nr, *args):
    args = list(args) + [small(0)] * (6 - len(args))
    return bytes([0xF8]) + struct.pack("<H", nr) + b"".join(args)


AT_FDCWD = -100
O_CREAT_RDWR = 0o102
S = {"a": 0, "d": 1, "d/b": 2, ".": 3, "..": 4, "../outside/sentinel": 5,
     "../outside/new": 6, "/tmp/t": 7, "/proc/self/maps": 9, "/dev/zero": 13,
     "/etc/passwd": 15, "/": 16, "a/../../outside": 18, "user.x": 19,
     "root": 20, "root/a": 21, "outside/sentinel": 23}

SCRATCH = 0x20_0000  # abi::USER_BASE: the scratch area's guest address
S.update({"/proc/sys/kernel/random/uuid": 24, "/proc/sys/net/core/somaxconn": 25,
          "/proc/net/if_inet6": 26, "/proc/sys": 27, "/proc/version": 28,
          "/dev/ptmx": 29, "/dev/pts/0": 30, "/dev/pts": 31})


def store(off, data):
    """A step that writes `data` into the scratch area at `off` (0xf7)."""
    return bytes([0xF7]) + struct.pack("<HH", off, len(data)) + data


def nlmsg(ty, flags, payload, seq=1):
    return struct.pack("<IHHII", 16 + len(payload), ty, flags, seq, 0) + payload


def msghdr(iov_at, iovlen, name_at=0, namelen=0):
    """A struct msghdr at some offset, pointing at iovecs at `iov_at` (scratch offsets)."""
    name = SCRATCH + name_at if name_at else 0
    return struct.pack("<QIIQQQQI4x", name, namelen, 0, SCRATCH + iov_at, iovlen, 0, 0, 0)


def iovec(at, n):
    return struct.pack("<QQ", SCRATCH + at, n)


def sockaddr_in(port, ip=(127, 0, 0, 1)):
    return struct.pack("<H", 2) + struct.pack(">H", port) + bytes(ip) + bytes(8)


NLM_DUMP = 0x1 | 0x300
dump_link = nlmsg(18, NLM_DUMP, bytes(16))
dump_addr = nlmsg(22, NLM_DUMP, bytes(8))
get_lo = nlmsg(18, 1 | 4, struct.pack("<BxHiII", 0, 0, 1, 0, 0))
# A request whose length runs past the datagram, and one too short.
lying = struct.pack("<IHHII", 4000, 22, NLM_DUMP, 2, 0) + bytes(8)
short = struct.pack("<IHHII", 8, 18, 1, 3, 0)

seqs = {
    "netlink": [call(41, small(16), small(3), small(0)),
                store(0x1000, dump_link + dump_addr),
                call(44, LAST, scratch(0x1000), u16(len(dump_link + dump_addr)), small(0), small(0), small(0)),
                call(45, small(0), scratch(0x2000), u16(0x4000), small(0x40), small(0), small(0)),
                call(45, small(0), scratch(0x2000), u16(0x4000), small(0x42), small(0), small(0)),
                store(0x1200, get_lo + lying + short),
                store(0x1400, iovec(0x1200, len(get_lo + lying + short)) + iovec(0x1000, 32)),
                store(0x1500, msghdr(0x1400, 2)),
                call(46, small(0), scratch(0x1500), small(0)),
                call(47, small(0), scratch(0x1500), small(0x40)),
                call(51, small(0), scratch(0x1600), scratch(0x1700)),
                call(3, small(0))],
    "netdev": [call(41, small(2), small(2), small(0)),
               store(0x3000, b"lo" + bytes(38)),
               call(16, LAST, u16(0x8933), scratch(0x3000)),
               call(16, small(0), u16(0x8915), scratch(0x3000)),
               call(16, small(0), u16(0x8913), scratch(0x3000)),
               call(16, small(0), u16(0x8914), scratch(0x3000)),
               store(0x3100, struct.pack("<iiQ", 80, 0, SCRATCH + 0x3200)),
               call(16, small(0), u16(0x8912), scratch(0x3100)),
               store(0x3000, struct.pack("<16si", b"", 1) + bytes(20)),
               call(16, small(0), u16(0x8910), scratch(0x3000))],
    "udp": [call(41, small(2), small(2), small(0)),
            store(0x4000, sockaddr_in(5353)),
            call(49, LAST, scratch(0x4000), small(16)),
            call(42, small(0), scratch(0x4000), small(16)),
            call(1, small(0), scratch(0x4100), small(40)),
            call(51, small(0), scratch(0x4200), scratch(0x4300)),
            call(0, small(0), scratch(0x4400), u16(2000)),
            store(0x4000, bytes(16)),
            call(42, small(0), scratch(0x4000), small(16)),
            call(1, small(0), scratch(0x4100), small(40))],
    # A pty: master, unlock, slave, raw and canonical modes, both directions.
    "pty": [call(2, string(S["/dev/ptmx"]), u16(0o2)),
            store(0x100, struct.pack("<i", 0)),
            call(16, small(0), wide(0x40045431), scratch(0x100)),  # TIOCSPTLCK
            call(16, small(0), wide(0x80045430), scratch(0x104)),  # TIOCGPTN
            call(2, string(S["/dev/pts/0"]), u16(0o2)),
            call(16, small(1), u16(0x5401), scratch(0x200)),  # TCGETS
            call(1, small(0), scratch(0x300), small(40)),
            store(0x300, b"ab\x7fc\r\x03x\x15y\x04"),
            call(1, small(0), scratch(0x300), small(11)),
            call(0, small(1), scratch(0x400), u16(200)),
            call(1, small(1), scratch(0x300), small(11)),
            call(0, small(0), scratch(0x400), u16(200)),
            store(0x200, bytes(36)),
            call(16, small(1), u16(0x5402), scratch(0x200)),  # TCSETS: raw
            call(16, small(0), u16(0x5414), scratch(0x300)),  # TIOCSWINSZ
            call(7, scratch(0x500), small(2), small(0)),
            call(3, small(1)),
            call(0, small(0), scratch(0x400), u16(200)),
            call(257, wide(AT_FDCWD), string(S["/dev/pts"]), wide(0o200000)),
            call(217, LAST, scratch(0x800), u16(4096))],
    "sysctl": [call(2, string(S["/proc/sys/kernel/random/uuid"]), small(0)),
               call(0, LAST, scratch(0), u16(100)),
               call(2, string(S["/proc/sys/net/core/somaxconn"]), small(2)),
               call(1, LAST, scratch(0), small(4)),
               call(2, string(S["/proc/net/if_inet6"]), small(0)),
               call(17, LAST, scratch(0x100), u16(300), small(1)),
               call(257, wide(AT_FDCWD), string(S["/proc/sys"]), wide(0o200000)),
               call(217, LAST, scratch(0x800), u16(4096)),
               call(4, string(S["/proc/version"]), scratch(0x1000))],
    "file_rw": [call(2, string(S["a"]), u16(O_CREAT_RDWR), u16(0o644)),
                call(1, LAST, scratch(0), small(64)),
                call(8, small(0), small(0), small(0)),
                call(0, small(0), scratch(0x100), small(64)),
                call(3, small(0))],
    "dirs": [call(83, string(S["d"]), u16(0o755)),
             call(257, wide(AT_FDCWD), string(S["d/b"]), u16(O_CREAT_RDWR), u16(0o600)),
             call(257, wide(AT_FDCWD), string(S["d"]), wide(0o200000)),
             call(217, LAST, scratch(0), u16(4096)),
             call(82, string(S["d/b"]), string(S["a"])),
             call(87, string(S["a"]))],
    "escape": [call(2, string(S["../outside/sentinel"]), small(2)),
               call(2, string(S["outside/sentinel"]), u16(0o1102)),
               call(88, string(S["outside/sentinel"]), string(S["a"])),
               call(2, string(S["a"]), small(1)),
               call(1, LAST, scratch(0), small(8)),
               call(86, string(S["outside/sentinel"]), string(S["d"])),
               call(82, string(S["a"]), string(S["../outside/new"]))],
    "mmap": [call(9, small(0), u16(0x4000), small(3), small(0x22), wide(-1), small(0)),
             call(10, LAST, u16(0x1000), small(1)),
             call(25, LAST, u16(0x1000), u16(0x8000), small(1)),
             call(11, LAST, u16(0x2000)),
             call(12, small(0)),
             call(12, wide(0x500000))],
    "pipes": [call(22, scratch(0)),
              call(293, scratch(8), u16(0o4000)),
              call(1, small(4), scratch(0x100), small(16)),
              call(0, small(3), scratch(0x200), small(16)),
              call(7, scratch(0), small(2), small(0)),
              call(33, small(3), small(9)),
              call(3, small(9))],
    "sockets": [call(53, small(1), small(1), small(0), scratch(0)),
                call(44, small(3), scratch(0x100), small(32), small(0), small(0), small(0)),
                call(45, small(4), scratch(0x200), small(32), small(0), small(0), small(0)),
                call(41, small(1), small(1), small(0)),
                call(49, LAST, scratch(0x300), small(110))],
    "epoll": [call(291, small(0)),
              call(290, small(0), small(0)),
              call(233, small(3), small(1), small(4), scratch(0)),
              call(232, small(3), scratch(0x100), small(8), small(0))],
    "proc": [call(2, string(S["/proc/self/maps"]), small(0)),
             call(0, LAST, scratch(0), u16(4096)),
             call(89, string(11), scratch(0x1000), u16(256)),
             call(4, string(S["/etc/passwd"]), scratch(0x2000)),
             call(80, string(S["d"])),
             call(79, scratch(0), u16(512))],
    "signals": [call(13, small(10), scratch(0), small(0), small(8)),
                call(14, small(0), scratch(8), small(0), small(8)),
                call(131, scratch(0x100), small(0)),
                call(62, small(1), small(10)),
                call(234, small(1), small(1), small(0)),
                call(37, small(0)),
                call(38, small(0), scratch(0), small(0))],
    "time": [call(228, small(1), scratch(0)),
             call(96, scratch(0x10), small(0)),
             call(222, small(1), small(0), scratch(0x20)),
             call(223, LAST, small(0), scratch(0x40), small(0)),
             call(283, small(1), small(0)),
             call(286, LAST, small(0), scratch(0x80), small(0))],
    "xattr_links": [call(2, string(S["a"]), u16(O_CREAT_RDWR), u16(0o644)),
                    call(188, string(S["a"]), string(S["user.x"]), scratch(0), small(4), small(0)),
                    call(191, string(S["a"]), string(S["user.x"]), scratch(0x100), small(64)),
                    call(88, string(S["a"]), string(S["d"])),
                    call(89, string(S["d"]), scratch(0x200), small(64)),
                    call(90, string(S["d"]), u16(0o777)),
                    call(76, string(S["a"]), small(3))],
}
for name, calls in seqs.items():
    put("syscalls", name, b"".join(calls))


# --- staging: u16 (ready rsp = top - 8*it), u8 (stack = (n+1)*16 KiB), then
# method, path, query, headers, body, each u16-length-prefixed.
def req(rsp_words, stack, *parts):
    out = struct.pack("<HB", rsp_words, stack)
    for p in parts:
        out += struct.pack("<H", len(p)) + p
    return out


put("staging", "get", req(64, 31, b"GET", b"/", b"", b"host: x\n", b""))
put("staging", "post", req(200, 63, b"POST", b"/api/items", b"a=1&b=2",
                           b"content-type: application/json\nhost: x\n", b'{"k": [1, 2, 3]}'))
put("staging", "tight", req(0, 3, b"PUT", b"/" + b"x" * 300, b"q", b"h: v\n", b"B" * 2000))


# --- loader: the smallest ELF files forkvm accepts or nearly accepts.
def elf(etype=2, phdrs=(), entry=0x401000, shoff=0, shnum=0):
    ehdr = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    ehdr += struct.pack("<HHIQQQIHHHHHH", etype, 62, 1, entry, 64, shoff, 0, 64,
                        56, len(phdrs), 64, shnum, 0)
    body = b""
    for (ptype, flags, off, vaddr, filesz, memsz, align) in phdrs:
        body += struct.pack("<IIQQQQQQ", ptype, flags, off, vaddr, vaddr, filesz, memsz, align)
    return ehdr + body


code = b"\xb8\x3c\x00\x00\x00\x31\xff\x0f\x05"  # exit(0)
base = 64 + 56
put("loader", "tiny_exec", elf(2, [(1, 5, 0, 0x400000, base + len(code), base + len(code), 0x1000)],
                              entry=0x400000 + base) + code)
put("loader", "tiny_pie_bss", elf(3, [(1, 5, 0, 0, base * 2 + len(code), 0x3000, 0x1000),
                                      (0x6474E551, 6, 0, 0, 0, 0, 16)],
                                  entry=base * 2) + bytes(56) + code)
interp = b"/lib64/ld-linux-x86-64.so.2\x00"
h2 = 64 + 56 * 2
put("loader", "tiny_pie_bss", elf(3, [(1, 5, 0, 0, h2 + len(code), 0x3000, 0x1000),
                                      (0x6474E551, 6, 0, 0, 0, 0, 16)],
                                  entry=h2) + code)
put("loader", "tiny_interp", elf(2, [(3, 4, h2, 0x400000 + h2, len(interp), len(interp), 1),
                                     (1, 5, 0, 0x400000, h2 + len(interp), h2 + len(interp), 0x1000)],
                                 entry=0x400000) + interp)
put("loader", "tls_two_loads", elf(2, [(1, 5, 0, 0x400000, 0x1000, 0x1000, 0x1000),
                                       (1, 6, 0, 0x402000, 0x100, 0x2000, 0x1000),
                                       (7, 4, 0, 0x402000, 0x10, 0x40, 8)],
                                   entry=0x400100) + bytes(0x1000 - 232))
