//! The HTML timeline of a history and its verdict: what the page shows, what it marks, that
//! it escapes every name, loads nothing, and stays small on long histories. Pure: no
//! database.

use harness::timeline::{render, MAX_OPS_DRAWN};
use model::checker::{check, Stats, Step};
use model::gen::{generate, GenConfig};
use model::history::{
    History, NemesisEffect, NemesisRecord, OpId, OpRecord, OpResult, TxnEnd, TxnRecord,
};
use model::{CheckOptions, Interval, Isolation, Mutation, Op, Outcome, Span, Spec, Ts, Verdict};
use std::collections::BTreeSet;

/// Server time of the hand-built histories: Unix microseconds, as a recorder reports them.
const BASE_US: i64 = 1_764_750_000_000_000;
const HOSTILE_KEY: &str = "a\"<b>&c";

/// A hand-built history: real and server time both count microseconds from 0 (server time
/// offset by [`BASE_US`]).
#[derive(Default)]
struct Builder {
    h: History,
}

impl Builder {
    fn op(&mut self, process: u32, call: Op<String, String>, a: i64, b: i64, r: OpResult) -> OpId {
        self.op_in(process, None, call, a, b, r)
    }

    fn op_in(
        &mut self,
        process: u32,
        txn: Option<u64>,
        call: Op<String, String>,
        a: i64,
        b: i64,
        result: OpResult,
    ) -> OpId {
        let id = self.h.ops.len() as u64 + 1;
        let unknown = matches!(result, OpResult::Unknown { .. });
        self.h.ops.push(OpRecord {
            id,
            process,
            txn,
            call,
            invoke: (a * 1000) as u64,
            complete: (b * 1000) as u64,
            server: (!unknown).then(|| span(a, b)),
            result,
        });
        id
    }

    fn txn(&mut self, id: u64, process: u32, a: i64, b: i64, end: TxnEnd) {
        self.h.txns.push(TxnRecord {
            id,
            process,
            isolation: Isolation::ReadCommitted,
            begin: (a * 1000) as u64,
            end,
            end_invoke: (b * 1000) as u64,
            end_complete: (b * 1000 + 500) as u64,
        });
    }

    fn nemesis(&mut self, fault: &str, a: i64, b: i64, effect: NemesisEffect) {
        let id = self.h.nemeses.len() as u64 + 1;
        self.h.nemeses.push(NemesisRecord {
            id,
            fault: fault.to_string(),
            start: (a * 1000) as u64,
            end: (b * 1000) as u64,
            effect,
            detail: String::new(),
        });
    }
}

fn span(a: i64, b: i64) -> Span {
    Span::new(Ts(BASE_US + a), Ts(BASE_US + b)).expect("ordered span")
}

fn acq(key: &str, owner: &str) -> Op<String, String> {
    Op::acquire(key.to_string(), owner.to_string(), Interval::secs(10))
}

fn acquired(epoch: i64, at: i64) -> OpResult {
    OpResult::Ok(Outcome::Acquired {
        epoch,
        expires_at: Ts(BASE_US + at + 10_000_000),
    })
}

fn released() -> OpResult {
    OpResult::Ok(Outcome::Released)
}

fn unknown() -> OpResult {
    OpResult::Unknown {
        reason: "connection closed".to_string(),
    }
}

fn linearizable() -> Verdict {
    Verdict::Linearizable(Stats::default())
}

/// Two owners granted the hostile key at once (invariant 1), with a bystander process on
/// another key, a restart and a lapse on each key.
fn double_grant() -> History {
    let mut b = Builder::default();
    b.op(7, acq(HOSTILE_KEY, "o'\\ключ✓"), 10, 20, acquired(1, 10));
    b.op(9, acq("other", "p9"), 12, 18, acquired(1, 12));
    b.op(3, acq(HOSTILE_KEY, "o2"), 30, 40, acquired(2, 30));
    b.op(5, Op::inspect(HOSTILE_KEY.to_string()), 50, 60, unknown());
    let lapse = |key: &str| NemesisEffect::Lapse {
        key: key.to_string(),
        server: Some(span(44, 45)),
        applied: Some(false),
    };
    b.nemesis("lapse", 44, 45, lapse(HOSTILE_KEY));
    b.nemesis("lapse", 44, 45, lapse("other"));
    let down = Some(span(46, 48));
    let restart = NemesisEffect::Restart { clean: true, down };
    b.nemesis("restart", 46, 48, restart);
    b.h
}

