//! The `write` tool (create or overwrite a file), and `FileChange`, the planned change to one file
//! shared by write, edit and multiedit: its diff, its permission request and applying it.

use super::ToolError;
use super::common::{
    check_fresh, display_path, read_file, read_regular, record_current, req_str, req_str_empty_ok,
    resolve, with_diagnostics,
};
use super::diff::{self, Diff};
use super::{Content, PermissionRequest, Tool, ToolCtx, ToolOutput};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};

pub(crate) struct Write;

/// A validated change to one file, computed before asking permission and again before writing.
#[derive(Clone, Debug)]
pub(crate) struct FileChange {
    pub path: PathBuf,
    /// Current content (None: the file does not exist yet).
    pub old: Option<String>,
    pub new: String,
}

impl FileChange {
    pub(crate) fn diff(&self, ctx: &ToolCtx) -> Diff {
        diff::unified(
            self.old.as_deref().unwrap_or(""),
            &self.new,
            &display_path(ctx, &self.path),
        )
    }

    pub(crate) fn permission(&self, tool: &str, ctx: &ToolCtx) -> PermissionRequest {
        let verb = if self.old.is_some() {
            "Modify"
        } else {
            "Create"
        };
        PermissionRequest {
            tool: tool.to_string(),
            action: "write",
            path: self.path.clone(),
            description: format!("{verb} {}", self.path.display()),
            diff: Some(self.diff(ctx).text),
            ..Default::default()
        }
    }

    /// Writes the new content (creating parent directories), records the new modification
    /// time as read, so further edits need no new view, and the change in the session's file
    /// history (the bytes before, exactly, for undo).
    pub(crate) fn apply(&self, ctx: &ToolCtx) -> Result<Diff, ToolError> {
        self.write(ctx, ctx.files)
    }

    /// [`apply`](Self::apply) to the disk whatever the editor offers: for a change computed on
    /// the disk's content (what a language server was sent).
    pub(crate) fn apply_on_disk(&self, ctx: &ToolCtx) -> Result<Diff, ToolError> {
        self.write(ctx, None)
    }

    fn write(&self, ctx: &ToolCtx, files: Option<&dyn super::Files>) -> Result<Diff, ToolError> {
        let d = self.diff(ctx);
        if let Some(parent) = self.path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create directory {}: {e}", parent.display()))?;
        }
        let before = read_regular(&self.path).ok();
        match files.and_then(|f| f.write(self)) {
            Some(written) => written
                .map_err(|e| format!("cannot write {} in the editor: {e}", self.path.display()))?,
            None => fs::write(&self.path, &self.new)
                .map_err(|e| format!("cannot write {}: {e}", self.path.display()))?,
        }
        record_current(ctx, &self.path);
        let before = match &before {
            Some(b) => Content::Bytes(b),
            None => Content::Absent,
        };
        ctx.session
            .file_changed(&self.path, before, Content::Bytes(self.new.as_bytes()));
        Ok(d)
    }
}

/// A file's bytes as text (None when it does not exist).
fn text_or_none(read: std::io::Result<Vec<u8>>, path: &Path) -> Result<Option<String>, ToolError> {
    match read {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| format!("{} is not valid UTF-8 text", path.display()).into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display()).into()),
    }
}

/// Reads the current content of a file that must be text (None when it does not exist), as the
/// session sees it: an editor's buffer inside one (`read_file`).
pub(crate) fn read_existing(ctx: &ToolCtx, path: &Path) -> Result<Option<String>, ToolError> {
    text_or_none(read_file(ctx, path), path)
}

/// [`read_existing`] from the disk whatever the editor offers (what a language server was
/// sent).
pub(crate) fn read_existing_on_disk(path: &Path) -> Result<Option<String>, ToolError> {
    text_or_none(read_regular(path), path)
}

