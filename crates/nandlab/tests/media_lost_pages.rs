//! Logical pages lost to the media (issue 21): a copy the FTL makes of its
//! own accord (GC in `page`/`dftl`, a merge or a failed block's
//! replacement in `block`/`hybrid`) whose read is uncorrectable marks the
//! page lost. Host reads of it are media errors (never wrong data, never an
//! FTL error that stops the run), a later write makes it good again, and
//! the mark survives a clean power cycle. Each part is proven by a
//! deliberately broken FTL that trips the oracle where the correct one
//! passes the same run.

mod support;

use nandlab::config::Config;
use nandlab::ftl::mutants::{build_mutated, Mutant};
use nandlab::report::StressReport;
use nandlab::util::size::SizeSpec;
use nandlab::violation::Rule;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use support::stress_mutated as run;
use support::*;

/// `tiny` in SLC (one page type: whether a read fails depends on the
/// block's wear, reads and age, not on the page's type) with 40 % spare,
/// FTL `ftl` with `options`, and a raw bit error rate of about 2 % that
/// retries barely lower: the pages of the most read and oldest blocks fail
/// every retry, copies included.
fn high_rber(ftl: &str, options: &str) -> Config {
    let text = include_str!("../../../presets/tiny.toml")
        .replace("spare_percent = 15", "spare_percent = 40")
        .replace("cell_type = \"mlc\"", "cell_type = \"slc\"")
        .replace("page_pairing = \"staggered\"", "page_pairing = \"consecutive\"");
    let mut c = Config::parse(&text, "tiny-spare-40.toml").expect("config");
    c.ftl_name = ftl.into();
    c.ftl_options = toml::from_str(options).expect("options");
    c.set_reliability(Some("preset:tlc,floor=0.037,retry_rber_factor=0.9"), &[]).expect("reliability spec");
    c
}

fn random(rwmixread: u32, times_capacity: f64) -> SyntheticSpec {
    SyntheticSpec {
        rw: RwMode::RandRw,
        rwmixread,
        bs: SizeSpec::Bytes(4096),
        io_size: Some(SizeSpec::TimesCapacity(times_capacity)),
        ..Default::default()
    }
}

fn lost_sectors(r: &StressReport) -> u64 {
    r.ftl_stats.extra.get("media_lost_sectors").and_then(|v| v.as_u64()).unwrap_or(0)
}

/// The bug trips `rule` (its first error); the correct FTL passes the same
/// run, with pages lost and host reads of them failing as media errors.
fn caught(config: &Config, bug: Mutant, spec: &SyntheticSpec, remount: bool, rule: Rule) -> StressReport {
    let ftl = &config.ftl_name;
    let broken = run(config, bug, spec, remount);
    assert!(broken.errors > 0, "{ftl}: {bug:?} was not caught: {:?}", broken.reliability);
    assert_eq!(first_error(&broken), rule, "{ftl}: {bug:?}: {:#?}", broken.violations);
    let correct = run(config, Mutant::None, spec, remount);
    assert_clean(&correct);
    assert!(lost_sectors(&correct) > 0, "{ftl}: no page lost: {:?}", correct.ftl_stats.extra);
    let media = correct.reliability.as_ref().expect("the reliability section");
    assert!(media.host_read_errors > 0, "{ftl}: {media:?}");
    correct
}

#[test]
fn block_and_hybrid_mark_pages_whose_merge_copy_is_uncorrectable_lost() {
    // Merges copy by read + program (`copyback = false`): some reads fail
    // every retry. The broken FTLs pad the lost page with zeros as if it
    // had never been written: a later read returns zeros, a lost write.
    for (ftl, options) in [("block", "copyback = false"), ("hybrid", "copyback = false\nrandom_log_blocks = \"50%\"")] {
        let config = high_rber(ftl, options);
        let correct = caught(&config, Mutant::ForgetsLostPage, &random(30, 0.5), false, Rule::LostWrite);
        // No FTL error stopped it: every request ran.
        assert_eq!(correct.errors, 0, "{ftl}");
    }
}

