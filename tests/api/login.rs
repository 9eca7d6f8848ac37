//! Sign-in against hostile callers: strangers store nothing, overlong names
//! are refused outright, failures slow down their own address only, and
//! forwarded headers count only from a trusted proxy. Plus the CSRF proof a
//! signed-in session needs for state changes on `/api`.

use reqwest::StatusCode;
use unicity::auth::Role;

use crate::support::app::{TestApp, spawn_app, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::forms::{Answer, FormClient, PASSWORD, bare, csrf_in, operator, signed_in};

/// Signs in as `name` with `password`, as a client at `from` behind the
/// test's proxy (`X-Forwarded-For`); the status and `Retry-After`.
async fn login_from(app: &TestApp, from: &str, name: &str, password: &str) -> (StatusCode, u64) {
    let mut browser = FormClient::new(app);
    let csrf = browser.csrf("/login").await;
    let form = browser
        .form(
            "/login",
            &[("csrf", &csrf), ("name", name), ("password", password)],
        )
        .header("x-forwarded-for", from);
    let response = browser.with_cookies(form).send().await.expect("answered");
    let wait = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (response.status(), wait)
}

#[tokio::test]
async fn showing_the_login_form_stores_no_session_and_its_token_is_still_required() {
    let app = spawn_app().await;
    operator(&app, "sam", Role::Support).await;
    for _ in 0..50 {
        let page = bare()
            .get(format!("{}/login", app.address))
            .send()
            .await
            .expect("answered");
        assert_eq!(page.status(), StatusCode::OK);
    }
    assert_eq!(app.sessions().await, 0);

    // The token without its cookie, the cookie with another form's token,
    // and a token not signed by this server are all refused unchecked.
    let mut browser = FormClient::new(&app);
    let csrf = browser.csrf("/login").await;
    let post = |cookie: Option<&str>, csrf: &str| {
        let fields = [("csrf", csrf), ("name", "sam"), ("password", PASSWORD)];
        let mut request = bare()
            .post(format!("{}/login", app.address))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(serde_urlencoded::to_string(fields).expect("form"));
        if let Some(cookie) = cookie {
            request = request.header("cookie", format!("unicity_login={cookie}"));
        }
        request
    };
    let cookie = browser.login_cookie.clone().expect("the form's cookie");
    let other = csrf_in(&FormClient::new(&app).get("/login").await.body);
    let (expiry, rest) = csrf.split_once('.').expect("expiry.nonce.signature");
    let forged = format!("{}.{rest}", expiry.parse::<i64>().unwrap() + 86_400);
    for (what, request) in [
        ("no cookie", post(None, &csrf)),
        ("another form's token", post(Some(&cookie), &other)),
        ("no token", post(Some(&cookie), "")),
        ("an unsigned token", post(Some(&forged), &forged)),
    ] {
        let answer = Answer::read(request.send().await.expect("answered")).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{what}");
    }
    assert_eq!(
        app.journal_count("LoginFailed").await,
        0,
        "nothing was checked"
    );
    assert_eq!(app.journal_count("OperatorLoggedIn").await, 0);
    assert_eq!(app.sessions().await, 0);

    // A failed attempt stores nothing either; the real form signs in.
    let failed = browser.login("sam", "not the password").await;
    assert_eq!(failed.status, StatusCode::UNAUTHORIZED);
    assert_eq!(app.sessions().await, 0);
    let answer = browser.login("sam", PASSWORD).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert_eq!(browser.login_cookie, None, "the form's cookie is removed");
    assert_eq!(app.sessions().await, 1);
    assert_eq!(browser.get("/account").await.status, StatusCode::OK);
}

#[tokio::test]
async fn an_overlong_name_is_refused_before_it_is_throttled_or_checked() {
    let app = spawn_app_with("[access]\nlogin_per_address_per_minute = 2\n").await;
    operator(&app, "ann", Role::Support).await;
    let mut browser = FormClient::new(&app);
    let name = "n".repeat(257);
    for _ in 0..4 {
        let answer = browser.login(&name, PASSWORD).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert!(answer.body.contains("name is too long"), "{}", answer.body);
    }
    assert_eq!(
        app.journal_count("LoginFailed").await,
        0,
        "no password checked"
    );
    let answer = browser.login("ann", PASSWORD).await;
    assert_eq!(
        answer.status,
        StatusCode::SEE_OTHER,
        "the address is not spent"
    );
}

const BEHIND_PROXY: &str = "[access]\ntrusted_proxies = [\"127.0.0.1\"]\n";

#[tokio::test]
async fn failures_from_one_address_slow_it_down_but_never_lock_the_operator_out_elsewhere() {
    let app = spawn_app_with(BEHIND_PROXY).await;
    operator(&app, "ops", Role::Admin).await;
    let attacker = "203.0.113.7";
    for attempt in 0..5 {
        let (status, _) = login_from(&app, attacker, "ops", "guess guess guess").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "attempt {attempt}");
    }
    let (status, wait) = login_from(&app, attacker, "ops", "guess guess guess").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(wait, 1);
    let (status, _) = login_from(&app, attacker, "ops", PASSWORD).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "the failing address waits, whatever it sends"
    );

    let (status, _) = login_from(&app, "198.51.100.2", "ops", PASSWORD).await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "the operator signs in elsewhere"
    );

    // Each further failure from the attacker's address doubles its wait.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, _) = login_from(&app, attacker, "ops", "guess guess guess").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, wait) = login_from(&app, attacker, "ops", "guess guess guess").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(wait, 2);
    assert_eq!(app.journal_count("LoginFailed").await, 6);
    assert_eq!(
        app.journal_count_containing("LoginFailed", "203.0.113.7")
            .await,
        6,
        "journaled with the client's address"
    );
}

