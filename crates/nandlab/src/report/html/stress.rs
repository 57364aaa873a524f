//! The `stress` page, and the parts every run report has (perf reports
//! carry them too): the summary, host and flash traffic by cause, the
//! erase-count histogram and the violations.
//!
//! A stress run has no clock, so its curves are drawn against host bytes
//! written (the x axis of write-cliff plots in the FTL literature): WAF
//! and GC pages moved between consecutive samples of the report's
//! `series`, and the FTL's free blocks at each sample.

use super::charts::{self, Axes, Series};
use super::{array, entries, fixed, gib, num, summary_table, text, Cell, Page, Run};
use serde_json::Value;

/// The page of stress runs.
pub fn page(page: &mut Page, runs: &[Run]) {
    page.section("Summary");
    summary_table(page, runs, &run_metrics());
    along_the_run(page, runs);
    shared_sections(page, runs);
}

/// The metrics of the summary table every run report has.
pub fn run_metrics() -> Vec<(&'static str, &'static dyn Fn(&Value) -> Cell)> {
    vec![
        ("preset", &|v| Cell::text(text(v, "/preset"))),
        ("FTL", &|v| Cell::text(text(v, "/ftl"))),
        ("workload", &|v| Cell::text(text(v, "/workload"))),
        ("seed", &|v| Cell::num(text(v, "/seed"))),
        ("logical capacity, GiB", &|v| Cell::num(fixed(num(v, "/logical_bytes").map(gib), 2))),
        ("host written, GiB", &|v| Cell::num(fixed(num(v, "/host/write_bytes").map(gib), 3))),
        ("host read, GiB", &|v| Cell::num(fixed(num(v, "/host/read_bytes").map(gib), 3))),
        ("host requests (write / read / trim / flush)", &|v| {
            let n = |k: &str| text(v, &format!("/host/{k}_requests"));
            Cell::num(format!("{} / {} / {} / {}", n("write"), n("read"), n("trim"), n("flush")))
        }),
        ("pages programmed", &|v| Cell::num(text(v, "/flash/page_programs"))),
        ("pages read", &|v| Cell::num(text(v, "/flash/page_reads"))),
        ("blocks erased", &|v| Cell::num(text(v, "/flash/block_erases"))),
        ("WAF (steady: last quarter)", &|v| {
            Cell::num(format!("{} ({})", fixed(num(v, "/waf"), 3), fixed(num(v, "/waf_steady"), 3)))
        }),
        ("GC runs / pages moved", &|v| Cell::num(format!("{} / {}", text(v, "/gc/runs"), text(v, "/gc/pages_moved")))),
        ("erase count min / mean / max", &|v| {
            Cell::num(format!(
                "{} / {} / {}",
                text(v, "/wear/erase_count_min"),
                fixed(num(v, "/wear/erase_count_mean"), 1),
                text(v, "/wear/erase_count_max")
            ))
        }),
        ("remount", &|v| match v.pointer("/remount") {
            None | Some(Value::Null) => Cell::text("not asked"),
            Some(r) if r.get("mounted").and_then(Value::as_bool) == Some(true) => {
                Cell::verdict(true, format!("mounted, {} sectors verified", text(r, "/verified_sectors")))
            }
            Some(r) => Cell::verdict(false, format!("FAILED: {}", text(r, "/error"))),
        }),
        ("result", &verdict),
    ]
}

/// PASS / FAIL from the error and warning counts.
fn verdict(v: &Value) -> Cell {
    let errors = num(v, "/errors").unwrap_or(0.0);
    let warnings = num(v, "/warnings").unwrap_or(0.0);
    match (errors > 0.0, warnings > 0.0) {
        (false, false) => Cell::verdict(true, "PASS — no violations"),
        (false, true) => Cell::verdict(true, format!("PASS with {warnings} warnings")),
        (true, _) => Cell::verdict(false, format!("FAIL — {errors} errors, {warnings} warnings")),
    }
}

/// Traffic by cause, wear and violations: the sections of every run report.
pub fn shared_sections(page: &mut Page, runs: &[Run]) {
    traffic(page, runs);
    wear(page, runs);
    violations(page, runs);
}

