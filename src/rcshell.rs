//! The shell side of the configuration commands: the prelude that makes `option`, `model`,
//! `permissions`, `provider`, `hook`, `mcp` and `lsp` shell builtins, and the records those
//! builtins write. A crushrc (`config::crushrc`) and the agent's bash tool run their scripts with
//! this prelude; the caller applies the records afterwards.
//!
//! The shell is `proc::shell_path` (bash when it is on PATH); under bash the prelude turns alias
//! expansion on, which bash leaves off in scripts.
//!
//! The caller's line: bash and other shells with `$LINENO` give it directly. Debian's dash has no
//! `$LINENO`, so the alias expands (at the call site) to a subshell that fails a `${var:?}` test:
//! dash's error message carries the caller's line and, inside sourced files, the file's name.
//! This costs one fork per builtin call and needs no parsing of the script.
//!
//! `model large|small` without a model prints the current one: the prelude receives the models
//! accumulated so far and the builtin keeps them up to date as the script changes them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The command names a crushrc (and the bash tool's shell) gets as builtins.
pub(crate) const NAMES: &[&str] = &[
    "option",
    "model",
    "permissions",
    "provider",
    "hook",
    "mcp",
    "lsp",
];

/// `$0` of the shell, which prefixes dash's messages.
pub(crate) const ARG0: &str = "crushrc";
const LINE_VAR: &str = "__crush_line_probe";

/// One builtin call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    /// The file that made the call (for the bash tool: None).
    pub file: Option<PathBuf>,
    pub line: Option<u32>,
    /// The command's words, the command name first.
    pub args: Vec<String>,
}

impl Record {
    /// `file:line` (or `file`) of the call.
    pub(crate) fn place(&self) -> String {
        match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{}:{l}", f.display()),
            (Some(f), None) => f.display().to_string(),
            (None, _) => "session".into(),
        }
    }
}

/// The shell text defining the builtins. Expects `$1` = records file, `$2`/`$3` = the current
/// large/small model, and shifts them away.
pub(crate) fn prelude() -> String {
    let mut s = String::from(
        r#"__crush_records=$1; __crush_large=$2; __crush_small=$3; shift 3
[ -z "${BASH_VERSION:-}" ] || shopt -s expand_aliases
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
    for name in NAMES {
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

/// Where the records files live: `run/` in the global data directory (crush(1) FILES), fixed the
/// first time it is asked for — `main` asks before any configuration is read, so nothing a
/// configuration sets can move it.
pub(crate) fn run_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if cfg!(test) {
            // Unit tests never touch the user's data directory.
            // SAFETY: getuid cannot fail.
            let uid = unsafe { libc::getuid() };
            std::env::temp_dir().join(format!("crush-unit-tests-run-{uid}"))
        } else {
            crate::paths::global_data_dir().join("run")
        }
    })
}

const RECORDS_PREFIX: &str = "records-";

/// The run directory, created (0700) and checked: a real directory, no one else's to read. The
/// first call of the process also removes the records files whose process is gone (a crush
/// killed before it could clean up).
fn prepared_run_dir() -> std::io::Result<&'static Path> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    static CLEANED: AtomicBool = AtomicBool::new(false);
    let dir = run_dir();
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    if !CLEANED.swap(true, Ordering::SeqCst) {
        remove_orphans(dir);
    }
    Ok(dir)
}

