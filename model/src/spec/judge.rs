//! Judging observed calls: the outcomes the spec allows a call that took effect at some
//! instant of an observed span, and whether an observed outcome is one of them (with the
//! state it leaves and the branch it took).

use super::*;

impl Spec {
    /// Every outcome `op` may have when it takes effect at some instant of `span`, each with
    /// the resulting store. Reported times are windows. Empty only for a blocking acquire of
    /// a held key whose span is shorter than its wait (no outcome is possible yet).
    pub fn possible<K: Name, O: Name>(
        &self,
        store: &Store<K, O>,
        op: &Op<K, O>,
        span: Span,
    ) -> Vec<(Expected<O>, Store<K, O>)> {
        let violations = op.violations();
        if !violations.is_empty() {
            return vec![(
                Outcome::InvalidInput,
                self.invalid_effect(store, op, &violations, span.t0()),
            )];
        }
        let Some((key, kop)) = key_op(op) else {
            return vec![(Outcome::InvalidInput, store.clone())];
        };
        let st = store.state(key);
        self.branches(&st, &kop, span, span.t0())
            .iter()
            .map(|b| {
                let (expected, new) = self.realize(&st, &kop, b);
                let mut next = store.clone();
                self.put(&mut next, key, new, b.effect);
                (expected, next)
            })
            .collect()
    }

    /// Judges one observed outcome of `op`, which took effect at some instant of `span` on
    /// `store`. Returns every store the observation is consistent with (never empty), or the
    /// reason it is impossible. [`Outcome::Failed`] leaves the store unchanged;
    /// [`Outcome::Unknown`] allows every possible effect and no effect.
    pub fn check<K: Name, O: Name>(
        &self,
        store: &Store<K, O>,
        op: &Op<K, O>,
        span: Span,
        observed: &Outcome<O>,
    ) -> Result<Vec<Store<K, O>>, Mismatch> {
        let judged = self.judge(store, op, span, observed)?;
        Ok(dedup(judged.into_iter().map(|j| j.store).collect()))
    }

    /// Like [`Spec::check`], with each consistent store's [`Judgement`]: whether the op
    /// wrote, and the earliest server instant it can have taken effect at (reported times
    /// narrow the span: a grant reporting `expires_at` took effect at `expires_at - ttl`).
    pub fn judge<K: Name, O: Name>(
        &self,
        store: &Store<K, O>,
        op: &Op<K, O>,
        span: Span,
        observed: &Outcome<O>,
    ) -> Result<Vec<Judgement<K, O>>, Mismatch> {
        self.judge_with(store, op, span, observed, true)
    }

    /// [`Spec::judge`]; without `detail`, a mismatch names its invariant but its detail text
    /// is left empty (building it costs more than judging).
    pub fn judge_with<K: Name, O: Name>(
        &self,
        store: &Store<K, O>,
        op: &Op<K, O>,
        span: Span,
        observed: &Outcome<O>,
        detail: bool,
    ) -> Result<Vec<Judgement<K, O>>, Mismatch> {
        self.judge_from(store, op, span, span.t0(), observed, detail)
    }

    /// [`Spec::judge_with`] for an op known to have taken effect at or after `not_before`
    /// (e.g. after a write it saw): only the instants of `span` from `not_before` on count,
    /// while a blocking acquire's wait still runs from the start of `span`.
    pub fn judge_from<K: Name, O: Name>(
        &self,
        store: &Store<K, O>,
        op: &Op<K, O>,
        span: Span,
        not_before: Ts,
        observed: &Outcome<O>,
        detail: bool,
    ) -> Result<Vec<Judgement<K, O>>, Mismatch> {
        let text = |f: &dyn Fn() -> String| if detail { f() } else { String::new() };
        let unchanged = |branch| Judgement {
            store: store.clone(),
            writes: false,
            at: span.t0().max(not_before),
            branch,
        };
        if *observed == Outcome::Failed {
            return Ok(vec![unchanged(failed_branch(op))]);
        }
        let violations = op.violations();
        if !violations.is_empty() {
            let after = self.invalid_effect(store, op, &violations, span.t0());
            let wrote = Judgement {
                writes: after != *store,
                store: after,
                at: span.t0(),
                branch: invalid_branch(op),
            };
            return match observed {
                Outcome::InvalidInput => Ok(vec![wrote]),
                Outcome::Unknown => Ok(dedup(vec![wrote, unchanged(None)])),
                other => Err(Mismatch {
                    invariant: Invariant::FailClosed,
                    detail: text(&|| {
                        format!(
                            "{op:?} violates {violations:?} and must raise 22023, observed {other:?}"
                        )
                    }),
                }),
            };
        }
        if *observed == Outcome::InvalidInput {
            return Err(Mismatch {
                invariant: Invariant::FailClosed,
                detail: text(&|| format!("{op:?} is valid but was rejected as invalid input")),
            });
        }
        let Some((key, kop)) = key_op(op) else {
            return Err(Mismatch {
                invariant: Invariant::FailClosed,
                detail: text(&|| format!("{op:?} names no key")),
            });
        };
        let st = store.state(key);
        let branches = self.branches(&st, &kop, span, not_before);
        let mut out = Vec::new();
        let mut expected = Vec::new();
        for b in &branches {
            let (exp, new) = self.realize(&st, &kop, b);
            let fixed = if *observed == Outcome::Unknown {
                Some((new, b.teff.0))
            } else {
                settle(&kop, b, &exp, new, observed)
            };
            if let Some((new, at)) = fixed {
                let mut next = store.clone();
                self.put(&mut next, key, new, b.effect);
                out.push(Judgement {
                    store: next,
                    writes: b.effect.writes() || b.effect == Effect::ExpireNow,
                    at,
                    branch: branch_of(&st, &kop, b),
                });
            }
            expected.push(exp);
        }
        if *observed == Outcome::Unknown {
            out.push(unchanged(None));
        }
        if out.is_empty() {
            let early_timeout = match &kop {
                KeyOp::Acquire { wait, .. } if *observed == Outcome::Timeout => {
                    span.t1() < earliest_deadline(wait, span)
                }
                _ => false,
            };
            let invariant = if early_timeout {
                Invariant::PrecedenceAndIsolation
            } else {
                classify(op, &branches, observed)
            };
            return Err(Mismatch {
                invariant,
                detail: text(&|| {
                    format!(
                        "{op:?} in {span} on {st:?}: observed {observed:?}, spec allows {expected:?}"
                    )
                }),
            });
        }
        Ok(dedup(out))
    }

