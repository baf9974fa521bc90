//! Guest memory: the host mapping behind guest RAM, the page tables the host
//! builds before the first run, and the guest address-space bookkeeping.

mod address_space;
mod budget;
mod bus_guard;
mod copy;
mod guest_memory;
mod host_prot;
mod labels;
pub mod page_tables;
mod pagemap;
mod shared;
mod snapshot;
mod user_map;
mod vfork;

pub use address_space::AddressSpace;
pub use budget::Budget;
pub use guest_memory::{chunk_size, Fault, GuestMemory, MapError};
pub use host_prot::Protections;
pub use labels::{Label, Labels, MappedFile};
pub use shared::{anonymous_backing, SharedRange};
pub use snapshot::{ResetStats, Snapshot, KEEP_PRIVATE_PAGES};
pub use user_map::{Rights, UserMap};
pub use vfork::VforkBase;

/// An unlinked host file for tests (named by process and thread while it
/// is created, so tests running at once do not meet).
#[cfg(test)]
pub(crate) fn temp_file() -> std::fs::File {
    let path = std::env::temp_dir().join(format!(
        "forkvm-memory-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create a test file");
    std::fs::remove_file(&path).expect("unlink the test file");
    f
}
