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

impl VmPool {
    /// The process-wide pool.
    pub fn global() -> &'static VmPool {
        static POOL: OnceLock<VmPool> = OnceLock::new();
        POOL.get_or_init(VmPool::default)
    }

    /// An idle VM whose memory has `size` bytes.
    pub fn take(&self, size: u64) -> Option<Slot> {
        self.idle.lock().ok()?.get_mut(&size)?.pop()
    }

    /// Returns a VM for reuse.
    pub fn give(&self, slot: Slot) {
        if let Ok(mut idle) = self.idle.lock() {
            let v = idle.entry(slot.mem.size()).or_default();
            if v.len() < MAX_IDLE {
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
