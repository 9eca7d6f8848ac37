//! `--shadow-candidate FILE`: after the run, replays its journal with the live
//! strategy set and the candidate, as `unicity replay` does, and reports the
//! deliveries per second of one replay against the 5,000/s target.

use std::path::Path;

use crate::database::Fresh;
use crate::server;

pub async fn run(sqlite_dir: Option<&Path>, fresh: &Fresh, candidate: &Path) -> anyhow::Result<()> {
    let candidate = std::fs::read_to_string(candidate)?;
    let scratch = sqlite_dir
        .map_or_else(std::env::temp_dir, Path::to_path_buf)
        .join(format!(
            "unicity-bench-shadow-{}",
            uuid::Uuid::now_v7().simple()
        ));
    std::fs::create_dir_all(&scratch)?;
    note!("unicity-bench: shadow replay of the run's journal with the candidate");
    let db = unicity::store::connect(&fresh.url).await?;
    let replayed = unicity::services::shadow::shadow(
        &db,
        server::CONFIGURATION,
        &candidate,
        &unicity::services::shadow::Window::default(),
        &scratch,
    )
    .await;
    let _ = db.close().await;
    let _ = std::fs::remove_dir_all(&scratch);
    let report = replayed?;
    let merges: usize = report
        .changes
        .iter()
        .filter(|c| c.change == unicity::services::shadow::Change::Merge)
        .map(|c| c.deliveries)
        .sum();
    let per_replay = report.replayed as f64 / report.elapsed_secs.max(1e-9);
    println!(
        "shadow replay              {} deliveries, twice, in {:.1} s: {per_replay:.0} deliveries/s per replay (target >= 5000: {}), noise {}, merges {merges}",
        report.replayed,
        report.elapsed_secs,
        if per_replay >= 5000.0 { "ok" } else { "MISSED" },
        report.noise.len()
    );
    println!(
        "{}",
        serde_json::json!({
            "shadow": {
                "replayed": report.replayed,
                "elapsed_s": report.elapsed_secs,
                "per_s_per_replay": per_replay,
                "noise": report.noise.len(),
                "merges": merges,
            }
        })
    );
    Ok(())
}
