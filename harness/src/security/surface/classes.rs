//! The statement classes of the attack surface, as data: for each kind of object a build can
//! have, every kind of statement PostgreSQL accepts against such an object, as a template
//! whose placeholders the suite fills from the object ([`super::objects::Object::expand`]).
//! `leasecheck gate --suite security --list` prints this list.
//!
//! Placeholders: `{obj}` the object (qualified; a function's signature), `{table}` the table
//! of a table, index, trigger or constraint, `{col}`/`{col2}` its first and last columns,
//! `{idxname}` an index of that table, `{type}` a row or array type (a table's row type),
//! `{call}` a call of a function with NULL arguments, `{fname}`, `{args}`, `{ret}` and
//! `{body}` a function's qualified name, argument types, result and a body of that result,
//! `{name}` the object's own unqualified name, `{schema}` its schema, `{ext}` the
//! extension, `{db}` the database, `{own}` a schema the role may create in (`pg_temp` for
//! the PUBLIC-only role), `{oid}` the object's OID, `{n}` a number unique to the statement.

use super::{Control, Kind, Role};

/// How a statement is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Inside a transaction the attacker keeps open while the suite probes the workload.
    Transaction,
    /// On its own (statements PostgreSQL refuses to run inside a transaction block).
    Autocommit,
}

/// One class of statements.
#[derive(Clone, Copy, Debug)]
pub struct Class {
    pub name: &'static str,
    pub kind: Kind,
    /// The statement template (several statements separated by `;` run as one).
    pub sql: &'static str,
    pub shape: Shape,
    /// The PostgreSQL majors that have the statement, first and last.
    pub majors: (u32, u32),
    /// Part of the quick gate (every class runs in `--full`).
    pub quick: bool,
    /// A build (and a role) on which the class's statements must be found harmful: its
    /// negative control.
    pub control: Control,
}

impl Class {
    /// Whether the class exists on PostgreSQL `major`.
    pub fn on(&self, major: u32) -> bool {
        (self.majors.0..=self.majors.1).contains(&major)
    }
}

const LAST: u32 = 99;
/// 0.2.0's table, index and helpers in schema `lease`, usable by PUBLIC.
const V020_APP: Control = Control::V020(Role::App);
/// 0.3.0 with every privilege on the lease table granted to PUBLIC.
const GRANTS_APP: Control = Control::Mutant("surface_table_granted_to_public", Role::App);
/// 0.3.0 with every object owned by the installer.
const OWNED: Control = Control::Mutant("surface_owned_by_installer", Role::Owner);
/// 0.3.0 with the helpers in a schema PUBLIC may use, and executable by PUBLIC.
const HELPERS_APP: Control = Control::Mutant("surface_helpers_executable_by_public", Role::App);
/// Only SHARE UPDATE EXCLUSIVE or weaker (or a lock of a relation no call uses), and nothing
/// of the build changed.
const WEAK_LOCK: Control = Control::Never(
    "it takes at most a SHARE UPDATE EXCLUSIVE lock, which no lease call waits for, and \
     changes nothing of the build, whoever may run it",
);
/// No label provider.
const NO_LABELS: Control =
    Control::Never("no security label provider is loaded: PostgreSQL refuses every SECURITY LABEL");
/// What PostgreSQL refuses on a member of an extension, or on a table's row type, or gives
/// only to an object's owner who is a member of the new owner role.
const REFUSED_BY_POSTGRES: Control = Control::Never(
    "PostgreSQL refuses it for such an object whoever asks (a member of an extension, a \
     table's row type, an index a constraint needs) before any lock a lease call waits for",
);

/// Give an object away: only its owner may, to a role it is a member of.
const GIVE_AWAY: Control = Control::Never(
    "only an object's owner may give it away, and the build's objects belong to the bootstrap \
     superuser (to another owner only the same grants would follow)",
);

const fn tx(name: &'static str, kind: Kind, sql: &'static str, control: Control) -> Class {
    Class {
        name,
        kind,
        sql,
        shape: Shape::Transaction,
        majors: (14, LAST),
        quick: true,
        control,
    }
}

