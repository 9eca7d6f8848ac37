//! `GET /cases/{id}/fixture`: a resolved case as a regression fixture file
//! (`unicity-fixture/1`, see `domain::fixture`) to drop into a folder that
//! `cargo test` or `unicity fixtures check` replays. The export is
//! journaled with who asked for it.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, web};

use super::case::parse_id;
use crate::auth::Principal;
use crate::routes::error::UiError;
use crate::services::fixtures::{self, ExportError};
use crate::state::AppState;

#[get("/cases/{id}/fixture")]
pub async fn fixture(
    state: web::Data<AppState>,
    id: web::Path<String>,
    operator: Principal,
) -> Result<HttpResponse, UiError> {
    let id = parse_id(&id)?;
    // Each source's header mask as configured now, as the delivery page applies it.
    let masks = state
        .sources
        .iter()
        .map(|(slug, source)| (slug.clone(), source.header_mask.clone()))
        .collect();
    crate::services::projector::before_reading(&state.engine).await;
    let exported = fixtures::export(&state.engine, &masks, id, &operator)
        .await
        .map_err(|error| match error {
            ExportError::NotFound => UiError::new(StatusCode::NOT_FOUND, "There is no such case."),
            ExportError::NoLongerAllowed => UiError::forbidden(),
            ExportError::Db(error) => UiError::internal(error),
            refused => UiError::new(StatusCode::CONFLICT, refused.to_string()),
        })?;
    let mut body = serde_json::to_vec_pretty(&exported).map_err(UiError::internal)?;
    body.push(b'\n');
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((
            "Content-Disposition",
            format!("attachment; filename=\"case-{id}.json\""),
        ))
        .insert_header(("Cache-Control", "no-store"))
        .body(body))
}
