//! MCP servers end to end: the real binary against the test MCP server (tests/support/mcp.rs)
//! over stdio (this test binary re-executed), Streamable HTTP and HTTP+SSE, and the fake model.

use crate::support::mcp::{McpHttp, PNG, read_log, scratch, stdio_server};
use crate::support::{Dialect, FakeServer, Output, Reply, TestEnv};
use serde_json::{Value, json};
use std::path::PathBuf;

/// A model that calls `name` once, then answers "ok".
fn one_call(name: &str, input: Value) -> FakeServer {
    FakeServer::with_script(vec![Reply::tool_call(name, input), Reply::text("ok")])
}

/// The global config as written.
fn read_config(env: &TestEnv) -> Value {
    serde_json::from_str(&std::fs::read_to_string(env.config_dir().join("crush.json")).unwrap())
        .unwrap()
}

fn echo_tool() -> Value {
    json!({"name": "echo", "description": "Echo the text back",
           "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                           "required": ["text"]},
           "action": "echo"})
}

fn methods(log: &[Value]) -> Vec<String> {
    log.iter()
        .filter_map(|m| m["method"].as_str().map(str::to_string))
        .collect()
}

struct Stdio {
    env: TestEnv,
    log: PathBuf,
}

/// An environment with one stdio server `t` running `script` (its log added).
fn stdio(server: &FakeServer, dialect: Dialect, mut script: Value, extra: Value) -> Stdio {
    let env = TestEnv::new();
    let dir = scratch(&env);
    let log = dir.join("t.log");
    script["log"] = json!(log);
    let mut entry = stdio_server(&dir, "t", &script);
    if let Value::Object(m) = extra {
        for (k, v) in m {
            match (k.as_str(), v) {
                // The server mode's own variable stays.
                ("env", Value::Object(vars)) => {
                    for (name, value) in vars {
                        entry["env"][name] = value;
                    }
                }
                (_, v) => entry[k] = v,
            }
        }
    }
    let mut cfg = env.config_for(server, dialect);
    cfg["mcp"] = json!({"t": entry});
    env.write_config(&cfg);
    Stdio { env, log }
}

fn run(env: &TestEnv, args: &[&str]) -> Output {
    env.run(args, None)
}

#[test]
fn a_stdio_tool_is_offered_called_and_answered() {
    let server = one_call("mcp_t_echo", json!({"text": "hello from the model"}));
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [echo_tool()], "instructions": "Prefer echo for greetings."}),
        json!({}),
    );
    let out = run(&s.env, &["run", "-q", "-y", "greet"]);
    out.assert_success();
    assert_eq!(out.stdout.trim(), "ok");
    let first = server.request(0);
    let names = first.tool_names();
    for n in [
        "mcp_t_echo",
        "list_mcp_resources",
        "read_mcp_resource",
        "bash",
    ] {
        assert!(names.contains(&n.to_string()), "{names:?}");
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "the tool list is sorted");
    let system = first.system_text();
    assert!(
        system.contains("<mcp-instructions>\nPrefer echo for greetings."),
        "{system}"
    );
    let results = server.request(1).tool_results();
    assert_eq!(results[0].1, "hello from the model");
    assert!(!results[0].2);
    let log = read_log(&s.log);
    let m = methods(&log);
    assert_eq!(
        m[..4],
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list"
        ],
        "{m:?}"
    );
    assert!(m.contains(&"tools/call".to_string()));
    let init = log.iter().find(|l| l["method"] == "initialize").unwrap();
    assert_eq!(init["params"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["params"]["clientInfo"]["name"], "crush");
    assert!(init["params"]["capabilities"]["roots"].is_object());
}

fn tool(name: &str, action: &str) -> Value {
    json!({"name": name, "description": format!("the {action} tool"),
           "inputSchema": {"type": "object", "properties": {}}, "action": action})
}

/// A test environment whose global config has the fake model and `mcp`.
fn setup(server: &FakeServer, dialect: Dialect, mcp: Value) -> TestEnv {
    let env = TestEnv::new();
    let mut cfg = env.config_for(server, dialect);
    cfg["mcp"] = mcp;
    env.write_config(&cfg);
    env
}

#[test]
fn a_streamable_http_tool_is_called_with_session_and_version_headers() {
    let mcp = McpHttp::start(json!({"tools": [echo_tool()], "session": true}));
    let server = one_call("mcp_web_echo", json!({"text": "over http"}));
    let env = setup(
        &server,
        Dialect::OpenAi,
        json!({"web": {"type": "http", "url": mcp.url(), "headers": {"X-Team": "blue"}}}),
    );
    run(&env, &["run", "-q", "-y", "go"]).assert_success();
    assert_eq!(server.request(1).tool_results()[0].1, "over http");
    let reqs = mcp.requests();
    let posts: Vec<_> = reqs.iter().filter(|r| r.0 == "POST").collect();
    // The probe, then initialize, whose answer opens the session every later request carries.
    assert!(
        posts
            .iter()
            .all(|r| r.2.get("x-team").map(String::as_str) == Some("blue"))
    );
    assert!(
        posts[0]
            .2
            .get("accept")
            .unwrap()
            .contains("text/event-stream")
    );
    let after_init: Vec<_> = mcp
        .core
        .records()
        .into_iter()
        .filter_map(|m| m["method"].as_str().map(str::to_string))
        .collect();
    // The probe was refused for want of a session (as the TypeScript SDK does), then the
    // handshake, in order.
    assert_eq!(
        after_init[..3],
        ["initialize", "notifications/initialized", "tools/list"]
    );
    assert!(mcp.bodies()[0].contains("server/discover"));
    let with_session = posts
        .iter()
        .filter(|r| r.2.contains_key("mcp-session-id"))
        .count();
    assert!(with_session >= 3, "{posts:?}");
    let versioned = posts
        .iter()
        .filter(|r| r.2.get("mcp-protocol-version").map(String::as_str) == Some("2025-06-18"))
        .count();
    assert!(versioned >= 2, "{posts:?}");
    assert!(
        reqs.iter().any(|r| r.0 == "DELETE"),
        "the session is ended: {reqs:?}"
    );
}