/// One owner acquires and releases, then another acquires: linearizable.
fn handover() -> History {
    let mut b = Builder::default();
    b.op(1, acq("k", "a"), 10, 20, acquired(1, 10));
    b.op(
        1,
        Op::release("k".to_string(), "a".to_string(), 1),
        30,
        40,
        released(),
    );
    b.op(2, acq("k", "b"), 50, 60, acquired(3, 50));
    b.h
}

/// The first generated history of `mutation` (small config) the checker rejects.
fn generated_violation(mutation: Mutation, options: &CheckOptions) -> (History, Verdict) {
    (0..500)
        .map(|seed| generate(&GenConfig::small(Spec::new(mutation), 60), seed))
        .map(|h| {
            let v = check(&h, options);
            (h, v)
        })
        .find(|(_, v)| v.violation().is_some())
        .expect("some seed yields a violation")
}

/// The class tokens of the element with id `op-<id>`, if the page has one.
fn op_classes(page: &str, id: OpId) -> Option<Vec<String>> {
    let start = page.find(&format!("id=\"op-{id}\" class=\""))?;
    let rest = &page[start..];
    let open = rest.find("class=\"")? + "class=\"".len();
    let len = rest[open..].find('"')?;
    Some(
        rest[open..open + len]
            .split(' ')
            .map(String::from)
            .collect(),
    )
}

/// Every class attribute's tokens.
fn all_classes(page: &str) -> Vec<Vec<&str>> {
    page.match_indices("class=\"")
        .filter_map(|(at, m)| {
            let from = at + m.len();
            let len = page[from..].find('"')?;
            Some(page[from..from + len].split(' ').collect())
        })
        .collect()
}

fn count_class(page: &str, token: &str) -> usize {
    all_classes(page)
        .iter()
        .filter(|c| c.contains(&token))
        .count()
}

fn drawn_ops(page: &str) -> usize {
    page.matches("id=\"op-").count()
}

/// The tag names of the page, and whether every element opened was closed in order
/// (void and self-closing elements aside). A name or message that slipped through
/// unescaped shows up as a foreign tag or an unbalanced one.
fn tags(page: &str) -> (BTreeSet<String>, bool) {
    const VOID: [&str; 2] = ["meta", "!DOCTYPE"];
    let mut names = BTreeSet::new();
    let mut open: Vec<String> = Vec::new();
    let mut balanced = true;
    for piece in page.split('<').skip(1) {
        let end = piece.find('>').unwrap_or(piece.len());
        let tag = &piece[..end];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '/')
            .collect();
        names.insert(name.clone());
        if closing {
            balanced &= open.pop().as_deref() == Some(name.as_str());
        } else if !tag.ends_with('/') && !VOID.contains(&name.as_str()) {
            open.push(name);
        }
    }
    (names, balanced && open.is_empty())
}

const ALLOWED_TAGS: [&str; 27] = [
    "!DOCTYPE",
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "h1",
    "h2",
    "section",
    "p",
    "q",
    "b",
    "pre",
    "a",
    "span",
    "i",
    "div",
    "svg",
    "defs",
    "linearGradient",
    "pattern",
    "stop",
    "rect",
    "text",
    "line",
    "g",
];

/// Everything a page could load from elsewhere.
fn external_refs(page: &str) -> Vec<&'static str> {
    let lower = page.to_ascii_lowercase();
    let banned = [
        "http://", "https://", "src=", "<script", "<link", "<img", "@import", "//cdn", "xlink:",
    ];
    let mut found: Vec<&'static str> = banned.into_iter().filter(|b| lower.contains(b)).collect();
    if lower
        .match_indices("url(")
        .any(|(at, _)| !lower[at..].starts_with("url(#"))
    {
        found.push("url( to a non-fragment");
    }
    found
}

