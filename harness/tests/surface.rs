//! The attack-surface suite (harness::security::surface): pg_lease passes every statement
//! class on every tested major; every class is found harmful on its negative control.

use harness::extension::ExtensionFiles;
use harness::pg::{shared, test_majors, PgInstall};
use harness::security::surface::{self, Class, Control, Role, SurfaceOptions};
use harness::security::Failure;

fn full() -> bool {
    std::env::var("LEASECHECK_SURFACE_FULL").is_ok_and(|v| v == "1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pg_lease_passes_every_statement_class() {
    let mut problems = Vec::new();
    for major in test_majors() {
        let install = PgInstall::ensure(major).expect("the tested major");
        let files = ExtensionFiles::renamed("pg_lease_surface_under_test");
        install
            .install_extension(&files)
            .expect("install pg_lease's files");
        let cluster = shared(major).expect("a cluster of the tested major");
        let started = std::time::Instant::now();
        let outcomes = surface::run(
            cluster,
            &files.name,
            &SurfaceOptions {
                full: full(),
                only: None,
            },
        )
        .await
        .expect("the suite ran");
        println!(
            "PG {major}: {} classes in {:?}",
            outcomes.len(),
            started.elapsed()
        );
        for o in &outcomes {
            println!(
                "  {:<55} {:>5} {:>7.2}s {:?}",
                o.class,
                o.statements,
                o.elapsed.as_secs_f64(),
                o.result
            );
            if o.result.is_err() {
                problems.push(format!("PG {major}: {}: {:?}", o.class, o.result));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The builds a class's control names: 0.2.0 as released, or a surface mutant.
fn control_build(control: &Control) -> Option<ExtensionFiles> {
    match control {
        Control::V020(_) => Some(ExtensionFiles::version_0_2_0()),
        Control::Mutant(name, _) => Some(
            surface::MUTANTS
                .iter()
                .find(|m| m.name == *name)
                .unwrap_or_else(|| panic!("no surface mutant {name}"))
                .files()
                .expect("the surface mutant applies"),
        ),
        Control::OwnerOnly | Control::Never(_) => None,
    }
}

/// Every class's negative control: on the build its control names, as the role it names,
/// the class's statements are found harmful; a class only an owner may run has a documented
/// limitation for the owner (which the pass above shows still reproducing); a class no
/// build can make harmful says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_statement_class_is_found_on_its_negative_control() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).expect("the tested major");
    let cluster = shared(major).expect("a cluster of the tested major");
    let mut problems = Vec::new();
    // Bounded for CI: the quick classes' controls (about a minute on PG 15 here);
    // LEASECHECK_SURFACE_FULL=1 runs every class's (about three minutes).
    let classes: Vec<&Class> = surface::CLASSES
        .iter()
        .filter(|c| c.on(major) && (c.quick || full()))
        .collect();
    let mut by_build: Vec<(String, ExtensionFiles, Vec<&Class>)> = Vec::new();
    for class in &classes {
        match class.control {
            Control::OwnerOnly => {
                if surface::LIMITATIONS
                    .iter()
                    .all(|l| l.class != class.name || l.role != Role::Owner)
                {
                    problems.push(format!(
                        "{}: owner-only, but no documented limitation",
                        class.name
                    ));
                }
            }
            Control::Never(why) => assert!(!why.is_empty(), "{}: no reason", class.name),
            ref control => {
                let files = control_build(control).expect("a build");
                match by_build.iter_mut().find(|(n, _, _)| *n == files.name) {
                    Some((_, _, list)) => list.push(class),
                    None => by_build.push((files.name.clone(), files, vec![class])),
                }
            }
        }
    }
    for (name, files, list) in &by_build {
        install
            .install_extension(files)
            .expect("install the control build");
        let only: Vec<&'static str> = list.iter().map(|c| c.name).collect();
        let options = SurfaceOptions {
            full: true,
            only: Some(only),
        };
        let outcomes = surface::run(cluster, name, &options)
            .await
            .expect("the suite ran");
        for class in list {
            let role = match class.control {
                Control::V020(r) | Control::Mutant(_, r) => r,
                _ => unreachable!(),
            };
            let found = outcomes.iter().find(|o| o.class == class.name);
            let wanted = format!("as {role}, ");
            match found.map(|o| &o.result) {
                Some(Err(Failure::Violation(why))) if why.starts_with(&wanted) => {
                    println!(
                        "{name}: {}: {}",
                        class.name,
                        why.chars().take(200).collect::<String>()
                    );
                }
                other => problems.push(format!(
                    "{}: on its control {name} as {role}: {other:?}",
                    class.name
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}