#[test]
fn an_http_sse_server_works_and_an_http_url_falls_back_to_it() {
    let mcp = McpHttp::start(json!({"tools": [echo_tool()]}));
    let server = FakeServer::with_script(vec![
        Reply::tool_calls(vec![
            crate::support::ToolCall::new("mcp_old_echo", json!({"text": "one"})),
            crate::support::ToolCall::new("mcp_auto_echo", json!({"text": "two"})),
        ]),
        Reply::text("ok"),
    ]);
    let env = setup(
        &server,
        Dialect::Anthropic,
        json!({"old": {"type": "sse", "url": mcp.sse_url()},
               "auto": {"type": "http", "url": mcp.sse_url()}}),
    );
    let out = run(&env, &["run", "-q", "-y", "go"]);
    out.assert_success();
    // The Streamable HTTP attempt that found an older server is no stopped server.
    assert!(!out.stderr.contains("stopped"), "{}", out.stderr);
    let results = server.request(1).tool_results();
    assert_eq!(results[0].1, "one");
    assert_eq!(results[1].1, "two");
}

#[test]
fn a_2026_server_is_spoken_to_statelessly() {
    for transport in ["stdio", "http"] {
        let script = json!({"era": "modern", "tools": [echo_tool(), tool("where", "roots")],
                            "instructions": "modern rules"});
        let server = FakeServer::with_script(vec![
            Reply::tool_calls(vec![
                crate::support::ToolCall::new("mcp_t_echo", json!({"text": "stateless"})),
                crate::support::ToolCall::new("mcp_t_where", json!({})),
            ]),
            Reply::text("ok"),
        ]);
        let (env, records, _http) = if transport == "stdio" {
            let s = stdio(&server, Dialect::Anthropic, script, json!({}));
            (s.env, Some(s.log), None)
        } else {
            let mcp = McpHttp::start(script);
            let env = setup(
                &server,
                Dialect::Anthropic,
                json!({"t": {"type": "http", "url": mcp.url()}}),
            );
            (env, None, Some(mcp))
        };
        run(&env, &["run", "-q", "-y", "go"]).assert_success();
        let results = server.request(1).tool_results();
        assert_eq!(results[0].1, "stateless", "{transport}");
        let root = env.project().canonicalize().unwrap();
        assert!(
            results[1].1.contains(&format!("file://{}", root.display())),
            "{transport}: {}",
            results[1].1
        );
        assert!(server.request(0).system_text().contains("modern rules"));
        let log = match (&records, &_http) {
            (Some(p), _) => read_log(p),
            (_, Some(h)) => h.core.records(),
            _ => unreachable!(),
        };
        let m = methods(&log);
        assert!(!m.contains(&"initialize".to_string()), "{transport}: {m:?}");
        assert_eq!(m[0], "server/discover");
        let call = log.iter().find(|l| l["method"] == "tools/call").unwrap();
        assert_eq!(
            call["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        // The retry of the roots call carries the answer and the server's state.
        let retry = log
            .iter()
            .filter(|l| l["method"] == "tools/call" && l["params"]["name"] == "where")
            .nth(1)
            .unwrap();
        assert_eq!(retry["params"]["requestState"], "state-1");
        if let Some(h) = &_http {
            let posts: Vec<_> = h.requests().into_iter().filter(|r| r.0 == "POST").collect();
            assert!(posts.iter().all(|r| !r.2.contains_key("mcp-session-id")));
            let named = posts
                .iter()
                .find(|r| r.2.get("mcp-method").map(String::as_str) == Some("tools/call"))
                .unwrap();
            assert_eq!(named.2.get("mcp-protocol-version").unwrap(), "2026-07-28");
            assert!(named.2.contains_key("mcp-name"));
        }
    }
}

#[test]
fn older_revisions_are_accepted_and_an_unknown_one_is_refused() {
    let server = one_call("mcp_t_echo", json!({"text": "old"}));
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [echo_tool()], "version": "2024-11-05"}),
        json!({}),
    );
    run(&s.env, &["run", "-q", "-y", "go"]).assert_success();
    assert_eq!(server.request(1).tool_results()[0].1, "old");

    let server = FakeServer::with_script(vec![Reply::text("no tools today")]);
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [echo_tool()], "version": "1999-01-01"}),
        json!({}),
    );
    let out = run(&s.env, &["run", "-q", "-y", "go"]);
    out.assert_success();
    assert!(
        out.stderr
            .contains("MCP server 't' did not start: the server speaks MCP 1999-01-01"),
        "{}",
        out.stderr
    );
    assert!(
        !server
            .request(0)
            .tool_names()
            .contains(&"mcp_t_echo".to_string())
    );
    let list = run(&s.env, &["mcp", "list", "--json"]);
    list.assert_success();
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(v[0]["state"], "failed");
    assert!(v[0]["error"].as_str().unwrap().contains("1999-01-01"));
}

#[test]
fn enabled_and_disabled_tools_filter_what_the_model_sees() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [echo_tool(), tool("a", "echo"), tool("b", "echo"), tool("c", "echo")],
               "page_size": 2}),
        json!({"enabled_tools": ["a", "b", "echo"], "disabled_tools": ["b"]}),
    );
    run(&s.env, &["run", "-q", "-y", "go"]).assert_success();
    let names: Vec<String> = server
        .request(0)
        .tool_names()
        .into_iter()
        .filter(|n| n.starts_with("mcp_"))
        .collect();
    assert_eq!(names, ["mcp_t_a", "mcp_t_echo"]);
    // Pagination: two pages were listed.
    let lists = methods(&read_log(&s.log))
        .iter()
        .filter(|m| *m == "tools/list")
        .count();
    assert_eq!(lists, 2);
}

