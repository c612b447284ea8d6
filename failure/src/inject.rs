//! Injecting one fault into a live history: each injection records its nemesis event
//! (start, end, effect) through the recorder, and returns what it hit as evidence. A fault
//! that hits nothing is [`FaultError::NotInjected`], never a silent success.

use crate::error::FaultError;
use crate::fault::Fault;
use crate::proxy::Proxy;
use crate::server::{Server, Stop};
pub use crate::situation::{Cut, Injection};
use chrono::{DateTime, Utc};
use harness::campaign::Recording;
use harness::recorder::{Recorder, RecorderError};
use model::{NemesisEffect, Span, Ts};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::Client;

/// The application name of the injector's own connections (campaign sessions use
/// `leasecheck`): never picked as a victim.
pub const INJECTOR_APP: &str = "leasecheck-nemesis";

/// What a fault can reach.
#[derive(Clone, Copy)]
pub struct Reach<'a> {
    pub server: &'a Server,
    pub recorder: &'a Arc<Recorder>,
    /// The database the clients use.
    pub database: &'a str,
    /// The proxy the clients connect through, when they do.
    pub proxy: Option<&'a Proxy>,
    /// The campaign, when the clients are a campaign's processes (client pauses).
    pub recording: Option<&'a Recording>,
}

/// Which backend a kill hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Victim {
    /// The `n`-th (modulo) client backend running a statement.
    Pick(u32),
    /// This backend.
    Pid(i32),
}

/// `pg_terminate_backend` or `pg_cancel_backend` of `pid`.
async fn signal_pid(admin: &Client, terminate: bool, pid: i32) -> Result<(), FaultError> {
    let (fault, sql) = if terminate {
        ("terminate", "SELECT pg_terminate_backend($1)")
    } else {
        ("cancel", "SELECT pg_cancel_backend($1)")
    };
    let signalled: bool = admin
        .query_one(sql, &[&pid])
        .await
        .map_err(FaultError::db("signalling a backend"))?
        .try_get(0)
        .map_err(FaultError::db("signalling a backend"))?;
    match signalled {
        true => Ok(()),
        false => Err(FaultError::not_injected(
            fault,
            format!("backend {pid} was gone"),
        )),
    }
}

/// What a restart did.
#[derive(Clone, Debug)]
pub struct Restarted {
    /// Server time from the last instant seen up to the first seen back.
    pub down: Span,
    pub pid_before: Option<u32>,
    pub pid_after: Option<u32>,
}

fn micros(t: DateTime<Utc>) -> Ts {
    Ts(t.timestamp_micros())
}

