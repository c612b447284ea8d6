//! Generated histories: the correct spec's are linearizable; each mutation's are rejected
//! naming the invariant the mutation is listed against.

use model::checker::check;
use model::gen::{generate, GenConfig};
use model::{CheckOptions, Mutation, Spec, Verdict};
use std::collections::BTreeMap;

#[test]
fn correct_spec_histories_are_linearizable() {
    for seed in 0..400 {
        let h = generate(&GenConfig::small(Spec::CORRECT, 60), seed);
        let v = check(&h, &CheckOptions::default());
        assert!(v.is_linearizable(), "seed {seed}: {v}\n{h:#?}");
    }
}

#[test]
fn every_mutation_yields_a_rejected_history_naming_its_invariant() {
    let mut failures = Vec::new();
    for m in Mutation::ALL {
        let expected = m.expected().expect("mutations name an invariant");
        let mut found: BTreeMap<u8, u32> = BTreeMap::new();
        let mut named = false;
        for seed in 0..300 {
            let h = generate(&GenConfig::small(Spec::new(m), 60), seed);
            if let Verdict::Violation(v) = check(&h, &CheckOptions::default()) {
                *found.entry(v.invariant.number()).or_default() += 1;
                if v.invariant == expected {
                    named = true;
                    break;
                }
            }
        }
        println!("{m}: violations by invariant {found:?}");
        if !named {
            failures.push(format!("{m}: expected {expected}, found {found:?}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
