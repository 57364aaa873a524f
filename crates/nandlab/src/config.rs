//! Run configuration: a device (geometry, capacity, DRAM, rules), an FTL and
//! its options, and optionally a default workload — one TOML file.
//!
//! ```toml
//! name = "tiny"
//! source = "where the numbers come from"
//!
//! [geometry]          # see nand::GeometryConfig
//! channels = 2
//! ...
//!
//! [device]
//! logical_sectors = 1000000        # or logical_bytes = "3g", or spare_percent = 7
//! dram_bytes = "64m"
//! factory_bad_block_percent = 0.0
//!
//! [rules]             # severity per NAND rule: allow, warn, error
//! program_out_of_order = "error"
//!
//! [ftl]
//! name = "page"
//! gc_policy = "greedy"
//!
//! [workload]          # fio-style, see workload::synthetic
//! rw = "randwrite"
//!
//! [timing]            # optional: flash and DRAM timing for `perf`, see timing::config
//! read_latency_us = 40
//! ...
//!
//! [host]              # optional: host interface for `perf`, see host::config
//! interface = "nvme"
//! ```
//!
//! Presets are such files shipped in `presets/` and built into the binary.
//! Every error names the file, the line when it can be found, the field and
//! the reason.

use crate::ftl::FtlOptions;
use crate::host::{Host, HostConfig};
use crate::nand::reliability::failures::FailAt;
use crate::nand::reliability::{default_preset, ReliabilitySettings, ReliabilityTable};
use crate::nand::{BlockAddr, Geometry, GeometryConfig};
use crate::seed::rng_for;
use crate::timing::{Timing, TimingConfig};
use crate::util::assignment::override_fields;
use crate::util::size::SizeSpec;
use crate::violation::RuleConfig;
use crate::workload::synthetic::SyntheticSpec;
use rand::RngExt;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The presets shipped with nandlab: (name, TOML text).
pub const PRESETS: &[(&str, &str)] = &[
    ("tiny", include_str!("../../../presets/tiny.toml")),
    ("tiny-timed", include_str!("../../../presets/tiny-timed.toml")),
    ("femu-bbssd", include_str!("../../../presets/femu-bbssd.toml")),
    ("vst-jasmine", include_str!("../../../presets/vst-jasmine.toml")),
    ("mqsim-default", include_str!("../../../presets/mqsim-default.toml")),
    ("mqsim-compat", include_str!("../../../presets/mqsim-compat.toml")),
    ("softssd", include_str!("../../../presets/softssd.toml")),
    ("ssdexplorer-enterprise", include_str!("../../../presets/ssdexplorer-enterprise.toml")),
];

/// A configuration error: where, which field, why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: Option<usize>,
    pub field: String,
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: ", self.file, l)?,
            None => write!(f, "{}: ", self.file)?,
        }
        if self.field.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "`{}`: {}", self.field, self.reason)
        }
    }
}

impl std::error::Error for ConfigError {}

/// The `[device]` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    /// Logical capacity in sectors (exactly one of the three capacity fields).
    pub logical_sectors: Option<u64>,
    /// Logical capacity in bytes (`"3g"`).
    pub logical_bytes: Option<SizeSpec>,
    /// Share of the raw capacity kept as spare: logical = raw × (1 − p/100).
    pub spare_percent: Option<f64>,
    /// Device DRAM available to the FTL, in bytes (`"64m"`).
    pub dram_bytes: Option<SizeSpec>,
    /// Share of blocks marked bad at the factory, placed by the run seed.
    #[serde(default)]
    pub factory_bad_block_percent: f64,
}

/// A configuration file as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub name: Option<String>,
    pub description: Option<String>,
    /// Where the numbers come from (papers, shipped configurations).
    pub source: Option<String>,
    pub geometry: GeometryConfig,
    #[serde(default)]
    pub device: DeviceConfig,
    #[serde(default)]
    pub rules: RuleConfig,
    #[serde(default)]
    pub ftl: toml::Table,
    pub workload: Option<SyntheticSpec>,
    /// Flash and DRAM timing (needed by `perf` only).
    pub timing: Option<TimingConfig>,
    /// Host interface (`perf` only; NVMe PCIe 3.0 x4 when absent).
    pub host: Option<HostConfig>,
    /// Media reliability (off when absent; see [`crate::nand::reliability`]).
    pub reliability: Option<ReliabilityTable>,
}

