//! Why a language server did not start, or no server can take a file (crush(1) LSP).

use super::client::RpcError;
use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a server did not start.
#[derive(Debug)]
pub(crate) enum StartError {
    /// The program could not be run.
    Spawn { command: String, source: io::Error },
    /// It runs but without the pipes to talk to it.
    NoPipes(String),
    /// A thread to talk to it could not be made.
    Thread(io::Error),
    /// It did not answer `initialize`.
    Initialize(RpcError),
    /// Its definition is the project's and changed since it was trusted.
    Changed(crate::guard::Changed),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::Spawn { command, source } => write!(f, "cannot run {command}: {source}"),
            StartError::NoPipes(command) => write!(f, "cannot talk to {command}: no pipes"),
            StartError::Thread(e) => write!(f, "cannot start a thread: {e}"),
            StartError::Initialize(e) => write!(f, "initialize failed: {e}"),
            StartError::Changed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Spawn { source, .. } | StartError::Thread(source) => Some(source),
            StartError::Initialize(e) => Some(e),
            StartError::Changed(e) => Some(e),
            StartError::NoPipes(_) => None,
        }
    }
}

/// Why no server can take a request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum LspError {
    /// No configured or detected server handles the file.
    NoServerFor {
        path: PathBuf,
        configured: Vec<String>,
    },
    /// The servers for the file are not running: one reason per server.
    Unavailable { path: PathBuf, why: Vec<String> },
    /// `lsp_restart NAME` with a name no server has.
    NoServer { name: String, known: Vec<String> },
}

impl fmt::Display for LspError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LspError::NoServerFor { path, configured } => write!(
                f,
                "no language server handles {} (configured: {})",
                path.display(),
                configured.join(", ")
            ),
            LspError::Unavailable { path, why } => write!(
                f,
                "no language server is available for {}: {}",
                path.display(),
                why.join("; ")
            ),
            LspError::NoServer { name, known } => write!(
                f,
                "no LSP server named '{name}' (known: {})",
                known.join(", ")
            ),
        }
    }
}

impl std::error::Error for LspError {}

/// A server `restart` did not bring back: why it failed, when it did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NotRunning(pub Option<String>);

impl fmt::Display for NotRunning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_deref().unwrap_or("not running"))
    }
}

impl std::error::Error for NotRunning {}
