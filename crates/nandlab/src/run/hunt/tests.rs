//! Tests of `hunt`: every kind of finding is proven by a broken FTL that
//! produces it, and the correct FTL passes the same runs.

use super::execute::{self, Outcome};
use super::swarm::Swarm;
use super::*;
use crate::ftl::write_hooked::WriteHooked;
use crate::ftl::{Ftl, FtlError, IoRequest};
use std::collections::BTreeSet;

fn tiny() -> Config {
    Config::preset("tiny").unwrap()
}

fn opts(runs: u64) -> HuntOptions {
    HuntOptions {
        first_seed: 1,
        runs: Runs::Count(runs),
        jobs: 2,
        shrink: false,
        stop_at_first: false,
        stop: StopFlag::default(),
        guided: None,
    }
}

/// What the sabotaged FTL does after its `after` host writes.
#[derive(Copy, Clone)]
enum Sabotage {
    Panic,
    /// `FtlError::NoSpace` whose message does not say "no free space" (as
    /// a library FTL's need not).
    NoSpace,
    /// An error of another code whose message says "no free space".
    OtherSayingNoSpace,
}

fn sabotaged(after: u64, sabotage: Sabotage) -> Target {
    Target {
        ftl: "page".into(),
        mutant: Mutant::None,
        factory: Box::new(move |c: &Config| {
            let options = c.ftl_options.clone();
            Box::new(move |env| {
                let inner = crate::ftl::build("page", env, &options)?;
                // The page FTL, sabotaged after `after` host writes.
                let mut writes = 0u64;
                let hook = move |req: &IoRequest| {
                    writes += 1;
                    (writes > after).then(|| match sabotage {
                        Sabotage::Panic => panic!("sabotaged: write {writes} of LBA {}", req.lba),
                        Sabotage::NoSpace => FtlError::NoSpace("sabotaged".into()),
                        Sabotage::OtherSayingNoSpace => FtlError::Other { code: 900, message: "no free space".into() },
                    })
                };
                Ok(Box::new(WriteHooked { inner, hook }) as Box<dyn Ftl>)
            })
        }),
        executor: None,
    }
}

#[test]
fn a_swarm_is_a_function_of_its_seed_and_dropping_a_feature_keeps_the_others() {
    let c = tiny();
    let none = BTreeSet::new();
    let a = Swarm::draw(&c, "page", 7, &none, None);
    assert_eq!(a, Swarm::draw(&c, "page", 7, &none, None));
    let different = (1..20).any(|s| Swarm::draw(&c, "page", s, &none, None).features() != a.features());
    assert!(different, "seeds draw different feature sets");
    let dropped = a.features()[0].clone();
    let without: BTreeSet<String> = [dropped.clone()].into();
    let b = Swarm::draw(&c, "page", 7, &without, None);
    assert!(!b.features().contains(&dropped));
    let kept: Vec<&String> = a.features().iter().filter(|f| **f != dropped).collect();
    assert_eq!(b.features().iter().collect::<Vec<_>>(), kept);
}

#[test]
fn a_panic_in_the_ftl_is_an_ftl_panic_finding_with_its_location() {
    let c = tiny();
    let swarm = Swarm::draw(&c, "page", 5, &BTreeSet::new(), None);
    let Outcome::Found(f) = execute::run(&c, &sabotaged(50, Sabotage::Panic), &swarm) else { panic!("no finding") };
    assert_eq!(f.rule, "ftl_panic");
    assert!(f.message.starts_with("sabotaged: write 51"), "{}", f.message);
    assert!(f.location.as_deref().is_some_and(|l| l.contains("hunt/tests.rs")), "{:?}", f.location);
    assert!(f.phase.starts_with("request "), "{}", f.phase);
    assert_eq!(execute::run(&c, &Target::shipped("page", Mutant::None).unwrap(), &swarm), Outcome::Clean);
}

#[test]
fn no_space_inside_the_stated_capacity_is_ftl_out_of_space() {
    let c = tiny();
    let swarm = Swarm::draw(&c, "page", 5, &BTreeSet::new(), None);
    let outcome = execute::run(&c, &sabotaged(50, Sabotage::NoSpace), &swarm);
    let Outcome::Found(f) = outcome else { panic!("no finding: {outcome:?}") };
    assert_eq!(f.rule, "ftl_out_of_space");
    // Classified by the error's code, not its text: an error of another
    // code saying "no free space" is an FTL error.
    let other = sabotaged(50, Sabotage::OtherSayingNoSpace);
    let Outcome::Found(f) = execute::run(&c, &other, &swarm) else { panic!("no finding") };
    assert_eq!(f.rule, "ftl_error", "{}", f.message);
    assert!(f.message.contains("no free space"), "{}", f.message);
}

