//! One module per CLI command (crush(1) COMMANDS): each calls the layers below and returns the
//! text to print; `main` prints it.

pub(crate) mod agents;
pub(crate) mod config;
pub(crate) mod files;
pub(crate) mod hooks;
pub(crate) mod login;
pub(crate) mod logs;
pub(crate) mod lsp;
pub(crate) mod mcp;
pub(crate) mod models;
pub(crate) mod projects;
pub(crate) mod sandbox;
pub(crate) mod sessions;
pub(crate) mod skills;
pub(crate) mod stats;
pub(crate) mod stats_html;
