//! Division by a divisor fixed at construction, without a `div` instruction.
//!
//! Address arithmetic on the hot paths (page → block → plane) divides by the
//! same geometry constants millions of times a second; a hardware divide
//! costs tens of cycles, a wide multiply a few.

/// Division of 32-bit numbers by a fixed divisor with one wide multiply
/// instead of a `div` instruction (tens of cycles on the copyback path):
/// `n / d = (M · n) >> 64` with `M = ⌊(2^64 − 1) / d⌋ + 1`, exact for every
/// 32-bit `n` (Lemire, Kaser & Kurz, "Faster remainder by direct
/// computation", 2019).
#[derive(Copy, Clone, Debug)]
pub struct FastDiv {
    m: u64,
    d: u32,
}

impl FastDiv {
    pub fn new(d: u32) -> FastDiv {
        let d = d.max(1);
        FastDiv { m: (u64::MAX / u64::from(d)).wrapping_add(1), d }
    }
    #[inline(always)]
    pub fn quotient(self, n: u32) -> u32 {
        if self.d == 1 {
            return n; // M wraps to 0 for d = 1
        }
        ((u128::from(self.m) * u128::from(n)) >> 64) as u32
    }
    #[inline(always)]
    pub fn remainder(self, n: u32) -> u32 {
        n - self.quotient(n) * self.d
    }
}
