//! Running a crushrc: a POSIX shell script executed by `/bin/sh`, with the configuration commands
//! as builtins (crush(1) CONFIGURATION).
//!
//! Design: the builtins are shell aliases and functions defined by a prelude, then the file is
//! sourced. Each builtin call appends one record (the command's words, the caller's line and the
//! shell's `$PWD`) to a private temp file; nothing is applied while the script runs. When the
//! script exits 0, the Rust side reads the records and applies them in order to the
//! configuration accumulated below the file (`commands::apply`); the first invalid one fails
//! the load with `file:line`. A script that exits non-zero, or runs past its time limit (30 s,
//! `CRUSH_CONFIG_TIMEOUT` seconds to change it; its process group is killed), fails the load.
//! When a script exits, anything it left running in the background is killed too.
//!
//! The caller's line: bash and other shells with `$LINENO` give it directly. Debian's dash has no
//! `$LINENO`, so the alias expands (at the call site) to a subshell that fails a `${var:?}` test:
//! dash's error message carries the caller's line and, inside sourced files, the file's name.
//! This costs one fork per builtin call and needs no parsing of the script.
//!
//! `model large|small` without a model prints the current one: the prelude receives the models
//! accumulated so far and the builtin keeps them up to date as the script changes them.
//!
//! The same prelude gives the agent's bash tool its builtins (`wrap_command`).

use crate::proc::{self, Keep, Spec};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Default limit for a crushrc (and a `$(command)` in a config value).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// `$0` of the shell, which prefixes dash's messages.
const ARG0: &str = "crushrc";
const LINE_VAR: &str = "__crush_line_probe";

/// One builtin call.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The file that made the call (for the bash tool: None).
    pub file: Option<PathBuf>,
    pub line: Option<u32>,
    /// The command's words, the command name first.
    pub args: Vec<String>,
}

impl Record {
    /// `file:line` (or `file`) of the call.
    pub fn place(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{}:{l}", f.display()),
            (Some(f), None) => f.display().to_string(),
            (None, _) => "session".into(),
        }
    }
}

