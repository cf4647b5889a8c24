//! Integration test modules. Add one `mod` line per file.

mod at_rest;
mod cancel;
mod catalog;
mod claude_hooks;
mod config;
mod crush_tools;
mod dropin_config;
mod editor;
mod fake_server;
mod go_compat;
mod hooks;
mod images;
mod jobs;
mod ledger;
mod lsp;
mod mcp;
mod providers;
mod question;
mod repl;
mod run;
mod shell;
mod static_bin;
mod trust;
mod undo;
mod web;
