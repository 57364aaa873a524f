//! Coverage guidance: new runs near the runs that reached new paths.
//!
//! A swarm campaign draws every run afresh; a bug behind a rare
//! combination (a map cache small enough to evict, *and* trims, *and* an
//! unclean mount) waits for a seed that draws all of it. Guidance keeps a
//! *corpus* of the runs that reached a (counter, bucket) pair no earlier
//! run had reached ([`super::coverage`]: the FTL's event counters, bucketed
//! by powers of two) and makes most new runs *mutations* of a corpus run,
//! as coverage-guided fuzzers do (AFL's queue; Zalewski, "american fuzzy
//! lop", technical whitepaper, 2014). A mutation keeps the corpus run's
//! seed and changes one to three of its draws:
//!
//! - switches a feature off, or forces one on with its values drawn from
//!   a fresh seed;
//! - re-draws the values of a feature it has (another GC policy, another
//!   map cache size, other positions of its mounts);
//! - re-draws a workload parameter: request sizes, the read share, the
//!   written volume (one to three times the footprint), or the workload's
//!   own request stream.
//!
//! A re-draw is a *splice* ([`Splice`]): the draw named is taken from
//! another seed's stream, so a guided run is still a function of what is
//! printed — `--seed S --splice NAME=SEED,... --without NAME,...` — and
//! shrinks like any other run. One run in four stays a fresh swarm draw
//! (seed `first_seed + index`, the unguided campaign's run at the same
//! index), so guidance never narrows the search to what the corpus holds.
//!
//! Runs go in batches of [`BATCH`]: a batch's configurations are chosen
//! from the corpus as it stood when the batch began, from a stream of
//! `first_seed` and the run's index, and its results are admitted in index
//! order, so `--runs N` gives the same campaign with any number of threads.
//! The corpus is kept on disk (`--corpus DIR`, one JSON file per entry)
//! and re-run first by the next campaign, which continues from it.

use super::coverage::Coverage;
use super::swarm::{known_draw, Splice, Swarm, FEATURES, STREAMS};
use crate::config::Config;
use crate::seed::{derive_seed, rng_for};
use rand::RngExt;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Runs per batch (see the module docs): small enough that a new corpus
/// entry is used soon, large enough to keep the threads busy.
pub const BATCH: u64 = 8;

/// The energy of an entry whose rarest pair one run reached.
const ENERGY_SCALE: u64 = 1 << 20;

/// A run's configuration as guidance handles it: its seed and what it
/// changes of that seed's draws.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Genes {
    pub seed: u64,
    #[serde(default)]
    pub splice: Splice,
    #[serde(default)]
    pub without: BTreeSet<String>,
}

impl Genes {
    pub fn fresh(seed: u64) -> Genes {
        Genes { seed, splice: Splice::new(), without: BTreeSet::new() }
    }

    pub fn of(swarm: &Swarm) -> Genes {
        Genes { seed: swarm.seed, splice: swarm.splice.clone(), without: swarm.without.clone() }
    }

    pub fn draw(&self, base: &Config, ftl: &str) -> Swarm {
        Swarm::draw_spliced(base, ftl, self.seed, &self.without, &self.splice, None)
    }

    /// Check the names (a corpus file or `--splice`).
    pub fn check(&self) -> Result<(), String> {
        for name in self.splice.keys().chain(&self.without) {
            if !known_draw(name) {
                return Err(format!("unknown draw `{name}`"));
            }
        }
        Ok(())
    }
}

/// Where a run's configuration came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A corpus entry loaded from disk, re-run.
    Loaded,
    /// A fresh swarm draw.
    Fresh,
    /// A mutation of corpus entry N.
    Mutated(usize),
}

/// One corpus entry: a run that reached pairs no earlier run had.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    #[serde(flatten)]
    pub genes: Genes,
    /// The pairs it reached first (when it was added).
    #[serde(default)]
    pub new_pairs: u64,
}

impl Entry {
    /// Parse a corpus file's text.
    pub fn parse(text: &str) -> Result<Entry, String> {
        let entry: Entry = serde_json::from_str(text).map_err(|e| e.to_string())?;
        entry.genes.check()?;
        Ok(entry)
    }

    /// The file name of the entry in a corpus directory: its seed and a
    /// hash of its draws (the same entry found twice is one file).
    pub fn file_name(&self) -> String {
        let text = serde_json::to_string(&self.genes).expect("serializes");
        format!("{}-{:016x}.json", self.genes.seed, derive_seed(self.genes.seed, &text))
    }
}

/// Guidance of a campaign: on, with the corpus it starts from.
#[derive(Clone, Debug, Default)]
pub struct Guided {
    /// Entries loaded from the corpus directory (re-run first).
    pub loaded: Vec<Entry>,
    /// Where new entries are written.
    pub dir: Option<PathBuf>,
}

/// Read every `*.json` entry of corpus directory `dir` (in name order);
/// a missing directory is an empty corpus.
pub fn load_corpus(dir: &Path) -> Result<Vec<Entry>, String> {
    let listing = match std::fs::read_dir(dir) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut paths: Vec<PathBuf> = listing
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Entry::parse(&text).map_err(|e| format!("{}: {e}", p.display()))
        })
        .collect()
}

