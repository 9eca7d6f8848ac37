//! HTML routes: one askama page struct per template (`templates/`, paths
//! mirroring these modules), plain forms that work without JavaScript, each
//! carrying the session's CSRF token (`csrf`).

pub mod account;
pub mod admin;
pub mod admin_forms;
pub mod assets;
pub mod audit;
pub mod bulk;
pub mod case;
pub mod case_forms;
pub mod case_page;
pub mod cases;
pub mod charts;
pub mod csrf;
pub mod dashboard;
pub mod deliveries;
pub mod delivery_page;
pub mod fields;
pub mod fixture;
pub mod format;
pub mod home;
pub mod login;
pub mod next;
pub mod observed;
pub mod password;
pub mod replay;
pub mod setup;
pub mod strategies;

use actix_web::HttpResponse;
use actix_web::HttpResponseBuilder;
use askama::Template;

/// `templates/error.html`: what went wrong, for people.
#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage<'a> {
    pub status: u16,
    pub reason: &'a str,
    pub message: &'a str,
}

/// Renders `page` as the body of `response`.
pub fn html(mut response: HttpResponseBuilder, page: &impl Template) -> HttpResponse {
    match page.render() {
        Ok(body) => response
            .content_type("text/html; charset=utf-8")
            .insert_header(("Cache-Control", "no-store"))
            .body(body),
        Err(error) => {
            tracing::error!(%error, "template failed");
            HttpResponse::InternalServerError()
                .content_type("text/plain; charset=utf-8")
                .body("Unicity could not render this page.")
        }
    }
}

/// A `303 See Other` to `location` (after a form post).
pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header(("Location", location))
        .finish()
}
