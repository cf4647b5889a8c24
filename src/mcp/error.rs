//! Why an MCP server could not be used or did not answer (crush(1) MCP SERVERS).

use super::conn::{self, Failure};
use super::oauth::OAuthError;
use std::fmt;
use std::time::Duration;

#[derive(Debug)]
pub(crate) enum McpError {
    /// No server of that name is configured.
    NoServer(String),
    /// The server (`label`: "MCP server 'NAME'") is not running, and why.
    Down { label: String, why: Down },
    /// A request to server `server` failed.
    Request {
        server: String,
        method: String,
        timeout: Duration,
        failure: Box<Failure>,
    },
    /// A listing (`resources/list`) failed.
    Listing {
        server: String,
        method: &'static str,
        failure: Box<Failure>,
    },
    /// `crush mcp login` for a stdio server.
    NoAuth(String),
    /// The OAuth login did not give a token.
    OAuth(OAuthError),
}

/// Where a server that cannot take a request stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Down {
    /// Dropped from the configuration while it was starting.
    Removed,
    /// It needs `crush mcp login` first (the message says so).
    NeedsAuth(String),
    /// It did not start.
    Failed(String),
    /// It exited after its one restart.
    Stopped(String),
    /// It failed earlier and is not started again.
    NotRunning(String),
    /// Still starting at the end of its timeout.
    Starting,
    Disabled,
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpError::NoServer(name) => write!(f, "no MCP server named '{name}'"),
            McpError::Down { label, why } => match why {
                Down::Removed => write!(f, "{label} was removed"),
                Down::NeedsAuth(m) | Down::Failed(m) => write!(f, "{label}: {m}"),
                Down::Stopped(why) => write!(f, "{label} stopped: {why}"),
                Down::NotRunning(why) => write!(f, "{label} is not running: {why}"),
                Down::Starting => write!(f, "{label} is still starting"),
                Down::Disabled => write!(f, "{label} is disabled"),
            },
            McpError::Request {
                server,
                method,
                timeout,
                failure,
            } => match failure.as_ref() {
                Failure::TimedOut(_) => write!(
                    f,
                    "MCP server '{server}' did not answer {method} within {}",
                    conn::secs(*timeout)
                ),
                Failure::Canceled => write!(
                    f,
                    "the {method} request to MCP server '{server}' was canceled"
                ),
                Failure::Closed(why) => {
                    write!(f, "MCP server '{server}' stopped during {method}: {why}")
                }
                other => write!(f, "MCP server '{server}': {method} failed: {other}"),
            },
            McpError::Listing {
                server,
                method,
                failure,
            } => write!(f, "MCP server '{server}': {method} failed: {failure}"),
            McpError::NoAuth(name) => write!(
                f,
                "MCP server '{name}' is a stdio server: it needs no authorization"
            ),
            McpError::OAuth(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for McpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            McpError::Request { failure, .. } | McpError::Listing { failure, .. } => {
                Some(failure.as_ref())
            }
            McpError::OAuth(e) => Some(e),
            _ => None,
        }
    }
}

impl From<OAuthError> for McpError {
    fn from(e: OAuthError) -> Self {
        McpError::OAuth(e)
    }
}
