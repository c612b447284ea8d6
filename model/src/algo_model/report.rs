//! Checking a configuration ([`run`]) and its result ([`AlgoReport`]).

use super::config::{AlgoConfig, AlgoConfigError};
use super::model::{properties, AlgoModel};
use super::state::{Action, AlgoState};
use stateright::{Checker, Expectation, HasDiscoveries, Model};
use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, Instant};

/// How one property fared in an [`AlgoReport`].
#[derive(Clone, Debug)]
pub struct AlgoProperty {
    pub name: &'static str,
    /// `true` for `always`, `false` for `sometimes`
    pub always: bool,
    /// the checker's path to the discovery (a counterexample or an example), if any
    pub path: Option<Vec<(AlgoState, Option<Action>)>>,
    /// for a violated `always` property, a shortest counterexample
    pub shortest: Option<Vec<(AlgoState, Option<Action>)>>,
}

impl AlgoProperty {
    /// The property holds: no counterexample for `always`, an example for `sometimes`.
    pub fn holds(&self) -> bool {
        self.always != self.path.is_some()
    }
}

/// The result of checking an [`AlgoConfig`].
#[derive(Clone, Debug)]
pub struct AlgoReport {
    pub model: AlgoModel,
    /// states generated, repeats included
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// every reachable state within the boundary was visited
    pub complete: bool,
    pub properties: Vec<AlgoProperty>,
}

impl AlgoReport {
    /// Every `always` property held and every `sometimes` one was reached, completely.
    pub fn ok(&self) -> bool {
        self.complete && self.properties.iter().all(AlgoProperty::holds)
    }

    /// Names of the `always` properties with a counterexample.
    pub fn violated(&self) -> Vec<&'static str> {
        let broken = self
            .properties
            .iter()
            .filter(|p| p.always && p.path.is_some());
        broken.map(|p| p.name).collect()
    }

    /// The result for property `name`.
    pub fn property(&self, name: &str) -> Option<&AlgoProperty> {
        self.properties.iter().find(|p| p.name == name)
    }

    /// A shortest counterexample to `name` as readable steps (empty when there is none).
    pub fn counterexample(&self, name: &str) -> Vec<String> {
        let path = self.property(name).and_then(|p| p.shortest.as_ref());
        path.map_or_else(Vec::new, |path| self.model.trace(path))
    }
}

impl fmt::Display for AlgoReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.model.config();
        writeln!(
            f,
            "algorithm model of pg_lease {}: sessions={} calls={} txn_calls={} max_time={} \
             max_epoch={} ttl={} wait={} inspects={} timing={:?}",
            c.variant,
            c.sessions,
            c.calls,
            c.txn_calls,
            c.max_time,
            c.max_epoch,
            c.ttl,
            c.wait,
            c.inspects,
            c.timing
        )?;
        let stopped = if self.complete {
            ""
        } else {
            " (stopped early)"
        };
        writeln!(
            f,
            "Bfs: {} states, {} unique, max depth {}, {:.2?}{stopped}",
            self.states, self.unique_states, self.max_depth, self.elapsed
        )?;
        for p in &self.properties {
            self.fmt_property(f, p)?;
        }
        Ok(())
    }
}

impl AlgoReport {
    fn fmt_property(&self, f: &mut fmt::Formatter<'_>, p: &AlgoProperty) -> fmt::Result {
        let verdict = match (p.always, p.path.is_some()) {
            (true, false) => "holds",
            (true, true) => "VIOLATED",
            (false, true) => "reached",
            (false, false) => "NOT REACHED",
        };
        writeln!(f, "  {verdict:<11} {}", p.name)?;
        let (Some(found), Some(path)) = (&p.path, &p.shortest) else {
            return Ok(());
        };
        writeln!(
            f,
            "    shortest counterexample ({} actions; the checker's path had {}):",
            path.len() - 1,
            found.len() - 1
        )?;
        for line in self.model.trace(path) {
            writeln!(f, "     {line}")?;
        }
        if let Some((last, _)) = path.last() {
            writeln!(f, "    last state: {}", self.model.describe(last))?;
            let why = [
                self.model.explain_overlap(last),
                self.model.explain_expired(last),
            ];
            for why in why.into_iter().flatten() {
                writeln!(f, "    {why}")?;
            }
        }
        Ok(())
    }
}

/// Checks `cfg` with one-thread BFS; stops once every property in `stop_when_found` has a
/// discovery (empty: explores everything).
pub fn run(
    cfg: &AlgoConfig,
    stop_when_found: &[&'static str],
) -> Result<AlgoReport, AlgoConfigError> {
    let model = AlgoModel::new(cfg.clone())?;
    let mut builder = model.clone().checker();
    let stop: BTreeSet<&'static str> = stop_when_found.iter().copied().collect();
    if !stop.is_empty() {
        builder = builder.finish_when(HasDiscoveries::AllOf(stop.clone()));
    }
    let start = Instant::now();
    let checker = builder.spawn_bfs().join();
    let elapsed = start.elapsed();
    let discoveries = checker.discoveries();
    let complete = stop.is_empty() || !stop.iter().all(|n| discoveries.contains_key(n));
    let properties = properties(cfg)
        .into_iter()
        .map(|p| {
            let always = p.expectation != Expectation::Sometimes;
            let path = discoveries.get(p.name).map(|path| path.clone().into_vec());
            let violated = always && path.is_some();
            AlgoProperty {
                name: p.name,
                always,
                path,
                shortest: violated.then(|| model.shortest_discovery(p.name)).flatten(),
            }
        })
        .collect();
    Ok(AlgoReport {
        model,
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        complete,
        properties,
    })
}
