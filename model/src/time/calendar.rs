//! `timestamp + interval` on the proleptic Gregorian calendar in UTC, over all of [`Ts`]
//! (Unix microseconds): months first (the day clamped to the end of the month), then days
//! (exactly 24 hours each: UTC has no DST), then microseconds. This is PostgreSQL's
//! arithmetic (`timestamp_pl_interval`, and `timestamptz_pl_interval` with `TimeZone` UTC)
//! without its range limits; [`super::pg`] is the server's own, limits and all, and the two
//! agree wherever the server answers (tests compare both with a live server).
//!
//! Adding months is **not monotone**: `2026-01-30 23:00 + 1 mon = 2026-02-28 23:00`, later
//! than `2026-01-31 01:00 + 1 mon = 2026-02-28 01:00`. Within one day it is a translation,
//! and the day a day is sent to never decreases. So the image of an instant window under
//! `+ ttl` can have gaps (no instant is a month before `2026-03-30`), and the instants a
//! reported `expires_at` fixes are up to 4 single instants (`2026-01-28`..`31` at the same
//! time of day all give `2026-02-28`). [`Image`] answers exactly what a window of effective
//! instants can give.

use super::{Interval, Ts};

pub(crate) const USECS_PER_DAY: i64 = 86_400_000_000;
const DAY: i128 = USECS_PER_DAY as i128;

/// (year, month 1-12, day 1-31) of the day `z` days after 1970-01-01 (astronomical years:
/// year 0 is 1 BC). H. Hinnant's `civil_from_days`.
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The day number (days after 1970-01-01) of a date; the inverse of [`civil_from_days`].
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

pub(crate) fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// (year, month) `months` months after (y, m).
fn add_months(y: i64, m: u32, months: i64) -> (i64, u32) {
    let total = y * 12 + i64::from(m) - 1 + months;
    (total.div_euclid(12), total.rem_euclid(12) as u32 + 1)
}

/// The day `months` months after day `d`, its day of month clamped to the month's end.
fn shift_day(d: i64, months: i32) -> i64 {
    let (y, m, day) = civil_from_days(d);
    let (ny, nm) = add_months(y, m, i64::from(months));
    days_from_civil(ny, nm, day.min(days_in_month(ny, nm)))
}

/// The days `d` with `shift_day(d, months) == t`: a run of 0 to 4 consecutive days, as
/// `(first, last)`. Several when `t` is the last day of its month and the month `months`
/// before is longer; none when that month is too short to have `t`'s day.
fn source_days(t: i64, months: i32) -> Option<(i64, i64)> {
    let (y, m, day) = civil_from_days(t);
    let (sy, sm) = add_months(y, m, -i64::from(months));
    let source_len = days_in_month(sy, sm);
    if day > source_len {
        return None;
    }
    let first = days_from_civil(sy, sm, day);
    let last = if day == days_in_month(y, m) {
        days_from_civil(sy, sm, source_len)
    } else {
        first
    };
    Some((first, last))
}

/// The translation an interval's day and microsecond fields add, in microseconds.
fn translation(ttl: &Interval) -> i128 {
    i128::from(ttl.days) * DAY + i128::from(ttl.micros)
}

fn saturate(v: i128) -> Ts {
    Ts(i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX }))
}

/// The month step alone: `t + months` (day clamped), in microseconds, unbounded.
fn month_step(t: i128, months: i32) -> i128 {
    if months == 0 {
        return t;
    }
    let day = t.div_euclid(DAY);
    let tod = t.rem_euclid(DAY);
    // every i64 instant's day fits an i64 with room to spare
    i128::from(shift_day(day as i64, months)) * DAY + tod
}

/// `t + ttl` on the unbounded calendar, saturating at the ends of `i64`.
pub(crate) fn advance(ttl: &Interval, t: Ts) -> Ts {
    saturate(month_step(i128::from(t.0), ttl.months) + translation(ttl))
}

