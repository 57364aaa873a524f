//! What each FTL and policy of the zoo is known for, measured:
//!
//! - `dftl` with a cache holding the whole table writes exactly what `page`
//!   writes, and its translation traffic grows as the cache shrinks;
//! - `hybrid` does only switch merges on sequential writes, full merges on
//!   random writes, with a write amplification far above `page`'s;
//! - mixing hot and cold data in one write stream is worse than uniform
//!   traffic, and separating them comes close to Desnoyers' optimal split
//!   of the spare space between two pools (`dftl` separates them as well);
//! - static wear leveling narrows the erase-count spread (`page` and `dftl`);
//! - the new victim policies sit where the theory puts them.

mod support;

use nandlab::config::Config;
use nandlab::flash::Cause;
use nandlab::report::{StressReport, WearSummary};
use nandlab::run::Session;
use nandlab::util::size::SizeSpec;
use nandlab::workload::synthetic::{RwMode, SyntheticSpec};
use nandlab::workload::{HostOp, HostRequest};
use rand::{RngExt, SeedableRng};
use support::model::{waf_fifo, waf_greedy, waf_hot_cold_optimal_split};
use support::*;

fn with_ftl(config: &Config, ftl: &str, options: &str) -> Config {
    let mut c = config.clone();
    c.ftl_name = ftl.to_string();
    c.ftl_options = toml::from_str(options).unwrap_or_else(|e| panic!("{options}: {e}"));
    c
}

fn extra(r: &StressReport, key: &str) -> u64 {
    r.ftl_stats.extra[key].as_u64().unwrap_or_else(|| panic!("no metric {key}"))
}

fn random_4k(times: f64, reads: u32) -> SyntheticSpec {
    SyntheticSpec {
        rw: if reads > 0 { RwMode::RandRw } else { RwMode::RandWrite },
        rwmixread: reads,
        bs: SizeSpec::Bytes(4096),
        write_size: Some(SizeSpec::TimesCapacity(times)),
        ..Default::default()
    }
}

// ----- dftl -----

#[test]
fn dftl_with_a_whole_table_cache_has_the_write_amplification_of_page() {
    let config = tiny();
    let without_trims = SyntheticSpec { trim_percent: 0.0, ..preset_workload(&config) };
    for (name, w) in [("tiny's workload without trims", without_trims), ("random 4 KiB", random_4k(4.0, 20))] {
        // `dftl` writes no summary pages (see data_plane/summary.rs): nor does `page` here.
        let page = stress(&with_ftl(&config, "page", "summary_pages = false"), &w, &opts(8));
        let dftl = stress(&with_ftl(&config, "dftl", "cmt_bytes = \"100%\""), &w, &opts(8));
        assert_clean(&page);
        assert_clean(&dftl);
        eprintln!("{name}: WAF page {:.4}, dftl {:.4}", page.waf, dftl.waf);
        assert!(page.gc.runs > 0);
        assert!((dftl.waf / page.waf - 1.0).abs() < 0.005, "{name}: page {} vs dftl {}", page.waf, dftl.waf);
        assert_eq!(extra(&dftl, "translation_programs"), 0, "{name}: nothing is ever evicted");
        assert_eq!(extra(&dftl, "translation_reads"), 0, "{name}");
    }
}

