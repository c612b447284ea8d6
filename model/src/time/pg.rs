//! PostgreSQL's own `timestamp + interval` (`timestamp_pl_interval` of
//! `src/backend/utils/adt/timestamp.c`, PostgreSQL 14 and 15), step for step, on its own
//! representation: microseconds since 2000-01-01 00:00 UTC. `timestamptz + interval` with
//! `TimeZone` UTC is the same computation (the zone's offset is 0 throughout), and so is
//! pg_lease's `(t AT TIME ZONE 'UTC' + ttl) AT TIME ZONE 'UTC'`.
//!
//! Kept as the server has it, including its integer widths: `int` fields wrap (PostgreSQL is
//! built with `-fwrapv`), the Julian-day routines run on `unsigned int`, and the last step
//! adds the microseconds to the 64-bit timestamp with an overflow check (without it a sum
//! past `i64::MAX` would wrap to a valid-looking instant; the server raises 22008 there, as
//! the oracle test found), then checks the range. An error is the
//! server's `22008` `timestamp out of range`. A test compares every result with a live
//! server (`harness/tests/time_oracle.rs`).

use super::Interval;

/// The server's answer: SQLSTATE 22008, "timestamp out of range".
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("timestamp out of range (SQLSTATE 22008)")]
pub struct TimestampOutOfRange;

/// Microseconds from 2000-01-01 back to 1970-01-01.
pub const UNIX_TO_POSTGRES_EPOCH_US: i64 = 946_684_800_000_000;

const USECS_PER_DAY: i64 = 86_400_000_000;
const USECS_PER_HOUR: i64 = 3_600_000_000;
const USECS_PER_MINUTE: i64 = 60_000_000;
const USECS_PER_SEC: i64 = 1_000_000;
const POSTGRES_EPOCH_JDATE: i64 = 2_451_545;
/// `MIN_TIMESTAMP`: 4714-11-24 00:00:00 BC.
pub const MIN_TIMESTAMP: i64 = -211_813_488_000_000_000;
/// `END_TIMESTAMP`: 294277-01-01 00:00:00 (excluded).
pub const END_TIMESTAMP: i64 = 9_223_371_331_200_000_000;
const JULIAN_MINYEAR: i32 = -4713;
const JULIAN_MINMONTH: i32 = 11;
const JULIAN_MAXYEAR: i32 = 5_874_898;
const JULIAN_MAXMONTH: i32 = 6;
const MONTHS_PER_YEAR: i32 = 12;

const DAY_TAB: [[i32; 12]; 2] = [
    [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31],
    [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31],
];

/// `struct pg_tm`, the fields this computation uses.
#[derive(Clone, Copy, Debug)]
struct Tm {
    year: i32,
    mon: i32,
    mday: i32,
    hour: i32,
    min: i32,
    sec: i32,
}

fn is_valid_timestamp(t: i64) -> bool {
    (MIN_TIMESTAMP..END_TIMESTAMP).contains(&t)
}

fn is_valid_julian(y: i32, m: i32) -> bool {
    (y > JULIAN_MINYEAR || (y == JULIAN_MINYEAR && m >= JULIAN_MINMONTH))
        && (y < JULIAN_MAXYEAR || (y == JULIAN_MAXYEAR && m < JULIAN_MAXMONTH))
}

fn isleap(y: i32) -> usize {
    usize::from(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))
}

/// `date2j`: the Julian day of a date (`int` arithmetic, wrapping).
fn date2j(y: i32, m: i32, d: i32) -> i32 {
    let (mut year, mut month) = (y, m);
    if month > 2 {
        month = month.wrapping_add(1);
        year = year.wrapping_add(4800);
    } else {
        month = month.wrapping_add(13);
        year = year.wrapping_add(4799);
    }
    let century = year / 100;
    let mut julian = year.wrapping_mul(365).wrapping_sub(32167);
    julian = julian.wrapping_add(year / 4 - century + century / 4);
    julian.wrapping_add(7834i32.wrapping_mul(month) / 256 + d)
}

/// `j2date`: the date of a Julian day, on `unsigned int` as the server computes it.
fn j2date(jd: i32) -> (i32, i32, i32) {
    let mut julian = jd as u32;
    julian = julian.wrapping_add(32044);
    let mut quad = julian / 146_097;
    let extra = (julian.wrapping_sub(quad.wrapping_mul(146_097)))
        .wrapping_mul(4)
        .wrapping_add(3);
    julian = julian.wrapping_add(
        60u32
            .wrapping_add(quad.wrapping_mul(3))
            .wrapping_add(extra / 146_097),
    );
    quad = julian / 1461;
    julian = julian.wrapping_sub(quad.wrapping_mul(1461));
    let mut y = (julian.wrapping_mul(4) / 1461) as i32;
    julian = if y != 0 {
        (julian.wrapping_add(305)) % 365
    } else {
        (julian.wrapping_add(306)) % 366
    }
    .wrapping_add(123);
    y = (y as u32).wrapping_add(quad.wrapping_mul(4)) as i32;
    let year = y.wrapping_sub(4800);
    quad = julian.wrapping_mul(2141) / 65536;
    let day = julian.wrapping_sub(7834u32.wrapping_mul(quad) / 256) as i32;
    let month = (quad.wrapping_add(10) % MONTHS_PER_YEAR as u32) as i32 + 1;
    (year, month, day)
}

