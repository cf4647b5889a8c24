//! Why a hook could not be started, or what it printed is no answer (crush(1) HOOKS).

use serde_json::Value;
use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub(crate) enum HookError {
    /// A `#!` line with nothing after it.
    NoInterpreter,
    /// `#!/usr/bin/env` with no program (`line`: the `#!` line without `#!`).
    EnvNoProgram { line: String },
    /// `#!/usr/bin/env NAME` with NAME nowhere on PATH.
    EnvNotFound { name: String, line: String },
    /// `#!PROG` missing, and its base name not on PATH either.
    InterpreterNotFound { prog: String, base: String },
    /// The script's first bytes could not be read.
    Read { path: PathBuf, source: io::Error },
    /// Stdout that is JSON but not an object.
    StdoutNotObject,
    /// Stdout that is not JSON.
    StdoutNotJson(serde_json::Error),
    /// A `timeout` that is not a number of seconds.
    Timeout(Value),
    /// `args` that is not a list of strings.
    Args(Value),
    /// The program of a hook in exec form is not found (not on PATH, or no such file).
    ProgramNotFound(String),
}

impl fmt::Display for HookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HookError::NoInterpreter => f.write_str("the #! line names no interpreter"),
            HookError::EnvNoProgram { line } => write!(f, "'#!{line}' names no program for env"),
            HookError::EnvNotFound { name, line } => {
                write!(
                    f,
                    "interpreter '{name}' (from '#!{line}') not found on PATH"
                )
            }
            HookError::InterpreterNotFound { prog, base } => write!(
                f,
                "interpreter '{prog}' not found, and '{base}' is not on PATH"
            ),
            HookError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            HookError::StdoutNotObject => f.write_str("stdout is JSON but not an object"),
            HookError::StdoutNotJson(_) => f.write_str("stdout is not JSON"),
            HookError::Timeout(v) => write!(f, "timeout must be a number of seconds, not {v}"),
            HookError::Args(v) => write!(f, "args must be a list of strings, not {v}"),
            HookError::ProgramNotFound(p) => write!(f, "program '{p}' not found"),
        }
    }
}

impl std::error::Error for HookError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HookError::Read { source, .. } => Some(source),
            HookError::StdoutNotJson(e) => Some(e),
            _ => None,
        }
    }
}