/// What guidance did in a campaign (printed with the report).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GuideReport {
    pub loaded: usize,
    pub fresh_runs: u64,
    pub mutated_runs: u64,
    /// Entries added, each with the index of the run that added it, its
    /// origin and the pairs it reached first.
    pub added: Vec<(u64, Origin, Entry)>,
    /// The first failure to write an entry to the corpus directory.
    pub write_error: Option<String>,
}

/// The corpus during a campaign.
pub struct Corpus {
    pub entries: Vec<Entry>,
    /// Per entry, the (counter, bucket) pairs and edges its run reached
    /// (keys of `hits`; empty for an entry loaded and not yet re-run).
    reached: Vec<Vec<String>>,
    /// Per (counter, bucket) pair or edge, the runs of the campaign that
    /// reached it: its rarity.
    hits: BTreeMap<String, u64>,
    loaded: Vec<Entry>,
    dir: Option<PathBuf>,
    pub report: GuideReport,
}

impl Corpus {
    pub fn new(guided: &Guided) -> Corpus {
        Corpus {
            entries: Vec::new(),
            reached: Vec::new(),
            hits: BTreeMap::new(),
            loaded: guided.loaded.clone(),
            dir: guided.dir.clone(),
            report: GuideReport { loaded: guided.loaded.len(), ..Default::default() },
        }
    }

    /// The configuration of run `index` (see the module docs).
    pub fn next(&mut self, base: &Config, ftl: &str, first_seed: u64, index: u64) -> (Genes, Origin) {
        if let Some(e) = self.loaded.get(index as usize) {
            return (e.genes.clone(), Origin::Loaded);
        }
        let mut rng = rng_for(first_seed, &format!("hunt.guide.{index}"));
        if self.entries.is_empty() || rng.random_range(0..4) == 0 {
            self.report.fresh_runs += 1;
            return (Genes::fresh(first_seed.wrapping_add(index)), Origin::Fresh);
        }
        self.report.mutated_runs += 1;
        let parent = self.choose_parent(&mut rng);
        let mut genes = self.entries[parent].genes.clone();
        let has: BTreeSet<String> = genes.draw(base, ftl).features().iter().cloned().collect();
        let options: Vec<String> = super::swarm::option_keys(ftl).iter().map(|k| format!("opt-{k}")).collect();
        let features: Vec<&str> = FEATURES.iter().copied().chain(options.iter().map(String::as_str)).collect();
        for _ in 0..rng.random_range(1..=3) {
            let donor: u64 = rng.random();
            match rng.random_range(0..3) {
                // Toggle a feature.
                0 => {
                    let f = features[rng.random_range(0..features.len())];
                    if has.contains(f) && !genes.without.contains(f) {
                        genes.without.insert(f.to_string());
                        genes.splice.remove(f);
                    } else {
                        genes.without.remove(f);
                        genes.splice.insert(f.to_string(), donor);
                    }
                }
                // Re-draw the values of a feature the run has.
                1 if !has.is_empty() => {
                    let f = has.iter().nth(rng.random_range(0..has.len())).expect("in range");
                    if !genes.without.contains(f) {
                        genes.splice.insert(f.clone(), donor);
                    }
                }
                // Re-draw a workload parameter.
                _ => {
                    genes.splice.insert(STREAMS[rng.random_range(0..STREAMS.len())].to_string(), donor);
                }
            }
        }
        (genes, Origin::Mutated(parent))
    }

    /// The energy of corpus entry `e` (AFL's power schedule, by rarity as
    /// FairFuzz (Lemieux and Sen, ASE 2018) and AFLFast (Böhme et al.,
    /// CCS 2016) weigh it): inversely proportional to how many runs
    /// reached the rarest pair or edge it reached. An entry that alone
    /// reached a narrow group's lone page is mutated far more often than
    /// one whose pairs every run reaches.
    fn energy(&self, e: usize) -> u64 {
        let rarest = self.reached[e].iter().map(|k| self.hits.get(k).copied().unwrap_or(1)).min().unwrap_or(1);
        ENERGY_SCALE / rarest.max(1)
    }

    /// A parent for a mutation, drawn with probability proportional to
    /// its energy.
    fn choose_parent(&self, rng: &mut crate::seed::Rng) -> usize {
        let energies: Vec<u64> = (0..self.entries.len()).map(|e| self.energy(e)).collect();
        let mut pick = rng.random_range(0..energies.iter().sum::<u64>().max(1));
        for (e, &w) in energies.iter().enumerate() {
            if pick < w {
                return e;
            }
            pick -= w;
        }
        self.entries.len() - 1
    }

