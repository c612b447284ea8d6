//! The checker works on interned names: keys and owners become small `Copy` symbols, so the
//! states it keeps by the million are cheap to clone, hash and compare.

use super::partition::Partition;
use crate::history::{History, NemesisEffect};
use crate::spec::{Name, Op, Outcome, Row, Spec};
use std::collections::HashMap;

/// A key or owner of the checked history, by number. Ordered by first appearance (the
/// spec only compares names for equality and uses them as map keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sym {
    id: u32,
    /// the name's length in bytes, for the spec's input limits
    len: u32,
}

impl Name for Sym {
    fn byte_len(&self) -> usize {
        self.len as usize
    }
}

/// The names of a history.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    names: Vec<String>,
    ids: HashMap<String, Sym>,
}

impl Symbols {
    pub fn intern(&mut self, name: &str) -> Sym {
        if let Some(s) = self.ids.get(name) {
            return *s;
        }
        let sym = Sym {
            id: self.names.len() as u32,
            len: u32::try_from(name.len()).unwrap_or(u32::MAX),
        };
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), sym);
        sym
    }

    /// The name of `sym`.
    pub fn name(&self, sym: Sym) -> &str {
        self.names.get(sym.id as usize).map_or("?", String::as_str)
    }

    /// The symbol of `name`, if it occurs in the history.
    pub fn get(&self, name: &str) -> Option<Sym> {
        self.ids.get(name).copied()
    }
}

/// A history's ops and lapse keys in interned form, made once per check.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub symbols: Symbols,
    /// by op index: the call and the outcome to judge
    pub ops: Vec<(Op<Sym, Sym>, Outcome<Sym>)>,
    /// by nemesis index: the key of a lapse
    pub lapse_keys: Vec<Option<Sym>>,
}

impl Prepared {
    pub fn new(history: &History) -> Prepared {
        let mut symbols = Symbols::default();
        let ops = history
            .ops
            .iter()
            .map(|op| {
                let call = op.call.clone().map_names(&mut |n| symbols.intern(&n));
                let outcome = map_outcome(op.result.outcome(), &mut symbols);
                (call, outcome)
            })
            .collect();
        let lapse_keys = history
            .nemeses
            .iter()
            .map(|n| match &n.effect {
                NemesisEffect::Lapse { key, .. } => Some(symbols.intern(key)),
                _ => None,
            })
            .collect();
        Prepared {
            symbols,
            ops,
            lapse_keys,
        }
    }
}

fn map_outcome(o: Outcome<String>, symbols: &mut Symbols) -> Outcome<Sym> {
    match o {
        Outcome::Inspected(row) => Outcome::Inspected(row.map(|r| Row {
            held: r.held,
            owner: r.owner.map(|n| symbols.intern(&n)),
            epoch: r.epoch,
            expires_at: r.expires_at,
        })),
        Outcome::Acquired { epoch, expires_at } => Outcome::Acquired { epoch, expires_at },
        Outcome::Denied => Outcome::Denied,
        Outcome::Timeout => Outcome::Timeout,
        Outcome::Renewed { expires_at } => Outcome::Renewed { expires_at },
        Outcome::Released => Outcome::Released,
        Outcome::NotOwner => Outcome::NotOwner,
        Outcome::Lapsed => Outcome::Lapsed,
        Outcome::EpochMismatch => Outcome::EpochMismatch,
        Outcome::InvalidInput => Outcome::InvalidInput,
        Outcome::Injected => Outcome::Injected,
        Outcome::NotInjected => Outcome::NotInjected,
        Outcome::Failed => Outcome::Failed,
        Outcome::Unknown => Outcome::Unknown,
    }
}

/// Everything one step of a linearization of one partition needs.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub spec: &'a Spec,
    pub history: &'a History,
    pub prepared: &'a Prepared,
    pub part: &'a Partition,
}
