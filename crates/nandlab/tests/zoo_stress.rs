//! The FTL zoo under the stress suite: `dftl`, `hybrid` and `block` (and
//! `page` with each hot/cold, wear-leveling and victim policy) pass random,
//! sequential, skewed (zipf) and mixed workloads with flushes and trims on
//! `tiny`, `femu-bbssd` and `vst-jasmine`, mount after a clean shutdown
//! and read every sector back, and mount after a power cut from what is on
//! flash alone.
//!
//! On the two large presets the volumes are chosen to exercise every path
//! in reasonable time: for `dftl` ([`dftl_large_preset_volume`]) sequential
//! rewrites of the whole drive (1.2x), 1.2x of random writes so garbage
//! collection runs (it starts only when the drive is full) and less for the
//! skewed and mixed workloads, whose small read-modify-writes and cache
//! misses are what they exercise. The log-block and block-mapped FTLs
//! ([`steady_state_volume`]) run each workload until they are in steady
//! state — `hybrid`'s random log pool full and reclaimed by full merges
//! (switch merges for the sequential workload), `block` rewriting whole
//! blocks with every logical block mapped — and mount cleanly after every
//! workload on both presets.

mod support;

use nandlab::config::Config;
use nandlab::report::StressReport;
use nandlab::run::Session;
use nandlab::util::size::SizeSpec;
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
        ("mixed with flush and trim", mixed_with_flush_and_trim(w)),
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

/// Times the logical capacity `dftl` writes with `workload` on a large preset.
fn dftl_large_preset_volume(workload: &str) -> f64 {
    match workload {
        "sequential" | "random" => 1.2,
        "zipf" => 0.3,
        _ => 0.15,
    }
}

/// Times the logical capacity `hybrid` or `block` writes with `workload` on
/// a large preset to reach steady state. `hybrid`'s random pool holds a
/// third of `femu-bbssd`'s capacity (1022 of 3072 logical blocks' worth)
/// but a tenth of `vst-jasmine`'s; the skewed workload rewrites its hot
/// pages in place of filling the pool, so it needs more.
fn steady_state_volume(preset: &str, ftl: &str, workload: &str) -> f64 {
    match (preset, ftl, workload) {
        (_, _, "sequential") => 1.2,
        ("femu-bbssd", "hybrid", "zipf") => 0.5,
        ("femu-bbssd", "hybrid", _) => 0.4,
        ("vst-jasmine", "hybrid", "zipf") => 0.3,
        (_, _, "mixed with flush and trim") => 0.05,
        _ => 0.15,
    }
}

/// `hybrid` and `block` on a large preset: every workload to steady state,
/// then a clean power cycle and every sector read back.
fn block_mapped_ftls_reach_steady_state_and_mount_cleanly(preset: &str) {
    let config = Config::preset(preset).unwrap();
    for (label, ftl, options) in [ZOO[3], ZOO[5]] {
        let c = with_ftl(&config, ftl, options);
        for (name, mut w) in workloads(1.0) {
            w.write_size = Some(SizeSpec::TimesCapacity(steady_state_volume(preset, ftl, name)));
            if preset == "vst-jasmine" {
                vst_alignment(name, &mut w);
            }
            let mut o = support::opts(2);
            o.remount_verify = true;
            let r = stress(&c, &w, &o);
            check(label, name, &r, true);
            let m = r.remount.as_ref().unwrap();
            assert_eq!(m.verified_sectors, config.logical_sectors, "{preset} {label} / {name}: every sector read back");
            let steady = match (ftl, name) {
                ("hybrid", "sequential") => "switch_merges",
                ("hybrid", _) => "full_merges",
                _ => "rmw_merges",
            };
            let merges = r.ftl_stats.extra[steady].as_u64().unwrap();
            eprintln!("{preset} {label} / {name}: {merges} {steady}, WAF {:.2}", r.waf);
            assert!(merges > 0, "{preset} {label} / {name}: steady state ({steady})");
            // Uniform traffic maps every logical block (the skewed one leaves cold ones untouched).
            if ftl == "block" && matches!(name, "random" | "mixed with flush and trim") {
                let fresh = r.ftl_stats.extra["fresh_blocks"].as_u64().unwrap();
                let lbns = config.logical_sectors.div_ceil(config.geometry.sectors_per_page().into());
                let lbns = lbns.div_ceil(config.geometry.pages_per_block().into());
                assert!(fresh as f64 > 0.9 * lbns as f64, "{preset} {label} / {name}: {fresh} of {lbns} mapped");
            }
        }
    }
}