#[test]
fn a_violation_page_names_the_invariant_and_highlights_the_offending_op() {
    let h = double_grant();
    let verdict = check(&h, &CheckOptions::default());
    let v = verdict.violation().expect("a double grant is a violation");
    assert_eq!(v.invariant.number(), 1, "{verdict}");
    let page = render(&h, &verdict, "double grant");

    assert!(page.contains("VIOLATION of invariant 1: inv01 mutual exclusion"));
    assert!(page.contains(v.invariant.statement()));
    let offending = v.ops[0];
    let classes = op_classes(&page, offending).expect("the offending op is drawn");
    assert!(classes.contains(&"offending".to_string()), "{classes:?}");
    assert_eq!(count_class(&page, "offending"), 1);
    assert!(page.contains(&format!("<a href=\"#op-{offending}\">")));
    assert!(page.contains("<pre>"));
    // every other op the violation names is marked involved
    for id in &v.ops[1..] {
        let classes = op_classes(&page, *id).expect("involved ops are drawn");
        assert!(
            classes.contains(&"involved".to_string()),
            "op {id}: {classes:?}"
        );
    }
}

#[test]
fn a_linearizable_page_says_so_and_highlights_nothing() {
    let h = handover();
    let verdict = check(&h, &CheckOptions::default());
    assert!(verdict.is_linearizable(), "{verdict}");
    let page = render(&h, &verdict, "handover");

    assert!(page.contains("<h2>Linearizable</h2>"));
    assert!(!page.contains("VIOLATION"));
    for mark in ["offending", "involved", "linearized"] {
        assert_eq!(count_class(&page, mark), 0, "{mark}");
    }
    assert_eq!(drawn_ops(&page), 3);
    // the positive case of the same helpers: the violation page does mark its ops
    let bad = double_grant();
    let bad_page = render(&bad, &check(&bad, &CheckOptions::default()), "bad");
    assert_eq!(count_class(&bad_page, "offending"), 1);
}

#[test]
fn an_unknown_verdict_is_never_shown_as_a_pass() {
    let h = handover();
    let tiny = CheckOptions {
        budget: model::Budget {
            time: None,
            states: Some(0),
            ..model::Budget::default()
        },
        prechecks: false,
        ..CheckOptions::default()
    };
    let verdict = check(&h, &tiny);
    assert!(matches!(verdict, Verdict::Unknown(_)), "{verdict}");
    let page = render(&h, &verdict, "spent");
    assert!(page.contains("Unknown: not a pass"));
    assert!(!page.contains("<h2>Linearizable</h2>"));
}

#[test]
fn only_the_chosen_offending_op_is_highlighted() {
    let (h, verdict) =
        generated_violation(Mutation::AcquireIgnoresHolder, &CheckOptions::default());
    let v = verdict.violation().expect("violation");
    let offending = v.ops[0];
    let page = render(&h, &verdict, "mutant");
    assert!(op_classes(&page, offending)
        .expect("drawn")
        .contains(&"offending".to_string()));

    // the same verdict blaming another op of the same key: the first one is not highlighted
    let key = v.key().map(str::to_string);
    let other = h
        .ops
        .iter()
        .find(|o| o.id != offending && o.call.key() == key.as_ref())
        .expect("another op on the key")
        .id;
    let mut moved = v.clone();
    moved.ops = vec![other];
    let page = render(&h, &Verdict::Violation(Box::new(moved)), "mutant");
    let classes = op_classes(&page, offending).expect("still drawn");
    assert!(!classes.contains(&"offending".to_string()), "{classes:?}");
    assert!(op_classes(&page, other)
        .expect("drawn")
        .contains(&"offending".to_string()));
    assert_eq!(count_class(&page, "offending"), 1);
}

