//! Throwaway clusters on every tested major: start, state across restart and
//! crash, and that nothing (postmaster, backends, directory, shared memory) is left behind —
//! after Drop, after a panic, at process exit and after our own SIGKILL.

use harness::pg::{test_majors, Cluster, PgInstall};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => {
            let state = text
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
        Err(_) => false,
    }
}

fn backends_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            let rest: Vec<&str> = text
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            if rest.get(1) == Some(&pid.to_string().as_str()) {
                out.push(p);
            }
        }
    }
    out
}

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn lease_epoch(cluster: &Cluster, db: &str, key: &str) -> Option<i64> {
    let client = cluster.connect(db).await.unwrap();
    client
        .query_opt("SELECT epoch FROM lease.inspect($1)", &[&key])
        .await
        .unwrap()
        .map(|r| r.get(0))
}

/// The dynamic shared memory files process `pid` maps: POSIX segments
/// (`/dev/shm/PostgreSQL.*`) or, as the harness configures its clusters, files in the data
/// directory's `pg_dynshmem`.
fn shared_memory_segments(pid: u32) -> Vec<PathBuf> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with("/dev/shm/PostgreSQL.") || p.contains("/pg_dynshmem/"))
        .map(PathBuf::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_state_survives_restart_and_crash_and_drop_cleans_up() {
    for major in test_majors() {
        let install = PgInstall::ensure(major).unwrap();
        assert_eq!(install.version.major, major);
        let mut cluster = Cluster::start(&install).unwrap();
        let db = cluster.fresh_database("lifecycle").await.unwrap();
        let client = cluster.connect(&db).await.unwrap();
        let version: String = client
            .query_one("SHOW server_version", &[])
            .await
            .unwrap()
            .get(0);
        assert!(version.starts_with(&format!("{major}.")), "{version}");
        let fsync: String = client.query_one("SHOW fsync", &[]).await.unwrap().get(0);
        assert_eq!(fsync, "on");
        let row = client
            .query_one(
                "SELECT acquired, epoch FROM lease.acquire('k', 'a', interval '1 hour')",
                &[],
            )
            .await
            .unwrap();
        assert!(row.get::<_, bool>(0));
        assert_eq!(row.get::<_, i64>(1), 1);
        drop(client);

        cluster.restart().unwrap();
        assert_eq!(
            lease_epoch(&cluster, &db, "k").await,
            Some(1),
            "PG {major}: restart lost state"
        );

        let pid = cluster.postmaster_pid().unwrap();
        // Keep a backend busy so the crash has children to kill.
        let busy = cluster.connect(&db).await.unwrap();
        let children = backends_of(pid);
        assert!(!children.is_empty(), "postmaster {pid} has no children");
        let segments = shared_memory_segments(pid);
        assert!(!segments.is_empty(), "postmaster {pid} maps no DSM segment");
        cluster.crash().unwrap();
        assert!(!alive(pid), "postmaster survived the crash");
        for child in &children {
            assert!(!alive(*child), "backend {child} survived the crash");
        }
        // A killed postmaster cannot remove its dynamic shared memory: the harness's
        // clusters keep it in the data directory (nothing in /dev/shm), which the next
        // start empties and the drop removes.
        assert!(
            segments
                .iter()
                .all(|s| s.to_string_lossy().contains("/pg_dynshmem/")),
            "PG {major}: segments outside the data directory: {segments:?}"
        );
        assert!(
            busy.simple_query("SELECT 1").await.is_err(),
            "connection survived the crash"
        );
        cluster.resume().unwrap();
        for segment in &segments {
            assert!(!segment.exists(), "the restart kept {}", segment.display());
        }
        assert_eq!(
            lease_epoch(&cluster, &db, "k").await,
            Some(1),
            "PG {major}: crash lost state"
        );

        let pid = cluster.postmaster_pid().unwrap();
        let root: PathBuf = cluster
            .data_dir()
            .expect("a managed cluster")
            .parent()
            .unwrap()
            .to_path_buf();
        drop(cluster);
        assert!(!alive(pid), "PG {major}: Drop left postmaster {pid}");
        assert!(!root.exists(), "PG {major}: Drop left {}", root.display());
    }
}

#[test]
fn panic_while_holding_a_cluster_cleans_up() {
    let major = test_majors()[0];
    let install = PgInstall::ensure(major).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let cluster = Cluster::start(&install).unwrap();
        tx.send((
            cluster.postmaster_pid().unwrap(),
            cluster.data_dir().expect("a managed cluster").to_path_buf(),
        ))
        .unwrap();
        panic!("deliberate panic with a live cluster");
    });
    assert!(handle.join().is_err());
    let (pid, data) = rx.recv().unwrap();
    assert!(!alive(pid), "panic left postmaster {pid}");
    assert!(!data.exists(), "panic left {}", data.display());
}

