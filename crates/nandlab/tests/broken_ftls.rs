//! Every checker is proven by a deliberately broken FTL it catches, with the
//! right rule name, while the same FTL without the bug (and `page`) passes
//! the same workload.

mod support;

use nandlab::config::Config;
use nandlab::ftl::mutants::buggy::BuggyFtl;
use nandlab::ftl::mutants::Mutant;
use nandlab::report::StressReport;
use nandlab::util::size::SizeSpec;
use nandlab::violation::{Rule, Severity};
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use support::*;

fn run_bug(config: &Config, bug: Mutant) -> StressReport {
    let spec = preset_workload(config);
    stress_with(config, Box::new(move |env| Ok(Box::new(BuggyFtl::with_mutant(env, bug)?))), &spec, &opts(42))
}

/// The bug is caught, and the first error names `rule`.
fn caught(config: &Config, bug: Mutant, rule: Rule) {
    let r = run_bug(config, bug);
    let first =
        r.violations.iter().find(|v| v.severity == Severity::Error).unwrap_or_else(|| panic!("{bug:?} was not caught"));
    assert_eq!(first.rule, rule, "{bug:?}: first violation {first}");
    assert!(r.stopped_early.is_some(), "a run stops at its first error by default");
}

#[test]
fn the_correct_test_ftl_and_page_pass_the_same_workload() {
    let config = tiny();
    assert_clean(&run_bug(&config, Mutant::None));
    assert_clean(&stress(&config, &preset_workload(&config), &opts(42)));
    let r = run_bug(&config, Mutant::None);
    assert!(
        r.gc.runs > 0 && r.host.trim_requests > 0 && r.host.read_requests > 0,
        "the workload exercises GC, trims, reads"
    );
}

/// `tiny` with 1 MiB pages (2048 sectors: nearly every host write is a
/// read-modify-write of part of a page) and 16 blocks a plane.
fn tiny_with_mib_pages() -> Config {
    let text = include_str!("../../../presets/tiny.toml")
        .replace("page_size_bytes = 4096", "page_size_bytes = 1048576")
        .replace("blocks_per_plane = 64", "blocks_per_plane = 16")
        .replace("spare_percent = 15", "spare_percent = 30");
    Config::parse(&text, "tiny-mib-pages.toml").expect("1 MiB-page config")
}

#[test]
fn the_correct_test_ftl_passes_on_pages_of_many_sectors_as_page_does() {
    // GC runs inside a read-modify-write, between the merge of the new
    // sectors into the FTL's buffer and their program: a cross-plane GC
    // move must not use that buffer (it did: lost_write, misdirected_read).
    let config = tiny_with_mib_pages();
    for seed in 1..=3 {
        let spec = preset_workload(&config);
        let r = stress_with(
            &config,
            Box::new(|env| Ok(Box::new(BuggyFtl::with_mutant(env, Mutant::None)?))),
            &spec,
            &opts(seed),
        );
        assert_clean(&r);
        assert!(r.gc.runs > 0, "seed {seed}: the workload exercises GC");
        assert_clean(&stress(&config, &spec, &opts(seed)));
    }
}

#[test]
fn skipping_page_zero_of_a_fresh_block_is_out_of_order() {
    caught(&tiny(), Mutant::SkipFirstPage, Rule::ProgramOutOfOrder);
}

#[test]
fn data_mapped_to_the_skipped_page_reads_as_erased() {
    let mut config = tiny();
    config.rules.set(Rule::ProgramOutOfOrder, Severity::Allow).unwrap();
    caught(&config, Mutant::SkipFirstPageMapsIt, Rule::ErasedRead);
}

#[test]
fn writing_in_place_is_a_program_of_a_non_erased_page() {
    caught(&tiny(), Mutant::WriteInPlace, Rule::ProgramNotErased);
}

#[test]
fn programming_pages_in_swapped_pairs_is_out_of_order() {
    caught(&tiny(), Mutant::OutOfOrder, Rule::ProgramOutOfOrder);
}

#[test]
fn gc_remapping_a_page_the_host_overwrote_is_a_stale_read() {
    caught(&tiny(), Mutant::GcStaleRemap, Rule::StaleRead);
}