#[test]
fn lanes_are_the_processes_drawn_in_order_of_their_first_op() {
    let h = double_grant();
    let verdict = check(&h, &CheckOptions::default());
    let page = render(&h, &verdict, "lanes");
    let lanes = |page: &str| -> Vec<String> {
        page.match_indices("<text class=\"pl\"")
            .filter_map(|(at, _)| {
                let rest = &page[at..];
                let from = rest.find('>')? + 1;
                let to = rest.find("</text>")?;
                Some(rest[from..to].to_string())
            })
            .collect()
    };
    // process 9 only touched another key: the violation page leaves its lane out
    assert_eq!(lanes(&page), ["p7", "p3", "p5"]);
    assert_eq!(count_class(&page, "pl"), 3);
    assert!(page.contains("1 other keys with 1 ops omitted"));
    // negative control: with every key shown, process 9 has its lane, in first-op order
    let all = render(&h, &linearizable(), "lanes");
    assert_eq!(lanes(&all), ["p7", "p9", "p3", "p5"]);
    assert_eq!(drawn_ops(&all), 4);
}

#[test]
fn nemesis_events_are_bands_and_lapses_of_other_keys_are_left_out() {
    let h = double_grant();
    let verdict = check(&h, &CheckOptions::default());
    let page = render(&h, &verdict, "nemeses");
    assert_eq!(count_class(&page, "restart"), 1);
    assert_eq!(
        count_class(&page, "lapse"),
        1,
        "only the violation key's lapse"
    );
    assert!(page.contains("lapse &quot;a\\&quot;&lt;b&gt;&amp;c&quot;</text>"));
    assert!(!page.contains(">lapse &quot;other&quot;</text>"));
    // all keys: both lapses
    let all = render(&h, &linearizable(), "nemeses");
    assert_eq!(count_class(&all, "lapse"), 2);
    // negative control: a history without nemeses has no band
    let quiet = handover();
    let page = render(&quiet, &linearizable(), "quiet");
    assert_eq!(count_class(&page, "nem"), 0);
}

#[test]
fn generated_nemeses_are_drawn() {
    let h = (0..200)
        .map(|seed| generate(&GenConfig::small(Spec::CORRECT, 60), seed))
        .find(|h| {
            let restarts = h
                .nemeses
                .iter()
                .filter(|n| matches!(n.effect, NemesisEffect::Restart { .. }));
            restarts.count() > 0
        })
        .expect("some seed restarts the server");
    let verdict = check(&h, &CheckOptions::default());
    assert!(verdict.is_linearizable(), "{verdict}");
    let page = render(&h, &verdict, "generated");
    assert!(count_class(&page, "restart") >= 1);
    assert!(count_class(&page, "nem") >= 1);
    assert_eq!(drawn_ops(&page), h.ops.len());
}

#[test]
fn the_page_loads_nothing_from_elsewhere() {
    let h = double_grant();
    for verdict in [check(&h, &CheckOptions::default()), linearizable()] {
        let page = render(&h, &verdict, "double grant");
        assert_eq!(external_refs(&page), Vec::<&str>::new());
    }
    // negative control: the detector finds each kind of reference
    assert_eq!(external_refs("<img src=\"x.png\">"), ["src=", "<img"]);
    assert_eq!(
        external_refs("a{fill:url(http://x/y)}"),
        ["http://", "url( to a non-fragment"]
    );
    assert!(external_refs("a{fill:url(#fade)}").is_empty());
}

