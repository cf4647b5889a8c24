//! File history: every change by a file tool is kept in `files`, `/undo` reverts the last one
//! byte for byte (and refuses a file changed outside crush since), `/versions FILE` lists them,
//! `crush sessions diff ID` prints them.

use super::repl::setup;
use crate::support::Reply;
use serde_json::{Value, json};

#[test]
fn undo_restores_bytes_exactly_refuses_outside_changes_and_diff_shows_what_is_left() {
    let original = "one\r\nkeep  \nno newline";
    let (server, env) = setup(vec![
        Reply::tool_call("write", json!({"file_path": "a.txt", "content": original})),
        Reply::text("made"),
        Reply::tool_call("view", json!({"file_path": "a.txt"})),
        Reply::tool_call(
            "edit",
            json!({"file_path": "a.txt", "old_string": "one", "new_string": "two"}),
        ),
        Reply::text("changed"),
        Reply::tool_call("write", json!({"file_path": "b.txt", "content": "x\n"})),
        Reply::text("made b"),
    ]);
    std::fs::write(env.root().join("expected"), original).unwrap();
    let expected = env.root().join("expected");
    let input = format!(
        "make a\nchange a\n/versions a.txt\n/undo\n!cmp a.txt {} && echo SAME-BYTES\n/undo\n\
         !test -e a.txt || echo A-GONE\n/undo\nmake b\n!echo outside >> b.txt\n/undo\n",
        expected.display()
    );
    let out = env.run(&["-y"], Some(&input));
    out.assert_success();
    assert!(
        out.stdout.contains("SAME-BYTES"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(out.stdout.contains("A-GONE"), "{}", out.stdout);
    // /versions: none before the write, the write, the content before the edit... and the edit.
    assert!(
        out.stdout.contains("v0") && out.stdout.contains("no file"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("written by edit"), "{}", out.stdout);
    assert!(
        out.stderr.contains("Undid the last change (edit call"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("removed") && out.stderr.contains("a.txt"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("Nothing to undo"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("b.txt was changed outside crush since write wrote it"),
        "{}",
        out.stderr
    );
    assert_eq!(env.read_project_file("b.txt"), "x\noutside\n");
    assert!(!env.project().join("a.txt").exists());
    // The model learns of each undo with the next prompt.
    let last = server
        .model_requests()
        .last()
        .unwrap()
        .user_texts()
        .join("\n");
    assert!(
        last.contains("[/undo] Undid the last change (write call"),
        "{last}"
    );

    let list = env.run(&["sessions", "list", "--json"], None);
    let sessions: Value = serde_json::from_str(&list.stdout).unwrap();
    let id = sessions[0]["id"].as_str().unwrap();
    let diff = env.run(&["sessions", "diff", id], None);
    diff.assert_success();
    // a.txt's changes were undone; b.txt was created (the outside change is not the session's).
    assert_eq!(
        diff.stdout,
        "--- /dev/null\n+++ b/b.txt\n@@ -0,0 +1,1 @@\n+x\n"
    );
}

#[test]
fn sessions_diff_of_an_unknown_session_is_a_usage_error() {
    let (_server, env) = setup(vec![Reply::text("hi")]);
    env.run(&["run", "-q", "hi"], None).assert_success();
    let out = env.run(&["sessions", "diff", "zzzz"], None);
    out.assert_code(2);
    let out = env.run(&["sessions", "diff"], None);
    out.assert_code(2);
}
