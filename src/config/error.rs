//! The errors of loading a configuration (crush(1) CONFIGURATION): each says where (file:line
//! where there is one) and keeps its cause.

use super::commands::CommandError;
use super::crushrc::CrushrcError;
use super::dotenv::NulInValue;
use super::expand::ExpandError;
use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub(crate) enum ConfigError {
    /// Bad file: the message starts with file:line.
    File(String),
    /// A configuration file that cannot be read.
    Read {
        path: PathBuf,
        source: io::Error,
    },
    /// A configuration file that is not UTF-8.
    NotText(PathBuf),
    /// A JSON file that does not parse (the position is serde_json's).
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A JSON file whose top is not an object.
    NotObject(PathBuf),
    /// A crushrc command that failed, at `place` (file:line).
    Record {
        place: String,
        source: CommandError,
    },
    /// A session-only command that failed (no file).
    Command(CommandError),
    /// An `env` value that does not expand, at `place` (file:line).
    Env {
        place: String,
        key: String,
        source: ExpandError,
    },
    /// A `.env` value no environment can hold.
    DotEnv {
        path: PathBuf,
        source: NulInValue,
    },
    /// A crushrc that did not run to its end.
    Crushrc(CrushrcError),
    /// A project file changed since it was trusted.
    Changed(crate::guard::Changed),
    /// No usable provider or model; says what to do.
    NoProvider(String),
    Model(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::File(m) | ConfigError::NoProvider(m) | ConfigError::Model(m) => {
                f.write_str(m)
            }
            ConfigError::Read { path, source } => {
                f.write_str(&crate::fsutil::read_error(path, source))
            }
            ConfigError::NotText(path) => write!(f, "{}: not UTF-8 text", path.display()),
            ConfigError::Json { path, source } => write!(
                f,
                "{}:{}:{}: invalid JSON: {}",
                path.display(),
                source.line(),
                source.column(),
                strip_position(&source.to_string())
            ),
            ConfigError::NotObject(path) => write!(
                f,
                "{}:1:1: the configuration must be a JSON object ({{ ... }})",
                path.display()
            ),
            ConfigError::Record { place, source } => write!(f, "{place}: {source}"),
            ConfigError::Command(e) => e.fmt(f),
            ConfigError::Env { place, key, source } => write!(f, "{place}: env.{key}: {source}"),
            ConfigError::DotEnv { path, source } => write!(f, "{}:{source}", path.display()),
            ConfigError::Crushrc(e) => e.fmt(f),
            ConfigError::Changed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Read { source, .. } => Some(source),
            ConfigError::Json { source, .. } => Some(source),
            ConfigError::Record { source, .. } | ConfigError::Command(source) => Some(source),
            ConfigError::Env { source, .. } => Some(source),
            ConfigError::DotEnv { source, .. } => Some(source),
            ConfigError::Crushrc(e) => Some(e),
            ConfigError::Changed(e) => Some(e),
            ConfigError::File(_)
            | ConfigError::NotText(_)
            | ConfigError::NotObject(_)
            | ConfigError::NoProvider(_)
            | ConfigError::Model(_) => None,
        }
    }
}

impl From<CommandError> for ConfigError {
    fn from(e: CommandError) -> Self {
        ConfigError::Command(e)
    }
}

impl From<CrushrcError> for ConfigError {
    fn from(e: CrushrcError) -> Self {
        ConfigError::Crushrc(e)
    }
}

impl From<crate::guard::Changed> for ConfigError {
    fn from(e: crate::guard::Changed) -> Self {
        ConfigError::Changed(e)
    }
}

/// serde_json appends " at line L column C"; we print the position up front instead.
fn strip_position(msg: &str) -> &str {
    match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    }
}

/// Why one configured server (MCP or LSP) cannot be used as configured; the caller names the
/// server and where it was set.
#[derive(Debug)]
pub(crate) enum SpecError {
    /// The server's entry is not a JSON object.
    NotObject,
    /// A field whose value does not expand.
    Field { field: String, source: ExpandError },
    /// A field missing or of a kind the transport does not take; says which.
    Invalid(String),
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::NotObject => f.write_str("not an object"),
            SpecError::Field { field, source } => write!(f, "{field}: {source}"),
            SpecError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SpecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpecError::Field { source, .. } => Some(source),
            SpecError::NotObject | SpecError::Invalid(_) => None,
        }
    }
}

/// `field`'s value expanded against the session's variables `env` and the process
/// environment; the error names the field.
pub(crate) fn expand_field(
    env: &crate::env::Overlay,
    field: &str,
    value: &str,
) -> Result<String, SpecError> {
    super::expand::expand_env(value, env).map_err(|source| SpecError::Field {
        field: field.to_string(),
        source,
    })
}
