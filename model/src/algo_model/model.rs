//! The stateright [`AlgoModel`]: transitions, traces, the shortest counterexample search and
//! the properties.

use super::config::{
    AlgoConfig, AlgoConfigError, Variant, MAX_EPOCH, MAX_SESSIONS, NO_GRANT_EXPIRED_WHEN_WRITTEN,
    NO_RENEW_STALLED_BY_SLEEPER,
};
use super::state::*;
use crate::invariant::Invariant;
use stateright::{Expectation, Model, Property};
use std::collections::HashSet;

/// Receives a line per thing a transition does; [`Silent`] while checking, [`Transcript`]
/// when printing a path.
pub trait Narrate {
    fn say(&mut self, line: impl FnOnce() -> String);
}

/// Says nothing (and formats nothing).
pub struct Silent;

impl Narrate for Silent {
    fn say(&mut self, _: impl FnOnce() -> String) {}
}

/// Collects the lines.
#[derive(Default)]
pub struct Transcript(pub Vec<String>);

impl Narrate for Transcript {
    fn say(&mut self, line: impl FnOnce() -> String) {
        self.0.push(line());
    }
}

/// The stateright model of pg_lease's algorithm.
#[derive(Clone, Debug)]
pub struct AlgoModel {
    pub(super) cfg: AlgoConfig,
}

impl AlgoModel {
    /// The model of `cfg`.
    pub fn new(cfg: AlgoConfig) -> Result<AlgoModel, AlgoConfigError> {
        cfg.validate()?;
        Ok(AlgoModel { cfg })
    }

    pub fn config(&self) -> &AlgoConfig {
        &self.cfg
    }

    pub(super) fn sessions(&self) -> impl Iterator<Item = u8> {
        0..self.cfg.sessions
    }

    pub(super) fn variant(&self) -> Variant {
        self.cfg.variant
    }

    /// The transition of `action` from `s`, telling `n` what happens.
    pub fn apply<N: Narrate>(&self, s: &AlgoState, action: Action, n: &mut N) -> AlgoState {
        let mut next = s.clone();
        next.mark = Mark::None;
        match action {
            Action::Begin(me) => {
                next.session(me).txn_calls = Some(0);
                n.say(|| format!("s{me}: BEGIN"));
            }
            Action::Start(me, kind) => self.start(&mut next, me, kind, n),
            Action::Step(me) => self.step(&mut next, me, n),
            Action::Commit(me) => self.commit(&mut next, me, n),
            Action::Rollback(me) => self.rollback(&mut next, me, n),
            Action::Tick => {
                next.now += 1;
                n.say(|| format!("tick: the clock reads {}", next.now));
            }
        }
        next
    }

    /// The path's transitions as readable lines, one or more per action.
    pub fn trace(&self, path: &[(AlgoState, Option<Action>)]) -> Vec<String> {
        let mut lines = Vec::new();
        for (i, (state, action)) in path.iter().enumerate() {
            let Some(action) = action else { continue };
            let mut t = Transcript::default();
            self.apply(state, *action, &mut t);
            let prefix = format!("{:>3}. t={}", i + 1, state.now);
            lines.extend(t.0.into_iter().map(|l| format!("{prefix} {l}")));
        }
        lines
    }

    /// The shortest path (in actions) to a discovery of property `name`: a state that breaks
    /// it (`always`) or shows it (`sometimes`); None if there is none. A true breadth-first
    /// search: stateright 0.31's `spawn_bfs` pops its queue last-in first-out, so its paths
    /// are not shortest.
    pub fn shortest_discovery(&self, name: &str) -> Option<Vec<(AlgoState, Option<Action>)>> {
        let property = self.properties().into_iter().find(|p| p.name == name)?;
        let sought = property.expectation == Expectation::Sometimes;
        let mut visited: Vec<(AlgoState, Option<(usize, Action)>)> = Vec::new();
        let mut seen = HashSet::new();
        for init in self.init_states() {
            seen.insert(init.clone());
            visited.push((init, None));
        }
        let mut actions = Vec::new();
        for at in 0.. {
            let state = &visited.get(at)?.0;
            if (property.condition)(self, state) == sought {
                return Some(path_to(&visited, at));
            }
            self.actions(state, &mut actions);
            let successors: Vec<(AlgoState, Option<(usize, Action)>)> = actions
                .drain(..)
                .filter_map(|a| Some((self.next_state(state, a)?, Some((at, a)))))
                .filter(|(next, _)| self.within_boundary(next) && seen.insert(next.clone()))
                .collect();
            visited.extend(successors);
        }
        None
    }

    /// A compact description of `s` (the configured sessions only).
    pub fn describe(&self, s: &AlgoState) -> String {
        let mut out = format!("t={}; committed {}", s.now, show(s.committed));
        if let Some(l) = s.lock {
            let pending = l.pending.map_or("lock only".to_string(), |r| r.to_string());
            out.push_str(&format!("; row lock s{} ({pending})", l.holder));
        }
        for me in self.sessions() {
            let sess = &s.sessions[usize::from(me)];
            let txn = sess.txn_calls.map_or("", |_| " in txn");
            match sess.call {
                Some(c) => out.push_str(&format!("; s{me}{txn} {:?} at {:?}", c.kind, c.pc)),
                None => out.push_str(&format!("; s{me}{txn} idle")),
            }
        }
        out.push_str("; grants");
        for (e, g) in s.grants.iter().enumerate() {
            if let Some(g) = g {
                let how = if g.released { "released" } else { "expiry" };
                out.push_str(&format!(
                    " e{e}: s{} [{}, {}) ({how})",
                    g.owner, g.start, g.end
                ));
            }
        }
        out
    }

