//! Install-version and isolation classes: no trusted install of a version with known
//! contract bugs, and input validation before the isolation refusal (READ UNCOMMITTED run as
//! the READ COMMITTED PostgreSQL makes it).
use super::*;

/// Released versions with known contract bugs (0.1.0: two holders through a collation, and
/// every other bug 0.2.0 fixed; 0.2.0: the classes 0.3.0 fixed).
pub const VERSIONS_WITH_KNOWN_BUGS: &[&str] = &["0.1.0", "0.2.0"];

/// The `default_version` of `extension` as the server sees its control file.
async fn default_version(su: &Client, extension: &str) -> Result<String, SecurityError> {
    let row = su
        .query_opt(
            "SELECT default_version FROM pg_catalog.pg_available_extensions WHERE name = $1::text::name",
            &[&extension],
        )
        .await?;
    match row {
        Some(r) => Ok(r.try_get(0)?),
        None => Err(SecurityError::Unexpected(format!(
            "the server does not list {extension} among the available extensions"
        ))),
    }
}

/// Install-version class: the database owner (a non-superuser: the extension is trusted)
/// asks for each released version with known contract bugs other than the build's own
/// default version (which is what the other checks judge): `CREATE EXTENSION .. VERSION`
/// must be refused and leave nothing installed. The positive control: the same role then
/// installs the default version in the same database, so the refusals were about the
/// version, not about the role's rights.
pub(super) async fn no_version_with_known_contract_bugs_can_be_installed(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let f = Fixture::bare(ctx.cluster, ctx.extension).await?;
    let result = install_versions(&f).await;
    finish(f, result).await
}

async fn install_versions(f: &Fixture<'_>) -> CheckResult {
    let su = f.superuser().await?;
    let default = default_version(&su, &f.extension).await?;
    let owner = f.connect_as(&f.owner).await?;
    let ext = quote_ident(&f.extension);
    for version in VERSIONS_WITH_KNOWN_BUGS {
        if *version == default {
            continue;
        }
        let sql = format!("CREATE EXTENSION {ext} VERSION '{version}'");
        match owner.batch_execute(&sql).await {
            Ok(()) => {
                let installed = crate::extension::installed_version(&su, &f.extension).await?;
                violated!(
                    "install-version class: the database owner (not a superuser) ran `{sql}` and \
                     it succeeded (installed version {installed:?}): version {version} has known \
                     contract bugs and must not be installable"
                );
            }
            Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => infra!(
                "the database owner may not create extensions at all ({}): the refusal says \
                 nothing about the version",
                describe_db(&e)
            ),
            Err(_) => {}
        }
        let left = crate::extension::installed_version(&su, &f.extension).await?;
        let schemas: i64 = su
            .query_one(
                "SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname LIKE 'lease%'",
                &[],
            )
            .await?
            .try_get(0)?;
        if left.is_some() || schemas != 0 {
            violated!(
                "install-version class: the refused `{sql}` left something installed \
                 (extension version {left:?}, {schemas} lease schemas)"
            );
        }
    }
    if let Err(e) = owner
        .batch_execute(&format!("CREATE EXTENSION {ext}"))
        .await
    {
        infra!(
            "positive control: the database owner could not install the default version \
             {default}: {}",
            describe_db(&e)
        );
    }
    Ok(())
}

/// Invalid inputs (each must answer 22023 whatever the isolation level), one per function.
const INVALID_CALLS: &[&str] = &[
    "SELECT * FROM lease.acquire('', 'a', interval '1 min')",
    "SELECT * FROM lease.acquire('iso', 'a', interval '-1 min')",
    "SELECT * FROM lease.renew('iso', 'a', NULL, interval '1 min')",
    "SELECT * FROM lease.release('iso', '', 1)",
    "SELECT * FROM lease.inspect(NULL)",
];

/// A valid call, refused (55000) under REPEATABLE READ and SERIALIZABLE: that the refusal is
/// still there is this check's control (invalid input answered 22023 because the input is
/// looked at first, not because the level is no longer refused).
const VALID_CALL: &str = "SELECT * FROM lease.acquire('iso', 'a', interval '1 min')";

/// Isolation class (SEMANTICS sections 4, 8, 10): under REPEATABLE READ and SERIALIZABLE,
/// invalid input answers 22023 (validation comes first) and a valid call 55000, changing
/// nothing; under READ UNCOMMITTED, which PostgreSQL runs as READ COMMITTED, a call runs
/// (a grant that commits). Run by the ordinary role.
pub(super) async fn invalid_input_comes_before_the_isolation_refusal_and_read_uncommitted_runs(
    ctx: &Ctx<'_>,
) -> CheckResult {
    let f = Fixture::create(ctx.cluster, ctx.extension).await?;
    let result = isolation(&f).await;
    finish(f, result).await
}

async fn isolation(f: &Fixture<'_>) -> CheckResult {
    let su = f.superuser().await?;
    let user = f.connect_as(&f.user).await?;
    let minute = Duration::from_secs(60);
    crate::client::acquire(&user, "held", "alice", minute, Duration::ZERO).await?;
    let before = table_rows(&su).await?;
    let mut found = Vec::new();
    for level in ["REPEATABLE READ", "SERIALIZABLE"] {
        for (sql, want) in INVALID_CALLS
            .iter()
            .map(|s| (*s, "22023"))
            .chain([(VALID_CALL, "55000")])
        {
            user.batch_execute(&format!("BEGIN ISOLATION LEVEL {level}"))
                .await?;
            let got = outcome_code(&user.query(sql, &[]).await);
            user.batch_execute("ROLLBACK").await?;
            if got != want {
                found.push(format!(
                    "under {level}, `{sql}` answered {got}; expected {want}{}",
                    if got == "55000" {
                        " (the isolation refusal came before input validation)"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    let after = table_rows(&su).await?;
    if after != before {
        found.push(format!(
            "the refused calls changed lease state: {before:?} became {after:?}"
        ));
    }
    user.batch_execute("BEGIN ISOLATION LEVEL READ UNCOMMITTED")
        .await?;
    let granted = user
        .query(
            "SELECT acquired FROM lease.acquire('read-uncommitted', 'a', interval '1 min')",
            &[],
        )
        .await;
    match &granted {
        Ok(rows) if rows.len() == 1 && rows[0].try_get::<_, bool>(0).unwrap_or(false) => {
            user.batch_execute("COMMIT").await?;
            let seen = crate::client::inspect(&user, "read-uncommitted").await?;
            if !matches!(&seen, Some(i) if i.held && i.owner.as_deref() == Some("a")) {
                found.push(format!(
                    "the grant made under READ UNCOMMITTED did not commit: inspect gives {seen:?}"
                ));
            }
        }
        other => {
            let _ = user.batch_execute("ROLLBACK").await;
            found.insert(
                0,
                format!(
                    "under READ UNCOMMITTED (which PostgreSQL runs as READ COMMITTED), the first \
                 acquire of a key answered {}; expected a grant",
                    match other {
                        Ok(rows) => format!("{} rows", rows.len()),
                        Err(e) => describe_db(e),
                    }
                ),
            );
        }
    }
    if !found.is_empty() {
        // The first of each kind is enough to read; the count says how many.
        let more = found.len().saturating_sub(3);
        found.truncate(3);
        violated!(
            "isolation class: {}{}",
            found.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}
