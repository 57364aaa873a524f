//! The FTL zoo under the stress suite: `dftl`, `hybrid` and `block` (and
//! `page` with each hot/cold, wear-leveling and victim policy) pass random,
//! sequential, skewed (zipf) and mixed workloads with flushes and trims on
//! `tiny`, `femu-bbssd` and `vst-jasmine`, mount after a clean shutdown
//! and read every sector back, and mount after a power cut from what is on
//! flash alone.
//!
//! On the two large presets the volumes are chosen to exercise every path
//! in reasonable time ([`large_preset_volume`]): sequential rewrites of the
//! whole drive (1.2x, cheap for every FTL); for `dftl` 1.2x of random
//! writes so garbage collection runs (it starts only when the drive is
//! full) and less for the skewed and mixed workloads, whose small
//! read-modify-writes and cache misses are what they exercise; for the
//! log-block and block-mapped FTLs a fraction of the capacity, since they
//! merge from the first rewrite of a logical block and their random
//! workloads copy a whole block per request.

mod support;

use nandlab::config::Config;
use nandlab::report::StressReport;
use nandlab::run::Session;
use nandlab::workload::size::SizeSpec;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use nandlab::workload::Workload;
use support::*;

fn spec(f: impl FnOnce(&mut SyntheticSpec)) -> SyntheticSpec {
    let mut s = SyntheticSpec::default();
    f(&mut s);
    s
}

/// The four workloads of the suite, writing `times` the logical capacity.
fn workloads(times: f64) -> Vec<(&'static str, SyntheticSpec)> {
    let w = Some(SizeSpec::TimesCapacity(times));
    vec![
        (
            "random",
            spec(|s| {
                s.rw = RwMode::RandRw;
                s.rwmixread = 25;
                s.bsrange = Some("4k-64k".into());
                s.write_size = w;
            }),
        ),
        (
            "sequential",
            spec(|s| {
                s.rw = RwMode::Rw;
                s.rwmixread = 10;
                s.bs = SizeSpec::Bytes(128 << 10);
                s.write_size = w;
            }),
        ),
        (
            "zipf",
            spec(|s| {
                s.rw = RwMode::RandRw;
                s.rwmixread = 30;
                s.bsrange = Some("4k-16k".into());
                s.random_distribution = "zipf:1.1".parse().unwrap();
                s.write_size = w;
            }),
        ),
        (
            "mixed with flush and trim",
            spec(|s| {
                s.rw = RwMode::RandRw;
                s.rwmixread = 30;
                s.bsrange = Some("512-16k".into());
                s.blockalign = Some(SizeSpec::Bytes(512));
                s.fsync = 16;
                s.trim_percent = 10.0;
                s.write_size = w;
            }),
        ),
    ]
}

/// `config` running FTL `ftl` with options `opts` ("key = value" lines).
fn with_ftl(config: &Config, ftl: &str, opts: &str) -> Config {
    let mut c = config.clone();
    c.ftl_name = ftl.to_string();
    c.ftl_options = toml::from_str(opts).unwrap_or_else(|e| panic!("{opts}: {e}"));
    c
}

/// The FTL configurations of the zoo: (label, FTL, options).
const ZOO: [(&str, &str, &str); 6] = [
    ("dftl (default cache)", "dftl", ""),
    ("dftl (10% cache, LRU)", "dftl", "cmt_bytes = \"10%\"\ncmt_replacement = \"lru\""),
    ("dftl (1% cache, segmented LRU, two-stream)", "dftl", "cmt_bytes = \"1%\"\nhot_cold = \"two-stream\""),
    ("hybrid", "hybrid", ""),
    ("hybrid (8 random logs)", "hybrid", "random_log_blocks = 8"),
    ("block", "block", ""),
];

