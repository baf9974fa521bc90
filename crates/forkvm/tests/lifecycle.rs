//! The machine lifecycle against the real /dev/kvm: master, fork, vmcall,
//! reset, and isolation between uses.

mod common;

use forkvm::machine::{Arg, CallError, Config, ReadyAt};
use forkvm::master::Master;
use std::time::Duration;

const IN_ALL: u64 = 0xff;
const IN_FPU: u64 = 1 << 5;

fn master() -> Master {
    let path = common::api_guest("api_demo");
    let config = Config {
        memory: 64 << 20,
        ..Config::default()
    };
    Master::load(path.to_str().unwrap(), config, &ReadyAt::Call).expect("master")
}

#[test]
fn fork_calls_exported_functions() {
    let m = master();
    let mut f = m.fork().unwrap();
    assert_eq!(f.vmcall("add", &[Arg::Int(2), Arg::Int(40)]).unwrap(), 42);
    assert_eq!(f.vmcall("length", &[Arg::Str("hello")]).unwrap(), 5);
    assert_eq!(
        f.vmcall("sum_bytes", &[Arg::Bytes(&[1, 2, 3, 250]), Arg::Int(4)])
            .unwrap(),
        256
    );
    let p = f.vmcall("greeting", &[]).unwrap();
    assert_eq!(
        f.memory().unwrap().read_cstr(p, 100).unwrap(),
        b"hello from the guest"
    );
    assert!(matches!(
        f.vmcall("no_such_fn", &[]),
        Err(CallError::NoSymbol(_))
    ));
}

/// The master's memory rights hold in its forks, and a reset puts them
/// back after a call changed them (a fault in a call ends the call).
/// Before rights were enforced, every write here succeeded.
#[test]
fn memory_rights_hold_in_forks_and_reset_to_the_masters() {
    const PROT_NONE: u64 = 0;
    const PROT_READ: u64 = 1;
    let m = master();
    let mut f = m.fork().unwrap();
    // main made the page read-only before it was ready.
    assert!(f.vmcall("write_read_only_page", &[]).is_err());
    f.reset().unwrap();
    assert_eq!(f.vmcall("write_guarded", &[]).unwrap(), 1);
    assert_eq!(
        f.vmcall("protect_guarded", &[Arg::Int(PROT_READ)]).unwrap(),
        0
    );
    assert_eq!(f.vmcall("read_guarded", &[]).unwrap(), 2);
    assert!(f.vmcall("write_guarded", &[]).is_err());
    f.reset().unwrap();
    // Back to the master's: the guarded page writable and zero, the other read-only.
    assert_eq!(f.vmcall("read_guarded", &[]).unwrap(), 1);
    assert_eq!(
        f.vmcall("protect_guarded", &[Arg::Int(PROT_NONE)]).unwrap(),
        0
    );
    assert!(f.vmcall("read_guarded", &[]).is_err());
    f.reset().unwrap();
    assert_eq!(f.vmcall("write_guarded", &[]).unwrap(), 1);
    assert!(f.vmcall("write_read_only_page", &[]).is_err());
    // Another fork of the same master has the master's rights too.
    let mut g = m.fork().unwrap();
    assert_eq!(g.vmcall("read_guarded", &[]).unwrap(), 1);
    assert!(g.vmcall("write_read_only_page", &[]).is_err());
}

#[test]
fn reset_forgets_everything_a_call_left_behind() {
    let m = master();
    let mut f = m.fork().unwrap();
    let secret = 0x0000_5ec2_e75e_c2e7_u64;
    assert_eq!(f.vmcall("find_secret", &[Arg::Int(secret)]).unwrap(), 0);
    assert_eq!(f.vmcall("plant_secret", &[Arg::Int(secret)]).unwrap(), 0);
    // Without a reset the secret is everywhere (the check can see it), except
    // in the FPU: every call starts from the master's FPU state.
    assert_eq!(
        f.vmcall("find_secret", &[Arg::Int(secret)]).unwrap(),
        IN_ALL & !IN_FPU
    );
    f.reset().unwrap();
    assert_eq!(f.vmcall("find_secret", &[Arg::Int(secret)]).unwrap(), 0);
}

#[test]
fn forks_do_not_see_each_other() {
    let m = master();
    let mut a = m.fork().unwrap();
    let mut b = m.fork().unwrap();
    let secret = 77;
    assert_eq!(a.vmcall("plant_secret", &[Arg::Int(secret)]).unwrap(), 0);
    assert_eq!(b.vmcall("find_secret", &[Arg::Int(secret)]).unwrap(), 0);
    assert_eq!(a.vmcall("bump", &[]).unwrap(), 1);
    assert_eq!(a.vmcall("bump", &[]).unwrap(), 2);
    assert_eq!(b.vmcall("bump", &[]).unwrap(), 1);
    let c = m.fork();
    drop(a);
    let mut c = c.unwrap();
    assert_eq!(c.vmcall("bump", &[]).unwrap(), 1);
    assert_eq!(c.vmcall("find_secret", &[Arg::Int(secret)]).unwrap(), 0);
}

