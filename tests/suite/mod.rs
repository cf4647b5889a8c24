//! Integration test modules. Add one `mod` line per file.

mod acp;
mod at_rest;
mod bedrock;
mod cancel;
mod catalog;
mod claude_hooks;
mod config;
mod dialects;
mod dropin_config;
mod editor;
mod fake_server;
mod go_compat;
mod hooks;
mod ledger;
mod lsp;
mod mcp;
mod providers;
mod repl;
mod run;
mod shell;
mod skills;
mod static_bin;
mod trust;
