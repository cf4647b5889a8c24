//! The `todos` tool: the model keeps the session's task list, stored in `sessions.todos` as Go
//! Crush stores it (`[{content, status, active_form}]`). It never asks permission.

use super::{PermissionRequest, Tool, ToolCtx, ToolError, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub(crate) struct Todos;

/// One task, with Go Crush's field names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Todo {
    pub content: String,
    /// pending | in_progress | completed
    pub status: String,
    #[serde(default)]
    pub active_form: String,
}

/// The tool's name (editors show its list as their plan).
pub(crate) const NAME: &str = "todos";

pub(crate) const STATUSES: &[&str] = &["pending", "in_progress", "completed"];

/// The list as `sessions.todos` stores it: JSON, or "" for an empty list (as Go Crush writes it).
pub(crate) fn to_column(todos: &[Todo]) -> String {
    if todos.is_empty() {
        return String::new();
    }
    serde_json::to_string(todos).unwrap_or_default()
}

/// The list `sessions.todos` holds ("" or NULL: empty; text that is not a list: empty).
pub(crate) fn from_column(text: &str) -> Vec<Todo> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    serde_json::from_str(text).unwrap_or_default()
}

/// The list as a compact checklist, one line per task: `[x]` done, `[>]` in progress (its
/// active form when it has one), `[ ]` pending.
pub(crate) fn checklist(todos: &[Todo]) -> String {
    let mut out = String::new();
    for t in todos {
        let (mark, text) = match t.status.as_str() {
            "completed" => ("[x]", t.content.as_str()),
            "in_progress" if !t.active_form.is_empty() => ("[>]", t.active_form.as_str()),
            "in_progress" => ("[>]", t.content.as_str()),
            _ => ("[ ]", t.content.as_str()),
        };
        out.push_str(&format!("{mark} {text}\n"));
    }
    out
}

/// The `todos` parameter: an array of tasks (an array sent as a JSON string is accepted, as
/// some models send one).
fn parse(input: &Value) -> Result<Vec<Todo>, ToolError> {
    let raw = match input.get("todos") {
        Some(Value::String(s)) => serde_json::from_str::<Value>(s.trim())
            .map_err(|_| "parameter `todos` must be an array of tasks".to_string())?,
        Some(v) => v.clone(),
        None => return Err("missing required parameter `todos`".into()),
    };
    let Value::Array(items) = raw else {
        return Err("parameter `todos` must be an array of tasks".into());
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let todo: Todo = serde_json::from_value(item.clone()).map_err(|e| {
            format!(
                "task {} is not {{content, status, active_form}}: {e}",
                i + 1
            )
        })?;
        if !STATUSES.contains(&todo.status.as_str()) {
            return Err(format!(
                "invalid status {:?} for todo {:?}: use pending, in_progress or completed",
                todo.status, todo.content
            )
            .into());
        }
        out.push(todo);
    }
    Ok(out)
}

fn run(input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let todos = parse(input)?;
    let old = ctx.session.todos()?;
    ctx.session.set_todos(&todos)?;
    let was = |content: &str| {
        old.iter()
            .find(|t| t.content == content)
            .map(|t| t.status.as_str())
    };
    let count = |status: &str| todos.iter().filter(|t| t.status == status).count();
    let just_completed: Vec<&str> = todos
        .iter()
        .filter(|t| t.status == "completed" && was(&t.content).is_some_and(|s| s != "completed"))
        .map(|t| t.content.as_str())
        .collect();
    let just_started = todos
        .iter()
        .filter(|t| t.status == "in_progress" && was(&t.content) != Some("in_progress"))
        .map(|t| {
            if t.active_form.is_empty() {
                t.content.as_str()
            } else {
                t.active_form.as_str()
            }
        })
        .next_back()
        .unwrap_or("");
    let completed = count("completed");
    let content = format!(
        "Todo list updated successfully.\n\nStatus: {} pending, {} in progress, {completed} completed\n\
         Todos have been modified successfully. Ensure that you continue to use the todo list to \
         track your progress. Please proceed with the current tasks if applicable.",
        count("pending"),
        count("in_progress"),
    );
    let mut metadata = json!({
        "is_new": old.is_empty(),
        "todos": todos,
        "completed": completed,
        "total": todos.len(),
    });
    if !just_completed.is_empty() {
        metadata["just_completed"] = json!(just_completed);
    }
    if !just_started.is_empty() {
        metadata["just_started"] = json!(just_started);
    }
    Ok(ToolOutput {
        content,
        metadata,
        ..Default::default()
    })
}

