//! The situations written as plans (failure/plans/NAME.plan): played by the harness's one
//! stepped runner on the check's recorder, their answers compared with what each step
//! expects, and what their history shows beside the answers looked at ([`seen_in`]). The
//! history is judged by the caller, as every situation's is.

use super::super::rig::{Rig, Setup};
use super::{CheckFailure, Shows};
use crate::error::FaultError;
use crate::fault::Fault;
use crate::inject::Reach;
use crate::server::Stop;
use crate::situation::PlanFile;
use harness::campaign::Silent;
use harness::judgement::Judgement;
use harness::recorder::Recorder;
use harness::session::SessionSettings;
use harness::stepped::{self, Boxed, Plan, Played, RunError, RunOptions, ServerControl};
use model::{History, NemesisEffect, Op, OpResult, Outcome};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::Client;

/// `fault`'s situation, the plan file `plan`, read.
pub(super) fn read(fault: Fault, plan: PlanFile) -> Result<Plan, FaultError> {
    Plan::from_text(plan.text).map_err(|e| {
        FaultError::Task(format!(
            "the {} situation's plan failure/plans/{}.plan does not read: {e}",
            fault.name(),
            plan.name
        ))
    })
}

/// The rig a plan runs on: its sessions start with the plan's settings (`set name=value`).
pub(super) fn setup(plan: &Plan) -> Setup {
    let settings = SessionSettings {
        settings: plan.settings.clone(),
        ..SessionSettings::none()
    };
    Setup {
        session_options: (!settings.is_empty()).then(|| settings.options()),
        ..Setup::default()
    }
}

/// Plays `plan`, `fault`'s situation, on `rig`: the evidence is each step and what came
/// back.
pub(super) async fn play(
    rig: &Rig,
    fault: Fault,
    plan: &Plan,
) -> Result<Vec<String>, CheckFailure> {
    let monitor = rig.reach().admin().await?;
    let control = RigControl {
        reach: rig.reach(),
        fault,
    };
    let played = stepped::play(
        &rig.recorder,
        &monitor,
        &control,
        plan,
        &RunOptions::default(),
        Arc::new(Silent),
    )
    .await;
    judged(fault, played)
}

/// What the history of a plan shows that its answers cannot: the evidence, or
/// why the check fails. The downtime-expiry lease's expiry must fall inside the downtime
/// (else the restart came too late or too early: the fault was not injected); each waiter
/// of wait-wake must be granted within [`WAKE_BOUND`] of the release that freed its key.
pub(super) fn seen_in(
    shows: Shows,
    fault: Fault,
    history: &History,
) -> Result<Vec<String>, CheckFailure> {
    match shows {
        Shows::Answers => Ok(Vec::new()),
        Shows::ExpiryInDowntime => expiry_in_downtime(fault, history).map(|()| Vec::new()),
        Shows::WakeWithinPollBound => woke_in_time(fault, history),
    }
}

fn expiry_in_downtime(fault: Fault, history: &History) -> Result<(), CheckFailure> {
    let expires = history.ops.iter().find_map(|o| match o.result {
        OpResult::Ok(Outcome::Acquired { expires_at, .. }) => Some(expires_at),
        _ => None,
    });
    let down = history.nemeses.iter().find_map(|n| match n.effect {
        NemesisEffect::Restart { down, .. } => down,
        _ => None,
    });
    match (expires, down) {
        (Some(e), Some(d)) if d.t0() < e && e <= d.t1() => Ok(()),
        (e, d) => Err(FaultError::not_injected(
            fault.name(),
            format!("the lease's expiry {e:?} is not inside the downtime {d:?}"),
        )
        .into()),
    }
}

/// The poll bound of a blocking acquire (pg_lease sleeps at most 50 ms between probes),
/// plus a margin for scheduling on a loaded 2-core machine: a waiter that failed to wake
/// would sleep on toward its 10 s wait (or, slept 2 s per probe, show 0.5-2 s).
pub(super) const WAKE_BOUND: Duration = Duration::from_millis(50 + 200);

/// How soon each waiter was granted after the release of its key, against [`WAKE_BOUND`].
fn woke_in_time(fault: Fault, history: &History) -> Result<Vec<String>, CheckFailure> {
    let latencies = wake_latencies(history);
    if latencies.len() != 3 {
        return Err(FaultError::not_injected(
            fault.name(),
            format!(
                "{} of the plan's 3 waiters were granted after a release",
                latencies.len()
            ),
        )
        .into());
    }
    let worst = latencies.iter().max().copied().unwrap_or_default();
    if worst > WAKE_BOUND {
        return Err(CheckFailure::Unexpected(format!(
            "a waiter woke {worst:?} after the release (bound {WAKE_BOUND:?}: 50 ms poll + \
             200 ms margin)"
        )));
    }
    Ok(vec![format!(
        "woke after {latencies:?} of server time (bound {WAKE_BOUND:?})"
    )])
}

