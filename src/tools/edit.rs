//! The `edit` tool: replaces an exact string in a file (or creates a file when `old_string` is
//! empty). Shares the replacement logic with multiedit.

use super::ToolError;
use super::common::{Freshness, freshness, opt_bool, req_str, req_str_empty_ok, resolve};
use super::whitespace::CORRECTED_NOTE;
use super::write::{FileChange, change_output, read_existing};
use super::{PermissionRequest, Tool, ToolCtx, ToolOutput};
use serde_json::{Value, json};
use std::path::Path;

pub(crate) struct Edit;

/// What [`replace_in`] made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Replaced {
    pub content: String,
    pub count: usize,
    /// `old` matched only apart from whitespace (crush(1) TOOLS, edit).
    pub whitespace_corrected: bool,
}

/// Why [`replace_in`] made no replacement: the model's `old_string` does not fit the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NoReplace {
    EmptyOld,
    Identical,
    /// It matches only apart from whitespace, where the file already has `new`.
    NoChange,
    NotFound,
    /// It occurs this many times, and `replace_all` is not set.
    Ambiguous(usize),
}

impl std::fmt::Display for NoReplace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoReplace::EmptyOld => {
                f.write_str("old_string must not be empty when editing an existing file")
            }
            NoReplace::Identical => {
                f.write_str("old_string and new_string are identical; nothing to change")
            }
            NoReplace::NoChange => f.write_str(
                "old_string matches the file only apart from whitespace, and the edit would \
                 leave it unchanged",
            ),
            NoReplace::NotFound => f.write_str(
                "old_string not found in the file. It must match exactly, including whitespace, \
                 indentation and line breaks; view the file again and copy the exact text",
            ),
            NoReplace::Ambiguous(n) => write!(
                f,
                "old_string appears {n} times in the file. Add more surrounding lines to make it \
                 unique, or set replace_all to true to replace every occurrence"
            ),
        }
    }
}

impl std::error::Error for NoReplace {}

/// Replaces `old` by `new` in `content`: exactly one occurrence unless `replace_all`. When the
/// file uses CRLF line endings and the strings use LF, they are converted. When `old` is not in
/// the file as written, whole lines equal to it apart from whitespace are the match, if that
/// place is unique (`whitespace::replace`).
pub(crate) fn replace_in(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<Replaced, NoReplace> {
    if old.is_empty() {
        return Err(NoReplace::EmptyOld);
    }
    if old == new {
        return Err(NoReplace::Identical);
    }
    let (given_old, given_new) = (old, new);
    let mut old = old.to_string();
    let mut new = new.to_string();
    let mut count = content.matches(old.as_str()).count();
    if count == 0 && content.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
        old = old.replace('\n', "\r\n");
        new = new.replace("\r\n", "\n").replace('\n', "\r\n");
        count = content.matches(old.as_str()).count();
    }
    match count {
        0 => match super::whitespace::replace(content, given_old, given_new, replace_all) {
            Some((out, n)) if out != content => Ok(Replaced {
                content: out,
                count: n,
                whitespace_corrected: true,
            }),
            Some(_) => Err(NoReplace::NoChange),
            None => Err(NoReplace::NotFound),
        },
        n if n > 1 && !replace_all => Err(NoReplace::Ambiguous(n)),
        n => {
            let out = if replace_all {
                content.replace(old.as_str(), &new)
            } else {
                content.replacen(old.as_str(), &new, 1)
            };
            Ok(Replaced {
                content: out,
                count: n,
                whitespace_corrected: false,
            })
        }
    }
}

/// A file about to be edited: its current content, and whether it changed since the session
/// last read it.
pub(crate) struct ForEdit {
    pub content: String,
    pub changed: bool,
}

impl ForEdit {
    /// An edit that does not apply to the content: when the file changed since it was read,
    /// the error says so first (the model's old_string may be from before the change).
    pub(crate) fn failed(&self, path: &Path, why: impl std::fmt::Display) -> ToolError {
        ToolError::RespondToModel(if self.changed {
            format!(
                "file {} was modified since it was last read, and the edit does not apply to it \
                 now ({why}); view it again before modifying it",
                path.display()
            )
        } else {
            why.to_string()
        })
    }

    /// What the model is told after an edit of a file that had changed since it was read.
    pub(crate) fn note(&self, path: &Path) -> Option<String> {
        self.changed.then(|| {
            format!(
                "Note: {} had changed since you last read it (a hook such as a formatter, or \
                 another program, rewrote it); old_string still matched, so the edit was applied \
                 to the current content. View the file before editing other parts of it.",
                path.display()
            )
        })
    }
}

