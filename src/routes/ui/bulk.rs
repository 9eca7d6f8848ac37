//! `POST /cases/resolve-many`: engineers and admins resolve the non-money
//! cases ticked on the queue the same way, with one note for all (each case
//! through the one resolution path, so each resolves once). Money cases are
//! never resolved in bulk; the queue says how many were left for that.

use std::collections::HashMap;

use actix_web::{HttpResponse, post, web};
use uuid::Uuid;

use super::csrf::CsrfForm;
use super::see_other;
use crate::auth::Principal;
use crate::domain::cases::Resolution;
use crate::routes::error::UiError;
use crate::services::cases::{self, CaseError};
use crate::state::AppState;

/// The ticked boxes are `case=<id>`; the form also holds `resolution`,
/// `note` and `csrf`.
#[post("/cases/resolve-many")]
pub async fn resolve_many(
    state: web::Data<AppState>,
    operator: Principal,
    form: CsrfForm<Vec<(String, String)>>,
) -> Result<HttpResponse, UiError> {
    let fields = form.0;
    let one: HashMap<&str, &str> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let case_ids: Vec<Uuid> = fields
        .iter()
        .filter(|(k, _)| k == "case")
        .filter_map(|(_, v)| v.parse().ok())
        .collect();
    if case_ids.is_empty() {
        return Ok(see_other("/cases?bulk=none"));
    }
    let Some(resolution) = one.get("resolution").and_then(|r| Resolution::parse(r)) else {
        return Ok(see_other("/cases?bulk=unknown_resolution"));
    };
    let note = one.get("note").copied().unwrap_or_default();
    match cases::resolve_many(&state.engine, &case_ids, resolution, &operator, note).await {
        Ok(bulk) => Ok(see_other(&format!(
            "/cases?bulk=done&resolved={}&money={}&already={}&refused={}",
            bulk.resolved, bulk.money, bulk.already, bulk.refused
        ))),
        Err(CaseError::Refused(refusal)) => {
            Ok(see_other(&format!("/cases?bulk={}", refusal.code())))
        }
        Err(error) => Err(error.into()),
    }
}
