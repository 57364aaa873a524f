//! Refresh: moving a block's data before the media loses it (read disturb
//! and retention; media reliability, see [`crate::nand::reliability`]).
//!
//! Every read of a block slightly programs its other cells (read disturb)
//! and every day of retention leaks charge, so the raw bit error rate of
//! data that stays put grows until the ECC cannot correct it, however
//! fresh the cells. Firmware therefore *refreshes*: it moves the valid data
//! of a block whose errors near the ECC's limit to a new block (where the
//! count of reads and the retention clock start over) and erases the old
//! one (Cai et al., "Error Characterization, Mitigation, and Recovery in
//! Flash-Memory-Based SSDs", Proc. IEEE 2017, Section V (read disturb) and
//! VI (refresh); Cai et al., "Flash Correct-and-Refresh", ICCD 2012).
//!
//! With `refresh = true`, the data plane asks the flash for each candidate
//! group's predicted RBER ([`crate::flash::Flash::predicted_rber`]: its
//! P/E count, the reads of its blocks since their erase and their
//! retention age, through the vendor's characterization), and refreshes a
//! sealed group when the worst member's RBER reaches `refresh_threshold`
//! of the RBER the first (hard) decode corrects. Candidates:
//!
//! - the groups a host read touched (read disturb: a hot read range
//!   reaches the limit first), checked after the read;
//! - one sealed group per host request, round-robin over the device
//!   (retention: data nobody reads ages too).
//!
//! A refresh is a garbage collection of a chosen victim (the copies go to
//! the GC stream, cause `gc`), so its cost is write amplification: the
//! FTL's metrics report `refresh_runs`, `refresh_pages_moved` and
//! `refresh_waf` (pages moved per host page programmed: the WAF refresh
//! adds). An open group (a frontier read hot before it filled) is closed
//! where it stands first, as a failed program's group is (`retire.rs`);
//! groups the FTL reserved (checkpoints) are never moved. Without the reliability model the flash
//! predicts nothing and refresh never runs.

use super::{DataPlane, GroupState, Mapper, NO_FRONTIER};
use crate::flash::{Cause, Flash};
use crate::ftl::FtlError;
use crate::nand::BlockAddr;

impl DataPlane {
    /// After a host read (refresh on): refresh the groups of the pages
    /// `ppns` it read, and one more group round-robin, if their predicted
    /// RBER nears the ECC limit.
    pub(super) fn refresh_after_read<M: Mapper>(
        &mut self,
        flash: &mut dyn Flash,
        m: &mut M,
        first_ppn: u32,
        last_ppn: u32,
    ) -> Result<(), FtlError> {
        let first = self.group_of_ppn(first_ppn);
        self.refresh_if_needed(flash, m, first)?;
        let last = self.group_of_ppn(last_ppn);
        if last != first {
            self.refresh_if_needed(flash, m, last)?;
        }
        self.refresh_scan_step(flash, m)
    }

    /// One step of the round-robin scan (retention): check the next group.
    pub(super) fn refresh_scan_step<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M) -> Result<(), FtlError> {
        let groups = self.groups();
        if groups == 0 {
            return Ok(());
        }
        let g = self.refresh_cursor % groups;
        self.refresh_cursor = (g + 1) % groups;
        self.refresh_if_needed(flash, m, g)
    }

    /// Whether `group`'s worst block nears the ECC limit.
    fn needs_refresh(&self, flash: &dyn Flash, group: u32) -> bool {
        matches!(self.group_state(group), GroupState::Sealed | GroupState::Open)
            && self.group_members(group).iter().any(|&b| {
                flash
                    .predicted_rber(BlockAddr(u64::from(b)))
                    .is_some_and(|p| p.rber >= self.opts.refresh_threshold * p.correctable_rber)
            })
    }

    fn refresh_if_needed<M: Mapper>(&mut self, flash: &mut dyn Flash, m: &mut M, group: u32) -> Result<(), FtlError> {
        if !self.needs_refresh(flash, group) {
            return Ok(());
        }
        // As before any GC step: a caching map makes room for the remaps.
        m.before_gc_step(self, flash)?;
        if !self.needs_refresh(flash, group) {
            return Ok(()); // that step collected it
        }
        let moved = self.table.valid[group as usize] - self.table.fixed[group as usize];
        let unit = self.unit_of(group);
        if self.state[group as usize] == GroupState::Open {
            // A frontier read hot before it filled: closed where it stands
            // (as a failed program's group is, see `retire.rs`).
            for f in &mut self.units[unit].frontier {
                if f.group == group {
                    *f = NO_FRONTIER;
                }
            }
            self.abandon_summary(group);
        } else {
            self.policy.remove(group, &self.table);
        }
        // Not a candidate, nor open, while its pages move.
        self.state[group as usize] = GroupState::Reserved;
        let was_in_gc = std::mem::replace(&mut self.in_gc, true);
        let result = self.move_valid_pages(flash, m, unit, group, Cause::Gc);
        self.in_gc = was_in_gc;
        result?;
        m.before_erase(self, flash, group)?;
        self.erase_to_free(flash, group, Cause::Gc)?;
        self.counters.refresh_runs += 1;
        self.counters.refresh_pages_moved += u64::from(moved);
        Ok(())
    }

    /// Refresh's metrics, when it is on (absent otherwise, so reports
    /// without it are unchanged).
    pub fn refresh_stats(&self, extra: &mut std::collections::BTreeMap<String, serde_json::Value>) {
        if !self.opts.refresh {
            return;
        }
        let c = &self.counters;
        extra.insert("refresh_runs".into(), serde_json::json!(c.refresh_runs));
        extra.insert("refresh_pages_moved".into(), serde_json::json!(c.refresh_pages_moved));
        let waf = if c.host_pages == 0 { 0.0 } else { c.refresh_pages_moved as f64 / c.host_pages as f64 };
        extra.insert("refresh_waf".into(), serde_json::json!((waf * 1000.0).round() / 1000.0));
    }
}
