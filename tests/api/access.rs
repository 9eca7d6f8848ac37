//! Operator access: the role × route matrix, sign-in and sessions, CSRF,
//! throttling, API tokens, the first-run setup link, and their audit events.

use std::collections::BTreeSet;
use std::time::Duration;

use reqwest::StatusCode;
use unicity::auth::Role;
use unicity::domain::journal::Actor;
use unicity::services::access;

use crate::support::app::{TestApp, issue_token, spawn_app, spawn_app_with, spawn_on};
use crate::support::counts::Counts;
use crate::support::forms::{Answer, FormClient, PASSWORD, bare, csrf_in, operator};

/// Who may call each route, written from the issue rather than read from
/// the code: `None` for routes open to anyone (or to signed webhooks).
fn expected_routes() -> Vec<(&'static str, &'static str, Option<&'static [Role]>)> {
    use Role::{Admin, Engineer, Finance, Support};
    const EVERYONE: &[Role] = &[Support, Finance, Engineer, Admin];
    vec![
        ("GET", "/healthz", None),
        ("GET", "/readyz", None),
        ("GET", "/metrics", Some(EVERYONE)),
        ("GET", "/api/openapi.json", None),
        ("POST", "/hooks/{source}", None),
        ("GET", "/api/deliveries", Some(EVERYONE)),
        ("GET", "/api/deliveries/{id}", Some(EVERYONE)),
        ("GET", "/api/deliveries/{id}/raw", Some(&[Engineer, Admin])),
        ("GET", "/api/cases", Some(EVERYONE)),
        ("GET", "/api/cases/{id}", Some(EVERYONE)),
        (
            "POST",
            "/api/cases/{id}/resolve",
            Some(&[Finance, Engineer, Admin]),
        ),
        ("POST", "/api/cases/{id}/comments", Some(EVERYONE)),
        (
            "POST",
            "/api/cases/{id}/lookup",
            Some(&[Finance, Engineer, Admin]),
        ),
        ("GET", "/", Some(EVERYONE)),
        ("GET", "/deliveries", Some(EVERYONE)),
        ("GET", "/deliveries/{id}", Some(EVERYONE)),
        ("GET", "/static/{file}", None),
        ("GET", "/login", None),
        ("POST", "/login", None),
        ("POST", "/logout", Some(EVERYONE)),
        ("GET", "/setup/{token}", None),
        ("POST", "/setup/{token}", None),
        ("GET", "/account", Some(EVERYONE)),
        ("POST", "/account/password", Some(EVERYONE)),
        ("GET", "/audit", Some(&[Engineer, Admin])),
        ("GET", "/admin", Some(&[Admin])),
        ("POST", "/admin/operators", Some(&[Admin])),
        ("POST", "/admin/operators/role", Some(&[Admin])),
        ("POST", "/admin/operators/disable", Some(&[Admin])),
        ("POST", "/admin/operators/link", Some(&[Admin])),
        ("POST", "/admin/tokens", Some(&[Admin])),
        ("POST", "/admin/tokens/revoke", Some(&[Admin])),
        ("GET", "/password/{token}", None),
        ("POST", "/password/{token}", None),
        ("GET", "/cases", Some(EVERYONE)),
        ("POST", "/cases/resolve-many", Some(&[Engineer, Admin])),
        ("GET", "/cases/{id}", Some(EVERYONE)),
        ("GET", "/cases/{id}/fixture", Some(&[Engineer, Admin])),
        (
            "POST",
            "/cases/{id}/resolve",
            Some(&[Finance, Engineer, Admin]),
        ),
        ("POST", "/cases/{id}/comments", Some(EVERYONE)),
        ("POST", "/cases/{id}/assign", Some(EVERYONE)),
        (
            "POST",
            "/cases/{id}/lookup",
            Some(&[Finance, Engineer, Admin]),
        ),
        ("GET", "/dashboard", Some(EVERYONE)),
        ("GET", "/strategies", Some(&[Engineer, Admin])),
        ("POST", "/strategies/replay", Some(&[Engineer, Admin])),
        ("GET", "/strategies/fields", Some(&[Engineer, Admin])),
        ("GET", "/strategies/observe", Some(&[Engineer, Admin])),
        (
            "POST",
            "/dashboard/breakers/reset",
            Some(&[Engineer, Admin]),
        ),
    ]
}

fn example(path: &str) -> String {
    path.replace("{source}", "open")
        .replace("{id}", "0190f0e0-0000-7000-8000-000000000000")
        .replace("{file}", "app.css")
        .replace("{token}", "no-such-setup-token")
}

