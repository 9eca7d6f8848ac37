//! `GET /cases/{id}`: one case, everything needed to decide it — the
//! delivery and its reference side by side, the field-level diff, the effect
//! it is about, its history — and the forms that act on it, shown only to
//! those whose role allows them (the server checks again on every post).
//! What the page shows is built by `case_page`.

use actix_session::Session;
use actix_web::{HttpResponse, get, web};
use serde::Deserialize;
use uuid::Uuid;

use super::case_page::{Forms, notice, page};
use super::format::Nav;
use super::html;
use crate::auth::{Action, Principal, PrincipalKind};
use crate::routes::error::UiError;
use crate::services::case_view;
use crate::services::{cases, lookups};
use crate::state::AppState;

/// `?done=…` after a post: what happened, in a fixed sentence (nothing from
/// the request is echoed).
#[derive(Deserialize)]
pub struct Done {
    done: Option<String>,
}

pub(super) fn parse_id(id: &str) -> Result<Uuid, UiError> {
    id.parse().map_err(|_| {
        UiError::new(
            actix_web::http::StatusCode::NOT_FOUND,
            "There is no such case.",
        )
    })
}

#[get("/cases/{id}")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
    id: web::Path<String>,
    done: web::Query<Done>,
) -> Result<HttpResponse, UiError> {
    let id = parse_id(&id)?;
    let view = case_view::show(&state.engine, &state.sources, id).await?;
    let open = view.status == "open";
    let may_resolve = operator.may(cases::resolving(view.critical));
    let form_token = if open && may_resolve && operator.kind == PrincipalKind::Operator {
        Some(
            cases::form_token(&state.engine, id, operator.id)
                .await
                .map_err(UiError::internal)?,
        )
    } else {
        None
    };
    let cannot_resolve = match (open, may_resolve, view.critical) {
        (true, false, true) => Some(
            "Only finance or an admin can resolve this case: it decides about money (a critical effect).",
        ),
        (true, false, false) => Some("Only an engineer or an admin can resolve this case."),
        _ => None,
    };
    let can_look_up = open
        && operator.may(Action::ResolveSomeCases)
        && lookups::available(&state.engine, id).await?;
    // A delivery held as made by hand replays as nothing made by hand.
    let replayable = view.reason != crate::domain::decision::Reason::MadeByHand.as_str();
    let fixture = (!open && replayable && operator.may(Action::ExportFixtures))
        .then(|| format!("/cases/{id}/fixture"));
    // Held, or looking like an operation made by hand: the form says the
    // reference is required, as the resolution will.
    let cite_required = form_token.is_some()
        && (view.reason == crate::domain::decision::Reason::MadeByHand.as_str()
            || match view.delivery.as_ref() {
                Some(delivery) => cases::held(&state.engine, delivery.delivery_id)
                    .await
                    .map_err(UiError::internal)?,
                None => false,
            });
    let assignable = if open && operator.may(Action::CommentCases) {
        crate::services::access::operators(state.db())
            .await?
            .into_iter()
            .filter(|o| o.enabled)
            .map(|o| o.name)
            .collect()
    } else {
        Vec::new()
    };
    let page = page(
        view,
        Nav::new(&session, &operator, "cases")?,
        Forms {
            notice: done.done.as_deref().and_then(notice),
            assignable,
            form_token,
            cannot_resolve,
            can_comment: operator.may(Action::CommentCases),
            can_look_up,
            fixture,
            cite_required,
        },
    );
    Ok(html(HttpResponse::Ok(), &page))
}
