//! Plan mode (crush(1) PLAN MODE): only read-only tools are offered, a write the model makes
//! anyway is refused, the plan is kept with the session (and in `options.plans_directory`),
//! and the REPL offers what comes next.

use super::repl::{setup, turns};
use crate::support::{Recorded, Reply};
use serde_json::{Value, json};

fn tool_names(r: &Recorded) -> Vec<String> {
    r.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn system_text(r: &Recorded) -> String {
    r.body["messages"][0]["content"].to_string()
}

fn last_session_id(env: &crate::support::TestEnv) -> String {
    let c = rusqlite::Connection::open(env.project().join(".crush/crush.db")).unwrap();
    c.query_row(
        "SELECT id FROM sessions ORDER BY created_at DESC LIMIT 1",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn a_plan_run_offers_only_read_only_tools_and_refuses_a_write() {
    let (server, env) = setup(vec![
        Reply::tool_call("write", json!({"file_path": "x.txt", "content": "no"})),
        Reply::text("1. Change a.rs\n2. Run the tests"),
    ]);
    let plans = env.root().join("plans");
    env.write_project_file(
        "crush.json",
        &json!({"options": {"plans_directory": plans.display().to_string()}}).to_string(),
    );
    let out = env.run(&["run", "--plan", "--trust", "plan the change"], None);
    out.assert_success();
    let reqs = turns(&server);
    assert_eq!(reqs.len(), 2);
    let names = tool_names(&reqs[0]);
    for read in ["view", "ls", "glob", "grep", "todos", "agent"] {
        assert!(names.iter().any(|n| n == read), "{read} missing: {names:?}");
    }
    for changes in [
        "bash",
        "write",
        "edit",
        "multiedit",
        "download",
        "fetch",
        "agentic_fetch",
        "sourcegraph",
        "job_kill",
    ] {
        assert!(!names.iter().any(|n| n == changes), "{changes} offered");
    }
    assert!(system_text(&reqs[0]).contains("<plan_mode>"));
    // The write was refused with a tool error, and nothing was written.
    let answer = reqs[1].body["messages"].to_string();
    assert!(
        answer.contains("Plan mode: write is not available"),
        "{answer}"
    );
    assert!(!env.project().join("x.txt").exists());
    assert!(out.stdout.contains("1. Change a.rs"), "{}", out.stdout);
    // The plan is in `sessions show`, and in the plans directory as Markdown.
    let id = last_session_id(&env);
    let show = env.run(&["sessions", "show", &id], None);
    show.assert_success();
    let at = show.stdout.find("## Plan").expect("a Plan heading");
    assert!(
        show.stdout[at..].contains("2. Run the tests"),
        "{}",
        show.stdout
    );
    let files: Vec<_> = std::fs::read_dir(&plans)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    let short: String = id.chars().filter(|c| *c != '-').take(8).collect();
    assert!(name.ends_with(&format!("-{short}.md")), "{name}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.starts_with("# Plan\n\n1. Change a.rs"), "{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o644, 0o644, "{mode:o}");
    // Go Crush reads the mark: the finish part of the plan's message.
    let parts: Vec<Value> = env
        .stored_parts(&id)
        .into_iter()
        .filter(|p| p["type"] == "finish")
        .collect();
    assert!(
        parts.iter().any(|p| p["data"]["details"] == "crush:plan"),
        "{parts:?}"
    );
}

#[test]
fn without_plan_mode_every_tool_is_offered() {
    let (server, env) = setup(vec![Reply::text("hi")]);
    env.run(&["run", "hello"], None).assert_success();
    let names = tool_names(&turns(&server)[0]);
    assert!(names.iter().any(|n| n == "bash") && names.iter().any(|n| n == "write"));
    assert!(!system_text(&turns(&server)[0]).contains("<plan_mode>"));
}

#[test]
fn the_repl_offers_four_choices_after_a_plan() {
    let (server, env) = setup(vec![
        Reply::text("plan A"),
        // 3: revise, with feedback; still planning.
        Reply::text("plan B"),
        // 1: start coding, with every tool.
        Reply::text("coded"),
    ]);
    let out = env.run(&[], Some("/plan\nfirst\n3\nsmaller please\n1\n"));
    out.assert_success();
    let reqs = turns(&server);
    assert!(reqs.len() >= 3, "{}", out.stderr);
    assert!(!tool_names(&reqs[0]).iter().any(|n| n == "bash"));
    assert!(
        reqs[1].body["messages"]
            .to_string()
            .contains("smaller please")
    );
    assert!(!tool_names(&reqs[1]).iter().any(|n| n == "bash"));
    // Coding: all tools, no planning prompt.
    assert!(tool_names(&reqs[2]).iter().any(|n| n == "bash"));
    assert!(!system_text(&reqs[2]).contains("<plan_mode>"));
    assert!(
        out.stderr.contains("[1] code  [2] code, no asking"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("coding, with the usual permissions"),
        "{}",
        out.stderr
    );
}
