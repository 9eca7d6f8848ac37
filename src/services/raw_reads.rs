//! Handing out a delivery's raw body, unmasked. Every read is journaled
//! (`RawBodyRead`) before the bytes leave, so no read goes unrecorded; a read
//! that cannot be journaled is refused.

use chrono::Utc;
use sea_orm::DbErr;

use super::access::AsCaller;
use super::engine::{Engine, WriteEvent};
use crate::auth::{Action, Principal};
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{JournalEvent, RawBodyRead};
use crate::store::{bodies, journal};

/// Who asks, and from where.
#[derive(Debug, Clone)]
pub struct Reader {
    pub client_address: Option<String>,
    /// Read again in the transaction that journals the read: a caller
    /// disabled, demoted or revoked meanwhile is given nothing.
    pub caller: Principal,
}

#[derive(Debug, thiserror::Error)]
pub enum RawReadError {
    #[error("raw body reads are disabled")]
    Disabled,
    #[error("no delivery with this id")]
    NotFound,
    /// The caller, read again as the read is journaled, may no longer read
    /// raw bodies.
    #[error("the account that asked may no longer read raw bodies")]
    NoLongerAllowed,
    /// Rejected deliveries keep only the body's hash; retention may redact a body.
    #[error("this delivery's raw body is not stored")]
    NotStored,
    #[error(transparent)]
    Journal(#[from] journal::ReadError),
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// The exact bytes received for delivery `id`, once the read is journaled.
pub async fn read(
    engine: &Engine,
    id: DeliveryId,
    reader: Reader,
) -> Result<Vec<u8>, RawReadError> {
    if !engine.config.raw_body_reads {
        return Err(RawReadError::Disabled);
    }
    let stored = journal::for_delivery(&engine.db, id).await?;
    if stored.is_empty() {
        return Err(RawReadError::NotFound);
    }
    let body = stored
        .into_iter()
        .find_map(|s| match s.event {
            JournalEvent::DeliveryReceived(e) => Some(e.body),
            _ => None,
        })
        .ok_or(RawReadError::NotStored)?;
    let raw = bodies::get(&engine.db, &body.sha256)
        .await?
        .ok_or(RawReadError::NotStored)?;
    let event = JournalEvent::RawBodyRead(RawBodyRead {
        body,
        client_address: reader.client_address,
        operator: Some(reader.caller.id.to_string()),
    });
    let at = Utc::now();
    engine
        .writer
        .submit(AsCaller {
            caller: reader.caller,
            needs: Action::ReadRawBodies,
            job: WriteEvent::record(Some(id), event).at(at),
        })
        .await?
        .ok_or(RawReadError::NoLongerAllowed)?;
    Ok(raw)
}
