//! Exitless host calls: a host poller thread answers system calls the guest
//! posts to its call slot, while the vCPU keeps running (see
//! `forkvm_abi::exitless` for the guest's side and
//! [`crate::linux::exitless`] for which calls qualify).
//!
//! On PVM a VM exit and re-entry costs ~40 µs, while a guest spinning on a
//! page that a host thread polls gets its answer in ~2.5 µs. So:
//!
//! - **One poller per host process**, shared by every VM in it: two
//!   threads that serve the VMs' slots one after another (a call takes a
//!   few µs, so one thread keeps up with many VMs). `forkvm-poller` runs at
//!   the normal priority and takes its fair share on a busy host;
//!   `forkvm-linger` runs in the idle class (`SCHED_IDLE`): it only gets a
//!   core nothing else wants, so it can keep watching long after the last
//!   call at no cost to anyone.
//! - **Lending.** A machine owns its process state; it lends it to the
//!   poller only while its vCPU thread is inside `KVM_RUN`
//!   ([`Exitless::lend`]), and takes it back, waiting for a call being
//!   served, before it looks at the state again.
//! - **Sleeping.** Each thread spins while there is work: a call served,
//!   or a VM entered whose guest made calls it could answer, within the
//!   last [`WINDOW`] (the normal thread) or [`LINGER`] (the idle one). Then
//!   it sleeps until such a VM enters again; the last one to sleep tells
//!   every VM that no one is watching (the slot's `CALL_AWAKE` word, which
//!   the guest reads before it posts and while it waits). A VM whose
//!   program makes no such calls never wakes them. While the normal thread
//!   waits for work it yields its core at every round, so on a host with
//!   more runnable threads than cores the vCPUs and the HTTP side run first
//!   (p99 of the epoll server at `wrk -c1`: 1.0 → 0.68 ms). A woken thread
//!   says it watches only once it runs: until then the guest's calls exit
//!   rather than wait in vain. Waking takes long here (100-250 µs on PVM,
//!   the idle core has to be woken first), and with only the normal thread
//!   a quiet spell of 200 µs between two requests was enough for a request
//!   to make all its calls through exits (`bench/servers.sh`, reset per
//!   request, with it: epoll 0.34 → 0.25 ms, Go 0.56-0.62 → 0.39-0.40 ms). A longer
//!   window at the normal priority gained less (1 ms or 5 ms: epoll 0.28 ms,
//!   p99 0.73 against 0.43 ms), as its spinning takes cores from wrk and
//!   the HTTP side.
//! - **Bounded guest spin.** A guest waits at most `CALL_SPIN` pause rounds
//!   (calibrated to [`GUEST_SPIN`]) for a claim, then cancels and exits.
//!   Once a poller has claimed the call (the guest sees POSTED cleared) it
//!   waits `CALL_ANSWER_SPIN` rounds (four budgets) for the answer, then
//!   leaves through the exit with `hypercall::AWAIT_ANSWER`:
//!   by the time the vCPU thread has taken the state back, the poller is
//!   done, and the run loop finishes the call
//!   ([`Exitless::take_awaited`]). A poller that lost its core in the
//!   middle of a call (always possible for the idle-class thread) then
//!   gets the core the vCPU gave up, instead of a guest spinning on it.
//! - **Backing off.** A cancel means no poller got a CPU in time (more
//!   runnable threads than cores). Each served call earns the machine a
//!   credit (up to [`CREDIT_CAP`]) and each cancel costs [`VAIN_COST`];
//!   when the credit runs out the machine stops posting for [`BACKOFF`],
//!   twice as long after each further time (up to [`MAX_BACKOFF`]), so on
//!   a busy host spinning soon stops competing with vCPUs and calls take
//!   the exit as before. A rare miss among many served calls costs only
//!   its own spin. After a pause the machine starts again with half the
//!   credit: with none, a request that began while the poller had no core
//!   (node's, beside the previous request's reset) backed off at its first
//!   miss, earned nothing, and left the next request to do the same; half
//!   of node's requests exited every call (`bench/js.sh` hello 2.4-2.8 →
//!   2.0-2.5 ms, alternating; the C, Go and Rust servers unchanged).
//! - **Settling at exits.** When the vCPU leaves the guest while a call is
//!   posted or answered but not yet picked up (a timer kick during the
//!   spin), [`Exitless::settle`] finishes the guest's side first: the
//!   answer goes into RAX, or the call is cancelled to the exit path. No
//!   call stays in the slot across a thread switch or a signal frame.

