//! The field-stability report over a real journal: what changes across one
//! event's retries, what comes and goes, and what tells apart deliveries the
//! live strategy kept apart.

use unicity::services::corpus::{self, Stability};

use crate::support::app::{refund, spawn_app};
use crate::support::counts::Counts;

#[tokio::test]
async fn retries_show_the_volatile_and_conditional_fields_and_distinct_refunds_what_separates_them()
{
    let app = spawn_app().await;
    // Given one refund (payment + reference: a strong key) sent three times,
    // its send time changing and an email present once,
    let mut with_email: serde_json::Value =
        serde_json::from_slice(&refund("pay_c1", 700, Some("rr_c1"))).unwrap();
    with_email["customer_email"] = "ann@example.org".into();
    let first = app
        .post_signed("hmac", &serde_json::to_vec(&with_email).unwrap())
        .await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    for _ in 0..2 {
        tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        let retry = app
            .post_signed("hmac", &refund("pay_c1", 700, Some("rr_c1")))
            .await;
        assert_eq!(retry.json["decision"], "ignore", "{}", retry.json);
    }
    // and a second, legitimate refund of the same payment under another
    // reference and amount,
    let second = app
        .post_signed("hmac", &refund("pay_c1", 900, Some("rr_c2")))
        .await;
    assert_eq!(second.json["decision"], "process", "{}", second.json);
    app.wait_applied(2).await;

    // when the report is read,
    let catalog = crate::support::app::test_settings(&app.database_url, "").catalog;
    let chosen = corpus::Chosen {
        source: Some("hmac"),
        ..corpus::Chosen::default()
    };
    let report = corpus::report(&app.db, &catalog, chosen).await.unwrap();

    // then the event seen three times shows its send time as volatile, the
    // email as conditional, the payment as stable,
    assert_eq!(report.deliveries, 4);
    assert_eq!(report.repeated_events, 1);
    let stability = |path: &str| {
        report
            .fields
            .iter()
            .find(|f| f.path == path)
            .unwrap_or_else(|| panic!("{path} in {:?}", report.fields))
            .stability
    };
    assert_eq!(stability("$.sent_at"), Stability::Volatile);
    assert!(
        report
            .fields
            .iter()
            .any(|f| f.path == "$.sent_at" && f.declared_volatile)
    );
    assert_eq!(stability("$.customer_email"), Stability::Conditional);
    assert_eq!(stability("$.payment_id"), Stability::Stable);
    // and the two refunds of one payment are told apart by their reference
    // and amount, never by the volatile send time.
    assert_eq!(report.resources_with_distinct_effects, 1);
    let separating: Vec<&str> = report.separating.iter().map(|s| s.path.as_str()).collect();
    assert!(separating.contains(&"$.refund_reference"), "{separating:?}");
    assert!(separating.contains(&"$.amount"), "{separating:?}");
    assert!(!separating.contains(&"$.sent_at"), "{separating:?}");
    assert!(!separating.contains(&"$.payment_id"), "{separating:?}");
}

#[tokio::test]
async fn a_page_refuses_more_deliveries_than_it_holds_and_counts_only_the_chosen_ones() {
    // Given three refunds from one source and one from another
    let app = spawn_app().await;
    for n in 0..3 {
        let reply = app
            .post_signed(
                "hmac",
                &refund("pay_most", 700 + n, Some(&format!("rr_most_{n}"))),
            )
            .await;
        assert_eq!(reply.json["decision"], "process", "{}", reply.json);
    }
    let other = app
        .post_raw("open", refund("pay_most_open", 9, None), &[])
        .await;
    assert_eq!(other.status, 202, "{}", other.json);
    let catalog = crate::support::app::test_settings(&app.database_url, "").catalog;
    let report = |source: Option<&'static str>| {
        let chosen = corpus::Chosen {
            source,
            most: Some(2),
            ..corpus::Chosen::default()
        };
        corpus::report(&app.db, &catalog, chosen)
    };
    // When a page limited to two reads them all, or the first source's
    let refused = report(None).await.expect_err("over the limit");
    assert!(
        refused.is::<corpus::TooMany>() && refused.to_string().contains("more than the 2"),
        "{refused:#}"
    );
    assert!(report(Some("hmac")).await.is_err());
    // Then the other source's one delivery is read alone
    let open = report(Some("open")).await.expect("within the limit");
    assert_eq!(open.deliveries, 1);
}