#[test]
fn hostile_names_titles_and_messages_are_escaped() {
    let mut h = double_grant();
    h.ops.push(OpRecord {
        id: 99,
        process: 11,
        txn: None,
        call: Op::release(
            HOSTILE_KEY.to_string(),
            "</svg><script>x</script>".to_string(),
            1,
        ),
        invoke: 70_000,
        complete: 80_000,
        server: Some(span(70, 80)),
        result: OpResult::Fail {
            sqlstate: "XX000".to_string(),
            message: "bad <b>\u{0}\u{1b}[31m & \"quoted\"".to_string(),
        },
    });
    let verdict = check(&h, &CheckOptions::default());
    let page = render(&h, &verdict, "title \"<h1>\" & 'x'");

    let (names, balanced) = tags(&page);
    assert!(balanced, "unbalanced tags");
    let foreign: Vec<&String> = names
        .iter()
        .filter(|n| !ALLOWED_TAGS.contains(&n.as_str()))
        .collect();
    assert!(foreign.is_empty(), "{foreign:?}");
    assert!(!page.contains("<script"));
    assert!(!page.contains('\u{0}') && !page.contains('\u{1b}'));
    assert!(
        page.contains("fail XX000 (bad &lt;b&gt;\u{FFFD}\u{FFFD}[31m"),
        "control characters replaced"
    );
    assert!(
        page.contains("&quot;a\\&quot;&lt;b&gt;&amp;c&quot;"),
        "key quoted and escaped"
    );
    assert!(page.contains("ключ✓"), "non-ASCII kept as is");
    assert!(page.contains("<title>title &quot;&lt;h1&gt;&quot; &amp; &#39;x&#39;</title>"));
    // negative control: the tag scanner catches a raw name
    let tainted = page.replacen("&lt;b&gt;", "<b>", 1);
    let (_, tainted_balanced) = tags(&tainted);
    assert!(!tainted_balanced);
    let tainted = page.replacen("&lt;/svg&gt;&lt;script&gt;", "</svg><script>", 1);
    assert!(tags(&tainted).0.contains("script") || !tags(&tainted).1);
}

#[test]
fn the_prefix_ops_are_marked_linearized() {
    let options = CheckOptions {
        prechecks: false,
        ..CheckOptions::default()
    };
    let (h, verdict) = generated_violation(Mutation::AcquireIgnoresHolder, &options);
    let v = verdict.violation().expect("violation");
    let prefix: BTreeSet<OpId> = v
        .prefix
        .iter()
        .filter_map(|s| match s {
            Step::Op(id) => Some(*id),
            _ => None,
        })
        .collect();
    assert!(!prefix.is_empty(), "the search reports a prefix");
    let page = render(&h, &verdict, "prefix");
    for op in &h.ops {
        let Some(classes) = op_classes(&page, op.id) else {
            continue;
        };
        let marked = classes.contains(&"linearized".to_string());
        let named = v.ops.contains(&op.id);
        assert_eq!(
            marked,
            prefix.contains(&op.id) && !named,
            "op {}: {classes:?}",
            op.id
        );
    }
    assert_eq!(count_class(&page, "linearized"), prefix.len());
}

#[test]
fn an_unknown_op_fades_to_the_right_edge() {
    let h = double_grant();
    let page = render(&h, &linearizable(), "open");
    let unknown_op = 4;
    let classes = op_classes(&page, unknown_op).expect("drawn");
    assert!(classes.contains(&"open".to_string()) && classes.contains(&"unk".to_string()));
    let svg_width: f64 = attr(&page, "<svg id=\"plot\" width=\"").expect("plot width");
    let at = page.find("id=\"op-4\"").expect("op 4");
    let x: f64 = attr(&page[at..], "x=\"").expect("x");
    let w: f64 = attr(&page[at..], "width=\"").expect("width");
    assert!(
        (x + w - (svg_width - 8.0)).abs() < 1.0,
        "{x} + {w} vs {svg_width}"
    );
    // negative control: an answered op ends inside the plot
    let at = page.find("id=\"op-1\"").expect("op 1");
    let classes = op_classes(&page, 1).expect("drawn");
    assert!(!classes.contains(&"open".to_string()));
    let x: f64 = attr(&page[at..], "x=\"").expect("x");
    let w: f64 = attr(&page[at..], "width=\"").expect("width");
    assert!(x + w < svg_width - 40.0);
}

fn attr(text: &str, prefix: &str) -> Option<f64> {
    let from = text.find(prefix)? + prefix.len();
    let len = text[from..].find('"')?;
    text[from..from + len].parse().ok()
}

