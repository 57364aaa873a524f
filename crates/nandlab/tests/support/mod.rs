//! Shared helpers for the integration tests.
#![allow(dead_code)]

pub mod model;

/// The `Ftl` methods a test wrapper does not intercept, forwarded to its
/// `inner` FTL: write the ones the test is about, then
/// `forward_ftl_methods!(info, read, ...)` for the rest.
#[allow(unused_macros)] // not every test crate wraps an FTL
macro_rules! forward_ftl_methods {
    ($($method:ident),* $(,)?) => { $(forward_ftl_methods!(@one $method);)* };
    (@one info) => { fn info(&self) -> nandlab::ftl::FtlInfo { self.inner.info() } };
    (@one stats) => { fn stats(&self) -> nandlab::ftl::FtlStats { self.inner.stats() } };
    (@one format) => { fn format(&mut self, flash: &mut dyn nandlab::flash::Flash) -> Result<(), nandlab::ftl::FtlError> { self.inner.format(flash) } };
    (@one mount) => { fn mount(&mut self, flash: &mut dyn nandlab::flash::Flash) -> Result<(), nandlab::ftl::FtlError> { self.inner.mount(flash) } };
    (@one flush) => { fn flush(&mut self, flash: &mut dyn nandlab::flash::Flash) -> Result<(), nandlab::ftl::FtlError> { self.inner.flush(flash) } };
    (@one shutdown) => { fn shutdown(&mut self, flash: &mut dyn nandlab::flash::Flash) -> Result<(), nandlab::ftl::FtlError> { self.inner.shutdown(flash) } };
    (@one idle) => {
        fn idle(&mut self, flash: &mut dyn nandlab::flash::Flash) -> Result<nandlab::ftl::IdleOutcome, nandlab::ftl::FtlError> {
            self.inner.idle(flash)
        }
    };
    (@one read) => {
        fn read(&mut self, flash: &mut dyn nandlab::flash::Flash, req: &nandlab::ftl::IoRequest) -> Result<(), nandlab::ftl::FtlError> {
            self.inner.read(flash, req)
        }
    };
    (@one write) => {
        fn write(
            &mut self,
            flash: &mut dyn nandlab::flash::Flash,
            req: &nandlab::ftl::IoRequest,
        ) -> Result<nandlab::ftl::Durability, nandlab::ftl::FtlError> {
            self.inner.write(flash, req)
        }
    };
    (@one trim) => {
        fn trim(&mut self, flash: &mut dyn nandlab::flash::Flash, lba: u64, sectors: u64) -> Result<(), nandlab::ftl::FtlError> {
            self.inner.trim(flash, lba, sectors)
        }
    };
}
#[allow(unused_imports)]
pub(crate) use forward_ftl_methods;

use nandlab::config::Config;
use nandlab::report::StressReport;
use nandlab::run::stress::{self, StressOptions};
use nandlab::run::FtlFactory;
use nandlab::workload::synthetic::{SyntheticSpec, SyntheticWorkload};
use nandlab::workload::Workload;

/// The `tiny` preset (64 MiB raw) and its default mixed workload.
pub fn tiny() -> Config {
    Config::preset("tiny").expect("tiny preset")
}

/// One plane of `blocks` blocks of `pages_per_block` 4-KiB pages (one
/// sector a page), `logical_pages` of them visible to the host, and the
/// FTL table `ftl` (the lines after `[ftl]`): the devices of the analytic
/// WAF models.
pub fn single_plane_device(blocks: u64, pages_per_block: u64, logical_pages: f64, ftl: &str) -> Config {
    let text = format!(
        r#"
[geometry]
channels = 1
chips_per_channel = 1
dies_per_chip = 1
planes_per_die = 1
blocks_per_plane = {blocks}
pages_per_block = {pages_per_block}
page_size_bytes = 4096
oob_size_bytes = 64
sector_size_bytes = 4096
[device]
logical_sectors = {}
[ftl]
{ftl}
"#,
        logical_pages.floor()
    );
    Config::parse(&text, "single-plane.toml").unwrap()
}

