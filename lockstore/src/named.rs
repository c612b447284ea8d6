//! Named parameters (`:name`) for the pinned statements.
//!
//! The statements in `specs/LOCKSTORE.md` are written with `:key`,
//! `:token`, ... as the task writes them. PostgreSQL wants `$1`, `$2`, ...;
//! [`Named::parse`] rewrites each `:name` to `$n`, numbering the names in
//! order of first appearance (a repeated name reuses its number), and leaves
//! alone what is not a parameter:
//!
//! - `::` casts (`now()::date`),
//! - string literals `'...'` (with `''` inside), escape strings `E'...'`
//!   (with `\'` inside), dollar-quoted strings `$tag$...$tag$`,
//! - quoted identifiers `"..."`,
//! - comments, `-- ...` to the end of the line and nested `/* ... */`,
//! - a colon not followed by a letter or `_` (array slices `a[1:2]`).
//!
//! Positional parameters (`$1`) in the input are refused: mixing both styles
//! is a mistake.

use tokio_postgres::types::ToSql;

/// A parsed statement: its text with `$n` placeholders and the names in `$n` order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    sql: String,
    names: Vec<String>,
}

/// A statement that cannot be bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    #[error("unterminated {what} starting at byte {at}")]
    Unterminated { what: &'static str, at: usize },
    #[error("positional parameter at byte {at}: use :name parameters only")]
    Positional { at: usize },
    #[error("no value for parameter :{0}")]
    Missing(String),
    #[error("value for :{0}, which the statement does not use")]
    Unused(String),
    #[error("parameter :{0} given twice")]
    Duplicate(String),
    #[error("no parameter type declared for :{0}")]
    UnknownType(String),
}

impl Named {
    /// Parses `text`, rewriting `:name` parameters to `$n`.
    pub fn parse(text: &str) -> Result<Named, BindError> {
        let bytes = text.as_bytes();
        let mut sql = String::with_capacity(text.len() + 8);
        let mut names: Vec<String> = Vec::new();
        // Start of the not yet copied input.
        let mut copied = 0;
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\'' => {
                    let escaped = i > 0
                        && matches!(bytes[i - 1], b'E' | b'e')
                        && (i < 2 || !is_ident_byte(bytes[i - 2]));
                    i = skip_quoted(bytes, i, b'\'', escaped, "string literal")?;
                }
                b'"' => i = skip_quoted(bytes, i, b'"', false, "quoted identifier")?,
                b'-' if bytes.get(i + 1) == Some(&b'-') => {
                    i = bytes[i..]
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(bytes.len(), |p| i + p + 1);
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => i = skip_block_comment(bytes, i)?,
                b'$' => {
                    if bytes.get(i + 1).is_some_and(u8::is_ascii_digit)
                        && (i == 0 || !is_ident_byte(bytes[i - 1]))
                    {
                        return Err(BindError::Positional { at: i });
                    }
                    i = skip_dollar_quoted(bytes, i)?;
                }
                b':' if bytes.get(i + 1) == Some(&b':') => i += 2,
                b':' if bytes.get(i + 1).is_some_and(|&b| is_ident_start(b)) => {
                    let start = i + 1;
                    let end = bytes[start..]
                        .iter()
                        .position(|&b| !is_ident_byte(b))
                        .map_or(bytes.len(), |p| start + p);
                    let name = &text[start..end];
                    let n = match names.iter().position(|known| known == name) {
                        Some(p) => p + 1,
                        None => {
                            names.push(name.to_string());
                            names.len()
                        }
                    };
                    sql.push_str(&text[copied..i]);
                    sql.push('$');
                    sql.push_str(&n.to_string());
                    copied = end;
                    i = end;
                }
                _ => i += 1,
            }
        }
        sql.push_str(&text[copied..]);
        Ok(Named { sql, names })
    }

    /// The statement with `$n` placeholders.
    pub fn sql(&self) -> &str {
        &self.sql
    }

    /// The parameter names; `names()[0]` is `$1`.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Orders `values` (by name) as `$1, $2, ...`. Every parameter needs
    /// exactly one value, and every value must be used.
    pub fn args<'a>(
        &self,
        values: &[(&str, &'a (dyn ToSql + Sync))],
    ) -> Result<Vec<&'a (dyn ToSql + Sync)>, BindError> {
        for (i, (name, _)) in values.iter().enumerate() {
            if !self.names.iter().any(|n| n == name) {
                return Err(BindError::Unused((*name).to_string()));
            }
            if values[..i].iter().any(|(earlier, _)| earlier == name) {
                return Err(BindError::Duplicate((*name).to_string()));
            }
        }
        self.names
            .iter()
            .map(|name| {
                values
                    .iter()
                    .find(|(given, _)| given == name)
                    .map(|(_, value)| *value)
                    .ok_or_else(|| BindError::Missing(name.clone()))
            })
            .collect()
    }
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Skips a `quote`-delimited token starting at `start`, where a doubled
/// quote stands for itself (and, if `backslash`, `\x` escapes `x`).
/// Returns the index after the closing quote.
fn skip_quoted(
    bytes: &[u8],
    start: usize,
    quote: u8,
    backslash: bool,
    what: &'static str,
) -> Result<usize, BindError> {
    let mut i = start + 1;
    while i < bytes.len() {
        let b = bytes[i];
        if backslash && b == b'\\' {
            i += 2;
        } else if b == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return Ok(i + 1);
            }
        } else {
            i += 1;
        }
    }
    Err(BindError::Unterminated { what, at: start })
}

