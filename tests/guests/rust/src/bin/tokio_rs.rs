//! tokio on forkvm: a multi-threaded runtime (epoll, eventfd, futexes,
//! threads), timers, channels and blocking tasks, no networking.
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let start = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    for i in 0..10u64 {
        let tx = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5 * (10 - i))).await;
            tx.send(i).await.unwrap();
        });
    }
    drop(tx);
    let mut order = Vec::new();
    while let Some(v) = rx.recv().await {
        order.push(v);
    }
    let blocking = tokio::task::spawn_blocking(|| (1..=20u64).product::<u64>()).await.unwrap();
    let timed_out = tokio::time::timeout(Duration::from_millis(10), std::future::pending::<()>())
        .await
        .is_err();
    println!("received {} values, sum {}", order.len(), order.iter().sum::<u64>());
    // The arrival order depends on how fast the tasks were spawned (a loaded
    // machine may let the first 5 ms timer fire before the last spawn), so
    // only the set of values is compared with the native run.
    order.sort_unstable();
    println!("values {order:?}");
    println!("20! = {blocking}, timeout fired: {timed_out}");
    println!("took at least 50ms: {}", start.elapsed() >= Duration::from_millis(50));
}
