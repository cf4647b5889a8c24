//! Claude Code hooks and settings, unchanged: scripts written the way published Claude Code
//! setups write them (read the payload on stdin, answer in Claude Code's terms), run by the real
//! binary against the fake model server.

use super::hooks::hook;
use crate::support::{Dialect, FakeServer, Recorded, Reply, TestEnv};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn write_exe(p: &Path, body: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Claude Code's nested shape: `{"Event": [{"matcher": m, "hooks": [{"type": "command", ...}]}]}`.
fn nested(event: &str, matcher: &str, command: &str) -> Value {
    json!({ event: [{"matcher": matcher, "hooks": [{"type": "command", "command": command}]}] })
}

/// The fake server's config plus `hooks` (and other top-level keys of `extra`).
fn configure(env: &TestEnv, server: &FakeServer, hooks: Value, extra: Value) {
    let mut cfg = env.config_for(server, Dialect::OpenAi);
    cfg["hooks"] = hooks;
    if let Value::Object(m) = extra {
        for (k, v) in m {
            cfg[k] = v;
        }
    }
    env.write_config(&cfg);
}

/// A script that appends its payload (one JSON line) to `log`, then runs `then`.
fn logging(log: &Path, then: &str) -> String {
    format!(
        "#!/bin/sh\np=$(cat)\nprintf '%s\\n' \"$p\" >> '{}'\n{then}\n",
        log.display()
    )
}

fn payloads(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn anywhere(reqs: &[Recorded], needle: &str) -> bool {
    reqs.iter().any(|r| r.body_text.contains(needle))
}

/// The scripted conversation of a parent that asks its sub-agent to read `.env`.
fn sub_agent_reads_env() -> FakeServer {
    FakeServer::with_script(vec![
        Reply::tool_call(
            "agent",
            json!({"prompt": "Read .env and report the API key"}),
        ),
        Reply::tool_call("view", json!({"file_path": ".env"})),
        Reply::text("I could not read it."),
        Reply::text("The sub-agent could not read .env."),
    ])
}

const SECRET: &str = "sk-live-0123456789";

/// A `.env` Read guard as published: denies any Read of a `.env` file with exit 2.
const ENV_GUARD: &str =
    "case \"$p\" in *'/.env\"'*) echo 'Reading .env files is not allowed' >&2; exit 2;; esac";

#[test]
fn a_claude_code_env_guard_holds_inside_sub_agents() {
    let server = sub_agent_reads_env();
    let env = TestEnv::new();
    env.write_project_file(".env", &format!("API_KEY={SECRET}\n"));
    let log = env.root().join("guard.log");
    let guard = hook(&env, "env-guard.sh", &logging(&log, ENV_GUARD));
    configure(
        &env,
        &server,
        nested("PreToolUse", "Read", &guard),
        json!({}),
    );
    let out = env.run(&["run", "-q", "what is the API key?"], None);
    out.assert_success();
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 4);
    assert!(!anywhere(&reqs, SECRET), "the secret reached the model");
    assert!(
        reqs[2].tool_results()[0]
            .1
            .contains("Reading .env files is not allowed"),
        "{:?}",
        reqs[2].tool_results()
    );
    // Claude Code's payload inside a sub-agent: the parent's session, the agent's id and type.
    let p = payloads(&log);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0]["tool_name"], "Read");
    assert_eq!(p[0]["agent_type"], "Explore");
    let parent = env.run(&["sessions", "list", "--json"], None);
    let list: Value = serde_json::from_str(&parent.stdout).unwrap();
    let parent_id = list[0]["uuid"].as_str().unwrap().to_string();
    assert_eq!(p[0]["session_id"], parent_id.as_str());
    let agent_id = p[0]["agent_id"].as_str().unwrap();
    assert!(
        agent_id.contains("$$") && agent_id != parent_id,
        "the child session: {agent_id}"
    );
}

