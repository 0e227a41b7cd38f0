//! Benchmarks shared by the CLI (`stria devbench`, `stria bench ...`) and
//! `benches/`.

pub mod compare;
pub mod devbench;
pub mod device;
pub mod fio;
pub mod flush;
pub mod ingest;
pub mod latency;
pub mod patterns;
pub mod pinning;
pub mod process;
pub mod procstat;
pub mod random_write;
pub mod redis_compare;
pub mod resp_client;
pub mod table;
pub mod walpe;

/// Appends `n` in decimal, zero-padded to `width` digits.
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: u64, width: usize) {
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    while n > 0 {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out.extend_from_slice(&digits[at.min(digits.len() - width.min(20))..]);
}
