//! The guest's clocks: one process-wide time function of the TSC, shared by
//! every VM and by the host's own answers to clock_gettime, so that time read
//! in the guest (through the vDSO, without an exit) and time answered by the
//! host agree and never go backwards: across calls, threads, forks and resets.
//!
//! The function is piecewise linear in the TSC. Each piece (a [`Segment`])
//! covers about one second of TSC ticks; the vDSO refuses to extrapolate past
//! a segment's end and makes the real syscall instead, which the host answers
//! after starting the next segment. A new segment starts at the host's
//! CLOCK_MONOTONIC, or at the value the previous one reached if that is later,
//! so the function is monotonic and stays within one segment's drift (well
//! under a microsecond) of the host clock. CLOCK_REALTIME and CLOCK_BOOTTIME
//! are CLOCK_MONOTONIC plus offsets taken when the segment starts.
//!
//! The TSC rate comes from KVM (`KVM_GET_TSC_KHZ`), and the guest's TSC is
//! the host's: on PVM it is (measured: guest `rdtsc` reads the host TSC), on
//! hardware KVM the vCPU's TSC is set to the host's when it is created.

use crate::abi;
use std::sync::{Mutex, OnceLock};

/// Fixed-point shift of [`Segment::mult`].
const SHIFT: u32 = 32;

/// One linear piece of the time function, as the guest's vDSO reads it
/// (field order is the layout at `abi::fast::TIME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Segment {
    /// Which piece this is (1, 2, ...); 0 means "no usable time base".
    pub generation: u64,
    /// First TSC value it covers.
    pub tsc_start: u64,
    /// First TSC value it no longer covers.
    pub tsc_end: u64,
    /// CLOCK_MONOTONIC at `tsc_start`, in ns.
    pub mono_ns: u64,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC, in ns.
    pub real_minus_mono: i64,
    /// CLOCK_BOOTTIME - CLOCK_MONOTONIC, in ns.
    pub boot_minus_mono: i64,
    /// ns = (tsc - tsc_start) * mult >> shift.
    pub mult: u64,
    /// See `mult`.
    pub shift: u64,
}

impl Segment {
    /// CLOCK_MONOTONIC at `tsc` by this piece (extrapolated past its end).
    pub fn mono_at(&self, tsc: u64) -> u64 {
        let d = u128::from(tsc.saturating_sub(self.tsc_start)) * u128::from(self.mult);
        self.mono_ns.saturating_add((d >> (self.shift & 63)) as u64)
    }

    /// The page image the vDSO reads (`abi::fast::TIME`).
    pub fn to_bytes(&self) -> [u8; abi::fast::TIME_SIZE as usize] {
        let mut b = [0u8; abi::fast::TIME_SIZE as usize];
        let words = [
            self.generation,
            self.tsc_start,
            self.tsc_end,
            self.mono_ns,
            self.real_minus_mono as u64,
            self.boot_minus_mono as u64,
            self.mult,
            self.shift,
        ];
        for (chunk, w) in b.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        b
    }
}

struct State {
    tsc_khz: u64,
    current: Segment,
}

fn state() -> &'static Mutex<Option<State>> {
    static S: OnceLock<Mutex<Option<State>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(None))
}

