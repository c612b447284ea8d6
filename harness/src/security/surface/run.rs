//! Runs every class's statements against every object of its kind, as every threat role,
//! and judges each (see [`super`]).

use super::objects::{call_of, enumerate, Object};
use super::world::{World, SEEDED_FREE};
use super::{limitation, Class, Effect, Kind, Role, Shape, CLASSES, REGCLASS_FUNCTIONS};
use crate::pg::{quote_ident, Cluster};
use crate::security::{describe_db, Failure, SecurityError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::Client;

/// What to run.
#[derive(Clone, Debug, Default)]
pub struct SurfaceOptions {
    /// Every class (else the quick ones), and the generated class as every role (else as
    /// the PUBLIC-only role).
    pub full: bool,
    /// Only these classes (a negative control's), when given.
    pub only: Option<Vec<&'static str>>,
}

/// The outcome of one class: how many statements ran and the first finding.
#[derive(Debug, Clone)]
pub struct ClassOutcome {
    pub class: &'static str,
    pub statements: usize,
    pub result: Result<(), Failure>,
    pub elapsed: Duration,
}

/// How long a statement may run before it is judged as still running (a refused one ends in
/// milliseconds; one that waits for a lock is seen waiting within this).
const SETTLE: Duration = Duration::from_secs(5);

/// How a statement ended before it was judged.
enum Ran {
    Refused(String),
    Succeeded,
    /// It waits for a lock (or still runs): what it queued stays queued while probed.
    Waiting,
}

/// The classes a run on `major` takes (every class `full`, else the quick ones); the
/// generated class ([`REGCLASS_FUNCTIONS`]) runs beside them.
pub fn classes_on(major: u32, full: bool) -> impl Iterator<Item = &'static Class> {
    CLASSES
        .iter()
        .filter(move |c| c.on(major) && (full || c.quick))
}

/// Runs the suite against `extension` (installed in `cluster`'s install), returning one
/// outcome per class that had a statement to run.
pub async fn run(
    cluster: &Cluster,
    extension: &str,
    options: &SurfaceOptions,
) -> Result<Vec<ClassOutcome>, SecurityError> {
    let major = cluster.version().major;
    let wanted = |name: &str| options.only.as_ref().is_none_or(|o| o.contains(&name));
    let classes: Vec<&Class> = classes_on(major, options.full || options.only.is_some())
        .filter(|c| wanted(c.name))
        .collect();
    let mut outcomes: Vec<ClassOutcome> = classes
        .iter()
        .map(|c| ClassOutcome {
            class: c.name,
            statements: 0,
            result: Ok(()),
            elapsed: Duration::ZERO,
        })
        .collect();
    outcomes.push(ClassOutcome {
        class: REGCLASS_FUNCTIONS,
        statements: 0,
        result: Ok(()),
        elapsed: Duration::ZERO,
    });
    let mut world = World::build(cluster, extension).await?;
    let generated = wanted(REGCLASS_FUNCTIONS);
    let result = run_roles(
        &mut world,
        &classes,
        &mut outcomes,
        major,
        options.full,
        generated,
    )
    .await;
    let dropped = world.drop_all().await;
    result?;
    dropped?;
    Ok(outcomes.into_iter().filter(|o| o.statements > 0).collect())
}