impl Tool for Todos {
    fn name(&self) -> &'static str {
        NAME
    }

    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Think
    }

    fn read_only(&self) -> bool {
        true
    }

    fn claude_name(&self) -> Option<String> {
        Some("TodoWrite".into())
    }

    fn title(&self, _input: &Value, _cwd: &std::path::Path) -> String {
        "Update the plan".into()
    }

    fn description(&self) -> String {
        "Manage a structured task list for multi-step work; each task has \
         pending/in_progress/completed state. Keep exactly one task in_progress at a time. Skip \
         for simple or single-step tasks. Send the whole updated list every time: it replaces \
         the previous one."
            .to_string()
    }

    fn schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The updated todo list",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {
                                "type": "string",
                                "description": "What needs to be done (imperative form)"
                            },
                            "status": {
                                "type": "string",
                                "enum": STATUSES,
                                "description": "Task status: pending, in_progress, or completed"
                            },
                            "active_form": {
                                "type": "string",
                                "description": "Present continuous form (e.g., 'Running tests')"
                            }
                        },
                        "required": ["content", "status", "active_form"]
                    }
                }
            },
            "required": ["todos"]
        })
    }

    fn permission(
        &self,
        input: &Value,
        _ctx: &ToolCtx,
    ) -> Result<Option<PermissionRequest>, ToolError> {
        parse(input)?;
        Ok(None)
    }

    fn run(&self, input: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        run(input, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::SessionState;
    use crate::tools::testutil::{Fixture, Out};

    fn todo(content: &str, status: &str, active: &str) -> Value {
        json!({"content": content, "status": status, "active_form": active})
    }

    #[test]
    fn the_list_is_stored_and_reported() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        let out = Todos
            .run(
                &json!({"todos": [todo("Write tests", "in_progress", "Writing tests"),
                                  todo("Fix bug", "pending", "Fixing the bug")]}),
                &ctx,
            )
            .out();
        assert!(!out.is_error, "{}", out.content);
        assert!(
            out.content
                .contains("1 pending, 1 in progress, 0 completed")
        );
        assert_eq!(out.metadata["is_new"], true);
        assert_eq!(out.metadata["just_started"], "Writing tests");
        let stored = fx.reads.todos().unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!(checklist(&stored), "[>] Writing tests\n[ ] Fix bug\n");
        let out = Todos
            .run(
                &json!({"todos": [todo("Write tests", "completed", ""),
                                  todo("Fix bug", "in_progress", "")]}),
                &ctx,
            )
            .out();
        assert_eq!(out.metadata["is_new"], false);
        assert_eq!(out.metadata["just_completed"], json!(["Write tests"]));
        assert_eq!(out.metadata["just_started"], "Fix bug");
        assert_eq!(out.metadata["completed"], 1);
        assert_eq!(out.metadata["total"], 2);
    }

    #[test]
    fn bad_lists_are_refused_and_a_string_list_is_accepted() {
        let fx = Fixture::new();
        let ctx = fx.ctx();
        for bad in [
            json!({}),
            json!({"todos": 5}),
            json!({"todos": [todo("x", "done", "")]}),
            json!({"todos": [{"status": "pending"}]}),
        ] {
            assert!(Todos.permission(&bad, &ctx).is_err(), "{bad}");
            assert!(Todos.run(&bad, &ctx).out().is_error, "{bad}");
        }
        let as_text = json!({"todos": json!([todo("a", "pending", "")]).to_string()});
        assert_eq!(Todos.permission(&as_text, &ctx), Ok(None));
        assert!(!Todos.run(&as_text, &ctx).out().is_error);
        assert_eq!(fx.reads.todos().unwrap()[0].content, "a");
    }

    #[test]
    fn the_column_is_go_crush_json_or_empty() {
        let t = vec![Todo {
            content: "a".into(),
            status: "pending".into(),
            active_form: String::new(),
        }];
        assert_eq!(
            to_column(&t),
            r#"[{"content":"a","status":"pending","active_form":""}]"#
        );
        assert_eq!(from_column(&to_column(&t)), t);
        assert_eq!(to_column(&[]), "");
        assert!(from_column("").is_empty() && from_column("garbage").is_empty());
    }
}
