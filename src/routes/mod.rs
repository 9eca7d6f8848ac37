//! HTTP only: extract, call a service, respond. `routes!` below is the one
//! list of routes: it mounts each handler and gives it its row of access
//! (`TABLE`), which the access guard (`access`) enforces with the role ×
//! action table. A route cannot be mounted without its row.

pub mod access;
pub mod api;
pub mod client;
pub mod error;
pub mod health;
pub mod hooks;
pub mod metrics;
mod nul;
pub mod openapi;
pub mod ui;

use actix_web::http::Method;

use crate::auth::Action;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone (probes, the login and setup pages, static files). Forms there
    /// still need the session's CSRF token; the setup page its link's token.
    Public,
    /// Providers, authenticated by the signature of each delivery.
    Signed,
    /// An operator or API token whose role allows the action.
    Requires(Action),
}

/// One mounted route and who may call it.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
}

macro_rules! routes {
    ($($method:ident $path:literal => $service:path, $access:expr;)*) => {
        /// Every route of the application and who may call it.
        pub const TABLE: &[Route] = &[
            $(Route { method: stringify!($method), path: $path, access: $access },)*
        ];

        /// Mounts every route of `TABLE`.
        pub fn configure(cfg: &mut actix_web::web::ServiceConfig) {
            $(cfg.service($service);)*
        }
    };
}

use Access::{Public, Requires, Signed};

routes! {
    GET "/healthz" => health::healthz, Public;
    GET "/readyz" => health::readyz, Public;
    GET "/metrics" => metrics::scrape, Requires(Action::ReadMetrics);
    GET "/api/openapi.json" => openapi::document, Public;
    POST "/hooks/{source}" => hooks::receive, Signed;
    GET "/api/deliveries" => api::deliveries::list, Requires(Action::ReadDeliveries);
    GET "/api/deliveries/{id}" => api::deliveries::show, Requires(Action::ReadDeliveries);
    GET "/api/deliveries/{id}/raw" => api::deliveries::raw, Requires(Action::ReadRawBodies);
    GET "/api/cases" => api::cases::list, Requires(Action::ReadDeliveries);
    GET "/api/cases/{id}" => api::cases::show, Requires(Action::ReadDeliveries);
    POST "/api/cases/{id}/resolve" => api::cases::resolve, Requires(Action::ResolveSomeCases);
    POST "/api/cases/{id}/comments" => api::cases::comment, Requires(Action::CommentCases);
    POST "/api/cases/{id}/lookup" => api::cases::lookup, Requires(Action::ResolveSomeCases);
    GET "/" => ui::home::show, Requires(Action::ReadDeliveries);
    GET "/deliveries" => ui::deliveries::list, Requires(Action::ReadDeliveries);
    GET "/deliveries/{id}" => ui::deliveries::show, Requires(Action::ReadDeliveries);
    GET "/static/{file}" => ui::assets::file, Public;
    GET "/login" => ui::login::show, Public;
    POST "/login" => ui::login::submit, Public;
    POST "/logout" => ui::login::logout, Requires(Action::OwnAccount);
    GET "/setup/{token}" => ui::setup::show, Public;
    POST "/setup/{token}" => ui::setup::submit, Public;
    GET "/account" => ui::account::show, Requires(Action::OwnAccount);
    POST "/account/password" => ui::account::change_password, Requires(Action::OwnAccount);
    GET "/audit" => ui::audit::show, Requires(Action::ReadAudit);
    GET "/admin" => ui::admin::show, Requires(Action::ManageOperators);
    POST "/admin/operators" => ui::admin_forms::add_operator, Requires(Action::ManageOperators);
    POST "/admin/operators/role" => ui::admin_forms::change_role, Requires(Action::ManageOperators);
    POST "/admin/operators/disable" => ui::admin_forms::disable_operator, Requires(Action::ManageOperators);
    POST "/admin/operators/link" => ui::admin_forms::password_link, Requires(Action::ManageOperators);
    POST "/admin/tokens" => ui::admin_forms::issue_token, Requires(Action::ManageTokens);
    POST "/admin/tokens/revoke" => ui::admin_forms::revoke_token, Requires(Action::ManageTokens);
    GET "/password/{token}" => ui::password::show, Public;
    POST "/password/{token}" => ui::password::submit, Public;
    GET "/cases" => ui::cases::list, Requires(Action::ReadDeliveries);
    POST "/cases/resolve-many" => ui::bulk::resolve_many, Requires(Action::ResolveCases);
    GET "/cases/{id}" => ui::case::show, Requires(Action::ReadDeliveries);
    GET "/cases/{id}/fixture" => ui::fixture::fixture, Requires(Action::ExportFixtures);
    POST "/cases/{id}/resolve" => ui::case_forms::resolve, Requires(Action::ResolveSomeCases);
    POST "/cases/{id}/comments" => ui::case_forms::comment, Requires(Action::CommentCases);
    POST "/cases/{id}/assign" => ui::case_forms::assign, Requires(Action::CommentCases);
    POST "/cases/{id}/lookup" => ui::case_forms::lookup, Requires(Action::ResolveSomeCases);
    GET "/dashboard" => ui::dashboard::show, Requires(Action::ReadDeliveries);
    GET "/strategies" => ui::strategies::show, Requires(Action::ViewStrategies);
    POST "/strategies/replay" => ui::replay::replay, Requires(Action::Replay);
    GET "/strategies/fields" => ui::fields::show, Requires(Action::ViewStrategies);
    GET "/strategies/observe" => ui::observed::show, Requires(Action::ViewStrategies);
    POST "/dashboard/breakers/reset" => ui::dashboard::reset, Requires(Action::ResetBreakers);
}

/// The row of a request's method and matched pattern.
pub fn row(method: &Method, pattern: &str) -> Option<&'static Route> {
    TABLE
        .iter()
        .find(|r| r.path == pattern && r.method == method.as_str())
}
