//! Crash campaigns: correct FTLs pass the guarantee they claim, and every
//! deliberately broken recovery is caught by the checker that should.

mod support;

use nandlab::config::Config;
use nandlab::ftl::crash_bugs::CrashBug;
use nandlab::ftl::optr::{OptrFtl, OptrOptions};
use nandlab::ftl::page::{PageFtl, PageOptions};
use nandlab::ftl::Guarantee;
use nandlab::run::crash::SharedFactory;
use nandlab::run::crash::{self, CrashOptions, CrashReport, Phase, PointSelection};
use nandlab::violation::Rule;
use nandlab::workload::size::SizeSpec;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use std::sync::Arc;
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
    assert!(r.points.iter().any(|p| p.recovery_cut.is_some()), "recoveries were cut too");
}

#[test]
fn page_passes_baseline_on_multi_plane_groups_narrowed_by_bad_blocks() {
    // tiny has 2 planes per die: multi-plane groups by default; some lose a block.
    let mut config = tiny();
    config.factory_bad_block_percent = 5.0;
    let r = campaign(&config, &mixed(), &options(2, 120));
    assert_passes(&r);
    assert!(r.points.iter().any(|p| p.torn_pages > 0), "some cut tore a program");
}

/// A factory for `page` with a deliberate crash bug.
fn page_with(bug: CrashBug) -> SharedFactory {
    Arc::new(move |env| {
        let ftl = PageFtl::new(env, PageOptions::default())?.with_crash_bug(bug);
        Ok(Box::new(ftl) as Box<dyn nandlab::ftl::Ftl>)
    })
}

fn caught_by(r: &CrashReport, rules: &[Rule]) {
    assert!(r.failed > 0, "the bug was not caught:\n{}", r.summary());
    assert!(r.failed_by_kind.keys().any(|k| rules.contains(k)), "caught, but not by {rules:?}:\n{}", r.summary());
}

#[test]
fn recovery_that_trusts_a_torn_page_is_caught() {
    let config = tiny();
    let mut o = options(2, 80);
    o.phase = Phase::During;
    let r = crash::run_with_factory(&config, page_with(CrashBug::TrustsTornPage), &mixed(), &o).unwrap();
    caught_by(&r, &[Rule::FtlError, Rule::CorruptRead]);
}

#[test]
fn recovery_that_ignores_sequence_numbers_lets_an_old_copy_win() {
    let config = tiny();
    let r = crash::run_with_factory(&config, page_with(CrashBug::IgnoresSequenceNumbers), &mixed(), &options(3, 40))
        .unwrap();
    caught_by(&r, &[Rule::LostDurableWrite]);
}

#[test]
fn recovery_that_breaks_when_itself_cut_is_caught_only_with_nested_cuts() {
    let config = tiny();
    let mut o = options(4, 80);
    o.nested = false;
    let calm = crash::run_with_factory(&config, page_with(CrashBug::RecoveryNotCrashSafe), &mixed(), &o).unwrap();
    assert_passes(&calm);
    o.nested = true;
    let r = crash::run_with_factory(&config, page_with(CrashBug::RecoveryNotCrashSafe), &mixed(), &o).unwrap();
    caught_by(&r, &[Rule::LostDurableWrite]);
}

/// Multi-page writes striped over every die, no trims or flushes.
fn striped_writes() -> SyntheticSpec {
    spec(|s| {
        s.rw = RwMode::RandWrite;
        s.bs = SizeSpec::Bytes(32 << 10);
        s.write_size = Some(SizeSpec::TimesCapacity(0.3));
    })
}

#[test]
fn page_fails_optr_strong_on_striped_multi_page_writes_the_stronger_checker_is_stronger() {
    let config = tiny();
    let mut o = options(5, 60);
    o.phase = Phase::Between;
    o.guarantee = Some(Guarantee::Baseline);
    let baseline = campaign(&config, &striped_writes(), &o);
    assert_passes(&baseline);
    o.guarantee = Some(Guarantee::Optr);
    let optr = campaign(&config, &striped_writes(), &o);
    caught_by(&optr, &[Rule::TornWriteRequest]);
}

#[test]
fn a_trimmed_sector_reads_trimmed_or_previous_until_a_flush_follows() {
    // Heavy trims, flushes now and then: page must keep flushed trims and
    // may keep or drop unflushed ones.
    let config = tiny();
    let w = spec(|s| {
        s.rw = RwMode::RandWrite;
        s.bs = SizeSpec::Bytes(16 << 10);
        s.trim_percent = 40.0;
        s.fsync = 8;
        s.write_size = Some(SizeSpec::TimesCapacity(1.2));
    });
    let r = campaign(&config, &w, &options(6, 80));
    assert_passes(&r);
}

#[test]
fn a_flushed_trim_that_recovery_undoes_is_caught() {
    let config = tiny();
    let w = spec(|s| {
        s.rw = RwMode::RandWrite;
        s.bs = SizeSpec::Bytes(16 << 10);
        s.trim_percent = 40.0;
        s.fsync = 4;
        s.write_size = Some(SizeSpec::TimesCapacity(0.5));
    });
    let r = crash::run_with_factory(&config, page_with(CrashBug::ForgetsTrimsOnFlush), &w, &options(7, 40)).unwrap();
    caught_by(&r, &[Rule::LostDurableWrite]);
}