/// Times the logical capacity written by `workload` on a large preset.
fn large_preset_volume(ftl: &str, workload: &str) -> f64 {
    match (ftl, workload) {
        (_, "sequential") => 1.2,
        ("dftl", "random") => 1.2,
        ("dftl", "zipf") => 0.3,
        ("dftl", _) => 0.15,
        (_, "mixed with flush and trim") => 0.05,
        _ => 0.15,
    }
}

fn check(label: &str, workload: &str, r: &StressReport, expect_remount: bool) {
    assert_eq!(r.errors, 0, "{label} / {workload}: violations {:#?}", r.violations);
    assert!(r.stopped_early.is_none(), "{label} / {workload}: stopped early: {:?}", r.stopped_early);
    if expect_remount {
        let m = r.remount.as_ref().expect("remount ran");
        assert!(m.error.is_none(), "{label} / {workload}: {:?}", m.error);
    }
}

#[test]
fn every_zoo_ftl_passes_every_workload_on_tiny_and_mounts_cleanly() {
    let config = tiny();
    for (label, ftl, options) in ZOO {
        let c = with_ftl(&config, ftl, options);
        for (name, w) in workloads(3.0) {
            let mut o = opts(7);
            o.remount_verify = true;
            let r = stress(&c, &w, &o);
            check(label, name, &r, true);
            let m = r.remount.as_ref().unwrap();
            assert_eq!(m.verified_sectors, config.logical_sectors, "{label} / {name}: every sector read back");
            assert!(r.gc.runs > 0, "{label} / {name}: GC or merges ran");
        }
    }
}

#[test]
fn page_passes_the_mixed_workload_with_every_new_policy() {
    let config = tiny();
    let w = &workloads(3.0)[3].1;
    for options in [
        "gc_policy = \"random\"",
        "gc_policy = \"d-choices:4\"",
        "gc_policy = \"windowed-greedy:8\"",
        "hot_cold = \"dac:4\"\ngc_policy = \"cost-benefit\"",
        "hot_cold = \"dac:8\"\ncopyback = false",
        "hot_cold = \"two-stream\"",
        "wear_leveling = \"dynamic\"",
        "wear_leveling = \"static:threshold=2\"\nhot_cold = \"dac:3\"",
    ] {
        let mut o = support::opts(3);
        o.remount_verify = true;
        let r = stress(&with_ftl(&config, "page", options), w, &o);
        check("page", options, &r, true);
        assert!(r.gc.runs > 0, "{options}: GC ran");
    }
}

#[test]
fn every_zoo_ftl_passes_on_femu_bbssd_and_mounts_cleanly() {
    let config = Config::preset("femu-bbssd").unwrap();
    for (label, ftl, options) in [ZOO[0], ZOO[3], ZOO[5]] {
        // dftl with FEMU's GC thresholds (the preset's `[ftl]` table is page's) and a
        // cache small enough to evict.
        let (label, options) = if ftl == "dftl" {
            (
                "dftl (512 KiB cache, FEMU's GC thresholds)",
                "cmt_bytes = \"512KiB\"\ngc_foreground_free_percent = 5\ngc_background_free_percent = 25",
            )
        } else {
            (label, options)
        };
        let c = with_ftl(&config, ftl, options);
        for (i, (name, mut w)) in workloads(1.0).into_iter().enumerate() {
            let times = large_preset_volume(ftl, name);
            // Background GC (idle time) needs a little more than a drive write to start.
            let times = if (ftl, name) == ("dftl", "random") { 1.3 } else { times };
            w.write_size = Some(SizeSpec::TimesCapacity(times));
            let mut o = support::opts(2);
            o.idle_every = 2000;
            o.remount_verify = i == 3; // one clean power cycle per FTL keeps the suite quick
            let r = stress(&c, &w, &o);
            check(label, name, &r, o.remount_verify);
            if ftl != "dftl" || times > 1.0 {
                assert!(r.gc.runs > 0, "{label} / {name}: GC or merges ran");
            } else {
                assert!(r.ftl_stats.extra["writebacks"].as_u64().unwrap() > 0, "{label} / {name}: write-backs ran");
            }
        }
    }
}

