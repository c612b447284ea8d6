//! The model's time arithmetic against PostgreSQL itself, on every tested major (15 and 14
//! by default): seeded draws of (instant, interval) pairs, with month ends, 29 February,
//! mixed-sign fields, large values and the range limits over-represented, each added on the
//! server and by `model::time`.
//!
//! - `timestamptz + interval` with `TimeZone` UTC, and pg_lease's own form
//!   `(t AT TIME ZONE 'UTC' + ttl) AT TIME ZONE 'UTC'` under a zone with DST, must both equal
//!   `model::time::pg::timestamp_pl_interval` (the value, or SQLSTATE 22008 where the server
//!   raises it), for every pair.
//! - Where the server answers and the pair is in the lease domain (fields of at most 200
//!   years, instants 300 years away from the ends of the range), `Interval::advance`, the
//!   arithmetic the checker's windows use, and `Interval::add_to` give the same instant.
//! - Negative controls: arithmetic with a month of 30 days disagrees with the server on
//!   many of the same draws, and so does the server's own `timestamptz + interval` under a
//!   zone with DST (days of 23 or 25 hours), so the comparison can fail.
//!
//! Values travel in binary (timestamps as PostgreSQL's microseconds since 2000, intervals
//! as `harness::security::hostile::PgInterval`), so nothing is parsed or rounded on the way;
//! each batch is one call of a temporary function that catches each pair's error.

