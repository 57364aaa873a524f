//! The media reliability model (issue 21) end to end: off by default; with
//! it on, `page` and `dftl` retire dozens of failing blocks without losing
//! data, host reads of data lost to the media are read errors, not
//! violations; and each media rule is proven by a deliberately broken FTL
//! that trips it while the correct one passes the same run.

mod support;

use nandlab::config::Config;
use nandlab::ftl::mutants::Mutant;
use nandlab::report::StressReport;
use nandlab::util::size::SizeSpec;
use nandlab::violation::{Rule, Severity};
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use support::stress_mutated as run;
use support::*;

/// `tiny` with 40 % spare (room for the blocks retired) and the
/// reliability model `spec` on, FTL `ftl`.
fn device(ftl: &str, spec: &str) -> Config {
    let text = include_str!("../../../presets/tiny.toml").replace("spare_percent = 15", "spare_percent = 40");
    let mut c = Config::parse(&text, "tiny-spare-40.toml").expect("config");
    c.ftl_name = ftl.into();
    c.ftl_options.clear();
    c.set_reliability(Some(spec), &[]).expect("reliability spec");
    c
}

fn random(rw: RwMode, times_capacity: f64) -> SyntheticSpec {
    SyntheticSpec {
        rw,
        bs: SizeSpec::Bytes(4096),
        io_size: Some(SizeSpec::TimesCapacity(times_capacity)),
        ..Default::default()
    }
}

/// The bug trips `rule` (its first error), and the correct FTL passes the same run.
fn caught(config: &Config, bug: Mutant, spec: &SyntheticSpec, rule: Rule) -> StressReport {
    let broken = run(config, bug, spec, false);
    let ftl = &config.ftl_name;
    assert!(broken.errors > 0, "{ftl}: {bug:?} was not caught: {:?}", broken.reliability);
    assert_eq!(first_error(&broken), rule, "{ftl}: {bug:?}: {:#?}", broken.violations);
    let correct = run(config, Mutant::None, spec, false);
    assert_clean(&correct);
    correct
}

#[test]
fn the_model_is_off_by_default_and_its_report_section_absent() {
    let config = tiny();
    assert!(config.reliability.is_none());
    let r = stress(&config, &random(RwMode::RandWrite, 0.2), &opts(1));
    assert!(r.reliability.is_none());
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("\"reliability\"") && !json.contains("grown_bad_blocks"));
    assert!(!r.summary().contains("media"));
}

#[test]
fn page_and_dftl_retire_dozens_of_failing_blocks_over_100x_capacity_and_lose_nothing() {
    // The example device: TLC, programs failing 1 in 50,000 and erases 1
    // in 5,000 on fresh blocks; 100x its logical capacity of 4 KiB random
    // writes, then a clean power cycle and every sector read back.
    let text = include_str!("../../../examples/reliability/tlc-failing.toml");
    let base = Config::parse(text, "examples/reliability/tlc-failing.toml").expect("example device");
    let spec = base.workload.clone().map(|w| SyntheticSpec { io_size: Some(SizeSpec::TimesCapacity(100.0)), ..w });
    let spec = spec.expect("the example has a workload");
    for ftl in ["page", "dftl"] {
        let mut config = base.clone();
        config.ftl_name = ftl.into();
        let r = run(&config, Mutant::None, &spec, true);
        assert_clean(&r);
        let media = r.reliability.as_ref().expect("the reliability section");
        assert!(media.program_failures >= 12 && media.erase_failures >= 6, "{ftl}: {media:?}");
        assert!(media.grown_bad_blocks >= 24, "{ftl}: {media:?}");
        let retired = r.ftl_stats.extra.get("retired_blocks").and_then(|v| v.as_u64()).unwrap_or(0);
        assert_eq!(retired, media.grown_bad_blocks, "{ftl}: every grown bad block retired");
        let remount = r.remount.as_ref().expect("remount");
        assert!(remount.mounted && remount.error.is_none() && remount.verified_sectors > 0, "{ftl}: {remount:?}");
        assert!(r.summary().contains("grown bad blocks"), "{}", r.summary());
    }
}

