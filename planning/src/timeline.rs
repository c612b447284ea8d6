//! A self-contained HTML timeline of a history and its verdict, in the manner of porcupine's
//! visualisation: one lane per process, each op a bar over its server-time window, coloured
//! by result, transactions outlined, nemesis events as bands across all lanes, and on a
//! violation the offending op, the other involved ops and the linearized prefix marked.
//!
//! The page loads nothing (no script, font, image or URL) and its Content-Security-Policy
//! forbids loading anything, so it opens offline and is safe to attach to a bug report.
//! Its size is bounded: at most [`MAX_OPS_DRAWN`] ops and [`MAX_NEMESES_DRAWN`] nemesis
//! events are drawn, each in a few hundred bytes, whatever the history's length.

use model::checker::{FoundBy, Step, Verdict, Violation, Windows};
use model::history::{
    History, NemesisEffect, NemesisRecord, OpId, OpRecord, OpResult, ProcessId, TxnEnd, TxnId,
    TxnRecord,
};
use model::{Op, Outcome, Row, Span, Ts};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write};

/// Most ops drawn on one page. Past it, only the ops nearest the last stretch of the
/// linearizable prefix and the offending op are drawn (the first ones without a violation).
pub const MAX_OPS_DRAWN: usize = 5_000;
/// Most nemesis events drawn on one page.
pub const MAX_NEMESES_DRAWN: usize = 1_000;
/// How many of the prefix's last ops, with the violation's ops, set the stretch a capped
/// page is centred on.
const PREFIX_TAIL: usize = 200;
/// Longest tooltip, in escaped bytes: keeps every op within a few hundred bytes whatever
/// its names or error message hold.
const TOOLTIP_BYTES: usize = 256;
/// Longest bar label, in escaped bytes.
const LABEL_BYTES: usize = 24;
/// Longest key or owner in a tooltip or label, in characters (the header lists keys whole).
const NAME_CHARS: usize = 32;
/// Most keys the header lists.
const KEYS_LISTED: usize = 20;

// Layout, in px.
/// Width of the lane labels' column, which stays put while the plot scrolls.
const LABEL_W: f64 = 56.0;
/// Room left of the first instant drawn.
const PLOT_PAD: f64 = 4.0;
const AXIS_H: f64 = 24.0;
const LANE_H: f64 = 22.0;
const BAR_H: f64 = 14.0;
const FOOT_H: f64 = 30.0;
/// Room right of the last known instant, where open-ended ops fade out.
const OPEN_TAIL: f64 = 48.0;
const MIN_BAR: f64 = 2.0;
/// Width of an op of median duration, when the page is not too wide for it.
const MEDIAN_OP_PX: f64 = 12.0;
const MIN_PLOT_W: f64 = 900.0;
const MAX_PLOT_W: f64 = 24_000.0;
/// Approximate width of one label character.
const CHAR_W: f64 = 6.0;

/// The HTML page of `history` judged `verdict`, headed `title`.
pub fn render(history: &History, verdict: &Verdict, title: &str) -> String {
    let windows = Windows::derive(history);
    let marks = Marks::of(verdict);
    let extent = Extent::reported(history);
    let scope = Scope::select(history, &windows, &extent, verdict.violation(), &marks);
    let frame = Frame::new(history, &windows, extent, &scope);
    let page = Page {
        history,
        windows: &windows,
        verdict,
        title,
        marks: &marks,
        scope: &scope,
        frame: &frame,
    };
    let mut html = String::with_capacity(8_192 + scope.ops.len() * 320);
    // Writing into a String cannot fail.
    let _ = page.write(&mut html);
    html
}

/// Everything one page is drawn from.
struct Page<'a> {
    history: &'a History,
    windows: &'a Windows,
    verdict: &'a Verdict,
    title: &'a str,
    marks: &'a Marks,
    scope: &'a Scope,
    frame: &'a Frame,
}

/// How the verdict singles an op out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    /// The op that could not be placed (the violation's first op).
    Offending,
    /// Another op the violation names.
    Involved,
    /// Placed in the longest linearizable prefix, at this 1-based position.
    Linearized(usize),
    Plain,
}

/// The ops a violation singles out.
#[derive(Debug, Default)]
struct Marks {
    offending: Option<OpId>,
    involved: BTreeSet<OpId>,
    /// Each prefix op's 1-based position among the prefix's steps.
    linearized: BTreeMap<OpId, usize>,
}

impl Marks {
    fn of(verdict: &Verdict) -> Marks {
        let Some(v) = verdict.violation() else {
            return Marks::default();
        };
        let linearized = v
            .prefix
            .iter()
            .enumerate()
            .filter_map(|(i, step)| match step {
                Step::Op(id) => Some((*id, i + 1)),
                _ => None,
            })
            .collect();
        Marks {
            offending: v.ops.first().copied(),
            involved: v.ops.iter().skip(1).copied().collect(),
            linearized,
        }
    }

    fn mark(&self, id: OpId) -> Mark {
        if self.offending == Some(id) {
            Mark::Offending
        } else if self.involved.contains(&id) {
            Mark::Involved
        } else if let Some(pos) = self.linearized.get(&id) {
            Mark::Linearized(*pos)
        } else {
            Mark::Plain
        }
    }

    fn singles_out(&self, id: OpId) -> bool {
        matches!(self.mark(id), Mark::Offending | Mark::Involved)
    }
}

/// The server instants the history reported. A derived window bound outside it is the
/// checker's stand-in for "no bound" (far past, far future), never a real instant.
#[derive(Clone, Copy, Debug)]
struct Extent {
    lo: i64,
    hi: i64,
}

