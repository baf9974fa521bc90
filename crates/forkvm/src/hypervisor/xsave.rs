//! The extended CPU state of a guest thread (x87, MXCSR, SSE, AVX, AVX-512) in
//! the standard (uncompacted) XSAVE format that `KVM_GET_XSAVE` returns.
//!
//! Every guest thread owns one: it is saved when the thread leaves the vCPU and
//! loaded when it comes back, so vector registers and floating-point control
//! words never leak from one thread to another. Signal frames carry it in the
//! layout Linux uses (`struct _fpstate` with the `_fpx_sw_bytes` markers), and
//! what comes back from a frame is guest-written data: [`XsaveArea::from_sigframe`]
//! validates and sanitises it before it can reach `KVM_SET_XSAVE`.

use kvm_bindings::{kvm_cpuid_entry2, kvm_xsave};

/// Bytes of a `kvm_xsave` region. forkvm enables no dynamically sized state
/// (AMX), so the whole state always fits.
pub const AREA_SIZE: usize = 4096;
/// The legacy FXSAVE region.
const LEGACY_SIZE: usize = 512;
/// The XSAVE header (XSTATE_BV, XCOMP_BV, reserved), right after the legacy region.
const HEADER: usize = 512;
const HEADER_SIZE: usize = 64;
/// Smallest XSAVE area: legacy region plus header.
const MIN_SIZE: usize = LEGACY_SIZE + HEADER_SIZE;
/// Offsets in the legacy region.
const FCW: usize = 0;
const MXCSR: usize = 24;
const MXCSR_MASK: usize = 28;
/// Bytes 464..512 of the legacy region are free for software: Linux keeps its
/// `_fpx_sw_bytes` there in signal frames.
const SW_BYTES: usize = 464;
/// `_fpx_sw_bytes.magic1`: the frame holds an XSAVE image, not just FXSAVE.
pub const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
/// Written right after the XSAVE image in a signal frame.
pub const FP_XSTATE_MAGIC2: u32 = 0x4650_5845;
/// x87 and SSE state components.
const XFEATURE_FP_SSE: u64 = 0b11;
/// MXCSR bits that exist (16-31 are reserved; writing them makes XRSTOR fault).
const MXCSR_VALID: u32 = 0xffff;
/// The initial control words (Linux's `init_fpstate`).
const FCW_INIT: u16 = 0x37f;
const MXCSR_INIT: u32 = 0x1f80;

/// The state components the guest may use and the size of their XSAVE image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XsaveLayout {
    /// XCR0: the enabled state components.
    pub xcr0: u64,
    /// Bytes of the uncompacted XSAVE image for `xcr0` (CPUID 0xD), at most [`AREA_SIZE`].
    pub size: usize,
}

impl XsaveLayout {
    /// The layout for `xcr0`, sized from CPUID leaf 0xD (each component's offset and size).
    pub fn from_cpuid(cpuid: &[kvm_cpuid_entry2], xcr0: u64) -> Self {
        let mut size = MIN_SIZE;
        for e in cpuid {
            if e.function == 0xd && (2..63).contains(&e.index) && xcr0 & (1 << e.index) != 0 {
                let end = e.ebx as usize + e.eax as usize;
                size = size.max(end);
            }
        }
        Self {
            xcr0,
            size: size.min(AREA_SIZE),
        }
    }

    /// Bytes a signal frame needs for the state: the image and the trailing magic.
    pub fn frame_size(&self) -> u64 {
        self.size as u64 + 4
    }
}

/// One thread's extended state.
#[derive(Clone, PartialEq, Eq)]
pub struct XsaveArea {
    bytes: Box<[u8; AREA_SIZE]>,
    layout: XsaveLayout,
}

impl std::fmt::Debug for XsaveArea {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XsaveArea")
            .field("fcw", &format_args!("{:#x}", self.fcw()))
            .field("mxcsr", &format_args!("{:#x}", self.mxcsr()))
            .field("xstate_bv", &format_args!("{:#x}", self.xstate_bv()))
            .finish()
    }
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from(u32_at(b, off)) | u64::from(u32_at(b, off + 4)) << 32
}