/// A validated configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: String,
    pub description: String,
    pub source: String,
    pub geometry: Geometry,
    pub logical_sectors: u64,
    pub dram_budget_bytes: u64,
    pub factory_bad_block_percent: f64,
    pub rules: RuleConfig,
    pub ftl_name: String,
    pub ftl_options: FtlOptions,
    /// `[ftl] lib = "PATH"`: an FTL library to load (see
    /// [`crate::ftl::foreign`]), relative to the configuration file's
    /// directory; loading it sets `ftl_name`.
    pub ftl_lib: Option<std::path::PathBuf>,
    pub workload: Option<SyntheticSpec>,
    pub timing: Option<Timing>,
    pub host: Host,
    /// The media reliability model, when on (`[reliability]` or `--reliability`).
    pub reliability: Option<ReliabilitySettings>,
    /// The `[reliability]` table as written (command-line items merge over it).
    reliability_table: Option<ReliabilityTable>,
    /// Where the configuration came from (a path, or `presets/NAME.toml`)
    /// and its text, so checks made after loading still name file and line.
    file: String,
    text: std::sync::Arc<str>,
    /// The `[device]` field that set the logical capacity (errors about it name it).
    capacity_field: &'static str,
    /// Fields set on the command line after loading: (table, key) → how
    /// (e.g. `--ftl-opt gc_policy=x`); errors about them name the option.
    overrides: Vec<((String, String), String)>,
}

/// Default device DRAM when a configuration does not say: 1 GiB.
const DEFAULT_DRAM_BYTES: u64 = 1 << 30;

/// The largest configuration file read: a device is a few dozen lines,
/// and reading is bounded so that `--config /dev/zero` ends at once.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