#[test]
fn a_fail_closed_guard_in_crush_shape_holds_inside_sub_agents() {
    let server = sub_agent_reads_env();
    let env = TestEnv::new();
    env.write_project_file(".env", &format!("API_KEY={SECRET}\n"));
    let guard = hook(
        &env,
        "guard.sh",
        "#!/bin/sh\ngrep -q '\\.env\"' && { echo 'no .env' >&2; exit 2; }\nexit 0\n",
    );
    configure(
        &env,
        &server,
        json!({"PreToolUse": [{"name": "env-guard", "matcher": "^view$", "command": guard, "fail_closed": true}]}),
        json!({}),
    );
    env.run(&["run", "-q", "what is the API key?"], None)
        .assert_success();
    let reqs = server.model_requests();
    assert!(!anywhere(&reqs, SECRET), "the secret reached the model");
    assert!(reqs[2].tool_results()[0].1.contains("no .env"));
}

#[test]
fn claude_code_hooks_get_absolute_paths_and_crush_hooks_the_raw_input() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "write",
            json!({"file_path": "secrets/api.json", "content": "{\"key\": 1}"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    // A `*/secrets/*` Write guard as published: the path must have a directory before it.
    let guard = hook(
        &env,
        "secrets-guard.sh",
        r#"#!/bin/sh
f=$(sed -n 's/.*"file_path":"\([^"]*\)".*/\1/p')
case "$f" in */secrets/*) echo "refusing to write $f" >&2; exit 2;; esac
"#,
    );
    let raw_log = env.root().join("raw.log");
    let raw = hook(&env, "raw.sh", &logging(&raw_log, ""));
    let mut hooks = nested("PreToolUse", "Write|Edit", &guard);
    hooks["PreToolUse"]
        .as_array_mut()
        .unwrap()
        .push(json!({"command": raw}));
    configure(&env, &server, hooks, json!({}));
    env.run(&["run", "-y", "-q", "store the key"], None)
        .assert_success();
    assert!(!env.project().join("secrets/api.json").exists());
    let abs = env
        .project()
        .canonicalize()
        .unwrap()
        .join("secrets/api.json");
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(
        text.contains(&format!("refusing to write {}", abs.display())),
        "{text}"
    );
    assert_eq!(
        payloads(&raw_log)[0]["tool_input"]["file_path"],
        "secrets/api.json"
    );
}

#[test]
fn post_tool_use_hooks_read_claude_codes_tool_response() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "echo hello; echo oops >&2"})),
        Reply::tool_call(
            "write",
            json!({"file_path": "notes.txt", "content": "one\n"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    let log = env.root().join("post.log");
    // A reminder that reads `.tool_response.stdout`, as published ones do.
    let reminder = hook(
        &env,
        "reminder.sh",
        &logging(
            &log,
            r#"case "$p" in *'"stdout":"hello'*) echo '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"Reminder: stdout said hello"}}';; esac"#,
        ),
    );
    configure(
        &env,
        &server,
        nested("PostToolUse", "*", &reminder),
        json!({}),
    );
    env.run(&["run", "-y", "-q", "go"], None).assert_success();
    let (_, text, _) = server.request(1).tool_results()[0].clone();
    assert!(text.contains("Reminder: stdout said hello"), "{text}");
    let p = payloads(&log);
    assert_eq!(p[0]["tool_response"]["stdout"], "hello");
    assert_eq!(p[0]["tool_response"]["stderr"], "oops");
    assert_eq!(p[0]["tool_response"]["interrupted"], false);
    let w = &p[1]["tool_response"];
    let abs = env.project().canonicalize().unwrap().join("notes.txt");
    assert_eq!(w["type"], "create");
    assert_eq!(w["filePath"], abs.display().to_string());
    assert_eq!(w["content"], "one\n");
    assert_eq!(w["structuredPatch"][0]["lines"], json!(["+one"]));
}

#[test]
fn a_stop_hook_reads_the_transcript_in_claude_codes_format() {
    let server = FakeServer::with_script(vec![
        Reply::text("Draft ready. TODO: tests"),
        Reply::text("All done."),
    ]);
    let env = TestEnv::new();
    // Blocks the stop while the last assistant line of the transcript mentions a TODO.
    let stop = hook(
        &env,
        "todo-stop.sh",
        r#"#!/bin/sh
p=$(cat)
case "$p" in *'"stop_hook_active":true'*) exit 0;; esac
t=$(printf '%s' "$p" | sed -n 's/.*"transcript_path":"\([^"]*\)".*/\1/p')
if grep '"type":"assistant"' "$t" | tail -n 1 | grep -q 'TODO'; then
  echo '{"decision":"block","reason":"Finish the TODO first."}'
fi
"#,
    );
    configure(&env, &server, nested("Stop", "", &stop), json!({}));
    let out = env.run(&["run", "-q", "write it"], None);
    out.assert_success();
    assert!(out.stdout.ends_with("All done.\n"), "{}", out.stdout);
    let reqs = server.model_requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        reqs[1]
            .user_texts()
            .join("\n")
            .contains("Finish the TODO first."),
        "{:?}",
        reqs[1].user_texts()
    );
    // The transcript: one JSON object per line, Claude Code's fields.
    let dir = env.project().join(".crush/transcripts");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "user");
    assert_eq!(lines[0]["message"]["content"], "write it");
    assert_eq!(lines[1]["type"], "assistant");
    assert_eq!(lines[1]["parentUuid"], lines[0]["uuid"]);
    assert_eq!(
        lines[1]["message"]["content"][0]["text"],
        "Draft ready. TODO: tests"
    );
    assert_eq!(
        lines.last().unwrap()["message"]["content"][0]["text"],
        "All done."
    );
}

