//! Built-in presets shipped with Unicity, compiled in. Each file is a
//! catalog fragment (`CatalogConfig`, parsed by the catalog); the user's
//! config file adds to them.

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
