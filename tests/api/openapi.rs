//! The OpenAPI document (`GET /api/openapi.json`) names every `/api` route,
//! the webhook endpoint and the metrics, and real answers of each — success
//! and refusal — validate against the schemas it gives for their status.

use serde_json::{Value, json};

use crate::support::app::{TestApp, refund, spawn_app};
use crate::support::counts::Counts;

/// The document as the server serves it.
async fn document(app: &TestApp) -> Value {
    let response = reqwest::get(format!("{}/api/openapi.json", app.address))
        .await
        .expect("served");
    assert_eq!(response.status(), 200);
    response.json().await.expect("json")
}

/// The route `path` of the document as its template (`{id}`), from a route
/// of `routes::TABLE`.
fn operation<'d>(doc: &'d Value, path: &str, method: &str) -> Option<&'d Value> {
    doc["paths"]
        .get(path)
        .and_then(|p| p.get(method.to_ascii_lowercase()))
}

/// Checks `body`, answered with `status` by `method path`, against the
/// document's schema for it; returns what does not match.
fn check(doc: &Value, method: &str, path: &str, status: u16, body: &Value) -> Vec<String> {
    let op = operation(doc, path, method).unwrap_or_else(|| panic!("{method} {path} documented"));
    let response = &op["responses"][status.to_string()];
    assert!(
        response.is_object(),
        "{method} {path}: status {status} is not documented: {}",
        op["responses"]
    );
    let Some(schema) = response["content"]["application/json"].get("schema") else {
        panic!("{method} {path} {status}: no JSON schema");
    };
    let mut root = schema.clone();
    root["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    root["components"] = doc["components"].clone();
    let validator = jsonschema::validator_for(&root).expect("a valid schema");
    validator
        .iter_errors(body)
        .map(|e| format!("{method} {path} {status}: {e} at {}", e.instance_path()))
        .collect()
}

#[tokio::test]
async fn every_api_route_is_documented_and_real_answers_validate_against_their_schemas() {
    let app = spawn_app().await;
    let doc = document(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");
    // Every route of the table under /api, the webhooks and the metrics.
    for route in unicity::routes::TABLE {
        let documented = route.path.starts_with("/api/")
            || ["/hooks/{source}", "/metrics", "/healthz", "/readyz"].contains(&route.path);
        if documented {
            assert!(
                operation(&doc, route.path, route.method).is_some(),
                "{} {} is not in the document",
                route.method,
                route.path
            );
        }
    }

    let mut problems = Vec::new();
    let mut answered = |method: &str, path: &str, status: u16, body: Value| {
        problems.extend(check(&doc, method, path, status, &body));
    };
    // The webhook: processed, then a duplicate, refused, unknown.
    let body = refund("pay_oa", 1500, Some("rr_oa"));
    let first = app.post_signed("hmac", &body).await;
    answered("POST", "/hooks/{source}", first.status, first.json.clone());
    app.wait_applied(1).await;
    let retry = app.post_signed("hmac", &body).await;
    answered("POST", "/hooks/{source}", retry.status, retry.json.clone());
    let forged = app
        .post_signed_with("hmac", "wrong", "m", chrono::Utc::now().timestamp(), &body)
        .await;
    answered(
        "POST",
        "/hooks/{source}",
        forged.status,
        forged.json.clone(),
    );
    let unknown = app.post_raw("nowhere", body.clone(), &[]).await;
    answered(
        "POST",
        "/hooks/{source}",
        unknown.status,
        unknown.json.clone(),
    );
    // A held twin opens a case.
    app.post_signed("hmac", &refund("pay_oa2", 700, None)).await;
    app.wait_applied(2).await;
    let twin = app.post_signed("hmac", &refund("pay_oa2", 700, None)).await;
    answered("POST", "/hooks/{source}", twin.status, twin.json.clone());
    let case_id = twin.json["case_id"].as_str().expect("a case").to_owned();

    let miss = app.get("/api/deliveries?q=pay_oa2x").await;
    assert_eq!(
        miss.json["suggestions"][0]["text"], "pay_oa2",
        "a proposal to validate"
    );
    let id = first.json["delivery_id"].as_str().unwrap().to_owned();
    for (path, template) in [
        ("/api/deliveries?q=pay_oa".to_owned(), "/api/deliveries"),
        // by a beginning, a page of one; a miss with its proposals
        (
            "/api/deliveries?q=pay_oa*&limit=1".to_owned(),
            "/api/deliveries",
        ),
        ("/api/deliveries?q=pay_oa2x".to_owned(), "/api/deliveries"),
        ("/api/deliveries?q=pay_o*".to_owned(), "/api/deliveries"),
        (format!("/api/deliveries/{id}"), "/api/deliveries/{id}"),
        (
            "/api/deliveries/not-a-uuid".to_owned(),
            "/api/deliveries/{id}",
        ),
        ("/api/cases".to_owned(), "/api/cases"),
        (format!("/api/cases/{case_id}"), "/api/cases/{id}"),
        (
            format!("/api/cases/{}", uuid::Uuid::now_v7()),
            "/api/cases/{id}",
        ),
    ] {
        let reply = app.get(&path).await;
        answered("GET", template, reply.status, reply.json);
    }
    // Liveness, readiness and this document, asked by anyone.
    for path in ["/healthz", "/readyz", "/api/openapi.json"] {
        let reply = reqwest::get(format!("{}{path}", app.address))
            .await
            .unwrap();
        let status = reply.status().as_u16();
        assert_eq!(status, 200, "{path}");
        answered("GET", path, status, reply.json().await.unwrap());
    }
    let anonymous = reqwest::get(format!("{}/api/cases", app.address))
        .await
        .unwrap();
    let status = anonymous.status().as_u16();
    answered("GET", "/api/cases", status, anonymous.json().await.unwrap());
    let post = async |path: String, body: Value| {
        let response = app
            .client
            .post(format!("{}{path}", app.address))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (
            status,
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    let (status, lookup) = post(format!("/api/cases/{case_id}/lookup"), json!({})).await;
    answered("POST", "/api/cases/{id}/lookup", status, lookup);
    let resolve = json!({"resolution": "confirm_duplicate", "note": "a retry"});
    let (status, resolved) = post(format!("/api/cases/{case_id}/resolve"), resolve.clone()).await;
    assert_eq!(status, 200, "{resolved}");
    answered("POST", "/api/cases/{id}/resolve", status, resolved);
    let (status, again) = post(format!("/api/cases/{case_id}/resolve"), resolve).await;
    assert_eq!(status, 409, "{again}");
    answered("POST", "/api/cases/{id}/resolve", status, again);
    let (status, invalid) = post(
        format!("/api/cases/{case_id}/resolve"),
        json!({"resolution": "perhaps", "note": "?"}),
    )
    .await;
    answered("POST", "/api/cases/{id}/resolve", status, invalid);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[tokio::test]
async fn a_schema_that_does_not_match_the_answer_is_caught() {
    // The check itself can fail: an answer missing a required field, or
    // with a field of the wrong type, does not validate.
    let app = spawn_app().await;
    let doc = document(&app).await;
    let first = app
        .post_signed("hmac", &refund("pay_oa3", 100, Some("rr_oa3")))
        .await;
    let mut broken = first.json.clone();
    broken.as_object_mut().unwrap().remove("decision");
    broken["flagged_for_correction"] = json!("no");
    let problems = check(&doc, "POST", "/hooks/{source}", first.status, &broken);
    assert!(problems.len() >= 2, "{problems:?}");
}
