//! `/api/cases`: the ambiguity queue, one case beside its reference delivery,
//! and resolving or commenting on a case. Money cases are resolved by finance
//! or an admin only: the route admits whoever may resolve some case, the
//! handler asks the role table for this case's kind.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, post, web};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::Principal;
use crate::domain::cases::{Refusal, Resolution};
use crate::routes::error::ApiError;
use crate::services::case_view;
use crate::services::cases::{self, CaseError, Resolve};
use crate::services::lookups;
use crate::services::queue::{self, CaseFilter, CaseRow, QueueFilter};
use crate::state::AppState;

const DEFAULT_PAGE: u64 = 50;
const MAX_PAGE: u64 = 200;

/// `GET /api/cases` query: the queue's filters and page.
#[derive(Debug, Default, Deserialize)]
pub struct QueueQuery {
    status: Option<String>,
    reason: Option<String>,
    source: Option<String>,
    provider: Option<String>,
    event_type: Option<String>,
    /// Only cases about this effect type (`refund.create`).
    effect_type: Option<String>,
    /// Only critical (money) cases (`true`), or only the others (`false`).
    critical: Option<bool>,
    /// Only cases older than this many seconds.
    older_than_secs: Option<i64>,
    limit: Option<u64>,
    offset: Option<u64>,
}

/// A page of the queue.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueBody {
    cases: Vec<CaseRow>,
    /// Cases of the listed status per reason (all pages).
    counts: Vec<ReasonCount>,
    next_offset: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ReasonCount {
    reason: String,
    cases: i64,
}

#[utoipa::path(
    get,
    path = "/api/cases",
    tag = "cases",
    params(
        ("status" = Option<String>, Query, description = "open (default), resolved or all"),
        ("reason" = Option<String>, Query, description = "Only this reason"),
        ("source" = Option<String>, Query, description = "Only this source"),
        ("provider" = Option<String>, Query, description = "Only this provider"),
        ("event_type" = Option<String>, Query, description = "Only this event type"),
        ("effect_type" = Option<String>, Query, description = "Only cases about this effect type"),
        ("critical" = Option<bool>, Query, description = "Only money cases (true), or only the others (false)"),
        ("older_than_secs" = Option<i64>, Query, description = "Only cases opened longer ago than this many seconds (0 to 3153600000; else `invalid_older_than_secs`)"),
        ("limit" = Option<u32>, Query, description = "At most 200 (default 50)"),
        ("offset" = Option<u32>, Query, description = "Where the page starts"),
    ),
    responses(
        (status = 200, description = "Cases oldest first, with the counts per reason", body = QueueBody),
        (status = 400, description = "An age out of range (`invalid_older_than_secs`)", body = ApiError),
        (status = 401, description = "No live bearer token or session (`unauthenticated`)", body = ApiError), (status = 403, description = "The caller's role does not allow it (`forbidden`); a session without its CSRF token (`csrf`)", body = ApiError), (status = 503, description = "The database does not answer (`storage_unavailable`)", body = ApiError),
    ),
    security(("bearer" = []))
)]
#[get("/api/cases")]
pub async fn list(
    state: web::Data<AppState>,
    query: web::Query<QueueQuery>,
    _caller: Principal,
) -> Result<HttpResponse, ApiError> {
    let query = query.into_inner();
    let limit = query.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let offset = query.offset.unwrap_or(0);
    let status = query.status.unwrap_or_else(|| "open".to_owned());
    let opened_before = match query.older_than_secs {
        None => None,
        Some(secs) => Some(opened_before(secs).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_older_than_secs",
                "older_than_secs is a number of seconds from 0 to 3153600000 (a century)",
            )
        })?),
    };
    let filter = CaseFilter {
        queue: QueueFilter {
            status: Some(status),
            reason: query.reason,
            source: query.source,
            provider: query.provider,
            event_type: query.event_type,
            opened_before,
            assignee: None,
            keys: None,
        },
        effect_type: query.effect_type,
        critical: query.critical,
    };
    let page = queue::queue(&state.engine, &filter, limit, offset)
        .await
        .map_err(case_error)?;
    Ok(HttpResponse::Ok().json(QueueBody {
        cases: page.cases,
        counts: page
            .counts
            .into_iter()
            .map(|(reason, cases)| ReasonCount { reason, cases })
            .collect(),
        next_offset: page.next_offset,
    }))
}

