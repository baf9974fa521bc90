//! Adversarial property test of the syscall layer: random sequences of
//! syscalls (known and unknown numbers) with random arguments, biased towards
//! interesting values (NULL, guest-kernel and unmapped addresses, mapped and
//! read-only buffers, huge lengths, small and bad fds), run against a real
//! process state and guest memory. No sequence may panic, and every call
//! must return a value or an errno in Linux's range.

use forkvm::linux::{self, Policy, Process};
use forkvm::memory::{AddressSpace, GuestMemory, Rights};
use proptest::prelude::*;

const RW: u64 = 0x30_0000;
const RO: u64 = 0x20_0000;

fn arg() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(2),
        0u64..64,
        Just(RW),
        (0u64..0x1000).prop_map(|o| RW + o),
        Just(RO),
        Just(0x1000),                // the guest kernel's GDT
        Just(0xffff_8000_0000_0000), // kernel half
        Just(0x7fff_0000_0000),      // unmapped
        Just(u64::MAX),
        Just(1 << 40),
        any::<u64>(),
    ]
}

fn nr() -> impl Strategy<Value = u64> {
    prop_oneof![
        8 => proptest::sample::select(linux::table::all().iter().map(|e| e.nr).collect::<Vec<_>>()),
        1 => any::<u64>(),
    ]
}

/// Calls that would end the process, sleep the host, or touch the host's stdio.
fn skipped(nr: u64, a: &[u64; 6]) -> bool {
    matches!(nr, 60 | 231) // exit, exit_group: end the process (checked elsewhere)
        || matches!(nr, 35 | 230 | 202) // nanosleep, clock_nanosleep, futex: real sleeps
        || (matches!(nr, 0 | 17 | 19 | 295) && a[0] == 0) // reads of the host's stdin
        || (matches!(nr, 1 | 18 | 20 | 296 | 40) && (a[0] == 1 || a[0] == 2)) // writes to the test's output
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    #[test]
    fn syscall_sequences_never_panic(calls in proptest::collection::vec((nr(), proptest::array::uniform6(arg())), 1..60)) {
        let mut m = GuestMemory::new(16 << 20).unwrap();
        m.track_mappings();
        m.map_user(RO, RO + 0x1000, Rights { read: true, write: false });
        m.map_user(RW, RW + 0x10_0000, Rights { read: true, write: true });
        let mut p = Process::new(
            Policy { allow_read: vec!["/usr/share/zoneinfo".into()], ..Policy::default() },
            AddressSpace::new(0x50_0000, 0xe0_0000),
            "/".into(),
            "/prog".into(),
        );
        for (nr, args) in calls {
            if skipped(nr, &args) {
                continue;
            }
            let r = linux::dispatch(&mut p, &mut m, nr, &args) as i64;
            // Errors are -1..-4095; anything else must be a plain value.
            prop_assert!(r >= -4095, "syscall {nr} returned {r}");
            // Scheduling requests are the run loop's; drop them as it would.
            p.sched = None;
            p.waiting = None;
            if p.exit_status.is_some() {
                break;
            }
        }
    }
}
