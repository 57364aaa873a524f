//! The HTML reports in a real browser: headless Chromium loads the page of
//! a stress, a perf and a crash run; the test fails on any console message
//! or uncaught error, and on any chart that did not draw (no visible data
//! mark: a line, bar, dot or cell in a series colour), and saves a
//! screenshot of each page (in the target directory; `scripts/html_screenshots.sh`
//! makes the ones in `docs/screenshots/`).
//!
//! The check works on a copy of the page with two scripts added (nandlab's
//! pages have none): one at the top of `<head>` that records uncaught
//! errors, one at the end of `<body>` that measures every chart's SVG
//! elements with `getBBox` (so the browser really laid them out) and
//! writes the result into the DOM, which `--dump-dom` prints. Console
//! messages come from Chromium's log on stderr (`--enable-logging=stderr`).
//! Two deliberately broken pages (a script error; an empty chart) prove
//! the check fails.
//!
//! Chromium is installed by `.ci/run` (Debian's `chromium`). Without it the
//! tests say they were skipped, unless `NANDLAB_REQUIRE_TOOLS=1`, where a
//! missing tool fails them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Chromium, or `None` after saying why the test is skipped (a failure
/// with `NANDLAB_REQUIRE_TOOLS=1`).
fn chromium() -> Option<PathBuf> {
    let candidates = ["chromium", "chromium-browser", "google-chrome"];
    let found = std::env::var_os("NANDLAB_CHROMIUM").map(PathBuf::from).or_else(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path).flat_map(|dir| candidates.iter().map(move |c| dir.join(c))).find(|p| p.is_file())
    });
    if found.is_none() {
        let why = "no chromium on PATH (install it: apt-get install -y chromium; .ci/run does)";
        assert!(std::env::var("NANDLAB_REQUIRE_TOOLS").as_deref() != Ok("1"), "NANDLAB_REQUIRE_TOOLS=1: {why}");
        eprintln!("SKIPPED: browser test of the HTML report: {why}");
    }
    found
}

/// Run headless Chromium on `page` with `args`; (stdout, stderr). Killed
/// and failed after two minutes (a hang is a failure, not a wait).
fn run_chromium(chromium: &Path, page: &Path, args: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    // To files, not pipes: a page's DOM is larger than a pipe's buffer, and
    // a full pipe would stall Chromium until the deadline.
    let stdout = profile.path().join("stdout");
    let stderr = profile.path().join("stderr");
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::from(std::fs::File::create(&stdout).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&stderr).unwrap()))
        .spawn()
        .expect("chromium starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("chromium did not finish with {} within 2 minutes", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
    (read(&stdout), read(&stderr))
}

/// Records uncaught errors (first thing in `<head>`).
const ERROR_RECORDER: &str = "<script>window.nandlabErrors=[];window.addEventListener('error',\
function(e){window.nandlabErrors.push(String(e.message))});</script>";

/// Measures each chart (end of `<body>`): its size, and its drawn data
/// marks (elements with a non-grey stroke or fill and a non-empty box).
const CHART_PROBE: &str = r#"<script>(function(){
var out={errors:window.nandlabErrors,charts:[]};
function grey(c){if(!c||c==='none')return true;var m=/^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(c);
if(!m)return false;return m[1]===m[2]&&m[2]===m[3];}
document.querySelectorAll('figure.chart').forEach(function(f){
var svg=f.querySelector('svg');var title=(f.querySelector('h3')||{}).textContent||'';
if(!svg){out.charts.push({title:title,width:0,height:0,marks:0});return;}
var box=svg.getBoundingClientRect();var marks=0;
svg.querySelectorAll('polyline,path,rect,circle,line,polygon').forEach(function(e){
var b=e.getBBox();if((b.width>0||b.height>0)&&!(grey(e.getAttribute('stroke'))&&grey(e.getAttribute('fill'))))marks++;});
out.charts.push({title:title,width:box.width,height:box.height,marks:marks});});
var pre=document.createElement('pre');pre.id='nandlab-check';pre.textContent=JSON.stringify(out);
document.body.appendChild(pre);})();</script>"#;

/// What the browser saw of a page.
#[derive(Debug)]
struct Seen {
    charts: Vec<(String, u64)>,
}

