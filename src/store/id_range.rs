//! Time windows as ranges of UUIDv7 primary keys. Effect and delivery ids
//! are UUIDv7 made when the row's own time is taken (an effect's
//! `created_at`, a delivery's `received_at`), so the primary key's index
//! holds them in time order: a window's rows are a range of it, and no index
//! on the time column is written per row. The range is `MARGIN` wider than
//! the window on each side, for the clocks of several processes and the
//! moments between taking the time and making the id; the time column
//! decides at the edges.

use chrono::{DateTime, TimeDelta, Utc};

/// How much wider than its window an id range is, on each side.
pub const MARGIN: TimeDelta = TimeDelta::seconds(60);

/// The largest millisecond a UUIDv7 holds (48 bits, the year 10889).
const LAST_MS: u64 = 0xffff_ffff_ffff;

/// The smallest UUIDv7, as stored (lower-case, hyphenated), of the
/// millisecond `at`: ids made at or after `at` sort at or after it. Times
/// before 1970 or past what an id holds are its first or last millisecond.
pub fn v7_floor(at: DateTime<Utc>) -> String {
    let ms = u64::try_from(at.timestamp_millis())
        .unwrap_or(0)
        .min(LAST_MS);
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    uuid::Uuid::from_bytes(bytes).hyphenated().to_string()
}

/// No id of a row whose time is at or after `at` sorts below this.
pub fn made_since(at: DateTime<Utc>) -> String {
    v7_floor(
        at.checked_sub_signed(MARGIN)
            .unwrap_or(DateTime::<Utc>::MIN_UTC),
    )
}

/// Every id of a row whose time is before `at` sorts below this.
pub fn made_before(at: DateTime<Utc>) -> String {
    v7_floor(
        at.checked_add_signed(MARGIN)
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

/// A UUIDv7 of the millisecond `at`, its other bits random: the id of a row
/// whose time is `at` but which is made later (an item split from a
/// delivery received earlier).
pub fn v7_at(at: DateTime<Utc>) -> uuid::Uuid {
    let ms = u64::try_from(at.timestamp_millis()).unwrap_or(0);
    let ts = uuid::Timestamp::from_unix(uuid::NoContext, ms / 1000, (ms % 1000) as u32 * 1_000_000);
    uuid::Uuid::new_v7(ts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_window_bounds_the_ids_made_in_it() {
        let at = DateTime::parse_from_rfc3339("2026-12-01T10:00:00.123Z")
            .unwrap()
            .with_timezone(&Utc);
        let floor = v7_floor(at);
        assert_eq!(floor, "01a2310c-017b-0000-0000-000000000000");
        let made = |at: DateTime<Utc>| v7_at(at).hyphenated().to_string();
        let ms = TimeDelta::milliseconds(1);
        assert!(made(at) >= floor);
        assert!(made(at + ms) >= floor);
        assert!(made(at - ms) < floor);
        // Across a hex digit's carry the text order is still the time order.
        let carry = DateTime::from_timestamp_millis(0x1000_0000_0000).unwrap();
        assert!(made(carry - ms) < made(carry));
        // The margins hold an id made a little before or after its time.
        assert!(made(at - TimeDelta::seconds(59)) >= made_since(at));
        assert!(made(at + TimeDelta::seconds(59)) < made_before(at));
        assert!(made(at - TimeDelta::seconds(61)) < made_since(at));
        // A window anywhere in time is a range, however far it reaches.
        assert_eq!(
            made_since(DateTime::<Utc>::MIN_UTC),
            v7_floor(DateTime::UNIX_EPOCH)
        );
        assert_eq!(
            made_before(DateTime::<Utc>::MAX_UTC),
            "ffffffff-ffff-0000-0000-000000000000"
        );
        let far = DateTime::parse_from_rfc3339("9999-12-31T23:59:59Z")
            .unwrap()
            .to_utc();
        assert!(made(far) < made_before(far));
    }
}