/// The finding names the physical page that supplied the wrong data: for
/// the GC that remapped a stale copy, that page holds an older write of
/// the LBA than the oracle's latest.
#[test]
fn a_stale_read_names_the_physical_page_holding_the_stale_copy() {
    use nandlab::nand::payload::RunKind;
    use nandlab::nand::{PageAddr, PageContent};
    use nandlab::oracle::SectorVersion;
    use nandlab::run::Session;
    use nandlab::workload::Workload;
    let config = tiny();
    let mut wl = workload(&config, &preset_workload(&config), 42);
    let factory: nandlab::run::FtlFactory =
        Box::new(|env| Ok(Box::new(BuggyFtl::with_mutant(env, Mutant::GcStaleRemap)?)));
    let mut session = Session::with_factory(&config, factory, 42, wl.alignment_sectors(), 20).unwrap();
    while let Some(r) = wl.next_request().unwrap() {
        session.submit(&r).unwrap();
        if session.drive().flash().log().errors() > 0 {
            break;
        }
    }
    let v = session.drive().flash().log().first_error().expect("caught").clone();
    assert_eq!(v.rule, Rule::StaleRead, "{v}");
    let source = v.source.expect("the finding names the physical page");
    assert!(source.op_index < v.op_index, "read before it was checked: {v}");
    assert!(v.to_string().contains(&format!("physical page {}", source.page)), "{v}");
    let PageContent::Data(runs) = session.drive().flash().nand().page_content(PageAddr(source.page)) else {
        panic!("page {} holds no host data", source.page)
    };
    let mut start = 0;
    let run = runs
        .iter()
        .find(|r| {
            start += r.len;
            source.sector_in_page < start
        })
        .unwrap();
    let first = start - run.len;
    assert_eq!(run.kind, RunKind::Data);
    assert_eq!(u64::from(run.lba + (source.sector_in_page - first)), v.address, "the page holds that LBA");
    let SectorVersion::Written(latest) = session.host().oracle().version(v.address) else { panic!("written") };
    assert!(run.write < latest, "and an older write of it: #{} < #{latest}", run.write);
}

#[test]
fn gc_dropping_a_valid_page_is_a_lost_write() {
    caught(&tiny(), Mutant::GcDropsValidPage, Rule::LostWrite);
}

#[test]
fn two_lbas_mapped_to_one_page_is_a_misdirected_read() {
    caught(&tiny(), Mutant::AliasTwoLbas, Rule::MisdirectedRead);
}

#[test]
fn ignoring_trims_is_caught_by_read_zero_after_trim() {
    caught(&tiny(), Mutant::IgnoresTrim, Rule::TrimNotZero);
}

#[test]
fn leaving_unmapped_sectors_unfilled_is_missing_data() {
    caught(&tiny(), Mutant::ForgetsToFill, Rule::MissingData);
}

#[test]
fn using_factory_bad_blocks_is_caught() {
    let mut config = tiny();
    config.factory_bad_block_percent = 2.0;
    caught(&config, Mutant::ProgramsBadBlocks, Rule::BadBlock);
    assert_clean(&run_bug(&config, Mutant::None));
}

#[test]
fn an_off_by_one_block_count_is_out_of_range() {
    caught(&tiny(), Mutant::BlockPastEnd, Rule::AddressOutOfRange);
}

#[test]
fn a_multi_plane_program_on_one_plane_is_a_mismatch() {
    caught(&tiny(), Mutant::MultiPlaneOnOnePlane, Rule::MultiPlaneMismatch);
}

#[test]
fn copyback_across_planes_is_caught() {
    caught(&tiny(), Mutant::CopybackAcrossPlanes, Rule::CopybackCrossPlane);
}

#[test]
fn returning_never_programmed_pages_as_host_data_is_caught_with_the_default_rules() {
    // The NAND rule `read_erased_page` stays allowed (a mount scan reads
    // erased pages legitimately); the oracle catches the erased flash the
    // FTL then returns for a never-written sector, which must read as zeros.
    caught(&tiny(), Mutant::ReadsUnwrittenPages, Rule::UnwrittenNotZero);
    let reads =
        SyntheticSpec { rw: RwMode::RandRead, io_size: Some(SizeSpec::TimesCapacity(0.2)), ..Default::default() };
    let r = stress_with(
        &tiny(),
        Box::new(|env| Ok(Box::new(BuggyFtl::with_mutant(env, Mutant::ReadsUnwrittenPages)?))),
        &reads,
        &opts(1),
    );
    assert_eq!(r.violations.first().map(|v| v.rule), Some(Rule::UnwrittenNotZero), "on an empty drive too");
    let correct =
        stress_with(&tiny(), Box::new(|env| Ok(Box::new(BuggyFtl::with_mutant(env, Mutant::None)?))), &reads, &opts(1));
    assert_clean(&correct);
}

#[test]
fn reading_never_programmed_pages_is_caught_by_the_nand_rule_when_it_is_on() {
    let mut config = tiny();
    config.rules.set(Rule::ReadErasedPage, Severity::Error).unwrap();
    caught(&config, Mutant::ReadsUnwrittenPages, Rule::ReadErasedPage);
}

#[test]
fn an_ftl_error_stops_the_run_as_a_violation() {
    caught(&tiny(), Mutant::FailsWrites, Rule::FtlError);
}

#[test]
fn warnings_are_reported_but_do_not_fail_the_run() {
    let mut config = tiny();
    config.rules.set(Rule::ProgramOutOfOrder, Severity::Warn).unwrap();
    let r = run_bug(&config, Mutant::SkipFirstPage);
    assert_eq!(r.errors, 0);
    assert!(r.warnings > 0);
    assert_eq!(r.violation_counts.get(&Rule::ProgramOutOfOrder), Some(&r.warnings));
}