impl Extent {
    fn reported(history: &History) -> Extent {
        let ops = history.ops.iter().filter_map(|o| o.server);
        let nemeses = history.nemeses.iter().filter_map(|n| match &n.effect {
            NemesisEffect::Restart { down, .. } => *down,
            NemesisEffect::Lapse { server, .. } => *server,
            NemesisEffect::None => None,
        });
        let instants = ops.chain(nemeses).flat_map(|s| [s.t0().0, s.t1().0]);
        let (lo, hi) = instants.fold((i64::MAX, i64::MIN), |(lo, hi), t| (lo.min(t), hi.max(t)));
        if lo > hi {
            Extent { lo: 0, hi: 0 }
        } else {
            Extent { lo, hi }
        }
    }

    fn knows(&self, t: Ts) -> bool {
        self.lo <= t.0 && t.0 <= self.hi
    }

    fn clamp(&self, t: Ts) -> i64 {
        t.0.clamp(self.lo, self.hi)
    }

    /// `t`'s end of a window: itself when known, else `otherwise`.
    fn end_or(&self, t: Ts, otherwise: i64) -> i64 {
        if self.knows(t) {
            t.0
        } else {
            otherwise
        }
    }
}

/// Which ops a page draws.
#[derive(Debug)]
struct Scope {
    /// Indices into `History::ops`, in history order.
    ops: Vec<usize>,
    /// The keys shown (a violation's); `None`: every key.
    keys: Option<Vec<String>>,
    other_keys: usize,
    other_key_ops: usize,
    /// Set when the cap left ops of the shown keys out.
    capped: Option<Capped>,
    /// Indices into `History::nemeses` of the events drawn, in history order.
    nemeses: Vec<usize>,
    /// Events in scope the cap on nemeses left out.
    nemeses_left_out: usize,
}

/// What the cap on ops drawn left out.
#[derive(Debug)]
struct Capped {
    /// Ops of the shown keys.
    selected: usize,
    /// The server-time stretch the drawn ops are nearest to (µs).
    focus: (i64, i64),
    around_violation: bool,
}

impl Scope {
    fn select(
        history: &History,
        windows: &Windows,
        extent: &Extent,
        violation: Option<&Violation>,
        marks: &Marks,
    ) -> Scope {
        let chosen = match violation {
            Some(v) => ops_of_keys(history, v),
            None => (0..history.ops.len()).collect(),
        };
        let (other_keys, other_key_ops) = others(history, &chosen);
        let mut scope = Scope {
            ops: chosen,
            keys: violation.map(|v| v.keys.clone()),
            other_keys,
            other_key_ops,
            capped: None,
            nemeses: Vec::new(),
            nemeses_left_out: 0,
        };
        scope.cap_ops(history, windows, extent, violation, marks);
        scope.pick_nemeses(history, windows, extent);
        scope
    }

    /// Past [`MAX_OPS_DRAWN`], keeps the ops nearest the violation (or the first ones).
    fn cap_ops(
        &mut self,
        history: &History,
        windows: &Windows,
        extent: &Extent,
        violation: Option<&Violation>,
        marks: &Marks,
    ) {
        if self.ops.len() <= MAX_OPS_DRAWN {
            return;
        }
        let focus = focus(history, windows, extent, violation);
        self.capped = Some(Capped {
            selected: self.ops.len(),
            focus,
            around_violation: violation.is_some(),
        });
        let ranked = Ranked {
            history,
            windows,
            extent,
            marks,
        };
        self.ops = ranked.nearest(&self.ops, focus);
    }

    /// The nemesis events in scope: all of them, or on a capped page those meeting the
    /// stretch of the ops drawn; at most [`MAX_NEMESES_DRAWN`].
    fn pick_nemeses(&mut self, history: &History, windows: &Windows, extent: &Extent) {
        let (lo, hi) = ops_range(windows, extent, &self.ops);
        let meets = |i: usize| {
            let w = windows.nemeses[i];
            let starts_after = extent.knows(w.t0()) && w.t0().0 > hi;
            let ends_before = extent.knows(w.t1()) && w.t1().0 < lo;
            !(starts_after || ends_before)
        };
        let capped = self.capped.is_some();
        let in_scope: Vec<usize> = history
            .nemeses
            .iter()
            .enumerate()
            .filter(|(i, n)| self.shows(n) && (!capped || meets(*i)))
            .map(|(i, _)| i)
            .collect();
        self.nemeses_left_out = in_scope.len().saturating_sub(MAX_NEMESES_DRAWN);
        self.nemeses = in_scope.into_iter().take(MAX_NEMESES_DRAWN).collect();
    }

    /// True when the page shows the nemesis event (a lapse only with its key).
    fn shows(&self, nemesis: &NemesisRecord) -> bool {
        match (&nemesis.effect, &self.keys) {
            (NemesisEffect::Lapse { key, .. }, Some(keys)) => keys.contains(key),
            _ => true,
        }
    }
}

/// The ops of a violation's keys: those naming one, the keyless calls of their transactions
/// (or every keyless call when the violation is on calls naming no key), and the ops the
/// violation names.
fn ops_of_keys(history: &History, v: &Violation) -> Vec<usize> {
    let keys: BTreeSet<&str> = v.keys.iter().map(String::as_str).collect();
    let on_keys = |op: &OpRecord| match op.call.key() {
        Some(k) => keys.contains(k.as_str()),
        None => keys.is_empty(),
    };
    let txns: BTreeSet<TxnId> = history
        .ops
        .iter()
        .filter(|o| on_keys(o))
        .filter_map(|o| o.txn)
        .collect();
    let in_txn =
        |op: &OpRecord| op.call.key().is_none() && op.txn.is_some_and(|t| txns.contains(&t));
    let named: BTreeSet<OpId> = v.ops.iter().copied().collect();
    history
        .ops
        .iter()
        .enumerate()
        .filter(|(_, o)| on_keys(o) || in_txn(o) || named.contains(&o.id))
        .map(|(i, _)| i)
        .collect()
}

/// How many keys and ops `chosen` (sorted indices) leaves out.
fn others(history: &History, chosen: &[usize]) -> (usize, usize) {
    let shown: BTreeSet<&String> = chosen
        .iter()
        .filter_map(|i| history.ops[*i].call.key())
        .collect();
    let left_out: BTreeSet<&String> = history
        .ops
        .iter()
        .filter_map(|o| o.call.key())
        .filter(|k| !shown.contains(k))
        .collect();
    (left_out.len(), history.ops.len() - chosen.len())
}

