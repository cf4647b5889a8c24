//! The `multiedit` tool: several edits to one file, applied in order in memory and written only
//! when all of them succeed.

use super::ToolError;
use super::common::{opt_bool, req_str, resolve};
use super::edit::{Plan, load_for_create, load_for_edit, replace_in};
use super::whitespace::CORRECTED_NOTE;
use super::write::{FileChange, change_output};
use super::{PermissionRequest, Tool, ToolCtx, ToolOutput};
use serde_json::{Value, json};

pub(crate) struct MultiEdit;

fn plan(input: &Value, ctx: &ToolCtx) -> Result<Plan, ToolError> {
    let path = resolve(ctx, req_str(input, "file_path")?)?;
    let edits = match input.get("edits") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => return Err("`edits` must contain at least one edit".into()),
        _ => return Err("missing required parameter `edits` (an array of edits)".into()),
    };
    let n = edits.len();
    let mut parsed = Vec::with_capacity(n);
    for (i, e) in edits.iter().enumerate() {
        let field = |name: &str| match e.get(name) {
            Some(Value::String(s)) => Ok(s.as_str()),
            None | Some(Value::Null) => Err(format!("edit {} of {n}: missing `{name}`", i + 1)),
            Some(_) => Err(format!("edit {} of {n}: `{name}` must be a string", i + 1)),
        };
        let all = opt_bool(e, "replace_all").map_err(|m| format!("edit {} of {n}: {m}", i + 1))?;
        parsed.push((field("old_string")?, field("new_string")?, all));
    }

    let creating = parsed[0].0.is_empty();
    let mut notes = Vec::new();
    let (original, mut content, file) = if creating {
        let existing = load_for_create(ctx, &path)?;
        (existing, parsed[0].1.to_string(), None)
    } else {
        let f = load_for_edit(ctx, &path)?;
        notes.extend(f.note(&path));
        (Some(f.content.clone()), f.content.clone(), Some(f))
    };
    let mut corrected = Vec::new();
    let mut replacements = usize::from(creating);
    for (i, (old, new, all)) in parsed.iter().enumerate().skip(usize::from(creating)) {
        let fail =
            |m: String| format!("edit {} of {n} failed: {m}. No changes were written", i + 1);
        if old.is_empty() {
            return Err(fail(
                "old_string is empty (only the first edit may create the file)".to_string(),
            )
            .into());
        }
        let r = replace_in(&content, old, new, *all).map_err(|e| {
            let why = fail(e.to_string());
            match &file {
                Some(f) => f.failed(&path, why),
                None => why.into(),
            }
        })?;
        if r.whitespace_corrected {
            corrected.push((i + 1).to_string());
        }
        content = r.content;
        replacements += r.count;
    }
    if !corrected.is_empty() {
        notes.push(format!("(edit {}) {CORRECTED_NOTE}", corrected.join(", ")));
    }
    if original.as_deref() == Some(content.as_str()) {
        return Err("the edits leave the file unchanged; nothing to write".into());
    }
    Ok(Plan {
        change: FileChange {
            path,
            old: original,
            new: content,
        },
        count: replacements,
        notes,
    })
}

