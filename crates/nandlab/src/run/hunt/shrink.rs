//! Shrinking a finding across its configuration and its workload.
//!
//! As `crash` shrinks a finding to the earliest power cut that fails the
//! same way, a hunt finding is shrunk to the smallest run that still fires
//! the same rule: first the workload is cut just after the request where
//! the finding appeared (later requests cannot have caused it), then each
//! feature of the run's [`Swarm`] is switched off in turn — a feature whose
//! removal keeps the rule firing is left off, and the workload is cut
//! again at the (possibly earlier) new finding — and last the workload is
//! halved while the rule still fires. Each step is one deterministic run,
//! so the result is a function of the finding, and it is printed as a
//! command (`--seed S --requests N --without a,b,...`, with the
//! `--splice` of a guided run).

use super::coverage::Coverage;
use super::execute::Outcome;
use super::swarm::Swarm;
use super::Target;
use crate::config::Config;
use std::collections::BTreeSet;

/// A shrunk finding: the smallest configuration found and its runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Shrunk {
    pub swarm: Swarm,
    /// Runs the shrinker made.
    pub runs: u32,
}

/// Shrink the finding of rule `rule` that `swarm` produced at request
/// `request_index`.
pub fn shrink(base: &Config, target: &Target, swarm: &Swarm, rule: &str, request_index: u64) -> Shrunk {
    let mut runs = 0;
    let mut fires = |without: &BTreeSet<String>, requests: u64| -> Option<(Swarm, u64)> {
        runs += 1;
        let candidate = Swarm::draw_spliced(base, &target.ftl, swarm.seed, without, &swarm.splice, Some(requests));
        match target.run(base, &candidate, &mut Coverage::new()) {
            Outcome::Found(f) if f.rule == rule => Some((candidate, f.request_index)),
            _ => None,
        }
    };
    let mut best = swarm.clone();
    let mut at = request_index;
    if let Some((s, i)) = fires(&best.without, at + 1) {
        (best, at) = (s, i);
    }
    for feature in swarm.features().to_vec() {
        let mut without = best.without.clone();
        without.insert(feature);
        if let Some((s, i)) = fires(&without, at + 1) {
            (best, at) = (s, i);
        }
    }
    let mut requests = at / 2;
    while requests > 0 {
        match fires(&best.without, requests) {
            Some((s, i)) => {
                (best, at) = (s, i);
                requests = at / 2;
            }
            None => break,
        }
    }
    Shrunk { swarm: best, runs }
}
