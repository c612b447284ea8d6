//! The container backend: each major runs in a container of its own (testcontainers), with
//! this leasecheck binary and the extension files bind-mounted read-only, running the local
//! backend inside (`leasecheck gate --backend local --pg N --report /report`, postgres as
//! the image's `postgres` user). Its report comes back through a bind mount. No port is
//! published. The container is removed after the run, also on failure, and on Ctrl-C
//! (testcontainers' watchdog).

use super::outcome::{CheckResult, MajorResult, SuiteResult};
use super::{report, GateArgs};
use anyhow::Context;
use std::path::Path;
use std::time::{Duration, Instant};
use testcontainers::core::{AccessMode, Mount, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};
use tokio::io::AsyncBufReadExt;

/// The image repository `leasecheck image build` tags (tag = major).
pub const IMAGE_REPO: &str = "leasecheck-pg";
/// The official images on a machine with a registry.
pub const OFFICIAL_REPO: &str = "postgres";

/// Where things are inside the container.
const BINARY: &str = "/usr/local/bin/leasecheck";
const REPORT: &str = "/report";
const INPUT: &str = "/gate";

/// Runs every major in its own container; one result per major.
pub fn run(
    args: &GateArgs,
    plan: &super::plan::Plan,
    seed: u64,
    report_root: &Path,
) -> anyhow::Result<Vec<MajorResult>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let mut results = Vec::new();
    for (major, suites) in plan {
        let major = *major;
        let names: Vec<&str> = suites.iter().map(|s| s.name).collect();
        let dir_name = format!("container-pg{major}");
        let host_report = report_root.join(&dir_name);
        std::fs::create_dir_all(&host_report)
            .with_context(|| format!("creating {}", host_report.display()))?;
        let start = Instant::now();
        let result = match runtime.block_on(run_major(args, major, &names, seed, &host_report)) {
            Ok(()) => collected(major, &host_report, &dir_name, start),
            Err(e) => infrastructure(major, format!("{e:#}"), start),
        };
        println!("PG {major} (container): {}", result.status.word());
        results.push(result);
    }
    Ok(results)
}

/// The major's result as the container's report says it, links made relative to the
/// outer report.
fn collected(major: u32, dir: &Path, dir_name: &str, start: Instant) -> MajorResult {
    match report::read_summary(dir) {
        Ok(run) => match run.majors.into_iter().find(|m| m.major == major) {
            Some(mut m) => {
                m.backend = "container".into();
                for check in m.suites.iter_mut().flat_map(|s| s.checks.iter_mut()) {
                    if let Some(t) = &check.timeline {
                        check.timeline = Some(format!("{dir_name}/{t}"));
                    }
                }
                m
            }
            None => infrastructure(
                major,
                "the container's report has no such major".into(),
                start,
            ),
        },
        Err(e) => infrastructure(
            major,
            format!("the container wrote no report (see its output above): {e:#}"),
            start,
        ),
    }
}

fn infrastructure(major: u32, why: String, start: Instant) -> MajorResult {
    let why = harness::judgement::Cause::Container.message(why);
    let check = CheckResult::infrastructure("container", why, start.elapsed());
    let suite = SuiteResult::of("container", vec![check], start.elapsed());
    MajorResult::of(major, None, "container", vec![suite])
}

/// The image of `major`, and whether it is one this project builds.
fn image(args: &GateArgs, major: u32) -> GenericImage {
    let repo = match (&args.image, args.official_images) {
        (Some(repo), _) => repo.clone(),
        (None, true) => OFFICIAL_REPO.to_string(),
        (None, false) => IMAGE_REPO.to_string(),
    };
    GenericImage::new(repo, major.to_string()).with_wait_for(WaitFor::Nothing)
}

fn read_only(host: &Path, inside: &str) -> Mount {
    Mount::bind_mount(host.display().to_string(), inside).with_access_mode(AccessMode::ReadOnly)
}