#[test]
fn block_retires_blocks_whose_erase_fails_and_loses_nothing() {
    // `block` (and `hybrid`) handle erase failures only (see the README):
    // programs do not fail here.
    let text = include_str!("../../../examples/reliability/tlc-failing.toml");
    let mut config = Config::parse(text, "tlc-failing.toml").expect("example device");
    config.ftl_name = "block".into();
    config.set_reliability(Some("program_fail_probability=0,erase_fail_probability=0.0005"), &[]).unwrap();
    let r = run(&config, Mutant::None, &random(RwMode::RandWrite, 3.0), true);
    assert_clean(&r);
    let media = r.reliability.as_ref().expect("section");
    assert!(media.erase_failures >= 5, "{media:?}");
    let retired = r.ftl_stats.extra.get("retired_blocks").and_then(|v| v.as_u64()).unwrap_or(0);
    assert_eq!(retired, media.grown_bad_blocks);
    assert!(r.remount.as_ref().is_some_and(|m| m.mounted && m.error.is_none()));
}

#[test]
fn a_drive_out_of_spare_blocks_stops_with_a_clear_error_not_wrong_data() {
    // Every fifth program fails: the spare blocks run out.
    let config = device("page", "preset:tlc,program_fail_probability=0.2");
    let r = run(&config, Mutant::None, &random(RwMode::RandWrite, 2.0), false);
    let v = r.violations.iter().find(|v| v.severity == Severity::Error).expect("the FTL gives up");
    assert_eq!(v.rule, Rule::FtlError, "{v}");
    assert!(v.message.contains("no free space"), "{v}");
    assert_eq!(r.errors, 1, "nothing else: {:#?}", r.violations);
}

#[test]
fn a_program_failure_the_ftl_keeps_mapped_is_lost_after_program_failure() {
    let config = device("page", "preset:tlc,program_fail_probability=0.003");
    caught(&config, Mutant::KeepsFailedProgram, &random(RwMode::RandRw, 1.0), Rule::LostAfterProgramFailure);
}

#[test]
fn a_failed_erase_put_back_in_the_free_pool_is_a_used_bad_block() {
    let config = device("dftl", "preset:tlc,erase_fail_probability=0.02");
    caught(&config, Mutant::ReusesFailedBlock, &random(RwMode::RandWrite, 3.0), Rule::UsedBadBlock);
}

#[test]
fn an_uncorrectable_read_returned_as_data_is_caught_and_a_read_error_is_not() {
    // RBER about 2 %: some reads fail every retry.
    let config = device("page", "preset:tlc,floor=0.025,retry_rber_factor=0.95");
    let spec = random(RwMode::RandRw, 0.5);
    let correct = caught(&config, Mutant::IgnoresUncorrectableRead, &spec, Rule::UncorrectableReturnedAsData);
    let media = correct.reliability.expect("section");
    assert!(media.uncorrectable_reads > 0 && media.host_read_errors > 0, "{media:?}");
    assert!(media.reads_retried > 0 && media.corrected_bits > 0, "{media:?}");
}

#[test]
fn a_read_error_on_data_the_media_kept_is_caught() {
    let config = device("dftl", "preset:tlc");
    caught(&config, Mutant::SpuriousReadError, &random(RwMode::RandRw, 0.5), Rule::ReadErrorOnGoodData);
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let config = device("page", "preset:qlc,program_fail_probability=0.003,floor=0.01");
    let spec = random(RwMode::RandRw, 1.0);
    let a = run(&config, Mutant::None, &spec, false).without_measurements();
    let b = run(&config, Mutant::None, &spec, false).without_measurements();
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    assert!(a.reliability.as_ref().is_some_and(|m| m.program_failures > 0 && m.read_retries > 0));
}

#[test]
fn a_failed_gc_copy_remapped_where_it_failed_is_caught_and_retiring_it_passes() {
    // Programs fail 1 in 300: GC copies (and copybacks) fail dozens of times.
    for ftl in ["page", "dftl"] {
        let config = device(ftl, "preset:tlc,program_fail_probability=0.0015");
        let correct = caught(&config, Mutant::KeepsFailedCopy, &random(RwMode::RandWrite, 3.0), Rule::UsedBadBlock);
        let media = correct.reliability.expect("section");
        assert!(media.program_failures >= 12, "{ftl}: {media:?}");
    }
}

#[test]
fn a_failed_metadata_program_taken_as_done_is_caught_and_retiring_it_passes() {
    // page: summary pages, checkpoints and the trim log: the group with
    // the failed block is sealed or kept, and programmed or erased again.
    // dftl: translation pages (a small mapping cache: many write-backs),
    // mapped where they failed: the next write-back cannot read its own
    // translation page and the run stops with that FTL error.
    let spec = SyntheticSpec { trim_percent: 10.0, fsync: 50, ..random(RwMode::RandWrite, 3.0) };
    for (ftl, options, rule) in [("page", "", Rule::UsedBadBlock), ("dftl", "cmt_bytes = 2048", Rule::FtlError)] {
        let mut config = device(ftl, "preset:tlc,program_fail_probability=0.001");
        if !options.is_empty() {
            config.ftl_options = toml::from_str(options).expect("options");
        }
        caught(&config, Mutant::KeepsFailedMetaProgram, &spec, rule);
    }
}

