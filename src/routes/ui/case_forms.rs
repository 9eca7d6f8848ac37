//! The case page's forms: `POST /cases/{id}/resolve`, `/comments` and
//! `/lookup`, each checked for the session's CSRF token, then answered with
//! a `303` back to the case page and a fixed notice (`case_page::notice`).
//!
//! A case resolves once: the resolution form carries a one-time token,
//! consumed before the service is called, so the same form posted twice
//! lands on the case page saying it was already submitted; two operators'
//! forms at once meet the service's atomic claim, and the second lands on
//! the resolved case. Neither applies a second effect.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, post, web};
use serde::Deserialize;
use uuid::Uuid;

use super::case::parse_id;
use super::csrf::CsrfForm;
use super::see_other;
use crate::auth::{Principal, PrincipalKind};
use crate::domain::cases::{Refusal, Resolution};
use crate::routes::error::UiError;
use crate::services::cases::{self, CaseError, Resolve};
use crate::services::lookups;
use crate::state::AppState;

/// Back to the case page, saying what happened.
fn back(id: Uuid, done: &str) -> HttpResponse {
    see_other(&format!("/cases/{id}?done={done}"))
}

/// A refusal the page explains, or the error page for anything else.
fn refused(id: Uuid, error: CaseError) -> Result<HttpResponse, UiError> {
    match error {
        CaseError::Refused(refusal) => Ok(back(id, refusal.code())),
        other => Err(other.into()),
    }
}

#[derive(Deserialize)]
pub struct ResolveForm {
    form_token: String,
    #[serde(default)]
    resolution: String,
    note: String,
    #[serde(default)]
    authoritative_ref: String,
}

#[post("/cases/{id}/resolve")]
pub async fn resolve(
    state: web::Data<AppState>,
    operator: Principal,
    id: web::Path<String>,
    form: CsrfForm<ResolveForm>,
) -> Result<HttpResponse, UiError> {
    let id = parse_id(&id)?;
    let form = form.0;
    if !cases::may_resolve(&state.engine, &operator, id).await?
        || operator.kind != PrincipalKind::Operator
    {
        return Err(UiError::new(
            StatusCode::FORBIDDEN,
            "Your role cannot resolve this case.",
        ));
    }
    let Some(resolution) = Resolution::parse(&form.resolution) else {
        return Ok(back(id, "unknown_resolution"));
    };
    // Refused before the token is spent: the operator corrects the form.
    if form.note.trim().is_empty() {
        return Ok(back(id, Refusal::NoteRequired.code()));
    }
    let fresh = cases::consume_form_token(&state.engine, id, operator.id, &form.form_token)
        .await
        .map_err(UiError::internal)?;
    if !fresh {
        return Ok(back(id, "used"));
    }
    let authoritative_ref =
        Some(form.authoritative_ref.trim().to_owned()).filter(|r| !r.is_empty());
    let resolved = cases::resolve(
        &state.engine,
        Resolve {
            case_id: id,
            resolution,
            by: operator,
            note: form.note,
            authoritative_ref,
        },
    )
    .await;
    match resolved {
        Ok(_) => Ok(back(id, "resolved")),
        Err(error) => refused(id, error),
    }
}

#[derive(Deserialize)]
pub struct CommentForm {
    note: String,
}

#[post("/cases/{id}/comments")]
pub async fn comment(
    state: web::Data<AppState>,
    operator: Principal,
    id: web::Path<String>,
    form: CsrfForm<CommentForm>,
) -> Result<HttpResponse, UiError> {
    let id = parse_id(&id)?;
    match cases::comment(&state.engine, id, &operator, form.0.note).await {
        Ok(()) => Ok(back(id, "commented")),
        Err(CaseError::Refused(Refusal::NoteRequired)) => Ok(back(id, "comment_empty")),
        Err(error) => refused(id, error),
    }
}

/// Only the CSRF token: the look-up asks nothing of the operator.
#[derive(Deserialize)]
pub struct LookupForm {}

#[post("/cases/{id}/lookup")]
pub async fn lookup(
    state: web::Data<AppState>,
    id: web::Path<String>,
    operator: Principal,
    _form: CsrfForm<LookupForm>,
) -> Result<HttpResponse, UiError> {
    let id = parse_id(&id)?;
    match lookups::ask(&state.engine, id, Some(&operator)).await {
        Ok(Some(asked)) if !asked.asked => Ok(back(id, "not_asked_breaker")),
        Ok(Some(asked)) if asked.verdict == "for_a_person" => Ok(back(id, "asked_unsettled")),
        Ok(Some(_)) => Ok(back(id, "asked_settled")),
        Ok(None) => Ok(back(id, "not_asked")),
        Err(error) => refused(id, error),
    }
}

#[derive(Deserialize)]
pub struct AssignForm {
    #[serde(default)]
    assignee: String,
}

/// Gives the case to the operator named (nobody when empty).
#[post("/cases/{id}/assign")]
pub async fn assign(
    state: web::Data<AppState>,
    operator: Principal,
    id: web::Path<String>,
    form: CsrfForm<AssignForm>,
) -> Result<HttpResponse, UiError> {
    let id = super::case::parse_id(&id)?;
    let name = form.0.assignee.trim().to_owned();
    let assignee = (!name.is_empty()).then_some(name.as_str());
    match cases::assign(&state.engine, id, assignee, &operator).await {
        Ok(()) => Ok(back(id, "assigned")),
        Err(CaseError::Refused(Refusal::AlreadyResolved)) => Ok(back(id, "assign_resolved")),
        Err(error) => refused(id, error),
    }
}
