//! ECC and read retry: whether a read decodes, and at what cost.
//!
//! A page is protected in codewords of 1 KiB of data. Each codeword's
//! number of raw bit errors is drawn from Binomial(8192, RBER) (bits fail
//! independently at the raw bit error rate, the assumption under the
//! usual ECC sizing; Cai et al. 2017, Section II), from the NAND's own
//! seeded generator, so a run is reproducible from its seed. The read
//! decodes when every codeword it touches has at most `t` errors:
//!
//! - **BCH**: `t` is the code's correction capability per codeword on
//!   every attempt (e.g. 40 bits per 1 KiB for MLC-era controllers);
//! - **LDPC**: the first attempt is a hard-decision decode (`t` =
//!   `correctable_bits`); the retries sense extra reference voltages and
//!   decode with soft information, which corrects more
//!   (`soft_correctable_bits`), as in SSDExplorer's LDPC model.
//!
//! **Read retry**: when the decode fails, the controller reads again with
//! shifted read reference voltages (Cai et al., Section VI "read-retry"),
//! up to `read_retries` times. A shifted read moves the references toward
//! the drifted threshold-voltage distributions, modelled as multiplying the
//! RBER by `retry_rber_factor` per retry (the k-th retry sees
//! RBER × factor^k). Past the last retry the read is uncorrectable.
//!
//! **Decode latency** (what `perf` charges; [`EccModel::attempt_decode_ns`]):
//!
//! - **BCH** decodes in a fixed time per attempt (`bch_decode_us`): its
//!   syndrome, error-locator and Chien-search stages run over the whole
//!   codeword whatever the number of errors.
//! - **LDPC** decodes iteratively (belief propagation): each iteration
//!   costs `ldpc_iteration_us`, and the iterations grow with the errors,
//!   from 1 on a clean codeword to `ldpc_max_iterations` at the code's
//!   capability: `1 + (max - 1) · e / t` for `e` errors in the worst
//!   codeword of the attempt. A failed attempt runs all the iterations
//!   before it gives up. The defaults (1 µs per iteration, at most 20) are
//!   those of S. Bates, "Latency in LDPC-based Next-Generation SSD
//!   Controllers" (PMC-Sierra, 2014): 1 µs per iteration, 1 minimum,
//!   about 4 typical, 20 maximum. Soft decoding runs the same iterations
//!   on soft inputs; the extra sensing it needs is the retry's full tR.
//!
//! The codewords of a read decode in parallel engines: an attempt takes
//! the time of its worst codeword.

use crate::seed::Rng;
use crate::timing::config::us_to_ns;
use rand_distr::{Binomial, Distribution};
use serde::{Deserialize, Serialize};

/// Data bits per codeword (1 KiB).
pub const CODEWORD_BITS: u64 = 8192;

/// The error-correcting code.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EccKind {
    Bch,
    Ldpc,
}

/// The code and the read-retry policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EccModel {
    pub kind: EccKind,
    /// Bits corrected per 1 KiB codeword (BCH; LDPC hard decision).
    pub correctable_bits: u32,
    /// Bits corrected per codeword by LDPC soft decoding (the retries);
    /// unused by BCH.
    pub soft_correctable_bits: u32,
    /// Retries with shifted read voltages after a failed decode.
    pub read_retries: u32,
    /// RBER multiplier per retry (0 < f <= 1).
    pub retry_rber_factor: f64,
    /// BCH decode time per attempt, µs.
    pub bch_decode_us: f64,
    /// LDPC time per decoder iteration, µs.
    pub ldpc_iteration_us: f64,
    /// LDPC iterations before a decode gives up (at least 1).
    pub ldpc_max_iterations: u32,
}

/// The outcome of decoding one read.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Decode {
    /// Retries it took (0: the first read decoded).
    pub retries: u32,
    /// Bit errors corrected in the attempt that decoded.
    pub corrected_bits: u64,
    /// No attempt decoded.
    pub uncorrectable: bool,
    /// ECC decode time of every attempt together, ns.
    pub decode_ns: u64,
}

impl EccModel {
    /// Correction capability of attempt `attempt` (0 = the first read).
    fn capability(&self, attempt: u32) -> u64 {
        match self.kind {
            EccKind::Ldpc if attempt > 0 => u64::from(self.soft_correctable_bits.max(self.correctable_bits)),
            _ => u64::from(self.correctable_bits),
        }
    }

    /// Decode time of attempt `attempt` whose worst codeword had
    /// `errors` bit errors (`None`: the attempt failed), ns.
    pub fn attempt_decode_ns(&self, attempt: u32, errors: Option<u64>) -> u64 {
        match self.kind {
            EccKind::Bch => us_to_ns(self.bch_decode_us),
            EccKind::Ldpc => {
                let max = u64::from(self.ldpc_max_iterations.max(1));
                let t = self.capability(attempt).max(1);
                let iterations = match errors {
                    Some(e) => 1 + (max - 1) * e.min(t) / t,
                    None => max,
                };
                iterations * us_to_ns(self.ldpc_iteration_us)
            }
        }
    }