/// Load `html` in Chromium and check it: no console message, no uncaught
/// error, every chart laid out with at least one data mark.
fn check_in_browser(chromium: &Path, html: &str, dir: &Path) -> Result<Seen, String> {
    let probe = html.replacen("<head>", &format!("<head>\n{ERROR_RECORDER}"), 1).replacen(
        "</body>",
        &format!("{CHART_PROBE}\n</body>"),
        1,
    );
    let path = dir.join("probe.html");
    std::fs::write(&path, probe).unwrap();
    let (dom, log) = run_chromium(chromium, &path, &["--enable-logging=stderr", "--v=0", "--dump-dom"]);
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    if !console.is_empty() {
        return Err(format!("console messages: {console:?}"));
    }
    let start = dom.find("<pre id=\"nandlab-check\">").ok_or("the probe did not run (no result in the DOM)")?;
    let text = &dom[start + "<pre id=\"nandlab-check\">".len()..];
    let text = text[..text.find("</pre>").ok_or("no end of the probe's result")?].replace("&quot;", "\"");
    let result: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("probe result {text}: {e}"))?;
    let errors = result["errors"].as_array().cloned().unwrap_or_default();
    if !errors.is_empty() {
        return Err(format!("uncaught errors: {errors:?}"));
    }
    let mut charts = Vec::new();
    for c in result["charts"].as_array().ok_or("no charts list")? {
        let title = c["title"].as_str().unwrap_or("?").to_string();
        let marks = c["marks"].as_u64().unwrap_or(0);
        if c["width"].as_f64().unwrap_or(0.0) < 100.0 || c["height"].as_f64().unwrap_or(0.0) < 100.0 {
            return Err(format!("chart `{title}` was not laid out: {c}"));
        }
        if marks == 0 {
            return Err(format!("chart `{title}` has not drawn: no data mark"));
        }
        charts.push((title, marks));
    }
    if charts.len() != html.matches("<svg").count() {
        return Err(format!("{} charts seen, {} in the page", charts.len(), html.matches("<svg").count()));
    }
    Ok(Seen { charts })
}

mod support;

fn nandlab(args: &[&str]) -> i32 {
    let out = Command::new(env!("CARGO_BIN_EXE_nandlab")).args(args).output().expect("runs");
    out.status.code().unwrap_or(-1)
}

/// Photograph `page` at `size` (`W,H`) into the test's target directory as
/// `name`, and check that a picture came out.
fn screenshot(chromium: &Path, page: &Path, name: &str, size: &str) -> PathBuf {
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&shot);
    run_chromium(chromium, page, &[&format!("--window-size={size}"), &format!("--screenshot={}", shot.display())]);
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "screenshot {} of {size} bytes", shot.display());
    shot
}

#[test]
fn every_report_kind_loads_without_errors_and_every_chart_draws() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (kind, _, page) in support::report_runs(dir.path()) {
        let html = std::fs::read_to_string(&page).unwrap();
        let seen = check_in_browser(&chromium, &html, dir.path()).unwrap_or_else(|e| panic!("{kind} page: {e}"));
        let least = match kind {
            "stress" => 6,
            "perf" => 12,
            _ => 2,
        };
        assert!(seen.charts.len() >= least, "{kind}: {:?}", seen.charts);
        let shot = screenshot(&chromium, &page, &format!("html-{kind}.png"), "1400,1800");
        eprintln!("{kind}: {} charts drawn; screenshot {}", seen.charts.len(), shot.display());
    }
}

#[test]
fn every_bench_page_loads_without_errors_and_its_chart_draws() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    for (kind, page, _) in support::bench_pages(dir.path()) {
        let html = std::fs::read_to_string(&page).unwrap();
        let seen = check_in_browser(&chromium, &html, dir.path()).unwrap_or_else(|e| panic!("bench {kind} page: {e}"));
        assert_eq!(seen.charts.len(), 1, "bench {kind}: {:?}", seen.charts);
        screenshot(&chromium, &page, &format!("html-bench-{kind}.png"), "1400,900");
    }
}

#[test]
fn the_check_fails_on_a_script_error_and_on_an_empty_chart() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("page.html");
    let stress = [
        "stress",
        "--preset",
        "tiny",
        "--seed",
        "3",
        "--no-progress",
        "--io_size",
        "8m",
        "--html",
        html.to_str().unwrap(),
    ];
    assert_eq!(nandlab(&stress), 0);
    let page = std::fs::read_to_string(&html).unwrap();
    check_in_browser(&chromium, &page, dir.path()).expect("the real page passes");

    let script_error = page.replacen("</h1>", "</h1><script>drawChart(undefined.width)</script>", 1);
    let e = check_in_browser(&chromium, &script_error, dir.path()).unwrap_err();
    assert!(e.contains("Uncaught TypeError") || e.contains("console"), "{e}");

    let start = page.find("<svg").unwrap();
    let end = page[start..].find("</svg>").unwrap() + start + "</svg>".len();
    let empty = format!(
        "{}<svg width=\"640\" height=\"330\" xmlns=\"http://www.w3.org/2000/svg\"></svg>{}",
        &page[..start],
        &page[end..]
    );
    let e = check_in_browser(&chromium, &empty, dir.path()).unwrap_err();
    assert!(e.contains("has not drawn"), "{e}");

    let axes_only = format!(
        "{}<svg width=\"640\" height=\"330\" xmlns=\"http://www.w3.org/2000/svg\"><rect x=\"0\" y=\"0\" width=\"640\" \
         height=\"330\" fill=\"#FFFFFF\"/><polyline points=\"60,10 60,300 630,300\" stroke=\"#000000\" fill=\"none\"/></svg>{}",
        &page[..start],
        &page[end..]
    );
    let e = check_in_browser(&chromium, &axes_only, dir.path()).unwrap_err();
    assert!(e.contains("has not drawn"), "a frame without data is not a chart: {e}");
}
