//! Media reliability over a drive's life (issue 21, second part): refresh
//! in `page` and `dftl` keeps hot-read data readable at a WAF cost the FTL
//! reports, and `endurance`'s lifetime projection, made early, agrees with
//! a run to end of life within 10 %.

mod support;

use nandlab::config::Config;
use nandlab::flash::Cause;
use nandlab::run::endurance::{self, EnduranceOptions};
use nandlab::run::Session;
use nandlab::util::size::SizeSpec;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use nandlab::workload::{HostOp, HostRequest};
use support::*;

/// `tiny` (MLC, 512 blocks) with the TLC model, read disturb 4e-6 per read
/// and no retries: about 650 reads of a block bring its worst page to half
/// the hard decode's limit (60 bits per 8192: 7.3e-3), about 1300 to the
/// limit itself, and beyond it the first read fails.
fn disturbed(ftl: &str, refresh: bool) -> Config {
    let mut c = tiny();
    c.ftl_name = ftl.into();
    c.ftl_options.clear();
    if refresh {
        c.ftl_options.insert("refresh".into(), toml::Value::Boolean(true));
    }
    c.set_reliability(Some("preset:tlc,disturb_per_read=4e-6,read_retries=0"), &[]).expect("reliability");
    c
}

fn request(op: HostOp, lba: u64, sectors: u32) -> HostRequest {
    HostRequest { op, lba, sectors, arrival_ns: 0, job: 0 }
}

struct HotReads {
    uncorrectable_reads: u64,
    host_read_errors: u64,
    errors: u64,
    first_violation: String,
    refresh_pages_moved: u64,
    refresh_waf: f64,
    gc_pages: u64,
}

/// Fill the drive sequentially, then read 4 KiB at random within its
/// first 512 KiB 20,000 times (about 2,500 reads of each of its blocks).
fn hot_reads(config: &Config) -> HotReads {
    let mut s = Session::new(config, 7, 8, 20).expect("session");
    let sectors = config.logical_bytes() / 512;
    for lba in (0..sectors).step_by(64) {
        s.submit(&request(HostOp::Write, lba, (sectors - lba).min(64) as u32)).expect("write");
    }
    let mut x = 12345u64;
    for _ in 0..20_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let lba = (x >> 33) % 128 * 8;
        s.submit(&request(HostOp::Read, lba, 8)).expect("read");
    }
    let media = s.drive().flash().reliability_stats().expect("model on");
    let extra = s.drive().ftl().stats().extra;
    let number = |k: &str| extra.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    HotReads {
        uncorrectable_reads: media.uncorrectable_reads,
        host_read_errors: media.host_read_errors,
        errors: s.drive().flash().log().errors(),
        first_violation: s.drive().flash().log().kept().first().map(|v| v.to_string()).unwrap_or_default(),
        refresh_pages_moved: number("refresh_pages_moved") as u64,
        refresh_waf: number("refresh_waf"),
        gc_pages: s.drive().flash().stats().cause(Cause::Gc).programs(),
    }
}

#[test]
fn refresh_keeps_hot_read_data_readable_and_reports_its_waf_cost() {
    for ftl in ["page", "dftl"] {
        let off = hot_reads(&disturbed(ftl, false));
        assert_eq!(off.errors, 0, "{ftl}: media errors are read errors, not violations: {}", off.first_violation);
        assert!(off.uncorrectable_reads > 100, "{ftl} without refresh: {} uncorrectable", off.uncorrectable_reads);
        assert!(off.host_read_errors > 100, "{ftl}: {} host read errors", off.host_read_errors);
        assert_eq!(off.refresh_pages_moved, 0);
        let on = hot_reads(&disturbed(ftl, true));
        assert_eq!(on.errors, 0, "{ftl}: {}", on.first_violation);
        assert_eq!((on.uncorrectable_reads, on.host_read_errors), (0, 0), "{ftl} with refresh");
        // The cost: pages moved (as GC copies) and the WAF they add.
        assert!(on.refresh_pages_moved > 100, "{ftl}: {} pages refreshed", on.refresh_pages_moved);
        assert!(on.gc_pages >= on.refresh_pages_moved);
        assert!(on.refresh_waf > 0.0, "{ftl}");
    }
}