/// The TSC now.
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` reads the time-stamp counter; it has no memory effects
    // and is available on every x86-64 CPU KVM runs on.
    unsafe { core::arch::x86_64::_rdtsc() }
}

fn host_ns(id: rustix::time::ClockId) -> u64 {
    let t = rustix::time::clock_gettime(id);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// Tells the clock the TSC rate (from KVM); the first caller wins.
pub fn set_tsc_khz(khz: u64) {
    if khz == 0 {
        return;
    }
    let Ok(mut s) = state().lock() else { return };
    if s.is_none() {
        *s = Some(State {
            tsc_khz: khz,
            current: Segment::default(),
        });
    }
}

/// Starts the segment that covers `tsc`: from the host clock, or from where
/// the previous segment got to if that is later (never backwards).
fn next_segment(s: &State, tsc: u64) -> Segment {
    use rustix::time::ClockId;
    let mono = host_ns(ClockId::Monotonic);
    let real = host_ns(ClockId::Realtime);
    let boot = host_ns(ClockId::Boottime);
    let prev = &s.current;
    let reached = if prev.generation == 0 {
        0
    } else {
        prev.mono_at(tsc.min(prev.tsc_end))
    };
    let ticks_per_s = s.tsc_khz.saturating_mul(1000);
    Segment {
        generation: prev.generation + 1,
        tsc_start: tsc,
        tsc_end: tsc.saturating_add(ticks_per_s),
        mono_ns: mono.max(reached),
        real_minus_mono: real as i64 - mono as i64,
        boot_minus_mono: boot as i64 - mono as i64,
        mult: (1_000_000u64 << SHIFT) / s.tsc_khz.max(1),
        shift: u64::from(SHIFT),
    }
}

/// The segment covering the TSC now (starting a new one if the current has
/// ended), or None when the TSC rate is unknown.
pub fn current() -> Option<Segment> {
    let tsc = rdtsc();
    let mut guard = state().lock().ok()?;
    let s = guard.as_mut()?;
    if s.current.generation == 0 || tsc >= s.current.tsc_end || tsc < s.current.tsc_start {
        s.current = next_segment(s, tsc);
    }
    Some(s.current)
}

/// Puts the current piece of the time function in the vDSO's time base in
/// `mem`'s data page, if it holds another (written only then, so a fork's
/// copy-on-write page stays shared otherwise). Safe while the vCPU runs
/// only when no guest code reads the page meanwhile: the poller calls it
/// while the calling thread spins for its answer on the one vCPU.
pub fn refresh_page(mem: &mut crate::memory::GuestMemory) -> Result<(), crate::memory::Fault> {
    let Some(seg) = current() else {
        return Ok(());
    };
    let at = abi::FAST_DATA_ADDR + abi::fast::TIME;
    if mem.kernel_read_u64(at)? != seg.generation {
        mem.kernel_write(at, &seg.to_bytes())?;
    }
    Ok(())
}

/// CLOCK_MONOTONIC, CLOCK_REALTIME or CLOCK_BOOTTIME as the guest sees it,
/// in ns; None for other clocks or when the clock is not set up.
pub fn guest_ns(id: rustix::time::ClockId) -> Option<u64> {
    use rustix::time::ClockId;
    let seg = current()?;
    let mono = seg.mono_at(rdtsc().min(seg.tsc_end));
    let off = match id {
        ClockId::Monotonic | ClockId::MonotonicCoarse => 0,
        ClockId::Realtime | ClockId::RealtimeCoarse => seg.real_minus_mono,
        ClockId::Boottime => seg.boot_minus_mono,
        _ => return None,
    };
    Some(mono.saturating_add_signed(off))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_continue_without_going_back() {
        let s = State {
            tsc_khz: 2_000_000,
            current: Segment::default(),
        };
        let a = next_segment(&s, 1_000);
        assert_eq!(a.generation, 1);
        assert_eq!(a.tsc_end - a.tsc_start, 2_000_000_000);
        // 2 GHz: 2,000 ticks are 1,000 ns.
        assert_eq!(a.mono_at(3_000) - a.mono_ns, 1_000);
        // A segment whose predecessor ran ahead of the host clock starts where it got to.
        let ahead = Segment {
            mono_ns: u64::MAX / 4,
            ..a
        };
        let s2 = State {
            tsc_khz: 2_000_000,
            current: ahead,
        };
        let b = next_segment(&s2, a.tsc_end + 10);
        assert_eq!(b.generation, 2);
        assert!(b.mono_ns >= ahead.mono_at(ahead.tsc_end));
    }

    #[test]
    fn page_image_is_the_vdso_layout() {
        let seg = Segment {
            generation: 7,
            tsc_start: 1,
            tsc_end: 2,
            mono_ns: 3,
            real_minus_mono: -4,
            boot_minus_mono: 5,
            mult: 6,
            shift: 32,
        };
        let b = seg.to_bytes();
        assert_eq!(u64::from_le_bytes(b[0..8].try_into().unwrap()), 7);
        assert_eq!(i64::from_le_bytes(b[32..40].try_into().unwrap()), -4);
        assert_eq!(u64::from_le_bytes(b[56..64].try_into().unwrap()), 32);
    }
}