use crate::hypervisor::Vcpu;
use crate::linux::{self, Process};
use crate::memory::GuestMemory;
use forkvm_abi::{self as abi, entry, exitless as state, fast};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long the normal-priority poller thread keeps spinning after the
/// last sign of work.
pub const WINDOW: Duration = Duration::from_micros(200);
/// How long the idle-class poller thread keeps spinning after the last sign
/// of work (see "Sleeping"): it costs no one a core, only power.
pub const LINGER: Duration = Duration::from_millis(5);
/// About how long a guest waits for a poller before it takes the exit (a
/// served call takes 2-7 µs; an exit ~40 µs on PVM).
pub const GUEST_SPIN: Duration = Duration::from_micros(15);
/// How long a machine first stops posting after its guest waited in vain
/// (no poller got a CPU in time: the host is oversubscribed). Doubled at
/// each new vain wait up to [`MAX_BACKOFF`], halved back as calls succeed.
pub const BACKOFF: Duration = Duration::from_millis(1);
/// The longest pause in posting.
pub const MAX_BACKOFF: Duration = Duration::from_millis(640);
/// Credits a cancelled call costs, where a served call earns one. A served
/// call saves an exit (~30 µs on PVM) and a vain wait wastes [`GUEST_SPIN`]
/// plus the bookkeeping, so posting pays while at least ~1 call in 3 is
/// served; asking for 4 in 5 keeps a margin.
pub const VAIN_COST: u64 = 4;
/// The most credit a machine keeps: a machine that was served well backs
/// off after a quarter of this many cancels without a served call between.
pub const CREDIT_CAP: u64 = 64;

