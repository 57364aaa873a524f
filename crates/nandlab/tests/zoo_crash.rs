//! Crash campaigns for the zoo's block-mapped FTLs, `hybrid` (FAST) and
//! `block`, and for `dftl` (with a cache of a few translation pages, and
//! with one holding the whole table): they keep the baseline guarantee they declare when the power is cut
//! between flash operations, during them (torn programs, torn erases), and
//! again during the recovery that follows (nested cuts); their recoveries
//! are idempotent (cut four times in a row, they read back the disk one
//! uncut recovery reads); and recoveries that trust a torn page, or erase
//! blocks before the merge holding their newer copies is finished, are
//! caught, as is a `dftl` recovery that trusts a torn page or lets a
//! translation page win over the data pages written after it, so these
//! tests can fail.

mod support;

use nandlab::config::Config;
use nandlab::flash::PowerCut;
use nandlab::ftl::block::{BlockFtl, BlockOptions};
use nandlab::ftl::dftl::{DftlFtl, DftlOptions};
use nandlab::ftl::hybrid::{HybridFtl, HybridOptions};
use nandlab::ftl::mutants::Mutant;
use nandlab::ftl::{Ftl, FtlEnv, Guarantee, IoRequest};
use nandlab::nand::payload::Run;
use nandlab::report::crash::{CrashReport, NestedCut};
use nandlab::run::crash::{self, CrashOptions, Phase, PointSelection, SharedFactory};
use nandlab::run::Session;
use nandlab::util::size::SizeSpec;
use nandlab::violation::Rule;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use nandlab::workload::{HostOp, Workload};
use rand::RngExt;
use std::sync::Arc;
use support::*;

/// Random 4-32 KiB writes and reads with trims and flushes: random log
/// blocks and full merges (`hybrid`), whole-block read-modify-writes (`block`).
fn random_mix() -> SyntheticSpec {
    SyntheticSpec {
        rw: RwMode::RandRw,
        rwmixread: 20,
        bsrange: Some("4k-32k".into()),
        fsync: 16,
        trim_percent: 5.0,
        write_size: Some(SizeSpec::TimesCapacity(1.5)),
        ..SyntheticSpec::default()
    }
}

/// 16-128 KiB requests at 16 KiB-aligned offsets: one in eight starts a
/// logical block, so `hybrid` also runs its sequential log (switch and
/// partial merges) and `block` appends in place and trims whole blocks.
fn runs_mix() -> SyntheticSpec {
    SyntheticSpec {
        rw: RwMode::RandRw,
        rwmixread: 20,
        bsrange: Some("16k-128k".into()),
        blockalign: Some(SizeSpec::Bytes(16 << 10)),
        fsync: 8,
        trim_percent: 5.0,
        write_size: Some(SizeSpec::TimesCapacity(1.5)),
        ..SyntheticSpec::default()
    }
}

fn config(ftl: &str) -> Config {
    let mut c = tiny();
    c.ftl_name = ftl.into();
    c.ftl_options.clear();
    c
}

fn options(seed: u64, points: u64, phase: Phase, nested: bool) -> CrashOptions {
    CrashOptions {
        seed,
        points: PointSelection::Random { count: points, span: None },
        phase,
        nested,
        threads: 2,
        shrink: false,
        ..CrashOptions::default()
    }
}

fn assert_passes(r: &CrashReport) {
    assert!(r.base_failure.is_none(), "base run failed: {:?}", r.base_failure);
    let failed: Vec<_> = r.points.iter().filter(|p| !p.passed).take(3).collect();
    assert_eq!(r.failed, 0, "{}\nfailures: {failed:#?}", r.summary());
    assert!(r.points_tested > 0);
}

