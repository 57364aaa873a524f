//! The host requests of a hunt run, as its [`Swarm`] configuration says.
//!
//! Unlike the fio-style generator ([`crate::workload::synthetic`]), sizes
//! and offsets need not be multiples of a page: a request of 3 sectors at
//! LBA 7 on a device of 8-sector pages straddles two pages and leaves both
//! partly written, so the FTL must read-modify-write them. The oracle
//! tracks every sector on its own (a version grain of one sector).

use super::swarm::Swarm;
use crate::seed::{rng_for, Rng};
use crate::workload::{HostOp, HostRequest};
use rand::RngExt;

/// The request stream of one run. Deterministic: a function of the swarm.
pub struct SwarmWorkload {
    swarm: Swarm,
    ops: Rng,
    offsets: Rng,
    sizes: Rng,
    /// Where the previous request ended.
    end: u64,
}

impl SwarmWorkload {
    pub fn new(swarm: &Swarm) -> SwarmWorkload {
        let seed = swarm.splice.get("workload").copied().unwrap_or(swarm.seed);
        SwarmWorkload {
            swarm: swarm.clone(),
            ops: rng_for(seed, "hunt.workload.ops"),
            offsets: rng_for(seed, "hunt.workload.offsets"),
            sizes: rng_for(seed, "hunt.workload.sizes"),
            end: 0,
        }
    }

    /// The request at the next index.
    pub fn next_request(&mut self) -> HostRequest {
        let s = &self.swarm;
        let roll = self.ops.random_range(0..100u32);
        let op = if roll < s.read_percent {
            HostOp::Read
        } else if roll < s.read_percent + s.trim_percent {
            HostOp::Trim
        } else if roll < s.read_percent + s.trim_percent + s.flush_percent {
            HostOp::Flush
        } else {
            HostOp::Write
        };
        if op == HostOp::Flush {
            return HostRequest { op, lba: 0, sectors: 0, arrival_ns: 0, job: 0 };
        }
        // Sizes are multiples of the alignment too: without the `sub-page`
        // feature every request is whole pages.
        let drawn = self.sizes.random_range(s.size_sectors_min..=s.size_sectors_max);
        let sectors = (drawn / s.align_sectors * s.align_sectors).max(s.size_sectors_min);
        let (start, len) = match s.hot {
            Some((space_percent, share_percent)) if self.offsets.random_range(0..100) < share_percent => {
                (0, (s.footprint_sectors * u64::from(space_percent) / 100).max(u64::from(sectors)))
            }
            _ => (0, s.footprint_sectors),
        };
        let slots = (len.saturating_sub(u64::from(sectors)) / u64::from(s.align_sectors)).max(1);
        let random = start + self.offsets.random_range(0..slots) * u64::from(s.align_sectors);
        let sequential = self.offsets.random_range(0..100) < s.sequential_percent && self.end < s.footprint_sectors;
        let lba = if sequential { self.end } else { random };
        let sectors = sectors.min((s.footprint_sectors - lba) as u32).max(1);
        self.end = lba + u64::from(sectors);
        HostRequest { op, lba, sectors, arrival_ns: 0, job: 0 }
    }
}
