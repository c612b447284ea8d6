//! Checks 1-3: the extension's objects, owners and ACLs; SECURITY DEFINER and search_path;
//! the lease table's triggers, rules and policies.
use super::*;

// ---------------------------------------------------------------------------------------
// 1. Objects, owners and ACLs

/// Every object the extension creates (members, and the relations and types that come with
/// its tables), with its owner and each `aclexplode` entry, as lines
/// `<object>: owner <role>` and `<object>: <grantee> <privilege>[ WITH GRANT OPTION]`.
/// Roles read `bootstrap superuser`, `installer` (the extension's owner) or `PUBLIC`.
pub async fn extension_acl_lines(
    su: &Client,
    extension: &str,
) -> Result<Vec<String>, SecurityError> {
    let rows = su
        .query(
            r#"
WITH ext AS (SELECT oid, extowner FROM pg_extension WHERE extname = $1),
mem AS (
    SELECT d.classid, d.objid FROM pg_depend d, ext
     WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
memrel AS (SELECT objid AS oid FROM mem WHERE classid = 'pg_class'::regclass),
obj(classid, objid) AS (
          SELECT classid, objid FROM mem
    UNION SELECT 'pg_class'::regclass, i.indexrelid FROM pg_index i JOIN memrel r ON i.indrelid = r.oid
    UNION SELECT 'pg_class'::regclass, c.reltoastrelid FROM pg_class c JOIN memrel r ON c.oid = r.oid
           WHERE c.reltoastrelid <> 0
    UNION SELECT 'pg_class'::regclass, i.indexrelid FROM pg_index i
            JOIN pg_class c ON i.indrelid = c.reltoastrelid JOIN memrel r ON c.oid = r.oid
    UNION SELECT 'pg_class'::regclass, d.objid FROM pg_depend d JOIN memrel r
              ON d.refclassid = 'pg_class'::regclass AND d.refobjid = r.oid
           WHERE d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
    UNION SELECT 'pg_type'::regclass, t.oid FROM pg_type t JOIN memrel r ON t.typrelid = r.oid
    UNION SELECT 'pg_type'::regclass, a.oid FROM pg_type a JOIN pg_type t ON a.oid = t.typarray
            JOIN memrel r ON t.typrelid = r.oid
),
info AS (
    SELECT o.classid, o.objid, pg_describe_object(o.classid, o.objid, 0) AS label,
           CASE o.classid
             WHEN 'pg_namespace'::regclass THEN (SELECT nspowner FROM pg_namespace WHERE oid = o.objid)
             WHEN 'pg_class'::regclass THEN (SELECT relowner FROM pg_class WHERE oid = o.objid)
             WHEN 'pg_proc'::regclass THEN (SELECT proowner FROM pg_proc WHERE oid = o.objid)
             WHEN 'pg_type'::regclass THEN (SELECT typowner FROM pg_type WHERE oid = o.objid)
           END AS owner,
           CASE o.classid
             WHEN 'pg_namespace'::regclass THEN
               (SELECT coalesce(nspacl, acldefault('n'::"char", nspowner)) FROM pg_namespace WHERE oid = o.objid)
             WHEN 'pg_class'::regclass THEN
               (SELECT CASE WHEN relkind IN ('i', 'I') THEN NULL
                            ELSE coalesce(relacl, acldefault((CASE relkind WHEN 'S' THEN 's' ELSE 'r' END)::"char", relowner))
                       END FROM pg_class WHERE oid = o.objid)
             WHEN 'pg_proc'::regclass THEN
               (SELECT coalesce(proacl, acldefault('f'::"char", proowner)) FROM pg_proc WHERE oid = o.objid)
             WHEN 'pg_type'::regclass THEN
               (SELECT coalesce(typacl, acldefault('T'::"char", typowner)) FROM pg_type WHERE oid = o.objid)
           END AS acl
      FROM obj o
),
named AS (
    SELECT label, owner, acl,
           (SELECT extowner FROM ext) AS installer
      FROM info
)
SELECT label,
       CASE WHEN owner IS NULL THEN 'unknown (not a schema, relation, function or type)'
            WHEN owner = 10 THEN 'bootstrap superuser'
            WHEN owner = installer THEN 'installer'
            ELSE owner::regrole::text END AS owner,
       CASE WHEN a.grantee IS NULL THEN NULL
            WHEN a.grantee = 0 THEN 'PUBLIC'
            WHEN a.grantee = 10 THEN 'bootstrap superuser'
            WHEN a.grantee = installer THEN 'installer'
            ELSE a.grantee::regrole::text END AS grantee,
       a.privilege_type, a.is_grantable
  FROM named LEFT JOIN LATERAL aclexplode(acl) a ON true
"#,
            &[&extension],
        )
        .await?;
    // A toast table's name carries its table's OID: name it by its table instead.
    let toast: Vec<(String, String)> = su
        .query(
            "SELECT c.oid::text, c.oid::regclass::text FROM pg_class c \
             JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid \
             JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid \
             WHERE e.extname = $1 AND d.deptype = 'e' AND c.reltoastrelid <> 0",
            &[&extension],
        )
        .await?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect::<Result<_, tokio_postgres::Error>>()?;
    let mut lines = BTreeSet::new();
    for r in rows {
        let mut label: String = r.try_get(0)?;
        for (oid, table) in &toast {
            label = label.replace(&format!("pg_toast_{oid}"), &format!("pg_toast_<{table}>"));
        }
        let owner: String = r.try_get(1)?;
        lines.insert(format!("{label}: owner {owner}"));
        let grantee: Option<String> = r.try_get(2)?;
        if let Some(grantee) = grantee {
            let privilege: String = r.try_get(3)?;
            let grantable: bool = r.try_get(4)?;
            let option = if grantable { " WITH GRANT OPTION" } else { "" };
            lines.insert(format!("{label}: {grantee} {privilege}{option}"));
        }
    }
    Ok(lines.into_iter().collect())
}

/// The reviewed objects, owners and privileges of pg_lease 0.3.0 on a server of `major`.
///
/// - Everything is owned by the bootstrap superuser (the extension is trusted), who holds
///   the owner's implicit privileges (on tables, MAINTAIN too from PostgreSQL 17, which
///   added that privilege).
/// - PUBLIC: USAGE on schema `lease` and EXECUTE on the four API functions in it, nothing
///   else (USAGE on the row types of the tables, PostgreSQL's default for types, is out of
///   reach: their schemas are not usable by PUBLIC).
/// - Schema `lease_internal` (the lease table, its index and the helpers): nobody but the
///   bootstrap superuser has any privilege on it.
/// - `pg_database_owner` (the database's owner, whoever it is): USAGE on schema `lease_dump`
///   and SELECT on `lease_dump.leases`, the lease table's parent, so that it can pg_dump
///   its database; nothing else.
pub fn reviewed_acl(major: u32) -> Vec<String> {
    const SU: &str = "bootstrap superuser";
    let mut lines = BTreeSet::new();
    let mut add = |object: &str, entries: &[(&str, &str)]| {
        lines.insert(format!("{object}: owner {SU}"));
        for (grantee, privilege) in entries {
            lines.insert(format!("{object}: {grantee} {privilege}"));
        }
    };
    add(
        "schema lease",
        &[(SU, "USAGE"), (SU, "CREATE"), ("PUBLIC", "USAGE")],
    );
    add("schema lease_internal", &[(SU, "USAGE"), (SU, "CREATE")]);
    add(
        "schema lease_dump",
        &[
            (SU, "USAGE"),
            (SU, "CREATE"),
            ("pg_database_owner", "USAGE"),
        ],
    );
    let mut table_owner: Vec<(&str, &str)> = [
        "INSERT",
        "SELECT",
        "UPDATE",
        "DELETE",
        "TRUNCATE",
        "REFERENCES",
        "TRIGGER",
    ]
    .iter()
    .map(|p| (SU, *p))
    .collect();
    if major >= 17 {
        table_owner.push((SU, "MAINTAIN"));
    }
    let mut dump = table_owner.clone();
    dump.push(("pg_database_owner", "SELECT"));
    for (schema, table) in [("lease_internal", &table_owner), ("lease_dump", &dump)] {
        add(&format!("table {schema}.leases"), table);
        add(
            &format!("toast table pg_toast.pg_toast_<{schema}.leases>"),
            &table_owner,
        );
        add(
            &format!("index pg_toast.pg_toast_<{schema}.leases>_index"),
            &[],
        );
        for ty in [
            format!("type {schema}.leases"),
            format!("type {schema}.leases[]"),
        ] {
            add(&ty, &[(SU, "USAGE"), ("PUBLIC", "USAGE")]);
        }
    }
    add("index lease_internal.leases_pkey", &[]);
    for api in [
        "function lease.acquire(text,text,interval,interval)",
        "function lease.renew(text,text,bigint,interval)",
        "function lease.release(text,text,bigint)",
        "function lease.inspect(text)",
    ] {
        add(api, &[(SU, "EXECUTE"), ("PUBLIC", "EXECUTE")]);
    }
    for helper in [
        "_commit_durably()",
        "_failure_status(text,text,bigint)",
        "_interval_bad(interval,boolean)",
        "_interval_problem(text,interval,boolean)",
        "_interval_text(interval)",
        "_lock_live(text,text,bigint)",
        "_no_prepare()",
        "_raise_invalid(text,text[])",
        "_refuse_isolation(text)",
        "_restore_row()",
        "_take(text,text,interval,boolean)",
        "_text_bad(text)",
        "_text_problem(text,text)",
    ] {
        add(
            &format!("function lease_internal.{helper}"),
            &[(SU, "EXECUTE")],
        );
    }
    lines.into_iter().collect()
}

/// The four functions PUBLIC may call.
pub const API_FUNCTIONS: [&str; 4] = [
    "lease.acquire(text,text,interval,interval)",
    "lease.inspect(text)",
    "lease.release(text,text,bigint)",
    "lease.renew(text,text,bigint,interval)",
];

pub(super) fn diff_lines(actual: &[String], expected: &[String]) -> Option<String> {
    let a: BTreeSet<&String> = actual.iter().collect();
    let e: BTreeSet<&String> = expected.iter().collect();
    let unexpected: Vec<&&String> = a.difference(&e).collect();
    let missing: Vec<&&String> = e.difference(&a).collect();
    if unexpected.is_empty() && missing.is_empty() {
        return None;
    }
    let mut s = String::new();
    for u in unexpected {
        s.push_str(&format!("\n  unexpected: {u}"));
    }
    for m in missing {
        s.push_str(&format!("\n  missing:    {m}"));
    }
    Some(s)
}

fixture_check!(
    extension_objects_owners_and_acls_match_the_reviewed_list,
    extension_objects_owners_and_acls_match_the_reviewed_list_body
);

async fn extension_objects_owners_and_acls_match_the_reviewed_list_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let su = f.superuser().await?;
    let actual = extension_acl_lines(&su, ctx.extension).await?;
    if actual.is_empty() {
        infra!("the extension {} has no member objects", ctx.extension);
    }
    if let Some(diff) = diff_lines(&actual, &reviewed_acl(ctx.server_major())) {
        violated!("the objects, owners and privileges differ from the reviewed list:{diff}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 2. SECURITY DEFINER and search_path

fixture_check!(
    only_the_api_is_security_definer_and_every_search_path_is_pinned,
    only_the_api_is_security_definer_and_every_search_path_is_pinned_body
);

async fn only_the_api_is_security_definer_and_every_search_path_is_pinned_body(
    ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let su = f.superuser().await?;
    let rows = su
        .query(
            "SELECT p.oid::regprocedure::text, p.prosecdef, l.lanname, \
                    coalesce(p.proconfig, '{}'), \
                    EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f'::\"char\", p.proowner))) a \
                            WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') \
               FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang \
               JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid \
               JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid \
              WHERE e.extname = $1 AND d.deptype = 'e' ORDER BY 1",
            &[&ctx.extension],
        )
        .await?;
    if rows.is_empty() {
        infra!("the extension {} has no functions", ctx.extension);
    }
    let pinned = vec!["search_path=pg_catalog, pg_temp".to_string()];
    let mut problems = Vec::new();
    let mut api_seen = 0;
    for r in &rows {
        let name: String = r.try_get(0)?;
        let secdef: bool = r.try_get(1)?;
        let language: String = r.try_get(2)?;
        let config: Vec<String> = r.try_get(3)?;
        let public_exec: bool = r.try_get(4)?;
        let is_api = API_FUNCTIONS.contains(&name.as_str());
        if is_api {
            api_seen += 1;
            if !secdef {
                problems.push(format!("{name} is not SECURITY DEFINER"));
            }
            if config != pinned {
                problems.push(format!(
                    "{name} runs with settings {config:?}, expected exactly {pinned:?}"
                ));
            }
            if !public_exec {
                problems.push(format!("{name} is not executable by PUBLIC"));
            }
            continue;
        }
        if secdef {
            problems.push(format!("helper {name} is SECURITY DEFINER"));
        }
        if public_exec {
            problems.push(format!("helper {name} is executable by PUBLIC"));
        }
        let path: Vec<&String> = config
            .iter()
            .filter(|c| c.starts_with("search_path="))
            .collect();
        match path.as_slice() {
            [p] if p.as_str() == pinned[0] => {}
            [] if language == "sql" => {
                // Inlinable SQL helpers carry no SET clause: they are parsed inside their
                // (pinned) callers, and PUBLIC cannot call them directly (checked above).
            }
            other => problems.push(format!(
                "helper {name} ({language}) has search_path {other:?}, expected {:?}",
                pinned[0]
            )),
        }
    }
    if api_seen != API_FUNCTIONS.len() {
        problems.push(format!(
            "found {api_seen} of the API functions {API_FUNCTIONS:?}"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("; "));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 3. Triggers, rules, policies

fixture_check!(
    the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit,
    the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit_body
);

async fn the_table_has_only_the_durability_trigger_and_it_only_sets_synchronous_commit_body(
    _ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let su = f.superuser().await?;
    let mut problems = Vec::new();
    let table = crate::extension::lease_table(&su).await?;
    let schema = table.split('.').next().unwrap_or_default().to_string();
    let meta = su
        .query_one(
            "SELECT c.relrowsecurity, c.relforcerowsecurity, \
                    (SELECT count(*) FROM pg_policy WHERE polrelid = c.oid), \
                    (SELECT count(*) FROM pg_rewrite WHERE ev_class = c.oid) \
               FROM pg_class c WHERE c.oid = $1::text::regclass",
            &[&table],
        )
        .await?;
    let (rls, force, policies, rules): (bool, bool, i64, i64) = (
        meta.try_get(0)?,
        meta.try_get(1)?,
        meta.try_get(2)?,
        meta.try_get(3)?,
    );
    if rls || force || policies != 0 || rules != 0 {
        problems.push(format!(
            "{table} has row security {rls}/{force}, {policies} policies, {rules} rules"
        ));
    }
    let triggers = su
        .query(
            "SELECT t.tgname::text, t.tgfoid::regprocedure::text, t.tgenabled::text, t.tgdeferrable, \
                    t.tginitdeferred, t.tgconstraint <> 0, t.tgtype::int, p.prosecdef, \
                    coalesce(p.proconfig, '{}') \
               FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid \
              WHERE t.tgrelid = $1::text::regclass AND NOT t.tgisinternal ORDER BY 1",
            &[&table],
        )
        .await?;
    // tgtype: ROW (1) | INSERT (4) | UPDATE (16), AFTER (no BEFORE bit).
    let expected = (
        "leases_commit_durably".to_string(),
        format!("{schema}._commit_durably()"),
        "O".to_string(),
        true,
        true,
        true,
        1 | 4 | 16,
        false,
        vec!["search_path=pg_catalog, pg_temp".to_string()],
    );
    match triggers.as_slice() {
        [t] => {
            let actual = (
                t.try_get::<_, String>(0)?,
                t.try_get::<_, String>(1)?,
                t.try_get::<_, String>(2)?,
                t.try_get::<_, bool>(3)?,
                t.try_get::<_, bool>(4)?,
                t.try_get::<_, bool>(5)?,
                t.try_get::<_, i32>(6)?,
                t.try_get::<_, bool>(7)?,
                t.try_get::<_, Vec<String>>(8)?,
            );
            if actual != expected {
                problems.push(format!(
                    "the trigger is {actual:?}; expected (name, function, enabled, deferrable, \
                     initially deferred, constraint trigger, AFTER ROW INSERT|UPDATE, not \
                     SECURITY DEFINER, pinned search_path) = {expected:?}"
                ));
            }
        }
        other => {
            let names: Vec<String> = other.iter().filter_map(|t| t.try_get(0).ok()).collect();
            problems.push(format!(
                "{table} has the triggers {names:?}; expected only the durability trigger leases_commit_durably"
            ));
        }
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("; "));
    }
    // What the trigger does as the caller: fire it early, inside the caller's
    // transaction, and compare every setting before and after.
    let user = f.connect_as(&f.user).await?;
    // A first call loads PL/pgSQL (and its settings) into the session.
    crate::client::inspect(&user, "trigger-probe").await?;
    user.batch_execute("BEGIN; SET LOCAL synchronous_commit = off")
        .await?;
    let settings = "SELECT name, setting FROM pg_settings ORDER BY name";
    let before = settings_of(&user, settings).await?;
    let who_before: String = user
        .query_one("SELECT current_user::text", &[])
        .await?
        .try_get(0)?;
    crate::client::acquire(
        &user,
        "trigger-probe",
        "u",
        Duration::from_secs(60),
        Duration::ZERO,
    )
    .await?;
    user.batch_execute("SET CONSTRAINTS ALL IMMEDIATE").await?;
    let after = settings_of(&user, settings).await?;
    let who_after: String = user
        .query_one("SELECT current_user::text", &[])
        .await?
        .try_get(0)?;
    user.batch_execute("ROLLBACK").await?;
    let changed: Vec<String> = after
        .iter()
        .filter(|(n, v)| before.iter().find(|(bn, _)| bn == n).map(|(_, bv)| bv) != Some(v))
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    // off becomes local: the commit record is flushed before COMMIT returns
    if changed != ["synchronous_commit=local"] {
        violated!(
            "firing the durability trigger in the caller's transaction changed the settings {changed:?}; expected only synchronous_commit=local"
        );
    }
    if who_before != who_after || who_after != f.user {
        violated!("the caller's identity changed from {who_before} to {who_after}");
    }
    Ok(())
}

async fn settings_of(c: &Client, sql: &str) -> Result<Vec<(String, String)>, SecurityError> {
    c.query(sql, &[])
        .await?
        .iter()
        .map(|r| {
            Ok((
                r.try_get(0)?,
                r.try_get::<_, Option<String>>(1)?.unwrap_or_default(),
            ))
        })
        .collect::<Result<_, tokio_postgres::Error>>()
        .map_err(SecurityError::from)
}
