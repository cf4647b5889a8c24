//! The LSP tools that change files: lsp_rename (the server's workspace edit, applied to every
//! file or to none) and lsp_replace_symbol (a whole symbol replaced, or text added before or
//! after it, or the symbol deleted). Both write through `FileChange`, as `edit` does, and ask
//! for the `write` permission with the diff.

use super::{Lsp, ask_about_symbol, non_empty};
use crate::lsp::text;
use crate::tools::common::{inside_project, mtime_ns, opt_str, record_current, req_str, resolve};
use crate::tools::confine::Zone;
use crate::tools::write::{FileChange, read_existing_on_disk};
use crate::tools::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

pub(super) fn tools(lsp: &Lsp) -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(Rename(lsp.clone())),
        Box::new(ReplaceSymbol(lsp.clone())),
    ]
}

/// The text edits of a `WorkspaceEdit`, per file. File operations (create, rename, delete)
/// are refused.
fn edits_by_file(edit: &Value) -> Result<Vec<(PathBuf, Vec<Value>)>, ToolError> {
    let mut out: Vec<(PathBuf, Vec<Value>)> = Vec::new();
    let mut add = |uri: &str, edits: &[Value]| -> Result<(), ToolError> {
        let path = text::path_of(uri)
            .ok_or_else(|| format!("the server named a file crush cannot use: {uri}"))?;
        match out.iter_mut().find(|(p, _)| *p == path) {
            Some((_, v)) => v.extend_from_slice(edits),
            None => out.push((path, edits.to_vec())),
        }
        Ok(())
    };
    if let Some(changes) = edit.get("documentChanges").and_then(Value::as_array) {
        for c in changes {
            if c.get("kind").is_some() {
                return Err(format!(
                    "the rename would also {} a file ({}); lsp_rename only changes text: rename \
                     the file with bash and the symbol with edit",
                    c["kind"].as_str().unwrap_or("change"),
                    c["uri"].as_str().or(c["oldUri"].as_str()).unwrap_or("?")
                )
                .into());
            }
            let uri = c["textDocument"]["uri"].as_str().unwrap_or("");
            add(uri, c["edits"].as_array().map(Vec::as_slice).unwrap_or(&[]))?;
        }
    } else if let Some(changes) = edit.get("changes").and_then(Value::as_object) {
        for (uri, edits) in changes {
            add(uri, edits.as_array().map(Vec::as_slice).unwrap_or(&[]))?;
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Refuses a file that was read in this session and changed on disk since.
fn fresh_if_read(ctx: &ToolCtx, path: &Path) -> Result<(), ToolError> {
    if let (Some(t), Ok(meta)) = (ctx.reads.last_read(path), std::fs::metadata(path))
        && t != mtime_ns(&meta)
    {
        return Err(format!(
            "file {} was modified since it was last read; view it again first",
            path.display()
        )
        .into());
    }
    Ok(())
}

/// Writes every change, or none: a failed write puts back the files already written.
fn apply_all(changes: &[FileChange], ctx: &ToolCtx) -> Result<(usize, usize), ToolError> {
    let (mut add, mut del) = (0, 0);
    for (i, ch) in changes.iter().enumerate() {
        match ch.apply_on_disk(ctx) {
            Ok(d) => {
                add += d.additions;
                del += d.removals;
            }
            Err(e) => {
                for done in &changes[..i] {
                    if let Some(old) = &done.old {
                        let _ = std::fs::write(&done.path, old);
                        record_current(ctx, &done.path);
                    }
                }
                return Err(format!("{e}; no file was changed").into());
            }
        }
    }
    Ok((add, del))
}

pub(super) struct Rename(Lsp);

struct RenamePlan {
    changes: Vec<FileChange>,
    edits: usize,
    /// The highest zone of the files it changes (`confine::Zone`).
    zone: Zone,
}

impl Rename {
    fn plan(&self, input: &Value, ctx: &ToolCtx) -> Result<RenamePlan, ToolError> {
        let symbol = req_str(input, "symbol")?;
        let new_name = req_str(input, "new_name")?;
        let found = ask_about_symbol(
            self.0.manager(),
            ctx,
            input,
            ("renameProvider", "textDocument/rename", "rename"),
            |c, cand| {
                // The server must see what is on disk before it computes the edit.
                c.resync();
                let mut params = cand.position(c);
                params["newName"] = json!(new_name);
                c.request("textDocument/rename", params).map(non_empty)
            },
        )?;
        let Some((client, _, edit)) = found else {
            return Err(format!("No rename edits generated for symbol '{symbol}'").into());
        };
        let mut changes = Vec::new();
        let mut edits = 0;
        let mut zone = Zone::Project;
        for (named, file_edits) in edits_by_file(&edit)? {
            // The server names the files: resolved (`..`, links) before they are placed.
            let path = ctx.bounds.admit(&named)?;
            let here = ctx.bounds.zone(ctx.project_root, &path);
            if here == Zone::Outside || !inside_project(ctx, &path) {
                return Err(format!(
                    "the rename would change {}, outside the project; nothing was changed",
                    named.display()
                )
                .into());
            }
            zone = zone.max(here);
            fresh_if_read(ctx, &path)?;
            let old = read_existing_on_disk(&path)?
                .ok_or_else(|| format!("the rename names a missing file: {}", path.display()))?;
            let new = text::apply_edits(&old, &file_edits, client.encoding())
                .map_err(|e| format!("cannot apply the edit to {}: {e}", path.display()))?;
            if new != old {
                edits += file_edits.len();
                changes.push(FileChange {
                    path,
                    old: Some(old),
                    new,
                });
            }
        }
        if changes.is_empty() {
            return Err(format!("No rename edits generated for symbol '{symbol}'").into());
        }
        Ok(RenamePlan {
            changes,
            edits,
            zone,
        })
    }
}

impl Tool for Rename {
    fn name(&self) -> &'static str {
        "lsp_rename"
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Edit
    }

    fn read_only(&self) -> bool {
        false
    }

    fn title(&self, input: &Value, _cwd: &Path) -> String {
        let arg = |k| crate::tools::common::arg(input, k).unwrap_or("");
        format!("Rename {} to {}", arg("symbol"), arg("new_name"))
    }

    fn locations(&self, input: &Value, cwd: &Path) -> Vec<crate::tools::Location> {
        crate::tools::Location::of(input, "path", cwd)
            .into_iter()
            .collect()
    }

    fn description(&self) -> String {
        "Rename a symbol across all files through the language server. Prefer it over manual \
         edits for any rename: it is a semantic rename that respects scopes, overloads and \
         imports. Every file is changed or none; asks for permission like edit. Returns the \
         changed files and the diagnostics after the change."
            .into()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "symbol": {"type": "string", "description": "The symbol name to rename"},
                "new_name": {"type": "string", "description": "The new name for the symbol"},
                "path": {"type": "string",
                    "description": "The directory (or file) to look for the symbol in; defaults to the working directory"}
            },
            "required": ["symbol", "new_name"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let plan = self.plan(input, ctx)?;
        let files: Vec<String> = plan
            .changes
            .iter()
            .map(|c| crate::tools::common::display_path(ctx, &c.path))
            .collect();
        let diff: String = plan.changes.iter().map(|c| c.diff(ctx).text).collect();
        Ok(Some(PermissionRequest {
            tool: self.name().to_string(),
            action: "write",
            path: crate::paths::canonicalize_lenient(ctx.project_root),
            description: format!(
                "Rename '{}' to '{}' in {} file(s): {}",
                req_str(input, "symbol")?,
                req_str(input, "new_name")?,
                files.len(),
                files.join(", ")
            ),
            diff: Some(diff),
            zone: plan.zone,
            ..Default::default()
        }))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let plan = self.plan(input, ctx)?;
        let (add, del) = apply_all(&plan.changes, ctx)?;
        let paths: Vec<&Path> = plan.changes.iter().map(|c| c.path.as_path()).collect();
        let mut out = format!(
            "Renamed '{}' to '{}' in {} file(s) ({} edits):\n\n",
            req_str(input, "symbol")?,
            req_str(input, "new_name")?,
            paths.len(),
            plan.edits
        );
        for p in &paths {
            out.push_str(&format!("  {}\n", p.display()));
        }
        out.push_str(&self.0.changed_report(&paths, &ctx.cancel));
        let diff: String = plan.changes.iter().map(|c| c.diff(ctx).text).collect();
        Ok(ToolOutput {
            content: out,
            is_error: false,
            metadata: json!({
                "files": paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
                "diff": diff,
                "additions": add,
                "removals": del,
            }),
            ..Default::default()
        })
    }
}

pub(super) struct ReplaceSymbol(Lsp);

/// The symbol named `name` in a `documentSymbol` result (depth first; `A.b` or `A::b` also
/// matches `b` inside `A`): its range.
fn find_symbol<'a>(symbols: &'a [Value], name: &str, parent: Option<&str>) -> Option<&'a Value> {
    let (want_parent, last) = match name.rsplit_once("::").or_else(|| name.rsplit_once('.')) {
        Some((p, l)) => (Some(p.rsplit(['.', ':']).next().unwrap_or(p)), l),
        None => (None, name),
    };
    for s in symbols {
        let sname = s["name"].as_str().unwrap_or("");
        let container = s["containerName"].as_str().or(parent);
        if sname == name || (sname == last && want_parent.is_some() && container == want_parent) {
            return Some(if s.get("location").is_some() {
                &s["location"]["range"]
            } else {
                &s["range"]
            });
        }
        if let Some(children) = s["children"].as_array()
            && let Some(r) = find_symbol(children, name, Some(sname))
        {
            return Some(r);
        }
    }
    None
}