#[test]
fn a_hunt_finds_a_realistic_mutant_and_shrinks_it_and_the_correct_ftl_passes_the_same_runs() {
    let c = tiny();
    let target = Target::shipped("page", Mutant::RmwAtWrongOffset).unwrap();
    let report = campaign(&c, &target, &HuntOptions { shrink: true, ..opts(8) });
    // One bug, seen as two rules (a read of the misplaced sectors, a read
    // of the sectors they overwrote): findings are grouped by rule.
    let rules: Vec<&str> = report.groups.iter().map(|g| g.first.rule.as_str()).collect();
    assert_eq!(rules, ["lost_write", "misdirected_read"]);
    let g = &report.groups[0];
    let shrunk = g.shrunk.as_ref().unwrap();
    assert!(shrunk.swarm.requests <= g.first.request_index + 1);
    assert!(shrunk.swarm.features().len() < g.swarm.features().len());
    let again = execute::run(&c, &target, &shrunk.swarm);
    assert!(matches!(again, Outcome::Found(f) if f.rule == g.first.rule));

    let clean = campaign(&c, &Target::shipped("page", Mutant::None).unwrap(), &opts(8));
    assert!(clean.groups.is_empty(), "{:?}", clean.groups);
    assert_eq!(clean.runs, 8);
}

#[test]
fn the_report_is_the_same_with_one_thread_or_two() {
    let c = tiny();
    let target = Target::shipped("dftl", Mutant::GcSkipsLastValidPage).unwrap();
    let one = campaign(&c, &target, &HuntOptions { jobs: 1, ..opts(6) });
    let two = campaign(&c, &target, &HuntOptions { jobs: 2, ..opts(6) });
    let key = |r: &HuntReport| r.groups.iter().map(|g| (g.first.clone(), g.seeds.clone())).collect::<Vec<_>>();
    assert!(!one.groups.is_empty());
    assert_eq!(key(&one), key(&two));
    assert_eq!(one.coverage, two.coverage, "coverage is a function of the runs");
}

/// The coverage report names the counters the runs moved (GC ran) and
/// those they never did (only bucket 0), each counter in one list.
#[test]
fn coverage_lists_the_counters_runs_moved_and_those_they_never_did() {
    let c = tiny();
    let report = campaign(&c, &Target::shipped("dftl", Mutant::None).unwrap(), &opts(6));
    let cov = &report.coverage;
    assert!(cov.0["gc_runs"].iter().any(|&b| b > 0), "{cov:?}");
    assert!(cov.pairs_moved() > 5, "{cov:?}");
    let never = cov.never_moved();
    for name in &never {
        assert_eq!(cov.0[*name], BTreeSet::from([0]), "{name}");
    }
    let moved = cov.describe_moved().len();
    assert_eq!(moved + never.len(), cov.0.len() - cov.edges(), "every counter is moved or never moved");
    // The FTL's path counters are there too, and edges of the ones that moved.
    assert!(cov.0.keys().any(|k| k.starts_with(coverage::PATH) && !k.contains(coverage::EDGE)), "{cov:?}");
    assert!(cov.edges() > 0, "{cov:?}");
}

