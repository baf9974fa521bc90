//! tokio's signal driver on forkvm: it registers a handler that writes to a
//! UNIX socket pair, which the runtime's epoll watches.
use std::time::Duration;
use tokio::signal::unix::{signal, SignalKind};

fn raise(sig: libc::c_int) {
    // SAFETY: raise(3) only sends a signal to the calling thread.
    unsafe {
        libc::raise(sig);
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut usr1 = signal(SignalKind::user_defined1()).expect("SIGUSR1 stream");
    let mut hup = signal(SignalKind::hangup()).expect("SIGHUP stream");
    for i in 0..3 {
        raise(libc::SIGUSR1);
        usr1.recv().await;
        println!("got SIGUSR1 #{i}");
    }
    // From a blocking thread: the handler runs there, the wake-up reaches the runtime.
    tokio::task::spawn_blocking(|| raise(libc::SIGHUP))
        .await
        .expect("blocking task");
    hup.recv().await;
    println!("got SIGHUP");
    let quiet = tokio::time::timeout(Duration::from_millis(30), usr1.recv()).await;
    println!("no spurious signal: {}", quiet.is_err());
    let mut alrm = signal(SignalKind::alarm()).expect("SIGALRM stream");
    // SAFETY: alarm(2) has no memory effects.
    unsafe {
        libc::alarm(1);
    }
    alrm.recv().await;
    println!("got SIGALRM from alarm(1)");
}
