//! Helpers shared by the tools: parameter access, path resolution, the project boundary, the
//! read-before-write rule and output truncation.

use super::{PermissionRequest, ToolCtx, ToolError, ToolOutput};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// A required, non-empty string parameter.
pub(crate) fn req_str<'a>(input: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    match input.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(format!("parameter `{name}` must not be empty").into()),
        Some(Value::Null) | None => Err(format!("missing required parameter `{name}`").into()),
        Some(_) => Err(format!("parameter `{name}` must be a string").into()),
    }
}

/// A required string parameter that may be empty (edit's `old_string`, write's `content`).
pub(crate) fn req_str_empty_ok<'a>(input: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    match input.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(Value::Null) | None => Err(format!("missing required parameter `{name}`").into()),
        Some(_) => Err(format!("parameter `{name}` must be a string").into()),
    }
}

/// An optional string parameter; an empty string counts as absent.
pub(crate) fn opt_str<'a>(input: &'a Value, name: &str) -> Result<Option<&'a str>, ToolError> {
    match input.get(name) {
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Null) | None => Ok(None),
        Some(_) => Err(format!("parameter `{name}` must be a string").into()),
    }
}

/// An optional non-negative integer parameter (accepts integral floats and numeric strings, which
/// some models send).
pub(crate) fn opt_u64(input: &Value, name: &str) -> Result<Option<u64>, ToolError> {
    match input.get(name) {
        Some(Value::Null) | None => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(v) = n.as_u64() {
                Ok(Some(v))
            } else if let Some(f) = n.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0) {
                Ok(Some(f as u64))
            } else {
                Err(format!("parameter `{name}` must be a non-negative integer").into())
            }
        }
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s
            .trim()
            .parse::<u64>()
            .map(Some)
            .map_err(|_| format!("parameter `{name}` must be a non-negative integer").into()),
        Some(_) => Err(format!("parameter `{name}` must be a non-negative integer").into()),
    }
}

/// An optional boolean parameter (accepts "true"/"false" strings).
pub(crate) fn opt_bool(input: &Value, name: &str) -> Result<bool, ToolError> {
    match input.get(name) {
        Some(Value::Null) | None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" => Ok(true),
        Some(Value::String(s)) if s == "false" || s.is_empty() => Ok(false),
        Some(_) => Err(format!("parameter `{name}` must be a boolean").into()),
    }
}

/// Resolves a path parameter: `~` and `~/x` expand to $HOME, relative paths are relative to the
/// session's working directory, and the result is absolute and canonical — admitted by the
/// session's bounds (`confine`), the one check every file tool's path goes through: a confined
/// agent's path outside its directory is refused here.
pub(crate) fn resolve(ctx: &ToolCtx, raw: &str) -> Result<PathBuf, ToolError> {
    ctx.bounds.admit(&crate::paths::resolve_real(ctx.cwd, raw))
}

/// Resolves an optional directory parameter, defaulting to the working directory (admitted
/// like `resolve`).
pub(crate) fn resolve_or_cwd(ctx: &ToolCtx, raw: Option<&str>) -> Result<PathBuf, ToolError> {
    match raw {
        Some(r) => resolve(ctx, r),
        None => ctx.bounds.admit(ctx.cwd),
    }
}

/// Whether `path` (already resolved) lies inside the project root.
pub(crate) fn inside_project(ctx: &ToolCtx, path: &Path) -> bool {
    let root = crate::paths::canonicalize_lenient(ctx.project_root);
    path.starts_with(&root)
}

/// The permission a read-only tool needs for `path`: none inside the project, else `action`.
pub(crate) fn outside_project_permission(
    ctx: &ToolCtx,
    tool: &str,
    action: &'static str,
    path: &Path,
    what: &str,
) -> Option<PermissionRequest> {
    if inside_project(ctx, path) {
        None
    } else {
        Some(PermissionRequest {
            tool: tool.to_string(),
            action,
            path: path.to_path_buf(),
            description: format!("{what} {} (outside the project)", path.display()),
            diff: None,
            ..Default::default()
        })
    }
}

pub(crate) use crate::fsutil::file_kind;

/// Opens `path` for reading only if it is a regular file, a symbolic link at the path itself
/// included (paths from `resolve` have none left; a walk must not leave the tree through one):
/// `fsutil::open_regular`.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<(fs::File, fs::Metadata)> {
    crate::fsutil::open_regular(path, crate::fsutil::Links::Refuse)
}

/// The contents of the regular file `path` (see `open_regular`).
pub(crate) fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    crate::fsutil::read_regular(path, crate::fsutil::Links::Refuse, u64::MAX)
}

