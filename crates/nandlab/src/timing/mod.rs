//! Timing: resource timelines, the flash timing model, the latency
//! breakdown, and the timing configuration.
//!
//! Timing belongs to the flash interface and the host interface, never to
//! the FTL: the FTL runs exactly as in `stress`, synchronously, and its
//! functional effects happen at once. The [`flash_model::FlashTiming`]
//! model watches every flash operation through the
//! [`crate::flash::FlashObserver`] hook and places it on the timelines of
//! its channel, die and plane; a request completes when the operations it
//! depends on complete. The host side (queues, link, controller CPU) is in
//! [`crate::host`]; the timed device ([`crate::run::device`]: host
//! interface, controller, DRAM write cache) puts them together, and
//! [`crate::run::perf`] drives workloads through it.
//!
//! The model follows the published simulators it replaces:
//!
//! - MQSim (Tavakkol et al., FAST 2018): per-resource timing of channels,
//!   dies and planes; page-type-dependent latencies; multi-plane
//!   operations; program/erase suspension; a DRAM data cache between the
//!   host interface and the FTL; NVMe multi-queue host interface.
//! - FEMU (Li et al., FAST 2018): the blackbox SSD's per-LUN and
//!   per-channel "next available time" model, of which this is a
//!   generalisation (with backfilling and separate command / cell / data
//!   phases); FEMU's own timings are a preset.
//! - SSDExplorer (Zuolo et al., DATE 2015): a latency breakdown by
//!   component that names the bottleneck ([`breakdown`]).
//! - ONFI 4.x: channel transfer = bytes / (transfer rate × bus width), with
//!   command and address cycles on the bus before the data.

//!
//! # Limits of the model (deliberate, and where they bite)
//!
//! - Operations are *reserved* on timelines when the request that issues
//!   them is simulated, in arrival order, and never re-timed. A read cannot
//!   overtake operations already queued on its plane (no out-of-order
//!   transaction scheduling with read priority, as MQSim's has), so when a
//!   foreground GC batch or a write backlog is queued on a plane, reads
//!   behind it see its whole length: read tails under heavy writes are
//!   pessimistic compared with a read-prioritising controller. Suspend
//!   (when enabled) lets a read interrupt the one program or erase running
//!   on its die; the suspended work resumes in the die's next free time.
//! - The one-cache-register stall of ONFI cache reads is not modelled (see
//!   [`flash_model`]); the channel still serialises every data-out.
//! - A read that finds only part of its sectors in the write cache reads
//!   all of them from flash (cached sectors are then laid over, so the data
//!   is right; only the timing over-counts).
//! - DRAM is a bandwidth, used by write-cache copies and cache hits; flash
//!   data moving through DRAM does not consume it, and row-buffer timing
//!   (MQSim's DRAM model) is not reproduced.
//! - A submission queue admits requests by the completion times known when
//!   they were admitted; a later suspend that delays one of them does not
//!   delay that queue's admissions.

//!
//! # Bounds of simulated time
//!
//! Simulated time is a `u64` of nanoseconds, but a run ends at
//! [`TIME_LIMIT_NS`] (2^62 ns, about 146 years): every duration a
//! configuration may give is at most [`MAX_DURATION_NS`] (1 s), so any sum
//! the model forms from a time below the limit, even a backlog of a whole
//! write cache, stays far below `u64::MAX` and never wraps; a request that
//! would arrive or complete past the limit stops the run with an input
//! error instead of a wrong report ([`crate::run::perf`]). The timelines
//! also keep a tag bit in the top bit of a time, so times must stay below
//! 2^63. Per-interval series ([`MAX_SERIES_BINS`]) and timeline calendars
//! ([`timeline`]) hold a bounded number of bins whatever the times are.

pub mod breakdown;
pub mod config;
pub mod event_core;
pub mod event_timing;
pub mod flash_model;
pub mod scheduler;
pub mod timeline;
pub mod trace_out;
pub mod transaction;

pub use breakdown::{Breakdown, Component};
pub use config::{Timing, TimingConfig, WriteCacheMode};
pub use flash_model::{FlashInterval, FlashTiming, TimingObserver, NO_OWNER};
pub use timeline::{ServerPool, Timeline};

/// The end of representable simulated time, ns (2^62 ns, about 146
/// years): see the module docs.
pub const TIME_LIMIT_NS: u64 = 1 << 62;

/// The longest duration a `[timing]` or `[host]` value may give, ns (1 s):
/// every cell, command and controller time of a real drive is far shorter,
/// and the bound keeps sums of simulated times far from overflow.
pub const MAX_DURATION_NS: u64 = 1_000_000_000;

/// At most this many intervals in a per-interval series (the time series
/// and the flash series): when one more would be needed, the interval
/// doubles and neighbouring intervals merge, so memory does not grow with
/// simulated time or shrink of `--interval`. 65,536 one-second intervals
/// are 18 hours of simulated time; a 1 ms interval covers 65 s before the
/// first doubling.
pub const MAX_SERIES_BINS: usize = 1 << 16;

/// Merge neighbouring pairs of a per-interval series in place, `absorb`
/// adding the second of a pair into the first (an odd last one stays
/// alone): the series' interval doubles (see [`MAX_SERIES_BINS`]).
pub fn merge_neighbour_pairs<T: Clone>(v: &mut Vec<T>, absorb: impl Fn(&mut T, &T)) {
    let n = v.len();
    for i in 0..n.div_ceil(2) {
        let mut a = v[2 * i].clone();
        if let Some(b) = v.get(2 * i + 1) {
            absorb(&mut a, b);
        }
        v[i] = a;
    }
    v.truncate(n.div_ceil(2));
}
