//! Process helpers: the unprivileged user, killing a postmaster with all its
//! children, and the exit-time / parent-death cleanup of clusters.

use super::{PgError, Result};
use std::collections::{BTreeSet, HashMap};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// The user postgres runs as when we are root.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunAs {
    pub uid: u32,
    pub gid: u32,
}

/// `None` when not root; else the uid/gid of `LEASECHECK_PG_USER` (default `postgres`).
pub(crate) fn run_as() -> Result<Option<RunAs>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let user = std::env::var("LEASECHECK_PG_USER").unwrap_or_else(|_| "postgres".to_string());
    let c_user = CString::new(user.clone())
        .map_err(|_| PgError::NoUnprivilegedUser { user: user.clone() })?;
    let (uid, gid) =
        lookup_user(&c_user).ok_or_else(|| PgError::NoUnprivilegedUser { user: user.clone() })?;
    if uid == 0 {
        return Err(PgError::NoUnprivilegedUser { user });
    }
    Ok(Some(RunAs { uid, gid }))
}

/// The uid and gid of `user`, through the thread-safe `getpwnam_r` (test threads start
/// clusters concurrently; `getpwnam` returns a static buffer).
fn lookup_user(user: &CString) -> Option<(u32, u32)> {
    let mut buf = vec![0 as libc::c_char; 1024];
    loop {
        // SAFETY: passwd is plain data that getpwnam_r fills in.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call, buf for buf.len() bytes.
        let rc = unsafe {
            libc::getpwnam_r(
                user.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        return (rc == 0 && !found.is_null()).then_some((pwd.pw_uid, pwd.pw_gid));
    }
}

pub(crate) fn chown(path: &Path, who: RunAs) -> Result<()> {
    std::os::unix::fs::chown(path, Some(who.uid), Some(who.gid))
        .map_err(|e| PgError::io("chown", path, e))
}

/// Checks that every ancestor of `path` is traversable by others (o+x), which
/// the unprivileged postgres user needs.
pub(crate) fn check_reachable(path: &Path, who: RunAs) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut cur = path.parent();
    while let Some(dir) = cur {
        if let Ok(meta) = std::fs::metadata(dir) {
            let mode = meta.permissions().mode();
            let ok = mode & 0o001 != 0 || (meta.uid() == who.uid && mode & 0o100 != 0);
            if !ok {
                return Err(PgError::Unreachable {
                    uid: who.uid,
                    path: path.to_path_buf(),
                });
            }
        }
        cur = dir.parent();
    }
    Ok(())
}

fn signal(pid: i32, sig: i32) -> bool {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Pids whose parent is `ppid` (from /proc).
fn children_of(ppid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some((parent, _)) = stat_of(pid) {
            if parent == ppid {
                out.push(pid);
            }
        }
    }
    out
}

/// (ppid, state) of a process, or None when it is gone.
fn stat_of(pid: i32) -> Option<(i32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is parenthesised and may contain spaces.
    let rest = &text[text.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state))
}

fn gone_or_zombie(pid: i32) -> bool {
    !matches!(stat_of(pid), Some((_, state)) if state != 'Z' && state != 'X')
}

/// SIGKILLs the postmaster `pid` and every child it has, without giving the
/// postmaster a chance to fork more: it is stopped first, then its children
/// are listed and killed, then it is killed. Waits until all of them are gone
/// (or zombies), so the data directory can be started again at once.
pub(crate) fn kill_tree(pid: i32) {
    let (children, segments) = kill_tree_now(pid);
    let deadline = Instant::now() + KILL_WAIT;
    blocking_section(|| {
        while !all_gone(&children) && Instant::now() < deadline {
            std::thread::sleep(KILL_POLL);
        }
    });
    remove_segments(&children, segments);
}

/// Runs `wait`, which sleeps the thread. On a worker of a multi-threaded tokio runtime (a
/// synchronous cluster method or a drop reached from async code) the runtime is told
/// first, so that its other tasks move to another worker instead of stalling; elsewhere
/// (no runtime, a current-thread runtime, the blocking pool) it just runs.
pub(crate) fn blocking_section<T>(wait: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(wait)
        }
        _ => wait(),
    }
}

/// [`kill_tree`] for async code: waits on the runtime's timer.
pub(crate) async fn kill_tree_async(pid: i32) {
    let (children, segments) = kill_tree_now(pid);
    let deadline = Instant::now() + KILL_WAIT;
    while !all_gone(&children) && Instant::now() < deadline {
        tokio::time::sleep(KILL_POLL).await;
    }
    remove_segments(&children, segments);
}

/// How long killed processes may take to go (they never take more than milliseconds
/// unless the machine stalls), and how often to look.
const KILL_WAIT: Duration = Duration::from_secs(10);
const KILL_POLL: Duration = Duration::from_millis(5);

/// Sends the SIGKILLs of [`kill_tree`]; the children it killed and the dynamic shared
/// memory segments the tree had mapped.
fn kill_tree_now(pid: i32) -> (Vec<i32>, BTreeSet<PathBuf>) {
    signal(pid, libc::SIGSTOP);
    let children = children_of(pid);
    let segments = std::iter::once(pid)
        .chain(children.iter().copied())
        .flat_map(mapped_segments)
        .collect();
    for &child in &children {
        signal(child, libc::SIGKILL);
    }
    signal(pid, libc::SIGKILL);
    (children, segments)
}

