//! The `perf` page: the run summary, the time series (throughput, p99
//! latency, WAF, free blocks, GC, die utilisation per interval of
//! simulated time), latency CDFs and percentiles per operation type, the
//! latency breakdown as stacked bars, and channel and die utilisation as
//! a heat map; then the parts every run report has ([`super::stress`]).

use super::charts::{self, Axes, Series};
use super::stress::{run_metrics, shared_sections};
use super::{array, entries, fixed, num, summary_table, text, Cell, Page, Run};
use serde_json::Value;

/// The page of perf runs.
pub fn page(page: &mut Page, runs: &[Run]) {
    page.section("Summary");
    let mut metrics = run_metrics();
    metrics.extend(perf_metrics());
    summary_table(page, runs, &metrics);
    over_time(page, runs);
    latency(page, runs);
    breakdown(page, runs);
    utilisation(page, runs);
    shared_sections(page, runs);
}

fn perf_metrics() -> Vec<(&'static str, &'static dyn Fn(&Value) -> Cell)> {
    vec![
        ("simulated time, s", &|v| Cell::num(fixed(num(v, "/perf/simulated_seconds"), 4))),
        ("requests completed", &|v| Cell::num(text(v, "/perf/completed"))),
        ("IOPS", &|v| Cell::num(fixed(num(v, "/perf/iops"), 0))),
        ("read / write MB/s", &|v| {
            Cell::num(format!("{} / {}", fixed(num(v, "/perf/read_mbps"), 1), fixed(num(v, "/perf/write_mbps"), 1)))
        }),
        ("latency mean / p99 / p99.9, µs", &|v| {
            let l = |k: &str| fixed(num(v, &format!("/perf/latency/all/{k}")), 1);
            Cell::num(format!("{} / {} / {}", l("mean_us"), l("p99_us"), l("p99_9_us")))
        }),
        ("bottleneck", &|v| {
            Cell::text(format!(
                "{} ({} {}% of request time)",
                text(v, "/perf/breakdown/bottleneck"),
                text(v, "/perf/breakdown/bottleneck_component"),
                fixed(num(v, "/perf/breakdown/bottleneck_share").map(|s| s * 100.0), 1)
            ))
        }),
        ("busiest resource", &|v| Cell::text(text(v, "/perf/utilisation/busiest"))),
        ("GC pages moved foreground / background", &|v| {
            Cell::num(format!(
                "{} / {}",
                text(v, "/perf/gc/foreground_pages_moved"),
                text(v, "/perf/gc/background_pages_moved")
            ))
        }),
        ("write cache", &|v| Cell::text(text(v, "/perf/write_cache_mode"))),
    ]
}

/// One series per run of `field` against the middle of each interval, s.
fn series_of(runs: &[Run], name: &dyn Fn(&Run) -> String, y: &dyn Fn(&Value) -> Option<f64>) -> Vec<Series> {
    runs.iter()
        .map(|r| Series {
            name: name(r),
            points: array(&r.report, "/perf/timeseries")
                .iter()
                .filter_map(|row| Some((num(row, "/start_s")? + num(row, "/length_s")? / 2.0, y(row)?)))
                .collect(),
        })
        .collect()
}

