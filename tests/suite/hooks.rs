//! Hooks end to end: real hook scripts in the temp dir, the real binary, the fake model server.
//! No test asserts on wall time; slow hooks only make finish order differ from config order.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// Writes an executable script under `<root>/hooks/` and returns its absolute path.
pub(super) fn hook(env: &TestEnv, name: &str, body: &str) -> String {
    let dir = env.root().join("hooks");
    std::fs::create_dir_all(&dir).unwrap();
    let p: PathBuf = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

/// The fake server's config plus `hooks`.
fn with_hooks(env: &TestEnv, server: &FakeServer, hooks: Value) {
    let mut cfg = env.config_for(server, Dialect::OpenAi);
    cfg["hooks"] = hooks;
    env.write_config(&cfg);
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The stored session (latest) as `sessions show --json`.
fn session_json(env: &TestEnv) -> Value {
    let list = env.run(&["sessions", "list", "--json"], None);
    list.assert_success();
    let sessions: Value = serde_json::from_str(&list.stdout).unwrap();
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    let show = env.run(&["sessions", "show", &id, "--json"], None);
    show.assert_success();
    serde_json::from_str(&show.stdout).unwrap()
}

/// The metadata of every stored tool result, parsed.
fn tool_result_metadata(env: &TestEnv) -> Vec<Value> {
    let s = session_json(env);
    let mut out = Vec::new();
    for m in s["messages"].as_array().unwrap() {
        for p in m["parts"].as_array().unwrap() {
            if p["type"] == "tool_result" {
                let meta = p["data"]["metadata"].as_str().unwrap_or("");
                out.push(serde_json::from_str(meta).unwrap_or(Value::Null));
            }
        }
    }
    out
}

/// The shell script of the man page (HOOKS) whose `.nf` block holds the line naming `name`, its
/// roff escapes undone.
fn man_page_script(name: &str) -> String {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/man/crush.1.template"))
            .unwrap();
    let at = page.find(name).expect("the script is in the man page");
    let start = page[..at].rfind(".nf\n").expect("in a .nf block") + ".nf\n".len();
    let end = start + page[start..].find(".fi\n").unwrap();
    page[start..end].replace("\\-", "-").replace("\\e", "\\")
}

fn bash_then_done(command: &str) -> FakeServer {
    FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({ "command": command })),
        Reply::text("done"),
    ])
}

#[test]
fn pre_tool_use_deny_by_exit_2_keeps_the_tool_from_running_and_tells_the_model() {
    let server = bash_then_done("touch ran.txt");
    let env = TestEnv::new();
    let h = hook(
        &env,
        "deny.sh",
        "#!/bin/sh\necho 'no touching today' >&2\nexit 2\n",
    );
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [{"name": "guard", "matcher": "^bash$", "command": h}]}),
    );
    let out = env.run(&["run", "-y", "touch it"], None);
    out.assert_success();
    assert!(
        !env.project().join("ran.txt").exists(),
        "the tool must not run"
    );
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(
        text.contains("blocked by hook") && text.contains("no touching today"),
        "{text}"
    );
    assert!(
        out.stderr
            .contains("hook PreToolUse guard [^bash$] → deny: no touching today"),
        "{}",
        out.stderr
    );
    // The per-hook results are stored with the tool result.
    let meta = &tool_result_metadata(&env)[0]["hook"];
    assert_eq!(meta["decision"], "deny", "{meta}");
    assert_eq!(meta["hooks"][0]["name"], "guard");
    assert_eq!(meta["hooks"][0]["reason"], "no touching today");
}

#[test]
fn claude_code_nested_hook_sees_claude_names_and_denies_with_json() {
    let server = bash_then_done("touch ran.txt");
    let env = TestEnv::new();
    // A Claude Code script: checks tool_name == "Bash" on stdin, answers with hookSpecificOutput.
    let h = hook(
        &env,
        "cc.sh",
        r#"#!/bin/sh
if grep -q '"tool_name":"Bash"'; then
  echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"Bash is off limits"}}'
