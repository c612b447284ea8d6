//! The benchmark scripts, in pgbench's script language (the subset both drivers run):
//! one SQL command per line ending in `;` or in `\gset` (store the first row's columns in
//! variables of their names), `\set NAME random(LO, HI)`, `--` comments. `:name` is a
//! variable; `:client_id` is the client's number from 0, as in pgbench. pgbench runs the
//! text itself (`-M prepared`); the Rust driver parses it into the same prepared statements
//! (each `:name` becomes a `$n` parameter, as pgbench's prepared mode does).

use crate::error::{BenchError, Result};

/// One command of a script.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `\set name random(lo, hi)`: a uniform integer in [lo, hi].
    SetRandom { name: String, lo: i64, hi: i64 },
    /// A SQL statement with `$n` placeholders for `params` (variable names, in order).
    Sql {
        sql: String,
        params: Vec<String>,
        gset: bool,
    },
}

/// A parsed script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    pub commands: Vec<Command>,
}

impl Script {
    /// Parses `text` (the script of `workload`, named in errors).
    pub fn parse(workload: &str, text: &str) -> Result<Script> {
        let mut commands = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            let err = |message: String| BenchError::Script {
                workload: workload.to_string(),
                line: index + 1,
                message,
            };
            if line.is_empty() || line.starts_with("--") {
                continue;
            }
            if let Some(rest) = line.strip_prefix("\\set ") {
                commands.push(parse_set(rest).map_err(err)?);
                continue;
            }
            if line.starts_with('\\') {
                return Err(err(format!("unsupported meta-command {line:?}")));
            }
            let (body, gset) = match line.strip_suffix("\\gset") {
                Some(body) => (body.trim_end(), true),
                None => match line.strip_suffix(';') {
                    Some(body) => (body, false),
                    None => return Err(err("a SQL line ends in ';' or '\\gset'".into())),
                },
            };
            let (sql, params) = placeholders(body).map_err(err)?;
            commands.push(Command::Sql { sql, params, gset });
        }
        Ok(Script { commands })
    }

    /// The SQL commands, in order.
    pub fn statements(&self) -> impl Iterator<Item = &Command> {
        self.commands
            .iter()
            .filter(|c| matches!(c, Command::Sql { .. }))
    }
}

fn parse_set(rest: &str) -> std::result::Result<Command, String> {
    let (name, expr) = rest
        .trim()
        .split_once(char::is_whitespace)
        .ok_or_else(|| format!("\\set needs a name and an expression: {rest:?}"))?;
    let args = expr
        .trim()
        .strip_prefix("random(")
        .and_then(|a| a.strip_suffix(')'))
        .ok_or_else(|| format!("only random(lo, hi) is supported, got {expr:?}"))?;
    let (lo, hi) = args
        .split_once(',')
        .ok_or_else(|| format!("random needs two bounds: {args:?}"))?;
    let bound = |s: &str| {
        s.trim()
            .parse::<i64>()
            .map_err(|e| format!("bound {s:?}: {e}"))
    };
    let (lo, hi) = (bound(lo)?, bound(hi)?);
    if lo > hi {
        return Err(format!("random({lo}, {hi}): empty range"));
    }
    Ok(Command::SetRandom {
        name: name.to_string(),
        lo,
        hi,
    })
}

/// Replaces each `:name` outside string literals with `$n` (the same name, the same n);
/// `::type` casts are left alone.
fn placeholders(body: &str) -> std::result::Result<(String, Vec<String>), String> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = String::new();
    let mut params: Vec<String> = Vec::new();
    let mut in_literal = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            in_literal = !in_literal;
        }
        let starts_var = !in_literal
            && c == ':'
            && chars
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_alphabetic() || *n == '_')
            && (i == 0 || chars[i - 1] != ':');
        if !starts_var {
            out.push(c);
            i += 1;
            continue;
        }
        let end = (i + 1..chars.len())
            .find(|&j| !(chars[j].is_ascii_alphanumeric() || chars[j] == '_'))
            .unwrap_or(chars.len());
        let name: String = chars[i + 1..end].iter().collect();
        let n = match params.iter().position(|p| *p == name) {
            Some(k) => k + 1,
            None => {
                params.push(name);
                params.len()
            }
        };
        out.push_str(&format!("${n}"));
        i = end;
    }
    if in_literal {
        return Err("unterminated string literal".into());
    }
    Ok((out, params))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_become_numbered_parameters_and_casts_stay() {
        let s = Script::parse(
            "t",
            "-- c\n\\set k random(1, 4)\nSELECT a, b FROM f(':x', :client_id::text, :k, :client_id) \\gset\nSELECT 1;\n",
        )
        .expect("parses");
        assert_eq!(
            s.commands[0],
            Command::SetRandom {
                name: "k".into(),
                lo: 1,
                hi: 4
            }
        );
        assert_eq!(
            s.commands[1],
            Command::Sql {
                sql: "SELECT a, b FROM f(':x', $1::text, $2, $1)".into(),
                params: vec!["client_id".into(), "k".into()],
                gset: true
            }
        );
        assert_eq!(s.statements().count(), 2);
    }

    #[test]
    fn malformed_lines_are_refused() {
        for bad in [
            "SELECT 1",
            "\\sleep 1 ms",
            "\\set k random(4, 1)",
            "SELECT 'x;",
        ] {
            assert!(Script::parse("t", bad).is_err(), "{bad} parsed");
        }
    }
}