/// The time-series charts.
fn over_time(page: &mut Page, runs: &[Run]) {
    page.section("Over simulated time");
    let label = |r: &Run| r.label.clone();
    let field = |k: &'static str| move |row: &Value| num(row, &format!("/{k}"));
    let time = "simulated time, s";
    let mut mbps = series_of(runs, &|r| format!("{} read", r.label), &field("read_mbps"));
    mbps.extend(series_of(runs, &|r| format!("{} write", r.label), &field("write_mbps")));
    mbps.retain(|s| s.points.iter().any(|p| p.1 > 0.0));
    let gc = series_of(runs, &label, &|row| {
        Some(num(row, "/foreground_gc_pages_moved")? + num(row, "/background_gc_pages_moved")?)
    });
    let charts: [(&str, &str, Vec<Series>, Axes); 7] = [
        (
            "IOPS",
            "Completed requests per second; a drop that stays is the write cliff (GC taking the dies).",
            series_of(runs, &label, &field("iops")),
            Axes::linear(time, "IOPS (requests/s)"),
        ),
        ("Bandwidth", "Host MB/s (10^6 bytes) read and written per interval.", mbps, Axes::linear(time, "MB/s")),
        (
            "p99 latency",
            "The 99th percentile of the requests completed in each interval; spikes line up with GC.",
            series_of(runs, &label, &field("latency_p99_us")),
            Axes::linear(time, "p99 latency, µs"),
        ),
        (
            "WAF per interval",
            "Pages programmed per host page programmed in each interval (0: no host programs).",
            series_of(runs, &label, &field("waf")),
            Axes { y_from_zero: false, ..Axes::linear(time, "WAF") },
        ),
        (
            "Free blocks",
            "The FTL's free blocks at the end of each interval: GC starts when they reach its threshold.",
            series_of(runs, &label, &field("free_blocks")),
            Axes::linear(time, "free blocks"),
        ),
        (
            "GC activity",
            "Pages moved by garbage collection per interval (foreground and idle-time).",
            gc,
            Axes::linear(time, "GC pages moved per interval"),
        ),
        (
            "Die utilisation",
            "Mean busy share of the dies: near 100% the dies are the bottleneck.",
            series_of(runs, &label, &|row| num(row, "/die_utilisation").map(|u| u * 100.0)),
            Axes::linear(time, "dies busy, %"),
        ),
    ];
    page.charts_start();
    for (title, caption, series, axes) in charts {
        page.chart(title, caption, charts::lines(&series, &axes));
    }
    page.charts_end();
}

/// The operation types with a CDF in any run (`all` first).
fn cdf_ops(runs: &[Run]) -> Vec<String> {
    let mut ops: Vec<String> =
        runs.iter().flat_map(|r| entries(&r.report, "/perf/latency_cdf")).map(|(k, _)| k.to_string()).collect();
    ops.sort_by_key(|o| (o != "all", o.clone()));
    ops.dedup();
    ops
}