/// The server-time stretch a capped page centres on: the windows of the violation's ops and
/// of the prefix's last ops; without a violation, the history's first instant.
fn focus(
    history: &History,
    windows: &Windows,
    extent: &Extent,
    violation: Option<&Violation>,
) -> (i64, i64) {
    let Some(v) = violation else {
        return (extent.lo, extent.lo);
    };
    let index: BTreeMap<OpId, usize> = history
        .ops
        .iter()
        .enumerate()
        .map(|(i, o)| (o.id, i))
        .collect();
    let prefix_tail = v.prefix.iter().rev().filter_map(|s| match s {
        Step::Op(id) => Some(*id),
        _ => None,
    });
    let ids = v.ops.iter().copied().chain(prefix_tail.take(PREFIX_TAIL));
    let named = ids.filter_map(|id| index.get(&id)).map(|i| windows.ops[*i]);
    let (lo, hi) = known_span(extent, named);
    if lo > hi {
        (extent.lo, extent.lo)
    } else {
        (lo, hi)
    }
}

/// Ranks ops by closeness to a stretch of server time.
struct Ranked<'a> {
    history: &'a History,
    windows: &'a Windows,
    extent: &'a Extent,
    marks: &'a Marks,
}

impl Ranked<'_> {
    /// The [`MAX_OPS_DRAWN`] ops of `chosen` nearest `focus`, the violation's ops first,
    /// in history order.
    fn nearest(&self, chosen: &[usize], focus: (i64, i64)) -> Vec<usize> {
        let mut ranked: Vec<(bool, i64, usize)> = chosen
            .iter()
            .map(|&i| {
                let named = self.marks.singles_out(self.history.ops[i].id);
                (!named, self.gap(i, focus), i)
            })
            .collect();
        ranked.sort_unstable();
        let mut kept: Vec<usize> = ranked
            .into_iter()
            .take(MAX_OPS_DRAWN)
            .map(|(_, _, i)| i)
            .collect();
        kept.sort_unstable();
        kept
    }

    /// Server time between op `i`'s window and `focus` (0 when they overlap).
    fn gap(&self, i: usize, focus: (i64, i64)) -> i64 {
        let w = self.windows.ops[i];
        let (t0, t1) = (self.extent.clamp(w.t0()), self.extent.clamp(w.t1()));
        if t1 < focus.0 {
            focus.0.saturating_sub(t1)
        } else if t0 > focus.1 {
            t0.saturating_sub(focus.1)
        } else {
            0
        }
    }
}

/// Where things go on the page: the server-time range drawn and the lanes.
#[derive(Debug)]
struct Frame {
    /// The instant times are labelled from: the history's first reported op instant, as in
    /// the checker's explanations.
    origin: i64,
    /// The server-time range drawn (µs).
    lo: i64,
    hi: i64,
    /// Width of the drawn range, px.
    plot_w: f64,
    /// Processes in lane order (by their first op).
    lanes: Vec<ProcessId>,
    lane_of: BTreeMap<ProcessId, usize>,
    extent: Extent,
}

impl Frame {
    fn new(history: &History, windows: &Windows, extent: Extent, scope: &Scope) -> Frame {
        let origin = history
            .ops
            .iter()
            .filter_map(|o| o.server.map(|s| s.t0().0))
            .min()
            .unwrap_or(extent.lo);
        let (lo, hi) = drawn_range(windows, &extent, scope);
        let lanes = lanes(history, &scope.ops);
        let lane_of = lanes.iter().enumerate().map(|(i, p)| (*p, i)).collect();
        Frame {
            origin,
            lo,
            hi,
            plot_w: plot_width(windows, &extent, &scope.ops, (lo, hi)),
            lanes,
            lane_of,
            extent,
        }
    }

    /// The x of server instant `t`, clamped to the drawn range.
    fn x(&self, t: Ts) -> f64 {
        let t = self.extent.clamp(t).clamp(self.lo, self.hi);
        PLOT_PAD + distance(self.lo, t) / distance(self.lo, self.hi).max(1.0) * self.plot_w
    }

    /// The x open-ended bars run to.
    fn right_edge(&self) -> f64 {
        PLOT_PAD + self.plot_w + OPEN_TAIL
    }

    fn svg_width(&self) -> f64 {
        self.right_edge() + 8.0
    }

    fn lanes_h(&self) -> f64 {
        self.lanes.len() as f64 * LANE_H
    }

    fn lane_y(&self, process: ProcessId) -> Option<f64> {
        self.lane_of
            .get(&process)
            .map(|i| AXIS_H + *i as f64 * LANE_H)
    }

    /// `t` relative to the origin, in ms with µs precision (`+1.234`).
    fn ms(&self, t: Ts) -> String {
        relative_ms(t.0, self.origin)
    }

    /// A window bound: relative ms when known, `-inf`/`+inf` when the checker had none.
    fn bound(&self, t: Ts) -> String {
        if self.extent.knows(t) {
            self.ms(t)
        } else if t.0 < self.extent.lo {
            "-inf".to_string()
        } else {
            "+inf".to_string()
        }
    }
}

/// The server-time range the known bounds of the ops and nemesis events drawn span (never
/// empty).
fn drawn_range(windows: &Windows, extent: &Extent, scope: &Scope) -> (i64, i64) {
    let ops = scope.ops.iter().map(|i| windows.ops[*i]);
    let nemeses = scope.nemeses.iter().map(|i| windows.nemeses[*i]);
    let (lo, hi) = known_span(extent, ops.chain(nemeses));
    if lo > hi {
        (extent.lo, extent.lo.saturating_add(1))
    } else {
        (lo, hi.max(lo.saturating_add(1)))
    }
}