/// Not a test on its own: the body of the child processes below.
#[test]
fn child_holds_shared_cluster() {
    let Ok(mode) = std::env::var("LEASECHECK_CHILD_MODE") else {
        return;
    };
    let major = test_majors()[0];
    let cluster = harness::pg::shared(major).unwrap();
    println!(
        "CLUSTER {} {}",
        cluster.postmaster_pid().unwrap(),
        cluster.data_dir().expect("a managed cluster").display()
    );
    if mode == "hang" {
        std::thread::sleep(Duration::from_secs(600));
    }
}

fn run_child(mode: &str) -> (std::process::Child, u32, PathBuf) {
    use std::io::BufRead;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holds_shared_cluster",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LEASECHECK_CHILD_MODE", mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    loop {
        let Some(Ok(line)) = lines.next() else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("child ended before printing its cluster");
        };
        // libtest prints "test <name> ... " on the same line before our output.
        if let Some((_, rest)) = line.split_once("CLUSTER ") {
            let (pid, dir) = rest.split_once(' ').unwrap();
            let found = (pid.parse().unwrap(), Path::new(dir).to_path_buf());
            // Keep draining so the child never fails writing to a closed pipe.
            std::thread::spawn(move || lines.for_each(drop));
            return (child, found.0, found.1);
        }
    }
}

#[test]
fn process_exit_removes_shared_clusters() {
    let (mut child, pid, data) = run_child("exit");
    assert!(child.wait().unwrap().success());
    assert!(!alive(pid), "exit left postmaster {pid}");
    assert!(!data.exists(), "exit left {}", data.display());
}

#[test]
fn sigkill_of_the_owner_is_cleaned_up_by_the_watchdog() {
    let (mut child, pid, data) = run_child("hang");
    assert!(alive(pid));
    let segments = shared_memory_segments(pid);
    assert!(!segments.is_empty(), "postmaster {pid} maps no DSM segment");
    child.kill().unwrap();
    child.wait().unwrap();
    wait_until(
        "the watchdog killed the postmaster",
        Duration::from_secs(10),
        || !alive(pid),
    );
    wait_until(
        "the watchdog removed the directory",
        Duration::from_secs(10),
        || !data.exists(),
    );
    wait_until(
        "the watchdog removed the shared memory files",
        Duration::from_secs(10),
        || segments.iter().all(|s| !s.exists()),
    );
}

/// Nothing is written into the shared install: extension files go into this process's
/// private copy (`PgInstall::ensure`), which a cluster started from it reads, together with
/// the shared install's own files (plpgsql).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_go_into_a_private_copy_of_the_install() {
    use harness::extension::ExtensionFiles;
    let major = harness::pg::test_majors()[0];
    let shared = PgInstall::find(major).expect("the install");
    let private = PgInstall::ensure(major).expect("its private copy");
    assert_ne!(shared.extension_dir(), private.extension_dir());
    let name = format!("pg_lease_private_probe_{}", std::process::id());
    let files = ExtensionFiles::renamed(&name);
    private
        .install_extension(&files)
        .expect("install into the private copy");
    let control = format!("{name}.control");
    assert!(private.extension_dir().join(&control).exists());
    assert!(
        !shared.extension_dir().join(&control).exists(),
        "the file reached the shared install"
    );
    let cluster = Cluster::start(&private).expect("a cluster of the private copy");
    cluster
        .fresh_database_with("private_probe", &name)
        .await
        .expect("the cluster reads the private extension directory");
    // the shared install's own files are still reachable (plpgsql, say)
    let db = cluster.fresh_database("private_plpgsql").await.expect("db");
    let c = cluster.connect(&db).await.expect("connect");
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'plpgsql'",
            &[],
        )
        .await
        .expect("query")
        .get(0);
    assert_eq!(n, 1);
}
