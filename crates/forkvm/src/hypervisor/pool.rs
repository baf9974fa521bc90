//! A pool of ready-made VMs, each with the host mapping its memory slot
//! points at. Forking takes one and swaps the mapping's contents for a
//! copy-on-write view of the master (same host addresses, so the slot stays
//! valid): no KVM VM is created on the hot path.

use super::{Hypervisor, KvmError, Vcpu};
use crate::guest_kernel::Frame;
use crate::memory::GuestMemory;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// A VM and the guest memory its slot maps.
pub struct Slot {
    /// The vCPU (and its VM).
    pub vcpu: Vcpu,
    /// The memory behind the VM's only slot.
    pub mem: GuestMemory,
}

impl Slot {
    /// A fresh VM over `mem`, its vCPU in guest-kernel mode.
    pub fn create(mut mem: GuestMemory, cr3: u64) -> Result<Self, KvmError> {
        let hv = Hypervisor::get()?;
        let mut vcpu = Vcpu::new(hv, &mem)?;
        vcpu.reset(hv, &mut mem, cr3, Frame::user(0, 0, 0), 0)?;
        Ok(Self { vcpu, mem })
    }
}

/// Idle VMs, by guest memory size.
#[derive(Default)]
pub struct VmPool {
    idle: Mutex<HashMap<u64, Vec<Slot>>>,
}

/// Idle VMs kept per memory size; more are destroyed.
pub const MAX_IDLE: usize = 256;

/// Of those, VMs whose memory keeps a finished child's pages (host memory
/// held for the next fork's copy); more are destroyed.
pub const MAX_STALE: usize = 4;

impl VmPool {
    /// The process-wide pool.
    pub fn global() -> &'static VmPool {
        static POOL: OnceLock<VmPool> = OnceLock::new();
        POOL.get_or_init(VmPool::default)
    }

    /// An idle VM whose memory has `size` bytes, emptied: one that holds no
    /// finished child's pages if there is one (emptying those costs).
    pub fn take(&self, size: u64) -> Option<Slot> {
        loop {
            let mut slot = self.pick(size, false)?;
            // A finished child's pages are for a fork's copy only.
            if !slot.mem.is_stale() || slot.mem.empty_all().is_ok() {
                return Some(slot);
            }
        }
    }

    /// An idle VM whose memory has `size` bytes for a fork's copy
    /// (`GuestMemory::copy_from`), which overwrites or zeroes every page: one
    /// that still holds a finished child's pages if there is one.
    pub fn take_for_copy(&self, size: u64) -> Option<Slot> {
        self.pick(size, true)
    }

    /// An idle VM whose memory has `size` bytes for a new program (exec),
    /// its memory renewed (`GuestMemory::renew`) and its vCPU made as good as
    /// a new one over it (`Vcpu::renew`): one that holds no finished child's
    /// pages if there is one (those are for the next fork's copy).
    pub fn take_renewed(&self, size: u64) -> Option<Slot> {
        loop {
            let mut slot = self.pick(size, false)?;
            // One that cannot be renewed is dropped: the next, or a new VM.
            if slot.mem.renew().is_ok() && slot.vcpu.renew().is_ok() {
                return Some(slot);
            }
        }
    }

    /// An idle VM whose memory has `size` bytes, taken out as it is: one
    /// whose memory is stale (holds a finished child's pages) exactly when
    /// `stale`, if there is one, else any.
    fn pick(&self, size: u64, stale: bool) -> Option<Slot> {
        let mut idle = self.idle.lock().ok()?;
        let v = idle.get_mut(&size)?;
        match v.iter().rposition(|s| s.mem.is_stale() == stale) {
            Some(i) => Some(v.swap_remove(i)),
            None => v.pop(),
        }
    }

    /// Whether a VM whose memory has `size` bytes may go back with its pages
    /// kept (`GuestMemory::empty_keeping_pages`): at most [`MAX_STALE`] do.
    pub fn may_keep_pages(&self, size: u64) -> bool {
        self.idle.lock().is_ok_and(|i| {
            i.get(&size)
                .is_none_or(|v| v.iter().filter(|s| s.mem.is_stale()).count() < MAX_STALE)
        })
    }

    /// Returns a VM for reuse.
    pub fn give(&self, slot: Slot) {
        if let Ok(mut idle) = self.idle.lock() {
            let v = idle.entry(slot.mem.size()).or_default();
            let stale = v.iter().filter(|s| s.mem.is_stale()).count();
            if v.len() < MAX_IDLE && (!slot.mem.is_stale() || stale < MAX_STALE) {
                v.push(slot);
            }
        }
    }

    /// Number of idle VMs for `size`.
    pub fn idle(&self, size: u64) -> usize {
        self.idle
            .lock()
            .map(|i| i.get(&size).map_or(0, Vec::len))
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi;

    /// A pooled VM whose memory holds `secret` in its pages, emptied with
    /// them kept (as a finished child's is).
    fn stale_slot(size: u64, secret: u8) -> Slot {
        let mem = GuestMemory::new(size).unwrap();
        let mut slot = Slot::create(mem, abi::PAGE_TABLES_ADDR).unwrap();
        slot.mem
            .kernel_slice_mut(0x40_0000, 0x1000)
            .unwrap()
            .fill(secret);
        slot.mem.empty_keeping_pages().unwrap();
        assert!(slot.mem.is_stale());
        slot
    }

    #[test]
    fn only_a_forks_copy_gets_memory_a_finished_child_left() {
        let size = 4 * abi::HUGE_PAGE_SIZE;
        let pool = VmPool::default();
        pool.give(stale_slot(size, 0x5a));
        // Anything else gets the memory emptied.
        let slot = pool.take(size).unwrap();
        assert!(!slot.mem.is_stale());
        assert!(slot
            .mem
            .kernel_read(0x40_0000, 0x1000)
            .unwrap()
            .iter()
            .all(|&b| b == 0));
        // A fork's copy gets it as it is (and overwrites or zeroes it).
        pool.give(slot);
        pool.give(stale_slot(size, 0x77));
        let slot = pool.take_for_copy(size).unwrap();
        assert!(slot.mem.is_stale());
        // At most MAX_STALE such memories are kept.
        for _ in 0..MAX_STALE + 1 {
            pool.give(stale_slot(size, 1));
        }
        assert!(!pool.may_keep_pages(size));
        let kept = (0..MAX_STALE + 2)
            .filter_map(|_| pool.take_for_copy(size))
            .filter(|s| s.mem.is_stale())
            .count();
        assert_eq!(kept, MAX_STALE);
        // A new program (exec) gets a VM as new: one without kept pages
        // first (those are for forks), else a stale one emptied.
        let zeros = |s: &Slot| {
            (0..size).step_by(abi::PAGE_SIZE as usize).all(|p| {
                s.mem
                    .kernel_read(p, abi::PAGE_SIZE)
                    .unwrap()
                    .iter()
                    .all(|&b| b == 0)
            })
        };
        let pool = VmPool::default();
        pool.give(stale_slot(size, 0x99));
        let fresh = GuestMemory::new(size).unwrap();
        pool.give(Slot::create(fresh, abi::PAGE_TABLES_ADDR).unwrap());
        let slot = pool.take_renewed(size).unwrap();
        assert!(!slot.mem.is_stale() && zeros(&slot));
        let slot = pool.take_renewed(size).unwrap();
        assert!(!slot.mem.is_stale() && zeros(&slot));
        assert!(pool.take_renewed(size).is_none());
    }
}