/// The causes appearing in any run, in name order.
fn causes(runs: &[Run]) -> Vec<String> {
    let mut all: Vec<String> =
        runs.iter().flat_map(|r| entries(&r.report, "/flash/by_cause")).map(|(k, _)| k.to_string()).collect();
    all.sort();
    all.dedup();
    all
}

/// Flash operations by cause: two grouped bar charts and a table.
fn traffic(page: &mut Page, runs: &[Run]) {
    page.section("Host and flash traffic by cause");
    let causes = causes(runs);
    let per_run = |field: &dyn Fn(&Value) -> f64| -> Vec<Series> {
        runs.iter()
            .map(|r| Series {
                name: r.label.clone(),
                points: causes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| {
                        let counts = r.report.pointer(&format!("/flash/by_cause/{c}"))?;
                        Some((i as f64, field(counts)))
                    })
                    .collect(),
            })
            .collect()
    };
    let get = |v: &Value, k: &str| num(v, &format!("/{k}")).unwrap_or(0.0);
    let programs = per_run(&|v| get(v, "page_programs") + get(v, "meta_programs") + get(v, "copybacks"));
    let reads = per_run(&|v| get(v, "page_reads") + get(v, "meta_reads") + get(v, "oob_reads"));
    page.charts_start();
    page.chart(
        "Pages programmed by cause",
        "Everything above the host bar is write amplification: GC copies, metadata, wear leveling.",
        charts::grouped_bars(&causes, &programs, &Axes::linear("cause", "pages programmed")),
    );
    page.chart(
        "Pages read by cause",
        "GC and metadata reads compete with host reads for the dies.",
        charts::grouped_bars(&causes, &reads, &Axes::linear("cause", "pages read (data, metadata, OOB)")),
    );
    page.charts_end();
    let headers: Vec<String> = ["run", "cause", "page reads", "OOB reads", "metadata reads", "page programs"]
        .into_iter()
        .chain(["metadata programs", "copybacks", "block erases"])
        .map(String::from)
        .collect();
    let mut rows = Vec::new();
    for r in runs {
        for (cause, counts) in entries(&r.report, "/flash/by_cause") {
            let mut row = vec![Cell::text(&r.label), Cell::text(cause)];
            for k in ["page_reads", "oob_reads", "meta_reads", "page_programs", "meta_programs", "copybacks"] {
                row.push(Cell::num(text(counts, &format!("/{k}"))));
            }
            row.push(Cell::num(text(counts, "/block_erases")));
            rows.push(row);
        }
    }
    page.table(&headers, &rows);
}

