//! Reading cases (the `cases` projection).

use sea_orm::{ConnectionTrait, DbErr, EntityTrait};

use super::entities::case;

/// The case `case_id`, if there is one.
pub async fn find<C: ConnectionTrait>(
    conn: &C,
    case_id: uuid::Uuid,
) -> Result<Option<case::Model>, DbErr> {
    case::Entity::find_by_id(case_id.to_string())
        .one(conn)
        .await
}