/// The content of the regular file `path` as the session sees it: the editor's buffer when
/// crush runs inside an editor that reads files (crush(1) ACP), else the disk. Either way the
/// file must exist on disk as a regular file (`open_regular`).
pub(crate) fn read_file(ctx: &ToolCtx, path: &Path) -> std::io::Result<Vec<u8>> {
    let Some(files) = ctx.files else {
        return read_regular(path);
    };
    open_regular(path)?;
    match files.read(path) {
        Some(Ok(text)) => Ok(text.into_bytes()),
        Some(Err(e)) => Err(std::io::Error::other(format!("the editor: {e}"))),
        None => read_regular(path),
    }
}

/// Modification time in nanoseconds since the epoch (negative before it).
pub(crate) fn mtime_ns(meta: &fs::Metadata) -> i64 {
    match meta.modified() {
        Ok(t) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i64,
            Err(e) => -(e.duration().as_nanos() as i64),
        },
        Err(_) => 0,
    }
}

/// Whether a file about to be modified is as the session last read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Unchanged since it was viewed (or written) in this session, or not there yet.
    Fresh,
    /// Viewed in this session, but changed on disk since (a hook, another program).
    Changed,
}

/// Why a file may not be modified now (the read-before-write rule): the model's to mend, by
/// viewing the file or choosing another.
#[derive(Debug)]
pub enum NotFresh {
    /// Its metadata cannot be read.
    Inaccessible(PathBuf, std::io::Error),
    Directory(PathBuf),
    /// It exists and was never viewed in this session.
    NotRead(PathBuf),
    /// It was viewed, and changed on disk since.
    Changed(PathBuf),
}

impl std::fmt::Display for NotFresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotFresh::Inaccessible(p, e) => write!(f, "cannot access {}: {e}", p.display()),
            NotFresh::Directory(p) => write!(f, "{} is a directory, not a file", p.display()),
            NotFresh::NotRead(p) => write!(
                f,
                "you must view the file before modifying it: use the view tool on {} first",
                p.display()
            ),
            NotFresh::Changed(p) => write!(
                f,
                "file {} was modified since it was last read; view it again before modifying it",
                p.display()
            ),
        }
    }
}

impl std::error::Error for NotFresh {}

impl From<NotFresh> for ToolError {
    fn from(e: NotFresh) -> ToolError {
        ToolError::RespondToModel(e.to_string())
    }
}

/// The read-before-write rule shared by write, edit and multiedit. Fresh when the file does not
/// exist yet; Err when it exists and was never viewed in this session.
pub(crate) fn freshness(ctx: &ToolCtx, path: &Path) -> Result<Freshness, NotFresh> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Freshness::Fresh),
        Err(e) => return Err(NotFresh::Inaccessible(path.to_path_buf(), e)),
    };
    if meta.is_dir() {
        return Err(NotFresh::Directory(path.to_path_buf()));
    }
    match ctx.reads.last_read(path) {
        None => Err(NotFresh::NotRead(path.to_path_buf())),
        Some(t) if t != mtime_ns(&meta) => Ok(Freshness::Changed),
        Some(_) => Ok(Freshness::Fresh),
    }
}

/// [`freshness`], where a file changed since it was read is an error too (the write tool,
/// which replaces the whole file).
pub(crate) fn check_fresh(ctx: &ToolCtx, path: &Path) -> Result<(), NotFresh> {
    match freshness(ctx, path)? {
        Freshness::Fresh => Ok(()),
        Freshness::Changed => Err(NotFresh::Changed(path.to_path_buf())),
    }
}

/// `out` with what the language servers report about `path`, which was just written: appended
/// to the content, and under `diagnostics` in the structured result (which hooks in Claude
/// Code's shape get).
pub(crate) fn with_diagnostics(ctx: &ToolCtx, path: &Path, mut out: ToolOutput) -> ToolOutput {
    let Some(d) = ctx.diagnostics else {
        return out;
    };
    let report = d.changed(path, &ctx.cancel);
    if report.is_empty() {
        return out;
    }
    if let serde_json::Value::Object(m) = &mut out.structured {
        m.insert("diagnostics".into(), report.trim().into());
    }
    out.content.push_str(&report);
    out
}

/// Records the current modification time of `path` as read.
pub(crate) fn record_current(ctx: &ToolCtx, path: &Path) {
    if let Ok(meta) = fs::metadata(path) {
        ctx.reads.record_read(path, mtime_ns(&meta));
    }
}

