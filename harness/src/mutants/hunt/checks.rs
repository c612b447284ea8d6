//! Hunts by checks rather than by histories: the conformance checks a mutant's `caught_by`
//! names ([`Mode::Checks`]) and one setting of the hostile-session matrix
//! ([`Mode::Matrix`]), each judged by its finding's text ([`judge_finding`]).

use super::super::{judge_finding, Judged, Kill, Mode, MUTANTS};
use crate::campaign::Target;
use crate::conformance::{self, Failure};
use crate::matrix::{self, CampaignSize, Setting, Verdict, Version};
use crate::pg::Cluster;

/// The judgement and the text of a check run of `mode` against `target`, judged against
/// `kill` (none: the control, pg_lease, which must pass); `None` for a campaign mode.
pub(super) async fn run(
    cluster: &Cluster,
    target: Target,
    mode: Mode,
    kill: Option<Kill>,
) -> Option<(Judged, String)> {
    match mode {
        Mode::Checks => Some(conformance_checks(cluster, target, kill).await),
        Mode::Matrix(setting) => Some(matrix_setting(cluster, target, setting, kill).await),
        _ => None,
    }
}

/// The conformance checks a run of `target` makes: its own `caught_by`; for any other
/// target (the control), every check a mutant hunted by checks names.
fn names(target: Target) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = match target {
        Target::Mutant(m) => m.caught_by.to_vec(),
        _ => MUTANTS
            .iter()
            .filter(|m| m.hunt.contains(&Mode::Checks))
            .flat_map(|m| m.caught_by.iter().copied())
            .collect(),
    };
    names.sort_unstable();
    names.dedup();
    names
}

async fn conformance_checks(
    cluster: &Cluster,
    target: Target,
    kill: Option<Kill>,
) -> (Judged, String) {
    let files = match target.files() {
        Ok(files) => files,
        Err(e) => return (Judged::Infrastructure, e.to_string()),
    };
    if let Err(e) = cluster.provide_extension(&files).await {
        return (
            Judged::Infrastructure,
            format!("cannot install {target}: {e}"),
        );
    }
    let names = names(target);
    if names.is_empty() {
        return (
            Judged::Infrastructure,
            format!("{target}: no conformance check is named to hunt it"),
        );
    }
    let report = conformance::run_against(cluster, &files.name, |n| names.contains(&n)).await;
    // A killing finding decides; else the first other finding; else no verdict.
    let mut first: Option<(Judged, String)> = None;
    for o in &report.outcomes {
        let (judged, text) = match &o.result {
            Ok(()) => continue,
            Err(Failure::Violation(text)) => (judge_finding(kill, text), text),
            Err(Failure::Infrastructure(text)) => (Judged::Infrastructure, text),
        };
        let found = (judged, format!("{}: {text}", o.name));
        if found.0.is_kill() {
            return found;
        }
        if first.as_ref().is_none_or(|f| f.0 == Judged::Infrastructure) {
            first = Some(found);
        }
    }
    if let Some(found) = first {
        return found;
    }
    if report.outcomes.len() != names.len() {
        return (
            Judged::Infrastructure,
            format!(
                "{} of the {} named checks ran",
                report.outcomes.len(),
                names.len()
            ),
        );
    }
    (
        Judged::Survived,
        format!("{} conformance checks passed", names.len()),
    )
}

async fn matrix_setting(
    cluster: &Cluster,
    target: Target,
    name: &str,
    kill: Option<Kill>,
) -> (Judged, String) {
    let Some(setting) = Setting::ALL.into_iter().find(|s| s.name() == name) else {
        return (
            Judged::Infrastructure,
            format!("no matrix setting {name:?}"),
        );
    };
    let files = match target.files() {
        Ok(files) => files,
        Err(e) => return (Judged::Infrastructure, e.to_string()),
    };
    if let Err(e) = cluster.provide_extension(&files).await {
        return (
            Judged::Infrastructure,
            format!("cannot install {target}: {e}"),
        );
    }
    let version = Version::Target(target);
    if let Err(e) = matrix::check_version(cluster, version).await {
        return (Judged::Infrastructure, e.to_string());
    }
    let plan = match matrix::plan(setting, cluster).await {
        Ok(plan) => plan,
        Err(e) => return (Judged::Infrastructure, e.to_string()),
    };
    let (verdict, figures) =
        matrix::exercised_campaign(&plan, cluster, version, CampaignSize::default()).await;
    match verdict {
        Verdict::Pass => (Judged::Survived, format!("{setting}: passed ({figures})")),
        Verdict::Finding(text) => {
            let text = format!("{setting} ({}): {text}", plan.facts);
            (judge_finding(kill, &text), text)
        }
        Verdict::NotExercised(text) => (
            Judged::Unknown,
            format!("{setting}: the setting did not bite: {text}"),
        ),
        Verdict::Infrastructure(text) => (Judged::Infrastructure, format!("{setting}: {text}")),
    }
}