/// Campaigns of `ftl` over both workloads and `seeds`, each passing;
/// returns their reports.
fn campaigns(config: &Config, seeds: &[u64], points: u64, phase: Phase, nested: bool) -> Vec<CrashReport> {
    let mut reports = Vec::new();
    for (i, &seed) in seeds.iter().enumerate() {
        let workload = if i % 2 == 0 { random_mix() } else { runs_mix() };
        let r = crash::run(config, &workload, &options(seed, points, phase, nested)).expect("campaign runs");
        assert_eq!(r.guarantee, Guarantee::Baseline);
        assert!(r.effects.torn_programs && r.effects.torn_erases, "torn programs and erases are on");
        assert_passes(&r);
        reports.push(r);
    }
    reports
}

fn torn(reports: &[CrashReport]) -> (u32, u32) {
    let points = reports.iter().flat_map(|r| &r.points);
    points.fold((0, 0), |(p, b), x| (p + x.torn_pages, b + x.torn_blocks))
}

fn passes_cuts_between_operations(config: &Config) {
    let reports = campaigns(config, &[1, 2, 3], 70, Phase::Between, false);
    assert_eq!(torn(&reports), (0, 0), "a cut between operations tears nothing");
}

/// `points` per campaign: enough that some cut falls during an erase
/// (`dftl` erases about a block per 30 of its flash operations, `hybrid`
/// and `block` far more often).
fn passes_cuts_during_operations(config: &Config, points: u64) {
    let reports = campaigns(config, &[4, 5, 6], points, Phase::During, false);
    let (pages, blocks) = torn(&reports);
    assert!(pages > 0, "some cut tore a program");
    assert!(blocks > 0, "some cut tore an erase");
}

fn passes_nested_cuts_during_recovery(config: &Config) {
    let reports = campaigns(config, &[7, 8, 9], 70, Phase::Both, true);
    let recoveries_cut = reports.iter().flat_map(|r| &r.points).filter(|p| p.recovery_cut.is_some()).count();
    assert!(recoveries_cut > 100, "recoveries were cut too ({recoveries_cut})");
}

#[test]
fn hybrid_passes_baseline_with_cuts_between_operations() {
    passes_cuts_between_operations(&config("hybrid"));
}

#[test]
fn hybrid_passes_baseline_with_torn_programs_and_erases() {
    passes_cuts_during_operations(&config("hybrid"), 70);
}

#[test]
fn hybrid_passes_baseline_when_recovery_is_cut_too() {
    passes_nested_cuts_during_recovery(&config("hybrid"));
}

/// The reproducer of a durable write hybrid lost when a program of its own
/// recovery was torn: the cut falls between two copies of a full merge; the
/// recovery erased two stale blocks — stale because that unfinished merge
/// block held newer copies of their pages — then tore a copy finishing the
/// merge; the next recovery dropped the torn merge block, and the pages
/// were gone.
///   nandlab crash --preset tiny --ftl hybrid --rw randrw --rwmixread 20 --bsrange 4k-32k
///     --fsync 16 --trim_percent 5 --write_size 1.5x --seed 7 --crash-at 59051:between
///     --nested-at 3:during --max-requests 3457 --no-shrink
fn recovery_torn_while_finishing_a_merge(factory: SharedFactory) -> CrashReport {
    let opts = CrashOptions {
        seed: 7,
        points: PointSelection::At(vec![PowerCut { op_index: 59051, during: false }]),
        nested_at: Some(NestedCut { nth: 3, during: true }),
        max_requests: Some(3457),
        threads: 1,
        shrink: false,
        ..CrashOptions::default()
    };
    let r = crash::run_with_factory(&config("hybrid"), factory, &random_mix(), &opts).expect("campaign runs");
    assert_eq!(r.points_tested, 1, "{}", r.summary());
    let point = &r.points[0];
    assert_eq!(point.recovery_torn_pages, 1, "the nested cut tears a program of the recovery");
    r
}

#[test]
fn hybrid_survives_a_torn_program_while_recovery_finishes_a_merge() {
    let r = recovery_torn_while_finishing_a_merge(crash::shared_registry_factory(&config("hybrid")));
    assert_passes(&r);
}