fi
"#,
    );
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": h}]}]}),
    );
    env.run(&["run", "-y", "touch it"], None).assert_success();
    assert!(!env.project().join("ran.txt").exists());
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(text.contains("Bash is off limits"), "{text}");
}

#[test]
fn exit_49_halts_the_turn_and_run_exits_3() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "bash",
        json!({"command": "touch ran.txt"}),
    )]);
    let env = TestEnv::new();
    let h = hook(
        &env,
        "halt.sh",
        "#!/bin/sh\necho 'stop right there' >&2\nexit 49\n",
    );
    with_hooks(&env, &server, json!({"PreToolUse": [{"command": h}]}));
    let out = env.run(&["run", "-y", "touch it"], None);
    out.assert_code(3);
    assert!(!env.project().join("ran.txt").exists());
    assert!(out.stderr.contains("halted the turn"), "{}", out.stderr);
    assert!(out.stderr.contains("stop right there"), "{}", out.stderr);
    // The turn ended after the blocked call: the model was not called again.
    assert_eq!(server.model_requests().len(), 1);
    let s = session_json(&env).to_string();
    assert!(s.contains("Turn halted by hook"), "{s}");
}

#[test]
fn allow_skips_the_permission_refusal_without_yolo() {
    let server = bash_then_done("echo hi > f.txt");
    let env = TestEnv::new();
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [{"command": "echo '{\"decision\":\"allow\"}'"}]}),
    );
    // No --yolo, no allowed_tools: only the hook's allow lets this run.
    env.run(&["run", "make f.txt"], None).assert_success();
    assert_eq!(env.read_project_file("f.txt"), "hi\n");
}

#[test]
fn a_hook_without_opinion_leaves_the_permission_flow_alone() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "bash",
        json!({"command": "echo hi > f.txt"}),
    )]);
    let env = TestEnv::new();
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [{"command": "echo '{\"context\":\"just a note\"}'"}]}),
    );
    let out = env.run(&["run", "make f.txt"], None);
    out.assert_code(3);
    assert!(!env.project().join("f.txt").exists());
    assert!(out.stderr.contains("--yolo"), "{}", out.stderr);
}

#[test]
fn updated_input_changes_what_runs() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "bash",
            json!({"command": "echo original > out.txt", "description": "keep me"}),
        ),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    let h = hook(
        &env,
        "rewrite.sh",
        "#!/bin/sh\necho '{\"updated_input\":{\"command\":\"echo patched > out.txt\"}}'\n",
    );
    with_hooks(&env, &server, json!({"PreToolUse": [{"command": h}]}));
    env.run(&["run", "-y", "write"], None).assert_success();
    assert_eq!(env.read_project_file("out.txt"), "patched\n");
    let meta = &tool_result_metadata(&env)[0]["hook"];
    assert_eq!(meta["input_rewrite"], true, "{meta}");
    // The session remembers the call as it ran, other keys kept.
    let s = session_json(&env).to_string();
    assert!(s.contains("echo patched > out.txt"), "{s}");
    assert!(s.contains("keep me"), "{s}");
}

#[test]
fn composition_follows_config_order_not_finish_order() {
    let server = bash_then_done("echo model > order.txt");
    let env = TestEnv::new();
    // The first hook finishes last; config order must still put its patch and context first.
    let slow = hook(
        &env,
        "slow.sh",
        "#!/bin/sh\nsleep 1\necho '{\"context\":\"ctx-a\",\"updated_input\":{\"command\":\"echo first > order.txt\"}}'\n",
    );
    let fast = hook(
        &env,
        "fast.sh",
        "#!/bin/sh\necho '{\"context\":\"ctx-b\",\"updated_input\":{\"command\":\"echo second > order.txt\"}}'\n",
    );
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [{"command": slow}, {"command": fast}]}),
    );
    env.run(&["run", "-y", "order"], None).assert_success();
    assert_eq!(env.read_project_file("order.txt"), "second\n");
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    let (a, b) = (text.find("ctx-a"), text.find("ctx-b"));
    assert!(a.is_some() && b.is_some() && a < b, "{text}");
}

