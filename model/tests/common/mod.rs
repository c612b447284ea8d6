//! Building histories by hand for the checker's tests.
#![allow(dead_code)]

use model::history::{
    History, NemesisEffect, NemesisRecord, OpRecord, OpResult, TxnEnd, TxnRecord,
};
use model::{Interval, Isolation, Op, Outcome, Row, Span, Ts};

/// A history under construction. Real time and server time are both in microseconds
/// (real time scaled to ns), so a test can line them up.
#[derive(Default)]
pub struct H {
    pub h: History,
}

pub fn k(s: &str) -> String {
    s.to_string()
}

pub fn ms(n: i64) -> Interval {
    Interval::millis(n)
}

pub fn us(n: i64) -> Interval {
    Interval::micros(n)
}

pub fn acq(key: &str, owner: &str, ttl: Interval) -> Op<String, String> {
    Op::acquire(k(key), k(owner), ttl)
}

pub fn acq_wait(key: &str, owner: &str, ttl: Interval, wait: Interval) -> Op<String, String> {
    Op::acquire_wait(k(key), k(owner), ttl, wait)
}

pub fn renew(key: &str, owner: &str, epoch: i64, ttl: Interval) -> Op<String, String> {
    Op::renew(k(key), k(owner), epoch, ttl)
}

pub fn release(key: &str, owner: &str, epoch: i64) -> Op<String, String> {
    Op::release(k(key), k(owner), epoch)
}

pub fn inspect(key: &str) -> Op<String, String> {
    Op::inspect(k(key))
}

pub fn acquired(epoch: i64, expires_at: i64) -> OpResult {
    OpResult::Ok(Outcome::Acquired {
        epoch,
        expires_at: Ts(expires_at),
    })
}

pub fn renewed(expires_at: i64) -> OpResult {
    OpResult::Ok(Outcome::Renewed {
        expires_at: Ts(expires_at),
    })
}

pub fn ok(o: Outcome<String>) -> OpResult {
    OpResult::Ok(o)
}

pub fn held(owner: &str, epoch: i64, expires_at: i64) -> OpResult {
    OpResult::Ok(Outcome::Inspected(Some(Row {
        held: true,
        owner: Some(k(owner)),
        epoch,
        expires_at: Some(Ts(expires_at)),
    })))
}

pub fn free(epoch: i64) -> OpResult {
    OpResult::Ok(Outcome::Inspected(Some(Row {
        held: false,
        owner: None,
        epoch,
        expires_at: None,
    })))
}

pub fn no_row() -> OpResult {
    OpResult::Ok(Outcome::Inspected(None))
}

pub fn unknown() -> OpResult {
    OpResult::Unknown {
        reason: "connection closed".to_string(),
    }
}

pub fn fail(code: &str) -> OpResult {
    OpResult::Fail {
        sqlstate: code.to_string(),
        message: if code == "57014" {
            "lease.acquire: wait of 00:00:00.01 exhausted".to_string()
        } else {
            "error".to_string()
        },
    }
}

impl H {
    pub fn new() -> H {
        H::default()
    }

    /// An op of `process` invoked at `a` and completed at `b` (real time, us), that took
    /// effect in server window [a, b] too.
    pub fn op(
        &mut self,
        process: u32,
        call: Op<String, String>,
        a: i64,
        b: i64,
        r: OpResult,
    ) -> &mut Self {
        self.op_in(process, None, call, a, b, r)
    }

    pub fn op_in(
        &mut self,
        process: u32,
        txn: Option<u64>,
        call: Op<String, String>,
        a: i64,
        b: i64,
        r: OpResult,
    ) -> &mut Self {
        let unknown = matches!(r, OpResult::Unknown { .. });
        let id = self.h.ops.len() as u64 + 1;
        self.h.ops.push(OpRecord {
            id,
            process,
            txn,
            call,
            invoke: (a * 1000) as u64,
            complete: (b * 1000) as u64,
            server: (!unknown).then(|| Span::new(Ts(a), Ts(b)).expect("ordered")),
            result: r,
        });
        self
    }

    pub fn txn(
        &mut self,
        id: u64,
        process: u32,
        begin: i64,
        end_at: i64,
        end_done: i64,
        end: TxnEnd,
    ) -> &mut Self {
        self.h.txns.push(TxnRecord {
            id,
            process,
            isolation: Isolation::ReadCommitted,
            begin: (begin * 1000) as u64,
            end,
            end_invoke: (end_at * 1000) as u64,
            end_complete: (end_done * 1000) as u64,
        });
        self
    }

    /// A fault injected from `a` to `b` (ms) with `effect`.
    fn nemesis(&mut self, fault: &str, a: i64, b: i64, effect: NemesisEffect) -> &mut Self {
        let id = self.h.nemeses.len() as u64 + 1;
        self.h.nemeses.push(NemesisRecord {
            id,
            fault: fault.to_string(),
            start: (a * 1000) as u64,
            end: (b * 1000) as u64,
            effect,
            detail: String::new(),
        });
        self
    }

    pub fn restart(&mut self, a: i64, b: i64) -> &mut Self {
        let down = Some(Span::new(Ts(a), Ts(b)).expect("ordered"));
        let effect = NemesisEffect::Restart { clean: false, down };
        self.nemesis("crash", a, b, effect)
    }

    /// A fault without an effect on lease state (a pause of the server).
    pub fn pause(&mut self, a: i64, b: i64) -> &mut Self {
        self.nemesis("server-pause", a, b, NemesisEffect::None)
    }

    /// An injected lapse of `key` that found a live lease and applied.
    pub fn lapse(&mut self, key: &str, a: i64, b: i64) -> &mut Self {
        self.lapse_applied(key, a, b, true)
    }

    /// An injected lapse of `key`; `applied` is false when it found no live lease.
    pub fn lapse_applied(&mut self, key: &str, a: i64, b: i64, applied: bool) -> &mut Self {
        let effect = NemesisEffect::Lapse {
            key: k(key),
            server: Some(Span::new(Ts(a), Ts(b)).expect("ordered")),
            applied: Some(applied),
        };
        self.nemesis("lapse", a, b, effect)
    }

    pub fn build(&self) -> History {
        self.h.clone()
    }
}