/// Latency CDFs and the percentile table.
fn latency(page: &mut Page, runs: &[Run]) {
    page.section("Latency");
    page.charts_start();
    for op in cdf_ops(runs) {
        let series: Vec<Series> = runs
            .iter()
            .map(|r| Series {
                name: r.label.clone(),
                points: array(&r.report, &format!("/perf/latency_cdf/{op}"))
                    .iter()
                    .filter_map(|p| Some((num(p, "/latency_us")?, num(p, "/fraction")?)))
                    .collect(),
            })
            .collect();
        page.chart(
            &format!("Latency CDF: {op}"),
            "Share of requests completed within a latency; a long flat top is the tail (GC, queueing).",
            charts::lines(
                &series,
                &Axes { x_log: true, ..Axes::linear("latency, µs (log scale)", "share of requests") },
            ),
        );
    }
    page.charts_end();
    let headers: Vec<String> = ["run", "op", "count", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max"]
        .map(|h| if ["run", "op", "count"].contains(&h) { h.to_string() } else { format!("{h}, µs") })
        .to_vec();
    let mut rows = Vec::new();
    for r in runs {
        for (op, l) in entries(&r.report, "/perf/latency") {
            let mut row = vec![Cell::text(&r.label), Cell::text(op), Cell::num(text(l, "/count"))];
            for k in ["mean_us", "p50_us", "p90_us", "p99_us", "p99_9_us", "p99_99_us", "max_us"] {
                row.push(Cell::num(fixed(num(l, &format!("/{k}")), 1)));
            }
            rows.push(row);
        }
    }
    page.table(&headers, &rows);
}

/// Where the time of a request went, per operation type, stacked.
fn breakdown(page: &mut Page, runs: &[Run]) {
    page.section("Latency breakdown");
    let mut bars = Vec::new();
    let mut components: Vec<String> = Vec::new();
    let mut values: Vec<(usize, String, f64)> = Vec::new();
    for r in runs {
        for (op, parts) in entries(&r.report, "/perf/breakdown/by_op_mean_us") {
            let bar = bars.len();
            bars.push(if runs.len() > 1 { format!("{}: {op}", r.label) } else { op.to_string() });
            for (component, v) in entries(parts, "") {
                let Some(v) = v.as_f64() else { continue };
                if !components.iter().any(|c| c == component) {
                    components.push(component.to_string());
                }
                values.push((bar, component.to_string(), v));
            }
        }
    }
    components.sort();
    // Only the components that are a visible part of some bar.
    components.retain(|c| values.iter().any(|(_, k, v)| k == c && *v > 0.0));
    let parts: Vec<Series> = components
        .iter()
        .map(|c| Series {
            name: c.clone(),
            points: values.iter().filter(|(_, k, _)| k == c).map(|(b, _, v)| (*b as f64, *v)).collect(),
        })
        .collect();
    page.charts_start();
    page.chart(
        "Mean latency by component",
        "Where a request's time goes: waiting for a die or channel is contention, cell time is the NAND itself.",
        charts::stacked_bars(&bars, &parts, &Axes::linear("operation", "mean µs per request")),
    );
    page.charts_end();
}

/// Channel and die utilisation as a heat map per run.
fn utilisation(page: &mut Page, runs: &[Run]) {
    page.section("Utilisation");
    page.charts_start();
    for r in runs {
        let channels: Vec<f64> =
            array(&r.report, "/perf/utilisation/channels").iter().filter_map(Value::as_f64).collect();
        let dies: Vec<f64> = array(&r.report, "/perf/utilisation/dies").iter().filter_map(Value::as_f64).collect();
        if channels.is_empty() || dies.is_empty() || dies.len() % channels.len() != 0 {
            page.chart(&format!("Busy share: {}", r.label), "", None);
            continue;
        }
        let per_channel = dies.len() / channels.len();
        let rows: Vec<String> = (0..channels.len()).map(|c| format!("channel {c}")).collect();
        let mut columns = vec!["bus".to_string()];
        columns.extend((0..per_channel).map(|d| format!("die {d}")));
        let values: Vec<Vec<f64>> = channels
            .iter()
            .enumerate()
            .map(|(c, bus)| {
                std::iter::once(*bus).chain(dies[c * per_channel..(c + 1) * per_channel].iter().copied()).collect()
            })
            .collect();
        page.chart(
            &format!("Busy share: {}", r.label),
            "Each channel's bus and the dies on it (dies numbered within the channel): one hot cell is a hot spot, a hot row a channel bottleneck.",
            charts::heat_map(&rows, &columns, &values, "share of simulated time busy"),
        );
    }
    page.charts_end();
    let headers: Vec<String> =
        ["run", "host link to device / to host", "controller CPU", "DRAM", "channels mean / max", "dies mean / max"]
            .map(String::from)
            .to_vec();
    let pct = |v: &Value, k: &str| fixed(num(v, &format!("/perf/utilisation/{k}")).map(|x| x * 100.0), 1) + "%";
    let rows: Vec<Vec<Cell>> = runs
        .iter()
        .map(|r| {
            let v = &r.report;
            vec![
                Cell::text(&r.label),
                Cell::num(format!("{} / {}", pct(v, "host_link_to_device"), pct(v, "host_link_to_host"))),
                Cell::num(pct(v, "controller_cpu")),
                Cell::num(pct(v, "dram")),
                Cell::num(format!("{} / {}", pct(v, "channel_mean"), pct(v, "channel_max"))),
                Cell::num(format!("{} / {}", pct(v, "die_mean"), pct(v, "die_max"))),
            ]
        })
        .collect();
    page.table(&headers, &rows);
}
