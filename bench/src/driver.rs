//! The Rust driver: one tokio-postgres connection per client, the script's statements
//! prepared once, run in a closed loop (each client starts its next iteration when the last
//! one ends) or an open loop at a set rate, where latency counts from the instant an
//! iteration was due, not from when it started, as wrk2 does against coordinated omission.

use crate::error::{BenchError, Result};
use crate::script::{Command, Script};
use crate::stats::Latencies;
use crate::workloads::Workload;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row, Statement};

/// Warm-up and measured window of one measurement.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub warmup: Duration,
    pub measure: Duration,
}

/// How iterations are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    Closed,
    /// A fixed total rate (iterations per second across all clients).
    Open {
        rate_per_s: f64,
    },
}

/// What one measurement of a script collected (warm-up excluded).
#[derive(Debug, Clone, Default)]
pub struct Measured {
    /// Per step (closed loop only; empty for the open loop).
    pub steps: Vec<Latencies>,
    /// Whole iterations.
    pub script: Latencies,
    /// Per step: how often each answer (the first column of the first row) came back.
    pub outcomes: Vec<BTreeMap<String, u64>>,
    /// Statements executed, warm-up included.
    pub statements_total: u64,
}

impl Measured {
    fn merge(&mut self, other: Measured) {
        if self.steps.len() < other.steps.len() {
            self.steps.resize_with(other.steps.len(), Latencies::new);
            self.outcomes
                .resize_with(other.outcomes.len(), BTreeMap::new);
        }
        for (mine, theirs) in self.steps.iter_mut().zip(&other.steps) {
            mine.merge(theirs);
        }
        for (mine, theirs) in self.outcomes.iter_mut().zip(other.outcomes) {
            for (k, v) in theirs {
                *mine.entry(k).or_default() += v;
            }
        }
        self.script.merge(&other.script);
        self.statements_total += other.statements_total;
    }
}

/// Runs `workload`'s script with `clients` clients on database `db`.
pub async fn run(
    config: &tokio_postgres::Config,
    workload: &Workload,
    clients: u32,
    window: Window,
    pace: Pace,
) -> Result<Measured> {
    let script = Script::parse(workload.name, workload.script)?;
    let mut sessions = Vec::new();
    for id in 0..clients {
        sessions.push(Session::open(config, workload, &script, id).await?);
    }
    // All clients share one clock so that the warm-up ends for all at once.
    let start = Instant::now() + Duration::from_millis(20);
    let mut tasks = Vec::new();
    for session in sessions {
        let plan = Plan::new(start, window, pace, session.id, clients);
        tasks.push(tokio::spawn(session.run(plan)));
    }
    let mut total = Measured::default();
    for task in tasks {
        total.merge(task.await??);
    }
    if total.script.count() == 0 {
        return Err(BenchError::NothingMeasured {
            workload: workload.name.to_string(),
        });
    }
    Ok(total)
}

/// When one client's iterations are due and which count.
#[derive(Debug, Clone, Copy)]
struct Plan {
    start: Instant,
    warm_end: Instant,
    end: Instant,
    /// Open loop: this client's spacing and first due instant.
    every: Option<Duration>,
    first_due: Instant,
}

impl Plan {
    fn new(start: Instant, window: Window, pace: Pace, id: u32, clients: u32) -> Plan {
        let warm_end = start + window.warmup;
        let end = warm_end + window.measure;
        let (every, first_due) = match pace {
            Pace::Closed => (None, start),
            Pace::Open { rate_per_s } => {
                let every = Duration::from_secs_f64(f64::from(clients) / rate_per_s.max(1e-3));
                // Clients are staggered evenly across one spacing.
                let offset = every.mul_f64(f64::from(id) / f64::from(clients.max(1)));
                (Some(every), start + offset)
            }
        };
        Plan {
            start,
            warm_end,
            end,
            every,
            first_due,
        }
    }
}

/// A value of a script variable.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Text(String),
}

impl Value {
    fn render(&self) -> String {
        match self {
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Text(t) => t.clone(),
        }
    }
}

/// A prepared step.
struct Step {
    name: String,
    statement: Statement,
    params: Vec<String>,
    gset: bool,
}

/// One client: its connection, prepared steps and variables.
struct Session {
    id: u32,
    workload: &'static str,
    client: Client,
    commands: Vec<Prepared>,
    vars: BTreeMap<String, Value>,
    rng: u64,
}

enum Prepared {
    SetRandom { name: String, lo: i64, hi: i64 },
    Step(Step),
}

impl Session {
    async fn open(
        config: &tokio_postgres::Config,
        workload: &Workload,
        script: &Script,
        id: u32,
    ) -> Result<Session> {
        let (client, connection) =
            config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(BenchError::sql(format!(
                    "{}: connecting client {id}",
                    workload.name
                )))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut commands = Vec::new();
        let mut step_names = workload.steps.iter();
        for command in &script.commands {
            commands.push(match command {
                Command::SetRandom { name, lo, hi } => Prepared::SetRandom {
                    name: name.clone(),
                    lo: *lo,
                    hi: *hi,
                },
                Command::Sql { sql, params, gset } => {
                    let statement = client.prepare(sql).await.map_err(BenchError::sql(format!(
                        "{}: preparing {sql}",
                        workload.name
                    )))?;
                    let name = step_names.next().copied().unwrap_or("step");
                    Prepared::Step(Step {
                        name: name.to_string(),
                        statement,
                        params: params.clone(),
                        gset: *gset,
                    })
                }
            });
        }
        let mut vars = BTreeMap::new();
        vars.insert("client_id".to_string(), Value::Int(i64::from(id)));
        Ok(Session {
            id,
            workload: workload.name,
            client,
            commands,
            vars,
            // xorshift needs a non-zero seed.
            rng: 0x9E37_79B9_7F4A_7C15 ^ (u64::from(id) + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9),
        })
    }