#[test]
fn hybrid_recovery_that_erases_stale_blocks_before_finishing_merges_loses_a_write() {
    let r = recovery_torn_while_finishing_a_merge(Arc::new(hybrid_erasing_stale_blocks_first));
    assert_eq!(r.failed, 1, "{}", r.summary());
    assert_eq!(r.failed_by_kind.keys().collect::<Vec<_>>(), [&Rule::LostDurableWrite], "{}", r.summary());
}

#[test]
fn block_passes_baseline_with_cuts_between_operations() {
    passes_cuts_between_operations(&config("block"));
}

#[test]
fn block_passes_baseline_with_torn_programs_and_erases() {
    passes_cuts_during_operations(&config("block"), 70);
}

#[test]
fn block_passes_baseline_when_recovery_is_cut_too() {
    passes_nested_cuts_during_recovery(&config("block"));
}

// ----- dftl: a small cache (evictions write translation pages back) and a whole-table one -----

/// `dftl` on `tiny` with `cmt_bytes = cache`: "5%" holds about 700 of the
/// 13 900 entries (evictions and write-backs all the time, GC records the
/// pages it moves as dirty entries); "100%" never evicts (translation
/// pages are written only to make trims durable and at shutdown, so a
/// mount rebuilds almost everything from data pages).
fn dftl_config(cache: &str) -> Config {
    let mut c = config("dftl");
    c.ftl_options.insert("cmt_bytes".into(), cache.into());
    c
}

const SMALL_CACHE: &str = "5%";
const WHOLE_TABLE: &str = "100%";

#[test]
fn dftl_with_a_small_cache_passes_baseline_with_cuts_between_operations() {
    passes_cuts_between_operations(&dftl_config(SMALL_CACHE));
}

#[test]
fn dftl_with_a_small_cache_passes_baseline_with_torn_programs_and_erases() {
    passes_cuts_during_operations(&dftl_config(SMALL_CACHE), 300);
}

#[test]
fn dftl_with_a_small_cache_passes_baseline_when_recovery_is_cut_too() {
    passes_nested_cuts_during_recovery(&dftl_config(SMALL_CACHE));
}

#[test]
fn dftl_with_a_whole_table_cache_passes_baseline_with_cuts_between_operations() {
    passes_cuts_between_operations(&dftl_config(WHOLE_TABLE));
}

#[test]
fn dftl_with_a_whole_table_cache_passes_baseline_with_torn_programs_and_erases() {
    passes_cuts_during_operations(&dftl_config(WHOLE_TABLE), 300);
}

#[test]
fn dftl_with_a_whole_table_cache_passes_baseline_when_recovery_is_cut_too() {
    passes_nested_cuts_during_recovery(&dftl_config(WHOLE_TABLE));
}

/// A factory for `dftl` with `cmt_bytes = cache` and a deliberate crash
/// bug (`None`: correct).
fn dftl_with(cache: &str, bug: Mutant) -> SharedFactory {
    let opts = DftlOptions::parse("dftl", &dftl_config(cache).ftl_options).expect("options");
    Arc::new(move |env| Ok(Box::new(DftlFtl::with_mutant(env, opts.clone(), bug)?) as Box<dyn Ftl>))
}

/// The campaign of `options(seed, 70, phase, false)` on `random_mix`:
/// the correct `dftl` passes it, the one with `bug` fails it, each failure
/// by one of `rules`. Returns the broken one's report.
fn dftl_bug_caught(cache: &str, bug: Mutant, seed: u64, phase: Phase, rules: &[Rule]) -> CrashReport {
    let (config, o) = (dftl_config(cache), options(seed, 70, phase, false));
    let control = crash::run_with_factory(&config, dftl_with(cache, Mutant::None), &random_mix(), &o).unwrap();
    assert_passes(&control);
    let r = crash::run_with_factory(&config, dftl_with(cache, bug), &random_mix(), &o).expect("campaign runs");
    eprintln!("{cache}, {bug:?}: {}", r.summary());
    assert!(r.failed > 0, "the bug was not caught:\n{}", r.summary());
    assert!(r.failed_by_kind.keys().all(|k| rules.contains(k)), "caught, but not only by {rules:?}:\n{}", r.summary());
    r
}

