//! The `question` tool: asked inline in the REPL, answered "no user available" in `crush run`.

use super::repl::{setup, start_in_tmux_at, tmux_available, turns};
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

/// On a terminal a question with choices takes one key: a number picks at once (Enter alone
/// picks nothing), y or n answers yes_no, a multiple choice marks numbers and takes them with
/// Enter, o types an answer of one's own, Esc skips.
#[test]
fn on_a_terminal_a_single_key_answers_a_question() {
    if !tmux_available() {
        eprintln!("tmux is not installed: skipped");
        return;
    }
    let mut questions = two_questions();
    let list = questions["questions"].as_array_mut().unwrap();
    list.push(
        json!({"type": "multi_choice", "question": "Which features?", "description": "",
        "choices": [{"id": "auth", "label": "Login"}, {"id": "api", "label": "API"},
                    {"id": "ui", "label": "Web UI"}]}),
    );
    list.push(
        json!({"type": "single_choice", "question": "Which cache?", "description": "",
        "choices": [{"id": "mem", "label": "In memory"}, {"id": "disk", "label": "On disk"}]}),
    );
    list.push(json!({"type": "yes_no", "question": "Add metrics?", "description": ""}));
    let (server, env) = setup(vec![
        Reply::tool_call("question", questions),
        Reply::text("all set"),
    ]);
    let (tmux, _) = start_in_tmux_at(&env, "question-keys", &[], &[], 80);
    tmux.wait_for("the prompt", |s| s.lines().any(|l| l.trim_end() == ">"));
    tmux.keys(&["set it up", "Enter"]);
    tmux.wait_for("the first question", |s| {
        s.contains("1-2 picks, o your own answer")
    });
    tmux.keys(&["Enter"]);
    tmux.keys(&["2"]);
    let screen = tmux.wait_for("the yes/no question", |s| {
        s.contains("[y]es / [n]o, o your")
    });
    assert!(
        screen.contains("Esc skips SQLite"),
        "the pick is echoed: {screen}"
    );
    tmux.keys(&["y"]);
    tmux.wait_for("the multiple choice", |s| {
        s.contains("1-3 mark, Enter takes them")
    });
    tmux.keys(&["3"]);
    tmux.keys(&["1"]);
    tmux.wait_for("the marks", |s| s.contains("[1 3]"));
    tmux.keys(&["Enter"]);
    tmux.wait_for("the fourth question", |s| {
        s.matches("1-2 picks").count() == 2
    });
    tmux.keys(&["o"]);
    tmux.wait_for("a line for the own answer", |s| {
        s.contains("your answer (Enter skips)")
    });
    tmux.keys(&["Redis", "Enter"]);
    tmux.wait_for("the last question", |s| s.contains("Question 5/5"));
    tmux.keys(&["Escape"]);
    tmux.wait_for("the answer", |s| s.contains("all set"));
    let t = turns(&server);
    let (_, result, _) = t[1].tool_results().last().cloned().unwrap();
    assert_eq!(
        result,
        "Q1: Which database?\nUser selected: [\"lite\"]\n\nQ2: Enable caching?\nUser answered: yes\n\n\
         Q3: Which features?\nUser selected: [\"auth\",\"ui\"]\n\nQ4: Which cache?\nUser provided: Redis\n\n\
         Q5: Add metrics?\nUser skipped this question"
    );
}