/// `timestamp2tm` without a time zone: `None` where the server returns -1.
fn timestamp2tm(dt: i64) -> Option<(Tm, i64)> {
    let mut time = dt;
    let mut date = time / USECS_PER_DAY;
    if date != 0 {
        time -= date * USECS_PER_DAY;
    }
    if time < 0 {
        time += USECS_PER_DAY;
        date -= 1;
    }
    date += POSTGRES_EPOCH_JDATE;
    if date < 0 || date > i64::from(i32::MAX) {
        return None;
    }
    let (year, mon, mday) = j2date(date as i32);
    // dt2time
    let hour = time / USECS_PER_HOUR;
    time -= hour * USECS_PER_HOUR;
    let min = time / USECS_PER_MINUTE;
    time -= min * USECS_PER_MINUTE;
    let sec = time / USECS_PER_SEC;
    let fsec = time - sec * USECS_PER_SEC;
    Some((
        Tm {
            year,
            mon,
            mday,
            hour: hour as i32,
            min: min as i32,
            sec: sec as i32,
        },
        fsec,
    ))
}

/// `tm2timestamp` without a time zone.
fn tm2timestamp(tm: &Tm, fsec: i64) -> Result<i64, TimestampOutOfRange> {
    if !is_valid_julian(tm.year, tm.mon) {
        return Err(TimestampOutOfRange);
    }
    let date = i64::from(date2j(tm.year, tm.mon, tm.mday)) - POSTGRES_EPOCH_JDATE;
    let time = ((i64::from(tm.hour) * 60 + i64::from(tm.min)) * 60 + i64::from(tm.sec))
        * USECS_PER_SEC
        + fsec;
    let result = date
        .checked_mul(USECS_PER_DAY)
        .and_then(|r| r.checked_add(time))
        .ok_or(TimestampOutOfRange)?;
    if (result < 0 && date > 0) || (result > 0 && date < -1) || !is_valid_timestamp(result) {
        return Err(TimestampOutOfRange);
    }
    Ok(result)
}

/// `timestamp_pl_interval(ts, span)`: `ts` and the result in microseconds since
/// 2000-01-01. `ts` at `i64::MIN` or `i64::MAX` is `-infinity` / `infinity` and comes back
/// unchanged.
pub fn timestamp_pl_interval(ts: i64, span: &Interval) -> Result<i64, TimestampOutOfRange> {
    if ts == i64::MIN || ts == i64::MAX {
        return Ok(ts);
    }
    let mut timestamp = ts;
    if span.months != 0 {
        let (mut tm, fsec) = timestamp2tm(timestamp).ok_or(TimestampOutOfRange)?;
        tm.mon = tm.mon.wrapping_add(span.months);
        if tm.mon > MONTHS_PER_YEAR {
            tm.year = tm.year.wrapping_add((tm.mon - 1) / MONTHS_PER_YEAR);
            tm.mon = ((tm.mon - 1) % MONTHS_PER_YEAR) + 1;
        } else if tm.mon < 1 {
            tm.year = tm.year.wrapping_add(tm.mon / MONTHS_PER_YEAR - 1);
            tm.mon = tm.mon % MONTHS_PER_YEAR + MONTHS_PER_YEAR;
        }
        let month_len = DAY_TAB[isleap(tm.year)][(tm.mon - 1) as usize];
        if tm.mday > month_len {
            tm.mday = month_len;
        }
        timestamp = tm2timestamp(&tm, fsec)?;
    }
    if span.days != 0 {
        let (mut tm, fsec) = timestamp2tm(timestamp).ok_or(TimestampOutOfRange)?;
        let julian = date2j(tm.year, tm.mon, tm.mday).wrapping_add(span.days);
        (tm.year, tm.mon, tm.mday) = j2date(julian);
        timestamp = tm2timestamp(&tm, fsec)?;
    }
    // the server checks this addition for overflow (a wrapped sum would look valid)
    timestamp = timestamp
        .checked_add(span.micros)
        .ok_or(TimestampOutOfRange)?;
    if !is_valid_timestamp(timestamp) {
        return Err(TimestampOutOfRange);
    }
    Ok(timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(unix: i64) -> i64 {
        unix - UNIX_TO_POSTGRES_EPOCH_US
    }

    #[test]
    fn julian_routines_round_trip_over_the_range() {
        for jd in (0..110_000_000).step_by(9_973) {
            let (y, m, d) = j2date(jd);
            assert_eq!(date2j(y, m, d), jd, "{jd}: {y}-{m}-{d}");
        }
        assert_eq!(j2date(POSTGRES_EPOCH_JDATE as i32), (2000, 1, 1));
    }

    #[test]
    fn end_of_month_and_range() {
        let mon = Interval {
            months: 1,
            days: 0,
            micros: 0,
        };
        // 2026-01-31 -> 2026-02-28
        let jan31 = pg(1_769_817_600_000_000);
        let feb28 = pg(1_772_236_800_000_000);
        assert_eq!(timestamp_pl_interval(jan31, &mon), Ok(feb28));
        assert_eq!(
            timestamp_pl_interval(END_TIMESTAMP - 1, &Interval::micros(1)),
            Err(TimestampOutOfRange)
        );
        assert_eq!(
            timestamp_pl_interval(MIN_TIMESTAMP, &Interval::micros(-1)),
            Err(TimestampOutOfRange)
        );
        assert_eq!(timestamp_pl_interval(i64::MAX, &mon), Ok(i64::MAX));
    }
}