/// For each blocking acquire granted after a release of its key: its grant instant (its
/// expiry less its TTL) less the release's first server instant.
fn wake_latencies(history: &History) -> Vec<Duration> {
    let mut latencies = Vec::new();
    for waiter in &history.ops {
        let (
            Op::Acquire {
                key,
                ttl: Some(ttl),
                wait: Some(_),
                ..
            },
            OpResult::Ok(Outcome::Acquired { expires_at, .. }),
        ) = (&waiter.call, &waiter.result)
        else {
            continue;
        };
        let release = history
            .ops
            .iter()
            .filter(|o| matches!(&o.call, Op::Release { key: k, .. } if k == key))
            .filter(|o| o.invoke < waiter.complete)
            .filter_map(|o| o.server.map(|s| s.t0()))
            .max();
        if let Some(released_at) = release {
            let granted_at = expires_at.plus(-ttl.micros);
            latencies.push(Duration::from_micros(
                (granted_at.0 - released_at.0).max(0) as u64
            ));
        }
    }
    latencies
}

/// The check's server as a plan's restart steps reach it: each restart is recorded as the
/// check's fault.
struct RigControl<'a> {
    reach: Reach<'a>,
    fault: Fault,
}

impl ServerControl for RigControl<'_> {
    /// Records on the rig's recorder, the one the plan is played on.
    fn restart<'a>(
        &'a self,
        _recorder: &'a Recorder,
        stop: Stop,
        down: Duration,
    ) -> Boxed<'a, Result<String, String>> {
        Box::pin(async move {
            let r = self
                .reach
                .restart(self.fault, stop, down)
                .await
                .map_err(|e| e.to_string())?;
            Ok(format!(
                "{} stop of postmaster {:?}, down {} ms of server time, back as {:?}",
                stop.name(),
                r.pid_before,
                (r.down.t1().0 - r.down.t0().0) / 1_000,
                r.pid_after
            ))
        })
    }

    fn monitor(&self) -> Boxed<'_, Result<Client, String>> {
        Box::pin(async move { self.reach.admin().await.map_err(|e| e.to_string()) })
    }
}

