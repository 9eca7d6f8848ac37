//! Built-in presets shipped with Unicity, compiled in. Each file is a
//! [`CatalogConfig`] fragment; the user's config file adds to them.

use super::catalog::{CatalogConfig, CatalogError};

/// (file name, TOML text) of every built-in preset.
pub const PRESETS: [(&str, &str); 6] = [
    ("stripe.toml", include_str!("presets/stripe.toml")),
    ("github.toml", include_str!("presets/github.toml")),
    (
        "standard_webhooks.toml",
        include_str!("presets/standard_webhooks.toml"),
    ),
    ("adyen.toml", include_str!("presets/adyen.toml")),
    ("gocardless.toml", include_str!("presets/gocardless.toml")),
    ("norefid.toml", include_str!("presets/norefid.toml")),
];

pub fn load() -> Result<Vec<CatalogConfig>, CatalogError> {
    PRESETS
        .iter()
        .map(|(file, text)| {
            toml::from_str(text).map_err(|e| CatalogError::Preset {
                file: (*file).to_owned(),
                reason: e.to_string(),
            })
        })
        .collect()
}