#[test]
fn the_agent_tool_is_claude_codes_agent_and_task_with_its_fields() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("agent", json!({"prompt": "Find the parser entry point"})),
        Reply::text("It is in src/parse.rs."),
        Reply::text("src/parse.rs"),
    ]);
    let env = TestEnv::new();
    let (task_log, agent_log) = (env.root().join("task.log"), env.root().join("agent.log"));
    let task = hook(&env, "task.sh", &logging(&task_log, ""));
    let agent = hook(&env, "agent.sh", &logging(&agent_log, ""));
    let mut hooks = nested("PreToolUse", "Task", &task);
    hooks["PreToolUse"]
        .as_array_mut()
        .unwrap()
        .push(json!({"matcher": "Agent", "hooks": [{"type": "command", "command": agent}]}));
    configure(&env, &server, hooks, json!({}));
    env.run(&["run", "-y", "-q", "where is the parser?"], None)
        .assert_success();
    for log in [&task_log, &agent_log] {
        let p = payloads(log);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0]["tool_name"], "Agent");
        assert_eq!(
            p[0]["tool_input"],
            json!({"description": "Find the parser entry point", "prompt": "Find the parser entry point", "subagent_type": "Explore"})
        );
        assert_eq!(p[0]["permission_mode"], "bypassPermissions");
        assert!(p[0]["prompt_id"].as_str().is_some_and(|s| !s.is_empty()));
        let t = PathBuf::from(p[0]["transcript_path"].as_str().unwrap());
        assert!(t.exists() && t.extension().unwrap() == "jsonl", "{t:?}");
    }
}

#[test]
fn session_start_hooks_set_variables_for_bash_through_claude_env_file() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "echo \"$GREETING\" > greeting.txt"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    let start = hook(
        &env,
        "env.sh",
        "#!/bin/sh\necho 'export GREETING=from-session-start' >> \"$CLAUDE_ENV_FILE\"\n",
    );
    configure(
        &env,
        &server,
        nested("SessionStart", "startup", &start),
        json!({}),
    );
    env.run(&["run", "-y", "-q", "greet"], None)
        .assert_success();
    assert_eq!(
        env.read_project_file("greeting.txt"),
        "from-session-start\n"
    );
}

