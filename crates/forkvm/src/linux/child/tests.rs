use super::*;
use crate::linux::{test_call, test_process};

#[test]
fn the_first_processs_parent_is_alive_but_out_of_reach() {
    let (mut p, _m, _) = test_process();
    assert_eq!(kill(&mut p, super::super::process::PPID as i64, 0), Ok(0));
    assert_eq!(
        kill(&mut p, super::super::process::PPID as i64, 15),
        Err(Errno::EPERM)
    );
    assert_eq!(kill(&mut p, 4242, 0), Err(Errno::ESRCH));
    assert_eq!(kill(&mut p, 4242, 99), Err(Errno::EINVAL));
}

#[test]
fn ending_a_tree_waits_for_its_children() {
    let root = Tree::root(Config::default());
    assert!(root.untouched());
    let child = root.new_child().unwrap();
    assert!(!root.untouched());
    let watcher = std::thread::spawn(move || {
        while !child.tree.ended.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        child.exited(killed_status(9));
    });
    assert!(root.end_tree(Duration::from_secs(30)));
    assert_eq!(lock(&root.tree.inner).alive, 1);
    watcher.join().unwrap();
    // A child that never ends: the wait gives up.
    let root = Tree::root(Config::default());
    let _stuck = root.new_child().unwrap();
    assert!(!root.end_tree(Duration::from_millis(5)));
}

fn with_family() -> (Process, GuestMemory, u64) {
    let (mut p, m, buf) = test_process();
    p.family = Some(Tree::root(Config::default()));
    (p, m, buf)
}

fn family(p: &Process) -> &Family {
    p.family.as_ref().expect("family")
}

#[test]
fn without_a_tree_fork_is_enosys_and_with_one_it_asks_the_run_loop() {
    let (mut p, mut m, _) = test_process();
    assert_eq!(test_call(&mut p, &mut m, sys_fork, &[]), Err(Errno::ENOSYS));
    assert!(p.sched.is_none());
    let (mut p, mut m, _) = with_family();
    let pid = test_call(&mut p, &mut m, sys_fork, &[]).unwrap();
    match p.sched.take() {
        Some(Sched::Fork(req)) => assert_eq!(req.family.pid, pid),
        other => panic!("{other:?}"),
    }
    // CLONE_VM without CLONE_VFORK would share memory across VMs.
    assert_eq!(
        fork(&mut p, &mut m, CLONE_VM | SIGCHLD, 0, 0, 0, 0),
        Err(Errno::ENOSYS)
    );
}

#[test]
fn the_limit_counts_live_processes() {
    let (p, _, _) = with_family();
    let f = family(&p);
    f.tree.set_max(3);
    let a = f.new_child().unwrap();
    let b = f.new_child().unwrap();
    assert_eq!(f.new_child().unwrap_err(), Errno::EAGAIN);
    assert_ne!(a.pid, b.pid);
    assert_eq!(a.ppid(), PID_ROOT);
    b.abandon();
    let c = f.new_child().unwrap();
    // A zombie does not count; a reaped one is gone.
    a.exited(exit_status(0));
    let _d = f.new_child().unwrap();
    assert_eq!(f.new_child().unwrap_err(), Errno::EAGAIN);
    c.exited(exit_status(1));
}

const PID_ROOT: u64 = super::super::process::PID;

#[test]
fn wait4_reports_exit_and_kill_statuses() {
    let (mut p, mut m, buf) = with_family();
    // No family at all, or no children: ECHILD.
    let (mut lone, mut lm, lbuf) = test_process();
    assert_eq!(
        test_call(&mut lone, &mut lm, sys_wait4, &[u64::MAX, lbuf, 0]),
        Err(Errno::ECHILD)
    );
    assert_eq!(
        test_call(&mut p, &mut m, sys_wait4, &[u64::MAX, buf, WNOHANG]),
        Err(Errno::ECHILD)
    );
    let a = family(&p).new_child().unwrap();
    let b = family(&p).new_child().unwrap();
    // Running: WNOHANG gives 0, a blocking wait asks to be retried.
    assert_eq!(
        test_call(&mut p, &mut m, sys_wait4, &[u64::MAX, buf, WNOHANG]),
        Ok(0)
    );
    assert_eq!(
        test_call(&mut p, &mut m, sys_wait4, &[u64::MAX, buf, 0]),
        Ok(0)
    );
    assert!(matches!(p.sched.take(), Some(Sched::Retry(_))));
    p.waiting = None;
    a.exited(exit_status(7));
    b.exited(killed_status(9));
    // The parent was sent SIGCHLD (ignored by default).
    assert!(family(&p).signals.waiting());
    take_signals(&mut p);
    assert_eq!(p.exit_status, None);
    assert_eq!(
        test_call(&mut p, &mut m, sys_wait4, &[b.pid, buf, 0]),
        Ok(b.pid)
    );
    assert_eq!(m.read_u32(buf).unwrap(), 9);
    assert_eq!(
        test_call(&mut p, &mut m, sys_wait4, &[u64::MAX, buf, 0]),
        Ok(a.pid)
    );
    assert_eq!(m.read_u32(buf).unwrap(), 7 << 8);
    assert_eq!(
        test_call(&mut p, &mut m, sys_wait4, &[u64::MAX, buf, 0]),
        Err(Errno::ECHILD)
    );
}