struct ReplacePlan {
    change: FileChange,
    summary: String,
}

impl ReplaceSymbol {
    fn plan(&self, input: &Value, ctx: &ToolCtx) -> Result<ReplacePlan, ToolError> {
        let symbol = req_str(input, "symbol")?;
        let path = resolve(ctx, req_str(input, "file_path")?)?;
        let action = opt_str(input, "action")?.unwrap_or("replace");
        if !matches!(action, "replace" | "add_before" | "add_after" | "delete") {
            return Err(format!(
                "invalid action '{action}': must be replace, add_before, add_after or delete"
            )
            .into());
        }
        let replacement = opt_str(input, "replacement")?.unwrap_or("");
        if action != "delete" && replacement.is_empty() {
            return Err(format!("replacement is required for action '{action}'").into());
        }
        fresh_if_read(ctx, &path)?;
        let content = read_existing_on_disk(&path)?
            .ok_or_else(|| format!("file not found: {}", path.display()))?;
        let m = self.0.manager();
        let c = m
            .client_for(&path, &ctx.cancel)
            .map_err(|e| e.to_string())?;
        if !c.supports("documentSymbolProvider", "textDocument/documentSymbol") {
            return Err(format!(
                "the language server {} does not support document symbols (documentSymbolProvider)",
                c.name()
            )
            .into());
        }
        c.resync();
        let symbols = c
            .request(
                "textDocument/documentSymbol",
                json!({"textDocument": {"uri": text::uri(&path)}}),
            )
            .map_err(|e| format!("{}: {e}", c.name()))?;
        let symbols = symbols.as_array().cloned().unwrap_or_default();
        let range = find_symbol(&symbols, symbol, None)
            .ok_or_else(|| format!("symbol '{symbol}' not found in {}", path.display()))?;
        let start = range["start"]["line"].as_u64().unwrap_or(0) as usize;
        let end = range["end"]["line"].as_u64().unwrap_or(0) as usize;
        let lines: Vec<&str> = content.split('\n').collect();
        if start > end || end >= lines.len() {
            return Err("the symbol's range is outside the file".into());
        }
        let with: Vec<&str> = replacement.split('\n').collect();
        let new_lines: Vec<&str> = match action {
            "replace" => [&lines[..start], &with[..], &lines[end + 1..]].concat(),
            "add_before" => [&lines[..start], &with[..], &lines[start..]].concat(),
            "add_after" => [&lines[..=end], &with[..], &lines[end + 1..]].concat(),
            _ => [&lines[..start], &lines[end + 1..]].concat(),
        };
        let new = new_lines.join("\n");
        if new == content {
            return Err("the change leaves the file as it is".into());
        }
        let (a, b) = (start + 1, end + 1);
        let p = path.display();
        let summary = match action {
            "replace" => format!("Replaced symbol '{symbol}' in {p} (lines {a}-{b})"),
            "add_before" => format!("Inserted before symbol '{symbol}' in {p} (before line {a})"),
            "add_after" => format!("Inserted after symbol '{symbol}' in {p} (after line {b})"),
            _ => format!("Deleted symbol '{symbol}' from {p} (lines {a}-{b})"),
        };
        Ok(ReplacePlan {
            change: FileChange {
                path,
                old: Some(content),
                new,
            },
            summary,
        })
    }
}

