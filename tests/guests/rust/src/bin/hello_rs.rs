//! Rust hello: std's runtime start-up, println!, a few collections, and exit 0.
use std::collections::BTreeMap;

fn main() {
    println!("Hello from Rust!");
    let mut m = BTreeMap::new();
    for (i, w) in "the quick brown fox jumps over the lazy dog the end"
        .split(' ')
        .enumerate()
    {
        *m.entry(w.to_string()).or_insert(0usize) += i;
    }
    for (k, v) in &m {
        println!("{k}: {v}");
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    println!("args: {args:?}");
    let vars: Vec<(String, String)> = std::env::vars().collect();
    println!("env: {vars:?}");
    eprintln!("stderr from Rust");
}
