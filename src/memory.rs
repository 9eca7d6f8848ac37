//! The process's memory: its heap kept on the kernel's ordinary 4 KiB pages.
//!
//! mimalloc asks the kernel for transparent huge pages on the regions it
//! maps (`madvise(MADV_HUGEPAGE)`), and a 2 MiB page counts whole in the
//! resident set as soon as one byte of it is touched; when mimalloc hands a
//! region back and takes it again, each fault zeroes 2 MiB. Measured on
//! 2026-12-06 (the benchmark, SQLite, 32 clients): peak RSS 178–189 MB with
//! huge pages and 136–140 without over 20,000 deliveries, 209 and 167 MB with
//! a million deliveries behind, deliveries per second within the runs'
//! noise. The process turns them off for itself before it allocates much,
//! whatever the host's setting (`always` or `madvise`).

/// Turns transparent huge pages off for this process and the processes it
/// starts. Call it first thing in `main`; an error (a kernel older than
/// 3.15, or not Linux) leaves the host's setting in force.
pub fn small_pages_only() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `PR_SET_THP_DISABLE` takes integers only and touches no
        // memory of this process; it sets a flag the kernel reads on page
        // faults.
        let answer = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
        if answer != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}
