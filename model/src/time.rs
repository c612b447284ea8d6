//! Server time, PostgreSQL intervals, observed time spans and expiry windows.
//!
//! All time is the database server's clock (`clock_timestamp()`), counted in microseconds
//! (the resolution of `timestamptz`). The origin is arbitrary: a history recorder may use
//! microseconds since the Unix epoch, the stateright model uses small abstract ticks.

use std::fmt;

mod calendar;
pub mod pg;

pub use calendar::{rfc3339, Image, Sources};
pub use pg::TimestampOutOfRange;

/// One instant of server time, in microseconds since an arbitrary origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ts(pub i64);

impl Ts {
    /// `self + micros`, saturating at the ends of `i64`.
    pub fn plus(self, micros: i64) -> Ts {
        Ts(self.0.saturating_add(micros))
    }

    /// The instant in RFC 3339 UTC, e.g. `2026-12-03T09:38:50.123456Z` (server times of a
    /// history are Unix microseconds).
    pub fn rfc3339(self) -> String {
        rfc3339(self)
    }
}

impl fmt::Display for Ts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}us", self.0)
    }
}

const USECS_PER_HOUR: i64 = 3_600_000_000;
const USECS_PER_DAY: i64 = 24 * USECS_PER_HOUR;

/// A PostgreSQL `interval`: months, days and microseconds, each field signed, as stored by
/// the server. `ttl` and `wait` are intervals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Interval {
    pub months: i32,
    pub days: i32,
    pub micros: i64,
}

impl Interval {
    /// The zero interval (the default `wait`).
    pub const ZERO: Interval = Interval {
        months: 0,
        days: 0,
        micros: 0,
    };

    /// `interval '100 years'`, the upper bound for `ttl` and `wait`.
    pub const HUNDRED_YEARS: Interval = Interval {
        months: 1200,
        days: 0,
        micros: 0,
    };

    /// An interval of `micros` microseconds (no month or day field).
    pub const fn micros(micros: i64) -> Interval {
        Interval {
            months: 0,
            days: 0,
            micros,
        }
    }

    /// An interval of `ms` milliseconds.
    pub const fn millis(ms: i64) -> Interval {
        Interval::micros(ms.saturating_mul(1_000))
    }

    /// An interval of `s` seconds.
    pub const fn secs(s: i64) -> Interval {
        Interval::micros(s.saturating_mul(1_000_000))
    }

    /// True when some field is negative (e.g. `interval '1 day -1 hour'`).
    pub fn has_negative_field(&self) -> bool {
        self.months < 0 || self.days < 0 || self.micros < 0
    }

    /// The value PostgreSQL compares intervals by (`interval_cmp_value`): a month counts as
    /// 30 days and a day as 24 hours.
    pub fn cmp_value(&self) -> i128 {
        (i128::from(self.months) * 30 + i128::from(self.days)) * i128::from(USECS_PER_DAY)
            + i128::from(self.micros)
    }

    /// True when the interval compares greater than `interval '0'`.
    pub fn is_positive(&self) -> bool {
        self.cmp_value() > 0
    }

    /// `t + self` exactly as the server computes `timestamptz + interval` in UTC (and
    /// pg_lease's `(t AT TIME ZONE 'UTC' + ttl) AT TIME ZONE 'UTC'`): months first, the day
    /// clamped to the month's end, then days of 24 hours, then microseconds; an error where
    /// the server raises 22008 (outside 4714-11-24 BC ..= 294276-12-31, or a result past
    /// what Unix microseconds in an `i64` can hold, the year 294247).
    pub fn add_to(&self, t: Ts) -> Result<Ts, TimestampOutOfRange> {
        let at =
            t.0.checked_sub(pg::UNIX_TO_POSTGRES_EPOCH_US)
                .ok_or(TimestampOutOfRange)?;
        let r = pg::timestamp_pl_interval(at, self)?;
        r.checked_add(pg::UNIX_TO_POSTGRES_EPOCH_US)
            .map(Ts)
            .ok_or(TimestampOutOfRange)
    }

    /// `t + self` on the calendar without the server's range limits (saturating at the ends
    /// of `i64`): equal to [`Interval::add_to`] wherever that answers and no intermediate
    /// value wraps (always, for a valid ttl or wait away from the year 294276). Window
    /// bounds of the checker use it. Not monotone when months are added (see
    /// [`Image`]).
    pub fn advance(&self, t: Ts) -> Ts {
        calendar::advance(self, t)
    }