    async fn run(mut self, plan: Plan) -> Result<Measured> {
        let steps = self
            .commands
            .iter()
            .filter(|c| matches!(c, Prepared::Step(_)))
            .count();
        let mut m = Measured {
            steps: vec![Latencies::new(); if plan.every.is_some() { 0 } else { steps }],
            outcomes: vec![BTreeMap::new(); steps],
            ..Measured::default()
        };
        tokio::time::sleep_until(plan.start).await;
        let mut due = plan.first_due;
        loop {
            if plan.every.is_some() {
                if due >= plan.end {
                    break;
                }
                tokio::time::sleep_until(due).await;
            } else {
                due = Instant::now();
                if due >= plan.end {
                    break;
                }
            }
            let counted = due >= plan.warm_end;
            self.iterate(&mut m, counted).await?;
            let done = Instant::now();
            if counted && done <= plan.end {
                m.script.record(done - due);
            }
            if let Some(every) = plan.every {
                due += every;
            }
        }
        Ok(m)
    }

    /// One pass over the script.
    async fn iterate(&mut self, m: &mut Measured, counted: bool) -> Result<()> {
        let mut step_index = 0;
        for i in 0..self.commands.len() {
            match &self.commands[i] {
                Prepared::SetRandom { name, lo, hi } => {
                    let v = lo + (next_random(&mut self.rng) % ((hi - lo + 1) as u64)) as i64;
                    self.vars.insert(name.clone(), Value::Int(v));
                }
                Prepared::Step(step) => {
                    let began = Instant::now();
                    let rows = self.execute(step).await?;
                    let took = began.elapsed();
                    m.statements_total += 1;
                    if counted {
                        if let Some(h) = m.steps.get_mut(step_index) {
                            h.record(took);
                        }
                        let outcome = outcome_of(rows.first());
                        *m.outcomes[step_index].entry(outcome).or_default() += 1;
                    }
                    if step.gset {
                        let row = rows
                            .first()
                            .ok_or_else(|| self.step_error(step, "\\gset: no row"))?;
                        for (k, col) in row.columns().iter().enumerate() {
                            self.vars
                                .insert(col.name().to_string(), column_value(row, k));
                        }
                    }
                    step_index += 1;
                }
            }
        }
        Ok(())
    }

    async fn execute(&self, step: &Step) -> Result<Vec<Row>> {
        let types = step.statement.params();
        let mut owned: Vec<Box<dyn ToSql + Sync + Send>> = Vec::with_capacity(types.len());
        for (name, ty) in step.params.iter().zip(types) {
            let value = self
                .vars
                .get(name)
                .ok_or_else(|| self.step_error(step, &format!("variable {name} is not set")))?;
            owned.push(bind(value, ty).ok_or_else(|| {
                self.step_error(step, &format!("cannot bind {value:?} as {ty} for :{name}"))
            })?);
        }
        let params: Vec<&(dyn ToSql + Sync)> = owned
            .iter()
            .map(|b| b.as_ref() as &(dyn ToSql + Sync))
            .collect();
        self.client
            .query(&step.statement, &params)
            .await
            .map_err(|e| self.step_error(step, &describe(&e)))
    }

    fn step_error(&self, step: &Step, message: &str) -> BenchError {
        BenchError::Step {
            workload: self.workload.to_string(),
            step: step.name.clone(),
            message: format!("client {}: {message}", self.id),
        }
    }
}

/// A driver error for people: the server's code, message and, when it was raised inside
/// the target's code, where (an answer outside the API, not the bench's failure).
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) if harness::fate::raised_in_target(db) => format!(
            "{}: {} (raised inside the target: {})",
            db.code().code(),
            db.message(),
            harness::fate::target_frames(db)
        ),
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// xorshift64: uniform enough to pick among a handful of keys.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// The value as the parameter type the server inferred (as pgbench's prepared mode lets it).
fn bind(value: &Value, ty: &Type) -> Option<Box<dyn ToSql + Sync + Send>> {
    let text = value.render();
    Some(match *ty {
        Type::INT8 => Box::new(text.parse::<i64>().ok()?),
        Type::INT4 => Box::new(text.parse::<i32>().ok()?),
        Type::BOOL => Box::new(text.parse::<bool>().ok()?),
        Type::TEXT | Type::VARCHAR | Type::NAME | Type::UNKNOWN => Box::new(text),
        _ => return None,
    })
}

fn column_value(row: &Row, k: usize) -> Value {
    let ty = row.columns()[k].type_();
    let got = match *ty {
        Type::BOOL => row
            .try_get::<_, Option<bool>>(k)
            .map(|v| v.map(Value::Bool)),
        Type::INT8 => row.try_get::<_, Option<i64>>(k).map(|v| v.map(Value::Int)),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(k)
            .map(|v| v.map(|i| Value::Int(i64::from(i)))),
        Type::TEXT | Type::VARCHAR | Type::NAME => row
            .try_get::<_, Option<String>>(k)
            .map(|v| v.map(Value::Text)),
        _ => return Value::Text(format!("({ty})")),
    };
    got.ok().flatten().unwrap_or(Value::Null)
}

/// `column=value` of the first column of the first row, or `(no row)`.
fn outcome_of(row: Option<&Row>) -> String {
    match row {
        None => "(no row)".into(),
        Some(row) if row.is_empty() => "(no column)".into(),
        Some(row) => format!(
            "{}={}",
            row.columns()[0].name(),
            column_value(row, 0).render()
        ),
    }
}