use bytes::{Buf, BufMut, BytesMut};
use harness::pg::{shared, test_majors};
use harness::security::hostile::PgInterval;
use model::gen::Rng;
use model::time::pg::{
    timestamp_pl_interval, TimestampOutOfRange, END_TIMESTAMP, MIN_TIMESTAMP,
    UNIX_TO_POSTGRES_EPOCH_US,
};
use model::{Interval, Ts};
use std::error::Error as StdError;
use std::time::Instant;
use tokio_postgres::types::{accepts, to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio_postgres::Client;

/// A `timestamp`/`timestamptz` in its binary wire form: microseconds since 2000-01-01 UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PgTimestamp(i64);

impl ToSql for PgTimestamp {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn StdError + Sync + Send>> {
        out.put_i64(self.0);
        Ok(IsNull::No)
    }

    accepts!(TIMESTAMPTZ, TIMESTAMP);
    to_sql_checked!();
}

impl<'a> FromSql<'a> for PgTimestamp {
    fn from_sql(_ty: &Type, mut raw: &'a [u8]) -> Result<Self, Box<dyn StdError + Sync + Send>> {
        if raw.len() != 8 {
            return Err(format!("a timestamp is 8 bytes, got {}", raw.len()).into());
        }
        Ok(PgTimestamp(raw.get_i64()))
    }

    accepts!(TIMESTAMPTZ, TIMESTAMP);
}

/// Pairs drawn per major (the issue asks for at least 20,000).
const PAIRS: usize = 24_000;
/// Pairs per statement.
const BATCH: usize = 4_000;

const DAY: i64 = 86_400_000_000;
const HOUR: i64 = 3_600_000_000;
const YEAR_DAYS: i64 = 365;

/// Microseconds since 2000-01-01 of a date and time (proleptic Gregorian, astronomical
/// years), computed independently of the model.
fn pg_instant(y: i64, m: u32, d: u32, tod: i64) -> i64 {
    // days from civil (H. Hinnant), then shift from 1970 to 2000
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * DAY + tod - UNIX_TO_POSTGRES_EPOCH_US
}

fn month_len(y: i64, m: u32) -> u32 {
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    match m {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A value of magnitude up to about `2^bits`, with a random sign.
fn signed(rng: &mut Rng, max_bits: u32) -> i64 {
    let bits = rng.below(u64::from(max_bits) + 1) as u32;
    let v = if bits == 0 {
        0
    } else {
        (rng.next_u64() >> (64 - bits)) as i64
    };
    if rng.chance(50) {
        -v
    } else {
        v
    }
}

fn tod(rng: &mut Rng) -> i64 {
    match rng.below(4) {
        0 => 0,
        1 => DAY - 1,
        2 => rng.range(0, 3) * HOUR + rng.range(0, 1),
        _ => rng.range(0, DAY - 1),
    }
}

/// The pair's class, for the figures printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    MonthEnd,
    Feb29,
    Lease,
    Anywhere,
    NearLimits,
    Huge,
}

fn draw(rng: &mut Rng) -> (Class, i64, Interval) {
    let years = [
        1900, 1999, 2000, 2024, 2025, 2026, 2028, 2100, 2400, 1, 0, -4, 9999,
    ];
    match rng.below(6) {
        0 => {
            let y = if rng.chance(70) {
                *rng.pick(&years)
            } else {
                rng.range(-4000, 12_000)
            };
            let m = rng.range(1, 12) as u32;
            let d = month_len(y, m) - rng.below(4) as u32;
            let iv = Interval {
                months: rng.range(-30, 30) as i32,
                days: if rng.chance(50) {
                    0
                } else {
                    rng.range(-40, 40) as i32
                },
                micros: if rng.chance(50) { 0 } else { signed(rng, 38) },
            };
            (Class::MonthEnd, pg_instant(y, m, d, tod(rng)), iv)
        }
        1 => {
            let y = 4 * rng.range(-1000, 2600);
            let y = if y % 100 == 0 && y % 400 != 0 {
                y + 4
            } else {
                y
            };
            let iv = Interval {
                months: 12 * rng.range(-8, 8) as i32 + rng.range(-1, 1) as i32,
                days: rng.range(-3, 3) as i32,
                micros: signed(rng, 37),
            };
            (Class::Feb29, pg_instant(y, 2, 29, tod(rng)), iv)
        }
        2 => {
            // what pg_lease sees: a clock around now and a ttl or wait of at most 100 years
            let t = pg_instant(2026, 1, 1, 0)
                + rng.range(-3 * YEAR_DAYS, 3 * YEAR_DAYS) * DAY
                + tod(rng);
            let iv = Interval {
                months: if rng.chance(50) {
                    0
                } else {
                    rng.range(0, 1200) as i32
                },
                days: if rng.chance(50) {
                    0
                } else {
                    rng.range(0, 36_500) as i32
                },
                micros: rng.range(0, 100 * YEAR_DAYS * DAY),
            };
            (Class::Lease, t, iv)
        }
        3 => {
            let t = rng.range(MIN_TIMESTAMP, END_TIMESTAMP - 1);
            let iv = Interval {
                months: signed(rng, 22) as i32,
                days: signed(rng, 25) as i32,
                micros: signed(rng, 62),
            };
            (Class::Anywhere, t, iv)
        }
        4 => {
            let t = if rng.chance(50) {
                MIN_TIMESTAMP + rng.range(0, 40 * DAY) + signed(rng, 10)
            } else {
                END_TIMESTAMP - rng.range(0, 40 * DAY) + signed(rng, 10)
            };
            let iv = Interval {
                months: rng.range(-2, 2) as i32,
                days: rng.range(-40, 40) as i32,
                micros: signed(rng, 42),
            };
            (Class::NearLimits, t, iv)
        }
        _ => {
            let t = if rng.chance(80) {
                rng.range(MIN_TIMESTAMP, END_TIMESTAMP - 1)
            } else {
                *rng.pick(&[i64::MIN, i64::MAX, MIN_TIMESTAMP, END_TIMESTAMP - 1])
            };
            let pick32 = |rng: &mut Rng| {
                *rng.pick(&[i32::MIN, i32::MAX, i32::MAX - 11, i32::MIN + 12, 0, 1, -1])
            };
            let iv = Interval {
                months: pick32(rng),
                days: pick32(rng),
                micros: *rng.pick(&[i64::MIN, i64::MAX, 0, 1, -1, i64::MAX / 2]),
            };
            (Class::Huge, t, iv)
        }
    }
}

/// The server's answer: a timestamp, or the SQLSTATE of its error.
type Answer = Result<i64, String>;

const FUNCTION: &str = "
CREATE FUNCTION pg_temp.add_all(ts timestamptz[], iv interval[])
RETURNS TABLE (k int, plain timestamptz, plain_state text, lease timestamptz, lease_state text)
LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. coalesce(array_length(ts, 1), 0) LOOP
    k := i;
    BEGIN
      plain := ts[i] + iv[i]; plain_state := NULL;
    EXCEPTION WHEN others THEN
      plain := NULL; plain_state := SQLSTATE;
    END;
    BEGIN
      lease := (ts[i] AT TIME ZONE 'UTC' + iv[i]) AT TIME ZONE 'UTC'; lease_state := NULL;
    EXCEPTION WHEN others THEN
      lease := NULL; lease_state := SQLSTATE;
    END;
    RETURN NEXT;
  END LOOP;
END $$";

/// The server's answers for `pairs` under `zone`: (`ts + iv`, pg_lease's form).
async fn server_answers(
    client: &Client,
    zone: &str,
    pairs: &[(Class, i64, Interval)],
) -> Vec<(Answer, Answer)> {
    client
        .batch_execute(&format!("SET TimeZone = '{zone}'"))
        .await
        .expect("set the zone");
    let mut out = Vec::with_capacity(pairs.len());
    for chunk in pairs.chunks(BATCH) {
        let ts: Vec<PgTimestamp> = chunk.iter().map(|p| PgTimestamp(p.1)).collect();
        let iv: Vec<PgInterval> = chunk.iter().map(|p| PgInterval(p.2)).collect();
        let rows = client
            .query(
                "SELECT k, plain, plain_state, lease, lease_state \
                 FROM pg_temp.add_all($1, $2) ORDER BY k",
                &[&ts, &iv],
            )
            .await
            .expect("the batch runs");
        assert_eq!(rows.len(), chunk.len());
        for row in rows {
            let answer = |v: usize, s: usize| -> Answer {
                match row.get::<_, Option<String>>(s) {
                    Some(state) => Err(state),
                    None => Ok(row.get::<_, PgTimestamp>(v).0),
                }
            };
            out.push((answer(1, 2), answer(3, 4)));
        }
    }
    out
}

fn model_answer(t: i64, iv: &Interval) -> Answer {
    timestamp_pl_interval(t, iv).map_err(|TimestampOutOfRange| "22008".to_string())
}

/// In the domain the checker's windows use: fields of at most 200 years, the instant and
/// result 300 years inside the server's range.
fn lease_domain(t: i64, iv: &Interval, result: i64) -> bool {
    let margin = 300 * 366 * DAY;
    let inside = |x: i64| x > MIN_TIMESTAMP + margin && x < END_TIMESTAMP - margin;
    iv.months.unsigned_abs() <= 2400
        && iv.days.unsigned_abs() <= 73_000
        && iv.micros.unsigned_abs() <= 200 * 366 * DAY as u64
        && inside(t)
        && inside(result)
}

/// The naive arithmetic of the control: a month of 30 days, a day of 24 hours.
fn thirty_day_months(t: i64, iv: &Interval) -> i64 {
    t + (i64::from(iv.months) * 30 + i64::from(iv.days)) * DAY + iv.micros
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_time_arithmetic_equals_the_servers() {
    let mut rng = Rng::new(0x7157_0a7e);
    let pairs: Vec<(Class, i64, Interval)> = (0..PAIRS).map(|_| draw(&mut rng)).collect();
    let mut classes = std::collections::BTreeMap::new();
    for p in &pairs {
        *classes.entry(p.0).or_insert(0usize) += 1;
    }
    println!("{} pairs per major: {classes:?}", pairs.len());
    for major in test_majors() {
        let started = Instant::now();
        let cluster = shared(major).expect("a cluster");
        let client = cluster.connect("postgres").await.expect("connect");
        client.batch_execute(FUNCTION).await.expect("the function");
        let utc = server_answers(&client, "UTC", &pairs).await;
        let dst = server_answers(&client, "America/New_York", &pairs).await;
        let (mut mismatches, mut errors, mut advanced, mut naive_wrong, mut zoned) =
            (Vec::new(), 0usize, 0usize, 0usize, 0usize);
        for (i, ((class, t, iv), (plain, _))) in pairs.iter().zip(&utc).enumerate() {
            let model = model_answer(*t, iv);
            let lease = &dst[i].1;
            zoned += usize::from(dst[i].0 != model);
            if *plain != model || *lease != model {
                mismatches.push(format!(
                    "{class:?} {t} + {iv}: server {plain:?}, pg_lease form {lease:?}, model {model:?}"
                ));
            }
            match plain {
                Err(_) => errors += 1,
                Ok(r) if lease_domain(*t, iv, *r) => {
                    advanced += 1;
                    let unix = |x: i64| Ts(x + UNIX_TO_POSTGRES_EPOCH_US);
                    let (a, b) = (iv.advance(unix(*t)), iv.add_to(unix(*t)));
                    if a != unix(*r) || b != Ok(unix(*r)) {
                        mismatches.push(format!(
                            "{class:?} {t} + {iv}: server {r}, advance {a:?}, add_to {b:?}"
                        ));
                    }
                    naive_wrong += usize::from(thirty_day_months(*t, iv) != *r);
                }
                Ok(_) => {}
            }
        }
        println!(
            "PG {major}: {} pairs in {:.1?}: {errors} out of range (22008), {advanced} in the \
             lease domain, of which 30-day months get {naive_wrong} wrong; `+` under \
             America/New_York differs {zoned} times; {} mismatches",
            pairs.len(),
            started.elapsed(),
            mismatches.len()
        );
        assert!(
            mismatches.is_empty(),
            "PG {major}: {} mismatches, first ones:\n{}",
            mismatches.len(),
            mismatches[..mismatches.len().min(20)].join("\n")
        );
        // the draws reach both answers and the control can fail
        assert!(errors > 1_000, "PG {major}: only {errors} errors drawn");
        assert!(
            advanced > 8_000,
            "PG {major}: only {advanced} in the lease domain"
        );
        assert!(
            naive_wrong > 4_000,
            "negative control: 30-day months disagree only {naive_wrong} times"
        );
        assert!(
            zoned > 1_000,
            "negative control: arithmetic in a DST zone differs only {zoned} times"
        );
    }
}