#[test]
fn a_page_gc_finds_uncorrectable_is_marked_lost_and_reads_as_a_read_error() {
    // RBER about 2 % and GC copying by read + program: some GC reads fail
    // every retry. The correct FTL marks those pages lost (host reads of
    // them are read errors the oracle accepts); the broken one unmaps
    // them without the mark, and a later read returns zeros.
    for ftl in ["page", "dftl"] {
        let mut config = device(ftl, "preset:tlc,floor=0.02,retry_rber_factor=0.9");
        config.ftl_options = toml::from_str("copyback = false").expect("options");
        let spec = SyntheticSpec { rwmixread: 30, ..random(RwMode::RandRw, 4.0) };
        let correct = caught(&config, Mutant::ForgetsLostPage, &spec, Rule::LostWrite);
        let lost = correct.ftl_stats.extra.get("media_lost_sectors").and_then(|v| v.as_u64()).unwrap_or(0);
        assert!(lost > 0, "{ftl}: {:?}", correct.ftl_stats.extra);
        assert!(correct.reliability.is_some_and(|m| m.host_read_errors > 0), "{ftl}");
    }
}

#[test]
fn block_replaces_blocks_whose_programs_fail_and_loses_nothing() {
    // Host programs, read-modify-write copies and pads fail 1 in 20,000:
    // the failed block's pages move to a fresh block, which takes its
    // place; the broken FTL goes on programming the failed block.
    let text = include_str!("../../../examples/reliability/tlc-failing.toml");
    let mut config = Config::parse(text, "tlc-failing.toml").expect("example device");
    config.ftl_name = "block".into();
    config.set_reliability(Some("program_fail_probability=0.00005,erase_fail_probability=0.0005"), &[]).unwrap();
    let correct = caught(&config, Mutant::KeepsFailedProgram, &random(RwMode::RandWrite, 1.0), Rule::UsedBadBlock);
    let media = correct.reliability.as_ref().expect("section");
    assert!(media.program_failures >= 12 && media.erase_failures >= 2, "{media:?}");
    let retired = correct.ftl_stats.extra.get("retired_blocks").and_then(|v| v.as_u64()).unwrap_or(0);
    assert_eq!(retired, media.grown_bad_blocks, "every grown bad block retired");
    let remounted = run(&config, Mutant::None, &random(RwMode::RandWrite, 1.0), true);
    assert_clean(&remounted);
    assert!(remounted.remount.as_ref().is_some_and(|m| m.mounted && m.error.is_none() && m.verified_sectors > 0));
}

#[test]
fn hybrid_replaces_blocks_whose_programs_fail_and_loses_nothing() {
    // Log pages, merge copies and pads fail; half the spare blocks are
    // random logs, the other half stays free to replace failed blocks
    // (with every spare block a log block, the first failure leaves no
    // free block: `no free space`, tested below). The broken FTL goes on
    // programming the failed block.
    let text = include_str!("../../../examples/reliability/tlc-failing.toml");
    let mut config = Config::parse(text, "tlc-failing.toml").expect("example device");
    config.ftl_name = "hybrid".into();
    config.ftl_options = toml::from_str("random_log_blocks = \"50%\"").expect("options");
    config.set_reliability(Some("program_fail_probability=0.00005,erase_fail_probability=0.0002"), &[]).unwrap();
    let spec = random(RwMode::RandWrite, 2.0);
    let correct = caught(&config, Mutant::KeepsFailedProgram, &spec, Rule::UsedBadBlock);
    let media = correct.reliability.as_ref().expect("section");
    assert!(media.program_failures >= 8, "{media:?}");
    let retired = correct.ftl_stats.extra.get("retired_blocks").and_then(|v| v.as_u64()).unwrap_or(0);
    assert_eq!(retired, media.grown_bad_blocks, "every grown bad block retired");
    let remounted = run(&config, Mutant::None, &spec, true);
    assert_clean(&remounted);
    assert!(remounted.remount.as_ref().is_some_and(|m| m.mounted && m.error.is_none() && m.verified_sectors > 0));
    // Every spare block a log block: out of free blocks, a clear error.
    config.ftl_options.clear();
    let r = run(&config, Mutant::None, &spec, false);
    let v = r.violations.iter().find(|v| v.severity == Severity::Error).expect("hybrid gives up");
    assert!(v.rule == Rule::FtlError && v.message.contains("no free space"), "{v}");
    assert_eq!(r.errors, 1, "nothing else: {:#?}", r.violations);
}

