//! One module per CLI command (crush(1) COMMANDS): each calls the layers below and returns the
//! text to print; `main` prints it.

pub mod agents;
pub mod config;
pub mod files;
pub mod hooks;
pub mod login;
pub mod logs;
pub mod lsp;
pub mod mcp;
pub mod models;
pub mod projects;
pub mod sandbox;
pub mod sessions;
pub mod skills;
pub mod stats;
pub mod stats_html;