#[test]
fn dftl_recovery_that_trusts_a_torn_page_is_caught() {
    for cache in [SMALL_CACHE, WHOLE_TABLE] {
        let rules = [Rule::FtlError, Rule::CorruptRead, Rule::RecoveryFailed];
        dftl_bug_caught(cache, Mutant::TrustsTornPage, 10, Phase::During, &rules);
    }
}

/// The broken mount keeps a translation page's entry even when a data page
/// of that logical page was written after the page was composed: with a
/// small cache, entries are written back all the time and the newer data
/// pages go back to their old copies.
#[test]
fn dftl_recovery_that_lets_a_stale_translation_page_win_loses_writes() {
    dftl_bug_caught(SMALL_CACHE, Mutant::IgnoresSequenceNumbers, 11, Phase::Between, &[Rule::LostDurableWrite]);
}

// ----- the campaigns can fail: recoveries that trust a torn page -----

fn caught_trusting_torn_pages(factory: SharedFactory, ftl: &str) {
    let config = config(ftl);
    let r = crash::run_with_factory(&config, factory, &random_mix(), &options(10, 70, Phase::During, false))
        .expect("campaign runs");
    eprintln!("{}", r.summary());
    assert!(r.failed > 0, "the bug was not caught:\n{}", r.summary());
    let rules = [Rule::FtlError, Rule::CorruptRead, Rule::RecoveryFailed];
    assert!(r.failed_by_kind.keys().any(|k| rules.contains(k)), "caught, but not by {rules:?}:\n{}", r.summary());
}

fn block_trusting_torn_pages(env: &FtlEnv) -> Result<Box<dyn Ftl>, String> {
    Ok(Box::new(BlockFtl::with_mutant(env, BlockOptions::default(), Mutant::TrustsTornPage)?))
}

fn hybrid_erasing_stale_blocks_first(env: &FtlEnv) -> Result<Box<dyn Ftl>, String> {
    Ok(Box::new(HybridFtl::with_mutant(env, HybridOptions::default(), Mutant::RecoveryErasesStaleBlocksFirst)?))
}

fn hybrid_trusting_torn_pages(env: &FtlEnv) -> Result<Box<dyn Ftl>, String> {
    Ok(Box::new(HybridFtl::with_mutant(env, HybridOptions::default(), Mutant::TrustsTornPage)?))
}

#[test]
fn block_recovery_that_trusts_a_torn_page_is_caught() {
    caught_trusting_torn_pages(Arc::new(block_trusting_torn_pages), "block");
}

#[test]
fn hybrid_recovery_that_trusts_a_torn_page_is_caught() {
    caught_trusting_torn_pages(Arc::new(hybrid_trusting_torn_pages), "hybrid");
}

// ----- recovery is idempotent: cut it again and again, it reads back the same disk -----

/// Recoveries cut in a row before the last, uncut one (the campaigns cut one).
const RECOVERY_CUTS: u32 = 4;
/// Chains of cut recoveries tried per crash point.
const CHAINS_PER_POINT: u32 = 3;

/// Every logical sector as reads through the mounted FTL return it (their
/// payload runs, in fixed chunks), or why a read failed.
fn disk_image(session: &mut Session, logical_sectors: u64) -> Result<Vec<Run>, String> {
    let mut runs = Vec::new();
    let mut lba = 0;
    while lba < logical_sectors {
        let n = (logical_sectors - lba).min(256) as u32;
        let drive = session.drive_mut();
        let buf = drive.alloc_host_read(n);
        let io = IoRequest { id: u64::MAX, lba, sectors: n, buf };
        let read = drive.read(&io).map_err(|e| format!("read at LBA {lba}: {e}"));
        if read.is_ok() {
            runs.extend_from_slice(drive.flash().buffer_runs(buf).expect("a live buffer"));
        }
        drive.free_host_buffer(buf);
        read?;
        lba += u64::from(n);
    }
    Ok(runs)
}