/// What a played plan says about the check: its evidence, or why it did not pass.
fn judged(fault: Fault, played: Played) -> Result<Vec<String>, CheckFailure> {
    match played.ended {
        Err(e @ (RunError::NotSignalled { .. } | RunError::Restart { .. })) => {
            return Err(FaultError::not_injected(fault.name(), e.to_string()).into())
        }
        Err(RunError::Recorder(e)) => return Err(FaultError::from(e).into()),
        // The server kept executing a step of the target's past the step timeout.
        Err(
            e @ RunError::Hang {
                executing: Some(_), ..
            },
        ) => return Err(CheckFailure::Unexpected(e.to_string())),
        Err(e) => return Err(FaultError::Task(e.to_string()).into()),
        Ok(()) => {}
    }
    match stepped::answers_judgement(&played.unmet) {
        Judgement::Pass => {}
        Judgement::Finding { message, .. } => return Err(CheckFailure::Unexpected(message)),
        Judgement::NoVerdict { why, .. } => return Err(FaultError::Task(why).into()),
    }
    Ok(played
        .steps
        .iter()
        .map(|s| {
            let answer = s.answer.as_deref().unwrap_or("(no answer)");
            format!("step {}: p{} {}: {answer}", s.step, s.process, s.what)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::situation::plan_file;
    use harness::stepped::Unmet;

    /// The plan files of the fault records.
    fn plan_files() -> Vec<(Fault, PlanFile)> {
        crate::fault::SPECS
            .iter()
            .filter_map(|s| match s.situation {
                crate::situation::Situation::Plan { plan, .. } => Some((s.fault, plan)),
                _ => None,
            })
            .collect()
    }

    /// Every record's plan reads, and every call in it expects an answer (what the
    /// situation shows is stated, not left to the checker alone).
    #[test]
    fn every_plan_reads_and_every_call_expects_its_answer() {
        let files = plan_files();
        assert!(!files.is_empty());
        for (fault, file) in files {
            let plan = read(fault, file).unwrap_or_else(|e| panic!("{e}"));
            for s in &plan.steps {
                if let harness::workload::Step::Call(_) = s.action {
                    assert!(s.expect.is_some(), "{}: {s:?}", file.name);
                }
            }
        }
    }

    /// Every file of `failure/plans/` is some record's situation: none is left behind by
    /// a removed fault (a record's missing file does not compile).
    #[test]
    fn every_plan_file_is_a_records_situation() {
        let named: Vec<&str> = plan_files().iter().map(|(_, f)| f.name).collect();
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/plans");
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir}: {e}"));
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            assert!(
                named.contains(&name),
                "{} is no fault's situation",
                path.display()
            );
        }
    }

    /// A plan's settings become the rig's session options; a plan without any leaves the
    /// sessions as they are.
    #[test]
    fn a_plans_settings_are_its_sessions_options() {
        let lock =
            read(Fault::LockTimeout, plan_file!("lock-timeout")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            setup(&lock).session_options.as_deref(),
            Some("-c lock_timeout=300")
        );
        let cancel = read(Fault::Cancel, plan_file!("cancel")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(setup(&cancel).session_options, None);
        let broken = PlanFile {
            name: "broken",
            text: "processes 2\np0 grab k0\n",
        };
        assert!(matches!(
            read(Fault::Cancel, broken),
            Err(FaultError::Task(_))
        ));
    }

    fn played(ended: Result<(), RunError>, unmet: Vec<Unmet>) -> Played {
        Played {
            steps: Vec::new(),
            unmet,
            ended,
        }
    }

    fn unmet(came_back: &str, answered: bool) -> Unmet {
        Unmet {
            step: 1,
            line: "p1 acquire k0 ttl 1min wait 30s expect error 57014".into(),
            expected: "error 57014".into(),
            came_back: came_back.into(),
            answered,
            outlived_client_timeout: false,
        }
    }

    /// A wrong answer and a call the fault did not end are findings; an answer lost to
    /// the machinery and a signal that hit nothing are infrastructure, never a pass.
    #[test]
    fn what_a_played_plan_says_is_attributed_to_the_target_or_the_machinery() {
        let fault = Fault::StatementTimeout;
        let wrong = judged(fault, played(Ok(()), vec![unmet("timeout", true)]));
        assert!(
            matches!(&wrong, Err(CheckFailure::Unexpected(m)) if m.contains("came back timeout")),
            "{wrong:?}"
        );
        let late = Unmet {
            outlived_client_timeout: true,
            ..unmet(
                "no answer: no answer within the client timeout of 10s",
                false,
            )
        };
        let late = judged(fault, played(Ok(()), vec![late]));
        assert!(
            matches!(&late, Err(CheckFailure::Unexpected(m)) if m.contains("did not end a call")),
            "{late:?}"
        );
        let lost = judged(
            fault,
            played(Ok(()), vec![unmet("no answer: 08006", false)]),
        );
        assert!(
            matches!(lost, Err(CheckFailure::Infrastructure(_))),
            "{lost:?}"
        );
        let missed = RunError::NotSignalled {
            step: 2,
            process: 1,
            signal: "cancel",
            pid: 7,
        };
        let missed = judged(fault, played(Err(missed), Vec::new()));
        assert!(
            matches!(
                missed,
                Err(CheckFailure::Infrastructure(FaultError::NotInjected { .. }))
            ),
            "{missed:?}"
        );
        assert!(judged(fault, played(Ok(()), Vec::new())).is_ok());
    }

    /// A downtime-expiry history without a restart (or whose grant expired outside the
    /// downtime), or a wait-wake history without its waiters, is a fault not injected,
    /// never a pass; other situations need no such look.
    #[test]
    fn a_situation_the_history_does_not_show_arising_is_not_injected() {
        let empty = History::default();
        let missed = seen_in(Shows::ExpiryInDowntime, Fault::DowntimeExpiry, &empty);
        assert!(
            matches!(
                missed,
                Err(CheckFailure::Infrastructure(FaultError::NotInjected { .. }))
            ),
            "{missed:?}"
        );
        let no_waiters = seen_in(Shows::WakeWithinPollBound, Fault::WaitWake, &empty);
        assert!(
            matches!(
                no_waiters,
                Err(CheckFailure::Infrastructure(FaultError::NotInjected { .. }))
            ),
            "{no_waiters:?}"
        );
        assert!(seen_in(Shows::Answers, Fault::Cancel, &empty).is_ok());
    }
}