fn plan(input: &Value, ctx: &ToolCtx) -> Result<FileChange, ToolError> {
    let path = resolve(ctx, req_str(input, "file_path")?)?;
    let content = req_str_empty_ok(input, "content")?;
    if path.is_dir() {
        return Err(format!("{} is a directory", path.display()).into());
    }
    check_fresh(ctx, &path)?;
    let old = match read_file(ctx, &path) {
        Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read {}: {e}", path.display()).into()),
    };
    if old.as_deref() == Some(content) {
        return Err(format!(
            "{} already contains exactly this content; nothing to write",
            path.display()
        )
        .into());
    }
    Ok(FileChange {
        path,
        old,
        new: content.to_string(),
    })
}

/// The result of a tool that changed a file: `content` for the model, the diff as metadata, the
/// change in Claude Code's shape for hooks (`change_structured`, with the tool's own `extra`
/// fields), and the language servers' diagnostics of the file.
pub(crate) fn change_output(
    ctx: &ToolCtx,
    change: &FileChange,
    d: &Diff,
    content: String,
    extra: Value,
) -> ToolOutput {
    with_diagnostics(
        ctx,
        &change.path,
        ToolOutput {
            content,
            is_error: false,
            metadata: change_metadata(d, &change.path),
            image: None,
            structured: change_structured(change, d, extra),
        },
    )
}