#[test]
fn refresh_without_the_reliability_model_does_nothing() {
    let mut c = tiny();
    c.ftl_options.insert("refresh".into(), toml::Value::Boolean(true));
    let with = stress(&c, &preset_workload(&c), &opts(3));
    let without = stress(&tiny(), &preset_workload(&c), &opts(3));
    assert_clean(&with);
    assert_eq!(with.flash, without.flash, "the same flash operations");
    assert_eq!(with.ftl_stats.extra.get("refresh_pages_moved"), Some(&serde_json::json!(0)));
}

/// One plane of 64 blocks of 32 pages, 75 % of it logical, `page` with
/// dynamic wear leveling; the TLC model scaled to a 40-cycle life (worn
/// out at 60 erases) with its wear RBER passing the soft decode's limit
/// near the end, and one retry.
fn short_lived() -> Config {
    let mut c = single_plane_device(64, 32, 64.0 * 32.0 * 0.75, "name = \"page\"\nwear_leveling = \"dynamic\"");
    c.set_reliability(Some("preset:tlc,endurance_pe=40,wear_coefficient=1.5e-5,read_retries=1"), &[])
        .expect("reliability");
    c
}

fn random_mix() -> SyntheticSpec {
    SyntheticSpec { rw: RwMode::RandRw, rwmixread: 50, bs: SizeSpec::Bytes(4096), ..Default::default() }
}

fn endurance_run(config: &Config, opts: &EnduranceOptions) -> endurance::EnduranceReport {
    let spec =
        SyntheticSpec { write_size: Some(SizeSpec::TimesCapacity(endurance::workload_limit(opts))), ..random_mix() };
    let mut w = workload(config, &spec, opts.seed);
    endurance::run(config, &mut w, opts).expect("endurance run")
}

#[test]
fn the_early_projection_of_lost_capacity_is_within_10_percent_of_the_run_to_end_of_life() {
    let config = short_lived();
    let opts = EnduranceOptions { seed: 11, until_worn_out: true, ..Default::default() };
    let r = endurance_run(&config, &opts);
    let p = r.endurance.projection.clone().expect("a projection");
    let w = r.endurance.worn_out.clone().expect("a run to end of life");
    eprintln!("{}", r.summary());
    let measured = w.lost_capacity_host_bytes.expect("the drive wore out") as f64;
    // Projected early: after 8x capacity, of a life of about 30 times it.
    assert!(p.host_write_bytes as f64 * 3.0 < measured, "{} vs {measured}", p.host_write_bytes);
    let error = (measured - p.lost_capacity_host_bytes) / measured;
    assert!(
        error.abs() <= 0.10,
        "projected {} bytes, measured {measured}: {:+.1} %",
        p.lost_capacity_host_bytes,
        error * 100.0
    );
    // The end of life is the expected end, not a finding; the worn RBER
    // made reads fail before it, the first grown bad block came before that.
    assert_eq!(r.findings(), 0, "{:#?}", r.run.violations);
    let first_bad = w.first_grown_bad_block_host_bytes.expect("grown bad blocks");
    assert!(first_bad as f64 <= measured);
    assert!(w.first_uncorrectable_read_host_bytes.is_some(), "worn pages fail to decode before the end");
    // TBW at the rated 40 cycles comes before the worn-out end (60).
    assert!(p.tbw_bytes < p.lost_capacity_host_bytes && p.dwpd > 0.0);
}

#[test]
fn a_projection_needs_the_model_and_sane_options() {
    let mut w = workload(&tiny(), &random_mix(), 1);
    let e = endurance::run(&tiny(), &mut w, &EnduranceOptions::default()).err().expect("refused");
    assert!(format!("{e}").contains("reliability"), "{e}");
    for bad in [
        EnduranceOptions { project_after_capacity: 0.0, ..Default::default() },
        EnduranceOptions { warranty_years: f64::NAN, ..Default::default() },
        EnduranceOptions { max_capacity_writes: 1.0, ..Default::default() },
    ] {
        assert!(bad.check().is_err());
    }
}
