//! `crash` with the media reliability model: the model's state rolls back
//! with the NAND to every cut (proven by the broken variant without its
//! journal), campaigns are reproducible, and every shipped FTL survives
//! cuts with the model's bit errors, retries and uncorrectable reads on.

use super::*;
use crate::nand::reliability::journal::JOURNAL_OFF_FOR_TEST;
use crate::util::size::SizeSpec;
use crate::workload::synthetic::RwMode;

/// The example failing TLC device with the model `spec` and exact failures `fails`.
fn device(ftl: &str, spec: &str, fails: &[&str]) -> Config {
    let text = include_str!("../../../../../examples/reliability/tlc-failing.toml");
    let mut c = Config::parse(text, "examples/reliability/tlc-failing.toml").expect("example device");
    c.ftl_name = ftl.into();
    c.ftl_options.clear();
    c.reliability = None;
    let fails: Vec<String> = fails.iter().map(|f| f.to_string()).collect();
    c.set_reliability(Some(spec), &fails).expect("reliability spec");
    c
}

fn random_writes(mib: u64) -> SyntheticSpec {
    SyntheticSpec {
        rw: RwMode::RandWrite,
        bs: SizeSpec::Bytes(4096),
        io_size: Some(SizeSpec::Bytes(mib << 20)),
        ..SyntheticSpec::default()
    }
}

/// The index of the first flash operation of the request during which the
/// model's first program failure happens (the base run, replayed alone).
fn first_op_of_failing_request(config: &Config, spec: &SyntheticSpec, seed: u64) -> u64 {
    first_op_of_failing_request_if_any(config, spec, seed).expect("the exact failure never happened")
}

fn first_op_of_failing_request_if_any(config: &Config, spec: &SyntheticSpec, seed: u64) -> Option<u64> {
    let mut session = Session::new(config, seed, 8, 20).expect("session");
    let mut workload = new_workload(config, spec, seed).expect("workload");
    while let Some(req) = next_request(&mut workload).expect("request") {
        let before = session.drive().flash().op_index();
        session.submit(&req).expect("submit");
        let stats = session.drive().flash().reliability_stats().expect("model on");
        if stats.program_failures > 0 {
            return Some(before);
        }
    }
    None
}

fn one_cut(seed: u64, cut: PowerCut) -> CrashOptions {
    CrashOptions {
        seed,
        points: PointSelection::At(vec![cut]),
        nested: false,
        post_requests: 8,
        threads: 1,
        shrink: false,
        ..CrashOptions::default()
    }
}

/// A program fails at block 0, page 12 (pages 0..12 hold acknowledged
/// data). A cut at the first operation of that request falls before the
/// failure: the block must not be bad on the recovered drive. Without the
/// model's journal it is (the state of the end of the request). The FTL
/// here is `page` with a mount that skips grown bad blocks
/// (`MountSkipsGrownBadBlocks`; the correct mount scans them, which would
/// hide the difference): the block's acknowledged data is lost, so the
/// broken variant is caught; with the journal the same point passes.
#[test]
fn the_models_state_rolls_back_to_the_cut_and_without_its_journal_a_false_loss_appears() {
    let config =
        device("page", "preset:tlc,program_fail_probability=0,erase_fail_probability=0", &["program@block=0,page=12"]);
    let spec = random_writes(4);
    let seed = 5;
    let at = first_op_of_failing_request(&config, &spec, seed);
    let opts = one_cut(seed, PowerCut { op_index: at, during: false });
    let skipping = || skips_grown_bad_blocks("page");
    let good = super::run_with_factory(&config, skipping(), &spec, &opts).expect("campaign");
    assert_eq!((good.points_tested, good.failed), (1, 0), "{:?}", good.points);

    JOURNAL_OFF_FOR_TEST.with(|off| off.set(true));
    let broken = super::run_with_factory(&config, skipping(), &spec, &opts);
    JOURNAL_OFF_FOR_TEST.with(|off| off.set(false));
    let broken = broken.expect("campaign");
    assert_eq!(broken.failed, 1, "the model left as at the end of the request must be caught");
    let rule = broken.points[0].first.as_ref().map(|v| v.rule);
    assert_eq!(rule, Some(crate::violation::Rule::LostDurableWrite), "{:?}", broken.points[0]);
}

/// Same configuration, workload and seed: the same report (the model's
/// draws at every cut included), whatever the thread count.
#[test]
fn a_campaign_with_the_model_and_failures_is_reproducible() {
    let config = device("dftl", "preset:tlc,program_fail_probability=2e-3,erase_fail_probability=2e-2", &[]);
    let spec = random_writes(4);
    let opts = |threads| CrashOptions {
        seed: 9,
        points: PointSelection::Random { count: 24, span: None },
        threads,
        shrink: false,
        post_requests: 8,
        ..CrashOptions::default()
    };
    // Everything but the measured times, rates and memory, and the thread count.
    let strip = |r: CrashReport| {
        let mut v = serde_json::to_value(&r).expect("json");
        let o = v.as_object_mut().expect("object");
        o.retain(|k, _| {
            !(k.contains("seconds") || k.starts_with("points_per") || k == "peak_rss_bytes" || k == "threads")
        });
        v.to_string()
    };
    let a = strip(run(&config, &spec, &opts(1)).expect("campaign"));
    let b = strip(run(&config, &spec, &opts(1)).expect("campaign"));
    let c = strip(run(&config, &spec, &opts(2)).expect("campaign"));
    assert!(a.contains("\"failed\":"), "{a}");
    assert!(a == b, "same seed, different reports:\n{a}\n{b}");
    assert!(a == c, "one thread and two differ:\n{a}\n{c}");
}

