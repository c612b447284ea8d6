//! Whether a campaign made progress around its faults: calls the target answered (a
//! result or an error, not a lost call) before the first fault began and after the last
//! one ended, and at what rate. A campaign without either exercised nothing around its
//! faults (the server never served before them, or never again after them): no verdict,
//! never a pass.

use model::History;

/// The evidence line (`Ok`) or why the campaign made no progress (`Err`); `None` when the
/// history holds no fault.
pub fn around_faults(history: &History) -> Option<Result<String, String>> {
    let first = history.nemeses.iter().map(|n| n.start).min()?;
    let last = history.nemeses.iter().map(|n| n.end).max()?;
    let answered = || history.ops.iter().filter(|o| !o.result.is_unknown());
    let before: Vec<u64> = answered()
        .filter(|o| o.complete <= first)
        .map(|o| o.complete)
        .collect();
    let after: Vec<u64> = answered()
        .filter(|o| o.invoke >= last)
        .map(|o| o.complete)
        .collect();
    let started = history.ops.iter().map(|o| o.invoke).min().unwrap_or(first);
    let ended = after.iter().copied().max().unwrap_or(last);
    let rate =
        |n: usize, from: u64, to: u64| n as f64 / (to.saturating_sub(from).max(1) as f64 / 1e9);
    match (before.len(), after.len()) {
        (0, _) => Some(Err(format!(
            "no call was answered before the first fault began (at {:.3} s)",
            first as f64 / 1e9
        ))),
        (_, 0) => Some(Err(format!(
            "no call was answered after the last fault ended (at {:.3} s)",
            last as f64 / 1e9
        ))),
        (b, a) => Some(Ok(format!(
            "progress around the faults: {b} calls answered before the first ({:.0}/s), {a} after the last ({:.0}/s)",
            rate(b, started, first),
            rate(a, last, ended)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{NemesisEffect, NemesisRecord, Op, OpRecord, OpResult, Outcome};

    fn op(id: u64, invoke: u64, complete: u64, answered: bool) -> OpRecord {
        OpRecord {
            id,
            process: 0,
            txn: None,
            call: Op::Inspect {
                key: Some("k".into()),
            },
            invoke,
            complete,
            server: None,
            result: match answered {
                true => OpResult::Ok(Outcome::Inspected(None)),
                false => OpResult::Unknown {
                    reason: "connection closed".into(),
                },
            },
        }
    }

    fn fault(start: u64, end: u64) -> NemesisRecord {
        NemesisRecord {
            id: 1,
            fault: "cut-reset".into(),
            start,
            end,
            effect: NemesisEffect::None,
            detail: String::new(),
        }
    }

    /// Answered calls on both sides pass with their rates; none before the first fault or
    /// none after the last (lost calls do not count) is no progress; no fault, no answer.
    #[test]
    fn a_campaign_needs_answered_calls_before_and_after_its_faults() {
        let mut h = History::default();
        assert_eq!(around_faults(&h), None);
        h.nemeses = vec![fault(1_000_000_000, 2_000_000_000)];
        h.ops = vec![
            op(1, 0, 500_000_000, true),
            op(2, 900_000_000, 1_500_000_000, false),
            op(3, 2_000_000_000, 2_500_000_000, true),
        ];
        let line = around_faults(&h).expect("a fault").expect("progress");
        assert!(
            line.contains("1 calls answered before the first (1/s), 1 after the last (2/s)"),
            "{line}"
        );
        let mut lost_after = h.clone();
        lost_after.ops[2] = op(3, 2_000_000_000, 2_500_000_000, false);
        let why = around_faults(&lost_after)
            .expect("a fault")
            .expect_err("no progress");
        assert!(why.contains("after the last fault ended"), "{why}");
        let mut none_before = h.clone();
        none_before.ops.remove(0);
        let why = around_faults(&none_before)
            .expect("a fault")
            .expect_err("no progress");
        assert!(why.contains("before the first fault began"), "{why}");
    }
}
