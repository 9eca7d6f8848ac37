//! Reading transport links (the `transport_links` projection): the first
//! reception of each transport identity. They are written as the first
//! reception claims them (`projections::deliveries::insert_transport_link`).

use sea_orm::{ConnectionTrait, DbErr, EntityTrait};

use super::entities::transport_link;

/// The link of `transport_key`, if a delivery claimed it.
pub async fn find<C: ConnectionTrait>(
    conn: &C,
    transport_key: &str,
) -> Result<Option<transport_link::Model>, DbErr> {
    transport_link::Entity::find_by_id(transport_key.to_owned())
        .one(conn)
        .await
}
