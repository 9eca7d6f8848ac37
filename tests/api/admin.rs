//! The admin page manages people over real HTTP: an admin adds an operator,
//! who chooses their own password through a one-time link and signs in; an
//! admin changes roles, disables, hands out a new link, issues and revokes
//! API tokens — each journaled with who acted — and cannot lock themselves
//! out. Only admins may; every form needs its CSRF token.

use reqwest::StatusCode;
use unicity::auth::Role;

use crate::support::app::{TestApp, spawn_app};
use crate::support::counts::Counts;
use crate::support::forms::{Answer, FormClient, PASSWORD, csrf_in, signed_in};

const NEW_PASSWORD: &str = "a long new password 42";

/// The one-time value the admin page shows after a form.
fn secret_in(page: &Answer) -> String {
    let marker = r#"<code id="secret">"#;
    let start = page.body.find(marker).expect("a secret shown once") + marker.len();
    let end = page.body[start..].find("</code>").expect("closed") + start;
    page.body[start..end].to_owned()
}

/// The path of a set-password link the page showed.
fn link_path(app: &TestApp, page: &Answer) -> String {
    let link = secret_in(page);
    let path = link
        .strip_prefix(&app.address)
        .unwrap_or_else(|| panic!("{link} is on this server"));
    assert!(path.starts_with("/password/"), "{path}");
    path.to_owned()
}

/// How the API answers a bearer `token`.
async fn api_status(app: &TestApp, token: String) -> StatusCode {
    reqwest::Client::new()
        .get(format!("{}/api/deliveries", app.address))
        .bearer_auth(token)
        .send()
        .await
        .expect("answered")
        .status()
}

async fn admin_post(admin: &mut FormClient, path: &str, fields: &[(&str, &str)]) -> Answer {
    let csrf = admin.csrf("/admin").await;
    let mut form = vec![("csrf", csrf.as_str())];
    form.extend_from_slice(fields);
    admin.post(path, &form).await
}

/// Chooses a password through the link at `path`, as its holder does.
async fn choose_password(app: &TestApp, path: &str, password: &str) -> Answer {
    let mut holder = FormClient::new(app);
    let page = holder.get(path).await;
    assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
    let csrf = csrf_in(&page.body);
    holder
        .post(
            path,
            &[
                ("csrf", &csrf),
                ("password", password),
                ("confirm", password),
            ],
        )
        .await
}

