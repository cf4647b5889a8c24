//! Running a crushrc: a shell script executed by crush's shell (bash when it is on PATH, else
//! /bin/sh; `proc::shell_path`), with the configuration commands
//! as builtins (crush(1) CONFIGURATION).
//!
//! Design: the builtins are shell aliases and functions defined by a prelude (`crate::rcshell`),
//! then the file is sourced. Each builtin call appends one record (the command's words, the
//! caller's line and the shell's `$PWD`) to a private temp file; nothing is applied while the
//! script runs. When the script exits 0, the Rust side reads the records and applies them in order to the
//! configuration accumulated below the file (`commands::apply`); the first invalid one fails
//! the load with `file:line`. A script that exits non-zero, or runs past its time limit (30 s,
//! `CRUSH_CONFIG_TIMEOUT` seconds to change it; its process group is killed), fails the load.
//! When a script exits, anything it left running in the background is killed too.
//!
use crate::proc::{self, Keep, Spec};
use crate::rcshell::{ARG0, Models, Record, RecordsError, RecordsFile, prelude};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default limit for a crushrc (and a `$(command)` in a config value).
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The time limit for scripts and command substitutions.
pub(crate) fn timeout() -> Duration {
    std::env::var("CRUSH_CONFIG_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_TIMEOUT)
}

/// What a finished process left.
pub(crate) struct Finished {
    pub code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `spec` with a time limit; on expiry its group is killed. When the script exits,
/// whatever it left running in its group (`sleep 3 &`) is killed too, so nothing outlives the
/// limit, and the output read so far is returned even if something outside the group still
/// holds the pipes.
pub(crate) fn run_limited(mut spec: Spec, limit: Duration) -> std::io::Result<Finished> {
    spec.timeout = Some(limit);
    spec.kill_leftovers = true;
    spec.kill_grace = Duration::ZERO;
    spec.linger = Duration::from_millis(500);
    spec.output_cap = 64 * 1024;
    spec.keep = Keep::Head;
    let r = proc::run(&spec)?;
    Ok(Finished {
        code: r.exit_code,
        timed_out: r.timed_out,
        stdout: r.stdout_text(),
        stderr: r.stderr_text(),
    })
}

/// Output of a successful crushrc.
pub(crate) struct RunOutput {
    pub records: Vec<Record>,
    /// What the script printed (stdout, then stderr), for the caller to pass on.
    pub output: String,
}

/// Runs the crushrc at `path` (absolute). Errors are complete messages naming the file.
/// Why a crushrc did not give its records; each message starts with the file (and, where the
/// shell names one, the line).
#[derive(Debug)]
pub(crate) enum CrushrcError {
    /// No temporary records file could be made.
    TempFile { path: PathBuf, source: io::Error },
    /// The shell could not be started.
    Spawn {
        path: PathBuf,
        shell: String,
        source: io::Error,
    },
    /// Still running at the time limit; stopped.
    TimedOut { path: PathBuf, limit: Duration },
    /// The script failed: its exit status (None: a signal) and what it wrote to stderr.
    Failed {
        path: PathBuf,
        code: Option<i32>,
        stderr: String,
    },
    /// The records the script left could not be read.
    Records { path: PathBuf, source: RecordsError },
}

impl fmt::Display for CrushrcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CrushrcError::TempFile { path, source } => write!(
                f,
                "{}: cannot create a temp file to run it: {source}",
                path.display()
            ),
            CrushrcError::Spawn {
                path,
                shell,
                source,
            } => write!(f, "{}: cannot run {shell}: {source}", path.display()),
            CrushrcError::TimedOut { path, limit } => write!(
                f,
                "{}: still running after {} s, stopped; a crushrc must not wait for input or run long commands",
                path.display(),
                fmt_secs(*limit)
            ),
            CrushrcError::Failed { path, code, stderr } => {
                f.write_str(&script_failure(path, *code, stderr))
            }
            CrushrcError::Records { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for CrushrcError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CrushrcError::TempFile { source, .. } | CrushrcError::Spawn { source, .. } => {
                Some(source)
            }
            CrushrcError::Records { source, .. } => Some(source),
            CrushrcError::TimedOut { .. } | CrushrcError::Failed { .. } => None,
        }
    }
}