    /// Every instant `s` with `self.advance(s) == r`, ascending: none, one, or with months
    /// up to four (`2026-01-28`..`31` at one time of day all give `2026-02-28`).
    pub fn sources(&self, r: Ts) -> Sources {
        calendar::sources(self, r)
    }

    /// The earliest instant of `[lo, hi]` from which adding `self` gives `r`.
    pub fn earliest_source_in(&self, r: Ts, lo: Ts, hi: Ts) -> Option<Ts> {
        self.sources(r)
            .as_slice()
            .iter()
            .copied()
            .find(|s| lo <= *s && *s <= hi)
    }

    /// The latest instant of `[lo, hi]` from which adding `self` gives `r`.
    pub fn latest_source_in(&self, r: Ts, lo: Ts, hi: Ts) -> Option<Ts> {
        self.sources(r)
            .as_slice()
            .iter()
            .rev()
            .copied()
            .find(|s| lo <= *s && *s <= hi)
    }

    /// The values `s + self` for `s` in `[lo, hi]` (`lo <= hi`): e.g. the expiries a grant
    /// taking effect in that window can set.
    pub fn image(&self, lo: Ts, hi: Ts) -> Window {
        Window::image(self, lo, hi)
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} mons {} days {}us",
            self.months, self.days, self.micros
        )
    }
}

/// Error building a [`Span`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("span start {t0} is after its end {t1}")]
pub struct SpanError {
    pub t0: Ts,
    pub t1: Ts,
}

/// The server-time interval `[t0, t1]` within which one operation took effect, as observed
/// by the client (e.g. server time read just before sending the call and just after its
/// reply). The operation's effective server time is some unknown `t` with `t0 <= t <= t1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    t0: Ts,
    t1: Ts,
}

impl Span {
    /// The span `[t0, t1]`; an error when `t0 > t1`.
    pub fn new(t0: Ts, t1: Ts) -> Result<Span, SpanError> {
        if t0 <= t1 {
            Ok(Span { t0, t1 })
        } else {
            Err(SpanError { t0, t1 })
        }
    }

    /// The point span `[t, t]`: the effective time is known exactly.
    pub fn point(t: Ts) -> Span {
        Span { t0: t, t1: t }
    }

    pub fn t0(&self) -> Ts {
        self.t0
    }

    pub fn t1(&self) -> Ts {
        self.t1
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.t0, self.t1)
    }
}

/// What is known about a stored `expires_at`: one of the values of the window. `lo` and
/// `hi` are the least and the greatest of them (both possible). The stateright model always
/// knows it exactly (`lo == hi`); a history checker may not (e.g. after an operation whose
/// reply was lost), and narrows the window as later outcomes reveal more. A window made by
/// adding a ttl with months ([`Window::image`]) can have gaps between `lo` and `hi`
/// (calendar clamping): it remembers where it came from, and [`Window::contains`] and the
/// narrowing methods answer exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window {
    pub lo: Ts,
    pub hi: Ts,
    /// The values are this image's, between `lo` and `hi`; `None`: every instant between.
    image: Option<Image>,
}

impl Window {
    /// A window holding exactly one instant.
    pub fn exact(t: Ts) -> Window {
        Window::between(t, t)
    }

    /// Every instant of `[lo, hi]`.
    pub fn between(lo: Ts, hi: Ts) -> Window {
        Window {
            lo,
            hi,
            image: None,
        }
    }

    /// The values `s + ttl` for `s` in `[a, b]`.
    pub fn image(ttl: &Interval, a: Ts, b: Ts) -> Window {
        if ttl.months == 0 || a >= b {
            // a translation: every instant between the ends is a value
            return Window::between(ttl.advance(a), ttl.advance(b.max(a)));
        }
        let image = Image { ttl: *ttl, a, b };
        let lo = image.succ(Ts(i64::MIN)).unwrap_or(ttl.advance(a));
        let hi = image.pred(Ts(i64::MAX)).unwrap_or(ttl.advance(b));
        Window {
            lo,
            hi,
            image: Some(image),
        }
        .normalized()
    }

    /// Without the image once it adds nothing (a single value).
    fn normalized(self) -> Window {
        if self.lo == self.hi {
            Window::exact(self.lo)
        } else {
            self
        }
    }

    /// True when `t` is one of the window's values.
    pub fn contains(&self, t: Ts) -> bool {
        self.lo <= t && t <= self.hi && self.image.is_none_or(|im| im.attains(t))
    }

