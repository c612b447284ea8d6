//! A campaign under a fault schedule: the campaign's processes run as usual (through the
//! loopback proxy, so that cuts reach them) while one driver injects the scheduled faults
//! in order, each recorded as a nemesis event. The whole history is then judged: across
//! every restart, every acknowledged op's effect must be present.

use crate::error::FaultError;
use crate::fault::Fault;
use crate::inject::{Injection, Reach, Victim};
use crate::proxy::Proxy;
use crate::schedule::{Planned, Schedule};
use crate::server::Server;
use harness::campaign::{self, Campaign, Progress, Report};
use harness::pg::Cluster;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Injections of one fault in a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Injected (recorded with its effect).
    pub injected: u32,
    /// Found nothing to hit (no statement in flight to cancel, no connection to cut).
    pub missed: u32,
}

/// What a run under faults produced.
pub struct MixedReport {
    /// The campaign's report (its outcome is the checker's verdict on the whole history).
    pub report: Report,
    /// Per fault, how often it was injected and missed.
    pub tallies: BTreeMap<Fault, Tally>,
    /// What stopped the fault driver (an infrastructure failure: the run proves nothing).
    pub failure: Option<FaultError>,
    /// Restarts and their downtime windows, for the record.
    pub restarts: Vec<crate::inject::Restarted>,
    /// The calls answered before the first fault and after the last ([`crate::progress`]),
    /// when the run had faults and made progress around them.
    pub progress: Option<String>,
}

impl MixedReport {
    /// `linearizable`, `violation`, ..., or `infrastructure` when the driver failed or a
    /// named fault was never injected.
    pub fn verdict_name(&self) -> &'static str {
        match (&self.failure, &self.report.outcome) {
            (Some(_), campaign::Outcome::Violation(_) | campaign::Outcome::Malformed { .. }) => {
                self.report.outcome.name()
            }
            (Some(_), _) => "infrastructure",
            (None, o) => o.name(),
        }
    }

    /// 0 linearizable, 1 a finding, 2 unknown or infrastructure.
    pub fn exit(&self) -> model::Exit {
        match self.verdict_name() {
            "linearizable" => model::Exit::Passed,
            "violation" | "malformed" => model::Exit::Finding,
            _ => model::Exit::NoVerdict,
        }
    }

    /// The fault counts as JSON (`{"crash": {"injected": 3, "missed": 0}, ...}`).
    pub fn tallies_json(&self) -> serde_json::Value {
        let map: serde_json::Map<String, serde_json::Value> = self
            .tallies
            .iter()
            .map(|(f, t)| {
                (
                    f.name().to_string(),
                    serde_json::json!({"injected": t.injected, "missed": t.missed}),
                )
            })
            .collect();
        serde_json::Value::Object(map)
    }
}

impl fmt::Display for MixedReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(e) = &self.failure {
            writeln!(
                f,
                "FAULT INJECTION FAILED (not a finding about the target): {e}"
            )?;
        }
        write!(f, "{}", self.report.outcome)?;
        let faults: Vec<String> = self
            .tallies
            .iter()
            .map(|(fault, t)| format!("{fault} {} (+{} missed)", t.injected, t.missed))
            .collect();
        write!(f, "\nfaults: {}", faults.join(", "))
    }
}

/// Runs `campaign` on `cluster` under `schedule` (the campaign's sessions go through a
/// proxy of the run's own). Returns the report and the cluster (to reuse or drop).
pub async fn run(
    cluster: Cluster,
    campaign: &Campaign,
    schedule: &Schedule,
    progress: Arc<dyn Progress>,
) -> (MixedReport, Option<Cluster>) {
    run_routed(cluster, campaign, schedule, progress, true).await
}