async fn call(app: &TestApp, method: &str, path: &str, token: Option<&str>) -> Answer {
    let url = format!("{}{}", app.address, example(path));
    let mut request = match method {
        "GET" => bare().get(url),
        _ => bare()
            .post(url)
            .header("content-type", "application/json")
            .body(r#"{"type":"refund.created","payment_id":"p","amount":1}"#),
    };
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    Answer::read(request.send().await.expect("answered")).await
}

/// Whether `path` is for programs (the JSON API, the metrics): refused
/// with JSON, never sent to sign in.
fn for_programs(path: &str) -> bool {
    path.starts_with("/api/") || path == "/metrics"
}

/// Refused for lack of credentials: JSON 401 for programs, else off to sign-in.
fn unauthenticated(path: &str, a: &Answer) -> bool {
    if for_programs(path) {
        a.status == StatusCode::UNAUTHORIZED && a.body.contains("\"unauthenticated\"")
    } else {
        a.status == StatusCode::SEE_OTHER
            && (a.location == "/login" || a.location.starts_with("/login?next=%2F"))
    }
}

/// Refused for the role.
fn forbidden(path: &str, a: &Answer) -> bool {
    a.status == StatusCode::FORBIDDEN
        && if for_programs(path) {
            a.body.contains("\"forbidden\"")
        } else {
            a.body.contains("Your role does not allow")
        }
}

#[tokio::test]
async fn every_route_answers_each_role_and_anonymous_as_the_table_says() {
    let mounted: BTreeSet<(&str, &str)> = unicity::routes::TABLE
        .iter()
        .map(|r| (r.method, r.path))
        .collect();
    let expected = expected_routes();
    let listed: BTreeSet<(&str, &str)> = expected.iter().map(|(m, p, _)| (*m, *p)).collect();
    assert_eq!(
        mounted, listed,
        "every mounted route needs a row here saying who may call it"
    );

    let app = spawn_app().await;
    let mut tokens = Vec::new();
    for role in Role::ALL {
        tokens.push((role, issue_token(&app.db, role).await));
    }
    for (method, path, allowed) in expected {
        let anonymous = call(&app, method, path, None).await;
        match allowed {
            None => assert!(
                !unauthenticated(path, &anonymous) && !forbidden(path, &anonymous),
                "{method} {path} is open, got {} {}",
                anonymous.status,
                anonymous.body
            ),
            Some(_) => assert!(
                unauthenticated(path, &anonymous),
                "{method} {path} anonymous: {} {}",
                anonymous.status,
                anonymous.body
            ),
        }
        for (role, token) in &tokens {
            let answer = call(&app, method, path, Some(token)).await;
            let may = allowed.is_none_or(|roles| roles.contains(role));
            if may {
                assert!(
                    !unauthenticated(path, &answer) && !forbidden(path, &answer),
                    "{method} {path} as {role}: allowed, got {} {}",
                    answer.status,
                    answer.body
                );
            } else {
                assert!(
                    forbidden(path, &answer),
                    "{method} {path} as {role}: forbidden, got {} {}",
                    answer.status,
                    answer.body
                );
            }
        }
    }
}

#[tokio::test]
async fn login_opens_a_new_session_id_and_logout_ends_it_server_side() {
    let app = spawn_app().await;
    operator(&app, "sam", Role::Support).await;
    let mut browser = FormClient::new(&app);

    let csrf = browser.csrf("/login").await;
    assert_eq!(browser.cookie, None, "no session for the login form");
    let signed_in = browser
        .post(
            "/login",
            &[("csrf", &csrf), ("name", "sam"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(signed_in.status, StatusCode::SEE_OTHER);
    assert_eq!(signed_in.location, "/");
    let first = browser.cookie.clone().expect("a session cookie");
    assert_eq!(app.sessions().await, 1);

    // Signing in again from a session gives it a new id; the old one opens nothing.
    assert_eq!(
        browser.login("sam", PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    let session = browser.cookie.clone().expect("a session cookie");
    assert_ne!(session, first, "a new session id at sign-in");
    assert_eq!(app.sessions().await, 1);

    let account = browser.get("/account").await;
    assert_eq!(account.status, StatusCode::OK);
    assert!(account.body.contains("sam") && account.body.contains("support"));
    for header in [
        "content-security-policy",
        "referrer-policy",
        "x-content-type-options",
    ] {
        let response = bare()
            .get(format!("{}/login", app.address))
            .send()
            .await
            .unwrap();
        assert!(response.headers().contains_key(header), "{header}");
    }

    // The id before the last sign-in opens nothing.
    let mut fixated = FormClient::new(&app);
    fixated.cookie = Some(first);
    assert_eq!(
        fixated.get("/account").await.location,
        "/login?next=%2Faccount"
    );

    let csrf = csrf_in(&account.body);
    let out = browser.post("/logout", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    let signed_in = "SELECT COUNT(*) FROM sessions WHERE operator_id IS NOT NULL";
    assert_eq!(app.count(signed_in).await, 0);
    let mut replay = FormClient::new(&app);
    replay.cookie = Some(session);
    assert_eq!(
        replay.get("/account").await.location,
        "/login?next=%2Faccount"
    );

    assert_eq!(app.journal_count("OperatorLoggedIn").await, 2);
    assert_eq!(app.journal_count("OperatorLoggedOut").await, 1);
    assert_eq!(app.journal_count("OperatorCreated").await, 1);
    let data = app.journal_rows_containing("correct horse").await;
    assert_eq!(data, 0, "no password in the journal");
}

#[tokio::test]
async fn a_post_without_its_csrf_token_is_refused_and_changes_nothing() {
    let app = spawn_app().await;
    operator(&app, "eve", Role::Engineer).await;
    let mut browser = FormClient::new(&app);

    let _ = browser.csrf("/login").await;
    let no_token = browser
        .post("/login", &[("name", "eve"), ("password", PASSWORD)])
        .await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN);
    assert_eq!(app.journal_count("OperatorLoggedIn").await, 0);

    assert_eq!(
        browser.login("eve", PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    let change = [
        ("current", PASSWORD),
        ("password", "another long password"),
        ("confirm", "another long password"),
    ];
    let refused = browser.post("/account/password", &change).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let forged = browser
        .post(
            "/account/password",
            &[&[("csrf", "0".repeat(64).as_str())][..], &change[..]].concat(),
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(app.journal_count("OperatorPasswordChanged").await, 0);
    assert_eq!(
        browser.get("/account").await.status,
        StatusCode::OK,
        "still signed in"
    );

    // With the token it goes through, and every session of the operator ends.
    let csrf = browser.csrf("/account").await;
    let changed = browser
        .post(
            "/account/password",
            &[&[("csrf", csrf.as_str())][..], &change[..]].concat(),
        )
        .await;
    assert_eq!(changed.status, StatusCode::SEE_OTHER, "{}", changed.body);
    assert_eq!(app.journal_count("OperatorPasswordChanged").await, 1);
    assert_eq!(
        browser.get("/account").await.location,
        "/login?next=%2Faccount"
    );
    let mut again = FormClient::new(&app);
    assert_eq!(
        again.login("eve", PASSWORD).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        again.login("eve", "another long password").await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn sign_in_attempts_past_the_limit_answer_429_with_retry_after() {
    let app = spawn_app_with("[access]\nlogin_per_account_per_minute = 2\n").await;
    operator(&app, "fin", Role::Finance).await;
    let mut browser = FormClient::new(&app);
    assert_eq!(
        browser.login("fin", "wrong password!").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        browser.login("fin", "wrong password!").await.status,
        StatusCode::UNAUTHORIZED
    );
    let csrf = browser.csrf("/login").await;
    let form = browser.form(
        "/login",
        &[("csrf", &csrf), ("name", "fin"), ("password", PASSWORD)],
    );
    let response = browser.with_cookies(form).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(wait >= 1, "{wait}");
    assert_eq!(
        app.journal_count("LoginFailed").await,
        2,
        "the throttled attempt checked nothing"
    );
    assert_eq!(app.journal_count("OperatorLoggedIn").await, 0);
}

#[tokio::test]
async fn a_disabled_operator_loses_their_sessions_and_cannot_sign_in() {
    let app = spawn_app().await;
    operator(&app, "dan", Role::Support).await;
    let mut browser = FormClient::new(&app);
    assert_eq!(
        browser.login("dan", PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    assert_eq!(browser.get("/account").await.status, StatusCode::OK);

    assert!(
        access::disable_operator(&app.db, "dan", Actor::Cli)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        browser.get("/account").await.location,
        "/login?next=%2Faccount"
    );
    assert_eq!(
        browser.login("dan", PASSWORD).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        browser.login("nobody", PASSWORD).await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(app.journal_count("OperatorDisabled").await, 1);
    let reasons = app
        .count(
            "SELECT COUNT(*) FROM journal WHERE event_type = 'LoginFailed' \
             AND (CAST(data AS TEXT) LIKE '%\"disabled\"%' OR CAST(data AS TEXT) LIKE '%\"unknown_name\"%')",
        )
        .await;
    assert_eq!(reasons, 2);
}

#[tokio::test]
async fn an_idle_session_and_a_session_past_its_lifetime_are_refused() {
    for config in [
        "[access]\nsession_idle_secs = 1\n",
        "[access]\nsession_lifetime_secs = 2\n",
    ] {
        let app = spawn_app_with(config).await;
        operator(&app, "ida", Role::Support).await;
        let mut browser = FormClient::new(&app);
        assert_eq!(
            browser.login("ida", PASSWORD).await.status,
            StatusCode::SEE_OTHER
        );
        assert_eq!(
            browser.get("/account").await.status,
            StatusCode::OK,
            "{config}"
        );
        // Active every 0.6 s: only the absolute lifetime can end it.
        for _ in 0..4 {
            tokio::time::sleep(Duration::from_millis(600)).await;
            if config.contains("lifetime") {
                let _ = browser.get("/account").await;
            }
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert_eq!(
            browser.get("/account").await.location,
            "/login?next=%2Faccount",
            "{config}"
        );
    }
}

#[tokio::test]
async fn an_api_token_works_until_revoked_and_only_for_its_role() {
    let app = spawn_app().await;
    let binary = env!("CARGO_BIN_EXE_unicity");
    // Run off the test's thread, which also runs the server.
    let run = |args: &'static [&'static str]| {
        let mut command = std::process::Command::new(binary);
        command.args(args).env("DATABASE_URL", &app.database_url);
        async move {
            tokio::task::spawn_blocking(move || command.output())
                .await
                .expect("join")
                .expect("unicity runs")
        }
    };
    let output = run(&[
        "tokens",
        "create",
        "--name",
        "ci",
        "--role",
        "support",
        "--expires-days",
        "30",
    ])
    .await;
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let token = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    assert!(token.starts_with("uni_") && token.len() == 68, "{token}");
    let in_clear = app
        .count(&format!(
            "SELECT COUNT(*) FROM api_tokens WHERE token_hash = '{token}'"
        ))
        .await;
    assert_eq!(in_clear, 0, "only the token's hash is stored");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM api_tokens WHERE name = 'ci'")
            .await,
        1
    );

    let path = "/api/deliveries/{id}";
    let read = call(&app, "GET", path, Some(&token)).await;
    assert_eq!(
        read.status,
        StatusCode::NOT_FOUND,
        "authenticated: {}",
        read.body
    );
    assert!(forbidden(
        "/admin",
        &call(&app, "GET", "/admin", Some(&token)).await
    ));
    assert!(unauthenticated(path, &call(&app, "GET", path, None).await));
    assert!(unauthenticated(
        path,
        &call(&app, "GET", path, Some("uni_0000")).await
    ));

    let revoked = run(&["tokens", "revoke", "ci"]).await;
    assert!(revoked.status.success());
    assert!(unauthenticated(
        path,
        &call(&app, "GET", path, Some(&token)).await
    ));
    assert_eq!(
        app.journal_count("TokenIssued").await,
        2,
        "the suite's own token and ci"
    );
    assert_eq!(app.journal_count("TokenRevoked").await, 1);
}

#[tokio::test]
async fn the_first_run_setup_link_works_once_and_then_never_again() {
    let app = spawn_app().await;
    let url = app
        .setup_url
        .clone()
        .expect("a setup link while no admin exists");
    let path = url
        .strip_prefix(&app.address)
        .expect("on this server")
        .to_owned();
    let mut browser = FormClient::new(&app);
    let csrf = browser.csrf(&path).await;
    let form = [
        ("csrf", csrf.as_str()),
        ("name", "root"),
        ("password", PASSWORD),
        ("confirm", PASSWORD),
    ];
    let done = browser.post(&path, &form).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(browser.get(&path).await.status, StatusCode::NOT_FOUND);
    let twice = browser
        .post(
            &path,
            &[
                ("csrf", csrf.as_str()),
                ("name", "root2"),
                ("password", PASSWORD),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(twice.status, StatusCode::NOT_FOUND);
    assert_eq!(app.count("SELECT COUNT(*) FROM operators").await, 1);

    assert_eq!(
        browser.login("root", PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    let admin = browser.get("/admin").await;
    assert_eq!(admin.status, StatusCode::OK);
    assert!(admin.body.contains("root"));
    assert_eq!(app.journal_count("SetupCompleted").await, 1);

    let restarted = spawn_on(&app.database_url, "", None).await;
    assert!(
        restarted.setup_url.is_none(),
        "an admin exists: no new link"
    );
}

/// Two servers started at once on one empty database each print a setup
/// link (on PostgreSQL both can be live: each replaced the unused links it
/// saw, before the other inserted its own). Used at once, they still make
/// one first admin: the second finds the first's admin, or its link used.
#[tokio::test]
async fn setup_links_used_at_once_make_one_first_admin() {
    use sea_orm::{ConnectionTrait, Statement, TransactionTrait};

    let app = spawn_app().await;
    let printed = app.setup_url.clone().expect("a setup link");
    let mut tokens = vec![printed.rsplit('/').next().expect("a token").to_owned()];
    let backend = app.db.get_database_backend();
    let insert = match backend {
        sea_orm::DbBackend::Postgres => {
            "INSERT INTO setup_tokens (token_hash, created_at, expires_at) VALUES ($1, $2, $3)"
        }
        _ => "INSERT INTO setup_tokens (token_hash, created_at, expires_at) VALUES (?, ?, ?)",
    };
    for _ in 0..7 {
        let token = unicity::auth::secrets::random_hex();
        let now = chrono::Utc::now();
        let values = [
            unicity::auth::secrets::digest(&token).into(),
            now.into(),
            (now + chrono::Duration::hours(1)).into(),
        ];
        app.db
            .execute_raw(Statement::from_sql_and_values(backend, insert, values))
            .await
            .expect("a second server's link");
        tokens.push(token);
    }
    assert!(
        access::setup_open(&app.db, &tokens[1]).await.unwrap(),
        "the inserted links are live"
    );

    // On PostgreSQL the race is made certain: the operators table is held
    // (reads go on, inserts wait) until every setup waits on a lock.
    let held = if backend == sea_orm::DbBackend::Postgres {
        let other = sea_orm::Database::connect(app.database_url.as_str())
            .await
            .expect("a second connection");
        let txn = other.begin().await.expect("a transaction");
        txn.execute_unprepared("LOCK TABLE operators IN SHARE MODE")
            .await
            .expect("operators held");
        Some((other, txn))
    } else {
        None
    };

    let attempts = tokens.iter().enumerate().map(|(n, token)| {
        let db = app.db.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let name = format!("root{n}");
            access::complete_setup(&db, &token, &name, PASSWORD.to_owned().into()).await
        })
    });
    let attempts: Vec<_> = attempts.collect();
    if let Some((_other, txn)) = held {
        let waiting = "SELECT COUNT(*) FROM pg_stat_activity \
                       WHERE datname = current_database() AND wait_event_type = 'Lock'";
        let started = std::time::Instant::now();
        while app.count(waiting).await < tokens.len() as i64 {
            assert!(started.elapsed() < Duration::from_secs(30), "setups wait");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        txn.commit().await.expect("operators released");
    }
    let outcomes = futures_util::future::join_all(attempts).await;
    let made = outcomes
        .into_iter()
        .map(|joined| joined.expect("no panic"))
        .filter(|outcome| match outcome {
            Ok(_) => true,
            Err(access::AccessError::SetupClosed) => false,
            Err(other) => panic!("closed or done, not {other}"),
        })
        .count();
    assert_eq!(made, 1, "one first admin");
    assert_eq!(
        app.count("SELECT COUNT(*) FROM operators WHERE role = 'admin'")
            .await,
        1
    );
    assert_eq!(app.journal_count("SetupCompleted").await, 1);
}

/// A body too large to read is refused like any other request: with the
/// security headers every answer carries, and, under `/api`, the JSON error
/// and no caching.
#[tokio::test]
async fn a_body_too_large_is_refused_with_the_headers_every_answer_carries() {
    let app = spawn_app().await;
    let big = "a".repeat(300_000);
    let resolve = format!("/api/cases/{}/resolve", uuid::Uuid::now_v7());
    for (path, client) in [("/login", bare()), (resolve.as_str(), app.client.clone())] {
        let response = client
            .post(format!("{}{path}", app.address))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(big.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        for header in [
            "content-security-policy",
            "referrer-policy",
            "x-content-type-options",
        ] {
            assert!(response.headers().contains_key(header), "{path}: {header}");
        }
        if path.starts_with("/api") {
            assert_eq!(response.headers()["cache-control"], "no-store");
            let json: serde_json::Value = response.json().await.unwrap();
            assert_eq!(json["code"], "body_too_large", "{json}");
        }
    }
}
