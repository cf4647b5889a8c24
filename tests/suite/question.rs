//! The `question` tool: asked inline in the REPL, answered "no user available" in `crush run`.

use super::repl::{setup, turns};
use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::json;

fn two_questions() -> serde_json::Value {
    json!({"questions": [
        {"type": "single_choice", "question": "Which database?", "description": "Pick one.",
         "choices": [{"id": "pg", "label": "PostgreSQL"}, {"id": "lite", "label": "SQLite",
                      "description": "a file"}]},
        {"type": "yes_no", "question": "Enable caching?", "description": "Faster."}
    ]})
}

#[test]
fn the_repl_asks_the_questions_inline_and_the_model_gets_the_answers() {
    let (server, env) = setup(vec![
        Reply::tool_call("question", two_questions()),
        Reply::text("ok"),
    ]);
    let out = env.run(&[], Some("set it up\n2\ny\n"));
    out.assert_success();
    assert!(
        out.stderr.contains("Question 1/2: Which database?"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("2) SQLite \u{2014} a file"),
        "{}",
        out.stderr
    );
    let t = turns(&server);
    let (_, result, _) = t[1].tool_results().last().cloned().unwrap();
    assert_eq!(
        result,
        "Q1: Which database?\nUser selected: [\"lite\"]\n\nQ2: Enable caching?\nUser answered: yes"
    );
}

#[test]
fn crush_run_has_no_user_to_ask_and_the_model_goes_on() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("question", two_questions()),
        Reply::text("I assumed SQLite."),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let out = env.run(&["run", "-q", "set it up"], None);
    out.assert_success();
    assert_eq!(out.stdout, "I assumed SQLite.\n");
    let r = server.model_requests()[1].tool_results();
    let (_, text, err) = r.last().cloned().unwrap();
    assert!(!err && text.starts_with("No user is available"), "{text}");
}