/// A hook that asks for confirmation of every Bash call, with a message for the user.
fn ask_gate(env: &TestEnv) -> Value {
    let gate = hook(
        env,
        "ask.sh",
        r#"#!/bin/sh
cat >/dev/null
echo '{"systemMessage":"ask-gate looked at this call","hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"confirm every shell command"}}'
"#,
    );
    nested("PreToolUse", "Bash", &gate)
}

#[test]
fn an_ask_gate_refuses_in_crush_run_even_with_yolo() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "bash",
        json!({"command": "touch ran.txt"}),
    )]);
    let env = TestEnv::new();
    let hooks = ask_gate(&env);
    configure(&env, &server, hooks, json!({}));
    let out = env.run(&["run", "-y", "touch it"], None);
    out.assert_code(3);
    assert!(!env.project().join("ran.txt").exists());
    assert!(
        out.stderr.contains("confirm every shell command"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("ask-gate looked at this call"),
        "systemMessage is shown: {}",
        out.stderr
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[test]
fn an_ask_gate_asks_in_the_repl_even_for_a_call_that_needs_no_permission() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "ls"})),
        Reply::text("listed"),
    ]);
    server.route_when(
        |r| r.system_text().contains("title of a conversation"),
        vec![Reply::text("A Title")],
    );
    let env = TestEnv::new();
    env.write_project_file("visible.txt", "x");
    let mut hooks = ask_gate(&env);
    let note_log = env.root().join("notify.log");
    let notify = hook(&env, "notify.sh", &logging(&note_log, ""));
    hooks["Notification"] = json!([{"matcher": "permission_prompt", "hooks": [{"type": "command", "command": notify}]}]);
    configure(&env, &server, hooks, json!({}));
    // `ls` in the project is read-only: without the gate it runs unasked.
    let out = env.run(&["-y"], Some("list the files\ny\n"));
    out.assert_success();
    assert!(
        out.stderr
            .contains("Allow bash: ls (confirm every shell command)?"),
        "{}",
        out.stderr
    );
    let (_, text, _) = server
        .model_requests()
        .into_iter()
        .rfind(|r| !r.system_text().contains("title of a conversation"))
        .unwrap()
        .tool_results()[0]
        .clone();
    assert!(text.contains("visible.txt"), "{text}");
    let n = payloads(&note_log);
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(n[0]["hook_event_name"], "Notification");
    assert_eq!(n[0]["notification_type"], "permission_prompt");
}

/// A guard that denies every Bash call, naming where it was configured.
fn bash_denier(env: &TestEnv, name: &str) -> String {
    hook(
        env,
        name,
        &format!("#!/bin/sh\ncat >/dev/null\necho 'denied by {name}' >&2\nexit 2\n"),
    )
}

fn bash_then_done() -> FakeServer {
    FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "touch ran.txt"})),
        Reply::text("done"),
    ])
}

#[test]
fn hooks_of_the_users_claude_settings_run_and_are_listed() {
    let server = bash_then_done();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let guard = bash_denier(&env, "user-settings");
    let settings = env.home().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(
        &settings,
        json!({"model": "opus", "hooks": nested("PreToolUse", "Bash", &guard)}).to_string(),
    )
    .unwrap();
    env.run(&["run", "-y", "-q", "touch"], None)
        .assert_success();
    assert!(!env.project().join("ran.txt").exists());
    let list = env.run(&["hooks", "list"], None);
    list.assert_success();
    assert!(
        list.stdout
            .contains(&format!("from {}", settings.display())),
        "{}",
        list.stdout
    );
    // options.claude_code_hooks: false turns them off.
    let server = bash_then_done();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["options"] = json!({"claude_code_hooks": false});
    env.write_config(&cfg);
    env.run(&["run", "-y", "-q", "touch"], None)
        .assert_success();
    assert!(env.project().join("ran.txt").exists());
}