// ----- broken variants of the zoo's FTLs -----

mod zoo {
    use super::*;
    use nandlab::ftl::block::{BlockFtl, BlockOptions};
    use nandlab::ftl::dftl::{DftlFtl, DftlOptions};
    use nandlab::ftl::hybrid::{HybridFtl, HybridOptions};
    use nandlab::ftl::page::{PageFtl, PageOptions};
    use nandlab::ftl::{parse_options, FtlOptions};

    fn options<T: for<'de> serde::Deserialize<'de>>(text: &str) -> T {
        parse_options("test", &toml::from_str::<FtlOptions>(text).unwrap()).unwrap()
    }

    fn first_error(r: &StressReport) -> Rule {
        r.violations.iter().find(|v| v.severity == Severity::Error).expect("the bug was caught").rule
    }

    fn dftl(config: &Config, bug: Mutant, spec: &SyntheticSpec) -> StressReport {
        let o: DftlOptions = options("cmt_bytes = \"5%\"");
        stress_with(
            config,
            Box::new(move |env| Ok(Box::new(DftlFtl::with_mutant(env, o.clone(), bug)?))),
            spec,
            &opts(42),
        )
    }

    #[test]
    fn dftl_evicting_a_dirty_entry_without_writing_it_back_is_caught() {
        let config = tiny();
        let spec = preset_workload(&config);
        let good = dftl(&config, Mutant::None, &spec);
        assert_clean(&good);
        assert!(good.ftl_stats.extra["writebacks"].as_u64().unwrap() > 0, "the workload evicts dirty entries");
        let r = dftl(&config, Mutant::EvictsDirtyWithoutWriteBack, &spec);
        eprintln!("dftl: {:?}", r.violations.first());
        assert_eq!(first_error(&r), Rule::LostWrite, "the evicted update never reached flash");
    }

    fn hybrid(config: &Config, bug: Mutant, spec: &SyntheticSpec) -> StressReport {
        let o: HybridOptions = options("random_log_blocks = 4");
        stress_with(
            config,
            Box::new(move |env| Ok(Box::new(HybridFtl::with_mutant(env, o.clone(), bug)?))),
            spec,
            &opts(42),
        )
    }

    #[test]
    fn hybrid_returning_early_from_a_merge_without_a_log_block_is_caught() {
        // Random writes to a few logical blocks: merging one log block's
        // logical blocks empties the other log blocks, so the pool often
        // reclaims a log block with nothing valid in it.
        let config = tiny();
        let spec = SyntheticSpec {
            rw: RwMode::RandRw,
            rwmixread: 30,
            bs: SizeSpec::Bytes(4096),
            size: Some(SizeSpec::Bytes(1 << 20)),
            write_size: Some(SizeSpec::TimesCapacity(0.2)),
            ..Default::default()
        };
        let good = hybrid(&config, Mutant::None, &spec);
        assert_clean(&good);
        assert!(good.ftl_stats.extra["empty_log_reclaims"].as_u64().unwrap() > 0, "the workload reclaims empty logs");
        let r = hybrid(&config, Mutant::MergeReturnsEarlyWithoutLogBlock, &spec);
        eprintln!("hybrid: {:?}", r.violations.first());
        assert_eq!(first_error(&r), Rule::ProgramNotErased, "the next random write lands past the full log block");
    }

    fn block(config: &Config, bug: Mutant) -> StressReport {
        let spec = preset_workload(config);
        stress_with(
            config,
            Box::new(move |env| Ok(Box::new(BlockFtl::with_mutant(env, BlockOptions::default(), bug)?))),
            &spec,
            &opts(42),
        )
    }

    #[test]
    fn block_dropping_a_page_from_a_read_modify_write_is_a_lost_write() {
        let config = tiny();
        let good = block(&config, Mutant::None);
        assert_clean(&good);
        assert!(good.ftl_stats.extra["rmw_merges"].as_u64().unwrap() > 1000, "the workload rewrites blocks");
        let r = block(&config, Mutant::ReplacementDropsLastPage);
        eprintln!("block: {:?}", r.violations.first());
        assert_eq!(first_error(&r), Rule::LostWrite, "the old block's last page was erased uncopied");
    }

    fn dac(config: &Config, bug: Mutant) -> StressReport {
        let o: PageOptions = options("hot_cold = \"dac:4\"\ngc_policy = \"greedy\"");
        let spec = preset_workload(config);
        stress_with(
            config,
            Box::new(move |env| Ok(Box::new(PageFtl::with_mutant(env, o.clone(), bug)?))),
            &spec,
            &opts(42),
        )
    }

    #[test]
    fn a_hot_cold_allocator_writing_a_block_gc_erased_is_caught() {
        let config = tiny();
        assert_clean(&dac(&config, Mutant::None));
        let r = dac(&config, Mutant::GcErasesActiveBlock);
        eprintln!("dac: {:?}", r.violations.first());
        assert_eq!(first_error(&r), Rule::ProgramOutOfOrder, "the region keeps writing at its old offset");
    }
}
