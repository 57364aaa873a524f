//! Flows of a timed run as `perf --flow` writes them: one flow is a job
//! description and how its requests arrive.
//!
//! - `KEY=VALUE,...` with fio's option names (`rw=randread,iodepth=16`)
//!   sets fields of the run's synthetic workload for this flow only; the
//!   fields are those of [`SyntheticSpec`] and are checked by it (the
//!   counts are read as numbers, every other value as text, as in a
//!   `[workload]` table).
//!   `arrival=…` ([`parse_arrival`]) says how its requests arrive; without
//!   it the flow arrives as the run does, a closed loop taking the flow's
//!   own `iodepth`.
//! - `trace=FILE[,arrival=…]` replays a trace beside the others, open loop
//!   at its own timestamps unless `arrival=` says otherwise. How the trace
//!   is read and transformed is the run's business (the CLI's `--trace-*`
//!   options), not the flow's.
//!
//! Parsing builds only these descriptions; the run turns them into
//! workloads.

use super::arrival::{parse_arrival, Arrival};
use crate::workload::synthetic::SyntheticSpec;
use std::path::PathBuf;

/// One `--flow`.
#[derive(Clone, Debug, PartialEq)]
pub enum FlowSpec {
    /// A synthetic job: the run's workload with this flow's fields set.
    /// `arrival` `None`: a closed loop at `spec.iodepth`.
    Synthetic { spec: SyntheticSpec, arrival: Option<Arrival> },
    /// A trace replayed beside the other flows.
    Trace { path: PathBuf, arrival: Arrival },
}

/// The file of a `trace=FILE,...` flow, if the flow is a trace.
pub fn trace_path(text: &str) -> Option<&str> {
    text.split(',').find_map(|part| part.trim().strip_prefix("trace=")).map(str::trim)
}

/// Parse `--flow text` over the run's workload `base`. A synthetic flow
/// without `arrival=` takes the run's `default_arrival` (its closed loop
/// at the flow's own `iodepth`). Errors start with `--flow`.
pub fn parse_flow(text: &str, base: &SyntheticSpec, default_arrival: Option<Arrival>) -> Result<FlowSpec, String> {
    if trace_path(text).is_some() {
        return parse_trace_flow(text);
    }
    let mut table = match toml::Value::try_from(base).map_err(|e| e.to_string())? {
        toml::Value::Table(t) => t,
        _ => unreachable!("specs serialise as tables"),
    };
    let mut arrival_text = None;
    for part in parts(text) {
        let (k, v) = part.split_once('=').ok_or_else(|| format!("--flow `{text}`: `{part}` is not KEY=VALUE"))?;
        let (k, v) = (k.trim(), v.trim());
        if k == "arrival" {
            arrival_text = Some(v.to_string());
            continue;
        }
        let value = match k {
            "iodepth" | "numjobs" | "rwmixread" | "fsync" => {
                toml::Value::Integer(v.parse().map_err(|_| format!("--flow `{text}`: {k} must be a whole number"))?)
            }
            "trim_percent" => {
                toml::Value::Float(v.parse().map_err(|_| format!("--flow `{text}`: {k} must be a number"))?)
            }
            _ => toml::Value::String(v.to_string()),
        };
        table.insert(k.to_string(), value);
    }
    let spec: SyntheticSpec = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| format!("--flow `{text}`: {}", e.message().trim()))?;
    let arrival = match arrival_text {
        Some(a) => Some(parse_arrival(&a, spec.iodepth).map_err(|e| format!("--flow {e}"))?),
        None => default_arrival.map(|a| match a {
            Arrival::Closed { .. } => Arrival::Closed { iodepth: spec.iodepth },
            other => other,
        }),
    };
    Ok(FlowSpec::Synthetic { spec, arrival })
}

