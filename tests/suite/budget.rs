//! The budget (crush(1) BUDGET): `--max-cost`, `options.max_cost` and
//! `options.max_session_cost` stop a run before the model call that would start over budget,
//! with exit 4, counting sub-agents and earlier runs of a session; the fake server's log shows
//! which calls were never sent.

use crate::support::{Dialect, FakeServer, Reply, TestEnv};
use rusqlite::Connection;
use serde_json::json;

/// One call at the fake model's $3/$15 per million: $0.006.
fn priced_call(reply: Reply) -> Reply {
    reply.with_usage(1000, 200, 0, 0)
}

fn ledger_calls(env: &TestEnv) -> i64 {
    let c = Connection::open(env.project().join(".crush").join("crush.db")).unwrap();
    c.query_row("SELECT COUNT(*) FROM usage", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn max_cost_stops_after_the_call_that_crosses_it() {
    let server = FakeServer::with_script(vec![
        priced_call(Reply::tool_call("ls", json!({}))),
        priced_call(Reply::tool_call("ls", json!({}))),
    ]);
    // A third call would find the script empty, and the count below would show it.
    server.expect_exhaustion();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::OpenAi);
    let out = env.run(&["run", "-q", "--max-cost", "0.01", "list it"], None);
    out.assert_code(4);
    // $0.006, then $0.012: the third call would start over the $0.01.
    assert_eq!(server.model_requests().len(), 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("budget reached: this run has spent $0.0120 of its $0.0100"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("model call 3"), "{}", out.stderr);
    assert!(out.stderr.contains("was saved"), "{}", out.stderr);
    assert_eq!(ledger_calls(&env), 2);

    // The same budget in the configuration; --max-cost overrides it.
    let server = FakeServer::with_script(vec![
        priced_call(Reply::tool_call("ls", json!({}))),
        priced_call(Reply::text("done")),
    ]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["options"] = json!({"max_cost": 0.001});
    env.write_config(&cfg);
    env.run(&["run", "-q", "list it"], None).assert_code(4);
    assert_eq!(server.model_requests().len(), 1);
    let out = env.run(&["run", "-q", "--max-cost", "1", "list it"], None);
    out.assert_success();
    assert_eq!(out.stdout, "done\n");
}

#[test]
fn a_sub_agents_spend_counts_against_the_parents_budget() {
    let server = FakeServer::with_script(vec![
        priced_call(Reply::tool_call(
            "agent",
            json!({"prompt": "Find the parser."}),
        )),
        // The sub-agent.
        priced_call(Reply::tool_call("ls", json!({}))),
        priced_call(Reply::text("In src/parse.rs.")),
    ]);
    // The parent's next call is never sent.
    server.expect_exhaustion();
    let env = TestEnv::new();
    env.use_server(&server, Dialect::Anthropic);
    let out = env.run(&["run", "-q", "--max-cost", "0.015", "where?"], None);
    out.assert_code(4);
    // The parent spent $0.006 itself; its sub-agent's $0.012 makes $0.018.
    assert_eq!(server.model_requests().len(), 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("$0.0180 of its $0.0150"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_session_over_its_limit_is_not_resumed() {
    let server = FakeServer::with_script(vec![
        priced_call(Reply::text("first")),
        priced_call(Reply::text("a new session")),
    ]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["options"] = json!({"max_session_cost": 0.005});
    env.write_config(&cfg);
    let first = env.run(&["run", "-q", "--json", "hello"], None);
    first.assert_success();
    let sid = first.stdout_line("{\"type\":\"session\"");
    let sid: serde_json::Value = serde_json::from_str(&sid).unwrap();
    let sid = sid["session_id"].as_str().unwrap().to_string();

    let again = env.run(&["run", "-q", "-s", &sid, "go on"], None);
    again.assert_code(4);
    assert_eq!(server.model_requests().len(), 1, "refused before the call");
    assert!(
        again
            .stderr
            .contains("this session has spent $0.0060 of its $0.0050 (options.max_session_cost)"),
        "{}",
        again.stderr
    );
    // Another session starts from nothing.
    env.run(&["run", "-q", "hello"], None).assert_success();
    assert_eq!(server.model_requests().len(), 2);
}

#[test]
fn an_unpriced_model_under_a_budget_needs_consent() {
    let server = FakeServer::with_script(vec![Reply::text("ok").with_usage(10, 1, 0, 0)]);
    let env = TestEnv::new();
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    let m = cfg["providers"]["fake"]["models"][0]
        .as_object_mut()
        .unwrap();
    m.remove("cost_per_1m_in");
    m.remove("cost_per_1m_out");
    env.write_config(&cfg);
    let out = env.run(&["run", "-q", "--max-cost", "1", "hi"], None);
    out.assert_code(4);
    assert_eq!(server.model_requests().len(), 0);
    assert!(
        out.stderr.contains("fake/fake-model has no price")
            && out.stderr.contains("--max-cost-unpriced allow"),
        "{}",
        out.stderr
    );
    let out = env.run(
        &[
            "run",
            "-q",
            "--max-cost",
            "1",
            "--max-cost-unpriced",
            "allow",
            "hi",
        ],
        None,
    );
    out.assert_success();
    assert_eq!(out.stdout, "ok\n");
    // Without a budget nothing is asked.
    server.push(Reply::text("ok"));
    env.run(&["run", "-q", "hi"], None).assert_success();
}

#[test]
fn a_limit_that_is_not_dollars_is_a_usage_error() {
    let server = FakeServer::with_script(vec![]);
    let env = TestEnv::new();
    for bad in ["-1", "NaN", "inf", "five"] {
        let out = env.run(&["run", "--max-cost", bad, "hi"], None);
        out.assert_code(2);
        assert!(
            out.stderr.contains("--max-cost takes"),
            "{bad}: {}",
            out.stderr
        );
    }
    let out = env.run(&["run", "--max-cost-unpriced", "maybe", "hi"], None);
    out.assert_code(2);
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["options"] = json!({"max_session_cost": -2});
    env.write_config(&cfg);
    let out = env.run(&["run", "hi"], None);
    out.assert_code(2);
    assert!(
        out.stderr.contains("crush.json:")
            && out
                .stderr
                .contains("options.max_session_cost must be a number of US dollars"),
        "{}",
        out.stderr
    );
    assert_eq!(server.model_requests().len(), 0);
}

#[test]
fn the_repl_asks_before_going_over_the_budget() {
    let (server, env) = super::repl::setup(vec![
        priced_call(Reply::text("one")),
        priced_call(Reply::text("three")),
    ]);
    let mut cfg = env.config_for(&server, Dialect::OpenAi);
    cfg["options"] = json!({"max_cost": 0.005});
    env.write_config(&cfg);
    // "first" spends $0.006 (and its title a little); "second" would start over the $0.005:
    // no, so nothing is sent; "third": yes, so its call is made.
    let out = env.run(&[], Some("first\nsecond\nn\nthird\ny\n"));
    out.assert_success();
    let asked = out
        .stderr
        .matches("Budget reached: this REPL's run")
        .count();
    assert_eq!(asked, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "of its $0.0050 (--max-cost / options.max_cost); model call 1 of the turn was not made"
        ),
        "{}",
        out.stderr
    );
    let turns = super::repl::turns(&server);
    let last_texts: Vec<String> = turns
        .iter()
        .map(|r| r.user_texts().last().cloned().unwrap_or_default())
        .collect();
    assert_eq!(last_texts, ["first", "third"], "{}", out.stderr);
    assert_eq!(out.stdout, "one\nthree\n");
}
