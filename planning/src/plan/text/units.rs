//! Intervals and pauses in a plan's text: `20ms`, `1mon2d20ms`, `300ms` (specs/HISTORY.md,
//! "Plan text").

use model::Interval;
use std::time::Duration;

const MICRO_UNITS: [(&str, i64); 5] = [
    ("h", 3_600_000_000),
    ("min", 60_000_000),
    ("s", 1_000_000),
    ("ms", 1_000),
    ("us", 1),
];

/// An interval's nonzero fields, each a signed number and a unit (`1mon2d20ms`), the
/// micros in the largest unit that holds them exactly; `0s` for zero.
pub fn interval_text(i: Interval) -> String {
    let mut text = String::new();
    if i.months != 0 {
        text += &format!("{}mon", i.months);
    }
    if i.days != 0 {
        text += &format!("{}d", i.days);
    }
    if let Some((unit, size)) = MICRO_UNITS.iter().find(|(_, size)| i.micros % size == 0) {
        if i.micros != 0 {
            text += &format!("{}{unit}", i.micros / size);
        }
    }
    if text.is_empty() {
        text = "0s".into();
    }
    text
}

const NANO_UNITS: [(&str, u128); 6] = [
    ("h", 3_600_000_000_000),
    ("min", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
];

/// A pause in the largest unit that holds it exactly (`300ms`, `2s`); `0s` for zero.
pub fn duration_text(d: Duration) -> String {
    let nanos = d.as_nanos();
    match NANO_UNITS.iter().find(|(_, size)| nanos % size == 0) {
        Some((unit, size)) if nanos != 0 => format!("{}{unit}", nanos / size),
        _ => "0s".into(),
    }
}

// ---- reading ----

/// A value's parts, each a number (a sign allowed) and a unit: `1mon-2d` is `1 mon`, `-2 d`.
fn parts_of(value: &str) -> Option<Vec<(&str, &str)>> {
    let mut parts = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        let sign = usize::from(rest.starts_with('-'));
        let digits = rest[sign..].bytes().take_while(u8::is_ascii_digit).count();
        let letters = rest[sign + digits..]
            .bytes()
            .take_while(u8::is_ascii_lowercase)
            .count();
        if digits == 0 || letters == 0 {
            return None;
        }
        let (number, tail) = rest.split_at(sign + digits);
        let (unit, tail) = tail.split_at(letters);
        parts.push((number, unit));
        rest = tail;
    }
    (!parts.is_empty()).then_some(parts)
}

/// The position of each part's unit in `units`, refusing units out of order or repeated.
fn ordered<'a>(parts: &[(&'a str, &'a str)], units: &[&str]) -> Option<Vec<(&'a str, usize)>> {
    let mut last = None;
    let mut placed = Vec::with_capacity(parts.len());
    for (number, unit) in parts {
        let at = units.iter().position(|u| u == unit)?;
        if last.is_some_and(|l| at <= l) {
            return None;
        }
        last = Some(at);
        placed.push((*number, at));
    }
    Some(placed)
}

/// An interval written as [`interval_text`] writes one (its units in any combination,
/// largest first, each once).
pub fn interval_of(value: &str) -> Result<Interval, String> {
    interval_parts(value).ok_or_else(|| {
        format!(
            "`{value}` is not an interval: write e.g. `20ms`, `5s`, `1500us`, `1mon2d20ms` \
             (units mon, d, h, min, s, ms, us, largest first)"
        )
    })
}

fn interval_parts(value: &str) -> Option<Interval> {
    let units = ["mon", "d", "h", "min", "s", "ms", "us"];
    let mut interval = Interval::ZERO;
    for (number, at) in ordered(&parts_of(value)?, &units)? {
        let n: i64 = number.parse().ok()?;
        match at {
            0 => interval.months = i32::try_from(n).ok()?,
            1 => interval.days = i32::try_from(n).ok()?,
            _ => {
                let size = MICRO_UNITS[at - 2].1;
                interval.micros = interval.micros.checked_add(n.checked_mul(size)?)?;
            }
        }
    }
    Some(interval)
}

/// A pause written as [`duration_text`] writes one.
pub fn duration_of(value: &str) -> Result<Duration, String> {
    duration_parts(value).ok_or_else(|| {
        format!(
            "`{value}` is not a duration: write e.g. `300ms`, `2s`, `1min30s` (units h, min, s, \
             ms, us, ns, largest first; not negative)"
        )
    })
}

fn duration_parts(value: &str) -> Option<Duration> {
    let units: Vec<&str> = NANO_UNITS.iter().map(|(u, _)| *u).collect();
    let mut nanos: u128 = 0;
    for (number, at) in ordered(&parts_of(value)?, &units)? {
        let n: u128 = number.parse().ok()?;
        nanos = nanos.checked_add(n.checked_mul(NANO_UNITS[at].1)?)?;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}
