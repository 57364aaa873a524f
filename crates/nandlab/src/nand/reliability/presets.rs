//! Reliability presets for SLC, MLC, TLC and QLC NAND.
//!
//! Sources of the orders of magnitude (the values are this project's
//! choice within them, not one chip's fit; a device file overrides any):
//! - rated endurance: 100k (SLC), 3k (MLC, the 2y-nm MLC of Cai et al.
//!   2017's characterization), 3k (TLC) and 1k (QLC) P/E cycles;
//! - RBER: about 1e-9 (SLC) to 1e-5 (QLC) fresh, reaching about 1e-5
//!   (SLC), 1e-3 (MLC) and a few 1e-3 (TLC, QLC) at rated endurance, the
//!   range of the wear curves in Cai et al. 2017 (Fig. 11 and following)
//!   and of SSDExplorer's RBER inputs;
//! - ECC: BCH with 8 (SLC) and 40 (MLC) correctable bits per 1 KiB, LDPC
//!   for TLC and QLC (hard-decision capability near BCH's, soft about
//!   twice as strong), as SSDExplorer compares them;
//! - page types: the upper pages of a word line see more errors than the
//!   lower (Cai et al. 2017, Section IV): multipliers around 1.
//! - decode latency: LDPC 1 µs per iteration, at most 20 iterations
//!   (S. Bates, "Latency in LDPC-based Next-Generation SSD Controllers",
//!   PMC-Sierra, 2014); BCH 4 µs per attempt (this project's choice, the
//!   LDPC decoder's typical time in the same source);
//! - read disturb (SLC): about one bit error per 1e6 repetitive reads of
//!   a 512 B page (M-Systems, "Implementing MLC NAND Flash", read
//!   disturb section): 1 / (4096 bits × 1e6 reads) = 2.4e-10 per bit and
//!   read; the model counts reads of the block, the source reads of one
//!   page (the same when the reads hit one page);
//! - failures: at most 2 % of a part's blocks bad, factory and grown
//!   together, over its rated endurance (Samsung's reliability FAQ for its
//!   SLC parts; the same budget is assumed for the others). With the
//!   growth `1 + 9(PE/E)²` a block expects `4·E·(pages + 1)·p0` failures
//!   over its rated life, so p0 is set to retire about 0.3 % of the blocks
//!   by `E` (64 pages a block for SLC, 256 for the others), leaving the
//!   rest of the budget to factory bad blocks: SLC 1e-10, MLC and TLC
//!   1e-9, QLC 3e-9 per operation (the arithmetic is in
//!   `docs/design-notes/reliability.md`). Tests that want many
//!   retirements set their own rates.

use super::ecc::{EccKind, EccModel};
use super::failures::FailureModel;
use super::rber::RberModel;
use super::ReliabilitySettings;

/// The preset names.
pub const PRESETS: [&str; 4] = ["slc", "mlc", "tlc", "qlc"];

/// The settings of preset `name`, if there is one.
pub fn preset(name: &str) -> Option<ReliabilitySettings> {
    // (floor, wear coefficient, endurance, retention coefficient, disturb per read,
    //  page-type multipliers, ECC, hard t, soft t, retries, failure p0 per operation)
    let (floor, wear, endurance, retention, disturb, types, kind, t, soft, retries, fail_p0) = match name {
        "slc" => (1e-9, 1e-15, 100_000, 1e-8, 2.4e-10, [1.0, 1.0, 1.0, 1.0], EccKind::Bch, 8, 0, 2, 1e-10),
        "mlc" => (1e-6, 1.1e-10, 3_000, 3e-5, 3e-10, [0.7, 1.0, 1.3, 1.3], EccKind::Bch, 40, 0, 4, 1e-9),
        "tlc" => (1e-5, 3.3e-10, 3_000, 1e-4, 1e-9, [0.6, 1.0, 1.4, 1.4], EccKind::Ldpc, 60, 120, 5, 1e-9),
        "qlc" => (3e-5, 5e-9, 1_000, 3e-4, 3e-9, [0.5, 0.9, 1.2, 1.6], EccKind::Ldpc, 80, 160, 7, 3e-9),
        _ => return None,
    };
    Some(ReliabilitySettings {
        preset: name.to_string(),
        rber: RberModel {
            floor,
            wear_coefficient: wear,
            wear_exponent: 2.0,
            retention_coefficient: retention,
            retention_exponent: 0.5,
            disturb_per_read: disturb,
            endurance_pe: endurance,
            page_type_multiplier: types,
        },
        ecc: EccModel {
            kind,
            correctable_bits: t,
            soft_correctable_bits: soft,
            read_retries: retries,
            retry_rber_factor: 0.5,
            // LDPC: Bates (PMC-Sierra 2014), 1 µs per iteration, at most 20
            // (see `ecc`). BCH: this project's choice, the LDPC decoder's
            // typical 4 iterations' time.
            bch_decode_us: 4.0,
            ldpc_iteration_us: 1.0,
            ldpc_max_iterations: 20,
        },
        failures: FailureModel {
            program_fail_probability: fail_p0,
            erase_fail_probability: fail_p0,
            worn_out_factor: 1.5,
        },
        seconds_per_request: 1.0,
        fail_at: Vec::new(),
    })
}
