//! `leasecheck gate --suite security --list`: the security checks and the attack-surface
//! statement classes (harness::security::surface::CLASSES) each major has, without running
//! anything.

use harness::security::surface::{CLASSES, REGCLASS_FUNCTIONS};
use std::process::Command;

fn list(majors: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_leasecheck"))
        .args(["gate", "--suite", "security", "--list", "--pg", majors])
        .output()
        .expect("leasecheck runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The class names the listing shows, in order (the name column is 45 characters wide).
fn listed(text: &str) -> Vec<String> {
    let section = text
        .split("attack-surface statement classes")
        .nth(1)
        .and_then(|rest| rest.split("documented limitations").next())
        .expect("the class section");
    section
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("      control: ") && l.len() > 47)
        .map(|l| l[2..47].trim_end().to_string())
        .filter(|name| name != REGCLASS_FUNCTIONS.get(..45).unwrap_or(REGCLASS_FUNCTIONS))
        .collect()
}

#[test]
fn every_class_a_major_has_is_listed_with_its_control() {
    for major in harness::pg::majors::supported() {
        let text = list(&major.to_string());
        let wanted: Vec<String> = CLASSES
            .iter()
            .filter(|c| c.on(major))
            .map(|c| c.name.to_string())
            .collect();
        assert_eq!(listed(&text), wanted, "PG {major}");
        assert_eq!(text.matches("\n      control: ").count(), wanted.len());
        assert!(text.contains(REGCLASS_FUNCTIONS));
        assert!(text.contains("prepared_transactions_never_hold_a_key"));
    }
}

#[test]
fn a_newer_major_lists_the_classes_it_adds() {
    let on14 = listed(&list("14"));
    let on15 = listed(&list("15"));
    assert!(!on14.contains(&"merge".to_string()));
    assert!(on15.contains(&"merge".to_string()));
    assert!(on15.contains(&"alter table set access method".to_string()));
    // Every class of 14 is still there on 15.
    assert!(on14.iter().all(|c| on15.contains(c)));
}
