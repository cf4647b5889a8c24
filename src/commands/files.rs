//! The file history of a session (the `files` table): `/undo` in the REPL, `/versions FILE`, and
//! `crush sessions diff ID`.

use crate::llm::Part;
use crate::store::{FileVersion, Store, StoreError};
use std::path::{Path, PathBuf};

/// Why `/undo` restored nothing, or not everything.
#[derive(Debug)]
pub(crate) enum UndoError {
    Store(StoreError),
    /// No tool changed a file in the session.
    Nothing,
    /// What the call (`tool`) wrote to `path` was too large to keep.
    AfterNotKept {
        tool: String,
        path: String,
    },
    /// The content of `path` before the call is not in the history.
    BeforeNotKept {
        tool: String,
        path: String,
    },
    /// A directory on the way to `path` is a symbolic link now.
    RouteChanged {
        tool: String,
        path: String,
    },
    /// `path` was changed outside crush since the call wrote it.
    ChangedSince {
        tool: String,
        path: String,
    },
    /// `path` is there, and not a regular file.
    NotRegular(PathBuf),
    /// A file could not be read, a directory created, a file restored or removed: what was
    /// being done ("cannot read", "cannot create", ...), to which path.
    Io(&'static str, PathBuf, std::io::Error),
}

impl std::fmt::Display for UndoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UndoError::Store(e) => write!(f, "{e}"),
            UndoError::Nothing => {
                f.write_str("Nothing to undo: no tool has changed a file in this session.")
            }
            UndoError::AfterNotKept { tool, path } => write!(
                f,
                "cannot undo the {tool} call: what it wrote to {path} was too large to keep (over {} MB); nothing was restored",
                crate::store::MAX_KEPT_BYTES >> 20
            ),
            UndoError::BeforeNotKept { tool, path } => write!(
                f,
                "cannot undo the {tool} call: the content of {path} before it is not in the history (too large to keep, or written by another program); nothing was restored"
            ),
            UndoError::RouteChanged { tool, path } => write!(
                f,
                "cannot undo the {tool} call: the way to {path} changed since (a directory on it is now a symbolic link); nothing was restored"
            ),
            UndoError::ChangedSince { tool, path } => write!(
                f,
                "cannot undo the {tool} call: {path} was changed outside crush since {tool} wrote it; \
                 nothing was restored (the file is as you left it)"
            ),
            UndoError::NotRegular(p) => write!(f, "{} is no longer a regular file", p.display()),
            UndoError::Io(doing, p, e) => write!(f, "{doing} {}: {e}", p.display()),
        }
    }
}

impl std::error::Error for UndoError {}

impl From<StoreError> for UndoError {
    fn from(e: StoreError) -> UndoError {
        UndoError::Store(e)
    }
}

/// What `path` holds now: Some(bytes), or None when there is no file. Err for anything else (a
/// directory, no permission).
fn current(path: &Path) -> Result<Option<Vec<u8>>, UndoError> {
    let cannot_read = |e| UndoError::Io("cannot read", path.to_path_buf(), e);
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(cannot_read(e)),
        Ok(m) if !m.is_file() => return Err(UndoError::NotRegular(path.to_path_buf())),
        Ok(_) => {}
    }
    std::fs::read(path).map(Some).map_err(cannot_read)
}

