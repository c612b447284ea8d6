//! A call as the SQL that runs it, for reports.

use model::{Interval, Op};

/// The SQL of a call, with its arguments as literals (for reports: it runs as is in psql).
pub fn call_sql(op: &Op<String, String>) -> String {
    match op {
        Op::Acquire {
            key,
            owner,
            ttl,
            wait,
        } => format!(
            "SELECT * FROM lease.acquire({}, {}, {}, {})",
            text(key),
            text(owner),
            interval(ttl),
            interval(wait)
        ),
        Op::Renew {
            key,
            owner,
            epoch,
            ttl,
        } => format!(
            "SELECT * FROM lease.renew({}, {}, {}, {})",
            text(key),
            text(owner),
            bigint(epoch),
            interval(ttl)
        ),
        Op::Release { key, owner, epoch } => format!(
            "SELECT * FROM lease.release({}, {}, {})",
            text(key),
            text(owner),
            bigint(epoch)
        ),
        Op::Inspect { key } => format!("SELECT * FROM lease.inspect({})", text(key)),
        Op::Expire { key } => format!("-- injected lapse of {}", text(&Some(key.clone()))),
    }
}

fn text(s: &Option<String>) -> String {
    match s {
        Some(s) => format!("'{}'::text", s.replace('\'', "''")),
        None => "NULL::text".into(),
    }
}

fn bigint(e: &Option<i64>) -> String {
    e.map_or("NULL::bigint".into(), |e| e.to_string())
}

fn interval(i: &Option<Interval>) -> String {
    match i {
        Some(i) => format!(
            "interval '{} months {} days {} microseconds'",
            i.months, i.days, i.micros
        ),
        None => "NULL::interval".into(),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_sql_quotes_its_literals() {
        let op = Op::acquire_wait(
            "k'quote\\back".to_string(),
            "w'0\\".to_string(),
            Interval::millis(20),
            Interval::ZERO,
        );
        assert_eq!(
            call_sql(&op),
            "SELECT * FROM lease.acquire('k''quote\\back'::text, 'w''0\\'::text, \
             interval '0 months 0 days 20000 microseconds', \
             interval '0 months 0 days 0 microseconds')"
        );
        let null: Op<String, String> = Op::Release {
            key: None,
            owner: Some("a".into()),
            epoch: None,
        };
        assert_eq!(
            call_sql(&null),
            "SELECT * FROM lease.release(NULL::text, 'a'::text, NULL::bigint)"
        );
    }
}