/// The server-time range the known bounds of `ops` span (`lo > hi` when there are none).
fn ops_range(windows: &Windows, extent: &Extent, ops: &[usize]) -> (i64, i64) {
    known_span(extent, ops.iter().map(|i| windows.ops[*i]))
}

/// The least start and greatest known end of `windows` (an unknown end counts as its start).
fn known_span(extent: &Extent, windows: impl Iterator<Item = Span>) -> (i64, i64) {
    windows.fold((i64::MAX, i64::MIN), |(lo, hi), w| {
        let t0 = extent.clamp(w.t0());
        (lo.min(t0), hi.max(extent.end_or(w.t1(), t0)))
    })
}

/// The processes of the drawn ops, ordered by their first op's invoke.
fn lanes(history: &History, ops: &[usize]) -> Vec<ProcessId> {
    let mut first: BTreeMap<ProcessId, u64> = BTreeMap::new();
    for op in ops.iter().map(|i| &history.ops[*i]) {
        let at = first.entry(op.process).or_insert(op.invoke);
        *at = (*at).min(op.invoke);
    }
    let mut lanes: Vec<(u64, ProcessId)> = first.into_iter().map(|(p, at)| (at, p)).collect();
    lanes.sort_unstable();
    lanes.into_iter().map(|(_, p)| p).collect()
}

/// Enough width that an op of median duration gets [`MEDIAN_OP_PX`]: lanes of retired
/// processes hold few ops each, so only durations say how crowded the time axis is.
fn plot_width(windows: &Windows, extent: &Extent, ops: &[usize], range: (i64, i64)) -> f64 {
    let mut durations: Vec<i64> = ops
        .iter()
        .map(|i| windows.ops[*i])
        .filter(|w| extent.knows(w.t0()) && extent.knows(w.t1()))
        .map(|w| w.t1().0.saturating_sub(w.t0().0))
        .collect();
    if durations.is_empty() {
        return MIN_PLOT_W;
    }
    let mid = durations.len() / 2;
    let median = *durations.select_nth_unstable(mid).1;
    (distance(range.0, range.1) / median.max(1) as f64 * MEDIAN_OP_PX).clamp(MIN_PLOT_W, MAX_PLOT_W)
}

/// `b - a` in µs, exact enough for pixels and never overflowing (recorded times may be
/// anywhere in `i64`).
fn distance(a: i64, b: i64) -> f64 {
    (i128::from(b) - i128::from(a)) as f64
}

fn relative_ms(t: i64, origin: i64) -> String {
    let d = i128::from(t) - i128::from(origin);
    let sign = if d < 0 { "-" } else { "+" };
    let a = d.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1_000, a % 1_000)
}

const STYLE: &str = "body{font:13px system-ui,sans-serif;margin:1em;color:#222}\
h1{font-size:1.3em}h2{font-size:1.1em;margin:.3em 0}\
.verdict{padding:.5em 1em;border-left:6px solid #888;background:#f7f7f7;margin-bottom:.8em}\
.verdict.violation{border-color:#e11d48}.verdict.linearizable{border-color:#1a7f37}\
.verdict.unknown{border-color:#a16207}\
pre{background:#fff;border:1px solid #ddd;padding:.5em;overflow:auto;max-height:28em}\
.note{color:#555}.legend span{margin-right:1.2em;white-space:nowrap}\
.sw{display:inline-block;width:1.6em;height:.9em;vertical-align:middle;margin-right:.3em;border:1px solid #888}\
.sw-ok{background:#7fb3e6}.sw-fail{background:#e6a07f}.sw-unk{background:#c9c9c9}\
.sw-open{background:linear-gradient(90deg,#999,#fff)}\
.sw-offending{background:#e11d48;border:2px solid #7f1d1d}.sw-involved{border:2px dashed #d97706}\
.sw-linearized{border:2px solid #1a7f37}.sw-txn{border:1px solid #1a7f37;background:none}\
.sw-restart{background:#dc262640}.sw-lapse{background:#7c3aed40}.sw-other{background:#6b728040}\
.tl{display:flex;border:1px solid #ccc}.labels{flex:none;border-right:1px solid #ccc}\
.plot{overflow-x:auto;flex:1}svg{display:block}\
svg text{font-size:10px}.lane{fill:#fafafa}.lane.alt{fill:#f0f0f0}\
.tick{stroke:#ddd}.pl{font-weight:bold}\
.op rect{stroke:#555;stroke-width:.5}.op.ok rect{fill:#7fb3e6}.op.fail rect{fill:#e6a07f}\
.op.unk rect{fill:#c9c9c9}.op.open rect{fill:url(#fade);stroke:none}\
.op.linearized rect{stroke:#1a7f37;stroke-width:1.5}\
.op.involved rect{stroke:#d97706;stroke-width:2;stroke-dasharray:3 2}\
.op.offending rect{fill:#e11d48;stroke:#7f1d1d;stroke-width:3}\
g:target rect{stroke:#000;stroke-width:4}\
.txn rect{fill:none;stroke-width:1.2}.txn.commit rect{stroke:#1a7f37}\
.txn.rollback rect{stroke:#b91c1c;stroke-dasharray:4 3}.txn.unknown rect{stroke:#a16207;stroke-dasharray:1 2}\
.nem rect{opacity:.22}.nem.restart rect{fill:#dc2626}.nem.lapse rect{fill:#7c3aed}\
.nem.other rect{fill:#6b7280}";