#[test]
fn optr_retires_dozens_of_failing_blocks_and_loses_nothing() {
    // Host pages, GC copies, summary pages, checkpoints and metadata-log
    // pages fail 1 in 3,300, erases 1 in 330 (on fresh blocks): 10x the
    // capacity of random writes, then a clean power cycle and every
    // sector read back.
    let config = device("optr", "preset:tlc,program_fail_probability=0.0003,erase_fail_probability=0.003");
    let r = run(&config, Mutant::None, &random(RwMode::RandWrite, 6.0), true);
    assert_clean(&r);
    let media = r.reliability.as_ref().expect("the reliability section");
    assert!(media.program_failures >= 12 && media.erase_failures >= 4, "{media:?}");
    let retired = r.ftl_stats.extra.get("retired_blocks").and_then(|v| v.as_u64()).unwrap_or(0);
    assert!(retired >= 24 && retired <= media.grown_bad_blocks, "{retired} retired: {media:?}");
    let remount = r.remount.as_ref().expect("remount");
    assert!(remount.mounted && remount.error.is_none() && remount.verified_sectors > 0, "{remount:?}");
}

#[test]
fn optr_moves_its_metadata_off_failed_reserved_blocks_and_a_mount_finds_it() {
    // The reserved blocks (full-checkpoint areas and metadata log: the top
    // block of each plane of `tiny`, then the one below) fail late in
    // their use, when the blocks that replace them hold data: each time
    // optr chooses the reserved blocks again as a mount will (the data of
    // the block that joins moves out) and writes a full checkpoint. The
    // remount finds it and every sector.
    let fails: Vec<String> =
        [191, 255, 319, 383, 447, 511, 190, 254].iter().map(|b| format!("program@block={b},page=28")).collect();
    let text = include_str!("../../../presets/tiny.toml").replace("spare_percent = 15", "spare_percent = 40");
    let mut config = Config::parse(&text, "tiny-spare-40.toml").expect("config");
    config.ftl_name = "optr".into();
    config.ftl_options.clear();
    config.set_reliability(Some("preset:tlc"), &fails).unwrap_or_else(|e| panic!("{e}"));
    let r = run(&config, Mutant::None, &random(RwMode::RandWrite, 5.0), true);
    assert_clean(&r);
    let media = r.reliability.as_ref().expect("the reliability section");
    assert_eq!(media.program_failures, 8, "{media:?}");
    assert_eq!(r.ftl_stats.extra.get("retired_blocks").and_then(|v| v.as_u64()), Some(8));
    let remount = r.remount.as_ref().expect("remount");
    assert!(remount.mounted && remount.error.is_none() && remount.verified_sectors > 0, "{remount:?}");
}

#[test]
fn optr_media_mutants_are_caught_and_the_correct_optr_passes() {
    // (`KeepsFailedProgram`: `reliability_cli.rs`, read back at the remount.)
    let trims = SyntheticSpec { trim_percent: 10.0, fsync: 50, ..random(RwMode::RandWrite, 3.0) };
    for (spec, bug, workload, rule) in [
        // A block whose erase failed, back in the free pool.
        ("erase_fail_probability=0.01", Mutant::ReusesFailedBlock, random(RwMode::RandWrite, 3.0), Rule::UsedBadBlock),
        // A failed summary (or log, or checkpoint) page taken as written.
        ("program_fail_probability=0.001", Mutant::KeepsFailedMetaProgram, trims, Rule::UsedBadBlock),
        // RBER about 2 %: some host reads fail every retry.
        (
            "floor=0.025,retry_rber_factor=0.95",
            Mutant::IgnoresUncorrectableRead,
            random(RwMode::RandRw, 0.5),
            Rule::UncorrectableReturnedAsData,
        ),
    ] {
        let config = device("optr", &format!("preset:tlc,{spec}"));
        let correct = caught(&config, bug, &workload, rule);
        let media = correct.reliability.expect("section");
        assert!(media.grown_bad_blocks > 0 || media.host_read_errors > 0, "{bug:?}: {media:?}");
    }
}