/// Every instant `s` with `advance(ttl, s) == r`, ascending: at most 4.
pub(crate) fn sources(ttl: &Interval, r: Ts) -> Sources {
    let mut out = Sources::default();
    let target = i128::from(r.0) - translation(ttl);
    if ttl.months == 0 {
        if let Ok(s) = i64::try_from(target) {
            out.push(Ts(s));
        }
        return out;
    }
    let (day, tod) = (target.div_euclid(DAY), target.rem_euclid(DAY));
    let Ok(day) = i64::try_from(day) else {
        return out;
    };
    if let Some((first, last)) = source_days(day, ttl.months) {
        for d in first..=last {
            if let Ok(s) = i64::try_from(i128::from(d) * DAY + tod) {
                out.push(Ts(s));
            }
        }
    }
    out
}

/// Up to four instants, ascending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    at: [Ts; 4],
    n: usize,
}

impl Sources {
    fn push(&mut self, t: Ts) {
        if self.n < self.at.len() {
            self.at[self.n] = t;
            self.n += 1;
        }
    }

    /// The instants, ascending.
    pub fn as_slice(&self) -> &[Ts] {
        &self.at[..self.n]
    }
}

/// The values `advance(ttl, s)` for `s` in `[a, b]` (`a <= b`): the expiries a grant or
/// renew with this `ttl` can set when it takes effect somewhere in `[a, b]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Image {
    pub ttl: Interval,
    pub a: Ts,
    pub b: Ts,
}

impl Image {
    /// The smallest value `>= u`, if any.
    pub fn succ(&self, u: Ts) -> Option<Ts> {
        let c = translation(&self.ttl);
        self.month_succ(i128::from(u.0) - c)
            .map(|v| saturate(v + c))
    }

    /// The largest value `<= v`, if any.
    pub fn pred(&self, v: Ts) -> Option<Ts> {
        let c = translation(&self.ttl);
        self.month_pred(i128::from(v.0) - c)
            .map(|x| saturate(x + c))
    }

    /// True when `r` is one of the values.
    pub fn attains(&self, r: Ts) -> bool {
        sources(&self.ttl, r)
            .as_slice()
            .iter()
            .any(|s| self.a <= *s && *s <= self.b)
    }

    /// The days of `[a, b]` and the time of day `a` starts and `b` ends at.
    fn days(&self) -> (i64, i128, i64, i128) {
        let (a, b) = (i128::from(self.a.0), i128::from(self.b.0));
        (
            a.div_euclid(DAY) as i64,
            a.rem_euclid(DAY),
            b.div_euclid(DAY) as i64,
            b.rem_euclid(DAY),
        )
    }

    /// The times of day day `d` of `[a, b]` covers.
    fn tods(&self, d: i64) -> (i128, i128) {
        let (da, ta, db, tb) = self.days();
        (
            if d == da { ta } else { 0 },
            if d == db { tb } else { DAY - 1 },
        )
    }

    fn target(&self, d: i64) -> i64 {
        shift_day(d, self.ttl.months)
    }

    /// The smallest month-step value `>= u` over `[a, b]`.
    fn month_succ(&self, u: i128) -> Option<i128> {
        if self.a > self.b {
            return None;
        }
        if self.ttl.months == 0 {
            let v = u.max(i128::from(self.a.0));
            return (v <= i128::from(self.b.0)).then_some(v);
        }
        let (da, _, db, _) = self.days();
        let (tu, tau) = (u.div_euclid(DAY), u.rem_euclid(DAY));
        let mut best: Option<i128> = None;
        // on u's own day: its source days within [a, b], from u's time of day on
        if let Ok(tu64) = i64::try_from(tu) {
            if let Some((first, last)) = source_days(tu64, self.ttl.months) {
                for d in first.max(da)..=last.min(db) {
                    let (lo, hi) = self.tods(d);
                    let t = tau.max(lo);
                    if t <= hi {
                        best = Some(best.map_or(tu * DAY + t, |b| b.min(tu * DAY + t)));
                    }
                }
            }
        }
        // the first later day reached: from the first source day sent past u's day
        if let Some(d1) = first_day(da, db, |d| i128::from(self.target(d)) > tu) {
            let t1 = self.target(d1);
            let lo = if d1 > da || (d1 < db && self.target(d1 + 1) == t1) {
                0
            } else {
                self.tods(d1).0
            };
            let v = i128::from(t1) * DAY + lo;
            best = Some(best.map_or(v, |b| b.min(v)));
        }
        best
    }

