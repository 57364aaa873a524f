//! `nandlab bench crash`: crash points checked per second, each run a
//! separate `nandlab crash` process whose JSON report is read back.
//!
//! Two rates are printed: per second spent testing points (rolling back,
//! tearing, recovering, reading back, more workload) and per second of the
//! whole campaign (base runs, warm-up and the counting pass included); a
//! rate too short to measure is shown as NaN, never as a made-up 0.

use crate::html::{fixed, BenchTable};
use crate::{median, report_of, Verdict};
use std::path::Path;
use std::process::Command;

/// The `bench crash` workload: uniform random 8-64 KiB writes (8 KiB
/// aligned), a flush every 64 writes, 1x the logical capacity of warm-up;
/// crash points fall in the next 2 % of the capacity written.
const BENCH_CRASH_ARGS: &str = "--rw randwrite --bsrange 8k-64k --blockalign 8k --fsync 64 --trim_percent 0 \
     --write_size 1.02x --warmup 1x --no-shrink --quiet --seed 12345";

/// Run `bench crash`: `points` crash points per run, `runs` runs per FTL
/// (none: page and optr) on `preset`, `extra` added to every `nandlab
/// crash` run; printing as it goes, and the medians into `table`.
pub fn run(
    exe: &Path,
    points: u64,
    runs: usize,
    ftls: Vec<String>,
    preset: &str,
    extra: &[String],
    table: &mut BenchTable,
) -> Result<Verdict, String> {
    *table = BenchTable::new(
        "nandlab bench crash",
        &["FTL", "runs", "testing only: points/s", "points/CPU-s", "whole run: points/s", "points/CPU-s"],
        "crash points per CPU-second, testing only",
    );
    let ftls = if ftls.is_empty() { vec!["page".to_string(), "optr".to_string()] } else { ftls };
    let dir = std::env::temp_dir().join(format!("nandlab-bench-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "nandlab bench crash — preset {preset}, {points} crash points per run, {runs} run(s) per FTL, {cores} threads"
    );
    println!("  workload: {BENCH_CRASH_ARGS} {}", extra.join(" "));
    table.setup = format!(
        "preset {preset}, {points} crash points per run, {runs} run(s) per FTL, {cores} threads; workload: {BENCH_CRASH_ARGS} {}",
        extra.join(" ")
    );
    let mut failed = false;
    for ftl in &ftls {
        println!("\n{ftl}:");
        let mut rows: Vec<[f64; 6]> = Vec::new();
        for i in 0..runs {
            let json = dir.join(format!("{ftl}-{i}.json"));
            let mut cmd = Command::new(exe);
            cmd.arg("crash")
                .args(["--preset", preset, "--ftl", ftl, "--json"])
                .arg(&json)
                .args(["--crash-points", &points.to_string()])
                .args(BENCH_CRASH_ARGS.split_whitespace())
                .args(extra);
            let Some(r) = report_of(cmd, &json) else {
                println!("  run {}: failed (no report)", i + 1);
                failed = true;
                break;
            };
            // A rate too short to measure is null: NaN, never a made-up 0.
            let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
            let row = [
                f("points_per_test_wall_second"),
                f("points_per_test_cpu_second"),
                f("points_per_run_wall_second"),
                f("points_per_run_cpu_second"),
                f("test_wall_seconds"),
                f("run_wall_seconds"),
            ];
            let bad = r["failed"].as_u64().unwrap_or(0) > 0 || !r["base_failure"].is_null();
            failed |= bad;
            println!(
                "  run {}: testing only {:7.2} points/s {:7.2} points/CPU-s | whole run {:7.2} points/s \
                 {:7.2} points/CPU-s | testing {:6.1} s of {:6.1} s wall{}",
                i + 1,
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                if bad { "  (FINDINGS)" } else { "" }
            );
            rows.push(row);
        }
        if !rows.is_empty() {
            let med = |k: usize| median(rows.iter().map(|r| r[k]).collect());
            println!(
                "  median: testing only {:7.2} points/s {:7.2} points/CPU-s | whole run {:7.2} points/s \
                 {:7.2} points/CPU-s",
                med(0),
                med(1),
                med(2),
                med(3)
            );
            let mut cells = vec![ftl.clone(), rows.len().to_string()];
            cells.extend((0..4).map(|k| fixed(med(k), 2)));
            table.row(cells, Some((ftl.clone(), "median".to_string(), med(1))));
        }
    }
    println!(
        "\n  testing only: the time threads spent testing points (rolling back, tearing, recovering, reading \
         back, more workload);\n  whole run: the campaign's time, every thread's base run with its warm-up and the \
         counting pass included."
    );
    table.notes.push(
        "Testing only: the time threads spent testing points (rolling back, tearing, recovering, reading back, \
         more workload); whole run: the campaign's time, base runs, warm-up and the counting pass included."
            .into(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Verdict::of(failed))
}