/// What every file change reports in Claude Code's shape (crush(1) HOOKS): the file, its
/// content before (null for a new file), the hunks; `extra` adds the tool's own fields.
fn change_structured(change: &FileChange, d: &Diff, extra: Value) -> Value {
    let mut v = json!({
        "filePath": change.path.display().to_string(),
        "originalFile": change.old,
        "structuredPatch": diff::structured_patch(&d.text),
        "userModified": false,
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}

pub(crate) fn change_metadata(d: &Diff, path: &std::path::Path) -> Value {
    json!({
        "file_path": path.display().to_string(),
        "diff": d.text,
        "additions": d.additions,
        "removals": d.removals,
    })
}

impl Tool for Write {
    fn name(&self) -> &'static str {
        "write"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Edit
    }

    fn read_only(&self) -> bool {
        false
    }

    fn claude_name(&self) -> Option<String> {
        Some("Write".into())
    }

    fn title(&self, input: &Value, cwd: &Path) -> String {
        let p = super::common::shown_arg(input, "file_path", cwd).unwrap_or_default();
        format!("Write {p}").trim_end().to_string()
    }

    fn locations(&self, input: &Value, cwd: &Path) -> Vec<super::Location> {
        super::Location::of(input, "file_path", cwd)
            .into_iter()
            .collect()
    }

    fn description(&self) -> String {
        "Writes a file with the given content, creating it (and missing parent directories) or \
         replacing it entirely.\n\
         \n\
         - An existing file must have been read with view first in this session, and must not \
         have changed since; otherwise view it again.\n\
         - Prefer edit or multiedit for changes to part of an existing file; use write for new \
         files or complete rewrites.\n\
         - `file_path` is absolute or relative to the working directory."
            .to_string()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to write"},
                "content": {"type": "string", "description": "The complete new content"}
            },
            "required": ["file_path", "content"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        Ok(Some(plan(input, ctx)?.permission(self.name(), ctx)))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let change = plan(input, ctx)?;
        let d = change.apply(ctx)?;
        let content = format!(
            "File successfully written: {} ({} lines added, {} removed)",
            change.path.display(),
            d.additions,
            d.removals
        );
        let kind = if change.old.is_some() {
            "update"
        } else {
            "create"
        };
        let extra = json!({"type": kind, "content": change.new});
        Ok(change_output(ctx, &change, &d, content, extra))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::common::mtime_ns;
    use crate::tools::testutil::Fixture;
    use crate::tools::testutil::Out;
    use crate::tools::view::View;

    #[test]
    fn creates_new_files_with_parents() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let input = json!({"file_path": "a/b/new.txt", "content": "hello\n"});
        let req = Write.permission(&input, &ctx).unwrap().unwrap();
        assert_eq!(req.action, "write");
        assert!(req.diff.unwrap().contains("+hello"));
        let out = Write.run(&input, &ctx).out();
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(fx.read("a/b/new.txt"), "hello\n");
        assert_eq!(out.metadata["additions"], 1);
        // The write counts as a read: a second write needs no view.
        let out = Write
            .run(
                &json!({"file_path": "a/b/new.txt", "content": "bye\n"}),
                &ctx,
            )
            .out();
        assert!(!out.is_error, "{}", out.content);
        // Both changes reach the session's file history, the first from "no file".
        let p = fx.path("a/b/new.txt");
        assert_eq!(
            *fx.reads.changes.lock().unwrap(),
            [
                (p.clone(), None, Some(b"hello\n".to_vec())),
                (p, Some(b"hello\n".to_vec()), Some(b"bye\n".to_vec())),
            ]
        );
    }

    #[test]
    fn stale_and_unread_files_are_refused() {
        let fx = Fixture::new();
        fx.write("f.txt", "one\n");
        let ctx = fx.ctx();
        let input = json!({"file_path": "f.txt", "content": "two\n"});
        let out = Write.run(&input, &ctx).out();
        assert!(out.is_error);
        assert!(
            out.content.contains("must view the file"),
            "{}",
            out.content
        );
        assert!(Write.permission(&input, &ctx).is_err());

        assert!(
            !View
                .run(&json!({"file_path": "f.txt"}), &ctx)
                .out()
                .is_error
        );
        fx.write("f.txt", "changed\n");
        fx.age("f.txt", 10);
        let out = Write.run(&input, &ctx).out();
        assert!(
            out.content.contains("modified since it was last read"),
            "{}",
            out.content
        );
        assert_eq!(fx.read("f.txt"), "changed\n");

        assert!(
            !View
                .run(&json!({"file_path": "f.txt"}), &ctx)
                .out()
                .is_error
        );
        let out = Write.run(&input, &ctx).out();
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(fx.read("f.txt"), "two\n");
        let out = Write.run(&input, &ctx).out();
        assert!(out.content.contains("already contains"));
    }

    #[test]
    fn permission_names_the_symlink_target() {
        use crate::tools::edit::Edit;
        use crate::tools::multiedit::MultiEdit;
        use crate::tools::testutil::within;
        let fx = Fixture::new();
        fx.write("etc/conf", "x = 1\n");
        fs::create_dir(fx.path("proj")).unwrap();
        fx.symlink(&fx.path("etc/conf"), "proj/conf");
        fx.symlink(&fx.path("etc/new.txt"), "proj/new.txt");
        fx.symlink(&fx.path("etc"), "proj/etcdir");
        fx.mkfifo("proj/pipe");
        let proj = fx.path("proj");
        let ctx = fx.ctx_in(&proj);
        let target = fx.path("etc/conf");
        ctx.reads
            .record_read(&target, mtime_ns(&fs::metadata(&target).unwrap()));
        let cases: [(&dyn Tool, Value, &str); 5] = [
            (
                &Write,
                json!({"file_path": "conf", "content": "y"}),
                "etc/conf",
            ),
            (
                &Write,
                json!({"file_path": "new.txt", "content": "y"}),
                "etc/new.txt",
            ),
            (
                &Write,
                json!({"file_path": "etcdir/z", "content": "y"}),
                "etc/z",
            ),
            (
                &Edit,
                json!({"file_path": "conf", "old_string": "1", "new_string": "2"}),
                "etc/conf",
            ),
            (
                &MultiEdit,
                json!({"file_path": "conf", "edits": [{"old_string": "1", "new_string": "2"}]}),
                "etc/conf",
            ),
        ];
        for (tool, input, real) in cases {
            let req = tool.permission(&input, &ctx).unwrap().expect(real);
            assert_eq!(req.action, "write");
            assert_eq!(req.path, fx.path(real), "{input}");
            assert!(
                req.description
                    .ends_with(&fx.path(real).display().to_string())
            );
        }
        // Creating over a FIFO reads it first: refused instead of blocking.
        let err = within(10, &proj, |ctx| {
            Edit.permission(
                &json!({"file_path": "pipe", "old_string": "", "new_string": "x"}),
                ctx,
            )
        })
        .unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
    }
}