    /// Decode a read of `codewords` codewords of a page whose RBER is `rber`.
    pub fn decode(&self, rng: &mut Rng, rber: f64, codewords: u32) -> Decode {
        let mut retries = 0;
        let mut decode_ns = 0;
        loop {
            let p = (rber * self.retry_rber_factor.powi(retries as i32)).clamp(0.0, 1.0);
            let t = self.capability(retries);
            let mut corrected = 0;
            let mut worst = 0;
            let mut ok = true;
            if p > 0.0 {
                // Binomial::new only fails for p outside 0..=1, excluded above.
                let dist = Binomial::new(CODEWORD_BITS, p).expect("a probability");
                for _ in 0..codewords {
                    let errors = dist.sample(rng);
                    if errors > t {
                        ok = false;
                        break;
                    }
                    corrected += errors;
                    worst = worst.max(errors);
                }
            }
            decode_ns += self.attempt_decode_ns(retries, ok.then_some(worst));
            if ok {
                return Decode { retries, corrected_bits: corrected, uncorrectable: false, decode_ns };
            }
            if retries == self.read_retries {
                return Decode { retries, corrected_bits: 0, uncorrectable: true, decode_ns };
            }
            retries += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn bch(t: u32, retries: u32) -> EccModel {
        EccModel {
            kind: EccKind::Bch,
            correctable_bits: t,
            soft_correctable_bits: 0,
            read_retries: retries,
            retry_rber_factor: 0.5,
            bch_decode_us: 4.0,
            ldpc_iteration_us: 1.0,
            ldpc_max_iterations: 20,
        }
    }

    #[test]
    fn low_rber_decodes_first_time_and_high_rber_is_uncorrectable() {
        let mut rng = Rng::seed_from_u64(1);
        let d = bch(40, 3).decode(&mut rng, 1e-5, 16);
        assert_eq!((d.retries, d.uncorrectable), (0, false));
        // 8192 x 0.05 = 410 expected errors per codeword: nothing corrects it.
        let d = bch(40, 3).decode(&mut rng, 0.05, 16);
        assert!(d.uncorrectable);
        assert_eq!(d.retries, 3);
    }

    #[test]
    fn retries_rescue_reads_just_past_the_limit() {
        // 8192 x 6e-3 = 49 expected errors > t = 40; one retry halves it.
        let mut rng = Rng::seed_from_u64(2);
        let e = bch(40, 4);
        let mut retried = 0;
        for _ in 0..100 {
            let d = e.decode(&mut rng, 6e-3, 4);
            assert!(!d.uncorrectable);
            retried += u32::from(d.retries > 0);
        }
        assert!(retried > 90, "{retried}");
        // Without retries the same reads fail.
        let d = bch(40, 0).decode(&mut rng, 6e-3, 4);
        assert!(d.uncorrectable);
    }

    #[test]
    fn ldpc_soft_decoding_corrects_more_than_hard() {
        let mut rng = Rng::seed_from_u64(3);
        let ldpc = EccModel {
            kind: EccKind::Ldpc,
            correctable_bits: 40,
            soft_correctable_bits: 120,
            read_retries: 1,
            retry_rber_factor: 1.0,
            bch_decode_us: 4.0,
            ldpc_iteration_us: 1.0,
            ldpc_max_iterations: 20,
        };
        // 8192 x 8e-3 = 66 errors: hard fails, soft (120) decodes.
        let d = ldpc.decode(&mut rng, 8e-3, 8);
        assert_eq!((d.retries, d.uncorrectable), (1, false));
        assert!(d.corrected_bits > 0);
    }

    #[test]
    fn bch_decode_time_is_fixed_per_attempt() {
        let mut rng = Rng::seed_from_u64(4);
        let d = bch(40, 3).decode(&mut rng, 1e-6, 4);
        assert_eq!((d.retries, d.decode_ns), (0, 4_000));
        let d = bch(40, 3).decode(&mut rng, 0.05, 4);
        assert!(d.uncorrectable);
        assert_eq!(d.decode_ns, 4 * 4_000, "the first read and three retries");
    }

    #[test]
    fn ldpc_iterations_grow_with_the_errors_and_a_failed_attempt_runs_them_all() {
        let ldpc = EccModel {
            kind: EccKind::Ldpc,
            correctable_bits: 40,
            soft_correctable_bits: 120,
            read_retries: 2,
            retry_rber_factor: 1.0,
            bch_decode_us: 4.0,
            ldpc_iteration_us: 1.0,
            ldpc_max_iterations: 20,
        };
        assert_eq!(ldpc.attempt_decode_ns(0, Some(0)), 1_000, "a clean codeword: one iteration");
        assert_eq!(ldpc.attempt_decode_ns(0, Some(20)), (1 + 19 * 20 / 40) * 1_000);
        assert_eq!(ldpc.attempt_decode_ns(0, Some(40)), 20_000, "at the capability: every iteration");
        assert_eq!(ldpc.attempt_decode_ns(0, None), 20_000, "a failed attempt: every iteration");
        // Soft decoding's capability is higher: the same errors take fewer iterations.
        assert_eq!(ldpc.attempt_decode_ns(1, Some(40)), (1 + 19 * 40 / 120) * 1_000);
        // More errors, more time, on average over many reads.
        let mean = |rber: f64| {
            let mut rng = Rng::seed_from_u64(5);
            (0..200).map(|_| ldpc.decode(&mut rng, rber, 4).decode_ns).sum::<u64>() / 200
        };
        assert!(mean(2e-3) > mean(1e-4), "{} vs {}", mean(2e-3), mean(1e-4));
    }

    #[test]
    fn decoding_is_deterministic_from_the_seed() {
        let e = bch(40, 5);
        let run = |seed| {
            let mut rng = Rng::seed_from_u64(seed);
            (0..50).map(|_| e.decode(&mut rng, 5e-3, 16)).collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
    }
}