#[test]
fn every_zoo_ftl_passes_on_vst_jasmine() {
    let config = Config::preset("vst-jasmine").unwrap();
    for (label, ftl, options) in [ZOO[0], ZOO[3], ZOO[5]] {
        let c = with_ftl(&config, ftl, options);
        for (name, mut w) in workloads(1.0) {
            w.write_size = Some(SizeSpec::TimesCapacity(large_preset_volume(ftl, name)));
            // VST's alignment: 8 KiB (the mixed workload keeps its 512 B).
            if name != "mixed with flush and trim" {
                w.blockalign = Some(SizeSpec::Bytes(8192));
                if w.bsrange.is_some() {
                    w.bsrange = Some("8k-64k".into());
                }
            } else {
                w.trim_percent = 2.0;
            }
            let r = stress(&c, &w, &support::opts(12345));
            check(label, name, &r, false);
            // dftl's garbage collection needs a full drive; its skewed and
            // mixed runs exercise the cache instead.
            if ftl != "dftl" || large_preset_volume(ftl, name) > 1.0 {
                assert!(r.gc.runs > 0, "{label} / {name}: GC or merges ran");
            } else {
                assert!(r.ftl_stats.extra["writebacks"].as_u64().unwrap() > 0, "{label} / {name}: write-backs ran");
            }
        }
    }
}

#[test]
fn zoo_ftls_mount_without_shutdown_from_what_is_on_flash() {
    // No trims: without a clean shutdown, only trims may be lost (dftl's
    // until written back); every write must be found.
    let config = tiny();
    let w = spec(|s| {
        s.rw = RwMode::RandWrite;
        s.bsrange = Some("4k-32k".into());
        s.write_size = Some(SizeSpec::TimesCapacity(2.0));
    });
    for (label, ftl, options) in [ZOO[1], ZOO[2], ZOO[3], ZOO[4], ZOO[5]] {
        let c = with_ftl(&config, ftl, options);
        let mut wl = workload(&c, &w, 5);
        let mut session = Session::new(&c, 5, wl.alignment_sectors(), 10).unwrap();
        for r in drain(&mut wl) {
            session.submit(&r).unwrap();
        }
        session.power_cycle(false).unwrap_or_else(|e| panic!("{label}: mount from the OOB scan: {e}"));
        assert_eq!(session.verify_all(4096).unwrap(), config.logical_sectors);
        assert!(session.flash.log().is_clean(), "{label}: {:?}", session.flash.log().kept());
        // Writes after the mount land and verify too, across a clean cycle.
        let mut more = workload(&c, &w, 6);
        for r in drain(&mut more).into_iter().take(3000) {
            session.submit(&r).unwrap();
        }
        session.remount().unwrap_or_else(|e| panic!("{label}: clean remount: {e}"));
        session.verify_all(4096).unwrap();
        assert!(session.flash.log().is_clean(), "{label}: {:?}", session.flash.log().kept());
    }
}

#[test]
fn zoo_runs_are_deterministic() {
    let config = tiny();
    let w = preset_workload(&config);
    for (label, ftl, options) in [ZOO[2], ZOO[3], ZOO[5]] {
        let c = with_ftl(&config, ftl, options);
        let json = |seed| serde_json::to_string(&stress(&c, &w, &support::opts(seed)).without_measurements()).unwrap();
        assert_eq!(json(4), json(4), "{label}");
    }
}

#[test]
fn zoo_ftls_work_around_factory_bad_blocks() {
    let mut config = tiny();
    config.factory_bad_block_percent = 2.0;
    let w = &workloads(2.0)[0].1;
    for (label, ftl, options) in [ZOO[1], ZOO[3], ZOO[5]] {
        let mut o = opts(13);
        o.remount_verify = true;
        let r = stress(&with_ftl(&config, ftl, options), w, &o);
        check(label, "random with bad blocks", &r, true);
    }
}
