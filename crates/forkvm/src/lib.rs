//! forkvm: run unmodified static Linux x86-64 programs in tiny KVM virtual machines.
//!
//! A program is loaded into its own VM ([`machine::Machine`]): the host builds
//! page tables and a guest kernel of a few dozen bytes ([`guest_kernel`]),
//! loads the ELF ([`loader`]) and serves the program's Linux system calls
//! ([`linux`]) on every exit. Host/guest constants live in [`abi`].
//!
//! ```no_run
//! use forkvm::machine::{Config, Machine, Outcome};
//! let config = Config { argv: vec!["hello".into()], ..Config::default() };
//! let mut m = Machine::from_file("tests/guests/out/hello.musl", config)?;
//! match m.run()? {
//!     Outcome::Exited(code) => println!("exited with {code}"),
//!     other => println!("ended: status {}", other.status()),
//! }
//! # Ok::<(), forkvm::machine::MachineError>(())
//! ```

pub use forkvm_abi as abi;
pub mod builtin;
pub mod clock;
pub mod crash;
pub mod debug;
pub mod floors;
pub mod fork;
pub mod guest_api;
pub mod guest_kernel;
pub mod hypervisor;
pub mod linux;
pub mod loader;
pub mod machine;
pub mod master;
pub mod memory;
pub mod vdso;