impl<'a> Reach<'a> {
    /// A superuser connection to the clients' database, named so it is never a victim.
    pub async fn admin(&self) -> Result<Client, FaultError> {
        let mut config = self.server.config(self.database);
        config.application_name(INJECTOR_APP);
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(FaultError::db("connecting as the superuser"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    async fn server_now(&self, admin: &Client) -> Result<Ts, FaultError> {
        harness::client::server_now(admin)
            .await
            .map(micros)
            .map_err(|e| FaultError::not_injected("clock", e.to_string()))
    }

    /// Stops the server as `stop` says, keeps it down for `downtime`, starts it again;
    /// records a restart with its server-time downtime window.
    pub async fn restart(
        &self,
        fault: Fault,
        stop: Stop,
        downtime: Duration,
    ) -> Result<Restarted, FaultError> {
        let admin = self.admin().await?;
        let pid_before = self.server.postmaster_pid();
        let t0 = self.server_now(&admin).await?;
        // A crash is one instant: the whole server is frozen before the sessions learn of
        // it (the recorder moves them to fresh connections), so that nothing they do on
        // their way out becomes durable first. A pg_lease session's backend exit drops its
        // temporary table, and that commit flushes the WAL of every asynchronous commit
        // before it (seen: a crash that then lost nothing).
        if stop == Stop::Crash {
            if let Err(e) = self.server.pause(true) {
                // Whatever it stopped before failing must not stay stopped.
                let _ = self.server.pause(false);
                return Err(e);
            }
        }
        let started = self.recorder.nemesis_start_restart(fault.name());
        let restarted = self.stop_and_start(t0, pid_before, stop, downtime).await;
        match restarted {
            Ok(r) => {
                let detail = format!(
                    "{stop:?} stop of postmaster {:?}, down {downtime:?}, back as {:?}",
                    r.pid_before, r.pid_after
                );
                let effect = NemesisEffect::Restart {
                    clean: stop.is_clean(),
                    down: Some(r.down),
                };
                self.recorder.nemesis_end(started, effect, detail)?;
                Ok(r)
            }
            Err(e) => {
                // Reopens the recorder's connections; the run is an infrastructure failure.
                let _ = self.recorder.nemesis_end(
                    started,
                    NemesisEffect::Restart {
                        clean: false,
                        down: None,
                    },
                    format!("failed: {e}"),
                );
                Err(e)
            }
        }
    }

    /// Stops the server (last seen up at server time `t0`), keeps it down for `downtime`,
    /// starts it again.
    async fn stop_and_start(
        &self,
        t0: Ts,
        pid_before: Option<u32>,
        stop: Stop,
        downtime: Duration,
    ) -> Result<Restarted, FaultError> {
        if let Err(e) = self.server.stop(stop).await {
            // A crash froze the server first: it must not stay frozen.
            let _ = self.server.pause(false);
            return Err(e);
        }
        tokio::time::sleep(downtime).await;
        self.server.start().await?;
        let back = self.admin().await?;
        let t1 = self.server_now(&back).await?;
        let pid_after = self.server.postmaster_pid();
        if pid_after.is_none() || pid_after == pid_before {
            return Err(FaultError::not_injected(
                "restart",
                format!("the postmaster is still {pid_before:?}"),
            ));
        }
        let down = Span::new(t0, t1).map_err(|_| {
            FaultError::not_injected("restart", "the server clock went back across it")
        })?;
        Ok(Restarted {
            down,
            pid_before,
            pid_after,
        })
    }

    /// `pg_terminate_backend` (`terminate`) or `pg_cancel_backend` (`!terminate`) of one
    /// client backend: `victim`, or one running a statement when there is one (the
    /// `pick`-th of them), else (terminate only) an idle one. Returns the victim's pid and
    /// what it ran.
    pub async fn kill_backend(
        &self,
        terminate: bool,
        victim: Victim,
    ) -> Result<(i32, String), FaultError> {
        let fault = if terminate {
            Fault::Terminate
        } else {
            Fault::Cancel
        };
        let admin = self.admin().await?;
        let started = self.recorder.nemesis_start(fault.name());
        let hit = match victim {
            Victim::Pick(pick) => self.signal_backend(&admin, terminate, pick).await,
            Victim::Pid(pid) => signal_pid(&admin, terminate, pid)
                .await
                .map(|()| (pid, String::from("(chosen by the check)"))),
        };
        let detail = match &hit {
            Ok((pid, query)) => format!("backend {pid} running {query:?}"),
            Err(e) => format!("hit nothing: {e}"),
        };
        self.recorder
            .nemesis_end(started, NemesisEffect::None, detail)?;
        hit
    }

    async fn signal_backend(
        &self,
        admin: &Client,
        terminate: bool,
        pick: u32,
    ) -> Result<(i32, String), FaultError> {
        let rows = admin
            .query(
                "SELECT pid, state = 'active', left(query, 60) FROM pg_stat_activity \
                 WHERE datname = current_database() AND backend_type = 'client backend' \
                 AND application_name <> $1 AND pid <> pg_backend_pid() \
                 ORDER BY state = 'active' DESC, pid",
                &[&INJECTOR_APP],
            )
            .await
            .map_err(FaultError::db("listing client backends"))?;
        let mut victims: Vec<(i32, bool, String)> = rows
            .iter()
            .filter_map(|r| Some((r.try_get(0).ok()?, r.try_get(1).ok()?, r.try_get(2).ok()?)))
            .collect();
        let active = victims.iter().filter(|v| v.1).count();
        if active > 0 || !terminate {
            victims.truncate(active);
        }
        if victims.is_empty() {
            return Err(FaultError::not_injected(
                if terminate { "terminate" } else { "cancel" },
                "no client backend to hit",
            ));
        }
        let (pid, _, query) = victims.swap_remove(pick as usize % victims.len());
        signal_pid(admin, terminate, pid)
            .await
            .map(|()| (pid, query))
    }

    /// SIGSTOP of the whole server for `hold`, then SIGCONT.
    pub async fn server_pause(&self, hold: Duration) -> Result<(), FaultError> {
        let started = self.recorder.nemesis_start(Fault::ServerPause.name());
        let paused = self.server.pause(true);
        if paused.is_ok() {
            tokio::time::sleep(hold).await;
        }
        // Resume whatever happened: a stopped server must never be left behind.
        let resumed = self.server.pause(false);
        self.recorder.nemesis_end(
            started,
            NemesisEffect::None,
            format!("SIGSTOP of the server for {hold:?}"),
        )?;
        paused.and(resumed)
    }

    /// A cut through the proxy (recorded as `fault`): reset or close every connection, or
    /// hold them all in a blackhole for `hold`. Returns how many connections it hit.
    pub async fn cut(&self, fault: Fault, cut: Cut, hold: Duration) -> Result<usize, FaultError> {
        let Some(proxy) = self.proxy else {
            return Err(FaultError::not_injected(
                fault.name(),
                "the clients do not connect through the proxy",
            ));
        };
        let started = self.recorder.nemesis_start(fault.name());
        let hit = match cut {
            Cut::Reset => proxy.cut().await,
            Cut::ResetOne => proxy.cut_oldest().await,
            Cut::Close => proxy.close().await,
            Cut::Blackhole => {
                proxy.set_blackhole(true);
                let held = proxy.live_connections();
                tokio::time::sleep(hold).await;
                proxy.set_blackhole(false);
                held
            }
        };
        self.recorder.nemesis_end(
            started,
            NemesisEffect::None,
            format!("{fault} of {hit} connections (held {hold:?})"),
        )?;
        match hit {
            0 => Err(FaultError::not_injected(
                fault.name(),
                "no connection to cut",
            )),
            n => Ok(n),
        }
    }

    /// Process slot `slot` of the campaign stops for `hold` (it finishes the call it is
    /// in; its leases run on).
    pub async fn client_pause(&self, slot: u32, hold: Duration) -> Result<(), FaultError> {
        let Some(recording) = self.recording else {
            return Err(FaultError::not_injected(
                "client-pause",
                "no campaign processes to pause",
            ));
        };
        let started = self.recorder.nemesis_start(Fault::ClientPause.name());
        let paused = recording.pause_slot(slot, true);
        if paused {
            tokio::time::sleep(hold).await;
            recording.pause_slot(slot, false);
        }
        self.recorder.nemesis_end(
            started,
            NemesisEffect::None,
            format!("process slot {slot} stopped for {hold:?}"),
        )?;
        match paused {
            true => Ok(()),
            false => Err(FaultError::not_injected(
                "client-pause",
                format!("no process slot {slot}"),
            )),
        }
    }

    /// The clock-independent lapse: the lease on `key`, if held and live, expires now, as
    /// the superuser ([`harness::recorder::Recorder::lapse_on`] records it). Returns whether
    /// a row was changed (`None`: the answer was lost); a refusal is not injected.
    pub async fn lapse(&self, key: &str) -> Result<Option<bool>, FaultError> {
        let admin = self.admin().await?;
        match self.recorder.lapse_on(&admin, key).await {
            Err(RecorderError::Lapse { detail, .. }) => {
                Err(FaultError::not_injected(Fault::Lapse.name(), detail))
            }
            other => Ok(other?),
        }
    }
}
