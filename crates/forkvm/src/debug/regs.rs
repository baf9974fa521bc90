//! The register set forkvm shows gdb: gdb's x86-64 Linux layout (core,
//! SSE, `orig_rax`, `fs_base`/`gs_base`), converted from and to the vCPU's
//! registers and XSAVE image.

use crate::abi::selector;
use crate::hypervisor::XsaveArea;
use gdbstub::arch::{Arch, Registers};
use gdbstub_arch::x86::reg::{id::X86_64CoreRegId, X86_64CoreRegs};
use std::sync::OnceLock;

/// Size of the core + SSE part of the `g` packet.
const CORE_LEN: usize = 0x218;

/// Offsets in the legacy (FXSAVE) region of an XSAVE image.
mod fx {
    pub const FCW: usize = 0;
    pub const FSW: usize = 2;
    pub const FTW: usize = 4;
    pub const FOP: usize = 6;
    pub const FIP: usize = 8;
    pub const FDP: usize = 16;
    pub const MXCSR: usize = 24;
    pub const ST: usize = 32;
    pub const XMM: usize = 160;
    /// XSTATE_BV in the XSAVE header.
    pub const XSTATE_BV: usize = 512;
}

/// gdb's x86-64 Linux register set (the layout gdbserver uses).
pub enum ForkvmX86_64 {}

/// The registers of one thread as gdb sees them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Regs {
    /// General, segment selectors, x87 and SSE registers.
    pub core: X86_64CoreRegs,
    /// The syscall number of an interrupted call (always -1 here: no restarts).
    pub orig_rax: u64,
    /// FS base (the thread pointer).
    pub fs_base: u64,
    /// GS base.
    pub gs_base: u64,
}

impl Registers for Regs {
    type ProgramCounter = u64;

    fn pc(&self) -> u64 {
        self.core.rip
    }

    fn gdb_serialize(&self, mut write_byte: impl FnMut(Option<u8>)) {
        self.core.gdb_serialize(&mut write_byte);
        for v in [self.orig_rax, self.fs_base, self.gs_base] {
            for b in v.to_le_bytes() {
                write_byte(Some(b));
            }
        }
    }

    fn gdb_deserialize(&mut self, bytes: &[u8]) -> Result<(), ()> {
        self.core
            .gdb_deserialize(bytes.get(..CORE_LEN).ok_or(())?)?;
        let extra = bytes.get(CORE_LEN..).unwrap_or(&[]);
        for (i, slot) in [&mut self.orig_rax, &mut self.fs_base, &mut self.gs_base]
            .into_iter()
            .enumerate()
        {
            if let Some(b) = extra.get(i * 8..i * 8 + 8) {
                let mut q = [0u8; 8];
                q.copy_from_slice(b);
                *slot = u64::from_le_bytes(q);
            }
        }
        Ok(())
    }
}

impl Arch for ForkvmX86_64 {
    type Usize = u64;
    type Registers = Regs;
    type RegId = X86_64CoreRegId;
    type BreakpointKind = usize;

    fn target_description_xml() -> Option<&'static str> {
        static XML: OnceLock<String> = OnceLock::new();
        Some(XML.get_or_init(target_xml).as_str())
    }
}

