//! The `crash` page: the campaign summary, the crash points tested along
//! the workload (passed and failed, by flash operation index), failures
//! by rule, the failed points in detail, and the shrunk finding with the
//! command that reproduces it.

use super::charts::{self, Axes, Series};
use super::{array, entries, num, summary_table, text, Cell, Page, Run};
use serde_json::Value;

/// Failed points listed in full per run at most (the JSON has them all).
const FAILED_ROWS_MAX: usize = 50;

/// The page of crash campaigns.
pub fn page(page: &mut Page, runs: &[Run]) {
    page.section("Summary");
    summary_table(page, runs, &metrics());
    points(page, runs);
    failures(page, runs);
    shrunk(page, runs);
}

fn metrics() -> Vec<(&'static str, &'static dyn Fn(&Value) -> Cell)> {
    vec![
        ("preset", &|v| Cell::text(text(v, "/preset"))),
        ("FTL", &|v| Cell::text(text(v, "/ftl"))),
        ("guarantee checked", &|v| Cell::text(text(v, "/guarantee"))),
        ("workload", &|v| Cell::text(text(v, "/workload"))),
        ("seed", &|v| Cell::num(text(v, "/seed"))),
        ("nested cut during recovery", &|v| Cell::text(text(v, "/nested"))),
        ("points planned / tested", &|v| {
            Cell::num(format!("{} / {}", text(v, "/points_planned"), text(v, "/points_tested")))
        }),
        ("passed / failed", &|v| Cell::num(format!("{} / {}", text(v, "/passed"), text(v, "/failed")))),
        ("cuts that tore a program or erase", &|v| {
            Cell::num(
                array(v, "/points").iter().filter(|p| p.get("tore") == Some(&Value::Bool(true))).count().to_string(),
            )
        }),
        ("first request at flash op", &|v| Cell::num(text(v, "/first_request_op"))),
        ("base run", &|v| match v.pointer("/base_failure").and_then(Value::as_str) {
            None => Cell::verdict(true, "ok"),
            Some(e) => Cell::verdict(false, format!("FAILED: {e}")),
        }),
        ("result", &|v| {
            let findings =
                num(v, "/failed").unwrap_or(0.0) > 0.0 || v.pointer("/base_failure").is_some_and(|b| !b.is_null());
            if findings {
                Cell::verdict(false, "FAIL")
            } else {
                Cell::verdict(true, "PASS — every crash point recovered legally")
            }
        }),
    ]
}

/// The crash points along the workload: where each cut fell and how much
/// recovery work it took, passed and failed apart.
fn points(page: &mut Page, runs: &[Run]) {
    page.section("Crash points along the workload");
    let mut series = Vec::new();
    for r in runs {
        for (passed, what) in [(true, "passed"), (false, "failed")] {
            let points: Vec<(f64, f64)> = array(&r.report, "/points")
                .iter()
                .filter(|p| p.get("passed").and_then(Value::as_bool) == Some(passed))
                .filter_map(|p| Some((num(p, "/cut/op_index")?, num(p, "/recovery_ops")?)))
                .collect();
            if !points.is_empty() {
                series.push(Series { name: format!("{} {what}", r.label), points });
            }
        }
    }
    page.charts_start();
    page.chart(
        "Crash points tested",
        "Each dot is a power cut at a flash operation; failures that cluster point at the code running there.",
        charts::scatter(&series, &Axes::linear("flash operation index of the cut", "flash operations of the recovery")),
    );
    let mut rules: Vec<String> =
        runs.iter().flat_map(|r| entries(&r.report, "/failed_by_kind")).map(|(k, _)| k.to_string()).collect();
    rules.sort();
    rules.dedup();
    let by_rule: Vec<Series> = runs
        .iter()
        .map(|r| Series {
            name: r.label.clone(),
            points: rules
                .iter()
                .enumerate()
                .filter_map(|(i, k)| Some((i as f64, num(&r.report, &format!("/failed_by_kind/{k}"))?)))
                .collect(),
        })
        .collect();
    page.chart(
        "Failed points by rule",
        "Which guarantee broke: lost acknowledged writes, torn atomic writes, a recovery that failed.",
        if rules.is_empty() {
            None
        } else {
            charts::grouped_bars(&rules, &by_rule, &Axes::linear("rule", "failed points"))
        },
    );
    page.charts_end();
}

/// The failed points, in detail.
fn failures(page: &mut Page, runs: &[Run]) {
    page.section("Failures");
    let headers: Vec<String> =
        ["run", "cut at op", "phase", "request", "nested cut", "stage", "rule", "what"].map(String::from).to_vec();
    let mut rows = Vec::new();
    for r in runs {
        let failed: Vec<&Value> =
            array(&r.report, "/points").iter().filter(|p| p.get("passed") == Some(&Value::Bool(false))).collect();
        if failed.len() > FAILED_ROWS_MAX {
            page.note("", &format!("{}: the first {FAILED_ROWS_MAX} of {} failed points.", r.label, failed.len()));
        }
        for p in failed.into_iter().take(FAILED_ROWS_MAX) {
            let during = p.pointer("/cut/during").and_then(Value::as_bool) == Some(true);
            rows.push(vec![
                Cell::text(&r.label),
                Cell::num(text(p, "/cut/op_index")),
                Cell::text(if during { "during" } else { "between" }),
                Cell::num(text(p, "/request")),
                Cell::text(match p.get("nested_cut") {
                    Some(n) if !n.is_null() => format!(
                        "{}{}",
                        text(n, "/nth"),
                        if n.get("during") == Some(&Value::Bool(true)) { ":during" } else { "" }
                    ),
                    _ => "—".into(),
                }),
                Cell::text(text(p, "/stage")),
                Cell::text(text(p, "/first/rule")),
                Cell::text(text(p, "/first/message")),
            ]);
        }
        if let Some(b) = r.report.pointer("/base_failure").and_then(Value::as_str) {
            page.note("fail", &format!("{}: the base run failed without a power cut: {b}", r.label));
        }
    }
    if rows.is_empty() {
        page.note("pass", "No crash point failed.");
    } else {
        page.table(&headers, &rows);
    }
}

/// The shrunk finding of each campaign and its reproduce command.
fn shrunk(page: &mut Page, runs: &[Run]) {
    page.section("Shrunk finding");
    let mut any = false;
    for r in runs {
        let Some(s) = r.report.pointer("/shrunk").filter(|s| s.is_object()) else { continue };
        any = true;
        let during = s.pointer("/cut/during").and_then(Value::as_bool) == Some(true);
        page.note(
            "fail",
            &format!(
                "{}: {} at the {} stage, cut {} flash op {} ({} host requests before it); {} points tried in {} rounds.",
                r.label,
                text(s, "/rule"),
                text(s, "/stage"),
                if during { "during" } else { "between operations at" },
                text(s, "/cut/op_index"),
                text(s, "/requests_before"),
                text(s, "/tried"),
                text(s, "/rounds")
            ),
        );
        page.pre(&text(s, "/message"));
        if let Some(cmd) = s.get("command").and_then(Value::as_str) {
            page.note("", "Reproduce with:");
            page.pre(cmd);
        }
    }
    if !any {
        page.note("absent", "Nothing was shrunk (no finding, or --no-shrink).");
    }
}