/// Keeps the head and tail of `s` when it has more than `max` characters, with a marker saying how
/// many characters were dropped (`extra_dropped` adds characters already dropped upstream).
pub(crate) fn truncate_middle(s: &str, max: usize, extra_dropped: usize) -> String {
    let total = s.chars().count();
    if total <= max {
        return s.to_string();
    }
    let half = max / 2;
    let head_end = s.char_indices().nth(half).map_or(s.len(), |(i, _)| i);
    let tail_start = s
        .char_indices()
        .nth(total - (max - half))
        .map_or(s.len(), |(i, _)| i);
    let dropped = total - max + extra_dropped;
    format!(
        "{}\n\n[... {dropped} characters truncated ...]\n\n{}",
        &s[..head_end],
        &s[tail_start..]
    )
}

/// Cuts a single line to `max` characters, marking the cut.
pub(crate) fn truncate_line(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}... [line truncated]", &s[..i]),
        None => s.to_string(),
    }
}

/// A short display form of a path: relative to the working directory when inside it.
pub(crate) fn display_path(ctx: &ToolCtx, path: &Path) -> String {
    let cwd = crate::paths::canonicalize_lenient(ctx.cwd);
    match path.strip_prefix(&cwd) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// Whether the first 8 KB of `data` contain a NUL byte.
pub(crate) fn looks_binary(data: &[u8]) -> bool {
    data[..data.len().min(8192)].contains(&0)
}

/// `input[key]` when it is a non-blank string (for titles and locations).
pub(crate) fn arg<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// The first line of `s`, at most `max` characters, marked when cut.
pub(crate) fn first_line(s: &str, max: usize) -> String {
    let line = s.trim().lines().next().unwrap_or("");
    let short: String = line.chars().take(max).collect();
    if short.len() < s.trim().len() {
        format!("{short}…")
    } else {
        short
    }
}

/// `raw` as the user reads it: relative to `cwd` when inside it.
pub(crate) fn shown_path(cwd: &Path, raw: &str) -> String {
    let p = crate::paths::resolve_real(cwd, raw);
    let base = crate::paths::resolve_real(cwd, ".");
    match p.strip_prefix(&base) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => p.display().to_string(),
    }
}

/// `input[key]` as a path the user reads (`shown_path`).
pub(crate) fn shown_arg(input: &Value, key: &str, cwd: &Path) -> Option<String> {
    Some(shown_path(cwd, arg(input, key)?))
}

/// ` in DIR` for a call limited to `input[key]`, else "".
pub(crate) fn within_arg(input: &Value, key: &str, cwd: &Path) -> String {
    shown_arg(input, key, cwd)
        .map(|p| format!(" in {p}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::Fixture;

    #[test]
    fn params() {
        let v = serde_json::json!({"a": "x", "e": "", "n": 5, "f": 3.0, "s": "7", "b": "true"});
        assert_eq!(req_str(&v, "a").unwrap(), "x");
        assert!(req_str(&v, "e").is_err());
        assert!(req_str(&v, "zz").is_err());
        assert_eq!(req_str_empty_ok(&v, "e").unwrap(), "");
        assert_eq!(opt_str(&v, "e").unwrap(), None);
        assert_eq!(opt_u64(&v, "n").unwrap(), Some(5));
        assert_eq!(opt_u64(&v, "f").unwrap(), Some(3));
        assert_eq!(opt_u64(&v, "s").unwrap(), Some(7));
        assert!(opt_u64(&v, "a").is_err());
        assert!(opt_bool(&v, "b").unwrap());
        assert!(!opt_bool(&v, "zz").unwrap());
    }

    #[test]
    fn truncation() {
        let s = "a".repeat(50) + &"b".repeat(50);
        let t = truncate_middle(&s, 20, 0);
        assert!(t.starts_with("aaaaaaaaaa\n"));
        assert!(t.ends_with("\nbbbbbbbbbb"));
        assert!(t.contains("[... 80 characters truncated ...]"));
        assert_eq!(truncate_middle("short", 20, 0), "short");
        assert_eq!(truncate_line("héllo", 2), "hé... [line truncated]");
    }

    #[test]
    fn resolving_paths() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let root = fs::canonicalize(fx.root()).unwrap();
        assert_eq!(
            resolve(&ctx, "a/../b/./c.txt").unwrap(),
            root.join("b/c.txt")
        );
        assert!(inside_project(&ctx, &resolve(&ctx, "x").unwrap()));
        assert!(!inside_project(&ctx, &resolve(&ctx, "../outside").unwrap()));
        assert_eq!(
            resolve(&ctx, "/etc/../etc").unwrap(),
            fs::canonicalize("/etc").unwrap()
        );
    }
}