fn slot(off: u64) -> u64 {
    abi::FAST_DATA_ADDR + off
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The state a machine lends while its vCPU runs.
struct Lent {
    proc: NonNull<Process>,
    mem: NonNull<GuestMemory>,
    /// The machine wants its calls posted (it is not backing off).
    post: bool,
    /// The host stops the run at the answer it waits for (see
    /// `linux::exitless::serve`).
    output_watched: bool,
}

// SAFETY: Process and GuestMemory are Send (both are moved between threads
// by `forkvm serve`); the pointers are only dereferenced by the poller while
// it holds the link's lock and the lender is inside `Exitless::lend`, which
// keeps both mutably borrowed and takes the same lock before it returns.
unsafe impl Send for Lent {}

/// One machine's link to the poller.
struct Link {
    lent: Mutex<Option<Lent>>,
    served: AtomicU64,
}

impl Link {
    /// Serves the call posted in the lent VM's slot, if there is one;
    /// `watching`: the poller goes on running (it tells the guest so).
    fn poll(&self, watching: bool) -> bool {
        let Ok(guard) = self.lent.try_lock() else {
            return false;
        };
        let Some(lent) = guard.as_ref() else {
            return false;
        };
        // SAFETY: see `Lent`: the lender is blocked in `lend` until it gets
        // this lock, so nothing else uses the state while we hold it.
        let (proc, mem) = unsafe { (&mut *lent.proc.as_ptr(), &mut *lent.mem.as_ptr()) };
        if lent.post && watching {
            // A running poller tells the guest it watches (see `Exitless::lend`).
            if let Some(w) = mem.kernel_atomic_u64(slot(fast::CALL_AWAKE)) {
                if w.load(Ordering::Relaxed) == 0 {
                    w.store(1, Ordering::SeqCst);
                }
            }
        }
        let Some(st) = mem.kernel_atomic_u64(slot(fast::CALL_STATE)) else {
            return false;
        };
        if st.load(Ordering::Acquire) & state::POSTED == 0
            || st.fetch_and(!state::POSTED, Ordering::AcqRel) & state::POSTED == 0
        {
            return false;
        }
        if let Some(pause) = claimed_pause() {
            std::thread::sleep(pause);
        }
        let call = read_call(mem);
        let answer = call.and_then(|(nr, args)| {
            linux::exitless::serve(proc, mem, nr, &args, lent.output_watched)
        });
        tracing::trace!("poller: call {:?} answered {answer:?}", call.map(|c| c.0));
        let done = match answer {
            Some(v) if mem.kernel_write_u64(slot(fast::CALL_RESULT), v).is_ok() => {
                self.served.fetch_add(1, Ordering::Relaxed);
                state::DONE
            }
            _ => state::DECLINED,
        };
        if let Some(st) = mem.kernel_atomic_u64(slot(fast::CALL_STATE)) {
            st.store(done, Ordering::Release);
        }
        true
    }

    /// Tells the lent VM, if any, whether a poller is watching.
    fn set_awake(&self, awake: bool) {
        let Ok(guard) = self.lent.try_lock() else {
            return;
        };
        if let Some(lent) = guard.as_ref() {
            // SAFETY: as in `poll`.
            let mem = unsafe { lent.mem.as_ref() };
            if let Some(w) = mem.kernel_atomic_u64(slot(fast::CALL_AWAKE)) {
                // SeqCst (a locked exchange): ordered before the poller's
                // last look at the slot; see `Poller::run`.
                w.store(u64::from(awake), Ordering::SeqCst);
            }
        }
    }
}

/// For tests only: `FORKVM_POLLER_DELAY_US` makes the poller wait this long
/// after claiming each call, as a poller that lost its core would.
fn claimed_pause() -> Option<Duration> {
    static PAUSE: OnceLock<Option<Duration>> = OnceLock::new();
    *PAUSE.get_or_init(|| {
        let us = std::env::var("FORKVM_POLLER_DELAY_US").ok()?.parse().ok()?;
        Some(Duration::from_micros(us))
    })
}

/// The call number and arguments posted in the slot.
fn read_call(mem: &GuestMemory) -> Option<(u64, linux::Args)> {
    let nr = mem.kernel_read_u64(slot(fast::CALL_NR)).ok()?;
    let mut args = [0u64; 6];
    for (i, a) in args.iter_mut().enumerate() {
        *a = mem
            .kernel_read_u64(slot(fast::CALL_ARGS + 8 * i as u64))
            .ok()?;
    }
    Some((nr, args))
}

/// One thread of the poller: how it sleeps.
struct Watcher {
    name: &'static str,
    /// Spins this long after its last sign of work, then sleeps.
    window: Duration,
    /// It sleeps (or is about to). Cleared only by the thread itself once
    /// it runs again, so that a VM entering meanwhile does not tell its
    /// guest someone watches before anyone does.
    asleep: AtomicBool,
    /// A VM asked it to run (guarded: the condvar's flag).
    sleep: Mutex<bool>,
    wake: Condvar,
}

impl Watcher {
    fn new(name: &'static str, window: Duration) -> Self {
        Self {
            name,
            window,
            asleep: AtomicBool::new(false),
            sleep: Mutex::new(false),
            wake: Condvar::new(),
        }
    }
}

/// The process-wide poller: two threads serving the same slots (see the
/// module's "Sleeping").
struct Poller {
    links: Mutex<Vec<Arc<Link>>>,
    /// Bumped when `links` changes, so the threads refresh their copies.
    generation: AtomicU64,
    /// Bumped by every VM entry that wants calls served: a sign of work.
    entries: AtomicU64,
    /// [`ACTIVE`] and [`LINGERING`].
    watchers: [Watcher; 2],
    /// Guest pause rounds in [`GUEST_SPIN`].
    spin_rounds: u64,
    /// Guest pause rounds it waits for a claimed call's answer.
    answer_rounds: u64,
    /// Never sleep: guests were told to wait for the poller however long it
    /// takes (`FORKVM_POLLER_SPIN_US=0`), and tests that do so count on
    /// every listed call being posted, whatever the machine's load.
    stays_awake: bool,
}

/// The watcher at the normal priority, which sleeps [`WINDOW`] after work.
const ACTIVE: usize = 0;
/// The watcher at idle priority, which sleeps [`LINGER`] after work.
const LINGERING: usize = 1;

fn poller() -> Option<&'static Poller> {
    static POLLER: OnceLock<Option<&'static Poller>> = OnceLock::new();
    *POLLER.get_or_init(|| {
        let spin_rounds = calibrate_spin();
        let p: &'static Poller = Box::leak(Box::new(Poller {
            links: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            entries: AtomicU64::new(0),
            watchers: [
                Watcher::new("forkvm-poller", WINDOW),
                Watcher::new("forkvm-linger", LINGER),
            ],
            spin_rounds,
            answer_rounds: answer_rounds(spin_rounds),
            stays_awake: spin_rounds == u64::MAX,
        }));
        tracing::debug!(
            "exitless poller: guests spin {} pause rounds",
            p.spin_rounds
        );
        if let Err(e) = p.start(ACTIVE) {
            tracing::warn!("cannot start the exitless-call poller ({e}); every call exits");
            return None;
        }
        if let Err(e) = p.start(LINGERING) {
            // Only the quick answers right after a quiet spell are lost.
            tracing::debug!("exitless poller: no idle-priority thread ({e})");
            p.watchers[LINGERING].asleep.store(true, Ordering::SeqCst);
        }
        Some(p)
    })
}