/// The POSIX shared memory files of PostgreSQL's dynamic shared memory that `pid` maps
/// (`/dev/shm/PostgreSQL.<handle>`). A killed postmaster cannot remove them; only a later
/// start of the same data directory would, and a killed test cluster is usually dropped.
fn mapped_segments(pid: i32) -> Vec<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter(|path| path.starts_with("/dev/shm/PostgreSQL."))
        .map(PathBuf::from)
        .collect()
}

/// Removes the segments of a killed tree once every process of it is gone (a segment is
/// left to a process still alive). A later start of the data directory finds its old
/// control segment gone and goes on: PostgreSQL treats that as nothing to clean up.
fn remove_segments(processes: &[i32], segments: BTreeSet<PathBuf>) {
    if all_gone(processes) {
        for segment in segments {
            let _ = std::fs::remove_file(segment);
        }
    }
}

fn all_gone(pids: &[i32]) -> bool {
    pids.iter().all(|&p| gone_or_zombie(p))
}

/// Sends `sig` to the postmaster `pid` and all its children (SIGSTOP: the
/// postmaster first so it forks nothing meanwhile; others: children first).
pub(crate) fn signal_tree(pid: i32, sig: i32) {
    if sig == libc::SIGSTOP {
        signal(pid, sig);
    }
    for child in children_of(pid) {
        signal(child, sig);
    }
    if sig != libc::SIGSTOP {
        signal(pid, sig);
    }
}

/// What the exit-time cleanup must remove for one live cluster.
struct Live {
    postmaster: Option<i32>,
    dir: PathBuf,
}

static REGISTRY: Mutex<Option<HashMap<u64, Live>>> = Mutex::new(None);
static ATEXIT: Once = Once::new();

extern "C" fn cleanup_at_exit() {
    let mut guard = match REGISTRY.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(map) = guard.take() {
        for (_, live) in map {
            if let Some(pid) = live.postmaster {
                kill_tree(pid);
                let mut status = 0;
                // SAFETY: reaping our own child; WNOHANG never blocks.
                unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            }
            let _ = std::fs::remove_dir_all(&live.dir);
        }
    }
}

/// Records a cluster so that process exit (also after a failed test, whose
/// static cluster is never dropped) kills its postmaster and removes its directory.
pub(crate) fn register(id: u64, dir: &Path) {
    ATEXIT.call_once(|| {
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(cleanup_at_exit) };
    });
    let mut guard = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    guard.get_or_insert_with(HashMap::new).insert(
        id,
        Live {
            postmaster: None,
            dir: dir.to_path_buf(),
        },
    );
}

pub(crate) fn set_postmaster(id: u64, pid: Option<i32>) {
    let mut guard = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(live) = guard.as_mut().and_then(|m| m.get_mut(&id)) {
        live.postmaster = pid;
    }
}

pub(crate) fn unregister(id: u64) {
    let mut guard = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(map) = guard.as_mut() {
        map.remove(&id);
    }
}

/// A watchdog process that outlives us: if this process dies without cleaning
/// up (SIGKILL, abort), the watchdog sees its stdin close and kills the last
/// postmaster pid it was told about, then removes its dynamic shared memory files
/// (as [`kill_tree`] does) and the cluster directory. We
/// send it the postmaster pid after every start and `0` after every stop.
pub(crate) struct Watchdog {
    child: Option<std::process::Child>,
}

impl Watchdog {
    pub fn spawn(dir: &Path) -> Watchdog {
        use std::os::unix::process::CommandExt;
        let script = r#"trap '' INT TERM HUP
pid=0
while read -r line; do pid=$line; done
segments() { grep -ho '/dev/shm/PostgreSQL\.[0-9]*' "/proc/$1/maps" 2>/dev/null; }
if [ "$pid" != 0 ]; then
  kill -STOP "$pid" 2>/dev/null
  segs=$(segments "$pid")
  for s in /proc/[0-9]*/stat; do
    read -r p rest < "$s" 2>/dev/null || continue
    pp=$(echo "${rest##*) }" | cut -d' ' -f2)
    if [ "$pp" = "$pid" ]; then
      segs="$segs $(segments "$p")"
      kill -9 "$p" 2>/dev/null
    fi
  done
  kill -9 "$pid" 2>/dev/null
  sleep 1
  rm -f $segs
fi
rm -rf "$1"
"#;
        let child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg("leasecheck-watchdog")
            .arg(dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .ok();
        Watchdog { child }
    }

    pub fn tell(&mut self, pid: i32) {
        use std::io::Write;
        if let Some(stdin) = self.child.as_mut().and_then(|c| c.stdin.as_mut()) {
            let _ = writeln!(stdin, "{pid}");
            let _ = stdin.flush();
        }
    }

    /// Normal shutdown: tell it there is nothing to kill and let it exit.
    pub fn dismiss(&mut self) {
        self.tell(0);
        if let Some(mut child) = self.child.take() {
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }
}

/// The temp directory scratch directories go under (`LEASECHECK_TMPDIR`, else the system's).
pub(crate) fn scratch_base() -> PathBuf {
    std::env::var_os("LEASECHECK_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// `<scratch base>/<name>-<nanoseconds, hex>`: `name` carries the process id the cleanup
/// looks for, the suffix keeps two directories of one process apart.
pub(crate) fn scratch_path(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    scratch_base().join(format!("{name}-{nanos:x}"))
}
