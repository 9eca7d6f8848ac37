//! What delivery search asks of the store over the preloaded history, as
//! `services::search` asks it for one page: the page (one row more than
//! shown), the count of matches up to its cap, and, when nothing matches,
//! the ids near the text. A delivery from the middle of the history is
//! found by each thing support pastes, whole and by its beginning; a text
//! near one is missed; pages without a query, forward and back.

use anyhow::Context;
use sea_orm::{DatabaseConnection, EntityTrait, PaginatorTrait, QueryOrder, QuerySelect};
use unicity::domain::identity::{KeySecret, ResourcePaths};
use unicity::domain::search::{Text, spellings};
use unicity::services::search::{COUNT_CAP, near};
use unicity::store::entities::delivery;
use unicity::store::search::{self, After, Filter, Query, Window};

use crate::timing::{PAGE, Timing, time};

/// What was typed, read, and the filter it makes.
type Asked = (Option<Text>, Filter);

pub async fn run(db: &DatabaseConnection) -> anyhow::Result<Vec<Timing>> {
    let total = delivery::Entity::find().count(db).await?;
    let middle = delivery::Entity::find()
        .order_by_asc(delivery::Column::DeliveryId)
        .offset(total / 2)
        .one(db)
        .await?
        .context("no delivery to search for")?;
    let secret = KeySecret::from_bytes(b"unicity-bench-search-secret")?;
    // A preloaded delivery has every value searched for.
    let value = |v: Option<&String>| -> anyhow::Result<String> {
        v.cloned()
            .context("the preloaded delivery lacks a searched value")
    };
    let payment = value(middle.resource.as_ref())?;
    let key = value(middle.business_key.as_ref())?;
    let event = value(middle.provider_event_id.as_ref())?;
    let strategy = value(middle.strategy.as_ref())?;
    let by = |typed: &str| -> anyhow::Result<(Text, Filter)> {
        let text = Text::parse(typed)?;
        let q = match &text {
            Text::Exact(t) => Query::Exact {
                resources: spellings(t)
                    .iter()
                    .flat_map(|s| ResourcePaths::query(s, &secret))
                    .collect(),
                texts: spellings(t),
            },
            Text::Prefix(p) => Query::Prefix {
                spellings: spellings(p),
            },
        };
        Ok((
            text,
            Filter {
                q: Some(q),
                ..Filter::default()
            },
        ))
    };
    let head = |text: &str, n: usize| format!("{}*", text.chars().take(n).collect::<String>());
    // The same id with its last character changed: found nowhere, near one.
    let mut missed: Vec<char> = payment.chars().collect();
    if let Some(last) = missed.last_mut() {
        *last = if *last == 'z' { 'y' } else { 'z' };
    }
    let missed: String = missed.into_iter().collect();
    let after = After {
        delivery_id: middle.delivery_id.clone(),
    };
    let none = (None, Filter::default());
    let by_source = Filter {
        source: Some(middle.source.clone()),
        ..Filter::default()
    };
    let cases: Vec<(&'static str, Asked, Window<'_>)> = vec![
        ("search: payment id", some(by(&payment)?), Window::Newest),
        (
            "search: PAYMENT ID (upper case)",
            some(by(&payment.to_uppercase())?),
            Window::Newest,
        ),
        ("search: business key", some(by(&key)?), Window::Newest),
        (
            "search: delivery id",
            some(by(&middle.delivery_id)?),
            Window::Newest,
        ),
        (
            "search: provider event id",
            some(by(&event)?),
            Window::Newest,
        ),
        (
            "search: payment id prefix (10 chars)",
            some(by(&head(&payment, 10))?),
            Window::Newest,
        ),
        (
            "search: payment id prefix (6 chars)",
            some(by(&head(&payment, 6))?),
            Window::Newest,
        ),
        (
            "search: delivery id prefix (8 chars)",
            some(by(&head(&middle.delivery_id, 8))?),
            Window::Newest,
        ),
        (
            "search: strategy's keys (prefix)",
            some(by(&format!("{strategy}:*"))?),
            Window::Newest,
        ),
        (
            "search: miss, near a payment id",
            some(by(&missed)?),
            Window::Newest,
        ),
        ("search: first page", none.clone(), Window::Newest),
        (
            "search: page in the middle",
            none.clone(),
            Window::Older(&after),
        ),
        (
            "search: page before the middle",
            none,
            Window::Newer(&after),
        ),
        ("search: by source", (None, by_source), Window::Newest),
    ];
    let mut timings = Vec::new();
    for (query, (text, filter), window) in cases {
        timings.push(
            time(query, || async {
                let rows = search::page(db, &filter, window, PAGE + 1).await?.len();
                let counted = search::count(db, &filter, COUNT_CAP).await?;
                match &text {
                    Some(text) if counted == 0 => Ok(near(db, text).await?.len()),
                    _ => Ok(rows),
                }
            })
            .await?,
        );
    }
    Ok(timings)
}

fn some((text, filter): (Text, Filter)) -> Asked {
    (Some(text), filter)
}