/// The target description: the register names and order of gdb's
/// `amd64-linux` description (regnums 0..59), so the `g` packet above matches.
fn target_xml() -> String {
    let mut x = String::from(
        r#"<?xml version="1.0"?><!DOCTYPE target SYSTEM "gdb-target.dtd"><target version="1.0"><architecture>i386:x86-64</architecture><osabi>GNU/Linux</osabi><feature name="org.gnu.gdb.i386.core">"#,
    );
    let reg = |x: &mut String, name: &str, bits: u32, ty: &str, group: Option<&str>| {
        x.push_str(&format!(
            r#"<reg name="{name}" bitsize="{bits}" type="{ty}""#
        ));
        if let Some(g) = group {
            x.push_str(&format!(r#" group="{g}""#));
        }
        x.push_str("/>");
    };
    for r in ["rax", "rbx", "rcx", "rdx", "rsi", "rdi"] {
        reg(&mut x, r, 64, "int64", None);
    }
    reg(&mut x, "rbp", 64, "data_ptr", None);
    reg(&mut x, "rsp", 64, "data_ptr", None);
    for i in 8..16 {
        reg(&mut x, &format!("r{i}"), 64, "int64", None);
    }
    reg(&mut x, "rip", 64, "code_ptr", None);
    reg(&mut x, "eflags", 32, "int32", None);
    for r in ["cs", "ss", "ds", "es", "fs", "gs"] {
        reg(&mut x, r, 32, "int32", None);
    }
    for i in 0..8 {
        reg(&mut x, &format!("st{i}"), 80, "i387_ext", None);
    }
    for r in [
        "fctrl", "fstat", "ftag", "fiseg", "fioff", "foseg", "fooff", "fop",
    ] {
        reg(&mut x, r, 32, "int", Some("float"));
    }
    x.push_str(r#"</feature><feature name="org.gnu.gdb.i386.sse">"#);
    x.push_str(concat!(
        r#"<vector id="v8bf16" type="bfloat16" count="8"/>"#,
        r#"<vector id="v8h" type="ieee_half" count="8"/>"#,
        r#"<vector id="v4f" type="ieee_single" count="4"/>"#,
        r#"<vector id="v2d" type="ieee_double" count="2"/>"#,
        r#"<vector id="v16i8" type="int8" count="16"/>"#,
        r#"<vector id="v8i16" type="int16" count="8"/>"#,
        r#"<vector id="v4i32" type="int32" count="4"/>"#,
        r#"<vector id="v2i64" type="int64" count="2"/>"#,
        r#"<union id="vec128"><field name="v8_bfloat16" type="v8bf16"/><field name="v8_half" type="v8h"/>"#,
        r#"<field name="v4_float" type="v4f"/><field name="v2_double" type="v2d"/>"#,
        r#"<field name="v16_int8" type="v16i8"/><field name="v8_int16" type="v8i16"/>"#,
        r#"<field name="v4_int32" type="v4i32"/><field name="v2_int64" type="v2i64"/>"#,
        r#"<field name="uint128" type="uint128"/></union>"#,
    ));
    for i in 0..16 {
        reg(&mut x, &format!("xmm{i}"), 128, "vec128", Some("vector"));
    }
    reg(&mut x, "mxcsr", 32, "int", Some("vector"));
    x.push_str(r#"</feature><feature name="org.gnu.gdb.i386.linux">"#);
    reg(&mut x, "orig_rax", 64, "int", Some("system"));
    x.push_str(r#"</feature><feature name="org.gnu.gdb.i386.segments">"#);
    reg(&mut x, "fs_base", 64, "int", None);
    reg(&mut x, "gs_base", 64, "int", None);
    x.push_str("</feature></target>");
    x
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[o..o + 2]);
    u16::from_le_bytes(a)
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[o..o + 4]);
    u32::from_le_bytes(a)
}

fn u128_at(b: &[u8], o: usize) -> u128 {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[o..o + 16]);
    u128::from_le_bytes(a)
}

/// The registers of a thread with user registers `r`, FS base `fs_base`
/// and extended state `fpu`.
pub fn to_gdb(r: &kvm_bindings::kvm_regs, fs_base: u64, fpu: &XsaveArea) -> Regs {
    let b = &fpu.as_bytes()[..];
    let mut core = X86_64CoreRegs {
        regs: [
            r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8, r.r9, r.r10, r.r11,
            r.r12, r.r13, r.r14, r.r15,
        ],
        eflags: r.rflags as u32,
        rip: r.rip,
        ..X86_64CoreRegs::default()
    };
    core.segments.cs = u32::from(selector::USER_CS);
    core.segments.ss = u32::from(selector::USER_DS);
    for (i, st) in core.st.iter_mut().enumerate() {
        st.copy_from_slice(&b[fx::ST + 16 * i..fx::ST + 16 * i + 10]);
    }
    core.fpu.fctrl = u32::from(u16_at(b, fx::FCW));
    core.fpu.fstat = u32::from(u16_at(b, fx::FSW));
    // FXSAVE keeps one "valid" bit per register; gdb wants two bits (11 = empty).
    let abridged = b[fx::FTW];
    core.fpu.ftag = (0..8)
        .filter(|i| abridged & (1 << i) == 0)
        .fold(0, |t, i| t | (3 << (2 * i)));
    core.fpu.fop = u32::from(u16_at(b, fx::FOP));
    core.fpu.fioff = u32_at(b, fx::FIP);
    core.fpu.fooff = u32_at(b, fx::FDP);
    for (i, x) in core.xmm.iter_mut().enumerate() {
        *x = u128_at(b, fx::XMM + 16 * i);
    }
    core.mxcsr = u32_at(b, fx::MXCSR);
    Regs {
        core,
        orig_rax: u64::MAX,
        fs_base,
        gs_base: 0,
    }
}

/// Copies gdb's general registers into `r` (RFLAGS is sanitised when the
/// frame is written).
pub fn from_gdb(g: &Regs, r: &mut kvm_bindings::kvm_regs) {
    let [rax, rbx, rcx, rdx, rsi, rdi, rbp, rsp, r8, r9, r10, r11, r12, r13, r14, r15] =
        g.core.regs;
    *r = kvm_bindings::kvm_regs {
        rax,
        rbx,
        rcx,
        rdx,
        rsi,
        rdi,
        rbp,
        rsp,
        r8,
        r9,
        r10,
        r11,
        r12,
        r13,
        r14,
        r15,
        rip: g.core.rip,
        rflags: (r.rflags & !0xffff_ffff) | u64::from(g.core.eflags),
    };
}

/// `fpu` with gdb's x87/SSE registers, if they differ from it.
pub fn fpu_from_gdb(g: &Regs, fpu: &XsaveArea) -> Option<XsaveArea> {
    let now = to_gdb(&kvm_bindings::kvm_regs::default(), 0, fpu);
    let (a, c) = (&g.core, &now.core);
    if a.st == c.st && a.fpu == c.fpu && a.xmm == c.xmm && a.mxcsr == c.mxcsr {
        return None;
    }
    let mut x = fpu.to_kvm();
    let mut b: Vec<u8> = x.region.iter().flat_map(|w| w.to_le_bytes()).collect();
    b[fx::FCW..fx::FCW + 2].copy_from_slice(&(a.fpu.fctrl as u16).to_le_bytes());
    b[fx::FSW..fx::FSW + 2].copy_from_slice(&(a.fpu.fstat as u16).to_le_bytes());
    b[fx::FTW] = (0..8)
        .filter(|i| (a.fpu.ftag >> (2 * i)) & 3 != 3)
        .fold(0, |t, i| t | (1 << i));
    b[fx::FOP..fx::FOP + 2].copy_from_slice(&(a.fpu.fop as u16).to_le_bytes());
    b[fx::MXCSR..fx::MXCSR + 4].copy_from_slice(&a.mxcsr.to_le_bytes());
    for (i, st) in a.st.iter().enumerate() {
        b[fx::ST + 16 * i..fx::ST + 16 * i + 10].copy_from_slice(st);
    }
    for (i, v) in a.xmm.iter().enumerate() {
        b[fx::XMM + 16 * i..fx::XMM + 16 * i + 16].copy_from_slice(&v.to_le_bytes());
    }
    // x87 and SSE now hold explicit values: mark them present.
    b[fx::XSTATE_BV] |= 3;
    for (w, q) in x.region.iter_mut().zip(b.chunks_exact(4)) {
        *w = u32::from_le_bytes([q[0], q[1], q[2], q[3]]);
    }
    Some(XsaveArea::from_kvm(&x, fpu.layout()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g_packet_round_trips_with_fs_base() {
        let mut r = Regs::default();
        r.core.rip = 0x401000;
        r.core.regs[7] = 0x7fff_0000;
        r.fs_base = 0x1234_5678;
        let mut bytes = Vec::new();
        r.gdb_serialize(|b| bytes.push(b.unwrap_or(0)));
        assert_eq!(bytes.len(), CORE_LEN + 24);
        let mut back = Regs::default();
        back.gdb_deserialize(&bytes).unwrap();
        assert_eq!(back, r);
        // A short packet is refused, not read past its end.
        assert!(Regs::default().gdb_deserialize(&bytes[..100]).is_err());
    }

    #[test]
    fn description_names_every_register_once() {
        let xml = target_xml();
        assert_eq!(xml.matches("<reg ").count(), 60);
        assert!(xml.contains(r#"name="fs_base""#));
    }
}
