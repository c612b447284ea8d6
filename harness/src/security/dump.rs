//! Checks 8-9: the owner's pg_dump and pg_restore, DROP EXTENSION by the owner.
use super::*;

// ---------------------------------------------------------------------------------------
// 8. pg_dump / pg_restore

/// Lease rows as (key, owner, epoch) read back through inspect in `db`, for `keys`.
async fn inspected(
    c: &Client,
    keys: &[&str],
) -> Result<Vec<(String, Option<crate::client::Inspect>)>, SecurityError> {
    let mut out = Vec::new();
    for k in keys {
        out.push((k.to_string(), crate::client::inspect(c, k).await?));
    }
    Ok(out)
}

fixture_check!(
    the_owner_dumps_the_epochs_and_only_a_superuser_restore_loads_them,
    the_owner_dumps_the_epochs_and_only_a_superuser_restore_loads_them_body
);

async fn the_owner_dumps_the_epochs_and_only_a_superuser_restore_loads_them_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let tools = tools::ClientTools::ensure(ctx.cluster.install()?).await?;
    let user = f.connect_as(&f.user).await?;
    let hour = Duration::from_secs(3600);
    // Three keys with distinct epochs: held at 5, free at 2, held at 1.
    for _ in 0..2 {
        let e = crate::client::acquire(&user, "three", "alice", hour, Duration::ZERO).await?;
        let ep = e
            .epoch()
            .ok_or_else(|| SecurityError::Unexpected("denied".into()))?;
        crate::client::release(&user, "three", "alice", ep).await?;
    }
    crate::client::acquire(&user, "three", "alice", hour, Duration::ZERO).await?;
    let e = crate::client::acquire(&user, "two", "bob", hour, Duration::ZERO).await?;
    let ep = e
        .epoch()
        .ok_or_else(|| SecurityError::Unexpected("denied".into()))?;
    crate::client::release(&user, "two", "bob", ep).await?;
    crate::client::acquire(&user, "one", "carol", hour, Duration::ZERO).await?;
    let keys = ["one", "three", "two"];
    let original = inspected(&user, &keys).await?;
    let su = f.superuser().await?;
    let rows = table_rows(&su).await?;
    let expected_epochs: Vec<(String, i64)> = rows.iter().map(|r| (r.0.clone(), r.2)).collect();
    if expected_epochs
        != [
            ("one".to_string(), 1),
            ("three".to_string(), 5),
            ("two".to_string(), 2),
        ]
    {
        infra!("the seeded lease state is {rows:?}");
    }

    let dir =
        tempfile::tempdir().map_err(|e| SecurityError::Unexpected(format!("tempdir: {e}")))?;
    let archive = dir.path().join("owner.dump");
    let conn = tools::Conn {
        port: ctx.cluster.port(),
        user: f.owner.clone(),
        db: f.db.clone(),
    };
    // The owner's dump.
    let dump = tools
        .pg_dump(&conn, &["--format=custom", "--file"], Some(&archive))
        .await?;
    if !dump.success() {
        violated!(
            "pg_dump by the database owner (who installed {}) failed ({}): {}",
            ctx.extension,
            dump.status,
            dump.stderr.trim()
        );
    }
    // The archive holds the epochs: its data section as SQL.
    let data = tools.pg_restore_to_text(&archive).await?;
    if !data.success() {
        infra!(
            "pg_restore --data-only -f - of the owner's archive failed: {}",
            data.stderr
        );
    }
    // The rows of every configuration table (0.2.0's lease table itself, from 0.3.0 its
    // parent, which dumps its child's rows).
    let dumped: Vec<Vec<String>> = config_tables(&su, ctx.extension)
        .await?
        .iter()
        .flat_map(|config| tools::copy_rows(&data.stdout, config))
        .collect();
    let dumped_epochs: Vec<(String, String)> = dumped
        .iter()
        .filter_map(|cols| Some((cols.first()?.clone(), cols.get(2)?.clone())))
        .collect();
    let want: Vec<(String, String)> = expected_epochs
        .iter()
        .map(|(k, e)| (k.clone(), e.to_string()))
        .collect();
    let mut sorted = dumped_epochs.clone();
    sorted.sort();
    if sorted != want {
        violated!("the owner's dump holds the lease rows {dumped_epochs:?}; expected (key, epoch) {want:?}");
    }

    // A restore by the owner into a fresh database it owns: loud, never a silent reset.
    let mut problems = Vec::new();
    let owner_db = f.another_database("owner_restore").await?;
    let owner_target = tools::Conn {
        db: owner_db.clone(),
        ..conn.clone()
    };
    let restore = tools.pg_restore(&owner_target, &archive, &[]).await?;
    let loud = !restore.success()
        && restore
            .stderr
            .contains("permission denied for table leases");
    if !loud {
        problems.push(format!(
            "pg_restore by the owner: {} with stderr {:?}; expected a non-zero exit naming permission denied for table leases",
            restore.status,
            restore.stderr.trim()
        ));
    }
    // What that failed restore leaves: report it (an installed extension without state).
    let left = f.connect_to(&owner_db, &f.user).await?;
    let left_state = inspected(&left, &keys).await;
    if let Ok(state) = &left_state {
        if state.iter().any(|(_, row)| row.is_some()) {
            problems.push(format!(
                "the owner's failed restore still loaded lease rows: {state:?}"
            ));
        }
    }
    // The same restore in one transaction, stopping at the first error: nothing remains.
    let single_db = f.another_database("owner_single").await?;
    let single_target = tools::Conn {
        db: single_db.clone(),
        ..conn.clone()
    };
    let single = tools
        .pg_restore(
            &single_target,
            &archive,
            &["--single-transaction", "--exit-on-error"],
        )
        .await?;
    let single_su = f.connect_to(&single_db, &f.owner).await?;
    let single_ext: bool = single_su
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = $1)",
            &[&ctx.extension],
        )
        .await?
        .try_get(0)?;
    if single.success() || single_ext {
        problems.push(format!(
            "pg_restore --single-transaction --exit-on-error by the owner: {}, extension left installed: {single_ext}",
            single.status
        ));
    }
    // A plain-format restore through psql, stopping on error.
    let plain = dir.path().join("owner.sql");
    let plain_dump = tools
        .pg_dump(&conn, &["--format=plain", "--file"], Some(&plain))
        .await?;
    if !plain_dump.success() {
        infra!(
            "the owner's plain pg_dump failed after the custom one succeeded: {}",
            plain_dump.stderr
        );
    }
    let psql_db = f.another_database("owner_psql").await?;
    let psql = tools
        .psql_file(
            &tools::Conn {
                db: psql_db,
                ..conn.clone()
            },
            &plain,
            true,
        )
        .await?;
    if psql.success() || !psql.stderr.contains("permission denied for table leases") {
        problems.push(format!(
            "psql -v ON_ERROR_STOP=1 -f <owner's plain dump> as the owner: {} with stderr {:?}",
            psql.status,
            psql.stderr.trim()
        ));
    }

    // A restore by the superuser keeps every epoch, owner and expiry.
    let su_db = f.another_database("su_restore").await?;
    let su_target = tools::Conn {
        db: su_db.clone(),
        user: crate::pg::SUPERUSER.to_string(),
        port: ctx.cluster.port(),
    };
    let su_restore = tools
        .pg_restore(&su_target, &archive, &["--exit-on-error"])
        .await?;
    if !su_restore.success() {
        infra!(
            "pg_restore by the superuser failed ({}): {}",
            su_restore.status,
            su_restore.stderr.trim()
        );
    }
    let restored = inspected(&f.connect_to(&su_db, &f.user).await?, &keys).await?;
    if restored != original {
        problems.push(format!(
            "after a superuser restore inspect shows {restored:?}; before the dump it showed {original:?}"
        ));
    }
    // The database's owner can still dump the restored database (the restore's CREATE
    // EXTENSION ran as the superuser: a grant to the installer would go to the superuser).
    let again = tools
        .pg_dump(
            &tools::Conn {
                db: su_db.clone(),
                ..conn.clone()
            },
            &["--format=custom", "--file"],
            Some(&dir.path().join("again.dump")),
        )
        .await?;
    if !again.success() {
        problems.push(format!(
            "pg_dump by the database owner after a superuser restored its database failed ({}): {}",
            again.status,
            again.stderr.trim()
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 9. DROP EXTENSION by the owner

fixture_check!(
    drop_extension_by_the_owner_destroys_live_leases,
    drop_extension_by_the_owner_destroys_live_leases_body
);

async fn drop_extension_by_the_owner_destroys_live_leases_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let ext = quote_ident(ctx.extension);
    let user = f.connect_as(&f.user).await?;
    let hour = Duration::from_secs(3600);
    // A live lease at epoch 5 (two grants and two releases before it).
    for _ in 0..2 {
        let e = crate::client::acquire(&user, "job", "alice", hour, Duration::ZERO).await?;
        let ep = e
            .epoch()
            .ok_or_else(|| SecurityError::Unexpected("denied".into()))?;
        crate::client::release(&user, "job", "alice", ep).await?;
    }
    let held = crate::client::acquire(&user, "job", "alice", hour, Duration::ZERO).await?;
    if held.epoch() != Some(5) {
        infra!("the seeded lease is {held:?}, expected epoch 5");
    }
    let mut problems = Vec::new();
    // Only the extension's owner may drop it.
    let hostile = f.connect_as(&f.hostile).await?;
    expect_denied(
        &hostile,
        &format!("DROP EXTENSION {ext}"),
        &["extension"],
        "hostile",
        &mut problems,
    )
    .await;
    expect_denied(
        &user,
        &format!("DROP EXTENSION {ext}"),
        &["extension"],
        "user",
        &mut problems,
    )
    .await;
    // An open transaction that wrote lease state holds DROP EXTENSION off until it ends.
    let writer = f.connect_as(&f.user).await?;
    writer.batch_execute("BEGIN").await?;
    crate::client::acquire(&writer, "open", "dave", hour, Duration::ZERO).await?;
    let owner = f.connect_as(&f.owner).await?;
    let blocked = owner
        .batch_execute(&format!("SET lock_timeout = '300ms'; DROP EXTENSION {ext}"))
        .await;
    if blocked.as_ref().err().and_then(|e| e.code()) != Some(&SqlState::LOCK_NOT_AVAILABLE) {
        problems.push(format!(
            "DROP EXTENSION while another transaction has written lease state: {}; expected to wait (lock_timeout, 55P03)",
            outcome_code(&blocked)
        ));
    }
    writer.batch_execute("COMMIT").await?;
    // The owner drops it while the lease is live: allowed, and the state is gone.
    owner.batch_execute("RESET lock_timeout").await?;
    if let Err(e) = owner.batch_execute(&format!("DROP EXTENSION {ext}")).await {
        violated!(
            "the owner could not DROP EXTENSION while a lease was live: {}",
            describe_db(&e)
        );
    }
    let renew = crate::client::renew(&user, "job", "alice", 5, hour).await;
    let renew_code = renew
        .as_ref()
        .err()
        .and_then(|e| e.code().map(str::to_string));
    if !matches!(renew_code.as_deref(), Some("3F000") | Some("42883")) {
        problems.push(format!("the holder's renew after DROP EXTENSION gave {renew:?}; expected schema lease to be gone (3F000 or 42883)"));
    }
    owner
        .batch_execute(&format!("CREATE EXTENSION {ext}"))
        .await?;
    let after = crate::client::inspect(&user, "job").await?;
    let regrant = crate::client::acquire(&user, "job", "erin", hour, Duration::ZERO).await?;
    let old_renew = crate::client::renew(&user, "job", "alice", 5, hour).await?;
    if after.is_some()
        || regrant.epoch() != Some(1)
        || old_renew.status != crate::client::Status::NotOwner
    {
        problems.push(format!(
            "after DROP and CREATE EXTENSION: inspect {after:?}, a new acquire {regrant:?}, the old holder's renew {old_renew:?}; \
             expected never-leased, epoch 1 and not_owner"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    Ok(())
}
