use super::*;

/// python's test_time saw ENOSYS; an unprivileged user gets EPERM for
/// the settable clock and EINVAL for the others.
#[test]
fn clock_settime_answers_as_for_an_unprivileged_user() {
    let (mut p, mut m, buf) = crate::linux::test_process();
    m.write(buf, &[0u8; 16]).unwrap();
    let call = |p: &mut Process, m: &mut GuestMemory, a: &[u64]| {
        crate::linux::test_call(p, m, sys_clock_settime, a)
    };
    assert_eq!(call(&mut p, &mut m, &[0, buf]), Err(Errno::EPERM));
    assert_eq!(call(&mut p, &mut m, &[1, buf]), Err(Errno::EINVAL));
    assert_eq!(call(&mut p, &mut m, &[0, 0]), Err(Errno::EFAULT));
    assert_eq!(call(&mut p, &mut m, &[99, buf]), Err(Errno::EINVAL));
    m.write(buf + 8, &(NSEC_PER_SEC as u64).to_le_bytes())
        .unwrap();
    assert_eq!(call(&mut p, &mut m, &[0, buf]), Err(Errno::EINVAL));
    assert_eq!(
        crate::linux::test_call(&mut p, &mut m, sys_settimeofday, &[0, 0]),
        Err(Errno::EPERM)
    );
}