/// The moment `secs` ago, for an age from none to a century.
fn opened_before(secs: i64) -> Option<chrono::DateTime<chrono::Utc>> {
    const CENTURY: i64 = 100 * 365 * 24 * 3600;
    (0..=CENTURY)
        .contains(&secs)
        .then(|| chrono::Utc::now() - chrono::Duration::seconds(secs))
}

#[utoipa::path(
    get,
    path = "/api/cases/{id}",
    tag = "cases",
    params(("id" = String, Path, description = "The case id (a UUID)")),
    responses(
        (status = 200, description = "The case beside its reference delivery, the field-level changes, figures, effects and history", body = crate::services::case_view::CaseView),
        (status = 400, description = "Not a UUID (`invalid_case_id`)", body = ApiError),
        (status = 404, description = "No such case (`case_not_found`)", body = ApiError),
        (status = 401, description = "No live bearer token or session (`unauthenticated`)", body = ApiError), (status = 403, description = "The caller's role does not allow it (`forbidden`); a session without its CSRF token (`csrf`)", body = ApiError), (status = 503, description = "The database does not answer (`storage_unavailable`)", body = ApiError),
    ),
    security(("bearer" = []))
)]
#[get("/api/cases/{id}")]
pub async fn show(
    state: web::Data<AppState>,
    id: web::Path<String>,
    _caller: Principal,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&id)?;
    let view = case_view::show(&state.engine, &state.sources, id)
        .await
        .map_err(case_error)?;
    Ok(HttpResponse::Ok().json(view))
}

/// `POST /api/cases/{id}/resolve` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ResolveBody {
    resolution: String,
    note: String,
    authoritative_ref: Option<String>,
}

/// How the case ended: the effect applied (processed as distinct) or
/// confirmed (a duplicate), and the key it was applied under.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResolvedBody {
    case_id: Uuid,
    resolution: Resolution,
    effect_id: Option<Uuid>,
    key: Option<String>,
}

#[utoipa::path(
    post,
    path = "/api/cases/{id}/resolve",
    tag = "cases",
    params(("id" = String, Path, description = "The case id (a UUID)")),
    request_body = ResolveBody,
    responses(
        (status = 200, description = "Resolved: the effect applied or confirmed", body = ResolvedBody),
        (status = 400, description = "An unknown resolution (`invalid_resolution`), a note missing (`note_required`), an `authoritative_ref` longer than an operation id's 200 characters (`reference_too_long`) or holding anything but printable ASCII (`reference_not_an_id`: a zero-width space, a look-alike letter, a space inside), or not a UUID (`invalid_case_id`)", body = ApiError),
        (status = 403, description = "The role may not resolve this case (`forbidden`: money cases are finance's or an admin's), or a session without its CSRF token (`csrf`)", body = ApiError),
        (status = 404, description = "No such case (`case_not_found`)", body = ApiError),
        (status = 409, description = "`case_already_resolved`, `outcome_unknown`, `nothing_to_apply`, `nothing_to_confirm`, `operation_consumed` (the operation cited justified another effect), `cite_an_operation` (another case under the key was processed as distinct citing none), `close_only` (a reconciliation finding is only closed), `not_a_missing_effect` (only a missing effect is made by hand), `cite_the_operation` (a delivery that looks like an operation made by hand is processed as distinct only citing its operation), `operation_paid` (made by hand while an effect stands for the operation or looks like it), `read_model_behind` (try again), `look_alike_arrived` (a delivery like the operation came while it was recorded: look at it, then try again), `nothing_to_hold_by` (its operation has no resource, amount and currency)", body = ApiError),
        (status = 401, description = "No live bearer token or session (`unauthenticated`)", body = ApiError), (status = 503, description = "The database does not answer (`storage_unavailable`)", body = ApiError),
    ),
    security(("bearer" = []))
)]
#[post("/api/cases/{id}/resolve")]
pub async fn resolve(
    state: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<ResolveBody>,
    caller: Principal,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&id)?;
    let body = body.into_inner();
    let resolution = Resolution::parse(&body.resolution).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_resolution",
            "resolution is process_as_distinct, confirm_duplicate, reject or made_by_hand",
        )
    })?;
    let resolved = cases::resolve(
        &state.engine,
        Resolve {
            case_id: id,
            resolution,
            by: caller,
            note: body.note,
            authoritative_ref: body.authoritative_ref,
        },
    )
    .await
    .map_err(case_error)?;
    Ok(HttpResponse::Ok().json(ResolvedBody {
        case_id: resolved.case_id,
        resolution: resolved.resolution,
        effect_id: resolved.effect_id,
        key: resolved.key,
    }))
}

