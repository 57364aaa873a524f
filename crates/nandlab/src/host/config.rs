//! The `[host]` table: the host interface and the controller CPU.
//!
//! ```toml
//! [host]
//! interface = "nvme"              # nvme | sata
//! queues = 8                      # NVMe I/O submission queues (SATA: 1)
//! queue_depth = 1024              # per queue, up to 65535 (SATA NCQ: up to 32)
//! pcie_generation = 3             # 1..5: 2.5, 5, 8, 16, 32 GT/s per lane
//! pcie_lanes = 4
//! # pcie_lane_mbps = 1000         # or give the per-lane bandwidth directly (MB/s)
//! # sata_gbps = 6                 # SATA: 1.5, 3 or 6 Gb/s line rate
//! # link_bandwidth_mbps = 3500    # or override the link bandwidth (MB/s)
//! command_overhead_ns = 2000      # per command: doorbell, fetch, completion, interrupt
//! firmware_ns_per_request = 1500  # controller CPU time per request
//! controller_cores = 1            # CPU cores serving requests
//! ```
//!
//! Link bandwidth is the usable data rate after line coding: PCIe 1.x/2.x
//! use 8b/10b (250 and 500 MB/s per lane), 3.x and later 128b/130b (984.6,
//! 1969.2, 3938.5 MB/s per lane); SATA uses 8b/10b (150, 300, 600 MB/s).
//! Packet and protocol overheads beyond line coding are not modelled; give
//! `link_bandwidth_mbps` to use a measured figure. PCIe is full duplex (one
//! timeline per direction); SATA is half duplex (one shared timeline).
//!
//! `command_overhead_ns` and `firmware_ns_per_request` are at most 10^9 ns
//! (1 s): see [`crate::timing`] on the bounds of simulated time.

use serde::{Deserialize, Serialize};

/// The host interface protocol.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Interface {
    #[default]
    Nvme,
    Sata,
}

fn default_queues() -> u32 {
    1
}
fn default_cores() -> u32 {
    1
}

/// The `[host]` table as written. See the module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    #[serde(default)]
    pub interface: Interface,
    /// NVMe I/O submission queues (SATA has one).
    #[serde(default = "default_queues")]
    pub queues: u32,
    /// Commands each queue holds (NVMe up to 65535; SATA NCQ up to 32).
    /// Default: 1024 for NVMe, 32 for SATA.
    pub queue_depth: Option<u32>,
    pub pcie_generation: Option<u32>,
    pub pcie_lanes: Option<u32>,
    /// Per-lane bandwidth in MB/s, instead of the generation's.
    pub pcie_lane_mbps: Option<f64>,
    /// SATA line rate in Gb/s (1.5, 3 or 6).
    pub sata_gbps: Option<f64>,
    /// The link's data bandwidth in MB/s, overriding the computed one.
    pub link_bandwidth_mbps: Option<f64>,
    /// Fixed time per command on top of data transfer (submission doorbell,
    /// command fetch, completion entry, interrupt), ns.
    #[serde(default)]
    pub command_overhead_ns: f64,
    /// Controller firmware time per request, ns, on a controller core.
    #[serde(default)]
    pub firmware_ns_per_request: f64,
    #[serde(default = "default_cores")]
    pub controller_cores: u32,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            interface: Interface::Nvme,
            queues: 1,
            queue_depth: None,
            pcie_generation: Some(3),
            pcie_lanes: Some(4),
            pcie_lane_mbps: None,
            sata_gbps: None,
            link_bandwidth_mbps: None,
            command_overhead_ns: 0.0,
            firmware_ns_per_request: 0.0,
            controller_cores: 1,
        }
    }
}

/// The validated `[host]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub config: HostConfig,
    pub queues: u32,
    pub queue_depth: u32,
    /// Link data bandwidth, bytes per second.
    pub link_bytes_per_s: u64,
    /// Separate timelines for the two directions (PCIe) or one (SATA).
    pub full_duplex: bool,
    pub command_overhead_ns: u64,
    pub firmware_ns: u64,
    pub cores: u32,
}

/// Usable bytes per second of one PCIe lane of a generation.
fn pcie_lane_bytes_per_s(generation: u32) -> Option<u64> {
    Some(match generation {
        1 => 250_000_000,
        2 => 500_000_000,
        // 8 GT/s × 128/130 / 8 bits.
        3 => 984_615_384,
        4 => 1_969_230_769,
        5 => 3_938_461_538,
        _ => return None,
    })
}