/// The current content of a file that is about to be edited (must exist and have been viewed).
/// A file changed since it was viewed is edited when the edit still applies, as Claude Code
/// does after a formatter hook (crush(1) TOOLS, edit).
pub(crate) fn load_for_edit(ctx: &ToolCtx, path: &Path) -> Result<ForEdit, ToolError> {
    if path.is_dir() {
        return Err(format!("{} is a directory", path.display()).into());
    }
    let changed = freshness(ctx, path)? == Freshness::Changed;
    let content = read_existing(ctx, path)?.ok_or_else(|| {
        format!(
            "file not found: {}. To create a file, use an empty old_string or the write tool",
            path.display()
        )
    })?;
    Ok(ForEdit { content, changed })
}

/// The content a creating edit (empty old_string) replaces: None for a missing file, Some("")
/// for an empty one; a file with content is an error.
pub(crate) fn load_for_create(ctx: &ToolCtx, path: &Path) -> Result<Option<String>, ToolError> {
    if path.is_dir() {
        return Err(format!("{} is a directory", path.display()).into());
    }
    match read_existing(ctx, path)? {
        Some(c) if !c.is_empty() => Err(format!(
            "file {} already exists; view it and give a non-empty old_string to change it",
            path.display()
        )
        .into()),
        other => Ok(other),
    }
}

/// A planned edit: the change, how many replacements, and notes for the model.
pub(crate) struct Plan {
    pub change: FileChange,
    pub count: usize,
    pub notes: Vec<String>,
}

impl Plan {
    /// `content` with the notes after it.
    pub(crate) fn noted(&self, content: String) -> String {
        std::iter::once(content)
            .chain(self.notes.iter().cloned())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn plan(input: &Value, ctx: &ToolCtx) -> Result<Plan, ToolError> {
    let path = resolve(ctx, req_str(input, "file_path")?)?;
    let old = req_str_empty_ok(input, "old_string")?;
    let new = req_str_empty_ok(input, "new_string")?;
    let replace_all = opt_bool(input, "replace_all")?;
    if old.is_empty() {
        let existing = load_for_create(ctx, &path)?;
        if new.is_empty() && existing.is_some() {
            return Err("old_string and new_string are both empty; nothing to change".into());
        }
        return Ok(Plan {
            change: FileChange {
                path,
                old: existing,
                new: new.to_string(),
            },
            count: 1,
            notes: Vec::new(),
        });
    }
    let file = load_for_edit(ctx, &path)?;
    let r = replace_in(&file.content, old, new, replace_all).map_err(|e| file.failed(&path, e))?;
    let notes = file
        .note(&path)
        .into_iter()
        .chain(r.whitespace_corrected.then(|| CORRECTED_NOTE.to_string()))
        .collect();
    Ok(Plan {
        change: FileChange {
            path,
            old: Some(file.content),
            new: r.content,
        },
        count: r.count,
        notes,
    })
}

impl Tool for Edit {
    fn name(&self) -> &'static str {
        "edit"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Edit
    }

    fn read_only(&self) -> bool {
        false
    }

    fn claude_name(&self) -> Option<String> {
        Some("Edit".into())
    }

    fn title(&self, input: &Value, cwd: &Path) -> String {
        super::edit_title(input, cwd)
    }

    fn locations(&self, input: &Value, cwd: &Path) -> Vec<super::Location> {
        super::Location::of(input, "file_path", cwd)
            .into_iter()
            .collect()
    }

    fn description(&self) -> String {
        "Replaces text in a file: `old_string` is replaced by `new_string`.\n\
         \n\
         - View the file first: editing a file not viewed in this session, or changed since it \
         was viewed, is refused.\n\
         - `old_string` must match the file exactly (whitespace, indentation, line breaks; never \
         include the line-number prefix shown by view) and must occur exactly once. Include a \
         few surrounding lines to make it unique, or set `replace_all` to replace every \
         occurrence (e.g. renaming).\n\
         - An empty `new_string` deletes the text. An empty `old_string` creates a new file with \
         `new_string` as its content.\n\
         - For several changes to one file, use multiedit."
            .to_string()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to modify"},
                "old_string": {"type": "string", "description": "The exact text to replace"},
                "new_string": {"type": "string", "description": "The replacement text"},
                "replace_all": {
                    "type": "boolean",
                    "description": "Replace every occurrence of old_string (default false)"
                }
            },
            "required": ["file_path", "old_string", "new_string"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        Ok(Some(plan(input, ctx)?.change.permission(self.name(), ctx)))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let plan = plan(input, ctx)?;
        let (change, count) = (&plan.change, plan.count);
        let created = change.old.is_none();
        let d = change.apply(ctx)?;
        let content = if created {
            format!(
                "File created: {} ({} lines)",
                change.path.display(),
                d.additions
            )
        } else {
            format!(
                "Edited {}: {count} replacement{}, {} line{} added, {} removed",
                change.path.display(),
                if count == 1 { "" } else { "s" },
                d.additions,
                if d.additions == 1 { "" } else { "s" },
                d.removals
            )
        };
        let extra = json!({
            "oldString": input.get("old_string"),
            "newString": input.get("new_string"),
            "replaceAll": input.get("replace_all").and_then(Value::as_bool).unwrap_or(false),
        });
        Ok(change_output(ctx, change, &d, plan.noted(content), extra))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::Fixture;
    use crate::tools::testutil::Out;
    use crate::tools::view::View;

    fn viewed(fx: &Fixture, rel: &str, content: &str) {
        fx.write(rel, content);
        assert!(
            !View
                .run(&json!({"file_path": rel}), &fx.ctx())
                .out()
                .is_error
        );
    }

    #[test]
    fn in_an_editor_edits_apply_to_its_buffer_and_are_written_through_it() {
        let fx = Fixture::new();
        let path = fx.write("a.txt", "on disk\n");
        let editor = crate::tools::testutil::Buffers::default();
        editor
            .buffers
            .lock()
            .unwrap()
            .insert(path.clone(), "unsaved buffer\n".into());
        let ctx = ToolCtx {
            files: Some(&editor),
            ..fx.ctx()
        };
        let out = View.run(&json!({"file_path": "a.txt"}), &ctx).out();
        assert!(out.content.contains("unsaved buffer"), "{}", out.content);
        let input = json!({"file_path": "a.txt", "old_string": "unsaved", "new_string": "edited"});
        let req = Edit.permission(&input, &ctx).unwrap().unwrap();
        assert!(
            req.diff
                .unwrap()
                .contains("-unsaved buffer\n+edited buffer")
        );
        let out = Edit.run(&input, &ctx).out();
        assert!(!out.is_error, "{}", out.content);
        let written = editor.written.lock().unwrap().clone();
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].old.as_deref(), Some("unsaved buffer\n"));
        assert_eq!(written[0].new, "edited buffer\n");
        assert_eq!(
            fx.read("a.txt"),
            "on disk\n",
            "the editor wrote it, not crush"
        );
        // Crush's own checks come first: a file missing on disk is not read from the editor.
        let out = View.run(&json!({"file_path": "gone.txt"}), &ctx).out();
        assert!(
            out.is_error && out.content.contains("not found"),
            "{}",
            out.content
        );
        // An editor that cannot read the file is an error, not a silent read of the disk.
        fx.write("b.txt", "b\n");
        let out = View.run(&json!({"file_path": "b.txt"}), &ctx).out();
        assert!(
            out.is_error && out.content.contains("in the editor"),
            "{}",
            out.content
        );
    }