impl Tool for ReplaceSymbol {
    fn name(&self) -> &'static str {
        "lsp_replace_symbol"
    }

    fn kind(&self) -> crate::tools::ToolKind {
        crate::tools::ToolKind::Edit
    }

    fn read_only(&self) -> bool {
        false
    }

    fn locations(&self, input: &Value, cwd: &Path) -> Vec<crate::tools::Location> {
        crate::tools::Location::of(input, "path", cwd)
            .into_iter()
            .collect()
    }

    fn description(&self) -> String {
        "Replace, insert next to, or delete a whole symbol (function, method, class, struct) by \
         name, its exact lines found through the language server's document symbols. Prefer it \
         over edit for whole-symbol changes: no old text has to match.\n\
         \n\
         Actions:\n\
         - `replace` (default): replace the entire symbol, signature and body\n\
         - `add_before`: insert `replacement` before the symbol\n\
         - `add_after`: insert `replacement` after the symbol\n\
         - `delete`: remove the symbol\n\
         \n\
         Asks for permission like edit; returns the diagnostics after the change."
            .into()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "symbol": {"type": "string",
                    "description": "The symbol to target (function, method or type name)"},
                "file_path": {"type": "string", "description": "The file that contains the symbol"},
                "replacement": {"type": "string",
                    "description": "The new text: required for replace, add_before and add_after; ignored for delete"},
                "action": {"type": "string", "enum": ["replace", "add_before", "add_after", "delete"],
                    "description": "What to do (default replace)"}
            },
            "required": ["symbol", "file_path"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        let plan = self.plan(input, ctx)?;
        let mut req = plan.change.permission(self.name(), ctx);
        req.description = plan.summary.replacen("Replaced", "Replace", 1);
        Ok(Some(req))
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let plan = self.plan(input, ctx)?;
        let d = plan.change.apply_on_disk(ctx)?;
        let mut content = plan.summary;
        content.push('\n');
        content.push_str(
            &self
                .0
                .changed_report(&[plan.change.path.as_path()], &ctx.cancel),
        );
        Ok(ToolOutput {
            content,
            is_error: false,
            metadata: crate::tools::write::change_metadata(&d, &plan.change.path),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_edits_by_file_and_file_operations_refused() {
        let e = |l: u64| {
            json!({"range": {"start": {"line": l, "character": 0},
            "end": {"line": l, "character": 1}}, "newText": "y"})
        };
        let edit = json!({"changes": {"file:///p/b.fk": [e(1)], "file:///p/a.fk": [e(0), e(2)]}});
        let by = edits_by_file(&edit).unwrap();
        assert_eq!(by.len(), 2);
        assert_eq!(by[0].0, PathBuf::from("/p/a.fk"));
        assert_eq!(by[0].1.len(), 2);
        let doc = json!({"documentChanges": [
            {"textDocument": {"uri": "file:///p/a.fk", "version": 3}, "edits": [e(0)]},
            {"textDocument": {"uri": "file:///p/a.fk", "version": 3}, "edits": [e(1)]}
        ]});
        assert_eq!(edits_by_file(&doc).unwrap()[0].1.len(), 2);
        let ops = json!({"documentChanges": [{"kind": "rename", "oldUri": "file:///p/a.fk",
            "newUri": "file:///p/b.fk"}]});
        assert!(
            edits_by_file(&ops)
                .unwrap_err()
                .to_string()
                .contains("rename a file")
        );
    }

    #[test]
    fn symbols_are_found_by_name_or_qualified_name() {
        let r = |l: u64| json!({"start": {"line": l, "character": 0}, "end": {"line": l + 1, "character": 0}});
        let symbols = json!([
            {"name": "A", "kind": 5, "range": r(0), "children": [
                {"name": "run", "kind": 6, "range": r(2)}
            ]},
            {"name": "run", "kind": 12, "range": r(10)},
            {"name": "flat", "kind": 12, "location": {"uri": "file:///x", "range": r(20)}}
        ]);
        let s = symbols.as_array().unwrap();
        assert_eq!(find_symbol(s, "A.run", None).unwrap()["start"]["line"], 2);
        assert_eq!(find_symbol(s, "A::run", None).unwrap()["start"]["line"], 2);
        assert_eq!(find_symbol(s, "run", None).unwrap()["start"]["line"], 2);
        assert_eq!(find_symbol(s, "flat", None).unwrap()["start"]["line"], 20);
        assert!(find_symbol(s, "B.run", None).is_none());
    }
}