impl HostConfig {
    /// Check every field; the error names the field.
    pub fn validate(&self) -> Result<Host, (&'static str, String)> {
        // At most 1 s (crate::timing::MAX_DURATION_NS): far beyond any
        // real controller, and simulated time never overflows.
        let nonneg = |v: f64, f: &'static str| {
            if v.is_finite() && (0.0..=crate::timing::MAX_DURATION_NS as f64).contains(&v) {
                Ok(v.round() as u64)
            } else {
                Err((f, format!("{v}: must be between 0 and 10^9 ns (1 s)")))
            }
        };
        let command_overhead_ns = nonneg(self.command_overhead_ns, "command_overhead_ns")?;
        let firmware_ns = nonneg(self.firmware_ns_per_request, "firmware_ns_per_request")?;
        if !(1..=256).contains(&self.controller_cores) {
            return Err(("controller_cores", "must be within 1..=256".into()));
        }
        let (queues, queue_depth) = match self.interface {
            Interface::Nvme => {
                if !(1..=65535).contains(&self.queues) {
                    return Err(("queues", "NVMe allows 1..=65535 I/O queues".into()));
                }
                let d = self.queue_depth.unwrap_or(1024);
                if !(1..=65535).contains(&d) {
                    return Err(("queue_depth", "NVMe allows 1..=65535 per queue".into()));
                }
                (self.queues, d)
            }
            Interface::Sata => {
                if self.queues != 1 {
                    return Err(("queues", "SATA has one command queue".into()));
                }
                let d = self.queue_depth.unwrap_or(32);
                if !(1..=32).contains(&d) {
                    return Err(("queue_depth", "SATA NCQ allows 1..=32".into()));
                }
                (1, d)
            }
        };
        let link_bytes_per_s = self.link_bytes_per_s()?;
        Ok(Host {
            config: self.clone(),
            queues,
            queue_depth,
            link_bytes_per_s,
            full_duplex: self.interface == Interface::Nvme,
            command_overhead_ns,
            firmware_ns,
            cores: self.controller_cores,
        })
    }

    fn link_bytes_per_s(&self) -> Result<u64, (&'static str, String)> {
        let mbps = |v: f64, f: &'static str| {
            if v.is_finite() && v >= 1.0 {
                Ok((v * 1e6).round() as u64)
            } else {
                Err((f, format!("{v}: must be at least 1 MB/s")))
            }
        };
        if let Some(v) = self.link_bandwidth_mbps {
            return mbps(v, "link_bandwidth_mbps");
        }
        match self.interface {
            Interface::Nvme => {
                let lanes = self
                    .pcie_lanes
                    .ok_or(("pcie_lanes", "NVMe needs pcie_lanes (or link_bandwidth_mbps)".to_string()))?;
                if !(1..=32).contains(&lanes) {
                    return Err(("pcie_lanes", "must be within 1..=32".into()));
                }
                let lane = match (self.pcie_lane_mbps, self.pcie_generation) {
                    (Some(v), _) => mbps(v, "pcie_lane_mbps")?,
                    (None, Some(g)) => {
                        pcie_lane_bytes_per_s(g).ok_or(("pcie_generation", format!("{g}: must be within 1..=5")))?
                    }
                    (None, None) => {
                        return Err(("pcie_generation", "NVMe needs pcie_generation or pcie_lane_mbps".into()))
                    }
                };
                Ok(lane.saturating_mul(u64::from(lanes)))
            }
            Interface::Sata => match self.sata_gbps {
                // 8b/10b: 10 line bits per byte.
                Some(g) if [1.5, 3.0, 6.0].contains(&g) => Ok((g * 1e8).round() as u64),
                Some(g) => Err(("sata_gbps", format!("{g}: must be 1.5, 3 or 6"))),
                None => Err(("sata_gbps", "SATA needs sata_gbps (or link_bandwidth_mbps)".into())),
            },
        }
    }
}

impl Host {
    /// Link time to move `bytes`, ns (rounded up).
    pub fn link_ns(&self, bytes: u64) -> u64 {
        ((u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(self.link_bytes_per_s))) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_bandwidth_follows_generation_lanes_and_sata_rate() {
        let nvme = HostConfig { pcie_generation: Some(2), pcie_lanes: Some(8), ..Default::default() };
        assert_eq!(nvme.validate().unwrap().link_bytes_per_s, 4_000_000_000);
        let sata = HostConfig {
            interface: Interface::Sata,
            sata_gbps: Some(6.0),
            pcie_generation: None,
            pcie_lanes: None,
            ..Default::default()
        };
        let h = sata.validate().unwrap();
        assert_eq!(h.link_bytes_per_s, 600_000_000);
        assert_eq!((h.queues, h.queue_depth, h.full_duplex), (1, 32, false));
        assert_eq!(h.link_ns(4096), 6827);
    }

    #[test]
    fn host_times_past_one_second_are_refused_with_the_bound() {
        for v in [1e20, 1e18, 1e12, 1.5e9, -1.0, f64::NAN] {
            let c = HostConfig { command_overhead_ns: v, ..Default::default() };
            let e = c.validate().unwrap_err();
            assert_eq!(e.0, "command_overhead_ns");
            assert!(e.1.contains("10^9 ns (1 s)"), "{v}: {}", e.1);
            let f = HostConfig { firmware_ns_per_request: v, ..Default::default() };
            assert_eq!(f.validate().unwrap_err().0, "firmware_ns_per_request", "{v}");
        }
        let ok = HostConfig { firmware_ns_per_request: 1e9, ..Default::default() };
        assert_eq!(ok.validate().unwrap().firmware_ns, 1_000_000_000);
    }

    #[test]
    fn queue_limits_are_the_protocols() {
        let deep = HostConfig { queue_depth: Some(65536), ..Default::default() };
        assert_eq!(deep.validate().unwrap_err().0, "queue_depth");
        let ncq = HostConfig {
            interface: Interface::Sata,
            sata_gbps: Some(3.0),
            queue_depth: Some(33),
            ..Default::default()
        };
        assert_eq!(ncq.validate().unwrap_err().0, "queue_depth");
    }
}
