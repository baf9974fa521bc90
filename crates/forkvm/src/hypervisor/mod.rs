//! KVM: the VM/vCPU wrapper, hardware-vs-PVM detection, and the watchdog
//! that enforces wall-clock limits.

pub mod platform;
pub mod pool;
pub mod vcpu;
pub mod watchdog;
pub mod xsave;

pub use platform::{Platform, SyscallPath};
pub use vcpu::{Exit, Hypervisor, KvmError, Vcpu};
pub use watchdog::Deadline;
pub use xsave::{XsaveArea, XsaveLayout};
