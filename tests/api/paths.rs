//! Access is decided on the path the router routes: every route of the
//! table, asked anonymously, with each role's token and with each role's
//! session, under its plain path and under every other spelling of it a
//! client can send (a letter percent-encoded, double-encoded, `//`, `/./`,
//! a trailing `/`, another case). A spelling the router routes to the same
//! handler gets the plain path's answer; one it routes nowhere gets a 404.
//! Never does a spelling reach a protected handler without its role.
//!
//! Requests are written on a raw socket: an HTTP client library would
//! normalise `/./` and could re-encode what the test means to send.

use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use unicity::auth::Role;

use crate::support::app::{TestApp, issue_token, spawn_app};
use crate::support::forms::signed_in;

const CASE_ID: &str = "0190f0e0-0000-7000-8000-000000000000";

/// How a request proves who it is.
enum Credential<'a> {
    None,
    Token(&'a str),
    Session(&'a str),
}

struct Raw {
    status: u16,
    location: String,
    body: String,
}

/// Sends `method path` exactly as written and reads the whole answer.
async fn raw(app: &TestApp, method: &str, path: &str, credential: &Credential<'_>) -> Raw {
    let authority = app.address.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connected");
    // No body: a handler that refuses before reading one would leave the
    // server lingering over it, and the guard decides before any body.
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
         Content-Length: 0\r\n"
    );
    match credential {
        Credential::None => {}
        Credential::Token(token) => request.push_str(&format!("Authorization: Bearer {token}\r\n")),
        Credential::Session(cookie) => {
            request.push_str(&format!("Cookie: unicity_session={cookie}\r\n"))
        }
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("read");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let location = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("location")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    Raw {
        status,
        location,
        body: body.to_owned(),
    }
}

/// The table's path with its parameters filled.
fn example(path: &str) -> String {
    path.replace("{source}", "demo-unsigned")
        .replace("{id}", CASE_ID)
        .replace("{file}", "app.css")
        .replace("{token}", "no-such-setup-token")
}

/// Index of the first letter of the last literal segment (never a
/// parameter), the one a spelling changes.
fn literal_letter(path: &str) -> Option<usize> {
    let mut at = 0;
    let mut found = None;
    for segment in path.split('/') {
        let literal = !segment.is_empty() && !segment.contains('-') && !segment.contains('.');
        if literal && segment.chars().all(|c| c.is_ascii_lowercase()) {
            found = Some(at);
        }
        at += segment.len() + 1;
    }
    found
}

/// Other spellings of `path`, each with whether the router routes it to the
/// same handler.
fn spellings(path: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    if let Some(i) = literal_letter(path) {
        let letter = path.as_bytes()[i];
        let (before, after) = (&path[..i], &path[i + 1..]);
        out.push((format!("{before}%{letter:02X}{after}"), true));
        out.push((format!("{before}%{:02x}{after}", letter), true));
        out.push((format!("{before}%25{letter:02X}{after}"), false));
        out.push((
            format!("{before}{}{after}", (letter as char).to_ascii_uppercase()),
            false,
        ));
    }
    if path.len() > 1 {
        out.push((format!("{path}/"), false));
        let slash = path[1..].find('/').map(|i| i + 1);
        match slash {
            Some(i) => {
                out.push((format!("{}/{}", &path[..i], &path[i..]), false));
                out.push((format!("{}/.{}", &path[..i], &path[i..]), false));
            }
            None => {
                out.push((format!("/{path}"), false));
                out.push((format!("/.{path}"), false));
            }
        }
    }
    out
}

/// What the access layer made of an answer.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Verdict {
    /// Asked to sign in (401 under /api, a redirect to /login elsewhere).
    Unauthenticated,
    /// The role may not.
    Forbidden,
    /// No route (404 from the router).
    NoRoute,
    /// The guard let it through to the handler.
    Through,
}

fn verdict(api: bool, answer: &Raw) -> Verdict {
    match answer.status {
        401 if api && answer.body.contains("\"unauthenticated\"") => Verdict::Unauthenticated,
        303 if !api
            && (answer.location == "/login" || answer.location.starts_with("/login?next=%2F")) =>
        {
            Verdict::Unauthenticated
        }
        403 if api && answer.body.contains("\"forbidden\"") => Verdict::Forbidden,
        403 if !api && answer.body.contains("Your role does not allow") => Verdict::Forbidden,
        // No route: the guard's own 404 (a page for people, JSON under
        // /api); a handler's 404 says what it did not find.
        404 if answer.body.contains("There is no such page.")
            || answer.body.contains("\"no such route\"") =>
        {
            Verdict::NoRoute
        }
        _ => Verdict::Through,
    }
}

