//! The coverage signal of a hunt: which of the FTL's event counters a
//! run moved, and how far, bucketed by powers of two.
//!
//! A cheap, deterministic stand-in for code coverage (the issue's "at
//! least, event counters the FTL reports"): every FTL reports counters in
//! [`crate::ftl::Ftl::stats`] (GC runs, merges of each kind, map-cache
//! evictions and write-backs, read-modify-write reads, wear-leveling moves,
//! mount scans, …). A (counter, bucket) pair is reached when a counter ends
//! an FTL instance's life (before each mount, at a finding, at the end of
//! the run) with a value in the bucket: 0, 1, 2-3, 4-7, … (AFL buckets
//! its edge hit counts in the same spirit, coarser above 8). A counter whose only bucket is 0 never moved: the
//! campaign never took the FTL down that path. The free blocks and the
//! DRAM taken are left out (they say how full the device is, not which
//! path ran), as are non-integer figures; other levels an FTL reports
//! (`dftl`'s cache entries) are bucketed like counts.
//!
//! Guidance ([`super::guide`]) keeps the runs that reached new pairs and
//! makes new runs from them.

use crate::ftl::FtlStats;
use std::collections::{BTreeMap, BTreeSet};

/// Per counter, the buckets reached (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Coverage(pub BTreeMap<String, BTreeSet<u8>>);

/// The name prefix of a path counter, and the separator of an edge's two
/// counters (`path:gc_narrow_victim_one_valid&gc_runs`).
pub const PATH: &str = "path:";
pub const EDGE: char = '&';

/// Figures of [`FtlStats::extra`] that are levels, not event counts.
const LEVELS: [&str; 2] = ["free_blocks", "dram_bytes"];

/// The bucket of a count: 0 for 0, else 1 + floor(log2(count)).
pub fn bucket(count: u64) -> u8 {
    (64 - count.leading_zeros()) as u8
}

impl Coverage {
    pub fn new() -> Coverage {
        Coverage::default()
    }

