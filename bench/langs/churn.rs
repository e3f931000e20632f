// STEPS steps of fixed work: a 32 MiB Vec per step, written page by page and dropped.
use std::hint::black_box;

fn step(n: usize) -> u64 {
    let mut b = vec![0u8; 32 << 20];
    let mut i = 0;
    while i < b.len() {
        b[i] = n as u8;
        i += 4096;
    }
    black_box(&mut b);
    b[4096] as u64
}

fn main() {
    let steps: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100);
    let mut total = 0u64;
    for n in 0..steps {
        total += step(n);
    }
    println!("{}", total);
}