async fn run_roles<'a>(
    world: &mut World<'a>,
    classes: &[&Class],
    outcomes: &mut [ClassOutcome],
    major: u32,
    full: bool,
    generated: bool,
) -> Result<(), SecurityError> {
    let (objects, unhandled) = enumerate(&world.su, &world.extension).await?;
    if !unhandled.is_empty() {
        return Err(SecurityError::Unexpected(format!(
            "the build has objects no statement class covers: {unhandled:?}"
        )));
    }
    let catalog = regclass_functions(&world.su).await?;
    let mut objects = objects;
    let mut n: u64 = 0;
    for role in Role::ALL {
        let mut attacker = Arc::new(world.connect_as(role).await?);
        let generated = generated && (full || role == Role::App);
        for (i, class) in classes.iter().enumerate() {
            let started = Instant::now();
            for object in objects.iter().filter(|o| o.kind == class.kind) {
                if outcomes[i].result.is_err() {
                    break;
                }
                n += 1;
                let Some(sql) = statement(world, role, class.sql, object, n) else {
                    continue;
                };
                outcomes[i].statements += 1;
                let statement_for = |n| statement(world, role, class.sql, object, n);
                let look = Look {
                    role,
                    major,
                    object: &object.label,
                };
                let judged = judge_twice(
                    world,
                    &mut attacker,
                    class,
                    &look,
                    &mut n,
                    sql,
                    statement_for,
                )
                .await?;
                judged.record(&mut outcomes[i], role, &object.label);
                if judged.damaged {
                    rebuild(world).await?;
                    objects = enumerate(&world.su, &world.extension).await?.0;
                    attacker = Arc::new(world.connect_as(role).await?);
                    break;
                }
                if judged.reset {
                    attacker = Arc::new(world.connect_as(role).await?);
                }
            }
            outcomes[i].elapsed += started.elapsed();
        }
        // The generated class: every catalog function with a regclass argument, with the
        // OID of every relation of the build (an OID needs no USAGE on its schema).
        let last = outcomes.len() - 1;
        let started = Instant::now();
        'relations: for object in objects
            .iter()
            .filter(|o| generated && matches!(o.kind, Kind::Table | Kind::Index))
        {
            for function in &catalog {
                if outcomes[last].result.is_err() {
                    break 'relations;
                }
                n += 1;
                let sql = function.replace("{oid}", &object.oid.to_string());
                outcomes[last].statements += 1;
                let class = Class {
                    name: REGCLASS_FUNCTIONS,
                    kind: object.kind,
                    sql: "",
                    shape: Shape::Transaction,
                    majors: (14, 99),
                    quick: true,
                    control: super::Control::Never(""),
                };
                let look = Look {
                    role,
                    major,
                    object: &object.label,
                };
                let same = |_| Some(sql.clone());
                let judged = judge_twice(
                    world,
                    &mut attacker,
                    &class,
                    &look,
                    &mut n,
                    sql.clone(),
                    same,
                )
                .await?;
                judged.record(&mut outcomes[last], role, &object.label);
                if judged.damaged {
                    rebuild(world).await?;
                    objects = enumerate(&world.su, &world.extension).await?.0;
                    attacker = Arc::new(world.connect_as(role).await?);
                    break 'relations;
                }
                if judged.reset {
                    attacker = Arc::new(world.connect_as(role).await?);
                }
            }
        }
        outcomes[last].elapsed += started.elapsed();
    }
    Ok(())
}

/// Who runs a statement, on which major, against which object (for a judgement).
struct Look<'a> {
    role: Role,
    major: u32,
    object: &'a str,
}

/// Judges `sql` (the statement of number `*n`) and, when the finding is only slowness
/// (see [`Judged::only_slow`]), the statement `statement_for` gives for the next number.
/// Replaces the attacker's session before the second look when the first needs it.
async fn judge_twice(
    world: &World<'_>,
    attacker: &mut Arc<Client>,
    class: &Class,
    look: &Look<'_>,
    n: &mut u64,
    sql: String,
    statement_for: impl Fn(u64) -> Option<String>,
) -> Result<Judged, SecurityError> {
    let judged = judge(world, attacker, class, look, &sql, *n).await?;
    if !judged.only_slow() {
        return Ok(judged);
    }
    *n += 1;
    if judged.reset {
        *attacker = Arc::new(world.connect_as(look.role).await?);
    }
    match statement_for(*n) {
        Some(again) => judge(world, attacker, class, look, &again, *n).await,
        None => Ok(judged),
    }
}

/// Builds the world again after a statement damaged it.
async fn rebuild(world: &mut World<'_>) -> Result<(), SecurityError> {
    let fresh = World::build(world.cluster, &world.extension).await?;
    let old = std::mem::replace(world, fresh);
    old.drop_all().await
}

