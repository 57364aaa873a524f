//! Every checker is proven by a deliberately broken FTL it catches, with the
//! right rule name, while the same FTL without the bug (and `page`) passes
//! the same workload.

mod support;

use nandlab::config::Config;
use nandlab::ftl::buggy::{Bug, BuggyFtl};
use nandlab::report::StressReport;
use nandlab::violation::{Rule, Severity};
use support::*;

fn run_bug(config: &Config, bug: Bug) -> StressReport {
    let spec = preset_workload(config);
    stress_with(config, Box::new(move |env| Ok(Box::new(BuggyFtl::new(env, bug)))), &spec, &opts(42))
}

/// The bug is caught, and the first error names `rule`.
fn caught(config: &Config, bug: Bug, rule: Rule) {
    let r = run_bug(config, bug);
    let first =
        r.violations.iter().find(|v| v.severity == Severity::Error).unwrap_or_else(|| panic!("{bug:?} was not caught"));
    assert_eq!(first.rule, rule, "{bug:?}: first violation {first}");
    assert!(r.stopped_early.is_some(), "a run stops at its first error by default");
}

#[test]
fn the_correct_test_ftl_and_page_pass_the_same_workload() {
    let config = tiny();
    assert_clean(&run_bug(&config, Bug::None));
    assert_clean(&stress(&config, &preset_workload(&config), &opts(42)));
    let r = run_bug(&config, Bug::None);
    assert!(
        r.gc.runs > 0 && r.host.trim_requests > 0 && r.host.read_requests > 0,
        "the workload exercises GC, trims, reads"
    );
}

#[test]
fn skipping_page_zero_of_a_fresh_block_is_out_of_order() {
    caught(&tiny(), Bug::SkipFirstPage, Rule::ProgramOutOfOrder);
}

#[test]
fn data_mapped_to_the_skipped_page_reads_as_erased() {
    let mut config = tiny();
    config.rules.set(Rule::ProgramOutOfOrder, Severity::Allow).unwrap();
    caught(&config, Bug::SkipFirstPageMapsIt, Rule::ErasedRead);
}

#[test]
fn writing_in_place_is_a_program_of_a_non_erased_page() {
    caught(&tiny(), Bug::WriteInPlace, Rule::ProgramNotErased);
}

#[test]
fn programming_pages_in_swapped_pairs_is_out_of_order() {
    caught(&tiny(), Bug::OutOfOrder, Rule::ProgramOutOfOrder);
}

#[test]
fn gc_remapping_a_page_the_host_overwrote_is_a_stale_read() {
    caught(&tiny(), Bug::GcStaleRemap, Rule::StaleRead);
}

#[test]
fn gc_dropping_a_valid_page_is_a_lost_write() {
    caught(&tiny(), Bug::GcDropsValidPage, Rule::LostWrite);
}

#[test]
fn two_lbas_mapped_to_one_page_is_a_misdirected_read() {
    caught(&tiny(), Bug::AliasTwoLbas, Rule::MisdirectedRead);
}

#[test]
fn ignoring_trims_is_caught_by_read_zero_after_trim() {
    caught(&tiny(), Bug::IgnoresTrim, Rule::TrimNotZero);
}

#[test]
fn leaving_unmapped_sectors_unfilled_is_missing_data() {
    caught(&tiny(), Bug::ForgetsToFill, Rule::MissingData);
}

#[test]
fn using_factory_bad_blocks_is_caught() {
    let mut config = tiny();
    config.factory_bad_block_percent = 2.0;
    caught(&config, Bug::ProgramsBadBlocks, Rule::BadBlock);
    assert_clean(&run_bug(&config, Bug::None));
}

#[test]
fn an_off_by_one_block_count_is_out_of_range() {
    caught(&tiny(), Bug::BlockPastEnd, Rule::AddressOutOfRange);
}

#[test]
fn a_multi_plane_program_on_one_plane_is_a_mismatch() {
    caught(&tiny(), Bug::MultiPlaneOnOnePlane, Rule::MultiPlaneMismatch);
}

#[test]
fn copyback_across_planes_is_caught() {
    caught(&tiny(), Bug::CopybackAcrossPlanes, Rule::CopybackCrossPlane);
}

#[test]
fn reading_never_programmed_pages_is_caught_when_the_rule_is_on() {
    // Allowed by default (a mount scan legitimately reads erased pages, and
    // a never-written sector may read as erased); as an error it is caught
    // at the first such read, before the bug returns another LBA's data.
    let mut config = tiny();
    config.rules.set(Rule::ReadErasedPage, Severity::Error).unwrap();
    caught(&config, Bug::ReadsUnwrittenPages, Rule::ReadErasedPage);
}

#[test]
fn an_ftl_error_stops_the_run_as_a_violation() {
    caught(&tiny(), Bug::FailsWrites, Rule::FtlError);
}

#[test]
fn warnings_are_reported_but_do_not_fail_the_run() {
    let mut config = tiny();
    config.rules.set(Rule::ProgramOutOfOrder, Severity::Warn).unwrap();
    let r = run_bug(&config, Bug::SkipFirstPage);
    assert_eq!(r.errors, 0);
    assert!(r.warnings > 0);
    assert_eq!(r.violation_counts.get(&Rule::ProgramOutOfOrder), Some(&r.warnings));
}
