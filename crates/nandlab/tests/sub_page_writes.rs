//! Sequential writes smaller than a page, or not aligned to pages, rewrite
//! each logical page several times in a row (read-modify-write). With
//! plain round-robin striping every final copy of a page lands on the same
//! plane, which fills with valid data while the others hold only stale
//! copies, and the FTL ran out of space long before the drive was full.
//! The data plane's placement balance (ftl/kit/data_plane/placement.rs) keeps
//! every unit within its share: these runs must complete, and read back
//! right after a remount.

mod support;

use nandlab::config::Config;
use nandlab::run::stress::StressOptions;
use nandlab::util::size::SizeSpec;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use support::*;

/// Sequential writes of `bs` bytes from `offset`, `times` the logical capacity in all.
fn sequential(offset: u64, bs: u64, times: f64) -> SyntheticSpec {
    SyntheticSpec {
        rw: RwMode::Write,
        bs: SizeSpec::Bytes(bs),
        offset: SizeSpec::Bytes(offset),
        write_size: Some(SizeSpec::TimesCapacity(times)),
        fsync: 0,
        trim_percent: 0.0,
        ..Default::default()
    }
}

fn with_ftl(ftl: &str, multi_plane: bool) -> Config {
    let mut config = tiny();
    config.ftl_name = ftl.to_string();
    config.ftl_options = toml::from_str(&format!("multi_plane = {multi_plane}")).unwrap();
    config
}

/// Every shape of sub-page or misaligned sequential write, for several
/// logical capacities of writes, completes on `ftl` and reads back right,
/// with planes or (multi-plane) dies as allocation units.
fn every_shape_completes(ftl: &str) {
    let opts = StressOptions { remount_verify: true, ..opts(1) };
    for multi_plane in [false, true] {
        let config = with_ftl(ftl, multi_plane);
        for (offset, bs) in [(0, 512), (0, 2048), (0, 3584), (512, 4096)] {
            for times in [1.0, 2.0, 3.0] {
                let r = stress(&config, &sequential(offset, bs, times), &opts);
                let what = format!("{ftl} (multi_plane {multi_plane}): {bs} B writes from {offset}, {times}x");
                assert_clean(&r);
                assert!(r.gc.runs > 0, "{what}: the drive was overwritten (GC ran)");
                let written = r.host.write_bytes as f64;
                assert!(written >= times * config.logical_bytes() as f64 * 0.99, "{what}: all written");
                if !multi_plane {
                    // Plane by plane, every final copy would land on one plane.
                    let skips = r.ftl_stats.extra["balance_skips"].as_u64().unwrap();
                    assert!(skips > 0, "{what}: the balance kept a plane from filling");
                }
            }
        }
    }
}

#[test]
fn page_survives_sequential_sub_page_and_misaligned_writes() {
    every_shape_completes("page");
}

#[test]
fn dftl_survives_sequential_sub_page_and_misaligned_writes() {
    every_shape_completes("dftl");
}

#[test]
fn uniform_random_page_writes_are_hardly_rebalanced() {
    // The balance must leave ordinary traffic to plain round-robin.
    let config = with_ftl("page", false);
    let spec = SyntheticSpec {
        rw: RwMode::RandWrite,
        bs: SizeSpec::Bytes(4096),
        write_size: Some(SizeSpec::TimesCapacity(4.0)),
        fsync: 0,
        trim_percent: 0.0,
        ..Default::default()
    };
    let r = stress(&config, &spec, &opts(1));
    assert_clean(&r);
    assert!(r.gc.runs > 0);
    // Units drift a few standard deviations around their share; the cap is
    // only brushed now and then on a geometry as small as tiny's.
    let skips = r.ftl_stats.extra["balance_skips"].as_u64().unwrap();
    let pages = r.host.write_bytes / 4096;
    assert!(skips * 1000 < pages, "{skips} of {pages} page writes placed off the round-robin");
}
