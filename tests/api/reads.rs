//! Reading back: deliveries, liveness and readiness.

use crate::support::app::spawn_app;

#[tokio::test]
async fn health_and_readiness_answer_when_the_database_does() {
    let app = spawn_app().await;
    assert_eq!(app.get("/healthz").await.status, 200);
    let ready = app.get("/readyz").await;
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json["status"], "ready");
}

#[tokio::test]
async fn an_unknown_delivery_is_404_and_a_malformed_id_is_400() {
    let app = spawn_app().await;
    let missing = app.delivery(&uuid::Uuid::now_v7().to_string()).await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json["code"], "delivery_not_found");
    let malformed = app.delivery("not-a-uuid").await;
    assert_eq!(malformed.status, 400);
    assert_eq!(malformed.json["code"], "invalid_delivery_id");
}