/// `trusts-torn-page` (recovery maps a page on its OOB alone) is a bug only
/// a power cut in the middle of a program shows: hunt's flushes and
/// unclean mounts never tear anything. A run whose swarm draws a cut finds
/// it after recovery; the same run without the cut, and the correct FTL
/// with the cut, are clean.
#[test]
fn a_power_cut_inside_a_request_finds_a_bug_only_a_torn_program_shows_and_the_correct_ftl_recovers() {
    let c = tiny();
    let without: BTreeSet<String> =
        ["clean-mounts", "opt-hot_cold", "opt-wear_leveling", "sequential-runs", "spare", "trims"]
            .map(String::from)
            .into();
    let swarm = Swarm::draw(&c, "page", 1, &without, Some(671));
    assert!(swarm.events.iter().any(|(_, e)| matches!(e, swarm::Event::PowerCut { .. })), "{}", swarm.describe());
    for ftl in ["page", "hybrid"] {
        let mut c = tiny();
        c.ftl_options.clear(); // the preset's are the page FTL's
        let swarm = Swarm::draw(&c, ftl, 1, &without, Some(671));
        let broken = Target::shipped(ftl, Mutant::TrustsTornPage).unwrap();
        let outcome = execute::run(&c, &broken, &swarm);
        let Outcome::Found(f) = outcome else { panic!("{ftl}: no finding: {outcome:?}") };
        assert!(f.phase.starts_with("recovery from a power cut during request"), "{ftl}: {}", f.phase);
        assert!(f.message.contains("after recovery"), "{ftl}: {}", f.message);
        let mut no_cut = without.clone();
        no_cut.insert("power-cuts".into());
        let uncut = Swarm::draw(&c, ftl, 1, &no_cut, Some(671));
        assert_eq!(execute::run(&c, &broken, &uncut), Outcome::Clean, "{ftl}: the bug needs the cut");
        let correct = Target::shipped(ftl, Mutant::None).unwrap();
        assert_eq!(execute::run(&c, &correct, &swarm), Outcome::Clean, "{ftl}");
    }
}

/// A guided campaign is a function of its options, whatever the threads:
/// the corpus grows from runs that reached new pairs, mutated runs carry
/// their splices, and every finding repeats from its printed draws.
#[test]
fn a_guided_campaign_is_the_same_with_one_thread_or_two_and_its_findings_repeat() {
    let c = tiny();
    let target = Target::shipped("dftl", Mutant::FirstWriteBackNotRecorded).unwrap();
    let guided = HuntOptions { guided: Some(guide::Guided::default()), ..opts(24) };
    let one = campaign(&c, &target, &HuntOptions { jobs: 1, ..guided.clone() });
    let two = campaign(&c, &target, &guided);
    let key = |r: &HuntReport| r.groups.iter().map(|g| (g.first.clone(), g.swarm.clone())).collect::<Vec<_>>();
    assert_eq!(key(&one), key(&two));
    assert_eq!(one.coverage, two.coverage);
    let g1 = one.guide.as_ref().unwrap();
    assert_eq!(g1, two.guide.as_ref().unwrap());
    assert!(g1.mutated_runs > 0 && g1.added.len() > 1, "{g1:?}");
    assert!(g1.added.iter().any(|(_, o, _)| matches!(o, guide::Origin::Mutated(_))), "{g1:?}");
    assert!(!one.groups.is_empty());
    for g in &one.groups {
        let again = Swarm::draw_spliced(&c, "dftl", g.swarm.seed, &g.swarm.without, &g.swarm.splice, None);
        assert!(matches!(execute::run(&c, &target, &again), Outcome::Found(f) if f.rule == g.first.rule));
    }
    let clean = campaign(&c, &Target::shipped("dftl", Mutant::None).unwrap(), &guided);
    assert!(clean.groups.is_empty(), "{:?}", clean.groups);
}

/// Hunt's two `ftl_out_of_space` findings on the unmodified page-mapped
/// FTLs, as shrunk (power cuts and mounts, then a unit whose GC victim had
/// nowhere to go): a group taken without collecting first (page's
/// checkpoint at the clean shutdown; a dftl translation page written inside
/// another unit's GC cycle) had left the unit only a narrow free group.
/// Before the fix both runs found `ftl_out_of_space`; each must now be clean.
#[test]
fn the_shrunk_out_of_space_findings_after_power_cuts_run_clean() {
    let cases: [(&str, u64, &[&str], u64); 2] = [
        ("page", 1199, &["opt-gc_background_free_percent", "opt-gc_stream", "verify-passes"], 24237),
        ("dftl", 642, &["opt-copyback", "opt-gc_background_free_percent", "opt-gc_stream", "opt-multi_plane"], 10584),
    ];
    for (ftl, seed, without, requests) in cases {
        let mut c = tiny();
        if ftl != "page" {
            c.ftl_options.clear(); // the preset's are the page FTL's
        }
        let without: BTreeSet<String> = without.iter().map(|s| s.to_string()).collect();
        let swarm = Swarm::draw(&c, ftl, seed, &without, Some(requests));
        let described = swarm.describe();
        assert!(described.contains("power-cut@") && described.contains("-mount@"), "{ftl}: {described}");
        let correct = Target::shipped(ftl, Mutant::None).unwrap();
        assert_eq!(execute::run(&c, &correct, &swarm), Outcome::Clean, "{ftl} seed {seed}: {described}");
    }
}
