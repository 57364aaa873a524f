//! Raw bit error rate (RBER) of a page read.
//!
//! The model adds the three error mechanisms that dominate in the
//! characterization of Cai et al. ("Error Characterization, Mitigation,
//! and Recovery in Flash-Memory-Based SSDs", Proc. IEEE 105(9), 2017),
//! each scaled by how error-prone the page's type is:
//!
//! ```text
//! RBER = m(type) × ( e0                                   floor (fresh cells)
//!                  + a_w · PE^k_w                         wear (P/E cycling)
//!                  + a_r · t_days^k_r · (1 + PE / E)      retention
//!                  + a_d · reads · (1 + PE / E) )         read disturb
//! ```
//!
//! - **Wear**: Cai et al. fit the RBER growth with P/E cycles by a power
//!   law (their Section III); SSDExplorer (Zuolo et al., "SSDExplorer: A
//!   Virtual Platform for Performance/Reliability-Oriented Fine-Grained
//!   Design Space Exploration of Solid State Drives", IEEE TCAD 2015)
//!   drives its ECC and read-retry models with the same kind of
//!   P/E-dependent RBER curve.
//! - **Retention**: charge leaks after the program; the errors grow
//!   sub-linearly with the retention time (a power law with exponent below
//!   one in Cai et al.'s retention fits) and faster on worn cells (the
//!   `(1 + PE/E)` factor, E the rated endurance).
//! - **Read disturb**: every read of a block slightly programs its
//!   unselected cells; errors grow linearly with the reads since the
//!   block's erase, and faster on worn cells (Cai et al., Section V).
//! - **Page type**: in MLC/TLC/QLC the pages of one word line (LSB, CSB,
//!   MSB, TSB) read different voltage windows; the upper pages see more
//!   errors (Cai et al., Section IV). `m(type)` is a per-type multiplier.
//!
//! The presets' numbers ([`super::presets`]) are chosen to reproduce the
//! orders of magnitude these papers report (about 1e-5 fresh to a few 1e-3
//! at rated endurance for TLC), not fitted to one chip: a device file
//! overrides any of them.

use crate::nand::PageType;
use serde::{Deserialize, Serialize};

/// The parameters of the RBER model (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RberModel {
    /// `e0`: RBER of a fresh, just-programmed, never-read page.
    pub floor: f64,
    /// `a_w` and `k_w`: the wear power law.
    pub wear_coefficient: f64,
    pub wear_exponent: f64,
    /// `a_r` and `k_r`: retention, per day of retention time.
    pub retention_coefficient: f64,
    pub retention_exponent: f64,
    /// `a_d`: read disturb, per read of the block since its erase.
    pub disturb_per_read: f64,
    /// `E`: rated endurance in P/E cycles (also where erases start failing).
    pub endurance_pe: u32,
    /// `m(type)` for LSB, CSB, MSB and TSB pages (SLC pages are all LSB).
    pub page_type_multiplier: [f64; 4],
}

/// What a page has been through when it is read.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct PageHistory {
    pub pe_cycles: u32,
    pub retention_days: f64,
    pub reads_since_erase: u32,
    pub page_type: PageType,
}

impl RberModel {
    /// The raw bit error rate of a read of a page with `history`, at most 0.5.
    pub fn rber(&self, h: &PageHistory) -> f64 {
        let pe = f64::from(h.pe_cycles);
        let worn = 1.0 + pe / f64::from(self.endurance_pe.max(1));
        let wear = self.wear_coefficient * pe.powf(self.wear_exponent);
        let retention = self.retention_coefficient * h.retention_days.max(0.0).powf(self.retention_exponent) * worn;
        let disturb = self.disturb_per_read * f64::from(h.reads_since_erase) * worn;
        let m = self.page_type_multiplier[page_type_index(h.page_type)];
        (m * (self.floor + wear + retention + disturb)).clamp(0.0, 0.5)
    }
}

fn page_type_index(t: PageType) -> usize {
    match t {
        PageType::Lsb => 0,
        PageType::Csb => 1,
        PageType::Msb => 2,
        PageType::Tsb => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nand::reliability::presets::preset;

    #[test]
    fn rber_grows_with_wear_retention_disturb_and_page_type() {
        let m = preset("tlc").unwrap().rber;
        let base = PageHistory { pe_cycles: 0, retention_days: 0.0, reads_since_erase: 0, page_type: PageType::Lsb };
        let fresh = m.rber(&base);
        assert!(fresh > 0.0 && fresh < 1e-4, "{fresh}");
        let worn = m.rber(&PageHistory { pe_cycles: 3000, ..base });
        assert!(worn > 10.0 * fresh, "{worn} vs {fresh}");
        let old = m.rber(&PageHistory { retention_days: 365.0, ..base });
        assert!(old > fresh);
        let disturbed = m.rber(&PageHistory { reads_since_erase: 1_000_000, ..base });
        assert!(disturbed > fresh);
        let msb = m.rber(&PageHistory { page_type: PageType::Msb, ..base });
        assert!(msb > fresh);
        // Clamped: a probability, never above one half.
        let absurd = m.rber(&PageHistory { pe_cycles: u32::MAX, ..base });
        assert_eq!(absurd, 0.5);
    }
}
