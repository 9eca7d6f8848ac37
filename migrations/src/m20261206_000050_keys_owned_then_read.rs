//! PostgreSQL: a group-commit batch owns its keys and reads their rows in one
//! round trip instead of three. The batch's advisory locks (the protocol every
//! process shares: a shared hold on one lock, then one lock per key hash, in
//! the order given) are taken first; the rows are read after, by a statement
//! of their own, so its snapshot is taken once the locks are held and it sees
//! what any batch that held one of them committed. That is why this is a
//! function (PL/pgSQL, `VOLATILE`: each of its statements takes a fresh
//! snapshot) and not one query: a single statement's snapshot is taken before
//! its locks, and would miss a claim committed while it waited.
//!
//! The rows come back as JSON (`row_to_json` of each table's rows), so the
//! function keeps up with columns added to either table. The lock numbers are
//! arguments: the protocol is defined in one place, by the writer. SQLite
//! needs none of this: a batch's `IMMEDIATE` transaction owns the database.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const POSTGRES: &[&str] = &[r"
CREATE FUNCTION unicity_own_keys_then_read(
    any_class integer,
    any_key integer,
    key_class integer,
    key_hashes integer[],
    transport_keys text[],
    business_keys text[]
) RETURNS text
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    hash integer;
BEGIN
    IF cardinality(key_hashes) > 0 THEN
        PERFORM pg_advisory_xact_lock_shared(any_class, any_key);
        FOREACH hash IN ARRAY key_hashes LOOP
            PERFORM pg_advisory_xact_lock(key_class, hash);
        END LOOP;
    END IF;
    RETURN json_build_object(
        'links', (SELECT coalesce(json_agg(l), '[]') FROM transport_links l
                  WHERE l.transport_key = ANY (transport_keys)),
        'effects', (SELECT coalesce(json_agg(e), '[]') FROM effects e
                    WHERE e.key = ANY (business_keys))
    )::text;
END
$$"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, &[], POSTGRES).await
    }
}
