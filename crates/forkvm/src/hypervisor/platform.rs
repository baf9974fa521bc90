//! Which hypervisor is behind `/dev/kvm`, and the one decision that depends
//! on it: where `syscall` lands (LSTAR).
//!
//! - **Hardware KVM** (VMX/SVM): `syscall` enters CPL0 at LSTAR. The stub is
//!   `out %al, $SYSCALL; sysretq`: one exit, no guest-kernel work.
//! - **PVM** (`kvm_pvm`): `syscall` lands at LSTAR but stays at CPL3, and any
//!   privileged instruction there faults. LSTAR points at a one-byte `int3`;
//!   the #BP entry (CPL0, IST stack) exits to the host, which recognises the
//!   frame (RIP == stub + 1) as a syscall and rewrites it into the return.
//!
//! Both stubs are always present, and the host recognises both shapes on
//! either platform (see [`crate::guest_kernel::Trap`]), so a forced
//! "hardware" run on PVM still works: its `out` at CPL3 raises #GP, which the
//! host decodes as a syscall too. Everything above this choice is shared.

use std::fmt;
use std::str::FromStr;

/// The syscall entry path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// Intel VMX / AMD SVM: `syscall` reaches CPL0.
    Hardware,
    /// Paging-based software virtualisation: `syscall` stays at CPL3.
    Pvm,
}

/// Environment variable that forces the path (`hardware` or `pvm`).
pub const PLATFORM_ENV: &str = "FORKVM_PLATFORM";

impl Platform {
    /// Detects the platform: `FORKVM_PLATFORM` if set, else PVM when the
    /// `kvm_pvm` module is loaded, else hardware.
    pub fn detect() -> Result<Self, UnknownPlatform> {
        if let Ok(v) = std::env::var(PLATFORM_ENV) {
            return v.parse();
        }
        Ok(Self::probe())
    }

    /// What the machine is, ignoring any override.
    pub fn probe() -> Self {
        if std::path::Path::new("/sys/module/kvm_pvm").exists() {
            Self::Pvm
        } else {
            Self::Hardware
        }
    }

    /// The guest address `syscall` jumps to on this platform: the in-guest
    /// dispatcher when `path` answers calls in the guest, else the stub that
    /// exits to the host for every call.
    pub fn lstar(self, path: SyscallPath) -> u64 {
        use crate::guest_kernel as k;
        match (self, path) {
            (Self::Hardware, SyscallPath::Exit) => k::HW_SYSCALL_STUB,
            (Self::Pvm, SyscallPath::Exit) => k::PVM_SYSCALL_STUB,
            (Self::Hardware, SyscallPath::Fast | SyscallPath::Guest) => k::HW_FAST_SYSCALL,
            (Self::Pvm, SyscallPath::Fast | SyscallPath::Guest) => k::PVM_FAST_SYSCALL,
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Hardware => "hardware",
            Self::Pvm => "pvm",
        })
    }
}

/// How system calls are answered (`--syscalls`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyscallPath {
    /// Calls that concern the guest alone (getpid, gettid, identity,
    /// sched_yield with one thread, getrandom) are answered inside the VM by
    /// the dispatcher at LSTAR, the time calls by the vDSO; on PVM, where an
    /// exit costs tens of µs, simple file calls are posted to a host poller
    /// without an exit (`crate::machine::exitless`); the rest exit.
    #[default]
    Fast,
    /// As `Fast` without the poller: every call the guest cannot answer
    /// itself exits (to compare with `Fast`).
    Guest,
    /// Every call exits to the host (for A/B comparison and debugging).
    Exit,
}

impl SyscallPath {
    /// Whether the in-guest dispatcher and the vDSO answer what they can.
    pub fn in_guest(self) -> bool {
        matches!(self, Self::Fast | Self::Guest)
    }

    /// Whether host calls are posted to the poller on `platform`: on PVM
    /// only. On hardware KVM an exit costs a few µs, about what the poller
    /// saves, and the poller would take a core from the vCPUs.
    pub fn exitless(self, platform: Platform) -> bool {
        self == Self::Fast && platform == Platform::Pvm
    }
}

impl fmt::Display for SyscallPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Fast => "fast",
            Self::Guest => "guest",
            Self::Exit => "exit",
        })
    }
}

impl FromStr for SyscallPath {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fast" => Ok(Self::Fast),
            "guest" => Ok(Self::Guest),
            "exit" => Ok(Self::Exit),
            _ => Err(format!(
                "unknown syscall path {s:?}: expected \"fast\", \"guest\" or \"exit\""
            )),
        }
    }
}

/// A platform name that is neither `hardware` nor `pvm`.
#[derive(Debug, thiserror::Error)]
#[error("unknown platform {0:?}: expected \"hardware\" or \"pvm\"")]
pub struct UnknownPlatform(String);

impl FromStr for Platform {
    type Err = UnknownPlatform;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hardware" | "hw" | "vmx" | "svm" => Ok(Self::Hardware),
            "pvm" => Ok(Self::Pvm),
            _ => Err(UnknownPlatform(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_lstar() {
        assert_eq!("pvm".parse::<Platform>().unwrap(), Platform::Pvm);
        assert_eq!("hardware".parse::<Platform>().unwrap(), Platform::Hardware);
        assert!("x".parse::<Platform>().is_err());
        for path in [SyscallPath::Fast, SyscallPath::Guest, SyscallPath::Exit] {
            assert_ne!(Platform::Pvm.lstar(path), Platform::Hardware.lstar(path));
        }
        assert_eq!("exit".parse::<SyscallPath>(), Ok(SyscallPath::Exit));
        assert!("slow".parse::<SyscallPath>().is_err());
    }
}