impl Page<'_> {
    fn write(&self, out: &mut String) -> fmt::Result {
        out.push_str(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
             style-src 'unsafe-inline'\">\n",
        );
        writeln!(
            out,
            "<title>{}</title>\n<style>{STYLE}</style></head>\n<body>",
            esc(self.title)
        )?;
        writeln!(out, "<h1>{}</h1>", esc(self.title))?;
        self.write_verdict(out)?;
        self.write_scope(out)?;
        self.write_legend(out)?;
        self.write_svg(out)?;
        out.push_str("</body></html>\n");
        Ok(())
    }

    fn write_verdict(&self, out: &mut String) -> fmt::Result {
        match self.verdict {
            Verdict::Violation(v) => self.write_violation(out, v),
            Verdict::Linearizable(_) => writeln!(
                out,
                "<section class=\"verdict linearizable\"><h2>Linearizable</h2><p>{}</p></section>",
                esc(&self.verdict.to_string())
            ),
            Verdict::Unknown(_) => writeln!(
                out,
                "<section class=\"verdict unknown\"><h2>Unknown: not a pass</h2><p>{}</p></section>",
                esc(&self.verdict.to_string())
            ),
        }
    }

    fn write_violation(&self, out: &mut String, v: &Violation) -> fmt::Result {
        let inv = v.invariant;
        out.push_str("<section class=\"verdict violation\">");
        writeln!(
            out,
            "<h2>VIOLATION of invariant {}: {}</h2>\n<p>Invariant {}: <q>{}</q></p>",
            inv.number(),
            esc(inv.property_name()),
            inv.number(),
            esc(inv.statement())
        )?;
        let found_by = match v.found_by {
            FoundBy::Precheck(name) => format!("the pre-check {name:?}"),
            FoundBy::Search => "the linearization search".to_string(),
        };
        writeln!(
            out,
            "<p>Keys: {}. Found by {}.</p>",
            esc(&quoted_keys(&v.keys)),
            esc(&found_by)
        )?;
        if let Some(m) = v.diagnosis {
            writeln!(
                out,
                "<p>Diagnosis: consistent with the known bug <b>{}</b>: {}.</p>",
                esc(m.name()),
                esc(m.description())
            )?;
        }
        self.write_named_ops(out, v)?;
        writeln!(out, "<pre>{}</pre></section>", esc(&v.explanation))
    }

    /// Links to the offending and involved ops, and the prefix's length.
    fn write_named_ops(&self, out: &mut String, v: &Violation) -> fmt::Result {
        out.push_str("<p>");
        if let Some(first) = v.ops.first() {
            write!(
                out,
                "Offending op: <a href=\"#op-{first}\">op {first}</a>. "
            )?;
        }
        if v.ops.len() > 1 {
            out.push_str("Also involved:");
            for id in &v.ops[1..] {
                write!(out, " <a href=\"#op-{id}\">op {id}</a>")?;
            }
            out.push_str(". ");
        }
        if v.prefix.is_empty() {
            let why = match v.found_by {
                FoundBy::Precheck(_) => "A pre-check's finding reports no linearizable prefix.",
                FoundBy::Search => "The longest linearizable prefix is empty.",
            };
            return writeln!(out, "{why}</p>");
        }
        writeln!(
            out,
            "Longest linearizable prefix: {} entries ({} ops, marked linearized).</p>",
            v.prefix.len(),
            self.marks.linearized.len()
        )
    }

    fn write_scope(&self, out: &mut String) -> fmt::Result {
        let scope = self.scope;
        out.push_str("<p class=\"note\">");
        match &scope.keys {
            Some(keys) => write!(
                out,
                "Showing the violation's keys {} ({} ops); {} other keys with {} ops omitted.",
                esc(&quoted_keys(keys)),
                scope
                    .capped
                    .as_ref()
                    .map_or(scope.ops.len(), |c| c.selected),
                scope.other_keys,
                scope.other_key_ops
            )?,
            None => write!(out, "Showing all keys ({} ops).", self.history.ops.len())?,
        }
        if let Some(c) = &scope.capped {
            self.write_capped(out, c)?;
        }
        if scope.nemeses_left_out > 0 {
            write!(
                out,
                " {} more nemesis events not drawn (at most {MAX_NEMESES_DRAWN} are).",
                scope.nemeses_left_out
            )?;
        }
        out.push_str("</p>\n");
        Ok(())
    }

    fn write_capped(&self, out: &mut String, c: &Capped) -> fmt::Result {
        let around = if c.around_violation {
            format!(
                "nearest in server time to the last stretch of the linearizable prefix and the \
                 offending op ([{}, {}] ms)",
                relative_ms(c.focus.0, self.frame.origin),
                relative_ms(c.focus.1, self.frame.origin)
            )
        } else {
            "first in server time".to_string()
        };
        write!(
            out,
            " Too many to draw: only the {} ops {around} are drawn; {} are left out.",
            self.scope.ops.len(),
            c.selected - self.scope.ops.len()
        )
    }

    fn write_legend(&self, out: &mut String) -> fmt::Result {
        let mut items = vec![
            ("ok", "ok"),
            ("fail", "fail"),
            ("unk", "unknown"),
            ("open", "unknown, open-ended"),
            ("txn", "transaction"),
            ("restart", "restart (downtime)"),
            ("lapse", "injected lapse"),
            ("other", "other fault"),
        ];
        if self.verdict.violation().is_some() {
            items.extend([
                ("offending", "offending op"),
                ("involved", "involved op"),
                ("linearized", "linearized (in the prefix)"),
            ]);
        }
        out.push_str("<p class=\"legend\">");
        for (class, text) in items {
            write!(out, "<span><i class=\"sw sw-{class}\"></i>{text}</span>")?;
        }
        out.push_str(
            "Hover a bar for its call and result; server times in ms from the first reported \
             instant.</p>\n",
        );
        Ok(())
    }

    fn write_svg(&self, out: &mut String) -> fmt::Result {
        let f = self.frame;
        let height = AXIS_H + f.lanes_h() + FOOT_H;
        writeln!(
            out,
            "<div class=\"tl\"><svg class=\"labels\" width=\"{LABEL_W:.0}\" height=\"{height:.0}\">"
        )?;
        self.write_lane_labels(out)?;
        writeln!(
            out,
            "</svg><div class=\"plot\"><svg id=\"plot\" width=\"{:.0}\" height=\"{height:.0}\" \
             role=\"img\">\n<defs><linearGradient id=\"fade\"><stop offset=\"0\" \
             stop-color=\"#999\"/><stop offset=\"1\" stop-color=\"#999\" stop-opacity=\"0\"/>\
             </linearGradient></defs>",
            f.svg_width()
        )?;
        self.write_lanes(out)?;
        self.write_axis(out)?;
        self.write_nemeses(out)?;
        self.write_txns(out)?;
        for i in &self.scope.ops {
            self.write_op(out, *i)?;
        }
        out.push_str("</svg></div></div>\n");
        Ok(())
    }

    /// The lanes' process ids, in a column of their own so they stay in view.
    fn write_lane_labels(&self, out: &mut String) -> fmt::Result {
        for (i, process) in self.frame.lanes.iter().enumerate() {
            let y = AXIS_H + i as f64 * LANE_H + LANE_H - 7.0;
            writeln!(
                out,
                "<text class=\"pl\" x=\"4\" y=\"{y:.0}\">p{process}</text>"
            )?;
        }
        Ok(())
    }

    /// Alternating lane backgrounds across the plot, as one rect tiled by a pattern so that
    /// a lane costs no bytes.
    fn write_lanes(&self, out: &mut String) -> fmt::Result {
        let f = self.frame;
        writeln!(
            out,
            "<defs><pattern id=\"lanes\" y=\"{AXIS_H:.0}\" width=\"8\" height=\"{:.0}\" \
             patternUnits=\"userSpaceOnUse\"><rect class=\"lane\" width=\"8\" \
             height=\"{LANE_H:.0}\"/><rect class=\"lane alt\" y=\"{LANE_H:.0}\" width=\"8\" \
             height=\"{LANE_H:.0}\"/></pattern></defs><rect x=\"0\" y=\"{AXIS_H:.0}\" \
             width=\"{:.0}\" height=\"{:.0}\" fill=\"url(#lanes)\"/>",
            2.0 * LANE_H,
            f.svg_width(),
            f.lanes_h()
        )
    }

    fn write_axis(&self, out: &mut String) -> fmt::Result {
        let f = self.frame;
        let step = tick_step(distance(f.lo, f.hi), f.plot_w);
        let bottom = AXIS_H + f.lanes_h();
        // Ticks sit on multiples of the step from the origin, so labels are round numbers.
        let first = (i128::from(f.lo) - i128::from(f.origin)).div_euclid(i128::from(step));
        let last = (i128::from(f.hi) - i128::from(f.origin)).div_euclid(i128::from(step));
        let decimals = tick_decimals(step);
        for k in first..=last {
            let t = i128::from(f.origin) + k * i128::from(step);
            let Ok(t) = i64::try_from(t) else { continue };
            if t < f.lo {
                continue;
            }
            let x = f.x(Ts(t));
            let ms = distance(f.origin, t) / 1_000.0;
            writeln!(
                out,
                "<line class=\"tick\" x1=\"{x:.1}\" y1=\"{:.0}\" x2=\"{x:.1}\" y2=\"{bottom:.0}\"/>\
                 <text x=\"{:.1}\" y=\"12\">{ms:.decimals$} ms</text>",
                AXIS_H - 6.0,
                x + 2.0
            )?;
        }
        Ok(())
    }

    fn write_nemeses(&self, out: &mut String) -> fmt::Result {
        for (row, i) in self.scope.nemeses.iter().enumerate() {
            self.write_nemesis(out, *i, row % 2)?;
        }
        Ok(())
    }

    /// Nemesis event `i` as a band, its label on footer row `row` (0 or 1).
    fn write_nemesis(&self, out: &mut String, i: usize, row: usize) -> fmt::Result {
        let (n, w, f) = (
            &self.history.nemeses[i],
            self.windows.nemeses[i],
            self.frame,
        );
        let (class, label) = match &n.effect {
            NemesisEffect::Restart { clean: true, .. } => ("restart", "restart".to_string()),
            NemesisEffect::Restart { clean: false, .. } => ("restart", "crash".to_string()),
            NemesisEffect::Lapse { key, .. } => ("lapse", format!("lapse {}", name(key))),
            NemesisEffect::None => ("other", n.fault.clone()),
        };
        let x0 = f.x(w.t0());
        let x1 = if f.extent.knows(w.t1()) {
            f.x(w.t1())
        } else {
            x0
        };
        let detail = if n.detail.is_empty() {
            String::new()
        } else {
            format!(" · {}", n.detail)
        };
        let tip = format!(
            "nemesis {} · {} · {} · server [{}, {}] ms{detail}",
            n.id,
            n.fault,
            effect_text(&n.effect),
            f.bound(w.t0()),
            f.bound(w.t1()),
        );
        // Alternate label rows so the labels of close events do not overprint.
        let label_y = AXIS_H + f.lanes_h() + 12.0 * (row as f64 + 1.0);
        writeln!(
            out,
            "<g class=\"nem {class}\"><title>{}</title><rect x=\"{x0:.1}\" y=\"{AXIS_H:.0}\" \
             width=\"{:.1}\" height=\"{:.0}\"/><text x=\"{x0:.1}\" y=\"{:.0}\">{}</text></g>",
            esc_capped(&tip, TOOLTIP_BYTES),
            (x1 - x0).max(MIN_BAR),
            f.lanes_h(),
            label_y,
            esc_capped(&label, 48)
        )
    }

    fn write_txns(&self, out: &mut String) -> fmt::Result {
        let records: BTreeMap<TxnId, &TxnRecord> =
            self.history.txns.iter().map(|t| (t.id, t)).collect();
        for (txn, span) in self.txn_spans() {
            self.write_txn(out, txn, &span, records.get(&txn).copied())?;
        }
        Ok(())
    }

    /// Each drawn transaction's process and x-range.
    fn txn_spans(&self) -> BTreeMap<TxnId, TxnSpan> {
        let mut spans: BTreeMap<TxnId, TxnSpan> = BTreeMap::new();
        for i in &self.scope.ops {
            let op = &self.history.ops[*i];
            let Some(txn) = op.txn else { continue };
            let (x0, x1) = self.bar(*i);
            let span = spans.entry(txn).or_insert(TxnSpan {
                process: op.process,
                x0,
                x1,
            });
            span.x0 = span.x0.min(x0);
            span.x1 = span.x1.max(x1);
        }
        spans
    }

    fn write_txn(
        &self,
        out: &mut String,
        txn: TxnId,
        span: &TxnSpan,
        record: Option<&TxnRecord>,
    ) -> fmt::Result {
        let Some(y) = self.frame.lane_y(span.process) else {
            return Ok(());
        };
        let (class, mark, end) = match record.map(|r| r.end) {
            Some(TxnEnd::Commit) => ("commit", "C", "committed"),
            Some(TxnEnd::Rollback) => ("rollback", "R", "rolled back"),
            Some(TxnEnd::Unknown) => ("unknown", "?", "end unknown (COMMIT answer lost)"),
            None => ("unknown", "?", "no record of its end"),
        };
        let isolation = record
            .map(|r| format!(" · {}", r.isolation.sql()))
            .unwrap_or_default();
        writeln!(
            out,
            "<g class=\"txn {class}\"><title>txn {txn}{isolation} · {end}</title><rect \
             x=\"{:.1}\" y=\"{:.0}\" width=\"{:.1}\" height=\"{:.0}\"/>\
             <text x=\"{:.1}\" y=\"{:.0}\">{mark}</text></g>",
            span.x0 - 2.0,
            y + 1.0,
            span.x1 - span.x0 + 4.0,
            LANE_H - 2.0,
            span.x1 + 3.0,
            y + LANE_H - 7.0
        )
    }

    /// The x-range of op `i`'s bar: an open-ended op runs to the right edge.
    fn bar(&self, i: usize) -> (f64, f64) {
        let (op, w, f) = (&self.history.ops[i], self.windows.ops[i], self.frame);
        let x0 = f.x(w.t0());
        let x1 = if is_open_ended(op, w.t1(), f) {
            f.right_edge()
        } else {
            f.x(w.t1())
        };
        (x0, x1.max(x0 + MIN_BAR))
    }

    fn write_op(&self, out: &mut String, i: usize) -> fmt::Result {
        let (op, f) = (&self.history.ops[i], self.frame);
        let Some(y) = f.lane_y(op.process) else {
            return Ok(());
        };
        let (x0, x1) = self.bar(i);
        let mark = self.marks.mark(op.id);
        let open = if is_open_ended(op, self.windows.ops[i].t1(), f) {
            " open"
        } else {
            ""
        };
        let y = y + (LANE_H - BAR_H) / 2.0;
        write!(
            out,
            "<g id=\"op-{}\" class=\"op {}{open}{}\"><title>{}</title><rect x=\"{x0:.1}\" \
             y=\"{y:.0}\" width=\"{:.1}\" height=\"{BAR_H:.0}\"/>",
            op.id,
            result_class(&op.result),
            mark_class(mark),
            esc_capped(&self.tooltip(i, mark), TOOLTIP_BYTES),
            x1 - x0
        )?;
        let room = (((x1 - x0) / CHAR_W) as usize).min(LABEL_BYTES);
        if room >= 4 {
            write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.0}\">{}</text>",
                x0 + 2.0,
                y + BAR_H - 3.0,
                esc_capped(&short_label(op), room)
            )?;
        }
        out.push_str("</g>\n");
        Ok(())
    }

    /// The op's mark, call, result and window, mark first so a long call never hides it.
    fn tooltip(&self, i: usize, mark: Mark) -> String {
        let (op, w, f) = (&self.history.ops[i], self.windows.ops[i], self.frame);
        let mark = match mark {
            Mark::Offending => "OFFENDING op · ".to_string(),
            Mark::Involved => "involved in the violation · ".to_string(),
            Mark::Linearized(pos) => format!("linearized (prefix entry {pos}) · "),
            Mark::Plain => String::new(),
        };
        let txn = op.txn.map(|t| format!(" · txn {t}")).unwrap_or_default();
        let derived = if op.server.is_none() {
            " (derived)"
        } else {
            ""
        };
        format!(
            "{mark}op {} · process {}{txn}\n{} → {}\nserver [{}, {}] ms{derived}",
            op.id,
            op.process,
            model::checker::describe_call(&op.call),
            result_text(&op.result, f.origin),
            f.bound(w.t0()),
            f.bound(w.t1())
        )
    }
}