/// Mount a fresh FTL, and read the whole disk through it.
fn recover_and_read(session: &mut Session, logical_sectors: u64) -> Result<Vec<Run>, String> {
    session.power_cycle(false).map_err(|e| format!("mount failed: {e}"))?;
    disk_image(session, logical_sectors)
}

/// Mount a fresh FTL with the power cut at one of the `2n + 1` distinct
/// cuts of its recovery, drawn from `rng` (before or during one of its `n`
/// state-changing operations, found by a mount rolled back, or after the
/// last). Returns the cut, as `K` or `K:during` of `n`.
fn mount_cut(session: &mut Session, rng: &mut nandlab::seed::Rng) -> String {
    let mark = session.drive().mark();
    let _ = session.power_cycle(false);
    let changes = session.drive().state_changes_since(mark);
    session.drive_mut().roll_back_to(mark);
    let j = rng.random_range(0..=2 * changes.len());
    if let Some(&op_index) = changes.get(j / 2) {
        session.drive_mut().schedule_power_cut(PowerCut { op_index, during: j % 2 == 1 });
    }
    let _ = session.power_cycle(false); // fails at the cut
    session.drive_mut().restore_power();
    let during = if j % 2 == 1 { ":during" } else { "" };
    format!("{}{during} of {}", j / 2, changes.len())
}

type Factory = fn(&FtlEnv) -> Result<Box<dyn Ftl>, String>;

/// Cut the power at an operation of every third write request of `spec`
/// once the drive was written over, and test each cut with
/// [`chains_of_cut_recoveries`]. Only cuts whose recovery changes the
/// flash (finishes or redoes a merge, erases a block) count, until there
/// are `points` of them. Returns the chains that failed.
fn cut_recoveries_repeatedly(ftl: &str, factory: Factory, spec: &SyntheticSpec, seed: u64, points: u64) -> Vec<String> {
    let config = config(ftl);
    let mut session = Session::with_factory(&config, Box::new(factory), seed, 8, 16).expect("drive");
    let mut w = workload(&config, spec, seed);
    let mut rng = nandlab::seed::rng_for(seed, "recovery cuts");
    let (mut writes, mut tested, mut failures) = (0u64, 0u64, Vec::new());
    session.drive_mut().start_journal();
    while let Some(req) = w.next_request().expect("workload") {
        session.drive_mut().clear_journal();
        let start = session.drive().flash().op_index();
        session.submit(&req).expect("request");
        let log = session.drive().flash().log();
        assert!(!session.ftl_failed() && log.is_clean(), "{ftl}: base run: {:?}", log.first_error());
        writes += u64::from(req.op == HostOp::Write);
        let warm = session.host().counters().write_bytes >= config.logical_bytes();
        if req.op != HostOp::Write || !warm || writes % 3 != 0 || session.drive().flash().op_index() == start {
            continue;
        }
        let op_index = rng.random_range(start..session.drive().flash().op_index());
        let cut = PowerCut { op_index, during: rng.random_bool(0.5) };
        let base = session.drive_mut().cut_power_for_test(cut);
        let mut found = Vec::new();
        let changed = chains_of_cut_recoveries(&mut session, config.logical_sectors, &mut rng, &mut found);
        failures.extend(found.into_iter().map(|f| format!("{ftl}: {cut:?}, {f}")));
        session.drive_mut().restore_base_run(base);
        tested += u64::from(changed);
        if tested == points {
            return failures;
        }
    }
    panic!("{ftl}: the workload ended after {tested} of {points} points");
}

