//! Checks 4-5: a hostile role and the installer reach lease state only through the API.
use super::*;

// ---------------------------------------------------------------------------------------
// 4. A hostile role

/// Puts some lease state in place through the API as `user`: a held key, a free key and a
/// key held by another owner.
async fn seed_leases(f: &Fixture<'_>) -> Result<(), SecurityError> {
    let user = f.connect_as(&f.user).await?;
    let hour = Duration::from_secs(3600);
    crate::client::acquire(&user, "held", "alice", hour, Duration::ZERO).await?;
    let free = crate::client::acquire(&user, "free", "alice", hour, Duration::ZERO).await?;
    let epoch = free
        .epoch()
        .ok_or_else(|| SecurityError::Unexpected("acquire of a new key was denied".into()))?;
    crate::client::release(&user, "free", "alice", epoch).await?;
    crate::client::acquire(&user, "other", "bob", hour, Duration::ZERO).await?;
    Ok(())
}

/// The hostile role's attempts at everything but the API, each with what its refusal names
/// on a server of `major`.
fn hostile_statements(extension: &str, major: u32, table: &str) -> Vec<(String, &'static str)> {
    let ext = quote_ident(extension);
    // PostgreSQL 16 reworded the refusal to act for a role one lacks the privileges of.
    let not_that_role = if major >= 16 {
        "permission denied to change default privileges"
    } else {
        "must be member of role"
    };
    vec![
        (format!("SELECT * FROM {table}"), "table leases"),
        (format!("INSERT INTO {table} VALUES ('held', 'mallory', 1, now() + interval '1 hour')"), "table leases"),
        (format!("UPDATE {table} SET epoch = 1"), "table leases"),
        (format!("DELETE FROM {table}"), "table leases"),
        (format!("TRUNCATE {table}"), "table leases"),
        (format!("COPY {table} TO STDOUT"), "table leases"),
        (format!("SELECT 1 FROM {table} FOR UPDATE"), "table leases"),
        (format!("BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE; COMMIT"), "table leases"),
        ("CREATE TABLE lease.planted (i int)".into(), "schema lease"),
        ("CREATE FUNCTION lease.acquire(text) RETURNS int LANGUAGE sql AS 'SELECT 1'".into(), "schema lease"),
        ("CREATE FUNCTION lease.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS 'SELECT now()'".into(), "schema lease"),
        ("CREATE VIEW lease.v AS SELECT 1 AS one".into(), "schema lease"),
        (format!("ALTER TABLE {table} ADD COLUMN planted int"), "table leases"),
        (format!("ALTER TABLE {table} OWNER TO CURRENT_USER"), "table leases"),
        (format!("ALTER TABLE {table} DISABLE TRIGGER ALL"), "table leases"),
        (format!("ALTER TABLE {table} ENABLE ROW LEVEL SECURITY"), "table leases"),
        (format!("CREATE INDEX ON {table} (owner)"), "table leases"),
        (format!("CREATE TRIGGER planted BEFORE UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()"), "table leases"),
        (format!("CREATE POLICY planted ON {table} USING (true)"), "table leases"),
        (format!("CREATE RULE planted AS ON UPDATE TO {table} DO INSTEAD NOTHING"), "table leases"),
        ("ALTER FUNCTION lease.acquire(text, text, interval, interval) SECURITY INVOKER".into(), "function lease.acquire"),
        ("ALTER FUNCTION lease.inspect(text) SET search_path = public".into(), "function lease.inspect"),
        ("ALTER FUNCTION lease.renew(text, text, bigint, interval) OWNER TO CURRENT_USER".into(), "function renew"),
        ("CREATE OR REPLACE FUNCTION lease.inspect(key text) RETURNS TABLE (held boolean, owner text, epoch bigint, expires_at timestamptz) LANGUAGE sql AS 'SELECT true, NULL::text, 0::bigint, NULL::timestamptz'".into(), "schema lease"),
        ("COMMENT ON FUNCTION lease.release(text, text, bigint) IS 'planted'".into(), "function lease.release"),
        ("ALTER SCHEMA lease RENAME TO planted".into(), "schema lease"),
        ("ALTER SCHEMA lease OWNER TO CURRENT_USER".into(), "schema lease"),
        (format!("DROP TABLE {table}"), "table leases"),
        ("DROP FUNCTION lease.inspect(text)".into(), "function lease.inspect"),
        ("DROP SCHEMA lease CASCADE".into(), "schema lease"),
        (format!("DROP EXTENSION {ext}"), "extension"),
        (format!("ALTER EXTENSION {ext} UPDATE"), "extension"),
        (format!("ALTER EXTENSION {ext} DROP FUNCTION lease.inspect(text)"), "extension"),
        (format!("GRANT INSERT ON {table} TO PUBLIC"), "table leases"),
        (format!("REINDEX TABLE {table}"), "table leases"),
        (format!("CLUSTER {table} USING leases_pkey"), "table leases"),
        ("ALTER DEFAULT PRIVILEGES FOR ROLE postgres IN SCHEMA lease GRANT ALL ON TABLES TO PUBLIC".into(), not_that_role),
    ]
}