/// With trims both make them durable at each flush, each its own way:
/// `page` appends trim records (many trims to a page), `dftl` writes back
/// each translation page holding a trimmed entry. Those programs, and the
/// GC the space they take causes, are the whole difference: nothing is
/// evicted.
#[test]
fn dftl_with_a_whole_table_cache_and_trims_has_about_the_write_amplification_of_page() {
    let config = tiny();
    let random_with_trims = SyntheticSpec { trim_percent: 5.0, fsync: 16, ..random_4k(4.0, 20) };
    for (name, w) in [("tiny's workload", preset_workload(&config)), ("random 4 KiB, 5 % trims", random_with_trims)] {
        let page = stress(&with_ftl(&config, "page", "summary_pages = false"), &w, &opts(8));
        let dftl = stress(&with_ftl(&config, "dftl", "cmt_bytes = \"100%\""), &w, &opts(8));
        assert_clean(&page);
        assert_clean(&dftl);
        let trim_writebacks = extra(&dftl, "trim_writebacks");
        eprintln!(
            "{name}: WAF page {:.4}, dftl {:.4} ({} trimmed pages, {trim_writebacks} trim write-backs)",
            page.waf,
            dftl.waf,
            extra(&dftl, "trimmed_pages")
        );
        assert!(extra(&dftl, "trimmed_pages") > 1000 && trim_writebacks > 0, "{name}: trims were persisted");
        assert_eq!(extra(&dftl, "translation_programs"), trim_writebacks, "{name}: only trims write translation pages");
        assert_eq!(page.flash.by_cause["host"].programs(), dftl.flash.by_cause["host"].programs(), "{name}");
        assert!((dftl.waf / page.waf - 1.0).abs() < 0.02, "{name}: page {} vs dftl {}", page.waf, dftl.waf);
    }
}

#[test]
fn dftl_translation_traffic_grows_as_the_cache_shrinks() {
    let config = tiny();
    let w = random_4k(3.0, 30);
    let mut last: Option<(String, u64, f64)> = None;
    for cache in ["100%", "50%", "20%", "5%", "1%"] {
        let r = stress(&with_ftl(&config, "dftl", &format!("cmt_bytes = \"{cache}\"")), &w, &opts(9));
        assert_clean(&r);
        let traffic = extra(&r, "translation_reads") + extra(&r, "translation_programs");
        let metadata = r.flash.by_cause.get("metadata").map_or(0, |c| c.meta_reads + c.meta_programs);
        assert_eq!(traffic, metadata, "{cache}: the translation traffic is the flash's metadata traffic");
        eprintln!(
            "cache {cache:>4}: hit ratio {:.3}, translation reads {}, programs {}, WAF {:.3}, CMT peak {} of {} charged",
            r.ftl_stats.extra["cmt_hit_ratio"].as_f64().unwrap(),
            extra(&r, "translation_reads"),
            extra(&r, "translation_programs"),
            r.waf,
            extra(&r, "cmt_peak_entries"),
            extra(&r, "cmt_charged_entries"),
        );
        if cache != "1%" {
            // 1 % is 139 entries: nested GC steps of nearly all-dirty
            // entries outgrow its reserve (see dftl's module docs).
            assert_eq!(extra(&r, "cmt_overflow_entries"), 0, "{cache}: the CMT stays within its reserve");
        }
        if let Some((prev, prev_traffic, prev_waf)) = &last {
            assert!(traffic > *prev_traffic, "{cache} ({traffic}) vs {prev} ({prev_traffic})");
            assert!(r.waf >= *prev_waf, "{cache}: translation programs count in WAF");
        } else {
            assert_eq!(traffic, 0, "a whole-table cache reads no translation page");
        }
        last = Some((cache.to_string(), traffic, r.waf));
    }
}

// ----- hybrid -----

#[test]
fn hybrid_does_only_switch_merges_on_a_sequential_workload() {
    let config = tiny();
    // A region of whole logical blocks (128 KiB each), rewritten four times.
    let w = SyntheticSpec {
        rw: RwMode::Write,
        bs: SizeSpec::Bytes(64 << 10),
        size: Some(SizeSpec::Bytes(48 << 20)),
        write_size: Some(SizeSpec::TimesCapacity(4.0)),
        ..Default::default()
    };
    let mut o = opts(10);
    o.remount_verify = true;
    let r = stress(&with_ftl(&config, "hybrid", ""), &w, &o);
    assert_clean(&r);
    eprintln!("sequential: {} switch merges, WAF {:.4}", extra(&r, "switch_merges"), r.waf);
    assert!(extra(&r, "switch_merges") > 4 * 384, "every logical block switched at every pass");
    assert_eq!((extra(&r, "partial_merges"), extra(&r, "full_merges")), (0, 0));
    assert_eq!((extra(&r, "merge_copies"), extra(&r, "pad_pages")), (0, 0));
    assert_eq!(r.waf, 1.0, "a switch merge copies nothing");
}

