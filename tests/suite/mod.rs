//! Integration test modules. Add one `mod` line per file.

mod config;
mod fake_server;
mod run;