pub(crate) fn run(path: &Path, models: &Models) -> Result<RunOutput, CrushrcError> {
    let rec = RecordsFile::create().map_err(|source| CrushrcError::TempFile {
        path: path.to_path_buf(),
        source,
    })?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    let script = format!("{}. \"$1\"\n", prelude());
    let shell = proc::shell_path().to_string_lossy().into_owned();
    let argv = vec![
        shell.clone(),
        "-c".into(),
        script,
        ARG0.into(),
        rec.path.to_string_lossy().into_owned(),
        models.large.clone(),
        models.small.clone(),
        path.to_string_lossy().into_owned(),
    ];
    let mut spec = Spec::exec(argv, dir);
    spec.env
        .push(("CRUSH_VERSION".into(), env!("CARGO_PKG_VERSION").into()));
    let limit = timeout();
    let fin = run_limited(spec, limit).map_err(|source| CrushrcError::Spawn {
        path: path.to_path_buf(),
        shell: shell.clone(),
        source,
    })?;
    if fin.timed_out {
        return Err(CrushrcError::TimedOut {
            path: path.to_path_buf(),
            limit,
        });
    }
    match fin.code {
        Some(0) => {}
        code => {
            return Err(CrushrcError::Failed {
                path: path.to_path_buf(),
                code,
                stderr: fin.stderr,
            });
        }
    }
    let records = rec
        .read(Some(path))
        .map_err(|source| CrushrcError::Records {
            path: path.to_path_buf(),
            source,
        })?;
    let mut output = fin.stdout;
    output.push_str(&fin.stderr);
    Ok(RunOutput { records, output })
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s}")
    }
}

/// `file:line: message` from the shell's last complaint, else the exit status.
fn script_failure(path: &Path, code: Option<i32>, stderr: &str) -> String {
    let status = match code {
        Some(c) => format!("exited with status {c}"),
        None => "was killed by a signal".to_string(),
    };
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    // dash: "crushrc: 3: /p/crushrc: Syntax error: ..."; bash: "/p/crushrc: line 3: ...".
    let (line, file, msg) = parse_complaint(last, path);
    match (line, msg) {
        (Some(l), Some(m)) => format!("{}:{l}: {m} (the script {status})", file.display()),
        _ if !last.is_empty() => {
            format!("{}: the script {status}: {}", path.display(), last.trim())
        }
        _ => format!(
            "{}: the script {status} (the last command failed; end the file with 'true' if that is expected)",
            path.display()
        ),
    }
}

fn parse_complaint(line: &str, top: &Path) -> (Option<u32>, PathBuf, Option<String>) {
    let top_s = top.to_string_lossy();
    let rest = line.strip_prefix(&format!("{ARG0}: ")).unwrap_or(line);
    let rest = rest.strip_prefix(&format!("{top_s}: ")).unwrap_or(rest);
    let Some((num, rest)) = rest.split_once(": ") else {
        return (None, top.to_path_buf(), None);
    };
    let Ok(n) = num.trim_start_matches("line ").parse::<u32>() else {
        return (None, top.to_path_buf(), None);
    };
    // dash names the sourced file after the line number.
    let (file, msg) = match rest.split_once(": ") {
        Some((f, m)) if f.starts_with('/') || f.starts_with("./") => (PathBuf::from(f), m),
        _ => (top.to_path_buf(), rest),
    };
    (Some(n), file, Some(msg.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complaints() {
        let top = Path::new("/p/crushrc");
        let m = script_failure(
            top,
            Some(2),
            "crushrc: 3: /p/crushrc: Syntax error: end of file unexpected (expecting \"fi\")\n",
        );
        assert!(m.starts_with("/p/crushrc:3: Syntax error"), "{m}");
        let m = script_failure(top, Some(1), "");
        assert!(m.contains("exited with status 1"), "{m}");
    }
}