/// The bind mounts and the input options of the inner gate (the build, the PGXS sources,
/// the bench baseline).
fn inputs(args: &GateArgs) -> anyhow::Result<(Vec<Mount>, Vec<String>)> {
    let binary = std::env::current_exe().context("finding this leasecheck binary")?;
    let mut mounts = vec![read_only(&binary, BINARY)];
    let mut options = Vec::new();
    let absolute =
        |p: &Path| std::fs::canonicalize(p).with_context(|| format!("reading {}", p.display()));
    // Without a build given, this checkout's extension/ is the build.
    let own = std::fs::canonicalize(harness::installcheck::default_extension_dir()).ok();
    let extension = args
        .extension
        .clone()
        .or_else(|| args.extension_sql.is_none().then(|| own.clone()).flatten());
    if let Some(dir) = &extension {
        mounts.push(read_only(&absolute(dir)?, &format!("{INPUT}/extension")));
        options.extend(["--extension".to_string(), format!("{INPUT}/extension")]);
    }
    if let (Some(sql), Some(control)) = (&args.extension_sql, &args.control) {
        let control_name = control
            .file_name()
            .context("--control names no file")?
            .to_string_lossy()
            .into_owned();
        mounts.push(read_only(&absolute(sql)?, &format!("{INPUT}/install.sql")));
        mounts.push(read_only(
            &absolute(control)?,
            &format!("{INPUT}/{control_name}"),
        ));
        options.extend([
            "--extension-sql".to_string(),
            format!("{INPUT}/install.sql"),
            "--control".to_string(),
            format!("{INPUT}/{control_name}"),
        ]);
    }
    if let Some(baseline) = &args.bench_baseline {
        mounts.push(read_only(
            &absolute(baseline)?,
            &format!("{INPUT}/bench-baseline"),
        ));
        options.extend([
            "--bench-baseline".to_string(),
            format!("{INPUT}/bench-baseline"),
            "--bench-threshold".to_string(),
            args.bench_threshold.to_string(),
        ]);
    }
    if let Some(tests) = super::tests_dir(args) {
        mounts.push(read_only(&absolute(&tests)?, &format!("{INPUT}/tests")));
        options.extend(["--tests".to_string(), format!("{INPUT}/tests")]);
    }
    Ok((mounts, options))
}

/// The inner gate's command line: `suites` on `major`.
fn command(
    args: &GateArgs,
    major: u32,
    suites: &[&str],
    seed: u64,
    inputs: Vec<String>,
) -> Vec<String> {
    let mut cmd: Vec<String> = ["leasecheck", "gate", "--backend", "local", "--pg"]
        .map(String::from)
        .into();
    cmd.push(major.to_string());
    cmd.extend([
        "--report".into(),
        REPORT.into(),
        "--seed".into(),
        seed.to_string(),
    ]);
    cmd.push(if args.full { "--full" } else { "--quick" }.into());
    for suite in suites {
        cmd.extend(["--suite".into(), suite.to_string()]);
    }
    for fault in &args.faults {
        cmd.extend(["--fault".into(), fault.name().into()]);
    }
    cmd.extend(inputs);
    cmd
}

/// A whole gate run inside a container bounds itself; this only bounds a stuck container.
fn container_timeout(args: &GateArgs) -> Duration {
    Duration::from_secs(if args.full { 4 * 3600 } else { 3600 })
}

async fn run_major(
    args: &GateArgs,
    major: u32,
    suites: &[&str],
    seed: u64,
    host_report: &Path,
) -> anyhow::Result<()> {
    let (mounts, input_options) = inputs(args)?;
    let mut request = image(args, major)
        .with_cmd(command(args, major, suites, seed, input_options))
        .with_mount(Mount::bind_mount(host_report.display().to_string(), REPORT))
        .with_label("org.leasecheck.gate", std::process::id().to_string());
    for mount in mounts {
        request = request.with_mount(mount);
    }
    let container = request.start().await.with_context(|| {
        format!(
            "starting a container of PostgreSQL {major} (build its image with `leasecheck image build --pg {major}`)"
        )
    })?;
    let waited = tokio::time::timeout(container_timeout(args), follow(&container, major)).await;
    let removed = container.rm().await;
    match waited {
        Ok(result) => result?,
        Err(_) => anyhow::bail!(
            "the container of PostgreSQL {major} did not finish within {:?}; it was removed",
            container_timeout(args)
        ),
    }
    removed.context("removing the container")?;
    Ok(())
}

/// Prints the container's output as it comes, until it exits.
async fn follow(container: &ContainerAsync<GenericImage>, major: u32) -> anyhow::Result<()> {
    let print = |stream: std::pin::Pin<Box<dyn tokio::io::AsyncBufRead + Send>>| async move {
        let mut lines = stream.lines();
        while let Ok(Some(line)) = lines.next_line().await {
            println!("  [pg{major}] {line}");
        }
    };
    tokio::join!(print(container.stdout(true)), print(container.stderr(true)));
    loop {
        match container
            .exit_code()
            .await
            .context("asking docker how the container ended")?
        {
            Some(_) => return Ok(()),
            None => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}