    /// Why `s` breaks inv11, in words.
    pub fn explain_expired(&self, s: &AlgoState) -> Option<String> {
        let g = s.expired_grant?;
        Some(format!(
            "inv11: grant e{} to s{} was written at {} with expires_at {} (dated by the clock \
             at {}): already expired when its acquire returned",
            g.epoch, g.owner, g.written_at, g.expires, g.start
        ))
    }

    /// Why `s` breaks inv01, in words.
    pub fn explain_overlap(&self, s: &AlgoState) -> Option<String> {
        let (e1, e2) = s.overlapping_grants()?;
        let g1 = s.grants[usize::from(e1)]?;
        let g2 = s.grants[usize::from(e2)]?;
        let from = g1.start.max(g2.start);
        let to = g1.end.min(g2.end);
        let common = if from == to {
            format!("at {from}")
        } else {
            format!("in [{from}, {to})")
        };
        Some(format!(
            "inv01: grant e{e1} to s{} is valid {}, grant e{e2} to s{} {}: both hold the key {common}",
            g1.owner,
            g1.validity(),
            g2.owner,
            g2.validity()
        ))
    }
}

/// The path from the initial state to `visited[at]`, each state with the action taken from it.
pub(super) fn path_to(
    visited: &[(AlgoState, Option<(usize, Action)>)],
    at: usize,
) -> Vec<(AlgoState, Option<Action>)> {
    let mut path = Vec::new();
    let mut step = Some((at, None));
    while let Some((i, action)) = step {
        let (state, parent) = &visited[i];
        path.push((state.clone(), action));
        step = parent.map(|(p, a)| (p, Some(a)));
    }
    path.reverse();
    path
}

impl Model for AlgoModel {
    type State = AlgoState;
    type Action = Action;

    fn init_states(&self) -> Vec<AlgoState> {
        let session = Session {
            calls_left: self.cfg.calls,
            ..Session::default()
        };
        vec![AlgoState {
            now: 0,
            committed: None,
            lock: None,
            sessions: [session; MAX_SESSIONS],
            grants: [None; MAX_EPOCH as usize + 1],
            lapse_seen: false,
            lapse_broken: false,
            expired_grant: None,
            mark: Mark::None,
        }]
    }

    fn actions(&self, s: &AlgoState, actions: &mut Vec<Action>) {
        // A broken history stays broken: stop there, so counterexamples end at the break.
        if s.breaks_safety() {
            return;
        }
        for me in self.sessions() {
            match s.sessions[usize::from(me)].call {
                Some(call) if self.can_step(s, me, call) => actions.push(Action::Step(me)),
                Some(_) => {}
                None => self.idle_actions(s, me, actions),
            }
        }
        if self.can_tick(s) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, s: &AlgoState, action: Action) -> Option<AlgoState> {
        Some(self.apply(s, action, &mut Silent))
    }

    fn within_boundary(&self, s: &AlgoState) -> bool {
        let max = self.cfg.max_epoch;
        let pending = s.lock.and_then(|l| l.pending);
        [s.committed, pending]
            .into_iter()
            .flatten()
            .all(|r| r.epoch <= max)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties(&self.cfg)
    }
}

/// The properties checked for `cfg`: inv01 and inv07 over instants and the stall property
/// as `always`, and `sometimes` reachability checks for the paths the variants differ on.
pub fn properties(cfg: &AlgoConfig) -> Vec<Property<AlgoModel>> {
    let mut p = vec![
        Property::always(
            Invariant::MutualExclusion.property_name(),
            |_, s: &AlgoState| s.overlapping_grants().is_none(),
        ),
        Property::always(
            Invariant::LapseIsFinal.property_name(),
            |_, s: &AlgoState| !s.lapse_broken,
        ),
        Property::always(NO_RENEW_STALLED_BY_SLEEPER, |_, s: &AlgoState| {
            s.renew_stalled_by_sleeper().is_none()
        }),
        Property::always(NO_GRANT_EXPIRED_WHEN_WRITTEN, |_, s: &AlgoState| {
            s.expired_grant.is_none()
        }),
        Property::sometimes(
            "sometimes: a grant after a lock wait",
            |_, s: &AlgoState| s.mark == Mark::GrantAfterWait,
        ),
        Property::sometimes(
            "sometimes: a lapsed lease is taken over",
            |_, s: &AlgoState| s.mark == Mark::Takeover,
        ),
        Property::sometimes(
            "sometimes: a write loses its re-check after a lock wait",
            |_, s: &AlgoState| s.mark == Mark::LostRaceAfterWait,
        ),
        Property::sometimes(
            "sometimes: a renew waits for the row lock",
            |_, s: &AlgoState| s.some_renew_blocked(),
        ),
    ];
    if cfg.wait > 0 {
        p.push(Property::sometimes(
            "sometimes: a blocking acquire is granted after sleeping",
            |_, s: &AlgoState| s.mark == Mark::GrantAfterSleep,
        ));
        p.push(Property::sometimes(
            "sometimes: a blocking acquire times out",
            |_, s: &AlgoState| s.mark == Mark::Timeout,
        ));
    }
    if cfg.txn_calls > 0 {
        p.push(Property::sometimes(
            "sometimes: a transaction that inserted the key rolls back",
            |_, s: &AlgoState| s.mark == Mark::InsertRolledBack,
        ));
        p.push(Property::sometimes(
            "sometimes: an insert succeeds after waiting for a rolled-back insert",
            |_, s: &AlgoState| s.mark == Mark::InsertAfterRolledBackInsert,
        ));
    }
    if cfg.inspects {
        p.push(Property::sometimes(
            "sometimes: inspect reports a lapsed lease",
            |_, s: &AlgoState| s.mark == Mark::InspectLapsed,
        ));
    }
    p
}
