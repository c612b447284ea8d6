//! What the gate's judged histories covered: the spec branches each major's campaign,
//! stepped and fault checks took, as a line per major for the terminal and a table of
//! branches x (major, suite) for the HTML report, each branch never taken marked.

use super::html_text;
use crate::gate::outcome::{Branches, GateRun};
use model::branch::Branch;
use std::fmt::Write as _;

/// One line per major whose checks judged histories: `PG 15 coverage: reached N of the
/// spec's M branches (never: ...); campaign 23, stepped 18, faults 20`.
pub fn lines(run: &GateRun) -> String {
    let mut out = String::new();
    for m in &run.majors {
        let Some(total) = &m.coverage else { continue };
        let suites: Vec<String> = m
            .suites
            .iter()
            .filter_map(|s| Some(format!("{} {}", s.suite, reached(s.coverage.as_ref()?))))
            .collect();
        let _ = writeln!(
            out,
            "PG {} coverage: the judged histories {}; by suite: {}",
            m.major,
            total.line(),
            suites.join(", ")
        );
    }
    out
}

fn reached(b: &Branches) -> usize {
    Branch::ALL.len() - b.missing().len()
}

/// The branches x (major, suite) table: calls per cell, a branch no check took marked
/// `never`; empty when no check judged a history.
pub fn html(run: &GateRun) -> String {
    let columns: Vec<(String, &Branches)> = run
        .majors
        .iter()
        .flat_map(|m| {
            let suites = m.suites.iter().filter_map(move |s| {
                let c = s.coverage.as_ref()?;
                Some((format!("PG {} {}", m.major, s.suite), c))
            });
            suites.chain(
                m.coverage
                    .iter()
                    .map(move |c| (format!("PG {} all", m.major), c)),
            )
        })
        .collect();
    if columns.is_empty() {
        return String::new();
    }
    let mut out = String::from("<table class=\"coverage\"><tr><th>spec branch</th>");
    for (name, _) in &columns {
        let _ = write!(out, "<th>{}</th>", html_text(name));
    }
    out.push_str("</tr>\n");
    for branch in Branch::ALL {
        let _ = write!(out, "<tr><td>{}</td>", html_text(branch.name()));
        for (_, c) in &columns {
            match c.0.get(branch.name()) {
                Some(calls) => {
                    let _ = write!(out, "<td class=\"reached\">{calls}</td>");
                }
                None => out.push_str("<td class=\"never\">never</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::outcome::{CheckResult, MajorResult, SuiteResult};
    use std::time::Duration;

    fn check(branches: &[(Branch, u64)]) -> CheckResult {
        let calls = branches.iter().map(|(b, n)| (b.name().to_string(), *n));
        CheckResult {
            coverage: Some(Branches(calls.collect())),
            ..CheckResult::passed("c", Duration::ZERO)
        }
    }

    fn run_of(suites: Vec<SuiteResult>) -> GateRun {
        let major = MajorResult::of(15, Some("15.18".into()), "local", suites);
        GateRun::of_majors(vec![major])
    }

    #[test]
    fn suites_and_majors_sum_their_checks_branches_and_say_which_were_never_taken() {
        let campaign = SuiteResult::of(
            "campaign",
            vec![
                check(&[(Branch::AcquireFirstGrant, 2), (Branch::RenewOk, 1)]),
                check(&[(Branch::AcquireFirstGrant, 3)]),
            ],
            Duration::ZERO,
        );
        let faults = SuiteResult::of(
            "faults",
            vec![check(&[(Branch::InspectLive, 4)])],
            Duration::ZERO,
        );
        // A suite whose checks judged no history has no coverage, and adds nothing.
        let conformance = SuiteResult::of(
            "conformance",
            vec![CheckResult::passed("x", Duration::ZERO)],
            Duration::ZERO,
        );
        assert_eq!(conformance.coverage, None);
        let run = run_of(vec![campaign, faults, conformance]);
        let total = run.majors[0].coverage.as_ref().expect("summed");
        assert_eq!(total.0[Branch::AcquireFirstGrant.name()], 5);
        assert_eq!(total.0.len(), 3);
        let text = lines(&run);
        assert!(
            text.starts_with(&format!(
                "PG 15 coverage: the judged histories reached 3 of the spec's {} branches \
                 (never: acquire: grant after release, ",
                Branch::ALL.len()
            )),
            "{text}"
        );
        assert!(
            text.ends_with("; by suite: campaign 2, faults 1\n"),
            "{text}"
        );
        let page = html(&run);
        assert_eq!(
            page.matches("<tr>").count(),
            1 + Branch::ALL.len(),
            "{page}"
        );
        assert!(page.contains("<th>PG 15 campaign</th><th>PG 15 faults</th><th>PG 15 all</th>"));
        assert!(page.contains("<tr><td>inspect: live</td><td class=\"never\">never</td><td class=\"reached\">4</td><td class=\"reached\">4</td></tr>"), "{page}");
    }

    #[test]
    fn a_run_without_judged_histories_shows_no_coverage() {
        let run = run_of(vec![SuiteResult::of(
            "security",
            vec![CheckResult::passed("x", Duration::ZERO)],
            Duration::ZERO,
        )]);
        assert_eq!(lines(&run), "");
        assert_eq!(html(&run), "");
    }
}