#[test]
fn hybrid_random_writes_do_full_merges_with_waf_far_above_page() {
    let config = tiny();
    let w = random_4k(3.0, 0);
    // GC against merges: without `page`'s summary pages (a recovery
    // feature, whose summary row takes 1/32 of tiny's space).
    let page = stress(&with_ftl(&config, "page", "summary_pages = false"), &w, &opts(11));
    let hybrid = stress(&with_ftl(&config, "hybrid", ""), &w, &opts(11));
    assert_clean(&page);
    assert_clean(&hybrid);
    eprintln!(
        "random 4 KiB: WAF page {:.3}, hybrid {:.3} ({} full merges, {} copies)",
        page.waf_steady,
        hybrid.waf_steady,
        extra(&hybrid, "full_merges"),
        extra(&hybrid, "merge_copies")
    );
    assert!(extra(&hybrid, "full_merges") > 1000);
    // With tiny's 15 % spare, 74 random log blocks absorb a sixth of the
    // logical blocks at a time; with less spare (vst-jasmine) the gap grows.
    assert!(hybrid.waf_steady > 2.0 * page.waf_steady, "hybrid {} page {}", hybrid.waf_steady, page.waf_steady);
}

// ----- hot/cold separation, wear leveling, victim policies -----

const BLOCKS: u64 = 1024;
const PAGES_PER_BLOCK: u64 = 32;

/// One plane of 1024 blocks of 32 4-KiB pages, `alpha` physical pages per
/// logical page (one block kept apart as the GC reserve), with `page`
/// options `options`. Without summary pages: the models count blocks of
/// data pages only (analytic_waf.rs checks Desnoyers' model with them).
fn single_plane(alpha: f64, options: &str) -> Config {
    single_plane_with("page", alpha, options)
}

/// [`single_plane`] with FTL `ftl`.
fn single_plane_with(ftl: &str, alpha: f64, options: &str) -> Config {
    let logical = ((BLOCKS - 1) * PAGES_PER_BLOCK) as f64 / alpha;
    // `page` only: the models count blocks of data pages only.
    let no_summaries = if ftl == "page" { "summary_pages = false\n" } else { "" };
    let table = format!("name = \"{ftl}\"\ngc_foreground_free_blocks = 1\n{no_summaries}{options}");
    single_plane_device(BLOCKS, PAGES_PER_BLOCK, logical, &table)
}

/// Fill the drive, then write `drive_writes` times its capacity in single
/// pages, a share `r` of them uniformly to the first `f` of the logical
/// pages and the rest uniformly to the others. Returns the write
/// amplification over the last two thirds, and the wear.
fn two_level_waf(config: &Config, r: f64, f: f64, drive_writes: u64) -> (f64, WearSummary) {
    let l = config.logical_sectors;
    let mut s = Session::new(config, 1, 1, 10).unwrap();
    let write = |lba| HostRequest { op: HostOp::Write, lba, sectors: 1, arrival_ns: 0, job: 0 };
    for lba in 0..l {
        s.submit(&write(lba)).unwrap();
    }
    let mut rng = nandlab::seed::Rng::seed_from_u64(7);
    let hot = (l as f64 * f) as u64;
    let total = drive_writes * l;
    let (mut host0, mut all0) = (0, 0);
    for i in 0..total {
        if i == total / 3 {
            let st = s.drive().flash().stats();
            (host0, all0) = (st.cause(Cause::Host).programs(), st.total().programs());
        }
        let lba = if rng.random::<f64>() < r { rng.random_range(0..hot) } else { rng.random_range(hot..l) };
        s.submit(&write(lba)).unwrap();
    }
    assert!(s.drive().flash().log().is_clean(), "{:?}", s.drive().flash().log().kept());
    let st = s.drive().flash().stats();
    let waf = (st.total().programs() - all0) as f64 / (st.cause(Cause::Host).programs() - host0) as f64;
    (waf, WearSummary::from_counts(s.drive().flash().nand().erase_counts()))
}