    /// The largest month-step value `<= v` over `[a, b]`.
    fn month_pred(&self, v: i128) -> Option<i128> {
        if self.a > self.b {
            return None;
        }
        if self.ttl.months == 0 {
            let x = v.min(i128::from(self.b.0));
            return (x >= i128::from(self.a.0)).then_some(x);
        }
        let (da, _, db, _) = self.days();
        let (tv, tauv) = (v.div_euclid(DAY), v.rem_euclid(DAY));
        let mut best: Option<i128> = None;
        if let Ok(tv64) = i64::try_from(tv) {
            if let Some((first, last)) = source_days(tv64, self.ttl.months) {
                for d in first.max(da)..=last.min(db) {
                    let (lo, hi) = self.tods(d);
                    let t = tauv.min(hi);
                    if t >= lo {
                        best = Some(best.map_or(tv * DAY + t, |b| b.max(tv * DAY + t)));
                    }
                }
            }
        }
        if let Some(d2) = last_day(da, db, |d| i128::from(self.target(d)) < tv) {
            let t2 = self.target(d2);
            let hi = if d2 < db || (d2 > da && self.target(d2 - 1) == t2) {
                DAY - 1
            } else {
                self.tods(d2).1
            };
            let x = i128::from(t2) * DAY + hi;
            best = Some(best.map_or(x, |b| b.max(x)));
        }
        best
    }
}