    /// Count what run `index` reached (every run, for rarity), and admit it
    /// if it reached `new_pairs` > 0 pairs first.
    pub fn admit(&mut self, index: u64, origin: Origin, genes: Genes, new_pairs: u64, run: &Coverage) {
        let keys = run.reached_keys();
        for k in &keys {
            *self.hits.entry(k.clone()).or_default() += 1;
        }
        if new_pairs == 0 || origin == Origin::Loaded && self.entries.iter().any(|e| e.genes == genes) {
            return;
        }
        self.reached.push(keys);
        let entry = Entry { genes, new_pairs };
        if let Some(dir) = &self.dir {
            let text = serde_json::to_string_pretty(&entry).expect("serializes") + "\n";
            let path = dir.join(entry.file_name());
            if let Err(e) = std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, text)) {
                self.report.write_error.get_or_insert(format!("{}: {e}", path.display()));
            }
        }
        self.entries.push(entry.clone());
        self.report.added.push((index, origin, entry));
    }
}

/// The pairs of `run` that `seen` does not have.
pub fn novel_pairs(seen: &Coverage, run: &Coverage) -> u64 {
    run.0
        .iter()
        .map(|(name, buckets)| match seen.0.get(name) {
            Some(had) => buckets.difference(had).count() as u64,
            None => buckets.len() as u64,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_entries_parse_and_bad_ones_name_the_reason() {
        let e =
            Entry::parse(r#"{"seed": 5, "splice": {"trims": 9, "opt-gc_policy": 3}, "without": ["idle"]}"#).unwrap();
        assert_eq!(e.genes.seed, 5);
        assert_eq!(e.genes.splice["trims"], 9);
        assert!(e.genes.without.contains("idle"));
        assert!(Entry::parse(r#"{"seed": 5, "splice": {"gravity": 1}}"#).unwrap_err().contains("gravity"));
        assert!(Entry::parse(r#"{"seed": -1}"#).is_err());
        assert!(Entry::parse(r#"{"seed": 1, "colour": 2}"#).unwrap_err().contains("colour"));
        let again = Entry::parse(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(again, e);
        assert!(e.file_name().starts_with("5-") && e.file_name().ends_with(".json"));
    }

    #[test]
    fn a_mutation_keeps_the_seed_and_is_a_function_of_the_index() {
        let c = Config::preset("tiny").unwrap();
        let guided = Guided::default();
        let mut a = Corpus::new(&guided);
        assert_eq!(a.next(&c, "dftl", 1, 0), (Genes::fresh(1), Origin::Fresh));
        a.admit(0, Origin::Fresh, Genes::fresh(1), 10, &Coverage::new());
        let mut b = Corpus::new(&guided);
        b.admit(0, Origin::Fresh, Genes::fresh(1), 10, &Coverage::new());
        let mut mutated = 0;
        for i in 1..40 {
            let (ga, oa) = a.next(&c, "dftl", 1, i);
            assert_eq!((ga.clone(), oa), b.next(&c, "dftl", 1, i));
            if oa == Origin::Mutated(0) {
                mutated += 1;
                assert_eq!(ga.seed, 1);
                assert!(!ga.splice.is_empty() || !ga.without.is_empty(), "a mutation changes a draw");
                assert_ne!(ga.draw(&c, "dftl"), Genes::fresh(1).draw(&c, "dftl"));
            } else {
                assert_eq!(ga, Genes::fresh(1 + i));
            }
        }
        assert!(mutated > 20, "three runs in four are mutations: {mutated}");
    }

    /// The power schedule: an entry that alone reached a pair is chosen as
    /// a parent far more often than entries whose pairs every run reaches.
    #[test]
    fn a_parent_that_reached_a_rare_pair_gets_more_mutations() {
        let c = Config::preset("tiny").unwrap();
        let mut corpus = Corpus::new(&Guided::default());
        let mut common = Coverage::new();
        common.0.insert("gc_runs".into(), BTreeSet::from([3]));
        let mut rare = common.clone();
        rare.0.insert("path:gc_narrow_victim_one_valid".into(), BTreeSet::from([1]));
        for seed in 1..=8 {
            corpus.admit(seed, Origin::Fresh, Genes::fresh(seed), 1, &common);
        }
        corpus.admit(9, Origin::Fresh, Genes::fresh(9), 1, &rare);
        let mut from_rare = 0;
        let mut mutated = 0;
        for i in 10..210 {
            if let (g, Origin::Mutated(p)) = corpus.next(&c, "page", 1, i) {
                mutated += 1;
                if p == 8 {
                    from_rare += 1;
                    assert_eq!(g.seed, 9);
                }
            }
        }
        // Energies: 8 entries of 2^20/9, one of 2^20: the rare one about half.
        assert!(from_rare * 3 > mutated, "{from_rare} of {mutated} mutations from the rare entry");
    }

    #[test]
    fn novel_pairs_count_what_was_not_seen() {
        let mut seen = Coverage::new();
        seen.0.insert("gc_runs".into(), BTreeSet::from([0, 3]));
        let mut run = Coverage::new();
        run.0.insert("gc_runs".into(), BTreeSet::from([3, 4]));
        run.0.insert("evictions".into(), BTreeSet::from([1]));
        assert_eq!(novel_pairs(&seen, &run), 2);
        assert_eq!(novel_pairs(&run, &run), 0);
    }
}