#[test]
fn mixing_hot_and_cold_data_in_one_stream_is_worse_than_uniform_traffic() {
    let alpha = 1.2;
    let uniform = waf_greedy(alpha, PAGES_PER_BLOCK as f64);
    let (measured_uniform, _) = two_level_waf(&single_plane(alpha, "gc_stream = \"shared\""), 0.5, 0.5, 9);
    assert!((measured_uniform / uniform - 1.0).abs() < 0.03, "uniform: {measured_uniform} vs model {uniform}");
    for (r, f) in [(0.8, 0.2), (0.9, 0.1)] {
        let (mixed, _) = two_level_waf(&single_plane(alpha, "gc_stream = \"shared\""), r, f, 9);
        eprintln!("{r}/{f}: one greedy stream {mixed:.3}, uniform traffic {uniform:.3} (model)");
        assert!(mixed > 1.05 * uniform, "{r}/{f}: {mixed} vs uniform {uniform}");
    }
}

#[test]
fn hot_cold_separation_approaches_desnoyers_optimal_split() {
    let alpha = 1.2;
    for (r, f) in [(0.8, 0.2), (0.9, 0.1)] {
        let optimum = waf_hot_cold_optimal_split(alpha, r, f, PAGES_PER_BLOCK as f64);
        let single =
            two_level_waf(&single_plane(alpha, "gc_policy = \"cost-benefit\"\ngc_stream = \"shared\""), r, f, 9).0;
        let two_stream =
            two_level_waf(&single_plane(alpha, "gc_policy = \"cost-benefit\"\nhot_cold = \"two-stream\""), r, f, 9).0;
        let dac = two_level_waf(&single_plane(alpha, "gc_policy = \"cost-benefit\"\nhot_cold = \"dac:4\""), r, f, 9).0;
        eprintln!(
            "{r}/{f}: one stream {single:.3}, two-stream {two_stream:.3}, DAC (4 regions) {dac:.3}; \
             Desnoyers' optimal split {optimum:.3}"
        );
        assert!(two_stream < 0.85 * single, "{r}/{f}: separation lowers WAF: {two_stream} vs {single}");
        assert!(
            two_stream > 0.97 * optimum && two_stream < 1.10 * optimum,
            "{r}/{f}: two-stream {two_stream} vs the optimal split {optimum}"
        );
        assert!(dac < single, "{r}/{f}: DAC {dac} vs one stream {single}");
    }
}

/// The erase counts of `ftl` on one plane under 90/10 skewed writes with
/// wear-leveling options `options`.
fn skewed_wear(ftl: &str, options: &str) -> WearSummary {
    let w = two_level_waf(&single_plane_with(ftl, 1.2, options), 0.9, 0.1, 9).1;
    eprintln!(
        "{ftl}, {options:40} erase counts {}..{} mean {:.1} sd {:.2}",
        w.erase_count_min, w.erase_count_max, w.erase_count_mean, w.erase_count_stddev
    );
    w
}

/// Without wear leveling the cold blocks stay young; static wear leveling
/// keeps `ftl`'s spread near its threshold. Returns the wear without.
fn static_wear_leveling_narrows(ftl: &str) -> WearSummary {
    let none = skewed_wear(ftl, "");
    let fixed = skewed_wear(ftl, "wear_leveling = \"static:threshold=8\"");
    assert!(none.spread() > 30, "{ftl}: cold blocks stay young without wear leveling: {}", none.spread());
    assert!(fixed.spread() <= 2 * 8, "{ftl}: static keeps the spread near its threshold: {}", fixed.spread());
    assert!(fixed.erase_count_stddev < none.erase_count_stddev / 3.0, "{ftl}");
    none
}

