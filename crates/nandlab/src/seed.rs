//! Seeds: one run seed, and a stream derived from it for each component.
//!
//! Every random component (each workload job, the FTL, bad-block placement,
//! fault injection) draws from its own generator seeded by
//! [`derive_seed`]`(run_seed, name)`, so adding draws to one component never
//! changes another's sequence, and one printed seed reproduces the run.

use rand::SeedableRng;

/// The generator every component uses: PCG-64 (MCG variant), small and fast,
/// with a stable output sequence for a given seed.
pub type Rng = rand_pcg::Pcg64Mcg;

/// SplitMix64 finaliser: a bijective mix of 64 bits.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of the component called `name` in a run seeded `run_seed`.
pub fn derive_seed(run_seed: u64, name: &str) -> u64 {
    // FNV-1a of the name, then mixed with the run seed.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix64(run_seed ^ mix64(h))
}

/// A generator for the component `name`.
pub fn rng_for(run_seed: u64, name: &str) -> Rng {
    Rng::seed_from_u64(derive_seed(run_seed, name))
}

/// A fresh run seed when the user gave none (printed, so the run can be repeated).
pub fn draw_run_seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    mix64(t as u64 ^ u64::from(std::process::id()).rotate_left(32)) % 1_000_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_differ_by_name_and_repeat_by_seed() {
        assert_ne!(derive_seed(1, "ftl"), derive_seed(1, "job0"));
        assert_eq!(derive_seed(7, "ftl"), derive_seed(7, "ftl"));
        assert_ne!(derive_seed(7, "ftl"), derive_seed(8, "ftl"));
    }
}