    /// Add the pairs an FTL instance's statistics and path counters reach
    /// ([`crate::ftl::Ftl::paths`]), and its *edges*: for each path counter
    /// that moved, every other counter that moved in the same instance
    /// (`path:A&B`, bucket 1). An edge is a combination, and a combination
    /// is what the rare bugs need (a lone valid page *and* a narrow group;
    /// an eviction of a trimmed entry *and* a mount after it).
    pub fn add_instance(&mut self, stats: &FtlStats, paths: &[(&'static str, u64)]) {
        let mut instance = Coverage::new();
        instance.add(stats);
        for &(name, count) in paths {
            instance.reach(&format!("{PATH}{name}"), count);
        }
        let moved: Vec<&String> = instance.0.iter().filter(|(_, b)| b.iter().any(|&k| k > 0)).map(|(n, _)| n).collect();
        let mut edges = Vec::new();
        for a in moved.iter().filter(|n| n.starts_with(PATH)) {
            for b in moved.iter().filter(|b| *b != a) {
                edges.push(format!("{a}{EDGE}{}", b.strip_prefix(PATH).unwrap_or(b)));
            }
        }
        self.merge(instance);
        for e in edges {
            self.0.entry(e).or_default().insert(1);
        }
    }

    /// Add the pairs `stats` reaches.
    pub fn add(&mut self, stats: &FtlStats) {
        self.reach("gc_runs", stats.gc_runs);
        for &(name, count) in &stats.mount {
            self.reach(name, count);
        }
        for (name, value) in &stats.extra {
            if LEVELS.contains(&name.as_str()) {
                continue;
            }
            match value {
                serde_json::Value::Number(n) => {
                    if let Some(count) = n.as_u64() {
                        self.reach(name, count);
                    }
                }
                serde_json::Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        if let Some(count) = item.as_u64() {
                            self.reach(&format!("{name}[{i}]"), count);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn reach(&mut self, name: &str, count: u64) {
        self.0.entry(name.to_string()).or_default().insert(bucket(count));
    }

    /// Merge another run's coverage in.
    pub fn merge(&mut self, other: Coverage) {
        for (name, buckets) in other.0 {
            self.0.entry(name).or_default().extend(buckets);
        }
    }

    /// (counter, bucket) pairs reached with a count above zero.
    pub fn pairs_moved(&self) -> usize {
        self.counters().map(|(_, b)| b.iter().filter(|&&k| k > 0).count()).sum()
    }

    /// Every counter that moved and every edge (guidance counts how many
    /// runs reach each: its rarity). Whether, not how far: a high bucket
    /// is rare because few runs are long, and rewarding it favours long
    /// runs, not new paths.
    pub fn reached_keys(&self) -> Vec<String> {
        self.0.iter().filter(|(_, b)| b.iter().any(|&k| k > 0)).map(|(n, _)| n.clone()).collect()
    }

    /// Edges reached (see [`Coverage::add_instance`]).
    pub fn edges(&self) -> usize {
        self.0.keys().filter(|n| n.contains(EDGE)).count()
    }

    /// The counters, without the edges.
    fn counters(&self) -> impl Iterator<Item = (&String, &BTreeSet<u8>)> {
        self.0.iter().filter(|(n, _)| !n.contains(EDGE))
    }

    /// Counters that never moved (reported, but always zero).
    pub fn never_moved(&self) -> Vec<&str> {
        self.counters().filter(|(_, b)| b.iter().all(|&k| k == 0)).map(|(n, _)| n.as_str()).collect()
    }

    /// `name: lowest..highest count reached` for every counter that moved,
    /// as counts: `gc_runs 0-2^9` (the highest bucket's lower bound).
    pub fn describe_moved(&self) -> Vec<String> {
        self.counters()
            .filter_map(|(name, b)| {
                let top = *b.iter().next_back()?;
                (top > 0).then(|| format!("{name} ({} buckets, up to {})", b.len(), 1u64 << (top - 1)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        let got: Vec<u8> = [0u64, 1, 2, 3, 4, 7, 8, 1 << 40].iter().map(|&c| bucket(c)).collect();
        assert_eq!(got, vec![0, 1, 2, 2, 3, 3, 4, 41]);
    }

    #[test]
    fn counters_levels_and_arrays() {
        let mut stats = FtlStats { gc_runs: 5, ..Default::default() };
        stats.extra.insert("free_blocks".into(), serde_json::json!(9));
        stats.extra.insert("evictions".into(), serde_json::json!(0));
        stats.extra.insert("stream_pages".into(), serde_json::json!([3, 0]));
        stats.extra.insert("waf".into(), serde_json::json!(1.5));
        stats.extra.insert("policy".into(), serde_json::json!("greedy"));
        let mut c = Coverage::new();
        c.add(&stats);
        let names: Vec<&String> = c.0.keys().collect();
        assert_eq!(names, ["evictions", "gc_runs", "stream_pages[0]", "stream_pages[1]"]);
        assert_eq!(c.never_moved(), ["evictions", "stream_pages[1]"]);
        assert_eq!(c.pairs_moved(), 2);
        let mut later = Coverage::new();
        later.add(&FtlStats { gc_runs: 100, ..Default::default() });
        c.merge(later);
        assert_eq!(c.0["gc_runs"], BTreeSet::from([3, 7]));
        assert_eq!(c.describe_moved()[0], "gc_runs (2 buckets, up to 64)");
    }

    #[test]
    fn edges_pair_a_path_counter_with_every_other_counter_that_moved_with_it() {
        let stats = FtlStats { gc_runs: 5, ..Default::default() };
        let mut c = Coverage::new();
        c.add_instance(&stats, &[("gc_narrow_victim", 2), ("wl_move_narrow", 0)]);
        assert_eq!(c.0["path:gc_narrow_victim"], BTreeSet::from([2]));
        assert_eq!(c.0["path:wl_move_narrow"], BTreeSet::from([0]));
        assert_eq!(c.edges(), 1);
        assert!(c.0.contains_key("path:gc_narrow_victim&gc_runs"), "{c:?}");
        assert_eq!(c.never_moved(), ["path:wl_move_narrow"]);
        assert_eq!(c.reached_keys(), ["gc_runs", "path:gc_narrow_victim", "path:gc_narrow_victim&gc_runs"]);
    }
}