#[test]
fn static_wear_leveling_narrows_the_erase_count_spread() {
    let none = static_wear_leveling_narrows("page");
    let dynamic = skewed_wear("page", "wear_leveling = \"dynamic\"");
    assert!(dynamic.erase_count_max < none.erase_count_max, "dynamic evens the blocks that cycle");
}

#[test]
fn static_wear_leveling_narrows_the_erase_count_spread_for_dftl() {
    static_wear_leveling_narrows("dftl");
}

/// `dftl` shares `page`'s data plane, so its streams separate hot and cold
/// data just as well; with a cache of a quarter of the table too, whose
/// translation write-backs have a stream of their own.
#[test]
fn dftl_hot_cold_separation_lowers_write_amplification_on_a_skewed_workload() {
    let alpha = 1.2;
    for cache in ["100%", "25%"] {
        let (r, f) = (0.9, 0.1);
        let options = |streams: &str| format!("gc_policy = \"cost-benefit\"\n{streams}\ncmt_bytes = \"{cache}\"");
        let single = two_level_waf(&single_plane_with("dftl", alpha, &options("gc_stream = \"shared\"")), r, f, 9).0;
        let separated =
            two_level_waf(&single_plane_with("dftl", alpha, &options("hot_cold = \"two-stream\"")), r, f, 9).0;
        eprintln!("dftl, cache {cache}, {r}/{f}: one stream {single:.3}, two-stream {separated:.3}");
        assert!(separated < 0.85 * single, "cache {cache}: separation lowers WAF: {separated} vs {single}");
    }
}

/// Steady-state WAF of uniform random single-page overwrites with victim
/// policy `policy` and one shared frontier (Desnoyers' model), at α = 1.1.
fn uniform_waf(policy: &str) -> f64 {
    let options = format!("gc_policy = \"{policy}\"\ngc_stream = \"shared\"");
    two_level_waf(&single_plane(1.1, &options), 0.5, 0.5, 12).0
}

#[test]
fn victim_policies_sit_where_the_models_put_them() {
    let b = PAGES_PER_BLOCK as f64;
    let (fifo, greedy) = (uniform_waf("fifo"), uniform_waf("greedy"));
    let random = uniform_waf("random");
    let d10 = uniform_waf("d-choices:10");
    let d2 = uniform_waf("d-choices:2");
    let window_1 = uniform_waf("windowed-greedy:1");
    let window_all = uniform_waf("windowed-greedy:1024");
    eprintln!(
        "α 1.1: fifo {fifo:.3} (model {:.3}), random {random:.3} (model 11.000), d-choices:2 {d2:.3}, d-choices:10 {d10:.3}, \
         greedy {greedy:.3} (model {:.3}), windowed-greedy:1 {window_1:.3}, windowed-greedy:1024 {window_all:.3}",
        waf_fifo(1.1),
        waf_greedy(1.1, b)
    );
    assert_eq!(window_1, fifo, "a window of one block is FIFO");
    assert!((window_all / greedy - 1.0).abs() < 0.01, "a window of the whole plane is greedy");
    // A random victim is an average block: its valid share is the drive's
    // utilisation 1/α, so WAF = 1 / (1 − 1/α) (Van Houdt 2013, d = 1).
    assert!((random / (1.1 / 0.1) - 1.0).abs() < 0.03, "random: {random} vs α/(α−1)");
    assert!((fifo / waf_fifo(1.1) - 1.0).abs() < 0.02, "fifo: {fifo} vs Desnoyers' Eq. 4");
    assert!(greedy < d10 && d10 < d2 && d2 < random, "more choices, closer to greedy");
    assert!(d10 / greedy - 1.0 < 0.08, "d = 10 is within a few percent of greedy: {d10} vs {greedy}");
}