/// The statement of `template` for `object`, as `role`; `None` when it does not apply.
fn statement(
    world: &World<'_>,
    role: Role,
    template: &str,
    object: &Object,
    n: u64,
) -> Option<String> {
    let mut more = vec![
        ("n", n.to_string()),
        ("own", world.roles.own_schema(role)),
        ("ext", quote_ident(&world.extension)),
        ("db", quote_ident(&world.db)),
    ];
    if template.contains("{call}") {
        more.push((
            "call",
            call_of(object, &format!("attacker-{n}"), SEEDED_FREE)?,
        ));
    }
    object.expand(template, &more)
}

/// The judgement of one statement.
struct Judged {
    /// The statement judged.
    sql: String,
    finding: Option<String>,
    /// The build's objects or the seeded state changed: build the world again.
    damaged: bool,
    /// The attacker's session must be replaced (its statement was cancelled or committed).
    reset: bool,
    /// Every problem is a call over the bound (no wrong answer, nothing changed).
    slow: bool,
}

impl Judged {
    /// Its finding, if any, as the class's result.
    fn record(&self, outcome: &mut ClassOutcome, role: Role, object: &str) {
        if let Some(finding) = &self.finding {
            outcome.result = Err(Failure::Violation(format!(
                "as {role}, `{}` on {object}: {finding}",
                self.sql
            )));
        }
    }

    /// A finding made only of calls over the bound without a lock wait seen is looked at a
    /// second time before it is reported: a write slowed once past the bound by a loaded
    /// machine's fsync (2.06 s seen once under a parallel build) does not come back, a stall
    /// the statement causes does.
    fn only_slow(&self) -> bool {
        self.finding.is_some() && self.slow && !self.damaged
    }
}

/// Whether a problem is a call over the bound with no lock wait seen: a workload call over
/// it, or a probe's stall while no session of the database waited for a lock (a stall
/// behind the attacker's lock names who waits for whom, and is a finding at once: a second
/// look might meet the statement waiting behind the released workload and miss it).
fn is_slowness(problem: &str) -> bool {
    (problem.contains("did not answer within") && !problem.contains(" waits for pid "))
        || problem.contains("over the bound of")
}

async fn judge(
    world: &World<'_>,
    attacker: &Arc<Client>,
    class: &Class,
    look: &Look<'_>,
    sql: &str,
    n: u64,
) -> Result<Judged, SecurityError> {
    let (role, major, object) = (look.role, look.major, look.object);
    let pinned = limitation(class.name, role, object, major);
    world.drain_workload();
    if class.shape == Shape::Transaction {
        attacker.batch_execute("BEGIN").await?;
    }
    let ran = run_statement(world, attacker, sql).await?;
    if std::env::var_os("LEASECHECK_SURFACE_TRACE").is_some() {
        eprintln!("surface: as {role:?}: {sql}: {}", describe(&ran));
    }
    let mut problems = Vec::new();
    let mut reset = false;
    match &ran {
        Ran::Refused(_) => {}
        Ran::Succeeded | Ran::Waiting => {
            // While it waits, or holds what it took in its open transaction.
            problems.extend(world.probe(n).await);
            if matches!(ran, Ran::Waiting) {
                let _ = attacker
                    .cancel_token()
                    .cancel_query(tokio_postgres::NoTls)
                    .await;
                reset = true;
            }
        }
    }
    let keep = matches!(ran, Ran::Succeeded) && pinned.is_none();
    if class.shape == Shape::Transaction {
        let end = if keep { "COMMIT" } else { "ROLLBACK" };
        if attacker.batch_execute(end).await.is_err() {
            reset = true;
        }
    }
    if keep {
        // What it left, committed, is looked at below (the build's objects, what depends on
        // them, the seeded state, the background workload's calls).
        reset = true;
    }
    let workload = world.drain_workload();
    // A refused statement's transaction was rolled back: nothing of it remains to look at.
    let changes = match ran {
        Ran::Refused(_) => Vec::new(),
        _ => world.changes().await?,
    };
    let damaged = !changes.is_empty();
    if let Some(limit) = pinned {
        let stalled = problems.iter().any(|p| p.contains("did not answer within"));
        let as_documented = match limit.effect {
            Effect::Stalls => stalled,
            Effect::Succeeds => matches!(ran, Ran::Succeeded) && problems.is_empty(),
        };
        let finding = (!as_documented || damaged).then(|| {
            format!(
                "the documented limitation ({}: {:?}) did not reproduce: {}; probes: {problems:?}; changes: {changes:?}",
                limit.why,
                limit.effect,
                describe(&ran)
            )
        });
        // A documented stall that did not reproduce is no slowness; an unexpected one is.
        let slow = limit.effect == Effect::Succeeds && problems.iter().all(|p| is_slowness(p));
        return Ok(Judged {
            sql: sql.to_string(),
            finding,
            damaged,
            reset: true,
            slow,
        });
    }
    problems.extend(workload);
    problems.extend(changes);
    let slow = problems.iter().all(|p| is_slowness(p));
    let finding = (!problems.is_empty())
        .then(|| format!("{} and then: {}", describe(&ran), problems.join("; ")));
    Ok(Judged {
        sql: sql.to_string(),
        finding,
        damaged,
        reset,
        slow,
    })
}