    #[test]
    fn edit_requires_view_and_fresh_file() {
        let fx = Fixture::new();
        fx.write("a.txt", "hello world\n");
        let ctx = fx.ctx();
        let input = json!({"file_path": "a.txt", "old_string": "world", "new_string": "there"});
        let out = Edit.run(&input, &ctx).out();
        assert!(
            out.is_error && out.content.contains("must view"),
            "{}",
            out.content
        );
        assert!(Edit.permission(&input, &ctx).is_err());

        viewed(&fx, "a.txt", "hello world\n");
        fx.write("a.txt", "goodbye, changed\n");
        fx.age("a.txt", 5);
        let out = Edit.run(&input, &ctx).out();
        assert!(
            out.is_error
                && out.content.contains("modified since")
                && out.content.contains("not found"),
            "{}",
            out.content
        );
        assert_eq!(fx.read("a.txt"), "goodbye, changed\n");
    }

    /// A formatter hook rewrote the file after the model's last edit: an edit whose old_string
    /// still matches the file as it is now goes through, and the model is told.
    #[test]
    fn a_file_changed_since_it_was_read_is_edited_when_old_string_still_matches() {
        let fx = Fixture::new();
        viewed(&fx, "a.js", "const a = {x:1}\nconst b = 2\n");
        let ctx = fx.ctx();
        fx.write("a.js", "const a = { x: 1 };\nconst b = 2;\n");
        fx.age("a.js", 5);
        let input = json!({"file_path": "a.js", "old_string": "const b = 2;", "new_string": "const b = 3;"});
        let out = Edit.run(&input, &ctx).out();
        assert!(!out.is_error, "{}", out.content);
        assert!(
            out.content.contains("had changed since you last read it"),
            "{}",
            out.content
        );
        assert_eq!(fx.read("a.js"), "const a = { x: 1 };\nconst b = 3;\n");
        // Crush's own write counts as a read again: the next edit has no note.
        let input = json!({"file_path": "a.js", "old_string": "b = 3", "new_string": "b = 4"});
        let out = Edit.run(&input, &ctx).out();
        assert!(
            !out.is_error && !out.content.contains("had changed"),
            "{}",
            out.content
        );
    }

