//! Background tasks under supervision: a task that panics or returns is
//! logged and started again after a pause, never silently gone. The sweeper
//! (leases, horizons, stale deferrals), the collision breakers, the flusher
//! of aggregated refusals, periodic reconciliation and SQLite's checkpointer
//! all run this way; a dead sweeper would leave expired leases unreconciled
//! and keys past their horizon forever. The group-commit writers run on
//! threads of their own and contain a panicking job themselves (its batch
//! fails, the writer goes on: `store::writer`).

use std::future::Future;
use std::time::Duration;

/// Pause before a task that stopped is started again.
const RESTART_AFTER: Duration = Duration::from_secs(1);

/// Runs `task()` on the runtime for as long as the process lives, starting a
/// fresh one whenever the last panicked or returned.
pub fn supervise<F, Fut>(name: &'static str, task: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    supervise_with(name, RESTART_AFTER, task);
}

fn supervise_with<F, Fut>(name: &'static str, pause: Duration, mut task: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        loop {
            match tokio::spawn(task()).await {
                Ok(()) => tracing::error!(task = name, "background task returned; restarting it"),
                Err(error) if error.is_panic() => {
                    tracing::error!(task = name, %error, "background task panicked; restarting it");
                }
                // Cancelled: the runtime is shutting down.
                Err(_) => return,
            }
            tokio::time::sleep(pause).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_task_that_panics_is_started_again() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        supervise_with("test", Duration::from_millis(10), move || {
            let runs = counted.clone();
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("first run fails");
                }
                std::future::pending::<()>().await;
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            2,
            "restarted once, then kept running"
        );
    }
}