#[test]
fn a_timed_out_hook_has_no_opinion_unless_it_fails_closed() {
    // No opinion: the tool runs.
    let server = bash_then_done("touch ran.txt");
    let env = TestEnv::new();
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [{"name": "sleepy", "command": "sleep 30", "timeout": 1}]}),
    );
    let out = env.run(&["run", "-y", "touch it"], None);
    out.assert_success();
    assert!(env.project().join("ran.txt").exists());
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);

    // fail_closed: a deny naming the hook.
    let server = bash_then_done("touch ran.txt");
    let env = TestEnv::new();
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [{"name": "sleepy", "command": "sleep 30", "timeout": 1, "fail_closed": true}]}),
    );
    env.run(&["run", "-y", "touch it"], None).assert_success();
    assert!(!env.project().join("ran.txt").exists());
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(
        text.contains("'sleepy'") && text.contains("timed out"),
        "{text}"
    );
}

#[test]
fn a_hook_whose_grandchild_holds_stdout_is_abandoned_and_its_answer_kept() {
    let server = bash_then_done("echo hi > f.txt");
    let env = TestEnv::new();
    let h = hook(
        &env,
        "bg.sh",
        "#!/bin/sh\nsleep 20 &\necho '{\"decision\":\"allow\"}'\n",
    );
    with_hooks(&env, &server, json!({"PreToolUse": [{"command": h}]}));
    // Without --yolo: only the abandoned hook's allow lets the call run.
    let out = env.run(&["run", "make f.txt"], None);
    out.assert_success();
    assert_eq!(env.read_project_file("f.txt"), "hi\n");
    assert!(
        out.stderr.contains("kept the hook's output open"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_hook_that_never_reads_stdin_is_fine() {
    // A big tool input: far more payload than a pipe buffer holds, and nobody reads it.
    let big = "x".repeat(300_000);
    let server = FakeServer::with_script(vec![
        Reply::tool_call("write", json!({"file_path": "big.txt", "content": big})),
        Reply::text("done"),
    ]);
    let env = TestEnv::new();
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [{"command": "echo '{\"decision\":\"allow\",\"context\":\"unread\"}'"}]}),
    );
    // Without --yolo: the write runs only because the hook's allow was read.
    env.run(&["run", "go"], None).assert_success();
    assert_eq!(env.read_project_file("big.txt").len(), 300_000);
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(text.contains("unread"), "{text}");
}

#[test]
fn a_shebang_with_a_missing_interpreter_falls_back_to_path() {
    let server = bash_then_done("touch ran.txt");
    let env = TestEnv::new();
    let h = hook(
        &env,
        "fallback.sh",
        "#!/no/such/dir/sh\necho '{\"decision\":\"deny\",\"reason\":\"ran via PATH\"}'\n",
    );
    with_hooks(&env, &server, json!({"PreToolUse": [{"command": h}]}));
    env.run(&["run", "-y", "touch"], None).assert_success();
    assert!(!env.project().join("ran.txt").exists());
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(text.contains("ran via PATH"), "{text}");
}

