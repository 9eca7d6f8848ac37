//! The observe report of a source that observes some effect types only
//! compares those types throughout: the deliveries it would have sent to a
//! person and its collisions are the observed types' too, in the report and
//! on its page; the enforced types' are Unicity's own business.

use unicity::auth::Role;
use unicity::services::observe;

use crate::observe::mixed_source;
use crate::support::app::{TestApp, id_of, refund, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::forms::signed_in;

/// A chargeback of `payment` under `reference`, for `amount`.
fn chargeback(payment: &str, amount: u64, reference: Option<&str>) -> Vec<u8> {
    let mut body = serde_json::json!({
        "type": "chargeback.created", "payment_id": payment,
        "amount": amount, "currency": "EUR",
    });
    if let Some(reference) = reference {
        body["chargeback_reference"] = reference.into();
    }
    serde_json::to_vec(&body).unwrap()
}

/// Posts `body` to the source and checks its decision's reason.
async fn posted(app: &TestApp, body: Vec<u8>, reason: &str) -> String {
    let reply = app.post_raw("mixed", body, &[]).await;
    assert_eq!(reply.json["reason"], reason, "{}", reply.json);
    id_of(&reply)
}

/// The ids of the section of `page` whose heading has `id`.
fn section<'a>(page: &'a str, id: &str) -> &'a str {
    let start = page
        .find(&format!(r#"<h2 id="{id}""#))
        .unwrap_or_else(|| panic!("{id} in {page}"));
    let end = page[start..]
        .find("</section>")
        .map_or(page.len(), |n| start + n);
    &page[start..end]
}

#[tokio::test]
async fn a_source_observing_refunds_lists_only_the_refunds_it_held_and_saw_collide() {
    let app = spawn_app_with(&mixed_source(r#"["refund.*"]"#, "")).await;
    // Given a source observing its refunds and enforcing its chargebacks,
    // a refund's reference reused for another amount,
    posted(&app, refund("pay_ot1", 500, Some("rr_ot1")), "new_key").await;
    let refund_clash = posted(
        &app,
        refund("pay_ot1", 900, Some("rr_ot1")),
        "discriminants_differ",
    )
    .await;
    // a chargeback's reference reused for another amount,
    posted(&app, chargeback("pay_ot2", 500, Some("cb_ot2")), "new_key").await;
    let chargeback_clash = posted(
        &app,
        chargeback("pay_ot2", 900, Some("cb_ot2")),
        "discriminants_differ",
    )
    .await;
    // and a chargeback without its reference, which no strategy keys,
    let unkeyed = posted(&app, chargeback("pay_ot3", 500, None), "no_strategy").await;

    // when the report compares the observed refunds (once the deliveries
    // read model holds them),
    app.settle().await;
    let report = observe::report(&app.db, "mixed", &["refund.*".to_owned()], None)
        .await
        .unwrap();
    // then the refund's collision is held for a person and listed as a
    // collision, and nothing of the chargebacks is.
    let ids = |held: &[observe::HeldDelivery]| -> Vec<String> {
        held.iter().map(|h| h.delivery_id.clone()).collect()
    };
    assert_eq!(ids(&report.collisions), std::slice::from_ref(&refund_clash));
    assert_eq!(
        ids(&report.for_a_person),
        std::slice::from_ref(&refund_clash)
    );
    // Observed whole, the source's report lists them all.
    let whole = observe::report(&app.db, "mixed", &["*".to_owned()], None)
        .await
        .unwrap();
    assert_eq!(
        ids(&whole.collisions),
        [refund_clash.clone(), chargeback_clash.clone()]
    );
    let mut held = ids(&whole.for_a_person);
    held.sort();
    let mut all = vec![
        refund_clash.clone(),
        chargeback_clash.clone(),
        unkeyed.clone(),
    ];
    all.sort();
    assert_eq!(held, all);

    // The page shows the same lists.
    let mut engineer = signed_in(&app, "eli", Role::Engineer).await;
    let page = engineer.get("/strategies/observe?source=mixed").await;
    assert_eq!(page.status, reqwest::StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains("mixed (observe refund.*)"),
        "{}",
        page.body
    );
    for id in ["for-a-person", "collisions"] {
        let listed = section(&page.body, id);
        assert!(
            listed.contains(&format!(r#"href="/deliveries/{refund_clash}""#)),
            "{listed}"
        );
        for other in [&chargeback_clash, &unkeyed] {
            assert!(!listed.contains(other.as_str()), "{id}: {listed}");
        }
    }
}
