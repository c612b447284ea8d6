//! The container backend: each major runs in a container of its own (the `docker` CLI), with
//! this leasecheck binary and the extension files bind-mounted read-only, running the local
//! backend inside (`leasecheck gate --backend local --pg N --report /report`, postgres as
//! the image's `postgres` user). Its report comes back through a bind mount. No port is
//! published. The container (`docker create`, then `docker start -a`, its output printed
//! as it comes) is removed with `docker rm -f` after the run, also on failure and on the
//! timeout, and on Ctrl-C or SIGTERM, which then end leasecheck with 130 or 143.

use super::outcome::{CheckResult, MajorResult, SuiteResult};
use super::{report, GateArgs};
use crate::image_cmd;
use anyhow::{bail, Context};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{signal, SignalKind};

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
    let runtime = tokio::runtime::Builder::new_current_thread()
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
        let result = match run_major(&runtime, args, major, &names, seed, &host_report) {
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

/// The image of `major`: `<repo>:<major>`.
fn image(args: &GateArgs, major: u32) -> String {
    let repo = match (&args.image, args.official_images) {
        (Some(repo), _) => repo.clone(),
        (None, true) => OFFICIAL_REPO.to_string(),
        (None, false) => IMAGE_REPO.to_string(),
    };
    format!("{repo}:{major}")
}

/// A bind mount of a host path into the container.
struct Bind {
    host: PathBuf,
    inside: String,
    read_only: bool,
}

impl Bind {
    /// Its `docker create --mount` value (read as CSV: a field with a comma is quoted).
    fn arg(&self) -> String {
        let field = |f: String| {
            if f.contains([',', '"']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f
            }
        };
        let source = field(format!("source={}", self.host.display()));
        let target = field(format!("target={}", self.inside));
        let access = if self.read_only { ",readonly" } else { "" };
        format!("type=bind,{source},{target}{access}")
    }
}

fn read_only(host: &Path, inside: &str) -> Bind {
    Bind {
        host: host.to_path_buf(),
        inside: inside.to_string(),
        read_only: true,
    }
}

/// The bind mounts and the input options of the inner gate (the build, the PGXS sources,
/// the bench baseline).
fn inputs(args: &GateArgs) -> anyhow::Result<(Vec<Bind>, Vec<String>)> {
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
    if let Some(ops) = args.campaign_ops {
        cmd.extend(["--campaign-ops".into(), ops.to_string()]);
    }
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

/// The container of `major`: created, run with its output printed, removed.
fn run_major(
    runtime: &tokio::runtime::Runtime,
    args: &GateArgs,
    major: u32,
    suites: &[&str],
    seed: u64,
    host_report: &Path,
) -> anyhow::Result<()> {
    image_cmd::ensure_daemon()?;
    watch_signals()?;
    let container = create(args, major, suites, seed, host_report)?;
    let waited = runtime.block_on(async {
        tokio::time::timeout(container_timeout(args), follow(&container.0, major)).await
    });
    let removed = remove(&container.0);
    match waited {
        Ok(result) => result?,
        Err(_) => bail!(
            "the container of PostgreSQL {major} did not finish within {:?}; it was removed",
            container_timeout(args)
        ),
    }
    removed.context("removing the container")
}

/// `docker create`s the container of `major` (its image pulled if docker has none, as
/// for `--official-images`), live from then on.
fn create(
    args: &GateArgs,
    major: u32,
    suites: &[&str],
    seed: u64,
    host_report: &Path,
) -> anyhow::Result<Created> {
    let (mut binds, input_options) = inputs(args)?;
    binds.push(Bind {
        host: std::fs::canonicalize(host_report)
            .with_context(|| format!("reading {}", host_report.display()))?,
        inside: REPORT.into(),
        read_only: false,
    });
    let image = image(args, major);
    let build = format!("build its image with `leasecheck image build --pg {major}`");
    if !image_cmd::image_exists(&image)? {
        docker(&["pull".into(), image.clone()]).with_context(|| {
            format!("docker has no image {image} and could not pull it ({build})")
        })?;
    }
    let pid = std::process::id();
    let name = format!("leasecheck-gate-{pid}-pg{major}");
    let mut create: Vec<String> = ["create", "--pull", "never", "--name", &name, "--label"]
        .map(String::from)
        .into();
    create.push(format!("org.leasecheck.gate={pid}"));
    for bind in &binds {
        create.extend(["--mount".into(), bind.arg()]);
    }
    create.push(image.clone());
    create.extend(command(args, major, suites, seed, input_options));
    let mut live = live();
    docker(&create).with_context(|| {
        format!("creating a container of PostgreSQL {major} from {image} ({build})")
    })?;
    live.insert(name.clone());
    Ok(Created(name))
}

/// A created container, by name. [`remove`] removes it; dropped while still live (a
/// panic), it is removed all the same.
struct Created(String);

impl Drop for Created {
    fn drop(&mut self) {
        let still = live().contains(&self.0);
        if still {
            let _ = remove(&self.0);
        }
    }
}

/// `docker start -a`: runs the container, printing its output as it comes, until it exits
/// (its exit status decides nothing: its report does).
async fn follow(name: &str, major: u32) -> anyhow::Result<()> {
    let mut child = tokio::process::Command::new("docker")
        .args(["start", "--attach", name])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("running docker start (is it installed and is dockerd running?)")?;
    let stdout = child.stdout.take().context("docker start's output")?;
    let stderr = child.stderr.take().context("docker start's error output")?;
    tokio::join!(print(stdout, major), print(stderr, major));
    child
        .wait()
        .await
        .context("waiting for the container to end")?;
    Ok(())
}

/// Prints each line of `stream` as it comes, prefixed with the major.
async fn print(stream: impl tokio::io::AsyncRead + Unpin, major: u32) {
    let mut reader = tokio::io::BufReader::new(stream);
    let mut line = Vec::new();
    while reader
        .read_until(b'\n', &mut line)
        .await
        .is_ok_and(|n| n > 0)
    {
        let text = String::from_utf8_lossy(&line);
        println!("  [pg{major}] {}", text.trim_end_matches(['\n', '\r']));
        line.clear();
    }
}

/// `docker rm -f`s the container and forgets it.
fn remove(name: &str) -> anyhow::Result<()> {
    let mut live = live();
    docker(&["rm".into(), "-f".into(), name.into()])?;
    live.remove(name);
    Ok(())
}

/// Runs a docker command to its end; its error output in the error.
fn docker(args: &[String]) -> anyhow::Result<()> {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running docker (is it installed and is dockerd running?)")?;
    if !out.status.success() {
        bail!(
            "`docker {}` failed ({}): {}",
            args.first().map_or("", String::as_str),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The containers created and not yet removed. `create` and `remove` hold the lock over
/// their docker command, so the signal watcher, which takes it too, sees each container
/// that exists.
static LIVE: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

fn live() -> MutexGuard<'static, BTreeSet<String>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// From its first call to the end of the process, Ctrl-C and SIGTERM remove the live
/// containers and end leasecheck with 130 or 143, the status those signals give.
fn watch_signals() -> anyhow::Result<()> {
    static WATCHING: OnceLock<Result<(), String>> = OnceLock::new();
    WATCHING
        .get_or_init(|| start_watcher().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
        .context("watching for Ctrl-C and SIGTERM")
}

/// The watcher: a thread with a runtime of its own (the backend's ends before the
/// process does), the signals caught before this returns.
fn start_watcher() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal watcher's runtime")?;
    let (mut interrupt, mut terminate) = {
        let _inside = runtime.enter();
        (
            signal(SignalKind::interrupt()).context("catching SIGINT")?,
            signal(SignalKind::terminate()).context("catching SIGTERM")?,
        )
    };
    std::thread::Builder::new()
        .name("container-signals".into())
        .spawn(move || {
            let status = runtime.block_on(async {
                tokio::select! {
                    _ = interrupt.recv() => 130,
                    _ = terminate.recv() => 143,
                }
            });
            ended_by(status)
        })
        .context("starting the signal watcher's thread")?;
    Ok(())
}

/// Removes the live containers and ends the process with `status`.
fn ended_by(status: i32) -> ! {
    let live = live();
    for name in live.iter() {
        match docker(&["rm".into(), "-f".into(), name.clone()]) {
            Ok(()) => eprintln!("leasecheck: interrupted; removed the container {name}"),
            Err(e) => eprintln!("leasecheck: interrupted; remove the container {name}: {e:#}"),
        }
    }
    std::process::exit(status)
}