impl Config {
    /// Load a preset by name.
    pub fn preset(name: &str) -> Result<Config, ConfigError> {
        let (_, text) = PRESETS.iter().find(|(n, _)| *n == name).ok_or_else(|| ConfigError {
            file: "--preset".into(),
            line: None,
            field: String::new(),
            reason: format!(
                "unknown preset `{name}` (available: {})",
                PRESETS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        })?;
        Config::parse(text, &format!("presets/{name}.toml"))
    }

    /// Load a configuration file (at most [`MAX_CONFIG_BYTES`]; a file
    /// that never ends, such as `/dev/zero`, is refused once past it).
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        use std::io::Read;
        let file = path.display().to_string();
        let error = |reason: String| ConfigError { file: file.clone(), line: None, field: String::new(), reason };
        let f = std::fs::File::open(path).map_err(|e| error(format!("cannot read: {e}")))?;
        let mut bytes = Vec::new();
        f.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut bytes).map_err(|e| error(format!("cannot read: {e}")))?;
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            return Err(error(format!(
                "a configuration file is at most {} MiB (this one is larger: not a device configuration?)",
                MAX_CONFIG_BYTES >> 20
            )));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            error(format!("not UTF-8 text (invalid byte at offset {}): not a TOML file?", e.utf8_error().valid_up_to()))
        })?;
        let mut config = Config::parse(&text, &file)?;
        if let Some(lib) = config.ftl_lib.take() {
            let dir = path.parent().unwrap_or(std::path::Path::new(""));
            config.ftl_lib = Some(if lib.is_absolute() { lib } else { dir.join(lib) });
        }
        Ok(config)
    }

    /// Parse and validate configuration text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let raw: ConfigFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            ConfigError { file: file.into(), line, field: String::new(), reason: e.message().trim().to_string() }
        })?;
        let err = |table: &str, key: &str, reason: String| ConfigError {
            file: file.into(),
            line: locate(text, table, key),
            field: if table.is_empty() { key.to_string() } else { format!("{table}.{key}") },
            reason,
        };
        let geometry = raw.geometry.validate().map_err(|e| err("geometry", e.field, e.reason))?;
        let (capacity_field, logical_sectors) =
            logical_capacity(&raw.device, &geometry).map_err(|(k, r)| err("device", k, r))?;
        let dram_budget_bytes = raw.device.dram_bytes.map_or(DEFAULT_DRAM_BYTES, |d| d.resolve(geometry.raw_bytes()));
        let bad = raw.device.factory_bad_block_percent;
        if !(0.0..50.0).contains(&bad) {
            return Err(err("device", "factory_bad_block_percent", "must be within 0..50".into()));
        }
        let timing = raw
            .timing
            .as_ref()
            .map(|t| t.validate(geometry.cell_type().bits_per_cell(), dram_budget_bytes))
            .transpose()
            .map_err(|(k, r)| err("timing", k, r))?;
        let host = raw.host.clone().unwrap_or_default().validate().map_err(|(k, r)| err("host", k, r))?;
        let reliability = raw
            .reliability
            .as_ref()
            .map(|t| t.resolve(default_preset(&geometry), &geometry))
            .transpose()
            .map_err(|(k, r)| err("reliability", &k, r))?;
        let mut ftl_options = raw.ftl.clone();
        let ftl_name = match ftl_options.remove("name") {
            None => "page".to_string(),
            Some(toml::Value::String(s)) => s,
            Some(_) => return Err(err("ftl", "name", "must be a string".into())),
        };
        let ftl_lib = match ftl_options.remove("lib") {
            None => None,
            Some(toml::Value::String(s)) => Some(std::path::PathBuf::from(s)),
            Some(_) => return Err(err("ftl", "lib", "must be a string (the path of an FTL library)".into())),
        };
        Ok(Config {
            name: raw.name.unwrap_or_else(|| file.to_string()),
            description: raw.description.unwrap_or_default(),
            source: raw.source.unwrap_or_default(),
            geometry,
            logical_sectors,
            dram_budget_bytes,
            factory_bad_block_percent: bad,
            rules: raw.rules,
            ftl_name,
            ftl_options,
            ftl_lib,
            workload: raw.workload,
            timing,
            host,
            reliability,
            reliability_table: raw.reliability.clone(),
            file: file.to_string(),
            text: text.into(),
            capacity_field,
            overrides: Vec::new(),
        })
    }

    /// An error about `table.key` of this configuration found after it was
    /// loaded (e.g. a requirement of the FTL chosen on the command line),
    /// naming the file and, where the key is set, its line.
    /// Turn the reliability model on, or change it, from the
    /// `--reliability` option (`preset:tlc,read_retries=3`), its items
    /// over the `[reliability]` table's; and add the exact failures of
    /// `--fail` options. Errors name the option.
    pub fn set_reliability(&mut self, spec: Option<&str>, fails: &[String]) -> Result<(), String> {
        if spec.is_none() && fails.is_empty() {
            return Ok(());
        }
        let mut table = self.reliability_table.clone();
        if let Some(spec) = spec {
            let over = ReliabilityTable::parse_option(spec).map_err(|r| format!("--reliability {spec}: {r}"))?;
            table = Some(table.unwrap_or_default().merged(&over));
        }
        let Some(table) = table else {
            return Err("--fail needs the reliability model on: add --reliability preset:NAME \
                        (or a [reliability] table to the device file)"
                .into());
        };
        let mut settings =
            table.resolve(default_preset(&self.geometry), &self.geometry).map_err(|(k, r)| match spec {
                Some(spec) => format!("--reliability {spec}: `{k}`: {r}"),
                None => self.field_error("reliability", &k, r).to_string(),
            })?;
        for f in fails {
            let at = FailAt::parse(f).map_err(|r| format!("--fail {f}: {r}"))?;
            at.check(self.geometry.blocks(), self.geometry.pages_per_block())
                .map_err(|r| format!("--fail {f}: {r}"))?;
            settings.fail_at.push(at);
        }
        self.reliability = Some(settings);
        Ok(())
    }

    pub fn field_error(&self, table: &str, key: &str, reason: String) -> ConfigError {
        if let Some((_, option)) = self.overrides.iter().find(|((t, k), _)| t == table && k == key) {
            return ConfigError { file: option.clone(), line: None, field: String::new(), reason };
        }
        ConfigError {
            file: self.file.clone(),
            line: locate(&self.text, table, key),
            field: if table.is_empty() { key.to_string() } else { format!("{table}.{key}") },
            reason,
        }
    }

    /// Record that `table.key` was set on the command line by `option`
    /// (`--ftl-opt gc_policy=x`, `--rwmixread 101`): errors about it then
    /// name the option instead of the file.
    pub fn note_override(&mut self, table: &str, key: &str, option: String) {
        self.overrides.retain(|((t, k), _)| !(t == table && k == key));
        self.overrides.push(((table.to_string(), key.to_string()), option));
    }

    /// Forget the command-line origin of every `table` field (an `--ftl`
    /// that replaces the configuration's FTL drops its options).
    pub fn clear_overrides(&mut self, table: &str) {
        self.overrides.retain(|((t, _), _)| t != table);
    }

    /// An error an FTL or the workload reported about this configuration,
    /// placed where the user set the value: `workload option `K`: why` and
    /// `… option `K`: why` (an FTL's) become file:line: `table.K`: why, or
    /// the command-line option that set K; an FTL's complaint about the
    /// logical capacity names the `[device]` field that set it. Other
    /// messages are returned as they are.
    pub fn locate_error(&self, message: &str) -> String {
        if let Some(rest) =
            message.strip_prefix("workload option `").or_else(|| message.strip_prefix("workload options `"))
        {
            if let Some((key, _)) = rest.split_once('`') {
                let reason = rest.split_once(": ").map_or(message, |(_, r)| r);
                let reason = if message.starts_with("workload options") { message } else { reason };
                return self.field_error("workload", key, reason.to_string()).to_string();
            }
        }
        if let Some((_, rest)) = message.split_once("unknown option `") {
            if let Some((key, _)) = rest.split_once('`') {
                return self.field_error("ftl", key, message.to_string()).to_string();
            }
        }
        if let Some((head, rest)) = message.split_once("option `") {
            let head = head.trim();
            if let Some((key, reason)) = rest.split_once("`: ") {
                if !head.contains(' ') || head.starts_with("ftl `") {
                    return self.field_error("ftl", key, reason.to_string()).to_string();
                }
            }
        }
        if message.contains("logical capacity") {
            return self.field_error("device", self.capacity_field, message.to_string()).to_string();
        }
        message.to_string()
    }

    /// The timing of a device, or an error saying that `perf` needs one.
    pub fn require_timing(&self) -> Result<&Timing, String> {
        self.timing.as_ref().ok_or_else(|| {
            format!(
                "device `{}` has no [timing] table, so it cannot be simulated in time; \
                 use a preset with timing (femu-bbssd, mqsim-default, softssd, ssdexplorer-enterprise, tiny-timed) \
                 or add [timing] to the configuration (see presets/mqsim-default.toml)",
                self.name
            )
        })
    }

    /// Set `[timing]` fields from `KEY=VALUE` assignments (`--timing`),
    /// each read through [`TimingConfig`], then validated for this device
    /// (its cell type and DRAM). A device without timing is refused.
    pub fn override_timing(&mut self, assignments: &[String]) -> Result<(), String> {
        let base = self.require_timing()?.config.clone();
        let t: TimingConfig = override_fields("timing", &base, assignments)?;
        let timing = t
            .validate(self.geometry.cell_type().bits_per_cell(), self.dram_budget_bytes)
            .map_err(|(k, r)| format!("--timing {k}: {r}"))?;
        self.timing = Some(timing);
        Ok(())
    }

    /// Set `[host]` fields from `KEY=VALUE` assignments (`--host`), read
    /// through [`HostConfig`] and validated.
    pub fn override_host(&mut self, assignments: &[String]) -> Result<(), String> {
        let h: HostConfig = override_fields("host", &self.host.config, assignments)?;
        self.host = h.validate().map_err(|(k, r)| format!("--host {k}: {r}"))?;
        Ok(())
    }

    pub fn logical_bytes(&self) -> u64 {
        self.logical_sectors * u64::from(self.geometry.sector_size_bytes())
    }

    /// The factory-bad blocks of this device under `seed`.
    pub fn factory_bad_blocks(&self, seed: u64) -> Vec<BlockAddr> {
        if self.factory_bad_block_percent <= 0.0 {
            return Vec::new();
        }
        let mut rng = rng_for(seed, "nand.factory_bad_blocks");
        (0..u64::from(self.geometry.blocks()))
            .filter(|_| rng.random::<f64>() * 100.0 < self.factory_bad_block_percent)
            .map(BlockAddr)
            .collect()
    }
}