/// What asking the provider (or the downstream) came to.
#[derive(Debug, Serialize, ToSchema)]
pub struct LookupBody {
    /// `process_as_distinct`, `confirm_duplicate`, `for_a_person`, or, for
    /// an effect whose outcome is unknown, `effect_confirmed`,
    /// `effect_retried` or `settled_meanwhile` (a person or the effect's
    /// late answer settled it first); `null` when there was nothing to ask (no look-up
    /// configured, not an askable open case).
    #[schema(value_type = Option<String>)]
    verdict: Option<&'static str>,
    /// Whether the provider (or the downstream) was actually asked: false
    /// while its circuit breaker is open.
    asked: bool,
    /// Why the answer leaves the case for a person.
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

/// Asks the provider's API (or, for an unknown outcome, the downstream's
/// status URL) about the case now; resolves it when the answer settles it
/// (attributed to `look-up`).
#[utoipa::path(
    post,
    path = "/api/cases/{id}/lookup",
    tag = "cases",
    params(("id" = String, Path, description = "The case id (a UUID)")),
    responses(
        (status = 200, description = "What asking came to; `verdict` is null when there was nothing to ask", body = LookupBody),
        (status = 400, description = "Not a UUID (`invalid_case_id`)", body = ApiError),
        (status = 404, description = "No such case (`case_not_found`)", body = ApiError),
        (status = 401, description = "No live bearer token or session (`unauthenticated`)", body = ApiError), (status = 403, description = "The caller's role does not allow it (`forbidden`); a session without its CSRF token (`csrf`)", body = ApiError), (status = 503, description = "The database does not answer (`storage_unavailable`)", body = ApiError),
    ),
    security(("bearer" = []))
)]
#[post("/api/cases/{id}/lookup")]
pub async fn lookup(
    state: web::Data<AppState>,
    id: web::Path<String>,
    caller: Principal,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&id)?;
    let asked = lookups::ask(&state.engine, id, Some(&caller))
        .await
        .map_err(case_error)?;
    Ok(HttpResponse::Ok().json(match asked {
        Some(a) => LookupBody {
            verdict: Some(a.verdict),
            asked: a.asked,
            why: a.why,
        },
        None => LookupBody {
            verdict: None,
            asked: false,
            why: None,
        },
    }))
}

/// `POST /api/cases/{id}/comments` body.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CommentBody {
    note: String,
}

#[utoipa::path(
    post,
    path = "/api/cases/{id}/comments",
    tag = "cases",
    params(("id" = String, Path, description = "The case id (a UUID)")),
    request_body = CommentBody,
    responses(
        (status = 204, description = "The comment is journaled (`CaseCommented`)"),
        (status = 400, description = "Not a UUID (`invalid_case_id`)", body = ApiError),
        (status = 404, description = "No such case (`case_not_found`)", body = ApiError),
        (status = 401, description = "No live bearer token or session (`unauthenticated`)", body = ApiError), (status = 403, description = "The caller's role does not allow it (`forbidden`); a session without its CSRF token (`csrf`)", body = ApiError), (status = 503, description = "The database does not answer (`storage_unavailable`)", body = ApiError),
    ),
    security(("bearer" = []))
)]
#[post("/api/cases/{id}/comments")]
pub async fn comment(
    state: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<CommentBody>,
    caller: Principal,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&id)?;
    cases::comment(&state.engine, id, &caller, body.into_inner().note)
        .await
        .map_err(case_error)?;
    Ok(HttpResponse::NoContent().finish())
}

fn parse_id(id: &str) -> Result<Uuid, ApiError> {
    id.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_case_id",
            "a case id is a UUID",
        )
    })
}

fn case_error(error: CaseError) -> ApiError {
    match error {
        CaseError::NotFound => ApiError::new(
            StatusCode::NOT_FOUND,
            "case_not_found",
            "no case with this id",
        ),
        error @ (CaseError::Forbidden { .. } | CaseError::NoLongerAllowed) => {
            ApiError::new(StatusCode::FORBIDDEN, "forbidden", error.to_string())
        }
        CaseError::Refused(refusal) => {
            let status = match refusal {
                Refusal::NoteRequired
                | Refusal::TooManyCases
                | Refusal::ReferenceTooLong
                | Refusal::ReferenceNotAnId => StatusCode::BAD_REQUEST,
                _ => StatusCode::CONFLICT,
            };
            ApiError::new(status, refusal.code(), refusal.to_string())
        }
        CaseError::Db(error) => {
            tracing::error!(%error, "cases: storage error");
            ApiError::storage_unavailable()
        }
    }
}
