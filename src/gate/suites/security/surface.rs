//! The attack-surface part of the gate's security suite ([`harness::security::surface`]):
//! one check per statement class, and `leasecheck gate --suite security --list`, which
//! prints the security checks and the statement classes (the data the suite runs).

use crate::gate::ctx::Ctx;
use crate::gate::listing::Listing;
use crate::gate::outcome::CheckResult;
use crate::gate::Size;
use harness::security::surface::{self, Control, Shape, SurfaceOptions, CLASSES, LIMITATIONS};
use std::fmt::Write;
use std::time::Duration;

/// The prefix of the surface checks' names in the report.
pub const PREFIX: &str = "surface: ";

/// The surface checks a run lists: the classes of its size on its major, and the generated
/// class; those that had a statement to run report.
pub fn names(listing: &Listing<'_>) -> Vec<String> {
    let full = listing.size == Size::Full;
    let classes = surface::classes_on(listing.major, full).map(|c| c.name);
    classes
        .chain([surface::REGCLASS_FUNCTIONS])
        .map(|class| format!("{PREFIX}{class}"))
        .collect()
}

/// Runs the attack-surface suite on `ctx`'s server: one check per statement class that had
/// a statement to run (quick classes, every class with `--full`).
pub async fn checks(ctx: &Ctx<'_>) -> Vec<CheckResult> {
    ctx.say("security", "attack surface");
    let options = SurfaceOptions {
        full: ctx.size == Size::Full,
        only: None,
    };
    match surface::run(ctx.cluster, &ctx.build.files.name, &options).await {
        Ok(outcomes) => outcomes
            .into_iter()
            .map(|o| CheckResult::judged(format!("{PREFIX}{}", o.class), o.result, o.elapsed))
            .collect(),
        Err(e) => vec![CheckResult::infrastructure(
            format!("{PREFIX}the suite"),
            format!("the attack-surface suite could not run: {e}"),
            Duration::ZERO,
        )],
    }
}

/// How long the whole surface suite may run before the gate calls it hung: a quick run
/// takes about 20 s on PostgreSQL 15 here, a full one a few minutes (every stalled
/// statement costs the 2 s call bound).
pub const TIMEOUT: Duration = Duration::from_secs(900);

/// The attack-surface part of `leasecheck gate --suite security --list` for `majors`: the
/// statement classes with their controls, and the documented limitations.
pub fn list(majors: &[u32]) -> String {
    // The security checks themselves are in each major's listing above this.
    let mut out = String::new();
    let _ = writeln!(
        out,
        "attack-surface statement classes (run against every object of their kind the \
         installed build has, as {}; * = quick, every class with --full; bound of a lease \
         call while one is in flight: {:?}):",
        surface::Role::ALL.map(surface::Role::name).join(", "),
        surface::BOUND
    );
    for class in CLASSES {
        let on: Vec<String> = majors
            .iter()
            .filter(|m| class.on(**m))
            .map(u32::to_string)
            .collect();
        if on.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "{} {:<45} {:<10} PG {:<14} {}{}\n      control: {}",
            if class.quick { "*" } else { " " },
            class.name,
            class.kind.to_string(),
            on.join(","),
            if class.shape == Shape::Autocommit {
                "(outside a transaction) "
            } else {
                ""
            },
            class.sql,
            control(&class.control)
        );
    }
    let _ = writeln!(
        out,
        "* {:<45} {:<10} every pg_catalog function with a regclass argument, on each relation's OID",
        surface::REGCLASS_FUNCTIONS,
        "table/index"
    );
    let _ = writeln!(out, "\ndocumented limitations (pinned, not refused):");
    for l in LIMITATIONS {
        let _ = writeln!(
            out,
            "  {:<35} as {} (PG {}{}{}): {:?}: {}",
            l.class,
            l.role,
            l.majors.0,
            if l.majors.1 >= 99 {
                "+".to_string()
            } else {
                format!("-{}", l.majors.1)
            },
            l.object.map(|o| format!(", on {o}")).unwrap_or_default(),
            l.effect,
            l.why
        );
    }
    out
}

fn control(control: &Control) -> String {
    match control {
        Control::V020(role) => format!("pg_lease 0.2.0, as {role}"),
        Control::Mutant(name, role) => format!("surface mutant {name}, as {role}"),
        Control::OwnerOnly => "owner only: a documented limitation".to_string(),
        Control::Never(why) => format!("none: {why}"),
    }
}