fn logical_capacity(d: &DeviceConfig, g: &Geometry) -> Result<(&'static str, u64), (&'static str, String)> {
    let sector = u64::from(g.sector_size_bytes());
    let given = [d.logical_sectors.is_some(), d.logical_bytes.is_some(), d.spare_percent.is_some()];
    if given.iter().filter(|&&x| x).count() > 1 {
        return Err(("logical_sectors", "give only one of logical_sectors, logical_bytes and spare_percent".into()));
    }
    let (field, sectors) = if let Some(s) = d.logical_sectors {
        ("logical_sectors", s)
    } else if let Some(b) = d.logical_bytes {
        let bytes = b.resolve(g.raw_bytes());
        if bytes % sector != 0 {
            return Err(("logical_bytes", format!("{bytes} is not a multiple of the {sector}-byte sector")));
        }
        ("logical_bytes", bytes / sector)
    } else {
        let p = d.spare_percent.unwrap_or(7.0);
        if !(p > 0.0 && p < 90.0) {
            return Err(("spare_percent", "must be within (0, 90)".into()));
        }
        ("spare_percent", (g.raw_sectors() as f64 * (1.0 - p / 100.0)) as u64)
    };
    if sectors == 0 || sectors >= g.raw_sectors() {
        return Err((
            field,
            format!("the logical capacity ({sectors} sectors) must be positive and below the raw {}", g.raw_sectors()),
        ));
    }
    if sectors > u64::from(u32::MAX) {
        // Payload stamps keep LBAs in 32 bits.
        return Err((
            field,
            format!("{sectors} sectors: at most 2^32 - 1 logical sectors are supported (use larger sectors)"),
        ));
    }
    Ok((field, sectors))
}

