//! `nandlab perf --trace-out`: the timeline read back and checked against
//! the run's own counters; its bounds; its bad values.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

fn nandlab(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nandlab-trace-out-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small perf run with GC (preconditioned), its report and its timeline.
fn traced_run(d: &Path, extra: &[&str]) -> (String, Value, Value, Vec<u8>) {
    let json = d.join("r.json");
    let trace = d.join("t.json");
    let mut args = vec![
        "perf",
        "--preset",
        "tiny-timed",
        "--precondition",
        "--requests",
        "600",
        "--seed",
        "5",
        "--interval",
        "10ms",
        "--no-progress",
        "--json",
        json.to_str().unwrap(),
        "--trace-out",
        trace.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = nandlab(&args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let bytes = std::fs::read(&trace).unwrap();
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (stderr, report, serde_json::from_slice(&bytes).expect("the trace is JSON"), bytes)
}

/// The report's flash counter for a trace slice name.
fn counter_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "read" => "page_reads",
        "read_oob" => "oob_reads",
        "read_meta" => "meta_reads",
        "program" => "page_programs",
        "program_meta" => "meta_programs",
        "copyback" => "copybacks",
        "erase" => "block_erases",
        _ => return None,
    })
}

/// What [`check_trace`] found.
#[derive(Debug, Default)]
struct Found {
    /// (operation, cause) -> pages (planes) over the die tracks.
    by_op: BTreeMap<(String, String), u64>,
    /// die track -> operation -> pages (planes).
    per_die: BTreeMap<String, BTreeMap<String, u64>>,
    requests: u64,
    events: u64,
    counters: BTreeMap<String, u64>,
    /// GC runs: (begin µs, end µs, operations), and the GC slices on die tracks.
    gc_runs: Vec<(f64, f64, u64)>,
    gc_slices: Vec<(f64, f64)>,
}

