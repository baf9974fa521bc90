use std::sync::mpsc;
use std::thread;
fn main() {
    let (tx, rx) = mpsc::channel();
    let mut hs = vec![];
    for i in 0..8u64 {
        let tx = tx.clone();
        hs.push(thread::spawn(move || { for j in 0..100u64 { tx.send(i * 1000 + j).unwrap(); } i }));
    }
    drop(tx);
    let sum: u64 = rx.iter().sum();
    let ids: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    let m = std::sync::Arc::new(std::sync::Mutex::new(0));
    let hs: Vec<_> = (0..4).map(|_| { let m = m.clone(); thread::spawn(move || for _ in 0..1000 { *m.lock().unwrap() += 1; }) }).collect();
    for h in hs { h.join().unwrap(); }
    println!("sum={sum} ids={ids} m={}", m.lock().unwrap());
}