/// 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// The line where `key` is set inside `[table]` (or at top level if `table` is empty).
fn locate(text: &str, table: &str, key: &str) -> Option<usize> {
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(h) = t.strip_prefix('[') {
            current = h.trim_end_matches(']').trim().to_string();
            continue;
        }
        if current == table {
            if let Some((k, _)) = t.split_once('=') {
                if k.trim() == key {
                    return Some(i + 1);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses_and_cites_a_source() {
        for (name, _) in PRESETS {
            let c = Config::preset(name).unwrap_or_else(|e| panic!("{e}"));
            assert!(!c.source.is_empty(), "{name} has no source");
            assert!(c.logical_sectors < c.geometry.raw_sectors());
        }
    }

    /// A preset's citations must resolve in a fresh clone: no paths outside
    /// the repository, and every published preset described in SOURCES.md.
    #[test]
    fn every_preset_cites_sources_a_clone_has() {
        let sources = include_str!("../../../presets/SOURCES.md");
        for (name, text) in PRESETS {
            let c = Config::preset(name).unwrap();
            assert!(!text.contains("../"), "{name} cites a path outside the repository");
            if !name.starts_with("tiny") {
                assert!(sources.contains(&format!("## {name}\n")), "presets/SOURCES.md describes {name}");
                assert!(c.source.contains("SOURCES.md"), "{name}: {}", c.source);
            }
        }
    }

    /// mqsim-compat is mqsim-default but for what its header says it
    /// changes: one die per chip holding both dies' blocks, dftl with
    /// MQSim's 2 MiB cached mapping table and the `mqsim` scheduler; the
    /// GC settings it mirrors are MQSim's.
    #[test]
    fn mqsim_compat_is_mqsim_default_with_mqsims_mapping_cache_and_scheduler() {
        let base = Config::preset("mqsim-default").unwrap();
        let compat = Config::preset("mqsim-compat").unwrap();
        // One busy unit per MQSim chip: its two dies' blocks on one die.
        let mut merged = base.geometry.config().clone();
        (merged.dies_per_chip, merged.blocks_per_plane) = (1, 2 * merged.blocks_per_plane);
        assert_eq!(compat.geometry.config(), &merged);
        assert_eq!(compat.geometry.raw_bytes(), base.geometry.raw_bytes());
        assert_eq!(compat.logical_sectors, base.logical_sectors);
        assert_eq!(format!("{:?}", compat.host), format!("{:?}", base.host));
        assert_eq!(format!("{:?}", compat.workload), format!("{:?}", base.workload));
        let (t, b) = (compat.timing.clone().unwrap(), base.timing.clone().unwrap());
        assert_eq!(b.scheduler, None, "mqsim-default stays on the reservation model");
        assert_eq!(t.scheduler, Some(crate::timing::scheduler::SchedulerKind::Mqsim));
        let mut t_without_scheduler = t.clone();
        t_without_scheduler.scheduler = None;
        t_without_scheduler.config.scheduler = None;
        assert_eq!(t_without_scheduler, b, "same latencies, channel, suspension and write cache");
        assert_eq!(compat.ftl_name, "dftl");
        let opt = |k: &str| compat.ftl_options.get(k).map(|v| v.to_string());
        assert_eq!(opt("cmt_bytes").as_deref(), Some("\"2MiB\""), "MQSim's CMT_Capacity 2097152");
        for k in ["gc_policy", "gc_foreground_free_percent", "copyback"] {
            assert_eq!(compat.ftl_options.get(k), base.ftl_options.get(k), "{k}");
        }
        assert_eq!(opt("gc_policy").as_deref(), Some("\"d-choices:11\""), "RGA, set size log2(2048)");
        assert_eq!(opt("gc_foreground_free_percent").as_deref(), Some("5"), "GC_Exec_Threshold 0.05");
        assert_eq!(opt("copyback").as_deref(), Some("false"), "Use_Copyback_for_GC false");
        // dftl accepts the options (the preset builds an FTL).
        crate::ftl::dftl::DftlOptions::parse("dftl", &compat.ftl_options).unwrap();
    }

    #[test]
    fn published_capacities_are_reproduced() {
        let femu = Config::preset("femu-bbssd").unwrap();
        assert_eq!(femu.geometry.raw_bytes(), 4 << 30);
        assert_eq!(femu.logical_bytes(), 3 << 30);
        let vst = Config::preset("vst-jasmine").unwrap();
        assert_eq!(vst.geometry.raw_sectors(), 136_052_736);
        assert_eq!(vst.logical_sectors, 124_822_461);
        let mq = Config::preset("mqsim-default").unwrap();
        assert_eq!(mq.geometry.raw_bytes(), 512 << 30);
    }

    #[test]
    fn ftl_and_workload_errors_are_placed_in_the_file_or_on_the_option_that_set_them() {
        let mut c = Config::parse(PRESETS[0].1, "t.toml").unwrap();
        let line = PRESETS[0].1.lines().position(|l| l.starts_with("rwmixread")).unwrap() + 1;
        let e = c.locate_error("workload option `rwmixread`: must be within 0..=100");
        assert_eq!(e, format!("t.toml:{line}: `workload.rwmixread`: must be within 0..=100"));
        c.note_override("workload", "rwmixread", "--rwmixread 101".into());
        assert_eq!(c.locate_error("workload option `rwmixread`: bad"), "--rwmixread 101: bad");
        let e = c.locate_error("ftl `page` option `gc_policy`: unknown victim policy");
        assert!(e.starts_with("t.toml:") && e.ends_with("`ftl.gc_policy`: unknown victim policy"), "{e}");
        assert_eq!(c.locate_error("something else"), "something else");
    }

    #[test]
    fn a_bad_latency_in_a_file_says_what_is_accepted() {
        let text = PRESETS[1].1.replace("read_latency_us = ", "read_latency_us = \"abc\" # ");
        let e = Config::parse(&text, "t.toml").unwrap_err();
        assert!(e.line.is_some() && e.reason.contains("a number (40), or one per page type"), "{e}");
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let text = Config::preset("tiny")
            .map(|_| PRESETS[0].1)
            .unwrap()
            .replace("pages_per_block = 32", "pages_per_block = 0");
        let e = Config::parse(&text, "x.toml").unwrap_err();
        assert_eq!(e.field, "geometry.pages_per_block");
        assert!(e.line.is_some());
        assert!(e.to_string().starts_with("x.toml:"), "{e}");

        let e = Config::parse("[geometry]\nchannels = \"two\"\n", "y.toml").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");

        let e = Config::parse(&format!("{}\nbogus = 1\n", PRESETS[0].1), "z.toml").unwrap_err();
        assert!(e.reason.contains("bogus"), "{e}");
    }
}
