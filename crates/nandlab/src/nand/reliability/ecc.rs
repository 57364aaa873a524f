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

use crate::seed::Rng;
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
}

impl EccModel {
    /// Correction capability of attempt `attempt` (0 = the first read).
    fn capability(&self, attempt: u32) -> u64 {
        match self.kind {
            EccKind::Ldpc if attempt > 0 => u64::from(self.soft_correctable_bits.max(self.correctable_bits)),
            _ => u64::from(self.correctable_bits),
        }
    }

    /// Decode a read of `codewords` codewords of a page whose RBER is `rber`.
    pub fn decode(&self, rng: &mut Rng, rber: f64, codewords: u32) -> Decode {
        let mut retries = 0;
        loop {
            let p = (rber * self.retry_rber_factor.powi(retries as i32)).clamp(0.0, 1.0);
            let t = self.capability(retries);
            let mut corrected = 0;
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
                }
            }
            if ok {
                return Decode { retries, corrected_bits: corrected, uncorrectable: false };
            }
            if retries == self.read_retries {
                return Decode { retries, corrected_bits: 0, uncorrectable: true };
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
        };
        // 8192 x 8e-3 = 66 errors: hard fails, soft (120) decodes.
        let d = ldpc.decode(&mut rng, 8e-3, 8);
        assert_eq!((d.retries, d.uncorrectable), (1, false));
        assert!(d.corrected_bits > 0);
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
