//! The hardware-KVM syscall path (`out; sysretq` at LSTAR), forced. On real
//! VMX/SVM it runs at CPL0; on PVM its `out` faults at CPL3 and the host
//! decodes the #GP frame as the same syscall. Either way programs, calls and
//! resets must behave exactly as on the detected path.

use forkvm::builtin;
use forkvm::hypervisor::{Hypervisor, Platform};
use forkvm::machine::{Config, Machine, Outcome, ReadyAt};
use forkvm::master::Master;
use std::time::Duration;

#[test]
fn forced_hardware_path_runs_programs_and_calls() {
    // This test binary has one test, so setting the variable first is race-free.
    std::env::set_var(forkvm::hypervisor::platform::PLATFORM_ENV, "hardware");
    assert_eq!(Hypervisor::get().unwrap().platform, Platform::Hardware);

    let img = builtin::syscall_loop(50).unwrap();
    let cfg = Config {
        memory: 16 << 20,
        ..Config::default()
    };
    let mut m = Machine::new(&img, "/loop", cfg.clone()).unwrap();
    assert!(matches!(m.run().unwrap(), Outcome::Exited(0)));

    let c = builtin::callee().unwrap();
    let mut m = Machine::new(&c.image, "/callee", cfg).unwrap();
    assert!(matches!(
        m.run_until_ready(&ReadyAt::Call).unwrap(),
        Outcome::Ready
    ));
    let master = Master::from_machine(m).unwrap();
    let mut f = master.fork().unwrap();
    let t = Duration::from_secs(5);
    for _ in 0..3 {
        assert_eq!(
            f.vmcall_addr(c.write_pages, &[forkvm::machine::Arg::Int(4)], t)
                .unwrap(),
            4
        );
        assert_eq!(f.vmcall_addr(c.noop, &[], t).unwrap(), 0);
        f.reset().unwrap();
    }
}