/// Every shipped FTL recovers from cuts with the model's bit errors,
/// retries and uncorrectable reads on (a day of retention per request,
/// no program or erase failures: see the design note for those).
#[test]
fn every_ftl_survives_cuts_with_the_models_bit_errors_on() {
    let spec = random_writes(8);
    for ftl in ["page", "dftl", "optr", "block", "hybrid"] {
        let config = device(
            ftl,
            "preset:tlc,program_fail_probability=0,erase_fail_probability=0,seconds_per_request=86400",
            &[],
        );
        let opts = CrashOptions {
            seed: 2,
            points: PointSelection::Random { count: 16, span: None },
            threads: 1,
            post_requests: 8,
            ..CrashOptions::default()
        };
        let r = run(&config, &spec, &opts).expect("campaign");
        assert_eq!(r.points_tested, 16, "{ftl}");
        assert_eq!(r.failed, 0, "{ftl}: {:?}", r.points.iter().find(|p| !p.passed));
    }
}

/// The retirement window (issue 21): a program fails at page 12 of the
/// first block (of 0, 64, 128, ...) the FTL fills that far; cuts at each
/// of the 48 operations that follow the failing request's first one fall
/// before, during and after the FTL moves the block's other pages
/// (acknowledged data) off, with `factory` building the FTL.
fn retirement_window_campaign(ftl: &str, factory: Option<super::SharedFactory>) -> CrashReport {
    let spec = random_writes(4);
    let seed = 5;
    let (config, at) = (0..8)
        .find_map(|i| {
            let fail = format!("program@block={},page=12", i * 64);
            let config = device(ftl, "preset:tlc,program_fail_probability=0,erase_fail_probability=0", &[&fail]);
            first_op_of_failing_request_if_any(&config, &spec, seed).map(|at| (config, at))
        })
        .unwrap_or_else(|| panic!("{ftl}: no block filled to page 12"));
    let cuts = (at..at + 48).map(|op_index| PowerCut { op_index, during: false }).collect();
    let opts = CrashOptions {
        seed,
        points: PointSelection::At(cuts),
        nested: false,
        post_requests: 8,
        threads: 1,
        shrink: false,
        ..CrashOptions::default()
    };
    let factory = factory.unwrap_or_else(|| super::shared_registry_factory(&config));
    super::run_with_factory(&config, factory, &spec, &opts).expect("campaign")
}

/// Every shipped FTL keeps the acknowledged pages of a block whose program
/// failed through a cut anywhere in its retirement: the mount scans a
/// grown bad block's readable pages and finishes the retirement.
#[test]
fn every_ftl_keeps_a_failed_blocks_data_through_a_cut_in_its_retirement() {
    for ftl in ["page", "dftl", "optr", "block", "hybrid"] {
        let r = retirement_window_campaign(ftl, None);
        assert_eq!(r.points_tested, 48, "{ftl}");
        assert_eq!(r.failed, 0, "{ftl}: {:?}", r.points.iter().find(|p| !p.passed));
    }
}

/// The same campaign catches a mount that skips grown bad blocks as it
/// skips factory bad ones (`MountSkipsGrownBadBlocks`, the data plane's
/// behaviour before): the pages not yet moved are lost.
#[test]
fn a_mount_that_skips_grown_bad_blocks_loses_the_data_not_yet_moved() {
    for ftl in ["page", "dftl", "hybrid"] {
        let r = retirement_window_campaign(ftl, Some(skips_grown_bad_blocks(ftl)));
        assert!(r.failed > 0, "{ftl}: the mutant passed");
        let rule = r.points.iter().find(|p| !p.passed).and_then(|p| p.first.as_ref()).map(|v| v.rule);
        assert_eq!(rule, Some(crate::violation::Rule::LostDurableWrite), "{ftl}");
    }
}

/// `ftl` with a mount that skips grown bad blocks.
fn skips_grown_bad_blocks(ftl: &str) -> super::SharedFactory {
    use crate::ftl::mutants::{build_mutated, Mutant};
    let name = ftl.to_string();
    std::sync::Arc::new(move |env| build_mutated(&name, env, &Default::default(), Mutant::MountSkipsGrownBadBlocks))
}

/// `block` at raised failure rates: a cut while a failed block's pages
/// are being copied to its replacement (the shrunk finding of a 100-point
/// campaign, seed 2). The mount reads the grown bad block as a source;
/// the mount that skips it loses the pages not yet copied.
#[test]
fn block_finishes_a_cut_replacement_from_the_grown_bad_block() {
    use crate::report::crash::NestedCut;
    let config = device("block", "preset:tlc,program_fail_probability=2e-3,erase_fail_probability=2e-2", &[]);
    let spec = random_writes(8);
    let opts = CrashOptions {
        seed: 2,
        points: PointSelection::At(vec![PowerCut { op_index: 3993, during: false }]),
        nested: true,
        nested_at: Some(NestedCut { nth: 0, during: false }),
        max_requests: Some(136),
        post_requests: 64,
        threads: 1,
        shrink: false,
        ..CrashOptions::default()
    };
    let good = run(&config, &spec, &opts).expect("campaign");
    assert_eq!((good.points_tested, good.failed), (1, 0), "{:?}", good.points);
    let broken = super::run_with_factory(&config, skips_grown_bad_blocks("block"), &spec, &opts).expect("campaign");
    assert_eq!(broken.failed, 1, "the mount that skips grown bad blocks must be caught");
    let rule = broken.points[0].first.as_ref().map(|v| v.rule);
    assert_eq!(rule, Some(crate::violation::Rule::LostDurableWrite), "{:?}", broken.points[0]);
}