#[test]
fn project_claude_settings_run_only_once_the_project_is_trusted() {
    let env = TestEnv::new();
    let server = bash_then_done();
    env.use_server(&server, Dialect::OpenAi);
    let guard = bash_denier(&env, "project-settings");
    let local = bash_denier(&env, "local-settings");
    env.write_project_file(
        ".claude/settings.json",
        &json!({"hooks": nested("PreToolUse", "Bash", &guard)}).to_string(),
    );
    env.write_project_file(
        ".claude/settings.local.json",
        &json!({"hooks": nested("PreToolUse", "Bash", &local)}).to_string(),
    );
    let out = env.run(&["run", "-y", "touch"], None);
    out.assert_success();
    assert!(env.project().join("ran.txt").exists(), "skipped untrusted");
    assert!(
        out.stderr.contains("not trusted") && out.stderr.contains("2 hooks"),
        "{}",
        out.stderr
    );
    let trust = env.run(&["trust"], None);
    assert!(
        trust.stdout.contains(".claude/settings.local.json"),
        "{}",
        trust.stdout
    );
    server.assert_clean();

    std::fs::remove_file(env.project().join("ran.txt")).unwrap();
    server.push_all(vec![
        Reply::tool_call("bash", json!({"command": "touch ran.txt"})),
        Reply::text("done"),
    ]);
    env.run(&["--trust", "run", "-y", "-q", "touch"], None)
        .assert_success();
    assert!(!env.project().join("ran.txt").exists());
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(
        text.contains("denied by project-settings") && text.contains("denied by local-settings"),
        "{text}"
    );
}

#[test]
fn a_plugin_hook_finds_its_files_through_claude_plugin_root() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    let plugin = env.root().join("plugins/branch-context");
    write_exe(
        &plugin.join("scripts/context.sh"),
        "#!/bin/sh\ncat >/dev/null\necho \"context from $(basename \"$CLAUDE_PLUGIN_ROOT\")\"\n",
    );
    // The published form: the script's path is built from the variable.
    std::fs::create_dir_all(plugin.join("hooks")).unwrap();
    std::fs::write(
        plugin.join("hooks/hooks.json"),
        json!({"description": "adds context", "hooks": nested("UserPromptSubmit", "", "${CLAUDE_PLUGIN_ROOT}/scripts/context.sh")}).to_string(),
    )
    .unwrap();
    configure(
        &env,
        &server,
        json!({}),
        json!({"options": {"claude_plugins": [plugin.display().to_string()]}}),
    );
    let out = env.run(&["run", "-q", "hello"], None);
    out.assert_success();
    let texts = server.last_request().user_texts().join("\n");
    assert!(texts.contains("context from branch-context"), "{texts}");
}

