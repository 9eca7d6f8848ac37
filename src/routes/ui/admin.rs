//! `GET /admin`: operators and API tokens (admin only), with the forms that
//! manage them (`admin_forms`): add an operator (who sets their own password
//! through a one-time link), change a role, disable, hand out a new
//! set-password link; issue and revoke tokens.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, get, web};
use askama::Template;

use actix_session::Session;

use super::format::Nav;
use super::html;
use crate::auth::{Principal, Role};
use crate::routes::error::UiError;
use crate::services::access;
use crate::state::AppState;

/// One operator as the admin page lists it.
pub struct OperatorLine {
    pub name: String,
    pub role: String,
    pub enabled: bool,
    pub created_at: String,
    pub last_login_at: String,
    /// The signed-in admin's own line: no role change or disabling here.
    pub yourself: bool,
}

/// One API token as the admin page lists it (never the token).
pub struct TokenLine {
    pub name: String,
    pub role: String,
    pub created_at: String,
    pub expires_at: String,
    pub state: &'static str,
}

/// What the last form did, shown above the lists.
pub enum Notice {
    /// Done; the sentence says what.
    Done(String),
    /// A secret to hand over, shown this once: the sentence, then the value.
    Secret(String, String),
    /// Refused; the sentence says why.
    Refused(String),
}

/// `templates/admin.html`.
#[derive(Template)]
#[template(path = "admin.html")]
pub struct AdminPage {
    pub nav: Nav,
    pub operators: Vec<OperatorLine>,
    pub tokens: Vec<TokenLine>,
    pub roles: Vec<&'static str>,
    pub notice: Option<Notice>,
}

fn when(at: Option<chrono::DateTime<chrono::Utc>>) -> String {
    at.map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| "—".to_owned())
}

/// The admin page, with what the last form did.
pub async fn page(
    state: &AppState,
    session: &Session,
    operator: &Principal,
    status: StatusCode,
    notice: Option<Notice>,
) -> Result<HttpResponse, UiError> {
    let now = chrono::Utc::now();
    let operators = access::operators(state.db())
        .await?
        .into_iter()
        .map(|o| OperatorLine {
            yourself: o.id == operator.id.to_string(),
            name: o.name,
            role: o.role,
            enabled: o.enabled,
            created_at: when(Some(o.created_at)),
            last_login_at: when(o.last_login_at),
        })
        .collect();
    let tokens = access::tokens(state.db())
        .await?
        .into_iter()
        .map(|t| TokenLine {
            state: match (t.revoked_at, t.expires_at) {
                (Some(_), _) => "revoked",
                (None, Some(at)) if at <= now => "expired",
                _ => "active",
            },
            name: t.name,
            role: t.role,
            created_at: when(Some(t.created_at)),
            expires_at: when(t.expires_at),
        })
        .collect();
    Ok(html(
        HttpResponse::build(status),
        &AdminPage {
            nav: Nav::new(session, operator, "admin")?,
            operators,
            tokens,
            roles: Role::ALL.iter().map(|r| r.as_str()).collect(),
            notice,
        },
    ))
}

#[get("/admin")]
pub async fn show(
    state: web::Data<AppState>,
    session: Session,
    operator: Principal,
) -> Result<HttpResponse, UiError> {
    page(&state, &session, &operator, StatusCode::OK, None).await
}
