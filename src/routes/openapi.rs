//! `GET /api/openapi.json`: the OpenAPI 3.1 document of the JSON API, the
//! webhook endpoint and the metrics, generated from the handlers' own
//! annotations (`#[utoipa::path]`) and the types they answer with, so it
//! cannot drift from them silently: a test checks every `/api` route is in
//! it and validates real answers against its schemas.

use actix_web::{HttpResponse, get};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::api::{cases, deliveries};
use super::{health, hooks, metrics};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Unicity",
        description = "Receives webhooks, decides for each delivery whether its business effect must happen, already happened, or cannot be decided safely, and proves it. `/api` is for operators and their tokens (`Authorization: Bearer <token>`, roles in docs/operating.md); `/hooks` for providers, authenticated by each delivery's signature."
    ),
    paths(
        hooks::receive,
        deliveries::list,
        deliveries::show,
        deliveries::raw,
        cases::list,
        cases::show,
        cases::resolve,
        cases::comment,
        cases::lookup,
        metrics::scrape,
        health::healthz,
        health::readyz,
        document,
    ),
    modifiers(&Bearer),
    tags(
        (name = "webhooks", description = "Where providers deliver"),
        (name = "deliveries", description = "What arrived and why it was decided so"),
        (name = "cases", description = "What waits for the provider's API or a person"),
        (name = "watching", description = "Prometheus metrics, liveness and readiness, this document"),
    )
)]
pub struct ApiDoc;

/// The bearer token scheme every `/api` route names.
struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API token (`unicity tokens create`), or a signed-in session's cookie with its CSRF token for state changes",
                    ))
                    .build(),
            ),
        );
    }
}

#[utoipa::path(
    get,
    path = "/api/openapi.json",
    tag = "watching",
    responses((status = 200, description = "This document (OpenAPI 3.1)", content_type = "application/json", body = Object))
)]
#[get("/api/openapi.json")]
pub async fn document() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(
        ApiDoc::openapi()
            .to_json()
            .unwrap_or_else(|_| "{}".to_owned()),
    )
}