/// A helper function of the extension: its name, a call of it with NULL arguments and what
/// a refusal to call it names (the function, or its schema when the caller may not use that).
struct HelperCall {
    call: String,
    refusal: [String; 2],
}

/// Calls of every helper function (those PUBLIC must not execute), with NULL arguments.
async fn helper_calls(su: &Client, extension: &str) -> Result<Vec<HelperCall>, SecurityError> {
    let rows = su
        .query(
            "SELECT p.proname::text, \
                    'SELECT ' || quote_ident(p.pronamespace::regnamespace::text) || '.' || quote_ident(p.proname) || '(' || \
                    coalesce((SELECT string_agg('NULL::' || format_type(t, NULL), ', ' ORDER BY i) \
                                FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, i)), '') || ')', \
                    p.prorettype = 'trigger'::regtype, p.pronamespace::regnamespace::text \
               FROM pg_proc p \
               JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid \
               JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid \
              WHERE e.extname = $1 AND d.deptype = 'e' ORDER BY 1",
            &[&extension],
        )
        .await?;
    let mut out = Vec::new();
    for r in rows {
        let name: String = r.try_get(0)?;
        let call: String = r.try_get(1)?;
        let is_trigger: bool = r.try_get(2)?;
        let schema: String = r.try_get(3)?;
        if API_FUNCTIONS
            .iter()
            .any(|a| a.starts_with(&format!("{schema}.{name}(")))
            || is_trigger
        {
            continue;
        }
        let refusal = [format!("function {name}"), format!("schema {schema}")];
        out.push(HelperCall { call, refusal });
    }
    Ok(out)
}

fixture_check!(
    a_hostile_role_is_denied_everything_but_the_api,
    a_hostile_role_is_denied_everything_but_the_api_body
);