#[test]
fn transactions_are_outlined_with_their_end() {
    let mut b = Builder::default();
    b.op_in(1, Some(1), acq("k", "a"), 10, 20, acquired(1, 10));
    b.op_in(1, Some(1), acq("k", "a"), 22, 24, acquired(1, 10));
    b.txn(1, 1, 5, 30, TxnEnd::Commit);
    b.op_in(2, Some(2), acq("j", "b"), 40, 50, acquired(1, 40));
    b.txn(2, 2, 35, 55, TxnEnd::Rollback);
    b.op_in(3, Some(3), acq("i", "c"), 60, 70, acquired(1, 60));
    let page = render(&b.h, &linearizable(), "txns");
    assert_eq!(count_class(&page, "txn"), 3);
    assert_eq!(count_class(&page, "commit"), 1);
    assert_eq!(count_class(&page, "rollback"), 1);
    assert!(page.contains("<title>txn 1 · read committed · committed</title>"));
    assert!(page.contains("<title>txn 3 · no record of its end</title>"));
    // the outline spans both ops of txn 1: from before op 1 to past op 2
    let outline_x = attr(&page[page.find("<title>txn 1").expect("txn 1")..], "x=\"").expect("x");
    let op_x = |id: u64| {
        let at = page.find(&format!("id=\"op-{id}\"")).expect("drawn");
        let x: f64 = attr(&page[at..], "x=\"").expect("x");
        x + attr(&page[at..], "width=\"").expect("width")
    };
    assert!(outline_x < op_x(1));
    let outline = &page[page.find("<title>txn 1").expect("txn 1")..];
    let outline_end = outline_x + attr(outline, "width=\"").expect("width");
    assert!(outline_end > op_x(2), "{outline_end} vs {}", op_x(2));
    // negative control: autocommit ops get no outline
    assert_eq!(
        count_class(&render(&handover(), &linearizable(), "t"), "txn"),
        0
    );
}

#[test]
fn the_axis_counts_ms_from_the_first_server_instant() {
    let h = handover();
    let page = render(&h, &linearizable(), "axis");
    assert!(page.matches("<line class=\"tick\"").count() >= 2);
    assert!(page.contains(">0.00 ms</text>"), "first tick at the origin");
    // negative control: absolute Unix microseconds never appear as a label
    assert!(!page.contains(">1764750"));
    // tooltips count from the same origin (op 1's start): op 2 ran 20 to 30 us after it
    assert!(page.contains("server [+0.020, +0.030] ms"));
}

#[test]
fn a_long_history_is_cut_to_the_stretch_around_the_violation() {
    let cfg = GenConfig {
        clients: 8,
        keys: 1,
        ..GenConfig::small(Spec::new(Mutation::AcquireIgnoresHolder), 20_000)
    };
    let h = generate(&cfg, 1);
    assert!(h.ops.len() >= 20_000);
    // no diagnosis: on 20,000 ops it costs most of a minute and does not change the page's size
    let options = CheckOptions {
        diagnosis: None,
        ..CheckOptions::default()
    };
    let verdict = check(&h, &options);
    let v = verdict.violation().expect("the mutant is caught");
    let page = render(&h, &verdict, "long");

    let drawn = drawn_ops(&page);
    assert!(drawn <= MAX_OPS_DRAWN, "{drawn}");
    assert!(
        page.len() <= 600 * drawn + 64 * 1024,
        "{} bytes for {drawn} ops",
        page.len()
    );
    assert!(page.contains("Too many to draw"));
    assert!(op_classes(&page, v.ops[0])
        .expect("the offending op is drawn")
        .contains(&"offending".to_string()));

    // the same history blamed on an op in its middle: the page moves there
    let key = v.key().map(str::to_string);
    let on_key: Vec<&OpRecord> = h
        .ops
        .iter()
        .filter(|o| o.call.key() == key.as_ref())
        .collect();
    let middle = on_key[on_key.len() / 2].id;
    let mut moved = v.clone();
    moved.ops = vec![middle];
    moved.prefix = on_key[on_key.len() / 2 - 300..on_key.len() / 2]
        .iter()
        .map(|o| Step::Op(o.id))
        .collect();
    let page = render(&h, &Verdict::Violation(Box::new(moved)), "long");
    assert!(drawn_ops(&page) <= MAX_OPS_DRAWN);
    assert!(op_classes(&page, middle)
        .expect("the offending op is drawn")
        .contains(&"offending".to_string()));
    assert!(op_classes(&page, v.ops[0]).is_none(), "far from the middle");
    assert!(
        op_classes(&page, h.ops[0].id).is_none(),
        "far from the middle"
    );

    // without a violation the first ops are drawn, also within the bound
    let all = render(&h, &linearizable(), "long");
    assert!(drawn_ops(&all) <= MAX_OPS_DRAWN);
    assert!(
        all.len() <= 600 * MAX_OPS_DRAWN + 64 * 1024,
        "{}",
        all.len()
    );
    assert!(op_classes(&all, h.ops[0].id).is_some());

    // negative control: a short history is drawn whole, with no cut
    let short = generate(&GenConfig::small(Spec::CORRECT, 60), 1);
    let page = render(&short, &linearizable(), "short");
    assert_eq!(drawn_ops(&page), short.ops.len());
    assert!(!page.contains("Too many to draw"));
}