#[test]
fn subagent_stop_and_session_end_fire_at_crushs_moments() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("agent", json!({"prompt": "List the files"})),
        Reply::text("Two files."),
        Reply::text("There are two files."),
    ]);
    let env = TestEnv::new();
    let log = env.root().join("events.log");
    let logger = hook(&env, "log.sh", &logging(&log, ""));
    let mut hooks = nested("SubagentStop", "Explore", &logger);
    hooks["SessionEnd"] = json!([{"hooks": [{"type": "command", "command": logger}]}]);
    configure(&env, &server, hooks, json!({}));
    env.run(&["run", "-q", "how many files?"], None)
        .assert_success();
    let p = payloads(&log);
    let events: Vec<&str> = p
        .iter()
        .map(|e| e["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["SubagentStop", "SessionEnd"]);
    assert_eq!(p[0]["agent_type"], "Explore");
    assert_eq!(p[0]["last_assistant_message"], "Two files.");
    let t = PathBuf::from(p[0]["agent_transcript_path"].as_str().unwrap());
    assert!(
        std::fs::read_to_string(&t).unwrap().contains("Two files."),
        "{t:?}"
    );
    assert_eq!(p[1]["reason"], "other");
}

#[test]
fn a_pre_compact_hook_can_block_the_summary() {
    let server = FakeServer::with_script(vec![Reply::text("hi")]);
    server.route_when(
        |r| r.system_text().contains("title of a conversation"),
        vec![Reply::text("A Title")],
    );
    let env = TestEnv::new();
    let log = env.root().join("compact.log");
    let blocker = hook(
        &env,
        "no-compact.sh",
        &logging(&log, "echo 'keep the full history' >&2; exit 2"),
    );
    configure(
        &env,
        &server,
        nested("PreCompact", "manual", &blocker),
        json!({}),
    );
    let out = env.run(&[], Some("hello\n/compact\n"));
    out.assert_success();
    assert!(
        out.stderr.contains("keep the full history"),
        "{}",
        out.stderr
    );
    assert_eq!(payloads(&log)[0]["trigger"], "manual");
    let turns = server
        .model_requests()
        .into_iter()
        .filter(|r| !r.system_text().contains("title of a conversation"))
        .count();
    assert_eq!(turns, 1, "no summary call");
}

/// A loop hook as published (a state file counts the iterations; the hook blocks the stop
/// until the count is reached, then removes its state file): six blocks in a row, then the stop
/// passes — under the default cap.
#[test]
fn a_six_iteration_stop_loop_runs_to_its_end_and_cleans_up() {
    let server = FakeServer::always_text("iteration done");
    let env = TestEnv::new();
    let state = env.project().join(".claude/loop.local.md");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    std::fs::write(
        &state,
        "---\niteration: 1\nmax_iterations: 6\n---\nKeep going.\n",
    )
    .unwrap();
    let stop = hook(
        &env,
        "loop-stop.sh",
        r#"#!/bin/sh
cat > /dev/null
STATE=.claude/loop.local.md
[ -f "$STATE" ] || exit 0
n=$(sed -n 's/^iteration: *//p' "$STATE")
max=$(sed -n 's/^max_iterations: *//p' "$STATE")
if [ "$n" -gt "$max" ]; then
  rm -f "$STATE"
  exit 0
fi
sed -i "s/^iteration: .*/iteration: $((n + 1))/" "$STATE"
printf '{"decision":"block","reason":"Iteration %s: keep going."}\n' "$n"
"#,
    );
    configure(&env, &server, nested("Stop", "", &stop), json!({}));
    let out = env.run(&["run", "-q", "loop"], None);
    out.assert_success();
    // The first answer and six continuations.
    assert_eq!(server.model_requests().len(), 7, "{}", out.stderr);
    let last = server.last_request().user_texts().join("\n");
    assert!(last.contains("Iteration 6: keep going."), "{last}");
    assert!(
        !state.exists(),
        "the hook removes its state file at the end"
    );
    assert!(!out.stderr.contains("max_stop_blocks"), "{}", out.stderr);
}

/// A formatter hook as published (PostToolUse on Edit|Write, the file path read from the
/// payload, the file rewritten in place): the model's next edit of that file, written against
/// the formatted text, goes through, and the model is told the file had changed.
#[test]
fn an_edit_after_a_formatter_hook_goes_through_with_a_note() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("view", json!({"file_path": "a.js"})),
        Reply::tool_call(
            "edit",
            json!({"file_path": "a.js", "old_string": "const a=1", "new_string": "const a=10"}),
        ),
        Reply::tool_call(
            "edit",
            json!({"file_path": "a.js", "old_string": "const b=2;", "new_string": "const b=20;"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    env.write_project_file("a.js", "const a=1\nconst b=2\n");
    let fmt = hook(
        &env,
        "format.sh",
        r#"#!/bin/sh
f=$(sed -n 's/.*"file_path":"\([^"]*\)".*/\1/p')
[ -n "$f" ] && sed -i 's/\([^;]\)$/\1;/' "$f"
exit 0
"#,
    );
    configure(
        &env,
        &server,
        nested("PostToolUse", "Edit|MultiEdit|Write", &fmt),
        json!({}),
    );
    env.run(&["run", "-y", "-q", "go"], None).assert_success();
    let results = server.request(3).tool_results();
    let (_, second, _) = &results[2];
    assert!(
        second.contains("had changed since you last read it"),
        "{second}"
    );
    assert!(!second.contains("modified since"), "{second}");
    // Both edits landed, and the formatter ran after each.
    assert_eq!(env.read_project_file("a.js"), "const a=10;\nconst b=20;\n");
}

/// A published guard hook reads the command with `jq`: on a machine without jq (an empty PATH
/// here) it still blocks, with the jq crush provides, and `crush __jq` is that jq.
#[test]
fn a_jq_guard_works_without_an_installed_jq() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "rm -rf build && touch ran.txt"})),
        Reply::text("blocked, fine"),
    ]);
    let env = TestEnv::new();
    let guard = hook(
        &env,
        "no-rm.sh",
        r#"#!/bin/sh
cmd=$(jq -r '.tool_input.command // empty')
case "$cmd" in *"rm -rf"*) echo "Blocked: $cmd" >&2; exit 2;; esac
exit 0
"#,
    );
    configure(
        &env,
        &server,
        nested("PreToolUse", "Bash", &guard),
        json!({}),
    );
    let empty = env.root().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = env.run_with_env(
        &["run", "-y", "-q", "clean"],
        &[("PATH", empty.to_str().unwrap())],
    );
    out.assert_success();
    assert!(
        !env.project().join("ran.txt").exists(),
        "the guard blocked it"
    );
    let (_, result, _) = server.request(1).tool_results()[0].clone();
    assert!(result.contains("Blocked: rm -rf build"), "{result}");
    // The same jq, by hand.
    let mut cmd = env.crush();
    cmd.args(["__jq", "-c", "{a: .x}"]);
    let out =
        crate::support::env::run_command(cmd, Some("{\"x\": [1]}"), crate::support::RUN_TIMEOUT);
    assert_eq!(out.stdout, "{\"a\":[1]}\n");
}