/// Removes the records files in `dir` whose owning process no longer exists.
fn remove_orphans(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(RECORDS_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
            .filter(|&p| p > 0)
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A private, empty records file in the run directory (`run_dir`); removed on drop.
pub(crate) struct RecordsFile {
    pub path: PathBuf,
}

impl RecordsFile {
    pub(crate) fn create() -> std::io::Result<RecordsFile> {
        Self::create_in(None)
    }

    /// `create`, in `dir` instead of the run directory when given: a sandboxed command can
    /// write only its sandbox's private directory (crush(1) SECURITY, sandbox).
    pub(crate) fn create_in(dir: Option<&Path>) -> std::io::Result<RecordsFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = match dir {
            Some(d) => d,
            None => prepared_run_dir()?,
        };
        let path = dir.join(format!(
            "{RECORDS_PREFIX}{}-{}-{nanos}",
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
    pub(crate) fn read(&self, top: Option<&Path>) -> Result<Vec<Record>, RecordsError> {
        let bytes = std::fs::read(&self.path).map_err(RecordsError::Read)?;
        parse_records(&bytes, top)
    }
}

/// Why the records of a run could not be had.
#[derive(Debug)]
pub(crate) enum RecordsError {
    /// The records file could not be read.
    Read(std::io::Error),
    /// The file is not a sequence of records (something else wrote to it).
    Damaged,
}

impl std::fmt::Display for RecordsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordsError::Read(e) => {
                write!(
                    f,
                    "cannot read the records of the configuration commands: {e}"
                )
            }
            RecordsError::Damaged => {
                f.write_str("the records of the configuration commands are damaged")
            }
        }
    }
}

impl std::error::Error for RecordsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecordsError::Read(e) => Some(e),
            RecordsError::Damaged => None,
        }
    }
}

impl Drop for RecordsFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn parse_records(bytes: &[u8], top: Option<&Path>) -> Result<Vec<Record>, RecordsError> {
    let text = String::from_utf8_lossy(bytes);
    let mut fields = text.split('\0');
    let mut out = Vec::new();
    let bad = || RecordsError::Damaged;
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

/// The current large and small models, as the builtins print them.
pub(crate) struct Models {
    pub large: String,
    pub small: String,
}

/// Where the bash tool puts its records in a tool result's metadata: an array of argument
/// vectors, applied by the turn to the session's runtime layer.
pub(crate) const METADATA_KEY: &str = "session_config";

/// Whether `command` may call a builtin: it names one of `NAMES`, or sources a file (which
/// could). Anything else runs without the prelude.
pub(crate) fn may_call_builtin(command: &str) -> bool {
    command
        .split(|c: char| c.is_whitespace() || ";&|()<>`'\"{}$".contains(c))
        .any(|w| NAMES.contains(&w) || w == "source" || w == ".")
}

/// The bash tool's script: the prelude, then `command` evaluated with the builtins available.
/// Run it as `SHELL -c SCRIPT sh RECORDS LARGE SMALL COMMAND` (`proc::shell_path`).
pub(crate) fn wrap_command() -> String {
    format!("{}eval \"$1\"\n", prelude())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_recognised_as_words() {
        assert!(may_call_builtin("permissions allow bash"));
        assert!(may_call_builtin("cd x && model large a/b"));
        assert!(may_call_builtin(". ./env.sh"));
        assert!(may_call_builtin("if true; then option progress false; fi"));
        assert!(!may_call_builtin("echo step 1"));
        assert!(!may_call_builtin("python train_model.py --option-file x"));
        assert!(!may_call_builtin("ls ./src"));
    }

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
    fn records_files_live_in_a_private_run_dir_and_orphans_are_removed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let orphan = dir.path().join(format!("{RECORDS_PREFIX}999999999-0-0"));
        let mine = dir
            .path()
            .join(format!("{RECORDS_PREFIX}{}-9-9", std::process::id()));
        let other = dir.path().join("unrelated");
        for f in [&orphan, &mine, &other] {
            std::fs::write(f, "").unwrap();
        }
        remove_orphans(dir.path());
        assert!(!orphan.exists());
        assert!(mine.exists() && other.exists());

        let rec = RecordsFile::create().unwrap();
        assert!(rec.path.starts_with(run_dir()));
        let mode = std::fs::metadata(run_dir()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let path = rec.path.clone();
        drop(rec);
        assert!(!path.exists());
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
}