/// Check a timeline's structure: tracks named, every `X` with a
/// non-negative duration inside `[0, end_us]`, no two cell phases of one
/// die overlapping (unless `suspends`), each request's begin and end
/// paired and in order. Returns what it counted.
fn check_trace(trace: &Value, end_us: f64, suspends: bool) -> Result<Found, String> {
    let events = trace["traceEvents"].as_array().ok_or("no traceEvents array")?;
    if trace["displayTimeUnit"] != "ns" {
        return Err("displayTimeUnit is not ns".into());
    }
    let mut names = HashMap::new();
    for e in events.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name") {
        names.insert(e["tid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_string());
    }
    let mut f = Found::default();
    let mut open: HashMap<u64, f64> = HashMap::new();
    let mut gc_open: HashMap<u64, (f64, u64)> = HashMap::new();
    let mut die_slices: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for e in events {
        let ts = e["ts"].as_f64().ok_or("an event without ts")?;
        match e["ph"].as_str().ok_or("an event without ph")? {
            "M" => continue,
            "X" => {
                let dur = e["dur"].as_f64().ok_or("an X without dur")?;
                if dur < 0.0 || ts < 0.0 || ts + dur > end_us * (1.0 + 1e-12) + 1e-6 {
                    return Err(format!("slice outside the run [0, {end_us}] µs or negative: {e}"));
                }
                let track = names.get(&e["tid"].as_u64().unwrap()).ok_or_else(|| format!("unnamed track: {e}"))?;
                if track.starts_with("die ") {
                    let name = e["name"].as_str().unwrap();
                    counter_of(name).ok_or_else(|| format!("unknown operation {name}"))?;
                    let cause = e["args"]["cause"].as_str().ok_or("a slice without a cause")?;
                    *f.by_op.entry((name.into(), cause.into())).or_default() += e["args"]["planes"].as_u64().unwrap();
                    *f.per_die.entry(track.clone()).or_default().entry(name.into()).or_default() +=
                        e["args"]["planes"].as_u64().unwrap();
                    if cause == "gc" {
                        f.gc_slices.push((ts, ts + dur));
                    }
                    die_slices.entry(track.clone()).or_default().push((ts, ts + dur));
                }
            }
            "b" | "e" if e["name"] == "gc run" => {
                let id = e["id"].as_u64().ok_or("a gc run without id")?;
                if e["ph"] == "b" {
                    gc_open.insert(id, (ts, e["args"]["ops"].as_u64().ok_or("a gc run without ops")?));
                } else {
                    match gc_open.remove(&id) {
                        Some((b, ops)) if b <= ts => f.gc_runs.push((b, ts, ops)),
                        _ => return Err(format!("gc run end without an earlier begin: {e}")),
                    }
                }
            }
            "b" => {
                if open.insert(e["id"].as_u64().ok_or("b without id")?, ts).is_some() {
                    return Err(format!("request begun twice: {e}"));
                }
            }
            "e" => {
                let begin = open.remove(&e["id"].as_u64().ok_or("e without id")?);
                match begin {
                    Some(b) if b <= ts => f.requests += 1,
                    _ => return Err(format!("request end without an earlier begin: {e}")),
                }
            }
            "C" => *f.counters.entry(e["name"].as_str().unwrap().into()).or_default() += 1,
            other => return Err(format!("unexpected phase {other}")),
        }
        f.events += 1;
    }
    if let Some((id, _)) = open.iter().next() {
        return Err(format!("request {id} begun and never ended"));
    }
    if let Some((id, _)) = gc_open.iter().next() {
        return Err(format!("gc run {id} begun and never ended"));
    }
    if !suspends {
        for (die, mut s) in die_slices {
            s.sort_by(|a, b| a.partial_cmp(b).unwrap());
            if let Some(w) = s.windows(2).find(|w| w[1].0 < w[0].1 - 1e-6) {
                return Err(format!("{die}: cell phases overlap: {w:?}"));
            }
        }
    }
    Ok(f)
}

/// The trace's counts against the report: every (operation, cause) pair
/// equal to `flash.by_cause`, summed over the dies.
fn check_counts(found: &Found, report: &Value) -> Result<(), String> {
    let mut expected = BTreeMap::new();
    for (cause, counts) in report["flash"]["by_cause"].as_object().ok_or("no flash.by_cause")? {
        for op in ["read", "read_oob", "read_meta", "program", "program_meta", "copyback", "erase"] {
            let n = counts[counter_of(op).unwrap()].as_u64().unwrap_or(0);
            if n > 0 {
                expected.insert((op.to_string(), cause.clone()), n);
            }
        }
    }
    if found.by_op != expected {
        return Err(format!("trace counts {:?}\nreport counts {expected:?}", found.by_op));
    }
    // Per die: the pages of each operation kind on the die's track equal
    // the report's `perf.die_operations` for that die.
    let dies = report["perf"]["die_operations"].as_array().ok_or("no perf.die_operations")?;
    for (i, counts) in dies.iter().enumerate() {
        let expected: BTreeMap<String, u64> = counts
            .as_object()
            .ok_or("a die_operations entry is not an object")?
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
            .collect();
        let found_die = found.per_die.get(&format!("die {i}")).cloned().unwrap_or_default();
        if found_die != expected {
            return Err(format!("die {i}: trace {found_die:?}, report {expected:?}"));
        }
    }
    if found.per_die.len() > dies.len() {
        return Err(format!("{} die tracks, {} dies in the report", found.per_die.len(), dies.len()));
    }
    Ok(())
}

/// The GC runs against the GC slices: their operations add up to the GC
/// slices on the die tracks, and every GC slice lies inside a run.
fn check_gc_runs(found: &Found) -> Result<(), String> {
    let ops: u64 = found.gc_runs.iter().map(|r| r.2).sum();
    if ops != found.gc_slices.len() as u64 {
        return Err(format!("{ops} operations in GC runs, {} GC slices on the dies", found.gc_slices.len()));
    }
    for &(a, b) in &found.gc_slices {
        if !found.gc_runs.iter().any(|&(s, e, _)| s <= a + 1e-6 && b <= e + 1e-6) {
            return Err(format!("the GC slice {a}..{b} µs is in no GC run"));
        }
    }
    Ok(())
}

fn end_us(report: &Value) -> f64 {
    report["perf"]["simulated_seconds"].as_f64().unwrap() * 1e6
}

#[test]
fn the_timeline_matches_the_runs_counters_and_is_deterministic() {
    let d = dir("whole");
    let (_, report, trace, bytes) = traced_run(&d, &[]);
    let found = check_trace(&trace, end_us(&report), report["perf"]["suspends"].as_u64() != Some(0)).unwrap();
    check_counts(&found, &report).unwrap();
    // GC ran, on every die; every request is drawn; both counters are there.
    assert!(found.by_op.keys().any(|(_, c)| c == "gc"), "{:?}", found.by_op);
    assert_eq!(
        found.per_die.len() as u64,
        report["perf"]["utilisation"]["dies"].as_array().map_or(4, |a| a.len()) as u64
    );
    assert_eq!(found.requests, report["perf"]["completed"].as_u64().unwrap());
    assert!(found.counters["queue_depth"] > 0 && found.counters["free_blocks"] > 0, "{:?}", found.counters);
    // GC runs as spans around the GC operations.
    assert!(!found.gc_runs.is_empty() && !found.gc_slices.is_empty());
    check_gc_runs(&found).unwrap();
    assert_eq!(trace["otherData"]["truncated"], false);
    assert_eq!(trace["otherData"]["events"].as_u64(), Some(found.events));
    // Same run, same bytes.
    let (_, _, _, again) = traced_run(&dir("whole-again"), &[]);
    assert!(bytes == again, "two runs of one seed wrote different timelines");

    // The checks catch a broken timeline.
    let broken = |edit: &dyn Fn(&mut Vec<Value>)| {
        let mut t = trace.clone();
        edit(t["traceEvents"].as_array_mut().unwrap());
        t
    };
    let first_die_slice = |ev: &Vec<Value>| {
        let die_tid = ev.iter().find(|e| e["ph"] == "M" && e["args"]["name"] == "die 0").unwrap()["tid"].clone();
        ev.iter().position(|e| e["ph"] == "X" && e["tid"] == die_tid).unwrap()
    };
    let missing = broken(&|ev| {
        let i = first_die_slice(ev);
        ev.remove(i);
    });
    let f = check_trace(&missing, end_us(&report), false).unwrap();
    assert!(check_counts(&f, &report).is_err(), "a missing slice went unnoticed");
    let negative = broken(&|ev| {
        let i = first_die_slice(ev);
        ev[i]["dur"] = (-1.0).into();
    });
    assert!(check_trace(&negative, end_us(&report), false).is_err());
    let late = broken(&|ev| {
        let i = first_die_slice(ev);
        ev[i]["ts"] = (end_us(&report) + 1.0).into();
    });
    assert!(check_trace(&late, end_us(&report), false).is_err());
    let unpaired = broken(&|ev| {
        let i = ev.iter().position(|e| e["ph"] == "e").unwrap();
        ev.remove(i);
    });
    assert!(check_trace(&unpaired, end_us(&report), false).is_err());
    let overlapping = broken(&|ev| {
        let i = first_die_slice(ev);
        let mut copy = ev[i].clone();
        copy["ts"] = (copy["ts"].as_f64().unwrap() + copy["dur"].as_f64().unwrap() / 2.0).into();
        ev.insert(i + 1, copy);
    });
    assert!(check_trace(&overlapping, end_us(&report), false).unwrap_err().contains("overlap"));
    let gc_run_at = |ev: &Vec<Value>, ph: &str| ev.iter().position(|e| e["name"] == "gc run" && e["ph"] == ph).unwrap();
    let run_missing = broken(&|ev| {
        let b = gc_run_at(ev, "b");
        let id = ev[b]["id"].clone();
        ev.retain(|e| !(e["name"] == "gc run" && e["id"] == id));
    });
    let f = check_trace(&run_missing, end_us(&report), false).unwrap();
    assert!(check_gc_runs(&f).is_err(), "a missing GC run went unnoticed");
    let run_short = broken(&|ev| {
        let b = gc_run_at(ev, "b");
        let id = ev[b]["id"].clone();
        let e = ev.iter().position(|e| e["name"] == "gc run" && e["ph"] == "e" && e["id"] == id).unwrap();
        ev[e]["ts"] = ev[b]["ts"].clone();
    });
    let f = check_trace(&run_short, end_us(&report), false).unwrap();
    assert!(check_gc_runs(&f).unwrap_err().contains("in no GC run"));
    std::fs::remove_dir_all(d).ok();
}

#[test]
fn the_window_and_the_event_cap_cut_as_documented() {
    let d = dir("window");
    let (_, report, trace, _) = traced_run(&d, &["--trace-out-window", "2ms..4ms"]);
    let found = check_trace(&trace, end_us(&report), true).unwrap();
    assert!(found.requests > 0 && found.requests < report["perf"]["completed"].as_u64().unwrap());
    for e in trace["traceEvents"].as_array().unwrap() {
        let ts = e["ts"].as_f64().unwrap();
        match e["ph"].as_str().unwrap() {
            // An operation is kept whole: its cell phase overlaps the
            // window, its transfers (on channel tracks) may lie outside.
            "X" if e["name"] != "transfer" => {
                let end = ts + e["dur"].as_f64().unwrap();
                assert!(end >= 2000.0 && ts < 4000.0, "outside the window: {e}");
            }
            "b" => assert!(ts < 4000.0, "begins after the window: {e}"),
            "e" => assert!(ts >= 2000.0, "ends before the window: {e}"),
            "C" => assert!((2000.0..4000.0).contains(&ts), "outside the window: {e}"),
            _ => {}
        }
    }
    assert_eq!(trace["otherData"]["window_start_us"].as_f64(), Some(2000.0));
    assert_eq!(trace["otherData"]["window_end_us"].as_f64(), Some(4000.0));

    let (stderr, report, trace, _) = traced_run(&d, &["--trace-out-max-events", "500"]);
    let found = check_trace(&trace, end_us(&report), true).unwrap();
    // The cap counts every event but the free-block samples (one per interval).
    let capped = found.events - found.counters.get("free_blocks").copied().unwrap_or(0);
    assert!(capped <= 500 && capped > 400, "{capped} events");
    assert_eq!(trace["otherData"]["truncated"], true);
    assert!(trace["otherData"]["dropped_events"].as_u64().unwrap() > 0);
    assert!(stderr.contains("--trace-out-max-events") && stderr.contains("left out"), "{stderr}");
    std::fs::remove_dir_all(d).ok();
}

#[test]
fn bad_timeline_options_exit_2_naming_the_option() {
    let d = dir("bad");
    let out = d.join("t.json");
    let out = out.to_str().unwrap();
    for (args, option, reason) in [
        (vec!["--trace-out", out, "--trace-out-window", "2s..1s"], "--trace-out-window", "after the start"),
        (vec!["--trace-out", out, "--trace-out-window", "soon"], "--trace-out-window", "START..END"),
        (vec!["--trace-out", out, "--trace-out-window", "1s..later"], "--trace-out-window", "duration"),
        (vec!["--trace-out", out, "--trace-out-max-events", "0"], "--trace-out-max-events", "positive"),
        (vec!["--trace-out", out, "--trace-out-max-events", "many"], "--trace-out-max-events", "positive"),
        (vec!["--trace-out-window", "1s..2s"], "--trace-out-window", "give --trace-out"),
    ] {
        let mut all = vec!["perf", "--preset", "tiny-timed", "--requests", "10", "--no-progress"];
        all.extend_from_slice(&args);
        let (code, stdout, stderr) = nandlab(&all);
        assert_eq!(code, 2, "{args:?}: {stdout}{stderr}");
        assert!(stderr.contains(option) && stderr.contains(reason), "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?} ran: {stdout}");
        assert!(!Path::new(out).exists());
    }
    // The output machinery refuses a timeline written over another output.
    let json = d.join("r.json");
    let (code, _, stderr) = nandlab(&[
        "perf",
        "--preset",
        "tiny-timed",
        "--requests",
        "10",
        "--no-progress",
        "--json",
        json.to_str().unwrap(),
        "--trace-out",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--trace-out") && stderr.contains("same file"), "{stderr}");
    std::fs::remove_dir_all(d).ok();
}