#[test]
fn a_slow_call_times_out_and_is_canceled_at_the_server() {
    let server = one_call("mcp_t_slow", json!({"ms": 5000}));
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [tool("slow", "sleep")]}),
        json!({"timeout": 1}),
    );
    run(&s.env, &["run", "-q", "-y", "go"]).assert_success();
    let r = &server.request(1).tool_results()[0];
    assert!(r.2, "an error result");
    assert!(
        r.1.contains("did not answer tools/call within 1 s"),
        "{}",
        r.1
    );
    let log = read_log(&s.log);
    let cancel = log
        .iter()
        .find(|l| l["method"] == "notifications/cancelled")
        .expect("notifications/cancelled sent");
    let call = log.iter().find(|l| l["method"] == "tools/call").unwrap();
    assert_eq!(cancel["params"]["requestId"], call["id"]);
}

#[test]
fn a_server_that_dies_mid_call_is_an_error_and_starts_again_once() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("mcp_t_boom", json!({})),
        Reply::tool_call("mcp_t_echo", json!({"text": "back again"})),
        Reply::tool_call("mcp_t_boom", json!({})),
        Reply::tool_call("mcp_t_echo", json!({"text": "gone"})),
        Reply::text("ok"),
    ]);
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [echo_tool(), tool("boom", "crash")]}),
        json!({}),
    );
    let out = run(&s.env, &["run", "-q", "-y", "go"]);
    out.assert_success();
    let r = |i: usize| server.request(i).tool_results().last().cloned().unwrap();
    assert!(
        r(1).2 && r(1).1.contains("stopped during tools/call"),
        "{:?}",
        r(1)
    );
    assert!(r(1).1.contains("status 3"), "{:?}", r(1));
    assert_eq!(r(2).1, "back again", "restarted once");
    assert!(r(3).2);
    let last = r(4);
    assert!(last.2, "{last:?}");
    assert!(
        last.1.contains("is not running") || last.1.contains("Unknown tool"),
        "{last:?}"
    );
    let inits = methods(&read_log(&s.log))
        .iter()
        .filter(|m| *m == "initialize")
        .count();
    assert_eq!(inits, 2, "started twice, never a third time");
}

#[test]
fn a_server_that_never_answers_initialize_is_one_warning() {
    let server = FakeServer::with_script(vec![Reply::text("fine without it")]);
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [echo_tool()], "hang_initialize": true}),
        json!({"timeout": 1}),
    );
    let out = run(&s.env, &["run", "-y", "go"]);
    out.assert_success();
    assert_eq!(out.stdout.trim(), "fine without it");
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("MCP server 't'"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    assert!(
        warnings[0].contains("no answer to initialize within 1 s"),
        "{}",
        warnings[0]
    );
}

#[test]
fn mcp_tools_ask_permission_with_execute() {
    // Without --yolo a non-interactive run refuses, and exits 3.
    let server =
        FakeServer::with_script(vec![Reply::tool_call("mcp_t_echo", json!({"text": "x"}))]);
    let s = stdio(
        &server,
        Dialect::OpenAi,
        json!({"tools": [echo_tool()]}),
        json!({}),
    );
    let out = run(&s.env, &["run", "go"]);
    out.assert_code(3);
    assert!(out.stderr.contains("mcp_t_echo"), "{}", out.stderr);
    assert!(
        out.stderr.contains("\"mcp_t_echo:execute\""),
        "the hint names the tool and action: {}",
        out.stderr
    );
    assert!(
        !methods(&read_log(&s.log)).contains(&"tools/call".to_string()),
        "nothing reached the server"
    );
    // allowed_tools lets it run, by name or by name and action.
    for allowed in ["mcp_t_echo", "mcp_t_echo:execute"] {
        let server = one_call("mcp_t_echo", json!({"text": "allowed"}));
        let s = stdio(
            &server,
            Dialect::OpenAi,
            json!({"tools": [echo_tool()]}),
            json!({}),
        );
        let mut cfg = read_config(&s.env);
        cfg["permissions"] = json!({"allowed_tools": [allowed]});
        s.env.write_config(&cfg);
        run(&s.env, &["run", "go"]).assert_success();
        assert_eq!(
            server.request(1).tool_results()[0].1,
            "allowed",
            "{allowed}"
        );
    }
}

