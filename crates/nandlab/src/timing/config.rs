//! The `[timing]` table: flash cell and channel timings, suspend, and the
//! device DRAM (write cache and its bandwidth).
//!
//! ```toml
//! [timing]
//! read_latency_us = 75              # tR; or one value per page type: [lsb, msb]
//! program_latency_us = [500, 2100]  # tPROG per page type (MLC: LSB, MSB)
//! erase_latency_us = 3800           # tBERS
//! channel_rate_mtps = 333           # ONFI NV-DDR2: mega-transfers per second
//! channel_width_bytes = 1           # bytes per transfer (8-bit bus: 1)
//! command_latency_ns = 0            # channel time for command + address cycles, per operation
//! cache_program = true              # data-in of a program overlaps the die's previous program
//! cache_read = true                 # data-out of a read overlaps the plane's next tR
//! erase_suspend = true              # a read may suspend an erase on its die
//! erase_suspend_latency_us = 700    # time to suspend (and resume) an erase
//! write_cache = "write_back"        # none | write_through | write_back
//! write_cache_bytes = "256m"        # taken from [device] dram_bytes
//! dram_bandwidth_mbps = 1600        # device DRAM bandwidth, MB/s (10^6 bytes)
//! ```
//!
//! Page types follow the bit a page holds in its word line (see
//! [`crate::nand::geometry`]): SLC has one latency, MLC `[lsb, msb]`, TLC
//! `[lsb, csb, msb]`, QLC four values in bit order. A single number applies
//! to every type.
//!
//! Every latency is at most 10^6 µs and `command_latency_ns` at most 10^9
//! ns (1 s both): see [`crate::timing`] on the bounds of simulated time.

use crate::util::size::SizeSpec;
use serde::{Deserialize, Serialize};

/// A latency for every page type, or one per page type in bit order.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PerPageType {
    All(f64),
    ByType(Vec<f64>),
}