/// Puts the calling thread in the `SCHED_IDLE` class: it runs only on a
/// core nothing else wants. Going back needs a privilege, so a thread that
/// asks this keeps it.
fn idle_priority() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid, initialised
    // struct that outlives the call, which only reads it.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Pause rounds that take about [`GUEST_SPIN`] on this CPU (the guest's
/// `pause` runs natively, at the host's speed), or what
/// `FORKVM_POLLER_SPIN_US` asks for: 0 makes guests wait for the poller
/// however long it takes, and keeps the poller from sleeping, so a test can
/// count on it on a loaded machine.
fn calibrate_spin() -> u64 {
    match std::env::var("FORKVM_POLLER_SPIN_US")
        .ok()
        .map(|v| v.parse::<u64>())
    {
        Some(Ok(0)) => u64::MAX,
        Some(Ok(us)) => rounds_in(Duration::from_micros(us)),
        Some(Err(_)) => {
            tracing::warn!("FORKVM_POLLER_SPIN_US is not a number of µs; using the default");
            rounds_in(GUEST_SPIN)
        }
        None => rounds_in(GUEST_SPIN),
    }
}

/// How many pause rounds a guest waits for the answer to a call a poller
/// has claimed: four times its budget for a claim, or, for tests,
/// `FORKVM_POLLER_ANSWER_US` µs whatever that budget is.
fn answer_rounds(spin_rounds: u64) -> u64 {
    match std::env::var("FORKVM_POLLER_ANSWER_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        Some(us) => rounds_in(Duration::from_micros(us)),
        None => spin_rounds.saturating_mul(4),
    }
}

/// Pause rounds that take about `budget` on this CPU.
fn rounds_in(budget: Duration) -> u64 {
    const ROUNDS: u32 = 2_000;
    let start = Instant::now();
    for _ in 0..ROUNDS {
        std::hint::spin_loop();
    }
    let per_round = start.elapsed().as_nanos().max(1) as f64 / f64::from(ROUNDS);
    ((budget.as_nanos() as f64 / per_round) as u64).clamp(64, 1 << 24)
}

impl Poller {
    /// Starts watcher `me`'s thread; the lingering one is in the idle class
    /// before this returns (the host's seccomp filter, installed later,
    /// does not allow the call).
    fn start(&'static self, me: usize) -> std::io::Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name(self.watchers[me].name.into())
            .spawn(move || {
                let set = if me == LINGERING {
                    idle_priority()
                } else {
                    Ok(())
                };
                let ok = set.is_ok();
                let _ = tx.send(set);
                if ok {
                    self.run(me)
                }
            })?;
        rx.recv()
            .map_err(|_| std::io::Error::other("the thread ended"))?
    }

    /// Whether any watcher is awake.
    fn watching(&self) -> bool {
        self.watchers
            .iter()
            .any(|w| !w.asleep.load(Ordering::SeqCst))
    }