/// On the image a power cut left: recover once, uncut, and read the disk;
/// then, if that recovery changed the flash, recover [`CHAINS_PER_POINT`]
/// times over with the power cut inside each of [`RECOVERY_CUTS`]
/// recoveries in a row before a last one. Every chain must read back
/// exactly the disk the uncut recovery read (recovery is idempotent,
/// whatever it was doing when the power failed) and break no NAND rule;
/// those that do not go to `failures`. The flash is rolled back to the
/// image. Returns whether the uncut recovery changed the flash.
fn chains_of_cut_recoveries(
    session: &mut Session,
    logical_sectors: u64,
    rng: &mut nandlab::seed::Rng,
    failures: &mut Vec<String>,
) -> bool {
    let mark = session.drive().mark();
    let reference = recover_and_read(session, logical_sectors).unwrap_or_else(|e| panic!("uncut recovery: {e}"));
    let changed = !session.drive().state_changes_since(mark).is_empty();
    for _ in 0..CHAINS_PER_POINT * u32::from(changed) {
        session.drive_mut().roll_back_to(mark);
        let cuts: Vec<String> = (0..RECOVERY_CUTS).map(|_| mount_cut(session, rng)).collect();
        let got = recover_and_read(session, logical_sectors);
        let log = session.drive_mut().take_log();
        let difference = match got {
            Err(e) => Some(e),
            Ok(runs) if runs != reference => Some(first_difference(&runs, &reference)),
            Ok(_) => log.first_error().map(|v| format!("{v:?}")),
        };
        if let Some(d) = difference {
            failures.push(format!("recoveries cut at {cuts:?}: {d}"));
        }
    }
    session.drive_mut().roll_back_to(mark);
    changed
}

/// Where two disk images first differ.
fn first_difference(got: &[Run], expected: &[Run]) -> String {
    match got.iter().zip(expected).position(|(a, b)| a != b) {
        Some(i) => format!("run {i} reads {:?}, after one uncut recovery {:?}", got[i], expected[i]),
        None => format!("{} runs, after one uncut recovery {}", got.len(), expected.len()),
    }
}

fn hybrid_ftl(env: &FtlEnv) -> Result<Box<dyn Ftl>, String> {
    Ok(Box::new(HybridFtl::new(env, HybridOptions::default())?))
}

fn block_ftl(env: &FtlEnv) -> Result<Box<dyn Ftl>, String> {
    Ok(Box::new(BlockFtl::new(env, BlockOptions::default())?))
}

#[test]
fn hybrid_recovery_cut_again_and_again_reads_back_the_same_disk() {
    let mut failures = cut_recoveries_repeatedly("hybrid", hybrid_ftl, &random_mix(), 21, 40);
    failures.extend(cut_recoveries_repeatedly("hybrid", hybrid_ftl, &runs_mix(), 22, 30));
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn block_recovery_cut_again_and_again_reads_back_the_same_disk() {
    let mut failures = cut_recoveries_repeatedly("block", block_ftl, &random_mix(), 23, 40);
    failures.extend(cut_recoveries_repeatedly("block", block_ftl, &runs_mix(), 24, 30));
    assert!(failures.is_empty(), "{failures:#?}");
}

/// `dftl` with a small cache: its mount writes back every translation
/// page it corrected, so cut recoveries change the flash.
fn dftl_small_cache_ftl(env: &FtlEnv) -> Result<Box<dyn Ftl>, String> {
    let opts = DftlOptions::parse("dftl", &dftl_config(SMALL_CACHE).ftl_options)?;
    Ok(Box::new(DftlFtl::new(env, opts)?))
}

#[test]
fn dftl_recovery_cut_again_and_again_reads_back_the_same_disk() {
    let mut failures = cut_recoveries_repeatedly("dftl", dftl_small_cache_ftl, &random_mix(), 25, 40);
    failures.extend(cut_recoveries_repeatedly("dftl", dftl_small_cache_ftl, &runs_mix(), 26, 30));
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn hybrid_recovery_that_erases_stale_blocks_first_is_not_idempotent() {
    let failures = cut_recoveries_repeatedly("hybrid", hybrid_erasing_stale_blocks_first, &random_mix(), 21, 40);
    eprintln!("{} failures, the first: {:#?}", failures.len(), failures.first());
    assert!(!failures.is_empty(), "the bug was not caught");
}
