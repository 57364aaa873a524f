//! `page` under the stress suite: workloads, presets, policies, mounts,
//! determinism.

mod support;

use nandlab::config::Config;
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

fn workloads() -> Vec<(&'static str, SyntheticSpec)> {
    vec![
        (
            "random",
            spec(|s| {
                s.rw = RwMode::RandRw;
                s.rwmixread = 25;
                s.bsrange = Some("4k-64k".into());
                s.write_size = Some(SizeSpec::TimesCapacity(3.0));
            }),
        ),
        (
            "sequential",
            spec(|s| {
                s.rw = RwMode::Rw;
                s.rwmixread = 10;
                s.bs = SizeSpec::Bytes(128 << 10);
                s.write_size = Some(SizeSpec::TimesCapacity(3.0));
            }),
        ),
        (
            "zipf",
            spec(|s| {
                s.rw = RwMode::RandRw;
                s.rwmixread = 30;
                s.bs = SizeSpec::Bytes(4096);
                s.random_distribution = "zipf:1.1".parse().unwrap();
                s.write_size = Some(SizeSpec::TimesCapacity(3.0));
            }),
        ),
        ("mixed with flush and trim", mixed_with_flush_and_trim(Some(SizeSpec::TimesCapacity(3.0)))),
    ]
}

#[test]
fn page_passes_every_workload_on_tiny_and_mounts_cleanly() {
    let config = tiny();
    for (name, w) in workloads() {
        let mut o = opts(7);
        o.remount_verify = true;
        let r = stress(&config, &w, &o);
        assert_clean(&r);
        let m = r.remount.as_ref().expect("remount ran");
        assert!(m.error.is_none(), "{name}: {:?}", m.error);
        assert_eq!(m.verified_sectors, config.logical_sectors, "{name}: every sector read back");
        // The report carries the fresh instance's mount counters, not the old one's.
        let summaries = m.mount_stats.get("mount_summaries").and_then(|v| v.as_u64());
        assert!(summaries > Some(0), "{name}: the mount read summary pages: {:?}", m.mount_stats);
        assert_eq!(r.ftl_stats.extra.get("mount_summaries").and_then(|v| v.as_u64()), Some(0), "{name}");
        assert!(r.gc.runs > 0, "{name}: GC ran");
    }
}

#[test]
fn every_gc_policy_and_option_passes() {
    let config = tiny();
    let w = &workloads()[3].1;
    for opt in [
        "gc_policy=\"greedy\"",
        "gc_policy=\"cost-benefit\"",
        "gc_policy=\"fifo\"",
        "gc_stream=\"shared\"",
        "copyback=false",
    ] {
        let mut c = config.clone();
        let (k, v) = opt.split_once('=').unwrap();
        c.ftl_options.insert(k.into(), toml::from_str::<toml::Table>(&format!("v = {v}")).unwrap()["v"].clone());
        let mut o = opts(3);
        o.remount_verify = true;
        let r = stress(&c, w, &o);
        assert_clean(&r);
        assert!(r.gc.runs > 0, "{opt}: GC ran");
    }
}

#[test]
fn mount_without_shutdown_finds_every_write_from_the_oob_scan() {
    // No trims: without the shutdown checkpoint, only trims could be lost.
    let config = tiny();
    let w = spec(|s| {
        s.rw = RwMode::RandWrite;
        s.bsrange = Some("4k-32k".into());
        s.write_size = Some(SizeSpec::TimesCapacity(2.0));
    });
    let mut wl = workload(&config, &w, 5);
    let mut session = Session::new(&config, 5, wl.alignment_sectors(), 10).unwrap();
    for r in drain(&mut wl) {
        session.submit(&r).unwrap();
    }
    session.power_cycle(false).expect("mount from OOB scan");
    assert_eq!(session.verify_all(4096).unwrap(), config.logical_sectors);
    assert!(session.drive().flash().log().is_clean(), "{:?}", session.drive().flash().log().kept());
    // Writes after the mount land and verify too.
    let mut more = workload(&config, &w, 6);
    for r in drain(&mut more).into_iter().take(2000) {
        session.submit(&r).unwrap();
    }
    session.remount().unwrap();
    session.verify_all(4096).unwrap();
    assert!(session.drive().flash().log().is_clean(), "{:?}", session.drive().flash().log().kept());
}

#[test]
fn trims_survive_a_clean_power_cycle() {
    let config = tiny();
    let w = spec(|s| {
        s.rw = RwMode::RandWrite;
        s.bs = SizeSpec::Bytes(16384);
        s.trim_percent = 30.0;
        s.write_size = Some(SizeSpec::TimesCapacity(1.5));
    });
    let mut o = opts(11);
    o.remount_verify = true;
    let r = stress(&config, &w, &o);
    assert_clean(&r);
    assert!(r.host.trim_requests > 1000);
}

#[test]
fn same_seed_same_report_and_another_seed_another() {
    let config = tiny();
    let w = preset_workload(&config);
    let json = |seed| serde_json::to_string(&stress(&config, &w, &opts(seed)).without_measurements()).unwrap();
    let (a, b, c) = (json(99), json(99), json(100));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.contains("\"seed\":99"));
}

#[test]
fn page_passes_on_femu_bbssd_with_background_gc() {
    let config = Config::preset("femu-bbssd").unwrap();
    let w = spec(|s| {
        s.rw = RwMode::RandRw;
        s.rwmixread = 20;
        s.bs = SizeSpec::Bytes(4096);
        s.fsync = 256;
        s.trim_percent = 1.0;
        s.write_size = Some(SizeSpec::TimesCapacity(1.3));
    });
    let mut o = opts(2);
    o.idle_every = 2000;
    o.remount_verify = true;
    let r = stress(&config, &w, &o);
    assert_clean(&r);
    assert!(r.gc.runs > 0);
    assert!(r.ftl_stats.extra["gc_background_runs"].as_u64().unwrap() > 0, "idle time ran background GC");
}

#[test]
fn page_passes_on_vst_jasmine() {
    let config = Config::preset("vst-jasmine").unwrap();
    let w = spec(|s| {
        s.rw = RwMode::RandRw;
        s.rwmixread = 20;
        s.bsrange = Some("8k-64k".into());
        s.blockalign = Some(SizeSpec::Bytes(8192));
        s.write_size = Some(SizeSpec::TimesCapacity(1.2));
    });
    let r = stress(&config, &w, &opts(12345));
    assert_clean(&r);
    assert!(r.gc.runs > 0, "the drive filled and GC ran");
}