#[test]
fn faults_and_timeouts_poison_until_reset() {
    let m = master();
    let mut f = m.fork().unwrap();
    match f.vmcall("crash", &[]) {
        Err(CallError::Crashed(c)) => assert_eq!(c.signal_name, "SIGSEGV"),
        other => panic!("expected a crash, got {other:?}"),
    }
    assert!(f.is_poisoned());
    assert!(matches!(
        f.vmcall("add", &[Arg::Int(1), Arg::Int(1)]),
        Err(CallError::NotCallable(_))
    ));
    f.reset().unwrap();
    assert_eq!(f.vmcall("add", &[Arg::Int(1), Arg::Int(1)]).unwrap(), 2);

    let r = f.vmcall_with_timeout("spin", &[], Duration::from_millis(200));
    assert!(matches!(r, Err(CallError::TimedOut(_))), "{r:?}");
    f.reset().unwrap();
    assert_eq!(f.vmcall("bump", &[]).unwrap(), 1);

    assert!(matches!(
        f.vmcall("leave", &[Arg::Int(3)]),
        Err(CallError::Exited(3))
    ));
    f.reset().unwrap();
    assert_eq!(f.vmcall("add", &[Arg::Int(2), Arg::Int(2)]).unwrap(), 4);
}

#[test]
fn master_is_unchanged_after_many_fork_reset_cycles() {
    let m = master();
    let before = m.digest();
    let mut f = m.fork().unwrap();
    for i in 0..10_000u64 {
        if i % 100 == 0 {
            f = m.fork().unwrap();
        }
        f.vmcall("write_pages", &[Arg::Int(i % 17)]).unwrap();
        assert_eq!(f.vmcall("bump", &[]).unwrap(), 1);
        f.reset().unwrap();
    }
    assert_eq!(m.digest(), before);
}

#[test]
fn ready_at_a_symbol() {
    let path = common::api_guest("api_demo");
    let m = Master::load(
        path.to_str().unwrap(),
        Config {
            memory: 32 << 20,
            ..Config::default()
        },
        &ReadyAt::Symbol("main".into()),
    )
    .unwrap();
    let mut f = m.fork().unwrap();
    assert_eq!(f.vmcall("add", &[Arg::Int(20), Arg::Int(22)]).unwrap(), 42);
}

#[test]
fn reset_cost_follows_pages_written() {
    let m = master();
    let mut f = m.fork().unwrap();
    f.reset().unwrap();
    for n in [1u64, 16, 100] {
        f.vmcall("write_pages", &[Arg::Int(n)]).unwrap();
        assert_eq!(f.vmcall("page_marks", &[]).unwrap(), n * (n + 1) / 2);
        let stats = f.reset().unwrap();
        assert_eq!(f.vmcall("page_marks", &[]).unwrap(), 0);
        let stats_after_read = f.reset().unwrap();
        assert!(stats_after_read.copied <= stats.copied);
        // The pages written plus a few the call itself dirties (stack, IST).
        assert!(
            stats.copied >= n && stats.copied <= n + 16,
            "{n}: {stats:?}"
        );
    }
}

/// The in-guest dispatcher answers from a page the program can write: a call
/// that scribbles over it gets wrong answers to its own calls only; the host
/// is fine, other forks are fine, and a reset restores it.
#[test]
fn scribbling_over_the_fast_path_page_hurts_only_that_fork_until_reset() {
    let m = master();
    let mut f = m.fork().unwrap();
    let mut other = m.fork().unwrap();
    let pid = f.vmcall("fast_getpid", &[]).unwrap();
    assert_eq!(pid, 2, "the guest's pid");
    let wrong = f.vmcall("scribble_fast_page", &[]).unwrap();
    assert_ne!(
        wrong, pid,
        "the dispatcher answered from the scribbled page"
    );
    assert_eq!(f.vmcall("fast_getpid", &[]).unwrap(), wrong);
    assert_eq!(other.vmcall("fast_getpid", &[]).unwrap(), pid);
    assert_eq!(f.vmcall("add", &[Arg::Int(1), Arg::Int(2)]).unwrap(), 3);
    f.reset().unwrap();
    assert_eq!(f.vmcall("fast_getpid", &[]).unwrap(), pid);
}

/// The exitless call slot shares that page: a call that tampers with it
/// still gets right answers to its own calls (the host checks a posted call
/// as one that arrives by an exit), other forks keep theirs, and a reset
/// restores it.
#[test]
fn scribbling_over_the_call_slot_hurts_only_that_fork_until_reset() {
    let m = master();
    let mut f = m.fork().unwrap();
    let mut other = m.fork().unwrap();
    let map = f.vmcall("call_map_word", &[]).unwrap();
    assert_eq!(f.vmcall("scribble_call_slot", &[]).unwrap(), 1);
    assert_eq!(f.vmcall("call_map_word", &[]).unwrap(), u64::MAX);
    assert_eq!(other.vmcall("call_map_word", &[]).unwrap(), map);
    assert_eq!(other.vmcall("add", &[Arg::Int(1), Arg::Int(2)]).unwrap(), 3);
    f.reset().unwrap();
    assert_eq!(f.vmcall("call_map_word", &[]).unwrap(), map);
    assert_eq!(f.vmcall("scribble_call_slot", &[]).unwrap(), 1);
}

/// Time read in the guest (vDSO) never goes backwards across calls, resets and
/// forks: every VM reads the same process-wide time function.
#[test]
fn guest_time_never_goes_backwards_across_resets_and_forks() {
    let m = master();
    let mut last = 0u64;
    let mut forks = [m.fork().unwrap(), m.fork().unwrap()];
    for round in 0..30 {
        let f = &mut forks[round % 2];
        let now = f.vmcall("monotonic_ns", &[]).unwrap();
        assert!(now >= last, "round {round}: {now} < {last}");
        last = now;
        if round % 3 == 0 {
            f.reset().unwrap();
        }
        if round % 10 == 9 {
            forks[round % 2] = m.fork().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
