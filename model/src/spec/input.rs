//! The API's input constraints: which arguments a call may not have (SQLSTATE 22023, one
//! [`Violation`] per sentence of its DETAIL).

use super::*;

impl<K: Name, O: Name> Op<K, O> {
    /// Every input constraint the call violates (the DETAIL of its 22023 error); empty for a
    /// valid call.
    pub fn violations(&self) -> Vec<Violation> {
        let mut v = Vec::new();
        match self {
            Op::Acquire {
                key,
                owner,
                ttl,
                wait,
            } => {
                check_name(key.as_ref(), NameRole::Key, &mut v);
                check_name(owner.as_ref(), NameRole::Owner, &mut v);
                check_ttl(ttl.as_ref(), &mut v);
                match wait {
                    None => v.push(Violation::WaitNull),
                    Some(w) if w.has_negative_field() => v.push(Violation::WaitNegativeField),
                    Some(w) if w.cmp_value() > Interval::HUNDRED_YEARS.cmp_value() => {
                        v.push(Violation::WaitTooLong)
                    }
                    Some(_) => {}
                }
            }
            Op::Renew {
                key,
                owner,
                epoch,
                ttl,
            } => {
                check_name(key.as_ref(), NameRole::Key, &mut v);
                check_name(owner.as_ref(), NameRole::Owner, &mut v);
                if epoch.is_none() {
                    v.push(Violation::EpochNull);
                }
                check_ttl(ttl.as_ref(), &mut v);
            }
            Op::Release { key, owner, epoch } => {
                check_name(key.as_ref(), NameRole::Key, &mut v);
                check_name(owner.as_ref(), NameRole::Owner, &mut v);
                if epoch.is_none() {
                    v.push(Violation::EpochNull);
                }
            }
            Op::Inspect { key } => check_name(key.as_ref(), NameRole::Key, &mut v),
            Op::Expire { .. } => {}
        }
        v
    }
}

#[derive(Clone, Copy)]
enum NameRole {
    Key,
    Owner,
}

fn check_name<N: Name>(name: Option<&N>, role: NameRole, out: &mut Vec<Violation>) {
    let (null, empty, long) = match role {
        NameRole::Key => (
            Violation::KeyNull,
            Violation::KeyEmpty,
            Violation::KeyTooLong,
        ),
        NameRole::Owner => (
            Violation::OwnerNull,
            Violation::OwnerEmpty,
            Violation::OwnerTooLong,
        ),
    };
    match name {
        None => out.push(null),
        Some(n) if n.byte_len() == 0 => out.push(empty),
        Some(n) if n.byte_len() > MAX_NAME_BYTES => out.push(long),
        Some(_) => {}
    }
}

fn check_ttl(ttl: Option<&Interval>, out: &mut Vec<Violation>) {
    match ttl {
        None => out.push(Violation::TtlNull),
        Some(t) if t.has_negative_field() => out.push(Violation::TtlNegativeField),
        Some(t) if !t.is_positive() => out.push(Violation::TtlNotPositive),
        Some(t) if t.cmp_value() > Interval::HUNDRED_YEARS.cmp_value() => {
            out.push(Violation::TtlTooLong)
        }
        Some(_) => {}
    }
}

/// One violated input constraint. SQLSTATE 22023's DETAIL lists one sentence per violated
/// argument (the first violated constraint of each), in argument order, joined by `"; "`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Violation {
    KeyNull,
    KeyEmpty,
    KeyTooLong,
    OwnerNull,
    OwnerEmpty,
    OwnerTooLong,
    EpochNull,
    TtlNull,
    TtlNegativeField,
    /// zero
    TtlNotPositive,
    TtlTooLong,
    WaitNull,
    WaitNegativeField,
    WaitTooLong,
}

impl Violation {
    /// True for constraints on `ttl` and `wait` (see [`Mutation::InvalidInputWrites`]).
    pub fn is_interval(self) -> bool {
        matches!(
            self,
            Violation::TtlNull
                | Violation::TtlNegativeField
                | Violation::TtlNotPositive
                | Violation::TtlTooLong
                | Violation::WaitNull
                | Violation::WaitNegativeField
                | Violation::WaitTooLong
        )
    }

    /// How the DETAIL sentence for this violation starts (it may go on with the value, e.g.
    /// "(got 1025 bytes)").
    pub fn detail_prefix(self) -> &'static str {
        match self {
            Violation::KeyNull => "key must not be NULL",
            Violation::KeyEmpty => "key must not be empty",
            Violation::KeyTooLong => "key must be at most 1024 bytes",
            Violation::OwnerNull => "owner must not be NULL",
            Violation::OwnerEmpty => "owner must not be empty",
            Violation::OwnerTooLong => "owner must be at most 1024 bytes",
            Violation::EpochNull => "epoch must not be NULL",
            Violation::TtlNull => "ttl must not be NULL",
            Violation::TtlNegativeField => "ttl must not have a negative field",
            Violation::TtlNotPositive => "ttl must be positive",
            Violation::TtlTooLong => "ttl must be at most 100 years",
            Violation::WaitNull => "wait must not be NULL",
            Violation::WaitNegativeField => "wait must not have a negative field",
            Violation::WaitTooLong => "wait must be at most 100 years",
        }
    }
}
