//! One run's configuration, drawn from its seed (swarm testing).
//!
//! Swarm testing (Groce, Zhang, Eide, Chen and Regehr, "Swarm Testing",
//! ISSTA 2012) gives each test run a random *subset* of the features a
//! generator could use, instead of every feature at a fixed mix: a run
//! without trims writes over the same data far more, a run with only
//! 512-byte requests does nothing but read-modify-write, a run with a tiny
//! footprint makes garbage collection find victims full of valid pages.
//! Features suppress each other's effects when mixed; omitting some lets
//! the others reach deep. Here a feature is a part of the workload (sizes
//! below a page and unaligned, trims, flushes, a hot spot, a small
//! footprint), of the device (factory bad blocks, a different spare
//! share), of the FTL (each of its policies and caches drawn from the
//! values it offers) or of the run's structure (mid-run verification
//! passes, clean and unclean mount cycles, idle time).
//!
//! Every draw comes from its own stream derived from the run seed
//! ([`crate::seed::rng_for`]), so a [`Swarm`] is a function of the seed and
//! of the features switched off ([`Swarm::without`]): shrinking a finding
//! drops features one at a time and the others keep their values.

use crate::config::Config;
use crate::seed::{rng_for, Rng};
use rand::RngExt;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The features a run may have; shrinking drops them by these names
/// (`--without NAME,...`). FTL options are features `opt-KEY`.
pub const FEATURES: [&str; 13] = [
    "sub-page",
    "sequential-runs",
    "trims",
    "flushes",
    "hot-spot",
    "small-footprint",
    "bad-blocks",
    "spare",
    "verify-passes",
    "clean-mounts",
    "unclean-mounts",
    "idle",
    "power-cuts",
];

/// Draws that are not features but may be spliced from another seed
/// (guidance scales the workload with them): request sizes, the read
/// share, the written volume, and the workload's own streams (which
/// requests, where).
pub const STREAMS: [&str; 4] = ["sizes", "reads", "length", "workload"];

/// Per draw name (a feature, `opt-KEY` or one of [`STREAMS`]), the seed
/// whose stream it is drawn from instead of the run's: a guided run is a
/// corpus run with some draws taken from other seeds ([`super::guide`]).
/// A spliced feature is on whatever its coin says (unless switched off).
pub type Splice = BTreeMap<String, u64>;

/// Whether `name` can be spliced or switched off (`opt-KEY` for any key:
/// an option the FTL does not have is ignored).
pub fn known_draw(name: &str) -> bool {
    FEATURES.contains(&name) || STREAMS.contains(&name) || name.strip_prefix("opt-").is_some_and(|k| !k.is_empty())
}

/// Parse `--splice NAME=SEED,...` (names as [`known_draw`]).
pub fn parse_splice(text: &str) -> Result<Splice, String> {
    let mut out = Splice::new();
    for item in text.split(',').filter(|s| !s.is_empty()) {
        let (name, seed) = item.split_once('=').ok_or_else(|| format!("`{item}`: expected NAME=SEED"))?;
        if !known_draw(name) {
            return Err(format!(
                "`{item}`: unknown draw `{name}` (features: {}; opt-KEY; streams: {})",
                FEATURES.join(", "),
                STREAMS.join(", ")
            ));
        }
        let seed = seed.parse::<u64>().map_err(|e| format!("`{item}`: seed `{seed}`: {e}"))?;
        if out.insert(name.to_string(), seed).is_some() {
            return Err(format!("`{item}`: `{name}` given twice"));
        }
    }
    Ok(out)
}

/// What happens between two stretches of the workload.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// Read the whole logical space back and check it.
    Verify,
    /// Shut the FTL down cleanly, mount a fresh instance, verify.
    CleanMount,
    /// Flush, then lose power without a shutdown, mount a fresh instance
    /// (recovery from flash alone), verify.
    UncleanMount,
    /// Background work until the FTL has none.
    Idle,
    /// Cut the power in the middle of the next host request that issues
    /// flash operations: at its operation `nth` modulo their count, before
    /// it takes effect or `during` it (torn), as `crash` does; then mount
    /// a fresh instance and check the recovered disk by the crash rules
    /// (see [`super::execute`]).
    PowerCut { nth: u32, during: bool },
}