#[tokio::test]
async fn an_operator_added_by_an_admin_chooses_their_password_through_a_one_time_link() {
    // Given an admin on the admin page
    let app = spawn_app().await;
    let mut admin = signed_in(&app, "ada", Role::Admin).await;

    // When they add an operator
    let added = admin_post(
        &mut admin,
        "/admin/operators",
        &[("name", "nina"), ("role", "finance")],
    )
    .await;

    // Then the page shows a link, once, and the new operator cannot sign in yet
    assert_eq!(added.status, StatusCode::OK, "{}", added.body);
    assert!(
        added.body.contains("nina was added as finance"),
        "{}",
        added.body
    );
    let path = link_path(&app, &added);
    assert_eq!(
        app.journal_count("OperatorCreated").await,
        2,
        "ada and nina"
    );
    let again = admin.get("/admin").await;
    assert!(!again.body.contains(&path), "the link is shown once");
    let mut nina = FormClient::new(&app);
    for guess in [PASSWORD, ""] {
        assert_ne!(
            nina.login("nina", guess).await.status,
            StatusCode::SEE_OTHER
        );
    }

    // When nina opens the link and chooses a password
    let set = choose_password(&app, &path, NEW_PASSWORD).await;

    // Then she is sent to sign in, signs in with it, as finance
    assert_eq!(set.status, StatusCode::SEE_OTHER, "{}", set.body);
    assert_eq!(set.location, "/login");
    assert_eq!(
        nina.login("nina", NEW_PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
    let account = nina.get("/account").await;
    assert!(
        account.body.contains("<strong>finance</strong>"),
        "{}",
        account.body
    );
    assert_eq!(app.journal_count("OperatorPasswordChanged").await, 1);

    // And the link is used up
    let mut other = FormClient::new(&app);
    let used = other.get(&path).await;
    assert_eq!(used.status, StatusCode::NOT_FOUND);
    assert!(used.body.contains("already used"), "{}", used.body);
}

#[tokio::test]
async fn a_new_link_replaces_the_old_one_and_a_bad_password_keeps_the_link_open() {
    let app = spawn_app().await;
    let mut admin = signed_in(&app, "ada", Role::Admin).await;
    let first = link_path(
        &app,
        &admin_post(
            &mut admin,
            "/admin/operators",
            &[("name", "sam"), ("role", "support")],
        )
        .await,
    );

    // A new link for sam: the first stops working
    let second = admin_post(&mut admin, "/admin/operators/link", &[("name", "sam")]).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    let second = link_path(&app, &second);
    assert_ne!(first, second);
    let mut holder = FormClient::new(&app);
    assert_eq!(holder.get(&first).await.status, StatusCode::NOT_FOUND);
    // Whoever holds a link can set the password: who handed it out is on
    // the audit trail, not only the password change it leads to.
    assert_eq!(app.journal_count("PasswordLinkIssued").await, 1);
    let audit = admin.get("/audit?kind=password_link_issued").await;
    assert_eq!(audit.status, StatusCode::OK, "{}", audit.body);
    assert!(
        audit
            .body
            .contains("handed out a set-password link for sam"),
        "{}",
        audit.body
    );
    assert!(audit.body.contains("ada"), "{}", audit.body);

    // A password too short is refused on the page, and the link still works
    let short = choose_password(&app, &second, "short").await;
    assert_eq!(short.status, StatusCode::BAD_REQUEST, "{}", short.body);
    assert!(short.body.contains("12"), "says why: {}", short.body);
    let set = choose_password(&app, &second, NEW_PASSWORD).await;
    assert_eq!(set.status, StatusCode::SEE_OTHER, "{}", set.body);

    // An unknown or made-up link is a 404 page, not an error
    assert_eq!(
        holder.get("/password/0000").await.status,
        StatusCode::NOT_FOUND
    );
}

/// A link an admin handed out dies when its operator changes their password
/// another way: a link that leaked (a chat, a mail) would otherwise take the
/// account back from them for three days.
#[tokio::test]
async fn a_password_changed_on_the_account_page_ends_the_link_handed_out_before() {
    let app = spawn_app().await;
    let mut admin = signed_in(&app, "ada", Role::Admin).await;
    let mut sam = signed_in(&app, "sam", Role::Support).await;
    let link = admin_post(&mut admin, "/admin/operators/link", &[("name", "sam")]).await;
    assert_eq!(link.status, StatusCode::OK, "{}", link.body);
    let link = link_path(&app, &link);
    // Whoever holds the link opened it before the change
    let mut holder = FormClient::new(&app);
    let opened = holder.get(&link).await;
    assert_eq!(opened.status, StatusCode::OK, "{}", opened.body);
    let held = csrf_in(&opened.body);
    let csrf = sam.csrf("/account").await;
    let changed = sam
        .post(
            "/account/password",
            &[
                ("csrf", csrf.as_str()),
                ("current", PASSWORD),
                ("password", NEW_PASSWORD),
                ("confirm", NEW_PASSWORD),
            ],
        )
        .await;
    assert_eq!(changed.status, StatusCode::SEE_OTHER, "{}", changed.body);
    assert_eq!(holder.get(&link).await.status, StatusCode::NOT_FOUND);
    let theirs = "the password of whoever holds it";
    let taken = holder
        .post(
            &link,
            &[("csrf", &held), ("password", theirs), ("confirm", theirs)],
        )
        .await;
    assert_eq!(taken.status, StatusCode::NOT_FOUND, "{}", taken.body);
    assert_eq!(
        sam.login("sam", NEW_PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn an_admin_changes_roles_and_disables_others_but_never_their_own_account() {
    let app = spawn_app().await;
    let mut admin = signed_in(&app, "ada", Role::Admin).await;
    let mut sam = signed_in(&app, "sam", Role::Support).await;

    // Role change: journaled, effective on sam's next request
    let promoted = admin_post(
        &mut admin,
        "/admin/operators/role",
        &[("name", "sam"), ("role", "finance")],
    )
    .await;
    assert_eq!(promoted.status, StatusCode::OK, "{}", promoted.body);
    assert!(promoted.body.contains("sam is now finance (was support)"));
    assert_eq!(app.journal_count("OperatorRoleChanged").await, 1);
    assert!(
        sam.get("/account")
            .await
            .body
            .contains("<strong>finance</strong>")
    );

    // An unknown role or operator is refused with why
    let bad = admin_post(
        &mut admin,
        "/admin/operators/role",
        &[("name", "sam"), ("role", "root")],
    )
    .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("no role named"), "{}", bad.body);
    let nobody = admin_post(
        &mut admin,
        "/admin/operators/disable",
        &[("name", "nobody")],
    )
    .await;
    assert_eq!(nobody.status, StatusCode::NOT_FOUND);

    // Disabling ends sam's session
    let disabled = admin_post(&mut admin, "/admin/operators/disable", &[("name", "sam")]).await;
    assert_eq!(disabled.status, StatusCode::OK, "{}", disabled.body);
    assert_eq!(sam.get("/account").await.status, StatusCode::SEE_OTHER);
    assert_ne!(
        FormClient::new(&app).login("sam", PASSWORD).await.status,
        StatusCode::SEE_OTHER
    );

    // The admin's own account is not changed here
    for (path, fields) in [
        ("/admin/operators/disable", vec![("name", "ada")]),
        (
            "/admin/operators/role",
            vec![("name", "ada"), ("role", "support")],
        ),
        ("/admin/operators/link", vec![("name", "ada")]),
    ] {
        let refused = admin_post(&mut admin, path, &fields).await;
        assert_eq!(refused.status, StatusCode::CONFLICT, "{path}");
        assert!(refused.body.contains("your own account"), "{path}");
    }
    assert!(
        admin.get("/admin").await.status == StatusCode::OK,
        "still admin"
    );
}

#[tokio::test]
async fn tokens_issued_on_the_page_work_on_the_api_until_revoked() {
    let app = spawn_app().await;
    let mut admin = signed_in(&app, "ada", Role::Admin).await;
    let issued_before = app.journal_count("TokenIssued").await;
    let issued = admin_post(
        &mut admin,
        "/admin/tokens",
        &[
            ("name", "ci-bot"),
            ("role", "support"),
            ("expires_days", "30"),
        ],
    )
    .await;
    assert_eq!(issued.status, StatusCode::OK, "{}", issued.body);
    let token = secret_in(&issued);
    assert!(token.starts_with("uni_"), "{token}");
    assert!(
        !admin.get("/admin").await.body.contains(&token),
        "shown once"
    );
    let api = |token: String| api_status(&app, token);
    assert_eq!(api(token.clone()).await, StatusCode::OK);

    let bad_expiry = admin_post(
        &mut admin,
        "/admin/tokens",
        &[
            ("name", "other"),
            ("role", "support"),
            ("expires_days", "soon"),
        ],
    )
    .await;
    assert_eq!(bad_expiry.status, StatusCode::BAD_REQUEST);
    let taken = admin_post(
        &mut admin,
        "/admin/tokens",
        &[
            ("name", "ci-bot"),
            ("role", "support"),
            ("expires_days", ""),
        ],
    )
    .await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{}", taken.body);

    let revoked = admin_post(&mut admin, "/admin/tokens/revoke", &[("name", "ci-bot")]).await;
    assert_eq!(revoked.status, StatusCode::OK, "{}", revoked.body);
    assert_eq!(api(token).await, StatusCode::UNAUTHORIZED);
    assert_eq!(app.journal_count("TokenIssued").await, issued_before + 1);
    assert_eq!(app.journal_count("TokenRevoked").await, 1);
}

#[tokio::test]
async fn only_an_admin_with_the_page_s_csrf_token_changes_anyone() {
    let app = spawn_app().await;
    let mut admin = signed_in(&app, "ada", Role::Admin).await;
    let mut engineer = signed_in(&app, "eve", Role::Engineer).await;

    // An engineer's session, with a valid CSRF token of its own: refused
    let csrf = engineer.csrf("/account").await;
    let refused = engineer
        .post(
            "/admin/operators",
            &[("csrf", &csrf), ("name", "mallory"), ("role", "admin")],
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);

    // The admin without the token: refused
    let forged = admin
        .post(
            "/admin/operators",
            &[("name", "mallory"), ("role", "admin")],
        )
        .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert_eq!(
        app.journal_count("OperatorCreated").await,
        2,
        "ada and eve only"
    );
}

/// Enabled admins left.
async fn admins(app: &TestApp) -> i64 {
    app.count("SELECT COUNT(*) FROM operators WHERE role = 'admin' AND enabled = TRUE")
        .await
}

#[tokio::test]
async fn two_admins_demoting_or_disabling_each_other_at_once_leave_an_admin() {
    for (path, extra) in [
        ("/admin/operators/role", Some(("role", "engineer"))),
        ("/admin/operators/disable", None),
    ] {
        let app = spawn_app().await;
        let mut ada = signed_in(&app, "ada", Role::Admin).await;
        let mut bob = signed_in(&app, "bob", Role::Admin).await;
        let ada_csrf = ada.csrf("/admin").await;
        let bob_csrf = bob.csrf("/admin").await;
        let form = |csrf: &str, name: &str| {
            let mut fields = vec![("csrf", csrf.to_owned()), ("name", name.to_owned())];
            if let Some((field, value)) = extra {
                fields.push((field, value.to_owned()));
            }
            fields
        };
        let (ada_form, bob_form) = (form(&ada_csrf, "bob"), form(&bob_csrf, "ada"));
        let as_pairs = |f: &Vec<(&str, String)>| -> Vec<(String, String)> {
            f.iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect()
        };
        let (ada_pairs, bob_pairs) = (as_pairs(&ada_form), as_pairs(&bob_form));
        let ada_fields: Vec<(&str, &str)> = ada_pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let bob_fields: Vec<(&str, &str)> = bob_pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        // Both requests pass the guard as admins, then race.
        let (by_ada, by_bob) =
            tokio::join!(ada.post(path, &ada_fields), bob.post(path, &bob_fields));
        let took = [&by_ada, &by_bob]
            .iter()
            .filter(|a| a.status == StatusCode::OK)
            .count();
        assert_eq!(
            took, 1,
            "{path}: exactly one change takes: {} / {}",
            by_ada.status, by_bob.status
        );
        assert_eq!(admins(&app).await, 1, "{path}: one admin is left");
    }
}

#[tokio::test]
async fn the_last_admin_cannot_be_demoted_or_disabled_and_a_demoted_admin_changes_nobody() {
    let app = spawn_app().await;
    let mut ada = signed_in(&app, "ada", Role::Admin).await;
    let mut bob = signed_in(&app, "bob", Role::Admin).await;
    let demoted = admin_post(
        &mut ada,
        "/admin/operators/role",
        &[("name", "bob"), ("role", "finance")],
    )
    .await;
    assert_eq!(demoted.status, StatusCode::OK, "{}", demoted.body);

    // The last admin stays one, even asked from the host.
    let from_host = unicity::services::access::set_role(
        &app.db,
        "ada",
        Role::Support,
        unicity::domain::journal::Actor::Cli,
    )
    .await;
    assert!(
        matches!(
            from_host,
            Err(unicity::services::access::AccessError::LastAdmin)
        ),
        "{from_host:?}"
    );
    let disabled = unicity::services::access::disable_operator(
        &app.db,
        "ada",
        unicity::domain::journal::Actor::Cli,
    )
    .await;
    assert!(matches!(
        disabled,
        Err(unicity::services::access::AccessError::LastAdmin)
    ));
    assert_eq!(admins(&app).await, 1);

    // bob is no longer an admin: the page is closed to him.
    let page = bob.get("/admin").await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert_eq!(app.journal_count("OperatorRoleChanged").await, 1);
}

#[tokio::test]
async fn a_request_let_in_as_an_admins_does_nothing_once_its_author_is_no_longer_one() {
    use unicity::domain::journal::Actor;
    use unicity::services::access::{self, AccessError};
    // Given bob, an admin, and an admin token, both let in as admins' ...
    let app = spawn_app().await;
    crate::support::forms::operator(&app, "ada", Role::Admin).await;
    let bob_id = crate::support::forms::operator(&app, "bob", Role::Admin).await;
    crate::support::forms::operator(&app, "cy", Role::Support).await;
    let bob = Actor::Operator {
        id: bob_id,
        name: "bob".to_owned(),
    };
    access::issue_token(&app.db, "ops", Role::Admin, None, Actor::Cli)
        .await
        .expect("issued");
    let ops_id = access::tokens(&app.db).await.expect("tokens")[0]
        .id
        .parse()
        .unwrap();
    let ops = Actor::Token {
        id: ops_id,
        name: "ops".to_owned(),
    };
    // ... when, their requests still in flight, bob is demoted and the
    // token revoked
    access::set_role(&app.db, "bob", Role::Finance, Actor::Cli)
        .await
        .expect("demoted");
    access::revoke_token(&app.db, "ops", Actor::Cli)
        .await
        .expect("revoked");
    // Then what they asked for is refused where it would be written
    for by in [bob, ops] {
        let invited = access::invite_operator(&app.db, "mallory", Role::Admin, by.clone()).await;
        assert!(
            matches!(invited, Err(AccessError::NoLongerAdmin)),
            "{invited:?}"
        );
        let link = access::password_link(&app.db, "cy", by.clone()).await;
        assert!(matches!(link, Err(AccessError::NoLongerAdmin)), "{link:?}");
        let token = access::issue_token(&app.db, "later", Role::Admin, None, by.clone()).await;
        assert!(
            matches!(token, Err(AccessError::NoLongerAdmin)),
            "{token:?}"
        );
        let promoted = access::set_role(&app.db, "cy", Role::Admin, by.clone()).await;
        assert!(
            matches!(promoted, Err(AccessError::NoLongerAdmin)),
            "{promoted:?}"
        );
        let disabled = access::disable_operator(&app.db, "ada", by.clone()).await;
        assert!(
            matches!(disabled, Err(AccessError::NoLongerAdmin)),
            "{disabled:?}"
        );
    }
    assert_eq!(
        app.count("SELECT COUNT(*) FROM operators WHERE role = 'admin' AND enabled")
            .await,
        1
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM operators WHERE name = 'mallory'")
            .await,
        0
    );
    assert_eq!(
        app.count("SELECT COUNT(*) FROM api_tokens WHERE name = 'later'")
            .await,
        0
    );
    assert_eq!(app.journal_count("PasswordLinkIssued").await, 0);
    // while the host's own commands still act.
    access::invite_operator(&app.db, "dee", Role::Support, Actor::Cli)
        .await
        .expect("the host invites");
}

/// Whoever issued a token or handed out a link holds its secret: an admin
/// about to be disabled or demoted could keep their access through a token
/// "for a script", a token that token issued, or a set-password link for
/// someone else's account. Each is withdrawn with the change, over the same
/// forms, and what other admins issued keeps working.
#[tokio::test]
async fn what_an_admin_issued_is_withdrawn_when_they_are_disabled_or_demoted() {
    use unicity::domain::journal::Actor;
    use unicity::services::access;
    for (path, extra) in [
        ("/admin/operators/disable", None),
        ("/admin/operators/role", Some(("role", "support"))),
    ] {
        // Given bob, an admin who issued a token, a token issued by that
        // token, a link for cy's account and an invitation for dora ...
        let app = spawn_app().await;
        let mut ada = signed_in(&app, "ada", Role::Admin).await;
        let mut bob = signed_in(&app, "bob", Role::Admin).await;
        crate::support::forms::operator(&app, "cy", Role::Finance).await;
        let issued = admin_post(
            &mut bob,
            "/admin/tokens",
            &[
                ("name", "bob-script"),
                ("role", "admin"),
                ("expires_days", ""),
            ],
        )
        .await;
        let bob_script = secret_in(&issued);
        let script_id = access::tokens(&app.db)
            .await
            .expect("tokens")
            .into_iter()
            .find(|t| t.name == "bob-script")
            .expect("issued")
            .id
            .parse()
            .unwrap();
        let chained = access::issue_token(
            &app.db,
            "chained",
            Role::Support,
            None,
            Actor::Token {
                id: script_id,
                name: "bob-script".to_owned(),
            },
        )
        .await
        .expect("a token issues a token");
        let cy_link = link_path(
            &app,
            &admin_post(&mut bob, "/admin/operators/link", &[("name", "cy")]).await,
        );
        let dora_link = link_path(
            &app,
            &admin_post(
                &mut bob,
                "/admin/operators",
                &[("name", "dora"), ("role", "admin")],
            )
            .await,
        );
        // ... and an invitation for erin he opened himself
        let erin_link = link_path(
            &app,
            &admin_post(
                &mut bob,
                "/admin/operators",
                &[("name", "erin"), ("role", "admin")],
            )
            .await,
        );
        let chosen = choose_password(&app, &erin_link, NEW_PASSWORD).await;
        assert_eq!(chosen.status, StatusCode::SEE_OTHER, "{}", chosen.body);
        // ... and ada, another admin, who issued a token of her own
        let ada_ci = secret_in(
            &admin_post(
                &mut ada,
                "/admin/tokens",
                &[
                    ("name", "ada-ci"),
                    ("role", "support"),
                    ("expires_days", ""),
                ],
            )
            .await,
        );
        let api = |token: String| api_status(&app, token);
        for token in [&bob_script, &chained, &ada_ci] {
            assert_eq!(api(token.clone()).await, StatusCode::OK, "{path}");
        }

        // When ada disables or demotes bob
        let mut fields = vec![("name", "bob")];
        fields.extend(extra);
        let changed = admin_post(&mut ada, path, &fields).await;

        // Then the page says what went with him, and none of it works
        assert_eq!(changed.status, StatusCode::OK, "{path}: {}", changed.body);
        assert!(
            changed
                .body
                .contains("API tokens they issued are revoked: bob-script, chained"),
            "{path}: {}",
            changed.body
        );
        assert!(
            changed
                .body
                .contains("2 unused set-password links they handed out are void"),
            "{path}: {}",
            changed.body
        );
        assert!(
            changed
                .body
                .contains("check with erin: their password was set through a link they handed out"),
            "{path}: {}",
            changed.body
        );
        assert_eq!(api(bob_script).await, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(api(chained).await, StatusCode::UNAUTHORIZED, "{path}");
        let mut holder = FormClient::new(&app);
        for link in [&cy_link, &dora_link] {
            assert_eq!(
                holder.get(link).await.status,
                StatusCode::NOT_FOUND,
                "{path}: {link}"
            );
            let token = link.strip_prefix("/password/").expect("a link");
            let set = access::set_password_by_link(
                &app.db,
                token,
                secrecy::SecretString::from(NEW_PASSWORD),
            )
            .await;
            assert!(
                matches!(set, Err(access::AccessError::LinkClosed)),
                "{path}: {set:?}"
            );
        }
        assert_ne!(
            holder.login("cy", NEW_PASSWORD).await.status,
            StatusCode::SEE_OTHER,
            "{path}"
        );
        // And what ada issued still works
        assert_eq!(api(ada_ci).await, StatusCode::OK, "{path}");
        // And the trail says why each token went, as ada's act
        assert_eq!(
            app.count("SELECT COUNT(*) FROM api_tokens WHERE revoked_at IS NOT NULL")
                .await,
            2,
            "{path}"
        );
        let audit = ada.get("/audit?kind=token_revoked").await;
        assert!(
            audit.body.contains(
                "revoked API token chained: its issuer, token bob-script, was disabled, \
                 demoted or revoked"
            ),
            "{path}: {}",
            audit.body
        );
        assert!(
            audit.body.contains(
                "revoked API token bob-script: its issuer, operator bob, was disabled, \
                 demoted or revoked"
            ),
            "{path}: {}",
            audit.body
        );
    }
}

/// Revoking a token withdraws what it issued, and an admin's token revoked
/// while it issues another cannot leave that one behind.
#[tokio::test]
async fn a_revoked_token_takes_what_it_issued_with_it() {
    use unicity::domain::journal::Actor;
    use unicity::services::access;
    let app = spawn_app().await;
    crate::support::forms::operator(&app, "ada", Role::Admin).await;
    crate::support::forms::operator(&app, "cy", Role::Finance).await;
    access::issue_token(&app.db, "ops", Role::Admin, None, Actor::Cli)
        .await
        .expect("issued");
    let ops = Actor::Token {
        id: access::tokens(&app.db).await.expect("tokens")[0]
            .id
            .parse()
            .unwrap(),
        name: "ops".to_owned(),
    };
    // Issues raced against the revocation: each either lands before it
    // and is withdrawn with it, or is refused.
    let issues =
        (0..8).map(|n| {
            let (db, ops) = (app.db.clone(), ops.clone());
            async move {
                access::issue_token(&db, &format!("child-{n}"), Role::Support, None, ops).await
            }
        });
    let link = access::password_link(&app.db, "cy", ops.clone())
        .await
        .expect("a link");
    let (issued, revoked) = tokio::join!(
        futures_util::future::join_all(issues),
        access::revoke_token(&app.db, "ops", Actor::Cli)
    );
    let withdrawn = revoked.expect("revoked").expect("it was live");
    assert_eq!(withdrawn.links, 1);
    let landed = issued.iter().filter(|i| i.is_ok()).count();
    assert_eq!(withdrawn.tokens.len(), landed, "{withdrawn:?}");
    let live = access::tokens(&app.db).await.unwrap();
    let live: Vec<_> = live
        .iter()
        .filter(|t| t.revoked_at.is_none() && t.issued_by.is_some())
        .collect();
    assert!(
        live.is_empty(),
        "{landed} issued before the revocation: {live:?}"
    );
    for token in issued.into_iter().flatten() {
        assert!(access::token(&app.db, &token).await.unwrap().is_none());
    }
    assert!(
        access::link_holder(&app.db, &link).await.unwrap().is_none(),
        "the link it handed out is void"
    );
    // The host's own tokens have no issuer to lose.
    access::issue_token(&app.db, "host", Role::Support, None, Actor::Cli)
        .await
        .expect("issued");
    assert!(
        access::disable_operator(&app.db, "cy", Actor::Cli)
            .await
            .unwrap()
            .expect("disabled")
            .is_empty()
    );
    let host = access::tokens(&app.db).await.unwrap();
    assert!(
        host.iter()
            .any(|t| t.name == "host" && t.revoked_at.is_none())
    );
}