/// The erase-count histogram of each run.
fn wear(page: &mut Page, runs: &[Run]) {
    page.section("Wear");
    // Bins differ between runs: one category per bin of any run, by range.
    let mut bins: Vec<(u64, u64)> = runs
        .iter()
        .flat_map(|r| array(&r.report, "/wear/erase_count_histogram"))
        .filter_map(|b| Some((b.get("erase_count_from")?.as_u64()?, b.get("erase_count_to")?.as_u64()?)))
        .collect();
    bins.sort();
    bins.dedup();
    let categories: Vec<String> =
        bins.iter().map(|(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    let series: Vec<Series> = runs
        .iter()
        .map(|r| Series {
            name: r.label.clone(),
            points: array(&r.report, "/wear/erase_count_histogram")
                .iter()
                .filter_map(|b| {
                    let key = (b.get("erase_count_from")?.as_u64()?, b.get("erase_count_to")?.as_u64()?);
                    let i = bins.binary_search(&key).ok()?;
                    Some((i as f64, b.get("blocks")?.as_f64()?))
                })
                .collect(),
        })
        .collect();
    page.charts_start();
    page.chart(
        "Erase-count histogram",
        "A narrow histogram is even wear; a long right tail is blocks that will wear out first.",
        charts::grouped_bars(&categories, &series, &Axes::linear("erase count (erases per block)", "blocks")),
    );
    page.charts_end();
}

/// The violations each report kept, in full.
fn violations(page: &mut Page, runs: &[Run]) {
    page.section("Violations");
    let headers: Vec<String> =
        ["run", "rule", "severity", "flash op", "request", "address", "message"].map(String::from).to_vec();
    let mut rows = Vec::new();
    for r in runs {
        let counts: Vec<String> =
            entries(&r.report, "/violation_counts").iter().map(|(k, n)| format!("{k}: {n}")).collect();
        let kept = array(&r.report, "/violations");
        page.note(
            "",
            &format!(
                "{}: {} errors, {} warnings{}; {} kept in full below.",
                r.label,
                text(&r.report, "/errors"),
                text(&r.report, "/warnings"),
                if counts.is_empty() { String::new() } else { format!(" ({})", counts.join(", ")) },
                kept.len()
            ),
        );
        for v in kept {
            rows.push(vec![
                Cell::text(&r.label),
                Cell::text(text(v, "/rule")),
                Cell::text(text(v, "/severity")),
                Cell::num(text(v, "/op_index")),
                Cell::num(
                    v.pointer("/request_id").and_then(Value::as_u64).map_or("background".into(), |n| n.to_string()),
                ),
                Cell::num(text(v, "/address")),
                Cell::text(text(v, "/message")),
            ]);
        }
        if num(&r.report, "/errors").unwrap_or(0.0) > 0.0 {
            if let Some(cmd) = r.report.pointer("/reproduce").and_then(Value::as_str) {
                page.note("", &format!("{}: reproduce with", r.label));
                page.pre(cmd);
            }
        }
    }
    if !rows.is_empty() {
        page.table(&headers, &rows);
    }
}

/// The curves along a stress run, from its `series` samples.
fn along_the_run(page: &mut Page, runs: &[Run]) {
    page.section("Along the run (the write cliff)");
    let x = |s: &Value| num(s, "/host_write_bytes").map(gib);
    // Between consecutive samples: (x at the end, Δ of each field).
    let deltas = |r: &Run, f: &dyn Fn(f64, &Value, &Value) -> Option<f64>| -> Vec<(f64, f64)> {
        array(&r.report, "/series")
            .windows(2)
            .filter_map(|w| {
                let dx = num(&w[1], "/host_write_bytes")? - num(&w[0], "/host_write_bytes")?;
                Some((x(&w[1])?, f(dx, &w[0], &w[1])?))
            })
            .collect()
    };
    let delta = |a: &Value, b: &Value, k: &str| Some(num(b, &format!("/{k}"))? - num(a, &format!("/{k}"))?);
    let waf: Vec<Series> = runs
        .iter()
        .map(|r| Series {
            name: r.label.clone(),
            points: deltas(r, &|_, a, b| {
                let host = delta(a, b, "host_pages_programmed")?;
                (host > 0.0).then_some(delta(a, b, "pages_programmed")? / host)
            }),
        })
        .collect();
    let free: Vec<Series> = runs
        .iter()
        .map(|r| Series {
            name: r.label.clone(),
            points: array(&r.report, "/series").iter().filter_map(|s| Some((x(s)?, num(s, "/free_blocks")?))).collect(),
        })
        .collect();
    let gc: Vec<Series> = runs
        .iter()
        .map(|r| Series {
            name: r.label.clone(),
            points: deltas(r, &|dx, a, b| (dx > 0.0).then_some(delta(a, b, "gc_pages_moved")? / gib(dx))),
        })
        .collect();
    page.charts_start();
    page.chart(
        "WAF along the run",
        "Pages programmed per host page between samples: the step up is where GC starts (the write cliff).",
        charts::lines(
            &waf,
            &Axes { y_from_zero: false, ..Axes::linear("host data written, GiB", "WAF (pages / host page)") },
        ),
    );
    page.chart(
        "Free blocks along the run",
        "Free blocks fall as the drive fills and level off where GC keeps pace with the host.",
        charts::lines(&free, &Axes::linear("host data written, GiB", "free blocks")),
    );
    page.chart(
        "GC activity along the run",
        "Pages GC moved per GiB the host wrote: zero before the cliff, steady after it.",
        charts::lines(&gc, &Axes::linear("host data written, GiB", "GC pages moved per host GiB")),
    );
    page.charts_end();
}