impl Event {
    pub fn name(self) -> &'static str {
        match self {
            Event::Verify => "verify",
            Event::CleanMount => "clean-mount",
            Event::UncleanMount => "unclean-mount",
            Event::Idle => "idle",
            Event::PowerCut { .. } => "power-cut",
        }
    }
}

/// One run's configuration. See the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Swarm {
    pub seed: u64,
    /// Host requests in the workload.
    pub requests: u64,
    /// Request sizes, in sectors, drawn uniformly in `min ..= max`.
    pub size_sectors_min: u32,
    pub size_sectors_max: u32,
    /// Offsets are multiples of this many sectors.
    pub align_sectors: u32,
    /// Shares of the requests, in percent (the rest are writes).
    pub read_percent: u32,
    pub trim_percent: u32,
    pub flush_percent: u32,
    /// Share of the requests, in percent, that start where the previous
    /// one ended (sequential runs inside a random workload).
    pub sequential_percent: u32,
    /// The logical sectors the workload touches, from LBA 0.
    pub footprint_sectors: u64,
    /// `hot_share_percent` of the requests go to the first
    /// `hot_space_percent` of the footprint.
    pub hot: Option<(u32, u32)>,
    pub bad_block_percent: f64,
    pub spare_percent: Option<f64>,
    /// FTL options set, in order.
    pub ftl_options: Vec<(String, toml::Value)>,
    /// What happens after request index `.0` (sorted).
    pub events: Vec<(u64, Event)>,
    /// The features switched off (shrinking).
    pub without: BTreeSet<String>,
    /// The draws taken from other seeds (guidance; empty for a swarm draw).
    pub splice: Splice,
    /// The features this run has.
    features: Vec<String>,
}

/// Values each shipped FTL's options are drawn from (the first is not
/// always the default: a feature is an option set to any of these).
/// Whether FTL `ftl` can be given feature `name` at all. A Jasmine
/// firmware (`jasmine:NAME`, as `hunt --ftl jasmine:DIR` names its target)
/// cannot be given factory bad blocks: it learns them from the scan list
/// the board's installer writes to block 0, and nandlab's Jasmine layer
/// writes that list empty (docs/jasmine.md, "Block 0"), so every run with
/// bad blocks would report the firmware erasing one (`bad_block`) as a
/// finding of the layer's making. Nor a different spare: the logical
/// capacity it serves is compiled in, and the layer refuses a device that
/// exports more. Nor trims: the Jasmine FTL API has none (the layer
/// refuses them, an `ftl_error` of its own).
///
/// Power cuts in the middle of an operation are drawn only for the shipped
/// FTLs: a library FTL or a Jasmine firmware states no crash guarantee of
/// its own here (`crash` tests those on request), and the Jasmine
/// firmwares format at every power-on (docs/jasmine.md).
fn honours(ftl: &str, name: &str) -> bool {
    let foreign = ftl.starts_with("jasmine:") || ftl.starts_with("lib:");
    !(ftl.starts_with("jasmine:") && matches!(name, "bad-blocks" | "spare" | "trims")
        || foreign && name == "power-cuts")
}

fn option_values(ftl: &str) -> Vec<(&'static str, Vec<toml::Value>)> {
    use toml::Value::{Boolean as B, Integer as I, String as S};
    let s = |v: &[&str]| v.iter().map(|x| S(x.to_string())).collect::<Vec<_>>();
    let data_plane = || {
        vec![
            ("gc_policy", s(&["greedy", "cost-benefit", "fifo", "random", "d-choices:2", "windowed-greedy:4"])),
            ("gc_stream", s(&["separate", "shared"])),
            ("copyback", vec![B(true), B(false)]),
            ("hot_cold", s(&["dac", "two-stream", "dac:2"])),
            ("wear_leveling", s(&["dynamic", "static:threshold=4"])),
            ("multi_plane", vec![B(true), B(false)]),
            ("gc_background_free_percent", vec![I(10), I(25)]),
        ]
    };
    match ftl {
        "page" => {
            let mut v = data_plane();
            v.push(("summary_pages", vec![B(true), B(false)]));
            v
        }
        "dftl" => {
            let mut v = data_plane();
            v.push(("cmt_bytes", s(&["1%", "3%", "10%"])));
            v.push(("cmt_replacement", s(&["segmented-lru", "lru"])));
            v
        }
        "hybrid" => vec![("random_log_blocks", vec![I(1), I(2), I(4), S("50%".into())]), ("copyback", vec![B(false)])],
        "block" => vec![("copyback", vec![B(false)])],
        "optr" => vec![("cache_pages", vec![I(8), I(32), I(128)]), ("gc_batch_blocks", vec![I(2), I(4)])],
        _ => Vec::new(),
    }
}

