//! The simulator's provider API (`unicity::simulate::servers`) standing for
//! a provider that lists the operations it made — by resource
//! (`GET /payments/{id}/refunds`) and by time window, a page at a time
//! (`GET /refunds?from=…&to=…[&cursor=N]`) — with the `[[lookups]]` table
//! that reads it.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use unicity::simulate::servers::{self, ProviderState};

pub struct Provider {
    pub url: String,
    state: Arc<ProviderState>,
}

/// One refund the provider made: (id, payment, amount, when).
pub type Refund<'a> = (&'a str, &'a str, u64, DateTime<Utc>);

impl Provider {
    /// Serves `refunds`, `page_size` per page of a window listing.
    pub async fn start(refunds: &[Refund<'_>], page_size: usize) -> Self {
        let state = Arc::new(ProviderState::with_page(page_size));
        for (id, payment, amount, at) in refunds {
            state.made_at(id, payment, *amount, *at);
        }
        let port = servers::provider("127.0.0.1:0", state.clone()).expect("provider binds");
        Self {
            url: format!("http://127.0.0.1:{port}"),
            state,
        }
    }

    /// Pages of window listings served so far.
    pub fn pages(&self) -> u64 {
        *self.state.pages.lock().expect("pages")
    }

    /// The look-up reading this provider, and no periodic run (tests run
    /// reconciliation themselves).
    pub fn lookup_toml(&self) -> String {
        lookup_toml(&self.url)
    }
}

/// The look-up reading a provider API at `url`, and no periodic run.
pub fn lookup_toml(url: &str) -> String {
    format!(
        r#"
[[lookups]]
provider = "norefid"
effect_type = "refund.*"
url = "{url}/payments/{{payment_id}}/refunds"
operations = "$.data[*]"
id = "$.id"
amount = "$.amount"
currency = "$.currency"
status = "$.status"
resource = "$.payment_id"
created_at = "$.created_at"
list_url = "{url}/refunds?from={{from}}&to={{to}}"
cursor = "$.next_cursor"
cursor_param = "cursor"
effect_resource = "payment_id"

[reconciliation]
interval_secs = 0
"#
    )
}
