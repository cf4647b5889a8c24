//! MCP servers end to end: the real binary against the test MCP server (tests/support/mcp.rs)
//! over stdio (this test binary re-executed), Streamable HTTP and HTTP+SSE, and the fake model.

use crate::support::mcp::{read_log, scratch, stdio_server};
use crate::support::{Dialect, FakeServer, Output, Reply, TestEnv};
use serde_json::{Value, json};
use std::path::PathBuf;

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
            entry[k] = v;
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
    let server = FakeServer::with_script(vec![
        Reply::tool_call("mcp_t_echo", json!({"text": "hello from the model"})),
        Reply::text("done"),
    ]);
    let s = stdio(
        &server,
        Dialect::Anthropic,
        json!({"tools": [echo_tool()], "instructions": "Prefer echo for greetings."}),
        json!({}),
    );
    let out = run(&s.env, &["run", "-q", "-y", "greet"]);
    out.assert_success();
    assert_eq!(out.stdout.trim(), "done");
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