/// The name of the tool whose call `id` is in the session (for messages), else "a tool".
fn tool_of(store: &Store, session_id: &str, id: &str) -> String {
    let msgs = store.messages(session_id).unwrap_or_default();
    msgs.iter()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match p {
            Part::ToolCall { id: pid, name, .. } if pid == id => Some(name.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "a tool".to_string())
}

/// Undoes the session's last change made by a tool call: every file of that call gets its
/// content back (a file the call created is removed), or, when any of them changed since the
/// call wrote it (outside crush), or a content needed was too large to keep, nothing is
/// touched and the error says why. Ok: what was restored.
pub(crate) fn undo(store: &Store, session_id: &str) -> Result<String, UndoError> {
    let change = store
        .last_file_change(session_id)?
        .ok_or(UndoError::Nothing)?;
    let tool = tool_of(store, session_id, &change.tool_call_id);
    let mut plan = Vec::new();
    for (before, after) in &change.files {
        let path = Path::new(&after.path);
        let about = || (tool.clone(), after.path.clone());
        let Some(written) = after.state() else {
            let (tool, path) = about();
            return Err(UndoError::AfterNotKept { tool, path });
        };
        let Some(previous) = before.state() else {
            let (tool, path) = about();
            return Err(UndoError::BeforeNotKept { tool, path });
        };
        // The change was recorded at its resolved path: a directory on the way that became a
        // symbolic link since would carry the restore elsewhere.
        if !crate::tools::confine::same_route(path) {
            let (tool, path) = about();
            return Err(UndoError::RouteChanged { tool, path });
        }
        if current(path)?.as_deref() != written {
            let (tool, path) = about();
            return Err(UndoError::ChangedSince { tool, path });
        }
        plan.push((path, previous));
    }
    let mut done = Vec::new();
    for (path, previous) in plan {
        match previous {
            Some(bytes) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| UndoError::Io("cannot create", dir.to_path_buf(), e))?;
                }
                std::fs::write(path, bytes)
                    .map_err(|e| UndoError::Io("cannot restore", path.to_path_buf(), e))?;
                done.push(format!("restored {}", path.display()));
            }
            None => {
                std::fs::remove_file(path)
                    .map_err(|e| UndoError::Io("cannot remove", path.to_path_buf(), e))?;
                done.push(format!("removed {} (the call created it)", path.display()));
            }
        }
    }
    store.forget_file_change(session_id, &change.tool_call_id)?;
    Ok(format!(
        "Undid the last change ({tool} call {}): {}.",
        change.tool_call_id,
        done.join(", ")
    ))
}

fn describe(v: &FileVersion) -> String {
    if v.absent {
        "no file".to_string()
    } else if v.omitted {
        "content not kept (too large)".to_string()
    } else {
        format!("{} bytes", v.content.len())
    }
}

/// `/versions FILE`: the versions of one file in the session.
pub(crate) fn versions(store: &Store, session_id: &str, path: &Path) -> Result<String, StoreError> {
    let list = store.file_versions(session_id, Some(path))?;
    if list.is_empty() {
        return Ok(format!(
            "No versions of {} in this session: no tool changed it.\n",
            path.display()
        ));
    }
    let mut out = format!("{}\n", path.display());
    for v in &list {
        let by = match &v.tool_call_id {
            Some(id) => format!("written by {} ({id})", tool_of(store, session_id, id)),
            None => "found before a change".to_string(),
        };
        out.push_str(&format!(
            "  v{:<3} {}  {:<28}  {by}\n",
            v.version,
            crate::time::rfc3339_secs(v.created_at),
            describe(v)
        ));
    }
    Ok(out)
}

/// The session's changes as a unified diff: for each file, its first version in the session
/// against its latest (paths relative to `cwd` when inside it).
pub(crate) fn diff(store: &Store, session_id: &str, cwd: &Path) -> Result<String, StoreError> {
    let all = store.file_versions(session_id, None)?;
    let mut out = String::new();
    let mut paths: Vec<&str> = all.iter().map(|v| v.path.as_str()).collect();
    paths.dedup();
    for path in paths {
        let of: Vec<&FileVersion> = all.iter().filter(|v| v.path == path).collect();
        let (Some(first), Some(last)) = (of.first(), of.last()) else {
            continue;
        };
        let (old, new) = (first.state(), last.state());
        if old == new {
            continue;
        }
        let shown = Path::new(path)
            .strip_prefix(cwd)
            .map_or(path.to_string(), |r| r.display().to_string());
        let text = |s: Option<Option<&[u8]>>| -> Option<String> {
            match s {
                Some(None) => Some(String::new()),
                Some(Some(b)) => String::from_utf8(b.to_vec()).ok(),
                None => None,
            }
        };
        let label = |absent: bool, side: &str| {
            if absent {
                "/dev/null".to_string()
            } else {
                format!("{side}/{}", shown.trim_start_matches('/'))
            }
        };
        match (text(old), text(new)) {
            (Some(a), Some(b)) => {
                let d = crate::tools::diff::unified(&a, &b, &shown);
                // The hunks, under git's labels.
                let hunks: String = d.text.split_inclusive('\n').skip(2).collect();
                out.push_str(&format!(
                    "--- {}\n+++ {}\n{hunks}",
                    label(first.absent, "a"),
                    label(last.absent, "b")
                ));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
            _ => out.push_str(&format!(
                "Binary files {} and {} differ\n",
                label(first.absent, "a"),
                label(last.absent, "b")
            )),
        }
    }
    Ok(out)
}