fn hook(env: &TestEnv, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = env.root().join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

#[test]
fn hooks_see_mcp_tools_by_crush_and_claude_code_names() {
    let server = one_call("mcp_t_echo", json!({"text": "x"}));
    let s = stdio(
        &server,
        Dialect::OpenAi,
        json!({"tools": [echo_tool()]}),
        json!({}),
    );
    let seen = s.env.root().join("seen.json");
    let crush_hook = hook(
        &s.env,
        "crush.sh",
        &format!(
            "#!/bin/sh\ncat > {}\necho 'not today' >&2\nexit 2\n",
            seen.display()
        ),
    );
    let cc_seen = s.env.root().join("cc.json");
    let cc_hook = hook(
        &s.env,
        "cc.sh",
        &format!("#!/bin/sh\ncat > {}\n", cc_seen.display()),
    );
    let mut cfg = read_config(&s.env);
    cfg["hooks"] = json!({"PreToolUse": [
        {"matcher": "^mcp_", "command": crush_hook},
        {"matcher": "mcp__t__.*", "hooks": [{"type": "command", "command": cc_hook}]}
    ]});
    s.env.write_config(&cfg);
    run(&s.env, &["run", "-y", "go"]).assert_success();
    let (_, text, _) = server.request(1).tool_results()[0].clone();
    assert!(
        text.contains("blocked by hook") && text.contains("not today"),
        "{text}"
    );
    let crush: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(crush["tool_name"], "mcp_t_echo");
    assert_eq!(crush["tool_input"]["text"], "x");
    let cc: Value = serde_json::from_str(&std::fs::read_to_string(&cc_seen).unwrap()).unwrap();
    assert_eq!(cc["tool_name"], "mcp__t__echo");
    assert!(!methods(&read_log(&s.log)).contains(&"tools/call".to_string()));
}

#[test]
fn an_untrusted_projects_servers_do_not_start_until_it_is_trusted() {
    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let dir = scratch(&env);
    let log_a = dir.join("a.log");
    let log_b = dir.join("b.log");
    let a = stdio_server(&dir, "a", &json!({"tools": [echo_tool()], "log": log_a}));
    let b = stdio_server(&dir, "b", &json!({"tools": [echo_tool()], "log": log_b}));
    env.write_project_file(".crush.json", &json!({"mcp": {"a": a}}).to_string());
    // Claude Code's project file, as Claude Code writes it.
    let mut b = b;
    b.as_object_mut().unwrap().remove("type");
    env.write_project_file(".mcp.json", &json!({"mcpServers": {"b": b}}).to_string());
    let out = run(&env, &["run", "-y", "go"]);
    out.assert_success();
    assert!(out.stderr.contains("2 MCP servers"), "{}", out.stderr);
    assert!(
        !log_a.exists() && !log_b.exists(),
        "an untrusted server started"
    );
    assert!(
        !server
            .request(0)
            .tool_names()
            .iter()
            .any(|n| n.starts_with("mcp_"))
    );

    let server = FakeServer::with_script(vec![Reply::text("ok")]);
    env.use_server(&server, Dialect::Anthropic);
    run(&env, &["run", "-y", "--trust", "go"]).assert_success();
    let names = server.request(0).tool_names();
    assert!(names.contains(&"mcp_a_echo".to_string()), "{names:?}");
    assert!(names.contains(&"mcp_b_echo".to_string()), "{names:?}");
    // crush trust lists the .mcp.json server with its file.
    let t = run(&env, &["trust"]);
    t.assert_success();
    assert!(t.stdout.contains(".mcp.json"), "{}", t.stdout);
}

#[test]
fn bad_output_is_skipped_with_one_warning_naming_the_server() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("mcp_t_noisy", json!({})),
        Reply::tool_call("mcp_t_lost", json!({})),
        Reply::tool_call("mcp_h_huge", json!({"bytes": 50 * 1024 * 1024})),
        Reply::text("ok"),
    ]);
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"garbage_first": "Starting server on stdout, oops",
               "tools": [tool("noisy", "garbage"), tool("lost", "wrong_id"),
                         {"name": "arr", "inputSchema": {"type": "array"}},
                         {"name": "has space", "inputSchema": {"type": "object"}}]}),
        // Long enough for a start-up on a loaded machine; the lost call waits it out.
        json!({"timeout": 3}),
    );
    // The 50 MB message gets a server of its own, with time to write it.
    let mut cfg = read_config(&s.env);
    cfg["mcp"]["h"] = stdio_server(
        &scratch(&s.env),
        "h",
        &json!({"tools": [tool("huge", "big")]}),
    );
    cfg["mcp"]["h"]["timeout"] = json!(60);
    s.env.write_config(&cfg);
    let out = run(&s.env, &["run", "-y", "go"]);
    out.assert_success();
    let names = server.request(0).tool_names();
    assert!(names.contains(&"mcp_t_noisy".to_string()));
    assert!(
        !names
            .iter()
            .any(|n| n.contains("arr") || n.contains("space")),
        "{names:?}"
    );
    let r = |i: usize| server.request(i).tool_results().last().cloned().unwrap();
    assert_eq!(r(1).1, "after the garbage");
    assert!(
        r(2).2 && r(2).1.contains("did not answer tools/call within 3 s"),
        "{:?}",
        r(2)
    );
    assert!(r(3).2 && r(3).1.contains("over the limit"), "{:?}", r(3));
    let err = &out.stderr;
    let count = |needle: &str| {
        err.lines()
            .filter(|l| l.starts_with("crush: ") && l.contains(needle))
            .count()
    };
    assert_eq!(count("not a JSON-RPC message"), 1, "{err}");
    assert_eq!(count("id crush never sent"), 1, "{err}");
    assert_eq!(count("over the limit of 32 MB"), 1, "{err}");
    assert!(
        err.contains(
            "MCP server 't': tool \"arr\" was left out: its input schema is of type \"array\""
        ),
        "{err}"
    );
    assert!(err.contains("tool \"has space\" was left out"), "{err}");
    // The store is intact: the session lists and shows.
    run(&s.env, &["sessions", "list"]).assert_success();
}

/// Sets `supports_attachments` on the fake model.
fn with_images(env: &TestEnv) {
    let mut cfg = read_config(env);
    cfg["providers"]["fake"]["models"][0]["supports_attachments"] = json!(true);
    env.write_config(&cfg);
}

