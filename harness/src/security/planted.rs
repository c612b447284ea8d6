//! Checks 6-7: planted functions and operators, a squatted schema.
use super::*;

// ---------------------------------------------------------------------------------------
// 6. Planted functions and operators

/// One planted object: SQL run by the planter to create it, a query in the planter's
/// session showing that unqualified names reach it, and the SQL that removes it.
struct Plant {
    what: &'static str,
    create: &'static str,
    reached_by: &'static str,
    drop: &'static str,
}

const PLANTS: &[Plant] = &[
    Plant {
        what: "public.clock_timestamp() returning the year 3000",
        create: "CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS $$ \
                 BEGIN PERFORM public.planted_ran(); RETURN timestamptz '3000-01-01 00:00:00+00'; END $$",
        reached_by: "SELECT clock_timestamp() > timestamptz '2999-01-01 00:00:00+00'",
        drop: "DROP FUNCTION public.clock_timestamp()",
    },
    Plant {
        what: "operator public.= (text, text) that is never true",
        create: "CREATE FUNCTION public.planted_texteq(text, text) RETURNS boolean LANGUAGE plpgsql AS $$ \
                 BEGIN PERFORM public.planted_ran(); RETURN false; END $$; \
                 CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_texteq)",
        reached_by: "SELECT NOT ('x'::text = 'x'::text)",
        drop: "DROP OPERATOR public.= (text, text); DROP FUNCTION public.planted_texteq(text, text)",
    },
    Plant {
        what: "operator public.< (double precision, integer) that is always true (an exact match where pg_catalog needs a cast)",
        create: "CREATE FUNCTION public.planted_lt(double precision, integer) RETURNS boolean LANGUAGE plpgsql AS $$ \
                 BEGIN PERFORM public.planted_ran(); RETURN true; END $$; \
                 CREATE OPERATOR public.< (LEFTARG = double precision, RIGHTARG = integer, FUNCTION = public.planted_lt)",
        reached_by: "SELECT 1.0::double precision < 0",
        drop: "DROP OPERATOR public.< (double precision, integer); DROP FUNCTION public.planted_lt(double precision, integer)",
    },
    Plant {
        what: "operator public.<> (text, text) that is always true",
        create: "CREATE FUNCTION public.planted_textne(text, text) RETURNS boolean LANGUAGE plpgsql AS $$ \
                 BEGIN PERFORM public.planted_ran(); RETURN true; END $$; \
                 CREATE OPERATOR public.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = public.planted_textne)",
        reached_by: "SELECT 'x'::text <> 'x'::text",
        drop: "DROP OPERATOR public.<> (text, text); DROP FUNCTION public.planted_textne(text, text)",
    },
];

/// The search_path a victim (or the attacker itself) uses so that planted objects in
/// `public` take precedence over pg_catalog.
const HOSTILE_PATH: &str = "SET search_path = public, pg_catalog, pg_temp";

fixture_check!(
    planted_functions_and_operators_never_run_inside_lease_calls,
    planted_functions_and_operators_never_run_inside_lease_calls_body
);

