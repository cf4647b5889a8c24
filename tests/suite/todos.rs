//! The `todos` tool as the user sees it: the REPL prints the list when it changes and `/todos`
//! shows it, `crush run --json` emits a `todos` event, and the list is stored in
//! `sessions.todos` as Go Crush stores it.

use super::repl::{setup, turns};
use serde_json::{Value, json};

fn list(second: &str) -> Value {
    json!({"todos": [
        {"content": "Write tests", "status": "completed", "active_form": "Writing tests"},
        {"content": "Fix the bug", "status": second, "active_form": "Fixing the bug"}
    ]})
}

fn stored(env: &crate::support::TestEnv) -> Option<String> {
    let c = rusqlite::Connection::open(env.project().join(".crush/crush.db")).unwrap();
    c.query_row("SELECT todos FROM sessions", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn the_repl_prints_the_list_when_it_changes_and_todos_shows_it() {
    use crate::support::Reply;
    let (server, env) = setup(vec![
        Reply::tool_call("todos", list("in_progress")),
        // The same list again: nothing new to print.
        Reply::tool_call("todos", list("in_progress")),
        Reply::tool_call("todos", list("pending")),
        Reply::text("planned"),
    ]);
    let out = env.run(&[], Some("plan it\n/todos\n"));
    out.assert_success();
    assert_eq!(turns(&server).len(), 4);
    let doing = "  [x] Write tests\n  [>] Fixing the bug\n";
    let waiting = "  [x] Write tests\n  [ ] Fix the bug\n";
    // Printed once as the model set it, once for the change, and once by /todos.
    assert_eq!(out.stderr.matches(doing).count(), 1, "{}", out.stderr);
    assert_eq!(out.stderr.matches(waiting).count(), 2, "{}", out.stderr);
    let column: Value = serde_json::from_str(&stored(&env).unwrap()).unwrap();
    assert_eq!(column, list("pending")["todos"]);
}

#[test]
fn crush_run_json_emits_the_list_and_an_empty_list_is_stored_as_null() {
    use crate::support::Reply;
    let (_server, env) = setup(vec![
        Reply::tool_call("todos", list("in_progress")),
        Reply::tool_call("todos", json!({"todos": []})),
        Reply::text("done"),
    ]);
    let out = env.run(&["run", "--json", "plan it"], None);
    out.assert_success();
    let events: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Value| e["type"] == "todos")
        .collect();
    assert_eq!(events.len(), 2, "{}", out.stdout);
    assert_eq!(events[0]["todos"], list("in_progress")["todos"]);
    assert_eq!(events[1]["todos"], json!([]));
    assert_eq!(stored(&env), None);
}
