//! Server time, PostgreSQL intervals, observed time spans and expiry windows.
//!
//! All time is the database server's clock (`clock_timestamp()`), counted in microseconds
//! (the resolution of `timestamptz`). The origin is arbitrary: a history recorder may use
//! microseconds since the Unix epoch, the stateright model uses small abstract ticks.

use std::fmt;

/// One instant of server time, in microseconds since an arbitrary origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ts(pub i64);

impl Ts {
    /// `self + micros`, saturating at the ends of `i64`.
    pub fn plus(self, micros: i64) -> Ts {
        Ts(self.0.saturating_add(micros))
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

    /// Smallest and largest number of microseconds that adding this interval to a
    /// `timestamptz` can advance it by. Month and day fields are calendar arithmetic in the
    /// server's time zone, so they are bounded conservatively (a month is 28 to 31 days, a day
    /// 23 to 25 hours); an interval of plain microseconds is exact (`lo == hi`).
    pub fn advance_bounds(&self) -> (i64, i64) {
        let months = i128::from(self.months);
        let days = i128::from(self.days);
        let micros = i128::from(self.micros);
        let day = i128::from(USECS_PER_DAY);
        let hour = i128::from(USECS_PER_HOUR);
        let (m_lo, m_hi) = if months >= 0 {
            (months * 28 * day, months * 31 * day)
        } else {
            (months * 31 * day, months * 28 * day)
        };
        let (d_lo, d_hi) = if days >= 0 {
            (days * (day - hour), days * (day + hour))
        } else {
            (days * (day + hour), days * (day - hour))
        };
        (
            saturate(m_lo + d_lo + micros),
            saturate(m_hi + d_hi + micros),
        )
    }
}

fn saturate(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
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

/// What is known about a stored `expires_at`: it lies in `[lo, hi]`. The stateright model
/// always knows it exactly (`lo == hi`); a history checker may not (e.g. after an operation
/// whose reply was lost), and narrows the window as later outcomes reveal more.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window {
    pub lo: Ts,
    pub hi: Ts,
}

impl Window {
    /// A window holding exactly one instant.
    pub fn exact(t: Ts) -> Window {
        Window { lo: t, hi: t }
    }

    /// True when `t` lies in the window.
    pub fn contains(&self, t: Ts) -> bool {
        self.lo <= t && t <= self.hi
    }

    /// The instant, when the window holds exactly one.
    pub fn as_exact(&self) -> Option<Ts> {
        (self.lo == self.hi).then_some(self.lo)
    }

    /// The window shifted by `micros`.
    pub fn shifted(&self, micros: i64) -> Window {
        Window {
            lo: self.lo.plus(micros),
            hi: self.hi.plus(micros),
        }
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
    fn advance_bounds_are_exact_for_plain_micros() {
        assert_eq!(
            Interval::secs(30).advance_bounds(),
            (30_000_000, 30_000_000)
        );
        let (lo, hi) = Interval {
            months: 1,
            days: 1,
            micros: 0,
        }
        .advance_bounds();
        assert!(lo < hi);
        assert_eq!(lo, 28 * USECS_PER_DAY + 23 * USECS_PER_HOUR);
        assert_eq!(hi, 31 * USECS_PER_DAY + 25 * USECS_PER_HOUR);
    }

    #[test]
    fn span_rejects_reversed_bounds() {
        assert!(Span::new(Ts(2), Ts(1)).is_err());
        let s = Span::new(Ts(1), Ts(2)).expect("ordered span");
        assert_eq!((s.t0(), s.t1()), (Ts(1), Ts(2)));
    }
}
