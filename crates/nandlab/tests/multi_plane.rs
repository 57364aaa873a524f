//! The data plane's multi-plane operations (ftl/kit/data_plane/multi_plane.rs)
//! as `page` and `dftl` use them on the 2-plane `tiny` preset: rows of a
//! die's planes programmed with one operation, GC rows moved the same way,
//! the option to turn it off, and groups narrowed by factory bad blocks.
//! Every NAND rule (the multi-plane plane/offset agreement among them) is
//! checked on every operation, so a clean run is part of each claim.

mod support;

use nandlab::config::Config;
use nandlab::report::StressReport;
use nandlab::run::stress::StressOptions;
use nandlab::util::size::SizeSpec;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use support::*;

fn with_ftl(ftl: &str, options: &str) -> Config {
    let mut config = tiny();
    config.ftl_name = ftl.to_string();
    config.ftl_options = toml::from_str(options).unwrap();
    config
}

fn sequential(bs: u64, times: f64) -> SyntheticSpec {
    SyntheticSpec {
        rw: RwMode::Write,
        bs: SizeSpec::Bytes(bs),
        write_size: Some(SizeSpec::TimesCapacity(times)),
        fsync: 0,
        trim_percent: 0.0,
        ..Default::default()
    }
}

fn stat(r: &StressReport, key: &str) -> u64 {
    r.ftl_stats.extra[key].as_u64().unwrap_or_else(|| panic!("{key}"))
}

#[test]
fn sequential_writes_program_both_planes_of_a_die_at_once() {
    for ftl in ["page", "dftl"] {
        let r = stress(&with_ftl(ftl, ""), &sequential(128 << 10, 3.0), &opts(1));
        assert_clean(&r);
        assert_eq!(r.ftl_stats.extra["multi_plane"], true, "{ftl}: on by default with 2 planes per die");
        let host_pages = r.flash.by_cause["host"].page_programs;
        // Every row is whole: one program per two pages.
        assert_eq!(stat(&r, "host_multi_plane_programs") * 2, host_pages, "{ftl}");
        assert_eq!(stat(&r, "host_single_plane_programs"), 0, "{ftl}");
        assert!(r.gc.blocks_erased > 0, "{ftl}: the drive was overwritten");
    }
}

#[test]
fn random_writes_and_gc_use_multi_plane_operations_where_rows_allow() {
    for ftl in ["page", "dftl"] {
        for copyback in [true, false] {
            let config = with_ftl(ftl, &format!("copyback = {copyback}"));
            let o = StressOptions { remount_verify: true, ..opts(2) };
            let r = stress(&config, &preset_workload(&config), &o);
            assert_clean(&r);
            let label = format!("{ftl}, copyback = {copyback}");
            assert!(r.gc.pages_moved > 0, "{label}: GC ran");
            assert!(stat(&r, "host_multi_plane_programs") > 0, "{label}: multi-page requests fill rows");
            assert!(stat(&r, "host_single_plane_programs") > 0, "{label}: single pages go alone, never held");
            assert!(stat(&r, "gc_multi_plane_ops") > 0, "{label}: GC rows");
        }
    }
}

#[test]
fn multi_plane_off_programs_one_plane_at_a_time() {
    let r = stress(&with_ftl("page", "multi_plane = false"), &sequential(128 << 10, 1.0), &opts(1));
    assert_clean(&r);
    assert_eq!(r.ftl_stats.extra["multi_plane"], false);
    assert_eq!(stat(&r, "host_multi_plane_programs") + stat(&r, "gc_multi_plane_ops"), 0);
}

#[test]
fn groups_with_a_factory_bad_block_are_used_narrower() {
    for ftl in ["page", "dftl"] {
        let mut config = with_ftl(ftl, "");
        config.factory_bad_block_percent = 5.0;
        let o = StressOptions { remount_verify: true, ..opts(3) };
        for spec in [preset_workload(&config), sequential(128 << 10, 2.0), sequential(512, 1.0)] {
            let r = stress(&config, &spec, &o);
            assert_clean(&r);
            assert!(r.gc.pages_moved + r.gc.blocks_erased > 0, "{ftl}: GC ran");
            // Some rows span a group of one good block only.
            assert!(stat(&r, "host_single_plane_programs") > 0, "{ftl}");
        }
    }
}

#[test]
fn dies_with_more_planes_than_a_group_spans_refuse_multi_plane() {
    let mut config = with_ftl("page", "multi_plane = true");
    let mut g = config.geometry.config().clone();
    g.planes_per_die = 32;
    g.blocks_per_plane = 8;
    config.geometry = g.validate().unwrap();
    let env = nandlab::ftl::FtlEnv {
        geometry: config.geometry.clone(),
        logical_sectors: 1 << 12,
        dram_budget_bytes: 16 << 20,
        seed: 1,
    };
    let e = nandlab::ftl::build("page", &env, &config.ftl_options).err().expect("refused");
    assert!(e.contains("`multi_plane`"), "{e}");
    // Left to its default, such a geometry runs plane by plane.
    assert!(nandlab::ftl::build("page", &env, &Default::default()).is_ok());
}