    #[test]
    fn whitespace_corrected_only_when_unique() {
        let fx = Fixture::new();
        viewed(&fx, "a.py", "def f():\n\tif x:\n\t\treturn 1\n");
        let ctx = fx.ctx();
        let input = json!({"file_path": "a.py",
            "old_string": "    if x:\n        return 1", "new_string": "    if x:\n        return 2"});
        let out = Edit.run(&input, &ctx).out();
        assert!(!out.is_error, "{}", out.content);
        assert!(
            out.content.contains("whitespace corrected"),
            "{}",
            out.content
        );
        assert_eq!(fx.read("a.py"), "def f():\n\tif x:\n\t\treturn 2\n");
        viewed(&fx, "b.py", "x = 1\n  x = 1\n");
        let input = json!({"file_path": "b.py", "old_string": "x  =  1", "new_string": "x = 2"});
        let out = Edit.run(&input, &ctx).out();
        assert!(
            out.is_error && out.content.contains("not found"),
            "{}",
            out.content
        );
        assert_eq!(fx.read("b.py"), "x = 1\n  x = 1\n");
    }

    #[test]
    fn replace_in_says_why_nothing_was_replaced() {
        assert_eq!(
            replace_in("a a", "a", "b", false),
            Err(NoReplace::Ambiguous(2))
        );
        assert_eq!(replace_in("a", "z", "b", false), Err(NoReplace::NotFound));
        assert_eq!(replace_in("a", "a", "a", false), Err(NoReplace::Identical));
        assert_eq!(replace_in("a", "", "b", false), Err(NoReplace::EmptyOld));
        assert_eq!(replace_in("a a", "a", "b", true).unwrap().count, 2);
    }

    #[test]
    fn unique_multiple_and_replace_all() {
        let fx = Fixture::new();
        viewed(&fx, "a.rs", "let a = 1;\nlet b = 1;\nlet c = 2;\n");
        let ctx = fx.ctx();
        let out = Edit
            .run(
                &json!({"file_path": "a.rs", "old_string": "= 1", "new_string": "= 3"}),
                &ctx,
            )
            .out();
        assert!(out.is_error && out.content.contains("appears 2 times"));
        let out = Edit
            .run(
                &json!({"file_path": "a.rs", "old_string": "= 9", "new_string": "= 3"}),
                &ctx,
            )
            .out();
        assert!(out.is_error && out.content.contains("not found"));

        let input =
            json!({"file_path": "a.rs", "old_string": "let c = 2;", "new_string": "let c = 5;"});
        let req = Edit.permission(&input, &ctx).unwrap().unwrap();
        assert!(req.diff.unwrap().contains("-let c = 2;\n+let c = 5;"));
        let out = Edit.run(&input, &ctx).out();
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.metadata["additions"], 1);
        assert_eq!(out.metadata["removals"], 1);
        assert!(
            out.metadata["diff"]
                .as_str()
                .unwrap()
                .contains("+let c = 5;")
        );

        // Our own write counts as a read, so a follow-up edit works without a new view.
        let out = Edit.run(
            &json!({"file_path": "a.rs", "old_string": "= 1", "new_string": "= 7", "replace_all": true}),
            &ctx,
        ).out();
        assert!(out.content.contains("2 replacements"), "{}", out.content);
        assert_eq!(fx.read("a.rs"), "let a = 7;\nlet b = 7;\nlet c = 5;\n");

        // Deletion.
        let out = Edit
            .run(
                &json!({"file_path": "a.rs", "old_string": "let b = 7;\n", "new_string": ""}),
                &ctx,
            )
            .out();
        assert!(!out.is_error);
        assert_eq!(fx.read("a.rs"), "let a = 7;\nlet c = 5;\n");
    }

    #[test]
    fn create_with_empty_old_string() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let out = Edit
            .run(
                &json!({"file_path": "new/x.txt", "old_string": "", "new_string": "a\nb\n"}),
                &ctx,
            )
            .out();
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(fx.read("new/x.txt"), "a\nb\n");
        let out = Edit
            .run(
                &json!({"file_path": "new/x.txt", "old_string": "", "new_string": "c"}),
                &ctx,
            )
            .out();
        assert!(out.is_error && out.content.contains("already exists"));
    }

    #[test]
    fn crlf_files() {
        let r = replace_in("a\r\nb\r\nc\r\n", "a\nb\n", "x\ny\n", false).unwrap();
        assert_eq!((r.content.as_str(), r.count), ("x\r\ny\r\nc\r\n", 1));
        assert!(replace_in("abc", "b", "b", false).is_err());
    }
}