/// `trace=FILE[,arrival=…]`.
fn parse_trace_flow(text: &str) -> Result<FlowSpec, String> {
    let mut path = PathBuf::new();
    let mut arrival = None;
    for part in parts(text) {
        match part.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("trace", v)) => path = PathBuf::from(v),
            Some(("arrival", v)) => {
                arrival = Some(parse_arrival(v, 1).map_err(|e| format!("--flow `{text}`: {e}"))?);
            }
            _ => {
                return Err(format!("--flow `{text}`: a trace flow takes only trace=FILE and arrival=…, not `{part}`"))
            }
        }
    }
    Ok(FlowSpec::Trace { path, arrival: arrival.unwrap_or(Arrival::Timestamps { time_scale: 1.0 }) })
}

/// The non-blank comma-separated parts of a flow.
fn parts(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').filter(|s| !s.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::synthetic::RwMode;

    fn synthetic(f: FlowSpec) -> (SyntheticSpec, Option<Arrival>) {
        match f {
            FlowSpec::Synthetic { spec, arrival } => (spec, arrival),
            other => panic!("not synthetic: {other:?}"),
        }
    }

    #[test]
    fn a_flow_sets_fields_over_the_base_workload() {
        let base = SyntheticSpec { fsync: 7, ..Default::default() };
        let (spec, arrival) = synthetic(parse_flow("rw=randread, iodepth=16,,", &base, None).unwrap());
        assert_eq!(spec.rw, RwMode::RandRead);
        assert_eq!(spec.iodepth, 16);
        assert_eq!(spec.fsync, 7, "fields not given stay the base's");
        assert_eq!(arrival, None);
        let (_, arrival) = synthetic(parse_flow("iodepth=4,arrival=poisson:100", &base, None).unwrap());
        assert_eq!(arrival, Some(Arrival::Rate { iops: 100.0, poisson: true }));
    }

    #[test]
    fn a_closed_default_arrival_takes_the_flows_depth() {
        let base = SyntheticSpec::default();
        let closed = Some(Arrival::Closed { iodepth: 1 });
        let (_, arrival) = synthetic(parse_flow("iodepth=32", &base, closed).unwrap());
        assert_eq!(arrival, Some(Arrival::Closed { iodepth: 32 }));
        let rate = Some(Arrival::Rate { iops: 5.0, poisson: false });
        assert_eq!(synthetic(parse_flow("iodepth=32", &base, rate).unwrap()).1, rate);
    }

    #[test]
    fn bad_flows_are_refused_with_the_flow_named() {
        let base = SyntheticSpec::default();
        let err = |t: &str| parse_flow(t, &base, None).unwrap_err();
        assert_eq!(err("iodepth"), "--flow `iodepth`: `iodepth` is not KEY=VALUE");
        assert_eq!(err("iodepth=deep"), "--flow `iodepth=deep`: iodepth must be a whole number");
        assert_eq!(err("trim_percent=x"), "--flow `trim_percent=x`: trim_percent must be a number");
        assert!(err("bogus=1").starts_with("--flow `bogus=1`: ") && err("bogus=1").contains("bogus"));
        assert!(err("arrival=sometimes").starts_with("--flow `sometimes`: "));
        assert_eq!(
            err("trace=t.txt,rw=read"),
            "--flow `trace=t.txt,rw=read`: a trace flow takes only trace=FILE and arrival=…, not `rw=read`"
        );
    }

    #[test]
    fn a_trace_flow_replays_at_its_timestamps_unless_told() {
        let base = SyntheticSpec::default();
        assert_eq!(trace_path(" trace= a.txt ,arrival=closed"), Some("a.txt"));
        assert_eq!(trace_path("rw=read"), None);
        assert_eq!(
            parse_flow("trace=a.txt", &base, None).unwrap(),
            FlowSpec::Trace { path: "a.txt".into(), arrival: Arrival::Timestamps { time_scale: 1.0 } }
        );
        assert_eq!(
            parse_flow("arrival=rate:10,trace=a.txt", &base, None).unwrap(),
            FlowSpec::Trace { path: "a.txt".into(), arrival: Arrival::Rate { iops: 10.0, poisson: false } }
        );
    }
}
