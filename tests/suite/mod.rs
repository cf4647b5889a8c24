//! Integration test modules. Add one `mod` line per file.

mod catalog;
mod claude_hooks;
mod config;
mod fake_server;
mod go_compat;
mod hooks;
mod ledger;
mod lsp;
mod repl;
mod run;
mod static_bin;