async fn a_hostile_role_is_denied_everything_but_the_api_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    seed_leases(f).await?;
    let su = f.superuser().await?;
    let rows_before = table_rows(&su).await?;
    let acl_before = extension_acl_lines(&su, ctx.extension).await?;
    let hostile = f.connect_as(&f.hostile).await?;
    let table = LeaseTable::of(&su).await?;
    let table_refusal = table.refusal();
    let mut problems = Vec::new();
    for (sql, names) in hostile_statements(ctx.extension, ctx.server_major(), &table.name) {
        let names: Vec<&str> = match names {
            "table leases" => table_refusal.iter().map(String::as_str).collect(),
            other => vec![other],
        };
        expect_denied(&hostile, &sql, &names, "hostile", &mut problems).await;
        let _ = hostile.batch_execute("ROLLBACK").await;
    }
    let helpers = helper_calls(&su, ctx.extension).await?;
    if helpers.is_empty() {
        infra!("found no helper functions to call");
    }
    for h in &helpers {
        let names: Vec<&str> = h.refusal.iter().map(String::as_str).collect();
        expect_denied(&hostile, &h.call, &names, "hostile", &mut problems).await;
    }
    // Without privileges (or without the grant option), GRANT and REVOKE refuse or only
    // warn; either way no privilege may change (compared below).
    for sql in [
        "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA lease TO PUBLIC",
        "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA lease FROM PUBLIC",
        "REVOKE USAGE ON SCHEMA lease FROM PUBLIC",
        "GRANT ALL ON ALL TABLES IN SCHEMA lease TO PUBLIC",
    ] {
        let _ = hostile.batch_execute(sql).await;
    }
    // The trigger function cannot be called at all, whoever calls it.
    let trigger_call = format!("SELECT {}._commit_durably()", table.schema);
    if hostile.batch_execute(&trigger_call).await.is_ok() {
        problems.push(format!("hostile: {trigger_call} succeeded"));
    }
    // Positive control: the API works for the hostile role (EXECUTE is granted to PUBLIC).
    match crate::client::inspect(&hostile, "held").await {
        Ok(Some(row)) if row.held && row.owner.as_deref() == Some("alice") => {}
        other => infra!(
            "the hostile role's lease.inspect('held') gave {other:?}; the API must work for it"
        ),
    }
    let rows_after = table_rows(&su).await?;
    let acl_after = extension_acl_lines(&su, ctx.extension).await?;
    if rows_after != rows_before {
        problems.push(format!(
            "lease state changed: {rows_before:?} -> {rows_after:?}"
        ));
    }
    if let Some(diff) = diff_lines(&acl_after, &acl_before) {
        problems.push(format!(
            "the extension's objects or privileges changed:{diff}"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 5. The installer

fixture_check!(
    the_installer_reaches_lease_state_only_through_the_api,
    the_installer_reaches_lease_state_only_through_the_api_body
);

async fn the_installer_reaches_lease_state_only_through_the_api_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    seed_leases(f).await?;
    let su = f.superuser().await?;
    let rows_before = table_rows(&su).await?;
    let owner = f.connect_as(&f.owner).await?;
    let ext = quote_ident(ctx.extension);
    let table = LeaseTable::of(&su).await?;
    let t = &table.name;
    let statements: Vec<(String, &str)> = vec![
        (format!("INSERT INTO {t} VALUES ('new', 'mallory', 1, now() + interval '1 hour')"), "table leases"),
        (format!("UPDATE {t} SET epoch = 1"), "table leases"),
        (format!("DELETE FROM {t}"), "table leases"),
        (format!("TRUNCATE {t}"), "table leases"),
        (format!("SELECT 1 FROM {t} FOR UPDATE"), "table leases"),
        (format!("SELECT 1 FROM {t} FOR SHARE"), "table leases"),
        (format!("BEGIN; LOCK TABLE {t} IN EXCLUSIVE MODE; COMMIT"), "table leases"),
        (format!("COPY {t} FROM STDIN"), "table leases"),
        (format!("ALTER TABLE {t} DISABLE TRIGGER ALL"), "table leases"),
        (format!("CREATE TRIGGER planted BEFORE UPDATE ON {t} FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()"), "table leases"),
        ("CREATE TABLE lease.planted (i int)".into(), "schema lease"),
        ("ALTER FUNCTION lease.acquire(text, text, interval, interval) SET search_path = public".into(), "function lease.acquire"),
        (format!("ALTER EXTENSION {ext} DROP TABLE {t}"), "table leases"),
        (format!("ALTER EXTENSION {ext} DROP FUNCTION lease.acquire(text, text, interval, interval)"), "function lease.acquire"),
        ("DROP SCHEMA lease CASCADE".into(), "schema lease"),
    ];
    let acl_before = extension_acl_lines(&su, ctx.extension).await?;
    let mut problems = Vec::new();
    let table_refusal = table.refusal();
    for (sql, names) in &statements {
        let names: Vec<&str> = match *names {
            "table leases" => table_refusal.iter().map(String::as_str).collect(),
            other => vec![other],
        };
        expect_denied(&owner, sql, &names, "installer", &mut problems).await;
        let _ = owner.batch_execute("ROLLBACK").await;
    }
    for h in helper_calls(&su, ctx.extension).await? {
        let names: Vec<&str> = h.refusal.iter().map(String::as_str).collect();
        expect_denied(&owner, &h.call, &names, "installer", &mut problems).await;
    }
    let configs = config_tables(&su, ctx.extension).await?;
    // Holding SELECT without the grant option, the installer's GRANTs only warn; they
    // must not change any privilege.
    let mut grants = vec![
        format!("GRANT UPDATE ON {t} TO CURRENT_USER"),
        format!("GRANT SELECT ON {t} TO PUBLIC"),
        "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA lease TO CURRENT_USER".to_string(),
        "REVOKE EXECUTE ON FUNCTION lease.acquire(text, text, interval, interval) FROM PUBLIC"
            .to_string(),
    ];
    for config in &configs {
        grants.push(format!("GRANT SELECT ON {config} TO PUBLIC"));
        grants.push(format!("GRANT INSERT, UPDATE ON {config} TO CURRENT_USER"));
    }
    for sql in &grants {
        let _ = owner.batch_execute(sql).await;
    }
    let acl_after = extension_acl_lines(&su, ctx.extension).await?;
    if let Some(diff) = diff_lines(&acl_after, &acl_before) {
        problems.push(format!(
            "the installer's GRANT/REVOKE attempts changed privileges:{diff}"
        ));
    }
    // Positive control: the installer may read what pg_dump dumps (the extension's
    // configuration tables: 0.2.0's lease table itself, from 0.3.0 its parent) and use the API.
    if configs.is_empty() {
        violated!(
            "{} registers no configuration table: pg_dump would not keep the epochs",
            ctx.extension
        );
    }
    let mut read = Ok(());
    for config in &configs {
        if let Err(e) = owner
            .query(&format!("SELECT key, epoch FROM {config}"), &[])
            .await
        {
            read = Err((config.clone(), e));
            break;
        }
    }
    let api = crate::client::inspect(&owner, "held").await;
    let rows_after = table_rows(&su).await?;
    if rows_after != rows_before {
        problems.push(format!(
            "lease state changed: {rows_before:?} -> {rows_after:?}"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    if let Err((config, e)) = read {
        violated!(
            "the installer cannot read {config} (it needs SELECT to pg_dump): {}",
            describe_db(&e)
        );
    }
    if !matches!(api, Ok(Some(ref r)) if r.held) {
        infra!("the installer's lease.inspect('held') gave {api:?}");
    }
    Ok(())
}