#[test]
fn an_image_result_reaches_a_model_that_takes_images_else_a_placeholder() {
    // One turn calling the image tool; the second model request is returned.
    let turn = |dialect: Dialect, images: bool| {
        let server = one_call("mcp_t_pic", json!({}));
        let s = stdio(
            &server,
            dialect,
            json!({"tools": [tool("pic", "image")]}),
            json!({}),
        );
        if images {
            with_images(&s.env);
        }
        run(&s.env, &["run", "-q", "-y", "go"]).assert_success();
        (server.request(1), s)
    };
    // Anthropic: inside the tool_result.
    let msgs = turn(Dialect::Anthropic, true).0.messages();
    let result = msgs
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .unwrap();
    assert_eq!(result["content"][0]["text"], "here is the image");
    assert_eq!(result["content"][1]["type"], "image");
    assert_eq!(result["content"][1]["source"]["media_type"], "image/png");
    assert_eq!(result["content"][1]["source"]["data"], PNG);

    // Chat Completions: the tool message is text; the image follows in a user message.
    let msgs = turn(Dialect::OpenAi, true).0.messages();
    let tool_at = msgs.iter().position(|m| m["role"] == "tool").unwrap();
    assert_eq!(msgs[tool_at]["content"], "here is the image");
    let next = &msgs[tool_at + 1];
    assert_eq!(next["role"], "user");
    assert_eq!(
        next["content"][1]["image_url"]["url"],
        format!("data:image/png;base64,{PNG}")
    );

    // A model without attachments: a placeholder, and the image is still stored.
    let (request, s) = turn(Dialect::OpenAi, false);
    let msgs = request.messages();
    let tool_msg = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    let text = tool_msg["content"].as_str().unwrap();
    assert!(
        text.starts_with(
            "here is the image\n[image (image/png, 70 bytes) returned by the tool: not sent"
        ),
        "{text}"
    );
    assert!(
        !msgs
            .iter()
            .any(|m| m["content"].to_string().contains("image_url"))
    );
    let list = run(&s.env, &["sessions", "list", "--json"]);
    let id = serde_json::from_str::<Value>(&list.stdout).unwrap()[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = run(&s.env, &["sessions", "show", &id, "--json"]);
    assert!(
        show.stdout.contains(PNG),
        "the image is kept in the session"
    );
}

#[test]
fn list_changed_brings_new_tools_to_the_next_step() {
    let server = FakeServer::with_script(vec![
        Reply::tool_call("mcp_t_grow", json!({})),
        Reply::tool_call("mcp_t_grown", json!({"text": "new"})),
        Reply::text("ok"),
    ]);
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [tool("grow", "grow")]}),
        json!({}),
    );
    run(&s.env, &["run", "-q", "-y", "go"]).assert_success();
    assert!(
        !server
            .request(0)
            .tool_names()
            .contains(&"mcp_t_grown".to_string())
    );
    assert!(
        server
            .request(1)
            .tool_names()
            .contains(&"mcp_t_grown".to_string())
    );
    assert_eq!(server.request(2).tool_results()[1].1, "new");
}

#[test]
fn resources_structured_content_links_roots_and_env() {
    let server = FakeServer::with_script(vec![
        Reply::tool_calls(vec![
            crate::support::ToolCall::new("list_mcp_resources", json!({"mcp_name": "t"})),
            crate::support::ToolCall::new(
                "read_mcp_resource",
                json!({"mcp_name": "t", "uri": "file:///notes.md"}),
            ),
            crate::support::ToolCall::new("mcp_t_sum", json!({"a": 2, "b": 3})),
            crate::support::ToolCall::new("mcp_t_links", json!({})),
            crate::support::ToolCall::new("mcp_t_roots", json!({})),
            crate::support::ToolCall::new("mcp_t_env", json!({"name": "MCP_SECRET"})),
            crate::support::ToolCall::new("mcp_t_fail", json!({})),
        ]),
        Reply::text("ok"),
    ]);
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [tool("sum", "structured"), tool("links", "links"), tool("roots", "roots"),
                         tool("env", "env"), tool("fail", "error")],
               "resources": [{"uri": "file:///notes.md", "name": "notes", "mimeType": "text/markdown",
                              "text": "# Notes\nremember"}]}),
        json!({"env": {"MCP_SECRET": "from config"}}),
    );
    run(&s.env, &["run", "-q", "-y", "go"]).assert_success();
    let r = server.request(1).tool_results();
    assert_eq!(r[0].1, "- notes (file:///notes.md) [mime: text/markdown]");
    assert_eq!(r[1].1, "# Notes\nremember");
    assert_eq!(r[2].1, "{\n  \"sum\": 5\n}");
    assert!(
        r[3].1
            .contains("[resource link] file:///docs/a.md (a.md): the A doc"),
        "{}",
        r[3].1
    );
    assert!(
        r[3].1.contains("[resource file:///docs/b.md]\nB body"),
        "{}",
        r[3].1
    );
    let root = s.env.project().canonicalize().unwrap();
    assert!(
        r[4].1.contains(&format!("\"file://{}\"", root.display())),
        "{}",
        r[4].1
    );
    assert_eq!(r[5].1, "from config");
    assert!(r[6].2 && r[6].1 == "the tool failed", "{:?}", r[6]);
}

#[test]
fn mcp_list_reports_each_server() {
    let env = TestEnv::new();
    let dir = scratch(&env);
    let ok = stdio_server(
        &dir,
        "ok",
        &json!({"tools": [echo_tool(), tool("b", "echo")],
        "prompts": [{"name": "review", "template": "x"}]}),
    );
    env.write_config(&json!({"mcp": {
        "ok": ok,
        "off": {"command": "nowhere", "disabled": true},
        "bad": {"command": "/nonexistent/server"},
        "broken": {"type": "carrier-pigeon"}
    }}));
    let out = run(&env, &["mcp", "list", "--json"]);
    out.assert_success();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let by = |n: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .unwrap()
            .clone()
    };
    assert_eq!(by("ok")["state"], "connected");
    assert_eq!(by("ok")["transport"], "stdio");
    assert_eq!(by("ok")["version"], "2025-06-18");
    assert_eq!(by("ok")["tools"], json!(["echo", "b"]));
    assert_eq!(by("ok")["prompts"], json!(["review"]));
    assert_eq!(by("off")["state"], "disabled");
    assert_eq!(by("bad")["state"], "failed");
    assert!(
        by("bad")["error"]
            .as_str()
            .unwrap()
            .contains("cannot start '/nonexistent/server'")
    );
    assert!(out.stderr.contains("MCP server 'broken'"), "{}", out.stderr);
    let text = run(&env, &["mcp"]);
    text.assert_success();
    assert!(
        text.stdout.contains(
            "ok (stdio): connected, MCP 2025-06-18, test-mcp 1.0\n  tools (2): echo, b\n"
        ),
        "{}",
        text.stdout
    );
}