fn describe(ran: &Ran) -> String {
    match ran {
        Ran::Refused(why) => format!("it was refused ({why})"),
        Ran::Succeeded => "it succeeded".to_string(),
        Ran::Waiting => "it waited for a lock".to_string(),
    }
}

/// Sends `sql` on the attacker's session and watches it until it ended or waits for a lock.
async fn run_statement(
    world: &World<'_>,
    attacker: &Arc<Client>,
    sql: &str,
) -> Result<Ran, SecurityError> {
    let pid: i32 = world_pid(attacker).await?;
    let c = attacker.clone();
    let text = sql.to_string();
    let mut task = tokio::spawn(async move { c.batch_execute(&text).await });
    let started = Instant::now();
    loop {
        match tokio::time::timeout(Duration::from_millis(20), &mut task).await {
            Ok(joined) => {
                let result = joined
                    .map_err(|e| SecurityError::Unexpected(format!("the statement's task: {e}")))?;
                return Ok(match result {
                    Ok(()) => Ran::Succeeded,
                    Err(e) => Ran::Refused(describe_db(&e)),
                });
            }
            Err(_) => {
                let waiting: Option<String> = world
                    .su
                    .query_opt(
                        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1",
                        &[&pid],
                    )
                    .await?
                    .and_then(|r| r.try_get(0).ok());
                if waiting.as_deref() == Some("Lock") || started.elapsed() > SETTLE {
                    // Keep it waiting while probed; its task ends when it is cancelled.
                    tokio::spawn(async move {
                        let _ = task.await;
                    });
                    return Ok(Ran::Waiting);
                }
            }
        }
    }
}

async fn world_pid(c: &Client) -> Result<i32, SecurityError> {
    Ok(c.query_one("SELECT pg_backend_pid()", &[])
        .await?
        .try_get(0)?)
}

/// Every pg_catalog function with a regclass argument, as a call template (`{oid}` for the
/// relation; other arguments typed literals).
async fn regclass_functions(su: &Client) -> Result<Vec<String>, SecurityError> {
    let rows = su
        .query(
            "SELECT quote_ident(p.proname), \
                    array(SELECT format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, i) ORDER BY i), \
                    p.proretset \
               FROM pg_proc p \
              WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.prokind = 'f' \
                AND 'regclass'::regtype = ANY (p.proargtypes::oid[]) \
              ORDER BY 1, 2",
            &[],
        )
        .await?;
    let mut out = Vec::new();
    for r in rows {
        let name: String = r.try_get(0)?;
        let types: Vec<String> = r.try_get(1)?;
        let set: bool = r.try_get(2)?;
        let args: Vec<String> = types
            .iter()
            .map(|t| match t.as_str() {
                "regclass" => "{oid}::pg_catalog.regclass".to_string(),
                "integer" | "bigint" | "smallint" | "oid" => format!("0::{t}"),
                "boolean" => "false".to_string(),
                "text" | "name" => format!("'x'::{t}"),
                other => format!("NULL::{other}"),
            })
            .collect();
        let call = format!("pg_catalog.{name}({})", args.join(", "));
        out.push(if set {
            format!("SELECT * FROM {call}")
        } else {
            format!("SELECT {call}")
        });
    }
    Ok(out)
}