/// A factory for `optr` with a deliberate crash bug.
fn optr_with(bug: CrashBug) -> SharedFactory {
    Arc::new(move |env| {
        let ftl = OptrFtl::new(env, OptrOptions::default())?.with_crash_bug(bug);
        Ok(Box::new(ftl) as Box<dyn nandlab::ftl::Ftl>)
    })
}

fn optr_config() -> Config {
    let mut c = tiny();
    c.ftl_name = "optr".into();
    c.ftl_options.clear();
    c
}

#[test]
fn optr_passes_optr_strong_through_gc_checkpoints_trims_and_flushes() {
    let config = optr_config();
    let r = campaign(&config, &mixed(), &options(11, 160));
    eprintln!("{}", r.summary());
    assert_eq!(r.guarantee, Guarantee::Optr);
    assert_passes(&r);
    assert!(r.points.iter().any(|p| p.torn_pages > 0), "some cut tore a program");
}

#[test]
fn optr_passes_optr_strong_on_striped_multi_page_writes_without_flushes() {
    let config = optr_config();
    let r = campaign(&config, &striped_writes(), &options(12, 80));
    assert_passes(&r);
}

#[test]
fn a_flush_that_loses_the_write_cache_is_caught() {
    let config = optr_config();
    let r =
        crash::run_with_factory(&config, optr_with(CrashBug::LosesCacheOnFlush), &mixed(), &options(13, 60)).unwrap();
    caught_by(&r, &[Rule::LostDurableWrite]);
}

#[test]
fn writes_reordered_across_a_flush_are_caught() {
    let config = optr_config();
    let w = spec(|s| {
        s.rw = RwMode::RandWrite;
        s.bsrange = Some("4k-16k".into());
        s.fsync = 2;
        s.write_size = Some(SizeSpec::TimesCapacity(0.2));
    });
    let mut o = options(14, 150);
    o.phase = Phase::Between;
    let r = crash::run_with_factory(&config, optr_with(CrashBug::ReordersAcrossFlush), &w, &o).unwrap();
    caught_by(&r, &[Rule::LostDurableWrite, Rule::NotAPrefix]);
}

#[test]
fn a_half_durable_multi_page_request_is_caught_by_atomicity_only_in_optr_mode() {
    let config = optr_config();
    let w = spec(|s| {
        s.rw = RwMode::RandWrite;
        s.bs = SizeSpec::Bytes(32 << 10);
        s.fsync = 64;
        s.write_size = Some(SizeSpec::TimesCapacity(0.6));
    });
    let mut o = options(15, 150);
    o.guarantee = Some(Guarantee::Baseline);
    let baseline = crash::run_with_factory(&config, optr_with(CrashBug::HalfDurableRequests), &w, &o).unwrap();
    assert_passes(&baseline);
    o.guarantee = Some(Guarantee::Optr);
    let strong = crash::run_with_factory(&config, optr_with(CrashBug::HalfDurableRequests), &w, &o).unwrap();
    caught_by(&strong, &[Rule::TornWriteRequest]);
}

#[test]
fn same_seed_same_campaign_whatever_the_thread_count() {
    let config = tiny();
    let mut o = options(21, 40);
    o.threads = 1;
    let one = campaign(&config, &mixed(), &o).without_measurements();
    o.threads = 2;
    let two = campaign(&config, &mixed(), &o).without_measurements();
    let json = |r: &CrashReport| serde_json::to_string(r).unwrap();
    assert_eq!(json(&one), json(&two));
    o.seed = 22;
    assert_ne!(json(&one), json(&campaign(&config, &mixed(), &o).without_measurements()));
}

#[test]
fn paired_page_corruption_destroys_a_completed_lower_page_write_in_page() {
    // The paired-page problem, which `page` does not claim to survive: on
    // this MLC device a torn upper page takes a completed lower page with it.
    let config = tiny();
    let mut o = options(23, 120);
    o.phase = Phase::During;
    o.effects.paired_pages = true;
    let r = campaign(&config, &striped_writes(), &o);
    caught_by(&r, &[Rule::LostDurableWrite]);
}

#[test]
fn a_finding_is_shrunk_to_an_earlier_point_that_fails_the_same_way() {
    let config = tiny();
    let mut o = options(2, 40);
    o.phase = Phase::During;
    o.shrink = true;
    let r = crash::run_with_factory(&config, page_with(CrashBug::TrustsTornPage), &mixed(), &o).unwrap();
    let first = r.points.iter().find(|p| !p.passed).expect("a finding");
    let shrunk = r.shrunk.as_ref().expect("shrunk");
    assert!(shrunk.cut.op_index <= first.cut.op_index);
    assert_eq!(Some(shrunk.rule), first.first.as_ref().map(|v| v.rule));
    // The shrunk point alone reproduces it.
    let again = crash::run_with_factory(
        &config,
        page_with(CrashBug::TrustsTornPage),
        &mixed(),
        &CrashOptions { points: PointSelection::At(vec![shrunk.cut]), shrink: false, ..o.clone() },
    )
    .unwrap();
    assert_eq!(again.failed, 1, "{}", again.summary());
}