/// The time limit for scripts and command substitutions.
pub fn timeout() -> Duration {
    std::env::var("CRUSH_CONFIG_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_TIMEOUT)
}

/// The shell text defining the builtins. Expects `$1` = records file, `$2`/`$3` = the current
/// large/small model, and shifts them away.
pub fn prelude() -> String {
    let mut s = String::from(
        r#"__crush_records=$1; __crush_large=$2; __crush_small=$3; shift 3
unset __crush_line_probe
__crush_rec() {
  __crush_li=$1; __crush_bs=$2; shift 2
  { printf 'R\0%s\0%s\0%s\0%s\0' "$__crush_li" "$__crush_bs" "$PWD" "$#"
    [ $# -eq 0 ] || printf '%s\0' "$@"; } >>"$__crush_records" || return 1
}
__crush_model() {
  if [ $# -eq 4 ]; then
    case $4 in
      large) printf '%s\n' "$__crush_large"; return 0 ;;
      small) printf '%s\n' "$__crush_small"; return 0 ;;
    esac
  fi
  if [ $# -ge 5 ]; then
    case $4:$5 in
      large:--*|small:--*) ;;
      large:*) __crush_large=$5 ;;
      small:*) __crush_small=$5 ;;
    esac
  fi
  __crush_rec "$@"
}
source() {
  if [ $# -eq 0 ]; then echo "source: a file name is needed" >&2; return 2; fi
  __crush_src=$1; shift
  case $__crush_src in
    */*) ;;
    *) if [ -f "$__crush_src" ]; then __crush_src=./$__crush_src; else
         __crush_found=; __crush_ifs=$IFS; IFS=:
         for __crush_d in $PATH; do
           if [ -f "$__crush_d/$__crush_src" ]; then __crush_found=$__crush_d/$__crush_src; break; fi
         done
         IFS=$__crush_ifs
         if [ -z "$__crush_found" ]; then echo "source: $__crush_src: no such file" >&2; return 1; fi
         __crush_src=$__crush_found
       fi ;;
  esac
  if [ ! -r "$__crush_src" ]; then echo "source: $__crush_src: cannot read the file" >&2; return 1; fi
  . "$__crush_src"
}
"#,
    );
    let probe = format!(r#""${{LINENO:-$( (: "${{{LINE_VAR}:?}}") 2>&1)}}" "${{BASH_SOURCE:-}}""#);
    for name in super::commands::NAMES {
        let func = if *name == "model" {
            "__crush_model"
        } else {
            "__crush_rec"
        };
        s.push_str(&format!("alias {name}='{func} {probe} {name}'\n"));
    }
    s
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A private, empty records file in the temp dir; removed on drop.
pub struct RecordsFile {
    pub path: PathBuf,
}

impl RecordsFile {
    pub fn create() -> std::io::Result<RecordsFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "crush-records-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        Ok(RecordsFile { path })
    }

    /// Parses the records; `top` is the file that was run (None for the bash tool).
    pub fn read(&self, top: Option<&Path>) -> Result<Vec<Record>, String> {
        let bytes = std::fs::read(&self.path)
            .map_err(|e| format!("cannot read the records of the configuration commands: {e}"))?;
        parse_records(&bytes, top)
    }
}

impl Drop for RecordsFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn parse_records(bytes: &[u8], top: Option<&Path>) -> Result<Vec<Record>, String> {
    let text = String::from_utf8_lossy(bytes);
    let mut fields = text.split('\0');
    let mut out = Vec::new();
    let bad = || "the records of the configuration commands are damaged".to_string();
    loop {
        match fields.next() {
            Some("R") => {}
            Some("") | None => return Ok(out),
            Some(_) => return Err(bad()),
        }
        let lineinfo = fields.next().ok_or_else(bad)?;
        let bash_source = fields.next().ok_or_else(bad)?;
        let pwd = fields.next().ok_or_else(bad)?;
        let argc: usize = fields.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        // The first two words of the record are the line probe and BASH_SOURCE; then the args.
        let mut args = Vec::with_capacity(argc);
        for _ in 0..argc {
            args.push(fields.next().ok_or_else(bad)?.to_string());
        }
        let (line, file) = match top {
            None => (None, None),
            Some(top) => {
                let (line, named) = parse_lineinfo(lineinfo);
                let named =
                    named.or_else(|| Some(bash_source.to_string()).filter(|s| !s.is_empty()));
                let file = match named {
                    Some(f) if Path::new(&f).is_absolute() => PathBuf::from(f),
                    Some(f) => Path::new(pwd).join(f.trim_start_matches("./")),
                    None => top.to_path_buf(),
                };
                (line, Some(file))
            }
        };
        out.push(Record { file, line, args });
    }
}

/// `"12"` (bash's `$LINENO`) or dash's `crushrc: 12: ./other.rc: __crush_line_probe: ...`.
fn parse_lineinfo(s: &str) -> (Option<u32>, Option<String>) {
    let s = s.trim();
    if let Ok(n) = s.parse::<u32>() {
        return (Some(n), None);
    }
    let rest = s
        .strip_prefix(ARG0)
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(s);
    let (num, rest) = match rest.split_once(": ") {
        Some((n, r)) => (n.trim_start_matches("line ").parse::<u32>().ok(), r),
        None => return (None, None),
    };
    let file = rest
        .find(&format!("{LINE_VAR}:"))
        .map(|i| rest[..i].trim_end_matches(": ").to_string())
        .filter(|f| !f.is_empty());
    (num, file)
}

/// What a finished process left.
pub struct Finished {
    pub code: Option<i32>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `spec` with a time limit; on expiry its group is killed. When the script exits,
/// whatever it left running in its group (`sleep 3 &`) is killed too, so nothing outlives the
/// limit, and the output read so far is returned even if something outside the group still
/// holds the pipes.
pub fn run_limited(mut spec: Spec, limit: Duration) -> std::io::Result<Finished> {
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

/// The current large and small models, as the builtins print them.
pub struct Models {
    pub large: String,
    pub small: String,
}

/// Output of a successful crushrc.
pub struct RunOutput {
    pub records: Vec<Record>,
    /// What the script printed (stdout, then stderr), for the caller to pass on.
    pub output: String,
}

/// Runs the crushrc at `path` (absolute). Errors are complete messages naming the file.
pub fn run(path: &Path, models: &Models) -> Result<RunOutput, String> {
    let rec = RecordsFile::create().map_err(|e| {
        format!(
            "{}: cannot create a temp file to run it: {e}",
            path.display()
        )
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
    let fin = run_limited(spec, limit)
        .map_err(|e| format!("{}: cannot run {shell}: {e}", path.display()))?;
    if fin.timed_out {
        return Err(format!(
            "{}: still running after {} s, stopped; a crushrc must not wait for input or run long commands",
            path.display(),
            fmt_secs(limit)
        ));
    }
    match fin.code {
        Some(0) => {}
        code => return Err(script_failure(path, code, &fin.stderr)),
    }
    let records = rec
        .read(Some(path))
        .map_err(|e| format!("{}: {e}", path.display()))?;
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

/// Where the bash tool puts its records in a tool result's metadata: an array of argument
/// vectors, applied by the turn to the session's runtime layer.
pub const METADATA_KEY: &str = "session_config";

/// The bash tool's script: the prelude, then `command` evaluated with the builtins available.
/// Run it as `/bin/sh -c SCRIPT sh RECORDS LARGE SMALL COMMAND`.
pub fn wrap_command() -> String {
    format!("{}eval \"$1\"\n", prelude())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lineinfo_forms() {
        assert_eq!(parse_lineinfo("12"), (Some(12), None));
        assert_eq!(
            parse_lineinfo("crushrc: 4: __crush_line_probe: parameter not set or null"),
            (Some(4), None)
        );
        assert_eq!(
            parse_lineinfo("crushrc: 3: ./more.rc: __crush_line_probe: parameter not set or null"),
            (Some(3), Some("./more.rc".into()))
        );
    }

    #[test]
    fn records_round_trip() {
        let bytes = b"R\x00crushrc: 2: __crush_line_probe: x\x00\x00/p\x003\x00option\x00progress\x00a\nb\x00R\x007\x00/p/o.rc\x00/p\x001\x00model\x00";
        let r = parse_records(bytes, Some(Path::new("/p/crushrc"))).unwrap();
        assert_eq!(r[0].place(), "/p/crushrc:2");
        assert_eq!(r[0].args, vec!["option", "progress", "a\nb"]);
        assert_eq!(r[1].place(), "/p/o.rc:7");
        assert!(parse_records(b"X\x00", None).is_err());
    }

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
