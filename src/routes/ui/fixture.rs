//! `GET /cases/{id}/fixture`: a resolved case as a JSON download that can
//! become a regression test — both deliveries (masked as every view masks
//! them), the decision made, and how a person resolved it.

use actix_web::{HttpResponse, get, web};
use chrono::Utc;

use super::case::parse_id;
use crate::auth::Principal;
use crate::routes::error::UiError;
use crate::services::case_view::{self, CaseView};
use crate::state::AppState;

/// A resolved case as a regression fixture: its deliveries (masked), the
/// decision made, and how a person resolved it.
#[derive(serde::Serialize)]
struct Fixture {
    fixture: &'static str,
    exported_at: chrono::DateTime<Utc>,
    case: CaseView,
}

#[get("/cases/{id}/fixture")]
pub async fn fixture(
    state: web::Data<AppState>,
    id: web::Path<String>,
    _operator: Principal,
) -> Result<HttpResponse, UiError> {
    let id = parse_id(&id)?;
    let view = case_view::show(&state.engine, &state.sources, id).await?;
    if view.status == "open" {
        return Err(UiError::new(
            actix_web::http::StatusCode::CONFLICT,
            "An open case has no resolution to export yet.",
        ));
    }
    let body = serde_json::to_vec_pretty(&Fixture {
        fixture: "unicity-case/1",
        exported_at: Utc::now(),
        case: view,
    })
    .map_err(UiError::internal)?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((
            "Content-Disposition",
            format!("attachment; filename=\"case-{id}.json\""),
        ))
        .insert_header(("Cache-Control", "no-store"))
        .body(body))
}
