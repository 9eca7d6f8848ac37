//! The integration suite: the real server on port 0, real HTTP, a fresh
//! database per test (SQLite file, or PostgreSQL when TEST_DATABASE_URL is set).

mod access;
mod batches;
mod browser;
mod case_browser;
mod cases;
mod connections;
mod dashboard;
mod decisions;
mod downstream;
mod faults;
mod floods;
mod forms;
mod helpers;
mod hostile;
mod identity;
mod ingest;
mod journal;
mod key_locks;
mod lookups;
mod masking;
mod pages;
mod paths;
mod processes;
mod provider;
mod reads;
mod reconcile;
mod search;
mod simulate;
mod status;
mod stripe;
mod support_pages;
mod svix;
mod ui;
mod version_sequences;
mod versions;