const fn auto(name: &'static str, kind: Kind, sql: &'static str, control: Control) -> Class {
    Class {
        shape: Shape::Autocommit,
        ..tx(name, kind, sql, control)
    }
}

const fn full(c: Class) -> Class {
    Class { quick: false, ..c }
}

const fn since(major: u32, c: Class) -> Class {
    Class {
        majors: (major, LAST),
        ..c
    }
}

use Kind::*;

/// Every statement class.
pub const CLASSES: &[Class] = &[
    // ---- a table: DDL that names it (some lock it before they check privileges) -------
    tx("create temp table partition of", Table, "CREATE TEMP TABLE s{n} PARTITION OF {table} FOR VALUES IN ('x')", V020_APP),
    tx("create temp table partition of default", Table, "CREATE TEMP TABLE s{n} PARTITION OF {table} DEFAULT", V020_APP),
    tx("create temp table inherits", Table, "CREATE TEMP TABLE s{n} () INHERITS ({table})", OWNED),
    tx("create temp table like", Table, "CREATE TEMP TABLE s{n} (LIKE {table} INCLUDING ALL)", Control::Never("it takes ACCESS SHARE, which no lease call waits for, then copies the definition: no dependency, nothing of the build changed")),
    tx("create table references", Table, "CREATE TABLE {own}.s{n} (k text REFERENCES {table} ({col}))", V020_APP),
    tx("alter table add foreign key", Table, "CREATE TABLE {own}.s{n} (k text); ALTER TABLE {own}.s{n} ADD FOREIGN KEY (k) REFERENCES {table} ({col})", V020_APP),
    full(tx("alter table add foreign key not valid", Table, "CREATE TABLE {own}.s{n} (k text); ALTER TABLE {own}.s{n} ADD FOREIGN KEY (k) REFERENCES {table} ({col}) NOT VALID", V020_APP)),
    tx("create trigger", Table, "CREATE TRIGGER s{n} BEFORE INSERT OR UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()", V020_APP),
    full(tx("create trigger for each statement", Table, "CREATE TRIGGER s{n} AFTER UPDATE ON {table} FOR EACH STATEMENT EXECUTE FUNCTION suppress_redundant_updates_trigger()", V020_APP)),
    tx("create constraint trigger", Table, "CREATE CONSTRAINT TRIGGER s{n} AFTER INSERT OR UPDATE ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()", V020_APP),
    full(tx("create trigger on truncate", Table, "CREATE TRIGGER s{n} BEFORE TRUNCATE ON {table} FOR EACH STATEMENT EXECUTE FUNCTION suppress_redundant_updates_trigger()", V020_APP)),
    tx("create rule", Table, "CREATE RULE s{n} AS ON UPDATE TO {table} DO INSTEAD NOTHING", V020_APP),
    full(tx("create rule on insert", Table, "CREATE RULE s{n} AS ON INSERT TO {table} DO ALSO NOTIFY s{n}", V020_APP)),
    tx("create policy", Table, "CREATE POLICY s{n} ON {table} USING (true)", OWNED),
    tx("create index", Table, "CREATE INDEX s{n} ON {table} ({col})", OWNED),
    full(tx("create unique index", Table, "CREATE UNIQUE INDEX s{n} ON {table} ({col2})", OWNED)),
    auto("create index concurrently", Table, "CREATE INDEX CONCURRENTLY s{n} ON {table} ({col})", OWNED),
    tx("create statistics", Table, "CREATE STATISTICS {own}.s{n} ON {col}, {col2} FROM {table}", OWNED),
    tx("create temp view over", Table, "CREATE TEMP VIEW s{n} AS SELECT * FROM {table}", V020_APP),
    full(tx("create materialized view over", Table, "CREATE MATERIALIZED VIEW {own}.s{n} AS SELECT * FROM {table} WITH NO DATA", Control::V020(Role::Other))),
    full(tx("create temp sequence owned by", Table, "CREATE TEMP SEQUENCE s{n} OWNED BY {table}.{col}", Control::Never("PostgreSQL links a sequence only to a column of a table in its own schema, and a temporary sequence is in pg_temp"))),
    tx("comment on table", Table, "COMMENT ON TABLE {table} IS 's{n}'", OWNED),
    full(tx("comment on column", Table, "COMMENT ON COLUMN {table}.{col} IS 's{n}'", OWNED)),
    full(tx("security label on table", Table, "SECURITY LABEL ON TABLE {table} IS 's{n}'", NO_LABELS)),
    tx("grant on table", Table, "GRANT ALL ON {table} TO PUBLIC", OWNED),
    full(tx("grant column on table", Table, "GRANT UPDATE ({col2}) ON {table} TO PUBLIC", OWNED)),
    tx("revoke on table", Table, "REVOKE ALL ON {table} FROM PUBLIC, CURRENT_USER", OWNED),
    tx("alter table owner", Table, "ALTER TABLE {table} OWNER TO CURRENT_USER", OWNED),
    tx("alter table add column", Table, "ALTER TABLE {table} ADD COLUMN s{n} int", OWNED),
    full(tx("alter table drop column", Table, "ALTER TABLE {table} DROP COLUMN {col2}", OWNED)),
    full(tx("alter table alter column type", Table, "ALTER TABLE {table} ALTER COLUMN {col2} TYPE text", OWNED)),
    full(tx("alter table set default", Table, "ALTER TABLE {table} ALTER COLUMN {col2} SET DEFAULT NULL", OWNED)),
    full(tx("alter table set not null", Table, "ALTER TABLE {table} ALTER COLUMN {col2} SET NOT NULL", OWNED)),
    full(tx("alter table set statistics", Table, "ALTER TABLE {table} ALTER COLUMN {col} SET STATISTICS 10", OWNED)),
    full(tx("alter table set storage", Table, "ALTER TABLE {table} ALTER COLUMN {col} SET STORAGE PLAIN", OWNED)),
    full(tx("alter table set compression", Table, "ALTER TABLE {table} ALTER COLUMN {col} SET COMPRESSION pglz", OWNED)),
    tx("alter table add check", Table, "ALTER TABLE {table} ADD CONSTRAINT s{n} CHECK (false) NOT VALID", OWNED),
    tx("alter table disable trigger", Table, "ALTER TABLE {table} DISABLE TRIGGER ALL", OWNED),
    tx("alter table enable row level security", Table, "ALTER TABLE {table} ENABLE ROW LEVEL SECURITY", OWNED),
    full(tx("alter table force row level security", Table, "ALTER TABLE {table} FORCE ROW LEVEL SECURITY", OWNED)),
    full(tx("alter table cluster on", Table, "ALTER TABLE {table} CLUSTER ON {idxname}", OWNED)),
    full(tx("alter table set unlogged", Table, "ALTER TABLE {table} SET UNLOGGED", OWNED)),
    full(tx("alter table set storage parameter", Table, "ALTER TABLE {table} SET (fillfactor = 50)", OWNED)),
    full(tx("alter table replica identity", Table, "ALTER TABLE {table} REPLICA IDENTITY FULL", OWNED)),
    tx("alter table rename", Table, "ALTER TABLE {table} RENAME TO s{n}", OWNED),
    full(tx("alter table rename column", Table, "ALTER TABLE {table} RENAME COLUMN {col2} TO s{n}", OWNED)),
    full(tx("alter table set schema", Table, "ALTER TABLE {table} SET SCHEMA public", OWNED)),
    full(tx("alter table set tablespace", Table, "ALTER TABLE {table} SET TABLESPACE pg_default", OWNED)),
    full(tx("alter table inherit", Table, "CREATE TABLE {own}.s{n} (k text); ALTER TABLE {table} INHERIT {own}.s{n}", OWNED)),
    full(tx("alter table of type", Table, "CREATE TYPE {own}.s{n} AS (a int); ALTER TABLE {table} OF {own}.s{n}", OWNED)),
    full(tx("alter table attach partition", Table, "CREATE TABLE {own}.s{n} (LIKE {table}) PARTITION BY LIST (key); ALTER TABLE {own}.s{n} ATTACH PARTITION {table} FOR VALUES IN ('x')", OWNED)),
    full(since(15, tx("alter table set access method", Table, "ALTER TABLE {table} SET ACCESS METHOD heap", OWNED))),
    tx("drop table", Table, "DROP TABLE {table}", OWNED),
    full(tx("drop table cascade", Table, "DROP TABLE {table} CASCADE", OWNED)),
    tx("alter extension drop table", Table, "ALTER EXTENSION {ext} DROP TABLE {table}", OWNED),
    // ---- a table: LOCK, DML, TRUNCATE, COPY ----------------------------------------
    tx("lock table access share", Table, "LOCK TABLE {table} IN ACCESS SHARE MODE", WEAK_LOCK),
    full(tx("lock table row share", Table, "LOCK TABLE {table} IN ROW SHARE MODE", WEAK_LOCK)),
    full(tx("lock table row exclusive", Table, "LOCK TABLE {table} IN ROW EXCLUSIVE MODE", WEAK_LOCK)),
    full(tx("lock table share update exclusive", Table, "LOCK TABLE {table} IN SHARE UPDATE EXCLUSIVE MODE", WEAK_LOCK)),
    tx("lock table share", Table, "LOCK TABLE {table} IN SHARE MODE", GRANTS_APP),
    full(tx("lock table share row exclusive", Table, "LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE", GRANTS_APP)),
    full(tx("lock table exclusive", Table, "LOCK TABLE {table} IN EXCLUSIVE MODE", GRANTS_APP)),
    tx("lock table access exclusive", Table, "LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE", GRANTS_APP),
    tx("select", Table, "SELECT * FROM {table}", WEAK_LOCK),
    full(tx("select for key share", Table, "SELECT * FROM {table} FOR KEY SHARE", Control::Never("a KEY SHARE row lock conflicts with no lease call's (they update no key)"))),
    full(tx("select for share", Table, "SELECT * FROM {table} FOR SHARE", GRANTS_APP)),
    full(tx("select for no key update", Table, "SELECT * FROM {table} FOR NO KEY UPDATE", GRANTS_APP)),
    tx("select for update", Table, "SELECT * FROM {table} FOR UPDATE", GRANTS_APP),
    tx("insert", Table, "INSERT INTO {table} SELECT * FROM {table} ON CONFLICT ({col}) DO UPDATE SET {col2} = EXCLUDED.{col2}", GRANTS_APP),
    tx("update", Table, "UPDATE {table} SET {col2} = {col2}", GRANTS_APP),
    tx("delete", Table, "DELETE FROM {table}", GRANTS_APP),
    since(15, tx("merge", Table, "MERGE INTO {table} AS t USING (SELECT 1) AS s ON true WHEN MATCHED THEN DELETE", GRANTS_APP)),
    tx("truncate", Table, "TRUNCATE {table}", GRANTS_APP),
    full(tx("truncate cascade", Table, "TRUNCATE {table} CASCADE", GRANTS_APP)),
    tx("copy to", Table, "COPY {table} TO STDOUT", WEAK_LOCK),
    // ---- a table: maintenance ---------------------------------------------------------
    auto("vacuum table", Table, "VACUUM {table}", WEAK_LOCK),
    auto("vacuum full table", Table, "VACUUM FULL {table}", OWNED),
    full(auto("vacuum freeze table", Table, "VACUUM (FREEZE) {table}", WEAK_LOCK)),
    auto("analyze table", Table, "ANALYZE {table}", WEAK_LOCK),
    tx("cluster table", Table, "CLUSTER {table} USING {idxname}", OWNED),
    tx("reindex table", Table, "REINDEX TABLE {table}", OWNED),
    full(auto("reindex table concurrently", Table, "REINDEX TABLE CONCURRENTLY {table}", OWNED)),
    // ---- an index ------------------------------------------------------------------------
    tx("alter index depends on extension", Index, "ALTER INDEX {obj} DEPENDS ON EXTENSION plpgsql", V020_APP),
    full(tx("alter index no depends on extension", Index, "ALTER INDEX {obj} NO DEPENDS ON EXTENSION plpgsql", OWNED)),
    tx("alter index rename", Index, "ALTER INDEX {obj} RENAME TO s{n}", OWNED),
    full(tx("alter index set storage parameter", Index, "ALTER INDEX {obj} SET (fillfactor = 50)", OWNED)),
    full(tx("alter index set tablespace", Index, "ALTER INDEX {obj} SET TABLESPACE pg_default", OWNED)),
    full(tx("alter index set statistics", Index, "ALTER INDEX {obj} ALTER COLUMN 1 SET STATISTICS 10", Control::Never("PostgreSQL refuses statistics targets on an index column that is not an expression"))),
    tx("reindex index", Index, "REINDEX INDEX {obj}", OWNED),
    full(auto("reindex index concurrently", Index, "REINDEX INDEX CONCURRENTLY {obj}", OWNED)),
    full(tx("cluster using index", Index, "CLUSTER {table} USING {name}", OWNED)),
    full(tx("alter table replica identity using index", Index, "ALTER TABLE {table} REPLICA IDENTITY USING INDEX {name}", OWNED)),
    tx("comment on index", Index, "COMMENT ON INDEX {obj} IS 's{n}'", OWNED),
    tx("drop index", Index, "DROP INDEX {obj}", OWNED),
    full(auto("drop index concurrently", Index, "DROP INDEX CONCURRENTLY {obj}", REFUSED_BY_POSTGRES)),
    // ---- a row or array type -------------------------------------------------------------
    tx("temp table column of type", Type, "CREATE TEMP TABLE s{n} (x {type})", V020_APP),
    full(tx("temp table of type", Type, "CREATE TEMP TABLE s{n} OF {type}", Control::Never("PostgreSQL makes typed tables only of stand-alone composite types, and the build has none"))),
    tx("function of type", Type, "CREATE FUNCTION {own}.s{n}(x {type}) RETURNS int LANGUAGE sql AS 'SELECT 1'", V020_APP),
    full(tx("domain over type", Type, "CREATE DOMAIN {own}.s{n} AS {type}", V020_APP)),
    full(tx("composite type with type", Type, "CREATE TYPE {own}.s{n} AS (x {type})", V020_APP)),
    tx("cast to type", Type, "SELECT NULL::{type}", Control::Never("a cast takes no lock and leaves nothing behind")),
    tx("alter type rename", Type, "ALTER TYPE {type} RENAME TO s{n}", REFUSED_BY_POSTGRES),
    full(tx("alter type owner", Type, "ALTER TYPE {type} OWNER TO CURRENT_USER", REFUSED_BY_POSTGRES)),
    tx("comment on type", Type, "COMMENT ON TYPE {type} IS 's{n}'", OWNED),
    tx("grant on type", Type, "GRANT USAGE ON TYPE {type} TO pg_monitor", OWNED),
    full(tx("revoke on type", Type, "REVOKE USAGE ON TYPE {type} FROM PUBLIC", OWNED)),
    full(tx("drop type", Type, "DROP TYPE {type} CASCADE", REFUSED_BY_POSTGRES)),
    // ---- a function ------------------------------------------------------------------------
    tx("call", Function, "SELECT {call}", HELPERS_APP),
    tx("call in a cursor", Function, "DECLARE c{n} CURSOR FOR SELECT {call}; FETCH ALL FROM c{n}", HELPERS_APP),
    tx("call in a holdable cursor", Function, "DECLARE c{n} CURSOR WITH HOLD FOR SELECT {call}", HELPERS_APP),
    tx("call in a prepared statement", Function, "PREPARE p{n} AS SELECT {call}; EXECUTE p{n}", HELPERS_APP),
    tx("call in a cte", Function, "WITH w AS MATERIALIZED (SELECT {call}) SELECT * FROM w", HELPERS_APP),
    full(tx("call in explain analyze", Function, "EXPLAIN ANALYZE SELECT {call}", HELPERS_APP)),
    full(tx("call in a do block", Function, "DO $d$ BEGIN PERFORM {call}; END $d$", HELPERS_APP)),
    tx("temp view calling", Function, "CREATE TEMP VIEW s{n} AS SELECT {call}", V020_APP),
    full(tx("function calling", Function, "CREATE FUNCTION {own}.s{n}() RETURNS void LANGUAGE sql BEGIN ATOMIC SELECT {call}; END", V020_APP)),
    tx("alter function owner", Function, "ALTER FUNCTION {obj} OWNER TO CURRENT_USER", GIVE_AWAY),
    tx("alter function security invoker", Function, "ALTER FUNCTION {obj} SECURITY INVOKER", OWNED),
    tx("alter function set search_path", Function, "ALTER FUNCTION {obj} SET search_path = public, pg_catalog", OWNED),
    full(tx("alter function reset all", Function, "ALTER FUNCTION {obj} RESET ALL", OWNED)),
    full(tx("alter function rename", Function, "ALTER FUNCTION {obj} RENAME TO s{n}", OWNED)),
    full(tx("alter function set schema", Function, "ALTER FUNCTION {obj} SET SCHEMA public", OWNED)),
    full(tx("alter function leakproof", Function, "ALTER FUNCTION {obj} LEAKPROOF", Control::Never("only a superuser may mark a function LEAKPROOF"))),
    full(tx("alter function cost", Function, "ALTER FUNCTION {obj} COST 1", OWNED)),
    tx("alter function depends on extension", Function, "ALTER FUNCTION {obj} DEPENDS ON EXTENSION plpgsql", OWNED),
    tx("create or replace function", Function, "CREATE OR REPLACE FUNCTION {fname}({args}) RETURNS {ret} LANGUAGE plpgsql AS $f$ BEGIN {body} END $f$", OWNED),
    tx("comment on function", Function, "COMMENT ON FUNCTION {obj} IS 's{n}'", OWNED),
    full(tx("security label on function", Function, "SECURITY LABEL ON FUNCTION {obj} IS 's{n}'", NO_LABELS)),
    tx("grant execute", Function, "GRANT EXECUTE ON FUNCTION {obj} TO PUBLIC", OWNED),
    tx("revoke execute", Function, "REVOKE EXECUTE ON FUNCTION {obj} FROM PUBLIC", OWNED),
    tx("drop function", Function, "DROP FUNCTION {obj}", REFUSED_BY_POSTGRES),
    tx("alter extension drop function", Function, "ALTER EXTENSION {ext} DROP FUNCTION {obj}", OWNED),
    // ---- a schema --------------------------------------------------------------------------
    tx("create table in schema", Schema, "CREATE TABLE {obj}.s{n} (i int)", OWNED),
    tx("create function in schema", Schema, "CREATE FUNCTION {obj}.acquire(text, text, interval) RETURNS TABLE (acquired boolean, epoch bigint, expires_at timestamptz) LANGUAGE sql AS $f$ SELECT true, 1::bigint, now() $f$", OWNED),
    full(tx("create operator in schema", Schema, "CREATE FUNCTION {own}.s{n}(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT false'; CREATE OPERATOR {obj}.= (LEFTARG = text, RIGHTARG = text, FUNCTION = {own}.s{n})", OWNED)),
    full(tx("create view in schema", Schema, "CREATE VIEW {obj}.s{n} AS SELECT 1 AS one", OWNED)),
    full(tx("create type in schema", Schema, "CREATE TYPE {obj}.s{n} AS (a int)", OWNED)),
    tx("alter schema rename", Schema, "ALTER SCHEMA {obj} RENAME TO s{n}", OWNED),
    tx("alter schema owner", Schema, "ALTER SCHEMA {obj} OWNER TO CURRENT_USER", GIVE_AWAY),
    tx("comment on schema", Schema, "COMMENT ON SCHEMA {obj} IS 's{n}'", OWNED),
    tx("grant on schema", Schema, "GRANT ALL ON SCHEMA {obj} TO PUBLIC", OWNED),
    tx("revoke on schema", Schema, "REVOKE ALL ON SCHEMA {obj} FROM PUBLIC", OWNED),
    full(tx("grant on all tables in schema", Schema, "GRANT ALL ON ALL TABLES IN SCHEMA {obj} TO PUBLIC", OWNED)),
    full(tx("grant on all functions in schema", Schema, "GRANT ALL ON ALL FUNCTIONS IN SCHEMA {obj} TO PUBLIC", OWNED)),
    tx("alter default privileges in schema", Schema, "ALTER DEFAULT PRIVILEGES IN SCHEMA {obj} GRANT ALL ON TABLES TO PUBLIC", Control::Never("it changes the privileges of the role's own future objects only")),
    tx("drop schema cascade", Schema, "DROP SCHEMA {obj} CASCADE", REFUSED_BY_POSTGRES),
    auto("reindex schema", Schema, "REINDEX SCHEMA {obj}", OWNED),
    // ---- a trigger and a constraint of a table ------------------------------------------
    tx("alter trigger rename", Trigger, "ALTER TRIGGER {name} ON {table} RENAME TO s{n}", OWNED),
    tx("alter trigger depends on extension", Trigger, "ALTER TRIGGER {name} ON {table} DEPENDS ON EXTENSION plpgsql", OWNED),
    tx("alter table disable named trigger", Trigger, "ALTER TABLE {table} DISABLE TRIGGER {name}", OWNED),
    full(tx("alter table enable replica trigger", Trigger, "ALTER TABLE {table} ENABLE REPLICA TRIGGER {name}", OWNED)),
    tx("comment on trigger", Trigger, "COMMENT ON TRIGGER {name} ON {table} IS 's{n}'", OWNED),
    tx("drop trigger", Trigger, "DROP TRIGGER {name} ON {table}", OWNED),
    tx("comment on constraint", Constraint, "COMMENT ON CONSTRAINT {name} ON {table} IS 's{n}'", OWNED),
    tx("alter table validate constraint", Constraint, "ALTER TABLE {table} VALIDATE CONSTRAINT {name}", WEAK_LOCK),
    tx("alter table drop constraint", Constraint, "ALTER TABLE {table} DROP CONSTRAINT {name}", OWNED),
    full(tx("alter table rename constraint", Constraint, "ALTER TABLE {table} RENAME CONSTRAINT {name} TO s{n}", OWNED)),
    // ---- the extension ---------------------------------------------------------------------
    tx("alter extension update", Extension, "ALTER EXTENSION {obj} UPDATE", Control::OwnerOnly),
    tx("alter extension add schema", Extension, "CREATE SCHEMA s{n}; ALTER EXTENSION {obj} ADD SCHEMA s{n}", Control::OwnerOnly),
    tx("comment on extension", Extension, "COMMENT ON EXTENSION {obj} IS 's{n}'", Control::OwnerOnly),
    tx("drop extension", Extension, "DROP EXTENSION {obj}", Control::OwnerOnly),
    full(tx("drop extension cascade", Extension, "DROP EXTENSION {obj} CASCADE", Control::OwnerOnly)),
    // ---- the database: statements that reach every table ----------------------------
    auto("vacuum database", Database, "VACUUM", WEAK_LOCK),
    auto("vacuum full database", Database, "VACUUM FULL", Control::OwnerOnly),
    auto("analyze database", Database, "ANALYZE", WEAK_LOCK),
    auto("cluster database", Database, "CLUSTER", Control::Never("it clusters only tables clustered before (by their owner), which the build's never are")),
    auto("reindex database", Database, "REINDEX DATABASE {db}", Control::OwnerOnly),
    full(auto("reindex system", Database, "REINDEX SYSTEM {db}", Control::Never("it locks system catalogs only, which no lease call locks (a session's first write creates its PREPARE guard and waits while a catalog's lock is queued: the owner's REINDEX SYSTEM delays those)"))),
];

/// The generated class: every pg_catalog function of the server with a `regclass` argument,
/// called with a relation's OID (an OID needs no USAGE on its schema).
pub const REGCLASS_FUNCTIONS: &str = "catalog function with a regclass argument, by OID";