/// The first day of `[lo, hi]` where the monotone predicate `p` holds.
fn first_day(lo: i64, hi: i64, p: impl Fn(i64) -> bool) -> Option<i64> {
    if lo > hi || !p(hi) {
        return None;
    }
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if p(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

/// The last day of `[lo, hi]` where `p` holds (`p` true on a prefix).
fn last_day(lo: i64, hi: i64, p: impl Fn(i64) -> bool) -> Option<i64> {
    if lo > hi || !p(lo) {
        return None;
    }
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo + 1) / 2;
        if p(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// `t` in RFC 3339 UTC with microseconds, e.g. `2026-12-03T09:38:50.123456Z` (years beyond
/// 0..=9999 get a sign and at least six digits, as ISO 8601's expanded form).
pub fn rfc3339(t: Ts) -> String {
    let day = t.0.div_euclid(USECS_PER_DAY);
    let tod = t.0.rem_euclid(USECS_PER_DAY);
    let (y, m, d) = civil_from_days(day);
    let secs = tod / 1_000_000;
    let year = if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else {
        format!("{}{:06}", if y < 0 { '-' } else { '+' }, y.unsigned_abs())
    };
    format!(
        "{year}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        tod % 1_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i64, m: u32, d: u32, h: i64) -> Ts {
        Ts(days_from_civil(y, m, d) * USECS_PER_DAY + h * 3_600_000_000)
    }

    const MON: Interval = Interval {
        months: 1,
        days: 0,
        micros: 0,
    };

    #[test]
    fn civil_round_trip() {
        for z in (-1_000_000..1_000_000).step_by(997) {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
            assert!(d <= days_in_month(y, m));
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(rfc3339(at(2026, 2, 28, 23)), "2026-02-28T23:00:00.000000Z");
        assert_eq!(rfc3339(Ts(-1)), "1969-12-31T23:59:59.999999Z");
    }

    #[test]
    fn a_month_clamps_to_the_end_of_the_month() {
        assert_eq!(advance(&MON, at(2026, 1, 31, 0)), at(2026, 2, 28, 0));
        assert_eq!(advance(&MON, at(2028, 1, 31, 0)), at(2028, 2, 29, 0));
        let back = Interval {
            months: -1,
            days: 0,
            micros: 0,
        };
        assert_eq!(advance(&back, at(2026, 3, 31, 5)), at(2026, 2, 28, 5));
        // not monotone: a later instant can land earlier
        assert!(advance(&MON, at(2026, 1, 30, 23)) > advance(&MON, at(2026, 1, 31, 1)));
    }

    #[test]
    fn sources_of_a_clamped_month_end_are_four_instants() {
        let s = sources(&MON, at(2026, 2, 28, 1));
        assert_eq!(
            s.as_slice(),
            &[
                at(2026, 1, 28, 1),
                at(2026, 1, 29, 1),
                at(2026, 1, 30, 1),
                at(2026, 1, 31, 1)
            ]
        );
        assert!(sources(&MON, at(2026, 3, 30, 0)).as_slice().is_empty());
        assert_eq!(
            sources(&MON, at(2026, 3, 28, 0)).as_slice(),
            &[at(2026, 2, 28, 0)]
        );
    }

    /// Per-day enumeration: within one day `+ ttl` is a translation, so the values of a
    /// window are the union of one segment per day it touches. succ, pred and attains
    /// must agree with that union at every segment end and around it.
    #[test]
    fn image_queries_match_per_day_enumeration() {
        let hour: i64 = 3_600_000_000;
        let base = at(2026, 1, 26, 0).0;
        for ttl in [
            MON,
            Interval {
                months: 1,
                days: 1,
                micros: 7,
            },
            Interval {
                months: -2,
                days: 0,
                micros: 0,
            },
            Interval {
                months: 13,
                days: -3,
                micros: -hour,
            },
            Interval {
                months: 0,
                days: 2,
                micros: 5,
            },
        ] {
            for (da, db) in [(0, 1), (3, 5), (2, 9), (4, 4), (0, 40), (33, 37)] {
                for (ha, hb) in [(0, 23), (23, 1), (5, 5), (22, 2)] {
                    let a = Ts(base + da * 24 * hour + ha * hour + 17);
                    let b = Ts(base + db * 24 * hour + hb * hour);
                    if a > b {
                        continue;
                    }
                    let im = Image { ttl, a, b };
                    let mut segments = Vec::new();
                    let mut d = a.0.div_euclid(USECS_PER_DAY);
                    while d * USECS_PER_DAY <= b.0 {
                        let lo = a.0.max(d * USECS_PER_DAY);
                        let hi = b.0.min(d * USECS_PER_DAY + USECS_PER_DAY - 1);
                        segments.push((advance(&ttl, Ts(lo)).0, advance(&ttl, Ts(hi)).0));
                        d += 1;
                    }
                    let probes: Vec<i64> = segments
                        .iter()
                        .flat_map(|(lo, hi)| [lo - 1, *lo, lo + 1, hi - 1, *hi, hi + 1])
                        .collect();
                    for u in probes {
                        let succ = segments
                            .iter()
                            .filter(|(_, hi)| *hi >= u)
                            .map(|(lo, _)| (*lo).max(u))
                            .min();
                        let pred = segments
                            .iter()
                            .filter(|(lo, _)| *lo <= u)
                            .map(|(_, hi)| (*hi).min(u))
                            .max();
                        let attained = segments.iter().any(|(lo, hi)| *lo <= u && u <= *hi);
                        let what = format!(
                            "{ttl} over [{}, {}] at {}",
                            rfc3339(a),
                            rfc3339(b),
                            rfc3339(Ts(u))
                        );
                        assert_eq!(im.succ(Ts(u)).map(|t| t.0), succ, "succ: {what}");
                        assert_eq!(im.pred(Ts(u)).map(|t| t.0), pred, "pred: {what}");
                        assert_eq!(im.attains(Ts(u)), attained, "attains: {what}");
                    }
                }
            }
        }
    }
}
