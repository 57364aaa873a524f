//! The host interface: submission queues and their depth, the link to the
//! host, and how requests arrive.
//!
//! - [`config`]: the `[host]` table — NVMe (N queues × depth up to 65,535)
//!   or SATA NCQ (one queue of up to 32), link bandwidth from the PCIe
//!   generation and lanes or the SATA rate, a fixed per-command overhead,
//!   and the controller firmware's time per request on the controller CPU.
//! - [`queues`]: admission to a submission queue; a request that finds its
//!   queue full waits for the oldest outstanding command of that queue.
//! - [`arrival`]: closed loop (fio's `iodepth` per job: a job's next
//!   request arrives when one of its outstanding requests completes), open
//!   loop from trace timestamps (scaled), or open loop at a fixed rate
//!   (fio's `rate_iops`, evenly spaced or Poisson).
//! - [`flow`]: a timed run's flows as `--flow` writes them (a synthetic
//!   job over the run's workload, or a trace), each with its arrival.
//! - [`nbd`]: the NBD protocol, the host interface of `serve` (real
//!   clients: the kernel, qemu, libnbd, fio).

pub mod arrival;
pub mod config;
pub mod flow;
pub mod nbd;
pub mod queues;

pub use arrival::Arrival;
pub use config::{Host, HostConfig, Interface};
pub use queues::SubmissionQueues;
