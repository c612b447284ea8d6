//! The catalogue of measured workloads: pg_lease's (W1-cycle, W2-contend, the single-op
//! paths) and the floors they are compared with. Each is a script both drivers run
//! (see [`crate::script`]) on a database of its own, after its setup SQL. The scripts call
//! pg_lease's functions; what the calls answer is counted per step, never judged here
//! (the model crate is the one spec).

/// What a workload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pg_lease workload, compared with a floor.
    Lease,
    /// A floor: what the same machine and server charge for comparable plain work.
    Floor,
}

/// One scripted workload.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub name: &'static str,
    pub kind: Kind,
    pub about: &'static str,
    /// Run once in the workload's fresh database (up to [`MAX_CLIENTS`] clients' rows).
    pub setup: &'static str,
    pub script: &'static str,
    /// The name of each SQL step of the script, in order.
    pub steps: &'static [&'static str],
    /// The name of the whole script's figure when it has several steps.
    pub script_op: &'static str,
    /// The floor figure each step (and the script) is compared with: (workload, op).
    pub floor: Option<(&'static str, &'static str)>,
    /// Whether the open-loop (fixed-rate) driver also runs it.
    pub open_loop: bool,
}

/// Most clients a workload's setup provides for.
pub const MAX_CLIENTS: u32 = 64;

pub const W1_CYCLE: &str = "W1-cycle";
pub const W2_CONTEND: &str = "W2-contend";
pub const SELECT_1: &str = "floor-select-1";
pub const UPDATE: &str = "floor-update";
pub const ADVISORY: &str = "floor-advisory-xact-lock";
/// The lock store's operations (Rust driver only: they go through the `lockstore` crate).
pub const LOCKSTORE: &str = "floor-lockstore";
/// Blocking-acquire wake latency (Rust only: release → the waiter's acquire returns).
pub const WAKE: &str = "wake-latency";

/// Every scripted workload, pg_lease's first.
pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: W1_CYCLE,
        kind: Kind::Lease,
        about: "acquire + renew + release on the client's private key, each its own durable transaction",
        setup: "",
        script: "\
SELECT acquired, epoch FROM lease.acquire('w1-' || :client_id::text, 'owner-' || :client_id::text, interval '30 s') \\gset
SELECT status FROM lease.renew('w1-' || :client_id::text, 'owner-' || :client_id::text, :epoch, interval '30 s');
SELECT status FROM lease.release('w1-' || :client_id::text, 'owner-' || :client_id::text, :epoch);
",
        steps: &["grant", "renew", "release"],
        script_op: "cycle",
        floor: Some((UPDATE, "update")),
        open_loop: true,
    },
    Workload {
        name: W2_CONTEND,
        kind: Kind::Lease,
        about: "one non-blocking acquire of one of 4 shared keys (uniform), TTL 10 ms, 1 op per transaction",
        setup: "",
        script: "\
\\set k random(1, 4)
SELECT acquired FROM lease.acquire('w2-' || :k::text, 'owner-' || :client_id::text, interval '10 ms');
",
        steps: &["attempt"],
        script_op: "attempt",
        floor: Some((UPDATE, "update")),
        open_loop: true,
    },
    Workload {
        name: "denied-acquire",
        kind: Kind::Lease,
        about: "non-blocking acquire of a key another owner holds for a day",
        setup: "SELECT lease.acquire('held', 'holder', interval '1 day');",
        script: "\
SELECT acquired FROM lease.acquire('held', 'owner-' || :client_id::text, interval '30 s');
",
        steps: &["denied-acquire"],
        script_op: "denied-acquire",
        floor: Some((SELECT_1, "select-1")),
        open_loop: false,
    },
    Workload {
        name: "idempotent-reacquire",
        kind: Kind::Lease,
        about: "acquire by the owner of its own unexpired lease (private key held for a day)",
        setup: "SELECT lease.acquire('idem-' || i, 'owner-' || i, interval '1 day') FROM generate_series(0, 63) AS i;",
        script: "\
SELECT acquired FROM lease.acquire('idem-' || :client_id::text, 'owner-' || :client_id::text, interval '1 day');
",
        steps: &["idempotent-reacquire"],
        script_op: "idempotent-reacquire",
        floor: Some((SELECT_1, "select-1")),
        open_loop: false,
    },
    Workload {
        name: "inspect",
        kind: Kind::Lease,
        about: "inspect of a held key",
        setup: "SELECT lease.acquire('held', 'holder', interval '1 day');",
        script: "\
SELECT held FROM lease.inspect('held');
",
        steps: &["inspect"],
        script_op: "inspect",
        floor: Some((SELECT_1, "select-1")),
        open_loop: false,
    },
    Workload {
        name: SELECT_1,
        kind: Kind::Floor,
        about: "SELECT 1",
        setup: "",
        script: "SELECT 1;\n",
        steps: &["select-1"],
        script_op: "select-1",
        floor: None,
        open_loop: false,
    },
    Workload {
        name: UPDATE,
        kind: Kind::Floor,
        about: "a bare durable single-row UPDATE of the client's private row (primary key lookup)",
        setup: "CREATE TABLE floor_row (id integer PRIMARY KEY, n bigint NOT NULL);
INSERT INTO floor_row SELECT i, 0 FROM generate_series(0, 63) AS i;",
        script: "UPDATE floor_row SET n = n + 1 WHERE id = :client_id;\n",
        steps: &["update"],
        script_op: "update",
        floor: None,
        open_loop: false,
    },
    Workload {
        name: ADVISORY,
        kind: Kind::Floor,
        about: "SELECT pg_advisory_xact_lock(client's number): a transaction-scoped advisory lock",
        setup: "",
        script: "SELECT pg_advisory_xact_lock(:client_id);\n",
        steps: &["advisory-xact-lock"],
        script_op: "advisory-xact-lock",
        floor: None,
        open_loop: false,
    },
];

/// The workload named `name`.
pub fn workload(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

/// Every workload name a run can select, scripted or not.
pub fn all_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = WORKLOADS.iter().map(|w| w.name).collect();
    names.extend([LOCKSTORE, WAKE]);
    names
}

/// The floor of figure (workload, op): the workload's own floor for pg_lease workloads.
pub fn floor_of(workload_name: &str) -> Option<(&'static str, &'static str)> {
    workload(workload_name).and_then(|w| w.floor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Script;

    #[test]
    fn every_script_parses_with_one_name_per_step_and_a_known_floor() {
        for w in WORKLOADS {
            let script = Script::parse(w.name, w.script).expect("parses");
            assert_eq!(script.statements().count(), w.steps.len(), "{}", w.name);
            if let Some((floor, op)) = w.floor {
                let f = workload(floor).expect("floor exists");
                assert_eq!(f.kind, Kind::Floor);
                assert!(f.steps.contains(&op));
            }
        }
    }
}