/// Skips a (nested) block comment starting at `start`.
fn skip_block_comment(bytes: &[u8], start: usize) -> Result<usize, BindError> {
    let mut depth = 0usize;
    let mut i = start;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Ok(i);
                }
            }
            _ => i += 1,
        }
    }
    Err(BindError::Unterminated {
        what: "block comment",
        at: start,
    })
}

/// Skips a dollar-quoted string `$tag$...$tag$` starting at `start`, or
/// just the `$` when it does not open one (e.g. inside an identifier).
fn skip_dollar_quoted(bytes: &[u8], start: usize) -> Result<usize, BindError> {
    if start > 0 && is_ident_byte(bytes[start - 1]) {
        return Ok(start + 1);
    }
    let tag_end = bytes[start + 1..]
        .iter()
        .position(|&b| !is_ident_byte(b))
        .map(|p| start + 1 + p);
    let Some(tag_end) = tag_end.filter(|&e| bytes[e] == b'$') else {
        return Ok(start + 1);
    };
    if bytes.get(start + 1).is_some_and(u8::is_ascii_digit) {
        return Ok(start + 1);
    }
    let delimiter = &bytes[start..=tag_end];
    let body = tag_end + 1;
    bytes[body..]
        .windows(delimiter.len())
        .position(|w| w == delimiter)
        .map(|p| body + p + delimiter.len())
        .ok_or(BindError::Unterminated {
            what: "dollar-quoted string",
            at: start,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (String, Vec<String>) {
        let named = Named::parse(text).unwrap();
        (named.sql().to_string(), named.names().to_vec())
    }

    #[test]
    fn numbers_names_in_order_of_first_appearance() {
        let (sql, names) = parse("SELECT :b, :a, :b FROM t WHERE x = :a_1");
        assert_eq!(sql, "SELECT $1, $2, $1 FROM t WHERE x = $3");
        assert_eq!(names, ["b", "a", "a_1"]);
    }

    #[test]
    fn leaves_casts_literals_identifiers_and_comments_alone() {
        let text = "SELECT :x::int, ':no', 'it''s :no', E'\\' :no', \"col:no\", \
                    $$ :no $$, $tag$ :no $ $tag$, a[1:2] -- :no\n\
                    , /* :no /* nested :no */ :no */ :yes";
        let (sql, names) = parse(text);
        assert_eq!(names, ["x", "yes"]);
        assert_eq!(
            sql,
            text.replacen(":x", "$1", 1).replacen(":yes", "$2", 1),
            "only the two parameters may change"
        );
    }

    #[test]
    fn a_line_comment_at_the_end_and_no_parameters() {
        assert_eq!(parse("SELECT 1 -- :no"), ("SELECT 1 -- :no".into(), vec![]));
        assert_eq!(parse(""), (String::new(), vec![]));
        assert_eq!(parse(":"), (":".into(), vec![]));
        assert_eq!(parse("x:"), ("x:".into(), vec![]));
    }

    #[test]
    fn refuses_positional_and_unterminated_input() {
        assert_eq!(
            Named::parse("SELECT $1"),
            Err(BindError::Positional { at: 7 })
        );
        for (text, what) in [
            ("SELECT 'x", "string literal"),
            ("SELECT \"x", "quoted identifier"),
            ("SELECT /* x", "block comment"),
            ("SELECT /* /* x */", "block comment"),
            ("SELECT $q$ x", "dollar-quoted string"),
        ] {
            assert!(
                matches!(Named::parse(text), Err(BindError::Unterminated { what: w, .. }) if w == what),
                "{text}"
            );
        }
        // A `$` inside an identifier is not a quote.
        assert_eq!(parse("SELECT a$b, :p").1, ["p"]);
    }

    #[test]
    fn args_are_ordered_by_name_and_checked() {
        let named = Named::parse("SELECT :b, :a").unwrap();
        let (a, b) = (1i64, "two");
        let args = named.args(&[("a", &a), ("b", &b)]).unwrap();
        assert_eq!(args.len(), 2);
        assert_eq!(format!("{:?}", args[0]), format!("{:?}", &b as &dyn ToSql));
        assert_eq!(
            named.args(&[("a", &a)]).err(),
            Some(BindError::Missing("b".into()))
        );
        assert_eq!(
            named.args(&[("a", &a), ("b", &b), ("c", &a)]).err(),
            Some(BindError::Unused("c".into()))
        );
        assert_eq!(
            named.args(&[("a", &a), ("a", &a), ("b", &b)]).err(),
            Some(BindError::Duplicate("a".into()))
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        // Every string over a small alphabet of the tricky bytes, up to length 5.
        let alphabet = [
            b'\'', b'"', b':', b'$', b'-', b'/', b'*', b'E', b'a', b'1', b'\\',
        ];
        let mut count = 0;
        let mut stack: Vec<Vec<u8>> = vec![vec![]];
        while let Some(s) = stack.pop() {
            let text = String::from_utf8(s.clone()).unwrap();
            if let Ok(named) = Named::parse(&text) {
                assert!(named.names().iter().all(|n| !n.is_empty()));
            }
            count += 1;
            if s.len() < 5 {
                for &b in &alphabet {
                    let mut next = s.clone();
                    next.push(b);
                    stack.push(next);
                }
            }
        }
        assert!(count > 100_000);
    }
}
