//! Queue mode (`--queue-cases N`, after `--history`): opens N cases on the
//! preloaded deliveries and times what the case queue asks of the store —
//! its first page, a page filtered by reason, by source, by effect type and
//! to critical cases, and the counts per reason —, every count of the
//! dashboard page, and what delivery search asks of it (`searches.rs`) —
//! each run `RUNS` times on a warm database.

use anyhow::Context;
use chrono::{Duration, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait, QuerySelect};
use unicity::store::cases::{KeyScope, QueueFilter, counts_by_reason, queue};
use unicity::store::entities::{case, delivery};

use crate::timing::{PAGE, Timing, time};

const REASONS: [&str; 3] = [
    "weak_match_critical",
    "discriminants_differ",
    "outcome_unknown",
];
/// Strategies keying the cases, one case in four each; the fourth has no key.
/// The first two are critical refunds, the third a reversible GitHub event.
const STRATEGIES: [&str; 3] = [
    "norefid-refund-fingerprint@1",
    "norefid-refund-ref@1",
    "github-push@1",
];

pub async fn run(url: &str, cases: usize) -> anyhow::Result<Vec<Timing>> {
    let db = unicity::store::connect(url).await?;
    let picked: Vec<(String, String)> = delivery::Entity::find()
        .select_only()
        .column(delivery::Column::DeliveryId)
        .column(delivery::Column::Source)
        .limit(cases as u64)
        .into_tuple()
        .all(&db)
        .await?;
    if picked.len() < cases {
        anyhow::bail!("--queue-cases {cases} needs at least as many deliveries (--history)");
    }
    let start = Utc::now() - Duration::days(30);
    let rows: Vec<case::ActiveModel> = picked
        .iter()
        .enumerate()
        .map(|(i, (id, _))| {
            let opened = start + Duration::seconds(i as i64 * 60);
            case::ActiveModel {
                case_id: sea_orm::Set(uuid::Uuid::now_v7().to_string()),
                delivery_id: sea_orm::Set(id.clone()),
                business_key: sea_orm::Set(
                    STRATEGIES
                        .get(i % (STRATEGIES.len() + 1))
                        .map(|s| format!("{s}:{:064x}", i)),
                ),
                action: sea_orm::Set("reconcile".to_owned()),
                reason: sea_orm::Set(REASONS[i % REASONS.len()].to_owned()),
                status: sea_orm::Set("open".to_owned()),
                lookup_first: sea_orm::Set(false),
                details: sea_orm::Set(serde_json::json!({})),
                opened_at: sea_orm::Set(opened),
                resolved_at: sea_orm::Set(None),
                resolution: sea_orm::Set(None),
                resolved_by: sea_orm::Set(None),
                lookups: sea_orm::Set(0),
                next_lookup_at: sea_orm::Set(None),
                assignee: sea_orm::Set(None),
            }
        })
        .collect();
    for chunk in rows.chunks(500) {
        case::Entity::insert_many(chunk.to_vec())
            .exec_without_returning(&db)
            .await
            .context("inserting cases")?;
    }
    if db.get_database_backend() == sea_orm::DbBackend::Sqlite {
        db.execute_unprepared("ANALYZE").await?;
    } else {
        db.execute_unprepared("ANALYZE cases").await?;
        db.execute_unprepared("ANALYZE deliveries").await?;
    }
    let source = picked[0].1.clone();
    let by_reason = QueueFilter {
        reason: Some(REASONS[1].to_owned()),
        ..QueueFilter::default()
    };
    let by_source = QueueFilter {
        source: Some(source),
        ..QueueFilter::default()
    };
    let refunds = QueueFilter {
        keys: Some(KeyScope {
            strategies: STRATEGIES[..2].iter().map(|s| s.to_string()).collect(),
            keyless: false,
        }),
        ..QueueFilter::default()
    };
    let critical = QueueFilter {
        keys: Some(KeyScope {
            strategies: STRATEGIES[..2].iter().map(|s| s.to_string()).collect(),
            keyless: true,
        }),
        ..QueueFilter::default()
    };
    let mut timings = Vec::new();
    for (query, filter) in [
        ("first page", QueueFilter::default()),
        ("filtered by reason", by_reason),
        ("filtered by source", by_source),
        ("filtered by effect type", refunds),
        ("critical only", critical),
    ] {
        timings.push(
            time(query, || async {
                Ok(queue(&db, &filter, PAGE, 0).await?.len())
            })
            .await?,
        );
    }
    timings.push(
        time("counts per reason", || async {
            let counts = counts_by_reason(&db, "open").await?;
            anyhow::ensure!(counts.len() == REASONS.len(), "counts per reason");
            Ok(counts.len())
        })
        .await?,
    );
    timings.push(time("dashboard (all counts)", || dashboard_counts(&db)).await?);
    timings.extend(crate::searches::run(&db).await?);
    Ok(timings)
}

/// Every count the dashboard page asks for: the last 24 hours of
/// deliveries, the breaker window's collisions, and the open cases by age.
async fn dashboard_counts(db: &DatabaseConnection) -> anyhow::Result<usize> {
    use unicity::store::dashboard;
    let now = Utc::now();
    let day = now - Duration::hours(24);
    let hours = dashboard::per_hour(db, day).await?;
    dashboard::collisions(db, now - Duration::hours(1)).await?;
    let bounds = [now - Duration::hours(1), day, now - Duration::days(7)];
    let open = dashboard::open_cases_older_than(db, &bounds).await?;
    anyhow::ensure!(open[0] > 0, "open cases");
    Ok(hours.len())
}