    /// The values `>= t`, if any.
    pub fn at_or_after(&self, t: Ts) -> Option<Window> {
        if t <= self.lo {
            return Some(*self);
        }
        let lo = match self.image {
            None => t,
            Some(im) => im.succ(t)?,
        };
        (lo <= self.hi).then(|| Window { lo, ..*self }.normalized())
    }

    /// The values `<= t`, if any.
    pub fn at_or_before(&self, t: Ts) -> Option<Window> {
        if t >= self.hi {
            return Some(*self);
        }
        let hi = match self.image {
            None => t,
            Some(im) => im.pred(t)?,
        };
        (hi >= self.lo).then(|| Window { hi, ..*self }.normalized())
    }

    /// The instant, when the window holds exactly one.
    pub fn as_exact(&self) -> Option<Ts> {
        (self.lo == self.hi).then_some(self.lo)
    }

    /// Every value moved by `micros` (a translation keeps the window's shape).
    pub fn shifted(&self, micros: i64) -> Window {
        Window {
            lo: self.lo.plus(micros),
            hi: self.hi.plus(micros),
            image: self.image.and_then(|im| {
                Some(Image {
                    ttl: Interval {
                        micros: im.ttl.micros.checked_add(micros)?,
                        ..im.ttl
                    },
                    ..im
                })
            }),
        }
    }

    /// True when the window's values have gaps (it came from adding months).
    pub fn has_gaps(&self) -> bool {
        self.image.is_some()
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.as_exact() {
            Some(t) => write!(f, "{t}"),
            None => write!(f, "[{}, {}]", self.lo, self.hi),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_comparison_follows_postgres() {
        assert!(Interval::secs(1).is_positive());
        assert!(!Interval::ZERO.is_positive());
        let day_minus_hour = Interval {
            months: 0,
            days: 1,
            micros: -USECS_PER_HOUR,
        };
        assert!(day_minus_hour.is_positive());
        assert!(day_minus_hour.has_negative_field());
        assert_eq!(
            Interval::HUNDRED_YEARS.cmp_value(),
            Interval {
                months: 0,
                days: 36_000,
                micros: 0
            }
            .cmp_value()
        );
    }

    #[test]
    fn plain_micros_translate_and_months_follow_the_calendar() {
        let t = Ts(1_769_817_600_000_000); // 2026-01-31T00:00:00Z
        assert_eq!(Interval::secs(30).advance(t), t.plus(30_000_000));
        assert_eq!(Interval::secs(30).add_to(t), Ok(t.plus(30_000_000)));
        let mon = Interval {
            months: 1,
            days: 0,
            micros: 0,
        };
        let feb28 = Ts(1_772_236_800_000_000);
        assert_eq!(mon.add_to(t), Ok(feb28));
        assert_eq!(mon.advance(t), feb28);
        assert_eq!(rfc3339(feb28), "2026-02-28T00:00:00.000000Z");
        let day = Interval {
            months: 0,
            days: 1,
            micros: 0,
        };
        assert_eq!(day.advance(t), t.plus(USECS_PER_DAY));
    }

    #[test]
    fn a_window_of_month_images_has_gaps() {
        let hour = USECS_PER_HOUR;
        let jan30_23 = Ts(1_769_817_600_000_000 - hour);
        let jan31_01 = Ts(1_769_817_600_000_000 + hour);
        let mon = Interval {
            months: 1,
            days: 0,
            micros: 0,
        };
        let w = Window::image(&mon, jan30_23, jan31_01);
        let feb28 = 1_772_236_800_000_000;
        assert_eq!(w.lo, Ts(feb28));
        assert_eq!(w.hi, Ts(feb28 + 24 * hour - 1));
        assert!(w.contains(Ts(feb28 + hour)));
        assert!(w.contains(Ts(feb28 + 23 * hour)));
        assert!(!w.contains(Ts(feb28 + 12 * hour)));
        // live at noon, lapsed at 22:00: no value is left
        let live = w.at_or_after(Ts(feb28 + 12 * hour)).expect("23:00 and on");
        assert_eq!(live.lo, Ts(feb28 + 23 * hour));
        assert!(live.at_or_before(Ts(feb28 + 22 * hour)).is_none());
    }

    #[test]
    fn span_rejects_reversed_bounds() {
        assert!(Span::new(Ts(2), Ts(1)).is_err());
        let s = Span::new(Ts(1), Ts(2)).expect("ordered span");
        assert_eq!((s.t0(), s.t1()), (Ts(1), Ts(2)));
    }
}
