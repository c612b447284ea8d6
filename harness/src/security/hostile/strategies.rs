//! The hostile-input strategies: which arguments a case draws (text, intervals, epochs,
//! whole calls), so that every class the property is about is drawn often.

use super::*;

/// `n` bytes of text made of 3-byte characters, padded with ASCII.
fn of_bytes(n: usize, ch: char) -> String {
    let w = ch.len_utf8();
    let mut s: String = std::iter::repeat_n(ch, n / w).collect();
    s.extend(std::iter::repeat_n('a', n % w));
    s
}

/// Hostile text: NULL, empty, whitespace, control characters, exactly 1023/1024/1025 bytes
/// (ASCII and multi-byte), long (up to ~4000 bytes), arbitrary Unicode without NUL, and the
/// watched names.
pub fn text_strategy() -> impl Strategy<Value = Option<String>> {
    let whitespace = prop::sample::select(vec![
        " ", "\t", "\n", "\r\n", "   ", "\u{a0}", "\u{2028}", "\u{feff}", "\u{3000}",
    ])
    .prop_map(|s| Some(s.to_string()));
    let control = "[\\x01-\\x1F\\x7F]{1,16}".prop_map(Some);
    let exact = (
        prop::sample::select(vec![1023usize, 1024, 1025]),
        prop::sample::select(vec!['x', '\u{20ac}', '\u{1f600}', '\u{e9}']),
    )
        .prop_map(|(n, ch)| Some(of_bytes(n, ch)));
    let long = (1026usize..4000, any::<u8>()).prop_map(|(n, b)| {
        let ch = char::from(b'!' + b % 90);
        Some(of_bytes(n, ch))
    });
    let arbitrary = any::<String>().prop_map(|s| Some(s.replace('\0', "")));
    let printable = "\\PC{1,64}".prop_map(Some);
    let watched = prop::sample::select(
        WATCHED_KEYS
            .iter()
            .chain(WATCHED_OWNERS.iter())
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
    )
    .prop_map(Some);
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(String::new())),
        1 => whitespace,
        1 => control,
        2 => exact,
        1 => long,
        2 => arbitrary,
        1 => printable,
        5 => watched,
    ]
}

/// Hostile intervals: NULL, raw fields of any value, zero, the 100-year bound and one
/// microsecond past it, negative and mixed-sign fields, the extremes of each field (PG 17's
/// ±infinity representation among them), short valid ones, and texts for the server to cast
/// ('infinity', '1 year -1 month', '@ 1 hour ago', out-of-range and malformed ones).
pub fn interval_strategy() -> impl Strategy<Value = Option<IntervalInput>> {
    let i = |months: i32, days: i32, micros: i64| Interval {
        months,
        days,
        micros,
    };
    let special = prop::sample::select(vec![
        Interval::ZERO,
        Interval::HUNDRED_YEARS,
        i(1200, 0, 1),
        i(1200, 1, 0),
        i(0, 36_500, 0),
        i(0, 36_525, 1),
        i(0, 0, -1),
        i(-1, 0, 0),
        i(0, -1, 0),
        i(0, 1, -3_600_000_000),
        i(12, -1, 0),
        i(1, 0, -1),
        i(0, 0, i64::MAX),
        i(0, 0, i64::MIN),
        i(i32::MAX, i32::MAX, i64::MAX),
        i(i32::MIN, i32::MIN, i64::MIN),
        i(i32::MAX, 0, 0),
        i(0, i32::MIN, 0),
        i(0, 0, 2_200_000_000 * 3_600_000_000),
        i(0, 0, 1),
    ])
    .prop_map(|v| Some(IntervalInput::Fields(v)));
    let raw = (any::<i32>(), any::<i32>(), any::<i64>())
        .prop_map(move |(m, d, us)| Some(IntervalInput::Fields(i(m, d, us))));
    let small = (0i32..2, 0i32..2, 1i64..5_000_000)
        .prop_map(move |(m, d, us)| Some(IntervalInput::Fields(i(m, d, us))));
    let short = (1i64..20_000).prop_map(|us| Some(IntervalInput::Fields(Interval::micros(us))));
    let text = prop::sample::select(vec![
        "infinity",
        "-infinity",
        "1 year -1 month",
        "@ 1 hour ago",
        "100 years",
        "100 years 1 microsecond",
        "101 years",
        "-1 day",
        "1 day -1 hour",
        "0",
        "P1Y2M",
        "PT0.5S",
        "1e9 years",
        "forever",
        "",
        " ",
        "2147483647 mons",
        "178956970 years 8 mons",
        "-178956970 years -8 mons",
        "1 millennium",
        "2200000000 hours",
        "9223372036854775807 microseconds",
        "NaN",
    ])
    .prop_map(|s| Some(IntervalInput::Text(s.to_string())));
    prop_oneof![
        1 => Just(None),
        3 => special,
        2 => raw,
        2 => small,
        1 => short,
        2 => text,
    ]
}

/// Epochs: NULL, 0, negative, the extremes, the watched keys' likely epochs, any bigint.
pub fn epoch_strategy() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![
        1 => Just(None),
        3 => prop::sample::select(vec![0i64, -1, 1, 2, 3, i64::MIN, i64::MAX, i64::MIN + 1]).prop_map(Some),
        1 => any::<i64>().prop_map(Some),
    ]
}

/// Any call with hostile arguments.
pub fn call_strategy() -> impl Strategy<Value = Call> {
    let t = text_strategy;
    prop_oneof![
        (t(), t(), interval_strategy(), interval_strategy()).prop_map(|(key, owner, ttl, wait)| {
            Call::Acquire {
                key,
                owner,
                ttl,
                wait,
            }
        }),
        (t(), t(), epoch_strategy(), interval_strategy()).prop_map(|(key, owner, epoch, ttl)| {
            Call::Renew {
                key,
                owner,
                epoch,
                ttl,
            }
        }),
        (t(), t(), epoch_strategy()).prop_map(|(key, owner, epoch)| Call::Release {
            key,
            owner,
            epoch
        }),
        t().prop_map(|key| Call::Inspect { key }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_byte_lengths() {
        for n in [1023, 1024, 1025] {
            for ch in ['x', '\u{20ac}', '\u{1f600}'] {
                assert_eq!(of_bytes(n, ch).len(), n);
            }
        }
    }
}
