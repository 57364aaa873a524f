//! DAC: Dynamic dAta Clustering (Chiang, Lee & Chang, "Using data
//! clustering to improve cleaning performance for flash memory",
//! Software—Practice and Experience 29(3), 1999).
//!
//! The flash is divided into `n` regions ordered from cold (0) to hot
//! (`n - 1`), each with its own open block. Data moves between regions by
//! what happens to it:
//!
//! - a host **update** (an overwrite of a page that holds data) moves the
//!   page one region up, from the region its previous version was in;
//! - a page **copied by the cleaner** (it survived until its block was
//!   collected) moves one region down;
//! - data written for the first time starts in region 0.
//!
//! Pages updated often climb to the top regions and are invalidated there
//! before their blocks are collected; pages that are not keep being
//! demoted and settle in region 0 with the other long-lived data. The
//! region of a page is the stream of the block holding it, so the policy
//! needs no per-page state (DRAM: nothing beyond the FTL's block table)
//! and a mount recovers it from the stream recorded in each page's OOB.
//! The paper pairs DAC with cost-benefit cleaning, as OpenSSD's DAC FTL
//! does (`gc_policy = "cost-benefit"`).

use super::HotColdPolicy;

pub struct Dac {
    regions: u8,
}

impl Dac {
    pub fn new(regions: u8) -> Self {
        Dac { regions: regions.clamp(2, super::MAX_HOT_COLD_STREAMS) }
    }
}

impl HotColdPolicy for Dac {
    fn streams(&self) -> u8 {
        self.regions
    }

    /// Copies from region `r` go to `r - 1` (region 0 to itself).
    fn gc_streams(&self) -> u8 {
        self.regions - 1
    }

    #[inline]
    fn host_stream(&mut self, _lpn: u32, current: Option<u8>) -> u8 {
        match current {
            None => 0,
            Some(r) => (r + 1).min(self.regions - 1),
        }
    }

    #[inline]
    fn gc_stream(&mut self, _lpn: u32, from: u8) -> u8 {
        from.saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_promote_and_cleaning_demotes_within_the_regions() {
        let mut d = Dac::new(3);
        assert_eq!(d.host_stream(0, None), 0, "new data starts cold");
        assert_eq!(d.host_stream(0, Some(0)), 1);
        assert_eq!(d.host_stream(0, Some(1)), 2);
        assert_eq!(d.host_stream(0, Some(2)), 2, "the hottest region is the ceiling");
        assert_eq!(d.gc_stream(0, 2), 1);
        assert_eq!(d.gc_stream(0, 0), 0, "the coldest region is the floor");
        assert_eq!((d.streams(), d.gc_streams()), (3, 2));
    }
}
