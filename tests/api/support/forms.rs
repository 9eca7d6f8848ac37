//! A form client for page tests (a browser without JavaScript): the session
//! cookie and the sign-in form's cookie, plain forms, redirects not followed;
//! and operators to sign in with.

use reqwest::StatusCode;
use secrecy::SecretString;
use unicity::auth::Role;
use unicity::domain::journal::Actor;
use unicity::services::access;

use super::app::TestApp;

/// The password of every operator `operator` creates.
pub const PASSWORD: &str = "correct horse battery staple";

/// A client that neither follows redirects nor sends a token.
pub fn bare() -> reqwest::Client {
    unicity::tls::install();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

pub struct Answer {
    pub status: StatusCode,
    pub location: String,
    pub body: String,
}

impl Answer {
    /// Status, `Location` and body of a response.
    pub async fn read(response: reqwest::Response) -> Self {
        let status = response.status();
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.text().await.unwrap_or_default();
        Self {
            status,
            location,
            body,
        }
    }
}

/// A client that posts forms as a browser without JavaScript would: the
/// session cookie and the sign-in form's cookie, forms, no redirects
/// followed. A clone is a second tab of the same session. (A real browser,
/// with JavaScript, is `chromium::Browser`.)
#[derive(Clone)]
pub struct FormClient {
    address: String,
    /// `unicity_session`.
    pub cookie: Option<String>,
    /// `unicity_login`, the sign-in form's token.
    pub login_cookie: Option<String>,
}

/// The value a `Set-Cookie` header gives cookie `name`: `Some(None)` when it
/// removes it, `None` when it is about another cookie.
fn set_cookie(text: &str, name: &str) -> Option<Option<String>> {
    let rest = text.strip_prefix(name)?.strip_prefix('=')?;
    let value = rest.split(';').next().unwrap_or_default();
    Some((!value.is_empty() && !text.contains("Max-Age=0")).then(|| value.to_owned()))
}

impl FormClient {
    pub fn new(app: &TestApp) -> Self {
        Self {
            address: app.address.clone(),
            cookie: None,
            login_cookie: None,
        }
    }

    /// `request` with the cookies this client holds.
    pub fn with_cookies(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let mut cookies = Vec::new();
        if let Some(cookie) = &self.cookie {
            cookies.push(format!("unicity_session={cookie}"));
        }
        if let Some(cookie) = &self.login_cookie {
            cookies.push(format!("unicity_login={cookie}"));
        }
        if cookies.is_empty() {
            return request;
        }
        request.header("cookie", cookies.join("; "))
    }

    pub async fn send(&mut self, request: reqwest::RequestBuilder) -> Answer {
        let response = self.with_cookies(request).send().await.expect("answered");
        for value in response.headers().get_all("set-cookie") {
            let text = value.to_str().unwrap_or_default();
            if let Some(value) = set_cookie(text, "unicity_session") {
                self.cookie = value;
            }
            if let Some(value) = set_cookie(text, "unicity_login") {
                self.login_cookie = value;
            }
        }
        Answer::read(response).await
    }

    pub async fn get(&mut self, path: &str) -> Answer {
        let request = bare().get(format!("{}{path}", self.address));
        self.send(request).await
    }

    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Answer {
        let request = self.form(path, form);
        self.send(request).await
    }

    /// The request `post` sends, to send with changes (an `Origin` header).
    pub fn form(&self, path: &str, form: &[(&str, &str)]) -> reqwest::RequestBuilder {
        let body = serde_urlencoded::to_string(form).expect("form");
        bare()
            .post(format!("{}{path}", self.address))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
    }

    /// The CSRF token of the form on `path`.
    pub async fn csrf(&mut self, path: &str) -> String {
        let page = self.get(path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        csrf_in(&page.body)
    }

    pub async fn login(&mut self, name: &str, password: &str) -> Answer {
        let csrf = self.csrf("/login").await;
        self.post(
            "/login",
            &[("csrf", &csrf), ("name", name), ("password", password)],
        )
        .await
    }
}

pub fn csrf_in(html: &str) -> String {
    let marker = r#"name="csrf" value=""#;
    let start = html.find(marker).expect("a form with a CSRF token") + marker.len();
    html[start..]
        .split('"')
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A new operator `name` of `role`, with `PASSWORD`; returns its id.
pub async fn operator(app: &TestApp, name: &str, role: Role) -> uuid::Uuid {
    access::create_operator(
        &app.db,
        name,
        role,
        SecretString::from(PASSWORD),
        Actor::Cli,
    )
    .await
    .expect("operator created")
}

/// A form client signed in as a new operator `name` of `role`.
pub async fn signed_in(app: &TestApp, name: &str, role: Role) -> FormClient {
    operator(app, name, role).await;
    let mut client = FormClient::new(app);
    let answer = client.login(name, PASSWORD).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{name} signs in");
    client
}