/// The keys of FTL `ftl`'s options a run may set (features `opt-KEY`).
pub fn option_keys(ftl: &str) -> Vec<&'static str> {
    option_values(ftl).into_iter().map(|(k, _)| k).collect()
}

/// The logical capacity of `config`'s device with `spare_percent` of its
/// raw sectors kept spare (as `device.spare_percent` computes it).
fn logical_sectors(config: &Config, spare_percent: f64) -> u64 {
    (config.geometry.raw_sectors() as f64 * (1.0 - spare_percent / 100.0)) as u64
}

/// Whether a feature is drawn: half of the runs have it (swarm testing's
/// coin per feature).
fn coin(rng: &mut Rng) -> bool {
    rng.random::<bool>()
}

impl Swarm {
    /// The configuration of run `seed` for FTL `ftl` on `config`'s
    /// device, with the features in `without` switched off and the workload
    /// cut at `requests` if given.
    pub fn draw(config: &Config, ftl: &str, seed: u64, without: &BTreeSet<String>, requests: Option<u64>) -> Swarm {
        Swarm::draw_spliced(config, ftl, seed, without, &Splice::new(), requests)
    }

    /// [`Swarm::draw`] with the draws of `splice` taken from other seeds.
    pub fn draw_spliced(
        config: &Config,
        ftl: &str,
        seed: u64,
        without: &BTreeSet<String>,
        splice: &Splice,
        requests: Option<u64>,
    ) -> Swarm {
        let mut features = Vec::new();
        let stream = |name: &str| rng_for(splice.get(name).copied().unwrap_or(seed), &format!("hunt.{name}"));
        // Each feature draws from its own stream: its coin first, then its
        // values, so switching one off leaves every other as it was.
        let mut feature = |name: &str| {
            let mut rng = stream(name);
            let on = (coin(&mut rng) || splice.contains_key(name)) && !without.contains(name) && honours(ftl, name);
            if on {
                features.push(name.to_string());
            }
            on.then_some(rng)
        };
        let pick = |r: &mut Rng, values: &[u32]| values[r.random_range(0..values.len())];
        let page_sectors = config.geometry.sectors_per_page();
        let spare_percent = feature("spare").map(|mut r| f64::from(pick(&mut r, &[12, 25, 40])));
        let logical = spare_percent.map_or(config.logical_sectors, |p| logical_sectors(config, p));

        let (size_sectors_min, size_sectors_max, align_sectors) = match feature("sub-page") {
            Some(mut r) => {
                let min = pick(&mut r, &[1, 1, 2, 3]);
                let max = min.max(pick(&mut r, &[1, 3, page_sectors + 1, 2 * page_sectors + 3]));
                (min, max, pick(&mut r, &[1, 1, 2]))
            }
            None => {
                let pages = pick(&mut stream("sizes"), &[1, 2, 4, 8]);
                (page_sectors, pages * page_sectors, page_sectors)
            }
        };
        let read_percent = pick(&mut stream("reads"), &[5, 20, 40]);
        let sequential_percent = feature("sequential-runs").map_or(0, |mut r| pick(&mut r, &[50, 80, 95]));
        let trim_percent = feature("trims").map_or(0, |mut r| pick(&mut r, &[1, 5, 15]));
        let flush_percent = feature("flushes").map_or(0, |mut r| pick(&mut r, &[1, 3]));
        let footprint_sectors = feature("small-footprint").map_or(logical, |mut r| {
            let percent = u64::from(pick(&mut r, &[5, 25, 60]));
            (logical * percent / 100).max(u64::from(4 * size_sectors_max)).min(logical)
        });
        let hot = feature("hot-spot").map(|mut r| (pick(&mut r, &[2, 10]), pick(&mut r, &[80, 95])));
        let bad_block_percent = feature("bad-blocks").map_or(0.0, |mut r| f64::from(pick(&mut r, &[1, 3])));
        let mut ftl_options = Vec::new();
        for (key, values) in option_values(ftl) {
            if let Some(mut r) = feature(&format!("opt-{key}")) {
                ftl_options.push((key.to_string(), values[r.random_range(0..values.len())].clone()));
            }
        }
        // The data plane refuses GC copies on the host's stream when a
        // hot/cold policy chooses their streams: keep the hot/cold draw.
        if ftl_options.iter().any(|(k, _)| k == "hot_cold") {
            ftl_options.retain(|(k, v)| !(k == "gc_stream" && v.as_str() == Some("shared")));
        }

        // Written volume: one to three times the footprint, so GC runs.
        let mean_size = f64::from(size_sectors_min + size_sectors_max) / 2.0;
        let write_share = f64::from(100 - read_percent - trim_percent - flush_percent) / 100.0;
        let times = pick(&mut stream("length"), &[1, 2, 3]);
        let volume = footprint_sectors as f64 * f64::from(times);
        let drawn = ((volume / mean_size / write_share) as u64).clamp(64, 400_000);
        let requests = requests.map_or(drawn, |n| n.min(drawn));

        let mut events = Vec::new();
        for (name, event, most) in [
            ("verify-passes", Event::Verify, 4u64),
            ("clean-mounts", Event::CleanMount, 3),
            ("unclean-mounts", Event::UncleanMount, 3),
            ("idle", Event::Idle, 4),
        ] {
            if let Some(mut r) = feature(name) {
                for _ in 0..r.random_range(1..=most) {
                    events.push((r.random_range(0..drawn), event));
                }
            }
        }
        // Its own feature after the others: drawing it changes no other draw.
        if let Some(mut r) = feature("power-cuts") {
            for _ in 0..r.random_range(1..=3u32) {
                let at = r.random_range(0..drawn);
                events.push((at, Event::PowerCut { nth: r.random(), during: r.random() }));
            }
        }
        events.retain(|(at, _)| *at < requests);
        events.sort();

        Swarm {
            seed,
            requests,
            size_sectors_min,
            size_sectors_max,
            align_sectors,
            read_percent,
            trim_percent,
            flush_percent,
            sequential_percent,
            footprint_sectors,
            hot,
            bad_block_percent,
            spare_percent,
            ftl_options,
            events,
            without: without.clone(),
            splice: splice.clone(),
            features,
        }
    }