    fn run(&self, me: usize) {
        let w = &self.watchers[me];
        let mut links: Vec<Arc<Link>> = Vec::new();
        let mut generation = u64::MAX;
        let mut entries = 0;
        let mut last_work = Instant::now();
        loop {
            let g = self.generation.load(Ordering::Acquire);
            if g != generation {
                generation = g;
                links = lock(&self.links).clone();
            }
            let mut busy = false;
            for c in &links {
                busy |= c.poll(true);
            }
            let e = self.entries.load(Ordering::Relaxed);
            if e != entries {
                entries = e;
                busy = true;
            }
            if busy {
                last_work = Instant::now();
            } else if !self.stays_awake && last_work.elapsed() > w.window {
                let mut guard = lock(&w.sleep);
                w.asleep.store(true, Ordering::SeqCst);
                // The last watcher to sleep tells the guests. Each stores
                // its flag before it looks at the other's (both SeqCst), so
                // of two going to sleep at once at least one sees the other.
                let mut late = false;
                if !self.watching() {
                    for c in &links {
                        c.set_awake(false);
                    }
                    // A guest that saw the word set just before it was
                    // cleared may have posted since; it looks at the word
                    // again while it waits, and we look at the slots again
                    // here (both after a full barrier), so one of us sees
                    // the other.
                    for c in &links {
                        late |= c.poll(false);
                    }
                }
                // A VM that entered between our last look at `entries` and
                // `asleep` being set did not wake us: look once more.
                if !late && self.entries.load(Ordering::SeqCst) == entries {
                    while !*guard {
                        guard = w.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
                    }
                }
                *guard = false;
                w.asleep.store(false, Ordering::SeqCst);
                drop(guard);
                last_work = Instant::now();
                continue;
            }
            // Nothing to do right now: let any other thread waiting for
            // this core (a vCPU, the HTTP side) run first. With nothing
            // else runnable this returns at once.
            std::thread::yield_now();
        }
    }

    /// A VM is about to enter: wake the watchers that sleep.
    fn entering(&self) {
        self.entries.fetch_add(1, Ordering::SeqCst);
        for w in &self.watchers {
            if w.asleep.load(Ordering::SeqCst) {
                *lock(&w.sleep) = true;
                w.wake.notify_one();
            }
        }
    }

    fn add(&self, link: Arc<Link>) {
        lock(&self.links).push(link);
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn remove(&self, link: &Arc<Link>) {
        lock(&self.links).retain(|c| !Arc::ptr_eq(c, link));
        self.generation.fetch_add(1, Ordering::Release);
    }
}

/// See [`Exitless::take_awaited`].
pub(crate) enum Awaited {
    /// The poller's answer.
    Answer(u64),
    /// The poller declined call number `.0`: the exit path makes it.
    Call(u64),
}

/// A machine's use of exitless calls.
pub(crate) struct Exitless {
    link: Arc<Link>,
    poller: &'static Poller,
    /// The guest's cancel count when last looked at.
    cancels: std::cell::Cell<u64>,
    /// No posting before this instant.
    backoff_until: std::cell::Cell<Option<Instant>>,
    /// The next pause in posting.
    backoff: std::cell::Cell<Duration>,
    /// Calls served when last looked at.
    served_seen: std::cell::Cell<u64>,
    /// Served calls earned, cancels spent (see [`VAIN_COST`]).
    credit: std::cell::Cell<u64>,
    /// The guest has made calls the poller could answer since the last
    /// entry (served ones, or ones that took the exit): only then does an
    /// entry wake the poller, so a VM that makes none costs no spinning.
    demand: std::cell::Cell<bool>,
    /// [`linux::exitless::call_map`].
    map: [u8; fast::CALL_MAP_SIZE as usize],
    /// Guest accesses done by the run loop because a served call had mapped
    /// memory in a chunk that got its memory slot only at the next entry.
    late_slots: std::cell::Cell<u64>,
    /// See [`Self::take_awaited`].
    awaited: std::cell::Cell<u64>,
}

impl Exitless {
    /// Joins the poller and writes the slot's constants (the call map and
    /// the spin budget) into the data page where they differ. `None` when
    /// no poller can run; calls then exit as before.
    pub fn new(mem: &mut GuestMemory) -> Option<Self> {
        let poller = poller()?;
        let map = linux::exitless::call_map();
        let at = slot(fast::CALL_MAP);
        if mem.kernel_read(at, map.len() as u64).ok()? != map {
            mem.kernel_write(at, &map).ok()?;
        }
        for (off, rounds) in [
            (fast::CALL_SPIN, poller.spin_rounds),
            (fast::CALL_ANSWER_SPIN, poller.answer_rounds),
        ] {
            // Written only where they differ: a fork's page stays shared.
            if mem.kernel_read_u64(slot(off)).ok()? != rounds {
                mem.kernel_write_u64(slot(off), rounds).ok()?;
            }
        }
        let link = Arc::new(Link {
            lent: Mutex::new(None),
            served: AtomicU64::new(0),
        });
        poller.add(link.clone());
        let cancels = mem.kernel_read_u64(slot(fast::CALL_CANCELS)).ok()?;
        Some(Self {
            link,
            poller,
            cancels: std::cell::Cell::new(cancels),
            backoff_until: std::cell::Cell::new(None),
            backoff: std::cell::Cell::new(BACKOFF),
            served_seen: std::cell::Cell::new(0),
            credit: std::cell::Cell::new(0),
            demand: std::cell::Cell::new(false),
            map,
            late_slots: std::cell::Cell::new(0),
            awaited: std::cell::Cell::new(0),
        })
    }