    /// The outcomes the spec allows `op` at the instants of `span` on `store` (expiries as
    /// windows), for explanations; empty for an invalid op or one naming no key.
    pub fn allowed<K: Name, O: Name>(
        &self,
        store: &Store<K, O>,
        op: &Op<K, O>,
        span: Span,
    ) -> Vec<Expected<O>> {
        if !op.violations().is_empty() {
            return Vec::new();
        }
        let Some((key, kop)) = key_op(op) else {
            return Vec::new();
        };
        let st = store.state(key);
        let mut out: Vec<Expected<O>> = Vec::new();
        for b in &self.branches(&st, &kop, span, span.t0()) {
            let (exp, _) = self.realize(&st, &kop, b);
            if !out.contains(&exp) {
                out.push(exp);
            }
        }
        out
    }
}

/// The new key state when `observed` matches the branch's prediction `exp`, with reported
/// times fixing what was only known as a window, and the earliest instant of the branch's
/// effective times that the observation allows; `None` when it does not match.
fn settle<O: Name>(
    kop: &KeyOp<'_, O>,
    branch: &Way,
    exp: &Expected<O>,
    new: KeyState<O>,
    observed: &Outcome<O>,
) -> Option<(KeyState<O>, Ts)> {
    let at = branch.teff.0;
    match (exp, observed) {
        (
            Outcome::Acquired {
                epoch: e,
                expires_at: w,
            },
            Outcome::Acquired {
                epoch: oe,
                expires_at: r,
            },
        ) => {
            if e != oe {
                return None;
            }
            let mut at = at;
            if let Effect::Grant(_) = branch.effect {
                let KeyOp::Acquire { ttl, .. } = kop else {
                    return None;
                };
                at = fixes_time(branch.teff, ttl, *r)?;
            } else if !w.contains(*r) {
                return None;
            }
            Some((with_expiry(new, *r), at))
        }
        (Outcome::Renewed { .. }, Outcome::Renewed { expires_at: r }) => {
            let KeyOp::Renew { ttl, .. } = kop else {
                return None;
            };
            let at = fixes_time(branch.teff, ttl, *r)?;
            Some((with_expiry(new, *r), at))
        }
        (Outcome::Inspected(Some(er)), Outcome::Inspected(Some(or))) => {
            if er.held != or.held || er.owner != or.owner || er.epoch != or.epoch {
                return None;
            }
            match (&er.expires_at, &or.expires_at) {
                (None, None) => Some((new, at)),
                (Some(w), Some(r)) if w.contains(*r) => Some((with_expiry(new, *r), at)),
                _ => None,
            }
        }
        (Outcome::Inspected(None), Outcome::Inspected(None))
        | (Outcome::Denied, Outcome::Denied)
        | (Outcome::Timeout, Outcome::Timeout)
        | (Outcome::Released, Outcome::Released)
        | (Outcome::NotOwner, Outcome::NotOwner)
        | (Outcome::Lapsed, Outcome::Lapsed)
        | (Outcome::EpochMismatch, Outcome::EpochMismatch)
        | (Outcome::Injected, Outcome::Injected)
        | (Outcome::NotInjected, Outcome::NotInjected) => Some((new, at)),
        _ => None,
    }
}

/// The earliest effective time in `teff` at which the server computes
/// `reported = t + ttl`, if any (with months, up to four instants give the same expiry).
fn fixes_time(teff: (Ts, Ts), ttl: &Interval, reported: Ts) -> Option<Ts> {
    ttl.sources(reported)
        .as_slice()
        .iter()
        .copied()
        .find(|t| teff.0 <= *t && *t <= teff.1 && ttl.add_to(*t) == Ok(reported))
}

fn with_expiry<O>(st: KeyState<O>, t: Ts) -> KeyState<O> {
    match st {
        KeyState::Held { owner, epoch, .. } => KeyState::Held {
            owner,
            epoch,
            expires: Window::exact(t),
        },
        other => other,
    }
}

fn dedup<T: PartialEq>(v: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(v.len());
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}
