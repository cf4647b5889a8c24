//! Integration test modules. Add one `mod` line per file.

mod cancel;
mod catalog;
mod claude_hooks;
mod config;
mod fake_server;
mod go_compat;
mod hooks;
mod ledger;
mod mcp;
mod repl;
mod run;
mod shell;
mod skills;
mod static_bin;