async fn planted_functions_and_operators_never_run_inside_lease_calls_body(
    _ctx: &Ctx<'_>,
    f: &mut Fixture<'_>,
) -> CheckResult {
    let su = f.superuser().await?;
    // The hostile role may create objects in public (as on PostgreSQL 14 by default).
    // Every planted object reports each run through two sequences, which nextval
    // advances even when the statement that ran it is rolled back.
    su.batch_execute(&format!(
        "GRANT CREATE ON SCHEMA public TO {h}",
        h = quote_ident(&f.hostile)
    ))
    .await?;
    let hostile = f.connect_as(&f.hostile).await?;
    hostile
        .batch_execute(
            "CREATE SEQUENCE public.planted_runs; CREATE SEQUENCE public.planted_runs_elevated; \
             GRANT USAGE, UPDATE ON SEQUENCE public.planted_runs, public.planted_runs_elevated TO PUBLIC; \
             CREATE FUNCTION public.planted_ran() RETURNS void LANGUAGE plpgsql AS $$ BEGIN \
               PERFORM pg_catalog.nextval('public.planted_runs'); \
               IF pg_catalog.\"current_user\"() OPERATOR(pg_catalog.<>) pg_catalog.\"session_user\"() THEN \
                 PERFORM pg_catalog.nextval('public.planted_runs_elevated'); \
               END IF; END $$",
        )
        .await?;
    let hour = Duration::from_secs(3600);
    let user = f.connect_as(&f.user).await?;
    let granted =
        crate::client::acquire(&user, "victim-key", "victim", hour, Duration::ZERO).await?;
    let epoch = granted
        .epoch()
        .ok_or_else(|| SecurityError::Unexpected("acquire of a new key was denied".into()))?;
    let mut problems = Vec::new();
    for (i, plant) in PLANTS.iter().enumerate() {
        let new_key = format!("victim-new-{i}");
        hostile.batch_execute(plant.create).await?;
        let counts = "SELECT pg_catalog.nextval('public.planted_runs'), pg_catalog.nextval('public.planted_runs_elevated')";
        let start = hostile.query_one(counts, &[]).await?;
        let (runs0, elevated0): (i64, i64) = (start.try_get(0)?, start.try_get(1)?);
        // Each session that calls the API puts public before pg_catalog.
        let attacker = f.connect_as(&f.hostile).await?;
        let victim = f.connect_as(&f.user).await?;
        for c in [&attacker, &victim] {
            c.batch_execute(HOSTILE_PATH).await?;
            c.batch_execute("SET statement_timeout = '1s'").await?;
        }
        // Positive control: in these sessions the unqualified name reaches the plant.
        let reached: bool = attacker
            .query_one(plant.reached_by, &[])
            .await?
            .try_get(0)?;
        let reached_victim: bool = victim.query_one(plant.reached_by, &[]).await?.try_get(0)?;
        if !reached || !reached_victim {
            infra!(
                "the planted {} is not reached by `{}` in the callers' sessions",
                plant.what,
                plant.reached_by
            );
        }
        let before_calls = hostile.query_one(counts, &[]).await?;
        let (runs1, elevated1): (i64, i64) = (before_calls.try_get(0)?, before_calls.try_get(1)?);
        // The calls. A planted clock would make the live lease look lapsed: inspect
        // would say not held and the attacker's acquire would take the key over.
        let mut answers = Vec::new();
        let inspect_a = crate::client::inspect(&attacker, "victim-key").await;
        answers.push(format!("attacker inspect: {inspect_a:?}"));
        let take =
            crate::client::acquire(&attacker, "victim-key", "mallory", hour, Duration::ZERO).await;
        answers.push(format!("attacker acquire: {take:?}"));
        let renew = crate::client::renew(&victim, "victim-key", "victim", epoch, hour).await;
        answers.push(format!("victim renew: {renew:?}"));
        let inspect_v = crate::client::inspect(&victim, "victim-key").await;
        answers.push(format!("victim inspect: {inspect_v:?}"));
        let fresh = crate::client::acquire(&victim, &new_key, "victim", hour, Duration::ZERO).await;
        answers.push(format!("victim acquire of a new key: {fresh:?}"));
        let release_wrong = crate::client::release(&attacker, "victim-key", "mallory", epoch).await;
        answers.push(format!("attacker release: {release_wrong:?}"));
        let end = hostile.query_one(counts, &[]).await?;
        let (runs2, elevated2): (i64, i64) = (end.try_get(0)?, end.try_get(1)?);
        // nextval in `counts` itself advances each sequence once per read.
        let runs_in_calls = runs2 - runs1 - 1;
        let elevated_in_calls = elevated2 - elevated1 - 1;
        if runs1 - runs0 - 1 < 1 {
            infra!(
                "the positive control did not run the planted {}",
                plant.what
            );
        }
        let _ = elevated0;
        let correct = matches!(&inspect_a, Ok(Some(r)) if r.held && r.epoch == epoch && r.owner.as_deref() == Some("victim"))
            && matches!(&take, Ok(crate::client::Acquire::Denied))
            && matches!(&renew, Ok(r) if r.status == crate::client::Status::Ok)
            && matches!(&inspect_v, Ok(Some(r)) if r.held && r.epoch == epoch)
            && matches!(
                &fresh,
                Ok(crate::client::Acquire::Acquired { epoch: 1, .. })
            )
            && matches!(&release_wrong, Ok(crate::client::Status::NotOwner));
        if runs_in_calls != 0 || elevated_in_calls != 0 || !correct {
            problems.push(format!(
                "with the planted {} on the callers' search_path: it ran {runs_in_calls} times inside lease calls \
                 ({elevated_in_calls} of them as another role than the session's); answers: {}",
                plant.what,
                answers.join("; ")
            ));
        }
        hostile.batch_execute(plant.drop).await?;
    }
    // A function in the caller's own pg_temp: never looked up for unqualified calls.
    let attacker = f.connect_as(&f.hostile).await?;
    attacker
        .batch_execute(
            "CREATE FUNCTION pg_temp.clock_timestamp() RETURNS timestamptz LANGUAGE sql \
             AS $$ SELECT timestamptz '3000-01-01 00:00:00+00' $$; \
             SET search_path = pg_temp, public, pg_catalog",
        )
        .await?;
    let temp_reached: bool = attacker
        .query_one(
            "SELECT pg_temp.clock_timestamp() > timestamptz '2999-01-01 00:00:00+00'",
            &[],
        )
        .await?
        .try_get(0)?;
    if !temp_reached {
        infra!("the pg_temp clock does not answer the far future when called qualified");
    }
    let temp_inspect = crate::client::inspect(&attacker, "victim-key").await;
    let temp_take =
        crate::client::acquire(&attacker, "victim-key", "mallory", hour, Duration::ZERO).await;
    if !matches!(&temp_inspect, Ok(Some(r)) if r.held)
        || !matches!(&temp_take, Ok(crate::client::Acquire::Denied))
    {
        problems.push(format!(
            "with pg_temp.clock_timestamp() planted by the caller: inspect {temp_inspect:?}, acquire {temp_take:?}"
        ));
    }
    if !problems.is_empty() {
        violated!("{}", problems.join("\n"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 7. A squatted schema

pub(super) async fn a_squatted_lease_schema_makes_the_install_fail(ctx: &Ctx<'_>) -> CheckResult {
    let f = Fixture::bare(ctx.cluster, ctx.extension).await?;
    let result = async {
        let su = f.superuser().await?;
        su.batch_execute(&format!(
            "GRANT CREATE ON DATABASE {} TO {}",
            quote_ident(&f.db),
            quote_ident(&f.hostile)
        ))
        .await?;
        let hostile = f.connect_as(&f.hostile).await?;
        hostile
            .batch_execute(
                "CREATE SCHEMA lease; GRANT USAGE, CREATE ON SCHEMA lease TO PUBLIC; \
                 CREATE TABLE lease.leases (key text PRIMARY KEY, owner text, epoch bigint, expires_at timestamptz); \
                 GRANT ALL ON lease.leases TO PUBLIC",
            )
            .await?;
        let owner = f.connect_as(&f.owner).await?;
        let install = owner
            .batch_execute(&format!("CREATE EXTENSION {}", quote_ident(ctx.extension)))
            .await;
        let installed: bool = su
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = $1)",
                &[&ctx.extension],
            )
            .await?
            .try_get(0)?;
        match install {
            Err(e) if e.code() == Some(&SqlState::DUPLICATE_SCHEMA) && !installed => Ok(()),
            Err(e) if !installed => violated!(
                "the install into a squatted schema failed, but with {} instead of 42P06",
                describe_db(&e)
            ),
            other => violated!(
                "CREATE EXTENSION with a schema lease created by another role: {:?}, installed: {installed}",
                other.map_err(|e| describe_db(&e))
            ),
        }
    }
    .await;
    let cleanup = f.drop_all().await;
    result.and(cleanup.map_err(Failure::from))
}