/// [`run`], with the sessions connecting through the proxy (`routed`) or to the server
/// directly (then cuts hit nothing: the negative control of the cut checks).
pub async fn run_routed(
    cluster: Cluster,
    campaign: &Campaign,
    schedule: &Schedule,
    progress: Arc<dyn Progress>,
    routed: bool,
) -> (MixedReport, Option<Cluster>) {
    let failed = |e: FaultError, cluster: Option<Cluster>, postgres: String| {
        (
            MixedReport {
                report: Report {
                    outcome: campaign::Outcome::Infrastructure(campaign::InfraError::Task(
                        e.to_string(),
                    )),
                    history: None,
                    figures: Default::default(),
                    postgres,
                    database: None,
                },
                tallies: BTreeMap::new(),
                failure: Some(e),
                restarts: Vec::new(),
                progress: None,
            },
            cluster,
        )
    };
    let postgres = cluster.version().full.clone();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], cluster.port()));
    let proxy = match Proxy::start(addr).await {
        Ok(p) => p,
        Err(e) => return failed(FaultError::Proxy(e), Some(cluster), postgres),
    };
    let routed = Campaign {
        route: routed.then(|| proxy.addr()),
        ..campaign.clone()
    };
    // Prepared before the cluster is shared: preparing borrows it across awaits.
    let recording = match campaign::prepare(&cluster, &routed, &mut None).await {
        Ok(r) => r,
        Err(e) => return failed(e.into(), Some(cluster), postgres),
    };
    let server = Server::new(cluster);
    let reach = Reach {
        server: &server,
        recorder: recording.recorder(),
        database: recording.database(),
        proxy: Some(&proxy),
        recording: Some(&recording),
    };
    let keys = campaign.workload.key_names();
    // The driver stops when recording ends: faults take longer than planned (a restart
    // waits for the server), and none is injected into a history that is over.
    let (over, over_rx) = watch::channel(false);
    let (stopped, driven) = tokio::join!(
        async {
            let stopped = recording.record(progress.clone()).await;
            over.send_replace(true);
            stopped
        },
        drive(
            &reach,
            schedule,
            &keys,
            campaign.workload.processes,
            over_rx
        )
    );
    let report = recording.judge(stopped, progress).await;
    drop(proxy);
    let around = report
        .history
        .as_ref()
        .and_then(crate::progress::around_faults);
    let (progress, stalled) = match around {
        Some(Ok(line)) => (Some(line), None),
        Some(Err(why)) => (None, Some(FaultError::NoProgress { why })),
        None => (None, None),
    };
    let failure = driven
        .failure
        .or_else(|| never_injected(schedule, &driven.tallies))
        .or(stalled);
    (
        MixedReport {
            report,
            tallies: driven.tallies,
            failure,
            restarts: driven.restarts,
            progress,
        },
        server.into_cluster(),
    )
}

/// A fault the schedule names that was never injected: the run cannot speak for it.
fn never_injected(schedule: &Schedule, tallies: &BTreeMap<Fault, Tally>) -> Option<FaultError> {
    schedule.faults().into_iter().find_map(|f| {
        let why = match tallies.get(&f) {
            None => "the run ended before its turn",
            Some(t) if t.injected == 0 => "every scheduled injection of it hit nothing",
            Some(_) => return None,
        };
        Some(FaultError::not_injected(f.name(), why))
    })
}

/// What the driver did.
#[derive(Default)]
struct Driven {
    tallies: BTreeMap<Fault, Tally>,
    failure: Option<FaultError>,
    restarts: Vec<crate::inject::Restarted>,
}

/// Injects the schedule's faults in order; stops at the first infrastructure failure.
async fn drive(
    reach: &Reach<'_>,
    schedule: &Schedule,
    keys: &[String],
    slots: u32,
    mut over: watch::Receiver<bool>,
) -> Driven {
    let mut driven = Driven::default();
    let started = Instant::now();
    let mut due = Duration::ZERO;
    for planned in &schedule.0 {
        due += planned.gap;
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = over.wait_for(|over| *over) => {}
            }
        }
        if *over.borrow() {
            break;
        }
        let tally = driven.tallies.entry(planned.fault).or_default();
        match inject(reach, planned, keys, slots).await {
            Ok(restarted) => {
                tally.injected += 1;
                driven.restarts.extend(restarted);
            }
            Err(FaultError::NotInjected { .. }) => tally.missed += 1,
            Err(e) => {
                driven.failure = Some(e);
                break;
            }
        }
        due = started.elapsed();
    }
    driven
}

/// Injects one planned fault.
async fn inject(
    reach: &Reach<'_>,
    planned: &Planned,
    keys: &[String],
    slots: u32,
) -> Result<Option<crate::inject::Restarted>, FaultError> {
    let (fault, hold) = (planned.fault, planned.hold);
    let injected = match fault.spec().injection {
        Injection::Restart(stop) => return reach.restart(fault, stop, hold).await.map(Some),
        Injection::Backend { terminate } => reach
            .kill_backend(terminate, Victim::Pick(planned.pick))
            .await
            .map(|_| ()),
        Injection::ServerPause => reach.server_pause(hold).await,
        Injection::Cut(cut) => reach.cut(fault, cut, hold).await.map(|_| ()),
        Injection::ClientPause => reach.client_pause(planned.pick % slots.max(1), hold).await,
        Injection::Lapse => {
            let key = keys
                .get(planned.pick as usize % keys.len().max(1))
                .ok_or_else(|| FaultError::not_injected("lapse", "the workload has no key"))?;
            reach.lapse(key).await.map(|_| ())
        }
        Injection::SituationOnly => Err(FaultError::not_injected(
            fault.name(),
            "only its own scripted situation brings it about, not a campaign",
        )),
    };
    injected.map(|()| None)
}