/// A fail-closed guard whose program is missing (exit 127) denies: it is a failed hook, not a
/// pass.
#[test]
fn a_fail_closed_guard_whose_program_is_missing_denies() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "touch ran.txt"})),
        Reply::text("ok"),
    ]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["hooks"] = json!({"PreToolUse": [{"name": "guard", "matcher": "^bash$",
        "command": "no-such-guard-program-x7 --check", "fail_closed": true}]});
    env.write_config(&cfg);
    env.run(&["run", "-y", "-q", "go"], None).assert_success();
    assert!(!env.project().join("ran.txt").exists());
    let (_, result, _) = server.request(1).tool_results()[0].clone();
    assert!(result.contains("failed closed"), "{result}");
}

/// A guard with `"if": "Bash(rm *)"` spawns only for a call that matches the rule: `ls` runs
/// without it (it would leave a marker), `rm` is denied; an `if` on an event without a tool
/// is a warning and that hook never runs.
#[test]
fn a_guard_with_if_spawns_only_for_calls_matching_its_rule() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "ls > listed.txt"})),
        Reply::tool_call("bash", json!({"command": "rm -f ls-ok && touch ran.txt"})),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    let marker = env.root().join("spawned.log");
    let guard = hook(
        &env,
        "no-rm.sh",
        &format!(
            "#!/bin/sh\ncat >/dev/null\necho x >> '{}'\necho 'no rm here' >&2\nexit 2\n",
            marker.display()
        ),
    );
    let start = hook(
        &env,
        "start.sh",
        &format!("#!/bin/sh\necho start >> '{}'\n", marker.display()),
    );
    let hooks = json!({
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": guard, "if": "Bash(rm *)"}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": start, "if": "Bash(ls *)"}]}],
    });
    let settings = env.home().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, json!({"hooks": hooks}).to_string()).unwrap();
    env.use_server(&server, Dialect::OpenAi);
    let check = env.run(&["hooks", "list"], None);
    let all = format!("{}{}", check.stdout, check.stderr);
    assert!(!all.contains("unknown key 'if'"), "{all}");
    assert!(all.contains("never runs on SessionStart"), "{all}");
    let out = env.run(&["run", "-y", "-q", "go"], None);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(env.project().join("listed.txt").exists(), "ls ran: {all}");
    assert!(!env.project().join("ran.txt").exists(), "rm denied: {all}");
    let spawned = std::fs::read_to_string(&marker).unwrap_or_default();
    assert_eq!(spawned, "x\n", "once, for the rm call only: {all}");
}

