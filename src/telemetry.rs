//! Log set-up: one line per event, structured fields, sqlx kept quiet; and
//! the span every request's lines carry.
//!
//! What must stay true: a request's span names its path, never its query
//! string (a provider may put a token there), and a path segment the route
//! names as a secret (`/setup/{token}`) is logged as `[redacted]`.

use actix_web::HttpMessage;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use tracing::Span;
use tracing_actix_web::{DefaultRootSpanBuilder, RequestId, RootSpanBuilder};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

use crate::domain::delivery::REDACTED;
use crate::domain::masking::is_secret_name;

/// How log lines are written: `text` for a person at a terminal, `json`
/// (one object per line, with the request's span fields) for a collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// Text on a terminal, JSON otherwise (a service manager, a container).
    pub fn for_stderr() -> Self {
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            Self::Text
        } else {
            Self::Json
        }
    }
}

/// Installs the global subscriber on standard error, in `format` (by
/// default, see `LogFormat::for_stderr`); `RUST_LOG` overrides the default
/// filter. Standard output is left to what a command prints (a report, a
/// JSON document), so that logs never mix into it.
pub fn init(format: Option<LogFormat>) {
    let format = format.unwrap_or_else(LogFormat::for_stderr);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    init_with(std::io::stderr, ansi, format);
}

/// Installs the global subscriber, writing to `writer` (tests read the lines
/// back). A second call leaves the first subscriber in place.
pub fn init_with<W>(writer: W, ansi: bool, format: LogFormat)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,sea_orm=warn,sea_orm_migration=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(writer);
    let _ = match format {
        LogFormat::Text => builder.with_ansi(ansi).try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}

/// The span of one request: method, route, path (see [`logged_target`]),
/// client, request id, then the status and any error message.
pub struct RequestSpan;

impl RootSpanBuilder for RequestSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        // The route and the path as the router sees them (percent-decoded),
        // so that `/p%61ssword/{token}` is redacted as `/password/{token}`.
        let route = crate::routes::access::routed_pattern(request);
        let target = logged_target(request.match_info().as_str(), route.as_deref());
        let request_id = request
            .extensions()
            .get::<RequestId>()
            .map(ToString::to_string)
            .unwrap_or_default();
        // Forwarding headers are believed from a trusted proxy only, as for
        // throttling (`routes::client`).
        let client = crate::routes::client::address(request.request())
            .map(|ip| ip.to_string())
            .unwrap_or_default();
        tracing::info_span!(
            "HTTP request",
            http.method = %request.method(),
            http.route = route.as_deref().unwrap_or("default"),
            http.target = %target,
            http.client_ip = %client,
            request_id = %request_id,
            http.status_code = tracing::field::Empty,
            exception.message = tracing::field::Empty,
        )
    }

    fn on_request_end<B: MessageBody>(
        span: Span,
        outcome: &Result<ServiceResponse<B>, actix_web::Error>,
    ) {
        // Records the status and the error's message; fields this span does
        // not declare (the error's `Debug` form) are dropped.
        DefaultRootSpanBuilder::on_request_end(span, outcome);
    }
}

/// The path as logged: without its query string (never passed in), each
/// segment the route pattern names as a secret replaced by `[redacted]`.
pub fn logged_target(path: &str, route: Option<&str>) -> String {
    let Some(route) = route else {
        return path.to_owned();
    };
    let names: Vec<&str> = route.split('/').collect();
    let segments: Vec<&str> = path.split('/').collect();
    if names.len() != segments.len() {
        // Not the route's shape: nothing to line up, nothing kept of a path
        // whose route names a secret.
        return if names.iter().any(|name| secret_param(name).is_some()) {
            REDACTED.to_owned()
        } else {
            path.to_owned()
        };
    }
    names
        .iter()
        .zip(&segments)
        .map(|(name, segment)| match secret_param(name) {
            Some(_) => REDACTED,
            None => segment,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The name of the route segment `name` (`{token}`) when it names a secret.
fn secret_param(name: &str) -> Option<&str> {
    name.strip_prefix('{')
        .and_then(|n| n.strip_suffix('}'))
        .map(|n| n.split(':').next().unwrap_or(n))
        .filter(|n| is_secret_name(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_path_segment_is_redacted_and_others_kept() {
        assert_eq!(
            logged_target("/setup/abc123", Some("/setup/{token}")),
            "/setup/[redacted]"
        );
        assert_eq!(
            logged_target("/cases/0193-a/resolve", Some("/cases/{id}/resolve")),
            "/cases/0193-a/resolve"
        );
        assert_eq!(logged_target("/nowhere", None), "/nowhere");
        assert_eq!(
            logged_target("/setup/abc/123", Some("/setup/{token}")),
            "[redacted]"
        );
    }

    #[test]
    fn every_one_time_link_of_the_route_table_is_logged_redacted() {
        let links: Vec<&str> = crate::routes::TABLE
            .iter()
            .map(|r| r.path)
            .filter(|p| p.contains("{token}"))
            .collect();
        assert!(links.contains(&"/password/{token}"), "{links:?}");
        for route in links {
            let path = route.replace("{token}", "5243f5835e13");
            let logged = logged_target(&path, Some(route));
            assert!(!logged.contains("5243f5835e13"), "{logged}");
        }
    }
}