#[test]
fn hybrid_and_block_reach_steady_state_on_femu_bbssd_and_mount_cleanly() {
    block_mapped_ftls_reach_steady_state_and_mount_cleanly("femu-bbssd");
}

#[test]
fn hybrid_and_block_reach_steady_state_on_vst_jasmine_and_mount_cleanly() {
    block_mapped_ftls_reach_steady_state_and_mount_cleanly("vst-jasmine");
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
fn dftl_passes_on_femu_bbssd_and_mounts_cleanly() {
    // FEMU's GC thresholds (the preset's `[ftl]` table is page's) and a
    // cache small enough to evict.
    let label = "dftl (512 KiB cache, FEMU's GC thresholds)";
    let options = "cmt_bytes = \"512KiB\"\ngc_foreground_free_percent = 5\ngc_background_free_percent = 25";
    let c = with_ftl(&Config::preset("femu-bbssd").unwrap(), "dftl", options);
    for (i, (name, mut w)) in workloads(1.0).into_iter().enumerate() {
        // Background GC (idle time) needs a little more than a drive write to start.
        let times = if name == "random" { 1.3 } else { dftl_large_preset_volume(name) };
        w.write_size = Some(SizeSpec::TimesCapacity(times));
        let mut o = support::opts(2);
        o.idle_every = 2000;
        o.remount_verify = i == 3; // one clean power cycle keeps the suite quick
        let r = stress(&c, &w, &o);
        check(label, name, &r, o.remount_verify);
        assert_dftl_worked(label, name, times, &r);
    }
}

/// GC ran if the drive filled; otherwise the cache wrote entries back.
fn assert_dftl_worked(label: &str, name: &str, times: f64, r: &StressReport) {
    if times > 1.0 {
        assert!(r.gc.runs > 0, "{label} / {name}: GC ran");
    } else {
        assert!(r.ftl_stats.extra["writebacks"].as_u64().unwrap() > 0, "{label} / {name}: write-backs ran");
    }
}

/// VST's alignment on `vst-jasmine`: 8 KiB (the mixed workload keeps its
/// 512 B, with fewer trims).
fn vst_alignment(name: &str, w: &mut SyntheticSpec) {
    if name != "mixed with flush and trim" {
        w.blockalign = Some(SizeSpec::Bytes(8192));
        if w.bsrange.is_some() {
            w.bsrange = Some("8k-64k".into());
        }
    } else {
        w.trim_percent = 2.0;
    }
}

#[test]
fn dftl_passes_on_vst_jasmine() {
    let (label, ftl, options) = ZOO[0];
    let c = with_ftl(&Config::preset("vst-jasmine").unwrap(), ftl, options);
    for (name, mut w) in workloads(1.0) {
        let times = dftl_large_preset_volume(name);
        w.write_size = Some(SizeSpec::TimesCapacity(times));
        vst_alignment(name, &mut w);
        let r = stress(&c, &w, &support::opts(12345));
        check(label, name, &r, false);
        // GC needs a full drive; the skewed and mixed runs exercise the cache instead.
        assert_dftl_worked(label, name, times, &r);
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
        assert!(session.drive().flash().log().is_clean(), "{label}: {:?}", session.drive().flash().log().kept());
        // Writes after the mount land and verify too, across a clean cycle.
        let mut more = workload(&c, &w, 6);
        for r in drain(&mut more).into_iter().take(3000) {
            session.submit(&r).unwrap();
        }
        session.remount().unwrap_or_else(|e| panic!("{label}: clean remount: {e}"));
        session.verify_all(4096).unwrap();
        assert!(session.drive().flash().log().is_clean(), "{label}: {:?}", session.drive().flash().log().kept());
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