    /// The device and FTL configuration of this run: `base` with the drawn
    /// device features and FTL options.
    pub fn apply(&self, base: &Config) -> Config {
        let mut config = base.clone();
        config.factory_bad_block_percent = self.bad_block_percent;
        if let Some(spare) = self.spare_percent {
            config.logical_sectors = logical_sectors(base, spare);
        }
        for (k, v) in &self.ftl_options {
            config.ftl_options.insert(k.clone(), v.clone());
        }
        config
    }

    /// The features this run has, in draw order (the ones shrinking may drop).
    pub fn features(&self) -> &[String] {
        &self.features
    }

    /// The whole configuration on one line (printed with every finding).
    pub fn describe(&self) -> String {
        let mut s = format!(
            "requests {}, sizes {}-{} sectors aligned to {}, mix read {}% trim {}% flush {}%, footprint {} sectors",
            self.requests,
            self.size_sectors_min,
            self.size_sectors_max,
            self.align_sectors,
            self.read_percent,
            self.trim_percent,
            self.flush_percent,
            self.footprint_sectors
        );
        if self.sequential_percent > 0 {
            let _ = write!(s, ", sequential {}%", self.sequential_percent);
        }
        if let Some((space, share)) = self.hot {
            let _ = write!(s, ", hot spot {share}% of requests to {space}% of it");
        }
        if self.bad_block_percent > 0.0 {
            let _ = write!(s, ", factory bad blocks {}%", self.bad_block_percent);
        }
        if let Some(p) = self.spare_percent {
            let _ = write!(s, ", spare {p}%");
        }
        for (k, v) in &self.ftl_options {
            let _ = write!(s, ", {k}={v}");
        }
        if !self.events.is_empty() {
            let events: Vec<String> = self.events.iter().map(|(at, e)| format!("{}@{at}", e.name())).collect();
            let _ = write!(s, ", events {}", events.join(" "));
        }
        s
    }
}