/// One transaction's outline.
#[derive(Debug)]
struct TxnSpan {
    process: ProcessId,
    x0: f64,
    x1: f64,
}

/// An op whose effect may land any time after its invoke: an unknown outcome, or a window
/// the checker left without an end.
fn is_open_ended(op: &OpRecord, t1: Ts, frame: &Frame) -> bool {
    op.result.is_unknown() || !frame.extent.knows(t1)
}

fn result_class(result: &OpResult) -> &'static str {
    if result.is_unknown() {
        "unk"
    } else if matches!(result, OpResult::Ok(_)) {
        "ok"
    } else {
        "fail"
    }
}

fn mark_class(mark: Mark) -> &'static str {
    match mark {
        Mark::Offending => " offending",
        Mark::Involved => " involved",
        Mark::Linearized(_) => " linearized",
        Mark::Plain => "",
    }
}

/// A round tick step (1, 2 or 5 times a power of ten µs) giving about one tick per 100 px.
fn tick_step(span_us: f64, plot_w: f64) -> i64 {
    let wanted = (plot_w / 100.0).max(1.0);
    let raw = (span_us / wanted).max(1.0);
    let mut power: i64 = 1;
    while (power as f64) * 10.0 <= raw && power < i64::MAX / 100 {
        power *= 10;
    }
    [1, 2, 5, 10]
        .into_iter()
        .map(|m| m * power)
        .find(|s| *s as f64 >= raw)
        .unwrap_or(10 * power)
}