/// Run `spec` on a fresh session of `config` with `mutant`, power-cycle
/// it (cleanly, or by a cut when `clean` is false: the FTL gets no
/// shutdown), then read the whole logical space back page by page (a lost
/// page's read error does not hide its neighbours, as a large read's
/// would at this error rate). Returns the session's violation log, the
/// host read errors and the pages lost before the power cycle.
fn power_cycle_and_read_back(
    config: &Config,
    mutant: Mutant,
    spec: &SyntheticSpec,
    clean: bool,
) -> (nandlab::violation::ViolationLog, u64, u64) {
    let (ftl, options) = (config.ftl_name.clone(), config.ftl_options.clone());
    let factory: nandlab::run::FtlFactory = Box::new(move |env| build_mutated(&ftl, env, &options, mutant));
    let mut session = nandlab::run::Session::with_factory(config, factory, 5, 8, 100).expect("session");
    for req in drain(&mut workload(config, spec, 5)) {
        session.submit(&req).expect("request");
        assert!(!session.ftl_failed(), "{}: {mutant:?}: {:?}", config.ftl_name, session.drive_mut().take_log());
    }
    let lost = session.drive().ftl().stats().extra.get("media_lost_sectors").and_then(|v| v.as_u64()).unwrap_or(0);
    let media = |s: &nandlab::run::Session| s.drive().flash().reliability().expect("model").stats().host_read_errors;
    let read_errors_before = media(&session);
    session.power_cycle(clean).expect("mount");
    let spp = config.geometry.sectors_per_page();
    session.verify_all(spp).expect("verification");
    let read_errors = media(&session) - read_errors_before;
    (session.drive_mut().take_log(), read_errors, lost)
}

#[test]
fn lost_page_marks_survive_a_power_cycle() {
    // The marks are on flash: after a clean power cycle, and after a cut,
    // a lost page still reads as the media error. The broken mount forgets
    // them, and the page reads as zeros or an older copy.
    let cases = [
        ("block", "copyback = false", 0.5),
        ("hybrid", "copyback = false\nrandom_log_blocks = \"50%\"", 0.5),
        ("page", "copyback = false", 4.0),
        ("dftl", "copyback = false", 4.0),
    ];
    for (ftl, options, times_capacity) in cases {
        let config = high_rber(ftl, options);
        let spec = random(30, times_capacity);
        for clean in [true, false] {
            let (log, read_errors, lost) = power_cycle_and_read_back(&config, Mutant::None, &spec, clean);
            assert!(log.is_clean(), "{ftl} (clean {clean}): {:#?}", log.kept());
            assert!(lost > 0 && read_errors > 0, "{ftl} (clean {clean}): lost {lost}, read errors {read_errors}");
            let (log, _, _) = power_cycle_and_read_back(&config, Mutant::MountForgetsLostPages, &spec, clean);
            let first = log.first_error().map(|v| v.rule);
            assert_eq!(first, Some(Rule::LostWrite), "{ftl} (clean {clean}): {:#?}", log.kept());
        }
    }
}

#[test]
fn block_reads_never_written_sectors_as_zeros_after_a_copyback_moved_their_pad() {
    // Merges by copyback (the default) move pads raw; a later read +
    // program copy of such a page can fail. The page held zeros for
    // offsets never written, so a host read of it must return zeros, not a
    // media error (`read_error_on_good_data`).
    // (No trims: a lost page of trim zeros still reads as a media error,
    // see the design note's "Left".) Before the fix a copyback made the
    // pad a copy, and this run stopped at `read_error_on_good_data`.
    let config = high_rber("block", "copyback = true");
    let r = run(&config, Mutant::None, &SyntheticSpec { trim_percent: 0.0, ..random(30, 0.5) }, false);
    assert_clean(&r);
    assert!(r.reliability.as_ref().expect("section").uncorrectable_reads > 0, "{:?}", r.reliability);
}
