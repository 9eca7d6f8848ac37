//! A fresh database per run: a new SQLite file in a temporary directory, or a
//! new PostgreSQL database `unicity_bench_<uuid>` created next to the one the
//! URL names. `cleanup` removes it (PostgreSQL: `DROP DATABASE … WITH (FORCE)`,
//! since the in-process server still holds connections).

use std::path::PathBuf;

use anyhow::{Context, bail};
use sea_orm::{ConnectionTrait, Database};
use unicity::store::redact_url;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The database a run uses, and how to remove it afterwards.
pub struct Fresh {
    pub url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    Directory(PathBuf),
    Postgres { admin_url: String, name: String },
}

impl Fresh {
    /// Creates the database. For SQLite, `location` is the directory in which
    /// the temporary directory is made (default: the system temp dir); for
    /// PostgreSQL, the URL of an existing database on the target server.
    pub async fn create(backend: Backend, location: Option<&str>) -> anyhow::Result<Self> {
        let tag = uuid::Uuid::new_v4().simple().to_string();
        match backend {
            Backend::Sqlite => {
                let parent = location.map_or_else(std::env::temp_dir, PathBuf::from);
                let dir = parent.join(format!("unicity-bench-{tag}"));
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                let url = format!("sqlite://{}/unicity.db?mode=rwc", dir.display());
                Ok(Self {
                    url,
                    cleanup: Cleanup::Directory(dir),
                })
            }
            Backend::Postgres => {
                let admin_url = location.unwrap_or(DEFAULT_POSTGRES_URL).to_owned();
                if !admin_url.starts_with("postgres") {
                    bail!("--database-url must be a postgres:// URL with --backend postgres");
                }
                let name = format!("unicity_bench_{tag}");
                let admin = Database::connect(admin_url.as_str())
                    .await
                    .with_context(|| format!("cannot reach {}", redact_url(&admin_url)))?;
                admin
                    .execute_unprepared(&format!("CREATE DATABASE {name}"))
                    .await
                    .context("cannot create the benchmark database")?;
                let _ = admin.close().await;
                let url = replace_database(&admin_url, &name)?;
                Ok(Self {
                    url,
                    cleanup: Cleanup::Postgres { admin_url, name },
                })
            }
        }
    }

    /// What to show of the database in the report (no password).
    pub fn describe(&self) -> String {
        redact_url(&self.url)
    }

    pub async fn cleanup(self) -> anyhow::Result<()> {
        match self.cleanup {
            Cleanup::Directory(dir) => std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot remove {}", dir.display())),
            Cleanup::Postgres { admin_url, name } => {
                let admin = Database::connect(admin_url.as_str()).await?;
                admin
                    .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
                    .with_context(|| format!("cannot drop database {name}"))?;
                let _ = admin.close().await;
                Ok(())
            }
        }
    }
}

/// `postgres://u@h:5432/db?x=y` with `db` replaced by `name`.
fn replace_database(url: &str, name: &str) -> anyhow::Result<String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let Some(scheme_end) = base.find("://") else {
        bail!("database URL without scheme");
    };
    let host_part = &base[scheme_end + 3..];
    let prefix = match host_part.find('/') {
        Some(slash) => &base[..scheme_end + 3 + slash],
        None => base,
    };
    Ok(match query {
        Some(query) => format!("{prefix}/{name}?{query}"),
        None => format!("{prefix}/{name}"),
    })
}
