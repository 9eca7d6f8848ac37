//! This process's writes to storage, from `/proc/self/io`: the benchmark's
//! write amplification per operation.

use serde::Serialize;

/// `/proc/self/io` counters, for write amplification per operation.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoCounters {
    /// Bytes this process caused to be sent to the storage layer.
    write_bytes: u64,
    /// Write syscalls (files and sockets alike).
    syscw: u64,
}

impl IoCounters {
    pub fn now() -> Option<Self> {
        let text = std::fs::read_to_string("/proc/self/io").ok()?;
        let field = |name: &str| -> Option<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
                .trim()
                .parse()
                .ok()
        };
        Some(Self {
            write_bytes: field("write_bytes")?,
            syscw: field("syscw")?,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct IoPerOp {
    /// Bytes written to storage per operation, in KiB (WAL pages, checkpoints).
    pub disk_kib: f64,
    /// Write syscalls per operation (files and the HTTP sockets).
    pub write_calls: f64,
}

impl IoPerOp {
    pub fn between(
        before: Option<IoCounters>,
        after: Option<IoCounters>,
        ops: u64,
    ) -> Option<Self> {
        let (before, after) = (before?, after?);
        let ops = ops.max(1) as f64;
        Some(Self {
            disk_kib: after.write_bytes.saturating_sub(before.write_bytes) as f64 / 1024.0 / ops,
            write_calls: after.syscw.saturating_sub(before.syscw) as f64 / ops,
        })
    }
}