/// Why a signal frame's state was refused (the guest gets SIGSEGV, as on Linux,
/// where XRSTOR/FXRSTOR of such an image faults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadFpState {
    /// Shorter than the legacy region.
    #[error("the signal frame's FPU state is truncated")]
    Truncated,
    /// MXCSR has reserved bits set.
    #[error("the signal frame's MXCSR sets reserved bits")]
    Mxcsr,
    /// The XSAVE header names components that are not enabled, the compacted
    /// format, or sets reserved bytes.
    #[error("the signal frame's XSAVE header is invalid")]
    Header,
}

impl XsaveArea {
    /// The state a signal handler starts with on Linux: everything in its
    /// initial configuration, default control words.
    pub fn init(layout: XsaveLayout) -> Self {
        let mut bytes = Box::new([0u8; AREA_SIZE]);
        bytes[FCW..FCW + 2].copy_from_slice(&FCW_INIT.to_le_bytes());
        bytes[MXCSR..MXCSR + 4].copy_from_slice(&MXCSR_INIT.to_le_bytes());
        bytes[MXCSR_MASK..MXCSR_MASK + 4].copy_from_slice(&MXCSR_VALID.to_le_bytes());
        // x87 and SSE marked present (so the control words above are loaded); the
        // other components absent, i.e. in their initial (zero) configuration.
        bytes[HEADER..HEADER + 8].copy_from_slice(&(XFEATURE_FP_SSE & layout.xcr0).to_le_bytes());
        Self { bytes, layout }
    }

    /// From KVM's image.
    pub fn from_kvm(x: &kvm_xsave, layout: XsaveLayout) -> Self {
        let mut bytes = Box::new([0u8; AREA_SIZE]);
        for (chunk, word) in bytes.chunks_exact_mut(4).zip(x.region.iter()) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        Self { bytes, layout }
    }

