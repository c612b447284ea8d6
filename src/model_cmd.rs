//! `leasecheck model`: model-check the pg_lease spec (crate `model`), run its negative
//! controls, or serve the stateright Explorer.

use anyhow::{bail, Context};
use model::algo_model::{self, AlgoConfig, Timing, Variant};
use model::check::{self, control_config, RunOptions, Strategy};
use model::stateright::{Checker, Model};
use model::{Config, Mutation};

/// Model-check the pg_lease spec (the 11 invariants), run its negative controls, or serve the
/// stateright Explorer.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Base configuration: default (2 clients, 1 key), two-keys, three-clients, or all
    /// (default and two-keys, what `cargo test -p model` checks). Without this flag: all,
    /// or default when an override, --mutation or --serve is given.
    #[arg(long)]
    pub preset: Option<String>,
    /// Number of clients (1-4), overriding the preset.
    #[arg(long)]
    pub clients: Option<u8>,
    /// Number of keys (1-3), overriding the preset.
    #[arg(long)]
    pub keys: Option<u8>,
    /// Last tick of the abstract clock, overriding the preset.
    #[arg(long)]
    pub max_time: Option<i64>,
    /// Largest epoch explored, overriding the preset.
    #[arg(long)]
    pub max_epoch: Option<i64>,
    /// Lease TTL in ticks (repeatable), overriding the preset.
    #[arg(long = "ttl")]
    pub ttls: Vec<i64>,
    /// Wait bound of blocking acquires in ticks (0: none), overriding the preset.
    #[arg(long)]
    pub wait: Option<i64>,
    /// Turn off server crash and restart.
    #[arg(long)]
    pub no_crashes: bool,
    /// Turn off transactions that commit or abort.
    #[arg(long)]
    pub no_transactions: bool,
    /// Turn off invalid-input calls.
    #[arg(long)]
    pub no_invalid: bool,
    /// Turn off inspect calls.
    #[arg(long)]
    pub no_inspect: bool,
    /// Turn off the expire fault.
    #[arg(long)]
    pub no_expire: bool,
    /// Turn off writes to the fenced resource.
    #[arg(long)]
    pub no_writes: bool,
    /// Depth-first instead of breadth-first search.
    #[arg(long, conflicts_with = "bfs")]
    pub dfs: bool,
    /// Breadth-first search (the default).
    #[arg(long)]
    pub bfs: bool,
    /// Checker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Check a mutated spec (a negative control, e.g. takeover-reuses-epoch): succeeds when
    /// the invariant it breaks is found violated.
    #[arg(long)]
    pub mutation: Option<String>,
    /// With --mutation or --negative-controls: explore the mutant's whole state space instead
    /// of stopping at the first counterexample, and list every property it violates.
    #[arg(long)]
    pub complete: bool,
    /// Run every negative control and check each is caught violating its invariant.
    #[arg(long, conflicts_with = "mutation")]
    pub negative_controls: bool,
    /// Check the algorithm model (model::algo_model: the calls' steps interleaved across
    /// sessions) of pg_lease VERSION instead of the contract model: 0.3.0 (this checkout's),
    /// 0.2.0, 0.1.0 or 0.2.0-lost-race-keeps-lock (the older ones fail: their counterexamples
    /// are the bugs 0.3.0 fixed). Takes --clients (sessions, 1-3) and --max-time; fails when
    /// a property fails, printing a shortest counterexample.
    #[arg(long, value_name = "VERSION", conflicts_with_all = ["mutation", "negative_controls", "serve"])]
    pub algo: Option<String>,
    /// With --algo: the clock may tick between any two steps of a call (default: only while
    /// every session waits, sleeps or is idle).
    #[arg(long, requires = "algo")]
    pub slow_steps: bool,
    /// Serve the stateright Explorer on ADDR (e.g. 127.0.0.1:3000) instead of checking;
    /// blocks until interrupted.
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,
}

impl ModelArgs {
    fn customised(&self) -> bool {
        self.clients.is_some()
            || self.keys.is_some()
            || self.max_time.is_some()
            || self.max_epoch.is_some()
            || !self.ttls.is_empty()
            || self.wait.is_some()
            || self.no_crashes
            || self.no_transactions
            || self.no_invalid
            || self.no_inspect
            || self.no_expire
            || self.no_writes
    }

    /// The configurations to check.
    fn configs(&self) -> anyhow::Result<Vec<(String, Config)>> {
        let single = self.customised() || self.serve.is_some() || self.mutation.is_some();
        let preset = match &self.preset {
            Some(p) => p.as_str(),
            None if single => "default",
            None => "all",
        };
        let names: Vec<&str> = if preset == "all" {
            if self.customised() {
                bail!("--preset all cannot be combined with overrides; name one preset");
            }
            vec!["default", "two-keys"]
        } else {
            vec![preset]
        };
        let mut out = Vec::new();
        for name in names {
            let Some(mut cfg) = Config::preset(name) else {
                bail!(
                    "unknown preset {name:?}; expected all or one of {:?}",
                    Config::PRESETS
                );
            };
            if let Some(v) = self.clients {
                cfg.clients = v;
            }
            if let Some(v) = self.keys {
                cfg.keys = v;
            }
            if let Some(v) = self.max_time {
                cfg.max_time = v;
            }
            if let Some(v) = self.max_epoch {
                cfg.max_epoch = v;
            }
            if !self.ttls.is_empty() {
                cfg.ttls = self.ttls.clone();
            }
            if let Some(v) = self.wait {
                cfg.wait = v;
            }
            cfg.crashes &= !self.no_crashes;
            cfg.transactions &= !self.no_transactions;
            cfg.invalid_inputs &= !self.no_invalid;
            cfg.inspects &= !self.no_inspect;
            cfg.expire_faults &= !self.no_expire;
            cfg.fenced_writes &= !self.no_writes;
            cfg.validate()
                .with_context(|| format!("configuration {name}"))?;
            out.push((name.to_string(), cfg));
        }
        Ok(out)
    }

