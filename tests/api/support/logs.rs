//! What the test servers of this binary log, kept in memory.

use std::sync::Arc;

/// What the test servers of this binary log, through the same subscriber
/// set-up `unicity serve` uses, kept in memory. Installed on first use; every
/// server of the binary logs into it from then on, so a test looks for values
/// of its own (unique per test), never for the absence of any line at all.
pub fn logs() -> Logs {
    static LINES: std::sync::OnceLock<Arc<std::sync::Mutex<Vec<u8>>>> = std::sync::OnceLock::new();
    let lines = LINES.get_or_init(|| {
        let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        unicity::telemetry::init_with(
            move || LogSink(sink.clone()),
            false,
            unicity::telemetry::LogFormat::Text,
        );
        lines
    });
    Logs(lines.clone())
}

pub struct Logs(Arc<std::sync::Mutex<Vec<u8>>>);

impl Logs {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log lines")).into_owned()
    }
}

struct LogSink(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lines").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
