//! Panics with a message: exit status 101 and the standard panic message on stderr.
fn main() {
    println!("before panic");
    let v: Vec<u32> = std::env::args().skip(1).map(|a| a.len() as u32).collect();
    if v.len() > 100 {
        return;
    }
    panic!("forkvm test panic: {} items", v.len());
}
