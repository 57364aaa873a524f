//! # nandlab — a virtual SSD laboratory
//!
//! nandlab runs one flash translation layer (FTL) against virtual NAND that
//! checks every rule of flash, with an oracle that checks every sector the
//! host reads back. The library follows the data path of an SSD:
//!
//! ```text
//! workload ──► host interface ──► FTL ──► flash interface ──► virtual NAND
//!  (generator        (requests,     (ftl)    (flash: ops,        (nand: pages,
//!   or trace)         buffers)               buffers, causes,     blocks, rules,
//!                                            observers)           payload stamps)
//!      │                                                               │
//!      └──────────────► oracle (shadow disk) ◄── every read's sectors ─┘
//!                              │
//!                          report (JSON, summary, violations)
//! ```
//!
//! A run puts these together as a *drive* and a *host side* (the split of
//! MQSim's `SSD_Device` assembly):
//!
//! ```text
//!            run::Session ── submit(request)
//!            ├── run::host_side::HostSide      oracle, request and write ids,
//!            │     issue / acknowledge /         host counters
//!            │     complete a write, check a read
//!            └── run::drive::Drive              flash controller + NAND, FTL
//!                  format, power cycle, mount,    instance, FTL factory
//!                  power cuts of crash tests
//!
//!  stress:  Session, untimed
//!  perf:    run::device::TimedDevice (host interface, controller CPU, DRAM,
//!           write cache) around a Session, timing::FlashTiming observing the flash
//!  crash:   a base run's Session; each point cuts the Drive's power, recovers,
//!           checks, and restores the base run
//!  serve:   a Session fed by NBD clients (host::nbd, run::serve): real bytes
//!           kept beside the payload ids, every read checked, one drive thread
//!  every mode ──► report (report::StressReport, report::perf, report::crash)
//! ```
//!
//! - [`workload`] produces host requests: fio-style synthetic patterns, and
//!   recorded block traces ([`workload::trace`], one reader per format) with
//!   transforms ([`workload::transform`]). Requests stream; nothing is held
//!   in memory.
//! - [`host`] is the host interface of timed runs: NVMe or SATA queues and
//!   their depth, the link's bandwidth, per-command and firmware costs, and
//!   how requests arrive (closed loop, trace timestamps, fixed rate).
//! - [`run`] is where a run is put together: a [`run::Session`] owns a
//!   [`run::drive::Drive`] (flash, FTL, and the factory that builds a fresh
//!   FTL at every mount) and a [`run::host_side::HostSide`] (oracle, ids,
//!   counters), and executes each host request across the two. The modes
//!   are built on it: `stress` (untimed), `perf` (the session inside the
//!   timed [`run::device`], whose DRAM write cache is there too),
//!   `crash` (power cuts, recovery, guarantees) and `serve` (the drive as
//!   an NBD block device for real programs, [`run::serve`]).
//! - [`timing`] times what the FTL does without the FTL knowing: resource
//!   timelines for every channel, die and plane, the flash timing model (an
//!   observer of every flash operation), and the per-request latency
//!   breakdown that names the bottleneck.
//! - [`ftl`] is the FTL interface ([`ftl::Ftl`], options, the registry) and
//!   the FTLs shipped, one module each (`page`, `dftl`, `hybrid`, `block`,
//!   `optr`). What they share is in [`ftl::kit`]: the data plane, victim
//!   selection, hot/cold separation and wear leveling ([`ftl::kit::policy`],
//!   one file per policy), the on-flash records as byte views
//!   ([`ftl::kit::wire`]) and the free-block pool. Every deliberate bug, the
//!   ones that prove the checkers, is a [`ftl::mutants::Mutant`].
//! - [`flash`] is everything an FTL may do to the device ([`flash::Flash`]):
//!   page reads, programs with OOB, erases, copyback, multi-plane forms and
//!   data buffers. Every operation carries its cause; timing and fault
//!   injection attach as observers, never inside FTL code.
//! - [`nand`] is the virtual NAND: geometry, page and block state, the rules
//!   checked on every operation, and payload stamps — host data as compact
//!   (LBA, write id) runs the FTL moves but never reads. [`nand::power`]
//!   says what a power cut does to an operation in flight; an undo journal
//!   lets `crash` test a cut without copying the drive.
//! - [`oracle`] is the shadow disk beside the data path: a version per
//!   sector, against which every read is checked; after a power cut,
//!   [`oracle::crash_checker`] decides whether the recovered disk is legal
//!   for the guarantee the FTL claims (baseline, or OPTR's prefix,
//!   atomicity and flush semantics).
//! - [`violation`] names the rules and records what broke them; [`report`]
//!   holds every mode's report types and turns them into JSON and a
//!   summary (it imports nothing from [`run`]: the modes fill reports,
//!   reports know no modes); [`config`] loads devices and
//!   presets; [`seed`] derives one random stream per component from the run
//!   seed, so a run is a function of (configuration, workload, seed).
//! - [`memory`] estimates a run's peak memory before it allocates;
//!   [`util`] holds the generic helpers (sizes as people write them,
//!   `KEY=VALUE` assignments, fixed-divisor division, prefetch, an LRU
//!   recency queue, sparse tables).

pub mod config;
pub mod flash;
pub mod ftl;
pub mod host;
pub mod memory;
pub mod nand;
pub mod oracle;
pub mod report;
pub mod run;
pub mod seed;
pub mod timing;
pub mod util;
pub mod violation;
pub mod workload;