#[test]
fn waitid_fills_siginfo() {
    let (mut p, mut m, buf) = with_family();
    let a = family(&p).new_child().unwrap();
    a.exited(exit_status(3));
    // P_PID, WEXITED | WNOWAIT: seen but left for the next wait.
    let args = [1, a.pid, buf, WEXITED | WNOWAIT];
    assert_eq!(test_call(&mut p, &mut m, sys_waitid, &args), Ok(0));
    assert_eq!(m.read_u32(buf).unwrap(), SIGCHLD as u32);
    assert_eq!(m.read_u32(buf + 8).unwrap(), 1); // CLD_EXITED
    assert_eq!(m.read_u32(buf + 16).unwrap(), a.pid as u32);
    assert_eq!(m.read_u32(buf + 24).unwrap(), 3);
    assert_eq!(
        test_call(&mut p, &mut m, sys_waitid, &[0, 0, buf, WEXITED]),
        Ok(0)
    );
    assert_eq!(
        test_call(&mut p, &mut m, sys_waitid, &[0, 0, buf, WEXITED | WNOHANG]),
        Err(Errno::ECHILD)
    );
    assert_eq!(
        test_call(&mut p, &mut m, sys_waitid, &[0, 0, buf, 0]),
        Err(Errno::EINVAL)
    );
}

#[test]
fn kill_reaches_a_child_at_its_next_call() {
    let (mut p, mut m, _) = with_family();
    let a = family(&p).new_child().unwrap();
    let mut child = Process::new(
        Default::default(),
        crate::memory::AddressSpace::new(0x40_0000, 0x70_0000),
        "/".into(),
        "/prog".into(),
    );
    child.family = Some(a.clone());
    assert_eq!(kill(&mut p, 999_999, 15), Err(Errno::ESRCH));
    assert_eq!(kill(&mut p, a.pid as i64, 0), Ok(0));
    assert_eq!(child.exit_status, None);
    assert_eq!(kill(&mut p, a.pid as i64, 15), Ok(0));
    take_signals(&mut child);
    assert_eq!(child.exit_status, Some(128 + 15));
    assert_eq!(child.killed_by, Some(15));
    // The parent was not hit.
    assert_eq!(p.exit_status, None);
    let _ = &mut m;
}

#[test]
fn process_groups_and_sessions() {
    let (mut p, mut m, _) = with_family();
    let a = family(&p).new_child().unwrap();
    assert_eq!(
        test_call(&mut p, &mut m, sys_getpgid, &[a.pid]),
        Ok(PID_ROOT)
    );
    assert_eq!(test_call(&mut p, &mut m, sys_setpgid, &[a.pid, 0]), Ok(0));
    assert_eq!(test_call(&mut p, &mut m, sys_getpgid, &[a.pid]), Ok(a.pid));
    // The first process is in its parent's session (as run from a
    // shell), and so is its child.
    let ppid = super::super::process::PPID;
    assert_eq!(test_call(&mut p, &mut m, sys_getsid, &[a.pid]), Ok(ppid));
    assert_eq!(test_call(&mut p, &mut m, sys_getsid, &[0]), Ok(ppid));
    // It leads its own group, so it may stay there but not make a session.
    assert_eq!(test_call(&mut p, &mut m, sys_setpgid, &[0, 0]), Ok(0));
    assert_eq!(
        test_call(&mut p, &mut m, sys_setsid, &[]),
        Err(Errno::EPERM)
    );
    assert_eq!(
        test_call(&mut p, &mut m, sys_setpgid, &[0, 424_242]),
        Err(Errno::EPERM)
    );
    // It may join its child's group, in the same session.
    assert_eq!(test_call(&mut p, &mut m, sys_setpgid, &[0, a.pid]), Ok(0));
    assert_eq!(test_call(&mut p, &mut m, sys_getpgrp, &[]), Ok(a.pid));
    assert_eq!(
        test_call(&mut p, &mut m, sys_setpgid, &[424_242, 0]),
        Err(Errno::ESRCH)
    );
    assert_eq!(
        test_call(&mut p, &mut m, sys_getppid, &[]),
        Ok(super::super::process::PPID)
    );
}