#[tokio::test]
async fn no_spelling_of_a_path_reaches_a_handler_the_callers_role_may_not_call() {
    // Given a server with a token and a signed-in session for every role
    let app = spawn_app().await;
    let mut callers = Vec::new();
    for role in Role::ALL {
        let token = issue_token(&app.db, role).await;
        let browser = signed_in(&app, &format!("op-{role}"), role).await;
        let cookie = browser.cookie.clone().expect("a session cookie");
        callers.push((role, token, cookie));
    }

    let mut checked = 0;
    for route in unicity::routes::TABLE {
        let plain = example(route.path);
        // Programs' paths (the JSON API, the metrics) are refused with JSON.
        let api = plain.starts_with("/api/") || plain == "/metrics";
        let protected = match route.access {
            unicity::routes::Access::Requires(action) => Some(action),
            _ => None,
        };
        // Skip what changes state for good or is served to anyone anyway:
        // the guard has nothing to decide there.
        let Some(action) = protected else {
            continue;
        };
        let expected = |credential: &Credential<'_>, role: Option<Role>| match (credential, role) {
            (Credential::None, _) | (_, None) => Verdict::Unauthenticated,
            (_, Some(role)) if unicity::auth::roles::allows(role, action) => Verdict::Through,
            _ => Verdict::Forbidden,
        };
        let mut asks: Vec<(Credential<'_>, Option<Role>)> = vec![(Credential::None, None)];
        for (role, token, cookie) in &callers {
            asks.push((Credential::Token(token), Some(*role)));
            asks.push((Credential::Session(cookie), Some(*role)));
        }
        let mut forms = vec![(plain.clone(), true)];
        forms.extend(spellings(&plain));
        for (path, routes_alike) in &forms {
            for (credential, role) in &asks {
                let answer = raw(&app, route.method, path, credential).await;
                let got = verdict(api, &answer);
                let want = if *routes_alike {
                    expected(credential, *role)
                } else {
                    Verdict::NoRoute
                };
                // When the spelling reaches a handler, it does so exactly
                // when the plain path would, and as nobody else.
                assert_eq!(
                    got,
                    want,
                    "{} {path} (for {}) as {}: {} {}",
                    route.method,
                    route.path,
                    role.map_or("anonymous".to_owned(), |r| format!(
                        "{r} by {}",
                        match credential {
                            Credential::Token(_) => "token",
                            _ => "session",
                        }
                    )),
                    answer.status,
                    answer.body.chars().take(200).collect::<String>()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 500, "the matrix ran: {checked} requests");
}

#[tokio::test]
async fn an_encoded_letter_gets_the_same_refusal_as_the_plain_path() {
    // Given a server and nobody signed in
    let app = spawn_app().await;
    // When the deliveries and a case's look-up are asked for under an
    // encoded letter
    for (method, path) in [
        ("GET", "/api/d%65liveries".to_owned()),
        ("GET", "/api/c%61ses".to_owned()),
        (
            "GET",
            format!("/api/deliveries/{CASE_ID}").replace("ies/", "i%65s/"),
        ),
        ("GET", format!("/cases/{CASE_ID}/%66ixture")),
        ("POST", format!("/api/cases/{CASE_ID}/l%6Fokup")),
    ] {
        let answer = raw(&app, method, &path, &Credential::None).await;
        let api = path.starts_with("/api/");
        // Then they are refused as the plain path is
        assert_eq!(
            verdict(api, &answer),
            Verdict::Unauthenticated,
            "{method} {path}: {} {}",
            answer.status,
            answer.body
        );
        if api {
            assert_eq!(answer.status, StatusCode::UNAUTHORIZED.as_u16());
        }
    }
}

#[tokio::test]
async fn api_answers_are_never_cached() {
    let app = spawn_app().await;
    let token = issue_token(&app.db, Role::Support).await;
    for credential in [Credential::None, Credential::Token(&token)] {
        let authority = app.address.trim_start_matches("http://").to_owned();
        let mut stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
        let auth = match credential {
            Credential::Token(t) => format!("Authorization: Bearer {t}\r\n"),
            _ => String::new(),
        };
        let request = format!(
            "GET /api/deliveries HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n{auth}\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let head = String::from_utf8_lossy(&answer).to_lowercase();
        assert!(
            head.contains("cache-control: no-store"),
            "{}",
            head.lines().next().unwrap_or_default()
        );
    }
}
