//! `leasecheck image build --pg N`: the container images of the gate's container backend,
//! built here without any image registry. A Debian base is made with `debootstrap` from
//! the Debian mirror and `docker import`ed (`leasecheck-debian:bookworm`, built once); the
//! image of a major adds make and PGXS (postgresql-client-15) from Debian packages, and
//! PostgreSQL itself: 15 from Debian's packages, every other major from the same pinned
//! embedded-postgres build the harness fetches. Its entrypoint runs a given `leasecheck`
//! command, or initdb + postgres (settings as `-c name=value` arguments), which prints
//! "ready to accept connections" when ready. `--official` pulls `postgres:<major>` instead.

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The base image every major's image starts from.
pub const BASE_IMAGE: &str = "leasecheck-debian:bookworm";
const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

#[derive(Debug, clap::Subcommand)]
pub enum ImageCommand {
    /// Build `leasecheck-pg:<major>` (cached: an existing image is kept unless --rebuild).
    Build(BuildArgs),
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    #[arg(
        long = "pg",
        help = format!("The PostgreSQL major ({})", harness::pg::majors::supported_range())
    )]
    pub major: u32,
    /// The Debian mirror debootstrap and apt use.
    #[arg(long, default_value = DEFAULT_MIRROR)]
    pub mirror: String,
    /// Build again even when the image exists.
    #[arg(long)]
    pub rebuild: bool,
    /// Pull the registry's official postgres:<major> instead (a machine with a registry).
    #[arg(long)]
    pub official: bool,
}

pub fn run(command: &ImageCommand) -> anyhow::Result<()> {
    match command {
        ImageCommand::Build(args) => build(args),
    }
}

/// The image name of a major.
pub fn image_name(major: u32) -> String {
    format!("leasecheck-pg:{major}")
}

