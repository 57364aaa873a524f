//! Timing: resource timelines, the flash timing model, device DRAM and its
//! write cache.
//!
//! Timing belongs to the flash interface and the host interface, never to
//! the FTL: the FTL runs exactly as in `stress`, synchronously, and its
//! functional effects happen at once. The [`flash_model::FlashTiming`]
//! model watches every flash operation through the
//! [`crate::flash::FlashObserver`] hook and places it on the timelines of
//! its channel, die and plane; a request completes when the operations it
//! depends on complete. The host side (queues, link, controller CPU) is in
//! [`crate::host`]; [`crate::run::perf`] puts them together.
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

pub mod breakdown;
pub mod config;
pub mod flash_model;
pub mod timeline;
pub mod write_cache;

pub use breakdown::{Breakdown, Component};
pub use config::{Timing, TimingConfig, WriteCacheMode};
pub use flash_model::{FlashInterval, FlashTiming, TimingObserver, NO_OWNER};
pub use timeline::{ServerPool, Timeline};