/// Claude Code's exec form: `command` is the program and `args` its arguments, passed as they
/// are with no shell (a blank or `$HOME;` stays inside its argument), `${CLAUDE_PROJECT_DIR}`
/// in the program is the project; the script an argument names is part of the trust.
#[test]
fn a_hook_in_exec_form_gets_its_args_verbatim_and_its_script_is_trusted() {
    let server = bash_then_done();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let p = env.project().to_path_buf();
    write_exe(
        &p.join(".claude/hooks/deny.sh"),
        "#!/bin/sh\ncat >/dev/null\necho \"$# args: [$1] [$2]\" >&2\nexit 2\n",
    );
    write_exe(
        &p.join(".claude/hooks/check.sh"),
        "#!/bin/sh\ncat >/dev/null\n",
    );
    env.write_project_file(
        ".claude/settings.json",
        &json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "${CLAUDE_PROJECT_DIR}/.claude/hooks/deny.sh",
             "args": ["a b", "$HOME;echo x"]},
            {"type": "command", "command": "sh", "args": [".claude/hooks/check.sh"]}
        ]}]}})
        .to_string(),
    );
    env.run(&["trust"], None).assert_success();
    let list = env.run(&["hooks", "list"], None);
    assert!(!list.stderr.contains("unknown key"), "{}", list.stderr);
    assert!(
        list.stdout.contains("sh '.claude/hooks/check.sh'"),
        "{}",
        list.stdout
    );
    env.run(&["run", "-y", "-q", "touch"], None)
        .assert_success();
    assert!(!p.join("ran.txt").exists());
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(text.contains("2 args: [a b] [$HOME;echo x]"), "{text}");
    // The script named only in args is watched: editing it untrusts the project.
    let check = p.join(".claude/hooks/check.sh");
    std::fs::write(&check, "#!/bin/sh\ncat >/dev/null\n# edited\n").unwrap();
    let show = env.run(&["config", "show"], None);
    assert!(
        show.stderr.contains("has changed since it was trusted"),
        "{}",
        show.stderr
    );
}

/// A PostToolUse hook that exits 2 cannot block (the tool already ran), nor can a
/// Notification one: `crush hooks test` says so and exits 0, where a PreToolUse deny exits 3.
#[test]
fn hooks_test_says_a_deny_on_an_event_that_cannot_block_stops_nothing() {
    let env = TestEnv::new();
    let denier = bash_denier(&env, "late");
    let settings = env.home().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let mut hooks = nested("PostToolUse", "Bash", &denier);
    hooks["Notification"] = nested("Notification", "", &denier)["Notification"].clone();
    hooks["PreToolUse"] = nested("PreToolUse", "Bash", &denier)["PreToolUse"].clone();
    std::fs::write(&settings, json!({"hooks": hooks}).to_string()).unwrap();
    let post = env.run(&["hooks", "test", "PostToolUse", "--tool", "bash"], None);
    assert_eq!(post.code, 0, "{}{}", post.stdout, post.stderr);
    assert!(
        post.stdout.contains("→ feedback: denied by late")
            && post.stdout.contains("decision: deny")
            && post
                .stdout
                .contains("PostToolUse cannot block (the tool already ran)"),
        "{}",
        post.stdout
    );
    let note = env.run(&["hooks", "test", "Notification"], None);
    assert_eq!(note.code, 0, "{}{}", note.stdout, note.stderr);
    assert!(
        note.stdout.contains("→ not blocked: denied by late")
            && note.stdout.contains("shown to the user only"),
        "{}",
        note.stdout
    );
    let pre = env.run(&["hooks", "test", "PreToolUse", "--tool", "bash"], None);
    assert_eq!(pre.code, 3, "{}{}", pre.stdout, pre.stderr);
    assert!(
        pre.stdout.contains("→ deny: denied by late") && !pre.stdout.contains("cannot block"),
        "{}",
        pre.stdout
    );
}