/// The harshest of the stress workloads: random reads and writes from 512 B
/// to 16 KiB at any sector, a flush every 16 requests and 10 % trims,
/// writing `write_size` in all.
pub fn mixed_with_flush_and_trim(write_size: Option<nandlab::util::size::SizeSpec>) -> SyntheticSpec {
    SyntheticSpec {
        rw: nandlab::workload::synthetic::RwMode::RandRw,
        rwmixread: 30,
        bsrange: Some("512-16k".into()),
        blockalign: Some(nandlab::util::size::SizeSpec::Bytes(512)),
        fsync: 16,
        trim_percent: 10.0,
        write_size,
        ..SyntheticSpec::default()
    }
}

pub fn workload(config: &Config, spec: &SyntheticSpec, seed: u64) -> SyntheticWorkload {
    SyntheticWorkload::new(spec, config.logical_bytes(), config.geometry.sector_size_bytes(), seed).expect("workload")
}

/// Run a stress test of the configured FTL with `spec`.
pub fn stress(config: &Config, spec: &SyntheticSpec, opts: &StressOptions) -> StressReport {
    let mut w = workload(config, spec, opts.seed);
    stress::run(config, &mut w, opts, &mut |_| {}).expect("run")
}

/// Run a stress test of the FTL `factory` builds.
pub fn stress_with(config: &Config, factory: FtlFactory, spec: &SyntheticSpec, opts: &StressOptions) -> StressReport {
    let mut w = workload(config, spec, opts.seed);
    stress::run_with_factory(config, factory, &mut w, opts, &mut |_| {}).expect("run")
}

/// Stress `config` (seed 5) with its FTL built with the deliberate bug
/// `mutant` (`Mutant::None`: the FTL as it is), remounting and verifying
/// at the end when `remount`.
pub fn stress_mutated(
    config: &Config,
    mutant: nandlab::ftl::mutants::Mutant,
    spec: &SyntheticSpec,
    remount: bool,
) -> StressReport {
    let (ftl, options) = (config.ftl_name.clone(), config.ftl_options.clone());
    let factory: FtlFactory = Box::new(move |env| nandlab::ftl::mutants::build_mutated(&ftl, env, &options, mutant));
    let o = StressOptions { remount_verify: remount, ..opts(5) };
    stress_with(config, factory, spec, &o)
}

/// The rule of a report's first error (there must be one).
pub fn first_error(r: &StressReport) -> nandlab::violation::Rule {
    use nandlab::violation::Severity;
    r.violations.iter().find(|v| v.severity == Severity::Error).map(|v| v.rule).expect("an error")
}

pub fn opts(seed: u64) -> StressOptions {
    StressOptions { seed, ..StressOptions::default() }
}

/// The preset's own workload.
pub fn preset_workload(config: &Config) -> SyntheticSpec {
    config.workload.clone().expect("preset has a workload")
}

/// Assert a run found nothing, showing the violations if it did.
pub fn assert_clean(r: &StressReport) {
    assert_eq!(r.errors, 0, "violations: {:#?}", r.violations);
    assert!(r.stopped_early.is_none(), "stopped early: {:?}", r.stopped_early);
}

/// Run a workload through a workload trait object (for custom sequences).
pub fn drain(w: &mut dyn Workload) -> Vec<nandlab::workload::HostRequest> {
    let mut v = Vec::new();
    while let Some(r) = w.next_request().unwrap() {
        v.push(r);
    }
    v
}

/// A public trace the repository carries in `tests/data/traces/` (see its
/// SOURCES.md for origin and licence).
pub fn public_trace(name: &str) -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/traces").join(name);
    assert!(path.exists(), "{} is missing from the repository", path.display());
    path
}
