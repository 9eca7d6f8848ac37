//! How many rows go in one statement.

/// Most rows per statement: well under SQLite's 32766 and PostgreSQL's 65535
/// bound parameters for the widest row (`deliveries`, 20 columns). On
/// PostgreSQL a statement this large leaves in one go only because the
/// connections have `TCP_NODELAY` (see `nodelay`); without it anything over
/// ~16 KiB waited ~40 ms for a delayed ACK.
const MAX_ROWS: usize = 500;

/// Splits `rows` into statements of at most `MAX_ROWS` rows, in order.
pub(super) fn statements<A>(rows: Vec<A>) -> Vec<Vec<A>> {
    let mut out = Vec::with_capacity(rows.len().div_ceil(MAX_ROWS));
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        out.push(rows.by_ref().take(MAX_ROWS).collect());
    }
    out
}