/// The REPL over a pipe, with MCP servers given time to start.
fn repl(env: &TestEnv, input: &str) -> Output {
    let mut cmd = env.crush();
    cmd.env("CRUSH_MCP_WAIT_MS", "20000");
    crate::support::env::run_command(cmd, Some(input), crate::support::RUN_TIMEOUT)
}

fn title_route(server: &FakeServer) {
    server.route_when(
        |r| r.system_text().contains("title of a conversation"),
        vec![Reply::text("A title")],
    );
}

#[test]
fn repl_prompts_of_servers_are_slash_commands() {
    let server = FakeServer::with_script(vec![Reply::text("reviewed")]);
    title_route(&server);
    let s = stdio(
        &server,
        Dialect::OpenAi,
        json!({"tools": [echo_tool()], "prompts": [{"name": "review", "description": "Review a file",
            "arguments": [{"name": "file", "required": true}, {"name": "focus"}],
            "template": "Review {file} for {focus}"}]}),
        json!({}),
    );
    let out = repl(
        &s.env,
        "/help\n/mcp:t:review\n/mcp:t:nope x\n/mcp:t:review main.rs focus=bugs\n",
    );
    out.assert_success();
    assert!(
        out.stdout.contains("/mcp:t:review FILE [FOCUS]") && out.stdout.contains("Review a file"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("/mcp:t:review needs file"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("no prompt 'nope' on MCP server 't'"),
        "{}",
        out.stderr
    );
    let turn = server
        .model_requests()
        .into_iter()
        .find(|r| !r.system_text().contains("title of a conversation"))
        .unwrap();
    assert_eq!(turn.user_texts().last().unwrap(), "Review main.rs for bugs");
    assert!(out.stdout.contains("reviewed"));
}

#[test]
fn a_prompt_named_with_its_server_waits_for_that_server_to_start() {
    let server = FakeServer::with_script(vec![Reply::text("reviewed")]);
    title_route(&server);
    let s = stdio(
        &server,
        Dialect::OpenAi,
        json!({"initialize_delay_ms": 1500,
            "prompts": [{"name": "review", "arguments": [{"name": "file", "required": true}],
            "template": "Review {file}"}]}),
        json!({}),
    );
    // The REPL's first request does not wait for servers; a prompt of a named server does.
    let mut cmd = s.env.crush();
    cmd.env("CRUSH_MCP_WAIT_MS", "0");
    let out = crate::support::env::run_command(
        cmd,
        Some("/mcp:t:review main.rs\n"),
        crate::support::RUN_TIMEOUT,
    );
    out.assert_success();
    assert!(!out.stderr.contains("no prompt"), "{}", out.stderr);
    let turn = server
        .model_requests()
        .into_iter()
        .find(|r| !r.system_text().contains("title of a conversation"))
        .unwrap();
    assert_eq!(turn.user_texts().last().unwrap(), "Review main.rs");
}

#[test]
fn crush_run_sends_a_prompt_of_a_server_by_full_or_bare_name() {
    let server = FakeServer::with_script(vec![Reply::text("one"), Reply::text("two")]);
    let s = stdio(
        &server,
        Dialect::OpenAi,
        json!({"prompts": [{"name": "review", "description": "Review a file",
            "arguments": [{"name": "file", "required": true}, {"name": "focus"}],
            "template": "Review {file} for {focus}"}]}),
        json!({}),
    );
    s.env
        .run(&["run", "/mcp:t:review", "main.rs", "focus=bugs"], None)
        .assert_success();
    let texts = |i: usize| server.request(i).user_texts();
    assert_eq!(texts(0), vec!["Review main.rs for bugs".to_string()]);
    s.env
        .run(&["run", "/review lib.rs speed"], None)
        .assert_success();
    assert_eq!(texts(1), vec!["Review lib.rs for speed".to_string()]);
    let out = s.env.run(&["run", "/review"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("/mcp:t:review needs file"),
        "{}",
        out.stderr
    );
}

#[test]
fn repl_mcp_add_and_rm_change_the_running_session() {
    let server = FakeServer::with_script(vec![
        Reply::text("no tools yet"),
        Reply::text("now with tools"),
        Reply::text("gone again"),
    ]);
    title_route(&server);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let dir = scratch(&env);
    let entry = stdio_server(&dir, "late", &json!({"tools": [echo_tool()]}));
    let exe = entry["command"].as_str().unwrap();
    let script = entry["env"][crate::support::mcp::SERVER_ENV]
        .as_str()
        .unwrap();
    let input = format!(
        "hello\n/mcp add late --command '{exe}' --env {} '{script}'\n/mcp\nagain\n/mcp rm late\nbye\n",
        crate::support::mcp::SERVER_ENV
    );
    let out = repl(&env, &input);
    out.assert_success();
    let turns: Vec<_> = server
        .model_requests()
        .into_iter()
        .filter(|r| !r.system_text().contains("title of a conversation"))
        .collect();
    let has = |i: usize| turns[i].tool_names().contains(&"mcp_late_echo".to_string());
    assert!(!has(0) && has(1) && !has(2), "{out:?}");
    assert!(
        out.stdout.contains("late (stdio): connected"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("for this session only"),
        "{}",
        out.stdout
    );
    // Nothing was written to a config file.
    let cfg = std::fs::read_to_string(env.config_dir().join("crush.json")).unwrap();
    assert!(!cfg.contains("late"));
}

#[test]
fn oauth_login_keeps_a_token_that_is_used_and_refreshed() {
    use std::os::unix::fs::PermissionsExt;
    let mcp =
        McpHttp::start(json!({"tools": [echo_tool()], "auth": {"token": "tok", "expires_in": 5}}));
    let port = crate::support::mcp::free_port();
    let server = one_call("mcp_web_echo", json!({"text": "authorized"}));
    let env = setup(
        &server,
        Dialect::Anthropic,
        json!({"web": {"type": "http", "url": mcp.url(), "oauth": true,
                       "oauth_callback_port": port, "timeout": 5}}),
    );
    // Not authorized yet: the server waits for a login.
    let out = run(&env, &["mcp", "list", "--json"]);
    out.assert_success();
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v[0]["state"], "needs-auth");
    assert!(
        v[0]["error"]
            .as_str()
            .unwrap()
            .contains("crush mcp login web")
    );

    // The login, with this test binary as the browser.
    let mut cmd = env.crush();
    cmd.args(["mcp", "login", "web"])
        .env("BROWSER", std::env::current_exe().unwrap())
        .env(crate::support::mcp::BROWSER_ENV, "1");
    let out = crate::support::env::run_command(cmd, None, crate::support::RUN_TIMEOUT);
    out.assert_success();
    assert!(
        out.stdout
            .contains("MCP server 'web' is authorized (1 tool(s))"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains("/as/authorize?"),
        "the URL is shown: {}",
        out.stderr
    );
    let authorize = mcp
        .requests()
        .into_iter()
        .find(|r| r.1.starts_with("/as/authorize"))
        .unwrap();
    for want in [
        "code_challenge_method=S256",
        "client_id=client-1",
        &format!("redirect_uri=http%3A%2F%2Flocalhost%3A{port}%2Fcallback"),
        "resource=",
        "scope=mcp",
    ] {
        assert!(authorize.1.contains(want), "{want} in {}", authorize.1);
    }
    let state_path = env.data_dir().join("state.json");
    let mode = std::fs::metadata(&state_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    let tok = &state["mcp_oauth"]["web"];
    assert_eq!(tok["refresh_token"], "refresh-1");
    assert_eq!(tok["client_id"], "client-1");
    assert!(tok["access_token"].as_str().unwrap().starts_with("tok-"));
    // The token is not configuration.
    let show = run(&env, &["config", "show", "--json"]);
    assert!(!show.stdout.contains("refresh-1"), "{}", show.stdout);

    // A run uses it; being near its expiry, it is refreshed first.
    run(&env, &["run", "-q", "-y", "go"]).assert_success();
    assert_eq!(server.request(1).tool_results()[0].1, "authorized");
    let refreshes = mcp
        .bodies()
        .iter()
        .filter(|b| b.contains("grant_type=refresh_token"))
        .count();
    assert!(refreshes >= 1);
}

#[test]
fn login_opens_only_an_http_url_and_names_its_host() {
    use std::os::unix::fs::PermissionsExt;
    // A browser that records what it was given.
    let env = TestEnv::new();
    let opened = env.root().join("opened");
    let browser = env.root().join("browser.sh");
    std::fs::write(
        &browser,
        format!("#!/bin/sh\necho \"$1\" >> '{}'\n", opened.display()),
    )
    .unwrap();
    std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
    let login = |env: &TestEnv, mcp: &McpHttp| {
        let port = crate::support::mcp::free_port();
        env.write_config(&json!({"mcp": {"web": {"type": "http", "url": mcp.url(),
            "oauth": true, "oauth_callback_port": port, "timeout": 5}}}));
        let mut cmd = env.crush();
        cmd.args(["mcp", "login", "web"])
            .env("BROWSER", &browser)
            .env("CRUSH_MCP_LOGIN_TIMEOUT", "1");
        crate::support::env::run_command(cmd, None, crate::support::RUN_TIMEOUT)
    };
    // The authorization server names a local file (with an escape sequence in it).
    let evil = McpHttp::start(json!({"tools": [echo_tool()], "auth": {"token": "tok",
        "authorization_endpoint": "file:///etc/passwd?\u{1b}]0;x\u{7}"}}));
    let out = login(&env, &evil);
    out.assert_code(1);
    assert!(
        out.stderr.contains("not an http or https URL")
            && out.stderr.contains("file:///etc/passwd?^[]0;x^G"),
        "{}",
        out.stderr
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(!opened.exists(), "the browser was started");
    // An https URL is opened, and its host said first.
    let good = McpHttp::start(json!({"tools": [echo_tool()], "auth": {"token": "tok",
        "authorization_endpoint": "https://login.example:8443/authorize"}}));
    let out = login(&env, &good);
    assert!(
        out.stderr
            .contains("opening your browser at login.example:8443 to authorize MCP server 'web'"),
        "{}",
        out.stderr
    );
    let shown = crate::support::mcp::eventually(std::time::Duration::from_secs(10), || {
        std::fs::read_to_string(&opened)
            .is_ok_and(|s| s.starts_with("https://login.example:8443/authorize?"))
    });
    assert!(shown, "{:?}", std::fs::read_to_string(&opened));
}

#[test]
fn ctrl_c_during_a_call_cancels_it_at_the_server() {
    use std::process::Stdio as Pipe;
    let server =
        FakeServer::with_script(vec![Reply::tool_call("mcp_t_slow", json!({"ms": 30000}))]);
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [tool("slow", "sleep")]}),
        json!({"timeout": 60}),
    );
    let mut cmd = s.env.crush();
    cmd.args(["run", "-q", "-y", "go"])
        .stdin(Pipe::null())
        .stdout(Pipe::null())
        .stderr(Pipe::null());
    let mut child = cmd.spawn().unwrap();
    let called = crate::support::mcp::eventually(std::time::Duration::from_secs(20), || {
        methods(&read_log(&s.log)).contains(&"tools/call".to_string())
    });
    assert!(called, "the call never reached the server");
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let log = read_log(&s.log);
    let cancel = log
        .iter()
        .find(|l| l["method"] == "notifications/cancelled")
        .expect("the call was canceled at the server");
    assert_eq!(cancel["params"]["reason"], "the user canceled the request");
}

#[test]
fn a_configured_oauth_client_id_skips_registration() {
    let mcp = McpHttp::start(json!({"tools": [echo_tool()], "auth": {"token": "tok"}}));
    let port = crate::support::mcp::free_port();
    let env = TestEnv::new();
    env.write_config(&json!({"mcp": {"web": {"type": "http", "url": mcp.url(),
        "oauth_client_id": "$CLIENT_FROM_ENV", "oauth_callback_port": port}}}));
    let mut cmd = env.crush();
    cmd.args(["mcp", "login", "web"])
        .env("CLIENT_FROM_ENV", "my-client")
        .env("BROWSER", std::env::current_exe().unwrap())
        .env(crate::support::mcp::BROWSER_ENV, "1");
    let out = crate::support::env::run_command(cmd, None, crate::support::RUN_TIMEOUT);
    out.assert_success();
    let reqs = mcp.requests();
    assert!(!reqs.iter().any(|r| r.1 == "/as/register"), "{reqs:?}");
    let authorize = reqs
        .iter()
        .find(|r| r.1.starts_with("/as/authorize"))
        .unwrap();
    assert!(
        authorize.1.contains("client_id=my-client"),
        "{}",
        authorize.1
    );
    // Without oauth set, a server that answered 401 was waiting for this login too.
    let list = run(&env, &["mcp", "list", "--json"]);
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(v[0]["state"], "connected", "{}", list.stdout);
}

#[test]
fn the_bash_tools_mcp_add_starts_a_server_in_the_running_session() {
    let env = TestEnv::new();
    let dir = scratch(&env);
    let entry = stdio_server(&dir, "late", &json!({"tools": [echo_tool()]}));
    let add = format!(
        "mcp add late --command '{}' --env {} '{}'",
        entry["command"].as_str().unwrap(),
        crate::support::mcp::SERVER_ENV,
        entry["env"][crate::support::mcp::SERVER_ENV]
            .as_str()
            .unwrap()
    );
    let server = FakeServer::with_script(vec![
        Reply::tool_call("bash", json!({"command": add})),
        Reply::tool_call("mcp_late_echo", json!({"text": "joined"})),
        Reply::text("ok"),
    ]);
    env.use_server(&server, Dialect::Anthropic);
    run(&env, &["run", "-q", "-y", "go"]).assert_success();
    assert!(
        server
            .request(1)
            .tool_names()
            .contains(&"mcp_late_echo".to_string())
    );
    assert_eq!(server.request(2).tool_results()[1].1, "joined");
}

#[test]
fn a_project_server_whose_script_changed_since_trust_is_not_started_again() {
    // The project's trusted MCP server is a script of the project; a tool rewrites it while
    // the server runs. Its restart (after it exited) checks the file first and is refused.
    let server = FakeServer::with_script(vec![
        Reply::tool_call("mcp_t_boom", json!({})),
        Reply::tool_call("bash", json!({"command": "echo '# edited' >> srv.sh"})),
        Reply::tool_call("mcp_t_echo", json!({"text": "back again"})),
        Reply::text("ok"),
    ]);
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let dir = scratch(&env);
    let script = json!({"tools": [echo_tool(), tool("boom", "crash")], "log": dir.join("t.log")});
    let entry = stdio_server(&dir, "t", &script);
    let srv = env.write_project_file(
        "srv.sh",
        &format!("#!/bin/sh\nexec '{}'\n", entry["command"].as_str().unwrap()),
    );
    std::fs::set_permissions(&srv, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    env.write_project_file(
        "crush.json",
        &json!({"mcp": {"t": {"command": "./srv.sh", "env": entry["env"]}}}).to_string(),
    );
    env.run(&["trust"], None).assert_success();
    let out = run(&env, &["run", "-q", "-y", "go"]);
    out.assert_success();
    let r = |i: usize| server.request(i).tool_results().last().cloned().unwrap();
    assert!(
        r(1).2 && r(1).1.contains("stopped during tools/call"),
        "{:?}",
        r(1)
    );
    let refused = r(3);
    assert!(
        refused.2
            && refused
                .1
                .contains("srv.sh changed since the project was trusted"),
        "{refused:?}\n{}",
        out.stderr
    );
    // Started once only: the log has one initialize.
    let starts = methods(&read_log(&dir.join("t.log")))
        .iter()
        .filter(|m| *m == "initialize")
        .count();
    assert_eq!(starts, 1);
}

/// An HTTP server is reached through the proxy a trusted project's `.env` names, as the web
/// tools are (the process has no proxy variables).
#[test]
fn an_http_server_goes_through_the_proxy_a_project_s_dotenv_names() {
    let server = FakeServer::with_script(vec![Reply::text("done")]);
    let env = setup(
        &server,
        Dialect::OpenAi,
        json!({"web": {"type": "http", "url": "http://mcp.invalid/mcp"}}),
    );
    let tunnels = super::web::tunnels_through_a_dotenv_proxy(&env, &server, "hi");
    assert!(tunnels.iter().any(|t| t == "mcp.invalid:80"), "{tunnels:?}");
}