#[test]
fn times_at_the_ends_of_i64_are_drawn_in_order() {
    let mut h = History::default();
    let ends = [(i64::MIN, i64::MIN + 10), (i64::MAX - 10, i64::MAX)];
    for (n, (t0, t1)) in ends.into_iter().enumerate() {
        h.ops.push(OpRecord {
            id: n as u64 + 1,
            process: n as u32 + 1,
            txn: None,
            call: acq("k", "a"),
            invoke: n as u64 * 10,
            complete: n as u64 * 10 + 5,
            server: Some(Span::new(Ts(t0), Ts(t1)).expect("ordered")),
            result: OpResult::Ok(Outcome::Acquired {
                epoch: 1,
                expires_at: Ts(i64::MAX),
            }),
        });
    }
    let page = render(&h, &linearizable(), "extremes");
    assert_eq!(drawn_ops(&page), 2);
    let x_of = |id: u64| {
        let at = page.find(&format!("id=\"op-{id}\"")).expect("drawn");
        attr(&page[at..], "x=\"").expect("x")
    };
    assert_eq!(x_of(1), 4.0, "the earliest op starts the plot");
    assert!(x_of(2) > 900.0, "the latest op ends it: {}", x_of(2));
}

#[test]
fn hostile_long_names_keep_each_op_within_its_byte_budget() {
    // the worst case per op: its own process, its own transaction, names and an error
    // message far longer than a tooltip, made of characters that escape to entities
    let long = "\"<&'".repeat(300);
    let mut b = Builder::default();
    let ops = 1_000;
    for n in 0..ops {
        let (a, z) = (n as i64 * 10, n as i64 * 10 + 8);
        let call = Op::release(format!("{long}{n}"), long.clone(), 1);
        let result = OpResult::Fail {
            sqlstate: long.clone(),
            message: long.clone(),
        };
        b.op_in(n, Some(u64::from(n)), call, a, z, result);
        b.txn(u64::from(n), n, a, z, TxnEnd::Rollback);
    }
    let page = render(&b.h, &linearizable(), &long);
    assert_eq!(drawn_ops(&page), ops as usize);
    let per_op = (page.len() - 2 * 6 * long.len()) / ops as usize;
    assert!(per_op <= 600, "{per_op} bytes per op");
    // negative control: the same history with short names costs much less per op
    let mut short = b.h.clone();
    for op in &mut short.ops {
        op.call = Op::release("k".to_string(), "o".to_string(), 1);
        op.result = OpResult::Fail {
            sqlstate: "XX000".to_string(),
            message: "e".to_string(),
        };
    }
    let small = render(&short, &linearizable(), "short");
    assert!(
        small.len() / (ops as usize) < per_op,
        "{} vs {per_op}",
        small.len()
    );
}
