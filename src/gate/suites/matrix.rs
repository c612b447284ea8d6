//! The gate's "matrix" suite: the hostile-session matrix (`harness::matrix`) on the build
//! under test. Every setting a caller controls (collations, isolation levels, READ ONLY,
//! TimeZones with a DST change and mixed across sessions, DateStyle/IntervalStyle,
//! search_path, lock_timeout, statement_timeout): its control (the setting bites), a
//! campaign judged by the checker (and the exact UTC expiry, the refusals the setting
//! requires), and at full size the conformance suite under it.

use crate::gate::ctx::{bounded, is_hang, Ctx};
use crate::gate::listing::{Listing, Planned};
use crate::gate::outcome::{CheckResult, SuiteResult};
use crate::gate::Size;
use harness::judgement::Cause;
use harness::matrix::{self, CampaignSize, MatrixOptions, Setting, Verdict, Version};
use std::time::{Duration, Instant};

pub(super) const SUITE: super::Suite = super::Suite {
    name: "matrix",
    order: 60,
    cost: [6, 215],
    checks,
    run: |c| Box::pin(matrix(c)),
};

/// A setting's control, campaign (three at most while it does not show the setting at
/// work) and conformance suite take a minute or two; this bounds a hang.
const SETTING_TIMEOUT: Duration = Duration::from_secs(600);

/// Calls per campaign: quick 300, full 600 (a setting that needs more to show itself at
/// work, lock_timeout, keeps its own 1,500).
fn size(ctx: &Ctx<'_>) -> (CampaignSize, bool) {
    let ops = match ctx.size {
        Size::Quick => 300,
        Size::Full => 600,
    };
    let campaign = CampaignSize {
        ops,
        seed: ctx.seed,
        ..CampaignSize::default()
    };
    (campaign, ctx.size == Size::Full)
}

/// One check per setting.
pub(super) fn checks(_: &Listing<'_>) -> Vec<Planned> {
    let why = "it creates collations, schemas of planted objects and per-session settings \
               as the cluster's superuser";
    let settings = Setting::ALL.iter();
    settings
        .map(|s| Planned::on_managed(s.name(), why))
        .collect()
}

pub async fn matrix(ctx: &Ctx<'_>) -> SuiteResult {
    let start = Instant::now();
    let version = Version::Target(harness::campaign::Target::Build(ctx.build));
    let (campaign, conformance) = size(ctx);
    let options = MatrixOptions {
        size: campaign,
        under_test: version,
        compare_0_1_0: false,
        conformance,
        ..MatrixOptions::default()
    };
    let major = ctx.cluster.version().major;
    let mut checks = Vec::new();
    for (k, setting) in Setting::ALL.into_iter().enumerate() {
        ctx.say(
            "matrix",
            &format!("{setting} ({}/{})", k + 1, Setting::ALL.len()),
        );
        let options = MatrixOptions {
            size: CampaignSize {
                seed: campaign.seed.wrapping_add(k as u64),
                ..campaign
            },
            ..options
        };
        let run = async {
            let rows = matrix::run_one_setting(major, setting, ctx.cluster, &options).await;
            checks_of(setting, &rows)
        };
        let one = bounded(ctx, setting.name(), SETTING_TIMEOUT, async {
            let mut results = run.await;
            // One result per setting for the bound: the worst, the others kept below.
            results.sort_by_key(|c| std::cmp::Reverse(c.status));
            results.remove(0)
        })
        .await;
        let stop = is_hang(&one);
        checks.push(one);
        if stop {
            break;
        }
    }
    SuiteResult::of("matrix", checks, start.elapsed())
}

/// A setting's rows as one check result: a finding of any row fails it (naming the
/// setting's facts), a control that did not bite or a row without verdict is no verdict.
fn checks_of(setting: Setting, rows: &[matrix::Row]) -> Vec<CheckResult> {
    let elapsed = Duration::from_secs_f64(rows.iter().map(|r| r.elapsed.as_secs_f64()).sum());
    // The setting as the control describes it (what was set, e.g. the TimeZones).
    let setting_facts = rows
        .iter()
        .find(|r| r.suite == matrix::Suite::Control)
        .map(|r| r.figures.clone())
        .unwrap_or_default();
    let mut out = Vec::new();
    for row in rows {
        let what = format!("{setting} {} [{setting_facts}]", row.suite.name());
        let judgement = row.verdict.judgement().map_text(|why| match &row.verdict {
            Verdict::Finding(_) => format!("{what} ({}): {why}", row.figures),
            _ => format!("{what}: {why}"),
        });
        out.push(CheckResult::of(setting.name(), judgement, elapsed));
    }
    if out.is_empty() {
        out.push(CheckResult::infrastructure(
            setting.name(),
            Cause::Harness.message("the setting gave no row"),
            elapsed,
        ));
    }
    out
}
