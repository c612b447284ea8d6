//! Running the model checker on a [`Config`] and reporting the result.

use crate::invariant::Invariant;
use crate::lease_model::{properties, LeaseModel};
pub use crate::lease_model::{Config, ConfigError};
use crate::mutation::Mutation;
use stateright::{Checker, Expectation, HasDiscoveries, Model};
use std::collections::BTreeSet;
use std::fmt;
use std::time::{Duration, Instant};

/// Search strategy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// breadth-first (what `cargo test` runs)
    #[default]
    Bfs,
    /// depth-first (less memory)
    Dfs,
}

/// How one property fared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PropertyResult {
    pub name: &'static str,
    /// `true` for `always`, `false` for `sometimes`
    pub always: bool,
    /// a discovery was made: a counterexample (`always`) or an example (`sometimes`)
    pub discovered: bool,
    /// the actions leading to the discovery
    pub path: Vec<String>,
    /// the discovery's last state
    pub last_state: Option<String>,
}

impl PropertyResult {
    /// The property holds: no counterexample for `always`, an example for `sometimes`.
    pub fn holds(&self) -> bool {
        self.always != self.discovered
    }
}

/// The result of one model-checking run.
#[derive(Clone, Debug)]
pub struct Report {
    pub config: Config,
    pub strategy: Strategy,
    /// states generated, repeats included
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// every reachable state within the boundary was visited (not stopped early)
    pub complete: bool,
    pub properties: Vec<PropertyResult>,
}

impl Report {
    /// Every `always` property held and every `sometimes` property found an example, over a
    /// complete search.
    pub fn ok(&self) -> bool {
        self.complete && self.properties.iter().all(PropertyResult::holds)
    }

    /// Names of the `always` properties with a counterexample.
    pub fn violated(&self) -> Vec<&'static str> {
        self.properties
            .iter()
            .filter(|p| p.always && p.discovered)
            .map(|p| p.name)
            .collect()
    }

    /// The invariants with a counterexample.
    pub fn violated_invariants(&self) -> Vec<Invariant> {
        let names = self.violated();
        Invariant::ALL
            .into_iter()
            .filter(|i| names.contains(&i.property_name()))
            .collect()
    }

    /// The result for property `name`.
    pub fn property(&self, name: &str) -> Option<&PropertyResult> {
        self.properties.iter().find(|p| p.name == name)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        writeln!(
            f,
            "config: clients={} keys={} max_time={} max_epoch={} ttls={:?} wait={} mutation={}",
            c.clients, c.keys, c.max_time, c.max_epoch, c.ttls, c.wait, c.mutation
        )?;
        writeln!(
            f,
            "{:?}: {} states, {} unique, max depth {}, {:.2?}{}",
            self.strategy,
            self.states,
            self.unique_states,
            self.max_depth,
            self.elapsed,
            if self.complete {
                ""
            } else {
                " (stopped early)"
            }
        )?;
        for p in &self.properties {
            let verdict = match (p.always, p.discovered) {
                (true, false) => "holds",
                (true, true) => "VIOLATED",
                (false, true) => "reached",
                (false, false) => "NOT REACHED",
            };
            writeln!(f, "  {verdict:<11} {}", p.name)?;
            if p.always && p.discovered {
                writeln!(f, "    counterexample ({} actions):", p.path.len())?;
                for a in &p.path {
                    writeln!(f, "      {a}")?;
                }
                if let Some(s) = &p.last_state {
                    writeln!(f, "    last state: {s}")?;
                }
            }
        }
        Ok(())
    }
}

/// Options of a run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub strategy: Strategy,
    /// checker threads (0 or 1: one)
    pub threads: usize,
    /// stop as soon as these properties have discoveries (empty: explore everything)
    pub stop_when_found: BTreeSet<&'static str>,
}

/// Checks `config` exhaustively (within its bounds) and reports.
pub fn run(config: &Config, options: &RunOptions) -> Result<Report, ConfigError> {
    let model = LeaseModel::new(config.clone())?;
    let mut builder = model.checker().threads(options.threads.max(1));
    let stop_early = !options.stop_when_found.is_empty();
    if stop_early {
        builder = builder.finish_when(HasDiscoveries::AnyOf(options.stop_when_found.clone()));
    }
    let start = Instant::now();
    let (states, unique, depth, discoveries, model) = match options.strategy {
        Strategy::Bfs => collect(builder.spawn_bfs().join()),
        Strategy::Dfs => collect(builder.spawn_dfs().join()),
    };
    let elapsed = start.elapsed();
    let found: BTreeSet<&'static str> = discoveries.iter().map(|(n, _)| *n).collect();
    let complete = !stop_early || !options.stop_when_found.iter().any(|n| found.contains(n));
    let props = properties(config)
        .into_iter()
        .map(|p| {
            let d = discoveries.iter().find(|(n, _)| *n == p.name);
            PropertyResult {
                name: p.name,
                always: p.expectation != Expectation::Sometimes,
                discovered: d.is_some(),
                path: d.map(|(_, (path, _))| path.clone()).unwrap_or_default(),
                last_state: d.map(|(_, (_, last))| last.clone()),
            }
        })
        .collect();
    drop(model);
    Ok(Report {
        config: config.clone(),
        strategy: options.strategy,
        states,
        unique_states: unique,
        max_depth: depth,
        elapsed,
        complete,
        properties: props,
    })
}

type Discoveries = Vec<(&'static str, (Vec<String>, String))>;

fn collect<C: Checker<LeaseModel>>(c: C) -> (usize, usize, usize, Discoveries, LeaseModel) {
    let mut d: Discoveries = c
        .discoveries()
        .into_iter()
        .map(|(name, path)| {
            let last = c.model().describe(path.last_state());
            let actions = path
                .into_actions()
                .iter()
                .map(|a| format!("{a:?}"))
                .collect();
            (name, (actions, last))
        })
        .collect();
    d.sort_by(|a, b| a.0.cmp(b.0));
    (
        c.state_count(),
        c.unique_state_count(),
        c.max_depth(),
        d,
        c.model().clone(),
    )
}

/// The configuration a negative control runs on: [`Config::two_keys`] for mutations that
/// need two keys to show, [`Config::default`] otherwise.
pub fn control_config(mutation: Mutation) -> Config {
    let mut cfg = match mutation {
        Mutation::WriteIgnoresKey => Config::two_keys(),
        _ => Config::default(),
    };
    cfg.mutation = mutation;
    cfg
}

/// Runs `config` with `mutation` until the invariant it must violate has a counterexample.
pub fn run_negative_control(
    config: &Config,
    mutation: Mutation,
    options: &RunOptions,
) -> Result<Report, ConfigError> {
    let mut cfg = config.clone();
    cfg.mutation = mutation;
    let mut opts = options.clone();
    if let Some(inv) = mutation.expected() {
        opts.stop_when_found = [inv.property_name()].into_iter().collect();
    }
    run(&cfg, &opts)
}

/// The model of `config`, e.g. to serve the Explorer:
/// `model.checker().serve(addr)` (blocks; see [`stateright`]).
pub fn model(config: &Config) -> Result<LeaseModel, ConfigError> {
    LeaseModel::new(config.clone())
}