impl Tool for MultiEdit {
    fn name(&self) -> &'static str {
        "multiedit"
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Edit
    }

    fn read_only(&self) -> bool {
        false
    }

    fn claude_name(&self) -> Option<String> {
        Some("MultiEdit".into())
    }

    fn title(&self, input: &Value, cwd: &std::path::Path) -> String {
        super::edit_title(input, cwd)
    }

    fn locations(&self, input: &Value, cwd: &std::path::Path) -> Vec<super::Location> {
        super::Location::of(input, "file_path", cwd)
            .into_iter()
            .collect()
    }

    fn description(&self) -> String {
        "Makes several replacements in one file in a single step. Each edit works like the edit \
         tool (`old_string`, `new_string`, optional `replace_all`) and applies to the result of \
         the previous one, in order.\n\
         \n\
         - All edits are checked before anything is written: if one fails (text not found, or \
         found several times without replace_all), the file is left untouched and the error \
         names the failing edit.\n\
         - View the file first; a file changed since it was viewed is refused.\n\
         - To create a file, give the first edit an empty `old_string` and the content as its \
         `new_string`; the following edits apply to that content."
            .to_string()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to modify"},
                "edits": {
                    "type": "array",
                    "description": "Edits applied in order",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old_string": {"type": "string", "description": "The exact text to replace"},
                            "new_string": {"type": "string", "description": "The replacement text"},
                            "replace_all": {
                                "type": "boolean",
                                "description": "Replace every occurrence (default false)"
                            }
                        },
                        "required": ["old_string", "new_string"]
                    }
                }
            },
            "required": ["file_path", "edits"]
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
        let edits = input
            .get("edits")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let d = change.apply(ctx)?;
        let content = format!(
            "Applied {edits} edit{} ({count} replacement{}) to {}: {} lines added, {} removed",
            if edits == 1 { "" } else { "s" },
            if count == 1 { "" } else { "s" },
            change.path.display(),
            d.additions,
            d.removals
        );
        let extra = json!({"edits": input.get("edits"), "originalFileContents": change.old});
        Ok(change_output(ctx, change, &d, plan.noted(content), extra))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testutil::Fixture;
    use crate::tools::testutil::Out;
    use crate::tools::view::View;

    #[test]
    fn all_or_nothing() {
        let fx = Fixture::new();
        fx.write("m.txt", "alpha\nbeta\ngamma\n");
        let ctx = fx.ctx();
        let ok = json!({"file_path": "m.txt", "edits": [
            {"old_string": "alpha", "new_string": "ALPHA"},
            {"old_string": "ALPHA\nbeta", "new_string": "AB"},
        ]});
        assert!(MultiEdit.run(&ok, &ctx).out().content.contains("must view"));
        assert!(
            !View
                .run(&json!({"file_path": "m.txt"}), &ctx)
                .out()
                .is_error
        );

        let bad = json!({"file_path": "m.txt", "edits": [
            {"old_string": "alpha", "new_string": "ALPHA"},
            {"old_string": "missing", "new_string": "x"},
        ]});
        let out = MultiEdit.run(&bad, &ctx).out();
        assert!(out.is_error);
        assert!(
            out.content.starts_with("edit 2 of 2 failed"),
            "{}",
            out.content
        );
        assert_eq!(fx.read("m.txt"), "alpha\nbeta\ngamma\n");
        assert!(MultiEdit.permission(&bad, &ctx).is_err());

        let req = MultiEdit.permission(&ok, &ctx).unwrap().unwrap();
        assert_eq!(req.action, "write");
        let out = MultiEdit.run(&ok, &ctx).out();
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(fx.read("m.txt"), "AB\ngamma\n");
        assert!(out.content.starts_with("Applied 2 edits"));
    }

    #[test]
    fn whitespace_is_corrected_per_edit_and_a_changed_file_still_takes_matching_edits() {
        let fx = Fixture::new();
        fx.write("m.go", "func f() {\n\treturn 1\n}\n");
        let ctx = fx.ctx();
        assert!(!View.run(&json!({"file_path": "m.go"}), &ctx).out().is_error);
        // A formatter rewrote it since.
        fx.write("m.go", "func f() {\n\treturn 1\n}\n\nfunc g() {}\n");
        fx.age("m.go", 5);
        let out = MultiEdit
            .run(
                &json!({"file_path": "m.go", "edits": [
                    {"old_string": "func g() {}", "new_string": "func g() { f() }"},
                    {"old_string": "    return 1", "new_string": "    return 2"},
                ]}),
                &ctx,
            )
            .out();
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("had changed since"), "{}", out.content);
        assert!(
            out.content
                .contains("(edit 2) Note: old_string did not match exactly"),
            "{}",
            out.content
        );
        assert_eq!(
            fx.read("m.go"),
            "func f() {\n\treturn 2\n}\n\nfunc g() { f() }\n"
        );
    }

    #[test]
    fn create_then_edit_and_bad_input() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let out = MultiEdit
            .run(
                &json!({"file_path": "n.txt", "edits": [
                    {"old_string": "", "new_string": "one two two"},
                    {"old_string": "two", "new_string": "2", "replace_all": true},
                ]}),
                &ctx,
            )
            .out();
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(fx.read("n.txt"), "one 2 2");
        let out = MultiEdit
            .run(&json!({"file_path": "n.txt", "edits": []}), &ctx)
            .out();
        assert!(out.is_error);
        let out = MultiEdit
            .run(
                &json!({"file_path": "n.txt", "edits": [{"old_string": "one"}]}),
                &ctx,
            )
            .out();
        assert!(out.content.contains("missing `new_string`"));
    }
}