#[test]
fn posix_timers_arm_fire_and_delete() {
    let (mut p, mut m, buf) = crate::linux::test_process();
    let (sev, idp, spec) = (buf, buf + 0x100, buf + 0x200);
    // SIGEV_SIGNAL with SIGUSR1 on CLOCK_MONOTONIC.
    let mut e = [0u8; 64];
    e[8..12].copy_from_slice(&10u32.to_le_bytes());
    m.write(sev, &e).unwrap();
    assert_eq!(
        sys_timer_create(&mut p, &mut m, &[1, sev, idp, 0, 0, 0]),
        Ok(0)
    );
    let id = u64::from(m.read_u32(idp).unwrap());
    assert_eq!(id, 0);
    // NULL sigevent: SIGALRM; the next id.
    assert_eq!(
        sys_timer_create(&mut p, &mut m, &[0, 0, idp, 0, 0, 0]),
        Ok(0)
    );
    assert_eq!(m.read_u32(idp), Ok(1));
    // Bad clocks, notifications, signals and pointers.
    assert_eq!(
        sys_timer_create(&mut p, &mut m, &[42, 0, idp, 0, 0, 0]),
        Err(Errno::EINVAL)
    );
    e[12..16].copy_from_slice(&7u32.to_le_bytes());
    m.write(sev, &e).unwrap();
    assert_eq!(
        sys_timer_create(&mut p, &mut m, &[1, sev, idp, 0, 0, 0]),
        Err(Errno::EINVAL)
    );
    e[12..16].copy_from_slice(&4u32.to_le_bytes()); // SIGEV_THREAD_ID, unknown tid
    e[16..20].copy_from_slice(&9999u32.to_le_bytes());
    m.write(sev, &e).unwrap();
    assert_eq!(
        sys_timer_create(&mut p, &mut m, &[1, sev, idp, 0, 0, 0]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        sys_timer_create(&mut p, &mut m, &[1, 0, 0, 0, 0, 0]),
        Err(Errno::EFAULT)
    );
    assert_eq!(p.posix_timers.map.len(), 2, "failed calls create nothing");
    // Arm: 1 ns, periodic 1 s.
    let mut s = [0u8; 32];
    s[0..8].copy_from_slice(&1u64.to_le_bytes());
    s[24..32].copy_from_slice(&1u64.to_le_bytes());
    m.write(spec, &s).unwrap();
    assert_eq!(
        sys_timer_settime(&mut p, &mut m, &[id, 0, spec, 0, 0, 0]),
        Ok(0)
    );
    std::thread::sleep(std::time::Duration::from_millis(2));
    p.sigactions[9].handler = 0x1234; // a handler for SIGUSR1
    assert!(fire_posix_timers(&mut p));
    assert_eq!(p.pending_signal.map(|i| (i.signo, i.code)), Some((10, -2)));
    assert!(!fire_posix_timers(&mut p), "next expiry is a second away");
    assert_eq!(
        sys_timer_gettime(&mut p, &mut m, &[id, spec + 0x40, 0, 0, 0, 0]),
        Ok(0)
    );
    assert_eq!(m.read_u64(spec + 0x40), Ok(1), "interval");
    assert!(p.next_timer_due().is_some());
    assert_eq!(
        sys_timer_getoverrun(&mut p, &mut m, &[id, 0, 0, 0, 0, 0]),
        Ok(0)
    );
    assert_eq!(
        sys_timer_delete(&mut p, &mut m, &[id, 0, 0, 0, 0, 0]),
        Ok(0)
    );
    assert_eq!(
        sys_timer_delete(&mut p, &mut m, &[id, 0, 0, 0, 0, 0]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        sys_timer_gettime(&mut p, &mut m, &[id, spec, 0, 0, 0, 0]),
        Err(Errno::EINVAL)
    );
    assert_eq!(p.next_timer_due(), None, "timer 1 was never armed");
    assert_eq!(
        sys_timer_settime(&mut p, &mut m, &[1, 0, 0, 0, 0, 0]),
        Err(Errno::EFAULT)
    );
    assert_eq!(
        sys_timer_settime(&mut p, &mut m, &[1, 2, spec, 0, 0, 0]),
        Err(Errno::EINVAL)
    );
}

#[test]
fn huge_times_saturate_instead_of_panicking() {
    let (mut p, mut m, buf) = crate::linux::test_process();
    m.write_u64(buf, i64::MAX as u64).unwrap();
    m.write_u64(buf + 8, 0).unwrap();
    m.write_u64(buf + 16, i64::MAX as u64).unwrap();
    m.write_u64(buf + 24, 0).unwrap();
    assert_eq!(sys_setitimer(&mut p, &mut m, &[0, buf, 0, 0, 0, 0]), Ok(0));
    assert!(p.itimer.is_some());
    assert_eq!(
        sys_timer_create(&mut p, &mut m, &[1, 0, buf + 0x100, 0, 0, 0]),
        Ok(0)
    );
    assert_eq!(
        sys_timer_settime(&mut p, &mut m, &[0, 0, buf, 0, 0, 0]),
        Ok(0)
    );
    assert_eq!(
        sys_timer_settime(&mut p, &mut m, &[0, 1, buf, 0, 0, 0]),
        Ok(0)
    );
    assert!(!fire_posix_timers(&mut p));
}

#[test]
fn times_and_rusage_write_their_structs() {
    let (mut p, mut m, buf) = crate::linux::test_process();
    m.write(buf, &[0xff; 144]).unwrap();
    assert!(sys_times(&mut p, &mut m, &[buf, 0, 0, 0, 0, 0]).unwrap() > 0);
    assert_eq!(m.read_u64(buf + 8).unwrap(), 0, "system time");
    assert_eq!(
        sys_times(&mut p, &mut m, &[0, 0, 0, 0, 0, 0]).map(|_| ()),
        Ok(())
    );
    assert_eq!(sys_getrusage(&mut p, &mut m, &[0, buf, 0, 0, 0, 0]), Ok(0));
    assert_eq!(
        sys_getrusage(&mut p, &mut m, &[7, buf, 0, 0, 0, 0]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        sys_getrusage(&mut p, &mut m, &[0, 0, 0, 0, 0, 0]),
        Err(Errno::EFAULT)
    );
    // RUSAGE_CHILDREN as a 32-bit -1 (python passes it so): no children
    // have been waited for, so zeros.
    m.write(buf, &[0xff; 16]).unwrap();
    assert_eq!(
        sys_getrusage(&mut p, &mut m, &[0xffff_ffff, buf, 0, 0, 0, 0]),
        Ok(0)
    );
    assert_eq!(m.read_u64(buf).unwrap(), 0, "children's user time");
    // rt_sigpending: what waits while blocked.
    p.sigmask = 1 << 16;
    let _ = crate::linux::signal::send(&mut p, crate::linux::signal::SigInfo::kernel(17));
    let set = crate::linux::table::lookup(127).expect("rt_sigpending");
    assert_eq!((set.handler)(&mut p, &mut m, &[buf, 8, 0, 0, 0, 0]), Ok(0));
    assert_eq!(m.read_u64(buf).unwrap(), 1 << 16);
    assert_eq!(
        (set.handler)(&mut p, &mut m, &[buf, 4, 0, 0, 0, 0]),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        (set.handler)(&mut p, &mut m, &[0, 8, 0, 0, 0, 0]),
        Err(Errno::EFAULT)
    );
}

/// The clocks Linux cannot sleep on are EOPNOTSUPP, before the request is
/// read (LTP's clock_nanosleep01 got EINVAL); CLOCK_TAI sleeps, relative
/// and absolute; an unknown clock is EINVAL.
#[test]
fn clock_nanosleep_refuses_the_clocks_linux_cannot_sleep_on() {
    let (mut p, mut m, buf) = crate::linux::test_process();
    let call = |p: &mut Process, m: &mut GuestMemory, a: &[u64]| {
        crate::linux::test_call(p, m, sys_clock_nanosleep, a)
    };
    for id in 3..=6 {
        assert_eq!(
            call(&mut p, &mut m, &[id, 0, 0, 0]),
            Err(Errno::EOPNOTSUPP),
            "clock {id}"
        );
    }
    assert_eq!(call(&mut p, &mut m, &[100, 0, buf, 0]), Err(Errno::EINVAL));
    // 1 ms on CLOCK_TAI, relative; then absolute, at a time already past.
    m.write(buf, &0u64.to_le_bytes()).unwrap();
    m.write(buf + 8, &1_000_000u64.to_le_bytes()).unwrap();
    assert_eq!(call(&mut p, &mut m, &[11, 0, buf, 0]), Ok(0));
    assert_eq!(call(&mut p, &mut m, &[11, TIMER_ABSTIME, buf, 0]), Ok(0));
}

#[test]
fn each_thread_counts_only_the_cpu_time_it_ran() {
    use super::posix::ThreadCpu;
    use std::time::Duration;
    let ms = Duration::from_millis;
    let mut c = ThreadCpu::default();
    // Thread 1 runs 0..10 ms, thread 2 10..40 ms, thread 1 again from 40 ms.
    c.switch(1, ms(10), |_| true);
    c.switch(2, ms(40), |_| true);
    assert_eq!(
        c.of(1, 1, ms(45)),
        ms(15),
        "the running thread: its share so far"
    );
    assert_eq!(
        c.of(2, 1, ms(45)),
        ms(30),
        "a waiting thread's clock stands still"
    );
    assert_eq!(c.of(3, 1, ms(45)), ms(0), "a thread that never ran");
    // Many short-lived threads: the dead ones are forgotten, the live kept.
    for tid in 10..400 {
        c.switch(tid, ms(50), |t| t == 2 || t == 1);
    }
    assert_eq!(c.of(2, 1, ms(50)), ms(30));
    assert!(c.of(300, 1, ms(50)) <= ms(10));
}