/// Decimals of a tick label in ms that show the step exactly.
fn tick_decimals(step_us: i64) -> usize {
    match step_us {
        s if s % 1_000 == 0 => 0,
        s if s % 100 == 0 => 1,
        s if s % 10 == 0 => 2,
        _ => 3,
    }
}

fn quoted_keys(keys: &[String]) -> String {
    if keys.is_empty() {
        return "(calls naming no key)".to_string();
    }
    let quoted: Vec<String> = keys
        .iter()
        .take(KEYS_LISTED)
        .map(|k| format!("{k:?}"))
        .collect();
    let more = keys.len().saturating_sub(KEYS_LISTED);
    if more > 0 {
        format!("{} and {more} more", quoted.join(", "))
    } else {
        quoted.join(", ")
    }
}

/// A key or owner as a quoted string, cut to [`NAME_CHARS`] characters.
fn name(n: &str) -> String {
    if n.chars().count() <= NAME_CHARS {
        format!("{n:?}")
    } else {
        let cut: String = n.chars().take(NAME_CHARS).collect();
        format!("{cut:?}…")
    }
}

fn result_text(result: &OpResult, origin: i64) -> String {
    match result {
        OpResult::Ok(o) => outcome_text(o, origin),
        OpResult::Fail { sqlstate, message } => format!("fail {sqlstate} ({message})"),
        OpResult::Unknown { reason } => format!("unknown ({reason})"),
    }
}

