//! What a settlement counts under a delivery's key, inside the
//! transaction that acts on it: the effects that may have moved money under
//! any key the delivery is found by, the provider operations they and
//! others cite, and those a person made by hand.

use std::collections::BTreeSet;

use sea_orm::DbErr;

use crate::domain::journal::KeySummary;
use crate::domain::lookup::Accounted;
use crate::domain::plan;
use crate::services::engine::Engine;
use crate::store::Tx;

/// The base keys the effects under `key` lie under: its keys in force,
/// its retired versions' keys, and the keys its keys in force stand for
/// since a migration (`KeyMigrated`). The decision finds an earlier effect
/// through any of them; what a look-up or a person's resolution counts as
/// made must too, or a retry found through a retired version's key is
/// counted as nothing made and paid again.
async fn bases(tx: &mut Tx<'_>, key: &KeySummary) -> Result<Vec<String>, DbErr> {
    let in_force = key.in_force();
    let mut bases: Vec<String> = in_force
        .iter()
        .chain(&key.retired_keys)
        .map(|k| plan::base_key(k).to_owned())
        .collect();
    for (alias, _) in tx.migrated_effects(&in_force).await? {
        bases.push(plan::base_key(&alias.effect_key).to_owned());
    }
    bases.sort();
    bases.dedup();
    Ok(bases)
}

/// Whether an effect applied as distinct under `key` (under `key~…`, not
/// the key's own) that may have moved money cites no provider operation.
pub(super) async fn uncited_distinct(tx: &mut Tx<'_>, key: &KeySummary) -> Result<bool, DbErr> {
    let bases = bases(tx, key).await?;
    Ok(tx
        .live_effects(&bases)
        .await?
        .iter()
        .any(|e| !bases.contains(&e.key) && e.provider_ref.is_none()))
}

/// What the transaction sees under `key`: every effect that may have moved
/// money, the operations they cite, which of `matching` effects under other
/// keys cite, and which effects under it cite that failed (an effect not
/// live under the key failed: live ones are all but failed).
pub(super) async fn accounted(
    tx: &mut Tx<'_>,
    engine: &Engine,
    key: &KeySummary,
    matching: &[String],
) -> Result<Accounted, DbErr> {
    let made_by_hand = match engine.provider_of(key) {
        Some(provider) => {
            crate::store::ledger::made_by_hand_among(tx.connection(), &provider, matching).await?
        }
        None => BTreeSet::new(),
    };
    let bases = bases(tx, key).await?;
    let live = tx.live_effects(&bases).await?;
    let mine: BTreeSet<&str> = live.iter().map(|e| e.effect_id.as_str()).collect();
    let under_the_key = |effect: &str| {
        bases.iter().any(|base| {
            effect == base
                || effect
                    .strip_prefix(base.as_str())
                    .is_some_and(|rest| rest.starts_with('~'))
        })
    };
    let (failed, elsewhere): (Vec<_>, Vec<_>) = tx
        .citing(&key.effect_type, matching)
        .await?
        .into_iter()
        .filter(|e| !mine.contains(e.effect_id.as_str()))
        .partition(|e| under_the_key(&e.key));
    Ok(Accounted {
        effects: live.len(),
        cited: live.iter().filter_map(|e| e.provider_ref.clone()).collect(),
        cited_elsewhere: elsewhere
            .into_iter()
            .filter_map(|e| e.provider_ref)
            .collect(),
        failed: failed.into_iter().filter_map(|e| e.provider_ref).collect(),
        made_by_hand,
    })
}