#[tokio::test]
async fn forwarded_for_from_a_peer_that_is_not_a_trusted_proxy_changes_no_address() {
    let app = spawn_app_with("[access]\nlogin_per_address_per_minute = 3\n").await;
    for i in 0..3 {
        let (status, _) = login_from(&app, &format!("203.0.113.{i}"), "x", "wrong").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (status, _) = login_from(&app, "203.0.113.99", "y", "wrong").await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "one peer, one address"
    );
}

#[tokio::test]
async fn a_cross_origin_form_naming_the_attackers_host_in_x_forwarded_host_is_refused() {
    let app = spawn_app().await;
    let mut browser = signed_in(&app, "eve", Role::Engineer).await;
    let csrf = csrf_in(&browser.get("/account").await.body);
    let forged = browser
        .form("/logout", &[("csrf", &csrf)])
        .header("origin", "https://evil.example")
        .header("x-forwarded-host", "evil.example");
    assert_eq!(browser.send(forged).await.status, StatusCode::FORBIDDEN);
    assert_eq!(browser.get("/account").await.status, StatusCode::OK);
    assert_eq!(app.journal_count("OperatorLoggedOut").await, 0);

    let own = browser
        .form("/logout", &[("csrf", &csrf)])
        .header("origin", app.address.as_str());
    assert_eq!(browser.send(own).await.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_forwarded_host_is_the_origin_to_match() {
    let app = spawn_app_with(BEHIND_PROXY).await;
    operator(&app, "pat", Role::Support).await;
    let mut browser = FormClient::new(&app);
    let csrf = browser.csrf("/login").await;
    let fields = [
        ("csrf", csrf.as_str()),
        ("name", "pat"),
        ("password", PASSWORD),
    ];
    let foreign = browser
        .form("/login", &fields)
        .header("origin", "https://evil.example")
        .header("x-forwarded-host", "unicity.example");
    assert_eq!(browser.send(foreign).await.status, StatusCode::FORBIDDEN);
    let proxied = browser
        .form("/login", &fields)
        .header("origin", "https://unicity.example")
        .header("x-forwarded-host", "unicity.example");
    assert_eq!(browser.send(proxied).await.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn a_sessions_api_state_change_needs_this_sites_origin_and_its_csrf_token() {
    let app = spawn_app().await;
    let mut browser = signed_in(&app, "ada", Role::Admin).await;
    let token = csrf_in(&browser.get("/account").await.body);
    let path = format!("/api/cases/{}/lookup", uuid::Uuid::new_v4());
    let url = format!("{}{path}", app.address);
    let with_bearer = app.client.post(&url).send().await.expect("answered");
    let allowed = with_bearer.status();
    assert_ne!(
        allowed,
        StatusCode::FORBIDDEN,
        "a bearer token needs no CSRF token"
    );

    let cases: [(&str, &[(&str, &str)]); 4] = [
        ("no token", &[]),
        ("another token", &[("x-csrf-token", "0000")]),
        (
            "cross-site",
            &[
                ("x-csrf-token", token.as_str()),
                ("sec-fetch-site", "cross-site"),
            ],
        ),
        (
            "another origin",
            &[
                ("x-csrf-token", token.as_str()),
                ("origin", "https://evil.example"),
            ],
        ),
    ];
    for (what, headers) in cases {
        let mut request = bare().post(&url);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = browser
            .with_cookies(request)
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{what}");
        let body: serde_json::Value = response.json().await.expect("json");
        assert_eq!(body["code"], "csrf", "{what}: {body}");
    }

    let request = bare()
        .post(&url)
        .header("x-csrf-token", token.as_str())
        .header("sec-fetch-site", "same-origin");
    let response = browser
        .with_cookies(request)
        .send()
        .await
        .expect("answered");
    assert_eq!(
        response.status(),
        allowed,
        "with its token, as a bearer would"
    );
    let read = browser.with_cookies(bare().get(format!("{}/api/cases", app.address)));
    assert_eq!(
        read.send().await.expect("answered").status(),
        StatusCode::OK
    );
    assert_eq!(browser.get("/account").await.status, StatusCode::OK);
}

#[tokio::test]
async fn sign_in_leads_back_to_the_page_asked_for_and_never_off_the_site() {
    let app = crate::support::app::spawn_app().await;
    crate::support::forms::operator(&app, "nora", unicity::auth::Role::Support).await;
    // Given a person who follows a link to a filtered queue before signing in,
    let mut browser = crate::support::forms::FormClient::new(&app);
    let asked = browser.get("/cases?reason=weak_match_critical").await;
    assert_eq!(asked.status, reqwest::StatusCode::SEE_OTHER);
    assert_eq!(
        asked.location,
        "/login?next=%2Fcases%3Freason%3Dweak_match_critical"
    );
    // when they sign in from the page they were sent to,
    let form = browser.get(&asked.location).await;
    assert!(
        form.body
            .contains(r#"name="next" value="/cases?reason=weak_match_critical""#),
        "{}",
        form.body
    );
    let csrf = crate::support::forms::csrf_in(&form.body);
    let signed = browser
        .post(
            "/login",
            &[
                ("csrf", &csrf),
                ("name", "nora"),
                ("password", crate::support::forms::PASSWORD),
                ("next", "/cases?reason=weak_match_critical"),
            ],
        )
        .await;
    // then they land on it.
    assert_eq!(signed.status, reqwest::StatusCode::SEE_OTHER);
    assert_eq!(signed.location, "/cases?reason=weak_match_critical");

    // Another site, or a scheme, is never followed: sign-in leads home.
    for hostile in [
        "//evil.example/x",
        "https://evil.example/",
        "/\\evil.example",
    ] {
        let mut other = crate::support::forms::FormClient::new(&app);
        let form = other
            .get(&format!(
                "/login?{}",
                serde_urlencoded::to_string([("next", hostile)]).unwrap()
            ))
            .await;
        assert!(!form.body.contains("evil.example"), "{}", form.body);
        let csrf = crate::support::forms::csrf_in(&form.body);
        let signed = other
            .post(
                "/login",
                &[
                    ("csrf", &csrf),
                    ("name", "nora"),
                    ("password", crate::support::forms::PASSWORD),
                    ("next", hostile),
                ],
            )
            .await;
        assert_eq!(signed.status, reqwest::StatusCode::SEE_OTHER, "{hostile}");
        assert_eq!(signed.location, "/", "{hostile}");
    }
}

#[tokio::test]
async fn a_session_opened_with_a_password_since_replaced_ends_even_if_it_outlived_the_change() {
    let app = spawn_app().await;
    let mut sam = signed_in(&app, "sam", Role::Support).await;
    operator(&app, "tom", Role::Support).await;
    assert_eq!(sam.get("/account").await.status, StatusCode::OK);
    // sam's password changes as it would have if this sign-in had been
    // checked against the old one while the change committed: the change's
    // clean-up of sessions ran before this session was stored, so it is
    // still there. (The new hash is another salt of the same password.)
    sea_orm::ConnectionTrait::execute_unprepared(
        &app.db,
        "UPDATE operators SET password_hash = \
         (SELECT password_hash FROM operators WHERE name = 'tom') WHERE name = 'sam'",
    )
    .await
    .expect("password replaced");
    assert_eq!(app.sessions().await, 1, "the session outlived the change");
    let after = sam.get("/account").await;
    assert_eq!(after.status, StatusCode::SEE_OTHER, "{}", after.body);
    // A sign-in with the password as it is now opens a session that works.
    let mut again = FormClient::new(&app);
    let login = again.login("sam", PASSWORD).await;
    assert_eq!(login.status, StatusCode::SEE_OTHER, "{}", login.body);
    assert_eq!(again.get("/account").await.status, StatusCode::OK);
}

/// Changing one's password asks for the current one: with a stolen session
/// that question is a sign-in of its own, throttled and journaled like one,
/// or the session's holder could guess the password without limit and keep
/// the account for good.
#[tokio::test]
async fn guessing_the_current_password_on_the_account_page_is_throttled_and_journaled() {
    let app = spawn_app().await;
    operator(&app, "ann", Role::Support).await;
    let mut browser = FormClient::new(&app);
    assert_eq!(
        browser.login("ann", PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    let guess = |current: &'static str| {
        [
            ("current", current),
            ("password", "a new long password 7"),
            ("confirm", "a new long password 7"),
        ]
    };
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let csrf = browser.csrf("/account").await;
        let form = [
            &[("csrf", csrf.as_str())][..],
            &guess("guess guess guess")[..],
        ]
        .concat();
        statuses.push(browser.post("/account/password", &form).await.status);
    }
    assert_eq!(statuses[..5], [StatusCode::BAD_REQUEST; 5]);
    assert_eq!(statuses[5], StatusCode::TOO_MANY_REQUESTS);
    let csrf = browser.csrf("/account").await;
    let form = [&[("csrf", csrf.as_str())][..], &guess(PASSWORD)[..]].concat();
    assert_eq!(
        browser.post("/account/password", &form).await.status,
        StatusCode::TOO_MANY_REQUESTS,
        "even the right one waits"
    );
    assert_eq!(app.journal_count("OperatorPasswordChanged").await, 0);
    assert_eq!(app.journal_count("LoginFailed").await, 5);
}