fn outcome_text(o: &Outcome<String>, origin: i64) -> String {
    let until = |t: &Ts| relative_ms(t.0, origin);
    match o {
        Outcome::Acquired { epoch, expires_at } => {
            format!("acquired epoch {epoch} until {} ms", until(expires_at))
        }
        Outcome::Renewed { expires_at } => format!("ok until {} ms", until(expires_at)),
        Outcome::Inspected(Some(Row {
            held: true,
            owner: Some(owner),
            epoch,
            expires_at: Some(e),
        })) => format!(
            "held by {} epoch {epoch} until {} ms",
            name(owner),
            until(e)
        ),
        Outcome::Inspected(Some(Row {
            held: false,
            owner: None,
            epoch,
            expires_at: None,
        })) => format!("not held, epoch {epoch}"),
        // anything else exactly as recorded (an inconsistent row is a finding)
        Outcome::Inspected(Some(row)) => format!(
            "row {{held: {}, owner: {}, epoch: {}, expires_at: {}}}",
            row.held,
            row.owner.as_deref().map_or("NULL".to_string(), name),
            row.epoch,
            row.expires_at
                .map_or("NULL".to_string(), |e| format!("{} ms", until(&e)))
        ),
        other => status_text(other).to_string(),
    }
}

/// The outcomes that carry no value.
fn status_text(o: &Outcome<String>) -> &'static str {
    match o {
        Outcome::Acquired { .. } => "acquired",
        Outcome::Denied => "denied",
        Outcome::Timeout => "wait exhausted",
        Outcome::Renewed { .. } | Outcome::Released => "ok",
        Outcome::NotOwner => "not_owner",
        Outcome::Lapsed => "lapsed",
        Outcome::EpochMismatch => "epoch_mismatch",
        Outcome::Inspected(None) => "no row",
        Outcome::Inspected(Some(_)) => "row",
        Outcome::InvalidInput => "invalid input",
        Outcome::Injected => "applied",
        Outcome::NotInjected => "found no live lease",
        Outcome::Failed => "failed",
        Outcome::Unknown => "unknown",
    }
}

/// A bar's few-word label: the call and the gist of its result (`acq e7`, `rel not_owner`).
fn short_label(op: &OpRecord) -> String {
    let verb = match op.call {
        Op::Acquire { .. } => "acq",
        Op::Renew { .. } => "ren",
        Op::Release { .. } => "rel",
        Op::Inspect { .. } => "insp",
        Op::Expire { .. } => "lapse",
    };
    let gist = match &op.result {
        OpResult::Ok(Outcome::Acquired { epoch, .. }) => format!("e{epoch}"),
        OpResult::Ok(Outcome::Inspected(Some(row))) if row.held => format!("held e{}", row.epoch),
        OpResult::Ok(Outcome::Inspected(Some(row))) => format!("free e{}", row.epoch),
        OpResult::Ok(o) => status_text(o).to_string(),
        OpResult::Fail { sqlstate, .. } => sqlstate.clone(),
        OpResult::Unknown { .. } => "?".to_string(),
    };
    format!("{verb} {gist}")
}

fn effect_text(effect: &NemesisEffect) -> String {
    match effect {
        NemesisEffect::None => "no direct effect".to_string(),
        NemesisEffect::Restart { clean, .. } => {
            format!("restart ({})", if *clean { "clean" } else { "crash" })
        }
        NemesisEffect::Lapse { key, applied, .. } => {
            let applied = match applied {
                Some(true) => "applied",
                Some(false) => "found no live lease",
                None => "answer lost",
            };
            format!("lapse of {} ({applied})", name(key))
        }
    }
}

/// `text` escaped for HTML text and double-quoted attributes.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

/// `text` escaped, cut (at a character, never inside an entity) to at most `max` bytes.
fn esc_capped(text: &str, max: usize) -> String {
    let whole = esc(text);
    if whole.len() <= max {
        return whole;
    }
    let mut out = String::with_capacity(max);
    let mut piece = String::with_capacity(8);
    for c in text.chars() {
        piece.clear();
        push_escaped(&mut piece, c);
        if out.len() + piece.len() > max.saturating_sub('…'.len_utf8()) {
            out.push('…');
            break;
        }
        out.push_str(&piece);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        '"' => out.push_str("&quot;"),
        '\'' => out.push_str("&#39;"),
        // Control characters other than line breaks and tabs are invalid in HTML text.
        c if c.is_control() && !matches!(c, '\n' | '\t') => out.push('\u{FFFD}'),
        c => out.push(c),
    }
}