    /// KVM's image of this state.
    pub fn to_kvm(&self) -> kvm_xsave {
        let mut x = kvm_xsave::default();
        for (word, chunk) in x.region.iter_mut().zip(self.bytes.chunks_exact(4)) {
            *word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        x
    }

    /// The raw 4 KiB image.
    pub fn as_bytes(&self) -> &[u8; AREA_SIZE] {
        &self.bytes
    }

    /// The layout it was made for.
    pub fn layout(&self) -> XsaveLayout {
        self.layout
    }

    /// The x87 control word.
    pub fn fcw(&self) -> u16 {
        u16_at(&self.bytes[..], FCW)
    }

    /// MXCSR.
    pub fn mxcsr(&self) -> u32 {
        u32_at(&self.bytes[..], MXCSR)
    }

    /// XSTATE_BV: which components hold non-initial state.
    pub fn xstate_bv(&self) -> u64 {
        u64_at(&self.bytes[..], HEADER)
    }

    /// Register `xmm<i>` (0..16).
    pub fn xmm(&self, i: usize) -> [u8; 16] {
        let mut r = [0u8; 16];
        if i < 16 {
            r.copy_from_slice(&self.bytes[160 + 16 * i..176 + 16 * i]);
        }
        r
    }

    /// The image Linux puts in a signal frame: the XSAVE image with its
    /// software bytes filled in, followed by [`FP_XSTATE_MAGIC2`].
    pub fn to_sigframe(&self) -> Vec<u8> {
        let size = self.layout.size;
        let mut out = Vec::with_capacity(size + 4);
        out.extend_from_slice(&self.bytes[..size]);
        // KVM's image may name components the guest cannot use (PKRU, when the
        // host has it): the frame describes the guest's XCR0 only.
        let bv = self.xstate_bv() & self.layout.xcr0;
        out[HEADER..HEADER + 8].copy_from_slice(&bv.to_le_bytes());
        let sw = &mut out[SW_BYTES..LEGACY_SIZE];
        sw.fill(0);
        sw[0..4].copy_from_slice(&FP_XSTATE_MAGIC1.to_le_bytes());
        sw[4..8].copy_from_slice(&(size as u32 + 4).to_le_bytes()); // extended_size
        sw[8..16].copy_from_slice(&self.layout.xcr0.to_le_bytes()); // xfeatures
        sw[16..20].copy_from_slice(&(size as u32).to_le_bytes()); // xstate_size
        out.extend_from_slice(&FP_XSTATE_MAGIC2.to_le_bytes());
        out
    }

    /// How many bytes of a frame image [`from_sigframe`](Self::from_sigframe)
    /// needs, judging by its first [`LEGACY_SIZE`] bytes (the legacy region).
    pub fn sigframe_len(legacy: &[u8], layout: XsaveLayout) -> usize {
        match Self::xstate_size(legacy, layout) {
            Some(size) => size + 4,
            None => LEGACY_SIZE,
        }
    }

    /// The XSAVE image size a frame claims, if its software bytes are well formed.
    fn xstate_size(legacy: &[u8], layout: XsaveLayout) -> Option<usize> {
        if legacy.len() < LEGACY_SIZE || u32_at(legacy, SW_BYTES) != FP_XSTATE_MAGIC1 {
            return None;
        }
        let extended = u32_at(legacy, SW_BYTES + 4) as usize;
        let size = u32_at(legacy, SW_BYTES + 16) as usize;
        (size >= MIN_SIZE && size <= layout.size && extended == size + 4).then_some(size)
    }

    /// The state a guest-written signal frame describes, checked as the CPU
    /// checks it when Linux restores it with XRSTOR/FXRSTOR: reserved MXCSR
    /// bits, components outside XCR0, the compacted format or reserved header
    /// bytes are refused. A frame without (valid) XSAVE markers restores the
    /// x87/SSE state only, as Linux does. What is returned names only the
    /// components the frame may restore, so it is safe for `KVM_SET_XSAVE`.
    pub fn from_sigframe(image: &[u8], layout: XsaveLayout) -> Result<Self, BadFpState> {
        if image.len() < LEGACY_SIZE {
            return Err(BadFpState::Truncated);
        }
        if u32_at(image, MXCSR) & !MXCSR_VALID != 0 {
            return Err(BadFpState::Mxcsr);
        }
        let xstate = Self::xstate_size(image, layout)
            .filter(|&size| image.len() >= size + 4 && u32_at(image, size) == FP_XSTATE_MAGIC2);
        let mut bytes = Box::new([0u8; AREA_SIZE]);
        let features = match xstate {
            Some(size) => {
                let xstate_bv = u64_at(image, HEADER);
                let reserved = &image[HEADER + 8..HEADER + HEADER_SIZE];
                if xstate_bv & !layout.xcr0 != 0 || reserved.iter().any(|&b| b != 0) {
                    return Err(BadFpState::Header);
                }
                bytes[..size].copy_from_slice(&image[..size]);
                // Components the frame does not claim come back in their initial state.
                xstate_bv & u64_at(image, SW_BYTES + 8)
            }
            None => {
                bytes[..LEGACY_SIZE].copy_from_slice(&image[..LEGACY_SIZE]);
                XFEATURE_FP_SSE & layout.xcr0
            }
        };
        bytes[SW_BYTES..LEGACY_SIZE].fill(0);
        bytes[HEADER..HEADER + HEADER_SIZE].fill(0);
        bytes[HEADER..HEADER + 8].copy_from_slice(&features.to_le_bytes());
        Ok(Self { bytes, layout })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AVX: XsaveLayout = XsaveLayout {
        xcr0: 0b111,
        size: 832,
    };

    fn sample() -> XsaveArea {
        let mut a = XsaveArea::init(AVX);
        for (i, b) in a.bytes[160..416].iter_mut().enumerate() {
            *b = i as u8;
        }
        a.bytes[MXCSR..MXCSR + 4].copy_from_slice(&0x3f80u32.to_le_bytes());
        a.bytes[HEADER..HEADER + 8].copy_from_slice(&0b111u64.to_le_bytes());
        a.bytes[576] = 0xaa; // AVX upper halves start here
        a
    }

    #[test]
    fn layout_from_cpuid_covers_enabled_components() {
        let leaf = |index, eax, ebx| kvm_cpuid_entry2 {
            function: 0xd,
            index,
            eax,
            ebx,
            ..Default::default()
        };
        let cpuid = [leaf(2, 256, 576), leaf(5, 64, 1088), leaf(6, 512, 1152)];
        assert_eq!(XsaveLayout::from_cpuid(&cpuid, 0b111).size, 832);
        assert_eq!(XsaveLayout::from_cpuid(&cpuid, 0b1100111).size, 1664);
        assert_eq!(XsaveLayout::from_cpuid(&[], 0b11).size, 576);
    }

    #[test]
    fn sigframe_round_trip_keeps_the_state() {
        let a = sample();
        let frame = a.to_sigframe();
        assert_eq!(frame.len(), 836);
        assert_eq!(u32_at(&frame, 832), FP_XSTATE_MAGIC2);
        assert_eq!(XsaveArea::sigframe_len(&frame[..512], AVX), 836);
        let b = XsaveArea::from_sigframe(&frame, AVX).expect("valid frame");
        assert_eq!(b.xmm(3), a.xmm(3));
        assert_eq!(b.mxcsr(), 0x3f80);
        assert_eq!(b.bytes[576], 0xaa);
        assert_eq!(b.xstate_bv(), 0b111);
    }

    #[test]
    fn frames_the_cpu_would_refuse_are_refused() {
        let with = |off: usize, val: &[u8]| {
            let mut frame = sample().to_sigframe();
            frame[off..off + val.len()].copy_from_slice(val);
            XsaveArea::from_sigframe(&frame, AVX)
        };
        assert_eq!(with(MXCSR, &[0, 0, 1, 0]).err(), Some(BadFpState::Mxcsr));
        assert_eq!(with(HEADER, &[0xff; 8]).err(), Some(BadFpState::Header));
        assert_eq!(with(HEADER + 15, &[0x80]).err(), Some(BadFpState::Header)); // compacted
        assert_eq!(with(HEADER + 40, &[1]).err(), Some(BadFpState::Header));
        // Garbage everywhere: no markers, so a legacy frame, whose MXCSR is invalid.
        let garbage = [0xffu8; 836];
        assert_eq!(
            XsaveArea::from_sigframe(&garbage, AVX).err(),
            Some(BadFpState::Mxcsr)
        );
        // The software bytes are the kernel's: whatever is there is not loaded.
        let b = with(SW_BYTES + 24, &[0xee; 8]).expect("valid");
        assert!(b.bytes[SW_BYTES..LEGACY_SIZE].iter().all(|&x| x == 0));
        // Components the frame's software bytes do not claim stay initial.
        let b = with(SW_BYTES + 8, &0b11u64.to_le_bytes()).expect("valid");
        assert_eq!(b.xstate_bv(), 0b11);
    }

    #[test]
    fn frames_without_markers_restore_only_x87_and_sse() {
        let mut frame = sample().to_sigframe();
        frame[SW_BYTES] ^= 1; // magic1 broken
        let b = XsaveArea::from_sigframe(&frame, AVX).expect("legacy");
        assert_eq!(b.xstate_bv(), 0b11);
        assert_eq!(b.bytes[576], 0, "AVX state not taken from a legacy frame");
        assert_eq!(b.xmm(3), sample().xmm(3));

        let mut frame = sample().to_sigframe();
        frame[832] = 0; // magic2 missing
        assert_eq!(
            XsaveArea::from_sigframe(&frame, AVX).map(|b| b.xstate_bv()),
            Ok(0b11)
        );

        let mut frame = sample().to_sigframe();
        frame[SW_BYTES + 16..SW_BYTES + 20].copy_from_slice(&100_000u32.to_le_bytes());
        assert_eq!(
            XsaveArea::sigframe_len(&frame, AVX),
            512,
            "oversized claims ignored"
        );
        assert_eq!(
            XsaveArea::from_sigframe(&frame[..100], AVX),
            Err(BadFpState::Truncated)
        );
    }

    #[test]
    fn frames_name_only_the_guests_components() {
        let mut a = sample();
        a.bytes[HEADER + 1] = 0x02; // PKRU (bit 9), as KVM reports it on PKU hosts
        let frame = a.to_sigframe();
        assert_eq!(u64_at(&frame, HEADER), 0b111);
        assert!(XsaveArea::from_sigframe(&frame, AVX).is_ok());
    }

    #[test]
    fn init_state_has_default_control_words() {
        let a = XsaveArea::init(AVX);
        assert_eq!((a.fcw(), a.mxcsr(), a.xstate_bv()), (0x37f, 0x1f80, 0b11));
        let k = XsaveArea::from_kvm(&a.to_kvm(), AVX);
        assert_eq!(k, a);
    }
}