/// Whether docker has the image.
pub fn image_exists(name: &str) -> anyhow::Result<bool> {
    let status = Command::new("docker")
        .args(["image", "inspect", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running docker (is it installed and is dockerd running?)")?;
    Ok(status.success())
}

/// Fails with what to do when no Docker daemon answers (an absent image would otherwise
/// look like one to build, and the build would fail late, at `docker import`).
pub fn ensure_daemon() -> anyhow::Result<()> {
    let answered = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !answered {
        bail!(
            "no Docker daemon answers: install docker.io and start the daemon \
             (as root: `dockerd &`), then run this again"
        );
    }
    Ok(())
}

fn build(args: &BuildArgs) -> anyhow::Result<()> {
    if harness::pg::pinned(args.major).is_none() {
        bail!(
            "PostgreSQL {} is not supported ({})",
            args.major,
            harness::pg::majors::supported_range()
        );
    }
    ensure_daemon()?;
    if args.official {
        let name = format!("postgres:{}", args.major);
        return streamed(
            Command::new("docker").args(["pull", &name]),
            &format!("pulling {name}"),
        );
    }
    let name = image_name(args.major);
    if !args.rebuild && image_exists(&name)? {
        println!("{name} exists (use --rebuild to build it again)");
        return Ok(());
    }
    if args.rebuild || !image_exists(BASE_IMAGE)? {
        base_image(&args.mirror)?;
    }
    let context = tempfile::Builder::new()
        .prefix("leasecheck-image-")
        .tempdir()
        .context("creating the build context directory")?;
    write_context(context.path(), args.major)?;
    streamed(
        Command::new("docker")
            .args(["build", "-t", &name])
            .arg(context.path()),
        &format!("building {name}"),
    )?;
    println!("built {name}");
    Ok(())
}

/// debootstrap a minimal bookworm and import it as [`BASE_IMAGE`]; the root file system is
/// removed afterwards.
fn base_image(mirror: &str) -> anyhow::Result<()> {
    let work = tempfile::Builder::new()
        .prefix("leasecheck-rootfs-")
        .tempdir_in(harness::pg::cache_root())
        .or_else(|_| {
            tempfile::Builder::new()
                .prefix("leasecheck-rootfs-")
                .tempdir()
        })
        .context("creating a directory for the root file system")?;
    let rootfs = work.path().join("rootfs");
    streamed(
        Command::new("debootstrap")
            .args(["--variant=minbase", "bookworm"])
            .arg(&rootfs)
            .arg(mirror),
        "debootstrap bookworm (minbase)",
    )?;
    let tar = Command::new("tar")
        .arg("-C")
        .arg(&rootfs)
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .context("running tar")?;
    let stdout = tar.stdout.context("tar's output")?;
    let status = Command::new("docker")
        .args(["import", "-", BASE_IMAGE])
        .stdin(stdout)
        .stdout(Stdio::null())
        .status()
        .context("running docker import")?;
    if !status.success() {
        bail!("docker import of the root file system failed ({status})");
    }
    println!("imported {BASE_IMAGE}");
    Ok(())
}

/// Runs `cmd`, showing its latest output line under a spinner; its output's tail on failure.
fn streamed(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let bar = ProgressBar::new_spinner();
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {prefix}: {wide_msg}")
    {
        bar.set_style(style);
    }
    bar.set_prefix(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("{what}: starting {:?}", cmd.get_program()))?;
    // docker build and debootstrap report progress on both streams.
    let tail = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let readers: Vec<Box<dyn std::io::Read + Send>> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    .collect();
    let threads: Vec<_> = readers
        .into_iter()
        .map(|reader| {
            let (bar, tail) = (bar.clone(), tail.clone());
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(reader)
                    .lines()
                    .map_while(Result::ok)
                {
                    bar.set_message(line.clone());
                    let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                    tail.push(line);
                    if tail.len() > 40 {
                        tail.remove(0);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
    let tail = tail.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let status = child.wait().with_context(|| format!("{what}: waiting"))?;
    bar.finish_and_clear();
    if !status.success() {
        bail!("{what} failed ({status}):\n{}", tail.join("\n"));
    }
    println!("{what}: done");
    Ok(())
}

const ENTRYPOINT: &str = r#"#!/bin/sh
# leasecheck's PostgreSQL image: `leasecheck ...` runs the gate; anything else starts
# postgres (arguments are server options such as -c name=value), like the official image.
set -e
if [ "$1" = leasecheck ]; then
  exec "$@"
fi
if [ "$1" = postgres ]; then shift; fi
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
mkdir -p "$PGDATA"
chown postgres:postgres "$PGDATA"
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  setpriv --reuid=postgres --regid=postgres --init-groups \
    "$LEASECHECK_PG_BIN/initdb" -D "$PGDATA" -U postgres --encoding=UTF8 --locale=C \
    --auth-local=trust --auth-host="${POSTGRES_HOST_AUTH_METHOD:-trust}"
  echo "host all all all ${POSTGRES_HOST_AUTH_METHOD:-trust}" >> "$PGDATA/pg_hba.conf"
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups \
  "$LEASECHECK_PG_BIN/postgres" -D "$PGDATA" -c listen_addresses='*' "$@"
"#;

/// The Dockerfile of `major`: PostgreSQL 15 from Debian, others from the pinned build
/// copied into the context as `pg/`.
fn dockerfile(major: u32) -> String {
    let debian_major = harness::pg::DEFAULT_MAJOR;
    let debian = major == debian_major;
    let packages = if debian {
        format!("make postgresql-client-{debian_major} postgresql-{debian_major}")
    } else {
        format!("make postgresql-client-{debian_major}")
    };
    let bin = if debian {
        format!("/usr/lib/postgresql/{debian_major}/bin")
    } else {
        format!("/opt/leasecheck/pg{major}/bin")
    };
    let mut text = format!(
        "FROM {BASE_IMAGE}\n\
         RUN printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \\\n \
         && apt-get update -qq \\\n \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {packages} \\\n \
         && rm -rf /var/lib/apt/lists/* \\\n \
         && (id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres)\n"
    );
    if !debian {
        text.push_str(&format!("COPY pg /opt/leasecheck/pg{major}\n"));
    }
    text.push_str(&format!(
        "ENV LEASECHECK_PG_BIN={bin} LEASECHECK_PG{major}_BIN={bin}\n\
         COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh\n\
         LABEL org.leasecheck.major=\"{major}\"\n\
         STOPSIGNAL SIGINT\n\
         ENTRYPOINT [\"/usr/local/bin/docker-entrypoint.sh\"]\n\
         CMD [\"postgres\"]\n"
    ));
    text
}

fn write_context(dir: &Path, major: u32) -> anyhow::Result<()> {
    let write = |name: &str, text: &str, mode: u32| -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("chmod {}", path.display()))
    };
    write("Dockerfile", &dockerfile(major), 0o644)?;
    write("docker-entrypoint.sh", ENTRYPOINT, 0o755)?;
    if major != harness::pg::DEFAULT_MAJOR {
        let install = harness::pg::fetch(major)
            .with_context(|| format!("fetching the pinned PostgreSQL {major} build"))?;
        let root = install
            .bin_dir
            .parent()
            .context("the fetched install has no root directory")?;
        let status = Command::new("cp")
            .arg("-a")
            .arg(root)
            .arg(dir.join("pg"))
            .status()
            .context("running cp")?;
        if !status.success() {
            bail!("copying {} into the build context failed", root.display());
        }
    }
    Ok(())
}