/// Read by hand rather than derived (untagged): a wrong value then says what
/// is accepted, not "data did not match any variant of untagged enum".
impl<'de> Deserialize<'de> for PerPageType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = PerPageType;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a latency in microseconds: a number (40), or one per page type in bit order ([40, 60])")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<PerPageType, E> {
                Ok(PerPageType::All(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PerPageType, E> {
                Ok(PerPageType::All(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PerPageType, E> {
                Ok(PerPageType::All(v as f64))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<PerPageType, A::Error> {
                let mut values = Vec::new();
                while let Some(v) = seq.next_element::<f64>()? {
                    values.push(v);
                }
                Ok(PerPageType::ByType(values))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl PerPageType {
    /// The latency of the page holding bit `level` of its word line, in ns.
    fn ns(&self, level: u32) -> u64 {
        match self {
            PerPageType::All(v) => us_to_ns(*v),
            PerPageType::ByType(v) => us_to_ns(v[level as usize]),
        }
    }

    fn check(&self, bits_per_cell: u32) -> Result<(), String> {
        let values: &[f64] = match self {
            PerPageType::All(v) => std::slice::from_ref(v),
            PerPageType::ByType(v) => {
                if v.len() != bits_per_cell as usize {
                    return Err(format!(
                        "give one value, or one per page type ({bits_per_cell} for this cell type), not {}",
                        v.len()
                    ));
                }
                v
            }
        };
        for v in values {
            check_latency(*v)?;
        }
        Ok(())
    }
}

/// A latency in µs: at most [`super::MAX_DURATION_NS`] (1 s).
fn check_latency(v: f64) -> Result<(), String> {
    if !(v.is_finite() && (0.0..=super::MAX_DURATION_NS as f64 / 1000.0).contains(&v)) {
        return Err(format!("{v}: must be a latency between 0 and 10^6 µs (1 s)"));
    }
    Ok(())
}

/// Microseconds (as configured) to whole nanoseconds.
pub fn us_to_ns(us: f64) -> u64 {
    (us * 1000.0).round() as u64
}

/// What the device DRAM write cache does with host writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum WriteCacheMode {
    /// Writes go straight to the FTL and complete when flash does.
    #[default]
    None,
    /// Writes go to the FTL at once and complete when flash does; a clean
    /// copy stays in DRAM and serves later reads.
    WriteThrough,
    /// Writes complete when their data is in DRAM (volatile until a flush);
    /// dirty pages go to the FTL when evicted.
    WriteBack,
}

impl WriteCacheMode {
    pub fn name(self) -> &'static str {
        match self {
            WriteCacheMode::None => "none",
            WriteCacheMode::WriteThrough => "write_through",
            WriteCacheMode::WriteBack => "write_back",
        }
    }
}

impl std::str::FromStr for WriteCacheMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(WriteCacheMode::None),
            "write_through" | "write-through" => Ok(WriteCacheMode::WriteThrough),
            "write_back" | "write-back" => Ok(WriteCacheMode::WriteBack),
            other => Err(format!("unknown write cache mode `{other}` (none, write_through, write_back)")),
        }
    }
}

fn default_width() -> u32 {
    1
}
fn default_true() -> bool {
    true
}
fn default_watermark() -> f64 {
    0.9
}

/// The `[timing]` table as written. See the module docs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimingConfig {
    /// tR: array read into the page register, µs.
    pub read_latency_us: PerPageType,
    /// tPROG: page register into the array, µs.
    pub program_latency_us: PerPageType,
    /// tBERS: block erase, µs.
    pub erase_latency_us: f64,
    /// Channel transfer rate in mega-transfers per second (ONFI NV-DDR2
    /// 400 MT/s, …); 0 makes transfers take no time (FEMU's model).
    pub channel_rate_mtps: f64,
    /// Bytes per transfer (an 8-bit bus moves 1).
    #[serde(default = "default_width")]
    pub channel_width_bytes: u32,
    /// Channel time of the command and address cycles of each operation, ns.
    #[serde(default)]
    pub command_latency_ns: f64,
    /// Cache program: a program's data-in transfer may overlap the die's
    /// previous cell operation (false: the die is held from data-in start).
    #[serde(default = "default_true")]
    pub cache_program: bool,
    /// Cache read: a read's data-out from the cache register overlaps the
    /// next tR on the same plane (false: the plane is held until data-out ends).
    #[serde(default = "default_true")]
    pub cache_read: bool,
    /// A read may suspend a program on its die.
    #[serde(default)]
    pub program_suspend: bool,
    /// A read may suspend an erase on its die.
    #[serde(default)]
    pub erase_suspend: bool,
    /// Time to suspend a program and later resume it, µs.
    #[serde(default)]
    pub program_suspend_latency_us: f64,
    /// Time to suspend an erase and later resume it, µs.
    #[serde(default)]
    pub erase_suspend_latency_us: f64,
    /// The device DRAM write cache.
    #[serde(default)]
    pub write_cache: WriteCacheMode,
    /// Capacity of the write cache, taken from `[device] dram_bytes` (the
    /// FTL's mapping tables and caches get the rest).
    pub write_cache_bytes: Option<SizeSpec>,
    /// Start evicting dirty pages when this share of the cache is dirty.
    #[serde(default = "default_watermark")]
    pub write_cache_flush_watermark: f64,
    /// Device DRAM bandwidth for cache copies, MB/s (10^6 bytes); 0: unlimited.
    #[serde(default)]
    pub dram_bandwidth_mbps: f64,
    /// Which timing core times `perf`'s flash work: `reservation` (the
    /// default, [`super::flash_model`]) or the event core
    /// ([`super::event_core`]) with the scheduler `fifo`, `mqsim` or
    /// `read-priority`. Absent: reservation (and not written back, so
    /// echoed configurations stay as they were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
}

/// A validation failure: the field and the reason.
pub type FieldError = (&'static str, String);

/// The validated `[timing]` table, in nanoseconds and bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    pub config: TimingConfig,
    /// Per word-line bit (0 = LSB): tR and tPROG in ns.
    pub read_ns_by_level: Vec<u64>,
    pub program_ns_by_level: Vec<u64>,
    pub erase_ns: u64,
    /// Channel bytes per µs (MB/s); 0: transfers take no time.
    pub channel_bytes_per_us: u64,
    pub command_ns: u64,
    pub program_suspend_ns: u64,
    pub erase_suspend_ns: u64,
    pub write_cache_bytes: u64,
    /// DRAM bytes per µs; 0: unlimited.
    pub dram_bytes_per_us: u64,
    /// The event core's scheduler; `None`: the reservation model.
    pub scheduler: Option<super::scheduler::SchedulerKind>,
}

impl TimingConfig {
    /// Check every field for a device of `bits_per_cell` bits per cell and
    /// `dram_bytes` of DRAM.
    pub fn validate(&self, bits_per_cell: u32, dram_bytes: u64) -> Result<Timing, FieldError> {
        self.read_latency_us.check(bits_per_cell).map_err(|e| ("read_latency_us", e))?;
        self.program_latency_us.check(bits_per_cell).map_err(|e| ("program_latency_us", e))?;
        check_latency(self.erase_latency_us).map_err(|e| ("erase_latency_us", e))?;
        check_latency(self.program_suspend_latency_us).map_err(|e| ("program_suspend_latency_us", e))?;
        check_latency(self.erase_suspend_latency_us).map_err(|e| ("erase_suspend_latency_us", e))?;
        if !(self.command_latency_ns.is_finite()
            && (0.0..=super::MAX_DURATION_NS as f64).contains(&self.command_latency_ns))
        {
            return Err((
                "command_latency_ns",
                format!("{}: must be between 0 and 10^9 ns (1 s)", self.command_latency_ns),
            ));
        }
        if !(self.channel_rate_mtps.is_finite() && self.channel_rate_mtps >= 0.0) {
            return Err(("channel_rate_mtps", "must be a non-negative number (0: transfers take no time)".into()));
        }
        if !(1..=8).contains(&self.channel_width_bytes) {
            return Err(("channel_width_bytes", "must be within 1..=8".into()));
        }
        let bytes_per_us = self.channel_rate_mtps * f64::from(self.channel_width_bytes);
        if self.channel_rate_mtps > 0.0 && bytes_per_us.round() < 1.0 {
            return Err(("channel_rate_mtps", "must be at least 1 MT/s".into()));
        }
        if !(self.dram_bandwidth_mbps.is_finite() && self.dram_bandwidth_mbps >= 0.0) {
            return Err(("dram_bandwidth_mbps", "must be a non-negative number (0: unlimited)".into()));
        }
        if self.dram_bandwidth_mbps > 0.0 && self.dram_bandwidth_mbps.round() < 1.0 {
            // It would round to 0, which means unlimited.
            return Err((
                "dram_bandwidth_mbps",
                format!("{}: must be 0 (unlimited) or at least 1 MB/s", self.dram_bandwidth_mbps),
            ));
        }
        if !(self.write_cache_flush_watermark > 0.0 && self.write_cache_flush_watermark <= 1.0) {
            return Err(("write_cache_flush_watermark", "must be within (0, 1]".into()));
        }
        let write_cache_bytes = match (self.write_cache, self.write_cache_bytes) {
            (WriteCacheMode::None, _) => 0,
            (_, None) => {
                return Err((
                    "write_cache_bytes",
                    format!("write_cache = \"{}\" needs a capacity (e.g. \"256m\")", self.write_cache.name()),
                ))
            }
            (_, Some(s)) => {
                let b = s.resolve(dram_bytes);
                if b == 0 || b >= dram_bytes {
                    return Err((
                        "write_cache_bytes",
                        format!("{b} bytes: must be positive and less than the device DRAM ({dram_bytes} bytes)"),
                    ));
                }
                b
            }
        };
        let scheduler = match self.scheduler.as_deref() {
            None | Some("reservation") => None,
            Some(name) => Some(name.parse().map_err(|_| {
                ("scheduler", format!("unknown scheduler `{name}` (reservation, fifo, mqsim, read-priority)"))
            })?),
        };
        Ok(Timing {
            scheduler,
            read_ns_by_level: (0..bits_per_cell).map(|l| self.read_latency_us.ns(l)).collect(),
            program_ns_by_level: (0..bits_per_cell).map(|l| self.program_latency_us.ns(l)).collect(),
            erase_ns: us_to_ns(self.erase_latency_us),
            channel_bytes_per_us: bytes_per_us.round() as u64,
            command_ns: self.command_latency_ns.round() as u64,
            program_suspend_ns: us_to_ns(self.program_suspend_latency_us),
            erase_suspend_ns: us_to_ns(self.erase_suspend_latency_us),
            write_cache_bytes,
            dram_bytes_per_us: self.dram_bandwidth_mbps.round() as u64,
            config: self.clone(),
        })
    }
}

impl Timing {
    /// Channel time to move `bytes`, ns (rounded up).
    pub fn channel_ns(&self, bytes: u64) -> u64 {
        transfer_ns(bytes, self.channel_bytes_per_us)
    }
    /// DRAM time to move `bytes`, ns (rounded up).
    pub fn dram_ns(&self, bytes: u64) -> u64 {
        transfer_ns(bytes, self.dram_bytes_per_us)
    }
}

/// Time to move `bytes` at `bytes_per_us` (MB/s), rounded up to whole ns;
/// 0 when the rate is 0 (unlimited).
pub fn transfer_ns(bytes: u64, bytes_per_us: u64) -> u64 {
    if bytes_per_us == 0 {
        0
    } else {
        (bytes * 1000).div_ceil(bytes_per_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> TimingConfig {
        toml::from_str(
            "read_latency_us = 50\nprogram_latency_us = [500, 1500]\nerase_latency_us = 3000\nchannel_rate_mtps = 400\n",
        )
        .unwrap()
    }

    #[test]
    fn page_type_latencies_expand_per_bit() {
        let t = base().validate(2, 1 << 30).unwrap();
        assert_eq!(t.read_ns_by_level, vec![50_000, 50_000]);
        assert_eq!(t.program_ns_by_level, vec![500_000, 1_500_000]);
        assert_eq!(t.channel_ns(4096), 10_240);
    }

    #[test]
    fn wrong_number_of_page_types_names_the_field() {
        let e = base().validate(3, 1 << 30).unwrap_err();
        assert_eq!(e.0, "program_latency_us");
        assert!(e.1.contains("3 for this cell type"), "{}", e.1);
    }

    #[test]
    fn durations_past_one_second_are_refused_with_the_bound() {
        for (key, value) in [
            ("read_latency_us", "1e9"),
            ("program_latency_us", "[500, 1e9]"),
            ("erase_latency_us", "2e6"),
            ("erase_suspend_latency_us", "1e7"),
            ("command_latency_ns", "1e20"),
            ("command_latency_ns", "1e12"),
        ] {
            let mut table: toml::Table = toml::Value::try_from(base()).unwrap().try_into().unwrap();
            table.insert(key.into(), toml::from_str::<toml::Table>(&format!("v = {value}")).unwrap()["v"].clone());
            let c: TimingConfig = toml::Value::Table(table).try_into().unwrap();
            let e = c.validate(2, 1 << 30).unwrap_err();
            assert_eq!(e.0, key, "{value}");
            assert!(e.1.contains("(1 s)"), "{key} = {value}: {}", e.1);
        }
        let mut c = base();
        c.read_latency_us = PerPageType::All(1e6);
        c.command_latency_ns = 1e9;
        assert_eq!(c.validate(2, 1 << 30).unwrap().read_ns_by_level, vec![1_000_000_000; 2], "1 s is allowed");
    }

    #[test]
    fn the_scheduler_is_reservation_by_default_and_a_bad_name_lists_the_choices() {
        assert_eq!(base().validate(2, 1 << 30).unwrap().scheduler, None);
        let mut c = base();
        c.scheduler = Some("reservation".into());
        assert_eq!(c.validate(2, 1 << 30).unwrap().scheduler, None);
        c.scheduler = Some("mqsim".into());
        assert_eq!(c.validate(2, 1 << 30).unwrap().scheduler, Some(super::super::scheduler::SchedulerKind::Mqsim));
        c.scheduler = Some("lifo".into());
        let e = c.validate(2, 1 << 30).unwrap_err();
        assert_eq!(e.0, "scheduler");
        assert!(e.1.contains("`lifo`") && e.1.contains("reservation, fifo, mqsim, read-priority"), "{}", e.1);
        assert!(!toml::to_string(&base()).unwrap().contains("scheduler"), "absent stays absent");
    }

    #[test]
    fn a_dram_bandwidth_that_would_round_to_unlimited_is_refused() {
        let mut c = base();
        c.dram_bandwidth_mbps = 0.4;
        let e = c.validate(2, 1 << 30).unwrap_err();
        assert_eq!(e.0, "dram_bandwidth_mbps");
        assert!(e.1.contains("at least 1 MB/s"), "{}", e.1);
    }

    #[test]
    fn a_write_cache_needs_a_size_that_fits_the_dram() {
        let mut c = base();
        c.write_cache = WriteCacheMode::WriteBack;
        assert_eq!(c.validate(2, 1 << 30).unwrap_err().0, "write_cache_bytes");
        c.write_cache_bytes = Some(SizeSpec::Bytes(2 << 30));
        assert_eq!(c.validate(2, 1 << 30).unwrap_err().0, "write_cache_bytes");
        c.write_cache_bytes = Some(SizeSpec::Bytes(1 << 20));
        assert_eq!(c.validate(2, 1 << 30).unwrap().write_cache_bytes, 1 << 20);
    }
}