    /// The run loop serves call `nr` through an exit: if the poller could
    /// have answered it, the next entry wakes the poller.
    pub fn exit_call(&self, nr: u64) {
        let listed = usize::try_from(nr)
            .ok()
            .and_then(|n| self.map.get(n / 8).map(|b| b & (1 << (n % 8)) != 0));
        if listed == Some(true) {
            self.demand.set(true);
        }
    }

    /// Runs `run` (the vCPU inside `KVM_RUN`) with `proc` and `mem` lent to
    /// the poller, and takes them back before returning, waiting for a call
    /// the poller is serving. `output_watched`: the host looks for the
    /// program's answer between exits, so what sends it must exit.
    pub fn lend<R>(
        &self,
        proc: &mut Process,
        mem: &mut GuestMemory,
        output_watched: bool,
        run: impl FnOnce() -> R,
    ) -> R {
        struct Revoke<'a>(&'a Link);
        impl Drop for Revoke<'_> {
            fn drop(&mut self) {
                *lock(&self.0.lent) = None;
            }
        }
        let post = self.may_post(mem);
        // A sleeping poller takes a while to run again: the guest's first
        // calls would wait for it in vain. It sets the word itself once it
        // runs; until then calls exit.
        let awake = u64::from(post && self.poller.watching());
        let at = slot(fast::CALL_AWAKE);
        if mem.kernel_read_u64(at).ok() != Some(awake) {
            let _ = mem.kernel_write_u64(at, awake);
        }
        *lock(&self.link.lent) = Some(Lent {
            proc: NonNull::from(proc),
            mem: NonNull::from(mem),
            post,
            output_watched,
        });
        let _revoke = Revoke(&self.link);
        if post && self.demand.replace(false) {
            self.poller.entering();
        }
        run()
    }

    /// Whether the guest should post calls during the coming run: not while
    /// backing off after its guest waited in vain too often (see
    /// [`VAIN_COST`] and [`BACKOFF`]).
    fn may_post(&self, mem: &GuestMemory) -> bool {
        let cancels = mem.kernel_read_u64(slot(fast::CALL_CANCELS)).unwrap_or(0);
        // The count only grows while the program runs; a reset puts back the
        // snapshot's (lower) count, which is no sign of anything. The guest
        // can write the count: it can only make its own calls exit.
        let vain = cancels.saturating_sub(self.cancels.replace(cancels));
        let served = self.served();
        let new = served.wrapping_sub(self.served_seen.replace(served));
        let pause = self.backoff.get();
        if new > 0 {
            self.demand.set(true);
            if pause > BACKOFF {
                self.backoff.set((pause / 2).max(BACKOFF));
            }
        }
        let credit = self.credit.get().saturating_add(new).min(CREDIT_CAP);
        let spent = vain.saturating_mul(VAIN_COST);
        if spent > credit {
            tracing::trace!("exitless: the guest waited in vain; no posting for {pause:?}");
            self.credit.set(CREDIT_CAP / 2);
            self.backoff_until.set(Some(Instant::now() + pause));
            self.backoff.set((pause * 2).min(MAX_BACKOFF));
            return false;
        }
        self.credit.set(credit - spent);
        match self.backoff_until.get() {
            Some(until) if Instant::now() < until => false,
            Some(_) => {
                self.backoff_until.set(None);
                true
            }
            None => true,
        }
    }

    /// Counts an access the run loop did for a chunk a served call mapped
    /// (see `GuestMemory::in_used_chunk`).
    pub fn late_slot(&self) {
        self.late_slots.set(self.late_slots.get() + 1);
    }

    /// How many such accesses the run loop did.
    pub fn late_slots(&self) -> u64 {
        self.late_slots.get()
    }

    /// Calls whose guest stopped waiting for the poller that had them.
    pub fn awaited(&self) -> u64 {
        self.awaited.get()
    }

    /// Calls the poller answered for this machine.
    pub fn served(&self) -> u64 {
        self.link.served.load(Ordering::Relaxed)
    }

    /// The exit of a guest that gave up waiting for the poller that claimed
    /// its call (`hypercall::AWAIT_ANSWER`): the vCPU is out of the guest, so
    /// the poller is done with the call ([`Self::lend`] took the state
    /// back). Frees the slot and says what the program gets: the answer, or
    /// (declined) the call to make through the exit path. The slot is the
    /// guest's to write: a program that jumps here itself gets its own
    /// value back, or the call its slot names.
    pub fn take_awaited(&self, mem: &mut GuestMemory) -> Result<Awaited, crate::memory::Fault> {
        self.awaited.set(self.awaited.get() + 1);
        let st = mem.kernel_read_u64(slot(fast::CALL_STATE))?;
        mem.kernel_write_u64(slot(fast::CALL_STATE), state::IDLE)?;
        if st == state::DONE {
            // Which calls outlast the guest's wait (`-v` counts them).
            tracing::trace!(
                "awaited answer to call {:?}",
                mem.kernel_read_u64(slot(fast::CALL_NR)).ok()
            );
            return Ok(Awaited::Answer(
                mem.kernel_read_u64(slot(fast::CALL_RESULT))?,
            ));
        }
        Ok(Awaited::Call(mem.kernel_read_u64(slot(fast::CALL_NR))?))
    }

    /// After an exit that may have stopped the vCPU inside the spin loop:
    /// finishes the guest's side of a call left in the slot, so the program
    /// resumes with the answer in RAX, or re-issues the call by the exit
    /// path. Changes nothing when the vCPU is elsewhere or the slot is idle.
    pub fn settle(vcpu: &mut Vcpu, mem: &mut GuestMemory) -> Result<(), crate::memory::Fault> {
        let st = mem.kernel_read_u64(slot(fast::CALL_STATE))?;
        if st == state::IDLE {
            return Ok(());
        }
        let mut regs = vcpu.regs();
        let Some(block) = [entry::exitless::PVM, entry::exitless::HW]
            .into_iter()
            .find(|b| {
                let spin = b + entry::exitless::SPIN;
                (spin..spin + entry::exitless::SPIN_SIZE).contains(&regs.rip)
            })
        else {
            return Ok(());
        };
        if st & state::POSTED != 0 || st == state::DECLINED {
            regs.rip = block + entry::exitless::CANCEL;
        } else if st == state::DONE {
            regs.rax = mem.kernel_read_u64(slot(fast::CALL_RESULT))?;
            regs.rip = block + entry::exitless::RETURN;
        } else {
            return Ok(());
        }
        mem.kernel_write_u64(slot(fast::CALL_STATE), state::IDLE)?;
        vcpu.set_regs(&regs);
        Ok(())
    }
}

impl Drop for Exitless {
    fn drop(&mut self) {
        self.poller.remove(&self.link);
    }
}