#[test]
fn hooks_get_the_payload_and_environment() {
    let server = bash_then_done("echo hi");
    let env = TestEnv::new();
    let dump = env.root().join("dump");
    let h = hook(
        &env,
        "dump.sh",
        &format!(
            "#!/bin/sh\ncat > {0}.json\nenv | grep -E '^(CRUSH|AGENT|AI_AGENT|CLAUDE_PROJECT_DIR)' | sort > {0}.env\n",
            dump.display()
        ),
    );
    with_hooks(&env, &server, json!({"PreToolUse": [{"command": h}]}));
    env.run(&["run", "-y", "go"], None).assert_success();
    let payload: Value =
        serde_json::from_str(&std::fs::read_to_string(dump.with_extension("json")).unwrap())
            .unwrap();
    assert_eq!(payload["event"], "PreToolUse");
    assert_eq!(payload["hook_event_name"], "PreToolUse");
    assert_eq!(payload["tool_name"], "bash");
    assert_eq!(payload["tool_input"], json!({"command": "echo hi"}));
    assert!(
        payload["tool_use_id"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    let cwd = env.project().canonicalize().unwrap();
    assert_eq!(payload["cwd"], cwd.display().to_string());
    let vars = std::fs::read_to_string(dump.with_extension("env")).unwrap();
    for want in [
        "CRUSH=1".to_string(),
        "AGENT=crush".into(),
        "AI_AGENT=crush".into(),
        "CRUSH_EVENT=PreToolUse".into(),
        "CRUSH_TOOL_NAME=bash".into(),
        "CRUSH_TOOL_INPUT_COMMAND=echo hi".into(),
        format!("CRUSH_CWD={}", cwd.display()),
        format!("CLAUDE_PROJECT_DIR={}", cwd.display()),
    ] {
        assert!(vars.lines().any(|l| l == want), "missing {want} in\n{vars}");
    }
    assert!(vars.contains("CRUSH_SESSION_ID="), "{vars}");
}

#[test]
fn user_prompt_submit_deny_sends_nothing_and_exits_3() {
    let server = FakeServer::always_text("should not be asked");
    let env = TestEnv::new();
    let h = hook(
        &env,
        "secret.sh",
        "#!/bin/sh\nif grep -q 'sk-live'; then echo '{\"decision\":\"deny\",\"reason\":\"includes a production secret\"}'; fi\n",
    );
    with_hooks(&env, &server, json!({"UserPromptSubmit": [{"command": h}]}));
    let out = env.run(&["run", "deploy with sk-live-123"], None);
    out.assert_code(3);
    assert!(
        out.stderr.contains("includes a production secret"),
        "{}",
        out.stderr
    );
    assert_eq!(
        server.model_requests().len(),
        0,
        "nothing reached the model"
    );
    assert_eq!(out.stdout, "");
}

#[test]
fn user_prompt_submit_halt_stops_before_the_model() {
    let server = FakeServer::always_text("should not be asked");
    let env = TestEnv::new();
    with_hooks(
        &env,
        &server,
        json!({"user_prompt_submit": [{"command": "echo 'maintenance window' >&2; exit 49"}]}),
    );
    let out = env.run(&["run", "--json", "hello"], None);
    out.assert_code(3);
    assert_eq!(server.model_requests().len(), 0);
    let events = json_lines(&out.stdout);
    let hook_ev = events
        .iter()
        .find(|e| e["type"] == "hook")
        .expect("a hook event");
    assert_eq!(hook_ev["decision"], "halt");
    assert_eq!(hook_ev["event"], "UserPromptSubmit");
    assert_eq!(hook_ev["reason"], "maintenance window");
    assert_eq!(events.last().unwrap()["reason"], "hook_halted");
}

#[test]
fn user_prompt_submit_rewrite_context_and_files_reach_the_model() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    env.write_project_file("docs/ARCH.md", "architecture");
    let h = hook(
        &env,
        "expand.sh",
        r#"#!/bin/sh
echo '{"decision":"allow","context":"Current branch: feat/login","updated_prompt":"fix the login flow (expanded)","context_files":["docs/ARCH.md","missing.md"]}'
"#,
    );
    with_hooks(&env, &server, json!({"UserPromptSubmit": [{"command": h}]}));
    env.run(&["run", "@TODO"], None).assert_success();
    let texts = server.last_request().user_texts().join("\n");
    assert!(texts.contains("fix the login flow (expanded)"), "{texts}");
    assert!(!texts.contains("@TODO"), "the prompt was replaced: {texts}");
    assert!(texts.contains("Current branch: feat/login"), "{texts}");
    assert!(texts.contains("- docs/ARCH.md"), "{texts}");
    assert!(!texts.contains("missing.md"), "{texts}");
}

#[test]
fn session_start_and_post_tool_use_context_reach_the_model() {
    let server = bash_then_done("echo hi");
    let env = TestEnv::new();
    let post = hook(
        &env,
        "post.sh",
        r#"#!/bin/sh
grep -q '"tool_response"' && echo '{"decision":"block","reason":"lint failed","hookSpecificOutput":{"additionalContext":"ignored on block"}}'
"#,
    );
    with_hooks(
        &env,
        &server,
        json!({
            "SessionStart": [{"command": "grep -q '\"source\":\"startup\"' && echo '{\"context\":\"fresh session\"}'"}],
            "PostToolUse": [{"matcher": "bash", "command": post}]
        }),
    );
    env.run(&["run", "-y", "go"], None).assert_success();
    let first = server.request(0).user_texts().join("\n");
    assert!(first.contains("fresh session"), "{first}");
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(text.starts_with("hi"), "the tool ran: {text}");
    assert!(
        text.contains("PostToolUse hook feedback: lint failed"),
        "{text}"
    );
}

#[test]
fn a_stop_hook_block_makes_the_agent_continue_once() {
    let server =
        FakeServer::with_script(vec![Reply::text("first try"), Reply::text("really done")]);
    let env = TestEnv::new();
    let state = env.root().join("stop-state");
    let h = hook(
        &env,
        "stop.sh",
        &format!(
            "#!/bin/sh\nif [ ! -e {0} ]; then touch {0}; echo '{{\"decision\":\"block\",\"reason\":\"run the tests first\"}}'; fi\n",
            state.display()
        ),
    );
    with_hooks(&env, &server, json!({"Stop": [{"command": h}]}));
    let out = env.run(&["run", "work"], None);
    out.assert_success();
    assert_eq!(server.model_requests().len(), 2);
    let texts = server.last_request().user_texts().join("\n");
    assert!(texts.contains("run the tests first"), "{texts}");
    assert!(out.stdout.contains("really done"), "{}", out.stdout);
}

#[test]
fn a_stop_hook_that_always_blocks_is_overridden() {
    let server = FakeServer::always_text("done");
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["options"]["max_stop_blocks"] = json!(3);
    cfg["hooks"] =
        json!({"Stop": [{"command": "echo '{\"decision\":\"block\",\"reason\":\"never stop\"}'"}]});
    env.write_config(&cfg);
    let out = env.run(&["run", "work"], None);
    out.assert_success();
    // The first answer plus at most 3 continuations, and the user is told why it ended.
    assert_eq!(server.model_requests().len(), 4);
    assert!(
        out.stderr
            .contains("a Stop hook asked to continue 4 times in a row")
            && out.stderr.contains("options.max_stop_blocks = 3"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_invalid_matcher_is_a_configuration_error_naming_the_hook_and_file() {
    let server = FakeServer::always_text("x");
    let env = TestEnv::new();
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [{"name": "broken", "matcher": "[oops", "command": "true"}]}),
    );
    let out = env.run(&["run", "hi"], None);
    out.assert_code(2);
    assert!(out.stderr.contains("hook 'broken'"), "{}", out.stderr);
    assert!(out.stderr.contains("crush.json"), "{}", out.stderr);
    assert!(
        out.stderr.contains("invalid matcher regex"),
        "{}",
        out.stderr
    );
    assert_eq!(server.model_requests().len(), 0);
}

#[test]
fn hooks_list_shows_each_hook_with_its_file_and_what_matches() {
    let server = FakeServer::always_text("x");
    let env = TestEnv::new();
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [
            {"name": "bash-guard", "matcher": "^bash$", "command": "true"},
            {"name": "edit-guard", "matcher": "^edit$", "command": "false"}
        ]}),
    );
    env.write_project_file(
        "crush.json",
        r#"{"hooks": {"UserPromptSubmit": [{"name": "project-hook", "command": "true"}], "TurnEnd": []}}"#,
    );
    std::fs::write(
        env.config_dir().join("crushrc"),
        "hook add PreToolUse --command 'echo rc' --name rc-hook --matcher '^bash$'\n",
    )
    .unwrap();
    let out = env.run(&["--trust", "hooks", "list", "--tool", "bash"], None);
    out.assert_success();
    let rc = env.config_dir().join("crushrc").display().to_string();
    assert!(
        out.stdout.contains("match  rc-hook [^bash$]: echo rc"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!("from {rc}")), "{}", out.stdout);
    assert!(
        out.stderr.contains("unknown hook event 'TurnEnd'"),
        "an unknown event is a warning: {}",
        out.stderr
    );
    let global = env.config_dir().join("crush.json").display().to_string();
    let project = env.project().join("crush.json");
    assert!(
        out.stdout.contains("match  bash-guard [^bash$]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("-      edit-guard [^edit$]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(&format!("from {global} (hooks.PreToolUse[0])")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("project-hook"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&project.file_name().unwrap().to_string_lossy().to_string())
    );
}

#[test]
fn hooks_test_exits_0_for_allow_and_3_for_deny() {
    let server = FakeServer::always_text("x");
    let env = TestEnv::new();
    let h = hook(
        &env,
        "rm-guard.sh",
        "#!/bin/sh\ncase \"$CRUSH_TOOL_INPUT_COMMAND\" in *rm*) echo 'no rm' >&2; exit 2;; esac\necho '{\"decision\":\"allow\",\"updated_input\":{\"timeout\":5}}'\n",
    );
    with_hooks(
        &env,
        &server,
        json!({
            "PreToolUse": [{"name": "rm-guard", "matcher": "bash", "command": h}],
            "UserPromptSubmit": [{"command": "echo '{\"updated_prompt\":\"polite: hi\"}'"}]
        }),
    );
    let out = env.run(
        &[
            "hooks",
            "test",
            "PreToolUse",
            "--tool",
            "bash",
            "--input",
            r#"{"command":"rm -rf /"}"#,
        ],
        None,
    );
    out.assert_code(3);
    assert!(out.stdout.contains("decision: deny"), "{}", out.stdout);
    assert!(out.stdout.contains("reason: no rm"), "{}", out.stdout);
    let out = env.run(
        &[
            "hooks",
            "test",
            "pre_tool_use",
            "--tool",
            "bash",
            "--input",
            r#"{"command":"ls"}"#,
        ],
        None,
    );
    out.assert_success();
    assert!(out.stdout.contains("decision: allow"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains(r#"updated input: {"command":"ls","timeout":5}"#),
        "{}",
        out.stdout
    );
    let out = env.run(
        &["hooks", "test", "UserPromptSubmit", "--prompt", "hi"],
        None,
    );
    out.assert_success();
    assert!(
        out.stdout.contains("updated prompt: polite: hi"),
        "{}",
        out.stdout
    );
    // No hook for this tool: no opinion, exit 0.
    env.run(&["hooks", "test", "PreToolUse", "--tool", "view"], None)
        .assert_success();
    env.run(&["hooks", "test", "NoSuchEvent"], None)
        .assert_code(2);
    assert_eq!(server.model_requests().len(), 0);
}

#[test]
fn the_repl_shows_one_line_per_hook_and_a_denied_prompt_sends_nothing() {
    let server = FakeServer::with_script(vec![Reply::text("hello back")]);
    // Title generation is off-script.
    server.route_when(
        |r| r.system_text().contains("title of a conversation"),
        vec![Reply::text("A Title")],
    );
    let env = TestEnv::new();
    with_hooks(
        &env,
        &server,
        json!({
            "SessionStart": [{"name": "greeter", "command": "echo '{\"context\":\"session context\"}'"}],
            "UserPromptSubmit": [{"name": "no-secrets", "command": "grep -q secret && { echo 'contains a secret' >&2; exit 2; }; exit 0"}]
        }),
    );
    let out = env.run(&[], Some("tell me the secret\nhello\n"));
    out.assert_success();
    assert!(
        out.stderr
            .contains("hook SessionStart greeter → none (added context)"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("hook UserPromptSubmit no-secrets → deny: contains a secret"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("a hook blocked the prompt"),
        "{}",
        out.stderr
    );
    let turns: Vec<_> = server
        .model_requests()
        .into_iter()
        .filter(|r| !r.system_text().contains("title of a conversation"))
        .collect();
    assert_eq!(turns.len(), 1, "only the second prompt reached the model");
    let texts = turns[0].user_texts().join("\n");
    assert!(
        texts.contains("hello") && !texts.contains("secret"),
        "{texts}"
    );
    assert!(texts.contains("session context"), "{texts}");
}

#[test]
fn project_hooks_run_only_in_a_trusted_project() {
    let env = TestEnv::new();
    let server = bash_then_done("touch ran.txt");
    env.use_server(&server, Dialect::OpenAi);
    env.write_project_file(
        ".crush.json",
        r#"{"hooks": {"PreToolUse": [{"command": "echo 'project says no' >&2; exit 2"}]}}"#,
    );
    // Untrusted: crush run stops before the model is called (exit 2)...
    let out = env.run(&["run", "-y", "touch"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("and defines hooks, so this run stops"),
        "{}",
        out.stderr
    );
    assert_eq!(server.request_count(), 0);
    // ...unless told to run without them: then the hook is skipped, with a notice.
    let out = env.run(&["run", "-y", "--no-project-hooks", "touch"], None);
    out.assert_success();
    assert!(env.project().join("ran.txt").exists());
    assert!(out.stderr.contains("not trusted"), "{}", out.stderr);
    // The first run used exactly its own script, before the second one's is queued.
    server.assert_clean();

    // Trusted for this invocation: it runs and denies.
    std::fs::remove_file(env.project().join("ran.txt")).unwrap();
    server.push_all(vec![
        Reply::tool_call("bash", json!({"command": "touch ran.txt"})),
        Reply::text("done"),
    ]);
    env.run(&["--trust", "run", "-y", "touch"], None)
        .assert_success();
    assert!(!env.project().join("ran.txt").exists());
    let (_, text, _) = server.last_request().tool_results()[0].clone();
    assert!(text.contains("project says no"), "{text}");
}

#[test]
fn the_man_page_guard_refuses_a_command_too_long_for_the_environment() {
    // Past 64 KiB the variable is cut: the rm at the end is not in it, and the man page's hook
    // refuses to judge what it could not see rather than pre-approve it.
    let command = format!("echo {}; rm -rf victim", "A".repeat(70 * 1024));
    let server = bash_then_done(&command);
    let env = TestEnv::new();
    env.write_project_file("victim/keep.txt", "precious");
    let script = man_page_script("hooks/no\\-rm.sh: refuse rm");
    let no_rm = hook(&env, "no-rm.sh", &script);
    with_hooks(
        &env,
        &server,
        json!({"PreToolUse": [
            {"name": "no-rm", "matcher": "^bash$", "command": no_rm, "fail_closed": true}
        ]}),
    );
    let out = env.run(&["run", "go"], None);
    out.assert_success();
    assert_eq!(env.read_project_file("victim/keep.txt"), "precious");
    let results = server.request(1).tool_results();
    assert!(
        results[0]
            .1
            .contains("Tool call blocked by hook. Reason: command too long to check"),
        "{results:?}"
    );
}

#[test]
fn a_hook_reason_cannot_act_on_the_terminal() {
    let server = bash_then_done("ls");
    let env = TestEnv::new();
    let h = hook(
        &env,
        "deny.sh",
        "#!/bin/sh\nprintf 'no \\033[2K\\rway' >&2\nexit 2\n",
    );
    with_hooks(&env, &server, json!({"PreToolUse": [{"command": h}]}));
    let out = env.run(&["run", "go"], None);
    out.assert_success();
    assert!(out.stderr.contains("deny: no ^[[2K^Mway"), "{}", out.stderr);
    assert!(!out.stderr.contains('\x1b'), "{}", out.stderr);
}