    fn options(&self) -> RunOptions {
        RunOptions {
            strategy: if self.dfs {
                Strategy::Dfs
            } else {
                Strategy::Bfs
            },
            threads: self.threads,
            ..RunOptions::default()
        }
    }
}

/// Runs `leasecheck model`.
pub fn run(args: &ModelArgs) -> anyhow::Result<()> {
    if let Some(addr) = &args.serve {
        return serve(args, addr);
    }
    if args.negative_controls {
        return negative_controls(args);
    }
    if let Some(version) = &args.algo {
        return algo(args, version);
    }
    let mutation = match &args.mutation {
        Some(name) => Some(parse_mutation(name)?),
        None => None,
    };
    let options = args.options();
    let mut failed = Vec::new();
    for (name, mut cfg) in args.configs()? {
        println!("== {name}");
        match mutation {
            Some(m) => {
                cfg.mutation = m;
                let report = if args.complete {
                    check::run(&cfg, &options)?
                } else {
                    check::run_negative_control(&cfg, m, &options)?
                };
                print!("{report}");
                let caught = m
                    .expected()
                    .and_then(|inv| report.property(inv.property_name()))
                    .is_some_and(|p| p.discovered);
                if !caught {
                    failed.push(format!("{name}: mutation {m} not caught"));
                }
            }
            None => {
                let report = check::run(&cfg, &options)?;
                print!("{report}");
                if !report.ok() {
                    failed.push(format!("{name}: properties failed"));
                }
            }
        }
    }
    if !failed.is_empty() {
        bail!("model check failed: {}", failed.join("; "));
    }
    Ok(())
}

/// `--algo VERSION`: checks the algorithm model of that pg_lease version.
fn algo(args: &ModelArgs, version: &str) -> anyhow::Result<()> {
    let variant = Variant::from_name(version).with_context(|| {
        let names = Variant::ALL.map(Variant::name);
        format!("unknown pg_lease version {version:?}; expected one of {names:?}")
    })?;
    let mut cfg = AlgoConfig::of(variant);
    cfg.sessions = args.clients.unwrap_or(cfg.sessions);
    if let Some(t) = args.max_time {
        cfg.max_time = u8::try_from(t).context("--max-time with --algo must be 0 to 255")?;
    }
    if args.slow_steps {
        cfg.timing = Timing::SlowSteps;
    }
    let report = algo_model::run(&cfg, &[])?;
    print!("{report}");
    if !report.ok() {
        bail!("algorithm model of pg_lease {variant}: properties failed");
    }
    Ok(())
}

fn parse_mutation(name: &str) -> anyhow::Result<Mutation> {
    Mutation::from_name(name).with_context(|| {
        let names: Vec<&str> = Mutation::ALL.iter().map(|m| m.name()).collect();
        format!("unknown mutation {name:?}; expected one of {names:?}")
    })
}

fn negative_controls(args: &ModelArgs) -> anyhow::Result<()> {
    let options = args.options();
    let mut missed = Vec::new();
    println!(
        "{:<30} {:<56} {:>8} {:>9} {:>10}",
        "mutation", "expected violation", "actions", "unique", "time"
    );
    for m in Mutation::ALL {
        let Some(inv) = m.expected() else { continue };
        let cfg = control_config(m);
        let report = if args.complete {
            check::run(&cfg, &options)?
        } else {
            check::run_negative_control(&cfg, m, &options)?
        };
        let found = report
            .property(inv.property_name())
            .filter(|p| p.discovered);
        match found {
            Some(p) => {
                println!(
                    "{:<30} {:<56} {:>8} {:>9} {:>10.2?}",
                    m.name(),
                    inv.property_name(),
                    p.path.len(),
                    report.unique_states,
                    report.elapsed
                );
                if args.complete {
                    println!("{:<30} all violated: {:?}", "", report.violated());
                }
            }
            None => {
                println!("{:<30} {:<56} NOT FOUND", m.name(), inv.property_name());
                missed.push(m.name());
            }
        }
    }
    if !missed.is_empty() {
        bail!("negative controls not caught: {}", missed.join(", "));
    }
    Ok(())
}

fn serve(args: &ModelArgs, addr: &str) -> anyhow::Result<()> {
    let configs = args.configs()?;
    let [(name, mut cfg)] = <[_; 1]>::try_from(configs)
        .map_err(|_| anyhow::anyhow!("--serve needs one configuration: pass --preset NAME"))?;
    if let Some(m) = &args.mutation {
        cfg.mutation = parse_mutation(m)?;
    }
    // The Explorer panics when the address is taken: probe it first.
    drop(
        std::net::TcpListener::bind(addr)
            .with_context(|| format!("cannot listen on {addr} for the Explorer"))?,
    );
    let model = check::model(&cfg)?;
    println!("serving the stateright Explorer for {name} on http://{addr}/ (Ctrl-C to stop)");
    let checker = model.checker().threads(args.threads.max(1)).serve(addr);
    // serve() returns only if its web thread ends.
    println!(
        "Explorer stopped after {} unique states",
        checker.unique_state_count()
    );
    Ok(())
}
